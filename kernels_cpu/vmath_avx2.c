/* kernels_cpu/vmath.h at AVX2: 8 lanes; the last partial vector goes
 * through a padded copy, so it takes the same arithmetic. */
#include <immintrin.h>
#include <string.h>

#include "kernels_cpu/vmath_impl.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF /* a multiply then an add stay two roundings, as at every level */
#endif

/* NONPOS: x is never above 0 (a softmax's shifted scores), so nothing
 * overflows and 2^n is one factor (n <= 0): the same bits for such x,
 * with a third less work. */
static inline __attribute__((always_inline)) __m256 vexp_of(__m256 x, const int NONPOS)
{
    const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    const __m256 under = _mm256_cmp_ps(x, _mm256_set1_ps(HX_VEXP_LO), _CMP_LT_OQ);
    const __m256 xn = x;
    x = _mm256_max_ps(x, _mm256_set1_ps(HX_VEXP_LO));
    if (!NONPOS)
        x = _mm256_min_ps(x, _mm256_set1_ps(HX_VEXP_HI));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(HX_VEXP_LOG2E)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(HX_VEXP_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(HX_VEXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(HX_VEXP_P0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(HX_VEXP_P1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(HX_VEXP_P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(HX_VEXP_P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(HX_VEXP_P4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(HX_VEXP_P5));
    const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
    /* 2^n as two factors: n reaches 128 just below the overflow bound */
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i n1 = NONPOS ? ni : _mm256_min_epi32(ni, _mm256_set1_epi32(127));
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
    __m256 e = _mm256_mul_ps(y, s1);
    if (!NONPOS) {
        const __m256i n2 = _mm256_sub_epi32(ni, n1);
        const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
        e = _mm256_mul_ps(e, s2);
        e = _mm256_blendv_ps(e, _mm256_set1_ps(__builtin_inff()),
                             _mm256_cmp_ps(xn, _mm256_set1_ps(HX_VEXP_HI), _CMP_GT_OQ));
    }
    e = _mm256_blendv_ps(e, _mm256_setzero_ps(), under);
    return _mm256_blendv_ps(e, xn, nan);
}

static inline __m256 vexp(__m256 x) { return vexp_of(x, 0); }

void hx_vmath_avx2_exp_shifted(float *x, float shift, int64_t n)
{
    const __m256 s = _mm256_set1_ps(shift);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, vexp(_mm256_sub_ps(_mm256_loadu_ps(x + i), s)));
    if (i < n) {
        float t[8] = {0};
        memcpy(t, x + i, (size_t)(n - i) * sizeof(float));
        _mm256_storeu_ps(t, vexp(_mm256_sub_ps(_mm256_loadu_ps(t), s)));
        memcpy(x + i, t, (size_t)(n - i) * sizeof(float));
    }
}

static inline __m256 swiglu8(__m256 g, __m256 u)
{
    const __m256 e = vexp(_mm256_sub_ps(_mm256_setzero_ps(), g));
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

void hx_vmath_avx2_swiglu(const float *g, const float *u, float *o, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(o + i, swiglu8(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i)));
    if (i < n) {
        float tg[8] = {0}, tu[8] = {0};
        memcpy(tg, g + i, (size_t)(n - i) * sizeof(float));
        memcpy(tu, u + i, (size_t)(n - i) * sizeof(float));
        _mm256_storeu_ps(tg, swiglu8(_mm256_loadu_ps(tg), _mm256_loadu_ps(tu)));
        memcpy(o + i, tg, (size_t)(n - i) * sizeof(float));
    }
}

static inline __m256 geglu8(const float *table, __m256 x, __m256 u)
{
    const __m256i h = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    __m256 v = _mm256_i32gather_ps(table, h, 4);
    v = _mm256_blendv_ps(v, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(HX_GELU_LO), _CMP_LE_OQ));
    v = _mm256_blendv_ps(v, x, _mm256_cmp_ps(x, _mm256_set1_ps(HX_GELU_HI), _CMP_GE_OQ));
    return _mm256_mul_ps(v, u);
}

void hx_vmath_avx2_geglu(const float *table, const float *g, const float *u, float *o, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(o + i, geglu8(table, _mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i)));
    if (i < n) {
        float tg[8] = {0}, tu[8] = {0};
        memcpy(tg, g + i, (size_t)(n - i) * sizeof(float));
        memcpy(tu, u + i, (size_t)(n - i) * sizeof(float));
        _mm256_storeu_ps(tg, geglu8(table, _mm256_loadu_ps(tg), _mm256_loadu_ps(tu)));
        memcpy(o + i, tg, (size_t)(n - i) * sizeof(float));
    }
}

/* The lanes' maximum and sum by halving, as kernels_cpu/vmath.h defines
 * them (lo: lanes 0-7, hi: 8-15). */
static inline float lanes_max16(__m256 lo, __m256 hi)
{
    const __m256 h = _mm256_max_ps(hi, lo);
    __m128 q = _mm_max_ps(_mm256_extractf128_ps(h, 1), _mm256_castps256_ps128(h));
    q = _mm_max_ps(_mm_movehl_ps(q, q), q);
    return _mm_cvtss_f32(_mm_max_ss(_mm_movehdup_ps(q), q));
}

static inline double lanes_sum16(__m256 lo, __m256 hi)
{
    const __m256d a = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(lo)), _mm256_cvtps_pd(_mm256_castps256_ps128(hi)));
    const __m256d b = _mm256_add_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(lo, 1)), _mm256_cvtps_pd(_mm256_extractf128_ps(hi, 1)));
    const __m256d f = _mm256_add_pd(a, b);
    const __m128d g = _mm_add_pd(_mm256_castpd256_pd128(f), _mm256_extractf128_pd(f, 1));
    return _mm_cvtsd_f64(_mm_add_sd(g, _mm_unpackhi_pd(g, g)));
}

