/* GBNF text to rules (text/grammar.h), in llama.cpp's grammar-parser's
 * shape: a recursive descent over alternatives and sequences, with
 * repetitions expanded into generated rules. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "text/grammar_impl.h"

typedef struct {
    hx_gelem *e;
    uint32_t n, cap;
} elems;

typedef struct {
    char *name;
    elems body;
    int defined;
    const char *at; /* where it was first named */
} rule_def;

typedef struct {
    const char *src, *end, *p;
    rule_def *rules;
    uint32_t n_rules, cap_rules;
    size_t total; /* elements in every rule so far */
    int nesting;
    char err[256];
} parser;

static void where(const parser *ps, const char *at, uint32_t *line, uint32_t *col)
{
    *line = 1;
    *col = 1;
    for (const char *q = ps->src; q < at && q < ps->end; q++) {
        if (*q == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

static int fail(parser *ps, const char *at, const char *fmt, ...)
{
    if (ps->err[0])
        return -1;
    uint32_t line, col;
    where(ps, at, &line, &col);
    int k = snprintf(ps->err, sizeof ps->err, "line %u, column %u: ", line, col);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ps->err + k, sizeof ps->err - (size_t)k, fmt, ap);
    va_end(ap);
    return -1;
}

static int push(parser *ps, elems *v, uint32_t type, uint32_t value)
{
    if (++ps->total > HX_GRAMMAR_MAX_ELEMENTS)
        return fail(ps, ps->p, "the grammar expands past %u elements", HX_GRAMMAR_MAX_ELEMENTS);
    if (v->n == v->cap) {
        uint32_t cap = v->cap ? 2 * v->cap : 16;
        hx_gelem *e = realloc(v->e, cap * sizeof *e);
        if (!e)
            return fail(ps, ps->p, "out of memory");
        v->e = e;
        v->cap = cap;
    }
    v->e[v->n++] = (hx_gelem){type, value};
    return 0;
}

static int append(parser *ps, elems *v, const hx_gelem *src, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (push(ps, v, src[i].type, src[i].value))
            return -1;
    return 0;
}

static int new_rule(parser *ps, const char *name, size_t len, const char *at, uint32_t *id)
{
    if (ps->n_rules == ps->cap_rules) {
        uint32_t cap = ps->cap_rules ? 2 * ps->cap_rules : 16;
        rule_def *r = realloc(ps->rules, cap * sizeof *r);
        if (!r)
            return fail(ps, at, "out of memory");
        ps->rules = r;
        ps->cap_rules = cap;
    }
    rule_def *r = &ps->rules[ps->n_rules];
    memset(r, 0, sizeof *r);
    if (!(r->name = strndup(name, len)))
        return fail(ps, at, "out of memory");
    r->at = at;
    *id = ps->n_rules++;
    return 0;
}

/* The id of a rule by name, created (undefined) on first mention. */
static int symbol(parser *ps, const char *name, size_t len, const char *at, uint32_t *id)
{
    for (uint32_t i = 0; i < ps->n_rules; i++)
        if (!strncmp(ps->rules[i].name, name, len) && !ps->rules[i].name[len]) {
            *id = i;
            return 0;
        }
    return new_rule(ps, name, len, at, id);
}

/* A generated rule's name: the rule it serves, '-', a counter. */
static int generated(parser *ps, const char *base, const char *at, uint32_t *id)
{
    char name[96];
    snprintf(name, sizeof name, "%.80s-%u", base, ps->n_rules);
    if (new_rule(ps, name, strlen(name), at, id))
        return -1;
    ps->rules[*id].defined = 1;
    return 0;
}

static int is_word(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Spaces and comments; newlines too when `newlines`. */
static void skip(parser *ps, int newlines)
{
    while (ps->p < ps->end) {
        char c = *ps->p;
        if (c == '#') {
            while (ps->p < ps->end && *ps->p != '\n' && *ps->p != '\r')
                ps->p++;
        } else if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
            ps->p++;
        } else {
            break;
        }
    }
}

static int hex(parser *ps, int digits, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < digits; i++, ps->p++) {
        if (ps->p >= ps->end)
            return fail(ps, ps->p, "expecting %d hex digits", digits);
        char c = *ps->p;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return fail(ps, ps->p, "expecting %d hex digits", digits);
        v = v * 16 + (uint32_t)d;
    }
    if (v > 0x10FFFF)
        return fail(ps, ps->p, "code point U+%X is past U+10FFFF", v);
    *out = v;
    return 0;
}

/* One character of a literal or class: an escape or a UTF-8 sequence. */
static int character(parser *ps, uint32_t *cp)
{
    const unsigned char *s = (const unsigned char *)ps->p;
    if (ps->p >= ps->end)
        return fail(ps, ps->p, "unexpected end of the grammar");
    if (*s == '\\') {
        ps->p++;
        if (ps->p >= ps->end)
            return fail(ps, ps->p, "unexpected end of the grammar after '\\'");
        char c = *ps->p++;
        switch (c) {
        case 'x': return hex(ps, 2, cp);
        case 'u': return hex(ps, 4, cp);
        case 'U': return hex(ps, 8, cp);
        case 't': *cp = '\t'; return 0;
        case 'r': *cp = '\r'; return 0;
        case 'n': *cp = '\n'; return 0;
        case '\\': case '"': case '[': case ']': case '-': case '^': *cp = (unsigned char)c; return 0;
        default: return fail(ps, ps->p - 1, "unknown escape '\\%c'", c);
        }
    }
    int len = *s < 0x80 ? 1 : (*s >> 5) == 6 ? 2 : (*s >> 4) == 14 ? 3 : (*s >> 3) == 30 ? 4 : 0;
    if (!len || ps->end - ps->p < len)
        return fail(ps, ps->p, "invalid UTF-8");
    uint32_t v = len == 1 ? *s : len == 2 ? *s & 0x1F : len == 3 ? *s & 0x0F : *s & 0x07;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return fail(ps, ps->p, "invalid UTF-8");
        v = (v << 6) | (s[i] & 0x3F);
    }
    ps->p += len;
    *cp = v;
    return 0;
}

