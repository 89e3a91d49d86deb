/* AVX2 + FMA + F16C kernels.  Compiled with those instruction sets; run
 * only after hx_cpu_simd_max() says the CPU and OS support them.
 *
 * Dequantization gives the scalar reference's bits: same integer quants,
 * converted exactly, multiplied by the same float scale, min subtracted
 * with a separate instruction (never fused).  Dot products sum exact
 * integer block sums, scaled in float lanes: they differ from the scalar
 * sums only in the order of float additions.
 *
 * The Q8_0 x Q8_0 dot flips activation signs (maddubs takes one unsigned
 * operand), so activation quants must lie in -127..127, as
 * quantize_row makes them.
 *
 * The GEMM tiles (prompts) of the plain types, Q8_0 and the K-quants take
 * two activation rows per pass, as many as sixteen ymm registers hold
 * next to the unpacked weights; wider tiles are passes of two.  Those of
 * the other 32-element types narrow the four rows' sums into one vector
 * per activation row and take all four in one pass.  vec_dot4 is a tile
 * with one column: what a decode step's matmul runs. */
#include <immintrin.h>

#include "kernels_cpu/quant_impl.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

static inline float h2f(const uint8_t *p) { return _cvtsh_ss(hx_ld16(p)); }

static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 8 bytes at p, zero-extended, as floats. */
static inline __m256 u8x8_ps(const __m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)); }

/* 32 quants [low nibbles | high nibbles] of 16 packed bytes. */
static inline __m256i nibbles32(const uint8_t *p)
{
    const __m128i x = _mm_loadu_si128((const __m128i *)p);
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(x, 4), x);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

/* 0x10 in byte j where bit j of qh is set (the Q5 fifth bits). */
static inline __m256i q5_high(uint32_t qh)
{
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32((int)qh),
        _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

/* Sum over pairs of u8 * s8 products into 8 int32 lanes. */
static inline __m256i dot_u8s8(__m256i u, __m256i s)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* Writes 32 floats (q - off) * d from 32 unsigned byte quants. */
static inline void store32_offset(float *y, __m256i q, int off, float d)
{
    const __m256 vd = _mm256_set1_ps(d);
    const __m256i vo = _mm256_set1_epi32(off);
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    const __m128i part[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int k = 0; k < 4; k++) {
        const __m256i v = _mm256_sub_epi32(_mm256_cvtepu8_epi32(part[k]), vo);
        _mm256_storeu_ps(y + 8 * k, _mm256_mul_ps(_mm256_cvtepi32_ps(v), vd));
    }
}

/* Writes 32 floats q * d + m (Q4_1/Q5_1 order: multiply, then add). */
static inline void store32_affine(float *y, __m256i q, float d, float m)
{
    const __m256 vd = _mm256_set1_ps(d), vm = _mm256_set1_ps(m);
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    const __m128i part[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int k = 0; k < 4; k++)
        _mm256_storeu_ps(y + 8 * k, _mm256_add_ps(_mm256_mul_ps(u8x8_ps(part[k]), vd), vm));
}

/* Writes 32 floats d * q - m (the K-quants' order). */
static inline void store32_kq(float *y, __m256i q, float d, float m)
{
    const __m256 vd = _mm256_set1_ps(d), vm = _mm256_set1_ps(m);
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    const __m128i part[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int k = 0; k < 4; k++)
        _mm256_storeu_ps(y + 8 * k, _mm256_sub_ps(_mm256_mul_ps(vd, u8x8_ps(part[k])), vm));
}

/* ---- plain types -------------------------------------------------------- */

static void dequant_f16(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + 2 * i))));
    for (; i < n; i++)
        y[i] = h2f(x + 2 * i);
}

static void dequant_bf16(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + 2 * i)));
        _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
    for (; i < n; i++)
        y[i] = hx_bf16_to_fp32(hx_ld16(x + 2 * i));
}

static void quant_f16(const float *x, void *vy, int64_t n)
{
    uint8_t *y = vy;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + 2 * i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) {
        const uint16_t h = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
        memcpy(y + 2 * i, &h, 2);
    }
}

/* ---- activation quantizers (the scalar ones' bits, for finite input) ---- */

static inline float hmax8(__m256 v)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline int hsum8i(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* 32 int32 (four vectors, in order) to 32 saturated int8 in order. */
static inline __m256i pack32(const __m256i q[4])
{
    const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* Q8_0 / Q8_1: d = amax/127, q = round half away from zero (as roundf). */
static inline void quant8(const float *x, uint8_t *y, int64_t n, const int WITH_SUM)
{
    const size_t B = WITH_SUM ? sizeof(hx_block_q8_1) : sizeof(hx_block_q8_0);
    const size_t QS = WITH_SUM ? offsetof(hx_block_q8_1, qs) : offsetof(hx_block_q8_0, qs);
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t b = 0; b < n / HX_QK; b++, x += HX_QK, y += B) {
        __m256 v[4], m = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(x + 8 * k);
            m = _mm256_max_ps(m, _mm256_and_ps(v[k], absm));
        }
        const float d = hmax8(m) / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
        const uint16_t dh = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        memcpy(y, &dh, 2);
        __m256i q[4], sum = _mm256_setzero_si256();
        for (int k = 0; k < 4; k++) {
            const __m256 t = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v[k], _mm256_set1_ps(id)), _mm256_set1_ps(-127.0f)),
                                           _mm256_set1_ps(127.0f));
            __m256i i = _mm256_cvttps_epi32(t);
            const __m256 f = _mm256_sub_ps(t, _mm256_cvtepi32_ps(i)); /* exact */
            /* comparison masks are -1: subtracting steps up, adding steps down */
            i = _mm256_sub_epi32(i, _mm256_castps_si256(_mm256_cmp_ps(f, _mm256_set1_ps(0.5f), _CMP_GE_OQ)));
            i = _mm256_add_epi32(i, _mm256_castps_si256(_mm256_cmp_ps(f, _mm256_set1_ps(-0.5f), _CMP_LE_OQ)));
            q[k] = i;
            sum = _mm256_add_epi32(sum, i);
        }
        _mm256_storeu_si256((__m256i *)(y + QS), pack32(q));
        if (WITH_SUM) {
            const uint16_t sh = _cvtss_sh((float)hsum8i(sum) * d, _MM_FROUND_TO_NEAREST_INT);
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
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t b = 0; b < n / HX_QK_K; b++, x += HX_QK_K, y += sizeof(hx_block_q8_K)) {
        __m256 m = _mm256_setzero_ps();
        for (int k = 0; k < 32; k++)
            m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + 8 * k), absm));
        const float amax = hmax8(m);
        float d = 0;
        int16_t bsums[16] = {0};
        if (amax == 0) {
            memset(y + offsetof(hx_block_q8_K, qs), 0, HX_QK_K);
        } else {
            int first = 0;
            for (int k = 0; k < 32; k++) {
                const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + 8 * k), absm);
                const int e = _mm256_movemask_ps(_mm256_cmp_ps(a, _mm256_set1_ps(amax), _CMP_EQ_OQ));
                if (e) {
                    first = 8 * k + __builtin_ctz((unsigned)e);
                    break;
                }
            }
            const __m256 is = _mm256_set1_ps(-127.0f / x[first]);
            for (int g = 0; g < 8; g++) { /* 32 quants a step */
                __m256i q[4];
                for (int k = 0; k < 4; k++) /* the default rounding mode rounds to nearest even */
                    q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 32 * g + 8 * k), is));
                const __m256i p = pack32(q); /* saturates to -128..127 as the scalar clamp */
                _mm256_storeu_si256((__m256i *)(y + offsetof(hx_block_q8_K, qs) + 32 * g), p);
                /* sums of the stored (saturated) quants, 16 a group */
                const __m256i w = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(p)), _mm256_set1_epi16(1));
                const __m256i u = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(p, 1)), _mm256_set1_epi16(1));
                bsums[2 * g] = (int16_t)hsum8i(w);
                bsums[2 * g + 1] = (int16_t)hsum8i(u);
            }
            d = 1.0f / (-127.0f / x[first]);
        }
        memcpy(y + offsetof(hx_block_q8_K, d), &d, sizeof d);
        memcpy(y + offsetof(hx_block_q8_K, bsums), bsums, sizeof bsums);
    }
}

