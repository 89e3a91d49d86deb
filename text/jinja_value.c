/* The Jinja engine's values as Python holds them: None, bool, int
 * (64 bits here: past that is an error, not a wrong number), float,
 * str (UTF-8), list and tuple, dict (insertion order), jinja2's Undefined;
 * their truth, equality, order, length and iteration, and str()/repr()
 * as Python writes them.  Everything lives in the render's arena. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja_impl.h"

/* ---- arena ---- */
struct jchunk {
    jchunk *next;
    size_t size, used;
    max_align_t data[];
};

void *ja_alloc(jarena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n > a->cap || a->used > a->cap - n) {
        a->full = 1;
        return NULL;
    }
    jchunk *c = a->head;
    if (!c || c->size - c->used < n) {
        size_t size = n > (1u << 16) ? n : (1u << 16);
        c = malloc(sizeof *c + size);
        if (!c) {
            a->full = 1;
            return NULL;
        }
        c->size = size;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    a->used += n;
    memset(p, 0, n);
    return p;
}

void ja_free(jarena *a)
{
    for (jchunk *c = a->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    a->head = NULL;
    a->used = 0;
}

void *jr_alloc(jr *r, size_t n)
{
    void *p = ja_alloc(&r->arena, n);
    if (!p)
        jr_limit(r, "memory (bytes of values)", r->lim.max_memory);
    return p;
}

/* ---- constructors ---- */
jv jv_undef(const char *name) { return (jv){.t = JV_UNDEF, .u.undef = name}; }
jv jv_none(void) { return (jv){.t = JV_NONE}; }
jv jv_bool(int b) { return (jv){.t = JV_BOOL, .u.i = !!b}; }
jv jv_int(int64_t i) { return (jv){.t = JV_INT, .u.i = i}; }
jv jv_float(double f) { return (jv){.t = JV_FLOAT, .u.f = f}; }

jv jv_str(jr *r, const char *s, size_t n)
{
    jstr *js = jr_alloc(r, sizeof *js + n + 1);
    js->len = n;
    if (n)
        memcpy(js->s, s, n);
    return (jv){.t = JV_STR, .u.s = js};
}

jv jv_cstr(jr *r, const char *s) { return jv_str(r, s, strlen(s)); }

jv jv_list(jr *r, size_t cap)
{
    jlist *l = jr_alloc(r, sizeof *l);
    if (cap) {
        l->v = jr_alloc(r, cap * sizeof *l->v);
        l->cap = cap;
    }
    return (jv){.t = JV_LIST, .u.l = l};
}

jv jv_dict(jr *r, size_t cap)
{
    jdict *d = jr_alloc(r, sizeof *d);
    if (cap) {
        d->k = jr_alloc(r, cap * sizeof *d->k);
        d->v = jr_alloc(r, cap * sizeof *d->v);
        d->cap = cap;
    }
    return (jv){.t = JV_DICT, .u.d = d};
}

jv jv_native(jr *r, const char *name, jnative fn, jv self)
{
    jfunc *f = jr_alloc(r, sizeof *f);
    f->name = name;
    f->native = fn;
    f->self = self;
    return (jv){.t = JV_FUNC, .u.fn = f};
}

void jl_push(jr *r, jlist *l, jv v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        jv *nv = jr_alloc(r, cap * sizeof *nv);
        if (l->n)
            memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv, l->cap = cap;
    }
    l->v[l->n++] = v;
}

jv *jd_get(jdict *d, const char *key)
{
    size_t n = strlen(key);
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == JV_STR && d->k[i].u.s->len == n && !memcmp(d->k[i].u.s->s, key, n))
            return &d->v[i];
    return NULL;
}

jv *jd_find(jr *r, jdict *d, jv key)
{
    (void)r;
    for (size_t i = 0; i < d->n; i++)
        if (jv_equal(d->k[i], key))
            return &d->v[i];
    return NULL;
}

void jd_set(jr *r, jdict *d, jv key, jv val)
{
    jv *old = jd_find(r, d, key);
    if (old) {
        *old = val;
        return;
    }
    jd_append(r, d, key, val);
}

