/* kv_store: writes the batch's K and V rows into their cache slots
 * (ops/ops.h).  A slot outside the cache is skipped and reported
 * through the status word. */
#include "common.cl"

/* Every product and sum its own rounded operation, as on the CPU. */
#pragma OPENCL FP_CONTRACT OFF

#define KV_WG 32
#define HX_KV_Q8_FITS 16

__kernel __attribute__((reqd_work_group_size(KV_WG, 1, 1)))
void kv_store_f16(__global const float *k, __global const float *v, __global uchar *kc, __global uchar *vc,
                           __global const int *meta, const uint T, const uint Hkv, const uint Dh,
                           const ulong k_bytes, const ulong v_bytes, __global uint *status)
{
    const uint d = get_global_id(0), h = get_global_id(1), t = get_global_id(2);
    if (d >= Dh || h >= Hkv || t >= T)
        return;
    const ulong n_slots = min(k_bytes, v_bytes) / ((ulong)Hkv * Dh * 2);
    const int slot = meta[t];
    if (slot < 0 || (ulong)slot >= n_slots) {
        atomic_or(status, HX_BAD_SLOT);
        return;
    }
    const ulong src = ((ulong)t * Hkv + h) * Dh + d, dst = ((ulong)slot * Hkv + h) * Dh + d;
    vstore_half_rte(k[src], dst, (__global half *)kc);
    vstore_half_rte(v[src], dst, (__global half *)vc);
}

__kernel __attribute__((reqd_work_group_size(KV_WG, 1, 1)))
void kv_store_f32(__global const float *k, __global const float *v, __global uchar *kc, __global uchar *vc,
                  __global const int *meta, const uint T, const uint Hkv, const uint Dh, const ulong k_bytes,
                  const ulong v_bytes, __global uint *status)
{
    const uint d = get_global_id(0), h = get_global_id(1), t = get_global_id(2);
    if (d >= Dh || h >= Hkv || t >= T)
        return;
    const ulong n_slots = min(k_bytes, v_bytes) / ((ulong)Hkv * Dh * 4);
    const int slot = meta[t];
    if (slot < 0 || (ulong)slot >= n_slots) {
        atomic_or(status, HX_BAD_SLOT);
        return;
    }
    const ulong src = ((ulong)t * Hkv + h) * Dh + d, dst = ((ulong)slot * Hkv + h) * Dh + d;
    ((__global float *)kc)[dst] = k[src];
    ((__global float *)vc)[dst] = v[src];
}

/* Q8_0 as GGUF stores it (d as half, q in -127..127), the scale fitted:
 * ops/kv_fit.h's hx_kv_fit_q8_0, operation for operation (no contraction,
 * see the pragma above).  On a device whose division is not correctly rounded (OpenCL
 * 1.2 allows 2.5 ulp) a block at a near-tie may round otherwise. */
float hx_kv_q8_round(float x, float inv)
{
    return fmin(fmax(rint(inv * x), -127.0f), 127.0f);
}

void hx_quantize_q8_0(__global const float *x, __global uchar *b)
{
    float amax = 0.0f;
    for (uint i = 0; i < HX_QK; i++)
        amax = fmax(amax, fabs(x[i]));
    __global char *q = (__global char *)(b + 2);
    if (amax < 1e-15f) {
        vstore_half_rte(0.0f, 0, (__global half *)b);
        for (uint i = 0; i < HX_QK; i++)
            q[i] = 0;
        return;
    }
    int pick = 0;
    float scale = 0.0f, best = 0.0f;
    for (int c = 0; c < HX_KV_Q8_FITS; c++) {
        const float inv = (float)(127 - c) / amax;
        float sumlx = 0.0f, suml2 = 0.0f;
        for (uint i = 0; i < HX_QK; i++) {
            const float l = hx_kv_q8_round(x[i], inv);
            sumlx += x[i] * l;
            suml2 += l * l;
        }
        if (c == 0) {
            scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
            best = scale * sumlx;
        } else if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
            scale = sumlx / suml2;
            best = scale * sumlx;
            pick = c;
        }
    }
    const float inv = (float)(127 - pick) / amax;
    vstore_half_rte(scale, 0, (__global half *)b);
    for (uint i = 0; i < HX_QK; i++)
        q[i] = (char)hx_kv_q8_round(x[i], inv);
}

/* One work-item per 32-element block of a (token, head) row. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void kv_store_q8_0(__global const float *k, __global const float *v, __global uchar *kc, __global uchar *vc,
                            __global const int *meta, const uint T, const uint Hkv, const uint Dh,
                            const ulong k_bytes, const ulong v_bytes, __global uint *status)
{
    const uint blk = get_global_id(0), h = get_global_id(1), t = get_global_id(2);
    if (blk >= Dh / HX_QK || h >= Hkv || t >= T)
        return;
    const ulong row_bytes = (ulong)(Dh / HX_QK) * HX_Q8_0_BYTES;
    const ulong n_slots = min(k_bytes, v_bytes) / (Hkv * row_bytes);
    const int slot = meta[t];
    if (slot < 0 || (ulong)slot >= n_slots) {
        atomic_or(status, HX_BAD_SLOT);
        return;
    }
    const ulong src = ((ulong)t * Hkv + h) * Dh + blk * HX_QK;
    const ulong dst = ((ulong)slot * Hkv + h) * row_bytes + blk * HX_Q8_0_BYTES;
    hx_quantize_q8_0(k + src, kc + dst);
    hx_quantize_q8_0(v + src, vc + dst);
}
