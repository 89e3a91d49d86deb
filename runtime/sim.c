/* The simulator's executor (see sim.h and runtime/executor.h): its event
 * loop, virtual clock and copy times.  One task runs on a device at a
 * time, as with a real worker; the next event is always the earliest end
 * of a running task, so the loop is a scan over at most HX_MAX_DEVICES. */
#include <stdlib.h>
#include <string.h>

#include "runtime/buffer.h"
#include "runtime/error.h"
#include "runtime/perfmodel.h"
#include "runtime/sched_cores.h"
#include "runtime/sim.h"
#include "runtime/task.h"
#include "runtime/trace.h"
#include "runtime/worker.h"

typedef struct {
    hx_task *task;          /* NULL when idle */
    double start, run, end; /* copies from start to run, the kernel to end */
} sim_slot;

typedef struct hx_sim {
    hx_machine machine;
    pthread_mutex_t lock;   /* one drain at a time */
    double now;
    double copies_end;      /* the copies of the task being started end here */
    sim_slot slot[HX_MAX_DEVICES];
    hx_perfmodel *measured; /* this host's models, read only (times = measured) */
} hx_sim;

static hx_sim *sim_of(const hx_runtime *rt) { return rt->executor_state; }

static double sim_now(const hx_runtime *rt) { return sim_of(rt)->now; }

static const hx_executor sim_executor;

hx_status hx_sim_open(hx_runtime *rt, const char *path)
{
    hx_sim *sim = calloc(1, sizeof *sim);
    if (!sim)
        return hx_error(HX_ERR_NO_MEMORY, "simulator");
    hx_status s = hx_machine_load(path, &sim->machine);
    if (s) {
        free(sim);
        return s;
    }
    pthread_mutex_init(&sim->lock, NULL);
    rt->executor = &sim_executor;
    rt->executor_state = sim;
    return HX_OK;
}

const hx_machine *hx_sim_machine(const hx_runtime *rt) { return &sim_of(rt)->machine; }

/* The described device behind runtime device d, the simulator's own copy. */
static hx_machine_device *described(hx_runtime *rt, int d)
{
    hx_sim *sim = sim_of(rt);
    return &sim->machine.dev[hx_sim_device_described(rt->devices[d]) - sim->machine.dev];
}

/* After the device table is final (selection may drop devices): the
 * measured models, and from them the launch times described as measured. */
static hx_status open_measured(hx_runtime *rt, const char *dir)
{
    int any = 0;
    for (int d = 0; d < rt->ndevices; d++)
        any |= described(rt, d)->measured || described(rt, d)->launch_measured;
    if (!any)
        return HX_OK;
    if (!dir || !*dir)
        return hx_error(HX_ERR_INVALID_ARG, "the machine has devices with times or launch measured but the "
                                            "performance models are off (perfmodel_dir)");
    hx_status s = hx_runtime_perfmodels_open(rt, dir, &sim_of(rt)->measured);
    if (s)
        return s;
    hx_perfmodel_read_only(sim_of(rt)->measured);
    for (int d = 0; d < rt->ndevices; d++) {
        double sec;
        hx_machine_device *m = described(rt, d);
        if (m->launch_measured &&
            hx_perfmodel_estimate(sim_of(rt)->measured, &hx_launch_codelet, d, 0, 0, &sec) && sec >= 0)
            m->launch = sec;
    }
    return HX_OK;
}

/* After device selection: the devices' counters, and the measured models.
 * `perfmodel_dir` ("" = none) holds this host's measured models, the
 * times of devices described with "times = measured". */
static hx_status sim_start(hx_runtime *rt, const char *perfmodel_dir)
{
    for (int d = 0; d < rt->ndevices; d++) {
        hx_status s = hx_worker_init(rt->devices[d], sim_now(rt));
        if (s)
            return s;
    }
    /* A simulated run teaches the scheduler's models nothing about this
     * host: they may start from what is saved, but are never saved. */
    if (rt->sched.pm)
        hx_perfmodel_read_only(rt->sched.pm);
    return open_measured(rt, perfmodel_dir);
}

static void sim_close(hx_runtime *rt)
{
    hx_sim *sim = sim_of(rt);
    hx_perfmodel_close(sim->measured);
    pthread_mutex_destroy(&sim->lock);
    free(sim);
    rt->executor_state = NULL;
}

/* A copy between host memory and `node` of `bytes` is being made now: its
 * simulated start, and its end (the device's next task waits for it). */
