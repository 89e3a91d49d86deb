/* The repacked layouts' x86 kernels (repack.h), written once for the
 * AVX2 and AVX-512 files that include this: each defines
 * REPACK_DOT(acc, u, s), acc + the sums of each 32-bit lane's four
 * products u8 x s8 (maddubs then madd at AVX2, VNNI's vpdpbusd at
 * AVX-512), and REPACK_LEVEL, the name of its kernel table; and a
 * partial sum for the small unsigned quants, which needs no madd a step
 * at AVX2: REPACK_PART (its type), REPACK_PART_DOT(part, u, s) (part +
 * the u8 x s8 products, at AVX2 in int16 pairs, so a caller adds no more
 * than the int16 lanes hold) and REPACK_PART_WIDEN(acc, part), acc + the
 * partial's 32-bit lane sums; REPACK_PART_WIDEN_SCALED(acc, part, sc)
 * the same times sc, a signed scale in int16 range in each 32-bit lane;
 * REPACK_Q6_PART_CHUNKS, the Q6_K chunks one partial may hold.
 *
 * A group's eight rows sit in the eight 32-bit lanes of a ymm register,
 * so a block's integer sums come out one lane per row, are converted
 * once, and meet the eight rows' scales in one FMA: no horizontal sums.
 * Q8_0's signed weights w times activations a go through u8 x s8 as
 * |w| x (a with w's sign); the 4- and 5-bit quants go unsigned, an
 * offset taken off after as a multiple of the activations' sum.  Sums are
 * exact (no int16 step can saturate: |w| <= 128, |a| <= 127, two
 * products a step; the partials' bounds are given where they are used),
 * so every level gives the bits of the plain loop (repack_scalar.c). */
#ifndef HX_KERNELS_CPU_REPACK_X86_H
#define HX_KERNELS_CPU_REPACK_X86_H

#include <immintrin.h>

#include "kernels_cpu/quant_impl.h"
#include "kernels_cpu/repack.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define REPACK_SCALES (HX_REPACK_ROWS * sizeof(hx_half))

/* Activation bytes p[0..3] in every lane. */
static inline __m256i bcast4(const uint8_t *p) { return _mm256_set1_epi32((int)hx_ld32(p)); }

/* The block HX_QUANT_PREFETCH bytes ahead, every cache line of it: a
 * group's blocks are one stream, and the matrix's groups follow each
 * other, so this runs on into the next group. */
static inline void prefetch_block(const uint8_t *w, size_t blk)
{
    for (size_t off = 0; off < blk; off += 64)
        _mm_prefetch((const char *)w + HX_QUANT_PREFETCH + off, _MM_HINT_T0);
}

/* acc + w x a per lane, w signed. */
static inline __m256i dot_signed(__m256i acc, __m256i w, __m256i a)
{
    return REPACK_DOT(acc, _mm256_abs_epi8(w), _mm256_sign_epi8(a, w));
}

/* The block's scales times each column's activation scale, into the
 * eight-lane accumulators: one FMA per column per block. */
static inline __attribute__((always_inline)) void scale_block(__m256 *acc, const __m256i *isum, const uint8_t *w,
                                                              const uint8_t *y, size_t by, const int C, int shift)
{
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w));
#pragma GCC unroll 4
    for (int c = 0; c < C; c++) {
        const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(_cvtsh_ss(hx_ld16(y + c * by))));
        acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srai_epi32(isum[c], shift)), d, acc[c]);
    }
}

/* Every lane of the result: the sum of the activation block's 32
 * quants, for the unsigned quants' correction below.  sad_epu8 adds
 * bytes only unsigned, so the quants are biased by 128 (xor 0x80) and
 * 32 x 128 is taken off after. */
static inline __m256i act_sum(const uint8_t *qs)
{
    const __m256i a = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)qs), _mm256_set1_epi8((char)0x80));
    __m256i s = _mm256_sad_epu8(a, _mm256_setzero_si256());     /* four u64 partial sums */
    s = _mm256_add_epi64(s, _mm256_permute4x64_epi64(s, 0x4e)); /* + the other 128-bit half */
    s = _mm256_add_epi64(s, _mm256_shuffle_epi32(s, 0x4e));     /* + the other 64-bit lane */
    return _mm256_sub_epi32(_mm256_shuffle_epi32(s, 0xa0), _mm256_set1_epi32(32 * 128));
}

