/* The CUDA plugin's exported table: devices, contexts, memory, events and
 * the kernel list.  Every CUDA and cuBLAS call is checked; failures become
 * an hx_status and a line naming the call and the error. */
#include <new>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kernels_cu/common.cuh"
#include "ops/op_list.h"

/* Set by kernels_cu/cuda.mk: the toolkit and the code it embedded. */
#ifndef HX_CUDA_BUILD
#define HX_CUDA_BUILD "CUDA (unknown build)"
#endif

static thread_local char g_error[512];

static const char *plugin_last_error(void) { return g_error; }

int hx_cu_fail(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_error, sizeof g_error, fmt, ap);
    va_end(ap);
    return status;
}

static int status_of(cudaError_t e)
{
    switch (e) {
    case cudaErrorMemoryAllocation: return HX_ERR_NO_MEMORY;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable: return HX_ERR_NO_DEVICE;
    case cudaErrorInvalidValue: return HX_ERR_INVALID_ARG;
    case cudaErrorNotSupported: return HX_ERR_UNSUPPORTED;
    default: return HX_ERR_DEVICE;
    }
}

/* "cudaMalloc(&p, n)" -> "cudaMalloc". */
static void call_name(const char *what, char *out, size_t len)
{
    size_t n = strcspn(what, "(");
    if (n >= len)
        n = len - 1;
    memcpy(out, what, n);
    out[n] = '\0';
}

int hx_cu_check(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return HX_OK;
    char name[96];
    call_name(what, name, sizeof name);
    return hx_cu_fail(status_of(e), "%s: %s (%s)", name, cudaGetErrorName(e), cudaGetErrorString(e));
}

int hx_cu_check_blas(cublasStatus_t s, const char *what)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return HX_OK;
    char name[96];
    call_name(what, name, sizeof name);
    int st = s == CUBLAS_STATUS_ALLOC_FAILED      ? HX_ERR_NO_MEMORY
             : s == CUBLAS_STATUS_NOT_SUPPORTED   ? HX_ERR_UNSUPPORTED
             : s == CUBLAS_STATUS_INVALID_VALUE   ? HX_ERR_INVALID_ARG
             : s == CUBLAS_STATUS_NOT_INITIALIZED ? HX_ERR_NO_DEVICE
                                                  : HX_ERR_DEVICE;
    return hx_cu_fail(st, "%s: %s (%s)", name, cublasGetStatusName(s), cublasGetStatusString(s));
}

/* ---- devices ------------------------------------------------------------ */

static int plugin_device_count(int *count)
{
    *count = 0;
    HX_CU(cudaGetDeviceCount(count));
    return HX_OK;
}

static int attr(cudaDeviceAttr a, int dev, int *out)
{
    *out = 0;
    HX_CU(cudaDeviceGetAttribute(out, a, dev));
    return HX_OK;
}

