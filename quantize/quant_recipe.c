/* llama-quantize's recipes: the per-tensor rule table (quant_recipe.h). */
#include "quantize/quant_recipe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "runtime/error.h"

static const hx_quant_recipe recipes[] = {
    {"Q2_K", HX_FTYPE_Q2_K, HX_TYPE_Q2_K},       {"Q3_K_S", HX_FTYPE_Q3_K_S, HX_TYPE_Q3_K},
    {"Q3_K_M", HX_FTYPE_Q3_K_M, HX_TYPE_Q3_K},   {"Q3_K_L", HX_FTYPE_Q3_K_L, HX_TYPE_Q3_K},
    {"Q4_K_S", HX_FTYPE_Q4_K_S, HX_TYPE_Q4_K},   {"Q4_K_M", HX_FTYPE_Q4_K_M, HX_TYPE_Q4_K},
    {"Q5_K_S", HX_FTYPE_Q5_K_S, HX_TYPE_Q5_K},   {"Q5_K_M", HX_FTYPE_Q5_K_M, HX_TYPE_Q5_K},
    {"Q6_K", HX_FTYPE_Q6_K, HX_TYPE_Q6_K},       {"Q8_0", HX_FTYPE_Q8_0, HX_TYPE_Q8_0},
    {"Q4_0", HX_FTYPE_Q4_0, HX_TYPE_Q4_0},       {"Q4_1", HX_FTYPE_Q4_1, HX_TYPE_Q4_1},
    {"Q5_0", HX_FTYPE_Q5_0, HX_TYPE_Q5_0},       {"Q5_1", HX_FTYPE_Q5_1, HX_TYPE_Q5_1},
    {"IQ4_NL", HX_FTYPE_IQ4_NL, HX_TYPE_IQ4_NL}, {"IQ4_XS", HX_FTYPE_IQ4_XS, HX_TYPE_IQ4_XS},
    {"F16", HX_FTYPE_F16, HX_TYPE_F16},          {"BF16", HX_FTYPE_BF16, HX_TYPE_BF16},
    {"F32", HX_FTYPE_ALL_F32, HX_TYPE_F32},
    /* llama-quantize's aliases */
    {"Q3_K", HX_FTYPE_Q3_K_M, HX_TYPE_Q3_K},     {"Q4_K", HX_FTYPE_Q4_K_M, HX_TYPE_Q4_K},
    {"Q5_K", HX_FTYPE_Q5_K_M, HX_TYPE_Q5_K},
};

const hx_quant_recipe *hx_quant_recipe_find(const char *name)
{
    for (size_t i = 0; name && i < sizeof recipes / sizeof *recipes; i++)
        if (strcasecmp(recipes[i].name, name) == 0)
            return &recipes[i];
    return NULL;
}

const char *hx_quant_recipe_names(void)
{
    return "Q2_K, Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, "
           "IQ4_NL, IQ4_XS, F16, BF16, F32 (Q3_K, Q4_K, Q5_K: the _M recipes)";
}

hx_ftype hx_quant_ftype_of_type(hx_type t)
{
    /* llama_model_loader's guess: the _M recipe of a K-quant */
    switch (t) {
    case HX_TYPE_Q3_K:
        return HX_FTYPE_Q3_K_M;
    case HX_TYPE_Q4_K:
        return HX_FTYPE_Q4_K_M;
    case HX_TYPE_Q5_K:
        return HX_FTYPE_Q5_K_M;
    default:
        break;
    }
    for (size_t i = 0; i < sizeof recipes / sizeof *recipes; i++)
        if (recipes[i].base == t)
            return recipes[i].ftype;
    return HX_FTYPE_ALL_F32;
}

int hx_type_is_quantized(hx_type t)
{
    const hx_type_traits *tr = hx_type_get(t);
    return tr && tr->block_size > 1;
}

/* ---- names and categories ------------------------------------------------ */

typedef enum { CAT_TOKEN_EMBD, CAT_Q, CAT_V, CAT_K, CAT_QKV, CAT_KV_B, CAT_ATTN_OUT, CAT_UP, CAT_GATE, CAT_DOWN,
               CAT_OUTPUT, CAT_OTHER } category;

static int contains(const char *s, const char *part) { return strstr(s, part) != NULL; }

static int is_token_embd(const char *n)
{
    return strcmp(n, "token_embd.weight") == 0 || strcmp(n, "per_layer_token_embd.weight") == 0;
}