static int alternates(parser *ps, const char *rule_name, uint32_t rule_id, int nested);

/* x{min,max} on the last item (elements from `start` on); max < 0 = no
 * bound.  As llama.cpp: the item min times, then a chain of optional
 * rules (or one recursive rule for an open end). */
static int repeat(parser *ps, elems *out, uint32_t start, const char *rule_name, long min, long max, const char *at)
{
    if (start == out->n)
        return fail(ps, at, "expecting an item before the repetition");
    uint32_t n_item = out->n - start;
    hx_gelem *item = malloc(n_item * sizeof *item);
    if (!item)
        return fail(ps, at, "out of memory");
    memcpy(item, out->e + start, n_item * sizeof *item);
    int rc = 0;
    if (min == 0)
        out->n = start;
    for (long i = 1; i < min && !rc; i++)
        rc = append(ps, out, item, n_item);
    if (!rc && max != min) {
        uint32_t id;
        if (max < 0) {
            /* rec ::= item rec | (empty) */
            rc = generated(ps, rule_name, at, &id);
            if (!rc) {
                elems body = {0};
                rc = append(ps, &body, item, n_item) || push(ps, &body, HX_GE_RULE_REF, id) ||
                     push(ps, &body, HX_GE_ALT, 0) || push(ps, &body, HX_GE_END, 0);
                ps->rules[id].body = body;
            }
            if (!rc)
                rc = push(ps, out, HX_GE_RULE_REF, id);
        } else {
            /* opt_k ::= item opt_{k-1} | (empty), from the innermost out */
            uint32_t last = UINT32_MAX;
            for (long k = 0; k < max - min && !rc; k++) {
                rc = generated(ps, rule_name, at, &id);
                if (rc)
                    break;
                elems body = {0};
                rc = append(ps, &body, item, n_item) ||
                     (last != UINT32_MAX && push(ps, &body, HX_GE_RULE_REF, last)) ||
                     push(ps, &body, HX_GE_ALT, 0) || push(ps, &body, HX_GE_END, 0);
                ps->rules[id].body = body;
                last = id;
            }
            if (!rc)
                rc = push(ps, out, HX_GE_RULE_REF, last);
        }
    }
    free(item);
    return rc;
}

