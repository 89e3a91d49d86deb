/* The Python package (python/) through its pytest suite, against this
 * build's libhetero.so: its declarations against hetero.h, logits and
 * greedy text against hetero-run, llama-cpp-python's API, streams,
 * threads and asyncio, every error path, 1,000 model/session cycles.
 * pytest comes from tests/requirements.txt (make test's venv); its exit
 * code 5 (no tests collected) fails here like any other. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "tests/hx_test.h"

#if defined(__SANITIZE_ADDRESS__)
#define HX_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HX_ASAN 1
#endif
#endif

START_TEST(the_pytest_suite_of_the_python_package)
{
#ifdef HX_ASAN
    /* An instrumented libhetero.so cannot load into a python3 that was not
     * started with the sanitizer's runtime. */
    fprintf(stderr, "SKIPPED the Python package's tests: this build is instrumented (make asan)\n");
    return;
#endif
    char cmd[1024];
    ck_assert_int_lt(snprintf(cmd, sizeof cmd,
                              "python3 -c 'import pytest, numpy' 2>/dev/null || exit 3; "
                              "HETERO_LIBRARY='%s/libhetero.so' python3 -m pytest -q -p no:cacheprovider python/tests",
                              hx_test_build_dir()),
                     (int)sizeof cmd);
    if (!hx_test_smollm2("the Python package's SmolLM2 tests"))
        fprintf(stderr, "(pytest skips them too)\n");
    int st = system(cmd);
    ck_assert_msg(WIFEXITED(st), "%s did not exit", cmd);
    ck_assert_msg(WEXITSTATUS(st) != 3, "python3 lacks pytest or numpy: pip install -r tests/requirements.txt");
    ck_assert_msg(WEXITSTATUS(st) != 5, "pytest collected no tests from python/tests");
    ck_assert_msg(WEXITSTATUS(st) == 0, "the Python package's tests failed (pytest's report above), exit %d",
                  WEXITSTATUS(st));
}
END_TEST

Suite *suite_python(void)
{
    Suite *s = suite_create("python");
    TCase *tc = tcase_create("pytest");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, the_pytest_suite_of_the_python_package);
    suite_add_tcase(s, tc);
    return s;
}
