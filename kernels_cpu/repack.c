/* Repacked weight matrices (repack.h): writing the interleaved copy, and
 * choosing its kernel for the current SIMD level. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_cpu/quant_impl.h"
#include "kernels_cpu/repack.h"
#include "ops/error.h"

size_t hx_repack_block_bytes(hx_type t)
{
    const size_t scales = HX_REPACK_ROWS * sizeof(hx_half);
    switch (t) {
    case HX_TYPE_Q4_0: return scales + HX_REPACK_ROWS * HX_QK / 2;
    case HX_TYPE_Q8_0: return scales + HX_REPACK_ROWS * HX_QK;
    case HX_TYPE_Q4_1: return 2 * scales + HX_REPACK_ROWS * HX_QK / 2;
    case HX_TYPE_Q5_0: return scales + HX_REPACK_ROWS * (4 + HX_QK / 2);
    case HX_TYPE_Q5_1: return 2 * scales + HX_REPACK_ROWS * (4 + HX_QK / 2);
    case HX_TYPE_Q4_K: return 2 * scales + 2 * 8 * HX_REPACK_ROWS + HX_REPACK_ROWS * HX_QK_K / 2;
    case HX_TYPE_Q5_K:
        return 2 * scales + 2 * 8 * HX_REPACK_ROWS + HX_REPACK_ROWS * (HX_QK_K / 8 + HX_QK_K / 2);
    case HX_TYPE_Q6_K: return scales + 16 * HX_REPACK_ROWS + HX_REPACK_ROWS * (HX_QK_K / 2 + HX_QK_K / 4);
    default: return 0;
    }
}

/* Elements per block of the types with a layout. */
static uint64_t block_elems(hx_type t)
{
    return t == HX_TYPE_Q4_K || t == HX_TYPE_Q5_K || t == HX_TYPE_Q6_K ? HX_QK_K : HX_QK;
}

int hx_repack_supported(hx_type t, uint64_t K, uint64_t N)
{
    return hx_repack_block_bytes(t) && K && K % block_elems(t) == 0 && N;
}

/* Q5_0/Q5_1's fifth bits of one row (bit j of qh for element j), moved
 * so that for quant chunk k (elements 4k + i and 16 + 4k + i, i = 0..3)
 * a shift by k puts each in bit 4 of byte i: element 4k + i's at bit
 * 8i + k, element 16 + 4k + i's at bit 8i + 4 + k. */
static uint32_t q5_fifth_bits(uint32_t qh)
{
    uint32_t p = 0;
    for (int j = 0; j < HX_QK; j++) {
        const int e = j % 16, pos = 8 * (e % 4) + e / 4 + (j < 16 ? 0 : 4);
        p |= ((qh >> j) & 1u) << pos;
    }
    return p;
}

/* One repacked block from the HX_REPACK_ROWS source blocks i of the
 * group's rows (row_bytes apart): scales (and Q4_1/Q5_1's mins), the Q5
 * types' fifth bits (q5_fifth_bits, four bytes a row), then quants four
 * bytes a row at a time; xor_mask (0x88 in each byte) turns Q4_0's
 * unsigned nibbles into signed ones. */
