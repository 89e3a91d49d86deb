/* Plain scalar references of the layer ops (ops/ops.h), in double, for
 * checking every device's kernels.  Block decoding follows the GGUF spec;
 * nothing here is shared with the kernels under test. */
#ifndef HX_TESTS_REF_OPS_H
#define HX_TESTS_REF_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "ops/ops.h"

enum {
    HX_REF_F32 = 0,
    HX_REF_F16 = 1,
    HX_REF_Q4_0 = 2,
    HX_REF_Q8_0 = 8,
    HX_REF_Q2_K = 10,
    HX_REF_Q3_K = 11,
    HX_REF_Q4_K = 12,
    HX_REF_IQ4_NL = 20,
    HX_REF_IQ4_XS = 23
};

double hx_ref_f16_to_f64(uint16_t h);
uint16_t hx_ref_f32_to_f16(float f); /* round to nearest even */

/* Elements per block and bytes per block of a type; 0 if unknown. */
uint32_t hx_ref_block(uint32_t type);
uint32_t hx_ref_block_bytes(uint32_t type);
size_t hx_ref_row_bytes(uint32_t type, uint32_t n);
/* Decodes n elements (a whole number of blocks) of a row. */
void hx_ref_dequantize(uint32_t type, const void *row, double *out, uint32_t n);
/* Q4_0 as the KV cache stores keys or (`values`) values: each block's
 * scale fitted by weighted least squares (hx_quant_kv_quantizer),
 * written from the definition. */
void hx_ref_quantize_q4_0_kv(const float *x, uint8_t *out, uint32_t n, int values);
/* Q8_0 as the KV cache stores keys and values: the same kind of fit,
 * every element weighed alike (ops/kv_fit.h). */
void hx_ref_quantize_q8_0_kv(const float *x, uint8_t *out, uint32_t n);
/* Fills a row of n elements of `type` with random but valid encodings. */
void hx_ref_random_row(uint32_t type, void *row, uint32_t n, unsigned *seed);
float hx_ref_uniform(unsigned *seed); /* in [-1, 1) */

void hx_ref_get_rows(const hx_op_get_rows *a, const void *table, size_t table_bytes, const int32_t *ids,
                     double *out);
void hx_ref_rmsnorm(const hx_op_rmsnorm *a, const float *x, const float *w, double *y);
void hx_ref_matmul(const hx_op_matmul *a, const void *W, const float *x, const float *bias, double *y);
/* factors: n_rot/2 floats, read when a->has_factors. */
void hx_ref_rope(const hx_op_rope *a, const float *x, const int32_t *pos, const float *factors, double *y);
/* x (n values) rotated by the orthonormal Walsh-Hadamard matrix of width w
 * group by group (ops/ops.h's rot_k / rot_v; w = 0: unchanged). */
void hx_ref_hadamard(double *x, uint32_t n, uint32_t w);
/* Writes the batch's rows into the caches (n_slots slots each); center
 * ([Hkv][Dh]) is read when a->center_k. */
void hx_ref_kv_store(const hx_op_kv_store *a, const float *k, const float *v, uint8_t *kc, uint8_t *vc,
                     const int32_t *meta, uint64_t n_slots, const float *center);
void hx_ref_attention(const hx_op_attention *a, const float *q, const uint8_t *kc, const uint8_t *vc,
                      const int32_t *meta, double *out);
/* One part (ops/ops.h): out as attention's, stats [T][Hq][2] (max, sum). */
void hx_ref_attention_part(const hx_op_attention_part *a, const float *q, const uint8_t *kc, const uint8_t *vc,
                           const int32_t *meta, double *out, double *stats);
/* kv_shift over caches of whole rows: moves are (source, destination)
 * slots; center ([Hkv][Dh]) is read when a->center_k. */
void hx_ref_kv_shift(const hx_op_kv_shift *a, uint8_t *kc, uint8_t *vc, const int32_t *moves, const float *factors,
                     const float *center);
void hx_ref_add(uint64_t n, const float *x, const float *y, double *out); /* vector_add too */
/* gemm_f32 (hetero.h): C[m][n] = sum_k A[m][k] * B[n][k]. */
void hx_ref_gemm_f32(uint32_t M, uint32_t N, uint32_t K, const float *A, const float *B, double *C);
void hx_ref_swiglu(uint64_t n, const float *gate, const float *up, double *out);

/* Normalized mean squared error sum((got - ref)^2) / sum(ref^2); infinity
 * when `got` holds a NaN or infinity. */
double hx_ref_nmse(const float *got, const double *ref, size_t n);

#endif
