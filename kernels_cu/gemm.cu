/* "matmul" and "gemm_f32": y = x W^T (+ bias).
 *
 * Decode (T == 1) is a memory-bound matrix-vector product: one warp per
 * weight row reads the row once, dequantizing in registers, against F32
 * activations.  Prefill (T > 1) goes to cuBLASLt: F32 weights directly,
 * F16/BF16 weights against activations converted to the same type, and
 * quantized weights dequantized tile by tile into F16 (dequant_tile.h)
 * then multiplied; accumulation is F32 throughout. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <string.h>

#include "kernels_cu/common.cuh"

/* Upper bound on a dequantized weight tile: big enough for cuBLAS to reach
 * full speed, small enough to stay beside the weights of a large model. */
#define HX_CU_TILE_BYTES ((uint64_t)64 << 20)
#define GEMV_WARPS 8

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ void gemv_store(float acc, float *y, const float *bias, uint32_t n)
{
    acc = warp_sum(acc);
    if ((threadIdx.x & 31) == 0)
        y[n] = bias ? acc + bias[n] : acc;
}

/* ---- decode: fused dequantize + GEMV ------------------------------------ */

/* Q8_0: four lanes share a block, eight contiguous quants each. */
__global__ void k_gemv_q8_0(const uint8_t *__restrict__ W, uint64_t rb, const float *__restrict__ x,
                            float *__restrict__ y, const float *__restrict__ bias, uint32_t N, uint32_t K)
{
    uint32_t n = blockIdx.x * GEMV_WARPS + threadIdx.x / 32;
    if (n >= N)
        return;
    uint32_t lane = threadIdx.x & 31, sub = lane & 3, nb = K / 32;
    const uint8_t *row = W + (uint64_t)n * rb;
    float acc = 0.0f;
    for (uint32_t b = lane >> 2; b < nb; b += 8) {
        const uint8_t *p = row + (uint64_t)b * 34;
        float d = hx_dq_f16_to_f32(*(const uint16_t *)p);
        const uint16_t *q = (const uint16_t *)(p + 2 + 8 * sub);
        const float4 *xv = (const float4 *)(x + 32 * (uint64_t)b + 8 * sub);
        float4 x0 = xv[0], x1 = xv[1];
        uint16_t q0 = q[0], q1 = q[1], q2 = q[2], q3 = q[3];
        float s = (float)(int8_t)(q0 & 0xff) * x0.x + (float)(int8_t)(q0 >> 8) * x0.y +
                  (float)(int8_t)(q1 & 0xff) * x0.z + (float)(int8_t)(q1 >> 8) * x0.w +
                  (float)(int8_t)(q2 & 0xff) * x1.x + (float)(int8_t)(q2 >> 8) * x1.y +
                  (float)(int8_t)(q3 & 0xff) * x1.z + (float)(int8_t)(q3 >> 8) * x1.w;
        acc += d * s;
    }
    gemv_store(acc, y, bias, n);
}

__device__ __forceinline__ float nib8(uint32_t v, int shift) { return (float)((int)((v >> shift) & 0xfu) - 8); }

/* Q4_0: four lanes share a block; a lane takes 4 bytes, i.e. elements
 * 4s..4s+3 (low nibbles) and 16+4s..16+4s+3 (high nibbles). */
__global__ void k_gemv_q4_0(const uint8_t *__restrict__ W, uint64_t rb, const float *__restrict__ x,
                            float *__restrict__ y, const float *__restrict__ bias, uint32_t N, uint32_t K)
{
    uint32_t n = blockIdx.x * GEMV_WARPS + threadIdx.x / 32;
    if (n >= N)
        return;
    uint32_t lane = threadIdx.x & 31, sub = lane & 3, nb = K / 32;
    const uint8_t *row = W + (uint64_t)n * rb;
    float acc = 0.0f;
    for (uint32_t b = lane >> 2; b < nb; b += 8) {
        const uint8_t *p = row + (uint64_t)b * 18;
        float d = hx_dq_f16_to_f32(*(const uint16_t *)p);
        const uint16_t *q = (const uint16_t *)(p + 2 + 4 * sub);
        uint32_t qq = (uint32_t)q[0] | ((uint32_t)q[1] << 16);
        float4 xl = *(const float4 *)(x + 32 * (uint64_t)b + 4 * sub);
        float4 xh = *(const float4 *)(x + 32 * (uint64_t)b + 16 + 4 * sub);
        float s = nib8(qq, 0) * xl.x + nib8(qq, 8) * xl.y + nib8(qq, 16) * xl.z + nib8(qq, 24) * xl.w +
                  nib8(qq, 4) * xh.x + nib8(qq, 12) * xh.y + nib8(qq, 20) * xh.z + nib8(qq, 28) * xh.w;
        acc += d * s;
    }
    gemv_store(acc, y, bias, n);
}

