/* Code point classes (binary search over the generated ranges) and the
 * lenient UTF-8 coding the tokenizer uses. */
#include "text/unicode.h"

unsigned hx_unicode_flags(uint32_t cp)
{
    if (cp >= 0x110000u)
        return HX_UC_UNDEFINED;
    /* Last entry whose first code point is <= cp; entry 0 starts at 0. */
    size_t lo = 0, hi = hx_unicode_nranges;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if ((hx_unicode_ranges[mid] >> 9) <= cp)
            lo = mid;
        else
            hi = mid;
    }
    return hx_unicode_ranges[lo] & 0x1FFu;
}

size_t hx_unicode_seq_len(uint8_t lead)
{
    static const uint8_t len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[lead >> 4];
}

size_t hx_unicode_whole_prefix(const char *s, size_t n)
{
    size_t k = n;
    for (size_t back = 0; back < 4 && k > 0; back++) {
        unsigned char c = (unsigned char)s[k - 1];
        if (c < 0x80)
            return n;
        if ((c & 0xC0) == 0xC0) { /* a lead byte: is its character whole? */
            size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
            return n - (k - 1) >= need ? n : k - 1;
        }
        k--;
    }
    return n;
}

static int is_cont(uint8_t b) { return (b & 0xC0) == 0x80; }

uint32_t hx_unicode_decode(const uint8_t *s, size_t n, size_t *used)
{
    uint8_t b = s[0];
    *used = 1;
    if (b < 0x80)
        return b;
    size_t len;
    uint32_t cp;
    if ((b & 0xE0) == 0xC0) {
        len = 2;
        cp = b & 0x1Fu;
    } else if ((b & 0xF0) == 0xE0) {
        len = 3;
        cp = b & 0x0Fu;
    } else if ((b & 0xF8) == 0xF0) {
        len = 4;
        cp = b & 0x07u;
    } else {
        return HX_UNICODE_REPLACEMENT; /* continuation byte or 0xF8..0xFF */
    }
    if (len > n)
        return HX_UNICODE_REPLACEMENT;
    for (size_t i = 1; i < len; i++) {
        if (!is_cont(s[i]))
            return HX_UNICODE_REPLACEMENT;
        cp = (cp << 6) | (s[i] & 0x3Fu);
    }
    *used = len;
    return cp;
}

size_t hx_unicode_encode(uint32_t cp, uint8_t *out)
{
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp > 0x10FFFF)
        cp = HX_UNICODE_REPLACEMENT;
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

int hx_unicode_check(const uint8_t *s, size_t n, size_t *bad)
{
    uint8_t b = s[0];
    *bad = 1;
    if (b < 0x80)
        return 1;
    size_t need;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
        need = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
        need = 3;
        if (b == 0xE0)
            lo = 0xA0; /* overlong below */
        else if (b == 0xED)
            hi = 0x9F; /* surrogates above */
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 4;
        if (b == 0xF0)
            lo = 0x90;
        else if (b == 0xF4)
            hi = 0x8F; /* past U+10FFFF above */
    } else {
        return 0;
    }
    for (size_t i = 1; i < need; i++) {
        if (i >= n)
            return -1;
        if (s[i] < lo || s[i] > hi) {
            *bad = i;
            return 0;
        }
        lo = 0x80;
        hi = 0xBF;
    }
    return (int)need;
}
