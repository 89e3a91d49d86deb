/* Device workers.  A task runs in three steps (prepare its buffers on the
 * device's memory node, run, mark its outputs written there); around them
 * the worker applies injected slowdowns and failures, keeps the counters,
 * the load monitor, the performance model and the trace, and handles
 * failures: a task that failed with HX_ERR_DEVICE runs again elsewhere
 * when its buffers still hold what it started from, and a device that
 * keeps failing leaves service. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/buffer.h"
#include "runtime/error.h"
#include "runtime/perfmodel.h"
#include "runtime/task.h"
#include "runtime/trace.h"
#include "runtime/worker.h"

/* What a backend is given of the task but its buffers' handles. */
static hx_status exec_of(hx_device *d, const hx_task_desc *desc, double flops, double bytes, hx_exec *x)
{
    memset(x, 0, sizeof *x);
    x->codelet = hx_device_codelet(d, desc->codelet);
    x->op = hx_op_of(desc->codelet);
    if (!x->codelet)
        return hx_error(HX_ERR_UNSUPPORTED, "device %d has no implementation of '%s'", d->info.index,
                        desc->codelet->name);
    x->args = desc->args;
    x->flops = flops;
    x->bytes = bytes;
    x->nbuffers = desc->nbuffers;
    for (int i = 0; i < desc->nbuffers; i++) {
        const hx_buffer *b = desc->buffers[i];
        x->host[i] = b->host;
        x->sizes[i] = b->size;
        x->modes[i] = desc->modes[i];
        x->cpu_layouts[i] = b->cpu_layout;
    }
    return HX_OK;
}

/* The task's buffers made valid on d, their handles in x. */
static hx_status prepare_buffers(hx_device *d, const hx_task_desc *desc, hx_block_list blocks, hx_exec *x)
{
    hx_status s = HX_OK;
    /* Buffers holding block references last: translated for d under the
     * slots the task's blocks were given (buffer.h). */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < desc->nbuffers && s == HX_OK; i++) {
            hx_buffer *b = desc->buffers[i];
            if ((b->refs_space != NULL) != pass)
                continue;
            s = hx_buffer_prepare(b, d, desc->modes[i], blocks, &x->handles[i]);
            x->host[i] = b->host; /* a simulated buffer's storage is made on its first use */
            x->sizes[i] = hx_buffer_device_bytes(b, d);
        }
    return s;
}

/* What the task wrote is d's, the other copies stale. */
static hx_status mark_written(hx_device *d, const hx_task_desc *desc, hx_block_list blocks)
{
    hx_status first = HX_OK;
    for (int i = 0; i < desc->nbuffers; i++) {
        if (!(desc->modes[i] & HX_W))
            continue;
        hx_status s = hx_buffer_written(desc->buffers[i], d, blocks);
        if (s && !first)
            first = s;
    }
    return first;
}

/* What the task waited outside its kernel (perfmodel.h): from the later of
 * its hand-over to the scheduler and its device's last kernel ending, to
 * its kernel starting (`run`); the wake-up, the scheduler's pop, and on a
 * device in host memory its buffers' preparation, which is no copy there
 * (elsewhere copies are the bus model's, so preparation is left out). */
static void note_launch(hx_device *d, const hx_task *t, double t0, double run)
{
    hx_worker *w = d->worker;
    hx_perfmodel *pm = d->rt->sched.pm;
    double from = t->t_ready > w->last_end ? t->t_ready : w->last_end;
    double sec = (d->info.memory_node == 0 ? run : t0) - from;
    if (!pm || !(sec >= 0))
        return;
    w->launch_sum += sec;
    if (++w->launch_n == HX_PM_LAUNCH_BATCH) {
        hx_perfmodel_record_run(pm, &hx_launch_codelet, d->info.index, 0, 0, w->launch_sum / w->launch_n);
        w->launch_sum = 0;
        w->launch_n = 0;
    }
}

