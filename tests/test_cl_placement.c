/* Where OpenCL ops run, and what their launches refuse: an emulated FPGA
 * is given only its bitstream's kernels, arguments no OpenCL kernel covers
 * go to the CPU, a partial bitstream splits an op by kernel, and bad
 * arguments get clear errors with the runtime still usable.  That each op
 * computes the right values on every device is the `ops` suite's
 * (tests/test_ops.c). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ops/ops.h"
#include "runtime/runtime.h"
#include "runtime/task.h"
#include "tests/cl_test.h"
#include "tests/op_cases.h"
#include "tests/ref_ops.h"

static hx_status run(hx_runtime *rt, const char *op, const void *args, size_t args_size, int n, hx_buffer **b,
                     const hx_access *modes)
{
    return hx_case_run(rt, -1, op, args, args_size, n, b, modes);
}

/* An emulated FPGA offers the ops its bitstream holds, and is never
 * given a matmul, which the bitstream lacks. */
START_TEST(emulated_fpga_runs_only_its_bitstream)
{
    hx_runtime *rt = hx_cl_test_open("fpga", 1);
    int fpga = hx_cl_test_device(rt);
    ck_assert(hx_device_implements(rt, fpga, "attention"));
    ck_assert(!hx_device_implements(rt, fpga, "matmul"));
    hx_buffer *b[3];
    for (int i = 0; i < 3; i++)
        b[i] = hx_case_empty(rt, 4096);
    hx_op_matmul mm = {HX_REF_F32, 1, 4, 4, 0};
    ck_assert_int_eq(run(rt, "matmul", &mm, sizeof mm, 3, b, (hx_access[]){HX_R, HX_R, HX_W}), HX_ERR_NO_DEVICE);
    hx_case_destroy(b, 3);
    hx_runtime_close(rt);
}
END_TEST

/* Tasks whose arguments OpenCL does not cover go to the CPU, and never
 * fail on PoCL: a Q6_K matmul (K-quant files mix it in) and a head size
 * beyond the attention kernels'. */
START_TEST(unsupported_arguments_go_to_the_cpu)
{
    hx_runtime *rt = hx_cl_test_open("cpu,opencl", 0);
    int cl = hx_cl_test_device(rt), cpu = hx_cl_test_cpu(rt);
    const uint32_t N = 8, K = 256;
    uint8_t *W = calloc(N, 210); /* Q6_K: 210 bytes per 256 weights; zeros decode to zeros */
    float x[256];
    unsigned seed = 11;
    hx_case_random(x, K, &seed);
    hx_buffer *b[3] = {hx_case_buffer(rt, W, N * 210), hx_case_buffer(rt, x, sizeof x), hx_case_empty(rt, 4 * N)};
    hx_op_matmul mm = {14 /* Q6_K */, 1, N, K, 0};
    hx_task_desc d = {.codelet = hx_codelet_builtin("matmul"), .nbuffers = 3, .buffers = {b[0], b[1], b[2]},
                      .modes = {HX_R, HX_R, HX_W}, .args = &mm, .args_size = sizeof mm, .device = -1};
    for (int i = 0; i < 8; i++) { /* eager would hand some to an idle PoCL */
        hx_task *t;
        HX_ASSERT_OK(hx_task_submit(rt, &d, &t));
        HX_ASSERT_OK(hx_task_wait(t));
    }
    hx_device_stats st;
    HX_ASSERT_OK(hx_device_stats_get(rt, cl, &st));
    ck_assert_uint_eq(st.tasks, 0);
    HX_ASSERT_OK(hx_device_stats_get(rt, cpu, &st));
    ck_assert_uint_eq(st.tasks, 8);
    d.device = cl;
    ck_assert_int_eq(hx_task_submit(rt, &d, NULL), HX_ERR_NO_DEVICE);
    /* The same codelet with a type PoCL has runs there when pinned. */
    mm.wtype = HX_REF_F32;
    d.device = cl;
    hx_case_destroy(b, 1);
    float *Wf = calloc(N * K, 4);
    d.buffers[0] = b[0] = hx_case_buffer(rt, Wf, 4ull * N * K);
    hx_task *t;
    HX_ASSERT_OK(hx_task_submit(rt, &d, &t));
    HX_ASSERT_OK(hx_task_wait(t));
    hx_case_destroy(b, 3);
    free(W);
    free(Wf);
    hx_runtime_close(rt);
}
END_TEST