/* Eight elements of a plain weight row as floats: F32 as stored, F16
 * through F16C, BF16 by a 16-bit shift (exact). */
static inline __attribute__((always_inline)) __m256 plain8(const uint8_t *p, const int T)
{
    if (T == HX_TYPE_F32)
        return _mm256_loadu_ps((const float *)(const void *)p);
    const __m128i h = _mm_loadu_si128((const __m128i *)p);
    if (T == HX_TYPE_F16)
        return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

static inline __attribute__((always_inline)) float plain1(const uint8_t *p, const int T)
{
    return T == HX_TYPE_F32 ? hx_ldf(p) : T == HX_TYPE_F16 ? h2f(p) : hx_bf16_to_fp32(hx_ld16(p));
}

/* Where element i (a multiple of 8) of a row of type T starts. */
static inline __attribute__((always_inline)) size_t off_of(int64_t i, const int T)
{
    return T == HX_TYPE_Q8_0 ? ((size_t)i / HX_QK) * sizeof(hx_block_q8_0) + 2 + ((size_t)i % HX_QK)
                             : (size_t)((T == HX_TYPE_F32 ? 4 : 2) * i);
}

/* Eight elements of a row from element i (a multiple of 8) as floats:
 * plain types by their width; a Q8_0 block's bytes times its scale,
 * exact in F32 (8 bits times an 11-bit significand), so a Q8_0 row meets
 * F32 activations in the F32 tile with its dequantized row's bits
 * (hx_quant_ops.gemm_f32_act). */
static inline __attribute__((always_inline)) __m256 plain8_at(const uint8_t *row, int64_t i, const int T)
{
    if (T != HX_TYPE_Q8_0)
        return plain8(row + (T == HX_TYPE_F32 ? 4 : 2) * i, T);
    const uint8_t *b = row + ((size_t)i / HX_QK) * sizeof(hx_block_q8_0);
    const __m128i q = _mm_loadl_epi64((const __m128i *)(const void *)(b + 2 + (size_t)i % HX_QK));
    const __m256 d = _mm256_cvtph_ps(_mm_set1_epi16((short)(b[0] | b[1] << 8)));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d);
}

/* Element-wise products summed in four accumulators of eight lanes; T is
 * the weights' type, E its bytes per element. */
#define PLAIN_DOT(name, T, E)                                                                         \
    static void name(int64_t n, float *s, const void *vx, const void *vy)                             \
    {                                                                                                 \
        const uint8_t *x = vx;                                                                        \
        const float *y = vy;                                                                          \
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),               \
                         _mm256_setzero_ps()};                                                        \
        int64_t i = 0;                                                                                \
        for (; i + 32 <= n; i += 32) {                                                                \
            _mm_prefetch((const char *)(x + HX_QUANT_PREFETCH + (E) * i), _MM_HINT_T0);               \
            if ((E) == 4)                                                                             \
                _mm_prefetch((const char *)(x + HX_QUANT_PREFETCH + 64 + (E) * i), _MM_HINT_T0);      \
            for (int k = 0; k < 4; k++)                                                               \
                acc[k] = _mm256_fmadd_ps(plain8(x + (E) * (i + 8 * k), T), _mm256_loadu_ps(y + i + 8 * k), acc[k]); \
        }                                                                                             \
        for (; i + 8 <= n; i += 8)                                                                    \
            acc[0] = _mm256_fmadd_ps(plain8(x + (E) * i, T), _mm256_loadu_ps(y + i), acc[0]);         \
        float sum = hsum8(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]))); \
        for (; i < n; i++)                                                                            \
            sum += plain1(x + (E) * i, T) * y[i];                                                     \
        *s = sum;                                                                                     \
    }

PLAIN_DOT(dot_f32, HX_TYPE_F32, 4)
PLAIN_DOT(dot_f16, HX_TYPE_F16, 2)
PLAIN_DOT(dot_bf16, HX_TYPE_BF16, 2)

/* ---- 32-element blocks -------------------------------------------------- */

static void dequant_q4_0(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / HX_QK; i++, x += sizeof(hx_block_q4_0), y += HX_QK)
        store32_offset(y, nibbles32(x + offsetof(hx_block_q4_0, qs)), 8, h2f(x));
}

static void dequant_q4_1(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / HX_QK; i++, x += sizeof(hx_block_q4_1), y += HX_QK)
        store32_affine(y, nibbles32(x + offsetof(hx_block_q4_1, qs)), h2f(x), h2f(x + 2));
}

static void dequant_q5_0(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / HX_QK; i++, x += sizeof(hx_block_q5_0), y += HX_QK) {
        const __m256i q = _mm256_or_si256(nibbles32(x + offsetof(hx_block_q5_0, qs)),
                                          q5_high(hx_ld32(x + offsetof(hx_block_q5_0, qh))));
        store32_offset(y, q, 16, h2f(x));
    }
}

static void dequant_q5_1(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / HX_QK; i++, x += sizeof(hx_block_q5_1), y += HX_QK) {
        const __m256i q = _mm256_or_si256(nibbles32(x + offsetof(hx_block_q5_1, qs)),
                                          q5_high(hx_ld32(x + offsetof(hx_block_q5_1, qh))));
        store32_affine(y, q, h2f(x), h2f(x + 2));
    }
}

/* Writes 32 floats (float)q * d from 32 signed byte quants. */
static inline void store32_s8(float *y, const uint8_t *q, float d)
{
    const __m256 vd = _mm256_set1_ps(d);
    for (int k = 0; k < 4; k++) {
        const __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + 8 * k)));
        _mm256_storeu_ps(y + 8 * k, _mm256_mul_ps(_mm256_cvtepi32_ps(v), vd));
    }
}

static void dequant_q8_0(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / HX_QK; i++, x += sizeof(hx_block_q8_0), y += HX_QK)
        store32_s8(y, x + offsetof(hx_block_q8_0, qs), h2f(x));
}

static void dequant_q8_1(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / HX_QK; i++, x += sizeof(hx_block_q8_1), y += HX_QK)
        store32_s8(y, x + offsetof(hx_block_q8_1, qs), h2f(x));
}

static void dequant_q8_K(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += sizeof(hx_block_q8_K), y += HX_QK_K)
        for (int k = 0; k < 8; k++)
            store32_s8(y + 32 * k, x + offsetof(hx_block_q8_K, qs) + 32 * k, hx_ldf(x));
}

/* One block's contribution, added to acc: the exact integer dot of the
 * quants, as floats, times the product of the two scales. */
static inline __m256 blk_q4_0(const uint8_t *x, const uint8_t *y, __m256 acc)
{
    const __m256i q = nibbles32(x + offsetof(hx_block_q4_0, qs));
    const __m256i a = _mm256_loadu_si256((const __m256i *)(y + offsetof(hx_block_q8_0, qs)));
    /* (q - 8)·a as q·a - 8·a in 16-bit pair sums: no sign tricks */
    const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, a), _mm256_maddubs_epi16(_mm256_set1_epi8(8), a));
    const __m256 v = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, _mm256_set1_epi16(1)));
    return _mm256_fmadd_ps(v, _mm256_set1_ps(h2f(x) * h2f(y)), acc);
}

