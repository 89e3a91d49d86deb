/* Scheduling: every policy computes the same results on CPU + PoCL (as an
 * emulated FPGA), static follows the plan, ws steals, dmda rebalances,
 * injected failures are retried and a failing device retired, the trace
 * is valid JSON with one event per task run. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "quantize/synthetic.h"
#include "text/tokenizer.h"
#include "runtime/perfmodel.h"
#include "runtime/runtime.h"
#include "runtime/sched_cores.h"
#include "runtime/task.h"
#include "tests/cl_test.h"

static const char *const policies[] = {"eager", "static", "ws", "dmda"};
#define NPOL 4

static char tmpdir[64];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/hx-sched-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void remove_tmpdir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

/* CPU + PoCL as an FPGA, with models kept under the test's directory. */
static hx_runtime *open_hetero(const char *sched, const char *inject, const char *devices)
{
    hx_runtime *rt = NULL;
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = devices ? devices : "cpu,fpga";
    o.fpga_emulation = "pocl";
    o.cpu_threads = 2;
    o.sched = sched;
    o.inject = inject ? inject : "";
    o.trace = "";
    char dir[128];
    snprintf(dir, sizeof dir, "%s/perfmodels", tmpdir);
    o.perfmodel_dir = dir;
    HX_ASSERT_OK(hx_runtime_open(&rt, &o));
    return rt;
}

static int fpga_of(hx_runtime *rt)
{
    for (int i = 0; i < hx_runtime_device_count(rt); i++) {
        hx_device_info d;
        HX_ASSERT_OK(hx_runtime_device_info(rt, i, &d));
        if (d.kind == HX_KIND_FPGA)
            return i;
    }
    ck_abort_msg("no emulated FPGA (PoCL): %s", hx_runtime_absence_reason(rt, HX_FAMILY_OPENCL));
    return -1;
}

/* ---- a DAG of the built-in codelets ------------------------------------- */

enum { CHAINS = 4, STEPS = 12, N = 2048, GM = 8, GN = 64, GK = 96 };

typedef struct {
    hx_buffer *acc[CHAINS][2], *x, *A, *B, *C[CHAINS];
    float xs[N], accs[CHAINS][N], As[GM * GK], Bs[GN * GK];
    hx_task *tasks[CHAINS * (STEPS + 1)];
    uint32_t prefer[CHAINS * (STEPS + 1)];
    int ntasks;
} dag;

/* CHAINS independent chains of vector_add steps (acc += x), each ending in
 * a gemm_f32 of the chain's own weights; task i prefers device i % 2. */
static void dag_submit(hx_runtime *rt, dag *g, int pin_none)
{
    memset(g, 0, sizeof *g);
    hx_cl_test_random(g->xs, N, 1);
    hx_cl_test_random(g->As, GM * GK, 2);
    hx_cl_test_random(g->Bs, GN * GK, 3);
    g->x = hx_cl_test_buffer(rt, g->xs, sizeof g->xs);
    g->A = hx_cl_test_buffer(rt, g->As, sizeof g->As);
    g->B = hx_cl_test_buffer(rt, g->Bs, sizeof g->Bs);
    for (int c = 0; c < CHAINS; c++) {
        hx_cl_test_random(g->accs[c], N, 10 + c);
        g->acc[c][0] = hx_cl_test_buffer(rt, g->accs[c], sizeof g->accs[c]);
        HX_ASSERT_OK(hx_buffer_create(rt, sizeof g->accs[c], &g->acc[c][1]));
        HX_ASSERT_OK(hx_buffer_create(rt, sizeof(float) * GM * GN, &g->C[c]));
    }
    hx_args_vector_add va = {N};
    hx_args_gemm_f32 gm = {GM, GN, GK};
    for (int s = 0; s <= STEPS; s++)
        for (int c = 0; c < CHAINS; c++) {
            int i = g->ntasks;
            hx_task_desc d = {.device = -1, .prefer = pin_none ? 0 : 1u << (i % 2)};
            if (s < STEPS) {
                d.codelet = hx_codelet_builtin("vector_add");
                d.nbuffers = 3;
                d.buffers[0] = g->acc[c][s % 2];
                d.buffers[1] = g->x;
                d.buffers[2] = g->acc[c][(s + 1) % 2];
                d.modes[0] = HX_R;
                d.modes[1] = HX_R;
                d.modes[2] = HX_W;
                d.args = &va;
                d.args_size = sizeof va;
            } else {
                /* The chain's result (N >= GM*GK floats) stands in for A. */
                d.codelet = hx_codelet_builtin("gemm_f32");
                d.nbuffers = 3;
                d.buffers[0] = g->acc[c][STEPS % 2];
                d.buffers[1] = g->B;
                d.buffers[2] = g->C[c];
                d.modes[0] = HX_R;
                d.modes[1] = HX_R;
                d.modes[2] = HX_W;
                d.args = &gm;
                d.args_size = sizeof gm;
            }
            g->prefer[i] = d.prefer;
            HX_ASSERT_OK(hx_task_submit(rt, &d, &g->tasks[g->ntasks++]));
        }
}

/* Checks the results against a host computation; returns how many tasks
 * ran on each device (counts[2]) and releases everything. */
static void dag_check(hx_runtime *rt, dag *g, int counts[2], int expect_preferred)
{
    HX_ASSERT_OK(hx_runtime_wait_all(rt));
    counts[0] = counts[1] = 0;
    for (int i = 0; i < g->ntasks; i++) {
        int d = hx_task_device(g->tasks[i]);
        ck_assert_int_ge(d, 0);
        if (d < 2)
            counts[d]++;
        if (expect_preferred)
            ck_assert_msg(g->prefer[i] & (1u << d), "task %d ran on %d, prefers 0x%x", i, d, g->prefer[i]);
        HX_ASSERT_OK(hx_task_wait(g->tasks[i]));
    }
    for (int c = 0; c < CHAINS; c++) {
        float *acc = g->accs[c];
        for (int s = 0; s < STEPS; s++)
            for (int i = 0; i < N; i++)
                acc[i] = acc[i] + g->xs[i];
        float *r, *C;
        HX_ASSERT_OK(hx_buffer_acquire(g->acc[c][STEPS % 2], HX_R, (void **)&r));
        for (int i = 0; i < N; i++)
            ck_assert_msg(r[i] == acc[i], "chain %d elem %d: %g vs %g", c, i, r[i], acc[i]);
        HX_ASSERT_OK(hx_buffer_acquire(g->C[c], HX_R, (void **)&C));
        for (int m = 0; m < GM; m++)
            for (int n = 0; n < GN; n++) {
                double ref = 0;
                for (int k = 0; k < GK; k++)
                    ref += (double)acc[m * GK + k] * g->Bs[n * GK + k];
                ck_assert_msg(fabs(C[m * GN + n] - ref) <= 1e-4 * GK, "chain %d C[%d][%d]: %g vs %g", c, m, n,
                              C[m * GN + n], ref);
            }
        hx_buffer_destroy(g->acc[c][0]);
        hx_buffer_destroy(g->acc[c][1]);
        hx_buffer_destroy(g->C[c]);
    }
    hx_buffer_destroy(g->x);
    hx_buffer_destroy(g->A);
    hx_buffer_destroy(g->B);
}

