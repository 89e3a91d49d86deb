/* The repacked layouts' 512-bit kernels (repack.h's pair kernels): two
 * adjacent groups, sixteen rows, one zmm lane per row.  Where the ymm
 * kernels (repack_x86.h) broadcast an activation word to eight rows, here
 * one broadcast and one vpdpbusd serve sixteen; a lane's arithmetic is
 * the ymm kernel's step for step (the same integer sums, the same float
 * conversion, multiplication and FMA in the same order), so the outputs
 * are the plain loop's bits at every width.
 *
 * Q8_0's signed weights w times activations a go through u8 x s8 as
 * |w| x (a negated where w < 0): AVX-512 has no vpsignb, a masked
 * subtraction does it.  Q4_0's go unsigned, as in the ymm kernel. */
#include <immintrin.h>

#include "kernels_cpu/quant_impl.h"
#include "kernels_cpu/repack.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define SCALES (HX_REPACK_ROWS * sizeof(hx_half))

/* 32 bytes of the first group at p in lanes 0..7, the second's (gb bytes
 * on) in lanes 8..15. */
static inline __m512i load_pair(const uint8_t *p, size_t gb)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)p)),
                              _mm256_loadu_si256((const __m256i *)(p + gb)), 1);
}

/* The two groups' eight f16 at p, as sixteen floats. */
static inline __m512 halves_pair(const uint8_t *p, size_t gb)
{
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)p)),
                                                   _mm_loadu_si128((const __m128i *)(p + gb)), 1));
}

static inline __m512i bcast4(const uint8_t *p) { return _mm512_set1_epi32((int)hx_ld32(p)); }

static inline void prefetch_pair(const uint8_t *w, size_t blk, size_t gb)
{
    for (size_t off = 0; off < blk; off += 64) {
        _mm_prefetch((const char *)w + HX_QUANT_PREFETCH + off, _MM_HINT_T0);
        _mm_prefetch((const char *)w + gb + HX_QUANT_PREFETCH + off, _MM_HINT_T0);
    }
}

/* Q8_0: a block's lane sums; chunk k holds elements 4k..4k+3 of each row. */
static inline __attribute__((always_inline)) void signed_sums(__m512i *isum, const uint8_t *w, size_t gb,
                                                              const uint8_t *y, size_t by, const int C)
{
    const __m512i zero = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
        const __m512i q = load_pair(w + SCALES + 32 * k, gb);
        const __m512i u = _mm512_abs_epi8(q);
        const __mmask64 neg = _mm512_movepi8_mask(q);
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            const __m512i a = bcast4(y + c * by + offsetof(hx_block_q8_0, qs) + 4 * k);
            isum[c] = _mm512_dpbusd_epi32(isum[c], u, _mm512_mask_sub_epi8(a, neg, zero, a));
        }
    }
}

/* The sum of an activation block's 32 quants: sad_epu8 adds bytes only
 * unsigned, so they are biased by 128 (xor 0x80) and 32 x 128 is taken
 * off after. */
static inline int act_sum(const uint8_t *qs)
{
    const __m256i a = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)qs), _mm256_set1_epi8((char)0x80));
    const __m256i s = _mm256_sad_epu8(a, _mm256_setzero_si256()); /* four u64 partial sums */
    const __m128i t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    return (int)(_mm_cvtsi128_si64(t) + _mm_extract_epi64(t, 1)) - 32 * 128;
}

/* Q4_0 as repack_x86.h's q4_0x8_sums takes it: xor 0x88 gives back the
 * unsigned q (0..15) of chunk k's low nibbles (elements 4k..4k+3 of each
 * row) and high ones (16 + 4k..), which meets the activations as they
 * are; 8 x the block's activation sum taken off leaves the sum of
 * (q - 8) x a, the signed kernel's integer: one vpdpbusd a vector and
 * column, where the signed quants need a masked subtraction too. */
