/* The CPU device: a team of threads (pinned to cores through hwloc when
 * asked).  A task runs on the whole team, cut into shares, so one
 * layer's GEMV uses every core. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices/cpu_layout.h"
#include "kernels_cpu/cpu_kernels.h"
#include "runtime/device.h"
#include "runtime/error.h"
#include "runtime/threadpool.h"
#include "runtime/topology.h"

typedef struct {
    int nthreads;
    int pin;
    void *topology;
    hx_team *team;
    void *scratch; /* grows to the largest need seen; used by one task at a time */
    size_t scratch_size;
} cpu_state;

typedef struct {
    const hx_exec *x;
    int (*fn)(const hx_cpu_call *);
    void *scratch;
    _Atomic int status;
} cpu_job;

static void cpu_share(void *ctx, int ith, int nth)
{
    cpu_job *job = ctx;
    hx_cpu_call call = {
        .ith = ith,
        .nth = nth,
        .buffers = job->x->handles,
        .sizes = job->x->sizes,
        .args = job->x->args,
        .scratch = job->scratch,
        .layouts = job->x->cpu_layouts,
    };
    int rc = job->fn(&call);
    if (rc) {
        int expected = 0;
        atomic_compare_exchange_strong(&job->status, &expected, rc);
    }
}

/* More shares than threads, so that a thread slowed by another process on
 * its core leaves its work to the others instead of holding them up; but
 * only two each, since every share is a claim and a count on lines the
 * threads pass between their cores, and a longer stream of weights for
 * the prefetchers.  Two a thread against four, 30 alternating runs of 2
 * threads at HX_SIMD=avx2: tiny Q4_K_M tg64 3000 -> 3120 t/s, tiny F16
 * pp128 5845 -> 5953. */
static int shares(const cpu_state *st) { return 2 * st->nthreads; }

/* A built-in op's phase that one thread does in about the time the team
 * takes to start and finish a run (a wake-up seen, chunks claimed, the
 * last one waited for: a few microseconds) runs on the worker's own
 * thread as one share: a decode step's norms, residual adds, RoPE and KV
 * stores, and a matmul's one-token activation quantization.  The built-in
 * kernels give the same bits however their work is shared; a codelet of
 * the application's is always cut into the team's shares, as hetero.h
 * promises. */
#define SMALL_BYTES (48u << 10)
#define SMALL_FLOPS 65536.0
#define SMALL_PREPARE 16384 /* elements */

static int small_task(const hx_exec *x) { return x->op >= 0 && x->bytes <= SMALL_BYTES && x->flops <= SMALL_FLOPS; }
static int small_prepare(const hx_exec *x);

static void run_phase(cpu_state *st, cpu_job *job, int nth)
{
    if (nth == 1)
        cpu_share(job, 0, 1);
    else
        hx_team_run(st->team, cpu_share, job, nth);
}

static hx_status cpu_run(hx_device *d, const hx_exec *x)
{
    cpu_state *st = d->impl;
    const hx_codelet *cl = x->codelet;
    const int nth = shares(st);
    size_t need = cl->cpu_scratch ? cl->cpu_scratch(x->args, x->sizes, nth) : 0;
    if (need > st->scratch_size) {
        void *p = NULL;
        if (posix_memalign(&p, 64, need) != 0)
            return hx_error(HX_ERR_NO_MEMORY, "CPU scratch of %zu bytes for '%s'", need, cl->name);
        free(st->scratch);
        st->scratch = p;
        st->scratch_size = need;
    }
    cpu_job job = {.x = x, .scratch = st->scratch};
    atomic_init(&job.status, 0);
    const int alone = small_task(x);
    if (cl->cpu_prepare) {
        job.fn = cl->cpu_prepare;
        run_phase(st, &job, alone || small_prepare(x) ? 1 : nth);
    }
    if (atomic_load(&job.status) == 0) {
        job.fn = cl->cpu;
        run_phase(st, &job, alone ? 1 : nth);
    }
    int rc = atomic_load(&job.status);
    if (rc == 0)
        return HX_OK;
    hx_status s = rc < 0 ? (hx_status)rc : HX_ERR_DEVICE;
    /* Shares run on other threads, whose error text does not reach this
     * one: the status says what went wrong. */
    hx_error(s, "CPU implementation of '%s' failed: %s", cl->name,
             s == HX_ERR_RANGE ? "an index outside its table (a token id, or KV metadata: slot, position, sequence or block)"
             : s == HX_ERR_UNSUPPORTED ? "a type or shape it does not handle"
             : s == HX_ERR_INVALID_ARG ? "impossible arguments"
                                       : hx_status_str(s));
    return s;
}

