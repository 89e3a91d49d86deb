/* jinja2's built-in filters that chat templates use, with jinja2's
 * semantics (jinja2/filters.py), and transformers' tojson in place of
 * jinja2's (json.dumps with ensure_ascii=False, no HTML escaping). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja_impl.h"

/* Python's str.isspace() for the ASCII range, which chat text uses. */
int jinja_isspace(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

static jv need_str(jr *r, jv v, const char *what)
{
    if (v.t == JV_UNDEF)
        return jv_str(r, "", 0);
    if (v.t != JV_STR)
        return jv_to_str(r, v);
    (void)what;
    return v;
}

/* str.strip/lstrip/rstrip: which = 1 left, 2 right, 3 both. */
jv jinja_strip(jr *r, jv s, jv chars, int which)
{
    const char *p = s.u.s->s;
    size_t a = 0, b = s.u.s->len;
    int custom = chars.t == JV_STR;
    if (chars.t != JV_STR && chars.t != JV_NONE && chars.t != JV_UNDEF)
        jr_fail(r, "strip arg must be None or str");
#define STRIPPED(c) (custom ? memchr(chars.u.s->s, (c), chars.u.s->len) != NULL && (c) : jinja_isspace((unsigned char)(c)))
    if (which & 1)
        while (a < b && STRIPPED(p[a]))
            a++;
    if (which & 2)
        while (b > a && STRIPPED(p[b - 1]))
            b--;
#undef STRIPPED
    return jv_str(r, p + a, b - a);
}

static jv f_trim(jr *r, jv v, jargs *a)
{
    return jinja_strip(r, need_str(r, v, "trim"), ja_arg(a, 0, "chars", jv_none()), 3);
}

static jv f_length(jr *r, jv v, jargs *a) { return jv_int((int64_t)jv_length(r, v)); }

static jv f_string(jr *r, jv v, jargs *a) { return need_str(r, v, "string"); }

static jv f_safe(jr *r, jv v, jargs *a)
{
    v = need_str(r, v, "safe");
    v.flags |= JF_SAFE;
    return v;
}

static jv f_tojson(jr *r, jv v, jargs *a)
{
    jjson_opts o = {.ensure_ascii = 0, .item_sep = ", ", .key_sep = ": "};
    jv ea = ja_arg(a, 0, "ensure_ascii", jv_bool(0)), ind = ja_arg(a, 1, "indent", jv_none()),
       sep = ja_arg(a, 2, "separators", jv_none()), sk = ja_arg(a, 3, "sort_keys", jv_bool(0));
    o.ensure_ascii = jv_truthy(ea);
    o.sort_keys = jv_truthy(sk);
    if (ind.t == JV_INT || ind.t == JV_BOOL) {
        int64_t n = ind.u.i < 0 ? 0 : ind.u.i > 64 ? 64 : ind.u.i;
        char *s = jr_alloc(r, (size_t)n + 1);
        memset(s, ' ', (size_t)n);
        o.indent = s;
    } else if (ind.t == JV_STR) {
        o.indent = ind.u.s->s;
    } else if (ind.t != JV_NONE && ind.t != JV_UNDEF) {
        jr_fail(r, "tojson: indent must be an integer or a string");
    }
    if (o.indent)
        o.item_sep = ",";
    if (sep.t == JV_LIST && sep.u.l->n == 2 && sep.u.l->v[0].t == JV_STR && sep.u.l->v[1].t == JV_STR) {
        o.item_sep = sep.u.l->v[0].u.s->s;
        o.key_sep = sep.u.l->v[1].u.s->s;
    } else if (sep.t != JV_NONE && sep.t != JV_UNDEF) {
        jr_fail(r, "tojson: separators must be a pair of strings");
    }
    jbuf b = {0};
    jv_write_json(r, &b, v, &o, 0);
    return jb_value(r, &b);
}

static jv f_join(jr *r, jv v, jargs *a)
{
    jv sep = ja_arg(a, 0, "d", jv_str(r, "", 0)), attr = ja_arg(a, 1, "attribute", jv_none());
    jlist *l = jv_iter(r, v);
    jbuf b = {0};
    sep = need_str(r, sep, "join");
    for (size_t i = 0; i < l->n; i++) {
        jr_step(r);
        if (i)
            jb_put(r, &b, sep.u.s->s, sep.u.s->len);
        jv item = l->v[i];
        if (attr.t != JV_NONE)
            item = jr_getitem(r, item, attr);
        jv_write_str(r, &b, item);
    }
    return jb_value(r, &b);
}

/* An attribute path "a.b" or an index, looked up as jinja2's make_attrgetter does. */
static jv get_path(jr *r, jv item, jv attr)
{
    if (attr.t != JV_STR)
        return jr_getitem(r, item, attr);
    const char *p = attr.u.s->s;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        jv key;
        if (n && isdigit((unsigned char)p[0]) && strspn(p, "0123456789") == n)
            key = jv_int(strtoll(p, NULL, 10));
        else
            key = jv_str(r, p, n);
        item = jr_getitem(r, item, key);
        if (!dot)
            return item;
        p = dot + 1;
    }
}

