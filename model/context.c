/* The context (tokens one session may hold) and the KV pool (tokens all
 * sessions hold), resolved once when the model opens. */
#include <unistd.h>

#include "model/context.h"
#include "runtime/error.h"

static uint64_t kv_bytes_per_token(const hx_model *m)
{
    return (uint64_t)m->info.n_layer * m->info.n_head_kv *
           (hx_type_row_size(m->kv_type, m->info.head_dim) + hx_type_row_size(m->v_type, m->info.head_dim));
}

static uint64_t pool_bytes(const hx_model *m, uint32_t tokens)
{
    uint64_t block = m->opts.kv_block;
    return (tokens + block - 1) / block * block * kv_bytes_per_token(m);
}

/* What the KV cache can take from; a simulated machine's buffers are
 * sizes, not memory (runtime/buffer.c), so there it is unbounded. */
static uint64_t machine_memory(hx_runtime *rt)
{
    if (hx_runtime_simulated(rt))
        return UINT64_MAX;
    hx_topology_info t;
    if (hx_runtime_topology(rt, &t) == HX_OK && t.memory_bytes)
        return t.memory_bytes;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : UINT64_MAX;
}

/* kv_prefix_bytes (llama-server's --cache-ram): more blocks in the pool,
 * which finished sessions' prefixes keep once the sessions' own room is
 * taken (a cached block is evicted only when no block is free).  Within
 * half of the memory the weights leave, as the default context: the
 * pool's memory is mapped as it is first written, so the room costs
 * memory only as prefixes fill it. */
static void add_prefix_room(hx_model *m, uint64_t per_token, uint64_t room)
{
    hx_model_options *o = &m->opts;
    if (o->kv_tokens >= UINT32_MAX - o->kv_block)
        return; /* refused by the caller */
    const uint64_t have = (uint64_t)o->kv_tokens * per_token, cap = room / 2 > have ? room / 2 - have : 0;
    uint64_t extra = (o->kv_prefix_bytes < cap ? o->kv_prefix_bytes : cap) / per_token;
    const uint64_t most = (uint64_t)UINT32_MAX - o->kv_block - o->kv_tokens;
    if (extra > most)
        extra = most;
    extra -= extra % o->kv_block;
    o->kv_tokens += (uint32_t)extra;
    m->info.kv_prefix_tokens = (uint32_t)extra;
}

/* A pipeline's rank holds its layers' weights and KV cache only
 * (model/stage.c).  The default context is what the rank with the most
 * fits, the same on every rank of one kind of machine (their KV pools
 * must number blocks alike; dist/ checks that they do). */
static void stage_need(const hx_model *m, int r, uint64_t *weights, uint64_t *per_token)
{
    const uint32_t layers = m->stage.first[r + 1] - m->stage.first[r];
    *weights = hx_model_stage_weight_bytes(m, r);
    *per_token = kv_bytes_per_token(m) / m->info.n_layer * layers;
}

hx_status hx_model_resolve_context(hx_model *m)
{
    hx_model_options *o = &m->opts;
    uint64_t per_token = kv_bytes_per_token(m);
    /* The weights are mapped and end up resident; the KV cache gets what
     * memory they leave. */
    const uint64_t mem = machine_memory(m->rt);
    uint64_t weights = m->info.file_bytes;
    const int pipeline = m->stage.size > 1 && !m->stage.tp.on; /* a tensor slice: its own KV heads, as one process */
    for (int r = 0; pipeline && r < m->stage.size; r++) {
        uint64_t w, t;
        stage_need(m, r, &w, &t);
        if (r == 0 || w + t > weights + per_token)
            weights = w, per_token = t;
    }
    uint64_t room = mem > weights ? mem - weights : 0;
    const int asked = o->n_ctx || o->kv_tokens;
    if (!o->n_ctx)
        o->n_ctx = m->info.n_ctx_train ? m->info.n_ctx_train : 2048;
    if (!asked && per_token) {
        /* The default takes at most half of that room: activations, the
         * allocator and the rest of the machine need the other half. */
        uint64_t fit = room / 2 / per_token;
        fit -= fit % o->kv_block;
        if (fit < o->n_ctx)
            o->n_ctx = (uint32_t)fit;
        if (o->n_ctx == 0)
            return hx_error(HX_ERR_NO_MEMORY, "KV cache memory: not one block of %u tokens (%llu bytes each) fits "
                                              "in half of the %llu MiB the weights leave",
                            o->kv_block, (unsigned long long)per_token, (unsigned long long)(room >> 20));
    }
    if (!o->kv_tokens)
        o->kv_tokens = o->n_ctx;
    if (o->kv_prefix_bytes && per_token)
        add_prefix_room(m, per_token, room);
    if (o->kv_tokens > UINT32_MAX - o->kv_block)
        return hx_error(HX_ERR_INVALID_ARG, "KV pool of %u tokens: at most %u", o->kv_tokens,
                        UINT32_MAX - o->kv_block);
    uint64_t bytes = pool_bytes(m, o->kv_tokens);
    if (pipeline) {
        uint64_t w, t;
        stage_need(m, m->stage.rank, &w, &t);
        const uint64_t need = (o->kv_tokens + (uint64_t)o->kv_block - 1) / o->kv_block * o->kv_block * t;
        if (w + need > mem)
            return hx_error(HX_ERR_NO_MEMORY, "rank %d of the pipeline (layers %u to %u%s) needs %llu MiB of "
                                              "weights and %llu MiB of KV cache for %u tokens; its machine has "
                                              "%llu MiB (a split that gives it fewer layers, or lower n_ctx)",
                            m->stage.rank, m->stage.first[m->stage.rank], m->stage.first[m->stage.rank + 1] - 1,
                            m->stage.rank ? "" : ", the embedding and the output head", (unsigned long long)(w >> 20),
                            (unsigned long long)(need >> 20), o->kv_tokens, (unsigned long long)(mem >> 20));
        bytes = need;
        per_token = t;
        room = mem - w;
    }
    if (per_token && bytes > room)
        return hx_error(HX_ERR_NO_MEMORY, "KV cache memory: %u tokens of KV cache take %llu MiB; the machine's "
                                          "%llu MiB hold %llu MiB beside the weights (lower n_ctx, hetero-run -c)",
                        o->kv_tokens, (unsigned long long)(bytes >> 20), (unsigned long long)(mem >> 20),
                        (unsigned long long)(room >> 20));
    m->info.n_ctx = o->n_ctx;
    m->info.kv_tokens = o->kv_tokens;
    m->info.kv_bytes = bytes;
    m->info.kv_bytes_per_token = kv_bytes_per_token(m);
    return HX_OK;
}
