/* The model-side halves of an evaluation (engine/batch.h): batch
 * bookkeeping, activations and KV slots before the graph, logits after. */
#include <stdlib.h>
#include <string.h>

#include "engine/batch.h"
#include "ops/ops.h"
#include "runtime/buffer.h"
#include "runtime/error.h"

uint32_t hx_batch_number(hx_session *const *sessions, size_t n, int32_t *slot, hx_session **distinct)
{
    uint32_t S = 0;
    for (size_t i = 0; i < n; i++) {
        hx_session *se = sessions[i];
        if (se->batch_slot < 0) {
            se->batch_slot = (int32_t)S;
            distinct[S++] = se;
        }
        slot[i] = se->batch_slot;
    }
    for (uint32_t k = 0; k < S; k++)
        distinct[k]->batch_slot = -1;
    return S;
}

/* Groups the entries by session and takes the KV blocks each needs. */
static hx_status group_sessions(hx_batch_work *w, hx_session **distinct, uint32_t *n_out, uint32_t *max_blocks)
{
    const uint32_t S = hx_batch_number(w->sessions, w->n, w->seq_of, distinct);
    hx_status s = HX_OK;
    for (uint32_t k = 0; k < S; k++)
        w->seqs[k].s = distinct[k];
    for (size_t i = 0; i < w->n; i++) {
        w->seqs[w->seq_of[i]].count++;
        if (w->want[i] && w->sessions[i]->embd)
            w->n_hidden++;
        else
            *n_out += w->want[i] != 0;
    }
    w->shape.S = S;
    for (uint32_t k = 0; k < S && s == HX_OK; k++) {
        hx_session *se = w->seqs[k].s;
        s = hx_session_fit(se, w->seqs[k].count, 0, "batch");
        /* The table reaches the sequence's last position in this batch, not
         * the blocks reserved ahead for the rest of its prompt or its
         * generation: attention reads no further, and the cost of an
         * attention task (ops/op_list.c) is that of the table's context. */
        uint32_t need = (se->pos + w->seqs[k].count - 1) / w->m->kv->block_size + 1;
        if (need > se->seq.n_blocks)
            need = se->seq.n_blocks;
        if (need > *max_blocks)
            *max_blocks = need;
    }
    return s;
}

/* Writes each entry's token, position and KV slot, the sequences' block
 * tables (ops/ops.h, hx_kv_layout) and the rows whose logits are kept. */
