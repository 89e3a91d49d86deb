/* The architecture table (model/arch.h). */
#include <stdio.h>
#include <string.h>

#include "model/arch.h"

const hx_layer_slot_shape hx_layer_slot_shapes[HX_LAYER_SLOTS] = {
    [HX_LW_ATTN_NORM] = {.ne0 = HX_DIM_EMBD, .ne1 = HX_DIM_ONE},
    [HX_LW_Q] = {.ne0 = HX_DIM_EMBD, .ne1 = HX_DIM_Q},
    [HX_LW_K] = {.ne0 = HX_DIM_EMBD, .ne1 = HX_DIM_KV},
    [HX_LW_V] = {.ne0 = HX_DIM_EMBD, .ne1 = HX_DIM_KV},
    [HX_LW_O] = {.ne0 = HX_DIM_Q, .ne1 = HX_DIM_EMBD},
    [HX_LW_FFN_NORM] = {.ne0 = HX_DIM_EMBD, .ne1 = HX_DIM_ONE},
    [HX_LW_GATE] = {.ne0 = HX_DIM_EMBD, .ne1 = HX_DIM_FF},
    [HX_LW_UP] = {.ne0 = HX_DIM_EMBD, .ne1 = HX_DIM_FF},
    [HX_LW_DOWN] = {.ne0 = HX_DIM_FF, .ne1 = HX_DIM_EMBD},
    [HX_LW_Q_BIAS] = {.ne0 = HX_DIM_Q, .ne1 = HX_DIM_ONE},
    [HX_LW_K_BIAS] = {.ne0 = HX_DIM_KV, .ne1 = HX_DIM_ONE},
    [HX_LW_V_BIAS] = {.ne0 = HX_DIM_KV, .ne1 = HX_DIM_ONE},
    [HX_LW_Q_NORM] = {.ne0 = HX_DIM_HEAD, .ne1 = HX_DIM_ONE},
    [HX_LW_K_NORM] = {.ne0 = HX_DIM_HEAD, .ne1 = HX_DIM_ONE},
    [HX_LW_ATTN_POST_NORM] = {.ne0 = HX_DIM_EMBD, .ne1 = HX_DIM_ONE},
    [HX_LW_FFN_POST_NORM] = {.ne0 = HX_DIM_EMBD, .ne1 = HX_DIM_ONE},
    [HX_LW_GATE_INP] = {.ne0 = HX_DIM_EMBD, .ne1 = HX_DIM_EXPERTS},
    [HX_LW_GATE_EXPS] = {.ne0 = HX_DIM_EMBD, .ne1 = HX_DIM_FF_EXP, .ne2 = HX_DIM_EXPERTS},
    [HX_LW_UP_EXPS] = {.ne0 = HX_DIM_EMBD, .ne1 = HX_DIM_FF_EXP, .ne2 = HX_DIM_EXPERTS},
    [HX_LW_DOWN_EXPS] = {.ne0 = HX_DIM_FF_EXP, .ne1 = HX_DIM_EMBD, .ne2 = HX_DIM_EXPERTS},
    [HX_LW_GATE_INP_SHEXP] = {.ne0 = HX_DIM_EMBD, .ne1 = HX_DIM_ONE},
    [HX_LW_GATE_SHEXP] = {.ne0 = HX_DIM_EMBD, .ne1 = HX_DIM_FF_SHEXP},
    [HX_LW_UP_SHEXP] = {.ne0 = HX_DIM_EMBD, .ne1 = HX_DIM_FF_SHEXP},
    [HX_LW_DOWN_SHEXP] = {.ne0 = HX_DIM_FF_SHEXP, .ne1 = HX_DIM_EMBD},
};

/* What llama.cpp's converter writes for every LLaMA-family architecture;
 * `swa`: the sliding window's key, or NULL where it is ignored. */
