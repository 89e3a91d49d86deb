/* Cost of the layer ops for performance models.  Sizes of weights and
 * caches come from the buffers (their types are packed), the rest from the
 * arguments.  Attention cannot see the positions (they live in the meta
 * buffer), so it is costed at the full context its block tables allow. */
#include "devices/op_cost.h"
#include "runtime/ops.h"

double hx_op_cost_get_rows_flops(const void *args, const size_t *sizes)
{
    const hx_op_get_rows *a = args;
    return (double)a->T * a->D;
}

double hx_op_cost_get_rows_bytes(const void *args, const size_t *sizes)
{
    const hx_op_get_rows *a = args;
    return 8.0 * a->T * a->D; /* a dequantized row read, one written */
}

double hx_op_cost_rmsnorm_flops(const void *args, const size_t *sizes)
{
    const hx_op_rmsnorm *a = args;
    return 4.0 * a->T * a->D;
}

double hx_op_cost_rmsnorm_bytes(const void *args, const size_t *sizes)
{
    const hx_op_rmsnorm *a = args;
    return 8.0 * a->T * a->D + 4.0 * a->D;
}

double hx_op_cost_matmul_flops(const void *args, const size_t *sizes)
{
    const hx_op_matmul *a = args;
    return 2.0 * a->T * a->N * (double)a->K;
}

double hx_op_cost_matmul_bytes(const void *args, const size_t *sizes)
{
    const hx_op_matmul *a = args;
    return (double)sizes[0] + 4.0 * a->T * ((double)a->K + a->N);
}

double hx_op_cost_rope_flops(const void *args, const size_t *sizes)
{
    const hx_op_rope *a = args;
    return 6.0 * a->T * a->H * (double)(a->n_rot / 2);
}

double hx_op_cost_rope_bytes(const void *args, const size_t *sizes)
{
    const hx_op_rope *a = args;
    return 8.0 * a->T * a->H * (double)a->n_rot + 4.0 * a->T;
}

double hx_op_cost_kv_store_flops(const void *args, const size_t *sizes)
{
    const hx_op_kv_store *a = args;
    return 2.0 * a->kv.T * a->Hkv * (double)a->Dh;
}

double hx_op_cost_kv_store_bytes(const void *args, const size_t *sizes)
{
    const hx_op_kv_store *a = args;
    double elem = a->kv_type == 1 ? 2.0 : 34.0 / 32.0;
    return (8.0 + 2.0 * elem) * a->kv.T * a->Hkv * (double)a->Dh;
}

static double attention_keys(const hx_op_attention *a)
{
    return (double)a->kv.max_blocks * a->kv.block_size;
}

double hx_op_cost_attention_flops(const void *args, const size_t *sizes)
{
    const hx_op_attention *a = args;
    return 4.0 * a->kv.T * a->Hq * (double)a->Dh * attention_keys(a);
}

double hx_op_cost_attention_bytes(const void *args, const size_t *sizes)
{
    const hx_op_attention *a = args;
    double elem = a->kv_type == 1 ? 2.0 : 34.0 / 32.0;
    return 2.0 * elem * a->kv.S * attention_keys(a) * a->Hkv * a->Dh + 8.0 * a->kv.T * a->Hq * (double)a->Dh;
}

double hx_op_cost_add_flops(const void *args, const size_t *sizes)
{
    return (double)((const hx_op_add *)args)->n;
}

double hx_op_cost_add_bytes(const void *args, const size_t *sizes)
{
    return 12.0 * (double)((const hx_op_add *)args)->n;
}

double hx_op_cost_swiglu_flops(const void *args, const size_t *sizes)
{
    return 5.0 * (double)((const hx_op_swiglu *)args)->n;
}

double hx_op_cost_swiglu_bytes(const void *args, const size_t *sizes)
{
    return 12.0 * (double)((const hx_op_swiglu *)args)->n;
}
