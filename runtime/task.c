/* Task submission and the dependency DAG (sequential consistency: a task
 * depends on the last writer of each buffer it reads, and on the last
 * writer and every reader since of each buffer it writes).  Only pending
 * tasks are remembered: a task that finishes leaves its buffers' writer
 * and reader records at once, since nothing submitted later can depend on
 * it, so a runtime's bookkeeping is as large as its work in flight, never
 * as its history (a model's weights are read by every evaluation and
 * written by none). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/buffer.h"
#include "runtime/error.h"
#include "runtime/handle.h"
#include "runtime/task.h"
#include "runtime/worker.h"

void hx_task_ref(hx_task *t) { atomic_fetch_add(&t->refs, 1); }

void hx_task_release_memory(hx_task *t)
{
    if (t->desc.args && t->desc.args != (const void *)t->inline_args)
        free((void *)t->desc.args);
    if (t->succ != t->succ_inline)
        free(t->succ);
    free(t->msg);
    if (t->desc.blocks != t->inline_blocks)
        free((void *)t->desc.blocks);
    t->desc.blocks = NULL;
    t->desc.args = NULL;
    t->succ = NULL;
    t->msg = NULL;
}

void hx_task_unref(hx_task *t)
{
    if (atomic_fetch_sub(&t->refs, 1) != 1)
        return;
    hx_task_release_memory(t);
    hx_task_pool_put(&t->rt->task_pool, t);
}

void hx_task_cost(hx_task *t, double *flops, double *bytes)
{
    if (t->flops < 0) {
        const hx_codelet *cl = t->desc.codelet;
        size_t sizes[HX_TASK_MAX_BUFFERS];
        double total = 0;
        for (int i = 0; i < t->desc.nbuffers; i++)
            total += (double)(sizes[i] = t->desc.buffers[i]->size);
        double f = 0, b = total;
        if (cl->flops || cl->bytes) {
            f = cl->flops ? cl->flops(t->desc.args, sizes) : 0;
            b = cl->bytes ? cl->bytes(t->desc.args, sizes) : 0;
        }
        /* A cost function is a guess: a nonsensical one counts as nothing. */
        t->flops = f >= 0 && f < 1e30 ? f : 0;
        t->bytes = b >= 0 && b < 1e30 ? b : 0;
    }
    *flops = t->flops;
    *bytes = t->bytes;
}

static hx_status validate(hx_runtime *rt, const hx_task_desc *d)
{
    hx_status s = hx_handle_check(rt, HX_HANDLE_RUNTIME, "hx_task_submit");
    if (s)
        return s;
    if (!d || !d->codelet)
        return hx_error(HX_ERR_INVALID_ARG, "hx_task_submit: NULL descriptor or codelet");
    const char *name = d->codelet->name ? d->codelet->name : "(unnamed)";
    if (d->nbuffers < 0 || d->nbuffers > HX_TASK_MAX_BUFFERS)
        return hx_error(HX_ERR_INVALID_ARG, "task '%s': %d buffers (at most %d)", name, d->nbuffers,
                        HX_TASK_MAX_BUFFERS);
    for (int i = 0; i < d->nbuffers; i++) {
        if (!d->buffers[i] || d->buffers[i]->rt != rt)
            return hx_error(HX_ERR_INVALID_ARG, "task '%s': buffer %d is NULL or of another runtime",
                            name, i);
        if (d->modes[i] != HX_R && d->modes[i] != HX_W && d->modes[i] != HX_RW)
            return hx_error(HX_ERR_INVALID_ARG, "task '%s': buffer %d has access mode %d", name, i,
                            (int)d->modes[i]);
        if ((d->modes[i] & HX_W) && d->buffers[i]->read_only)
            return hx_error(HX_ERR_INVALID_ARG, "task '%s': buffer %d is read-only", name, i);
    }
    if (d->nblocks && !d->blocks)
        return hx_error(HX_ERR_INVALID_ARG, "task '%s': %u blocks named with NULL blocks", name, d->nblocks);
    for (int i = 0; i < d->nbuffers; i++)
        for (uint32_t k = 0; d->buffers[i]->divided && k < d->nblocks; k++)
            if (d->blocks[k] >= d->buffers[i]->n_blocks)
                return hx_error(HX_ERR_RANGE, "task '%s': block %u named, buffer %d has %u", name, d->blocks[k], i,
                                d->buffers[i]->n_blocks);
    if (d->args_size && !d->args)
        return hx_error(HX_ERR_INVALID_ARG, "task '%s': args_size %zu with NULL args", name,
                        d->args_size);
    if (d->device < -1 || d->device >= rt->ndevices)
        return hx_error(HX_ERR_INVALID_ARG, "task '%s': device %d does not exist (%d devices)", name,
                        d->device, rt->ndevices);
    return HX_OK;
}

