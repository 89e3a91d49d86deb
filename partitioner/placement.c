/* The placement planner: under a policy that places a step ahead (`plan`,
 * `ngl`; runtime/sched_plan.c), the device of every task of a step's graph,
 * chosen once per batch shape and followed by the policy.
 *
 * plan: a dynamic program over layers.  A layer runs on one "home"
 * device; moving from one layer to the next across memory nodes costs the
 * residual stream's trip (through host memory), the logits' trip back to
 * the host is counted after the output layer, and a device with its own
 * memory holds at most the layers whose weights and KV cache fit in it.
 * The state is (layer, home device, layers already on each memory-limited
 * device), so the program finds the cheapest assignment of every layer,
 * contiguous or not, under the memory limits: every single-device
 * placement that fits and llama.cpp's -ngl split are among the
 * assignments it weighs, so by its own model it is never worse than them.
 * Why not HEFT: in a transformer step the layers form a chain, so a task's
 * finish time is the sum of what came before it; list scheduling's
 * earliest-finish choice is greedy per task and does not see that an
 * output it leaves on another device must cross back (the fault dmda
 * shows in docs/simulator.md), while the chain makes the exact optimum
 * over layers cheap (layers x devices x memory states).
 *
 * Inside a layer a task may still go elsewhere where it pays: a task the
 * home device cannot run goes to the capable device where it finishes
 * soonest counting its inputs' trip there and its outputs' trip back, and
 * a task (or the KV store and attention as one group: the KV cache stays
 * with them) moves to a device working in host memory when its time there
 * plus that round trip beats its time at home.  Those costs are part of
 * the layer's cost on that home device, so the program weighs them too.
 *
 * Costs: the performance models (runtime's hx_sched_estimate: a simulated
 * device's own times, a real device's measured models) times each
 * device's recent slowness (actual / expected, kept by the scheduler's
 * front), and the bus model.  A plan is kept per shape (tokens, sequences,
 * context rounded up to a power of two) and reused for every step of that
 * shape; it is made again when a device's slowness moves by more than a
 * quarter from what the plan assumed (an injected slowdown, contention) or
 * a device leaves service; a device that has run nothing for a while is
 * assumed at its models' speed again, so a left device is tried again.  On a real machine a device without
 * measurements for the step's tasks cannot be costed: until every device
 * has them the plan is provisional (layers dealt round-robin over the
 * devices, so each gets measured) and made again at the next step.
 *
 * ngl: llama.cpp's -ngl: the most layers whose weights and KV cache fit in
 * the first GPU's memory run there (the last ones, as llama.cpp offloads
 * them; the output layer too when every layer fits), the rest on the CPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/moe_routing.h"
#include "ops/ops.h"
#include "partitioner/partitioner.h"
#include "partitioner/placement.h"
#include "runtime/buffer.h"
#include "runtime/error.h"
#include "runtime/runtime.h"

/* Plans kept per model (shapes a serving engine alternates between). */
#define HX_PLACE_SLOTS 8
/* Slowness outside [1/x, x] of what a plan assumed makes it again. */
#define HX_REPLAN_FACTOR 1.25
/* A device that has run nothing for this many seconds is assumed to run
 * at its models' speed again: a plan that left it for a slowdown (its
 * own, or contention from outside) tries it again, measures it, and
 * leaves it again if it is still slow.  Without this a device abandoned
 * for a passing slowdown kept its last slowness for good. */
#define HX_SLOWNESS_MAX_AGE 2.0
#define INF 1e300
/* Layers + the parts before and after them. */
#define HX_PLACE_MAX_PARTS 1024
/* Expert groups per layer the program weighs apart (more: the layer's
 * experts move together). */
#define HX_PLACE_MAX_GROUPS 64
/* When one decode plan has been used this many steps (placement calls) in
 * a row, the others are dropped and the weights only they kept on a
 * device freed there: the shapes of a prompt's chunks, once decoding
 * runs, or a context size outgrown.  Shapes that alternate (a server's decode steps
 * and prefill chunks) keep their plans. */
#define HX_PLACE_IDLE 16
/* Weight buffers a plan records per task (more: the plan's holdings are
 * not known, and nothing it placed is ever freed). */
#define HX_PLACE_KEEP_PER_TASK 6

/* A weight buffer a plan puts in a device's own memory. */
typedef struct {
    hx_buffer *b;
    int dev;
} kept;

typedef struct {
    uint32_t T, S, ctx; /* ctx: longest block table rounded up to a power of two */
    int used;
    uint64_t stamp;       /* last use, for replacement */
    int provisional;      /* some device could not be costed */
    uint32_t retired;     /* devices out of service when it was made */
    double slowness[HX_MAX_DEVICES];
    double predicted;     /* seconds per step, by the planner's model */
    int refit;            /* memory was freed since it was made: made again at its next use */
    struct hx_plan *plan; /* inside the same allocation */
    /* Per part: the device with memory of its own its plan puts the
     * part's weights in (bit), and their bytes there. */
    uint32_t hold[HX_PLACE_MAX_PARTS];
    double hold_w[HX_PLACE_MAX_PARTS];
    /* Those weights' buffers (inside the same allocation, room for
     * cap_keep); overflow: some were not recorded. */
    kept *keep;
    size_t n_keep, cap_keep;
    int overflow;
} slot;

struct hx_placements {
    size_t n;             /* tasks per graph */
    uint64_t clock, generation, replans, calibrations;
    /* Per part of the graph (before the layers, each layer, after them):
     * the devices with memory of their own that hold its weights for the
     * plans in use (other than the one being made), and its KV cache.  A
     * plan's weights stay on a device while some plan in use puts them
     * there; when none does (a plan made again elsewhere, a plan dropped
     * for idleness) they are freed there.  A KV cache, written there, is
     * not freed: it stays counted by every later plan. */
    uint32_t resident[HX_PLACE_MAX_PARTS];
    uint32_t resident_kv[HX_PLACE_MAX_PARTS]; /* and its KV cache */
    double resident_w[HX_PLACE_MAX_PARTS];    /* bytes of its weights held there (the most of those plans) */
    uint64_t evicted_bytes;                   /* weights freed on devices so far */
    int monotonic; /* a plan's weights could not all be recorded: nothing is freed, holdings only grow */
    const slot *last; /* the plan used last, and how many steps in a row */
    uint64_t run;
    slot s[HX_PLACE_SLOTS];
};