static inline __attribute__((always_inline)) void q4_0_sums(__m512i *isum, const uint8_t *w, size_t gb,
                                                           const uint8_t *y, size_t by, const int C)
{
    const __m512i low = _mm512_set1_epi8(0x0f), flip = _mm512_set1_epi8((char)0x88);
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        const __m512i v = _mm512_xor_si512(load_pair(w + SCALES + 32 * k, gb), flip);
        const __m512i lo = _mm512_and_si512(v, low), up = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            const uint8_t *a = y + c * by + offsetof(hx_block_q8_0, qs) + 4 * k;
            isum[c] = _mm512_dpbusd_epi32(isum[c], lo, bcast4(a));
            isum[c] = _mm512_dpbusd_epi32(isum[c], up, bcast4(a + 16));
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < C; c++)
        isum[c] = _mm512_sub_epi32(isum[c], _mm512_set1_epi32(8 * act_sum(y + c * by + offsetof(hx_block_q8_0, qs))));
}

/* Q4_0 and Q8_0 over two groups: repack_x86.h's x8_tile, sixteen lanes. */
static inline __attribute__((always_inline)) void x16_tile(int64_t K, float *s, size_t ss, const uint8_t *w,
                                                           const uint8_t *y, size_t by, const int C, const int Q4)
{
    const size_t blk = SCALES + HX_REPACK_ROWS * (Q4 ? HX_QK / 2 : HX_QK), gb = (size_t)(K / HX_QK) * blk;
    __m512 acc[HX_GEMM_COLS];
#pragma GCC unroll 4
    for (int c = 0; c < C; c++)
        acc[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < K / HX_QK; i++, w += blk, y += sizeof(hx_block_q8_0)) {
        prefetch_pair(w, blk, gb);
        __m512i isum[HX_GEMM_COLS];
#pragma GCC unroll 4
        for (int c = 0; c < C; c++)
            isum[c] = _mm512_setzero_si512();
        if (Q4)
            q4_0_sums(isum, w, gb, y, by, C);
        else
            signed_sums(isum, w, gb, y, by, C);
        const __m512 dw = halves_pair(w, gb);
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(_cvtsh_ss(hx_ld16(y + c * by))));
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[c]), d, acc[c]);
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < C; c++)
        _mm512_storeu_ps(s + c * ss, acc[c]);
}

/* Q4_K over two groups: repack_x86.h's k4x8_tile, sixteen lanes. */
static inline __attribute__((always_inline)) void q4_Kx16_tile(int64_t K, float *s, size_t ss, const uint8_t *w,
                                                               const uint8_t *y, size_t by, const int C)
{
    const size_t A = sizeof(hx_block_q8_K), SC = 2 * SCALES, MN = SC + 8 * HX_REPACK_ROWS,
                 Q = MN + 8 * HX_REPACK_ROWS, blk = Q + HX_REPACK_ROWS * HX_QK_K / 2, gb = (size_t)(K / HX_QK_K) * blk;
    const __m512i low = _mm512_set1_epi8(0x0f);
    __m512 acc[HX_GEMM_COLS];
#pragma GCC unroll 4
    for (int c = 0; c < C; c++)
        acc[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < K / HX_QK_K; i++, w += blk, y += A) {
        prefetch_pair(w, blk, gb);
        __m512i S[HX_GEMM_COLS], M[HX_GEMM_COLS];
#pragma GCC unroll 4
        for (int c = 0; c < C; c++)
            S[c] = M[c] = _mm512_setzero_si512();
        for (int p = 0; p < 4; p++) {
            __m512i lo_sum[HX_GEMM_COLS], hi_sum[HX_GEMM_COLS];
#pragma GCC unroll 4
            for (int c = 0; c < C; c++)
                lo_sum[c] = hi_sum[c] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) {
                const __m512i v = load_pair(w + Q + 256 * p + 32 * k, gb);
                const __m512i lo = _mm512_and_si512(v, low), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
#pragma GCC unroll 4
                for (int c = 0; c < C; c++) {
                    const uint8_t *a = y + c * by + offsetof(hx_block_q8_K, qs) + 64 * p + 4 * k;
                    lo_sum[c] = _mm512_dpbusd_epi32(lo_sum[c], lo, bcast4(a));
                    hi_sum[c] = _mm512_dpbusd_epi32(hi_sum[c], hi, bcast4(a + 32));
                }
            }
            const uint8_t *sc = w + SC + 16 * p, *mn = w + MN + 16 * p;
            const __m512i sc_lo = _mm512_cvtepu8_epi32(
                _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)sc), _mm_loadl_epi64((const __m128i *)(sc + gb))));
            const __m512i sc_hi = _mm512_cvtepu8_epi32(_mm_unpacklo_epi64(
                _mm_loadl_epi64((const __m128i *)(sc + 8)), _mm_loadl_epi64((const __m128i *)(sc + gb + 8))));
            const __m512i mins = _mm512_cvtepu8_epi16(
                _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)mn)),
                                        _mm_loadu_si128((const __m128i *)(mn + gb)), 1));
