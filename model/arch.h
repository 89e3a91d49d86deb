/* The architecture table: what tells one LLaMA-family architecture's GGUF
 * files from another's, as data.  The loader, the graph builder and the
 * synthetic writer read an entry instead of testing names; adding an
 * architecture is one entry in model/arch.c (plus any op it needs).
 * Internal. */
#ifndef HX_MODEL_ARCH_H
#define HX_MODEL_ARCH_H

#include <stddef.h>
#include <stdint.h>

/* Which pairs a rotation acts on: (2i, 2i+1), or (i, i + n_rot/2). */
typedef enum { HX_ROPE_NORMAL, HX_ROPE_NEOX } hx_rope_kind;

/* The weights one layer may have, by the role the graph builder gives
 * them.  The order is the synthetic writer's: it draws its random weights
 * in this order, so moving a slot changes every synthetic model. */
typedef enum {
    HX_LW_ATTN_NORM, HX_LW_Q, HX_LW_K, HX_LW_V, HX_LW_O,
    HX_LW_FFN_NORM, HX_LW_GATE, HX_LW_UP, HX_LW_DOWN,
    HX_LW_Q_BIAS, HX_LW_K_BIAS, HX_LW_V_BIAS,
    /* Qwen3's and Gemma 3's RMS norms of each query and key head, and
     * Gemma's norms of the attention's and the FFN's outputs. */
    HX_LW_Q_NORM, HX_LW_K_NORM, HX_LW_ATTN_POST_NORM, HX_LW_FFN_POST_NORM,
    /* Mixture of experts: the router, the experts' matrices (3-D: one
     * [rows][row length] matrix per expert, experts outermost), and
     * Qwen2-MoE's shared expert with its sigmoid gate. */
    HX_LW_GATE_INP, HX_LW_GATE_EXPS, HX_LW_UP_EXPS, HX_LW_DOWN_EXPS,
    HX_LW_GATE_INP_SHEXP, HX_LW_GATE_SHEXP, HX_LW_UP_SHEXP, HX_LW_DOWN_SHEXP,
    HX_LAYER_SLOTS
} hx_layer_slot;

/* A dimension of a weight, resolved against a model's shape: Q is
 * n_head * head_dim (n_embd unless the file says attention.key_length),
 * HEAD head_dim, FF_EXP an expert's FFN width, FF_SHEXP the shared one's. */
typedef enum {
    HX_DIM_ONE, HX_DIM_EMBD, HX_DIM_KV, HX_DIM_FF, HX_DIM_Q, HX_DIM_HEAD, HX_DIM_EXPERTS, HX_DIM_FF_EXP,
    HX_DIM_FF_SHEXP, HX_DIMS
} hx_dim;

/* The shape of a layer slot, [experts][rows][row length], the same for
 * every architecture: it is what the graph builder's ops expect. */
typedef struct {
    hx_dim ne0, ne1, ne2;
} hx_layer_slot_shape;
extern const hx_layer_slot_shape hx_layer_slot_shapes[HX_LAYER_SLOTS];

/* The hyper-parameters read from "<key_prefix>.<key>". */
typedef enum {
    HX_HP_CTX, HX_HP_EMBD, HX_HP_LAYERS, HX_HP_FF, HX_HP_HEADS, HX_HP_HEADS_KV,
    HX_HP_ROPE_DIMS, HX_HP_ROPE_BASE, HX_HP_NORM_EPS, HX_HP_ROPE_SCALING_TYPE, HX_HP_ROPE_SCALING_FACTOR,
    HX_HP_SLIDING_WINDOW, HX_HP_KEY_LENGTH, HX_HP_VALUE_LENGTH, HX_HP_EXPERTS, HX_HP_EXPERTS_USED,
    HX_HP_FF_EXP, HX_HP_FF_SHEXP, HX_HP_ROPE_BASE_SWA, HX_HP_SWA_PATTERN, HX_HP_LOGIT_SOFTCAP,
    HX_HPARAMS
} hx_hparam;

