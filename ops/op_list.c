/* The built-in ops: names, argument sizes and costs.  What each op does to
 * its buffers is in ops/ops.h (and hetero.h for vector_add and gemm_f32);
 * how a device does it is bound by its backend (devices/). */
#include <math.h>
#include <string.h>

#include "ops/op_list.h"
#include "ops/ops.h"
#include "ops/types.h"

static double vector_add_flops(const void *args, const size_t *sizes)
{
    return (double)((const hx_args_vector_add *)args)->n;
}

static double vector_add_bytes(const void *args, const size_t *sizes)
{
    return 12.0 * (double)((const hx_args_vector_add *)args)->n;
}

static double gemm_f32_flops(const void *args, const size_t *sizes)
{
    const hx_args_gemm_f32 *g = args;
    return 2.0 * g->M * g->N * g->K;
}

static double gemm_f32_bytes(const void *args, const size_t *sizes)
{
    const hx_args_gemm_f32 *g = args;
    return 4.0 * ((double)g->M * g->K + (double)g->N * g->K + (double)g->M * g->N);
}

static double wbytes(uint32_t type, uint64_t rows, uint64_t cols)
{
    size_t r = hx_type_row_size((hx_type)type, cols);
    return (double)r * (double)rows;
}

/* Quantized weights are multiplied as integers against quantized
 * activations (llama.cpp's MMQ/vec_dot path); F16 ones in half precision. */
static hx_precision weight_precision(uint32_t type)
{
    if (type == HX_TYPE_F32)
        return HX_PREC_F32;
    if (type == HX_TYPE_F16 || type == HX_TYPE_BF16)
        return HX_PREC_F16;
    return HX_PREC_INT8;
}

static hx_precision matmul_precision(const void *p, const size_t *s)
{
    (void)s;
    return weight_precision(((const hx_op_matmul *)p)->wtype);
}

static hx_precision attention_precision(const void *p, const size_t *s)
{
    (void)s;
    return weight_precision(((const hx_op_attention *)p)->kv_type);
}

static double get_rows_flops(const void *p, const size_t *s) { return 0; }
static double get_rows_bytes(const void *p, const size_t *s)
{
    const hx_op_get_rows *a = p;
    return wbytes(a->type, a->T, a->D) + 4.0 * a->T * a->D;
}

static double rmsnorm_flops(const void *p, const size_t *s)
{
    const hx_op_rmsnorm *a = p;
    return 4.0 * a->T * a->D;
}
static double rmsnorm_bytes(const void *p, const size_t *s)
{
    const hx_op_rmsnorm *a = p;
    return 8.0 * a->T * a->D + 4.0 * a->D;
}

static double matmul_flops(const void *p, const size_t *s)
{
    const hx_op_matmul *a = p;
    return 2.0 * a->T * a->N * a->K;
}
static double matmul_bytes(const void *p, const size_t *s)
{
    const hx_op_matmul *a = p;
    return wbytes(a->wtype, a->N, a->K) + 4.0 * a->T * (a->K + a->N);
}

/* A fused matmul costs what its parts cost, less the input read again. */
static double matmul_multi_flops(const void *p, const size_t *s)
{
    const hx_op_matmul_multi *a = p;
    double f = 0;
    for (uint32_t i = 0; i < a->n && i < HX_MATMUL_MULTI_MAX; i++)
        f += 2.0 * a->T * a->N[i] * a->K;
    return f;
}
static double matmul_multi_bytes(const void *p, const size_t *s)
{
    const hx_op_matmul_multi *a = p;
    double b = 4.0 * a->T * a->K;
    for (uint32_t i = 0; i < a->n && i < HX_MATMUL_MULTI_MAX; i++)
        b += wbytes(a->wtype[i], a->N[i], a->K) + 4.0 * a->T * a->N[i];
    return b;
}
/* The first part's: Q's, or gate's, the largest of a layer's groups. */
static hx_precision matmul_multi_precision(const void *p, const size_t *s)
{
    (void)s;
    return weight_precision(((const hx_op_matmul_multi *)p)->wtype[0]);
}

static double rope_flops(const void *p, const size_t *s)
{
    const hx_op_rope *a = p;
    return 6.0 * a->T * a->H * a->n_rot / 2;
}
static double rope_bytes(const void *p, const size_t *s)
{
    const hx_op_rope *a = p;
    return 8.0 * a->T * a->H * a->Dh;
}

