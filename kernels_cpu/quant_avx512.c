/* AVX-512 (F, BW, VL, DQ, VNNI) kernels.  Compiled with those instruction
 * sets; run only after hx_cpu_simd_max() says the CPU and OS support them.
 * What this level does not specialise comes from the AVX2 level.
 *
 * The 32-element block types are walked eight blocks at a time: the eight
 * f16 scales of weights and activations are pulled out of the blocks with
 * a few 64-byte loads and word permutes and converted at once, which keeps
 * per-block scalar work (the bottleneck of a block-at-a-time loop) off the
 * decode hot path.  The 4/5-bit types then hold one block per 128-bit lane
 * (its low-nibble half against the activations' first 16, its high half
 * against the last 16), gathered with inserts from memory rather than
 * cross-lane permutes, which all queue on one port; Q8_0 holds two blocks
 * per zmm.  Quants are multiplied with VNNI (vpdpbusd: u8 x s8 summed into
 * int32, no saturation) or, for the K-quants, maddubs + vpdpwssd so the
 * sub-block scale is applied inside the integer sum.
 *
 * The GEMM tiles (prompts) of every type unpack each weight block once for
 * the tile's activation rows and each activation block once for its four
 * weight rows; the 32-element types use the one block per lane layout
 * there too, since it halves the per-pair float work, and the 4/5-bit
 * ones narrow the four rows' sums into one vector per activation row.
 * vec_dot4 is a tile with one column: what a decode step's matmul runs.
 *
 * Dequantization gives the scalar reference's bits (see quant_scalar.c). */
#include <immintrin.h>

#include "kernels_cpu/quant_impl.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* Kernel pieces take their layout as constant arguments: inlining them
 * into each caller is what turns those into immediates. */
#define INLINE static inline __attribute__((always_inline))

/* Asks for the weight bytes HX_QUANT_PREFETCH ahead of [p, p + len): a
 * decode GEMV streams the weights once, and the hardware prefetcher alone
 * leaves a core well short of its share of memory bandwidth. */
INLINE void prefetch_ahead(const uint8_t *p, const int len)
{
#pragma GCC unroll 8
    for (int k = 0; k < len; k += 64)
        _mm_prefetch((const char *)(p + HX_QUANT_PREFETCH + k), _MM_HINT_T0);
}

static inline float h2f(const uint8_t *p) { return _cvtsh_ss(hx_ld16(p)); }

/* [s[2i] x 8 | s[2i+1] x 8]: the scales of blocks 2i, 2i+1 for one zmm. */
static inline __m512 pair_scale(__m256 s8, int i)
{
    const __m512i idx = _mm512_set_epi32(2 * i + 1, 2 * i + 1, 2 * i + 1, 2 * i + 1, 2 * i + 1, 2 * i + 1,
                                         2 * i + 1, 2 * i + 1, 2 * i, 2 * i, 2 * i, 2 * i, 2 * i, 2 * i, 2 * i, 2 * i);
    return _mm512_permutexvar_ps(idx, _mm512_castps256_ps512(s8));
}

/* 32 bytes at p and 32 at q in one zmm. */
static inline __m512i load2x32(const uint8_t *p, const uint8_t *q)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)p)),
                              _mm256_loadu_si256((const __m256i *)q), 1);
}

/* The 64 4-bit quants of two 32-blocks whose 16 packed bytes are at p and
 * q: [lo(p) hi(p) lo(q) hi(q)], each 16 bytes. */
static inline __m512i nibbles2x32(const uint8_t *p, const uint8_t *q)
{
    const __m256i pq = _mm256_loadu2_m128i((const __m128i *)q, (const __m128i *)p);
    const __m512i dup = _mm512_permutexvar_epi64(_mm512_set_epi64(3, 2, 3, 2, 1, 0, 1, 0), _mm512_castsi256_si512(pq));
    const __m512i sh = _mm512_mask_srli_epi16(dup, 0xff00ff00u, dup, 4);
    return _mm512_and_si512(sh, _mm512_set1_epi8(0x0f));
}

static inline float hsum16(__m512 v) { return _mm512_reduce_add_ps(v); }

/* The sums of v[0..3]'s lanes, as four floats: one transposing tree for
 * the four where four reductions would each narrow 16 lanes alone.  Each
 * sum's order is fixed, whatever the other three hold. */
static inline __m128 hsum4x16(const __m512 v[4])
{
    const __m512 s01 = _mm512_add_ps(_mm512_shuffle_f32x4(v[0], v[1], 0x44), _mm512_shuffle_f32x4(v[0], v[1], 0xee));
    const __m512 s23 = _mm512_add_ps(_mm512_shuffle_f32x4(v[2], v[3], 0x44), _mm512_shuffle_f32x4(v[2], v[3], 0xee));
    __m512 w = _mm512_add_ps(_mm512_shuffle_f32x4(s01, s23, 0x88), _mm512_shuffle_f32x4(s01, s23, 0xdd));
    w = _mm512_add_ps(w, _mm512_permute_ps(w, 0x4e));
    w = _mm512_add_ps(w, _mm512_permute_ps(w, 0xb1));
    return _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0), w));
}

/* Writes a tile's 4 x C sums: s[c*ss + r] = sum of acc[r][c]'s lanes. */
INLINE void store_tile(float *s, size_t ss, __m512 acc[4][HX_GEMM_COLS_MAX], const int C)
{
#pragma GCC unroll 6
    for (int c = 0; c < C; c++) {
        const __m512 v[4] = {acc[0][c], acc[1][c], acc[2][c], acc[3][c]};
        _mm_storeu_ps(s + c * ss, hsum4x16(v));
    }
}

/* ---- plain types -------------------------------------------------------- */

static inline __m512 f16x16(__m256i v) { return _mm512_cvtph_ps(v); }
static inline __m512 bf16x16(__m256i v) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16)); }

/* A row of 16-bit floats, 16 at a time, the tail under a mask; `cvt` is a
 * constant at each (inlined) call, so no call remains. */
static inline __attribute__((always_inline)) void dequant_16bit(const uint8_t *x, float *y, int64_t n,
                                                                __m512 (*cvt)(__m256i))
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, cvt(_mm256_loadu_si256((const __m256i *)(x + 2 * i))));
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, cvt(_mm256_maskz_loadu_epi16(m, x + 2 * i)));
    }
}

static void dequant_f16(const void *vx, float *y, int64_t n) { dequant_16bit(vx, y, n, f16x16); }
static void dequant_bf16(const void *vx, float *y, int64_t n) { dequant_16bit(vx, y, n, bf16x16); }

static void quant_f16(const float *x, void *vy, int64_t n)
{
    uint8_t *y = vy;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(y + 2 * i), _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT);
        _mm256_mask_storeu_epi16(y + 2 * i, m, h);
    }
}

static void quant_bf16(const float *x, void *vy, int64_t n)
{
    uint8_t *y = vy;
    const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        const __m512i u = _mm512_castps_si512(_mm512_maskz_loadu_ps(m, x + i));
        /* round to nearest even; NaNs keep their top bits and turn quiet */
        const __m512i rounded = _mm512_srli_epi32(
            _mm512_add_epi32(_mm512_add_epi32(u, bias), _mm512_and_si512(_mm512_srli_epi32(u, 16), one)), 16);
        const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                      _mm512_set1_epi32(0x7f800000));
        const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
        const __m512i r = _mm512_mask_mov_epi32(rounded, nan, quiet);
        _mm256_mask_storeu_epi16(y + 2 * i, m, _mm512_cvtepi32_epi16(r));
    }
}

/* ---- activation quantizers (the scalar ones' bits, for finite input) ---- */

/* Q8_0 / Q8_1: d = amax/127, q = round half away from zero (as roundf). */
INLINE void quant8(const float *x, uint8_t *y, int64_t n, const int WITH_SUM)
{
    const size_t B = WITH_SUM ? sizeof(hx_block_q8_1) : sizeof(hx_block_q8_0);
    const size_t QS = WITH_SUM ? offsetof(hx_block_q8_1, qs) : offsetof(hx_block_q8_0, qs);
    const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f), half = _mm512_set1_ps(0.5f);
    const __m512i one = _mm512_set1_epi32(1);
    for (int64_t b = 0; b < n / HX_QK; b++, x += HX_QK, y += B) {
        const __m512 v[2] = {_mm512_loadu_ps(x), _mm512_loadu_ps(x + 16)};
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v[0]), _mm512_abs_ps(v[1])));
        const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
        const uint16_t dh = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        memcpy(y, &dh, 2);
        __m512i q[2];
        for (int k = 0; k < 2; k++) {
            const __m512 t = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v[k], _mm512_set1_ps(id)), lo), hi);
            __m512i i = _mm512_cvttps_epi32(t);
            const __m512 f = _mm512_sub_ps(t, _mm512_cvtepi32_ps(i)); /* exact */
            i = _mm512_mask_add_epi32(i, _mm512_cmp_ps_mask(f, half, _CMP_GE_OQ), i, one);
            i = _mm512_mask_sub_epi32(i, _mm512_cmp_ps_mask(f, _mm512_set1_ps(-0.5f), _CMP_LE_OQ), i, one);
            q[k] = i;
            _mm_storeu_si128((__m128i *)(y + QS + 16 * k), _mm512_cvtepi32_epi8(i));
        }
        if (WITH_SUM) {
            const int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q[0], q[1]));
            const uint16_t sh = _cvtss_sh((float)sum * d, _MM_FROUND_TO_NEAREST_INT);
            memcpy(y + offsetof(hx_block_q8_1, s), &sh, 2);
        }
    }
}