/* What the planner keeps per task of the dry run. */
typedef struct {
    int layer;
    hx_task_class cls;
    const hx_codelet *codelet;
    hx_precision prec;
    double flops, bytes;
    uint32_t capable;
    double in_bytes, out_bytes; /* activations read and written (not weights, not KV) */
    double weight_bytes;        /* read-only inputs (weights) */
    double kv_bytes;            /* the layer's KV cache, for tasks that touch it */
    int kv;                     /* touches the KV cache */
    int group;                  /* an expert task: its group of the layer's experts (most used first); else -1 */
    uint32_t e_lo, e_n;         /* an expert task's experts */
    hx_buffer *w[HX_PLACE_KEEP_PER_TASK]; /* its weight buffers */
    int nw;                     /* how many; > HX_PLACE_KEEP_PER_TASK: not all recorded */
} ptask;

typedef struct {
    hx_model *m;
    ptask *t;
    size_t n, cap;
    hx_status status;
    int group_layer, group; /* the expert group being collected */
} dry;

static hx_precision precision_of(const hx_task_desc *d, const size_t *sizes)
{
    return d->codelet->precision ? d->codelet->precision(d->args, sizes) : HX_PREC_F32;
}

static void collect(void *user, int layer, hx_task_class cls, const hx_task_desc *d)
{
    dry *g = user;
    if (g->status)
        return;
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 256;
        ptask *p = realloc(g->t, cap * sizeof *p);
        if (!p) {
            g->status = hx_error(HX_ERR_NO_MEMORY, "placement planner");
            return;
        }
        g->t = p;
        g->cap = cap;
    }
    ptask *t = &g->t[g->n++];
    memset(t, 0, sizeof *t);
    t->layer = layer;
    t->cls = cls;
    t->codelet = d->codelet;
    size_t sizes[HX_TASK_MAX_BUFFERS] = {0};
    for (int i = 0; i < d->nbuffers; i++)
        sizes[i] = hx_buffer_size(d->buffers[i]);
    t->flops = d->codelet->flops ? d->codelet->flops(d->args, sizes) : 0;
    t->bytes = d->codelet->bytes ? d->codelet->bytes(d->args, sizes) : 0;
    t->prec = precision_of(d, sizes);
    t->capable = hx_sched_capable(g->m->rt, d);
    /* An expert group is a moe_gate_up and the moe_down after it. */
    t->group = -1;
    if (d->codelet == hx_op_codelet(HX_OP_MOE_GATE_UP)) {
        g->group = g->group_layer == layer ? g->group + 1 : 0;
        g->group_layer = layer;
        t->group = g->group;
        const hx_op_moe_gate_up *a = d->args;
        t->e_lo = a->e_lo, t->e_n = a->e_n ? a->e_n : a->E;
    } else if (d->codelet == hx_op_codelet(HX_OP_MOE_DOWN) && g->group_layer == layer) {
        t->group = g->group;
        const hx_op_moe_down *a = d->args;
        t->e_lo = a->e_lo, t->e_n = a->e_n ? a->e_n : a->E;
    }
    const hx_kv_pool *kv = g->m->kv;
    int L = (int)g->m->info.n_layer;
    for (int i = 0; i < d->nbuffers; i++) {
        hx_buffer *b = d->buffers[i];
        int is_kv = layer >= 0 && layer < L && kv && (b == kv->k[layer] || b == kv->v[layer]);
        if (is_kv) {
            t->kv = 1;
            t->kv_bytes += (double)sizes[i];
        } else if (b->read_only) {
            t->weight_bytes += (double)sizes[i];
            if (t->nw < HX_PLACE_KEEP_PER_TASK)
                t->w[t->nw] = b;
            t->nw++;
        } else {
            if (d->modes[i] & HX_R)
                t->in_bytes += (double)sizes[i];
            if (d->modes[i] & HX_W)
                t->out_bytes += (double)sizes[i];
        }
    }
}

/* The devices the planner may use, and what it knows of them. */
typedef struct {
    hx_runtime *rt;
    int nd;
    uint32_t live;                 /* in service */
    int own[HX_MAX_DEVICES];       /* has its own memory (a memory node of its own) */
    double cap[HX_MAX_DEVICES];    /* bytes the planner may fill there */
    double slow[HX_MAX_DEVICES];
    int unknown;                   /* a cost could not be estimated */
    int lanes;                     /* a layer's groups in host memory run beside its others (llama_graph.c) */
} machine;

static double link_s(machine *mc, int d, double bytes) { return mc->own[d] ? hx_sched_link_seconds(mc->rt, d, bytes) : 0; }

/* Seconds to move `bytes` produced on device a to device b. */
static double move_s(machine *mc, int a, int b, double bytes)
{
    if (a == b || (!mc->own[a] && !mc->own[b]))
        return 0;
    return link_s(mc, a, bytes) + link_s(mc, b, bytes);
}

static double cost(machine *mc, const ptask *t, int d)
{
    if (!((t->capable & mc->live) >> d & 1))
        return INF;
    double sec;
    if (!hx_sched_estimate(mc->rt, d, t->codelet, t->prec, t->flops, t->bytes, &sec)) {
        mc->unknown = 1;
        return INF;
    }
    return sec * mc->slow[d];
}

/* Tasks [a, b) of one layer (or the pre / post part) with home device e:
 * their time, the device of each (dev[i - a]), and the bytes that must
 * live in e's own memory.  Returns INF when a task can run nowhere. */