static double kv_store_flops(const void *p, const size_t *s) { return 0; }
static double kv_store_bytes(const void *p, const size_t *s)
{
    const hx_op_kv_store *a = p;
    uint64_t row = (uint64_t)a->Hkv * a->Dh;
    return a->kv.T * (8.0 * row + wbytes(a->kv_type, 1, row) + wbytes(a->v_type, 1, row));
}

/* Attention's cost grows with context; positions are only in the meta
 * buffer, so the estimate takes each sequence's T / S new tokens to end
 * where the block table ends (the batch fills it no further): token i of
 * n sees ctx - (n-1-i) positions, at most `window` of them, as the
 * kernels skip what the mask hides.  A window returns the blocks before
 * it to the pool, so they are not read either. */
static double table_positions(const hx_op_attention *a) { return (double)a->kv.max_blocks * a->kv.block_size; }
static double new_per_seq(const hx_op_attention *a) { return a->kv.S ? (double)a->kv.T / a->kv.S : a->kv.T; }
static double attention_keys(const hx_op_attention *a)
{
    double keys = table_positions(a) - (new_per_seq(a) - 1) / 2;
    if (a->window && keys > a->window)
        keys = a->window;
    return keys > 1 ? keys : 1;
}
static double attention_flops(const void *p, const size_t *s)
{
    const hx_op_attention *a = p;
    return 4.0 * a->kv.T * a->Hq * a->Dh * attention_keys(a);
}
static double attention_bytes(const void *p, const size_t *s)
{
    const hx_op_attention *a = p;
    double ctx = table_positions(a);
    if (a->window)
        ctx = fmin(ctx, a->window + new_per_seq(a) + a->kv.block_size);
    const uint64_t row = (uint64_t)a->Hkv * a->Dh;
    return ctx * a->kv.S * (wbytes(a->kv_type, 1, row) + wbytes(a->v_type, 1, row)) + 8.0 * a->kv.T * a->Hq * a->Dh;
}

/* A part's context: part 1 at most `recent` positions and the rest of
 * their first block, part 0 what the block table holds (the older
 * positions grow with the sequence). */
static double part_fraction(const hx_op_attention_part *a)
{
    double ctx = table_positions(&a->at);
    double recent = (double)a->recent + a->at.kv.block_size;
    return a->part == 1 && ctx > 0 && recent < ctx ? recent / ctx : 1.0;
}
static double attention_part_flops(const void *p, const size_t *s)
{
    return attention_flops(p, s) * part_fraction(p);
}
static double attention_part_bytes(const void *p, const size_t *s)
{
    const hx_op_attention *a = p;
    return attention_bytes(p, s) * part_fraction(p) + 8.0 * a->kv.T * a->Hq;
}
static double attn_merge_flops(const void *p, const size_t *s)
{
    const hx_op_attn_merge *a = p;
    return 4.0 * a->rows * a->Dh;
}
static double attn_merge_bytes(const void *p, const size_t *s)
{
    const hx_op_attn_merge *a = p;
    return 12.0 * a->rows * a->Dh + 16.0 * a->rows;
}

static double kv_shift_flops(const void *p, const size_t *s)
{
    const hx_op_kv_shift *a = p;
    return 6.0 * a->n * a->Hkv * a->n_rot / 2;
}
static double kv_shift_bytes(const void *p, const size_t *s)
{
    const hx_op_kv_shift *a = p;
    const uint64_t row = (uint64_t)a->Hkv * a->Dh;
    return 2.0 * a->n * (wbytes(a->kv_type, 1, row) + wbytes(a->v_type, 1, row));
}

static double add_flops(const void *p, const size_t *s) { return (double)((const hx_op_add *)p)->n; }
static double add_bytes(const void *p, const size_t *s) { return 12.0 * ((const hx_op_add *)p)->n; }
static double swiglu_flops(const void *p, const size_t *s) { return 6.0 * ((const hx_op_swiglu *)p)->n; }
static double swiglu_bytes(const void *p, const size_t *s) { return 12.0 * ((const hx_op_swiglu *)p)->n; }

