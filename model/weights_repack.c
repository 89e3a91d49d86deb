/* A loaded model's weight matrices repacked for the CPU's kernels
 * (kernels_cpu/repack.h), as hx_model_options.repack asks: each copy is
 * an attribute of its weight's buffer, which CPU tasks receive beside the
 * mapped rows and other devices never see. */
#include <stdlib.h>
#include <string.h>

#include "kernels_cpu/repack.h"
#include "model/model.h"
#include "runtime/buffer.h"
#include "runtime/error.h"
#include "runtime/runtime.h"

/* The types whose repacked kernels beat the row-at-a-time ones on this
 * code's measurements (docs/repack.md), and so repacked unless asked not
 * to be. */
static int repack_pays(hx_type t)
{
    switch (t) {
    case HX_TYPE_Q4_0:
    case HX_TYPE_Q4_1:
    case HX_TYPE_Q5_0:
    case HX_TYPE_Q5_1:
    case HX_TYPE_Q8_0:
    case HX_TYPE_Q4_K:
    case HX_TYPE_Q5_K:
    case HX_TYPE_Q6_K: return 1;
    default: return 0;
    }
}

/* 1 always, 0 never, -1 where it pays. */
static int repack_mode(const hx_model *m)
{
    if (m->opts.repack)
        return m->opts.repack > 0;
    const char *env = getenv("HX_REPACK");
    if (env && *env)
        return strcmp(env, "0") != 0;
    return -1;
}

/* Whether the runtime has a CPU device to run the copies; with none they
 * would be memory spent for nothing. */
static int has_cpu_device(const hx_runtime *rt)
{
    for (int d = 0; d < rt->ndevices; d++)
        if (rt->devices[d]->ops->family == HX_FAMILY_CPU)
            return 1;
    return 0;
}

static hx_status repack_weight(hx_model *m, const hx_weight *w, int mode)
{
    if (!w->buf || w->ne1 < 2 || w->buf->cpu_layout || !hx_repack_supported(w->type, w->ne0, w->ne1) ||
        (mode < 0 && !repack_pays(w->type)))
        return HX_OK;
    hx_repacked *r;
    hx_status s = hx_repack_make(w->type, w->ne0, w->ne1, w->buf->host, &r);
    if (s)
        return s;
    hx_buffer_set_cpu_layout(w->buf, r, hx_repack_free);
    m->info.repacked_bytes += r->bytes;
    /* The CPU reads the copy from now on: the mapped rows' pages can go
     * until another device reads them again, or the embedding lookup the
     * few rows of a prompt's tokens (a tied output projection). */
    hx_gguf_release_pages(m->gguf, w->buf->host, w->buf->size);
    return HX_OK;
}

hx_status hx_model_repack(hx_model *m)
{
    const int mode = repack_mode(m);
    m->info.repacked_bytes = 0;
    if (!mode || !has_cpu_device(m->rt))
        return HX_OK;
    hx_status s = repack_weight(m, &m->output, mode);
    for (uint32_t l = 0; s == HX_OK && l < m->info.n_layer; l++)
        for (int i = 0; s == HX_OK && i < HX_LAYER_SLOTS; i++)
            s = repack_weight(m, &m->layers[l].w[i], mode);
    return s ? hx_error_context(s, "repacking the weights for the CPU") : HX_OK;
}
