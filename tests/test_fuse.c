/* Fused projections (hx_model_options.fuse_matmuls): a layer's Q/K/V
 * matmuls as one "matmul_multi" task and its gate/up pair as another.
 *
 * On the CPU the fused task computes every output row with the single
 * matmul's kernel, so the logits are the same bits fused and unfused: at
 * each SIMD level this processor runs, for F16, Q8_0, Q4_0 and Q4_K
 * files, a Q4_K_M mix (V and FFN down of some layers Q6_K: one task, a
 * kernel per weight), a Qwen2 file (Q/K/V biases), with the repacked
 * copies on and off.  On PoCL the fused task runs each part with the
 * matmul kernel, compared within the OpenCL tolerance.  A fused
 * evaluation submits two tasks fewer per layer. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_cpu/quant.h"
#include "model/model.h"
#include "quantize/synthetic.h"
#include "tests/cl_test.h"
#include "tests/hx_test.h"

static const int32_t ids[] = {256, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114};
enum { N_IDS = sizeof ids / sizeof *ids };

/* Logits of every position of the prompt; *tasks the tasks its
 * evaluation submitted. */
static float *logits(hx_runtime *rt, const char *path, int fuse, int repack, uint32_t *nv, uint64_t *tasks)
{
    hx_model_options o = hx_model_options_default();
    o.fuse_matmuls = fuse;
    o.repack = repack;
    o.n_ctx = 64;
    hx_model *m;
    HX_ASSERT_OK(hx_model_load(rt, path, &o, &m));
    hx_model_info in;
    HX_ASSERT_OK(hx_model_info_get(m, &in));
    *nv = in.n_vocab;
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(m, &s));
    hx_runtime_stats before, after;
    hx_runtime_stats_get(rt, &before);
    HX_ASSERT_OK(hx_session_eval(s, ids, N_IDS, 1));
    hx_runtime_stats_get(rt, &after);
    *tasks = after.tasks_submitted - before.tasks_submitted;
    float *l = malloc(sizeof(float) * N_IDS * in.n_vocab);
    for (int p = 0; p < N_IDS; p++)
        memcpy(l + (size_t)p * in.n_vocab, hx_session_logits(s, p), sizeof(float) * in.n_vocab);
    HX_ASSERT_OK(hx_session_close(s));
    HX_ASSERT_OK(hx_model_free(m));
    return l;
}

/* The test files: name, and how each is made from the config. */
typedef struct {
    const char *name, *type, *recipe, *arch;
} test_file;

static const test_file files[] = {
    {"f16", "f16", NULL, "llama"},     {"q8_0", "q8_0", NULL, "llama"},       {"q4_0", "q4_0", NULL, "llama"},
    {"q4_K", "q4_K", NULL, "llama"},   {"Q4_K_M", "f16", "Q4_K_M", "llama"}, {"qwen2 q8_0", "q8_0", NULL, "qwen2"},
};
enum { N_FILES = sizeof files / sizeof *files };

static void write_file(const test_file *f, const char *dir, char *path, size_t cap)
{
    const hx_synthetic_config c = {"gqa", 256, 2, 8, 2, 512, 512, f->arch, 0};
    snprintf(path, cap, "%s/%d.gguf", dir, (int)(f - files));
    if (!f->recipe) {
        HX_ASSERT_OK(hx_synthetic_write(path, &c, f->type, 42));
        return;
    }
    char base[160];
    snprintf(base, sizeof base, "%s/base.gguf", dir);
    HX_ASSERT_OK(hx_synthetic_write(base, &c, f->type, 42));
    hx_quantize_options q = hx_quantize_options_default();
    q.recipe = f->recipe;
    HX_ASSERT_OK(hx_model_quantize_ex(base, path, &q));
}

/* The mix is what it claims: some layer's V not of Q's type. */
static void check_mixed(hx_runtime *rt, const char *path)
{
    hx_model *m;
    HX_ASSERT_OK(hx_model_load(rt, path, NULL, &m));
    int mixed = 0;
    for (uint32_t l = 0; l < m->info.n_layer; l++)
        mixed |= m->layers[l].w[HX_LW_V].type != m->layers[l].w[HX_LW_Q].type;
    ck_assert_msg(mixed, "the Q4_K_M file has no layer whose V differs from Q in type");
    HX_ASSERT_OK(hx_model_free(m));
}

/* A runtime of `devices` (two CPU threads), and a fresh directory. */
static hx_runtime *open_with_dir(const char *devices, char *dir, size_t cap)
{
    hx_test_tmpdir(dir, cap, "fuse");
    hx_runtime_options ro = hx_runtime_options_default();
    ro.devices = devices;
    ro.cpu_threads = 2;
    hx_runtime *rt;
    HX_ASSERT_OK(hx_runtime_open(&rt, &ro));
    return rt;
}

