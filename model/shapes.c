/* Models without weights, for simulated machines: the shapes of a known
 * architecture, weight buffers that are sizes only (a simulated runtime
 * gives a buffer memory when the host touches it, and no task does), so a
 * 70B model's task graph runs through the simulator on a laptop. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/synthetic.h"
#include "runtime/buffer.h"
#include "ops/types.h"
#include "runtime/error.h"
#include "runtime/handle.h"

typedef struct {
    const char *name, *title;
    uint32_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
    /* Mixture of experts (0 experts: dense): the architecture, the head
     * size when it is not n_embd / n_head, experts, experts per token, and
     * the groups each layer's experts are cut into (the placement
     * planner's unit: a group is on one device). */
    const char *arch;
    uint32_t head_dim, n_expert, n_expert_used, n_groups;
    float rope_base;
} shape;

/* The published LLaMA-2 and Llama-3.1 configurations (Llama 3 and 3.1 share
 * their shapes; 3.1 was trained to a 128k context), and two mixtures of
 * experts: Mixtral-8x7B (mistralai/Mixtral-8x7B-v0.1 config.json: 4096
 * wide, 32 layers, 32 heads, 8 KV heads, 8 experts of 14336, top 2,
 * rope_theta 1e6) and Qwen3-30B-A3B (Qwen/Qwen3-30B-A3B config.json: 2048
 * wide, 48 layers, 32 heads of 128, 4 KV heads, 128 experts of 768, top
 * 8, vocabulary 151936, rope_theta 1e6).  And SmolLM2-135M
 * (HuggingFaceTB/SmolLM2-135M config.json: 576 wide, 30 layers, 9 heads,
 * 3 KV heads, 1536 FFN, vocabulary 49152, rope_theta 100000), the
 * published model this machine runs, so that a simulated run can stand
 * beside a measured one. */
static const shape shapes[] = {
    {"llama2-7b", "LLaMA-2-7B shapes", 4096, 32, 32, 32, 11008, 32000, 4096, "llama", 0, 0, 0, 0, 10000.0f},
    {"llama2-13b", "LLaMA-2-13B shapes", 5120, 40, 40, 40, 13824, 32000, 4096, "llama", 0, 0, 0, 0, 10000.0f},
    {"llama2-70b", "LLaMA-2-70B shapes", 8192, 80, 64, 8, 28672, 32000, 4096, "llama", 0, 0, 0, 0, 10000.0f},
    {"llama3-8b", "Llama-3.1-8B shapes", 4096, 32, 32, 8, 14336, 128256, 131072, "llama", 0, 0, 0, 0, 10000.0f},
    {"llama3-70b", "Llama-3.1-70B shapes", 8192, 80, 64, 8, 28672, 128256, 131072, "llama", 0, 0, 0, 0, 10000.0f},
    {"mixtral-8x7b", "Mixtral-8x7B shapes", 4096, 32, 32, 8, 14336, 32000, 32768, "llama", 0, 8, 2, 8, 1e6f},
    {"qwen3-30b-a3b", "Qwen3-30B-A3B shapes", 2048, 48, 32, 4, 768, 151936, 40960, "qwen3moe", 128, 128, 8, 16,
     1e6f},
    {"smollm2-135m", "SmolLM2-135M shapes", 576, 30, 9, 3, 1536, 49152, 8192, "llama", 0, 0, 0, 0, 100000.0f},
};

/* The synthetic models' shapes (model/synthetic.h), which
 * quantize/synthetic.c writes with weights. */
static const hx_synthetic_config presets[] = {
    {"tiny", 512, 5, 8, 4, 1536, 2048, "llama", 0},
    {"small", 768, 12, 12, 12, 2816, 2048, "llama", 0},
    /* The other architectures, so that a file of each can be written and
     * compared with another implementation; what each carries besides its
     * shape (heads, experts, window) is quantize/synthetic.c's. */
    {"qwen3-tiny", 512, 4, 8, 4, 1536, 2048, "qwen3", 0},
    {"mixtral-tiny", 512, 4, 8, 4, 768, 2048, "llama", 0},
    {"qwen3moe-tiny", 512, 4, 8, 4, 512, 2048, "qwen3moe", 0},
    {"gemma3-tiny", 512, 6, 4, 1, 1536, 2048, "gemma3", 0},
    {"qwen3moe-skewed", 128, 48, 4, 2, 32, 2048, "qwen3moe", 0},
};

const hx_synthetic_config *hx_synthetic_preset(const char *name)
{
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (name && !strcmp(presets[i].name, name))
            return &presets[i];
    return NULL;
}