static inline __m256 blk_q5_0(const uint8_t *x, const uint8_t *y, __m256 acc)
{
    const __m256i q = _mm256_or_si256(nibbles32(x + offsetof(hx_block_q5_0, qs)),
                                      q5_high(hx_ld32(x + offsetof(hx_block_q5_0, qh))));
    const __m256i a = _mm256_loadu_si256((const __m256i *)(y + offsetof(hx_block_q8_0, qs)));
    const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, a), _mm256_maddubs_epi16(_mm256_set1_epi8(16), a));
    const __m256 v = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, _mm256_set1_epi16(1)));
    return _mm256_fmadd_ps(v, _mm256_set1_ps(h2f(x) * h2f(y)), acc);
}

static inline __m256 blk_q8_0(const uint8_t *x, const uint8_t *y, __m256 acc)
{
    const __m256i w = _mm256_loadu_si256((const __m256i *)(x + offsetof(hx_block_q8_0, qs)));
    const __m256i a = _mm256_loadu_si256((const __m256i *)(y + offsetof(hx_block_q8_0, qs)));
    /* |w| is the unsigned operand, a takes w's sign */
    const __m256 v = _mm256_cvtepi32_ps(dot_u8s8(_mm256_abs_epi8(w), _mm256_sign_epi8(a, w)));
    return _mm256_fmadd_ps(v, _mm256_set1_ps(h2f(x) * h2f(y)), acc);
}

/* Q4_1/Q5_1 against Q8_1: the min's share, m * s, is added in the caller. */
static inline __m256 blk_q4_1(const uint8_t *x, const uint8_t *y, __m256 acc)
{
    const __m256i q = nibbles32(x + offsetof(hx_block_q4_1, qs));
    const __m256i a = _mm256_loadu_si256((const __m256i *)(y + offsetof(hx_block_q8_1, qs)));
    const __m256 v = _mm256_cvtepi32_ps(dot_u8s8(q, a));
    return _mm256_fmadd_ps(v, _mm256_set1_ps(h2f(x) * h2f(y)), acc);
}

static inline __m256 blk_q5_1(const uint8_t *x, const uint8_t *y, __m256 acc)
{
    const __m256i q = _mm256_or_si256(nibbles32(x + offsetof(hx_block_q5_1, qs)),
                                      q5_high(hx_ld32(x + offsetof(hx_block_q5_1, qh))));
    const __m256i a = _mm256_loadu_si256((const __m256i *)(y + offsetof(hx_block_q8_1, qs)));
    const __m256 v = _mm256_cvtepi32_ps(dot_u8s8(q, a));
    return _mm256_fmadd_ps(v, _mm256_set1_ps(h2f(x) * h2f(y)), acc);
}

/* A dot over 32-blocks, two blocks a step into two accumulators so the
 * multiply-add latency overlaps; MINS adds m_x * s_y per block (Q8_1). */
#define DOT32(name, BLK, BX, BY, MINS)                                           \
    static void name(int64_t n, float *s, const void *vx, const void *vy)        \
    {                                                                            \
        const uint8_t *x = vx, *y = vy;                                          \
        const int64_t nb = n / HX_QK;                                            \
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();           \
        float mins = 0;                                                          \
        int64_t i = 0;                                                           \
        for (; i + 2 <= nb; i += 2, x += 2 * (BX), y += 2 * (BY)) {              \
            _mm_prefetch((const char *)(x + HX_QUANT_PREFETCH), _MM_HINT_T0);    \
            acc0 = BLK(x, y, acc0);                                              \
            acc1 = BLK(x + (BX), y + (BY), acc1);                                \
            if (MINS)                                                            \
                mins += h2f(x + 2) * h2f(y + 2) + h2f(x + (BX) + 2) * h2f(y + (BY) + 2); \
        }                                                                        \
        if (i < nb) {                                                            \
            acc0 = BLK(x, y, acc0);                                              \
            if (MINS)                                                            \
                mins += h2f(x + 2) * h2f(y + 2);                                 \
        }                                                                        \
        *s = hsum8(_mm256_add_ps(acc0, acc1)) + mins;                            \
    }

DOT32(dot_q4_0, blk_q4_0, sizeof(hx_block_q4_0), sizeof(hx_block_q8_0), 0)
DOT32(dot_q5_0, blk_q5_0, sizeof(hx_block_q5_0), sizeof(hx_block_q8_0), 0)
DOT32(dot_q8_0, blk_q8_0, sizeof(hx_block_q8_0), sizeof(hx_block_q8_0), 0)
DOT32(dot_q4_1, blk_q4_1, sizeof(hx_block_q4_1), sizeof(hx_block_q8_1), 1)
DOT32(dot_q5_1, blk_q5_1, sizeof(hx_block_q5_1), sizeof(hx_block_q8_1), 1)

/* ---- K-quants ----------------------------------------------------------- */

static void dequant_q4_K(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    const __m256i low = _mm256_set1_epi8(0x0f);
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += sizeof(hx_block_q4_K), y += HX_QK_K) {
        const float d = h2f(x), dmin = h2f(x + 2);
        uint64_t sc, m;
        hx_quant_k4_unpack(x + offsetof(hx_block_q4_K, scales), &sc, &m);
        for (int c = 0; c < 4; c++) {
            const __m256i b = _mm256_loadu_si256((const __m256i *)(x + offsetof(hx_block_q4_K, qs) + 32 * c));
            for (int h = 0; h < 2; h++) {
                const int j = 2 * c + h;
                const __m256i q = _mm256_and_si256(h ? _mm256_srli_epi16(b, 4) : b, low);
                store32_kq(y + 32 * j, q, d * (float)(uint8_t)(sc >> (8 * j)), dmin * (float)(uint8_t)(m >> (8 * j)));
            }
        }
    }
}

static void dequant_q5_K(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    const __m256i low = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += sizeof(hx_block_q5_K), y += HX_QK_K) {
        const float d = h2f(x), dmin = h2f(x + 2);
        uint64_t sc, m;
        hx_quant_k4_unpack(x + offsetof(hx_block_q5_K, scales), &sc, &m);
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(x + offsetof(hx_block_q5_K, qh)));
        for (int c = 0; c < 4; c++) {
            const __m256i b = _mm256_loadu_si256((const __m256i *)(x + offsetof(hx_block_q5_K, qs) + 32 * c));
            for (int h = 0; h < 2; h++) {
                const int j = 2 * c + h;
                const __m256i hb = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(j)), one);
                const __m256i q = _mm256_or_si256(_mm256_and_si256(h ? _mm256_srli_epi16(b, 4) : b, low),
                                                  _mm256_slli_epi16(hb, 4));
                store32_kq(y + 32 * j, q, d * (float)(uint8_t)(sc >> (8 * j)), dmin * (float)(uint8_t)(m >> (8 * j)));
            }
        }
    }
}

