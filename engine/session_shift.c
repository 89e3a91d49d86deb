/* Context shift (llama.cpp's --keep N and context shift): a session that
 * reached the context drops tokens after its first n_keep, and the keys
 * and values after them move back, the keys rotated to their new
 * positions (one kv_shift task per layer), so generation can go on.  With
 * a small n_keep and a small step this is StreamingLLM's attention sinks:
 * the first tokens stay, the oldest of the rest go. */
#include <stdlib.h>
#include <string.h>

#include "engine/batch.h"
#include "engine/session.h"
#include "ops/op_list.h"
#include "ops/ops.h"
#include "runtime/buffer.h"
#include "runtime/error.h"
#include "runtime/handle.h"

/* One kv_shift task per layer over the moves, naming the blocks they
 * read or write (the rest of the layer stays where it is), then waits. */
static hx_status shift_layers(hx_model *m, hx_buffer *moves, uint32_t n, int32_t delta, const uint32_t *blocks,
                              uint32_t n_blocks)
{
    hx_op_kv_shift a = {n,           m->info.n_head_kv, m->info.head_dim, m->kv_type,
                        delta,       m->hp.n_rot,       m->hp.rope_base,  m->hp.rope_scale,
                        m->arch->rope == HX_ROPE_NEOX, m->rope_freqs.buf != NULL, m->v_type, m->kv_rot_k, 0};
    hx_status st = HX_OK;
    for (uint32_t l = 0; l < m->info.n_layer && st == HX_OK; l++) {
        /* Keys are rotated with their layer's RoPE, as in the graph. */
        a.freq_base = hx_model_layer_rope_base(m, l);
        a.freq_scale = hx_model_layer_rope_scale(m, l);
        /* Keys stored centred are turned about their true origin: the
         * centre follows the factors (or the moves). */
        hx_buffer *center = m->layers[l].k_center;
        a.center_k = center != NULL;
        hx_task_desc d = {.codelet = hx_op_codelet(HX_OP_KV_SHIFT),
                          .nbuffers = 3 + (int)a.has_factors + (int)a.center_k,
                          .args = &a,
                          .args_size = sizeof a,
                          .device = -1,
                          .buffers = {m->kv->k[l], m->kv->v[l], moves,
                                      a.has_factors ? m->rope_freqs.buf : center, center},
                          .modes = {HX_RW, HX_RW, HX_R, HX_R, HX_R},
                          .blocks = blocks,
                          .nblocks = n_blocks};
        st = hx_task_submit(m->rt, &d, NULL);
    }
    hx_status waited = hx_runtime_wait_all(m->rt);
    return st ? st : waited;
}

/* The session's blocks from the one holding position `from` to the one
 * holding `to`, sorted, without repeats: those a shift reads or writes
 * (the kept blocks before them, whose keys keep their rotation, and other
 * sessions' blocks are not touched).  NULL when out of memory. */
static uint32_t *shifted_blocks(const hx_kv_seq *q, uint32_t bs, uint32_t from, uint32_t to, uint32_t *n)
{
    uint32_t *ids = malloc(sizeof *ids * (to / bs - from / bs + 1));
    *n = 0;
    for (uint32_t j = from / bs; ids && j <= to / bs && j < q->n_blocks; j++)
        if (q->blocks[j] != HX_KV_NONE)
            ids[(*n)++] = q->blocks[j];
    if (ids)
        *n = hx_batch_sort_unique(ids, *n);
    return ids;
}

