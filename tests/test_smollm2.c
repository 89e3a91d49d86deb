/* A real published model, SmolLM2-135M-Instruct in Q4_1 (HX_TEST_SMOLLM2:
 * the GGUF file make test fetches): its tokenizer against the ids llama.cpp
 * gives (tests/fixtures/smollm2-vocab.*), its logits against the float64
 * reference on its dequantized weights (tests/ref_llama.py), and a greedy
 * chat answer in its own template.  Without the file every test says it was
 * skipped, and why. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/hx_test.h"

#define VOCAB_INP "tests/fixtures/smollm2-vocab.inp"
#define MAX_IDS 512

/* The next expected-ids line of a .out file, past its '#' header. */
static char *next_line(char **cursor)
{
    while (*cursor && **cursor == '#') {
        char *nl = strchr(*cursor, '\n');
        *cursor = nl ? nl + 1 : NULL;
    }
    char *line = *cursor;
    ck_assert_msg(line && *line, "the .out file has fewer lines than " VOCAB_INP " has strings");
    char *nl = strchr(line, '\n');
    if (nl)
        *nl = '\0';
    *cursor = nl ? nl + 1 : NULL;
    return line;
}

static void format_ids(const int32_t *ids, size_t n, char *buf, size_t cap)
{
    size_t w = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && w < cap; i++)
        w += (size_t)snprintf(buf + w, cap - w, i ? " %d" : "%d", ids[i]);
}

/* Every string of the fixture, with special-token text as plain text and
 * parsed, gives llama.cpp's ids. */
START_TEST(tokenizer_matches_llama_cpp)
{
    const char *path = hx_test_smollm2("smollm2 tokenizer");
    if (!path)
        return;
    hx_tokenizer *tok;
    HX_ASSERT_OK(hx_tokenizer_open(path, &tok));
    ck_assert_int_eq(hx_tokenizer_vocab_size(tok), 49152);
    ck_assert_int_eq(hx_tokenizer_wants_bos(tok), 0); /* tokenizer.ggml.add_bos_token = false */
    size_t ilen, olen[2];
    char *inp = hx_test_slurp(VOCAB_INP, &ilen);
    char *out[2] = {hx_test_slurp("tests/fixtures/smollm2-vocab.out", &olen[0]),
                    hx_test_slurp("tests/fixtures/smollm2-vocab.special.out", &olen[1])};
    char *cursor[2] = {out[0], out[1]};
    static const char sep[] = "\n__ggml_vocab_test__\n";
    int strings = 0;
    for (char *p = inp, *end = inp + ilen; p; strings++) {
        char *q = memmem(p, (size_t)(end - p), sep, sizeof sep - 1);
        size_t len = (size_t)((q ? q : end) - p);
        for (int special = 0; special < 2; special++) {
            int32_t ids[MAX_IDS];
            size_t n;
            HX_ASSERT_OK(hx_tokenizer_encode(tok, p, len, 0, special, ids, MAX_IDS, &n));
            char got[MAX_IDS * 7];
            format_ids(ids, n, got, sizeof got);
            const char *want = next_line(&cursor[special]);
            ck_assert_msg(!strcmp(got, want), "string %d \"%.*s\" (special %s):\n  hetero    %s\n  llama.cpp %s",
                          strings, (int)len, p, special ? "parsed" : "as text", got, want);
        }
        p = q ? q + sizeof sep - 1 : NULL;
    }
    ck_assert_int_ge(strings, 20);
    free(inp);
    free(out[0]);
    free(out[1]);
    hx_tokenizer_close(tok);
}
END_TEST

/* ---- logits against the float64 reference ----------------------------------- */

static const hx_chat_message question[] = {{"user", "What is the capital of France?"}};

/* The question in SmolLM2's chat template, as token ids. */
static size_t chat_prompt(const char *path, int32_t *ids, size_t cap)
{
    hx_tokenizer *tok;
    HX_ASSERT_OK(hx_tokenizer_open(path, &tok));
    char text[1024];
    size_t len, n;
    /* ChatML, the family of SmolLM2's template (the chat suite checks the file names it). */
    HX_ASSERT_OK(hx_chat_apply_template("chatml", question, 1, 1, text, sizeof text, &len));
    HX_ASSERT_OK(hx_tokenizer_encode(tok, text, len, hx_tokenizer_wants_bos(tok), 1, ids, cap, &n));
    hx_tokenizer_close(tok);
    return n;
}

static float *read_floats(const char *path, size_t n)
{
    size_t len;
    char *raw = hx_test_slurp(path, &len);
    ck_assert_msg(len == n * sizeof(float), "%s: %zu bytes, expected %zu floats", path, len, n);
    return (float *)raw;
}

/* The reference multiplies the dequantized weights in float64; hetero, like
 * llama.cpp, rounds each activation row to Q8_1 before the Q4_1 dot
 * products, 211 of them in a pass through SmolLM2's 30 layers. */
#define REL_L2_BOUND 5e-2
#define ARGMAX_GAP_RMS 4.0

