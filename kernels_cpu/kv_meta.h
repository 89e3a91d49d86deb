/* The paged KV cache's metadata buffer as the CPU kernels read it
 * (ops/ops.h, hx_kv_layout): T slots, T positions, T sequence ids, then
 * each sequence's block table of max_blocks entries. */
#ifndef HX_KERNELS_CPU_KV_META_H
#define HX_KERNELS_CPU_KV_META_H

#include <stdint.h>

#include "ops/ops.h"

static inline int32_t hx_kv_token_slot(const int32_t *meta, uint32_t t) { return meta[t]; }
static inline int32_t hx_kv_token_pos(const hx_kv_layout *l, const int32_t *meta, uint32_t t)
{
    return meta[l->T + t];
}
static inline int32_t hx_kv_token_seq(const hx_kv_layout *l, const int32_t *meta, uint32_t t)
{
    return meta[2 * l->T + t];
}
static inline const int32_t *hx_kv_seq_blocks(const hx_kv_layout *l, const int32_t *meta, int32_t s)
{
    return meta + 3 * l->T + (uint64_t)s * l->max_blocks;
}

#endif
