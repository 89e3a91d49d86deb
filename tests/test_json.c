/* hx_json_write_string: every byte survives a round trip through a plain
 * JSON string decoder, and no control byte reaches the output raw. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/hx_test.h"

/* The decoding half of RFC 8259 §7 for what the writer may emit: the
 * simple escapes and \u00XX. */
static size_t decode(const char *in, char *out)
{
    size_t o = 0;
    ck_assert_int_eq(*in++, '"');
    while (*in != '"') {
        ck_assert_msg(*in, "the string is not closed");
        if (*in != '\\') {
            out[o++] = *in++;
            continue;
        }
        in++;
        const char *simple = strchr("\"\\/bfnrtu", *in);
        ck_assert_msg(simple && *in, "bad escape \\%c", *in);
        if (*in == 'u') {
            unsigned v;
            ck_assert_int_eq(sscanf(in + 1, "%4x", &v), 1);
            ck_assert_uint_lt(v, 0x100);
            out[o++] = (char)v;
            in += 5;
            continue;
        }
        static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
        out[o++] = to[strchr(from, *in) - from];
        in++;
    }
    ck_assert_int_eq(in[1], '\0');
    return o;
}

START_TEST(every_byte_round_trips)
{
    char in[256];
    for (int i = 0; i < 255; i++)
        in[i] = (char)(i + 1);
    in[255] = '\0';
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    HX_ASSERT_OK(hx_json_write_string(f, in));
    fclose(f);
    for (size_t i = 0; i < len; i++)
        ck_assert_msg((unsigned char)text[i] >= 0x20, "raw control byte %#x at %zu", text[i], i);
    char out[256];
    size_t n = decode(text, out);
    ck_assert_uint_eq(n, 255);
    ck_assert_mem_eq(out, in, 255);
    free(text);
}
END_TEST

START_TEST(null_arguments_are_refused)
{
    ck_assert_int_eq(hx_json_write_string(NULL, "x"), HX_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "hx_json_write_string"));
    ck_assert_int_eq(hx_json_write_string(stdout, NULL), HX_ERR_INVALID_ARG);
}
END_TEST

Suite *suite_json(void)
{
    Suite *s = suite_create("json");
    TCase *tc = tcase_create("write_string");
    tcase_add_test(tc, every_byte_round_trips);
    tcase_add_test(tc, null_arguments_are_refused);
    suite_add_tcase(s, tc);
    return s;
}
