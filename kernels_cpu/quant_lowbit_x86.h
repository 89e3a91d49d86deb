/* Dot products and GEMM tiles of Q2_K, Q3_K, IQ4_NL and IQ4_XS for the x86
 * levels: included once by quant_avx2_lowbit.c (AVX2) and once by
 * quant_avx512_lowbit.c (LOWBIT_VNNI: the same kernels with AVX-512 VNNI's
 * vpdpwssd adding each pair sum times its scale in one instruction), each
 * naming its table LOWBIT_TABLE.  Dequantization is the scalar
 * reference's at every level.
 *
 * Each kernel is one block function: a weight block against C activation
 * blocks (1 or 2), the weights unpacked once for both.  The integer sums
 * are exact per block (maddubs pairs stay far from 16-bit saturation:
 * quants of at most 7, or |IQ4 value| <= 127 against activations in
 * -127..127), scaled in float lanes.  vec_dot runs the block function
 * along a row; the GEMM tile along four rows, in passes of two columns;
 * vec_dot4 is the tile with one column, so a decode step and a prompt give
 * an output the same bits.  Both levels give the same bits: only the
 * integer additions are fused. */
#ifndef LOWBIT_TABLE
#error "define LOWBIT_TABLE (the level's table) before including quant_lowbit_x86.h"
#endif
#include <immintrin.h>

#include "kernels_cpu/quant_fit.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define AQ offsetof(hx_block_q8_K, qs)
#define AS offsetof(hx_block_q8_K, bsums)

static inline float h2f(const uint8_t *p) { return _cvtsh_ss(hx_ld16(p)); }

static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Sixteen sub-block scales (bytes) as 16-bit words, even sub-blocks in the
 * low 128-bit lane and odd ones in the high: pair_scale(v, p) then puts
 * sub-block 2p's scale under a 32-quant run's first 16 products and 2p+1's
 * under its last 16. */
static inline __m256i scale_pairs(__m128i sc, int is_signed)
{
    const __m128i split = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    const __m128i s = _mm_shuffle_epi8(sc, split);
    return is_signed ? _mm256_cvtepi8_epi16(s) : _mm256_cvtepu8_epi16(s);
}

static inline __m256i pair_scale(__m256i pairs, int p)
{
    return _mm256_shuffle_epi8(pairs, _mm256_set1_epi16((short)((2 * p) | ((2 * p + 1) << 8))));
}

/* acc + the 16-bit pair sums p times the scales sc, summed in pairs. */
static inline __m256i acc_scaled(__m256i acc, __m256i p, __m256i sc)
{
#ifdef LOWBIT_VNNI
    return _mm256_dpwssd_epi32(acc, p, sc);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, sc));
#endif
}

/* Bits 2k..2k+1 of every byte of b. */
static inline __m256i crumbs(__m256i b, int k)
{
    return _mm256_and_si256(_mm256_srl_epi16(b, _mm_cvtsi32_si128(2 * k)), _mm256_set1_epi8(3));
}

/* 32 IQ4 values of 16 nibble bytes, [low nibbles | high nibbles]. */
static inline __m256i iq4_values32(const uint8_t *p)
{
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)hx_iq4nl_values));
    const __m128i x = _mm_loadu_si128((const __m128i *)p);
    const __m256i idx = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(x, 4), x), _mm256_set1_epi8(0x0f));
    return _mm256_shuffle_epi8(table, idx);
}

/* Signed products of values v and activations a, summed in pairs
 * (|v|, |a| <= 127: no saturation), as 16-bit words. */
static inline __m256i dot_s8s8(__m256i v, __m256i a)
{
    return _mm256_maddubs_epi16(_mm256_abs_epi8(v), _mm256_sign_epi8(a, v));
}

static inline __attribute__((always_inline)) void blk_q2_K(const uint8_t *x, const uint8_t *const *y, __m256 *acc,
                                                           const int C)
{
    const __m128i scb = _mm_loadu_si128((const __m128i *)(x + offsetof(hx_block_q2_K, scales)));
    const __m128i nib = _mm_set1_epi8(0x0f);
    const __m256i pairs = scale_pairs(_mm_and_si128(scb, nib), 0);
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(scb, 4), nib));
    __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    #pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m256i b = _mm256_loadu_si256((const __m256i *)(x + offsetof(hx_block_q2_K, qs) + 32 * h));
        #pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const int p = 4 * h + k;
            const __m256i q = crumbs(b, k), sc = pair_scale(pairs, p);
            #pragma GCC unroll 2
            for (int c = 0; c < C; c++) {
                const __m256i a = _mm256_loadu_si256((const __m256i *)(y[c] + AQ + 32 * p));
                isum[c] = acc_scaled(isum[c], _mm256_maddubs_epi16(q, a), sc);
            }
        }
    }
    const float d = h2f(x + offsetof(hx_block_q2_K, d)), dmin = h2f(x + offsetof(hx_block_q2_K, dmin));
    #pragma GCC unroll 2
    for (int c = 0; c < C; c++) {
        const float dy = hx_ldf(y[c]);
        const __m256i bs = _mm256_loadu_si256((const __m256i *)(y[c] + AS));
        acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[c]), _mm256_set1_ps(dy * d), acc[c]);
        acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(bs, mins)), _mm256_set1_ps(-(dy * dmin)),
                                 acc[c]);
    }
}

