/* One batch on its way through the model: the model-side halves of an
 * evaluation.  hx_batch_prepare groups the entries by session, takes the
 * KV blocks they need, and fills the activation set's ids, positions, KV
 * slots and output rows; hx_batch_collect hands the computed logits back to
 * the sessions and advances them.  Between the two the engine has the
 * partitioner emit the graph (engine/eval.c).  Internal. */
#ifndef HX_ENGINE_BATCH_H
#define HX_ENGINE_BATCH_H

#include "engine/session.h"
#include "partitioner/partitioner.h"

typedef struct {
    hx_session *s;
    uint32_t count; /* entries of this session in the batch */
    uint32_t seen;  /* entries placed so far while filling  */
} hx_batch_seq;

typedef struct {
    hx_model *m;
    size_t n;                    /* entries */
    hx_session *const *sessions; /* per entry */
    const uint8_t *want;         /* per entry: keep its logits */
    hx_batch_seq *seqs;          /* the S distinct sessions */
    int32_t *seq_of;             /* per entry: its index in seqs */
    uint32_t n_out;              /* entries whose logits are kept */
    uint32_t n_hidden;           /* entries whose hidden state is kept (embeddings mode) */
    hx_batch_shape shape;        /* what the partitioner emits for */
    int mb;                      /* 1: the second micro-batch in flight (its own activations and scratch) */
} hx_batch_work;

/* Numbers the distinct sessions of n entries in order of first
 * appearance, in one pass (a batch of a server's running requests has
 * hundreds): distinct[k] is the k-th, slot[i] entry i's number; returns
 * how many there are.  Each session's batch_slot marks it while the pass
 * runs and is -1 again when it returns; the caller holds the model's
 * eval_lock, so the marks are its own. */
uint32_t hx_batch_number(hx_session *const *sessions, size_t n, int32_t *slot, hx_session **distinct);

/* Up to max_batch entries, each session already begun (hx_session_begin).
 * Fills `w`, which hx_batch_work_free releases whatever this returns. */
hx_status hx_batch_prepare(hx_batch_work *w, hx_model *m, size_t n, const int32_t *tokens,
                           hx_session *const *sessions, const uint8_t *want);

/* After the graph ran: the logits of the entries that want them go to
 * their sessions, and every session advances by its entries.  On failure
 * no session advances. */
hx_status hx_batch_collect(hx_batch_work *w);

/* hx_batch_prepare for micro-batch `mb` (0 or 1) of a pipeline's step:
 * the two use different activation sets and scratch, so both can be in
 * flight at once (engine/pipeline.c). */
hx_status hx_batch_prepare_mb(hx_batch_work *w, hx_model *m, int mb, size_t n, const int32_t *tokens,
                              hx_session *const *sessions, const uint8_t *want);

void hx_batch_work_free(hx_batch_work *w);

/* Sorts ids[0, n) and drops repeats; returns how many are left (KV block
 * lists). */
uint32_t hx_batch_sort_unique(uint32_t *ids, uint32_t n);

#endif
