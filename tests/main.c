/* The test runner: every suite of tests/test_*.c, one summary.
 * HX_TEST_SUITE=name runs only the suites whose name contains it. */
#include <stdio.h>
#include <string.h>

#include "tests/hx_test.h"

#define HX_SUITE(fn) Suite *fn(void);
#include "suites.inc"
#undef HX_SUITE

int main(void)
{
    const char *only = getenv("HX_TEST_SUITE");
    SRunner *sr = NULL;
#define HX_SUITE(fn)                                     \
    if (!only || strstr(#fn, only)) {                    \
        if (!sr) sr = srunner_create(fn());              \
        else srunner_add_suite(sr, fn());                \
    }
#include "suites.inc"
#undef HX_SUITE
    if (!sr) {
        fprintf(stderr, "no suite matches HX_TEST_SUITE=%s\n", only ? only : "");
        return 1;
    }
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