/* select/reject/selectattr/rejectattr: keep the items where the test (or
 * truth) is `keep`. */
static jv select_common(jr *r, jv v, jargs *a, int by_attr, int keep)
{
    size_t first = by_attr ? 1 : 0;
    jv attr = by_attr ? ja_arg(a, 0, NULL, jv_undef(NULL)) : jv_none();
    if (by_attr && attr.t == JV_UNDEF)
        jr_fail(r, "selectattr/rejectattr need an attribute");
    jtest_fn test = NULL;
    jargs targs = {0};
    if (a->npos > first) {
        jv name = a->pos[first];
        if (name.t != JV_STR)
            jr_fail(r, "a test name must be a string");
        if (!(test = jinja_test(name.u.s->s)))
            jr_fail(r, "no test named '%s'", name.u.s->s);
        targs.pos = a->pos + first + 1;
        targs.npos = a->npos - first - 1;
    }
    /* jinja2 iterates only a true value: none selects nothing. */
    jlist *l = jv_truthy(v) ? jv_iter(r, v) : jv_list(r, 0).u.l;
    jv out = jv_list(r, 0);
    out.flags = JF_GEN;
    for (size_t i = 0; i < l->n; i++) {
        jr_step(r);
        jv x = by_attr ? get_path(r, l->v[i], attr) : l->v[i];
        int ok = test ? test(r, x, &targs) : jv_truthy(x);
        if (ok == keep)
            jl_push(r, out.u.l, l->v[i]);
    }
    return out;
}

static jv f_selectattr(jr *r, jv v, jargs *a) { return select_common(r, v, a, 1, 1); }
static jv f_rejectattr(jr *r, jv v, jargs *a) { return select_common(r, v, a, 1, 0); }
static jv f_select(jr *r, jv v, jargs *a) { return select_common(r, v, a, 0, 1); }
static jv f_reject(jr *r, jv v, jargs *a) { return select_common(r, v, a, 0, 0); }

static jv f_map(jr *r, jv v, jargs *a)
{
    jlist *l = jv_truthy(v) ? jv_iter(r, v) : jv_list(r, 0).u.l;
    jv out = jv_list(r, l->n);
    out.flags = JF_GEN;
    jv attr = ja_arg(a, SIZE_MAX, "attribute", jv_undef(NULL));
    if (attr.t != JV_UNDEF) {
        jv def = ja_arg(a, SIZE_MAX, "default", jv_undef(NULL));
        for (size_t i = 0; i < l->n; i++) {
            jr_step(r);
            jv x = get_path(r, l->v[i], attr);
            out.u.l->v[out.u.l->n++] = x.t == JV_UNDEF && def.t != JV_UNDEF ? def : x;
        }
        return out;
    }
    if (!a->npos || a->pos[0].t != JV_STR)
        jr_fail(r, "map needs a filter name or attribute=");
    jfilter_fn f = jinja_filter(a->pos[0].u.s->s);
    if (!f)
        jr_fail(r, "no filter named '%s'", a->pos[0].u.s->s);
    jargs fa = {.pos = a->pos + 1, .npos = a->npos - 1, .kwn = a->kwn, .kwv = a->kwv, .nkw = a->nkw};
    for (size_t i = 0; i < l->n; i++) {
        jr_step(r);
        out.u.l->v[out.u.l->n++] = f(r, l->v[i], &fa);
    }
    return out;
}

