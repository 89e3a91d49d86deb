/* Unified buffers and their coherence between memory nodes. */
#include <numa.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/buffer.h"
#include "runtime/error.h"
#include "runtime/handle.h"
#include "runtime/perfmodel.h"
#include "runtime/trace.h"

/* Below this, malloc'd memory is already local by first touch and an mmap
 * per buffer (what libnuma does) would cost more than it saves. */
#define HX_NUMA_MIN_BYTES (256u << 10)

static uint64_t physical_memory(const hx_runtime *rt)
{
    if (rt->topo_info.memory_bytes)
        return rt->topo_info.memory_bytes;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : UINT64_MAX;
}

/* Host storage: NUMA-local above HX_NUMA_MIN_BYTES, 64-byte aligned. */
static hx_status host_alloc(hx_buffer *b)
{
    size_t bytes = b->size;
    if (bytes >= HX_NUMA_MIN_BYTES && numa_available() >= 0) {
        b->host = numa_alloc_local(bytes); /* page aligned, hence 64-byte aligned */
        b->numa_alloc = b->host != NULL;
    }
    if (!b->host && posix_memalign(&b->host, 64, (bytes + 63) & ~(size_t)63) != 0)
        b->host = NULL;
    if (!b->host)
        return hx_error(HX_ERR_NO_MEMORY, "hx_buffer: cannot allocate %zu bytes", bytes);
    if (b->rt->executor->host_storage_on_demand)
        memset(b->host, 0, bytes); /* what tasks that do not run "wrote" */
    return HX_OK;
}

static hx_status buffer_new(hx_runtime *rt, size_t bytes, hx_buffer **out, const char *fn)
{
    hx_status s = hx_handle_check_call(rt, HX_HANDLE_RUNTIME, out, fn);
    if (s)
        return s;
    *out = NULL;
    if (bytes == 0)
        return hx_error(HX_ERR_INVALID_ARG, "hx_buffer: size 0");
    hx_buffer *b = calloc(1, sizeof *b);
    if (!b)
        return hx_error(HX_ERR_NO_MEMORY, "hx_buffer: no memory for the descriptor");
    b->rt = rt;
    b->size = bytes;
    pthread_mutex_init(&b->lock, NULL);
    atomic_fetch_add(&rt->buffers, 1);
    *out = b;
    return HX_OK;
}

/* Before any task knew it. */
static void buffer_free(hx_buffer *b)
{
    atomic_fetch_sub(&b->rt->buffers, 1);
    pthread_mutex_destroy(&b->lock);
    free(b);
}

static hx_status buffer_create(hx_runtime *rt, size_t bytes, hx_buffer **out)
{
    hx_status s = buffer_new(rt, bytes, out, "hx_buffer_create");
    if (s)
        return s;
    hx_buffer *b = *out;
    uint64_t mem = physical_memory(rt);
    if (bytes > mem) {
        buffer_free(b);
        *out = NULL;
        return hx_error(HX_ERR_NO_MEMORY, "hx_buffer_create: %zu bytes asked, the machine has %llu",
                        bytes, (unsigned long long)mem);
    }
    /* Or when the host first asks for it (runtime/executor.h). */
    if (!rt->executor->host_storage_on_demand && (s = host_alloc(b))) {
        buffer_free(b);
        *out = NULL;
        return hx_error_context(s, "hx_buffer_create");
    }
    b->owns_host = 1;
    b->valid[0] = 1;
    return HX_OK;
}

hx_status hx_buffer_create(hx_runtime *rt, size_t bytes, hx_buffer **out)
{
    hx_api_enter();
    return hx_api_leave(buffer_create(rt, bytes, out));
}

static hx_status buffer_wrap(hx_runtime *rt, void *host, size_t bytes, int read_only, hx_buffer **out)
{
    if (!host)
        return hx_error(HX_ERR_INVALID_ARG, "hx_buffer_wrap: NULL host pointer");
    hx_status s = buffer_new(rt, bytes, out, "hx_buffer_wrap");
    if (s)
        return s;
    (*out)->host = host;
    (*out)->read_only = read_only;
    (*out)->valid[0] = 1;
    return HX_OK;
}

hx_status hx_buffer_wrap(hx_runtime *rt, void *host, size_t bytes, int read_only, hx_buffer **out)
{
    hx_api_enter();
    return hx_api_leave(buffer_wrap(rt, host, bytes, read_only, out));
}

