/* Methods of strings, dicts and lists that chat templates call, as Python
 * has them, under jinja2's ImmutableSandboxedEnvironment: a method that
 * changes a list or a dict (append, pop, update...) is there but refuses
 * to run, as the sandbox refuses it (apply_chat_template renders with
 * that sandbox, so a template that calls one fails there too). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja_impl.h"

int jinja_isspace(unsigned char c);
jv jinja_strip(jr *r, jv s, jv chars, int which);
jv jinja_upper(jr *r, jv s);
jv jinja_lower(jr *r, jv s);
jv jinja_capitalize(jr *r, jv s);
jv jinja_title(jr *r, jv s);
jv jinja_replace(jr *r, jv s, jv old, jv new, jv count);
jv jinja_items(jr *r, jv v);

static jv str_arg(jr *r, jargs *a, size_t i, const char *what)
{
    jv v = ja_arg(a, i, NULL, jv_undef(NULL));
    if (v.t != JV_STR)
        jr_fail(r, "%s expects a string argument, not %s", what, jv_type_name(v));
    return v;
}

static jv m_strip(jr *r, jv s, jargs *a) { return jinja_strip(r, s, ja_arg(a, 0, "chars", jv_none()), 3); }
static jv m_lstrip(jr *r, jv s, jargs *a) { return jinja_strip(r, s, ja_arg(a, 0, "chars", jv_none()), 1); }
static jv m_rstrip(jr *r, jv s, jargs *a) { return jinja_strip(r, s, ja_arg(a, 0, "chars", jv_none()), 2); }
static jv m_upper(jr *r, jv s, jargs *a) { return jinja_upper(r, s); }
static jv m_lower(jr *r, jv s, jargs *a) { return jinja_lower(r, s); }
static jv m_title(jr *r, jv s, jargs *a) { return jinja_title(r, s); }
static jv m_capitalize(jr *r, jv s, jargs *a) { return jinja_capitalize(r, s); }

static jv m_replace(jr *r, jv s, jargs *a)
{
    return jinja_replace(r, s, ja_arg(a, 0, NULL, jv_undef(NULL)), ja_arg(a, 1, NULL, jv_undef(NULL)),
                         ja_arg(a, 2, "count", jv_none()));
}

/* startswith/endswith: a string or a tuple of strings. */
static jv affix(jr *r, jv s, jargs *a, int end)
{
    jv p = ja_arg(a, 0, NULL, jv_undef(NULL));
    jlist one = {1, 1, &p};
    jlist *options = p.t == JV_LIST ? p.u.l : &one;
    for (size_t i = 0; i < options->n; i++) {
        jv o = options->v[i];
        if (o.t != JV_STR)
            jr_fail(r, "%s arg must be str or a tuple of str, not %s", end ? "endswith" : "startswith",
                    jv_type_name(o));
        size_t n = o.u.s->len;
        if (n <= s.u.s->len && !memcmp(s.u.s->s + (end ? s.u.s->len - n : 0), o.u.s->s, n))
            return jv_bool(1);
    }
    return jv_bool(0);
}

static jv m_startswith(jr *r, jv s, jargs *a) { return affix(r, s, a, 0); }
static jv m_endswith(jr *r, jv s, jargs *a) { return affix(r, s, a, 1); }

