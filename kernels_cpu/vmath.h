/* Element-wise math on float rows at the current SIMD level
 * (kernels_cpu/quant.h's hx_quant_level): the exponentials of softmax and
 * of the SwiGLU gate, which scalar expf made a tenth of a small model's
 * prompt time.
 *
 * The AVX2 and AVX-512 levels share one exp: exp(x) = 2^n exp(r), n =
 * round(x log2 e), r = x - n ln 2 in two FMA steps, exp(r) from Cephes'
 * degree-7 polynomial (error within 2 ulp of the true value, checked
 * by the quant suite).  Results below FLT_MIN (x < -87.34) are flushed to
 * zero, where expf would give a subnormal; overflow gives infinity, NaN
 * stays NaN.  The scalar level calls expf.  Every element is computed on
 * its own, so a row's bits do not depend on its length or alignment. */
#ifndef HX_KERNELS_CPU_VMATH_H
#define HX_KERNELS_CPU_VMATH_H

#include <stdint.h>

/* x[i] = exp(x[i] - shift) for i < n (softmax: shift = the row's max). */
void hx_vmath_exp_shifted(float *x, float shift, int64_t n);

/* o[i] = g[i] / (1 + exp(-g[i])) * u[i] for i < n: SiLU(gate) x up. */
void hx_vmath_swiglu(const float *g, const float *u, float *o, int64_t n);

/* o[i] = GELU(g[i]) * u[i] for i < n: GeGLU with ggml's GELU, the tanh
 * form looked up in a table over every f16 value (the input rounded to
 * f16, the result too; 0 at or below -10, the input at or above 10), so
 * the values are llama.cpp CPU backend's at every level. */
void hx_vmath_geglu(const float *g, const float *u, float *o, int64_t n);

/* A chunk of attention's softmax: x[i] = exp(x[i] * scale - m), m the
 * largest x[i] * scale (NaN never wins; -inf for n == 0), written to *max;
 * returns the sum of the results over HX_VMATH_LANES lanes (element i
 * added to lane i mod HX_VMATH_LANES in element order), the lanes then
 * added pairwise in double (lane k + 8 to lane k, then k + 4, k + 2,
 * k + 1; the maximum's lanes meet likewise).  The lanes are fixed, so the
 * sum's bits depend on the values alone, the same at AVX2 and AVX-512
 * (whose exp is one). */
#define HX_VMATH_LANES 16
double hx_vmath_softmax_terms(float *x, int64_t n, float scale, float *max);

/* y[i] = y[i] * a + x[i] for i < n, a multiply then an add (an online
 * softmax's merge, the older side rescaled). */
void hx_vmath_scale_add(float *y, float a, const float *x, int64_t n);

/* y[i] = y[i] + x[i] * a for i < n, a multiply then an add. */
void hx_vmath_add_scaled(float *y, const float *x, float a, int64_t n);

#endif
