/* Unified buffers: one logical array, a replica per memory node, MSI
 * coherence (a node is Modified when it holds the only valid copy, Shared
 * when others hold one too, Invalid otherwise).  Internal. */
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
    unsigned char valid[HX_MAX_NODES];
    uint64_t reads;  /* tasks that read it so far (dmda amortizes copies of read-only data over them) */
    void *handle[HX_MAX_DEVICES];

    /* The same data laid out for the CPU's kernels (a model's weights
     * repacked, kernels_cpu/repack.h): opaque here, handed to CPU tasks
     * beside the host pointer, freed with the buffer.  NULL: none. */
    void *cpu_layout;
    void (*cpu_layout_free)(void *layout);
};

/* Makes the buffer usable by device `d` with `mode` and returns the
 * device's handle; copies from another node when its replica is stale. */
hx_status hx_buffer_prepare(hx_buffer *b, hx_device *d, hx_access mode, void **handle);
/* After a task on `d` wrote the buffer: `d`'s node becomes the owner. */
hx_status hx_buffer_written(hx_buffer *b, hx_device *d);
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
