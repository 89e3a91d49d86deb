/* The simulator: one more backend, whose devices come from a machine
 * description and whose tasks do not run, and the executor that advances
 * them in virtual time (runtime/executor.h).  The runtime opens it in
 * place of the real backends when hx_runtime_options.machine names a
 * description.  A discrete-event loop on the waiting thread (the
 * executor's advance) pops ready tasks through the same scheduler and
 * policies as a real run,
 * moves buffers through the same coherence protocol (copies cost the
 * description's link time, nothing is copied), times each task by the
 * device's roofline (or this host's measured models), and completes it
 * at that virtual time: successors, statistics, performance models and
 * the trace follow as they would.  Internal. */
#ifndef HX_RUNTIME_SIM_H
#define HX_RUNTIME_SIM_H

#include "runtime/machine.h"
#include "runtime/runtime.h"

/* The backend of the described devices (runtime/sim_device.c): its
 * discover loads hx_discover_options.machine, adds the devices and sets
 * the runtime's executor to the simulator's. */
extern const hx_device_ops hx_sim_backend;

/* Loads the description into a new simulator state, the runtime's
 * executor from then on (runtime/sim.c). */
hx_status hx_sim_open(hx_runtime *rt, const char *path);
const hx_machine *hx_sim_machine(const hx_runtime *rt);
/* Seconds a task of this cost takes on simulated device d, copies apart:
 * what the event loop will charge it (the roofline, or this host's
 * measured models for devices described with "times = measured"). */
double hx_sim_estimate(hx_runtime *rt, int d, const hx_codelet *cl, hx_precision p, double flops, double bytes);

/* Simulated devices (runtime/sim_device.c). */
hx_status hx_sim_device_add(hx_runtime *rt, const hx_machine_device *m, const char *machine_name);
const hx_machine_device *hx_sim_device_described(const hx_device *d);

#endif