static hx_status prepare(hx_device *d, hx_task *t, hx_exec *x)
{
    double flops, bytes;
    hx_task_cost(t, &flops, &bytes);
    hx_status s = exec_of(d, &t->desc, flops, bytes, x);
    return s ? s : prepare_buffers(d, &t->desc, hx_task_blocks(t), x);
}

static hx_status finish(hx_device *d, hx_task *t) { return mark_written(d, &t->desc, hx_task_blocks(t)); }

/* Keeps the buffers a failure would corrupt and a retry reads: RW ones.
 * (W buffers are rewritten whole by the retry.) */
static void checkpoint(hx_device *d, hx_task *t, void **saved)
{
    for (int i = 0; i < t->desc.nbuffers; i++)
        if (t->desc.modes[i] == HX_RW && hx_buffer_checkpoint(t->desc.buffers[i], d, &saved[i]) != HX_OK)
            saved[i] = NULL; /* then a failure is final */
}

/* An injected failure is a device that wrote garbage before failing: the
 * recovery is tested against that, not against a failure that spared the
 * data. */
static void scribble(hx_device *d, hx_task *t)
{
    if (d->info.memory_node != 0)
        return;
    for (int i = 0; i < t->desc.nbuffers; i++)
        if (t->desc.modes[i] & HX_W)
            memset(t->desc.buffers[i]->host, 0xff, t->desc.buffers[i]->size / 2);
}

