/* matmul: y = x W^T (+ bias), W [N][K] in F32, F16, Q8_0, Q4_0 or Q4_K,
 * x [T][K] F32.  Weights are dequantized in the kernel; activations stay
 * F32.  T = 1: a work-group per output row, its items splitting the row's
 * 32-element blocks.  T > 1: 16 x 16 output tiles, the x and dequantized W
 * tiles staged in local memory 32 columns at a time. */
#include "common.cl"

#define MV_WG 64
#define MM_TILE 16
#define MM_TK 32

/* ---- dot products of one 32-weight block with x[32j ..] --------------- */

float hx_dot_f32(__global const uchar *row, uint j, __global const float *x, uint K)
{
    __global const float *w = (__global const float *)row;
    const uint k0 = j * HX_QK, n = min((uint)HX_QK, K - k0);
    float s = 0.0f;
    for (uint i = 0; i < n; i++)
        s += w[k0 + i] * x[k0 + i];
    return s;
}

float hx_dot_f16(__global const uchar *row, uint j, __global const float *x, uint K)
{
    const uint k0 = j * HX_QK, n = min((uint)HX_QK, K - k0);
    float s = 0.0f;
    for (uint i = 0; i < n; i++)
        s += vload_half(k0 + i, (__global const half *)row) * x[k0 + i];
    return s;
}

float hx_dot_q8_0(__global const uchar *row, uint j, __global const float *x, uint K)
{
    __global const uchar *b = row + j * HX_Q8_0_BYTES;
    __global const char *q = (__global const char *)(b + 2);
    x += j * HX_QK;
    float s = 0.0f;
    for (uint i = 0; i < HX_QK; i++)
        s += (float)q[i] * x[i];
    return hx_half(b) * s;
}

float hx_dot_q4_0(__global const uchar *row, uint j, __global const float *x, uint K)
{
    __global const uchar *b = row + j * HX_Q4_0_BYTES;
    x += j * HX_QK;
    float s = 0.0f;
    for (uint i = 0; i < HX_QK / 2; i++) {
        const uchar q = b[2 + i];
        s += (float)((int)(q & 15) - 8) * x[i] + (float)((int)(q >> 4) - 8) * x[i + HX_QK / 2];
    }
    return hx_half(b) * s;
}

float hx_dot_q4_k(__global const uchar *row, uint j, __global const float *x, uint K)
{
    __global const uchar *b = row + (j / 8) * HX_Q4_K_BYTES;
    const uint sub = j % 8, hi = sub & 1;
    __global const uchar *q = b + 16 + 32 * (sub / 2);
    x += j * HX_QK;
    float sc, m, s = 0.0f, sx = 0.0f;
    hx_q4_k_scale_min(b + 4, sub, &sc, &m);
    for (uint i = 0; i < HX_QK; i++) {
        s += (float)(hi ? (q[i] >> 4) : (q[i] & 15)) * x[i];
        sx += x[i];
    }
    return hx_half(b) * sc * s - hx_half(b + 2) * m * sx;
}

/* ---- kernels, one pair per weight type --------------------------------
 * Kernel names are spelled out (only the bodies are macros) so that the
 * bitstream manifest, v++ -k and the runtime's source scan all see them. */

#define HX_MATMUL_PARAMS                                                                            \
    __global const uchar *W, __global const float *x, __global float *y, __global const float *bias, \
        const uint N, const uint K, const uint T, const uint has_bias

#define HX_MATMUL_VEC(ROW_BYTES, DOT)                                                              \
    __local float part[MV_WG];                                                                      \
    const uint lid = get_local_id(0), n = get_group_id(0);                                          \
    __global const uchar *row = W + (ulong)n * (ROW_BYTES);                                         \
    const uint nblocks = (K + HX_QK - 1) / HX_QK;                                                   \
    float s = 0.0f;                                                                                 \
    for (uint j = lid; j < nblocks; j += MV_WG)                                                     \
        s += DOT(row, j, x, K);                                                                     \
    part[lid] = s;                                                                                  \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                   \
    for (uint h = MV_WG / 2; h > 0; h /= 2) {                                                       \
        if (lid < h)                                                                                \
            part[lid] += part[lid + h];                                                             \
        barrier(CLK_LOCAL_MEM_FENCE);                                                               \
    }                                                                                               \
    if (lid == 0 && n < N)                                                                          \
        y[n] = part[0] + (has_bias ? bias[n] : 0.0f);

