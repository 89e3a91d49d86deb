/* The placement planner (partitioner/placement.c) and llama.cpp's -ngl
 * split, on simulated machines (deterministic virtual time, so the
 * properties hold exactly, not by luck of the timing):
 *   - plan is never slower than the best single device, over a grid of
 *     models, machines and batch shapes (its search space holds them);
 *   - ngl puts the last layers on the GPU, as many as its memory holds,
 *     and the rest on the CPU;
 *   - a model larger than the GPU runs under plan across shapes (prefill,
 *     then decode) without running the GPU out of memory;
 *   - a slowdown injected mid-run changes the plan within a few steps, and
 *     the step time recovers to the best placement for the slowed machine;
 *     when the slowdown passes, the plan comes back;
 *   - a mixture of experts larger than the GPU keeps the expert groups
 *     that do not fit in host memory and beats -ngl, and the CPU computes
 *     its groups while the GPU computes its own;
 *   - an unknown policy name is refused with the list of known ones. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hx_test.h"

/* A CPU with host memory and a GPU behind a PCIe link; the GPU's memory
 * is %s (a model larger than it is split). */
static const char *const box_fmt = "machine = plan test box\n"
                                   "[device cpu]\nfamily = cpu\nkind = cpu\nunits = 16\nflops.f32 = 2T\n"
                                   "flops.int8 = 8T\nmemory = 256G\nbandwidth = 80G\nlaunch = 4us\n"
                                   "efficiency = 0.4 0.75\n"
                                   "[device gpu]\nfamily = cuda\nkind = gpu\nflops.f32 = 80T\nflops.int8 = 600T\n"
                                   "gemm.int8 = 200T\nmemory = %s\nbandwidth = 1T\nunified = no\nlink = 25G\n"
                                   "latency = 8us\nlaunch = 3us\nefficiency = 0.6 0.8\n%s";

/* An FPGA that runs only attention ops, with memory of its own. */
static const char *const fpga = "[device fpga]\nfamily = opencl\nkind = fpga\nflops.f32 = 1T\nmemory = 16G\n"
                                "bandwidth = 400G\nunified = no\nlink = 12G\nlatency = 15us\nlaunch = 30us\n"
                                "runs = rmsnorm rope kv_store attention attention_part attn_merge\n";