/* str.split and str.rsplit. */
static jv split(jr *r, jv s, jargs *a, int from_right)
{
    jv sep = ja_arg(a, 0, "sep", jv_none()), maxv = ja_arg(a, 1, "maxsplit", jv_int(-1));
    int64_t max = maxv.t == JV_INT ? maxv.u.i : -1;
    jv out = jv_list(r, 0);
    const char *p = s.u.s->s;
    size_t n = s.u.s->len;
    if (sep.t == JV_NONE || sep.t == JV_UNDEF) {
        /* runs of whitespace; none at either end */
        jv parts = jv_list(r, 0);
        if (!from_right) {
            size_t i = 0;
            int64_t done = 0;
            while (i < n) {
                while (i < n && jinja_isspace((unsigned char)p[i]))
                    i++;
                if (i == n)
                    break;
                if (max >= 0 && done == max) {
                    size_t e = n;
                    while (e > i && jinja_isspace((unsigned char)p[e - 1]))
                        e--;
                    jl_push(r, parts.u.l, jv_str(r, p + i, e - i));
                    break;
                }
                size_t j = i;
                while (j < n && !jinja_isspace((unsigned char)p[j]))
                    j++;
                jl_push(r, parts.u.l, jv_str(r, p + i, j - i));
                done++;
                i = j;
            }
            return parts;
        }
        size_t e = n;
        int64_t done = 0;
        while (e > 0) {
            while (e > 0 && jinja_isspace((unsigned char)p[e - 1]))
                e--;
            if (!e)
                break;
            if (max >= 0 && done == max) {
                size_t b = 0;
                while (b < e && jinja_isspace((unsigned char)p[b]))
                    b++;
                jl_push(r, parts.u.l, jv_str(r, p + b, e - b));
                break;
            }
            size_t b = e;
            while (b > 0 && !jinja_isspace((unsigned char)p[b - 1]))
                b--;
            jl_push(r, parts.u.l, jv_str(r, p + b, e - b));
            done++;
            e = b;
        }
        jlist *l = parts.u.l;
        for (size_t i = 0; i < l->n / 2; i++) {
            jv t = l->v[i];
            l->v[i] = l->v[l->n - 1 - i];
            l->v[l->n - 1 - i] = t;
        }
        return parts;
    }
    if (sep.t != JV_STR)
        jr_fail(r, "must be str or None, not %s", jv_type_name(sep));
    size_t sn = sep.u.s->len;
    if (!sn)
        jr_fail(r, "empty separator");
    if (!from_right) {
        int64_t done = 0;
        const char *q = p, *end = p + n;
        for (;;) {
            jr_step(r);
            const char *hit = (max < 0 || done < max) ? memmem(q, (size_t)(end - q), sep.u.s->s, sn) : NULL;
            if (!hit) {
                jl_push(r, out.u.l, jv_str(r, q, (size_t)(end - q)));
                return out;
            }
            jl_push(r, out.u.l, jv_str(r, q, (size_t)(hit - q)));
            q = hit + sn;
            done++;
        }
    }
    /* rsplit: from the end, then reversed */
    int64_t done = 0;
    size_t e = n;
    for (;;) {
        jr_step(r);
        size_t hit = SIZE_MAX;
        if ((max < 0 || done < max) && e >= sn)
            for (size_t k = e - sn + 1; k-- > 0;)
                if (!memcmp(p + k, sep.u.s->s, sn)) {
                    hit = k;
                    break;
                }
        if (hit == SIZE_MAX) {
            jl_push(r, out.u.l, jv_str(r, p, e));
            break;
        }
        jl_push(r, out.u.l, jv_str(r, p + hit + sn, e - hit - sn));
        e = hit;
        done++;
    }
    jlist *l = out.u.l;
    for (size_t i = 0; i < l->n / 2; i++) {
        jv t = l->v[i];
        l->v[i] = l->v[l->n - 1 - i];
        l->v[l->n - 1 - i] = t;
    }
    return out;
}

static jv m_split(jr *r, jv s, jargs *a) { return split(r, s, a, 0); }
static jv m_rsplit(jr *r, jv s, jargs *a) { return split(r, s, a, 1); }

static jv m_splitlines(jr *r, jv s, jargs *a)
{
    jv out = jv_list(r, 0);
    const char *p = s.u.s->s;
    size_t n = s.u.s->len, i = 0, start = 0;
    while (i < n) {
        if (p[i] == '\n' || p[i] == '\r') {
            jl_push(r, out.u.l, jv_str(r, p + start, i - start));
            if (p[i] == '\r' && i + 1 < n && p[i + 1] == '\n')
                i++;
            start = ++i;
        } else {
            i++;
        }
    }
    if (start < n)
        jl_push(r, out.u.l, jv_str(r, p + start, n - start));
    return out;
}

