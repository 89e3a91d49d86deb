/* hetero-server through the official openai Python client
 * (tests/server_check.py): every endpoint streamed and whole, greedy text
 * alone and among 16, 64 concurrent streams, the bad-input table, a client
 * leaving mid-stream, a slow reader, API keys, SIGTERM draining.  The
 * script starts its own servers on 127.0.0.1, on free ports. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "tests/hx_test.h"

START_TEST(the_openai_client_against_hetero_server)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "python3 tests/server_check.py %s", hx_test_build_dir());
    int st = system(cmd);
    ck_assert_msg(WIFEXITED(st), "%s did not exit", cmd);
    ck_assert_msg(WEXITSTATUS(st) != 3, "python3 lacks the openai package: pip install -r tests/requirements.txt");
    ck_assert_msg(WEXITSTATUS(st) == 0, "%s failed (its FAIL line above says which check)", cmd);
}
END_TEST

Suite *suite_server(void)
{
    Suite *s = suite_create("server");
    TCase *tc = tcase_create("openai");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, the_openai_client_against_hetero_server);
    suite_add_tcase(s, tc);
    return s;
}