static double scale_flops(const void *p, const size_t *s) { return 3.0 * ((const hx_op_scale *)p)->n; }
static double scale_bytes(const void *p, const size_t *s) { return 8.0 * ((const hx_op_scale *)p)->n; }
static double geglu_flops(const void *p, const size_t *s) { return 10.0 * ((const hx_op_geglu *)p)->n; }
static double geglu_bytes(const void *p, const size_t *s) { return 12.0 * ((const hx_op_geglu *)p)->n; }
static double add_gated_flops(const void *p, const size_t *s)
{
    const hx_op_add_gated *a = p;
    return 2.0 * a->T * a->D + 4.0 * a->T;
}
static double add_gated_bytes(const void *p, const size_t *s)
{
    const hx_op_add_gated *a = p;
    return 12.0 * a->T * a->D + 4.0 * a->T;
}
static double moe_route_flops(const void *p, const size_t *s)
{
    const hx_op_moe_route *a = p;
    return 4.0 * a->T * a->E * (1 + a->k);
}
static double moe_route_bytes(const void *p, const size_t *s)
{
    const hx_op_moe_route *a = p;
    return 4.0 * a->T * a->E + 4.0 * hx_moe_route_words(a->T, a->k, a->E) + 8.0 * a->E;
}
/* Each expert's weights are read once, but only those of experts some
 * token chose: at most T * k of them, or what the router's statistics
 * predict (e_read), within the group. */
static double moe_experts_read(uint32_t T, uint32_t k, uint32_t E, uint32_t e_n, float e_read)
{
    double avail = e_n ? e_n : E;
    if (e_read > 0)
        return e_read < avail ? e_read : avail;
    double used = (double)T * k;
    return used < avail ? used : avail;
}
/* The group's fraction of the entries (1 without a prediction). */
static double moe_share(float share) { return share > 0 ? share : 1.0; }
static double moe_gate_up_flops(const void *p, const size_t *s)
{
    const hx_op_moe_gate_up *a = p;
    return 4.0 * a->T * a->k * a->F * a->D * moe_share(a->share);
}
static double moe_gate_up_bytes(const void *p, const size_t *s)
{
    const hx_op_moe_gate_up *a = p;
    double e = moe_experts_read(a->T, a->k, a->E, a->e_n, a->e_read), f = moe_share(a->share);
    return e * (wbytes(a->gate_type, a->F, a->D) + wbytes(a->up_type, a->F, a->D)) + 4.0 * a->T * a->D +
           4.0 * a->T * a->k * a->F * f;
}
static double moe_down_flops(const void *p, const size_t *s)
{
    const hx_op_moe_down *a = p;
    return 2.0 * a->T * a->k * a->F * a->D * moe_share(a->share);
}
static double moe_down_bytes(const void *p, const size_t *s)
{
    const hx_op_moe_down *a = p;
    return moe_experts_read(a->T, a->k, a->E, a->e_n, a->e_read) * wbytes(a->down_type, a->D, a->F) +
           4.0 * a->T * a->k * a->F * moe_share(a->share) + 4.0 * a->T * a->D * (a->accumulate ? 2 : 1);
}
static hx_precision moe_gate_up_precision(const void *p, const size_t *s)
{
    (void)s;
    return weight_precision(((const hx_op_moe_gate_up *)p)->gate_type);
}
static hx_precision moe_down_precision(const void *p, const size_t *s)
{
    (void)s;
    return weight_precision(((const hx_op_moe_down *)p)->down_type);
}

