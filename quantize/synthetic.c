/* The embedded default model: a deterministic LLaMA with seeded random
 * weights and a byte-level vocabulary, written as a GGUF file, so that the
 * tools and benchmarks run on a fresh machine with no download.
 *
 * Scales follow common initialisations (GPT-2's): N(0, 1/fan_in) for the
 * input projections, further divided by sqrt(2 * n_layer) for the matrices
 * that feed the residual stream, so activations stay O(1) through depth;
 * the output matrix is scaled up so next-token distributions are peaked,
 * as a trained model's are (flat ones would make every argmax a near-tie). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kernels_cpu/quant.h"
#include "model/arch.h"
#include "gguf/gguf.h"
#include "quantize/synthetic.h"
#include "text/tokenizer.h"
#include "runtime/cache_dir.h"
#include "runtime/error.h"

/* What the presets of the other architectures carry besides their shapes
 * (model/shapes.c): qwen3-tiny's heads (8 of 128) do not split its n_embd,
 * as Qwen3's do not; mixtral-tiny is a llama with 8 experts, 2 used;
 * qwen3moe-tiny has 16 experts, 4 used; gemma3-tiny a window of 32 on 5
 * layers of 6; qwen3moe-skewed has Qwen3-30B-A3B's experts (48 layers of
 * 128, 8 used) on tiny matrices, and a skewed router. */
static const struct {
    const char *name;
    hx_synthetic_extras x;
} preset_extra[] = {
    {"qwen3-tiny", {.head_dim = 128}},
    {"mixtral-tiny", {.n_expert = 8, .n_expert_used = 2}},
    {"qwen3moe-tiny", {.head_dim = 64, .n_expert = 16, .n_expert_used = 4}},
    {"gemma3-tiny", {.head_dim = 128, .window = 32}},
    {"qwen3moe-skewed", {.head_dim = 32, .n_expert = 128, .n_expert_used = 8, .router_skew = 1.0f}},
};
#define PRESET_NAMES "tiny, small, qwen3-tiny, mixtral-tiny, qwen3moe-tiny, gemma3-tiny, qwen3moe-skewed"

static const hx_synthetic_extras *preset_extras(const hx_synthetic_config *c)
{
    static const hx_synthetic_extras none;
    for (size_t i = 0; c && i < sizeof preset_extra / sizeof preset_extra[0]; i++)
        if (!strcmp(preset_extra[i].name, c->name))
            return &preset_extra[i].x;
    return &none;
}

const hx_synthetic_extras *hx_synthetic_preset_extras(const hx_synthetic_config *c) { return preset_extras(c); }

/* splitmix64: tiny, seedable, and the same on every platform. */
typedef struct {
    uint64_t s;
    int have;
    double spare;
} rng;

