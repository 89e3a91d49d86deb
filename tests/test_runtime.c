/* The task runtime on the CPU device: codelets, DAGs, errors. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op_list.h"
#include "runtime/device.h"
#include "runtime/runtime.h"
#include "runtime/task.h"
#include "tests/hx_test.h"

static hx_runtime *open_cpu(void)
{
    hx_runtime *rt = NULL;
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = "cpu";
    HX_ASSERT_OK(hx_runtime_open(&rt, &o));
    return rt;
}

static void fill_random(float *x, size_t n, unsigned seed)
{
    srand(seed);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
}

static hx_buffer *buffer_with(hx_runtime *rt, const float *data, size_t n)
{
    hx_buffer *b;
    void *p;
    HX_ASSERT_OK(hx_buffer_create(rt, n * sizeof(float), &b));
    HX_ASSERT_OK(hx_buffer_acquire(b, HX_W, &p));
    memcpy(p, data, n * sizeof(float));
    return b;
}

START_TEST(open_describes_the_cpu)
{
    hx_runtime *rt = open_cpu();
    ck_assert_int_eq(hx_runtime_device_count(rt), 1);
    hx_device_info d;
    HX_ASSERT_OK(hx_runtime_device_info(rt, 0, &d));
    ck_assert_int_eq(d.family, HX_FAMILY_CPU);
    ck_assert_int_ge(d.compute_units, 1);
    ck_assert_int_eq(d.unified_memory, 1);
    hx_topology_info t;
    HX_ASSERT_OK(hx_runtime_topology(rt, &t));
    ck_assert_int_ge(t.cores, 1);
    ck_assert_int_ge(t.pus, t.cores);
    ck_assert_int_ge(t.numa_nodes, 1);
    ck_assert_uint_gt(t.memory_bytes, 0);
    hx_runtime_close(rt);
}
END_TEST

START_TEST(buffers_are_aligned)
{
    hx_runtime *rt = open_cpu();
    size_t sizes[] = {1, 100, 4096, 1 << 20};
    for (int i = 0; i < 4; i++) {
        hx_buffer *b;
        void *p;
        HX_ASSERT_OK(hx_buffer_create(rt, sizes[i], &b));
        HX_ASSERT_OK(hx_buffer_acquire(b, HX_RW, &p));
        ck_assert_uint_eq((uintptr_t)p % 64, 0);
        memset(p, 0xab, sizes[i]);
        hx_buffer_destroy(b);
    }
    hx_runtime_close(rt);
}
END_TEST

/* A chain where each task reads the previous result: any missed edge shows
 * as a wrong sum, since tasks would run out of order. */
START_TEST(dependent_chain_is_sequential)
{
    hx_runtime *rt = open_cpu();
    const size_t n = 64;
    const int steps = 1000;
    float x[64], acc[64], expect[64];
    fill_random(x, n, 3);
    fill_random(acc, n, 4);
    memcpy(expect, acc, sizeof acc);
    for (int s = 0; s < steps; s++)
        for (size_t i = 0; i < n; i++)
            expect[i] = expect[i] + x[i];
    hx_buffer *bx = buffer_with(rt, x, n), *b0 = buffer_with(rt, acc, n), *b1;
    HX_ASSERT_OK(hx_buffer_create(rt, n * 4, &b1));
    hx_args_vector_add a = {n};
    for (int s = 0; s < steps; s++) {
        hx_buffer *in = s % 2 ? b1 : b0, *out = s % 2 ? b0 : b1;
        hx_task_desc d = {.codelet = hx_codelet_builtin("vector_add"), .nbuffers = 3,
                          .buffers = {in, bx, out}, .modes = {HX_R, HX_R, HX_W},
                          .args = &a, .args_size = sizeof a, .device = -1};
        HX_ASSERT_OK(hx_task_submit(rt, &d, NULL));
    }
    HX_ASSERT_OK(hx_runtime_wait_all(rt));
    float *r;
    HX_ASSERT_OK(hx_buffer_acquire(steps % 2 ? b1 : b0, HX_R, (void **)&r));
    for (size_t i = 0; i < n; i++)
        ck_assert_float_eq(r[i], expect[i]);
    hx_runtime_stats st;
    hx_runtime_stats_get(rt, &st);
    ck_assert_uint_eq(st.tasks_done, steps);
    hx_buffer_destroy(bx);
    hx_buffer_destroy(b0);
    hx_buffer_destroy(b1);
    hx_runtime_close(rt);
}
END_TEST