static hx_status shift(hx_session *s, uint32_t n_keep, uint32_t n_discard)
{
    /* The other ranks' layers would keep their keys where they were. */
    if (s->m->stage.size > 1)
        return hx_error(HX_ERR_UNSUPPORTED, "context shift with a pipeline over %d ranks: not supported (the "
                                            "context is full; give a larger one)", s->m->stage.size);
    hx_model *m = s->m;
    hx_kv_pool *p = m->kv;
    const uint32_t bs = p->block_size, pos = s->pos;
    if (m->hp.n_swa)
        return hx_error(HX_ERR_UNSUPPORTED, "hx_session_shift: the model has a sliding window of %u; its sessions "
                                            "give back old blocks themselves",
                        m->hp.n_swa);
    if (n_discard == 0 || n_keep > pos || n_discard > pos - n_keep)
        return hx_error(HX_ERR_RANGE, "hx_session_shift: keep %u and drop %u of a session of %u tokens", n_keep,
                        n_discard, pos);
    const uint32_t n = pos - n_keep - n_discard, new_pos = pos - n_discard;
    hx_status st = n ? hx_kv_seq_make_writable(p, &s->seq, n_keep / bs, (new_pos - 1) / bs) : HX_OK;
    hx_buffer *moves = NULL;
    int32_t *mv;
    if (st == HX_OK && n && (st = hx_buffer_create(m->rt, sizeof *mv * 2 * n, &moves)) == HX_OK &&
        (st = hx_buffer_acquire(moves, HX_W, (void **)&mv)) == HX_OK) {
        for (uint32_t i = 0; i < n; i++) {
            mv[2 * i] = (int32_t)hx_kv_slot(p, &s->seq, n_keep + n_discard + i);
            mv[2 * i + 1] = (int32_t)hx_kv_slot(p, &s->seq, n_keep + i);
        }
        const hx_block_refs slots = {0, 2 * n, bs}; /* read as slots of a device's own, where it keeps them */
        st = hx_buffer_set_block_refs(moves, p->space, &slots, 1);
        uint32_t n_blocks;
        uint32_t *blocks = st ? NULL : shifted_blocks(&s->seq, bs, n_keep, pos - 1, &n_blocks);
        st = st ? st : blocks ? shift_layers(m, moves, n, -(int32_t)n_discard, blocks, n_blocks)
                    : hx_error(HX_ERR_NO_MEMORY, "the blocks of a context shift");
        free(blocks);
    }
    hx_buffer_destroy(moves);
    if (st)
        return hx_error_context(st, "context shift");
    hx_kv_seq_truncate(p, &s->seq, (new_pos + bs - 1) / bs);
    memmove(s->tokens + n_keep, s->tokens + n_keep + n_discard, sizeof *s->tokens * n);
    s->pos = new_pos;
    /* The moved keys are not what evaluating those tokens from the start
     * gives (the dropped ones were in their context): blocks from here on
     * are never offered to other sessions. */
    if (!s->shifted || n_keep / bs < s->keep_blocks)
        s->keep_blocks = n_keep / bs;
    s->shifted = 1;
    if (s->n_keys > s->keep_blocks)
        s->n_keys = s->keep_blocks;
    return HX_OK;
}

hx_status hx_session_shift_locked(hx_session *s, uint32_t n_keep, uint32_t n_discard)
{
    pthread_mutex_lock(&s->m->eval_lock);
    hx_status st = shift(s, n_keep, n_discard);
    pthread_mutex_unlock(&s->m->eval_lock);
    return st;
}

static hx_status session_shift(hx_session *s, uint32_t n_keep, uint32_t n_discard)
{
    hx_status st = hx_handle_check(s, HX_HANDLE_SESSION, "hx_session_shift");
    return st ? st : hx_session_shift_locked(s, n_keep, n_discard);
}

hx_status hx_session_shift(hx_session *s, uint32_t n_keep, uint32_t n_discard)
{
    hx_api_enter();
    return hx_api_leave(session_shift(s, n_keep, n_discard));
}

static hx_status set_context_shift(hx_session *s, int32_t n_keep, uint32_t n_discard)
{
    hx_status st = hx_handle_check(s, HX_HANDLE_SESSION, "hx_session_set_context_shift");
    if (st)
        return st;
    if (n_keep >= 0 && (uint32_t)n_keep + (n_discard ? n_discard : 1) >= s->m->opts.n_ctx)
        return hx_error(HX_ERR_RANGE, "context shift keeping %d and dropping %u: the context is %u tokens", n_keep,
                        n_discard, s->m->opts.n_ctx);
    s->shift_keep = n_keep;
    s->shift_discard = n_discard;
    return HX_OK;
}

hx_status hx_session_set_context_shift(hx_session *s, int32_t n_keep, uint32_t n_discard)
{
    hx_api_enter();
    return hx_api_leave(set_context_shift(s, n_keep, n_discard));
}

hx_status hx_session_shift_if_full(hx_session *s, int *shifted)
{
    *shifted = 0;
    if (s->shift_keep < 0 || s->pos < s->m->opts.n_ctx)
        return HX_OK;
    const uint32_t keep = (uint32_t)s->shift_keep;
    /* llama.cpp's default: half of what is not kept. */
    const uint32_t drop = s->shift_discard ? s->shift_discard : (s->pos - keep) / 2;
    *shifted = 1;
    return hx_session_shift_locked(s, keep, drop);
}
