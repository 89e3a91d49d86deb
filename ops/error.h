/* Internal error reporting: set the thread's last error and return a status.
 * The one channel behind hx_last_error(), shared by every room from the
 * kernels up (ops/status.c); the runtime's runtime/error.h names it too. */
#ifndef HX_OPS_ERROR_H
#define HX_OPS_ERROR_H

#include "hetero.h"

#if defined(__GNUC__)
#define HX_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define HX_PRINTF(a, b)
#endif

/* Records "STATUS_NAME: message" as the calling thread's last error and
 * returns `s`, so callers can write `return hx_error(HX_ERR_FORMAT, ...)`. */
hx_status hx_error(hx_status s, const char *fmt, ...) HX_PRINTF(2, 3);
/* Prepends context ("while loading x.gguf: ") to the current last error. */
hx_status hx_error_context(hx_status s, const char *fmt, ...) HX_PRINTF(2, 3);
void hx_error_clear(void);

/* Every public function that returns hx_status runs between these two:
 *     hx_api_enter();  ...  return hx_api_leave(s);
 * so that a call returning HX_OK leaves hx_last_error() empty (hetero.h),
 * whatever lookups failed and were tolerated inside it.  Only the
 * outermost call clears: a public function the library calls itself (the
 * wait inside an evaluation, a close on a failure path) must not wipe the
 * detail its caller is about to return. */
void hx_api_enter(void);
hx_status hx_api_leave(hx_status s);

#endif