/* The CPU implementations of the built-in ops (kernels_cpu/). */
static const struct {
    int (*run)(const hx_cpu_call *call);
    int (*prepare)(const hx_cpu_call *call);
    size_t (*scratch)(const void *args, const size_t *sizes, int nth);
    uint64_t (*prepare_elems)(const void *args); /* the elements `prepare` converts */
} cpu_op_impls[HX_OP_COUNT] = {
    [HX_OP_VECTOR_ADD] = {.run = hx_cpu_vector_add},
    [HX_OP_GEMM_F32] = {.run = hx_cpu_gemm_f32},
    [HX_OP_GET_ROWS] = {.run = hx_cpu_get_rows},
    [HX_OP_RMSNORM] = {.run = hx_cpu_rmsnorm},
    [HX_OP_MATMUL] = {.run = hx_cpu_matmul, .prepare = hx_cpu_matmul_prepare, .scratch = hx_cpu_matmul_scratch,
                      .prepare_elems = hx_cpu_matmul_prepare_elems},
    [HX_OP_ROPE] = {.run = hx_cpu_rope},
    [HX_OP_KV_STORE] = {.run = hx_cpu_kv_store},
    [HX_OP_ATTENTION] = {.run = hx_cpu_attention, .prepare = hx_cpu_attention_prepare,
                         .scratch = hx_cpu_attention_scratch},
    [HX_OP_ADD] = {.run = hx_cpu_add},
    [HX_OP_SWIGLU] = {.run = hx_cpu_swiglu},
    [HX_OP_KV_SHIFT] = {.run = hx_cpu_kv_shift, .scratch = hx_cpu_kv_shift_scratch},
    [HX_OP_MATMUL_MULTI] = {.run = hx_cpu_matmul_multi, .prepare = hx_cpu_matmul_multi_prepare,
                            .scratch = hx_cpu_matmul_multi_scratch,
                            .prepare_elems = hx_cpu_matmul_multi_prepare_elems},
    [HX_OP_ATTENTION_PART] = {.run = hx_cpu_attention_part, .prepare = hx_cpu_attention_part_prepare,
                              .scratch = hx_cpu_attention_part_scratch},
    [HX_OP_ATTN_MERGE] = {.run = hx_cpu_attn_merge},
    [HX_OP_SCALE] = {.run = hx_cpu_scale},
    [HX_OP_GEGLU] = {.run = hx_cpu_geglu},
    [HX_OP_ADD_GATED] = {.run = hx_cpu_add_gated},
    [HX_OP_MOE_ROUTE] = {.run = hx_cpu_moe_route},
    [HX_OP_MOE_GATE_UP] = {.run = hx_cpu_moe_gate_up, .prepare = hx_cpu_moe_gate_up_prepare,
                           .scratch = hx_cpu_moe_gate_up_scratch, .prepare_elems = hx_cpu_moe_gate_up_prepare_elems},
    [HX_OP_MOE_DOWN] = {.run = hx_cpu_moe_down, .prepare = hx_cpu_moe_down_prepare, .scratch = hx_cpu_moe_down_scratch,
                        .prepare_elems = hx_cpu_moe_down_prepare_elems},
};

