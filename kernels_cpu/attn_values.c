/* Dispatch of kernels_cpu/attn_values.h by SIMD level; the scalar level,
 * which defines the bits: 32 elements of a row at a time, as F32, then
 * each column's fused multiply-add. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "kernels_cpu/attn_values.h"
#include "kernels_cpu/attn_values_impl.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

int hx_attn_values_type_ok(hx_type t)
{
    return t == HX_TYPE_F32 || t == HX_TYPE_F16 || t == HX_TYPE_Q8_0 || t == HX_TYPE_Q4_0;
}

/* Elements [i, i + len) of a row (len <= HX_QK; quantized rows: i a
 * multiple of HX_QK and len == HX_QK) as F32, exactly. */
static void row_part(const uint8_t *x, hx_type t, int64_t i, int64_t len, float *v)
{
    /* Rows need not be aligned (a cache's rows of one head are packed):
     * every load goes through memcpy. */
    if (t == HX_TYPE_F32) {
        memcpy(v, x + (size_t)i * sizeof(float), (size_t)len * sizeof(float));
    } else if (t == HX_TYPE_F16) {
        for (int64_t k = 0; k < len; k++) {
            hx_half h;
            memcpy(&h, x + (size_t)(i + k) * sizeof h, sizeof h);
            v[k] = hx_fp16_to_fp32(h);
        }
    } else if (t == HX_TYPE_Q8_0) {
        hx_block_q8_0 b;
        memcpy(&b, x + (size_t)(i / HX_QK) * sizeof b, sizeof b);
        const float d = hx_fp16_to_fp32(b.d);
        for (int k = 0; k < HX_QK; k++)
            v[k] = (float)b.qs[k] * d;
    } else {
        hx_block_q4_0 b;
        memcpy(&b, x + (size_t)(i / HX_QK) * sizeof b, sizeof b);
        const float d = hx_fp16_to_fp32(b.d);
        for (int k = 0; k < HX_QK / 2; k++) {
            v[k] = (float)((b.qs[k] & 0xf) - 8) * d;
            v[k + HX_QK / 2] = (float)((b.qs[k] >> 4) - 8) * d;
        }
    }
}

static void values_scalar(float *acc, size_t acc_stride, const float *w, size_t w_stride, int64_t cols,
                          const void *x, size_t x_stride, hx_type t, int64_t rows, int64_t n)
{
    float v[HX_QK];
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *row = (const uint8_t *)x + (size_t)r * x_stride;
        for (int64_t i = 0; i < n; i += HX_QK) {
            const int64_t len = n - i < HX_QK ? n - i : HX_QK;
            row_part(row, t, i, len, v);
            for (int64_t c = 0; c < cols; c++) {
                float *a = acc + (size_t)c * acc_stride + i;
                const float wr = w[(size_t)c * w_stride + (size_t)r];
                for (int64_t k = 0; k < len; k++)
                    a[k] = fmaf(wr, v[k], a[k]);
            }
        }
    }
}

void hx_attn_values(float *acc, size_t acc_stride, const float *w, size_t w_stride, int64_t cols, const void *x,
                    size_t x_stride, hx_type t, int64_t rows, int64_t n)
{
    static const hx_attn_values_fn by_level[HX_SIMD_COUNT] = {values_scalar, hx_attn_values_avx2,
                                                              hx_attn_values_avx512};
    if (cols > 0 && rows > 0 && n > 0)
        by_level[hx_quant_level()](acc, acc_stride, w, w_stride, cols, x, x_stride, t, rows, n);
}