/* The four 32-quant groups (0..63) of half h of a Q6_K super-block. */
static inline void q6_groups(const uint8_t *x, int h, __m256i q[4])
{
    const __m256i low = _mm256_set1_epi8(0x0f), three = _mm256_set1_epi8(3);
    const __m256i l0 = _mm256_loadu_si256((const __m256i *)(x + offsetof(hx_block_q6_K, ql) + 64 * h));
    const __m256i l1 = _mm256_loadu_si256((const __m256i *)(x + offsetof(hx_block_q6_K, ql) + 64 * h + 32));
    const __m256i qh = _mm256_loadu_si256((const __m256i *)(x + offsetof(hx_block_q6_K, qh) + 32 * h));
    const __m256i lo[4] = {_mm256_and_si256(l0, low), _mm256_and_si256(l1, low),
                           _mm256_and_si256(_mm256_srli_epi16(l0, 4), low),
                           _mm256_and_si256(_mm256_srli_epi16(l1, 4), low)};
    for (int k = 0; k < 4; k++) {
        const __m256i hi = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * k)), three);
        q[k] = _mm256_or_si256(lo[k], _mm256_slli_epi16(hi, 4));
    }
}

static void dequant_q6_K(const void *vx, float *y, int64_t n)
{
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += sizeof(hx_block_q6_K), y += HX_QK_K) {
        const float d = h2f(x + offsetof(hx_block_q6_K, d));
        const int8_t *sc = (const int8_t *)(x + offsetof(hx_block_q6_K, scales));
        for (int h = 0; h < 2; h++) {
            __m256i q[4];
            q6_groups(x, h, q);
            for (int k = 0; k < 4; k++) {
                const int e = 128 * h + 32 * k; /* first element; sub-blocks e/16, e/16+1 */
                const __m128i lo = _mm256_castsi256_si128(q[k]), hi = _mm256_extracti128_si256(q[k], 1);
                const __m128i part[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
                for (int p = 0; p < 4; p++) {
                    const __m256 ds = _mm256_set1_ps(d * (float)sc[e / 16 + p / 2]);
                    const __m256i v = _mm256_sub_epi32(_mm256_cvtepu8_epi32(part[p]), _mm256_set1_epi32(32));
                    _mm256_storeu_ps(y + e + 8 * p, _mm256_mul_ps(ds, _mm256_cvtepi32_ps(v)));
                }
            }
        }
    }
}

/* 16-bit lanes of the sub-block scales: scale of sub-block j in every
 * word of the result (j = 0..7 of an 8-byte scale word). */
static inline __m256i k4_scale16(__m256i sc16, int j)
{
    const __m256i ctrl = _mm256_set1_epi16((short)((2 * j) | ((2 * j + 1) << 8)));
    return _mm256_shuffle_epi8(sc16, ctrl);
}

/* sum_j m[j] * (bsums[2j] + bsums[2j+1]) in 8 int32 lanes. */
static inline __m256i k4_min_lanes(const uint8_t *y, uint64_t m)
{
    const __m128i mb = _mm_cvtsi64_si128((long long)m);
    const __m256i m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mb, mb));
    const __m256i bs = _mm256_loadu_si256((const __m256i *)(y + offsetof(hx_block_q8_K, bsums)));
    return _mm256_madd_epi16(bs, m16);
}

static void dot_q4_K(int64_t n, float *s, const void *vx, const void *vy)
{
    const uint8_t *x = vx, *y = vy;
    const __m256i low = _mm256_set1_epi8(0x0f);
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += sizeof(hx_block_q4_K), y += sizeof(hx_block_q8_K)) {
        for (int k = 0; k < (int)sizeof(hx_block_q4_K); k += 64)
            _mm_prefetch((const char *)(x + HX_QUANT_PREFETCH + k), _MM_HINT_T0);
        uint64_t sc, m;
        hx_quant_k4_unpack(x + offsetof(hx_block_q4_K, scales), &sc, &m);
        const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc)));
        const int8_t *a = (const int8_t *)(y + offsetof(hx_block_q8_K, qs));
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            const __m256i b = _mm256_loadu_si256((const __m256i *)(x + offsetof(hx_block_q4_K, qs) + 32 * c));
            const __m256i qlo = _mm256_and_si256(b, low), qhi = _mm256_and_si256(_mm256_srli_epi16(b, 4), low);
            const __m256i plo = _mm256_maddubs_epi16(qlo, _mm256_loadu_si256((const __m256i *)(a + 64 * c)));
            const __m256i phi = _mm256_maddubs_epi16(qhi, _mm256_loadu_si256((const __m256i *)(a + 64 * c + 32)));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(plo, k4_scale16(sc16, 2 * c)));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(phi, k4_scale16(sc16, 2 * c + 1)));
        }
        const float dy = hx_ldf(y);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(dy * h2f(x)), acc);
        accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(k4_min_lanes(y, m)), _mm256_set1_ps(dy * h2f(x + 2)), accm);
    }
    *s = hsum8(_mm256_sub_ps(acc, accm));
}

static void dot_q5_K(int64_t n, float *s, const void *vx, const void *vy)
{
    const uint8_t *x = vx, *y = vy;
    const __m256i low = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += sizeof(hx_block_q5_K), y += sizeof(hx_block_q8_K)) {
        for (int k = 0; k < (int)sizeof(hx_block_q5_K); k += 64)
            _mm_prefetch((const char *)(x + HX_QUANT_PREFETCH + k), _MM_HINT_T0);
        uint64_t sc, m;
        hx_quant_k4_unpack(x + offsetof(hx_block_q5_K, scales), &sc, &m);
        const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc)));
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(x + offsetof(hx_block_q5_K, qh)));
        const int8_t *a = (const int8_t *)(y + offsetof(hx_block_q8_K, qs));
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            const __m256i b = _mm256_loadu_si256((const __m256i *)(x + offsetof(hx_block_q5_K, qs) + 32 * c));
            const __m256i hlo = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * c)), one);
            const __m256i hhi = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * c + 1)), one);
            const __m256i qlo = _mm256_or_si256(_mm256_and_si256(b, low), _mm256_slli_epi16(hlo, 4));
            const __m256i qhi =
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), low), _mm256_slli_epi16(hhi, 4));
            const __m256i plo = _mm256_maddubs_epi16(qlo, _mm256_loadu_si256((const __m256i *)(a + 64 * c)));
            const __m256i phi = _mm256_maddubs_epi16(qhi, _mm256_loadu_si256((const __m256i *)(a + 64 * c + 32)));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(plo, k4_scale16(sc16, 2 * c)));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(phi, k4_scale16(sc16, 2 * c + 1)));
        }
        const float dy = hx_ldf(y);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(dy * h2f(x)), acc);
        accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(k4_min_lanes(y, m)), _mm256_set1_ps(dy * h2f(x + 2)), accm);
    }
    *s = hsum8(_mm256_sub_ps(acc, accm));
}

static void dot_q6_K(int64_t n, float *s, const void *vx, const void *vy)
{
    const uint8_t *x = vx, *y = vy;
    __m256 acc = _mm256_setzero_ps();
    /* even sub-block scales to the low 128-bit lane, odd ones to the high */
    const __m128i split = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += sizeof(hx_block_q6_K), y += sizeof(hx_block_q8_K)) {
        for (int k = 0; k < (int)sizeof(hx_block_q6_K); k += 64)
            _mm_prefetch((const char *)(x + HX_QUANT_PREFETCH + k), _MM_HINT_T0);
        const __m128i scb = _mm_loadu_si128((const __m128i *)(x + offsetof(hx_block_q6_K, scales)));
        const __m256i sc_pairs = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scb, split));
        const int8_t *a = (const int8_t *)(y + offsetof(hx_block_q8_K, qs));
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i q[4];
            q6_groups(x, h, q);
            for (int k = 0; k < 4; k++) {
                const int p = 4 * h + k; /* sub-blocks 2p (low lane) and 2p+1 (high lane) */
                const __m256i scv = _mm256_shuffle_epi8(sc_pairs, _mm256_set1_epi16((short)((2 * p) | ((2 * p + 1) << 8))));
                const __m256i prod = _mm256_maddubs_epi16(q[k], _mm256_loadu_si256((const __m256i *)(a + 32 * p)));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(prod, scv));
            }
        }
        /* the quants' offset of 32: subtract 32 * sum_g sc[g] * bsums[g] */
        const __m256i sc16 = _mm256_cvtepi8_epi16(scb);
        const __m256i bs = _mm256_loadu_si256((const __m256i *)(y + offsetof(hx_block_q8_K, bsums)));
        isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(_mm256_madd_epi16(bs, sc16), 5));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(hx_ldf(y) * h2f(x + offsetof(hx_block_q6_K, d))),
                              acc);
    }
    *s = hsum8(acc);
}

