/* A mixture of experts' router, measured (model/moe_routing.c):
 *   - the tallies hetero counts in its routing op (hx_model_expert_counts,
 *     written by hx_model_expert_tally_save / hetero-run --moe-tally) are
 *     the top-k choices tests/ref_llama.py makes on the same file, token
 *     for token, counted apart;
 *   - a tally file comes back as the model's routing, and a run adds its
 *     own tallies to it;
 *   - under the placement planner a model with weights measures its router
 *     once enough tokens were routed (HX_PLAN_PRINT says so). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hx_test.h"

#define N_TOK 48

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *s = strdup(buf);
    ck_assert_ptr_nonnull(s);
    return s;
}

static void token_list(char *out, size_t cap, int n, unsigned seed)
{
    srand(seed);
    size_t k = (size_t)snprintf(out, cap, "256"); /* BOS of the byte vocabulary */
    for (int i = 1; i < n; i++)
        k += (size_t)snprintf(out + k, cap - k, ",%d", rand() % 256);
    ck_assert_uint_lt(k, cap);
}

/* The counts of a tally file of 4 layers x 16 experts. */
static void parse_tally(const char *text, unsigned long c[4][16])
{
    ck_assert_ptr_nonnull(strstr(text, "hetero-expert-tally 1\nlayers 4 experts 16 used 4\n"));
    for (int l = 0; l < 4; l++) {
        char tag[24];
        snprintf(tag, sizeof tag, "layer %d:", l);
        const char *p = strstr(text, tag);
        ck_assert_ptr_nonnull(p);
        p += strlen(tag);
        for (int e = 0; e < 16; e++) {
            char *end;
            c[l][e] = strtoul(p, &end, 10);
            ck_assert_ptr_ne(end, p);
            p = end;
        }
    }
}

/* hetero-run's tallies (--moe-tally) of qwen3moe-tiny (F32 weights, F32
 * KV cache) equal the reference's count of its top-k choices on the same
 * tokens, in every layer, byte for byte; and each layer's counts add up
 * to the tokens times the experts each goes to. */
START_TEST(measured_tallies_equal_an_independent_count)
{
    char dir[64], model[128], mine[128], ref[128], out[128], list[N_TOK * 5 + 8], cmd[1024];
    hx_test_tmpdir(dir, sizeof dir, "moe");
    snprintf(model, sizeof model, "%s/qwen3moe-tiny.gguf", dir);
    snprintf(mine, sizeof mine, "%s/hetero.tally", dir);
    snprintf(ref, sizeof ref, "%s/ref.tally", dir);
    snprintf(out, sizeof out, "%s/ref.f32", dir);
    HX_ASSERT_OK(hx_model_write_synthetic(model, "qwen3moe-tiny", "f32", 7));
    token_list(list, sizeof list, N_TOK, 3);
    snprintf(cmd, sizeof cmd, "%s/hetero-run -m %s --tokens %s --kv-type f32 --devices cpu --moe-tally %s 2>%s/run.log >/dev/null",
             hx_test_build_dir(), model, list, mine, dir);
    ck_assert_msg(system(cmd) == 0, "hetero-run failed: %s", cmd);
    snprintf(cmd, sizeof cmd, "python3 tests/ref_llama.py %s --tokens %s --out %s --expert-tally %s 2>/dev/null", model,
             list, out, ref);
    ck_assert_msg(system(cmd) == 0,
                  "the reference failed (pip install -r tests/requirements.txt installs what it needs): %s", cmd);
    char *a = read_text(mine), *b = read_text(ref);
    ck_assert_msg(!strcmp(a, b), "hetero's tallies:\n%s\nthe reference's:\n%s", a, b);
    /* 4 layers of 16 experts, 4 used: each layer's counts add up to 48 x 4. */
    unsigned long c[4][16];
    parse_tally(a, c);
    for (int l = 0; l < 4; l++) {
        unsigned long sum = 0;
        for (int e = 0; e < 16; e++)
            sum += c[l][e];
        ck_assert_uint_eq(sum, N_TOK * 4);
    }
    free(a), free(b);
    hx_test_rmdir(dir);
}
END_TEST

/* A tally file comes back as the model's routing: a run started from it
 * writes it back with its own tallies added (the counts double when the
 * same tokens run again); hx_model_expert_counts gives this run's alone. */