static void quant_q8_0(const float *x, void *y, int64_t n) { quant8(x, y, n, 0); }
static void quant_q8_1(const float *x, void *y, int64_t n) { quant8(x, y, n, 1); }

/* Q8_K: scale from the element of largest magnitude (the first, with its
 * sign), q = round half to even of x * -127/max, block sums of 16. */
static void quant_q8_K(const float *x, void *vy, int64_t n)
{
    uint8_t *y = vy;
    for (int64_t b = 0; b < n / HX_QK_K; b++, x += HX_QK_K, y += sizeof(hx_block_q8_K)) {
        __m512 m = _mm512_setzero_ps();
        for (int k = 0; k < 16; k++)
            m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + 16 * k)));
        const float amax = _mm512_reduce_max_ps(m);
        float d = 0;
        int16_t bsums[16] = {0};
        if (amax == 0) {
            memset(y + offsetof(hx_block_q8_K, qs), 0, HX_QK_K);
        } else {
            int first = 0;
            for (int k = 0; k < 16; k++) {
                const __mmask16 e = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + 16 * k)), _mm512_set1_ps(amax), _CMP_EQ_OQ);
                if (e) {
                    first = 16 * k + __builtin_ctz(e);
                    break;
                }
            }
            const float iscale = -127.0f / x[first];
            for (int k = 0; k < 16; k++) {
                /* the default rounding mode rounds to nearest even */
                __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * k), _mm512_set1_ps(iscale)));
                q = _mm512_max_epi32(_mm512_min_epi32(q, _mm512_set1_epi32(127)), _mm512_set1_epi32(-128));
                _mm_storeu_si128((__m128i *)(y + offsetof(hx_block_q8_K, qs) + 16 * k), _mm512_cvtepi32_epi8(q));
                bsums[k] = (int16_t)_mm512_reduce_add_epi32(q);
            }
            d = 1.0f / iscale;
        }
        memcpy(y + offsetof(hx_block_q8_K, d), &d, sizeof d);
        memcpy(y + offsetof(hx_block_q8_K, bsums), bsums, sizeof bsums);
    }
}

/* Sixteen elements (m of them, the rest zero) of a plain weight row as
 * floats: F32 as stored, F16 through the AVX-512 conversion, BF16 by a
 * 16-bit shift (exact). */
INLINE __m512 plain16(const uint8_t *p, __mmask16 m, const int T)
{
    if (T == HX_TYPE_F32)
        return _mm512_maskz_loadu_ps(m, p);
    const __m256i h = _mm256_maskz_loadu_epi16(m, p);
    return T == HX_TYPE_F16 ? _mm512_cvtph_ps(h) : bf16x16(h);
}

/* Where element i (a multiple of 16) of a row of type T starts: plain
 * types by their width; Q8_0 (the F32 tile over Q8_0 keys, below) inside
 * its 34-byte block, after the scale. */
INLINE size_t plain_off(int64_t i, const int T)
{
    return T == HX_TYPE_F32 ? (size_t)(4 * i)
           : T == HX_TYPE_Q8_0 ? ((size_t)i / HX_QK) * sizeof(hx_block_q8_0) + 2 + ((size_t)i % HX_QK)
                               : (size_t)(2 * i);
}

/* Sixteen elements of a row from element i as floats: a Q8_0 block's
 * bytes times its scale, exact in F32 (8 bits times an 11-bit
 * significand), so a Q8_0 row meets F32 activations in the F32 tile with
 * the bits its dequantized row would give. */
INLINE __m512 plain16_at(const uint8_t *row, int64_t i, __mmask16 m, const int T)
{
    if (T != HX_TYPE_Q8_0)
        return plain16(row + plain_off(i, T), m, T);
    const uint8_t *b = row + ((size_t)i / HX_QK) * sizeof(hx_block_q8_0);
    const __m512 d = _mm512_cvtph_ps(_mm256_set1_epi16((short)(b[0] | b[1] << 8)));
    const __m512i q = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, b + 2 + (size_t)i % HX_QK));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(q), d);
}

/* Element-wise products summed in four accumulators of sixteen lanes; T
 * is the weights' type, E its bytes per element. */
#define PLAIN_DOT(name, T, E)                                                                            \
    static void name(int64_t n, float *s, const void *vx, const void *vy)                                \
    {                                                                                                    \
        const uint8_t *x = vx;                                                                           \
        const float *y = vy;                                                                             \
        __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),                  \
                         _mm512_setzero_ps()};                                                           \
        int64_t i = 0;                                                                                   \
        for (; i + 64 <= n; i += 64) {                                                                   \
            prefetch_ahead(x + (E) * i, 64 * (E));                                                       \
            for (int k = 0; k < 4; k++)                                                                  \
                acc[k] = _mm512_fmadd_ps(plain16(x + (E) * (i + 16 * k), 0xffff, T), _mm512_loadu_ps(y + i + 16 * k), \
                                         acc[k]);                                                        \
        }                                                                                                \
        for (; i < n; i += 16) {                                                                         \
            const __mmask16 m = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);                  \
            acc[0] = _mm512_fmadd_ps(plain16(x + (E) * i, m, T), _mm512_maskz_loadu_ps(m, y + i), acc[0]);  \
        }                                                                                                \
        *s = hsum16(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));       \
    }

PLAIN_DOT(dot_f32, HX_TYPE_F32, 4)
PLAIN_DOT(dot_f16, HX_TYPE_F16, 2)
PLAIN_DOT(dot_bf16, HX_TYPE_BF16, 2)

/* ---- 32-element blocks -------------------------------------------------- */

/* Writes 64 floats (q - off) * d for a zmm of two blocks' quants, one
 * scale per block. */
static inline void store64_offset(float *y, __m512i q, int off, float d0, float d1)
{
    const __m512i vo = _mm512_set1_epi32(off);
    const __m128i part[4] = {_mm512_extracti32x4_epi32(q, 0), _mm512_extracti32x4_epi32(q, 1),
                             _mm512_extracti32x4_epi32(q, 2), _mm512_extracti32x4_epi32(q, 3)};
    for (int k = 0; k < 4; k++) {
        const __m512i v = _mm512_sub_epi32(_mm512_cvtepu8_epi32(part[k]), vo);
        _mm512_storeu_ps(y + 16 * k, _mm512_mul_ps(_mm512_cvtepi32_ps(v), _mm512_set1_ps(k < 2 ? d0 : d1)));
    }
}

static void dequant_q4_0(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    const int64_t nb = n / HX_QK;
    const size_t B = sizeof(hx_block_q4_0);
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2, x += 2 * B, y += 2 * HX_QK)
        store64_offset(y, nibbles2x32(x + 2, x + B + 2), 8, h2f(x), h2f(x + B));
    if (i < nb)
        hx_quant_avx2_kernels[HX_TYPE_Q4_0].dequantize_row(x, y, HX_QK);
}

static void dequant_q8_0(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / HX_QK; i++, x += sizeof(hx_block_q8_0), y += HX_QK) {
        const __m512 d = _mm512_set1_ps(h2f(x));
        for (int k = 0; k < 2; k++) {
            const __m512i v = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(x + 2 + 16 * k)));
            _mm512_storeu_ps(y + 16 * k, _mm512_mul_ps(_mm512_cvtepi32_ps(v), d));
        }
    }
}

/* Four runs of 16 bytes, at p + first + k*S (k = 0..3), as the four
 * 128-bit lanes of a zmm.  Inserts from memory cost a load and a uop any
 * vector port takes, where a cross-lane permute would queue on one port. */
INLINE __m512i runs4x16(const uint8_t *p, const int S, const int first)
{
    __m512i z = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(p + first)));
    z = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(p + first + S)), 1);
    z = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(p + first + 2 * S)), 2);
    return _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(p + first + 3 * S)), 3);
}

/* The f16 fields at p + k*S + F0 (k = 0..7, into *a) and, if F1 >= 0, at
 * p + k*S + F1 (into *b), as floats: one word permute per 64-byte window
 * of consecutive blocks, the last window pulled back inside [p, p + 8*S).
 * S, F0, F1 are compile-time constants; the loop unrolls into constants. */