static jv m_join(jr *r, jv s, jargs *a)
{
    jlist *l = jv_iter(r, ja_arg(a, 0, NULL, jv_undef(NULL)));
    jbuf b = {0};
    for (size_t i = 0; i < l->n; i++) {
        if (l->v[i].t != JV_STR)
            jr_fail(r, "sequence item %zu: expected str instance, %s found", i, jv_type_name(l->v[i]));
        if (i)
            jb_put(r, &b, s.u.s->s, s.u.s->len);
        jb_put(r, &b, l->v[i].u.s->s, l->v[i].u.s->len);
    }
    return jb_value(r, &b);
}

static jv m_find(jr *r, jv s, jargs *a)
{
    jv sub = str_arg(r, a, 0, "find");
    const char *hit = memmem(s.u.s->s, s.u.s->len, sub.u.s->s, sub.u.s->len);
    return jv_int(hit ? (int64_t)utf8_count(s.u.s->s, (size_t)(hit - s.u.s->s)) : -1);
}

static jv m_count(jr *r, jv s, jargs *a)
{
    jv sub = str_arg(r, a, 0, "count");
    if (!sub.u.s->len)
        return jv_int((int64_t)utf8_count(s.u.s->s, s.u.s->len) + 1);
    int64_t n = 0;
    const char *p = s.u.s->s, *end = p + s.u.s->len;
    while ((p = memmem(p, (size_t)(end - p), sub.u.s->s, sub.u.s->len))) {
        n++;
        p += sub.u.s->len;
    }
    return jv_int(n);
}

static jv str_test(jr *r, jv s, int (*pred)(int))
{
    if (!s.u.s->len)
        return jv_bool(0);
    for (size_t i = 0; i < s.u.s->len; i++)
        if (!pred((unsigned char)s.u.s->s[i]))
            return jv_bool(0);
    return jv_bool(1);
}

static int is_sp(int c) { return jinja_isspace((unsigned char)c); }
static jv m_isdigit(jr *r, jv s, jargs *a) { return str_test(r, s, isdigit); }
static jv m_isalpha(jr *r, jv s, jargs *a) { return str_test(r, s, isalpha); }
static jv m_isalnum(jr *r, jv s, jargs *a) { return str_test(r, s, isalnum); }
static jv m_isspace(jr *r, jv s, jargs *a) { return str_test(r, s, is_sp); }

/* ---- formatting ---- */

/* format(value, spec) for the specs templates use: [[fill]align][width][.prec][type]. */
static void format_spec(jr *r, jbuf *b, jv v, const char *spec, size_t n)
{
    if (!n) {
        jv_write_str(r, b, v);
        return;
    }
    char fill = ' ', align = 0, type = 0;
    size_t i = 0;
    if (n >= 2 && strchr("<>^", spec[1]))
        fill = spec[0], align = spec[1], i = 2;
    else if (strchr("<>^", spec[0]))
        align = spec[0], i = 1;
    long width = 0, prec = -1;
    while (i < n && isdigit((unsigned char)spec[i]))
        width = width * 10 + (spec[i++] - '0');
    if (i < n && spec[i] == '.') {
        prec = 0;
        i++;
        while (i < n && isdigit((unsigned char)spec[i]))
            prec = prec * 10 + (spec[i++] - '0');
    }
    if (i < n)
        type = spec[i++];
    if (i != n || width > 4096 || prec > 64)
        jr_fail(r, "format spec '%.*s' is not supported", (int)n, spec);
    jbuf tmp = {0};
    char num[128];
    if (type == 'd' && (v.t == JV_INT || v.t == JV_BOOL)) {
        snprintf(num, sizeof num, "%lld", (long long)v.u.i);
        jb_puts(r, &tmp, num);
    } else if ((type == 'f' || type == 'e' || type == 'g') && (v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL)) {
        char f[8];
        snprintf(f, sizeof f, "%%.%ld%c", prec < 0 ? 6 : prec, type);
        snprintf(num, sizeof num, f, v.t == JV_FLOAT ? v.u.f : (double)v.u.i);
        jb_puts(r, &tmp, num);
    } else if (!type || type == 's') {
        jv_write_str(r, &tmp, v);
        if (prec >= 0 && v.t == JV_STR && (size_t)prec < tmp.len)
            tmp.len = (size_t)prec;
    } else {
        jr_fail(r, "format spec '%.*s' is not supported", (int)n, spec);
    }
    size_t len = tmp.s ? utf8_count(tmp.s, tmp.len) : 0;
    if (!align)
        align = (v.t == JV_INT || v.t == JV_FLOAT) ? '>' : '<';
    size_t padn = (size_t)width > len ? (size_t)width - len : 0;
    size_t left = align == '>' ? padn : align == '^' ? padn / 2 : 0;
    for (size_t k = 0; k < left; k++)
        jb_put(r, b, &fill, 1);
    if (tmp.len)
        jb_put(r, b, tmp.s, tmp.len);
    for (size_t k = left; k < padn; k++)
        jb_put(r, b, &fill, 1);
}

