#include <string.h>

#include "runtime/error.h"
#include "tests/hx_test.h"

START_TEST(status_names)
{
    ck_assert_str_eq(hx_status_str(HX_OK), "HX_OK");
    ck_assert_str_eq(hx_status_str(HX_ERR_FORMAT), "HX_ERR_FORMAT");
    ck_assert_str_eq(hx_status_str((hx_status)12345), "HX_ERR_UNKNOWN");
}
END_TEST

START_TEST(last_error_is_per_thread_message)
{
    hx_error_clear();
    ck_assert_str_eq(hx_last_error(), "");
    hx_status s = hx_error(HX_ERR_FORMAT, "tensor %s at offset %d", "blk.0.attn_q", 42);
    ck_assert_int_eq(s, HX_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "tensor blk.0.attn_q at offset 42"));
    hx_error_context(s, "loading %s", "m.gguf");
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "loading m.gguf: HX_ERR_FORMAT"));
}
END_TEST

Suite *suite_status(void)
{
    Suite *s = suite_create("status");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, status_names);
    tcase_add_test(tc, last_error_is_per_thread_message);
    suite_add_tcase(s, tc);
    return s;
}