/* Q4_K: eight lanes share a super-block, one 32-element sub-block each. */
__global__ void k_gemv_q4_k(const uint8_t *__restrict__ W, uint64_t rb, const float *__restrict__ x,
                            float *__restrict__ y, const float *__restrict__ bias, uint32_t N, uint32_t K)
{
    uint32_t n = blockIdx.x * GEMV_WARPS + threadIdx.x / 32;
    if (n >= N)
        return;
    uint32_t lane = threadIdx.x & 31, j = lane & 7, nsb = K / 256;
    const uint8_t *row = W + (uint64_t)n * rb;
    float acc = 0.0f;
    for (uint32_t b = lane >> 3; b < nsb; b += 4) {
        const uint8_t *p = row + (uint64_t)b * 144;
        float d = hx_dq_f16_to_f32(*(const uint16_t *)p), dmin = hx_dq_f16_to_f32(*(const uint16_t *)(p + 2));
        uint32_t sc, m;
        hx_dq_q4k_scale_min(p + 4, j, &sc, &m);
        const uint32_t *q = (const uint32_t *)(p + 16 + 32 * (j / 2));
        const float4 *xv = (const float4 *)(x + 256 * (uint64_t)b + 32 * j);
        uint32_t shift = (j & 1) * 4;
        float s = 0.0f, sx = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            uint32_t w = q[i] >> shift;
            float4 v = xv[i];
            s += (float)(w & 0xfu) * v.x + (float)((w >> 8) & 0xfu) * v.y + (float)((w >> 16) & 0xfu) * v.z +
                 (float)((w >> 24) & 0xfu) * v.w;
            sx += (v.x + v.y) + (v.z + v.w);
        }
        acc += d * (float)sc * s - dmin * (float)m * sx;
    }
    gemv_store(acc, y, bias, n);
}

