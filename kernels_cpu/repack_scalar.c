/* The repacked layouts' plain kernels: the arithmetic repack.h states,
 * one output at a time (the SIMD levels compute the same bits). */
#include <math.h>

#include "kernels_cpu/quant_impl.h"
#include "kernels_cpu/repack.h"

/* Quant j (0..31) of row r in a repacked block's quants. */
static int q8_at(const uint8_t *q, int r, int j) { return (int8_t)q[(j / 4) * 32 + 4 * r + j % 4]; }

/* Q4_0's signed nibbles: element j < 16 in byte j's low nibble, j + 16 in
 * its high one, each stored as (q - 8) in two's complement. */
static int q4_at(const uint8_t *q, int r, int j)
{
    const uint8_t b = q[((j % 16) / 4) * 32 + 4 * r + j % 4];
    return (int8_t)(j < 16 ? (uint8_t)(b << 4) : (uint8_t)(b & 0xf0)) / 16;
}

/* Q4_1's nibbles, unsigned. */
static int q4u_at(const uint8_t *q, int r, int j)
{
    const uint8_t b = q[((j % 16) / 4) * 32 + 4 * r + j % 4];
    return j < 16 ? b & 15 : b >> 4;
}

/* Q5_1's quants: Q4_1's nibbles with the fifth bit from the row's moved
 * qh word (repack.h), which comes first. */
static int q5u_at(const uint8_t *q, int r, int j)
{
    const int e = j % 16, pos = 8 * (e % 4) + e / 4 + (j < 16 ? 0 : 4);
    return q4u_at(q + 4 * HX_REPACK_ROWS, r, j) | (int)((hx_ld32(q + 4 * r) >> pos) & 1) << 4;
}

/* Q5_0's, signed: q - 16. */
static int q5_at(const uint8_t *q, int r, int j) { return q5u_at(q, r, j) - 16; }

/* The 32-element types: per block the integer dot of quant j (from `at`)
 * with the activations' (Q8_0, or Q8_1 with `mins`: Q4_1 and Q5_1, whose block's
 * min then meets the activations' s, their d times their sum). */
static void gemm_x8(int64_t K, int C, float *s, size_t ss, const void *group, const void *y, size_t by,
                    int (*at)(const uint8_t *, int, int), hx_type t, int mins)
{
    const size_t blk = hx_repack_block_bytes(t), H = sizeof(hx_half), q0 = (mins ? 2 : 1) * HX_REPACK_ROWS * H;
    const size_t A = mins ? sizeof(hx_block_q8_1) : sizeof(hx_block_q8_0);
    const size_t AQ = mins ? offsetof(hx_block_q8_1, qs) : offsetof(hx_block_q8_0, qs);
    for (int c = 0; c < C; c++)
        for (int r = 0; r < HX_REPACK_ROWS; r++) {
            const uint8_t *w = group, *a = (const uint8_t *)y + c * by;
            float acc = 0;
            for (int64_t i = 0; i < K / HX_QK; i++, w += blk, a += A) {
                int32_t isum = 0;
                for (int j = 0; j < HX_QK; j++)
                    isum += at(w + q0, r, j) * (int8_t)a[AQ + j];
                const float d = hx_fp16_to_fp32(hx_ld16(w + r * H)) * hx_fp16_to_fp32(hx_ld16(a));
                acc = fmaf((float)isum, d, acc);
                if (mins)
                    acc = fmaf(hx_fp16_to_fp32(hx_ld16(w + (HX_REPACK_ROWS + r) * H)),
                               hx_fp16_to_fp32(hx_ld16(a + offsetof(hx_block_q8_1, s))), acc);
            }
            s[c * ss + r] = acc;
        }
}

static void gemm_q4_0x8(int64_t K, int C, float *s, size_t ss, const void *group, const void *y, size_t by)
{
    gemm_x8(K, C, s, ss, group, y, by, q4_at, HX_TYPE_Q4_0, 0);
}

static void gemm_q4_1x8(int64_t K, int C, float *s, size_t ss, const void *group, const void *y, size_t by)
{
    gemm_x8(K, C, s, ss, group, y, by, q4u_at, HX_TYPE_Q4_1, 1);
}

static void gemm_q5_0x8(int64_t K, int C, float *s, size_t ss, const void *group, const void *y, size_t by)
{
    gemm_x8(K, C, s, ss, group, y, by, q5_at, HX_TYPE_Q5_0, 0);
}

static void gemm_q5_1x8(int64_t K, int C, float *s, size_t ss, const void *group, const void *y, size_t by)
{
    gemm_x8(K, C, s, ss, group, y, by, q5u_at, HX_TYPE_Q5_1, 1);
}

static void gemm_q8_0x8(int64_t K, int C, float *s, size_t ss, const void *group, const void *y, size_t by)
{
    gemm_x8(K, C, s, ss, group, y, by, q8_at, HX_TYPE_Q8_0, 0);
}

/* Q4_K and Q5_K, sub-block by sub-block (a pair's 32 bytes hold
 * sub-block 2p in their low nibbles, 2p + 1 in their high ones; Q5_K's
 * fifth bit of element 64p + 32h + l is bit 2p + h of the row's qh byte l). */
