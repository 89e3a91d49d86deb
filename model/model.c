/* Loading a LLaMA-family model from a GGUF file: hyper-parameters by
 * architecture, every weight checked for type and shape, wrapped in place. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/moe_routing.h"
#include "model/context.h"
#include "model/model.h"
#include "text/tokenizer.h"
#include "runtime/block_space.h"
#include "ops/types.h"
#include "runtime/error.h"
#include "runtime/handle.h"
#include "ops/ops.h"

hx_model_options hx_model_options_default(void)
{
    hx_model_options o = {0};
    return o;
}

static hx_status architectures(char *buf, size_t cap)
{
    if (!buf || !cap)
        return hx_error(HX_ERR_INVALID_ARG, "hx_model_architectures: NULL or empty buffer");
    char all[512];
    hx_arch_names(all, sizeof all);
    if (strlen(all) >= cap)
        return hx_error(HX_ERR_RANGE, "hx_model_architectures: %zu bytes needed, %zu given", strlen(all) + 1, cap);
    memcpy(buf, all, strlen(all) + 1);
    return HX_OK;
}

hx_status hx_model_architectures(char *buf, size_t cap)
{
    hx_api_enter();
    return hx_api_leave(architectures(buf, cap));
}

static hx_status get_u32(const hx_gguf *g, const hx_arch *arch, hx_hparam key, uint32_t *out, int required)
{
    char k[128];
    if (!arch->key[key])
        return HX_OK; /* a key the architecture ignores */
    snprintf(k, sizeof k, "%s.%s", arch->key_prefix, arch->key[key]);
    hx_status s = hx_gguf_get_u32(g, k, out);
    if (s == HX_ERR_NOT_FOUND && !required)
        return HX_OK;
    return s ? hx_error_context(s, "model metadata") : HX_OK;
}

static hx_status get_f32(const hx_gguf *g, const hx_arch *arch, hx_hparam key, float *out)
{
    char k[128];
    if (!arch->key[key])
        return HX_OK;
    snprintf(k, sizeof k, "%s.%s", arch->key_prefix, arch->key[key]);
    hx_status s = hx_gguf_get_f32(g, k, out);
    return s == HX_ERR_NOT_FOUND ? HX_OK : s;
}

/* <arch>.rope.scaling.type as llama.cpp reads it: absent means "linear",
 * and the factor, where there is one, divides every frequency (freq_scale
 * = 1/factor) whatever the type; "llama3" (which llama.cpp's loader does
 * not know, its converter writing the factors as rope_freqs.weight and no
 * type) is taken as the factors' type.  YaRN and LongRoPE are refused. */
static hx_status read_rope_scaling(hx_model *m)
{
    const hx_arch *a = m->arch;
    char k[128], type[16] = "linear";
    snprintf(k, sizeof k, "%s.%s", a->key_prefix, a->key[HX_HP_ROPE_SCALING_TYPE]);
    const char *st;
    uint64_t len;
    hx_status s = hx_gguf_get_str(m->gguf, k, &st, &len);
    if (s == HX_OK)
        snprintf(type, sizeof type, "%.*s", (int)(len < sizeof type ? len : sizeof type - 1), st);
    else if (s != HX_ERR_NOT_FOUND)
        return hx_error_context(s, "%s", k);
    m->hp.rope_scaling = strcmp(type, "llama3") ? HX_ROPE_SCALING_PLAIN : HX_ROPE_SCALING_LLAMA3;
    if (strcmp(type, "linear") && strcmp(type, "none") && strcmp(type, "llama3"))
        return hx_error(HX_ERR_UNSUPPORTED, "%s '%.*s': hetero runs none, linear and llama3 (rope_freqs.weight)%s", k,
                        (int)len, st,
                        !strcmp(type, "yarn") ? "; YaRN is not implemented"
                        : !strcmp(type, "longrope") ? "; LongRoPE is not implemented" : "");
    float factor = 0.0f;
    if ((s = get_f32(m->gguf, a, HX_HP_ROPE_SCALING_FACTOR, &factor)))
        return hx_error_context(s, "%s.%s", a->key_prefix, a->key[HX_HP_ROPE_SCALING_FACTOR]);
    if (!(factor >= 0.0f) || isinf(factor))
        return hx_error(HX_ERR_FORMAT, "%s.%s = %g", a->key_prefix, a->key[HX_HP_ROPE_SCALING_FACTOR], (double)factor);
    if (factor > 0.0f)
        m->hp.rope_scale = 1.0f / factor;
    return HX_OK;
}

/* expert_count and its companions; an architecture whose table entry has
 * no expert tensors refuses a file that says it has experts. */