static void pack_block(uint8_t *dst, const uint8_t *src, size_t row_bytes, hx_type t, size_t qs_off,
                       size_t qs_bytes, uint32_t xor_mask)
{
    const int halves = t == HX_TYPE_Q4_1 || t == HX_TYPE_Q5_1 ? 2 : 1; /* d, or d and m: the first fields */
    for (int h = 0; h < halves; h++)
        for (int r = 0; r < HX_REPACK_ROWS; r++)
            memcpy(dst + (h * HX_REPACK_ROWS + r) * sizeof(hx_half), src + r * row_bytes + h * sizeof(hx_half),
                   sizeof(hx_half));
    uint8_t *q = dst + halves * HX_REPACK_ROWS * sizeof(hx_half);
    if (t == HX_TYPE_Q5_0 || t == HX_TYPE_Q5_1) {
        const size_t qh_off = t == HX_TYPE_Q5_0 ? offsetof(hx_block_q5_0, qh) : offsetof(hx_block_q5_1, qh);
        for (int r = 0; r < HX_REPACK_ROWS; r++, q += 4) {
            const uint32_t v = q5_fifth_bits(hx_ld32(src + r * row_bytes + qh_off));
            memcpy(q, &v, 4);
        }
    }
    for (size_t k = 0; k < qs_bytes / 4; k++)
        for (int r = 0; r < HX_REPACK_ROWS; r++) {
            const uint32_t v = hx_ld32(src + r * row_bytes + qs_off + 4 * k) ^ xor_mask;
            memcpy(q + k * 4 * HX_REPACK_ROWS + 4 * r, &v, 4);
        }
}

/* Four bytes at a time of each row, n bytes from src_off of each row's
 * block, into dst: row r's bytes 4k..4k+3 at 32k + 4r. */
static void interleave4(uint8_t *dst, const uint8_t *src, size_t row_bytes, size_t src_off, size_t n)
{
    for (size_t k = 0; k < n / 4; k++)
        for (int r = 0; r < HX_REPACK_ROWS; r++)
            memcpy(dst + k * 4 * HX_REPACK_ROWS + 4 * r, src + r * row_bytes + src_off + 4 * k, 4);
}

/* One Q4_K or Q5_K super-block of the group's rows (repack.h's layout):
 * the two share their fields but for Q5_K's qh, which goes before the
 * quants. */
static void pack_k4(uint8_t *dst, const uint8_t *src, size_t row_bytes, hx_type t)
{
    const int q5 = t == HX_TYPE_Q5_K;
    const size_t D = q5 ? offsetof(hx_block_q5_K, d) : offsetof(hx_block_q4_K, d);
    const size_t DMIN = q5 ? offsetof(hx_block_q5_K, dmin) : offsetof(hx_block_q4_K, dmin);
    const size_t SCALES = q5 ? offsetof(hx_block_q5_K, scales) : offsetof(hx_block_q4_K, scales);
    const size_t QS = q5 ? offsetof(hx_block_q5_K, qs) : offsetof(hx_block_q4_K, qs);
    uint8_t *sc = dst + 2 * HX_REPACK_ROWS * sizeof(hx_half), *mn = sc + 8 * HX_REPACK_ROWS;
    for (int r = 0; r < HX_REPACK_ROWS; r++) {
        const uint8_t *b = src + r * row_bytes;
        memcpy(dst + r * sizeof(hx_half), b + D, sizeof(hx_half));
        memcpy(dst + (HX_REPACK_ROWS + r) * sizeof(hx_half), b + DMIN, sizeof(hx_half));
        for (int j = 0; j < 8; j++)
            hx_quant_k4_scale_min(b + SCALES, j, &sc[j * HX_REPACK_ROWS + r],
                                  &mn[(j / 2) * 2 * HX_REPACK_ROWS + 2 * r + j % 2]);
    }
    uint8_t *q = mn + 8 * HX_REPACK_ROWS;
    if (q5) {
        interleave4(q, src, row_bytes, offsetof(hx_block_q5_K, qh), HX_QK_K / 8);
        q += HX_REPACK_ROWS * HX_QK_K / 8;
    }
    interleave4(q, src, row_bytes, QS, HX_QK_K / 2);
}

