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
 * a device leaves service.  On a real machine a device without
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
#include "partitioner/partitioner.h"
#include "partitioner/placement.h"
#include "runtime/buffer.h"
#include "runtime/error.h"
#include "runtime/runtime.h"

/* Plans kept per model (shapes a serving engine alternates between). */
#define HX_PLACE_SLOTS 8
/* Slowness outside [1/x, x] of what a plan assumed makes it again. */
#define HX_REPLAN_FACTOR 1.25
/* Of a device's own memory, what the planner fills with weights and KV:
 * the rest is for activations and for a replan's moves. */
#define HX_MEM_USABLE 0.9
#define INF 1e300
/* Layers + the parts before and after them. */
#define HX_PLACE_MAX_PARTS 1024

typedef struct {
    uint32_t T, S, ctx; /* ctx: longest block table rounded up to a power of two */
    int used;
    uint64_t stamp;       /* last use, for replacement */
    int provisional;      /* some device could not be costed */
    uint32_t retired;     /* devices out of service when it was made */
    double slowness[HX_MAX_DEVICES];
    double predicted;     /* seconds per step, by the planner's model */
    struct hx_plan *plan; /* inside the same allocation */
} slot;

struct hx_placements {
    size_t n;             /* tasks per graph */
    uint64_t clock, generation, replans;
    /* Per part of the graph (before the layers, each layer, after them):
     * the devices with memory of their own that hold its weights and KV
     * cache.  The first plan decides; later plans (other shapes, replans)
     * place a part on such a device only where it already lives, since
     * nothing evicts a replica: a device's memory never holds more than
     * the first plan fitted in it. */
    int nparts;
    uint32_t resident[HX_PLACE_MAX_PARTS];
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
} ptask;