static double span_cost(machine *mc, const ptask *t, size_t a, size_t b, int e, int kv_host, int cold, int *dev,
                        double *mem, double *kvmem)
{
    double total = 0, m = 0;
    /* Expert groups from n_hot on go to host memory (cold > 0: the least
     * used `cold` groups) when home has memory of its own. */
    int groups = 0;
    for (size_t i = a; i < b; i++)
        groups = t[i].group + 1 > groups ? t[i].group + 1 : groups;
    if (cold > groups)
        return INF; /* the same as all of them: weighed once */
    const int n_hot = mc->own[e] ? groups - cold : groups;
    int forced_in = 0;
    /* The groups in host memory (their inputs' trip there, their times,
     * the sum's trip back) and the other groups: two chains that run at
     * once when the graph gives them lanes of their own, else in turn. */
    double forced_out = 0, host_chain = 0, home_groups = 0, sum_n = 0;
    /* The KV store and attention move as one group (the cache stays with
     * them): their home cost against their best host-memory alternative. */
    double kv_home = 0, kv_in = 0, kv_out = 0;
    int kv_ok = 1;
    for (size_t i = a; i < b; i++)
        if (t[i].kv) {
            double c = cost(mc, &t[i], e);
            kv_ok &= c < INF;
            kv_home += c;
            kv_in += t[i].in_bytes;
            kv_out += t[i].out_bytes;
        }
    int kv_dev = e;
    double kv_best = kv_ok && !(kv_host && mc->own[e]) ? kv_home : INF;
    for (int f = 0; f < mc->nd; f++) {
        if (f == e || mc->own[f] || !(mc->live >> f & 1))
            continue;
        double c = move_s(mc, e, f, kv_in) + move_s(mc, f, e, kv_out);
        for (size_t i = a; i < b && c < INF; i++)
            if (t[i].kv)
                c += cost(mc, &t[i], f);
        if (c < kv_best) {
            kv_best = c;
            kv_dev = f;
        }
    }
    for (size_t i = a; i < b; i++) {
        if (t[i].kv) {
            dev[i - a] = kv_dev;
            continue;
        }
        const int forced = t[i].group >= n_hot;
        if (forced) {
            /* The groups in host memory run there one after the other:
             * their inputs (the normed rows, the route) cross once, the
             * sum crosses back once (charged below). */
            int f = -1;
            double fc = INF;
            for (int h = 0; h < mc->nd; h++)
                if (!mc->own[h] && (mc->live >> h & 1) && cost(mc, &t[i], h) < fc)
                    fc = cost(mc, &t[i], h), f = h;
            if (f < 0)
                return INF;
            dev[i - a] = f;
            host_chain += fc;
            if (!forced_in) {
                forced_in = 1;
                host_chain += move_s(mc, e, f, t[i].in_bytes);
            }
            forced_out = move_s(mc, f, e, t[i].out_bytes);
            sum_n = t[i].out_bytes / sizeof(float);
            continue;
        }
        double home = cost(mc, &t[i], e);
        int best = e;
        double bc = home;
        for (int f = 0; f < mc->nd; f++) {
            if (f == e || !(mc->live >> f & 1) || (forced && mc->own[f]))
                continue;
            /* Elsewhere only into host memory (no weights of its own to
             * fit, so no memory to count), or, when home cannot run it at
             * all, wherever it can. */
            if (mc->own[f] && home < INF)
                continue;
            double c = cost(mc, &t[i], f);
            if (c >= INF)
                continue;
            c += move_s(mc, e, f, t[i].in_bytes) + move_s(mc, f, e, t[i].out_bytes);
            if (c < bc) {
                bc = c;
                best = f;
            }
        }
        dev[i - a] = best;
        if (t[i].group >= 0)
            home_groups += bc;
        else
            total += bc;
        if (best == e)
            m += t[i].weight_bytes;
    }
    host_chain += forced_out;
    total += mc->lanes ? fmax(home_groups, host_chain) : home_groups + host_chain;
    if (mc->lanes && forced_in) {
        /* The add that joins the lanes' sums at home (not in the dry run). */
        double sec;
        if (hx_sched_estimate(mc->rt, e, hx_op_codelet(HX_OP_ADD), HX_PREC_F32, sum_n, 12 * sum_n, &sec))
            total += sec * mc->slow[e];
    }
    if (kv_best >= INF && a < b) {
        int any_kv = 0;
        for (size_t i = a; i < b; i++)
            any_kv |= t[i].kv;
        if (any_kv)
            return INF;
    }
    /* The layer's K and V buffers, which each of its KV tasks names. */
    double kv_mem = 0;
    for (size_t i = a; i < b; i++)
        if (t[i].kv && kv_dev == e)
            kv_mem = fmax(kv_mem, t[i].kv_bytes);
    m += kv_mem;
    total += kv_best < INF ? kv_best : 0;
    for (size_t i = a; i < b; i++)
        if (dev[i - a] == e && !t[i].kv && (!(t[i].capable >> e & 1) || t[i].group >= n_hot))
            return INF;
    *mem = m;
    *kvmem = kv_mem;
    return total;
}

/* The graph cut into parts: [0] before the layers, 1..L the layers, L+1
 * after them (tasks come in layer order). */
typedef struct {
    int np;
    size_t *begin; /* np + 1 bounds */
} parts;

static hx_status cut(const ptask *t, size_t n, int L, parts *p)
{
    p->np = L + 2;
    p->begin = calloc((size_t)p->np + 1, sizeof *p->begin);
    if (!p->begin)
        return hx_error(HX_ERR_NO_MEMORY, "placement planner");
    size_t i = 0;
    for (int k = 0; k < p->np; k++) {
        p->begin[k] = i;
        int layer = k - 1;
        while (i < n && (t[i].layer == layer || (k == 0 && t[i].layer < 0) || (k == p->np - 1 && t[i].layer >= L)))
            i++;
    }
    p->begin[p->np] = n;
    if (i != n)
        return hx_error(HX_ERR_STATE, "placement planner: the graph's tasks are not in layer order");
    return HX_OK;
}

/* Per part k, home e and variant v: v & 1 0: the KV cache where it runs
 * fastest, 1: in host memory, attended there; v >> 1: how many of the
 * layer's expert groups (the least used) are in host memory, computed by
 * the device working there (llama.cpp's --n-cpu-moe, per group); index
 * (k * nd + e) * nv + v. */
typedef struct {
    int nv;       /* variants: 2 x (most expert groups in a layer + 1) */
    double *c;    /* its time */
    double *mem;  /* bytes it puts in e's own memory */
    double *kvm;  /* of which its KV cache */
    int *dev;     /* each task's device: [nd * nv][n tasks] */
} part_costs;

#define PV(k, e, v) (((size_t)(k) * (size_t)nd + (size_t)(e)) * (size_t)pc->nv + (size_t)(v))
/* The memory of the device the program tracks, in this many units. */
#define HX_PLACE_UNITS 1024

typedef struct {
    double best;
    int *home; /* [np] */
    int *var;  /* [np] */
} answer;

/* The device with memory of its own whose capacity the program tracks:
 * the one that runs the layers fastest; other such devices (an FPGA
 * beside a GPU) take no layer as home, only tasks moved to them.  -1 when
 * every device works in host memory. */
static int tracked_device(const machine *mc, const parts *p, const part_costs *pc)
{
    const int nd = mc->nd;
    int t = -1;
    double best = INF;
    for (int d = 0; d < nd; d++) {
        if (!mc->own[d] || !(mc->live >> d & 1))
            continue;
        double c = 0;
        for (int k = 1; k < p->np - 1; k++) {
            double m = INF;
            for (int v = 0; v < pc->nv; v++)
                m = fmin(m, pc->c[PV(k, d, v)]);
            c += m;
        }
        if (t < 0 || c < best) {
            t = d;
            best = c;
        }
    }
    return t;
}

