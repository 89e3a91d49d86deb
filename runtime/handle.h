/* The handles a host application holds (runtimes, models, sessions) are
 * checked on entry against a registry of the open ones, by address, so
 * that a handle used after it was closed — closed twice, or its session
 * used after its model went — is refused with HX_ERR_STATE instead of
 * reading freed memory.  The registry is the one process-wide table of
 * hetero: a handle's own memory cannot say whether it was freed.
 *
 * What it cannot see: once the allocator hands a closed handle's address
 * to a new handle of the same kind, the old pointer names the new object
 * (as a file descriptor number does once reused).  Internal. */
#ifndef HX_RUNTIME_HANDLE_H
#define HX_RUNTIME_HANDLE_H

#include <stddef.h>

#include "hetero.h"

typedef enum {
    HX_HANDLE_RUNTIME = 1,
    HX_HANDLE_MODEL = 2,
    HX_HANDLE_SESSION = 3,
} hx_handle_kind;

/* Records an open handle, the handle it belongs to (a model's runtime, a
 * session's model; NULL for a runtime) and a label for messages. */
hx_status hx_handle_add(const void *h, hx_handle_kind kind, const void *owner, const char *label);
/* Takes a handle out of the registry; HX_ERR_STATE (with `fn` in the
 * message) when it was not in it, so that of two closes one wins. */
hx_status hx_handle_remove(const void *h, hx_handle_kind kind, const char *fn);
/* HX_OK when `h` is an open handle of `kind`; HX_ERR_INVALID_ARG when NULL,
 * HX_ERR_STATE otherwise, the message naming `fn`. */
hx_status hx_handle_check(const void *h, hx_handle_kind kind, const char *fn);
/* hx_handle_check, then HX_ERR_INVALID_ARG when the call's output
 * pointer `out` is NULL: how most calls on a handle begin. */
hx_status hx_handle_check_call(const void *h, hx_handle_kind kind, const void *out, const char *fn);
/* The open handles of `kind` that belong to `owner`; the label of one of
 * them goes to `label` (cap bytes) when there is one. */
size_t hx_handle_owned(const void *owner, hx_handle_kind kind, char *label, size_t cap);

#endif
