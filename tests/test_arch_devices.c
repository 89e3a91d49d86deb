/* The new architectures' synthetic models (model/shapes.c's presets, with
 * what each preset carries besides its shape: mixtral-tiny's experts,
 * gemma3-tiny's window) on the OpenCL device alone: the runtime opens no
 * CPU device, so every op of the graph, the experts' ops, geglu, the
 * post-norms and Gemma 3's sliding-window attention included, runs
 * there.  A prompt longer than gemma3-tiny's window (32) and a decode
 * step after it give the CPU's logits within float tolerance; the same
 * model without the window gives other logits on the CPU (the window
 * matters, so the comparison has power).
 *
 * Bound: 1e-6 NMSE over the vocabulary's logits.  The devices add in a
 * different order, and the difference grows through the layers (measured
 * below 1e-9 on PoCL); an expert choice flipped by a near tie would
 * exceed it by orders of magnitude. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/model.h"
#include "quantize/synthetic.h"
#include "runtime/runtime.h"
#include "runtime/device.h"
#include "tests/cl_test.h"
#include "tests/expert_split.h"
#include "tests/ref_ops.h"
#include "tests/small_model.h"

#define LOGITS_NMSE 1e-6

typedef struct {
    float *prefill, *decode;
    uint32_t n_vocab;
    uint64_t device_tasks[8];
    int ndev, cl_dev;
} run_out;

/* The prompt's last logits and a decode step's, on `rt`. */
static void run_model(hx_runtime *rt, const char *path, const char *partition, run_out *o)
{
    hx_model *m = NULL;
    hx_model_options mo = hx_model_options_default();
    mo.partition = partition;
    HX_ASSERT_OK(hx_model_load(rt, path, &mo, &m));
    hx_runtime_stats_reset(rt);
    hx_session *s = NULL;
    HX_ASSERT_OK(hx_session_open(m, &s));
    /* BOS, then bytes: longer than a window of 32 positions. */
    const char *text = "Hello, world: a prompt that outgrows the window.";
    int32_t prompt[64];
    uint32_t n = 0;
    prompt[n++] = 256;
    for (const char *c = text; *c && n < 64; c++)
        prompt[n++] = (unsigned char)*c;
    HX_ASSERT_OK(hx_session_eval(s, prompt, n, 0));
    o->n_vocab = m->info.n_vocab;
    o->prefill = malloc(4ull * o->n_vocab);
    o->decode = malloc(4ull * o->n_vocab);
    memcpy(o->prefill, hx_session_logits(s, -1), 4ull * o->n_vocab);
    const int32_t next = 111;
    HX_ASSERT_OK(hx_session_eval(s, &next, 1, 0));
    memcpy(o->decode, hx_session_logits(s, -1), 4ull * o->n_vocab);
    o->ndev = hx_runtime_device_count(rt);
    o->cl_dev = -1;
    for (int d = 0; d < o->ndev && d < 8; d++) {
        hx_device_stats st;
        hx_device_info info;
        HX_ASSERT_OK(hx_device_stats_get(rt, d, &st));
        HX_ASSERT_OK(hx_runtime_device_info(rt, d, &info));
        o->device_tasks[d] = st.tasks;
        if (info.family == HX_FAMILY_OPENCL)
            o->cl_dev = d;
    }
    HX_ASSERT_OK(hx_session_close(s));
    HX_ASSERT_OK(hx_model_free(m));
}

/* PoCL's OpenCL device (not an emulated FPGA), on `devices`, under `sched`,
 * with nothing from the environment (no saved models, injection, trace). */
static hx_runtime *open_opencl(const char *devices, const char *sched)
{
    hx_runtime *rt = NULL;
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = devices;
    o.fpga_emulation = "off";
    o.cpu_threads = 2;
    o.sched = sched;
    o.perfmodel_dir = "off";
    o.inject = "";
    o.trace = "";
    HX_ASSERT_OK(hx_runtime_open(&rt, &o));
    return rt;
}

static double nmse(const float *x, const float *ref, uint32_t n)
{
    double *r = malloc(8ull * n);
    for (uint32_t i = 0; i < n; i++)
        r[i] = ref[i];
    double e = hx_ref_nmse(x, r, n);
    free(r);
    return e;
}