/* The dynamic program for fixed homes a and z of the parts before and
 * after the layers: state (home of the layer, memory units used on the
 * tracked device). */
/* Bytes part k with home `lim` in variant v adds to what `lim` already
 * holds for it. */
/* Its weights: the most used expert groups come first in every variant,
 * so what a device holds of a part is a prefix of its groups, counted in
 * bytes (resident_w). */
static double new_bytes(const struct hx_placements *pl, const part_costs *pc, int nd, int k, int lim, int v)
{
    double kv = pc->kvm[PV(k, lim, v)], w = pc->mem[PV(k, lim, v)] - kv;
    double held = (pl->resident[k] >> lim & 1) ? pl->resident_w[k] : 0;
    return fmax(0, w - held) + ((pl->resident_kv[k] >> lim & 1) ? 0 : kv);
}

static double held_bytes(const struct hx_placements *pl, const part_costs *pc, int nd, int np, int lim)
{
    double b = 0;
    for (int k = 0; k < np; k++)
        b += ((pl->resident[k] >> lim & 1) ? pl->resident_w[k] : 0) +
             ((pl->resident_kv[k] >> lim & 1) ? pc->kvm[PV(k, lim, 0)] : 0);
    return b;
}

static void program(machine *mc, const struct hx_placements *pl, const parts *p, const part_costs *pc,
                    double x_bytes, double logit_bytes, int a, int z, answer *out, int *home_tmp, int *var_tmp)
{
    const int nd = mc->nd, L = p->np - 2, lim = tracked_device(mc, p, pc);
    const double unit = lim >= 0 ? mc->cap[lim] / HX_PLACE_UNITS : 1;
    double used0 = lim < 0 ? 0
                           : held_bytes(pl, pc, nd, p->np, lim) + (a == lim ? new_bytes(pl, pc, nd, 0, lim, 0) : 0) +
                                 (z == lim ? new_bytes(pl, pc, nd, L + 1, lim, 0) : 0);
    const int S = lim >= 0 ? HX_PLACE_UNITS + 1 : 1;
    int start = lim >= 0 ? (int)ceil(used0 / unit) : 0;
    if (start >= S)
        return; /* the parts before and after the layers alone do not fit */
    const size_t states = (size_t)nd * (size_t)S;
    double *cur = malloc(states * sizeof *cur), *next = malloc(states * sizeof *next);
    /* For backtracking: the previous home and this layer's variant. */
    unsigned char *from = malloc((size_t)(L + 1) * states), *var = malloc((size_t)(L + 1) * states);
    if (!cur || !next || !from || !var) {
        free(cur), free(next), free(from), free(var);
        return;
    }
    for (size_t i = 0; i < states; i++)
        cur[i] = INF;
    /* Before layer 1: home a, `start` units used; "layer 0" is the part before. */
    cur[(size_t)a * (size_t)S + (size_t)start] = pc->c[PV(0, a, 0)];
    for (int l = 1; l <= L; l++) {
        unsigned char *fr = from + (size_t)l * states, *vr = var + (size_t)l * states;
        for (size_t i = 0; i < states; i++)
            next[i] = INF;
        for (int d = 0; d < nd; d++)
            for (int u = 0; u < S; u++) {
                double w0 = cur[(size_t)d * (size_t)S + (size_t)u];
                if (w0 >= INF)
                    continue;
                for (int e = 0; e < nd; e++) {
                    if (mc->own[e] && e != lim)
                        continue;
                    double mv = move_s(mc, d, e, x_bytes);
                    for (int v = 0; v < pc->nv; v++) {
                        double c = pc->c[PV(l, e, v)];
                        if (c >= INF)
                            continue;
                        int nu = u + (e == lim ? (int)ceil(new_bytes(pl, pc, nd, l, lim, v) / unit) : 0);
                        if (nu >= S)
                            continue;
                        double w = w0 + mv + c;
                        size_t j = (size_t)e * (size_t)S + (size_t)nu;
                        if (w < next[j]) {
                            next[j] = w;
                            fr[j] = (unsigned char)d;
                            vr[j] = (unsigned char)v;
                        }
                    }
                }
            }
        double *sw = cur;
        cur = next;
        next = sw;
    }
    double post = pc->c[PV(L + 1, z, 0)];
    size_t best_i = 0;
    double best = INF;
    for (size_t i = 0; i < states && post < INF; i++) {
        if (cur[i] >= INF)
            continue;
        int e = (int)(i / (size_t)S);
        double w = cur[i] + move_s(mc, e, z, x_bytes) + post + link_s(mc, z, logit_bytes);
        if (w < best) {
            best = w;
            best_i = i;
        }
    }
    if (best < out->best) {
        size_t i = best_i;
        for (int l = L; l >= 1; l--) {
            int e = (int)(i / (size_t)S), u = (int)(i % (size_t)S);
            home_tmp[l] = e;
            var_tmp[l] = var[(size_t)l * states + i];
            int d = from[(size_t)l * states + i];
            u -= e == lim ? (int)ceil(new_bytes(pl, pc, nd, l, lim, var_tmp[l]) / unit) : 0;
            i = (size_t)d * (size_t)S + (size_t)u;
        }
        home_tmp[0] = a, var_tmp[0] = 0;
        home_tmp[L + 1] = z, var_tmp[L + 1] = 0;
        out->best = best;
        memcpy(out->home, home_tmp, sizeof *home_tmp * (size_t)p->np);
        memcpy(out->var, var_tmp, sizeof *var_tmp * (size_t)p->np);
    }
    free(cur), free(next), free(from), free(var);
}

/* The predicted seconds of a given assignment of homes (ngl's). */
static double evaluate(machine *mc, const parts *p, const part_costs *pc, double x_bytes, double logit_bytes,
                       const int *home)
{
    const int nd = mc->nd;
    double s = 0;
    for (int k = 0; k < p->np; k++) {
        double c = pc->c[PV(k, home[k], 0)];
        if (c >= INF)
            return INF;
        s += c + (k ? move_s(mc, home[k - 1], home[k], x_bytes) : 0);
    }
    return s + link_s(mc, home[p->np - 1], logit_bytes);
}

static int first_gpu(const machine *mc)
{
    for (int d = 0; d < mc->nd; d++) {
        hx_device_info info;
        if ((mc->live >> d & 1) && hx_runtime_device_info(mc->rt, d, &info) == HX_OK &&
            (info.family == HX_FAMILY_CUDA || info.kind == HX_KIND_GPU))
            return d;
    }
    return -1;
}