static int failing_cpu(const hx_cpu_call *c) { return c->ith == 0 ? HX_ERR_DEVICE : 0; }
static const hx_codelet failing = {.name = "always_fails", .cpu = failing_cpu};

/* Holds its device until the test opens the gate, so that tasks submitted
 * meanwhile are certain to find their predecessors pending. */
static _Atomic int gate_open;
static int gate_cpu(const hx_cpu_call *c)
{
    while (!atomic_load(&gate_open))
        ;
    return 0;
}
static const hx_codelet gate = {.name = "gate", .cpu = gate_cpu};

START_TEST(task_error_reaches_submitter_and_dependents)
{
    hx_runtime *rt = open_cpu();
    hx_buffer *b, *c;
    HX_ASSERT_OK(hx_buffer_create(rt, 256, &b));
    HX_ASSERT_OK(hx_buffer_create(rt, 256, &c));
    atomic_store(&gate_open, 0);
    hx_task_desc g = {.codelet = &gate, .nbuffers = 1, .buffers = {b}, .modes = {HX_RW}, .device = -1};
    HX_ASSERT_OK(hx_task_submit(rt, &g, NULL));
    hx_task_desc d = {.codelet = &failing, .nbuffers = 1, .buffers = {b}, .modes = {HX_RW}, .device = -1};
    hx_task *t1, *t2;
    HX_ASSERT_OK(hx_task_submit(rt, &d, &t1));
    hx_args_vector_add a = {64};
    hx_task_desc d2 = {.codelet = hx_codelet_builtin("vector_add"), .nbuffers = 3, .buffers = {b, b, c},
                       .modes = {HX_R, HX_R, HX_W}, .args = &a, .args_size = sizeof a, .device = -1};
    HX_ASSERT_OK(hx_task_submit(rt, &d2, &t2));
    atomic_store(&gate_open, 1);
    ck_assert_int_eq(hx_task_wait(t1), HX_ERR_DEVICE);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "always_fails"));
    ck_assert_int_eq(hx_task_wait(t2), HX_ERR_TASK_FAILED);
    ck_assert_int_eq(hx_runtime_wait_all(rt), HX_ERR_DEVICE);
    /* The runtime stays usable. */
    HX_ASSERT_OK(hx_runtime_wait_all(rt));
    hx_task_desc ok = {.codelet = hx_codelet_builtin("vector_add"), .nbuffers = 3, .buffers = {c, c, b},
                       .modes = {HX_R, HX_R, HX_W}, .args = &a, .args_size = sizeof a, .device = -1};
    HX_ASSERT_OK(hx_task_submit(rt, &ok, &t1));
    HX_ASSERT_OK(hx_task_wait(t1));
    hx_buffer_destroy(b);
    hx_buffer_destroy(c);
    hx_runtime_close(rt);
}
END_TEST

static int range_cpu(const hx_cpu_call *c) { return c->ith == 0 ? HX_ERR_RANGE : 0; }
static const hx_codelet out_of_range = {.name = "index_out_of_range", .cpu = range_cpu};

/* acc = in + x, recorded as the model's replay records its tasks. */
static hx_task_recorded recorded_add(hx_runtime *rt, hx_buffer *in, hx_buffer *x, hx_buffer *out,
                                     const hx_args_vector_add *a)
{
    hx_task_desc d = {.codelet = hx_codelet_builtin("vector_add"), .nbuffers = 3, .buffers = {in, x, out},
                      .modes = {HX_R, HX_R, HX_W}, .args = a, .args_size = sizeof *a, .device = -1};
    hx_task_recorded r;
    HX_ASSERT_OK(hx_task_record(rt, &d, &r));
    return r;
}

static float first_of(hx_buffer *b)
{
    float *p;
    HX_ASSERT_OK(hx_buffer_acquire(b, HX_R, (void **)&p));
    return p[0];
}

/* A CPU-only runtime runs recorded tasks as one graph launch, in their
 * order; a task that fails ends the launch with its own status and name,
 * the tasks after it do not run and count as failed; with a task in
 * flight, the tasks go one by one (ordered after it by their buffers);
 * and the runtime stays usable. */
