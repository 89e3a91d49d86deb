/* A small JSON reader (RFC 8259) for the files hetero-bench reads back:
 * Chrome trace files.  A tree of nodes; objects keep their members in
 * order.  Depth is bounded so a hostile file cannot overflow the stack. */
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

#define MAX_DEPTH 64

typedef struct {
    const char *s, *end;
    char *err;
    size_t cap;
    int failed;
} reader;

static hxb_json *fail(reader *r, const char *what)
{
    if (!r->failed)
        snprintf(r->err, r->cap, "%s", what);
    r->failed = 1;
    return NULL;
}

static void blanks(reader *r)
{
    while (r->s < r->end && (*r->s == ' ' || *r->s == '\t' || *r->s == '\n' || *r->s == '\r'))
        r->s++;
}

static int hex4(reader *r, unsigned *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++, r->s++) {
        if (r->s >= r->end)
            return -1;
        char c = *r->s;
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
                   : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                   : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10) : 16u;
        if (d > 15)
            return -1;
        *v = *v * 16 + d;
    }
    return 0;
}

static size_t utf8(char *o, unsigned cp)
{
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xc0 | cp >> 6); o[1] = (char)(0x80 | (cp & 0x3f)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | cp >> 12), o[1] = (char)(0x80 | (cp >> 6 & 0x3f)), o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18), o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3f)), o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* At the opening quote; the decoded string is never longer than its text. */
static char *string(reader *r)
{
    const char *q = ++r->s;
    while (q < r->end && *q != '"')
        q += *q == '\\' ? 2 : 1;
    if (q >= r->end)
        return fail(r, "unterminated string"), NULL;
    char *out = malloc((size_t)(q - r->s) + 1), *o = out;
    if (!out)
        return fail(r, "out of memory"), NULL;
    while (*r->s != '"') {
        char c = *r->s++;
        if ((unsigned char)c < 0x20)
            goto bad;
        if (c != '\\') {
            *o++ = c;
            continue;
        }
        c = *r->s++;
        const char *esc = strchr("\"\\/bfnrt", c);
        if (c && esc) {
            *o++ = "\"\\/\b\f\n\r\t"[esc - "\"\\/bfnrt"];
            continue;
        }
        unsigned cp, lo;
        if (c != 'u' || hex4(r, &cp))
            goto bad;
        if (cp >= 0xd800 && cp < 0xdc00 && r->s + 1 < r->end && r->s[0] == '\\' && r->s[1] == 'u') {
            r->s += 2;
            if (hex4(r, &lo) || lo < 0xdc00 || lo > 0xdfff)
                goto bad;
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        } else if (cp >= 0xd800 && cp < 0xe000) {
            cp = 0xfffd;
        }
        o += utf8(o, cp);
    }
    r->s++;
    *o = 0;
    return out;
bad:
    free(out);
    return fail(r, "bad string"), NULL;
}

static hxb_json *value(reader *r, int depth);

static hxb_json *node(reader *r, hxb_jtype t)
{
    hxb_json *v = calloc(1, sizeof *v);
    if (!v)
        return fail(r, "out of memory");
    v->type = t;
    return v;
}

/* Arrays and objects: elements or members up to `close`. */
static hxb_json *container(reader *r, int depth, hxb_jtype t, char close)
{
    hxb_json *v = node(r, t), **tail = v ? &v->child : NULL;
    if (!v)
        return NULL;
    r->s++;
    blanks(r);
    if (r->s < r->end && *r->s == close) {
        r->s++;
        return v;
    }
    for (;;) {
        char *k = NULL;
        blanks(r);
        if (t == HXB_JOBJ) {
            if (r->s >= r->end || *r->s != '"' || !(k = string(r)))
                break;
            blanks(r);
            if (r->s >= r->end || *r->s++ != ':') {
                free(k);
                fail(r, "expected ':'");
                break;
            }
        }
        hxb_json *e = value(r, depth + 1);
        if (!e) {
            free(k);
            break;
        }
        e->key = k;
        *tail = e, tail = &e->next;
        blanks(r);
        if (r->s < r->end && *r->s == ',') {
            r->s++;
            continue;
        }
        if (r->s < r->end && *r->s == close) {
            r->s++;
            return v;
        }
        break;
    }
    hxb_json_free(v);
    return fail(r, t == HXB_JOBJ ? "bad object" : "bad array");
}

static hxb_json *value(reader *r, int depth)
{
    blanks(r);
    if (depth > MAX_DEPTH)
        return fail(r, "nested too deeply");
    if (r->s >= r->end)
        return fail(r, "unexpected end");
    char c = *r->s;
    if (c == '{') return container(r, depth, HXB_JOBJ, '}');
    if (c == '[') return container(r, depth, HXB_JARR, ']');
    if (c == '"') {
        char *s = string(r);
        hxb_json *v = s ? node(r, HXB_JSTR) : NULL;
        if (v) v->str = s;
        else free(s);
        return v;
    }
    static const struct { const char *word; hxb_jtype t; double num; } lit[] = {
        {"true", HXB_JBOOL, 1}, {"false", HXB_JBOOL, 0}, {"null", HXB_JNULL, 0}};
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(lit[i].word);
        if ((size_t)(r->end - r->s) >= n && !memcmp(r->s, lit[i].word, n)) {
            r->s += n;
            hxb_json *v = node(r, lit[i].t);
            if (v) v->num = lit[i].num;
            return v;
        }
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        char buf[64];
        size_t n = 0;
        while (r->s + n < r->end && n < sizeof buf - 1 && strchr("+-.eE0123456789", r->s[n]))
            n++;
        memcpy(buf, r->s, n);
        buf[n] = 0;
        char *end;
        double d = strtod(buf, &end);
        if (end != buf + n)
            return fail(r, "bad number");
        r->s += n;
        hxb_json *v = node(r, HXB_JNUM);
        if (v) v->num = d;
        return v;
    }
    return fail(r, "unexpected character");
}

hxb_json *hxb_json_parse(const char *text, size_t len, char *err, size_t cap)
{
    reader r = {text, text + len, err, cap, 0};
    hxb_json *v = value(&r, 0);
    blanks(&r);
    if (v && r.s != r.end) {
        hxb_json_free(v);
        v = fail(&r, "trailing characters");
    }
    if (!v && cap) {
        char what[128];
        snprintf(what, sizeof what, "%s", r.failed ? err : "error");
        snprintf(err, cap, "%s at byte %zu", what, (size_t)(r.s - text));
    }
    return v;
}

void hxb_json_free(hxb_json *v)
{
    while (v) {
        hxb_json *next = v->next;
        hxb_json_free(v->child);
        free(v->str);
        free(v->key);
        free(v);
        v = next;
    }
}

const hxb_json *hxb_json_get(const hxb_json *obj, const char *key)
{
    if (!obj || obj->type != HXB_JOBJ)
        return NULL;
    for (const hxb_json *m = obj->child; m; m = m->next)
        if (m->key && !strcmp(m->key, key))
            return m;
    return NULL;
}

double hxb_json_num(const hxb_json *v, double dflt) { return v && v->type == HXB_JNUM ? v->num : dflt; }

const char *hxb_json_str(const hxb_json *v, const char *dflt) { return v && v->type == HXB_JSTR ? v->str : dflt; }
