/* Gemma's and the experts' ops: scale (with its soft-cap), geglu,
 * add_gated, and the mixture of experts' moe_route, moe_gate_up and
 * moe_down.  Contracts in ops/ops.h; the arguments are checked on the
 * host (op_check.h) and the route's indices on the device (a bad one sets
 * HX_CU_BAD_ROUTE and leaves its output NaN). */
#include <math.h>
#include <stdint.h>

#include <cuda_fp16.h>

#include "kernels_cu/common.cuh"

#define GRID_STRIDE(i, n)                                                                          \
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < (n);                    \
         i += (uint64_t)gridDim.x * blockDim.x)

#define CHECK_ARGS(op, check)                                                                      \
    do {                                                                                           \
        if (!args)                                                                                 \
            return hx_cu_fail(HX_ERR_INVALID_ARG, "%s: no arguments", op);                        \
        char msg_[256];                                                                            \
        if (check)                                                                                 \
            return hx_cu_fail(HX_ERR_INVALID_ARG, "%s", msg_);                                     \
    } while (0)

/* ---- scale, geglu, add_gated -------------------------------------------- */

__global__ void k_scale(float *__restrict__ x, uint64_t n, float scale, float cap)
{
    const float inv = cap > 0.0f ? 1.0f / cap : 0.0f;
    GRID_STRIDE(i, n)
    {
        const float v = x[i] * scale;
        x[i] = cap > 0.0f ? tanhf(v * inv) * cap : v;
    }
}

/* GELU, tanh form, through ggml's f16 table as its CPU backend: the input
 * rounded to f16 (nearest even), the result rounded to f16, x itself from
 * +10 and 0 up to -10. */
__device__ float hx_cu_gelu_table(float x)
{
    if (x <= -10.0f)
        return 0.0f;
    if (x >= 10.0f)
        return x;
    const float h = __half2float(__float2half_rn(x));
    /* tanh in double, rounded to float as the C library's tanhf rounds it:
     * below about -5, 1 + tanh cancels to a few ulps of 1, and tanhf's 2 ulp
     * error would give GELU values many times the CPU's. */
    const float z = 0.79788456080286535587989211986876f * h * (1.0f + 0.044715f * h * h);
    const float g = 0.5f * h * (1.0f + (float)tanh((double)z));
    return __half2float(__float2half_rn(g));
}

__global__ void k_geglu(const float *__restrict__ g, const float *__restrict__ u, float *__restrict__ o, uint64_t n)
{
    GRID_STRIDE(i, n) o[i] = hx_cu_gelu_table(g[i]) * u[i];
}

/* The sigmoid, the product, then the sum: llama.cpp's steps. */
__global__ void k_add_gated(float *__restrict__ x, const float *__restrict__ y, const float *__restrict__ g,
                            uint32_t T, uint32_t D)
{
    GRID_STRIDE(i, (uint64_t)T * D)
    {
        const float s = 1.0f / (1.0f + expf(-g[i / D]));
        const float v = y[i] * s;
        x[i] += v;
    }
}

HX_CU_LAUNCHER(hx_cu_scale)
{
    const hx_op_scale *a = (const hx_op_scale *)args;
    CHECK_ARGS("scale", hx_oc_scale(a, sizes, n, msg_, sizeof msg_));
    if (!a->n)
        return HX_OK;
    k_scale<<<hx_cu_blocks(a->n, 256, c), 256, 0, c->stream>>>((float *)bufs[0], a->n, a->scale, a->cap);
    HX_CU_LAUNCHED("scale");
    return HX_OK;
}

HX_CU_LAUNCHER(hx_cu_geglu)
{
    const hx_op_geglu *a = (const hx_op_geglu *)args;
    CHECK_ARGS("geglu", hx_oc_geglu(a, sizes, n, msg_, sizeof msg_));
    if (!a->n)
        return HX_OK;
    k_geglu<<<hx_cu_blocks(a->n, 256, c), 256, 0, c->stream>>>((const float *)bufs[0], (const float *)bufs[1],
                                                                (float *)bufs[2], a->n);
    HX_CU_LAUNCHED("geglu");
    return HX_OK;
}