START_TEST(a_graph_launch_runs_in_order_and_fails_as_its_failing_task)
{
    hx_runtime *rt = open_cpu();
    const size_t n = 64;
    float ones[64], zeros[64] = {0};
    for (size_t i = 0; i < n; i++)
        ones[i] = 1.0f;
    hx_buffer *x = buffer_with(rt, ones, n), *acc = buffer_with(rt, zeros, n), *out = buffer_with(rt, zeros, n);
    const hx_args_vector_add a = {n};
    hx_runtime_stats st;

    /* out = acc + x, acc = out + x, out = acc + x: 3 only in this order */
    hx_task_recorded g[3] = {recorded_add(rt, acc, x, out, &a), recorded_add(rt, out, x, acc, &a),
                             recorded_add(rt, acc, x, out, &a)};
    hx_runtime_stats_reset(rt);
    HX_ASSERT_OK(hx_task_submit_recorded(rt, g, 3));
    HX_ASSERT_OK(hx_runtime_wait_all(rt));
    ck_assert_float_eq(first_of(out), 3.0f);
    ck_assert_float_eq(first_of(acc), 2.0f);
    hx_runtime_stats_get(rt, &st);
    ck_assert_uint_eq(st.graph_launches, 1);
    ck_assert_uint_eq(st.tasks_submitted, 3);
    ck_assert_uint_eq(st.tasks_done, 3);

    /* out = acc + x (3), then a failure, then acc = out + x (not run) */
    hx_task_desc fd = {.codelet = &out_of_range, .nbuffers = 1, .buffers = {out}, .modes = {HX_RW}, .device = -1};
    hx_task_recorded f[3];
    f[0] = recorded_add(rt, acc, x, out, &a);
    HX_ASSERT_OK(hx_task_record(rt, &fd, &f[1]));
    f[2] = recorded_add(rt, out, x, acc, &a);
    hx_runtime_stats_reset(rt);
    HX_ASSERT_OK(hx_task_submit_recorded(rt, f, 3));
    ck_assert_int_eq(hx_runtime_wait_all(rt), HX_ERR_RANGE);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "index_out_of_range"));
    ck_assert_float_eq(first_of(out), 3.0f);
    ck_assert_float_eq(first_of(acc), 2.0f);
    hx_runtime_stats_get(rt, &st);
    ck_assert_uint_eq(st.graph_launches, 1);
    ck_assert_uint_eq(st.tasks_submitted, 3);
    ck_assert_uint_eq(st.tasks_done, 1);
    ck_assert_uint_eq(st.tasks_failed, 2);

    /* A task in flight: the recorded ones go one by one, after it. */
    atomic_store(&gate_open, 0);
    hx_task_desc gd = {.codelet = &gate, .nbuffers = 1, .buffers = {acc}, .modes = {HX_RW}, .device = -1};
    HX_ASSERT_OK(hx_task_submit(rt, &gd, NULL));
    hx_runtime_stats_reset(rt);
    HX_ASSERT_OK(hx_task_submit_recorded(rt, g, 3));
    atomic_store(&gate_open, 1);
    HX_ASSERT_OK(hx_runtime_wait_all(rt));
    ck_assert_float_eq(first_of(out), 5.0f);
    ck_assert_float_eq(first_of(acc), 4.0f);
    hx_runtime_stats_get(rt, &st);
    ck_assert_uint_eq(st.graph_launches, 0);
    ck_assert_uint_eq(st.tasks_done, 4);

    /* Usable, and launching again once idle. */
    HX_ASSERT_OK(hx_task_submit_recorded(rt, g, 3));
    HX_ASSERT_OK(hx_runtime_wait_all(rt));
    ck_assert_float_eq(first_of(out), 7.0f);
    hx_runtime_stats_get(rt, &st);
    ck_assert_uint_eq(st.graph_launches, 1);
    hx_buffer_destroy(x);
    hx_buffer_destroy(acc);
    hx_buffer_destroy(out);
    hx_runtime_close(rt);
}
END_TEST

START_TEST(bad_options_get_clear_errors)
{
    hx_runtime *rt = NULL;
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = "cpu,quantum";
    ck_assert_int_eq(hx_runtime_open(&rt, &o), HX_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "unknown device 'quantum'"));
    ck_assert_ptr_null(rt);

    o = hx_runtime_options_default();
    o.cpu_threads = -3;
    ck_assert_int_eq(hx_runtime_open(&rt, &o), HX_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "cpu_threads=-3"));

    o = hx_runtime_options_default();
    o.devices = "cpu";
    o.sched = "clairvoyant";
    ck_assert_int_eq(hx_runtime_open(&rt, &o), HX_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "unknown scheduling policy 'clairvoyant'"));

    o = hx_runtime_options_default();
    o.fpga_emulation = "quartus";
    ck_assert_int_eq(hx_runtime_open(&rt, &o), HX_ERR_INVALID_ARG);

    o = hx_runtime_options_default();
    o.devices = "cuda";
    ck_assert_int_eq(hx_runtime_open(&rt, &o), HX_ERR_NO_DEVICE);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "'cuda'"));
}
END_TEST

