/* Prompts and the context, as a person running a model meets them: BOS
 * and EOS as the model asks, special tokens in prompts, a request refused
 * before any work when the context or the KV pool cannot hold it, a
 * generation that fills the context ending with "length", stop strings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/stop_text.h"
#include "quantize/synthetic.h"
#include "text/tokenizer.h"
#include "tests/hx_test.h"

#define SMOLLM2_ENV "HX_TEST_SMOLLM2"

static char tmpdir[64];
static char model_path[128];

/* A small synthetic LLaMA (byte vocabulary: BOS 256, EOS 257), trained
 * context 512. */
static void setup(void)
{
    hx_test_tmpdir(tmpdir, sizeof tmpdir, "ctx");
    static const hx_synthetic_config c = {"ctx", 256, 2, 4, 2, 512, 512, "llama", 0};
    snprintf(model_path, sizeof model_path, "%s/ctx.gguf", tmpdir);
    HX_ASSERT_OK(hx_synthetic_write(model_path, &c, "f16", 7));
}

static void teardown(void) { hx_test_rmdir(tmpdir); }

typedef struct {
    hx_runtime *rt;
    hx_model *m;
} loaded;

static loaded load(uint32_t n_ctx, uint32_t kv_tokens)
{
    loaded l;
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = "cpu";
    o.cpu_threads = 2;
    HX_ASSERT_OK(hx_runtime_open(&l.rt, &o));
    hx_model_options mo = hx_model_options_default();
    mo.n_ctx = n_ctx;
    mo.kv_tokens = kv_tokens;
    HX_ASSERT_OK(hx_model_load(l.rt, model_path, &mo, &l.m));
    return l;
}

static void unload(loaded *l)
{
    hx_model_free(l->m);
    hx_runtime_close(l->rt);
}

static void byte_prompt(int32_t *ids, size_t n, unsigned seed)
{
    srand(seed);
    for (size_t i = 0; i < n; i++)
        ids[i] = 'a' + rand() % 26;
}

/* What a generation streamed. */
typedef struct {
    char text[4096];
    size_t len;
    int32_t tokens[1024];
    uint32_t n_tokens, calls;
    uint32_t stop_after; /* the callback asks to stop at this token (0 = never) */
} collected;

static int collect(void *user, int32_t token, const char *piece)
{
    collected *c = user;
    c->calls++;
    size_t n = strlen(piece);
    ck_assert(c->len + n < sizeof c->text);
    memcpy(c->text + c->len, piece, n + 1);
    c->len += n;
    if (token >= 0 && c->n_tokens < 1024)
        c->tokens[c->n_tokens++] = token;
    return c->stop_after && c->n_tokens == c->stop_after;
}

static hx_sampling greedy(void)
{
    hx_sampling p = hx_sampling_default();
    p.temperature = 0;
    return p;
}

/* ---- BOS, EOS and special tokens --------------------------------------- */

START_TEST(the_model_says_whether_it_wants_bos)
{
    loaded l = load(0, 0);
    hx_model_info in;
    HX_ASSERT_OK(hx_model_info_get(l.m, &in));
    /* The synthetic file sets tokenizer.ggml.add_bos_token = true. */
    ck_assert_int_eq(in.add_bos, 1);
    ck_assert_int_eq(in.add_eos, 0);
    ck_assert_int_eq(in.bos, HX_TOKENIZER_BYTES_BOS);
    ck_assert_int_eq(in.eos, HX_TOKENIZER_BYTES_EOS);
    int32_t ids[16];
    size_t n;
    HX_ASSERT_OK(hx_model_tokenize(l.m, "ab", 2, 1, 0, ids, 16, &n));
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(ids[0], in.bos);
    ck_assert_int_eq(ids[1], 'a');
    HX_ASSERT_OK(hx_model_tokenize(l.m, "ab", 2, 0, 0, ids, 16, &n));
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(ids[0], 'a');
    /* Special tokens spelled in the text: parsed, or plain bytes. */
    HX_ASSERT_OK(hx_model_tokenize(l.m, "x</s>", 5, 0, 1, ids, 16, &n));
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(ids[1], in.eos);
    HX_ASSERT_OK(hx_model_tokenize(l.m, "x</s>", 5, 0, 0, ids, 16, &n));
    ck_assert_uint_eq(n, 5);
    ck_assert_int_eq(ids[1], '<');
    ck_assert(hx_model_is_eog(l.m, in.eos));
    ck_assert(!hx_model_is_eog(l.m, 'a'));
    unload(&l);
}
END_TEST