#define HX_MATMUL_TILED(ROW_BYTES, LOAD)                                                           \
    __local float Xs[MM_TILE][MM_TK + 1];                                                           \
    __local float Ws[MM_TILE][MM_TK + 1];                                                           \
    const uint lx = get_local_id(0), ly = get_local_id(1), lid = ly * MM_TILE + lx;                 \
    const uint n0 = get_group_id(0) * MM_TILE, t0 = get_group_id(1) * MM_TILE;                      \
    float acc = 0.0f;                                                                               \
    for (uint k0 = 0; k0 < K; k0 += MM_TK) {                                                        \
        for (uint e = lid; e < MM_TILE * MM_TK; e += MM_TILE * MM_TILE) {                           \
            const uint r = e / MM_TK, c = e % MM_TK, k = k0 + c, t = t0 + r, n = n0 + r;            \
            __global const uchar *row = W + (ulong)n * (ROW_BYTES);                                 \
            Xs[r][c] = (t < T && k < K) ? x[(ulong)t * K + k] : 0.0f;                               \
            Ws[r][c] = (n < N && k < K) ? (LOAD) : 0.0f;                                            \
        }                                                                                           \
        barrier(CLK_LOCAL_MEM_FENCE);                                                               \
        for (uint c = 0; c < MM_TK; c++)                                                            \
            acc += Xs[ly][c] * Ws[lx][c];                                                           \
        barrier(CLK_LOCAL_MEM_FENCE);                                                               \
    }                                                                                               \
    const uint n = n0 + lx, t = t0 + ly;                                                            \
    if (n < N && t < T)                                                                             \
        y[(ulong)t * N + n] = acc + (has_bias ? bias[n] : 0.0f);

#define F32_ROW ((ulong)K * 4)
#define F16_ROW ((ulong)K * 2)
#define Q8_0_ROW ((ulong)(K / HX_QK) * HX_Q8_0_BYTES)
#define Q4_0_ROW ((ulong)(K / HX_QK) * HX_Q4_0_BYTES)
#define Q4_K_ROW ((ulong)(K / HX_QK_K) * HX_Q4_K_BYTES)

__kernel __attribute__((reqd_work_group_size(MV_WG, 1, 1)))
void matmul_f32_vec(HX_MATMUL_PARAMS) { HX_MATMUL_VEC(F32_ROW, hx_dot_f32) }
__kernel __attribute__((reqd_work_group_size(MM_TILE, MM_TILE, 1)))
void matmul_f32_tiled(HX_MATMUL_PARAMS) { HX_MATMUL_TILED(F32_ROW, ((__global const float *)row)[k]) }

__kernel __attribute__((reqd_work_group_size(MV_WG, 1, 1)))
void matmul_f16_vec(HX_MATMUL_PARAMS) { HX_MATMUL_VEC(F16_ROW, hx_dot_f16) }
__kernel __attribute__((reqd_work_group_size(MM_TILE, MM_TILE, 1)))
void matmul_f16_tiled(HX_MATMUL_PARAMS) { HX_MATMUL_TILED(F16_ROW, vload_half(k, (__global const half *)row)) }

__kernel __attribute__((reqd_work_group_size(MV_WG, 1, 1)))
void matmul_q8_0_vec(HX_MATMUL_PARAMS) { HX_MATMUL_VEC(Q8_0_ROW, hx_dot_q8_0) }
__kernel __attribute__((reqd_work_group_size(MM_TILE, MM_TILE, 1)))
void matmul_q8_0_tiled(HX_MATMUL_PARAMS) { HX_MATMUL_TILED(Q8_0_ROW, hx_q8_0(row, k)) }

__kernel __attribute__((reqd_work_group_size(MV_WG, 1, 1)))
void matmul_q4_0_vec(HX_MATMUL_PARAMS) { HX_MATMUL_VEC(Q4_0_ROW, hx_dot_q4_0) }
__kernel __attribute__((reqd_work_group_size(MM_TILE, MM_TILE, 1)))
void matmul_q4_0_tiled(HX_MATMUL_PARAMS) { HX_MATMUL_TILED(Q4_0_ROW, hx_q4_0(row, k)) }

__kernel __attribute__((reqd_work_group_size(MV_WG, 1, 1)))
void matmul_q4_k_vec(HX_MATMUL_PARAMS) { HX_MATMUL_VEC(Q4_K_ROW, hx_dot_q4_k) }
__kernel __attribute__((reqd_work_group_size(MM_TILE, MM_TILE, 1)))
void matmul_q4_k_tiled(HX_MATMUL_PARAMS) { HX_MATMUL_TILED(Q4_K_ROW, hx_q4_k(row, k)) }
