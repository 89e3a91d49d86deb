/* docs/server-fields.md against hetero-server (tests/server_fields.py):
 * every llama-server request field is a row; each supported one is
 * accepted and each refused one is a 400 naming it. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "tests/hx_test.h"

START_TEST(every_field_of_the_table_is_as_it_says)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "python3 tests/server_fields.py %s", hx_test_build_dir());
    int st = system(cmd);
    ck_assert_msg(WIFEXITED(st), "%s did not exit", cmd);
    ck_assert_msg(WEXITSTATUS(st) != 3, "python3 lacks the openai package: pip install -r tests/requirements.txt");
    ck_assert_msg(WEXITSTATUS(st) == 0, "%s failed (its FAIL line above says which field)", cmd);
}
END_TEST

Suite *suite_server_fields(void)
{
    Suite *s = suite_create("server_fields");
    TCase *tc = tcase_create("table");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, every_field_of_the_table_is_as_it_says);
    suite_add_tcase(s, tc);
    return s;
}
