/* The paged KV cache on the GPU: "kv_store" writes a batch's K and V rows
 * into their slots, "attention" reads them back through each sequence's
 * block table (layout in ops/ops.h).  F16, Q8_0 and F32 caches.
 *
 * Attention: one thread block per (token, query head).  Its warps take the
 * visible positions in turn, each keeping an online softmax (running max,
 * sum and weighted V) with the head spread over its lanes (element
 * lane + 32 i), and the warps' partial results are merged at the end.
 * "attention_part" is the same kernel over one part of the positions
 * (before or from the block-aligned cut, ops/ops.h), writing the part's
 * maximum and sum beside its output; "attn_merge" merges two parts.
 * A sliding window (window > 0) starts a token's positions at
 * pos - window + 1; the blocks before it are never read (they may be -1,
 * returned to the pool).
 * Every index read from meta is checked before use. */
#include <math.h>
#include <stdint.h>

#include "kernels_cu/common.cuh"
#include "ops/kv_fit.h"

#define ATT_WARPS 8

/* ---- kv_store ----------------------------------------------------------- */

enum { KV_F16 = 0, KV_Q8 = 1, KV_F32 = 2 };

/* blockIdx.y: 0 stores K, 1 stores V.  One thread per element (F16, F32) or
 * per 32-element block (Q8_0, fitted as every device does: ops/kv_fit.h). */
__global__ void k_kv_store(const float *__restrict__ k, const float *__restrict__ v, uint8_t *__restrict__ kc,
                           uint8_t *__restrict__ vc, const int32_t *__restrict__ slots, uint64_t nslots, uint32_t T,
                           uint32_t E, int kt, unsigned *flag)
{
    const float *src = blockIdx.y ? v : k;
    uint8_t *dst = blockIdx.y ? vc : kc;
    uint64_t per = kt == KV_Q8 ? E / 32 : E, total = (uint64_t)T * per;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < total;
         i += (uint64_t)gridDim.x * blockDim.x) {
        uint32_t t = (uint32_t)(i / per);
        uint64_t u = i % per;
        int32_t slot = slots[t];
        if (slot < 0 || (uint64_t)slot >= nslots) {
            if (u == 0)
                atomicOr(flag, HX_CU_BAD_KV_SLOT);
            continue;
        }
        const float *x = src + (uint64_t)t * E;
        if (kt == KV_F16) {
            ((uint16_t *)dst)[(uint64_t)slot * E + u] = hx_dq_f32_to_f16(x[u]);
            continue;
        }
        if (kt == KV_F32) {
            ((float *)dst)[(uint64_t)slot * E + u] = x[u];
            continue;
        }
        x += u * 32;
        int8_t q[32];
        const float d = hx_kv_fit_q8_0(x, q);
        uint8_t *b = dst + (uint64_t)slot * (E / 32) * 34 + u * 34;
        uint16_t dh = hx_dq_f32_to_f16(d);
        b[0] = (uint8_t)(dh & 0xff);
        b[1] = (uint8_t)(dh >> 8);
        for (int e = 0; e < 32; e++)
            b[2 + e] = (uint8_t)q[e];
    }
}

HX_CU_LAUNCHER(hx_cu_kv_store)
{
    if (!args)
        return hx_cu_fail(HX_ERR_INVALID_ARG, "kv_store: no arguments");
    const hx_op_kv_store *a = (const hx_op_kv_store *)args;
    char msg[256];
    uint64_t nslots = 0;
    if (hx_oc_kv_store(a, sizes, n, &nslots, msg, sizeof msg))
        return hx_cu_fail(HX_ERR_INVALID_ARG, "%s", msg);
    if (!a->kv.T)
        return HX_OK;
    uint32_t E = a->Hkv * a->Dh;
    int kt = a->kv_type == HX_TYPE_Q8_0 ? KV_Q8 : a->kv_type == HX_TYPE_F32 ? KV_F32 : KV_F16;
    uint64_t total = (uint64_t)a->kv.T * (kt == KV_Q8 ? E / 32 : E);
    dim3 grid(hx_cu_blocks(total, 256, c), 2);
    k_kv_store<<<grid, 256, 0, c->stream>>>((const float *)bufs[0], (const float *)bufs[1], (uint8_t *)bufs[2],
                                            (uint8_t *)bufs[3], (const int32_t *)bufs[4], nslots, a->kv.T, E, kt,
                                            c->flag_dev);
    HX_CU_LAUNCHED("kv_store");
    return HX_OK;
}

