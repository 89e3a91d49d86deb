/* Checks that a task's argument block fits its buffers before anything is
 * launched on the GPU, where a bad size would read out of bounds instead of
 * failing.  Host code only; shared by the plugin and the host tests.
 * Each check returns 0, or 1 after writing the reason into msg.  Index
 * buffers (token ids, KV slots, block tables) are checked by the kernels
 * themselves, since their contents live on the device. */
#ifndef HX_KERNELS_CU_OP_CHECK_H
#define HX_KERNELS_CU_OP_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kernels_cu/dequant_tile.h"
#include "ops/ops.h"

/* Dimensions handed to cuBLAS and to grid sizes must fit an int. */
#define HX_OC_DIM_MAX 0x7fffffffu
/* The attention kernel keeps a head's accumulator in registers. */
#define HX_OC_ATTN_DH_MAX 256u

static inline int hx_oc_fail(char *msg, size_t len, const char *op, const char *why)
{
    snprintf(msg, len, "%s: %s", op, why);
    return 1;
}

/* a * b * c <= have, without overflowing. */
static inline int hx_oc_fits(uint64_t a, uint64_t b, uint64_t c, uint64_t have)
{
    if (!a || !b || !c)
        return 1;
    if (a > UINT64_MAX / b)
        return 0;
    uint64_t p = a * b;
    if (p > UINT64_MAX / c)
        return 0;
    return p * c <= have;
}

static inline int hx_oc_buffers(int n, int want, char *msg, size_t len, const char *op)
{
    if (n == want)
        return 0;
    snprintf(msg, len, "%s: %d buffers given, %d expected", op, n, want);
    return 1;
}

static inline int hx_oc_size(uint64_t a, uint64_t b, uint64_t c, size_t have, char *msg, size_t len,
                             const char *op, const char *buf)
{
    if (hx_oc_fits(a, b, c, have))
        return 0;
    snprintf(msg, len, "%s: buffer '%s' holds %zu bytes, fewer than its arguments need", op, buf, have);
    return 1;
}

static inline int hx_oc_matmul(const hx_op_matmul *a, const size_t *s, int n, char *msg, size_t len)
{
    const char *op = "matmul";
    if (a->has_bias > 1)
        return hx_oc_fail(msg, len, op, "has_bias must be 0 or 1");
    if (hx_oc_buffers(n, 3 + (int)a->has_bias, msg, len, op))
        return 1;
    if (!hx_dq_supported(a->wtype))
        return hx_oc_fail(msg, len, op, "weight type has no CUDA kernel");
    if (a->T > HX_OC_DIM_MAX || a->N > HX_OC_DIM_MAX || a->K > HX_OC_DIM_MAX)
        return hx_oc_fail(msg, len, op, "dimension above 2^31-1");
    uint64_t rb = hx_dq_row_bytes(a->wtype, a->K);
    if (!rb)
        return hx_oc_fail(msg, len, op, "K is not a positive multiple of the weight type's block");
    return hx_oc_size(a->N, rb, 1, s[0], msg, len, op, "W") || hx_oc_size(a->T, a->K, 4, s[1], msg, len, op, "x") ||
           hx_oc_size(a->T, a->N, 4, s[2], msg, len, op, "y") ||
           (a->has_bias && hx_oc_size(a->N, 4, 1, s[3], msg, len, op, "bias"));
}

static inline int hx_oc_rmsnorm(const hx_op_rmsnorm *a, const size_t *s, int n, char *msg, size_t len)
{
    const char *op = "rmsnorm";
    if (hx_oc_buffers(n, 3, msg, len, op))
        return 1;
    if (a->T > HX_OC_DIM_MAX || a->D > HX_OC_DIM_MAX)
        return hx_oc_fail(msg, len, op, "dimension above 2^31-1");
    if (!(a->eps >= 0.0f) || isinf(a->eps))
        return hx_oc_fail(msg, len, op, "eps must be finite and not negative");
    return hx_oc_size(a->T, a->D, 4, s[0], msg, len, op, "x") || hx_oc_size(a->D, 4, 1, s[1], msg, len, op, "w") ||
           hx_oc_size(a->T, a->D, 4, s[2], msg, len, op, "y");
}

