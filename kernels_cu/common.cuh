/* Inside the CUDA plugin: the context, error reporting, launch helpers. */
#ifndef HX_KERNELS_CU_COMMON_CUH
#define HX_KERNELS_CU_COMMON_CUH

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "hetero.h"
#include "kernels_cu/op_check.h"
#include "kernels_cu/plugin.h"

/* Bits that kernels set in the context's flag word when a device-side index
 * is out of range; synchronize() turns them into HX_ERR_RANGE. */
enum {
    HX_CU_BAD_ROW_ID = 1u,   /* get_rows: token id outside the table      */
    HX_CU_BAD_KV_SLOT = 2u,  /* kv_store: slot outside the caches         */
    HX_CU_BAD_KV_META = 4u,  /* attention: sequence, position or block    */
    HX_CU_BAD_ROUTE = 8u,    /* moe_gate_up/moe_down: a route entry, expert or place outside the batch */
};

/* What a row named by an index out of range holds, on every backend: a
 * value no consumer can take for data (the task fails with HX_ERR_RANGE). */
#define HX_CU_NAN __int_as_float(0x7fc00000)

/* A cuBLASLt algorithm chosen once per problem shape and alignment. */
struct hx_cu_plan {
    int valid;
    int type, m, n, k, lda, ldb, ldd, bias, align;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulAlgo_t algo;
    size_t workspace;
};

#define HX_CU_PLANS 32

struct hx_cuda_ctx {
    int dev;
    cudaStream_t stream;
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    void *workspace;          /* cuBLASLt's */
    size_t workspace_bytes;
    void *scratch;            /* converted activations and weight tiles */
    size_t scratch_bytes;
    unsigned *flag_dev;       /* HX_CU_BAD_* bits set by kernels */
    unsigned *flag_host;      /* pinned copy read at synchronize */
    int sm_count;
    hx_cu_plan plans[HX_CU_PLANS];
    int next_plan;
};

struct hx_cuda_event {
    cudaEvent_t ev;
    int dev;
};

/* Records the calling thread's error and returns `status`. */
int hx_cu_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* 0, or the hx_status for a CUDA error after recording "<call>: <name> (<text>)";
 * `what` may be the stringized call: its text up to '(' names it. */
int hx_cu_check(cudaError_t e, const char *what);
int hx_cu_check_blas(cublasStatus_t s, const char *what);

#define HX_CU(call)                                            \
    do {                                                       \
        int hx_s_ = hx_cu_check((call), #call);                \
        if (hx_s_)                                             \
            return hx_s_;                                      \
    } while (0)
#define HX_CUBLAS(call)                                        \
    do {                                                       \
        int hx_s_ = hx_cu_check_blas((call), #call);           \
        if (hx_s_)                                             \
            return hx_s_;                                      \
    } while (0)
/* After a <<<>>> launch: configuration errors surface here. */
#define HX_CU_LAUNCHED(kernel) HX_CU_CHECK_NAMED(cudaGetLastError(), "launch of " kernel)
#define HX_CU_CHECK_NAMED(call, name)                          \
    do {                                                       \
        int hx_s_ = hx_cu_check((call), name);                 \
        if (hx_s_)                                             \
            return hx_s_;                                      \
    } while (0)

/* Scratch memory of at least `bytes`, kept between launches. */
int hx_cu_scratch(hx_cuda_ctx *c, size_t bytes, void **out);

/* Grid size for a grid-stride loop over n items with `threads` per block. */
static inline unsigned hx_cu_blocks(uint64_t n, unsigned threads, const hx_cuda_ctx *c)
{
    uint64_t b = (n + threads - 1) / threads, cap = (uint64_t)c->sm_count * 32;
    if (b > cap)
        b = cap;
    return b ? (unsigned)b : 1u;
}

/* Kernel launchers (the plugin's kernel table). */
#define HX_CU_LAUNCHER(fn) int fn(hx_cuda_ctx *c, const void *args, void *const *bufs, const size_t *sizes, int n)
HX_CU_LAUNCHER(hx_cu_matmul);
HX_CU_LAUNCHER(hx_cu_matmul_multi);
HX_CU_LAUNCHER(hx_cu_gemm_f32);
HX_CU_LAUNCHER(hx_cu_rmsnorm);
HX_CU_LAUNCHER(hx_cu_rope);
HX_CU_LAUNCHER(hx_cu_add);
HX_CU_LAUNCHER(hx_cu_vector_add);
HX_CU_LAUNCHER(hx_cu_swiglu);
HX_CU_LAUNCHER(hx_cu_get_rows);
HX_CU_LAUNCHER(hx_cu_kv_store);
HX_CU_LAUNCHER(hx_cu_attention);
HX_CU_LAUNCHER(hx_cu_attention_part);
HX_CU_LAUNCHER(hx_cu_attn_merge);
HX_CU_LAUNCHER(hx_cu_scale);
HX_CU_LAUNCHER(hx_cu_geglu);
HX_CU_LAUNCHER(hx_cu_add_gated);
HX_CU_LAUNCHER(hx_cu_moe_route);
HX_CU_LAUNCHER(hx_cu_moe_gate_up);
HX_CU_LAUNCHER(hx_cu_moe_down);

/* D[n][ldd] (column-major m x n) = op(A)^T B (+ bias) through cuBLASLt,
 * falling back to cublasGemmEx; A is k x m column-major (a row-major m x k
 * weight tile), B is k x n (n row-major activations). */
int hx_cu_gemm(hx_cuda_ctx *c, cudaDataType_t ab, int m, int n, int k, const void *A, int lda, const void *B,
               int ldb, float *D, int ldd, const float *bias);

/* Releases the cached cuBLASLt plans (context teardown). */
void hx_cu_plans_clear(hx_cuda_ctx *c);

/* Random device data for benchmarks: uniform in [-1, 1). */
int hx_cu_fill_random(hx_cuda_ctx *c, void *dev, uint32_t type, size_t count, uint32_t seed);

#endif
