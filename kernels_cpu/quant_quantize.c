/* Quantizers f32 -> every type, round to nearest as ggml's reference
 * quantizers (quantize_row_*_ref), so files hetero writes match
 * llama-quantize's without an importance matrix.  The K-quants fit each
 * sub-block's scale (and min) by weighted least squares over a few
 * candidate scales before the scales themselves are quantized.
 *
 * Non-finite inputs give garbage blocks, never undefined behaviour: every
 * float is clamped into range before it becomes an integer. */
#include <math.h>
#include <stddef.h>

#include "kernels_cpu/quant_fit.h"

/* roundf for |v| <= 127 without a libm call: truncate, then step away
 * from zero when the (exactly computed) fraction is at least one half. */
static inline int round_away(float v)
{
    int i = (int)v;
    const float f = v - (float)i;
    i += (f >= 0.5f) - (f <= -0.5f);
    return i;
}

void hx_quant_quantize_f32(const float *x, void *y, int64_t n) { memcpy(y, x, (size_t)n * sizeof(float)); }

void hx_quant_quantize_f16(const float *x, void *vy, int64_t n)
{
    uint8_t *y = vy;
    for (int64_t i = 0; i < n; i++)
        hx_st16(y + 2 * i, hx_fp32_to_fp16(x[i]));
}

void hx_quant_quantize_bf16(const float *x, void *vy, int64_t n)
{
    uint8_t *y = vy;
    for (int64_t i = 0; i < n; i++)
        hx_st16(y + 2 * i, hx_fp32_to_bf16(x[i]));
}

static void min_max(const float *x, int n, float *mn, float *mx)
{
    float lo = INFINITY, hi = -INFINITY;
    for (int j = 0; j < n; j++) {
        if (x[j] < lo)
            lo = x[j];
        if (x[j] > hi)
            hi = x[j];
    }
    *mn = lo;
    *mx = hi;
}

/* Symmetric 4/5-bit blocks: d = max / -2^(bits-1) maps the largest
 * magnitude to the most negative quant; q = trunc(x/d + 2^(bits-1) + 0.5). */
static void quantize_sym(const float *x, uint8_t *y, int64_t n, int bits)
{
    const float half = (float)(1 << (bits - 1)), qmax = (float)((1 << bits) - 1);
    const float off = half + 0.5f; /* one constant: x*id + 8.5f rounds once, as ggml */
    const size_t bsize = bits == 4 ? sizeof(hx_block_q4_0) : sizeof(hx_block_q5_0);
    const size_t qs_off = bits == 4 ? offsetof(hx_block_q4_0, qs) : offsetof(hx_block_q5_0, qs);
    for (int64_t i = 0; i < n / HX_QK; i++, x += HX_QK, y += bsize) {
        float amax;
        const float d = hx_quant_signed_absmax(x, HX_QK, &amax) / -half;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        hx_st16(y, hx_fp32_to_fp16(d));
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            const int q0 = (int)hx_clampf(x[j] * id + off, 0, qmax);
            const int q1 = (int)hx_clampf(x[j + 16] * id + off, 0, qmax);
            y[qs_off + j] = (uint8_t)((q0 & 0xf) | ((q1 & 0xf) << 4));
            qh |= (uint32_t)(q0 >> 4) << j;
            qh |= (uint32_t)(q1 >> 4) << (j + 16);
        }
        if (bits == 5)
            memcpy(y + offsetof(hx_block_q5_0, qh), &qh, 4);
    }
}

/* Asymmetric blocks: x = d*q + min, d = (max - min) / (2^bits - 1). */
static void quantize_asym(const float *x, uint8_t *y, int64_t n, int bits)
{
    const float qmax = (float)((1 << bits) - 1);
    const size_t bsize = bits == 4 ? sizeof(hx_block_q4_1) : sizeof(hx_block_q5_1);
    const size_t qs_off = bits == 4 ? offsetof(hx_block_q4_1, qs) : offsetof(hx_block_q5_1, qs);
    for (int64_t i = 0; i < n / HX_QK; i++, x += HX_QK, y += bsize) {
        float mn, mx;
        min_max(x, HX_QK, &mn, &mx);
        const float d = (mx - mn) / qmax;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        hx_st16(y, hx_fp32_to_fp16(d));
        hx_st16(y + 2, hx_fp32_to_fp16(mn));
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            const int q0 = (int)hx_clampf((x[j] - mn) * id + 0.5f, 0, qmax);
            const int q1 = (int)hx_clampf((x[j + 16] - mn) * id + 0.5f, 0, qmax);
            y[qs_off + j] = (uint8_t)((q0 & 0xf) | ((q1 & 0xf) << 4));
            qh |= (uint32_t)(q0 >> 4) << j;
            qh |= (uint32_t)(q1 >> 4) << (j + 16);
        }
        if (bits == 5)
            memcpy(y + offsetof(hx_block_q5_1, qh), &qh, 4);
    }
}

