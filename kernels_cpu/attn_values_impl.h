/* Each level's kernel behind kernels_cpu/attn_values.h. */
#ifndef HX_KERNELS_CPU_ATTN_VALUES_IMPL_H
#define HX_KERNELS_CPU_ATTN_VALUES_IMPL_H

#include "kernels_cpu/attn_values.h"

typedef void (*hx_attn_values_fn)(float *acc, size_t acc_stride, const float *w, size_t w_stride, int64_t cols,
                                  const void *x, size_t x_stride, hx_type t, int64_t rows, int64_t n);

void hx_attn_values_avx2(float *acc, size_t acc_stride, const float *w, size_t w_stride, int64_t cols,
                         const void *x, size_t x_stride, hx_type t, int64_t rows, int64_t n);
void hx_attn_values_avx512(float *acc, size_t acc_stride, const float *w, size_t w_stride, int64_t cols,
                           const void *x, size_t x_stride, hx_type t, int64_t rows, int64_t n);

#endif