void jd_append(jr *r, jdict *d, jv key, jv val)
{
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        jv *k = jr_alloc(r, cap * sizeof *k), *v = jr_alloc(r, cap * sizeof *v);
        if (d->n) {
            memcpy(k, d->k, d->n * sizeof *k);
            memcpy(v, d->v, d->n * sizeof *v);
        }
        d->k = k, d->v = v, d->cap = cap;
    }
    d->k[d->n] = key;
    d->v[d->n++] = val;
}

void jd_set_str(jr *r, jdict *d, const char *key, jv val)
{
    jv *old = jd_get(d, key);
    if (old)
        *old = val;
    else
        jd_set(r, d, jv_cstr(r, key), val);
}

/* ---- Python's rules ---- */
const char *jv_type_name(jv v)
{
    switch (v.t) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST: return v.flags & JF_TUPLE ? "tuple" : v.flags & JF_GEN ? "generator" : "list";
    case JV_DICT: return v.flags & JF_NS ? "Namespace" : "dict";
    case JV_FUNC: return "function";
    case JV_LOOP: return "LoopContext";
    }
    return "?";
}

int jv_is_str(jv v) { return v.t == JV_STR; }

int jv_truthy(jv v)
{
    switch (v.t) {
    case JV_UNDEF:
    case JV_NONE: return 0;
    case JV_BOOL:
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0;
    case JV_STR: return v.u.s->len != 0;
    case JV_LIST: return (v.flags & JF_GEN) || v.u.l->n != 0;
    case JV_DICT: return (v.flags & JF_NS) || v.u.d->n != 0;
    default: return 1;
    }
}

static int is_num(jv v) { return v.t == JV_BOOL || v.t == JV_INT || v.t == JV_FLOAT; }
static double num(jv v) { return v.t == JV_FLOAT ? v.u.f : (double)v.u.i; }

int jv_equal(jv a, jv b)
{
    if (is_num(a) && is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT)
            return a.u.i == b.u.i;
        return num(a) == num(b);
    }
    if (a.t != b.t)
        return 0;
    switch (a.t) {
    case JV_UNDEF:
    case JV_NONE: return 1;
    case JV_STR: return a.u.s->len == b.u.s->len && !memcmp(a.u.s->s, b.u.s->s, a.u.s->len);
    case JV_LIST:
        if ((a.flags & JF_GEN) || (b.flags & JF_GEN))
            return a.u.l == b.u.l;
        if ((a.flags & JF_TUPLE) != (b.flags & JF_TUPLE) || a.u.l->n != b.u.l->n)
            return 0;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!jv_equal(a.u.l->v[i], b.u.l->v[i]))
                return 0;
        return 1;
    case JV_DICT:
        if (a.u.d == b.u.d)
            return 1;
        if ((a.flags & JF_NS) || (b.flags & JF_NS) || a.u.d->n != b.u.d->n)
            return 0;
        for (size_t i = 0; i < a.u.d->n; i++) {
            jv *o = jd_find(NULL, b.u.d, a.u.d->k[i]);
            if (!o || !jv_equal(a.u.d->v[i], *o))
                return 0;
        }
        return 1;
    default: return a.u.fn == b.u.fn;
    }
}

int jv_compare(jr *r, jv a, jv b)
{
    if (is_num(a) && is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT)
            return (a.u.i > b.u.i) - (a.u.i < b.u.i);
        double x = num(a), y = num(b);
        return (x > y) - (x < y);
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        size_t n = a.u.s->len < b.u.s->len ? a.u.s->len : b.u.s->len;
        int c = memcmp(a.u.s->s, b.u.s->s, n);
        if (c)
            return c;
        return (a.u.s->len > b.u.s->len) - (a.u.s->len < b.u.s->len);
    }
    if (a.t == JV_LIST && b.t == JV_LIST) {
        for (size_t i = 0; i < a.u.l->n && i < b.u.l->n; i++) {
            if (!jv_equal(a.u.l->v[i], b.u.l->v[i]))
                return jv_compare(r, a.u.l->v[i], b.u.l->v[i]);
        }
        return (a.u.l->n > b.u.l->n) - (a.u.l->n < b.u.l->n);
    }
    jr_fail(r, "'<' is not supported between instances of '%s' and '%s'", jv_type_name(a), jv_type_name(b));
}