/* F16 / BF16: a lane reads 8 elements (16 bytes) at a time. */
template <bool BF>
__global__ void k_gemv_half(const uint8_t *__restrict__ W, uint64_t rb, const float *__restrict__ x,
                            float *__restrict__ y, const float *__restrict__ bias, uint32_t N, uint32_t K)
{
    uint32_t n = blockIdx.x * GEMV_WARPS + threadIdx.x / 32;
    if (n >= N)
        return;
    uint32_t lane = threadIdx.x & 31;
    const uint4 *row = (const uint4 *)(W + (uint64_t)n * rb);
    const float4 *xv = (const float4 *)x;
    float acc = 0.0f;
    for (uint32_t i = lane; i < K / 8; i += 32) {
        uint4 w = row[i];
        float4 a = xv[2 * i], b = xv[2 * i + 1];
        uint32_t ws[4] = {w.x, w.y, w.z, w.w};
        float xs[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
        for (int e = 0; e < 4; e++) {
            uint16_t lo = (uint16_t)(ws[e] & 0xffff), hi = (uint16_t)(ws[e] >> 16);
            float fl = BF ? hx_dq_bf16_to_f32(lo) : hx_dq_f16_to_f32(lo);
            float fh = BF ? hx_dq_bf16_to_f32(hi) : hx_dq_f16_to_f32(hi);
            acc += fl * xs[2 * e] + fh * xs[2 * e + 1];
        }
    }
    gemv_store(acc, y, bias, n);
}

__global__ void k_gemv_f32(const uint8_t *__restrict__ W, uint64_t rb, const float *__restrict__ x,
                           float *__restrict__ y, const float *__restrict__ bias, uint32_t N, uint32_t K)
{
    uint32_t n = blockIdx.x * GEMV_WARPS + threadIdx.x / 32;
    if (n >= N)
        return;
    uint32_t lane = threadIdx.x & 31;
    const float4 *row = (const float4 *)(W + (uint64_t)n * rb);
    const float4 *xv = (const float4 *)x;
    float acc = 0.0f;
    for (uint32_t i = lane; i < K / 4; i += 32) {
        float4 w = row[i], v = xv[i];
        acc += w.x * v.x + w.y * v.y + w.z * v.z + w.w * v.w;
    }
    gemv_store(acc, y, bias, n);
}

/* Any supported type at any alignment (weights wrapped in place, odd K). */
__global__ void k_gemv_generic(uint32_t type, const uint8_t *__restrict__ W, uint64_t rb, const float *__restrict__ x,
                               float *__restrict__ y, const float *__restrict__ bias, uint32_t N, uint32_t K)
{
    uint32_t n = blockIdx.x * GEMV_WARPS + threadIdx.x / 32;
    if (n >= N)
        return;
    uint32_t lane = threadIdx.x & 31;
    const uint8_t *row = W + (uint64_t)n * rb;
    float acc = 0.0f;
    if (hx_dq_is_quantized(type)) {
        for (uint32_t g = lane; g < K / 32; g += 32) {
            float v[HX_DQ_GROUP];
            hx_dq_group(type, row, g, v);
            for (int i = 0; i < HX_DQ_GROUP; i++)
                acc += v[i] * x[32 * (uint64_t)g + i];
        }
    } else {
        for (uint32_t k = lane; k < K; k += 32)
            acc += hx_dq_plain_elem(type, row, k) * x[k];
    }
    gemv_store(acc, y, bias, n);
}

static int aligned(const void *p, uintptr_t a) { return ((uintptr_t)p % a) == 0; }

static int matmul_gemv(hx_cuda_ctx *c, const hx_op_matmul *a, const uint8_t *W, const float *x, float *y,
                       const float *bias)
{
    uint64_t rb = hx_dq_row_bytes(a->wtype, a->K);
    unsigned blocks = (a->N + GEMV_WARPS - 1) / GEMV_WARPS, threads = 32 * GEMV_WARPS;
    int xa = aligned(x, 16);
    cudaStream_t s = c->stream;
    if (xa && a->wtype == HX_TYPE_Q8_0 && aligned(W, 2))
        k_gemv_q8_0<<<blocks, threads, 0, s>>>(W, rb, x, y, bias, a->N, a->K);
    else if (xa && a->wtype == HX_TYPE_Q4_0 && aligned(W, 2))
        k_gemv_q4_0<<<blocks, threads, 0, s>>>(W, rb, x, y, bias, a->N, a->K);
    else if (xa && a->wtype == HX_TYPE_Q4_K && aligned(W, 4))
        k_gemv_q4_k<<<blocks, threads, 0, s>>>(W, rb, x, y, bias, a->N, a->K);
    else if (xa && a->wtype == HX_TYPE_F16 && aligned(W, 16) && a->K % 8 == 0)
        k_gemv_half<false><<<blocks, threads, 0, s>>>(W, rb, x, y, bias, a->N, a->K);
    else if (xa && a->wtype == HX_TYPE_BF16 && aligned(W, 16) && a->K % 8 == 0)
        k_gemv_half<true><<<blocks, threads, 0, s>>>(W, rb, x, y, bias, a->N, a->K);
    else if (xa && a->wtype == HX_TYPE_F32 && aligned(W, 16) && a->K % 4 == 0)
        k_gemv_f32<<<blocks, threads, 0, s>>>(W, rb, x, y, bias, a->N, a->K);
    else
        k_gemv_generic<<<blocks, threads, 0, s>>>(a->wtype, W, rb, x, y, bias, a->N, a->K);
    HX_CU_LAUNCHED("matmul GEMV");
    return HX_OK;
}

/* ---- prefill: tiles and cuBLAS ------------------------------------------ */

template <bool BF>
__global__ void k_convert(const float *__restrict__ x, uint16_t *__restrict__ y, uint64_t n)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
        y[i] = BF ? hx_dq_f32_to_bf16(x[i]) : hx_dq_f32_to_f16(x[i]);
}

