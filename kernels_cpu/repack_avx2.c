/* The repacked layouts' AVX2 kernels (repack_x86.h): u8 x s8 lane sums by
 * maddubs (pairs into int16, which cannot saturate here) then madd, or
 * several maddubs added in int16 before one madd. */
#include <immintrin.h>

#define REPACK_DOT(acc, u, s) \
    _mm256_add_epi32((acc), _mm256_madd_epi16(_mm256_maddubs_epi16((u), (s)), _mm256_set1_epi16(1)))
/* partials: maddubs's int16 pairs added as int16, one madd at the end */
#define REPACK_PART __m256i
#define REPACK_PART_DOT(part, u, s) _mm256_add_epi16((part), _mm256_maddubs_epi16((u), (s)))
#define REPACK_PART_WIDEN(acc, part) _mm256_add_epi32((acc), _mm256_madd_epi16((part), _mm256_set1_epi16(1)))
/* sc: a scale in int16 range per 32-bit lane (signed: Q6_K's), which the
 * one madd applies to both int16 halves as it widens them */
#define REPACK_PART_WIDEN_SCALED(acc, part, sc)                                                       \
    _mm256_add_epi32((acc), _mm256_madd_epi16((part), _mm256_or_si256(_mm256_and_si256((sc), _mm256_set1_epi32(0xffff)), \
                                                                      _mm256_slli_epi32((sc), 16))))
/* Q6_K chunks a partial holds: two maddubs pairs of 63 x 128 each, 2 x
 * 2 x 8064 = 32256, fit an int16 lane; a third would not. */
#define REPACK_Q6_PART_CHUNKS 2
#define REPACK_LEVEL hx_repack_avx2_kernels
#define REPACK_PAIR_LEVEL hx_repack_avx2_pair_kernels

#include "kernels_cpu/repack_x86.h"