static inline int hx_oc_rope(const hx_op_rope *a, const size_t *s, int n, char *msg, size_t len)
{
    const char *op = "rope";
    if (a->has_factors > 1)
        return hx_oc_fail(msg, len, op, "has_factors must be 0 or 1");
    if (hx_oc_buffers(n, 2 + (int)a->has_factors, msg, len, op))
        return 1;
    if (a->T > HX_OC_DIM_MAX || a->H > HX_OC_DIM_MAX || a->Dh > HX_OC_DIM_MAX)
        return hx_oc_fail(msg, len, op, "dimension above 2^31-1");
    if (a->n_rot % 2 || a->n_rot > a->Dh)
        return hx_oc_fail(msg, len, op, "n_rot must be even and at most Dh");
    if (a->neox > 1)
        return hx_oc_fail(msg, len, op, "neox must be 0 or 1");
    if (!(a->freq_base > 0.0f) || isinf(a->freq_base) || !isfinite(a->freq_scale))
        return hx_oc_fail(msg, len, op, "freq_base must be positive and finite, freq_scale finite");
    return hx_oc_size((uint64_t)a->T * a->H, a->Dh, 4, s[0], msg, len, op, "x") ||
           hx_oc_size(a->T, 4, 1, s[1], msg, len, op, "pos") ||
           (a->has_factors && hx_oc_size(a->n_rot / 2, 4, 1, s[2], msg, len, op, "factors"));
}

/* The KV layout shared by kv_store and attention; *slots receives how many
 * token slots both caches hold. */
static inline int hx_oc_kv(const hx_kv_layout *l, uint32_t heads, uint32_t Dh, uint32_t kv_type, size_t kc,
                           size_t vc, size_t meta, uint64_t *slots, char *msg, size_t len, const char *op)
{
    if (kv_type != HX_TYPE_F16 && kv_type != HX_TYPE_Q8_0 && kv_type != HX_TYPE_F32)
        return hx_oc_fail(msg, len, op, "kv_type must be F16, Q8_0 or F32 on CUDA");
    if (!heads || !Dh || heads > 65535 || Dh > HX_OC_DIM_MAX)
        return hx_oc_fail(msg, len, op, "bad head count or head size");
    if (kv_type == HX_TYPE_Q8_0 && Dh % 32)
        return hx_oc_fail(msg, len, op, "a Q8_0 cache needs a head size that is a multiple of 32");
    if (!l->block_size || l->T > HX_OC_DIM_MAX || l->S > HX_OC_DIM_MAX || l->max_blocks > HX_OC_DIM_MAX)
        return hx_oc_fail(msg, len, op, "bad KV layout (block_size 0 or a count above 2^31-1)");
    if (l->T && (!l->S || !l->max_blocks))
        return hx_oc_fail(msg, len, op, "tokens without sequences or block tables");
    uint64_t rb = hx_dq_row_bytes(kv_type, (uint64_t)heads * Dh);
    if (!rb)
        return hx_oc_fail(msg, len, op, "the KV row is not a whole number of blocks");
    uint64_t ints = 3 * (uint64_t)l->T + (uint64_t)l->S * l->max_blocks;
    if (hx_oc_size(ints, 4, 1, meta, msg, len, op, "meta"))
        return 1;
    uint64_t ks = kc / rb, vs = vc / rb;
    *slots = ks < vs ? ks : vs;
    if (!*slots && l->T)
        return hx_oc_fail(msg, len, op, "the caches hold no token slot");
    return 0;
}

/* The CUDA kernels read K and V of one type, stored as they are: K and V
 * of different types (-ctk / -ctv) or Walsh-Hadamard rotated rows stay
 * with the CPU's attention. */
static inline int hx_oc_kv_plain(uint32_t kv_type, uint32_t v_type, uint32_t rot_k, uint32_t rot_v)
{
    return v_type == kv_type && !rot_k && !rot_v;
}

