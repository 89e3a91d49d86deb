/* KV offload by sequences (engine/kv_offload.c, partitioner/kv_offload.c)
 * on simulated machines: the planner admits an offloaded sequence only
 * where it predicts a gain, the two sub-batches of a step never run
 * faster than any device's own work allows, an offloaded sequence's KV
 * cache never takes the GPU's memory, and bad settings are refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "hx_test.h"
#include "model/model.h"
#include "quantize/synthetic.h"
#include "runtime/runtime.h"
#include "tests/cl_test.h"

typedef struct {
    double step_s;                   /* simulated seconds per decode step */
    double busy[3];                  /* each device's busy seconds in those steps */
    uint64_t kv_alloc[3];            /* each device's KV bytes allocated */
    int ndev, admitted;              /* sessions that ran */
    hx_status refused;               /* why the last session was not admitted */
    char why[512];
} decode_run;

/* `seqs` sessions `depth` tokens deep on machine file `machine` (devices
 * `devices`, everything on the GPU but what is offloaded), HX_KV_OFFLOAD
 * = `offload` ("" none), then `steps` decode steps of them all. */
static void decode(const char *machine, const char *devices, const char *shape, const char *type, const char *offload,
                   int force, int seqs, uint32_t depth, int steps, const char *trace, decode_run *out)
{
    memset(out, 0, sizeof *out);
    if (*offload)
        setenv("HX_KV_OFFLOAD", offload, 1);
    else
        unsetenv("HX_KV_OFFLOAD");
    if (force)
        setenv("HX_KV_OFFLOAD_FORCE", "1", 1);
    else
        unsetenv("HX_KV_OFFLOAD_FORCE");
    hx_runtime_options o = hx_runtime_options_default();
    o.machine = machine;
    o.devices = devices;
    o.sched = "static";
    o.perfmodel_dir = "off";
    o.inject = "";
    o.trace = "";
    hx_runtime *rt;
    HX_ASSERT_OK(hx_runtime_open(&rt, &o));
    hx_model_options mo = hx_model_options_default();
    /* As hetero-bench sizes them (bench/run.c). */
    mo.n_ctx = depth + (uint32_t)steps + 1;
    mo.kv_tokens = (uint32_t)seqs * ((depth + (uint32_t)steps + 15) / 16 * 16) + 32;
    mo.kv_prefix_cache = -1;
    mo.partition = "colocated";
    hx_model *m;
    HX_ASSERT_OK(hx_model_load_shapes(rt, shape, type, &mo, &m));
    hx_session *s[16] = {0};
    int32_t *ids = malloc(sizeof *ids * depth);
    int32_t cur[16];
    hx_status st = HX_OK;
    for (int k = 0; k < seqs && st == HX_OK; k++) {
        for (uint32_t i = 0; i < depth; i++)
            ids[i] = (int32_t)(3 + (i * 7 + (uint32_t)k * 131) % 1000);
        HX_ASSERT_OK(hx_session_open(m, &s[k]));
        st = hx_session_eval(s[k], ids, depth, 0);
        if (st)
            snprintf(out->why, sizeof out->why, "%s", hx_last_error());
        cur[k] = 5 + k;
        if (st == HX_OK)
            out->admitted++;
    }
    out->refused = st;
    const int n = out->admitted;
    out->ndev = hx_runtime_device_count(rt);
    hx_device_stats before[3], after[3];
    for (int d = 0; d < out->ndev && d < 3; d++)
        HX_ASSERT_OK(hx_device_stats_get(rt, d, &before[d]));
    if (trace)
        HX_ASSERT_OK(hx_runtime_trace_start(rt, trace));
    const double t0 = hx_runtime_clock(rt);
    for (int i = 0; i < steps && n; i++) {
        hx_batch b = {.n = (size_t)n, .tokens = cur, .sessions = s};
        HX_ASSERT_OK(hx_batch_eval(m, &b));
    }
    out->step_s = (hx_runtime_clock(rt) - t0) / steps;
    if (trace)
        HX_ASSERT_OK(hx_runtime_trace_stop(rt));
    for (int d = 0; d < out->ndev && d < 3; d++) {
        HX_ASSERT_OK(hx_device_stats_get(rt, d, &after[d]));
        out->busy[d] = (after[d].busy_seconds - before[d].busy_seconds) / steps;
        out->kv_alloc[d] = after[d].kv_bytes_allocated;
    }
    free(ids);
    for (int k = 0; k < seqs; k++)
        hx_session_close(s[k]);
    hx_model_free(m);
    hx_runtime_close(rt);
    unsetenv("HX_KV_OFFLOAD");
    unsetenv("HX_KV_OFFLOAD_FORCE");
}

static const char *const ws3090 = "bench/machines/ws-3090-u55c.machine";

