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

#include "kernels_cpu/quant_impl.h"

#define GROUP_EPS 1e-15f

static inline float clampf(float v, float lo, float hi) { return fminf(fmaxf(v, lo), hi); }

/* Round half to even for |v| < 2^22 (the magic-number trick). */
static inline int rne(float v)
{
    v = clampf(v, -4194303.0f, 4194303.0f);
    return (int)((v + 12582912.0f) - 12582912.0f);
}

/* roundf for |v| <= 127 without a libm call: truncate, then step away
 * from zero when the (exactly computed) fraction is at least one half. */
static inline int round_away(float v)
{
    int i = (int)v;
    const float f = v - (float)i;
    i += (f >= 0.5f) - (f <= -0.5f);
    return i;
}

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

static inline void st16(uint8_t *p, uint16_t v) { memcpy(p, &v, sizeof v); }

void hx_quant_quantize_f32(const float *x, void *y, int64_t n) { memcpy(y, x, (size_t)n * sizeof(float)); }

void hx_quant_quantize_f16(const float *x, void *vy, int64_t n)
{
    uint8_t *y = vy;
    for (int64_t i = 0; i < n; i++)
        st16(y + 2 * i, hx_fp32_to_fp16(x[i]));
}

void hx_quant_quantize_bf16(const float *x, void *vy, int64_t n)
{
    uint8_t *y = vy;
    for (int64_t i = 0; i < n; i++)
        st16(y + 2 * i, hx_fp32_to_bf16(x[i]));
}

/* The element of largest magnitude, with its sign (the first such). */
static float signed_absmax(const float *x, int n, float *amax_out)
{
    float amax = 0, max = 0;
    for (int j = 0; j < n; j++) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    *amax_out = amax;
    return max;
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
        const float d = signed_absmax(x, HX_QK, &amax) / -half;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        st16(y, hx_fp32_to_fp16(d));
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            const int q0 = (int)clampf(x[j] * id + off, 0, qmax);
            const int q1 = (int)clampf(x[j + 16] * id + off, 0, qmax);
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
        st16(y, hx_fp32_to_fp16(d));
        st16(y + 2, hx_fp32_to_fp16(mn));
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            const int q0 = (int)clampf((x[j] - mn) * id + 0.5f, 0, qmax);
            const int q1 = (int)clampf((x[j + 16] - mn) * id + 0.5f, 0, qmax);
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
        signed_absmax(x, HX_QK, &amax);
        const float d = amax / 127.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        st16(y, hx_fp32_to_fp16(d));
        int sum = 0;
        for (int j = 0; j < HX_QK; j++) {
            const int q = round_away(clampf(x[j] * id, -127.0f, 127.0f));
            y[qs_off + j] = (uint8_t)(int8_t)q;
            sum += q;
        }
        if (with_sum)
            st16(y + offsetof(hx_block_q8_1, s), hx_fp32_to_fp16((float)sum * d));
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
        const float max = signed_absmax(x, HX_QK_K, &amax);
        float d = 0;
        if (amax == 0) {
            memset(qs, 0, HX_QK_K);
        } else {
            /* -127/max, not 128: keeps every quant in -127..127 */
            const float iscale = -127.0f / max;
            for (int j = 0; j < HX_QK_K; j++)
                qs[j] = (int8_t)clampi(rne(iscale * x[j]), -128, 127);
            d = 1.0f / iscale;
        }
        memcpy(y + offsetof(hx_block_q8_K, d), &d, sizeof d);
        for (int g = 0; g < HX_QK_K / 16; g++) {
            int sum = 0;
            for (int l = 0; l < 16; l++)
                sum += qs[16 * g + l];
            st16(y + offsetof(hx_block_q8_K, bsums) + 2 * g, (uint16_t)(int16_t)sum);
        }
    }
}

/* ---- K-quants ----------------------------------------------------------- */

/* Weighted least-squares fit of x[i] ~ scale*L[i] - min, L in 0..nmax,
 * min >= 0: tries the plain range split and nstep+1 stretched inverse
 * scales (nmax + rmin + rdelta*k) / (max - min), keeping the one of least
 * weighted squared error.  Returns the scale, stores the min. */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *the_min,
                           float rmin, float rdelta, int nstep)
{
    uint8_t trial[32];
    float lo = x[0], hi = x[0], sum_w = w[0], sum_x = w[0] * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < lo)
            lo = x[i];
        if (x[i] > hi)
            hi = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (lo > 0)
        lo = 0;
    if (hi == lo) {
        memset(L, 0, (size_t)n);
        *the_min = -lo;
        return 0;
    }
    float iscale = (float)nmax / (hi - lo);
    float scale = 1 / iscale, best = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(rne(iscale * (x[i] - lo)), 0, nmax);
        const float diff = scale * (float)L[i] + lo - x[i];
        best += w[i] * (diff * diff);
    }
    for (int k = 0; k <= nstep; k++) {
        iscale = (rmin + rdelta * (float)k + (float)nmax) / (hi - lo);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            const int l = clampi(rne(iscale * (x[i] - lo)), 0, nmax);
            trial[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)l * (float)l;
            sum_xl += w[i] * (float)l * x[i];
        }
        const float det = sum_w * sum_l2 - sum_l * sum_l;
        if (!(det > 0))
            continue;
        float s = (sum_w * sum_xl - sum_x * sum_l) / det;
        float m = (sum_l2 * sum_x - sum_l * sum_xl) / det;
        if (m > 0) { /* the offset must not exceed zero: refit the scale alone */
            m = 0;
            s = sum_xl / sum_l2;
        }
        float err = 0;
        for (int i = 0; i < n; i++) {
            const float diff = s * (float)trial[i] + m - x[i];
            err += w[i] * (diff * diff);
        }
        if (err < best) {
            memcpy(L, trial, (size_t)n);
            best = err;
            scale = s;
            lo = m;
        }
    }
    *the_min = -lo;
    return scale;
}

