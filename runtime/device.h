/* Devices: what the runtime knows of one, and the ops table through which
 * it reaches its backend.  The runtime never names a backend: it is
 * handed the list of backends when it opens (hx_runtime_open_with, called
 * by hx_runtime_open in devices/backends.c). */
#ifndef HX_RUNTIME_DEVICE_H
#define HX_RUNTIME_DEVICE_H

#include <pthread.h>
#include <stdatomic.h>

#include "hetero.h"
#include "ops/op_list.h"
#include "ops/types.h"

typedef struct hx_device hx_device;
typedef struct hx_device_ops hx_device_ops;

/* What a backend is given to run one task: the codelet, its argument
 * block, and for each buffer the handle valid on the device's memory node
 * (host pointer for host memory; cl_mem, CUDA pointer ... otherwise). */
typedef struct {
    const hx_codelet *codelet; /* for a built-in op, the device's bound one */
    int op;                    /* the built-in op (ops/op_list.h), or -1 */
    const void *args;
    int nbuffers;
    void *handles[HX_TASK_MAX_BUFFERS];
    void *host[HX_TASK_MAX_BUFFERS]; /* host pointers (valid when node is host) */
    size_t sizes[HX_TASK_MAX_BUFFERS];
    hx_access modes[HX_TASK_MAX_BUFFERS];
    const void *cpu_layouts[HX_TASK_MAX_BUFFERS]; /* hx_buffer.cpu_layout, for the CPU device */
    double flops, bytes; /* the task's cost (hx_task_cost) */
} hx_exec;

/* Options that discovery needs (resolved from hx_runtime_options + env). */
typedef struct {
    int cpu_threads;      /* 0 = one per physical core */
    int pin_threads;
    int fpga_emulation;   /* present PoCL as an emulated FPGA */
    /* Leave out a device that computes on the host's cores (an OpenCL CPU
     * device such as PoCL's): the CPU device already uses them.  Set for
     * the default set, "all", unless such a device is asked for by name. */
    int skip_host_cores;
    void *topology;       /* hwloc_topology_t, owned by the runtime */
    const char *machine;  /* a description to simulate (runtime/sim.c), or "" */
} hx_discover_options;

/* A name the device list (hx_runtime_options.devices, HX_DEVICES)
 * accepts, as a backend offers it: that backend's devices of kind `kind`,
 * or all of them.  Backends may offer the same name ("gpu": OpenCL's GPUs
 * and CUDA's); it then selects the devices of each, and discovery runs
 * every backend that offers a name asked for. */
typedef struct {
    const char *name;
    int kind;       /* an hx_device_kind, or -1: every device of the backend */
    /* Naming it asks for devices that compute on the host's cores as well
     * (hx_discover_options.skip_host_cores is then off). */
    int host_cores;
} hx_device_selector;

struct hx_device_ops {
    /* The family's name (hx_device_family_str): "cpu", "opencl", "cuda";
     * the simulator's backend is "sim". */
    const char *name;
    hx_device_family family;   /* HX_FAMILY_COUNT: devices of any family (the simulator's) */
    /* The names its devices answer to, ended by a NULL name; the runtime
     * knows no other (besides "all"). */
    const hx_device_selector *selectors;

    /* Appends this backend's devices with hx_runtime_add_device().  A
     * backend with nothing to offer returns HX_OK after recording why with
     * hx_runtime_set_absence(). */
    hx_status (*discover)(hx_runtime *rt, const hx_discover_options *opts);
    void (*destroy)(hx_device *d);

    /* Binds the device's implementation of the built-in op `op`: fills
     * this backend's fields of `impl` (a copy of the op's codelet, with
     * its name and cost) and returns 1, or returns 0 when the device
     * does not implement the op.  Called once per op as the device is
     * added; the runtime then hands the bound codelet to the calls below. */
    int (*bind_op)(hx_device *d, hx_op op, hx_codelet *impl);
    /* Whether the device has an implementation of the codelet. */
    int (*can_run)(hx_device *d, const hx_codelet *cl);
    /* Optional: whether that implementation covers these arguments (an
     * OpenCL kernel for the weight type, a bitstream holding the kernel).
     * Invalid arguments are not its business: they fail on any device
     * when the task runs.  `sizes` are the task's buffer sizes. */
    int (*can_run_args)(hx_device *d, const hx_codelet *cl, const void *args, const size_t *sizes);
    /* Runs one task to completion on the calling (worker) thread. */
    hx_status (*run)(hx_device *d, const hx_exec *exec);