#define HPARAM_KEYS(swa)                                                                                    \
    .key = {[HX_HP_CTX] = "context_length", [HX_HP_EMBD] = "embedding_length",                             \
            [HX_HP_LAYERS] = "block_count", [HX_HP_FF] = "feed_forward_length",                            \
            [HX_HP_HEADS] = "attention.head_count", [HX_HP_HEADS_KV] = "attention.head_count_kv",          \
            [HX_HP_ROPE_DIMS] = "rope.dimension_count", [HX_HP_ROPE_BASE] = "rope.freq_base",              \
            [HX_HP_NORM_EPS] = "attention.layer_norm_rms_epsilon",                                         \
            [HX_HP_ROPE_SCALING_TYPE] = "rope.scaling.type", [HX_HP_ROPE_SCALING_FACTOR] = "rope.scaling.factor",     \
            [HX_HP_SLIDING_WINDOW] = swa, [HX_HP_KEY_LENGTH] = "attention.key_length",                     \
            [HX_HP_VALUE_LENGTH] = "attention.value_length", [HX_HP_EXPERTS] = "expert_count",             \
            [HX_HP_EXPERTS_USED] = "expert_used_count", [HX_HP_FF_EXP] = "expert_feed_forward_length",     \
            [HX_HP_FF_SHEXP] = "expert_shared_feed_forward_length",                                        \
            [HX_HP_ROPE_BASE_SWA] = "rope.freq_base_swa",                                                  \
            [HX_HP_SWA_PATTERN] = "attention.sliding_window_pattern",                                      \
            [HX_HP_LOGIT_SOFTCAP] = "final_logit_softcapping"}
#define LLAMA_KEYS HPARAM_KEYS("attention.sliding_window")
/* The tensors, with the names of the slots that a fused layout shares. */
#define LAYER_TENSORS(q, k, v, gate)                                                                        \
    .token_embd = "token_embd.weight", .output_norm = "output_norm.weight", .output = "output.weight",     \
    .layer_tensor = {[HX_LW_ATTN_NORM] = "attn_norm.weight", [HX_LW_Q] = q,                                \
                     [HX_LW_K] = k, [HX_LW_V] = v,                                                         \
                     [HX_LW_O] = "attn_output.weight", [HX_LW_FFN_NORM] = "ffn_norm.weight",               \
                     [HX_LW_GATE] = gate, [HX_LW_UP] = "ffn_up.weight",                                    \
                     [HX_LW_DOWN] = "ffn_down.weight", [HX_LW_Q_BIAS] = "attn_q.bias",                     \
                     [HX_LW_K_BIAS] = "attn_k.bias", [HX_LW_V_BIAS] = "attn_v.bias",                       \
                     [HX_LW_Q_NORM] = "attn_q_norm.weight", [HX_LW_K_NORM] = "attn_k_norm.weight",         \
                     [HX_LW_ATTN_POST_NORM] = "post_attention_norm.weight",                                \
                     [HX_LW_FFN_POST_NORM] = "post_ffw_norm.weight",                                       \
                     [HX_LW_GATE_INP] = "ffn_gate_inp.weight", [HX_LW_GATE_EXPS] = "ffn_gate_exps.weight", \
                     [HX_LW_UP_EXPS] = "ffn_up_exps.weight", [HX_LW_DOWN_EXPS] = "ffn_down_exps.weight",   \
                     [HX_LW_GATE_INP_SHEXP] = "ffn_gate_inp_shexp.weight",                                 \
                     [HX_LW_GATE_SHEXP] = "ffn_gate_shexp.weight", [HX_LW_UP_SHEXP] = "ffn_up_shexp.weight", \
                     [HX_LW_DOWN_SHEXP] = "ffn_down_shexp.weight"}
#define LLAMA_TENSORS LAYER_TENSORS("attn_q.weight", "attn_k.weight", "attn_v.weight", "ffn_gate.weight")
#define R HX_TENSOR_REQUIRED
/* Attention's weights; `bias` says what the biases are. */
#define ATTN_PRESENCE(bias)                                                                                 \
    [HX_LW_ATTN_NORM] = R, [HX_LW_Q] = R, [HX_LW_K] = R, [HX_LW_V] = R, [HX_LW_O] = R,                     \
    [HX_LW_FFN_NORM] = R, [HX_LW_Q_BIAS] = bias, [HX_LW_K_BIAS] = bias, [HX_LW_V_BIAS] = bias
