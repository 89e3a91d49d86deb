/* The paged KV cache (vLLM's PagedAttention layout): per layer one K and
 * one V buffer of fixed-size blocks from a shared pool; each sequence keeps
 * a block table.
 *
 * The pool is also a store of prefixes (vLLM's automatic prefix caching):
 * a full block can carry a key, the hash of the previous block's key and
 * its token ids, so that a sequence starting with the same tokens attaches
 * the block instead of computing it again.  Blocks are reference counted;
 * a block held by several sequences, or keyed, is read-only, and a
 * sequence that must write into one takes a private copy first.  A keyed
 * block no sequence holds stays in the pool on an LRU list until its room
 * is needed.
 *
 * A sequence's last block, partly written when the sequence ends, is kept
 * too (a partial block: found by its parent alone, holding `fill` tokens):
 * a later sequence whose tokens after that parent begin as the block's do
 * takes a copy of it and keeps the rows they share (a full block whose
 * tokens part from the sequence's inside it serves so too), so a prompt
 * shorter than a block, or a prompt's tail, is not computed twice (as
 * llama-server reuses any common prefix of a slot's cache).  Every block
 * is in exactly one of three states:
 *   held     ref > 0 (keyed or not)
 *   cached   ref == 0, keyed: on the LRU list, evictable
 *   free     ref == 0, not keyed: on the free stack */
#ifndef HX_MODEL_KV_CACHE_H
#define HX_MODEL_KV_CACHE_H

#include <pthread.h>

#include "hetero.h"
#include "ops/types.h"

#define HX_KV_NONE UINT32_MAX

typedef struct {
    uint32_t ref;        /* sequences holding the block */
    uint32_t keyed;      /* its key is in the table: read-only */
    uint32_t fill;       /* positions a keyed block holds: block_size, or fewer for a partial block */
    uint64_t key, parent;
    uint32_t hnext;      /* next block of its key's hash bucket (full blocks) */
    uint32_t pnext;      /* next block of its parent's hash bucket (every keyed block) */
    uint32_t prev, next; /* LRU neighbours while cached */
} hx_kv_block;

typedef struct {
    uint64_t hits, misses;   /* prefix blocks found / looked up and not found */
    uint64_t evictions;      /* cached blocks whose room was taken */
    uint64_t tokens_reused;  /* tokens attached instead of evaluated */
} hx_kv_counters;

/* What the cache's bytes are: the K and V caches' types and the widths of
 * the Walsh-Hadamard rotation their rows are stored in (ops/ops.h). */
typedef struct {
    hx_type k, v;
    uint32_t rot_k, rot_v;
} hx_kv_types;

typedef struct {
    hx_runtime *rt;
    hx_kv_types types;
    uint32_t n_layer, Hkv, Dh;
    uint32_t block_size, n_blocks;
    size_t block_bytes;     /* of one block in one layer's K buffer */
    size_t v_block_bytes;   /* in its V buffer (the same unless the types differ) */
    hx_buffer **k, **v;     /* [n_layer]; NULL outside [l0, l1) */
    /* The layers whose K and V this pool holds: all of them, or a
     * pipeline stage's (model.h, hx_model_stage). */
    uint32_t l0, l1;
    /* With log_copies (a pipeline's rank 0): the copies of shared blocks
     * made since the log was last drained, (from, to) pairs. */
    int log_copies;
    uint32_t *copies, n_copies, cap_copies;
    struct hx_block_space *space; /* the blocks' slots on devices with memory of their own, shared by k and v */
    int prefix_cache;       /* keyed blocks are looked up and kept */
    uint64_t seed;          /* the root key: what else decides a block's contents */
    hx_kv_block *blocks;    /* [n_blocks] */
    int32_t *tokens;        /* [n_blocks][block_size]: a keyed block's token ids */
    uint32_t *free_ids;     /* stack of free block ids */
    uint32_t n_free;
    uint32_t lru_head, lru_tail, n_cached; /* head: least recently used */
    uint32_t *buckets, n_buckets;          /* hash table of full keyed blocks, by key */
    uint32_t *parents;                     /* [n_buckets]: of every keyed block, by parent */
    hx_kv_counters count;
    pthread_mutex_t lock;
} hx_kv_pool;

/* A block table: block i holds positions [i * block_size, (i + 1) *
 * block_size); HX_KV_NONE for a block given back (out of the window). */
typedef struct {
    uint32_t *blocks;
    uint32_t n_blocks, cap;
} hx_kv_seq;

hx_status hx_kv_pool_create(hx_runtime *rt, hx_kv_types types, uint32_t n_layer, uint32_t Hkv, uint32_t Dh,
                            uint32_t n_tokens, uint32_t block_size, hx_kv_pool **out);
/* A pool holding the K and V of layers [l0, l1) of n_layer only; its
 * blocks are numbered as every other such pool of the same size. */
hx_status hx_kv_pool_create_layers(hx_runtime *rt, hx_kv_types types, uint32_t n_layer, uint32_t l0, uint32_t l1,
                                   uint32_t Hkv, uint32_t Dh, uint32_t n_tokens, uint32_t block_size,
                                   hx_kv_pool **out);
