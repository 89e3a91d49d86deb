/* hetero-server's llama-server endpoints (tests/server_native_check.py):
 * /completion whole and streamed, /props, /slots, /apply-template,
 * /models, /tokenize and /detokenize, CORS, API keys on every route but
 * /health, llama-server's error types, and its flags.  The script starts
 * its own servers on 127.0.0.1 and free ports, with SmolLM2 when
 * HX_TEST_SMOLLM2 names it (its vocabulary's special tokens), else the
 * embedded model. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "tests/hx_test.h"

START_TEST(llama_server_endpoints_answer_as_llama_server)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "python3 tests/server_native_check.py %s", hx_test_build_dir());
    int st = system(cmd);
    ck_assert_msg(WIFEXITED(st), "%s did not exit", cmd);
    ck_assert_msg(WEXITSTATUS(st) == 0, "%s failed (its FAIL line above says which check)", cmd);
}
END_TEST

Suite *suite_server_native(void)
{
    Suite *s = suite_create("server_native");
    TCase *tc = tcase_create("endpoints");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, llama_server_endpoints_answer_as_llama_server);
    suite_add_tcase(s, tc);
    return s;
}
