/* The transformer layer's operations: codelet names, their buffers (in
 * order, with access modes) and argument blocks.  Every device family that
 * implements an op implements exactly this contract, so the partitioner can
 * place any task on any capable device and the tests can compare devices.
 *
 * Conventions: activations are F32, row-major, one row per token; weights
 * are GGUF tensors, row n of a [N][K] matrix holding K contiguous elements
 * in the tensor's type; a "meta" buffer holds int32 bookkeeping.
 * Each op's id, name and cost are in ops/op_list.h. */
#ifndef HX_OPS_OPS_H
#define HX_OPS_OPS_H

#include <stdint.h>

/* "get_rows": table (R, [V][D] of `type`), ids (R, int32 [T]), out (W, f32 [T][D]). */
typedef struct {
    uint32_t type, T, D;
} hx_op_get_rows;

/* "rmsnorm": x (R, [T][D]), w (R, f32 [D]), y (W, [T][D]);
 * y = x / sqrt(mean(x^2) + eps) * w. */
typedef struct {
    uint32_t T, D;
    float eps;
} hx_op_rmsnorm;

/* "matmul": W (R, [N][K] of `wtype`), x (R, f32 [T][K]), y (W, f32 [T][N]),
 * and when has_bias, bias (R, f32 [N]);  y = x W^T (+ bias).
 * Quantized weights are multiplied against activations quantized to the
 * type's vec_dot partner (Q8_0 / Q8_K), as llama.cpp does. */
typedef struct {
    uint32_t wtype, T, N, K;
    uint32_t has_bias;
} hx_op_matmul;

/* "matmul_multi": up to HX_MATMUL_MULTI_MAX matmuls of one input (a
 * layer's Q/K/V projections, its gate/up pair) as one task, so the input
 * is read and quantized once and one team run covers every output row.
 * Buffers: x (R, f32 [T][K]); then per part i: W_i (R, [N_i][K] of
 * wtype_i) at 1 + 2i and y_i (W, f32 [T][N_i]) at 2 + 2i; then the biases
 * (R, f32 [N_i]) of the parts whose bit is set in has_bias, in part order.
 * Each y_i is exactly what "matmul" with W_i (and its bias) writes. */
#define HX_MATMUL_MULTI_MAX 3
typedef struct {
    uint32_t n, T, K;
    uint32_t wtype[HX_MATMUL_MULTI_MAX], N[HX_MATMUL_MULTI_MAX];
    uint32_t has_bias; /* bit i: part i has a bias */
} hx_op_matmul_multi;

/* A part count the op has, and bias bits of those parts only. */
static inline int hx_matmul_multi_valid(const hx_op_matmul_multi *a)
{
    return a->n >= 1 && a->n <= HX_MATMUL_MULTI_MAX && !(a->has_bias >> a->n);
}
static inline int hx_matmul_multi_w(int i) { return 1 + 2 * i; }
static inline int hx_matmul_multi_y(int i) { return 2 + 2 * i; }
/* The buffer index of part i's bias, or -1 when it has none. */
static inline int hx_matmul_multi_bias(const hx_op_matmul_multi *a, int i)
{
    if (!(a->has_bias >> i & 1))
        return -1;
    int k = 1 + 2 * (int)a->n;
    for (int j = 0; j < i; j++)
        k += (int)(a->has_bias >> j & 1);
    return k;
}
static inline int hx_matmul_multi_nbuffers(const hx_op_matmul_multi *a)
{
    int n = 1 + 2 * (int)a->n;
    for (uint32_t j = 0; j < a->n; j++)
        n += (int)(a->has_bias >> j & 1);
    return n;
}
/* Part i as the single matmul it stands for. */
static inline hx_op_matmul hx_matmul_multi_part(const hx_op_matmul_multi *a, int i)
{
    hx_op_matmul m = {a->wtype[i], a->T, a->N[i], a->K, a->has_bias >> i & 1};
    return m;
}

