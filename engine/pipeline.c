/* The steps of a pipeline over processes (engine/pipeline.h says who does
 * what).  Messages, per step of T tokens and n_out wanted rows, D the
 * model's width (docs/mpi.md lists their sizes):
 *   rank 0 -> each rank r > 0  STEP: header, then int32 positions [T],
 *       the KV layout (ops/ops.h, hx_meta_ints), the rows wanted [n_out],
 *       the KV blocks read and written, and the shared blocks rank 0
 *       copied since the last step (pairs);
 *   rank r -> r + 1            ACT: header, float hidden states [T][D];
 *   last rank -> rank 0        ACT: header, float hidden states [n_out][D]
 *       (the rows whose logits are wanted, before the final norm).
 * Every rank numbers KV blocks alike (its pool holds its layers only), so
 * rank 0's block tables are every rank's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/pipeline.h"
#include "ops/ops.h"
#include "runtime/buffer.h"
#include "runtime/error.h"

#define STEP_MAGIC 0x68785354u /* "hxST" */
#define ACT_MAGIC 0x68784143u  /* "hxAC" */
enum { KIND_STEP = 1, KIND_STOP = 2 };

typedef struct {
    uint32_t magic, kind;
    uint64_t step;
    uint32_t T, S, max_blocks, n_out, meta_ints, n_kv_read, n_kv_written, n_copies;
    uint32_t n_ids, pad; /* the token ids: T with tensor parallelism (each rank embeds them), else 0 */
} step_header;

typedef struct {
    uint32_t magic, rows, D, pad;
    uint64_t step;
} act_header;

static hx_status send_counted(hx_pipe *p, int to, int tag, const void *buf, size_t bytes)
{
    p->bytes_sent += bytes;
    p->msgs_sent++;
    return p->ops->send(p->ctx, to, tag, buf, bytes);
}

hx_status hx_pipeline_announce(hx_model *m, hx_batch_work *w, uint64_t step)
{
    const hx_batch_shape *b = &w->shape;
    const hx_activations *A = b->act;
    hx_kv_layout lay = {b->T, b->S, b->max_blocks, m->kv->block_size};
    step_header h = {STEP_MAGIC, KIND_STEP, step, b->T, b->S, b->max_blocks, b->n_out, (uint32_t)hx_meta_ints(&lay),
                     b->n_kv_read, b->n_kv_written, m->kv->n_copies, m->stage.tp.on ? b->T : 0, 0};
    const size_t ints = (size_t)h.T + h.meta_ints + h.n_out + h.n_kv_read + h.n_kv_written + 2 * (size_t)h.n_copies +
                        h.n_ids;
    const size_t bytes = sizeof h + 4 * ints;
    void *msg;
    hx_status s = hx_model_scratch(m, HX_SCRATCH_PIPE, bytes, &msg);
    if (s)
        return s;
    const int32_t *pos, *meta, *rows, *ids = NULL;
    if ((s = hx_buffer_acquire(A->pos, HX_R, (void **)&pos)) || (s = hx_buffer_acquire(A->meta, HX_R, (void **)&meta)) ||
        (s = hx_buffer_acquire(A->out_rows, HX_R, (void **)&rows)) ||
        (h.n_ids && (s = hx_buffer_acquire(A->ids, HX_R, (void **)&ids))))
        return s;
    uint8_t *p = msg;
    memcpy(p, &h, sizeof h);
    p += sizeof h;
#define PUT(src, n)                                                                                                    \
    do {                                                                                                               \
        if ((n) != 0) /* an empty list may be a NULL pointer */                                                      \
            memcpy(p, (src), 4 * (size_t)(n));                                                                         \
        p += 4 * (size_t)(n);                                                                                          \
    } while (0)
    PUT(pos, h.T);
    PUT(meta, h.meta_ints);
    PUT(rows, h.n_out);
    PUT(b->kv_read, h.n_kv_read);
    PUT(b->kv_written, h.n_kv_written);
    PUT(m->kv->copies, 2 * h.n_copies);
    PUT(ids, h.n_ids);
#undef PUT
    for (int r = 1; r < m->stage.size && s == HX_OK; r++)
        s = send_counted(m->pipe, r, HX_PIPE_TAG_STEP, msg, bytes);
    if (s == HX_OK)
        m->kv->n_copies = 0;
    return s;
}

