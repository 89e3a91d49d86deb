/* Chat templates against llama.cpp's test vectors (tests/chat_vectors.c):
 * each family formats llama.cpp's conversation as llama.cpp does, each
 * real template is recognised as llama.cpp recognises it; plus the buffer
 * contract, bad arguments, unknown templates and roles, and the template
 * a model file carries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "quantize/synthetic.h"
#include "tests/chat_vectors.h"
#include "tests/hx_test.h"

#define MAX_MESSAGES 16

/* The conversation of vector v, then its extra messages. */
static size_t messages_of(const hx_chat_vector *v, hx_chat_message *msgs)
{
    size_t n = 0;
    for (; n < HX_CHAT_CONVERSATION; n++)
        msgs[n] = hx_chat_conversation[n];
    ck_assert(n + v->n_extra <= MAX_MESSAGES);
    for (size_t i = 0; i < v->n_extra; i++)
        msgs[n++] = v->extra[i];
    return n;
}

/* Formats into a malloc'ed string, sized by a first call with no buffer. */
static char *format(const char *tmpl, const hx_chat_message *msgs, size_t n, int add_assistant)
{
    size_t len = 0;
    hx_status st = hx_chat_apply_template(tmpl, msgs, n, add_assistant, NULL, 0, &len);
    ck_assert_msg(st == HX_ERR_RANGE, "sizing %.40s: %s: %s", tmpl, hx_status_str(st), hx_last_error());
    char *buf = malloc(len + 1);
    size_t got = 0;
    HX_ASSERT_OK(hx_chat_apply_template(tmpl, msgs, n, add_assistant, buf, len + 1, &got));
    ck_assert_uint_eq(got, len);
    ck_assert_uint_eq(strlen(buf), len);
    return buf;
}

static void assert_text(const char *what, const char *got, const char *expected)
{
    if (strcmp(got, expected)) {
        size_t i = 0;
        while (got[i] && got[i] == expected[i])
            i++;
        ck_abort_msg("%s: differs at byte %zu\n--- expected:\n%s\n--- got:\n%s", what, i, expected, got);
    }
}

START_TEST(vectors_format_as_llama_cpp)
{
    int checked = 0;
    for (size_t k = 0; k < hx_chat_n_vectors; k++) {
        const hx_chat_vector *v = &hx_chat_vectors[k];
        if (v->refused)
            continue;
        hx_chat_message msgs[MAX_MESSAGES];
        size_t n = messages_of(v, msgs);
        char what[160];
        if (v->jinja) {
            snprintf(what, sizeof what, "%s's template", v->model);
            char *got = format(v->jinja, msgs, n, 1);
            assert_text(what, got, v->expected);
            free(got);
        }
        snprintf(what, sizeof what, "family '%s' by name", v->family);
        char *got = format(v->family, msgs, n, 1);
        assert_text(what, got, v->expected);
        free(got);
        checked++;
    }
    ck_assert_int_ge(checked, 40);
}
END_TEST

START_TEST(vectors_detect_as_llama_cpp)
{
    for (size_t k = 0; k < hx_chat_n_vectors; k++) {
        const hx_chat_vector *v = &hx_chat_vectors[k];
        const char *sources[2] = {v->family, v->jinja};
        for (int s = 0; s < 2 && sources[s]; s++) {
            const char *name = "unset";
            hx_status st = hx_chat_template_name(sources[s], &name);
            const char *what = s ? v->model : v->family;
            if (v->refused) {
                ck_assert_msg(st == HX_ERR_UNSUPPORTED, "%s: %s, expected a refusal", what, hx_status_str(st));
                ck_assert_msg(strstr(hx_last_error(), v->family), "%s: the refusal does not name '%s': %s", what,
                              v->family, hx_last_error());
                ck_assert_ptr_null(name);
            } else {
                ck_assert_msg(st == HX_OK, "%s: %s: %s", what, hx_status_str(st), hx_last_error());
                ck_assert_msg(!strcmp(name, v->family), "%s is '%s', expected '%s'", what, name, v->family);
            }
        }
    }
}
END_TEST