/* Q4_0: per 32-byte chunk k, low nibbles are elements 4k..4k+3 of each
 * row, high nibbles 16 + 4k..; xor 0x88 gives back the unsigned q
 * (0..15), which meets the activations a as it is; the sum of q x a less
 * 8 x sum(a) is the sum of (q - 8) x a.  All eight products of a block
 * go into one partial (8 x 2 x 15 x 128 < 2^15). */
static inline __attribute__((always_inline)) void q4_0x8_sums(__m256i *isum, const uint8_t *w, const uint8_t *y,
                                                              size_t by, const int C)
{
    const __m256i low = _mm256_set1_epi8(0x0f), flip = _mm256_set1_epi8((char)0x88);
    REPACK_PART part[HX_GEMM_COLS];
#pragma GCC unroll 4
    for (int c = 0; c < C; c++)
        part[c] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        const __m256i v =
            _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(w + REPACK_SCALES + 32 * k)), flip);
        const __m256i lo = _mm256_and_si256(v, low), up = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            const uint8_t *a = y + c * by + offsetof(hx_block_q8_0, qs) + 4 * k;
            part[c] = REPACK_PART_DOT(part[c], lo, bcast4(a));
            part[c] = REPACK_PART_DOT(part[c], up, bcast4(a + 16));
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < C; c++)
        isum[c] = _mm256_sub_epi32(REPACK_PART_WIDEN(isum[c], part[c]),
                                   _mm256_slli_epi32(act_sum(y + c * by + offsetof(hx_block_q8_0, qs)), 3));
}

/* Q8_0: chunk k holds elements 4k..4k+3 of each row. */
static inline __attribute__((always_inline)) void q8_0x8_sums(__m256i *isum, const uint8_t *w, const uint8_t *y,
                                                              size_t by, const int C)
{
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(w + REPACK_SCALES + 32 * k));
#pragma GCC unroll 4
        for (int c = 0; c < C; c++)
            isum[c] = dot_signed(isum[c], v, bcast4(y + c * by + offsetof(hx_block_q8_0, qs) + 4 * k));
    }
}

/* Q4_1: Q4_0's chunks, unsigned, against Q8_1 activations; one partial
 * a block as Q4_0's. */
static inline __attribute__((always_inline)) void q4_1x8_sums(__m256i *isum, const uint8_t *w, const uint8_t *y,
                                                              size_t by, const int C)
{
    const __m256i low = _mm256_set1_epi8(0x0f);
    REPACK_PART part[HX_GEMM_COLS];
#pragma GCC unroll 4
    for (int c = 0; c < C; c++)
        part[c] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(w + 2 * REPACK_SCALES + 32 * k));
        const __m256i lo = _mm256_and_si256(v, low), up = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            const uint8_t *a = y + c * by + offsetof(hx_block_q8_1, qs) + 4 * k;
            part[c] = REPACK_PART_DOT(part[c], lo, bcast4(a));
            part[c] = REPACK_PART_DOT(part[c], up, bcast4(a + 16));
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < C; c++)
        isum[c] = REPACK_PART_WIDEN(isum[c], part[c]);
}

/* Q5_0 (Q5_1 with UNSIGNED): Q4_1's nibbles (after the qh words, at
 * `at`), each with its fifth bit from the row's moved qh word in its lane
 * (repack.h): a shift by k brings chunk k's to bit 4 of each byte.  The
 * unsigned quants (0..31) meet the activations as they are, two chunks
 * (four products) a partial (4 x 2 x 31 x 128 < 2^15); Q5_0's quants are
 * q - 16, so 16 x the activation block's sum is taken off after. */
static inline __attribute__((always_inline)) void q5x8_sums(__m256i *isum, const uint8_t *w, const uint8_t *y,
                                                            size_t by, const int C, const size_t at,
                                                            const int UNSIGNED)
{
    const __m256i low = _mm256_set1_epi8(0x0f), fifth = _mm256_set1_epi8(0x10);
    const __m256i qh = _mm256_loadu_si256((const __m256i *)(w + at));
    const size_t A = UNSIGNED ? offsetof(hx_block_q8_1, qs) : offsetof(hx_block_q8_0, qs);
#pragma GCC unroll 2
    for (int half = 0; half < 2; half++) {
        REPACK_PART part[HX_GEMM_COLS];
#pragma GCC unroll 4
        for (int c = 0; c < C; c++)
            part[c] = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int k = 2 * half; k < 2 * half + 2; k++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(w + at + 32 + 32 * k));
            const __m256i lo =
                _mm256_or_si256(_mm256_and_si256(v, low), _mm256_and_si256(_mm256_slli_epi32(qh, 4 - k), fifth));
            const __m256i up = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), low),
                                               _mm256_and_si256(_mm256_srli_epi32(qh, k), fifth));
