/* Each level's kernels behind kernels_cpu/vmath.h. */
#ifndef HX_KERNELS_CPU_VMATH_IMPL_H
#define HX_KERNELS_CPU_VMATH_IMPL_H

#include <stdint.h>

void hx_vmath_avx2_exp_shifted(float *x, float shift, int64_t n);
void hx_vmath_avx2_swiglu(const float *g, const float *u, float *o, int64_t n);
void hx_vmath_avx512_exp_shifted(float *x, float shift, int64_t n);
void hx_vmath_avx512_swiglu(const float *g, const float *u, float *o, int64_t n);
double hx_vmath_avx2_softmax_terms(float *x, int64_t n, float scale, float *max);
double hx_vmath_avx512_softmax_terms(float *x, int64_t n, float scale, float *max);
void hx_vmath_avx2_scale_add(float *y, float a, const float *x, int64_t n);
void hx_vmath_avx512_scale_add(float *y, float a, const float *x, int64_t n);
void hx_vmath_avx2_add_scaled(float *y, const float *x, float a, int64_t n);
void hx_vmath_avx512_add_scaled(float *y, const float *x, float a, int64_t n);
void hx_vmath_avx2_geglu(const float *table, const float *g, const float *u, float *o, int64_t n);
void hx_vmath_avx512_geglu(const float *table, const float *g, const float *u, float *o, int64_t n);

/* GeGLU's bounds: the GELU table is used strictly between them. */
#define HX_GELU_LO -10.0f
#define HX_GELU_HI 10.0f

/* Cephes' expf: exp(r) ~ 1 + r + r^2 P(r) on |r| <= ln2/2, and ln 2 in
 * two parts so that n ln 2 is exact in the first. */
#define HX_VEXP_LOG2E 1.44269504088896341f
#define HX_VEXP_LN2_HI 0.693359375f
#define HX_VEXP_LN2_LO -2.12194440e-4f
#define HX_VEXP_P0 1.9875691500e-4f
#define HX_VEXP_P1 1.3981999507e-3f
#define HX_VEXP_P2 8.3334519073e-3f
#define HX_VEXP_P3 4.1665795894e-2f
#define HX_VEXP_P4 1.6666665459e-1f
#define HX_VEXP_P5 5.0000001201e-1f
/* Above: infinity (expf(88.72284) is FLT_MAX's neighbourhood); below:
 * zero (exp(-87.33655) = FLT_MIN). */
#define HX_VEXP_HI 88.72283935546875f
#define HX_VEXP_LO -87.33654022216797f

#endif
