/* Scalar references of the layer ops, in double.  Slow and obvious on
 * purpose: they are the definition the kernels are held to. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/ref_ops.h"

double hx_ref_f16_to_f64(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
    double v;
    if (exp == 0)
        v = ldexp(man, -24);
    else if (exp == 31)
        v = man ? NAN : INFINITY;
    else
        v = ldexp(man + 1024, exp - 25);
    return sign ? -v : v;
}

uint16_t hx_ref_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    if (isnan(f))
        return sign | 0x7e00;
    double a = fabs((double)f);
    if (a >= 65520.0) /* rounds to infinity */
        return sign | 0x7c00;
    /* Scale to the f16 grid of a's binade and round half to even. */
    int e;
    frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    int exp16 = e - 1 + 15;
    double quantum = exp16 <= 0 ? ldexp(1, -24) : ldexp(1, e - 11);
    double n = a / quantum, r = floor(n);
    if (n - r > 0.5 || (n - r == 0.5 && fmod(r, 2) != 0))
        r += 1;
    double v = r * quantum;
    /* Re-encode v, which is exactly representable. */
    if (v == 0)
        return sign;
    frexp(v, &e);
    exp16 = e - 1 + 15;
    if (exp16 <= 0)
        return sign | (uint16_t)(v / ldexp(1, -24));
    uint16_t man = (uint16_t)(v / ldexp(1, e - 11)) - 1024;
    return sign | (uint16_t)(exp16 << 10) | man;
}

uint32_t hx_ref_block(uint32_t type)
{
    switch (type) {
    case HX_REF_F32: case HX_REF_F16: return 1;
    case HX_REF_Q8_0: case HX_REF_Q4_0: case HX_REF_IQ4_NL: return 32;
    case HX_REF_Q4_K: case HX_REF_Q2_K: case HX_REF_Q3_K: case HX_REF_IQ4_XS: return 256;
    }
    return 0;
}

uint32_t hx_ref_block_bytes(uint32_t type)
{
    switch (type) {
    case HX_REF_F32: return 4;
    case HX_REF_F16: return 2;
    case HX_REF_Q8_0: return 34;
    case HX_REF_Q4_0: return 18;
    case HX_REF_Q4_K: return 144;
    case HX_REF_Q2_K: return 84;
    case HX_REF_Q3_K: return 110;
    case HX_REF_IQ4_NL: return 18;
    case HX_REF_IQ4_XS: return 136;
    }
    return 0;
}

size_t hx_ref_row_bytes(uint32_t type, uint32_t n) { return (size_t)n / hx_ref_block(type) * hx_ref_block_bytes(type); }

