/* The partition plan: for each task of one evaluation, the device it
 * prefers and why, by one of four strategies.
 *
 *   affinity  the design's mapping: preprocessing on the CPU, GEMMs on a
 *             GPU (CUDA first, then OpenCL), attention on an FPGA, else
 *             any OpenCL device; when no device of the class is present or
 *             none of them can run the op, the next best that can.
 *   layers    contiguous layers per device (pipeline stages): every task
 *             of a layer prefers its stage's device, or falls back as
 *             affinity does when that device cannot run it.
 *   auto      no preference: the scheduler alone decides.
 *   colocated every task prefers the device of the GEMMs (by affinity: the
 *             one that holds the weights), falling back as affinity does:
 *             on a GPU with its own memory a layer's activations then never
 *             cross PCIe, which for decode costs more than the CPU saves
 *             (docs/simulator.md).
 *
 * The plan is built once per model by a dry run of the graph builder
 * (hx_llama_emit with a sink), so it follows the graph task by task. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "partitioner/partitioner.h"
#include "partitioner/placement.h"
#include "runtime/error.h"
#include "runtime/handle.h"
#include "runtime/runtime.h"

const char *hx_task_class_str(hx_task_class c)
{
    switch (c) {
    case HX_CLASS_PREPROCESS: return "preprocess";
    case HX_CLASS_GEMM: return "gemm";
    case HX_CLASS_ATTENTION: return "attention";
    case HX_CLASS_HOST_ATTENTION: return "host attention";
    default: return "unknown";
    }
}

/* What a device is, for the mapping. */
typedef enum { ROLE_CPU, ROLE_CUDA, ROLE_CL_GPU, ROLE_FPGA, ROLE_CL_OTHER, ROLE_COUNT } role;

static role role_of(const hx_device_info *d)
{
    if (d->family == HX_FAMILY_CPU)
        return ROLE_CPU;
    if (d->family == HX_FAMILY_CUDA)
        return ROLE_CUDA;
    if (d->kind == HX_KIND_FPGA)
        return ROLE_FPGA;
    return d->kind == HX_KIND_GPU ? ROLE_CL_GPU : ROLE_CL_OTHER;
}

/* Per class: the wanted tiers (a tier is a set of roles, best first), what
 * the class is said to prefer, then the fallbacks, tier by tier. */
typedef struct {
    const char *wants;      /* "cpu", "gpu", "fpga" */
    int nwanted;            /* leading tiers that are the preference itself */
    int ntiers;
    unsigned tiers[6];      /* bit r: role r */
    const char *tier_name[6];
} class_map;

#define R(x) (1u << (x))
static const class_map maps[HX_CLASS_COUNT] = {
    [HX_CLASS_PREPROCESS] = {"cpu", 1, 4, {R(ROLE_CPU), R(ROLE_CUDA) | R(ROLE_CL_GPU), R(ROLE_FPGA), R(ROLE_CL_OTHER)},
                             {"cpu", "gpu", "fpga", "opencl"}},
    [HX_CLASS_GEMM] = {"gpu", 2, 5, {R(ROLE_CUDA), R(ROLE_CL_GPU), R(ROLE_CPU), R(ROLE_FPGA), R(ROLE_CL_OTHER)},
                       {"gpu", "gpu", "cpu", "fpga", "opencl"}},
    [HX_CLASS_ATTENTION] = {"fpga", 1, 4, {R(ROLE_FPGA), R(ROLE_CL_GPU) | R(ROLE_CL_OTHER), R(ROLE_CUDA), R(ROLE_CPU)},
                            {"fpga", "any opencl device", "gpu", "cpu"}},
    /* Attention over the blocks held in host memory: pinned to the CPU
     * (partitioner/llama_graph.c), the map says so to the plan's reader. */
    [HX_CLASS_HOST_ATTENTION] = {"cpu", 1, 1, {R(ROLE_CPU)}, {"cpu"}},
};

typedef struct {
    hx_runtime *rt;
    hx_partition_strategy strategy;
    uint32_t n_layer;
    struct hx_plan *plan;
    size_t cap;
    hx_status status;
} builder;

