/* Paged KV cache: the block pool, per-sequence block tables, and the
 * prefix store (keys, reference counts, the LRU list of cached blocks). */
#include <stdlib.h>
#include <string.h>

#include "model/kv_cache.h"
#include "runtime/block_space.h"
#include "runtime/buffer.h"
#include "runtime/error.h"

static hx_status head_bytes(hx_type type, uint32_t Dh, size_t *out)
{
    /* Q4_0: the CPU's attention reads it; OpenCL and CUDA refuse it, so
     * such attention stays on the CPU. */
    if (type != HX_TYPE_F16 && type != HX_TYPE_Q8_0 && type != HX_TYPE_F32 && type != HX_TYPE_Q4_0)
        return hx_error(HX_ERR_UNSUPPORTED, "KV cache type %s (f32, f16, q8_0 or q4_0)", hx_type_name(type));
    *out = hx_type_row_size(type, Dh);
    if (!*out)
        return hx_error(HX_ERR_INVALID_ARG, "KV cache type %s needs head_dim %u to be a multiple of %u",
                        hx_type_name(type), Dh, hx_type_get(type)->block_size);
    return HX_OK;
}

hx_status hx_kv_pool_create(hx_runtime *rt, hx_kv_types types, uint32_t n_layer, uint32_t Hkv, uint32_t Dh,
                            uint32_t n_tokens, uint32_t block_size, hx_kv_pool **out)
{
    return hx_kv_pool_create_layers(rt, types, n_layer, 0, n_layer, Hkv, Dh, n_tokens, block_size, out);
}