/* "rope": x (RW, f32 [T][H][Dh]), pos (R, int32 [T]), and when
 * has_factors, factors (R, f32 [n_rot/2]).  Rotates the first n_rot dims
 * of each head: pairs (2i, 2i+1) in normal mode, (i, i+n_rot/2) in neox
 * mode; theta = pos * freq_scale * base^(-2i/n_rot) / factors[i] (Llama
 * 3.1's rope_freqs.weight, as ggml_rope_ext's freq_factors; 1 without). */
typedef struct {
    uint32_t T, H, Dh, n_rot;
    float freq_base, freq_scale;
    uint32_t neox;
    uint32_t has_factors;
} hx_op_rope;

/* Paged KV cache: per layer one K and one V buffer of n_blocks blocks, each
 * block_size tokens of [Hkv][Dh], K's in kv_type and V's in v_type (F32,
 * F16, Q8_0 or Q4_0; the two may differ, as llama.cpp's -ctk / -ctv).
 *
 * A quantized cache loses less when each head's rows are first rotated
 * by an orthonormal Walsh-Hadamard matrix (llama.cpp does the same): an
 * outlier coordinate is spread over the whole group, so one block scale
 * no longer flattens its 31 neighbours.  rot_k (rot_v): the width of the
 * rotation applied to every consecutive group of that many values of a
 * head's K (V) row before it is stored, 0 = none; a power of two >= 2
 * dividing Dh.  The queries meet rotated keys rotated the same way (the
 * dot products are unchanged), and the sum of rotated values is rotated
 * back (H is its own inverse), so the ops' inputs and outputs are the
 * plain ones whatever the cache holds.
 * A key row may also be stored centred: center_k set, a sixth buffer
 * k_center (R, f32 [Hkv][Dh]) is subtracted from each head's key before it
 * is rotated and stored.  Attention reads the centred keys as they are:
 * every key a query meets had the same vector c subtracted, so each of its
 * scores moves by the same q.c, which the softmax cancels (and the two
 * parts of attention_part alike, which attn_merge then cancels).  A model
 * whose keys carry a large constant part (Qwen2's K bias, through RoPE's
 * slow pairs) keeps it out of the blocks' scales that way (model/kv_center.c).
 * A quantized row's blocks are stored with a fitted scale: Q8_0's as
 * ops/kv_fit.h defines it, the same bytes on every device; Q4_0's (the
 * CPU's only) as kernels_cpu/kv_fit.c does.
 * The meta buffer of a batch (int32), laid out as:
 *   [0, T)                 slot of each token: block * block_size + offset
 *   [T, 2T)                position of each token in its sequence
 *   [2T, 3T)               batch-local sequence index of each token
 *   [3T, 3T + S*max_blocks) block table of each of the S sequences        */
typedef struct {
    uint32_t T, S, max_blocks, block_size;
} hx_kv_layout;

static inline uint32_t hx_meta_ints(const hx_kv_layout *l) { return 3 * l->T + l->S * l->max_blocks; }

/* "kv_store": k (R, f32 [T][Hkv][Dh]), v (R, same), k_cache (RW),
 * v_cache (RW), meta (R), and with center_k, k_center (R, f32 [Hkv][Dh]). */
typedef struct {
    hx_kv_layout kv;
    uint32_t Hkv, Dh, kv_type;
    uint32_t v_type;       /* the V cache's type */
    uint32_t rot_k, rot_v; /* Walsh-Hadamard widths (see above), 0 = none */
    uint32_t center_k;     /* 1: keys stored centred (see above) */
} hx_op_kv_store;

/* "attention": q (R, f32 [T][Hq][Dh]), k_cache (R), v_cache (R), meta (R),
 * out (W, f32 [T][Hq][Dh]).  Token t attends to positions 0..pos[t] of its
 * sequence (causal); query head h uses KV head h / (Hq / Hkv). */
