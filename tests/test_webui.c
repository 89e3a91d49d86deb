/* hetero-server's web page in a real headless Chromium
 * (tests/webui_check.py, over the DevTools protocol): the page asks for
 * the API key and shows a refused request's error, a typed message streams
 * its answer into the page, the live machine panel's counters move with the
 * work, Stop cancels, the page runs under its Content-Security-Policy, and
 * --no-webui turns it off.  Skipped without Chromium or SmolLM2 (failed
 * under CI, where tools/install-deps.sh installs Chromium). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "tests/hx_test.h"

START_TEST(the_web_page_in_headless_chromium)
{
    const char *model = hx_test_smollm2("the web page in Chromium");
    if (!model)
        return;
    char cmd[2048];
    ck_assert_int_lt(snprintf(cmd, sizeof cmd, "python3 tests/webui_check.py '%s' '%s'", hx_test_build_dir(), model),
                     (int)sizeof cmd);
    int st = system(cmd);
    ck_assert_msg(WIFEXITED(st), "%s did not exit", cmd);
    if (WEXITSTATUS(st) == 4) {
        const char *why = "no Chromium (sh tools/install-deps.sh installs it; HX_CHROMIUM names another)";
        ck_assert_msg(!getenv("CI"), "the web page in Chromium: %s", why);
        fprintf(stderr, "SKIPPED the web page in Chromium: %s\n", why);
        return;
    }
    ck_assert_msg(WEXITSTATUS(st) != 3, "python3 lacks websocket-client: pip install -r tests/requirements.txt");
    ck_assert_msg(WEXITSTATUS(st) == 0, "%s failed (its FAIL line above says which check)", cmd);
}
END_TEST

Suite *suite_webui(void)
{
    Suite *s = suite_create("webui");
    TCase *tc = tcase_create("chromium");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, the_web_page_in_headless_chromium);
    suite_add_tcase(s, tc);
    return s;
}