static void write_machine(char *path, size_t cap, const char *gpu_mem, const char *extra)
{
    char text[2048];
    snprintf(text, sizeof text, box_fmt, gpu_mem, extra);
    snprintf(path, cap, "/tmp/hx-plan-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static hx_runtime *open_on(const char *path, const char *devices, const char *sched)
{
    hx_runtime_options o = hx_runtime_options_default();
    o.machine = path;
    o.devices = devices;
    o.sched = sched;
    o.perfmodel_dir = "off";
    o.inject = "";
    o.trace = "";
    hx_runtime *rt;
    HX_ASSERT_OK(hx_runtime_open(&rt, &o));
    return rt;
}

/* Virtual seconds per step of `T` tokens (one evaluation of T prompt
 * tokens, or T = 1: a decode step), after two steps that warm up (weights
 * copied, plans made).  Returns -1 when the model does not fit. */
static double step_seconds(hx_runtime *rt, const char *shapes, uint32_t T)
{
    hx_model *m;
    hx_model_options mo = hx_model_options_default();
    mo.n_ctx = 1024;
    HX_ASSERT_OK(hx_model_load_shapes(rt, shapes, "q4_0", &mo, &m));
    int32_t ids[64];
    for (uint32_t i = 0; i < 64; i++)
        ids[i] = (int32_t)(1 + i);
    double sec = -1;
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(m, &s));
    hx_status st = HX_OK;
    for (int i = 0; i < 2 && st == HX_OK; i++)
        st = hx_session_eval(s, ids, T, 0);
    if (st == HX_OK) {
        double t0 = hx_runtime_clock(rt);
        for (int i = 0; i < 3 && st == HX_OK; i++)
            st = hx_session_eval(s, ids, T, 0);
        sec = (hx_runtime_clock(rt) - t0) / 3;
    }
    if (st)
        ck_assert_int_eq(st, HX_ERR_NO_MEMORY); /* a single device too small: the only failure allowed */
    hx_session_close(s);
    hx_model_free(m);
    return st ? -1 : sec;
}

START_TEST(plan_is_never_worse_than_one_device)
{
    static const char *const models[] = {"small", "llama2-7b"};
    static const char *const mems[] = {"80G", "2G"}; /* the model fits the GPU; it does not */
    static const char *const extras[2] = {"", NULL};
    static const uint32_t Ts[] = {1, 64};
    char path[64];
    for (size_t mi = 0; mi < 2; mi++)
        for (size_t gi = 0; gi < 2; gi++)
            for (int fi = 0; fi < 2; fi++)
                for (size_t ti = 0; ti < 2; ti++) {
                    write_machine(path, sizeof path, mems[gi], fi ? fpga : extras[0]);
                    double best = -1;
                    static const char *const singles[] = {"cpu", "gpu"};
                    for (int d = 0; d < 2; d++) {
                        hx_runtime *rt = open_on(path, singles[d], "static");
                        double s = step_seconds(rt, models[mi], Ts[ti]);
                        hx_runtime_close(rt);
                        if (s > 0 && (best < 0 || s < best))
                            best = s;
                    }
                    hx_runtime *rt = open_on(path, "all", "plan");
                    double plan = step_seconds(rt, models[mi], Ts[ti]);
                    hx_runtime_close(rt);
                    ck_assert_msg(best > 0, "no single device ran %s", models[mi]);
                    ck_assert_msg(plan > 0 && plan <= best * 1.02,
                                  "%s, GPU memory %s%s, T=%u: plan %.6g s per step, best single device %.6g s",
                                  models[mi], mems[gi], fi ? ", FPGA" : "", Ts[ti], plan, best);
                    unlink(path);
                }
}
END_TEST

/* Which device each layer's GEMMs prefer in the model's current plan. */
static void gemm_devices(hx_model *m, int *dev, int n_layer)
{
    for (int l = 0; l < n_layer; l++)
        dev[l] = -2;
    size_t n = hx_model_plan_size(m);
    for (size_t i = 0; i < n; i++) {
        hx_plan_task t;
        HX_ASSERT_OK(hx_model_plan_get(m, i, &t));
        if (t.layer >= 0 && t.layer < n_layer && !strcmp(t.task_class, "gemm"))
            dev[t.layer] = t.device;
    }
}

START_TEST(ngl_fills_the_gpu_with_the_last_layers)
{
    char path[64];
    /* LLaMA-2-7B Q4_0: 32 layers of about 110 MB of weights and 16 MB
     * of KV cache (at n_ctx 1024) each; 2 GB holds some, not all. */
    write_machine(path, sizeof path, "2G", "");
    hx_runtime *rt = open_on(path, "all", "ngl");
    hx_model *m;
    hx_model_options mo = hx_model_options_default();
    mo.n_ctx = 1024;
    HX_ASSERT_OK(hx_model_load_shapes(rt, "llama2-7b", "q4_0", &mo, &m));
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(m, &s));
    int32_t ids[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    HX_ASSERT_OK(hx_session_eval(s, ids, 16, 0));
    HX_ASSERT_OK(hx_session_eval(s, ids, 1, 0));
    hx_model_info info;
    HX_ASSERT_OK(hx_model_info_get(m, &info));
    int dev[128];
    ck_assert_int_le(info.n_layer, 128);
    gemm_devices(m, dev, (int)info.n_layer);
    int on_gpu = 0, first_gpu = -1;
    for (int l = 0; l < (int)info.n_layer; l++) {
        ck_assert_msg(dev[l] == 0 || dev[l] == 1, "layer %d on device %d", l, dev[l]);
        if (dev[l] == 1) {
            on_gpu++;
            if (first_gpu < 0)
                first_gpu = l;
        }
    }
    /* Some but not all; the last ones, contiguous (llama.cpp's order). */
    ck_assert_msg(on_gpu > 0 && on_gpu < (int)info.n_layer, "%d of %u layers on the GPU", on_gpu, info.n_layer);
    ck_assert_int_eq(first_gpu + on_gpu, (int)info.n_layer);
    /* What it placed fits: weights (114 MB) + KV cache (17 MB) of those
     * layers within 2 GB less the planner's reserve for activations (512
     * MiB) and for a K buffer's growth (8 MB); and as many as fit: one
     * more layer would not. */
    ck_assert_msg(on_gpu * 125e6 <= 2e9 - 520e6, "%d layers cannot fit", on_gpu);
    ck_assert_msg((on_gpu + 1) * 140e6 > 2e9 - 545e6, "only %d layers on a 2 GB GPU", on_gpu);
    hx_session_close(s);
    hx_model_free(m);
    hx_runtime_close(rt);
    unlink(path);
}
END_TEST

START_TEST(a_split_model_changes_shape_without_running_out_of_memory)
{
    char path[64];
    write_machine(path, sizeof path, "2G", "");
    hx_runtime *rt = open_on(path, "all", "plan");
    hx_model *m;
    hx_model_options mo = hx_model_options_default();
    mo.n_ctx = 1024;
    HX_ASSERT_OK(hx_model_load_shapes(rt, "llama2-7b", "q4_0", &mo, &m));
    hx_session *s[4];
    int32_t ids[64];
    for (int i = 0; i < 64; i++)
        ids[i] = 1 + i;
    for (int k = 0; k < 4; k++)
        HX_ASSERT_OK(hx_session_open(m, &s[k]));
    /* Prefill shapes, a decode step, a batch of four: each its own plan. */
    HX_ASSERT_OK(hx_session_eval(s[0], ids, 64, 0));
    HX_ASSERT_OK(hx_session_eval(s[1], ids, 7, 0));
    HX_ASSERT_OK(hx_session_eval(s[0], ids, 1, 0));
    for (int k = 2; k < 4; k++)
        HX_ASSERT_OK(hx_session_eval(s[k], ids, 3, 0));
    int32_t cur[4] = {5, 6, 7, 8};
    hx_batch b = {.n = 4, .tokens = cur, .sessions = s};
    for (int i = 0; i < 3; i++)
        HX_ASSERT_OK(hx_batch_eval(m, &b));
    hx_device_stats gpu;
    HX_ASSERT_OK(hx_device_stats_get(rt, 1, &gpu));
    ck_assert_msg(gpu.tasks > 0, "the GPU ran nothing");
    for (int k = 0; k < 4; k++)
        hx_session_close(s[k]);
    hx_model_free(m);
    hx_runtime_close(rt);
    unlink(path);
}
END_TEST

/* Decode steps' virtual seconds, one per step. */
static void decode_steps(hx_runtime *rt, hx_session *s, int n, double *sec)
{
    int32_t id = 3;
    for (int i = 0; i < n; i++) {
        double t0 = hx_runtime_clock(rt);
        HX_ASSERT_OK(hx_session_eval(s, &id, 1, 0));
        sec[i] = hx_runtime_clock(rt) - t0;
    }
}

START_TEST(a_slowdown_mid_run_changes_the_plan)
{
    char path[64];
    write_machine(path, sizeof path, "80G", "");
    /* The best placements of the slowed machine: each device alone. */
    double alone[2];
    static const char *const singles[] = {"cpu", "gpu"};
    for (int d = 0; d < 2; d++) {
        hx_runtime *rt = open_on(path, singles[d], "static");
        if (d == 1) {
            hx_injection inj = {.slow = 20};
            HX_ASSERT_OK(hx_device_inject(rt, 0, &inj));
        }
        alone[d] = step_seconds(rt, "llama2-7b", 1);
        hx_runtime_close(rt);
    }
    double best_slowed = fmin(alone[0], alone[1]);

    hx_runtime *rt = open_on(path, "all", "plan");
    hx_model *m;
    hx_model_options mo = hx_model_options_default();
    mo.n_ctx = 1024;
    HX_ASSERT_OK(hx_model_load_shapes(rt, "llama2-7b", "q4_0", &mo, &m));
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(m, &s));
    double before[4], after[12];
    decode_steps(rt, s, 4, before);
    int dev[32];
    gemm_devices(m, dev, 32);
    ck_assert_int_eq(dev[0], 1); /* the GPU, 12x the bandwidth */
    hx_injection inj = {.slow = 20};
    HX_ASSERT_OK(hx_device_inject(rt, 1, &inj));
    decode_steps(rt, s, 12, after);
    gemm_devices(m, dev, 32);
    for (int l = 0; l < 32; l++)
        ck_assert_msg(dev[l] == 0, "layer %d still on device %d after a 20x slowdown of the GPU", l, dev[l]);
    /* Within a few steps the step time is the slowed machine's best. */
    int recovered = -1;
    for (int i = 0; i < 12 && recovered < 0; i++)
        if (after[i] <= best_slowed * 1.10)
            recovered = i;
    ck_assert_msg(recovered >= 0 && recovered <= 3, "steps after the slowdown: %.4g %.4g %.4g %.4g s; best %.4g s",
                  after[0], after[1], after[2], after[3], best_slowed);
    ck_assert(after[11] <= best_slowed * 1.10);
    hx_session_close(s);
    hx_model_free(m);
    hx_runtime_close(rt);
    unlink(path);
}
END_TEST