static int first_cpu(const machine *mc)
{
    for (int d = 0; d < mc->nd; d++) {
        hx_device_info info;
        if ((mc->live >> d & 1) && hx_runtime_device_info(mc->rt, d, &info) == HX_OK && info.family == HX_FAMILY_CPU)
            return d;
    }
    for (int d = 0; d < mc->nd; d++)
        if (mc->live >> d & 1)
            return d;
    return 0;
}

/* llama.cpp's -ngl: the last layers that fit on the GPU. */
static void ngl_homes(machine *mc, const parts *p, const part_costs *pc, int *home)
{
    const int nd = mc->nd, L = p->np - 2;
    int cpu = first_cpu(mc), gpu = first_gpu(mc);
    for (int k = 0; k < p->np; k++)
        home[k] = cpu;
    if (gpu < 0)
        return;
    double per = 0;
    for (int l = 1; l <= L; l++)
        per = fmax(per, pc->mem[PV(l, gpu, 0)]);
    double room = mc->own[gpu] ? mc->cap[gpu] : INF;
    int n = per > 0 ? (int)fmin((double)L, floor(room / per)) : L;
    if (n == L && room - per * L >= pc->mem[PV(L + 1, gpu, 0)])
        home[L + 1] = gpu; /* -ngl above n_layer offloads the output too */
    for (int l = L - n + 1; l <= L; l++)
        home[l] = gpu;
}

/* Round-robin homes while some device has no measurements, shifted by
 * one at each such plan so that every part (the embedding's and the
 * output's too) runs on every device within a few steps. */
static void calibration_homes(machine *mc, const parts *p, uint64_t round, int *home)
{
    int devs[HX_MAX_DEVICES], n = 0;
    for (int d = 0; d < mc->nd; d++)
        if (mc->live >> d & 1)
            devs[n++] = d;
    for (int k = 0; k < p->np; k++)
        home[k] = devs[(uint64_t)(k + 1 + round) % (uint64_t)(n ? n : 1)];
}

/* HX_PLAN_PRINT=1: each plan as a table on stderr, one row per layer: its
 * device, where its KV cache is, and where its expert groups are (the
 * most used first). */
static void print_plan(hx_model *m, const struct hx_placements *pl, const parts *p, const part_costs *pc,
                       const ptask *t, size_t n, const hx_batch_shape *b, const slot *sl, const int *home,
                       const int *var)
{
    fprintf(stderr, "plan for %u tokens, %u sequences, context up to %u KV blocks: %.3f ms per step predicted%s%s\n", b->T, b->S,
            sl->ctx, sl->predicted * 1e3, m->expert_p_source ? "; router: " : "",
            m->expert_p_source ? m->expert_p_source : "");
    if (pl->evicted_bytes)
        fprintf(stderr, "weights freed on devices by earlier plans: %.2f GiB\n", (double)pl->evicted_bytes / (1 << 30));
    fprintf(stderr, "| layer | device | KV cache | expert groups on it | in host memory | entries on it |\n");
    fprintf(stderr, "| ---: | ---: | --- | ---: | ---: | ---: |\n");
    for (int k = 1; k < p->np - 1; k++) {
        int h = home[k], groups = 0, here = 0;
        double share = 0, all = 0;
        const char *kv = "-";
        for (size_t i = p->begin[k]; i < p->begin[k + 1]; i++) {
            int d = pc->dev[(size_t)(h * pc->nv + var[k]) * n + i];
            if (t[i].kv)
                kv = d == h ? "with it" : "host memory";
            if (t[i].group >= 0 && t[i].codelet == hx_op_codelet(HX_OP_MOE_GATE_UP)) {
                groups++;
                here += d == h;
                share += d == h ? t[i].flops : 0;
                all += t[i].flops;
            }
        }
        char entries[16] = "-";
        if (groups)
            snprintf(entries, sizeof entries, "%.0f %%", all > 0 ? 100 * share / all : 0);
        fprintf(stderr, "| %d | %d | %s | %d of %d | %d | %s |\n", k - 1, h, kv, here, groups, groups - here, entries);
    }
}

/* What the plans in use other than `except` put in devices' own memory
 * (what a plan being made must leave room for). */
static void gather_holdings(struct hx_placements *pl, const slot *except)
{
    if (pl->monotonic)
        return; /* holdings are not known well enough to shrink */
    memset(pl->resident, 0, sizeof pl->resident);
    memset(pl->resident_w, 0, sizeof pl->resident_w);
    for (int i = 0; i < HX_PLACE_SLOTS; i++) {
        const slot *c = &pl->s[i];
        if (!c->used || c == except)
            continue;
        for (int k = 0; k < HX_PLACE_MAX_PARTS; k++)
            if (c->hold[k]) {
                pl->resident[k] |= c->hold[k];
                pl->resident_w[k] = fmax(pl->resident_w[k], c->hold_w[k]);
            }
    }
}

static int kept_cmp(const void *a, const void *b)
{
    const kept *x = a, *y = b;
    if (x->b != y->b)
        return (uintptr_t)x->b < (uintptr_t)y->b ? -1 : 1;
    return (x->dev > y->dev) - (x->dev < y->dev);
}

/* Frees on their devices the weights of `cand` that no plan in use keeps
 * there. */
static void free_unkept(struct hx_placements *pl, const kept *cand, size_t n_cand)
{
    if (!n_cand || pl->monotonic)
        return;
    size_t n = 0;
    for (int i = 0; i < HX_PLACE_SLOTS; i++)
        n += pl->s[i].used ? pl->s[i].n_keep : 0;
    kept *live = n ? malloc(sizeof *live * n) : NULL;
    if (n && !live)
        return; /* freeing nothing is safe: the memory stays counted */
    n = 0;
    for (int i = 0; i < HX_PLACE_SLOTS; i++)
        if (pl->s[i].used && pl->s[i].n_keep) {
            memcpy(live + n, pl->s[i].keep, sizeof *live * pl->s[i].n_keep);
            n += pl->s[i].n_keep;
        }
    if (n)
        qsort(live, n, sizeof *live, kept_cmp);
    for (size_t i = 0; i < n_cand; i++)
        if (!n || !bsearch(&cand[i], live, n, sizeof *live, kept_cmp))
            pl->evicted_bytes += hx_buffer_evict(cand[i].b, cand[i].dev);
    free(live);
}