/* A built-in op's first phase that is small enough to run alone; another
 * codelet's always runs on the team. */
static int small_prepare(const hx_exec *x)
{
    if (x->op < 0 || x->op >= HX_OP_COUNT || !cpu_op_impls[x->op].prepare_elems)
        return 0;
    return cpu_op_impls[x->op].prepare_elems(x->args) <= SMALL_PREPARE;
}

static int cpu_bind_op(hx_device *d, hx_op op, hx_codelet *impl)
{
    impl->cpu = cpu_op_impls[op].run;
    impl->cpu_prepare = cpu_op_impls[op].prepare;
    impl->cpu_scratch = cpu_op_impls[op].scratch;
    return impl->cpu != NULL;
}

static int cpu_can_run(hx_device *d, const hx_codelet *cl) { return cl->cpu != NULL; }

static hx_status cpu_worker_start(hx_device *d)
{
    cpu_state *st = d->impl;
    hx_status s = hx_team_create(st->nthreads, st->topology, st->pin, &st->team);
    if (s)
        return s;
    return hx_team_pin_self(st->team, 0);
}

static void cpu_worker_stop(hx_device *d)
{
    cpu_state *st = d->impl;
    hx_team_destroy(st->team);
    st->team = NULL;
}

static void cpu_destroy(hx_device *d)
{
    cpu_state *st = d->impl;
    free(st->scratch);
    free(st);
}

static hx_status cpu_discover(hx_runtime *rt, const hx_discover_options *o);

static const hx_device_selector cpu_selectors[] = {{"cpu", -1, 0}, {NULL, 0, 0}};

const hx_device_ops hx_cpu_ops = {
    .name = "cpu",
    .family = HX_FAMILY_CPU,
    .selectors = cpu_selectors,
    .discover = cpu_discover,
    .destroy = cpu_destroy,
    .bind_op = cpu_bind_op,
    .can_run = cpu_can_run,
    .run = cpu_run,
    .lay_out_weight = hx_cpu_lay_out_weight,
    .worker_start = cpu_worker_start,
    .worker_stop = cpu_worker_stop,
};

static hx_status cpu_discover(hx_runtime *rt, const hx_discover_options *o)
{
    hx_topology_info topo;
    hx_status s = hx_runtime_topology(rt, &topo);
    if (s)
        return s;
    cpu_state *st = calloc(1, sizeof *st);
    if (!st)
        return hx_error(HX_ERR_NO_MEMORY, "CPU device");
    /* One thread per core the process may run on: a team larger than its
     * affinity mask (taskset, a container's cpuset) would time-share
     * cores and wait on its own descheduled members. */
    int usable = hx_topology_usable_cores(o->topology, NULL, 0);
    st->nthreads = o->cpu_threads > 0 ? o->cpu_threads : usable > 0 ? usable : topo.cores > 0 ? topo.cores : 1;
    st->pin = o->pin_threads;
    st->topology = o->topology;
    hx_device_info info = {0};
    snprintf(info.name, sizeof info.name, "%s", hx_topology_cpu_name(o->topology));
    snprintf(info.vendor, sizeof info.vendor, "%s", "host");
    snprintf(info.platform, sizeof info.platform, "%s", "hwloc");
    snprintf(info.version, sizeof info.version, "%d threads%s", st->nthreads, st->pin ? ", pinned" : "");
    info.family = HX_FAMILY_CPU;
    info.kind = HX_KIND_CPU;
    info.compute_units = st->nthreads;
    info.global_mem_bytes = topo.memory_bytes;
    info.local_mem_bytes = topo.l2_bytes;
    info.unified_memory = 1;
    info.numa_node = hx_topology_cpu_numa(o->topology);
    s = hx_runtime_add_device(rt, &info, &hx_cpu_ops, st);
    if (s)
        free(st);
    return s;
}
