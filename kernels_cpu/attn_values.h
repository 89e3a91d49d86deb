/* Attention's sums of value rows, several columns (query rows) at once:
 * each V row is loaded (and converted or dequantized) once for a block of
 * columns whose accumulators stay in registers over all the rows, where a
 * column at a time leaves the adds waiting on each other (one chain per
 * vector of the row) and loads every row once per column.
 *
 * Each step is one fused multiply-add (fmaf), rows in order, so every
 * column gets exactly the bits of a plain fmaf loop over its rows
 * dequantized first (a quantized element is q x d or (q - 8) x d, exact
 * in F32), at every SIMD level and whatever the columns beside it: a
 * token's attention keeps its bits whether it is computed alone or in a
 * prompt.  (A multiply then an add, as the rows' own scaled sums do, took
 * twice the arithmetic: a third of a long prompt's attention.) */
#ifndef HX_KERNELS_CPU_ATTN_VALUES_H
#define HX_KERNELS_CPU_ATTN_VALUES_H

#include <stddef.h>
#include <stdint.h>

#include "kernels_cpu/quant.h"

/* Can hx_attn_values read rows of this type (F32, F16, Q8_0, Q4_0)? */
int hx_attn_values_type_ok(hx_type t);

/* For each column c < cols and i < n:
 *   acc[c * acc_stride + i] += w[c * w_stride + r] * x_r[i]
 * for rows r = 0 .. rows - 1 in turn, row r of type t starting at
 * x + r * x_stride bytes (quantized rows: n a multiple of 32). */
void hx_attn_values(float *acc, size_t acc_stride, const float *w, size_t w_stride, int64_t cols, const void *x,
                    size_t x_stride, hx_type t, int64_t rows, int64_t n);

#endif
