/* Code point classes and the UTF-8 conventions the tokenizer shares with
 * llama.cpp (lenient decoding: a bad byte becomes U+FFFD and decoding resumes
 * at the next byte, so token boundaries land where llama.cpp puts them). */
#ifndef HX_TEXT_UNICODE_H
#define HX_TEXT_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* Class bits of a code point: the general category's major class (one of
 * them, or UNDEFINED for unassigned code points) plus WHITESPACE (\s). */
enum {
    HX_UC_UNDEFINED = 1u << 0,
    HX_UC_NUMBER = 1u << 1,    /* \p{N} */
    HX_UC_LETTER = 1u << 2,    /* \p{L} */
    HX_UC_SEPARATOR = 1u << 3, /* \p{Z} */
    HX_UC_MARK = 1u << 4,      /* \p{M} */
    HX_UC_PUNCT = 1u << 5,     /* \p{P} */
    HX_UC_SYMBOL = 1u << 6,    /* \p{S} */
    HX_UC_CONTROL = 1u << 7,   /* \p{C} except unassigned */
    HX_UC_WHITESPACE = 1u << 8 /* the White_Space property */
};

#define HX_UNICODE_REPLACEMENT 0xFFFDu

/* Class bits of `cp`; code points past U+10FFFF are UNDEFINED. */
unsigned hx_unicode_flags(uint32_t cp);

/* Bytes of the sequence a lead byte announces, judged by its top four bits
 * alone (continuation and invalid bytes count as 1). */
size_t hx_unicode_seq_len(uint8_t lead);

/* The length of the longest prefix of s[0, n) that ends on a whole UTF-8
 * character: a streamed fragment of text never splits one. */
size_t hx_unicode_whole_prefix(const char *s, size_t n);

/* Decodes one code point from s[0..n), n > 0, storing the bytes consumed in
 * *used.  The lead byte fixes the length; continuation bytes must be
 * 10xxxxxx; overlong forms and surrogates pass unchecked.  Anything else
 * yields U+FFFD with *used = 1. */
uint32_t hx_unicode_decode(const uint8_t *s, size_t n, size_t *used);

/* Writes cp as UTF-8 into out (4 bytes room) and returns the length; code
 * points past U+10FFFF are written as U+FFFD. */
size_t hx_unicode_encode(uint32_t cp, uint8_t *out);

/* Strict UTF-8 (no overlong forms, surrogates or code points past
 * U+10FFFF), one character at s[0..n), n > 0.  Returns its length when it is
 * well formed; 0 when it is not, with *bad = the bytes of its maximal
 * ill-formed subpart (to be replaced by one U+FFFD); -1 when s is a proper
 * prefix of a character that more bytes could complete. */
int hx_unicode_check(const uint8_t *s, size_t n, size_t *bad);

/* Generated tables (text/unicode_data.c). */
extern const uint32_t hx_unicode_ranges[];
extern const size_t hx_unicode_nranges;
extern const char hx_unicode_version[];

#endif