INLINE void fields8(const uint8_t *p, const int S, const int F0, const int F1, __m256 *a, __m256 *b)
{
    const int reach = (F1 > F0 ? F1 : F0) + 2; /* bytes of block k a window must hold */
    const int per = (64 - reach) / S + 1;
    /* word k and word 8+k: block k's two fields */
    const __m512i blk = _mm512_set_epi64(0, 0, 0, 0, 0x0007000600050004ll, 0x0003000200010000ll,
                                         0x0007000600050004ll, 0x0003000200010000ll);
    const int f1 = F1 >= 0 ? F1 : F0;
    const __m512i fld = _mm512_set_epi64(0, 0, 0, 0, 0x0001000100010001ll * (f1 / 2), 0x0001000100010001ll * (f1 / 2),
                                         0x0001000100010001ll * (F0 / 2), 0x0001000100010001ll * (F0 / 2));
    const __m512i base = _mm512_add_epi16(_mm512_mullo_epi16(blk, _mm512_set1_epi16((short)(S / 2))), fld);
    __m512i r = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int w = 0; w < 8; w++) {
        const int k0 = w * per, k1 = k0 + per < 8 ? k0 + per : 8;
        if (k0 >= 8)
            break;
        const int start = k0 * S < 8 * S - 64 ? k0 * S : 8 * S - 64;
        const uint32_t m8 = ((1u << k1) - 1) & ~((1u << k0) - 1);
        const __mmask32 m = (__mmask32)(m8 | (m8 << 8));
        r = _mm512_mask_permutexvar_epi16(r, m, _mm512_sub_epi16(base, _mm512_set1_epi16((short)(start / 2))),
                                          _mm512_loadu_si512(p + start));
    }
    *a = _mm256_cvtph_ps(_mm512_castsi512_si128(r));
    if (F1 >= 0)
        *b = _mm256_cvtph_ps(_mm512_extracti32x4_epi32(r, 1));
}

/* The fifth bits of blocks 4h..4h+3 of a Q5 group as byte masks over the
 * lanes of runs4x16: low halves (elements 0..15) and high halves. */
INLINE void q5_masks(const uint8_t *x, const int B, const int QH, const int h, __mmask64 *lo, __mmask64 *hi)
{
    uint64_t l = 0, u = 0;
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        const uint8_t *q = x + (4 * h + k) * B + QH;
        l |= (uint64_t)hx_ld16(q) << (16 * k);
        u |= (uint64_t)hx_ld16(q + 2) << (16 * k);
    }
    *lo = _cvtu64_mask64(l);
    *hi = _cvtu64_mask64(u);
}

/* The quants of blocks 4h..4h+3 of a 4/5-bit row at x, one block per
 * 128-bit lane (runs4x16): its first 16 quants in *lo, its last 16 in
 * *hi.  B, QS, QH (-1: none): block size and offsets, constants. */
INLINE void unpack45(const uint8_t *x, const int B, const int QS, const int QH, const int h, __m512i *lo, __m512i *hi)
{
    const __m512i low = _mm512_set1_epi8(0x0f);
    const __m512i qz = runs4x16(x, B, 4 * h * B + QS);
    *lo = _mm512_and_si512(qz, low);
    *hi = _mm512_and_si512(_mm512_srli_epi16(qz, 4), low);
    if (QH >= 0) {
        __mmask64 klo, khi;
        q5_masks(x, B, QH, h, &klo, &khi);
        *lo = _mm512_mask_add_epi8(*lo, klo, *lo, _mm512_set1_epi8(16));
        *hi = _mm512_mask_add_epi8(*hi, khi, *hi, _mm512_set1_epi8(16));
    }
}

/* Eight 32-blocks of a 4/5-bit weight row against eight Q8_0/Q8_1
 * blocks, one block per 128-bit lane, into acc[0], acc[1] (and accm for
 * the Q8_1 min term).  B, QS, QH (-1: none): weight block size and
 * offsets; A, AQ: activation block size and quant offset; OFF: the
 * weights' zero point (8 or 16), or 0 with MINS for the types with a min.
 * All compile-time constants. */
INLINE void group32(const uint8_t *x, const uint8_t *y, const int B, const int QS, const int QH, const int A,
                    const int AQ, const int OFF, const int MINS, __m512 *acc, __m256 *accm)
{
    __m256 dy, sy = _mm256_setzero_ps(), dx, mx = _mm256_setzero_ps();
    prefetch_ahead(x, 8 * B);
    fields8(y, A, 0, MINS ? 2 : -1, &dy, &sy);
    fields8(x, B, 0, MINS ? 2 : -1, &dx, &mx);
    const __m256 s8 = _mm256_mul_ps(dx, dy);
    if (MINS)
        *accm = _mm256_fmadd_ps(mx, sy, *accm);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m512i alo = runs4x16(y, A, 4 * h * A + AQ), ahi = runs4x16(y, A, 4 * h * A + AQ + 16);
        __m512i qlo, qhi;
        unpack45(x, B, QS, QH, h, &qlo, &qhi);
        __m512i t = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), qlo, alo), qhi, ahi);
        if (OFF) { /* (q - OFF)·a = q·a - OFF·a */
            const __m512i o = _mm512_set1_epi8((char)OFF);
            t = _mm512_sub_epi32(t, _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), o, alo), o, ahi));
        }
        /* lane k holds block 4h+k: its scale in all four floats */
        const __m512i sel = _mm512_set_epi32(4 * h + 3, 4 * h + 3, 4 * h + 3, 4 * h + 3, 4 * h + 2, 4 * h + 2, 4 * h + 2,
                                             4 * h + 2, 4 * h + 1, 4 * h + 1, 4 * h + 1, 4 * h + 1, 4 * h, 4 * h, 4 * h, 4 * h);
        acc[h] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_permutexvar_ps(sel, _mm512_castps256_ps512(s8)), acc[h]);
    }
}

#define DOT32_GROUPED(name, T, B, QS, QH, A, AQ, OFF, MINS)                                          \
    static void name(int64_t n, float *s, const void *vx, const void *vy)                            \
    {                                                                                                \
        const uint8_t *x = vx, *y = vy;                                                              \
        const int64_t nb = n / HX_QK;                                                                \
        __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};                                  \
        __m256 accm = _mm256_setzero_ps();                                                           \
        int64_t i = 0;                                                                               \
        for (; i + 8 <= nb; i += 8)                                                                  \
            group32(x + i * (B), y + i * (A), B, QS, QH, A, AQ, OFF, MINS, acc, &accm);              \
        float rest = 0;                                                                              \
        if (i < nb)                                                                                  \
            hx_quant_avx2_kernels[T].vec_dot((nb - i) * HX_QK, &rest, x + i * (B), y + i * (A));     \
        *s = hsum16(_mm512_add_ps(acc[0], acc[1])) + hsum16(_mm512_zextps256_ps512(accm)) + rest;    \
    }

DOT32_GROUPED(dot_q4_0, HX_TYPE_Q4_0, 18, 2, -1, 34, 2, 8, 0)
DOT32_GROUPED(dot_q5_0, HX_TYPE_Q5_0, 22, 6, 2, 34, 2, 16, 0)
DOT32_GROUPED(dot_q4_1, HX_TYPE_Q4_1, 20, 4, -1, 36, 4, 0, 1)
DOT32_GROUPED(dot_q5_1, HX_TYPE_Q5_1, 24, 8, 4, 36, 4, 0, 1)

_Static_assert(sizeof(hx_block_q4_0) == 18 && offsetof(hx_block_q4_0, qs) == 2, "q4_0 layout");
_Static_assert(sizeof(hx_block_q5_0) == 22 && offsetof(hx_block_q5_0, qh) == 2 && offsetof(hx_block_q5_0, qs) == 6,
               "q5_0 layout");
_Static_assert(sizeof(hx_block_q4_1) == 20 && offsetof(hx_block_q4_1, m) == 2 && offsetof(hx_block_q4_1, qs) == 4,
               "q4_1 layout");
_Static_assert(sizeof(hx_block_q5_1) == 24 && offsetof(hx_block_q5_1, qh) == 4 && offsetof(hx_block_q5_1, qs) == 8,
               "q5_1 layout");
_Static_assert(sizeof(hx_block_q8_0) == 34 && offsetof(hx_block_q8_0, qs) == 2, "q8_0 layout");
_Static_assert(sizeof(hx_block_q8_1) == 36 && offsetof(hx_block_q8_1, s) == 2 && offsetof(hx_block_q8_1, qs) == 4,
               "q8_1 layout");

static inline void q8_0_group(const uint8_t *x, const uint8_t *y, __m512 acc[2])
{
    const size_t B = sizeof(hx_block_q8_0);
    __m256 dx, dy;
    prefetch_ahead(x, 8 * (int)B);
    fields8(x, (int)B, 0, -1, &dx, NULL);
    fields8(y, (int)B, 0, -1, &dy, NULL);
    const __m256 s8 = _mm256_mul_ps(dx, dy);
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        const uint8_t *xb = x + 2 * i * B, *yb = y + 2 * i * B;
        const __m512i w = load2x32(xb + 2, xb + B + 2);
        const __m512i a = load2x32(yb + 2, yb + B + 2);
        /* |w| is the unsigned operand; a takes w's sign */
        const __m512i as = _mm512_mask_sub_epi8(a, _mm512_movepi8_mask(w), _mm512_setzero_si512(), a);
        const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(w), as);
        acc[i & 1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), pair_scale(s8, i), acc[i & 1]);
    }
}