/* Makes `t` wait for `pred`; under rt->lock. */
static hx_status add_edge(hx_task *pred, hx_task *t)
{
    if (!pred || pred == t)
        return HX_OK;
    /* A finished predecessor imposes nothing, even a failed one: its failure
     * was reported to its waiters, and a buffer must not stay poisoned
     * forever.  Only tasks submitted while it was pending inherit it. */
    if (pred->done)
        return HX_OK;
    if (pred->nsucc == pred->capsucc) {
        int cap = 2 * pred->capsucc;
        int inl = pred->succ == pred->succ_inline;
        hx_task **s = realloc(inl ? NULL : pred->succ, (size_t)cap * sizeof *s);
        if (!s)
            return hx_error(HX_ERR_NO_MEMORY, "hx_task_submit: dependency list");
        if (inl)
            memcpy(s, pred->succ_inline, sizeof pred->succ_inline);
        pred->succ = s;
        pred->capsucc = cap;
    }
    pred->succ[pred->nsucc++] = t;
    atomic_fetch_add(&t->pending, 1);
    return HX_OK;
}

/* Where task `r` records its place in b's reader list `slot`: the index
 * of its buffer b with that place (a task may read one buffer twice). */
static int *slot_of(hx_task *r, const hx_buffer *b, int slot)
{
    for (int j = 0; j < r->desc.nbuffers; j++)
        if (r->desc.buffers[j] == b && r->reader_slot[j] == slot)
            return &r->reader_slot[j];
    return NULL; /* unreachable while the slots are kept right */
}

/* A writer takes the list: its readers are no longer in it. */
static void drop_readers(hx_buffer *b)
{
    for (int r = 0; r < b->nreaders; r++) {
        int *slot = slot_of(b->readers[r], b, r);
        if (slot)
            *slot = -1;
        hx_task_unref(b->readers[r]);
    }
    b->nreaders = 0;
}

/* Task t, finished, leaves the records of its i-th buffer; under rt->lock.
 * The references those records held go with them (never the last one:
 * hx_task_complete drops the runtime's own after them). */
static void forget(hx_task *t, int i)
{
    hx_buffer *b = t->desc.buffers[i];
    if (b->last_writer == t) {
        b->last_writer = NULL;
        hx_task_unref(t);
    }
    int slot = t->reader_slot[i];
    if (slot < 0)
        return;
    t->reader_slot[i] = -1;
    int last = --b->nreaders;
    if (slot != last) {
        hx_task *moved = b->readers[last];
        int *ms = slot_of(moved, b, last);
        b->readers[slot] = moved;
        if (ms)
            *ms = slot;
    }
    hx_task_unref(t);
}

static hx_status add_reader(hx_buffer *b, hx_task *t, int i)
{
    if (b->nreaders == b->capreaders) {
        int cap = b->capreaders ? 2 * b->capreaders : 4;
        hx_task **r = realloc(b->readers, (size_t)cap * sizeof *r);
        if (!r)
            return hx_error(HX_ERR_NO_MEMORY, "hx_task_submit: reader list");
        b->readers = r;
        b->capreaders = cap;
    }
    hx_task_ref(t);
    t->reader_slot[i] = b->nreaders;
    b->readers[b->nreaders++] = t;
    return HX_OK;
}

