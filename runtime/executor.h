/* How the runtime's tasks advance, and on which clock.  A real machine's
 * devices run their tasks on worker threads against the wall clock
 * (runtime/executor.c); a simulated machine's backend runs them on the
 * thread that waits for them, in virtual time (runtime/sim.c).  The
 * backends that discover the devices set the executor; buffers, tasks and
 * the runtime call it the same way in both cases and never ask which.
 * Internal. */
#ifndef HX_RUNTIME_EXECUTOR_H
#define HX_RUNTIME_EXECUTOR_H

#include <stddef.h>

#include "hetero.h"

typedef struct {
    /* The runtime's clock, seconds. */
    double (*now)(const hx_runtime *rt);
    /* Runs what the waiting thread must run before it waits for a task,
     * a buffer or the whole runtime: nothing where workers run the tasks;
     * the simulator's event loop, until every submitted task completed (an
     * error when some cannot). */
    hx_status (*advance)(hx_runtime *rt);
    /* A copy of `bytes` between host memory and `node` began at *t0 and
     * has just been made: sets its span on the runtime's clock. */
    void (*copy_span)(hx_runtime *rt, int node, size_t bytes, double *t0, double *t1);
    /* After device selection, with the performance models open: readies
     * every device's worker state (and the threads, where there are). */
    hx_status (*start)(hx_runtime *rt, const char *perfmodel_dir);
    /* Frees the executor's state (after the devices are gone). */
    void (*close)(hx_runtime *rt);
    /* Host storage of a buffer is made when the host first uses it,
     * zeroed, rather than when it is created: a simulated machine's
     * weights and KV cache are sizes, not memory. */
    int host_storage_on_demand;
    /* Its workers run a recorded task graph as one task (task.c's graph
     * launch); where it is 0 every task goes on its own. */
    int runs_graphs;
    int simulated; /* hx_runtime_simulated's answer to the application */
} hx_executor;

/* Worker threads on the wall clock: every runtime's, until a backend
 * sets another. */
extern const hx_executor hx_executor_threads;

#endif
