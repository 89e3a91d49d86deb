/* The transformer layer's codelets (ops/ops.h): CPU functions,
 * OpenCL programs and launches (kernels_cl/<program>.cl, devices/cl_launch.c)
 * and costs.  CUDA kernels are attached by name in the plugin. */
#include "devices/cl_launch.h"
#include "devices/codelets_ops.h"
#include "kernels_cpu/cpu_kernels.h"
#include "ops/types.h"
#include "ops/ops.h"

static double wbytes(uint32_t type, uint64_t rows, uint64_t cols)
{
    size_t r = hx_type_row_size((hx_type)type, cols);
    return (double)r * (double)rows;
}

/* Quantized weights are multiplied as integers against quantized
 * activations (llama.cpp's MMQ/vec_dot path); F16 ones in half precision. */
static hx_precision weight_precision(uint32_t type)
{
    if (type == HX_TYPE_F32)
        return HX_PREC_F32;
    if (type == HX_TYPE_F16 || type == HX_TYPE_BF16)
        return HX_PREC_F16;
    return HX_PREC_INT8;
}

static hx_precision matmul_precision(const void *p, const size_t *s)
{
    (void)s;
    return weight_precision(((const hx_op_matmul *)p)->wtype);
}

static hx_precision attention_precision(const void *p, const size_t *s)
{
    (void)s;
    return weight_precision(((const hx_op_attention *)p)->kv_type);
}

static double get_rows_flops(const void *p, const size_t *s) { return 0; }
static double get_rows_bytes(const void *p, const size_t *s)
{
    const hx_op_get_rows *a = p;
    return wbytes(a->type, a->T, a->D) + 4.0 * a->T * a->D;
}

static double rmsnorm_flops(const void *p, const size_t *s)
{
    const hx_op_rmsnorm *a = p;
    return 4.0 * a->T * a->D;
}
static double rmsnorm_bytes(const void *p, const size_t *s)
{
    const hx_op_rmsnorm *a = p;
    return 8.0 * a->T * a->D + 4.0 * a->D;
}

static double matmul_flops(const void *p, const size_t *s)
{
    const hx_op_matmul *a = p;
    return 2.0 * a->T * a->N * a->K;
}
static double matmul_bytes(const void *p, const size_t *s)
{
    const hx_op_matmul *a = p;
    return wbytes(a->wtype, a->N, a->K) + 4.0 * a->T * (a->K + a->N);
}

static double rope_flops(const void *p, const size_t *s)
{
    const hx_op_rope *a = p;
    return 6.0 * a->T * a->H * a->n_rot / 2;
}
static double rope_bytes(const void *p, const size_t *s)
{
    const hx_op_rope *a = p;
    return 8.0 * a->T * a->H * a->Dh;
}

static double kv_store_flops(const void *p, const size_t *s) { return 0; }
static double kv_store_bytes(const void *p, const size_t *s)
{
    const hx_op_kv_store *a = p;
    uint64_t row = (uint64_t)a->Hkv * a->Dh;
    return 2.0 * a->kv.T * (4.0 * row + wbytes(a->kv_type, 1, row));
}

/* Attention's cost grows with context; positions are only in the meta
 * buffer, so the estimate assumes the context the block table can hold. */
static double attention_flops(const void *p, const size_t *s)
{
    const hx_op_attention *a = p;
    double ctx = (double)a->kv.max_blocks * a->kv.block_size;
    return 4.0 * a->kv.T * a->Hq * a->Dh * ctx;
}
static double attention_bytes(const void *p, const size_t *s)
{
    const hx_op_attention *a = p;
    double ctx = (double)a->kv.max_blocks * a->kv.block_size * a->kv.S;
    return 2.0 * ctx * wbytes(a->kv_type, 1, (uint64_t)a->Hkv * a->Dh) + 8.0 * a->kv.T * a->Hq * a->Dh;
}

static double add_flops(const void *p, const size_t *s) { return (double)((const hx_op_add *)p)->n; }
static double add_bytes(const void *p, const size_t *s) { return 12.0 * ((const hx_op_add *)p)->n; }
static double swiglu_flops(const void *p, const size_t *s) { return 6.0 * ((const hx_op_swiglu *)p)->n; }
static double swiglu_bytes(const void *p, const size_t *s) { return 12.0 * ((const hx_op_swiglu *)p)->n; }

const hx_codelet hx_codelets_ops[] = {
    {.name = "get_rows",
     .cpu = hx_cpu_get_rows,
     .cl_program = "get_rows",
     .cl_launch = hx_cl_launch_get_rows,
     .flops = get_rows_flops,
     .bytes = get_rows_bytes},
    {.name = "rmsnorm",
     .cpu = hx_cpu_rmsnorm,
     .cl_program = "rmsnorm",
     .cl_launch = hx_cl_launch_rmsnorm,
     .flops = rmsnorm_flops,
     .bytes = rmsnorm_bytes},
    {.name = "matmul",
     .cpu = hx_cpu_matmul,
     .cpu_prepare = hx_cpu_matmul_prepare,
     .cpu_scratch = hx_cpu_matmul_scratch,
     .cl_program = "matmul",
     .cl_launch = hx_cl_launch_matmul,
     .flops = matmul_flops,
     .bytes = matmul_bytes,
     .precision = matmul_precision},
    {.name = "rope",
     .cpu = hx_cpu_rope,
     .cl_program = "rope",
     .cl_launch = hx_cl_launch_rope,
     .flops = rope_flops,
     .bytes = rope_bytes},
    {.name = "kv_store",
     .cpu = hx_cpu_kv_store,
     .cl_program = "kv_store",
     .cl_launch = hx_cl_launch_kv_store,
     .flops = kv_store_flops,
     .bytes = kv_store_bytes},
    {.name = "attention",
     .cpu = hx_cpu_attention,
     .cpu_scratch = hx_cpu_attention_scratch,
     .cl_program = "attention",
     .cl_launch = hx_cl_launch_attention,
     .flops = attention_flops,
     .bytes = attention_bytes,
     .precision = attention_precision},
    {.name = "add",
     .cpu = hx_cpu_add,
     .cl_program = "elementwise",
     .cl_launch = hx_cl_launch_add,
     .flops = add_flops,
     .bytes = add_bytes},
    {.name = "swiglu",
     .cpu = hx_cpu_swiglu,
     .cl_program = "elementwise",
     .cl_launch = hx_cl_launch_swiglu,
     .flops = swiglu_flops,
     .bytes = swiglu_bytes},
    {.name = NULL},
};
