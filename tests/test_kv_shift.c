/* Context shift: a session at its context drops tokens after the first
 * n_keep and goes on.  The keys that move are re-rotated to their new
 * positions: on a one-layer model, whose keys and values depend on the
 * token and its position only, the logits after a shift equal a fresh
 * evaluation of the kept tokens at their new positions, within the KV
 * type's rounding.  Generation runs for three times the context. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/model.h"
#include "quantize/synthetic.h"
#include "tests/hx_test.h"
#include "tests/kv_test.h"
#include "tests/small_model.h"

enum { BS = 16, N = 48, KEEP = 4, DROP = 12, CTX = 64 };

/* One layer: the shifted keys and values are exactly what a fresh
 * evaluation computes (with two, the second layer's would remember the
 * dropped tokens). */
static const hx_synthetic_config one_layer = {"shift", 128, 1, 4, 2, 256, 256, "llama", 0};
/* path3: the same with Llama 3.1's rope_freqs, which the re-rotation of
 * the moved keys must divide its frequencies by as RoPE did; pathq: a
 * Qwen2 layer with a K bias of spread 8, which a quantized K cache stores
 * its keys less (model/kv_center.c) and the shift adds back before RoPE. */
#define QWEN_BOUND 2.5e-2
static const hx_synthetic_config qwen_layer = {"shift-qwen2", 128, 1, 4, 2, 256, 256, "qwen2", 0};
static char dir[64], path[128], path3[128], pathq[128];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/hx-shift-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    snprintf(path3, sizeof path3, "%s/llama3.gguf", dir);
    HX_ASSERT_OK(hx_synthetic_write(path, &one_layer, "f32", 11));
    HX_ASSERT_OK(hx_synthetic_write_with(path3, &one_layer, &(hx_synthetic_extras){.rope_freqs = 1}, "f32", 11));
    snprintf(pathq, sizeof pathq, "%s/qwen2.gguf", dir);
    HX_ASSERT_OK(hx_synthetic_write_with(pathq, &qwen_layer, &(hx_synthetic_extras){.k_bias_sd = 8}, "f32", 11));
}

static void teardown(void)
{
    unlink(path);
    unlink(path3);
    unlink(pathq);
    rmdir(dir);
}

static hx_model *load_file(hx_runtime *rt, const char *file, const char *kv_type, int prefix_cache)
{
    hx_model_options o = hx_model_options_default();
    o.kv_type = kv_type;
    o.kv_block = BS;
    o.kv_tokens = 512;
    o.n_ctx = CTX;
    o.kv_prefix_cache = prefix_cache;
    hx_model *m = NULL;
    HX_ASSERT_OK(hx_model_load(rt, file, &o, &m));
    return m;
}

static hx_model *load(hx_runtime *rt, const char *kv_type, int prefix_cache)
{
    return load_file(rt, path, kv_type, prefix_cache);
}

/* The loop runs the f32 cache (float rounding only) and the f16 one, and
 * with the prefix cache on (the shifted session's blocks are shared with
 * the fresh one's until the shift copies them); then the f32 cache of the
 * model with rope_freqs; then the Qwen2 layer's q8_0 cache, its keys
 * stored centred.  A shifted key is requantized, a step of Q8_0 away, and
 * Qwen2's large keys make that step large: its bound is looser, and the
 * check of power asks for 5 bounds (a shift that did not add the centre
 * back gave 0.10, four bounds). */
START_TEST(shifted_logits_equal_a_fresh_evaluation)
{
    const char *kv = _i == 0 || _i == 3 ? "f32" : _i == 4 ? "q8_0" : "f16";
    const double bound = _i == 0 || _i == 3 ? 1e-5 : _i == 4 ? QWEN_BOUND : 5e-4, power = _i == 4 ? 5 : 20;
    hx_runtime *rt = hx_small_runtime(2, NULL);
    hx_model *m = load_file(rt, _i == 3 ? path3 : _i == 4 ? pathq : path, kv, _i == 2 ? 0 : -1);
    if (_i == 4)
        ck_assert_ptr_nonnull(m->layers[0].k_center);
    hx_model_info in;
    HX_ASSERT_OK(hx_model_info_get(m, &in));
    const size_t V = in.n_vocab;
    int32_t t[N + 1], kept[N - DROP + 1];
    hx_kv_test_tokens(t, N + 1, 5);

    hx_session *s, *f;
    HX_ASSERT_OK(hx_session_open(m, &s));
    HX_ASSERT_OK(hx_session_eval(s, t, N, 0));
    float *before = malloc(sizeof(float) * V);
    memcpy(before, hx_session_logits(s, -1), sizeof(float) * V);
    HX_ASSERT_OK(hx_session_shift(s, KEEP, DROP));
    ck_assert_uint_eq(hx_session_position(s), N - DROP);
    /* The last logits stay, for the next token's sampling. */
    ck_assert_int_eq(memcmp(hx_session_logits(s, -1), before, sizeof(float) * V), 0);
    HX_ASSERT_OK(hx_session_eval(s, &t[N], 1, 0));

    memcpy(kept, t, sizeof(int32_t) * KEEP);
    memcpy(kept + KEEP, t + KEEP + DROP, sizeof(int32_t) * (N - KEEP - DROP + 1));
    HX_ASSERT_OK(hx_session_open(m, &f));
    HX_ASSERT_OK(hx_session_eval(f, kept, N - DROP + 1, 0));
    const double e = hx_kv_test_rel_l2(hx_session_logits(s, -1), hx_session_logits(f, -1), V);
    fprintf(stderr, "  kv %s%s: logits after a shift vs a fresh evaluation: rel L2 %.3g\n", kv,
            _i == 3 ? " (rope_freqs)" : _i == 4 ? " (qwen2, keys centred)" : "", e);
    ck_assert_msg(e <= bound, "kv %s: rel L2 %g after the shift", kv, e);
    /* Without the shift the same token gives other logits: the check has
     * power. */
    hx_session *u;
    HX_ASSERT_OK(hx_session_open(m, &u));
    HX_ASSERT_OK(hx_session_eval(u, t, N + 1, 0));
    ck_assert_double_ge(hx_kv_test_rel_l2(hx_session_logits(u, -1), hx_session_logits(f, -1), V), power * bound);
    HX_ASSERT_OK(hx_session_close(u));
    HX_ASSERT_OK(hx_session_close(f));
    HX_ASSERT_OK(hx_session_close(s));
    hx_model_stats st;
    HX_ASSERT_OK(hx_model_stats_get(m, &st));
    ck_assert_uint_eq(st.kv_blocks_used, 0);
    free(before);
    HX_ASSERT_OK(hx_model_free(m));
    hx_runtime_close(rt);
}
END_TEST