static jv f_first(jr *r, jv v, jargs *a)
{
    jlist *l = jv_iter(r, v);
    return l->n ? l->v[0] : jv_undef("first");
}

static jv f_last(jr *r, jv v, jargs *a)
{
    jlist *l = jv_iter(r, v);
    return l->n ? l->v[l->n - 1] : jv_undef("last");
}

static jv f_default(jr *r, jv v, jargs *a)
{
    jv def = ja_arg(a, 0, "default_value", jv_str(r, "", 0));
    int boolean = jv_truthy(ja_arg(a, 1, "boolean", jv_bool(0)));
    if (v.t == JV_UNDEF || (boolean && !jv_truthy(v)))
        return def;
    return v;
}

typedef int (*char_map)(int);

static jv map_chars(jr *r, jv s, int mode)
{
    s = need_str(r, s, "case");
    jv out = jv_str(r, s.u.s->s, s.u.s->len);
    char *p = out.u.s->s;
    int word_start = 1;
    for (size_t i = 0; i < out.u.s->len; i++) {
        unsigned char c = (unsigned char)p[i];
        switch (mode) {
        case 0: p[i] = (char)toupper(c); break;
        case 1: p[i] = (char)tolower(c); break;
        case 2: p[i] = (char)(i == 0 ? toupper(c) : tolower(c)); break;
        case 3: /* title: jinja2 starts a word after whitespace and -({[< */
            p[i] = (char)(word_start ? toupper(c) : tolower(c));
            word_start = jinja_isspace(c) || strchr("-({[<", c) != NULL;
            if (!c)
                word_start = 0;
            break;
        }
    }
    return out;
}

jv jinja_upper(jr *r, jv s) { return map_chars(r, s, 0); }
jv jinja_lower(jr *r, jv s) { return map_chars(r, s, 1); }
jv jinja_capitalize(jr *r, jv s) { return map_chars(r, s, 2); }
jv jinja_title(jr *r, jv s) { return map_chars(r, s, 3); }

static jv f_upper(jr *r, jv v, jargs *a) { return jinja_upper(r, v); }
static jv f_lower(jr *r, jv v, jargs *a) { return jinja_lower(r, v); }
static jv f_capitalize(jr *r, jv v, jargs *a) { return jinja_capitalize(r, v); }
static jv f_title(jr *r, jv v, jargs *a) { return jinja_title(r, v); }

jv jinja_replace(jr *r, jv s, jv old, jv new, jv count)
{
    if (old.t != JV_STR || new.t != JV_STR)
        jr_fail(r, "replace() arguments must be strings");
    int64_t max = count.t == JV_INT ? count.u.i : -1;
    jbuf b = {0};
    const char *p = s.u.s->s, *end = p + s.u.s->len;
    size_t on = old.u.s->len;
    int64_t done = 0;
    if (!on) { /* Python inserts `new` between characters and at both ends */
        for (size_t i = 0; i <= s.u.s->len; i++) {
            if (max < 0 || done < max) {
                jb_put(r, &b, new.u.s->s, new.u.s->len);
                done++;
            }
            if (i < s.u.s->len) {
                size_t k = 1;
                while (i + k < s.u.s->len && ((unsigned char)p[i + k] & 0xC0) == 0x80)
                    k++;
                jb_put(r, &b, p + i, k);
                i += k - 1;
            }
        }
        return jb_value(r, &b);
    }
    while (p < end) {
        const char *q = (max < 0 || done < max) ? memmem(p, (size_t)(end - p), old.u.s->s, on) : NULL;
        if (!q)
            break;
        jb_put(r, &b, p, (size_t)(q - p));
        jb_put(r, &b, new.u.s->s, new.u.s->len);
        p = q + on;
        done++;
    }
    jb_put(r, &b, p, (size_t)(end - p));
    return jb_value(r, &b);
}

