/* Dispatch of kernels_cpu/vmath.h by SIMD level; the scalar level. */
#include <math.h>
#include <pthread.h>

#include "kernels_cpu/quant.h"
#include "kernels_cpu/vmath.h"
#include "kernels_cpu/vmath_impl.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF /* a multiply then an add stay two roundings, as at every level */
#endif

static void scalar_exp_shifted(float *x, float shift, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = expf(x[i] - shift);
}

static void scalar_swiglu(const float *g, const float *u, float *o, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        o[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* GELU of every f16 value, rounded to f16 and kept as f32 for a gather:
 * ggml's table (a tanhf per element cost a third of Gemma 3's prefill). */
static float gelu_table[65536];
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static void gelu_table_fill(void)
{
    for (uint32_t h = 0; h < 65536; h++) {
        const float x = hx_fp16_to_fp32((hx_half)h);
        const float g = 0.5f * x * (1.0f + tanhf(0.79788456080286535587989211986876f * x * (1.0f + 0.044715f * x * x)));
        gelu_table[h] = hx_fp16_to_fp32(hx_fp32_to_fp16(g));
    }
}

static void scalar_geglu(const float *table, const float *g, const float *u, float *o, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const float x = g[i];
        const float v = x <= HX_GELU_LO ? 0.0f : x >= HX_GELU_HI ? x : table[hx_fp32_to_fp16(x)];
        o[i] = v * u[i];
    }
}

void hx_vmath_geglu(const float *g, const float *u, float *o, int64_t n)
{
    static void (*const by_level[HX_SIMD_COUNT])(const float *, const float *, const float *, float *, int64_t) = {
        scalar_geglu, hx_vmath_avx2_geglu, hx_vmath_avx512_geglu};
    pthread_once(&gelu_once, gelu_table_fill);
    by_level[hx_quant_level()](gelu_table, g, u, o, n);
}

void hx_vmath_exp_shifted(float *x, float shift, int64_t n)
{
    static void (*const by_level[HX_SIMD_COUNT])(float *, float, int64_t) = {
        scalar_exp_shifted, hx_vmath_avx2_exp_shifted, hx_vmath_avx512_exp_shifted};
    by_level[hx_quant_level()](x, shift, n);
}

void hx_vmath_swiglu(const float *g, const float *u, float *o, int64_t n)
{
    static void (*const by_level[HX_SIMD_COUNT])(const float *, const float *, float *, int64_t) = {
        scalar_swiglu, hx_vmath_avx2_swiglu, hx_vmath_avx512_swiglu};
    by_level[hx_quant_level()](g, u, o, n);
}

/* The scalar level's softmax terms.  The largest of m[0..HX_VMATH_LANES)
 * and the sum of s[..] in double, each by halving: lane k meets lane
 * k + 8, then k + 4, k + 2, k + 1 (the SIMD levels do the same in
 * registers). */
static float lanes_max(const float *m)
{
    float t[HX_VMATH_LANES];
    for (int k = 0; k < HX_VMATH_LANES; k++)
        t[k] = m[k];
    for (int w = HX_VMATH_LANES / 2; w >= 1; w /= 2)
        for (int k = 0; k < w; k++)
            t[k] = t[k + w] > t[k] ? t[k + w] : t[k];
    return t[0];
}

static double lanes_sum(const float *s)
{
    double t[HX_VMATH_LANES];
    for (int k = 0; k < HX_VMATH_LANES; k++)
        t[k] = s[k];
    for (int w = HX_VMATH_LANES / 2; w >= 1; w /= 2)
        for (int k = 0; k < w; k++)
            t[k] += t[k + w];
    return t[0];
}

static double scalar_softmax_terms(float *x, int64_t n, float scale, float *max)
{
    float m[HX_VMATH_LANES], s[HX_VMATH_LANES] = {0};
    for (int k = 0; k < HX_VMATH_LANES; k++)
        m[k] = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        const float v = x[i] * scale;
        x[i] = v;
        m[i % HX_VMATH_LANES] = v > m[i % HX_VMATH_LANES] ? v : m[i % HX_VMATH_LANES];
    }
    const float mx = lanes_max(m);
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        s[i % HX_VMATH_LANES] += x[i];
    }
    *max = mx;
    return lanes_sum(s);
}

double hx_vmath_softmax_terms(float *x, int64_t n, float scale, float *max)
{
    static double (*const by_level[HX_SIMD_COUNT])(float *, int64_t, float, float *) = {
        scalar_softmax_terms, hx_vmath_avx2_softmax_terms, hx_vmath_avx512_softmax_terms};
    return by_level[hx_quant_level()](x, n, scale, max);
}

static void scalar_scale_add(float *y, float a, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = y[i] * a + x[i];
}

void hx_vmath_scale_add(float *y, float a, const float *x, int64_t n)
{
    static void (*const by_level[HX_SIMD_COUNT])(float *, float, const float *, int64_t) = {
        scalar_scale_add, hx_vmath_avx2_scale_add, hx_vmath_avx512_scale_add};
    by_level[hx_quant_level()](y, a, x, n);
}

static void scalar_add_scaled(float *y, const float *x, float a, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] += x[i] * a;
}

void hx_vmath_add_scaled(float *y, const float *x, float a, int64_t n)
{
    static void (*const by_level[HX_SIMD_COUNT])(float *, const float *, float, int64_t) = {
        scalar_add_scaled, hx_vmath_avx2_add_scaled, hx_vmath_avx512_add_scaled};
    by_level[hx_quant_level()](y, x, a, n);
}
