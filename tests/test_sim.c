/* The simulator: machine descriptions (good and broken), simulated task
 * times against the roofline formula, copies over a described link, models
 * without weights, determinism, what a simulated run refuses, and KV
 * blocks that move alone (bytes as the runtime's statistics count them). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hx_test.h"
#include "model/model.h"
#include "ops/op_list.h"
#include "ops/ops.h"
#include "runtime/block_space.h"
#include "runtime/buffer.h"
#include "runtime/machine.h"
#include "runtime/perfmodel.h"
#include "runtime/sim.h"
#include "runtime/task.h"

/* One CPU device: 1 Tflop/s at 50 %, 100 GB/s at 80 %, 3 us per task. */
static const char *const cpu_only = "machine = test box\n"
                                    "[device cpu]\nfamily = cpu\nkind = cpu\nunits = 8\n"
                                    "flops.f32 = 1T\nmemory = 64G\nbandwidth = 100G\n"
                                    "launch = 3us\nefficiency = 0.5 0.8\n";

/* The same CPU and a GPU with its own memory behind a 10 GB/s link. */
static const char *const cpu_gpu = "machine = test box with a gpu\n"
                                   "[device cpu]\nfamily = cpu\nkind = cpu\nflops.f32 = 1T\n"
                                   "memory = 64G\nbandwidth = 100G\nlaunch = 3us\nefficiency = 0.5 0.8\n"
                                   "[device gpu]\nfamily = cuda\nkind = gpu\nflops.f32 = 50T\n"
                                   "memory = 80G\nbandwidth = 2T\nunified = no\nlink = 10G\nlatency = 5us\n"
                                   "launch = 4us\nefficiency = 1 1\n"
                                   "[device fpga]\nfamily = opencl\nkind = fpga\nflops.f32 = 1T\n"
                                   "memory = 64M\nbandwidth = 400G\nunified = no\nlink = 10G\n"
                                   "latency = 5us\nruns = attention kv_store vector_add\n";

