/* The experts' two lanes on real kernels (tests/expert_split.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/model.h"
#include "runtime/device.h"
#include "runtime/runtime.h"
#include "tests/expert_split.h"
#include "tests/hx_test.h"
#include "tests/small_model.h"

enum { STEPS = 12, MAXV = 512 };

/* A prompt, then STEPS decode steps' logits, on `rt`; the layers whose
 * groups the last plan put on two devices; whether the graph had a
 * second lane to give them. */
static void decode_logits(hx_runtime *rt, const char *path, float *logits, int *split, int *lanes)
{
    hx_model *m = NULL;
    hx_model_options mo = hx_model_options_default();
    mo.n_ctx = 128;
    HX_ASSERT_OK(hx_model_load(rt, path, &mo, &m));
    const uint32_t V = m->info.n_vocab;
    ck_assert_uint_le(V, MAXV);
    hx_session *s = NULL;
    HX_ASSERT_OK(hx_session_open(m, &s));
    int32_t prompt[16];
    for (int i = 0; i < 16; i++)
        prompt[i] = 1 + 7 * i;
    HX_ASSERT_OK(hx_session_eval(s, prompt, 16, 0));
    for (int i = 0; i < STEPS; i++) {
        const int32_t t = 3 + 11 * i;
        HX_ASSERT_OK(hx_session_eval(s, &t, 1, 0));
        memcpy(logits + (size_t)i * MAXV, hx_session_logits(s, -1), 4ull * V);
    }
    int on[64][4] = {{0}};
    const size_t n = hx_model_plan_size(m);
    for (size_t i = 0; i < n; i++) {
        hx_plan_task t;
        HX_ASSERT_OK(hx_model_plan_get(m, i, &t));
        if (!strcmp(t.op, "moe_gate_up") && t.layer >= 0 && t.layer < 64 && t.device >= 0 && t.device < 4)
            on[t.layer][t.device]++;
    }
    *split = 0;
    for (int l = 0; l < 64; l++)
        *split += (on[l][0] > 0) + (on[l][1] > 0) + (on[l][2] > 0) + (on[l][3] > 0) > 1;
    *lanes = m->act[0].moe_h1 != NULL;
    HX_ASSERT_OK(hx_session_close(s));
    HX_ASSERT_OK(hx_model_free(m));
}

void hx_expert_split_run(hx_runtime *rt, int other, double slow, hx_expert_split *out)
{
    char dir[64] = "/tmp/hx-lanes-XXXXXX", path[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/moe.gguf", dir);
    HX_ASSERT_OK(hx_model_write_synthetic(path, "qwen3moe-tiny", "f32", 13));
    float *ref = calloc((size_t)STEPS * MAXV, 4), *got = calloc((size_t)STEPS * MAXV, 4);
    int split = 0, lanes = 0;
    hx_runtime *cpu = hx_small_runtime(2, NULL);
    decode_logits(cpu, path, ref, &split, &lanes);
    ck_assert_int_eq(lanes, 0); /* one memory: nothing to split */
    HX_ASSERT_OK(hx_runtime_close(cpu));

    int c = -1;
    for (int d = 0; d < rt->ndevices && c < 0; d++)
        if (rt->devices[d]->info.family == HX_FAMILY_CPU)
            c = d;
    ck_assert_int_ge(c, 0);
    hx_device_info *info = &rt->devices[other]->info;
    if (!info->memory_node) { /* a card's memory, for a device computing in the host's */
        info->unified_memory = 0;
        info->memory_node = rt->n_memory_nodes++;
    }
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    /* The planner leaves 512 MiB of a device's memory free. */
    info->global_mem_bytes = (512ull << 20) + (uint64_t)st.st_size / 2;
    hx_injection inj = {.slow = slow};
    HX_ASSERT_OK(hx_device_inject(rt, c, &inj));
    decode_logits(rt, path, got, &out->split, &lanes);
    ck_assert_msg(lanes, "no second lane's buffers with a device of memory of its own");
    hx_device_stats cs, os;
    HX_ASSERT_OK(hx_device_stats_get(rt, c, &cs));
    HX_ASSERT_OK(hx_device_stats_get(rt, other, &os));
    out->cpu_tasks = cs.tasks;
    out->other_tasks = os.tasks;
    out->worst_nmse = 0;
    for (int i = 0; i < STEPS; i++) {
        double num = 0, den = 0;
        for (int v = 0; v < MAXV; v++) {
            const double d = (double)got[i * MAXV + v] - ref[i * MAXV + v];
            num += d * d;
            den += (double)ref[i * MAXV + v] * ref[i * MAXV + v];
        }
        out->worst_nmse = fmax(out->worst_nmse, num / den);
    }
    free(ref), free(got);
    unlink(path);
    rmdir(dir);
}