/* Three times the context, one token at a time, each the argmax of the
 * last logits, shifting whenever the context is full. */
START_TEST(three_contexts_with_shifts)
{
    hx_runtime *rt = hx_small_runtime(2, NULL);
    hx_model *m = load(rt, "f16", 0);
    hx_model_info in;
    HX_ASSERT_OK(hx_model_info_get(m, &in));
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(m, &s));
    int32_t t[8];
    hx_kv_test_tokens(t, 8, 9);
    HX_ASSERT_OK(hx_session_eval(s, t, 8, 0));
    int shifts = 0;
    for (int i = 8; i < 3 * CTX; i++) {
        if (hx_session_position(s) == CTX) {
            HX_ASSERT_OK(hx_session_shift(s, KEEP, (CTX - KEEP) / 2));
            shifts++;
        }
        int32_t next = hx_kv_test_argmax(hx_session_logits(s, -1), in.n_vocab);
        hx_status st = hx_session_eval(s, &next, 1, 0);
        ck_assert_msg(st == HX_OK, "token %d: %s", i, hx_last_error());
        ck_assert(isfinite(hx_session_logits(s, -1)[0]));
    }
    ck_assert_int_ge(shifts, 4);
    /* Refusals: more than the session holds, nothing to drop. */
    const uint32_t pos = hx_session_position(s);
    ck_assert_int_eq(hx_session_shift(s, pos, 1), HX_ERR_RANGE);
    ck_assert_int_eq(hx_session_shift(s, 0, 0), HX_ERR_RANGE);
    ck_assert_int_eq(hx_session_shift(NULL, 0, 1), HX_ERR_INVALID_ARG);
    ck_assert_uint_eq(hx_session_position(s), pos);
    ck_assert_int_eq(hx_session_set_context_shift(s, CTX, 0), HX_ERR_RANGE);

    /* hx_session_generate shifts by itself when asked to: a prompt that
     * nearly fills the context, and twice the context to generate. */
    HX_ASSERT_OK(hx_session_close(s));
    HX_ASSERT_OK(hx_session_open(m, &s));
    HX_ASSERT_OK(hx_session_set_context_shift(s, KEEP, 0));
    int32_t prompt[CTX - 4];
    hx_kv_test_tokens(prompt, CTX - 4, 13);
    hx_sampling sp = hx_sampling_default();
    sp.temperature = 0;
    hx_generation_stats gs;
    HX_ASSERT_OK(hx_session_generate(s, prompt, CTX - 4, 2 * CTX, &sp, NULL, NULL, &gs));
    fprintf(stderr, "  generate: %u tokens with the context of %d, %u shifts, ended %s\n", gs.generated_tokens,
            CTX, gs.context_shifts, hx_finish_reason_str(gs.finish));
    ck_assert_msg(gs.finish == HX_FINISH_STOP || gs.generated_tokens == 2 * CTX, "ended %s after %u tokens",
                  hx_finish_reason_str(gs.finish), gs.generated_tokens);
    if (gs.generated_tokens > 4)
        ck_assert_uint_ge(gs.context_shifts, 1);
    HX_ASSERT_OK(hx_session_close(s));
    HX_ASSERT_OK(hx_model_free(m));
    hx_runtime_close(rt);
}
END_TEST

Suite *suite_kv_shift(void)
{
    Suite *s = suite_create("kv_shift");
    TCase *c = tcase_create("shift");
    tcase_add_checked_fixture(c, setup, teardown);
    tcase_set_timeout(c, 300);
    tcase_add_loop_test(c, shifted_logits_equal_a_fresh_evaluation, 0, 5);
    tcase_add_test(c, three_contexts_with_shifts);
    suite_add_tcase(s, c);
    return s;
}
