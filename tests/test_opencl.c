/* The OpenCL backend on PoCL: discovery, FPGA emulation, kernels against
 * the CPU and a scalar reference, zero-copy buffers, mixed DAGs, build
 * errors, the program cache and the bitstream manifest.  A machine without
 * an OpenCL device fails this suite: it must never pass by skipping. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "devices/opencl.h"
#include "ops/ops.h"
#include "runtime/runtime.h"
#include "tests/cl_test.h"

START_TEST(discovery_finds_pocl)
{
    hx_runtime *rt = hx_cl_test_open("cpu,opencl", 0);
    int i = hx_cl_test_device(rt);
    hx_device_info d;
    HX_ASSERT_OK(hx_runtime_device_info(rt, i, &d));
    ck_assert_int_eq(d.family, HX_FAMILY_OPENCL);
    ck_assert_int_eq(d.kind, HX_KIND_CPU);
    ck_assert_int_eq(d.emulated, 0);
    ck_assert_msg(strstr(d.platform, "Portable") || strstr(d.platform, "PoCL"), "platform '%s'", d.platform);
    ck_assert_int_ge(d.compute_units, 1);
    ck_assert_uint_gt(d.global_mem_bytes, 0);
    ck_assert_uint_gt(d.local_mem_bytes, 0);
    ck_assert_int_eq(d.unified_memory, 1);
    ck_assert_int_eq(d.memory_node, 0);
    ck_assert_int_ge(d.numa_node, 0);
    ck_assert_ptr_nonnull(strstr(d.version, "OpenCL"));
    ck_assert_ptr_null(hx_runtime_absence_reason(rt, HX_FAMILY_OPENCL));
    hx_runtime_close(rt);
}
END_TEST

/* With no ICD registered the family is absent, with its reason, and the
 * runtime opens on the CPU.  The ICD loader reads OCL_ICD_VENDORS once per
 * process, so this only holds in a forked test. */
START_TEST(no_platform_is_an_absence_not_a_failure)
{
    const char *fork = getenv("CK_FORK");
    if (fork && !strcmp(fork, "no"))
        return;
    char empty[300];
    snprintf(empty, sizeof empty, "%s/no-icd", hx_cl_test_cache);
    ck_assert_int_eq(mkdir(empty, 0700), 0);
    setenv("OCL_ICD_VENDORS", empty, 1);
    hx_runtime *rt = hx_cl_test_open("all", 0);
    ck_assert_int_eq(hx_runtime_device_count(rt), 1);
    const char *why = hx_runtime_absence_reason(rt, HX_FAMILY_OPENCL);
    ck_assert_ptr_nonnull(why);
    ck_assert_msg(strstr(why, "no OpenCL platform"), "%s", why);
    hx_runtime_close(rt);
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = "opencl";
    ck_assert_int_eq(hx_runtime_open(&rt, &o), HX_ERR_NO_DEVICE);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "CL_PLATFORM_NOT_FOUND_KHR"));
}
END_TEST

static void assert_emulated_fpga(hx_runtime *rt)
{
    int found = 0;
    for (int i = 0; i < hx_runtime_device_count(rt); i++) {
        hx_device_info d;
        HX_ASSERT_OK(hx_runtime_device_info(rt, i, &d));
        if (d.kind != HX_KIND_FPGA)
            continue;
        found++;
        ck_assert_int_eq(d.family, HX_FAMILY_OPENCL);
        ck_assert_int_eq(d.emulated, 1);
        ck_assert_ptr_nonnull(strstr(d.name, "emulation"));
    }
    ck_assert_int_eq(found, 1);
}

START_TEST(fpga_emulation_by_option_and_environment)
{
    hx_runtime *rt = hx_cl_test_open("fpga", 1);
    ck_assert_int_eq(hx_runtime_device_count(rt), 1);
    assert_emulated_fpga(rt);
    hx_runtime_close(rt);

    setenv("HX_FPGA_EMULATION", "pocl", 1);
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = "cpu,fpga";
    o.cpu_threads = 1;
    HX_ASSERT_OK(hx_runtime_open(&rt, &o));
    unsetenv("HX_FPGA_EMULATION");
    ck_assert_int_eq(hx_runtime_device_count(rt), 2);
    assert_emulated_fpga(rt);
    hx_runtime_close(rt);

    /* Without emulation there is no FPGA to ask for. */
    o.fpga_emulation = "off";
    o.devices = "fpga";
    ck_assert_int_eq(hx_runtime_open(&rt, &o), HX_ERR_NO_DEVICE);
}
END_TEST

/* The default set ("all") leaves out a device that computes on the cores
 * the CPU device uses (PoCL's CPU device), saying why; naming it, or
 * asking for the emulated FPGA, opens it. */
static int host_core_opencl_devices(hx_runtime *rt)
{
    int n = 0;
    for (int i = 0; i < hx_runtime_device_count(rt); i++) {
        hx_device_info d;
        HX_ASSERT_OK(hx_runtime_device_info(rt, i, &d));
        n += d.family == HX_FAMILY_OPENCL && (d.kind == HX_KIND_CPU || d.emulated);
    }
    return n;
}

