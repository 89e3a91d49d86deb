/* GELU, tanh form, as ggml's CPU backend evaluates it through its f16
 * table (ops/ops.h, "geglu"); included by the kernels that apply it. */

/* A float rounded to IEEE half precision, to nearest even, as ggml's
 * GGML_FP32_TO_FP16 (for |x| up to 65504, all GELU meets below 10), in
 * integer arithmetic: a half variable would need cl_khr_fp16. */
float hx_f16_round(float x)
{
    if (fabs(x) < 6.103515625e-05f) /* half subnormals: multiples of 2^-24 */
        return rint(x * 16777216.0f) * 5.9604644775390625e-08f;
    const uint u = as_uint(x);
    return as_float((u + 0xFFFu + ((u >> 13) & 1u)) & ~0x1FFFu);
}

/* tanh rounded to float as the C library's tanhf rounds it (correctly,
 * nearly always): below about -5, 1 + tanh cancels to a few ulps of 1,
 * so an OpenCL tanh off by its allowed 2 ulps would give GELU values many
 * times the CPU's (PoCL's tanh(-10.31) is 2 ulps above -1, glibc's is -1).
 * In double where the device has it. */
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
float hx_tanh_rounded(float z) { return (float)tanh((double)z); }
#else
float hx_tanh_rounded(float z) { return tanh(z); }
#endif

/* On the input rounded to f16, the result rounded to f16; x itself from
 * +10, 0 up to -10. */
float hx_gelu_table(float x)
{
    if (x <= -10.0f)
        return 0.0f;
    if (x >= 10.0f)
        return x;
    const float h = hx_f16_round(x);
    const float z = 0.79788456080286535587989211986876f * h * (1.0f + 0.044715f * h * h);
    return hx_f16_round(0.5f * h * (1.0f + hx_tanh_rounded(z)));
}
