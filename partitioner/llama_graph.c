/* One evaluation of a LLaMA-family model as a task graph: per layer, norm,
 * Q/K/V projections, RoPE, KV store, attention, output projection,
 * residual, norm, gate/up projections, SwiGLU, down projection, residual.
 * Dependencies come from the buffers: the runtime orders the tasks.  The
 * projections of one input (Q/K/V, gate/up) are one "matmul_multi" task
 * when the model fuses them (hx_model_options.fuse_matmuls): every device
 * family implements the op, so the scheduler still places it anywhere a
 * matmul could go; unfused, they are independent tasks that may run on
 * different devices at once. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/model.h"
#include "partitioner/partitioner.h"
#include "runtime/error.h"
#include "ops/op_list.h"
#include "ops/ops.h"

typedef struct {
    hx_model *m;
    const hx_batch_shape *b;
    const struct hx_plan *plan;
    hx_graph_sink sink;
    void *user;
    int layer;
    size_t seq;      /* tasks emitted so far: the index into the plan */
    hx_status status;
} graph;

/* Hands task `d` (its buffers and their modes) to the sink or the runtime. */
static void submit(graph *g, hx_task_class cls, hx_task_desc *d, hx_buffer *const *bufs, const hx_access *modes)
{
    /* An offloaded sub-batch's chain (its GEMMs wait for its attention
     * elsewhere) is the step's critical path: its tasks go first in a
     * device's queue. */
    d->priority = g->b->kv_pinned;
    memcpy(d->buffers, bufs, sizeof *bufs * (size_t)d->nbuffers);
    memcpy(d->modes, modes, sizeof *modes * (size_t)d->nbuffers);
    if (g->sink)
        g->sink(g->user, g->layer, cls, d);
    else
        g->status = hx_task_submit(g->m->rt, d, NULL);
}

/* A task on `device` (-1: wherever the policy places it); `blocks`
 * (n_blocks of them) are the KV blocks it touches. */
static void task_pinned_on_blocks(graph *g, int device, hx_task_class cls, hx_op op, const void *args, size_t size,
                                  int n, hx_buffer *const *bufs, const hx_access *modes, const uint32_t *blocks,
                                  uint32_t n_blocks)
{
    if (g->status)
        return;
    hx_task_desc d = {.codelet = hx_op_codelet(op), .nbuffers = n, .args = args,
                      .args_size = size, .device = device, .blocks = blocks, .nblocks = blocks ? n_blocks : 0};
    if (g->plan && g->seq < g->plan->n)
        d.prefer = g->plan->e[g->seq].prefer;
    g->seq++;
    submit(g, cls, &d, bufs, modes);
}

static void task_on_blocks(graph *g, hx_task_class cls, hx_op op, const void *args, size_t size, int n,
                           hx_buffer *const *bufs, const hx_access *modes, const uint32_t *blocks,
                           uint32_t n_blocks)
{
    task_pinned_on_blocks(g, -1, cls, op, args, size, n, bufs, modes, blocks, n_blocks);
}

static void task(graph *g, hx_task_class cls, hx_op op, const void *args, size_t size, int n,
                 hx_buffer *const *bufs, const hx_access *modes)
{
    task_on_blocks(g, cls, op, args, size, n, bufs, modes, NULL, 0);
}

static void rmsnorm(graph *g, hx_buffer *x, const hx_weight *w, hx_buffer *y, uint32_t T)
{
    hx_op_rmsnorm a = {T, (uint32_t)w->ne0, g->m->hp.eps};
    task(g, HX_CLASS_PREPROCESS, HX_OP_RMSNORM, &a, sizeof a, 3, (hx_buffer *[]){x, w->buf, y},
         (hx_access[]){HX_R, HX_R, HX_W});
}