HX_CU_LAUNCHER(hx_cu_add_gated)
{
    const hx_op_add_gated *a = (const hx_op_add_gated *)args;
    CHECK_ARGS("add_gated", hx_oc_add_gated(a, sizes, n, msg_, sizeof msg_));
    const uint64_t total = (uint64_t)a->T * a->D;
    if (!total)
        return HX_OK;
    k_add_gated<<<hx_cu_blocks(total, 256, c), 256, 0, c->stream>>>((float *)bufs[0], (const float *)bufs[1],
                                                                     (const float *)bufs[2], a->T, a->D);
    HX_CU_LAUNCHED("add_gated");
    return HX_OK;
}

/* ---- moe_route: one block does the whole batch --------------------------- */

#define ROUTE_THREADS 256

/* Softmax (exp of the difference with the largest, summed, scaled by the
 * reciprocal), the k largest with ties to the lower expert, optionally
 * divided by their sum (clamped below at 6.103515625e-5); then a stable
 * counting sort of the entries by expert and the layer's tallies. */
__global__ void k_moe_route(const float *__restrict__ logits, int32_t *__restrict__ route,
                            unsigned long long *__restrict__ counts, uint32_t T, uint32_t E, uint32_t k, uint32_t norm,
                            uint32_t layer)
{
    const uint64_t tk = (uint64_t)T * k;
    int32_t *ids = route, *off = route + 2 * tk, *order = off + E + 1, *inv = order + tk;
    float *wts = (float *)(route + tk);
    for (uint32_t t = threadIdx.x; t < T; t += blockDim.x) {
        const float *l = logits + (uint64_t)t * E;
        float mx = -INFINITY;
        for (uint32_t e = 0; e < E; e++)
            mx = fmaxf(mx, l[e]);
        double sum = 0.0;
        for (uint32_t e = 0; e < E; e++)
            sum += expf(l[e] - mx);
        const float rinv = (float)(1.0 / sum);
        int32_t id[HX_MOE_MAX_USED];
        float w[HX_MOE_MAX_USED];
        double wsum = 0.0;
        for (uint32_t j = 0; j < k; j++) {
            int32_t best = -1;
            float pb = 0.0f;
            for (uint32_t e = 0; e < E; e++) {
                bool taken = false;
                for (uint32_t i = 0; i < j; i++)
                    taken |= id[i] == (int32_t)e;
                const float p = expf(l[e] - mx) * rinv;
                if (!taken && (best < 0 || p > pb)) {
                    best = (int32_t)e;
                    pb = p;
                }
            }
            id[j] = best;
            w[j] = pb;
            wsum += pb;
        }
        float s = (float)wsum;
        if (!(s >= 6.103515625e-5f))
            s = 6.103515625e-5f;
        for (uint32_t j = 0; j < k; j++) {
            ids[(uint64_t)t * k + j] = id[j];
            wts[(uint64_t)t * k + j] = norm ? w[j] / s : w[j];
        }
    }
    __syncthreads();
    for (uint32_t e = threadIdx.x; e < E; e += blockDim.x) {
        int32_t cnt = 0;
        for (uint64_t i = 0; i < tk; i++)
            cnt += ids[i] == (int32_t)e;
        off[e + 1] = cnt;
        counts[(uint64_t)layer * E + e] += (unsigned long long)cnt;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        off[0] = 0;
        for (uint32_t e = 0; e < E; e++)
            off[e + 1] += off[e];
    }
    __syncthreads();
    for (uint32_t e = threadIdx.x; e < E; e += blockDim.x) {
        int32_t at = off[e];
        for (uint64_t i = 0; i < tk; i++)
            if (ids[i] == (int32_t)e) {
                order[at] = (int32_t)i;
                inv[i] = at++;
            }
    }
}

