/* Mixture of experts (ops/ops.h): the router's softmax and top-k with the
 * route's bookkeeping ("moe_route"), and the experts' two halves
 * ("moe_gate_up", "moe_down") over weights of any type dequant.cl decodes
 * (F32, F16, Q8_0, Q4_0, Q4_K; the type is an argument, so gate and up may
 * differ).  Each work-item of a half owns one output of one route entry
 * and reads the route to find its token and expert; a route naming an
 * entry, an expert or a token outside the batch sets HX_BAD_INDEX and
 * writes nothing for it. */
#include "dequant.cl"
#include "gelu.cl"

#define MOE_WG 64
#define MOE_MAX_USED 16

/* GGUF type numbers (devices/cl_launch.c checks them before a launch). */
#define T_F32 0
#define T_F16 1
#define T_Q4_0 2
#define T_Q8_0 8
#define T_Q4_K 12

ulong moe_row_bytes(uint type, uint K)
{
    switch (type) {
    case T_F32: return (ulong)K * 4;
    case T_F16: return (ulong)K * 2;
    case T_Q8_0: return (ulong)(K / HX_QK) * HX_Q8_0_BYTES;
    case T_Q4_0: return (ulong)(K / HX_QK) * HX_Q4_0_BYTES;
    default: return (ulong)(K / HX_QK_K) * HX_Q4_K_BYTES;
    }
}

void moe_deq32(uint type, __global const uchar *row, uint j, uint K, float8 *w)
{
    switch (type) {
    case T_F32: hx_deq32_f32(row, j, K, w); break;
    case T_F16: hx_deq32_f16(row, j, K, w); break;
    case T_Q8_0: hx_deq32_q8_0(row, j, K, w); break;
    case T_Q4_0: hx_deq32_q4_0(row, j, K, w); break;
    default: hx_deq32_q4_k(row, j, K, w); break;
    }
}

/* Row n of expert e's [N][K] matrix against x[0 .. K). */
float moe_dot(uint type, __global const uchar *W, uint e, uint N, uint n, uint K, __global const float *x)
{
    const ulong rb = moe_row_bytes(type, K);
    __global const uchar *row = W + ((ulong)e * N + n) * rb;
    float s = 0.0f;
    for (uint j = 0; j < (K + HX_QK - 1) / HX_QK; j++) {
        float8 w[4];
        moe_deq32(type, row, j, K, w);
        s += hx_dot32(w, x + j * HX_QK, min((uint)HX_QK, K - j * HX_QK));
    }
    return s;
}

/* ---- moe_route: one work-group does the whole batch ---------------- */

/* Softmax over each token's E logits (exp of the difference with the
 * largest, scaled by the reciprocal of the sum), the k largest, ties to
 * the lower expert, optionally divided by their sum; then a stable
 * counting sort of the T*k entries by expert, and the layer's tallies. */
