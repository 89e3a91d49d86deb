/* Evaluation: a batch of (token, session) entries becomes one task graph.
 * This is the entry point of the session API (hx_session_eval,
 * hx_batch_eval).  The engine drives the partitioner: it prepares the
 * batch's activations and KV slots, has the partitioner emit the layer
 * graphs, waits, and hands the logits back to the sessions. */
#include <stdlib.h>
#include <string.h>

#include "engine/session.h"
#include "ops/ops.h"
#include "partitioner/partitioner.h"
#include "runtime/error.h"
#include "runtime/handle.h"

hx_status hx_model_act_ensure(hx_model *m, hx_buffer **b, size_t bytes);

typedef struct {
    hx_session *s;
    uint32_t count; /* entries of this session in the batch */
    uint32_t seen;  /* entries placed so far while filling  */
} batch_seq;

/* Up to max_batch entries, each session already begun (hx_session_begin).
 * On failure no session advances: its position and logits stay as they
 * were, and the KV slots written are overwritten by the next evaluation. */
static hx_status eval_core(hx_model *m, size_t n, const int32_t *tokens, hx_session *const *sessions,
                           const uint8_t *want)
{
    hx_activations *A = hx_model_act_for(m, (uint32_t)n);
    batch_seq *seqs = calloc(n, sizeof *seqs);
    if (!seqs)
        return hx_error(HX_ERR_NO_MEMORY, "batch of %zu", n);
    uint32_t S = 0, n_out = 0, max_blocks = 0;
    hx_status s = HX_OK;
    int32_t *seq_of = malloc(sizeof *seq_of * n);
    if (!seq_of) {
        free(seqs);
        return hx_error(HX_ERR_NO_MEMORY, "batch of %zu", n);
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t k = 0;
        while (k < S && seqs[k].s != sessions[i])
            k++;
        if (k == S)
            seqs[S++].s = sessions[i];
        seqs[k].count++;
        seq_of[i] = (int32_t)k;
        n_out += want[i] != 0;
    }
    for (uint32_t k = 0; k < S && s == HX_OK; k++) {
        hx_session *se = seqs[k].s;
        s = hx_session_fit(se, seqs[k].count, 0, "batch");
        if (se->seq.n_blocks > max_blocks)
            max_blocks = se->seq.n_blocks;
    }
    const uint32_t T = (uint32_t)n;
    hx_kv_layout lay = {T, S, max_blocks, m->kv->block_size};
    if (s == HX_OK)
        s = hx_model_act_ensure(m, &A->meta, sizeof(int32_t) * hx_meta_ints(&lay));
    if (s == HX_OK && n_out)
        s = hx_model_act_ensure(m, &A->logits, sizeof(float) * n_out * m->info.n_vocab);
    int32_t *ids, *pos, *meta, *rows;
    if (s == HX_OK && (s = hx_buffer_acquire(A->ids, HX_W, (void **)&ids)) == HX_OK &&
        (s = hx_buffer_acquire(A->pos, HX_W, (void **)&pos)) == HX_OK &&
        (s = hx_buffer_acquire(A->meta, HX_W, (void **)&meta)) == HX_OK &&
        (s = hx_buffer_acquire(A->out_rows, HX_W, (void **)&rows)) == HX_OK) {
        uint32_t r = 0;
        for (size_t i = 0; i < n; i++) {
            batch_seq *q = &seqs[seq_of[i]];
            uint32_t p = q->s->pos + q->seen++;
            ids[i] = tokens[i];
            pos[i] = (int32_t)p;
            meta[i] = (int32_t)hx_kv_slot(m->kv, &q->s->seq, p);
            meta[T + i] = (int32_t)p;
            meta[2 * T + i] = seq_of[i];
            if (want[i])
                rows[r++] = (int32_t)i;
        }
        for (uint32_t k = 0; k < S; k++) {
            int32_t *bt = meta + 3 * T + (size_t)k * max_blocks;
            const hx_kv_seq *sq = &seqs[k].s->seq;
            for (uint32_t j = 0; j < max_blocks; j++)
                bt[j] = j < sq->n_blocks ? (int32_t)sq->blocks[j] : -1;
        }
    }
    if (s == HX_OK) {
        hx_batch_shape shape = {A, T, S, max_blocks, n_out ? n_out : 1};
        if (!n_out) { /* keep the graph's shape fixed: compute one row, keep none */
            rows[0] = (int32_t)(n - 1);
        }
        const struct hx_plan *plan;
        s = hx_plan_get_locked(m, &plan);
        if (s == HX_OK)
            s = hx_llama_emit(m, &shape, plan, NULL, NULL);
        hx_status w = hx_runtime_wait_all(m->rt);
        if (s == HX_OK)
            s = w;
    }
    if (s == HX_OK && n_out) {
        const float *logits;
        s = hx_buffer_acquire(A->logits, HX_R, (void **)&logits);
        const size_t V = m->info.n_vocab;
        uint32_t r = 0;
        for (size_t i = 0; s == HX_OK && i < n; i++) {
            hx_session *se = sessions[i];
            uint32_t idx = se->n_filled++;
            if (!want[i])
                continue;
            memcpy(se->logits + (size_t)se->n_logits * V, logits + (size_t)r++ * V, V * sizeof(float));
            se->logit_row[idx] = (int32_t)se->n_logits++;
        }
    } else if (s == HX_OK) {
        for (size_t i = 0; i < n; i++)
            sessions[i]->n_filled++;
    }
    if (s == HX_OK)
        for (uint32_t k = 0; k < S; k++)
            seqs[k].s->pos += seqs[k].count;
    free(seqs);
    free(seq_of);
    return s;
}