static hx_status read_experts(hx_model *m)
{
    const hx_arch *a = m->arch;
    hx_model_hparams *hp = &m->hp;
    hx_status s;
    if ((s = get_u32(m->gguf, a, HX_HP_EXPERTS, &hp->n_expert, 0)) ||
        (s = get_u32(m->gguf, a, HX_HP_EXPERTS_USED, &hp->n_expert_used, 0)) ||
        (s = get_u32(m->gguf, a, HX_HP_FF_EXP, &hp->n_ff_exp, 0)) ||
        (s = get_u32(m->gguf, a, HX_HP_FF_SHEXP, &hp->n_ff_shexp, 0)))
        return s;
    const int wants = hx_arch_presence(a, HX_LW_GATE_EXPS, 1) == HX_TENSOR_REQUIRED;
    const int can_be_dense = hx_arch_presence(a, HX_LW_GATE_EXPS, 0) == HX_TENSOR_NONE &&
                             hx_arch_presence(a, HX_LW_DOWN, 0) == HX_TENSOR_REQUIRED;
    if (hp->n_expert && !wants)
        return hx_error(HX_ERR_UNSUPPORTED, "%s.expert_count %u: hetero runs '%s' files without experts only",
                        a->key_prefix, hp->n_expert, a->name);
    if (!hp->n_expert && wants && !can_be_dense)
        return hx_error(HX_ERR_FORMAT, "%s.expert_count is missing or 0: '%s' models have experts", a->key_prefix,
                        a->name);
    if (!hp->n_expert) {
        hp->n_expert_used = 0;
        return HX_OK;
    }
    if (hp->n_expert > 1024 || hp->n_expert_used == 0 || hp->n_expert_used > hp->n_expert ||
        hp->n_expert_used > HX_MOE_MAX_USED)
        return hx_error(HX_ERR_FORMAT, "%s.expert_used_count %u of expert_count %u (hetero takes up to %u of up to 1024)",
                        a->key_prefix, hp->n_expert_used, hp->n_expert, HX_MOE_MAX_USED);
    if (!hp->n_ff_exp)
        hp->n_ff_exp = a->ff_exp_per_used ? m->info.n_ff / hp->n_expert_used : m->info.n_ff;
    if (!hp->n_ff_shexp)
        hp->n_ff_shexp = m->info.n_ff;
    if (!hp->n_ff_exp)
        return hx_error(HX_ERR_FORMAT, "an expert's FFN width is 0");
    m->info.n_expert = hp->n_expert;
    m->info.n_expert_used = hp->n_expert_used;
    return HX_OK;
}

static hx_status read_hparams(hx_model *m)
{
    const hx_gguf *g = m->gguf;
    hx_model_info *in = &m->info;
    const char *arch;
    uint64_t len;
    hx_status s = hx_gguf_get_str(g, "general.architecture", &arch, &len);
    if (s)
        return hx_error_context(s, "general.architecture");
    if (len >= sizeof in->arch)
        len = sizeof in->arch - 1;
    memcpy(in->arch, arch, len);
    in->arch[len] = '\0';
    if (!(m->arch = hx_arch_find(in->arch))) {
        char known[256];
        hx_arch_names(known, sizeof known);
        return hx_error(HX_ERR_UNSUPPORTED, "architecture '%s' (hetero runs %s)", in->arch, known);
    }
    const char *name;
    if (hx_gguf_get_str(g, "general.name", &name, &len) == HX_OK) {
        if (len >= sizeof in->name)
            len = sizeof in->name - 1;
        memcpy(in->name, name, len);
        in->name[len] = '\0';
    }
    const hx_arch *a = m->arch;
    if ((s = get_u32(g, a, HX_HP_EMBD, &in->n_embd, 1)) ||
        (s = get_u32(g, a, HX_HP_LAYERS, &in->n_layer, 1)) ||
        (s = get_u32(g, a, HX_HP_HEADS, &in->n_head, 1)) ||
        (s = get_u32(g, a, HX_HP_FF, &in->n_ff, 1)))
        return s;
    in->n_head_kv = in->n_head;
    in->n_ctx_train = 2048;
    if ((s = get_u32(g, a, HX_HP_HEADS_KV, &in->n_head_kv, 0)) ||
        (s = get_u32(g, a, HX_HP_CTX, &in->n_ctx_train, 0)))
        return s;
    /* attention.key_length: heads need not split n_embd (Qwen3 0.6B's 16
     * heads of 128 over 1024, Gemma 3 270M's 4 of 256 over 640). */
    uint32_t key_len = 0, value_len = 0;
    if ((s = get_u32(g, a, HX_HP_KEY_LENGTH, &key_len, 0)) || (s = get_u32(g, a, HX_HP_VALUE_LENGTH, &value_len, 0)))
        return s;
    if (in->n_head == 0 || in->n_head_kv == 0 || (!key_len && in->n_embd % in->n_head) ||
        in->n_head % in->n_head_kv || in->n_layer == 0 || in->n_layer > 1024 || in->n_embd > 65536 ||
        key_len > 1024 || in->n_head > 1024)
        return hx_error(HX_ERR_FORMAT, "impossible shape: n_embd %u, n_layer %u, n_head %u, n_head_kv %u, key_length %u",
                        in->n_embd, in->n_layer, in->n_head, in->n_head_kv, key_len);
    in->head_dim = key_len ? key_len : in->n_embd / in->n_head;
    if (value_len && value_len != in->head_dim)
        return hx_error(HX_ERR_UNSUPPORTED, "attention.value_length %u differs from the key length %u", value_len,
                        in->head_dim);
    hx_model_hparams *hp = &m->hp;
    hp->q_dim = in->n_head * in->head_dim;
    if ((s = read_experts(m)))
        return s;
    hp->eps = 1e-5f;
    hp->rope_base = 10000.0f;
    hp->rope_scale = 1.0f;
    hp->n_rot = in->head_dim;
    if ((s = get_f32(g, a, HX_HP_NORM_EPS, &hp->eps)) ||
        (s = get_f32(g, a, HX_HP_ROPE_BASE, &hp->rope_base)) ||
        (s = get_u32(g, a, HX_HP_ROPE_DIMS, &hp->n_rot, 0)) ||
        (s = get_u32(g, a, HX_HP_SLIDING_WINDOW, &hp->n_swa, 0)))
        return hx_error_context(s, "model metadata");
    if (a->swa_pattern && hp->n_swa) {
        /* Global layers read every block: the window masks, frees nothing. */
        hp->layer_window = hp->n_swa;
        hp->n_swa = 0;
        hp->swa_pattern = a->swa_pattern;
        hp->rope_base_swa = 10000.0f;
        if ((s = get_u32(g, a, HX_HP_SWA_PATTERN, &hp->swa_pattern, 0)) ||
            (s = get_f32(g, a, HX_HP_ROPE_BASE_SWA, &hp->rope_base_swa)))
            return hx_error_context(s, "model metadata");
        if (hp->swa_pattern == 0 || hp->swa_pattern > in->n_layer + 1)
            return hx_error(HX_ERR_FORMAT, "attention.sliding_window_pattern %u with %u layers", hp->swa_pattern,
                            in->n_layer);
    }
    if ((s = get_f32(g, a, HX_HP_LOGIT_SOFTCAP, &hp->logit_softcap)))
        return hx_error_context(s, "model metadata");
    if (!(hp->logit_softcap >= 0.0f) || isinf(hp->logit_softcap))
        return hx_error(HX_ERR_FORMAT, "final_logit_softcapping = %g", (double)hp->logit_softcap);
    in->sliding_window = hp->n_swa ? hp->n_swa : hp->layer_window;
    if ((s = read_rope_scaling(m)))
        return s;
    if (hp->n_rot > in->head_dim || hp->n_rot % 2)
        return hx_error(HX_ERR_FORMAT, "rope.dimension_count %u with head_dim %u", hp->n_rot, in->head_dim);
    return HX_OK;
}

