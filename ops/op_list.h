/* The list of built-in ops: the one table every room reads.  An op is an
 * id, a name, the size of its argument block and its cost (hx_codelet's
 * flops/bytes/precision); its implementations are bound per device when a
 * backend opens it (hx_device_ops.bind_op), so a new op is one entry here
 * plus one implementation per backend.  Ops are named by id in the
 * runtime and the layer graph; names are looked up once, by
 * hx_codelet_builtin or hx_op_find. */
#ifndef HX_OPS_OP_LIST_H
#define HX_OPS_OP_LIST_H

#include <stdint.h>

#include "hetero.h"

typedef enum {
    HX_OP_VECTOR_ADD, /* hx_args_vector_add (hetero.h) */
    HX_OP_GEMM_F32,   /* hx_args_gemm_f32 (hetero.h) */
    HX_OP_GET_ROWS,   /* hx_op_get_rows (ops/ops.h), and so on below */
    HX_OP_RMSNORM,
    HX_OP_MATMUL,
    HX_OP_ROPE,
    HX_OP_KV_STORE,
    HX_OP_ATTENTION,
    HX_OP_ADD,
    HX_OP_SWIGLU,
    HX_OP_KV_SHIFT,
    HX_OP_MATMUL_MULTI,
    HX_OP_ATTENTION_PART,
    HX_OP_ATTN_MERGE,
    HX_OP_SCALE,
    HX_OP_GEGLU,
    HX_OP_ADD_GATED,
    HX_OP_MOE_ROUTE,
    HX_OP_MOE_GATE_UP,
    HX_OP_MOE_DOWN,
    HX_OP_COUNT
} hx_op;

/* Each op's codelet as the runtime and the scheduler see it: its name
 * and cost, no implementation (those are the devices'). */
extern const hx_codelet hx_op_codelets[HX_OP_COUNT];
/* The size of each op's argument block. */
extern const size_t hx_op_args_size[HX_OP_COUNT];

/* The op of that name, or -1. */
int hx_op_find(const char *name);
/* The op whose codelet is `cl` (a pointer into hx_op_codelets), or -1 for
 * a codelet of the application's own: a comparison, no name search. */
static inline int hx_op_of(const hx_codelet *cl)
{
    uintptr_t p = (uintptr_t)cl, first = (uintptr_t)hx_op_codelets;
    return p >= first && p < first + sizeof hx_op_codelets && (p - first) % sizeof *cl == 0
               ? (int)((p - first) / sizeof *cl)
               : -1;
}
/* The codelet of an op. */
static inline const hx_codelet *hx_op_codelet(hx_op op) { return &hx_op_codelets[op]; }

#endif
