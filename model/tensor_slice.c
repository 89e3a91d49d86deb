/* Tensor parallelism within a layer (docs/mpi.md): the slice of every
 * layer one rank holds, and its weights cut to it.
 *
 * Attention is cut by KV head, each with its group of query heads (a
 * group never straddles two ranks: its queries read its keys), as evenly
 * as the groups allow, the first ranks taking one more; the FFN by
 * columns of its hidden layer, at the quantization blocks of the down
 * projection (whose rows the cut divides).  A rank then holds the rows of
 * Q, K, V, gate and up that produce its heads and columns, and the
 * columns of the output and down projections that read them: its partial
 * products of those two sum, over the ranks, to the whole layer's
 * (dist/, an all-reduce after each).
 *
 * Row slices stay in the mapped file (a slice is a range of whole rows);
 * column slices are copied out row by row, and the file's pages of the
 * whole matrix are given back, so a rank keeps only its own slice
 * resident.  The norms, the embedding and the output head are not cut. */
#include <stdio.h>
#include <string.h>

#include "model/model.h"
#include "runtime/error.h"

/* The share [*lo, *lo + *n) of `total` items for rank r of size, the
 * first total % size ranks one more. */
static void share(uint32_t total, int r, int size, uint32_t *lo, uint32_t *n)
{
    const uint32_t base = total / (uint32_t)size, extra = total % (uint32_t)size;
    *n = base + ((uint32_t)r < extra);
    *lo = base * (uint32_t)r + ((uint32_t)r < extra ? (uint32_t)r : extra);
}

static uint32_t block_of(hx_type t)
{
    const hx_type_traits *tr = hx_type_get(t);
    return tr && tr->block_size ? tr->block_size : 1;
}

/* Rows [lo, lo + n) of w, still in place (a vector: its elements). */
static hx_status slice_rows(hx_model *m, hx_weight *w, uint64_t lo, uint64_t n)
{
    if (!w->buf)
        return HX_OK;
    void *host;
    hx_status s = hx_buffer_acquire(w->buf, HX_R, &host);
    if (s)
        return s;
    const int vector = w->ne1 == 1;
    const size_t unit = vector ? hx_type_row_size(w->type, 1) : hx_type_row_size(w->type, w->ne0);
    hx_buffer *b;
    s = hx_buffer_wrap(m->rt, (uint8_t *)host + unit * lo, unit * n, 1, &b);
    if (s)
        return s;
    hx_buffer_destroy(w->buf);
    w->buf = b;
    if (vector)
        w->ne0 = n;
    else
        w->ne1 = n;
    return HX_OK;
}

/* Columns [lo, lo + n) of every row of w (whole blocks), copied. */
static hx_status slice_cols(hx_model *m, hx_weight *w, uint64_t lo, uint64_t n)
{
    if (!w->buf)
        return HX_OK;
    const uint32_t blk = block_of(w->type);
    if (lo % blk || n % blk)
        return hx_error(HX_ERR_STATE, "columns %llu + %llu of a %s matrix: not whole blocks",
                        (unsigned long long)lo, (unsigned long long)n, hx_type_name(w->type));
    const size_t row = hx_type_row_size(w->type, w->ne0), skip = hx_type_row_size(w->type, lo);
    const size_t part = hx_type_row_size(w->type, n);
    void *src, *dst;
    hx_buffer *b;
    hx_status s = hx_buffer_acquire(w->buf, HX_R, &src);
    if (s == HX_OK)
        s = hx_buffer_create(m->rt, part * w->ne1, &b);
    if (s)
        return s;
    if ((s = hx_buffer_acquire(b, HX_W, &dst))) {
        hx_buffer_destroy(b);
        return s;
    }
    for (uint64_t r = 0; r < w->ne1; r++)
        memcpy((uint8_t *)dst + part * r, (const uint8_t *)src + row * r + skip, part);
    /* the whole matrix was read: its pages go back to the file */
    hx_gguf_release_pages(m->gguf, src, row * w->ne1);
    hx_buffer_destroy(w->buf);
    w->buf = b;
    w->ne0 = n;
    return HX_OK;
}

/* The largest quantization block of a slot over the layers. */
static uint32_t widest_block(const hx_model *m, hx_layer_slot slot)
{
    uint32_t b = 1;
    for (uint32_t l = 0; l < m->info.n_layer; l++)
        if (m->layers[l].w[slot].buf && block_of(m->layers[l].w[slot].type) > b)
            b = block_of(m->layers[l].w[slot].type);
    return b;
}