void hx_quant_quantize_q4_0(const float *x, void *y, int64_t n) { quantize_sym(x, y, n, 4); }
void hx_quant_quantize_q5_0(const float *x, void *y, int64_t n) { quantize_sym(x, y, n, 5); }
void hx_quant_quantize_q4_1(const float *x, void *y, int64_t n) { quantize_asym(x, y, n, 4); }
void hx_quant_quantize_q5_1(const float *x, void *y, int64_t n) { quantize_asym(x, y, n, 5); }

/* 8-bit blocks: d = amax/127, q = round-half-away(x/d); Q8_1 adds d*sum(q). */
static void quantize_8(const float *x, uint8_t *y, int64_t n, int with_sum)
{
    const size_t bsize = with_sum ? sizeof(hx_block_q8_1) : sizeof(hx_block_q8_0);
    const size_t qs_off = with_sum ? offsetof(hx_block_q8_1, qs) : offsetof(hx_block_q8_0, qs);
    for (int64_t i = 0; i < n / HX_QK; i++, x += HX_QK, y += bsize) {
        float amax;
        hx_quant_signed_absmax(x, HX_QK, &amax);
        const float d = amax / 127.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        hx_st16(y, hx_fp32_to_fp16(d));
        int sum = 0;
        for (int j = 0; j < HX_QK; j++) {
            const int q = round_away(hx_clampf(x[j] * id, -127.0f, 127.0f));
            y[qs_off + j] = (uint8_t)(int8_t)q;
            sum += q;
        }
        if (with_sum)
            hx_st16(y + offsetof(hx_block_q8_1, s), hx_fp32_to_fp16((float)sum * d));
    }
}

void hx_quant_quantize_q8_0(const float *x, void *y, int64_t n) { quantize_8(x, y, n, 0); }
void hx_quant_quantize_q8_1(const float *x, void *y, int64_t n) { quantize_8(x, y, n, 1); }

void hx_quant_quantize_q8_K(const float *x, void *vy, int64_t n)
{
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += HX_QK_K, y += sizeof(hx_block_q8_K)) {
        int8_t *qs = (int8_t *)(y + offsetof(hx_block_q8_K, qs));
        float amax;
        const float max = hx_quant_signed_absmax(x, HX_QK_K, &amax);
        float d = 0;
        if (amax == 0) {
            memset(qs, 0, HX_QK_K);
        } else {
            /* -127/max, not 128: keeps every quant in -127..127 */
            const float iscale = -127.0f / max;
            for (int j = 0; j < HX_QK_K; j++)
                qs[j] = (int8_t)hx_clampi(hx_rne(iscale * x[j]), -128, 127);
            d = 1.0f / iscale;
        }
        memcpy(y + offsetof(hx_block_q8_K, d), &d, sizeof d);
        for (int g = 0; g < HX_QK_K / 16; g++) {
            int sum = 0;
            for (int l = 0; l < 16; l++)
                sum += qs[16 * g + l];
            hx_st16(y + offsetof(hx_block_q8_K, bsums) + 2 * g, (uint16_t)(int16_t)sum);
        }
    }
}

/* ---- K-quants ----------------------------------------------------------- */

/* Q4_K (nmax 15) and Q5_K (nmax 31): one super-block into its scales and
 * 0..nmax quants L[256]; writes d, dmin and scales at `y`. */
static void k4_quantize_block(const float *x, uint8_t *y, uint8_t *L, int nmax)
{
    float scales[8], mins[8], w[32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++)
            sum_x2 += xs[l] * xs[l];
        const float av = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++)
            w[l] = av + fabsf(xs[l]);
        scales[j] = nmax == 15 ? hx_quant_fit_scale_min(32, 15, xs, w, L + 32 * j, &mins[j], -1.0f, 0.1f, 20, 0)
                               : hx_quant_fit_scale_min(32, 31, xs, w, L + 32 * j, &mins[j], -0.5f, 0.1f, 15, 0);
        if (scales[j] > max_scale)
            max_scale = scales[j];
        if (mins[j] > max_min)
            max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; j++) {
        ls[j] = (uint8_t)hx_clampi(hx_rne(inv_scale * scales[j]), 0, 63);
        lm[j] = (uint8_t)hx_clampi(hx_rne(inv_min * mins[j]), 0, 63);
    }
    hx_quant_k4_pack_scales(y + offsetof(hx_block_q4_K, scales), ls, lm);
    const hx_half dh = hx_fp32_to_fp16(max_scale / 63.0f), mh = hx_fp32_to_fp16(max_min / 63.0f);
    hx_st16(y + offsetof(hx_block_q4_K, d), dh);
    hx_st16(y + offsetof(hx_block_q4_K, dmin), mh);
}

