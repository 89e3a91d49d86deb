/* Ids to text: each token's piece (llama.cpp's token_to_piece), whole
 * sequences (its detokenize, then made valid UTF-8) and the streaming
 * detokenizer that never splits a character. */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_impl.h"
#include "text/unicode.h"
#include "runtime/error.h"

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* "<0xXX>" -> XX, parsed like strtol(text + 3, 2 chars, 16). */
static size_t byte_piece(const char *s, size_t n, char *dst)
{
    int v = 0;
    for (size_t i = 3; i < 5 && i < n; i++) {
        int d = hex_digit(s[i]);
        if (d < 0)
            break;
        v = v * 16 + d;
    }
    dst[0] = (char)v;
    return 1;
}

size_t hx_tokenizer_piece(const hx_tokenizer *t, int32_t id, int special, int lstrip, char *dst)
{
    unsigned attr = t->attr[id];
    const char *s = t->blob + t->off[id];
    size_t n = t->len[id], w = 0;
    if (attr & (HX_TOKEN_ATTR_UNKNOWN | HX_TOKEN_ATTR_CONTROL | HX_TOKEN_ATTR_USER_DEFINED)) {
        if (!special && (attr & (HX_TOKEN_ATTR_UNKNOWN | HX_TOKEN_ATTR_CONTROL)))
            return 0;
        memcpy(dst, s, n);
        w = n;
    } else if (attr & HX_TOKEN_ATTR_NORMAL) {
        if (t->kind == HX_VOCAB_SPM) {
            for (size_t i = 0; i < n; i++) {
                if (i + 2 < n && memcmp(s + i, "\xE2\x96\x81", 3) == 0) {
                    dst[w++] = ' ';
                    i += 2;
                } else {
                    dst[w++] = s[i];
                }
            }
        } else {
            /* Back from the byte alphabet; a code point outside it (an added
             * token typed NORMAL) passes through as itself. */
            for (size_t i = 0; i < n;) {
                size_t used;
                uint32_t cp = hx_unicode_decode((const uint8_t *)s + i, n - i, &used);
                int b = hx_tokenizer_bpe_cp_byte(cp);
                if (b >= 0)
                    dst[w++] = (char)b;
                else
                    w += hx_unicode_encode(cp, (uint8_t *)dst + w);
                i += used;
            }
        }
    } else if (attr & HX_TOKEN_ATTR_BYTE) {
        if (t->kind == HX_VOCAB_SPM || (n == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>'))
            w = byte_piece(s, n, dst);
    }
    if (lstrip && w && dst[0] == ' ') {
        memmove(dst, dst + 1, w - 1);
        w--;
    }
    return w;
}

static hx_status put_out(const char *src, size_t n, char *buf, size_t cap, size_t *len,
                         const char *what)
{
    *len = n;
    if (n >= cap)
        return hx_error(HX_ERR_RANGE, "%s: %zu bytes and a NUL do not fit in %zu", what, n, cap);
    memcpy(buf, src, n);
    buf[n] = '\0';
    return HX_OK;
}

static hx_status token_to_piece(const hx_tokenizer *t, int32_t id, int special, char *buf,
                                size_t cap, size_t *len)
{
    if (!t || !len || (!buf && cap))
        return hx_error(HX_ERR_INVALID_ARG, "hx_tokenizer_token_to_piece: NULL argument");
    *len = 0;
    if (id < 0 || (uint32_t)id >= t->n)
        return hx_error(HX_ERR_INVALID_ARG, "hx_tokenizer_token_to_piece: token %d outside the "
                        "vocabulary of %u", id, t->n);
    char stackbuf[256];
    char *p = t->max_piece <= sizeof stackbuf ? stackbuf : malloc(t->max_piece);
    if (!p)
        return hx_error(HX_ERR_NO_MEMORY, "tokenizer: piece buffer");
    size_t n = hx_tokenizer_piece(t, id, special, 0, p);
    hx_status st = put_out(p, n, buf, cap, len, "hx_tokenizer_token_to_piece");
    if (p != stackbuf)
        free(p);
    return st;
}

hx_status hx_tokenizer_token_to_piece(const hx_tokenizer *t, int32_t id, int special, char *buf,
                                      size_t cap, size_t *len)
{
    hx_api_enter();
    return hx_api_leave(token_to_piece(t, id, special, buf, cap, len));
}

/* Rewrites s[0..n) as valid UTF-8 into out (room for 3n bytes, or NULL to
 * count): each maximal ill-formed subpart becomes one U+FFFD.  With
 * `final` unset a trailing incomplete character is left out and *kept says
 * how many bytes it has.  Returns the output length. */
static size_t sanitize(const uint8_t *s, size_t n, int final, uint8_t *out, size_t *kept)
{
    static const uint8_t fffd[3] = {0xEF, 0xBF, 0xBD};
    size_t w = 0, i = 0;
    *kept = 0;
    while (i < n) {
        size_t bad;
        int r = hx_unicode_check(s + i, n - i, &bad);
        if (r > 0) {
            if (out)
                memcpy(out + w, s + i, (size_t)r);
            w += (size_t)r;
            i += (size_t)r;
        } else if (r < 0 && !final) {
            *kept = n - i;
            break;
        } else {
            if (out)
                memcpy(out + w, fffd, 3);
            w += 3;
            i += r < 0 ? n - i : bad;
        }
    }
    return w;
}

/* llama.cpp's clean_up_tokenization_spaces passes, in place. */
static size_t clean_spaces(char *text, size_t total)
{
    size_t n1 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < n1; i++) {
        char x = text[i];
        if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ','))
            total--; /* " ?" -> "?" */
        text[total++] = x;
    }
    size_t n2 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < n2; i++) {
        char x = text[i];
        if (x == '\'' && i + 1 < n2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
            total--;       /* " ' " -> "'" */
            text[++i] = 0; /* ...and the space after it is skipped */
        }
        text[total++] = x;
    }
    size_t n3 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < n3; i++) {
        char x = text[i];
        if (text[i - 1] == ' ' && x == '\'' && i + 1 < n3) {
            char x1 = text[i + 1];
            if (x1 == 's' || x1 == 'm')
                total--; /* " 's" " 'm" */
            else if (i + 2 < n3 && ((x1 == 'r' && text[i + 2] == 'e') ||
                                    (x1 == 'v' && text[i + 2] == 'e')))
                total--; /* " 're" " 've" */
        }
        text[total++] = x;
    }
    return total;
}

