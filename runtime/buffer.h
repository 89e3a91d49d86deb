/* Unified buffers: one logical array, a replica per memory node, MSI
 * coherence (a node is Modified when it holds the only valid copy, Shared
 * when others hold one too, Invalid otherwise).
 *
 * Validity is kept per block: a buffer is one block unless
 * hx_buffer_set_blocks divides it (a KV cache layer: one block per KV
 * block of the pool), and a task that names blocks (hx_task_desc.blocks)
 * makes only those valid where it runs, so attention on another device
 * moves the blocks it reads rather than the whole layer's cache.  Replicas
 * stay whole-sized: only their contents' validity is per block; the
 * runtime counts, per device, the blocks its tasks named (`named`), what
 * replicas sized to them would hold.  Internal. */
#ifndef HX_RUNTIME_BUFFER_H
#define HX_RUNTIME_BUFFER_H

#include <pthread.h>

#include "runtime/runtime.h"
#include "runtime/task.h"

#define HX_MAX_NODES HX_MAX_DEVICES

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

/* Makes the buffer usable by device `d` with `mode` and returns the
 * device's handle; copies from another node the blocks of `blocks` whose
 * replica there is stale. */
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