/* Links `t` into the DAG through its buffers; under rt->lock. */
static hx_status link_task(hx_task *t)
{
    const hx_task_desc *d = &t->desc;
    hx_status s = HX_OK;
    for (int i = 0; i < d->nbuffers && s == HX_OK; i++) {
        hx_buffer *b = d->buffers[i];
        s = add_edge(b->last_writer, t);
        if (d->modes[i] & HX_W) {
            for (int r = 0; r < b->nreaders && s == HX_OK; r++)
                s = add_edge(b->readers[r], t);
            drop_readers(b);
            if (b->last_writer)
                hx_task_unref(b->last_writer);
            hx_task_ref(t);
            b->last_writer = t;
        } else if (s == HX_OK) {
            s = add_reader(b, t, i);
        }
        b->users++;
    }
    return s;
}

/* A record from the pool holding its own copy of `desc` (arguments and
 * block list), not yet linked; NULL with the error set when memory runs
 * out. */
static hx_task *task_make(hx_runtime *rt, const hx_task_desc *desc)
{
    hx_task *t = hx_task_pool_get(&rt->task_pool);
    if (!t) {
        hx_error(HX_ERR_NO_MEMORY, "hx_task_submit: no memory for a task");
        return NULL;
    }
    atomic_init(&t->refs, 1);
    t->desc = *desc;
    t->desc.blocks = NULL; /* the task's own copy, below */
    t->rt = rt;
    t->device = -1;
    t->succ = t->succ_inline;
    t->capsucc = HX_TASK_SUCC_INLINE;
    for (int i = 0; i < HX_TASK_MAX_BUFFERS; i++)
        t->reader_slot[i] = -1;
    if (desc->args_size <= sizeof t->inline_args) {
        if (desc->args_size)
            memcpy(t->inline_args, desc->args, desc->args_size);
        t->desc.args = t->inline_args;
    } else {
        void *a = malloc(desc->args_size);
        if (!a) {
            t->desc.args = NULL;
            hx_task_unref(t);
            hx_error(HX_ERR_NO_MEMORY, "hx_task_submit: %zu bytes of arguments", desc->args_size);
            return NULL;
        }
        memcpy(a, desc->args, desc->args_size);
        t->desc.args = a;
    }
    if (desc->nblocks) {
        uint32_t *ids = desc->nblocks <= sizeof t->inline_blocks / sizeof *t->inline_blocks
                            ? t->inline_blocks
                            : malloc(sizeof *ids * desc->nblocks);
        if (!ids) {
            t->desc.nblocks = 0;
            hx_task_unref(t);
            hx_error(HX_ERR_NO_MEMORY, "hx_task_submit: a list of %u blocks", desc->nblocks);
            return NULL;
        }
        memcpy(ids, desc->blocks, sizeof *ids * desc->nblocks);
        t->desc.blocks = ids;
    } else if (desc->blocks) {
        t->desc.blocks = t->inline_blocks; /* a list of none: no block moves */
    }
    t->flops = -1;
    t->queued_on = -1;
    return t;
}

/* Refuses a task no device in service may run (the record goes back). */
static hx_status check_eligible(hx_runtime *rt, hx_task *t)
{
    if (hx_sched_eligible(&rt->sched, t))
        return HX_OK;
    const hx_task_desc *desc = &t->desc;
    const char *name = desc->codelet->name ? desc->codelet->name : "(unnamed)";
    uint32_t capable = t->capable;
    int pinned = desc->device >= 0;
    uint32_t wanted = pinned ? 1u << desc->device : ~0u;
    hx_task_unref(t);
    if (capable & wanted)
        return hx_error(HX_ERR_NO_DEVICE, "task '%s': the %sdevices that implement it are out of service", name,
                        pinned ? "selected " : "");
    return hx_error(HX_ERR_NO_DEVICE, "task '%s': no %sdevice implements this codelet", name,
                    pinned ? "selected " : "");
}

/* Numbers a record made by task_make and holds it open for linking: its
 * references (the runtime's, and the caller's handle when `handle`), and
 * the pending count that submission holds until the task is linked. */
static void task_open(hx_runtime *rt, hx_task *t, int handle, double t0)
{
    t->id = atomic_fetch_add(&rt->next_task_id, 1);
    atomic_store(&t->refs, handle ? 2 : 1);
    atomic_store(&t->pending, 1);
    t->t_submit = t0;
}

/* After linking (outside rt->lock): a failed link completes through the
 * normal path, as failed; a task with no pending predecessor is ready. */
