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
    int32_t batch_slot;    /* while a batch is numbered (hx_batch_number): its place among the
                            * batch's sessions; -1 otherwise */
};

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

#endif