START_TEST(every_family_has_vectors)
{
    static const char *const required[] = {"chatml", "llama2", "llama2-sys", "llama2-sys-bos", "llama2-sys-strip",
                                           "llama3", "mistral-v1", "mistral-v3", "mistral-v3-tekken", "mistral-v7",
                                           "phi3", "gemma", "zephyr"};
    size_t n = 0;
    for (; hx_chat_template_builtin(n); n++) {
        const char *f = hx_chat_template_builtin(n), *name = NULL;
        HX_ASSERT_OK(hx_chat_template_name(f, &name));
        ck_assert_str_eq(name, f);
        ck_assert_ptr_eq(name, f); /* static: the listing's own string */
        int found = 0;
        for (size_t k = 0; k < hx_chat_n_vectors && !found; k++)
            found = !hx_chat_vectors[k].refused && !strcmp(hx_chat_vectors[k].family, f);
        ck_assert_msg(found, "family '%s' has no test vector", f);
    }
    for (size_t r = 0; r < sizeof required / sizeof *required; r++) {
        int listed = 0;
        for (size_t i = 0; i < n; i++)
            listed |= !strcmp(hx_chat_template_builtin(i), required[r]);
        ck_assert_msg(listed, "family '%s' is not built in", required[r]);
    }
    ck_assert_ptr_null(hx_chat_template_builtin(n));
    ck_assert_ptr_null(hx_chat_template_builtin((size_t)-1));
}
END_TEST

/* Without the assistant's opening, a conversation is the same text up to
 * where the opening starts; without messages, what comes before them. */
START_TEST(opening_and_empty_conversation)
{
    for (size_t i = 0; hx_chat_template_builtin(i); i++) {
        const char *f = hx_chat_template_builtin(i);
        char *with = format(f, hx_chat_conversation, HX_CHAT_CONVERSATION, 1);
        char *without = format(f, hx_chat_conversation, HX_CHAT_CONVERSATION, 0);
        char *empty = format(f, NULL, 0, 0);
        ck_assert_msg(!strncmp(with, without, strlen(without)), "%s: the text without the opening is no prefix", f);
        ck_assert_msg(!strncmp(without, empty, strlen(empty)), "%s: the empty conversation is no prefix", f);
        free(with);
        free(without);
        free(empty);
    }
}
END_TEST

START_TEST(buffer_contract)
{
    const hx_chat_message *c = hx_chat_conversation;
    char *full = format("chatml", c, HX_CHAT_CONVERSATION, 1);
    size_t need = strlen(full), len = 0;

    ck_assert_int_eq(hx_chat_apply_template("chatml", c, HX_CHAT_CONVERSATION, 1, NULL, 0, &len), HX_ERR_RANGE);
    ck_assert_uint_eq(len, need);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "do not fit"));

    /* Room for the text but not its NUL: refused, nothing past cap. */
    char *buf = malloc(need + 8);
    memset(buf, 'Z', need + 8);
    len = 0;
    ck_assert_int_eq(hx_chat_apply_template("chatml", c, HX_CHAT_CONVERSATION, 1, buf, need, &len), HX_ERR_RANGE);
    ck_assert_uint_eq(len, need);
    for (size_t i = need; i < need + 8; i++)
        ck_assert_int_eq(buf[i], 'Z');

    memset(buf, 'Z', need + 8);
    HX_ASSERT_OK(hx_chat_apply_template("chatml", c, HX_CHAT_CONVERSATION, 1, buf, need + 1, &len));
    ck_assert_uint_eq(len, need);
    ck_assert_str_eq(buf, full);
    ck_assert_int_eq(buf[need + 1], 'Z');
    free(buf);
    free(full);
}
END_TEST

START_TEST(bad_arguments)
{
    const hx_chat_message *c = hx_chat_conversation;
    char buf[64];
    size_t len;
    const char *name;
    ck_assert_int_eq(hx_chat_template_name(NULL, &name), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_chat_template_name("chatml", NULL), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_chat_apply_template(NULL, c, 1, 1, buf, sizeof buf, &len), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_chat_apply_template("chatml", NULL, 1, 1, buf, sizeof buf, &len), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_chat_apply_template("chatml", c, 1, 1, NULL, sizeof buf, &len), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_chat_apply_template("chatml", c, 1, 1, buf, sizeof buf, NULL), HX_ERR_INVALID_ARG);
    hx_chat_message holes[2] = {{"user", NULL}, {NULL, "Hello"}};
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(hx_chat_apply_template("chatml", &holes[i], 1, 1, buf, sizeof buf, &len),
                         HX_ERR_INVALID_ARG);
        ck_assert_ptr_nonnull(strstr(hx_last_error(), i ? "role" : "content"));
    }
}
END_TEST

