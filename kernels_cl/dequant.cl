/* Weight decoding shared by the kernels that multiply by GGUF rows (the
 * matmul and the experts' halves; included, never built alone): 32 weights
 * of a row at a time into registers, and their dot product with F32
 * activations. */
#include "common.cl"

/* ---- 32 weights of row `row`, block j (elements 32j ..), as 4 float8;
 * F32 and F16 rows may end inside the block: the rest reads as zero. ---- */

void hx_deq32_f32(__global const uchar *row, uint j, uint K, float8 *w)
{
    __global const float *p = (__global const float *)row + j * HX_QK;
    if (j * HX_QK + HX_QK <= K) {
        for (uint i = 0; i < 4; i++)
            w[i] = vload8(i, p);
        return;
    }
    float v[HX_QK];
    for (uint i = 0; i < HX_QK; i++)
        v[i] = j * HX_QK + i < K ? p[i] : 0.0f;
    for (uint i = 0; i < 4; i++)
        w[i] = vload8(i, v);
}

void hx_deq32_f16(__global const uchar *row, uint j, uint K, float8 *w)
{
    __global const half *p = (__global const half *)row + j * HX_QK;
    if (j * HX_QK + HX_QK <= K) {
        for (uint i = 0; i < 4; i++)
            w[i] = vload_half8(i, p);
        return;
    }
    float v[HX_QK];
    for (uint i = 0; i < HX_QK; i++)
        v[i] = j * HX_QK + i < K ? vload_half(i, p) : 0.0f;
    for (uint i = 0; i < 4; i++)
        w[i] = vload8(i, v);
}

void hx_deq32_q8_0(__global const uchar *row, uint j, uint K, float8 *w)
{
    __global const uchar *b = row + j * HX_Q8_0_BYTES;
    const float d = hx_half(b);
    __global const char *q = (__global const char *)(b + 2);
    for (uint i = 0; i < 4; i++)
        w[i] = d * convert_float8(vload8(i, q));
}

void hx_deq32_q4_0(__global const uchar *row, uint j, uint K, float8 *w)
{
    __global const uchar *b = row + j * HX_Q4_0_BYTES;
    const float d = hx_half(b);
    const uchar16 q = vload16(0, b + 2);
    const float16 lo = convert_float16(convert_int16(q & (uchar)15) - 8);
    const float16 hi = convert_float16(convert_int16(q >> (uchar)4) - 8);
    w[0] = d * lo.lo;
    w[1] = d * lo.hi;
    w[2] = d * hi.lo;
    w[3] = d * hi.hi;
}

void hx_deq32_q4_k(__global const uchar *row, uint j, uint K, float8 *w)
{
    __global const uchar *b = row + (j / 8) * HX_Q4_K_BYTES;
    const uint sub = j % 8;
    float sc, m;
    hx_q4_k_scale_min(b + 4, sub, &sc, &m);
    const float d = hx_half(b) * sc, dm = hx_half(b + 2) * m;
    const uchar16 q0 = vload16(0, b + 16 + 32 * (sub / 2)), q1 = vload16(1, b + 16 + 32 * (sub / 2));
    const uchar16 n0 = sub & 1 ? q0 >> (uchar)4 : q0 & (uchar)15;
    const uchar16 n1 = sub & 1 ? q1 >> (uchar)4 : q1 & (uchar)15;
    const float16 f0 = convert_float16(n0), f1 = convert_float16(n1);
    w[0] = d * f0.lo - dm;
    w[1] = d * f0.hi - dm;
    w[2] = d * f1.lo - dm;
    w[3] = d * f1.hi - dm;
}

/* The 32 weights against x[0 .. n), n <= 32 (n < 32 only at a row's end). */
float hx_dot32(const float8 *w, __global const float *x, uint n)
{
    if (n == HX_QK) {
        const float8 s = w[0] * vload8(0, x) + w[1] * vload8(1, x) + w[2] * vload8(2, x) + w[3] * vload8(3, x);
        return dot(s.lo, (float4)(1.0f)) + dot(s.hi, (float4)(1.0f));
    }
    float v[HX_QK];
    for (uint i = 0; i < 4; i++)
        vstore8(w[i], i, v);
    float s = 0.0f;
    for (uint i = 0; i < n; i++)
        s += v[i] * x[i];
    return s;
}
