/* A session: one sequence's KV blocks, position and last logits. */
#ifndef HX_ENGINE_SESSION_H
#define HX_ENGINE_SESSION_H

#include "model/model.h"

struct hx_session {
    hx_model *m;
    hx_kv_seq seq;
    uint32_t pos;          /* tokens in the context */
    float *logits;         /* [n_logits][n_vocab] of the last evaluation */
    int32_t *logit_row;    /* per token of the last evaluation: its row in logits, or -1 */
    uint32_t n_logits, n_last, cap_logits, cap_last;
    uint32_t n_filled;     /* tokens of the current evaluation done so far */
    int32_t *tokens;       /* [cap_tokens]: the token id at each position */
    uint64_t *keys;        /* [cap_keys]: the prefix key of each full block */
    uint32_t cap_tokens, cap_keys, n_keys;
    uint32_t reused;       /* tokens the last evaluation took from the prefix cache */
    int in_request;        /* a multi-chunk evaluation runs: keep the window's blocks until it ends */
    int uncached;          /* takes nothing from the prefix cache and gives it nothing
                            * (hx_request.no_prefix_cache) */
    uint64_t salt;         /* the prefix cache's partition (hx_request.cache_salt); 0 = common */
    int shifted;           /* a context shift moved keys: blocks from keep_blocks on are not published */
    uint32_t keep_blocks;
    int32_t shift_keep;    /* hx_session_set_context_shift: tokens kept, -1 = no shift */
    uint32_t shift_discard;
    int32_t batch_slot;    /* while a batch is numbered (hx_batch_number): its place among the
                            * batch's sessions; -1 otherwise */
    int embd;              /* embeddings mode: `logits` holds final-norm hidden states, n_embd wide */
    /* KV offload (engine/kv_offload.c): 0 undecided, 1 its cache where the
     * GPU's plan puts it, 2 offloaded (hx_model.kv_off.dev); kv_counted:
     * it counts in the model's n_gpu or n_off (a fork shares its parent's
     * blocks and does not). */
    int kv_home, kv_counted;
};

/* Floats of one row of s->logits: n_embd in embeddings mode, else n_vocab. */
static inline size_t hx_session_row_width(const hx_session *s)
{
    return s->embd ? s->m->info.n_embd : s->m->info.n_vocab;
}

/* Prepares the per-token logits table for an evaluation of n tokens. */
hx_status hx_session_begin(hx_session *s, uint32_t n_tokens, uint32_t n_logits);

/* Makes sure session `s` can take n_new more tokens now, plus up to
 * n_more after them (what a generation may add; counted up to the
 * context only, since generation stops there), by taking every KV block
 * that needs from the pool at once.  HX_ERR_RANGE when n_new does not fit
 * in the context, HX_ERR_NO_MEMORY when the pool cannot give the blocks;
 * the message names which ran out, with the numbers, and `what` the
 * request ("prompt", "evaluation").  On failure nothing changes. */
hx_status hx_session_fit(hx_session *s, size_t n_new, uint64_t n_more, const char *what);

/* Evaluates a request's tokens (hx_session_eval), first attaching the
 * cached blocks of its leading tokens unless logits_all, and making
 * sure of the KV for n_more tokens after it (hx_session_fit).  engine/eval.c */
hx_status hx_session_eval_request(hx_session *s, const int32_t *tokens, size_t n, int logits_all, uint64_t n_more,
                                  const char *what);

/* The prefix cache (engine/session_prefix.c).  With the session at a block
 * boundary, attaches the cached blocks that hold the leading full blocks
 * of `tokens`, then a copy of the rows a cached block shares with what
 * follows (hx_kv_seq_attach_partial), always leaving the last token to
 * evaluate, and advances the session past them; *reused says how many
 * tokens that was. */
hx_status hx_session_reuse_prefix(hx_session *s, const int32_t *tokens, size_t n, uint32_t *reused);
/* hx_session_reuse_prefix for a caller that evaluates the rest later, in
 * chunks of its own (the serving engine, at admission): the whole cached
 * prefix is attached at once, whatever the chunks' boundaries; only hits
 * are counted, as the evaluations that follow probe, and count as misses,
 * the blocks it did not find.  Takes the model's eval_lock. */
hx_status hx_session_attach_cached(hx_session *s, const int32_t *tokens, size_t n, uint32_t *reused);
/* A batch's sessions as they were before hx_batch_reuse_prefix. */
typedef struct {
    hx_session *s;
    uint32_t pos0, reused;
} hx_batch_reuse;
/* hx_session_reuse_prefix over a batch of n entries (hx_batch_eval): for
 * each session whose entries keep no logits before its last one, attaches
 * the cached blocks of its leading tokens and leaves out their entries.
 * The entries kept go, in order, to out_tokens / out_sessions / out_want
 * (*kept of them); undo[] (one per session, *n_undo) says what each took. */
hx_status hx_batch_reuse_prefix(size_t n, const int32_t *tokens, hx_session *const *sessions, const uint8_t *want,
                                int32_t *out_tokens, hx_session **out_sessions, uint8_t *out_want, size_t *kept,
                                hx_batch_reuse *undo, size_t *n_undo);
/* A salt's 64-bit hash for hx_session.salt (0 for none: NULL or ""). */
uint64_t hx_session_salt_hash(const char *salt);
/* After an evaluation: keys the session's blocks it filled. */
void hx_session_publish(hx_session *s);
/* As the session ends: keys its last block, partly filled, as a partial
 * block (model/kv_cache.h), so that it stays cached once let go. */
void hx_session_publish_tail(hx_session *s);
/* Context shift (engine/session_shift.c) under the model's evaluation
 * lock; and, where the session asked for it and its context is full, the
 * shift it asked for (*shifted says whether one happened). */
hx_status hx_session_shift_locked(hx_session *s, uint32_t n_keep, uint32_t n_discard);
hx_status hx_session_shift_if_full(hx_session *s, int *shifted);
/* With a sliding window: gives back the blocks wholly before the window
 * of the session's next token. */
void hx_session_slide(hx_session *s);
/* Back to position pos (an evaluation that failed); with drop_blocks the
 * blocks past it go back to the pool (those attached from the cache),
 * else they stay reserved. */
void hx_session_rewind(hx_session *s, uint32_t pos, int drop_blocks);
/* Room to record the token ids of positions up to n_tokens. */
hx_status hx_session_grow_tokens(hx_session *s, uint32_t n_tokens);

#endif