/* A slowdown that passes: the plan leaves the slowed GPU, and once the
 * GPU has run nothing for a while (placement.c, HX_SLOWNESS_MAX_AGE) a
 * plan tries it again and, finding it fast, keeps the layers there.
 * Before, a device the plan had left was never measured again, so it kept
 * the slowness it had when it was left (the real CPU + PoCL runs settled
 * on the slower device after a passing contention). */
START_TEST(a_passing_slowdown_is_noticed)
{
    char path[64];
    write_machine(path, sizeof path, "80G", "");
    hx_runtime *rt = open_on(path, "all", "plan");
    hx_model *m;
    hx_model_options mo = hx_model_options_default();
    mo.n_ctx = 1024;
    HX_ASSERT_OK(hx_model_load_shapes(rt, "llama2-7b", "q4_0", &mo, &m));
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(m, &s));
    double before[4], during[6], after[80];
    decode_steps(rt, s, 4, before);
    hx_injection inj = {.slow = 20};
    HX_ASSERT_OK(hx_device_inject(rt, 1, &inj));
    decode_steps(rt, s, 6, during);
    int dev[32];
    gemm_devices(m, dev, 32);
    ck_assert_int_eq(dev[0], 0); /* left for the CPU */
    HX_ASSERT_OK(hx_device_inject(rt, 1, NULL));
    /* CPU steps of about 60 ms: 80 of them outlast the age limit. */
    decode_steps(rt, s, 80, after);
    gemm_devices(m, dev, 32);
    for (int l = 0; l < 32; l++)
        ck_assert_msg(dev[l] == 1, "layer %d on device %d after the slowdown passed", l, dev[l]);
    ck_assert_msg(after[79] <= before[3] * 1.10, "last step %.4g s, before the slowdown %.4g s", after[79], before[3]);
    hx_session_close(s);
    hx_model_free(m);
    hx_runtime_close(rt);
    unlink(path);
}
END_TEST