/* Attention the OpenCL kernels do not take (a Q4_0 cache, here with a
 * sliding window, which they do take) runs on the CPU beside them, and its
 * values are right there (tests/test_ops.c checks them against the
 * reference). */
START_TEST(q4_0_cache_goes_to_the_cpu)
{
    hx_runtime *rt = hx_cl_test_open("cpu,opencl", 0);
    int cl = hx_cl_test_device(rt), cpu = hx_cl_test_cpu(rt);
    unsigned seed = 23;
    const hx_att_case q4 = {HX_REF_Q4_0, 4, 2, 64, 16, 2, {40, 20}, {1, 1}, 0};
    hx_att_setup o;
    hx_att_setup_make(&q4, &o, &seed);
    o.a.window = 8;
    hx_device_stats before_cl, before_cpu, after;
    HX_ASSERT_OK(hx_device_stats_get(rt, cl, &before_cl));
    HX_ASSERT_OK(hx_device_stats_get(rt, cpu, &before_cpu));
    for (int k = 0; k < 4; k++) { /* eager would hand some to an idle PoCL */
        hx_buffer *b[5];
        hx_att_buffers(rt, &o, b);
        HX_ASSERT_OK(run(rt, "attention", &o.a, sizeof o.a, 5, b, (hx_access[]){HX_R, HX_R, HX_R, HX_R, HX_W}));
        hx_case_destroy(b, 5);
    }
    HX_ASSERT_OK(hx_device_stats_get(rt, cl, &after));
    ck_assert_uint_eq(after.tasks, before_cl.tasks);
    HX_ASSERT_OK(hx_device_stats_get(rt, cpu, &after));
    ck_assert_uint_ge(after.tasks, before_cpu.tasks + 4);
    hx_att_setup_free(&o);
    hx_runtime_close(rt);
}
END_TEST

/* A bitstream with only the decode kernels: decode steps go to the FPGA,
 * prefills to the CPU, as they would on a card built so. */
