/* OpenCL launches of the layer ops.  Every size a kernel will index by is
 * checked here against the buffer that holds it, so a wrong argument block
 * is an error and never an out-of-bounds access on the device.  Scalars
 * point into the task's argument block or its size table, both alive until
 * the kernel's arguments are set. */
#include <stdint.h>
#include <string.h>

#include "devices/cl_launch.h"
#include "devices/opencl.h"
#include "runtime/error.h"
#include "ops/ops.h"

_Static_assert(sizeof(size_t) == 8, "buffer sizes are passed to kernels as ulong");

/* GGUF type numbers of the types the kernels decode. */
enum { T_F32 = 0, T_F16 = 1, T_Q4_0 = 2, T_Q8_0 = 8, T_Q4_K = 12 };

typedef struct {
    uint32_t type, block, bytes;
    const char *name;
} cl_type;

static const cl_type types[] = {
    {T_F32, 1, 4, "f32"}, {T_F16, 1, 2, "f16"}, {T_Q8_0, 32, 34, "q8_0"},
    {T_Q4_0, 32, 18, "q4_0"}, {T_Q4_K, 256, 144, "q4_k"},
};

static const cl_type *type_of(uint32_t t)
{
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (types[i].type == t)
            return &types[i];
    return NULL;
}

static void arg_buffer(hx_cl_launch *l, int index)
{
    l->arg[l->nargs].buffer = index;
    l->arg[l->nargs].size = 0;
    l->arg[l->nargs++].value = NULL;
}

static void arg_value(hx_cl_launch *l, const void *value, size_t size)
{
    l->arg[l->nargs].buffer = -1;
    l->arg[l->nargs].size = size;
    l->arg[l->nargs++].value = value;
}

static size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

/* Whether buffer `i` holds a * b * c bytes (with overflow taken as no). */
static int holds(const size_t *sizes, int i, uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t ab, abc;
    if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc))
        return 0;
    return sizes[i] >= abc;
}

#define REQUIRE(cond, ...)                                               \
    do {                                                                 \
        if (!(cond))                                                     \
            return (int)hx_error(HX_ERR_INVALID_ARG, __VA_ARGS__);       \
    } while (0)

#define REQUIRE_BUFFER(op, sizes, i, what, a, b, c)                                                       \
    REQUIRE(holds(sizes, i, a, b, c), "%s: buffer %d (%s) holds %zu bytes, %llu x %llu x %llu needed", op, \
            i, what, (sizes)[i], (unsigned long long)(a), (unsigned long long)(b), (unsigned long long)(c))

int hx_cl_launch_vector_add(const void *args, const size_t *sizes, hx_cl_launch *l)
{
    const hx_args_vector_add *a = args;
    *l = (hx_cl_launch){.kernel = "vector_add", .work_dim = 1, .global = {a->n}, .nargs = 4};
    for (int i = 0; i < 3; i++)
        l->arg[i].buffer = i;
    l->arg[3].buffer = -1;
    l->arg[3].size = sizeof(uint64_t);
    l->arg[3].value = &a->n;
    return 0;
}

int hx_cl_launch_gemm_f32(const void *args, const size_t *sizes, hx_cl_launch *l)
{
    const hx_args_gemm_f32 *g = args;
    size_t gx = (g->N + 15) / 16 * 16, gy = (g->M + 15) / 16 * 16;
    *l = (hx_cl_launch){.kernel = "gemm_f32", .work_dim = 2, .global = {gx, gy}, .local = {16, 16}, .nargs = 6};
    for (int i = 0; i < 3; i++)
        l->arg[i].buffer = i;
    const uint32_t *dims[3] = {&g->M, &g->N, &g->K};
    for (int i = 0; i < 3; i++) {
        l->arg[3 + i].buffer = -1;
        l->arg[3 + i].size = sizeof(uint32_t);
        l->arg[3 + i].value = dims[i];
    }
    return 0;
}