#pragma GCC unroll 4
            for (int c = 0; c < C; c++) {
                const uint8_t *bs = y + c * by + offsetof(hx_block_q8_K, bsums) + 8 * p; /* bsums 4p .. 4p+3 */
                const uint32_t pair = (uint16_t)((int16_t)hx_ld16(bs) + (int16_t)hx_ld16(bs + 2)) |
                                      (uint32_t)(uint16_t)((int16_t)hx_ld16(bs + 4) + (int16_t)hx_ld16(bs + 6)) << 16;
                S[c] = _mm512_add_epi32(S[c], _mm512_add_epi32(_mm512_mullo_epi32(lo_sum[c], sc_lo),
                                                               _mm512_mullo_epi32(hi_sum[c], sc_hi)));
                M[c] = _mm512_add_epi32(M[c], _mm512_madd_epi16(mins, _mm512_set1_epi32((int)pair)));
            }
        }
        const __m512 dw = halves_pair(w, gb), dm = halves_pair(w + SCALES, gb);
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            const __m512 dy = _mm512_set1_ps(hx_ldf(y + c * by));
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[c]), _mm512_mul_ps(dw, dy), acc[c]);
            acc[c] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(M[c]), _mm512_mul_ps(dm, dy), acc[c]);
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < C; c++)
        _mm512_storeu_ps(s + c * ss, acc[c]);
}

static inline __attribute__((always_inline)) void q4_0x16_tile(int64_t K, float *s, size_t ss, const uint8_t *w,
                                                               const uint8_t *y, size_t by, const int C)
{
    x16_tile(K, s, ss, w, y, by, C, 1);
}

static inline __attribute__((always_inline)) void q8_0x16_tile(int64_t K, float *s, size_t ss, const uint8_t *w,
                                                               const uint8_t *y, size_t by, const int C)
{
    x16_tile(K, s, ss, w, y, by, C, 0);
}

#define PAIR_BY_COLS(name, tile)                                                                       \
    static void name(int64_t K, int C, float *s, size_t ss, const void *group, const void *y, size_t by) \
    {                                                                                                  \
        switch (C) {                                                                                   \
        case 4: tile(K, s, ss, group, y, by, 4); break;                                                \
        case 3: tile(K, s, ss, group, y, by, 3); break;                                                \
        case 2: tile(K, s, ss, group, y, by, 2); break;                                                \
        default: tile(K, s, ss, group, y, by, 1); break;                                               \
        }                                                                                              \
    }

PAIR_BY_COLS(gemm_q4_0x16, q4_0x16_tile)
PAIR_BY_COLS(gemm_q8_0x16, q8_0x16_tile)
PAIR_BY_COLS(gemm_q4_Kx16, q4_Kx16_tile)

const hx_repack_gemm_fn hx_repack_avx512_pair_kernels[HX_TYPE_COUNT] = {
    [HX_TYPE_Q4_0] = gemm_q4_0x16,
    [HX_TYPE_Q8_0] = gemm_q8_0x16,
    [HX_TYPE_Q4_K] = gemm_q4_Kx16,
};