START_TEST(default_set_leaves_out_the_cpu_opencl_device)
{
    hx_runtime *rt = hx_cl_test_open("all", 0);
    ck_assert_int_eq(host_core_opencl_devices(rt), 0);
    const char *why = hx_runtime_absence_reason(rt, HX_FAMILY_OPENCL);
    ck_assert_msg(why && strstr(why, "default set") && strstr(why, "'opencl'"), "absence: %s", why ? why : "(none)");
    hx_runtime_close(rt);

    setenv("HX_DEVICES", "all", 1);
    hx_runtime_options o = hx_runtime_options_default();
    o.fpga_emulation = "off";
    HX_ASSERT_OK(hx_runtime_open(&rt, &o));
    unsetenv("HX_DEVICES");
    ck_assert_int_eq(host_core_opencl_devices(rt), 0);
    hx_runtime_close(rt);

    rt = hx_cl_test_open("all,opencl", 0);
    ck_assert_int_eq(host_core_opencl_devices(rt), 1);
    hx_runtime_close(rt);
    rt = hx_cl_test_open("all", 1);
    ck_assert_int_eq(host_core_opencl_devices(rt), 1);
    assert_emulated_fpga(rt);
    hx_runtime_close(rt);
}
END_TEST

static void run_vector_add(hx_runtime *rt, int dev, size_t n, unsigned seed)
{
    float *x = malloc(n * 4), *y = malloc(n * 4);
    hx_cl_test_random(x, n, seed);
    hx_cl_test_random(y, n, seed + 1);
    hx_buffer *bx = hx_cl_test_buffer(rt, x, n * 4), *by = hx_cl_test_buffer(rt, y, n * 4), *bz;
    HX_ASSERT_OK(hx_buffer_create(rt, n * 4, &bz));
    hx_args_vector_add a = {n};
    hx_task_desc d = {.codelet = hx_codelet_builtin("vector_add"), .nbuffers = 3, .buffers = {bx, by, bz},
                      .modes = {HX_R, HX_R, HX_W}, .args = &a, .args_size = sizeof a, .device = dev};
    hx_task *t;
    HX_ASSERT_OK(hx_task_submit(rt, &d, &t));
    HX_ASSERT_OK(hx_task_wait(t));
    float *z;
    HX_ASSERT_OK(hx_buffer_acquire(bz, HX_R, (void **)&z));
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(z[i] == x[i] + y[i], "device %d, n %zu, element %zu: %g vs %g", dev, n, i, z[i], x[i] + y[i]);
    hx_buffer_destroy(bx);
    hx_buffer_destroy(by);
    hx_buffer_destroy(bz);
    free(x);
    free(y);
}

static float *run_gemm(hx_runtime *rt, int dev, const float *A, const float *B, int M, int N, int K)
{
    hx_buffer *bA = hx_cl_test_buffer(rt, A, sizeof(float) * M * K);
    hx_buffer *bB = hx_cl_test_buffer(rt, B, sizeof(float) * N * K), *bC;
    HX_ASSERT_OK(hx_buffer_create(rt, sizeof(float) * M * N, &bC));
    hx_args_gemm_f32 g = {M, N, K};
    hx_task_desc d = {.codelet = hx_codelet_builtin("gemm_f32"), .nbuffers = 3, .buffers = {bA, bB, bC},
                      .modes = {HX_R, HX_R, HX_W}, .args = &g, .args_size = sizeof g, .device = dev};
    hx_task *t;
    HX_ASSERT_OK(hx_task_submit(rt, &d, &t));
    HX_ASSERT_OK(hx_task_wait(t));
    float *C, *out = malloc(sizeof(float) * M * N);
    HX_ASSERT_OK(hx_buffer_acquire(bC, HX_R, (void **)&C));
    memcpy(out, C, sizeof(float) * M * N);
    hx_buffer_destroy(bA);
    hx_buffer_destroy(bB);
    hx_buffer_destroy(bC);
    return out;
}

/* PoCL shares host memory: a buffer written on it and read on the CPU and
 * by the host must never be copied. */
START_TEST(unified_buffers_are_never_copied)
{
    hx_runtime *rt = hx_cl_test_open("cpu,opencl", 0);
    int cl = hx_cl_test_device(rt), cpu = hx_cl_test_cpu(rt);
    const size_t n = 4099;
    float *x = malloc(n * 4), *y = malloc(n * 4);
    hx_cl_test_random(x, n, 40);
    hx_cl_test_random(y, n, 41);
    hx_buffer *bx = hx_cl_test_buffer(rt, x, n * 4), *by = hx_cl_test_buffer(rt, y, n * 4), *bz, *bw;
    HX_ASSERT_OK(hx_buffer_create(rt, n * 4, &bz));
    HX_ASSERT_OK(hx_buffer_create(rt, n * 4, &bw));
    hx_runtime_stats_reset(rt);
    hx_args_vector_add a = {n};
    hx_task_desc d = {.codelet = hx_codelet_builtin("vector_add"), .nbuffers = 3, .buffers = {bx, by, bz},
                      .modes = {HX_R, HX_R, HX_W}, .args = &a, .args_size = sizeof a, .device = cl};
    hx_task *t1, *t2;
    HX_ASSERT_OK(hx_task_submit(rt, &d, &t1));
    hx_task_desc e = d;
    e.buffers[0] = bz; /* w = z + y on the CPU */
    e.buffers[2] = bw;
    e.device = cpu;
    HX_ASSERT_OK(hx_task_submit(rt, &e, &t2));
    HX_ASSERT_OK(hx_task_wait(t1));
    HX_ASSERT_OK(hx_task_wait(t2));
    float *z, *w;
    HX_ASSERT_OK(hx_buffer_acquire(bz, HX_R, (void **)&z));
    HX_ASSERT_OK(hx_buffer_acquire(bw, HX_R, (void **)&w));
    for (size_t i = 0; i < n; i++) {
        ck_assert_float_eq(z[i], x[i] + y[i]);
        ck_assert_float_eq(w[i], (x[i] + y[i]) + y[i]);
    }
    hx_runtime_stats st;
    hx_runtime_stats_get(rt, &st);
    ck_assert_uint_eq(st.copies, 0);
    ck_assert_uint_eq(st.bytes_copied, 0);
    ck_assert_uint_ge(st.zero_copy_uses, 3);
    hx_buffer_destroy(bx);
    hx_buffer_destroy(by);
    hx_buffer_destroy(bz);
    hx_buffer_destroy(bw);
    free(x);
    free(y);
    hx_runtime_close(rt);
}
END_TEST