#define DENSE_FFN(p) [HX_LW_GATE] = p, [HX_LW_UP] = p, [HX_LW_DOWN] = p
#define EXPERT_FFN(p) [HX_LW_GATE_INP] = p, [HX_LW_GATE_EXPS] = p, [HX_LW_UP_EXPS] = p, [HX_LW_DOWN_EXPS] = p
#define QK_NORMS [HX_LW_Q_NORM] = R, [HX_LW_K_NORM] = R
/* Every weight but the biases is required; `bias` says what the biases are. */
#define LLAMA_PRESENCE(bias) .layer_presence = {ATTN_PRESENCE(bias), DENSE_FFN(R)}

static const hx_arch archs[] = {
    /* Biases are optional: some llama fine-tunes carry them.  Llama 3.1
     * and later carry rope_freqs (their rope_scaling "llama3"); Llama 3.2
     * 1B and 3B have no output.weight (tied embeddings).  A llama file
     * with expert_count > 0 is a Mixtral: a router and 3-D experts in
     * place of the dense FFN. */
    {.name = "llama", .key_prefix = "llama", LLAMA_KEYS, .rope = HX_ROPE_NORMAL, .typical_rope_base = 10000.0f,
     .typical_norm_eps = 1e-5f, LLAMA_TENSORS,
     .layer_presence = {ATTN_PRESENCE(HX_TENSOR_OPTIONAL), DENSE_FFN(HX_TENSOR_DENSE), EXPERT_FFN(HX_TENSOR_EXPERT)},
     .rope_freqs = "rope_freqs.weight", .moe_norm_topk = 1},
    {.name = "mistral", .key_prefix = "mistral", LLAMA_KEYS, .rope = HX_ROPE_NORMAL,
     .typical_rope_base = 10000.0f, .typical_norm_eps = 1e-5f, LLAMA_TENSORS, LLAMA_PRESENCE(HX_TENSOR_OPTIONAL),
     .rope_freqs = "rope_freqs.weight"},
    {.name = "qwen2", .key_prefix = "qwen2", LLAMA_KEYS, .rope = HX_ROPE_NEOX, .typical_rope_base = 1000000.0f,
     .typical_norm_eps = 1e-6f, LLAMA_TENSORS, LLAMA_PRESENCE(HX_TENSOR_REQUIRED)},
    /* Phi-3: Q, K, V in one attn_qkv, gate and up in one ffn_up, no
     * biases.  Its converted files carry attention.sliding_window (2047 for
     * the 4k models), which llama.cpp ignores (its Phi-3 SWA is disabled,
     * ggml-org/llama.cpp#13676): so does hetero, to give the same logits. */
    {.name = "phi3", .key_prefix = "phi3", HPARAM_KEYS(NULL), .rope = HX_ROPE_NEOX, .typical_rope_base = 10000.0f,
     .typical_norm_eps = 1e-5f,
     LAYER_TENSORS("attn_qkv.weight", "attn_qkv.weight", "attn_qkv.weight", "ffn_up.weight"),
     LLAMA_PRESENCE(HX_TENSOR_NONE),
     .unsupported = {"rope_factors_long.weight", "rope_factors_short.weight"},
     .unsupported_why = "LongRoPE (the 128k-context Phi-3 models) is not implemented"},
    /* Qwen3: Qwen2 without biases, with an RMS norm of each query and key
     * head before RoPE. */
    {.name = "qwen3", .key_prefix = "qwen3", LLAMA_KEYS, .rope = HX_ROPE_NEOX, .typical_rope_base = 1000000.0f,
     .typical_norm_eps = 1e-6f, LLAMA_TENSORS,
     .layer_presence = {ATTN_PRESENCE(HX_TENSOR_NONE), DENSE_FFN(R), QK_NORMS}},
    /* Qwen3-MoE: Qwen3's attention, experts only, top-k renormalised. */
    {.name = "qwen3moe", .key_prefix = "qwen3moe", LLAMA_KEYS, .rope = HX_ROPE_NEOX,
     .typical_rope_base = 1000000.0f, .typical_norm_eps = 1e-6f, LLAMA_TENSORS,
     .layer_presence = {ATTN_PRESENCE(HX_TENSOR_NONE), EXPERT_FFN(R), QK_NORMS}, .moe_norm_topk = 1,
     .ff_exp_per_used = 1},
    /* Qwen2-MoE (Qwen1.5-MoE): Qwen2's attention, experts whose top-k
     * weights stay the softmax's, and a shared expert gated by
     * sigmoid(x . ffn_gate_inp_shexp) added to them. */
    {.name = "qwen2moe", .key_prefix = "qwen2moe", LLAMA_KEYS, .rope = HX_ROPE_NEOX,
     .typical_rope_base = 1000000.0f, .typical_norm_eps = 1e-6f, LLAMA_TENSORS,
     .layer_presence = {ATTN_PRESENCE(HX_TENSOR_OPTIONAL), EXPERT_FFN(R), [HX_LW_GATE_INP_SHEXP] = R,
                        [HX_LW_GATE_SHEXP] = R, [HX_LW_UP_SHEXP] = R, [HX_LW_DOWN_SHEXP] = R},
     .ff_exp_per_used = 1},
    /* Gemma 3: GeGLU, norms after attention and after the FFN as well as
     * before, Q/K head norms, embeddings scaled by sqrt(n_embd), and five
     * sliding-window layers for every global one.  Its norms' weights are
     * stored with Gemma's "+1" already added by the converter, so they are
     * plain RMS norms here. */
    {.name = "gemma3", .key_prefix = "gemma3", LLAMA_KEYS, .rope = HX_ROPE_NEOX, .typical_rope_base = 1000000.0f,
     .typical_norm_eps = 1e-6f, LLAMA_TENSORS,
     .layer_presence = {ATTN_PRESENCE(HX_TENSOR_NONE), DENSE_FFN(R), QK_NORMS, [HX_LW_ATTN_POST_NORM] = R,
                        [HX_LW_FFN_POST_NORM] = R},
     .ffn_act = HX_FFN_GELU, .gemma = 1, .swa_pattern = 6},
};
#undef R