/* On the llama.cpp vocabulary test files (tests/fetch-vocab.sh): what each
 * says about BOS, through the public tokenizer API. */
START_TEST(vocabularies_say_whether_they_want_bos)
{
    const char *dir = hx_test_data_dir();
    ck_assert_msg(dir && *dir, "HX_TEST_DATA is not set (make test sets it)");
    const struct {
        const char *file;
        int bos;
    } cases[] = {{"ggml-vocab-llama-spm.gguf", 1}, {"ggml-vocab-gpt-2.gguf", 0}};
    for (size_t i = 0; i < 2; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/vocab/%s", dir, cases[i].file);
        hx_tokenizer *t;
        HX_ASSERT_OK(hx_tokenizer_open(path, &t));
        ck_assert_msg(hx_tokenizer_wants_bos(t) == cases[i].bos, "%s: wants_bos %d", cases[i].file,
                      hx_tokenizer_wants_bos(t));
        ck_assert_int_eq(hx_tokenizer_wants_eos(t), 0);
        int32_t ids[16];
        size_t n;
        HX_ASSERT_OK(hx_tokenizer_encode_prompt(t, "Hi", 2, 1, 0, ids, 16, &n));
        ck_assert_int_eq(ids[0] == hx_tokenizer_bos(t), cases[i].bos);
        hx_tokenizer_close(t);
    }
}
END_TEST

/* SmolLM2-135M-Instruct (add_bos_token = false, BOS = <|im_start|>, a
 * ChatML model): when HX_TEST_SMOLLM2 names its GGUF file. */
START_TEST(smollm2_prompts_tokenize_as_llama_cpp)
{
    const char *path = getenv(SMOLLM2_ENV);
    if (!path || access(path, R_OK) != 0) {
        fprintf(stderr, "context: skipped the SmolLM2 check: set %s to SmolLM2-135M-Instruct's GGUF file\n",
                SMOLLM2_ENV);
        return;
    }
    hx_runtime *rt;
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = "cpu";
    HX_ASSERT_OK(hx_runtime_open(&rt, &o));
    hx_model *m;
    HX_ASSERT_OK(hx_model_load(rt, path, NULL, &m));
    hx_model_info in;
    HX_ASSERT_OK(hx_model_info_get(m, &in));
    ck_assert_int_eq(in.add_bos, 0);
    ck_assert_uint_eq(in.n_ctx, in.n_ctx_train);
    /* llama-tokenize --ids (which adds BOS only when the model asks). */
    static const int32_t plain[] = {504, 3575, 282, 4649, 314};
    static const int32_t chat[] = {1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520, 9531, 198};
    int32_t ids[64];
    size_t n;
    HX_ASSERT_OK(hx_model_tokenize(m, "The capital of France is", 24, 1, 1, ids, 64, &n));
    ck_assert_uint_eq(n, 5);
    ck_assert_mem_eq(ids, plain, sizeof plain);
    const char *c = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n";
    HX_ASSERT_OK(hx_model_tokenize(m, c, strlen(c), 1, 1, ids, 64, &n));
    ck_assert_uint_eq(n, 16);
    ck_assert_mem_eq(ids, chat, sizeof chat);
    ck_assert_int_eq(ids[0], in.bos);
    ck_assert(hx_model_is_eog(m, ids[10])); /* <|im_end|> */
    ck_assert(!hx_model_is_eog(m, ids[0]));
    HX_ASSERT_OK(hx_model_tokenize(m, "<|endoftext|>", 13, 0, 1, ids, 64, &n));
    ck_assert_uint_eq(n, 1);
    ck_assert(hx_model_is_eog(m, ids[0]));
    HX_ASSERT_OK(hx_model_tokenize(m, c, strlen(c), 1, 0, ids, 64, &n));
    ck_assert_uint_gt(n, 16); /* the markup as plain text */
    hx_model_free(m);
    hx_runtime_close(rt);
}
END_TEST

