/* The simulator: a runtime whose devices come from a machine description
 * and whose tasks do not run.  A discrete-event loop on the waiting thread
 * pops ready tasks through the same scheduler and policies as a real run,
 * moves buffers through the same coherence protocol (copies cost the
 * description's link time, nothing is copied), times each task by the
 * device's roofline (or this host's measured models), and completes it
 * at that virtual time: successors, statistics, performance models and
 * the trace follow as they would.  Internal. */
#ifndef HX_RUNTIME_SIM_H
#define HX_RUNTIME_SIM_H

#include "runtime/machine.h"
#include "runtime/runtime.h"

typedef struct hx_sim hx_sim;

/* Loads the description and adds its devices to `rt` (in place of
 * discovery).  `perfmodel_dir` ("" = none) holds this host's measured
 * models, the times of devices described with "times = measured". */
hx_status hx_sim_open(hx_runtime *rt, const char *path, const char *perfmodel_dir);
void hx_sim_close(hx_runtime *rt);

/* Runs the event loop until every submitted task has completed. */
hx_status hx_sim_drain(hx_runtime *rt);
double hx_sim_now(const hx_sim *sim);
/* A copy between host memory and `node` of `bytes` is being made now: its
 * simulated start, and its end (the device's next task waits for it). */
void hx_sim_copy(hx_runtime *rt, int node, size_t bytes, double *t0, double *t1);

/* After device selection: the devices' counters, and the measured models. */
hx_status hx_sim_start(hx_runtime *rt, const char *perfmodel_dir);

/* Simulated devices (runtime/sim_device.c). */
hx_status hx_sim_device_add(hx_runtime *rt, const hx_machine_device *m, const char *machine_name);
const hx_machine_device *hx_sim_device_described(const hx_device *d);

#endif