typedef struct {
    hx_kv_layout kv;
    uint32_t Hq, Hkv, Dh, kv_type;
    float scale;
    /* A sliding window: token t attends to positions pos[t] - window + 1
     * .. pos[t] only, and its sequence's block table may hold -1 for the
     * blocks wholly before them (returned to the pool).  0 = no window. */
    uint32_t window;
    uint32_t v_type;       /* the V cache's type (kv_type is K's) */
    uint32_t rot_k, rot_v; /* Walsh-Hadamard widths, as kv_store's */
} hx_op_attention;

/* "attention_part": attention over one of two parts of each token's
 * positions, for attention split between the host (older blocks) and a
 * device (recent ones), merged by "attn_merge".  Buffers: attention's five,
 * then stats (W, f32 [T][Hq][2]: the part's largest scaled score and its
 * sum of exp(score - max)).  `out` is the part's softmax-weighted V sum
 * normalized within the part, as kernels_cpu/attn_merge.h's partials.
 * The cut is per token, at a block boundary: the `recent` positions before
 * pos + 1 and back to the start of their first block belong to part 1,
 * cut = (pos + 1 - recent) / block_size * block_size (0 when pos + 1 <=
 * recent); part 0 takes [start, cut), part 1 [max(start, cut), pos], with
 * start attention's (0, or the window's first position).  A part with no
 * position gives max = -INFINITY, sum = 0 and zeros. */
typedef struct {
    hx_op_attention at;
    uint32_t recent; /* > 0 */
    uint32_t part;   /* 0: before the cut, 1: from it */
} hx_op_attention_part;

/* The first position of part 1 for a token at `pos` (see above). */
static inline uint32_t hx_attention_cut(uint32_t pos, uint32_t recent, uint32_t block_size)
{
    return pos + 1 > recent ? (pos + 1 - recent) / block_size * block_size : 0;
}

/* "attn_merge": out0 (R, f32 [rows][Dh]), stats0 (R, f32 [rows][2]), out1,
 * stats1 (the same), out (W, f32 [rows][Dh]): two attention_part results
 * merged (hx_attn_merge_f32's rescale); rows = T * Hq. */
typedef struct {
    uint64_t rows;
    uint32_t Dh;
} hx_op_attn_merge;

/* "kv_shift" (a context shift): k_cache (RW), v_cache (RW), moves (R,
 * int32 [n][2]: source slot, destination slot).  In order, each move
 * copies a slot's values and its keys rotated by `delta` positions
 * (RoPE's angles are linear in the position, so a key at position p
 * rotated by delta is the key at p + delta), requantized to kv_type (a key
 * stored Walsh-Hadamard rotated, rot_k > 0, is rotated back first and
 * again after; a key stored centred, center_k, has its centre added back
 * before RoPE and subtracted again after); values are copied as they are,
 * v_type giving their size.
 * Moves go to lower positions: a destination is never a later move's
 * source.  The RoPE fields are hx_op_rope's; when has_factors, a fourth
 * buffer, factors (R, f32 [n_rot/2]), divides the frequencies as rope's;
 * with center_k, the next buffer is kv_store's k_center. */
typedef struct {
    uint32_t n, Hkv, Dh, kv_type;
    int32_t delta;
    uint32_t n_rot;
    float freq_base, freq_scale;
    uint32_t neox;
    uint32_t has_factors;
    uint32_t v_type, rot_k;
    uint32_t center_k;
} hx_op_kv_shift;

/* "add": x (RW, f32 [n]), y (R, f32 [n]);  x += y. */
typedef struct {
    uint64_t n;
} hx_op_add;

/* "swiglu": gate (R, f32 [n]), up (R, f32 [n]), out (W, f32 [n]);
 * out = silu(gate) * up. */
typedef struct {
    uint64_t n;
} hx_op_swiglu;

/* "scale": x (RW, f32 [n]);  x = x * scale, then, when cap > 0,
 * x = tanh(x * (1 / cap)) * cap (a logit soft-cap, as llama.cpp's
 * scale/tanh/scale).  Gemma's embeddings (scale sqrt(n_embd)), a final
 * soft-cap (scale 1). */