START_TEST(every_policy_computes_the_dag)
{
    make_tmpdir();
    for (int p = 0; p < NPOL; p++) {
        const char *pol = policies[p];
        int is_static = !strcmp(pol, "static");
        hx_runtime *rt = open_hetero(pol, NULL, NULL);
        ck_assert_int_eq(fpga_of(rt), 1);
        static dag g;
        dag_submit(rt, &g, 0);
        int counts[2];
        dag_check(rt, &g, counts, is_static);
        fprintf(stderr, "  %-6s cpu %d tasks, fpga %d tasks\n", is_static ? "static" : pol, counts[0], counts[1]);
        if (is_static) {
            ck_assert_int_eq(counts[0], CHAINS * (STEPS + 1) / 2);
            ck_assert_int_eq(counts[1], CHAINS * (STEPS + 1) / 2);
        }
        hx_runtime_stats st;
        hx_runtime_stats_get(rt, &st);
        ck_assert_uint_eq(st.tasks_done, CHAINS * (STEPS + 1));
        ck_assert_uint_eq(st.tasks_failed, 0);
        hx_runtime_close(rt);
    }
    remove_tmpdir();
}
END_TEST

/* Holds the CPU until the test opens the gate. */
static _Atomic int gate_open;
static int gate_cpu(const hx_cpu_call *c)
{
    while (!atomic_load(&gate_open))
        ;
    return 0;
}
static const hx_codelet gate = {.name = "test_gate", .cpu = gate_cpu};

static void close_gate_on_cpu(hx_runtime *rt, hx_buffer *b)
{
    atomic_store(&gate_open, 0);
    hx_task_desc d = {.codelet = &gate, .nbuffers = 1, .buffers = {b}, .modes = {HX_RW}, .device = 0};
    HX_ASSERT_OK(hx_task_submit(rt, &d, NULL));
}

/* Waits (at most 20 s) until `migrations` tasks moved; 0 on time out. */
static int wait_for_migrations(hx_runtime *rt, uint64_t n)
{
    for (int i = 0; i < 20000; i++) {
        hx_runtime_stats st;
        hx_runtime_stats_get(rt, &st);
        if (st.migrations >= n)
            return 1;
        usleep(1000);
    }
    return 0;
}

/* Independent gemm_f32 tasks that all prefer the CPU while the CPU is held:
 * the emulated FPGA has to take them. */
static void submit_gemms(hx_runtime *rt, hx_buffer *A, hx_buffer *B, hx_buffer **C, int n, hx_task **t)
{
    hx_args_gemm_f32 gm = {GM, GN, GK};
    for (int i = 0; i < n; i++) {
        hx_task_desc d = {.codelet = hx_codelet_builtin("gemm_f32"), .nbuffers = 3, .buffers = {A, B, C[i]},
                          .modes = {HX_R, HX_R, HX_W}, .args = &gm, .args_size = sizeof gm, .device = -1,
                          .prefer = 1};
        HX_ASSERT_OK(hx_task_submit(rt, &d, &t[i]));
    }
}

static void check_gemms(hx_runtime *rt, const float *As, const float *Bs, hx_buffer **C, int n, hx_task **t,
                        int *on_fpga)
{
    HX_ASSERT_OK(hx_runtime_wait_all(rt));
    *on_fpga = 0;
    for (int i = 0; i < n; i++) {
        *on_fpga += hx_task_device(t[i]) == 1;
        HX_ASSERT_OK(hx_task_wait(t[i]));
        float *c;
        HX_ASSERT_OK(hx_buffer_acquire(C[i], HX_R, (void **)&c));
        for (int m = 0; m < GM; m++)
            for (int k = 0; k < GN; k++) {
                double ref = 0;
                for (int j = 0; j < GK; j++)
                    ref += (double)As[m * GK + j] * Bs[k * GK + j];
                ck_assert_msg(fabs(c[m * GN + k] - ref) <= 1e-4 * GK, "gemm %d: %g vs %g", i, c[m * GN + k], ref);
            }
    }
}

START_TEST(ws_steals_from_a_busy_device)
{
    make_tmpdir();
    hx_runtime *rt = open_hetero("ws", NULL, NULL);
    enum { NT = 8 };
    float As[GM * GK], Bs[GN * GK];
    hx_cl_test_random(As, GM * GK, 4);
    hx_cl_test_random(Bs, GN * GK, 5);
    hx_buffer *A = hx_cl_test_buffer(rt, As, sizeof As), *B = hx_cl_test_buffer(rt, Bs, sizeof Bs), *C[NT], *g;
    for (int i = 0; i < NT; i++)
        HX_ASSERT_OK(hx_buffer_create(rt, sizeof(float) * GM * GN, &C[i]));
    HX_ASSERT_OK(hx_buffer_create(rt, 64, &g));
    close_gate_on_cpu(rt, g);
    hx_task *t[NT];
    submit_gemms(rt, A, B, C, NT, t);
    int stole = wait_for_migrations(rt, 1);
    atomic_store(&gate_open, 1);
    ck_assert_msg(stole, "the idle FPGA stole nothing from the held CPU");
    int on_fpga;
    check_gemms(rt, As, Bs, C, NT, t, &on_fpga);
    ck_assert_int_ge(on_fpga, 1);
    for (int i = 0; i < NT; i++)
        hx_buffer_destroy(C[i]);
    hx_buffer_destroy(A);
    hx_buffer_destroy(B);
    hx_buffer_destroy(g);
    hx_runtime_close(rt);
    remove_tmpdir();
}
END_TEST

/* dmda: the model says the CPU is 400x faster, so every task queues there
 * (unless the test thread is held up 20 ms between two submissions); then
 * the CPU is held far past its estimate and the idle FPGA pulls the queue. */
