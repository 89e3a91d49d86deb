/* kernels_cpu/vmath.h at AVX-512: 16 lanes, a masked last vector. */
#include <immintrin.h>

#include "kernels_cpu/vmath_impl.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF /* a multiply then an add stay two roundings, as at every level */
#endif

/* NONPOS: x is never above 0 (a softmax's shifted scores), so nothing
 * overflows and 2^n is one factor (n <= 0): the same bits for such x,
 * with a third less work. */
static inline __attribute__((always_inline)) __m512 vexp_of(__m512 x, const int NONPOS)
{
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    const __mmask16 under = _mm512_cmp_ps_mask(x, _mm512_set1_ps(HX_VEXP_LO), _CMP_LT_OQ);
    const __m512 xn = x;
    x = _mm512_max_ps(x, _mm512_set1_ps(HX_VEXP_LO));
    if (!NONPOS)
        x = _mm512_min_ps(x, _mm512_set1_ps(HX_VEXP_HI));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(HX_VEXP_LOG2E)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(HX_VEXP_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(HX_VEXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(HX_VEXP_P0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(HX_VEXP_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(HX_VEXP_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(HX_VEXP_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(HX_VEXP_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(HX_VEXP_P5));
    const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    /* 2^n as two factors: n reaches 128 just below the overflow bound */
    const __m512i ni = _mm512_cvtps_epi32(n);
    const __m512i n1 = NONPOS ? ni : _mm512_min_epi32(ni, _mm512_set1_epi32(127));
    const __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, _mm512_set1_epi32(127)), 23));
    __m512 e = _mm512_mul_ps(y, s1);
    if (!NONPOS) {
        const __m512i n2 = _mm512_sub_epi32(ni, n1);
        const __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, _mm512_set1_epi32(127)), 23));
        e = _mm512_mul_ps(e, s2);
        e = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(xn, _mm512_set1_ps(HX_VEXP_HI), _CMP_GT_OQ), e,
                                 _mm512_set1_ps(__builtin_inff()));
    }
    e = _mm512_mask_blend_ps(under, e, _mm512_setzero_ps());
    return _mm512_mask_blend_ps(nan, e, xn);
}

static inline __m512 vexp(__m512 x) { return vexp_of(x, 0); }

static inline __mmask16 tail(int64_t left) { return left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1); }

void hx_vmath_avx512_exp_shifted(float *x, float shift, int64_t n)
{
    const __m512 s = _mm512_set1_ps(shift);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail(n - i);
        _mm512_mask_storeu_ps(x + i, m, vexp(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), s)));
    }
}

void hx_vmath_avx512_swiglu(const float *g, const float *u, float *o, int64_t n)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail(n - i);
        const __m512 gv = _mm512_maskz_loadu_ps(m, g + i);
        const __m512 e = vexp(_mm512_sub_ps(_mm512_setzero_ps(), gv));
        const __m512 v = _mm512_mul_ps(_mm512_div_ps(gv, _mm512_add_ps(one, e)), _mm512_maskz_loadu_ps(m, u + i));
        _mm512_mask_storeu_ps(o + i, m, v);
    }
}

void hx_vmath_avx512_geglu(const float *table, const float *g, const float *u, float *o, int64_t n)
{
    const __m512 lo = _mm512_set1_ps(HX_GELU_LO), hi = _mm512_set1_ps(HX_GELU_HI);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail(n - i);
        const __m512 x = _mm512_maskz_loadu_ps(m, g + i);
        const __m512i h = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, h, table, 4);
        v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lo, _CMP_LE_OQ), v, _mm512_setzero_ps());
        v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GE_OQ), v, x);
        _mm512_mask_storeu_ps(o + i, m, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, u + i)));
    }
}

/* The lanes' maximum and sum by halving, as kernels_cpu/vmath.h defines
 * them: lane k + 8 meets lane k, then k + 4, k + 2, k + 1 (the maximum as
 * t[k + w] > t[k] ? t[k + w] : t[k]). */
static inline float lanes_max16(__m512 m)
{
    __m256 h = _mm256_max_ps(_mm512_extractf32x8_ps(m, 1), _mm512_castps512_ps256(m));
    __m128 q = _mm_max_ps(_mm256_extractf128_ps(h, 1), _mm256_castps256_ps128(h));
    q = _mm_max_ps(_mm_movehl_ps(q, q), q);
    return _mm_cvtss_f32(_mm_max_ss(_mm_movehdup_ps(q), q));
}

static inline double lanes_sum16(__m512 s)
{
    const __m512d e = _mm512_add_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(s)),
                                    _mm512_cvtps_pd(_mm512_extractf32x8_ps(s, 1)));
    const __m256d f = _mm256_add_pd(_mm512_castpd512_pd256(e), _mm512_extractf64x4_pd(e, 1));
    const __m128d g = _mm_add_pd(_mm256_castpd256_pd128(f), _mm256_extractf128_pd(f, 1));
    return _mm_cvtsd_f64(_mm_add_sd(g, _mm_unpackhi_pd(g, g)));
}

/* One zmm is the 16 lanes. */
double hx_vmath_avx512_softmax_terms(float *x, int64_t n, float scale, float *max)
{
    const __m512 sc = _mm512_set1_ps(scale);
    __m512 m = _mm512_set1_ps(-__builtin_inff()), s = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = tail(n - i);
        const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), sc);
        _mm512_mask_storeu_ps(x + i, k, v);
        m = _mm512_mask_max_ps(m, k, v, m); /* v > m ? v : m: NaN never wins */
    }
    const float mx = lanes_max16(m);
    const __m512 sh = _mm512_set1_ps(mx);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = tail(n - i);
        const __m512 e = vexp_of(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), sh), 1);
        _mm512_mask_storeu_ps(x + i, k, e);
        s = _mm512_mask_add_ps(s, k, s, e);
    }
    *max = mx;
    return lanes_sum16(s);
}

void hx_vmath_avx512_scale_add(float *y, float a, const float *x, int64_t n)
{
    const __m512 av = _mm512_set1_ps(a);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = tail(n - i);
        const __m512 v = _mm512_add_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, y + i), av), _mm512_maskz_loadu_ps(k, x + i));
        _mm512_mask_storeu_ps(y + i, k, v);
    }
}

void hx_vmath_avx512_add_scaled(float *y, const float *x, float a, int64_t n)
{
    const __m512 av = _mm512_set1_ps(a);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = tail(n - i);
        const __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(k, y + i), _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), av));
        _mm512_mask_storeu_ps(y + i, k, v);
    }
}