/* ---- the context and the KV pool --------------------------------------- */

START_TEST(context_defaults_to_the_trained_one)
{
    loaded l = load(0, 0);
    hx_model_info in;
    HX_ASSERT_OK(hx_model_info_get(l.m, &in));
    ck_assert_uint_eq(in.n_ctx, in.n_ctx_train);
    ck_assert_uint_eq(in.kv_tokens, in.n_ctx);
    /* 2 (K, V) x layers x kv heads x head_dim x 2 bytes (f16) per token. */
    ck_assert_uint_eq(in.kv_bytes, (uint64_t)in.kv_tokens * 2 * in.n_layer * in.n_head_kv * in.head_dim * 2);
    unload(&l);
    l = load(48, 0);
    HX_ASSERT_OK(hx_model_info_get(l.m, &in));
    ck_assert_uint_eq(in.n_ctx, 48);
    ck_assert_uint_eq(in.kv_tokens, 48);
    unload(&l);

    /* A context no memory holds is refused at load, naming memory. */
    hx_runtime *rt;
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = "cpu";
    HX_ASSERT_OK(hx_runtime_open(&rt, &o));
    hx_model_options mo = hx_model_options_default();
    mo.n_ctx = 4000000000u;
    hx_model *m = NULL;
    ck_assert_int_eq(hx_model_load(rt, model_path, &mo, &m), HX_ERR_NO_MEMORY);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "KV cache memory"));
    ck_assert_ptr_null(m);
    hx_runtime_close(rt);
}
END_TEST

START_TEST(a_prompt_longer_than_the_context_is_refused_before_work)
{
    loaded l = load(32, 0);
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(l.m, &s));
    int32_t ids[64];
    byte_prompt(ids, 64, 5);
    hx_sampling g = greedy();
    collected c = {0};
    hx_generation_stats st;
    ck_assert_int_eq(hx_session_generate(s, ids, 40, 8, &g, collect, &c, &st), HX_ERR_RANGE);
    ck_assert_msg(strstr(hx_last_error(), "context") && strstr(hx_last_error(), "40") &&
                      strstr(hx_last_error(), "32"),
                  "%s", hx_last_error());
    ck_assert_uint_eq(hx_session_position(s), 0);
    ck_assert_uint_eq(c.calls, 0);
    ck_assert_int_eq(st.finish, HX_FINISH_NONE);
    ck_assert_int_eq(hx_session_eval(s, ids, 33, 0), HX_ERR_RANGE);
    ck_assert_uint_eq(hx_session_position(s), 0);

    /* The session is still whole: 20 tokens, then 20 more do not fit. */
    HX_ASSERT_OK(hx_session_eval(s, ids, 20, 0));
    ck_assert_int_eq(hx_session_eval(s, ids + 20, 20, 0), HX_ERR_RANGE);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "context full"));
    ck_assert_uint_eq(hx_session_position(s), 20);
    ck_assert_ptr_nonnull(hx_session_logits(s, -1));
    HX_ASSERT_OK(hx_session_eval(s, ids + 20, 12, 0));
    ck_assert_uint_eq(hx_session_position(s), 32);
    hx_session_close(s);
    unload(&l);
}
END_TEST

START_TEST(a_request_the_pool_cannot_hold_is_refused_before_work)
{
    /* A context of 64 but a pool of two 16-token blocks for everyone. */
    loaded l = load(64, 32);
    hx_session *a, *b;
    HX_ASSERT_OK(hx_session_open(l.m, &a));
    HX_ASSERT_OK(hx_session_open(l.m, &b));
    int32_t ids[64];
    byte_prompt(ids, 64, 9);
    HX_ASSERT_OK(hx_session_eval(a, ids, 20, 0)); /* both blocks */
    ck_assert_int_eq(hx_session_eval(b, ids, 5, 0), HX_ERR_NO_MEMORY);
    ck_assert_msg(strstr(hx_last_error(), "KV cache memory"), "%s", hx_last_error());
    ck_assert_uint_eq(hx_session_position(b), 0);
    hx_session_close(a);

    /* A generation reserves what it may need up front: 5 + 39 > 32. */
    hx_sampling g = greedy();
    collected c = {0};
    ck_assert_int_eq(hx_session_generate(b, ids, 5, 40, &g, collect, &c, NULL), HX_ERR_NO_MEMORY);
    ck_assert_msg(strstr(hx_last_error(), "KV cache memory") && strstr(hx_last_error(), "44"), "%s",
                  hx_last_error());
    ck_assert_uint_eq(hx_session_position(b), 0);
    ck_assert_uint_eq(c.calls, 0);
    HX_ASSERT_OK(hx_session_generate(b, ids, 5, 20, &g, collect, &c, NULL));
    hx_session_close(b);
    unload(&l);
}
END_TEST

