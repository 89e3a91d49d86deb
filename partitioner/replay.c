/* Decode replay: an evaluation's task list, recorded once per batch shape
 * and submitted again for every step of that shape, as CUDA graphs and
 * ggml's graph reuse do.  A decode step's graph differs from the last
 * one's only in the KV blocks its kv_store and attention tasks name (the
 * positions, slots and token ids travel in the activation buffers the
 * engine fills), so a replay patches those two lists and hands the tasks
 * to the runtime, checked, costed and with their devices found once.
 *
 * Placement is not recorded: every task goes through the scheduling
 * policy as a fresh one does (dmda weighs its performance model and the
 * queues at each step, ws steals, a device out of service is skipped), so
 * no policy is bypassed and none needs to declare itself static.
 *
 * A serving engine alternates shapes (decode steps of B sequences, steps
 * with prefill chunks, B changing as requests come and go), so the model
 * keeps the recordings of its last HX_REPLAY_SHAPES shapes, most recently
 * used first; a new shape takes the least recently used one's place (and
 * memory).  A shape is the tokens, sequences, longest block table, rows of
 * logits (and so the arguments of every task) and the activation set with
 * its meta and logits buffers.  Every recording is dropped when the world
 * they were recorded in changes: the plan, the devices in service (a
 * device failing for good), or an activation buffer reallocated for a
 * larger batch or context.  An activation observer adds tasks of its own
 * between the matmuls: with one set, the graph is built fresh. */
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "partitioner/partitioner.h"
#include "partitioner/placement.h"
#include "runtime/error.h"
#include "runtime/runtime.h"
#include "runtime/task.h"

/* Arguments kept per task: the largest op argument struct fits. */
#define HX_REPLAY_ARGS 64

/* Which of the batch's KV block lists a task names. */
enum { NAMES_NONE, NAMES_KV_READ, NAMES_KV_WRITTEN };

/* Everything a recorded task list depends on besides the step's blocks:
 * the shape, and the world it was recorded in (the plan, the devices
 * retired, the reallocations of activation buffers), which is the same
 * for every recording the model keeps. */
typedef struct {
    const void *act, *meta, *logits;
    const void *plan; /* a planning policy's plan is per shape */
    uint32_t T, S, max_blocks, n_out, n_pick;
} shape_key;

typedef struct {
    uint64_t placements; /* the placement planner's generation */
    uint32_t retired, act_generation;
} world_key;

typedef struct {
    shape_key shape;
    world_key world;
} replay_key;

/* One allocation: the header, then n tasks, their arguments and the lists
 * they name (so that the model frees it with free()). */
struct hx_replay {
    replay_key key;
    size_t n, cap; /* tasks recorded, and room for */
    hx_task_recorded *task;
    unsigned char (*args)[HX_REPLAY_ARGS];
    unsigned char *names;
};

static replay_key key_of(const hx_model *m, const hx_batch_shape *b, const struct hx_plan *plan)
{
    replay_key k;
    memset(&k, 0, sizeof k); /* compared with memcmp: no stray padding */
    k.shape.act = b->act;
    k.shape.meta = b->act->meta;
    k.shape.logits = b->act->logits;
    k.shape.T = b->T;
    k.shape.S = b->S;
    k.shape.max_blocks = b->max_blocks;
    k.shape.n_out = b->n_out;
    k.shape.n_pick = b->n_pick;
    k.shape.plan = plan;
    k.world.placements = hx_placement_generation(m);
    k.world.retired = atomic_load(&m->rt->sched.retired);
    k.world.act_generation = m->act_generation;
    return k;
}

typedef struct {
    hx_model *m;
    const hx_batch_shape *b;
    struct hx_replay *r; /* NULL while counting */
    size_t n;
    hx_status status;
} recorder;

static void record_task(void *user, int layer, hx_task_class cls, const hx_task_desc *d)
{
    (void)layer, (void)cls;
    recorder *rc = user;
    if (rc->status)
        return;
    size_t i = rc->n++;
    if (!rc->r)
        return;
    const hx_batch_shape *b = rc->b;
    unsigned char names = NAMES_NONE;
    if (d->blocks && b->kv_read != b->kv_written) {
        if (d->blocks == b->kv_read && d->nblocks == b->n_kv_read)
            names = NAMES_KV_READ;
        else if (d->blocks == b->kv_written && d->nblocks == b->n_kv_written)
            names = NAMES_KV_WRITTEN;
    }
    /* A task whose blocks or arguments a replay could not renew is built
     * fresh every time (the caller falls back to the partitioner). */
    if (i >= rc->r->n || (d->blocks && names == NAMES_NONE) || d->args_size > HX_REPLAY_ARGS) {
        rc->status = HX_ERR_UNSUPPORTED;
        return;
    }
    hx_task_desc copy = *d;
    if (d->args_size)
        memcpy(rc->r->args[i], d->args, d->args_size);
    copy.args = d->args_size ? rc->r->args[i] : NULL;
    copy.blocks = NULL;
    copy.nblocks = 0;
    rc->r->names[i] = names;
    rc->status = hx_task_record(rc->m->rt, &copy, &rc->r->task[i]);
}