/* ---- GEMM tiles (prompts) ------------------------------------------------ */

/* 4 K-quant weight rows x C (1 or 2) Q8_K activation rows, one super-block
 * at a time: each 32-quant run of a weight row is unpacked once, with its
 * sub-block scale words, for both activation rows (maddubs + madd, as
 * vec_dot, so the integer block sums are vec_dot's).  Sixteen ymm
 * registers hold two columns' sums and the unpacked run, not four
 * columns': wider tiles are made of passes of two.  KIND: 4 (Q4_K), 5
 * (Q5_K), 6 (Q6_K). */
static inline __attribute__((always_inline)) void gemm_k_cols(int64_t n, float *s, size_t ss, const uint8_t *x,
                                                              size_t bx, const uint8_t *y, size_t by, const int C,
                                                              const int KIND)
{
    const size_t B = KIND == 6 ? sizeof(hx_block_q6_K) : KIND == 5 ? sizeof(hx_block_q5_K) : sizeof(hx_block_q4_K);
    const size_t A = sizeof(hx_block_q8_K), AQ = offsetof(hx_block_q8_K, qs), AS = offsetof(hx_block_q8_K, bsums);
    const __m256i low = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
    const __m128i split = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    __m256 acc[4][2];
    #pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
        #pragma GCC unroll 4
        for (int c = 0; c < C; c++)
            acc[r][c] = _mm256_setzero_ps();
    const int RS = HX_TILE_ROWS(C);
    for (int r0 = 0; r0 < 4; r0 += RS) {
        for (int64_t i = 0; i < n / HX_QK_K; i++) {
            const uint8_t *yb[2] = {y + i * A, y + by + i * A};
            #pragma GCC unroll 4
            for (int r = r0; r < r0 + RS; r++) {
                const uint8_t *xb = x + r * bx + i * B;
                for (int k = 0; k < (int)B; k += 64)
                    _mm_prefetch(hx_tile_prefetch(xb + k, i * B + k, bx, RS), _MM_HINT_T0);
                __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
                __m256i mins;
                float d, dmin = 0;
                if (KIND == 6) {
                    const __m128i scb = _mm_loadu_si128((const __m128i *)(xb + offsetof(hx_block_q6_K, scales)));
                    const __m256i sc_pairs = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scb, split));
                    #pragma GCC unroll 4
                    for (int h = 0; h < 2; h++) {
                        __m256i q[4];
                        q6_groups(xb, h, q);
                        #pragma GCC unroll 4
                        for (int k = 0; k < 4; k++) {
                            const int p = 4 * h + k;
                            const __m256i scv =
                                _mm256_shuffle_epi8(sc_pairs, _mm256_set1_epi16((short)((2 * p) | ((2 * p + 1) << 8))));
                            #pragma GCC unroll 4
                            for (int c = 0; c < C; c++) {
                                const __m256i a = _mm256_loadu_si256((const __m256i *)(yb[c] + AQ + 32 * p));
                                isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(_mm256_maddubs_epi16(q[k], a), scv));
                            }
                        }
                    }
                    mins = _mm256_cvtepi8_epi16(scb);
                    d = h2f(xb + offsetof(hx_block_q6_K, d));
                } else {
                    const size_t qs = KIND == 5 ? offsetof(hx_block_q5_K, qs) : offsetof(hx_block_q4_K, qs);
                    uint64_t sc, m;
                    hx_quant_k4_unpack(xb + offsetof(hx_block_q4_K, scales), &sc, &m);
                    const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc)));
                    const __m128i mb = _mm_cvtsi64_si128((long long)m);
                    mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mb, mb));
                    const __m256i qh =
                        KIND == 5 ? _mm256_loadu_si256((const __m256i *)(xb + offsetof(hx_block_q5_K, qh))) : low;
                    #pragma GCC unroll 8
                    for (int j = 0; j < 8; j++) { /* sub-block j: 32 quants, low (even j) or high nibbles */
                        const __m256i b = _mm256_loadu_si256((const __m256i *)(xb + qs + 32 * (j / 2)));
                        __m256i q = _mm256_and_si256(j % 2 ? _mm256_srli_epi16(b, 4) : b, low);
                        if (KIND == 5)
                            q = _mm256_or_si256(q, _mm256_slli_epi16(
                                                       _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(j)), one), 4));
                        const __m256i scv = k4_scale16(sc16, j);
                        #pragma GCC unroll 4
                        for (int c = 0; c < C; c++) {
                            const __m256i a = _mm256_loadu_si256((const __m256i *)(yb[c] + AQ + 32 * j));
                            isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(_mm256_maddubs_epi16(q, a), scv));
                        }
                    }
                    d = h2f(xb);
                    dmin = h2f(xb + 2);
                }
                #pragma GCC unroll 4
                for (int c = 0; c < C; c++) {
                    const __m256i bs = _mm256_loadu_si256((const __m256i *)(yb[c] + AS));
                    const float dy = hx_ldf(yb[c]);
                    if (KIND == 6) { /* the quants' offset of 32 */
                        isum[c] = _mm256_sub_epi32(isum[c], _mm256_slli_epi32(_mm256_madd_epi16(bs, mins), 5));
                        acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[c]), _mm256_set1_ps(dy * d), acc[r][c]);
                    } else {
                        acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[c]), _mm256_set1_ps(dy * d), acc[r][c]);
                        acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(bs, mins)),
                                                    _mm256_set1_ps(-(dy * dmin)), acc[r][c]);
                    }
                }
            }
        }
    }
    #pragma GCC unroll 4
    for (int c = 0; c < C; c++)
        #pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
            s[c * ss + r] = hsum8(acc[r][c]);
}

/* A gemm entry running its columns two at a time (16 registers hold the
 * accumulators of a 4 x 2 tile); `arg` selects the type. */
#define GEMM_PAIRS(name, cols, arg)                                                                              \
    static void name(int64_t n, int ncols, float *s, size_t ss, const void *x, size_t bx, const void *y, size_t by) \
    {                                                                                                             \
        int c = 0;                                                                                                \
        for (; c + 2 <= ncols; c += 2)                                                                            \
            cols(n, s + c * ss, ss, x, bx, (const uint8_t *)y + c * by, by, 2, arg);                              \
        if (c < ncols)                                                                                            \
            cols(n, s + c * ss, ss, x, bx, (const uint8_t *)y + c * by, by, 1, arg);                              \
    }

GEMM_PAIRS(gemm_q4_K, gemm_k_cols, 4)
GEMM_PAIRS(gemm_q5_K, gemm_k_cols, 5)
GEMM_PAIRS(gemm_q6_K, gemm_k_cols, 6)

