/* Shared helpers for the Check suites. */
#ifndef HX_TEST_H
#define HX_TEST_H

#include <check.h>
#include <stdio.h>
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

/* A fresh directory /tmp/hx-TAG-XXXXXX in buf, and its removal. */
static inline void hx_test_tmpdir(char *buf, size_t cap, const char *tag)
{
    ck_assert_int_lt(snprintf(buf, cap, "/tmp/hx-%s-XXXXXX", tag), (int)cap);
    ck_assert_ptr_nonnull(mkdtemp(buf));
}

static inline void hx_test_rmdir(const char *dir)
{
    char cmd[512];
    ck_assert_int_lt(snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir), (int)sizeof cmd);
    ck_assert_int_eq(system(cmd), 0);
}

#endif