typedef struct {
    hx_model *m;
    ptask *t;
    size_t n, cap;
    hx_status status;
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
static double span_cost(machine *mc, const ptask *t, size_t a, size_t b, int e, int *dev, double *mem)
{
    double total = 0, m = 0;
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
    double kv_best = kv_ok ? kv_home : INF;
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
        double home = cost(mc, &t[i], e);
        int best = e;
        double bc = home;
        for (int f = 0; f < mc->nd; f++) {
            if (f == e || !(mc->live >> f & 1))
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
        total += bc;
        if (best == e)
            m += t[i].weight_bytes;
    }
    if (kv_best >= INF && a < b) {
        int any_kv = 0;
        for (size_t i = a; i < b; i++)
            any_kv |= t[i].kv;
        if (any_kv)
            return INF;
    }
    for (size_t i = a; i < b; i++)
        if (t[i].kv && kv_dev == e)
            m += t[i].kv_bytes;
    total += kv_best < INF ? kv_best : 0;
    for (size_t i = a; i < b; i++)
        if (dev[i - a] == e && !t[i].kv && !(t[i].capable >> e & 1))
            return INF;
    *mem = m;
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

typedef struct {
    double *c;    /* [np][nd]: cost of part k at home e */
    double *mem;  /* [np][nd]: bytes it puts in e's own memory */
    int *dev;     /* [np][nd][part size]: each task's device, concatenated per e */
} part_costs;

/* Up to two memory-limited devices are tracked exactly by the program;
 * any further ones take no layers (their memory is not counted). */
#define HX_PLACE_LIMITED 2

typedef struct {
    double best;
    int *home; /* [np] */
} answer;

/* The dynamic program for fixed pre/post homes a and z. */
static void program(machine *mc, const parts *p, const part_costs *pc, double x_bytes, double logit_bytes, int a,
                    int z, answer *out, int *home_tmp)
{
    const int nd = mc->nd, L = p->np - 2;
    int lim[HX_PLACE_LIMITED] = {-1, -1}, nl = 0, lim_of[HX_MAX_DEVICES];
    int capn[HX_PLACE_LIMITED] = {0, 0};
    for (int d = 0; d < nd; d++) {
        lim_of[d] = -1;
        if (mc->own[d] && nl < HX_PLACE_LIMITED) {
            lim_of[d] = nl;
            lim[nl++] = d;
        }
    }
    for (int j = 0; j < nl; j++) {
        int d = lim[j];
        double room = mc->cap[d] - (a == d ? pc->mem[0 * nd + d] : 0) - (z == d ? pc->mem[(size_t)(L + 1) * nd + d] : 0);
        double per = 0;
        for (int l = 1; l <= L; l++)
            per = fmax(per, pc->mem[(size_t)l * nd + d]);
        int c = per > 0 ? (int)floor(room / per) : L;
        capn[j] = c < 0 ? -1 : c > L ? L : c;
    }
    for (int j = 0; j < nl; j++)
        if (capn[j] < 0)
            return; /* the pre or post part alone does not fit */
    const int s1 = capn[0] + 1, s2 = nl > 1 ? capn[1] + 1 : 1;
    const size_t states = (size_t)nd * (size_t)s1 * (size_t)s2;
    double *cur = malloc(states * sizeof *cur), *next = malloc(states * sizeof *next);
    unsigned char *from = malloc((size_t)L * states);
    if (!cur || !next || !from) {
        free(cur), free(next), free(from);
        return;
    }
#define IDX(e, k1, k2) (((size_t)(e) * (size_t)s1 + (size_t)(k1)) * (size_t)s2 + (size_t)(k2))
    for (size_t i = 0; i < states; i++)
        cur[i] = INF;
    double pre = pc->c[0 * nd + a];
    for (int e = 0; e < nd; e++) {
        double c = pc->c[(size_t)1 * nd + e];
        if (c >= INF)
            continue;
        int k1 = lim_of[e] == 0, k2 = lim_of[e] == 1;
        if (k1 >= s1 || k2 >= s2 || (mc->own[e] && lim_of[e] < 0))
            continue;
        cur[IDX(e, k1, k2)] = pre + move_s(mc, a, e, x_bytes) + c;
        from[IDX(e, k1, k2)] = (unsigned char)a;
    }
    for (int l = 2; l <= L; l++) {
        unsigned char *fr = from + (size_t)(l - 1) * states;
        for (size_t i = 0; i < states; i++)
            next[i] = INF;
        for (int d = 0; d < nd; d++)
            for (int k1 = 0; k1 < s1; k1++)
                for (int k2 = 0; k2 < s2; k2++) {
                    double v = cur[IDX(d, k1, k2)];
                    if (v >= INF)
                        continue;
                    for (int e = 0; e < nd; e++) {
                        double c = pc->c[(size_t)l * nd + e];
                        if (c >= INF || (mc->own[e] && lim_of[e] < 0))
                            continue;
                        int n1 = k1 + (lim_of[e] == 0), n2 = k2 + (lim_of[e] == 1);
                        if (n1 >= s1 || n2 >= s2)
                            continue;
                        double w = v + move_s(mc, d, e, x_bytes) + c;
                        size_t j = IDX(e, n1, n2);
                        if (w < next[j]) {
                            next[j] = w;
                            fr[j] = (unsigned char)d;
                        }
                    }
                }
        double *sw = cur;
        cur = next;
        next = sw;
    }
    double post = pc->c[(size_t)(L + 1) * nd + z];
    size_t best_i = 0;
    double best = INF;
    for (size_t i = 0; i < states && post < INF; i++) {
        if (cur[i] >= INF)
            continue;
        int e = (int)(i / ((size_t)s1 * (size_t)s2));
        double w = cur[i] + move_s(mc, e, z, x_bytes) + post + link_s(mc, z, logit_bytes);
        if (w < best) {
            best = w;
            best_i = i;
        }
    }
    if (best < out->best) {
        size_t i = best_i;
        for (int l = L; l >= 1; l--) {
            int e = (int)(i / ((size_t)s1 * (size_t)s2));
            int k1 = (int)(i / (size_t)s2 % (size_t)s1), k2 = (int)(i % (size_t)s2);
            home_tmp[l] = e;
            if (l > 1) {
                int d = from[(size_t)(l - 1) * states + i];
                k1 -= lim_of[e] == 0;
                k2 -= lim_of[e] == 1;
                i = IDX(d, k1, k2);
            }
        }
        home_tmp[0] = a;
        home_tmp[L + 1] = z;
        out->best = best;
        memcpy(out->home, home_tmp, sizeof *home_tmp * (size_t)p->np);
    }
#undef IDX
    free(cur), free(next), free(from);
}

/* The predicted seconds of a given assignment of homes (ngl's). */
static double evaluate(machine *mc, const parts *p, const part_costs *pc, double x_bytes, double logit_bytes,
                       const int *home)
{
    const int nd = mc->nd;
    double s = 0;
    for (int k = 0; k < p->np; k++) {
        double c = pc->c[(size_t)k * nd + home[k]];
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
        per = fmax(per, pc->mem[(size_t)l * nd + gpu]);
    double room = mc->own[gpu] ? mc->cap[gpu] : INF;
    int n = per > 0 ? (int)fmin((double)L, floor(room / per)) : L;
    if (n == L && room - per * L >= pc->mem[(size_t)(L + 1) * nd + gpu])
        home[L + 1] = gpu; /* -ngl above n_layer offloads the output too */
    for (int l = L - n + 1; l <= L; l++)
        home[l] = gpu;
}

/* Round-robin homes while some device has no measurements. */
static void calibration_homes(machine *mc, const parts *p, int *home)
{
    int devs[HX_MAX_DEVICES], n = 0;
    for (int d = 0; d < mc->nd; d++)
        if (mc->live >> d & 1)
            devs[n++] = d;
    for (int k = 0; k < p->np; k++)
        home[k] = devs[(k + 1) % (n ? n : 1)];
}

static hx_status plan_shape(hx_model *m, const hx_batch_shape *b, hx_place_mode mode, slot *sl,
                            struct hx_placements *pl)
{
    const size_t n_expect = pl->n;
    hx_runtime *rt = m->rt;
    dry g = {.m = m};
    hx_status s = hx_llama_emit(m, b, NULL, collect, &g);
    if (s == HX_OK)
        s = g.status;
    if (s == HX_OK && g.n != n_expect)
        s = hx_error(HX_ERR_STATE, "placement planner: %zu tasks in this step's graph, %zu expected", g.n, n_expect);
    if (s) {
        free(g.t);
        return s;
    }
    machine mc = {.rt = rt, .nd = hx_runtime_device_count(rt)};
    mc.live = ~atomic_load(&rt->sched.retired) & (mc.nd >= 32 ? 0xffffffffu : (1u << mc.nd) - 1);
    for (int d = 0; d < mc.nd; d++) {
        hx_device_info info;
        hx_runtime_device_info(rt, d, &info);
        mc.own[d] = info.memory_node != 0;
        mc.cap[d] = HX_MEM_USABLE * (double)info.global_mem_bytes;
        mc.slow[d] = hx_sched_slowness(&rt->sched, d);
        sl->slowness[d] = mc.slow[d];
    }
    sl->retired = atomic_load(&rt->sched.retired);
    const int L = (int)m->info.n_layer, nd = mc.nd;
    parts p;
    part_costs pc = {0};
    int *home = NULL, *tmp = NULL;
    s = cut(g.t, g.n, L, &p);
    if (s == HX_OK && p.np > HX_PLACE_MAX_PARTS)
        s = hx_error(HX_ERR_UNSUPPORTED, "placement planner: %d layers (at most %d)", L, HX_PLACE_MAX_PARTS - 2);
    if (s == HX_OK) {
        pc.c = malloc(sizeof *pc.c * (size_t)p.np * (size_t)nd);
        pc.mem = malloc(sizeof *pc.mem * (size_t)p.np * (size_t)nd);
        pc.dev = malloc(sizeof *pc.dev * g.n * (size_t)nd);
        home = malloc(sizeof *home * (size_t)p.np);
        tmp = malloc(sizeof *tmp * (size_t)p.np);
        if (!pc.c || !pc.mem || !pc.dev || !home || !tmp)
            s = hx_error(HX_ERR_NO_MEMORY, "placement planner");
    }
    if (s == HX_OK) {
        for (int k = 0; k < p.np; k++)
            for (int e = 0; e < nd; e++) {
                size_t a = p.begin[k], z = p.begin[k + 1];
                pc.c[(size_t)k * nd + e] = (mc.live >> e & 1)
                                               ? span_cost(&mc, g.t, a, z, e, pc.dev + (size_t)e * g.n + a,
                                                           &pc.mem[(size_t)k * nd + e])
                                               : INF;
                if (!(mc.live >> e & 1))
                    pc.mem[(size_t)k * nd + e] = 0;
                if (pl->nparts && mc.own[e] && !(pl->resident[k] >> e & 1))
                    pc.c[(size_t)k * nd + e] = INF;
            }
        /* The residual stream between layers, and the logits. */
        double x_bytes = g.t[0].out_bytes, logit_bytes = g.t[g.n - 1].out_bytes;
        sl->provisional = 0;
        answer ans = {.best = INF, .home = home};
        if (mode == HX_PLACE_NGL) {
            ngl_homes(&mc, &p, &pc, home);
            ans.best = evaluate(&mc, &p, &pc, x_bytes, logit_bytes, home);
        } else if (mc.unknown) {
            calibration_homes(&mc, &p, home);
            sl->provisional = 1;
        } else {
            for (int a = 0; a < nd; a++)
                for (int z = 0; z < nd; z++)
                    if (pc.c[a] < INF && pc.c[(size_t)(L + 1) * nd + z] < INF)
                        program(&mc, &p, &pc, x_bytes, logit_bytes, a, z, &ans, tmp);
            if (ans.best >= INF)
                s = hx_error(HX_ERR_NO_MEMORY, "placement planner: no placement of the model's %d layers fits the "
                                               "devices' memory", L);
        }
        sl->predicted = ans.best;
        if (s == HX_OK && !pl->nparts && !sl->provisional) {
            pl->nparts = p.np;
            for (int k = 0; k < p.np; k++)
                pl->resident[k] = mc.own[home[k]] ? 1u << home[k] : 0;
        }
        for (int k = 0; k < p.np && s == HX_OK; k++)
            for (size_t i = p.begin[k]; i < p.begin[k + 1]; i++) {
                hx_plan_entry *e = &sl->plan->e[i];
                int h = home[k];
                int d = sl->provisional || mode == HX_PLACE_NGL ? h : pc.dev[(size_t)h * g.n + i];
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
                snprintf(e->reason, sizeof e->reason, "%s: layer on dev %d%s",
                         mode == HX_PLACE_NGL ? "ngl" : sl->provisional ? "plan (measuring)" : "plan", h,
                         d == h ? "" : d < 0 ? ", any capable device" : ", task moved where it pays");
            }
    }
    free(p.begin), free(pc.c), free(pc.mem), free(pc.dev), free(home), free(tmp), free(g.t);
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
        double r = hx_sched_slowness(&rt->sched, d) / sl->slowness[d];
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
    struct hx_placements *np = calloc(1, sizeof *np + HX_PLACE_SLOTS * plan_size + 64);
    if (!np)
        return hx_error(HX_ERR_NO_MEMORY, "placement plans");
    np->n = n;
    if (pl) { /* what devices hold does not change with the graph */
        np->nparts = pl->nparts;
        memcpy(np->resident, pl->resident, sizeof np->resident);
    }
    np->generation = pl ? pl->generation + 1 : 1;
    np->replans = pl ? pl->replans : 0;
    unsigned char *base = (unsigned char *)(np + 1);
    for (int i = 0; i < HX_PLACE_SLOTS; i++) {
        np->s[i].plan = (struct hx_plan *)(void *)(base + (size_t)i * plan_size);
        np->s[i].plan->n = n;
    }
    free(pl);
    m->placements = np;
    return HX_OK;
}

hx_status hx_placement_get(hx_model *m, const hx_batch_shape *b, const struct hx_plan *base, const struct hx_plan **out)
{
    hx_place_mode mode = m->rt->sched.policy->placement;
    hx_status s = ensure_cache(m, base->n);
    if (s)
        return s;
    struct hx_placements *pl = m->placements;
    uint32_t ctx = pow2_at_least(b->max_blocks);
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
        memset(sl->slowness, 0, sizeof sl->slowness);
        sl->T = b->T, sl->S = b->S, sl->ctx = ctx, sl->used = 0;
    }
    sl->stamp = ++pl->clock;
    if (fresh || stale(m->rt, sl)) {
        s = plan_shape(m, b, mode, sl, pl);
        if (s) {
            sl->used = 0;
            return s;
        }
        if (!fresh)
            pl->replans++;
        sl->used = 1;
        pl->generation++; /* recorded graphs carry the old preferences */
    }
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