static int number(parser *ps, long *out)
{
    const char *s = ps->p;
    long v = 0;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        v = v * 10 + (*ps->p++ - '0');
        if (v > HX_GRAMMAR_MAX_REPEAT)
            return fail(ps, s, "repetition count past %d", HX_GRAMMAR_MAX_REPEAT);
    }
    if (ps->p == s)
        return fail(ps, s, "expecting a number");
    *out = v;
    return 0;
}

static int sequence(parser *ps, const char *rule_name, elems *out, int nested)
{
    uint32_t last_start = out->n;
    while (ps->p < ps->end && !ps->err[0]) {
        const char *at = ps->p;
        char c = *ps->p;
        if (c == '"') {
            ps->p++;
            last_start = out->n;
            while (ps->p < ps->end && *ps->p != '"') {
                uint32_t cp;
                if (character(ps, &cp) || push(ps, out, HX_GE_CHAR, cp))
                    return -1;
            }
            if (ps->p >= ps->end)
                return fail(ps, at, "unterminated literal");
            ps->p++;
        } else if (c == '[') {
            ps->p++;
            last_start = out->n;
            uint32_t first = HX_GE_CHAR;
            if (ps->p < ps->end && *ps->p == '^') {
                ps->p++;
                first = HX_GE_CHAR_NOT;
            }
            while (ps->p < ps->end && *ps->p != ']') {
                uint32_t cp, hi;
                if (character(ps, &cp) || push(ps, out, out->n == last_start ? first : HX_GE_CHAR_ALT, cp))
                    return -1;
                if (ps->end - ps->p > 1 && ps->p[0] == '-' && ps->p[1] != ']') {
                    ps->p++;
                    if (character(ps, &hi))
                        return -1;
                    if (hi < cp)
                        return fail(ps, at, "range with its upper end below its lower end");
                    if (push(ps, out, HX_GE_CHAR_RNG_UPPER, hi))
                        return -1;
                }
            }
            if (ps->p >= ps->end)
                return fail(ps, at, "unterminated character class");
            if (out->n == last_start)
                return fail(ps, at, "empty character class");
            ps->p++;
        } else if (is_word(c)) {
            const char *s = ps->p;
            while (ps->p < ps->end && is_word(*ps->p))
                ps->p++;
            uint32_t id;
            last_start = out->n;
            if (symbol(ps, s, (size_t)(ps->p - s), s, &id) || push(ps, out, HX_GE_RULE_REF, id))
                return -1;
        } else if (c == '(') {
            ps->p++;
            if (++ps->nesting > HX_GRAMMAR_MAX_NESTING)
                return fail(ps, at, "parentheses nested past %d", HX_GRAMMAR_MAX_NESTING);
            uint32_t id;
            if (generated(ps, rule_name, at, &id) || alternates(ps, rule_name, id, 1))
                return -1;
            ps->nesting--;
            last_start = out->n;
            if (push(ps, out, HX_GE_RULE_REF, id))
                return -1;
            if (ps->p >= ps->end || *ps->p != ')')
                return fail(ps, at, "expecting ')' to close this '('");
            ps->p++;
        } else if (c == '.') {
            ps->p++;
            last_start = out->n;
            if (push(ps, out, HX_GE_CHAR_ANY, 0))
                return -1;
        } else if (c == '*' || c == '+' || c == '?') {
            ps->p++;
            if (repeat(ps, out, last_start, rule_name, c == '+', c == '?' ? 1 : -1, at))
                return -1;
        } else if (c == '{') {
            ps->p++;
            long min, max;
            skip(ps, nested);
            if (number(ps, &min))
                return -1;
            skip(ps, nested);
            max = min;
            if (ps->p < ps->end && *ps->p == ',') {
                ps->p++;
                skip(ps, nested);
                max = -1;
                if (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9' && number(ps, &max))
                    return -1;
                skip(ps, nested);
            }
            if (ps->p >= ps->end || *ps->p != '}')
                return fail(ps, at, "expecting '}' to close this repetition");
            ps->p++;
            if (max >= 0 && max < min)
                return fail(ps, at, "repetition {%ld,%ld} with its maximum below its minimum", min, max);
            if (repeat(ps, out, last_start, rule_name, min, max, at))
                return -1;
        } else if (c == '<') {
            return fail(ps, at, "token references (<...>) are not supported; spell the text instead");
        } else {
            break;
        }
        skip(ps, nested);
    }
    return ps->err[0] ? -1 : 0;
}

static int alternates(parser *ps, const char *rule_name, uint32_t rule_id, int nested)
{
    elems body = {0};
    skip(ps, nested);
    int rc = sequence(ps, rule_name, &body, nested);
    while (!rc && ps->p < ps->end && *ps->p == '|') {
        ps->p++;
        rc = push(ps, &body, HX_GE_ALT, 0);
        skip(ps, 1);
        if (!rc)
            rc = sequence(ps, rule_name, &body, nested);
    }
    if (!rc)
        rc = push(ps, &body, HX_GE_END, 0);
    if (rc) {
        free(body.e);
        return -1;
    }
    free(ps->rules[rule_id].body.e);
    ps->rules[rule_id].body = body;
    return 0;
}

static int rule(parser *ps)
{
    const char *s = ps->p;
    while (ps->p < ps->end && is_word(*ps->p))
        ps->p++;
    if (ps->p == s)
        return fail(ps, s, "expecting a rule name");
    uint32_t id;
    if (symbol(ps, s, (size_t)(ps->p - s), s, &id))
        return -1;
    if (ps->rules[id].defined)
        return fail(ps, s, "rule '%s' is defined twice", ps->rules[id].name);
    ps->rules[id].defined = 1;
    skip(ps, 0);
    if (ps->end - ps->p < 3 || memcmp(ps->p, "::=", 3))
        return fail(ps, ps->p, "expecting '::=' after '%s'", ps->rules[id].name);
    ps->p += 3;
    char *name = ps->rules[id].name;
    if (alternates(ps, name, id, 0))
        return -1;
    if (ps->p < ps->end && *ps->p == '\r')
        ps->p++;
    if (ps->p < ps->end && *ps->p != '\n')
        return fail(ps, ps->p, "expecting the end of the line, not '%c'", *ps->p);
    return 0;
}

/* Rules that can match the empty string, to a fixed point. */
static void nullable(const hx_grammar *g, uint8_t *null)
{
    for (int changed = 1; changed;) {
        changed = 0;
        for (uint32_t r = 0; r < g->n_rules; r++) {
            if (null[r])
                continue;
            const hx_gelem *e = g->el + g->rule[r];
            for (;;) {
                int all = 1;
                for (; !hx_gelem_is_end(e); e++) {
                    if (hx_gelem_is_char(e)) {
                        all = 0;
                    } else if (e->type == HX_GE_RULE_REF) {
                        if (!null[e->value])
                            all = 0;
                    }
                }
                if (all) {
                    null[r] = 1;
                    changed = 1;
                    break;
                }
                if (e->type == HX_GE_END)
                    break;
                e++;
            }
        }
    }
}

/* A rule that reaches itself through leftmost references (past nullable
 * ones) would expand forever: find one by depth-first search and return
 * its id, or UINT32_MAX. */
static uint32_t left_recursive(const hx_grammar *g, const uint8_t *null, uint32_t r, uint8_t *mark)
{
    if (mark[r] == 1)
        return r;
    if (mark[r] == 2)
        return UINT32_MAX;
    mark[r] = 1;
    const hx_gelem *e = g->el + g->rule[r];
    for (;;) {
        for (; !hx_gelem_is_end(e); e++) {
            if (e->type != HX_GE_RULE_REF)
                break;
            uint32_t found = left_recursive(g, null, e->value, mark);
            if (found != UINT32_MAX)
                return found;
            if (!null[e->value])
                break;
        }
        while (!hx_gelem_is_end(e))
            e++;
        if (e->type == HX_GE_END)
            break;
        e++;
    }
    mark[r] = 2;
    return UINT32_MAX;
}

static hx_status build(parser *ps, hx_grammar **out)
{
    hx_grammar *g = calloc(1, sizeof *g);
    if (!g)
        return hx_error(HX_ERR_NO_MEMORY, "grammar");
    g->n_rules = ps->n_rules;
    g->rule = malloc(ps->n_rules * sizeof *g->rule);
    g->el = malloc((ps->total + 1) * sizeof *g->el);
    uint8_t *null = calloc(ps->n_rules, 2);
    if (!g->rule || !g->el || !null) {
        free(null);
        hx_grammar_free(g);
        return hx_error(HX_ERR_NO_MEMORY, "grammar");
    }
    for (uint32_t r = 0; r < ps->n_rules; r++) {
        g->rule[r] = g->n_el;
        memcpy(g->el + g->n_el, ps->rules[r].body.e, ps->rules[r].body.n * sizeof *g->el);
        g->n_el += ps->rules[r].body.n;
        if (!strcmp(ps->rules[r].name, "root"))
            g->root = r;
    }
    nullable(g, null);
    uint8_t *mark = null + ps->n_rules;
    for (uint32_t r0 = 0; r0 < g->n_rules; r0++) {
        uint32_t r = left_recursive(g, null, r0, mark);
        if (r != UINT32_MAX) {
            uint32_t line, col;
            where(ps, ps->rules[r].at, &line, &col);
            free(null);
            hx_grammar_free(g);
            return hx_error(HX_ERR_INVALID_ARG, "grammar: line %u, column %u: rule '%s' is left-recursive", line,
                            col, ps->rules[r].name);
        }
    }
    free(null);
    *out = g;
    return HX_OK;
}

hx_status hx_grammar_parse(const char *src, size_t len, hx_grammar **out)
{
    if (out)
        *out = NULL;
    if (!src || !out)
        return hx_error(HX_ERR_INVALID_ARG, "hx_grammar_parse: NULL argument");
    if (len > HX_GRAMMAR_MAX_SOURCE)
        return hx_error(HX_ERR_INVALID_ARG, "grammar: %zu bytes, past the limit of %u", len, HX_GRAMMAR_MAX_SOURCE);
    parser ps = {.src = src, .end = src + len, .p = src};
    skip(&ps, 1);
    while (ps.p < ps.end && !ps.err[0]) {
        rule(&ps);
        skip(&ps, 1);
    }
    int has_root = 0;
    for (uint32_t r = 0; r < ps.n_rules && !ps.err[0]; r++) {
        if (!ps.rules[r].defined) {
            uint32_t line, col;
            where(&ps, ps.rules[r].at, &line, &col);
            snprintf(ps.err, sizeof ps.err, "line %u, column %u: rule '%s' is used but never defined", line, col,
                     ps.rules[r].name);
        }
        has_root |= !strcmp(ps.rules[r].name, "root");
    }
    if (!ps.err[0] && !has_root)
        snprintf(ps.err, sizeof ps.err, "no 'root' rule");
    hx_status st = ps.err[0] ? hx_error(HX_ERR_INVALID_ARG, "grammar: %s", ps.err) : build(&ps, out);
    for (uint32_t r = 0; r < ps.n_rules; r++) {
        free(ps.rules[r].name);
        free(ps.rules[r].body.e);
    }
    free(ps.rules);
    return st;
}

void hx_grammar_free(hx_grammar *g)
{
    if (!g)
        return;
    free(g->el);
    free(g->rule);
    free(g);
}

size_t hx_grammar_rule_count(const hx_grammar *g)
{
    return g ? g->n_rules : 0;
}