START_TEST(a_generation_that_fills_the_context_ends_with_length)
{
    int32_t ids[10];
    byte_prompt(ids, 10, 21);
    hx_sampling g = greedy();
    /* Reference: a context with room to spare, the same number of tokens. */
    loaded big = load(0, 0);
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(big.m, &s));
    collected ref = {0};
    hx_generation_stats rs;
    HX_ASSERT_OK(hx_session_generate(s, ids, 10, 23, &g, collect, &ref, &rs));
    ck_assert_msg(rs.finish == HX_FINISH_LENGTH, "the reference run ended with %s", hx_finish_reason_str(rs.finish));
    hx_session_close(s);
    unload(&big);

    loaded l = load(32, 0);
    HX_ASSERT_OK(hx_session_open(l.m, &s));
    collected c = {0};
    hx_generation_stats st;
    HX_ASSERT_OK(hx_session_generate(s, ids, 10, 1000, &g, collect, &c, &st));
    ck_assert_int_eq(st.finish, HX_FINISH_LENGTH);
    ck_assert_str_eq(hx_finish_reason_str(st.finish), "length");
    /* 22 evaluated after the prompt fill the context; the 23rd is sampled. */
    ck_assert_uint_eq(st.generated_tokens, 23);
    ck_assert_uint_eq(hx_session_position(s), 32);
    ck_assert_uint_eq(c.n_tokens, ref.n_tokens);
    ck_assert_mem_eq(c.tokens, ref.tokens, sizeof(int32_t) * c.n_tokens);
    ck_assert_str_eq(c.text, ref.text);
    /* Full: the next request is refused, and says so. */
    ck_assert_int_eq(hx_session_generate(s, ids, 1, 4, &g, collect, &c, &st), HX_ERR_RANGE);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "context full"));
    hx_session_close(s);
    unload(&l);
}
END_TEST

START_TEST(null_handles_are_named)
{
    int32_t id = 'a';
    ck_assert_int_eq(hx_session_generate(NULL, &id, 1, 4, NULL, NULL, NULL, NULL), HX_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "NULL session"));
    ck_assert_int_eq(hx_session_eval(NULL, &id, 1, 0), HX_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "NULL session"));
    ck_assert_str_eq(hx_finish_reason_str(HX_FINISH_STOP), "stop");
    ck_assert_str_eq(hx_finish_reason_str((hx_finish_reason)99), "none");
}
END_TEST

/* ---- stop strings ------------------------------------------------------- */

/* Feeds text in pieces of `step` bytes; returns what passed on. */
static int32_t stream(const char *text, size_t step, const char *const *stop, uint32_t n, char *out)
{
    hx_stop_text t;
    HX_ASSERT_OK(hx_stop_text_init(&t, stop, n));
    size_t len = strlen(text), o = 0;
    int32_t matched = -1;
    for (size_t i = 0; i < len && matched < 0; i += step) {
        size_t k = len - i < step ? len - i : step, got;
        const char *p;
        HX_ASSERT_OK(hx_stop_text_push(&t, text + i, k, &p, &got, &matched));
        memcpy(out + o, p, got);
        o += got;
    }
    if (matched < 0) {
        const char *p;
        size_t got;
        HX_ASSERT_OK(hx_stop_text_finish(&t, "", 0, &p, &got, &matched));
        memcpy(out + o, p, got);
        o += got;
    }
    out[o] = '\0';
    hx_stop_text_free(&t);
    return matched;
}

