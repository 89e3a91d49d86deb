/* Dispatch of kernels_cpu/vmath.h by SIMD level; the scalar level. */
#include <math.h>

#include "kernels_cpu/quant.h"
#include "kernels_cpu/vmath.h"
#include "kernels_cpu/vmath_impl.h"

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