static category category_of(const char *n)
{
    if (strcmp(n, "output.weight") == 0)
        return CAT_OUTPUT;
    if (is_token_embd(n))
        return CAT_TOKEN_EMBD;
    static const struct {
        const char *part;
        category c;
    } parts[] = {{"attn_qkv.weight", CAT_QKV},  {"attn_kv_b.weight", CAT_KV_B},        {"attn_v.weight", CAT_V},
                 {"attn_k.weight", CAT_K},      {"attn_q.weight", CAT_Q},              {"attn_output.weight", CAT_ATTN_OUT},
                 {"ffn_up", CAT_UP},            {"ffn_gate", CAT_GATE},                {"ffn_down", CAT_DOWN}};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        if (contains(n, parts[i].part))
            return parts[i].c;
    return CAT_OTHER;
}

static int is_attn_v(category c) { return c == CAT_V || c == CAT_QKV || c == CAT_KV_B; }

/* ggml_n_dims: trailing dimensions of 1 do not count. */
static int n_dims(const hx_recipe_tensor *t)
{
    int d = 1;
    for (int i = 1; i < 4; i++)
        if (t->ne[i] > 1)
            d = i + 1;
    return d;
}

int hx_quant_recipe_quantizable(const hx_recipe_params *p, const hx_recipe_tensor *t)
{
    /* Small or index-like matrices llama-quantize leaves as they are. */
    static const char *const kept[] = {
        "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel", "per_layer_model_proj",
        "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight", "indexer.q_proj.weight", "time_mix_first.weight",
        "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight",
        "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight",
        "time_mix_g2.weight", "time_mix_decay_w1.weight", "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight",
        "attn_rel_b.weight", ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd",
        ".patch_merger", "a.rvq.codebook", "mm.a.code_embd"};
    const char *n = t->name;
    size_t len = strlen(n);
    if (n_dims(t) < 2 || len < 6 || strcmp(n + len - 6, "weight") != 0)
        return 0;
    if (p->leave_output && strcmp(n, "output.weight") == 0)
        return 0;
    if (strcmp(n, "position_embd.weight") == 0 || strcmp(n, "token_types.weight") == 0)
        return 0;
    for (size_t i = 0; i < sizeof kept / sizeof *kept; i++)
        if (contains(n, kept[i]))
            return 0;
    return 1;
}

/* ---- the rules ------------------------------------------------------------- */

typedef struct {
    int n_attention_wv, i_attention_wv, i_ffn_down, n_layer;
    int tied; /* no output.weight: token_embd is the output matrix too */
    int fallbacks;
} counters;

static uint32_t block_of(hx_type t)
{
    const hx_type_traits *tr = hx_type_get(t);
    return tr ? tr->block_size : 1;
}

hx_type hx_quant_recipe_fallback(hx_type t, uint64_t ne0)
{
    if (ne0 % block_of(t) == 0)
        return t;
    hx_type r = t;
    switch (t) {
    case HX_TYPE_IQ1_S:
    case HX_TYPE_IQ1_M:
    case HX_TYPE_IQ2_XXS:
    case HX_TYPE_IQ2_XS:
    case HX_TYPE_IQ2_S:
    case HX_TYPE_IQ3_XXS:
    case HX_TYPE_IQ3_S:
    case HX_TYPE_IQ4_XS:
        r = HX_TYPE_IQ4_NL;
        break;
    case HX_TYPE_Q2_K:
    case HX_TYPE_Q3_K:
    case HX_TYPE_TQ1_0:
    case HX_TYPE_TQ2_0:
        r = HX_TYPE_Q4_0;
        break;
    case HX_TYPE_Q4_K:
        r = HX_TYPE_Q5_0;
        break;
    case HX_TYPE_Q5_K:
        r = HX_TYPE_Q5_1;
        break;
    case HX_TYPE_Q6_K:
        r = HX_TYPE_Q8_0;
        break;
    default:
        break; /* a 32-block type has no smaller block: F16 below */
    }
    return ne0 % block_of(r) == 0 ? r : HX_TYPE_F16;
}