static uint32_t devices_in(hx_runtime *rt, unsigned roles)
{
    uint32_t m = 0;
    for (int d = 0; d < rt->ndevices; d++)
        if (roles & R(role_of(&rt->devices[d]->info)))
            m |= 1u << d;
    return m;
}

static int first_bit(uint32_t m)
{
    for (int d = 0; d < 32; d++)
        if (m & (1u << d))
            return d;
    return -1;
}

/* Appends to the entry's reason, cut to fit. */
static void say(hx_plan_entry *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(hx_plan_entry *e, const char *fmt, ...)
{
    size_t n = strlen(e->reason);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->reason + n, sizeof e->reason - n, fmt, ap);
    va_end(ap);
}

/* The affinity choice for an op of class `cls` that devices `capable` can run. */
static void affinity(hx_runtime *rt, hx_plan_entry *e, uint32_t capable)
{
    const class_map *cm = &maps[e->cls];
    const char *op = e->codelet->name;
    say(e, "prefers %s", cm->wants);
    uint32_t present = 0;
    for (int i = 0; i < cm->nwanted; i++)
        present |= devices_in(rt, cm->tiers[i]);
    for (int i = 0; i < cm->ntiers; i++) {
        uint32_t m = devices_in(rt, cm->tiers[i]) & capable;
        if (!m)
            continue;
        e->prefer = m;
        if (i < cm->nwanted)
            return;
        if (!present)
            say(e, ": none present");
        else if (present & (present - 1))
            say(e, ": none of its devices can run %s", op);
        else
            say(e, ": dev %d cannot run %s", first_bit(present), op);
        /* Attention's second tier is part of the design, not a fallback. */
        if (e->cls == HX_CLASS_ATTENTION && i == 1)
            say(e, "; %s", cm->tier_name[i]);
        return;
    }
    say(e, ": no device can run %s", op);
}

static void sink(void *user, int layer, hx_task_class cls, const hx_task_desc *d)
{
    builder *b = user;
    if (b->status)
        return;
    if (b->plan->n == b->cap) {
        size_t cap = b->cap * 2;
        struct hx_plan *p = realloc(b->plan, sizeof *p + cap * sizeof p->e[0]);
        if (!p) {
            b->status = hx_error(HX_ERR_NO_MEMORY, "partition plan");
            return;
        }
        b->plan = p;
        b->cap = cap;
    }
    hx_plan_entry *e = &b->plan->e[b->plan->n++];
    memset(e, 0, sizeof *e);
    e->layer = layer;
    e->cls = cls;
    e->codelet = d->codelet;
    e->device = -1;
    size_t sizes[HX_TASK_MAX_BUFFERS];
    for (int i = 0; i < d->nbuffers; i++)
        sizes[i] = hx_buffer_size(d->buffers[i]);
    e->flops = d->codelet->flops ? d->codelet->flops(d->args, sizes) : 0;
    e->bytes = d->codelet->bytes ? d->codelet->bytes(d->args, sizes) : 0;

    hx_runtime *rt = b->rt;
    uint32_t capable = hx_sched_capable(rt, d);
    if (b->strategy == HX_PARTITION_AUTO) {
        say(e, "the scheduler decides");
        return;
    }
    if (b->strategy == HX_PARTITION_COLOCATED) {
        const class_map *gm = &maps[HX_CLASS_GEMM];
        uint32_t gemm = 0;
        for (int i = 0; i < gm->ntiers && !gemm; i++)
            gemm = devices_in(rt, gm->tiers[i]);
        if (capable & gemm) {
            e->prefer = capable & gemm;
            say(e, "with the GEMMs (%s)", e->cls == HX_CLASS_GEMM ? "their device" : "the weights' device");
        } else {
            say(e, "the GEMMs' device cannot run %s; ", d->codelet->name);
            affinity(rt, e, capable);
        }
    } else if (b->strategy == HX_PARTITION_LAYERS) {
        /* Stage of the layer; the embedding goes with the first layer,
         * the output with the last. */
        uint32_t L = b->n_layer ? b->n_layer : 1;
        uint32_t l = layer < 0 ? 0 : (uint32_t)layer >= L ? L - 1 : (uint32_t)layer;
        int stage = (int)((uint64_t)l * (uint64_t)rt->ndevices / L);
        uint32_t first = (uint32_t)(((uint64_t)stage * L + (uint64_t)rt->ndevices - 1) / (uint64_t)rt->ndevices);
        uint32_t last = (uint32_t)(((uint64_t)(stage + 1) * L + (uint64_t)rt->ndevices - 1) / (uint64_t)rt->ndevices) - 1;
        if (capable & (1u << stage)) {
            e->prefer = 1u << stage;
            say(e, "stage of layers %u-%u", first, last);
        } else {
            say(e, "stage dev %d cannot run %s; ", stage, d->codelet->name);
            affinity(rt, e, capable);
        }
    } else {
        affinity(rt, e, capable);
    }
    e->device = first_bit(e->prefer);
}