/* Finds a tensor, checks its type has kernels and its shape is
 * [rows_total][ne0] (1 for vectors), and wraps its rows first_row ..
 * first_row + ne1 in place: the whole tensor, or one slot's rows of a fused
 * one (model/arch.h). */
static hx_status weight_rows(hx_model *m, hx_weight *w, const char *name, uint64_t ne0, uint64_t ne1,
                             uint64_t first_row, uint64_t rows_total, int required)
{
    const hx_gguf_tensor *t = hx_gguf_find_tensor(m->gguf, name);
    if (!t) {
        if (!required)
            return HX_OK;
        return hx_error(HX_ERR_FORMAT, "tensor '%s' is missing", name);
    }
    uint64_t got1 = t->n_dims > 1 ? t->ne[1] : 1;
    if (t->ne[0] != ne0 || got1 != rows_total || (t->n_dims > 2 && t->ne[2] != 1))
        return hx_error(HX_ERR_FORMAT, "tensor '%s' has shape [%llu, %llu], expected [%llu, %llu]", name,
                        (unsigned long long)t->ne[0], (unsigned long long)got1,
                        (unsigned long long)ne0, (unsigned long long)rows_total);
    hx_status s = hx_type_row_check(t->type, (int64_t)ne0);
    if (s)
        return hx_error_context(s, "tensor '%s'", name);
    if (rows_total == 1 && t->type != HX_TYPE_F32)
        return hx_error(HX_ERR_UNSUPPORTED, "tensor '%s' is %s; norms and biases must be f32", name,
                        hx_type_name(t->type));
    const size_t row = hx_type_row_size(t->type, ne0);
    if (row * rows_total > t->size)
        return hx_error(HX_ERR_FORMAT, "tensor '%s': %llu rows of %zu bytes exceed its %zu bytes", name,
                        (unsigned long long)rows_total, row, (size_t)t->size);
    w->type = t->type;
    w->ne0 = ne0;
    w->ne1 = ne1;
    s = hx_buffer_wrap(m->rt, (uint8_t *)t->data + row * first_row, row * ne1, 1, &w->buf);
    return s ? hx_error_context(s, "tensor '%s'", name) : HX_OK;
}

static hx_status weight(hx_model *m, hx_weight *w, const char *name, uint64_t ne0, uint64_t ne1, int required)
{
    return weight_rows(m, w, name, ne0, ne1, 0, ne1, required);
}

/* A required 3-D tensor [n2][ne1][ne0], wrapped as ne1 * n2 rows of ne0. */
static hx_status weight_3d(hx_model *m, hx_weight *w, const char *name, uint64_t ne0, uint64_t ne1, uint64_t n2)
{
    const hx_gguf_tensor *t = hx_gguf_find_tensor(m->gguf, name);
    if (!t)
        return hx_error(HX_ERR_FORMAT, "tensor '%s' is missing", name);
    if (t->n_dims != 3 || t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != n2)
        return hx_error(HX_ERR_FORMAT, "tensor '%s' has shape [%llu, %llu, %llu], expected [%llu, %llu, %llu]", name,
                        (unsigned long long)t->ne[0], (unsigned long long)(t->n_dims > 1 ? t->ne[1] : 1),
                        (unsigned long long)(t->n_dims > 2 ? t->ne[2] : 1), (unsigned long long)ne0,
                        (unsigned long long)ne1, (unsigned long long)n2);
    hx_status s = hx_type_row_check(t->type, (int64_t)ne0);
    if (s)
        return hx_error_context(s, "tensor '%s'", name);
    const size_t row = hx_type_row_size(t->type, ne0);
    if (row * ne1 * n2 > t->size)
        return hx_error(HX_ERR_FORMAT, "tensor '%s': %llu rows of %zu bytes exceed its %zu bytes", name,
                        (unsigned long long)(ne1 * n2), row, (size_t)t->size);
    w->type = t->type;
    w->ne0 = ne0;
    w->ne1 = ne1 * n2;
    s = hx_buffer_wrap(m->rt, (uint8_t *)t->data, row * ne1 * n2, 1, &w->buf);
    return s ? hx_error_context(s, "tensor '%s'", name) : HX_OK;
}

