/* How kv_store quantizes a Q8_0 cache block (ops/ops.h): the steps every
 * device runs, so that a block is the same bytes wherever it is stored.
 * The CPU's scalar level and the CUDA kernel (and its host emulation)
 * include this; the CPU's AVX2 lanes (kernels_cpu/kv_fit_avx2.c) and the
 * OpenCL kernel (kernels_cl/kv_store.cl) repeat its operations in its
 * order, and suites `quant` and `ops` hold them to it.
 *
 * The block is stored as Q8_0 stores it (f16 d, 32 int8 q, x = d * q),
 * with q in -127..127 (the reference's range, which the int8 dot
 * products' sign steps rely on).  Instead of the reference's d = max/127
 * it tries the inverse scales (127 - c) / amax, c = 0..15, takes each
 * rounding's least-squares scale, and keeps the one of least weighted
 * squared error (the first on a tie), keys and values alike.  Larger
 * inverse scales only clamp; on Gaussian blocks the squared error is 0.77
 * of the reference's (0.78 with c = 0..9, 0.97 with the reference's
 * rounding and a fitted scale).  Keys weighted by their squares, as the
 * Q4_0 fit weighs them (kernels_cpu/kv_fit.c), measured a little worse:
 * on SmolLM2 Q4_1 over 40 chunks of 512 of the license texts, mean KLD
 * from the F16 cache with K alone in Q8_0, reference 0.00492, squares
 * 0.00488, equal 0.00473.
 *
 * Written without fused multiply-adds or reassociation, which would move
 * a block's bytes: every product and sum is its own rounded operation. */
#ifndef HX_OPS_KV_FIT_H
#define HX_OPS_KV_FIT_H

#include <math.h>
#include <stdint.h>

#define HX_KV_Q8_FITS 16

#if defined(__CUDACC__)
#define HX_KV_FN __host__ __device__ static inline
#else
#define HX_KV_FN static inline
#endif
#if defined(__CUDA_ARCH__)
#define HX_KV_MUL(a, b) __fmul_rn(a, b)
#define HX_KV_ADD(a, b) __fadd_rn(a, b)
#else
#define HX_KV_MUL(a, b) ((a) * (b))
#define HX_KV_ADD(a, b) ((a) + (b))
#endif
#if defined(__clang__) && !defined(__CUDACC__)
#define HX_KV_NO_CONTRACT _Pragma("STDC FP_CONTRACT OFF")
#else
#define HX_KV_NO_CONTRACT /* gcc contracts nothing in ISO C mode */
#endif

/* x * inv rounded half to even into -127..127 (NaN to -127).  Written
 * with comparisons: a C compiler calls the library for fmaxf and fminf,
 * which cost a Q8_0 prompt's KV stores most of their time. */
HX_KV_FN float hx_kv_q8_round(float x, float inv)
{
    const float r = rintf(HX_KV_MUL(inv, x)), lo = r >= -127.0f ? r : -127.0f;
    return lo <= 127.0f ? lo : 127.0f;
}

/* Fits one block of 32: the quants to q, returns d (before its f16
 * rounding).  A block whose largest magnitude is below 1e-15 is d = 0. */
HX_KV_FN float hx_kv_fit_q8_0(const float *x, int8_t *q)
{
    HX_KV_NO_CONTRACT
    float amax = 0.0f; /* a NaN element is passed over, as fmaxf would */
    for (int i = 0; i < 32; i++)
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    if (amax < 1e-15f) {
        for (int i = 0; i < 32; i++)
            q[i] = 0;
        return 0.0f;
    }
    int pick = 0;
    float scale = 0.0f, best = 0.0f;
    for (int c = 0; c < HX_KV_Q8_FITS; c++) {
        const float inv = (float)(127 - c) / amax;
        float sumlx = 0.0f, suml2 = 0.0f;
        for (int i = 0; i < 32; i++) {
            const float l = hx_kv_q8_round(x[i], inv);
            sumlx = HX_KV_ADD(sumlx, HX_KV_MUL(x[i], l));
            suml2 = HX_KV_ADD(suml2, HX_KV_MUL(l, l));
        }
        if (c == 0) {
            scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
            best = HX_KV_MUL(scale, sumlx);
        } else if (suml2 > 0.0f && HX_KV_MUL(sumlx, sumlx) > HX_KV_MUL(best, suml2)) {
            scale = sumlx / suml2;
            best = HX_KV_MUL(scale, sumlx);
            pick = c;
        }
    }
    const float inv = (float)(127 - pick) / amax;
    for (int i = 0; i < 32; i++)
        q[i] = (int8_t)hx_kv_q8_round(x[i], inv);
    return scale;
}

#endif
