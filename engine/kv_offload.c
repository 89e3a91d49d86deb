/* KV offload by sequences (engine/kv_offload.h): admission, and the step
 * of a batch whose sessions' caches live on two devices. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/kv_offload.h"
#include "partitioner/kv_offload.h"
#include "runtime/block_space.h"
#include "runtime/error.h"
#include "runtime/runtime.h"

static int first_of(hx_runtime *rt, int kind, int family)
{
    for (int d = 0; d < hx_runtime_device_count(rt); d++) {
        hx_device_info info;
        if (hx_runtime_device_info(rt, d, &info) == HX_OK &&
            ((kind >= 0 && (int)info.kind == kind) || (family >= 0 && (int)info.family == family)))
            return d;
    }
    return -1;
}

/* A device with memory of its own keeps at most the KV slots its memory
 * has room for beside the model's weights (on the GPU) and a reserve for
 * activations (hx_device_room, as the placement planner counts it): a
 * cache's slots otherwise grow by doubling, and the last doubling would
 * ask for more than the memory the sequences it admitted need. */
static void bound_slots(hx_model *m, int d, uint64_t weights)
{
    hx_device_info info;
    if (hx_runtime_device_info(m->rt, d, &info) || !info.memory_node || m->opts.kv_device_bytes)
        return;
    const double room = hx_device_room(&info) - (double)weights;
    const hx_kv_pool *kv = m->kv;
    const double per_slot = (double)(kv->l1 - kv->l0) * (double)(kv->block_bytes + kv->v_block_bytes);
    const double slots = room > per_slot ? room / per_slot : 1;
    hx_block_space_set_budget(kv->space, d, slots < kv->n_blocks ? (uint32_t)slots : kv->n_blocks);
}

/* How many sequences `ctx` tokens deep device d's KV slots hold;
 * UINT32_MAX for a device working in host memory. */
static uint32_t off_room(hx_model *m, int d, uint64_t ctx)
{
    hx_device_info info;
    if (hx_runtime_device_info(m->rt, d, &info) || !info.memory_node)
        return UINT32_MAX;
    const uint64_t bs = m->kv->block_size, per_seq = (ctx + bs - 1) / bs;
    return (uint32_t)(hx_block_space_budget(m->kv->space, d) / (per_seq ? per_seq : 1));
}

/* HX_KV_OFFLOAD: unset, "" or "off": no offload; "N" or "N:DEV". */
static hx_status configure(hx_model *m)
{
    if (m->kv_off.read)
        return HX_OK;
    const char *e = getenv("HX_KV_OFFLOAD");
    if (!e || !*e || !strcmp(e, "off")) {
        m->kv_off.read = 1;
        return HX_OK;
    }
    char *end;
    long n = strtol(e, &end, 10);
    if (end == e || n < 1 || n > 1000000 || (*end && *end != ':'))
        return hx_error(HX_ERR_INVALID_ARG, "HX_KV_OFFLOAD '%s': expected N[:DEV] (N >= 1 sequences whose KV cache "
                                            "the GPU holds; DEV cpu, fpga, a device index or none) or 'off'", e);
    hx_runtime *rt = m->rt;
    const char *dev = *end ? end + 1 : "cpu";
    int off = -1;
    if (!strcmp(dev, "none")) {
        off = -2; /* the GPU alone, its batch capped */
    } else if (!strcmp(dev, "cpu")) {
        off = first_of(rt, -1, HX_FAMILY_CPU);
    } else if (!strcmp(dev, "fpga")) {
        off = first_of(rt, HX_KIND_FPGA, -1);
    } else {
        char *e2;
        long d = strtol(dev, &e2, 10);
        if (e2 == dev || *e2 || d < 0 || d >= hx_runtime_device_count(rt))
            return hx_error(HX_ERR_INVALID_ARG, "HX_KV_OFFLOAD '%s': no device '%s' (cpu, fpga or an index below %d)",
                            e, dev, hx_runtime_device_count(rt));
        off = (int)d;
    }
    /* The device that runs the GEMMs and holds the first sequences'
     * caches: the first GPU; without one the CPU, for an offload device
     * with memory of its own (an FPGA card; PoCL standing in for one). */
    int gpu = first_of(rt, HX_KIND_GPU, -1);
    if (gpu < 0 && off >= 0 && off != first_of(rt, -1, HX_FAMILY_CPU))
        gpu = first_of(rt, -1, HX_FAMILY_CPU);
    if (gpu < 0)
        return hx_error(HX_ERR_NO_DEVICE, "HX_KV_OFFLOAD '%s': the runtime has no GPU whose memory binds the batch", e);
    if (off == -1 || off == gpu)
        return hx_error(HX_ERR_NO_DEVICE, "HX_KV_OFFLOAD '%s': no offload device '%s' beside the GPU", e, dev);
    m->kv_off.read = m->kv_off.on = 1;
    m->kv_off.gpu_seqs = (uint32_t)n;
    m->kv_off.dev = off;
    m->kv_off.home = gpu;
    bound_slots(m, gpu, m->info.file_bytes);
    if (off >= 0)
        bound_slots(m, off, 0);
    return HX_OK;
}

