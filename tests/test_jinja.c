/* The Jinja engine (text/jinja_*.c) through hx_chat_render: each case of
 * tests/jinja_cases.h renders as jinja2 renders it (whitespace control,
 * loops, scopes, namespaces, macros, filters, tests, methods, tojson,
 * Python's str() of values), each error case fails naming what and where;
 * templates that loop forever, render gigabytes, recurse without end or
 * grow a string without end stop at their limit, quickly; the buffer
 * contract, bad JSON and bad arguments. */
#include <string.h>
#include <time.h>

#include "tests/hx_test.h"

typedef struct {
    const char *name, *src, *expected, *error;
} jinja_case;

#include "tests/jinja_cases.h"

/* The case's variables are JINJA_VARS' members, passed as extra; messages as messages. */
static hx_status render(const char *src, char **out, size_t *len)
{
    hx_chat_render_options o = hx_chat_render_options_default();
    o.messages = "[{\"role\": \"system\", \"content\": \" Be brief. \"}, {\"role\": \"user\", \"content\": \"Hi\"}, "
                 "{\"role\": \"assistant\", \"content\": \"Hello!\"}]";
    o.extra = JINJA_VARS;
    o.continue_final = 0;
    o.bos_token = "<s>";
    o.eos_token = "</s>";
    o.now = 1768478400;
    *out = NULL;
    hx_status s = hx_chat_render(src, &o, NULL, 0, len);
    if (s != HX_ERR_RANGE)
        return s;
    *out = malloc(*len + 1);
    ck_assert_ptr_nonnull(*out);
    return hx_chat_render(src, &o, *out, *len + 1, len);
}

START_TEST(cases_render_as_jinja2)
{
    const jinja_case *c = &JINJA_CASES[_i];
    char *out;
    size_t len;
    hx_status s = render(c->src, &out, &len);
    if (c->expected) {
        ck_assert_msg(s == HX_OK, "%s: %s", c->name, hx_last_error());
        ck_assert_msg(!strcmp(out, c->expected), "%s:\n--- jinja2:\n%s\n--- hetero:\n%s", c->name, c->expected, out);
        ck_assert_uint_eq(len, strlen(c->expected));
    } else {
        ck_assert_msg(s != HX_OK, "%s rendered, but jinja2 refuses it", c->name);
        ck_assert_msg(strstr(hx_last_error(), c->error), "%s: '%s' lacks '%s'", c->name, hx_last_error(), c->error);
    }
    free(out);
}
END_TEST