#pragma GCC unroll 4
            for (int c = 0; c < C; c++) {
                const uint8_t *a = y + c * by + A + 4 * k;
                part[c] = REPACK_PART_DOT(part[c], lo, bcast4(a));
                part[c] = REPACK_PART_DOT(part[c], up, bcast4(a + 16));
            }
        }
#pragma GCC unroll 4
        for (int c = 0; c < C; c++)
            isum[c] = REPACK_PART_WIDEN(isum[c], part[c]);
    }
    if (!UNSIGNED) {
#pragma GCC unroll 4
        for (int c = 0; c < C; c++)
            isum[c] = _mm256_sub_epi32(isum[c], _mm256_slli_epi32(act_sum(y + c * by + A), 4));
    }
}

static inline __attribute__((always_inline)) void q5_0x8_sums(__m256i *isum, const uint8_t *w, const uint8_t *y,
                                                              size_t by, const int C)
{
    q5x8_sums(isum, w, y, by, C, REPACK_SCALES, 0);
}

static inline __attribute__((always_inline)) void q5_1x8_sums(__m256i *isum, const uint8_t *w, const uint8_t *y,
                                                              size_t by, const int C)
{
    q5x8_sums(isum, w, y, by, C, 2 * REPACK_SCALES, 1);
}

/* The 32-element types: per block, `sums` gives each column's eight lane
 * sums (times 2^shift), which meet the scales; with MINS (Q4_1) the rows'
 * mins then meet the activation block's s.  A: the activation block.
 * G groups at once (1, or 2 for the pair kernels: the next group, one
 * group's bytes on, into s[c*ss + 8..15]), each summed as alone: two
 * streams of weights in flight, and two independent chains of sums. */
static inline __attribute__((always_inline)) void x8_tile(int64_t K, float *s, size_t ss, const uint8_t *w,
                                                          const uint8_t *y, size_t by, const int C, const int G,
                                                          const size_t blk, const size_t A, const int shift,
                                                          const int MINS,
                                                          void (*sums)(__m256i *, const uint8_t *, const uint8_t *,
                                                                       size_t, int))
{
    const size_t gbytes = (size_t)(K / HX_QK) * blk;
    __m256 acc[2][HX_GEMM_COLS];
#pragma GCC unroll 2
    for (int g = 0; g < G; g++)
#pragma GCC unroll 4
        for (int c = 0; c < C; c++)
            acc[g][c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < K / HX_QK; i++, w += blk, y += A) {
#pragma GCC unroll 2
        for (int g = 0; g < G; g++)
            prefetch_block(w + g * gbytes, blk);
#pragma GCC unroll 2
        for (int g = 0; g < G; g++) {
            const uint8_t *wg = w + g * gbytes;
            __m256i isum[HX_GEMM_COLS];
#pragma GCC unroll 4
            for (int c = 0; c < C; c++)
                isum[c] = _mm256_setzero_si256();
            sums(isum, wg, y, by, C);
            scale_block(acc[g], isum, wg, y, by, C, shift);
            if (MINS) {
                const __m256 m = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(wg + REPACK_SCALES)));
#pragma GCC unroll 4
                for (int c = 0; c < C; c++)
                    acc[g][c] = _mm256_fmadd_ps(
                        m, _mm256_set1_ps(_cvtsh_ss(hx_ld16(y + c * by + offsetof(hx_block_q8_1, s)))), acc[g][c]);
            }
        }
    }
#pragma GCC unroll 2
    for (int g = 0; g < G; g++)
#pragma GCC unroll 4
        for (int c = 0; c < C; c++)
            _mm256_storeu_ps(s + c * ss + g * HX_REPACK_ROWS, acc[g][c]);
}

