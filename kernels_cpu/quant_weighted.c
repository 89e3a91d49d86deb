/* Quantizers with importance weights (hx_quant_ops.quantize_weighted):
 * ggml's quantize_row_*_impl for the 32-element types and Q4_K/Q5_K.
 * Each element's weight is its importance qw[j] times sqrt(sigma2 +
 * x[j]^2), sigma2 the mean square of the row (32-element types) or twice
 * that of the super-block (K-quants), so that large weights keep their
 * precision where the activations that meet them are large.
 *
 * With qw == NULL each is the type's quantize_row, as ggml's quantize_*
 * falls back to quantize_row_*_ref without an importance matrix. */
#include <math.h>
#include <stddef.h>

#include "kernels_cpu/quant_fit.h"

/* Q4_0 / Q5_0: symmetric, x = d * (q - 2^(bits-1)). */
static void weighted_sym(const float *x, uint8_t *y, int64_t n, const float *qw, int bits)
{
    const size_t B = bits == 4 ? sizeof(hx_block_q4_0) : sizeof(hx_block_q5_0);
    const float sigma2 = hx_quant_sum_sq(x, n) / (float)n;
    float w[HX_QK];
    int8_t L[HX_QK];
    for (int64_t b = 0; b < n / HX_QK; b++, x += HX_QK, qw += HX_QK, y += B) {
        hx_quant_importance(w, x, qw, HX_QK, sigma2);
        const float d = hx_quant_fit_sym(HX_QK, 1 << (bits - 1), x, L, w);
        hx_st16(y, hx_fp32_to_fp16(d));
        if (bits == 4)
            hx_quant_pack32((const uint8_t *)L, y + offsetof(hx_block_q4_0, qs), NULL);
        else
            hx_quant_pack32((const uint8_t *)L, y + offsetof(hx_block_q5_0, qs), y + offsetof(hx_block_q5_0, qh));
    }
}

/* Q4_1 / Q5_1: x = d * q + m, the fit of make_qkx3_quants. */
static void weighted_asym(const float *x, uint8_t *y, int64_t n, const float *qw, int bits)
{
    const size_t B = bits == 4 ? sizeof(hx_block_q4_1) : sizeof(hx_block_q5_1);
    const float sigma2 = hx_quant_sum_sq(x, n) / (float)n;
    float w[HX_QK], min;
    uint8_t L[HX_QK];
    for (int64_t b = 0; b < n / HX_QK; b++, x += HX_QK, qw += HX_QK, y += B) {
        hx_quant_importance(w, x, qw, HX_QK, sigma2);
        const float d = hx_quant_fit_scale_min(HX_QK, (1 << bits) - 1, x, w, L, &min, -0.9f, 0.05f, 36, 0);
        hx_st16(y, hx_fp32_to_fp16(d));
        hx_st16(y + 2, hx_fp32_to_fp16(-min));
        if (bits == 4)
            hx_quant_pack32(L, y + offsetof(hx_block_q4_1, qs), NULL);
        else
            hx_quant_pack32(L, y + offsetof(hx_block_q5_1, qs), y + offsetof(hx_block_q5_1, qh));
    }
}

void hx_quant_weighted_q4_0(const float *x, void *y, int64_t n, const float *qw)
{
    if (!qw)
        hx_quant_quantize_q4_0(x, y, n);
    else
        weighted_sym(x, y, n, qw, 4);
}

void hx_quant_weighted_q5_0(const float *x, void *y, int64_t n, const float *qw)
{
    if (!qw)
        hx_quant_quantize_q5_0(x, y, n);
    else
        weighted_sym(x, y, n, qw, 5);
}

void hx_quant_weighted_q4_1(const float *x, void *y, int64_t n, const float *qw)
{
    if (!qw)
        hx_quant_quantize_q4_1(x, y, n);
    else
        weighted_asym(x, y, n, qw, 4);
}

void hx_quant_weighted_q5_1(const float *x, void *y, int64_t n, const float *qw)
{
    if (!qw)
        hx_quant_quantize_q5_1(x, y, n);
    else
        weighted_asym(x, y, n, qw, 5);
}

/* Q4_K (nmax 15) / Q5_K (nmax 31): each sub-block of 32 fitted with its
 * weights, then its scale and min quantized to 6 bits by a weighted fit
 * of their own (weights: the sub-block's total weight). */
static void weighted_k4(const float *x, uint8_t *y, int64_t n, const float *qw, int nmax)
{
    const size_t B = nmax == 15 ? sizeof(hx_block_q4_K) : sizeof(hx_block_q5_K);
    uint8_t L[HX_QK_K], ls[8], lm[8];
    float w[32], sw[8], scales[8], mins[8];
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += HX_QK_K, qw += HX_QK_K, y += B) {
        const float sigma2 = 2 * hx_quant_sum_sq(x, HX_QK_K) / HX_QK_K;
        for (int j = 0; j < 8; j++) {
            sw[j] = hx_quant_importance(w, x + 32 * j, qw + 32 * j, 32, sigma2);
            scales[j] =
                hx_quant_fit_scale_min(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j], -0.9f, 0.05f, 36, 0);
        }
        const float d = hx_quant_fit_pos(8, 63, scales, ls, sw);
        const float m = hx_quant_fit_pos(8, 63, mins, lm, sw);
        for (int j = 0; j < 8; j++) { /* Q5_K clamps as ggml does; the fit never exceeds 63 */
            ls[j] = ls[j] < 63 ? ls[j] : 63;
            lm[j] = lm[j] < 63 ? lm[j] : 63;
        }
        hx_quant_k4_pack_scales(y + offsetof(hx_block_q4_K, scales), ls, lm);
        hx_st16(y + offsetof(hx_block_q4_K, d), hx_fp32_to_fp16(d));
        hx_st16(y + offsetof(hx_block_q4_K, dmin), hx_fp32_to_fp16(m));
        hx_quant_k4_finish(x, y, L, nmax);
    }
}

void hx_quant_weighted_q4_K(const float *x, void *y, int64_t n, const float *qw)
{
    if (!qw)
        hx_quant_quantize_q4_K(x, y, n);
    else
        weighted_k4(x, y, n, qw, 15);
}

void hx_quant_weighted_q5_K(const float *x, void *y, int64_t n, const float *qw)
{
    if (!qw)
        hx_quant_quantize_q5_K(x, y, n);
    else
        weighted_k4(x, y, n, qw, 31);
}
