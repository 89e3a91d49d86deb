/* The scalar reference: dequantization and dot products of every type,
 * written straight from the block layouts.  The SIMD levels must give the
 * same bits when dequantizing (the arithmetic below is ggml's: an integer
 * quant converted to float, times the scale, minus the min, no fused
 * multiply-add), and the same dot products up to float summation order. */
#include <stddef.h>

#include "kernels_cpu/quant_impl.h"

#define H(p) hx_fp16_to_fp32(hx_ld16(p))

/* ---- plain types -------------------------------------------------------- */

static void dequant_f32(const void *vx, float *y, int64_t n)
{
    memcpy(y, vx, (size_t)n * sizeof(float));
}

static void dequant_f16(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n; i++)
        y[i] = H(x + 2 * i);
}

static void dequant_bf16(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n; i++)
        y[i] = hx_bf16_to_fp32(hx_ld16(x + 2 * i));
}

/* Plain dots accumulate in double: the reference should be the accurate one. */
static void dot_f32(int64_t n, float *s, const void *vx, const void *vy)
{
    const uint8_t *x = vx;
    const float *y = vy;
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)hx_ldf(x + 4 * i) * y[i];
    *s = (float)sum;
}

static void dot_f16(int64_t n, float *s, const void *vx, const void *vy)
{
    const uint8_t *x = vx;
    const float *y = vy;
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)H(x + 2 * i) * y[i];
    *s = (float)sum;
}

static void dot_bf16(int64_t n, float *s, const void *vx, const void *vy)
{
    const uint8_t *x = vx;
    const float *y = vy;
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)hx_bf16_to_fp32(hx_ld16(x + 2 * i)) * y[i];
    *s = (float)sum;
}

/* ---- 32-element blocks -------------------------------------------------- */

static void dequant_q4_0(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / HX_QK; i++, x += sizeof(hx_block_q4_0), y += HX_QK) {
        const float d = H(x + offsetof(hx_block_q4_0, d));
        const uint8_t *qs = x + offsetof(hx_block_q4_0, qs);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)((qs[j] & 0xf) - 8) * d;
            y[j + 16] = (float)((qs[j] >> 4) - 8) * d;
        }
    }
}

static void dequant_q4_1(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / HX_QK; i++, x += sizeof(hx_block_q4_1), y += HX_QK) {
        const float d = H(x + offsetof(hx_block_q4_1, d));
        const float m = H(x + offsetof(hx_block_q4_1, m));
        const uint8_t *qs = x + offsetof(hx_block_q4_1, qs);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)(qs[j] & 0xf) * d + m;
            y[j + 16] = (float)(qs[j] >> 4) * d + m;
        }
    }
}

/* The five-bit quant j (0..31) of a Q5 block. */
static inline int q5_at(const uint8_t *qs, uint32_t qh, int j)
{
    const int lo = j < 16 ? qs[j] & 0xf : qs[j - 16] >> 4;
    return lo | (int)(((qh >> j) & 1u) << 4);
}

static void dequant_q5_0(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / HX_QK; i++, x += sizeof(hx_block_q5_0), y += HX_QK) {
        const float d = H(x + offsetof(hx_block_q5_0, d));
        const uint32_t qh = hx_ld32(x + offsetof(hx_block_q5_0, qh));
        const uint8_t *qs = x + offsetof(hx_block_q5_0, qs);
        for (int j = 0; j < HX_QK; j++)
            y[j] = (float)(q5_at(qs, qh, j) - 16) * d;
    }
}

static void dequant_q5_1(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / HX_QK; i++, x += sizeof(hx_block_q5_1), y += HX_QK) {
        const float d = H(x + offsetof(hx_block_q5_1, d));
        const float m = H(x + offsetof(hx_block_q5_1, m));
        const uint32_t qh = hx_ld32(x + offsetof(hx_block_q5_1, qh));
        const uint8_t *qs = x + offsetof(hx_block_q5_1, qs);
        for (int j = 0; j < HX_QK; j++)
            y[j] = (float)q5_at(qs, qh, j) * d + m;
    }
}

static void dequant_q8_0(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / HX_QK; i++, x += sizeof(hx_block_q8_0), y += HX_QK) {
        const float d = H(x + offsetof(hx_block_q8_0, d));
        const int8_t *qs = (const int8_t *)(x + offsetof(hx_block_q8_0, qs));
        for (int j = 0; j < HX_QK; j++)
            y[j] = (float)qs[j] * d;
    }
}

