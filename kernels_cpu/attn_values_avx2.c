/* kernels_cpu/attn_values.h at AVX2: blocks of COLS columns, each holding
 * a slice of VECS x 8 elements in registers over all the rows (COLS x
 * VECS accumulators, independent chains of FMAs: six columns by two
 * vectors fill 15 of the 16 registers, a third faster than four by two);
 * each row's slice is loaded, converted or dequantized once for the
 * block.  A last part of fewer than 8 elements (F32 and F16 rows alone)
 * goes element by element, with the same fused multiply-add.
 * The column and vector loops carry unroll pragmas: without them GCC at
 * -O2 kept the accumulators on the stack, a load and a store around
 * every FMA, at half the rate. */
#include <math.h>
#include <string.h>
#include <immintrin.h>

#include "kernels_cpu/attn_values_impl.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define INLINE static inline __attribute__((always_inline))

#define COLS 6
#define VECS 2 /* half a quantized block: row16_quant */

/* A binary16 at any address: cache rows need not be aligned to 2. */
static inline hx_half half_at(const uint8_t *p)
{
    hx_half h;
    memcpy(&h, p, sizeof h);
    return h;
}

/* Elements [at, at + 8) of an F32 or F16 row as F32.  Quantized rows
 * (whole blocks) go through row16_quant. */
INLINE __m256 row8(const uint8_t *x, int64_t at, const hx_type t)
{
    if (t == HX_TYPE_F32)
        return _mm256_loadu_ps((const float *)(const void *)x + at);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)((const hx_half *)(const void *)x + at)));
}

/* Elements [at, at + 16) of a quantized row (at a multiple of 16: half
 * a block) as F32 in v[0], v[1], the block's scale converted once.  A
 * quantized row's length is a multiple of 32, so cols_block's main loop,
 * VECS (2) vectors of 8 at a time, takes all of it. */
INLINE void row16_quant(const uint8_t *x, int64_t at, __m256 v[2], const hx_type t)
{
    const int64_t o = at % HX_QK;
    __m128i q;
    __m256 d;
    if (t == HX_TYPE_Q8_0) {
        const uint8_t *b = x + (size_t)(at / HX_QK) * sizeof(hx_block_q8_0);
        d = _mm256_set1_ps(_cvtsh_ss(half_at(b)));
        q = _mm_loadu_si128((const __m128i *)(const void *)(b + offsetof(hx_block_q8_0, qs) + o));
    } else {
        const uint8_t *b = x + (size_t)(at / HX_QK) * sizeof(hx_block_q4_0);
        d = _mm256_set1_ps(_cvtsh_ss(half_at(b)));
        q = _mm_loadu_si128((const __m128i *)(const void *)(b + offsetof(hx_block_q4_0, qs)));
        if (o)
            q = _mm_srli_epi16(q, 4);
        q = _mm_sub_epi8(_mm_and_si128(q, _mm_set1_epi8(0xf)), _mm_set1_epi8(8));
    }
    v[0] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d);
    v[1] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8))), d);
}

static inline float elem(const uint8_t *x, int64_t at, hx_type t)
{
    if (t == HX_TYPE_F16)
        return _cvtsh_ss(half_at(x + (size_t)at * sizeof(hx_half)));
    float f;
    memcpy(&f, x + (size_t)at * sizeof f, sizeof f);
    return f;
}

/* C (<= COLS) columns. */
INLINE void cols_block(float *acc, size_t as, const float *w, size_t ws, const int C, const uint8_t *x, size_t xs,
                       const hx_type t, int64_t rows, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 * VECS <= n; i += 8 * VECS) {
        __m256 a[COLS][VECS];
#pragma GCC unroll 8
        for (int c = 0; c < C; c++)
#pragma GCC unroll 2
            for (int k = 0; k < VECS; k++)
                a[c][k] = _mm256_loadu_ps(acc + (size_t)c * as + i + 8 * k);
        for (int64_t r = 0; r < rows; r++) {
            const uint8_t *row = x + (size_t)r * xs;
            __m256 v[VECS];
            if (t == HX_TYPE_Q8_0 || t == HX_TYPE_Q4_0)
                row16_quant(row, i, v, t);
            else
#pragma GCC unroll 2
                for (int k = 0; k < VECS; k++)
                    v[k] = row8(row, i + 8 * k, t);
#pragma GCC unroll 8
            for (int c = 0; c < C; c++) {
                const __m256 wv = _mm256_set1_ps(w[(size_t)c * ws + (size_t)r]);
#pragma GCC unroll 2
                for (int k = 0; k < VECS; k++)
                    a[c][k] = _mm256_fmadd_ps(wv, v[k], a[c][k]);
            }
        }
#pragma GCC unroll 8
        for (int c = 0; c < C; c++)
#pragma GCC unroll 2
            for (int k = 0; k < VECS; k++)
                _mm256_storeu_ps(acc + (size_t)c * as + i + 8 * k, a[c][k]);
    }
    for (; i + 8 <= n; i += 8) {
        __m256 a[COLS];
#pragma GCC unroll 8
        for (int c = 0; c < C; c++)
            a[c] = _mm256_loadu_ps(acc + (size_t)c * as + i);
        for (int64_t r = 0; r < rows; r++) {
            const __m256 v = row8(x + (size_t)r * xs, i, t);
#pragma GCC unroll 8
            for (int c = 0; c < C; c++)
                a[c] = _mm256_fmadd_ps(_mm256_set1_ps(w[(size_t)c * ws + (size_t)r]), v, a[c]);
        }
#pragma GCC unroll 8
        for (int c = 0; c < C; c++)
            _mm256_storeu_ps(acc + (size_t)c * as + i, a[c]);
    }
    for (; i < n; i++)
        for (int c = 0; c < C; c++) {
            float s = acc[(size_t)c * as + i];
            for (int64_t r = 0; r < rows; r++) {
                s = fmaf(w[(size_t)c * ws + (size_t)r], elem(x + (size_t)r * xs, i, t), s);
            }
            acc[(size_t)c * as + i] = s;
        }
}

INLINE void by_cols(float *acc, size_t as, const float *w, size_t ws, int64_t cols, const uint8_t *x, size_t xs,
                    const hx_type t, int64_t rows, int64_t n)
{
    int64_t c = 0;
    for (; c + COLS <= cols; c += COLS)
        cols_block(acc + (size_t)c * as, as, w + (size_t)c * ws, ws, COLS, x, xs, t, rows, n);
    switch (cols - c) {
    case 5:
        cols_block(acc + (size_t)c * as, as, w + (size_t)c * ws, ws, 5, x, xs, t, rows, n);
        break;
    case 4:
        cols_block(acc + (size_t)c * as, as, w + (size_t)c * ws, ws, 4, x, xs, t, rows, n);
        break;
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

void hx_attn_values_avx2(float *acc, size_t acc_stride, const float *w, size_t w_stride, int64_t cols,
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