static uint16_t u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static void q4_k_scale_min(const uint8_t *s, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* ggml-common.h's kvalues_iq4nl: the sixteen levels of IQ4_NL/IQ4_XS. */
static const int iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* Q2_K / Q3_K: the 2 low bits of element e of a super-block, from the
 * 64 bytes of qs: in each half of 128, element 32k + l sits at bits
 * 2k..2k+1 of byte l of that half's 32. */
static int low2(const uint8_t *qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3; }

void hx_ref_dequantize(uint32_t type, const void *row, double *out, uint32_t n)
{
    const uint8_t *p = row;
    switch (type) {
    case HX_REF_F32:
        for (uint32_t i = 0; i < n; i++) {
            float f;
            memcpy(&f, p + 4 * i, 4);
            out[i] = f;
        }
        break;
    case HX_REF_F16:
        for (uint32_t i = 0; i < n; i++)
            out[i] = hx_ref_f16_to_f64(u16(p + 2 * i));
        break;
    case HX_REF_Q8_0:
        for (uint32_t b = 0; b < n / 32; b++, p += 34)
            for (int i = 0; i < 32; i++)
                out[32 * b + i] = hx_ref_f16_to_f64(u16(p)) * (int8_t)p[2 + i];
        break;
    case HX_REF_Q4_0:
        for (uint32_t b = 0; b < n / 32; b++, p += 18) {
            double d = hx_ref_f16_to_f64(u16(p));
            for (int i = 0; i < 16; i++) {
                out[32 * b + i] = d * ((p[2 + i] & 15) - 8);
                out[32 * b + 16 + i] = d * ((p[2 + i] >> 4) - 8);
            }
        }
        break;
    case HX_REF_Q4_K:
        for (uint32_t b = 0; b < n / 256; b++, p += 144) {
            double d = hx_ref_f16_to_f64(u16(p)), dmin = hx_ref_f16_to_f64(u16(p + 2));
            for (int sub = 0; sub < 8; sub++) {
                int sc, m;
                q4_k_scale_min(p + 4, sub, &sc, &m);
                const uint8_t *q = p + 16 + 32 * (sub / 2);
                for (int l = 0; l < 32; l++) {
                    int nib = sub % 2 ? q[l] >> 4 : q[l] & 15;
                    out[256 * b + 32 * sub + l] = d * sc * nib - dmin * m;
                }
            }
        }
        break;
    case HX_REF_Q2_K: /* scales[16], qs[64], d, dmin: d*(sc & 15)*q - dmin*(sc >> 4) */
        for (uint32_t b = 0; b < n / 256; b++, p += 84) {
            double d = hx_ref_f16_to_f64(u16(p + 80)), dmin = hx_ref_f16_to_f64(u16(p + 82));
            for (int e = 0; e < 256; e++)
                out[256 * b + e] = d * (p[e / 16] & 15) * low2(p + 16, e) - dmin * (p[e / 16] >> 4);
        }
        break;
    case HX_REF_Q3_K: /* hmask[32], qs[64], scales[12], d: d*(sc - 32)*(q - 4) */
        for (uint32_t b = 0; b < n / 256; b++, p += 110) {
            double d = hx_ref_f16_to_f64(u16(p + 108));
            for (int e = 0; e < 256; e++) {
                int s = e / 16, lo = s < 8 ? p[96 + s] & 15 : p[96 + s - 8] >> 4;
                int sc = (lo | (((p[96 + 8 + s % 4] >> (2 * (s / 4))) & 3) << 4)) - 32;
                int high = (p[e % 32] >> ((e / 128) * 4 + (e % 128) / 32)) & 1;
                out[256 * b + e] = d * sc * (low2(p + 32, e) + 4 * high - 4);
            }
        }
        break;
    case HX_REF_IQ4_NL: /* d, qs[16]: d * value[nibble] */
        for (uint32_t b = 0; b < n / 32; b++, p += 18) {
            double d = hx_ref_f16_to_f64(u16(p));
            for (int i = 0; i < 16; i++) {
                out[32 * b + i] = d * iq4nl_values[p[2 + i] & 15];
                out[32 * b + 16 + i] = d * iq4nl_values[p[2 + i] >> 4];
            }
        }
        break;
    case HX_REF_IQ4_XS: /* d, scales_h, scales_l[4], qs[128]: d * (ls - 32) * value */
        for (uint32_t b = 0; b < n / 256; b++, p += 136) {
            double d = hx_ref_f16_to_f64(u16(p));
            for (int s = 0; s < 8; s++) {
                int ls = ((p[4 + s / 2] >> (4 * (s % 2))) & 15) | (((u16(p + 2) >> (2 * s)) & 3) << 4);
                for (int i = 0; i < 16; i++) {
                    out[256 * b + 32 * s + i] = d * (ls - 32) * iq4nl_values[p[8 + 16 * s + i] & 15];
                    out[256 * b + 32 * s + 16 + i] = d * (ls - 32) * iq4nl_values[p[8 + 16 * s + i] >> 4];
                }
            }
        }
        break;
    }
}

/* How the KV cache stores Q4_0: for each block, quants l = round(x * s)
 * (half to even) clamped to -8..7 for the inverse scales s = -8/max and
 * -(8 + k/10)/max, k = ±1..±9, max the value of largest magnitude; each
 * rounding's weighted least-squares scale sum(w x l) / sum(w l l), with
 * w = x^2 for keys and 1 for values; the rounding whose
 * sum(w x l)^2 / sum(w l l) is largest (the first such) wins, stored as
 * d = that scale, q = l + 8.  Sums in float, in element order. */
static float ref_q4_0_fit(const float *x, float s, int values, int *l, float *sumlx, float *suml2)
{
    *sumlx = *suml2 = 0;
    for (int i = 0; i < 32; i++) {
        float r = nearbyintf(s * x[i]), w = values ? 1.0f : x[i] * x[i];
        l[i] = r < -8 ? -8 : r > 7 ? 7 : (int)r;
        *sumlx += w * x[i] * (float)l[i];
        *suml2 += w * (float)l[i] * (float)l[i];
    }
    return *suml2 != 0 ? *sumlx / *suml2 : 0.0f;
}

void hx_ref_quantize_q4_0_kv(const float *x, uint8_t *out, uint32_t n, int values)
{
    for (uint32_t b = 0; b < n / 32; b++, x += 32, out += 18) {
        float amax = 0, max = 0;
        for (int i = 0; i < 32; i++)
            if (amax < fabsf(x[i])) {
                amax = fabsf(x[i]);
                max = x[i];
            }
        int l[32], best_l[32];
        for (int i = 0; i < 32; i++)
            best_l[i] = -8; /* a block of zeros: d = 0, every q 0 */
        float d = 0;
        if (amax >= 1e-15f) {
            float sumlx, suml2;
            d = ref_q4_0_fit(x, -8.0f / max, values, best_l, &sumlx, &suml2);
            float best = d * sumlx;
            for (int k = -9; k <= 9; k++) {
                if (k == 0)
                    continue;
                float scale = ref_q4_0_fit(x, -(8.0f + 0.1f * (float)k) / max, values, l, &sumlx, &suml2);
                if (suml2 > 0 && sumlx * sumlx > best * suml2) {
                    memcpy(best_l, l, sizeof l);
                    d = scale;
                    best = scale * sumlx;
                }
            }
        }
        uint16_t h = hx_ref_f32_to_f16(d);
        out[0] = (uint8_t)h;
        out[1] = (uint8_t)(h >> 8);
        for (int i = 0; i < 16; i++)
            out[2 + i] = (uint8_t)((best_l[i] + 8) | (best_l[16 + i] + 8) << 4);
    }
}

/* How the KV cache stores Q8_0, keys and values alike: for each block,
 * quants l = round(x * s) (half to even) clamped to -127..127 for the
 * inverse scales s = (127 - c) / amax, c = 0..15; each rounding's
 * least-squares scale sum(x l) / sum(l l); the rounding whose
 * sum(x l)^2 / sum(l l) is largest (the first such) wins, stored as
 * d = that scale, q = l.  Sums in float, in element order. */
void hx_ref_quantize_q8_0_kv(const float *x, uint8_t *out, uint32_t n)
{
    for (uint32_t b = 0; b < n / 32; b++, x += 32, out += 34) {
        float amax = 0;
        for (int i = 0; i < 32; i++)
            amax = fmaxf(amax, fabsf(x[i]));
        int best_l[32] = {0};
        float d = 0, best = 0;
        for (int c = 0; amax >= 1e-15f && c < 16; c++) {
            const float s = (float)(127 - c) / amax;
            int l[32];
            float sumlx = 0, suml2 = 0;
            for (int i = 0; i < 32; i++) {
                float r = nearbyintf(s * x[i]);
                l[i] = r < -127 ? -127 : r > 127 ? 127 : (int)r;
                sumlx += x[i] * (float)l[i];
                suml2 += (float)l[i] * (float)l[i];
            }
            if (c == 0 || (suml2 > 0 && sumlx * sumlx > best * suml2)) {
                memcpy(best_l, l, sizeof l);
                d = suml2 != 0 ? sumlx / suml2 : 0.0f;
                best = d * sumlx;
            }
        }
        uint16_t h = hx_ref_f32_to_f16(d);
        out[0] = (uint8_t)h;
        out[1] = (uint8_t)(h >> 8);
        for (int i = 0; i < 32; i++)
            out[2 + i] = (uint8_t)(int8_t)best_l[i];
    }
}

float hx_ref_uniform(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return (float)((*seed >> 8) & 0xffffff) / (float)(1 << 23) - 1.0f;
}

static unsigned rand_byte(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return (*seed >> 16) & 255;
}

static void put_f16(uint8_t *p, float f)
{
    uint16_t h = hx_ref_f32_to_f16(f);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

void hx_ref_random_row(uint32_t type, void *row, uint32_t n, unsigned *seed)
{
    uint8_t *p = row;
    size_t bytes = hx_ref_row_bytes(type, n);
    for (size_t i = 0; i < bytes; i++)
        p[i] = (uint8_t)rand_byte(seed);
    switch (type) {
    case HX_REF_F32:
        for (uint32_t i = 0; i < n; i++) {
            float f = hx_ref_uniform(seed);
            memcpy(p + 4 * i, &f, 4);
        }
        break;
    case HX_REF_F16:
        for (uint32_t i = 0; i < n; i++)
            put_f16(p + 2 * i, hx_ref_uniform(seed));
        break;
    case HX_REF_Q8_0: /* scales of a trained model's magnitude, random quants */
        for (uint32_t b = 0; b < n / 32; b++)
            put_f16(p + 34 * b, hx_ref_uniform(seed) * 0.02f);
        break;
    case HX_REF_Q4_0:
        for (uint32_t b = 0; b < n / 32; b++)
            put_f16(p + 18 * b, hx_ref_uniform(seed) * 0.05f);
        break;
    case HX_REF_Q4_K:
        for (uint32_t b = 0; b < n / 256; b++) {
            put_f16(p + 144 * b, hx_ref_uniform(seed) * 0.01f);
            put_f16(p + 144 * b + 2, hx_ref_uniform(seed) * 0.01f);
        }
        break;
    case HX_REF_Q2_K:
        for (uint32_t b = 0; b < n / 256; b++) {
            put_f16(p + 84 * b + 80, hx_ref_uniform(seed) * 0.01f);
            put_f16(p + 84 * b + 82, hx_ref_uniform(seed) * 0.01f);
        }
        break;
    case HX_REF_Q3_K:
        for (uint32_t b = 0; b < n / 256; b++)
            put_f16(p + 110 * b + 108, hx_ref_uniform(seed) * 0.002f);
        break;
    case HX_REF_IQ4_NL:
        for (uint32_t b = 0; b < n / 32; b++)
            put_f16(p + 18 * b, hx_ref_uniform(seed) * 0.001f);
        break;
    case HX_REF_IQ4_XS:
        for (uint32_t b = 0; b < n / 256; b++)
            put_f16(p + 136 * b, hx_ref_uniform(seed) * 0.0005f);
        break;
    }
}

void hx_ref_get_rows(const hx_op_get_rows *a, const void *table, size_t table_bytes, const int32_t *ids,
                     double *out)
{
    size_t row = hx_ref_row_bytes(a->type, a->D);
    for (uint32_t t = 0; t < a->T; t++) {
        if (ids[t] < 0 || (size_t)ids[t] >= table_bytes / row) {
            for (uint32_t d = 0; d < a->D; d++)
                out[(size_t)t * a->D + d] = NAN;
            continue;
        }
        hx_ref_dequantize(a->type, (const uint8_t *)table + (size_t)ids[t] * row, out + (size_t)t * a->D, a->D);
    }
}

void hx_ref_rmsnorm(const hx_op_rmsnorm *a, const float *x, const float *w, double *y)
{
    for (uint32_t t = 0; t < a->T; t++) {
        const float *xr = x + (size_t)t * a->D;
        double ss = 0;
        for (uint32_t d = 0; d < a->D; d++)
            ss += (double)xr[d] * xr[d];
        double inv = 1.0 / sqrt(ss / a->D + a->eps);
        for (uint32_t d = 0; d < a->D; d++)
            y[(size_t)t * a->D + d] = xr[d] * inv * w[d];
    }
}

void hx_ref_matmul(const hx_op_matmul *a, const void *W, const float *x, const float *bias, double *y)
{
    size_t row = hx_ref_row_bytes(a->wtype, a->K);
    double *w = malloc(sizeof(double) * (a->K ? a->K : 1));
    for (uint32_t n = 0; n < a->N; n++) {
        hx_ref_dequantize(a->wtype, (const uint8_t *)W + (size_t)n * row, w, a->K);
        for (uint32_t t = 0; t < a->T; t++) {
            double s = a->has_bias ? bias[n] : 0.0;
            for (uint32_t k = 0; k < a->K; k++)
                s += w[k] * x[(size_t)t * a->K + k];
            y[(size_t)t * a->N + n] = s;
        }
    }
    free(w);
}

/* RoPE of one head by `pos` positions: pairs (i, i + n_rot/2) with neox,
 * else (2i, 2i + 1), at angle pos * freq_scale * freq_base^(-2i/n_rot) /
 * factors[i] (factors NULL: 1), as ggml's rope_yarn with ext_factor 0. */
static void rotate(double *hd, double pos, uint32_t n_rot, float freq_base, float freq_scale, uint32_t neox,
                   const float *factors)
{
    for (uint32_t i = 0; i < n_rot / 2; i++) {
        double theta = pos * (double)freq_scale * pow(freq_base, -2.0 * i / n_rot) / (factors ? factors[i] : 1.0);
        uint32_t p0 = neox ? i : 2 * i, p1 = neox ? i + n_rot / 2 : 2 * i + 1;
        double x0 = hd[p0], x1 = hd[p1];
        hd[p0] = x0 * cos(theta) - x1 * sin(theta);
        hd[p1] = x0 * sin(theta) + x1 * cos(theta);
    }
}

void hx_ref_rope(const hx_op_rope *a, const float *x, const int32_t *pos, const float *factors, double *y)
{
    size_t n = (size_t)a->T * a->H * a->Dh;
    for (size_t i = 0; i < n; i++)
        y[i] = x[i];
    for (uint32_t t = 0; t < a->T; t++)
        for (uint32_t h = 0; h < a->H; h++) {
            rotate(y + ((size_t)t * a->H + h) * a->Dh, pos[t], a->n_rot, a->freq_base, a->freq_scale, a->neox,
                   a->has_factors ? factors : NULL);
        }
}

static size_t kv_row_bytes(uint32_t kv_type, uint32_t Dh) { return hx_ref_row_bytes(kv_type, Dh); }

static void kv_write(uint32_t kv_type, const float *src, uint8_t *dst, uint32_t Dh, int values)
{
    if (kv_type == HX_REF_Q8_0) {
        hx_ref_quantize_q8_0_kv(src, dst, Dh);
        return;
    }
    if (kv_type == HX_REF_Q4_0) {
        hx_ref_quantize_q4_0_kv(src, dst, Dh, values);
        return;
    }
    if (kv_type == HX_REF_F32) {
        memcpy(dst, src, 4 * (size_t)Dh);
        return;
    }
    for (uint32_t d = 0; d < Dh; d++)
        put_f16(dst + 2 * d, src[d]);
}

/* x (n values) times the Walsh-Hadamard matrix of width w, group by group,
 * as a plain matrix product in double: H[i][j] = (-1)^popcount(i & j) /
 * sqrt(w), the definition, where the kernels use the fast transform. */
void hx_ref_hadamard(double *x, uint32_t n, uint32_t w)
{
    if (!w)
        return;
    double *y = malloc(sizeof(double) * w);
    for (uint32_t g = 0; g < n; g += w) {
        for (uint32_t i = 0; i < w; i++) {
            double acc = 0;
            for (uint32_t j = 0; j < w; j++)
                acc += (__builtin_popcount(i & j) % 2 ? -1.0 : 1.0) * x[g + j];
            y[i] = acc / sqrt((double)w);
        }
        memcpy(x + g, y, sizeof(double) * w);
    }
    free(y);
}

/* One head's row of keys or (`values`) values written in the cache's
 * type, less `center` (when not NULL) and rotated (when w > 0) first. */
static void kv_write_rotated(uint32_t type, const float *src, uint8_t *dst, uint32_t Dh, uint32_t w, int values,
                             const float *center)
{
    if (!w && !center) {
        kv_write(type, src, dst, Dh, values);
        return;
    }
    double *x = malloc(sizeof(double) * Dh);
    float *f = malloc(sizeof(float) * Dh);
    for (uint32_t d = 0; d < Dh; d++)
        x[d] = center ? (double)(src[d] - center[d]) : src[d];
    hx_ref_hadamard(x, Dh, w);
    for (uint32_t d = 0; d < Dh; d++)
        f[d] = (float)x[d];
    kv_write(type, f, dst, Dh, values);
    free(x);
    free(f);
}

void hx_ref_kv_store(const hx_op_kv_store *a, const float *k, const float *v, uint8_t *kc, uint8_t *vc,
                     const int32_t *meta, uint64_t n_slots, const float *center)
{
    size_t row = kv_row_bytes(a->kv_type, a->Dh), vrow = kv_row_bytes(a->v_type, a->Dh);
    for (uint32_t t = 0; t < a->kv.T; t++) {
        int32_t slot = meta[t];
        if (slot < 0 || (uint64_t)slot >= n_slots)
            continue;
        for (uint32_t h = 0; h < a->Hkv; h++) {
            size_t src = ((size_t)t * a->Hkv + h) * a->Dh, dst = (size_t)slot * a->Hkv + h;
            kv_write_rotated(a->kv_type, k + src, kc + dst * row, a->Dh, a->rot_k, 0,
                             a->center_k ? center + (size_t)h * a->Dh : NULL);
            kv_write_rotated(a->v_type, v + src, vc + dst * vrow, a->Dh, a->rot_v, 1, NULL);
        }
    }
}

/* Attention over positions [first, last] of each token, or (part < 0)
 * its whole context; stats (when not NULL) get each row's maximum and sum. */
static void ref_attend(const hx_op_attention *a, uint32_t recent, int part, const float *q, const uint8_t *kc,
                       const uint8_t *vc, const int32_t *meta, double *out, double *stats)
{
    const hx_kv_layout *kv = &a->kv;
    size_t row = kv_row_bytes(a->kv_type, a->Dh), vrow = kv_row_bytes(a->v_type, a->Dh);
    uint32_t rep = a->Hq / a->Hkv, npos = kv->max_blocks * kv->block_size;
    double *kr = malloc(sizeof(double) * a->Dh), *vr = malloc(sizeof(double) * a->Dh);
    double *qr = malloc(sizeof(double) * a->Dh);
    double *s = malloc(sizeof(double) * (npos ? npos : 1)), *acc = malloc(sizeof(double) * a->Dh);
    for (uint32_t t = 0; t < kv->T; t++) {
        int32_t pos = meta[kv->T + t], seq = meta[2 * kv->T + t];
        const int32_t *table = meta + 3 * kv->T + (size_t)seq * kv->max_blocks;
        /* A window sees only its last `window` positions. */
        int32_t first = a->window && pos >= (int32_t)a->window ? pos - (int32_t)a->window + 1 : 0, last = pos;
        if (part >= 0) {
            /* The block boundary at or before the `recent` last positions. */
            int32_t cut = pos + 1 - (int32_t)recent;
            cut = cut > 0 ? cut - cut % (int32_t)kv->block_size : 0;
            if (part == 0)
                last = last < cut - 1 ? last : cut - 1;
            else
                first = first > cut ? first : cut;
        }
        for (uint32_t h = 0; h < a->Hq; h++) {
            /* The query rotated as the keys were: the same dot products. */
            for (uint32_t d = 0; d < a->Dh; d++)
                qr[d] = q[((size_t)t * a->Hq + h) * a->Dh + d];
            hx_ref_hadamard(qr, a->Dh, a->rot_k);
            const double *qv = qr;
            double *o = out + ((size_t)t * a->Hq + h) * a->Dh;
            uint32_t g = h / rep;
            double mx = -INFINITY, sum = 0;
            for (int32_t j = first; j <= last; j++) {
                size_t slot = (size_t)table[j / kv->block_size] * kv->block_size + j % kv->block_size;
                hx_ref_dequantize(a->kv_type, kc + (slot * a->Hkv + g) * row, kr, a->Dh);
                double dot = 0;
                for (uint32_t d = 0; d < a->Dh; d++)
                    dot += qv[d] * kr[d];
                s[j] = dot * a->scale;
                mx = fmax(mx, s[j]);
            }
            for (uint32_t d = 0; d < a->Dh; d++)
                acc[d] = 0;
            for (int32_t j = first; j <= last; j++) {
                size_t slot = (size_t)table[j / kv->block_size] * kv->block_size + j % kv->block_size;
                hx_ref_dequantize(a->v_type, vc + (slot * a->Hkv + g) * vrow, vr, a->Dh);
                double p = exp(s[j] - mx);
                sum += p;
                for (uint32_t d = 0; d < a->Dh; d++)
                    acc[d] += p * vr[d];
            }
            for (uint32_t d = 0; d < a->Dh; d++)
                o[d] = sum > 0 ? acc[d] / sum : 0;
            hx_ref_hadamard(o, a->Dh, a->rot_v); /* the rotated values' sum turned back */
            if (stats) {
                stats[2 * ((size_t)t * a->Hq + h)] = mx;
                stats[2 * ((size_t)t * a->Hq + h) + 1] = sum;
            }
        }
    }
    free(kr);
    free(vr);
    free(qr);
    free(s);
    free(acc);
}

void hx_ref_attention(const hx_op_attention *a, const float *q, const uint8_t *kc, const uint8_t *vc,
                      const int32_t *meta, double *out)
{
    ref_attend(a, 0, -1, q, kc, vc, meta, out, NULL);
}

void hx_ref_attention_part(const hx_op_attention_part *a, const float *q, const uint8_t *kc, const uint8_t *vc,
                           const int32_t *meta, double *out, double *stats)
{
    ref_attend(&a->at, a->recent, (int)a->part, q, kc, vc, meta, out, stats);
}

/* Each move in order: the value row copied, the key row decoded, rotated
 * by delta positions in double and written back in the cache's type. */
void hx_ref_kv_shift(const hx_op_kv_shift *a, uint8_t *kc, uint8_t *vc, const int32_t *moves, const float *factors,
                     const float *center)
{
    size_t row = kv_row_bytes(a->kv_type, a->Dh), vrow = kv_row_bytes(a->v_type, a->Dh);
    double *k = malloc(sizeof(double) * a->Dh);
    float *kf = malloc(sizeof(float) * a->Dh);
    for (uint32_t m = 0; m < a->n; m++)
        for (uint32_t h = 0; h < a->Hkv; h++) {
            size_t src = ((size_t)moves[2 * m] * a->Hkv + h) * row, dst = ((size_t)moves[2 * m + 1] * a->Hkv + h) * row;
            memmove(vc + ((size_t)moves[2 * m + 1] * a->Hkv + h) * vrow, vc + ((size_t)moves[2 * m] * a->Hkv + h) * vrow,
                    vrow);
            hx_ref_dequantize(a->kv_type, kc + src, k, a->Dh);
            hx_ref_hadamard(k, a->Dh, a->rot_k); /* the plain key, which RoPE rotates */
            for (uint32_t d = 0; a->center_k && d < a->Dh; d++)
                k[d] += center[h * a->Dh + d];
            rotate(k, a->delta, a->n_rot, a->freq_base, a->freq_scale, a->neox, a->has_factors ? factors : NULL);
            for (uint32_t d = 0; a->center_k && d < a->Dh; d++)
                k[d] -= center[h * a->Dh + d];
            hx_ref_hadamard(k, a->Dh, a->rot_k);
            for (uint32_t d = 0; d < a->Dh; d++)
                kf[d] = (float)k[d];
            kv_write(a->kv_type, kf, kc + dst, a->Dh, 0);
        }
    free(k);
    free(kf);
}

void hx_ref_add(uint64_t n, const float *x, const float *y, double *out)
{
    for (uint64_t i = 0; i < n; i++)
        out[i] = (double)x[i] + y[i];
}

void hx_ref_gemm_f32(uint32_t M, uint32_t N, uint32_t K, const float *A, const float *B, double *C)
{
    for (uint32_t m = 0; m < M; m++)
        for (uint32_t n = 0; n < N; n++) {
            double s = 0;
            for (uint32_t k = 0; k < K; k++)
                s += (double)A[(size_t)m * K + k] * B[(size_t)n * K + k];
            C[(size_t)m * N + n] = s;
        }
}

void hx_ref_swiglu(uint64_t n, const float *gate, const float *up, double *out)
{
    for (uint64_t i = 0; i < n; i++)
        out[i] = gate[i] / (1.0 + exp(-(double)gate[i])) * up[i];
}

double hx_ref_nmse(const float *got, const double *ref, size_t n)
{
    double err = 0, norm = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i]))
            return INFINITY;
        double e = got[i] - ref[i];
        err += e * e;
        norm += ref[i] * ref[i];
    }
    return norm > 0 ? err / norm : err;
}
