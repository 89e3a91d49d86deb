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

static uint32_t node_bit(int node) { return 1u << node; }
static void set_valid(hx_buffer *b, uint32_t i, uint32_t valid);
static void forget_named(hx_buffer *b, hx_block_list blocks);

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
    b->block_bytes = bytes;
    b->n_blocks = 1;
    b->valid = &b->valid_one;
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
    b->valid_one = 1;
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
    (*out)->valid_one = 1;
    return HX_OK;
}

hx_status hx_buffer_wrap(hx_runtime *rt, void *host, size_t bytes, int read_only, hx_buffer **out)
{
    hx_api_enter();
    return hx_api_leave(buffer_wrap(rt, host, bytes, read_only, out));
}

size_t hx_buffer_size(const hx_buffer *b) { return b ? b->size : 0; }

static void hx_atomic_max(_Atomic uint64_t *a, uint64_t v)
{
    uint64_t old = atomic_load(a);
    while (v > old && !atomic_compare_exchange_weak(a, &old, v))
        ;
}

static int has_own_memory(const hx_device *d) { return d->info.memory_node != 0 && !d->info.unified_memory; }

static hx_status buffer_set_blocks(hx_buffer *b, size_t block_bytes, hx_block_space *space)
{
    if (!b || block_bytes == 0 || block_bytes > b->size)
        return hx_error(HX_ERR_INVALID_ARG, "hx_buffer_set_blocks: blocks of %zu bytes in a %zu-byte buffer",
                        block_bytes, b ? b->size : 0);
    hx_runtime *rt = b->rt;
    pthread_mutex_lock(&rt->lock);
    int used = b->users > 0 || b->last_writer || b->nreaders;
    pthread_mutex_unlock(&rt->lock);
    if (used || b->divided)
        return hx_error(HX_ERR_STATE, "hx_buffer_set_blocks: the buffer is %s",
                        used ? "in use by tasks" : "already divided");
    size_t n = (b->size + block_bytes - 1) / block_bytes;
    if (n > UINT32_MAX)
        return hx_error(HX_ERR_INVALID_ARG, "hx_buffer_set_blocks: %zu blocks", n);
    if (space && n != space->n_blocks)
        return hx_error(HX_ERR_INVALID_ARG, "hx_buffer_set_blocks_in: %zu blocks in a space of %u", n,
                        space->n_blocks);
    for (int d = 0; space && d < rt->ndevices; d++)
        if (b->handle[d] && has_own_memory(rt->devices[d]))
            return hx_error(HX_ERR_STATE, "hx_buffer_set_blocks_in: the buffer is stored whole on device %d", d);
    uint32_t *valid = malloc(n * sizeof *valid);
    uint32_t *named = calloc(n, sizeof *named);
    if (!valid || !named) {
        free(valid);
        free(named);
        return hx_error(HX_ERR_NO_MEMORY, "hx_buffer_set_blocks: validity of %zu blocks", n);
    }
    pthread_mutex_lock(&b->lock);
    b->valid = valid;
    b->named = named;
    b->n_blocks = (uint32_t)n;
    b->block_bytes = block_bytes;
    b->divided = 1;
    for (uint32_t i = 0; i < n; i++) {
        valid[i] = 0;
        set_valid(b, i, b->valid_one);
    }
    b->space = space;
    for (uint32_t i = 0; space && i < n; i++)
        if (!(valid[i] & node_bit(0)))
            hx_block_space_host_changed(space, i, 0);
    for (int d = 0; d < rt->ndevices; d++)
        if (b->handle[d] && has_own_memory(rt->devices[d])) {
            b->dev_bytes[d] = b->size;
            atomic_fetch_add(&rt->stats.block_bytes_allocated[d], b->size);
        }
    pthread_mutex_unlock(&b->lock);
    return HX_OK;
}

hx_status hx_buffer_set_blocks(hx_buffer *b, size_t block_bytes)
{
    hx_api_enter();
    return hx_api_leave(buffer_set_blocks(b, block_bytes, NULL));
}

hx_status hx_buffer_set_blocks_in(hx_buffer *b, size_t block_bytes, hx_block_space *space)
{
    return buffer_set_blocks(b, block_bytes, space);
}