static inline __attribute__((always_inline)) void q4_0x8_tile(int64_t K, float *s, size_t ss, const uint8_t *w,
                                                              const uint8_t *y, size_t by, const int C, const int G)
{
    x8_tile(K, s, ss, w, y, by, C, G, REPACK_SCALES + HX_REPACK_ROWS * HX_QK / 2, sizeof(hx_block_q8_0), 0, 0,
            q4_0x8_sums);
}

static inline __attribute__((always_inline)) void q4_1x8_tile(int64_t K, float *s, size_t ss, const uint8_t *w,
                                                              const uint8_t *y, size_t by, const int C, const int G)
{
    x8_tile(K, s, ss, w, y, by, C, G, 2 * REPACK_SCALES + HX_REPACK_ROWS * HX_QK / 2, sizeof(hx_block_q8_1), 0, 1,
            q4_1x8_sums);
}

static inline __attribute__((always_inline)) void q5_0x8_tile(int64_t K, float *s, size_t ss, const uint8_t *w,
                                                              const uint8_t *y, size_t by, const int C, const int G)
{
    x8_tile(K, s, ss, w, y, by, C, G, REPACK_SCALES + HX_REPACK_ROWS * (4 + HX_QK / 2), sizeof(hx_block_q8_0), 0, 0,
            q5_0x8_sums);
}

static inline __attribute__((always_inline)) void q5_1x8_tile(int64_t K, float *s, size_t ss, const uint8_t *w,
                                                              const uint8_t *y, size_t by, const int C, const int G)
{
    x8_tile(K, s, ss, w, y, by, C, G, 2 * REPACK_SCALES + HX_REPACK_ROWS * (4 + HX_QK / 2), sizeof(hx_block_q8_1), 0,
            1, q5_1x8_sums);
}

static inline __attribute__((always_inline)) void q8_0x8_tile(int64_t K, float *s, size_t ss, const uint8_t *w,
                                                              const uint8_t *y, size_t by, const int C, const int G)
{
    x8_tile(K, s, ss, w, y, by, C, G, REPACK_SCALES + HX_REPACK_ROWS * HX_QK, sizeof(hx_block_q8_0), 0, 0,
            q8_0x8_sums);
}

/* Q4_K and Q5_K (Q5 set): per pair of sub-blocks p, chunk k's low
 * nibbles are elements 64p + 4k.. of each row, its high ones
 * 64p + 32 + 4k..; Q5_K's fifth bits come from qh chunk k, bits 2p and
 * 2p + 1.  Unsigned, so they meet the activations as they are.  Each
 * sub-block's lane sums are multiplied by the rows' scales in integers;
 * the mins meet the pairs of sub-block activation sums (from the Q8_K
 * bsums) in one madd a pair. */
static inline __attribute__((always_inline)) void k4x8_tile(int64_t K, float *s, size_t ss, const uint8_t *w,
                                                            const uint8_t *y, size_t by, const int C, const int Q5)
{
    const size_t A = sizeof(hx_block_q8_K), SC = 2 * REPACK_SCALES, MN = SC + 8 * HX_REPACK_ROWS,
                 QH = MN + 8 * HX_REPACK_ROWS, Q = QH + (Q5 ? HX_REPACK_ROWS * HX_QK_K / 8 : 0),
                 blk = Q + HX_REPACK_ROWS * HX_QK_K / 2;
    const __m256i low = _mm256_set1_epi8(0x0f), fifth = _mm256_set1_epi8(0x10);
    __m256 acc[HX_GEMM_COLS];
#pragma GCC unroll 4
    for (int c = 0; c < C; c++)
        acc[c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < K / HX_QK_K; i++, w += blk, y += A) {
        prefetch_block(w, blk);
        __m256i S[HX_GEMM_COLS], M[HX_GEMM_COLS];
#pragma GCC unroll 4
        for (int c = 0; c < C; c++)
            S[c] = M[c] = _mm256_setzero_si256();
        for (int p = 0; p < 4; p++) {
            /* Partials over chunks, widened to int32 and times the rows'
             * sub-block scales every 8 chunks (Q4: 8 x 2 x 15 x 127 fits
             * an int16 lane) or 4 (Q5: 31). */
            const __m256i sc_lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(w + SC + 16 * p)));
            const __m256i sc_hi = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(w + SC + 16 * p + 8)));
            REPACK_PART lo_part[HX_GEMM_COLS], hi_part[HX_GEMM_COLS];