static void dot_q8_0(int64_t n, float *s, const void *vx, const void *vy)
{
    const uint8_t *x = vx, *y = vy;
    const int64_t nb = n / HX_QK;
    const size_t B = sizeof(hx_block_q8_0);
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    int64_t i = 0;
    for (; i + 8 <= nb; i += 8)
        q8_0_group(x + i * B, y + i * B, acc);
    float rest = 0;
    if (i < nb)
        hx_quant_avx2_kernels[HX_TYPE_Q8_0].vec_dot((nb - i) * HX_QK, &rest, x + i * B, y + i * B);
    *s = hsum16(_mm512_add_ps(acc[0], acc[1])) + rest;
}

/* ---- K-quants ----------------------------------------------------------- */

/* Sub-block scales as 16-bit words, [sc[j] x 16 | sc[j+1] x 16], from the
 * eight scales broadcast to every 128-bit lane as words. */
static inline __m512i k4_scale_pair(__m512i sc16, int j)
{
    const __m512i ctrl = _mm512_inserti64x4(_mm512_set1_epi16((short)((2 * j) | ((2 * j + 1) << 8))),
                                            _mm256_set1_epi16((short)((2 * j + 2) | ((2 * j + 3) << 8))), 1);
    return _mm512_shuffle_epi8(sc16, ctrl);
}

/* sum_j m[j] * (bsums[2j] + bsums[2j+1]) in 8 int32 lanes. */
static inline __m256i k4_min_lanes(const uint8_t *y, uint64_t m)
{
    const __m128i mb = _mm_cvtsi64_si128((long long)m);
    const __m256i m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mb, mb));
    return _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(y + offsetof(hx_block_q8_K, bsums))), m16);
}

/* One Q4_K/Q5_K super-block against its Q8_K block: int32 lanes of
 * sum_j sc[j] * (q·a over sub-block j). */
INLINE __m512i k4_block_sum(const uint8_t *qs, const uint8_t *qh, const int8_t *a, uint64_t sc)
{
    const __m512i sc16 = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc)));
    const __m512i low = _mm512_set1_epi8(0x0f);
    /* Q5_K: [qh | qh], so one byte test per chunk gives the fifth bits of
     * both sub-blocks (bit 2c for the low half, 2c+1 for the high) */
    const __m256i h = qh ? _mm256_loadu_si256((const __m256i *)qh) : _mm256_setzero_si256();
    const __m512i hh = _mm512_inserti64x4(_mm512_castsi256_si512(h), h, 1);
    __m512i isum = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m256i b = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
        __m512i q = _mm512_and_si512(
            _mm512_inserti64x4(_mm512_castsi256_si512(b), _mm256_srli_epi16(b, 4), 1), low);
        if (qh) {
            const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (2 * c))),
                                                   _mm256_set1_epi8((char)(2 << (2 * c))), 1);
            q = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(hh, bit), q, _mm512_set1_epi8(16));
        }
        const __m512i p = _mm512_maddubs_epi16(q, _mm512_loadu_si512(a + 64 * c));
        isum = _mm512_dpwssd_epi32(isum, p, k4_scale_pair(sc16, 2 * c));
    }
    return isum;
}

INLINE void dot_k4(int64_t n, float *s, const uint8_t *x, const uint8_t *y, const int five)
{
    const size_t B = five ? sizeof(hx_block_q5_K) : sizeof(hx_block_q4_K);
    const size_t qs = five ? offsetof(hx_block_q5_K, qs) : offsetof(hx_block_q4_K, qs);
    __m512 acc = _mm512_setzero_ps();
    __m256 accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += B, y += sizeof(hx_block_q8_K)) {
        uint64_t sc, m;
        prefetch_ahead(x, (int)B);
        hx_quant_k4_unpack(x + offsetof(hx_block_q4_K, scales), &sc, &m);
        const __m512i isum = k4_block_sum(x + qs, five ? x + offsetof(hx_block_q5_K, qh) : NULL,
                                          (const int8_t *)(y + offsetof(hx_block_q8_K, qs)), sc);
        const float dy = hx_ldf(y);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(dy * h2f(x)), acc);
        accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(k4_min_lanes(y, m)), _mm256_set1_ps(dy * h2f(x + 2)), accm);
    }
    *s = hsum16(acc) - hsum16(_mm512_zextps256_ps512(accm));
}

static void dot_q4_K(int64_t n, float *s, const void *x, const void *y) { dot_k4(n, s, x, y, 0); }
static void dot_q5_K(int64_t n, float *s, const void *x, const void *y) { dot_k4(n, s, x, y, 1); }

/* The 128 six-bit quants of half h of a Q6_K super-block as two zmm:
 * q[0] = elements 0..63 of the half, q[1] = elements 64..127. */
static inline void q6_half(const uint8_t *x, int h, __m512i q[2])
{
    const __m512i ql = _mm512_loadu_si512(x + offsetof(hx_block_q6_K, ql) + 64 * h);
    const __m256i qh = _mm256_loadu_si256((const __m256i *)(x + offsetof(hx_block_q6_K, qh) + 32 * h));
    /* [qh | qh >> 2]: bits 0-1 / 2-3 for elements 0..63, 4-5 / 6-7 for 64..127 */
    const __m512i hh = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
    const __m512i c30 = _mm512_set1_epi8(0x30), low = _mm512_set1_epi8(0x0f);
    const __m512i h01 = _mm512_and_si512(_mm512_slli_epi16(hh, 4), c30);
    const __m512i h23 = _mm512_and_si512(hh, c30);
    q[0] = _mm512_ternarylogic_epi32(ql, low, h01, 0xea); /* (ql & 0x0f) | h01 */
    q[1] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(ql, 4), low, h23, 0xea);
}

static void dot_q6_K(int64_t n, float *s, const void *vx, const void *vy)
{
    const uint8_t *x = vx, *y = vy;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += sizeof(hx_block_q6_K), y += sizeof(hx_block_q8_K)) {
        prefetch_ahead(x, (int)sizeof(hx_block_q6_K));
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(x + offsetof(hx_block_q6_K, scales))));
        const __m512i scz = _mm512_castsi256_si512(sc16);
        const int8_t *a = (const int8_t *)(y + offsetof(hx_block_q8_K, qs));
        __m512i isum = _mm512_setzero_si512();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m512i q[2];
            q6_half(x, h, q);
#pragma GCC unroll 2
            for (int g = 0; g < 2; g++) {
                const int sb = 8 * h + 4 * g; /* the zmm's 128-bit lanes hold sub-blocks sb .. sb+3 */
                const __m512i idx = _mm512_set_epi64(
                    0x0001000100010001ll * (sb + 3), 0x0001000100010001ll * (sb + 3), 0x0001000100010001ll * (sb + 2),
                    0x0001000100010001ll * (sb + 2), 0x0001000100010001ll * (sb + 1), 0x0001000100010001ll * (sb + 1),
                    0x0001000100010001ll * sb, 0x0001000100010001ll * sb);
                const __m512i p = _mm512_maddubs_epi16(q[g], _mm512_loadu_si512(a + 128 * h + 64 * g));
                isum = _mm512_dpwssd_epi32(isum, p, _mm512_permutexvar_epi16(idx, scz));
            }
        }
        /* the quants' offset of 32: subtract 32 * sum_g sc[g] * bsums[g] */
        const __m256i bs = _mm256_loadu_si256((const __m256i *)(y + offsetof(hx_block_q8_K, bsums)));
        const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(bs, sc16), 5);
        isum = _mm512_sub_epi32(isum, _mm512_zextsi256_si512(off));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                              _mm512_set1_ps(hx_ldf(y) * h2f(x + offsetof(hx_block_q6_K, d))), acc);
    }
    *s = hsum16(acc);
}

/* Writes 64 floats d*q - m for sub-blocks j, j+1 held as [q_j | q_j+1]. */
static inline void store64_kq(float *y, __m512i q, float d0, float m0, float d1, float m1)
{
    const __m128i part[4] = {_mm512_extracti32x4_epi32(q, 0), _mm512_extracti32x4_epi32(q, 1),
                             _mm512_extracti32x4_epi32(q, 2), _mm512_extracti32x4_epi32(q, 3)};
    for (int k = 0; k < 4; k++) {
        const __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(part[k]));
        const __m512 d = _mm512_set1_ps(k < 2 ? d0 : d1), m = _mm512_set1_ps(k < 2 ? m0 : m1);
        _mm512_storeu_ps(y + 16 * k, _mm512_sub_ps(_mm512_mul_ps(d, v), m));
    }
}

static void dequant_q4_K(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    const __m512i low = _mm512_set1_epi8(0x0f);
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += sizeof(hx_block_q4_K), y += HX_QK_K) {
        const float d = h2f(x), dmin = h2f(x + 2);
        uint64_t sc, m;
        hx_quant_k4_unpack(x + offsetof(hx_block_q4_K, scales), &sc, &m);
        for (int c = 0; c < 4; c++) {
            const __m256i b = _mm256_loadu_si256((const __m256i *)(x + offsetof(hx_block_q4_K, qs) + 32 * c));
            const __m512i q = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(b), _mm256_srli_epi16(b, 4), 1), low);
            const int j = 2 * c;
            store64_kq(y + 64 * c, q, d * (float)(uint8_t)(sc >> (8 * j)), dmin * (float)(uint8_t)(m >> (8 * j)),
                       d * (float)(uint8_t)(sc >> (8 * j + 8)), dmin * (float)(uint8_t)(m >> (8 * j + 8)));
        }
    }
}