int hx_cl_launch_get_rows(const void *args, const size_t *sizes, hx_cl_launch *l)
{
    static const char *const kernels[] = {"get_rows_f32", "get_rows_f16", "get_rows_q8_0", "get_rows_q4_0"};
    const hx_op_get_rows *a = args;
    const cl_type *t = type_of(a->type);
    int k = !t ? -1 : t->type == T_F32 ? 0 : t->type == T_F16 ? 1 : t->type == T_Q8_0 ? 2 : t->type == T_Q4_0 ? 3 : -1;
    if (k < 0)
        return (int)hx_error(HX_ERR_UNSUPPORTED, "get_rows: table type %u has no OpenCL kernel", a->type);
    REQUIRE(a->D % t->block == 0, "get_rows: D=%u is not a multiple of the %s block (%u)", a->D, t->name, t->block);
    REQUIRE(sizes[0] > 0, "get_rows: empty table");
    REQUIRE_BUFFER("get_rows", sizes, 1, "ids", a->T, 4, 1);
    REQUIRE_BUFFER("get_rows", sizes, 2, "out", a->T, a->D, 4);
    *l = (hx_cl_launch){.kernel = kernels[k], .work_dim = 2, .global = {round_up(a->D, 32), a->T}, .local = {32, 1}};
    for (int i = 0; i < 3; i++)
        arg_buffer(l, i);
    arg_value(l, &a->T, 4);
    arg_value(l, &a->D, 4);
    arg_value(l, &sizes[0], 8);
    arg_buffer(l, HX_OPENCL_ARG_STATUS);
    return 0;
}

int hx_cl_launch_rmsnorm(const void *args, const size_t *sizes, hx_cl_launch *l)
{
    const hx_op_rmsnorm *a = args;
    REQUIRE(a->D > 0, "rmsnorm: D=0");
    REQUIRE(a->eps >= 0, "rmsnorm: eps=%g is negative", (double)a->eps);
    REQUIRE_BUFFER("rmsnorm", sizes, 0, "x", a->T, a->D, 4);
    REQUIRE_BUFFER("rmsnorm", sizes, 1, "w", a->D, 4, 1);
    REQUIRE_BUFFER("rmsnorm", sizes, 2, "y", a->T, a->D, 4);
    *l = (hx_cl_launch){.kernel = "rmsnorm", .work_dim = 1, .global = {(size_t)64 * a->T}, .local = {64}};
    for (int i = 0; i < 3; i++)
        arg_buffer(l, i);
    arg_value(l, &a->T, 4);
    arg_value(l, &a->D, 4);
    arg_value(l, &a->eps, 4);
    return 0;
}

int hx_cl_launch_matmul(const void *args, const size_t *sizes, hx_cl_launch *l)
{
    static const char *const kernels[][2] = {
        {"matmul_f32_vec", "matmul_f32_tiled"},   {"matmul_f16_vec", "matmul_f16_tiled"},
        {"matmul_q8_0_vec", "matmul_q8_0_tiled"}, {"matmul_q4_0_vec", "matmul_q4_0_tiled"},
        {"matmul_q4_k_vec", "matmul_q4_k_tiled"},
    };
    const hx_op_matmul *a = args;
    const cl_type *t = type_of(a->wtype);
    if (!t)
        return (int)hx_error(HX_ERR_UNSUPPORTED, "matmul: weight type %u has no OpenCL kernel", a->wtype);
    REQUIRE(a->K % t->block == 0, "matmul: K=%u is not a multiple of the %s block (%u)", a->K, t->name, t->block);
    REQUIRE(a->has_bias <= 1, "matmul: has_bias=%u", a->has_bias);
    REQUIRE_BUFFER("matmul", sizes, 0, "W", a->N, a->K / t->block, t->bytes);
    REQUIRE_BUFFER("matmul", sizes, 1, "x", a->T, a->K, 4);
    REQUIRE_BUFFER("matmul", sizes, 2, "y", a->T, a->N, 4);
    if (a->has_bias)
        REQUIRE_BUFFER("matmul", sizes, 3, "bias", a->N, 4, 1);
    /* A work-item per output row; for T > 1 each covers 8 tokens
     * (MM_WG and MM_TT of kernels_cl/matmul.cl). */
    int tiled = a->T > 1;
    *l = (hx_cl_launch){.kernel = kernels[t - types][tiled], .work_dim = 2,
                        .global = {a->T ? round_up(a->N, 64) : 0, tiled ? (a->T + 7) / 8 : 1}, .local = {64, 1}};
    for (int i = 0; i < 3; i++)
        arg_buffer(l, i);
    arg_buffer(l, a->has_bias ? 3 : 1); /* read only when has_bias */
    arg_value(l, &a->N, 4);
    arg_value(l, &a->K, 4);
    arg_value(l, &a->T, 4);
    arg_value(l, &a->has_bias, 4);
    return 0;
}