/* Caller memory at an odd address (a tensor inside a mapped file) is used
 * in place too: host changes reach the next task, task results reach the
 * host, whatever the OpenCL driver's alignment preference. */
START_TEST(unaligned_wrapped_buffers_stay_coherent)
{
    hx_runtime *rt = hx_cl_test_open("cpu,opencl", 0);
    int cl = hx_cl_test_device(rt);
    const size_t n = 1001;
    char *mem = malloc(3 * (n * 4 + 64) + 4);
    float *x = (float *)(mem + 4), *y = x + n + 3, *z = y + n + 5; /* 4-byte aligned only */
    hx_cl_test_random(x, n, 45);
    hx_cl_test_random(y, n, 46);
    hx_buffer *bx, *by, *bz;
    HX_ASSERT_OK(hx_buffer_wrap(rt, x, n * 4, 1, &bx));
    HX_ASSERT_OK(hx_buffer_wrap(rt, y, n * 4, 0, &by));
    HX_ASSERT_OK(hx_buffer_wrap(rt, z, n * 4, 0, &bz));
    hx_args_vector_add a = {n};
    hx_task_desc d = {.codelet = hx_codelet_builtin("vector_add"), .nbuffers = 3, .buffers = {bx, by, bz},
                      .modes = {HX_R, HX_R, HX_W}, .args = &a, .args_size = sizeof a, .device = cl};
    for (int round = 0; round < 3; round++) {
        float *py;
        HX_ASSERT_OK(hx_buffer_acquire(by, HX_RW, (void **)&py));
        for (size_t i = 0; i < n; i++)
            py[i] += 1.0f; /* host writes between tasks */
        hx_task *t;
        HX_ASSERT_OK(hx_task_submit(rt, &d, &t));
        HX_ASSERT_OK(hx_task_wait(t));
        float *pz;
        HX_ASSERT_OK(hx_buffer_acquire(bz, HX_R, (void **)&pz));
        ck_assert_ptr_eq(pz, z);
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(z[i] == x[i] + y[i], "round %d element %zu: %g vs %g", round, i, z[i], x[i] + y[i]);
    }
    hx_buffer_destroy(bx);
    hx_buffer_destroy(by);
    hx_buffer_destroy(bz);
    free(mem);
    hx_runtime_close(rt);
}
END_TEST

/* The device-memory path that GPUs without shared memory take (PoCL itself
 * shares host memory, so the ops are driven directly): alloc, copy in,
 * run on device handles, copy out, release. */
START_TEST(device_memory_path)
{
    hx_runtime *rt = hx_cl_test_open("opencl", 0);
    hx_device *dev = rt->devices[0];
    const size_t n = 5003;
    float *x = malloc(n * 4), *y = malloc(n * 4), *z = malloc(2 * n * 4);
    hx_cl_test_random(x, n, 47);
    hx_cl_test_random(y, n, 48);
    void *h[3];
    for (int i = 0; i < 3; i++)
        HX_ASSERT_OK(dev->ops->alloc(dev, n * 4, &h[i]));
    HX_ASSERT_OK(dev->ops->copy_in(dev, h[0], 0, x, n * 4));
    HX_ASSERT_OK(dev->ops->copy_in(dev, h[1], 0, y, n * 4));
    hx_args_vector_add a = {n};
    hx_exec e = {.codelet = hx_device_codelet(dev, hx_op_codelet(HX_OP_VECTOR_ADD)), .op = HX_OP_VECTOR_ADD,
                 .args = &a, .nbuffers = 3,
                 .handles = {h[0], h[1], h[2]}, .sizes = {n * 4, n * 4, n * 4}, .modes = {HX_R, HX_R, HX_W}};
    ck_assert(e.codelet && dev->ops->can_run(dev, e.codelet));
    HX_ASSERT_OK(dev->ops->run(dev, &e));
    HX_ASSERT_OK(dev->ops->copy_out(dev, z, h[2], 0, n * 4));
    for (size_t i = 0; i < n; i++)
        ck_assert_float_eq(z[i], x[i] + y[i]);
    /* A copy past the allocation is refused by the driver, by name. */
    ck_assert_int_eq(dev->ops->copy_out(dev, z, h[0], 0, 2 * n * 4), HX_ERR_INVALID_ARG);
    ck_assert_msg(strstr(hx_last_error(), "CL_INVALID_VALUE"), "%s", hx_last_error());
    for (int i = 0; i < 3; i++)
        dev->ops->release(dev, h[i]);
    free(x);
    free(y);
    free(z);
    hx_runtime_close(rt);
}
END_TEST

/* 1000 tasks, each reading the previous one's output, alternating between
 * the CPU and PoCL (pinned), then placed by eager: a missed dependency or a
 * stale replica shows as a wrong sum. */