/* Sends `rows` rows of act buffer `x` to rank `to`. */
static hx_status send_rows(hx_model *m, int to, hx_buffer *x, uint32_t rows, uint64_t step)
{
    const uint32_t D = m->info.n_embd;
    const size_t bytes = sizeof(act_header) + sizeof(float) * rows * D;
    void *msg;
    const float *src;
    hx_status s = hx_model_scratch(m, HX_SCRATCH_PIPE, bytes, &msg);
    if (s == HX_OK)
        s = hx_buffer_acquire(x, HX_R, (void **)&src);
    if (s)
        return s;
    act_header h = {ACT_MAGIC, rows, D, 0, step};
    memcpy(msg, &h, sizeof h);
    memcpy((uint8_t *)msg + sizeof h, src, sizeof(float) * rows * D);
    return send_counted(m->pipe, to, HX_PIPE_TAG_ACT, msg, bytes);
}

/* Receives `rows` rows of hidden states for step `step` into `x`, from
 * `hops` ranks away. */
static hx_status recv_rows(hx_model *m, int from, int hops, hx_buffer *x, uint32_t rows, uint64_t step)
{
    const uint32_t D = m->info.n_embd;
    const void *msg;
    size_t bytes;
    hx_status s = m->pipe->ops->recv(m->pipe->ctx, from, HX_PIPE_TAG_ACT, hops, &msg, &bytes);
    if (s)
        return s;
    act_header h;
    if (bytes < sizeof h)
        return hx_error(HX_ERR_FORMAT, "rank %d sent %zu bytes of hidden states", from, bytes);
    memcpy(&h, msg, sizeof h);
    if (h.magic != ACT_MAGIC || h.step != step || h.rows != rows || h.D != D ||
        bytes != sizeof h + sizeof(float) * rows * D)
        return hx_error(HX_ERR_FORMAT, "rank %d sent hidden states of step %llu, %u rows of %u (%zu bytes); step "
                                       "%llu wants %u rows of %u",
                        from, (unsigned long long)h.step, h.rows, h.D, bytes, (unsigned long long)step, rows, D);
    float *dst;
    s = hx_buffer_acquire(x, HX_W, (void **)&dst);
    if (s == HX_OK)
        memcpy(dst, (const uint8_t *)msg + sizeof h, sizeof(float) * rows * D);
    return s;
}

void hx_pipeline_fail(hx_model *m, hx_status s, const char *what)
{
    char why[512];
    snprintf(why, sizeof why, "rank %d of %d, %s: %s", m->stage.rank, m->stage.size, what, hx_last_error());
    (void)s;
    m->pipe->ops->abort(m->pipe->ctx, why);
}

/* Rank 0's first part of a step: announced, embedding and its layers
 * run, hidden states sent on.  Returns the step's number in *step. */
static hx_status step_out(hx_model *m, hx_batch_work *w, const struct hx_plan **plan, uint64_t *step)
{
    hx_pipe *p = m->pipe;
    /* The last rank sends back the n_out rows of logits only. */
    if (w->shape.n_pick > w->shape.n_out)
        return hx_error(HX_ERR_UNSUPPORTED, "embeddings with a pipeline over %d ranks: not supported (the last "
                        "rank sends back the rows of logits only)", m->stage.size);
    *step = ++p->steps;
    hx_status s = hx_plan_get_locked(m, &w->shape, plan);
    if (s)
        return s;
    /* Announced first: the other ranks lay out the step while this one
     * computes its layers. */
    s = hx_pipeline_announce(m, w, *step);
    if (s)
        hx_pipeline_fail(m, s, "announcing a step");
    s = hx_llama_emit_stage(m, &w->shape, *plan, NULL, NULL, 0, hx_model_stage_l1(m), HX_STAGE_EMBED);
    hx_status waited = hx_runtime_wait_all(m->rt);
    if (s == HX_OK)
        s = waited;
    if (s == HX_OK)
        s = send_rows(m, 1, w->shape.act->x, w->shape.T, *step);
    if (s)
        hx_pipeline_fail(m, s, "a step");
    return HX_OK;
}

/* Its second part: the wanted rows back from the last rank, the head. */
static hx_status step_in(hx_model *m, hx_batch_work *w, uint64_t step)
{
    hx_status s = recv_rows(m, m->stage.size - 1, m->stage.size - 1, w->shape.act->xo, w->shape.n_out, step);
    if (s)
        hx_pipeline_fail(m, s, "a step");
    /* the plan again: another shape's may have moved it meanwhile */
    const struct hx_plan *plan;
    if ((s = hx_plan_get_locked(m, &w->shape, &plan)))
        return s;
    s = hx_llama_emit_stage(m, &w->shape, plan, NULL, NULL, m->info.n_layer, m->info.n_layer,
                            HX_STAGE_HEAD | HX_STAGE_PICKED);
    hx_status waited = hx_runtime_wait_all(m->rt);
    return s ? s : waited;
}

