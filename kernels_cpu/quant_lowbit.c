/* Quantizers of Q2_K, Q3_K, IQ4_NL and IQ4_XS, as ggml's: quantize_row is
 * what llama-quantize writes without an importance matrix (Q2_K, Q3_K:
 * quantize_row_*_ref; IQ4_NL, IQ4_XS: quantize_iq4_nl/xs with weights
 * x^2), quantize_weighted what it writes with one (quantize_row_*_impl). */
#include <math.h>
#include <stddef.h>

#include "kernels_cpu/quant_fit.h"

/* Packs 256 quants of 0..3 into Q2_K/Q3_K's qs. */
static void pack_2bit(const uint8_t *L, uint8_t *qs)
{
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++)
            qs[32 * h + l] = (uint8_t)(L[128 * h + l] | (L[128 * h + l + 32] << 2) | (L[128 * h + l + 64] << 4) |
                                       (L[128 * h + l + 96] << 6));
}

/* Q2_K: requantizes against the stored scales and packs. */
static void q2_K_finish(const float *x, uint8_t *y, uint8_t *L)
{
    const float d = hx_fp16_to_fp32(hx_ld16(y + offsetof(hx_block_q2_K, d)));
    const float dmin = hx_fp16_to_fp32(hx_ld16(y + offsetof(hx_block_q2_K, dmin)));
    const uint8_t *sc = y + offsetof(hx_block_q2_K, scales);
    for (int j = 0; j < 16; j++) {
        const float dj = d * (float)(sc[j] & 0xf);
        if (dj == 0)
            continue;
        const float mj = dmin * (float)(sc[j] >> 4);
        for (int l = 0; l < 16; l++)
            L[16 * j + l] = (uint8_t)hx_clampi(hx_rne((x[16 * j + l] + mj) / dj), 0, 3);
    }
    pack_2bit(L, y + offsetof(hx_block_q2_K, qs));
}

void hx_quant_quantize_q2_K(const float *x, void *vy, int64_t n)
{
    uint8_t *y = vy, L[HX_QK_K];
    float w[16], scales[16], mins[16];
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += HX_QK_K, y += sizeof(hx_block_q2_K)) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++)
                w[l] = fabsf(x[16 * j + l]);
            /* weighted by |x|, judged by absolute error (ggml's use_mad) */
            scales[j] = hx_quant_fit_scale_min(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, 1);
            if (scales[j] > max_scale)
                max_scale = scales[j];
            if (mins[j] > max_min)
                max_min = mins[j];
        }
        uint8_t *sc = y + offsetof(hx_block_q2_K, scales);
        memset(sc, 0, 16);
        if (max_scale > 0) {
            const float is = 15.f / max_scale;
            for (int j = 0; j < 16; j++)
                sc[j] = (uint8_t)hx_rne(is * scales[j]);
        }
        hx_st16(y + offsetof(hx_block_q2_K, d), hx_fp32_to_fp16(max_scale > 0 ? max_scale / 15.f : 0.f));
        if (max_min > 0) {
            const float is = 15.f / max_min;
            for (int j = 0; j < 16; j++)
                sc[j] |= (uint8_t)(hx_rne(is * mins[j]) << 4);
        }
        hx_st16(y + offsetof(hx_block_q2_K, dmin), hx_fp32_to_fp16(max_min > 0 ? max_min / 15.f : 0.f));
        q2_K_finish(x, y, L);
    }
}

void hx_quant_weighted_q2_K(const float *x, void *vy, int64_t n, const float *qw)
{
    if (!qw) {
        hx_quant_quantize_q2_K(x, vy, n);
        return;
    }
    uint8_t *y = vy, L[HX_QK_K], Ls[16], Lm[16];
    float w[16], sw[16], scales[16], mins[16];
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += HX_QK_K, qw += HX_QK_K, y += sizeof(hx_block_q2_K)) {
        const float sigma2 = hx_quant_sum_sq(x, HX_QK_K) / HX_QK_K;
        for (int j = 0; j < 16; j++) {
            sw[j] = hx_quant_importance(w, x + 16 * j, qw + 16 * j, 16, sigma2);
            scales[j] = hx_quant_fit_scale_min(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], -0.9f, 0.05f, 36, 0);
        }
        const float dm = hx_quant_fit_pos(16, 15, scales, Ls, sw), mm = hx_quant_fit_pos(16, 15, mins, Lm, sw);
        hx_st16(y + offsetof(hx_block_q2_K, d), hx_fp32_to_fp16(dm));
        hx_st16(y + offsetof(hx_block_q2_K, dmin), hx_fp32_to_fp16(mm));
        for (int j = 0; j < 16; j++)
            y[offsetof(hx_block_q2_K, scales) + j] = (uint8_t)(Ls[j] | (Lm[j] << 4));
        q2_K_finish(x, y, L);
    }
}

/* Q3_K: stores sixteen scales (ls: 0..63, the offset of 32 included),
 * requantizes against them and packs. */
