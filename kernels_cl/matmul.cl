/* matmul: y = x W^T (+ bias), W [N][K] in F32, F16, Q8_0, Q4_0 or Q4_K,
 * x [T][K] F32.  Weights are dequantized in the kernel, 32 at a time into
 * registers; activations stay F32.  Each work-item owns one output row n
 * and walks its weights once: for T = 1 (_vec) against the one token, for
 * T > 1 (_tiled) against a tile of MM_TT tokens, so every dequantized
 * block serves MM_TT dot products.  No barriers and no local memory: the
 * 64 items of a group read neighbouring rows and share the x rows through
 * the cache, which suits CPU devices (PoCL vectorizes across items), GPUs
 * and pipelined FPGA loops alike. */
#include "dequant.cl"

#define MM_WG 64
#define MM_TT 8

/* ---- kernels: names spelled out (only the bodies are macros) so that the
 * bitstream manifest, v++ -k and the runtime's source scan all see them. */

#define HX_MATMUL_PARAMS                                                                            \
    __global const uchar *W, __global const float *x, __global float *y, __global const float *bias, \
        const uint N, const uint K, const uint T, const uint has_bias

#define HX_MATMUL_VEC(ROW_BYTES, DEQ)                                                               \
    const uint n = get_global_id(0);                                                                \
    if (n >= N)                                                                                     \
        return;                                                                                     \
    __global const uchar *row = W + (ulong)n * (ROW_BYTES);                                         \
    const uint nblocks = (K + HX_QK - 1) / HX_QK;                                                   \
    float s = 0.0f;                                                                                 \
    for (uint j = 0; j < nblocks; j++) {                                                            \
        float8 w[4];                                                                                \
        DEQ(row, j, K, w);                                                                          \
        s += hx_dot32(w, x + j * HX_QK, min((uint)HX_QK, K - j * HX_QK));                           \
    }                                                                                               \
    y[n] = s + (has_bias ? bias[n] : 0.0f);

#define HX_MATMUL_TILED(ROW_BYTES, DEQ)                                                             \
    const uint n = get_global_id(0), t0 = get_global_id(1) * MM_TT;                                 \
    if (n >= N || t0 >= T)                                                                          \
        return;                                                                                     \
    const uint tt = min((uint)MM_TT, T - t0);                                                       \
    __global const uchar *row = W + (ulong)n * (ROW_BYTES);                                         \
    const uint nblocks = (K + HX_QK - 1) / HX_QK;                                                   \
    float acc[MM_TT];                                                                               \
    for (uint i = 0; i < MM_TT; i++)                                                                \
        acc[i] = 0.0f;                                                                              \
    for (uint j = 0; j < nblocks; j++) {                                                            \
        float8 w[4];                                                                                \
        DEQ(row, j, K, w);                                                                          \
        const uint len = min((uint)HX_QK, K - j * HX_QK);                                           \
        for (uint i = 0; i < tt; i++)                                                               \
            acc[i] += hx_dot32(w, x + (ulong)(t0 + i) * K + j * HX_QK, len);                        \
    }                                                                                               \
    const float b = has_bias ? bias[n] : 0.0f;                                                      \
    for (uint i = 0; i < tt; i++)                                                                   \
        y[(ulong)(t0 + i) * N + n] = acc[i] + b;

#define F32_ROW ((ulong)K * 4)
#define F16_ROW ((ulong)K * 2)
#define Q8_0_ROW ((ulong)(K / HX_QK) * HX_Q8_0_BYTES)
#define Q4_0_ROW ((ulong)(K / HX_QK) * HX_Q4_0_BYTES)
#define Q4_K_ROW ((ulong)(K / HX_QK_K) * HX_Q4_K_BYTES)

__kernel __attribute__((reqd_work_group_size(MM_WG, 1, 1)))
void matmul_f32_vec(HX_MATMUL_PARAMS) { HX_MATMUL_VEC(F32_ROW, hx_deq32_f32) }
__kernel __attribute__((reqd_work_group_size(MM_WG, 1, 1)))
void matmul_f32_tiled(HX_MATMUL_PARAMS) { HX_MATMUL_TILED(F32_ROW, hx_deq32_f32) }

__kernel __attribute__((reqd_work_group_size(MM_WG, 1, 1)))
void matmul_f16_vec(HX_MATMUL_PARAMS) { HX_MATMUL_VEC(F16_ROW, hx_deq32_f16) }
__kernel __attribute__((reqd_work_group_size(MM_WG, 1, 1)))
void matmul_f16_tiled(HX_MATMUL_PARAMS) { HX_MATMUL_TILED(F16_ROW, hx_deq32_f16) }

__kernel __attribute__((reqd_work_group_size(MM_WG, 1, 1)))
void matmul_q8_0_vec(HX_MATMUL_PARAMS) { HX_MATMUL_VEC(Q8_0_ROW, hx_deq32_q8_0) }
__kernel __attribute__((reqd_work_group_size(MM_WG, 1, 1)))
void matmul_q8_0_tiled(HX_MATMUL_PARAMS) { HX_MATMUL_TILED(Q8_0_ROW, hx_deq32_q8_0) }

__kernel __attribute__((reqd_work_group_size(MM_WG, 1, 1)))
void matmul_q4_0_vec(HX_MATMUL_PARAMS) { HX_MATMUL_VEC(Q4_0_ROW, hx_deq32_q4_0) }
__kernel __attribute__((reqd_work_group_size(MM_WG, 1, 1)))
void matmul_q4_0_tiled(HX_MATMUL_PARAMS) { HX_MATMUL_TILED(Q4_0_ROW, hx_deq32_q4_0) }

__kernel __attribute__((reqd_work_group_size(MM_WG, 1, 1)))
void matmul_q4_k_vec(HX_MATMUL_PARAMS) { HX_MATMUL_VEC(Q4_K_ROW, hx_deq32_q4_k) }
__kernel __attribute__((reqd_work_group_size(MM_WG, 1, 1)))
void matmul_q4_k_tiled(HX_MATMUL_PARAMS) { HX_MATMUL_TILED(Q4_K_ROW, hx_deq32_q4_k) }
