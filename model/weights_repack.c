/* A loaded model's weight matrices laid out for a device's kernels, as
 * hx_model_options.repack asks: the device that has such a layout (the
 * CPU's repacked one, devices/cpu_layout.c) makes each copy and hangs it on
 * its weight's buffer; the model says when, and counts the bytes. */
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "runtime/buffer.h"
#include "runtime/error.h"
#include "runtime/runtime.h"

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

/* The device that lays weights out for its kernels (the CPU's), or NULL;
 * with none the copies would be memory spent for nothing. */
static hx_device *layout_device(const hx_runtime *rt)
{
    for (int d = 0; d < rt->ndevices; d++)
        if (rt->devices[d]->ops->lay_out_weight)
            return rt->devices[d];
    return NULL;
}

static hx_status repack_weight(hx_model *m, hx_device *dev, const hx_weight *w, int mode)
{
    if (!w->buf)
        return HX_OK;
    size_t bytes;
    hx_status s = dev->ops->lay_out_weight(dev, w->buf, w->type, w->ne0, w->ne1, mode > 0, &bytes);
    if (s || !bytes)
        return s;
    m->info.repacked_bytes += bytes;
    /* The device reads the copy from now on: the mapped rows' pages can go
     * until another device reads them again, or the embedding lookup the
     * few rows of a prompt's tokens (a tied output projection). */
    hx_gguf_release_pages(m->gguf, w->buf->host, w->buf->size);
    return HX_OK;
}

hx_status hx_model_repack(hx_model *m)
{
    const int mode = repack_mode(m);
    m->info.repacked_bytes = 0;
    hx_device *dev = layout_device(m->rt);
    if (!mode || !dev)
        return HX_OK;
    /* A pipeline's rank repacks what it multiplies by: its own layers, and
     * rank 0 the output head. */
    hx_status s = m->stage.rank == 0 ? repack_weight(m, dev, &m->output, mode) : HX_OK;
    /* Not the experts' tensors ([experts][rows][row length]): the expert
     * kernels read the mapped rows, so a copy would be memory spent for
     * nothing, and releasing the rows' pages would only make them read
     * again. */
    for (uint32_t l = hx_model_stage_l0(m); s == HX_OK && l < hx_model_stage_l1(m); l++)
        for (int i = 0; s == HX_OK && i < HX_LAYER_SLOTS; i++)
            if (hx_layer_slot_shapes[i].ne2 == HX_DIM_ONE)
                s = repack_weight(m, dev, &m->layers[l].w[i], mode);
    return s ? hx_error_context(s, "repacking the weights for the CPU") : HX_OK;
}
