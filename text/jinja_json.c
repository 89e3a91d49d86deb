/* JSON for the Jinja engine: values written as Python's json.dumps writes
 * them (transformers' tojson filter: ensure_ascii, indent, separators,
 * sort_keys), and JSON text read into values (the variables a caller
 * passes: messages, tools...). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja_impl.h"

/* A UTF-8 sequence at s (n bytes left): its code point and length; a
 * malformed byte reads as itself, one byte long. */
static uint32_t utf8_decode(const unsigned char *s, size_t n, size_t *len)
{
    int k = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 1;
    if (k == 1 || (size_t)k > n) {
        *len = 1;
        return s[0];
    }
    uint32_t c = s[0] & (0x7F >> k);
    for (int i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            *len = 1;
            return s[0];
        }
        c = c << 6 | (s[i] & 63);
    }
    *len = (size_t)k;
    return c;
}

static void write_json_str(jr *r, jbuf *b, const char *s, size_t n, int ensure_ascii)
{
    jb_put(r, b, "\"", 1);
    size_t from = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        char esc[16];
        const char *e = NULL;
        size_t len = 1;
        switch (c) {
        case '"': e = "\\\""; break;
        case '\\': e = "\\\\"; break;
        case '\n': e = "\\n"; break;
        case '\r': e = "\\r"; break;
        case '\t': e = "\\t"; break;
        case '\b': e = "\\b"; break;
        case '\f': e = "\\f"; break;
        default:
            if (c < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", c);
                e = esc;
            } else if (c >= 0x80 && ensure_ascii) {
                uint32_t cp = utf8_decode((const unsigned char *)s + i, n - i, &len);
                if (cp >= 0x10000) {
                    cp -= 0x10000;
                    snprintf(esc, sizeof esc, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
                } else {
                    snprintf(esc, sizeof esc, "\\u%04x", cp);
                }
                e = esc;
            }
        }
        if (e) {
            jb_put(r, b, s + from, i - from);
            jb_puts(r, b, e);
            from = i + len;
        }
        i += len;
    }
    jb_put(r, b, s + from, n - from);
    jb_put(r, b, "\"", 1);
}

static void newline(jr *r, jbuf *b, const jjson_opts *o, int level)
{
    jb_put(r, b, "\n", 1);
    for (int i = 0; i < level; i++)
        jb_puts(r, b, o->indent);
}

/* A dict key as json.dumps writes it: str as is, numbers, booleans and None as their JSON. */
static void write_key(jr *r, jbuf *b, jv k, const jjson_opts *o)
{
    char tmp[64];
    switch (k.t) {
    case JV_STR: write_json_str(r, b, k.u.s->s, k.u.s->len, o->ensure_ascii); return;
    case JV_NONE: jb_puts(r, b, "\"null\""); return;
    case JV_BOOL: jb_puts(r, b, k.u.i ? "\"true\"" : "\"false\""); return;
    case JV_INT: snprintf(tmp, sizeof tmp, "\"%lld\"", (long long)k.u.i); break;
    case JV_FLOAT: {
        char f[48];
        fmt_float(f, sizeof f, k.u.f);
        snprintf(tmp, sizeof tmp, "\"%s\"", f);
        break;
    }
    default: jr_fail(r, "tojson: keys must be str, int, float, bool or None, not %s", jv_type_name(k));
    }
    jb_puts(r, b, tmp);
}

static int key_order(jr *r, jv a, jv b)
{
    if (a.t == JV_STR && b.t == JV_STR)
        return jv_compare(r, a, b);
    return jv_compare(r, a, b);
}