/* No single launch: the device runs each part with hx_cl_launch_matmul
 * (devices/opencl.c); this marks the op as the OpenCL backend's. */
int hx_cl_launch_matmul_multi(const void *args, const size_t *sizes, hx_cl_launch *l)
{
    (void)args, (void)sizes, (void)l;
    return (int)hx_error(HX_ERR_UNSUPPORTED, "matmul_multi: runs as one matmul launch per part");
}

int hx_cl_launch_rope(const void *args, const size_t *sizes, hx_cl_launch *l)
{
    const hx_op_rope *a = args;
    REQUIRE(a->n_rot % 2 == 0 && a->n_rot <= a->Dh, "rope: n_rot=%u must be even and at most Dh=%u", a->n_rot,
            a->Dh);
    REQUIRE(a->freq_base > 0, "rope: freq_base=%g", (double)a->freq_base);
    REQUIRE(a->neox <= 1, "rope: neox=%u", a->neox);
    REQUIRE_BUFFER("rope", sizes, 0, "x", (uint64_t)a->T * a->H, a->Dh, 4);
    REQUIRE_BUFFER("rope", sizes, 1, "pos", a->T, 4, 1);
    REQUIRE(a->has_factors <= 1, "rope: has_factors=%u", a->has_factors);
    if (a->has_factors)
        REQUIRE_BUFFER("rope", sizes, 2, "factors", a->n_rot / 2, 4, 1);
    *l = (hx_cl_launch){.kernel = a->neox ? "rope_neox" : "rope_norm", .work_dim = 3,
                        .global = {round_up(a->n_rot / 2, 16), a->H, a->T}, .local = {16, 1, 1}};
    arg_buffer(l, 0);
    arg_buffer(l, 1);
    arg_value(l, &a->T, 4);
    arg_value(l, &a->H, 4);
    arg_value(l, &a->Dh, 4);
    arg_value(l, &a->n_rot, 4);
    arg_value(l, &a->freq_base, 4);
    arg_value(l, &a->freq_scale, 4);
    arg_buffer(l, a->has_factors ? 2 : 1); /* read only when has_factors */
    arg_value(l, &a->has_factors, 4);
    return 0;
}

/* What kv_store and attention share: the cache type and the meta buffer.
 * The kernels read K and V of one type, stored as they are: K and V of
 * different types or Walsh-Hadamard rotated rows (ops/ops.h) stay with the
 * CPU's attention. */
static int check_kv(const char *op, const hx_kv_layout *kv, uint32_t kv_type, uint32_t v_type, uint32_t rot_k,
                    uint32_t rot_v, uint32_t Hkv, uint32_t Dh, const size_t *sizes, int meta)
{
    if (v_type != kv_type)
        return (int)hx_error(HX_ERR_UNSUPPORTED, "%s: K cache type %u and V cache type %u (the OpenCL kernels take "
                                                 "one type for both)",
                             op, kv_type, v_type);
    if (rot_k || rot_v)
        return (int)hx_error(HX_ERR_UNSUPPORTED, "%s: rows stored Walsh-Hadamard rotated (the OpenCL kernels read "
                                                 "plain rows; the CPU's take rotated ones)",
                             op);
    if (kv_type != T_F32 && kv_type != T_F16 && kv_type != T_Q8_0)
        return (int)hx_error(HX_ERR_UNSUPPORTED, "%s: KV type %u (the OpenCL kernels take F32, F16 and Q8_0)", op,
                             kv_type);
    REQUIRE(Hkv > 0 && Dh > 0, "%s: Hkv=%u, Dh=%u", op, Hkv, Dh);
    REQUIRE(kv_type != T_Q8_0 || Dh % 32 == 0, "%s: a Q8_0 cache needs Dh (%u) a multiple of 32", op, Dh);
    REQUIRE(kv->block_size > 0, "%s: block_size=0", op);
    uint64_t ints = 3 * (uint64_t)kv->T + (uint64_t)kv->S * kv->max_blocks;
    REQUIRE_BUFFER(op, sizes, meta, "meta", ints, 4, 1);
    return 0;
}

