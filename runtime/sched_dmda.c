/* dmda (StarPU's "deque model data aware"): a ready task goes to the
 * device where it is expected to finish first:
 *     now + backlog(d) + transfer(task's inputs not valid on d's node)
 *         + perf model estimate(codelet, d, size).
 * A device without a measurement for the task's size (and no regression to
 * stand in) is given the task to measure it, a few at a time.  The
 * partitioner's preference breaks near ties.
 *
 * Load-aware migration: predictions go stale (a device slows down, an
 * estimate was wrong).  A device that runs dry pulls queued tasks from the
 * device with the longest predicted backlog when that backlog exceeds its
 * own by HX_MIGRATE_THRESHOLD_S and the task would finish sooner here.
 *
 * Shared cores: the CPU device and an OpenCL device running on the same
 * host cores (PoCL, also as an emulated FPGA) are one pool of cores, not
 * two devices in parallel: while one computes, the other computes slower.
 * So a task placed on either waits for the backlog of the whole pool, and
 * between two devices of a pool the one that runs the task fastest wins;
 * a device on its own silicon (a GPU, a real FPGA) still runs in parallel
 * with the pool.  Within a pool a task moves later only to a device that
 * runs it faster, or away from a device whose running task has stalled
 * past its estimate (a stall holds the device, not the cores). */
#include <math.h>

#include "runtime/buffer.h"
#include "runtime/perfmodel.h"
#include "runtime/runtime.h"
#include "runtime/sched.h"
#include "runtime/sched_cores.h"
#include "runtime/task.h"

#define HX_MIGRATE_THRESHOLD_S 200e-6
/* Tasks in flight at once to calibrate one device. */
#define HX_CALIBRATION_TASKS 2
/* Completion times within this fraction count as a tie. */
#define HX_TIE 0.05

/* Seconds to bring the task's inputs to device d's memory node.
 *
 * A read-only buffer (weights) is copied once and then read in place for
 * as long as the model runs: its copy is an investment, not a cost of this
 * task.  Charging it whole to every task that could start the move keeps
 * the weights where they are forever (a GPU with 20x the bandwidth never
 * gets them: StarPU's dmda has the same blind spot).  Its copy is charged
 * over the reads the buffer has had so far, the best guess of the reads to
 * come: the first token pays it whole, a weight read by a hundred tokens
 * moves for a hundredth of it.  `steady`: read-only inputs cost nothing
 * (whether a device is worth measuring is a question about the tokens to
 * come, not about the first copy). */
static double transfer_time(hx_sched *s, const hx_task *t, int d, int steady)
{
    hx_device *dev = s->rt->devices[d];
    int node = dev->info.memory_node;
    if (node == 0 && dev->info.unified_memory)
        return 0; /* host memory: inputs are read in place */
    double sec = 0;
    for (int i = 0; i < t->desc.nbuffers; i++) {
        if (!(t->desc.modes[i] & HX_R))
            continue;
        hx_buffer *b = t->desc.buffers[i];
        pthread_mutex_lock(&b->lock);
        uint64_t reads = b->reads;
        int read_only = b->read_only;
        pthread_mutex_unlock(&b->lock);
        double from_host, from_device;
        hx_buffer_stale_bytes(b, node, hx_task_blocks(t), &from_host, &from_device);
        if ((from_host == 0 && from_device == 0) || (steady && read_only))
            continue;
        /* A block another device holds crosses twice (through host memory). */
        double copy = (from_host > 0 ? hx_perfmodel_bus_estimate(s->pm, node, (size_t)from_host) : 0) +
                      (from_device > 0 ? 2 * hx_perfmodel_bus_estimate(s->pm, node, (size_t)from_device) : 0);
        sec += read_only && reads > 1 ? copy / (double)reads : copy;
    }
    return sec;
}

/* The estimate of `t` on `d`: 1 with *sec set, 0 when unknown. */
static int estimate(hx_sched *s, hx_task *t, int d, double *sec)
{
    double f, b;
    hx_task_cost(t, &f, &b);
    return hx_perfmodel_estimate(s->pm, t->desc.codelet, d, f, b, sec) != 0;
}

/* Sum of the backlogs of the devices in `mask`. */
static double backlog_of(const double *backlog, int n, uint32_t mask)
{
    double b = 0;
    for (int d = 0; d < n; d++)
        if (mask & (1u << d))
            b += backlog[d];
    return b;
}

/* How long the running task of d has overrun its estimate: a stall that
 * holds the device but not, as far as we know, the cores. */
static double stall(const hx_sched *s, int d, double now)
{
    const hx_sched_dev *dv = &s->dev[d];
    if (!dv->running)
        return 0;
    double left = dv->running_expected * dv->slowness - (now - dv->running_start);
    return left < 0 ? -left : 0;
}

/* When d has no estimate for t's size: the estimate for the nearest
 * smaller size it has measured, up to 16x smaller, a lower bound since a
 * larger task of the same codelet does not run faster.  1 with *sec set. */
static int lower_bound(hx_sched *s, hx_task *t, int d, double *sec)
{
    double f, b;
    hx_task_cost(t, &f, &b);
    for (int k = 1; k <= 16; k++) {
        double scale = exp2(-k / 4.0); /* the perf model's quarter octaves */
        if (hx_perfmodel_estimate(s->pm, t->desc.codelet, d, f * scale, b * scale, sec))
            return 1;
    }
    return 0;
}

