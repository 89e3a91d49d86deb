/* jinja2's tests (x is defined, is string...) and the globals a chat
 * template sees: jinja2's range, dict, namespace, and transformers'
 * raise_exception and strftime_now. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "text/jinja_impl.h"

static int t_defined(jr *r, jv v, jargs *a) { return v.t != JV_UNDEF; }
static int t_undefined(jr *r, jv v, jargs *a) { return v.t == JV_UNDEF; }
static int t_none(jr *r, jv v, jargs *a) { return v.t == JV_NONE; }
static int t_boolean(jr *r, jv v, jargs *a) { return v.t == JV_BOOL; }
static int t_true(jr *r, jv v, jargs *a) { return v.t == JV_BOOL && v.u.i; }
static int t_false(jr *r, jv v, jargs *a) { return v.t == JV_BOOL && !v.u.i; }
static int t_integer(jr *r, jv v, jargs *a) { return v.t == JV_INT; }
static int t_float(jr *r, jv v, jargs *a) { return v.t == JV_FLOAT; }
static int t_number(jr *r, jv v, jargs *a) { return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL; }
static int t_string(jr *r, jv v, jargs *a) { return v.t == JV_STR; }
static int t_mapping(jr *r, jv v, jargs *a) { return v.t == JV_DICT && !(v.flags & JF_NS); }
static int t_callable(jr *r, jv v, jargs *a) { return v.t == JV_FUNC; }
/* jinja2's Undefined iterates (as nothing) and has a length and items. */
static int t_iterable(jr *r, jv v, jargs *a)
{
    return v.t == JV_UNDEF || v.t == JV_STR || v.t == JV_LIST || v.t == JV_LOOP || t_mapping(r, v, a);
}
static int t_sequence(jr *r, jv v, jargs *a)
{
    return v.t == JV_UNDEF || v.t == JV_STR || v.t == JV_LIST || t_mapping(r, v, a);
}

static jv arg0(jr *r, jargs *a, const char *test)
{
    if (!a->npos)
        jr_fail(r, "the test '%s' takes an argument", test);
    return a->pos[0];
}

static int t_eq(jr *r, jv v, jargs *a) { return jv_equal(v, arg0(r, a, "eq")); }
static int t_ne(jr *r, jv v, jargs *a) { return !jv_equal(v, arg0(r, a, "ne")); }
static int t_lt(jr *r, jv v, jargs *a) { return jv_compare(r, v, arg0(r, a, "lt")) < 0; }
static int t_le(jr *r, jv v, jargs *a) { return jv_compare(r, v, arg0(r, a, "le")) <= 0; }
static int t_gt(jr *r, jv v, jargs *a) { return jv_compare(r, v, arg0(r, a, "gt")) > 0; }
static int t_ge(jr *r, jv v, jargs *a) { return jv_compare(r, v, arg0(r, a, "ge")) >= 0; }

static int t_sameas(jr *r, jv v, jargs *a)
{
    jv o = arg0(r, a, "sameas");
    if (v.t != o.t)
        return 0;
    if (v.t == JV_NONE || v.t == JV_UNDEF)
        return 1;
    if (v.t == JV_BOOL)
        return v.u.i == o.u.i;
    return v.u.l == o.u.l;
}

static int t_in(jr *r, jv v, jargs *a)
{
    jv c = arg0(r, a, "in");
    if (c.t == JV_STR) {
        if (v.t != JV_STR)
            jr_fail(r, "'in <string>' requires string as left operand, not %s", jv_type_name(v));
        return memmem(c.u.s->s, c.u.s->len, v.u.s->s, v.u.s->len) != NULL || !v.u.s->len;
    }
    if (c.t == JV_DICT)
        return jd_find(r, c.u.d, v) != NULL;
    jlist *l = jv_iter(r, c);
    for (size_t i = 0; i < l->n; i++)
        if (jv_equal(l->v[i], v))
            return 1;
    return 0;
}