int hx_cl_launch_kv_store(const void *args, const size_t *sizes, hx_cl_launch *l)
{
    const hx_op_kv_store *a = args;
    if (a->center_k)
        return (int)hx_error(HX_ERR_UNSUPPORTED, "kv_store: keys stored centred (the OpenCL kernels store plain "
                                                 "rows; the CPU's centre them)");
    int rc = check_kv("kv_store", &a->kv, a->kv_type, a->v_type, a->rot_k, a->rot_v, a->Hkv, a->Dh, sizes, 4);
    if (rc)
        return rc;
    REQUIRE_BUFFER("kv_store", sizes, 0, "k", (uint64_t)a->kv.T * a->Hkv, a->Dh, 4);
    REQUIRE_BUFFER("kv_store", sizes, 1, "v", (uint64_t)a->kv.T * a->Hkv, a->Dh, 4);
    int q8 = a->kv_type == T_Q8_0;
    *l = (hx_cl_launch){.kernel = q8 ? "kv_store_q8_0" : a->kv_type == T_F32 ? "kv_store_f32" : "kv_store_f16",
                        .work_dim = 3,
                        .global = {q8 ? a->Dh / 32 : round_up(a->Dh, 32), a->Hkv, a->kv.T},
                        .local = {q8 ? 1 : 32, 1, 1}};
    for (int i = 0; i < 5; i++)
        arg_buffer(l, i);
    arg_value(l, &a->kv.T, 4);
    arg_value(l, &a->Hkv, 4);
    arg_value(l, &a->Dh, 4);
    arg_value(l, &sizes[2], 8);
    arg_value(l, &sizes[3], 8);
    arg_buffer(l, HX_OPENCL_ARG_STATUS);
    return 0;
}

/* The arguments attention's kernels share: their n buffers, then the
 * layout, heads, scale, the caches' sizes and the sliding window (0: none). */
static void attention_args(hx_cl_launch *l, const hx_op_attention *a, const size_t *sizes, int n)
{
    for (int i = 0; i < n; i++)
        arg_buffer(l, i);
    arg_value(l, &a->kv.T, 4);
    arg_value(l, &a->kv.S, 4);
    arg_value(l, &a->kv.max_blocks, 4);
    arg_value(l, &a->kv.block_size, 4);
    arg_value(l, &a->Hq, 4);
    arg_value(l, &a->Hkv, 4);
    arg_value(l, &a->Dh, 4);
    arg_value(l, &a->scale, 4);
    arg_value(l, &sizes[1], 8);
    arg_value(l, &sizes[2], 8);
    arg_value(l, &a->window, 4);
}

/* Into how many shares a decode cuts each token's keys (flash-decoding):
 * enough work-groups over the batch's tokens and KV heads to fill a GPU
 * (about DECODE_GROUPS), never a share under DECODE_SHARE_KEYS keys of
 * the longest context, so a short one runs as one share with no merge. */
#define DECODE_GROUPS 256
#define DECODE_SHARE_KEYS 256
#define DECODE_SHARES_MAX 64

static uint32_t decode_shares(const hx_op_attention *a)
{
    const uint64_t keys = (uint64_t)a->kv.max_blocks * a->kv.block_size, groups = (uint64_t)a->kv.T * a->Hkv;
    uint64_t n = (keys + DECODE_SHARE_KEYS - 1) / DECODE_SHARE_KEYS, fill = (DECODE_GROUPS + groups - 1) / groups;
    n = n < fill ? n : fill;
    n = n < DECODE_SHARES_MAX ? n : DECODE_SHARES_MAX;
    return n ? (uint32_t)n : 1;
}