/* DENSE: required in a model without experts, absent in one with them;
 * EXPERT: the other way round (a "llama" file may be either). */
typedef enum { HX_TENSOR_NONE, HX_TENSOR_OPTIONAL, HX_TENSOR_REQUIRED, HX_TENSOR_DENSE, HX_TENSOR_EXPERT } hx_tensor_presence;

/* The FFN's gate activation: SiLU (SwiGLU) or GELU, tanh form (GeGLU). */
typedef enum { HX_FFN_SILU, HX_FFN_GELU } hx_ffn_act;

typedef struct {
    const char *name;       /* general.architecture */
    const char *key_prefix; /* of the hyper-parameter keys */
    const char *key[HX_HPARAMS]; /* NULL: the architecture ignores that key */
    hx_rope_kind rope;
    /* What a model of this architecture usually has: the synthetic writer
     * writes them.  A file that is silent gets llama.cpp's defaults
     * (10000, 1e-5) whatever its architecture, as in llama.cpp. */
    float typical_rope_base, typical_norm_eps;
    const char *token_embd, *output_norm, *output; /* output is optional: tied to token_embd */
    /* After "blk.<n>.".  Slots that name the same tensor are row ranges
     * of it, in slot order (Phi-3's attn_qkv holds Q, K then V rows; its
     * ffn_up holds gate then up): each slot's weight is a view of its rows
     * in the mapped file, no copy, and the tensor has their rows together. */
    const char *layer_tensor[HX_LAYER_SLOTS];
    hx_tensor_presence layer_presence[HX_LAYER_SLOTS];
    /* Llama 3.1's rope frequency factors (one tensor for every layer,
     * n_rot/2 floats dividing each pair's frequency), optional; NULL when
     * the architecture has none. */
    const char *rope_freqs;
    /* Tensors of a variant hetero does not run, refused by name with
     * `unsupported_why` (Phi-3 128k's LongRoPE factors); NULL-terminated. */
    const char *unsupported[3];
    const char *unsupported_why;
    hx_ffn_act ffn_act;
    /* Gemma: the embeddings are multiplied by sqrt(n_embd); its query
     * scale is 1/sqrt(n_embd / n_head) in the 62-layer (27B) model, as
     * llama.cpp and gemma_pytorch have it, 1/sqrt(head_dim) otherwise. */
    int gemma;
    /* Layers alternate sliding-window and global attention: within each
     * group of <swa_pattern> layers (attention.sliding_window_pattern,
     * default `swa_pattern`) all but the last attend to the window, with
     * rope.freq_base_swa (default 10000) as their RoPE base.  0: one kind. */
    uint32_t swa_pattern;
    /* The router's top-k weights are divided by their sum (Mixtral,
     * Qwen3-MoE; Qwen2-MoE keeps them as the softmax gave them). */
    int moe_norm_topk;
    /* Without expert_feed_forward_length an expert is feed_forward_length
     * wide (Mixtral), or that divided by expert_used_count (the Qwen MoEs,
     * as llama.cpp reads them). */
    int ff_exp_per_used;
} hx_arch;

/* Whether a slot's tensor must be, may be, or cannot be in a model of
 * this architecture, with or without experts. */
hx_tensor_presence hx_arch_presence(const hx_arch *a, hx_layer_slot slot, int has_experts);

/* The first slot naming the same tensor as `slot` (itself when unfused),
 * and the row ranges: *first_row of `slot` within it, *rows_total of the
 * tensor, each in units of the slots' resolved dims. */
hx_layer_slot hx_arch_tensor_owner(const hx_arch *a, hx_layer_slot slot);
void hx_arch_slot_rows(const hx_arch *a, hx_layer_slot slot, const uint64_t *dims, uint64_t *first_row,
                       uint64_t *rows_total);

/* The entry for general.architecture `name`, or NULL. */
const hx_arch *hx_arch_find(const char *name);
/* The i-th entry, or NULL past the last. */
const hx_arch *hx_arch_at(size_t i);
/* "llama, mistral, ..." into buf: for refusals. */
void hx_arch_names(char *buf, size_t cap);

#endif