static void sim_copy(hx_runtime *rt, int node, size_t bytes, double *t0, double *t1)
{
    hx_sim *sim = sim_of(rt);
    double sec = 0;
    for (int d = 0; d < rt->ndevices; d++)
        if (rt->devices[d]->info.memory_node == node)
            sec = hx_machine_link_time(hx_sim_device_described(rt->devices[d]), (double)bytes);
    *t0 = sim->copies_end;
    *t1 = sim->copies_end += sec;
}

double hx_sim_estimate(hx_runtime *rt, int d, const hx_codelet *cl, hx_precision p, double flops, double bytes)
{
    const hx_machine_device *m = hx_sim_device_described(rt->devices[d]);
    double sec;
    if (m->measured && sim_of(rt)->measured && hx_perfmodel_estimate(sim_of(rt)->measured, cl, d, flops, bytes, &sec) &&
        sec > 0)
        return m->launch + sec; /* a worker's time between its tasks is not in its measurements */
    return hx_machine_roofline(m, p, flops, bytes);
}

/* How long a task of this descriptor takes on the device, copies apart. */
static double desc_seconds(hx_runtime *rt, int d, const hx_task_desc *desc, double flops, double bytes)
{
    hx_precision p = HX_PREC_F32;
    if (desc->codelet->precision) {
        size_t sizes[HX_TASK_MAX_BUFFERS] = {0};
        for (int i = 0; i < desc->nbuffers; i++)
            sizes[i] = desc->buffers[i]->size;
        p = desc->codelet->precision(desc->args, sizes);
    }
    return hx_sim_estimate(rt, d, desc->codelet, p, flops, bytes);
}

/* A graph launch (task.h) is one task to its worker: its tasks' times,
 * and one launch for them all, as the worker runs them back to back. */
static double graph_seconds(hx_runtime *rt, int d, const hx_graph_args *g)
{
    const double launch = hx_sim_device_described(rt->devices[d])->launch;
    double sec = launch;
    for (size_t i = 0; i < g->n; i++)
        sec += desc_seconds(rt, d, &g->r[i].desc, g->r[i].flops, g->r[i].bytes) - launch;
    return sec;
}

static double task_seconds(hx_runtime *rt, int d, hx_task *t)
{
    if (t->desc.codelet == &hx_graph_codelet)
        return graph_seconds(rt, d, t->desc.args);
    double flops, bytes;
    hx_task_cost(t, &flops, &bytes);
    return desc_seconds(rt, d, &t->desc, flops, bytes);
}

/* Devices that compute on the same cores (PoCL on this host's CPU) take
 * turns: the rule dmda plans with (sched_cores.c) is the one simulated. */
static int cores_busy(hx_runtime *rt, int d)
{
    for (int e = 0; e < rt->ndevices; e++)
        if (e != d && sim_of(rt)->slot[e].task &&
            hx_sched_cores_shared(&rt->devices[d]->info, &rt->devices[e]->info))
            return 1;
    return 0;
}

/* The descriptor of part k of a task: the task itself, or a graph
 * launch's k-th recorded task.  A graph's buffers are handled only beside
 * other devices, as the worker does (prepare_in_host). */
static size_t nparts(hx_runtime *rt, const hx_task *t)
{
    if (t->desc.codelet != &hx_graph_codelet)
        return 1;
    return rt->ndevices > 1 ? ((const hx_graph_args *)t->desc.args)->n : 0;
}

static const hx_task_desc *part(hx_task *t, size_t k, hx_block_list *blocks)
{
    if (t->desc.codelet != &hx_graph_codelet) {
        *blocks = hx_task_blocks(t);
        return &t->desc;
    }
    const hx_task_desc *desc = &((const hx_graph_args *)t->desc.args)->r[k].desc;
    *blocks = (hx_block_list){desc->blocks, desc->nblocks};
    return desc;
}

/* Starts the device's next task, if the scheduler has one for it.
 * Returns 1 when the device is busy now. */