static int plugin_device_props(int dev, hx_cuda_device_props *p)
{
    memset(p, 0, sizeof *p);
    cudaDeviceProp prop;
    HX_CU(cudaGetDeviceProperties(&prop, dev));
    snprintf(p->name, sizeof p->name, "%s", prop.name);
    HX_CU(cudaDeviceGetPCIBusId(p->pci_bus_id, (int)sizeof p->pci_bus_id, dev));
    int v, s;
    if ((s = attr(cudaDevAttrComputeCapabilityMajor, dev, &p->cc_major)) ||
        (s = attr(cudaDevAttrComputeCapabilityMinor, dev, &p->cc_minor)) ||
        (s = attr(cudaDevAttrMultiProcessorCount, dev, &p->sm_count)) ||
        (s = attr(cudaDevAttrIntegrated, dev, &p->integrated)) ||
        (s = attr(cudaDevAttrManagedMemory, dev, &p->managed_memory)) ||
        (s = attr(cudaDevAttrConcurrentManagedAccess, dev, &p->concurrent_managed)) ||
        (s = attr(cudaDevAttrPageableMemoryAccess, dev, &p->pageable_access)) ||
        (s = attr(cudaDevAttrPageableMemoryAccessUsesHostPageTables, dev, &p->pageable_uses_host_tables)) ||
        (s = attr(cudaDevAttrCanMapHostMemory, dev, &p->can_map_host)) ||
        (s = attr(cudaDevAttrHostRegisterReadOnlySupported, dev, &p->register_read_only)))
        return s;
    if ((s = attr(cudaDevAttrMaxSharedMemoryPerBlockOptin, dev, &v)))
        return s;
    p->shared_mem_per_block = (uint64_t)v;
    if ((s = attr(cudaDevAttrL2CacheSize, dev, &v)))
        return s;
    p->l2_bytes = (uint64_t)v;
    p->total_mem = prop.totalGlobalMem;
    HX_CU(cudaSetDevice(dev));
    size_t fr = 0, tot = 0;
    HX_CU(cudaMemGetInfo(&fr, &tot));
    p->free_mem = fr;
    HX_CU(cudaDriverGetVersion(&p->driver_version));
    HX_CU(cudaRuntimeGetVersion(&p->runtime_version));
    return HX_OK;
}

/* ---- contexts ----------------------------------------------------------- */

#define HX_CU_LT_WORKSPACE (32u << 20) /* what cuBLAS advises for Hopper */

static void plugin_context_destroy(hx_cuda_ctx *c)
{
    if (!c)
        return;
    cudaSetDevice(c->dev);
    if (c->stream)
        cudaStreamSynchronize(c->stream);
    hx_cu_plans_clear(c);
    if (c->lt)
        cublasLtDestroy(c->lt);
    if (c->blas)
        cublasDestroy(c->blas);
    cudaFree(c->workspace);
    cudaFree(c->scratch);
    cudaFree(c->flag_dev);
    if (c->flag_host)
        cudaFreeHost(c->flag_host);
    if (c->stream)
        cudaStreamDestroy(c->stream);
    delete c;
}

