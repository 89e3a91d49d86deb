/* The element-wise and row-wise layer ops: rmsnorm, rope, add, swiglu,
 * get_rows (and the built-in vector_add).  Contracts in ops/ops.h. */
#include <math.h>
#include <stdint.h>

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

/* ---- rmsnorm ------------------------------------------------------------ */

#define NORM_THREADS 256

__global__ void k_rmsnorm(const float *__restrict__ x, const float *__restrict__ w, float *__restrict__ y,
                          uint32_t T, uint32_t D, float eps)
{
    __shared__ float partial[NORM_THREADS / 32];
    for (uint32_t t = blockIdx.x; t < T; t += gridDim.x) {
        const float *xr = x + (uint64_t)t * D;
        float *yr = y + (uint64_t)t * D;
        float ss = 0.0f;
        for (uint32_t i = threadIdx.x; i < D; i += blockDim.x)
            ss += xr[i] * xr[i];
        for (int o = 16; o; o >>= 1)
            ss += __shfl_xor_sync(0xffffffffu, ss, o);
        if ((threadIdx.x & 31) == 0)
            partial[threadIdx.x / 32] = ss;
        __syncthreads();
        float total = 0.0f;
        for (int i = 0; i < NORM_THREADS / 32; i++)
            total += partial[i];
        float scale = 1.0f / sqrtf(total / (float)D + eps);
        for (uint32_t i = threadIdx.x; i < D; i += blockDim.x)
            yr[i] = xr[i] * scale * w[i];
        __syncthreads(); /* `partial` is reused by the next row */
    }
}

HX_CU_LAUNCHER(hx_cu_rmsnorm)
{
    const hx_op_rmsnorm *a = (const hx_op_rmsnorm *)args;
    CHECK_ARGS("rmsnorm", hx_oc_rmsnorm(a, sizes, n, msg_, sizeof msg_));
    if (!a->T || !a->D)
        return HX_OK;
    unsigned blocks = a->T < (uint32_t)c->sm_count * 8 ? a->T : (uint32_t)c->sm_count * 8;
    k_rmsnorm<<<blocks, NORM_THREADS, 0, c->stream>>>((const float *)bufs[0], (const float *)bufs[1],
                                                      (float *)bufs[2], a->T, a->D, a->eps);
    HX_CU_LAUNCHED("rmsnorm");
    return HX_OK;
}

/* ---- rope --------------------------------------------------------------- */

/* The angle in double: positions reach the tens of thousands, where a float
 * angle has lost most of the bits that its sine depends on. */
__global__ void k_rope(float *__restrict__ x, const int32_t *__restrict__ pos, uint32_t T, uint32_t H, uint32_t Dh,
                       uint32_t n_rot, float base, float scale, uint32_t neox,
                       const float *__restrict__ factors)
{
    uint32_t half = n_rot / 2;
    uint64_t total = (uint64_t)T * H * half;
    GRID_STRIDE(idx, total)
    {
        uint32_t i = (uint32_t)(idx % half);
        uint64_t th = idx / half;
        uint32_t t = (uint32_t)(th / H);
        float *v = x + th * Dh;
        double theta = (double)pos[t] * (double)scale * pow((double)base, -2.0 * (double)i / (double)n_rot);
        if (factors) /* Llama 3.1's rope_freqs */
            theta /= (double)factors[i];
        double sn, cs;
        sincos(theta, &sn, &cs);
        float s = (float)sn, c = (float)cs;
        uint32_t i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
        float x0 = v[i0], x1 = v[i1];
        v[i0] = x0 * c - x1 * s;
        v[i1] = x0 * s + x1 * c;
    }
}

HX_CU_LAUNCHER(hx_cu_rope)
{
    const hx_op_rope *a = (const hx_op_rope *)args;
    CHECK_ARGS("rope", hx_oc_rope(a, sizes, n, msg_, sizeof msg_));
    uint64_t total = (uint64_t)a->T * a->H * (a->n_rot / 2);
    if (!total)
        return HX_OK;
    k_rope<<<hx_cu_blocks(total, 256, c), 256, 0, c->stream>>>((float *)bufs[0], (const int32_t *)bufs[1], a->T, a->H,
                                                                a->Dh, a->n_rot, a->freq_base, a->freq_scale, a->neox,
                                                                a->has_factors ? (const float *)bufs[2] : NULL);
    HX_CU_LAUNCHED("rope");
    return HX_OK;
}

/* ---- add, vector_add, swiglu -------------------------------------------- */

__global__ void k_add(float *__restrict__ x, const float *__restrict__ y, uint64_t n)
{
    GRID_STRIDE(i, n) x[i] += y[i];
}

__global__ void k_vector_add(const float *__restrict__ x, const float *__restrict__ y, float *__restrict__ z,
                             uint64_t n)
{
    GRID_STRIDE(i, n) z[i] = x[i] + y[i];
}

