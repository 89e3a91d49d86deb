/* Pre-tokenizers: the regexes byte-level BPE vocabularies split text with
 * before merging, written as hand matchers that reproduce llama.cpp's
 * results (its own matchers for the GPT-2 and LLaMA-3 patterns, std::regex
 * for the rest).  Each stage refines the previous stage's pieces and never
 * matches across their borders; a stage given as a regex keeps the text
 * between two matches as one piece, as llama.cpp's regex split does. */
#include <stdlib.h>

#include "text/tokenizer_impl.h"
#include "text/unicode.h"
#include "runtime/error.h"

#define OUT_OF_RANGE 0xFFFFFFFFu
#define WS HX_UC_WHITESPACE
#define LET HX_UC_LETTER
#define NUM HX_UC_NUMBER

typedef struct {
    uint32_t *v;
    size_t n, cap;
    int oom;
} pieces;

static void put(pieces *p, size_t len)
{
    if (!len || p->oom)
        return;
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        uint32_t *v = realloc(p->v, cap * sizeof *v);
        if (!v) {
            p->oom = 1;
            return;
        }
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n++] = (uint32_t)len;
}

/* The text being split: code points and their class bits. */
typedef struct {
    const uint32_t *cp;
    const uint16_t *fl;
    size_t ini, end; /* the piece being split */
    size_t prev;     /* where the pending word starts */
    pieces *out;
} span;

static uint32_t cpt(const span *s, size_t p) { return p >= s->ini && p < s->end ? s->cp[p] : OUT_OF_RANGE; }
static unsigned flg(const span *s, size_t p) { return p >= s->ini && p < s->end ? s->fl[p] : 0; }

static size_t cut(span *s, size_t end)
{
    size_t len = end - s->prev;
    put(s->out, len);
    s->prev = end;
    return len;
}