/* str.format: {} {0} {name} with an optional !r/!s and :spec. */
static jv m_format(jr *r, jv s, jargs *a)
{
    jbuf b = {0};
    const char *p = s.u.s->s, *end = p + s.u.s->len;
    size_t auto_i = 0;
    while (p < end) {
        if (*p == '{' && p + 1 < end && p[1] == '{') {
            jb_put(r, &b, "{", 1), p += 2;
            continue;
        }
        if (*p == '}' && p + 1 < end && p[1] == '}') {
            jb_put(r, &b, "}", 1), p += 2;
            continue;
        }
        if (*p == '}')
            jr_fail(r, "Single '}' encountered in format string");
        if (*p != '{') {
            jb_put(r, &b, p++, 1);
            continue;
        }
        const char *close = memchr(p, '}', (size_t)(end - p));
        if (!close)
            jr_fail(r, "Single '{' encountered in format string");
        const char *f = p + 1, *fe = close, *spec = fe;
        const char *colon = memchr(f, ':', (size_t)(fe - f));
        if (colon)
            spec = colon + 1, fe = colon;
        int conv = 0;
        if (fe - f >= 2 && fe[-2] == '!')
            conv = fe[-1], fe -= 2;
        jv v;
        if (fe == f) {
            v = ja_arg(a, auto_i++, NULL, jv_undef(NULL));
            if (auto_i > a->npos)
                jr_fail(r, "Replacement index %zu out of range for positional args tuple", auto_i - 1);
        } else if (isdigit((unsigned char)*f)) {
            size_t i = (size_t)strtoul(f, NULL, 10);
            if (i >= a->npos)
                jr_fail(r, "Replacement index %zu out of range for positional args tuple", i);
            v = a->pos[i];
        } else {
            char name[128];
            size_t n = (size_t)(fe - f) < sizeof name - 1 ? (size_t)(fe - f) : sizeof name - 1;
            memcpy(name, f, n);
            name[n] = '\0';
            v = ja_arg(a, SIZE_MAX, name, jv_undef(NULL));
            if (v.t == JV_UNDEF)
                jr_fail(r, "format: no argument '%s'", name);
        }
        if (conv == 'r') {
            jbuf rb = {0};
            jv_write_repr(r, &rb, v);
            v = jb_value(r, &rb);
        }
        format_spec(r, &b, v, colon ? spec : close, colon ? (size_t)(close - spec) : 0);
        p = close + 1;
    }
    return jb_value(r, &b);
}