START_TEST(dmda_moves_work_off_a_stalled_device)
{
    make_tmpdir();
    hx_runtime *rt = open_hetero("dmda", NULL, NULL);
    enum { NT = 6 };
    const hx_codelet *gc = hx_codelet_builtin("gemm_f32");
    double flops = 2.0 * GM * GN * GK, bytes = 4.0 * (GM * GK + GN * GK + GM * GN);
    for (int i = 0; i < 10; i++) {
        hx_perfmodel_record(rt->sched.pm, gc, 0, flops, bytes, 50e-6);
        hx_perfmodel_record(rt->sched.pm, gc, 1, flops, bytes, 20e-3);
        hx_perfmodel_record(rt->sched.pm, &gate, 0, 0, 64, 1e-6);
    }
    float As[GM * GK], Bs[GN * GK];
    hx_cl_test_random(As, GM * GK, 6);
    hx_cl_test_random(Bs, GN * GK, 7);
    hx_buffer *A = hx_cl_test_buffer(rt, As, sizeof As), *B = hx_cl_test_buffer(rt, Bs, sizeof Bs), *C[NT], *g;
    for (int i = 0; i < NT; i++)
        HX_ASSERT_OK(hx_buffer_create(rt, sizeof(float) * GM * GN, &C[i]));
    HX_ASSERT_OK(hx_buffer_create(rt, 64, &g));
    close_gate_on_cpu(rt, g);
    hx_task *t[NT];
    submit_gemms(rt, A, B, C, NT, t);
    int moved = wait_for_migrations(rt, 1);
    atomic_store(&gate_open, 1);
    ck_assert_msg(moved, "nothing moved off the stalled CPU");
    int on_fpga;
    check_gemms(rt, As, Bs, C, NT, t, &on_fpga);
    ck_assert_int_ge(on_fpga, 1);
    for (int i = 0; i < NT; i++)
        hx_buffer_destroy(C[i]);
    hx_buffer_destroy(A);
    hx_buffer_destroy(B);
    hx_buffer_destroy(g);
    hx_runtime_close(rt);
    remove_tmpdir();
}
END_TEST

/* A task of a known length: 300 us on the CPU; on the FPGA it would run
 * the "basic" program's vector_add (the emulated bitstream holds it). */
static int sleepy_cpu(const hx_cpu_call *c)
{
    struct timespec ts = {0, 300000};
    nanosleep(&ts, NULL);
    return 0;
}
static int sleepy_cl(const void *args, const size_t *sizes, hx_cl_launch *l)
{
    static const uint64_t n = 16;
    *l = (hx_cl_launch){.kernel = "vector_add", .work_dim = 1, .global = {16}, .nargs = 4};
    for (int i = 0; i < 3; i++)
        l->arg[i].buffer = i;
    l->arg[3].buffer = -1;
    l->arg[3].size = sizeof n;
    l->arg[3].value = &n;
    return 0;
}
static const hx_codelet sleepy = {.name = "test_sleepy", .cpu = sleepy_cpu, .cl_program = "basic",
                                  .cl_launch = sleepy_cl};

/* Where dmda would put a task now: pushed and taken back under the
 * scheduler's lock, so no worker runs it and no measurement moves. */
static int dmda_choice(hx_runtime *rt, const hx_task_desc *d)
{
    hx_task *t = calloc(1, sizeof *t);
    t->desc = *d;
    t->rt = rt;
    t->flops = -1;
    t->queued_on = -1;
    t->capable = hx_sched_capable(rt, d);
    pthread_mutex_lock(&rt->sched.lock);
    int dev = rt->sched.policy->push(&rt->sched, t);
    ck_assert_int_eq(t->queued_on, dev);
    hx_sched_dequeue(&rt->sched, t);
    pthread_mutex_unlock(&rt->sched.lock);
    free(t);
    return dev;
}

/* One measurement 100x too slow (a preempted thread) must not send the
 * work elsewhere: the estimate is a median.  With a mean, one 30 ms sample
 * among fifteen of 300 us would make the CPU look like 2.2 ms, slower than
 * the FPGA's 1 ms; a window that is mostly slow samples does move it. */
START_TEST(one_outlier_does_not_change_placement)
{
    make_tmpdir();
    hx_runtime *rt = open_hetero("dmda", NULL, NULL);
    hx_buffer *x;
    HX_ASSERT_OK(hx_buffer_create(rt, 64 * sizeof(float), &x));
    hx_task_desc d = {.codelet = &sleepy, .nbuffers = 3, .buffers = {x, x, x}, .modes = {HX_R, HX_R, HX_RW},
                      .device = -1};
    ck_assert_uint_eq(hx_sched_capable(rt, &d), 3);
    const double size = 3.0 * 64 * sizeof(float);
    for (int i = 0; i < 15; i++) {
        hx_perfmodel_record(rt->sched.pm, &sleepy, 0, 0, size, 300e-6);
        hx_perfmodel_record(rt->sched.pm, &sleepy, 1, 0, size, 1e-3);
    }
    ck_assert_int_eq(dmda_choice(rt, &d), 0);
    hx_perfmodel_record(rt->sched.pm, &sleepy, 0, 0, size, 30e-3);
    double est;
    ck_assert_int_eq(hx_perfmodel_estimate(rt->sched.pm, &sleepy, 0, 0, size, &est), 1);
    ck_assert_msg(est == (double)(float)300e-6, "CPU estimate %g s after one outlier", est);
    ck_assert_int_eq(dmda_choice(rt, &d), 0);
    /* The tasks still run where they are placed, and correctly. */
    hx_task *t;
    HX_ASSERT_OK(hx_task_submit(rt, &d, &t));
    HX_ASSERT_OK(hx_task_wait(t));
    for (int i = 0; i < HX_PM_WINDOW / 2 + 1; i++)
        hx_perfmodel_record(rt->sched.pm, &sleepy, 0, 0, size, 30e-3);
    ck_assert_int_eq(dmda_choice(rt, &d), 1);
    hx_buffer_destroy(x);
    hx_runtime_close(rt);
    remove_tmpdir();
}
END_TEST

/* A task for dmda's queues that no worker will see (s->lock held). */
static hx_task *queued_task(hx_runtime *rt, const hx_task_desc *d, int dev, double expected)
{
    hx_task *t = calloc(1, sizeof *t);
    t->desc = *d;
    t->rt = rt;
    t->flops = -1;
    t->queued_on = -1;
    t->capable = hx_sched_capable(rt, d);
    t->expected = expected;
    hx_sched_enqueue(&rt->sched, dev, t);
    return t;
}

/* The CPU device and PoCL (the emulated FPGA) compute on the same cores:
 * with the CPU's queue full, the FPGA is not an idle device in parallel.
 * A task twice as slow there stays on the CPU (finishing after the CPU's
 * backlog either way), and the idle FPGA does not pull from the CPU's
 * queue; a task faster there goes there.  Independent devices would have
 * sent it to the FPGA: 0.6 ms there against 1.2 + 0.3 ms here. */
