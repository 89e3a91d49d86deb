/* Cost of the layer ops (runtime/ops.h) for performance models: floating-
 * point operations and bytes moved, from the argument block alone. */
#ifndef HX_DEVICES_OP_COST_H
#define HX_DEVICES_OP_COST_H

#include <stddef.h>

double hx_op_cost_get_rows_flops(const void *args, const size_t *sizes);
double hx_op_cost_get_rows_bytes(const void *args, const size_t *sizes);
double hx_op_cost_rmsnorm_flops(const void *args, const size_t *sizes);
double hx_op_cost_rmsnorm_bytes(const void *args, const size_t *sizes);
double hx_op_cost_matmul_flops(const void *args, const size_t *sizes);
double hx_op_cost_matmul_bytes(const void *args, const size_t *sizes);
double hx_op_cost_rope_flops(const void *args, const size_t *sizes);
double hx_op_cost_rope_bytes(const void *args, const size_t *sizes);
double hx_op_cost_kv_store_flops(const void *args, const size_t *sizes);
double hx_op_cost_kv_store_bytes(const void *args, const size_t *sizes);
double hx_op_cost_attention_flops(const void *args, const size_t *sizes);
double hx_op_cost_attention_bytes(const void *args, const size_t *sizes);
double hx_op_cost_add_flops(const void *args, const size_t *sizes);
double hx_op_cost_add_bytes(const void *args, const size_t *sizes);
double hx_op_cost_swiglu_flops(const void *args, const size_t *sizes);
double hx_op_cost_swiglu_bytes(const void *args, const size_t *sizes);

#endif