START_TEST(partial_bitstream_splits_by_kernel)
{
    char dir[300], path[400];
    snprintf(dir, sizeof dir, "%s/partial-bitstream", hx_cl_test_cache);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    snprintf(path, sizeof path, "%s/manifest.txt", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("platform pocl-emulation hetero-pocl-emulation.xclbin\nkernel attention_decode_f16 attention\n", f);
    fclose(f);
    setenv("HX_BITSTREAM_DIR", dir, 1);
    hx_runtime *rt = hx_cl_test_open("cpu,fpga", 1);
    unsetenv("HX_BITSTREAM_DIR");
    int fpga = hx_cl_test_device(rt), cpu = hx_cl_test_cpu(rt);
    unsigned seed = 12;
    hx_att_case c = {HX_REF_F16, 4, 2, 32, 16, 2, {20, 9}, {1, 1}, 0};
    for (int prefill = 0; prefill < 2; prefill++) {
        c.fresh[1] = prefill ? 5 : 1;
        hx_att_setup o;
        hx_att_setup_make(&c, &o, &seed);
        hx_buffer *b[5] = {hx_case_buffer(rt, o.q, 4 * o.q_floats), hx_case_buffer(rt, o.kc, o.cache_bytes),
                           hx_case_buffer(rt, o.vc, o.v_cache_bytes), hx_case_buffer(rt, o.meta, 4 * o.meta_ints),
                           hx_case_empty(rt, 4 * o.q_floats)};
        hx_task_desc d = {.codelet = hx_codelet_builtin("attention"), .nbuffers = 5,
                          .buffers = {b[0], b[1], b[2], b[3], b[4]}, .modes = {HX_R, HX_R, HX_R, HX_R, HX_W},
                          .args = &o.a, .args_size = sizeof o.a, .device = fpga};
        hx_task *t;
        if (prefill) {
            ck_assert_int_eq(hx_task_submit(rt, &d, NULL), HX_ERR_NO_DEVICE);
            d.device = -1;
        }
        HX_ASSERT_OK(hx_task_submit(rt, &d, &t));
        HX_ASSERT_OK(hx_runtime_wait_all(rt));
        ck_assert_int_eq(hx_task_device(t), prefill ? cpu : fpga);
        HX_ASSERT_OK(hx_task_wait(t));
        hx_case_destroy(b, 5);
        hx_att_setup_free(&o);
    }
    hx_runtime_close(rt);
}
END_TEST

/* ---- arguments the launches refuse ---------------------------------------- */

START_TEST(bad_arguments_are_refused)
{
    hx_runtime *rt = hx_cl_test_open("opencl", 0);
    hx_cl_test_device(rt);
    hx_buffer *b[5];
    for (int i = 0; i < 5; i++)
        b[i] = hx_case_empty(rt, 4096);
    const hx_access r3w[] = {HX_R, HX_R, HX_W, HX_R, HX_R};

    hx_op_matmul mm = {HX_REF_Q8_0, 1, 4, 48, 0}; /* K not a multiple of 32 */
    ck_assert_int_eq(run(rt, "matmul", &mm, sizeof mm, 3, b, r3w), HX_ERR_INVALID_ARG);
    ck_assert_msg(strstr(hx_last_error(), "K=48"), "%s", hx_last_error());
    mm = (hx_op_matmul){HX_REF_F32, 1, 64, 64, 0}; /* 16 KiB of weights in 4 KiB */
    ck_assert_int_eq(run(rt, "matmul", &mm, sizeof mm, 3, b, r3w), HX_ERR_INVALID_ARG);
    ck_assert_msg(strstr(hx_last_error(), "W"), "%s", hx_last_error());
    mm = (hx_op_matmul){HX_REF_F32, 1, 4, 4, 1}; /* a bias without its buffer */
    ck_assert_int_eq(run(rt, "matmul", &mm, sizeof mm, 3, b, r3w), HX_ERR_INVALID_ARG);
    /* Arguments no OpenCL kernel covers find no device (PoCL is the only
     * one here). */
    mm = (hx_op_matmul){6 /* Q5_0 */, 1, 4, 32, 0};
    ck_assert_int_eq(run(rt, "matmul", &mm, sizeof mm, 3, b, r3w), HX_ERR_NO_DEVICE);

    hx_op_attention at = {{1, 1, 1, 16}, 1, 1, 320, HX_REF_F16, 1.0f, 0, HX_REF_F16, 0, 0}; /* heads over 256 */
    ck_assert_int_eq(run(rt, "attention", &at, sizeof at, 5, b, (hx_access[]){HX_R, HX_R, HX_R, HX_R, HX_W}),
                     HX_ERR_NO_DEVICE);
    at = (hx_op_attention){{1, 1, 1, 16}, 6, 4, 32, HX_REF_F16, 1.0f, 0, HX_REF_F16, 0, 0};
    ck_assert_int_eq(run(rt, "attention", &at, sizeof at, 5, b, (hx_access[]){HX_R, HX_R, HX_R, HX_R, HX_W}),
                     HX_ERR_INVALID_ARG);
    at = (hx_op_attention){{1u << 30, 1, 1, 16}, 4, 4, 32, HX_REF_F16, 1.0f, 0, HX_REF_F16, 0, 0};
    ck_assert_int_eq(run(rt, "attention", &at, sizeof at, 5, b, (hx_access[]){HX_R, HX_R, HX_R, HX_R, HX_W}),
                     HX_ERR_INVALID_ARG);
    hx_op_rope ro = {1, 1, 8, 9, 10000.0f, 1.0f, 0, 0};
    ck_assert_int_eq(run(rt, "rope", &ro, sizeof ro, 2, b, (hx_access[]){HX_RW, HX_R}), HX_ERR_INVALID_ARG);
    hx_op_get_rows gr = {HX_REF_Q4_K, 1, 256};
    ck_assert_int_eq(run(rt, "get_rows", &gr, sizeof gr, 3, b, r3w), HX_ERR_NO_DEVICE);
    hx_op_add ad = {UINT64_MAX / 2};
    ck_assert_int_eq(run(rt, "add", &ad, sizeof ad, 2, b, (hx_access[]){HX_RW, HX_R}), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_runtime_wait_all(rt), HX_ERR_INVALID_ARG);

    /* Still usable. */
    hx_op_add ok = {1024};
    HX_ASSERT_OK(run(rt, "add", &ok, sizeof ok, 2, b, (hx_access[]){HX_RW, HX_R}));
    hx_case_destroy(b, 5);
    hx_runtime_close(rt);
}
END_TEST

/* out = in + x, recorded for a graph launch, on `device` (-1: anywhere). */
static hx_task_recorded recorded_add_on(hx_runtime *rt, int device, hx_buffer *in, hx_buffer *x, hx_buffer *out,
                                        const hx_args_vector_add *a)
{
    hx_task_desc d = {.codelet = hx_codelet_builtin("vector_add"), .nbuffers = 3, .buffers = {in, x, out},
                      .modes = {HX_R, HX_R, HX_W}, .args = a, .args_size = sizeof *a, .device = device};
    hx_task_recorded r;
    HX_ASSERT_OK(hx_task_record(rt, &d, &r));
    return r;
}

static float first_value(hx_buffer *b)
{
    float *p;
    HX_ASSERT_OK(hx_buffer_acquire(b, HX_R, (void **)&p));
    return p[0];
}

/* Recorded tasks all on the CPU go as one graph launch beside another
 * device too, one with memory of its own: a buffer whose newest copy is
 * on that device is brought over first, and what the graph writes is
 * what the device reads next.  Tasks the scheduler may place elsewhere
 * go one by one. */
START_TEST(a_graph_launch_beside_a_device_with_its_own_memory)
{
    hx_runtime *rt = hx_cl_test_open("cpu,fpga", 1);
    const int fpga = hx_cl_test_device(rt);
    hx_device_info *info = &rt->devices[fpga]->info;
    info->unified_memory = 0;
    info->memory_node = rt->n_memory_nodes++;
    enum { N = 64 };
    float ones[N], zeros[N] = {0};
    for (int i = 0; i < N; i++)
        ones[i] = 1.0f;
    hx_buffer *x = hx_case_buffer(rt, ones, sizeof ones), *acc = hx_case_buffer(rt, zeros, sizeof zeros),
              *out = hx_case_buffer(rt, zeros, sizeof zeros);
    const hx_args_vector_add a = {N};
    hx_task_recorded on_fpga = recorded_add_on(rt, fpga, x, x, acc, &a); /* acc = 2, there only */
    HX_ASSERT_OK(hx_task_submit_recorded(rt, &on_fpga, 1));
    HX_ASSERT_OK(hx_runtime_wait_all(rt));
    hx_task_recorded g[2] = {recorded_add_on(rt, 0, acc, x, out, &a), recorded_add_on(rt, 0, out, x, acc, &a)};
    hx_runtime_stats st;
    hx_runtime_stats_reset(rt);
    HX_ASSERT_OK(hx_task_submit_recorded(rt, g, 2)); /* out = 3, acc = 4 */
    HX_ASSERT_OK(hx_runtime_wait_all(rt));
    hx_runtime_stats_get(rt, &st);
    ck_assert_uint_eq(st.graph_launches, 1);
    ck_assert_uint_eq(st.tasks_done, 2);
    hx_task_recorded back = recorded_add_on(rt, fpga, acc, x, out, &a); /* out = 5, on the device */
    HX_ASSERT_OK(hx_task_submit_recorded(rt, &back, 1));
    HX_ASSERT_OK(hx_runtime_wait_all(rt));
    ck_assert_float_eq(first_value(out), 5.0f);
    ck_assert_float_eq(first_value(acc), 4.0f);
    hx_task_recorded loose[2] = {recorded_add_on(rt, -1, acc, x, out, &a), recorded_add_on(rt, -1, out, x, acc, &a)};
    hx_runtime_stats_reset(rt);
    HX_ASSERT_OK(hx_task_submit_recorded(rt, loose, 2)); /* out = 5, acc = 6, wherever */
    HX_ASSERT_OK(hx_runtime_wait_all(rt));
    hx_runtime_stats_get(rt, &st);
    ck_assert_uint_eq(st.graph_launches, 0);
    ck_assert_float_eq(first_value(acc), 6.0f);
    hx_buffer_destroy(x);
    hx_buffer_destroy(acc);
    hx_buffer_destroy(out);
    hx_runtime_close(rt);
}
END_TEST

Suite *suite_cl_placement(void)
{
    Suite *s = suite_create("cl_placement");
    TCase *tc = tcase_create("pocl");
    tcase_set_timeout(tc, 300);
    tcase_add_unchecked_fixture(tc, hx_cl_test_cache_setup, hx_cl_test_cache_teardown);
    tcase_add_test(tc, emulated_fpga_runs_only_its_bitstream);
    tcase_add_test(tc, unsupported_arguments_go_to_the_cpu);
    tcase_add_test(tc, q4_0_cache_goes_to_the_cpu);
    tcase_add_test(tc, partial_bitstream_splits_by_kernel);
    tcase_add_test(tc, bad_arguments_are_refused);
    tcase_add_test(tc, a_graph_launch_beside_a_device_with_its_own_memory);
    suite_add_tcase(s, tc);
    return s;
}