hx_status hx_kv_offload_admit(hx_session *s, uint64_t n_tokens, uint64_t n_more)
{
    if (s->kv_home)
        return HX_OK;
    hx_model *m = s->m;
    hx_status st = configure(m);
    if (st)
        return st;
    if (!m->kv_off.on) {
        s->kv_home = 1;
        return HX_OK;
    }
    if (m->kv_off.n_gpu < m->kv_off.gpu_seqs) {
        s->kv_home = s->kv_counted = 1;
        m->kv_off.n_gpu++;
        if (getenv("HX_KV_OFFLOAD_PRINT"))
            fprintf(stderr, "kv offload: sequence %u on the GPU\n", m->kv_off.n_gpu + m->kv_off.n_off);
        return HX_OK;
    }
    if (m->kv_off.dev < 0)
        return hx_error(HX_ERR_NO_MEMORY, "the GPU's memory holds the KV cache of %u sequences (HX_KV_OFFLOAD) "
                        "and no offload device was named", m->kv_off.gpu_seqs);
    /* Every sequence taken as deep as this one will be. */
    uint64_t ctx = s->pos + n_tokens + n_more;
    if (ctx > m->info.n_ctx)
        ctx = m->info.n_ctx;
    const int gpu = m->kv_off.home;
    const uint32_t g = m->kv_off.n_gpu, k = m->kv_off.n_off;
    /* An offload device with memory of its own holds the offloaded
     * sequences' caches, each this deep, in the room bound_slots left. */
    const uint32_t room = off_room(m, m->kv_off.dev, ctx);
    if (room != UINT32_MAX && k + 1 > room)
        return hx_error(HX_ERR_NO_MEMORY, "the GPU's memory holds the KV cache of %u sequences (HX_KV_OFFLOAD) and "
                        "device %d's the cache of %u more, %llu tokens deep", g, m->kv_off.dev, room,
                        (unsigned long long)ctx);
    hx_kv_offload_prediction with, without;
    st = hx_kv_offload_predict(m, gpu, m->kv_off.dev, g, k + 1, (uint32_t)ctx, &with);
    if (st == HX_OK)
        st = hx_kv_offload_predict(m, gpu, m->kv_off.dev, g, k, (uint32_t)ctx, &without);
    /* HX_KV_OFFLOAD_FORCE=1 admits it whatever the prediction (or
     * without one: devices not measured yet): to measure what the
     * planner refuses (bench/kv-offload-grid), and in tests. */
    const char *fv = getenv("HX_KV_OFFLOAD_FORCE");
    const int force = fv && !strcmp(fv, "1");
    if (st && !force)
        return hx_error_context(st, "offloading a sequence's KV cache");
    const double t_with = st ? 0 : (g + k + 1) / with.step_s;
    const double t_without = st ? 0 : (g + k) / (k ? without.step_s : without.alone_s);
    if (t_with <= t_without && !force)
        return hx_error(HX_ERR_NO_MEMORY, "the GPU's memory holds the KV cache of %u sequences (HX_KV_OFFLOAD) and "
                        "offloading sequence %u's to device %d is predicted to lose: %.2f against %.2f tokens/s "
                        "at %llu tokens deep", g, g + k + 1, m->kv_off.dev, t_with, t_without,
                        (unsigned long long)ctx);
    s->kv_home = 2;
    s->kv_counted = 1;
    m->kv_off.n_off++;
    if (getenv("HX_KV_OFFLOAD_PRINT"))
        fprintf(stderr, "kv offload: sequence %u to device %d: predicted %.2f t/s (step %.2f ms: gpu %.2f, offload "
                        "%.2f + links %.2f, chain %.2f) against %.2f\n", g + k + 1, m->kv_off.dev, t_with,
                with.step_s * 1e3, with.gpu_s * 1e3, with.off_s * 1e3, with.link_s * 1e3, with.chain_s * 1e3,
                t_without);
    return HX_OK;
}

