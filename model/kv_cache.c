/* Paged KV cache: the block pool and per-sequence block tables. */
#include <stdlib.h>

#include "model/kv_cache.h"
#include "runtime/error.h"

hx_status hx_kv_pool_create(hx_runtime *rt, hx_type type, uint32_t n_layer, uint32_t Hkv, uint32_t Dh,
                            uint32_t n_tokens, uint32_t block_size, hx_kv_pool **out)
{
    *out = NULL;
    if (type != HX_TYPE_F16 && type != HX_TYPE_Q8_0 && type != HX_TYPE_F32)
        return hx_error(HX_ERR_UNSUPPORTED, "KV cache type %s (f32, f16 or q8_0)", hx_type_name(type));
    size_t head = hx_type_row_size(type, Dh);
    if (!head)
        return hx_error(HX_ERR_INVALID_ARG, "KV cache type %s needs head_dim %u to be a multiple of %u",
                        hx_type_name(type), Dh, hx_type_get(type)->block_size);
    if (block_size == 0 || block_size > 4096 || n_tokens == 0)
        return hx_error(HX_ERR_INVALID_ARG, "KV pool of %u tokens in blocks of %u", n_tokens, block_size);
    hx_kv_pool *p = calloc(1, sizeof *p);
    if (!p)
        return hx_error(HX_ERR_NO_MEMORY, "KV pool");
    p->rt = rt;
    p->type = type;
    p->n_layer = n_layer;
    p->Hkv = Hkv;
    p->Dh = Dh;
    p->block_size = block_size;
    p->n_blocks = (n_tokens + block_size - 1) / block_size;
    pthread_mutex_init(&p->lock, NULL);
    p->k = calloc(n_layer, sizeof *p->k);
    p->v = calloc(n_layer, sizeof *p->v);
    p->free_ids = malloc(sizeof *p->free_ids * p->n_blocks);
    if (!p->k || !p->v || !p->free_ids) {
        hx_kv_pool_free(p);
        return hx_error(HX_ERR_NO_MEMORY, "KV pool tables");
    }
    size_t bytes = (size_t)p->n_blocks * block_size * Hkv * head;
    for (uint32_t l = 0; l < n_layer; l++) {
        hx_status s = hx_buffer_create(rt, bytes, &p->k[l]);
        if (s == HX_OK)
            s = hx_buffer_create(rt, bytes, &p->v[l]);
        if (s) {
            hx_kv_pool_free(p);
            return hx_error_context(s, "KV cache of layer %u", l);
        }
    }
    /* Lowest ids on top, so a fresh pool hands out blocks in order. */
    for (uint32_t i = 0; i < p->n_blocks; i++)
        p->free_ids[i] = p->n_blocks - 1 - i;
    p->n_free = p->n_blocks;
    *out = p;
    return HX_OK;
}

void hx_kv_pool_free(hx_kv_pool *p)
{
    if (!p)
        return;
    for (uint32_t l = 0; l < p->n_layer; l++) {
        if (p->k)
            hx_buffer_destroy(p->k[l]);
        if (p->v)
            hx_buffer_destroy(p->v[l]);
    }
    free(p->k);
    free(p->v);
    free(p->free_ids);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

hx_status hx_kv_seq_reserve(hx_kv_pool *p, hx_kv_seq *s, uint32_t n_tokens)
{
    uint32_t need = (n_tokens + p->block_size - 1) / p->block_size;
    if (need <= s->n_blocks)
        return HX_OK;
    if (need > s->cap) {
        uint32_t cap = s->cap ? s->cap : 4;
        while (cap < need)
            cap *= 2;
        uint32_t *b = realloc(s->blocks, sizeof *b * cap);
        if (!b)
            return hx_error(HX_ERR_NO_MEMORY, "KV block table");
        s->blocks = b;
        s->cap = cap;
    }
    pthread_mutex_lock(&p->lock);
    uint32_t more = need - s->n_blocks;
    if (more > p->n_free) {
        uint32_t free_tokens = p->n_free * p->block_size;
        pthread_mutex_unlock(&p->lock);
        return hx_error(HX_ERR_NO_MEMORY,
                        "KV cache memory: %u more blocks of %u tokens needed, %u tokens free of %u",
                        more, p->block_size, free_tokens, p->n_blocks * p->block_size);
    }
    while (s->n_blocks < need)
        s->blocks[s->n_blocks++] = p->free_ids[--p->n_free];
    pthread_mutex_unlock(&p->lock);
    return HX_OK;
}

uint32_t hx_kv_pool_free_tokens(hx_kv_pool *p)
{
    pthread_mutex_lock(&p->lock);
    uint32_t n = p->n_free * p->block_size;
    pthread_mutex_unlock(&p->lock);
    return n;
}

void hx_kv_seq_release(hx_kv_pool *p, hx_kv_seq *s)
{
    pthread_mutex_lock(&p->lock);
    for (uint32_t i = 0; i < s->n_blocks; i++)
        p->free_ids[p->n_free++] = s->blocks[i];
    pthread_mutex_unlock(&p->lock);
    free(s->blocks);
    s->blocks = NULL;
    s->n_blocks = s->cap = 0;
}
