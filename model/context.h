/* The context and the KV pool: how many tokens one session may hold
 * (n_ctx) and how many the pool holds for all sessions, resolved from the
 * options and the machine's memory.  The check each evaluation makes
 * against them before any work is the engine's (hx_session_fit in
 * engine/session.h).  Internal. */
#ifndef HX_MODEL_CONTEXT_H
#define HX_MODEL_CONTEXT_H

#include "model/model.h"

/* Resolves options.n_ctx and options.kv_tokens (model.c calls it before
 * creating the KV pool) and fills the context fields of m->info. */
hx_status hx_model_resolve_context(hx_model *m);

#endif