START_TEST(dmda_counts_shared_cores_once)
{
    make_tmpdir();
    hx_runtime *rt = open_hetero("dmda", NULL, NULL);
    int fpga = fpga_of(rt);
    ck_assert_uint_eq(hx_sched_cores_mask(rt, 0), 1u | (1u << fpga));
    hx_buffer *x;
    HX_ASSERT_OK(hx_buffer_create(rt, 64 * sizeof(float), &x));
    hx_task_desc d = {.codelet = &sleepy, .nbuffers = 3, .buffers = {x, x, x}, .modes = {HX_R, HX_R, HX_RW},
                      .device = -1, .prefer = 1u << fpga};
    const double size = 3.0 * 64 * sizeof(float);
    for (int i = 0; i < 15; i++) {
        hx_perfmodel_record(rt->sched.pm, &sleepy, 0, 0, size, 300e-6);
        hx_perfmodel_record(rt->sched.pm, &sleepy, fpga, 0, size, 600e-6);
    }
    enum { Q = 4 };
    hx_task *q[Q];
    hx_sched *s = &rt->sched;
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < Q; i++)
        q[i] = queued_task(rt, &d, 0, 300e-6);
    hx_task *probe = queued_task(rt, &d, 0, 0);
    hx_sched_dequeue(s, probe);
    int where = s->policy->push(s, probe);
    hx_sched_dequeue(s, probe);
    hx_task *pulled = s->policy->pop(s, rt->devices[fpga]);
    pthread_mutex_unlock(&s->lock);
    ck_assert_msg(where == 0, "a task 2x slower on the FPGA left the CPU's cores' queue for dev %d", where);
    ck_assert_msg(pulled == NULL, "the FPGA pulled a task it runs 2x slower on the same cores");
    /* Faster on the FPGA (a window of 100 us: the median moves): it goes there. */
    for (int i = 0; i < HX_PM_WINDOW; i++)
        hx_perfmodel_record(rt->sched.pm, &sleepy, fpga, 0, size, 100e-6);
    pthread_mutex_lock(&s->lock);
    where = s->policy->push(s, probe);
    hx_sched_dequeue(s, probe);
    for (int i = 0; i < Q; i++)
        hx_sched_dequeue(s, q[i]);
    pthread_mutex_unlock(&s->lock);
    ck_assert_int_eq(where, fpga);
    for (int i = 0; i < Q; i++)
        free(q[i]);
    free(probe);
    hx_buffer_destroy(x);
    hx_runtime_close(rt);
    remove_tmpdir();
}
END_TEST

/* A device with no measurement for a task's size is sent one to measure,
 * unless what it took for a smaller size already rules it out: at half
 * the size the FPGA took 3 ms where the CPU takes 300 us at the full size.
 * When the smaller size took 50 us there, it is worth measuring. */
START_TEST(dmda_does_not_calibrate_a_device_ruled_out)
{
    make_tmpdir();
    hx_runtime *rt = open_hetero("dmda", NULL, NULL);
    int fpga = fpga_of(rt);
    hx_buffer *x;
    HX_ASSERT_OK(hx_buffer_create(rt, 64 * sizeof(float), &x));
    hx_task_desc d = {.codelet = &sleepy, .nbuffers = 3, .buffers = {x, x, x}, .modes = {HX_R, HX_R, HX_RW},
                      .device = -1, .prefer = 1u << fpga};
    const double size = 3.0 * 64 * sizeof(float);
    for (int i = 0; i < 15; i++)
        hx_perfmodel_record(rt->sched.pm, &sleepy, 0, 0, size, 300e-6);
    double est;
    ck_assert_int_eq(hx_perfmodel_estimate(rt->sched.pm, &sleepy, fpga, 0, size, &est), 0);
    hx_perfmodel_record(rt->sched.pm, &sleepy, fpga, 0, size / 2, 3e-3);
    ck_assert_int_eq(hx_perfmodel_estimate(rt->sched.pm, &sleepy, fpga, 0, size, &est), 0);
    ck_assert_int_eq(dmda_choice(rt, &d), 0);
    hx_perfmodel_record(rt->sched.pm, &sleepy, fpga, 0, size / 2, 50e-6);
    ck_assert_int_eq(hx_perfmodel_estimate(rt->sched.pm, &sleepy, fpga, 0, size, &est), 0);
    ck_assert_int_eq(dmda_choice(rt, &d), fpga);
    hx_buffer_destroy(x);
    hx_runtime_close(rt);
    remove_tmpdir();
}
END_TEST

/* Which devices count as sharing the host's cores. */
START_TEST(shared_cores_are_told_apart)
{
    hx_device_info cpu = {.index = 0, .family = HX_FAMILY_CPU, .kind = HX_KIND_CPU, .unified_memory = 1,
                          .numa_node = 0};
    hx_device_info pocl_fpga = {.index = 1, .family = HX_FAMILY_OPENCL, .kind = HX_KIND_FPGA, .emulated = 1,
                                .unified_memory = 1, .numa_node = 0};
    hx_device_info pocl_cpu = {.index = 2, .family = HX_FAMILY_OPENCL, .kind = HX_KIND_CPU, .unified_memory = 1,
                               .numa_node = -1};
    hx_device_info far_cpu = {.index = 3, .family = HX_FAMILY_OPENCL, .kind = HX_KIND_CPU, .unified_memory = 1,
                              .numa_node = 1};
    hx_device_info gpu = {.index = 4, .family = HX_FAMILY_OPENCL, .kind = HX_KIND_GPU, .numa_node = 0};
    hx_device_info fpga = {.index = 5, .family = HX_FAMILY_OPENCL, .kind = HX_KIND_FPGA, .numa_node = 0};
    hx_device_info cuda = {.index = 6, .family = HX_FAMILY_CUDA, .kind = HX_KIND_GPU, .numa_node = 0};
    hx_device_info pocl_gpu = {.index = 7, .family = HX_FAMILY_OPENCL, .kind = HX_KIND_FPGA, .emulated = 1,
                               .numa_node = 0};
    ck_assert(hx_sched_cores_shared(&cpu, &pocl_fpga));
    ck_assert(hx_sched_cores_shared(&pocl_fpga, &cpu));
    ck_assert(hx_sched_cores_shared(&cpu, &pocl_cpu));
    ck_assert(hx_sched_cores_shared(&pocl_cpu, &far_cpu));
    ck_assert(!hx_sched_cores_shared(&cpu, &far_cpu));
    ck_assert(!hx_sched_cores_shared(&cpu, &gpu));
    ck_assert(!hx_sched_cores_shared(&cpu, &fpga));
    ck_assert(!hx_sched_cores_shared(&cpu, &cuda));
    ck_assert(!hx_sched_cores_shared(&pocl_fpga, &gpu));
    ck_assert(!hx_sched_cores_shared(&cpu, &pocl_gpu));
    ck_assert(hx_sched_cores_shared(&gpu, &gpu));
}
END_TEST