hx_status hx_buffer_set_block_refs(hx_buffer *b, hx_block_space *space, const hx_block_refs *refs, int n)
{
    if (n < 0 || n > HX_BLOCK_REFS_MAX || (n && !space) || b->divided)
        return hx_error(HX_ERR_INVALID_ARG, "hx_buffer_set_block_refs: %d ranges%s", n,
                        b->divided ? " in a divided buffer" : "");
    for (int k = 0; k < n; k++)
        if (!refs[k].unit || ((uint64_t)refs[k].first + refs[k].count) * sizeof(int32_t) > b->size)
            return hx_error(HX_ERR_INVALID_ARG, "hx_buffer_set_block_refs: ints [%u, %u) of a %zu-byte buffer",
                            refs[k].first, refs[k].first + refs[k].count, b->size);
    pthread_mutex_lock(&b->lock);
    b->refs_space = n ? space : NULL;
    b->nrefs = n;
    for (int k = 0; k < n; k++)
        b->refs[k] = refs[k];
    /* Copies translated under the old ranges are stale (the host's copy
     * is the one a device may not write). */
    for (int d = 0; d < b->rt->ndevices && (b->valid_one & node_bit(0)); d++)
        if (has_own_memory(b->rt->devices[d]))
            b->valid_one &= ~node_bit(b->rt->devices[d]->info.memory_node);
    pthread_mutex_unlock(&b->lock);
    return HX_OK;
}

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
    if (b->divided) {
        forget_named(b, (hx_block_list){NULL, 0});
        for (uint32_t i = 0; i < b->n_blocks; i++)
            set_valid(b, i, node_bit(0));
        for (int d = 0; d < rt->ndevices; d++)
            atomic_fetch_sub(&rt->stats.block_bytes_allocated[d], b->dev_bytes[d]);
    }
    if (b->valid != &b->valid_one)
        free(b->valid);
    free(b->named);
    for (int d = 0; d < HX_MAX_DEVICES; d++)
        free(b->epoch_seen[d]);
    buffer_free(b);
}


/* The node holding the only valid copy of a block of this validity when
 * that is a device's own memory, else -1: such a block is what a copy
 * sized to the blocks a device holds could not evict without first
 * copying it back. */
static int device_only_node(uint32_t valid) { return valid && !(valid & (valid - 1)) && valid != 1 ? __builtin_ctz(valid) : -1; }

static size_t block_size(const hx_buffer *b, uint32_t i);

/* Sets block i's validity (every change goes through here), keeping the
 * runtime's count of bytes valid on one device alone. */
static void set_valid(hx_buffer *b, uint32_t i, uint32_t valid)
{
    int before = device_only_node(b->valid[i]), after = device_only_node(valid);
    if (b->space && ((b->valid[i] ^ valid) & node_bit(0)))
        hx_block_space_host_changed(b->space, i, (valid & node_bit(0)) != 0);
    b->valid[i] = valid;
    if (!b->divided || before == after)
        return;
    hx_runtime *rt = b->rt;
    if (before >= 0)
        atomic_fetch_sub(&rt->stats.block_bytes_device_only[before], block_size(b, i));
    if (after >= 0) {
        uint64_t now = atomic_fetch_add(&rt->stats.block_bytes_device_only[after], block_size(b, i)) + block_size(b, i);
        hx_atomic_max(&rt->stats.block_bytes_device_only_peak[after], now);
    }
}

/* The blocks a list names, one at a time: every block when the buffer is
 * not divided or the list is NULL. */
typedef struct {
    hx_block_list l;
    uint32_t k;
} block_walk;

static block_walk walk_of(const hx_buffer *b, hx_block_list l)
{
    if (!b->divided || !l.ids)
        l = (hx_block_list){NULL, b->n_blocks};
    return (block_walk){l, 0};
}

static int walk_next(block_walk *w, uint32_t *block)
{
    if (w->k >= w->l.n)
        return 0;
    *block = w->l.ids ? w->l.ids[w->k] : w->k;
    w->k++;
    return 1;
}

static size_t block_offset(const hx_buffer *b, uint32_t i) { return (size_t)i * b->block_bytes; }

