/* The chat template corpus: every template of llama.cpp's models/templates
 * (HX_LLAMACPP_MODELS: the folder tests/fetch-llamacpp-sdist.sh prints),
 * rendered by hetero (hx_chat_render) and by Python's jinja2 set up as
 * transformers' apply_chat_template sets it up (tests/chat_corpus.py) for
 * the same conversations: no system message, a system message, content as
 * text parts, several turns, an assistant message last (closed, and
 * continued as llama-server does), tools offered, a tool call and its
 * result.  Every text must be
 * the same byte for byte; where jinja2 refuses a conversation, hetero must
 * refuse it too (with raise_exception's message, when that is why).  And
 * the thought tags of the families that think, read from their templates. */
#include <stdlib.h>
#include <string.h>

#include "tests/hx_test.h"

static char *read_or_null(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fclose(f);
    return hx_test_slurp(path, NULL);
}

START_TEST(templates_render_as_jinja2)
{
    const char *models = getenv("HX_LLAMACPP_MODELS");
    char templates[1024], out[512], cmd[2048], path[2048];
    if (!models || !*models) {
        const char *why = "HX_LLAMACPP_MODELS is not set: llama.cpp's models/ folder could not be fetched (see "
                          "fetch-llamacpp-sdist's message above), or make test did not set it";
        ck_assert_msg(!getenv("CI"), "chat corpus: %s", why);
        fprintf(stderr, "SKIPPED chat corpus: %s\n", why);
        return;
    }
    snprintf(templates, sizeof templates, "%s/templates", models);
    hx_test_tmpdir(out, sizeof out, "corpus");
    snprintf(cmd, sizeof cmd, "python3 tests/chat_corpus.py '%s' '%s'", templates, out);
    ck_assert_msg(system(cmd) == 0, "%s failed (python3 with jinja2: tests/requirements.txt)", cmd);

    snprintf(path, sizeof path, "%s/manifest.tsv", out);
    FILE *m = fopen(path, "r");
    ck_assert_ptr_nonnull(m);
    char line[1024], last_template[512] = "";
    int renders = 0, identical = 0, both_refuse = 0, differ = 0, n_templates = 0, conversations = 0;
    while (fgets(line, sizeof line, m)) {
        char tf[512], conv[64], status[16];
        ck_assert_int_eq(sscanf(line, "%511[^\t]\t%63[^\t]\t%15s", tf, conv, status), 3);
        if (strcmp(tf, last_template)) {
            n_templates++;
            conversations = 0;
            snprintf(last_template, sizeof last_template, "%s", tf);
        }
        conversations++;
        renders++;
        snprintf(path, sizeof path, "%s/%s", templates, tf);
        char *tmpl = hx_test_slurp(path, NULL);
        snprintf(path, sizeof path, "%s/conversations/%s.messages", out, conv);
        char *msgs = hx_test_slurp(path, NULL);
        snprintf(path, sizeof path, "%s/conversations/%s.tools", out, conv);
        char *tools = hx_test_slurp(path, NULL);
        snprintf(path, sizeof path, "%s/conversations/%s.options", out, conv);
        char *opts = hx_test_slurp(path, NULL);
        int add_gen, cont;
        long long now;
        char bos[32], eos[32];
        ck_assert_int_eq(sscanf(opts, "%d %d %lld %31s %31s", &add_gen, &cont, &now, bos, eos), 5);
        hx_chat_render_options o = hx_chat_render_options_default();
        o.messages = msgs;
        o.tools = *tools ? tools : NULL;
        o.add_generation_prompt = add_gen;
        o.continue_final = cont;
        o.now = now;
        o.bos_token = bos;
        o.eos_token = eos;
        size_t len = 0;
        char *text = NULL;
        hx_status s = hx_chat_render(tmpl, &o, NULL, 0, &len);
        if (s == HX_ERR_RANGE) {
            text = malloc(len + 1);
            s = hx_chat_render(tmpl, &o, text, len + 1, &len);
        }
        snprintf(path, sizeof path, "%s/expected/%s@%s.%s", out, tf, conv, strcmp(status, "ok") ? "err" : "out");
        char *expected = read_or_null(path);
        ck_assert_ptr_nonnull(expected);
        if (!strcmp(status, "ok")) {
            if (s == HX_OK && !strcmp(text, expected)) {
                identical++;
            } else {
                differ++;
                size_t i = 0;
                while (s == HX_OK && text[i] && text[i] == expected[i])
                    i++;
                fprintf(stderr, "chat corpus: %s @ %s differs%s%s at byte %zu\n--- jinja2:\n%.200s\n--- hetero:\n%.200s\n",
                        tf, conv, s ? ": " : "", s ? hx_last_error() : "", i, expected + (i > 80 ? i - 80 : 0),
                        s ? "" : text + (i > 80 ? i - 80 : 0));
            }
        } else if (s != HX_OK && (strcmp(status, "raised") || strstr(hx_last_error(), expected))) {
            both_refuse++;
        } else {
            differ++;
            fprintf(stderr, "chat corpus: %s @ %s: jinja2 refuses it (%s); hetero %s%s\n", tf, conv, expected,
                    s ? "refuses it otherwise: " : "renders it", s ? hx_last_error() : "");
        }
        free(tmpl), free(msgs), free(tools), free(opts), free(text), free(expected);
    }
    fclose(m);
    fprintf(stderr, "chat corpus: %d templates x %d conversations = %d renders: %d identical texts, %d refused by "
                    "both (jinja2's reason and hetero's), %d differ\n",
            n_templates, conversations, renders, identical, both_refuse, differ);
    ck_assert_int_ge(n_templates, 60);
    ck_assert_int_eq(differ, 0);
    ck_assert_int_eq(identical + both_refuse, renders);
    hx_test_rmdir(out);
}
END_TEST