static void sleep_for(double sec)
{
    struct timespec ts = {(time_t)sec, (long)((sec - (double)(time_t)sec) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* The three parts, cut to fit. */
static void set_last_failure(hx_worker *w, const char *a, const char *b, const char *c)
{
    const char *part[3] = {a, b, c};
    pthread_mutex_lock(&w->msg_lock);
    size_t n = 0, cap = sizeof w->last_failure - 1;
    for (int i = 0; i < 3; i++) {
        size_t k = strnlen(part[i], cap - n);
        memcpy(w->last_failure + n, part[i], k);
        n += k;
    }
    w->last_failure[n] = '\0';
    pthread_mutex_unlock(&w->msg_lock);
}

/* Appends "dev N: what" to the task's history of failed attempts. */
static void remember(hx_task *t, const char *what)
{
    size_t old = t->msg ? strlen(t->msg) : 0, add = strlen(what);
    char *m = realloc(t->msg, old + add + 3);
    if (!m)
        return;
    if (old) {
        memcpy(m + old, "; ", 2);
        old += 2;
    }
    memcpy(m + old, what, add + 1);
    t->msg = m;
}

static void failed(hx_device *d, hx_task *t, hx_status s, void **saved)
{
    hx_runtime *rt = d->rt;
    hx_worker *w = d->worker;
    const int me = d->info.index;
    const char *name = t->desc.codelet->name ? t->desc.codelet->name : "(unnamed)";
    char err[1024];
    snprintf(err, sizeof err, "%s", hx_last_error()[0] ? hx_last_error() : hx_status_str(s));
    char what[1280];
    snprintf(what, sizeof what, "on device %d (%s): %s", me, d->info.name, err);
    atomic_fetch_add(&w->failures, 1);
    int device_fault = s == HX_ERR_DEVICE;
    if (device_fault)
        w->consecutive_failures++;
    char head[96];
    snprintf(head, sizeof head, "task '%.60s': ", name);
    set_last_failure(w, head, err, "");

    /* Put the buffers back as the task found them, where possible. */
    int intact = 1;
    for (int i = 0; i < t->desc.nbuffers; i++) {
        if (!(t->desc.modes[i] & HX_W))
            continue;
        int kept = hx_buffer_rollback(t->desc.buffers[i], d, saved[i]);
        saved[i] = NULL;
        if (t->desc.modes[i] == HX_RW && !kept)
            intact = 0;
    }

    if (device_fault && w->consecutive_failures >= HX_RETIRE_AFTER && !atomic_load(&w->retired) &&
        hx_sched_retire(&rt->sched, me)) {
        atomic_store(&w->retired, 1);
        atomic_fetch_add(&rt->stats.devices_retired, 1);
        char why[96];
        snprintf(why, sizeof why, "retired after %d consecutive failures; the last: ", w->consecutive_failures);
        set_last_failure(w, why, head, err);
        hx_trace_mark(rt, HX_TRACE_RETIRE, me, NULL);
    }

    remember(t, what);
    t->exclude |= 1u << me;
    int retry = device_fault && intact && t->desc.device < 0 && t->attempts < HX_MAX_ATTEMPTS;
    if (retry && !hx_sched_eligible(&rt->sched, t))
        t->exclude &= ~(1u << me); /* no other device: this one again, if still in service */
    if (retry && hx_sched_eligible(&rt->sched, t)) {
        atomic_fetch_add(&rt->stats.retries, 1);
        hx_trace_mark(rt, HX_TRACE_RETRY, me, t);
        t->t_ready = hx_runtime_now(rt);
        hx_sched_push(&rt->sched, t);
        return;
    }
    if (!intact && device_fault && t->desc.device < 0)
        remember(t, "not retried: a buffer it reads and writes was left half-written");
    hx_task_complete(rt, t, s, NULL);
}

/* A task of a graph launch, as prepare() readies one.  On a runtime of
 * one device working in host memory every buffer is there and its handle
 * is its host storage (hx_buffer_host_handle); beside other devices a
 * buffer's newest copy may be elsewhere, so each is prepared as for a
 * task alone (and marked written after it, in execute_graph). */
static hx_status prepare_in_host(hx_device *d, const hx_task_recorded *r, hx_exec *x)
{
    const hx_task_desc *desc = &r->desc;
    const hx_block_list blocks = {desc->blocks, desc->nblocks};
    hx_status s = exec_of(d, desc, r->flops, r->bytes, x);
    if (s || d->rt->ndevices > 1)
        return s ? s : prepare_buffers(d, desc, blocks, x);
    for (int i = 0; i < desc->nbuffers && s == HX_OK; i++)
        s = hx_buffer_host_handle(desc->buffers[i], blocks, &x->handles[i]);
    return s;
}

/* Runs a graph launch reports per hold of the performance model's and the
 * load monitor's locks. */
#define GRAPH_RUNS 64
/* The performance model learns from one launch in this many.  A decode
 * loop launches the same graph every step, and feeding every run of every
 * step cost more than the step's small tasks (1.7 % of a tiny model's
 * decode, in the model's sorted windows); one step in 8 still refreshes
 * every bucket's window many times a second.  The load monitor sees
 * every run. */
#define GRAPH_PM_EVERY 8

typedef struct {
    hx_pm_run run[GRAPH_RUNS];
    hx_monitor_span span[GRAPH_RUNS];
    size_t n;
    int feed_model;
} graph_runs;

static void report_runs(hx_device *d, graph_runs *g)
{
    hx_worker *w = d->worker;
    if (g->feed_model)
        hx_perfmodel_record_runs(d->rt->sched.pm, d->info.index, g->run, g->n);
    hx_monitor_tasks(&w->monitor, g->span, g->n);
    g->n = 0;
}

/* A graph launch (task.h): its tasks in order, each as execute() runs
 * one, less what a single device in host memory does not need (see
 * prepare_in_host; no placement or dependencies either: the order is
 * theirs), with the device's counters, load monitor and performance
 * model fed per task as before, a batch at a time.  The first failure
 * ends the graph as that task's own: its name and message are the
 * graph's, and the tasks after it count as failed, as the dependents of
 * a failed task do. */
static void execute_graph(hx_device *d, hx_task *t)
{
    hx_runtime *rt = d->rt;
    hx_worker *w = d->worker;
    const hx_graph_args *g = t->desc.args;
    graph_runs runs;
    runs.n = 0;
    runs.feed_model = w->graph_launches++ % GRAPH_PM_EVERY == 0;
    size_t i = 0;
    hx_status s = HX_OK;
    hx_error_clear();
    t->device = d->info.index;
    t->attempts++;
    const double t0 = hx_now();
    double prev = t0;
    t->t_start = t0;
    note_launch(d, t, t0, t0);
    for (; i < g->n; i++) {
        const hx_task_recorded *r = &g->r[i];
        hx_exec x;
        s = prepare_in_host(d, r, &x);
        if (s == HX_OK)
            s = d->ops->run(d, &x);
        if (s == HX_OK && rt->ndevices > 1)
            s = mark_written(d, &r->desc, (hx_block_list){r->desc.blocks, r->desc.nblocks});
        const double now = hx_now();
        if (s != HX_OK) { /* in the monitor, as a failed task is; not a measurement for the model */
            report_runs(d, &runs);
            hx_monitor_task(&w->monitor, prev, now, 0);
            break;
        }
        runs.run[runs.n] = (hx_pm_run){r->desc.codelet, r->flops, r->bytes, now - prev};
        runs.span[runs.n++] = (hx_monitor_span){prev, now, r->desc.codelet->flops ? r->flops : 0};
        prev = now;
        if (runs.n == GRAPH_RUNS)
            report_runs(d, &runs);
    }
    report_runs(d, &runs);
    const double t1 = hx_now();
    t->t_end = t1;
    w->last_end = t1;
    atomic_fetch_add(&w->tasks, i + (s != HX_OK));
    atomic_fetch_add(&w->busy_ns, (uint64_t)((t1 - t0) * 1e9));
    if (s != HX_OK) {
        void *saved[HX_TASK_MAX_BUFFERS] = {0};
        t->desc.codelet = g->r[i].desc.codelet;
        atomic_fetch_add(&rt->stats.done, i);
        atomic_fetch_add(&rt->stats.failed, g->n - i - 1);
        failed(d, t, s, saved);
        return;
    }
    w->consecutive_failures = 0;
    if (rt->sched.pm) {
        hx_sched_done done = {0};
        hx_sched_finished(&rt->sched, d->info.index, &done);
    }
    atomic_fetch_add(&rt->stats.done, g->n - 1);
    hx_task_complete(rt, t, HX_OK, NULL);
}

static void execute(hx_device *d, hx_task *t)
{
    hx_runtime *rt = d->rt;
    hx_worker *w = d->worker;
    if (t->doomed) {
        remember(t, "no device in service can run it");
        hx_task_complete(rt, t, HX_ERR_NO_DEVICE, NULL);
        return;
    }
    if (t->dep_failed) {
        hx_task_complete(rt, t, HX_ERR_TASK_FAILED, t->msg ? t->msg : "a task it depends on failed");
        return;
    }
    if (t->desc.codelet == &hx_graph_codelet) {
        execute_graph(d, t);
        return;
    }
    hx_inject_draw inj = hx_inject_next(&w->inject);
    void *saved[HX_TASK_MAX_BUFFERS] = {0};
    hx_exec x;
    hx_error_clear();
    t->device = d->info.index;
    t->attempts++;
    double t0 = hx_now();
    t->t_start = t0;
    hx_status s = prepare(d, t, &x);
    /* The performance model learns the kernel alone: copies are the bus
     * model's (dmda adds them for the inputs a device lacks), and a
     * weight's first copy must not make a device look slow for good. */
    double t_run = hx_now();
    note_launch(d, t, t0, t_run);
    if (s == HX_OK && (inj.risky || w->consecutive_failures > 0))
        checkpoint(d, t, saved);
    if (s == HX_OK)
        s = d->ops->run(d, &x);
    if (s == HX_OK && inj.fail) {
        scribble(d, t);
        s = hx_error(HX_ERR_DEVICE, "injected failure");
    }
    if (s == HX_OK)
        s = finish(d, t);
    double t1 = hx_now();
    if (inj.slow > 1) {
        sleep_for((inj.slow - 1) * (t1 - t0));
        t1 = hx_now();
    }
    t->t_end = t1;
    w->last_end = t1;
    atomic_fetch_add(&w->tasks, 1);
    atomic_fetch_add(&w->busy_ns, (uint64_t)((t1 - t0) * 1e9));
    double flops, bytes;
    hx_task_cost(t, &flops, &bytes);
    hx_monitor_task(&w->monitor, t0, t1, t->desc.codelet->flops ? flops : 0);
    hx_trace_task(rt, t, d->info.index, t0, t1, s == HX_OK);
    if (s != HX_OK) {
        failed(d, t, s, saved);
        return;
    }
    for (int i = 0; i < t->desc.nbuffers; i++)
        free(saved[i]);
    w->consecutive_failures = 0;
    if (rt->sched.pm) {
        hx_perfmodel_record_run(rt->sched.pm, t->desc.codelet, d->info.index, flops, bytes, t1 - t_run);
        hx_sched_done done = {1, t->expected, t1 - t_run};
        hx_sched_finished(&rt->sched, d->info.index, &done);
    }
    hx_task_complete(rt, t, HX_OK, NULL);
}

/* After a graph launch the worker spins briefly for the next one (a
 * decode loop's next step, sched.c): launches run on a runtime of one
 * device, whose worker then has no other worker to take cores from. */
static void *worker_main(void *arg)
{
    hx_device *d = arg;
    hx_sched_set_current(d->info.index);
    int spin = 0;
    for (hx_task *t; (t = hx_sched_pop_wait(&d->rt->sched, d, spin));) {
        spin = t->desc.codelet == &hx_graph_codelet;
        execute(d, t);
    }
    if (d->ops->worker_stop)
        d->ops->worker_stop(d);
    return NULL;
}

/* The backend's start hook runs on the worker thread itself (so the CPU
 * team is pinned from there); the opener waits for its verdict. */
typedef struct {
    hx_device *d;
    pthread_mutex_t m;
    pthread_cond_t c;
    int ready;
    hx_status s;
    char msg[512];
} start_ctx;

static void *worker_boot(void *arg)
{
    start_ctx *c = arg;
    hx_device *d = c->d;
    hx_status s = d->ops->worker_start ? d->ops->worker_start(d) : HX_OK;
    pthread_mutex_lock(&c->m);
    c->s = s;
    if (s)
        snprintf(c->msg, sizeof c->msg, "%s", hx_last_error());
    c->ready = 1;
    pthread_cond_signal(&c->c);
    pthread_mutex_unlock(&c->m);
    /* `c` lives on the opener's stack: not touched past this point. */
    return s == HX_OK ? worker_main(d) : NULL;
}

hx_status hx_worker_init(hx_device *d, double now)
{
    hx_worker *w = calloc(1, sizeof *w);
    if (!w)
        return hx_error(HX_ERR_NO_MEMORY, "worker for device %d", d->info.index);
    hx_inject_init(&w->inject);
    hx_monitor_init(&w->monitor, now);
    pthread_mutex_init(&w->msg_lock, NULL);
    d->worker = w;
    return HX_OK;
}

hx_status hx_worker_start(hx_device *d)
{
    hx_status st = hx_worker_init(d, hx_now());
    if (st)
        return st;
    hx_worker *w = d->worker;
    start_ctx c = {.d = d};
    pthread_mutex_init(&c.m, NULL);
    pthread_cond_init(&c.c, NULL);
    if (pthread_create(&w->thread, NULL, worker_boot, &c) != 0) {
        pthread_mutex_destroy(&c.m);
        pthread_cond_destroy(&c.c);
        return hx_error(HX_ERR_DEVICE, "cannot start the worker of device %d", d->info.index);
    }
    w->started = 1;
    pthread_mutex_lock(&c.m);
    while (!c.ready)
        pthread_cond_wait(&c.c, &c.m);
    pthread_mutex_unlock(&c.m);
    pthread_mutex_destroy(&c.m);
    pthread_cond_destroy(&c.c);
    if (c.s)
        return hx_error(c.s, "%s", c.msg);
    return HX_OK;
}

void hx_worker_join(hx_device *d)
{
    hx_worker *w = d->worker;
    if (!w)
        return;
    if (w->started)
        pthread_join(w->thread, NULL);
    hx_inject_destroy(&w->inject);
    hx_monitor_destroy(&w->monitor);
    pthread_mutex_destroy(&w->msg_lock);
    free(w);
    d->worker = NULL;
}