/* The sums of a, b, c, d's lanes as four floats, one transposing tree. */
static inline __m128 hsum4x8(__m256 a, __m256 b, __m256 c, __m256 d)
{
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

/* Eight elements of the tile's four rows at element i meet the C
 * activation rows: each weight vector converted once for all C, one
 * accumulator per output.  With `keep`, each converted vector is also
 * stored there (row r at keep + r*n). */
static inline __attribute__((always_inline)) void plain_step(__m256 acc[4][3], const uint8_t *x, size_t bx,
                                                             const uint8_t *y, size_t by, int64_t i, const int C,
                                                             const int T, float *keep, int64_t n)
{
    __m256 a[3];
#pragma GCC unroll 3
    for (int c = 0; c < C; c++)
        a[c] = _mm256_loadu_ps((const float *)(const void *)(y + c * by) + i);
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        const __m256 w = plain8_at(x + r * bx, i, T);
        if (keep)
            _mm256_storeu_ps(keep + r * n + i, w);
#pragma GCC unroll 3
        for (int c = 0; c < C; c++)
            acc[r][c] = _mm256_fmadd_ps(w, a[c], acc[r][c]);
    }
}

/* One plain weight row against one f32 activation row (a decode step),
 * one FMA chain over its eights in order, as the tile sums the row, read
 * as one stream without a software prefetch: see the AVX-512 plain_row,
 * whose measurements hold here too with two threads.  With one, the
 * chain is the limit: eight lanes per FMA latency, about 13.6 GB/s at
 * 3.4 GHz, under one Zen 4 core's 25 (small F16 tg64, one thread: 86
 * t/s, llama.cpp's four chains per row 128; four rows interleaved 59).
 * More chains per row would change the tile's sums, and at AVX2 its 16
 * registers hold no second set of accumulators.  Elements past the last
 * whole eight are left to the caller, as in the tile. */
static inline __attribute__((always_inline)) __m256 plain_row(const uint8_t *x, const float *y, int64_t n8,
                                                              const int T)
{
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n8; i += 8)
        acc = _mm256_fmadd_ps(plain8_at(x, i, T), _mm256_loadu_ps(y + i), acc);
    return acc;
}

/* 4 plain (F32, F16, BF16) weight rows x C (1 to 3) f32 activation rows:
 * each weight vector is converted once for both activation rows, and
 * with two columns eight accumulators are as many FMA chains as two FMA
 * units with a latency of four keep busy.  One column streamed from
 * memory (a decode step; PF without keep) reads the rows one at a time
 * (plain_row) where hx_quant_decode_rows_alone says so.  Whole
 * cache lines of the rows run as one unrolled pass after one prefetch
 * per row, free of per-step tests; the eights past the last whole line
 * follow, and elements past the last whole eight are added in scalar
 * code.  Each output's lanes are summed in the same order at any width,
 * and the same for F16 or BF16 rows as for those rows converted to F32
 * first (`keep`: they are also left there, row r at keep + r*n). */
static inline __attribute__((always_inline)) void gemm_plain_cols(int64_t n, float *s, size_t ss, const uint8_t *x,
                                                                  size_t bx, const uint8_t *y, size_t by, const int C,
                                                                  const int T, float *keep, const int PF)
{
    const int E = T == HX_TYPE_F32 ? 4 : 2; /* bytes per weight (Q8_0: its quants; whole blocks, no tail) */
    const int64_t L = T == HX_TYPE_Q8_0 ? 64 : 64 / E; /* weights per cache line: 16 or 32; Q8_0's 2 blocks */
    __m256 acc[4][3];
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
#pragma GCC unroll 3
        for (int c = 0; c < C; c++)
            acc[r][c] = _mm256_setzero_ps();
    const int64_t n8 = n / 8 * 8, nl = n / L * L;
    int64_t i = 0;
    if (C == 1 && PF && !keep && hx_quant_decode_rows_alone()) {
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
            acc[r][0] = plain_row(x + r * bx, (const float *)(const void *)y, n8, T);
        i = n8;
    }
    for (; i < nl; i += L) {
        if (T == HX_TYPE_Q8_0 && ((uint64_t)i & 63)) /* whole blocks: each block's scale read once */
            __builtin_unreachable();
#pragma GCC unroll 4
        for (int r = 0; PF && r < 4; r++)
            _mm_prefetch(hx_tile_prefetch(x + r * bx + off_of(i, T), off_of(i, T), bx, 4), _MM_HINT_T0);
#pragma GCC unroll 8
        for (int64_t k = 0; k < L; k += 8)
            plain_step(acc, x, bx, y, by, i + k, C, T, keep, n);
    }
    for (; i < n8; i += 8) {
        if (PF && !(i & (L - 1)))
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++)
                _mm_prefetch(hx_tile_prefetch(x + r * bx + off_of(i, T), off_of(i, T), bx, 4), _MM_HINT_T0);
        plain_step(acc, x, bx, y, by, i, C, T, keep, n);
    }
    for (int64_t k = n8; keep && k < n; k++)
        for (int r = 0; r < 4; r++)
            keep[r * n + k] = plain1(x + r * bx + E * k, T);
#pragma GCC unroll 3
    for (int c = 0; c < C && n8 == n; c++)
        _mm_storeu_ps(s + c * ss, hsum4x8(acc[0][c], acc[1][c], acc[2][c], acc[3][c]));
#pragma GCC unroll 3
    for (int c = 0; c < C && n8 < n; c++) {
        float t[4];
        _mm_storeu_ps(t, hsum4x8(acc[0][c], acc[1][c], acc[2][c], acc[3][c]));
        const float *yc = (const float *)(const void *)(y + c * by);
        for (int r = 0; r < 4; r++) {
            for (int64_t k = n8; k < n; k++)
                t[r] += plain1(x + r * bx + E * k, T) * yc[k];
            s[c * ss + r] = t[r];
        }
    }
}

/* Plain rows run three columns at a time: twelve accumulators, three
 * activation vectors and the weight vector fill the 16 registers, and
 * each weight vector loaded from L2 meets 12 FMAs where a pair's meets 8.
 * Callers hand it columns in threes (hx_quant_ops.gemm_cols).  F16 and
 * BF16 rows are converted as they are used; with `keep` (a prompt's first
 * token tile over a block of F16 or BF16 rows, hx_quant_ops.gemm_keep_f32)
 * they are also left there, converted, for the block's other tiles. */
#define PLAIN_GEMM(name, T, keep)                                                                                 \
    static void name(int64_t n, int ncols, float *s, size_t ss, const void *x, size_t bx, const void *y, size_t by, \
                     float *k)                                                                                    \
    {                                                                                                             \
        (void)k;                                                                                                  \
        int c = 0;                                                                                                \
        for (; c + 3 <= ncols; c += 3)                                                                            \
            gemm_plain_cols(n, s + c * ss, ss, x, bx, (const uint8_t *)y + c * by, by, 3, T, c ? NULL : keep, 1); \
        if (ncols - c == 2)                                                                                       \
            gemm_plain_cols(n, s + c * ss, ss, x, bx, (const uint8_t *)y + c * by, by, 2, T, c ? NULL : keep, 1); \
        else if (ncols - c == 1)                                                                                  \
            gemm_plain_cols(n, s + c * ss, ss, x, bx, (const uint8_t *)y + c * by, by, 1, T, c ? NULL : keep, 1); \
    }
PLAIN_GEMM(gemm_f32_cols, HX_TYPE_F32, NULL)
PLAIN_GEMM(gemm_f16_cols, HX_TYPE_F16, NULL)
PLAIN_GEMM(gemm_bf16_cols, HX_TYPE_BF16, NULL)
PLAIN_GEMM(gemm_keep_f16, HX_TYPE_F16, k)
PLAIN_GEMM(gemm_keep_bf16, HX_TYPE_BF16, k)
/* Q8_0 rows (a KV cache's keys) x F32 activations (its queries), each
 * weight vector converted as it is used (hx_quant_ops.gemm_f32_act). */
