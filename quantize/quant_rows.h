/* Rows of a matrix into another type, with importance weights where the
 * type takes them, and the weighted squared error that costs. */
#ifndef HX_QUANTIZE_QUANT_ROWS_H
#define HX_QUANTIZE_QUANT_ROWS_H

#include <stdint.h>

#include "hetero.h"
#include "ops/types.h"

/* A matrix as the quantizer sees it: `rows` rows of `ne0` floats; rows
 * [e*rows_per_slice, (e+1)*rows_per_slice) use weights w + e*ne0 (an
 * importance matrix holds one vector per expert), w NULL for none. */
typedef struct {
    const float *x;
    uint64_t rows, ne0, rows_per_slice;
    const float *w;
} hx_quant_matrix;

/* Writes m's rows in type `to` at `out` (rows * hx_type_row_size(to, ne0)
 * bytes): the type's weighted quantizer (ops->quantize_weighted) when
 * there are weights and it has one, else its plain quantize_row, as
 * llama.cpp's ggml_quantize_chunk does. */
hx_status hx_quant_rows(hx_type to, const hx_quant_matrix *m, void *out);

/* *err = sum over rows r and columns j of w[j] * (x[r][j] - q[r][j])^2,
 * q the row written in `to` and read back (w[j] = 1 without weights).
 * max_rows > 0 measures that many rows evenly spaced and scales the sum
 * to all rows (an estimate); 0 measures every row. */
hx_status hx_quant_weighted_error(hx_type to, const hx_quant_matrix *m, uint64_t max_rows, double *err);

#endif