static jv f_replace(jr *r, jv v, jargs *a)
{
    v = need_str(r, v, "replace");
    return jinja_replace(r, v, ja_arg(a, 0, "old", jv_undef(NULL)), ja_arg(a, 1, "new", jv_undef(NULL)),
                         ja_arg(a, 2, "count", jv_none()));
}

jv jinja_escape(jr *r, jv v)
{
    if (v.t == JV_STR && (v.flags & JF_SAFE))
        return v;
    v = need_str(r, v, "escape");
    jbuf b = {0};
    for (size_t i = 0; i < v.u.s->len; i++) {
        char c = v.u.s->s[i];
        switch (c) {
        case '&': jb_puts(r, &b, "&amp;"); break;
        case '<': jb_puts(r, &b, "&lt;"); break;
        case '>': jb_puts(r, &b, "&gt;"); break;
        case '"': jb_puts(r, &b, "&#34;"); break;
        case '\'': jb_puts(r, &b, "&#39;"); break;
        default: jb_put(r, &b, &c, 1);
        }
    }
    jv out = jb_value(r, &b);
    out.flags |= JF_SAFE;
    return out;
}

static jv f_escape(jr *r, jv v, jargs *a) { return jinja_escape(r, v); }

static jv f_int(jr *r, jv v, jargs *a)
{
    jv def = ja_arg(a, 0, "default", jv_int(0));
    switch (v.t) {
    case JV_INT: return v;
    case JV_BOOL: return jv_int(v.u.i);
    case JV_FLOAT:
        if (!isfinite(v.u.f) || fabs(v.u.f) >= 9.2e18)
            return def;
        return jv_int((int64_t)v.u.f);
    case JV_STR: {
        char *end;
        const char *s = v.u.s->s;
        while (jinja_isspace((unsigned char)*s))
            s++;
        long long i = strtoll(s, &end, 10);
        while (jinja_isspace((unsigned char)*end))
            end++;
        if (end != s && !*end)
            return jv_int(i);
        double f = strtod(s, &end);
        while (jinja_isspace((unsigned char)*end))
            end++;
        if (end != s && !*end && isfinite(f) && fabs(f) < 9.2e18)
            return jv_int((int64_t)f);
        return def;
    }
    default: return def;
    }
}

static jv f_float(jr *r, jv v, jargs *a)
{
    jv def = ja_arg(a, 0, "default", jv_float(0));
    if (v.t == JV_FLOAT)
        return v;
    if (v.t == JV_INT || v.t == JV_BOOL)
        return jv_float((double)v.u.i);
    if (v.t == JV_STR) {
        char *end;
        double f = strtod(v.u.s->s, &end);
        if (end != v.u.s->s && !*end)
            return jv_float(f);
    }
    return def;
}

static jv f_list(jr *r, jv v, jargs *a)
{
    if (v.t == JV_STR)
        v.flags &= (uint8_t)~JF_SAFE;
    jlist *l = jv_iter(r, v);
    jv out = jv_list(r, l->n);
    jcopy(out.u.l->v, l->v, l->n * sizeof(jv));
    out.u.l->n = l->n;
    return out;
}

static jv pair(jr *r, jv k, jv v)
{
    jv t = jv_list(r, 2);
    t.flags = JF_TUPLE;
    t.u.l->v[0] = k;
    t.u.l->v[1] = v;
    t.u.l->n = 2;
    return t;
}

jv jinja_items(jr *r, jv v)
{
    if (v.t == JV_UNDEF)
        return jv_list(r, 0);
    if (v.t != JV_DICT || (v.flags & JF_NS))
        jr_fail(r, "can only get item pairs from a mapping, not %s", jv_type_name(v));
    jv out = jv_list(r, v.u.d->n);
    for (size_t i = 0; i < v.u.d->n; i++)
        out.u.l->v[i] = pair(r, v.u.d->k[i], v.u.d->v[i]);
    out.u.l->n = v.u.d->n;
    return out;
}