static int dmda_push(hx_sched *s, hx_task *t)
{
    uint32_t el = hx_sched_eligible(s, t);
    double now = hx_runtime_now(s->rt);
    int n = s->rt->ndevices;
    double backlog[HX_MAX_DEVICES];
    for (int d = 0; d < n; d++)
        backlog[d] = hx_sched_backlog(s, d, now);
    int best = -1, best_pref = 0;
    uint32_t best_cores = 0;
    double best_fin = 0, best_exec = 0;
    /* Devices to calibrate, and for those with a lower bound (bounded)
     * the earliest they could finish. */
    uint32_t uncalibrated = 0, bounded = 0;
    double least[HX_MAX_DEVICES];
    t->calibrating = 0;
    for (int d = 0; d < n; d++) {
        if (!(el & (1u << d)))
            continue;
        double exec;
        uint32_t cores = hx_sched_cores_mask(s->rt, d);
        if (!estimate(s, t, d, &exec)) {
            if (s->dev[d].calibrating + s->dev[d].running_calibrating < HX_CALIBRATION_TASKS) {
                uncalibrated |= 1u << d;
                if (lower_bound(s, t, d, &exec)) {
                    bounded |= 1u << d;
                    least[d] = backlog_of(backlog, n, cores) + transfer_time(s, t, d, 1) + exec;
                }
            }
            continue;
        }
        /* Relative to now: the tie margin is a fraction of the wait, less
         * the backlog both candidates wait for (a shared pool's), which
         * does not tell them apart. */
        double fin = backlog_of(backlog, n, cores) + transfer_time(s, t, d, 0) + exec;
        double common = best < 0 ? 0 : backlog_of(backlog, n, cores & best_cores);
        double a = fin - common, b = best_fin - common;
        int pref = (t->desc.prefer >> d) & 1;
        int better = best < 0 || a < b * (1 - HX_TIE) ||
                     (a <= b * (1 + HX_TIE) && (pref > best_pref || (pref == best_pref && a < b)));
        if (better) {
            best = d;
            best_fin = fin;
            best_exec = exec;
            best_pref = pref;
            best_cores = cores;
        }
    }
    /* Measuring a device is worth a task only when it might win: on a
     * device sharing the cores, or on the critical path, a task sent to
     * a device far too slow stalls everything else. */
    int explore = -1;
    for (int d = 0; d < n && explore < 0; d++)
        if ((uncalibrated & (1u << d)) && (best < 0 || !(bounded & (1u << d)) || least[d] < best_fin))
            explore = d;
    if (explore >= 0) {
        t->calibrating = 1;
        t->expected = 0;
        hx_sched_enqueue(s, explore, t);
        return explore;
    }
    if (best < 0) {
        /* Every capable device is uncalibrated and busy calibrating. */
        uint32_t pref = el & t->desc.prefer;
        best = hx_sched_least_loaded(s, pref ? pref : el);
        best_exec = 0;
    }
    t->expected = best_exec;
    hx_sched_enqueue(s, best, t);
    /* Also a device sharing best's cores: it pulls nothing from a queue
     * that is merely long, but once awake it looks again every
     * HX_REBALANCE_S, which is how it finds best stalled. */
    s->wake_helper = hx_sched_backlog(s, best, now) > HX_MIGRATE_THRESHOLD_S + best_exec;
    return best;
}

/* An idle device pulls work from the most backlogged one. */
static hx_task *pull(hx_sched *s, int me)
{
    double now = hx_runtime_now(s->rt);
    double mine = hx_sched_backlog(s, me, now);
    int victim = -1;
    double vb = 0;
    for (int v = 0; v < s->rt->ndevices; v++) {
        if (v == me || !s->dev[v].depth)
            continue;
        double b = hx_sched_backlog(s, v, now);
        if (victim < 0 || b > vb) {
            victim = v;
            vb = b;
        }
    }
    if (victim < 0 || vb - mine <= HX_MIGRATE_THRESHOLD_S)
        return NULL;
    int n = s->rt->ndevices;
    uint32_t cores = hx_sched_cores_mask(s->rt, me);
    int shared = (cores >> victim) & 1;
    double here = 0, there = 0, stalled = 0;
    if (shared) {
        stalled = stall(s, victim, now);
    } else {
        double backlog[HX_MAX_DEVICES];
        for (int d = 0; d < n; d++)
            backlog[d] = hx_sched_backlog(s, d, now);
        here = backlog_of(backlog, n, cores);
        there = backlog_of(backlog, n, hx_sched_cores_mask(s->rt, victim));
    }
    uint32_t bit = 1u << me;
    for (hx_task *t = s->dev[victim].tail; t; t = t->prev) {
        if (!(hx_sched_eligible(s, t) & bit))
            continue;
        double exec;
        if (!estimate(s, t, me, &exec))
            continue;
        double cost = transfer_time(s, t, me, 0) + exec;
        /* The same cores would run it either way: it moves only when it
         * runs faster here, or when the victim is stalled. */
        if (shared ? cost >= t->expected * s->dev[victim].slowness + stalled : here + cost >= there)
            continue;
        hx_sched_dequeue(s, t);
        t->expected = exec;
        t->calibrating = 0; /* it has an estimate here */
        hx_sched_note_migration(s, t, victim, me, "rebalanced");
        return t;
    }
    return NULL;
}

static hx_task *dmda_pop(hx_sched *s, hx_device *dev)
{
    int me = dev->info.index;
    hx_task *t = s->dev[me].head;
    if (t) {
        hx_sched_dequeue(s, t);
        return t;
    }
    return pull(s, me);
}

const hx_sched_policy hx_sched_dmda = {
    .name = "dmda", .rebalances = 1, .push = dmda_push, .pop = dmda_pop, .drain = hx_sched_drain_queues,
};