static uint64_t next_u64(rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform(rng *r) { return ((next_u64(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

static double normal(rng *r)
{
    if (r->have) {
        r->have = 0;
        return r->spare;
    }
    double u = uniform(r), v = uniform(r), m = sqrt(-2.0 * log(u));
    r->spare = m * sin(2 * M_PI * v);
    r->have = 1;
    return m * cos(2 * M_PI * v);
}

typedef struct {
    hx_gguf_writer *w;
    void **blobs;
    size_t n, cap;
    rng r;
    hx_type type;
} writer;

static hx_status keep(writer *wr, void *p)
{
    if (wr->n == wr->cap) {
        size_t cap = wr->cap ? 2 * wr->cap : 64;
        void **b = realloc(wr->blobs, cap * sizeof *b);
        if (!b)
            return hx_error(HX_ERR_NO_MEMORY, "synthetic model");
        wr->blobs = b;
        wr->cap = cap;
    }
    wr->blobs[wr->n++] = p;
    return HX_OK;
}

/* How each weight is drawn: N(mean, sd). */
typedef struct {
    double mean, sd;
} init;

/* A [rows][cols] tensor stored in `type`, its rows drawn in parts: part p
 * has rows[p] rows of N(inits[p]) values.  A fused tensor draws its parts
 * in the order the unfused ones are written, so both layouts of a seed
 * hold the same numbers. */
static hx_status tensor_parts3(writer *wr, const char *name, uint64_t cols, int n_parts, const uint64_t *rows,
                               const init *inits, hx_type type, uint64_t n2);

static hx_status tensor_parts(writer *wr, const char *name, uint64_t cols, int n_parts, const uint64_t *rows,
                              const init *inits, hx_type type)
{
    return tensor_parts3(wr, name, cols, n_parts, rows, inits, type, 1);
}

/* The same with n2 matrices of those rows one after the other (experts):
 * a 3-D tensor [n2][rows][cols] when n2 > 1. */
static hx_status tensor_parts3(writer *wr, const char *name, uint64_t cols, int n_parts, const uint64_t *rows,
                               const init *inits, hx_type type, uint64_t n2)
{
    size_t row_bytes = hx_type_row_size(type, cols);
    const hx_quant_ops *q = hx_quant_ops_get(type);
    if (!row_bytes || !q || !q->quantize_row)
        return hx_error(HX_ERR_UNSUPPORTED, "synthetic model: no quantizer for %s rows of %llu", hx_type_name(type),
                        (unsigned long long)cols);
    uint64_t per = 0;
    for (int p = 0; p < n_parts; p++)
        per += rows[p];
    const uint64_t total = per * n2;
    uint8_t *data = malloc(row_bytes * total);
    float *row = malloc(sizeof *row * cols);
    hx_status s = data && row ? keep(wr, data) : hx_error(HX_ERR_NO_MEMORY, "tensor %s", name);
    if (s) {
        free(data);
        free(row);
        return s;
    }
    uint64_t i = 0;
    for (uint64_t m = 0; m < n2; m++)
        for (int p = 0; p < n_parts; p++)
            for (uint64_t r = 0; r < rows[p]; r++, i++) {
                for (uint64_t j = 0; j < cols; j++)
                    row[j] = (float)(inits[p].mean + inits[p].sd * normal(&wr->r));
                q->quantize_row(row, data + i * row_bytes, (int64_t)cols);
            }
    free(row);
    uint64_t ne[3] = {cols, per, n2};
    return hx_gguf_writer_add_tensor(wr->w, name, type, n2 > 1 ? 3 : total == 1 ? 1 : 2, ne, data);
}

static hx_status tensor(writer *wr, const char *name, uint64_t cols, uint64_t rows, double mean, double sd,
                        hx_type type)
{
    return tensor_parts(wr, name, cols, 1, &rows, &(init){mean, sd}, type);
}

/* The rope_freqs.weight llama.cpp's converter writes for Llama 3.1's
 * rope_scaling {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1,
 * "high_freq_factor": 4, "original_max_position_embeddings": n_ctx}:
 * short wavelengths keep their frequency (1), long ones are divided by 8,
 * and those between are interpolated. */
static hx_status llama3_rope_freqs(writer *wr, uint32_t n_rot, float base, uint32_t n_ctx)
{
    const double factor = 8, low = 1, high = 4, low_wavelen = n_ctx / low, high_wavelen = n_ctx / high;
    float *f = malloc(sizeof *f * (n_rot / 2));
    hx_status s = f ? keep(wr, f) : hx_error(HX_ERR_NO_MEMORY, "rope_freqs");
    if (s) {
        free(f);
        return s;
    }
    for (uint32_t i = 0; i < n_rot / 2; i++) {
        const double wavelen = 2 * M_PI * pow(base, 2.0 * i / n_rot);
        if (wavelen < high_wavelen) {
            f[i] = 1;
        } else if (wavelen > low_wavelen) {
            f[i] = (float)factor;
        } else {
            const double smooth = (n_ctx / wavelen - low) / (high - low);
            f[i] = (float)(1 / ((1 - smooth) / factor + smooth));
        }
    }
    uint64_t ne[1] = {n_rot / 2};
    return hx_gguf_writer_add_tensor(wr->w, "rope_freqs.weight", HX_TYPE_F32, 1, ne, f);
}

/* How each layer weight is drawn: norms near 1, projections N(0, 1/fan_in)
 * (the residual-stream ones smaller still), biases visibly non-zero. */

static void layer_inits(init *t, double in, double res, uint64_t D, uint64_t F, uint64_t Q)
{
    t[HX_LW_ATTN_NORM] = t[HX_LW_FFN_NORM] = (init){1, 0.1};
    t[HX_LW_Q] = t[HX_LW_K] = t[HX_LW_V] = t[HX_LW_GATE] = t[HX_LW_UP] = (init){0, in};
    t[HX_LW_O] = (init){0, res * sqrt((double)D / Q)};
    t[HX_LW_DOWN] = (init){0, res * sqrt((double)D / F)};
    t[HX_LW_Q_BIAS] = t[HX_LW_K_BIAS] = t[HX_LW_V_BIAS] = (init){0, 0.5};
    t[HX_LW_Q_NORM] = t[HX_LW_K_NORM] = t[HX_LW_ATTN_POST_NORM] = t[HX_LW_FFN_POST_NORM] = (init){1, 0.1};
    /* The router: logits of spread ~2, so that top-k choices are clear. */
    t[HX_LW_GATE_INP] = (init){0, 2 * in};
    t[HX_LW_GATE_EXPS] = t[HX_LW_UP_EXPS] = t[HX_LW_GATE_SHEXP] = t[HX_LW_UP_SHEXP] = t[HX_LW_GATE_INP_SHEXP] =
        (init){0, in};
    t[HX_LW_DOWN_EXPS] = t[HX_LW_DOWN_SHEXP] = (init){0, res * sqrt((double)D / F)};
}

static hx_status set_u32(hx_gguf_writer *w, const hx_arch *a, hx_hparam k, uint32_t v)
{
    char key[96];
    if (!a->key[k])
        return hx_error(HX_ERR_INVALID_ARG, "synthetic model: architecture '%s' ignores that key", a->name);
    snprintf(key, sizeof key, "%s.%s", a->key_prefix, a->key[k]);
    return hx_gguf_writer_set_u32(w, key, v);
}

static hx_status set_f32(hx_gguf_writer *w, const hx_arch *a, hx_hparam k, float v)
{
    char key[96];
    if (!a->key[k])
        return hx_error(HX_ERR_INVALID_ARG, "synthetic model: architecture '%s' ignores that key", a->name);
    snprintf(key, sizeof key, "%s.%s", a->key_prefix, a->key[k]);
    return hx_gguf_writer_set_f32(w, key, v);
}

static hx_status set_str(hx_gguf_writer *w, const hx_arch *a, hx_hparam k, const char *v)
{
    char key[96];
    if (!a->key[k])
        return hx_error(HX_ERR_INVALID_ARG, "synthetic model: architecture '%s' ignores that key", a->name);
    snprintf(key, sizeof key, "%s.%s", a->key_prefix, a->key[k]);
    return hx_gguf_writer_set_str(w, key, v);
}

/* A router whose rows have means that favour some experts
 * (hx_synthetic_extras.router_skew): the normed hidden states share a
 * component of about 0.7 per element (the embeddings' mean of 1 over an
 * RMS of about sqrt 2), so a row mean of mu shifts the logit by about
 * 0.7 D mu. */
static hx_status skewed_router(writer *wr, const char *name, uint64_t D, uint32_t E, float skew, init base)
{
    uint64_t *rows = malloc(sizeof *rows * E);
    init *in = malloc(sizeof *in * E);
    hx_status s = rows && in ? HX_OK : hx_error(HX_ERR_NO_MEMORY, "router");
    const uint32_t groups = E >= 8 ? E / 8 : 1;
    for (uint32_t e = 0; s == HX_OK && e < E; e++) {
        uint32_t g = e / 8 % groups, rank = ((5 * g + 3) % groups) * 8 + e % 8;
        rows[e] = 1;
        in[e] = (init){-skew * log(1.0 + rank) / (0.7 * (double)D), base.sd};
    }
    if (s == HX_OK)
        s = tensor_parts3(wr, name, D, (int)E, rows, in, HX_TYPE_F32, 1);
    free(rows), free(in);
    return s;
}

/* Everything the architecture's entry requires, and nothing optional
 * unless the configuration asks for it. */
static hx_status write_all(writer *wr, const hx_synthetic_config *c, const hx_synthetic_extras *x,
                           const hx_arch *a, const char *type_name)
{
    hx_gguf_writer *w = wr->w;
    const uint64_t Dh = x->head_dim ? x->head_dim : c->n_embd / c->n_head;
    const uint64_t D = c->n_embd, Dkv = Dh * c->n_head_kv, F = c->n_ff;
    const uint64_t V = x->n_vocab > HX_TOKENIZER_BYTES_VOCAB ? x->n_vocab : HX_TOKENIZER_BYTES_VOCAB;
    /* Experts where the architecture must have them, or where asked for. */
    const int must = hx_arch_presence(a, HX_LW_GATE_EXPS, 0) == HX_TENSOR_REQUIRED ||
                     (hx_arch_presence(a, HX_LW_GATE_EXPS, 1) == HX_TENSOR_REQUIRED &&
                      hx_arch_presence(a, HX_LW_DOWN, 0) == HX_TENSOR_NONE);
    const uint32_t E = x->n_expert ? x->n_expert : must ? 4 : 0, k = x->n_expert_used ? x->n_expert_used : 2;
    if (E && (hx_arch_presence(a, HX_LW_GATE_EXPS, 1) != HX_TENSOR_REQUIRED || k > E))
        return hx_error(HX_ERR_INVALID_ARG, "synthetic model: architecture '%s' with %u of %u experts", a->name, k, E);
    const uint64_t dims[HX_DIMS] = {[HX_DIM_ONE] = 1, [HX_DIM_EMBD] = D, [HX_DIM_KV] = Dkv, [HX_DIM_FF] = F,
                                    [HX_DIM_Q] = Dh * c->n_head, [HX_DIM_HEAD] = Dh, [HX_DIM_EXPERTS] = E,
                                    [HX_DIM_FF_EXP] = F, [HX_DIM_FF_SHEXP] = F};
    const double in = 1.0 / sqrt((double)D), res = in / sqrt(2.0 * c->n_layer);
    init inits[HX_LAYER_SLOTS];
    layer_inits(inits, in, res, D, F, dims[HX_DIM_Q]);
    if (x->k_bias_sd)
        inits[HX_LW_K_BIAS].sd = x->k_bias_sd;
    char name[64];
    hx_status s;
    snprintf(name, sizeof name, "hetero-synthetic-%s-%s", c->name, type_name);
    if ((s = hx_gguf_writer_set_str(w, "general.architecture", a->name)) ||
        (s = hx_gguf_writer_set_str(w, "general.name", name)) ||
        (s = set_u32(w, a, HX_HP_CTX, c->n_ctx)) || (s = set_u32(w, a, HX_HP_EMBD, c->n_embd)) ||
        (s = set_u32(w, a, HX_HP_LAYERS, c->n_layer)) || (s = set_u32(w, a, HX_HP_FF, c->n_ff)) ||
        (s = set_u32(w, a, HX_HP_HEADS, c->n_head)) || (s = set_u32(w, a, HX_HP_HEADS_KV, c->n_head_kv)) ||
        (s = set_u32(w, a, HX_HP_ROPE_DIMS, (uint32_t)Dh)) ||
        (x->head_dim && ((s = set_u32(w, a, HX_HP_KEY_LENGTH, x->head_dim)) ||
                         (s = set_u32(w, a, HX_HP_VALUE_LENGTH, x->head_dim)))) ||
        (E && ((s = set_u32(w, a, HX_HP_EXPERTS, E)) || (s = set_u32(w, a, HX_HP_EXPERTS_USED, k)) ||
               (s = set_u32(w, a, HX_HP_FF_EXP, c->n_ff)) || (s = set_u32(w, a, HX_HP_FF_SHEXP, c->n_ff)))) ||
        (s = set_f32(w, a, HX_HP_ROPE_BASE, a->typical_rope_base)) ||
        (s = set_f32(w, a, HX_HP_NORM_EPS, a->typical_norm_eps)) ||
        (x->window && (s = set_u32(w, a, HX_HP_SLIDING_WINDOW, x->window))) ||
        (x->rope_scaling && (s = set_str(w, a, HX_HP_ROPE_SCALING_TYPE, x->rope_scaling))) ||
        (x->rope_scaling_factor && (s = set_f32(w, a, HX_HP_ROPE_SCALING_FACTOR, x->rope_scaling_factor))) ||
        (s = hx_tokenizer_write_bytes_kv(w)) ||
        (x->chat_template && (s = hx_gguf_writer_set_str(w, "tokenizer.chat_template", x->chat_template))))
        return s;
    for (size_t k = 0; x->named_templates && x->named_templates[k]; k += 2) {
        char key[128];
        snprintf(key, sizeof key, "tokenizer.chat_template.%s", x->named_templates[k]);
        if ((s = hx_gguf_writer_set_str(w, key, x->named_templates[k + 1])))
            return s;
    }
    if (x->rope_freqs && !a->rope_freqs)
        return hx_error(HX_ERR_INVALID_ARG, "synthetic model: architecture '%s' has no rope_freqs", a->name);
    if ((x->rope_freqs && (s = llama3_rope_freqs(wr, (uint32_t)Dh, a->typical_rope_base, c->n_ctx))) ||
        (s = tensor(wr, a->token_embd, D, V, x->router_skew > 0 ? 1 : 0, 1, wr->type)))
        return s;
    for (uint32_t l = 0; l < c->n_layer; l++)
        for (int i = 0; i < HX_LAYER_SLOTS; i++) {
            /* A fused tensor is written whole at its first slot. */
            if (hx_arch_presence(a, (hx_layer_slot)i, E > 0) != HX_TENSOR_REQUIRED ||
                (int)hx_arch_tensor_owner(a, (hx_layer_slot)i) != i)
                continue;
            const hx_layer_slot_shape *sh = &hx_layer_slot_shapes[i];
            uint64_t rows[HX_LAYER_SLOTS];
            init parts[HX_LAYER_SLOTS];
            int n = 0;
            for (int j = i; j < HX_LAYER_SLOTS; j++)
                if (a->layer_presence[j] != HX_TENSOR_NONE && !strcmp(a->layer_tensor[j], a->layer_tensor[i])) {
                    rows[n] = dims[hx_layer_slot_shapes[j].ne1];
                    parts[n++] = inits[j];
                }
            snprintf(name, sizeof name, "blk.%u.%s", l, a->layer_tensor[i]);
            /* Vectors and the router stay F32, as llama-quantize keeps them. */
            const int f32 = sh->ne1 == HX_DIM_ONE || i == HX_LW_GATE_INP;
            if (i == HX_LW_GATE_INP && x->router_skew > 0) {
                if ((s = skewed_router(wr, name, D, E, x->router_skew, inits[i])))
                    return s;
                continue;
            }
            if ((s = tensor_parts3(wr, name, dims[sh->ne0], n, rows, parts, f32 ? HX_TYPE_F32 : wr->type,
                                   dims[sh->ne2])))
                return s;
        }
    if ((s = tensor(wr, a->output_norm, D, 1, 1, 0.1, HX_TYPE_F32)))
        return s;
    const double spread = 4.0 * in * (x->output_scale > 0 ? x->output_scale : 1);
    return c->tied ? HX_OK : tensor(wr, a->output, D, V, 0, spread, wr->type);
}

hx_status hx_synthetic_write(const char *path, const hx_synthetic_config *c, const char *type, uint64_t seed)
{
    return hx_synthetic_write_windowed(path, c, type, seed, 0);
}

hx_status hx_synthetic_write_windowed(const char *path, const hx_synthetic_config *c, const char *type,
                                      uint64_t seed, uint32_t window)
{
    return hx_synthetic_write_with(path, c, &(hx_synthetic_extras){.window = window}, type, seed);
}

hx_status hx_synthetic_write_with(const char *path, const hx_synthetic_config *c, const hx_synthetic_extras *x,
                                  const char *type, uint64_t seed)
{
    hx_type t;
    if (!path || !c || !x || !type)
        return hx_error(HX_ERR_INVALID_ARG, "synthetic model: NULL argument");
    if (!hx_type_from_name(type, &t))
        return hx_error(HX_ERR_INVALID_ARG, "synthetic model: unknown type '%s'", type);
    if (c->n_head == 0 || c->n_head_kv == 0 || (!x->head_dim && c->n_embd % c->n_head) ||
        c->n_head % c->n_head_kv || c->n_layer == 0)
        return hx_error(HX_ERR_INVALID_ARG, "synthetic model '%s': impossible shape", c->name);
    const hx_arch *a = hx_arch_find(c->arch ? c->arch : "llama");
    if (!a) {
        char known[256];
        hx_arch_names(known, sizeof known);
        return hx_error(HX_ERR_INVALID_ARG, "synthetic model: architecture '%s' (known: %s)", c->arch, known);
    }
    writer wr = {.r = {.s = seed}, .type = t};
    hx_status s = hx_gguf_writer_create(&wr.w);
    if (s == HX_OK)
        s = write_all(&wr, c, x, a, type);
    if (s == HX_OK)
        s = hx_gguf_writer_write(wr.w, path);
    hx_gguf_writer_free(wr.w);
    for (size_t i = 0; i < wr.n; i++)
        free(wr.blobs[i]);
    free(wr.blobs);
    return s;
}

static hx_status write_synthetic(const char *path, const char *preset, const char *type, uint64_t seed)
{
    const hx_synthetic_config *c = hx_synthetic_preset(preset);
    if (!c)
        return hx_error(HX_ERR_INVALID_ARG, "unknown synthetic preset '%s' (" PRESET_NAMES ")", preset ? preset : "");
    return hx_synthetic_write_with(path, c, preset_extras(c), type, seed);
}

hx_status hx_model_write_synthetic(const char *path, const char *preset, const char *type, uint64_t seed)
{
    hx_api_enter();
    return hx_api_leave(write_synthetic(path, preset, type, seed));
}

static hx_status synthetic_cached(const char *preset, const char *type, char *path, size_t cap, int *written)
{
    if (!preset || !type || !path || cap == 0)
        return hx_error(HX_ERR_INVALID_ARG, "hx_model_synthetic_cached: NULL argument");
    if (written)
        *written = 0;
    if (!hx_synthetic_preset(preset))
        return hx_error(HX_ERR_INVALID_ARG, "unknown synthetic preset '%s' (" PRESET_NAMES ")", preset);
    /* hetero's cache (runtime/cache_dir.h), as for every other cache; a
     * model must be written somewhere even when caching is off or there is
     * no home, so then the user's cache, else /tmp's. */
    char dir[512];
    if (!hx_cache_dir("models", dir, sizeof dir)) {
        const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        if (xdg && *xdg)
            snprintf(dir, sizeof dir, "%s/hetero/models", xdg);
        else
            snprintf(dir, sizeof dir, "%s/.cache/hetero/models", home && *home ? home : "/tmp");
    }
    /* mkdir -p: every parent, the cache root included, may be missing. */
    for (char *p = dir + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(dir, 0755);
            *p = '/';
        }
    mkdir(dir, 0755);
    if ((size_t)snprintf(path, cap, "%s/synthetic-%s-%s.gguf", dir, preset, type) >= cap)
        return hx_error(HX_ERR_RANGE, "hx_model_synthetic_cached: path longer than %zu bytes", cap);
    struct stat st;
    if (stat(path, &st) == 0)
        return HX_OK;
    /* The writer renames a finished file into place: a concurrent writer
     * or reader sees either no file or a whole one. */
    hx_status s = hx_model_write_synthetic(path, preset, type, 1234);
    if (s == HX_OK && written)
        *written = 1;
    return s;
}

hx_status hx_model_synthetic_cached(const char *preset, const char *type, char *path, size_t cap, int *written)
{
    hx_api_enter();
    return hx_api_leave(synthetic_cached(preset, type, path, cap, written));
}
