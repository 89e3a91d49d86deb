/* The OpenCL device family: every platform and device the ICD loader
 * knows (GPUs, CPUs through PoCL, FPGAs through XRT), one context and one
 * in-order queue each.  Unified devices use host buffers in place
 * (CL_MEM_USE_HOST_PTR); others get device memory and copies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "devices/cl_launch.h"
#include "devices/opencl.h"
#include "ops/ops.h"
#include "runtime/error.h"
#include "runtime/runtime.h"
#include "runtime/topology.h"

#define MAX_PLATFORMS 16
#define MAX_DEVICES_PER_PLATFORM 16

/* From cl_ext.h (cl_khr_pci_bus_info), spelled out to stay independent of
 * the headers' version. */
#define HX_CL_DEVICE_PCI_BUS_INFO_KHR 0x410F
typedef struct {
    cl_uint domain, bus, device, function;
} hx_cl_pci_bus_info;

/* Copies with truncation (snprintf would make gcc warn about it). */
static void copy_str(char *dst, size_t size, const char *src)
{
    size_t n = strnlen(src, size - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static int contains_nocase(const char *s, const char *word)
{
    for (size_t n = strlen(word); *s; s++)
        if (!strncasecmp(s, word, n))
            return 1;
    return 0;
}

/* ---- memory ----------------------------------------------------------- */

static hx_status ocl_wrap_host(hx_device *dev, void *host, size_t bytes, int read_only, void **handle)
{
    hx_opencl_device *d = dev->impl;
    cl_int err;
    cl_mem_flags flags = CL_MEM_USE_HOST_PTR | (read_only ? CL_MEM_READ_ONLY : CL_MEM_READ_WRITE);
    cl_mem m = clCreateBuffer(d->context, flags, bytes, host, &err);
    if (err != CL_SUCCESS)
        return hx_opencl_error(err, "wrapping %zu bytes of host memory on %s", bytes, d->device_name);
    *handle = m;
    return HX_OK;
}

static hx_status ocl_alloc(hx_device *dev, size_t bytes, void **handle)
{
    hx_opencl_device *d = dev->impl;
    cl_int err;
    cl_mem m = clCreateBuffer(d->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err != CL_SUCCESS)
        return hx_opencl_error(err, "allocating %zu bytes on %s", bytes, d->device_name);
    *handle = m;
    return HX_OK;
}

static void ocl_release(hx_device *dev, void *handle)
{
    if (handle)
        clReleaseMemObject((cl_mem)handle);
}

static hx_status ocl_copy_in(hx_device *dev, void *handle, size_t offset, const void *host, size_t bytes)
{
    hx_opencl_device *d = dev->impl;
    cl_int err = clEnqueueWriteBuffer(d->queue, (cl_mem)handle, CL_TRUE, offset, bytes, host, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return hx_opencl_error(err, "copying %zu bytes to offset %zu on %s", bytes, offset, d->device_name);
    return HX_OK;
}

static hx_status ocl_copy_out(hx_device *dev, void *host, void *handle, size_t offset, size_t bytes)
{
    hx_opencl_device *d = dev->impl;
    cl_int err = clEnqueueReadBuffer(d->queue, (cl_mem)handle, CL_TRUE, offset, bytes, host, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return hx_opencl_error(err, "copying %zu bytes from offset %zu on %s", bytes, offset, d->device_name);
    return HX_OK;
}

static hx_status ocl_copy_device(hx_device *dev, void *dst, const void *src, size_t bytes)
{
    hx_opencl_device *d = dev->impl;
    cl_int err = bytes ? clEnqueueCopyBuffer(d->queue, (cl_mem)src, (cl_mem)dst, 0, 0, bytes, 0, NULL, NULL)
                       : CL_SUCCESS;
    if (err == CL_SUCCESS)
        err = clFinish(d->queue);
    if (err != CL_SUCCESS)
        return hx_opencl_error(err, "copying %zu bytes on %s", bytes, d->device_name);
    return HX_OK;
}

/* Mapping a CL_MEM_USE_HOST_PTR buffer is how OpenCL promises the host
 * pointer holds the device's writes; on zero-copy devices it costs nothing. */
static hx_status ocl_sync_host(hx_device *dev, void *handle, size_t bytes)
{
    hx_opencl_device *d = dev->impl;
    cl_int err;
    void *p = clEnqueueMapBuffer(d->queue, (cl_mem)handle, CL_TRUE, CL_MAP_READ, 0, bytes, 0, NULL, NULL, &err);
    if (err != CL_SUCCESS)
        return hx_opencl_error(err, "mapping %zu bytes on %s", bytes, d->device_name);
    err = clEnqueueUnmapMemObject(d->queue, (cl_mem)handle, p, 0, NULL, NULL);
    if (err == CL_SUCCESS)
        err = clFinish(d->queue);
    if (err != CL_SUCCESS)
        return hx_opencl_error(err, "unmapping %zu bytes on %s", bytes, d->device_name);
    return HX_OK;
}

/* ---- running ---------------------------------------------------------- */

/* The OpenCL implementations of the built-in ops: the embedded program
 * (kernels_cl/<program>.cl) and the launch (devices/cl_launch.c). */
static const struct {
    const char *program;
    int (*launch)(const void *args, const size_t *sizes, hx_cl_launch *out);
} ocl_op_impls[HX_OP_COUNT] = {
    [HX_OP_VECTOR_ADD] = {.program = "basic", .launch = hx_cl_launch_vector_add},
    [HX_OP_GEMM_F32] = {.program = "basic", .launch = hx_cl_launch_gemm_f32},
    [HX_OP_GET_ROWS] = {.program = "get_rows", .launch = hx_cl_launch_get_rows},
    [HX_OP_RMSNORM] = {.program = "rmsnorm", .launch = hx_cl_launch_rmsnorm},
    [HX_OP_MATMUL] = {.program = "matmul", .launch = hx_cl_launch_matmul},
    [HX_OP_ROPE] = {.program = "rope", .launch = hx_cl_launch_rope},
    [HX_OP_KV_STORE] = {.program = "kv_store", .launch = hx_cl_launch_kv_store},
    [HX_OP_ATTENTION] = {.program = "attention", .launch = hx_cl_launch_attention},
    [HX_OP_ADD] = {.program = "elementwise", .launch = hx_cl_launch_add},
    [HX_OP_SWIGLU] = {.program = "elementwise", .launch = hx_cl_launch_swiglu},
    /* Run as its parts, each by matmul's kernels (ocl_run_parts below). */
    [HX_OP_MATMUL_MULTI] = {.program = "matmul", .launch = hx_cl_launch_matmul_multi},
    [HX_OP_ATTENTION_PART] = {.program = "attention_part", .launch = hx_cl_launch_attention_part},
    [HX_OP_ATTN_MERGE] = {.program = "attention_part", .launch = hx_cl_launch_attn_merge},
    [HX_OP_SCALE] = {.program = "activation", .launch = hx_cl_launch_scale},
    [HX_OP_GEGLU] = {.program = "activation", .launch = hx_cl_launch_geglu},
    [HX_OP_ADD_GATED] = {.program = "activation", .launch = hx_cl_launch_add_gated},
    [HX_OP_MOE_ROUTE] = {.program = "moe", .launch = hx_cl_launch_moe_route},
    [HX_OP_MOE_GATE_UP] = {.program = "moe", .launch = hx_cl_launch_moe_gate_up},
    [HX_OP_MOE_DOWN] = {.program = "moe", .launch = hx_cl_launch_moe_down},
};

/* Whether the device's program (or bitstream) holds the op is decided
 * when a task asks (ocl_can_run), since programs are built on first use. */
static int ocl_bind_op(hx_device *dev, hx_op op, hx_codelet *impl)
{
    impl->cl_program = ocl_op_impls[op].program;
    impl->cl_launch = ocl_op_impls[op].launch;
    return impl->cl_launch != NULL;
}

/* "matmul_multi" is its parts, each one "matmul" task: the device runs it
 * where it runs matmul, for each part's weight type. */
static const hx_codelet *matmul_of_multi(hx_device *dev, const hx_codelet *cl)
{
    return hx_device_bound_op(dev, cl) == HX_OP_MATMUL_MULTI && dev->op_bound[HX_OP_MATMUL]
               ? &dev->op_impl[HX_OP_MATMUL]
               : NULL;
}

/* Part i of a matmul_multi exec as the matmul exec it stands for. */
static hx_exec multi_part(const hx_exec *x, const hx_codelet *matmul, const hx_op_matmul *m, int i)
{
    const hx_op_matmul_multi *a = x->args;
    const int idx[4] = {hx_matmul_multi_w(i), 0, hx_matmul_multi_y(i), hx_matmul_multi_bias(a, i)};
    hx_exec p = {.codelet = matmul, .op = HX_OP_MATMUL, .args = m, .nbuffers = m->has_bias ? 4 : 3};
    for (int k = 0; k < p.nbuffers; k++) {
        p.handles[k] = x->handles[idx[k]];
        p.host[k] = x->host[idx[k]];
        p.sizes[k] = x->sizes[idx[k]];
        p.modes[k] = x->modes[idx[k]];
    }
    return p;
}

static int multi_args_ok(const void *args)
{
    return args && hx_matmul_multi_valid(args);
}

static int ocl_can_run(hx_device *dev, const hx_codelet *cl)
{
    const hx_codelet *mm = matmul_of_multi(dev, cl);
    return cl && hx_opencl_program_offers(dev->impl, mm ? mm : cl);
}

static int ocl_can_run_args(hx_device *dev, const hx_codelet *cl, const void *args, const size_t *sizes);

/* Each part where matmul would run it; bad arguments fail when it runs. */
static int multi_can_run_args(hx_device *dev, const hx_codelet *matmul, const void *args, const size_t *sizes)
{
    if (!multi_args_ok(args))
        return 1;
    const hx_op_matmul_multi *a = args;
    hx_exec x = {.args = args, .nbuffers = hx_matmul_multi_nbuffers(a)};
    for (int k = 0; k < x.nbuffers && k < HX_TASK_MAX_BUFFERS; k++)
        x.sizes[k] = sizes[k];
    for (uint32_t i = 0; i < a->n; i++) {
        hx_op_matmul m = hx_matmul_multi_part(a, (int)i);
        hx_exec p = multi_part(&x, matmul, &m, (int)i);
        if (!ocl_can_run_args(dev, matmul, &m, p.sizes))
            return 0;
    }
    return 1;
}

/* The launch decides which kernel these arguments need; the device runs
 * them if its program (and bitstream) has that kernel.  A launch that
 * refuses the arguments as unsupported (a weight type without a kernel)
 * leaves them to other devices; one that finds them invalid accepts, so
 * the task fails with that error rather than with "no device". */
static int ocl_can_run_args(hx_device *dev, const hx_codelet *cl, const void *args, const size_t *sizes)
{
    const hx_codelet *mm = matmul_of_multi(dev, cl);
    if (mm)
        return multi_can_run_args(dev, mm, args, sizes);
    hx_cl_launch l;
    memset(&l, 0, sizeof l);
    int rc = cl->cl_launch(args, sizes, &l);
    if (rc == HX_ERR_UNSUPPORTED)
        return 0;
    if (rc || !l.kernel)
        return 1;
    return hx_opencl_program_has_kernel(dev->impl, cl, l.kernel) &&
           (!l.then_kernel || hx_opencl_program_has_kernel(dev->impl, cl, l.then_kernel));
}

static hx_status check_launch(const hx_codelet *cl, const hx_exec *x, const hx_cl_launch *l)
{
    const char *name = cl->name ? cl->name : "(unnamed)";
    if (l->work_dim < 1 || l->work_dim > 3)
        return hx_error(HX_ERR_INVALID_ARG, "codelet '%s': work_dim %u (expected 1 to 3)", name, l->work_dim);
    if (l->nargs < 0 || l->nargs > HX_CL_MAX_ARGS)
        return hx_error(HX_ERR_INVALID_ARG, "codelet '%s': %d kernel arguments (at most %d)", name, l->nargs,
                        HX_CL_MAX_ARGS);
    for (int i = 0; i < l->nargs; i++) {
        int b = l->arg[i].buffer;
        if (b == HX_CL_ARG_SCRATCH && !l->scratch)
            return hx_error(HX_ERR_INVALID_ARG, "codelet '%s': argument %d is scratch memory, and none was asked for",
                            name, i);
        if (b >= x->nbuffers && b != HX_OPENCL_ARG_STATUS && b != HX_CL_ARG_SCRATCH)
            return hx_error(HX_ERR_INVALID_ARG, "codelet '%s': argument %d names buffer %d of %d", name, i, b,
                            x->nbuffers);
        if (b < 0 && l->arg[i].size == 0)
            return hx_error(HX_ERR_INVALID_ARG, "codelet '%s': argument %d has size 0", name, i);
    }
    return HX_OK;
}

static hx_status check_status(hx_opencl_device *d, const char *kernel, const char *codelet)
{
    cl_uint bits = 0;
    cl_int err = clEnqueueReadBuffer(d->queue, d->status, CL_TRUE, 0, sizeof bits, &bits, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return hx_opencl_error(err, "reading the status word on %s", d->device_name);
    if (!bits)
        return HX_OK;
    return hx_error(HX_ERR_RANGE, "kernel '%s' (codelet '%s') found %s%s%s%s%s", kernel, codelet,
                    bits & HX_OPENCL_BAD_INDEX ? "an index outside its table" : "",
                    bits & HX_OPENCL_BAD_INDEX && bits & ~HX_OPENCL_BAD_INDEX ? ", " : "",
                    bits & HX_OPENCL_BAD_SLOT ? "a KV slot outside the cache" : "",
                    bits & HX_OPENCL_BAD_SLOT && bits & HX_OPENCL_BAD_META ? ", " : "",
                    bits & HX_OPENCL_BAD_META ? "KV metadata (sequence, position or block) out of range" : "");
}

/* A driver may back CL_MEM_USE_HOST_PTR memory with a copy of its own (GPUs
 * sharing host memory do for pointers off their alignment); OpenCL only
 * promises it sees host writes made through a map.  The runtime writes
 * host memory directly, so each input is mapped for writing and unmapped
 * before the kernel: nothing on a zero-copy device, a copy otherwise.
 * CPU devices run on host memory itself and skip this. */
static hx_status refresh_inputs(hx_opencl_device *d, const hx_exec *x)
{
    for (int i = 0; i < x->nbuffers; i++) {
        if (!(x->modes[i] & HX_R))
            continue;
        cl_int err;
        void *p = clEnqueueMapBuffer(d->queue, (cl_mem)x->handles[i], CL_FALSE, CL_MAP_WRITE, 0, x->sizes[i], 0,
                                     NULL, NULL, &err);
        if (err == CL_SUCCESS)
            err = clEnqueueUnmapMemObject(d->queue, (cl_mem)x->handles[i], p, 0, NULL, NULL);
        if (err != CL_SUCCESS)
            return hx_opencl_error(err, "refreshing buffer %d on %s", i, d->device_name);
    }
    return HX_OK;
}

static hx_status ocl_run(hx_device *dev, const hx_exec *x);

/* One kernel run per weight, in one task: OpenCL's matmul kernels are one
 * per type, and the parts' types may differ. */
static hx_status ocl_run_parts(hx_device *dev, const hx_codelet *matmul, const hx_exec *x)
{
    if (!multi_args_ok(x->args) || x->nbuffers != hx_matmul_multi_nbuffers(x->args))
        return hx_error(HX_ERR_INVALID_ARG, "matmul_multi: part count, bias bits or buffer count out of range");
    const hx_op_matmul_multi *a = x->args;
    for (uint32_t i = 0; i < a->n; i++) {
        hx_op_matmul m = hx_matmul_multi_part(a, (int)i);
        hx_exec p = multi_part(x, matmul, &m, (int)i);
        hx_status s = ocl_run(dev, &p);
        if (s)
            return hx_error_context(s, "matmul_multi part %u", i);
    }
    return HX_OK;
}

/* The launch's scratch memory: the device's, grown to the largest asked
 * for (a device runs one kernel at a time, as its status word does). */
static hx_status scratch_of(hx_opencl_device *d, size_t bytes, cl_mem *out)
{
    if (bytes > d->scratch_bytes) {
        if (d->scratch)
            clReleaseMemObject(d->scratch);
        d->scratch_bytes = 0;
        cl_int err;
        d->scratch = clCreateBuffer(d->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
        if (err != CL_SUCCESS) {
            d->scratch = NULL;
            return hx_opencl_error(err, "allocating %zu bytes of scratch memory on %s", bytes, d->device_name);
        }
        d->scratch_bytes = bytes;
    }
    *out = d->scratch;
    return HX_OK;
}

static hx_status set_args(hx_opencl_device *d, cl_kernel k, const hx_cl_launch *l, const hx_exec *x,
                          cl_mem scratch, const char *kernel, const char *name)
{
    for (int i = 0; i < l->nargs; i++) {
        cl_int err;
        const int b = l->arg[i].buffer;
        if (b == HX_OPENCL_ARG_STATUS) {
            err = clSetKernelArg(k, (cl_uint)i, sizeof d->status, &d->status);
        } else if (b == HX_CL_ARG_SCRATCH) {
            err = clSetKernelArg(k, (cl_uint)i, sizeof scratch, &scratch);
        } else if (b >= 0) {
            cl_mem m = (cl_mem)x->handles[b];
            err = clSetKernelArg(k, (cl_uint)i, sizeof m, &m);
        } else {
            err = clSetKernelArg(k, (cl_uint)i, l->arg[i].size, l->arg[i].value);
        }
        if (err != CL_SUCCESS)
            return hx_opencl_error(err, "argument %d of kernel '%s' (codelet '%s')", i, kernel, name);
    }
    return HX_OK;
}

/* Enqueues one kernel of the launch and waits for it (the queue runs in
 * order, so a second kernel sees everything the first wrote). */
static hx_status run_kernel(hx_opencl_device *d, cl_kernel k, unsigned dim, const size_t *global,
                            const size_t *local, const char *kernel, const char *name)
{
    cl_event ev;
    cl_int err = clEnqueueNDRangeKernel(d->queue, k, dim, NULL, global, local[0] ? local : NULL, 0, NULL, &ev);
    if (err != CL_SUCCESS)
        return hx_opencl_error(err, "launching kernel '%s' (codelet '%s') on %s", kernel, name, d->device_name);
    err = clWaitForEvents(1, &ev);
    cl_int exec = CL_COMPLETE;
    if (err == CL_SUCCESS || err == CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
        clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof exec, &exec, NULL);
    clReleaseEvent(ev);
    if (exec < 0)
        err = exec;
    if (err != CL_SUCCESS)
        return hx_opencl_error(err, "running kernel '%s' (codelet '%s') on %s", kernel, name, d->device_name);
    return HX_OK;
}

static hx_status ocl_run(hx_device *dev, const hx_exec *x)
{
    hx_opencl_device *d = dev->impl;
    const hx_codelet *cl = x->codelet;
    const hx_codelet *mm = matmul_of_multi(dev, cl);
    if (mm)
        return ocl_run_parts(dev, mm, x);
    const char *name = cl->name ? cl->name : "(unnamed)";
    hx_cl_launch l;
    memset(&l, 0, sizeof l);
    int rc = cl->cl_launch ? cl->cl_launch(x->args, x->sizes, &l) : HX_ERR_UNSUPPORTED;
    if (rc) {
        hx_status s = rc < 0 ? (hx_status)rc : HX_ERR_INVALID_ARG;
        return hx_last_error()[0] ? s : hx_error(s, "codelet '%s': the OpenCL launch refused its arguments (%d)",
                                                  name, rc);
    }
    hx_status s = check_launch(cl, x, &l);
    if (s)
        return s;
    for (unsigned i = 0; i < l.work_dim; i++)
        if (l.global[i] == 0)
            return HX_OK; /* an empty range: nothing to do */
    cl_kernel k, then = NULL;
    cl_mem scratch = NULL;
    if ((s = hx_opencl_program_kernel(d, cl, l.kernel, &k)) ||
        (l.then_kernel && (s = hx_opencl_program_kernel(d, cl, l.then_kernel, &then))) ||
        (l.scratch && (s = scratch_of(d, l.scratch, &scratch))) ||
        (s = set_args(d, k, &l, x, scratch, l.kernel, name)) ||
        (then && (s = set_args(d, then, &l, x, scratch, l.then_kernel, name))))
        return s;
    int status = 0;
    for (int i = 0; i < l.nargs; i++)
        status |= l.arg[i].buffer == HX_OPENCL_ARG_STATUS;
    if (d->refresh_inputs && (s = refresh_inputs(d, x)))
        return s;
    static const cl_uint zero = 0;
    cl_int err = status ? clEnqueueWriteBuffer(d->queue, d->status, CL_FALSE, 0, sizeof zero, &zero, 0, NULL, NULL)
                        : CL_SUCCESS;
    if (err != CL_SUCCESS)
        return hx_opencl_error(err, "resetting the status word on %s", d->device_name);
    if ((s = run_kernel(d, k, l.work_dim, l.global, l.local, l.kernel, name)) ||
        (then && (s = run_kernel(d, then, l.work_dim, l.then_global, l.then_local, l.then_kernel, name))))
        return s;
    return status ? check_status(d, l.kernel, name) : HX_OK;
}

/* ---- discovery -------------------------------------------------------- */

static void ocl_device_free(hx_opencl_device *d)
{
    if (!d)
        return;
    hx_opencl_program_release_all(d);
    if (d->status)
        clReleaseMemObject(d->status);
    if (d->scratch)
        clReleaseMemObject(d->scratch);
    if (d->queue)
        clReleaseCommandQueue(d->queue);
    if (d->context)
        clReleaseContext(d->context);
    hx_opencl_manifest_free(d->manifest);
    pthread_mutex_destroy(&d->lock);
    free(d);
}

static void ocl_destroy(hx_device *dev)
{
    ocl_device_free(dev->impl);
    dev->impl = NULL;
}

static void info_string(cl_device_id dev, cl_device_info what, char *out, size_t size)
{
    char buf[512] = "";
    if (clGetDeviceInfo(dev, what, sizeof buf - 1, buf, NULL) != CL_SUCCESS)
        buf[0] = '\0';
    buf[sizeof buf - 1] = '\0';
    copy_str(out, size, buf);
}

static int has_extension(cl_device_id dev, const char *ext)
{
    size_t n = 0;
    if (clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, 0, NULL, &n) != CL_SUCCESS || !n)
        return 0;
    char *s = malloc(n + 1);
    int found = 0;
    if (s && clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, n, s, NULL) == CL_SUCCESS) {
        s[n] = '\0';
        size_t len = strlen(ext);
        for (char *p = s; (p = strstr(p, ext)); p += len)
            if ((p == s || p[-1] == ' ') && (p[len] == ' ' || p[len] == '\0'))
                found = 1;
    }
    free(s);
    return found;
}

static int device_numa(cl_device_id dev, cl_device_type type, void *topology)
{
    if (has_extension(dev, "cl_khr_pci_bus_info")) {
        hx_cl_pci_bus_info pci;
        if (clGetDeviceInfo(dev, HX_CL_DEVICE_PCI_BUS_INFO_KHR, sizeof pci, &pci, NULL) == CL_SUCCESS) {
            char busid[32];
            snprintf(busid, sizeof busid, "%04x:%02x:%02x.%x", pci.domain & 0xffff, pci.bus & 0xff,
                     pci.device & 0x1f, pci.function & 0x7);
            int node = hx_topology_pci_numa(topology, busid);
            if (node >= 0)
                return node;
        }
    }
    return (type & CL_DEVICE_TYPE_CPU) ? hx_topology_cpu_numa(topology) : -1;
}

static int is_pocl(const char *platform_name, const char *platform_vendor)
{
    return contains_nocase(platform_name, "portable computing language") || contains_nocase(platform_name, "pocl") ||
           contains_nocase(platform_vendor, "pocl");
}

static int is_xilinx(const char *platform_name, const char *platform_vendor)
{
    return contains_nocase(platform_name, "xilinx") || contains_nocase(platform_vendor, "xilinx") ||
           contains_nocase(platform_vendor, "amd") || contains_nocase(platform_name, "amd");
}

/* An FPGA's bitstream: the manifest's platform entry for the device and
 * the .xclbin found in $HX_BITSTREAM_DIR (hardware only). */
static hx_status attach_bitstream(hx_opencl_device *d, int emulated)
{
    hx_status s = hx_opencl_manifest_load(&d->manifest);
    if (s)
        return s;
    d->bitstream = hx_opencl_manifest_find(d->manifest, emulated ? HX_OPENCL_EMULATION_PLATFORM : d->device_name);
    if (emulated || !d->bitstream)
        return HX_OK;
    const char *dir = getenv("HX_BITSTREAM_DIR");
    if (dir && *dir) {
        int n = snprintf(d->xclbin_path, sizeof d->xclbin_path, "%s/%s", dir, d->bitstream->xclbin);
        FILE *f = n > 0 && (size_t)n < sizeof d->xclbin_path ? fopen(d->xclbin_path, "rb") : NULL;
        if (f)
            fclose(f);
        else
            d->xclbin_path[0] = '\0';
    }
    return HX_OK;
}

/* OpenCL 2.0 renamed the queue constructor; 1.2 platforms (XRT among
 * them) have only the old one. */
static cl_command_queue create_queue(hx_opencl_device *d, cl_int *err)
{
    char version[64] = "";
    clGetPlatformInfo(d->platform, CL_PLATFORM_VERSION, sizeof version - 1, version, NULL);
    int major = 1;
    sscanf(version, "OpenCL %d", &major);
    if (major >= 2)
        return clCreateCommandQueueWithProperties(d->context, d->device, NULL, err);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    return clCreateCommandQueue(d->context, d->device, 0, err);
#pragma GCC diagnostic pop
}

static hx_status add_device(hx_runtime *rt, const hx_discover_options *o, cl_platform_id plat,
                            const char *plat_name, const char *plat_vendor, cl_device_id dev, int *emulation_used)
{
    hx_opencl_device *d = calloc(1, sizeof *d);
    if (!d)
        return hx_error(HX_ERR_NO_MEMORY, "OpenCL device");
    pthread_mutex_init(&d->lock, NULL);
    d->platform = plat;
    d->device = dev;
    hx_device_info info = {0};
    cl_device_type type = 0;
    cl_uint cus = 0;
    cl_ulong gmem = 0, lmem = 0;
    cl_bool unified = CL_FALSE;
    clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cus, &cus, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof gmem, &gmem, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_LOCAL_MEM_SIZE, sizeof lmem, &lmem, NULL);
    if (clGetDeviceInfo(dev, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified, NULL) != CL_SUCCESS)
        unified = CL_FALSE;
    d->type = type;
    info_string(dev, CL_DEVICE_NAME, d->device_name, sizeof d->device_name);
    info_string(dev, CL_DRIVER_VERSION, d->driver_version, sizeof d->driver_version);
    info_string(dev, CL_DEVICE_VERSION, d->device_version, sizeof d->device_version);

    int emulated = o->fpga_emulation && !*emulation_used && is_pocl(plat_name, plat_vendor);
    if (emulated) {
        *emulation_used = 1;
        d->fpga = 1;
        info.kind = HX_KIND_FPGA;
        info.emulated = 1;
        char name[sizeof d->device_name + 32];
        snprintf(name, sizeof name, "FPGA emulation (PoCL %s)", d->device_name);
        copy_str(info.name, sizeof info.name, name);
    } else {
        if ((type & CL_DEVICE_TYPE_ACCELERATOR) && is_xilinx(plat_name, plat_vendor)) {
            d->fpga = d->fpga_hardware = 1;
            info.kind = HX_KIND_FPGA;
        } else if (type & CL_DEVICE_TYPE_GPU) {
            info.kind = HX_KIND_GPU;
        } else if (type & CL_DEVICE_TYPE_CPU) {
            info.kind = HX_KIND_CPU;
        } else {
            info.kind = HX_KIND_ACCELERATOR;
        }
        copy_str(info.name, sizeof info.name, d->device_name);
    }
    hx_status s = d->fpga ? attach_bitstream(d, emulated) : HX_OK;
    if (s) {
        ocl_device_free(d);
        return s;
    }
    info_string(dev, CL_DEVICE_VENDOR, info.vendor, sizeof info.vendor);
    copy_str(info.platform, sizeof info.platform, plat_name);
    /* "OpenCL 3.0, driver 3.1, PoCL HSTR: ...": the parts that matter
     * first, since the field is short. */
    char version[sizeof d->device_version + sizeof d->driver_version + 16];
    int words = 0;
    const char *rest = d->device_version;
    while (*rest && words < 2)
        words += *rest++ == ' ';
    snprintf(version, sizeof version, "%.*s, driver %s%s%s", (int)(rest - d->device_version - (words == 2)),
             d->device_version, d->driver_version, *rest ? ", " : "", rest);
    copy_str(info.version, sizeof info.version, version);
    info.family = HX_FAMILY_OPENCL;
    info.compute_units = (int)cus;
    info.global_mem_bytes = gmem;
    info.local_mem_bytes = lmem;
    info.unified_memory = unified || (type & CL_DEVICE_TYPE_CPU);
    d->refresh_inputs = info.unified_memory && !(type & CL_DEVICE_TYPE_CPU);
    info.numa_node = device_numa(dev, type, o->topology);

    cl_int err;
    d->context = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    if (err == CL_SUCCESS)
        d->queue = create_queue(d, &err);
    if (err == CL_SUCCESS)
        d->status = clCreateBuffer(d->context, CL_MEM_READ_WRITE, sizeof(cl_uint), NULL, &err);
    if (err != CL_SUCCESS) {
        s = hx_opencl_error(err, "opening OpenCL device '%s'", d->device_name);
        ocl_device_free(d);
        return s;
    }
    s = hx_runtime_add_device(rt, &info, &hx_opencl_ops, d);
    if (s)
        ocl_device_free(d);
    return s;
}

static hx_status ocl_discover(hx_runtime *rt, const hx_discover_options *o)
{
    cl_platform_id plats[MAX_PLATFORMS];
    cl_uint nplat = 0;
    cl_int err = clGetPlatformIDs(MAX_PLATFORMS, plats, &nplat);
    if (err != CL_SUCCESS || nplat == 0) {
        hx_runtime_set_absence(rt, HX_FAMILY_OPENCL, "no OpenCL platform (ICD loader: %s)",
                               err != CL_SUCCESS ? hx_opencl_error_name(err) : "no platform registered");
        return HX_OK;
    }
    if (nplat > MAX_PLATFORMS)
        nplat = MAX_PLATFORMS;
    int added = 0, emulation_used = 0;
    char errors[256] = "", skipped[128] = "";
    for (cl_uint p = 0; p < nplat; p++) {
        char name[256] = "", vendor[256] = "";
        clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, sizeof name - 1, name, NULL);
        clGetPlatformInfo(plats[p], CL_PLATFORM_VENDOR, sizeof vendor - 1, vendor, NULL);
        cl_device_id devs[MAX_DEVICES_PER_PLATFORM];
        cl_uint ndev = 0;
        err = clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, MAX_DEVICES_PER_PLATFORM, devs, &ndev);
        if (err != CL_SUCCESS) {
            if (err != CL_DEVICE_NOT_FOUND && !errors[0])
                snprintf(errors, sizeof errors, "; platform '%.64s': %s", name, hx_opencl_error_name(err));
            continue;
        }
        if (ndev > MAX_DEVICES_PER_PLATFORM)
            ndev = MAX_DEVICES_PER_PLATFORM;
        for (cl_uint i = 0; i < ndev; i++) {
            cl_device_type type = 0;
            clGetDeviceInfo(devs[i], CL_DEVICE_TYPE, sizeof type, &type, NULL);
            int emulate = o->fpga_emulation && !emulation_used && is_pocl(name, vendor);
            if (o->skip_host_cores && (type & CL_DEVICE_TYPE_CPU) && !emulate) {
                /* Not even opened: its context and threads cost memory. */
                if (!skipped[0])
                    info_string(devs[i], CL_DEVICE_NAME, skipped, sizeof skipped);
                continue;
            }
            hx_status s = add_device(rt, o, plats[p], name, vendor, devs[i], &emulation_used);
            /* One device that cannot open must not hide the others. */
            if (s == HX_OK)
                added++;
            else if (!errors[0])
                snprintf(errors, sizeof errors, "; %.200s", hx_last_error());
        }
    }
    if (!added && skipped[0] && !errors[0])
        hx_runtime_set_absence(rt, HX_FAMILY_OPENCL,
                               "'%s' computes on the CPU device's cores, so the default set leaves it out; "
                               "ask for it with devices 'opencl' or HX_FPGA_EMULATION=pocl",
                               skipped);
    else if (!added)
        hx_runtime_set_absence(rt, HX_FAMILY_OPENCL, "no usable OpenCL device on %u platform%s%s", nplat,
                               nplat == 1 ? "" : "s", errors);
    hx_error_clear();
    return HX_OK;
}

hx_status hx_opencl_use_bitstream(hx_device *dev, const char *path)
{
    if (!dev || dev->ops != &hx_opencl_ops || !path)
        return hx_error(HX_ERR_INVALID_ARG, "hx_opencl_use_bitstream: not an OpenCL device, or no path");
    hx_opencl_device *d = dev->impl;
    if (!d->fpga)
        return hx_error(HX_ERR_INVALID_ARG, "hx_opencl_use_bitstream: %s is not an FPGA", d->device_name);
    if (strlen(path) >= sizeof d->xclbin_path)
        return hx_error(HX_ERR_INVALID_ARG, "hx_opencl_use_bitstream: path too long");
    pthread_mutex_lock(&d->lock);
    hx_opencl_program_release_all(d);
    d->fpga_hardware = 1;
    strcpy(d->xclbin_path, path);
    pthread_mutex_unlock(&d->lock);
    return HX_OK;
}

/* "opencl" asks for every OpenCL device, PoCL's on the host's cores too;
 * "fpga" and "gpu" for those kinds (an emulated FPGA is one). */
static const hx_device_selector opencl_selectors[] = {
    {"opencl", -1, 1}, {"fpga", HX_KIND_FPGA, 0}, {"gpu", HX_KIND_GPU, 0}, {NULL, 0, 0}};

const hx_device_ops hx_opencl_ops = {
    .name = "opencl",
    .family = HX_FAMILY_OPENCL,
    .selectors = opencl_selectors,
    .discover = ocl_discover,
    .destroy = ocl_destroy,
    .bind_op = ocl_bind_op,
    .can_run = ocl_can_run,
    .can_run_args = ocl_can_run_args,
    .run = ocl_run,
    .wrap_host = ocl_wrap_host,
    .alloc = ocl_alloc,
    .release = ocl_release,
    .copy_in = ocl_copy_in,
    .copy_out = ocl_copy_out,
    .copy_device = ocl_copy_device,
    .sync_host = ocl_sync_host,
};