START_TEST(cpu_logits_fused_equal_unfused)
{
    char dir[64], path[160];
    hx_runtime *rt = open_with_dir("cpu", dir, sizeof dir);
    for (int fi = 0; fi < N_FILES; fi++) {
        write_file(&files[fi], dir, path, sizeof path);
        if (files[fi].recipe)
            check_mixed(rt, path);
        for (int level = HX_SIMD_SCALAR; level <= (int)hx_cpu_simd_max(); level++) {
            HX_ASSERT_OK(hx_quant_set_level((hx_simd_level)level));
            for (int repack = -1; repack <= 1; repack += 2) {
                uint32_t nv;
                uint64_t tf, tu;
                float *fused = logits(rt, path, 1, repack, &nv, &tf), *unfused = logits(rt, path, -1, repack, &nv, &tu);
                for (size_t i = 0; i < (size_t)N_IDS * nv; i++)
                    ck_assert(isfinite(fused[i]));
                ck_assert_msg(!memcmp(fused, unfused, sizeof(float) * N_IDS * nv),
                              "%s at %s, repack %s: fused logits differ from unfused", files[fi].name,
                              hx_cpu_simd_name((hx_simd_level)level), repack > 0 ? "on" : "off");
                /* Per layer, Q/K/V three tasks to one and gate/up two to one. */
                ck_assert_uint_eq(tu - tf, 3 * 2);
                free(fused);
                free(unfused);
            }
        }
        HX_ASSERT_OK(hx_quant_set_level(hx_cpu_simd_max()));
    }
    HX_ASSERT_OK(hx_runtime_close(rt));
    hx_test_rmdir(dir);
}
END_TEST

/* The fused op on PoCL's OpenCL CPU device: each part by the matmul
 * kernel of its type, all tasks pinned there by the device set. */
START_TEST(opencl_logits_fused_match_unfused)
{
    char dir[64], path[160];
    hx_runtime *rt = open_with_dir("opencl", dir, sizeof dir);
    for (int fi = 0; fi < 3; fi++) { /* f16, q8_0, q4_0: types every OpenCL kernel takes (get_rows too) */
        write_file(&files[fi], dir, path, sizeof path);
        uint32_t nv;
        uint64_t tf, tu;
        float *fused = logits(rt, path, 1, -1, &nv, &tf), *unfused = logits(rt, path, -1, -1, &nv, &tu);
        double num = 0, den = 0;
        for (size_t i = 0; i < (size_t)N_IDS * nv; i++) {
            ck_assert(isfinite(fused[i]));
            num += ((double)fused[i] - unfused[i]) * ((double)fused[i] - unfused[i]);
            den += (double)unfused[i] * unfused[i];
        }
        ck_assert_msg(sqrt(num / den) <= 1e-5, "%s on OpenCL: fused logits rel L2 %g from unfused", files[fi].name,
                      sqrt(num / den));
        ck_assert_uint_eq(tu - tf, 3 * 2);
        free(fused);
        free(unfused);
    }
    HX_ASSERT_OK(hx_runtime_close(rt));
    hx_test_rmdir(dir);
}
END_TEST

/* HX_FUSE=0 turns fusion off where the options leave it to the
 * environment: the evaluation has the unfused task count. */
START_TEST(env_turns_fusion_off)
{
    char dir[64], path[160];
    hx_runtime *rt = open_with_dir("cpu", dir, sizeof dir);
    write_file(&files[1], dir, path, sizeof path);
    uint32_t nv;
    uint64_t on, off, forced;
    float *l[3];
    l[0] = logits(rt, path, 0, 0, &nv, &on);
    setenv("HX_FUSE", "0", 1);
    l[1] = logits(rt, path, 0, 0, &nv, &off);
    l[2] = logits(rt, path, 1, 0, &nv, &forced);
    unsetenv("HX_FUSE");
    ck_assert_uint_eq(off - on, 3 * 2);
    ck_assert_uint_eq(forced, on);
    for (int i = 0; i < 3; i++)
        free(l[i]);
    HX_ASSERT_OK(hx_runtime_close(rt));
    hx_test_rmdir(dir);
}
END_TEST

Suite *suite_fuse(void)
{
    Suite *s = suite_create("fuse");
    TCase *tc = tcase_create("fuse");
    tcase_set_timeout(tc, 600);
    tcase_add_unchecked_fixture(tc, hx_cl_test_cache_setup, hx_cl_test_cache_teardown);
    tcase_add_test(tc, cpu_logits_fused_equal_unfused);
    tcase_add_test(tc, opencl_logits_fused_match_unfused);
    tcase_add_test(tc, env_turns_fusion_off);
    suite_add_tcase(s, tc);
    return s;
}