void hx_model_dims(const hx_model *m, uint64_t *dims)
{
    const hx_model_info *in = &m->info;
    dims[HX_DIM_ONE] = 1;
    dims[HX_DIM_EMBD] = in->n_embd;
    dims[HX_DIM_KV] = (uint64_t)in->n_head_kv * in->head_dim;
    dims[HX_DIM_FF] = in->n_ff;
    dims[HX_DIM_Q] = (uint64_t)in->n_head * in->head_dim;
    dims[HX_DIM_HEAD] = in->head_dim;
    dims[HX_DIM_EXPERTS] = m->hp.n_expert;
    dims[HX_DIM_FF_EXP] = m->hp.n_ff_exp;
    dims[HX_DIM_FF_SHEXP] = m->hp.n_ff_shexp;
}

/* Llama 3.1's rope_freqs.weight: n_rot/2 factors, each dividing a
 * frequency, so each must be a positive finite number. */
static hx_status load_rope_freqs(hx_model *m)
{
    const hx_arch *a = m->arch;
    for (int i = 0; a->unsupported[i]; i++)
        if (hx_gguf_find_tensor(m->gguf, a->unsupported[i]))
            return hx_error(HX_ERR_UNSUPPORTED, "%s: tensor '%s': %s", a->name, a->unsupported[i], a->unsupported_why);
    hx_status s = a->rope_freqs ? weight(m, &m->rope_freqs, a->rope_freqs, m->hp.n_rot / 2, 1, 0) : HX_OK;
    if (s)
        return s;
    if (!m->rope_freqs.buf) {
        if (m->hp.rope_scaling == HX_ROPE_SCALING_LLAMA3)
            return hx_error(HX_ERR_FORMAT, "rope scaling 'llama3' without its factors: tensor '%s' is missing",
                            a->rope_freqs ? a->rope_freqs : "rope_freqs.weight");
        return HX_OK;
    }
    const float *f = hx_gguf_find_tensor(m->gguf, a->rope_freqs)->data;
    for (uint32_t i = 0; i < m->hp.n_rot / 2; i++)
        if (!(f[i] > 0.0f) || isinf(f[i]))
            return hx_error(HX_ERR_FORMAT, "tensor '%s': factor %u is %g; each must be positive and finite",
                            a->rope_freqs, i, (double)f[i]);
    return HX_OK;
}

static uint64_t weight_bytes(const hx_weight *w)
{
    return w->buf ? hx_type_row_size(w->type, w->ne0) * w->ne1 : 0;
}

/* Every tensor the architecture's entry names, with the shape its role has. */
static hx_status load_weights(hx_model *m)
{
    const hx_arch *a = m->arch;
    const hx_model_info *in = &m->info;
    uint64_t dims[HX_DIMS];
    hx_model_dims(m, dims);
    const uint64_t D = in->n_embd;
    hx_status s;
    const hx_gguf_tensor *te = hx_gguf_find_tensor(m->gguf, a->token_embd);
    if (!te)
        return hx_error(HX_ERR_FORMAT, "tensor '%s' is missing", a->token_embd);
    m->info.n_vocab = (uint32_t)(te->n_dims > 1 ? te->ne[1] : 0);
    if ((s = weight(m, &m->tok_embd, a->token_embd, D, in->n_vocab, 1)) ||
        (s = weight(m, &m->out_norm, a->output_norm, D, 1, 1)) ||
        (s = weight(m, &m->output, a->output, D, in->n_vocab, 0)))
        return s;
    if (!m->output.buf)
        m->output = m->tok_embd; /* tied embeddings: the same buffer, not a copy */
    m->info.decode_weight_bytes = weight_bytes(&m->out_norm) + weight_bytes(&m->output) +
                                  (m->output.buf == m->tok_embd.buf ? 0 : weight_bytes(&m->tok_embd) / in->n_vocab);
    m->layers = calloc(in->n_layer, sizeof *m->layers);
    if (!m->layers)
        return hx_error(HX_ERR_NO_MEMORY, "layer table");
    for (uint32_t l = 0; l < in->n_layer; l++)
        for (int i = 0; i < HX_LAYER_SLOTS; i++) {
            const hx_tensor_presence p = hx_arch_presence(a, (hx_layer_slot)i, m->hp.n_expert > 0);
            if (p == HX_TENSOR_NONE)
                continue;
            char n[96];
            snprintf(n, sizeof n, "blk.%u.%s", l, a->layer_tensor[i]);
            const hx_layer_slot_shape *sh = &hx_layer_slot_shapes[i];
            uint64_t first, total;
            hx_arch_slot_rows(a, (hx_layer_slot)i, dims, &first, &total);
            /* An expert tensor is [experts][rows][row length]: its experts'
             * rows one after the other, one matrix of experts * rows. */
            if (sh->ne2 != HX_DIM_ONE)
                s = weight_3d(m, &m->layers[l].w[i], n, dims[sh->ne0], dims[sh->ne1], dims[sh->ne2]);
            else
                s = weight_rows(m, &m->layers[l].w[i], n, dims[sh->ne0], dims[sh->ne1], first, total,
                                p == HX_TENSOR_REQUIRED);
            if (s)
                return s;
            m->info.decode_weight_bytes += weight_bytes(&m->layers[l].w[i]);
        }
    return load_rope_freqs(m);
}

