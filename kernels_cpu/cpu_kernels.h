/* CPU implementations of the built-in codelets. */
#ifndef HX_KERNELS_CPU_CPU_KERNELS_H
#define HX_KERNELS_CPU_CPU_KERNELS_H

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

/* The transformer layer's operations (ops/ops.h). */
int hx_cpu_get_rows(const hx_cpu_call *c);
int hx_cpu_rmsnorm(const hx_cpu_call *c);
int hx_cpu_matmul_prepare(const hx_cpu_call *c);
uint64_t hx_cpu_matmul_prepare_elems(const void *args); /* activations the prepare phase converts */
int hx_cpu_matmul(const hx_cpu_call *c);
size_t hx_cpu_matmul_scratch(const void *args, const size_t *sizes, int nth);
int hx_cpu_matmul_multi_prepare(const hx_cpu_call *c);
uint64_t hx_cpu_matmul_multi_prepare_elems(const void *args);
int hx_cpu_matmul_multi(const hx_cpu_call *c);
size_t hx_cpu_matmul_multi_scratch(const void *args, const size_t *sizes, int nth);
int hx_cpu_rope(const hx_cpu_call *c);
/* RoPE's inverse frequencies base^(-2i/n_rot) / factors[i] (factors may be
 * NULL) for i < n_rot/2: what rope and kv_shift rotate by. */
void hx_cpu_rope_inv_freq(double *inv_freq, uint32_t n_rot, float base, const float *factors);
int hx_cpu_kv_store(const hx_cpu_call *c);
int hx_cpu_attention(const hx_cpu_call *c);
/* Split attention's first phase (a decode step's chunks spread over the team). */
int hx_cpu_attention_prepare(const hx_cpu_call *c);
size_t hx_cpu_attention_scratch(const void *args, const size_t *sizes, int nth);
int hx_cpu_attention_part(const hx_cpu_call *c);
int hx_cpu_attention_part_prepare(const hx_cpu_call *c);
size_t hx_cpu_attention_part_scratch(const void *args, const size_t *sizes, int nth);
int hx_cpu_attn_merge(const hx_cpu_call *c);
int hx_cpu_add(const hx_cpu_call *c);
int hx_cpu_swiglu(const hx_cpu_call *c);
int hx_cpu_kv_shift(const hx_cpu_call *c);
size_t hx_cpu_kv_shift_scratch(const void *args, const size_t *sizes, int nth);
int hx_cpu_scale(const hx_cpu_call *c);
int hx_cpu_geglu(const hx_cpu_call *c);
int hx_cpu_add_gated(const hx_cpu_call *c);
int hx_cpu_moe_route(const hx_cpu_call *c);
int hx_cpu_moe_gate_up_prepare(const hx_cpu_call *c);
int hx_cpu_moe_gate_up(const hx_cpu_call *c);
size_t hx_cpu_moe_gate_up_scratch(const void *args, const size_t *sizes, int nth);
uint64_t hx_cpu_moe_gate_up_prepare_elems(const void *args);
int hx_cpu_moe_down_prepare(const hx_cpu_call *c);
int hx_cpu_moe_down(const hx_cpu_call *c);
size_t hx_cpu_moe_down_scratch(const void *args, const size_t *sizes, int nth);
uint64_t hx_cpu_moe_down_prepare_elems(const void *args);

#endif