/* printf-style formatting, "%s" % x: %s %r %d %i %f %x %%, with width and precision. */
jv jinja_str_format(jr *r, jv fmt, jv args)
{
    jlist one = {1, 1, &args};
    jlist *l = args.t == JV_LIST && (args.flags & JF_TUPLE) ? args.u.l : &one;
    size_t next = 0;
    jbuf b = {0};
    const char *p = fmt.u.s->s, *end = p + fmt.u.s->len;
    while (p < end) {
        if (*p != '%') {
            jb_put(r, &b, p++, 1);
            continue;
        }
        p++;
        if (p < end && *p == '%') {
            jb_put(r, &b, "%", 1), p++;
            continue;
        }
        char spec[32];
        size_t k = 0;
        spec[k++] = '%';
        while (p < end && strchr("-+ 0#", *p) && k < 8)
            spec[k++] = *p++;
        int dots = 0;
        while (p < end && (isdigit((unsigned char)*p) || (*p == '.' && !dots++)) && k < 20)
            spec[k++] = *p++;
        if (p >= end)
            jr_fail(r, "incomplete format");
        char type = *p++;
        if (next >= l->n)
            jr_fail(r, "not enough arguments for format string");
        jv v = l->v[next++];
        char out[512];
        if (type == 's' || type == 'r') {
            jbuf sb = {0};
            if (type == 's')
                jv_write_str(r, &sb, v);
            else
                jv_write_repr(r, &sb, v);
            spec[k++] = 's';
            spec[k] = '\0';
            if (k == 2) {
                if (sb.len)
                    jb_put(r, &b, sb.s, sb.len);
            } else {
                jv sv = jb_value(r, &sb);
                int n = snprintf(NULL, 0, spec, sv.u.s->s);
                if (n < 0 || (size_t)n > r->lim.max_output)
                    jr_limit(r, "output size (bytes)", r->lim.max_output);
                char *o = jr_alloc(r, (size_t)n + 1);
                snprintf(o, (size_t)n + 1, spec, sv.u.s->s);
                jb_put(r, &b, o, (size_t)n);
            }
            continue;
        }
        if (strchr("dixXfFeEgG", type)) {
            if (v.t != JV_INT && v.t != JV_BOOL && v.t != JV_FLOAT)
                jr_fail(r, "%%%c format: a real number is required, not %s", type, jv_type_name(v));
            if (strchr("dixX", type)) {
                spec[k++] = 'l', spec[k++] = 'l', spec[k++] = type == 'i' ? 'd' : type;
                spec[k] = '\0';
                snprintf(out, sizeof out, spec, (long long)(v.t == JV_FLOAT ? (int64_t)v.u.f : v.u.i));
            } else {
                spec[k++] = type;
                spec[k] = '\0';
                snprintf(out, sizeof out, spec, v.t == JV_FLOAT ? v.u.f : (double)v.u.i);
            }
            jb_puts(r, &b, out);
            continue;
        }
        jr_fail(r, "unsupported format character '%c'", type);
    }
    if (next < l->n && l != &one)
        jr_fail(r, "not all arguments converted during string formatting");
    return jb_value(r, &b);
}

/* ---- dicts and lists ---- */
static jv m_items(jr *r, jv d, jargs *a) { return jinja_items(r, d); }

static jv m_keys(jr *r, jv d, jargs *a)
{
    jv out = jv_list(r, d.u.d->n);
    jcopy(out.u.l->v, d.u.d->k, d.u.d->n * sizeof(jv));
    out.u.l->n = d.u.d->n;
    return out;
}

static jv m_values(jr *r, jv d, jargs *a)
{
    jv out = jv_list(r, d.u.d->n);
    jcopy(out.u.l->v, d.u.d->v, d.u.d->n * sizeof(jv));
    out.u.l->n = d.u.d->n;
    return out;
}

static jv m_get(jr *r, jv d, jargs *a)
{
    jv key = ja_arg(a, 0, NULL, jv_undef(NULL));
    jv *v = jd_find(r, d.u.d, key);
    return v ? *v : ja_arg(a, 1, NULL, jv_none());
}