static hx_status plan_shape(hx_model *m, const hx_batch_shape *b, hx_place_mode mode, slot *sl,
                            struct hx_placements *pl)
{
    const size_t n_expect = pl->n;
    hx_runtime *rt = m->rt;
    dry g = {.m = m, .group_layer = -2}; /* no layer yet: layer 0's first group is 0 */
    hx_status s = hx_llama_emit(m, b, NULL, collect, &g);
    if (s == HX_OK)
        s = g.status;
    if (s == HX_OK && g.n != n_expect)
        s = hx_error(HX_ERR_STATE, "placement planner: %zu tasks in this step's graph, %zu expected", g.n, n_expect);
    if (s) {
        free(g.t);
        return s;
    }
    machine mc = {.rt = rt, .nd = hx_runtime_device_count(rt), .lanes = m->act[0].moe_h1 && !m->expert_observer};
    mc.live = ~atomic_load(&rt->sched.retired) & (mc.nd >= 32 ? 0xffffffffu : (1u << mc.nd) - 1);
    for (int d = 0; d < mc.nd; d++) {
        hx_device_info info;
        hx_runtime_device_info(rt, d, &info);
        mc.own[d] = info.memory_node != 0;
        mc.cap[d] = hx_device_room(&info);
        mc.slow[d] = hx_sched_slowness_recent(&rt->sched, d, HX_SLOWNESS_MAX_AGE);
        sl->slowness[d] = mc.slow[d];
    }
    sl->retired = atomic_load(&rt->sched.retired);
    sl->refit = 0;
    gather_holdings(pl, sl);
    const int L = (int)m->info.n_layer, nd = mc.nd;
    /* A KV buffer on a device grows by doubling, and while its blocks move
     * to the larger slots the old ones are still held (runtime/buffer.c,
     * grow_slots): room for one more K or V buffer stays free. */
    double kv_one = 0;
    for (size_t i = 0; i < g.n; i++)
        kv_one = fmax(kv_one, g.t[i].kv_bytes / 2);
    for (int d = 0; d < nd; d++)
        mc.cap[d] = fmax(0, mc.cap[d] - kv_one);
    parts p;
    part_costs pcv = {0}, *pc = &pcv;
    int *home = NULL, *tmp = NULL, *var = NULL, *vtmp = NULL;
    s = cut(g.t, g.n, L, &p);
    if (s == HX_OK && p.np > HX_PLACE_MAX_PARTS)
        s = hx_error(HX_ERR_UNSUPPORTED, "placement planner: %d layers (at most %d)", L, HX_PLACE_MAX_PARTS - 2);
    if (s == HX_OK) {
        int groups = 0;
        for (size_t i = 0; i < g.n; i++)
            groups = g.t[i].group + 1 > groups ? g.t[i].group + 1 : groups;
        /* ngl keeps a layer's experts with it, as llama.cpp's -ngl does. */
        pc->nv = 2 * (mode == HX_PLACE_NGL || groups > HX_PLACE_MAX_GROUPS ? 1 : groups + 1);
        size_t nv = (size_t)p.np * (size_t)nd * (size_t)pc->nv;
        pc->c = malloc(sizeof *pc->c * nv);
        pc->mem = malloc(sizeof *pc->mem * nv);
        pc->kvm = malloc(sizeof *pc->kvm * nv);
        pc->dev = malloc(sizeof *pc->dev * g.n * (size_t)nd * (size_t)pc->nv);
        home = malloc(sizeof *home * (size_t)p.np);
        tmp = malloc(sizeof *tmp * (size_t)p.np);
        var = calloc((size_t)p.np, sizeof *var);
        vtmp = malloc(sizeof *vtmp * (size_t)p.np);
        if (!pc->c || !pc->mem || !pc->kvm || !pc->dev || !home || !tmp || !var || !vtmp)
            s = hx_error(HX_ERR_NO_MEMORY, "placement planner");
    }
    if (s == HX_OK) {
        for (int k = 0; k < p.np; k++)
            for (int e = 0; e < nd; e++)
                for (int v = 0; v < pc->nv; v++) {
                    size_t a = p.begin[k], z = p.begin[k + 1], j = PV(k, e, v);
                    /* ngl keeps a layer's KV cache with it, as llama.cpp does. */
                    int kv_host = (v & 1) && mode != HX_PLACE_NGL;
                    pc->mem[j] = pc->kvm[j] = 0;
                    pc->c[j] = (mc.live >> e & 1) ? span_cost(&mc, g.t, a, z, e, kv_host, v >> 1,
                                                             pc->dev + (size_t)(e * pc->nv + v) * g.n + a, &pc->mem[j],
                                                             &pc->kvm[j])
                                                 : INF;
                }
        /* The residual stream between layers, and the logits. */
        double x_bytes = g.t[0].out_bytes, logit_bytes = g.t[g.n - 1].out_bytes;
        sl->provisional = 0;
        answer ans = {.best = INF, .home = home, .var = var};
        if (mode == HX_PLACE_NGL) {
            ngl_homes(&mc, &p, pc, home);
            ans.best = evaluate(&mc, &p, pc, x_bytes, logit_bytes, home);
        } else if (mc.unknown) {
            calibration_homes(&mc, &p, pl->calibrations++, home);
            sl->provisional = 1;
        } else {
            for (int a = 0; a < nd; a++)
                for (int z = 0; z < nd; z++)
                    if (pc->c[PV(0, a, 0)] < INF && pc->c[PV(L + 1, z, 0)] < INF)
                        program(&mc, pl, &p, pc, x_bytes, logit_bytes, a, z, &ans, tmp, vtmp);
            if (ans.best >= INF)
                s = hx_error(HX_ERR_NO_MEMORY, "placement planner: no placement of the model's %d layers fits the "
                                               "devices' memory", L);
        }
        sl->predicted = ans.best;
        if (mode != HX_PLACE_NGL && !sl->provisional && getenv("HX_PLAN_PRINT") && *getenv("HX_PLAN_PRINT") == '1')
            print_plan(m, pl, &p, pc, g.t, g.n, b, sl, home, var);
        memset(sl->hold, 0, sizeof sl->hold);
        memset(sl->hold_w, 0, sizeof sl->hold_w);
        for (int k = 0; k < p.np && s == HX_OK; k++)
            if (mc.own[home[k]]) {
                sl->hold[k] = 1u << home[k];
                if (pc->kvm[PV(k, home[k], var[k])] > 0)
                    pl->resident_kv[k] |= 1u << home[k];
                sl->hold_w[k] = pc->mem[PV(k, home[k], var[k])] - pc->kvm[PV(k, home[k], var[k])];
            }
        for (int k = 0; k < p.np && s == HX_OK; k++)
            for (size_t i = p.begin[k]; i < p.begin[k + 1]; i++) {
                hx_plan_entry *e = &sl->plan->e[i];
                int h = home[k];
                int d = sl->provisional ? h : pc->dev[(size_t)(h * pc->nv + var[k]) * g.n + i];
                if (!((g.t[i].capable & mc.live) >> d & 1))
                    d = -1;
                memset(e, 0, sizeof *e);
                e->layer = g.t[i].layer;
                e->cls = g.t[i].cls;
                e->codelet = g.t[i].codelet;
                e->flops = g.t[i].flops;
                e->bytes = g.t[i].bytes;
                e->prefer = d >= 0 ? 1u << d : 0;
                e->device = d;
                char experts[40] = "";
                if (g.t[i].group >= 0)
                    snprintf(experts, sizeof experts, "; experts %u-%u", g.t[i].e_lo, g.t[i].e_lo + g.t[i].e_n - 1);
                snprintf(e->reason, sizeof e->reason, "%s: layer on dev %d%s%s",
                         mode == HX_PLACE_NGL ? "ngl" : sl->provisional ? "plan (measuring)" : "plan", h,
                         d == h ? "" : d < 0 ? ", any capable device" : ", task moved where it pays", experts);
            }
        /* The weights it puts in devices' own memory, for freeing them
         * there once no plan in use does. */
        sl->n_keep = 0;
        sl->overflow = 0;
        for (size_t i = 0; i < g.n && s == HX_OK; i++) {
            int d = sl->plan->e[i].device;
            if (d < 0 || !mc.own[d])
                continue;
            sl->overflow |= g.t[i].nw > HX_PLACE_KEEP_PER_TASK;
            for (int j = 0; j < g.t[i].nw && j < HX_PLACE_KEEP_PER_TASK; j++) {
                if (sl->n_keep == sl->cap_keep) {
                    sl->overflow = 1;
                    break;
                }
                sl->keep[sl->n_keep++] = (kept){g.t[i].w[j], d};
            }
        }
        pl->monotonic |= sl->overflow;
    }
    free(p.begin), free(pc->c), free(pc->mem), free(pc->kvm), free(pc->dev), free(home), free(tmp), free(var), free(vtmp), free(g.t);
    return s;
}

