/* Block spaces: the slots of a set of divided buffers' blocks on each
 * device with memory of its own (block_space.h). */
#include <stdlib.h>

#include "runtime/block_space.h"
#include "runtime/error.h"

hx_status hx_block_space_create(hx_runtime *rt, uint32_t n_blocks, hx_block_space **out)
{
    *out = NULL;
    if (!n_blocks)
        return hx_error(HX_ERR_INVALID_ARG, "block space of 0 blocks");
    hx_block_space *s = calloc(1, sizeof *s);
    if (!s)
        return hx_error(HX_ERR_NO_MEMORY, "block space");
    s->rt = rt;
    s->n_blocks = n_blocks;
    s->off_host = calloc(n_blocks, sizeof *s->off_host);
    if (!s->off_host) {
        free(s);
        return hx_error(HX_ERR_NO_MEMORY, "block space of %u blocks", n_blocks);
    }
    pthread_mutex_init(&s->lock, NULL);
    *out = s;
    return HX_OK;
}

void hx_block_space_destroy(hx_block_space *s)
{
    if (!s)
        return;
    for (int d = 0; d < HX_MAX_DEVICES; d++) {
        free((void *)s->dev[d].slot_of);
        free((void *)s->dev[d].epoch);
        free(s->dev[d].named);
        free(s->dev[d].free);
    }
    free((void *)s->off_host);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* The device's tables, made on its first mapping. */
static hx_status device_tables(hx_block_space *s, hx_space_device *v)
{
    if (v->slot_of)
        return HX_OK;
    _Atomic uint32_t *slot_of = malloc(sizeof *slot_of * s->n_blocks);
    _Atomic uint32_t *epoch = calloc(s->n_blocks, sizeof *epoch);
    uint64_t *named = calloc(s->n_blocks, sizeof *named);
    uint32_t *free_slots = malloc(sizeof *free_slots * s->n_blocks);
    if (!slot_of || !epoch || !named || !free_slots) {
        free((void *)slot_of);
        free((void *)epoch);
        free(named);
        free(free_slots);
        return hx_error(HX_ERR_NO_MEMORY, "slots of %u blocks", s->n_blocks);
    }
    for (uint32_t b = 0; b < s->n_blocks; b++)
        atomic_init(&slot_of[b], HX_SLOT_NONE);
    v->free = free_slots;
    v->epoch = epoch;
    v->named = named;
    v->slot_of = slot_of;
    return HX_OK;
}

/* The slot of the block named least recently on the device, not in this
 * call, whose host copies are all valid, taken from it; HX_SLOT_NONE when
 * no block qualifies.  A linear pass: it runs only when a device at its
 * budget meets a block it has no slot for. */
static uint32_t evict(hx_block_space *s, hx_space_device *v)
{
    uint32_t victim = HX_SLOT_NONE;
    for (uint32_t b = 0; b < s->n_blocks; b++) {
        if (atomic_load_explicit(&v->slot_of[b], memory_order_relaxed) == HX_SLOT_NONE || v->named[b] == v->calls ||
            atomic_load_explicit(&s->off_host[b], memory_order_relaxed))
            continue;
        if (victim == HX_SLOT_NONE || v->named[b] < v->named[victim])
            victim = b;
    }
    if (victim == HX_SLOT_NONE)
        return HX_SLOT_NONE;
    uint32_t slot = atomic_load_explicit(&v->slot_of[victim], memory_order_relaxed);
    atomic_store_explicit(&v->slot_of[victim], HX_SLOT_NONE, memory_order_relaxed);
    atomic_fetch_add_explicit(&v->epoch[victim], 1, memory_order_relaxed);
    v->evictions++;
    return slot;
}

hx_status hx_block_space_map(hx_block_space *s, int dev, const uint32_t *ids, uint32_t n, uint32_t *high)
{
    hx_space_device *v = &s->dev[dev];
    pthread_mutex_lock(&s->lock);
    hx_status st = device_tables(s, v);
    if (!ids)
        n = s->n_blocks;
    v->calls++;
    for (uint32_t k = 0; st == HX_OK && k < n; k++) { /* this call's blocks are not evicted for each other */
        uint32_t b = ids ? ids[k] : k;
        if (b >= s->n_blocks)
            st = hx_error(HX_ERR_RANGE, "hx_buffer: block %u named, the buffer has %u", b, s->n_blocks);
        else
            v->named[b] = v->calls;
    }
    for (uint32_t k = 0; st == HX_OK && k < n; k++) {
        uint32_t b = ids ? ids[k] : k;
        if (atomic_load_explicit(&v->slot_of[b], memory_order_relaxed) != HX_SLOT_NONE)
            continue;
        uint32_t slot = v->n_free ? v->free[--v->n_free] : HX_SLOT_NONE;
        if (slot == HX_SLOT_NONE && v->budget && v->high >= v->budget)
            slot = evict(s, v);
        if (slot == HX_SLOT_NONE)
            slot = v->high++;
        atomic_store_explicit(&v->slot_of[b], slot, memory_order_relaxed);
        v->version++;
    }
    *high = v->high;
    pthread_mutex_unlock(&s->lock);
    return st;
}

void hx_block_space_set_budget(hx_block_space *s, int dev, uint32_t slots)
{
    pthread_mutex_lock(&s->lock);
    s->dev[dev].budget = slots;
    pthread_mutex_unlock(&s->lock);
}

uint32_t hx_block_space_budget(hx_block_space *s, int dev)
{
    pthread_mutex_lock(&s->lock);
    uint32_t slots = s->dev[dev].budget;
    pthread_mutex_unlock(&s->lock);
    return slots;
}

uint64_t hx_block_space_evictions(hx_block_space *s, int dev)
{
    pthread_mutex_lock(&s->lock);
    uint64_t n = s->dev[dev].evictions;
    pthread_mutex_unlock(&s->lock);
    return n;
}

uint64_t hx_block_space_version(hx_block_space *s, int dev)
{
    pthread_mutex_lock(&s->lock);
    uint64_t version = s->dev[dev].version;
    pthread_mutex_unlock(&s->lock);
    return version;
}

void hx_block_space_translate(hx_block_space *s, int dev, int32_t *v, uint32_t n, uint32_t unit)
{
    pthread_mutex_lock(&s->lock);
    for (uint32_t i = 0; i < n; i++) {
        if (v[i] < 0)
            continue;
        uint32_t b = (uint32_t)v[i] / unit, slot = b < s->n_blocks ? hx_block_space_slot(s, dev, b) : HX_SLOT_NONE;
        v[i] = slot == HX_SLOT_NONE ? -1 : (int32_t)(slot * unit + (uint32_t)v[i] % unit);
    }
    pthread_mutex_unlock(&s->lock);
}

void hx_block_space_release(hx_block_space *s, const uint32_t *ids, uint32_t n)
{
    pthread_mutex_lock(&s->lock);
    for (int d = 0; d < HX_MAX_DEVICES; d++) {
        hx_space_device *v = &s->dev[d];
        for (uint32_t k = 0; v->slot_of && k < n; k++) {
            if (ids[k] >= s->n_blocks)
                continue;
            uint32_t slot = atomic_load_explicit(&v->slot_of[ids[k]], memory_order_relaxed);
            if (slot == HX_SLOT_NONE)
                continue;
            atomic_store_explicit(&v->slot_of[ids[k]], HX_SLOT_NONE, memory_order_relaxed);
            v->free[v->n_free++] = slot;
            v->version++;
        }
    }
    pthread_mutex_unlock(&s->lock);
}