/* Mixtral-8x7B's shapes (24.5 GB in Q4_0) on the test box's GPU of 8 GB:
 * plan keeps most layers' attention and router on the GPU and the expert
 * groups the GPU cannot hold in host memory, computed by the CPU, and a
 * decode step is no slower than llama.cpp's -ngl split of whole layers. */
START_TEST(moe_experts_that_do_not_fit_stay_in_host_memory)
{
    char path[64];
    write_machine(path, sizeof path, "8G", "");
    double step[2];
    static const char *const scheds[] = {"ngl", "plan"};
    for (int k = 0; k < 2; k++) {
        hx_runtime *rt = open_on(path, "all", scheds[k]);
        hx_model *m;
        hx_model_options mo = hx_model_options_default();
        mo.n_ctx = 1024;
        HX_ASSERT_OK(hx_model_load_shapes(rt, "mixtral-8x7b", "q4_0", &mo, &m));
        hx_session *s;
        HX_ASSERT_OK(hx_session_open(m, &s));
        /* Decode from the start: a prompt's plan would fill the GPU with
         * experts until decoding has run long enough to drop it
         * (docs/scheduling.md). */
        int32_t ids[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
        HX_ASSERT_OK(hx_session_eval(s, ids, 1, 0));
        HX_ASSERT_OK(hx_session_eval(s, ids + 1, 1, 0));
        double t0 = hx_runtime_clock(rt);
        for (int i = 0; i < 3; i++)
            HX_ASSERT_OK(hx_session_eval(s, ids, 1, 0));
        step[k] = (hx_runtime_clock(rt) - t0) / 3;
        if (k == 1) {
            hx_model_info info;
            HX_ASSERT_OK(hx_model_info_get(m, &info));
            ck_assert_uint_eq(info.n_expert, 8);
            int router_gpu[64] = {0}, exp_gpu = 0, exp_cpu = 0;
            size_t n = hx_model_plan_size(m);
            for (size_t i = 0; i < n; i++) {
                hx_plan_task t;
                HX_ASSERT_OK(hx_model_plan_get(m, i, &t));
                if (t.layer < 0 || t.layer >= (int)info.n_layer)
                    continue;
                if (!strcmp(t.op, "moe_route") && t.device == 1)
                    router_gpu[t.layer]++;
                if (!strcmp(t.op, "moe_gate_up")) {
                    exp_gpu += t.device == 1;
                    exp_cpu += t.device == 0;
                }
            }
            /* Layers whose attention and router run on the GPU: more than
             * the whole layers -ngl puts there (about 8 of 32 in 8 GB). */
            int gpu_layers = 0;
            for (uint32_t l = 0; l < info.n_layer; l++)
                gpu_layers += router_gpu[l];
            ck_assert_msg(gpu_layers > 16, "%d of %u layers' routers on the GPU", gpu_layers, info.n_layer);
            /* 8 groups (one expert each) x 32 layers; 8 GB less the
             * reserve holds fewer than a third of the 23.6 GB of experts. */
            ck_assert_int_eq(exp_gpu + exp_cpu, 8 * 32);
            ck_assert_msg(exp_cpu > 0 && exp_gpu > 0, "experts: %d groups on the GPU, %d on the CPU", exp_gpu, exp_cpu);
            ck_assert_msg(exp_gpu * 92e6 <= 8e9, "%d expert groups of 92 MB cannot fit in 8 GB", exp_gpu);
        }
        hx_session_close(s);
        hx_model_free(m);
        hx_runtime_close(rt);
    }
    ck_assert_msg(step[1] <= step[0] * 1.001, "plan %.6g s per decode step, ngl %.6g s", step[1], step[0]);
    unlink(path);
}
END_TEST

/* Virtual seconds of a decode step of Qwen3-30B-A3B's shapes (Q8_0, 32
 * GB) on the test box with a 24 GB GPU under `sched`: one token, then a
 * prompt of `depth` tokens in chunks of 512, then `warm` decode steps
 * (as hetero-bench -d runs a depth). */
static double decode_at_depth(const char *path, const char *sched, int depth, int warm)
{
    hx_runtime *rt = open_on(path, "all", sched);
    hx_model *m;
    hx_model_options mo = hx_model_options_default();
    mo.n_ctx = (uint32_t)depth + 256;
    HX_ASSERT_OK(hx_model_load_shapes(rt, "qwen3-30b-a3b", "q8_0", &mo, &m));
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(m, &s));
    static int32_t ids[512];
    for (int i = 0; i < 512; i++)
        ids[i] = 1 + i;
    HX_ASSERT_OK(hx_session_eval(s, ids, 1, 0));
    for (int done = 1; done < depth; done += 512)
        HX_ASSERT_OK(hx_session_eval(s, ids, (uint32_t)(depth - done < 512 ? depth - done : 512), 0));
    for (int i = 0; i < warm; i++)
        HX_ASSERT_OK(hx_session_eval(s, ids + i % 64, 1, 0));
    double t0 = hx_runtime_clock(rt);
    for (int i = 0; i < 3; i++)
        HX_ASSERT_OK(hx_session_eval(s, ids + i, 1, 0));
    double step = (hx_runtime_clock(rt) - t0) / 3;
    hx_session_close(s);
    hx_model_free(m);
    hx_runtime_close(rt);
    return step;
}