static void dequant_q6_K(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += sizeof(hx_block_q6_K), y += HX_QK_K) {
        const float d = h2f(x + offsetof(hx_block_q6_K, d));
        const int8_t *sc = (const int8_t *)(x + offsetof(hx_block_q6_K, scales));
        for (int h = 0; h < 2; h++) {
            __m512i q[2];
            q6_half(x, h, q);
            for (int g = 0; g < 2; g++) {
                const int e = 128 * h + 64 * g;
                const __m128i part[4] = {_mm512_extracti32x4_epi32(q[g], 0), _mm512_extracti32x4_epi32(q[g], 1),
                                         _mm512_extracti32x4_epi32(q[g], 2), _mm512_extracti32x4_epi32(q[g], 3)};
                for (int k = 0; k < 4; k++) {
                    const __m512i v = _mm512_sub_epi32(_mm512_cvtepu8_epi32(part[k]), _mm512_set1_epi32(32));
                    const __m512 ds = _mm512_set1_ps(d * (float)sc[e / 16 + k]);
                    _mm512_storeu_ps(y + e + 16 * k, _mm512_mul_ps(ds, _mm512_cvtepi32_ps(v)));
                }
            }
        }
    }
}

/* ---- GEMM tiles (prompts) ------------------------------------------------ */

/* Asks for the weight bytes a tile reading `rows` rows together reads
 * next, for [p, p + len) lying `off` bytes into one of its rows (see
 * hx_tile_prefetch). */
INLINE void prefetch_tile(const uint8_t *p, size_t off, size_t bx, const int rows, const int len)
{
#pragma GCC unroll 8
    for (int k = 0; k < len; k += 64)
        _mm_prefetch(hx_tile_prefetch(p + k, off + k, bx, rows), _MM_HINT_T0);
}

/* Sixteen elements of the tile's four rows at element i meet the C
 * activation rows: each converted weight vector is used C times and each
 * activation vector four times, one accumulator per output.  m masks a
 * row's last, partial sixteen (0xffff elsewhere).  With `keep`, each
 * converted vector is also stored there (row r at keep + r*n). */
INLINE void plain_step(__m512 acc[4][HX_GEMM_COLS_MAX], const uint8_t *x, size_t bx, const uint8_t *vy, size_t by,
                       int64_t i, __mmask16 m, const int C, const int T, float *keep, int64_t n)
{
    __m512 w[4];
    #pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        w[r] = plain16_at(x + r * bx, i, m, T);
        if (keep)
            _mm512_mask_storeu_ps(keep + r * n + i, m, w[r]);
    }
    #pragma GCC unroll 6
    for (int c = 0; c < C; c++) {
        const __m512 a = _mm512_maskz_loadu_ps(m, (const float *)(vy + c * by) + i);
        #pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
            acc[r][c] = _mm512_fmadd_ps(w[r], a, acc[r][c]);
    }
}

/* One plain weight row against one f32 activation row (a decode step
 * where hx_quant_decode_rows_alone says so): one FMA chain over the row's
 * sixteens in order, the lanes and order of the row's output in a tile,
 * so its bits are the same.  The tile reads its rows one after another
 * here, one sequential stream with no software prefetch, as HX_TILE_ROWS
 * does for the quantized types: on Zen 5, over rows of a few KB, four
 * interleaved streams (or two) left the hardware prefetchers behind, and
 * a prefetch ahead of the one stream only got in their way (SmolLM-sized
 * F16 file, tg64, 2 threads: four rows 97 t/s, two 83, one with a
 * prefetch 2 KB ahead 117, without 134).  One chain adds a sixteen per
 * FMA latency, about one core's share of the memory's rate there (one
 * thread reads at about 80 % of it), and less than that on Intel's cores,
 * which therefore keep the four rows interleaved.  Two chains per row
 * (even and odd sixteens, the tile summing them in two passes for the
 * same bits) gained a tenth on Zen 5 but cost prompts 5 % and the hot F32
 * tile 15-35 %. */
INLINE void plain_row(__m512 *acc, const uint8_t *x, const float *y, int64_t n, const int T)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        *acc = _mm512_fmadd_ps(plain16_at(x, i, 0xffff, T), _mm512_loadu_ps(y + i), *acc);
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        *acc = _mm512_fmadd_ps(plain16_at(x, i, m, T), _mm512_maskz_loadu_ps(m, y + i), *acc);
    }
}

/* 4 plain (F32, F16, BF16) weight rows x C f32 activation rows: 4 x C
 * independent FMA chains.  One column streamed from memory (a decode
 * step; PF without keep) reads the rows one at a time (plain_row) where
 * hx_quant_decode_rows_alone says so.  The
 * whole sixteens run unmasked, a cache line of
 * each row's weights (one prefetch) per pass, and the last, partial one
 * under a mask: the lanes and their order are those of one masked loop
 * over the row, so an output's bits are the same at any width, and the
 * same for F16 or BF16 rows as for those rows converted to F32 first. */
INLINE void gemm_plain_tile(int64_t n, float *s, size_t ss, const uint8_t *x, size_t bx, const uint8_t *vy, size_t by,
                            const int C, const int T, float *keep, const int PF)
{
    /* weights per cache line: 16 or 32; Q8_0's two blocks, 68 bytes */
    const int64_t L = T == HX_TYPE_F32 ? 16 : T == HX_TYPE_Q8_0 ? 64 : 32;
    __m512 acc[4][HX_GEMM_COLS_MAX];
    #pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
        #pragma GCC unroll 6
        for (int c = 0; c < C; c++)
            acc[r][c] = _mm512_setzero_ps();
    const int64_t nl = n / L * L;
    if (C == 1 && PF && !keep && hx_quant_decode_rows_alone()) {
        #pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
            plain_row(&acc[r][0], x + r * bx, (const float *)(const void *)vy, n, T);
        store_tile(s, ss, acc, 1);
        return;
    }
    int64_t i = 0;
    for (; i < nl; i += L) {
        if (T == HX_TYPE_Q8_0 && ((uint64_t)i & 63)) /* whole blocks: each block's scale read once */
            __builtin_unreachable();
        #pragma GCC unroll 4
        for (int r = 0; PF && r < 4; r++)
            prefetch_tile(x + r * bx + plain_off(i, T), plain_off(i, T), bx, 4, 64);
        #pragma GCC unroll 4
        for (int64_t k = 0; k < L; k += 16)
            plain_step(acc, x, bx, vy, by, i + k, 0xffff, C, T, keep, n);
    }
    for (; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        if (PF && !(i & (L - 1)))
            #pragma GCC unroll 4
            for (int r = 0; r < 4; r++)
                prefetch_tile(x + r * bx + plain_off(i, T), plain_off(i, T), bx, 4, 64);
        plain_step(acc, x, bx, vy, by, i, m, C, T, keep, n);
    }
    store_tile(s, ss, acc, C);
}

/* Plain rows (F32, F16 and BF16 as stored, or a prompt's F16/BF16 rows
 * converted once per block) run six columns at a time: 24 accumulators,
 * the four weight vectors and an activation vector fill 29 of the 32
 * registers, and each weight vector read from L2 meets six FMAs where
 * four columns' meet four: with four, the block's weights streaming from L2 bound the tile
 * (1T hot, K 512, 32 rows: 65 -> 76 GMAC/s).  Callers hand it columns in
 * sixes (hx_quant_ops.gemm_cols). */
#define PLAIN_GEMM(name, T, keep)                                                                                 \
    static void name(int64_t n, int ncols, float *s, size_t ss, const void *x, size_t bx, const void *y, size_t by, \
                     float *k)                                                                                    \
    {                                                                                                             \
        (void)k;                                                                                                  \
        switch (ncols) {                                                                                          \
        case 6: gemm_plain_tile(n, s, ss, x, bx, y, by, 6, T, keep, 1); break;                                       \
        case 5: gemm_plain_tile(n, s, ss, x, bx, y, by, 5, T, keep, 1); break;                                       \
        case 4: gemm_plain_tile(n, s, ss, x, bx, y, by, 4, T, keep, 1); break;                                       \
        case 3: gemm_plain_tile(n, s, ss, x, bx, y, by, 3, T, keep, 1); break;                                       \
        case 2: gemm_plain_tile(n, s, ss, x, bx, y, by, 2, T, keep, 1); break;                                       \
        default: gemm_plain_tile(n, s, ss, x, bx, y, by, 1, T, keep, 1); break;                                      \
        }                                                                                                         \
    }
PLAIN_GEMM(gemm_f32_cols, HX_TYPE_F32, NULL)
/* F16 and BF16 rows at the F32 tile's width, each weight vector converted
 * as it is used. */
PLAIN_GEMM(gemm_f16_cols, HX_TYPE_F16, NULL)
PLAIN_GEMM(gemm_bf16_cols, HX_TYPE_BF16, NULL)
/* A prompt's first token tile over a block of F16 or BF16 rows: the F32
 * tile's sums, converting each weight vector on the way and leaving the
 * rows converted at `keep` for the block's other tiles
 * (hx_quant_ops.gemm_keep_f32). */
