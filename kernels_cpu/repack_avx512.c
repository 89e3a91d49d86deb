/* The repacked layouts' AVX-512 kernels (repack_x86.h): the same ymm
 * tiles with VNNI's vpdpbusd, one instruction for maddubs, madd and add. */
#include <immintrin.h>

#define REPACK_DOT(acc, u, s) _mm256_dpbusd_epi32((acc), (u), (s))
#define REPACK_PART __m256i /* partials are plain int32 sums: nothing to widen */
#define REPACK_PART_DOT(part, u, s) _mm256_dpbusd_epi32((part), (u), (s))
#define REPACK_PART_WIDEN(acc, part) _mm256_add_epi32((acc), (part))
#define REPACK_PART_WIDEN_SCALED(acc, part, sc) _mm256_add_epi32((acc), _mm256_mullo_epi32((part), (sc)))
#define REPACK_Q6_PART_CHUNKS 4 /* a sub-block's four: one multiply per sub-block */
#define REPACK_LEVEL hx_repack_avx512_kernels

#include "kernels_cpu/repack_x86.h"