/* The thought tags of the families that think, read from their real
 * templates (hx_reasoning_tags), and none from families that do not; the
 * tool-call format of the newest families (hx_tool_format_detect). */
START_TEST(thinking_templates_name_their_tags)
{
    static const struct {
        const char *file, *start; /* start NULL: the template writes no thought */
    } cases[] = {
        {"Qwen-Qwen3-0.6B", "<think>"}, {"Qwen-QwQ-32B", "<think>"},
        {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "<think>"}, {"deepseek-ai-DeepSeek-V3.1", "<think>"},
        {"HuggingFaceTB-SmolLM3-3B", "<think>"}, {"GLM-4.6", "<think>"}, {"ByteDance-Seed-OSS", "<seed:think>"},
        {"MiniMax-M3", "<mm:think>"}, {"CohereForAI-c4ai-command-r7b-12-2024-tool_use", "<|START_THINKING|>"},
        {"mistralai-Ministral-3-14B-Reasoning-2512", "[THINK]"}, {"Qwen-Qwen2.5-7B-Instruct", NULL},
        {"meta-llama-Llama-3.1-8B-Instruct", NULL}, {"google-gemma-2-2b-it", NULL},
        {"mistralai-Mistral-Nemo-Instruct-2407", NULL}, {"Qwen3-Coder", NULL},
    };
    const char *models = getenv("HX_LLAMACPP_MODELS");
    if (!models || !*models) {
        ck_assert_msg(!getenv("CI"), "chat corpus: HX_LLAMACPP_MODELS is not set");
        fprintf(stderr, "SKIPPED thought tags: HX_LLAMACPP_MODELS is not set\n");
        return;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/templates/%s.jinja", models, cases[i].file);
        char *t = read_or_null(path);
        ck_assert_msg(t != NULL, "%s is missing", path);
        const char *start = NULL, *end = NULL;
        const int found = hx_reasoning_tags(t, &start, &end);
        ck_assert_msg(found == (cases[i].start != NULL) && (!found || !strcmp(start, cases[i].start)),
                      "%s: thought tags %s, want %s", cases[i].file, found ? start : "none",
                      cases[i].start ? cases[i].start : "none");
        free(t);
    }
    /* and the tool-call formats of the newest families */
    static const struct {
        const char *file;
        hx_tool_format f;
    } calls[] = {
        {"Qwen3-Coder", HX_TOOL_FORMAT_XML}, {"Qwen3.5-4B", HX_TOOL_FORMAT_XML},
        {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", HX_TOOL_FORMAT_XML}, {"StepFun3.5-Flash", HX_TOOL_FORMAT_XML},
        {"ByteDance-Seed-OSS", HX_TOOL_FORMAT_SEED}, {"GLM-4.6", HX_TOOL_FORMAT_GLM},
        {"GLM-4.7-Flash", HX_TOOL_FORMAT_GLM}, {"Qwen-Qwen3-0.6B", HX_TOOL_FORMAT_HERMES},
        {"Qwen-Qwen2.5-7B-Instruct", HX_TOOL_FORMAT_HERMES}, {"meetkai-functionary-medium-v3.1", HX_TOOL_FORMAT_LLAMA3},
    };
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/templates/%s.jinja", models, calls[i].file);
        char *t = read_or_null(path);
        ck_assert_msg(t != NULL, "%s is missing", path);
        ck_assert_msg(hx_tool_format_detect(t) == calls[i].f, "%s: tool-call format %s, want %s", calls[i].file,
                      hx_tool_format_name(hx_tool_format_detect(t)), hx_tool_format_name(calls[i].f));
        free(t);
    }
}
END_TEST

Suite *suite_chat_corpus(void)
{
    Suite *s = suite_create("chat_corpus");
    TCase *t = tcase_create("corpus");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, templates_render_as_jinja2);
    tcase_add_test(t, thinking_templates_name_their_tags);
    suite_add_tcase(s, t);
    return s;
}