__global__ void k_swiglu(const float *__restrict__ g, const float *__restrict__ u, float *__restrict__ o, uint64_t n)
{
    GRID_STRIDE(i, n) o[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

HX_CU_LAUNCHER(hx_cu_add)
{
    const hx_op_add *a = (const hx_op_add *)args;
    CHECK_ARGS("add", hx_oc_add(a, sizes, n, msg_, sizeof msg_));
    if (!a->n)
        return HX_OK;
    k_add<<<hx_cu_blocks(a->n, 256, c), 256, 0, c->stream>>>((float *)bufs[0], (const float *)bufs[1], a->n);
    HX_CU_LAUNCHED("add");
    return HX_OK;
}

HX_CU_LAUNCHER(hx_cu_vector_add)
{
    if (!args)
        return hx_cu_fail(HX_ERR_INVALID_ARG, "vector_add: no arguments");
    const hx_args_vector_add *a = (const hx_args_vector_add *)args;
    if (n != 3)
        return hx_cu_fail(HX_ERR_INVALID_ARG, "vector_add: %d buffers given, 3 expected", n);
    for (int i = 0; i < 3; i++)
        if (!hx_oc_fits(a->n, 4, 1, sizes[i]))
            return hx_cu_fail(HX_ERR_INVALID_ARG, "vector_add: buffer %d is smaller than n floats", i);
    if (!a->n)
        return HX_OK;
    k_vector_add<<<hx_cu_blocks(a->n, 256, c), 256, 0, c->stream>>>((const float *)bufs[0], (const float *)bufs[1],
                                                                     (float *)bufs[2], a->n);
    HX_CU_LAUNCHED("vector_add");
    return HX_OK;
}

HX_CU_LAUNCHER(hx_cu_swiglu)
{
    const hx_op_swiglu *a = (const hx_op_swiglu *)args;
    CHECK_ARGS("swiglu", hx_oc_swiglu(a, sizes, n, msg_, sizeof msg_));
    if (!a->n)
        return HX_OK;
    k_swiglu<<<hx_cu_blocks(a->n, 256, c), 256, 0, c->stream>>>((const float *)bufs[0], (const float *)bufs[1],
                                                                 (float *)bufs[2], a->n);
    HX_CU_LAUNCHED("swiglu");
    return HX_OK;
}

/* ---- get_rows ----------------------------------------------------------- */

/* One thread per 32-element group of a quantized row. */
__global__ void k_get_rows_groups(uint32_t type, const uint8_t *__restrict__ table, uint64_t rb, uint64_t rows,
                                  const int32_t *__restrict__ ids, float *__restrict__ out, uint32_t T, uint32_t D,
                                  unsigned *flag)
{
    uint32_t groups = D / HX_DQ_GROUP;
    GRID_STRIDE(i, (uint64_t)T * groups)
    {
        uint32_t t = (uint32_t)(i / groups), g = (uint32_t)(i % groups);
        int32_t id = ids[t];
        float *o = out + (uint64_t)t * D + (uint64_t)g * HX_DQ_GROUP;
        if (id < 0 || (uint64_t)id >= rows) {
            atomicOr(flag, HX_CU_BAD_ROW_ID);
            for (int k = 0; k < HX_DQ_GROUP; k++)
                o[k] = HX_CU_NAN;
            continue;
        }
        float v[HX_DQ_GROUP];
        hx_dq_group(type, table + (uint64_t)id * rb, g, v);
        for (int k = 0; k < HX_DQ_GROUP; k++)
            o[k] = v[k];
    }
}

__global__ void k_get_rows_plain(uint32_t type, const uint8_t *__restrict__ table, uint64_t rb, uint64_t rows,
                                 const int32_t *__restrict__ ids, float *__restrict__ out, uint32_t T, uint32_t D,
                                 unsigned *flag)
{
    GRID_STRIDE(i, (uint64_t)T * D)
    {
        uint32_t t = (uint32_t)(i / D);
        uint64_t k = i % D;
        int32_t id = ids[t];
        if (id < 0 || (uint64_t)id >= rows) {
            if (k == 0)
                atomicOr(flag, HX_CU_BAD_ROW_ID);
            out[i] = HX_CU_NAN;
            continue;
        }
        out[i] = hx_dq_plain_elem(type, table + (uint64_t)id * rb, k);
    }
}

HX_CU_LAUNCHER(hx_cu_get_rows)
{
    const hx_op_get_rows *a = (const hx_op_get_rows *)args;
    uint64_t rows = 0;
    CHECK_ARGS("get_rows", hx_oc_get_rows(a, sizes, n, &rows, msg_, sizeof msg_));
    if (!a->T)
        return HX_OK;
    uint64_t rb = hx_dq_row_bytes(a->type, a->D);
    const uint8_t *table = (const uint8_t *)bufs[0];
    const int32_t *ids = (const int32_t *)bufs[1];
    float *out = (float *)bufs[2];
    if (hx_dq_is_quantized(a->type)) {
        uint64_t total = (uint64_t)a->T * (a->D / HX_DQ_GROUP);
        k_get_rows_groups<<<hx_cu_blocks(total, 128, c), 128, 0, c->stream>>>(a->type, table, rb, rows, ids, out, a->T,
                                                                              a->D, c->flag_dev);
    } else {
        uint64_t total = (uint64_t)a->T * a->D;
        k_get_rows_plain<<<hx_cu_blocks(total, 256, c), 256, 0, c->stream>>>(a->type, table, rb, rows, ids, out, a->T,
                                                                             a->D, c->flag_dev);
    }
    HX_CU_LAUNCHED("get_rows");
    return HX_OK;
}