/* ---- failures ------------------------------------------------------------- */

START_TEST(failures_are_retried_with_correct_results)
{
    make_tmpdir();
    const char *pols[] = {"eager", "ws", "dmda"};
    for (int p = 0; p < 3; p++) {
        hx_runtime *rt = open_hetero(pols[p], "kind=fpga,fail=0.3,seed=11;dev=0,fail=0.1,seed=5", NULL);
        static dag g;
        dag_submit(rt, &g, 0);
        int counts[2];
        dag_check(rt, &g, counts, 0);
        hx_runtime_stats st;
        hx_runtime_stats_get(rt, &st);
        hx_device_stats d0, d1;
        HX_ASSERT_OK(hx_device_stats_get(rt, 0, &d0));
        HX_ASSERT_OK(hx_device_stats_get(rt, 1, &d1));
        fprintf(stderr, "  %-6s %llu retries, failures cpu %llu fpga %llu\n", pols[p],
                (unsigned long long)st.retries, (unsigned long long)d0.failures, (unsigned long long)d1.failures);
        ck_assert_uint_eq(st.tasks_failed, 0);
        ck_assert_uint_eq(st.retries, d0.failures + d1.failures);
        ck_assert_uint_gt(d0.failures + d1.failures, 0);
        const char *lf = d0.failures ? d0.last_failure : d1.last_failure;
        ck_assert_msg(strstr(lf, "injected failure"), "last failure: %s", lf);
        hx_runtime_close(rt);
    }
    remove_tmpdir();
}
END_TEST

START_TEST(a_device_that_always_fails_is_retired)
{
    make_tmpdir();
    for (int p = 0; p < NPOL; p++) {
        hx_runtime *rt = open_hetero(policies[p], "kind=fpga,fail=1", NULL);
        static dag g;
        dag_submit(rt, &g, 0);
        int counts[2];
        dag_check(rt, &g, counts, 0);
        hx_runtime_stats st;
        hx_runtime_stats_get(rt, &st);
        hx_device_stats fs;
        HX_ASSERT_OK(hx_device_stats_get(rt, 1, &fs));
        fprintf(stderr, "  %-6s retired: %d, %llu failures; %s\n", policies[p], fs.retired,
                (unsigned long long)fs.failures, fs.last_failure);
        ck_assert_int_eq(counts[1], 0);
        ck_assert_uint_eq(st.tasks_failed, 0);
        /* Static keeps giving it the tasks it prefers, so it must reach the
         * limit; under eager, ws and dmda the CPU may take them first (dmda's
         * choice depends on measured times, so on the machine's load). */
        if (fs.failures >= HX_RETIRE_AFTER) {
            ck_assert_int_eq(fs.retired, 1);
            ck_assert_uint_eq(st.devices_retired, 1);
            ck_assert_uint_eq(fs.failures, HX_RETIRE_AFTER);
            ck_assert_ptr_nonnull(strstr(fs.last_failure, "retired after"));
            ck_assert_ptr_nonnull(strstr(fs.last_failure, "injected failure"));
            /* Nothing may be pinned to it any more. */
            hx_buffer *b;
            HX_ASSERT_OK(hx_buffer_create(rt, 64, &b));
            hx_args_vector_add a = {16};
            hx_task_desc d = {.codelet = hx_codelet_builtin("vector_add"), .nbuffers = 3, .buffers = {b, b, b},
                              .modes = {HX_R, HX_R, HX_RW}, .args = &a, .args_size = sizeof a, .device = 1};
            ck_assert_int_eq(hx_task_submit(rt, &d, NULL), HX_ERR_NO_DEVICE);
            ck_assert_ptr_nonnull(strstr(hx_last_error(), "out of service"));
            hx_buffer_destroy(b);
        } else {
            ck_assert_msg(strcmp(policies[p], "static"), "static must retire the failing device");
        }
        hx_runtime_close(rt);
    }
    remove_tmpdir();
}
END_TEST

START_TEST(the_last_device_is_never_retired)
{
    make_tmpdir();
    hx_runtime *rt = open_hetero("eager", "dev=0,fail=1", "cpu");
    hx_buffer *b;
    HX_ASSERT_OK(hx_buffer_create(rt, 256, &b));
    hx_args_vector_add a = {64};
    for (int i = 0; i < HX_RETIRE_AFTER + 2; i++) {
        hx_task_desc d = {.codelet = hx_codelet_builtin("vector_add"), .nbuffers = 3, .buffers = {b, b, b},
                          .modes = {HX_R, HX_R, HX_RW}, .args = &a, .args_size = sizeof a, .device = -1};
        hx_task *t;
        HX_ASSERT_OK(hx_task_submit(rt, &d, &t));
        ck_assert_int_eq(hx_task_wait(t), HX_ERR_DEVICE);
        ck_assert_ptr_nonnull(strstr(hx_last_error(), "injected failure"));
    }
    ck_assert_int_eq(hx_runtime_wait_all(rt), HX_ERR_DEVICE);
    hx_device_stats ds;
    HX_ASSERT_OK(hx_device_stats_get(rt, 0, &ds));
    ck_assert_int_eq(ds.retired, 0);
    /* Healed, it runs again. */
    HX_ASSERT_OK(hx_device_inject(rt, 0, NULL));
    hx_task_desc ok = {.codelet = hx_codelet_builtin("vector_add"), .nbuffers = 3, .buffers = {b, b, b},
                       .modes = {HX_R, HX_R, HX_RW}, .args = &a, .args_size = sizeof a, .device = -1};
    hx_task *t;
    HX_ASSERT_OK(hx_task_submit(rt, &ok, &t));
    HX_ASSERT_OK(hx_task_wait(t));
    hx_buffer_destroy(b);
    hx_runtime_close(rt);
    remove_tmpdir();
}
END_TEST