int hx_cl_launch_attention(const void *args, const size_t *sizes, hx_cl_launch *l)
{
    const hx_op_attention *a = args;
    int rc = check_kv("attention", &a->kv, a->kv_type, a->v_type, a->rot_k, a->rot_v, a->Hkv, a->Dh, sizes, 3);
    if (rc)
        return rc;
    REQUIRE(a->Hq % a->Hkv == 0, "attention: Hq=%u is not a multiple of Hkv=%u", a->Hq, a->Hkv);
    if (a->Dh > HX_CL_ATTENTION_DH_MAX)
        return (int)hx_error(HX_ERR_UNSUPPORTED, "attention: Dh=%u (the OpenCL kernels hold at most %d)", a->Dh,
                             HX_CL_ATTENTION_DH_MAX);
    REQUIRE_BUFFER("attention", sizes, 0, "q", (uint64_t)a->kv.T * a->Hq, a->Dh, 4);
    REQUIRE_BUFFER("attention", sizes, 4, "out", (uint64_t)a->kv.T * a->Hq, a->Dh, 4);
    /* [wide][decode][type]: heads over DH_NARROW take the _dh256 set. */
    static const char *const kernels[2][2][3] = {
        {{"attention_prefill_f32", "attention_prefill_f16", "attention_prefill_q8_0"},
         {"attention_decode_f32", "attention_decode_f16", "attention_decode_q8_0"}},
        {{"attention_prefill_f32_dh256", "attention_prefill_f16_dh256", "attention_prefill_q8_0_dh256"},
         {"attention_decode_f32_dh256", "attention_decode_f16_dh256", "attention_decode_q8_0_dh256"}},
    };
    uint32_t rep = a->Hq / a->Hkv;
    int type = a->kv_type == T_F32 ? 0 : a->kv_type == T_F16 ? 1 : 2, wide = a->Dh > HX_CL_ATTENTION_DH_NARROW;
    /* One token per sequence is a decode step: split each query's keys over
     * work-groups and their items.  Otherwise tile the queries (prefill,
     * mixed batches). */
    if (a->kv.T > a->kv.S || rep > 64) {
        *l = (hx_cl_launch){.kernel = kernels[wide][0][type], .work_dim = 2,
                            .global = {round_up((size_t)a->kv.T * rep, 16) / 16 * 64, a->Hkv}, .local = {64, 1}};
        attention_args(l, a, sizes, 5);
        arg_buffer(l, HX_OPENCL_ARG_STATUS);
        return 0;
    }
    const uint32_t nsplit = decode_shares(a);
    *l = (hx_cl_launch){.kernel = kernels[wide][1][type], .work_dim = 3,
                        .global = {(size_t)64 * nsplit, a->kv.T, a->Hkv}, .local = {64, 1, 1}};
    attention_args(l, a, sizes, 5);
    arg_buffer(l, HX_OPENCL_ARG_STATUS);
    if (nsplit > 1) {
        l->then_kernel = "attention_decode_merge";
        l->then_global[0] = 64, l->then_global[1] = a->kv.T, l->then_global[2] = a->Hq;
        l->then_local[0] = 64, l->then_local[1] = l->then_local[2] = 1;
        l->scratch = (size_t)a->kv.T * a->Hq * nsplit * (a->Dh + 2) * 4;
        arg_buffer(l, HX_CL_ARG_SCRATCH);
    } else {
        arg_buffer(l, 4); /* unused: with one share the kernel writes the output */
    }
    memcpy(l->values, &nsplit, sizeof nsplit); /* the kernel's uint, in the launch's own storage */
    arg_value(l, l->values, sizeof nsplit);
    return 0;
}