/* Weights a replan moves off a device are freed there.  The plans of a
 * long prompt's chunks fill the GPU with expert groups (a 512-token chunk
 * uses every expert); once decoding has run a while, those plans are
 * dropped, their weights leave the GPU, and the decode plan is made
 * again with the room.  Before, nothing was freed: the decode plan,
 * counting the prompt's weights as held, kept most layers' KV cache in
 * host memory and was slower than -ngl (0.91x at this depth, as the
 * depth-16000 row of docs/scheduling.md was). */
START_TEST(a_prompts_weights_leave_the_gpu_when_decoding_runs)
{
    char path[64];
    write_machine(path, sizeof path, "24G", "");
    double plan = decode_at_depth(path, "plan", 16000, 24);
    double ngl = decode_at_depth(path, "ngl", 16000, 24);
    ck_assert_msg(plan <= ngl, "at depth 16000: plan %.6g s per decode step, ngl %.6g s", plan, ngl);
    unlink(path);
}
END_TEST

/* Qwen3-30B-A3B's shapes (Q8_0, 32 GB) on the test box with a 24 GB GPU,
 * decoding one sequence under plan: the layers whose expert groups the
 * plan splits between the GPU and host memory run the CPU's groups while
 * the GPU runs its own (the graph's two lanes), so the two devices are
 * busy at once for much of a step; in turn, their busy times would add up
 * to at most the step's. */