PLAIN_GEMM(gemm_q8_0_f32_cols, HX_TYPE_Q8_0, NULL)

HX_QUANT_GEMM_OF_KEEP(gemm_f32, gemm_f32_cols)
HX_QUANT_GEMM_OF_KEEP(gemm_f16, gemm_f16_cols)
HX_QUANT_GEMM_OF_KEEP(gemm_bf16, gemm_bf16_cols)
HX_QUANT_GEMM_OF_KEEP(gemm_q8_0_f32, gemm_q8_0_f32_cols)

/* hx_quant_gemm_f32_block and hx_quant_ops.gemm_f32_block at AVX2: the
 * plain tiles of rows of type T (F32, F16, BF16 as gemm runs them; Q8_0
 * as gemm_q8_0_f32), four rows by three columns, over the whole block in
 * one call and without the prefetches.  A last one to three rows each
 * run alone (stride 0, the first of four equal outputs), as a lone row's
 * tile does. */
static inline __attribute__((always_inline)) void block_cols_of(int64_t n, int64_t cols, float *s, size_t ss,
                                                                const uint8_t *x, size_t bx, const uint8_t *y,
                                                                size_t by, const int T)
{
    int64_t c = 0;
    for (; c + 3 <= cols; c += 3)
        gemm_plain_cols(n, s + c * ss, ss, x, bx, y + c * by, by, 3, T, NULL, 0);
    if (cols - c == 2)
        gemm_plain_cols(n, s + c * ss, ss, x, bx, y + c * by, by, 2, T, NULL, 0);
    else if (cols - c == 1)
        gemm_plain_cols(n, s + c * ss, ss, x, bx, y + c * by, by, 1, T, NULL, 0);
}

HX_QUANT_GEMM_F32_BLOCKS(hx_quant_avx2_gemm_f32_block, hx_quant_avx2_gemm_f32_blocks, block_cols_of, 3)

/* 4 weight rows of a 4/5-bit type (Q4_0, Q4_1, Q5_0, Q5_1) x C Q8_0/Q8_1
 * activation rows, a block at a time, every column in one pass: each
 * weight block is unpacked once and each activation block loaded once.
 * A (row, column) pair's products, summed in 16-bit pairs by maddubs (the
 * zero point OFF as q·a - OFF·a, as vec_dot), are narrowed together with
 * the other three rows' by madd, packs, madd, packs, madd into one vector
 * per column holding the four rows' sums of each half block; an int16
 * step holds at most 8 products, |sum| <= 8·31·127 = 31496, so nothing
 * saturates.  A column then pays one conversion, one multiply and one FMA
 * per block for all four rows (two FMAs with the Q8_1 min term), and
 * needs one accumulator. */
static inline __attribute__((always_inline)) void gemm_q45_tile(int64_t n, float *s, size_t ss, const uint8_t *x,
                                                                size_t bx, const uint8_t *y, size_t by, const int C,
                                                                const int T)
{
    const int MINS = T == HX_TYPE_Q4_1 || T == HX_TYPE_Q5_1;
    const int OFF = T == HX_TYPE_Q4_0 ? 8 : T == HX_TYPE_Q5_0 ? 16 : 0;
    const size_t B = T == HX_TYPE_Q4_0   ? sizeof(hx_block_q4_0)
                     : T == HX_TYPE_Q4_1 ? sizeof(hx_block_q4_1)
                     : T == HX_TYPE_Q5_0 ? sizeof(hx_block_q5_0)
                                         : sizeof(hx_block_q5_1);
    const size_t QS = T == HX_TYPE_Q4_0   ? offsetof(hx_block_q4_0, qs)
                      : T == HX_TYPE_Q4_1 ? offsetof(hx_block_q4_1, qs)
                      : T == HX_TYPE_Q5_0 ? offsetof(hx_block_q5_0, qs)
                                          : offsetof(hx_block_q5_1, qs);
    const int QH = T == HX_TYPE_Q5_0 ? (int)offsetof(hx_block_q5_0, qh)
                   : T == HX_TYPE_Q5_1 ? (int)offsetof(hx_block_q5_1, qh)
                                       : -1;
    const size_t A = MINS ? sizeof(hx_block_q8_1) : sizeof(hx_block_q8_0);
    const size_t AQ = MINS ? offsetof(hx_block_q8_1, qs) : offsetof(hx_block_q8_0, qs);
    const __m256i ones = _mm256_set1_epi16(1);
    /* the rows' [d, m] pairs, converted together, to [d0..d3 | d0..d3] and [m0..m3 | m0..m3] */
    const __m256i pick_d = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6), pick_m = _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7);
    __m256 acc[HX_GEMM_COLS];
#pragma GCC unroll 4
    for (int c = 0; c < C; c++)
        acc[c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / HX_QK; i++) {
        __m256i w[4];
        int f[4];
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const uint8_t *xb = x + r * bx + i * B;
            if (!(i & 1))
                _mm_prefetch(hx_tile_prefetch(xb, i * B, bx, 4), _MM_HINT_T0);
            w[r] = nibbles32(xb + QS);
            if (QH >= 0)
                w[r] = _mm256_or_si256(w[r], q5_high(hx_ld32(xb + QH)));
            f[r] = (int)hx_ld32(xb); /* d (and m) */
        }
        const __m256 dm = _mm256_cvtph_ps(_mm_setr_epi32(f[0], f[1], f[2], f[3]));
        const __m256 dx = _mm256_permutevar8x32_ps(dm, pick_d);
        const __m256 mx = _mm256_permutevar8x32_ps(dm, pick_m);
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            const uint8_t *yb = y + c * by + i * A;
            const __m256i a = _mm256_loadu_si256((const __m256i *)(yb + AQ));
            const __m256i off = OFF ? _mm256_maddubs_epi16(_mm256_set1_epi8((char)OFF), a) : _mm256_setzero_si256();
            __m256i t[4];
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
                __m256i p = _mm256_maddubs_epi16(w[r], a);
                if (OFF)
                    p = _mm256_sub_epi16(p, off);
                t[r] = _mm256_madd_epi16(p, ones);
            }
            const __m256i m01 = _mm256_madd_epi16(_mm256_packs_epi32(t[0], t[1]), ones);
            const __m256i m23 = _mm256_madd_epi16(_mm256_packs_epi32(t[2], t[3]), ones);
            const __m256i sum = _mm256_madd_epi16(_mm256_packs_epi32(m01, m23), ones);
            const __m128 ds = _mm_cvtph_ps(_mm_cvtsi32_si128((int)hx_ld32(yb))); /* d (and s) */
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(dx, _mm256_broadcastss_ps(ds)), acc[c]);
            if (MINS) /* m·s in the low half only: the halves are added at the end */
                acc[c] = _mm256_fmadd_ps(mx, _mm256_zextps128_ps256(_mm_permute_ps(ds, 0x55)), acc[c]);
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < C; c++)
        _mm_storeu_ps(s + c * ss, _mm_add_ps(_mm256_castps256_ps128(acc[c]), _mm256_extractf128_ps(acc[c], 1)));
}

HX_QUANT_GEMM_BY_COLS(gemm_q4_0, gemm_q45_tile, HX_TYPE_Q4_0)
HX_QUANT_GEMM_BY_COLS(gemm_q4_1, gemm_q45_tile, HX_TYPE_Q4_1)
HX_QUANT_GEMM_BY_COLS(gemm_q5_0, gemm_q45_tile, HX_TYPE_Q5_0)
HX_QUANT_GEMM_BY_COLS(gemm_q5_1, gemm_q45_tile, HX_TYPE_Q5_1)