int hx_cl_launch_attention_part(const void *args, const size_t *sizes, hx_cl_launch *l)
{
    const hx_op_attention_part *p = args;
    const hx_op_attention *a = &p->at;
    int rc = check_kv("attention_part", &a->kv, a->kv_type, a->v_type, a->rot_k, a->rot_v, a->Hkv, a->Dh, sizes, 3);
    if (rc)
        return rc;
    REQUIRE(a->Hq % a->Hkv == 0, "attention_part: Hq=%u is not a multiple of Hkv=%u", a->Hq, a->Hkv);
    REQUIRE(p->recent > 0 && p->part <= 1, "attention_part: recent=%u, part=%u", p->recent, p->part);
    if (a->Dh > HX_CL_ATTENTION_DH_MAX)
        return (int)hx_error(HX_ERR_UNSUPPORTED, "attention_part: Dh=%u (the OpenCL kernels hold at most %d)", a->Dh,
                             HX_CL_ATTENTION_DH_MAX);
    const uint64_t rows = (uint64_t)a->kv.T * a->Hq;
    REQUIRE_BUFFER("attention_part", sizes, 0, "q", rows, a->Dh, 4);
    REQUIRE_BUFFER("attention_part", sizes, 4, "out", rows, a->Dh, 4);
    REQUIRE_BUFFER("attention_part", sizes, 5, "stats", rows, 2, 4);
    *l = (hx_cl_launch){.kernel = a->kv_type == T_F32   ? "attention_part_f32"
                                  : a->kv_type == T_F16 ? "attention_part_f16"
                                                        : "attention_part_q8_0",
                        .work_dim = 1, .global = {round_up(rows, 64)}, .local = {64}};
    attention_args(l, a, sizes, 6);
    arg_value(l, &p->recent, 4);
    arg_value(l, &p->part, 4);
    arg_buffer(l, HX_OPENCL_ARG_STATUS);
    return 0;
}

int hx_cl_launch_attn_merge(const void *args, const size_t *sizes, hx_cl_launch *l)
{
    const hx_op_attn_merge *a = args;
    REQUIRE(a->Dh > 0, "attn_merge: Dh=0");
    for (int i = 0; i < 5; i += 2)
        REQUIRE_BUFFER("attn_merge", sizes, i, i == 4 ? "out" : "a part's out", a->rows, a->Dh, 4);
    for (int i = 1; i < 4; i += 2)
        REQUIRE_BUFFER("attn_merge", sizes, i, "a part's stats", a->rows, 2, 4);
    *l = (hx_cl_launch){.kernel = "attn_merge_f32", .work_dim = 1, .global = {round_up(a->rows * a->Dh, 64)},
                        .local = {64}};
    for (int i = 0; i < 5; i++)
        arg_buffer(l, i);
    arg_value(l, &a->rows, 8);
    arg_value(l, &a->Dh, 4);
    return 0;
}

int hx_cl_launch_add(const void *args, const size_t *sizes, hx_cl_launch *l)
{
    const hx_op_add *a = args;
    REQUIRE_BUFFER("add", sizes, 0, "x", a->n, 4, 1);
    REQUIRE_BUFFER("add", sizes, 1, "y", a->n, 4, 1);
    *l = (hx_cl_launch){.kernel = "add_f32", .work_dim = 1, .global = {round_up(a->n, 64)}, .local = {64}};
    arg_buffer(l, 0);
    arg_buffer(l, 1);
    arg_value(l, &a->n, 8);
    return 0;
}

/* SwiGLU and GeGLU: out = act(gate) * up over n floats, one kernel each. */
static int gated_unit(const char *op, const char *kernel, const uint64_t *n, const size_t *sizes, hx_cl_launch *l)
{
    for (int i = 0; i < 3; i++)
        REQUIRE_BUFFER(op, sizes, i, i == 0 ? "gate" : i == 1 ? "up" : "out", *n, 4, 1);
    *l = (hx_cl_launch){.kernel = kernel, .work_dim = 1, .global = {round_up(*n, 64)}, .local = {64}};
    for (int i = 0; i < 3; i++)
        arg_buffer(l, i);
    arg_value(l, n, 8);
    return 0;
}

int hx_cl_launch_swiglu(const void *args, const size_t *sizes, hx_cl_launch *l)
{
    return gated_unit("swiglu", "swiglu_f32", &((const hx_op_swiglu *)args)->n, sizes, l);
}

/* ---- Gemma's and the experts' ops (kernels_cl/activation.cl, moe.cl) ---- */