START_TEST(bad_injections_get_clear_errors)
{
    make_tmpdir();
    struct {
        const char *spec;
        hx_status s;
        const char *msg;
    } cases[] = {
        {"dev=7,slow=2", HX_ERR_INVALID_ARG, "dev=7"},
        {"dev=0,slow=0.5", HX_ERR_INVALID_ARG, "slow=0.5"},
        {"dev=0,fail=2", HX_ERR_INVALID_ARG, "fail=2"},
        {"kind=quantum,fail=1", HX_ERR_INVALID_ARG, "kind=quantum"},
        {"dev=0", HX_ERR_INVALID_ARG, "without slow= or fail="},
        {"slow=3", HX_ERR_INVALID_ARG, "names one device"},
        {"dev=0,speed=3", HX_ERR_INVALID_ARG, "unknown key 'speed'"},
        {"kind=gpu,slow=2", HX_ERR_NO_DEVICE, "no gpu device"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hx_runtime *rt = NULL;
        hx_runtime_options o = hx_runtime_options_default();
        o.devices = "cpu";
        o.inject = cases[i].spec;
        ck_assert_int_eq(hx_runtime_open(&rt, &o), cases[i].s);
        ck_assert_msg(strstr(hx_last_error(), cases[i].msg), "%s: %s", cases[i].spec, hx_last_error());
        ck_assert_ptr_null(rt);
    }
    /* The environment supplies the default. */
    setenv("HX_INJECT", "dev=0,slow=2;dev=0,fail=0.5,seed=1", 1);
    hx_runtime *rt = NULL;
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = "cpu";
    o.perfmodel_dir = "";
    hx_status s = hx_runtime_open(&rt, &o);
    unsetenv("HX_INJECT");
    HX_ASSERT_OK(s);
    hx_injection bad = {.slow = 1, .fail = -1};
    ck_assert_int_eq(hx_device_inject(rt, 0, &bad), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_device_inject(rt, 3, NULL), HX_ERR_RANGE);
    hx_runtime_close(rt);
    remove_tmpdir();
}
END_TEST

START_TEST(slowdown_shows_in_the_load_monitor)
{
    make_tmpdir();
    hx_runtime *rt = open_hetero("dmda", "dev=0,slow=3", "cpu");
    static float xs[GN * GK];
    hx_cl_test_random(xs, GN * GK, 9);
    hx_buffer *x = hx_cl_test_buffer(rt, xs, sizeof xs), *y;
    HX_ASSERT_OK(hx_buffer_create(rt, sizeof(float) * GM * GN, &y));
    hx_args_gemm_f32 gm = {GM, GN, GK};
    hx_task_desc d = {.codelet = hx_codelet_builtin("gemm_f32"), .nbuffers = 3, .buffers = {x, x, y},
                      .modes = {HX_R, HX_R, HX_W}, .args = &gm, .args_size = sizeof gm, .device = -1};
    for (int i = 0; i < 50; i++)
        HX_ASSERT_OK(hx_task_submit(rt, &d, NULL));
    HX_ASSERT_OK(hx_runtime_wait_all(rt));
    hx_device_stats ds;
    HX_ASSERT_OK(hx_device_stats_get(rt, 0, &ds));
    ck_assert_uint_eq(ds.tasks, 50);
    ck_assert_uint_eq(ds.queue_depth, 0);
    ck_assert(ds.backlog_seconds >= 0);
    ck_assert(ds.recent_busy > 0 && ds.recent_busy <= 1);
    ck_assert(ds.busy_fraction > 0 && ds.busy_fraction <= 1);
    ck_assert(ds.tasks_per_second > 0);
    ck_assert(ds.flops_per_second > 0);
    ck_assert_uint_eq(ds.failures, 0);
    hx_buffer_destroy(x);
    hx_buffer_destroy(y);
    hx_runtime_close(rt);
    /* A slowed device's times are not its own: none were saved. */
    char dir[128];
    snprintf(dir, sizeof dir, "%s/perfmodels", tmpdir);
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = "cpu";
    o.sched = "dmda";
    o.perfmodel_dir = dir;
    HX_ASSERT_OK(hx_runtime_open(&rt, &o));
    double est;
    ck_assert_int_eq(hx_perfmodel_estimate(rt->sched.pm, d.codelet, 0, 2.0 * GM * GN * GK,
                                           4.0 * (GM * GK + GN * GK + GM * GN), &est),
                     0);
    hx_runtime_close(rt);
    remove_tmpdir();
}
END_TEST

/* ---- the model under every policy ----------------------------------------- */

static const hx_synthetic_config cfg = {"sched", 256, 2, 8, 2, 512, 512, "llama", 0};

typedef struct {
    int32_t tok[32];
    int n;
} tokens;

static int collect(void *user, int32_t token, const char *piece)
{
    tokens *t = user;
    if (token >= 0 && t->n < 32)
        t->tok[t->n++] = token;
    return 0;
}

typedef struct {
    float *logits; /* [NPROMPT][V] */
    tokens gen;
    hx_runtime_stats st;
    hx_device_stats dev[2];
} run_result;

#define NPROMPT 12
#define NGEN 10
#define NV HX_TOKENIZER_BYTES_VOCAB

static run_result run_model(const char *model, const char *devices, const char *sched, const char *partition,
                            const char *inject)
{
    run_result r;
    memset(&r, 0, sizeof r);
    hx_runtime *rt = open_hetero(sched, inject, devices);
    hx_model_options mo = hx_model_options_default();
    mo.partition = partition;
    mo.kv_tokens = 256;
    hx_model *m;
    HX_ASSERT_OK(hx_model_load(rt, model, &mo, &m));
    hx_model_info info;
    HX_ASSERT_OK(hx_model_info_get(m, &info));
    ck_assert_uint_eq(info.n_vocab, NV);
    int32_t ids[NPROMPT];
    srand(21);
    ids[0] = 256;
    for (int i = 1; i < NPROMPT; i++)
        ids[i] = rand() % 256;
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(m, &s));
    HX_ASSERT_OK(hx_session_eval(s, ids, NPROMPT, 1));
    r.logits = malloc(sizeof(float) * NPROMPT * NV);
    for (int i = 0; i < NPROMPT; i++)
        memcpy(r.logits + (size_t)i * NV, hx_session_logits(s, i), sizeof(float) * NV);
    hx_session_close(s);
    HX_ASSERT_OK(hx_session_open(m, &s));
    hx_sampling greedy = hx_sampling_default();
    greedy.temperature = 0;
    HX_ASSERT_OK(hx_session_generate(s, ids, NPROMPT, NGEN, &greedy, collect, &r.gen, NULL));
    hx_session_close(s);
    hx_runtime_stats_get(rt, &r.st);
    for (int d = 0; d < hx_runtime_device_count(rt) && d < 2; d++)
        HX_ASSERT_OK(hx_device_stats_get(rt, d, &r.dev[d]));
    hx_model_free(m);
    hx_runtime_close(rt);
    return r;
}

static double rel_l2(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return sqrt(num / den);
}