void hx_kv_offload_release(hx_session *s)
{
    if (!s->kv_counted)
        return;
    if (s->kv_home == 2)
        s->m->kv_off.n_off--;
    else
        s->m->kv_off.n_gpu--;
    s->kv_counted = 0;
}

void hx_kv_offload_inherit(hx_session *f, const hx_session *parent)
{
    f->kv_home = parent->kv_home;
    f->kv_counted = 0;
}

void hx_kv_offload_pin(hx_batch_work *w)
{
    if (!w->n || !w->m->kv_off.on)
        return;
    for (size_t i = 0; i < w->n; i++)
        if (w->sessions[i]->kv_home != 2)
            return;
    w->shape.kv_pinned = 1;
    w->shape.kv_device = w->m->kv_off.dev;
}

int hx_kv_offload_mixed(hx_session *const *sessions, size_t n)
{
    int seen = 0;
    for (size_t i = 0; i < n; i++)
        seen |= sessions[i]->kv_home == 2 ? 2 : 1;
    return seen == 3;
}

hx_status hx_kv_offload_eval(hx_model *m, size_t n, const int32_t *tokens, hx_session *const *sessions,
                             const uint8_t *want)
{
    void *tables;
    const size_t per = sizeof(int32_t) + sizeof(hx_session *) + 1;
    hx_status s = hx_model_scratch(m, HX_SCRATCH_SPLIT, 2 * n * per, &tables);
    if (s)
        return s;
    hx_session **sess = tables;                       /* [2][n]: the GPU's, the offloaded */
    int32_t *tok = (int32_t *)(void *)(sess + 2 * n); /* [2][n] */
    uint8_t *wnt = (uint8_t *)(tok + 2 * n);          /* [2][n] */
    size_t k[2] = {0, 0};
    for (size_t i = 0; i < n; i++) {
        const int g = sessions[i]->kv_home == 2;
        sess[g * n + k[g]] = sessions[i];
        tok[g * n + k[g]] = tokens[i];
        wnt[g * n + k[g]] = want[i];
        k[g]++;
    }
    hx_batch_work w[2];
    memset(w, 0, sizeof w);
    s = hx_batch_prepare_mb(&w[1], m, 1, k[1], tok + n, sess + n, wnt + n);
    if (s == HX_OK)
        s = hx_batch_prepare_mb(&w[0], m, 0, k[0], tok, sess, wnt);
    if (s == HX_OK) {
        /* The runtime orders tasks by buffer, and both sub-batches'
         * kv_store and attention use each layer's K and V buffers (their
         * blocks apart): the one emitted second waits, layer by layer,
         * for the first's attention to that layer.  The GPU's sub-batch
         * goes first, so that it runs ahead unhindered and the offloaded
         * one, whose chain is slower anyway, is the one that waits. */
        hx_kv_offload_pin(&w[1]);
        const struct hx_plan *plan;
        s = hx_plan_get_locked(m, &w[0].shape, &plan);
        if (s == HX_OK)
            s = hx_replay_emit(m, &w[0].shape, plan);
        if (s == HX_OK)
            s = hx_plan_get_locked(m, &w[1].shape, &plan);
        if (s == HX_OK)
            s = hx_llama_emit(m, &w[1].shape, plan, NULL, NULL);
        hx_status waited = hx_runtime_wait_all(m->rt);
        if (s == HX_OK)
            s = waited;
    }
    if (s == HX_OK)
        s = hx_batch_collect(&w[0]);
    if (s == HX_OK)
        s = hx_batch_collect(&w[1]);
    hx_batch_work_free(&w[0]);
    hx_batch_work_free(&w[1]);
    return s;
}