static void task_release(hx_runtime *rt, hx_task *t, hx_status linked)
{
    if (linked) {
        t->dep_failed = 1;
        t->msg = strdup(hx_last_error());
    }
    if (atomic_fetch_sub(&t->pending, 1) == 1) {
        t->t_ready = hx_runtime_now(rt);
        hx_sched_push(&rt->sched, t);
    }
}

static hx_status task_submit(hx_runtime *rt, const hx_task_desc *desc, hx_task **out)
{
    double t0 = hx_now();
    if (out)
        *out = NULL;
    hx_status s = validate(rt, desc);
    if (s)
        return s;
    hx_task *t = task_make(rt, desc);
    if (!t)
        return HX_ERR_NO_MEMORY;
    t->capable = hx_sched_capable(rt, &t->desc);
    if ((s = check_eligible(rt, t)))
        return s;
    task_open(rt, t, out != NULL, t0);

    pthread_mutex_lock(&rt->lock);
    s = link_task(t);
    rt->inflight++;
    pthread_mutex_unlock(&rt->lock);
    atomic_fetch_add(&rt->stats.submitted, 1);
    task_release(rt, t, s);
    if (out)
        *out = t;
    atomic_fetch_add(&rt->stats.submit_ns, (uint64_t)((hx_now() - t0) * 1e9));
    return HX_OK;
}

hx_status hx_task_record(hx_runtime *rt, const hx_task_desc *desc, hx_task_recorded *out)
{
    hx_status s = validate(rt, desc);
    if (s)
        return s;
    hx_task probe = {.desc = *desc, .flops = -1};
    probe.capable = hx_sched_capable(rt, desc);
    if (!probe.capable)
        return hx_error(HX_ERR_NO_DEVICE, "task '%s': no device implements this codelet",
                        desc->codelet->name ? desc->codelet->name : "(unnamed)");
    hx_task_cost(&probe, &out->flops, &out->bytes);
    out->desc = *desc;
    out->capable = probe.capable;
    return HX_OK;
}

/* Tasks linked under one hold of rt->lock: a layer's worth, so that the
 * workers completing tasks wait at most that long for the lock. */
#define HX_LINK_CHUNK 16

/* Never run: the worker runs a graph task's tasks itself (worker.c).  A
 * CPU function makes the CPU device one that implements it. */
static int graph_not_run(const hx_cpu_call *call)
{
    (void)call;
    return HX_ERR_INVALID_ARG;
}

const hx_codelet hx_graph_codelet = {.name = "graph", .cpu = graph_not_run};

/* Whether a recorded task runs on device 0, the CPU: pinned there, the
 * only device, or preferring it alone under a policy that follows
 * preferences (a plan that keeps a step on the CPU of a machine with a
 * GPU). */
static int placed_on_cpu(const hx_runtime *rt, const hx_task_recorded *r)
{
    if (!(r->capable & 1u) || r->desc.device > 0)
        return 0;
    return r->desc.device == 0 || rt->ndevices == 1 || (r->desc.prefer == 1u && rt->sched.policy->follows_prefer);
}

/* Whether the n tasks may go as one graph task (task.h): an executor whose
 * workers run graphs, device 0 the CPU's, in service, with every task
 * placed there. */
static int graph_launchable(hx_runtime *rt, const hx_task_recorded *r, size_t n)
{
    if (!rt->graph_launch || n < 2 || !rt->executor->runs_graphs)
        return 0;
    const hx_device *d = rt->devices[0];
    hx_worker *w = d->worker;
    if (d->info.family != HX_FAMILY_CPU || d->info.memory_node != 0 || !w ||
        atomic_load_explicit(&w->inject.active, memory_order_relaxed) ||
        atomic_load_explicit(&rt->trace.on, memory_order_relaxed) || atomic_load(&rt->sched.retired))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!placed_on_cpu(rt, &r[i]))
            return 0;
    return 1;
}

/* The graph task, when nothing is in flight (else HX_ERR_STATE, nothing
 * submitted: the caller submits the tasks one by one, ordered after what
 * is in flight). */
