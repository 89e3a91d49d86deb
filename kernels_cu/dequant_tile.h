/* Dequantization of GGUF weight rows into F16 tiles, shared by the CUDA
 * kernels and the host (where the tests check it against a scalar decoding
 * of the blocks).  Pure index and bit arithmetic, no allocation.
 *
 * A row of K elements is split into groups of 32: a Q8_0 or Q4_0 block, or
 * one of the eight sub-blocks of a Q4_K super-block (each has its own 6-bit
 * scale and min).  A tile holds `rows` consecutive weight rows n0.. as F16,
 * row-major with leading dimension K, which is the layout cuBLAS reads as a
 * transposed column-major operand.
 *
 * Block layouts (as GGUF stores them, little endian):
 *   Q8_0: f16 d; int8 qs[32];                     x = d * q
 *   Q4_0: f16 d; uint8 qs[16];                    x = d * (q - 8), element j
 *         is the low nibble of qs[j] for j < 16, the high one of qs[j-16]
 *   Q4_K: f16 d, dmin; uint8 scales[12]; uint8 qs[128] for 256 elements:
 *         chunk c (64 elements) uses sub-blocks 2c and 2c+1, its first 32
 *         elements are the low nibbles of qs[32c..32c+31], the next 32 the
 *         high nibbles; x = d*sc*q - dmin*m with the 6-bit (sc, m) of the
 *         sub-block unpacked from `scales`.
 *   Q4_1, Q5_0, Q5_1, Q5_K, Q6_K: as described at their decoders below.
 * Every product is computed in the order the CPU's scalar dequantization
 * uses, so host and device tiles equal its output rounded to F16. */
#ifndef HX_KERNELS_CU_DEQUANT_TILE_H
#define HX_KERNELS_CU_DEQUANT_TILE_H

#include <stdint.h>
#include <string.h>

#include "ops/types.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define HX_DQ_FN __host__ __device__ static inline
#else
#define HX_DQ_FN static inline
#endif
#if defined(__CUDA_ARCH__)
#define HX_DQ_UNROLL _Pragma("unroll")
#else
#define HX_DQ_UNROLL
#endif

#define HX_DQ_GROUP 32

/* ---- scalar conversions (IEEE round-to-nearest-even) -------------------- */

HX_DQ_FN float hx_dq_bits_f32(uint32_t u)
{
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

HX_DQ_FN uint32_t hx_dq_f32_bits(float f)
{
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}

HX_DQ_FN float hx_dq_f16_to_f32(uint16_t h)
{
#if defined(__CUDA_ARCH__)
    __half_raw r;
    r.x = h;
    return __half2float(__half(r));
#else
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f)
        return hx_dq_bits_f32(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
        if (m == 0)
            return hx_dq_bits_f32(sign);
        /* Subnormal: shift the mantissa up to the implicit bit. */
        e = 113;
        while (!(m & 0x400u)) {
            m <<= 1;
            e--;
        }
        return hx_dq_bits_f32(sign | (e << 23) | ((m & 0x3ffu) << 13));
    }
    return hx_dq_bits_f32(sign | ((e + 112) << 23) | (m << 13));
#endif
}

HX_DQ_FN uint16_t hx_dq_f32_to_f16(float f)
{
#if defined(__CUDA_ARCH__)
    __half_raw r = __half_raw(__float2half_rn(f));
    return r.x;
#else
    uint32_t x = hx_dq_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN stays NaN (quiet) */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x1ffu));
    if (ax >= 0x477ff000u) /* 65520 and above round to infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) { /* normal half: rebias, round the 13 dropped bits */
        uint32_t r = ax - 0x38000000u;
        r = (r + 0xfffu + ((r >> 13) & 1u)) >> 13;
        return (uint16_t)(sign | r);
    }
    uint32_t e = ax >> 23;
    if (e < 102) /* below half the smallest subnormal: zero */
        return (uint16_t)sign;
    uint32_t m = (ax & 0x7fffffu) | 0x800000u, s = 126 - e; /* s in 14..24 */
    uint32_t q = m >> s, rem = m & ((1u << s) - 1u), half = 1u << (s - 1);
    if (rem > half || (rem == half && (q & 1u)))
        q++;
    return (uint16_t)(sign | q);
#endif
}

HX_DQ_FN float hx_dq_bf16_to_f32(uint16_t h) { return hx_dq_bits_f32((uint32_t)h << 16); }