static int64_t need_int(jr *r, jv v, const char *test)
{
    if (v.t != JV_INT && v.t != JV_BOOL)
        jr_fail(r, "the test '%s' needs an integer, not %s", test, jv_type_name(v));
    return v.u.i;
}

static int t_odd(jr *r, jv v, jargs *a) { return need_int(r, v, "odd") % 2 != 0; }
static int t_even(jr *r, jv v, jargs *a) { return need_int(r, v, "even") % 2 == 0; }
static int t_divisibleby(jr *r, jv v, jargs *a)
{
    int64_t d = need_int(r, arg0(r, a, "divisibleby"), "divisibleby");
    if (!d)
        jr_fail(r, "integer division or modulo by zero");
    return need_int(r, v, "divisibleby") % d == 0;
}

static int case_test(jv v, int upper)
{
    if (v.t != JV_STR)
        return 0;
    int cased = 0;
    for (size_t i = 0; i < v.u.s->len; i++) {
        char c = v.u.s->s[i];
        if (c >= 'a' && c <= 'z') {
            if (upper)
                return 0;
            cased = 1;
        } else if (c >= 'A' && c <= 'Z') {
            if (!upper)
                return 0;
            cased = 1;
        }
    }
    return cased;
}

static int t_lower(jr *r, jv v, jargs *a) { return case_test(v, 0); }
static int t_upper(jr *r, jv v, jargs *a) { return case_test(v, 1); }
static int t_filter(jr *r, jv v, jargs *a) { return v.t == JV_STR && jinja_filter(v.u.s->s) != NULL; }
static int t_test(jr *r, jv v, jargs *a) { return v.t == JV_STR && jinja_test(v.u.s->s) != NULL; }
static int t_escaped(jr *r, jv v, jargs *a) { return 0; }

static const struct {
    const char *name;
    jtest_fn fn;
} TESTS[] = {
    {"!=", t_ne},          {"<", t_lt},
    {"<=", t_le},          {"==", t_eq},
    {">", t_gt},           {">=", t_ge},
    {"boolean", t_boolean}, {"callable", t_callable},
    {"defined", t_defined}, {"divisibleby", t_divisibleby},
    {"eq", t_eq},          {"equalto", t_eq},
    {"escaped", t_escaped}, {"even", t_even},
    {"false", t_false},    {"filter", t_filter},
    {"float", t_float},    {"ge", t_ge},
    {"greaterthan", t_gt}, {"gt", t_gt},
    {"in", t_in},          {"integer", t_integer},
    {"iterable", t_iterable}, {"le", t_le},
    {"lessthan", t_lt},    {"lower", t_lower},
    {"lt", t_lt},          {"mapping", t_mapping},
    {"ne", t_ne},          {"none", t_none},
    {"number", t_number},  {"odd", t_odd},
    {"sameas", t_sameas},  {"sequence", t_sequence},
    {"string", t_string},  {"test", t_test},
    {"true", t_true},      {"undefined", t_undefined},
    {"upper", t_upper},
};

jtest_fn jinja_test(const char *name)
{
    for (size_t i = 0; i < sizeof TESTS / sizeof TESTS[0]; i++)
        if (!strcmp(TESTS[i].name, name))
            return TESTS[i].fn;
    return NULL;
}