PLAIN_GEMM(gemm_keep_f16, HX_TYPE_F16, k)
PLAIN_GEMM(gemm_keep_bf16, HX_TYPE_BF16, k)
/* Q8_0 rows (a KV cache's keys) x F32 activations (its queries), each
 * weight vector converted as it is used (hx_quant_ops.gemm_f32_act). */
PLAIN_GEMM(gemm_q8_0_f32_cols, HX_TYPE_Q8_0, NULL)
HX_QUANT_GEMM_OF_KEEP(gemm_q8_0_f32, gemm_q8_0_f32_cols)

HX_QUANT_GEMM_OF_KEEP(gemm_f32, gemm_f32_cols)
HX_QUANT_GEMM_OF_KEEP(gemm_f16, gemm_f16_cols)
HX_QUANT_GEMM_OF_KEEP(gemm_bf16, gemm_bf16_cols)

/* hx_quant_gemm_f32_block and hx_quant_ops.gemm_f32_block at AVX-512:
 * the plain tiles of rows of type T (F32, F16, BF16 as gemm runs them;
 * Q8_0 as gemm_q8_0_f32), four rows by six columns, over the whole block
 * in one call and without the prefetches.  A last one to three rows each
 * run alone (stride 0, the first of four equal outputs), as a lone row's
 * tile does. */
INLINE void block_cols_of(int64_t n, int64_t cols, float *s, size_t ss, const uint8_t *x, size_t bx, const uint8_t *y,
                          size_t by, const int T)
{
    int64_t c = 0;
    for (; c + 6 <= cols; c += 6)
        gemm_plain_tile(n, s + c * ss, ss, x, bx, y + c * by, by, 6, T, NULL, 0);
    switch (cols - c) {
    case 5: gemm_plain_tile(n, s + c * ss, ss, x, bx, y + c * by, by, 5, T, NULL, 0); break;
    case 4: gemm_plain_tile(n, s + c * ss, ss, x, bx, y + c * by, by, 4, T, NULL, 0); break;
    case 3: gemm_plain_tile(n, s + c * ss, ss, x, bx, y + c * by, by, 3, T, NULL, 0); break;
    case 2: gemm_plain_tile(n, s + c * ss, ss, x, bx, y + c * by, by, 2, T, NULL, 0); break;
    case 1: gemm_plain_tile(n, s + c * ss, ss, x, bx, y + c * by, by, 1, T, NULL, 0); break;
    default: break;
    }
}

HX_QUANT_GEMM_F32_BLOCKS(hx_quant_avx512_gemm_f32_block, hx_quant_avx512_gemm_f32_blocks, block_cols_of, 6)

/* The blocks a tile's vector loop left (fewer than it takes at once):
 * added to each of its 4 x C sums by the AVX2 vec_dot, m quants each. */
static void tile_tail(hx_type t, int64_t m, int C, float *s, size_t ss, const uint8_t *x, size_t bx, const uint8_t *y,
                      size_t by)
{
    for (int c = 0; m > 0 && c < C; c++)
        for (int r = 0; r < 4; r++) {
            float rest;
            hx_quant_avx2_kernels[t].vec_dot(m, &rest, x + r * bx, y + c * by);
            s[c * ss + r] += rest;
        }
}

/* 4 Q8_0 weight rows x C Q8_0 activation rows, one block per 128-bit lane
 * (as group32): a lane's first 16 quants meet the block's first 16
 * activations and its last 16 the last 16, in two vpdpbusd into the same
 * int32 lanes, so a (row, column) pair pays one conversion, one multiply
 * and one FMA per four blocks where two blocks per zmm would pay them per
 * two.  vpdpbusd wants one unsigned operand: the activations (-127..127)
 * are flipped to a + 128 once per column, and 128 * sum(w), computed once
 * per row, is the pair's starting value (a register copy rather than a
 * subtraction).  The integer block sums are vec_dot's exactly. */
INLINE void gemm_q8_0_tile(int64_t n, float *s, size_t ss, const uint8_t *x, size_t bx, const uint8_t *y, size_t by,
                           const int C)
{
    enum { B = sizeof(hx_block_q8_0), A = sizeof(hx_block_q8_0) };
    const int64_t nb = n / HX_QK;
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    __m512 acc[4][HX_GEMM_COLS_MAX];
    #pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
        #pragma GCC unroll 4
        for (int c = 0; c < C; c++)
            acc[r][c] = _mm512_setzero_ps();
    const int64_t nb8 = nb / 8 * 8;
    const int RS = HX_TILE_ROWS(C);
    for (int r0 = 0; r0 < 4; r0 += RS) {
        for (int64_t i = 0; i < nb8; i += 8) {
            __m256 dx[4], dy[HX_GEMM_COLS];
            #pragma GCC unroll 4
            for (int r = r0; r < r0 + RS; r++) {
                prefetch_tile(x + r * bx + i * B, (size_t)(i * B), bx, RS, 8 * B);
                fields8(x + r * bx + i * B, B, 0, -1, &dx[r], NULL);
            }
            #pragma GCC unroll 4
            for (int c = 0; c < C; c++)
                fields8(y + c * by + i * A, A, 0, -1, &dy[c], NULL);
            #pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const __m512i sel = _mm512_set_epi32(4 * h + 3, 4 * h + 3, 4 * h + 3, 4 * h + 3, 4 * h + 2, 4 * h + 2,
                                                     4 * h + 2, 4 * h + 2, 4 * h + 1, 4 * h + 1, 4 * h + 1, 4 * h + 1,
                                                     4 * h, 4 * h, 4 * h, 4 * h);
                __m512i alo[HX_GEMM_COLS], ahi[HX_GEMM_COLS];
                __m512 sy[HX_GEMM_COLS];
                #pragma GCC unroll 4
                for (int c = 0; c < C; c++) {
                    const uint8_t *yb = y + c * by + i * A;
                    alo[c] = _mm512_xor_si512(runs4x16(yb, A, 4 * h * A + 2), flip);
                    ahi[c] = _mm512_xor_si512(runs4x16(yb, A, 4 * h * A + 18), flip);
                    sy[c] = _mm512_permutexvar_ps(sel, _mm512_castps256_ps512(dy[c]));
                }
                #pragma GCC unroll 4
                for (int r = r0; r < r0 + RS; r++) {
                    const uint8_t *xr = x + r * bx + i * B;
                    const __m512 sx = _mm512_permutexvar_ps(sel, _mm512_castps256_ps512(dx[r]));
                    const __m512i wlo = runs4x16(xr, B, 4 * h * B + 2), whi = runs4x16(xr, B, 4 * h * B + 18);
                    const __m512i neg = _mm512_sub_epi32(
                        _mm512_setzero_si512(),
                        _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, wlo), flip, whi));
                    #pragma GCC unroll 4
                    for (int c = 0; c < C; c++) {
                        const __m512i t = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(neg, alo[c], wlo), ahi[c], whi);
                        acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_mul_ps(sx, sy[c]), acc[r][c]);
                    }
                }
            }
        }
    }
    store_tile(s, ss, acc, C);
    tile_tail(HX_TYPE_Q8_0, (nb - nb8) * HX_QK, C, s, ss, x + nb8 * B, bx, y + nb8 * A, by);
}

HX_QUANT_GEMM_BY_COLS(gemm_q8_0_wide, gemm_q8_0_tile)

/* Rows of fewer than 8 blocks (a head of 64 in a Q8_0 or Q4_0 KV cache:
 * 2) never reach the tiles' vector loops, whose tail pays a vec_dot call
 * per (row, column) pair: the AVX2 tiles take such rows whole, a block
 * at a time (pp512 at depth 4096 with a Q8_0 cache ran slower here than
 * at AVX2). */
#define SHORT_ROWS_AT_AVX2(name, wide, T)                                                                        \
    static void name(int64_t n, int ncols, float *s, size_t ss, const void *x, size_t bx, const void *y, size_t by) \
    {                                                                                                             \
        if (n / HX_QK < 8)                                                                                        \
            hx_quant_avx2_kernels[T].gemm(n, ncols, s, ss, x, bx, y, by);                                          \
        else                                                                                                      \
            wide(n, ncols, s, ss, x, bx, y, by);                                                                  \
    }
SHORT_ROWS_AT_AVX2(gemm_q8_0, gemm_q8_0_wide, HX_TYPE_Q8_0)

/* 4 weight rows of a 4/5-bit type x C Q8_0/Q8_1 activation rows, the
 * lane-per-block layout of gemm_q8_0_tile with the float work shared by
 * the four rows: a pair's int32 lanes (four partial sums per block, each
 * of 8 quants, |sum| <= 8·31·127 = 31496) are narrowed by packs + madd
 * into sums of 16 quants, and those, twice as wide, by a second packs +
 * madd where they fit 16 bits (Q4_0: 16·8·127, Q4_1: 16·15·127, Q5_0:
 * 16·16·127 = 32512) or else (Q5_1) by two shuffles and an add, into one
 * zmm per column holding (block, row) sums of a whole block.  A column
 * then pays one conversion, one multiply and one FMA per four blocks for
 * all four rows (and one more FMA for the Q8_1 min term), and needs one
 * accumulator instead of four.  B, QS, QH (-1: none): weight block size
 * and offsets; OFF: the zero point (8, 16) or 0 with MINS (Q8_1
 * activations), as group32's. */
