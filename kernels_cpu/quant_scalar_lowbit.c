/* The scalar reference of Q2_K, Q3_K, IQ4_NL and IQ4_XS: dequantization
 * (ggml's arithmetic: the scale times the integer quant, minus the min,
 * no fused multiply-add) and dot products against Q8_K (Q8_0 for IQ4_NL)
 * as exact integer sums per block, scaled in float. */
#include <stddef.h>

#include "kernels_cpu/quant_fit.h"

#define H(p) hx_fp16_to_fp32(hx_ld16(p))

/* Q2_K's and Q3_K's 2-bit field of element e (0..255) of a block's qs. */
static inline int q2_at(const uint8_t *qs, int e)
{
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    return (qs[32 * h + l] >> (2 * k)) & 3;
}

/* Q3_K's sixteen 6-bit scales, less their offset of 32. */
void hx_quant_q3_K_scales(const uint8_t *scales, int8_t sc[16])
{
    for (int s = 0; s < 16; s++) {
        const int lo = s < 8 ? scales[s] & 0xf : scales[s - 8] >> 4;
        const int hi = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
        sc[s] = (int8_t)((lo | (hi << 4)) - 32);
    }
}

/* Q3_K's quant of element e, -4..3. */
static inline int q3_at(const uint8_t *b, int e)
{
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    const int hbit = (b[offsetof(hx_block_q3_K, hmask) + l] >> (4 * h + k)) & 1;
    return q2_at(b + offsetof(hx_block_q3_K, qs), e) - (hbit ? 0 : 4);
}

/* IQ4_XS's 6-bit scale of sub-block s, less 32. */
static inline int iq4_xs_scale(const uint8_t *b, int s)
{
    const int lo = (b[offsetof(hx_block_iq4_xs, scales_l) + s / 2] >> (4 * (s % 2))) & 0xf;
    const int hi = (hx_ld16(b + offsetof(hx_block_iq4_xs, scales_h)) >> (2 * s)) & 3;
    return (lo | (hi << 4)) - 32;
}

/* The value of quant j (0..31) of a 16-byte nibble run. */
static inline int iq4_at(const uint8_t *qs, int j)
{
    return hx_iq4nl_values[j < 16 ? qs[j] & 0xf : qs[j - 16] >> 4];
}

static void dequant_q2_K(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += sizeof(hx_block_q2_K), y += HX_QK_K) {
        const float d = H(x + offsetof(hx_block_q2_K, d)), dmin = H(x + offsetof(hx_block_q2_K, dmin));
        const uint8_t *sc = x + offsetof(hx_block_q2_K, scales);
        for (int e = 0; e < HX_QK_K; e++) {
            const float dl = d * (float)(sc[e / 16] & 0xf), ml = dmin * (float)(sc[e / 16] >> 4);
            y[e] = dl * (float)q2_at(x + offsetof(hx_block_q2_K, qs), e) - ml;
        }
    }
}

static void dequant_q3_K(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += sizeof(hx_block_q3_K), y += HX_QK_K) {
        const float d = H(x + offsetof(hx_block_q3_K, d));
        int8_t sc[16];
        hx_quant_q3_K_scales(x + offsetof(hx_block_q3_K, scales), sc);
        for (int e = 0; e < HX_QK_K; e++)
            y[e] = d * (float)sc[e / 16] * (float)q3_at(x, e);
    }
}

static void dequant_iq4_nl(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / HX_QK; i++, x += sizeof(hx_block_iq4_nl), y += HX_QK) {
        const float d = H(x);
        for (int j = 0; j < HX_QK; j++)
            y[j] = d * (float)iq4_at(x + offsetof(hx_block_iq4_nl, qs), j);
    }
}

static void dequant_iq4_xs(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += sizeof(hx_block_iq4_xs), y += HX_QK_K) {
        const float d = H(x);
        for (int s = 0; s < 8; s++) {
            const float dl = d * (float)iq4_xs_scale(x, s);
            for (int j = 0; j < 32; j++)
                y[32 * s + j] = dl * (float)iq4_at(x + offsetof(hx_block_iq4_xs, qs) + 16 * s, j);
        }
    }
}

static void dot_q2_K(int64_t n, float *s, const void *vx, const void *vy)
{
    const uint8_t *x = vx, *y = vy;
    float sum = 0;
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += sizeof(hx_block_q2_K), y += sizeof(hx_block_q8_K)) {
        const uint8_t *sc = x + offsetof(hx_block_q2_K, scales), *bs = y + offsetof(hx_block_q8_K, bsums);
        const uint8_t *qs = x + offsetof(hx_block_q2_K, qs);
        const int8_t *a = (const int8_t *)(y + offsetof(hx_block_q8_K, qs));
        int sub[16]; /* per sub-block g = 8h + 2k + j: elements 128h + 32k + 16j + l */
        for (int g = 0; g < 16; g++) {
            const uint8_t *q = qs + 32 * (g / 8) + 16 * (g % 2);
            const int8_t *ag = a + 16 * g;
            const int shift = 2 * ((g % 8) / 2);
            int acc = 0;
            for (int l = 0; l < 16; l++)
                acc += ((q[l] >> shift) & 3) * ag[l];
            sub[g] = acc;
        }
        int isum = 0, msum = 0;
        for (int g = 0; g < 16; g++) {
            isum += (sc[g] & 0xf) * sub[g];
            msum += (sc[g] >> 4) * (int16_t)hx_ld16(bs + 2 * g);
        }
        const float dy = hx_ldf(y + offsetof(hx_block_q8_K, d));
        sum += dy * H(x + offsetof(hx_block_q2_K, d)) * (float)isum -
               dy * H(x + offsetof(hx_block_q2_K, dmin)) * (float)msum;
    }
    *s = sum;
}