static inline int hx_oc_kv_store(const hx_op_kv_store *a, const size_t *s, int n, uint64_t *slots, char *msg,
                                 size_t len)
{
    const char *op = "kv_store";
    if (a->center_k)
        return hx_oc_fail(msg, len, op, "keys stored centred have no CUDA kernel");
    if (hx_oc_buffers(n, 5, msg, len, op))
        return 1;
    if (!hx_oc_kv_plain(a->kv_type, a->v_type, a->rot_k, a->rot_v))
        return hx_oc_fail(msg, len, op, "K and V of different types, or rotated rows, have no CUDA kernel");
    if (hx_oc_kv(&a->kv, a->Hkv, a->Dh, a->kv_type, s[2], s[3], s[4], slots, msg, len, op))
        return 1;
    return hx_oc_size((uint64_t)a->kv.T * a->Hkv, a->Dh, 4, s[0], msg, len, op, "k") ||
           hx_oc_size((uint64_t)a->kv.T * a->Hkv, a->Dh, 4, s[1], msg, len, op, "v");
}

static inline int hx_oc_attention(const hx_op_attention *a, const size_t *s, int n, uint64_t *slots, char *msg,
                                  size_t len)
{
    const char *op = "attention";
    if (hx_oc_buffers(n, 5, msg, len, op))
        return 1;
    if (!a->Hq || !a->Hkv || a->Hq % a->Hkv || a->Hq > 65535)
        return hx_oc_fail(msg, len, op, "Hq must be a positive multiple of Hkv");
    if (a->Dh > HX_OC_ATTN_DH_MAX)
        return hx_oc_fail(msg, len, op, "head size above 256 has no CUDA kernel");
    if (!isfinite(a->scale))
        return hx_oc_fail(msg, len, op, "scale must be finite");
    if (!hx_oc_kv_plain(a->kv_type, a->v_type, a->rot_k, a->rot_v))
        return hx_oc_fail(msg, len, op, "K and V of different types, or rotated rows, have no CUDA kernel");
    if (hx_oc_kv(&a->kv, a->Hkv, a->Dh, a->kv_type, s[1], s[2], s[3], slots, msg, len, op))
        return 1;
    return hx_oc_size((uint64_t)a->kv.T * a->Hq, a->Dh, 4, s[0], msg, len, op, "q") ||
           hx_oc_size((uint64_t)a->kv.T * a->Hq, a->Dh, 4, s[4], msg, len, op, "out");
}

static inline int hx_oc_attention_part(const hx_op_attention_part *p, const size_t *s, int n, uint64_t *slots,
                                       char *msg, size_t len)
{
    const char *op = "attention_part";
    if (hx_oc_buffers(n, 6, msg, len, op))
        return 1;
    if (!p->recent || p->part > 1)
        return hx_oc_fail(msg, len, op, "recent must be positive and part 0 or 1");
    if (hx_oc_attention(&p->at, s, 5, slots, msg, len))
        return 1;
    return hx_oc_size((uint64_t)p->at.kv.T * p->at.Hq, 2, 4, s[5], msg, len, op, "stats");
}

static inline int hx_oc_attn_merge(const hx_op_attn_merge *a, const size_t *s, int n, char *msg, size_t len)
{
    const char *op = "attn_merge";
    if (hx_oc_buffers(n, 5, msg, len, op))
        return 1;
    if (!a->Dh)
        return hx_oc_fail(msg, len, op, "Dh must be positive");
    return hx_oc_size(a->rows, a->Dh, 4, s[0], msg, len, op, "out0") ||
           hx_oc_size(a->rows, 2, 4, s[1], msg, len, op, "stats0") ||
           hx_oc_size(a->rows, a->Dh, 4, s[2], msg, len, op, "out1") ||
           hx_oc_size(a->rows, 2, 4, s[3], msg, len, op, "stats1") ||
           hx_oc_size(a->rows, a->Dh, 4, s[4], msg, len, op, "out");
}