/* The 16 lanes are two ymm: elements i .. i + 7 of each sixteen go to lo,
 * the next eight to hi; a partial sixteen goes through a padded copy
 * (the padding -inf for the maximum, then exp's 0 kept out of the sum). */
double hx_vmath_avx2_softmax_terms(float *x, int64_t n, float scale, float *max)
{
    const __m256 sc = _mm256_set1_ps(scale);
    __m256 m0 = _mm256_set1_ps(-__builtin_inff()), m1 = m0, s0 = _mm256_setzero_ps(), s1 = s0;
    const int64_t full = n / 16 * 16;
    for (int64_t i = 0; i < full; i += 16) {
        const __m256 v0 = _mm256_mul_ps(_mm256_loadu_ps(x + i), sc), v1 = _mm256_mul_ps(_mm256_loadu_ps(x + i + 8), sc);
        _mm256_storeu_ps(x + i, v0);
        _mm256_storeu_ps(x + i + 8, v1);
        m0 = _mm256_max_ps(v0, m0); /* v > m ? v : m: NaN never wins */
        m1 = _mm256_max_ps(v1, m1);
    }
    float t[16], lanes[16];
    if (full < n) {
        for (int k = 0; k < 16; k++)
            t[k] = full + k < n ? x[full + k] * scale : -__builtin_inff();
        m0 = _mm256_max_ps(_mm256_loadu_ps(t), m0);
        m1 = _mm256_max_ps(_mm256_loadu_ps(t + 8), m1);
    }
    const float mx = lanes_max16(m0, m1);
    const __m256 sh = _mm256_set1_ps(mx);
    for (int64_t i = 0; i < full; i += 16) {
        const __m256 e0 = vexp_of(_mm256_sub_ps(_mm256_loadu_ps(x + i), sh), 1);
        const __m256 e1 = vexp_of(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), sh), 1);
        _mm256_storeu_ps(x + i, e0);
        _mm256_storeu_ps(x + i + 8, e1);
        s0 = _mm256_add_ps(s0, e0);
        s1 = _mm256_add_ps(s1, e1);
    }
    if (full < n) {
        _mm256_storeu_ps(lanes, vexp(_mm256_sub_ps(_mm256_loadu_ps(t), sh)));
        _mm256_storeu_ps(lanes + 8, vexp(_mm256_sub_ps(_mm256_loadu_ps(t + 8), sh)));
        for (int k = 0; k < 16; k++) /* past n: 0, kept out of the sums */
            t[k] = full + k < n ? (x[full + k] = lanes[k]) : 0.0f;
        s0 = _mm256_add_ps(s0, _mm256_loadu_ps(t));
        s1 = _mm256_add_ps(s1, _mm256_loadu_ps(t + 8));
    }
    *max = mx;
    return lanes_sum16(s0, s1);
}

void hx_vmath_avx2_scale_add(float *y, float a, const float *x, int64_t n)
{
    const __m256 av = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(y + i), av), _mm256_loadu_ps(x + i)));
    for (; i < n; i++)
        y[i] = y[i] * a + x[i];
}

void hx_vmath_avx2_add_scaled(float *y, const float *x, float a, int64_t n)
{
    const __m256 av = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(_mm256_loadu_ps(x + i), av)));
    for (; i < n; i++)
        y[i] += x[i] * a;
}