START_TEST(unknown_templates_are_refused)
{
    /* llama.cpp's own invalid template, an empty one, and a Jinja template
     * with none of the markers. */
    static const char *const unknown[] = {"INVALID TEMPLATE", "",
                                          "{% for m in messages %}{{ m['content'] }}{% endfor %}"};
    for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++) {
        const char *name = "unset";
        ck_assert_int_eq(hx_chat_template_name(unknown[i], &name), HX_ERR_UNSUPPORTED);
        ck_assert_ptr_null(name);
        ck_assert_ptr_nonnull(strstr(hx_last_error(), "chat template"));
        char buf[256];
        size_t len = 99;
        ck_assert_int_eq(hx_chat_apply_template(unknown[i], hx_chat_conversation, HX_CHAT_CONVERSATION, 1, buf,
                                                sizeof buf, &len),
                         HX_ERR_UNSUPPORTED);
        ck_assert_uint_eq(len, 0);
    }
    /* A long template is quoted, not copied whole, in the message. */
    char *big = malloc(100000);
    memset(big, 'x', 99999);
    big[99999] = '\0';
    const char *name;
    ck_assert_int_eq(hx_chat_template_name(big, &name), HX_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "..."));
    free(big);
}
END_TEST

/* A role the family has no place for: where llama.cpp drops the message
 * (Vicuna has no "tool"), hetero refuses it; where the family writes any
 * role (ChatML), it is written. */
START_TEST(unknown_roles)
{
    hx_chat_message msgs[2] = {{"user", "Hello"}, {"tool", "42"}};
    char buf[256];
    size_t len;
    ck_assert_int_eq(hx_chat_apply_template("vicuna", msgs, 2, 1, buf, sizeof buf, &len), HX_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "'tool'"));
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "vicuna"));
    HX_ASSERT_OK(hx_chat_apply_template("chatml", msgs, 2, 1, buf, sizeof buf, &len));
    ck_assert_ptr_nonnull(strstr(buf, "tool\n42"));
}
END_TEST

static const hx_chat_vector *vector_of(const char *model)
{
    for (size_t k = 0; k < hx_chat_n_vectors; k++)
        if (hx_chat_vectors[k].model && !strcmp(hx_chat_vectors[k].model, model))
            return &hx_chat_vectors[k];
    ck_abort_msg("no vector for %s", model);
    return NULL;
}

static hx_model *load(hx_runtime *rt, const char *path)
{
    hx_model_options mo = hx_model_options_default();
    mo.kv_tokens = 32;
    hx_model *m;
    HX_ASSERT_OK(hx_model_load(rt, path, &mo, &m));
    return m;
}

/* A file without tokenizer.chat_template has none; SmolLM2-135M-Instruct's
 * (HX_TEST_SMOLLM2: its GGUF file) is its ChatML template. */
START_TEST(model_templates)
{
    ck_assert_ptr_null(hx_model_chat_template(NULL));
    char dir[] = "/tmp/hx-chat-XXXXXX", path[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/synthetic.gguf", dir);
    static const hx_synthetic_config small = {"chat", 256, 1, 4, 4, 512, 512, "llama", 0};
    HX_ASSERT_OK(hx_synthetic_write(path, &small, "q8_0", 7));
    hx_runtime *rt;
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = "cpu";
    HX_ASSERT_OK(hx_runtime_open(&rt, &o));
    hx_model *m = load(rt, path);
    ck_assert_ptr_null(hx_model_chat_template(m));
    hx_model_free(m);
    unlink(path);
    rmdir(dir);

    const char *smollm2 = getenv("HX_TEST_SMOLLM2");
    if (!smollm2 || access(smollm2, R_OK)) {
        fprintf(stderr, "chat: skipped the SmolLM2 file's template: HX_TEST_SMOLLM2 names no readable file "
                        "(set it to SmolLM2-135M-Instruct's GGUF)\n");
    } else {
        m = load(rt, smollm2);
        const char *t = hx_model_chat_template(m), *name;
        ck_assert_ptr_nonnull(t);
        ck_assert_str_eq(t, vector_of("HuggingFaceTB/SmolLM2-135M-Instruct")->jinja);
        HX_ASSERT_OK(hx_chat_template_name(t, &name));
        ck_assert_str_eq(name, "chatml");
        hx_model_free(m);
    }
    hx_runtime_close(rt);
}
END_TEST

Suite *suite_chat(void)
{
    Suite *s = suite_create("chat");
    TCase *t = tcase_create("templates");
    tcase_add_test(t, vectors_format_as_llama_cpp);
    tcase_add_test(t, vectors_detect_as_llama_cpp);
    tcase_add_test(t, every_family_has_vectors);
    tcase_add_test(t, opening_and_empty_conversation);
    tcase_add_test(t, buffer_contract);
    tcase_add_test(t, bad_arguments);
    tcase_add_test(t, unknown_templates_are_refused);
    tcase_add_test(t, unknown_roles);
    suite_add_tcase(s, t);
    TCase *m = tcase_create("model");
    tcase_set_timeout(m, 60);
    tcase_add_test(m, model_templates);
    suite_add_tcase(s, m);
    return s;
}