hx_tensor_presence hx_arch_presence(const hx_arch *a, hx_layer_slot slot, int has_experts)
{
    switch (a->layer_presence[slot]) {
    case HX_TENSOR_DENSE: return has_experts ? HX_TENSOR_NONE : HX_TENSOR_REQUIRED;
    case HX_TENSOR_EXPERT: return has_experts ? HX_TENSOR_REQUIRED : HX_TENSOR_NONE;
    default: return a->layer_presence[slot];
    }
}

hx_layer_slot hx_arch_tensor_owner(const hx_arch *a, hx_layer_slot slot)
{
    for (int i = 0; i < (int)slot; i++)
        if (a->layer_presence[i] != HX_TENSOR_NONE && !strcmp(a->layer_tensor[i], a->layer_tensor[slot]))
            return (hx_layer_slot)i;
    return slot;
}

void hx_arch_slot_rows(const hx_arch *a, hx_layer_slot slot, const uint64_t *dims, uint64_t *first_row,
                       uint64_t *rows_total)
{
    *first_row = *rows_total = 0;
    for (int i = 0; i < HX_LAYER_SLOTS; i++) {
        if (a->layer_presence[i] == HX_TENSOR_NONE || strcmp(a->layer_tensor[i], a->layer_tensor[slot]))
            continue;
        if (i < (int)slot)
            *first_row += dims[hx_layer_slot_shapes[i].ne1];
        *rows_total += dims[hx_layer_slot_shapes[i].ne1];
    }
}

const hx_arch *hx_arch_at(size_t i)
{
    return i < sizeof archs / sizeof archs[0] ? &archs[i] : NULL;
}

const hx_arch *hx_arch_find(const char *name)
{
    const hx_arch *a;
    for (size_t i = 0; name && (a = hx_arch_at(i)); i++)
        if (!strcmp(a->name, name))
            return a;
    return NULL;
}

void hx_arch_names(char *buf, size_t cap)
{
    size_t n = 0;
    const hx_arch *a;
    if (cap)
        buf[0] = '\0';
    for (size_t i = 0; (a = hx_arch_at(i)) && n < cap; i++) {
        int w = snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", a->name);
        n += w > 0 ? (size_t)w : 0;
    }
}
