/* Evaluation: a batch of (token, session) entries becomes one task graph.
 * This is the entry point of the session API (hx_session_eval,
 * hx_batch_eval).  The engine drives the partitioner: it prepares the
 * batch's activations and KV slots, has the partitioner emit the layer
 * graphs, waits, and hands the logits back to the sessions. */
#include <stdlib.h>
#include <string.h>

#include "engine/batch.h"
#include "engine/kv_offload.h"
#include "engine/pipeline.h"
#include "runtime/error.h"
#include "runtime/handle.h"

/* One evaluation of up to max_batch entries: the model side prepares the
 * batch, the partitioner emits its graph, the runtime runs it, and the
 * model side collects the logits.  On failure no session advances: its
 * position and logits stay as they were, and the KV slots written are
 * overwritten by the next evaluation. */
static hx_status eval_core(hx_model *m, size_t n, const int32_t *tokens, hx_session *const *sessions,
                           const uint8_t *want)
{
    hx_batch_work w;
    hx_status s = hx_batch_prepare(&w, m, n, tokens, sessions, want);
    if (s == HX_OK && m->stage.size > 1 && !m->pipe)
        s = hx_error(HX_ERR_STATE, "the model is rank %d's stage of a pipeline over %d ranks; hx_dist_start was "
                                   "not called", m->stage.rank, m->stage.size);
    if (s == HX_OK && m->pipe) {
        s = hx_pipeline_eval(m, &w); /* the layers on the pipeline's ranks (engine/pipeline.c) */
    } else if (s == HX_OK) {
        hx_kv_offload_pin(&w);
        const struct hx_plan *plan;
        s = hx_plan_get_locked(m, &w.shape, &plan);
        /* An offloaded batch's pins are not in the recordings' key. */
        if (s == HX_OK)
            s = w.shape.kv_pinned ? hx_llama_emit(m, &w.shape, plan, NULL, NULL) : hx_replay_emit(m, &w.shape, plan);
        hx_status waited = hx_runtime_wait_all(m->rt);
        if (s == HX_OK)
            s = waited;
    }
    if (s == HX_OK)
        s = hx_batch_collect(&w);
    hx_batch_work_free(&w);
    return s;
}

/* A pipeline's step of several sessions as two micro-batches in flight
 * (engine/pipeline.c): the sessions alternate between them, so their
 * entries never depend on each other.  Both are prepared before anything
 * is sent, so that a batch that cannot be prepared fails as one does in
 * a single process, no session advanced. */