static void q3_K_finish(const float *x, uint8_t *y, int8_t *L, const int ls[16])
{
    uint8_t *sc = y + offsetof(hx_block_q3_K, scales);
    memset(sc, 0, 12);
    for (int j = 0; j < 16; j++) {
        const int l = ls[j];
        if (j < 8)
            sc[j] = (uint8_t)(l & 0xf);
        else
            sc[j - 8] |= (uint8_t)((l & 0xf) << 4);
        sc[8 + j % 4] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
    }
    int8_t s[16];
    hx_quant_q3_K_scales(sc, s);
    const float d = hx_fp16_to_fp32(hx_ld16(y + offsetof(hx_block_q3_K, d)));
    for (int j = 0; j < 16; j++) {
        const float dj = d * (float)s[j];
        if (dj == 0)
            continue;
        for (int l = 0; l < 16; l++)
            L[16 * j + l] = (int8_t)(hx_clampi(hx_rne(x[16 * j + l] / dj), -4, 3) + 4);
    }
    uint8_t *hm = y + offsetof(hx_block_q3_K, hmask);
    memset(hm, 0, HX_QK_K / 8);
    for (int j = 0; j < HX_QK_K; j++) { /* the third bit: element j at bit j/32 of hmask[j%32] */
        if (L[j] > 3) {
            hm[j % 32] |= (uint8_t)(1u << (j / 32));
            L[j] = (int8_t)(L[j] - 4);
        }
    }
    pack_2bit((const uint8_t *)L, y + offsetof(hx_block_q3_K, qs));
}

void hx_quant_quantize_q3_K(const float *x, void *vy, int64_t n)
{
    uint8_t *y = vy;
    int8_t L[HX_QK_K];
    float scales[16];
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += HX_QK_K, y += sizeof(hx_block_q3_K)) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < 16; j++) {
            scales[j] = hx_quant_fit_q3(16, 4, x + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > amax) {
                amax = fabsf(scales[j]);
                max_scale = scales[j];
            }
        }
        int ls[16] = {0};
        if (max_scale != 0) {
            const float is = -32.f / max_scale;
            for (int j = 0; j < 16; j++) /* ggml rounds to int8_t first */
                ls[j] = hx_clampi((int8_t)hx_rne(is * scales[j]), -32, 31) + 32;
            hx_st16(y + offsetof(hx_block_q3_K, d), hx_fp32_to_fp16(1 / is));
        } else {
            hx_st16(y + offsetof(hx_block_q3_K, d), hx_fp32_to_fp16(0.f));
        }
        q3_K_finish(x, y, L, ls);
    }
}

void hx_quant_weighted_q3_K(const float *x, void *vy, int64_t n, const float *qw)
{
    if (!qw) {
        hx_quant_quantize_q3_K(x, vy, n);
        return;
    }
    uint8_t *y = vy;
    int8_t L[HX_QK_K], Ls[16];
    float w[16], sw[16], scales[16];
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += HX_QK_K, qw += HX_QK_K, y += sizeof(hx_block_q3_K)) {
        const float sigma2 = 2 * hx_quant_sum_sq(x, HX_QK_K) / HX_QK_K;
        for (int j = 0; j < 16; j++) {
            sw[j] = hx_quant_importance(w, x + 16 * j, qw + 16 * j, 16, sigma2);
            scales[j] = hx_quant_fit_sym(16, 4, x + 16 * j, L + 16 * j, w);
        }
        const float d = hx_quant_fit_sym(16, 32, scales, Ls, sw);
        int ls[16];
        for (int j = 0; j < 16; j++)
            ls[j] = Ls[j];
        hx_st16(y + offsetof(hx_block_q3_K, d), hx_fp32_to_fp16(d));
        q3_K_finish(x, y, L, ls);
    }
}

/* ggml's quantize_iq4_nl / quantize_iq4_xs try 7 scales either side. */
enum { IQ4_TRIES = 7 };

static void iq4_nl_rows(const float *x, uint8_t *y, int64_t n, const float *qw)
{
    for (int64_t b = 0; b < n / HX_QK; b++, y += sizeof(hx_block_iq4_nl))
        hx_quant_fit_iq4(HX_QK, x + HX_QK * b, y, y + offsetof(hx_block_iq4_nl, qs), NULL, NULL,
                         qw ? qw + HX_QK * b : NULL, IQ4_TRIES);
}

static void iq4_xs_rows(const float *x, uint8_t *y, int64_t n, const float *qw)
{
    for (int64_t b = 0; b < n / HX_QK_K; b++, y += sizeof(hx_block_iq4_xs))
        hx_quant_fit_iq4(HX_QK_K, x + HX_QK_K * b, y, y + offsetof(hx_block_iq4_xs, qs),
                         y + offsetof(hx_block_iq4_xs, scales_h), y + offsetof(hx_block_iq4_xs, scales_l),
                         qw ? qw + HX_QK_K * b : NULL, IQ4_TRIES);
}

void hx_quant_quantize_iq4_nl(const float *x, void *y, int64_t n) { iq4_nl_rows(x, y, n, NULL); }
void hx_quant_quantize_iq4_xs(const float *x, void *y, int64_t n) { iq4_xs_rows(x, y, n, NULL); }
void hx_quant_weighted_iq4_nl(const float *x, void *y, int64_t n, const float *qw) { iq4_nl_rows(x, y, n, qw); }
void hx_quant_weighted_iq4_xs(const float *x, void *y, int64_t n, const float *qw) { iq4_xs_rows(x, y, n, qw); }