INLINE void gemm_q45_tile(int64_t n, float *s, size_t ss, const uint8_t *x, size_t bx, const uint8_t *y, size_t by,
                          const int C, const hx_type T, const int B, const int QS, const int QH, const int OFF,
                          const int MINS)
{
    const int A = MINS ? (int)sizeof(hx_block_q8_1) : (int)sizeof(hx_block_q8_0);
    const int AQ = MINS ? (int)offsetof(hx_block_q8_1, qs) : (int)offsetof(hx_block_q8_0, qs);
    const int QMAX = OFF ? OFF : QH >= 0 ? 31 : 15;          /* the largest |q - OFF| */
    const int NARROW16 = 16 * QMAX * 127 <= 32767; /* do sums of 16 products fit 16 bits? */
    const int64_t nb = n / HX_QK;
    const __m512i ones = _mm512_set1_epi16(1);
    __m512 acc[HX_GEMM_COLS];
    #pragma GCC unroll 4
    for (int c = 0; c < C; c++)
        acc[c] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= nb; i += 8) {
        __m256 dx[4], mx[4], dy[HX_GEMM_COLS], sy[HX_GEMM_COLS];
        #pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            prefetch_tile(x + r * bx + i * B, (size_t)(i * B), bx, 4, 8 * B);
            fields8(x + r * bx + i * B, B, 0, MINS ? 2 : -1, &dx[r], &mx[r]);
        }
        #pragma GCC unroll 4
        for (int c = 0; c < C; c++)
            fields8(y + c * by + i * A, A, 0, MINS ? 2 : -1, &dy[c], &sy[c]);
        /* the rows' scales as [dx0 | dx1] and [dx2 | dx3] for one permute */
        const __m512 dx01 = _mm512_insertf32x8(_mm512_castps256_ps512(dx[0]), dx[1], 1);
        const __m512 dx23 = _mm512_insertf32x8(_mm512_castps256_ps512(dx[2]), dx[3], 1);
        const __m512 mx01 = MINS ? _mm512_insertf32x8(_mm512_castps256_ps512(mx[0]), mx[1], 1) : dx01;
        const __m512 mx23 = MINS ? _mm512_insertf32x8(_mm512_castps256_ps512(mx[2]), mx[3], 1) : dx23;
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            /* lane 4L + r: block 4h + L; of row r (sx) or of the column (sy) */
            const __m512i rsel = _mm512_set_epi32(24 + 4 * h + 3, 16 + 4 * h + 3, 8 + 4 * h + 3, 4 * h + 3,
                                                  24 + 4 * h + 2, 16 + 4 * h + 2, 8 + 4 * h + 2, 4 * h + 2,
                                                  24 + 4 * h + 1, 16 + 4 * h + 1, 8 + 4 * h + 1, 4 * h + 1,
                                                  24 + 4 * h, 16 + 4 * h, 8 + 4 * h, 4 * h);
            const __m512i csel = _mm512_set_epi32(4 * h + 3, 4 * h + 3, 4 * h + 3, 4 * h + 3, 4 * h + 2, 4 * h + 2,
                                                  4 * h + 2, 4 * h + 2, 4 * h + 1, 4 * h + 1, 4 * h + 1, 4 * h + 1,
                                                  4 * h, 4 * h, 4 * h, 4 * h);
            const __m512 sx = _mm512_permutex2var_ps(dx01, rsel, dx23);
            const __m512 smx = _mm512_permutex2var_ps(mx01, rsel, mx23);
            __m512i wlo[4], whi[4];
            #pragma GCC unroll 4
            for (int r = 0; r < 4; r++)
                unpack45(x + r * bx + i * B, B, QS, QH, h, &wlo[r], &whi[r]);
            #pragma GCC unroll 4
            for (int c = 0; c < C; c++) {
                const uint8_t *yb = y + c * by + i * A;
                const __m512i alo = runs4x16(yb, A, 4 * h * A + AQ), ahi = runs4x16(yb, A, 4 * h * A + AQ + 16);
                __m512i neg = _mm512_setzero_si512();
                if (OFF) { /* every row's sum starts from -OFF * sum(a): (q - OFF)·a */
                    const __m512i o = _mm512_set1_epi8((char)OFF);
                    neg = _mm512_sub_epi32(neg, _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(neg, o, alo), o, ahi));
                }
                __m512i t[4];
                #pragma GCC unroll 4
                for (int r = 0; r < 4; r++)
                    t[r] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(neg, wlo[r], alo), whi[r], ahi);
                const __m512i m01 = _mm512_madd_epi16(_mm512_packs_epi32(t[0], t[1]), ones);
                const __m512i m23 = _mm512_madd_epi16(_mm512_packs_epi32(t[2], t[3]), ones);
                __m512i sum;
                if (NARROW16) {
                    sum = _mm512_madd_epi16(_mm512_packs_epi32(m01, m23), ones);
                } else { /* [t0a t1a t2a t3a] + [t0b t1b t2b t3b] per block */
                    const __m512 f01 = _mm512_castsi512_ps(m01), f23 = _mm512_castsi512_ps(m23);
                    sum = _mm512_add_epi32(_mm512_castps_si512(_mm512_shuffle_ps(f01, f23, 0x88)),
                                           _mm512_castps_si512(_mm512_shuffle_ps(f01, f23, 0xdd)));
                }
                const __m512 scy = _mm512_permutexvar_ps(csel, _mm512_castps256_ps512(dy[c]));
                acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(sx, scy), acc[c]);
                if (MINS) /* m·s of each (block, row) */
                    acc[c] = _mm512_fmadd_ps(smx, _mm512_permutexvar_ps(csel, _mm512_castps256_ps512(sy[c])), acc[c]);
            }
        }
    }
    #pragma GCC unroll 4
    for (int c = 0; c < C; c++) {
        /* lanes 4L + r: add the four blocks L of each row r */
        __m512 v = _mm512_add_ps(acc[c], _mm512_shuffle_f32x4(acc[c], acc[c], 0x4e));
        v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0xb1));
        _mm_storeu_ps(s + c * ss, _mm512_castps512_ps128(v));
    }
    tile_tail(T, (nb - i) * HX_QK, C, s, ss, x + i * B, bx, y + i * A, by);
}

HX_QUANT_GEMM_BY_COLS(gemm_q4_0_wide, gemm_q45_tile, HX_TYPE_Q4_0, 18, 2, -1, 8, 0)
SHORT_ROWS_AT_AVX2(gemm_q4_0, gemm_q4_0_wide, HX_TYPE_Q4_0)
HX_QUANT_GEMM_BY_COLS(gemm_q5_0, gemm_q45_tile, HX_TYPE_Q5_0, 22, 6, 2, 16, 0)
HX_QUANT_GEMM_BY_COLS(gemm_q4_1, gemm_q45_tile, HX_TYPE_Q4_1, 20, 4, -1, 0, 1)
HX_QUANT_GEMM_BY_COLS(gemm_q5_1, gemm_q45_tile, HX_TYPE_Q5_1, 24, 8, 4, 0, 1)


/* 4 K-quant weight rows x C Q8_K activation rows, one super-block at a
 * time.  Each weight row's 256 quants are unpacked once into four zmm
 * (64 quants each, two Q4_K/Q5_K sub-blocks or four Q6_K ones) with their
 * sub-block scales as 16-bit words, and then meet the C activation rows:
 * maddubs + vpdpwssd per 64 quants, as vec_dot, so the integer block sums
 * are vec_dot's exactly.  The activations' 64-byte runs are read straight
 * from L1 as memory operands, leaving the registers to the unpacked row
 * and the 4 x C float accumulators.  Q6_K's offset of 32 folds into the
 * same integer sum (one vpdpwssd of the block sums with -32 * scales); the
 * Q4_K/Q5_K min term has its own float scale (dmin) and is one madd and
 * one FMA per pair.  KIND: 4 (Q4_K), 5 (Q5_K), 6 (Q6_K). */