static void write_test_model(char *path, size_t cap)
{
    snprintf(path, cap, "%s/sched-f16.gguf", tmpdir);
    HX_ASSERT_OK(hx_synthetic_write(path, &cfg, "f16", 42));
}

/* Numerics may differ by device (PoCL kernels vs the CPU's): logits must
 * agree closely and greedy tokens exactly. */
START_TEST(same_logits_whichever_policy_placed_the_tasks)
{
    make_tmpdir();
    char model[128];
    write_test_model(model, sizeof model);
    run_result base = run_model(model, "cpu", "eager", "affinity", NULL);
    ck_assert_int_gt(base.gen.n, 0);
    const char *parts[] = {"affinity", "layers", "auto", "colocated"};
    for (int p = 0; p < NPOL; p++)
        for (int k = 0; k < 4; k++) {
            if (k && strcmp(policies[p], "static") && strcmp(policies[p], "dmda"))
                continue;
            run_result r = run_model(model, "cpu,fpga", policies[p], parts[k], NULL);
            double e = rel_l2(r.logits, base.logits, (size_t)NPROMPT * NV);
            fprintf(stderr, "  %-6s %-8s rel L2 %.3g, tasks cpu %llu fpga %llu\n", policies[p], parts[k], e,
                    (unsigned long long)r.dev[0].tasks, (unsigned long long)r.dev[1].tasks);
            ck_assert_msg(e <= 1e-4, "%s/%s: rel L2 %g", policies[p], parts[k], e);
            ck_assert_int_eq(r.gen.n, base.gen.n);
            ck_assert_mem_eq(r.gen.tok, base.gen.tok, sizeof(int32_t) * (size_t)base.gen.n);
            ck_assert_uint_eq(r.st.tasks_failed, 0);
            free(r.logits);
        }
    free(base.logits);
    remove_tmpdir();
}
END_TEST

/* 10% of a device's tasks fail, after writing garbage into their outputs:
 * the retries start from intact buffers, so the tokens are the same. */
START_TEST(generation_survives_failing_tasks)
{
    make_tmpdir();
    char model[128];
    write_test_model(model, sizeof model);
    run_result base = run_model(model, "cpu,fpga", "dmda", "affinity", NULL);
    const char *cases[][2] = {
        {"dmda", "dev=0,fail=0.1,seed=3"},
        {"eager", "dev=0,fail=0.1,seed=4"},
        {"static", "kind=fpga,fail=0.1,seed=5;dev=0,fail=0.1,seed=6"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        run_result r = run_model(model, "cpu,fpga", cases[c][0], "affinity", cases[c][1]);
        fprintf(stderr, "  %-6s %-40s %llu retries, %d tokens\n", cases[c][0], cases[c][1],
                (unsigned long long)r.st.retries, r.gen.n);
        ck_assert_uint_gt(r.st.retries, 0);
        ck_assert_uint_eq(r.st.tasks_failed, 0);
        ck_assert_int_eq(r.gen.n, base.gen.n);
        ck_assert_mem_eq(r.gen.tok, base.gen.tok, sizeof(int32_t) * (size_t)base.gen.n);
        double e = rel_l2(r.logits, base.logits, (size_t)NPROMPT * NV);
        fprintf(stderr, "  %-6s logits rel L2 %.3g\n", cases[c][0], e);
        ck_assert_msg(e <= 1e-4, "%s: rel L2 %g", cases[c][1], e);
        free(r.logits);
    }
    free(base.logits);
    remove_tmpdir();
}
END_TEST

/* ---- the plan ---------------------------------------------------------------- */

static hx_plan_task plan_find(hx_model *m, int layer, const char *op)
{
    hx_plan_task t;
    size_t n = hx_model_plan_size(m);
    ck_assert_uint_gt(n, 0);
    for (size_t i = 0; i < n; i++) {
        HX_ASSERT_OK(hx_model_plan_get(m, i, &t));
        if (t.layer == layer && !strcmp(t.op, op))
            return t;
    }
    ck_abort_msg("no %s in layer %d", op, layer);
    return t;
}

START_TEST(plan_follows_the_design)
{
    make_tmpdir();
    char model[128];
    write_test_model(model, sizeof model);
    hx_runtime *rt = open_hetero("static", NULL, "cpu");
    hx_model *m;
    HX_ASSERT_OK(hx_model_load(rt, model, NULL, &m));
    hx_plan_task t = plan_find(m, 0, "matmul");
    ck_assert_int_eq(t.device, 0);
    ck_assert_str_eq(t.task_class, "gemm");
    ck_assert_str_eq(t.reason, "prefers gpu: none present");
    ck_assert(t.flops > 0 && t.bytes > 0);
    t = plan_find(m, 1, "rmsnorm");
    ck_assert_str_eq(t.reason, "prefers cpu");
    ck_assert_uint_eq(t.prefer, 1);
    t = plan_find(m, 1, "attention");
    ck_assert_str_eq(t.reason, "prefers fpga: none present");
    ck_assert_int_eq(hx_model_plan_get(m, 100000, &t), HX_ERR_RANGE);
    hx_model_free(m);
    hx_runtime_close(rt);

    /* The emulated FPGA's bitstream holds attention, not matmul. */
    rt = open_hetero("static", NULL, NULL);
    HX_ASSERT_OK(hx_model_load(rt, model, NULL, &m));
    t = plan_find(m, 0, "attention");
    ck_assert_int_eq(t.device, 1);
    ck_assert_str_eq(t.reason, "prefers fpga");
    t = plan_find(m, 0, "matmul");
    ck_assert_int_eq(t.device, 0);
    ck_assert_str_eq(t.reason, "prefers gpu: none present");
    t = plan_find(m, 0, "rmsnorm");
    ck_assert_int_eq(t.device, 0);
    ck_assert_str_eq(t.reason, "prefers cpu");
    hx_model_free(m);
    hx_model_options mo = hx_model_options_default();
    mo.partition = "layers";
    HX_ASSERT_OK(hx_model_load(rt, model, &mo, &m));
    t = plan_find(m, 0, "rmsnorm");
    ck_assert_int_eq(t.device, 0);
    ck_assert_str_eq(t.reason, "stage of layers 0-0");
    t = plan_find(m, -1, "get_rows");
    ck_assert_int_eq(t.device, 0);
    t = plan_find(m, 1, "matmul");
    ck_assert_ptr_nonnull(strstr(t.reason, "layers 1-1") ? t.reason : strstr(t.reason, "stage dev 1 cannot run"));
    hx_model_free(m);
    mo.partition = "auto";
    HX_ASSERT_OK(hx_model_load(rt, model, &mo, &m));
    t = plan_find(m, 1, "matmul");
    ck_assert_int_eq(t.device, -1);
    ck_assert_uint_eq(t.prefer, 0);
    hx_model_free(m);
    mo.partition = "diagonal";
    ck_assert_int_eq(hx_model_load(rt, model, &mo, &m), HX_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "partition 'diagonal'"));
    hx_runtime_close(rt);

    char cmd[512];
    snprintf(cmd, sizeof cmd, "HX_CACHE_DIR=%s %s/hetero-run -m %s --devices cpu --plan > %s/plan.txt 2>&1", tmpdir,
             hx_test_build_dir(), model, tmpdir);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "grep -q 'matmul *gemm *-> dev 0 cpu *(prefers gpu: none present)' %s/plan.txt",
             tmpdir);
    ck_assert_msg(system(cmd) == 0, "hetero-run --plan did not say where matmul goes");
    remove_tmpdir();
}
END_TEST