/* ---- attention ---------------------------------------------------------- */

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Element lane + 32 i of the head that starts at `row` (Q8_0: its blocks). */
template <int KT>
__device__ __forceinline__ float kv_elem(const uint8_t *row, uint32_t lane, int i)
{
    if (KT == KV_Q8) {
        const uint8_t *b = row + (uint64_t)i * 34;
        return hx_dq_f16_to_f32(hx_dq_load_u16(b)) * (float)(int8_t)b[2 + lane];
    }
    if (KT == KV_F32)
        return ((const float *)row)[lane + 32u * (uint32_t)i];
    return hx_dq_f16_to_f32(((const uint16_t *)row)[lane + 32u * (uint32_t)i]);
}

template <int NI, int KT>
__global__ void __launch_bounds__(ATT_WARPS * 32)
    k_attention(const float *__restrict__ q, const uint8_t *__restrict__ kc, const uint8_t *__restrict__ vc,
                const int32_t *__restrict__ meta, float *__restrict__ out, uint32_t T, uint32_t S, uint32_t max_blocks,
                uint32_t bs, uint32_t Hq, uint32_t Hkv, uint32_t Dh, float scale, uint64_t nslots, uint64_t rb,
                unsigned *flag, float *__restrict__ stats, uint32_t recent, int part, uint32_t window)
{
    __shared__ float sm_m[ATT_WARPS], sm_l[ATT_WARPS];
    __shared__ float sm_acc[ATT_WARPS][NI * 32];
    __shared__ int sm_bad;

    uint32_t t = blockIdx.x / Hq, h = blockIdx.x % Hq, hk = h / (Hq / Hkv);
    uint32_t lane = threadIdx.x & 31, w = threadIdx.x / 32;
    float *o = out + ((uint64_t)t * Hq + h) * Dh;
    int32_t pos = meta[T + t], seq = meta[2 * (uint64_t)T + t];
    if (threadIdx.x == 0)
        sm_bad = 0;
    __syncthreads();
    if (seq < 0 || (uint32_t)seq >= S || pos < 0 || (uint64_t)pos / bs >= max_blocks) {
        if (threadIdx.x == 0) {
            atomicOr(flag, HX_CU_BAD_KV_META);
            if (stats)
                stats[2 * blockIdx.x] = stats[2 * blockIdx.x + 1] = HX_CU_NAN;
        }
        for (uint32_t e = threadIdx.x; e < Dh; e += blockDim.x)
            o[e] = HX_CU_NAN;
        return;
    }
    /* The positions it attends to: from 0 or the window's start, all or
     * one part (part < 0: all). */
    const uint32_t start = window && (uint32_t)pos >= window ? (uint32_t)pos - window + 1 : 0;
    const uint32_t cut = (uint32_t)pos + 1 > recent ? ((uint32_t)pos + 1 - recent) / bs * bs : 0;
    const uint32_t j_begin = part == 1 ? max(cut, start) : start,
                   j_end = part == 0 ? min(cut, (uint32_t)pos + 1) : (uint32_t)pos + 1;
    const int32_t *table = meta + 3 * (uint64_t)T + (uint64_t)seq * max_blocks;
    /* Byte offset of this KV head inside a cache row. */
    uint64_t head_off = KT == KV_Q8 ? (uint64_t)hk * (Dh / 32) * 34 : (uint64_t)hk * Dh * (KT == KV_F32 ? 4 : 2);

    float qv[NI], acc[NI];
    const float *qh = q + ((uint64_t)t * Hq + h) * Dh;
#pragma unroll
    for (int i = 0; i < NI; i++) {
        uint32_t e = lane + 32u * i;
        qv[i] = e < Dh ? qh[e] * scale : 0.0f;
        acc[i] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    for (uint32_t j = j_begin + w; j < j_end; j += ATT_WARPS) {
        int32_t blk = table[j / bs];
        uint64_t slot = (uint64_t)blk * bs + j % bs;
        if (blk < 0 || slot >= nslots) {
            if (lane == 0) {
                atomicOr(flag, HX_CU_BAD_KV_META);
                sm_bad = 1;
            }
            break;
        }
        const uint8_t *kr = kc + slot * rb + head_off, *vr = vc + slot * rb + head_off;
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < NI; i++)
            if (lane + 32u * i < Dh)
                dot += qv[i] * kv_elem<KT>(kr, lane, i);
        float s = warp_sum(dot);
        float mn = fmaxf(m, s), corr = expf(m - mn), p = expf(s - mn);
        l = l * corr + p;
#pragma unroll
        for (int i = 0; i < NI; i++)
            acc[i] = acc[i] * corr + (lane + 32u * i < Dh ? p * kv_elem<KT>(vr, lane, i) : 0.0f);
        m = mn;
    }
#pragma unroll
    for (int i = 0; i < NI; i++)
        sm_acc[w][lane + 32 * i] = acc[i];
    if (lane == 0) {
        sm_m[w] = m;
        sm_l[w] = l;
    }
    __syncthreads();
    float M = -INFINITY;
    for (int i = 0; i < ATT_WARPS; i++)
        M = fmaxf(M, sm_m[i]);
    float L = 0.0f, f[ATT_WARPS];
    for (int i = 0; i < ATT_WARPS; i++) {
        f[i] = sm_l[i] > 0.0f ? expf(sm_m[i] - M) : 0.0f;
        L += sm_l[i] * f[i];
    }
    for (uint32_t e = threadIdx.x; e < Dh; e += blockDim.x) {
        float r = 0.0f;
        for (int i = 0; i < ATT_WARPS; i++)
            r += sm_acc[i][e] * f[i];
        /* An empty part is zeros with sum 0; whole attention has a position. */
        o[e] = sm_bad || (L <= 0.0f && !stats) ? HX_CU_NAN : L > 0.0f ? r / L : 0.0f;
    }
    if (stats && threadIdx.x == 0) {
        stats[2 * blockIdx.x] = sm_bad ? HX_CU_NAN : L > 0.0f ? M : -INFINITY;
        stats[2 * blockIdx.x + 1] = sm_bad ? HX_CU_NAN : L;
    }
}

