/* The fitting steps the weight quantizers share: ggml's scale searches
 * (make_qx_quants, make_qkx2/3_quants, make_qp_quants, make_q3_quants and
 * the IQ4 non-linear fit), written from their descriptions.  Every float
 * expression keeps ggml's order of operations, so that a block fitted
 * here is byte for byte the block llama-quantize writes.
 * Not for callers outside kernels_cpu/quant*.c. */
#ifndef HX_KERNELS_CPU_QUANT_FIT_H
#define HX_KERNELS_CPU_QUANT_FIT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels_cpu/quant_impl.h"

#define HX_GROUP_EPS 1e-15f

static inline float hx_clampf(float v, float lo, float hi) { return v < lo ? lo : v > hi ? hi : v; }
static inline int hx_clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Round half to even for |v| < 2^22 (the magic-number trick ggml uses);
 * larger or non-finite values are clamped first, never undefined. */
static inline int hx_rne(float v)
{
    v = hx_clampf(v, -4194303.0f, 4194303.0f);
    return (int)((v + 12582912.0f) - 12582912.0f);
}

static inline void hx_st16(uint8_t *p, uint16_t v) { memcpy(p, &v, sizeof v); }

/* Packs 32 quants of 0..31 as nibbles (and, for 5 bits, the qh word). */
static inline void hx_quant_pack32(const uint8_t *L, uint8_t *qs, uint8_t *qh)
{
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((L[j] & 0xf) | ((L[j + 16] & 0xf) << 4));
        h |= (uint32_t)((L[j] >> 4) & 1) << j;
        h |= (uint32_t)((L[j + 16] >> 4) & 1) << (j + 16);
    }
    if (qh)
        memcpy(qh, &h, 4);
}

/* Q8_0 blocks of n elements (whole blocks), each block's scale and quants
 * from `fit` (the KV cache's fits). */
static inline void hx_quant_q8_0_blocks(const float *x, void *vy, int64_t n, float (*fit)(const float *, int8_t *))
{
    uint8_t *y = vy;
    for (int64_t b = 0; b < n / HX_QK; b++, x += HX_QK, y += sizeof(hx_block_q8_0)) {
        int8_t q[HX_QK];
        hx_st16(y, hx_fp32_to_fp16(fit(x, q)));
        memcpy(y + offsetof(hx_block_q8_0, qs), q, HX_QK);
    }
}

/* The element of largest magnitude, with its sign (the first such). */
float hx_quant_signed_absmax(const float *x, int n, float *amax_out);

/* The sum of x[j]^2, in order (ggml's sigma2 before its scaling). */
float hx_quant_sum_sq(const float *x, int64_t n);

/* Importance weights of n elements: w[j] = qw[j] * sqrt(sigma2 + x[j]^2),
 * so that a weight keeps its precision where the activations meeting it
 * are large and the weight itself is; returns the sum of w, in order. */
float hx_quant_importance(float *w, const float *x, const float *qw, int n, float sigma2);

/* Symmetric fit x ~ scale * l, l in -nmax..nmax-1 (stored as l + nmax in
 * L): the best of 19 inverse scales around nmax/max by weighted least
 * squares, weights w or, when w is NULL, x^2 (make_qx_quants, rmse 1). */
float hx_quant_fit_sym(int n, int nmax, const float *x, int8_t *L, const float *w);

/* Affine fit x ~ scale * L - min, L in 0..nmax, min >= 0: the plain range
 * split, then nstep+1 stretched inverse scales (nmax + rmin + rdelta*k) /
 * range refitted by weighted least squares; the one of least weighted
 * squared (use_mad: absolute) error wins.  Returns the scale, stores the
 * min (make_qkx2_quants; make_qkx3_quants when w holds its weights). */
float hx_quant_fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *the_min,
                             float rmin, float rdelta, int nstep, int use_mad);

/* Non-negative fit x ~ scale * L, L in 0..nmax, weights w: nine inverse
 * scales, then up to five passes moving single quants while the weighted
 * fit improves (make_qp_quants: the K-quants' sub-block scales). */
float hx_quant_fit_pos(int n, int nmax, const float *x, uint8_t *L, const float *w);

/* Q3_K's symmetric fit, weights x^2, with the same improving passes
 * (make_q3_quants with rmse): L in 0..2*nmax-1. */
float hx_quant_fit_q3(int n, int nmax, const float *x, int8_t *L);

/* The 16 values of IQ4_NL / IQ4_XS quants (kvalues_iq4nl). */
extern const int8_t hx_iq4nl_values[16];

/* IQ4_NL (sb = 32) or IQ4_XS (sb = 256) super-block of sb elements in 32s:
 * x -> d (f16) at dh, nibbles at q4 and, for IQ4_XS, the 6-bit sub-block
 * scales at scales_h / scales_l; qw: sb importance weights or NULL for x^2;
 * ntry: how many inverse scales either side of the first are tried. */
void hx_quant_fit_iq4(int sb, const float *x, uint8_t *dh, uint8_t *q4, uint8_t *scales_h, uint8_t *scales_l,
                      const float *qw, int ntry);

/* Packs eight 6-bit scales and mins into the 12 bytes of a Q4_K/Q5_K block. */
void hx_quant_k4_pack_scales(uint8_t *out, const uint8_t *ls, const uint8_t *lm);

/* Q4_K (nmax 15) / Q5_K (nmax 31): given a block's stored d, dmin and
 * scales, requantizes x against them (sub-blocks of scale 0 keep their
 * fitted quants L) and packs the quants. */
void hx_quant_k4_finish(const float *x, uint8_t *y, uint8_t *L, int nmax);

#endif