/* Refuses, with its numbers, a model or a job that cannot be cut. */
static hx_status check_cut(const hx_model *m, int size, uint32_t *ff_unit)
{
    const hx_model_info *in = &m->info;
    if (m->hp.n_expert)
        return hx_error(HX_ERR_UNSUPPORTED, "tensor parallelism over %d ranks: a model with experts (%u) is not "
                                            "cut (use the pipeline: leave out --tensor-parallel)",
                        size, m->hp.n_expert);
    if (m->opts.kv_split)
        return hx_error(HX_ERR_UNSUPPORTED, "kv_split %u with tensor parallelism: not supported (leave HX_KV_SPLIT "
                                            "unset)", m->opts.kv_split);
    if ((uint32_t)size > in->n_head_kv)
        return hx_error(HX_ERR_INVALID_ARG, "tensor parallelism over %d ranks for %u KV heads: each rank needs a "
                                            "whole KV head with its %u query heads (at most %u ranks)",
                        size, in->n_head_kv, in->n_head / in->n_head_kv, in->n_head_kv);
    const uint32_t group = in->n_head / in->n_head_kv, bo = widest_block(m, HX_LW_O);
    for (int r = 1; r < size; r++) {
        uint32_t lo, n;
        share(in->n_head_kv, r, size, &lo, &n);
        const uint64_t col = (uint64_t)lo * group * in->head_dim;
        if (col % bo)
            return hx_error(HX_ERR_INVALID_ARG, "tensor parallelism over %d ranks: rank %d's heads start at column "
                                                "%llu of the output projection, which is in blocks of %u (heads of "
                                                "%u): not a block boundary",
                            size, r, (unsigned long long)col, bo, in->head_dim);
    }
    const uint32_t bd = widest_block(m, HX_LW_DOWN);
    if (in->n_ff % bd || in->n_ff / bd < (uint32_t)size)
        return hx_error(HX_ERR_INVALID_ARG, "tensor parallelism over %d ranks: the FFN's %u columns make %u%s "
                                            "blocks of %u (the down projection's quantization): fewer than the ranks",
                        size, in->n_ff, in->n_ff / bd, in->n_ff % bd ? " whole" : "", bd);
    *ff_unit = bd;
    return HX_OK;
}

hx_status hx_model_tp_slice(hx_model *m, int rank, int size)
{
    hx_model_info *in = &m->info;
    uint32_t unit = 1;
    hx_status s = check_cut(m, size, &unit);
    if (s)
        return s;
    hx_model_tp *tp = &m->stage.tp;
    const uint32_t group = in->n_head / in->n_head_kv, Dh = in->head_dim;
    *tp = (hx_model_tp){.on = 1, .n_head_all = in->n_head, .n_head_kv_all = in->n_head_kv, .n_ff_all = in->n_ff};
    share(in->n_head_kv, rank, size, &tp->kv_lo, &tp->n_kv);
    tp->head_lo = tp->kv_lo * group;
    tp->n_head = tp->n_kv * group;
    share(in->n_ff / unit, rank, size, &tp->ff_lo, &tp->n_ff);
    tp->ff_lo *= unit;
    tp->n_ff *= unit;
    const uint64_t q_lo = (uint64_t)tp->head_lo * Dh, q_n = (uint64_t)tp->n_head * Dh;
    const uint64_t k_lo = (uint64_t)tp->kv_lo * Dh, k_n = (uint64_t)tp->n_kv * Dh;
    for (uint32_t l = 0; l < in->n_layer && s == HX_OK; l++) {
        hx_weight *w = m->layers[l].w;
        const struct {
            hx_layer_slot slot;
            int cols;
            uint64_t lo, n;
        } cut[] = {
            {HX_LW_Q, 0, q_lo, q_n},           {HX_LW_Q_BIAS, 0, q_lo, q_n},
            {HX_LW_K, 0, k_lo, k_n},           {HX_LW_K_BIAS, 0, k_lo, k_n},
            {HX_LW_V, 0, k_lo, k_n},           {HX_LW_V_BIAS, 0, k_lo, k_n},
            {HX_LW_O, 1, q_lo, q_n},           {HX_LW_GATE, 0, tp->ff_lo, tp->n_ff},
            {HX_LW_UP, 0, tp->ff_lo, tp->n_ff}, {HX_LW_DOWN, 1, tp->ff_lo, tp->n_ff},
        };
        for (size_t i = 0; i < sizeof cut / sizeof *cut && s == HX_OK; i++)
            s = cut[i].cols ? slice_cols(m, &w[cut[i].slot], cut[i].lo, cut[i].n)
                            : slice_rows(m, &w[cut[i].slot], cut[i].lo, cut[i].n);
        if (s)
            hx_error_context(s, "layer %u's slice for rank %d", l, rank);
    }
    if (s)
        return s;
    in->n_head = tp->n_head;
    in->n_head_kv = tp->n_kv;
    in->n_ff = tp->n_ff;
    m->hp.q_dim = tp->n_head * Dh;
    return HX_OK;
}