/* Q3_K's sixteen 6-bit scales less 32, as bytes: the low nibbles of words
 * 0 and 1 of the 12 bytes are sub-blocks 0..7, their high nibbles 8..15,
 * and crumb pairs of word 2 the top bits of each group of four. */
static inline __m128i q3_K_scales(const uint8_t *p)
{
    const uint32_t a0 = hx_ld32(p), a1 = hx_ld32(p + 4), t = hx_ld32(p + 8);
    const uint32_t lo = 0x0f0f0f0fu, top = 0x03030303u;
    const __m128i v = _mm_setr_epi32((int)((a0 & lo) | ((t & top) << 4)), (int)((a1 & lo) | (((t >> 2) & top) << 4)),
                                     (int)(((a0 >> 4) & lo) | (((t >> 4) & top) << 4)),
                                     (int)(((a1 >> 4) & lo) | (((t >> 6) & top) << 4)));
    return _mm_sub_epi8(v, _mm_set1_epi8(32));
}

/* Q3_K: the quants taken as 0..7 (low bits plus 4 * the high bit); the
 * offset of 4 comes off as 4 * sum_s sc[s] * bsums[s]. */
static inline __attribute__((always_inline)) void blk_q3_K(const uint8_t *x, const uint8_t *const *y, __m256 *acc,
                                                           const int C)
{
    const __m128i scb = q3_K_scales(x + offsetof(hx_block_q3_K, scales));
    const __m256i pairs = scale_pairs(scb, 1), sc16 = _mm256_cvtepi8_epi16(scb);
    const __m256i hm = _mm256_loadu_si256((const __m256i *)(x + offsetof(hx_block_q3_K, hmask)));
    const __m256i one = _mm256_set1_epi8(1);
    __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    #pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m256i b = _mm256_loadu_si256((const __m256i *)(x + offsetof(hx_block_q3_K, qs) + 32 * h));
        #pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const int p = 4 * h + k;
            const __m256i hb = _mm256_and_si256(_mm256_srl_epi16(hm, _mm_cvtsi32_si128(p)), one);
            const __m256i q = _mm256_or_si256(crumbs(b, k), _mm256_slli_epi16(hb, 2));
            const __m256i sc = pair_scale(pairs, p);
            #pragma GCC unroll 2
            for (int c = 0; c < C; c++) {
                const __m256i a = _mm256_loadu_si256((const __m256i *)(y[c] + AQ + 32 * p));
                isum[c] = acc_scaled(isum[c], _mm256_maddubs_epi16(q, a), sc);
            }
        }
    }
    const float d = h2f(x + offsetof(hx_block_q3_K, d));
    #pragma GCC unroll 2
    for (int c = 0; c < C; c++) {
        const __m256i bs = _mm256_loadu_si256((const __m256i *)(y[c] + AS));
        isum[c] = _mm256_sub_epi32(isum[c], _mm256_slli_epi32(_mm256_madd_epi16(bs, sc16), 2));
        acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[c]), _mm256_set1_ps(hx_ldf(y[c]) * d), acc[c]);
    }
}

static inline __attribute__((always_inline)) void blk_iq4_xs(const uint8_t *x, const uint8_t *const *y, __m256 *acc,
                                                             const int C)
{
    const uint32_t sh = hx_ld16(x + offsetof(hx_block_iq4_xs, scales_h));
    const uint8_t *sl = x + offsetof(hx_block_iq4_xs, scales_l);
    __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    #pragma GCC unroll 8
    for (int s = 0; s < 8; s++) {
        const __m256i v = iq4_values32(x + offsetof(hx_block_iq4_xs, qs) + 16 * s);
        const int ls = (((sl[s / 2] >> (4 * (s % 2))) & 0xf) | (int)(((sh >> (2 * s)) & 3) << 4)) - 32;
        const __m256i sc = _mm256_set1_epi16((short)ls);
        #pragma GCC unroll 2
        for (int c = 0; c < C; c++) {
            const __m256i a = _mm256_loadu_si256((const __m256i *)(y[c] + AQ + 32 * s));
            isum[c] = acc_scaled(isum[c], dot_s8s8(v, a), sc);
        }
    }
    const float d = h2f(x);
    #pragma GCC unroll 2
    for (int c = 0; c < C; c++)
        acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[c]), _mm256_set1_ps(hx_ldf(y[c]) * d), acc[c]);
}

