/* The C ABI between libhetero and its CUDA plugin (libhetero-cuda.so).
 *
 * The core library never links CUDA: it dlopens the plugin and asks the one
 * exported symbol, hx_cuda_plugin_v1(), for a table of function pointers.
 * The table is versioned: `abi` must equal HX_CUDA_PLUGIN_ABI and
 * `struct_size` be at least the size the caller was built with; fields are
 * only ever appended.  Every function that can fail returns an hx_status
 * (0 = HX_OK) and leaves a one-line reason, naming the CUDA/cuBLAS call and
 * its error ("cudaMalloc(4096 bytes): cudaErrorMemoryAllocation (out of
 * memory)"), for last_error() on the calling thread.
 *
 * Objects: a context (one device, one stream, one cuBLAS and one cuBLASLt
 * handle, scratch memory) and events.  Memory is plain device pointers.
 * Contexts may be used from several threads, but a kernel launch must not
 * run concurrently with another on the same context (the backend runs one
 * task at a time per device). */
#ifndef HX_KERNELS_CU_PLUGIN_H
#define HX_KERNELS_CU_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HX_CUDA_PLUGIN_ABI 2 /* 2: kernels carry their op id and coverage */
#define HX_CUDA_PLUGIN_SYMBOL "hx_cuda_plugin_v1"

typedef struct hx_cuda_ctx hx_cuda_ctx;
typedef struct hx_cuda_event hx_cuda_event;

typedef struct {
    char name[256];
    char pci_bus_id[32];          /* "0000:01:00.0" */
    int cc_major, cc_minor;       /* compute capability */
    int sm_count;
    uint64_t total_mem, free_mem; /* bytes, free as of the query */
    uint64_t shared_mem_per_block;/* opt-in maximum */
    uint64_t l2_bytes;
    int integrated;               /* shares the host's memory */
    int managed_memory;           /* cudaMallocManaged works */
    int concurrent_managed;       /* host and device may touch managed memory at once */
    int pageable_access;          /* device reads pageable host memory */
    int pageable_uses_host_tables;/* ... through the host's page tables (coherent) */
    int can_map_host;             /* registered host memory has a device address */
    int register_read_only;       /* cudaHostRegisterReadOnly is supported */
    int driver_version, runtime_version; /* 13000 = 13.0 */
} hx_cuda_device_props;

/* A kernel: its codelet name (ops/ops.h), its launcher, the op it
 * implements and which of that op's arguments it covers.  `bufs` are
 * device addresses in the codelet's buffer order, `sizes` their sizes in
 * bytes, `args` the codelet's argument block.  Launches are asynchronous on
 * the context's stream; errors found only when the stream completes
 * (out-of-range indices in ids/meta buffers) are reported by synchronize. */
typedef struct {
    const char *name;
    int (*launch)(hx_cuda_ctx *c, const void *args, void *const *bufs, const size_t *sizes, int nbufs);
    /* The op's id in ops/op_list.h (hx_op): the backend binds the kernel
     * by it when a device is added, never by name. */
    int op;
    /* Whether the kernel handles these (valid) arguments: weight and
     * table types, KV cache type, head size; asked per task so that the
     * scheduler keeps the others on other devices.  NULL: whatever is
     * valid. */
    int (*covers)(const void *args);
} hx_cuda_kernel;

typedef enum { HX_CUDA_COPY_H2D = 0, HX_CUDA_COPY_D2H = 1, HX_CUDA_COPY_D2D = 2 } hx_cuda_copy_kind;

typedef struct hx_cuda_plugin {
    uint32_t abi;          /* HX_CUDA_PLUGIN_ABI */
    uint32_t struct_size;  /* sizeof(hx_cuda_plugin) as the plugin was built */
    const char *build;     /* "CUDA 13.0; sm_80 sm_90 compute_90" */

    /* The calling thread's last failure, "" if none. */
    const char *(*last_error)(void);

    /* -- devices -- */
    /* Number of devices (cudaGetDeviceCount); fails when there is no driver. */
    int (*device_count)(int *count);
    int (*device_props)(int device, hx_cuda_device_props *out);

    /* -- contexts and streams -- */
    int (*context_create)(int device, hx_cuda_ctx **out);
    void (*context_destroy)(hx_cuda_ctx *c);
    /* Waits for the stream; reports asynchronous kernel failures and any
     * out-of-range index a kernel met since the last call. */
    int (*synchronize)(hx_cuda_ctx *c);

    /* -- memory -- */
    int (*mem_alloc)(hx_cuda_ctx *c, size_t bytes, void **dev);
    int (*mem_free)(hx_cuda_ctx *c, void *dev);
    /* Pins host memory and maps it for the device (read_only: the pages may
     * be read-only, e.g. a mapped file); *dev is its device address. */
    int (*host_register)(hx_cuda_ctx *c, void *host, size_t bytes, int read_only, void **dev);
    int (*host_unregister)(hx_cuda_ctx *c, void *host);
    /* Managed memory, refused beyond what the device has free: over-
     * subscribing managed memory can stall the whole GPU. */
    int (*managed_alloc)(hx_cuda_ctx *c, size_t bytes, void **ptr);
    /* Hints: prefetch to the device (to_device) or to the host, and mark
     * read-mostly (a read-only copy may live on each processor). */
    int (*managed_prefetch)(hx_cuda_ctx *c, void *ptr, size_t bytes, int to_device);
    int (*managed_read_mostly)(hx_cuda_ctx *c, void *ptr, size_t bytes);
    /* Copies on the context's stream; synchronous unless `async` (then the
     * host memory must stay valid until synchronize). */
    int (*copy)(hx_cuda_ctx *c, void *dst, const void *src, size_t bytes, hx_cuda_copy_kind kind, int async);
    int (*memset)(hx_cuda_ctx *c, void *dev, int value, size_t bytes);

    /* -- events -- */
    int (*event_create)(hx_cuda_ctx *c, hx_cuda_event **out);
    int (*event_record)(hx_cuda_ctx *c, hx_cuda_event *e);
    int (*event_synchronize)(hx_cuda_event *e);
    int (*event_elapsed_ms)(hx_cuda_event *start, hx_cuda_event *end, float *ms);
    void (*event_destroy)(hx_cuda_event *e);

    /* -- kernels -- */
    const hx_cuda_kernel *kernels; /* nkernels entries */
    int nkernels;
    const hx_cuda_kernel *(*kernel_find)(const char *name); /* an application's codelet, by name */

    /* -- measurement -- */
    /* cuBLAS's own GEMM on device-resident random data, for comparison with
     * the plugin's path: D[T][N] = X[T][K] W[N][K]^T, inputs of `type`
     * (HX_TYPE_F16, HX_TYPE_BF16 or HX_TYPE_F32), F32 output and
     * accumulation; mean seconds per product over `iters` after a warm-up. */
    int (*bench_cublas_gemm)(hx_cuda_ctx *c, uint32_t type, uint32_t T, uint32_t N, uint32_t K, int iters,
                             double *seconds);
} hx_cuda_plugin;

typedef const hx_cuda_plugin *(*hx_cuda_plugin_entry)(void);

#ifdef __cplusplus
}
#endif
#endif