/* The synthetic presets' vocabulary: bytes and three specials. */
#define HX_SYNTHETIC_VOCAB 259

static hx_status find_shape(const char *name, shape *out)
{
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (!strcmp(shapes[i].name, name)) {
            *out = shapes[i];
            return HX_OK;
        }
    const hx_synthetic_config *c = hx_synthetic_preset(name);
    /* Shapes are a llama's: the other architectures' presets have none. */
    if (!c || (c->arch && strcmp(c->arch, "llama")) || strstr(c->name, "mixtral")) {
        char known[512] = "";
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            snprintf(known + strlen(known), sizeof known - strlen(known), "%s, ", shapes[i].name);
        return hx_error(HX_ERR_INVALID_ARG, "unknown shapes '%s' (%stiny, small)", name, known);
    }
    *out = (shape){c->name, c->name, c->n_embd, c->n_layer, c->n_head, c->n_head_kv, c->n_ff,
                   HX_SYNTHETIC_VOCAB, c->n_ctx, "llama", 0, 0, 0, 0, 10000.0f};
    return HX_OK;
}

static hx_status weight(hx_model *m, hx_weight *w, hx_type type, uint64_t ne0, uint64_t ne1)
{
    w->type = ne1 == 1 ? HX_TYPE_F32 : type; /* norms stay f32, as in every GGUF */
    w->ne0 = ne0;
    w->ne1 = ne1;
    size_t bytes = hx_type_row_size(w->type, ne0) * ne1;
    m->info.n_params += ne0 * ne1;
    m->info.file_bytes += bytes; /* what the GGUF file's weights would take */
    hx_status s = hx_buffer_create(m->rt, bytes, &w->buf);
    if (s == HX_OK)
        hx_buffer_set_read_only(w->buf); /* weights, as a mapped file's are */
    return s;
}

static int expert_slot(int i) { return i == HX_LW_GATE_EXPS || i == HX_LW_UP_EXPS || i == HX_LW_DOWN_EXPS; }

/* A layer's experts in n_groups groups of buffers of their own: sizes
 * only, counted in the model's parameters and file bytes as one tensor. */
static hx_status expert_groups(hx_model *m, hx_layer_weights *L, uint32_t n_groups)
{
    const uint32_t E = m->hp.n_expert;
    hx_status s = hx_expert_groups_cut(L, E, n_groups);
    if (s)
        return s;
    for (int i = HX_LW_GATE_EXPS; i <= HX_LW_DOWN_EXPS; i++) {
        hx_weight *w = &L->w[i];
        m->info.n_params += w->ne0 * w->ne1 * E;
        m->info.file_bytes += hx_type_row_size(w->type, w->ne0) * w->ne1 * E;
    }
    for (uint32_t g = 0; g < n_groups; g++) {
        hx_expert_group *G = &L->groups[g];
        hx_buffer **b[3] = {&G->gate, &G->up, &G->down};
        for (int i = 0; i < 3; i++) {
            const hx_weight *w = &L->w[HX_LW_GATE_EXPS + i];
            s = hx_buffer_create(m->rt, hx_type_row_size(w->type, w->ne0) * w->ne1 * G->e_n, b[i]);
            if (s)
                return s;
            hx_buffer_set_read_only(*b[i]);
        }
    }
    return HX_OK;
}

static hx_status build(hx_model *m, hx_type type, uint32_t n_groups)
{
    const hx_model_info *in = &m->info;
    const uint64_t D = in->n_embd;
    hx_status s;
    if ((s = weight(m, &m->tok_embd, type, D, in->n_vocab)) || (s = weight(m, &m->out_norm, type, D, 1)) ||
        (s = weight(m, &m->output, type, D, in->n_vocab)))
        return s;
    if (!(m->layers = calloc(in->n_layer, sizeof *m->layers)))
        return hx_error(HX_ERR_NO_MEMORY, "layer table");
    /* The architecture's required weights: shapes only, no biases; the
     * experts' as groups. */
    const hx_arch *a = m->arch;
    uint64_t dims[HX_DIMS];
    hx_model_dims(m, dims);
    for (uint32_t l = 0; l < in->n_layer; l++) {
        for (int i = 0; i < HX_LAYER_SLOTS; i++) {
            const hx_layer_slot_shape *sh = &hx_layer_slot_shapes[i];
            if (hx_arch_presence(a, (hx_layer_slot)i, m->hp.n_expert > 0) != HX_TENSOR_REQUIRED)
                continue;
            if (expert_slot(i)) {
                hx_weight *w = &m->layers[l].w[i];
                w->type = type, w->ne0 = dims[sh->ne0], w->ne1 = dims[sh->ne1];
                continue;
            }
            if ((s = weight(m, &m->layers[l].w[i], type, dims[sh->ne0], dims[sh->ne1])))
                return s;
        }
        if (m->hp.n_expert && (s = expert_groups(m, &m->layers[l], n_groups)))
            return s;
    }
    return HX_OK;
}