static void run_chain(hx_runtime *rt, int pin_a, int pin_b)
{
    const size_t n = 257;
    const int steps = 1000;
    float x[257], acc[257], expect[257];
    hx_cl_test_random(x, n, 50);
    hx_cl_test_random(acc, n, 51);
    memcpy(expect, acc, sizeof acc);
    for (int s = 0; s < steps; s++)
        for (size_t i = 0; i < n; i++)
            expect[i] = expect[i] + x[i];
    hx_buffer *bx = hx_cl_test_buffer(rt, x, sizeof x), *b0 = hx_cl_test_buffer(rt, acc, sizeof acc), *b1;
    HX_ASSERT_OK(hx_buffer_create(rt, sizeof acc, &b1));
    hx_args_vector_add a = {n};
    for (int s = 0; s < steps; s++) {
        hx_buffer *in = s % 2 ? b1 : b0, *out = s % 2 ? b0 : b1;
        hx_task_desc d = {.codelet = hx_codelet_builtin("vector_add"), .nbuffers = 3, .buffers = {in, bx, out},
                          .modes = {HX_R, HX_R, HX_W}, .args = &a, .args_size = sizeof a,
                          .device = s % 2 ? pin_b : pin_a};
        HX_ASSERT_OK(hx_task_submit(rt, &d, NULL));
    }
    HX_ASSERT_OK(hx_runtime_wait_all(rt));
    float *r;
    HX_ASSERT_OK(hx_buffer_acquire(steps % 2 ? b1 : b0, HX_R, (void **)&r));
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(r[i] == expect[i], "element %zu: %g vs %g", i, r[i], expect[i]);
    hx_buffer_destroy(bx);
    hx_buffer_destroy(b0);
    hx_buffer_destroy(b1);
}

START_TEST(dag_of_1000_tasks_over_cpu_and_opencl)
{
    hx_runtime *rt = hx_cl_test_open("cpu,opencl", 0);
    int cl = hx_cl_test_device(rt), cpu = hx_cl_test_cpu(rt);
    run_chain(rt, cpu, cl);
    hx_device_stats sc, so;
    HX_ASSERT_OK(hx_device_stats_get(rt, cpu, &sc));
    HX_ASSERT_OK(hx_device_stats_get(rt, cl, &so));
    ck_assert_uint_eq(sc.tasks, 500);
    ck_assert_uint_eq(so.tasks, 500);
    hx_runtime_stats_reset(rt);
    run_chain(rt, -1, -1);
    HX_ASSERT_OK(hx_device_stats_get(rt, cpu, &sc));
    HX_ASSERT_OK(hx_device_stats_get(rt, cl, &so));
    ck_assert_uint_eq(sc.tasks + so.tasks, 1000);
    hx_runtime_close(rt);
}
END_TEST

/* A user codelet whose kernel has a syntax error. */
static int broken_launch(const void *args, const size_t *sizes, hx_cl_launch *l)
{
    *l = (hx_cl_launch){.kernel = "broken", .work_dim = 1, .global = {16}, .nargs = 1};
    l->arg[0].buffer = 0;
    return 0;
}
static const hx_codelet broken = {
    .name = "broken",
    .cl_source = "__kernel void broken(__global float *x)\n{\n    x[get_global_id(0)] = undeclared_thing;\n}\n",
    .cl_launch = broken_launch,
};

START_TEST(build_failure_reports_the_log)
{
    hx_runtime *rt = hx_cl_test_open("cpu,opencl", 0);
    int cl = hx_cl_test_device(rt);
    hx_buffer *b;
    HX_ASSERT_OK(hx_buffer_create(rt, 64, &b));
    for (int round = 0; round < 2; round++) { /* the failure is remembered, not rebuilt */
        hx_task_desc d = {.codelet = &broken, .nbuffers = 1, .buffers = {b}, .modes = {HX_RW}, .device = -1};
        hx_task *t;
        HX_ASSERT_OK(hx_task_submit(rt, &d, &t));
        ck_assert_int_eq(hx_task_wait(t), HX_ERR_DEVICE);
        const char *e = hx_last_error();
        ck_assert_msg(strstr(e, "CL_BUILD_PROGRAM_FAILURE"), "%s", e);
        ck_assert_msg(strstr(e, "build log"), "%s", e);
        ck_assert_msg(strstr(e, "undeclared_thing"), "%s", e);
        ck_assert_int_eq(hx_runtime_wait_all(rt), HX_ERR_DEVICE);
    }
    /* The runtime and the device stay usable. */
    run_vector_add(rt, cl, 1001, 60);
    hx_buffer_destroy(b);
    hx_runtime_close(rt);
}
END_TEST

/* Local memory arguments: a work-group sum staged in __local floats whose
 * size the launch chooses. */
static int group_sum_launch(const void *args, const size_t *sizes, hx_cl_launch *l)
{
    *l = (hx_cl_launch){.kernel = "group_sum", .work_dim = 1, .global = {sizes[0] / 4}, .local = {16}, .nargs = 3};
    l->arg[0].buffer = 0;
    l->arg[1].buffer = 1;
    l->arg[2].buffer = -1;
    l->arg[2].size = 16 * sizeof(float);
    l->arg[2].value = NULL;
    return 0;
}
static const hx_codelet group_sum = {
    .name = "group_sum",
    .cl_source = "__kernel void group_sum(__global const float *x, __global float *out, __local float *tmp)\n"
                 "{\n"
                 "    uint l = get_local_id(0);\n"
                 "    tmp[l] = x[get_global_id(0)];\n"
                 "    barrier(CLK_LOCAL_MEM_FENCE);\n"
                 "    if (l == 0) {\n"
                 "        float s = 0.0f;\n"
                 "        for (uint i = 0; i < get_local_size(0); i++)\n"
                 "            s += tmp[i];\n"
                 "        out[get_group_id(0)] = s;\n"
                 "    }\n"
                 "}\n",
    .cl_launch = group_sum_launch,
};