static void matmul(graph *g, const hx_weight *w, const hx_weight *bias, hx_buffer *x, hx_buffer *y, uint32_t T)
{
    hx_op_matmul a = {w->type, T, (uint32_t)w->ne1, (uint32_t)w->ne0, bias && bias->buf};
    hx_buffer *b[4] = {w->buf, x, y, a.has_bias ? bias->buf : NULL};
    task(g, HX_CLASS_GEMM, HX_OP_MATMUL, &a, sizeof a, a.has_bias ? 4 : 3, b,
         (hx_access[]){HX_R, HX_R, HX_W, HX_R});
}

/* With an activation observer set (and a real run, not a plan's dry run),
 * the input of the matmul just emitted goes to it, under the weight's name. */
static void observe(graph *g, const char *tensor, hx_buffer *x, uint32_t T, uint32_t K)
{
    if (g->m->observer && !g->sink && !g->status)
        g->status = hx_observe_submit(g->m, tensor, x, T, K);
}

/* A projection with one of the layer's weights, observed as blk.<n>.<name>. */
static void layer_matmul(graph *g, hx_layer_slot slot, hx_layer_slot bias, hx_buffer *x, hx_buffer *y, uint32_t T)
{
    const hx_layer_weights *L = &g->m->layers[g->layer];
    matmul(g, &L->w[slot], bias == HX_LAYER_SLOTS ? NULL : &L->w[bias], x, y, T);
    if (g->m->observer) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.%s", g->layer, g->m->arch->layer_tensor[slot]);
        observe(g, name, x, T, (uint32_t)L->w[slot].ne0);
    }
}

/* The projections of one input x: one task when fused, else one each.
 * Fused, each output is still its own buffer, written with the same bits,
 * and the observer still sees x under every weight's name. */
static void layer_matmuls(graph *g, int n, const hx_layer_slot *slot, const hx_layer_slot *bias, hx_buffer *x,
                          hx_buffer *const *y, uint32_t T)
{
    const hx_layer_weights *L = &g->m->layers[g->layer];
    int fuse = g->m->fuse && n > 1 && n <= HX_MATMUL_MULTI_MAX;
    for (int i = 1; i < n && fuse; i++)
        fuse = L->w[slot[i]].ne0 == L->w[slot[0]].ne0;
    if (!fuse) {
        for (int i = 0; i < n; i++)
            layer_matmul(g, slot[i], bias[i], x, y[i], T);
        return;
    }
    hx_op_matmul_multi a = {.n = (uint32_t)n, .T = T, .K = (uint32_t)L->w[slot[0]].ne0};
    hx_buffer *b[HX_TASK_MAX_BUFFERS] = {x};
    hx_access modes[HX_TASK_MAX_BUFFERS] = {HX_R};
    int nb = 1 + 2 * n;
    for (int i = 0; i < n; i++) {
        const hx_weight *w = &L->w[slot[i]];
        a.wtype[i] = w->type;
        a.N[i] = (uint32_t)w->ne1;
        b[hx_matmul_multi_w(i)] = w->buf;
        b[hx_matmul_multi_y(i)] = y[i];
        modes[hx_matmul_multi_w(i)] = HX_R;
        modes[hx_matmul_multi_y(i)] = HX_W;
        if (bias[i] != HX_LAYER_SLOTS && L->w[bias[i]].buf) {
            a.has_bias |= 1u << i;
            modes[nb] = HX_R;
            b[nb++] = L->w[bias[i]].buf;
        }
    }
    task(g, HX_CLASS_GEMM, HX_OP_MATMUL_MULTI, &a, sizeof a, nb, b, modes);
    for (int i = 0; g->m->observer && i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.%s", g->layer, g->m->arch->layer_tensor[slot[i]]);
        observe(g, name, x, T, a.K);
    }
}

/* RoPE with the layer's base: a sliding-window layer of a model with two
 * kinds (Gemma 3) has its own, and no frequency scaling, as llama.cpp. */