/* One Q6_K super-block of the group's rows (repack.h's layout). */
static void pack_q6_K(uint8_t *dst, const uint8_t *src, size_t row_bytes)
{
    uint8_t *sc = dst + HX_REPACK_ROWS * sizeof(hx_half);
    for (int r = 0; r < HX_REPACK_ROWS; r++) {
        const uint8_t *b = src + r * row_bytes;
        memcpy(dst + r * sizeof(hx_half), b + offsetof(hx_block_q6_K, d), sizeof(hx_half));
        for (int j = 0; j < 16; j++)
            sc[(j / 2) * 2 * HX_REPACK_ROWS + 2 * r + j % 2] = b[offsetof(hx_block_q6_K, scales) + j];
    }
    uint8_t *q = sc + 16 * HX_REPACK_ROWS;
    for (int h = 0; h < 2; h++, q += HX_REPACK_ROWS * (HX_QK_K / 8 + HX_QK_K / 4)) {
        interleave4(q, src, row_bytes, offsetof(hx_block_q6_K, qh) + 32 * h, 32);
        interleave4(q + 32 * HX_REPACK_ROWS, src, row_bytes, offsetof(hx_block_q6_K, ql) + 64 * h, 64);
    }
}

hx_status hx_repack_make(hx_type t, uint64_t K, uint64_t N, const void *rows, hx_repacked **out)
{
    *out = NULL;
    if (!hx_repack_supported(t, K, N))
        return hx_error(HX_ERR_UNSUPPORTED, "no repacked layout for a %s matrix of %llu x %llu",
                        hx_type_name(t), (unsigned long long)N, (unsigned long long)K);
    const size_t row_bytes = hx_type_row_size(t, K), nb = K / block_elems(t), blk = hx_repack_block_bytes(t);
    const size_t src_blk = hx_type_get(t)->type_size;
    const size_t qs_off = t == HX_TYPE_Q4_0   ? offsetof(hx_block_q4_0, qs)
                          : t == HX_TYPE_Q4_1 ? offsetof(hx_block_q4_1, qs)
                          : t == HX_TYPE_Q5_0 ? offsetof(hx_block_q5_0, qs)
                          : t == HX_TYPE_Q5_1 ? offsetof(hx_block_q5_1, qs)
                                              : offsetof(hx_block_q8_0, qs);
    const size_t qs_bytes = t == HX_TYPE_Q8_0 ? HX_QK : HX_QK / 2;
    const uint32_t xor_mask = t == HX_TYPE_Q4_0 ? 0x88888888u : 0;
    hx_repacked *r = calloc(1, sizeof *r);
    if (!r)
        return hx_error(HX_ERR_NO_MEMORY, "repacked %s matrix", hx_type_name(t));
    r->type = t;
    r->K = K;
    r->N = N;
    r->group_bytes = nb * blk;
    const uint64_t groups = (N + HX_REPACK_ROWS - 1) / HX_REPACK_ROWS, tail = N % HX_REPACK_ROWS;
    r->bytes = r->group_bytes * groups;
    /* A partial last group is packed from its rows and rows of zeros. */
    uint8_t *padded = tail ? calloc(HX_REPACK_ROWS, row_bytes) : NULL;
    if ((tail && !padded) || posix_memalign((void **)&r->data, 64, r->bytes) != 0) {
        const size_t bytes = r->bytes;
        free(padded);
        free(r);
        return hx_error(HX_ERR_NO_MEMORY, "repacked %s matrix of %zu bytes", hx_type_name(t), bytes);
    }
    if (tail)
        memcpy(padded, (const uint8_t *)rows + (N - tail) * row_bytes, tail * row_bytes);
    for (uint64_t g = 0; g < groups; g++)
        for (size_t i = 0; i < nb; i++) {
            uint8_t *dst = r->data + g * r->group_bytes + i * blk;
            const uint8_t *src = tail && g == groups - 1 ? padded : (const uint8_t *)rows + g * HX_REPACK_ROWS * row_bytes;
            const uint8_t *from = src + i * src_blk;
            if (t == HX_TYPE_Q4_K || t == HX_TYPE_Q5_K)
                pack_k4(dst, from, row_bytes, t);
            else if (t == HX_TYPE_Q6_K)
                pack_q6_K(dst, from, row_bytes);
            else
                pack_block(dst, from, row_bytes, t, qs_off, qs_bytes, xor_mask);
        }
    free(padded);
    *out = r;
    return HX_OK;
}

