/* A block space: the block ids that several divided buffers share (a KV
 * cache: every layer's K and V buffers, whose block i is the same KV
 * block), and per device with memory of its own the slot each block has
 * in those buffers' storage there.
 *
 * A device keeps only the blocks its tasks named: a buffer of the space
 * is stored there as slots, block b at slot_of(b) * block_bytes, so its
 * memory there grows with the blocks attention on it reads, not with the
 * pool.  All the space's buffers use one slot numbering per device, so
 * one translation serves them all: the kernels find blocks through
 * integers in other buffers (the block tables and token slots of a batch's
 * metadata), and a buffer that holds such references (hx_buffer_set_block
 * _refs) reaches the device with them rewritten to its slots.  The host
 * (and any device in host memory) keeps the identity: slot = block.
 *
 * A block gets its slot when a task on the device names it and keeps it
 * until its contents stop mattering (hx_block_space_release, after the
 * buffers' hx_buffer_discard), or until a device held to a budget of
 * slots (hx_block_space_set_budget) needs the room: then the block named
 * there least recently whose contents the host holds in every buffer of
 * the space (nothing is lost) gives up its slot, its copies there
 * becoming stale (an epoch per block and device, which each buffer checks
 * before it trusts its copy).  With nothing to evict, a task that needs
 * more slots than the budget still gets them: the budget bounds what is
 * kept, not what one step reads.
 * Internal. */
#ifndef HX_RUNTIME_BLOCK_SPACE_H
#define HX_RUNTIME_BLOCK_SPACE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "runtime/runtime.h"

#define HX_SLOT_NONE UINT32_MAX

typedef struct {
    _Atomic uint32_t *slot_of; /* [n_blocks], HX_SLOT_NONE; NULL until the device maps a block */
    _Atomic uint32_t *epoch;   /* [n_blocks]: times the block was evicted there */
    uint64_t *named;           /* [n_blocks]: the mapping call that last named it */
    uint64_t calls;
    uint32_t *free;            /* freed slots, reused first */
    uint32_t n_free;
    uint32_t high;     /* slots handed out so far: 0 .. high - 1 */
    uint32_t budget;   /* slots to keep at most (0: no bound) */
    uint64_t version;  /* changes with every mapping: translated copies older than it are stale */
    uint64_t evictions;
} hx_space_device;

typedef struct hx_block_space {
    hx_runtime *rt;
    uint32_t n_blocks;
    pthread_mutex_t lock; /* taken after a buffer's lock, never before */
    /* [n_blocks]: buffers of the space whose host copy of the block is
     * stale (kept by each buffer's validity changes): 0 = the host holds
     * it everywhere, so a device may drop its copies */
    _Atomic uint32_t *off_host;
    hx_space_device dev[HX_MAX_DEVICES];
} hx_block_space;

hx_status hx_block_space_create(hx_runtime *rt, uint32_t n_blocks, hx_block_space **out);
void hx_block_space_destroy(hx_block_space *s);

/* Gives each block of ids[0..n) (ids NULL: every block) a slot on device
 * `dev`; *high: the slots the space's buffers need there now. */
hx_status hx_block_space_map(hx_block_space *s, int dev, const uint32_t *ids, uint32_t n, uint32_t *high);
/* Block b's slot on `dev` (HX_SLOT_NONE: it has none).  A block valid on
 * the device keeps its slot while it is valid, so this needs no lock. */
static inline uint32_t hx_block_space_slot(const hx_block_space *s, int dev, uint32_t b)
{
    return s->dev[dev].slot_of ? atomic_load_explicit(&s->dev[dev].slot_of[b], memory_order_relaxed) : HX_SLOT_NONE;
}
/* The block's eviction epoch on `dev`: a buffer's copy there made under
 * another epoch is stale. */
static inline uint32_t hx_block_space_epoch(const hx_block_space *s, int dev, uint32_t b)
{
    return s->dev[dev].epoch ? atomic_load_explicit(&s->dev[dev].epoch[b], memory_order_relaxed) : 0;
}
/* Slots `dev` keeps at most (0: no bound). */
void hx_block_space_set_budget(hx_block_space *s, int dev, uint32_t slots);
uint32_t hx_block_space_budget(hx_block_space *s, int dev);
/* Blocks evicted from `dev` so far. */
uint64_t hx_block_space_evictions(hx_block_space *s, int dev);
/* A buffer of the space now holds (on_host 1) or lacks (0) block b on the
 * host, where it did not before. */
static inline void hx_block_space_host_changed(hx_block_space *s, uint32_t b, int on_host)
{
    if (on_host)
        atomic_fetch_sub_explicit(&s->off_host[b], 1, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&s->off_host[b], 1, memory_order_relaxed);
}
/* The device's mapping's version (translated copies record it). */
uint64_t hx_block_space_version(hx_block_space *s, int dev);
/* Rewrites n int32 references in place for `dev`: each non-negative v is
 * block v / unit at offset v % unit, and becomes slot * unit + offset; a
 * block without a slot there becomes -1 (no task on the device named it,
 * so none reads it).  Negative values stay. */
void hx_block_space_translate(hx_block_space *s, int dev, int32_t *v, uint32_t n, uint32_t unit);
/* The contents of these blocks no longer matter (handed out afresh, and
 * every buffer of the space discarded them): their slots are freed on
 * every device. */
void hx_block_space_release(hx_block_space *s, const uint32_t *ids, uint32_t n);

#endif