static uint32_t pow2_at_least(uint32_t x)
{
    uint32_t p = 1;
    while (p < x && p < (1u << 31))
        p <<= 1;
    return p;
}

/* Whether what a plan assumed still holds. */
static int stale(hx_runtime *rt, const slot *sl)
{
    if (sl->provisional || sl->retired != atomic_load(&rt->sched.retired))
        return 1;
    for (int d = 0; d < hx_runtime_device_count(rt); d++) {
        double r = hx_sched_slowness_recent(&rt->sched, d, HX_SLOWNESS_MAX_AGE) / sl->slowness[d];
        if (r > HX_REPLAN_FACTOR || r < 1 / HX_REPLAN_FACTOR)
            return 1;
    }
    return 0;
}

static hx_status ensure_cache(hx_model *m, size_t n)
{
    struct hx_placements *pl = m->placements;
    if (pl && pl->n == n)
        return HX_OK;
    size_t plan_size = sizeof(struct hx_plan) + n * sizeof(hx_plan_entry);
    plan_size = (plan_size + 63) & ~(size_t)63;
    const size_t cap_keep = n * HX_PLACE_KEEP_PER_TASK;
    size_t keep_size = (cap_keep * sizeof(kept) + 63) & ~(size_t)63;
    struct hx_placements *np = calloc(1, sizeof *np + HX_PLACE_SLOTS * (plan_size + keep_size) + 64);
    if (!np)
        return hx_error(HX_ERR_NO_MEMORY, "placement plans");
    np->n = n;
    if (pl) {
        /* The old plans go: the weights they kept on devices are freed
         * there, unless they were not all known (then they stay
         * counted); a KV cache stays. */
        memcpy(np->resident_kv, pl->resident_kv, sizeof np->resident_kv);
        np->monotonic = pl->monotonic;
        np->evicted_bytes = pl->evicted_bytes;
        if (pl->monotonic) {
            memcpy(np->resident, pl->resident, sizeof np->resident);
            memcpy(np->resident_w, pl->resident_w, sizeof np->resident_w);
        } else {
            for (int i = 0; i < HX_PLACE_SLOTS; i++)
                for (size_t j = 0; pl->s[i].used && j < pl->s[i].n_keep; j++)
                    np->evicted_bytes += hx_buffer_evict(pl->s[i].keep[j].b, pl->s[i].keep[j].dev);
        }
    }
    np->generation = pl ? pl->generation + 1 : 1;
    np->replans = pl ? pl->replans : 0;
    unsigned char *base = (unsigned char *)(np + 1);
    for (int i = 0; i < HX_PLACE_SLOTS; i++) {
        unsigned char *at = base + (size_t)i * (plan_size + keep_size);
        np->s[i].plan = (struct hx_plan *)(void *)at;
        np->s[i].plan->n = n;
        np->s[i].keep = (kept *)(void *)(at + plan_size);
        np->s[i].cap_keep = cap_keep;
    }
    free(pl);
    m->placements = np;
    return HX_OK;
}

/* Appends a slot's kept weights to the list of those to free unless a
 * plan in use keeps them. */
static void add_candidates(struct hx_placements *pl, kept **cand, size_t *n, const slot *c)
{
    if (!c->n_keep)
        return;
    kept *p = realloc(*cand, sizeof *p * (*n + c->n_keep));
    if (!p) {
        /* Not freed, so counted from now on as the plans never freed. */
        pl->monotonic = 1;
        for (int k = 0; k < HX_PLACE_MAX_PARTS; k++)
            if (c->hold[k]) {
                pl->resident[k] |= c->hold[k];
                pl->resident_w[k] = fmax(pl->resident_w[k], c->hold_w[k]);
            }
        return;
    }
    memcpy(p + *n, c->keep, sizeof *p * c->n_keep);
    *cand = p;
    *n += c->n_keep;
}