void jv_write_json(jr *r, jbuf *b, jv v, const jjson_opts *o, int level)
{
    char tmp[64];
    jr_step(r);
    if (++r->depth > r->lim.max_depth)
        jr_limit(r, "depth (nested calls, expressions and values)", r->lim.max_depth);
    switch (v.t) {
    case JV_NONE: jb_puts(r, b, "null"); break;
    case JV_BOOL: jb_puts(r, b, v.u.i ? "true" : "false"); break;
    case JV_INT:
        snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i);
        jb_puts(r, b, tmp);
        break;
    case JV_FLOAT:
        if (isnan(v.u.f))
            jb_puts(r, b, "NaN");
        else if (isinf(v.u.f))
            jb_puts(r, b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else {
            fmt_float(tmp, sizeof tmp, v.u.f);
            jb_puts(r, b, tmp);
        }
        break;
    case JV_STR: write_json_str(r, b, v.u.s->s, v.u.s->len, o->ensure_ascii); break;
    case JV_LIST: {
        if (v.flags & JF_GEN)
            jr_fail(r, "Object of type generator is not JSON serializable");
        const jlist *l = v.u.l;
        if (!l->n) {
            jb_puts(r, b, "[]");
            break;
        }
        jb_puts(r, b, "[");
        for (size_t i = 0; i < l->n; i++) {
            if (i)
                jb_puts(r, b, o->item_sep);
            if (o->indent)
                newline(r, b, o, level + 1);
            jv_write_json(r, b, l->v[i], o, level + 1);
        }
        if (o->indent)
            newline(r, b, o, level);
        jb_puts(r, b, "]");
        break;
    }
    case JV_DICT: {
        if (v.flags & JF_NS)
            jr_fail(r, "Object of type Namespace is not JSON serializable");
        const jdict *d = v.u.d;
        if (!d->n) {
            jb_puts(r, b, "{}");
            break;
        }
        size_t *order = jr_alloc(r, d->n * sizeof *order);
        for (size_t i = 0; i < d->n; i++)
            order[i] = i;
        if (o->sort_keys) /* insertion sort: stable, and dicts here are small */
            for (size_t i = 1; i < d->n; i++)
                for (size_t j = i; j > 0 && key_order(r, d->k[order[j - 1]], d->k[order[j]]) > 0; j--) {
                    size_t t = order[j];
                    order[j] = order[j - 1];
                    order[j - 1] = t;
                }
        jb_puts(r, b, "{");
        for (size_t i = 0; i < d->n; i++) {
            if (i)
                jb_puts(r, b, o->item_sep);
            if (o->indent)
                newline(r, b, o, level + 1);
            write_key(r, b, d->k[order[i]], o);
            jb_puts(r, b, o->key_sep);
            jv_write_json(r, b, d->v[order[i]], o, level + 1);
        }
        if (o->indent)
            newline(r, b, o, level);
        jb_puts(r, b, "}");
        break;
    }
    default: jr_fail(r, "Object of type %s is not JSON serializable", jv_type_name(v));
    }
    r->depth--;
}

/* ---- reading ---- */
typedef struct {
    jr *r;
    const char *s;
    size_t n, i;
    const char *err;
    int depth;
} jreader;

static void ws(jreader *p)
{
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

static int hex4(const char *s, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int c = (unsigned char)s[i];
        if (!isxdigit(c))
            return 0;
        v = v * 16 + (uint32_t)(isdigit(c) ? c - '0' : tolower(c) - 'a' + 10);
    }
    *out = v;
    return 1;
}

static int read_string(jreader *p, jv *out)
{
    size_t start = ++p->i, end = start;
    int plain = 1;
    while (end < p->n && p->s[end] != '"') {
        if ((unsigned char)p->s[end] < 0x20)
            return p->err = "a control character in a string", 0;
        if (p->s[end] == '\\')
            plain = 0, end++;
        end++;
    }
    if (end >= p->n)
        return p->err = "a string that is not closed", 0;
    if (plain) {
        *out = jv_str(p->r, p->s + start, end - start);
        p->i = end + 1;
        return 1;
    }
    char *o = jr_alloc(p->r, end - start + 1);
    size_t k = 0;
    for (size_t i = start; i < end; i++) {
        if (p->s[i] != '\\') {
            o[k++] = p->s[i];
            continue;
        }
        char e = p->s[++i];
        uint32_t c;
        switch (e) {
        case '"': o[k++] = '"'; break;
        case '\\': o[k++] = '\\'; break;
        case '/': o[k++] = '/'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'n': o[k++] = '\n'; break;
        case 'r': o[k++] = '\r'; break;
        case 't': o[k++] = '\t'; break;
        case 'u':
            if (i + 4 >= end || !hex4(p->s + i + 1, &c))
                return p->err = "a malformed \\u escape", 0;
            i += 4;
            if (c >= 0xD800 && c < 0xDC00 && i + 6 < end + 1 && p->s[i + 1] == '\\' && p->s[i + 2] == 'u') {
                uint32_t lo;
                if (hex4(p->s + i + 3, &lo) && lo >= 0xDC00 && lo < 0xE000) {
                    c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
                    i += 6;
                }
            }
            if (c < 0x80) {
                o[k++] = (char)c;
            } else if (c < 0x800) {
                o[k++] = (char)(0xC0 | c >> 6);
                o[k++] = (char)(0x80 | (c & 63));
            } else if (c < 0x10000) {
                o[k++] = (char)(0xE0 | c >> 12);
                o[k++] = (char)(0x80 | (c >> 6 & 63));
                o[k++] = (char)(0x80 | (c & 63));
            } else {
                o[k++] = (char)(0xF0 | c >> 18);
                o[k++] = (char)(0x80 | (c >> 12 & 63));
                o[k++] = (char)(0x80 | (c >> 6 & 63));
                o[k++] = (char)(0x80 | (c & 63));
            }
            break;
        default: return p->err = "an unknown escape in a string", 0;
        }
    }
    *out = jv_str(p->r, o, k);
    p->i = end + 1;
    return 1;
}

static int read_value(jreader *p, jv *out);

