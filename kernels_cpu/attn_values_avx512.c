/* kernels_cpu/attn_values.h at AVX-512: blocks of COLS columns, each
 * holding a slice of VECS x 16 elements in registers over all the rows
 * (COLS x VECS accumulators, independent chains of adds); each row's
 * slice is loaded, converted or dequantized once for the block.  The
 * last partial vector goes under a mask.
 * The column and vector loops carry unroll pragmas: without them GCC at
 * -O2 kept the accumulators on the stack, a load and a store around
 * every FMA, at half the rate. */
#include <string.h>
#include <immintrin.h>

#include "kernels_cpu/attn_values_impl.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define INLINE static inline __attribute__((always_inline))

/* Measured: 4 columns x 32 elements (8 accumulators) ran a third faster
 * than 4 x 64 on a Sapphire Rapids core, and as fast as 8 x 32 (with
 * FMAs as with a multiply and an add). */
#define COLS 4
#define VECS 2 /* a quantized block's 32 elements: row32_quant */

/* A binary16 at any address: cache rows need not be aligned to 2. */
static inline hx_half half_at(const uint8_t *p)
{
    hx_half h;
    memcpy(&h, p, sizeof h);
    return h;
}

/* Elements [at, at + 16) of an F32 or F16 row as F32, those outside m
 * zero.  Quantized rows (whole blocks) go through row32_quant. */
INLINE __m512 row16(const uint8_t *x, int64_t at, __mmask16 m, const hx_type t)
{
    if (t == HX_TYPE_F32)
        return _mm512_maskz_loadu_ps(m, (const float *)(const void *)x + at);
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const hx_half *)(const void *)x + at));
}

/* Elements [at, at + 32) of a quantized row (at a multiple of 32: one
 * block) as F32 in v[0], v[1], the block's scale converted once.  A
 * quantized row's length is a multiple of 32, so cols_block's main loop,
 * VECS (2) vectors of 16 at a time, takes all of it in blocks. */
INLINE void row32_quant(const uint8_t *x, int64_t at, __m512 v[2], const hx_type t)
{
    if (t == HX_TYPE_Q8_0) {
        const uint8_t *b = x + (size_t)(at / HX_QK) * sizeof(hx_block_q8_0);
        const __m512 d = _mm512_set1_ps(_cvtsh_ss(half_at(b)));
        const __m128i *q = (const __m128i *)(const void *)(b + offsetof(hx_block_q8_0, qs));
        v[0] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(q))), d);
        v[1] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(q + 1))), d);
        return;
    }
    const uint8_t *b = x + (size_t)(at / HX_QK) * sizeof(hx_block_q4_0);
    const __m512 d = _mm512_set1_ps(_cvtsh_ss(half_at(b)));
    const __m128i q = _mm_loadu_si128((const __m128i *)(const void *)(b + offsetof(hx_block_q4_0, qs)));
    const __m128i lo = _mm_sub_epi8(_mm_and_si128(q, _mm_set1_epi8(0xf)), _mm_set1_epi8(8));
    const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 4), _mm_set1_epi8(0xf)), _mm_set1_epi8(8));
    v[0] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo)), d);
    v[1] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi)), d);
}

/* C (<= COLS) columns. */
INLINE void cols_block(float *acc, size_t as, const float *w, size_t ws, const int C, const uint8_t *x, size_t xs,
                       const hx_type t, int64_t rows, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 * VECS <= n; i += 16 * VECS) {
        __m512 a[COLS][VECS];
#pragma GCC unroll 8
        for (int c = 0; c < C; c++)
#pragma GCC unroll 2
            for (int k = 0; k < VECS; k++)
                a[c][k] = _mm512_loadu_ps(acc + (size_t)c * as + i + 16 * k);
        for (int64_t r = 0; r < rows; r++) {
            const uint8_t *row = x + (size_t)r * xs;
            __m512 v[VECS];
            if (t == HX_TYPE_Q8_0 || t == HX_TYPE_Q4_0)
                row32_quant(row, i, v, t);
            else
#pragma GCC unroll 2
                for (int k = 0; k < VECS; k++)
                    v[k] = row16(row, i + 16 * k, 0xffff, t);
#pragma GCC unroll 8
            for (int c = 0; c < C; c++) {
                const __m512 wv = _mm512_set1_ps(w[(size_t)c * ws + (size_t)r]);
#pragma GCC unroll 2
                for (int k = 0; k < VECS; k++)
                    a[c][k] = _mm512_fmadd_ps(wv, v[k], a[c][k]);
            }
        }
#pragma GCC unroll 8
        for (int c = 0; c < C; c++)
#pragma GCC unroll 2
            for (int k = 0; k < VECS; k++)
                _mm512_storeu_ps(acc + (size_t)c * as + i + 16 * k, a[c][k]);
    }
    for (; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 a[COLS];
#pragma GCC unroll 8
        for (int c = 0; c < C; c++)
            a[c] = _mm512_maskz_loadu_ps(m, acc + (size_t)c * as + i);
        for (int64_t r = 0; r < rows; r++) {
            const __m512 v = row16(x + (size_t)r * xs, i, m, t);
#pragma GCC unroll 8
            for (int c = 0; c < C; c++)
                a[c] = _mm512_fmadd_ps(_mm512_set1_ps(w[(size_t)c * ws + (size_t)r]), v, a[c]);
        }
#pragma GCC unroll 8
        for (int c = 0; c < C; c++)
            _mm512_mask_storeu_ps(acc + (size_t)c * as + i, m, a[c]);
    }
}

INLINE void by_cols(float *acc, size_t as, const float *w, size_t ws, int64_t cols, const uint8_t *x, size_t xs,
                    const hx_type t, int64_t rows, int64_t n)
{
    int64_t c = 0;
    for (; c + COLS <= cols; c += COLS)
        cols_block(acc + (size_t)c * as, as, w + (size_t)c * ws, ws, COLS, x, xs, t, rows, n);
    switch (cols - c) {
    case 3:
        cols_block(acc + (size_t)c * as, as, w + (size_t)c * ws, ws, 3, x, xs, t, rows, n);
        break;
    case 2:
        cols_block(acc + (size_t)c * as, as, w + (size_t)c * ws, ws, 2, x, xs, t, rows, n);
        break;
    case 1:
        cols_block(acc + (size_t)c * as, as, w + (size_t)c * ws, ws, 1, x, xs, t, rows, n);
        break;
    default:
        break;
    }
}

void hx_attn_values_avx512(float *acc, size_t acc_stride, const float *w, size_t w_stride, int64_t cols,
                           const void *x, size_t x_stride, hx_type t, int64_t rows, int64_t n)
{
    switch (t) {
    case HX_TYPE_F32:
        by_cols(acc, acc_stride, w, w_stride, cols, x, x_stride, HX_TYPE_F32, rows, n);
        break;
    case HX_TYPE_F16:
        by_cols(acc, acc_stride, w, w_stride, cols, x, x_stride, HX_TYPE_F16, rows, n);
        break;
    case HX_TYPE_Q8_0:
        by_cols(acc, acc_stride, w, w_stride, cols, x, x_stride, HX_TYPE_Q8_0, rows, n);
        break;
    case HX_TYPE_Q4_0:
        by_cols(acc, acc_stride, w, w_stride, cols, x, x_stride, HX_TYPE_Q4_0, rows, n);
        break;
    default:
        break;
    }
}