size_t utf8_count(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

jlist *jv_iter(jr *r, jv v)
{
    switch (v.t) {
    case JV_UNDEF: return jv_list(r, 0).u.l;
    case JV_LIST: return v.u.l;
    case JV_DICT: {
        if (v.flags & JF_NS)
            break;
        jlist *l = jv_list(r, v.u.d->n).u.l;
        jcopy(l->v, v.u.d->k, v.u.d->n * sizeof *l->v);
        l->n = v.u.d->n;
        return l;
    }
    case JV_STR: {
        const jstr *s = v.u.s;
        jlist *l = jv_list(r, utf8_count(s->s, s->len)).u.l;
        for (size_t i = 0; i < s->len;) {
            size_t k = 1;
            while (i + k < s->len && ((unsigned char)s->s[i + k] & 0xC0) == 0x80)
                k++;
            l->v[l->n++] = jv_str(r, s->s + i, k);
            i += k;
        }
        return l;
    }
    default: break;
    }
    jr_fail(r, "'%s' object is not iterable", jv_type_name(v));
}

size_t jv_length(jr *r, jv v)
{
    switch (v.t) {
    case JV_UNDEF: return 0;
    case JV_STR: return utf8_count(v.u.s->s, v.u.s->len);
    case JV_LIST:
        if (!(v.flags & JF_GEN))
            return v.u.l->n;
        break;
    case JV_DICT:
        if (!(v.flags & JF_NS))
            return v.u.d->n;
        break;
    default: break;
    }
    jr_fail(r, "object of type '%s' has no len()", jv_type_name(v));
}

/* ---- text buffers ---- */
jbuf *jb_new(jr *r) { return jr_alloc(r, sizeof(jbuf)); }

void jb_put(jr *r, jbuf *b, const char *s, size_t n)
{
    if (!n)
        return;
    if (n > r->lim.max_output || b->len > r->lim.max_output - n)
        jr_limit(r, "output size (bytes)", r->lim.max_output);
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *ns = jr_alloc(r, cap);
        if (b->len)
            memcpy(ns, b->s, b->len);
        b->s = ns, b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void jb_puts(jr *r, jbuf *b, const char *s) { jb_put(r, b, s, strlen(s)); }

jv jb_value(jr *r, jbuf *b) { return jv_str(r, b->s ? b->s : "", b->len); }

/* ---- str() and repr() ---- */

/* Python's repr of a float: the shortest digits that read back the same,
 * in exponent form below 1e-4 and from 1e16. */
void fmt_float(char *out, size_t cap, double f)
{
    if (isnan(f)) {
        snprintf(out, cap, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(out, cap, f < 0 ? "-inf" : "inf");
        return;
    }
    if (f == 0) {
        snprintf(out, cap, signbit(f) ? "-0.0" : "0.0");
        return;
    }
    char e[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, f);
        if (strtod(e, NULL) == f)
            break;
    }
    /* e: [-]d.ddde[+-]XX; split into digits and exponent. */
    char digits[24];
    int nd = 0, neg = e[0] == '-';
    const char *p = e + neg;
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = '\0';
    int exp = atoi(p + 1);
    size_t k = 0;
    if (neg)
        out[k++] = '-';
    if (exp < -4 || exp >= 16) {
        out[k++] = digits[0];
        if (nd > 1) {
            out[k++] = '.';
            for (int i = 1; i < nd; i++)
                out[k++] = digits[i];
        }
        snprintf(out + k, cap - k, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
        return;
    }
    if (exp < 0) {
        out[k++] = '0';
        out[k++] = '.';
        for (int i = 0; i < -exp - 1; i++)
            out[k++] = '0';
        for (int i = 0; i < nd; i++)
            out[k++] = digits[i];
    } else {
        for (int i = 0; i <= exp; i++)
            out[k++] = i < nd ? digits[i] : '0';
        out[k++] = '.';
        if (nd > exp + 1)
            for (int i = exp + 1; i < nd; i++)
                out[k++] = digits[i];
        else
            out[k++] = '0';
    }
    out[k] = '\0';
}

static void write_str_repr(jr *r, jbuf *b, const jstr *s)
{
    int has_sq = memchr(s->s, '\'', s->len) != NULL, has_dq = memchr(s->s, '"', s->len) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    jb_put(r, b, &q, 1);
    size_t from = 0;
    for (size_t i = 0; i < s->len; i++) {
        unsigned char c = (unsigned char)s->s[i];
        const char *esc = NULL;
        char hex[8];
        if (c == '\\')
            esc = "\\\\";
        else if (c == (unsigned char)q)
            esc = q == '\'' ? "\\'" : "\\\"";
        else if (c == '\n')
            esc = "\\n";
        else if (c == '\r')
            esc = "\\r";
        else if (c == '\t')
            esc = "\\t";
        else if (c < 0x20 || c == 0x7f) {
            snprintf(hex, sizeof hex, "\\x%02x", c);
            esc = hex;
        }
        if (esc) {
            jb_put(r, b, s->s + from, i - from);
            jb_puts(r, b, esc);
            from = i + 1;
        }
    }
    jb_put(r, b, s->s + from, s->len - from);
    jb_put(r, b, &q, 1);
}

static void write_any(jr *r, jbuf *b, jv v, int repr);

static void write_one(jr *r, jbuf *b, jv v, int repr)
{
    char tmp[64];
    switch (v.t) {
    case JV_UNDEF: return;
    case JV_NONE: jb_puts(r, b, "None"); return;
    case JV_BOOL: jb_puts(r, b, v.u.i ? "True" : "False"); return;
    case JV_INT:
        snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i);
        jb_puts(r, b, tmp);
        return;
    case JV_FLOAT:
        fmt_float(tmp, sizeof tmp, v.u.f);
        jb_puts(r, b, tmp);
        return;
    case JV_STR:
        if (repr)
            write_str_repr(r, b, v.u.s);
        else
            jb_put(r, b, v.u.s->s, v.u.s->len);
        return;
    case JV_LIST: {
        if (v.flags & JF_GEN) {
            jb_puts(r, b, "<generator object>");
            return;
        }
        int tuple = v.flags & JF_TUPLE;
        jb_puts(r, b, tuple ? "(" : "[");
        for (size_t i = 0; i < v.u.l->n; i++) {
            jr_step(r);
            if (i)
                jb_puts(r, b, ", ");
            write_any(r, b, v.u.l->v[i], 1);
        }
        jb_puts(r, b, tuple ? (v.u.l->n == 1 ? ",)" : ")") : "]");
        return;
    }
    case JV_DICT: {
        if (v.flags & JF_NS)
            jb_puts(r, b, "<Namespace ");
        jb_puts(r, b, "{");
        for (size_t i = 0; i < v.u.d->n; i++) {
            jr_step(r);
            if (i)
                jb_puts(r, b, ", ");
            write_any(r, b, v.u.d->k[i], 1);
            jb_puts(r, b, ": ");
            write_any(r, b, v.u.d->v[i], 1);
        }
        jb_puts(r, b, v.flags & JF_NS ? "}>" : "}");
        return;
    }
    case JV_FUNC:
        jb_puts(r, b, "<function ");
        jb_puts(r, b, v.u.fn->name ? v.u.fn->name : "?");
        jb_puts(r, b, ">");
        return;
    case JV_LOOP: jb_puts(r, b, "<LoopContext>"); return;
    }
}

/* Containers nest as deep as the render's depth limit allows: a namespace
 * may hold itself. */
static void write_any(jr *r, jbuf *b, jv v, int repr)
{
    if (++r->depth > r->lim.max_depth)
        jr_limit(r, "depth (nested calls, expressions and values)", r->lim.max_depth);
    write_one(r, b, v, repr);
    r->depth--;
}

void jv_write_str(jr *r, jbuf *b, jv v) { write_any(r, b, v, 0); }
void jv_write_repr(jr *r, jbuf *b, jv v) { write_any(r, b, v, 1); }

jv jv_to_str(jr *r, jv v)
{
    if (v.t == JV_STR)
        return v;
    jbuf b = {0};
    write_any(r, &b, v, 0);
    return jb_value(r, &b);
}
