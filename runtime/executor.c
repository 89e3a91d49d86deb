/* The executor of a real machine (runtime/executor.h): each device's
 * worker thread runs its tasks; waiting needs nothing but the condition
 * variables; copies take the time they take. */
#include "runtime/executor.h"
#include "runtime/runtime.h"
#include "runtime/worker.h"

static double wall_now(const hx_runtime *rt)
{
    (void)rt;
    return hx_now();
}

static hx_status workers_advance(hx_runtime *rt)
{
    (void)rt;
    return HX_OK;
}

static void measured_copy(hx_runtime *rt, int node, size_t bytes, double *t0, double *t1)
{
    (void)rt, (void)node, (void)bytes, (void)t0;
    *t1 = hx_now();
}

static hx_status workers_start(hx_runtime *rt, const char *perfmodel_dir)
{
    (void)perfmodel_dir;
    for (int d = 0; d < rt->ndevices; d++) {
        hx_status s = hx_worker_start(rt->devices[d]);
        if (s)
            return s;
    }
    return HX_OK;
}

static void nothing_to_close(hx_runtime *rt) { (void)rt; }

const hx_executor hx_executor_threads = {
    .now = wall_now,
    .advance = workers_advance,
    .copy_span = measured_copy,
    .start = workers_start,
    .close = nothing_to_close,
    .runs_graphs = 1,
};