static void dequant_q8_1(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / HX_QK; i++, x += sizeof(hx_block_q8_1), y += HX_QK) {
        const float d = H(x + offsetof(hx_block_q8_1, d));
        const int8_t *qs = (const int8_t *)(x + offsetof(hx_block_q8_1, qs));
        for (int j = 0; j < HX_QK; j++)
            y[j] = (float)qs[j] * d;
    }
}

static void dot_q4_0(int64_t n, float *s, const void *vx, const void *vy)
{
    const uint8_t *x = vx, *y = vy;
    float sum = 0;
    for (int64_t i = 0; i < n / HX_QK; i++, x += sizeof(hx_block_q4_0), y += sizeof(hx_block_q8_0)) {
        const uint8_t *qs = x + offsetof(hx_block_q4_0, qs);
        const int8_t *a = (const int8_t *)(y + offsetof(hx_block_q8_0, qs));
        int isum = 0;
        for (int j = 0; j < 16; j++)
            isum += ((qs[j] & 0xf) - 8) * a[j] + ((qs[j] >> 4) - 8) * a[j + 16];
        sum += (float)isum * (H(x + offsetof(hx_block_q4_0, d)) * H(y + offsetof(hx_block_q8_0, d)));
    }
    *s = sum;
}

static void dot_q4_1(int64_t n, float *s, const void *vx, const void *vy)
{
    const uint8_t *x = vx, *y = vy;
    float sum = 0;
    for (int64_t i = 0; i < n / HX_QK; i++, x += sizeof(hx_block_q4_1), y += sizeof(hx_block_q8_1)) {
        const uint8_t *qs = x + offsetof(hx_block_q4_1, qs);
        const int8_t *a = (const int8_t *)(y + offsetof(hx_block_q8_1, qs));
        int isum = 0;
        for (int j = 0; j < 16; j++)
            isum += (qs[j] & 0xf) * a[j] + (qs[j] >> 4) * a[j + 16];
        sum += (float)isum * (H(x + offsetof(hx_block_q4_1, d)) * H(y + offsetof(hx_block_q8_1, d))) +
               H(x + offsetof(hx_block_q4_1, m)) * H(y + offsetof(hx_block_q8_1, s));
    }
    *s = sum;
}

static void dot_q5_0(int64_t n, float *s, const void *vx, const void *vy)
{
    const uint8_t *x = vx, *y = vy;
    float sum = 0;
    for (int64_t i = 0; i < n / HX_QK; i++, x += sizeof(hx_block_q5_0), y += sizeof(hx_block_q8_0)) {
        const uint8_t *qs = x + offsetof(hx_block_q5_0, qs);
        const uint32_t qh = hx_ld32(x + offsetof(hx_block_q5_0, qh));
        const int8_t *a = (const int8_t *)(y + offsetof(hx_block_q8_0, qs));
        int isum = 0;
        for (int j = 0; j < 16; j++) {
            const int lo = (qs[j] & 0xf) | (int)(((qh >> j) & 1u) << 4);
            const int hi = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
            isum += (lo - 16) * a[j] + (hi - 16) * a[j + 16];
        }
        sum += (float)isum * (H(x + offsetof(hx_block_q5_0, d)) * H(y + offsetof(hx_block_q8_0, d)));
    }
    *s = sum;
}

static void dot_q5_1(int64_t n, float *s, const void *vx, const void *vy)
{
    const uint8_t *x = vx, *y = vy;
    float sum = 0;
    for (int64_t i = 0; i < n / HX_QK; i++, x += sizeof(hx_block_q5_1), y += sizeof(hx_block_q8_1)) {
        const uint8_t *qs = x + offsetof(hx_block_q5_1, qs);
        const uint32_t qh = hx_ld32(x + offsetof(hx_block_q5_1, qh));
        const int8_t *a = (const int8_t *)(y + offsetof(hx_block_q8_1, qs));
        int isum = 0;
        for (int j = 0; j < 16; j++) {
            const int lo = (qs[j] & 0xf) | (int)(((qh >> j) & 1u) << 4);
            const int hi = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
            isum += lo * a[j] + hi * a[j + 16];
        }
        sum += (float)isum * (H(x + offsetof(hx_block_q5_1, d)) * H(y + offsetof(hx_block_q8_1, d))) +
               H(x + offsetof(hx_block_q5_1, m)) * H(y + offsetof(hx_block_q8_1, s));
    }
    *s = sum;
}