typedef struct {
    uint64_t n;
    float scale, cap;
} hx_op_scale;

/* "geglu": gate (R, f32 [n]), up (R, f32 [n]), out (W, f32 [n]);
 * out = gelu(gate) * up, GELU in its tanh form evaluated as ggml's CPU
 * backend does: on the gate rounded to f16, the result rounded to f16
 * (its lookup table), x itself past +10 and 0 below -10. */
typedef struct {
    uint64_t n;
} hx_op_geglu;

/* "add_gated": x (RW, f32 [T][D]), y (R, f32 [T][D]), g (R, f32 [T]);
 * x[t] += y[t] * sigmoid(g[t]): Qwen2-MoE's shared expert. */
typedef struct {
    uint32_t T, D;
} hx_op_add_gated;

/* Mixture of experts, in three ops over one "route" buffer (int32 words):
 *   [0, T*k)                 ids: the experts of token t, best first, at t*k + j
 *   [T*k, 2*T*k)             their weights (f32)
 *   [2*T*k, 2*T*k + E + 1)   offsets: expert e's entries are order[off[e] .. off[e+1])
 *   then T*k                 order: the entries t*k + j by expert, by token within one
 *   then T*k                 the inverse: where entry t*k + j stands in `order`
 * The experts' rows ("moe_h", "moe_y") are in `order`: each expert's tokens
 * are gathered together, so an expert's weights are read once per batch. */
#define HX_MOE_MAX_USED 16
static inline uint64_t hx_moe_route_words(uint32_t T, uint32_t k, uint32_t E)
{
    return 4ull * T * k + E + 1;
}

/* "moe_route": logits (R, f32 [T][E]: the router's matmul), route (W),
 * counts (RW, uint64 [layers][E]).  Softmax over the E logits, the k
 * largest probabilities (ties to the lower expert), divided by their sum
 * (clamped below at 6.103515625e-5, as llama.cpp) when norm; then
 * counts[layer][e] += tokens routed to e. */
typedef struct {
    uint32_t T, E, k, norm, layer, layers;
} hx_op_moe_route;

/* A group of experts (e_n > 0): the task computes only the entries of
 * experts e_lo .. e_lo + e_n - 1, and its weight buffers hold those
 * experts alone (expert e at row block e - e_lo), so that a layer's
 * experts can live on several devices (the placement planner keeps the
 * most used on a GPU, the rest in host memory).  e_n = 0: all E, at e.
 * `share` (the group's fraction of the T * k entries) and `e_read` (how
 * many of its experts the batch is expected to use) are what the router's
 * statistics predict, for the cost functions alone; 0 = unknown (every
 * entry, and min(T * k, experts) experts read). */

/* "moe_gate_up": x (R, f32 [T][D]), route (R), gate (R, [E][F][D] of
 * gate_type), up (R, [E][F][D] of up_type), h (W, f32 [T*k][F], in
 * route order); h = act(x W_gate,e^T) * (x W_up,e^T) for each entry's
 * token and expert, act SiLU (act 0) or GELU as "geglu" (act 1).  With a
 * group, only its entries' rows of h are written. */
typedef struct {
    uint32_t T, D, F, E, k;
    uint32_t gate_type, up_type, act;
    uint32_t e_lo, e_n;
    float share, e_read;
} hx_op_moe_gate_up;

/* "moe_down": h (R, f32 [T*k][F], route order), route (R), down (R,
 * [E][D][F] of down_type), out (W, f32 [T][D]; RW with accumulate);
 * out[t] = sum over j in order of weight[t][j] * (h[t,j] W_down,e^T), over
 * the group's entries only when it is a group; accumulate adds that sum to
 * out instead of replacing it (the groups after the first). */
typedef struct {
    uint32_t T, D, F, E, k;
    uint32_t down_type;
    uint32_t e_lo, e_n, accumulate;
    float share, e_read;
} hx_op_moe_down;

#endif
