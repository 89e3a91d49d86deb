/* The test runner: every suite of tests/test_*.c, one summary.
 * HX_TEST_SUITE=name runs only the suites whose name contains it. */
#include <stdio.h>
#include <string.h>

#include "tests/hx_test.h"

#define HX_SUITE(fn) Suite *fn(void);
#include "suites.inc"
#undef HX_SUITE

/* LeakSanitizer walks the dynamic TLS blocks it saw __tls_get_addr hand
 * out; with this glibc a forked test child that ran OpenCL (PoCL, LLVM)
 * can reach exit with a stale block in that list, and LSan's tracer then
 * dies on it ("Tracer caught signal 11") and the test fails for no fault
 * of its own.  Leaks are still found: only that bookkeeping is off.
 * Unused without the sanitizers. */
__attribute__((visibility("default"), used)) const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "intercept_tls_get_addr=0"; }

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