static void k4_gemm(int64_t K, int C, float *s, size_t ss, const void *group, const void *y, size_t by, int q5)
{
    const size_t blk = hx_repack_block_bytes(q5 ? HX_TYPE_Q5_K : HX_TYPE_Q4_K), H = sizeof(hx_half);
    for (int c = 0; c < C; c++)
        for (int r = 0; r < HX_REPACK_ROWS; r++) {
            const uint8_t *w = group, *a = (const uint8_t *)y + c * by;
            float acc = 0;
            for (int64_t i = 0; i < K / HX_QK_K; i++, w += blk, a += sizeof(hx_block_q8_K)) {
                const uint8_t *sc = w + 2 * HX_REPACK_ROWS * H, *mn = sc + 8 * HX_REPACK_ROWS;
                const uint8_t *qh = mn + 8 * HX_REPACK_ROWS, *q = qh + (q5 ? HX_REPACK_ROWS * HX_QK_K / 8 : 0);
                const int8_t *aq = (const int8_t *)(a + offsetof(hx_block_q8_K, qs));
                int32_t S = 0, M = 0;
                for (int j = 0; j < 8; j++) {
                    int32_t isum = 0, asum = 0;
                    for (int e = 0; e < 32; e++) {
                        const int byte = (j / 2) * 32 + e; /* the byte holding it in the row's qs */
                        const uint8_t b = q[(byte / 4) * 4 * HX_REPACK_ROWS + 4 * r + byte % 4];
                        const int hb = q5 ? (qh[(e / 4) * 4 * HX_REPACK_ROWS + 4 * r + e % 4] >> j & 1) << 4 : 0;
                        isum += ((j % 2 ? b >> 4 : b & 15) | hb) * aq[32 * j + e];
                        asum += aq[32 * j + e];
                    }
                    S += sc[j * HX_REPACK_ROWS + r] * isum;
                    M += mn[(j / 2) * 2 * HX_REPACK_ROWS + 2 * r + j % 2] * asum;
                }
                const float dy = hx_ldf(a + offsetof(hx_block_q8_K, d));
                acc = fmaf((float)S, hx_fp16_to_fp32(hx_ld16(w + r * H)) * dy, acc);
                acc = fmaf(-(float)M, hx_fp16_to_fp32(hx_ld16(w + (HX_REPACK_ROWS + r) * H)) * dy, acc);
            }
            s[c * ss + r] = acc;
        }
}

static void q4_K_gemm(int64_t K, int C, float *s, size_t ss, const void *group, const void *y, size_t by)
{
    k4_gemm(K, C, s, ss, group, y, by, 0);
}

static void q5_K_gemm(int64_t K, int C, float *s, size_t ss, const void *group, const void *y, size_t by)
{
    k4_gemm(K, C, s, ss, group, y, by, 1);
}

/* Q6_K's quant of element e (0..255) of row r, 0..63: its low four bits
 * from the half's ql bytes (element 128h + i: byte i low nibble for
 * i < 64, byte i - 64 high nibble after), its top two from qh byte i % 32,
 * bits 2 (i / 32).. */
static int q6_at(const uint8_t *q, int r, int e)
{
    const uint8_t *half = q + (e / 128) * HX_REPACK_ROWS * (HX_QK_K / 8 + HX_QK_K / 4);
    const int i = e % 128, b = i % 64, l = i % 32;
    const uint8_t lo = half[32 * HX_REPACK_ROWS + (b / 4) * 32 + 4 * r + b % 4];
    const uint8_t hi = half[(l / 4) * 32 + 4 * r + l % 4];
    return (i < 64 ? lo & 15 : lo >> 4) | ((hi >> (2 * (i / 32))) & 3) << 4;
}

static void q6_K_gemm(int64_t K, int C, float *s, size_t ss, const void *group, const void *y, size_t by)
{
    const size_t blk = hx_repack_block_bytes(HX_TYPE_Q6_K), H = sizeof(hx_half);
    for (int c = 0; c < C; c++)
        for (int r = 0; r < HX_REPACK_ROWS; r++) {
            const uint8_t *w = group, *a = (const uint8_t *)y + c * by;
            float acc = 0;
            for (int64_t i = 0; i < K / HX_QK_K; i++, w += blk, a += sizeof(hx_block_q8_K)) {
                const int8_t *sc = (const int8_t *)(w + HX_REPACK_ROWS * H);
                const uint8_t *q = w + HX_REPACK_ROWS * H + 16 * HX_REPACK_ROWS;
                const int8_t *aq = (const int8_t *)(a + offsetof(hx_block_q8_K, qs));
                int32_t S = 0;
                for (int j = 0; j < 16; j++) {
                    int32_t isum = 0;
                    for (int e = 16 * j; e < 16 * j + 16; e++)
                        isum += (q6_at(q, r, e) - 32) * aq[e];
                    S += sc[(j / 2) * 2 * HX_REPACK_ROWS + 2 * r + j % 2] * isum;
                }
                acc = fmaf((float)S, hx_fp16_to_fp32(hx_ld16(w + r * H)) * hx_ldf(a + offsetof(hx_block_q8_K, d)), acc);
            }
            s[c * ss + r] = acc;
        }
}

const hx_repack_gemm_fn hx_repack_scalar_kernels[HX_TYPE_COUNT] = {
    [HX_TYPE_Q5_K] = q5_K_gemm,
    [HX_TYPE_Q6_K] = q6_K_gemm,
    [HX_TYPE_Q4_1] = gemm_q4_1x8,
    [HX_TYPE_Q4_K] = q4_K_gemm,
    [HX_TYPE_Q4_0] = gemm_q4_0x8,
    [HX_TYPE_Q8_0] = gemm_q8_0x8,
    [HX_TYPE_Q5_0] = gemm_q5_0x8,
    [HX_TYPE_Q5_1] = gemm_q5_1x8,
};