static size_t block_size(const hx_buffer *b, uint32_t i)
{
    size_t off = block_offset(b, i);
    return b->size - off < b->block_bytes ? b->size - off : b->block_bytes;
}

static int lowest_node(uint32_t mask) { return mask ? __builtin_ctz(mask) : -1; }

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

/* A run of consecutive blocks that move together in one copy. */
typedef struct {
    uint32_t first, count;
    int node; /* the other end: source of a fetch, destination of a send */
} block_run;

/* Whether the buffer is stored per block on device d (block_space.h). */
static int slotted(const hx_buffer *b, const hx_device *d) { return b->space && has_own_memory(d); }

/* Where block i lies in d's storage. */
static size_t device_offset(const hx_buffer *b, const hx_device *d, uint32_t i)
{
    return slotted(b, d) ? (size_t)hx_block_space_slot(b->space, d->info.index, i) * b->block_bytes
                         : block_offset(b, i);
}

/* Whether block i extends run r in one copy: next in the buffer, and
 * next in d's storage too. */
static int extends(const hx_buffer *b, const hx_device *d, block_run r, uint32_t i)
{
    return r.count && i == r.first + r.count &&
           (!d || !slotted(b, d) || device_offset(b, d, i) == device_offset(b, d, r.first) + r.count * b->block_bytes);
}

/* The blocks' copies on d (a run, or a list when run_n is 0) are those
 * of their current eviction epoch there. */
static void seen_now(hx_buffer *b, hx_device *d, hx_block_list blocks, uint32_t run_first, uint32_t run_n)
{
    uint32_t *seen = b->epoch_seen[d->info.index];
    if (!seen)
        return;
    if (run_n) {
        for (uint32_t i = run_first; i < run_first + run_n; i++)
            seen[i] = hx_block_space_epoch(b->space, d->info.index, i);
        return;
    }
    block_walk w = walk_of(b, blocks);
    uint32_t i;
    while (walk_next(&w, &i))
        if (i < b->n_blocks)
            seen[i] = hx_block_space_epoch(b->space, d->info.index, i);
}

/* Copies on d of blocks evicted there since they were made are stale. */
static void drop_evicted(hx_buffer *b, hx_device *d, hx_block_list blocks)
{
    const uint32_t *seen = b->epoch_seen[d->info.index];
    const uint32_t bit = node_bit(d->info.memory_node);
    block_walk w = walk_of(b, blocks);
    uint32_t i;
    while (seen && walk_next(&w, &i))
        if (i < b->n_blocks && (b->valid[i] & bit) && seen[i] != hx_block_space_epoch(b->space, d->info.index, i))
            set_valid(b, i, b->valid[i] & ~bit);
}

/* The host's contents with their block references rewritten to d's
 * slots, into a copy the caller frees; *version: the mapping's. */
static hx_status translated(hx_buffer *b, hx_device *d, void **out, uint64_t *version)
{
    int32_t *t = malloc(b->size);
    if (!t)
        return hx_error(HX_ERR_NO_MEMORY, "hx_buffer: a %zu-byte copy of block references", b->size);
    memcpy(t, b->host, b->size);
    *version = hx_block_space_version(b->refs_space, d->info.index);
    for (int k = 0; k < b->nrefs; k++)
        hx_block_space_translate(b->refs_space, d->info.index, t + b->refs[k].first, b->refs[k].count,
                                 b->refs[k].unit);
    *out = t;
    return HX_OK;
}

/* Copies blocks [r.first, r.first + r.count) from node r.node to the host
 * (to_host: through a device of that node) or from the host to device
 * `d`'s node r.node, and marks them valid there. */
