/* build/hetero-perplexity: its perplexity against one computed here from
 * hx_session_logits over the same chunks, its KL divergence (zero for a
 * model against itself, positive against a quantized copy), its base file
 * (llama.cpp's layout), its refusals; and on SmolLM2 (HX_TEST_SMOLLM2) its
 * perplexity beside the figure llama.cpp's llama-perplexity gave. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/hx_test.h"

#define TEXT "tests/fixtures/gpl-3.0.txt"
#define CTX 128
#define CHUNKS 4

static char tmpdir[64];

/* The synthetic 'tiny' model in f16 and a Q4_0 copy of it, in tmpdir. */
static void write_models(char *f16, char *q4, size_t cap)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/hx-ppl-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    snprintf(f16, cap, "%s/tiny-f16.gguf", tmpdir);
    snprintf(q4, cap, "%s/tiny-q4_0.gguf", tmpdir);
    HX_ASSERT_OK(hx_model_write_synthetic(f16, "tiny", "f16", 1234));
    HX_ASSERT_OK(hx_model_quantize(f16, q4, "q4_0", NULL, NULL));
}

static void remove_tmpdir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Runs hetero-perplexity with `opts`; its stdout (and stderr, when asked)
 * come back as strings; returns its exit status. */
static int run_tool(const char *opts, char **out, char **err)
{
    char cmd[2048], o[128], e[128];
    snprintf(o, sizeof o, "%s/out.txt", tmpdir);
    snprintf(e, sizeof e, "%s/err.txt", tmpdir);
    snprintf(cmd, sizeof cmd, "%s/hetero-perplexity --devices cpu %s >%s 2>%s", hx_test_build_dir(), opts, o, e);
    int rc = system(cmd);
    *out = hx_test_slurp(o, NULL);
    char *e_text = hx_test_slurp(e, NULL);
    if (err)
        *err = e_text;
    else
        free(e_text);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* A number after `key` in the tool's output; fails the test if absent. */
static double value_after(const char *out, const char *key)
{
    const char *p = strstr(out, key);
    double v;
    ck_assert_msg(p && sscanf(p + strlen(key), "%lf", &v) == 1, "no '%s' in:\n%s", key, out);
    return v;
}

/* ---- perplexity computed here ---------------------------------------------- */

typedef struct {
    double ppl, err;        /* final PPL and its +/- */
    double running[CHUNKS]; /* PPL after each chunk */
} ppl_result;

/* llama-perplexity's definition, from the session's logits: the text (less
 * one trailing newline) as tokens, BOS first where the model wants it,
 * chunks of CTX evaluated from an empty context with BOS in front, the
 * second half scored. */
static ppl_result perplexity_here(const char *model)
{
    size_t len, n;
    char *text = hx_test_slurp(TEXT, &len);
    if (len && text[len - 1] == '\n')
        len--;
    hx_tokenizer *tok;
    HX_ASSERT_OK(hx_tokenizer_open(model, &tok));
    ck_assert_int_eq(hx_tokenizer_wants_bos(tok), 1);
    const int32_t bos = hx_tokenizer_bos(tok);
    int32_t *ids = malloc((len + 1) * sizeof *ids);
    HX_ASSERT_OK(hx_tokenizer_encode(tok, text, len, 1, 0, ids, len + 1, &n));
    hx_tokenizer_close(tok);
    /* The byte vocabulary: one token per byte, after BOS. */
    ck_assert_uint_eq(n, len + 1);
    ck_assert_int_eq(ids[0], bos);
    ck_assert_int_eq(ids[1], (unsigned char)text[0]);

    hx_runtime *rt;
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = "cpu";
    HX_ASSERT_OK(hx_runtime_open(&rt, &o));
    hx_model_options mo = hx_model_options_default();
    mo.kv_tokens = CTX;
    hx_model *m;
    HX_ASSERT_OK(hx_model_load(rt, model, &mo, &m));
    hx_model_info info;
    HX_ASSERT_OK(hx_model_info_get(m, &info));
    ppl_result r;
    double sum = 0, sum2 = 0;
    size_t count = 0;
    for (int c = 0; c < CHUNKS; c++) {
        int32_t chunk[CTX];
        memcpy(chunk, ids + (size_t)c * CTX, sizeof chunk);
        chunk[0] = bos;
        hx_session *s;
        HX_ASSERT_OK(hx_session_open(m, &s));
        HX_ASSERT_OK(hx_session_eval(s, chunk, CTX, 1));
        for (int i = CTX / 2; i < CTX - 1; i++) {
            const float *l = hx_session_logits(s, i);
            ck_assert_ptr_nonnull(l);
            double mx = l[0], z = 0;
            for (uint32_t v = 1; v < info.n_vocab; v++)
                mx = fmax(mx, l[v]);
            for (uint32_t v = 0; v < info.n_vocab; v++)
                z += exp(l[v] - mx);
            /* The next token of the text, not the chunk's BOS. */
            double nll = log(z) + mx - l[ids[(size_t)c * CTX + i + 1]];
            sum += nll, sum2 += nll * nll, count++;
        }
        hx_session_close(s);
        r.running[c] = exp(sum / count);
    }
    double mean = sum / count;
    r.ppl = exp(mean);
    r.err = sqrt((sum2 / count - mean * mean) / (count - 1)) * r.ppl;
    hx_model_free(m);
    hx_runtime_close(rt);
    free(ids);
    free(text);
    return r;
}

static void assert_close(double got, double want, double rel, const char *what)
{
    ck_assert_msg(fabs(got - want) <= rel * fabs(want), "%s: hetero-perplexity %.6f, computed here %.6f", what, got,
                  want);
}

START_TEST(perplexity_is_exp_mean_nll_of_second_halves)
{
    char f16[128], q4[128], opts[512], *out;
    write_models(f16, q4, sizeof f16);
    snprintf(opts, sizeof opts, "-m %s -f " TEXT " -c %d --chunks %d", f16, CTX, CHUNKS);
    ck_assert_int_eq(run_tool(opts, &out, NULL), 0);
    ppl_result want = perplexity_here(f16);
    fprintf(stderr, "  tiny f16, %d chunks of %d: PPL %.4f +/- %.4f (computed here %.4f +/- %.4f)\n", CHUNKS, CTX,
            value_after(out, "Final estimate: PPL = "), value_after(out, "+/- "), want.ppl, want.err);
    /* Printed with 4 and 5 decimals. */
    assert_close(value_after(out, "Final estimate: PPL = "), want.ppl, 1e-6, "PPL");
    assert_close(value_after(out, "+/- "), want.err, 1e-4, "its +/-");
    for (int c = 0; c < CHUNKS; c++) {
        char key[16];
        snprintf(key, sizeof key, "[%d]", c + 1);
        assert_close(value_after(out, key), want.running[c], 1e-6, key);
    }
    free(out);
    /* A chunk evaluated in several pieces (the logits of each kept before
     * the next) scores the same. */
    snprintf(opts, sizeof opts, "-m %s -f " TEXT " -c %d --chunks %d -b 37", f16, CTX, CHUNKS);
    ck_assert_int_eq(run_tool(opts, &out, NULL), 0);
    assert_close(value_after(out, "Final estimate: PPL = "), want.ppl, 1e-5, "PPL with -b 37");
    free(out);
    remove_tmpdir();
}
END_TEST

/* ---- KL divergence ------------------------------------------------------------- */

START_TEST(kl_divergence_against_self_and_quantized_copy)
{
    char f16[128], q4[128], base[160], opts[512], *out;
    write_models(f16, q4, sizeof f16);
    snprintf(base, sizeof base, "%s/base.kld", tmpdir);
    snprintf(opts, sizeof opts, "-m %s -f " TEXT " -c %d --chunks %d --kl-divergence-base %s", f16, CTX, CHUNKS,
             base);
    ck_assert_int_eq(run_tool(opts, &out, NULL), 0);
    double ppl_base = value_after(out, "Final estimate: PPL = ");
    free(out);
    /* llama.cpp's layout: header, tokens, then one row of 2*ceil(V/2)+4
     * uint16 per scored position (V = 258 for the byte vocabulary). */
    struct stat st;
    ck_assert_int_eq(stat(base, &st), 0);
    ck_assert_int_eq(st.st_size, 20 + 4 * CTX * CHUNKS + 2 * (CTX / 2 - 1) * CHUNKS * (2 * 129 + 4));

    snprintf(opts, sizeof opts, "-m %s --kl-divergence-base %s --kl-divergence", f16, base);
    ck_assert_int_eq(run_tool(opts, &out, NULL), 0);
    double self_kld = value_after(out, "Mean    KLD:"), self_top = value_after(out, "Same top p:");
    /* The base's log-probabilities are kept to 16 bits over 16 nats:
     * a model against itself differs by that rounding only. */
    ck_assert_msg(fabs(self_kld) < 1e-4, "KLD of a model against itself: %g", self_kld);
    ck_assert_msg(self_top == 100.0, "same top token of a model and itself: %g %%", self_top);
    /* PPL(Q) comes from the logits; PPL(base) from the saved rows, which
     * hold no log-probability below max - 16 (this random model often puts
     * the right token that low), so it is no check of the tool. */
    assert_close(value_after(out, "Mean PPL(Q)                   :"), ppl_base, 1e-5, "PPL(Q) of the base itself");
    free(out);

    snprintf(opts, sizeof opts, "-m %s --kl-divergence-base %s --kl-divergence", q4, base);
    ck_assert_int_eq(run_tool(opts, &out, NULL), 0);
    double kld = value_after(out, "Mean    KLD:"), top = value_after(out, "Same top p:");
    fprintf(stderr, "  tiny q4_0 against f16: mean KLD %.6f (f16 against itself %.6f), same top %.2f %%, "
                    "PPL ratio %.4f\n",
            kld, self_kld, top, value_after(out, "Mean PPL(Q)/PPL(base)         :"));
    ck_assert_msg(kld > 100 * fabs(self_kld) && kld > 1e-3, "Q4_0 copy against f16: KLD %g", kld);
    ck_assert(top < 100 && top > 50);
    /* Every percentile line of llama.cpp's report is there, in order. */
    const char *p = out;
    static const char *lines[] = {"Maximum KLD:", "99.0%   KLD:", "Median  KLD:", " 1.0%   KLD:", "Minimum KLD:",
                                  "Maximum Δp:",  "99.0%   Δp:",  "95.0%   Δp:",  "90.0%   Δp:",  "Median  Δp:",
                                  "10.0%   Δp:",  " 5.0%   Δp:",  " 1.0%   Δp:",  "RMS Δp    :"};
    for (size_t i = 0; i < sizeof lines / sizeof *lines; i++) {
        p = strstr(p, lines[i]);
        ck_assert_msg(p, "no '%s' (in order) in:\n%s", lines[i], out);
    }
    free(out);
    remove_tmpdir();
}
END_TEST

/* ---- refusals ---------------------------------------------------------------- */

static void refused(const char *opts, int status, const char *message)
{
    char *out, *err;
    int rc = run_tool(opts, &out, &err);
    ck_assert_msg(rc == status && strstr(err, message), "hetero-perplexity %s: exit %d, said:\n%s(wanted %d, '%s')",
                  opts, rc, err, status, message);
    free(out);
    free(err);
}

START_TEST(bad_input_is_refused_with_a_reason)
{
    char f16[128], q4[128], opts[600], base[160];
    write_models(f16, q4, sizeof f16);
    refused("-f " TEXT, 2, "missing -m");
    snprintf(opts, sizeof opts, "-m %s", f16);
    refused(opts, 2, "missing -f");
    snprintf(opts, sizeof opts, "-m %s --kl-divergence", f16);
    refused(opts, 2, "missing --kl-divergence-base");
    snprintf(opts, sizeof opts, "-m %s -f " TEXT " -c 2", f16);
    refused(opts, 2, "-c takes a whole number from 4");
    snprintf(opts, sizeof opts, "-m %s -f %s/absent.txt", f16, tmpdir);
    refused(opts, 1, "cannot open");
    snprintf(opts, sizeof opts, "-m %s -f " TEXT " -c 32768", f16);
    refused(opts, 1, "need at least 65536");

    /* A base file cut short, and one of another vocabulary. */
    snprintf(base, sizeof base, "%s/base.kld", tmpdir);
    snprintf(opts, sizeof opts, "-m %s -f " TEXT " -c 64 --chunks 2 --kl-divergence-base %s", f16, base);
    char *out;
    ck_assert_int_eq(run_tool(opts, &out, NULL), 0);
    free(out);
    ck_assert_int_eq(truncate(base, 5000), 0);
    snprintf(opts, sizeof opts, "-m %s --kl-divergence-base %s --kl-divergence", f16, base);
    refused(opts, 1, "the file has 5000");
    FILE *f = fopen(base, "wb");
    const int32_t header[3] = {64, 1000, 2};
    fwrite("_logits_", 1, 8, f), fwrite(header, 4, 3, f), fclose(f);
    refused(opts, 1, "vocabulary of 1000 tokens, the model has 258");
    f = fopen(base, "wb");
    fputs("not a base", f), fclose(f);
    refused(opts, 1, "not a file of saved log-probabilities");
    remove_tmpdir();
}
END_TEST

/* ---- SmolLM2 beside llama.cpp ------------------------------------------------------ */

/* What the fixture says llama-perplexity printed: its running PPL after
 * `chunk` chunks (0: the final estimate) and the text's token count. */
static double llama_cpp_says(int chunk, double *tokens)
{
    char *rec = hx_test_slurp("tests/fixtures/smollm2-gpl-3.0.llama-perplexity.txt", NULL);
    *tokens = value_after(rec, "\ntokens ");
    char key[32];
    snprintf(key, sizeof key, "[%d]", chunk);
    double v = value_after(rec, chunk ? key : "Final estimate: PPL = ");
    free(rec);
    return v;
}

/* Two right implementations differ by their rounding: that of the Q8_1
 * activations a Q4_1 model's products take moves the PPL of a single chunk
 * of SmolLM2 by up to 2 % (hetero's own AVX2 and AVX-512 kernels differ
 * that much), and that of the whole text by a few tenths of a percent.
 * Under the sanitizers two chunks (a looser bound) keep it quick. */
#if defined(__SANITIZE_ADDRESS__)
#define SMOLLM2_CHUNKS 2
#define SMOLLM2_BOUND 0.03
#else
#define SMOLLM2_CHUNKS 0
#define SMOLLM2_BOUND 0.005
#endif

START_TEST(smollm2_perplexity_beside_llama_cpp)
{
    const char *model = hx_test_smollm2("perplexity of SmolLM2 beside llama.cpp's");
    if (!model)
        return;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/hx-ppl-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    char opts[1024], *out, *err;
    snprintf(opts, sizeof opts, "-m %s -f " TEXT " -c 512 --chunks %d", model, SMOLLM2_CHUNKS ? SMOLLM2_CHUNKS : 1000);
    ck_assert_int_eq(run_tool(opts, &out, &err), 0);
    double tokens, want = llama_cpp_says(SMOLLM2_CHUNKS, &tokens);
    double got = value_after(out, SMOLLM2_CHUNKS ? "[2]" : "Final estimate: PPL = ");
    ck_assert_msg(strstr(err, "hetero-perplexity") && value_after(strstr(err, "):"), "):") == tokens,
                  "the text is not %g tokens, as llama.cpp has it:\n%s", tokens, err);
    fprintf(stderr, "  smollm2 q4_1, " TEXT ", -c 512%s: PPL %.4f, llama-perplexity %.4f (%+.2f %%)\n",
            SMOLLM2_CHUNKS ? ", 2 chunks" : "", got, want, 100 * (got / want - 1));
    ck_assert_msg(fabs(got / want - 1) <= SMOLLM2_BOUND, "PPL %.4f, llama-perplexity's %.4f: more than %.1f %% apart",
                  got, want, 100 * SMOLLM2_BOUND);
    free(out);
    free(err);
    remove_tmpdir();
}
END_TEST

Suite *suite_perplexity(void)
{
    Suite *s = suite_create("perplexity");
    TCase *t = tcase_create("synthetic");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, perplexity_is_exp_mean_nll_of_second_halves);
    tcase_add_test(t, kl_divergence_against_self_and_quantized_copy);
    tcase_add_test(t, bad_input_is_refused_with_a_reason);
    suite_add_tcase(s, t);
    TCase *r = tcase_create("smollm2");
    tcase_set_timeout(r, 900);
    tcase_add_test(r, smollm2_perplexity_beside_llama_cpp);
    suite_add_tcase(s, r);
    return s;
}
