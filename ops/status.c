/* Status names and the per-thread last-error message. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ops/error.h"

#define HX_ERROR_MAX 1024

static _Thread_local char last_error[HX_ERROR_MAX];
static _Thread_local int api_depth; /* public calls in progress on this thread */

const char *hx_status_str(hx_status s)
{
    switch (s) {
#define HX_STATUS_CASE(name, value, msg) case name: return #name;
        HX_STATUS_LIST(HX_STATUS_CASE)
#undef HX_STATUS_CASE
    }
    return "HX_ERR_UNKNOWN";
}

static const char *status_message(hx_status s)
{
    switch (s) {
#define HX_STATUS_MSG(name, value, msg) case name: return msg;
        HX_STATUS_LIST(HX_STATUS_MSG)
#undef HX_STATUS_MSG
    }
    return "unknown status";
}

const char *hx_last_error(void) { return last_error; }

void hx_error_clear(void) { last_error[0] = '\0'; }

void hx_api_enter(void) { api_depth++; }

hx_status hx_api_leave(hx_status s)
{
    if (--api_depth == 0 && s == HX_OK)
        last_error[0] = '\0';
    return s;
}

hx_status hx_error(hx_status s, const char *fmt, ...)
{
    int n = snprintf(last_error, sizeof last_error, "%s (%s): ", hx_status_str(s), status_message(s));
    if (n < 0 || (size_t)n >= sizeof last_error)
        return s;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error + n, sizeof last_error - (size_t)n, fmt, ap);
    va_end(ap);
    return s;
}

hx_status hx_error_context(hx_status s, const char *fmt, ...)
{
    char prefix[HX_ERROR_MAX], old[HX_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof old);
    size_t n = strnlen(prefix, sizeof last_error - 3);
    memcpy(last_error, prefix, n);
    memcpy(last_error + n, ": ", 2);
    size_t room = sizeof last_error - n - 3;
    size_t m = strnlen(old, room);
    memcpy(last_error + n + 2, old, m);
    last_error[n + 2 + m] = '\0';
    return s;
}