HX_CU_LAUNCHER(hx_cu_moe_route)
{
    const hx_op_moe_route *a = (const hx_op_moe_route *)args;
    CHECK_ARGS("moe_route", hx_oc_moe_route(a, sizes, n, msg_, sizeof msg_));
    k_moe_route<<<1, ROUTE_THREADS, 0, c->stream>>>((const float *)bufs[0], (int32_t *)bufs[1],
                                                    (unsigned long long *)bufs[2], a->T, a->E, a->k, a->norm,
                                                    a->layer);
    HX_CU_LAUNCHED("moe_route");
    return HX_OK;
}

/* ---- the experts' halves: one warp per output ------------------------------ */

/* Row r of an expert matrix (rows of K elements in `type`) against x, by
 * one warp: lanes take 32-element groups of quantized rows, elements of
 * plain ones; the sum reaches every lane. */
__device__ float hx_cu_warp_dot(uint32_t type, const uint8_t *row, uint32_t K, const float *x)
{
    const uint32_t lane = threadIdx.x & 31;
    float s = 0.0f;
    if (hx_dq_is_quantized(type)) {
        for (uint32_t g = lane; g < K / HX_DQ_GROUP; g += 32) {
            float v[HX_DQ_GROUP];
            hx_dq_group(type, row, g, v);
            const float *xg = x + (uint64_t)g * HX_DQ_GROUP;
            for (int i = 0; i < HX_DQ_GROUP; i++)
                s += v[i] * xg[i];
        }
    } else {
        for (uint32_t i = lane; i < K; i += 32)
            s += hx_dq_plain_elem(type, row, i) * x[i];
    }
    for (int o = 16; o; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    return s;
}

#define MOE_THREADS 128

__global__ void k_moe_gate_up(const float *__restrict__ x, const int32_t *__restrict__ route, const uint8_t *G,
                              const uint8_t *U, float *__restrict__ h, uint32_t T, uint32_t D, uint32_t F, uint32_t E,
                              uint32_t k, uint32_t gt, uint32_t ut, uint32_t act, uint64_t gb, uint64_t ub,
                              uint32_t e_lo, uint32_t e_n, unsigned *flag)
{
    const uint64_t tk = (uint64_t)T * k, total = tk * F;
    const uint64_t warps = (uint64_t)gridDim.x * (blockDim.x / 32);
    for (uint64_t w = blockIdx.x * (uint64_t)(blockDim.x / 32) + threadIdx.x / 32; w < total; w += warps) {
        const uint64_t i = w / F;
        const uint32_t f = (uint32_t)(w % F);
        const int32_t entry = route[2 * tk + E + 1 + i]; /* order[i] */
        const int32_t e = entry >= 0 && (uint64_t)entry < tk ? route[entry] : -1;
        if (e < 0 || (uint32_t)e >= E) {
            if ((threadIdx.x & 31) == 0) {
                atomicOr(flag, HX_CU_BAD_ROUTE);
                h[i * F + f] = HX_CU_NAN;
            }
            continue;
        }
        /* a group (e_n > 0) writes its own experts' entries alone; its
         * weights hold those experts, from e_lo on */
        if (e_n && ((uint32_t)e < e_lo || (uint32_t)e >= e_lo + e_n))
            continue;
        const uint64_t r = (uint64_t)((uint32_t)e - (e_n ? e_lo : 0)) * F + f;
        const float *xt = x + (uint64_t)(entry / (int32_t)k) * D;
        const float g = hx_cu_warp_dot(gt, G + r * gb, D, xt);
        const float u = hx_cu_warp_dot(ut, U + r * ub, D, xt);
        if ((threadIdx.x & 31) == 0)
            h[i * F + f] = (act ? hx_cu_gelu_table(g) : g / (1.0f + expf(-g))) * u;
    }
}

/* out[t][d]: the token's k entries in turn, each weight times its
 * expert's product, added as llama.cpp does; a group (e_n > 0) sums its
 * own experts' entries alone, added to what the groups before it wrote
 * when accumulate. */
__global__ void k_moe_down(const float *__restrict__ hbuf, const int32_t *__restrict__ route, const uint8_t *W,
                           float *__restrict__ out, uint32_t T, uint32_t D, uint32_t F, uint32_t E, uint32_t k,
                           uint32_t type, uint64_t rb, uint32_t e_lo, uint32_t e_n, uint32_t accumulate,
                           unsigned *flag)
{
    const uint64_t tk = (uint64_t)T * k, total = (uint64_t)T * D;
    const float *wts = (const float *)(route + tk);
    const int32_t *inv = route + 3 * tk + E + 1;
    const uint64_t warps = (uint64_t)gridDim.x * (blockDim.x / 32);
    for (uint64_t w = blockIdx.x * (uint64_t)(blockDim.x / 32) + threadIdx.x / 32; w < total; w += warps) {
        const uint32_t t = (uint32_t)(w / D), d = (uint32_t)(w % D);
        float o = 0.0f;
        bool bad = false, first = true;
        for (uint32_t j = 0; j < k && !bad; j++) {
            const uint64_t at = (uint64_t)t * k + j;
            const int32_t e = route[at], place = inv[at];
            if (e < 0 || (uint32_t)e >= E || place < 0 || (uint64_t)place >= tk) {
                bad = true;
                break;
            }
            if (e_n && ((uint32_t)e < e_lo || (uint32_t)e >= e_lo + e_n))
                continue;
            const uint64_t r = (uint64_t)((uint32_t)e - (e_n ? e_lo : 0)) * D + d;
            const float v = wts[at] * hx_cu_warp_dot(type, W + r * rb, F, hbuf + (uint64_t)place * F);
            o = first ? v : o + v;
            first = false;
        }
        if ((threadIdx.x & 31) == 0) {
            if (bad)
                atomicOr(flag, HX_CU_BAD_ROUTE);
            out[w] = bad ? HX_CU_NAN : accumulate ? out[w] + o : o;
        }
    }
}

HX_CU_LAUNCHER(hx_cu_moe_gate_up)
{
    const hx_op_moe_gate_up *a = (const hx_op_moe_gate_up *)args;
    CHECK_ARGS("moe_gate_up", hx_oc_moe_gate_up(a, sizes, n, msg_, sizeof msg_));
    const uint64_t warps = (uint64_t)a->T * a->k * a->F;
    if (!warps)
        return HX_OK;
    k_moe_gate_up<<<hx_cu_blocks(warps * 32, MOE_THREADS, c), MOE_THREADS, 0, c->stream>>>(
        (const float *)bufs[0], (const int32_t *)bufs[1], (const uint8_t *)bufs[2], (const uint8_t *)bufs[3],
        (float *)bufs[4], a->T, a->D, a->F, a->E, a->k, a->gate_type, a->up_type, a->act,
        hx_dq_row_bytes(a->gate_type, a->D), hx_dq_row_bytes(a->up_type, a->D), a->e_lo, a->e_n, c->flag_dev);
    HX_CU_LAUNCHED("moe_gate_up");
    return HX_OK;
}

HX_CU_LAUNCHER(hx_cu_moe_down)
{
    const hx_op_moe_down *a = (const hx_op_moe_down *)args;
    CHECK_ARGS("moe_down", hx_oc_moe_down(a, sizes, n, msg_, sizeof msg_));
    const uint64_t warps = (uint64_t)a->T * a->D;
    if (!warps)
        return HX_OK;
    k_moe_down<<<hx_cu_blocks(warps * 32, MOE_THREADS, c), MOE_THREADS, 0, c->stream>>>(
        (const float *)bufs[0], (const int32_t *)bufs[1], (const uint8_t *)bufs[2], (float *)bufs[3], a->T, a->D,
        a->F, a->E, a->k, a->down_type, hx_dq_row_bytes(a->down_type, a->F), a->e_lo, a->e_n, a->accumulate,
        c->flag_dev);
    HX_CU_LAUNCHED("moe_down");
    return HX_OK;
}