static inline __attribute__((always_inline)) void blk_iq4_nl(const uint8_t *x, const uint8_t *const *y, __m256 *acc,
                                                             const int C)
{
    const __m256i v = iq4_values32(x + offsetof(hx_block_iq4_nl, qs)), ones = _mm256_set1_epi16(1);
    const float d = h2f(x);
    #pragma GCC unroll 2
    for (int c = 0; c < C; c++) {
        const __m256i a = _mm256_loadu_si256((const __m256i *)(y[c] + offsetof(hx_block_q8_0, qs)));
        const __m256i p = _mm256_madd_epi16(dot_s8s8(v, a), ones);
        acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d * h2f(y[c])), acc[c]);
    }
}

/* vec_dot, the GEMM tile (four weight rows x C <= 2 activation rows, read
 * as HX_TILE_ROWS says), gemm in passes of two columns and vec_dot4 of a
 * type whose block function is BLK (blocks of EL elements, BX bytes, BA
 * bytes of activations). */
#define LOWBIT_KERNELS(T, BLK, EL, BX, BA)                                                                      \
    static void dot_##T(int64_t n, float *s, const void *vx, const void *vy)                                    \
    {                                                                                                           \
        const uint8_t *x = vx, *y = vy;                                                                         \
        __m256 acc = _mm256_setzero_ps();                                                                       \
        for (int64_t i = 0; i < n / (EL); i++) {                                                                \
            const uint8_t *yb[1] = {y + i * (BA)};                                                              \
            for (size_t k = 0; k < (BX); k += 64)                                                               \
                _mm_prefetch((const char *)(x + i * (BX) + k + HX_QUANT_PREFETCH), _MM_HINT_T0);                \
            BLK(x + i * (BX), yb, &acc, 1);                                                                     \
        }                                                                                                       \
        *s = hsum8(acc);                                                                                        \
    }                                                                                                           \
    static inline __attribute__((always_inline)) void tile_##T(int64_t n, float *s, size_t ss, const uint8_t *x, \
                                                               size_t bx, const uint8_t *y, size_t by, const int C) \
    {                                                                                                           \
        __m256 acc[4][2];                                                                                       \
        for (int r = 0; r < 4; r++)                                                                             \
            acc[r][0] = acc[r][1] = _mm256_setzero_ps();                                                        \
        const int RS = HX_TILE_ROWS(C);                                                                         \
        for (int r0 = 0; r0 < 4; r0 += RS) {                                                                    \
            for (int64_t i = 0; i < n / (EL); i++) {                                                            \
                const uint8_t *yb[2] = {y + i * (BA), y + by + i * (BA)};                                       \
                for (int r = r0; r < r0 + RS; r++) {                                                            \
                    const uint8_t *xb = x + r * bx + i * (BX);                                                  \
                    for (size_t k = 0; k < (BX); k += 64)                                                       \
                        _mm_prefetch(hx_tile_prefetch(xb + k, i * (BX) + k, bx, RS), _MM_HINT_T0);              \
                    BLK(xb, yb, acc[r], C);                                                                     \
                }                                                                                               \
            }                                                                                                   \
        }                                                                                                       \
        for (int c = 0; c < C; c++)                                                                             \
            for (int r = 0; r < 4; r++)                                                                         \
                s[c * ss + r] = hsum8(acc[r][c]);                                                               \
    }                                                                                                           \
    static void gemm_##T(int64_t n, int ncols, float *s, size_t ss, const void *x, size_t bx, const void *y,    \
                         size_t by)                                                                             \
    {                                                                                                           \
        int c = 0;                                                                                              \
        for (; c + 2 <= ncols; c += 2)                                                                          \
            tile_##T(n, s + c * ss, ss, x, bx, (const uint8_t *)y + c * by, by, 2);                             \
        if (c < ncols)                                                                                          \
            tile_##T(n, s + c * ss, ss, x, bx, (const uint8_t *)y + c * by, by, 1);                             \
    }                                                                                                           \
    HX_QUANT_DOT4_OF_GEMM(dot4_##T, gemm_##T)

LOWBIT_KERNELS(q2_K, blk_q2_K, HX_QK_K, sizeof(hx_block_q2_K), sizeof(hx_block_q8_K))
LOWBIT_KERNELS(q3_K, blk_q3_K, HX_QK_K, sizeof(hx_block_q3_K), sizeof(hx_block_q8_K))
LOWBIT_KERNELS(iq4_nl, blk_iq4_nl, HX_QK, sizeof(hx_block_iq4_nl), sizeof(hx_block_q8_0))
LOWBIT_KERNELS(iq4_xs, blk_iq4_xs, HX_QK_K, sizeof(hx_block_iq4_xs), sizeof(hx_block_q8_K))

const hx_quant_kernels LOWBIT_TABLE[HX_QUANT_LOWBIT_TYPES] = {
    {NULL, NULL, dot_q2_K, dot4_q2_K, gemm_q2_K, NULL, NULL},
    {NULL, NULL, dot_q3_K, dot4_q3_K, gemm_q3_K, NULL, NULL},
    {NULL, NULL, dot_iq4_nl, dot4_iq4_nl, gemm_iq4_nl, NULL, NULL},
    {NULL, NULL, dot_iq4_xs, dot4_iq4_xs, gemm_iq4_xs, NULL, NULL},
};