__kernel __attribute__((reqd_work_group_size(MOE_WG, 1, 1)))
void moe_route_f32(__global const float *logits, __global int *route, __global ulong *counts, const uint T,
                   const uint E, const uint k, const uint norm, const uint layer)
{
    const uint lid = get_local_id(0);
    const ulong tk = (ulong)T * k;
    __global int *ids = route;
    __global float *wts = (__global float *)(route + tk);
    __global int *off = route + 2 * tk, *order = off + E + 1, *inv = order + tk;
    for (uint t = lid; t < T; t += MOE_WG) {
        __global const float *l = logits + (ulong)t * E;
        float mx = -INFINITY;
        for (uint e = 0; e < E; e++)
            mx = fmax(mx, l[e]);
        float sum = 0.0f;
        for (uint e = 0; e < E; e++)
            sum += exp(l[e] - mx);
        const float rinv = 1.0f / sum;
        float w[MOE_MAX_USED];
        int id[MOE_MAX_USED];
        float wsum = 0.0f;
        for (uint j = 0; j < k; j++) {
            int best = -1;
            float pb = 0.0f;
            for (uint e = 0; e < E; e++) {
                int taken = 0;
                for (uint i = 0; i < j; i++)
                    taken |= id[i] == (int)e;
                const float p = exp(l[e] - mx) * rinv;
                if (!taken && (best < 0 || p > pb)) {
                    best = (int)e;
                    pb = p;
                }
            }
            id[j] = best;
            w[j] = pb;
            wsum += pb;
        }
        float s = norm ? wsum : 1.0f;
        if (!(s >= 6.103515625e-5f))
            s = 6.103515625e-5f;
        for (uint j = 0; j < k; j++) {
            ids[(ulong)t * k + j] = id[j];
            wts[(ulong)t * k + j] = norm ? w[j] / s : w[j];
        }
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
    for (uint e = lid; e < E; e += MOE_WG) {
        int n = 0;
        for (ulong i = 0; i < tk; i++)
            n += ids[i] == (int)e;
        off[e + 1] = n;
        counts[(ulong)layer * E + e] += (ulong)n;
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
    if (lid == 0) {
        off[0] = 0;
        for (uint e = 0; e < E; e++)
            off[e + 1] += off[e];
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
    for (uint e = lid; e < E; e += MOE_WG) {
        int at = off[e];
        for (ulong i = 0; i < tk; i++)
            if (ids[i] == (int)e) {
                order[at] = (int)i;
                inv[i] = at++;
            }
    }
}

/* ---- the experts' halves ------------------------------------------- */

/* h[i][f] = act(x[t] . gate_e[f]) * (x[t] . up_e[f]) for entry i of the
 * route's order (token t, expert e); act SiLU (0) or GELU as geglu (1). */
__kernel __attribute__((reqd_work_group_size(MOE_WG, 1, 1)))
void moe_gate_up_f32(__global const float *x, __global const int *route, __global const uchar *G,
                     __global const uchar *U, __global float *h, const uint T, const uint D, const uint F,
                     const uint E, const uint k, const uint gate_type, const uint up_type, const uint act,
                     const uint e_lo, const uint e_n, __global uint *status)
{
    const uint f = get_global_id(0), i = get_global_id(1);
    const ulong tk = (ulong)T * k;
    if (f >= F || i >= tk)
        return;
    const int entry = route[2 * tk + E + 1 + i]; /* order[i] */
    if (entry < 0 || (ulong)entry >= tk) {
        atomic_or(status, HX_BAD_INDEX);
        return;
    }
    const int e = route[entry];
    if (e < 0 || (uint)e >= E) {
        atomic_or(status, HX_BAD_INDEX);
        return;
    }
    /* a group (e_n > 0) writes its own experts' entries alone; its
     * weights hold those experts, from e_lo on */
    if (e_n && ((uint)e < e_lo || (uint)e >= e_lo + e_n))
        return;
    __global const float *xt = x + (ulong)(entry / k) * D;
    const float g = moe_dot(gate_type, G, (uint)e - e_lo, F, f, D, xt);
    const float u = moe_dot(up_type, U, (uint)e - e_lo, F, f, D, xt);
    const float a = act ? hx_gelu_table(g) : g / (1.0f + exp(-g));
    h[(ulong)i * F + f] = a * u;
}

/* out[t][d] = sum over the token's k entries, in turn, of weight *
 * (h[entry's place] . down_e[d]). */
__kernel __attribute__((reqd_work_group_size(MOE_WG, 1, 1)))
void moe_down_f32(__global const float *h, __global const int *route, __global const uchar *W,
                  __global float *out, const uint T, const uint D, const uint F, const uint E, const uint k,
                  const uint down_type, const uint e_lo, const uint e_n, const uint accumulate,
                  __global uint *status)
{
    const uint d = get_global_id(0), t = get_global_id(1);
    if (d >= D || t >= T)
        return;
    const ulong tk = (ulong)T * k;
    __global const float *wts = (__global const float *)(route + tk);
    __global const int *inv = route + 3 * tk + E + 1;
    /* a group (e_n > 0) sums its own experts' entries alone, added to
     * what the groups before it wrote when accumulate */
    float o = 0.0f;
    int first = 1;
    for (uint j = 0; j < k; j++) {
        const ulong at = (ulong)t * k + j;
        const int e = route[at], place = inv[at];
        if (e < 0 || (uint)e >= E || place < 0 || (ulong)place >= tk) {
            atomic_or(status, HX_BAD_INDEX);
            return;
        }
        if (e_n && ((uint)e < e_lo || (uint)e >= e_lo + e_n))
            continue;
        const float v = wts[at] * moe_dot(down_type, W, (uint)e - e_lo, D, d, F, h + (ulong)place * F);
        o = first ? v : o + v;
        first = 0;
    }
    out[(ulong)t * D + d] = accumulate ? out[(ulong)t * D + d] + o : o;
}
