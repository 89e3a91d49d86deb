/* The activation buffers of an evaluation, in sets sized for 1, 4, 16
 * ... max_batch tokens (model.h says why); the meta and logits buffers
 * grow on demand (their size depends on the batch's sequences and on how
 * many logits are kept). */
#include <stdlib.h>

#include "model/model.h"
#include "ops/ops.h"
#include "runtime/error.h"
#include "runtime/runtime.h"

hx_status hx_model_act_alloc(hx_model *m);
void hx_model_act_free(hx_model *m);

hx_status hx_model_act_ensure(hx_model *m, hx_buffer **b, size_t bytes)
{
    size_t have = *b ? hx_buffer_size(*b) : 0;
    if (have >= bytes)
        return HX_OK;
    /* Grow geometrically so a slowly growing context reallocates rarely. */
    size_t want = 2 * have > bytes ? 2 * have : bytes;
    hx_buffer_destroy(*b);
    *b = NULL;
    m->act_generation++; /* recorded graphs name the old buffer */
    return hx_buffer_create(m->rt, want, b);
}

/* Experts in groups and a device with memory of its own: a plan may
 * split a layer's groups between that memory and the host's, and the
 * graph then runs them in two lanes (partitioner/llama_graph.c). */
static int expert_lanes(const hx_model *m)
{
    int grouped = 0;
    for (uint32_t l = 0; m->layers && l < m->info.n_layer; l++)
        grouped |= m->layers[l].n_groups > 1;
    return grouped && m->rt->n_memory_nodes > 1; /* node 0 is host memory */
}

static hx_status alloc_set(hx_model *m, hx_activations *a, uint32_t capacity)
{
    const hx_model_info *in = &m->info;
    const size_t B = capacity, f = sizeof(float);
    const size_t D = in->n_embd, Dkv = (size_t)in->n_head_kv * in->head_dim, F = in->n_ff;
    const size_t Hd = (size_t)in->n_head * in->head_dim;
    const int split = m->opts.kv_split > 0;
    const int norms = m->arch && hx_arch_presence(m->arch, HX_LW_Q_NORM, 0) == HX_TENSOR_REQUIRED;
    const hx_model_hparams *hp = &m->hp;
    const size_t E = hp->n_expert, k = hp->n_expert_used;
    const int shexp = E && m->arch && hx_arch_presence(m->arch, HX_LW_DOWN_SHEXP, 1) == HX_TENSOR_REQUIRED;
    const int lanes = E && expert_lanes(m);
    a->max_batch = (uint32_t)B;
    struct {
        hx_buffer **b;
        size_t bytes;
    } list[] = {
        {&a->x, B * D * f},   {&a->xn, B * D * f},  {&a->q, B * Hd * f},      {&a->k, B * Dkv * f},
        {&a->v, B * Dkv * f}, {&a->att, B * Hd * f}, {&a->o, B * D * f},      {&a->g, B * F * f},
        {&a->u, B * F * f},   {&a->h, B * F * f},   {&a->ids, B * 4},         {&a->out_rows, B * 4}, {&a->pos, B * 4},
        {&a->xo, B * D * f},  {&a->meta, (3 * B + 64) * 4}, {&a->logits, (size_t)in->n_vocab * f},
        {&a->att_part[0], split ? B * Hd * f : 0}, {&a->att_part[1], split ? B * Hd * f : 0},
        {&a->att_stats[0], split ? B * in->n_head * 2 * f : 0}, {&a->att_stats[1], split ? B * in->n_head * 2 * f : 0},
        {&a->q0, norms ? B * Hd * f : 0}, {&a->k0, norms ? B * Dkv * f : 0},
        {&a->router, B * E * f}, {&a->route, E ? hx_moe_route_words((uint32_t)B, (uint32_t)k, (uint32_t)E) * 4 : 0},
        {&a->moe_h, B * k * hp->n_ff_exp * f}, {&a->moe_out, E ? B * D * f : 0},
        {&a->moe_h1, lanes ? B * k * hp->n_ff_exp * f : 0}, {&a->moe_out1, lanes ? B * D * f : 0},
        {&a->sg, shexp ? B * hp->n_ff_shexp * f : 0}, {&a->su, shexp ? B * hp->n_ff_shexp * f : 0},
        {&a->sh, shexp ? B * hp->n_ff_shexp * f : 0}, {&a->sgate, shexp ? B * f : 0},
    };
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {
        if (!list[i].bytes)
            continue;
        hx_status s = hx_buffer_create(m->rt, list[i].bytes, list[i].b);
        if (s)
            return hx_error_context(s, "activation buffers for a batch of %zu", B);
    }
    return HX_OK;
}