/* A copy of a slot with its plan and kept weights (NULL: no memory). */
static slot *slot_save(const slot *sl)
{
    size_t plan_bytes = sizeof(struct hx_plan) + sl->plan->n * sizeof(hx_plan_entry);
    slot *c = malloc(sizeof *c + plan_bytes + sl->n_keep * sizeof(kept));
    if (!c)
        return NULL;
    *c = *sl;
    c->plan = (struct hx_plan *)(void *)(c + 1);
    memcpy(c->plan, sl->plan, plan_bytes);
    c->keep = (kept *)(void *)((unsigned char *)c->plan + plan_bytes);
    memcpy(c->keep, sl->keep, sl->n_keep * sizeof(kept));
    return c;
}

static void slot_restore(slot *sl, const slot *c)
{
    struct hx_plan *plan = sl->plan;
    kept *keep = sl->keep;
    size_t cap = sl->cap_keep;
    memcpy(plan, c->plan, sizeof(struct hx_plan) + c->plan->n * sizeof(hx_plan_entry));
    memcpy(keep, c->keep, c->n_keep * sizeof(kept));
    *sl = *c;
    sl->plan = plan, sl->keep = keep, sl->cap_keep = cap;
    sl->refit = 0;
}

/* Refit horizon: a plan made again for freed room replaces the old one
 * when its predicted gain over this many steps exceeds the time to copy
 * the weights it adds to devices. */
#define HX_REFIT_STEPS 256

static int refit_pays(hx_runtime *rt, const slot *old, const slot *now)
{
    if (now->provisional || old->provisional)
        return 1;
    double gain = old->predicted - now->predicted;
    if (!(gain > 0))
        return 0;
    kept *o = malloc(sizeof *o * (old->n_keep ? old->n_keep : 1));
    if (!o)
        return 1;
    memcpy(o, old->keep, sizeof *o * old->n_keep);
    qsort(o, old->n_keep, sizeof *o, kept_cmp);
    double copy = 0;
    for (size_t i = 0; i < now->n_keep; i++)
        if (!old->n_keep || !bsearch(&now->keep[i], o, old->n_keep, sizeof *o, kept_cmp))
            copy += hx_sched_link_seconds(rt, now->keep[i].dev, (double)hx_buffer_size(now->keep[i].b));
    free(o);
    return gain * HX_REFIT_STEPS > copy;
}

hx_status hx_placement_get(hx_model *m, const hx_batch_shape *b, const struct hx_plan *base, const struct hx_plan **out)
{
    hx_place_mode mode = m->rt->sched.policy->placement;
    hx_status s = ensure_cache(m, base->n);
    if (s)
        return s;
    struct hx_placements *pl = m->placements;
    uint32_t ctx = pow2_at_least(b->max_blocks);
    kept *cand = NULL;
    size_t n_cand = 0;
    /* The router's measured shares moved: every plan (its groups' order,
     * their costs) is out of date. */
    if (hx_moe_routing_update(m, b->T))
        for (int i = 0; i < HX_PLACE_SLOTS; i++)
            if (pl->s[i].used) {
                add_candidates(pl, &cand, &n_cand, &pl->s[i]);
                pl->s[i].used = 0;
            }
    slot *sl = NULL, *victim = &pl->s[0];
    for (int i = 0; i < HX_PLACE_SLOTS && !sl; i++) {
        slot *c = &pl->s[i];
        if (c->used && c->T == b->T && c->S == b->S && c->ctx == ctx)
            sl = c;
        else if (!c->used || (victim->used && c->stamp < victim->stamp))
            victim = c;
    }
    int fresh = !sl;
    if (fresh) {
        sl = victim;
        if (sl->used)
            add_candidates(pl, &cand, &n_cand, sl); /* the least recently used plan makes room */
        memset(sl->slowness, 0, sizeof sl->slowness);
        sl->T = b->T, sl->S = b->S, sl->ctx = ctx, sl->used = 0;
    }
    sl->stamp = ++pl->clock;
    /* One plan used HX_PLACE_IDLE steps in a row (decoding after a
     * prompt's chunks, a context size outgrown): the others go, all at
     * once, the weights only they kept on a device are freed there, and
     * this plan is made again with that room. */
    pl->run = pl->last == sl && !fresh ? pl->run + 1 : 1;
    pl->last = sl;
    /* Only a decode step's plan (a token per sequence) drops the others:
     * a prompt's chunks are passing, and weights they would evict are
     * those the decode steps after them need again. */
    if (pl->run == HX_PLACE_IDLE && b->T == b->S) {
        int dropped = 0;
        for (int i = 0; i < HX_PLACE_SLOTS; i++) {
            slot *c = &pl->s[i];
            if (c != sl && c->used) {
                add_candidates(pl, &cand, &n_cand, c);
                dropped |= c->n_keep > 0;
                c->used = 0;
            }
        }
        sl->refit |= dropped;
    }
    int why_stale = !fresh && stale(m->rt, sl);
    if (fresh || sl->refit || why_stale) {
        /* Made again only for the room freed: kept when the new plan's
         * gain does not pay for the weights it would copy. */
        slot *before = !fresh && !why_stale ? slot_save(sl) : NULL;
        if (!fresh)
            add_candidates(pl, &cand, &n_cand, sl); /* what its old plan kept */
        s = plan_shape(m, b, mode, sl, pl);
        if (s) {
            sl->used = 0;
            free(cand), free(before);
            return s;
        }
        if (before && !refit_pays(m->rt, before, sl))
            slot_restore(sl, before);
        else if (!fresh)
            pl->replans++;
        free(before);
        sl->used = 1;
        pl->generation++; /* recorded graphs carry the old preferences */
    }
    free_unkept(pl, cand, n_cand);
    free(cand);
    *out = sl->plan;
    return HX_OK;
}

uint64_t hx_placement_generation(const hx_model *m) { return m->placements ? m->placements->generation : 0; }

hx_status hx_placement_info(hx_model *m, uint64_t *replans, double *predicted)
{
    *replans = m->placements ? m->placements->replans : 0;
    *predicted = 0;
    if (!m->placements)
        return HX_OK;
    const slot *last = NULL;
    for (int i = 0; i < HX_PLACE_SLOTS; i++)
        if (m->placements->s[i].used && (!last || m->placements->s[i].stamp > last->stamp))
            last = &m->placements->s[i];
    *predicted = last ? last->predicted : 0;
    return HX_OK;
}

const struct hx_plan *hx_placement_last(const hx_model *m)
{
    const slot *last = NULL;
    for (int i = 0; m->placements && i < HX_PLACE_SLOTS; i++)
        if (m->placements->s[i].used && (!last || m->placements->s[i].stamp > last->stamp))
            last = &m->placements->s[i];
    return last ? last->plan : NULL;
}