static void rope(graph *g, hx_buffer *x, uint32_t H, uint32_t T)
{
    const hx_model *m = g->m;
    const uint32_t l = (uint32_t)g->layer;
    hx_op_rope a = {T,
                    H,
                    m->info.head_dim,
                    m->hp.n_rot,
                    hx_model_layer_rope_base(m, l),
                    hx_model_layer_rope_scale(m, l),
                    m->arch->rope == HX_ROPE_NEOX,
                    m->rope_freqs.buf != NULL};
    task(g, HX_CLASS_PREPROCESS, HX_OP_ROPE, &a, sizeof a, a.has_factors ? 3 : 2,
         (hx_buffer *[]){x, g->b->act->pos, m->rope_freqs.buf}, (hx_access[]){HX_RW, HX_R, HX_R});
}

static void scale(graph *g, hx_buffer *x, uint64_t n, float by, float cap)
{
    hx_op_scale a = {n, by, cap};
    task(g, HX_CLASS_PREPROCESS, HX_OP_SCALE, &a, sizeof a, 1, (hx_buffer *[]){x}, (hx_access[]){HX_RW});
}

static void add(graph *g, hx_buffer *x, hx_buffer *y, uint64_t n)
{
    hx_op_add a = {n};
    task(g, HX_CLASS_PREPROCESS, HX_OP_ADD, &a, sizeof a, 2, (hx_buffer *[]){x, y}, (hx_access[]){HX_RW, HX_R});
}

/* The first CPU device: where the host's blocks are attended to. */
static int host_device(graph *g)
{
    hx_runtime *rt = g->m->rt;
    for (int d = 0; d < hx_runtime_device_count(rt); d++) {
        hx_device_info info;
        if (hx_runtime_device_info(rt, d, &info) == HX_OK && info.family == HX_FAMILY_CPU)
            return d;
    }
    if (!g->status)
        g->status = hx_error(HX_ERR_NO_DEVICE, "kv_split: attention over host blocks needs a CPU device");
    return -1;
}

/* Attention in two parts (hx_model_options.kv_split): the older blocks
 * on the CPU, where they stay in host memory, the recent ones where
 * attention runs, merged there into A->att. */
static void split_attention(graph *g, uint32_t l, const hx_op_attention *at)
{
    hx_model *m = g->m;
    const hx_activations *A = g->b->act;
    const hx_access modes[] = {HX_R, HX_R, HX_R, HX_R, HX_W, HX_W};
    for (uint32_t part = 0; part < 2; part++) {
        hx_op_attention_part p = {*at, m->opts.kv_split, part};
        hx_buffer *bufs[] = {A->q, m->kv->k[l], m->kv->v[l], A->meta, A->att_part[part], A->att_stats[part]};
        task_pinned_on_blocks(g, part ? -1 : host_device(g), part ? HX_CLASS_ATTENTION : HX_CLASS_HOST_ATTENTION,
                              HX_OP_ATTENTION_PART, &p, sizeof p, 6, bufs, modes, g->b->kv_read_part[part],
                              g->b->n_kv_read_part[part]);
    }
    hx_op_attn_merge mg = {(uint64_t)at->kv.T * at->Hq, at->Dh};
    task(g, HX_CLASS_ATTENTION, HX_OP_ATTN_MERGE, &mg, sizeof mg, 5,
         (hx_buffer *[]){A->att_part[0], A->att_stats[0], A->att_part[1], A->att_stats[1], A->att},
         (hx_access[]){HX_R, HX_R, HX_R, HX_R, HX_W});
}

/* Expert groups per layer emitted in order of use (more: in index order). */
#define HX_GRAPH_MAX_GROUPS 256

/* What the router is expected to give experts [e_lo, e_lo + e_n) of
 * layer l in a batch of T tokens (model/model.h, expert_p): their share of
 * the T * k entries, and how many of them at least one token uses (expert
 * e is among a token's k with probability min(1, k p_e)).  Zeros when
 * nothing is known: the cost functions then assume every entry and
 * min(T * k, e_n) experts. */