static hx_status check_tokens(const hx_model *m, size_t n, const int32_t *tokens)
{
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= m->info.n_vocab)
            return hx_error(HX_ERR_RANGE, "token %zu is %d; the vocabulary has %u tokens", i, tokens[i],
                            m->info.n_vocab);
    return HX_OK;
}

static hx_status session_eval(hx_session *s, const int32_t *tokens, size_t n, int logits_all)
{
    hx_status hs = hx_handle_check(s, HX_HANDLE_SESSION, "hx_session_eval");
    if (hs)
        return hs;
    if (!tokens && n)
        return hx_error(HX_ERR_INVALID_ARG, "hx_session_eval: NULL tokens");
    if (n == 0)
        return hx_error(HX_ERR_INVALID_ARG, "hx_session_eval: no tokens");
    hx_model *m = s->m;
    hx_status st = check_tokens(m, n, tokens);
    if (st)
        return st;
    const uint32_t B = m->opts.max_batch;
    uint8_t *want = calloc(B, 1);
    hx_session **sess = malloc(sizeof *sess * B);
    if (!want || !sess) {
        free(want);
        free(sess);
        return hx_error(HX_ERR_NO_MEMORY, "evaluation of %zu tokens", n);
    }
    for (uint32_t i = 0; i < B; i++)
        sess[i] = s;
    pthread_mutex_lock(&m->eval_lock);
    const uint32_t pos0 = s->pos;
    /* The whole request before its first chunk: a prompt that cannot fit
     * is refused before any work, not after evaluating what fits, and
     * the session keeps even its last logits. */
    hx_status fit = hx_session_fit(s, n, 0, "evaluation");
    st = fit ? fit : hx_session_begin(s, (uint32_t)n, logits_all ? (uint32_t)n : 1);
    for (size_t off = 0; st == HX_OK && off < n; off += B) {
        size_t c = n - off < B ? n - off : B;
        for (size_t i = 0; i < c; i++)
            want[i] = logits_all || off + i == n - 1;
        st = eval_core(m, c, tokens + off, sess, want);
    }
    if (st && !fit) {
        /* All or nothing: a chunk that failed rolls back the earlier ones. */
        s->pos = pos0;
        s->n_last = 0;
    }
    pthread_mutex_unlock(&m->eval_lock);
    free(want);
    free(sess);
    return st;
}

hx_status hx_session_eval(hx_session *s, const int32_t *tokens, size_t n, int logits_all)
{
    hx_api_enter();
    return hx_api_leave(session_eval(s, tokens, n, logits_all));
}

static hx_status batch_eval(hx_model *m, const hx_batch *b)
{
    hx_status hs = hx_handle_check(m, HX_HANDLE_MODEL, "hx_batch_eval");
    if (hs)
        return hs;
    if (!b || !b->tokens || !b->sessions || b->n == 0)
        return hx_error(HX_ERR_INVALID_ARG, "hx_batch_eval: empty or NULL batch");
    if (b->n > m->opts.max_batch)
        return hx_error(HX_ERR_INVALID_ARG, "hx_batch_eval: %zu entries, max_batch is %u", b->n,
                        m->opts.max_batch);
    hx_status st = check_tokens(m, b->n, b->tokens);
    if (st)
        return st;
    for (size_t i = 0; i < b->n; i++)
        if (b->sessions[i] && (st = hx_handle_check(b->sessions[i], HX_HANDLE_SESSION, "hx_batch_eval")))
            return hx_error_context(st, "entry %zu", i);
    uint8_t *want = malloc(b->n);
    if (!want)
        return hx_error(HX_ERR_NO_MEMORY, "batch");
    for (size_t i = 0; i < b->n; i++) {
        if (!b->sessions[i] || b->sessions[i]->m != m) {
            free(want);
            return hx_error(HX_ERR_INVALID_ARG, "hx_batch_eval: entry %zu has no session of this model", i);
        }
        if (b->want_logits) {
            want[i] = b->want_logits[i] != 0;
        } else {
            want[i] = 1;
            for (size_t j = i + 1; j < b->n; j++)
                if (b->sessions[j] == b->sessions[i])
                    want[i] = 0;
        }
    }
    pthread_mutex_lock(&m->eval_lock);
    /* Each session's per-token table covers its entries in this batch. */
    for (size_t i = 0; i < b->n && st == HX_OK; i++) {
        int first = 1;
        uint32_t count = 0, nlog = 0;
        for (size_t j = 0; j < b->n; j++) {
            if (b->sessions[j] != b->sessions[i])
                continue;
            first &= j >= i;
            count++;
            nlog += want[j];
        }
        if (first)
            st = hx_session_begin(b->sessions[i], count, nlog);
    }
    if (st == HX_OK)
        st = eval_core(m, b->n, b->tokens, b->sessions, want);
    if (st)
        for (size_t i = 0; i < b->n; i++)
            b->sessions[i]->n_last = 0;
    pthread_mutex_unlock(&m->eval_lock);
    free(want);
    return st;
}

hx_status hx_batch_eval(hx_model *m, const hx_batch *b)
{
    hx_api_enter();
    return hx_api_leave(batch_eval(m, b));
}