void hx_repack_free(void *repacked)
{
    hx_repacked *r = repacked;
    if (r)
        free(r->data);
    free(r);
}

hx_repack_gemm_fn hx_repack_gemm_level(hx_type t, hx_simd_level level)
{
    static const hx_repack_gemm_fn *const levels[HX_SIMD_COUNT] = {
        hx_repack_scalar_kernels, hx_repack_avx2_kernels, hx_repack_avx512_kernels};
    if ((unsigned)t >= HX_TYPE_COUNT || (unsigned)level >= HX_SIMD_COUNT || level > hx_cpu_simd_max())
        return NULL;
    for (int l = (int)level; l >= 0; l--) /* a level without its own falls back to the one below */
        if (levels[l][t])
            return levels[l][t];
    return NULL;
}

hx_repack_gemm_fn hx_repack_gemm(hx_type t) { return hx_repack_gemm_level(t, hx_quant_level()); }

static _Atomic int pairs_mode = HX_REPACK_PAIRS_PAYING;

void hx_repack_set_pairs(hx_repack_pairs mode) { atomic_store(&pairs_mode, (int)mode); }

/* Where the pair kernels beat the one-group ones (docs/repack.md), by
 * whole-model measurements:
 * - Prompts at AVX-512 on cores that run 512-bit instructions whole pay
 *   for every type that has 512-bit pairs: prompt +9-19 % on a Xeon, on
 *   Zen 5 small q4_0 pp128 1910 -> 3300 t/s, q8_0 2150 -> 3000, q4_K
 *   level.  On Zen 4, which splits each into two 256-bit halves, only
 *   Q4_K's gained: its unsigned nibbles take one vpdpbusd per column and
 *   vector, where Q4_0 and Q8_0's signed quants need a mask and a masked
 *   subtraction per column.  At AVX2 prompts keep the one-group tiles,
 *   whose column tiles already reuse each load.
 * - Decode (one column) paid on Intel's cores only, at both levels: on a
 *   Xeon +17-60 % at AVX-512; at AVX2 (two 256-bit tiles side by side,
 *   two streams of weights in flight) small q8_0 tg64 +16 %, SmolLM2
 *   Q4_1 +6 %.  On Zen 4 it measured slower at AVX-512, and on Zen 5 a
 *   third slower at both: at AVX2 small q4_0 tg128 600-660 t/s without
 *   the pairs against 370-440 with them, q8_0 380-420 against 250-280,
 *   SmolLM2 Q4_1 315-325 against 210-220; at AVX-512 small q4_0 600-670
 *   against 460, q8_0 375-435 against 290-320, q4_K_M 600-630 against
 *   375-400. */
static int pair_pays(hx_type t, uint32_t cols, hx_simd_level level)
{
    const uint32_t f = hx_cpu_features();
    if (cols == 1)
        return (f & HX_CPU_INTEL) != 0;
    if (level == HX_SIMD_AVX2)
        return 0;
    return (f & HX_CPU_ZMM_FULL) || t == HX_TYPE_Q4_K;
}

hx_repack_gemm_fn hx_repack_gemm_pair_level(hx_type t, hx_simd_level level)
{
    if ((unsigned)t >= HX_TYPE_COUNT || level > hx_cpu_simd_max())
        return NULL;
    return level == HX_SIMD_AVX512 ? hx_repack_avx512_pair_kernels[t]
           : level == HX_SIMD_AVX2 ? hx_repack_avx2_pair_kernels[t]
                                   : NULL;
}

hx_repack_gemm_fn hx_repack_gemm_pair(hx_type t, uint32_t cols)
{
    const int mode = atomic_load(&pairs_mode);
    const hx_simd_level level = hx_quant_level();
    if (mode == HX_REPACK_PAIRS_OFF || (mode == HX_REPACK_PAIRS_PAYING && !pair_pays(t, cols, level)))
        return NULL;
    return hx_repack_gemm_pair_level(t, level);
}