hx_status hx_pipeline_eval(hx_model *m, hx_batch_work *w)
{
    if (m->stage.tp.on)
        return hx_tp_eval(m, w);
    const struct hx_plan *plan;
    uint64_t step;
    hx_status s = step_out(m, w, &plan, &step);
    return s ? s : step_in(m, w, step);
}

hx_status hx_pipeline_eval2(hx_model *m, hx_batch_work *a, hx_batch_work *b)
{
    const struct hx_plan *pa, *pb;
    uint64_t sa, sb;
    if (m->stage.tp.on) { /* every rank takes part in every step: one after the other */
        hx_status s = hx_tp_eval(m, a);
        return s ? s : hx_tp_eval(m, b);
    }
    /* b's first part runs here while a's layers run on the other ranks */
    hx_status s = step_out(m, a, &pa, &sa);
    if (s == HX_OK)
        s = step_out(m, b, &pb, &sb);
    else
        return s;
    if (s) /* b never left: a still comes back */
        return (step_in(m, a, sa), s);
    s = step_in(m, a, sa);
    hx_status t = step_in(m, b, sb);
    return s ? s : t;
}

/* A step's announcement, checked against this rank's model and pool:
 * a rank that lays out a step wrongly would corrupt its cache. */
static hx_status take_step(hx_model *m, const void *msg, size_t bytes, step_header *h, hx_batch_shape *b)
{
    if (bytes < sizeof *h)
        return hx_error(HX_ERR_FORMAT, "a step announcement of %zu bytes", bytes);
    memcpy(h, msg, sizeof *h);
    if (h->magic != STEP_MAGIC || (h->kind != KIND_STEP && h->kind != KIND_STOP))
        return hx_error(HX_ERR_FORMAT, "a step announcement that is not one (magic %08x, kind %u)", h->magic,
                        h->kind);
    if (h->kind == KIND_STOP)
        return HX_OK;
    const size_t ints = (size_t)h->T + h->meta_ints + h->n_out + h->n_kv_read + h->n_kv_written +
                        2 * (size_t)h->n_copies + h->n_ids;
    hx_kv_layout lay = {h->T, h->S, h->max_blocks, m->kv->block_size};
    if (bytes != sizeof *h + 4 * ints || h->T == 0 || h->T > m->opts.max_batch || h->n_out == 0 ||
        h->n_out > h->T || h->S == 0 || h->S > h->T || h->meta_ints != hx_meta_ints(&lay) ||
        h->n_ids != (m->stage.tp.on ? h->T : 0))
        return hx_error(HX_ERR_FORMAT, "step %llu: %u tokens, %u sequences, %u rows, %u layout ints in %zu bytes "
                                       "(max_batch %u here)",
                        (unsigned long long)h->step, h->T, h->S, h->n_out, h->meta_ints, bytes, m->opts.max_batch);
    /* The transport's buffer takes the hidden states next: the block lists
     * the tasks name live in the model's scratch until the step is done. */
    void *own;
    hx_status s = hx_model_scratch(m, HX_SCRATCH_KV_BLOCKS, bytes, &own);
    if (s)
        return s;
    memcpy(own, msg, bytes);
    const int32_t *in = (const int32_t *)(const void *)((const uint8_t *)own + sizeof *h);
    const int32_t *pos = in, *meta = pos + h->T, *rows = meta + h->meta_ints;
    const uint32_t *kv_read = (const uint32_t *)(rows + h->n_out), *kv_written = kv_read + h->n_kv_read;
    const uint32_t *copies = kv_written + h->n_kv_written;
    const int32_t *ids = (const int32_t *)(copies + 2 * h->n_copies);
    for (uint32_t i = 0; i < h->n_ids; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= m->info.n_vocab)
            return hx_error(HX_ERR_FORMAT, "step %llu names token %d; the vocabulary has %u",
                            (unsigned long long)h->step, ids[i], m->info.n_vocab);
    for (uint32_t i = 0; i < h->n_kv_read + h->n_kv_written; i++)
        if (kv_read[i] >= m->kv->n_blocks)
            return hx_error(HX_ERR_FORMAT, "step %llu names KV block %u; this rank's pool has %u",
                            (unsigned long long)h->step, kv_read[i], m->kv->n_blocks);
    for (uint32_t i = 0; i < h->n_copies && s == HX_OK; i++)
        s = hx_kv_pool_copy_block(m->kv, copies[2 * i], copies[2 * i + 1]);
    hx_activations *A = hx_model_act_for(m, h->T);
    if (s == HX_OK)
        s = hx_model_act_ensure(m, &A->meta, sizeof(int32_t) * h->meta_ints);
    int32_t *dpos, *dmeta, *drows, *dids;
    if (s == HX_OK && (s = hx_buffer_acquire(A->pos, HX_W, (void **)&dpos)) == HX_OK &&
        (s = hx_buffer_acquire(A->meta, HX_W, (void **)&dmeta)) == HX_OK &&
        (s = hx_buffer_acquire(A->out_rows, HX_W, (void **)&drows)) == HX_OK) {
        memcpy(dpos, pos, 4 * (size_t)h->T);
        memcpy(dmeta, meta, 4 * (size_t)h->meta_ints);
        memcpy(drows, rows, 4 * (size_t)h->n_out);
    }
    if (s == HX_OK && h->n_ids && (s = hx_buffer_acquire(A->ids, HX_W, (void **)&dids)) == HX_OK)
        memcpy(dids, ids, 4 * (size_t)h->n_ids);
    const hx_block_refs refs[2] = {{0, h->T, lay.block_size}, {3 * h->T, lay.S * lay.max_blocks, 1}};
    if (s == HX_OK)
        s = hx_buffer_set_block_refs(A->meta, m->kv->space, refs, 2);
    *b = (hx_batch_shape){.act = A, .T = h->T, .S = h->S, .max_blocks = h->max_blocks, .n_out = h->n_out,
                          .kv_read = kv_read, .kv_written = kv_written, .n_kv_read = h->n_kv_read,
                          .n_kv_written = h->n_kv_written};
    return s;
}