static void expected_work(const hx_model *m, uint32_t l, uint32_t T, uint32_t e_lo, uint32_t e_n, float *share,
                          float *e_read)
{
    *share = 0, *e_read = 0;
    if (!m->expert_p)
        return;
    const float *p = m->expert_p + (size_t)l * m->hp.n_expert;
    double sh = 0, rd = 0;
    for (uint32_t e = e_lo; e < e_lo + e_n; e++) {
        double q = fmin(1.0, (double)m->hp.n_expert_used * p[e]);
        sh += p[e];
        rd += 1 - pow(1 - q, (double)T);
    }
    /* A share of exactly 0 would read as "unknown": the smallest positive. */
    *share = (float)fmax(sh, 1e-9);
    *e_read = (float)fmax(rd, 1e-9);
}

/* With an expert observer set, an expert weight's input rows go to it,
 * expert by expert (partitioner/observe.c). */
static void observe_experts(graph *g, uint32_t l, hx_layer_slot slot, hx_buffer *x, uint32_t cols, int by_token)
{
    hx_model *m = g->m;
    if (!m->expert_observer || g->sink || g->status)
        return;
    char name[64];
    snprintf(name, sizeof name, "blk.%u.%s", l, m->arch->layer_tensor[slot]);
    g->status = hx_observe_experts_submit(m, name, x, g->b->act->route, g->b->T, m->hp.n_expert_used,
                                          m->hp.n_expert, cols, by_token);
}

/* Each group position's lane: 0 for the groups on the device of the
 * layer's first group, 1 for those a plan puts elsewhere (its groups in
 * host memory beside a GPU's), so that the two devices' groups share no
 * buffer and run at once, as ktransformers runs the CPU's experts beside
 * the GPU's.  Group pos's moe_gate_up is the plan's entry 2 pos from the
 * current one (a group is a gate_up and a down).  One lane without the
 * second lane's buffers (no device has memory of its own), without a
 * plan, or with an expert observer (it reads moe_h's rows whole).
 * Returns whether lane 1 has a group. */
static int expert_lanes(const graph *g, uint32_t ng, unsigned char *lane)
{
    memset(lane, 0, ng);
    const struct hx_plan *plan = g->plan;
    if (!g->b->act->moe_h1 || !plan || g->m->expert_observer || g->seq + 2 * (size_t)ng > plan->n)
        return 0;
    int used = 0;
    for (uint32_t pos = 1; pos < ng; pos++) {
        lane[pos] = plan->e[g->seq + 2 * pos].device != plan->e[g->seq].device;
        used |= lane[pos];
    }
    return used;
}

/* The experts (ops/ops.h, "moe_route"): the router's logits, the
 * routing, each expert's gate/up then down over its gathered tokens; the
 * weighted sum lands in A->moe_out.  Qwen2-MoE's shared expert is a dense
 * FFN whose output, times sigmoid(x . gate_inp_shexp), is added to it. */