START_TEST(stop_strings_cut_the_text_wherever_the_pieces_split)
{
    const char *stops[] = {"</answer>", "\n\n", "Q:"};
    char out[256];
    for (size_t step = 1; step <= 12; step++) {
        ck_assert_int_eq(stream("It is Paris.\n\nQ: and Rome?", step, stops, 3, out), 1);
        ck_assert_str_eq(out, "It is Paris.");
        ck_assert_int_eq(stream("<answer>42</answer> more", step, stops, 3, out), 0);
        ck_assert_str_eq(out, "<answer>42");
        /* Near misses pass on whole, the held-back start included. */
        ck_assert_int_eq(stream("a </answ b\nQ", step, stops, 3, out), -1);
        ck_assert_str_eq(out, "a </answ b\nQ");
    }
    ck_assert_int_eq(stream("no stops at all", 3, NULL, 0, out), -1);
    ck_assert_str_eq(out, "no stops at all");
    hx_stop_text t;
    const char *bad[] = {"ok", ""};
    ck_assert_int_eq(hx_stop_text_init(&t, bad, 2), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_stop_text_init(&t, NULL, 1), HX_ERR_INVALID_ARG);
}
END_TEST

START_TEST(a_generation_ends_at_a_stop_string)
{
    loaded l = load(0, 0);
    int32_t ids[12];
    byte_prompt(ids, 12, 33);
    hx_sampling g = greedy();
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(l.m, &s));
    collected full = {0};
    HX_ASSERT_OK(hx_session_generate(s, ids, 12, 48, &g, collect, &full, NULL));
    hx_session_close(s);
    ck_assert_msg(full.len >= 12, "the model generated only %zu bytes", full.len);
    /* Stop at 3 bytes from the middle of what it says anyway. */
    char stop[4];
    memcpy(stop, full.text + full.len / 2, 3);
    stop[3] = '\0';
    size_t cut = (size_t)(strstr(full.text, stop) - full.text);
    const char *stops[] = {"never said by a byte model \x01", stop};
    g.stop = stops;
    g.n_stop = 2;
    HX_ASSERT_OK(hx_session_open(l.m, &s));
    collected c = {0};
    hx_generation_stats st;
    HX_ASSERT_OK(hx_session_generate(s, ids, 12, 48, &g, collect, &c, &st));
    ck_assert_int_eq(st.finish, HX_FINISH_STOP);
    ck_assert_int_eq(st.stop_index, 1);
    ck_assert_uint_eq(c.len, cut);
    ck_assert_int_eq(memcmp(c.text, full.text, cut), 0);
    ck_assert_uint_lt(st.generated_tokens, full.n_tokens);
    hx_session_close(s);

    /* The callback's own stop is told apart. */
    g.n_stop = 0;
    HX_ASSERT_OK(hx_session_open(l.m, &s));
    collected early = {.stop_after = 3};
    HX_ASSERT_OK(hx_session_generate(s, ids, 12, 48, &g, collect, &early, &st));
    ck_assert_int_eq(st.finish, HX_FINISH_CALLBACK);
    ck_assert_uint_eq(st.generated_tokens, 3);
    hx_session_close(s);
    unload(&l);
}
END_TEST

Suite *suite_context(void)
{
    Suite *s = suite_create("context");
    TCase *tc = tcase_create("context");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, the_model_says_whether_it_wants_bos);
    if (hx_test_vocab("context: what llama.cpp's vocabularies say about BOS"))
        tcase_add_test(tc, vocabularies_say_whether_they_want_bos);
    tcase_add_test(tc, smollm2_prompts_tokenize_as_llama_cpp);
    tcase_add_test(tc, context_defaults_to_the_trained_one);
    tcase_add_test(tc, a_prompt_longer_than_the_context_is_refused_before_work);
    tcase_add_test(tc, a_request_the_pool_cannot_hold_is_refused_before_work);
    tcase_add_test(tc, a_generation_that_fills_the_context_ends_with_length);
    tcase_add_test(tc, null_handles_are_named);
    tcase_add_test(tc, stop_strings_cut_the_text_wherever_the_pieces_split);
    tcase_add_test(tc, a_generation_ends_at_a_stop_string);
    suite_add_tcase(s, tc);
    return s;
}
