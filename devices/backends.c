/* The device families, in discovery order: each backend's ops table
 * carries its name, its hx_device_family and the names HX_DEVICES selects
 * it by (hx_device_selector).  The public hx_runtime_open hands the list
 * to the runtime, and hx_device_family_str reads the names from it: the
 * runtime names no family.  A new device family is a new file in devices/
 * (its ops table) and one line here. */
#include "runtime/device.h"
#include "runtime/error.h"

extern const hx_device_ops hx_cpu_ops;
extern const hx_device_ops hx_opencl_ops;
extern const hx_device_ops hx_cuda_ops;

static const hx_device_ops *const backends[] = {&hx_cpu_ops, &hx_opencl_ops, &hx_cuda_ops, NULL};

const char *hx_device_family_str(hx_device_family f)
{
    for (int b = 0; backends[b]; b++)
        if (backends[b]->family == f)
            return backends[b]->name;
    return "unknown";
}

hx_status hx_runtime_open(hx_runtime **out, const hx_runtime_options *opts)
{
    hx_api_enter();
    return hx_api_leave(hx_runtime_open_with(out, opts, backends));
}
