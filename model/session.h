/* A session: one sequence's KV blocks, position and last logits. */
#ifndef HX_MODEL_SESSION_H
#define HX_MODEL_SESSION_H

#include "model/model.h"

struct hx_session {
    hx_model *m;
    hx_kv_seq seq;
    uint32_t pos;          /* tokens in the context */
    float *logits;         /* [n_logits][n_vocab] of the last evaluation */
    int32_t *logit_row;    /* per token of the last evaluation: its row in logits, or -1 */
    uint32_t n_logits, n_last, cap_logits, cap_last;
    uint32_t n_filled;     /* tokens of the current evaluation done so far */
};

/* Prepares the per-token logits table for an evaluation of n tokens. */
hx_status hx_session_begin(hx_session *s, uint32_t n_tokens, uint32_t n_logits);

#endif