/* 4 Q8_0 weight rows x C (1 or 2) Q8_0 activation rows, a block at a
 * time: each weight block is unpacked once, as |w|, for both activation
 * rows; the per-block integer sums are vec_dot's, |w|·(a with w's sign).
 * Its pair sums reach 2·127·127, too wide for gemm_q45_tile's 16-bit
 * narrowing: each pair keeps its own accumulator. */
static inline __attribute__((always_inline)) void gemm_q8_0_cols(int64_t n, float *s, size_t ss, const uint8_t *x,
                                                                 size_t bx, const uint8_t *y, size_t by, const int C,
                                                                 const int unused)
{
    const size_t B = sizeof(hx_block_q8_0), A = sizeof(hx_block_q8_0);
    __m256 acc[4][2];
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
#pragma GCC unroll 2
        for (int c = 0; c < C; c++)
            acc[r][c] = _mm256_setzero_ps();
    const int RS = HX_TILE_ROWS(C);
    for (int r0 = 0; r0 < 4; r0 += RS) {
        for (int64_t i = 0; i < n / HX_QK; i++) {
            __m256i a[2];
            float dy[2];
    #pragma GCC unroll 2
            for (int c = 0; c < C; c++) {
                const uint8_t *yb = y + c * by + i * A;
                a[c] = _mm256_loadu_si256((const __m256i *)(yb + offsetof(hx_block_q8_0, qs)));
                dy[c] = h2f(yb);
            }
    #pragma GCC unroll 4
            for (int r = r0; r < r0 + RS; r++) {
                const uint8_t *xb = x + r * bx + i * B;
                if (!(i & 1))
                    _mm_prefetch(hx_tile_prefetch(xb, i * B, bx, RS), _MM_HINT_T0);
                const float dx = h2f(xb);
                const __m256i w = _mm256_loadu_si256((const __m256i *)(xb + offsetof(hx_block_q8_0, qs)));
                const __m256i u = _mm256_abs_epi8(w);
    #pragma GCC unroll 2
                for (int c = 0; c < C; c++) {
                    const __m256i p = dot_u8s8(u, _mm256_sign_epi8(a[c], w));
                    acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dx * dy[c]), acc[r][c]);
                }
            }
        }
    }
#pragma GCC unroll 2
    for (int c = 0; c < C; c++)
        _mm_storeu_ps(s + c * ss, hsum4x8(acc[0][c], acc[1][c], acc[2][c], acc[3][c]));
}

GEMM_PAIRS(gemm_q8_0, gemm_q8_0_cols, 0)

HX_QUANT_DOT4S_OF_GEMMS

/* Eight elements of F32 or F16 rows (converted exactly) as F32. */
static inline __attribute__((always_inline)) __m256 load8_as_f32(const void *x, size_t at, const int half)
{
    return half ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const hx_half *)x + at)))
                : _mm256_loadu_ps((const float *)x + at);
}

static inline __attribute__((always_inline)) float load_as_f32(const void *x, size_t at, const int half)
{
    return half ? hx_fp16_to_fp32(((const hx_half *)x)[at]) : ((const float *)x)[at];
}

/* A multiply and an add, not an FMA: the scalar level's bits.  Slices of
 * 32 accumulators stay in registers over all the rows.  `half`: the rows
 * are F16. */
static inline __attribute__((always_inline)) void add_scaled_rows(float *acc, const void *x, size_t x_stride,
                                                                  const float *w, int64_t rows, int64_t n,
                                                                  const int half)
{
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 a[4];
        for (int k = 0; k < 4; k++)
            a[k] = _mm256_loadu_ps(acc + i + 8 * k);
        for (int64_t r = 0; r < rows; r++) {
            const __m256 wv = _mm256_set1_ps(w[r]);
            for (int k = 0; k < 4; k++)
                a[k] = _mm256_add_ps(a[k], _mm256_mul_ps(wv, load8_as_f32(x, (size_t)r * x_stride + (size_t)i + 8 * k, half)));
        }
        for (int k = 0; k < 4; k++)
            _mm256_storeu_ps(acc + i + 8 * k, a[k]);
    }
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_loadu_ps(acc + i);
        for (int64_t r = 0; r < rows; r++)
            a = _mm256_add_ps(a, _mm256_mul_ps(_mm256_set1_ps(w[r]), load8_as_f32(x, (size_t)r * x_stride + (size_t)i, half)));
        _mm256_storeu_ps(acc + i, a);
    }
    for (; i < n; i++)
        for (int64_t r = 0; r < rows; r++)
            acc[i] += w[r] * load_as_f32(x, (size_t)r * x_stride + (size_t)i, half);
}

void hx_quant_avx2_add_scaled_rows(float *acc, const float *x, size_t x_stride, const float *w, int64_t rows,
                                   int64_t n)
{
    add_scaled_rows(acc, x, x_stride, w, rows, n, 0);
}

void hx_quant_avx2_add_scaled_rows_f16(float *acc, const hx_half *x, size_t x_stride, const float *w, int64_t rows,
                                       int64_t n)
{
    add_scaled_rows(acc, x, x_stride, w, rows, n, 1);
}

const hx_quant_kernels hx_quant_avx2_kernels[HX_TYPE_COUNT] = {
    [HX_TYPE_F32] = {NULL, NULL, dot_f32, dot4_f32, gemm_f32, NULL, NULL},
    [HX_TYPE_F16] = {dequant_f16, quant_f16, dot_f16, dot4_f16, gemm_f16, NULL, gemm_keep_f16},
    [HX_TYPE_BF16] = {dequant_bf16, NULL, dot_bf16, dot4_bf16, gemm_bf16, NULL, gemm_keep_bf16},
    [HX_TYPE_Q4_0] = {dequant_q4_0, NULL, dot_q4_0, dot4_q4_0, gemm_q4_0, NULL, NULL},
    [HX_TYPE_Q4_1] = {dequant_q4_1, NULL, dot_q4_1, dot4_q4_1, gemm_q4_1, NULL, NULL},
    [HX_TYPE_Q5_0] = {dequant_q5_0, NULL, dot_q5_0, dot4_q5_0, gemm_q5_0, NULL, NULL},
    [HX_TYPE_Q5_1] = {dequant_q5_1, NULL, dot_q5_1, dot4_q5_1, gemm_q5_1, NULL, NULL},
    [HX_TYPE_Q8_0] = {dequant_q8_0, quant_q8_0, dot_q8_0, dot4_q8_0, gemm_q8_0, NULL, NULL},
    [HX_TYPE_Q8_1] = {dequant_q8_1, quant_q8_1, NULL, NULL, NULL, NULL, NULL},
    [HX_TYPE_Q4_K] = {dequant_q4_K, NULL, dot_q4_K, dot4_q4_K, gemm_q4_K, NULL, NULL},
    [HX_TYPE_Q5_K] = {dequant_q5_K, NULL, dot_q5_K, dot4_q5_K, gemm_q5_K, NULL, NULL},
    [HX_TYPE_Q6_K] = {dequant_q6_K, NULL, dot_q6_K, dot4_q6_K, gemm_q6_K, NULL, NULL},
    [HX_TYPE_Q8_K] = {dequant_q8_K, quant_q8_K, NULL, NULL, NULL, NULL, NULL},
};

const hx_gemm_fn hx_quant_avx2_gemm_f32_act[HX_TYPE_COUNT] = {[HX_TYPE_Q8_0] = gemm_q8_0_f32};