void hx_quant_k4_finish(const float *x, uint8_t *y, uint8_t *L, int nmax)
{
    /* requantize against the scales as stored */
    const float d = hx_fp16_to_fp32(hx_ld16(y + offsetof(hx_block_q4_K, d)));
    const float dmin = hx_fp16_to_fp32(hx_ld16(y + offsetof(hx_block_q4_K, dmin)));
    for (int j = 0; j < 8; j++) {
        uint8_t ls, lm;
        hx_quant_k4_scale_min(y + offsetof(hx_block_q4_K, scales), j, &ls, &lm);
        const float dj = d * (float)ls;
        if (dj == 0)
            continue;
        const float mj = dmin * (float)lm;
        for (int l = 0; l < 32; l++)
            L[32 * j + l] = (uint8_t)hx_clampi(hx_rne((x[32 * j + l] + mj) / dj), 0, nmax);
    }
    if (nmax == 15) {
        uint8_t *qs = y + offsetof(hx_block_q4_K, qs);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++)
                qs[32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
        return;
    }
    uint8_t *qs = y + offsetof(hx_block_q5_K, qs), *qh = y + offsetof(hx_block_q5_K, qh);
    memset(qh, 0, HX_QK_K / 8);
    for (int c = 0; c < 4; c++) {
        for (int l = 0; l < 32; l++) {
            const int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
            qs[32 * c + l] = (uint8_t)((lo & 0xf) | ((hi & 0xf) << 4));
            qh[l] |= (uint8_t)(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
        }
    }
}

void hx_quant_quantize_q4_K(const float *x, void *vy, int64_t n)
{
    uint8_t *y = vy, L[HX_QK_K];
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += HX_QK_K, y += sizeof(hx_block_q4_K)) {
        k4_quantize_block(x, y, L, 15);
        hx_quant_k4_finish(x, y, L, 15);
    }
}

void hx_quant_quantize_q5_K(const float *x, void *vy, int64_t n)
{
    uint8_t *y = vy, L[HX_QK_K];
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += HX_QK_K, y += sizeof(hx_block_q5_K)) {
        k4_quantize_block(x, y, L, 31);
        hx_quant_k4_finish(x, y, L, 31);
    }
}

/* Sixteen symmetric sub-blocks of 16 (weights x^2, or the importance
 * weights qw as they are: ggml's quantize_row_q6_K_impl does not mix in
 * the row's spread as the other K-quants do). */
static void q6_K_rows(const float *x, uint8_t *y, int64_t n, const float *qw)
{
    int8_t L[HX_QK_K];
    float scales[16];
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += HX_QK_K, y += sizeof(hx_block_q6_K)) {
        float max_scale = 0, max_abs = 0;
        for (int g = 0; g < 16; g++) {
            scales[g] = hx_quant_fit_sym(16, 32, x + 16 * g, L + 16 * g, qw ? qw + HX_QK_K * i + 16 * g : NULL);
            if (fabsf(scales[g]) > max_abs) {
                max_abs = fabsf(scales[g]);
                max_scale = scales[g];
            }
        }
        memset(y, 0, sizeof(hx_block_q6_K));
        if (max_abs < HX_GROUP_EPS)
            continue;
        const float iscale = -128.0f / max_scale;
        const hx_half dh = hx_fp32_to_fp16(1 / iscale);
        hx_st16(y + offsetof(hx_block_q6_K, d), dh);
        int8_t *sc = (int8_t *)(y + offsetof(hx_block_q6_K, scales));
        for (int g = 0; g < 16; g++)
            sc[g] = (int8_t)hx_clampi(hx_rne(iscale * scales[g]), -128, 127);
        const float d = hx_fp16_to_fp32(dh);
        for (int g = 0; g < 16; g++) {
            const float dg = d * (float)sc[g];
            if (dg == 0)
                continue;
            for (int l = 0; l < 16; l++)
                L[16 * g + l] = (int8_t)(hx_clampi(hx_rne(x[16 * g + l] / dg), -32, 31) + 32);
        }
        uint8_t *ql = y + offsetof(hx_block_q6_K, ql), *qh = y + offsetof(hx_block_q6_K, qh);
        for (int h = 0; h < 2; h++) {
            const int8_t *Lh = L + 128 * h;
            for (int l = 0; l < 32; l++) {
                ql[64 * h + l] = (uint8_t)((Lh[l] & 0xf) | ((Lh[l + 64] & 0xf) << 4));
                ql[64 * h + l + 32] = (uint8_t)((Lh[l + 32] & 0xf) | ((Lh[l + 96] & 0xf) << 4));
                qh[32 * h + l] = (uint8_t)((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) |
                                           ((Lh[l + 96] >> 4) << 6));
            }
        }
    }
}

void hx_quant_quantize_q6_K(const float *x, void *y, int64_t n) { q6_K_rows(x, y, n, NULL); }

/* ggml's quantize_q6_K: with no importance weights, the reference above. */
void hx_quant_weighted_q6_K(const float *x, void *y, int64_t n, const float *qw) { q6_K_rows(x, y, n, qw); }