static hx_status submit_graph(hx_runtime *rt, const hx_task_recorded *r, size_t n, double t0)
{
    const hx_graph_args ga = {r, n};
    const hx_task_desc desc = {.codelet = &hx_graph_codelet, .args = &ga, .args_size = sizeof ga, .device = 0};
    hx_task *t = task_make(rt, &desc);
    if (!t)
        return HX_ERR_NO_MEMORY;
    t->capable = 1u;
    t->flops = t->bytes = 0;
    for (size_t i = 0; i < n; i++) {
        t->flops += r[i].flops;
        t->bytes += r[i].bytes;
    }
    hx_status s = check_eligible(rt, t);
    if (s)
        return s;
    task_open(rt, t, 0, t0);
    pthread_mutex_lock(&rt->lock);
    const int alone = rt->inflight == 0;
    if (alone)
        rt->inflight++;
    pthread_mutex_unlock(&rt->lock);
    if (!alone) {
        atomic_store(&t->refs, 1);
        hx_task_unref(t);
        return HX_ERR_STATE;
    }
    /* Counted as the n tasks it runs: the runtime's figures mean the same
     * with and without launches. */
    atomic_fetch_add(&rt->stats.submitted, n);
    atomic_fetch_add(&rt->stats.graph_launches, 1);
    task_release(rt, t, HX_OK);
    atomic_fetch_add(&rt->stats.submit_ns, (uint64_t)((hx_now() - t0) * 1e9));
    return HX_OK;
}

hx_status hx_task_submit_recorded(hx_runtime *rt, const hx_task_recorded *r, size_t n)
{
    double t0 = hx_now();
    if (graph_launchable(rt, r, n)) {
        hx_status g = submit_graph(rt, r, n, t0);
        if (g != HX_ERR_STATE)
            return g;
    }
    hx_status s = HX_OK;
    for (size_t i0 = 0; i0 < n && s == HX_OK; i0 += HX_LINK_CHUNK) {
        hx_task *chunk[HX_LINK_CHUNK];
        hx_status linked[HX_LINK_CHUNK];
        size_t k = 0, want = n - i0 < HX_LINK_CHUNK ? n - i0 : HX_LINK_CHUNK;
        for (; k < want; k++) {
            hx_task *t = task_make(rt, &r[i0 + k].desc);
            if (!t) {
                s = HX_ERR_NO_MEMORY;
                break;
            }
            t->capable = r[i0 + k].capable;
            t->flops = r[i0 + k].flops;
            t->bytes = r[i0 + k].bytes;
            if ((s = check_eligible(rt, t)))
                break;
            task_open(rt, t, 0, t0);
            chunk[k] = t;
        }
        /* The tasks made before a failure go on, as the ones submitted
         * before a failed hx_task_submit do: the caller waits for them. */
        pthread_mutex_lock(&rt->lock);
        for (size_t j = 0; j < k; j++)
            linked[j] = link_task(chunk[j]);
        rt->inflight += k;
        pthread_mutex_unlock(&rt->lock);
        atomic_fetch_add(&rt->stats.submitted, k);
        for (size_t j = 0; j < k; j++)
            task_release(rt, chunk[j], linked[j]);
    }
    atomic_fetch_add(&rt->stats.submit_ns, (uint64_t)((hx_now() - t0) * 1e9));
    return s;
}

