/* hetero-server's reasoning formats (tests/server_thought_check.py): a
 * thought read out of the answer as reasoning_content, whole and streamed,
 * with tools, grammars, Anthropic's thinking blocks and the Responses
 * API's reasoning items, and bad formats refused.  On SmolLM2 when
 * HX_TEST_SMOLLM2 names it, else the embedded model. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "tests/hx_test.h"

START_TEST(a_thought_is_read_out_as_reasoning_content)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "python3 tests/server_thought_check.py %s", hx_test_build_dir());
    int st = system(cmd);
    ck_assert_msg(WIFEXITED(st), "%s did not exit", cmd);
    ck_assert_msg(WEXITSTATUS(st) != 3, "python3 lacks the anthropic, openai or jsonschema package: pip install -r "
                  "tests/requirements.txt");
    ck_assert_msg(WEXITSTATUS(st) == 0, "%s failed (its FAIL line above says which check)", cmd);
}
END_TEST

Suite *suite_server_thought(void)
{
    Suite *s = suite_create("server_thought");
    TCase *tc = tcase_create("formats");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, a_thought_is_read_out_as_reasoning_content);
    suite_add_tcase(s, tc);
    return s;
}
