/* KV offload by sequences in serving (partitioner/kv_offload.h for the
 * model of a step): HX_KV_OFFLOAD=N[:DEV] says that the GPU's memory
 * holds the KV cache of N sequences; each session beyond them, at its
 * first evaluation, is offloaded (its KV cache and attention on DEV: cpu,
 * the default, fpga, or a device index; none: the GPU alone) if the planner predicts that
 * running it beside the others raises the batch's tokens/s, and refused
 * with HX_ERR_NO_MEMORY otherwise, as the GPU alone would (a server then
 * keeps the request waiting).  A batch with sessions of both kinds runs
 * as two sub-batches in flight.  The GPU's KV slots (and an offload
 * device's with memory of its own) are bounded to the room its memory
 * has beside the weights.  Internal to the engine. */
#ifndef HX_ENGINE_KV_OFFLOAD_H
#define HX_ENGINE_KV_OFFLOAD_H

#include "engine/batch.h"

/* Decides where session s's KV cache lives, once, before its first
 * evaluation of n_tokens (n_more may follow).  Call with eval_lock held. */
hx_status hx_kv_offload_admit(hx_session *s, uint64_t n_tokens, uint64_t n_more);
/* A closing session leaves its count; a fork takes its parent's home. */
void hx_kv_offload_release(hx_session *s);
void hx_kv_offload_inherit(hx_session *f, const hx_session *parent);
/* Pins w's kv_store and attention to the offload device when every one
 * of its sessions is offloaded (hx_batch_shape.kv_pinned). */
void hx_kv_offload_pin(hx_batch_work *w);
/* Whether n entries hold sessions of both kinds. */
int hx_kv_offload_mixed(hx_session *const *sessions, size_t n);
/* Evaluates such a batch as two sub-batches in flight: the GPU's
 * sessions' and the offloaded ones'. */
hx_status hx_kv_offload_eval(hx_model *m, size_t n, const int32_t *tokens, hx_session *const *sessions,
                             const uint8_t *want);

#endif
