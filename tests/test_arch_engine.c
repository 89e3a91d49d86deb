/* The serving engine on the new architectures: a mixture of experts
 * (qwen3moe-tiny: 16 experts, 4 used, so concurrent requests' tokens are
 * routed together through moe_route's one order) and Gemma 3 (gemma3-tiny:
 * sliding-window layers, soft-cap, GELU) serve concurrent greedy requests,
 * batched together, with each request's tokens those of
 * hx_session_generate on its prompt alone. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "quantize/synthetic.h"
#include "tests/hx_test.h"
#include "tests/small_model.h"

#define N_REQ 4
#define MAX_OUT 16

typedef struct {
    int32_t tokens[MAX_OUT];
    uint32_t n;
} out_tokens;

static int on_engine_token(void *user, const hx_engine_token *t)
{
    out_tokens *o = user;
    if (t->token >= 0 && o->n < MAX_OUT)
        o->tokens[o->n++] = t->token;
    return 0;
}

static int on_session_token(void *user, int32_t token, const char *piece)
{
    (void)piece;
    out_tokens *o = user;
    if (token >= 0 && o->n < MAX_OUT)
        o->tokens[o->n++] = token;
    return 0;
}

static const char *const presets[] = {"qwen3moe-tiny", "gemma3-tiny"};

START_TEST(concurrent_requests_equal_single_sessions)
{
    const char *name = presets[_i];
    const hx_synthetic_config *c = hx_synthetic_preset(name);
    ck_assert_ptr_nonnull(c);
    char dir[64] = "/tmp/hx-archeng-XXXXXX", path[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/%s.gguf", dir, name);
    HX_ASSERT_OK(hx_synthetic_write(path, c, "q8_0", 5));
    hx_runtime *rt = hx_small_runtime(2, NULL);
    hx_model *m = NULL;
    HX_ASSERT_OK(hx_model_load(rt, path, NULL, &m));

    /* Prompts of different lengths, so that prefill and decode mix in
     * one batch; gemma3-tiny's window is 32: the longest goes past it. */
    static const char *const prompts[N_REQ] = {
        "Once upon a time", "Hi",
        "It was the best of times, it was the worst of times, it was the age of wisdom",
        "The quick brown fox jumps"};
    out_tokens alone[N_REQ] = {0}, together[N_REQ] = {0};
    hx_sampling sp = hx_sampling_default();
    sp.temperature = 0;
    sp.ignore_eos = 1;
    for (int i = 0; i < N_REQ; i++) {
        int32_t ids[128];
        size_t n;
        HX_ASSERT_OK(hx_model_tokenize(m, prompts[i], strlen(prompts[i]), 1, 1, ids, 128, &n));
        hx_session *s = NULL;
        HX_ASSERT_OK(hx_session_open(m, &s));
        hx_generation_stats gs;
        HX_ASSERT_OK(hx_session_generate(s, ids, n, MAX_OUT, &sp, on_session_token, &alone[i], &gs));
        HX_ASSERT_OK(hx_session_close(s));
        ck_assert_uint_eq(alone[i].n, MAX_OUT);
    }

    hx_engine *e = NULL;
    HX_ASSERT_OK(hx_engine_create(m, NULL, &e));
    uint64_t id[N_REQ];
    for (int i = 0; i < N_REQ; i++) {
        hx_request r = hx_request_default();
        r.text = prompts[i];
        r.max_tokens = MAX_OUT;
        r.sampling.temperature = 0;
        r.ignore_eos = 1;
        r.on_token = on_engine_token;
        r.user = &together[i];
        HX_ASSERT_OK(hx_engine_submit(e, &r, &id[i]));
    }
    for (int i = 0; i < N_REQ; i++) {
        hx_request_result res;
        HX_ASSERT_OK(hx_engine_wait(e, id[i], -1, &res));
        ck_assert_msg(res.status == HX_OK, "%s: request %d: %s", name, i, res.error);
    }
    hx_engine_stats st;
    HX_ASSERT_OK(hx_engine_stats_get(e, &st));
    printf("arch_engine: %s: %d requests of %d tokens, %llu tokens generated\n", name, N_REQ, MAX_OUT,
           (unsigned long long)st.generated_tokens);
    for (int i = 0; i < N_REQ; i++)
        ck_assert_msg(together[i].n == alone[i].n &&
                          !memcmp(together[i].tokens, alone[i].tokens, sizeof(int32_t) * alone[i].n),
                      "%s: request %d: %u tokens batched differ from its %u alone (first: %d vs %d)", name, i,
                      together[i].n, alone[i].n, together[i].n ? together[i].tokens[0] : -1, alone[i].tokens[0]);
    HX_ASSERT_OK(hx_engine_destroy(e));
    HX_ASSERT_OK(hx_model_free(m));
    HX_ASSERT_OK(hx_runtime_close(rt));
    unlink(path);
    rmdir(dir);
}
END_TEST

Suite *suite_arch_engine(void)
{
    Suite *s = suite_create("arch_engine");
    TCase *tc = tcase_create("engine");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, concurrent_requests_equal_single_sessions, 0, sizeof presets / sizeof presets[0]);
    suite_add_tcase(s, tc);
    return s;
}