hx_status hx_pipeline_take_step(hx_model *m, const void *msg, size_t bytes, hx_batch_shape *b, uint64_t *step,
                                int *stop)
{
    step_header h = {0};
    hx_status s = take_step(m, msg, bytes, &h, b);
    *stop = s == HX_OK && h.kind == KIND_STOP;
    *step = h.step;
    return s;
}

hx_status hx_pipeline_serve(hx_model *m)
{
    if (m->stage.tp.on)
        return hx_tp_serve(m);
    hx_pipe *p = m->pipe;
    const int rank = m->stage.rank, last = rank == m->stage.size - 1;
    pthread_mutex_lock(&m->eval_lock);
    for (;;) {
        const void *msg;
        size_t bytes;
        pthread_mutex_unlock(&m->eval_lock); /* idle: hx_model_stats_get and the like may look */
        hx_status s = p->ops->recv(p->ctx, 0, HX_PIPE_TAG_STEP, 0, &msg, &bytes);
        pthread_mutex_lock(&m->eval_lock);
        step_header h;
        hx_batch_shape b;
        if (s == HX_OK)
            s = take_step(m, msg, bytes, &h, &b);
        if (s == HX_OK && h.kind == KIND_STOP)
            break;
        const struct hx_plan *plan = NULL;
        if (s == HX_OK)
            s = hx_plan_get_locked(m, &b, &plan);
        if (s == HX_OK)
            s = recv_rows(m, rank - 1, 1, b.act->x, h.T, h.step);
        if (s == HX_OK)
            s = hx_llama_emit_stage(m, &b, plan, NULL, NULL, hx_model_stage_l0(m), hx_model_stage_l1(m),
                                    last ? HX_STAGE_PICK : 0);
        hx_status waited = hx_runtime_wait_all(m->rt);
        if (s == HX_OK)
            s = waited;
        if (s == HX_OK)
            s = last ? send_rows(m, 0, b.act->xo, h.n_out, h.step) : send_rows(m, rank + 1, b.act->x, h.T, h.step);
        if (s) {
            pthread_mutex_unlock(&m->eval_lock);
            hx_pipeline_fail(m, s, "a step");
            return s;
        }
        p->steps++;
    }
    pthread_mutex_unlock(&m->eval_lock);
    return p->ops->flush(p->ctx);
}

hx_status hx_pipeline_stop(hx_pipe *p, int size)
{
    step_header h = {STEP_MAGIC, KIND_STOP, p->steps + 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    hx_status s = HX_OK;
    for (int r = 1; r < size && s == HX_OK; r++)
        s = send_counted(p, r, HX_PIPE_TAG_STEP, &h, sizeof h);
    hx_status f = p->ops->flush(p->ctx);
    return s ? s : f;
}