/* ---- the trace ---------------------------------------------------------------- */

/* Parses the trace and prints counts: tasks, failed tasks, copies, X events
 * whose fields are missing or negative, pids outside the devices. */
static const char *trace_check_py =
    "import json,sys\n"
    "d=json.load(open(sys.argv[1]))\n"
    "ev=d['traceEvents']; ndev=int(sys.argv[2])\n"
    "bad=0; c={}\n"
    "for e in ev:\n"
    "  c[e.get('cat','meta')]=c.get(e.get('cat','meta'),0)+1\n"
    "  if e['ph']=='X':\n"
    "    ok=all(k in e for k in ('name','ts','dur','pid','tid')) and e['dur']>=0 and e['ts']>=0\n"
    "    bad+=not ok or not (0<=e['pid']<ndev)\n"
    "  elif e['ph'] not in ('M','i'): bad+=1\n"
    "names=[e for e in ev if e['ph']=='M' and e['name']=='process_name']\n"
    "print(c.get('task',0), c.get('task_failed',0), c.get('copy',0), bad, len(names))\n";

static void check_trace(const char *path, int ndev, long *tasks, long *failed)
{
    char script[256], cmd[768], out[256];
    snprintf(script, sizeof script, "%s/check_trace.py", tmpdir);
    FILE *f = fopen(script, "w");
    ck_assert_ptr_nonnull(f);
    fputs(trace_check_py, f);
    fclose(f);
    snprintf(out, sizeof out, "%s/check.out", tmpdir);
    snprintf(cmd, sizeof cmd, "python3 %s %s %d > %s", script, path, ndev, out);
    ck_assert_msg(system(cmd) == 0, "the trace is not valid JSON: %s", path);
    f = fopen(out, "r");
    ck_assert_ptr_nonnull(f);
    long copies, bad, names;
    ck_assert_int_eq(fscanf(f, "%ld %ld %ld %ld %ld", tasks, failed, &copies, &bad, &names), 5);
    fclose(f);
    ck_assert_int_eq(bad, 0);
    ck_assert_int_eq(names, ndev);
}

START_TEST(trace_has_an_event_per_task)
{
    make_tmpdir();
    hx_runtime *rt = open_hetero("dmda", "kind=fpga,fail=0.2,seed=2", NULL);
    char path[128];
    snprintf(path, sizeof path, "%s/trace.json", tmpdir);
    ck_assert_int_eq(hx_runtime_trace_stop(rt), HX_ERR_STATE);
    HX_ASSERT_OK(hx_runtime_trace_start(rt, path));
    ck_assert_int_eq(hx_runtime_trace_start(rt, path), HX_ERR_STATE);
    static dag g;
    dag_submit(rt, &g, 0);
    int counts[2];
    dag_check(rt, &g, counts, 0);
    HX_ASSERT_OK(hx_runtime_trace_stop(rt));
    hx_runtime_stats st;
    hx_runtime_stats_get(rt, &st);
    long tasks, failed;
    check_trace(path, 2, &tasks, &failed);
    ck_assert_int_eq(tasks, (long)st.tasks_done);
    ck_assert_int_eq(failed, (long)st.retries);
    hx_runtime_close(rt);

    /* hetero-run --trace: every evaluation's tasks, nothing else. */
    char model[128], cmd[768];
    write_test_model(model, sizeof model);
    snprintf(cmd, sizeof cmd,
             "HX_CACHE_DIR=%s %s/hetero-run -m %s --devices cpu --tokens 256,1,2,3 --trace %s >/dev/null 2>&1",
             tmpdir, hx_test_build_dir(), model, path);
    ck_assert_int_eq(system(cmd), 0);
    check_trace(path, 1, &tasks, &failed);
    /* One evaluation: the plan's tasks, each once. */
    rt = open_hetero("eager", NULL, "cpu");
    hx_model *m;
    HX_ASSERT_OK(hx_model_load(rt, model, NULL, &m));
    ck_assert_int_eq(tasks, (long)hx_model_plan_size(m));
    hx_model_free(m);
    hx_runtime_close(rt);
    ck_assert_int_eq(failed, 0);
    remove_tmpdir();
}
END_TEST

Suite *suite_sched(void)
{
    Suite *s = suite_create("sched");
    TCase *tc = tcase_create("policies");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, every_policy_computes_the_dag);
    tcase_add_test(tc, ws_steals_from_a_busy_device);
    tcase_add_test(tc, dmda_moves_work_off_a_stalled_device);
    tcase_add_test(tc, one_outlier_does_not_change_placement);
    tcase_add_test(tc, dmda_counts_shared_cores_once);
    tcase_add_test(tc, shared_cores_are_told_apart);
    tcase_add_test(tc, dmda_does_not_calibrate_a_device_ruled_out);
    suite_add_tcase(s, tc);
    TCase *tf = tcase_create("failures");
    tcase_set_timeout(tf, 300);
    tcase_add_test(tf, failures_are_retried_with_correct_results);
    tcase_add_test(tf, a_device_that_always_fails_is_retired);
    tcase_add_test(tf, the_last_device_is_never_retired);
    tcase_add_test(tf, bad_injections_get_clear_errors);
    tcase_add_test(tf, slowdown_shows_in_the_load_monitor);
    suite_add_tcase(s, tf);
    TCase *tm = tcase_create("model");
    tcase_set_timeout(tm, 600);
    tcase_add_test(tm, same_logits_whichever_policy_placed_the_tasks);
    tcase_add_test(tm, generation_survives_failing_tasks);
    tcase_add_test(tm, plan_follows_the_design);
    tcase_add_test(tm, trace_has_an_event_per_task);
    suite_add_tcase(s, tm);
    return s;
}
