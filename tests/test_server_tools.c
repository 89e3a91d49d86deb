/* hetero-server's function calling through the official openai Python
 * client (tests/server_tools_check.py): malformed tools and tool messages
 * refused by field, forced calls (generic and Hermes formats, whole and
 * streamed) whose arguments validate, auto and none, a conversation with
 * a tool's result, and the round trip on SmolLM2 when HX_TEST_SMOLLM2
 * names its file. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "quantize/synthetic.h"
#include "tests/hx_test.h"

START_TEST(tool_calls_through_the_openai_client)
{
    /* A file whose own template has a tool_use variant, which serves the
     * requests that offer tools (server_tools_check.py checks it). */
    char dir[64], path[96], cmd[512];
    hx_test_tmpdir(dir, sizeof dir, "tooluse");
    snprintf(path, sizeof path, "%s/t.gguf", dir);
    static const hx_synthetic_config small = {"chat", 256, 1, 4, 4, 512, 512, "llama", 0};
    static const char *const named[] = {"tool_use", "[tool_use template: {{ tools | length }} tools]"
                                                    "{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}",
                                        NULL};
    hx_synthetic_extras x = {.chat_template = "[default template]{% for m in messages %}[{{ m.role }}:"
                                              "{{ m.content }}]{% endfor %}",
                             .named_templates = named};
    HX_ASSERT_OK(hx_synthetic_write_with(path, &small, &x, "q8_0", 7));
    snprintf(cmd, sizeof cmd, "python3 tests/server_tools_check.py %s --tool-use-model %s", hx_test_build_dir(),
             path);
    int st = system(cmd);
    ck_assert_msg(WIFEXITED(st), "%s did not exit", cmd);
    ck_assert_msg(WEXITSTATUS(st) != 3, "python3 lacks the openai or jsonschema package: pip install -r "
                  "tests/requirements.txt");
    ck_assert_msg(WEXITSTATUS(st) == 0, "%s failed (its FAIL line above says which check)", cmd);
}
END_TEST

Suite *suite_server_tools(void)
{
    Suite *s = suite_create("server_tools");
    TCase *tc = tcase_create("openai");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, tool_calls_through_the_openai_client);
    suite_add_tcase(s, tc);
    return s;
}
