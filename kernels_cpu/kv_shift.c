/* The CPU's kv_shift (ops/ops.h): a context shift moves a session's later
 * keys and values back over the tokens it drops, rotating each key by the
 * distance it moved.  The team splits the KV heads, not the moves: a move
 * may read a slot an earlier move wrote, so each head's moves run in
 * order, and heads are independent bytes of a row. */
#include <math.h>
#include <string.h>

#include "kernels_cpu/cpu_kernels.h"
#include "kernels_cpu/hadamard.h"
#include "kernels_cpu/quant.h"
#include "ops/ops.h"

/* Per thread: one head's key as floats. */
size_t hx_cpu_kv_shift_scratch(const void *args, const size_t *sizes, int nth)
{
    const hx_op_kv_shift *a = args;
    return ((a->Dh * sizeof(float) + 63) & ~(size_t)63) * (size_t)nth;
}

int hx_cpu_kv_shift(const hx_cpu_call *c)
{
    const hx_op_kv_shift *a = c->args;
    const hx_quant_ops *q = hx_quant_ops_get((hx_type)a->kv_type);
    const size_t rbytes = hx_type_row_size((hx_type)a->kv_type, (uint64_t)a->Hkv * a->Dh);
    const size_t hbytes = hx_type_row_size((hx_type)a->kv_type, a->Dh);
    const size_t vrbytes = hx_type_row_size((hx_type)a->v_type, (uint64_t)a->Hkv * a->Dh);
    const size_t vhbytes = hx_type_row_size((hx_type)a->v_type, a->Dh);
    const hx_quantize_row_fn store = hx_quant_kv_quantizer((hx_type)a->kv_type, 0);
    if (!q || !q->dequantize_row || !store || !rbytes || !hbytes || hbytes * a->Hkv != rbytes || a->n_rot > a->Dh ||
        a->n_rot % 2 || a->n_rot > 1024 || !vrbytes || vhbytes * a->Hkv != vrbytes ||
        !hx_hadamard_width_ok(a->rot_k, a->Dh) || a->center_k > 1)
        return HX_ERR_INVALID_ARG;
    uint8_t *kc = c->buffers[0], *vc = c->buffers[1];
    const int32_t *moves = c->buffers[2];
    const uint64_t slots = c->sizes[0] / rbytes;
    if (c->sizes[2] < (uint64_t)a->n * 2 * sizeof(int32_t) || c->sizes[1] / vrbytes < slots ||
        (a->has_factors && c->sizes[3] < sizeof(float) * (a->n_rot / 2)) ||
        (a->center_k && c->sizes[3 + a->has_factors] < sizeof(float) * a->Hkv * a->Dh))
        return HX_ERR_INVALID_ARG;
    const float *center = a->center_k ? c->buffers[3 + a->has_factors] : NULL;
    float *k = (float *)((uint8_t *)c->scratch + ((a->Dh * sizeof(float) + 63) & ~(size_t)63) * (size_t)c->ith);

    /* The rotation by delta positions, the same for every key. */
    const uint32_t half = a->n_rot / 2;
    float cs[512], sn[512];
    double inv_freq[512];
    hx_cpu_rope_inv_freq(inv_freq, a->n_rot, a->freq_base, a->has_factors ? c->buffers[3] : NULL);
    for (uint32_t i = 0; i < half; i++) {
        const double th = (double)a->delta * a->freq_scale * inv_freq[i];
        cs[i] = (float)cos(th);
        sn[i] = (float)sin(th);
    }
    uint64_t lo, hi;
    hx_cpu_split(a->Hkv, c->ith, c->nth, &lo, &hi);
    for (uint32_t m = 0; m < a->n && lo < hi; m++) {
        const int32_t from = moves[2 * m], to = moves[2 * m + 1];
        if (from < 0 || to < 0 || (uint64_t)from >= slots || (uint64_t)to >= slots)
            return HX_ERR_RANGE;
        for (uint64_t h = lo; h < hi; h++) {
            const size_t src = (size_t)from * rbytes + h * hbytes, dst = (size_t)to * rbytes + h * hbytes;
            memmove(vc + (size_t)to * vrbytes + h * vhbytes, vc + (size_t)from * vrbytes + h * vhbytes, vhbytes);
            q->dequantize_row(kc + src, k, a->Dh);
            if (a->rot_k) /* back to the plain key, which RoPE rotates */
                hx_hadamard_rotate(k, a->Dh, a->rot_k);
            if (center)
                for (uint32_t d = 0; d < a->Dh; d++)
                    k[d] += center[h * a->Dh + d];
            for (uint32_t i = 0; i < half; i++) {
                const uint32_t i0 = a->neox ? i : 2 * i, i1 = a->neox ? i + half : 2 * i + 1;
                const float x0 = k[i0], x1 = k[i1];
                k[i0] = x0 * cs[i] - x1 * sn[i];
                k[i1] = x0 * sn[i] + x1 * cs[i];
            }
            if (center)
                for (uint32_t d = 0; d < a->Dh; d++)
                    k[d] -= center[h * a->Dh + d];
            if (a->rot_k)
                hx_hadamard_rotate(k, a->Dh, a->rot_k);
            store(k, kc + dst, a->Dh);
        }
    }
    return 0;
}