int hx_cl_launch_scale(const void *args, const size_t *sizes, hx_cl_launch *l)
{
    const hx_op_scale *a = args;
    REQUIRE(a->cap >= 0.0f, "scale: cap=%g", (double)a->cap);
    REQUIRE_BUFFER("scale", sizes, 0, "x", a->n, 4, 1);
    *l = (hx_cl_launch){.kernel = "scale_f32", .work_dim = 1, .global = {round_up(a->n, 64)}, .local = {64}};
    arg_buffer(l, 0);
    arg_value(l, &a->n, 8);
    arg_value(l, &a->scale, 4);
    arg_value(l, &a->cap, 4);
    return 0;
}

int hx_cl_launch_geglu(const void *args, const size_t *sizes, hx_cl_launch *l)
{
    return gated_unit("geglu", "geglu_f32", &((const hx_op_geglu *)args)->n, sizes, l);
}

int hx_cl_launch_add_gated(const void *args, const size_t *sizes, hx_cl_launch *l)
{
    const hx_op_add_gated *a = args;
    REQUIRE_BUFFER("add_gated", sizes, 0, "x", a->T, a->D, 4);
    REQUIRE_BUFFER("add_gated", sizes, 1, "y", a->T, a->D, 4);
    REQUIRE_BUFFER("add_gated", sizes, 2, "g", a->T, 4, 1);
    *l = (hx_cl_launch){.kernel = "add_gated_f32", .work_dim = 1,
                        .global = {round_up((uint64_t)a->T * a->D, 64)}, .local = {64}};
    for (int i = 0; i < 3; i++)
        arg_buffer(l, i);
    arg_value(l, &a->T, 4);
    arg_value(l, &a->D, 4);
    return 0;
}

int hx_cl_launch_moe_route(const void *args, const size_t *sizes, hx_cl_launch *l)
{
    const hx_op_moe_route *a = args;
    REQUIRE(a->k > 0 && a->k <= HX_MOE_MAX_USED && a->k <= a->E && a->E <= 1024,
            "moe_route: k=%u of E=%u experts (1 <= k <= %d, k <= E <= 1024)", a->k, a->E, HX_MOE_MAX_USED);
    REQUIRE(a->layer < a->layers, "moe_route: layer %u of %u", a->layer, a->layers);
    REQUIRE(a->norm <= 1, "moe_route: norm=%u", a->norm);
    REQUIRE_BUFFER("moe_route", sizes, 0, "logits", a->T, a->E, 4);
    REQUIRE_BUFFER("moe_route", sizes, 1, "route", hx_moe_route_words(a->T, a->k, a->E), 4, 1);
    REQUIRE_BUFFER("moe_route", sizes, 2, "counts", a->layers, a->E, 8);
    /* One work-group: the counting sort needs every token's choice. */
    *l = (hx_cl_launch){.kernel = "moe_route_f32", .work_dim = 1, .global = {64}, .local = {64}};
    for (int i = 0; i < 3; i++)
        arg_buffer(l, i);
    arg_value(l, &a->T, 4);
    arg_value(l, &a->E, 4);
    arg_value(l, &a->k, 4);
    arg_value(l, &a->norm, 4);
    arg_value(l, &a->layer, 4);
    return 0;
}

/* An expert matrix of E x N rows of K elements in `type`. */
static int check_experts(const char *op, const char *what, uint32_t type, uint32_t E, uint32_t N, uint32_t K,
                         const size_t *sizes, int i)
{
    const cl_type *t = type_of(type);
    if (!t)
        return (int)hx_error(HX_ERR_UNSUPPORTED, "%s: %s weights of type %u have no OpenCL kernel", op, what, type);
    REQUIRE(K % t->block == 0, "%s: %s rows of %u are not a multiple of the %s block (%u)", op, what, K, t->name,
            t->block);
    REQUIRE_BUFFER(op, sizes, i, what, (uint64_t)E * N, K / t->block, t->bytes);
    return 0;
}

