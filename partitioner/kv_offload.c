/* The KV offload planner's model of a step (partitioner/kv_offload.h).
 * Both sub-batches' graphs are emitted dry (the tasks a real step
 * submits), each task costed on the device it would run on: the GPU,
 * or the offload device for the offloaded sub-batch's kv_store and
 * attention, which also pay their activations' trips over the links.
 * The step cannot be shorter than any device's total work, nor than the
 * offloaded sub-batch's chain of dependent tasks (its GEMMs wait for its
 * attention and the other way round, layer after layer); with the two
 * sub-batches interleaved it is about the largest of the three. */
#include <math.h>
#include <string.h>

#include "model/model.h"
#include "partitioner/kv_offload.h"
#include "runtime/buffer.h"
#include "runtime/error.h"
#include "runtime/runtime.h"

typedef struct {
    hx_model *m;
    int gpu, off;
    int offloaded;     /* emitting the offloaded sub-batch */
    double gpu_s, off_s, link_s, chain_s;
    hx_status status;
} costing;

static double seconds(costing *c, int d, const hx_task_desc *t, const size_t *sizes)
{
    double flops = t->codelet->flops ? t->codelet->flops(t->args, sizes) : 0;
    double bytes = t->codelet->bytes ? t->codelet->bytes(t->args, sizes) : 0;
    hx_precision p = t->codelet->precision ? t->codelet->precision(t->args, sizes) : HX_PREC_F32;
    double sec = 0;
    if (!hx_sched_estimate(c->m->rt, d, t->codelet, p, flops, bytes, &sec) && !c->status)
        c->status = hx_error(HX_ERR_UNSUPPORTED, "KV offload: no time known for '%s' on device %d yet",
                             t->codelet->name, d);
    return sec;
}

static void cost_task(void *user, int layer, hx_task_class cls, const hx_task_desc *t)
{
    costing *c = user;
    (void)cls;
    size_t sizes[HX_TASK_MAX_BUFFERS] = {0};
    for (int i = 0; i < t->nbuffers; i++)
        sizes[i] = hx_buffer_size(t->buffers[i]);
    const int pinned = c->offloaded && t->device >= 0;
    const double sec = seconds(c, pinned ? t->device : c->gpu, t, sizes);
    if (!pinned) {
        c->gpu_s += sec;
        if (c->offloaded)
            c->chain_s += sec;
        return;
    }
    /* The activations it reads come from the GPU and what it writes goes
     * back (through host memory: each link it crosses); not its KV cache,
     * which stays where it is. */
    const hx_kv_pool *kv = c->m->kv;
    const int L = (int)c->m->info.n_layer;
    double moved = 0;
    for (int i = 0; i < t->nbuffers; i++) {
        const hx_buffer *b = t->buffers[i];
        if (layer >= 0 && layer < L && (b == kv->k[layer] || b == kv->v[layer]))
            continue;
        if (!b->read_only)
            moved += (double)sizes[i];
    }
    double link = 0;
    if (moved > 0)
        link = hx_sched_link_seconds(c->m->rt, c->gpu, moved) + hx_sched_link_seconds(c->m->rt, t->device, moved);
    c->off_s += sec;
    c->link_s += link;
    c->chain_s += sec + link;
}

static hx_status emit(costing *c, uint32_t n, uint32_t ctx, int offloaded)
{
    hx_model *m = c->m;
    hx_activations *A = offloaded ? hx_model_act_for_mb(m, n) : hx_model_act_for(m, n);
    if (!A)
        return hx_error(HX_ERR_NO_MEMORY, "KV offload: activations for %u sequences", n);
    const uint32_t bs = m->kv->block_size;
    hx_batch_shape b = {.act = A, .T = n, .S = n, .max_blocks = (ctx + bs - 1) / bs, .n_out = n,
                        .kv_pinned = offloaded, .kv_device = c->off};
    c->offloaded = offloaded;
    hx_status s = hx_llama_emit(m, &b, NULL, cost_task, c);
    return s ? s : c->status;
}

hx_status hx_kv_offload_predict(hx_model *m, int gpu, int off, uint32_t n_gpu, uint32_t n_off, uint32_t ctx,
                                hx_kv_offload_prediction *out)
{
    memset(out, 0, sizeof *out);
    if (!n_gpu)
        return hx_error(HX_ERR_INVALID_ARG, "KV offload: no sequence on the GPU");
    costing c = {.m = m, .gpu = gpu, .off = off};
    hx_status s = emit(&c, n_gpu, ctx, 0);
    out->alone_s = c.gpu_s;
    if (s == HX_OK && n_off)
        s = emit(&c, n_off, ctx, 1);
    if (s)
        return s;
    out->gpu_s = c.gpu_s;
    out->off_s = c.off_s;
    out->link_s = c.link_s;
    out->chain_s = c.chain_s;
    out->step_s = fmax(c.gpu_s, fmax(c.off_s + c.link_s, c.chain_s));
    return HX_OK;
}