__device__ __forceinline__ uint32_t pack_f16(float lo, float hi)
{
    return (uint32_t)hx_dq_f32_to_f16(lo) | ((uint32_t)hx_dq_f32_to_f16(hi) << 16);
}

/* One thread per 32-element group; the group lands where
 * hx_dq_tile_offset says, as four 16-byte stores. */
template <uint32_t TYPE, bool WIDE>
__global__ void k_dequant_tile(const uint8_t *__restrict__ W, uint64_t rb, uint32_t K, uint32_t n0, uint32_t rows,
                               uint16_t *__restrict__ tile)
{
    uint32_t groups = K / HX_DQ_GROUP;
    uint64_t total = (uint64_t)rows * groups;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < total;
         i += (uint64_t)gridDim.x * blockDim.x) {
        uint32_t r = (uint32_t)(i / groups), g = (uint32_t)(i % groups);
        const uint8_t *row = W + (uint64_t)(n0 + r) * rb;
        float v[HX_DQ_GROUP];
        if (WIDE && (TYPE == HX_TYPE_Q8_0 || TYPE == HX_TYPE_Q4_0)) {
            /* The block in registers through 16-bit loads, then the very
             * decoder the host tests (byte loads would be 34 transactions). */
            const uint32_t BB = TYPE == HX_TYPE_Q8_0 ? 34 : 18;
            const uint16_t *src = (const uint16_t *)(row + (uint64_t)g * BB);
            uint16_t w16[BB / 2];
#pragma unroll
            for (uint32_t k = 0; k < BB / 2; k++)
                w16[k] = src[k];
            uint8_t blk[BB];
            memcpy(blk, w16, BB);
            hx_dq_group(TYPE, blk, 0, v);
        } else {
            hx_dq_group(TYPE, row, g, v);
        }
        uint4 *dst = (uint4 *)(tile + hx_dq_tile_offset(r, g, K));
#pragma unroll
        for (int q = 0; q < 4; q++)
            dst[q] = make_uint4(pack_f16(v[8 * q], v[8 * q + 1]), pack_f16(v[8 * q + 2], v[8 * q + 3]),
                                pack_f16(v[8 * q + 4], v[8 * q + 5]), pack_f16(v[8 * q + 6], v[8 * q + 7]));
    }
}

__global__ void k_add_bias(float *__restrict__ D, const float *__restrict__ bias, uint32_t m, uint32_t n, uint32_t ldd)
{
    uint64_t total = (uint64_t)m * n;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < total;
         i += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t col = i / m, r = i % m;
        D[col * ldd + r] += bias[r];
    }
}

static int ptr_align(const void *p)
{
    uintptr_t v = (uintptr_t)p;
    int a = 256;
    while (a > 1 && v % (uintptr_t)a)
        a >>= 1;
    return a;
}

static void plan_free_descs(hx_cu_plan *p)
{
    if (p->op)
        cublasLtMatmulDescDestroy(p->op);
    if (p->a)
        cublasLtMatrixLayoutDestroy(p->a);
    if (p->b)
        cublasLtMatrixLayoutDestroy(p->b);
    if (p->d)
        cublasLtMatrixLayoutDestroy(p->d);
    p->op = NULL;
    p->a = p->b = p->d = NULL;
}

static void plan_release(hx_cu_plan *p)
{
    plan_free_descs(p);
    memset(p, 0, sizeof *p);
}

void hx_cu_plans_clear(hx_cuda_ctx *c)
{
    for (int i = 0; i < HX_CU_PLANS; i++)
        plan_release(&c->plans[i]);
}

/* Builds the descriptors and asks the heuristic for one algorithm.  A plan
 * whose shape cuBLASLt does not take is kept as valid = -1 (use GemmEx). */