static void dot_q8_0(int64_t n, float *s, const void *vx, const void *vy)
{
    const uint8_t *x = vx, *y = vy;
    float sum = 0;
    for (int64_t i = 0; i < n / HX_QK; i++, x += sizeof(hx_block_q8_0), y += sizeof(hx_block_q8_0)) {
        const int8_t *w = (const int8_t *)(x + offsetof(hx_block_q8_0, qs));
        const int8_t *a = (const int8_t *)(y + offsetof(hx_block_q8_0, qs));
        int isum = 0;
        for (int j = 0; j < HX_QK; j++)
            isum += w[j] * a[j];
        sum += (float)isum * (H(x + offsetof(hx_block_q8_0, d)) * H(y + offsetof(hx_block_q8_0, d)));
    }
    *s = sum;
}

/* ---- K-quants ----------------------------------------------------------- */

/* Loops follow the packing: chunk c (0..3) of qs holds sub-block 2c in its
 * low nibbles and sub-block 2c+1 in its high nibbles; Q5_K's fifth bits
 * are bits 2c and 2c+1 of qh[l].  A Q6_K half h holds four groups of 32
 * (k = 0..3): low bits in ql[64h + l + 32(k&1)] (low nibble for k < 2),
 * top bits in bits 2k..2k+1 of qh[32h + l]. */

static void dequant_q4_K(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += sizeof(hx_block_q4_K), y += HX_QK_K) {
        const float d = H(x + offsetof(hx_block_q4_K, d));
        const float dmin = H(x + offsetof(hx_block_q4_K, dmin));
        uint64_t sc, m;
        hx_quant_k4_unpack(x + offsetof(hx_block_q4_K, scales), &sc, &m);
        for (int c = 0; c < 4; c++) {
            const uint8_t *q = x + offsetof(hx_block_q4_K, qs) + 32 * c;
            const float d0 = d * (float)(uint8_t)(sc >> (16 * c)), m0 = dmin * (float)(uint8_t)(m >> (16 * c));
            const float d1 = d * (float)(uint8_t)(sc >> (16 * c + 8)), m1 = dmin * (float)(uint8_t)(m >> (16 * c + 8));
            for (int l = 0; l < 32; l++) {
                y[64 * c + l] = d0 * (float)(q[l] & 0xf) - m0;
                y[64 * c + 32 + l] = d1 * (float)(q[l] >> 4) - m1;
            }
        }
    }
}

static void dequant_q5_K(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += sizeof(hx_block_q5_K), y += HX_QK_K) {
        const float d = H(x + offsetof(hx_block_q5_K, d));
        const float dmin = H(x + offsetof(hx_block_q5_K, dmin));
        const uint8_t *qh = x + offsetof(hx_block_q5_K, qh);
        uint64_t sc, m;
        hx_quant_k4_unpack(x + offsetof(hx_block_q5_K, scales), &sc, &m);
        for (int c = 0; c < 4; c++) {
            const uint8_t *q = x + offsetof(hx_block_q5_K, qs) + 32 * c;
            const float d0 = d * (float)(uint8_t)(sc >> (16 * c)), m0 = dmin * (float)(uint8_t)(m >> (16 * c));
            const float d1 = d * (float)(uint8_t)(sc >> (16 * c + 8)), m1 = dmin * (float)(uint8_t)(m >> (16 * c + 8));
            for (int l = 0; l < 32; l++) {
                const int h0 = ((qh[l] >> (2 * c)) & 1) << 4, h1 = ((qh[l] >> (2 * c + 1)) & 1) << 4;
                y[64 * c + l] = d0 * (float)((q[l] & 0xf) | h0) - m0;
                y[64 * c + 32 + l] = d1 * (float)((q[l] >> 4) | h1) - m1;
            }
        }
    }
}

/* The four 6-bit quants (0..63) at position l of half h of a Q6_K block:
 * elements 128h + l + 32k, k = 0..3. */