/* Each runaway template stops at the limit it names, in bounded time. */
START_TEST(runaway_templates_stop_at_their_limit)
{
    static const struct {
        const char *src, *limit;
    } runaway[] = {
        {"{% set r = range(1000000) %}{% for i in r %}{% for j in r %}{% endfor %}{% endfor %}", "steps"},
        {"{{ 'x' * 1000000000000 }}", "output size"},
        {"{% for i in range(1000000) %}{{ 'x' * 100000 }}{% endfor %}", "memory"},
        {"{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "depth"},
        {"{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
         "output size|memory"},
        {"{% for i in range(1000000000000) %}{% endfor %}", "loop iterations"},
        {"{% set ns = namespace(l=[0]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
         "memory"},
        {"{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", "depth"},
    };
    for (size_t i = 0; i < sizeof runaway / sizeof runaway[0]; i++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        char *out;
        size_t len;
        hx_status s = render(runaway[i].src, &out, &len);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        ck_assert_msg(s == HX_ERR_RANGE, "%s: %s (%s)", runaway[i].src, hx_status_str(s), hx_last_error());
        /* limit: the one it must hit, or alternatives "a|b" where either may come first */
        int named = 0;
        char alt[64];
        snprintf(alt, sizeof alt, "%s", runaway[i].limit);
        for (char *save, *one = strtok_r(alt, "|", &save); one; one = strtok_r(NULL, "|", &save))
            named |= strstr(hx_last_error(), one) != NULL;
        ck_assert_msg(named, "%s: '%s' does not name '%s'", runaway[i].src, hx_last_error(), runaway[i].limit);
        ck_assert_msg(strstr(hx_last_error(), "line 1"), "%s: no line in '%s'", runaway[i].src, hx_last_error());
        fprintf(stderr, "jinja runaway %zu stopped in %.2f s: %s\n", i, secs, hx_last_error());
        free(out);
    }
}
END_TEST

/* A large input (an object of 200,000 keys) reads in linear time, and a
 * template that looks every key up pays for each scan: it stops at the
 * step limit, not after hours. */
START_TEST(large_input_is_bounded)
{
    const size_t n = 200000;
    char *json = malloc(n * 24 + 32);
    ck_assert_ptr_nonnull(json);
    size_t k = (size_t)sprintf(json, "{\"d\": {");
    for (size_t i = 0; i < n; i++)
        k += (size_t)sprintf(json + k, "%s\"k%zu\": %zu", i ? ", " : "", i, i);
    sprintf(json + k, "}}");
    hx_chat_render_options o = hx_chat_render_options_default();
    o.messages = "[]";
    o.extra = json;
    char buf[64];
    size_t len;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    HX_ASSERT_OK(hx_chat_render("{{ d | length }} {{ d.k199999 }}", &o, buf, sizeof buf, &len));
    ck_assert_str_eq(buf, "200000 199999");
    ck_assert_int_eq(hx_chat_render("{% for k in d %}{{ d[k] }}{% endfor %}", &o, NULL, 0, &len), HX_ERR_RANGE);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "steps"));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fprintf(stderr, "jinja: 200,000 keys read and refused in %.2f s\n",
            (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    free(json);
}
END_TEST

START_TEST(prefill_continues_the_last_assistant_message)
{
    const char *tmpl = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endfor %}"
                       "{% if add_generation_prompt %}<|assistant|>{% endif %}";
    hx_chat_render_options o = hx_chat_render_options_default();
    o.messages = "[{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hel\"}]";
    char buf[256];
    size_t len;
    HX_ASSERT_OK(hx_chat_render(tmpl, &o, buf, sizeof buf, &len));
    ck_assert_str_eq(buf, "<|user|>Hi<|end|><|assistant|>Hel");
    o.continue_final = 0;
    o.add_generation_prompt = 0;
    HX_ASSERT_OK(hx_chat_render(tmpl, &o, buf, sizeof buf, &len));
    ck_assert_str_eq(buf, "<|user|>Hi<|end|><|assistant|>Hel<|end|>");
    /* text parts are joined as llama.cpp joins them; a part that is not text is refused */
    o = hx_chat_render_options_default();
    o.messages = "[{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": "
                 "[{\"type\": \"text\", \"text\": \"A\"}, {\"type\": \"text\", \"text\": \"B\"}]}]";
    HX_ASSERT_OK(hx_chat_render(tmpl, &o, buf, sizeof buf, &len));
    ck_assert_str_eq(buf, "<|user|>Hi<|end|><|assistant|>A\n\nB");
    o.messages = "[{\"role\": \"assistant\", \"content\": [{\"type\": \"image_url\"}]}]";
    ck_assert_int_eq(hx_chat_render(tmpl, &o, buf, sizeof buf, &len), HX_ERR_INVALID_ARG);
}
END_TEST

/* A template whose generation prompt opens a thought: a continued message
 * is written after the prompt up to its start tag, its thought and, for
 * the content, the end tag; a thought alone is continued as a thought; a
 * message with tool calls is rendered whole unless asked for by name
 * (then refused); without thought tags a thought cannot be continued. */