static inline int hx_oc_add(const hx_op_add *a, const size_t *s, int n, char *msg, size_t len)
{
    const char *op = "add";
    if (hx_oc_buffers(n, 2, msg, len, op))
        return 1;
    return hx_oc_size(a->n, 4, 1, s[0], msg, len, op, "x") || hx_oc_size(a->n, 4, 1, s[1], msg, len, op, "y");
}

static inline int hx_oc_swiglu(const hx_op_swiglu *a, const size_t *s, int n, char *msg, size_t len)
{
    const char *op = "swiglu";
    if (hx_oc_buffers(n, 3, msg, len, op))
        return 1;
    return hx_oc_size(a->n, 4, 1, s[0], msg, len, op, "gate") || hx_oc_size(a->n, 4, 1, s[1], msg, len, op, "up") ||
           hx_oc_size(a->n, 4, 1, s[2], msg, len, op, "out");
}

/* *rows receives how many rows the table holds. */
static inline int hx_oc_get_rows(const hx_op_get_rows *a, const size_t *s, int n, uint64_t *rows, char *msg,
                                 size_t len)
{
    const char *op = "get_rows";
    if (hx_oc_buffers(n, 3, msg, len, op))
        return 1;
    if (!hx_dq_supported(a->type))
        return hx_oc_fail(msg, len, op, "table type has no CUDA kernel");
    if (a->T > HX_OC_DIM_MAX || a->D > HX_OC_DIM_MAX)
        return hx_oc_fail(msg, len, op, "dimension above 2^31-1");
    uint64_t rb = hx_dq_row_bytes(a->type, a->D);
    if (!rb)
        return hx_oc_fail(msg, len, op, "D is not a positive multiple of the table type's block");
    *rows = s[0] / rb;
    if (!*rows && a->T)
        return hx_oc_fail(msg, len, op, "the table holds no row");
    return hx_oc_size(a->T, 4, 1, s[1], msg, len, op, "ids") || hx_oc_size(a->T, a->D, 4, s[2], msg, len, op, "out");
}

/* A matmul_multi runs as its parts (hx_oc_matmul_multi_part), each
 * checked as its matmul. */
static inline int hx_oc_matmul_multi(const hx_op_matmul_multi *a, int n, char *msg, size_t len)
{
    if (!hx_matmul_multi_valid(a))
        return hx_oc_fail(msg, len, "matmul_multi", "part count or bias bits out of range");
    return hx_oc_buffers(n, hx_matmul_multi_nbuffers(a), msg, len, "matmul_multi");
}

/* Part i's matmul: its arguments, and its buffers and sizes picked out of
 * the task's (3, or 4 with a bias: the count). */
static inline int hx_oc_matmul_multi_part(const hx_op_matmul_multi *a, int i, void *const *bufs,
                                          const size_t *sizes, hx_op_matmul *m, void **pb, size_t *ps)
{
    *m = hx_matmul_multi_part(a, i);
    const int idx[4] = {hx_matmul_multi_w(i), 0, hx_matmul_multi_y(i), hx_matmul_multi_bias(a, i)};
    const int nb = 3 + (int)m->has_bias;
    for (int k = 0; k < nb; k++) {
        pb[k] = bufs[idx[k]];
        ps[k] = sizes[idx[k]];
    }
    return nb;
}

/* Whether the CUDA kernels cover a task whose arguments are valid: the
 * weight or table type, the KV cache type, the head size.  Invalid
 * arguments are not judged here (they fail when the task runs). */
static inline int hx_oc_kv_covered(uint32_t kv_type, uint32_t Dh)
{
    return kv_type == HX_TYPE_F16 || kv_type == HX_TYPE_F32 || (kv_type == HX_TYPE_Q8_0 && Dh % 32 == 0);
}

/* Per op, whether its CUDA kernel covers these arguments
 * (hx_cuda_kernel.covers). */
static inline int hx_oc_covers_matmul(const void *args)
{
    return hx_dq_supported(((const hx_op_matmul *)args)->wtype);
}

