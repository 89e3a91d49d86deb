/* The context and the KV pool: how many tokens one session may hold
 * (n_ctx) and how many the pool holds for all sessions, resolved from the
 * options and the machine's memory; and the check each evaluation and
 * generation makes before it does any work.  Internal. */
#ifndef HX_MODEL_CONTEXT_H
#define HX_MODEL_CONTEXT_H

#include "model/session.h"

/* Resolves options.n_ctx and options.kv_tokens (model.c calls it before
 * creating the KV pool) and fills the context fields of m->info. */
hx_status hx_model_resolve_context(hx_model *m);

/* Makes sure session `s` can take n_new more tokens now, plus up to
 * n_more after them (what a generation may add; counted up to the
 * context only, since generation stops there), by taking every KV block
 * that needs from the pool at once.  HX_ERR_RANGE when n_new does not fit
 * in the context, HX_ERR_NO_MEMORY when the pool cannot give the blocks;
 * the message names which ran out, with the numbers, and `what` the
 * request ("prompt", "evaluation").  On failure nothing changes. */
hx_status hx_session_fit(hx_session *s, size_t n_new, uint64_t n_more, const char *what);

#endif
