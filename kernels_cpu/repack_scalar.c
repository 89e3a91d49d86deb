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

static void gemm_x8(int64_t K, int C, float *s, size_t ss, const void *group, const void *y, size_t by,
                    int (*at)(const uint8_t *, int, int), size_t blk)
{
    const uint8_t *w0 = group;
    for (int c = 0; c < C; c++)
        for (int r = 0; r < HX_REPACK_ROWS; r++) {
            const uint8_t *w = w0, *a = (const uint8_t *)y + c * by;
            float acc = 0;
            for (int64_t i = 0; i < K / HX_QK; i++, w += blk, a += sizeof(hx_block_q8_0)) {
                int32_t isum = 0;
                for (int j = 0; j < HX_QK; j++)
                    isum += at(w + HX_REPACK_ROWS * sizeof(hx_half), r, j) * (int8_t)a[offsetof(hx_block_q8_0, qs) + j];
                const float d = hx_fp16_to_fp32(hx_ld16(w + r * sizeof(hx_half))) * hx_fp16_to_fp32(hx_ld16(a));
                acc = fmaf((float)isum, d, acc);
            }
            s[c * ss + r] = acc;
        }
}

static void gemm_q4_0x8(int64_t K, int C, float *s, size_t ss, const void *group, const void *y, size_t by)
{
    gemm_x8(K, C, s, ss, group, y, by, q4_at, hx_repack_block_bytes(HX_TYPE_Q4_0));
}

static void gemm_q8_0x8(int64_t K, int C, float *s, size_t ss, const void *group, const void *y, size_t by)
{
    gemm_x8(K, C, s, ss, group, y, by, q8_at, hx_repack_block_bytes(HX_TYPE_Q8_0));
}

const hx_repack_gemm_fn hx_repack_scalar_kernels[HX_TYPE_COUNT] = {
    [HX_TYPE_Q4_0] = gemm_q4_0x8,
    [HX_TYPE_Q8_0] = gemm_q8_0x8,
};