static int start_next(hx_runtime *rt, int d)
{
    hx_sim *sim = sim_of(rt);
    hx_device *dev = rt->devices[d];
    hx_worker *w = dev->worker;
    for (;;) {
        hx_task *t = hx_sched_try_pop(&rt->sched, dev);
        if (!t)
            return 0;
        if (t->doomed) {
            hx_task_complete(rt, t, HX_ERR_NO_DEVICE, "no device in service can run it");
            continue;
        }
        if (t->dep_failed) {
            hx_task_complete(rt, t, HX_ERR_TASK_FAILED, t->msg ? t->msg : "a task it depends on failed");
            continue;
        }
        t->device = d;
        t->attempts++;
        t->t_start = sim->now;
        hx_inject_draw inj = hx_inject_next(&w->inject);
        hx_status s = inj.risky ? hx_error(HX_ERR_UNSUPPORTED, "injected failures are not simulated (slowdowns are)")
                                : HX_OK;
        sim->copies_end = sim->now;
        for (size_t k = 0, n = nparts(rt, t); k < n && s == HX_OK; k++) {
            hx_block_list blocks;
            const hx_task_desc *desc = part(t, k, &blocks);
            for (int i = 0; i < desc->nbuffers && s == HX_OK; i++) {
                void *handle;
                s = hx_buffer_prepare(desc->buffers[i], dev, desc->modes[i], blocks, &handle);
            }
        }
        if (s) {
            hx_sched_finished(&rt->sched, d, NULL);
            hx_task_complete(rt, t, s, hx_last_error());
            continue;
        }
        sim->slot[d].task = t;
        sim->slot[d].start = sim->now;
        sim->slot[d].run = sim->copies_end;
        sim->slot[d].end = sim->copies_end + task_seconds(rt, d, t) * inj.slow;
        return 1;
    }
}

static void finish(hx_runtime *rt, int d)
{
    hx_sim *sim = sim_of(rt);
    hx_device *dev = rt->devices[d];
    hx_worker *w = dev->worker;
    sim_slot *sl = &sim->slot[d];
    hx_task *t = sl->task;
    sl->task = NULL;
    hx_status s = HX_OK;
    const int graph = t->desc.codelet == &hx_graph_codelet;
    for (size_t k = 0, n = nparts(rt, t); k < n; k++) {
        hx_block_list blocks;
        const hx_task_desc *desc = part(t, k, &blocks);
        for (int i = 0; i < desc->nbuffers; i++)
            if (desc->modes[i] & HX_W) {
                hx_status si = hx_buffer_written(desc->buffers[i], dev, blocks);
                s = s ? s : si;
            }
    }
    t->t_end = sl->end;
    double sec = sl->end - sl->start, flops, bytes;
    size_t tasks = graph ? ((const hx_graph_args *)t->desc.args)->n : 1;
    atomic_fetch_add(&w->tasks, tasks);
    atomic_fetch_add(&rt->stats.done, tasks - 1); /* the graph task itself counts when it completes */
    atomic_fetch_add(&w->busy_ns, (uint64_t)(sec * 1e9));
    hx_task_cost(t, &flops, &bytes);
    hx_monitor_task(&w->monitor, sl->start, sl->end, t->desc.codelet->flops ? flops : 0);
    hx_trace_task(rt, t, d, sl->start, sl->end, s == HX_OK);
    if (rt->sched.pm && !graph) {
        /* As a real worker: the kernel's time, copies apart. */
        double run = sl->end - sl->run;
        hx_perfmodel_record_run(rt->sched.pm, t->desc.codelet, d, flops, bytes, run);
        hx_sched_done done = {1, t->expected, run};
        hx_sched_finished(&rt->sched, d, &done);
    } else {
        hx_sched_finished(&rt->sched, d, NULL);
    }
    hx_task_complete(rt, t, s, s ? hx_last_error() : NULL);
}

/* Runs the event loop until every submitted task has completed. */
static hx_status sim_drain(hx_runtime *rt)
{
    hx_sim *sim = sim_of(rt);
    pthread_mutex_lock(&sim->lock);
    for (;;) {
        for (int d = 0; d < rt->ndevices; d++)
            if (!sim->slot[d].task && !cores_busy(rt, d))
                start_next(rt, d);
        int next = -1;
        for (int d = 0; d < rt->ndevices; d++)
            if (sim->slot[d].task && (next < 0 || sim->slot[d].end < sim->slot[next].end))
                next = d;
        if (next < 0)
            break;
        sim->now = sim->slot[next].end;
        finish(rt, next);
    }
    pthread_mutex_lock(&rt->lock);
    uint64_t left = rt->inflight;
    pthread_mutex_unlock(&rt->lock);
    pthread_mutex_unlock(&sim->lock);
    if (left)
        return hx_error(HX_ERR_STATE, "simulation stalled with %llu tasks that no device took",
                        (unsigned long long)left);
    return HX_OK;
}

static const hx_executor sim_executor = {
    .now = sim_now,
    .advance = sim_drain,
    .copy_span = sim_copy,
    .start = sim_start,
    .close = sim_close,
    .host_storage_on_demand = 1,
    .simulated = 1,
    .runs_graphs = 1,
};