static int context_init(hx_cuda_ctx *c)
{
    HX_CU(cudaSetDevice(c->dev));
    HX_CU(cudaDeviceGetAttribute(&c->sm_count, cudaDevAttrMultiProcessorCount, c->dev));
    HX_CU(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    HX_CUBLAS(cublasCreate(&c->blas));
    HX_CUBLAS(cublasSetStream(c->blas, c->stream));
    HX_CUBLAS(cublasLtCreate(&c->lt));
    HX_CU(cudaMalloc(&c->workspace, HX_CU_LT_WORKSPACE));
    c->workspace_bytes = HX_CU_LT_WORKSPACE;
    HX_CUBLAS(cublasSetWorkspace(c->blas, c->workspace, c->workspace_bytes));
    HX_CU(cudaMalloc((void **)&c->flag_dev, sizeof(unsigned)));
    HX_CU(cudaMemsetAsync(c->flag_dev, 0, sizeof(unsigned), c->stream));
    HX_CU(cudaHostAlloc((void **)&c->flag_host, sizeof(unsigned), cudaHostAllocDefault));
    *c->flag_host = 0;
    return HX_OK;
}

static int plugin_context_create(int dev, hx_cuda_ctx **out)
{
    *out = NULL;
    hx_cuda_ctx *c = new (std::nothrow) hx_cuda_ctx();
    if (!c)
        return hx_cu_fail(HX_ERR_NO_MEMORY, "CUDA context: out of host memory");
    c->dev = dev;
    int s = context_init(c);
    if (s) {
        char keep[sizeof g_error];
        memcpy(keep, g_error, sizeof keep);
        plugin_context_destroy(c);
        memcpy(g_error, keep, sizeof keep);
        return s;
    }
    *out = c;
    return HX_OK;
}

static int plugin_synchronize(hx_cuda_ctx *c)
{
    HX_CU(cudaSetDevice(c->dev));
    /* The flag word travels with the stream: one synchronization covers
     * the kernels and the word they may have set. */
    HX_CU(cudaMemcpyAsync(c->flag_host, c->flag_dev, sizeof(unsigned), cudaMemcpyDeviceToHost, c->stream));
    HX_CU(cudaStreamSynchronize(c->stream));
    unsigned f = *c->flag_host;
    if (!f)
        return HX_OK;
    *c->flag_host = 0;
    HX_CU(cudaMemsetAsync(c->flag_dev, 0, sizeof(unsigned), c->stream));
    return hx_cu_fail(HX_ERR_RANGE, "%s", (f & HX_CU_BAD_ROW_ID)  ? "get_rows: a token id is outside the table"
                                         : (f & HX_CU_BAD_KV_SLOT) ? "kv_store: a slot is outside the KV cache"
                                         : (f & HX_CU_BAD_ROUTE)   ? "moe_gate_up/moe_down: the route names an "
                                                                     "entry, expert or place outside the batch"
                                                                   : "attention: a sequence index, position or "
                                                                     "block number in meta is out of range");
}

int hx_cu_scratch(hx_cuda_ctx *c, size_t bytes, void **out)
{
    if (bytes > c->scratch_bytes) {
        /* Kernels queued on the stream may still read the old scratch. */
        HX_CU(cudaStreamSynchronize(c->stream));
        HX_CU(cudaFree(c->scratch));
        c->scratch = NULL;
        c->scratch_bytes = 0;
        size_t want = bytes + bytes / 4;
        HX_CU(cudaMalloc(&c->scratch, want));
        c->scratch_bytes = want;
    }
    *out = c->scratch;
    return HX_OK;
}

/* ---- memory ------------------------------------------------------------- */

static int plugin_mem_alloc(hx_cuda_ctx *c, size_t bytes, void **dev)
{
    *dev = NULL;
    HX_CU(cudaSetDevice(c->dev));
    cudaError_t e = cudaMalloc(dev, bytes);
    if (e != cudaSuccess) {
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        return hx_cu_fail(status_of(e), "cudaMalloc(%zu bytes, %zu free): %s (%s)", bytes, fr, cudaGetErrorName(e),
                          cudaGetErrorString(e));
    }
    return HX_OK;
}

static int plugin_mem_free(hx_cuda_ctx *c, void *dev)
{
    HX_CU(cudaSetDevice(c->dev));
    HX_CU(cudaFree(dev));
    return HX_OK;
}

static int plugin_host_register(hx_cuda_ctx *c, void *host, size_t bytes, int read_only, void **dev)
{
    *dev = NULL;
    HX_CU(cudaSetDevice(c->dev));
    int ro_ok = 0;
    HX_CU(cudaDeviceGetAttribute(&ro_ok, cudaDevAttrHostRegisterReadOnlySupported, c->dev));
    unsigned flags = cudaHostRegisterMapped | (read_only && ro_ok ? cudaHostRegisterReadOnly : 0u);
    cudaError_t e = cudaHostRegister(host, bytes, flags);
    if (e == cudaErrorHostMemoryAlreadyRegistered) {
        /* Tensors of one mapped file share pages: the first registration
         * already covers them. */
        cudaGetLastError();
    } else if (e != cudaSuccess) {
        return hx_cu_fail(status_of(e), "cudaHostRegister(%zu bytes%s): %s (%s)", bytes,
                          read_only ? ", read-only" : "", cudaGetErrorName(e), cudaGetErrorString(e));
    }
    HX_CU(cudaHostGetDevicePointer(dev, host, 0));
    return HX_OK;
}

static int plugin_host_unregister(hx_cuda_ctx *c, void *host)
{
    HX_CU(cudaSetDevice(c->dev));
    cudaError_t e = cudaHostUnregister(host);
    if (e == cudaErrorHostMemoryNotRegistered) {
        cudaGetLastError();
        return HX_OK;
    }
    HX_CU_CHECK_NAMED(e, "cudaHostUnregister");
    return HX_OK;
}

static int plugin_managed_alloc(hx_cuda_ctx *c, size_t bytes, void **ptr)
{
    *ptr = NULL;
    HX_CU(cudaSetDevice(c->dev));
    int managed = 0;
    HX_CU(cudaDeviceGetAttribute(&managed, cudaDevAttrManagedMemory, c->dev));
    if (!managed)
        return hx_cu_fail(HX_ERR_UNSUPPORTED, "cudaMallocManaged: device %d has no managed memory", c->dev);
    size_t fr = 0, tot = 0;
    HX_CU(cudaMemGetInfo(&fr, &tot));
    /* Leave room for cuBLAS and the driver: oversubscription thrashes. */
    size_t reserve = (size_t)256 << 20;
    if (bytes > fr || fr - bytes < reserve)
        return hx_cu_fail(HX_ERR_NO_MEMORY,
                          "cudaMallocManaged(%zu bytes): refused, the device has %zu bytes free (keeping %zu)", bytes,
                          fr, reserve);
    HX_CU(cudaMallocManaged(ptr, bytes, cudaMemAttachGlobal));
    return HX_OK;
}

static int plugin_managed_prefetch(hx_cuda_ctx *c, void *ptr, size_t bytes, int to_device)
{
    HX_CU(cudaSetDevice(c->dev));
#if CUDART_VERSION >= 13000
    cudaMemLocation loc;
    memset(&loc, 0, sizeof loc);
    loc.type = to_device ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
    loc.id = to_device ? c->dev : 0;
    HX_CU(cudaMemPrefetchAsync(ptr, bytes, loc, 0, c->stream));
#else
    HX_CU(cudaMemPrefetchAsync(ptr, bytes, to_device ? c->dev : cudaCpuDeviceId, c->stream));
#endif
    return HX_OK;
}

static int plugin_managed_read_mostly(hx_cuda_ctx *c, void *ptr, size_t bytes)
{
    HX_CU(cudaSetDevice(c->dev));
#if CUDART_VERSION >= 13000
    cudaMemLocation loc;
    memset(&loc, 0, sizeof loc);
    loc.type = cudaMemLocationTypeDevice;
    loc.id = c->dev;
    HX_CU(cudaMemAdvise(ptr, bytes, cudaMemAdviseSetReadMostly, loc));
#else
    HX_CU(cudaMemAdvise(ptr, bytes, cudaMemAdviseSetReadMostly, c->dev));
#endif
    return HX_OK;
}

static int plugin_copy(hx_cuda_ctx *c, void *dst, const void *src, size_t bytes, hx_cuda_copy_kind kind, int async)
{
    HX_CU(cudaSetDevice(c->dev));
    cudaMemcpyKind k = kind == HX_CUDA_COPY_H2D   ? cudaMemcpyHostToDevice
                       : kind == HX_CUDA_COPY_D2H ? cudaMemcpyDeviceToHost
                                                  : cudaMemcpyDeviceToDevice;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, k, c->stream);
    if (e != cudaSuccess)
        return hx_cu_fail(status_of(e), "cudaMemcpyAsync(%zu bytes, %s): %s (%s)", bytes,
                          kind == HX_CUDA_COPY_H2D ? "to device" : kind == HX_CUDA_COPY_D2H ? "to host" : "on device",
                          cudaGetErrorName(e), cudaGetErrorString(e));
    if (!async)
        HX_CU(cudaStreamSynchronize(c->stream));
    return HX_OK;
}

