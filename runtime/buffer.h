/* Unified buffers: one logical array, a replica per memory node, MSI
 * coherence (a node is Modified when it holds the only valid copy, Shared
 * when others hold one too, Invalid otherwise).
 *
 * Validity is kept per block: a buffer is one block unless
 * hx_buffer_set_blocks divides it (a KV cache layer: one block per KV
 * block of the pool), and a task that names blocks (hx_task_desc.blocks)
 * makes only those valid where it runs, so attention on another device
 * moves the blocks it reads rather than the whole layer's cache.  A buffer
 * divided within a block space (hx_buffer_set_blocks_in, block_space.h)
 * is also stored per block on a device with memory of its own: slots for
 * the blocks tasks there named, not the whole buffer; one divided alone
 * (hx_buffer_set_blocks) has whole-sized replicas.  The runtime counts,
 * per device, the blocks its tasks named (`named`).  Internal. */
#ifndef HX_RUNTIME_BUFFER_H
#define HX_RUNTIME_BUFFER_H

#include <pthread.h>

#include "runtime/block_space.h"
#include "runtime/runtime.h"
#include "runtime/task.h"

#define HX_MAX_NODES HX_MAX_DEVICES

/* Integers of a buffer that name blocks of a space: ints [first, first +
 * count), each non-negative one block v / unit at offset v % unit (unit
 * 1: block ids; a KV block's token count: cache slots). */
typedef struct {
    uint32_t first, count, unit;
} hx_block_refs;

#define HX_BLOCK_REFS_MAX 4

struct hx_buffer {
    hx_runtime *rt;
    void *host;
    size_t size;
    int owns_host;   /* 0 for wrapped memory */
    int numa_alloc;  /* freed with numa_free */
    int read_only;

    /* Dependency tracking, under rt->lock. */
    hx_task *last_writer;
    hx_task **readers;
    int nreaders, capreaders;
    int users;       /* submitted tasks not yet completed */

    /* Coherence, under `lock`. */
    pthread_mutex_t lock;
    size_t block_bytes;     /* size of each block but the last */
    uint32_t n_blocks;      /* 1 unless divided */
    int divided;            /* hx_buffer_set_blocks was called: tasks' block lists apply */
    uint32_t *valid;        /* [n_blocks]: bit n = node n holds the block; &valid_one when undivided */
    uint32_t valid_one;
    uint32_t *named;        /* [n_blocks] when divided: bit d = a task on device d named the block since
                               it was last discarded (devices with memory of their own) */
    uint64_t reads;  /* tasks that read it so far (dmda amortizes copies of read-only data over them) */
    void *handle[HX_MAX_DEVICES];
    size_t dev_bytes[HX_MAX_DEVICES]; /* a divided buffer's storage on each device with memory of its own */

    /* Divided within a block space: on a device with memory of its own
     * its storage holds slots[d] slots of block_bytes, block i at the
     * space's slot of i. */
    hx_block_space *space;
    uint32_t slots[HX_MAX_DEVICES];
    uint32_t *epoch_seen[HX_MAX_DEVICES]; /* [n_blocks]: the eviction epoch of each copy there */
    /* Block references the contents hold (hx_buffer_set_block_refs): a
     * device with memory of its own receives them as its slots, and a
     * copy translated under an older mapping than the space's is stale. */
    hx_block_space *refs_space;
    hx_block_refs refs[HX_BLOCK_REFS_MAX];
    int nrefs;
    uint64_t refs_version[HX_MAX_DEVICES];

    /* The same data laid out for the CPU's kernels (a model's weights
     * repacked, kernels_cpu/repack.h): opaque here, handed to CPU tasks
     * beside the host pointer, freed with the buffer.  NULL: none. */
    void *cpu_layout;
    void (*cpu_layout_free)(void *layout);
};

/* The blocks a task names for a buffer: ids of a divided buffer's blocks
 * (sorted or not, no repeats needed), or every block when `ids` is NULL
 * or the buffer is not divided. */
typedef struct {
    const uint32_t *ids;
    uint32_t n;
} hx_block_list;

/* hx_buffer_set_blocks within a block space of as many blocks: the
 * buffer is then stored per block on devices with memory of its own.  A
 * buffer no device with memory of its own has stored yet. */