size_t hx_buffer_size(const hx_buffer *b) { return b ? b->size : 0; }

void hx_buffer_set_cpu_layout(hx_buffer *b, void *layout, void (*free_fn)(void *layout))
{
    if (b->cpu_layout_free)
        b->cpu_layout_free(b->cpu_layout);
    b->cpu_layout = layout;
    b->cpu_layout_free = free_fn;
}

/* Waits until no submitted task uses the buffer. */
static void wait_unused(hx_buffer *b)
{
    hx_runtime *rt = b->rt;
    /* When the tasks cannot all complete (a simulation stalled), the next
     * wait reports it. */
    hx_status s = rt->executor->advance(rt);
    pthread_mutex_lock(&rt->lock);
    while (b->users > 0 && s == HX_OK) {
        rt->waiters++;
        pthread_cond_wait(&rt->idle, &rt->lock);
        rt->waiters--;
    }
    pthread_mutex_unlock(&rt->lock);
}

void hx_buffer_destroy(hx_buffer *b)
{
    if (!b)
        return;
    wait_unused(b);
    hx_runtime *rt = b->rt;
    pthread_mutex_lock(&rt->lock);
    if (b->last_writer)
        hx_task_unref(b->last_writer);
    for (int i = 0; i < b->nreaders; i++)
        hx_task_unref(b->readers[i]);
    pthread_mutex_unlock(&rt->lock);
    free(b->readers);
    for (int d = 0; d < rt->ndevices; d++) {
        hx_device *dev = rt->devices[d];
        if (b->handle[d] && dev->ops->release && b->handle[d] != b->host)
            dev->ops->release(dev, b->handle[d]);
    }
    if (b->cpu_layout_free)
        b->cpu_layout_free(b->cpu_layout);
    if (b->owns_host && b->host) {
        if (b->numa_alloc)
            numa_free(b->host, b->size);
        else
            free(b->host);
    }
    buffer_free(b);
}

static int valid_node_other_than(const hx_buffer *b, int node)
{
    for (int n = 0; n < b->rt->n_memory_nodes; n++)
        if (n != node && b->valid[n])
            return n;
    return -1;
}

static hx_device *device_of_node(hx_runtime *rt, int node)
{
    for (int d = 0; d < rt->ndevices; d++)
        if (rt->devices[d]->info.memory_node == node)
            return rt->devices[d];
    return NULL;
}

/* Counts, traces and times a copy (the bus model learns from it). */
static void count_copy(hx_runtime *rt, hx_device *d, int from, int to, size_t bytes, double t0)
{
    double t1;
    rt->executor->copy_span(rt, from ? from : to, bytes, &t0, &t1);
    atomic_fetch_add(&rt->stats.copies, 1);
    atomic_fetch_add(&rt->stats.bytes_copied, bytes);
    hx_perfmodel_bus_record(rt->sched.pm, from ? from : to, bytes, t1 - t0);
    hx_trace_copy(rt, d->info.index, from, to, bytes, t0, t1);
}

/* Brings the host replica up to date from the node that owns the data.
 * Called with b->lock held. */
static hx_status fetch_to_host(hx_buffer *b)
{
    if (b->valid[0])
        return HX_OK;
    int src = valid_node_other_than(b, 0);
    hx_device *d = src >= 0 ? device_of_node(b->rt, src) : NULL;
    if (!d || !b->handle[d->info.index])
        return hx_error(HX_ERR_STATE, "hx_buffer: no valid replica of a %zu-byte buffer", b->size);
    double t0 = hx_now();
    hx_status s = d->ops->copy_out(d, b->host, b->handle[d->info.index], b->size);
    if (s)
        return s;
    count_copy(b->rt, d, src, 0, b->size, t0);
    b->valid[0] = 1;
    return HX_OK;
}

static hx_status device_handle(hx_buffer *b, hx_device *d, void **handle)
{
    int i = d->info.index;
    if (b->handle[i]) {
        *handle = b->handle[i];
        return HX_OK;
    }
    hx_status s;
    if (d->info.unified_memory)
        s = d->ops->wrap_host ? d->ops->wrap_host(d, b->host, b->size, b->read_only, &b->handle[i])
                              : (b->handle[i] = b->host, HX_OK);
    else
        s = d->ops->alloc(d, b->size, &b->handle[i]);
    if (s)
        return hx_error_context(s, "buffer of %zu bytes on device %d (%s)", b->size, i, d->info.name);
    *handle = b->handle[i];
    return HX_OK;
}