static inline void q6_quad(const uint8_t *b, int h, int l, int q[4])
{
    const uint8_t lo0 = b[offsetof(hx_block_q6_K, ql) + 64 * h + l];
    const uint8_t lo1 = b[offsetof(hx_block_q6_K, ql) + 64 * h + l + 32];
    const uint8_t hi = b[offsetof(hx_block_q6_K, qh) + 32 * h + l];
    q[0] = (lo0 & 0xf) | ((hi & 3) << 4);
    q[1] = (lo1 & 0xf) | (((hi >> 2) & 3) << 4);
    q[2] = (lo0 >> 4) | (((hi >> 4) & 3) << 4);
    q[3] = (lo1 >> 4) | ((hi >> 6) << 4);
}

static void dequant_q6_K(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += sizeof(hx_block_q6_K), y += HX_QK_K) {
        const float d = H(x + offsetof(hx_block_q6_K, d));
        const int8_t *sc = (const int8_t *)(x + offsetof(hx_block_q6_K, scales));
        for (int h = 0; h < 2; h++) {
            for (int l = 0; l < 32; l++) {
                int q[4];
                q6_quad(x, h, l, q);
                for (int k = 0; k < 4; k++) {
                    const int e = 128 * h + 32 * k + l;
                    y[e] = d * (float)sc[e / 16] * (float)(q[k] - 32);
                }
            }
        }
    }
}

static void dequant_q8_K(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += sizeof(hx_block_q8_K), y += HX_QK_K) {
        const float d = hx_ldf(x + offsetof(hx_block_q8_K, d));
        const int8_t *qs = (const int8_t *)(x + offsetof(hx_block_q8_K, qs));
        for (int j = 0; j < HX_QK_K; j++)
            y[j] = (float)qs[j] * d;
    }
}

/* The K-quants' min term: sum over sub-blocks of m[j] * (sum of the
 * activations of sub-block j), read from the Q8_K block's bsums. */
static int k4_min_sum(const uint8_t *y, uint64_t m)
{
    const uint8_t *bs = y + offsetof(hx_block_q8_K, bsums);
    int sum = 0;
    for (int j = 0; j < 8; j++)
        sum += (int)(uint8_t)(m >> (8 * j)) * ((int16_t)hx_ld16(bs + 4 * j) + (int16_t)hx_ld16(bs + 4 * j + 2));
    return sum;
}

static void dot_q4_K(int64_t n, float *s, const void *vx, const void *vy)
{
    const uint8_t *x = vx, *y = vy;
    float sum = 0;
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += sizeof(hx_block_q4_K), y += sizeof(hx_block_q8_K)) {
        const int8_t *a = (const int8_t *)(y + offsetof(hx_block_q8_K, qs));
        uint64_t sc, m;
        hx_quant_k4_unpack(x + offsetof(hx_block_q4_K, scales), &sc, &m);
        int isum = 0;
        for (int c = 0; c < 4; c++) {
            const uint8_t *q = x + offsetof(hx_block_q4_K, qs) + 32 * c;
            int s0 = 0, s1 = 0;
            for (int l = 0; l < 32; l++) {
                s0 += (q[l] & 0xf) * a[64 * c + l];
                s1 += (q[l] >> 4) * a[64 * c + 32 + l];
            }
            isum += (int)(uint8_t)(sc >> (16 * c)) * s0 + (int)(uint8_t)(sc >> (16 * c + 8)) * s1;
        }
        const float dy = hx_ldf(y + offsetof(hx_block_q8_K, d));
        sum += dy * H(x + offsetof(hx_block_q4_K, d)) * (float)isum -
               dy * H(x + offsetof(hx_block_q4_K, dmin)) * (float)k4_min_sum(y, m);
    }
    *s = sum;
}

