/* Basic kernels: vector add and F32 GEMM (C = A * B^T). */

__kernel void vector_add(__global const float *x, __global const float *y, __global float *z,
                         const ulong n)
{
    size_t i = get_global_id(0);
    if (i < n)
        z[i] = x[i] + y[i];
}

#define GEMM_TILE 16

/* One work-item per output; A and B tiles staged in local memory. */
__kernel __attribute__((reqd_work_group_size(GEMM_TILE, GEMM_TILE, 1)))
void gemm_f32(__global const float *A, __global const float *B, __global float *C,
              const uint M, const uint N, const uint K)
{
    __local float As[GEMM_TILE][GEMM_TILE];
    __local float Bs[GEMM_TILE][GEMM_TILE];
    const uint n = get_global_id(0), m = get_global_id(1);
    const uint ln = get_local_id(0), lm = get_local_id(1);
    const uint n0 = get_group_id(0) * GEMM_TILE;
    float acc = 0.0f;
    for (uint k0 = 0; k0 < K; k0 += GEMM_TILE) {
        uint ka = k0 + ln, kb = k0 + lm;
        As[lm][ln] = (m < M && ka < K) ? A[(ulong)m * K + ka] : 0.0f;
        Bs[ln][lm] = (n0 + ln < N && kb < K) ? B[(ulong)(n0 + ln) * K + kb] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint k = 0; k < GEMM_TILE; k++)
            acc += As[lm][k] * Bs[ln][k];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (m < M && n < N)
        C[(ulong)m * N + n] = acc;
}
