/* The paged KV cache (vLLM's PagedAttention layout): per layer one K and
 * one V buffer of fixed-size blocks from a shared pool; each sequence keeps
 * a block table; blocks go back to the pool when the sequence ends. */
#ifndef HX_MODEL_KV_CACHE_H
#define HX_MODEL_KV_CACHE_H

#include <pthread.h>

#include "hetero.h"
#include "ops/types.h"

typedef struct {
    hx_runtime *rt;
    hx_type type;
    uint32_t n_layer, Hkv, Dh;
    uint32_t block_size, n_blocks;
    hx_buffer **k, **v;     /* [n_layer] */
    uint32_t *free_ids;     /* stack of free block ids */
    uint32_t n_free;
    pthread_mutex_t lock;
} hx_kv_pool;

typedef struct {
    uint32_t *blocks;
    uint32_t n_blocks, cap;
} hx_kv_seq;

hx_status hx_kv_pool_create(hx_runtime *rt, hx_type type, uint32_t n_layer, uint32_t Hkv, uint32_t Dh,
                            uint32_t n_tokens, uint32_t block_size, hx_kv_pool **out);
void hx_kv_pool_free(hx_kv_pool *p);
/* Grows the sequence's block table to hold n_tokens; on failure nothing
 * changes (HX_ERR_NO_MEMORY: the pool is exhausted). */
hx_status hx_kv_seq_reserve(hx_kv_pool *p, hx_kv_seq *s, uint32_t n_tokens);
/* Tokens the pool's free blocks hold now. */
uint32_t hx_kv_pool_free_tokens(hx_kv_pool *p);
/* Returns every block of the sequence to the pool. */
void hx_kv_seq_release(hx_kv_pool *p, hx_kv_seq *s);
/* Slot of position `pos`: block * block_size + offset. */
static inline uint32_t hx_kv_slot(const hx_kv_pool *p, const hx_kv_seq *s, uint32_t pos)
{
    return s->blocks[pos / p->block_size] * p->block_size + pos % p->block_size;
}

#endif