static hx_status copy_run(hx_buffer *b, block_run r, int to_host, hx_device *d)
{
    if (!r.count)
        return HX_OK;
    if (to_host)
        d = device_of_node(b->rt, r.node);
    size_t off = block_offset(b, r.first);
    size_t bytes = block_offset(b, r.first + r.count - 1) + block_size(b, r.first + r.count - 1) - off;
    if (!d || (to_host && !b->handle[d->info.index]))
        return hx_error(HX_ERR_STATE, "hx_buffer: no valid replica of %zu bytes at offset %zu of a %zu-byte buffer",
                        bytes, off, b->size);
    if (slotted(b, d) && hx_block_space_slot(b->space, d->info.index, r.first) == HX_SLOT_NONE)
        return hx_error(HX_ERR_STATE, "hx_buffer: block %u has no slot on device %d", r.first, d->info.index);
    double t0 = hx_now();
    void *handle = b->handle[d->info.index];
    const size_t doff = device_offset(b, d, r.first);
    const int translate = !to_host && b->refs_space && has_own_memory(d);
    hx_status s;
    if (to_host) {
        s = d->ops->copy_out(d, (char *)b->host + off, handle, doff, bytes);
    } else if (translate) {
        void *refs = NULL;
        uint64_t version = 0;
        s = translated(b, d, &refs, &version);
        if (s == HX_OK) {
            s = d->ops->copy_in(d, handle, doff, refs, bytes);
            free(refs);
            b->refs_version[d->info.index] = version;
        }
    } else {
        s = d->ops->copy_in(d, handle, doff, (const char *)b->host + off, bytes);
    }
    if (s)
        return s;
    count_copy(b->rt, d, to_host ? r.node : 0, to_host ? 0 : r.node, bytes, t0);
    for (uint32_t i = r.first; i < r.first + r.count; i++)
        set_valid(b, i, b->valid[i] | node_bit(to_host ? 0 : r.node));
    if (!to_host && slotted(b, d))
        seen_now(b, d, (hx_block_list){NULL, 0}, r.first, r.count);
    return HX_OK;
}

/* Brings the host replica of those of `blocks` that node `for_node`
 * lacks up to date from the nodes that hold them, a run of consecutive
 * blocks from one node in one copy.  Called with b->lock held. */
static hx_status fetch_to_host(hx_buffer *b, hx_block_list blocks, int for_node)
{
    block_walk w = walk_of(b, blocks);
    block_run run = {0, 0, -1};
    uint32_t i;
    hx_status s = HX_OK;
    while (s == HX_OK && walk_next(&w, &i)) {
        if (i >= b->n_blocks)
            return hx_error(HX_ERR_RANGE, "hx_buffer: block %u of %u", i, b->n_blocks);
        if (b->valid[i] & (node_bit(0) | node_bit(for_node)))
            continue;
        int src = lowest_node(b->valid[i]);
        if (src < 0)
            return hx_error(HX_ERR_STATE, "hx_buffer: no valid replica of block %u of a %zu-byte buffer", i,
                            b->size);
        if (src == run.node && extends(b, device_of_node(b->rt, src), run, i)) {
            run.count++;
            continue;
        }
        s = copy_run(b, run, 1, NULL);
        run = (block_run){i, 1, src};
    }
    return s ? s : copy_run(b, run, 1, NULL);
}

/* Copies the blocks of `blocks` that node `node` lacks from the host
 * (which fetch_to_host made valid), in runs of consecutive blocks. */
static hx_status send_to_node(hx_buffer *b, hx_device *d, hx_block_list blocks)
{
    int node = d->info.memory_node;
    block_walk w = walk_of(b, blocks);
    block_run run = {0, 0, node};
    uint32_t i;
    hx_status s = HX_OK;
    while (s == HX_OK && walk_next(&w, &i)) {
        if (b->valid[i] & node_bit(node))
            continue;
        if (extends(b, d, run, i)) {
            run.count++;
            continue;
        }
        s = copy_run(b, run, 0, d);
        run = (block_run){i, 1, node};
    }
    return s ? s : copy_run(b, run, 0, d);
}

/* Room on d for `need` slots of a buffer stored per block: a larger
 * allocation, at least 8 slots and twice the last (as a growing array,
 * so that the copies amortize), capped at the buffer's blocks and at the
 * device's budget, with the slots so far copied over. */