static hx_status decode_ids(const hx_tokenizer *t, const int32_t *ids, size_t n_ids,
                            int remove_special, int unparse_special, char *buf, size_t cap,
                            size_t *len)
{
    if (!t || !len || (!ids && n_ids) || (!buf && cap))
        return hx_error(HX_ERR_INVALID_ARG, "hx_tokenizer_decode: NULL argument");
    *len = 0;
    for (size_t i = 0; i < n_ids; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= t->n)
            return hx_error(HX_ERR_INVALID_ARG, "hx_tokenizer_decode: token %d (at %zu) outside "
                            "the vocabulary of %u", ids[i], i, t->n);
    int strip = t->add_space_prefix;
    if (remove_special && t->add_bos && n_ids && ids[0] == t->bos) {
        strip = 0; /* llama.cpp keeps the space after a BOS it removes */
        ids++;
        n_ids--;
    }
    if (remove_special && t->add_eos && n_ids && ids[n_ids - 1] == t->eos)
        n_ids--;
    if (n_ids > SIZE_MAX / 4 / t->max_piece)
        return hx_error(HX_ERR_RANGE, "hx_tokenizer_decode: %zu tokens", n_ids);
    char *raw = malloc(n_ids * t->max_piece + 1);
    if (!raw)
        return hx_error(HX_ERR_NO_MEMORY, "hx_tokenizer_decode: %zu tokens", n_ids);
    size_t w = 0;
    for (size_t i = 0; i < n_ids; i++) {
        w += hx_tokenizer_piece(t, ids[i], unparse_special, strip, raw + w);
        strip = 0;
    }
    if (t->clean_spaces)
        w = clean_spaces(raw, w);
    size_t kept;
    size_t need = sanitize((const uint8_t *)raw, w, 1, NULL, &kept);
    hx_status st;
    *len = need;
    if (need >= cap) {
        st = hx_error(HX_ERR_RANGE, "hx_tokenizer_decode: %zu bytes and a NUL do not fit in %zu",
                      need, cap);
    } else {
        sanitize((const uint8_t *)raw, w, 1, (uint8_t *)buf, &kept);
        buf[need] = '\0';
        st = HX_OK;
    }
    free(raw);
    return st;
}