static jv f_items(jr *r, jv v, jargs *a) { return jinja_items(r, v); }

/* Sort keys: jinja2 lowers strings unless case_sensitive. */
static jv sort_key(jr *r, jv v, int case_sensitive)
{
    return !case_sensitive && v.t == JV_STR ? jinja_lower(r, v) : v;
}

/* A stable merge sort of `v` (n values) by `keys`. */
static void sort_by(jr *r, jv *v, jv *keys, size_t n, int reverse)
{
    if (n < 2)
        return;
    jv *tv = jr_alloc(r, n * sizeof *tv), *tk = jr_alloc(r, n * sizeof *tk);
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                jr_step(r);
                int c = jv_compare(r, keys[j], keys[i]);
                if (reverse ? c > 0 : c < 0)
                    tv[k] = v[j], tk[k++] = keys[j++];
                else
                    tv[k] = v[i], tk[k++] = keys[i++];
            }
            while (i < mid)
                tv[k] = v[i], tk[k++] = keys[i++];
            while (j < hi)
                tv[k] = v[j], tk[k++] = keys[j++];
        }
        memcpy(v, tv, n * sizeof *v);
        memcpy(keys, tk, n * sizeof *keys);
    }
}

static jv f_dictsort(jr *r, jv v, jargs *a)
{
    int cs = jv_truthy(ja_arg(a, 0, "case_sensitive", jv_bool(0)));
    jv by = ja_arg(a, 1, "by", jv_undef(NULL));
    int reverse = jv_truthy(ja_arg(a, 2, "reverse", jv_bool(0)));
    int by_value = by.t == JV_STR && !strcmp(by.u.s->s, "value");
    jv items = jinja_items(r, v);
    jlist *l = items.u.l;
    jv *keys = jr_alloc(r, (l->n + 1) * sizeof *keys);
    for (size_t i = 0; i < l->n; i++)
        keys[i] = sort_key(r, l->v[i].u.l->v[by_value], cs);
    sort_by(r, l->v, keys, l->n, reverse);
    return items;
}

static jv f_sort(jr *r, jv v, jargs *a)
{
    int reverse = jv_truthy(ja_arg(a, 0, "reverse", jv_bool(0)));
    int cs = jv_truthy(ja_arg(a, 1, "case_sensitive", jv_bool(0)));
    jv attr = ja_arg(a, 2, "attribute", jv_none());
    jv out = f_list(r, v, a);
    jlist *l = out.u.l;
    jv *keys = jr_alloc(r, (l->n + 1) * sizeof *keys);
    for (size_t i = 0; i < l->n; i++)
        keys[i] = sort_key(r, attr.t == JV_NONE ? l->v[i] : get_path(r, l->v[i], attr), cs);
    sort_by(r, l->v, keys, l->n, reverse);
    return out;
}

static jv f_unique(jr *r, jv v, jargs *a)
{
    int cs = jv_truthy(ja_arg(a, 0, "case_sensitive", jv_bool(0)));
    jv attr = ja_arg(a, 1, "attribute", jv_none());
    jlist *l = jv_iter(r, v);
    jv out = jv_list(r, 0), seen = jv_list(r, 0);
    for (size_t i = 0; i < l->n; i++) {
        jv key = sort_key(r, attr.t == JV_NONE ? l->v[i] : get_path(r, l->v[i], attr), cs);
        int dup = 0;
        for (size_t k = 0; k < seen.u.l->n && !dup; k++) {
            jr_step(r);
            dup = jv_equal(seen.u.l->v[k], key);
        }
        if (!dup) {
            jl_push(r, seen.u.l, key);
            jl_push(r, out.u.l, l->v[i]);
        }
    }
    return out;
}

static jv f_reverse(jr *r, jv v, jargs *a)
{
    if (v.t == JV_STR) {
        jlist *c = jv_iter(r, v);
        jbuf b = {0};
        for (size_t i = c->n; i-- > 0;)
            jb_put(r, &b, c->v[i].u.s->s, c->v[i].u.s->len);
        return jb_value(r, &b);
    }
    jlist *l = jv_iter(r, v);
    jv out = jv_list(r, l->n);
    for (size_t i = 0; i < l->n; i++)
        out.u.l->v[i] = l->v[l->n - 1 - i];
    out.u.l->n = l->n;
    return out;
}