/* Parameter count and the type most weight bytes are in (llama.cpp's
 * "ftype" as people know it). */
static void summarize(hx_model *m)
{
    uint64_t bytes_by_type[HX_TYPE_COUNT] = {0};
    m->info.n_params = 0;
    for (uint64_t i = 0; i < hx_gguf_tensor_count(m->gguf); i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(m->gguf, i);
        uint64_t n = 1;
        for (uint32_t d = 0; d < t->n_dims; d++)
            n *= t->ne[d];
        m->info.n_params += n;
        if (t->n_dims >= 2 && t->type < HX_TYPE_COUNT)
            bytes_by_type[t->type] += t->size;
    }
    int best = HX_TYPE_F32;
    for (int t = 0; t < HX_TYPE_COUNT; t++)
        if (bytes_by_type[t] > bytes_by_type[best])
            best = t;
    snprintf(m->info.ftype, sizeof m->info.ftype, "%s", hx_type_name((uint32_t)best));
    size_t size;
    hx_gguf_data(m->gguf, &size);
    m->info.file_bytes = size;
}

static hx_status kv_type_named(const char *what, const char *name, hx_type *out)
{
    if (!hx_type_from_name(name, out) ||
        (*out != HX_TYPE_F16 && *out != HX_TYPE_Q8_0 && *out != HX_TYPE_F32 && *out != HX_TYPE_Q4_0))
        return hx_error(HX_ERR_INVALID_ARG, "%s '%s': expected f16, q8_0, q4_0 or f32", what, name);
    return HX_OK;
}

/* The largest power of two from 64 dividing n (llama.cpp's K rotation). */
static uint32_t rotation_width(uint32_t n)
{
    uint32_t w = 64;
    while (w * 2 <= 1024 && n % (w * 2) == 0)
        w *= 2;
    return w;
}

/* The K and V caches' types and whether their rows are stored rotated. */
static hx_status resolve_kv_types(hx_model *m)
{
    const char *kv = m->opts.kv_type ? m->opts.kv_type : getenv("HX_KV_TYPE");
    const char *k = m->opts.kv_type_k ? m->opts.kv_type_k : getenv("HX_KV_TYPE_K");
    const char *v = m->opts.kv_type_v ? m->opts.kv_type_v : getenv("HX_KV_TYPE_V");
    hx_type both;
    hx_status s = kv_type_named("kv_type", kv && *kv ? kv : "f16", &both);
    m->kv_type = m->v_type = both;
    if (s == HX_OK && k && *k)
        s = kv_type_named("kv_type_k", k, &m->kv_type);
    if (s == HX_OK && v && *v)
        s = kv_type_named("kv_type_v", v, &m->v_type);
    if (s)
        return s;
    const char *env = getenv("HX_KV_ROTATE");
    const int rotate = m->opts.kv_rotate ? m->opts.kv_rotate > 0 : !(env && !strcmp(env, "0"));
    const uint32_t Dh = m->info.head_dim;
    const int quantized_k = m->kv_type != HX_TYPE_F16 && m->kv_type != HX_TYPE_F32;
    const int quantized_v = m->v_type != HX_TYPE_F16 && m->v_type != HX_TYPE_F32;
    m->kv_rot_k = rotate && quantized_k && Dh % 64 == 0 && Dh <= 1024 ? rotation_width(Dh) : 0;
    m->kv_rot_v = rotate && quantized_v && Dh % 64 == 0 && Dh <= 1024 ? 64 : 0;
    m->kv_center = rotate && quantized_k && Dh <= 1024;
    m->opts.kv_type_k = m->opts.kv_type_v = NULL; /* the caller's strings need not outlive the call */
    return HX_OK;
}

static hx_status resolve_options(hx_model *m, const hx_model_options *o)
{
    m->opts = o ? *o : hx_model_options_default();
    hx_status ks = resolve_kv_types(m);
    if (ks)
        return ks;
    const char *part = m->opts.partition ? m->opts.partition : getenv("HX_PARTITION");
    static const char *const strategies[] = {"affinity", "layers", "auto", "colocated"};
    m->partition = HX_PARTITION_AFFINITY;
    if (part && *part) {
        int found = -1;
        for (int i = 0; i < 4; i++)
            if (!strcmp(part, strategies[i]))
                found = i;
        if (found < 0)
            return hx_error(HX_ERR_INVALID_ARG, "partition '%s': expected affinity, layers, auto or colocated", part);
        m->partition = (hx_partition_strategy)found;
    }
    const char *fuse = getenv("HX_FUSE");
    m->fuse = m->opts.fuse_matmuls ? m->opts.fuse_matmuls > 0 : !(fuse && !strcmp(fuse, "0"));
    m->opts.partition = NULL;
    m->opts.kv_type = NULL; /* the caller's string need not outlive the call */
    const char *replay = getenv("HX_GRAPH_REPLAY");
    m->graph_replay = m->opts.graph_replay ? m->opts.graph_replay > 0 : !(replay && !strcmp(replay, "0"));
    const char *shapes = getenv("HX_REPLAY_SHAPES"); /* 1 to HX_REPLAY_SHAPES; fewer, for comparisons */
    m->replay_shapes = shapes && atoi(shapes) > 0 && atoi(shapes) < HX_REPLAY_SHAPES ? atoi(shapes) : HX_REPLAY_SHAPES;
    if (!m->opts.kv_split && getenv("HX_KV_SPLIT") && *getenv("HX_KV_SPLIT")) {
        char *end;
        const char *env = getenv("HX_KV_SPLIT");
        unsigned long n = strtoul(env, &end, 10);
        if (*env < '0' || *env > '9' || *end || n > UINT32_MAX)
            return hx_error(HX_ERR_INVALID_ARG, "HX_KV_SPLIT '%s': expected a number of tokens", env);
        m->opts.kv_split = (uint32_t)n;
    }
    if (!m->opts.kv_device_bytes && getenv("HX_KV_DEVICE_MB") && *getenv("HX_KV_DEVICE_MB")) {
        char *end;
        const char *env = getenv("HX_KV_DEVICE_MB");
        unsigned long long mb = strtoull(env, &end, 10);
        if (*env < '0' || *env > '9' || *end || mb == 0 || mb > (1ull << 40))
            return hx_error(HX_ERR_INVALID_ARG, "HX_KV_DEVICE_MB '%s': expected a number of MiB", env);
        m->opts.kv_device_bytes = mb << 20;
    }
    if (!m->opts.kv_block)
        m->opts.kv_block = 16;
    if (!m->opts.max_batch)
        m->opts.max_batch = 512;
    if (m->opts.kv_block > 4096 || m->opts.max_batch > 65536)
        return hx_error(HX_ERR_INVALID_ARG, "kv_block %u / max_batch %u out of range", m->opts.kv_block,
                        m->opts.max_batch);
    return HX_OK;
}