static uint32_t lower_ascii(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* 's|'t|'re|'ve|'m|'ll|'d, optionally ignoring case: the length, or 0. */
static size_t contraction(const span *s, size_t pos, int fold)
{
    if (cpt(s, pos) != '\'' || pos + 1 >= s->end)
        return 0;
    uint32_t a = cpt(s, pos + 1);
    if (fold)
        a = lower_ascii(a);
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
        return 2;
    if (pos + 2 >= s->end)
        return 0;
    uint32_t b = cpt(s, pos + 2);
    if (fold)
        b = lower_ascii(b);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
        return 3;
    return 0;
}

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static void gpt2(span *s)
{
    for (size_t pos = s->ini; pos < s->end;) {
        uint32_t c = cpt(s, pos);
        unsigned f = flg(s, pos);
        size_t k = contraction(s, pos, 0);
        if (k) {
            pos += cut(s, pos + k);
            continue;
        }
        unsigned f2 = c == ' ' ? flg(s, pos + 1) : f;
        if (f2 & LET) {
            pos += c == ' ';
            while (f2 & LET)
                f2 = flg(s, ++pos);
            cut(s, pos);
            continue;
        }
        if (f2 & NUM) {
            pos += c == ' ';
            while (f2 & NUM)
                f2 = flg(s, ++pos);
            cut(s, pos);
            continue;
        }
        if (!(f2 & (WS | LET | NUM)) && f2) {
            pos += c == ' ';
            while (!(f2 & (WS | LET | NUM)) && f2)
                f2 = flg(s, ++pos);
            cut(s, pos);
            continue;
        }
        size_t nws = 0;
        while (flg(s, pos + nws) & WS)
            nws++;
        if (nws > 1 && cpt(s, pos + nws) != OUT_OF_RANGE) {
            pos += nws - 1; /* leave the last space to the word after it */
            cut(s, pos);
            continue;
        }
        if (nws > 0) {
            pos += nws;
            cut(s, pos);
            continue;
        }
        cut(s, ++pos);
    }
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}|
 *  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+   (LLaMA 3: D = 3,
 * Qwen 2: D = 1, where llama.cpp runs the same pattern through std::regex) */
static void llama3(span *s, size_t max_digits)
{
    for (size_t pos = s->ini; pos < s->end;) {
        uint32_t c = cpt(s, pos);
        unsigned f = flg(s, pos);
        size_t k = contraction(s, pos, 1);
        if (k) {
            pos += cut(s, pos + k);
            continue;
        }
        if (!(c == '\r' || c == '\n' || (f & NUM)) && ((f & LET) || (flg(s, pos + 1) & LET))) {
            pos++;
            while (flg(s, pos) & LET)
                pos++;
            cut(s, pos);
            continue;
        }
        if (f & NUM) {
            size_t start = pos;
            while (flg(s, pos) & NUM) {
                if (++pos - start >= max_digits) {
                    cut(s, pos);
                    start = pos;
                }
            }
            cut(s, pos);
            continue;
        }
        unsigned f2 = c == ' ' ? flg(s, pos + 1) : f;
        if (!(f2 & (WS | LET | NUM)) && f) {
            pos += c == ' ';
            while (!(f2 & (WS | LET | NUM)) && f2)
                f2 = flg(s, ++pos);
            for (uint32_t c2 = cpt(s, pos); c2 == '\r' || c2 == '\n'; c2 = cpt(s, ++pos))
                ;
            cut(s, pos);
            continue;
        }
        size_t nws = 0, last_newline_end = 0;
        while (flg(s, pos + nws) & WS) {
            uint32_t c2 = cpt(s, pos + nws);
            if (c2 == '\r' || c2 == '\n')
                last_newline_end = pos + nws + 1;
            nws++;
        }
        if (last_newline_end) {
            pos = last_newline_end;
            cut(s, pos);
            continue;
        }
        if (nws > 1 && cpt(s, pos + nws) != OUT_OF_RANGE) {
            pos += nws - 1;
            cut(s, pos);
            continue;
        }
        if (nws > 0) {
            pos += nws;
            cut(s, pos);
            continue;
        }
        cut(s, ++pos);
    }
}

/* Single-pattern regexes: the length of the match at pos, or 0. */
typedef size_t (*matcher)(const span *s, size_t pos);

static int punct_or(const span *s, size_t pos, const char *extra)
{
    uint32_t c = cpt(s, pos);
    if (flg(s, pos) & HX_UC_PUNCT)
        return 1;
    for (; *extra; extra++)
        if (c == (uint8_t)*extra)
            return 1;
    return 0;
}

/* [\p{P}\$\+<=>\^~\|]+ */
static size_t m_punct(const span *s, size_t pos)
{
    size_t n = 0;
    while (pos + n < s->end && punct_or(s, pos + n, "$+<=>^~|"))
        n++;
    return n;
}

/* [\p{P}\$\+<=>\^~\|`]+ */
static size_t m_punct_tick(const span *s, size_t pos)
{
    size_t n = 0;
    while (pos + n < s->end && punct_or(s, pos + n, "$+<=>^~|`"))
        n++;
    return n;
}

/* \p{N}+ */
static size_t m_digits(const span *s, size_t pos)
{
    size_t n = 0;
    while (flg(s, pos + n) & NUM)
        n++;
    return n;
}

/* \p{N} */
static size_t m_digit(const span *s, size_t pos) { return (flg(s, pos) & NUM) ? 1 : 0; }

/* [0-9][0-9][0-9] */
static size_t m_digits3(const span *s, size_t pos)
{
    for (size_t i = 0; i < 3; i++) {
        uint32_t c = cpt(s, pos + i);
        if (c < '0' || c > '9')
            return 0;
    }
    return 3;
}

typedef enum { ST_GPT2, ST_LLAMA3, ST_QWEN2, ST_MATCH } stage_kind;

typedef struct {
    stage_kind kind;
    matcher m;
} stage;

static void run_stage(const stage *st, const uint32_t *cp, const uint16_t *fl,
                      const pieces *in, pieces *out)
{
    size_t start = 0;
    for (size_t i = 0; i < in->n && !out->oom; i++) {
        span s = {cp, fl, start, start + in->v[i], start, out};
        start = s.end;
        switch (st->kind) {
        case ST_GPT2: gpt2(&s); break;
        case ST_LLAMA3: llama3(&s, 3); break;
        case ST_QWEN2: llama3(&s, 1); break;
        case ST_MATCH:
            for (size_t pos = s.ini; pos < s.end;) {
                size_t m = st->m(&s, pos);
                if (!m) {
                    pos++;
                    continue;
                }
                cut(&s, pos); /* the text since the last match */
                pos += m;
                cut(&s, pos);
            }
            cut(&s, s.end);
            break;
        }
    }
}

hx_status hx_tokenizer_pre_split(hx_pre_kind kind, const uint32_t *cps, size_t n,
                                 uint32_t **words, size_t *nwords)
{
    static const stage s_default[] = {{ST_MATCH, m_punct}, {ST_GPT2, NULL},
                                      {ST_MATCH, m_digits}, {ST_MATCH, m_digits3}};
    static const stage s_gpt2[] = {{ST_GPT2, NULL}};
    static const stage s_llama3[] = {{ST_LLAMA3, NULL}};
    static const stage s_qwen2[] = {{ST_QWEN2, NULL}};
    static const stage s_starcoder[] = {{ST_MATCH, m_digit}, {ST_GPT2, NULL}};
    static const stage s_falcon[] = {{ST_MATCH, m_punct_tick}, {ST_GPT2, NULL},
                                     {ST_MATCH, m_digits3}};
    const stage *stages;
    size_t nst;
#define USE(a) (stages = (a), nst = sizeof(a) / sizeof *(a))
    switch (kind) {
    case HX_PRE_GPT2: USE(s_gpt2); break;
    case HX_PRE_LLAMA3: USE(s_llama3); break;
    case HX_PRE_QWEN2: USE(s_qwen2); break;
    case HX_PRE_STARCODER: USE(s_starcoder); break;
    case HX_PRE_FALCON: USE(s_falcon); break;
    default: USE(s_default); break;
    }
#undef USE
    *words = NULL;
    *nwords = 0;
    if (n == 0)
        return HX_OK;
    if (n > UINT32_MAX)
        return hx_error(HX_ERR_RANGE, "tokenizer: %zu code points in one piece of text", n);
    uint16_t *fl = malloc(n * sizeof *fl);
    pieces a = {NULL, 0, 0, 0}, b = {NULL, 0, 0, 0};
    if (!fl)
        return hx_error(HX_ERR_NO_MEMORY, "tokenizer: %zu code points", n);
    for (size_t i = 0; i < n; i++)
        fl[i] = (uint16_t)hx_unicode_flags(cps[i]);
    put(&a, n);
    for (size_t i = 0; i < nst && !a.oom; i++) {
        b.n = 0;
        run_stage(&stages[i], cps, fl, &a, &b);
        pieces tmp = a;
        a = b;
        b = tmp;
        a.oom |= b.oom;
    }
    free(fl);
    free(b.v);
    if (a.oom) {
        free(a.v);
        return hx_error(HX_ERR_NO_MEMORY, "tokenizer: pre-tokenizer pieces");
    }
    *words = a.v;
    *nwords = a.n;
    return HX_OK;
}