static int plugin_memset(hx_cuda_ctx *c, void *dev, int value, size_t bytes)
{
    HX_CU(cudaSetDevice(c->dev));
    HX_CU(cudaMemsetAsync(dev, value, bytes, c->stream));
    return HX_OK;
}

/* ---- events ------------------------------------------------------------- */

static int plugin_event_create(hx_cuda_ctx *c, hx_cuda_event **out)
{
    *out = NULL;
    HX_CU(cudaSetDevice(c->dev));
    hx_cuda_event *e = new (std::nothrow) hx_cuda_event();
    if (!e)
        return hx_cu_fail(HX_ERR_NO_MEMORY, "CUDA event: out of host memory");
    e->dev = c->dev;
    cudaError_t err = cudaEventCreate(&e->ev);
    if (err != cudaSuccess) {
        delete e;
        return hx_cu_check(err, "cudaEventCreate");
    }
    *out = e;
    return HX_OK;
}

static int plugin_event_record(hx_cuda_ctx *c, hx_cuda_event *e)
{
    HX_CU(cudaSetDevice(c->dev));
    HX_CU(cudaEventRecord(e->ev, c->stream));
    return HX_OK;
}

static int plugin_event_synchronize(hx_cuda_event *e)
{
    HX_CU(cudaEventSynchronize(e->ev));
    return HX_OK;
}