/* Records the graph for shape `b` into `old` when it has room (a decode
 * step that starts a KV block has as many tasks as the step before) or a
 * new allocation; NULL (the error set, `old` freed) when the graph cannot
 * be recorded. */
static struct hx_replay *record(hx_model *m, const hx_batch_shape *b, const struct hx_plan *plan,
                                struct hx_replay *old)
{
    /* A dry run counts the tasks (a plan's list lacks the tasks that join
     * the experts' lanes, partitioner/llama_graph.c). */
    recorder rc = {.m = m, .b = b};
    if (hx_llama_emit(m, b, plan, record_task, &rc) || rc.status) {
        free(old);
        return NULL;
    }
    const size_t n = rc.n;
    struct hx_replay *r = old;
    if (!r || r->cap < n) {
        free(old);
        r = malloc(sizeof *r + n * (sizeof *r->task + sizeof *r->args + 1));
        if (!r) {
            hx_error(HX_ERR_NO_MEMORY, "a recorded graph of %zu tasks", n);
            return NULL;
        }
        r->cap = n;
    }
    r->key = key_of(m, b, plan);
    r->n = n;
    r->task = (hx_task_recorded *)(void *)(r + 1);
    r->args = (unsigned char(*)[HX_REPLAY_ARGS])(void *)(r->task + r->cap);
    r->names = (unsigned char *)(r->args + r->cap);
    rc = (recorder){.m = m, .b = b, .r = r};
    if (hx_llama_emit(m, b, plan, record_task, &rc) || rc.status || rc.n != n) {
        free(r);
        return NULL;
    }
    return r;
}

/* Drops every recording when the world they were recorded in changed. */
static void drop_stale(hx_model *m, const world_key *w)
{
    if (!m->replay[0] || !memcmp(&m->replay[0]->key.world, w, sizeof *w))
        return;
    for (int i = 0; i < HX_REPLAY_SHAPES; i++) {
        free(m->replay[i]);
        m->replay[i] = NULL;
    }
}

/* The recording for `k` moved to the front of the model's list, recorded
 * first when the list has none (into the least recently used one's memory
 * when the list is full); NULL when the graph cannot be recorded. */
static struct hx_replay *lookup(hx_model *m, const hx_batch_shape *b, const struct hx_plan *plan,
                                const replay_key *k)
{
    drop_stale(m, &k->world);
    const int cap = m->replay_shapes;
    int i = 0;
    while (i < cap && m->replay[i] && memcmp(&m->replay[i]->key, k, sizeof *k))
        i++;
    struct hx_replay *r;
    if (i < cap && m->replay[i]) {
        r = m->replay[i];
        atomic_fetch_add(&m->graphs_replayed, 1);
    } else {
        if (i == cap)
            i--; /* the least recently used one makes room */
        r = record(m, b, plan, m->replay[i]);
        m->replay[i] = NULL;
        if (!r) {
            memmove(&m->replay[i], &m->replay[i + 1], sizeof m->replay[0] * (size_t)(cap - 1 - i));
            m->replay[cap - 1] = NULL;
            return NULL;
        }
        atomic_fetch_add(&m->graphs_recorded, 1);
    }
    memmove(&m->replay[1], &m->replay[0], sizeof m->replay[0] * (size_t)i);
    m->replay[0] = r;
    return r;
}

hx_status hx_replay_emit(hx_model *m, const hx_batch_shape *b, const struct hx_plan *plan)
{
    if (!m->graph_replay || m->observer || m->expert_observer)
        return hx_llama_emit(m, b, plan, NULL, NULL);
    replay_key k = key_of(m, b, plan);
    struct hx_replay *r = lookup(m, b, plan, &k);
    if (!r) /* what the fresh graph meets, it reports */
        return hx_llama_emit(m, b, plan, NULL, NULL);
    for (size_t i = 0; i < r->n; i++) {
        hx_task_desc *d = &r->task[i].desc;
        if (r->names[i] == NAMES_KV_READ) {
            d->blocks = b->kv_read;
            d->nblocks = b->n_kv_read;
        } else if (r->names[i] == NAMES_KV_WRITTEN) {
            d->blocks = b->kv_written;
            d->nblocks = b->n_kv_written;
        }
    }
    return hx_task_submit_recorded(m->rt, r->task, r->n);
}
