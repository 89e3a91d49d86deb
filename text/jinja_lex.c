/* The Jinja lexer: source text into tokens, as jinja2's lexer splits it
 * with trim_blocks and lstrip_blocks set (apply_chat_template's settings):
 * newlines normalized to "\n" and one trailing newline dropped; "{%-"
 * strips the whitespace before a tag, "-%}" the whitespace after it; a
 * block or comment tag alone on its line takes the line's indentation
 * (unless "{%+") and, at its end, the newline after it. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja_impl.h"

typedef struct {
    jarena *a;
    const char *s;
    size_t n, pos;
    int line;
    jtok *v;
    size_t len, cap;
    char *msg;
    size_t msg_cap;
    int failed;
} lexer;

static int fail(lexer *L, const char *fmt, const char *detail)
{
    if (!L->failed)
        snprintf(L->msg, L->msg_cap, "line %d: %s%s", L->line, fmt, detail ? detail : "");
    L->failed = 1;
    return 0;
}

static jtok *emit(lexer *L, int kind)
{
    if (L->len == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        jtok *v = ja_alloc(L->a, cap * sizeof *v);
        if (!v)
            return fail(L, "the template is too large", NULL), NULL;
        if (L->len)
            memcpy(v, L->v, L->len * sizeof *v);
        L->v = v, L->cap = cap;
    }
    jtok *t = &L->v[L->len++];
    memset(t, 0, sizeof *t);
    t->kind = (uint8_t)kind;
    t->line = L->line;
    return t;
}

static char *copy(lexer *L, const char *s, size_t n)
{
    char *c = ja_alloc(L->a, n + 1);
    if (!c)
        return fail(L, "the template is too large", NULL), NULL;
    memcpy(c, s, n);
    c[n] = '\0';
    return c;
}

static void advance(lexer *L, size_t to)
{
    for (; L->pos < to; L->pos++)
        if (L->s[L->pos] == '\n')
            L->line++;
}

static void put_utf8(char *o, size_t *k, uint32_t c)
{
    if (c < 0x80) {
        o[(*k)++] = (char)c;
    } else if (c < 0x800) {
        o[(*k)++] = (char)(0xC0 | c >> 6);
        o[(*k)++] = (char)(0x80 | (c & 63));
    } else if (c < 0x10000) {
        o[(*k)++] = (char)(0xE0 | c >> 12);
        o[(*k)++] = (char)(0x80 | (c >> 6 & 63));
        o[(*k)++] = (char)(0x80 | (c & 63));
    } else {
        o[(*k)++] = (char)(0xF0 | c >> 18);
        o[(*k)++] = (char)(0x80 | (c >> 12 & 63));
        o[(*k)++] = (char)(0x80 | (c >> 6 & 63));
        o[(*k)++] = (char)(0x80 | (c & 63));
    }
}

static int hexval(const char *p, int n, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < n; i++) {
        int c = (unsigned char)p[i];
        if (!isxdigit(c))
            return 0;
        v = v * 16 + (uint32_t)(isdigit(c) ? c - '0' : (tolower(c) - 'a' + 10));
    }
    *out = v;
    return 1;
}

/* A string literal from s[0] (the quote) as Python's unicode-escape reads
 * it, which jinja2 applies; an escape Python does not know stays as written. */
static int lex_string(lexer *L)
{
    const char *s = L->s + L->pos;
    char q = s[0];
    size_t i = 1, end;
    for (end = 1; L->pos + end < L->n && s[end] != q; end++)
        if (s[end] == '\\' && L->pos + end + 1 < L->n)
            end++;
    if (L->pos + end >= L->n)
        return fail(L, "a string that is not closed", NULL);
    char *o = ja_alloc(L->a, end * 4 + 1);
    if (!o)
        return fail(L, "the template is too large", NULL);
    size_t k = 0;
    while (i < end) {
        if (s[i] != '\\') {
            o[k++] = s[i++];
            continue;
        }
        char e = s[i + 1];
        uint32_t c;
        i += 2;
        switch (e) {
        case 'n': o[k++] = '\n'; break;
        case 't': o[k++] = '\t'; break;
        case 'r': o[k++] = '\r'; break;
        case '\\': o[k++] = '\\'; break;
        case '\'': o[k++] = '\''; break;
        case '"': o[k++] = '"'; break;
        case 'a': o[k++] = '\a'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'v': o[k++] = '\v'; break;
        case '\n': break;
        case 'x':
        case 'u':
        case 'U': {
            int w = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            if (i + (size_t)w > end || !hexval(s + i, w, &c) || c > 0x10FFFF)
                return fail(L, "a malformed \\x, \\u or \\U escape in a string", NULL);
            put_utf8(o, &k, c);
            i += (size_t)w;
            break;
        }
        default:
            if (e >= '0' && e <= '7') {
                c = (uint32_t)(e - '0');
                for (int d = 0; d < 2 && i < end && s[i] >= '0' && s[i] <= '7'; d++)
                    c = c * 8 + (uint32_t)(s[i++] - '0');
                put_utf8(o, &k, c);
            } else {
                o[k++] = '\\';
                o[k++] = e;
            }
        }
    }
    o[k] = '\0';
    jtok *t = emit(L, TK_STRING);
    if (!t)
        return 0;
    t->s = o, t->len = k;
    advance(L, L->pos + end + 1);
    return 1;
}