/* The NMSE of got's prefill and decode logits against ref's; both runs'
 * logits freed. */
static void compare_runs(run_out *got, run_out *ref, double *e0, double *e1)
{
    *e0 = nmse(got->prefill, ref->prefill, ref->n_vocab);
    *e1 = nmse(got->decode, ref->decode, ref->n_vocab);
    free(ref->prefill), free(ref->decode), free(got->prefill), free(got->decode);
}

static const char *const presets[] = {"qwen3-tiny", "mixtral-tiny", "qwen3moe-tiny", "gemma3-tiny"};

START_TEST(architecture_on_opencl_matches_cpu)
{
    const char *name = presets[_i];
    const hx_synthetic_config *c = hx_synthetic_preset(name);
    ck_assert_ptr_nonnull(c);
    const hx_synthetic_extras *x = hx_synthetic_preset_extras(c);
    char dir[64] = "/tmp/hx-archdev-XXXXXX", path[128], nowin[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/%s.gguf", dir, name);
    snprintf(nowin, sizeof nowin, "%s/%s-nowindow.gguf", dir, name);
    HX_ASSERT_OK(hx_synthetic_write_with(path, c, x, "f32", 7));

    hx_runtime *cpu = hx_small_runtime(2, NULL);
    run_out ref = {0}, got = {0};
    run_model(cpu, path, NULL, &ref);
    if (x->window) {
        hx_synthetic_extras plain = *x;
        plain.window = 0;
        HX_ASSERT_OK(hx_synthetic_write_with(nowin, c, &plain, "f32", 7));
        run_out full = {0};
        run_model(cpu, nowin, NULL, &full);
        const double d0 = nmse(full.prefill, ref.prefill, ref.n_vocab), d1 = nmse(full.decode, ref.decode, ref.n_vocab);
        printf("arch_devices: %s without its window of %u: logits nmse prefill %.3g, decode %.3g on the CPU\n", name,
               x->window, d0, d1);
        ck_assert_msg(d0 > 1e3 * LOGITS_NMSE && d1 > 1e3 * LOGITS_NMSE, "%s: the window changes nothing", name);
        free(full.prefill), free(full.decode);
        unlink(nowin);
    }
    HX_ASSERT_OK(hx_runtime_close(cpu));

    hx_runtime *rt = open_opencl("opencl", "static");
    run_model(rt, path, NULL, &got);
    HX_ASSERT_OK(hx_runtime_close(rt));

    ck_assert_int_ge(got.cl_dev, 0);
    uint64_t all = 0;
    for (int d = 0; d < got.ndev; d++)
        all += got.device_tasks[d];
    const uint64_t on_cl = got.device_tasks[got.cl_dev];
    double e0, e1;
    compare_runs(&got, &ref, &e0, &e1);
    printf("arch_devices: %s on opencl: %llu of %llu tasks on OpenCL; logits nmse prefill %.3g, decode %.3g\n", name,
           (unsigned long long)on_cl, (unsigned long long)all, e0, e1);
    ck_assert_uint_gt(on_cl, 0);
    ck_assert_uint_eq(on_cl, all);
    ck_assert_msg(e0 <= LOGITS_NMSE && e1 <= LOGITS_NMSE, "%s: logits nmse %g (prefill), %g (decode)", name, e0, e1);
    unlink(path);
    rmdir(dir);
}
END_TEST

/* A file's experts cut into groups (model/expert_groups.c): a runtime
 * with a device of memory of its own too small for the file (PoCL, given
 * a memory node as a card's) cuts each layer's experts into groups that
 * wrap the mapped rows, and one large enough does not; run on the CPU
 * alone (colocated), the groups' sums give the ungrouped run's logits
 * within float tolerance (they add in another order).  A group wrapping
 * the wrong rows would not. */
START_TEST(a_files_experts_in_groups_give_the_same_logits)
{
    static const char *const moe[] = {"mixtral-tiny", "qwen3moe-tiny"};
    const char *name = moe[_i];
    char dir[64] = "/tmp/hx-groups-XXXXXX", path[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/%s.gguf", dir, name);
    HX_ASSERT_OK(hx_model_write_synthetic(path, name, "f32", 11));
    hx_runtime *cpu = hx_small_runtime(2, NULL);
    run_out ref = {0}, got = {0};
    run_model(cpu, path, NULL, &ref);
    HX_ASSERT_OK(hx_runtime_close(cpu));

    hx_runtime *rt = hx_cl_test_open("cpu,opencl", 0);
    const int cl = hx_cl_test_device(rt);
    hx_device_info *info = &rt->devices[cl]->info;
    info->unified_memory = 0;
    info->memory_node = rt->n_memory_nodes++;
    info->global_mem_bytes = 600ull << 20; /* less the planner's 512 MiB: too small for the file */
    hx_model *m = NULL;
    hx_model_options mo = hx_model_options_default();
    HX_ASSERT_OK(hx_model_load(rt, path, &mo, &m));
    const uint32_t E = m->hp.n_expert, want = E < 16 ? E : 16;
    ck_assert_uint_gt(want, 1);
    for (uint32_t l = 0; l < m->info.n_layer; l++) {
        ck_assert_uint_eq(m->layers[l].n_groups, want);
        ck_assert_uint_eq(m->layers[l].groups[want - 1].e_lo + m->layers[l].groups[want - 1].e_n, E);
    }
    HX_ASSERT_OK(hx_model_free(m));
    info->global_mem_bytes = 8ull << 30;
    HX_ASSERT_OK(hx_model_load(rt, path, &mo, &m));
    ck_assert_uint_eq(m->layers[0].n_groups, 0); /* it fits: one task per layer */
    HX_ASSERT_OK(hx_model_free(m));
    info->global_mem_bytes = 600ull << 20;
    run_model(rt, path, "colocated", &got);
    HX_ASSERT_OK(hx_runtime_close(rt));
    ck_assert_uint_eq(got.device_tasks[got.cl_dev], 0);
    double e0, e1;
    compare_runs(&got, &ref, &e0, &e1);
    printf("arch_devices: %s, %u experts in %u groups: logits nmse prefill %.3g, decode %.3g against one group\n",
           name, E, want, e0, e1);
    ck_assert_msg(e0 <= LOGITS_NMSE && e1 <= LOGITS_NMSE, "%s: logits nmse %g (prefill), %g (decode)", name, e0, e1);
    unlink(path);
    rmdir(dir);
}
END_TEST

/* The experts' two lanes on real kernels (tests/expert_split.h): PoCL
 * given a memory of its own too small for every expert, the CPU slowed
 * 30x, under plan: the plan keeps layers on PoCL with the groups that do
 * not fit in host memory, computed by the (slowed) CPU in a lane of their
 * own, and the logits of every decode step are the CPU alone's within
 * float tolerance. */
START_TEST(experts_split_between_two_devices_give_the_same_logits)
{
    hx_runtime *rt = open_opencl("cpu,opencl", "plan");
    hx_expert_split r;
    hx_expert_split_run(rt, hx_cl_test_device(rt), 30, &r);
    HX_ASSERT_OK(hx_runtime_close(rt));
    printf("arch_devices: qwen3moe-tiny under plan, the CPU slowed 30x, PoCL's memory for half the file: %d layers' "
           "groups on both devices, %llu tasks on the CPU, %llu on PoCL; decode logits nmse at most %.3g\n",
           r.split, (unsigned long long)r.cpu_tasks, (unsigned long long)r.other_tasks, r.worst_nmse);
    ck_assert_msg(r.split > 0, "no layer's expert groups were split between the devices");
    ck_assert_msg(r.worst_nmse <= LOGITS_NMSE, "decode logits nmse %g", r.worst_nmse);
}
END_TEST

Suite *suite_arch_devices(void)
{
    Suite *s = suite_create("arch_devices");
    TCase *tc = tcase_create("opencl");
    tcase_set_timeout(tc, 900);
    tcase_add_unchecked_fixture(tc, hx_cl_test_cache_setup, hx_cl_test_cache_teardown);
    tcase_add_loop_test(tc, architecture_on_opencl_matches_cpu, 0, sizeof presets / sizeof presets[0]);
    tcase_add_loop_test(tc, a_files_experts_in_groups_give_the_same_logits, 0, 2);
    tcase_add_test(tc, experts_split_between_two_devices_give_the_same_logits);
    suite_add_tcase(s, tc);
    return s;
}