static hx_status eval_split(hx_model *m, size_t n, const int32_t *tokens, hx_session *const *sessions,
                            const uint8_t *want)
{
    void *tables;
    const size_t per = sizeof(int32_t) + sizeof(hx_session *) + 1 + sizeof(int32_t);
    hx_status s = hx_model_scratch(m, HX_SCRATCH_SPLIT, 2 * n * per, &tables);
    if (s)
        return s;
    hx_session **sess = tables;                     /* [2][n] */
    int32_t *tok = (int32_t *)(void *)(sess + 2 * n); /* [2][n] */
    int32_t *slot = tok + 2 * n;                    /* [n]: each entry's session number */
    uint8_t *wnt = (uint8_t *)(slot + n);           /* [2][n] */
    hx_session **distinct = sess + n;               /* borrowed while numbering */
    hx_batch_number(sessions, n, slot, distinct);
    size_t k[2] = {0, 0};
    for (size_t i = 0; i < n; i++) {
        const int g = slot[i] & 1;
        sess[g * n + k[g]] = sessions[i];
        tok[g * n + k[g]] = tokens[i];
        wnt[g * n + k[g]] = want[i];
        k[g]++;
    }
    if (!k[0] || !k[1]) /* the prefix cache left one session's entries only */
        return eval_core(m, n, tokens, sessions, want);
    hx_batch_work w[2];
    s = hx_batch_prepare_mb(&w[0], m, 0, k[0], tok, sess, wnt);
    if (s == HX_OK)
        s = hx_batch_prepare_mb(&w[1], m, 1, k[1], tok + n, sess + n, wnt + n);
    else
        memset(&w[1], 0, sizeof w[1]);
    if (s == HX_OK)
        s = hx_pipeline_eval2(m, &w[0], &w[1]);
    if (s == HX_OK)
        s = hx_batch_collect(&w[0]);
    if (s == HX_OK)
        s = hx_batch_collect(&w[1]);
    hx_batch_work_free(&w[0]);
    hx_batch_work_free(&w[1]);
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

static hx_status session_eval(hx_session *s, const int32_t *tokens, size_t n, int logits_all, uint64_t n_more,
                              const char *what)
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
    pthread_mutex_lock(&m->eval_lock);
    /* Each chunk's entries and their want flags, in the model's scratch:
     * a decode step allocates nothing. */
    void *tables;
    st = hx_model_scratch(m, HX_SCRATCH_REQUEST, (sizeof(hx_session *) + 1) * B, &tables);
    if (st) {
        pthread_mutex_unlock(&m->eval_lock);
        return hx_error_context(st, "evaluation of %zu tokens", n);
    }
    hx_session **sess = tables;
    uint8_t *want = (uint8_t *)(sess + B);
    for (uint32_t i = 0; i < B; i++)
        sess[i] = s;
    const uint32_t pos0 = s->pos;
    /* Leading blocks the prefix cache holds are attached, not evaluated;
     * every token's logits need every token evaluated. */
    uint32_t reused = 0;
    st = hx_kv_offload_admit(s, n, n_more);
    if (st == HX_OK)
        st = logits_all ? HX_OK : hx_session_reuse_prefix(s, tokens, n, &reused);
    /* The whole request before its first chunk: a prompt that cannot fit
     * is refused before any work, not after evaluating what fits, and
     * the session keeps even its last logits. */
    hx_status fit = st ? st : hx_session_fit(s, n - reused, n_more, what);
    st = fit ? fit : hx_session_begin(s, (uint32_t)n, logits_all ? (uint32_t)n : 1);
    if (st == HX_OK)
        s->n_filled = reused;
    /* A chunk that fails rolls the session back: the blocks its first
     * tokens' window needs must still be there. */
    s->in_request = 1;
    for (size_t off = reused; st == HX_OK && off < n; off += B) {
        size_t c = n - off < B ? n - off : B;
        for (size_t i = 0; i < c; i++)
            want[i] = logits_all || off + i == n - 1;
        st = eval_core(m, c, tokens + off, sess, want);
    }
    s->in_request = 0;
    if (st == HX_OK) {
        s->reused = reused;
        hx_session_slide(s);
    } else {
        /* All or nothing: a chunk that failed rolls back the earlier ones,
         * and blocks attached from the cache go back to it. */
        hx_session_rewind(s, pos0, reused != 0);
        s->reused = 0;
        if (!fit)
            s->n_last = 0;
    }
    pthread_mutex_unlock(&m->eval_lock);
    return st;
}

hx_status hx_session_eval_request(hx_session *s, const int32_t *tokens, size_t n, int logits_all, uint64_t n_more,
                                  const char *what)
{
    return session_eval(s, tokens, n, logits_all, n_more, what);
}

