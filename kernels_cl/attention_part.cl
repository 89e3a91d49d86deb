/* attention_part and attn_merge (ops/ops.h): attention over one part of
 * each token's positions (before or from a block-aligned cut), with the
 * part's running maximum and sum beside its output, and the merge of two
 * such parts.  One work-item per (token, query head) with an online
 * softmax (common.cl's HX_KV_ATTEND, as the decode's): the parts are the
 * host/device split of a long context, where a device attends to its
 * recent blocks only, so a part is short and one item per row is enough
 * (the tiled kernels are attention.cl's).
 * With a sliding window (window > 0) a token's positions start at
 * pos - window + 1: part 0 takes [start, cut), part 1 [max(start, cut),
 * pos] (ops/ops.h).
 * Rows whose metadata points outside the batch or the cache come out NaN
 * and set HX_BAD_META in the status word. */
#include "common.cl"

/* Heads up to 256 wide (Gemma 3's): the accumulators are one item's
 * private array, indexed at run time, so its size costs nothing when a
 * head is narrower. */
#define PART_DH_MAX 256

#define HX_ATTENTION_PART_PARAMS                                                                    \
    __global const float *q, __global const uchar *kc, __global const uchar *vc, __global const int *meta, \
        __global float *out, __global float *stats, const uint T, const uint S, const uint max_blocks, \
        const uint block_size, const uint Hq, const uint Hkv, const uint Dh, const float scale,     \
        const ulong k_bytes, const ulong v_bytes, const uint window, const uint recent, const uint part, __global uint *status

#define HX_ATTENTION_PART(ROW_BYTES, DOT, AXPYN)                                                    \
    const uint r = get_global_id(0);                                                                \
    if (r >= T * Hq)                                                                                \
        return;                                                                                     \
    const uint t = r / Hq, h = r % Hq, g = h / (Hq / Hkv);                                          \
    const ulong n_slots = min(k_bytes, v_bytes) / (Hkv * (ROW_BYTES));                              \
    const int seq = meta[2 * T + t], pos = meta[T + t];                                             \
    __global float *o = out + (ulong)r * Dh;                                                        \
    if (seq < 0 || (uint)seq >= S || pos < 0 || (ulong)pos >= (ulong)max_blocks * block_size) {     \
        atomic_or(status, HX_BAD_META);                                                             \
        for (uint d = 0; d < Dh; d++)                                                               \
            o[d] = NAN;                                                                             \
        stats[2 * r] = stats[2 * r + 1] = NAN;                                                      \
        return;                                                                                     \
    }                                                                                               \
    const uint cut = (uint)pos + 1 > recent ? ((uint)pos + 1 - recent) / block_size * block_size : 0; \
    const uint start = window && (uint)pos >= window ? (uint)pos - window + 1 : 0;                 \
    const uint j_begin = part ? max(cut, start) : start, j_end = part ? (uint)pos + 1 : min(cut, (uint)pos + 1); \
    __global const float *qv = q + (ulong)r * Dh;                                                   \
    float m = -INFINITY, l = 0.0f, acc[PART_DH_MAX];                                                \
    for (uint d = 0; d < Dh; d++)                                                                   \
        acc[d] = 0.0f;                                                                              \
    int bad = 0;                                                                                    \
    HX_KV_ATTEND(DOT, AXPYN, (uint)seq, j_begin, j_end, g, qv, m, l, acc, bad)                      \
    if (bad)                                                                                        \
        atomic_or(status, HX_BAD_META);                                                             \
    for (uint d = 0; d < Dh; d++)                                                                   \
        o[d] = bad ? NAN : l > 0.0f ? acc[d] / l : 0.0f;                                            \
    stats[2 * r] = bad ? NAN : m;                                                                   \
    stats[2 * r + 1] = bad ? NAN : l;

#define F32_KV_ROW ((ulong)Dh * 4)
#define F16_KV_ROW ((ulong)Dh * 2)
#define Q8_0_KV_ROW ((ulong)(Dh / HX_QK) * HX_Q8_0_BYTES)

__kernel void attention_part_f32(HX_ATTENTION_PART_PARAMS) { HX_ATTENTION_PART(F32_KV_ROW, hx_kv_dot_f32, hx_kv_axpyn_f32) }
__kernel void attention_part_f16(HX_ATTENTION_PART_PARAMS) { HX_ATTENTION_PART(F16_KV_ROW, hx_kv_dot_f16, hx_kv_axpyn_f16) }
__kernel void attention_part_q8_0(HX_ATTENTION_PART_PARAMS) { HX_ATTENTION_PART(Q8_0_KV_ROW, hx_kv_dot_q8_0, hx_kv_axpyn_q8_0) }

/* One work-item per (row, element): each part weighted by
 * exp(its max - the larger max) * its sum; an empty part (sum 0) counts
 * for nothing, two empty parts give zeros. */
__kernel void attn_merge_f32(__global const float *o0, __global const float *s0, __global const float *o1,
                             __global const float *s1, __global float *out, const ulong rows, const uint Dh)
{
    const ulong i = get_global_id(0);
    if (i >= rows * Dh)
        return;
    const ulong r = i / Dh;
    const float m0 = s0[2 * r], l0 = s0[2 * r + 1], m1 = s1[2 * r], l1 = s1[2 * r + 1];
    const float M = l0 > 0.0f && l1 > 0.0f ? fmax(m0, m1) : l0 > 0.0f ? m0 : m1;
    const float w0 = l0 > 0.0f ? exp(m0 - M) * l0 : 0.0f, w1 = l1 > 0.0f ? exp(m1 - M) * l1 : 0.0f;
    const float total = w0 + w1;
    out[i] = total > 0.0f ? (w0 * o0[i] + w1 * o1[i]) / total : 0.0f;
}