/* Whether the pool keeps prefixes, and the root of its keys: besides the
 * tokens, a block's contents depend on the KV type (in the pool's seed
 * already) and the model, whose weights' size and shape stand for it. */
static void configure_prefix_cache(hx_model *m)
{
    const char *env = getenv("HX_KV_PREFIX_CACHE");
    int on = m->opts.kv_prefix_cache ? m->opts.kv_prefix_cache > 0 : !(env && !strcmp(env, "0"));
    m->kv->prefix_cache = on;
    const hx_model_info *in = &m->info;
    const uint64_t id[] = {in->file_bytes, in->n_params, in->n_vocab, in->n_embd, in->n_layer, in->n_ff};
    for (size_t i = 0; i < sizeof id / sizeof *id; i++)
        m->kv->seed = m->kv->seed * 0x100000001b3ull ^ id[i];
}

hx_status hx_model_act_alloc(hx_model *m); /* model/activations.c */
void hx_model_act_free(hx_model *m);

/* The router's tallies, zero at load (hx_model_expert_counts). */
static hx_status expert_counts_create(hx_model *m)
{
    const size_t bytes = sizeof(uint64_t) * m->info.n_layer * m->hp.n_expert;
    void *host;
    hx_status s = hx_buffer_create(m->rt, bytes, &m->expert_counts);
    if (s == HX_OK && (s = hx_buffer_acquire(m->expert_counts, HX_W, &host)) == HX_OK)
        memset(host, 0, bytes);
    return s ? hx_error_context(s, "expert counts") : HX_OK;
}

hx_status hx_model_prepare(hx_model *m, const hx_model_options *opts)
{
    m->info.bos = hx_tokenizer_bos(m->tok);
    m->info.eos = hx_tokenizer_eos(m->tok);
    m->info.add_bos = hx_tokenizer_wants_bos(m->tok);
    m->info.add_eos = hx_tokenizer_wants_eos(m->tok);
    hx_status s = resolve_options(m, opts);
    if (s == HX_OK)
        s = hx_model_stage_plan(m);
    if (s == HX_OK)
        s = hx_model_resolve_context(m);
    if (s == HX_OK)
        s = hx_model_kv_centers(m);
    if (s == HX_OK)
        s = hx_kv_pool_create_layers(m->rt, (hx_kv_types){m->kv_type, m->v_type, m->kv_rot_k, m->kv_rot_v},
                                     m->info.n_layer, hx_model_stage_l0(m), hx_model_stage_l1(m), m->info.n_head_kv,
                                     m->info.head_dim, m->opts.kv_tokens, m->opts.kv_block, &m->kv);
    /* Rank 0 of a pipeline tells the others of the shared blocks it copies. */
    if (s == HX_OK)
        m->kv->log_copies = m->stage.size > 1 && m->stage.rank == 0;
    if (s == HX_OK)
        configure_prefix_cache(m);
    if (s == HX_OK && m->opts.kv_device_bytes)
        hx_kv_pool_bound_devices(m->kv, m->opts.kv_device_bytes);
    if (s == HX_OK)
        s = hx_model_act_alloc(m);
    if (s == HX_OK && m->hp.n_expert)
        s = expert_counts_create(m);
    if (s == HX_OK && m->hp.n_expert)
        s = hx_moe_routing_setup(m);
    return s;
}

/* A copy of tokenizer.chat_template: the GGUF string is not NUL-terminated,
 * and callers keep the pointer for the model's life. */
static hx_status read_chat_template(hx_model *m)
{
    const char *t;
    uint64_t len;
    hx_status s = hx_gguf_get_str(m->gguf, "tokenizer.chat_template", &t, &len);
    if (s == HX_ERR_NOT_FOUND)
        return HX_OK;
    if (s)
        return hx_error_context(s, "tokenizer.chat_template");
    if (!(m->chat_template = malloc(len + 1)))
        return hx_error(HX_ERR_NO_MEMORY, "tokenizer.chat_template: %llu bytes", (unsigned long long)len);
    memcpy(m->chat_template, t, len);
    m->chat_template[len] = '\0';
    return HX_OK;
}