/* A step cannot end before any device has done its share of it. */
static void within_capacity(const decode_run *r, const char *what)
{
    for (int d = 0; d < r->ndev && d < 3; d++)
        ck_assert_msg(r->step_s >= r->busy[d] * (1 - 1e-9), "%s: a %.3f ms step, device %d busy %.3f ms in it", what,
                      r->step_s * 1e3, d, r->busy[d] * 1e3);
}

/* LLaMA-3.1-8B F16 on the RTX 3090 workstation, 32k tokens deep: the
 * GPU's memory holds one sequence's cache beside the weights; the U55C's
 * HBM holds three more, attended there while the GPU runs the other
 * sub-batch.  The planner admits them (it predicts a gain at each), the
 * simulation agrees, no offloaded cache takes the GPU's memory, and no
 * step is shorter than a device's work in it. */
START_TEST(offload_to_the_fpga_pays_where_predicted)
{
    decode_run alone, off;
    decode(ws3090, "gpu", "llama3-8b", "f16", "1:none", 0, 1, 32768, 2, NULL, &alone);
    ck_assert_int_eq(alone.admitted, 1);
    decode(ws3090, "gpu", "llama3-8b", "f16", "1:none", 0, 2, 32768, 1, NULL, &off);
    ck_assert_int_eq(off.admitted, 1);
    ck_assert_msg(off.refused == HX_ERR_NO_MEMORY && strstr(off.why, "no offload device was named"), "%s", off.why);
    decode(ws3090, "all", "llama3-8b", "f16", "1:fpga", 0, 4, 32768, 2, NULL, &off);
    ck_assert_int_eq(off.admitted, 4);
    const double gain = (4 / off.step_s) / (1 / alone.step_s);
    printf("kv_offload: 8B F16 @32k on ws-3090-u55c: GPU alone 1 sequence %.2f t/s; 1 + 3 on the FPGA %.2f t/s "
           "(%.2fx), FPGA busy %.0f %%, GPU %.0f %% (simulated)\n",
           1 / alone.step_s, 4 / off.step_s, gain, 100 * off.busy[2] / off.step_s, 100 * off.busy[1] / off.step_s);
    ck_assert_msg(gain > 1.0, "offload admitted and predicted to gain, simulated %.3fx", gain);
    within_capacity(&off, "GPU + FPGA");
    /* The GPU's KV slots: its memory's room, less than two sequences'
     * caches (alone.kv_alloc[0] is one's), not four. */
    ck_assert_uint_lt(off.kv_alloc[1], 2 * alone.kv_alloc[0]);
    ck_assert_uint_ge(off.kv_alloc[2], 3 * (alone.kv_alloc[0] / 2));
    /* A fifth does not fit the FPGA's memory: refused, not stalled. */
    decode(ws3090, "all", "llama3-8b", "f16", "1:fpga", 0, 5, 32768, 1, NULL, &off);
    ck_assert_int_eq(off.admitted, 4);
    ck_assert_int_eq(off.refused, HX_ERR_NO_MEMORY);
    ck_assert_msg(strstr(off.why, "device 2's the cache of 3 more"), "%s", off.why);
}
END_TEST

/* LLaMA-3.1-8B F16 on the same workstation, 8k tokens deep: seven
 * sequences fill the RTX 3090; an eighth on the U55C would make the GPU
 * read its 16 GB of weights twice per step for one more token, and the
 * planner refuses it.  Forced, the simulation shows the loss it
 * predicted, and the step still respects each device's work.  (The same
 * holds for 70B Q8_0 at 32k on the H200 server with the CPUs: 0.76x
 * forced, bench/kv-offload-grid; too slow a test under the sanitizers.) */
START_TEST(the_planner_refuses_a_predicted_loss)
{
    decode_run seven, eight;
    decode(ws3090, "all", "llama3-8b", "f16", "7:fpga", 0, 8, 8192, 1, NULL, &eight);
    ck_assert_int_eq(eight.admitted, 7);
    ck_assert_int_eq(eight.refused, HX_ERR_NO_MEMORY);
    ck_assert_msg(strstr(eight.why, "predicted to lose"), "%s", eight.why);
    decode(ws3090, "all", "llama3-8b", "f16", "7:fpga", 0, 7, 8192, 1, NULL, &seven);
    decode(ws3090, "all", "llama3-8b", "f16", "7:fpga", 1, 8, 8192, 1, NULL, &eight);
    ck_assert_int_eq(eight.admitted, 8);
    printf("kv_offload: 8B F16 @8k on ws-3090-u55c: 7 on the GPU %.2f t/s; 7 + 1 on the FPGA (forced) %.2f t/s "
           "(simulated)\n", 7 / seven.step_s, 8 / eight.step_s);
    ck_assert_msg(8 / eight.step_s < 7 / seven.step_s, "the loss predicted is a gain simulated");
    within_capacity(&seven, "GPU alone");
    within_capacity(&eight, "GPU + FPGA");
    ck_assert_double_eq(seven.busy[2], 0); /* the FPGA took no task of the GPU's sequences */
    ck_assert(eight.busy[2] > 0);
}
END_TEST

