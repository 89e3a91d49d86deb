/* Devices that compute on the same host cores.  The CPU device's team and
 * an OpenCL device that is itself a CPU (PoCL, also when it stands in for
 * an FPGA) run their threads on the same cores: work placed on one slows
 * the other, so they are one resource, not two in parallel. */
#ifndef HX_RUNTIME_SCHED_CORES_H
#define HX_RUNTIME_SCHED_CORES_H

#include <stdint.h>

#include "hetero.h"

/* Whether the device computes on the host's cores. */
int hx_sched_cores_host(const hx_device_info *d);
/* Whether a and b compute on the same host cores (a device shares with
 * itself). */
int hx_sched_cores_shared(const hx_device_info *a, const hx_device_info *b);
/* Bit e set for every device e of the runtime that shares d's cores,
 * d included. */
uint32_t hx_sched_cores_mask(hx_runtime *rt, int d);

#endif