hx_status hx_buffer_prepare(hx_buffer *b, hx_device *d, hx_access mode, void **handle)
{
    int node = d->info.memory_node;
    pthread_mutex_lock(&b->lock);
    if (mode & HX_R)
        b->reads++;
    hx_status s = device_handle(b, d, handle);
    if (s == HX_OK && (mode & HX_R) && !b->valid[node]) {
        s = fetch_to_host(b);
        if (s == HX_OK && node != 0) {
            double t0 = hx_now();
            s = d->ops->copy_in(d, *handle, b->host, b->size);
            if (s == HX_OK) {
                count_copy(b->rt, d, 0, node, b->size, t0);
                b->valid[node] = 1;
            }
        }
    } else if (s == HX_OK && node == 0 && d->info.index >= 0 && d->info.family != HX_FAMILY_CPU) {
        atomic_fetch_add(&b->rt->stats.zero_copy, 1);
    }
    pthread_mutex_unlock(&b->lock);
    return s;
}

hx_status hx_buffer_written(hx_buffer *b, hx_device *d)
{
    int node = d->info.memory_node;
    hx_status s = HX_OK;
    pthread_mutex_lock(&b->lock);
    if (node == 0 && d->ops->sync_host)
        s = d->ops->sync_host(d, b->handle[d->info.index], b->size);
    memset(b->valid, 0, sizeof b->valid);
    b->valid[node] = 1;
    pthread_mutex_unlock(&b->lock);
    return s;
}

void hx_buffer_set_read_only(hx_buffer *b)
{
    pthread_mutex_lock(&b->lock);
    b->read_only = 1;
    pthread_mutex_unlock(&b->lock);
}

static hx_status buffer_acquire(hx_buffer *b, hx_access mode, void **host)
{
    if (!b || !host || !(mode & HX_RW))
        return hx_error(HX_ERR_INVALID_ARG, "hx_buffer_acquire: bad buffer, mode or output");
    if ((mode & HX_W) && b->read_only)
        return hx_error(HX_ERR_INVALID_ARG, "hx_buffer_acquire: write access to a read-only buffer");
    wait_unused(b);
    pthread_mutex_lock(&b->lock);
    hx_status s = !b->host && b->owns_host ? host_alloc(b) : HX_OK;
    if (s == HX_OK && (mode & HX_R))
        s = fetch_to_host(b);
    if (s == HX_OK && (mode & HX_W)) {
        memset(b->valid, 0, sizeof b->valid);
        b->valid[0] = 1;
    }
    pthread_mutex_unlock(&b->lock);
    *host = s == HX_OK ? b->host : NULL;
    return s;
}

hx_status hx_buffer_acquire(hx_buffer *b, hx_access mode, void **host)
{
    hx_api_enter();
    return hx_api_leave(buffer_acquire(b, mode, host));
}

/* ---- what a failed task must not leave behind -------------------------- */

hx_status hx_buffer_checkpoint(hx_buffer *b, hx_device *d, void **saved)
{
    int node = d->info.memory_node;
    *saved = NULL;
    pthread_mutex_lock(&b->lock);
    hx_status s = HX_OK;
    if (node == 0) {
        /* The device writes the host copy in place: keep its contents. */
        if (!(*saved = malloc(b->size)))
            s = hx_error(HX_ERR_NO_MEMORY, "checkpoint of a %zu-byte buffer", b->size);
        else
            memcpy(*saved, b->host, b->size);
    } else if (valid_node_other_than(b, node) < 0) {
        /* Its replica is the only valid one: put a copy on the host. */
        s = fetch_to_host(b);
    }
    pthread_mutex_unlock(&b->lock);
    return s;
}

int hx_buffer_rollback(hx_buffer *b, hx_device *d, void *saved)
{
    int node = d->info.memory_node, restored = 0;
    pthread_mutex_lock(&b->lock);
    if (saved) {
        memcpy(b->host, saved, b->size);
        restored = 1;
    } else if (valid_node_other_than(b, node) >= 0) {
        b->valid[node] = 0;
        restored = 1;
    }
    pthread_mutex_unlock(&b->lock);
    free(saved);
    return restored;
}