START_TEST(a_tally_file_is_taken_back_and_added_to)
{
    char dir[64], model[128], first[128], second[128], list[N_TOK * 5 + 8], cmd[1024];
    hx_test_tmpdir(dir, sizeof dir, "moe");
    snprintf(model, sizeof model, "%s/qwen3moe-tiny.gguf", dir);
    snprintf(first, sizeof first, "%s/first.tally", dir);
    snprintf(second, sizeof second, "%s/second.tally", dir);
    HX_ASSERT_OK(hx_model_write_synthetic(model, "qwen3moe-tiny", "f32", 7));
    token_list(list, sizeof list, N_TOK, 5);
    snprintf(cmd, sizeof cmd, "%s/hetero-run -m %s --tokens %s --devices cpu --moe-tally %s 2>/dev/null >/dev/null",
             hx_test_build_dir(), model, list, first);
    ck_assert_msg(system(cmd) == 0, "hetero-run failed: %s", cmd);
    snprintf(cmd, sizeof cmd,
             "%s/hetero-run -m %s --tokens %s --devices cpu --moe-routing %s --moe-tally %s 2>/dev/null >/dev/null",
             hx_test_build_dir(), model, list, first, second);
    ck_assert_msg(system(cmd) == 0, "hetero-run failed: %s", cmd);
    char *a = read_text(first), *b = read_text(second);
    /* Every count of the second file is twice the first's. */
    unsigned long x[4][16], y[4][16];
    parse_tally(a, x);
    parse_tally(b, y);
    for (int l = 0; l < 4; l++)
        for (int e = 0; e < 16; e++)
            ck_assert_msg(y[l][e] == 2 * x[l][e], "layer %d, expert %d: %lu after a second run, %lu after the first",
                          l, e, y[l][e], x[l][e]);

    /* Through the API: the loaded model's own counts are this run's. */
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = "cpu";
    hx_runtime *rt;
    HX_ASSERT_OK(hx_runtime_open(&rt, &o));
    hx_model_options mo = hx_model_options_default();
    mo.moe_routing = first;
    hx_model *m;
    HX_ASSERT_OK(hx_model_load(rt, model, &mo, &m));
    uint64_t c[16];
    size_t n;
    HX_ASSERT_OK(hx_model_expert_counts(m, 0, c, 16, &n));
    for (int e = 0; e < 16; e++)
        ck_assert_uint_eq(c[e], 0);
    hx_model_free(m);
    hx_runtime_close(rt);
    free(a), free(b);
    hx_test_rmdir(dir);
}
END_TEST

/* Under `plan` a model with weights measures its router: once 256 tokens
 * were routed, the next plan is made from the measured shares, which
 * HX_PLAN_PRINT names. */
START_TEST(the_planner_takes_the_measured_shares)
{
    char dir[64], model[128], cmd[8192], log[128];
    static char list[700 * 5];
    hx_test_tmpdir(dir, sizeof dir, "moe");
    snprintf(model, sizeof model, "%s/qwen3moe-tiny.gguf", dir);
    snprintf(log, sizeof log, "%s/run.log", dir);
    HX_ASSERT_OK(hx_model_write_synthetic(model, "qwen3moe-tiny", "q8_0", 7));
    token_list(list, sizeof list, 640, 9);
    snprintf(cmd, sizeof cmd,
             "HX_PLAN_PRINT=1 %s/hetero-run -m %s --tokens %s -b 64 --devices cpu --sched plan 2>%s >/dev/null",
             hx_test_build_dir(), model, list, log);
    ck_assert_msg(system(cmd) == 0, "hetero-run failed: see %s", log);
    char *text = read_text(log);
    ck_assert_msg(strstr(text, "router: measured (none yet"), "no plan before the router was measured:\n%.2000s", text);
    const char *at = strstr(text, "router: measured over ");
    ck_assert_msg(at != NULL, "no plan from the measured router:\n%.2000s", text);
    unsigned long tokens = strtoul(at + strlen("router: measured over "), NULL, 10);
    ck_assert_msg(tokens >= 256 && tokens < 640, "measured over %lu tokens", tokens);
    free(text);
    hx_test_rmdir(dir);
}
END_TEST

Suite *suite_moe(void)
{
    Suite *s = suite_create("moe");
    TCase *c = tcase_create("moe");
    tcase_set_timeout(c, 300);
    tcase_add_test(c, measured_tallies_equal_an_independent_count);
    tcase_add_test(c, a_tally_file_is_taken_back_and_added_to);
    tcase_add_test(c, the_planner_takes_the_measured_shares);
    suite_add_tcase(s, c);
    return s;
}
