/* The device backends, in discovery order.  A new device family is a new
 * file in devices/ and one line here. */
#include "runtime/device.h"

extern const hx_device_ops hx_cpu_ops;
extern const hx_device_ops hx_opencl_ops;
extern const hx_device_ops hx_cuda_ops;

const hx_device_ops *const *hx_device_backends(void)
{
    static const hx_device_ops *const list[] = {&hx_cpu_ops, &hx_opencl_ops, &hx_cuda_ops, NULL};
    return list;
}