/* One thread per (row, element): each part weighted by exp(its max - the
 * larger max) * its sum; an empty part (sum 0) counts for nothing. */
__global__ void k_attn_merge(const float *__restrict__ o0, const float *__restrict__ s0, const float *__restrict__ o1,
                             const float *__restrict__ s1, float *__restrict__ out, uint64_t rows, uint32_t Dh)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < rows * Dh;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const uint64_t r = i / Dh;
        const float m0 = s0[2 * r], l0 = s0[2 * r + 1], m1 = s1[2 * r], l1 = s1[2 * r + 1];
        const float M = l0 > 0.0f && l1 > 0.0f ? fmaxf(m0, m1) : l0 > 0.0f ? m0 : m1;
        const float w0 = l0 > 0.0f ? expf(m0 - M) * l0 : 0.0f, w1 = l1 > 0.0f ? expf(m1 - M) * l1 : 0.0f;
        const float total = w0 + w1;
        out[i] = total > 0.0f ? (w0 * o0[i] + w1 * o1[i]) / total : 0.0f;
    }
}

template <int KT>
static void launch_attention(hx_cuda_ctx *c, const hx_op_attention *a, void *const *b, uint64_t nslots, uint64_t rb,
                             float *stats, uint32_t recent, int part)
{
    unsigned blocks = a->kv.T * a->Hq;
#define HX_ATT_CASE(ni)                                                                                           \
    case ni:                                                                                                      \
        k_attention<ni, KT><<<blocks, ATT_WARPS * 32, 0, c->stream>>>(                                            \
            (const float *)b[0], (const uint8_t *)b[1], (const uint8_t *)b[2], (const int32_t *)b[3], (float *)b[4], \
            a->kv.T, a->kv.S, a->kv.max_blocks, a->kv.block_size, a->Hq, a->Hkv, a->Dh, a->scale, nslots, rb,     \
            c->flag_dev, stats, recent, part, a->window);                                                         \
        break;
    switch ((a->Dh + 31) / 32) {
        HX_ATT_CASE(1)
        HX_ATT_CASE(2)
        HX_ATT_CASE(3)
        HX_ATT_CASE(4)
        HX_ATT_CASE(5)
        HX_ATT_CASE(6)
        HX_ATT_CASE(7)
        HX_ATT_CASE(8)
    }
#undef HX_ATT_CASE
}