static inline int hx_oc_covers_matmul_multi(const void *args)
{
    const hx_op_matmul_multi *a = (const hx_op_matmul_multi *)args;
    for (uint32_t i = 0; i < a->n && i < HX_MATMUL_MULTI_MAX; i++)
        if (!hx_dq_supported(a->wtype[i]))
            return 0;
    return 1;
}

/* ---- Gemma's and the experts' ops -------------------------------------- */

static inline int hx_oc_scale(const hx_op_scale *a, const size_t *s, int n, char *msg, size_t len)
{
    const char *op = "scale";
    if (hx_oc_buffers(n, 1, msg, len, op))
        return 1;
    if (!(a->cap >= 0.0f))
        return hx_oc_fail(msg, len, op, "cap must be 0 (none) or positive");
    return hx_oc_size(a->n, 4, 1, s[0], msg, len, op, "x");
}

static inline int hx_oc_geglu(const hx_op_geglu *a, const size_t *s, int n, char *msg, size_t len)
{
    const char *op = "geglu";
    if (hx_oc_buffers(n, 3, msg, len, op))
        return 1;
    return hx_oc_size(a->n, 4, 1, s[0], msg, len, op, "gate") || hx_oc_size(a->n, 4, 1, s[1], msg, len, op, "up") ||
           hx_oc_size(a->n, 4, 1, s[2], msg, len, op, "out");
}

static inline int hx_oc_add_gated(const hx_op_add_gated *a, const size_t *s, int n, char *msg, size_t len)
{
    const char *op = "add_gated";
    if (hx_oc_buffers(n, 3, msg, len, op))
        return 1;
    return hx_oc_size(a->T, a->D, 4, s[0], msg, len, op, "x") || hx_oc_size(a->T, a->D, 4, s[1], msg, len, op, "y") ||
           hx_oc_size(a->T, 4, 1, s[2], msg, len, op, "g");
}

static inline int hx_oc_moe_route(const hx_op_moe_route *a, const size_t *s, int n, char *msg, size_t len)
{
    const char *op = "moe_route";
    if (hx_oc_buffers(n, 3, msg, len, op))
        return 1;
    if (!a->k || a->k > HX_MOE_MAX_USED || a->k > a->E || a->E > 1024 || a->norm > 1)
        return hx_oc_fail(msg, len, op, "k must be 1..16 and at most E <= 1024, norm 0 or 1");
    if (a->layer >= a->layers)
        return hx_oc_fail(msg, len, op, "layer past the tallies");
    if (a->T > HX_OC_DIM_MAX / HX_MOE_MAX_USED)
        return hx_oc_fail(msg, len, op, "T above 2^27");
    return hx_oc_size(a->T, a->E, 4, s[0], msg, len, op, "logits") ||
           hx_oc_size(hx_moe_route_words(a->T, a->k, a->E), 4, 1, s[1], msg, len, op, "route") ||
           hx_oc_size(a->layers, a->E, 8, s[2], msg, len, op, "counts");
}

/* An expert matrix: E x N rows of K elements of `type`. */
static inline int hx_oc_experts(uint32_t type, uint32_t E, uint32_t N, uint32_t K, size_t have, char *msg, size_t len,
                                const char *op, const char *buf)
{
    if (!hx_dq_supported(type))
        return hx_oc_fail(msg, len, op, "weight type has no CUDA kernel");
    uint64_t rb = hx_dq_row_bytes(type, K);
    if (!rb)
        return hx_oc_fail(msg, len, op, "rows are not a positive multiple of the weight type's block");
    return hx_oc_size((uint64_t)E * N, rb, 1, have, msg, len, op, buf);
}