static void fill_inputs(hx_batch_work *w, const int32_t *tokens, int32_t *ids, int32_t *pos, int32_t *meta,
                        int32_t *rows)
{
    const hx_model *m = w->m;
    const uint32_t T = w->shape.T, S = w->shape.S, max_blocks = w->shape.max_blocks;
    /* The logits rows first, then the hidden states kept in embeddings
     * mode (hx_batch_shape.n_pick): the output matrix multiplies only the
     * first n_out rows. */
    uint32_t r = 0, h = w->n_out;
    for (size_t i = 0; i < w->n; i++) {
        hx_batch_seq *q = &w->seqs[w->seq_of[i]];
        uint32_t p = q->s->pos + q->seen++;
        ids[i] = tokens[i];
        pos[i] = (int32_t)p;
        meta[i] = (int32_t)hx_kv_slot(m->kv, &q->s->seq, p);
        q->s->tokens[p] = tokens[i]; /* the prefix key of its block, once full */
        meta[T + i] = (int32_t)p;
        meta[2 * T + i] = w->seq_of[i];
        if (w->want[i] && w->sessions[i]->embd)
            rows[h++] = (int32_t)i;
        else if (w->want[i])
            rows[r++] = (int32_t)i;
    }
    for (uint32_t k = 0; k < S; k++) {
        int32_t *bt = meta + 3 * T + (size_t)k * max_blocks;
        const hx_kv_seq *sq = &w->seqs[k].s->seq;
        for (uint32_t j = 0; j < max_blocks; j++)
            bt[j] = j < sq->n_blocks ? (int32_t)sq->blocks[j] : -1;
    }
    if (!r && !w->n_hidden) /* keep the graph's shape fixed: compute one row, keep none */
        rows[0] = (int32_t)(w->n - 1);
    /* With hidden states alone the output matrix's one row is the first
     * of them (w->n_out is 0: they start at row 0), its logits unused. */
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

uint32_t hx_batch_sort_unique(uint32_t *ids, uint32_t n)
{
    qsort(ids, n, sizeof *ids, cmp_u32);
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        if (k == 0 || ids[i] != ids[k - 1])
            ids[k++] = ids[i];
    return k;
}

/* The KV blocks the batch's attention reads (each sequence's blocks up to
 * its last position in the batch, shared prefix blocks once: the tables
 * are as wide as the furthest-reaching sequence's, so another's may hold
 * blocks reserved ahead, not yet written) and those its kv_store writes
 * (the tokens' slots). */
static hx_status list_kv_blocks(hx_batch_work *w, const int32_t *meta)
{
    const uint32_t T = w->shape.T, S = w->shape.S, max_blocks = w->shape.max_blocks;
    const uint32_t bs = w->m->kv->block_size;
    const uint32_t recent = w->m->opts.kv_split;
    const size_t table = (size_t)S * max_blocks;
    uint32_t *ids;
    hx_status s = hx_model_scratch(w->m, w->mb ? HX_SCRATCH_KV_BLOCKS_MB : HX_SCRATCH_KV_BLOCKS,
                                   sizeof *ids * (table * (recent ? 3 : 1) + T + 3 * (size_t)S), (void **)&ids);
    if (s)
        return hx_error_context(s, "KV block lists of a batch of %u", T);
    /* read, written, then (with a split) the parts' lists; then per
     * sequence the blocks read */
    uint32_t *last = ids + table * (recent ? 3 : 1) + T;
    /* Per sequence, with a split: the host's part reads blocks before
     * cut_hi, the device's from cut_lo (the cut moves with each token). */
    uint32_t *cut_lo = last + S, *cut_hi = cut_lo + S;
    memset(last, 0, sizeof *last * S);
    memset(cut_hi, 0, sizeof *cut_hi * S);
    for (uint32_t k = 0; k < S; k++)
        cut_lo[k] = UINT32_MAX;
    for (uint32_t i = 0; i < T; i++) {
        uint32_t k = (uint32_t)meta[2 * T + i], need = (uint32_t)meta[T + i] / bs + 1;
        if (need > last[k])
            last[k] = need;
        uint32_t cut = recent ? hx_attention_cut((uint32_t)meta[T + i], recent, bs) / bs : 0;
        cut_lo[k] = cut < cut_lo[k] ? cut : cut_lo[k];
        cut_hi[k] = cut > cut_hi[k] ? cut : cut_hi[k];
    }
    uint32_t n_read = 0, n_written = 0;
    for (uint32_t k = 0; k < S; k++) {
        const hx_kv_seq *sq = &w->seqs[k].s->seq;
        for (uint32_t j = 0; j < sq->n_blocks && j < last[k]; j++)
            if (sq->blocks[j] != HX_KV_NONE)
                ids[n_read++] = sq->blocks[j];
    }
    n_read = hx_batch_sort_unique(ids, n_read);
    uint32_t *written = ids + n_read;
    for (uint32_t i = 0; i < T; i++)
        written[n_written++] = (uint32_t)meta[i] / bs;
    n_written = hx_batch_sort_unique(written, n_written);
    if (recent) {
        uint32_t *part[2] = {written + n_written, written + n_written + table}, n_part[2] = {0, 0};
        for (uint32_t k = 0; k < S; k++) {
            const hx_kv_seq *sq = &w->seqs[k].s->seq;
            for (uint32_t j = 0; j < sq->n_blocks && j < last[k]; j++)
                for (int p = 0; p < 2; p++)
                    if (sq->blocks[j] != HX_KV_NONE && (p ? j >= cut_lo[k] : j < cut_hi[k]))
                        part[p][n_part[p]++] = sq->blocks[j];
        }
        for (int p = 0; p < 2; p++) {
            w->shape.kv_read_part[p] = part[p];
            w->shape.n_kv_read_part[p] = hx_batch_sort_unique(part[p], n_part[p]);
        }
    }
    w->shape.kv_read = ids;
    w->shape.n_kv_read = n_read;
    w->shape.kv_written = written;
    w->shape.n_kv_written = n_written;
    return HX_OK;
}

hx_status hx_batch_prepare(hx_batch_work *w, hx_model *m, size_t n, const int32_t *tokens,
                           hx_session *const *sessions, const uint8_t *want)
{
    return hx_batch_prepare_mb(w, m, 0, n, tokens, sessions, want);
}

hx_status hx_batch_prepare_mb(hx_batch_work *w, hx_model *m, int mb, size_t n, const int32_t *tokens,
                              hx_session *const *sessions, const uint8_t *want)
{
    memset(w, 0, sizeof *w);
    w->m = m;
    w->n = n;
    w->sessions = sessions;
    w->want = want;
    w->mb = mb;
    hx_activations *A = mb ? hx_model_act_for_mb(m, (uint32_t)n) : hx_model_act_for(m, (uint32_t)n);
    if (!A)
        return hx_error_context(HX_ERR_NO_MEMORY, "a second micro-batch's activations");
    /* the sequences, room for hx_batch_number's list of sessions, and each
     * entry's sequence, in the model's scratch: a decode step allocates
     * nothing */
    const size_t per_entry = sizeof *w->seqs + sizeof(hx_session *) + sizeof *w->seq_of;
    void *tables;
    hx_status s = hx_model_scratch(m, mb ? HX_SCRATCH_BATCH_MB : HX_SCRATCH_BATCH, per_entry * n, &tables);
    if (s)
        return hx_error_context(s, "batch of %zu", n);
    memset(tables, 0, per_entry * n);
    w->seqs = tables;
    w->seq_of = (int32_t *)(void *)((hx_session **)(void *)(w->seqs + n) + n);
    uint32_t n_out = 0, max_blocks = 0;
    s = group_sessions(w, (hx_session **)(void *)(w->seqs + n), &n_out, &max_blocks);
    const uint32_t T = (uint32_t)n;
    hx_kv_layout lay = {T, w->shape.S, max_blocks, m->kv->block_size};
    if (s == HX_OK)
        s = hx_model_act_ensure(m, &A->meta, sizeof(int32_t) * hx_meta_ints(&lay));
    if (s == HX_OK && n_out)
        s = hx_model_act_ensure(m, &A->logits, sizeof(float) * n_out * m->info.n_vocab);
    w->n_out = n_out;
    w->shape = (hx_batch_shape){.act = A, .T = T, .S = w->shape.S, .max_blocks = max_blocks,
                                .n_out = n_out ? n_out : 1,
                                .n_pick = w->n_hidden ? n_out + w->n_hidden : 0};
    int32_t *ids, *pos, *meta, *rows;
    if (s == HX_OK && (s = hx_buffer_acquire(A->ids, HX_W, (void **)&ids)) == HX_OK &&
        (s = hx_buffer_acquire(A->pos, HX_W, (void **)&pos)) == HX_OK &&
        (s = hx_buffer_acquire(A->meta, HX_W, (void **)&meta)) == HX_OK &&
        (s = hx_buffer_acquire(A->out_rows, HX_W, (void **)&rows)) == HX_OK) {
        fill_inputs(w, tokens, ids, pos, meta, rows);
        s = list_kv_blocks(w, meta);
    }
    /* The tokens' cache slots and the block tables name KV blocks: a
     * device that keeps blocks in slots of its own reads them as those. */
    const hx_block_refs refs[2] = {{0, T, lay.block_size}, {3 * T, lay.S * lay.max_blocks, 1}};
    if (s == HX_OK)
        s = hx_buffer_set_block_refs(A->meta, m->kv->space, refs, 2);
    return s;
}

hx_status hx_batch_collect(hx_batch_work *w)
{
    hx_status s = HX_OK;
    if (w->n_out || w->n_hidden) {
        const float *logits = NULL, *hidden = NULL;
        if (w->n_out)
            s = hx_buffer_acquire(w->shape.act->logits, HX_R, (void **)&logits);
        if (s == HX_OK && w->n_hidden)
            s = hx_buffer_acquire(w->shape.act->xo, HX_R, (void **)&hidden);
        const size_t V = w->m->info.n_vocab, D = w->m->info.n_embd;
        uint32_t r = 0, h = w->n_out;
        for (size_t i = 0; s == HX_OK && i < w->n; i++) {
            hx_session *se = w->sessions[i];
            uint32_t idx = se->n_filled++;
            if (!w->want[i])
                continue;
            if (se->embd)
                memcpy(se->logits + (size_t)se->n_logits * D, hidden + (size_t)h++ * D, D * sizeof(float));
            else
                memcpy(se->logits + (size_t)se->n_logits * V, logits + (size_t)r++ * V, V * sizeof(float));
            se->logit_row[idx] = (int32_t)se->n_logits++;
        }
    } else {
        for (size_t i = 0; i < w->n; i++)
            w->sessions[i]->n_filled++;
    }
    if (s == HX_OK)
        for (uint32_t k = 0; k < w->shape.S; k++) {
            w->seqs[k].s->pos += w->seqs[k].count;
            hx_session_publish(w->seqs[k].s);
            if (!w->seqs[k].s->in_request)
                hx_session_slide(w->seqs[k].s);
        }
    return s;
}

void hx_batch_work_free(hx_batch_work *w)
{
    /* the tables are the model's scratch, kept for the next evaluation */
    w->seqs = NULL;
    w->seq_of = NULL;
}