static hx_status grow_slots(hx_buffer *b, hx_device *d, uint32_t need)
{
    const int i = d->info.index;
    const uint32_t budget = hx_block_space_budget(b->space, i);
    uint32_t cap = b->slots[i] * 2 > 8 ? b->slots[i] * 2 : 8;
    cap = cap < b->n_blocks ? cap : b->n_blocks;
    cap = budget && cap > budget ? budget : cap;
    cap = cap > need ? cap : need;
    void *h;
    hx_status s = d->ops->alloc(d, (size_t)cap * b->block_bytes, &h);
    if (s)
        return hx_error_context(s, "%u KV slots of %zu bytes on device %d (%s)", cap, b->block_bytes, i,
                                d->info.name);
    void *old = b->handle[i];
    const size_t kept = (size_t)b->slots[i] * b->block_bytes;
    if (old && d->ops->copy_device) {
        s = d->ops->copy_device(d, h, old, kept);
    } else if (old) { /* through host memory */
        void *t = malloc(kept);
        s = t ? d->ops->copy_out(d, t, old, 0, kept) : hx_error(HX_ERR_NO_MEMORY, "moving %zu bytes of slots", kept);
        if (s == HX_OK)
            s = d->ops->copy_in(d, h, 0, t, kept);
        free(t);
    }
    if (s) {
        d->ops->release(d, h);
        return hx_error_context(s, "moving %u KV slots on device %d (%s)", b->slots[i], i, d->info.name);
    }
    if (old)
        d->ops->release(d, old);
    b->handle[i] = h;
    b->slots[i] = cap;
    atomic_fetch_add(&b->rt->stats.block_bytes_allocated[i], (size_t)cap * b->block_bytes - b->dev_bytes[i]);
    b->dev_bytes[i] = (size_t)cap * b->block_bytes;
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
    if (b->divided && has_own_memory(d)) {
        b->dev_bytes[i] = b->size;
        atomic_fetch_add(&b->rt->stats.block_bytes_allocated[i], b->size);
    }
    *handle = b->handle[i];
    return HX_OK;
}

/* A buffer stored per block on d: slots there for the blocks named, and
 * storage for every slot the space has handed out on d. */
static hx_status slot_handle(hx_buffer *b, hx_device *d, hx_block_list blocks, void **handle)
{
    if (!b->epoch_seen[d->info.index] && !(b->epoch_seen[d->info.index] = calloc(b->n_blocks, sizeof(uint32_t))))
        return hx_error(HX_ERR_NO_MEMORY, "hx_buffer: epochs of %u blocks", b->n_blocks);
    uint32_t high;
    const int all = !blocks.ids;
    hx_status s = hx_block_space_map(b->space, d->info.index, all ? NULL : blocks.ids, all ? 0 : blocks.n, &high);
    if (s == HX_OK && (high > b->slots[d->info.index] || !b->handle[d->info.index]))
        s = grow_slots(b, d, high ? high : 1);
    *handle = b->handle[d->info.index];
    return s;
}

size_t hx_buffer_device_bytes(const hx_buffer *b, const hx_device *d)
{
    return slotted(b, d) ? b->dev_bytes[d->info.index] : b->size;
}

/* Blocks a task on `d` named: a copy sized to the blocks `d` holds would
 * take a slot for each one not named there since it was last discarded. */
static void note_named(hx_buffer *b, hx_device *d, hx_block_list blocks)
{
    if (!b->divided || !has_own_memory(d))
        return;
    const int dev = d->info.index;
    uint64_t added = 0;
    block_walk w = walk_of(b, blocks);
    uint32_t i;
    while (walk_next(&w, &i))
        if (!(b->named[i] & (1u << dev))) {
            b->named[i] |= 1u << dev;
            added += block_size(b, i);
        }
    if (!added)
        return;
    hx_runtime *rt = b->rt;
    hx_atomic_max(&rt->stats.block_bytes_named_peak[dev], atomic_fetch_add(&rt->stats.block_bytes_named[dev], added) + added);
}

/* Those of `blocks` no device needs a slot for any longer (their
 * contents no longer matter, or the buffer goes). */
static void forget_named(hx_buffer *b, hx_block_list blocks)
{
    block_walk w = walk_of(b, blocks);
    uint32_t i;
    while (walk_next(&w, &i)) {
        if (i >= b->n_blocks)
            continue;
        for (uint32_t m = b->named[i]; m; m &= m - 1)
            atomic_fetch_sub(&b->rt->stats.block_bytes_named[__builtin_ctz(m)], block_size(b, i));
        b->named[i] = 0;
    }
}