/* A device family the runtime has never heard of: its name and selectors
 * are its own, and the runtime accepts those and no other. */
static hx_status npu_discover(hx_runtime *rt, const hx_discover_options *opts)
{
    (void)opts;
    hx_device_info in = {.family = HX_FAMILY_CUDA, .kind = HX_KIND_ACCELERATOR, .compute_units = 4,
                         .global_mem_bytes = 1u << 20, .unified_memory = 1, .numa_node = -1};
    snprintf(in.name, sizeof in.name, "test npu");
    return hx_runtime_add_device(rt, &in, rt->backends[0], NULL);
}

static hx_status absent_discover(hx_runtime *rt, const hx_discover_options *opts)
{
    (void)opts;
    hx_runtime_set_absence(rt, HX_FAMILY_OPENCL, "the test's bus is unplugged");
    return HX_OK;
}

static const hx_device_selector npu_selectors[] = {{"npu", -1, 0}, {"accel", HX_KIND_ACCELERATOR, 0}, {NULL, 0, 0}};
static const hx_device_selector absent_selectors[] = {{"board", -1, 0}, {NULL, 0, 0}};
static const hx_device_ops npu_ops = {.name = "npu", .family = HX_FAMILY_CUDA, .selectors = npu_selectors,
                                      .discover = npu_discover};
static const hx_device_ops absent_ops = {.name = "board", .family = HX_FAMILY_OPENCL,
                                         .selectors = absent_selectors, .discover = absent_discover};

START_TEST(device_families_name_themselves)
{
    const hx_device_ops *const families[] = {&npu_ops, &absent_ops, NULL};
    hx_runtime *rt = NULL;
    hx_runtime_options o = hx_runtime_options_default();
    o.perfmodel_dir = "off";
    o.devices = "npu";
    HX_ASSERT_OK(hx_runtime_open_with(&rt, &o, families));
    ck_assert_int_eq(hx_runtime_device_count(rt), 1);
    hx_device_info d;
    HX_ASSERT_OK(hx_runtime_device_info(rt, 0, &d));
    ck_assert_str_eq(d.name, "test npu");
    HX_ASSERT_OK(hx_runtime_close(rt));
    o.devices = "accel";
    HX_ASSERT_OK(hx_runtime_open_with(&rt, &o, families));
    ck_assert_int_eq(hx_runtime_device_count(rt), 1);
    HX_ASSERT_OK(hx_runtime_close(rt));

    /* the names the runtime knew before are this list's to give */
    o.devices = "cpu";
    ck_assert_int_eq(hx_runtime_open_with(&rt, &o, families), HX_ERR_INVALID_ARG);
    ck_assert_msg(strstr(hx_last_error(), "unknown device 'cpu' (known: all, npu, accel, board)") != NULL, "%s",
                  hx_last_error());
    /* a family that found nothing says why, under its own selector */
    o.devices = "board";
    ck_assert_int_eq(hx_runtime_open_with(&rt, &o, families), HX_ERR_NO_DEVICE);
    ck_assert_msg(strstr(hx_last_error(), "device 'board' was asked for but none was found: the test's bus is "
                                          "unplugged") != NULL, "%s", hx_last_error());
    ck_assert_ptr_null(rt);
}
END_TEST

static const hx_codelet opencl_only = {.name = "opencl_only", .cl_source = "__kernel void k(){}"};

