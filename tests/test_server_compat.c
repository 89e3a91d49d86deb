/* hetero-server's other APIs over its chat (tests/server_compat_check.py):
 * Anthropic's Messages, OpenAI's Responses and Vertex AI's /predict,
 * against the chat's own answers, through the official anthropic and
 * openai clients, whole and streamed, with tools, schemas and bad input.
 * On SmolLM2 when HX_TEST_SMOLLM2 names it, else the embedded model with a
 * tool-calling template.  And reasoning_content, in every shape. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "tests/hx_test.h"

static void run_check(const char *script)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "python3 tests/%s %s", script, hx_test_build_dir());
    int st = system(cmd);
    ck_assert_msg(WIFEXITED(st), "%s did not exit", cmd);
    ck_assert_msg(WEXITSTATUS(st) != 3, "python3 lacks the anthropic, openai or jsonschema package: pip install -r "
                  "tests/requirements.txt");
    ck_assert_msg(WEXITSTATUS(st) == 0, "%s failed (its FAIL line above says which check)", cmd);
}

START_TEST(anthropic_responses_and_predict_answer_as_their_apis)
{
    run_check("server_compat_check.py");
}
END_TEST

/* tests/server_thought_check.py: a thought read out of the answer as
 * reasoning_content, whole and streamed, with tools, grammars, Anthropic's
 * thinking blocks and the Responses API's reasoning items. */
START_TEST(a_thought_is_read_out_as_reasoning_content)
{
    run_check("server_thought_check.py");
}
END_TEST

Suite *suite_server_compat(void)
{
    Suite *s = suite_create("server_compat");
    TCase *tc = tcase_create("apis");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, anthropic_responses_and_predict_answer_as_their_apis);
    tcase_add_test(tc, a_thought_is_read_out_as_reasoning_content);
    suite_add_tcase(s, tc);
    return s;
}