static void dot_q5_K(int64_t n, float *s, const void *vx, const void *vy)
{
    const uint8_t *x = vx, *y = vy;
    float sum = 0;
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += sizeof(hx_block_q5_K), y += sizeof(hx_block_q8_K)) {
        const uint8_t *qh = x + offsetof(hx_block_q5_K, qh);
        const int8_t *a = (const int8_t *)(y + offsetof(hx_block_q8_K, qs));
        uint64_t sc, m;
        hx_quant_k4_unpack(x + offsetof(hx_block_q5_K, scales), &sc, &m);
        int isum = 0;
        for (int c = 0; c < 4; c++) {
            const uint8_t *q = x + offsetof(hx_block_q5_K, qs) + 32 * c;
            int s0 = 0, s1 = 0;
            for (int l = 0; l < 32; l++) {
                const int h0 = ((qh[l] >> (2 * c)) & 1) << 4, h1 = ((qh[l] >> (2 * c + 1)) & 1) << 4;
                s0 += ((q[l] & 0xf) | h0) * a[64 * c + l];
                s1 += ((q[l] >> 4) | h1) * a[64 * c + 32 + l];
            }
            isum += (int)(uint8_t)(sc >> (16 * c)) * s0 + (int)(uint8_t)(sc >> (16 * c + 8)) * s1;
        }
        const float dy = hx_ldf(y + offsetof(hx_block_q8_K, d));
        sum += dy * H(x + offsetof(hx_block_q5_K, d)) * (float)isum -
               dy * H(x + offsetof(hx_block_q5_K, dmin)) * (float)k4_min_sum(y, m);
    }
    *s = sum;
}

static void dot_q6_K(int64_t n, float *s, const void *vx, const void *vy)
{
    const uint8_t *x = vx, *y = vy;
    float sum = 0;
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += sizeof(hx_block_q6_K), y += sizeof(hx_block_q8_K)) {
        const int8_t *sc = (const int8_t *)(x + offsetof(hx_block_q6_K, scales));
        const int8_t *a = (const int8_t *)(y + offsetof(hx_block_q8_K, qs));
        int sub[16] = {0}; /* per sub-block of 16 */
        for (int h = 0; h < 2; h++) {
            for (int l = 0; l < 32; l++) {
                int q[4];
                q6_quad(x, h, l, q);
                for (int k = 0; k < 4; k++) {
                    const int e = 128 * h + 32 * k + l;
                    sub[e / 16] += (q[k] - 32) * a[e];
                }
            }
        }
        int isum = 0;
        for (int g = 0; g < 16; g++)
            isum += sc[g] * sub[g];
        sum += hx_ldf(y + offsetof(hx_block_q8_K, d)) * H(x + offsetof(hx_block_q6_K, d)) * (float)isum;
    }
    *s = sum;
}

HX_QUANT_DOT4_OF(dot4_f32, dot_f32)
HX_QUANT_DOT4_OF(dot4_f16, dot_f16)
HX_QUANT_DOT4_OF(dot4_bf16, dot_bf16)
HX_QUANT_DOT4_OF(dot4_q4_0, dot_q4_0)
HX_QUANT_DOT4_OF(dot4_q4_1, dot_q4_1)
HX_QUANT_DOT4_OF(dot4_q5_0, dot_q5_0)
HX_QUANT_DOT4_OF(dot4_q5_1, dot_q5_1)
HX_QUANT_DOT4_OF(dot4_q8_0, dot_q8_0)
HX_QUANT_DOT4_OF(dot4_q4_K, dot_q4_K)
HX_QUANT_DOT4_OF(dot4_q5_K, dot_q5_K)
HX_QUANT_DOT4_OF(dot4_q6_K, dot_q6_K)

HX_QUANT_GEMM_OF(gemm_f32, dot4_f32)
HX_QUANT_GEMM_OF(gemm_f16, dot4_f16)
HX_QUANT_GEMM_OF(gemm_bf16, dot4_bf16)
HX_QUANT_GEMM_OF(gemm_q4_0, dot4_q4_0)
HX_QUANT_GEMM_OF(gemm_q4_1, dot4_q4_1)
HX_QUANT_GEMM_OF(gemm_q5_0, dot4_q5_0)
HX_QUANT_GEMM_OF(gemm_q5_1, dot4_q5_1)
HX_QUANT_GEMM_OF(gemm_q8_0, dot4_q8_0)

/* Q8_0 rows x F32 activations (hx_quant_ops.gemm_f32_act): dot_f32 over
 * the dequantized row, each element (a byte times its block's scale)
 * exact in F32, without writing the row. */
