/* OpenCL launches of the built-in ops (ops/op_list.h): each checks its
 * arguments against the buffers' sizes, picks the kernel of
 * kernels_cl/<op>.cl and its geometry.  They return 0 or a negative
 * hx_status with the detail in hx_last_error(). */
#ifndef HX_DEVICES_CL_LAUNCH_H
#define HX_DEVICES_CL_LAUNCH_H

#include "hetero.h"

int hx_cl_launch_vector_add(const void *args, const size_t *sizes, hx_cl_launch *l);
int hx_cl_launch_gemm_f32(const void *args, const size_t *sizes, hx_cl_launch *l);
int hx_cl_launch_get_rows(const void *args, const size_t *sizes, hx_cl_launch *l);
int hx_cl_launch_rmsnorm(const void *args, const size_t *sizes, hx_cl_launch *l);
int hx_cl_launch_matmul(const void *args, const size_t *sizes, hx_cl_launch *l);
/* Refuses: the OpenCL device runs matmul_multi as its parts, each through
 * hx_cl_launch_matmul (devices/opencl.c). */
int hx_cl_launch_matmul_multi(const void *args, const size_t *sizes, hx_cl_launch *l);
int hx_cl_launch_rope(const void *args, const size_t *sizes, hx_cl_launch *l);
int hx_cl_launch_kv_store(const void *args, const size_t *sizes, hx_cl_launch *l);
int hx_cl_launch_attention(const void *args, const size_t *sizes, hx_cl_launch *l);
int hx_cl_launch_attention_part(const void *args, const size_t *sizes, hx_cl_launch *l);
int hx_cl_launch_attn_merge(const void *args, const size_t *sizes, hx_cl_launch *l);
int hx_cl_launch_add(const void *args, const size_t *sizes, hx_cl_launch *l);
int hx_cl_launch_swiglu(const void *args, const size_t *sizes, hx_cl_launch *l);
int hx_cl_launch_scale(const void *args, const size_t *sizes, hx_cl_launch *l);
int hx_cl_launch_geglu(const void *args, const size_t *sizes, hx_cl_launch *l);
int hx_cl_launch_add_gated(const void *args, const size_t *sizes, hx_cl_launch *l);
int hx_cl_launch_moe_route(const void *args, const size_t *sizes, hx_cl_launch *l);
int hx_cl_launch_moe_gate_up(const void *args, const size_t *sizes, hx_cl_launch *l);
int hx_cl_launch_moe_down(const void *args, const size_t *sizes, hx_cl_launch *l);

/* Largest head dimension the attention kernels hold in local memory:
 * DH_MAX in kernels_cl/attention.cl, and up to 256 its _dh256 kernels
 * (PART_DH_MAX in kernels_cl/attention_part.cl). */
#define HX_CL_ATTENTION_DH_NARROW 128
#define HX_CL_ATTENTION_DH_MAX 256

#endif
