/* The KV cache's Q4_0 and Q8_0 fits (kernels_cpu/kv_fit.c) at AVX2, which
 * the AVX-512 level uses too: the candidate roundings side by side in the
 * lanes of ymm registers, each lane summing its candidate's products in
 * element order with the scalar fit's operations, so every block gets the
 * same bits.  The scalar fits run the candidates one after another, each
 * a chain of 32 dependent adds; a prompt's KV stores then cost a fifth of
 * its time (SmolLM2 Q4_1 pp512 with a Q4_0 cache). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels_cpu/quant_fit.h"
#include "ops/kv_fit.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

enum { CANDIDATES = 19, LANES = 24 };

/* The candidate the scalar fits keep, of n whose sums are the lanes of
 * sx and s2: the first, replaced by each later one of larger
 * sumlx^2 / suml2 (least weighted squared error); its least-squares scale
 * to *scale. */
static int best_candidate(const __m256 *sx, const __m256 *s2, int n, float *scale)
{
    float sumlx[LANES], suml2[LANES];
    for (int v = 0; 8 * v < n; v++) {
        _mm256_storeu_ps(sumlx + 8 * v, sx[v]);
        _mm256_storeu_ps(suml2 + 8 * v, s2[v]);
    }
    int pick = 0;
    float s = suml2[0] != 0 ? sumlx[0] / suml2[0] : 0.0f, best = s * sumlx[0];
    for (int c = 1; c < n; c++)
        if (suml2[c] > 0 && sumlx[c] * sumlx[c] > best * suml2[c]) {
            s = sumlx[c] / suml2[c];
            best = s * sumlx[c];
            pick = c;
        }
    *scale = s;
    return pick;
}

/* Q4_0: hx_quant_fit_sym(HX_QK, 8, x, L, weights), weights 1 (`equal`) or NULL
 * (each element's square). */
static float fit_q4_0(const float *x, int8_t *L, int equal)
{
    const int nmax = 8;
    float amax;
    const float max = hx_quant_signed_absmax(x, HX_QK, &amax);
    if (amax < HX_GROUP_EPS) {
        memset(L, 0, HX_QK);
        return 0;
    }
    /* the scalar fit's order: -nmax/max first, then k = -9..-1, 1..9; the
     * spare lanes repeat the first, which a tie never replaces */
    float inv[LANES];
    inv[0] = -(float)nmax / max;
    for (int c = 1, k = -9; k <= 9; k++)
        if (k)
            inv[c++] = -((float)nmax + 0.1f * (float)k) / max;
    for (int c = CANDIDATES; c < LANES; c++)
        inv[c] = inv[0];
    const __m256 lo = _mm256_set1_ps((float)-nmax), hi = _mm256_set1_ps((float)(nmax - 1));
    __m256 is[3], sx[3], s2[3];
    for (int v = 0; v < 3; v++) {
        is[v] = _mm256_loadu_ps(inv + 8 * v);
        sx[v] = s2[v] = _mm256_setzero_ps();
    }
    for (int i = 0; i < HX_QK; i++) {
        const float wi = equal ? 1.0f : x[i] * x[i];
        const __m256 xi = _mm256_set1_ps(x[i]), w = _mm256_set1_ps(wi), wx = _mm256_set1_ps(wi * x[i]);
        for (int v = 0; v < 3; v++) {
            /* round half to even, clamped: hx_rne then hx_clampi, whose
             * int result is exact in float (a NaN clamps to -nmax in both) */
            __m256 l = _mm256_round_ps(_mm256_mul_ps(is[v], xi), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            l = _mm256_min_ps(_mm256_max_ps(l, lo), hi);
            sx[v] = _mm256_add_ps(sx[v], _mm256_mul_ps(wx, l));
            s2[v] = _mm256_add_ps(s2[v], _mm256_mul_ps(_mm256_mul_ps(w, l), l));
        }
    }
    float scale;
    const int pick = best_candidate(sx, s2, CANDIDATES, &scale);
    for (int i = 0; i < HX_QK; i++)
        L[i] = (int8_t)(nmax + hx_clampi(hx_rne(inv[pick] * x[i]), -nmax, nmax - 1));
    return scale;
}

static void quantize_q4_0_fit(const float *x, uint8_t *y, int64_t n, int equal)
{
    int8_t L[HX_QK];
    for (int64_t b = 0; b < n / HX_QK; b++, x += HX_QK, y += sizeof(hx_block_q4_0)) {
        hx_st16(y, hx_fp32_to_fp16(fit_q4_0(x, L, equal)));
        hx_quant_pack32((const uint8_t *)L, y + offsetof(hx_block_q4_0, qs), NULL);
    }
}

void hx_quant_avx2_quantize_q4_0_keys(const float *x, void *y, int64_t n) { quantize_q4_0_fit(x, y, n, 0); }
void hx_quant_avx2_quantize_q4_0_values(const float *x, void *y, int64_t n) { quantize_q4_0_fit(x, y, n, 1); }

/* Q8_0: hx_kv_fit_q8_0 (ops/kv_fit.h), its HX_KV_Q8_FITS candidates in two
 * ymm registers. */
static float fit_q8_0(const float *x, int8_t *q)
{
    float amax = 0.0f;
    for (int i = 0; i < HX_QK; i++)
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    if (amax < 1e-15f) {
        memset(q, 0, HX_QK);
        return 0;
    }
    _Static_assert(HX_KV_Q8_FITS == 16, "two ymm registers of candidates");
    /* (127 - c) / amax, each lane's division as exact as the scalar one */
    const __m256 am = _mm256_set1_ps(amax);
    const __m256 is[2] = {_mm256_div_ps(_mm256_setr_ps(127, 126, 125, 124, 123, 122, 121, 120), am),
                          _mm256_div_ps(_mm256_setr_ps(119, 118, 117, 116, 115, 114, 113, 112), am)};
    const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
    float inv[HX_KV_Q8_FITS];
    _mm256_storeu_ps(inv, is[0]);
    _mm256_storeu_ps(inv + 8, is[1]);
    __m256 sx[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()}, s2[2] = {sx[0], sx[1]};
    for (int i = 0; i < HX_QK; i++) {
        const __m256 xi = _mm256_set1_ps(x[i]);
        for (int v = 0; v < 2; v++) {
            __m256 l = _mm256_round_ps(_mm256_mul_ps(is[v], xi), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            l = _mm256_min_ps(_mm256_max_ps(l, lo), hi);
            sx[v] = _mm256_add_ps(sx[v], _mm256_mul_ps(xi, l));
            s2[v] = _mm256_add_ps(s2[v], _mm256_mul_ps(l, l));
        }
    }
    float scale;
    const int pick = best_candidate(sx, s2, HX_KV_Q8_FITS, &scale);
    float l[HX_QK];
    for (int i = 0; i < HX_QK; i += 8) {
        const __m256 r = _mm256_round_ps(_mm256_mul_ps(_mm256_set1_ps(inv[pick]), _mm256_loadu_ps(x + i)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_storeu_ps(l + i, _mm256_min_ps(_mm256_max_ps(r, lo), hi));
    }
    for (int i = 0; i < HX_QK; i++)
        q[i] = (int8_t)l[i];
    return scale;
}

void hx_quant_avx2_quantize_q8_0_kv(const float *x, void *y, int64_t n) { hx_quant_q8_0_blocks(x, y, n, fit_q8_0); }