static jv f_abs(jr *r, jv v, jargs *a)
{
    if (v.t == JV_INT || v.t == JV_BOOL) {
        if (v.u.i == INT64_MIN)
            jr_fail(r, "integer overflow");
        return jv_int(v.u.i < 0 ? -v.u.i : v.u.i);
    }
    if (v.t == JV_FLOAT)
        return jv_float(fabs(v.u.f));
    jr_fail(r, "bad operand type for abs(): '%s'", jv_type_name(v));
}

static jv f_round(jr *r, jv v, jargs *a)
{
    jv prec = ja_arg(a, 0, "precision", jv_int(0)), method = ja_arg(a, 1, "method", jv_undef(NULL));
    if (v.t != JV_FLOAT && v.t != JV_INT && v.t != JV_BOOL)
        jr_fail(r, "round needs a number, not %s", jv_type_name(v));
    double x = v.t == JV_FLOAT ? v.u.f : (double)v.u.i, m = pow(10, (double)(prec.t == JV_INT ? prec.u.i : 0));
    const char *how = method.t == JV_STR ? method.u.s->s : "common";
    double y = !strcmp(how, "floor") ? floor(x * m) / m
               : !strcmp(how, "ceil") ? ceil(x * m) / m
                                      : round(x * m) / m;
    return jv_float(y);
}

static jv f_indent(jr *r, jv v, jargs *a)
{
    jv width = ja_arg(a, 0, "width", jv_int(4));
    int first = jv_truthy(ja_arg(a, 1, "first", jv_bool(0))), blank = jv_truthy(ja_arg(a, 2, "blank", jv_bool(0)));
    jv pad;
    if (width.t == JV_STR) {
        pad = width;
    } else if (width.t == JV_INT) {
        int64_t n = width.u.i < 0 ? 0 : width.u.i > 256 ? 256 : width.u.i;
        char sp[257];
        memset(sp, ' ', (size_t)n);
        pad = jv_str(r, sp, (size_t)n);
    } else {
        jr_fail(r, "indent width must be an integer or a string");
    }
    v = need_str(r, v, "indent");
    jbuf b = {0};
    const char *p = v.u.s->s, *end = p + v.u.s->len;
    int line = 0;
    while (p <= end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        int empty = e == p;
        if ((line > 0 || first) && (blank || !empty))
            jb_put(r, &b, pad.u.s->s, pad.u.s->len);
        jb_put(r, &b, p, (size_t)(e - p));
        if (!nl)
            break;
        jb_put(r, &b, "\n", 1);
        p = nl + 1;
        line++;
    }
    return jb_value(r, &b);
}

static jv f_wordcount(jr *r, jv v, jargs *a)
{
    v = need_str(r, v, "wordcount");
    int64_t n = 0;
    int in = 0;
    for (size_t i = 0; i < v.u.s->len; i++) {
        int w = isalnum((unsigned char)v.u.s->s[i]) || v.u.s->s[i] == '_' || (unsigned char)v.u.s->s[i] >= 0x80;
        if (w && !in)
            n++;
        in = w;
    }
    return jv_int(n);
}

static jv min_max(jr *r, jv v, jargs *a, int want)
{
    int cs = jv_truthy(ja_arg(a, 0, "case_sensitive", jv_bool(0)));
    jv attr = ja_arg(a, 1, "attribute", jv_none());
    jlist *l = jv_iter(r, v);
    if (!l->n)
        return jv_undef(want < 0 ? "min" : "max");
    size_t best = 0;
    jv bk = sort_key(r, attr.t == JV_NONE ? l->v[0] : get_path(r, l->v[0], attr), cs);
    for (size_t i = 1; i < l->n; i++) {
        jv k = sort_key(r, attr.t == JV_NONE ? l->v[i] : get_path(r, l->v[i], attr), cs);
        int c = jv_compare(r, k, bk);
        if (want < 0 ? c < 0 : c > 0)
            best = i, bk = k;
    }
    return l->v[best];
}