START_TEST(bad_requests_leave_runtime_usable)
{
    hx_runtime *rt = open_cpu();
    hx_buffer *b = NULL;
    ck_assert_int_eq(hx_buffer_create(rt, (size_t)1 << 62, &b), HX_ERR_NO_MEMORY);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "bytes asked"));
    ck_assert_ptr_null(b);
    ck_assert_int_eq(hx_buffer_create(rt, 0, &b), HX_ERR_INVALID_ARG);

    HX_ASSERT_OK(hx_buffer_create(rt, 64, &b));
    hx_task_desc d = {.codelet = &opencl_only, .nbuffers = 1, .buffers = {b}, .modes = {HX_RW}, .device = -1};
    ck_assert_int_eq(hx_task_submit(rt, &d, NULL), HX_ERR_NO_DEVICE);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "opencl_only"));
    d.codelet = hx_codelet_builtin("vector_add");
    d.device = 5;
    ck_assert_int_eq(hx_task_submit(rt, &d, NULL), HX_ERR_INVALID_ARG);
    d.device = -1;
    d.modes[0] = 0;
    ck_assert_int_eq(hx_task_submit(rt, &d, NULL), HX_ERR_INVALID_ARG);
    d.nbuffers = HX_TASK_MAX_BUFFERS + 1;
    ck_assert_int_eq(hx_task_submit(rt, &d, NULL), HX_ERR_INVALID_ARG);
    ck_assert_ptr_null(hx_codelet_builtin("no_such_codelet"));

    float data[16] = {1};
    hx_buffer *ro;
    HX_ASSERT_OK(hx_buffer_wrap(rt, data, sizeof data, 1, &ro));
    hx_task_desc w = {.codelet = hx_codelet_builtin("vector_add"), .nbuffers = 3, .buffers = {b, b, ro},
                      .modes = {HX_R, HX_R, HX_W}, .device = -1};
    ck_assert_int_eq(hx_task_submit(rt, &w, NULL), HX_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "read-only"));
    void *p;
    ck_assert_int_eq(hx_buffer_acquire(ro, HX_W, &p), HX_ERR_INVALID_ARG);
    hx_buffer_destroy(ro);

    hx_args_vector_add a = {16};
    hx_task_desc ok = {.codelet = hx_codelet_builtin("vector_add"), .nbuffers = 3, .buffers = {b, b, b},
                       .modes = {HX_R, HX_R, HX_W}, .args = &a, .args_size = sizeof a, .device = -1};
    hx_task *t;
    HX_ASSERT_OK(hx_task_submit(rt, &ok, &t));
    HX_ASSERT_OK(hx_task_wait(t));
    hx_buffer_destroy(b);
    hx_runtime_close(rt);
}
END_TEST

/* The op list is the one table: every op is found by its name, once, as
 * the same codelet; the CPU binds its own implementation of each, and an
 * application's codelet is run as it is. */
START_TEST(ops_are_bound_per_device_by_id)
{
    hx_runtime *rt = open_cpu();
    hx_device *cpu = rt->devices[0];
    for (int op = 0; op < HX_OP_COUNT; op++) {
        const hx_codelet *cl = hx_op_codelet((hx_op)op);
        ck_assert_ptr_nonnull(cl->name);
        ck_assert_int_eq(hx_op_find(cl->name), op);
        ck_assert_int_eq(hx_op_of(cl), op);
        ck_assert_ptr_eq(hx_codelet_builtin(cl->name), cl);
        ck_assert_msg(hx_op_args_size[op] > 0, "op %s has no argument size", cl->name);
        const hx_codelet *impl = hx_device_codelet(cpu, cl);
        ck_assert_msg(impl && impl->cpu && impl != cl, "CPU did not bind %s", cl->name);
        ck_assert_str_eq(impl->name, cl->name);
        ck_assert_ptr_eq(impl->flops, cl->flops);
        ck_assert_int_eq(hx_device_bound_op(cpu, impl), op);
        ck_assert_int_eq(hx_device_bound_op(cpu, cl), -1);
        ck_assert(hx_device_implements(rt, 0, cl->name));
    }
    ck_assert_int_eq(hx_op_find("no_such_op"), -1);
    ck_assert_ptr_null(hx_codelet_builtin("no_such_op"));
    ck_assert(!hx_device_implements(rt, 0, "no_such_op"));
    static const hx_codelet own = {.name = "matmul"};
    ck_assert_int_eq(hx_op_of(&own), -1);
    ck_assert_ptr_eq(hx_device_codelet(cpu, &own), &own);
    ck_assert_int_eq(hx_device_bound_op(cpu, &own), -1);
    hx_runtime_close(rt);
}
END_TEST

Suite *suite_runtime(void)
{
    Suite *s = suite_create("runtime");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, open_describes_the_cpu);
    tcase_add_test(tc, buffers_are_aligned);
    tcase_add_test(tc, dependent_chain_is_sequential);
    tcase_add_test(tc, task_error_reaches_submitter_and_dependents);
    tcase_add_test(tc, a_graph_launch_runs_in_order_and_fails_as_its_failing_task);
    tcase_add_test(tc, bad_options_get_clear_errors);
    tcase_add_test(tc, device_families_name_themselves);
    tcase_add_test(tc, bad_requests_leave_runtime_usable);
    tcase_add_test(tc, ops_are_bound_per_device_by_id);
    suite_add_tcase(s, tc);
    return s;
}
