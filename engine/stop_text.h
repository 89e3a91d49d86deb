/* Stop strings over streamed text: the text is passed on as soon as it
 * cannot be the start of a stop string, and ends before the first stop
 * string it contains.  Internal (hx_session_generate). */
#ifndef HX_ENGINE_STOP_TEXT_H
#define HX_ENGINE_STOP_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "hetero.h"

typedef struct {
    const char *const *stop; /* the caller's strings, not copied */
    uint32_t n;
    char *held, *out;        /* text not yet passed on; what the last call passes on */
    size_t nheld, cap_held, cap_out;
} hx_stop_text;

/* HX_ERR_INVALID_ARG for a NULL or empty stop string (it would match
 * everywhere), or for n > 0 with a NULL array. */
hx_status hx_stop_text_init(hx_stop_text *t, const char *const *stop, uint32_t n);
void hx_stop_text_free(hx_stop_text *t);

/* Adds `len` bytes of text.  *out (NUL-terminated, valid until the next
 * call) gets the text now certain to pass on, *n_out its length, and
 * *matched the index of the stop string found (the text passed on ends
 * before it), or -1. */
hx_status hx_stop_text_push(hx_stop_text *t, const char *text, size_t len, const char **out, size_t *n_out,
                            int32_t *matched);
/* The text's last `len` bytes: passes on everything held up to the first
 * stop string, if any (*matched as in hx_stop_text_push). */
hx_status hx_stop_text_finish(hx_stop_text *t, const char *text, size_t len, const char **out, size_t *n_out,
                              int32_t *matched);

#endif
