/* kv_store: writes the batch's K and V rows into their cache slots
 * (ops/ops.h).  A slot outside the cache is skipped and reported
 * through the status word. */
#include "common.cl"

#define KV_WG 32

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

/* Q8_0 as GGUF stores it: d = max|x| / 127 (kept as half), q = round(x / d). */
void hx_quantize_q8_0(__global const float *x, __global uchar *b)
{
    float amax = 0.0f;
    for (uint i = 0; i < HX_QK; i++)
        amax = fmax(amax, fabs(x[i]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    vstore_half_rte(d, 0, (__global half *)b);
    __global char *q = (__global char *)(b + 2);
    for (uint i = 0; i < HX_QK; i++)
        q[i] = (char)clamp(round(x[i] * id), -127.0f, 127.0f);
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