static hx_status partition_plan(hx_model *m, const struct hx_plan **out);

hx_status hx_plan_get_locked(hx_model *m, const hx_batch_shape *b, const struct hx_plan **out)
{
    hx_status s = partition_plan(m, out);
    if (s == HX_OK && b && m->rt->sched.policy->placement != HX_PLACE_NONE)
        s = hx_placement_get(m, b, *out, out);
    return s;
}

static hx_status partition_plan(hx_model *m, const struct hx_plan **out)
{
    if (m->plan) {
        *out = m->plan;
        return HX_OK;
    }
    builder b = {.rt = m->rt, .strategy = m->partition, .n_layer = m->info.n_layer, .cap = 32};
    b.plan = malloc(sizeof *b.plan + b.cap * sizeof b.plan->e[0]);
    if (!b.plan)
        return hx_error(HX_ERR_NO_MEMORY, "partition plan");
    b.plan->n = 0;
    /* A decode step at the start of a sequence: the graph's shape is the
     * same for every batch, only the costs grow with it. */
    hx_batch_shape shape = {.act = hx_model_act_for(m, 1), .T = 1, .S = 1, .max_blocks = 1, .n_out = 1};
    hx_status s = hx_llama_emit(m, &shape, NULL, sink, &b);
    if (s == HX_OK)
        s = b.status;
    if (s) {
        free(b.plan);
        return s;
    }
    m->plan = b.plan;
    *out = m->plan;
    return HX_OK;
}

size_t hx_model_plan_size(hx_model *m)
{
    if (hx_handle_check(m, HX_HANDLE_MODEL, "hx_model_plan_size"))
        return 0;
    const struct hx_plan *p = NULL;
    pthread_mutex_lock(&m->eval_lock);
    hx_status s = hx_plan_get_locked(m, NULL, &p);
    pthread_mutex_unlock(&m->eval_lock);
    return s == HX_OK && p ? p->n : 0;
}

static hx_status plan_get(hx_model *m, size_t i, hx_plan_task *out)
{
    hx_status s = hx_handle_check_call(m, HX_HANDLE_MODEL, out, "hx_model_plan_get");
    if (s)
        return s;
    const struct hx_plan *p = NULL;
    pthread_mutex_lock(&m->eval_lock);
    s = hx_plan_get_locked(m, NULL, &p);
    /* Under a planning policy: the plan of the last step evaluated. */
    if (s == HX_OK && hx_placement_last(m))
        p = hx_placement_last(m);
    pthread_mutex_unlock(&m->eval_lock);
    if (s || !p)
        return s ? s : hx_error(HX_ERR_STATE, "no partition plan");
    if (i >= p->n)
        return hx_error(HX_ERR_RANGE, "hx_model_plan_get: task %zu of %zu", i, p->n);
    const hx_plan_entry *e = &p->e[i];
    memset(out, 0, sizeof *out);
    out->layer = e->layer;
    snprintf(out->op, sizeof out->op, "%s", e->codelet->name ? e->codelet->name : "");
    snprintf(out->task_class, sizeof out->task_class, "%s", hx_task_class_str(e->cls));
    out->flops = e->flops;
    out->bytes = e->bytes;
    out->device = e->device;
    out->prefer = e->prefer;
    memcpy(out->reason, e->reason, sizeof out->reason);
    return HX_OK;
}

hx_status hx_model_plan_get(hx_model *m, size_t i, hx_plan_task *out)
{
    hx_api_enter();
    return hx_api_leave(plan_get(m, i, out));
}
