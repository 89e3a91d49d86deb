/* Stop strings over streamed text.  A stop string may arrive split over
 * several tokens, so the end of the text that could still grow into one
 * is held back until the next piece settles it. */
#include <stdlib.h>
#include <string.h>

#include "engine/stop_text.h"
#include "runtime/error.h"

hx_status hx_stop_text_init(hx_stop_text *t, const char *const *stop, uint32_t n)
{
    memset(t, 0, sizeof *t);
    if (n && !stop)
        return hx_error(HX_ERR_INVALID_ARG, "stop strings: %u announced, none given", n);
    for (uint32_t i = 0; i < n; i++)
        if (!stop[i] || !*stop[i])
            return hx_error(HX_ERR_INVALID_ARG, "stop string %u is %s", i, stop[i] ? "empty" : "NULL");
    t->stop = stop;
    t->n = n;
    return HX_OK;
}

void hx_stop_text_free(hx_stop_text *t)
{
    free(t->held);
    free(t->out);
    memset(t, 0, sizeof *t);
}

static hx_status grow(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return HX_OK;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    char *b = realloc(*buf, c);
    if (!b)
        return hx_error(HX_ERR_NO_MEMORY, "stop strings: %zu bytes of text", need);
    *buf = b;
    *cap = c;
    return HX_OK;
}

/* Moves the first n held bytes to t->out. */
static hx_status pass_on(hx_stop_text *t, size_t n, const char **out, size_t *n_out)
{
    hx_status s = grow(&t->out, &t->cap_out, n + 1);
    if (s)
        return s;
    if (n) /* nothing held yet: held may still be NULL */
        memcpy(t->out, t->held, n);
    t->out[n] = '\0';
    if (t->nheld > n)
        memmove(t->held, t->held + n, t->nheld - n);
    t->nheld -= n;
    *out = t->out;
    *n_out = n;
    return HX_OK;
}

/* The longest end of the held text that begins some stop string. */
static size_t partial_match(const hx_stop_text *t)
{
    size_t best = 0;
    for (uint32_t i = 0; i < t->n; i++) {
        size_t L = strlen(t->stop[i]);
        size_t k = L - 1 < t->nheld ? L - 1 : t->nheld;
        for (; k > best; k--)
            if (!memcmp(t->held + t->nheld - k, t->stop[i], k)) {
                best = k;
                break;
            }
    }
    return best;
}

/* Appends text to what is held; returns where the first stop string in
 * it begins (nheld if none) and its index in *matched (-1 if none). */
static hx_status append(hx_stop_text *t, const char *text, size_t len, size_t *first, int32_t *matched)
{
    *matched = -1;
    hx_status s = grow(&t->held, &t->cap_held, t->nheld + len);
    if (s)
        return s;
    if (len)
        memcpy(t->held + t->nheld, text, len);
    t->nheld += len;
    *first = t->nheld;
    if (!t->nheld)
        return HX_OK; /* nothing held yet: memmem must not see a NULL buffer */
    for (uint32_t i = 0; i < t->n; i++) {
        const char *at = memmem(t->held, t->nheld, t->stop[i], strlen(t->stop[i]));
        if (at && (size_t)(at - t->held) < *first) {
            *first = (size_t)(at - t->held);
            *matched = (int32_t)i;
        }
    }
    return HX_OK;
}

hx_status hx_stop_text_push(hx_stop_text *t, const char *text, size_t len, const char **out, size_t *n_out,
                            int32_t *matched)
{
    size_t first;
    hx_status s = append(t, text, len, &first, matched);
    if (s == HX_OK && *matched >= 0) {
        s = pass_on(t, first, out, n_out);
        t->nheld = 0; /* the stop string and what followed it are dropped */
        return s;
    }
    return s ? s : pass_on(t, t->nheld - partial_match(t), out, n_out);
}

hx_status hx_stop_text_finish(hx_stop_text *t, const char *text, size_t len, const char **out, size_t *n_out,
                              int32_t *matched)
{
    size_t first;
    hx_status s = append(t, text, len, &first, matched);
    if (s == HX_OK)
        s = pass_on(t, first, out, n_out);
    t->nheld = 0;
    return s;
}