static hx_status model_load(hx_runtime *rt, const char *path, const hx_model_options *opts, hx_model **out)
{
    if (!path || !out)
        return hx_error(HX_ERR_INVALID_ARG, "hx_model_load: NULL path or output");
    *out = NULL;
    hx_model *m = calloc(1, sizeof *m);
    if (!m)
        return hx_error(HX_ERR_NO_MEMORY, "model");
    m->rt = rt;
    pthread_mutex_init(&m->eval_lock, NULL);
    hx_status s = hx_gguf_open(path, &m->gguf);
    if (s == HX_OK && !(m->path = strdup(path)))
        s = hx_error(HX_ERR_NO_MEMORY, "model path");
    if (s == HX_OK && (s = read_hparams(m)) == HX_OK && (s = load_weights(m)) == HX_OK) {
        summarize(m);
        s = hx_tokenizer_load(m->gguf, &m->tok);
        if (s == HX_OK && hx_tokenizer_vocab_size(m->tok) > (int32_t)m->info.n_vocab)
            s = hx_error(HX_ERR_FORMAT, "the vocabulary has %d tokens but token_embd only %u rows",
                         hx_tokenizer_vocab_size(m->tok), m->info.n_vocab);
        if (s == HX_OK)
            s = read_chat_template(m);
        if (s == HX_OK)
            s = hx_model_read_named_templates(m);
        if (s == HX_OK)
            s = hx_model_group_experts(m);
        if (s == HX_OK)
            s = hx_model_prepare(m, opts);
        if (s == HX_OK)
            s = hx_model_repack(m);
    }
    if (s) {
        /* The GGUF reader's messages start with the path: not twice. */
        if (strncmp(hx_last_error(), path, strlen(path)) != 0)
            hx_error_context(s, "loading %s", path);
        hx_model_destroy(m);
        return s;
    }
    if (!m->info.name[0]) {
        const char *base = strrchr(path, '/');
        snprintf(m->info.name, sizeof m->info.name, "%s", base ? base + 1 : path);
    }
    *out = m;
    return HX_OK;
}

hx_status hx_model_opened(hx_model *m, hx_model **out)
{
    hx_status s = hx_handle_add(m, HX_HANDLE_MODEL, m->rt, m->info.name);
    if (s) {
        hx_model_destroy(m);
        m = NULL;
    }
    *out = m;
    return s;
}

hx_status hx_model_load(hx_runtime *rt, const char *path, const hx_model_options *opts, hx_model **out)
{
    hx_api_enter();
    if (out)
        *out = NULL;
    hx_status s = hx_handle_check(rt, HX_HANDLE_RUNTIME, "hx_model_load");
    if (s == HX_OK && (s = model_load(rt, path, opts, out)) == HX_OK)
        s = hx_model_opened(*out, out);
    return hx_api_leave(s);
}

static void unwrap(hx_weight *w)
{
    hx_buffer_destroy(w->buf);
    w->buf = NULL;
}

/* Refused while sessions of the model are open (hetero.h, "Handles"). */
static hx_status model_free(hx_model *m)
{
    /* Sessions exist only of an open model: `m` may be read when it has. */
    size_t n = hx_handle_owned(m, HX_HANDLE_SESSION, NULL, 0);
    if (n)
        return hx_error(HX_ERR_STATE, "hx_model_free: %zu session%s of model '%s' %s still open; close %s first", n,
                        n > 1 ? "s" : "", m->info.name, n > 1 ? "are" : "is", n > 1 ? "them" : "it");
    hx_status s = hx_handle_remove(m, HX_HANDLE_MODEL, "hx_model_free");
    /* The pipeline's other ranks stop serving this model (model/pipe.h). */
    if (s == HX_OK && m->pipe && m->pipe->ops->detach)
        m->pipe->ops->detach(m->pipe->ctx, m);
    if (s == HX_OK)
        hx_model_destroy(m);
    return s;
}

hx_status hx_model_free(hx_model *m)
{
    hx_api_enter();
    return hx_api_leave(m ? model_free(m) : HX_OK);
}

void hx_model_destroy(hx_model *m)
{
    if (!m)
        return;
    hx_model_act_free(m);
    hx_kv_pool_free(m->kv);
    free(m->path);
    if (m->output.buf == m->tok_embd.buf)
        m->output.buf = NULL;
    unwrap(&m->tok_embd);
    unwrap(&m->out_norm);
    unwrap(&m->output);
    unwrap(&m->rope_freqs);
    hx_buffer_destroy(m->expert_counts);
    for (uint32_t l = 0; m->layers && l < m->info.n_layer; l++) {
        for (int i = 0; i < HX_LAYER_SLOTS; i++)
            unwrap(&m->layers[l].w[i]);
        for (uint32_t g = 0; g < m->layers[l].n_groups; g++) {
            hx_buffer_destroy(m->layers[l].groups[g].gate);
            hx_buffer_destroy(m->layers[l].groups[g].up);
            hx_buffer_destroy(m->layers[l].groups[g].down);
        }
        free(m->layers[l].groups);
        hx_buffer_destroy(m->layers[l].k_center);
    }
    free(m->layers);
    free(m->expert_p);
    free(m->expert_prior);
    hx_tokenizer_free(m->tok);
    free(m->chat_template);
    hx_model_free_named_templates(m);
    hx_gguf_close(m->gguf);
    free(m->plan);
    free(m->placements);
    for (int i = 0; i < HX_REPLAY_SHAPES; i++)
        free(m->replay[i]);
    for (int i = 0; i < HX_SCRATCH_SLOTS; i++)
        free(m->scratch[i]);
    pthread_mutex_destroy(&m->eval_lock);
    free(m);
}

