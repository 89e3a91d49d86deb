/* hetero-server's function calling through the official openai Python
 * client (tests/server_tools_check.py): malformed tools and tool messages
 * refused by field, forced calls (generic and Hermes formats, whole and
 * streamed) whose arguments validate, auto and none, a conversation with
 * a tool's result, and the round trip on SmolLM2 when HX_TEST_SMOLLM2
 * names its file. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "tests/hx_test.h"

START_TEST(tool_calls_through_the_openai_client)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "python3 tests/server_tools_check.py %s", hx_test_build_dir());
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