START_TEST(continuation_writes_the_thought)
{
    const char *tmpl = "{% for m in messages %}<|{{ m.role }}|>{% if m.reasoning_content %}<think>"
                       "{{ m.reasoning_content }}</think>{% endif %}{{ m.content }}<|end|>{% endfor %}"
                       "{% if add_generation_prompt %}<|assistant|><think>\n{% endif %}";
    hx_chat_render_options o = hx_chat_render_options_default();
    char buf[512];
    size_t len;
    o.messages = "[{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hel\"}]";
    HX_ASSERT_OK(hx_chat_render(tmpl, &o, buf, sizeof buf, &len));
    ck_assert_str_eq(buf, "<|user|>Hi<|end|><|assistant|><think></think>Hel");
    ck_assert_uint_eq(len, strlen(buf));
    o.messages = "[{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", "
                 "\"reasoning_content\": \"So\"}]";
    HX_ASSERT_OK(hx_chat_render(tmpl, &o, buf, sizeof buf, &len));
    ck_assert_str_eq(buf, "<|user|>Hi<|end|><|assistant|><think>So");
    o.continue_final = HX_CONTINUE_CONTENT; /* by name: after the whole thought */
    HX_ASSERT_OK(hx_chat_render(tmpl, &o, buf, sizeof buf, &len));
    ck_assert_str_eq(buf, "<|user|>Hi<|end|><|assistant|><think>So</think>");
    o.messages = "[{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", "
                 "\"reasoning_content\": \"So\", \"content\": \"Hel\"}]";
    o.continue_final = HX_CONTINUE_THOUGHT;
    HX_ASSERT_OK(hx_chat_render(tmpl, &o, buf, sizeof buf, &len));
    ck_assert_str_eq(buf, "<|user|>Hi<|end|><|assistant|><think>So");
    o.continue_final = HX_CONTINUE_AUTO;
    HX_ASSERT_OK(hx_chat_render(tmpl, &o, buf, sizeof buf, &len));
    ck_assert_str_eq(buf, "<|user|>Hi<|end|><|assistant|><think>So</think>Hel");
    /* a message with tool calls is a finished turn; continuing it by name is refused */
    o.messages = "[{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"\", "
                 "\"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]}]";
    HX_ASSERT_OK(hx_chat_render(tmpl, &o, buf, sizeof buf, &len));
    ck_assert_str_eq(buf, "<|user|>Hi<|end|><|assistant|><|end|><|assistant|><think>\n");
    o.continue_final = HX_CONTINUE_CONTENT;
    ck_assert_int_eq(hx_chat_render(tmpl, &o, buf, sizeof buf, &len), HX_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "tool calls"));
    o.continue_final = 7;
    ck_assert_int_eq(hx_chat_render(tmpl, &o, buf, sizeof buf, &len), HX_ERR_INVALID_ARG);
    /* a reasoning_content that is not a string is refused */
    o.continue_final = HX_CONTINUE_AUTO;
    o.messages = "[{\"role\": \"assistant\", \"reasoning_content\": 5}]";
    ck_assert_int_eq(hx_chat_render(tmpl, &o, buf, sizeof buf, &len), HX_ERR_INVALID_ARG);
    /* no thought tags: the content appended; a thought refused */
    const char *plain = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endfor %}"
                        "{% if add_generation_prompt %}<|assistant|>{% endif %}";
    o.messages = "[{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", "
                 "\"reasoning_content\": \"So\", \"content\": \"Hel\"}]";
    HX_ASSERT_OK(hx_chat_render(plain, &o, buf, sizeof buf, &len));
    ck_assert_str_eq(buf, "<|user|>Hi<|end|><|assistant|>Hel");
    o.continue_final = HX_CONTINUE_THOUGHT;
    ck_assert_int_eq(hx_chat_render(plain, &o, buf, sizeof buf, &len), HX_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "no thought tags"));
    /* the size asked first, then the text: the same length */
    o.continue_final = HX_CONTINUE_AUTO;
    o.messages = "[{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hel\"}]";
    size_t need = 0;
    ck_assert_int_eq(hx_chat_render(tmpl, &o, NULL, 0, &need), HX_ERR_RANGE);
    ck_assert_uint_eq(need, strlen("<|user|>Hi<|end|><|assistant|><think></think>Hel"));
}
END_TEST

/* Where llama.cpp's engine renders what jinja2 refuses, templates count
 * on it: None or an undefined name beside a string with + is "" (as
 * Firefunction v2's `functions`); with a number it is still an error. */