#pragma GCC unroll 4
            for (int c = 0; c < C; c++)
                lo_part[c] = hi_part[c] = _mm256_setzero_si256();
            /* Two chunks a pass: unrolled eightfold, GCC computed the
             * products of all eight first and kept them on the stack (at
             * AVX2's 16 registers), a sixth slower. */
#pragma GCC unroll 2
            for (int k = 0; k < 8; k++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(w + Q + 256 * p + 32 * k));
                __m256i lo = _mm256_and_si256(v, low), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
                if (Q5) { /* bit 2p to bit 4 of each byte, bit 2p + 1 likewise (the mask clears what the
                           * epi16 shifts bring in from the neighbouring byte) */
                    const __m256i h = _mm256_srl_epi16(_mm256_loadu_si256((const __m256i *)(w + QH + 32 * k)),
                                                       _mm_cvtsi32_si128(2 * p));
                    lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(h, 4), fifth));
                    hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(h, 3), fifth));
                }
#pragma GCC unroll 4
                for (int c = 0; c < C; c++) {
                    const uint8_t *a = y + c * by + offsetof(hx_block_q8_K, qs) + 64 * p + 4 * k;
                    lo_part[c] = REPACK_PART_DOT(lo_part[c], lo, bcast4(a));
                    hi_part[c] = REPACK_PART_DOT(hi_part[c], hi, bcast4(a + 32));
                }
                if (k == 7 || (Q5 && k == 3))
#pragma GCC unroll 4
                    for (int c = 0; c < C; c++) {
                        S[c] = REPACK_PART_WIDEN_SCALED(S[c], lo_part[c], sc_lo);
                        S[c] = REPACK_PART_WIDEN_SCALED(S[c], hi_part[c], sc_hi);
                        lo_part[c] = hi_part[c] = _mm256_setzero_si256();
                    }
            }
            const __m256i mn = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(w + MN + 16 * p)));
#pragma GCC unroll 4
            for (int c = 0; c < C; c++) {
                const uint8_t *bs = y + c * by + offsetof(hx_block_q8_K, bsums) + 8 * p; /* bsums 4p .. 4p+3 */
                const uint32_t pair = (uint16_t)((int16_t)hx_ld16(bs) + (int16_t)hx_ld16(bs + 2)) |
                                      (uint32_t)(uint16_t)((int16_t)hx_ld16(bs + 4) + (int16_t)hx_ld16(bs + 6)) << 16;
                M[c] = _mm256_add_epi32(M[c], _mm256_madd_epi16(mn, _mm256_set1_epi32((int)pair)));
            }
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w));
        const __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + REPACK_SCALES)));
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            const __m256 dy = _mm256_set1_ps(hx_ldf(y + c * by));
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S[c]), _mm256_mul_ps(dw, dy), acc[c]);
            acc[c] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(M[c]), _mm256_mul_ps(dm, dy), acc[c]);
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < C; c++)
        _mm256_storeu_ps(s + c * ss, acc[c]);
}

static inline __attribute__((always_inline)) void q4_Kx8_tile(int64_t K, float *s, size_t ss, const uint8_t *w,
                                                              const uint8_t *y, size_t by, const int C)
{
    k4x8_tile(K, s, ss, w, y, by, C, 0);
}

static inline __attribute__((always_inline)) void q5_Kx8_tile(int64_t K, float *s, size_t ss, const uint8_t *w,
                                                              const uint8_t *y, size_t by, const int C)
{
    k4x8_tile(K, s, ss, w, y, by, C, 1);
}

/* Q6_K's top two bits of the elements 32m + 4k.. of a half, bits 2m..2m+1
 * of qh chunk k, moved to bits 4..5 of each byte (the epi16 shifts move
 * bits across bytes only where the mask clears them). */
static inline __m256i q6_top(__m256i vh, const int m)
{
    const __m256i top = _mm256_set1_epi8(0x30);
    switch (m) {
    case 0: return _mm256_and_si256(_mm256_slli_epi16(vh, 4), top);
    case 1: return _mm256_and_si256(_mm256_slli_epi16(vh, 2), top);
    case 2: return _mm256_and_si256(vh, top);
    default: return _mm256_and_si256(_mm256_srli_epi16(vh, 2), top);
    }
}