START_TEST(local_memory_arguments)
{
    hx_runtime *rt = hx_cl_test_open("opencl", 0);
    float x[64], *out;
    hx_cl_test_random(x, 64, 110);
    hx_buffer *bx = hx_cl_test_buffer(rt, x, sizeof x), *bo;
    HX_ASSERT_OK(hx_buffer_create(rt, 4 * sizeof(float), &bo));
    hx_task_desc d = {.codelet = &group_sum, .nbuffers = 2, .buffers = {bx, bo}, .modes = {HX_R, HX_W},
                      .device = -1};
    hx_task *t;
    HX_ASSERT_OK(hx_task_submit(rt, &d, &t));
    HX_ASSERT_OK(hx_task_wait(t));
    HX_ASSERT_OK(hx_buffer_acquire(bo, HX_R, (void **)&out));
    for (int g = 0; g < 4; g++) {
        double s = 0;
        for (int i = 0; i < 16; i++)
            s += x[16 * g + i];
        ck_assert_msg(fabs(out[g] - s) < 1e-5, "group %d: %g vs %g", g, out[g], s);
    }
    hx_buffer_destroy(bx);
    hx_buffer_destroy(bo);
    hx_runtime_close(rt);
}
END_TEST

/* A launch of two kernels sharing scratch memory: the first writes each
 * work-group's sum to scratch, the second adds those sums into one.  The
 * scratch may be asked for only by a launch that names it. */
static int two_pass_sum_launch(const void *args, const size_t *sizes, hx_cl_launch *l)
{
    const int *bad = args;
    *l = (hx_cl_launch){.kernel = "group_sums", .work_dim = 1, .global = {sizes[0] / 4}, .local = {16}, .nargs = 4,
                        .then_kernel = "total", .then_global = {1}, .then_local = {1}};
    l->scratch = *bad ? 0 : sizes[0] / 16;
    l->values[0] = sizes[0] / 64;
    l->arg[0].buffer = 0;
    l->arg[1].buffer = 1;
    l->arg[2].buffer = HX_CL_ARG_SCRATCH;
    l->arg[3].buffer = -1; /* the group count, computed here */
    l->arg[3].size = 8;
    l->arg[3].value = &l->values[0];
    return 0;
}
static const hx_codelet two_pass_sum = {
    .name = "two_pass_sum",
    .cl_source = "__kernel void group_sums(__global const float *x, __global float *out, __global float *part,\n"
                 "                         const ulong n)\n"
                 "{\n"
                 "    if (get_local_id(0) == 0) {\n"
                 "        float s = 0.0f;\n"
                 "        for (uint i = 0; i < get_local_size(0); i++)\n"
                 "            s += x[get_group_id(0) * get_local_size(0) + i];\n"
                 "        part[get_group_id(0)] = s;\n"
                 "    }\n"
                 "}\n"
                 "__kernel void total(__global const float *x, __global float *out, __global float *part, const ulong n)\n"
                 "{\n"
                 "    float s = 0.0f;\n"
                 "    for (ulong g = 0; g < n; g++)\n"
                 "        s += part[g];\n"
                 "    out[0] = s;\n"
                 "}\n",
    .cl_launch = two_pass_sum_launch,
};

START_TEST(second_kernel_reads_the_scratch)
{
    hx_runtime *rt = hx_cl_test_open("opencl", 0);
    float x[64], *out;
    hx_cl_test_random(x, 64, 111);
    hx_buffer *bx = hx_cl_test_buffer(rt, x, sizeof x), *bo;
    HX_ASSERT_OK(hx_buffer_create(rt, sizeof(float), &bo));
    for (int bad = 0; bad < 2; bad++) {
        hx_task_desc d = {.codelet = &two_pass_sum, .nbuffers = 2, .buffers = {bx, bo}, .modes = {HX_R, HX_W},
                          .args = &bad, .args_size = sizeof bad, .device = -1};
        hx_task *t;
        HX_ASSERT_OK(hx_task_submit(rt, &d, &t));
        if (bad) {
            ck_assert_int_eq(hx_task_wait(t), HX_ERR_INVALID_ARG);
            ck_assert_msg(strstr(hx_last_error(), "scratch"), "%s", hx_last_error());
            continue;
        }
        HX_ASSERT_OK(hx_task_wait(t));
        HX_ASSERT_OK(hx_buffer_acquire(bo, HX_R, (void **)&out));
        double s = 0;
        for (int i = 0; i < 64; i++)
            s += x[i];
        ck_assert_msg(fabs(out[0] - s) < 1e-4, "%g vs %g", out[0], s);
    }
    ck_assert_int_eq(hx_runtime_wait_all(rt), HX_ERR_INVALID_ARG);
    hx_buffer_destroy(bx);
    hx_buffer_destroy(bo);
    hx_runtime_close(rt);
}
END_TEST

/* A launch the device refuses: the message names the OpenCL error. */
static int bad_group_launch(const void *args, const size_t *sizes, hx_cl_launch *l)
{
    *l = (hx_cl_launch){.kernel = "gemm_f32", .work_dim = 2, .global = {16, 16}, .local = {8, 8}, .nargs = 6};
    static const uint32_t one = 1;
    for (int i = 0; i < 3; i++)
        l->arg[i].buffer = 0;
    for (int i = 3; i < 6; i++) {
        l->arg[i].buffer = -1;
        l->arg[i].size = sizeof one;
        l->arg[i].value = &one;
    }
    return 0;
}
static const hx_codelet bad_group = {.name = "gemm_f32_bad_group", .cl_program = "basic",
                                     .cl_launch = bad_group_launch};

static int bad_args_launch(const void *args, const size_t *sizes, hx_cl_launch *l)
{
    return (int)HX_ERR_RANGE;
}
static const hx_codelet bad_args = {.name = "vector_add_refused", .cl_program = "basic",
                                    .cl_launch = bad_args_launch};

