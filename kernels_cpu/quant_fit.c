/* The scale searches of the weight quantizers (kernels_cpu/quant_fit.h):
 * ggml's algorithms, with its order of float operations kept (a sum is
 * w*x*l, not w*(x*l)), so that the blocks match llama-quantize's bytes. */
#include <math.h>

#include "kernels_cpu/quant_fit.h"

const int8_t hx_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* The element of largest magnitude, with its sign (the first such). */
float hx_quant_signed_absmax(const float *x, int n, float *amax_out)
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

float hx_quant_sum_sq(const float *x, int64_t n)
{
    float sum = 0;
    for (int64_t j = 0; j < n; j++)
        sum += x[j] * x[j];
    return sum;
}

float hx_quant_importance(float *w, const float *x, const float *qw, int n, float sigma2)
{
    float sum = 0;
    for (int j = 0; j < n; j++) {
        w[j] = qw[j] * sqrtf(sigma2 + x[j] * x[j]);
        sum += w[j];
    }
    return sum;
}

float hx_quant_fit_sym(int n, int nmax, const float *x, int8_t *L, const float *w)
{
    float amax;
    const float max = hx_quant_signed_absmax(x, n, &amax);
    if (amax < HX_GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0;
    }
    float iscale = -(float)nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = hx_clampi(hx_rne(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        const float wi = w ? w[i] : x[i] * x[i];
        sumlx += wi * x[i] * (float)l;
        suml2 += wi * (float)l * (float)l;
    }
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int k = -9; k <= 9; k++) {
        if (k == 0)
            continue;
        iscale = -((float)nmax + 0.1f * (float)k) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            const int l = hx_clampi(hx_rne(iscale * x[i]), -nmax, nmax - 1);
            const float wi = w ? w[i] : x[i] * x[i];
            sumlx += wi * x[i] * (float)l;
            suml2 += wi * (float)l * (float)l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + hx_clampi(hx_rne(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

float hx_quant_fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *the_min,
                             float rmin, float rdelta, int nstep, int use_mad)
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
        L[i] = (uint8_t)hx_clampi(hx_rne(iscale * (x[i] - lo)), 0, nmax);
        const float diff = scale * (float)L[i] + lo - x[i];
        best += w[i] * (use_mad ? fabsf(diff) : diff * diff);
    }
    for (int k = 0; k <= nstep; k++) {
        iscale = (rmin + rdelta * (float)k + (float)nmax) / (hi - lo);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            const int l = hx_clampi(hx_rne(iscale * (x[i] - lo)), 0, nmax);
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
            err += w[i] * (use_mad ? fabsf(diff) : diff * diff);
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

float hx_quant_fit_pos(int n, int nmax, const float *x, uint8_t *L, const float *w)
{
    float max = 0;
    for (int i = 0; i < n; i++)
        max = fmaxf(max, x[i]);
    if (max < HX_GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0;
    }
    float iscale = (float)nmax / max;
    for (int i = 0; i < n; i++)
        L[i] = (uint8_t)hx_rne(iscale * x[i]); /* scales are >= 0; ggml stores them as bytes */
    float scale = 1 / iscale, best = 0;
    for (int i = 0; i < n; i++) {
        const float diff = x[i] - scale * (float)L[i];
        best += w[i] * diff * diff;
    }
    for (int k = -4; k <= 4; k++) {
        if (k == 0)
            continue;
        const float is = (0.1f * (float)k + (float)nmax) / max, sc = 1 / is;
        float err = 0;
        for (int i = 0; i < n; i++) {
            const int l = hx_rne(is * x[i]) < nmax ? hx_rne(is * x[i]) : nmax;
            const float diff = x[i] - sc * (float)l;
            err += w[i] * diff * diff;
        }
        if (err < best) {
            best = err;
            iscale = is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = hx_rne(iscale * x[i]) < nmax ? hx_rne(iscale * x[i]) : nmax;
        L[i] = (uint8_t)l;
        sumlx += w[i] * x[i] * (float)l;
        suml2 += w[i] * (float)l * (float)l;
    }
    for (int pass = 0; pass < 5; pass++) { /* move one quant while the fit improves */
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float slx = sumlx - w[i] * x[i] * (float)L[i];
            float sl2 = suml2 - w[i] * (float)L[i] * (float)L[i];
            if (slx > 0 && sl2 > 0) {
                int nl = hx_rne(x[i] * sl2 / slx);
                nl = nl < nmax ? nl : nmax;
                if (nl != L[i]) {
                    slx += w[i] * x[i] * (float)nl;
                    sl2 += w[i] * (float)nl * (float)nl;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (uint8_t)nl;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed)
            break;
    }
    return suml2 > 0 ? sumlx / suml2 : 0.0f;
}

float hx_quant_fit_q3(int n, int nmax, const float *x, int8_t *L)
{
    float amax;
    const float max = hx_quant_signed_absmax(x, n, &amax);
    if (amax < HX_GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0;
    }
    const float iscale = -(float)nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = hx_clampi(hx_rne(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    for (int pass = 0; pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * (float)L[i] * (float)L[i];
                const int nl = hx_clampi(hx_rne(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (nl != L[i]) {
                    slx += w * x[i] * (float)nl;
                    sl2 += w * (float)nl * (float)nl;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)nl;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed)
            break;
    }
    for (int i = 0; i < n; i++)
        L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0 ? sumlx / suml2 : 0.0f;
}

/* The index of the value nearest v (the lower one on a tie). */
static int iq4_nearest(float v)
{
    const int8_t *val = hx_iq4nl_values;
    if (v <= val[0])
        return 0;
    if (v >= val[15])
        return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (v < val[mid])
            hi = mid;
        else
            lo = mid;
    }
    return v - val[hi - 1] < val[hi] - v ? hi - 1 : hi;
}

void hx_quant_fit_iq4(int sb, const float *x, uint8_t *dh, uint8_t *q4, uint8_t *scales_h, uint8_t *scales_l,
                      const float *qw, int ntry)
{
    const int8_t *val = hx_iq4nl_values;
    float scales[HX_QK_K / 32] = {0}, weight[32];
    uint8_t L[HX_QK_K];
    const float sigma2 = hx_quant_sum_sq(x, sb) * (2.f / (float)sb);
    memset(q4, 0, (size_t)sb / 2);
    hx_st16(dh, hx_fp32_to_fp16(0.f));
    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < sb / 32; ib++) {
        const float *xb = x + 32 * ib;
        uint8_t *Lb = L + 32 * ib;
        for (int j = 0; j < 32; j++)
            weight[j] = qw ? qw[32 * ib + j] * sqrtf(sigma2 + xb[j] * xb[j]) : xb[j] * xb[j];
        float amax;
        const float max = hx_quant_signed_absmax(xb, 32, &amax);
        if (amax < HX_GROUP_EPS) {
            scales[ib] = 0;
            continue;
        }
        float d = ntry > 0 ? -max / (float)val[0] : max / (float)val[0];
        float id = 1 / d, sumqx = 0, sumq2 = 0;
        for (int j = 0; j < 32; j++) {
            const int l = iq4_nearest(id * xb[j]);
            Lb[j] = (uint8_t)l;
            const float q = (float)val[l], w = weight[j];
            sumqx += w * q * xb[j];
            sumq2 += w * q * q;
        }
        d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
        float best = d * sumqx;
        for (int t = -ntry; t <= ntry; t++) {
            id = ((float)t + (float)val[0]) / max;
            sumqx = sumq2 = 0;
            for (int j = 0; j < 32; j++) {
                const float q = (float)val[iq4_nearest(id * xb[j])], w = weight[j];
                sumqx += w * q * xb[j];
                sumq2 += w * q * q;
            }
            if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                d = sumqx / sumq2;
                best = d * sumqx;
            }
        }
        scales[ib] = d;
        if (fabsf(d) > amax_scale) {
            amax_scale = fabsf(d);
            max_scale = d;
        }
    }
    if (sb > 32) { /* IQ4_XS: 6-bit sub-block scales under one f16 */
        memset(scales_h, 0, 2);
        uint16_t sh = 0;
        const float d = -max_scale / 32;
        hx_st16(dh, hx_fp32_to_fp16(d));
        const float id = d != 0 ? 1 / d : 0.f;
        for (int ib = 0; ib < sb / 32; ib++) {
            int l = hx_clampi(hx_rne(id * scales[ib]), -32, 31);
            const float dl = d * (float)l, idl = dl != 0 ? 1 / dl : 0.f;
            for (int j = 0; j < 32; j++)
                L[32 * ib + j] = (uint8_t)iq4_nearest(idl * x[32 * ib + j]);
            l += 32;
            if (ib % 2 == 0)
                scales_l[ib / 2] = (uint8_t)(l & 0xf);
            else
                scales_l[ib / 2] |= (uint8_t)((l & 0xf) << 4);
            sh |= (uint16_t)((l >> 4) << (2 * ib));
        }
        hx_st16(scales_h, sh);
    } else {
        hx_st16(dh, hx_fp32_to_fp16(scales[0]));
        if (ntry > 0) {
            const float id = scales[0] != 0 ? 1 / scales[0] : 0;
            for (int j = 0; j < sb; j++)
                L[j] = (uint8_t)iq4_nearest(id * x[j]);
        }
    }
    for (int i = 0; i < sb / 32; i++)
        for (int j = 0; j < 16; j++)
            q4[16 * i + j] = (uint8_t)(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

void hx_quant_k4_pack_scales(uint8_t *out, const uint8_t *ls, const uint8_t *lm)
{
    for (int j = 0; j < 4; j++) {
        out[j] = (uint8_t)(ls[j] | ((ls[j + 4] >> 4) << 6));
        out[j + 4] = (uint8_t)(lm[j] | ((lm[j + 4] >> 4) << 6));
        out[j + 8] = (uint8_t)((ls[j + 4] & 0xf) | ((lm[j + 4] & 0xf) << 4));
    }
}
