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
 * buffers' hx_buffer_discard); a freed slot goes to the next block named.
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
    uint32_t *free;            /* freed slots, reused first */
    uint32_t n_free;
    uint32_t high;     /* slots handed out so far: 0 .. high - 1 */
    uint64_t version;  /* changes with every mapping: translated copies older than it are stale */
} hx_space_device;

typedef struct hx_block_space {
    hx_runtime *rt;
    uint32_t n_blocks;
    pthread_mutex_t lock; /* taken after a buffer's lock, never before */
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