/* The kernel for the cache's type: whole attention (stats NULL, part -1)
 * or one part. */
static void launch_any(hx_cuda_ctx *c, const hx_op_attention *a, void *const *b, uint64_t nslots, uint64_t rb,
                       float *stats, uint32_t recent, int part)
{
    if (a->kv_type == HX_TYPE_Q8_0)
        launch_attention<KV_Q8>(c, a, b, nslots, rb, stats, recent, part);
    else if (a->kv_type == HX_TYPE_F32)
        launch_attention<KV_F32>(c, a, b, nslots, rb, stats, recent, part);
    else
        launch_attention<KV_F16>(c, a, b, nslots, rb, stats, recent, part);
}

HX_CU_LAUNCHER(hx_cu_attention)
{
    if (!args)
        return hx_cu_fail(HX_ERR_INVALID_ARG, "attention: no arguments");
    const hx_op_attention *a = (const hx_op_attention *)args;
    char msg[256];
    uint64_t nslots = 0;
    if (hx_oc_attention(a, sizes, n, &nslots, msg, sizeof msg))
        return hx_cu_fail(HX_ERR_INVALID_ARG, "%s", msg);
    if (!a->kv.T)
        return HX_OK;
    if ((uint64_t)a->kv.T * a->Hq > 0x7fffffffu)
        return hx_cu_fail(HX_ERR_INVALID_ARG, "attention: T * Hq above 2^31-1");
    uint64_t rb = hx_dq_row_bytes(a->kv_type, (uint64_t)a->Hkv * a->Dh);
    launch_any(c, a, bufs, nslots, rb, NULL, 0, -1);
    HX_CU_LAUNCHED("attention");
    return HX_OK;
}

HX_CU_LAUNCHER(hx_cu_attention_part)
{
    if (!args)
        return hx_cu_fail(HX_ERR_INVALID_ARG, "attention_part: no arguments");
    const hx_op_attention_part *p = (const hx_op_attention_part *)args;
    const hx_op_attention *a = &p->at;
    char msg[256];
    uint64_t nslots = 0;
    if (hx_oc_attention_part(p, sizes, n, &nslots, msg, sizeof msg))
        return hx_cu_fail(HX_ERR_INVALID_ARG, "%s", msg);
    if (!a->kv.T)
        return HX_OK;
    if ((uint64_t)a->kv.T * a->Hq > 0x7fffffffu)
        return hx_cu_fail(HX_ERR_INVALID_ARG, "attention_part: T * Hq above 2^31-1");
    uint64_t rb = hx_dq_row_bytes(a->kv_type, (uint64_t)a->Hkv * a->Dh);
    launch_any(c, a, bufs, nslots, rb, (float *)bufs[5], p->recent, (int)p->part);
    HX_CU_LAUNCHED("attention_part");
    return HX_OK;
}

HX_CU_LAUNCHER(hx_cu_attn_merge)
{
    if (!args)
        return hx_cu_fail(HX_ERR_INVALID_ARG, "attn_merge: no arguments");
    const hx_op_attn_merge *a = (const hx_op_attn_merge *)args;
    char msg[256];
    if (hx_oc_attn_merge(a, sizes, n, msg, sizeof msg))
        return hx_cu_fail(HX_ERR_INVALID_ARG, "%s", msg);
    if (!a->rows)
        return HX_OK;
    k_attn_merge<<<hx_cu_blocks(a->rows * a->Dh, 256, c), 256, 0, c->stream>>>(
        (const float *)bufs[0], (const float *)bufs[1], (const float *)bufs[2], (const float *)bufs[3],
        (float *)bufs[4], a->rows, a->Dh);
    HX_CU_LAUNCHED("attn_merge");
    return HX_OK;
}