static int plan_build(hx_cuda_ctx *c, hx_cu_plan *p)
{
    cudaDataType_t ab = (cudaDataType_t)p->type;
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    p->valid = 1;
    HX_CUBLAS(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    HX_CUBLAS(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    HX_CUBLAS(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (p->bias) {
        cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
        HX_CUBLAS(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
    }
    HX_CUBLAS(cublasLtMatrixLayoutCreate(&p->a, ab, (uint64_t)p->k, (uint64_t)p->m, p->lda));
    HX_CUBLAS(cublasLtMatrixLayoutCreate(&p->b, ab, (uint64_t)p->k, (uint64_t)p->n, p->ldb));
    HX_CUBLAS(cublasLtMatrixLayoutCreate(&p->d, CUDA_R_32F, (uint64_t)p->m, (uint64_t)p->n, p->ldd));
    cublasLtMatmulPreference_t pref;
    HX_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = c->workspace_bytes;
    uint32_t al = (uint32_t)p->align;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                             sizeof ws);
    const cublasLtMatmulPreferenceAttributes_t aligns[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; i++)
        st = cublasLtMatmulPreferenceSetAttribute(pref, aligns[i], &al, sizeof al);
    cublasLtMatmulHeuristicResult_t res;
    memset(&res, 0, sizeof res);
    int found = 0;
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulAlgoGetHeuristic(c->lt, p->op, p->a, p->b, p->d, p->d, pref, 1, &res, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED || (st == CUBLAS_STATUS_SUCCESS && found == 0)) {
        plan_free_descs(p);
        p->valid = -1;
        return HX_OK;
    }
    HX_CUBLAS(st);
    p->algo = res.algo;
    p->workspace = res.workspaceSize;
    return HX_OK;
}

int hx_cu_gemm(hx_cuda_ctx *c, cudaDataType_t ab, int m, int n, int k, const void *A, int lda, const void *B,
               int ldb, float *D, int ldd, const float *bias)
{
    int align = ptr_align(A);
    int al2[3] = {ptr_align(B), ptr_align(D), bias ? ptr_align(bias) : 256};
    for (int i = 0; i < 3; i++)
        align = al2[i] < align ? al2[i] : align;
    hx_cu_plan key;
    memset(&key, 0, sizeof key);
    key.type = (int)ab, key.m = m, key.n = n, key.k = k, key.lda = lda, key.ldb = ldb, key.ldd = ldd;
    key.bias = bias != NULL, key.align = align;
    hx_cu_plan *p = NULL;
    for (int i = 0; i < HX_CU_PLANS && !p; i++) {
        hx_cu_plan *q = &c->plans[i];
        if (q->valid && q->type == key.type && q->m == m && q->n == n && q->k == k && q->lda == lda &&
            q->ldb == ldb && q->ldd == ldd && q->bias == key.bias && q->align == align)
            p = q;
    }
    if (!p) {
        p = &c->plans[c->next_plan];
        c->next_plan = (c->next_plan + 1) % HX_CU_PLANS;
        plan_release(p);
        *p = key;
        int s = plan_build(c, p);
        if (s) {
            plan_release(p);
            return s;
        }
    }
    const float one = 1.0f, zero = 0.0f;
    if (p->valid > 0) {
        if (bias)
            HX_CUBLAS(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        HX_CUBLAS(cublasLtMatmul(c->lt, p->op, &one, A, p->a, B, p->b, &zero, D, p->d, D, p->d, &p->algo,
                                 c->workspace, p->workspace, c->stream));
        return HX_OK;
    }
    HX_CUBLAS(cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, A, ab, lda, B, ab, ldb, &zero, D,
                           CUDA_R_32F, ldd, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    if (bias) {
        k_add_bias<<<hx_cu_blocks((uint64_t)m * n, 256, c), 256, 0, c->stream>>>(D, bias, (uint32_t)m, (uint32_t)n,
                                                                               (uint32_t)ldd);
        HX_CU_LAUNCHED("bias add");
    }
    return HX_OK;
}

static int launch_dequant(hx_cuda_ctx *c, uint32_t type, const uint8_t *W, uint64_t rb, uint32_t K, uint32_t n0,
                          uint32_t rows, uint16_t *tile)
{
    uint64_t total = (uint64_t)rows * (K / HX_DQ_GROUP);
    unsigned blocks = hx_cu_blocks(total, 256, c);
    bool wide = aligned(W, 2); /* blocks of 34 and 18 bytes keep 2-byte alignment */
#define HX_TILE(T, WIDE) k_dequant_tile<T, WIDE><<<blocks, 256, 0, c->stream>>>(W, rb, K, n0, rows, tile)
    switch (type) {
    case HX_TYPE_Q8_0: wide ? HX_TILE(HX_TYPE_Q8_0, true) : HX_TILE(HX_TYPE_Q8_0, false); break;
    case HX_TYPE_Q4_0: wide ? HX_TILE(HX_TYPE_Q4_0, true) : HX_TILE(HX_TYPE_Q4_0, false); break;
    case HX_TYPE_Q4_1: HX_TILE(HX_TYPE_Q4_1, false); break;
    case HX_TYPE_Q5_0: HX_TILE(HX_TYPE_Q5_0, false); break;
    case HX_TYPE_Q5_1: HX_TILE(HX_TYPE_Q5_1, false); break;
    case HX_TYPE_Q4_K: HX_TILE(HX_TYPE_Q4_K, false); break;
    case HX_TYPE_Q5_K: HX_TILE(HX_TYPE_Q5_K, false); break;
    default: HX_TILE(HX_TYPE_Q6_K, false); break;
    }
#undef HX_TILE
    HX_CU_LAUNCHED("weight dequantization");
    return HX_OK;
}

static int matmul_gemm(hx_cuda_ctx *c, const hx_op_matmul *a, const uint8_t *W, const float *x, float *y,
                       const float *bias)
{
    int T = (int)a->T, N = (int)a->N, K = (int)a->K;
    if (a->wtype == HX_TYPE_F32)
        return hx_cu_gemm(c, CUDA_R_32F, N, T, K, W, K, x, K, y, N, bias);
    int quant = hx_dq_is_quantized(a->wtype), bf = a->wtype == HX_TYPE_BF16;
    uint64_t xbytes = ((uint64_t)T * K * 2 + 255) & ~(uint64_t)255;
    uint32_t rows = quant ? hx_dq_tile_rows(a->N, a->K, HX_CU_TILE_BYTES) : 0;
    void *scratch;
    int s = hx_cu_scratch(c, xbytes + (uint64_t)rows * K * 2, &scratch);
    if (s)
        return s;
    uint16_t *x16 = (uint16_t *)scratch;
    uint64_t nx = (uint64_t)T * K;
    if (bf)
        k_convert<true><<<hx_cu_blocks(nx, 256, c), 256, 0, c->stream>>>(x, x16, nx);
    else
        k_convert<false><<<hx_cu_blocks(nx, 256, c), 256, 0, c->stream>>>(x, x16, nx);
    HX_CU_LAUNCHED("activation conversion");
    if (!quant)
        return hx_cu_gemm(c, bf ? CUDA_R_16BF : CUDA_R_16F, N, T, K, W, K, x16, K, y, N, bias);
    uint16_t *tile = (uint16_t *)((char *)scratch + xbytes);
    uint64_t rb = hx_dq_row_bytes(a->wtype, a->K);
    for (uint32_t n0 = 0; n0 < a->N; n0 += rows) {
        uint32_t r = a->N - n0 < rows ? a->N - n0 : rows;
        if ((s = launch_dequant(c, a->wtype, W, rb, a->K, n0, r, tile)))
            return s;
        if ((s = hx_cu_gemm(c, CUDA_R_16F, (int)r, T, K, tile, K, x16, K, y + n0, N, bias ? bias + n0 : NULL)))
            return s;
    }
    return HX_OK;
}

HX_CU_LAUNCHER(hx_cu_matmul)
{
    if (!args)
        return hx_cu_fail(HX_ERR_INVALID_ARG, "matmul: no arguments");
    const hx_op_matmul *a = (const hx_op_matmul *)args;
    char msg[256];
    if (hx_oc_matmul(a, sizes, n, msg, sizeof msg))
        return hx_cu_fail(HX_ERR_INVALID_ARG, "%s", msg);
    if (!a->T || !a->N)
        return HX_OK;
    const uint8_t *W = (const uint8_t *)bufs[0];
    const float *x = (const float *)bufs[1], *bias = a->has_bias ? (const float *)bufs[3] : NULL;
    float *y = (float *)bufs[2];
    return a->T == 1 ? matmul_gemv(c, a, W, x, y, bias) : matmul_gemm(c, a, W, x, y, bias);
}

/* "matmul_multi": each part as the matmul it stands for, in one task;
 * the activations are read once per part, as cuBLAS takes them. */
HX_CU_LAUNCHER(hx_cu_matmul_multi)
{
    if (!args)
        return hx_cu_fail(HX_ERR_INVALID_ARG, "matmul_multi: no arguments");
    const hx_op_matmul_multi *a = (const hx_op_matmul_multi *)args;
    char msg[256];
    if (hx_oc_matmul_multi(a, n, msg, sizeof msg))
        return hx_cu_fail(HX_ERR_INVALID_ARG, "%s", msg);
    for (uint32_t i = 0; i < a->n; i++) {
        hx_op_matmul m;
        void *pb[4];
        size_t ps[4];
        int nb = hx_oc_matmul_multi_part(a, (int)i, bufs, sizes, &m, pb, ps);
        int s = hx_cu_matmul(c, &m, pb, ps, nb);
        if (s)
            return s;
    }
    return HX_OK;
}

HX_CU_LAUNCHER(hx_cu_gemm_f32)
{
    if (!args)
        return hx_cu_fail(HX_ERR_INVALID_ARG, "gemm_f32: no arguments");
    const hx_args_gemm_f32 *g = (const hx_args_gemm_f32 *)args;
    if (n != 3)
        return hx_cu_fail(HX_ERR_INVALID_ARG, "gemm_f32: %d buffers given, 3 expected", n);
    if (g->M > HX_OC_DIM_MAX || g->N > HX_OC_DIM_MAX || g->K > HX_OC_DIM_MAX)
        return hx_cu_fail(HX_ERR_INVALID_ARG, "gemm_f32: dimension above 2^31-1");
    if (!hx_oc_fits(g->M, g->K, 4, sizes[0]) || !hx_oc_fits(g->N, g->K, 4, sizes[1]) ||
        !hx_oc_fits(g->M, g->N, 4, sizes[2]))
        return hx_cu_fail(HX_ERR_INVALID_ARG, "gemm_f32: a buffer is smaller than M, N, K need");
    if (!g->M || !g->N)
        return HX_OK;
    if (!g->K) /* an empty sum */
        return hx_cu_check(cudaMemsetAsync(bufs[2], 0, (size_t)g->M * g->N * 4, c->stream), "cudaMemsetAsync");
    return hx_cu_gemm(c, CUDA_R_32F, (int)g->N, (int)g->M, (int)g->K, bufs[1], (int)g->K, bufs[0], (int)g->K,
                      (float *)bufs[2], (int)g->N, NULL);
}

/* ---- benchmark data ----------------------------------------------------- */

__global__ void k_fill_random(void *dev, uint32_t type, uint64_t count, uint32_t seed)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < count;
         i += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t h = (i + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)seed << 32);
        h ^= h >> 31;
        h *= 0xbf58476d1ce4e5b9ull;
        h ^= h >> 29;
        float v = (float)(h >> 40) * (1.0f / 8388608.0f) - 1.0f;
        if (type == HX_TYPE_F32)
            ((float *)dev)[i] = v;
        else if (type == HX_TYPE_BF16)
            ((uint16_t *)dev)[i] = hx_dq_f32_to_bf16(v);
        else
            ((uint16_t *)dev)[i] = hx_dq_f32_to_f16(v);
    }
}

int hx_cu_fill_random(hx_cuda_ctx *c, void *dev, uint32_t type, size_t count, uint32_t seed)
{
    k_fill_random<<<hx_cu_blocks(count, 256, c), 256, 0, c->stream>>>(dev, type, count, seed);
    HX_CU_LAUNCHED("random fill");
    return HX_OK;
}