START_TEST(opencl_errors_are_named)
{
    hx_runtime *rt = hx_cl_test_open("opencl", 0);
    hx_buffer *b;
    HX_ASSERT_OK(hx_buffer_create(rt, 64, &b));
    hx_task_desc d = {.codelet = &bad_group, .nbuffers = 1, .buffers = {b}, .modes = {HX_RW}, .device = -1};
    hx_task *t;
    HX_ASSERT_OK(hx_task_submit(rt, &d, &t));
    ck_assert_int_eq(hx_task_wait(t), HX_ERR_INVALID_ARG);
    ck_assert_msg(strstr(hx_last_error(), "CL_INVALID_WORK_GROUP_SIZE"), "%s", hx_last_error());
    d.codelet = &bad_args;
    HX_ASSERT_OK(hx_task_submit(rt, &d, &t));
    ck_assert_int_eq(hx_task_wait(t), HX_ERR_RANGE);
    ck_assert_int_eq(hx_runtime_wait_all(rt), HX_ERR_INVALID_ARG);
    ck_assert_str_eq(hx_opencl_error_name(-54), "CL_INVALID_WORK_GROUP_SIZE");
    ck_assert_str_eq(hx_opencl_error_name(-1001), "CL_PLATFORM_NOT_FOUND_KHR");
    ck_assert_str_eq(hx_opencl_error_name(-9999), "CL_UNKNOWN_ERROR");
    ck_assert_int_eq(hx_opencl_error_status(CL_OUT_OF_HOST_MEMORY), HX_ERR_NO_MEMORY);
    hx_buffer_destroy(b);
    hx_runtime_close(rt);
}
END_TEST

/* A codelet whose kernel the emulated bitstream lacks is not offered. */
static int scale_launch(const void *args, const size_t *sizes, hx_cl_launch *l)
{
    *l = (hx_cl_launch){.kernel = "scale", .work_dim = 1, .global = {sizes[0] / 4}, .nargs = 1};
    l->arg[0].buffer = 0;
    return 0;
}
static const hx_codelet scale = {
    .name = "scale",
    .cl_source = "__kernel void scale(__global float *x) { x[get_global_id(0)] *= 2.0f; }\n",
    .cl_launch = scale_launch,
};

START_TEST(emulated_fpga_offers_only_the_bitstream)
{
    hx_runtime *rt = hx_cl_test_open("cpu,fpga", 1);
    int fpga = hx_cl_test_device(rt);
    hx_buffer *b;
    float v[16];
    hx_cl_test_random(v, 16, 70);
    b = hx_cl_test_buffer(rt, v, sizeof v);
    hx_task_desc d = {.codelet = &scale, .nbuffers = 1, .buffers = {b}, .modes = {HX_RW}, .device = fpga};
    ck_assert_int_eq(hx_task_submit(rt, &d, NULL), HX_ERR_NO_DEVICE);
    run_vector_add(rt, fpga, 333, 71);
    hx_buffer_destroy(b);
    hx_runtime_close(rt);

    /* The same source on plain PoCL runs. */
    rt = hx_cl_test_open("opencl", 0);
    b = hx_cl_test_buffer(rt, v, sizeof v);
    d.buffers[0] = b;
    d.device = 0;
    hx_task *t;
    HX_ASSERT_OK(hx_task_submit(rt, &d, &t));
    HX_ASSERT_OK(hx_task_wait(t));
    float *r;
    HX_ASSERT_OK(hx_buffer_acquire(b, HX_R, (void **)&r));
    for (int i = 0; i < 16; i++)
        ck_assert_float_eq(r[i], 2 * v[i]);
    hx_buffer_destroy(b);
    hx_runtime_close(rt);
}
END_TEST

/* The bitstream path of an FPGA card, run on PoCL: the "xclbin" is PoCL's
 * binary of kernels_cl/basic.cl, loaded with clCreateProgramWithBinary and
 * never compiled; kernels it lacks are not offered even if the manifest
 * lists them; a damaged file fails the task with the OpenCL error. */
START_TEST(fpga_programs_come_from_the_bitstream)
{
    hx_runtime *rt = hx_cl_test_open("fpga", 1);
    hx_opencl_device *d = rt->devices[0]->impl;
    char *src = hx_opencl_program_expand(hx_opencl_program_source("basic"));
    const char *text = src;
    cl_int err;
    cl_program prog = clCreateProgramWithSource(d->context, 1, &text, NULL, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    ck_assert_int_eq(clBuildProgram(prog, 1, &d->device, "", NULL, NULL), CL_SUCCESS);
    size_t size;
    ck_assert_int_eq(clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL), CL_SUCCESS);
    unsigned char *bin = malloc(size);
    ck_assert_int_eq(clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL), CL_SUCCESS);
    clReleaseProgram(prog);
    free(src);
    char path[300];
    snprintf(path, sizeof path, "%s/hetero-pocl-emulation.xclbin", hx_cl_test_cache);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(bin, 1, size, f), size);
    fclose(f);
    free(bin);

    HX_ASSERT_OK(hx_opencl_use_bitstream(rt->devices[0], path));
    run_vector_add(rt, 0, 777, 100);
    float *g = run_gemm(rt, 0, (float[]){1, 2, 3, 4}, (float[]){5, 6, 7, 8}, 2, 2, 2);
    ck_assert_float_eq(g[1], 23);
    free(g);
    ck_assert_uint_eq(hx_opencl_program_builds(rt), 0);
    /* The manifest lists attention, this bitstream does not hold it. */
    hx_buffer *b;
    HX_ASSERT_OK(hx_buffer_create(rt, 4096, &b));
    hx_task_desc t = {.codelet = hx_codelet_builtin("kv_store"), .nbuffers = 5, .buffers = {b, b, b, b, b},
                      .modes = {HX_R, HX_R, HX_RW, HX_R, HX_R}, .device = 0};
    hx_op_kv_store args = {{1, 1, 1, 16}, 1, 32, 1 /* F16 */, 1, 0, 0, 0};
    t.args = &args;
    t.args_size = sizeof args;
    ck_assert_int_eq(hx_task_submit(rt, &t, NULL), HX_ERR_NO_DEVICE);
    hx_buffer_destroy(b);

    f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs("not a bitstream", f);
    fclose(f);
    HX_ASSERT_OK(hx_opencl_use_bitstream(rt->devices[0], path));
    hx_buffer *bx;
    HX_ASSERT_OK(hx_buffer_create(rt, 64, &bx));
    hx_args_vector_add a = {16};
    hx_task_desc v = {.codelet = hx_codelet_builtin("vector_add"), .nbuffers = 3, .buffers = {bx, bx, bx},
                      .modes = {HX_R, HX_R, HX_W}, .args = &a, .args_size = sizeof a, .device = 0};
    hx_task *tk;
    HX_ASSERT_OK(hx_task_submit(rt, &v, &tk));
    hx_status s = hx_task_wait(tk);
    ck_assert_msg(s != HX_OK && strstr(hx_last_error(), "bitstream") && strstr(hx_last_error(), "CL_"), "%s: %s",
                  hx_status_str(s), hx_last_error());
    hx_buffer_destroy(bx);
    hx_runtime_close(rt);
}
END_TEST