hx_status hx_kv_pool_create_layers(hx_runtime *rt, hx_kv_types types, uint32_t n_layer, uint32_t l0, uint32_t l1,
                                   uint32_t Hkv, uint32_t Dh, uint32_t n_tokens, uint32_t block_size,
                                   hx_kv_pool **out)
{
    *out = NULL;
    size_t head, vhead;
    hx_status hs = head_bytes(types.k, Dh, &head);
    if (hs == HX_OK)
        hs = head_bytes(types.v, Dh, &vhead);
    if (hs)
        return hs;
    if (block_size == 0 || block_size > 4096 || n_tokens == 0)
        return hx_error(HX_ERR_INVALID_ARG, "KV pool of %u tokens in blocks of %u", n_tokens, block_size);
    hx_kv_pool *p = calloc(1, sizeof *p);
    if (!p)
        return hx_error(HX_ERR_NO_MEMORY, "KV pool");
    p->rt = rt;
    p->types = types;
    p->n_layer = n_layer;
    p->l0 = l0;
    p->l1 = l1;
    p->Hkv = Hkv;
    p->Dh = Dh;
    p->block_size = block_size;
    p->n_blocks = (n_tokens + block_size - 1) / block_size;
    p->block_bytes = (size_t)block_size * Hkv * head;
    p->v_block_bytes = (size_t)block_size * Hkv * vhead;
    p->prefix_cache = 1;
    /* Blocks of other types or rotations hold other bytes for the same
     * tokens: the root key tells them apart. */
    p->seed = 0x9e3779b97f4a7c15ull ^ types.k ^ (uint64_t)types.v << 8 ^ (uint64_t)types.rot_k << 16 ^
              (uint64_t)types.rot_v << 32;
    p->lru_head = p->lru_tail = HX_KV_NONE;
    p->n_buckets = 1;
    while (p->n_buckets < p->n_blocks)
        p->n_buckets *= 2;
    pthread_mutex_init(&p->lock, NULL);
    p->k = calloc(n_layer, sizeof *p->k);
    p->v = calloc(n_layer, sizeof *p->v);
    p->free_ids = malloc(sizeof *p->free_ids * p->n_blocks);
    p->blocks = calloc(p->n_blocks, sizeof *p->blocks);
    p->tokens = malloc(sizeof *p->tokens * p->n_blocks * block_size);
    p->buckets = malloc(sizeof *p->buckets * p->n_buckets);
    p->parents = malloc(sizeof *p->parents * p->n_buckets);
    if (!p->k || !p->v || !p->free_ids || !p->blocks || !p->tokens || !p->buckets || !p->parents) {
        hx_kv_pool_free(p);
        return hx_error(HX_ERR_NO_MEMORY, "KV pool tables");
    }
    memset(p->buckets, 0xff, sizeof *p->buckets * p->n_buckets);
    memset(p->parents, 0xff, sizeof *p->parents * p->n_buckets);
    hx_status sp = hx_block_space_create(rt, p->n_blocks, &p->space);
    if (sp) {
        hx_kv_pool_free(p);
        return hx_error_context(sp, "KV pool");
    }
    for (uint32_t l = l0; l < l1; l++) {
        hx_status s = hx_buffer_create(rt, (size_t)p->n_blocks * p->block_bytes, &p->k[l]);
        if (s == HX_OK)
            s = hx_buffer_create(rt, (size_t)p->n_blocks * p->v_block_bytes, &p->v[l]);
        /* A block is the unit of residence: attention elsewhere moves the
         * blocks it reads, not the layer's whole cache, and a device with
         * memory of its own stores those blocks alone, in slots that every
         * layer shares. */
        if (s == HX_OK)
            s = hx_buffer_set_blocks_in(p->k[l], p->block_bytes, p->space);
        if (s == HX_OK)
            s = hx_buffer_set_blocks_in(p->v[l], p->v_block_bytes, p->space);
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

void hx_kv_pool_bound_devices(hx_kv_pool *p, uint64_t bytes)
{
    const uint64_t per_block = (uint64_t)(p->l1 - p->l0) * (p->block_bytes + p->v_block_bytes), slots = bytes / per_block;
    for (int d = 0; d < HX_MAX_DEVICES; d++)
        hx_block_space_set_budget(p->space, d, slots ? (slots < p->n_blocks ? (uint32_t)slots : p->n_blocks) : 1);
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
    free(p->copies);
    hx_block_space_destroy(p->space);
    free(p->free_ids);
    free(p->blocks);
    free(p->tokens);
    free(p->buckets);
    free(p->parents);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* ---- the hash table and the LRU list (callers hold the lock) ------------ */

static uint32_t *bucket_of(hx_kv_pool *p, uint64_t key) { return &p->buckets[key & (p->n_buckets - 1)]; }

/* Keys are hashes already; a parent is one too (or the pool's seed, mixed
 * with a salt), so its low bits spread as well. */
static uint32_t *parent_bucket_of(hx_kv_pool *p, uint64_t parent) { return &p->parents[parent & (p->n_buckets - 1)]; }

static void unlink_from(hx_kv_pool *p, uint32_t *at, uint32_t b, int by_parent)
{
    while (*at != b)
        at = by_parent ? &p->blocks[*at].pnext : &p->blocks[*at].hnext;
    *at = by_parent ? p->blocks[b].pnext : p->blocks[b].hnext;
}

static void unkey(hx_kv_pool *p, uint32_t b)
{
    hx_kv_block *k = &p->blocks[b];
    if (k->fill == p->block_size)
        unlink_from(p, bucket_of(p, k->key), b, 0);
    unlink_from(p, parent_bucket_of(p, k->parent), b, 1);
    k->keyed = 0;
}

/* Keys block b, holding `fill` tokens after `parent`: a full block by its
 * key and its parent, a partial one by its parent alone. */
static void key_block(hx_kv_pool *p, uint32_t b, uint64_t key, uint64_t parent, const int32_t *tokens, uint32_t fill)
{
    hx_kv_block *k = &p->blocks[b];
    k->keyed = 1;
    k->key = key;
    k->parent = parent;
    k->fill = fill;
    memcpy(p->tokens + (size_t)b * p->block_size, tokens, sizeof *tokens * fill);
    if (fill == p->block_size) {
        uint32_t *at = bucket_of(p, key);
        k->hnext = *at;
        *at = b;
    }
    uint32_t *at = parent_bucket_of(p, parent);
    k->pnext = *at;
    *at = b;
}

/* How many of the first n tokens block b holds as `tokens` does. */
static uint32_t common_prefix(const hx_kv_pool *p, uint32_t b, const int32_t *tokens, uint32_t n)
{
    const int32_t *t = p->tokens + (size_t)b * p->block_size;
    const uint32_t m = n < p->blocks[b].fill ? n : p->blocks[b].fill;
    uint32_t i = 0;
    while (i < m && t[i] == tokens[i])
        i++;
    return i;
}

static uint32_t find(hx_kv_pool *p, uint64_t key, uint64_t parent, const int32_t *tokens)
{
    /* The token ids are compared too: a 64-bit collision must not hand a
     * sequence another prompt's keys and values.  Only full blocks are in
     * this table (key_block). */
    for (uint32_t b = *bucket_of(p, key); b != HX_KV_NONE; b = p->blocks[b].hnext)
        if (p->blocks[b].key == key && p->blocks[b].parent == parent &&
            !memcmp(p->tokens + (size_t)b * p->block_size, tokens, sizeof *tokens * p->block_size))
            return b;
    return HX_KV_NONE;
}

static void lru_remove(hx_kv_pool *p, uint32_t b)
{
    hx_kv_block *k = &p->blocks[b];
    if (k->prev != HX_KV_NONE)
        p->blocks[k->prev].next = k->next;
    else
        p->lru_head = k->next;
    if (k->next != HX_KV_NONE)
        p->blocks[k->next].prev = k->prev;
    else
        p->lru_tail = k->prev;
    p->n_cached--;
}

static void lru_append(hx_kv_pool *p, uint32_t b)
{
    hx_kv_block *k = &p->blocks[b];
    k->prev = p->lru_tail;
    k->next = HX_KV_NONE;
    if (p->lru_tail != HX_KV_NONE)
        p->blocks[p->lru_tail].next = b;
    else
        p->lru_head = b;
    p->lru_tail = b;
    p->n_cached++;
}

/* A block for a sequence: a free one, else the least recently used cached
 * one, its key forgotten. */
static uint32_t take(hx_kv_pool *p)
{
    uint32_t b;
    if (p->n_free) {
        b = p->free_ids[--p->n_free];
    } else {
        b = p->lru_head;
        lru_remove(p, b);
        unkey(p, b);
        p->count.evictions++;
    }
    p->blocks[b].ref = 1;
    return b;
}

static void drop(hx_kv_pool *p, uint32_t b)
{
    if (b == HX_KV_NONE || --p->blocks[b].ref)
        return;
    if (p->blocks[b].keyed)
        lru_append(p, b);
    else
        p->free_ids[p->n_free++] = b;
}

static hx_status grow_table(hx_kv_seq *s, uint32_t need)
{
    if (need <= s->cap)
        return HX_OK;
    uint32_t cap = s->cap ? s->cap : 4;
    while (cap < need)
        cap *= 2;
    uint32_t *b = realloc(s->blocks, sizeof *b * cap);
    if (!b)
        return hx_error(HX_ERR_NO_MEMORY, "KV block table");
    s->blocks = b;
    s->cap = cap;
    return HX_OK;
}

/* ---- sequences ---------------------------------------------------------- */

hx_status hx_kv_seq_reserve(hx_kv_pool *p, hx_kv_seq *s, uint32_t n_tokens)
{
    uint32_t need = (n_tokens + p->block_size - 1) / p->block_size;
    if (need <= s->n_blocks)
        return HX_OK;
    hx_status st = grow_table(s, need);
    if (st)
        return st;
    pthread_mutex_lock(&p->lock);
    uint32_t more = need - s->n_blocks;
    if (more > p->n_free + p->n_cached) {
        uint32_t free_tokens = (p->n_free + p->n_cached) * p->block_size;
        pthread_mutex_unlock(&p->lock);
        return hx_error(HX_ERR_NO_MEMORY,
                        "KV cache memory: %u more blocks of %u tokens needed, %u tokens free of %u",
                        more, p->block_size, free_tokens, p->n_blocks * p->block_size);
    }
    uint32_t first = s->n_blocks;
    while (s->n_blocks < need)
        s->blocks[s->n_blocks++] = take(p);
    pthread_mutex_unlock(&p->lock);
    /* What a fresh block held is of no use: the first kv_store on another
     * device need not bring it over. */
    hx_block_list fresh = {s->blocks + first, need - first};
    for (uint32_t l = p->l0; l < p->l1; l++) {
        hx_buffer_discard(p->k[l], fresh);
        hx_buffer_discard(p->v[l], fresh);
    }
    /* valid everywhere now, so nothing copies them: their slots can go */
    hx_block_space_release(p->space, fresh.ids, fresh.n);
    return HX_OK;
}

uint32_t hx_kv_pool_free_tokens(hx_kv_pool *p)
{
    pthread_mutex_lock(&p->lock);
    uint32_t n = (p->n_free + p->n_cached) * p->block_size;
    pthread_mutex_unlock(&p->lock);
    return n;
}

void hx_kv_seq_truncate(hx_kv_pool *p, hx_kv_seq *s, uint32_t keep)
{
    pthread_mutex_lock(&p->lock);
    /* The last block first: a prefix's tail is the least likely to be
     * asked for again, so it goes first when room is needed (as vLLM). */
    while (s->n_blocks > keep)
        drop(p, s->blocks[--s->n_blocks]);
    pthread_mutex_unlock(&p->lock);
}

void hx_kv_seq_forget(hx_kv_pool *p, hx_kv_seq *s, uint32_t n)
{
    pthread_mutex_lock(&p->lock);
    for (uint32_t i = 0; i < n && i < s->n_blocks; i++) {
        drop(p, s->blocks[i]);
        s->blocks[i] = HX_KV_NONE;
    }
    pthread_mutex_unlock(&p->lock);
}

void hx_kv_seq_release(hx_kv_pool *p, hx_kv_seq *s)
{
    hx_kv_seq_truncate(p, s, 0);
    free(s->blocks);
    s->blocks = NULL;
    s->n_blocks = s->cap = 0;
}

/* Copies block `from` to block `to` in every layer's K and V, on the
 * host: `from` comes over, `to` becomes the host's, and the layer's other
 * blocks stay where they are.  A simulated machine's buffers hold no data
 * worth copying (runtime/buffer.c). */
static hx_status copy_block(hx_kv_pool *p, uint32_t from, uint32_t to)
{
    if (hx_runtime_simulated(p->rt))
        return HX_OK;
    for (uint32_t l = p->l0; l < p->l1; l++)
        for (int kv = 0; kv < 2; kv++) {
            hx_buffer *b = kv ? p->v[l] : p->k[l];
            uint8_t *src, *dst;
            hx_status st = hx_buffer_acquire_blocks(b, HX_R, (hx_block_list){&from, 1}, (void **)&src);
            if (st == HX_OK)
                st = hx_buffer_acquire_blocks(b, HX_W, (hx_block_list){&to, 1}, (void **)&dst);
            if (st)
                return hx_error_context(st, "copy of a shared KV block");
            const size_t bb = kv ? p->v_block_bytes : p->block_bytes;
            memcpy(dst + (size_t)to * bb, src + (size_t)from * bb, bb);
        }
    return HX_OK;
}

/* A copy made here is made on the pipeline's other ranks too, before
 * their next step (engine/pipeline.c): each holds its own layers' blocks. */
static hx_status log_copy(hx_kv_pool *p, uint32_t from, uint32_t to)
{
    if (p->n_copies == p->cap_copies) {
        uint32_t cap = p->cap_copies ? 2 * p->cap_copies : 16;
        uint32_t *c = realloc(p->copies, sizeof *c * 2 * cap);
        if (!c)
            return hx_error(HX_ERR_NO_MEMORY, "KV block copies for the pipeline's other ranks");
        p->copies = c;
        p->cap_copies = cap;
    }
    p->copies[2 * p->n_copies] = from;
    p->copies[2 * p->n_copies + 1] = to;
    p->n_copies++;
    return HX_OK;
}

hx_status hx_kv_pool_copy_block(hx_kv_pool *p, uint32_t from, uint32_t to)
{
    if (from >= p->n_blocks || to >= p->n_blocks)
        return hx_error(HX_ERR_RANGE, "KV block copy %u -> %u: the pool has %u blocks", from, to, p->n_blocks);
    return copy_block(p, from, to);
}

hx_status hx_kv_seq_make_writable(hx_kv_pool *p, hx_kv_seq *s, uint32_t first, uint32_t last)
{
    hx_status st = HX_OK;
    pthread_mutex_lock(&p->lock);
    for (uint32_t i = first; i <= last && i < s->n_blocks && st == HX_OK; i++) {
        uint32_t b = s->blocks[i];
        if (b == HX_KV_NONE) {
            st = hx_error(HX_ERR_STATE, "KV block %u of a session was returned to the pool (out of its window)", i);
            break;
        }
        if (p->blocks[b].ref == 1) {
            if (p->blocks[b].keyed)
                unkey(p, b);
            continue;
        }
        if (!p->n_free && !p->n_cached) {
            st = hx_error(HX_ERR_NO_MEMORY, "KV cache memory: no block left for a copy of a shared block "
                                            "(%u blocks, every one held)", p->n_blocks);
            break;
        }
        uint32_t c = take(p);
        st = copy_block(p, b, c);
        if (st == HX_OK && p->log_copies)
            st = log_copy(p, b, c);
        if (st) {
            drop(p, c);
            break;
        }
        p->blocks[b].ref--; /* still held by another sequence */
        s->blocks[i] = c;
    }
    pthread_mutex_unlock(&p->lock);
    return st;
}

hx_status hx_kv_seq_share(hx_kv_pool *p, const hx_kv_seq *src, hx_kv_seq *dst)
{
    hx_status st = grow_table(dst, src->n_blocks);
    if (st)
        return st;
    pthread_mutex_lock(&p->lock);
    for (uint32_t i = 0; i < src->n_blocks; i++)
        if ((dst->blocks[i] = src->blocks[i]) != HX_KV_NONE)
            p->blocks[src->blocks[i]].ref++;
    dst->n_blocks = src->n_blocks;
    pthread_mutex_unlock(&p->lock);
    return HX_OK;
}

/* ---- keys --------------------------------------------------------------- */

static uint64_t mix(uint64_t h, uint64_t v)
{
    /* splitmix64's finalizer over the running state: every input bit
     * reaches every output bit. */
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

uint64_t hx_kv_key(const hx_kv_pool *p, uint64_t parent, const int32_t *tokens)
{
    uint64_t h = mix(p->seed, parent);
    for (uint32_t i = 0; i < p->block_size; i++)
        h = mix(h, (uint32_t)tokens[i]);
    return h;
}

int hx_kv_seq_attach(hx_kv_pool *p, hx_kv_seq *s, uint32_t index, uint64_t key, uint64_t parent,
                     const int32_t *tokens)
{
    if (index > s->n_blocks || grow_table(s, index + 1))
        return 0;
    pthread_mutex_lock(&p->lock);
    uint32_t b = find(p, key, parent, tokens);
    if (b != HX_KV_NONE) {
        if (p->blocks[b].ref++ == 0)
            lru_remove(p, b);
        if (index < s->n_blocks)
            drop(p, s->blocks[index]);
        else
            s->n_blocks++;
        s->blocks[index] = b;
        p->count.tokens_reused += p->block_size;
    }
    pthread_mutex_unlock(&p->lock);
    return b != HX_KV_NONE;
}

void hx_kv_seq_publish(hx_kv_pool *p, hx_kv_seq *s, uint32_t index, uint64_t key, uint64_t parent,
                       const int32_t *tokens)
{
    pthread_mutex_lock(&p->lock);
    uint32_t b = s->blocks[index];
    if (b != HX_KV_NONE && !p->blocks[b].keyed && find(p, key, parent, tokens) == HX_KV_NONE)
        key_block(p, b, key, parent, tokens, p->block_size);
    pthread_mutex_unlock(&p->lock);
}

void hx_kv_seq_publish_partial(hx_kv_pool *p, hx_kv_seq *s, uint32_t index, uint64_t parent, const int32_t *tokens,
                               uint32_t fill)
{
    if (index >= s->n_blocks || !fill || fill >= p->block_size)
        return;
    pthread_mutex_lock(&p->lock);
    const uint32_t b = s->blocks[index];
    int keep = b != HX_KV_NONE && p->blocks[b].ref == 1 && !p->blocks[b].keyed;
    for (uint32_t e = *parent_bucket_of(p, parent), next; keep && e != HX_KV_NONE; e = next) {
        next = p->blocks[e].pnext;
        if (p->blocks[e].parent != parent)
            continue;
        const uint32_t common = common_prefix(p, e, tokens, fill);
        if (common == fill)
            keep = 0; /* e begins with these tokens already */
        else if (common == p->blocks[e].fill && p->blocks[e].ref == 0) {
            /* e holds a shorter prefix of them: this block replaces it */
            lru_remove(p, e);
            unkey(p, e);
            p->free_ids[p->n_free++] = e;
        }
    }
    if (keep)
        key_block(p, b, 0, parent, tokens, fill);
    pthread_mutex_unlock(&p->lock);
}

hx_status hx_kv_seq_attach_partial(hx_kv_pool *p, hx_kv_seq *s, uint32_t index, uint64_t parent,
                                   const int32_t *tokens, uint32_t n, uint32_t *out)
{
    *out = 0;
    if (!n || n >= p->block_size || index > s->n_blocks)
        return HX_OK;
    hx_status st = grow_table(s, index + 1);
    if (st)
        return st;
    pthread_mutex_lock(&p->lock);
    uint32_t best = HX_KV_NONE, shared = 0;
    for (uint32_t e = *parent_bucket_of(p, parent); e != HX_KV_NONE; e = p->blocks[e].pnext) {
        const uint32_t common = p->blocks[e].parent == parent ? common_prefix(p, e, tokens, n) : 0;
        if (common > shared) {
            best = e;
            shared = common;
        }
    }
    /* The copy needs a block besides the source, which stays pinned
     * meanwhile so that taking one cannot evict it. */
    if (best == HX_KV_NONE || (!p->n_free && p->n_cached <= (p->blocks[best].ref == 0))) {
        pthread_mutex_unlock(&p->lock);
        return HX_OK;
    }
    if (p->blocks[best].ref++ == 0)
        lru_remove(p, best);
    const uint32_t c = take(p);
    st = copy_block(p, best, c);
    if (st == HX_OK && p->log_copies)
        st = log_copy(p, best, c);
    drop(p, best);
    if (st) {
        drop(p, c);
        pthread_mutex_unlock(&p->lock);
        return st;
    }
    if (index < s->n_blocks)
        drop(p, s->blocks[index]);
    else
        s->n_blocks++;
    s->blocks[index] = c;
    p->count.tokens_reused += shared;
    pthread_mutex_unlock(&p->lock);
    *out = shared;
    return HX_OK;
}

void hx_kv_pool_count(hx_kv_pool *p, uint32_t hits, uint32_t misses)
{
    pthread_mutex_lock(&p->lock);
    p->count.hits += hits;
    p->count.misses += misses;
    pthread_mutex_unlock(&p->lock);
}

void hx_kv_pool_usage(hx_kv_pool *p, uint32_t *held, uint32_t *cached, uint32_t *shared, hx_kv_counters *c)
{
    pthread_mutex_lock(&p->lock);
    *held = p->n_blocks - p->n_free - p->n_cached;
    *cached = p->n_cached;
    *shared = 0;
    for (uint32_t b = 0; b < p->n_blocks; b++)
        *shared += p->blocks[b].ref > 1;
    *c = p->count;
    pthread_mutex_unlock(&p->lock);
}