static int use_more_bits(int i_layer, int n_layers)
{
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

/* llama_tensor_get_type_impl for the recipes of this file. */
static hx_type recipe_rule(const hx_recipe_params *p, counters *c, const hx_recipe_tensor *t, category cat,
                           hx_type type)
{
    const hx_ftype f = p->ftype;
    const int gqa = p->n_head_kv ? (int)(p->n_head / p->n_head_kv) : 0;
    /* llama.cpp's LLM_TYPE_70B: 80 layers with grouped-query attention */
    const int is_70b = p->n_layer == 80 && p->n_head != p->n_head_kv;
    if (cat == CAT_OUTPUT || (c->tied && cat == CAT_TOKEN_EMBD)) {
        if (p->output_type != HX_TYPE_COUNT)
            return p->output_type;
        if (t->ne[0] % block_of(type) != 0)
            return HX_TYPE_Q8_0;
        return type != HX_TYPE_Q8_0 ? HX_TYPE_Q6_K : type;
    }
    if (cat == CAT_TOKEN_EMBD)
        return p->token_embd_type != HX_TYPE_COUNT ? p->token_embd_type : type;
    /* Mixtral-sized models (8 experts): K and V, small beside the
     * experts, in Q8_0; their attention output in Q5_K at the low recipes. */
    const int eight = p->n_expert == 8;
    if (cat == CAT_K && eight)
        return HX_TYPE_Q8_0;
    if (is_attn_v(cat) && eight) {
        c->i_attention_wv++;
        return HX_TYPE_Q8_0;
    }
    if (is_attn_v(cat)) {
        const int i = c->i_attention_wv++, n = c->n_attention_wv;
        if (f == HX_FTYPE_Q2_K)
            type = gqa >= 4 ? HX_TYPE_Q4_K : HX_TYPE_Q3_K;
        else if (f == HX_FTYPE_Q3_K_M)
            type = i < 2 ? HX_TYPE_Q5_K : HX_TYPE_Q4_K;
        else if (f == HX_FTYPE_Q3_K_L)
            type = HX_TYPE_Q5_K;
        else if ((f == HX_FTYPE_IQ4_NL || f == HX_FTYPE_IQ4_XS) && gqa >= 4)
            type = HX_TYPE_Q5_K;
        else if ((f == HX_FTYPE_Q4_K_M || f == HX_FTYPE_Q5_K_M) && use_more_bits(i, n))
            type = HX_TYPE_Q6_K;
        else if (f == HX_FTYPE_Q4_K_S && i < 4)
            type = HX_TYPE_Q5_K;
        /* a 70B's attn_v is 8x smaller than attn_q: more bits cost little */
        if (is_70b && (type == HX_TYPE_Q3_K || type == HX_TYPE_Q4_K))
            type = HX_TYPE_Q5_K;
        return type;
    }
    if (cat == CAT_DOWN) {
        /* With experts a layer has several ffn_down tensors (the experts',
         * the shared expert's): its index is the one in the name. */
        int i = c->i_ffn_down++, n = c->n_layer;
        if (p->n_expert > 1 && sscanf(t->name, "blk.%d.", &i) != 1)
            i = 0;
        if (f == HX_FTYPE_Q2_K)
            type = HX_TYPE_Q3_K;
        else if (f == HX_FTYPE_Q3_K_M)
            type = i < n / 16 ? HX_TYPE_Q5_K : HX_TYPE_Q4_K;
        else if (f == HX_FTYPE_Q3_K_L)
            type = HX_TYPE_Q5_K;
        else if (f == HX_FTYPE_Q4_K_M) {
            if (use_more_bits(i, n))
                type = HX_TYPE_Q6_K;
        } else if (i < n / 8 && (f == HX_FTYPE_IQ4_NL || f == HX_FTYPE_IQ4_XS) && !p->has_imatrix)
            type = HX_TYPE_Q5_K;
        else if (f == HX_FTYPE_Q5_K_M && use_more_bits(i, n))
            type = HX_TYPE_Q6_K;
        else if (f == HX_FTYPE_Q4_K_S && i < n / 8)
            type = HX_TYPE_Q5_K;
        else if ((f == HX_FTYPE_Q4_0 || f == HX_FTYPE_Q5_0) && p->has_imatrix && i < n / 8)
            /* llama.cpp guards the first ffn_down layers, with an imatrix only */
            type = f == HX_FTYPE_Q4_0 ? HX_TYPE_Q4_1 : HX_TYPE_Q5_1;
        return type;
    }
    if (cat == CAT_ATTN_OUT && eight)
        return f == HX_FTYPE_Q2_K || f == HX_FTYPE_Q3_K_S || f == HX_FTYPE_Q3_K_M || f == HX_FTYPE_IQ4_NL ||
                       f == HX_FTYPE_Q4_K_S || f == HX_FTYPE_Q4_K_M || f == HX_FTYPE_IQ4_XS
                   ? HX_TYPE_Q5_K
                   : type;
    if (cat == CAT_ATTN_OUT) {
        if (f == HX_FTYPE_Q2_K)
            type = HX_TYPE_Q3_K;
        else if (f == HX_FTYPE_Q3_K_M)
            type = HX_TYPE_Q4_K;
        else if (f == HX_FTYPE_Q3_K_L)
            type = HX_TYPE_Q5_K;
        return type;
    }
    if (cat == CAT_QKV) {
        if (f == HX_FTYPE_Q3_K_M || f == HX_FTYPE_Q3_K_L)
            type = HX_TYPE_Q4_K;
        else if (f == HX_FTYPE_Q4_K_M)
            type = HX_TYPE_Q5_K;
        else if (f == HX_FTYPE_Q5_K_M)
            type = HX_TYPE_Q6_K;
    }
    return type;
}

static const hx_recipe_override *override_for(const hx_recipe_params *p, const char *name)
{
    for (size_t i = 0; i < p->n_overrides; i++)
        if (regexec(&p->overrides[i].re, name, 0, NULL, 0) == 0)
            return &p->overrides[i];
    return NULL;
}

int hx_quant_recipe_fixed(const hx_recipe_params *p, const hx_recipe_tensor *t)
{
    category cat = category_of(t->name);
    return (p->token_embd_type != HX_TYPE_COUNT && cat == CAT_TOKEN_EMBD) ||
           (p->output_type != HX_TYPE_COUNT && cat == CAT_OUTPUT) || override_for(p, t->name);
}

/* llama_tensor_get_type: the options first, then the recipe's rules, then
 * the fallback for rows that are not whole blocks. */
static hx_type choose_one(const hx_recipe_params *p, counters *c, const hx_recipe_tensor *t)
{
    if (!hx_quant_recipe_quantizable(p, t))
        return t->type;
    category cat = category_of(t->name);
    if (p->token_embd_type != HX_TYPE_COUNT && cat == CAT_TOKEN_EMBD) {
        /* per_layer_token_embd is a large table of its own: a --tensor-type
         * naming it wins */
        if (strcmp(t->name, "per_layer_token_embd.weight") != 0 || !override_for(p, t->name))
            return p->token_embd_type;
    }
    if (p->output_type != HX_TYPE_COUNT && cat == CAT_OUTPUT)
        return p->output_type;
    hx_type type = p->base;
    if (!hx_type_is_quantized(type))
        return type;
    const hx_recipe_override *o = override_for(p, t->name);
    if (o)
        type = o->type;
    else if (!p->pure)
        type = recipe_rule(p, c, t, cat, type);
    hx_type r = hx_quant_recipe_fallback(type, t->ne[0]);
    c->fallbacks += r != type;
    return r;
}

typedef struct {
    int layer;
    size_t index;
    const char *name;
} order_key;

/* llama_model_loader's order: layer (none first), then name. */
static int by_layer_then_name(const void *a, const void *b)
{
    const order_key *x = a, *y = b;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    return strcmp(x->name, y->name);
}

hx_status hx_quant_recipe_choose(const hx_recipe_params *p, const hx_recipe_tensor *t, size_t n, hx_type *types,
                                 int *n_fallback)
{
    if (!p || (!t && n) || (!types && n))
        return hx_error(HX_ERR_INVALID_ARG, "hx_quant_recipe_choose: NULL argument");
    order_key *keys = malloc((n ? n : 1) * sizeof *keys);
    if (!keys)
        return hx_error(HX_ERR_NO_MEMORY, "recipe order");
    counters c = {.n_layer = (int)p->n_layer, .tied = 1};
    for (size_t i = 0; i < n; i++) {
        keys[i] = (order_key){-1, i, t[i].name};
        sscanf(t[i].name, "blk.%d.", &keys[i].layer);
        category cat = category_of(t[i].name);
        c.n_attention_wv += is_attn_v(cat);
        if (cat == CAT_OUTPUT)
            c.tied = 0;
    }
    qsort(keys, n, sizeof *keys, by_layer_then_name);
    for (size_t k = 0; k < n; k++)
        types[keys[k].index] = choose_one(p, &c, &t[keys[k].index]);
    free(keys);
    if (n_fallback)
        *n_fallback = c.fallbacks;
    return HX_OK;
}

int hx_quant_requires_imatrix(const char *name, hx_type t)
{
    if (is_token_embd(name) || strcmp(name, "output.weight") == 0)
        return 0;
    switch (t) {
    case HX_TYPE_IQ3_XXS:
    case HX_TYPE_IQ2_XXS:
    case HX_TYPE_IQ2_XS:
    case HX_TYPE_IQ2_S:
    case HX_TYPE_IQ1_M:
    case HX_TYPE_IQ1_S:
        return 1;
    default:
        return 0; /* Q2_K only in llama.cpp's Q2_K_S recipe, not offered here */
    }
}