hx_status hx_tokenizer_decode(const hx_tokenizer *t, const int32_t *ids, size_t n_ids,
                              int remove_special, int unparse_special, char *buf, size_t cap,
                              size_t *len)
{
    hx_api_enter();
    return hx_api_leave(decode_ids(t, ids, n_ids, remove_special, unparse_special, buf, cap, len));
}

size_t hx_detok_max_out(const hx_tokenizer *t)
{
    /* Held bytes plus a piece, each byte at worst a U+FFFD. */
    return t ? 3 * ((size_t)t->max_piece + sizeof((hx_detok *)0)->held) : 0;
}

void hx_detok_init(hx_detok *d, const hx_tokenizer *t, int special)
{
    memset(d, 0, sizeof *d);
    d->tok = t;
    d->special = special;
    d->first = 1;
}

/* Runs held bytes + new bytes through the sanitizer; writes only if the
 * result fits, then keeps the incomplete tail for next time. */
static hx_status flush(hx_detok *d, const char *piece, size_t pn, int final, char *out,
                       size_t cap, size_t *n)
{
    size_t total = d->nheld + pn;
    uint8_t stackbuf[512];
    uint8_t *s = total <= sizeof stackbuf ? stackbuf : malloc(total);
    if (!s)
        return hx_error(HX_ERR_NO_MEMORY, "hx_detok: %zu bytes", total);
    memcpy(s, d->held, d->nheld);
    memcpy(s + d->nheld, piece, pn);
    size_t kept;
    size_t need = sanitize(s, total, final, NULL, &kept);
    hx_status st = HX_OK;
    *n = need;
    if (need > cap) {
        st = hx_error(HX_ERR_RANGE, "hx_detok: %zu bytes do not fit in %zu", need, cap);
    } else {
        if (need)
            sanitize(s, total, final, (uint8_t *)out, &kept);
        /* An incomplete character is at most 3 bytes. */
        memmove(d->held, s + total - kept, kept);
        d->nheld = kept;
    }
    if (s != stackbuf)
        free(s);
    return st;
}

hx_status hx_detok_push(hx_detok *d, int32_t id, char *out, size_t cap, size_t *n)
{
    if (!d || !d->tok || !n || (!out && cap))
        return hx_error(HX_ERR_INVALID_ARG, "hx_detok_push: NULL argument");
    *n = 0;
    const hx_tokenizer *t = d->tok;
    if (id < 0 || (uint32_t)id >= t->n)
        return hx_error(HX_ERR_INVALID_ARG, "hx_detok_push: token %d outside the vocabulary of %u",
                        id, t->n);
    char stackbuf[256];
    char *p = t->max_piece <= sizeof stackbuf ? stackbuf : malloc(t->max_piece);
    if (!p)
        return hx_error(HX_ERR_NO_MEMORY, "hx_detok: piece buffer");
    size_t pn = hx_tokenizer_piece(t, id, d->special, d->first && t->add_space_prefix, p);
    hx_status st = flush(d, p, pn, 0, out, cap, n);
    if (st == HX_OK)
        d->first = 0;
    if (p != stackbuf)
        free(p);
    return st;
}

hx_status hx_detok_finish(hx_detok *d, char *out, size_t cap, size_t *n)
{
    if (!d || !d->tok || !n || (!out && cap))
        return hx_error(HX_ERR_INVALID_ARG, "hx_detok_finish: NULL argument");
    *n = 0;
    hx_status st = flush(d, "", 0, 1, out, cap, n);
    if (st == HX_OK) {
        d->nheld = 0;
        d->first = 1;
    }
    return st;
}