HX_DQ_FN uint16_t hx_dq_f32_to_bf16(float f)
{
    uint32_t x = hx_dq_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

HX_DQ_FN uint16_t hx_dq_load_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

/* Arithmetic spelled out so that nvcc cannot fuse a*b - c into one FMA:
 * the tile must hold what the host computes, bit for bit. */
HX_DQ_FN float hx_dq_mul(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

HX_DQ_FN float hx_dq_sub(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

HX_DQ_FN float hx_dq_add(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

/* ---- types -------------------------------------------------------------- */

HX_DQ_FN int hx_dq_is_quantized(uint32_t type)
{
    switch (type) {
    case HX_TYPE_Q4_0:
    case HX_TYPE_Q4_1:
    case HX_TYPE_Q5_0:
    case HX_TYPE_Q5_1:
    case HX_TYPE_Q8_0:
    case HX_TYPE_Q4_K:
    case HX_TYPE_Q5_K:
    case HX_TYPE_Q6_K: return 1;
    default: return 0;
    }
}

/* The weight types the CUDA kernels read: every type the CPU computes with,
 * so that any matmul or get_rows task can move to the GPU. */
HX_DQ_FN int hx_dq_supported(uint32_t type)
{
    return type == HX_TYPE_F32 || type == HX_TYPE_F16 || type == HX_TYPE_BF16 || hx_dq_is_quantized(type);
}

HX_DQ_FN uint32_t hx_dq_block_elems(uint32_t type)
{
    switch (type) {
    case HX_TYPE_Q4_0:
    case HX_TYPE_Q4_1:
    case HX_TYPE_Q5_0:
    case HX_TYPE_Q5_1:
    case HX_TYPE_Q8_0: return 32;
    case HX_TYPE_Q4_K:
    case HX_TYPE_Q5_K:
    case HX_TYPE_Q6_K: return 256;
    default: return 1;
    }
}

HX_DQ_FN uint32_t hx_dq_block_bytes(uint32_t type)
{
    switch (type) {
    case HX_TYPE_F32: return 4;
    case HX_TYPE_F16:
    case HX_TYPE_BF16: return 2;
    case HX_TYPE_Q4_0: return 18;
    case HX_TYPE_Q4_1: return 20;
    case HX_TYPE_Q5_0: return 22;
    case HX_TYPE_Q5_1: return 24;
    case HX_TYPE_Q8_0: return 34;
    case HX_TYPE_Q4_K: return 144;
    case HX_TYPE_Q5_K: return 176;
    case HX_TYPE_Q6_K: return 210;
    default: return 0;
    }
}

/* Bytes of a row of K elements; 0 when the type is unsupported, K is 0 or
 * not a whole number of blocks. */
HX_DQ_FN uint64_t hx_dq_row_bytes(uint32_t type, uint64_t K)
{
    uint32_t be = hx_dq_block_elems(type), bb = hx_dq_block_bytes(type);
    if (!bb || K == 0 || K % be)
        return 0;
    return K / be * bb;
}

/* ---- groups of 32 ------------------------------------------------------- */

/* Unpacks the 6-bit scale and min of Q4_K sub-block j (0..7): the first four
 * sit in the low 6 bits of scales[j] and scales[j+4]; the last four take
 * their low 4 bits from scales[j+4] and their top 2 from the spare high bits
 * of scales[j-4] (scale) and scales[j] (min). */
HX_DQ_FN void hx_dq_q4k_scale_min(const uint8_t *scales, uint32_t j, uint32_t *sc, uint32_t *m)
{
    if (j < 4) {
        *sc = scales[j] & 63u;
        *m = scales[j + 4] & 63u;
    } else {
        *sc = (scales[j + 4] & 0x0fu) | ((uint32_t)(scales[j - 4] >> 6) << 4);
        *m = (uint32_t)(scales[j + 4] >> 4) | ((uint32_t)(scales[j] >> 6) << 4);
    }
}

HX_DQ_FN uint32_t hx_dq_load_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Q4_1 / Q5_0 / Q5_1 blocks of 32: x = d*q + m (Q4_1, Q5_1) or d*(q - 16)
 * (Q5_0); a fifth bit, bit j of the little-endian word qh, for Q5. */
HX_DQ_FN void hx_dq_group_q4q5(uint32_t type, const uint8_t *b, float out[HX_DQ_GROUP])
{
    int five = type != HX_TYPE_Q4_1, has_min = type != HX_TYPE_Q5_0;
    float d = hx_dq_f16_to_f32(hx_dq_load_u16(b));
    float m = has_min ? hx_dq_f16_to_f32(hx_dq_load_u16(b + 2)) : 0.0f;
    const uint8_t *p = b + (has_min ? 4 : 2);
    uint32_t qh = five ? hx_dq_load_u32(p) : 0;
    const uint8_t *qs = p + (five ? 4 : 0);
    HX_DQ_UNROLL
    for (int j = 0; j < 32; j++) {
        int q = (j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4) | (int)(((qh >> j) & 1u) << 4);
        out[j] = has_min ? hx_dq_add(hx_dq_mul((float)q, d), m) : (float)(q - 16) * d;
    }
}

/* Sub-block j (0..7) of a Q5_K super-block: Q4_K's nibbles and scales plus
 * a fifth bit, bit j of qh[l] for element 32j + l. */
HX_DQ_FN void hx_dq_group_q5k(const uint8_t *b, uint32_t j, float out[HX_DQ_GROUP])
{
    uint32_t sc, m;
    hx_dq_q4k_scale_min(b + 4, j, &sc, &m);
    float d = hx_dq_mul(hx_dq_f16_to_f32(hx_dq_load_u16(b)), (float)sc);
    float mn = hx_dq_mul(hx_dq_f16_to_f32(hx_dq_load_u16(b + 2)), (float)m);
    const uint8_t *qh = b + 16, *q = b + 48 + 32 * (j / 2);
    uint32_t shift = (j & 1) ? 4 : 0;
    HX_DQ_UNROLL
    for (int l = 0; l < 32; l++) {
        uint32_t v = ((q[l] >> shift) & 0x0fu) | (((uint32_t)(qh[l] >> j) & 1u) << 4);
        out[l] = hx_dq_sub(hx_dq_mul(d, (float)v), mn);
    }
}

/* Elements 32g' .. 32g'+31 (g' = 0..7) of a Q6_K super-block: half h = g'/4
 * and quarter k = g'%4; element 128h + 32k + l has its low 4 bits in
 * ql[64h + 32(k&1) + l] (low nibble for k < 2, high for k >= 2), its top 2
 * bits in bits 2k..2k+1 of qh[32h + l], and the int8 scale scales[e/16];
 * x = d * scale * (q - 32). */
HX_DQ_FN void hx_dq_group_q6k(const uint8_t *b, uint32_t gi, float out[HX_DQ_GROUP])
{
    uint32_t h = gi / 4, k = gi % 4;
    float d = hx_dq_f16_to_f32(hx_dq_load_u16(b + 208));
    const uint8_t *ql = b + 64 * h + 32 * (k & 1), *qh = b + 128 + 32 * h;
    const int8_t *sc = (const int8_t *)(b + 192) + 8 * h + 2 * k;
    float d0 = hx_dq_mul(d, (float)sc[0]), d1 = hx_dq_mul(d, (float)sc[1]);
    uint32_t lshift = k < 2 ? 0 : 4;
    HX_DQ_UNROLL
    for (int l = 0; l < 32; l++) {
        int q = (int)(((uint32_t)ql[l] >> lshift) & 0x0fu) | (int)((((uint32_t)qh[l] >> (2 * k)) & 3u) << 4);
        out[l] = hx_dq_mul(l < 16 ? d0 : d1, (float)(q - 32));
    }
}

/* Decodes group g (elements 32g .. 32g+31) of a row of quantized blocks. */
HX_DQ_FN void hx_dq_group(uint32_t type, const uint8_t *row, uint32_t g, float out[HX_DQ_GROUP])
{
    if (type == HX_TYPE_Q8_0) {
        const uint8_t *b = row + (uint64_t)g * 34;
        float d = hx_dq_f16_to_f32(hx_dq_load_u16(b));
        HX_DQ_UNROLL
        for (int i = 0; i < 32; i++)
            out[i] = d * (float)(int8_t)b[2 + i];
    } else if (type == HX_TYPE_Q4_0) {
        const uint8_t *b = row + (uint64_t)g * 18;
        float d = hx_dq_f16_to_f32(hx_dq_load_u16(b));
        HX_DQ_UNROLL
        for (int i = 0; i < 16; i++) {
            out[i] = d * (float)((int)(b[2 + i] & 0x0f) - 8);
            out[i + 16] = d * (float)((int)(b[2 + i] >> 4) - 8);
        }
    } else if (type == HX_TYPE_Q4_K) {
        const uint8_t *b = row + (uint64_t)(g / 8) * 144;
        uint32_t j = g % 8, sc, m;
        hx_dq_q4k_scale_min(b + 4, j, &sc, &m);
        float d = hx_dq_mul(hx_dq_f16_to_f32(hx_dq_load_u16(b)), (float)sc);
        float mn = hx_dq_mul(hx_dq_f16_to_f32(hx_dq_load_u16(b + 2)), (float)m);
        const uint8_t *q = b + 16 + 32 * (j / 2);
        uint32_t shift = (j & 1) ? 4 : 0;
        HX_DQ_UNROLL
        for (int i = 0; i < 32; i++)
            out[i] = hx_dq_sub(hx_dq_mul(d, (float)((q[i] >> shift) & 0x0fu)), mn);
    } else if (type == HX_TYPE_Q4_1 || type == HX_TYPE_Q5_0 || type == HX_TYPE_Q5_1) {
        hx_dq_group_q4q5(type, row + (uint64_t)g * hx_dq_block_bytes(type), out);
    } else if (type == HX_TYPE_Q5_K) {
        hx_dq_group_q5k(row + (uint64_t)(g / 8) * 176, g % 8, out);
    } else if (type == HX_TYPE_Q6_K) {
        hx_dq_group_q6k(row + (uint64_t)(g / 8) * 210, g % 8, out);
    } else {
        /* Plain types: 32 consecutive elements. */
        HX_DQ_UNROLL
        for (int i = 0; i < 32; i++) {
            uint64_t k = (uint64_t)g * 32 + (uint64_t)i;
            if (type == HX_TYPE_F32)
                out[i] = hx_dq_bits_f32((uint32_t)row[4 * k] | (uint32_t)row[4 * k + 1] << 8 |
                                        (uint32_t)row[4 * k + 2] << 16 | (uint32_t)row[4 * k + 3] << 24);
            else if (type == HX_TYPE_F16)
                out[i] = hx_dq_f16_to_f32(hx_dq_load_u16(row + 2 * k));
            else
                out[i] = hx_dq_bf16_to_f32(hx_dq_load_u16(row + 2 * k));
        }
    }
}

/* One element of a row of F32, F16 or BF16. */
HX_DQ_FN float hx_dq_plain_elem(uint32_t type, const uint8_t *row, uint64_t k)
{
    if (type == HX_TYPE_F32)
        return hx_dq_bits_f32(hx_dq_load_u32(row + 4 * k));
    if (type == HX_TYPE_F16)
        return hx_dq_f16_to_f32(hx_dq_load_u16(row + 2 * k));
    return hx_dq_bf16_to_f32(hx_dq_load_u16(row + 2 * k));
}

/* One element of a row of any supported type. */
HX_DQ_FN float hx_dq_elem(uint32_t type, const uint8_t *row, uint64_t k)
{
    if (!hx_dq_is_quantized(type))
        return hx_dq_plain_elem(type, row, k);
    float g[HX_DQ_GROUP];
    hx_dq_group(type, row, (uint32_t)(k / 32), g);
    return g[k % 32];
}

/* ---- tiles -------------------------------------------------------------- */

/* Where element 0 of group g of tile row r goes. */
HX_DQ_FN uint64_t hx_dq_tile_offset(uint32_t r, uint32_t g, uint32_t K)
{
    return (uint64_t)r * K + (uint64_t)g * HX_DQ_GROUP;
}

/* Writes group g of weight row n0 + r into the tile. */
HX_DQ_FN void hx_dq_tile_group(uint32_t type, const uint8_t *W, uint64_t row_bytes, uint32_t K, uint32_t n0,
                               uint32_t r, uint32_t g, uint16_t *tile)
{
    float v[HX_DQ_GROUP];
    hx_dq_group(type, W + (uint64_t)(n0 + r) * row_bytes, g, v);
    uint16_t *dst = tile + hx_dq_tile_offset(r, g, K);
    HX_DQ_UNROLL
    for (int i = 0; i < HX_DQ_GROUP; i++)
        dst[i] = hx_dq_f32_to_f16(v[i]);
}

/* Rows per tile so that a tile of K-element F16 rows fits in max_bytes:
 * a multiple of 128 (cuBLAS's favourite blocking) when N allows, never 0. */
HX_DQ_FN uint32_t hx_dq_tile_rows(uint32_t N, uint32_t K, uint64_t max_bytes)
{
    uint64_t rows = K ? max_bytes / ((uint64_t)K * 2) : N;
    if (rows >= N)
        return N;
    if (rows >= 128)
        rows -= rows % 128;
    return rows ? (uint32_t)rows : 1;
}

#if !defined(__CUDACC__)
/* The host's version of the tile kernel: every group of every tile row. */
static inline void hx_dq_tile_fill(uint32_t type, const uint8_t *W, uint32_t K, uint32_t n0, uint32_t rows,
                                   uint16_t *tile)
{
    uint64_t rb = hx_dq_row_bytes(type, K);
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t g = 0; g < K / HX_DQ_GROUP; g++)
            hx_dq_tile_group(type, W, rb, K, n0, r, g, tile);
}
#endif

#endif