START_TEST(logits_match_reference)
{
    const char *path = hx_test_smollm2("smollm2 logits against the reference");
    if (!path)
        return;
    int32_t ids[64];
    size_t n = chat_prompt(path, ids, 64);
    char list[64 * 7], dir[] = "/tmp/hx-smollm2-XXXXXX", cmd[2048];
    format_ids(ids, n, list, sizeof list);
    for (char *c = list; *c; c++)
        *c = *c == ' ' ? ',' : *c;
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(cmd, sizeof cmd, "%s/hetero-run -m %s --devices cpu --tokens %s --logits %s/hx.f32 2>%s/run.log",
             hx_test_build_dir(), path, list, dir, dir);
    ck_assert_msg(system(cmd) == 0, "hetero-run failed: %s", cmd);
    snprintf(cmd, sizeof cmd, "python3 tests/ref_llama.py %s --dequantized --tokens %s --out %s/ref.f32 2>/dev/null",
             path, list, dir);
    ck_assert_msg(system(cmd) == 0, "the reference failed (pip install -r tests/requirements.txt): %s", cmd);

    enum { V = 49152 };
    char f[300];
    snprintf(f, sizeof f, "%s/hx.f32", dir);
    float *a = read_floats(f, n * V);
    snprintf(f, sizeof f, "%s/ref.f32", dir);
    float *r = read_floats(f, n * V);
    double num = 0, den = 0;
    size_t agree = 0, clear_misses = 0;
    for (size_t p = 0; p < n; p++) {
        size_t am = 0, ar = 0;
        double pos_err = 0;
        for (size_t v = 0; v < V; v++) {
            size_t i = p * V + v;
            double d = (double)a[i] - r[i];
            num += d * d;
            pos_err += d * d;
            den += (double)r[i] * r[i];
            am = a[i] > a[p * V + am] ? v : am;
            ar = r[i] > r[p * V + ar] ? v : ar;
        }
        /* A different argmax is rounding only when the reference itself
         * ranks the two candidates closer than a few times this position's
         * RMS logit error; anything wider is a wrong answer. */
        double gap = (double)r[p * V + ar] - r[p * V + am];
        agree += am == ar;
        clear_misses += am != ar && gap > ARGMAX_GAP_RMS * sqrt(pos_err / V);
    }
    double rel = sqrt(num / den);
    fprintf(stderr, "  smollm2 q4_1 against the float64 reference on its dequantized weights: %zu positions, "
                    "rel L2 %.4f, argmax agrees at %zu/%zu (%zu apart by more than rounding)\n",
            n, rel, agree, n, clear_misses);
    ck_assert_msg(rel <= REL_L2_BOUND, "rel L2 %g > %g", rel, REL_L2_BOUND);
    ck_assert_msg(clear_misses == 0, "argmax differs at %zu of %zu positions where the reference's choice is clear",
                  clear_misses, n);
    ck_assert_msg(agree * 4 >= n * 3, "argmax agrees at only %zu of %zu positions", agree, n);
    free(a);
    free(r);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* ---- a chat answer ------------------------------------------------------------- */

typedef struct {
    char text[1024];
    size_t len;
} answer;

static int collect(void *user, int32_t token, const char *piece)
{
    answer *a = user;
    size_t n = strlen(piece);
    if (a->len + n < sizeof a->text)
        memcpy(a->text + a->len, piece, n + 1), a->len += n;
    return 0;
}

START_TEST(greedy_chat_answer)
{
    const char *path = hx_test_smollm2("smollm2 chat answer");
    if (!path)
        return;
    hx_runtime *rt;
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = "cpu";
    HX_ASSERT_OK(hx_runtime_open(&rt, &o));
    hx_model_options mo = hx_model_options_default();
    mo.kv_tokens = 256;
    hx_model *m;
    HX_ASSERT_OK(hx_model_load(rt, path, &mo, &m));
    /* The template the file carries, formatted and tokenized with its
     * control tokens parsed, as a chat front end does. */
    hx_tokenizer *tok;
    HX_ASSERT_OK(hx_tokenizer_open(path, &tok));
    char text[1024];
    size_t len, n;
    HX_ASSERT_OK(hx_chat_apply_template(hx_model_chat_template(m), question, 1, 1, text, sizeof text, &len));
    int32_t ids[128];
    HX_ASSERT_OK(hx_tokenizer_encode(tok, text, len, hx_tokenizer_wants_bos(tok), 1, ids, 128, &n));
    hx_tokenizer_close(tok);

    hx_session *s;
    HX_ASSERT_OK(hx_session_open(m, &s));
    hx_sampling greedy = hx_sampling_default();
    greedy.temperature = 0;
    answer a = {"", 0};
    hx_generation_stats st;
    HX_ASSERT_OK(hx_session_generate(s, ids, n, 64, &greedy, collect, &a, &st));
    fprintf(stderr, "  smollm2 (greedy, cpu): \"%s\" -> \"%s\" (%u tokens)\n", question[0].content, a.text,
            st.generated_tokens);
    ck_assert_msg(strstr(a.text, "Paris"), "the answer does not name Paris: \"%s\"", a.text);
    ck_assert_msg(st.generated_tokens < 64, "the answer did not end with <|im_end|> within 64 tokens");
    hx_session_close(s);
    hx_model_free(m);
    hx_runtime_close(rt);
}
END_TEST

Suite *suite_smollm2(void)
{
    Suite *s = suite_create("smollm2");
    TCase *t = tcase_create("real model");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, tokenizer_matches_llama_cpp);
    tcase_add_test(t, logits_match_reference);
    tcase_add_test(t, greedy_chat_answer);
    suite_add_tcase(s, t);
    return s;
}