static hx_status out_of_range(const hx_buffer *b, uint32_t i)
{
    return hx_error(HX_ERR_RANGE, "hx_buffer: block %u named, the buffer has %u", i, b->n_blocks);
}

/* Every block of the list is in range; *stale: some is not valid on `node`. */
static hx_status check_blocks(const hx_buffer *b, hx_block_list blocks, int node, int *stale)
{
    block_walk w = walk_of(b, blocks);
    uint32_t i;
    *stale = 0;
    while (walk_next(&w, &i)) {
        if (i >= b->n_blocks)
            return out_of_range(b, i);
        *stale |= !(b->valid[i] & node_bit(node));
    }
    return HX_OK;
}

hx_status hx_buffer_host_handle(const hx_buffer *b, hx_block_list blocks, void **handle)
{
    for (uint32_t k = 0; b->divided && k < blocks.n && blocks.ids; k++)
        if (blocks.ids[k] >= b->n_blocks)
            return out_of_range(b, blocks.ids[k]);
    *handle = b->host;
    return HX_OK;
}

hx_status hx_buffer_prepare(hx_buffer *b, hx_device *d, hx_access mode, hx_block_list blocks, void **handle)
{
    int node = d->info.memory_node;
    pthread_mutex_lock(&b->lock);
    if (mode & HX_R)
        b->reads++;
    int stale;
    if (slotted(b, d))
        drop_evicted(b, d, blocks);
    hx_status s = check_blocks(b, blocks, node, &stale);
    if (s == HX_OK && b->refs_space && has_own_memory(d)) {
        if (mode & HX_W)
            s = hx_error(HX_ERR_UNSUPPORTED, "hx_buffer: block references written on device %d (%s)", d->info.index,
                         d->info.name);
        /* translated under an older mapping: stale */
        else if ((b->valid_one & node_bit(node)) &&
                 b->refs_version[d->info.index] != hx_block_space_version(b->refs_space, d->info.index))
            b->valid_one &= ~node_bit(node);
        stale = !(b->valid_one & node_bit(node));
    }
    if (s == HX_OK)
        s = slotted(b, d) ? slot_handle(b, d, blocks, handle) : device_handle(b, d, handle);
    if (s == HX_OK)
        note_named(b, d, blocks);
    if (s == HX_OK && (mode & HX_R) && stale) {
        s = fetch_to_host(b, blocks, node);
        if (s == HX_OK && node != 0)
            s = send_to_node(b, d, blocks);
    } else if (s == HX_OK && node == 0 && d->info.index >= 0 && d->info.family != HX_FAMILY_CPU) {
        atomic_fetch_add(&b->rt->stats.zero_copy, 1);
    }
    pthread_mutex_unlock(&b->lock);
    return s;
}

hx_status hx_buffer_written(hx_buffer *b, hx_device *d, hx_block_list blocks)
{
    int node = d->info.memory_node;
    hx_status s = HX_OK;
    pthread_mutex_lock(&b->lock);
    if (node == 0 && d->ops->sync_host)
        s = d->ops->sync_host(d, b->handle[d->info.index], b->size);
    block_walk w = walk_of(b, blocks);
    uint32_t i;
    while (walk_next(&w, &i))
        if (i < b->n_blocks)
            set_valid(b, i, node_bit(node));
    if (slotted(b, d))
        seen_now(b, d, blocks, 0, 0);
    pthread_mutex_unlock(&b->lock);
    return s;
}

void hx_buffer_discard(hx_buffer *b, hx_block_list blocks)
{
    if (!b->divided || !blocks.ids)
        return;
    int nodes = b->rt->n_memory_nodes;
    uint32_t all = nodes >= 32 ? 0xffffffffu : (1u << nodes) - 1;
    pthread_mutex_lock(&b->lock);
    for (uint32_t k = 0; k < blocks.n; k++)
        if (blocks.ids[k] < b->n_blocks)
            set_valid(b, blocks.ids[k], all);
    forget_named(b, blocks);
    pthread_mutex_unlock(&b->lock);
}