static jv f_min(jr *r, jv v, jargs *a) { return min_max(r, v, a, -1); }
static jv f_max(jr *r, jv v, jargs *a) { return min_max(r, v, a, 1); }

static jv f_sum(jr *r, jv v, jargs *a)
{
    jv attr = ja_arg(a, 0, "attribute", jv_none()), total = ja_arg(a, 1, "start", jv_int(0));
    jlist *l = jv_iter(r, v);
    for (size_t i = 0; i < l->n; i++) {
        jv x = attr.t == JV_NONE ? l->v[i] : get_path(r, l->v[i], attr);
        if ((total.t == JV_INT || total.t == JV_BOOL) && (x.t == JV_INT || x.t == JV_BOOL)) {
            if (__builtin_add_overflow(total.u.i, x.u.i, &total.u.i))
                jr_fail(r, "integer overflow");
            total.t = JV_INT;
        } else if ((total.t == JV_INT || total.t == JV_FLOAT || total.t == JV_BOOL) &&
                   (x.t == JV_INT || x.t == JV_FLOAT || x.t == JV_BOOL)) {
            double t = total.t == JV_FLOAT ? total.u.f : (double)total.u.i;
            total = jv_float(t + (x.t == JV_FLOAT ? x.u.f : (double)x.u.i));
        } else {
            jr_fail(r, "sum: unsupported operand types '%s' and '%s'", jv_type_name(total), jv_type_name(x));
        }
    }
    return total;
}

jv jinja_str_format(jr *r, jv fmt, jv args);

static jv f_format(jr *r, jv v, jargs *a)
{
    v = need_str(r, v, "format");
    jv t = jv_list(r, a->npos);
    t.flags = JF_TUPLE;
    jcopy(t.u.l->v, a->pos, a->npos * sizeof(jv));
    t.u.l->n = a->npos;
    return jinja_str_format(r, v, t);
}

static jv f_center(jr *r, jv v, jargs *a)
{
    v = need_str(r, v, "center");
    jv w = ja_arg(a, 0, "width", jv_int(80));
    size_t n = jv_length(r, v), width = w.t == JV_INT && w.u.i > 0 ? (size_t)w.u.i : 0;
    if (width > r->lim.max_output)
        jr_limit(r, "output size (bytes)", r->lim.max_output);
    if (width <= n)
        return v;
    size_t left = (width - n) / 2 + ((width - n) & width & 1), right = width - n - left;
    jbuf b = {0};
    for (size_t i = 0; i < left; i++)
        jb_put(r, &b, " ", 1);
    jb_put(r, &b, v.u.s->s, v.u.s->len);
    for (size_t i = 0; i < right; i++)
        jb_put(r, &b, " ", 1);
    return jb_value(r, &b);
}

static const struct {
    const char *name;
    jfilter_fn fn;
} FILTERS[] = {
    {"abs", f_abs},
    {"capitalize", f_capitalize},
    {"center", f_center},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", f_dictsort},
    {"e", f_escape},
    {"escape", f_escape},
    {"first", f_first},
    {"float", f_float},
    {"format", f_format},
    {"indent", f_indent},
    {"int", f_int},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", f_lower},
    {"map", f_map},
    {"max", f_max},
    {"min", f_min},
    {"reject", f_reject},
    {"rejectattr", f_rejectattr},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"round", f_round},
    {"safe", f_safe},
    {"select", f_select},
    {"selectattr", f_selectattr},
    {"sort", f_sort},
    {"string", f_string},
    {"sum", f_sum},
    {"title", f_title},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"unique", f_unique},
    {"upper", f_upper},
    {"wordcount", f_wordcount},
};

jfilter_fn jinja_filter(const char *name)
{
    for (size_t i = 0; i < sizeof FILTERS / sizeof FILTERS[0]; i++)
        if (!strcmp(FILTERS[i].name, name))
            return FILTERS[i].fn;
    return NULL;
}
