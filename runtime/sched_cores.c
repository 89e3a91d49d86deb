/* Which devices share host cores (see sched_cores.h). */
#include "runtime/sched_cores.h"

#include "runtime/device.h"
#include "runtime/runtime.h"

int hx_sched_cores_host(const hx_device_info *d)
{
    if (d->family == HX_FAMILY_CPU)
        return 1;
    /* An emulated FPGA is PoCL on host memory; a PoCL device driving a GPU
     * would not be unified with the host. */
    return d->family == HX_FAMILY_OPENCL && (d->kind == HX_KIND_CPU || (d->emulated && d->unified_memory));
}

int hx_sched_cores_shared(const hx_device_info *a, const hx_device_info *b)
{
    if (a->index == b->index)
        return 1;
    if (!hx_sched_cores_host(a) || !hx_sched_cores_host(b))
        return 0;
    /* Unknown placement (-1): an OpenCL runtime's threads are not pinned,
     * so they may run on any core. */
    return a->numa_node < 0 || b->numa_node < 0 || a->numa_node == b->numa_node;
}

uint32_t hx_sched_cores_mask(hx_runtime *rt, int d)
{
    uint32_t m = 0;
    for (int e = 0; e < rt->ndevices && e < 32; e++)
        if (hx_sched_cores_shared(&rt->devices[d]->info, &rt->devices[e]->info))
            m |= 1u << e;
    return m;
}