void hx_buffer_stale_bytes(hx_buffer *b, int node, hx_block_list blocks, double *from_host, double *from_device)
{
    *from_host = *from_device = 0;
    pthread_mutex_lock(&b->lock);
    block_walk w = walk_of(b, blocks);
    uint32_t i;
    while (walk_next(&w, &i))
        if (i < b->n_blocks && !(b->valid[i] & node_bit(node)))
            *(b->valid[i] & node_bit(0) ? from_host : from_device) += (double)block_size(b, i);
    pthread_mutex_unlock(&b->lock);
}

void hx_buffer_set_read_only(hx_buffer *b)
{
    pthread_mutex_lock(&b->lock);
    b->read_only = 1;
    pthread_mutex_unlock(&b->lock);
}

/* A weight's replica on a device with memory of its own, freed when a
 * placement no longer puts its tasks there: the host's copy stays valid,
 * so nothing is copied back, and a later task there copies it again. */
size_t hx_buffer_evict(hx_buffer *b, int dev)
{
    if (!b || dev < 0 || dev >= b->rt->ndevices)
        return 0;
    hx_device *d = b->rt->devices[dev];
    if (!b->read_only || b->divided || !has_own_memory(d))
        return 0;
    wait_unused(b);
    pthread_mutex_lock(&b->lock);
    size_t freed = 0;
    const int node = d->info.memory_node;
    /* Only where the host holds the data, and no other device of the
     * same memory node reads this replica's node bit. */
    int shared = 0;
    for (int o = 0; o < b->rt->ndevices; o++)
        shared |= o != dev && b->handle[o] && b->rt->devices[o]->info.memory_node == node;
    if (b->handle[dev] && b->handle[dev] != b->host && (b->valid_one & node_bit(0)) && !shared) {
        if (d->ops->release)
            d->ops->release(d, b->handle[dev]);
        b->handle[dev] = NULL;
        set_valid(b, 0, b->valid_one & ~node_bit(node));
        freed = b->size;
    }
    pthread_mutex_unlock(&b->lock);
    return freed;
}

static hx_status buffer_acquire(hx_buffer *b, hx_access mode, hx_block_list blocks, void **host)
{
    if (!b || !host || !(mode & HX_RW))
        return hx_error(HX_ERR_INVALID_ARG, "hx_buffer_acquire: bad buffer, mode or output");
    if ((mode & HX_W) && b->read_only)
        return hx_error(HX_ERR_INVALID_ARG, "hx_buffer_acquire: write access to a read-only buffer");
    wait_unused(b);
    pthread_mutex_lock(&b->lock);
    int stale;
    hx_status s = check_blocks(b, blocks, 0, &stale);
    if (s == HX_OK && !b->host && b->owns_host)
        s = host_alloc(b);
    if (s == HX_OK && (mode & HX_R))
        s = fetch_to_host(b, blocks, 0);
    if (s == HX_OK && (mode & HX_W)) {
        block_walk w = walk_of(b, blocks);
        uint32_t i;
        while (walk_next(&w, &i))
            set_valid(b, i, node_bit(0));
    }
    pthread_mutex_unlock(&b->lock);
    *host = s == HX_OK ? b->host : NULL;
    return s;
}

hx_status hx_buffer_acquire(hx_buffer *b, hx_access mode, void **host)
{
    hx_api_enter();
    return hx_api_leave(buffer_acquire(b, mode, (hx_block_list){NULL, 0}, host));
}

hx_status hx_buffer_acquire_blocks(hx_buffer *b, hx_access mode, hx_block_list blocks, void **host)
{
    return buffer_acquire(b, mode, blocks, host);
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
    } else {
        /* Where its replica is the only valid one: put a copy on the host. */
        s = fetch_to_host(b, (hx_block_list){NULL, 0}, 0);
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
    } else {
        /* Restored when every block the device holds is valid elsewhere. */
        restored = 1;
        for (uint32_t i = 0; i < b->n_blocks; i++)
            restored &= !(b->valid[i] & node_bit(node)) || (b->valid[i] & ~node_bit(node)) != 0;
        for (uint32_t i = 0; restored && i < b->n_blocks; i++)
            set_valid(b, i, b->valid[i] & ~node_bit(node));
    }
    pthread_mutex_unlock(&b->lock);
    free(saved);
    return restored;
}