/* Q6_K: per half h and quarter m, elements 128h + 32m + 4k.. (k = 0..7)
 * of each row: low four bits in ql chunk k + 8 (m & 1) (the low nibbles
 * for m < 2, the high ones after), top two in qh chunk k (q6_top).  The
 * unsigned quants (0..63) meet the activations as they are; each
 * sub-block's lane sums (chunks 4q..4q+3 of quarter m: sub-block
 * 8h + 2m + q) are multiplied by the rows' scales in integers (at AVX2
 * two chunks' int16 partials at a time, the scale applied by the madd
 * that widens them, so no 32-bit multiply), and 32 x
 * the scales against the sub-blocks' activation sums (the Q8_K bsums, a
 * pair per madd) is taken off, so S is the exact sum of sc_j x (q - 32) x a. */
static inline __attribute__((always_inline)) void q6_Kx8_tile(int64_t K, float *s, size_t ss, const uint8_t *w,
                                                              const uint8_t *y, size_t by, const int C)
{
    const size_t A = sizeof(hx_block_q8_K), SC = REPACK_SCALES, Q = SC + 16 * HX_REPACK_ROWS,
                 HALF = HX_REPACK_ROWS * (HX_QK_K / 8 + HX_QK_K / 4), blk = Q + 2 * HALF;
    const __m256i low = _mm256_set1_epi8(0x0f);
    __m256 acc[HX_GEMM_COLS];
#pragma GCC unroll 4
    for (int c = 0; c < C; c++)
        acc[c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < K / HX_QK_K; i++, w += blk, y += A) {
        prefetch_block(w, blk);
        __m256i S[HX_GEMM_COLS], M[HX_GEMM_COLS];
#pragma GCC unroll 4
        for (int c = 0; c < C; c++)
            S[c] = M[c] = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const uint8_t *qh = w + Q + h * HALF, *ql = qh + 32 * HX_REPACK_ROWS;
#pragma GCC unroll 4
            for (int m = 0; m < 4; m++) {
                /* lane r: the row's scales of sub-blocks 8h + 2m (low half) and 8h + 2m + 1 */
                const __m256i sc16 =
                    _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + SC + 16 * (4 * h + m))));
#pragma GCC unroll 2
                for (int q = 0; q < 2; q++) {
                    const __m256i sc = q ? _mm256_srai_epi32(sc16, 16)
                                         : _mm256_srai_epi32(_mm256_slli_epi32(sc16, 16), 16);
                    REPACK_PART part[HX_GEMM_COLS];
#pragma GCC unroll 4
                    for (int kk = 0; kk < 4; kk++) {
                        const int k = 4 * q + kk;
                        const __m256i vl = _mm256_loadu_si256((const __m256i *)(ql + 32 * (k + 8 * (m & 1))));
                        const __m256i lo4 = m < 2 ? _mm256_and_si256(vl, low)
                                                  : _mm256_and_si256(_mm256_srli_epi16(vl, 4), low);
                        const __m256i v = _mm256_or_si256(
                            lo4, q6_top(_mm256_loadu_si256((const __m256i *)(qh + 32 * k)), m));
#pragma GCC unroll 4
                        for (int c = 0; c < C; c++) {
                            if (kk % REPACK_Q6_PART_CHUNKS == 0)
                                part[c] = _mm256_setzero_si256();
                            part[c] = REPACK_PART_DOT(part[c], v,
                                                      bcast4(y + c * by + offsetof(hx_block_q8_K, qs) + 128 * h +
                                                             32 * m + 4 * k));
                            if (kk % REPACK_Q6_PART_CHUNKS == REPACK_Q6_PART_CHUNKS - 1)
                                S[c] = REPACK_PART_WIDEN_SCALED(S[c], part[c], sc);
                        }
                    }
                }
#pragma GCC unroll 4
                for (int c = 0; c < C; c++) /* bsums 8h + 2m and 8h + 2m + 1 */
                    M[c] = _mm256_add_epi32(
                        M[c], _mm256_madd_epi16(sc16, _mm256_set1_epi32((int)hx_ld32(
                                                          y + c * by + offsetof(hx_block_q8_K, bsums) +
                                                          2 * (8 * h + 2 * m)))));
            }
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w));
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            const __m256i St = _mm256_sub_epi32(S[c], _mm256_slli_epi32(M[c], 5));
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(St), _mm256_mul_ps(dw, _mm256_set1_ps(hx_ldf(y + c * by))),
                                     acc[c]);
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < C; c++)
        _mm256_storeu_ps(s + c * ss, acc[c]);
}