const hx_codelet hx_op_codelets[HX_OP_COUNT] = {
    [HX_OP_VECTOR_ADD] = {.name = "vector_add", .flops = vector_add_flops, .bytes = vector_add_bytes},
    [HX_OP_GEMM_F32] = {.name = "gemm_f32", .flops = gemm_f32_flops, .bytes = gemm_f32_bytes},
    [HX_OP_GET_ROWS] = {.name = "get_rows", .flops = get_rows_flops, .bytes = get_rows_bytes},
    [HX_OP_RMSNORM] = {.name = "rmsnorm", .flops = rmsnorm_flops, .bytes = rmsnorm_bytes},
    [HX_OP_MATMUL] = {.name = "matmul", .flops = matmul_flops, .bytes = matmul_bytes, .precision = matmul_precision},
    [HX_OP_ROPE] = {.name = "rope", .flops = rope_flops, .bytes = rope_bytes},
    [HX_OP_KV_STORE] = {.name = "kv_store", .flops = kv_store_flops, .bytes = kv_store_bytes},
    [HX_OP_ATTENTION] = {.name = "attention", .flops = attention_flops, .bytes = attention_bytes,
                         .precision = attention_precision},
    [HX_OP_ADD] = {.name = "add", .flops = add_flops, .bytes = add_bytes},
    [HX_OP_SWIGLU] = {.name = "swiglu", .flops = swiglu_flops, .bytes = swiglu_bytes},
    [HX_OP_KV_SHIFT] = {.name = "kv_shift", .flops = kv_shift_flops, .bytes = kv_shift_bytes},
    [HX_OP_MATMUL_MULTI] = {.name = "matmul_multi", .flops = matmul_multi_flops, .bytes = matmul_multi_bytes,
                            .precision = matmul_multi_precision},
    [HX_OP_ATTENTION_PART] = {.name = "attention_part", .flops = attention_part_flops,
                              .bytes = attention_part_bytes, .precision = attention_precision},
    [HX_OP_ATTN_MERGE] = {.name = "attn_merge", .flops = attn_merge_flops, .bytes = attn_merge_bytes},
    [HX_OP_SCALE] = {.name = "scale", .flops = scale_flops, .bytes = scale_bytes},
    [HX_OP_GEGLU] = {.name = "geglu", .flops = geglu_flops, .bytes = geglu_bytes},
    [HX_OP_ADD_GATED] = {.name = "add_gated", .flops = add_gated_flops, .bytes = add_gated_bytes},
    [HX_OP_MOE_ROUTE] = {.name = "moe_route", .flops = moe_route_flops, .bytes = moe_route_bytes},
    [HX_OP_MOE_GATE_UP] = {.name = "moe_gate_up", .flops = moe_gate_up_flops, .bytes = moe_gate_up_bytes,
                           .precision = moe_gate_up_precision},
    [HX_OP_MOE_DOWN] = {.name = "moe_down", .flops = moe_down_flops, .bytes = moe_down_bytes,
                        .precision = moe_down_precision},
};

const size_t hx_op_args_size[HX_OP_COUNT] = {
    [HX_OP_VECTOR_ADD] = sizeof(hx_args_vector_add),
    [HX_OP_GEMM_F32] = sizeof(hx_args_gemm_f32),
    [HX_OP_GET_ROWS] = sizeof(hx_op_get_rows),
    [HX_OP_RMSNORM] = sizeof(hx_op_rmsnorm),
    [HX_OP_MATMUL] = sizeof(hx_op_matmul),
    [HX_OP_ROPE] = sizeof(hx_op_rope),
    [HX_OP_KV_STORE] = sizeof(hx_op_kv_store),
    [HX_OP_ATTENTION] = sizeof(hx_op_attention),
    [HX_OP_ADD] = sizeof(hx_op_add),
    [HX_OP_SWIGLU] = sizeof(hx_op_swiglu),
    [HX_OP_KV_SHIFT] = sizeof(hx_op_kv_shift),
    [HX_OP_MATMUL_MULTI] = sizeof(hx_op_matmul_multi),
    [HX_OP_ATTENTION_PART] = sizeof(hx_op_attention_part),
    [HX_OP_ATTN_MERGE] = sizeof(hx_op_attn_merge),
    [HX_OP_SCALE] = sizeof(hx_op_scale),
    [HX_OP_GEGLU] = sizeof(hx_op_geglu),
    [HX_OP_ADD_GATED] = sizeof(hx_op_add_gated),
    [HX_OP_MOE_ROUTE] = sizeof(hx_op_moe_route),
    [HX_OP_MOE_GATE_UP] = sizeof(hx_op_moe_gate_up),
    [HX_OP_MOE_DOWN] = sizeof(hx_op_moe_down),
};

int hx_op_find(const char *name)
{
    for (int op = 0; name && op < HX_OP_COUNT; op++)
        if (!strcmp(hx_op_codelets[op].name, name))
            return op;
    return -1;
}

const hx_codelet *hx_codelet_builtin(const char *name)
{
    int op = hx_op_find(name);
    return op < 0 ? NULL : &hx_op_codelets[op];
}