static hx_status load_shapes(hx_runtime *rt, const char *name, const char *type_name,
                             const hx_model_options *opts, hx_model **out)
{
    if (!name || !type_name || !out)
        return hx_error(HX_ERR_INVALID_ARG, "hx_model_load_shapes: NULL argument");
    *out = NULL;
    if (!hx_runtime_simulated(rt))
        return hx_error(HX_ERR_UNSUPPORTED, "a model without weights ('%s') runs only on a simulated machine", name);
    shape sh = {0};
    hx_type type;
    /* NAME/N: the first N layers of NAME, a pipeline stage's share of the
     * model (the simulator across nodes, bench/cluster.c). */
    char base[64];
    const char *slash = strchr(name, '/');
    snprintf(base, sizeof base, "%.*s", slash ? (int)(slash - name) : (int)strlen(name), name);
    hx_status s = find_shape(base, &sh);
    if (s)
        return s;
    char title[128];
    if (slash) {
        char *end = NULL;
        long n = strtol(slash + 1, &end, 10);
        if (end == slash + 1 || *end || n < 1 || n > (long)sh.n_layer)
            return hx_error(HX_ERR_INVALID_ARG, "shapes '%s': after '/' the layers to keep, 1 to %u", name,
                            sh.n_layer);
        snprintf(title, sizeof title, "%s, %ld of %u layers", sh.title, n, sh.n_layer);
        sh.n_layer = (uint32_t)n;
        sh.title = title;
    }
    if (!hx_type_from_name(type_name, &type) || hx_type_row_check(type, sh.n_embd) ||
        hx_type_row_check(type, sh.n_ff))
        return hx_error(HX_ERR_INVALID_ARG, "weight type '%s' for shapes '%s'", type_name, name);
    hx_model *m = calloc(1, sizeof *m);
    if (!m)
        return hx_error(HX_ERR_NO_MEMORY, "model");
    m->rt = rt;
    pthread_mutex_init(&m->eval_lock, NULL);
    hx_model_info *in = &m->info;
    m->arch = hx_arch_find(sh.arch);
    snprintf(in->arch, sizeof in->arch, "%s", m->arch->name);
    snprintf(in->name, sizeof in->name, "%s", sh.title);
    snprintf(in->ftype, sizeof in->ftype, "%s", hx_type_name(type));
    in->n_vocab = sh.n_vocab;
    in->n_ctx_train = sh.n_ctx;
    in->n_embd = sh.n_embd;
    in->n_layer = sh.n_layer;
    in->n_head = sh.n_head;
    in->n_head_kv = sh.n_head_kv;
    in->n_ff = sh.n_ff;
    in->head_dim = sh.head_dim ? sh.head_dim : sh.n_embd / sh.n_head;
    m->hp = (hx_model_hparams){.eps = 1e-5f, .rope_base = sh.rope_base, .rope_scale = 1.0f, .n_rot = in->head_dim,
                               .q_dim = in->n_head * in->head_dim, .n_expert = sh.n_expert,
                               .n_expert_used = sh.n_expert_used, .n_ff_exp = sh.n_expert ? sh.n_ff : 0};
    in->n_expert = sh.n_expert;
    in->n_expert_used = sh.n_expert_used;
    /* The router's choices (model/moe_routing.c): declared, or a tally
     * file's; a model without weights has no router to measure. */
    s = build(m, type, sh.n_groups);
    if (s == HX_OK)
        s = hx_model_prepare(m, opts);
    if (s) {
        hx_error_context(s, "shapes %s", name);
        hx_model_destroy(m);
        return s;
    }
    *out = m;
    return HX_OK;
}

hx_status hx_model_load_shapes(hx_runtime *rt, const char *name, const char *type_name,
                               const hx_model_options *opts, hx_model **out)
{
    hx_api_enter();
    if (out)
        *out = NULL;
    hx_status s = hx_handle_check(rt, HX_HANDLE_RUNTIME, "hx_model_load_shapes");
    if (s == HX_OK && (s = load_shapes(rt, name, type_name, opts, out)) == HX_OK)
        s = hx_model_opened(*out, out);
    return hx_api_leave(s);
}