static void gemm_q8_0_f32(int64_t n, int ncols, float *s, size_t ss, const void *vx, size_t bx, const void *vy,
                          size_t by)
{
    for (int c = 0; c < ncols; c++)
        for (int r = 0; r < 4; r++) {
            const uint8_t *x = (const uint8_t *)vx + r * bx;
            const float *y = (const float *)(const void *)((const uint8_t *)vy + c * by);
            double sum = 0;
            for (int64_t i = 0; i < n; i++) {
                const uint8_t *b = x + (size_t)(i / HX_QK) * sizeof(hx_block_q8_0);
                sum += (double)((float)((const int8_t *)(b + 2))[i % HX_QK] * H(b)) * y[i];
            }
            s[c * ss + r] = (float)sum;
        }
}
HX_QUANT_GEMM_OF(gemm_q4_K, dot4_q4_K)
HX_QUANT_GEMM_OF(gemm_q5_K, dot4_q5_K)
HX_QUANT_GEMM_OF(gemm_q6_K, dot4_q6_K)

void hx_quant_scalar_add_scaled_rows(float *acc, const float *x, size_t x_stride, const float *w, int64_t rows,
                                     int64_t n)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < n; i++)
            acc[i] += w[r] * x[(size_t)r * x_stride + i];
}

void hx_quant_scalar_add_scaled_rows_f16(float *acc, const hx_half *x, size_t x_stride, const float *w, int64_t rows,
                                         int64_t n)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < n; i++)
            acc[i] += w[r] * hx_fp16_to_fp32(x[(size_t)r * x_stride + i]);
}

const hx_quant_kernels hx_quant_scalar_kernels[HX_TYPE_COUNT] = {
    [HX_TYPE_F32] = {dequant_f32, hx_quant_quantize_f32, dot_f32, dot4_f32, gemm_f32, NULL, NULL},
    [HX_TYPE_F16] = {dequant_f16, hx_quant_quantize_f16, dot_f16, dot4_f16, gemm_f16, NULL, NULL},
    [HX_TYPE_BF16] = {dequant_bf16, hx_quant_quantize_bf16, dot_bf16, dot4_bf16, gemm_bf16, NULL, NULL},
    [HX_TYPE_Q4_0] = {dequant_q4_0, hx_quant_quantize_q4_0, dot_q4_0, dot4_q4_0, gemm_q4_0,
                      hx_quant_weighted_q4_0, NULL},
    [HX_TYPE_Q4_1] = {dequant_q4_1, hx_quant_quantize_q4_1, dot_q4_1, dot4_q4_1, gemm_q4_1,
                      hx_quant_weighted_q4_1, NULL},
    [HX_TYPE_Q5_0] = {dequant_q5_0, hx_quant_quantize_q5_0, dot_q5_0, dot4_q5_0, gemm_q5_0,
                      hx_quant_weighted_q5_0, NULL},
    [HX_TYPE_Q5_1] = {dequant_q5_1, hx_quant_quantize_q5_1, dot_q5_1, dot4_q5_1, gemm_q5_1,
                      hx_quant_weighted_q5_1, NULL},
    [HX_TYPE_Q8_0] = {dequant_q8_0, hx_quant_quantize_q8_0, dot_q8_0, dot4_q8_0, gemm_q8_0, NULL, NULL},
    [HX_TYPE_Q8_1] = {dequant_q8_1, hx_quant_quantize_q8_1, NULL, NULL, NULL, NULL, NULL},
    [HX_TYPE_Q4_K] = {dequant_q4_K, hx_quant_quantize_q4_K, dot_q4_K, dot4_q4_K, gemm_q4_K,
                      hx_quant_weighted_q4_K, NULL},
    [HX_TYPE_Q5_K] = {dequant_q5_K, hx_quant_quantize_q5_K, dot_q5_K, dot4_q5_K, gemm_q5_K,
                      hx_quant_weighted_q5_K, NULL},
    [HX_TYPE_Q6_K] = {dequant_q6_K, hx_quant_quantize_q6_K, dot_q6_K, dot4_q6_K, gemm_q6_K,
                      hx_quant_weighted_q6_K, NULL},
    [HX_TYPE_Q8_K] = {dequant_q8_K, hx_quant_quantize_q8_K, NULL, NULL, NULL, NULL, NULL},
};

const hx_gemm_fn hx_quant_scalar_gemm_f32_act[HX_TYPE_COUNT] = {[HX_TYPE_Q8_0] = gemm_q8_0_f32};