/* ---- globals ---- */
static jv g_range(jr *r, jv self, jargs *a)
{
    int64_t start = 0, stop, step = 1;
    for (size_t i = 0; i < a->npos; i++)
        if (a->pos[i].t != JV_INT && a->pos[i].t != JV_BOOL)
            jr_fail(r, "range() takes integers, not %s", jv_type_name(a->pos[i]));
    if (a->npos == 1) {
        stop = a->pos[0].u.i;
    } else if (a->npos == 2 || a->npos == 3) {
        start = a->pos[0].u.i, stop = a->pos[1].u.i;
        if (a->npos == 3)
            step = a->pos[2].u.i;
    } else {
        jr_fail(r, "range expected 1 to 3 arguments, got %zu", a->npos);
    }
    if (!step)
        jr_fail(r, "range() arg 3 must not be zero");
    /* Counted in 128 bits: start and stop may be any 64-bit integers. */
    __int128 span = step > 0 ? (__int128)stop - start : (__int128)start - stop;
    __int128 st = step > 0 ? step : -(__int128)step;
    __int128 n = span > 0 ? (span + st - 1) / st : 0;
    if (n > (__int128)r->lim.max_loop)
        jr_limit(r, "loop iterations (range length)", r->lim.max_loop);
    jv out = jv_list(r, (size_t)n);
    for (int64_t i = 0; i < (int64_t)n; i++)
        out.u.l->v[i] = jv_int(start + i * step);
    out.u.l->n = (size_t)n;
    return out;
}

static jv kwargs_dict(jr *r, jargs *a, size_t max_pos, const char *what)
{
    jv d = jv_dict(r, 0);
    if (a->npos > max_pos)
        jr_fail(r, "%s takes at most %zu positional argument", what, max_pos);
    if (a->npos) {
        jv init = a->pos[0];
        if (init.t == JV_DICT) {
            for (size_t i = 0; i < init.u.d->n; i++)
                jd_set(r, d.u.d, init.u.d->k[i], init.u.d->v[i]);
        } else {
            jlist *l = jv_iter(r, init);
            for (size_t i = 0; i < l->n; i++) {
                jv p = l->v[i];
                if (p.t != JV_LIST || p.u.l->n != 2)
                    jr_fail(r, "%s: each element must be a pair", what);
                jd_set(r, d.u.d, p.u.l->v[0], p.u.l->v[1]);
            }
        }
    }
    for (size_t k = 0; k < a->nkw; k++)
        jd_set_str(r, d.u.d, a->kwn[k], a->kwv[k]);
    return d;
}

static jv g_dict(jr *r, jv self, jargs *a) { return kwargs_dict(r, a, 1, "dict()"); }

static jv g_namespace(jr *r, jv self, jargs *a)
{
    jv d = kwargs_dict(r, a, 1, "namespace()");
    d.flags = JF_NS;
    return d;
}

static jv g_raise_exception(jr *r, jv self, jargs *a)
{
    jv msg = ja_arg(a, 0, NULL, jv_str(r, "", 0));
    jbuf b = {0};
    jv_write_str(r, &b, msg);
    if (!r->err) {
        snprintf(r->msg, sizeof r->msg, "line %d: raise_exception: %s", r->line, b.s ? b.s : "");
        r->err = HX_ERR_INVALID_ARG;
    }
    longjmp(r->jmp, 1);
}

static jv g_strftime_now(jr *r, jv self, jargs *a)
{
    jv fmt = ja_arg(a, 0, NULL, jv_undef(NULL));
    if (fmt.t != JV_STR)
        jr_fail(r, "strftime_now takes a format string");
    struct tm tm;
    time_t now = r->now;
    localtime_r(&now, &tm);
    char out[512];
    size_t n = fmt.u.s->len ? strftime(out, sizeof out, fmt.u.s->s, &tm) : 0;
    if (fmt.u.s->len && !n)
        jr_fail(r, "strftime_now: the date does not fit in %zu bytes", sizeof out);
    return jv_str(r, out, n);
}

void jinja_globals(jr *r, jdict *g)
{
    jd_set_str(r, g, "range", jv_native(r, "range", g_range, jv_none()));
    jd_set_str(r, g, "dict", jv_native(r, "dict", g_dict, jv_none()));
    jd_set_str(r, g, "namespace", jv_native(r, "namespace", g_namespace, jv_none()));
    jd_set_str(r, g, "raise_exception", jv_native(r, "raise_exception", g_raise_exception, jv_none()));
    jd_set_str(r, g, "strftime_now", jv_native(r, "strftime_now", g_strftime_now, jv_none()));
}
