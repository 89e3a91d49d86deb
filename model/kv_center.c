/* The vector each layer's quantized K cache stores its keys less
 * (ops/ops.h, kv_store's center_k).
 *
 * Qwen2's keys carry a large bias: a few coordinates of 100 and more where
 * the rest vary by a few units.  In a Q4_0 (or Q8_0) block the largest
 * value sets the scale, so those coordinates, or, rotated, their share of
 * every coordinate, leave the keys' varying part a handful of steps.  Most
 * of that bias sits in RoPE's slow pairs, which barely turn over a context,
 * so it is almost the same vector in every key.  Any one vector subtracted
 * from every key moves all of a query's scores alike and changes nothing
 * after the softmax; the one that leaves the keys' bias least is its mean
 * over the positions a session can reach: for each RoPE pair, the bias
 * turned by the mean of RoPE's rotations over positions 0 .. n_pos - 1 (a
 * geometric sum), and the bias as it is on dimensions RoPE leaves alone.
 *
 * Only the bias is known before any token is seen; a data-dependent mean
 * would make the cache's bytes depend on which text came first. */
#include <complex.h>
#include <math.h>
#include <string.h>

#include "model/model.h"
#include "runtime/error.h"

void hx_kv_center_head(const float *bias, float *out, uint32_t Dh, uint32_t n_rot, int neox, double base,
                       double freq_scale, const float *factors, uint32_t n_pos)
{
    memcpy(out, bias, sizeof(float) * Dh);
    const uint32_t half = n_rot / 2;
    const double n = n_pos ? n_pos : 1;
    for (uint32_t i = 0; i < half; i++) {
        /* theta as hx_op_rope's: pos * freq_scale * base^(-2i/n_rot) / factor */
        const double theta = freq_scale * pow(base, -2.0 * i / n_rot) / (factors ? factors[i] : 1.0);
        const double complex z = cexp(I * theta);
        /* The mean of z^p over p < n; 1 where z is (nearly) 1. */
        const double complex mean = cabs(1.0 - z) < 1e-12 ? 1.0 : (1.0 - cpow(z, n)) / (n * (1.0 - z));
        const uint32_t i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
        const double x0 = bias[i0], x1 = bias[i1];
        out[i0] = (float)(x0 * creal(mean) - x1 * cimag(mean));
        out[i1] = (float)(x0 * cimag(mean) + x1 * creal(mean));
    }
}

/* The positions a session can reach: its context, or the pool if smaller. */
static uint32_t positions(const hx_model *m)
{
    return m->info.kv_tokens && m->info.kv_tokens < m->info.n_ctx ? m->info.kv_tokens : m->info.n_ctx;
}

/* Layer l's centre, or none (NULL): a layer without an F32 K bias of the
 * pool's heads (a model without one; a rank without the layer). */
static hx_status layer_center(hx_model *m, uint32_t l, const float *factors)
{
    const hx_weight *b = &m->layers[l].w[HX_LW_K_BIAS];
    const uint32_t Dh = m->info.head_dim, Hkv = m->info.n_head_kv;
    if (!b->buf || b->type != HX_TYPE_F32 || hx_buffer_size(b->buf) != sizeof(float) * Hkv * Dh)
        return HX_OK;
    const float *bias;
    float *c;
    hx_status s = hx_buffer_acquire(b->buf, HX_R, (void **)&bias);
    if (s == HX_OK)
        s = hx_buffer_create(m->rt, sizeof(float) * Hkv * Dh, &m->layers[l].k_center);
    if (s == HX_OK)
        s = hx_buffer_acquire(m->layers[l].k_center, HX_W, (void **)&c);
    if (s)
        return hx_error_context(s, "layer %u's K centre", l);
    for (uint32_t h = 0; h < Hkv; h++)
        hx_kv_center_head(bias + (size_t)h * Dh, c + (size_t)h * Dh, Dh, m->hp.n_rot, m->arch->rope == HX_ROPE_NEOX,
                          hx_model_layer_rope_base(m, l), hx_model_layer_rope_scale(m, l), factors, positions(m));
    return HX_OK;
}

hx_status hx_model_kv_centers(hx_model *m)
{
    if (!m->kv_center)
        return HX_OK;
    const float *factors = NULL;
    hx_status s = m->rope_freqs.buf ? hx_buffer_acquire(m->rope_freqs.buf, HX_R, (void **)&factors) : HX_OK;
    for (uint32_t l = hx_model_stage_l0(m); l < hx_model_stage_l1(m) && s == HX_OK; l++)
        s = layer_center(m, l, factors);
    return s;
}