static void dot_q3_K(int64_t n, float *s, const void *vx, const void *vy)
{
    const uint8_t *x = vx, *y = vy;
    float sum = 0;
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += sizeof(hx_block_q3_K), y += sizeof(hx_block_q8_K)) {
        const uint8_t *qs = x + offsetof(hx_block_q3_K, qs), *hm = x + offsetof(hx_block_q3_K, hmask);
        const int8_t *a = (const int8_t *)(y + offsetof(hx_block_q8_K, qs));
        int8_t sc[16];
        hx_quant_q3_K_scales(x + offsetof(hx_block_q3_K, scales), sc);
        int sub[16]; /* as Q2_K's, the third bit at bit g/2 of hmask */
        for (int g = 0; g < 16; g++) {
            const uint8_t *q = qs + 32 * (g / 8) + 16 * (g % 2), *hb = hm + 16 * (g % 2);
            const int8_t *ag = a + 16 * g;
            const int shift = 2 * ((g % 8) / 2), bit = g / 2;
            int acc = 0;
            for (int l = 0; l < 16; l++)
                acc += (((q[l] >> shift) & 3) + 4 * ((hb[l] >> bit) & 1) - 4) * ag[l];
            sub[g] = acc;
        }
        int isum = 0;
        for (int g = 0; g < 16; g++)
            isum += sc[g] * sub[g];
        sum += hx_ldf(y + offsetof(hx_block_q8_K, d)) * H(x + offsetof(hx_block_q3_K, d)) * (float)isum;
    }
    *s = sum;
}

static void dot_iq4_nl(int64_t n, float *s, const void *vx, const void *vy)
{
    const uint8_t *x = vx, *y = vy;
    float sum = 0;
    for (int64_t i = 0; i < n / HX_QK; i++, x += sizeof(hx_block_iq4_nl), y += sizeof(hx_block_q8_0)) {
        const int8_t *a = (const int8_t *)(y + offsetof(hx_block_q8_0, qs));
        int isum = 0;
        for (int j = 0; j < HX_QK; j++)
            isum += iq4_at(x + offsetof(hx_block_iq4_nl, qs), j) * a[j];
        sum += (float)isum * (H(x) * H(y + offsetof(hx_block_q8_0, d)));
    }
    *s = sum;
}

static void dot_iq4_xs(int64_t n, float *s, const void *vx, const void *vy)
{
    const uint8_t *x = vx, *y = vy;
    float sum = 0;
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += sizeof(hx_block_iq4_xs), y += sizeof(hx_block_q8_K)) {
        const int8_t *a = (const int8_t *)(y + offsetof(hx_block_q8_K, qs));
        int isum = 0;
        for (int sb = 0; sb < 8; sb++) {
            int sub = 0;
            for (int j = 0; j < 32; j++)
                sub += iq4_at(x + offsetof(hx_block_iq4_xs, qs) + 16 * sb, j) * a[32 * sb + j];
            isum += iq4_xs_scale(x, sb) * sub;
        }
        sum += hx_ldf(y + offsetof(hx_block_q8_K, d)) * H(x) * (float)isum;
    }
    *s = sum;
}

HX_QUANT_DOT4_OF(dot4_q2_K, dot_q2_K)
HX_QUANT_DOT4_OF(dot4_q3_K, dot_q3_K)
HX_QUANT_DOT4_OF(dot4_iq4_nl, dot_iq4_nl)
HX_QUANT_DOT4_OF(dot4_iq4_xs, dot_iq4_xs)

HX_QUANT_GEMM_OF(gemm_q2_K, dot4_q2_K)
HX_QUANT_GEMM_OF(gemm_q3_K, dot4_q3_K)
HX_QUANT_GEMM_OF(gemm_iq4_nl, dot4_iq4_nl)
HX_QUANT_GEMM_OF(gemm_iq4_xs, dot4_iq4_xs)

const hx_quant_kernels hx_quant_scalar_lowbit[HX_QUANT_LOWBIT_TYPES] = {
    {dequant_q2_K, hx_quant_quantize_q2_K, dot_q2_K, dot4_q2_K, gemm_q2_K,
     hx_quant_weighted_q2_K, NULL},
    {dequant_q3_K, hx_quant_quantize_q3_K, dot_q3_K, dot4_q3_K, gemm_q3_K,
     hx_quant_weighted_q3_K, NULL},
    {dequant_iq4_nl, hx_quant_quantize_iq4_nl, dot_iq4_nl, dot4_iq4_nl, gemm_iq4_nl,
     hx_quant_weighted_iq4_nl, NULL},
    {dequant_iq4_xs, hx_quant_quantize_iq4_xs, dot_iq4_xs, dot4_iq4_xs, gemm_iq4_xs,
     hx_quant_weighted_iq4_xs, NULL},
};
