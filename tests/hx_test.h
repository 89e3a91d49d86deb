/* Shared helpers for the Check suites. */
#ifndef HX_TEST_H
#define HX_TEST_H

#include <check.h>
#include <stdlib.h>

#include "hetero.h"

/* Asserts a call returned HX_OK, printing hx_last_error() if not. */
#define HX_ASSERT_OK(call)                                                          \
    do {                                                                            \
        hx_status hx_s_ = (call);                                                   \
        ck_assert_msg(hx_s_ == HX_OK, "%s -> %s: %s", #call, hx_status_str(hx_s_), \
                      hx_last_error());                                             \
    } while (0)

/* Where ../shared/data is (HX_TEST_DATA), or NULL. */
static inline const char *hx_test_data_dir(void) { return getenv("HX_TEST_DATA"); }
/* The build directory holding the tools (HX_BUILD), default "build". */
static inline const char *hx_test_build_dir(void)
{
    const char *b = getenv("HX_BUILD");
    return b ? b : "build";
}

#endif