static int read_number(jreader *p, jv *out)
{
    size_t i = p->i;
    int is_float = 0;
    if (i < p->n && p->s[i] == '-')
        i++;
    if (i >= p->n || !isdigit((unsigned char)p->s[i]))
        return p->err = "an unexpected character", 0;
    while (i < p->n && isdigit((unsigned char)p->s[i]))
        i++;
    if (i < p->n && p->s[i] == '.') {
        is_float = 1;
        i++;
        if (i >= p->n || !isdigit((unsigned char)p->s[i]))
            return p->err = "a malformed number", 0;
        while (i < p->n && isdigit((unsigned char)p->s[i]))
            i++;
    }
    if (i < p->n && (p->s[i] == 'e' || p->s[i] == 'E')) {
        is_float = 1;
        i++;
        if (i < p->n && (p->s[i] == '+' || p->s[i] == '-'))
            i++;
        if (i >= p->n || !isdigit((unsigned char)p->s[i]))
            return p->err = "a malformed number", 0;
        while (i < p->n && isdigit((unsigned char)p->s[i]))
            i++;
    }
    char buf[64];
    if (i - p->i >= sizeof buf)
        is_float = 1;
    size_t len = i - p->i < sizeof buf - 1 ? i - p->i : sizeof buf - 1;
    memcpy(buf, p->s + p->i, len);
    buf[len] = '\0';
    if (!is_float) {
        char *end;
        errno = 0;
        long long v = strtoll(buf, &end, 10);
        if (errno)
            return p->err = "an integer too large for 64 bits", 0;
        *out = jv_int(v);
    } else {
        if (i - p->i >= sizeof buf)
            return p->err = "a number too long", 0;
        *out = jv_float(strtod(buf, NULL));
    }
    p->i = i;
    return 1;
}

static int read_value(jreader *p, jv *out)
{
    ws(p);
    if (p->i >= p->n)
        return p->err = "unexpected end of text", 0;
    if (++p->depth > 200)
        return p->err = "nested deeper than 200", 0;
    char c = p->s[p->i];
    int ok = 1;
    if (c == '{') {
        *out = jv_dict(p->r, 0);
        p->i++;
        ws(p);
        if (p->i < p->n && p->s[p->i] == '}') {
            p->i++;
        } else {
            for (;;) {
                jv k, v;
                ws(p);
                if (p->i >= p->n || p->s[p->i] != '"')
                    return p->err = "expected a string key", 0;
                if (!read_string(p, &k))
                    return 0;
                ws(p);
                if (p->i >= p->n || p->s[p->i] != ':')
                    return p->err = "expected ':'", 0;
                p->i++;
                if (!read_value(p, &v))
                    return 0;
                /* Python keeps a repeated key's last value; checked while the
                 * object is small, so that a huge one reads in linear time. */
                jdict *d = out->u.d;
                if (d->n < 1024)
                    jd_set(p->r, d, k, v);
                else
                    jd_append(p->r, d, k, v);
                ws(p);
                if (p->i < p->n && p->s[p->i] == ',') {
                    p->i++;
                    continue;
                }
                if (p->i < p->n && p->s[p->i] == '}') {
                    p->i++;
                    break;
                }
                return p->err = "expected ',' or '}'", 0;
            }
        }
    } else if (c == '[') {
        *out = jv_list(p->r, 0);
        p->i++;
        ws(p);
        if (p->i < p->n && p->s[p->i] == ']') {
            p->i++;
        } else {
            for (;;) {
                jv v;
                if (!read_value(p, &v))
                    return 0;
                jl_push(p->r, out->u.l, v);
                ws(p);
                if (p->i < p->n && p->s[p->i] == ',') {
                    p->i++;
                    continue;
                }
                if (p->i < p->n && p->s[p->i] == ']') {
                    p->i++;
                    break;
                }
                return p->err = "expected ',' or ']'", 0;
            }
        }
    } else if (c == '"') {
        ok = read_string(p, out);
    } else if (!strncmp(p->s + p->i, "true", p->n - p->i < 4 ? p->n - p->i : 4) && p->n - p->i >= 4) {
        *out = jv_bool(1), p->i += 4;
    } else if (!strncmp(p->s + p->i, "false", p->n - p->i < 5 ? p->n - p->i : 5) && p->n - p->i >= 5) {
        *out = jv_bool(0), p->i += 5;
    } else if (!strncmp(p->s + p->i, "null", p->n - p->i < 4 ? p->n - p->i : 4) && p->n - p->i >= 4) {
        *out = jv_none(), p->i += 4;
    } else {
        ok = read_number(p, out);
    }
    p->depth--;
    return ok;
}

int jv_parse_json(jr *r, const char *s, size_t n, jv *out, const char **err)
{
    jreader p = {.r = r, .s = s, .n = n};
    if (!read_value(&p, out)) {
        *err = p.err;
        return 0;
    }
    ws(&p);
    if (p.i != n) {
        *err = "text after the value";
        return 0;
    }
    return 1;
}
