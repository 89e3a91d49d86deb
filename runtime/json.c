/* hx_json_write_string: the one JSON string writer, for the trace here and
 * for the tools and benchmarks, which see only hetero.h. */
#include <stdio.h>

#include "hetero.h"
#include "runtime/error.h"

/* RFC 8259's minimum: the quote, the backslash and the control characters
 * escaped; every other byte, UTF-8 included, as it is. */
static hx_status write_string(FILE *f, const char *s)
{
    if (!f || !s)
        return hx_error(HX_ERR_INVALID_ARG, "hx_json_write_string: NULL %s", f ? "string" : "stream");
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
    return ferror(f) ? hx_error(HX_ERR_IO, "hx_json_write_string: the stream failed") : HX_OK;
}

hx_status hx_json_write_string(FILE *f, const char *s)
{
    hx_api_enter();
    return hx_api_leave(write_string(f, s));
}
