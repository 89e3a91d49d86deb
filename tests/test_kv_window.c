/* Sliding-window attention (GGUF <arch>.attention.sliding_window): logits
 * against the float64 reference with the window applied, a window that
 * changes them, and a session's KV memory flat over 10,000 tokens. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "quantize/synthetic.h"
#include "tests/hx_test.h"
#include "tests/kv_test.h"
#include "tests/small_model.h"

enum { W = 24, BS = 16, N_POS = 72, N_PREFILL = 40 };

static const hx_synthetic_config cfg = {"swa", 128, 2, 4, 2, 256, 16384, "mistral", 0};
static char dir[64], path[128], plain[128];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/hx-swa-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/swa.gguf", dir);
    snprintf(plain, sizeof plain, "%s/plain.gguf", dir);
    HX_ASSERT_OK(hx_synthetic_write_windowed(path, &cfg, "f32", 42, W));
    HX_ASSERT_OK(hx_synthetic_write(plain, &cfg, "f32", 42));
}

static void teardown(void)
{
    char f[200];
    const char *names[] = {"swa.gguf", "plain.gguf", "ref.f32"};
    for (int i = 0; i < 3; i++) {
        snprintf(f, sizeof f, "%s/%s", dir, names[i]);
        unlink(f);
    }
    rmdir(dir);
}

static hx_model *load(hx_runtime *rt, const char *file, uint32_t kv_tokens, uint32_t n_ctx)
{
    hx_model_options o = hx_model_options_default();
    o.kv_type = "f32"; /* the reference keeps keys and values exact */
    o.kv_block = BS;
    o.kv_tokens = kv_tokens;
    o.n_ctx = n_ctx;
    hx_model *m = NULL;
    HX_ASSERT_OK(hx_model_load(rt, file, &o, &m));
    return m;
}

static void tokens(int32_t *t, int n)
{
    unsigned s = 3;
    t[0] = 256;
    for (int i = 1; i < n; i++) {
        s = s * 1103515245u + 12345u;
        t[i] = (int32_t)((s >> 16) % 256);
    }
}

/* A prefill, then one token at a time (each decode drops the block the
 * window left), every position's logits into out[N_POS][V]. */
static void run(hx_model *m, const int32_t *t, float *out, size_t V)
{
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(m, &s));
    HX_ASSERT_OK(hx_session_eval(s, t, N_PREFILL, 1));
    for (int i = 0; i < N_PREFILL; i++)
        memcpy(out + (size_t)i * V, hx_session_logits(s, i), sizeof(float) * V);
    for (int i = N_PREFILL; i < N_POS; i++) {
        HX_ASSERT_OK(hx_session_eval(s, &t[i], 1, 0));
        memcpy(out + (size_t)i * V, hx_session_logits(s, -1), sizeof(float) * V);
    }
    HX_ASSERT_OK(hx_session_close(s));
}