/* Copies block `from` to `to` in the pool's layers, as another rank's
 * hx_kv_seq_make_writable did in its own. */
hx_status hx_kv_pool_copy_block(hx_kv_pool *p, uint32_t from, uint32_t to);
void hx_kv_pool_free(hx_kv_pool *p);
/* Devices with memory of their own keep at most `bytes` of the pool's
 * blocks (every layer's K and V; at least one block). */
void hx_kv_pool_bound_devices(hx_kv_pool *p, uint64_t bytes);
/* Grows the sequence's block table to hold n_tokens, taking free blocks
 * first and then evicting the least recently used cached ones; on failure
 * nothing changes (HX_ERR_NO_MEMORY: every block is held). */
hx_status hx_kv_seq_reserve(hx_kv_pool *p, hx_kv_seq *s, uint32_t n_tokens);
/* Tokens the pool could give now: free and cached blocks. */
uint32_t hx_kv_pool_free_tokens(hx_kv_pool *p);
/* Drops the sequence's hold on every block: a keyed block becomes cached
 * (its last block first in line for eviction), another one free. */
void hx_kv_seq_release(hx_kv_pool *p, hx_kv_seq *s);
/* Drops the first n blocks, leaving HX_KV_NONE in their place (a sliding
 * window has left them behind). */
void hx_kv_seq_forget(hx_kv_pool *p, hx_kv_seq *s, uint32_t n);
/* Drops the blocks from index `keep` on. */
void hx_kv_seq_truncate(hx_kv_pool *p, hx_kv_seq *s, uint32_t keep);
/* Makes blocks [first, last] of the sequence its own before it writes
 * them: a shared block is copied to a new one, a keyed block held by this
 * sequence alone loses its key.  HX_ERR_NO_MEMORY when no block is left
 * for a copy (the blocks done so far stay done: they hold the same data). */
hx_status hx_kv_seq_make_writable(hx_kv_pool *p, hx_kv_seq *s, uint32_t first, uint32_t last);
/* `dst` (empty) holds the same blocks as `src`. */
hx_status hx_kv_seq_share(hx_kv_pool *p, const hx_kv_seq *src, hx_kv_seq *dst);

/* The key of a full block: its token ids after the block keyed `parent`
 * (the pool's seed for the first block). */
uint64_t hx_kv_key(const hx_kv_pool *p, uint64_t parent, const int32_t *tokens);
/* Attaches the keyed block matching (key, parent, tokens) as the
 * sequence's block `index` (its block count, or a block of it not yet
 * written, which goes back to the pool).  0 when the pool has none. */
int hx_kv_seq_attach(hx_kv_pool *p, hx_kv_seq *s, uint32_t index, uint64_t key, uint64_t parent,
                     const int32_t *tokens);
/* Keys the sequence's full block `index`, now written, unless the pool
 * already has a block with that key. */
void hx_kv_seq_publish(hx_kv_pool *p, hx_kv_seq *s, uint32_t index, uint64_t key, uint64_t parent,
                       const int32_t *tokens);
/* Keys the sequence's block `index`, whose first `fill` (< block_size)
 * positions hold tokens[0, fill) after the block keyed `parent`, as a
 * partial block: called as the sequence ends, so that the block stays
 * cached once it is let go.  Nothing when the block is shared or a cached
 * partial block after the same parent already begins with these tokens;
 * a cached one that holds a shorter prefix of them is freed. */
void hx_kv_seq_publish_partial(hx_kv_pool *p, hx_kv_seq *s, uint32_t index, uint64_t parent, const int32_t *tokens,
                               uint32_t fill);
/* The sequence's block `index` (its block count, or a block of it not yet
 * written, which goes back to the pool) becomes a new block holding a copy
 * of the cached block after `parent` (partial, or full) whose tokens share
 * the longest prefix with tokens[0, n), n < block_size; *shared says how
 * many positions that is (0: no such block, or no block free for the
 * copy: nothing changed). */
hx_status hx_kv_seq_attach_partial(hx_kv_pool *p, hx_kv_seq *s, uint32_t index, uint64_t parent,
                                   const int32_t *tokens, uint32_t n, uint32_t *shared);
/* Counts a lookup's outcome: `hits` blocks attached, `misses` not found. */
void hx_kv_pool_count(hx_kv_pool *p, uint32_t hits, uint32_t misses);

/* Blocks held, cached, and held by more than one sequence, with the
 * counters, read at once. */
void hx_kv_pool_usage(hx_kv_pool *p, uint32_t *held, uint32_t *cached, uint32_t *shared, hx_kv_counters *c);

/* Slot of position `pos`: block * block_size + offset. */
static inline uint32_t hx_kv_slot(const hx_kv_pool *p, const hx_kv_seq *s, uint32_t pos)
{
    return s->blocks[pos / p->block_size] * p->block_size + pos % p->block_size;
}

#endif