static int lex_number(lexer *L)
{
    const char *s = L->s + L->pos;
    size_t i = 0;
    int is_float = 0;
    char buf[64];
    size_t k = 0;
    while (L->pos + i < L->n && (isdigit((unsigned char)s[i]) || (s[i] == '_' && isdigit((unsigned char)s[i + 1])))) {
        if (s[i] != '_' && k < sizeof buf - 1)
            buf[k++] = s[i];
        i++;
    }
    if (L->pos + i + 1 < L->n && s[i] == '.' && isdigit((unsigned char)s[i + 1])) {
        is_float = 1;
        buf[k++] = s[i++];
        while (L->pos + i < L->n && isdigit((unsigned char)s[i]) && k < sizeof buf - 1)
            buf[k++] = s[i++];
    }
    if (L->pos + i < L->n && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1;
        if (L->pos + j < L->n && (s[j] == '+' || s[j] == '-'))
            j++;
        if (L->pos + j < L->n && isdigit((unsigned char)s[j])) {
            is_float = 1;
            while (i < j && k < sizeof buf - 1)
                buf[k++] = s[i++];
            while (L->pos + i < L->n && isdigit((unsigned char)s[i]) && k < sizeof buf - 1)
                buf[k++] = s[i++];
        }
    }
    if (k >= sizeof buf - 1)
        return fail(L, "a number that is too long", NULL);
    buf[k] = '\0';
    jtok *t = emit(L, is_float ? TK_FLOAT : TK_INT);
    if (!t)
        return 0;
    if (is_float) {
        t->f = strtod(buf, NULL);
    } else {
        char *end;
        unsigned long long v = strtoull(buf, &end, 10);
        if (k > 18 && (v > (unsigned long long)INT64_MAX || k > 19))
            return fail(L, "an integer too large for 64 bits: ", buf);
        t->i = (int64_t)v;
    }
    advance(L, L->pos + i);
    return 1;
}

static const char *const OPS[] = {"**", "//", "==", "!=", ">=", "<=", "+", "-", "*", "/", "%", "~", "[", "]", "(",
                                  ")", "{", "}", "=", ".", ":", "|", ",", "<", ">", ";"};

/* The tokens of one tag, up to and including its end; `end` is "}}" or "%}". */
static int lex_tag(lexer *L, const char *end, int is_block)
{
    int depth = 0;
    for (;;) {
        while (L->pos < L->n && isspace((unsigned char)L->s[L->pos]))
            advance(L, L->pos + 1);
        if (L->pos >= L->n)
            return fail(L, is_block ? "a {% tag that is not closed" : "a {{ tag that is not closed", NULL);
        const char *s = L->s + L->pos;
        size_t rest = L->n - L->pos;
        if (depth == 0) {
            int strip = s[0] == '-' && rest >= 3 && !strncmp(s + 1, end, 2);
            if (strip || (rest >= 2 && !strncmp(s, end, 2))) {
                if (!emit(L, is_block ? TK_BLOCK_END : TK_VAR_END))
                    return 0;
                advance(L, L->pos + (strip ? 3 : 2));
                if (strip) {
                    while (L->pos < L->n && isspace((unsigned char)L->s[L->pos]))
                        advance(L, L->pos + 1);
                } else if (is_block && L->pos < L->n && L->s[L->pos] == '\n') {
                    advance(L, L->pos + 1); /* trim_blocks */
                }
                return 1;
            }
        }
        if (s[0] == '\'' || s[0] == '"') {
            if (!lex_string(L))
                return 0;
            continue;
        }
        if (isdigit((unsigned char)s[0])) {
            if (!lex_number(L))
                return 0;
            continue;
        }
        if (isalpha((unsigned char)s[0]) || s[0] == '_') {
            size_t i = 1;
            while (i < rest && (isalnum((unsigned char)s[i]) || s[i] == '_'))
                i++;
            jtok *t = emit(L, TK_NAME);
            if (!t || !(t->s = copy(L, s, i)))
                return 0;
            t->len = i;
            advance(L, L->pos + i);
            continue;
        }
        size_t k = 0;
        while (k < sizeof OPS / sizeof OPS[0] && strncmp(s, OPS[k], strlen(OPS[k])))
            k++;
        if (k == sizeof OPS / sizeof OPS[0]) {
            char c[2] = {s[0], 0};
            return fail(L, "unexpected character in a tag: ", c);
        }
        if (strchr("([{", s[0]))
            depth++;
        else if (strchr(")]}", s[0]) && depth > 0)
            depth--;
        jtok *t = emit(L, TK_OP);
        if (!t)
            return 0;
        t->s = OPS[k];
        t->len = strlen(OPS[k]);
        advance(L, L->pos + t->len);
    }
}