static int plugin_event_elapsed_ms(hx_cuda_event *a, hx_cuda_event *b, float *ms)
{
    HX_CU(cudaEventElapsedTime(ms, a->ev, b->ev));
    return HX_OK;
}

static void plugin_event_destroy(hx_cuda_event *e)
{
    if (!e)
        return;
    cudaSetDevice(e->dev);
    cudaEventDestroy(e->ev);
    delete e;
}

/* ---- kernels ------------------------------------------------------------ */

static const hx_cuda_kernel kernels[] = {
    {"matmul", hx_cu_matmul, HX_OP_MATMUL, hx_oc_covers_matmul},
    {"matmul_multi", hx_cu_matmul_multi, HX_OP_MATMUL_MULTI, hx_oc_covers_matmul_multi},
    {"gemm_f32", hx_cu_gemm_f32, HX_OP_GEMM_F32, NULL},
    {"rmsnorm", hx_cu_rmsnorm, HX_OP_RMSNORM, NULL},
    {"rope", hx_cu_rope, HX_OP_ROPE, NULL},
    {"add", hx_cu_add, HX_OP_ADD, NULL},
    {"vector_add", hx_cu_vector_add, HX_OP_VECTOR_ADD, NULL},
    {"swiglu", hx_cu_swiglu, HX_OP_SWIGLU, NULL},
    {"get_rows", hx_cu_get_rows, HX_OP_GET_ROWS, hx_oc_covers_get_rows},
    {"kv_store", hx_cu_kv_store, HX_OP_KV_STORE, hx_oc_covers_kv_store},
    {"attention", hx_cu_attention, HX_OP_ATTENTION, hx_oc_covers_attention},
    {"attention_part", hx_cu_attention_part, HX_OP_ATTENTION_PART, hx_oc_covers_attention_part},
    {"attn_merge", hx_cu_attn_merge, HX_OP_ATTN_MERGE, NULL},
    {"scale", hx_cu_scale, HX_OP_SCALE, NULL},
    {"geglu", hx_cu_geglu, HX_OP_GEGLU, NULL},
    {"add_gated", hx_cu_add_gated, HX_OP_ADD_GATED, NULL},
    {"moe_route", hx_cu_moe_route, HX_OP_MOE_ROUTE, NULL},
    {"moe_gate_up", hx_cu_moe_gate_up, HX_OP_MOE_GATE_UP, hx_oc_covers_moe_gate_up},
    {"moe_down", hx_cu_moe_down, HX_OP_MOE_DOWN, hx_oc_covers_moe_down},
};

static const hx_cuda_kernel *plugin_kernel_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
        if (!strcmp(kernels[i].name, name))
            return &kernels[i];
    return NULL;
}

/* ---- measurement -------------------------------------------------------- */