/* ---- program cache ----------------------------------------------------- */

START_TEST(second_open_builds_nothing)
{
    char dir[300];
    snprintf(dir, sizeof dir, "%s/second-open", hx_cl_test_cache);
    setenv("HX_CACHE_DIR", dir, 1);
    hx_runtime *rt = hx_cl_test_open("opencl", 0);
    run_vector_add(rt, 0, 100, 80);
    ck_assert_uint_eq(hx_opencl_program_builds(rt), 1);
    ck_assert_uint_eq(hx_opencl_program_cache_loads(rt), 0);
    hx_runtime_close(rt);

    rt = hx_cl_test_open("opencl", 0);
    run_vector_add(rt, 0, 100, 81);
    float *g = run_gemm(rt, 0, (float[]){1, 2, 3, 4}, (float[]){5, 6, 7, 8}, 2, 2, 2);
    ck_assert_float_eq(g[0], 17);
    ck_assert_float_eq(g[3], 53);
    free(g);
    ck_assert_uint_eq(hx_opencl_program_builds(rt), 0);
    ck_assert_uint_eq(hx_opencl_program_cache_loads(rt), 1);
    hx_runtime_close(rt);

    /* Off means off: every open compiles. */
    setenv("HX_CACHE_DIR", "off", 1);
    rt = hx_cl_test_open("opencl", 0);
    run_vector_add(rt, 0, 10, 82);
    ck_assert_uint_eq(hx_opencl_program_builds(rt), 1);
    hx_runtime_close(rt);
    setenv("HX_CACHE_DIR", hx_cl_test_cache, 1);
}
END_TEST

START_TEST(damaged_cache_entries_are_rebuilt)
{
    char dir[300], cmd[700];
    snprintf(dir, sizeof dir, "%s/damaged", hx_cl_test_cache);
    setenv("HX_CACHE_DIR", dir, 1);
    hx_runtime *rt = hx_cl_test_open("opencl", 0);
    run_vector_add(rt, 0, 50, 90);
    hx_runtime_close(rt);
    /* Truncate every cached binary. */
    snprintf(cmd, sizeof cmd, "for f in '%s'/cl/*.bin; do head -c 40 \"$f\" > \"$f.x\" && mv \"$f.x\" \"$f\"; done",
             dir);
    ck_assert_int_eq(system(cmd), 0);
    rt = hx_cl_test_open("opencl", 0);
    run_vector_add(rt, 0, 50, 91);
    ck_assert_uint_eq(hx_opencl_program_builds(rt), 1);
    hx_runtime_close(rt);
    setenv("HX_CACHE_DIR", hx_cl_test_cache, 1);
}
END_TEST

START_TEST(cache_directory_follows_the_environment)
{
    char buf[512];
    setenv("HX_CACHE_DIR", "/x/y", 1);
    ck_assert_str_eq(hx_opencl_cache_dir(buf, sizeof buf), "/x/y/cl");
    unsetenv("HX_CACHE_DIR");
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    ck_assert_str_eq(hx_opencl_cache_dir(buf, sizeof buf), "/xdg/hetero/cl");
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/home/someone", 1);
    ck_assert_str_eq(hx_opencl_cache_dir(buf, sizeof buf), "/home/someone/.cache/hetero/cl");
    setenv("HX_CACHE_DIR", "off", 1);
    ck_assert_ptr_null(hx_opencl_cache_dir(buf, sizeof buf));
    setenv("HX_CACHE_DIR", hx_cl_test_cache, 1);
}
END_TEST

/* ---- bitstream manifest ------------------------------------------------ */

