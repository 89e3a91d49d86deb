/* One weight's matmul cut into units of output rows, so that "matmul" and
 * "matmul_multi" share the loops: a unit is a group of four rows (the
 * GEMM tile's height; the last one may be short) or, over a repacked
 * copy, one group of HX_REPACK_ROWS rows.  Each output is computed by the
 * same kernel whatever unit range holds it, so a row's bits do not depend
 * on how the rows are split among threads or tasks. */
#ifndef HX_KERNELS_CPU_MATMUL_ROWS_H
#define HX_KERNELS_CPU_MATMUL_ROWS_H

#include "kernels_cpu/quant.h"
#include "kernels_cpu/repack.h"
#include "ops/ops.h"

typedef struct {
    const hx_quant_ops *q;
    const hx_repacked *r; /* the weights' repacked copy, or NULL */
    const uint8_t *W;
    size_t wrow;
    const uint8_t *xq; /* the T activation rows, quantized to q->vec_dot_type */
    size_t arow;
    float *y;
    const float *bias; /* NULL without */
    uint32_t T, N, K;
    /* This share's room for a block of weight rows converted to F32, where
     * the type's prompt tiles run faster that way (hx_quant_convert_first),
     * hx_matmul_convert_bytes long; NULL: rows as stored. */
    float *conv;
} hx_matmul_rows;

/* Bytes of one activation row quantized to the weight type's dot partner
 * (0 where the type has none). */
size_t hx_matmul_act_row(uint32_t wtype, uint32_t K);

/* 1 where the dot partner is F32 (F32, F16 and BF16 weights): the kernels
 * then read the input rows where they are, with no copy made first. */
int hx_matmul_reads_input(uint32_t wtype);

/* Bytes of the per-share room `conv` for T activation rows against
 * weights of type wtype, K wide; 0 where the rows are read as stored. */
size_t hx_matmul_convert_bytes(uint32_t wtype, uint32_t K, uint32_t T);

/* Fills *p for weight W (wbytes long, with the buffer's CPU layout) of
 * shape `a`, with no `conv` room; 0, HX_ERR_UNSUPPORTED or HX_ERR_RANGE. */
int hx_matmul_rows_init(hx_matmul_rows *p, const hx_op_matmul *a, const void *W, size_t wbytes,
                        const void *layout, const void *xq, float *y, const float *bias);

static inline uint64_t hx_matmul_rows_units(const hx_matmul_rows *p)
{
    return p->r ? (p->N + HX_REPACK_ROWS - 1) / HX_REPACK_ROWS : (p->N + 3) / 4;
}

/* Computes the outputs of units [u0, u1) for every token. */
void hx_matmul_rows_run(const hx_matmul_rows *p, uint64_t u0, uint64_t u1);

#endif