static hx_status alloc_family(hx_model *m, hx_activations *sets, int *n)
{
    const uint32_t max = m->opts.max_batch;
    *n = 0;
    for (uint32_t cap = 1; *n < HX_ACT_SETS; cap *= 4) {
        uint32_t c = cap < max && *n + 1 < HX_ACT_SETS ? cap : max;
        hx_status s = alloc_set(m, &sets[(*n)++], c);
        if (s || c == max)
            return s;
    }
    return HX_OK;
}

hx_status hx_model_act_alloc(hx_model *m)
{
    return alloc_family(m, m->act, &m->n_act);
}

hx_status hx_model_scratch(hx_model *m, int slot, size_t bytes, void **out)
{
    if (m->scratch_size[slot] < bytes) {
        /* Geometric growth, as the activation buffers: a context that
         * grows by a block at a time reallocates a few times in all. */
        size_t want = 2 * m->scratch_size[slot] > bytes ? 2 * m->scratch_size[slot] : bytes;
        void *p = realloc(m->scratch[slot], want);
        if (!p)
            return hx_error(HX_ERR_NO_MEMORY, "%zu bytes of evaluation scratch", want);
        m->scratch[slot] = p;
        m->scratch_size[slot] = want;
    }
    *out = m->scratch[slot];
    return HX_OK;
}

hx_activations *hx_model_act_for(hx_model *m, uint32_t T)
{
    for (int i = 0; i < m->n_act; i++)
        if (m->act[i].max_batch >= T)
            return &m->act[i];
    return &m->act[m->n_act - 1];
}

hx_activations *hx_model_act_for_mb(hx_model *m, uint32_t T)
{
    if (m->n_act_mb < 0)
        return NULL;
    if (!m->n_act_mb && alloc_family(m, m->act_mb, &m->n_act_mb)) {
        m->n_act_mb = -1; /* not again; what was made is freed with the model */
        return NULL;
    }
    for (int i = 0; i < m->n_act_mb; i++)
        if (m->act_mb[i].max_batch >= T)
            return &m->act_mb[i];
    return &m->act_mb[m->n_act_mb - 1];
}

void hx_model_act_free(hx_model *m)
{
    for (int k = 0; k < 2 * HX_ACT_SETS; k++) {
        hx_activations *a = k < HX_ACT_SETS ? &m->act[k] : &m->act_mb[k - HX_ACT_SETS];
        hx_buffer **all[] = {&a->x, &a->xn, &a->q, &a->k, &a->v, &a->att, &a->o, &a->g,
                             &a->u, &a->h, &a->ids, &a->pos, &a->out_rows, &a->xo, &a->meta, &a->logits,
                             &a->att_part[0], &a->att_part[1], &a->att_stats[0], &a->att_stats[1],
                             &a->q0, &a->k0, &a->router, &a->route, &a->moe_h, &a->moe_out, &a->sg, &a->su,
                             &a->sh, &a->sgate, &a->moe_h1, &a->moe_out1};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
            hx_buffer_destroy(*all[i]);
            *all[i] = NULL;
        }
    }
    m->n_act = m->n_act_mb = 0;
}