START_TEST(manifest_is_consistent)
{
    hx_opencl_manifest *m;
    HX_ASSERT_OK(hx_opencl_manifest_parse(hx_bitstream_manifest, &m));
    ck_assert_int_ge(m->nplatforms, 2);
    ck_assert_ptr_nonnull(hx_opencl_manifest_find(m, HX_OPENCL_EMULATION_PLATFORM));
    static char names[256][HX_OPENCL_NAME_MAX];
    for (int p = 0; p < m->nplatforms; p++) {
        const hx_opencl_manifest_platform *pl = &m->platforms[p];
        for (int q = 0; q < p; q++)
            ck_assert_str_ne(pl->name, m->platforms[q].name);
        char expect[300];
        snprintf(expect, sizeof expect, "hetero-%s.xclbin", pl->name);
        ck_assert_str_eq(pl->xclbin, expect);
        ck_assert_int_ge(pl->nkernels, 1);
        for (int k = 0; k < pl->nkernels; k++) {
            const char *src = hx_opencl_program_source(pl->kernels[k].program);
            ck_assert_msg(src, "%s: kernel %s names program '%s', which kernels_cl/ lacks", pl->name,
                          pl->kernels[k].name, pl->kernels[k].program);
            char *full = hx_opencl_program_expand(src);
            ck_assert_ptr_nonnull(full);
            int n = hx_opencl_program_scan(full, names, 256), found = 0;
            free(full);
            for (int i = 0; i < n && i < 256; i++)
                found |= !strcmp(names[i], pl->kernels[k].name);
            ck_assert_msg(found, "%s: kernel %s is not defined in kernels_cl/%s.cl", pl->name, pl->kernels[k].name,
                          pl->kernels[k].program);
        }
    }
    hx_opencl_manifest_free(m);
}
END_TEST

START_TEST(manifest_errors_name_the_line)
{
    static const struct {
        const char *text, *expect;
    } bad[] = {
        {"kernel a basic\n", "line 1: kernel 'a' before any platform"},
        {"# c\nplatform p p.xclbin\nkernel a\n", "line 3: expected 'kernel <name> <program>'"},
        {"platform p p.xclbin\nplatform p q.xclbin\n", "line 2: platform 'p' listed twice"},
        {"platform p p.xclbin\nkernel a b\nkernel a b\n", "line 3: kernel 'a' listed twice"},
        {"bitstream x y\n", "line 1: unknown directive 'bitstream'"},
        {"platform p p$.xclbin\n", "line 1: xclbin file 'p$.xclbin'"},
        {"platform p p.xclbin extra\n", "line 1: expected 'platform"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hx_opencl_manifest *m = (void *)1;
        ck_assert_int_eq(hx_opencl_manifest_parse(bad[i].text, &m), HX_ERR_FORMAT);
        ck_assert_ptr_null(m);
        ck_assert_msg(strstr(hx_last_error(), bad[i].expect), "case %zu: %s", i, hx_last_error());
    }
    hx_opencl_manifest *m;
    HX_ASSERT_OK(hx_opencl_manifest_parse("platform a a.xclbin # note\n\n  kernel k1 basic\nkernel k2 basic", &m));
    ck_assert_int_eq(m->nplatforms, 1);
    ck_assert_int_eq(m->platforms[0].nkernels, 2);
    ck_assert(hx_opencl_manifest_has_kernel(hx_opencl_manifest_find(m, "a_device_name"), "k2"));
    ck_assert(!hx_opencl_manifest_has_kernel(&m->platforms[0], "k3"));
    hx_opencl_manifest_free(m);
}
END_TEST

START_TEST(kernel_scan_and_includes)
{
    char names[8][HX_OPENCL_NAME_MAX];
    const char *src = "// __kernel void not_me(void)\n"
                      "/* kernel void nor_me() */\n"
                      "#define K __kernel void macro_kernel()\n"
                      "__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void first(__global float *x) {}\n"
                      "kernel void\nsecond(global int *y) {}\n"
                      "void helper(void) {}\n";
    ck_assert_int_eq(hx_opencl_program_scan(src, names, 8), 2);
    ck_assert_str_eq(names[0], "first");
    ck_assert_str_eq(names[1], "second");
    char *full = hx_opencl_program_expand("#include \"basic.cl\"\n__kernel void mine() {}\n");
    ck_assert_ptr_nonnull(full);
    ck_assert_int_eq(hx_opencl_program_scan(full, names, 8), 3);
    ck_assert_str_eq(names[2], "mine");
    free(full);
    ck_assert_ptr_null(hx_opencl_program_expand("#include \"no_such_file.cl\"\n"));
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "no_such_file"));
}
END_TEST

Suite *suite_opencl(void)
{
    Suite *s = suite_create("opencl");
    TCase *tc = tcase_create("pocl");
    tcase_set_timeout(tc, 300);
    tcase_add_unchecked_fixture(tc, hx_cl_test_cache_setup, hx_cl_test_cache_teardown);
    tcase_add_test(tc, discovery_finds_pocl);
    tcase_add_test(tc, no_platform_is_an_absence_not_a_failure);
    tcase_add_test(tc, fpga_emulation_by_option_and_environment);
    tcase_add_test(tc, default_set_leaves_out_the_cpu_opencl_device);
    tcase_add_test(tc, unified_buffers_are_never_copied);
    tcase_add_test(tc, unaligned_wrapped_buffers_stay_coherent);
    tcase_add_test(tc, device_memory_path);
    tcase_add_test(tc, dag_of_1000_tasks_over_cpu_and_opencl);
    tcase_add_test(tc, build_failure_reports_the_log);
    tcase_add_test(tc, local_memory_arguments);
    tcase_add_test(tc, second_kernel_reads_the_scratch);
    tcase_add_test(tc, opencl_errors_are_named);
    tcase_add_test(tc, emulated_fpga_offers_only_the_bitstream);
    tcase_add_test(tc, fpga_programs_come_from_the_bitstream);
    tcase_add_test(tc, second_open_builds_nothing);
    tcase_add_test(tc, damaged_cache_entries_are_rebuilt);
    tcase_add_test(tc, cache_directory_follows_the_environment);
    tcase_add_test(tc, manifest_is_consistent);
    tcase_add_test(tc, manifest_errors_name_the_line);
    tcase_add_test(tc, kernel_scan_and_includes);
    suite_add_tcase(s, tc);
    return s;
}