static void experts(graph *g, uint32_t l)
{
    hx_model *m = g->m;
    const hx_layer_weights *L = &m->layers[l];
    const hx_activations *A = g->b->act;
    const uint32_t T = g->b->T, D = m->info.n_embd, E = m->hp.n_expert, k = m->hp.n_expert_used;
    const uint32_t F = m->hp.n_ff_exp;
    layer_matmul(g, HX_LW_GATE_INP, HX_LAYER_SLOTS, A->xn, A->router, T);
    hx_op_moe_route r = {T, E, k, (uint32_t)m->arch->moe_norm_topk, l, m->info.n_layer};
    task(g, HX_CLASS_PREPROCESS, HX_OP_MOE_ROUTE, &r, sizeof r, 3, (hx_buffer *[]){A->router, A->route, m->expert_counts},
         (hx_access[]){HX_R, HX_W, HX_RW});
    observe_experts(g, l, HX_LW_GATE_EXPS, A->xn, D, 1);
    observe_experts(g, l, HX_LW_UP_EXPS, A->xn, D, 1);
    /* With groups (model/model.h), each group's two halves in turn, the
     * most used first by the router's expected shares (the placement
     * planner keeps the first ones on a GPU), each down adding to the sums
     * before it in its lane. */
    const uint32_t ng = L->n_groups ? L->n_groups : 1;
    uint32_t order[HX_GRAPH_MAX_GROUPS];
    float shares[HX_GRAPH_MAX_GROUPS], reads[HX_GRAPH_MAX_GROUPS];
    const uint32_t sorted = ng <= HX_GRAPH_MAX_GROUPS ? ng : 0;
    unsigned char lane[HX_GRAPH_MAX_GROUPS];
    const hx_plan_entry *first = g->plan && g->seq < g->plan->n ? &g->plan->e[g->seq] : NULL;
    const int two_lanes = sorted && expert_lanes(g, ng, lane);
    int in_lane[2] = {0, 0};
    for (uint32_t i = 0; i < sorted; i++) {
        const hx_expert_group *G = L->n_groups ? &L->groups[i] : NULL;
        expected_work(m, l, T, G ? G->e_lo : 0, G ? G->e_n : E, &shares[i], &reads[i]);
        uint32_t j = i; /* insertion, stable: equal shares keep their order */
        while (j > 0 && shares[order[j - 1]] < shares[i]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    for (uint32_t pos = 0; pos < ng; pos++) {
        const uint32_t gi = sorted ? order[pos] : pos;
        const hx_expert_group *G = L->n_groups ? &L->groups[gi] : NULL;
        float share = 0, e_read = 0;
        if (sorted)
            share = shares[gi], e_read = reads[gi];
        else
            expected_work(m, l, T, G ? G->e_lo : 0, G ? G->e_n : E, &share, &e_read);
        const int ln = two_lanes ? lane[pos] : 0, acc = in_lane[ln]++ > 0;
        hx_buffer *h = ln ? A->moe_h1 : A->moe_h, *out = ln ? A->moe_out1 : A->moe_out;
        hx_op_moe_gate_up gu = {T, D, F, E, k, L->w[HX_LW_GATE_EXPS].type, L->w[HX_LW_UP_EXPS].type,
                                m->arch->ffn_act == HX_FFN_GELU, G ? G->e_lo : 0, G ? G->e_n : 0, share, e_read};
        task(g, HX_CLASS_GEMM, HX_OP_MOE_GATE_UP, &gu, sizeof gu, 5,
             (hx_buffer *[]){A->xn, A->route, G ? G->gate : L->w[HX_LW_GATE_EXPS].buf,
                             G ? G->up : L->w[HX_LW_UP_EXPS].buf, h},
             (hx_access[]){HX_R, HX_R, HX_R, HX_R, HX_W});
        hx_op_moe_down dn = {T, D, F, E, k, L->w[HX_LW_DOWN_EXPS].type, G ? G->e_lo : 0, G ? G->e_n : 0,
                             (uint32_t)acc, share, e_read};
        task(g, HX_CLASS_GEMM, HX_OP_MOE_DOWN, &dn, sizeof dn, 4,
             (hx_buffer *[]){h, A->route, G ? G->down : L->w[HX_LW_DOWN_EXPS].buf, out},
             (hx_access[]){HX_R, HX_R, HX_R, acc ? HX_RW : HX_W});
    }
    if (two_lanes && !g->status) {
        /* The lanes' sums meet on the first lane's device.  The plan does
         * not list this task (its dry run has one lane; the planner adds
         * its cost to a split layer's), so it takes no entry of it. */
        hx_op_add a = {(uint64_t)T * D};
        hx_task_desc d = {.codelet = hx_op_codelet(HX_OP_ADD), .nbuffers = 2, .args = &a, .args_size = sizeof a,
                          .device = -1, .prefer = first ? first->prefer : 0};
        submit(g, HX_CLASS_PREPROCESS, &d, (hx_buffer *[]){A->moe_out, A->moe_out1}, (hx_access[]){HX_RW, HX_R});
    }
    observe_experts(g, l, HX_LW_DOWN_EXPS, A->moe_h, F, 0);
    if (!L->w[HX_LW_DOWN_SHEXP].buf)
        return;
    layer_matmuls(g, 2, (hx_layer_slot[]){HX_LW_GATE_SHEXP, HX_LW_UP_SHEXP},
                  (hx_layer_slot[]){HX_LAYER_SLOTS, HX_LAYER_SLOTS}, A->xn, (hx_buffer *[]){A->sg, A->su}, T);
    hx_op_swiglu sw = {(uint64_t)T * m->hp.n_ff_shexp};
    task(g, HX_CLASS_PREPROCESS, HX_OP_SWIGLU, &sw, sizeof sw, 3, (hx_buffer *[]){A->sg, A->su, A->sh},
         (hx_access[]){HX_R, HX_R, HX_W});
    layer_matmul(g, HX_LW_DOWN_SHEXP, HX_LAYER_SLOTS, A->sh, A->o, T);
    layer_matmul(g, HX_LW_GATE_INP_SHEXP, HX_LAYER_SLOTS, A->xn, A->sgate, T);
    hx_op_add_gated ag = {T, D};
    task(g, HX_CLASS_PREPROCESS, HX_OP_ADD_GATED, &ag, sizeof ag, 3, (hx_buffer *[]){A->moe_out, A->o, A->sgate},
         (hx_access[]){HX_RW, HX_R, HX_R});
}

/* The query scale: Gemma 3 27B's is 1/sqrt(n_embd / n_head) (gemma_pytorch's
 * query_pre_attn_scalar, which llama.cpp keys on the 62 layers of that
 * model), every other model's 1/sqrt(head_dim). */
static float query_scale(const hx_model *m)
{
    if (m->arch->gemma && m->info.n_layer == 62)
        return 1.0f / sqrtf((float)(m->info.n_embd / (m->stage.tp.on ? m->stage.tp.n_head_all : m->info.n_head)));
    return 1.0f / sqrtf((float)m->info.head_dim);
}

/* x += the residual branch's output r, through the branch's post-norm
 * (Gemma's) into `tmp` where the layer has one. */
static void residual(graph *g, hx_layer_slot post_norm, hx_buffer *r, hx_buffer *tmp, uint32_t T)
{
    const hx_layer_weights *L = &g->m->layers[g->layer];
    const uint64_t n = (uint64_t)T * g->m->info.n_embd;
    if (L->w[post_norm].buf) {
        rmsnorm(g, r, &L->w[post_norm], tmp, T);
        r = tmp;
    }
    add(g, g->b->act->x, r, n);
}

/* Tensor parallelism (model/tensor_slice.c): y holds this rank's partial
 * product of a projection cut by its input columns; the residual adds the
 * sum over the ranks.  The sum is taken on the host between two parts of
 * the graph, so what was submitted runs first.  A plan's dry run (a sink)
 * has nothing to sum. */
static void reduce(graph *g, hx_buffer *y, uint64_t n)
{
    hx_model *m = g->m;
    if (!m->stage.tp.on || g->sink || g->status)
        return;
    if (!m->pipe) {
        g->status = hx_error(HX_ERR_STATE, "rank %d's tensor slice evaluated outside its job", m->stage.rank);
        return;
    }
    hx_status s = hx_runtime_wait_all(m->rt);
    float *p = NULL;
    if (s == HX_OK)
        s = hx_buffer_acquire(y, HX_RW, (void **)&p);
    if (s == HX_OK)
        s = m->pipe->ops->allreduce(m->pipe->ctx, p, n);
    g->status = s;
}

static void layer(graph *g, uint32_t l)
{
    hx_model *m = g->m;
    g->layer = (int)l;
    const hx_layer_weights *L = &m->layers[l];
    const hx_activations *A = g->b->act;
    const hx_model_info *in = &m->info;
    const uint32_t T = g->b->T;
    const hx_kv_layout kv = {T, g->b->S, g->b->max_blocks, m->kv->block_size};
    /* Qwen3's and Gemma 3's head norms read the projections from q0/k0. */
    const int head_norms = L->w[HX_LW_Q_NORM].buf != NULL;

    rmsnorm(g, A->x, &L->w[HX_LW_ATTN_NORM], A->xn, T);
    layer_matmuls(g, 3, (hx_layer_slot[]){HX_LW_Q, HX_LW_K, HX_LW_V},
                  (hx_layer_slot[]){HX_LW_Q_BIAS, HX_LW_K_BIAS, HX_LW_V_BIAS}, A->xn,
                  (hx_buffer *[]){head_norms ? A->q0 : A->q, head_norms ? A->k0 : A->k, A->v}, T);
    if (head_norms) {
        rmsnorm(g, A->q0, &L->w[HX_LW_Q_NORM], A->q, T * in->n_head);
        rmsnorm(g, A->k0, &L->w[HX_LW_K_NORM], A->k, T * in->n_head_kv);
    }
    rope(g, A->q, in->n_head, T);
    rope(g, A->k, in->n_head_kv, T);

    hx_op_kv_store ks = {kv,        in->n_head_kv, in->head_dim, m->kv_type, m->v_type, m->kv_rot_k,
                         m->kv_rot_v, L->k_center != NULL};
    /* An offloaded sub-batch (hx_batch_shape.kv_pinned): its cache and the
     * attention over it stay on the device whose memory holds them. */
    const int kv_dev = g->b->kv_pinned ? g->b->kv_device : -1;
    task_pinned_on_blocks(g, kv_dev, HX_CLASS_ATTENTION, HX_OP_KV_STORE, &ks, sizeof ks, 5 + (int)ks.center_k,
                   (hx_buffer *[]){A->k, A->v, m->kv->k[l], m->kv->v[l], A->meta, L->k_center},
                   (hx_access[]){HX_R, HX_R, HX_RW, HX_RW, HX_R, HX_R}, g->b->kv_written, g->b->n_kv_written);
    const uint32_t window = m->hp.n_swa ? m->hp.n_swa : hx_model_layer_swa(m, l) ? m->hp.layer_window : 0;
    hx_op_attention at = {kv,      in->n_head, in->n_head_kv, in->head_dim, m->kv_type, query_scale(m), window,
                          m->v_type, m->kv_rot_k, m->kv_rot_v};
    if (m->opts.kv_split && kv_dev >= 0 && !g->status)
        g->status = hx_error(HX_ERR_UNSUPPORTED, "kv_split with an offloaded sub-batch's KV cache");
    if (m->opts.kv_split)
        split_attention(g, l, &at);
    else
        task_pinned_on_blocks(g, kv_dev, HX_CLASS_ATTENTION, HX_OP_ATTENTION, &at, sizeof at, 5,
                       (hx_buffer *[]){A->q, m->kv->k[l], m->kv->v[l], A->meta, A->att},
                       (hx_access[]){HX_R, HX_R, HX_R, HX_R, HX_W}, g->b->kv_read, g->b->n_kv_read);

    layer_matmul(g, HX_LW_O, HX_LAYER_SLOTS, A->att, A->o, T);
    reduce(g, A->o, (uint64_t)T * in->n_embd);
    residual(g, HX_LW_ATTN_POST_NORM, A->o, A->xn, T);

    rmsnorm(g, A->x, &L->w[HX_LW_FFN_NORM], A->xn, T);
    if (m->hp.n_expert) {
        experts(g, l);
        residual(g, HX_LW_FFN_POST_NORM, A->moe_out, A->o, T);
        return;
    }
    layer_matmuls(g, 2, (hx_layer_slot[]){HX_LW_GATE, HX_LW_UP}, (hx_layer_slot[]){HX_LAYER_SLOTS, HX_LAYER_SLOTS},
                  A->xn, (hx_buffer *[]){A->g, A->u}, T);
    hx_op_swiglu sw = {(uint64_t)T * in->n_ff};
    task(g, HX_CLASS_PREPROCESS, m->arch->ffn_act == HX_FFN_GELU ? HX_OP_GEGLU : HX_OP_SWIGLU, &sw, sizeof sw, 3,
         (hx_buffer *[]){A->g, A->u, A->h}, (hx_access[]){HX_R, HX_R, HX_W});
    layer_matmul(g, HX_LW_DOWN, HX_LAYER_SLOTS, A->h, A->o, T);
    reduce(g, A->o, (uint64_t)T * in->n_embd);
    residual(g, HX_LW_FFN_POST_NORM, A->o, A->xn, T);
}

/* The plan's entries are the whole graph's: a stage that starts further
 * on takes its preferences from the first entry of its first part. */
static void seek_plan(graph *g, int layer)
{
    if (!g->plan)
        return;
    size_t i = 0;
    while (i < g->plan->n && g->plan->e[i].layer < layer)
        i++;
    g->seq = i;
}

hx_status hx_llama_emit_stage(hx_model *m, const hx_batch_shape *b, const struct hx_plan *plan, hx_graph_sink sink,
                              void *user, uint32_t l0, uint32_t l1, unsigned parts)
{
    graph g = {.m = m, .b = b, .plan = plan, .sink = sink, .user = user, .layer = -1};
    const hx_activations *A = b->act;
    const uint32_t T = b->T, D = m->info.n_embd;

    if (parts & HX_STAGE_EMBED) {
        hx_op_get_rows emb = {m->tok_embd.type, T, D};
        task(&g, HX_CLASS_PREPROCESS, HX_OP_GET_ROWS, &emb, sizeof emb, 3,
             (hx_buffer *[]){m->tok_embd.buf, A->ids, A->x}, (hx_access[]){HX_R, HX_R, HX_W});
        if (m->arch->gemma) /* Gemma's embeddings are scaled by sqrt(n_embd) */
            scale(&g, A->x, (uint64_t)T * D, sqrtf((float)D), 0.0f);
    }
    seek_plan(&g, (int)l0);
    for (uint32_t l = l0; l < l1; l++)
        layer(&g, l);
    g.layer = (int)m->info.n_layer;
    seek_plan(&g, g.layer);
    if (parts & HX_STAGE_PICK) {
        /* The last rank of a pipeline hands rank 0 only the rows whose
         * logits are wanted; the norm is per row, so rank 0 normalizing
         * them gives the bits of normalizing all and picking. */
        hx_op_get_rows pick = {HX_TYPE_F32, b->n_out, D};
        task(&g, HX_CLASS_PREPROCESS, HX_OP_GET_ROWS, &pick, sizeof pick, 3,
             (hx_buffer *[]){A->x, A->out_rows, A->xo}, (hx_access[]){HX_R, HX_R, HX_W});
    }
    if (parts & HX_STAGE_HEAD) {
        hx_buffer *in = A->xo;
        if (parts & HX_STAGE_PICKED) {
            rmsnorm(&g, A->xo, &m->out_norm, A->xn, b->n_out);
            in = A->xn;
        } else {
            /* Only the rows whose logits are wanted go through the output
             * matrix: for a 512-token prompt that is one row instead of 512;
             * the rows an embeddings request wants follow them (n_pick). */
            rmsnorm(&g, A->x, &m->out_norm, A->xn, T);
            hx_op_get_rows pick = {HX_TYPE_F32, b->n_pick ? b->n_pick : b->n_out, D};
            task(&g, HX_CLASS_PREPROCESS, HX_OP_GET_ROWS, &pick, sizeof pick, 3,
                 (hx_buffer *[]){A->xn, A->out_rows, A->xo}, (hx_access[]){HX_R, HX_R, HX_W});
        }
        matmul(&g, &m->output, NULL, in, A->logits, b->n_out);
        if (m->hp.logit_softcap > 0.0f)
            scale(&g, A->logits, (uint64_t)b->n_out * m->output.ne1, 1.0f, m->hp.logit_softcap);
        /* Tied embeddings multiply by token_embd.weight, as in llama.cpp. */
        observe(&g, m->output.buf == m->tok_embd.buf ? m->arch->token_embd : m->arch->output, in, b->n_out, D);
    }
    return g.status;
}

hx_status hx_llama_emit(hx_model *m, const hx_batch_shape *b, const struct hx_plan *plan, hx_graph_sink sink,
                        void *user)
{
    return hx_llama_emit_stage(m, b, plan, sink, user, 0, m->info.n_layer, HX_STAGE_EMBED | HX_STAGE_HEAD);
}
