/* Gemma's and the shared expert's element-wise ops (ops/ops.h): "scale"
 * (with its optional soft-cap), "geglu" and "add_gated".  Kept apart from
 * elementwise.cl because a kernel belongs to the codelet its name starts
 * with: "add" would claim add_gated's kernel there. */

#include "gelu.cl"

#define ACT_WG 64

__kernel __attribute__((reqd_work_group_size(ACT_WG, 1, 1)))
void scale_f32(__global float *x, const ulong n, const float scale, const float cap)
{
    const size_t i = get_global_id(0);
    if (i >= n)
        return;
    const float v = x[i] * scale;
    x[i] = cap > 0.0f ? tanh(v * (1.0f / cap)) * cap : v;
}

__kernel __attribute__((reqd_work_group_size(ACT_WG, 1, 1)))
void geglu_f32(__global const float *gate, __global const float *up, __global float *out, const ulong n)
{
    const size_t i = get_global_id(0);
    if (i < n)
        out[i] = hx_gelu_table(gate[i]) * up[i];
}

/* x[t] += y[t] * sigmoid(g[t]): the sigmoid, the product, then the sum,
 * as llama.cpp's steps. */
__kernel __attribute__((reqd_work_group_size(ACT_WG, 1, 1)))
void add_gated_f32(__global float *x, __global const float *y, __global const float *g, const uint T, const uint D)
{
    const size_t i = get_global_id(0);
    if (i >= (ulong)T * D)
        return;
    const float s = 1.0f / (1.0f + exp(-g[i / D]));
    const float v = y[i] * s;
    x[i] += v;
}