static jv m_copy(jr *r, jv d, jargs *a)
{
    jv out = jv_dict(r, d.u.d->n);
    for (size_t i = 0; i < d.u.d->n; i++)
        jd_set(r, out.u.d, d.u.d->k[i], d.u.d->v[i]);
    return out;
}

static jv m_index(jr *r, jv l, jargs *a)
{
    jv x = ja_arg(a, 0, NULL, jv_undef(NULL));
    for (size_t i = 0; i < l.u.l->n; i++)
        if (jv_equal(l.u.l->v[i], x))
            return jv_int((int64_t)i);
    jr_fail(r, "value is not in list");
}

static jv m_list_count(jr *r, jv l, jargs *a)
{
    jv x = ja_arg(a, 0, NULL, jv_undef(NULL));
    int64_t n = 0;
    for (size_t i = 0; i < l.u.l->n; i++)
        n += jv_equal(l.u.l->v[i], x);
    return jv_int(n);
}

/* A method the sandbox refuses: self holds the method's name and owner's type. */
static jv m_unsafe(jr *r, jv self, jargs *a)
{
    jr_fail(r, "access to attribute '%s' of '%s' object is unsafe", self.u.l->v[0].u.s->s, self.u.l->v[1].u.s->s);
}

typedef struct {
    const char *name;
    jnative fn;
} method;

static const method STR_METHODS[] = {
    {"capitalize", m_capitalize}, {"count", m_count},   {"endswith", m_endswith},     {"find", m_find},
    {"format", m_format},         {"isalnum", m_isalnum}, {"isalpha", m_isalpha},   {"isdigit", m_isdigit},
    {"isspace", m_isspace},       {"join", m_join},     {"lower", m_lower},           {"lstrip", m_lstrip},
    {"replace", m_replace},       {"rsplit", m_rsplit}, {"rstrip", m_rstrip},         {"split", m_split},
    {"splitlines", m_splitlines}, {"startswith", m_startswith}, {"strip", m_strip},   {"title", m_title},
    {"upper", m_upper},
};
static const method DICT_METHODS[] = {
    {"copy", m_copy}, {"get", m_get}, {"items", m_items}, {"keys", m_keys}, {"values", m_values},
};
static const method LIST_METHODS[] = {{"count", m_list_count}, {"index", m_index}};
static const char *const DICT_UNSAFE[] = {"clear", "pop", "popitem", "setdefault", "update", NULL};
static const char *const LIST_UNSAFE[] = {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort", NULL};

static int find_method(jr *r, const method *m, size_t n, jv obj, const char *name, jv *out)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(m[i].name, name)) {
            *out = jv_native(r, m[i].name, m[i].fn, obj);
            return 1;
        }
    return 0;
}

static int find_unsafe(jr *r, const char *const *names, jv obj, const char *name, jv *out)
{
    for (size_t i = 0; names[i]; i++)
        if (!strcmp(names[i], name)) {
            jv self = jv_list(r, 2);
            self.u.l->v[0] = jv_cstr(r, name);
            self.u.l->v[1] = jv_cstr(r, jv_type_name(obj));
            self.u.l->n = 2;
            *out = jv_native(r, name, m_unsafe, self);
            return 1;
        }
    return 0;
}

int jinja_method(jr *r, jv obj, const char *name, jv *out)
{
    switch (obj.t) {
    case JV_STR: return find_method(r, STR_METHODS, sizeof STR_METHODS / sizeof STR_METHODS[0], obj, name, out);
    case JV_DICT:
        return find_method(r, DICT_METHODS, sizeof DICT_METHODS / sizeof DICT_METHODS[0], obj, name, out) ||
               find_unsafe(r, DICT_UNSAFE, obj, name, out);
    case JV_LIST:
        return find_method(r, LIST_METHODS, sizeof LIST_METHODS / sizeof LIST_METHODS[0], obj, name, out) ||
               (!(obj.flags & JF_TUPLE) && find_unsafe(r, LIST_UNSAFE, obj, name, out));
    default: return 0;
    }
}