int hx_cl_launch_moe_gate_up(const void *args, const size_t *sizes, hx_cl_launch *l)
{
    const hx_op_moe_gate_up *a = args;
    if (a->k == 0 || a->k > HX_MOE_MAX_USED || a->act > 1)
        return (int)hx_error(HX_ERR_UNSUPPORTED, "moe_gate_up: k=%u, act=%u", a->k, a->act);
    const uint32_t n = a->e_n ? a->e_n : a->E; /* the experts its weights hold */
    if (a->e_n && (a->e_lo >= a->E || a->e_n > a->E - a->e_lo))
        return (int)hx_error(HX_ERR_INVALID_ARG, "moe_gate_up: group %u+%u beyond %u experts", a->e_lo, a->e_n, a->E);
    int rc = check_experts("moe_gate_up", "gate", a->gate_type, n, a->F, a->D, sizes, 2);
    if (!rc)
        rc = check_experts("moe_gate_up", "up", a->up_type, n, a->F, a->D, sizes, 3);
    if (rc)
        return rc;
    const uint64_t tk = (uint64_t)a->T * a->k;
    REQUIRE_BUFFER("moe_gate_up", sizes, 0, "x", a->T, a->D, 4);
    REQUIRE_BUFFER("moe_gate_up", sizes, 1, "route", hx_moe_route_words(a->T, a->k, a->E), 4, 1);
    REQUIRE_BUFFER("moe_gate_up", sizes, 4, "h", tk, a->F, 4);
    *l = (hx_cl_launch){.kernel = "moe_gate_up_f32", .work_dim = 2, .global = {round_up(a->F, 64), tk},
                        .local = {64, 1}};
    for (int i = 0; i < 5; i++)
        arg_buffer(l, i);
    arg_value(l, &a->T, 4);
    arg_value(l, &a->D, 4);
    arg_value(l, &a->F, 4);
    arg_value(l, &a->E, 4);
    arg_value(l, &a->k, 4);
    arg_value(l, &a->gate_type, 4);
    arg_value(l, &a->up_type, 4);
    arg_value(l, &a->act, 4);
    arg_value(l, &a->e_lo, 4);
    arg_value(l, &a->e_n, 4);
    arg_buffer(l, HX_OPENCL_ARG_STATUS);
    return 0;
}

int hx_cl_launch_moe_down(const void *args, const size_t *sizes, hx_cl_launch *l)
{
    const hx_op_moe_down *a = args;
    if (a->k == 0 || a->k > HX_MOE_MAX_USED)
        return (int)hx_error(HX_ERR_UNSUPPORTED, "moe_down: k=%u", a->k);
    if (a->e_n && (a->e_lo >= a->E || a->e_n > a->E - a->e_lo))
        return (int)hx_error(HX_ERR_INVALID_ARG, "moe_down: group %u+%u beyond %u experts", a->e_lo, a->e_n, a->E);
    int rc = check_experts("moe_down", "down", a->down_type, a->e_n ? a->e_n : a->E, a->D, a->F, sizes, 2);
    if (rc)
        return rc;
    REQUIRE_BUFFER("moe_down", sizes, 0, "h", (uint64_t)a->T * a->k, a->F, 4);
    REQUIRE_BUFFER("moe_down", sizes, 1, "route", hx_moe_route_words(a->T, a->k, a->E), 4, 1);
    REQUIRE_BUFFER("moe_down", sizes, 3, "out", a->T, a->D, 4);
    *l = (hx_cl_launch){.kernel = "moe_down_f32", .work_dim = 2, .global = {round_up(a->D, 64), a->T},
                        .local = {64, 1}};
    for (int i = 0; i < 4; i++)
        arg_buffer(l, i);
    arg_value(l, &a->T, 4);
    arg_value(l, &a->D, 4);
    arg_value(l, &a->F, 4);
    arg_value(l, &a->E, 4);
    arg_value(l, &a->k, 4);
    arg_value(l, &a->down_type, 4);
    arg_value(l, &a->e_lo, 4);
    arg_value(l, &a->e_n, 4);
    arg_value(l, &a->accumulate, 4);
    arg_buffer(l, HX_OPENCL_ARG_STATUS);
    return 0;
}