static hx_status info_get(const hx_model *m, hx_model_info *out)
{
    hx_status s = hx_handle_check_call(m, HX_HANDLE_MODEL, out, "hx_model_info_get");
    if (s)
        return s;
    *out = m->info;
    if (m->stage.tp.on) { /* the model's, not this rank's slice (hx_model_tp) */
        out->n_head = m->stage.tp.n_head_all;
        out->n_head_kv = m->stage.tp.n_head_kv_all;
        out->n_ff = m->stage.tp.n_ff_all;
    }
    return HX_OK;
}

hx_status hx_model_info_get(const hx_model *m, hx_model_info *out)
{
    hx_api_enter();
    return hx_api_leave(info_get(m, out));
}

static hx_status stats_get(const hx_model *m, hx_model_stats *out)
{
    hx_status s = hx_handle_check_call(m, HX_HANDLE_MODEL, out, "hx_model_stats_get");
    if (s)
        return s;
    memset(out, 0, sizeof *out);
    out->sessions_open = (uint32_t)hx_handle_owned(m, HX_HANDLE_SESSION, NULL, 0);
    hx_kv_pool *kv = m->kv;
    hx_kv_counters c;
    hx_kv_pool_usage(kv, &out->kv_blocks_used, &out->kv_blocks_cached, &out->kv_blocks_shared, &c);
    out->kv_blocks_total = kv->n_blocks;
    out->kv_block_tokens = kv->block_size;
    out->kv_bytes_used = (uint64_t)out->kv_blocks_used * (kv->block_bytes + kv->v_block_bytes) * kv->n_layer;
    out->kv_hits = c.hits;
    out->kv_misses = c.misses;
    out->kv_evictions = c.evictions;
    out->kv_tokens_reused = c.tokens_reused;
    for (int d = 0; d < HX_MAX_DEVICES; d++)
        out->kv_device_evictions += hx_block_space_evictions(kv->space, d);
    out->graphs_recorded = m->graphs_recorded;
    out->graphs_replayed = m->graphs_replayed;
    return HX_OK;
}

hx_status hx_model_stats_get(const hx_model *m, hx_model_stats *out)
{
    hx_api_enter();
    return hx_api_leave(stats_get(m, out));
}

static hx_status expert_counts(hx_model *m, uint32_t layer, uint64_t *counts, size_t cap, size_t *n)
{
    hx_status s = hx_handle_check(m, HX_HANDLE_MODEL, "hx_model_expert_counts");
    if (s)
        return s;
    if (!n || (cap && !counts))
        return hx_error(HX_ERR_INVALID_ARG, "hx_model_expert_counts: NULL output");
    *n = m->hp.n_expert;
    if (!m->hp.n_expert)
        return HX_OK;
    if (layer >= m->info.n_layer)
        return hx_error(HX_ERR_RANGE, "hx_model_expert_counts: layer %u of %u", layer, m->info.n_layer);
    if (cap < m->hp.n_expert)
        return hx_error(HX_ERR_RANGE, "hx_model_expert_counts: %u experts, room for %zu", m->hp.n_expert, cap);
    /* Under the evaluation lock: no evaluation is adding to them. */
    pthread_mutex_lock(&m->eval_lock);
    void *host;
    s = hx_buffer_acquire(m->expert_counts, HX_R, &host);
    if (s == HX_OK)
        memcpy(counts, (const uint64_t *)host + (size_t)layer * m->hp.n_expert, sizeof *counts * m->hp.n_expert);
    pthread_mutex_unlock(&m->eval_lock);
    return s;
}

hx_status hx_model_expert_counts(hx_model *m, uint32_t layer, uint64_t *counts, size_t cap, size_t *n)
{
    hx_api_enter();
    return hx_api_leave(expert_counts(m, layer, counts, cap, n));
}

/* The model's tokenizer, or why there is none. */
static hx_status tokenizer_of(const hx_model *m, const char *fn)
{
    hx_status s = hx_handle_check(m, HX_HANDLE_MODEL, fn);
    if (s == HX_OK && !m->tok)
        s = hx_error(HX_ERR_UNSUPPORTED, "%s: the model has no tokenizer (shapes only)", fn);
    return s;
}

hx_status hx_model_tokenize(const hx_model *m, const char *text, size_t len, int add_special, int parse_special,
                            int32_t *ids, size_t cap, size_t *n)
{
    hx_api_enter();
    hx_status s = tokenizer_of(m, "hx_model_tokenize");
    return hx_api_leave(s ? s : hx_tokenizer_encode_prompt(m->tok, text, len, add_special, parse_special, ids,
                                                           cap, n));
}

hx_status hx_model_token_to_piece(const hx_model *m, int32_t id, char *buf, size_t cap, size_t *len)
{
    hx_api_enter();
    hx_status s = tokenizer_of(m, "hx_model_token_to_piece");
    return hx_api_leave(s ? s : hx_tokenizer_token_to_piece(m->tok, id, 0, buf, cap, len));
}

int hx_model_is_eog(const hx_model *m, int32_t id)
{
    return hx_handle_check(m, HX_HANDLE_MODEL, "hx_model_is_eog") == HX_OK && hx_tokenizer_is_eog(m->tok, id);
}

const char *hx_model_chat_template(const hx_model *m)
{
    return hx_handle_check(m, HX_HANDLE_MODEL, "hx_model_chat_template") == HX_OK ? m->chat_template : NULL;
}