static int emit_text(lexer *L, const char *s, size_t n, int line)
{
    if (!n)
        return 1;
    jtok *t = emit(L, TK_TEXT);
    if (!t || !(t->s = copy(L, s, n)))
        return 0;
    t->len = n;
    t->line = line;
    return 1;
}

/* Newlines as "\n", without the one trailing newline (jinja2's defaults). */
static char *normalize(jarena *a, const char *src, size_t len, size_t *out_len)
{
    char *s = ja_alloc(a, len + 1);
    if (!s)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[k++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n')
                i++;
        } else {
            s[k++] = src[i];
        }
    }
    if (k && s[k - 1] == '\n')
        k--;
    s[k] = '\0';
    *out_len = k;
    return s;
}

int jinja_lex(jarena *a, const char *src, size_t len, jtoks *out, char *msg, size_t msg_cap)
{
    lexer L = {.a = a, .line = 1, .msg = msg, .msg_cap = msg_cap};
    if (!(L.s = normalize(a, src, len, &L.n)))
        return fail(&L, "the template is too large", NULL);
    while (L.pos < L.n && !L.failed) {
        size_t start = L.pos, tag = L.pos;
        int line = L.line;
        const char *p = L.s + start;
        for (;;) {
            p = memchr(p, '{', (size_t)(L.s + L.n - p));
            if (!p || p + 1 >= L.s + L.n) {
                p = NULL;
                break;
            }
            if (p[1] == '{' || p[1] == '%' || p[1] == '#')
                break;
            p++;
        }
        if (!p) {
            emit_text(&L, L.s + start, L.n - start, line);
            advance(&L, L.n);
            break;
        }
        tag = (size_t)(p - L.s);
        char kind = p[1], sign = tag + 2 < L.n ? p[2] : 0;
        size_t text_len = tag - start;
        const char *text = L.s + start;
        if (sign == '-') {
            while (text_len && isspace((unsigned char)text[text_len - 1]))
                text_len--;
        } else if (kind != '{' && sign != '+') {
            /* lstrip_blocks: the indentation before a block or comment tag
             * that starts its line goes. */
            size_t l = text_len;
            while (l && text[l - 1] != '\n')
                l--;
            int line_start = l > 0 || start == 0 || L.s[start - 1] == '\n';
            size_t k = l;
            while (k < text_len && (text[k] == ' ' || text[k] == '\t'))
                k++;
            if (line_start && k == text_len)
                text_len = l;
        }
        if (!emit_text(&L, text, text_len, line))
            break;
        advance(&L, tag + 2 + (sign == '-' || sign == '+'));
        if (kind == '#') {
            const char *e = strstr(L.s + L.pos, "#}");
            if (!e) {
                fail(&L, "a comment that is not closed", NULL);
                break;
            }
            int strip = e > L.s + L.pos && e[-1] == '-';
            advance(&L, (size_t)(e - L.s) + 2);
            if (strip) {
                while (L.pos < L.n && isspace((unsigned char)L.s[L.pos]))
                    advance(&L, L.pos + 1);
            } else if (L.pos < L.n && L.s[L.pos] == '\n') {
                advance(&L, L.pos + 1);
            }
            continue;
        }
        int is_block = kind == '%';
        if (!emit(&L, is_block ? TK_BLOCK_BEGIN : TK_VAR_BEGIN))
            break;
        size_t mark = L.len;
        if (!lex_tag(&L, is_block ? "%}" : "}}", is_block))
            break;
        /* {% raw %}: its body is text, up to {% endraw %}. */
        if (is_block && L.len == mark + 2 && L.v[mark].kind == TK_NAME && !strcmp(L.v[mark].s, "raw")) {
            L.len = mark - 1;
            const char *e = L.s + L.pos;
            for (;;) {
                e = strstr(e, "{%");
                if (!e) {
                    fail(&L, "{% raw %} without {% endraw %}", NULL);
                    break;
                }
                const char *q = e + 2 + (e[2] == '-' || e[2] == '+');
                while (*q == ' ' || *q == '\t' || *q == '\n')
                    q++;
                if (!strncmp(q, "endraw", 6))
                    break;
                e += 2;
            }
            if (L.failed)
                break;
            size_t body_end = (size_t)(e - L.s);
            const char *body = L.s + L.pos;
            size_t body_len = body_end - L.pos;
            if (e[2] == '-')
                while (body_len && isspace((unsigned char)body[body_len - 1]))
                    body_len--;
            if (!emit_text(&L, body, body_len, L.line))
                break;
            advance(&L, body_end + 2 + (e[2] == '-' || e[2] == '+'));
            size_t m2 = L.len;
            if (!lex_tag(&L, "%}", 1))
                break;
            L.len = m2;
        }
    }
    if (L.failed)
        return 0;
    if (!emit(&L, TK_EOF))
        return 0;
    out->v = L.v;
    out->n = L.len;
    return 1;
}