START_TEST(moe_groups_in_host_memory_run_beside_the_gpus)
{
    char path[64];
    write_machine(path, sizeof path, "24G", "");
    hx_runtime *rt = open_on(path, "all", "plan");
    hx_model *m;
    hx_model_options mo = hx_model_options_default();
    mo.n_ctx = 1024;
    HX_ASSERT_OK(hx_model_load_shapes(rt, "qwen3-30b-a3b", "q8_0", &mo, &m));
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(m, &s));
    int32_t ids[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    for (int i = 0; i < 2; i++)
        HX_ASSERT_OK(hx_session_eval(s, ids + i, 1, 0));
    hx_runtime_stats_reset(rt);
    double t0 = hx_runtime_clock(rt);
    for (int i = 0; i < 4; i++)
        HX_ASSERT_OK(hx_session_eval(s, ids + i, 1, 0));
    const double step = (hx_runtime_clock(rt) - t0) / 4;
    hx_device_stats cpu, gpu;
    HX_ASSERT_OK(hx_device_stats_get(rt, 0, &cpu));
    HX_ASSERT_OK(hx_device_stats_get(rt, 1, &gpu));
    /* Layers whose groups are on both devices. */
    int on[64][2] = {{0}}, split = 0;
    size_t n = hx_model_plan_size(m);
    for (size_t i = 0; i < n; i++) {
        hx_plan_task t;
        HX_ASSERT_OK(hx_model_plan_get(m, i, &t));
        if (!strcmp(t.op, "moe_gate_up") && t.layer >= 0 && t.layer < 64 && t.device >= 0 && t.device < 2)
            on[t.layer][t.device]++;
    }
    for (int l = 0; l < 64; l++)
        split += on[l][0] > 0 && on[l][1] > 0;
    ck_assert_msg(split >= 8, "%d layers' groups split between the CPU and the GPU", split);
    const double together = (cpu.busy_seconds + gpu.busy_seconds) / 4;
    ck_assert_msg(together > 1.2 * step, "per step: CPU busy %.3g ms, GPU busy %.3g ms, the step %.3g ms",
                  cpu.busy_seconds / 4 * 1e3, gpu.busy_seconds / 4 * 1e3, step * 1e3);
    printf("plan, qwen3-30b-a3b q8_0 on a 24 GB GPU: %d layers' groups split, per decode step CPU busy %.2f ms + "
           "GPU busy %.2f ms in a %.2f ms step\n",
           split, cpu.busy_seconds / 4 * 1e3, gpu.busy_seconds / 4 * 1e3, step * 1e3);
    hx_session_close(s);
    hx_model_free(m);
    hx_runtime_close(rt);
    unlink(path);
}
END_TEST

/* The declared router: a bad HX_MOE_ROUTING is refused by name. */
START_TEST(moe_routing_declarations_are_checked)
{
    char path[64];
    write_machine(path, sizeof path, "8G", "");
    hx_runtime *rt = open_on(path, "all", "plan");
    hx_model *m = NULL;
    hx_model_options mo = hx_model_options_default();
    mo.n_ctx = 256;
    setenv("HX_MOE_ROUTING", "zipf:x", 1);
    ck_assert_int_eq(hx_model_load_shapes(rt, "mixtral-8x7b", "q4_0", &mo, &m), HX_ERR_INVALID_ARG);
    ck_assert_ptr_null(m);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "HX_MOE_ROUTING"));
    setenv("HX_MOE_ROUTING", "zipf:1", 1);
    HX_ASSERT_OK(hx_model_load_shapes(rt, "mixtral-8x7b", "q4_0", &mo, &m));
    hx_model_free(m);
    unsetenv("HX_MOE_ROUTING");
    hx_runtime_close(rt);
    unlink(path);
}
END_TEST

