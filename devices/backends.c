/* The device backends, in discovery order, and the public
 * hx_runtime_open that hands them to the runtime: the runtime names no
 * backend.  A new device family is a new file in devices/ and one line
 * here. */
#include "runtime/device.h"
#include "runtime/error.h"

extern const hx_device_ops hx_cpu_ops;
extern const hx_device_ops hx_opencl_ops;
extern const hx_device_ops hx_cuda_ops;

static const hx_device_ops *const backends[] = {&hx_cpu_ops, &hx_opencl_ops, &hx_cuda_ops, NULL};

hx_status hx_runtime_open(hx_runtime **out, const hx_runtime_options *opts)
{
    hx_api_enter();
    return hx_api_leave(hx_runtime_open_with(out, opts, backends));
}