    /* A handle on host memory that the device uses in place (unified
     * devices: cl_mem with CL_MEM_USE_HOST_PTR, registered CUDA memory). */
    hx_status (*wrap_host)(hx_device *d, void *host, size_t bytes, int read_only, void **handle);
    /* Device-local memory (devices whose memory_node is not host). */
    hx_status (*alloc)(hx_device *d, size_t bytes, void **handle);
    void (*release)(hx_device *d, void *handle); /* frees alloc/wrap handles */
    /* `bytes` between host memory and the handle's bytes from `offset` on
     * (a buffer's blocks move one run at a time). */
    hx_status (*copy_in)(hx_device *d, void *handle, size_t offset, const void *host, size_t bytes);
    hx_status (*copy_out)(hx_device *d, void *host, void *handle, size_t offset, size_t bytes);
    /* Optional: `bytes` from the start of handle `src` to the start of
     * `dst`, both the device's (a buffer's slots moving to a larger
     * allocation); without it they pass through host memory. */
    hx_status (*copy_device)(hx_device *d, void *dst, const void *src, size_t bytes);
    /* Makes device writes to wrapped host memory visible to the host. */
    hx_status (*sync_host)(hx_device *d, void *handle, size_t bytes);

    /* Optional: lays a weight matrix (`rows` rows of `cols` elements of
     * `type`, in b's host memory) out for this device's kernels once, as a
     * model loads, and hangs the copy on b (hx_buffer_set_cpu_layout);
     * `always` 0 makes it only where the backend's measurements say it
     * pays.  *bytes: the copy's size, 0 where none was made (a type or
     * shape without such a layout, a buffer that has one). */
    hx_status (*lay_out_weight)(hx_device *d, hx_buffer *b, hx_type type, uint64_t cols, uint64_t rows, int always,
                                size_t *bytes);

    /* Worker hooks (optional): the CPU backend runs a team of threads. */
    hx_status (*worker_start)(hx_device *d);
    void (*worker_stop)(hx_device *d);
};

struct hx_device {
    hx_device_info info;
    const hx_device_ops *ops;
    void *impl;          /* the backend's state */
    hx_runtime *rt;
    /* Runtime-owned worker state (runtime/worker.c). */
    void *worker;
    /* The built-in ops the backend bound (bind_op), by op id. */
    hx_codelet op_impl[HX_OP_COUNT];
    unsigned char op_bound[HX_OP_COUNT];
};

/* The codelet the device runs for `cl`: its bound implementation of a
 * built-in op (NULL if it has none), or `cl` itself for an application's
 * codelet. */
const hx_codelet *hx_device_codelet(const hx_device *d, const hx_codelet *cl);

/* The built-in op whose bound codelet on `d` is `cl`, or -1: lets a
 * backend index its own per-op state without a name search. */
static inline int hx_device_bound_op(const hx_device *d, const hx_codelet *cl)
{
    uintptr_t p = (uintptr_t)cl, first = (uintptr_t)d->op_impl;
    return p >= first && p < first + sizeof d->op_impl && (p - first) % sizeof *cl == 0
               ? (int)((p - first) / sizeof *cl)
               : -1;
}

/* Implemented by the runtime, used by backends during discovery. */
hx_status hx_runtime_add_device(hx_runtime *rt, const hx_device_info *info,
                                const hx_device_ops *ops, void *impl);
void hx_runtime_set_absence(hx_runtime *rt, hx_device_family f, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* hx_runtime_open with the backends to discover, in order, ending with
 * NULL: the device families (devices/backends.c), whose names and
 * selectors are the only ones the runtime accepts. */
hx_status hx_runtime_open_with(hx_runtime **out, const hx_runtime_options *opts,
                               const hx_device_ops *const *backends);

#endif