static int bench_run(hx_cuda_ctx *c, uint32_t type, uint32_t T, uint32_t N, uint32_t K, int iters, void *W,
                     void *X, float *D, double *seconds)
{
    cudaDataType_t dt = type == HX_TYPE_F16 ? CUDA_R_16F : type == HX_TYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    int s;
    if ((s = hx_cu_fill_random(c, W, type, (size_t)N * K, 1)) || (s = hx_cu_fill_random(c, X, type, (size_t)T * K, 2)))
        return s;
    const float one = 1.0f, zero = 0.0f;
    cudaEvent_t e0, e1;
    HX_CU(cudaEventCreate(&e0));
    cudaError_t err = cudaEventCreate(&e1);
    if (err != cudaSuccess) {
        cudaEventDestroy(e0);
        return hx_cu_check(err, "cudaEventCreate");
    }
    cublasStatus_t bs = CUBLAS_STATUS_SUCCESS;
    for (int i = -2; i < iters && bs == CUBLAS_STATUS_SUCCESS; i++) {
        if (i == 0)
            cudaEventRecord(e0, c->stream);
        bs = cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)T, (int)K, &one, W, dt, (int)K, X, dt,
                          (int)K, &zero, D, CUDA_R_32F, (int)N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    }
    cudaEventRecord(e1, c->stream);
    err = cudaEventSynchronize(e1);
    float ms = 0;
    if (err == cudaSuccess)
        err = cudaEventElapsedTime(&ms, e0, e1);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    HX_CUBLAS(bs);
    HX_CU_CHECK_NAMED(err, "cudaEventElapsedTime");
    *seconds = (double)ms * 1e-3 / iters;
    return HX_OK;
}

static int plugin_bench_cublas_gemm(hx_cuda_ctx *c, uint32_t type, uint32_t T, uint32_t N, uint32_t K, int iters,
                                    double *seconds)
{
    *seconds = 0;
    if (type != HX_TYPE_F16 && type != HX_TYPE_BF16 && type != HX_TYPE_F32)
        return hx_cu_fail(HX_ERR_INVALID_ARG, "bench_cublas_gemm: type must be F16, BF16 or F32");
    if (!T || !N || !K || T > HX_OC_DIM_MAX || N > HX_OC_DIM_MAX || K > HX_OC_DIM_MAX || iters < 1)
        return hx_cu_fail(HX_ERR_INVALID_ARG, "bench_cublas_gemm: bad shape or iteration count");
    HX_CU(cudaSetDevice(c->dev));
    size_t es = type == HX_TYPE_F32 ? 4 : 2;
    void *W = NULL, *X = NULL, *D = NULL;
    int s = hx_cu_check(cudaMalloc(&W, (size_t)N * K * es), "cudaMalloc");
    if (!s)
        s = hx_cu_check(cudaMalloc(&X, (size_t)T * K * es), "cudaMalloc");
    if (!s)
        s = hx_cu_check(cudaMalloc(&D, (size_t)T * N * 4), "cudaMalloc");
    if (!s)
        s = bench_run(c, type, T, N, K, iters, W, X, (float *)D, seconds);
    cudaFree(W);
    cudaFree(X);
    cudaFree(D);
    return s;
}

/* ---- the table ---------------------------------------------------------- */

static const hx_cuda_plugin g_plugin = {
    HX_CUDA_PLUGIN_ABI,
    (uint32_t)sizeof(hx_cuda_plugin),
    HX_CUDA_BUILD,
    plugin_last_error,
    plugin_device_count,
    plugin_device_props,
    plugin_context_create,
    plugin_context_destroy,
    plugin_synchronize,
    plugin_mem_alloc,
    plugin_mem_free,
    plugin_host_register,
    plugin_host_unregister,
    plugin_managed_alloc,
    plugin_managed_prefetch,
    plugin_managed_read_mostly,
    plugin_copy,
    plugin_memset,
    plugin_event_create,
    plugin_event_record,
    plugin_event_synchronize,
    plugin_event_elapsed_ms,
    plugin_event_destroy,
    kernels,
    (int)(sizeof kernels / sizeof kernels[0]),
    plugin_kernel_find,
    plugin_bench_cublas_gemm,
};

extern "C" __attribute__((visibility("default"))) const hx_cuda_plugin *hx_cuda_plugin_v1(void)
{
    return &g_plugin;
}