static void write_file(char *path, size_t cap, const char *text)
{
    snprintf(path, cap, "/tmp/hx-sim-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static hx_runtime *open_sim(const char *text, const char *sched, char *path, size_t cap)
{
    write_file(path, cap, text);
    hx_runtime_options o = hx_runtime_options_default();
    o.machine = path;
    o.sched = sched;
    o.perfmodel_dir = "off";
    o.inject = "";
    o.trace = "";
    hx_runtime *rt;
    HX_ASSERT_OK(hx_runtime_open(&rt, &o));
    ck_assert(hx_runtime_simulated(rt));
    return rt;
}

START_TEST(example_machines_parse)
{
    static const char *const files[] = {"bench/machines/epyc2s-h200-u55c.machine", "bench/machines/epyc2s.machine",
                                        "bench/machines/ws-4090.machine", "bench/machines/ws-3090-u55c.machine",
                                        "bench/machines/rtx6000ada.machine"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        hx_machine m;
        HX_ASSERT_OK(hx_machine_load(files[i], &m));
        ck_assert_int_ge(m.ndevices, 1);
        for (int d = 0; d < m.ndevices; d++)
            for (int p = 0; p < HX_PREC_COUNT; p++)
                ck_assert(m.dev[d].flops[p] > 0);
    }
    hx_machine m;
    HX_ASSERT_OK(hx_machine_load("bench/machines/epyc2s-h200-u55c.machine", &m));
    ck_assert_int_eq(m.ndevices, 3);
    ck_assert_int_eq(m.dev[1].family, HX_FAMILY_CUDA);
    ck_assert(!m.dev[1].unified);
    ck_assert(fabs(m.dev[1].mem_bw - 4.8e12) < 1);
    ck_assert(fabs(m.dev[1].link_latency - 8e-6) < 1e-12);
    ck_assert(hx_machine_runs(&m.dev[2], "attention") && !hx_machine_runs(&m.dev[2], "matmul"));
    /* The GPU's calibrated rates, not its peaks. */
    ck_assert(m.dev[1].gemm[HX_PREC_INT8] > 0 && m.dev[1].gemm[HX_PREC_INT8] < 0.2 * m.dev[1].flops[HX_PREC_INT8]);
    ck_assert(m.dev[1].stream[HX_PREC_INT8] > 0 && m.dev[1].additive);
    ck_assert(m.dev[0].gemm[HX_PREC_INT8] == 0 && !m.dev[0].additive);
    /* The fused projections go where matmul goes. */
    ck_assert(!hx_machine_runs(&m.dev[2], "matmul_multi"));
    hx_machine_device mm = {.nruns = 1, .runs = {"matmul"}};
    ck_assert(hx_machine_runs(&mm, "matmul_multi") && !hx_machine_runs(&mm, "rope"));
}
END_TEST

/* Each broken description: its error names the fault. */
START_TEST(broken_descriptions_are_refused)
{
    static const struct {
        const char *text, *fragment;
    } cases[] = {
        {"", "no [device] section"},
        {"machine = x\n", "no [device] section"},
        {"family = cpu\n", "before the first [device]"},
        {"[device a]\nflops.f32 = 1T\nmemory = 1G\n", "needs flops.f32, memory and bandwidth"},
        {"[device a]\nflops.f32 = 1T\nmemory = 1G\nbandwidth = 1G\ncolour = red\n", "unknown key 'colour'"},
        {"[device a]\nflops.f32 = fast\n", "flops.f32 = 'fast'"},
        {"[device a]\nflops.f32 = -1T\n", "non-negative"},
        {"[device a]\nbandwidth = 10us\n", "suffixes k M G T P"},
        {"[device a]\nlatency = 10G\n", "of seconds"},
        {"[device a]\nfamily = tpu\n", "expected one of cpu, opencl, cuda"},
        {"[device a]\nkind = dsp\n", "expected one of cpu, gpu, fpga, accelerator"},
        {"[device a]\nunified = maybe\n", "expected yes or no"},
        {"[device a]\nunits = 2.5\n", "whole number"},
        {"[device a]\nefficiency = 0 1\n", "fractions in (0, 1]"},
        {"[device a]\nstream.int8 = 1.5\n", "stream.int8: a fraction in (0, 1]"},
        {"[device a]\ngemm.f16 = fast\n", "gemm.f16 = 'fast'"},
        {"[device a]\noverlap = sometimes\n", "overlap = 'sometimes': expected yes or no"},
        {"[device a]\nruns = ,\n", "empty list"},
        {"[device a]\ntimes = guessed\n", "roofline, measured"},
        {"[device a]\nlaunch = measured\n", "the time to use where none was measured"},
        {"[device a]\nlaunch = measured soon\n", "launch = 'soon'"},
        {"[device a]\nname\n", "expected 'key = value'"},
        {"[device a]\nname =\n", "has no value"},
        {"[dev a]\n", "expected a section"},
        {"[device a]\nfamily = cuda\nflops.f32 = 1T\nmemory = 1G\nbandwidth = 1G\nunified = no\n", "needs link"},
        {"[device a]\nflops.f32 = 1T\nmemory = 1G\nbandwidth = 1G\nunified = no\nlink = 1G\n",
         "a cpu device works in host memory"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hx_machine m;
        hx_status s = hx_machine_parse(cases[i].text, "case", &m);
        ck_assert_msg(s == HX_ERR_FORMAT, "case %zu: %s", i, hx_status_str(s));
        ck_assert_msg(strstr(hx_last_error(), cases[i].fragment), "case %zu: '%s' lacks '%s'", i, hx_last_error(),
                      cases[i].fragment);
    }
    char longline[700];
    memset(longline, 'x', sizeof longline - 1);
    longline[sizeof longline - 1] = 0;
    hx_machine m;
    ck_assert_int_eq(hx_machine_parse(longline, "case", &m), HX_ERR_FORMAT);
    ck_assert_int_eq(hx_machine_load("/nonexistent/x.machine", &m), HX_ERR_IO);

    /* The runtime says which file failed and stays unopened. */
    hx_runtime_options o = hx_runtime_options_default();
    o.machine = "/nonexistent/x.machine";
    hx_runtime *rt = NULL;
    ck_assert_int_eq(hx_runtime_open(&rt, &o), HX_ERR_IO);
    ck_assert_ptr_null(rt);
    ck_assert(strstr(hx_last_error(), "/nonexistent/x.machine"));
}
END_TEST

static double gemm(hx_runtime *rt, uint32_t M, uint32_t N, uint32_t K, int device, hx_buffer *A, hx_buffer *B,
                   hx_buffer *C)
{
    hx_args_gemm_f32 g = {M, N, K};
    hx_task_desc d = {.codelet = hx_codelet_builtin("gemm_f32"), .nbuffers = 3, .buffers = {A, B, C},
                      .modes = {HX_R, HX_R, HX_W}, .args = &g, .args_size = sizeof g, .device = device};
    double t0 = hx_runtime_clock(rt);
    HX_ASSERT_OK(hx_task_submit(rt, &d, NULL));
    HX_ASSERT_OK(hx_runtime_wait_all(rt));
    return hx_runtime_clock(rt) - t0;
}

/* A task takes launch + max(flops / (peak * eff), bytes / (bw * eff)). */
START_TEST(task_time_is_the_roofline)
{
    char path[64];
    hx_runtime *rt = open_sim(cpu_only, "eager", path, sizeof path);
    ck_assert_int_eq(hx_runtime_device_count(rt), 1);
    hx_device_info in;
    HX_ASSERT_OK(hx_runtime_device_info(rt, 0, &in));
    ck_assert_str_eq(in.name, "cpu");
    ck_assert_int_eq(in.compute_units, 8);
    hx_buffer *A, *B, *C;
    const uint32_t M = 512, N = 1024, K = 768;
    HX_ASSERT_OK(hx_buffer_create(rt, 4ull * M * K, &A));
    HX_ASSERT_OK(hx_buffer_create(rt, 4ull * N * K, &B));
    HX_ASSERT_OK(hx_buffer_create(rt, 4ull * M * N, &C));
    double flops = 2.0 * M * N * K, bytes = 4.0 * ((double)M * K + (double)N * K + (double)M * N);
    double compute = flops / 0.5e12, memory = bytes / 80e9;
    double want = 3e-6 + (compute > memory ? compute : memory);
    double got = gemm(rt, M, N, K, -1, A, B, C);
    ck_assert_msg(fabs(got - want) <= 1e-12 * want, "simulated %.9g s, roofline %.9g s", got, want);
    /* Memory bound: a thin product. */
    want = 3e-6 + (4.0 * (1.0 * K + 1024.0 * K + 1024.0)) / 80e9;
    got = gemm(rt, 1, 1024, K, -1, A, B, C);
    ck_assert_msg(fabs(got - want) <= 1e-12 * want, "simulated %.9g s, roofline %.9g s", got, want);
    hx_device_stats ds;
    HX_ASSERT_OK(hx_device_stats_get(rt, 0, &ds));
    ck_assert_int_eq(ds.tasks, 2);
    /* The host reads a buffer: it gets memory (zeros) only now. */
    float *c;
    HX_ASSERT_OK(hx_buffer_acquire(C, HX_R, (void **)&c));
    ck_assert(c[0] == 0 && c[(size_t)M * N - 1] == 0);
    hx_buffer_destroy(A);
    hx_buffer_destroy(B);
    hx_buffer_destroy(C);
    hx_runtime_close(rt);
    unlink(path);

    /* A calibrated rate and stream fraction, times added (overlap = no). */
    char text[512];
    snprintf(text, sizeof text, "%sgemm.f32 = 0.2T\nstream.f32 = 0.5\noverlap = no\n", cpu_only);
    rt = open_sim(text, "eager", path, sizeof path);
    HX_ASSERT_OK(hx_buffer_create(rt, 4ull * M * K, &A));
    HX_ASSERT_OK(hx_buffer_create(rt, 4ull * N * K, &B));
    HX_ASSERT_OK(hx_buffer_create(rt, 4ull * M * N, &C));
    want = 3e-6 + flops / 0.2e12 + bytes / 50e9;
    got = gemm(rt, M, N, K, -1, A, B, C);
    ck_assert_msg(fabs(got - want) <= 1e-12 * want, "simulated %.9g s, calibrated sum %.9g s", got, want);
    hx_buffer_destroy(A);
    hx_buffer_destroy(B);
    hx_buffer_destroy(C);
    hx_runtime_close(rt);
    unlink(path);
}
END_TEST

/* A graph launch (all of a step's tasks on the CPU) is one task to the
 * simulated worker as to a real one: its tasks' times and one launch,
 * where the same tasks one by one pay a launch each. */
START_TEST(a_graph_launch_pays_one_launch)
{
    char path[64];
    hx_runtime *rt = open_sim(cpu_only, "eager", path, sizeof path);
    enum { N = 1 << 16, TASKS = 20 };
    hx_buffer *x, *y, *z;
    HX_ASSERT_OK(hx_buffer_create(rt, 4 * N, &x));
    HX_ASSERT_OK(hx_buffer_create(rt, 4 * N, &y));
    HX_ASSERT_OK(hx_buffer_create(rt, 4 * N, &z));
    const hx_args_vector_add a = {N};
    hx_task_recorded r[TASKS];
    for (int i = 0; i < TASKS; i++) {
        hx_task_desc d = {.codelet = hx_codelet_builtin("vector_add"), .nbuffers = 3,
                          .buffers = {i % 2 ? z : y, x, i % 2 ? y : z}, .modes = {HX_R, HX_R, HX_W},
                          .args = &a, .args_size = sizeof a, .device = -1};
        HX_ASSERT_OK(hx_task_record(rt, &d, &r[i]));
    }
    double took[2];
    for (int launch = 1; launch >= 0; launch--) {
        rt->graph_launch = launch;
        hx_runtime_stats_reset(rt);
        const double t0 = hx_runtime_now(rt);
        HX_ASSERT_OK(hx_task_submit_recorded(rt, r, TASKS));
        HX_ASSERT_OK(hx_runtime_wait_all(rt));
        took[launch] = hx_runtime_now(rt) - t0;
        hx_runtime_stats st;
        hx_runtime_stats_get(rt, &st);
        ck_assert_int_eq(st.graph_launches, launch);
        ck_assert_int_eq(st.tasks_done, TASKS);
        hx_device_stats ds;
        HX_ASSERT_OK(hx_device_stats_get(rt, 0, &ds));
        ck_assert_int_eq(ds.tasks, TASKS);
    }
    ck_assert_msg(fabs(took[0] - took[1] - (TASKS - 1) * 3e-6) < 1e-12, "one by one %.9g s, as a graph %.9g s",
                  took[0], took[1]);
    hx_buffer_destroy(x);
    hx_buffer_destroy(y);
    hx_buffer_destroy(z);
    hx_runtime_close(rt);
    unlink(path);
}
END_TEST

/* A 1 ms task: a kernel much longer than any hand-over. */
static int nap_cpu(const hx_cpu_call *c)
{
    if (c->ith == 0)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    return 0;
}

/* Workers measure each device's time per task outside its kernels
 * (task_launch in the models) and "launch = measured" reads it: a chain of
 * 1 ms tasks on this host's CPU measures well under 1 ms (the kernels are
 * not in it), and a description of that CPU takes it in place of its
 * stated 1 s; without measurements the stated time stands. */
START_TEST(launch_measured_is_the_time_outside_kernels)
{
    static const hx_codelet nap = {.name = "nap", .cpu = nap_cpu};
    char dir[] = "/tmp/hx-launch-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = "cpu";
    o.perfmodel_dir = dir;
    o.inject = "";
    o.trace = "";
    hx_runtime *real;
    HX_ASSERT_OK(hx_runtime_open(&real, &o));
    hx_buffer *b;
    HX_ASSERT_OK(hx_buffer_create(real, 64, &b));
    for (int i = 0; i < 4 * HX_PM_LAUNCH_BATCH; i++) {
        hx_task_desc d = {.codelet = &nap, .nbuffers = 1, .buffers = {b}, .modes = {HX_RW}, .device = -1};
        HX_ASSERT_OK(hx_task_submit(real, &d, NULL));
    }
    HX_ASSERT_OK(hx_runtime_wait_all(real));
    hx_device_info in;
    HX_ASSERT_OK(hx_runtime_device_info(real, 0, &in));
    hx_buffer_destroy(b);
    hx_runtime_close(real); /* saves the models */

    char text[1024], path[64];
    for (int measured = 1; measured >= 0; measured--) {
        snprintf(text, sizeof text,
                 "[device 0]\nname = %s\nfamily = cpu\nunits = %d\nflops.f32 = 1T\nmemory = 1G\n"
                 "bandwidth = 10G\ntimes = measured\nlaunch = measured 1s\n",
                 in.name, in.compute_units);
        write_file(path, sizeof path, text);
        hx_runtime_options so = hx_runtime_options_default();
        so.machine = path;
        so.perfmodel_dir = measured ? dir : "/nonexistent/none measured";
        so.inject = "";
        so.trace = "";
        hx_runtime *rt;
        HX_ASSERT_OK(hx_runtime_open(&rt, &so));
        const double launch = hx_sim_device_described(rt->devices[0])->launch;
        if (measured)
            ck_assert_msg(launch > 0 && launch < 0.5e-3, "measured launch %.3g s", launch);
        else
            ck_assert_msg(launch == 1, "launch %.3g s without measurements", launch);
        hx_runtime_close(rt);
        unlink(path);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* A device with its own memory pays latency + bytes / link for inputs it
 * lacks, once; the host reading its output pays the way back. */
START_TEST(copies_cost_the_link)
{
    char path[64];
    hx_runtime *rt = open_sim(cpu_gpu, "eager", path, sizeof path);
    ck_assert_int_eq(hx_runtime_device_count(rt), 3);
    hx_buffer *A, *B, *C;
    const uint32_t M = 64, N = 4096, K = 4096;
    HX_ASSERT_OK(hx_buffer_create(rt, 4ull * M * K, &A));
    HX_ASSERT_OK(hx_buffer_create(rt, 4ull * N * K, &B));
    HX_ASSERT_OK(hx_buffer_create(rt, 4ull * M * N, &C));
    double flops = 2.0 * M * N * K, bytes = 4.0 * ((double)M * K + (double)N * K + (double)M * N);
    double compute = flops / 50e12, memory = bytes / 2e12;
    double exec = 4e-6 + (compute > memory ? compute : memory);
    double in = 2 * 5e-6 + 4.0 * ((double)M * K + (double)N * K) / 10e9;
    double got = gemm(rt, M, N, K, 1, A, B, C);
    ck_assert_msg(fabs(got - (in + exec)) <= 1e-9 * (in + exec), "simulated %.9g s, expected %.9g", got, in + exec);
    hx_runtime_stats st;
    hx_runtime_stats_get(rt, &st);
    ck_assert_int_eq(st.copies, 2);
    ck_assert_int_eq(st.bytes_copied, 4ull * M * K + 4ull * N * K);
    /* Again: the inputs are there. */
    got = gemm(rt, M, N, K, 1, A, B, C);
    ck_assert_msg(fabs(got - exec) <= 1e-9 * exec, "simulated %.9g s, expected %.9g", got, exec);
    double t0 = hx_runtime_clock(rt);
    void *host;
    HX_ASSERT_OK(hx_buffer_acquire(C, HX_R, &host));
    hx_runtime_stats_get(rt, &st);
    ck_assert_int_eq(st.copies, 3);
    (void)t0;
    /* The FPGA implements what its description lists, and holds 64 MB. */
    ck_assert(hx_device_implements(rt, 2, "attention") && !hx_device_implements(rt, 2, "gemm_f32"));
    ck_assert(hx_device_implements(rt, 1, "gemm_f32"));
    hx_buffer *big;
    HX_ASSERT_OK(hx_buffer_create(rt, 100u << 20, &big));
    hx_args_vector_add va = {(100u << 20) / 4 / 3};
    hx_task_desc d = {.codelet = hx_codelet_builtin("vector_add"), .nbuffers = 3, .buffers = {big, big, big},
                      .modes = {HX_R, HX_R, HX_W}, .args = &va, .args_size = sizeof va, .device = 2};
    hx_task *t;
    HX_ASSERT_OK(hx_task_submit(rt, &d, &t));
    ck_assert_int_eq(hx_task_wait(t), HX_ERR_NO_MEMORY);
    ck_assert_msg(strstr(hx_last_error(), "simulated device 2"), "%s", hx_last_error());
    hx_runtime_wait_all(rt); /* clears the failure */
    /* Still usable. */
    got = gemm(rt, M, N, K, 1, A, B, C);
    ck_assert(got > 0);
    hx_buffer_destroy(big);
    hx_buffer_destroy(A);
    hx_buffer_destroy(B);
    hx_buffer_destroy(C);
    hx_runtime_close(rt);
    unlink(path);
}
END_TEST

/* Slowdowns are simulated (a factor on the device's times); failures are
 * not, and say so. */
START_TEST(injection_in_the_simulator)
{
    char path[64];
    hx_runtime *rt = open_sim(cpu_only, "eager", path, sizeof path);
    hx_buffer *A, *B, *C;
    HX_ASSERT_OK(hx_buffer_create(rt, 4u << 20, &A));
    HX_ASSERT_OK(hx_buffer_create(rt, 4u << 20, &B));
    HX_ASSERT_OK(hx_buffer_create(rt, 4u << 20, &C));
    double base = gemm(rt, 256, 256, 256, -1, A, B, C);
    hx_injection inj = {.slow = 3};
    HX_ASSERT_OK(hx_device_inject(rt, 0, &inj));
    double slow = gemm(rt, 256, 256, 256, -1, A, B, C);
    ck_assert_msg(fabs(slow - 3 * base) <= 1e-12 * slow, "%.9g vs 3 x %.9g", slow, base);
    inj = (hx_injection){.slow = 1, .fail = 0.5};
    HX_ASSERT_OK(hx_device_inject(rt, 0, &inj));
    hx_args_gemm_f32 g = {16, 16, 16};
    hx_task_desc d = {.codelet = hx_codelet_builtin("gemm_f32"), .nbuffers = 3, .buffers = {A, B, C},
                      .modes = {HX_R, HX_R, HX_W}, .args = &g, .args_size = sizeof g, .device = -1};
    hx_task *t;
    HX_ASSERT_OK(hx_task_submit(rt, &d, &t));
    ck_assert_int_eq(hx_task_wait(t), HX_ERR_UNSUPPORTED);
    ck_assert(strstr(hx_last_error(), "not simulated"));
    hx_buffer_destroy(A);
    hx_buffer_destroy(B);
    hx_buffer_destroy(C);
    hx_runtime_close(rt);
    unlink(path);
}
END_TEST

/* Decodes `n` tokens of a model without weights; returns virtual seconds. */
static double decode(hx_runtime *rt, const char *shapes, int n)
{
    hx_model *m;
    HX_ASSERT_OK(hx_model_load_shapes(rt, shapes, "q4_0", NULL, &m));
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(m, &s));
    int32_t ids[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    HX_ASSERT_OK(hx_session_eval(s, ids, 8, 0));
    double t0 = hx_runtime_clock(rt);
    for (int i = 0; i < n; i++)
        HX_ASSERT_OK(hx_session_eval(s, ids + i % 8, 1, 0));
    double sec = hx_runtime_clock(rt) - t0;
    ck_assert_int_eq(hx_model_tokenize(m, "a", 1, 0, 0, NULL, 0, NULL), HX_ERR_UNSUPPORTED);
    hx_session_close(s);
    hx_model_free(m);
    return sec;
}

/* LLaMA-2-70B's graph runs through the simulator without its 39 GB of
 * weights, and the same run on the same machine predicts the same time. */
START_TEST(models_without_weights)
{
    char path[64];
    hx_runtime *rt = open_sim(cpu_gpu, "dmda", path, sizeof path);
    double a = decode(rt, "llama2-70b", 4);
    ck_assert(a > 0);
    hx_runtime_close(rt);
    rt = open_sim(cpu_gpu, "dmda", path, sizeof path);
    double b = decode(rt, "llama2-70b", 4);
    ck_assert_msg(a == b, "two identical simulations: %.9g s and %.9g s", a, b);
    hx_model *m;
    ck_assert_int_eq(hx_model_load_shapes(rt, "llama2-1t", "q4_0", NULL, &m), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_model_load_shapes(rt, "llama2-7b", "nonsense", NULL, &m), HX_ERR_INVALID_ARG);
    hx_runtime_close(rt);
    unlink(path);

    /* On this machine a model without weights would run kernels on nothing. */
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = "cpu";
    o.machine = "";
    HX_ASSERT_OK(hx_runtime_open(&rt, &o));
    ck_assert(!hx_runtime_simulated(rt));
    ck_assert_int_eq(hx_model_load_shapes(rt, "tiny", "f16", NULL, &m), HX_ERR_UNSUPPORTED);
    hx_runtime_close(rt);
}
END_TEST

/* Two devices on the same cores take turns; on separate cores they overlap. */
START_TEST(devices_sharing_cores_take_turns)
{
    static const char *const pair = "[device cpu]\nflops.f32 = 1T\nmemory = 1G\nbandwidth = 100G\n"
                                    "[device pocl]\nfamily = opencl\nkind = fpga\nflops.f32 = 1T\nmemory = 1G\n"
                                    "bandwidth = 100G\nunified = yes\nshares = cpu\n";
    char path[64];
    for (int sharing = 0; sharing < 2; sharing++) {
        char text[512];
        snprintf(text, sizeof text, "%.*s", (int)(sharing ? strlen(pair) : strlen(pair) - strlen("shares = cpu\n")),
                 pair);
        hx_runtime *rt = open_sim(text, "eager", path, sizeof path);
        hx_buffer *b[4];
        for (int i = 0; i < 4; i++)
            HX_ASSERT_OK(hx_buffer_create(rt, 4u << 20, &b[i]));
        hx_args_gemm_f32 g = {256, 256, 256};
        for (int dev = 0; dev < 2; dev++) {
            hx_task_desc d = {.codelet = hx_codelet_builtin("gemm_f32"), .nbuffers = 3,
                              .buffers = {b[0], b[1], b[2 + dev]}, .modes = {HX_R, HX_R, HX_W}, .args = &g,
                              .args_size = sizeof g, .device = dev};
            HX_ASSERT_OK(hx_task_submit(rt, &d, NULL));
        }
        double t0 = hx_runtime_clock(rt);
        HX_ASSERT_OK(hx_runtime_wait_all(rt));
        double both = hx_runtime_clock(rt) - t0;
        double one = gemm(rt, 256, 256, 256, 0, b[0], b[1], b[2]);
        ck_assert_msg(fabs(both - (sharing ? 2 : 1) * one) <= 1e-12 * both, "sharing %d: %.9g s for two, %.9g for one",
                      sharing, both, one);
        for (int i = 0; i < 4; i++)
            hx_buffer_destroy(b[i]);
        hx_runtime_close(rt);
        unlink(path);
    }
    hx_machine m;
    ck_assert_int_eq(hx_machine_parse("[device a]\nflops.f32 = 1T\nmemory = 1G\nbandwidth = 1G\nshares = b\n", "case",
                                      &m),
                     HX_ERR_FORMAT);
    ck_assert(strstr(hx_last_error(), "not another device"));
}
END_TEST

/* Weights copied once serve every later token: dmda must not keep them on
 * the CPU forever because the first copy costs more than one CPU task
 * (their copy is amortized over their reads), nor learn the copy as the
 * GPU's kernel time. */
START_TEST(dmda_moves_weights_to_a_faster_device)
{
    static const char *const box = "[device cpu]\nflops.f32 = 0.2T\nmemory = 64G\nbandwidth = 20G\n"
                                   "[device gpu]\nfamily = cuda\nkind = gpu\nflops.f32 = 50T\nmemory = 80G\n"
                                   "bandwidth = 2T\nunified = no\nlink = 10G\nlatency = 1us\nlaunch = 1us\n";
    char path[64];
    double per_token[2];
    for (int with_gpu = 0; with_gpu < 2; with_gpu++) {
        write_file(path, sizeof path, box);
        hx_runtime_options o = hx_runtime_options_default();
        o.machine = path;
        o.sched = "dmda";
        o.devices = with_gpu ? "all" : "cpu";
        o.perfmodel_dir = "off";
        o.inject = "";
        o.trace = "";
        hx_runtime *rt;
        HX_ASSERT_OK(hx_runtime_open(&rt, &o));
        hx_model *m;
        HX_ASSERT_OK(hx_model_load_shapes(rt, "small", "q8_0", NULL, &m));
        hx_session *s;
        HX_ASSERT_OK(hx_session_open(m, &s));
        int32_t id = 7;
        for (int i = 0; i < 48; i++)
            HX_ASSERT_OK(hx_session_eval(s, &id, 1, 0));
        double t0 = hx_runtime_clock(rt);
        for (int i = 0; i < 16; i++)
            HX_ASSERT_OK(hx_session_eval(s, &id, 1, 0));
        per_token[with_gpu] = (hx_runtime_clock(rt) - t0) / 16;
        if (with_gpu) {
            hx_device_stats gs;
            HX_ASSERT_OK(hx_device_stats_get(rt, 1, &gs));
            ck_assert_msg(gs.tasks > 0, "the GPU ran nothing");
        }
        hx_session_close(s);
        hx_model_free(m);
        hx_runtime_close(rt);
        unlink(path);
    }
    ck_assert_msg(per_token[1] < 0.5 * per_token[0], "a token takes %.3g s with the GPU, %.3g s on the CPU alone",
                  per_token[1], per_token[0]);
}
END_TEST

/* With the GEMMs on a GPU with its own memory, `colocated` keeps a layer
 * there: under static every task of a decode step runs on the GPU and only
 * the step's inputs and logits cross the link. */
START_TEST(colocated_layers_stay_on_the_gpu)
{
    char path[64];
    hx_runtime *rt = open_sim(cpu_gpu, "static", path, sizeof path);
    hx_model_options mo = hx_model_options_default();
    mo.partition = "colocated";
    hx_model *m;
    HX_ASSERT_OK(hx_model_load_shapes(rt, "small", "q8_0", &mo, &m));
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(m, &s));
    int32_t id = 3;
    HX_ASSERT_OK(hx_session_eval(s, &id, 1, 0));
    hx_runtime_stats_reset(rt);
    for (int i = 0; i < 4; i++)
        HX_ASSERT_OK(hx_session_eval(s, &id, 1, 0));
    hx_device_stats cpu, gpu;
    HX_ASSERT_OK(hx_device_stats_get(rt, 0, &cpu));
    HX_ASSERT_OK(hx_device_stats_get(rt, 1, &gpu));
    hx_runtime_stats st;
    hx_runtime_stats_get(rt, &st);
    ck_assert_msg(cpu.tasks == 0 && gpu.tasks == st.tasks_done, "cpu %llu, gpu %llu of %llu tasks",
                  (unsigned long long)cpu.tasks, (unsigned long long)gpu.tasks, (unsigned long long)st.tasks_done);
    /* Per step: ids, positions, KV metadata and out rows in, the logits out. */
    ck_assert_msg(st.copies <= 4 * 6, "%llu copies in 4 steps", (unsigned long long)st.copies);
    hx_session_close(s);
    hx_model_free(m);
    hx_runtime_close(rt);
    unlink(path);
}
END_TEST

/* KV blocks as the unit of residence (hx_buffer_set_blocks): the GPU and
 * an FPGA that runs the attention ops have their own memory, the FPGA
 * enough for a KV cache. */
static const char *const blocks_box = "machine = blocks test box\n"
                                      "[device cpu]\nfamily = cpu\nkind = cpu\nflops.f32 = 1T\n"
                                      "memory = 64G\nbandwidth = 100G\nlaunch = 3us\n"
                                      "[device gpu]\nfamily = cuda\nkind = gpu\nflops.f32 = 50T\n"
                                      "memory = 80G\nbandwidth = 2T\nunified = no\nlink = 10G\nlatency = 5us\n"
                                      "[device fpga]\nfamily = opencl\nkind = fpga\nflops.f32 = 1T\n"
                                      "memory = 8G\nbandwidth = 400G\nunified = no\nlink = 10G\n"
                                      "latency = 5us\nruns = attention kv_store vector_add\n";

static hx_runtime_stats stats_now(hx_runtime *rt)
{
    hx_runtime_stats st;
    hx_runtime_stats_get(rt, &st);
    return st;
}

/* A vector_add on `dev` reading x's `blocks` (R), y (R) and writing z. */
static void add_on(hx_runtime *rt, int dev, hx_buffer *x, hx_buffer *y, hx_buffer *z, const uint32_t *blocks,
                   uint32_t n, hx_access xmode)
{
    hx_args_vector_add va = {16};
    hx_task_desc d = {.codelet = hx_codelet_builtin("vector_add"), .nbuffers = 3, .buffers = {x, y, z},
                      .modes = {xmode, HX_R, HX_W}, .args = &va, .args_size = sizeof va, .device = dev,
                      .blocks = blocks, .nblocks = n};
    hx_task *t;
    HX_ASSERT_OK(hx_task_submit(rt, &d, &t));
    HX_ASSERT_OK(hx_task_wait(t));
}

enum { BLOCK = 4096, NB = 64 };

/* Bytes moved are the named blocks', consecutive ones in one copy; a
 * block written on the device is the only one that comes back. */
START_TEST(a_task_moves_only_the_blocks_it_names)
{
    char path[64];
    hx_runtime *rt = open_sim(blocks_box, "eager", path, sizeof path);
    const int gpu = 1;
    hx_buffer *x, *y, *z;
    HX_ASSERT_OK(hx_buffer_create(rt, (size_t)BLOCK * NB, &x));
    HX_ASSERT_OK(hx_buffer_create(rt, 64, &y));
    HX_ASSERT_OK(hx_buffer_create(rt, 64, &z));
    HX_ASSERT_OK(hx_buffer_set_blocks(x, BLOCK));

    hx_runtime_stats_reset(rt);
    add_on(rt, gpu, x, y, z, (const uint32_t[]){5}, 1, HX_R);
    hx_runtime_stats st = stats_now(rt);
    ck_assert_uint_eq(st.bytes_copied, BLOCK + 64); /* block 5 and y */
    ck_assert_uint_eq(st.copies, 2);

    /* 5 is there; 6 and 7 come in one copy, 9 in another. */
    hx_runtime_stats_reset(rt);
    add_on(rt, gpu, x, y, z, (const uint32_t[]){5, 6, 7, 9}, 4, HX_R);
    st = stats_now(rt);
    ck_assert_uint_eq(st.bytes_copied, 3 * BLOCK);
    ck_assert_uint_eq(st.copies, 2);

    /* Written there: block 3 is the GPU's alone, and the host takes back
     * that block only. */
    add_on(rt, gpu, x, y, z, (const uint32_t[]){3}, 1, HX_RW);
    hx_runtime_stats_reset(rt);
    void *host;
    HX_ASSERT_OK(hx_buffer_acquire(x, HX_R, &host));
    st = stats_now(rt);
    ck_assert_uint_eq(st.bytes_copied, BLOCK);

    /* The host rewrites it all: a task naming no blocks moves them all. */
    HX_ASSERT_OK(hx_buffer_acquire(x, HX_W, &host));
    hx_runtime_stats_reset(rt);
    add_on(rt, gpu, x, y, z, NULL, 0, HX_R);
    st = stats_now(rt);
    ck_assert_uint_eq(st.bytes_copied, (uint64_t)BLOCK * NB);
    ck_assert_uint_eq(st.copies, 1);

    /* Blocks whose contents no longer matter are copied nowhere. */
    HX_ASSERT_OK(hx_buffer_acquire(x, HX_W, &host));
    hx_buffer_discard(x, (hx_block_list){(const uint32_t[]){10, 11}, 2});
    hx_runtime_stats_reset(rt);
    add_on(rt, gpu, x, y, z, (const uint32_t[]){10, 11}, 2, HX_RW);
    ck_assert_uint_eq(stats_now(rt).bytes_copied, 0);
    add_on(rt, gpu, x, y, z, (const uint32_t[]){11, 12}, 2, HX_R);
    ck_assert_uint_eq(stats_now(rt).bytes_copied, BLOCK); /* 12 only */

    /* The host takes some blocks alone: the others stay valid where
     * they are. */
    add_on(rt, gpu, x, y, z, (const uint32_t[]){20, 21}, 2, HX_RW);
    hx_runtime_stats_reset(rt);
    HX_ASSERT_OK(hx_buffer_acquire_blocks(x, HX_R, (hx_block_list){(const uint32_t[]){20}, 1}, &host));
    ck_assert_uint_eq(stats_now(rt).bytes_copied, BLOCK);
    HX_ASSERT_OK(hx_buffer_acquire_blocks(x, HX_W, (hx_block_list){(const uint32_t[]){22}, 1}, &host));
    ck_assert_uint_eq(stats_now(rt).bytes_copied, BLOCK);
    add_on(rt, gpu, x, y, z, (const uint32_t[]){21, 22}, 2, HX_R);
    ck_assert_uint_eq(stats_now(rt).bytes_copied, 2 * BLOCK); /* 22 only */
    HX_ASSERT_OK(hx_buffer_acquire(x, HX_R, &host));
    ck_assert_uint_eq(stats_now(rt).bytes_copied, 5 * BLOCK); /* 21, and 10 and 11 written there before */
    ck_assert_int_eq(hx_buffer_acquire_blocks(x, HX_R, (hx_block_list){(const uint32_t[]){NB}, 1}, &host),
                     HX_ERR_RANGE);

    /* Bad block lists and divisions are refused; the runtime goes on. */
    hx_args_vector_add va = {16};
    hx_task_desc d = {.codelet = hx_codelet_builtin("vector_add"), .nbuffers = 3, .buffers = {x, y, z},
                      .modes = {HX_R, HX_R, HX_W}, .args = &va, .args_size = sizeof va, .device = gpu,
                      .blocks = (const uint32_t[]){NB}, .nblocks = 1};
    ck_assert_int_eq(hx_task_submit(rt, &d, NULL), HX_ERR_RANGE);
    d.blocks = NULL;
    ck_assert_int_eq(hx_task_submit(rt, &d, NULL), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_buffer_set_blocks(x, BLOCK), HX_ERR_STATE);
    ck_assert_int_eq(hx_buffer_set_blocks(y, 0), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_buffer_set_blocks(y, 65), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_buffer_set_blocks(NULL, 4), HX_ERR_INVALID_ARG);
    add_on(rt, gpu, x, y, z, (const uint32_t[]){NB - 1}, 1, HX_R);

    hx_buffer_destroy(x);
    hx_buffer_destroy(y);
    hx_buffer_destroy(z);
    hx_runtime_close(rt);
    unlink(path);
}
END_TEST

static hx_device_stats device_now(hx_runtime *rt, int dev)
{
    hx_device_stats ds;
    HX_ASSERT_OK(hx_device_stats_get(rt, dev, &ds));
    return ds;
}

/* A device with memory of its own allocates a divided buffer whole; the
 * blocks its tasks named, and no others, count as what copies sized to
 * the blocks it holds would take; a discarded block frees its slot. */
START_TEST(a_device_counts_the_blocks_it_was_asked_for)
{
    char path[64];
    hx_runtime *rt = open_sim(blocks_box, "eager", path, sizeof path);
    const int gpu = 1, fpga = 2;
    hx_buffer *x, *y, *z;
    HX_ASSERT_OK(hx_buffer_create(rt, (size_t)BLOCK * NB, &x));
    HX_ASSERT_OK(hx_buffer_create(rt, 64, &y));
    HX_ASSERT_OK(hx_buffer_create(rt, 64, &z));
    HX_ASSERT_OK(hx_buffer_set_blocks(x, BLOCK));

    add_on(rt, gpu, x, y, z, (const uint32_t[]){5}, 1, HX_R);
    hx_device_stats ds = device_now(rt, gpu);
    ck_assert_uint_eq(ds.kv_bytes_allocated, (uint64_t)BLOCK * NB); /* y and z are not divided */
    ck_assert_uint_eq(ds.kv_bytes_named, BLOCK);
    add_on(rt, gpu, x, y, z, (const uint32_t[]){5, 6, 7, 9}, 4, HX_R);
    add_on(rt, gpu, x, y, z, (const uint32_t[]){7, 10}, 2, HX_RW);
    ck_assert_uint_eq(device_now(rt, gpu).kv_bytes_named, 5 * BLOCK);
    ck_assert_uint_eq(device_now(rt, fpga).kv_bytes_allocated, 0);
    /* 7 and 10 were written there: valid there alone until the host
     * takes one back. */
    ck_assert_uint_eq(device_now(rt, gpu).kv_bytes_device_only, 2 * BLOCK);
    void *host;
    HX_ASSERT_OK(hx_buffer_acquire_blocks(x, HX_R, (hx_block_list){(const uint32_t[]){7}, 1}, &host));
    ds = device_now(rt, gpu);
    ck_assert_uint_eq(ds.kv_bytes_device_only, BLOCK);
    ck_assert_uint_eq(ds.kv_bytes_device_only_peak, 2 * BLOCK);

    /* Discarded blocks free their slots; the peak stays until a reset. */
    hx_buffer_discard(x, (hx_block_list){(const uint32_t[]){5, 6, 11}, 3});
    ds = device_now(rt, gpu);
    ck_assert_uint_eq(ds.kv_bytes_named, 3 * BLOCK);
    ck_assert_uint_eq(ds.kv_bytes_named_peak, 5 * BLOCK);
    hx_runtime_stats_reset(rt);
    ck_assert_uint_eq(device_now(rt, gpu).kv_bytes_named_peak, 3 * BLOCK);
    add_on(rt, gpu, x, y, z, (const uint32_t[]){5}, 1, HX_R);
    ck_assert_uint_eq(device_now(rt, gpu).kv_bytes_named, 4 * BLOCK);

    /* A task naming no blocks takes the whole buffer. */
    add_on(rt, fpga, x, y, z, NULL, 0, HX_R);
    ds = device_now(rt, fpga);
    ck_assert_uint_eq(ds.kv_bytes_allocated, (uint64_t)BLOCK * NB);
    ck_assert_uint_eq(ds.kv_bytes_named, (uint64_t)BLOCK * NB);

    hx_buffer_destroy(x);
    for (int d = gpu; d <= fpga; d++) {
        ds = device_now(rt, d);
        ck_assert_uint_eq(ds.kv_bytes_allocated, 0);
        ck_assert_uint_eq(ds.kv_bytes_named, 0);
        ck_assert_uint_eq(ds.kv_bytes_device_only, 0);
    }
    ck_assert_uint_eq(device_now(rt, 0).kv_bytes_allocated, 0); /* the CPU uses host memory */
    hx_buffer_destroy(y);
    hx_buffer_destroy(z);
    hx_runtime_close(rt);
    unlink(path);
}
END_TEST

/* A buffer divided within a block space is stored per block on a device
 * with memory of its own: slots for the blocks named there (8 at first,
 * then twice as many), freed when their contents stop mattering and
 * handed to the next blocks named; the host keeps every block.  The
 * space translates references to its blocks into each device's slots. */
START_TEST(a_block_space_stores_named_blocks_in_slots)
{
    char path[64];
    hx_runtime *rt = open_sim(blocks_box, "eager", path, sizeof path);
    const int gpu = 1, fpga = 2;
    hx_block_space *space;
    HX_ASSERT_OK(hx_block_space_create(rt, NB, &space));
    hx_buffer *x, *x2, *y, *z;
    HX_ASSERT_OK(hx_buffer_create(rt, (size_t)BLOCK * NB, &x));
    HX_ASSERT_OK(hx_buffer_create(rt, (size_t)BLOCK * NB, &x2));
    HX_ASSERT_OK(hx_buffer_create(rt, 64, &y));
    HX_ASSERT_OK(hx_buffer_create(rt, 64, &z));
    HX_ASSERT_OK(hx_buffer_set_blocks_in(x, BLOCK, space));
    HX_ASSERT_OK(hx_buffer_set_blocks_in(x2, BLOCK, space));
    ck_assert_int_eq(hx_buffer_set_blocks_in(y, 8, space), HX_ERR_INVALID_ARG); /* 8 blocks, not NB */

    add_on(rt, gpu, x, y, z, (const uint32_t[]){40, 5}, 2, HX_R);
    ck_assert_uint_eq(device_now(rt, gpu).kv_bytes_allocated, 8ull * BLOCK);
    ck_assert_uint_eq(hx_block_space_slot(space, gpu, 5), 1); /* in the order named */
    ck_assert_uint_eq(hx_block_space_slot(space, gpu, 40), 0);
    ck_assert_uint_eq(hx_block_space_slot(space, fpga, 5), HX_SLOT_NONE);
    /* Nine blocks named: sixteen slots; the other buffer of the space
     * takes room for the nine slots handed out when a task there uses it. */
    add_on(rt, gpu, x, y, z, (const uint32_t[]){1, 2, 3, 4, 6, 7, 8}, 7, HX_RW);
    ck_assert_uint_eq(device_now(rt, gpu).kv_bytes_allocated, 16ull * BLOCK);
    add_on(rt, gpu, x2, y, z, (const uint32_t[]){40}, 1, HX_R);
    ck_assert_uint_eq(device_now(rt, gpu).kv_bytes_allocated, (16ull + 9) * BLOCK);
    ck_assert_uint_eq(device_now(rt, gpu).kv_bytes_named, 10ull * BLOCK);

    /* Released blocks give their slots to the next ones: no growth. */
    const uint32_t gone[] = {1, 2, 3, 4, 6, 7, 8};
    hx_buffer_discard(x, (hx_block_list){gone, 7});
    hx_buffer_discard(x2, (hx_block_list){gone, 7});
    hx_block_space_release(space, gone, 7);
    ck_assert_uint_eq(hx_block_space_slot(space, gpu, 1), HX_SLOT_NONE);
    add_on(rt, gpu, x, y, z, (const uint32_t[]){50, 51, 52, 53, 54, 55, 56}, 7, HX_RW);
    ck_assert_uint_eq(device_now(rt, gpu).kv_bytes_allocated, (16ull + 9) * BLOCK);
    for (uint32_t b = 50; b <= 56; b++)
        ck_assert_uint_lt(hx_block_space_slot(space, gpu, b), 9);

    /* References: block ids (unit 1) and cache slots (unit 16), to the
     * device's slots; a block without a slot there becomes -1, negative
     * entries stay.  The mapping's version moves with every change. */
    const uint64_t v0 = hx_block_space_version(space, gpu);
    int32_t refs[] = {5, 40, -1, 9, 5 * 16 + 3, 40 * 16 + 15, 9 * 16};
    hx_block_space_translate(space, gpu, refs, 4, 1);
    hx_block_space_translate(space, gpu, refs + 4, 3, 16);
    ck_assert_int_eq(refs[0], 1);
    ck_assert_int_eq(refs[1], 0);
    ck_assert_int_eq(refs[2], -1);
    ck_assert_int_eq(refs[3], -1);
    ck_assert_int_eq(refs[4], 1 * 16 + 3);
    ck_assert_int_eq(refs[5], 0 * 16 + 15);
    ck_assert_int_eq(refs[6], -1);
    ck_assert_uint_eq(hx_block_space_version(space, gpu), v0);
    add_on(rt, gpu, x, y, z, (const uint32_t[]){9}, 1, HX_R);
    ck_assert_uint_ne(hx_block_space_version(space, gpu), v0);
    ck_assert_int_eq(hx_block_space_map(space, gpu, (const uint32_t[]){NB}, 1, &(uint32_t){0}), HX_ERR_RANGE);

    /* A block reference buffer: ranges inside it, and not a divided one. */
    hx_buffer *meta;
    HX_ASSERT_OK(hx_buffer_create(rt, 64, &meta));
    ck_assert_int_eq(hx_buffer_set_block_refs(meta, space, &(hx_block_refs){0, 17, 1}, 1), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_buffer_set_block_refs(meta, space, &(hx_block_refs){0, 4, 0}, 1), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_buffer_set_block_refs(x, space, &(hx_block_refs){0, 4, 1}, 1), HX_ERR_INVALID_ARG);
    HX_ASSERT_OK(hx_buffer_set_block_refs(meta, space, &(hx_block_refs){0, 16, 1}, 1));
    /* A device with memory of its own reads such a buffer, never writes it. */
    hx_args_vector_add va = {16};
    hx_task_desc d = {.codelet = hx_codelet_builtin("vector_add"), .nbuffers = 3, .buffers = {y, z, meta},
                      .modes = {HX_R, HX_R, HX_W}, .args = &va, .args_size = sizeof va, .device = gpu};
    hx_task *t;
    HX_ASSERT_OK(hx_task_submit(rt, &d, &t));
    ck_assert_int_eq(hx_task_wait(t), HX_ERR_UNSUPPORTED);

    hx_buffer_destroy(meta);
    hx_buffer_destroy(x);
    hx_buffer_destroy(x2);
    ck_assert_uint_eq(device_now(rt, gpu).kv_bytes_allocated, 0);
    hx_buffer_destroy(y);
    hx_buffer_destroy(z);
    hx_block_space_destroy(space);
    hx_runtime_close(rt);
    unlink(path);
}
END_TEST

/* A device held to a budget of slots: past it, a block it needs takes
 * the slot of the block named there least recently whose copies the host
 * holds (never a block this task names, nor one valid there alone), and
 * the evicted block's copy there is stale: naming it again brings it over
 * again.  With nothing to evict, a task gets the slots it needs. */
START_TEST(a_device_at_its_budget_evicts_blocks_the_host_holds)
{
    char path[64];
    hx_runtime *rt = open_sim(blocks_box, "eager", path, sizeof path);
    const int gpu = 1;
    hx_block_space *space;
    HX_ASSERT_OK(hx_block_space_create(rt, NB, &space));
    hx_block_space_set_budget(space, gpu, 4);
    hx_buffer *x, *y, *z;
    HX_ASSERT_OK(hx_buffer_create(rt, (size_t)BLOCK * NB, &x));
    HX_ASSERT_OK(hx_buffer_create(rt, 64, &y));
    HX_ASSERT_OK(hx_buffer_create(rt, 64, &z));
    HX_ASSERT_OK(hx_buffer_set_blocks_in(x, BLOCK, space));

    add_on(rt, gpu, x, y, z, (const uint32_t[]){0, 1, 2, 3}, 4, HX_R); /* read: the host keeps them */
    add_on(rt, gpu, x, y, z, (const uint32_t[]){1, 2, 3}, 3, HX_R);
    ck_assert_uint_eq(device_now(rt, gpu).kv_bytes_allocated, 4ull * BLOCK); /* the budget, not 8 */
    hx_runtime_stats_reset(rt);
    add_on(rt, gpu, x, y, z, (const uint32_t[]){4}, 1, HX_R);
    ck_assert_uint_eq(hx_block_space_evictions(space, gpu), 1);
    ck_assert_uint_eq(hx_block_space_slot(space, gpu, 0), HX_SLOT_NONE); /* named least recently */
    ck_assert_uint_eq(stats_now(rt).bytes_copied, BLOCK);
    /* Block 0 comes back: its copy there went with its slot. */
    add_on(rt, gpu, x, y, z, (const uint32_t[]){0}, 1, HX_R);
    ck_assert_uint_eq(stats_now(rt).bytes_copied, 2 * BLOCK);
    ck_assert_uint_eq(hx_block_space_slot(space, gpu, 1), HX_SLOT_NONE);

    /* Written there, blocks are the device's alone: never evicted. */
    add_on(rt, gpu, x, y, z, (const uint32_t[]){2, 3, 4, 0}, 4, HX_RW);
    add_on(rt, gpu, x, y, z, (const uint32_t[]){5}, 1, HX_R);
    ck_assert_uint_eq(hx_block_space_evictions(space, gpu), 2);
    for (uint32_t b = 0; b <= 5; b++) /* 1 went for block 0's return */
        ck_assert_int_eq(hx_block_space_slot(space, gpu, b) == HX_SLOT_NONE, b == 1);
    ck_assert_uint_eq(device_now(rt, gpu).kv_bytes_allocated, 5ull * BLOCK); /* past the budget */
    /* Once the host holds them again they may go. */
    void *host;
    HX_ASSERT_OK(hx_buffer_acquire(x, HX_R, &host));
    add_on(rt, gpu, x, y, z, (const uint32_t[]){6}, 1, HX_R);
    ck_assert_uint_eq(hx_block_space_evictions(space, gpu), 3);
    ck_assert_uint_eq(device_now(rt, gpu).kv_bytes_allocated, 5ull * BLOCK);

    hx_buffer_destroy(x);
    hx_buffer_destroy(y);
    hx_buffer_destroy(z);
    hx_block_space_destroy(space);
    hx_runtime_close(rt);
    unlink(path);
}
END_TEST

/* One decode step (token ids[0]) and its bytes moved, the steady state;
 * then every layer's K and V cache made the host's alone (as a block copy
 * on the host does) and one more step (ids[1]): its bytes and simulated
 * seconds. */
static void step_after_the_host_took_the_caches(hx_runtime *rt, hx_model *m, hx_session *s, const int32_t *ids,
                                                uint64_t *steady, uint64_t *moved, double *seconds)
{
    hx_runtime_stats_reset(rt);
    HX_ASSERT_OK(hx_session_eval(s, ids, 1, 0));
    *steady = stats_now(rt).bytes_copied;
    const hx_kv_pool *kv = m->kv;
    for (uint32_t l = 0; l < kv->n_layer; l++) {
        void *host;
        HX_ASSERT_OK(hx_buffer_acquire(kv->k[l], HX_RW, &host));
        HX_ASSERT_OK(hx_buffer_acquire(kv->v[l], HX_RW, &host));
    }
    hx_runtime_stats_reset(rt);
    const double t0 = hx_runtime_clock(rt);
    HX_ASSERT_OK(hx_session_eval(s, ids + 1, 1, 0));
    *seconds = hx_runtime_clock(rt) - t0;
    *moved = stats_now(rt).bytes_copied;
}

/* The "small" shapes on blocks_box under "static" (attention on the
 * FPGA), a session fed ids[0, n) (3, 4, ...) and then ids[0]. */
static void small_session_on_blocks_box(char *path, size_t cap, hx_runtime **rt, hx_model **m, hx_session **s,
                                        int32_t *ids, int n)
{
    *rt = open_sim(blocks_box, "static", path, cap);
    hx_model_options mo = hx_model_options_default();
    mo.n_ctx = 2048;
    mo.kv_prefix_cache = -1;
    HX_ASSERT_OK(hx_model_load_shapes(*rt, "small", "q8_0", &mo, m));
    HX_ASSERT_OK(hx_session_open(*m, s));
    for (int i = 0; i < n; i++)
        ids[i] = 3 + i;
    HX_ASSERT_OK(hx_session_eval(*s, ids, (size_t)n, 0));
    HX_ASSERT_OK(hx_session_eval(*s, ids, 1, 0));
}

/* Every layer's K and V cache made the host's alone (as a block copy on
 * the host does), then one decode step with attention on the FPGA: what
 * crosses is the session's blocks in each layer, never a layer's whole
 * cache. */
START_TEST(attention_elsewhere_moves_the_blocks_it_reads)
{
    char path[64];
    hx_runtime *rt;
    hx_model *m;
    hx_session *s;
    int32_t ids[40];
    small_session_on_blocks_box(path, sizeof path, &rt, &m, &s, ids, 40);
    /* The steady state: the KV cache stays where attention runs. */
    uint64_t steady, moved;
    double seconds;
    step_after_the_host_took_the_caches(rt, m, s, ids + 1, &steady, &moved, &seconds);
    const hx_kv_pool *kv = m->kv;
    /* 43 tokens in blocks of 16: 3 blocks of K and 3 of V per layer. */
    const uint64_t blocks = 3ull * 2 * kv->n_layer * kv->block_bytes;
    const uint64_t layer = 2ull * kv->n_blocks * kv->block_bytes;
    ck_assert_msg(moved - steady == blocks, "%llu bytes moved (%llu in the steady state), the blocks read are %llu",
                  (unsigned long long)moved, (unsigned long long)steady, (unsigned long long)blocks);
    ck_assert_msg(moved < layer, "%llu bytes moved: one layer's cache is %llu", (unsigned long long)moved,
                  (unsigned long long)layer);
    hx_session_close(s);
    hx_model_free(m);
    hx_runtime_close(rt);
    unlink(path);
}
END_TEST

/* The shapes of LLaMA-2 70B on the example machine, attention on its
 * FPGA ("static" follows the plan), a session `depth` tokens deep whose
 * caches are then made the host's alone (what a device holding only
 * recent blocks amounts to): the KV bytes one decode step moves, beyond
 * the steady state's, with attention whole or split at `split`. */
static uint64_t kv_bytes_of_a_step(uint32_t depth, uint32_t split, uint64_t *block_bytes, double *seconds,
                                   hx_device_stats *kv_device)
{
    hx_runtime_options o = hx_runtime_options_default();
    o.machine = "bench/machines/epyc2s-h200-u55c.machine";
    o.sched = "static";
    o.perfmodel_dir = "off";
    o.inject = "";
    o.trace = "";
    hx_runtime *rt;
    HX_ASSERT_OK(hx_runtime_open(&rt, &o));
    hx_model_options mo = hx_model_options_default();
    mo.n_ctx = depth + 8;
    mo.kv_prefix_cache = -1;
    mo.kv_split = split;
    hx_model *m;
    HX_ASSERT_OK(hx_model_load_shapes(rt, "llama2-70b", "q4_0", &mo, &m));
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(m, &s));
    int32_t *ids = malloc(sizeof *ids * depth);
    for (uint32_t i = 0; i < depth; i++)
        ids[i] = (int32_t)(3 + i % 1000);
    HX_ASSERT_OK(hx_session_eval(s, ids, depth, 0));
    HX_ASSERT_OK(hx_session_eval(s, ids, 1, 0));
    uint64_t steady, moved;
    step_after_the_host_took_the_caches(rt, m, s, ids + 1, &steady, &moved, seconds);
    moved -= steady;
    /* The device attention ran on: the one that allocated the caches. */
    memset(kv_device, 0, sizeof *kv_device);
    for (int d = 0; d < hx_runtime_device_count(rt); d++) {
        hx_device_stats ds;
        HX_ASSERT_OK(hx_device_stats_get(rt, d, &ds));
        if (ds.kv_bytes_allocated > kv_device->kv_bytes_allocated)
            *kv_device = ds;
    }
    const hx_kv_pool *kv = m->kv;
    *block_bytes = 2ull * kv->n_layer * kv->block_bytes; /* a block of K and of V in every layer */
    free(ids);
    hx_session_close(s);
    hx_model_free(m);
    hx_runtime_close(rt);
    return moved;
}

/* With the split, a step after the caches went to the host brings over
 * the device's recent blocks only, whatever the depth; whole attention
 * brings every block of the context.  Exact counts, so moving a layer's
 * cache, or the host's blocks, fails. */
START_TEST(split_attention_moves_only_the_recent_blocks)
{
    const uint32_t depth = 4000, recent = 256;
    uint64_t block, block2;
    double t_whole, t_split;
    hx_device_stats dw, ds;
    const uint64_t whole = kv_bytes_of_a_step(depth, 0, &block, &t_whole, &dw);
    const uint64_t split = kv_bytes_of_a_step(depth, recent, &block2, &t_split, &ds);
    printf("sim: 70B, %u tokens deep: the attention device allocates %.1f MiB of KV (whole layers), whole "
           "attention reads %.1f MiB of it per step, split at %u %.1f MiB\n",
           depth, dw.kv_bytes_allocated / 1048576.0, whole / 1048576.0, recent, split / 1048576.0);
    ck_assert_uint_eq(dw.kv_bytes_allocated, ds.kv_bytes_allocated);
    ck_assert_uint_eq(block, block2);
    /* The step's token is at position depth + 2: whole attention reads
     * blocks 0 .. (depth + 2) / 16; the device's part those from the cut,
     * the block holding position depth + 3 - recent. */
    const uint64_t last = (depth + 2) / 16, cut = (depth + 3 - recent) / 16;
    printf("sim: 70B, %u tokens deep, a step after the KV went to the host: whole %.1f MiB of KV, %.1f ms; "
           "split at %u: %.1f MiB, %.1f ms\n",
           depth, whole / 1048576.0, t_whole * 1e3, recent, split / 1048576.0, t_split * 1e3);
    ck_assert_msg(whole == (last + 1) * block, "whole: %llu bytes, %llu blocks expected", (unsigned long long)whole,
                  (unsigned long long)(last + 1));
    ck_assert_msg(split == (last - cut + 1) * block, "split: %llu bytes, %llu blocks expected",
                  (unsigned long long)split, (unsigned long long)(last - cut + 1));
}
END_TEST

/* Decoding with attention on the FPGA of blocks_box ("small" shapes),
 * the blocks valid in the FPGA's memory alone after each step (what a
 * copy sized to the blocks it holds could not evict without a copy back):
 * with whole attention, kv_store and attention run there and that is
 * every block of the context; split at `recent`, "static" puts kv_store
 * on the host and the FPGA runs the recent part only (one task per layer
 * per step), so it holds no block the host lacks: the blocks it reads
 * are the only ones such a copy would need.  Exact counts. */
START_TEST(split_attention_bounds_the_blocks_only_the_device_holds)
{
    const uint32_t prompt = 200, steps = 40, recent = 64, fpga = 2;
    for (int split = 0; split <= 1; split++) {
        char path[64];
        hx_runtime *rt = open_sim(blocks_box, "static", path, sizeof path);
        hx_model_options mo = hx_model_options_default();
        mo.n_ctx = 2048;
        mo.kv_prefix_cache = -1;
        mo.kv_split = split ? recent : 0;
        hx_model *m;
        HX_ASSERT_OK(hx_model_load_shapes(rt, "small", "q8_0", &mo, &m));
        hx_session *s;
        HX_ASSERT_OK(hx_session_open(m, &s));
        int32_t ids[200];
        for (uint32_t i = 0; i < prompt; i++)
            ids[i] = (int32_t)(3 + i);
        HX_ASSERT_OK(hx_session_eval(s, ids, prompt, 0));
        const hx_kv_pool *kv = m->kv;
        const uint64_t block = 2ull * kv->n_layer * kv->block_bytes; /* K and V, every layer */
        uint64_t only = 0;
        for (uint32_t pos = prompt; pos < prompt + steps; pos++) {
            const uint64_t tasks = device_now(rt, fpga).tasks;
            HX_ASSERT_OK(hx_session_eval(s, ids + pos % prompt, 1, 0));
            hx_device_stats ds = device_now(rt, fpga);
            ck_assert_uint_eq(ds.tasks - tasks, (split ? 1u : 2u) * kv->n_layer);
            const uint64_t expect = split ? 0 : (pos / 16 + 1) * block;
            only = ds.kv_bytes_device_only;
            ck_assert_msg(only == expect, "split %d, position %u: %llu bytes valid on the FPGA alone, %llu expected",
                          split, pos, (unsigned long long)only, (unsigned long long)expect);
        }
        hx_device_stats ds = device_now(rt, fpga);
        printf("sim: small shapes, %u tokens, attention on the FPGA %s: KV allocated there %.2f MiB, named %.2f MiB, "
               "valid there alone %.2f MiB\n",
               prompt + steps, split ? "split at 64" : "whole", ds.kv_bytes_allocated / 1048576.0,
               ds.kv_bytes_named / 1048576.0, only / 1048576.0);
        /* The FPGA stores the blocks named there, in slots, of a pool of
         * 128: the prompt's 13, then twice that when a 14th came. */
        ck_assert_uint_eq(ds.kv_bytes_named, (prompt + steps + 15) / 16 * block); /* the prefill read them all */
        ck_assert_uint_eq(ds.kv_bytes_allocated, 26 * block);
        ck_assert_uint_lt(ds.kv_bytes_allocated, block * kv->n_blocks);
        hx_session_close(s);
        hx_model_free(m);
        hx_runtime_close(rt);
        unlink(path);
    }
}
END_TEST

/* The time of a prompt read in chunks of max_batch is that of the same
 * chunks evaluated one by one: each chunk's attention is costed for the
 * positions it reads, not for the whole prompt's blocks, reserved at once
 * (each of a 8k prompt's 16 chunks was charged 8k positions).  And the
 * cost counts the causal mask and the window, as the kernels skip what
 * they hide. */
START_TEST(a_prompts_chunks_cost_the_positions_they_read)
{
    static const char *const box = "[device cpu]\nflops.f32 = 1T\nmemory = 64G\nbandwidth = 100G\n";
    double sec[2];
    int32_t ids[64];
    for (int i = 0; i < 64; i++)
        ids[i] = 1 + i;
    for (int chunked = 0; chunked < 2; chunked++) {
        char path[64];
        hx_runtime *rt = open_sim(box, "static", path, sizeof path);
        hx_model_options mo = hx_model_options_default();
        mo.max_batch = 16;
        hx_model *m;
        HX_ASSERT_OK(hx_model_load_shapes(rt, "small", "q8_0", &mo, &m));
        hx_session *s;
        HX_ASSERT_OK(hx_session_open(m, &s));
        double t0 = hx_runtime_clock(rt);
        if (chunked)
            for (int i = 0; i < 64; i += 16)
                HX_ASSERT_OK(hx_session_eval(s, ids + i, 16, 0));
        else
            HX_ASSERT_OK(hx_session_eval(s, ids, 64, 0));
        sec[chunked] = hx_runtime_clock(rt) - t0;
        hx_session_close(s);
        hx_model_free(m);
        hx_runtime_close(rt);
        unlink(path);
    }
    ck_assert_msg(fabs(sec[0] - sec[1]) <= 1e-9 * sec[1], "64 tokens at once: %.9g s; in four evaluations: %.9g s",
                  sec[0], sec[1]);

    const hx_codelet *cl = &hx_op_codelets[HX_OP_ATTENTION];
    hx_op_attention a = {.kv = {64, 1, 4, 16}, .Hq = 2, .Hkv = 1, .Dh = 8, .kv_type = HX_TYPE_F16,
                         .v_type = HX_TYPE_F16};
    const double per_score = 4.0 * a.Hq * a.Dh;
    ck_assert_double_eq_tol(cl->flops(&a, NULL), per_score * 64 * 65 / 2, 1e-6); /* a prompt: 1 + 2 + ... + 64 */
    a.kv = (hx_kv_layout){4, 4, 64, 16}; /* four sequences' decode steps at 1024 positions */
    ck_assert_double_eq_tol(cl->flops(&a, NULL), per_score * 4 * 1024, 1e-6);
    a.window = 256;
    ck_assert_double_eq_tol(cl->flops(&a, NULL), per_score * 4 * 256, 1e-6);
}
END_TEST

/* A context shift rewrites the blocks it moves keys into and reads those
 * it moves them from, nothing else: with attention on the FPGA, the step
 * after a shift on other devices brings back only those of the blocks it
 * reads; the kept blocks before the shift stay valid where they are. */
START_TEST(a_context_shift_moves_only_its_blocks)
{
    char path[64];
    hx_runtime *rt;
    hx_model *m;
    hx_session *s;
    int32_t ids[100];
    small_session_on_blocks_box(path, sizeof path, &rt, &m, &s, ids, 100);
    hx_runtime_stats_reset(rt);
    HX_ASSERT_OK(hx_session_eval(s, ids + 1, 1, 0));
    const uint64_t steady = stats_now(rt).bytes_copied;
    /* 102 tokens (blocks 0-6); keep 40, drop 32: keys move from positions
     * 72..101 to 40..69, blocks 2-6 are read or written, 0 and 1 not. */
    hx_runtime_stats_reset(rt);
    HX_ASSERT_OK(hx_session_shift(s, 40, 32));
    HX_ASSERT_OK(hx_session_eval(s, ids + 2, 1, 0));
    const uint64_t moved = stats_now(rt).bytes_copied;
    const hx_kv_pool *kv = m->kv;
    const uint64_t block = 2ull * kv->n_layer * kv->block_bytes; /* K and V, every layer */
    /* Each of the 5 blocks the shift names crosses at most twice (from
     * the FPGA through the host to the device the shift runs on), and the
     * 3 of them the step reads (blocks 2-4) come back at most twice: 16
     * blocks.  A shift of whole layers moves every block of the pool. */
    printf("sim: a context shift and the step after it move %.1f blocks of every layer's K and V beyond a step's\n",
           (double)(moved - steady) / block);
    ck_assert_msg(moved - steady <= 16 * block, "%llu bytes moved, %llu in a step: more than 16 blocks of %llu",
                  (unsigned long long)moved, (unsigned long long)steady, (unsigned long long)block);
    hx_session_close(s);
    hx_model_free(m);
    hx_runtime_close(rt);
    unlink(path);
}
END_TEST

Suite *suite_sim(void)
{
    Suite *s = suite_create("sim");
    TCase *c = tcase_create("sim");
    tcase_set_timeout(c, 120);
    tcase_add_test(c, example_machines_parse);
    tcase_add_test(c, broken_descriptions_are_refused);
    tcase_add_test(c, task_time_is_the_roofline);
    tcase_add_test(c, a_graph_launch_pays_one_launch);
    tcase_add_test(c, launch_measured_is_the_time_outside_kernels);
    tcase_add_test(c, copies_cost_the_link);
    tcase_add_test(c, injection_in_the_simulator);
    tcase_add_test(c, models_without_weights);
    tcase_add_test(c, devices_sharing_cores_take_turns);
    tcase_add_test(c, dmda_moves_weights_to_a_faster_device);
    tcase_add_test(c, colocated_layers_stay_on_the_gpu);
    tcase_add_test(c, a_task_moves_only_the_blocks_it_names);
    tcase_add_test(c, a_device_counts_the_blocks_it_was_asked_for);
    tcase_add_test(c, a_block_space_stores_named_blocks_in_slots);
    tcase_add_test(c, a_device_at_its_budget_evicts_blocks_the_host_holds);
    tcase_add_test(c, attention_elsewhere_moves_the_blocks_it_reads);
    tcase_add_test(c, split_attention_moves_only_the_recent_blocks);
    tcase_add_test(c, split_attention_bounds_the_blocks_only_the_device_holds);
    tcase_add_test(c, a_context_shift_moves_only_its_blocks);
    tcase_add_test(c, a_prompts_chunks_cost_the_positions_they_read);
    suite_add_tcase(s, c);
    return s;
}