/* A tally file of Mixtral's 32 layers x 8 experts in which expert e of
 * every layer was chosen weight(e) times. */
static void write_tally(const char *path, unsigned (*weight)(int e))
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "hetero-expert-tally 1\nlayers 32 experts 8 used 2\n");
    for (int l = 0; l < 32; l++) {
        fprintf(f, "layer %d:", l);
        for (int e = 0; e < 8; e++)
            fprintf(f, " %u", weight(e));
        fprintf(f, "\n");
    }
    ck_assert_int_eq(fclose(f), 0);
}

static unsigned hot_first(int e) { return 4000u / (unsigned)(e + 1); }
static unsigned hot_last(int e) { return 4000u / (unsigned)(8 - e); }

/* Per layer of Mixtral's shapes under `plan` with the router a tally
 * file gives: which experts' groups (one expert each) are on the GPU
 * (bit e), after a few decode steps on the 8 GB test box. */
static void experts_on_gpu(const char *machine, const char *routing, uint32_t *on_gpu, int *split_layers)
{
    hx_runtime *rt = open_on(machine, "all", "plan");
    hx_model *m;
    hx_model_options mo = hx_model_options_default();
    mo.n_ctx = 1024;
    mo.moe_routing = routing;
    HX_ASSERT_OK(hx_model_load_shapes(rt, "mixtral-8x7b", "q4_0", &mo, &m));
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(m, &s));
    int32_t ids[4] = {1, 2, 3, 4};
    for (int i = 0; i < 4; i++)
        HX_ASSERT_OK(hx_session_eval(s, ids + i, 1, 0));
    memset(on_gpu, 0, sizeof *on_gpu * 32);
    uint32_t seen[32] = {0};
    size_t n = hx_model_plan_size(m);
    for (size_t i = 0; i < n; i++) {
        hx_plan_task t;
        HX_ASSERT_OK(hx_model_plan_get(m, i, &t));
        if (strcmp(t.op, "moe_gate_up") || t.layer < 0 || t.layer >= 32)
            continue;
        const char *at = strstr(t.reason, "experts ");
        ck_assert_msg(at != NULL, "no experts named in '%s'", t.reason);
        int e = atoi(at + strlen("experts "));
        ck_assert_int_ge(e, 0);
        ck_assert_int_lt(e, 8);
        seen[t.layer] |= 1u << e;
        if (t.device == 1)
            on_gpu[t.layer] |= 1u << e;
    }
    *split_layers = 0;
    for (int l = 0; l < 32; l++) {
        ck_assert_uint_eq(seen[l], 0xff);
        *split_layers += on_gpu[l] && on_gpu[l] != 0xff;
    }
    hx_session_close(s);
    hx_model_free(m);
    hx_runtime_close(rt);
}

/* The router's tallies feed the plan: with the most chosen experts first
 * in a tally file, the layers whose experts are split keep experts 0, 1,
 * ... on the GPU; with the same tallies reversed, experts 7, 6, ...: each
 * layer's GPU experts are the most chosen ones. */
START_TEST(a_tally_file_puts_the_most_chosen_experts_on_the_gpu)
{
    char path[64], first[80], last[80];
    write_machine(path, sizeof path, "8G", "");
    snprintf(first, sizeof first, "%s.first", path);
    snprintf(last, sizeof last, "%s.last", path);
    write_tally(first, hot_first);
    write_tally(last, hot_last);
    uint32_t gpu_first[32], gpu_last[32];
    int split_first, split_last;
    experts_on_gpu(path, first, gpu_first, &split_first);
    experts_on_gpu(path, last, gpu_last, &split_last);
    ck_assert_msg(split_first > 0 && split_last > 0, "layers with experts on both sides: %d, %d", split_first,
                  split_last);
    for (int l = 0; l < 32; l++) {
        /* A prefix of the most chosen: bits 0..c-1 with the hottest first,
         * bits 8-c..7 with them last. */
        uint32_t a = gpu_first[l], b = gpu_last[l];
        ck_assert_msg((a & (a + 1)) == 0, "layer %d: experts %#x on the GPU, the most chosen first", l, a);
        ck_assert_msg(b == 0 || ((~b & 0xff) & ((~b & 0xff) + 1)) == 0,
                      "layer %d: experts %#x on the GPU, the most chosen last", l, b);
    }
    unlink(first), unlink(last), unlink(path);
}
END_TEST

