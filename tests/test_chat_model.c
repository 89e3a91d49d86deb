/* A model's own chat templates through hx_model_chat_render: the default
 * and named ones a file carries (tokenizer.chat_template[.NAME]), the
 * model's BOS text and llama.cpp's dropping of a BOS the tokenizer adds
 * again, the built-in fallback (no template, --no-jinja) with its
 * continuation of a last assistant message; and SmolLM2-135M-Instruct's
 * template, which adds its system prompt: "Hi" is 31 prompt tokens, as
 * llama-server counts them. */
#include <string.h>
#include <unistd.h>

#include "quantize/synthetic.h"
#include "tests/hx_test.h"

static char *render(const hx_model *m, const char *tmpl, const hx_chat_render_options *o)
{
    size_t len = 0;
    hx_status s = hx_model_chat_render(m, tmpl, o, NULL, 0, &len);
    ck_assert_msg(s == HX_ERR_RANGE, "sizing: %s: %s", hx_status_str(s), hx_last_error());
    char *buf = malloc(len + 1);
    size_t got;
    HX_ASSERT_OK(hx_model_chat_render(m, tmpl, o, buf, len + 1, &got));
    ck_assert_uint_eq(got, len);
    return buf;
}

static hx_model *load(hx_runtime *rt, const char *path)
{
    hx_model_options mo = hx_model_options_default();
    mo.kv_tokens = 32;
    hx_model *m;
    HX_ASSERT_OK(hx_model_load(rt, path, &mo, &m));
    return m;
}

static hx_runtime *cpu_runtime(void)
{
    hx_runtime *rt;
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = "cpu";
    HX_ASSERT_OK(hx_runtime_open(&rt, &o));
    return rt;
}

START_TEST(file_templates_default_and_named)
{
    char dir[64], path[96];
    hx_test_tmpdir(dir, sizeof dir, "chatm");
    snprintf(path, sizeof path, "%s/t.gguf", dir);
    static const hx_synthetic_config small = {"chat", 256, 1, 4, 4, 512, 512, "llama", 0};
    static const char *const named[] = {"tool_use", "{{ bos_token }}tools: {{ tools | length }}", NULL};
    hx_synthetic_extras x = {.chat_template = "{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}"
                                              "{% if add_generation_prompt %}[assistant:{% endif %}",
                             .named_templates = named};
    HX_ASSERT_OK(hx_synthetic_write_with(path, &small, &x, "q8_0", 7));
    hx_runtime *rt = cpu_runtime();
    hx_model *m = load(rt, path);
    ck_assert_str_eq(hx_model_chat_template_named(m, NULL), x.chat_template);
    ck_assert_str_eq(hx_model_chat_template_named(m, "tool_use"), named[1]);
    ck_assert_ptr_null(hx_model_chat_template_named(m, "rag"));
    ck_assert_ptr_null(hx_model_chat_template_named(NULL, "tool_use"));

    hx_chat_render_options o = hx_chat_render_options_default();
    o.messages = "[{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hel\"}]";
    char *t = render(m, NULL, &o);
    ck_assert_str_eq(t, "[user:Hi][assistant:Hel"); /* continued */
    free(t);
    o.continue_final = 0;
    o.add_generation_prompt = 0;
    t = render(m, NULL, &o);
    ck_assert_str_eq(t, "[user:Hi][assistant:Hel]");
    free(t);
    /* the named one, with tools; the byte vocabulary has no BOS, so bos_token is "" */
    o.tools = "[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]";
    t = render(m, hx_model_chat_template_named(m, "tool_use"), &o);
    ck_assert_str_eq(t, "tools: 1");
    free(t);
    /* --no-jinja: the built-in family the template names; chatml continues a last assistant message too */
    o = hx_chat_render_options_default();
    o.messages = "[{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hel\"}]";
    t = render(m, "chatml", &o);
    ck_assert_str_eq(t, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHel");
    free(t);
    o.no_jinja = 1;
    ck_assert_int_eq(hx_model_chat_render(m, NULL, &o, NULL, 0, &(size_t){0}), HX_ERR_UNSUPPORTED);
    o.messages = "[{\"role\": \"user\", \"content\": [{\"type\": \"image\"}]}]";
    ck_assert_int_eq(hx_model_chat_render(m, "chatml", &o, NULL, 0, &(size_t){0}), HX_ERR_INVALID_ARG);
    hx_model_free(m);

    /* a file without a template: ChatML, as llama.cpp falls back */
    HX_ASSERT_OK(hx_synthetic_write(path, &small, "q8_0", 7));
    m = load(rt, path);
    ck_assert_ptr_null(hx_model_chat_template_named(m, NULL));
    o = hx_chat_render_options_default();
    o.messages = "[{\"role\": \"user\", \"content\": \"Hi\"}]";
    t = render(m, NULL, &o);
    ck_assert_str_eq(t, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    free(t);
    hx_model_free(m);
    hx_runtime_close(rt);
    hx_test_rmdir(dir);
}
END_TEST

/* SmolLM2's template as jinja2 renders it for "Hi"; its tokens as llama-server counts them. */
START_TEST(smollm2_hi_is_31_tokens)
{
    const char *path = hx_test_smollm2("chat_model: SmolLM2's template");
    if (!path)
        return;
    hx_runtime *rt = cpu_runtime();
    hx_model *m = load(rt, path);
    hx_chat_render_options o = hx_chat_render_options_default();
    o.messages = "[{\"role\": \"user\", \"content\": \"Hi\"}]";
    char *t = render(m, NULL, &o);
    ck_assert_str_eq(t, "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
                        "Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    int32_t ids[64];
    size_t n = 0;
    HX_ASSERT_OK(hx_model_tokenize(m, t, strlen(t), 1, 1, ids, 64, &n));
    ck_assert_uint_eq(n, 31);
    free(t);
    /* --no-jinja: llama.cpp's built-in chatml, without the system prompt */
    o.no_jinja = 1;
    t = render(m, NULL, &o);
    ck_assert_str_eq(t, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    free(t);
    hx_model_free(m);
    hx_runtime_close(rt);
}
END_TEST

Suite *suite_chat_model(void)
{
    Suite *s = suite_create("chat_model");
    TCase *t = tcase_create("model");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, file_templates_default_and_named);
    tcase_add_test(t, smollm2_hi_is_31_tokens);
    suite_add_tcase(s, t);
    return s;
}
