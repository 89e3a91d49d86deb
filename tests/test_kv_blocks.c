/* KV blocks as the unit of residence on real OpenCL: PoCL standing in
 * for an FPGA with memory of its own runs attention on the KV blocks it
 * brings over one by one, and the logits equal those of the whole-buffer
 * run (PoCL in host memory) bit for bit.  What crosses is counted in the
 * simulator's suite (tests/test_sim.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/model.h"
#include "model/synthetic.h"
#include "runtime/runtime.h"
#include "tests/cl_test.h"

static hx_runtime_stats stats_now(hx_runtime *rt)
{
    hx_runtime_stats st;
    hx_runtime_stats_get(rt, &st);
    return st;
}

/* PoCL as an FPGA with memory of its own (what a card would have): the
 * device moves to a node of its own before anything uses it. */
static hx_runtime *open_pocl_discrete(int *fpga)
{
    hx_runtime *rt = hx_cl_test_open("cpu,fpga", 1);
    *fpga = hx_cl_test_device(rt);
    hx_device_info *info = &rt->devices[*fpga]->info;
    info->unified_memory = 0;
    info->memory_node = rt->n_memory_nodes++;
    return rt;
}

enum { N_PROMPT = 37, N_GEN = 6, MAXV = 4096 };

static const hx_synthetic_config cfg = {"blocks", 128, 2, 4, 2, 256, 512, "llama", 0};

/* Logits of a prompt and a few decode steps; with `evict`, before each
 * step every layer's cache is made the host's alone, so that attention on
 * a device with its own memory brings the blocks it reads back. */
static void run_model(hx_runtime *rt, const char *file, int evict, float *logits, uint64_t *kv_moved)
{
    hx_model_options mo = hx_model_options_default();
    mo.kv_prefix_cache = -1;
    mo.n_ctx = 256;
    hx_model *m;
    HX_ASSERT_OK(hx_model_load(rt, file, &mo, &m));
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(m, &s));
    int32_t ids[N_PROMPT + N_GEN];
    for (int i = 0; i < N_PROMPT + N_GEN; i++)
        ids[i] = (int32_t)((i * 37 + 11) % 250);
    HX_ASSERT_OK(hx_session_eval(s, ids, N_PROMPT, 0));
    const uint32_t V = m->info.n_vocab;
    ck_assert_uint_le(V, MAXV);
    memcpy(logits, hx_session_logits(s, -1), V * sizeof *logits);
    *kv_moved = 0;
    for (int i = 0; i < N_GEN; i++) {
        if (evict)
            for (uint32_t l = 0; l < m->kv->n_layer; l++) {
                void *host;
                HX_ASSERT_OK(hx_buffer_acquire(m->kv->k[l], HX_RW, &host));
                HX_ASSERT_OK(hx_buffer_acquire(m->kv->v[l], HX_RW, &host));
            }
        hx_runtime_stats_reset(rt);
        HX_ASSERT_OK(hx_session_eval(s, ids + N_PROMPT + i, 1, 0));
        *kv_moved += stats_now(rt).bytes_copied;
        memcpy(logits + (size_t)(i + 1) * MAXV, hx_session_logits(s, -1), V * sizeof *logits);
    }
    hx_session_close(s);
    hx_model_free(m);
}

START_TEST(pocl_attention_on_blocks_gives_the_same_logits)
{
    char dir[64], file[128];
    snprintf(dir, sizeof dir, "/tmp/hx-blocks-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(file, sizeof file, "%s/m.gguf", dir);
    HX_ASSERT_OK(hx_synthetic_write(file, &cfg, "f16", 7));
    const size_t n = (size_t)(N_GEN + 1) * MAXV;
    float *unified = calloc(n, sizeof(float)), *own = calloc(n, sizeof(float)), *evicted = calloc(n, sizeof(float));
    uint64_t moved_unified, moved_own, moved_evicted;

    int fpga;
    hx_runtime *rt = hx_cl_test_open("cpu,fpga", 1);
    fpga = hx_cl_test_device(rt);
    run_model(rt, file, 0, unified, &moved_unified);
    hx_device_stats ds;
    HX_ASSERT_OK(hx_device_stats_get(rt, fpga, &ds));
    ck_assert_msg(ds.tasks > 0, "attention never ran on the emulated FPGA");
    hx_runtime_close(rt);

    rt = open_pocl_discrete(&fpga);
    run_model(rt, file, 0, own, &moved_own);
    HX_ASSERT_OK(hx_device_stats_get(rt, fpga, &ds));
    ck_assert_msg(ds.tasks > 0, "attention never ran on the emulated FPGA");
    hx_runtime_close(rt);

    rt = open_pocl_discrete(&fpga);
    run_model(rt, file, 1, evicted, &moved_evicted);
    hx_runtime_close(rt);

    ck_assert_msg(memcmp(unified, own, n * sizeof(float)) == 0, "logits differ with the FPGA's own memory");
    ck_assert_msg(memcmp(unified, evicted, n * sizeof(float)) == 0, "logits differ when blocks come back");
    /* Each step after an eviction brings back the blocks read (3 of 16
     * tokens, K and V, 2 layers), far less than the caches. */
    const uint64_t block = 16ull * 2 * 32 * 2; /* tokens x KV heads x head size x f16 */
    ck_assert_msg(moved_evicted - moved_own == (uint64_t)N_GEN * 3 * 2 * 2 * block,
                  "%llu bytes moved after evictions, %llu without", (unsigned long long)moved_evicted,
                  (unsigned long long)moved_own);
    free(unified);
    free(own);
    free(evicted);
    unlink(file);
    rmdir(dir);
}
END_TEST

Suite *suite_kv_blocks(void)
{
    Suite *s = suite_create("kv_blocks");
    TCase *c = tcase_create("kv_blocks");
    tcase_set_timeout(c, 300);
    tcase_add_test(c, pocl_attention_on_blocks_gives_the_same_logits);
    suite_add_tcase(s, c);
    return s;
}
