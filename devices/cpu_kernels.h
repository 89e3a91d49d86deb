/* CPU implementations of the built-in codelets. */
#ifndef HX_DEVICES_CPU_KERNELS_H
#define HX_DEVICES_CPU_KERNELS_H

#include "hetero.h"

/* Splits [0, n) among nth threads: this thread's [*lo, *hi). */
static inline void hx_cpu_split(uint64_t n, int ith, int nth, uint64_t *lo, uint64_t *hi)
{
    uint64_t per = (n + (uint64_t)nth - 1) / (uint64_t)nth;
    *lo = per * (uint64_t)ith < n ? per * (uint64_t)ith : n;
    *hi = *lo + per < n ? *lo + per : n;
}

int hx_cpu_vector_add(const hx_cpu_call *c);
int hx_cpu_gemm_f32(const hx_cpu_call *c);

#endif