static inline int hx_oc_moe_gate_up(const hx_op_moe_gate_up *a, const size_t *s, int n, char *msg, size_t len)
{
    const char *op = "moe_gate_up";
    if (hx_oc_buffers(n, 5, msg, len, op))
        return 1;
    if (!a->k || a->k > HX_MOE_MAX_USED || a->act > 1)
        return hx_oc_fail(msg, len, op, "k must be 1..16, act 0 or 1");
    if (a->T > HX_OC_DIM_MAX / HX_MOE_MAX_USED || a->D > HX_OC_DIM_MAX || a->F > HX_OC_DIM_MAX)
        return hx_oc_fail(msg, len, op, "dimension above 2^31-1");
    if (a->e_n && (a->e_lo >= a->E || a->e_n > a->E - a->e_lo))
        return hx_oc_fail(msg, len, op, "expert group beyond the layer's experts");
    const uint64_t tk = (uint64_t)a->T * a->k;
    const uint32_t held = a->e_n ? a->e_n : a->E; /* the experts its weights hold */
    return hx_oc_experts(a->gate_type, held, a->F, a->D, s[2], msg, len, op, "gate") ||
           hx_oc_experts(a->up_type, held, a->F, a->D, s[3], msg, len, op, "up") ||
           hx_oc_size(a->T, a->D, 4, s[0], msg, len, op, "x") ||
           hx_oc_size(hx_moe_route_words(a->T, a->k, a->E), 4, 1, s[1], msg, len, op, "route") ||
           hx_oc_size(tk, a->F, 4, s[4], msg, len, op, "h");
}

static inline int hx_oc_moe_down(const hx_op_moe_down *a, const size_t *s, int n, char *msg, size_t len)
{
    const char *op = "moe_down";
    if (hx_oc_buffers(n, 4, msg, len, op))
        return 1;
    if (!a->k || a->k > HX_MOE_MAX_USED)
        return hx_oc_fail(msg, len, op, "k must be 1..16");
    if (a->T > HX_OC_DIM_MAX / HX_MOE_MAX_USED || a->D > HX_OC_DIM_MAX || a->F > HX_OC_DIM_MAX)
        return hx_oc_fail(msg, len, op, "dimension above 2^31-1");
    if (a->e_n && (a->e_lo >= a->E || a->e_n > a->E - a->e_lo))
        return hx_oc_fail(msg, len, op, "expert group beyond the layer's experts");
    return hx_oc_experts(a->down_type, a->e_n ? a->e_n : a->E, a->D, a->F, s[2], msg, len, op, "down") ||
           hx_oc_size((uint64_t)a->T * a->k, a->F, 4, s[0], msg, len, op, "h") ||
           hx_oc_size(hx_moe_route_words(a->T, a->k, a->E), 4, 1, s[1], msg, len, op, "route") ||
           hx_oc_size(a->T, a->D, 4, s[3], msg, len, op, "out");
}

static inline int hx_oc_covers_moe_gate_up(const void *args)
{
    const hx_op_moe_gate_up *a = (const hx_op_moe_gate_up *)args;
    return hx_dq_supported(a->gate_type) && hx_dq_supported(a->up_type);
}

static inline int hx_oc_covers_moe_down(const void *args)
{
    const hx_op_moe_down *a = (const hx_op_moe_down *)args;
    return hx_dq_supported(a->down_type);
}

static inline int hx_oc_covers_get_rows(const void *args)
{
    return hx_dq_supported(((const hx_op_get_rows *)args)->type);
}

static inline int hx_oc_covers_kv_store(const void *args)
{
    const hx_op_kv_store *a = (const hx_op_kv_store *)args;
    return hx_oc_kv_covered(a->kv_type, a->Dh) && hx_oc_kv_plain(a->kv_type, a->v_type, a->rot_k, a->rot_v) &&
           !a->center_k;
}

static inline int hx_oc_covers_attention(const void *args)
{
    const hx_op_attention *a = (const hx_op_attention *)args;
    return hx_oc_kv_covered(a->kv_type, a->Dh) && hx_oc_kv_plain(a->kv_type, a->v_type, a->rot_k, a->rot_v) &&
           a->Dh <= HX_OC_ATTN_DH_MAX;
}

static inline int hx_oc_covers_attention_part(const void *args)
{
    return hx_oc_covers_attention(&((const hx_op_attention_part *)args)->at);
}

#endif
