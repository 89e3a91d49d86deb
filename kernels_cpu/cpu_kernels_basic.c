/* CPU kernels of the basic codelets: vector add, F32 GEMM. */
#include "kernels_cpu/cpu_kernels.h"

int hx_cpu_vector_add(const hx_cpu_call *c)
{
    const hx_args_vector_add *a = c->args;
    const float *x = c->buffers[0], *y = c->buffers[1];
    float *z = c->buffers[2];
    uint64_t lo, hi;
    hx_cpu_split(a->n, c->ith, c->nth, &lo, &hi);
    for (uint64_t i = lo; i < hi; i++)
        z[i] = x[i] + y[i];
    return 0;
}

/* Each thread takes a slice of B's rows (output columns); a 4-column
 * block reuses each loaded A element four times. */
int hx_cpu_gemm_f32(const hx_cpu_call *c)
{
    const hx_args_gemm_f32 *g = c->args;
    const float *A = c->buffers[0], *B = c->buffers[1];
    float *C = c->buffers[2];
    const uint64_t K = g->K;
    uint64_t lo, hi;
    hx_cpu_split(g->N, c->ith, c->nth, &lo, &hi);
    for (uint32_t m = 0; m < g->M; m++) {
        const float *a = A + m * K;
        uint64_t n = lo;
        for (; n + 4 <= hi; n += 4) {
            const float *b0 = B + n * K, *b1 = b0 + K, *b2 = b1 + K, *b3 = b2 + K;
            float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            for (uint64_t k = 0; k < K; k++) {
                s0 += a[k] * b0[k];
                s1 += a[k] * b1[k];
                s2 += a[k] * b2[k];
                s3 += a[k] * b3[k];
            }
            float *out = C + (uint64_t)m * g->N + n;
            out[0] = s0, out[1] = s1, out[2] = s2, out[3] = s3;
        }
        for (; n < hi; n++) {
            const float *b = B + n * K;
            float s = 0;
            for (uint64_t k = 0; k < K; k++)
                s += a[k] * b[k];
            C[(uint64_t)m * g->N + n] = s;
        }
    }
    return 0;
}
