/* Element-wise ops of the layer: the residual add and the SwiGLU gate. */

#define EW_WG 64

__kernel __attribute__((reqd_work_group_size(EW_WG, 1, 1)))
void add_f32(__global float *x, __global const float *y, const ulong n)
{
    const size_t i = get_global_id(0);
    if (i < n)
        x[i] += y[i];
}

__kernel __attribute__((reqd_work_group_size(EW_WG, 1, 1)))
void swiglu_f32(__global const float *gate, __global const float *up, __global float *out, const ulong n)
{
    const size_t i = get_global_id(0);
    if (i < n) {
        const float g = gate[i];
        out[i] = g / (1.0f + exp(-g)) * up[i];
    }
}