START_TEST(window_logits_match_reference)
{
    hx_runtime *rt = hx_small_runtime(2, NULL);
    hx_model *m = load(rt, path, 256, 256), *p = load(rt, plain, 256, 256);
    hx_model_info in;
    HX_ASSERT_OK(hx_model_info_get(m, &in));
    ck_assert_uint_eq(in.sliding_window, W);
    const size_t V = in.n_vocab;
    int32_t t[N_POS];
    tokens(t, N_POS);
    float *got = malloc(sizeof(float) * V * N_POS), *whole = malloc(sizeof(float) * V * N_POS);
    run(m, t, got, V);
    run(p, t, whole, V);

    char cmd[4096], ref[200];
    snprintf(ref, sizeof ref, "%s/ref.f32", dir);
    int n = snprintf(cmd, sizeof cmd, "python3 tests/ref_llama.py %s --out %s --tokens ", path, ref);
    for (int i = 0; i < N_POS; i++)
        n += snprintf(cmd + n, sizeof cmd - (size_t)n, i ? ",%d" : "%d", t[i]);
    snprintf(cmd + n, sizeof cmd - (size_t)n, " >/dev/null");
    ck_assert_msg(system(cmd) == 0, "the reference failed (pip install -r tests/requirements.txt): %s", cmd);
    float *want = malloc(sizeof(float) * V * N_POS);
    FILE *f = fopen(ref, "rb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fread(want, sizeof(float), V * N_POS, f), V * N_POS);
    fclose(f);

    /* As close as the f32 models of tests/test_model.c, at every position. */
    double worst = 0;
    for (int i = 0; i < N_POS; i++) {
        double e = hx_kv_test_rel_l2(got + (size_t)i * V, want + (size_t)i * V, V);
        ck_assert_msg(e <= 1e-4, "position %d: rel L2 %g from the reference", i, e);
        worst = e > worst ? e : worst;
    }
    const size_t past = (size_t)(W + 8) * V; /* positions well past the window's start */
    const double apart = hx_kv_test_rel_l2(got + past, whole + past, (size_t)N_POS * V - past);
    fprintf(stderr, "  window %d, %d positions: worst rel L2 %.3g from the reference, %.3g from no window\n", W,
            N_POS, worst, apart);
    /* The window matters: before it fills the two models agree, after it
     * they part. */
    ck_assert_double_le(hx_kv_test_rel_l2(got, whole, (size_t)W * V), 1e-6);
    ck_assert_double_ge(apart, 1e-3);
    free(got);
    free(whole);
    free(want);
    HX_ASSERT_OK(hx_model_free(m));
    HX_ASSERT_OK(hx_model_free(p));
    hx_runtime_close(rt);
}
END_TEST

/* 10,000 tokens, each the argmax of the last logits, from a pool of 8
 * blocks: the window's blocks are all a session holds at any step. */
START_TEST(window_memory_is_flat_over_10000_tokens)
{
    hx_runtime *rt = hx_small_runtime(2, NULL);
    hx_model *m = load(rt, path, 8 * BS, 10240);
    hx_model_info in;
    HX_ASSERT_OK(hx_model_info_get(m, &in));
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(m, &s));
    int32_t t[N_PREFILL];
    tokens(t, N_PREFILL);
    HX_ASSERT_OK(hx_session_eval(s, t, N_PREFILL, 0));
    const uint32_t most = (W + BS - 1) / BS + 1; /* the window's, straddling */
    uint32_t peak = 0;
    for (int i = N_PREFILL; i < 10000; i++) {
        const float *l = hx_session_logits(s, -1);
        int32_t next = hx_kv_test_argmax(l, in.n_vocab);
        hx_status st = hx_session_eval(s, &next, 1, 0);
        ck_assert_msg(st == HX_OK, "token %d: %s", i, hx_last_error());
        hx_model_stats ms;
        HX_ASSERT_OK(hx_model_stats_get(m, &ms));
        ck_assert_msg(ms.kv_blocks_used <= most, "token %d: %u blocks held", i, ms.kv_blocks_used);
        if (ms.kv_blocks_used > peak)
            peak = ms.kv_blocks_used;
        ck_assert(isfinite(l[0]));
    }
    ck_assert_uint_eq(hx_session_position(s), 10000);
    ck_assert_uint_eq(peak, most);
    fprintf(stderr, "  10000 tokens, window %d: at most %u KV blocks held (of %u in the pool)\n", W, peak, 8);
    HX_ASSERT_OK(hx_session_close(s));
    HX_ASSERT_OK(hx_model_free(m));
    hx_runtime_close(rt);
}
END_TEST

Suite *suite_kv_window(void)
{
    Suite *s = suite_create("kv_window");
    TCase *c = tcase_create("window");
    tcase_add_checked_fixture(c, setup, teardown);
    tcase_set_timeout(c, 600);
    tcase_add_test(c, window_logits_match_reference);
    tcase_add_test(c, window_memory_is_flat_over_10000_tokens);
    suite_add_tcase(s, c);
    return s;
}
