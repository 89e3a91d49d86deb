/* hetero-server where llama.cpp's server test suite found it answering
 * otherwise than llama-server (tests/server_parity_check.py): the stream's
 * first chunk, the assistant prefill, --host lists, ...  The script starts
 * its own servers on 127.0.0.1 and free ports, with SmolLM2 when
 * HX_TEST_SMOLLM2 names it, else the embedded model. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "tests/hx_test.h"

START_TEST(answers_as_llama_servers_own_tests_expect)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "python3 tests/server_parity_check.py %s", hx_test_build_dir());
    int st = system(cmd);
    ck_assert_msg(WIFEXITED(st), "%s did not exit", cmd);
    ck_assert_msg(WEXITSTATUS(st) == 0, "%s failed (its FAIL line above says which check)", cmd);
}
END_TEST

Suite *suite_server_parity(void)
{
    Suite *s = suite_create("server_parity");
    TCase *tc = tcase_create("parity");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, answers_as_llama_servers_own_tests_expect);
    suite_add_tcase(s, tc);
    return s;
}