INLINE void gemm_k_tile(int64_t n, float *s, size_t ss, const uint8_t *x, size_t bx, const uint8_t *y, size_t by,
                        const int C, const int KIND)
{
    const size_t B = KIND == 6 ? sizeof(hx_block_q6_K) : KIND == 5 ? sizeof(hx_block_q5_K) : sizeof(hx_block_q4_K);
    const size_t A = sizeof(hx_block_q8_K), AQ = offsetof(hx_block_q8_K, qs), AS = offsetof(hx_block_q8_K, bsums);
    const __m512i low = _mm512_set1_epi8(0x0f);
    __m512 acc[4][HX_GEMM_COLS_MAX];
    #pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
        #pragma GCC unroll 4
        for (int c = 0; c < C; c++)
            acc[r][c] = _mm512_setzero_ps();
    const int RS = HX_TILE_ROWS(C);
    for (int r0 = 0; r0 < 4; r0 += RS) {
        for (int64_t i = 0; i < n / HX_QK_K; i++) {
            float dy[HX_GEMM_COLS];
            #pragma GCC unroll 4
            for (int c = 0; c < C; c++)
                dy[c] = hx_ldf(y + c * by + i * A);
            #pragma GCC unroll 4
            for (int r = r0; r < r0 + RS; r++) {
                const uint8_t *xb = x + r * bx + i * B;
                prefetch_tile(xb, (size_t)(i * B), bx, RS, (int)B);
                __m512i w[4], sw[4];
                __m256i mins = _mm256_setzero_si256();
                float d, dmin = 0;
                if (KIND == 6) {
                    const __m256i sc16 =
                        _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(xb + offsetof(hx_block_q6_K, scales))));
                    const __m512i scz = _mm512_castsi256_si512(sc16);
                    #pragma GCC unroll 4
                    for (int k = 0; k < 4; k++) { /* lane L of chunk k: sub-block 4k + L */
                        const __m512i idx = _mm512_set_epi64(
                            0x0001000100010001ll * (4 * k + 3), 0x0001000100010001ll * (4 * k + 3),
                            0x0001000100010001ll * (4 * k + 2), 0x0001000100010001ll * (4 * k + 2),
                            0x0001000100010001ll * (4 * k + 1), 0x0001000100010001ll * (4 * k + 1),
                            0x0001000100010001ll * (4 * k), 0x0001000100010001ll * (4 * k));
                        sw[k] = _mm512_permutexvar_epi16(idx, scz);
                    }
                    q6_half(xb, 0, w);
                    q6_half(xb, 1, w + 2);
                    mins = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 5));
                    d = h2f(xb + offsetof(hx_block_q6_K, d));
                } else {
                    const size_t qs = KIND == 5 ? offsetof(hx_block_q5_K, qs) : offsetof(hx_block_q4_K, qs);
                    uint64_t sc, m;
                    hx_quant_k4_unpack(xb + offsetof(hx_block_q4_K, scales), &sc, &m);
                    const __m512i sc16 = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc)));
                    const __m128i mb = _mm_cvtsi64_si128((long long)m);
                    mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mb, mb));
                    __m512i hh = _mm512_setzero_si512();
                    if (KIND == 5) {
                        const __m256i h = _mm256_loadu_si256((const __m256i *)(xb + offsetof(hx_block_q5_K, qh)));
                        hh = _mm512_inserti64x4(_mm512_castsi256_si512(h), h, 1);
                    }
                    #pragma GCC unroll 4
                    for (int k = 0; k < 4; k++) {
                        const __m256i b = _mm256_loadu_si256((const __m256i *)(xb + qs + 32 * k));
                        w[k] = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(b), _mm256_srli_epi16(b, 4), 1),
                                                low);
                        if (KIND == 5) {
                            const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (2 * k))),
                                                                   _mm256_set1_epi8((char)(2 << (2 * k))), 1);
                            w[k] = _mm512_mask_add_epi8(w[k], _mm512_test_epi8_mask(hh, bit), w[k], _mm512_set1_epi8(16));
                        }
                        sw[k] = k4_scale_pair(sc16, 2 * k);
                    }
                    d = h2f(xb);
                    dmin = h2f(xb + 2);
                }
                #pragma GCC unroll 4
                for (int c = 0; c < C; c++) {
                    const uint8_t *yb = y + c * by + i * A;
                    __m512i isum = _mm512_setzero_si512();
                    #pragma GCC unroll 4
                    for (int k = 0; k < 4; k++)
                        isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(w[k], _mm512_loadu_si512(yb + AQ + 64 * k)),
                                                   sw[k]);
                    const __m256i bs = _mm256_loadu_si256((const __m256i *)(yb + AS));
                    if (KIND == 6) /* isum -= 32 * sum_g sc[g] * bsums[g] */
                        isum = _mm512_dpwssd_epi32(isum, _mm512_zextsi256_si512(bs), _mm512_zextsi256_si512(mins));
                    acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(dy[c] * d), acc[r][c]);
                    if (KIND != 6) {
                        const __m256 mf = _mm256_cvtepi32_ps(_mm256_madd_epi16(bs, mins));
                        acc[r][c] = _mm512_fmadd_ps(_mm512_zextps256_ps512(mf), _mm512_set1_ps(-(dy[c] * dmin)), acc[r][c]);
                    }
                }
            }
        }
    }
    store_tile(s, ss, acc, C);
}

HX_QUANT_GEMM_BY_COLS(gemm_q4_K, gemm_k_tile, 4)
HX_QUANT_GEMM_BY_COLS(gemm_q5_K, gemm_k_tile, 5)
HX_QUANT_GEMM_BY_COLS(gemm_q6_K, gemm_k_tile, 6)

HX_QUANT_DOT4S_OF_GEMMS

/* Sixteen elements of F32 or F16 rows (converted exactly) as F32, those
 * outside mask m zero. */
static inline __attribute__((always_inline)) __m512 load16_as_f32(const void *x, size_t at, __mmask16 m,
                                                                  const int half)
{
    return half ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const hx_half *)x + at))
                : _mm512_maskz_loadu_ps(m, (const float *)x + at);
}

/* A multiply and an add, not an FMA: the scalar level's bits; the last
 * partial vector under a mask.  Slices of 64 accumulators stay in
 * registers over all the rows.  `half`: the rows are F16. */
static inline __attribute__((always_inline)) void add_scaled_rows(float *acc, const void *x, size_t x_stride,
                                                                  const float *w, int64_t rows, int64_t n,
                                                                  const int half)
{
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512 a[4];
        for (int k = 0; k < 4; k++)
            a[k] = _mm512_loadu_ps(acc + i + 16 * k);
        for (int64_t r = 0; r < rows; r++) {
            const __m512 wv = _mm512_set1_ps(w[r]);
            for (int k = 0; k < 4; k++)
                a[k] = _mm512_add_ps(
                    a[k], _mm512_mul_ps(wv, load16_as_f32(x, (size_t)r * x_stride + (size_t)i + 16 * k, 0xffff, half)));
        }
        for (int k = 0; k < 4; k++)
            _mm512_storeu_ps(acc + i + 16 * k, a[k]);
    }
    for (; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 a = _mm512_maskz_loadu_ps(m, acc + i);
        for (int64_t r = 0; r < rows; r++)
            a = _mm512_add_ps(a, _mm512_mul_ps(_mm512_set1_ps(w[r]), load16_as_f32(x, (size_t)r * x_stride + (size_t)i, m, half)));
        _mm512_mask_storeu_ps(acc + i, m, a);
    }
}

void hx_quant_avx512_add_scaled_rows(float *acc, const float *x, size_t x_stride, const float *w, int64_t rows,
                                     int64_t n)
{
    add_scaled_rows(acc, x, x_stride, w, rows, n, 0);
}

void hx_quant_avx512_add_scaled_rows_f16(float *acc, const hx_half *x, size_t x_stride, const float *w, int64_t rows,
                                         int64_t n)
{
    add_scaled_rows(acc, x, x_stride, w, rows, n, 1);
}

const hx_quant_kernels hx_quant_avx512_kernels[HX_TYPE_COUNT] = {
    [HX_TYPE_F32] = {NULL, NULL, dot_f32, dot4_f32, gemm_f32, NULL, NULL},
    [HX_TYPE_F16] = {dequant_f16, quant_f16, dot_f16, dot4_f16, gemm_f16, NULL, gemm_keep_f16},
    [HX_TYPE_BF16] = {dequant_bf16, quant_bf16, dot_bf16, dot4_bf16, gemm_bf16, NULL, gemm_keep_bf16},
    [HX_TYPE_Q4_0] = {dequant_q4_0, NULL, dot_q4_0, dot4_q4_0, gemm_q4_0, NULL, NULL},
    [HX_TYPE_Q4_1] = {NULL, NULL, dot_q4_1, dot4_q4_1, gemm_q4_1, NULL, NULL},
    [HX_TYPE_Q5_0] = {NULL, NULL, dot_q5_0, dot4_q5_0, gemm_q5_0, NULL, NULL},
    [HX_TYPE_Q5_1] = {NULL, NULL, dot_q5_1, dot4_q5_1, gemm_q5_1, NULL, NULL},
    [HX_TYPE_Q8_0] = {dequant_q8_0, quant_q8_0, dot_q8_0, dot4_q8_0, gemm_q8_0, NULL, NULL},
    [HX_TYPE_Q8_1] = {NULL, quant_q8_1, NULL, NULL, NULL, NULL, NULL},
    [HX_TYPE_Q8_K] = {NULL, quant_q8_K, NULL, NULL, NULL, NULL, NULL},
    [HX_TYPE_Q4_K] = {dequant_q4_K, NULL, dot_q4_K, dot4_q4_K, gemm_q4_K, NULL, NULL},
    [HX_TYPE_Q5_K] = {NULL, NULL, dot_q5_K, dot4_q5_K, gemm_q5_K, NULL, NULL},
    [HX_TYPE_Q6_K] = {dequant_q6_K, NULL, dot_q6_K, dot4_q6_K, gemm_q6_K, NULL, NULL},
};

const hx_gemm_fn hx_quant_avx512_gemm_f32_act[HX_TYPE_COUNT] = {[HX_TYPE_Q8_0] = gemm_q8_0_f32};