hx_status hx_session_eval(hx_session *s, const int32_t *tokens, size_t n, int logits_all)
{
    hx_api_enter();
    return hx_api_leave(session_eval(s, tokens, n, logits_all, 0, "evaluation"));
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
    for (size_t i = 0; i < b->n; i++)
        if (!b->sessions[i] || b->sessions[i]->m != m)
            return hx_error(HX_ERR_INVALID_ARG, "hx_batch_eval: entry %zu has no session of this model", i);
    /* Per entry: its want flag and its session's number; per session: its
     * entries, its kept logits and its last entry.  One pass each, as a
     * server's step holds hundreds of entries. */
    typedef struct {
        uint32_t count, n_logits;
        size_t last;
    } group;
    /* Every per-entry table in the model's scratch: a decode step of a
     * server's running requests allocates nothing. */
    const size_t per_entry = sizeof(group) + sizeof(hx_batch_reuse) + 2 * sizeof(hx_session *) +
                             2 * sizeof(int32_t) + 2;
    pthread_mutex_lock(&m->eval_lock);
    void *tables;
    st = hx_model_scratch(m, HX_SCRATCH_REQUEST, b->n * per_entry, &tables);
    if (st) {
        pthread_mutex_unlock(&m->eval_lock);
        return hx_error_context(st, "batch of %zu", b->n);
    }
    memset(tables, 0, b->n * per_entry);
    group *g = tables;
    hx_batch_reuse *undo = (hx_batch_reuse *)(void *)(g + b->n);
    hx_session **distinct = (hx_session **)(void *)(undo + b->n);
    hx_session **sessions = distinct + b->n;
    int32_t *slot = (int32_t *)(void *)(sessions + b->n);
    int32_t *tokens = slot + b->n;
    uint8_t *want = (uint8_t *)(tokens + b->n);
    uint8_t *kept_want = want + b->n;
    size_t kept = 0, n_undo = 0;
    const uint32_t S = hx_batch_number(b->sessions, b->n, slot, distinct);
    for (size_t i = 0; i < b->n; i++) {
        g[slot[i]].count++;
        g[slot[i]].last = i;
    }
    for (size_t i = 0; i < b->n; i++) {
        want[i] = b->want_logits ? b->want_logits[i] != 0 : g[slot[i]].last == i;
        g[slot[i]].n_logits += want[i];
    }
    /* Where a new session's KV cache lives (HX_KV_OFFLOAD). */
    for (uint32_t k = 0; k < S && st == HX_OK; k++)
        st = hx_kv_offload_admit(distinct[k], g[k].count, 0);
    /* A prompt's leading blocks the cache holds are attached, their
     * entries left out, as in hx_session_eval. */
    if (st == HX_OK)
        st = hx_batch_reuse_prefix(b->n, b->tokens, b->sessions, want, tokens, sessions, kept_want, &kept, undo,
                               &n_undo);
    /* Each session's per-token table covers its entries in this batch. */
    for (uint32_t k = 0; k < S && st == HX_OK; k++)
        st = hx_session_begin(distinct[k], g[k].count, g[k].n_logits);
    for (size_t u = 0; u < n_undo && st == HX_OK; u++)
        undo[u].s->n_filled = undo[u].reused;
    /* A pipeline keeps two micro-batches in flight when the batch has
     * sessions enough (HX_MICRO_BATCHES=1: one batch per step). */
    const char *mbs = getenv("HX_MICRO_BATCHES");
    const int split = m->pipe && !m->stage.tp.on && S >= 2 && kept >= 2 && !(mbs && !strcmp(mbs, "1"));
    if (st == HX_OK)
        st = split ? eval_split(m, kept, tokens, sessions, kept_want)
             : hx_kv_offload_mixed(sessions, kept) ? hx_kv_offload_eval(m, kept, tokens, sessions, kept_want)
                                                   : eval_core(m, kept, tokens, sessions, kept_want);
    for (size_t u = 0; u < n_undo; u++) {
        undo[u].s->reused = st ? 0 : undo[u].reused;
        if (st && undo[u].reused)
            hx_session_rewind(undo[u].s, undo[u].pos0, 1);
    }
    if (st)
        for (uint32_t k = 0; k < S; k++)
            distinct[k]->n_last = 0;
    pthread_mutex_unlock(&m->eval_lock);
    return st;
}

hx_status hx_batch_eval(hx_model *m, const hx_batch *b)
{
    hx_api_enter();
    return hx_api_leave(batch_eval(m, b));
}
