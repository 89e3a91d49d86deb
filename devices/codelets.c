/* The built-in codelets: each names its CPU function, its OpenCL kernel
 * (kernels_cl/<program>.cl) with the launch geometry, and its cost. */
#include <string.h>

#include "devices/codelets_ops.h"
#include "kernels_cpu/cpu_kernels.h"

static int vector_add_cl(const void *args, const size_t *sizes, hx_cl_launch *l)
{
    const hx_args_vector_add *a = args;
    *l = (hx_cl_launch){.kernel = "vector_add", .work_dim = 1, .global = {a->n}, .nargs = 4};
    for (int i = 0; i < 3; i++)
        l->arg[i].buffer = i;
    l->arg[3].buffer = -1;
    l->arg[3].size = sizeof(uint64_t);
    l->arg[3].value = &a->n;
    return 0;
}

static double vector_add_flops(const void *args, const size_t *sizes)
{
    return (double)((const hx_args_vector_add *)args)->n;
}

static double vector_add_bytes(const void *args, const size_t *sizes)
{
    return 12.0 * (double)((const hx_args_vector_add *)args)->n;
}

static int gemm_f32_cl(const void *args, const size_t *sizes, hx_cl_launch *l)
{
    const hx_args_gemm_f32 *g = args;
    size_t gx = (g->N + 15) / 16 * 16, gy = (g->M + 15) / 16 * 16;
    *l = (hx_cl_launch){.kernel = "gemm_f32", .work_dim = 2, .global = {gx, gy}, .local = {16, 16}, .nargs = 6};
    for (int i = 0; i < 3; i++)
        l->arg[i].buffer = i;
    const uint32_t *dims[3] = {&g->M, &g->N, &g->K};
    for (int i = 0; i < 3; i++) {
        l->arg[3 + i].buffer = -1;
        l->arg[3 + i].size = sizeof(uint32_t);
        l->arg[3 + i].value = dims[i];
    }
    return 0;
}

static double gemm_f32_flops(const void *args, const size_t *sizes)
{
    const hx_args_gemm_f32 *g = args;
    return 2.0 * g->M * g->N * g->K;
}

static double gemm_f32_bytes(const void *args, const size_t *sizes)
{
    const hx_args_gemm_f32 *g = args;
    return 4.0 * ((double)g->M * g->K + (double)g->N * g->K + (double)g->M * g->N);
}

static const hx_codelet builtin[] = {
    {.name = "vector_add", .cpu = hx_cpu_vector_add, .cl_program = "basic", .cl_launch = vector_add_cl,
     .flops = vector_add_flops, .bytes = vector_add_bytes},
    {.name = "gemm_f32", .cpu = hx_cpu_gemm_f32, .cl_program = "basic", .cl_launch = gemm_f32_cl,
     .flops = gemm_f32_flops, .bytes = gemm_f32_bytes},
};

const hx_codelet *hx_codelet_builtin(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++)
        if (!strcmp(builtin[i].name, name))
            return &builtin[i];
    for (const hx_codelet *c = hx_codelets_ops; c->name; c++)
        if (!strcmp(c->name, name))
            return c;
    return NULL;
}