/* Packs eight 6-bit scales and mins into the 12 bytes of a K4 block. */
static void k4_pack_scales(uint8_t *out, const uint8_t *ls, const uint8_t *lm)
{
    for (int j = 0; j < 4; j++) {
        out[j] = (uint8_t)(ls[j] | ((ls[j + 4] >> 4) << 6));
        out[j + 4] = (uint8_t)(lm[j] | ((lm[j + 4] >> 4) << 6));
        out[j + 8] = (uint8_t)((ls[j + 4] & 0xf) | ((lm[j + 4] & 0xf) << 4));
    }
}

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
        scales[j] = nmax == 15 ? fit_scale_min(32, 15, xs, w, L + 32 * j, &mins[j], -1.0f, 0.1f, 20)
                               : fit_scale_min(32, 31, xs, w, L + 32 * j, &mins[j], -0.5f, 0.1f, 15);
        if (scales[j] > max_scale)
            max_scale = scales[j];
        if (mins[j] > max_min)
            max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; j++) {
        ls[j] = (uint8_t)clampi(rne(inv_scale * scales[j]), 0, 63);
        lm[j] = (uint8_t)clampi(rne(inv_min * mins[j]), 0, 63);
    }
    k4_pack_scales(y + offsetof(hx_block_q4_K, scales), ls, lm);
    const hx_half dh = hx_fp32_to_fp16(max_scale / 63.0f), mh = hx_fp32_to_fp16(max_min / 63.0f);
    st16(y + offsetof(hx_block_q4_K, d), dh);
    st16(y + offsetof(hx_block_q4_K, dmin), mh);
    /* requantize against the scales as stored */
    const float d = hx_fp16_to_fp32(dh), dmin = hx_fp16_to_fp32(mh);
    for (int j = 0; j < 8; j++) {
        const float dj = d * (float)ls[j];
        if (dj == 0)
            continue;
        const float mj = dmin * (float)lm[j];
        for (int l = 0; l < 32; l++)
            L[32 * j + l] = (uint8_t)clampi(rne((x[32 * j + l] + mj) / dj), 0, nmax);
    }
}

void hx_quant_quantize_q4_K(const float *x, void *vy, int64_t n)
{
    uint8_t *y = vy, L[HX_QK_K];
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += HX_QK_K, y += sizeof(hx_block_q4_K)) {
        k4_quantize_block(x, y, L, 15);
        uint8_t *qs = y + offsetof(hx_block_q4_K, qs);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++)
                qs[32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
    }
}

void hx_quant_quantize_q5_K(const float *x, void *vy, int64_t n)
{
    uint8_t *y = vy, L[HX_QK_K];
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += HX_QK_K, y += sizeof(hx_block_q5_K)) {
        k4_quantize_block(x, y, L, 31);
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
}

/* Symmetric fit of x ~ scale*l, l in -nmax..nmax-1, weights x^2: the best
 * of 19 inverse scales around nmax/max by weighted least squares. */
static float fit_scale_sym(int n, int nmax, const float *x, int8_t *L)
{
    float amax;
    const float max = signed_absmax(x, n, &amax);
    if (amax < GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0;
    }
    float iscale = -(float)nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = clampi(rne(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int k = -9; k <= 9; k++) {
        if (k == 0)
            continue;
        iscale = -((float)nmax + 0.1f * (float)k) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            const int l = clampi(rne(iscale * x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + clampi(rne(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

void hx_quant_quantize_q6_K(const float *x, void *vy, int64_t n)
{
    uint8_t *y = vy;
    int8_t L[HX_QK_K];
    float scales[16];
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += HX_QK_K, y += sizeof(hx_block_q6_K)) {
        float max_scale = 0, max_abs = 0;
        for (int g = 0; g < 16; g++) {
            scales[g] = fit_scale_sym(16, 32, x + 16 * g, L + 16 * g);
            if (fabsf(scales[g]) > max_abs) {
                max_abs = fabsf(scales[g]);
                max_scale = scales[g];
            }
        }
        memset(y, 0, sizeof(hx_block_q6_K));
        if (max_abs < GROUP_EPS)
            continue;
        const float iscale = -128.0f / max_scale;
        const hx_half dh = hx_fp32_to_fp16(1 / iscale);
        st16(y + offsetof(hx_block_q6_K, d), dh);
        int8_t *sc = (int8_t *)(y + offsetof(hx_block_q6_K, scales));
        for (int g = 0; g < 16; g++)
            sc[g] = (int8_t)clampi(rne(iscale * scales[g]), -128, 127);
        const float d = hx_fp16_to_fp32(dh);
        for (int g = 0; g < 16; g++) {
            const float dg = d * (float)sc[g];
            if (dg == 0)
                continue;
            for (int l = 0; l < 16; l++)
                L[16 * g + l] = (int8_t)(clampi(rne(x[16 * g + l] / dg), -32, 31) + 32);
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