hx_status hx_buffer_set_blocks_in(hx_buffer *b, size_t block_bytes, hx_block_space *space);
/* The buffer's int32 contents hold these block references to `space`
 * (n <= HX_BLOCK_REFS_MAX ranges; n 0: none), from its next copy to a
 * device on.  Such a buffer is written by the host only: a device with
 * memory of its own reads it. */
hx_status hx_buffer_set_block_refs(hx_buffer *b, hx_block_space *space, const hx_block_refs *refs, int n);
/* Bytes of the buffer's storage that `d`'s handle covers: fewer than its
 * size for a buffer stored per block there (tasks' kernels bound their
 * slots by it). */
size_t hx_buffer_device_bytes(const hx_buffer *b, const hx_device *d);

/* Makes the buffer usable by device `d` with `mode` and returns the
 * device's handle; copies from another node the blocks of `blocks` whose
 * replica there is stale.  Buffers with block references go after the
 * others of a task, so that they are translated under the slots the
 * task's blocks were given. */
hx_status hx_buffer_prepare(hx_buffer *b, hx_device *d, hx_access mode, hx_block_list blocks, void **handle);
/* After a task on `d` wrote `blocks` of the buffer: `d`'s node becomes
 * their owner. */
hx_status hx_buffer_written(hx_buffer *b, hx_device *d, hx_block_list blocks);
/* The handle of a task's buffer on a runtime whose one device works in
 * host memory (a graph launch, runtime/task.h): its host storage, valid
 * there always, so with nothing to copy, mark or lock; the blocks named
 * are checked as hx_buffer_prepare checks them. */
hx_status hx_buffer_host_handle(const hx_buffer *b, hx_block_list blocks, void **handle);
/* hx_buffer_acquire for `blocks` of a divided buffer alone: those come to
 * the host for HX_R, and only those become the host's for HX_W (the other
 * blocks stay valid where they are). */
hx_status hx_buffer_acquire_blocks(hx_buffer *b, hx_access mode, hx_block_list blocks, void **host);
/* The contents of `blocks` of a divided buffer no longer matter (a KV
 * block handed out afresh): every node counts as holding them, so that the
 * first task to write part of one copies nothing in. */
void hx_buffer_discard(hx_buffer *b, hx_block_list blocks);
/* Bytes of `blocks` that node `node` lacks: those a copy from host memory
 * brings (*from_host) and those that must first come from another device
 * (*from_device).  For transfer-cost estimates. */
void hx_buffer_stale_bytes(hx_buffer *b, int node, hx_block_list blocks, double *from_host, double *from_device);
/* The blocks the task names (they apply to its divided buffers). */
static inline hx_block_list hx_task_blocks(const hx_task *t)
{
    return (hx_block_list){t->desc.blocks, t->desc.nblocks};
}
/* Gives a read-only buffer its CPU layout (struct hx_buffer says what);
 * the buffer frees it with free_fn. */
void hx_buffer_set_cpu_layout(hx_buffer *b, void *layout, void (*free_fn)(void *layout));
/* From now on no task writes it (a model's weights). */
void hx_buffer_set_read_only(hx_buffer *b);
/* Frees a read-only buffer's replica on device `dev` (one with memory of
 * its own) once no task uses it; the host's copy stays the valid one.
 * Returns the bytes freed (0: none there, or not a read-only undivided
 * buffer, or another device of that memory node holds it). */
size_t hx_buffer_evict(hx_buffer *b, int dev);

/* Before a task that may fail writes the buffer on `d`: makes sure its
 * contents can be brought back (a host copy when `d` writes host memory
 * in place, another valid replica otherwise).  *saved is for rollback. */
hx_status hx_buffer_checkpoint(hx_buffer *b, hx_device *d, void **saved);
/* After a failed task on `d` may have written part of the buffer: restores
 * the checkpoint, or marks `d`'s replica invalid when another node holds
 * the data.  Returns 1 when the buffer holds its contents from before the
 * task, 0 when they are lost (the host copy was written in place). */
int hx_buffer_rollback(hx_buffer *b, hx_device *d, void *saved);

#endif