void hx_task_complete(hx_runtime *rt, hx_task *t, hx_status s, const char *msg)
{
    hx_task *ready[64], *inline_succ[HX_TASK_SUCC_INLINE];
    int nready = 0;
    /* A successor could run from the end of this task's kernel on: the
     * completion's work up to its push is the hand-over the worker
     * measures (worker.c, note_launch).  Read now: the record may be
     * released below. */
    const double ended = t->t_end > 0 ? t->t_end : hx_runtime_now(rt);
    if (s != HX_OK && msg && !t->msg)
        t->msg = strdup(msg);
    pthread_mutex_lock(&rt->lock);
    t->status = s;
    t->done = 1;
    int failed = s != HX_OK || t->dep_failed;
    if (failed && rt->first_failure == HX_OK) {
        rt->first_failure = s != HX_OK ? s : HX_ERR_TASK_FAILED;
        snprintf(rt->first_failure_msg, sizeof rt->first_failure_msg, "task '%s': %s",
                 t->desc.codelet->name, t->msg ? t->msg : "a task it depends on failed");
    }
    /* Done, t gains no successor: the list is taken out of the record and
     * read below without the lock. */
    hx_task **succ = t->succ;
    int nsucc = t->nsucc;
    if (succ == t->succ_inline)
        succ = memcpy(inline_succ, t->succ_inline, (size_t)nsucc * sizeof *succ);
    t->succ = t->succ_inline;
    t->nsucc = 0;
    t->capsucc = HX_TASK_SUCC_INLINE;
    for (int i = 0; i < t->desc.nbuffers; i++) {
        t->desc.buffers[i]->users--;
        forget(t, i);
    }
    /* Counted before inflight drops, so wait_all's caller sees it; the
     * runtime's own reference goes before too, so that wait_all's caller
     * finds no record alive but the handles it has not waited for. */
    atomic_fetch_add(failed ? &rt->stats.failed : &rt->stats.done, 1);
    hx_task_unref(t);
    rt->inflight--;
    /* Wake only those whose condition may now hold: a futex call per task
     * would cost more than an empty task. */
    if (rt->waiters || (rt->idle_waiters && rt->inflight == 0))
        pthread_cond_broadcast(&rt->idle);
    pthread_mutex_unlock(&rt->lock);

    for (int i = 0; i < nsucc; i++) {
        if (failed)
            succ[i]->dep_failed = 1;
        if (atomic_fetch_sub(&succ[i]->pending, 1) == 1) {
            succ[i]->t_ready = ended;
            if (nready == 64) {
                for (int k = 0; k < nready; k++)
                    hx_sched_push(&rt->sched, ready[k]);
                nready = 0;
            }
            ready[nready++] = succ[i];
        }
    }
    for (int k = 0; k < nready; k++)
        hx_sched_push(&rt->sched, ready[k]);
    if (succ != inline_succ)
        free(succ);
}

hx_status hx_task_submit(hx_runtime *rt, const hx_task_desc *desc, hx_task **out)
{
    hx_api_enter();
    return hx_api_leave(task_submit(rt, desc, out));
}

static hx_status task_wait(hx_task *t)
{
    if (!t)
        return hx_error(HX_ERR_INVALID_ARG, "hx_task_wait: NULL task");
    hx_runtime *rt = t->rt;
    if (!t->done) {
        hx_status st = rt->executor->advance(rt);
        if (st && !t->done) {
            hx_task_unref(t);
            return st;
        }
    }
    pthread_mutex_lock(&rt->lock);
    while (!t->done) {
        rt->waiters++;
        pthread_cond_wait(&rt->idle, &rt->lock);
        rt->waiters--;
    }
    pthread_mutex_unlock(&rt->lock);
    hx_status s = t->status != HX_OK ? t->status : t->dep_failed ? HX_ERR_TASK_FAILED : HX_OK;
    if (s != HX_OK)
        hx_error(s, "task '%s': %s", t->desc.codelet->name,
                 t->msg ? t->msg : "a task it depends on failed");
    hx_task_unref(t);
    return s;
}

hx_status hx_task_wait(hx_task *t)
{
    hx_api_enter();
    return hx_api_leave(task_wait(t));
}

int hx_task_device(const hx_task *t) { return t ? t->device : -1; }

hx_status hx_runtime_drain(hx_runtime *rt)
{
    hx_status st = rt->executor->advance(rt);
    if (st)
        return st;
    pthread_mutex_lock(&rt->lock);
    while (rt->inflight > 0) {
        rt->idle_waiters++;
        pthread_cond_wait(&rt->idle, &rt->lock);
        rt->idle_waiters--;
    }
    hx_status s = rt->first_failure;
    char msg[sizeof rt->first_failure_msg];
    memcpy(msg, rt->first_failure_msg, sizeof msg);
    rt->first_failure = HX_OK;
    rt->first_failure_msg[0] = '\0';
    pthread_mutex_unlock(&rt->lock);
    if (s != HX_OK)
        hx_error(s, "%s", msg);
    return s;
}

hx_status hx_runtime_wait_all(hx_runtime *rt)
{
    hx_api_enter();
    hx_status s = hx_handle_check(rt, HX_HANDLE_RUNTIME, "hx_runtime_wait_all");
    return hx_api_leave(s ? s : hx_runtime_drain(rt));
}