/* Entries with the column count as a constant, so the tiles unroll. */
#define REPACK_BY_COLS(name, tile)                                                                     \
    static void name(int64_t K, int C, float *s, size_t ss, const void *group, const void *y, size_t by) \
    {                                                                                                  \
        switch (C) {                                                                                   \
        case 4: tile(K, s, ss, group, y, by, 4); break;                                                \
        case 3: tile(K, s, ss, group, y, by, 3); break;                                                \
        case 2: tile(K, s, ss, group, y, by, 2); break;                                                \
        default: tile(K, s, ss, group, y, by, 1); break;                                               \
        }                                                                                              \
    }

/* The same for the 32-element types' tiles, G groups at a time: 1 for
 * the level's kernels, 2 for its pair kernels (a level without wider
 * registers; decode takes them, one column: with four, the two groups'
 * accumulators spill AVX2's sixteen registers, which only the benches and
 * tests run).  The K-quants' tiles, paired the same way, measured 11-15 %
 * slower in whole models, so they have none. */
#define REPACK_GROUPS_BY_COLS(name, tile, G)                                                           \
    static void name(int64_t K, int C, float *s, size_t ss, const void *group, const void *y, size_t by) \
    {                                                                                                  \
        switch (C) {                                                                                   \
        case 4: tile(K, s, ss, group, y, by, 4, G); break;                                             \
        case 3: tile(K, s, ss, group, y, by, 3, G); break;                                             \
        case 2: tile(K, s, ss, group, y, by, 2, G); break;                                             \
        default: tile(K, s, ss, group, y, by, 1, G); break;                                            \
        }                                                                                              \
    }

REPACK_GROUPS_BY_COLS(gemm_q4_0x8, q4_0x8_tile, 1)
REPACK_GROUPS_BY_COLS(gemm_q8_0x8, q8_0x8_tile, 1)
REPACK_GROUPS_BY_COLS(gemm_q4_1x8, q4_1x8_tile, 1)
REPACK_GROUPS_BY_COLS(gemm_q5_0x8, q5_0x8_tile, 1)
REPACK_GROUPS_BY_COLS(gemm_q5_1x8, q5_1x8_tile, 1)
REPACK_BY_COLS(gemm_q4_Kx8, q4_Kx8_tile)
REPACK_BY_COLS(gemm_q5_Kx8, q5_Kx8_tile)
REPACK_BY_COLS(gemm_q6_Kx8, q6_Kx8_tile)

#ifdef REPACK_PAIR_LEVEL
REPACK_GROUPS_BY_COLS(pair_q4_0x8, q4_0x8_tile, 2)
REPACK_GROUPS_BY_COLS(pair_q8_0x8, q8_0x8_tile, 2)
REPACK_GROUPS_BY_COLS(pair_q4_1x8, q4_1x8_tile, 2)
REPACK_GROUPS_BY_COLS(pair_q5_0x8, q5_0x8_tile, 2)
REPACK_GROUPS_BY_COLS(pair_q5_1x8, q5_1x8_tile, 2)

const hx_repack_gemm_fn REPACK_PAIR_LEVEL[HX_TYPE_COUNT] = {
    [HX_TYPE_Q4_0] = pair_q4_0x8,
    [HX_TYPE_Q8_0] = pair_q8_0x8,
    [HX_TYPE_Q4_1] = pair_q4_1x8,
    [HX_TYPE_Q5_0] = pair_q5_0x8,
    [HX_TYPE_Q5_1] = pair_q5_1x8,
};
#endif

const hx_repack_gemm_fn REPACK_LEVEL[HX_TYPE_COUNT] = {
    [HX_TYPE_Q4_0] = gemm_q4_0x8,
    [HX_TYPE_Q8_0] = gemm_q8_0x8,
    [HX_TYPE_Q4_1] = gemm_q4_1x8,
    [HX_TYPE_Q5_0] = gemm_q5_0x8,
    [HX_TYPE_Q5_1] = gemm_q5_1x8,
    [HX_TYPE_Q4_K] = gemm_q4_Kx8,
    [HX_TYPE_Q5_K] = gemm_q5_Kx8,
    [HX_TYPE_Q6_K] = gemm_q6_Kx8,
};

#endif