START_TEST(none_and_undefined_add_to_strings_as_llama_cpp)
{
    static const struct { const char *src, *expected; } ok[] = {
        {"{{ 'a' + missing + 'b' }}", "ab"},
        {"{{ missing + 'x' }}", "x"},
        {"{% set s = none %}{{ s + 'y' }}|{{ 'y' + s }}", "y|y"},
        {"{% set t = 'In' + \"\\n\" + functions %}[{{ t }}]", "[In\n]"},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char *out;
        size_t len;
        ck_assert_msg(render(ok[i].src, &out, &len) == HX_OK, "%s: %s", ok[i].src, hx_last_error());
        ck_assert_msg(!strcmp(out, ok[i].expected), "%s gave '%s'", ok[i].src, out);
        free(out);
    }
    char *out;
    size_t len;
    ck_assert(render("{{ 1 + missing }}", &out, &len) != HX_OK);
    ck_assert_msg(strstr(hx_last_error(), "'missing' is undefined"), "%s", hx_last_error());
    free(out);
    ck_assert(render("{{ none + 1 }}", &out, &len) != HX_OK);
    free(out);
}
END_TEST

START_TEST(buffer_contract_and_bad_input)
{
    hx_chat_render_options o = hx_chat_render_options_default();
    o.messages = "[{\"role\": \"user\", \"content\": \"Hi\"}]";
    const char *tmpl = "{{ messages[0].content }}!";
    char buf[8];
    size_t len = 99;
    ck_assert_int_eq(hx_chat_render(tmpl, &o, NULL, 0, &len), HX_ERR_RANGE);
    ck_assert_uint_eq(len, 3);
    ck_assert_int_eq(hx_chat_render(tmpl, &o, buf, 3, &len), HX_ERR_RANGE);
    ck_assert_str_eq(buf, "");
    HX_ASSERT_OK(hx_chat_render(tmpl, &o, buf, 4, &len));
    ck_assert_str_eq(buf, "Hi!");
    ck_assert_str_eq(hx_last_error(), "");
    /* malformed JSON, NULL arguments, a broken template */
    const char *bad_json[] = {"[", "[{\"role\": }]", "[1,]", "{\"a\": 1} x", "\"\\u12\"", "[01x]", ""};
    for (size_t i = 0; i < sizeof bad_json / sizeof bad_json[0]; i++) {
        o.messages = bad_json[i];
        ck_assert_msg(hx_chat_render(tmpl, &o, buf, sizeof buf, &len) == HX_ERR_FORMAT, "%s", bad_json[i]);
        ck_assert_ptr_nonnull(strstr(hx_last_error(), "not JSON"));
    }
    o.messages = "[]";
    o.extra = "[1]";
    ck_assert_int_eq(hx_chat_render(tmpl, &o, buf, sizeof buf, &len), HX_ERR_FORMAT);
    o.extra = NULL;
    ck_assert_int_eq(hx_chat_render(NULL, &o, buf, sizeof buf, &len), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_chat_render(tmpl, NULL, buf, sizeof buf, &len), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_chat_render("{% for %}", &o, buf, sizeof buf, &len), HX_ERR_FORMAT);
    ck_assert_int_eq(hx_chat_render("{% include 'x' %}", &o, buf, sizeof buf, &len), HX_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "'include' is not supported"));
    /* nesting past the parser's bound is an error, not a crash */
    char deep[4096];
    size_t k = 0;
    k += (size_t)snprintf(deep, sizeof deep, "{{ ");
    for (int i = 0; i < 1000; i++)
        deep[k++] = '(';
    deep[k++] = '1';
    for (int i = 0; i < 1000; i++)
        deep[k++] = ')';
    snprintf(deep + k, sizeof deep - k, " }}");
    ck_assert_int_eq(hx_chat_render(deep, &o, buf, sizeof buf, &len), HX_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "nested deeper"));
}
END_TEST

Suite *suite_jinja(void)
{
    Suite *s = suite_create("jinja");
    TCase *t = tcase_create("engine");
    tcase_set_timeout(t, 120);
    tcase_add_loop_test(t, cases_render_as_jinja2, 0, (int)(sizeof JINJA_CASES / sizeof JINJA_CASES[0]));
    tcase_add_test(t, runaway_templates_stop_at_their_limit);
    tcase_add_test(t, large_input_is_bounded);
    tcase_add_test(t, prefill_continues_the_last_assistant_message);
    tcase_add_test(t, continuation_writes_the_thought);
    tcase_add_test(t, buffer_contract_and_bad_input);
    tcase_add_test(t, none_and_undefined_add_to_strings_as_llama_cpp);
    suite_add_tcase(s, t);
    return s;
}