/* A bad HX_KV_OFFLOAD is refused at the first evaluation, by name. */
START_TEST(bad_settings_are_refused)
{
    static const struct {
        const char *machine, *devices, *value, *says;
    } cases[] = {
        {"bench/machines/ws-3090-u55c.machine", "all", "x", "expected N[:DEV]"},
        {"bench/machines/ws-3090-u55c.machine", "all", "0", "expected N[:DEV]"},
        {"bench/machines/ws-3090-u55c.machine", "all", "2x", "expected N[:DEV]"},
        {"bench/machines/ws-3090-u55c.machine", "all", "2:9", "no device '9'"},
        {"bench/machines/ws-3090-u55c.machine", "all", "2:1", "no offload device '1' beside the GPU"},
        {"bench/machines/ws-3090-u55c.machine", "cpu,gpu", "2:fpga", "no offload device 'fpga'"},
        {"bench/machines/epyc2s.machine", "all", "2", "has no GPU"},
        {"bench/machines/ws-3090-u55c.machine", "gpu", "2:cpu", "no offload device 'cpu'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        decode_run r;
        decode(cases[i].machine, cases[i].devices, "tiny", "f16", cases[i].value, 0, 1, 16, 1, NULL, &r);
        ck_assert_int_eq(r.admitted, 0);
        ck_assert_msg(r.refused == HX_ERR_INVALID_ARG || r.refused == HX_ERR_NO_DEVICE, "'%s': %s", cases[i].value,
                      hx_status_str(r.refused));
        ck_assert_msg(strstr(r.why, cases[i].says), "'%s': %s", cases[i].value, r.why);
    }
}
END_TEST

enum { R_SEQS = 3, R_STEPS = 4, R_MAXV = 512 };

/* Real kernels: a synthetic model on the CPU with PoCL standing in for an
 * FPGA card with memory of its own; R_SEQS sessions' prompts, then
 * R_STEPS batched decode steps, each session's logits after each.  With
 * `offload`, HX_KV_OFFLOAD=1:fpga (forced: a real machine's planner has
 * no measurements of the FPGA yet): the first session's cache on the
 * CPU, the others' on the emulated card, attended there. */
static void real_decode(const char *file, int offload, float *logits, uint64_t *fpga_tasks, uint64_t *fpga_kv)
{
    if (offload) {
        setenv("HX_KV_OFFLOAD", "1:fpga", 1);
        setenv("HX_KV_OFFLOAD_FORCE", "1", 1);
    }
    hx_runtime *rt = hx_cl_test_open("cpu,fpga", 1);
    const int fpga = hx_cl_test_device(rt);
    hx_device_info *info = &rt->devices[fpga]->info; /* memory of its own, as a card's */
    info->unified_memory = 0;
    info->memory_node = rt->n_memory_nodes++;
    hx_model_options mo = hx_model_options_default();
    mo.kv_prefix_cache = -1;
    mo.n_ctx = 256;
    mo.partition = "colocated";
    hx_model *m;
    HX_ASSERT_OK(hx_model_load(rt, file, &mo, &m));
    const uint32_t V = m->info.n_vocab;
    ck_assert_uint_le(V, R_MAXV);
    hx_session *s[R_SEQS];
    int32_t ids[64], cur[R_SEQS];
    for (int k = 0; k < R_SEQS; k++) {
        const int n = 20 + 5 * k;
        for (int i = 0; i < n; i++)
            ids[i] = (int32_t)((i * 37 + 11 + 13 * k) % 250);
        HX_ASSERT_OK(hx_session_open(m, &s[k]));
        HX_ASSERT_OK(hx_session_eval(s[k], ids, (size_t)n, 0));
    }
    for (int i = 0; i < R_STEPS; i++) {
        for (int k = 0; k < R_SEQS; k++)
            cur[k] = (int32_t)(3 + 17 * i + 5 * k);
        hx_batch b = {.n = R_SEQS, .tokens = cur, .sessions = s};
        HX_ASSERT_OK(hx_batch_eval(m, &b));
        for (int k = 0; k < R_SEQS; k++)
            memcpy(logits + ((size_t)i * R_SEQS + (size_t)k) * R_MAXV, hx_session_logits(s[k], -1),
                   V * sizeof *logits);
    }
    hx_device_stats ds;
    HX_ASSERT_OK(hx_device_stats_get(rt, fpga, &ds));
    *fpga_tasks = ds.tasks;
    *fpga_kv = ds.kv_bytes_named;
    for (int k = 0; k < R_SEQS; k++)
        hx_session_close(s[k]);
    hx_model_free(m);
    hx_runtime_close(rt);
    unsetenv("HX_KV_OFFLOAD");
    unsetenv("HX_KV_OFFLOAD_FORCE");
}

static double rel_l2(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

/* The split computes what the whole batch on the CPU computes: every
 * session's logits at every step, within what PoCL's attention changes
 * in the last bits; the sessions left on the CPU bit for bit. */
START_TEST(offloaded_sessions_give_the_same_logits)
{
    static const hx_synthetic_config cfg = {"offload", 128, 2, 4, 2, 256, 512, "llama", 0};
    char dir[64], file[128];
    snprintf(dir, sizeof dir, "/tmp/hx-kvoff-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(file, sizeof file, "%s/m.gguf", dir);
    HX_ASSERT_OK(hx_synthetic_write(file, &cfg, "f16", 7));
    const size_t n = (size_t)R_STEPS * R_SEQS * R_MAXV;
    float *whole = calloc(n, sizeof(float)), *split = calloc(n, sizeof(float));
    uint64_t tasks0, tasks1, kv0, kv1;
    real_decode(file, 0, whole, &tasks0, &kv0);
    real_decode(file, 1, split, &tasks1, &kv1);
    ck_assert_uint_eq(tasks0, 0); /* colocated: all on the CPU */
    ck_assert_msg(tasks1 > 0 && kv1 > 0, "the emulated FPGA ran %llu tasks, holds %llu KV bytes",
                  (unsigned long long)tasks1, (unsigned long long)kv1);
    double worst = 0;
    for (int i = 0; i < R_STEPS; i++)
        for (int k = 0; k < R_SEQS; k++) {
            const size_t at = ((size_t)i * R_SEQS + (size_t)k) * R_MAXV;
            const double e = rel_l2(split + at, whole + at, R_MAXV);
            if (k == 0)
                ck_assert_msg(memcmp(split + at, whole + at, R_MAXV * sizeof(float)) == 0,
                              "step %d: the CPU's session's logits differ (relative L2 %g)", i, e);
            else
                ck_assert_msg(e < 1e-3, "step %d, session %d: relative L2 %g", i, k, e);
            worst = e > worst ? e : worst;
        }
    printf("kv_offload: CPU + PoCL as an FPGA, 2 of 3 sessions offloaded: %llu tasks there, logits relative L2 at "
           "most %.3g against the CPU alone\n", (unsigned long long)tasks1, worst);
    free(whole);
    free(split);
    unlink(file);
    rmdir(dir);
}
END_TEST

/* bench/kv-offload-grid's rows: one where the planner offloads and
 * gains, one where it refuses and the forced run shows the loss; the
 * script fails (exit status 1) on a row below 0.98x the GPU alone. */
START_TEST(the_grid_rows)
{
    char cmd[1024], out[8192];
    snprintf(cmd, sizeof cmd,
             "bench/kv-offload-grid --build %s -j 2 --rows "
             "ws-3090-u55c/llama3-8b:f16/32768/fpga,ws-3090-u55c/llama3-8b:f16/8192/fpga 2>&1",
             hx_test_build_dir());
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = 0, got;
    while (n + 1 < sizeof out && (got = fread(out + n, 1, sizeof out - 1 - n, p)) > 0)
        n += got;
    out[n] = 0;
    const int st = pclose(p);
    printf("%s", out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "kv-offload-grid failed:\n%s", out);
    ck_assert_msg(strstr(out, "| ws-3090-u55c | llama3-8b:f16 | 32768 | fpga | 1 | ") &&
                      strstr(out, "| 1 + 3 | ") && strstr(out, "**gain**"), "no gain row:\n%s", out);
    ck_assert_msg(strstr(out, "| 8192 | fpga | 7 | ") && strstr(out, "refused: predicted loss; forced 7 + 1"),
                  "no refused row:\n%s", out);
    ck_assert_msg(strstr(out, "0 where the plan is below 0.98x"), "%s", out);
}
END_TEST

Suite *suite_kv_offload(void)
{
    Suite *s = suite_create("kv_offload");
    TCase *c = tcase_create("kv_offload");
    tcase_set_timeout(c, 300);
    tcase_add_test(c, offload_to_the_fpga_pays_where_predicted);
    tcase_add_test(c, the_planner_refuses_a_predicted_loss);
    tcase_add_test(c, bad_settings_are_refused);
    tcase_add_test(c, offloaded_sessions_give_the_same_logits);
    tcase_add_test(c, the_grid_rows);
    suite_add_tcase(s, c);
    return s;
}