/* A tally file that is not one, or not this model's, is refused by name;
 * a model without weights has no router to measure. */
START_TEST(bad_tally_files_are_refused)
{
    char path[64], bad[80];
    write_machine(path, sizeof path, "8G", "");
    snprintf(bad, sizeof bad, "%s.tally", path);
    hx_runtime *rt = open_on(path, "all", "plan");
    hx_model_options mo = hx_model_options_default();
    mo.n_ctx = 256;
    static const struct {
        const char *text;
        hx_status st;
        const char *says;
    } cases[] = {
        {"hello\n", HX_ERR_FORMAT, "not a tally file"},
        {"hetero-expert-tally 1\nlayers 32 experts 16 used 2\n", HX_ERR_INVALID_ARG, "32 x 8"},
        {"hetero-expert-tally 1\nlayers 32 experts 8 used 2\nlayer 0: 1 2 3 x 5 6 7 8\n", HX_ERR_FORMAT,
         "not a count"},
        {"hetero-expert-tally 1\nlayers 32 experts 8 used 2\nlayer 0: 1 2 3 -4 5 6 7 8\n", HX_ERR_FORMAT,
         "not a count"},
        {"hetero-expert-tally 1\nlayers 32 experts 8 used 2\nlayer 0: 1 2 3\n", HX_ERR_FORMAT, "fewer than 8 counts"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        FILE *f = fopen(bad, "w");
        ck_assert_ptr_nonnull(f);
        fputs(cases[i].text, f);
        fclose(f);
        mo.moe_routing = bad;
        hx_model *m = NULL;
        ck_assert_int_eq(hx_model_load_shapes(rt, "mixtral-8x7b", "q4_0", &mo, &m), cases[i].st);
        ck_assert_ptr_null(m);
        ck_assert_msg(strstr(hx_last_error(), cases[i].says) && strstr(hx_last_error(), "moe_routing"),
                      "case %zu: %s", i, hx_last_error());
    }
    hx_model *m = NULL;
    mo.moe_routing = "/nonexistent/tally";
    ck_assert_int_eq(hx_model_load_shapes(rt, "mixtral-8x7b", "q4_0", &mo, &m), HX_ERR_IO);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "/nonexistent/tally"));
    mo.moe_routing = "measured";
    ck_assert_int_eq(hx_model_load_shapes(rt, "mixtral-8x7b", "q4_0", &mo, &m), HX_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "no router to measure"));
    hx_runtime_close(rt);
    unlink(bad), unlink(path);
}
END_TEST

START_TEST(unknown_policies_are_refused)
{
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = "cpu";
    o.sched = "planner";
    hx_runtime *rt;
    ck_assert_int_eq(hx_runtime_open(&rt, &o), HX_ERR_INVALID_ARG);
    ck_assert(strstr(hx_last_error(), "plan") && strstr(hx_last_error(), "ngl"));
}
END_TEST

Suite *suite_plan(void)
{
    Suite *s = suite_create("plan");
    TCase *c = tcase_create("plan");
    tcase_set_timeout(c, 300);
    tcase_add_test(c, plan_is_never_worse_than_one_device);
    tcase_add_test(c, ngl_fills_the_gpu_with_the_last_layers);
    tcase_add_test(c, a_split_model_changes_shape_without_running_out_of_memory);
    tcase_add_test(c, a_slowdown_mid_run_changes_the_plan);
    tcase_add_test(c, a_passing_slowdown_is_noticed);
    tcase_add_test(c, moe_experts_that_do_not_fit_stay_in_host_memory);
    tcase_add_test(c, moe_groups_in_host_memory_run_beside_the_gpus);
    tcase_add_test(c, moe_routing_declarations_are_checked);
    tcase_add_test(c, a_prompts_weights_leave_the_gpu_when_decoding_runs);
    tcase_add_test(c, a_tally_file_puts_the_most_chosen_experts_on_the_gpu);
    tcase_add_test(c, bad_tally_files_are_refused);
    tcase_add_test(c, unknown_policies_are_refused);
    suite_add_tcase(s, c);
    return s;
}
