/* The Jinja evaluator: statements and expressions over the syntax tree,
 * with jinja2's scoping (a loop body, a macro, a call block each a frame
 * of their own; if does not make one), the sandbox's attribute and item
 * lookups, Python's arithmetic, and the limits of hx_jinja_limits checked
 * as it goes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja_impl.h"

_Noreturn void jr_fail(jr *r, const char *fmt, ...)
{
    if (!r->err) {
        int n = snprintf(r->msg, sizeof r->msg, "line %d: ", r->line);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->msg + n, sizeof r->msg - (size_t)n, fmt, ap);
        va_end(ap);
        r->err = HX_ERR_UNSUPPORTED;
    }
    longjmp(r->jmp, 1);
}

_Noreturn void jr_limit(jr *r, const char *what, unsigned long long limit)
{
    if (!r->err) {
        snprintf(r->msg, sizeof r->msg, "line %d: the render passed its limit of %llu on %s", r->line, limit, what);
        r->err = HX_ERR_RANGE;
    }
    longjmp(r->jmp, 1);
}

void jr_step(jr *r)
{
    if (++r->steps > r->lim.max_steps)
        jr_limit(r, "steps", r->lim.max_steps);
}

static void enter(jr *r)
{
    if (++r->depth > r->lim.max_depth)
        jr_limit(r, "depth (nested calls, expressions and values)", r->lim.max_depth);
}

static jv eval(jr *r, jframe *f, const jnode *x);
static void exec(jr *r, jframe *f, const jnode *x);

static jframe *frame_new(jr *r, jframe *parent)
{
    jframe *f = jr_alloc(r, sizeof *f);
    f->parent = parent;
    return f;
}

static jv lookup(jr *r, jframe *f, const char *name)
{
    for (; f; f = f->parent) {
        jv *v = jd_get(&f->vars, name);
        if (v)
            return *v;
    }
    jv *v = jd_get(&r->globals, name);
    return v ? *v : jv_undef(name);
}

static _Noreturn void undefined_error(jr *r, jv v)
{
    if (v.u.undef)
        jr_fail(r, "'%s' is undefined", v.u.undef);
    jr_fail(r, "a value is undefined");
}

/* ---- attributes and items ---- */
static jv loop_attr(jr *r, jloop *l, const char *name);

/* A lookup scans a dict: large ones cost steps in proportion, so that a
 * template cannot spend unbounded time on a large input. */
static void scan_cost(jr *r, size_t n)
{
    r->steps += n >> 4;
    jr_step(r);
}

jv jr_getattr(jr *r, jv obj, const char *name)
{
    jv out;
    if (obj.t == JV_DICT)
        scan_cost(r, obj.u.d->n);
    switch (obj.t) {
    case JV_UNDEF: undefined_error(r, obj);
    case JV_DICT:
        if (obj.flags & JF_NS) {
            jv *v = jd_get(obj.u.d, name);
            return v ? *v : jv_undef(name);
        }
        if (jinja_method(r, obj, name, &out))
            return out;
        {
            jv *v = jd_get(obj.u.d, name);
            return v ? *v : jv_undef(name);
        }
    case JV_LOOP: return loop_attr(r, obj.u.loop, name);
    default:
        if (jinja_method(r, obj, name, &out))
            return out;
        return jv_undef(name);
    }
}

/* Python's index rules: negative counts from the end; -1 when out of range. */
static int64_t norm_index(int64_t i, size_t n)
{
    if (i < 0)
        i += (int64_t)n;
    return i < 0 || i >= (int64_t)n ? -1 : i;
}

/* Byte offset of character `c` of a UTF-8 string. */
static size_t char_offset(const jstr *s, size_t c)
{
    size_t i = 0;
    for (; i < s->len && c; c--) {
        i++;
        while (i < s->len && ((unsigned char)s->s[i] & 0xC0) == 0x80)
            i++;
    }
    return i;
}

jv jr_getitem(jr *r, jv obj, jv key)
{
    if (obj.t == JV_DICT)
        scan_cost(r, obj.u.d->n);
    switch (obj.t) {
    case JV_UNDEF: undefined_error(r, obj);
    case JV_LIST:
        if (key.t == JV_INT || key.t == JV_BOOL) {
            int64_t i = norm_index(key.u.i, obj.u.l->n);
            return i < 0 ? jv_undef(NULL) : obj.u.l->v[i];
        }
        break;
    case JV_STR:
        if (key.t == JV_INT || key.t == JV_BOOL) {
            int64_t i = norm_index(key.u.i, utf8_count(obj.u.s->s, obj.u.s->len));
            if (i < 0)
                return jv_undef(NULL);
            size_t a = char_offset(obj.u.s, (size_t)i), b = char_offset(obj.u.s, (size_t)i + 1);
            return jv_str(r, obj.u.s->s + a, b - a);
        }
        break;
    case JV_DICT:
        if (!(obj.flags & JF_NS)) {
            jv *v = jd_find(r, obj.u.d, key);
            if (v)
                return *v;
        }
        break;
    case JV_LOOP:
        break;
    default:
        break;
    }
    if (key.t == JV_STR)
        return jr_getattr(r, obj, key.u.s->s);
    return jv_undef(NULL);
}

static int64_t slice_bound(jr *r, jv v, int64_t def, int64_t n, int step_neg)
{
    if (v.t == JV_NONE || v.t == JV_UNDEF)
        return def;
    if (v.t != JV_INT && v.t != JV_BOOL)
        jr_fail(r, "slice indices must be integers or None");
    int64_t i = v.u.i;
    if (i < 0) {
        i += n;
        if (i < 0)
            i = step_neg ? -1 : 0;
    } else if (i >= n) {
        i = step_neg ? n - 1 : n;
    }
    return i;
}

static jv slice(jr *r, jv obj, jv a, jv b, jv c)
{
    int64_t step = 1;
    if (c.t != JV_NONE && c.t != JV_UNDEF) {
        if (c.t != JV_INT)
            jr_fail(r, "slice step must be an integer");
        step = c.u.i;
        if (!step)
            jr_fail(r, "slice step cannot be zero");
    }
    int is_str = obj.t == JV_STR;
    if (obj.t == JV_UNDEF)
        undefined_error(r, obj);
    if (!is_str && obj.t != JV_LIST)
        jr_fail(r, "'%s' object is not subscriptable", jv_type_name(obj));
    jlist *chars = is_str ? jv_iter(r, obj) : obj.u.l;
    int64_t n = (int64_t)chars->n;
    int64_t lo = slice_bound(r, a, step < 0 ? n - 1 : 0, n, step < 0);
    int64_t hi = slice_bound(r, b, step < 0 ? -1 : n, n, step < 0);
    jv out = jv_list(r, 0);
    out.flags = obj.flags & JF_TUPLE;
    for (int64_t i = lo; step > 0 ? i < hi : i > hi;) {
        jr_step(r);
        jl_push(r, out.u.l, chars->v[i]);
        if (__builtin_add_overflow(i, step, &i))
            break;
    }
    if (!is_str)
        return out;
    jbuf buf = {0};
    for (size_t i = 0; i < out.u.l->n; i++)
        jb_put(r, &buf, out.u.l->v[i].u.s->s, out.u.l->v[i].u.s->len);
    return jb_value(r, &buf);
}

/* ---- loops ---- */
static jv loop_cycle(jr *r, jv self, jargs *a)
{
    if (!a->npos)
        jr_fail(r, "loop.cycle() takes at least one argument");
    return a->pos[self.u.loop->i % a->npos];
}

static jv loop_attr(jr *r, jloop *l, const char *name)
{
    size_t n = l->items->n, i = l->i;
    if (!strcmp(name, "index"))
        return jv_int((int64_t)i + 1);
    if (!strcmp(name, "index0"))
        return jv_int((int64_t)i);
    if (!strcmp(name, "revindex"))
        return jv_int((int64_t)(n - i));
    if (!strcmp(name, "revindex0"))
        return jv_int((int64_t)(n - i - 1));
    if (!strcmp(name, "first"))
        return jv_bool(i == 0);
    if (!strcmp(name, "last"))
        return jv_bool(i + 1 == n);
    if (!strcmp(name, "length"))
        return jv_int((int64_t)n);
    if (!strcmp(name, "depth"))
        return jv_int(l->depth);
    if (!strcmp(name, "depth0"))
        return jv_int(l->depth - 1);
    if (!strcmp(name, "previtem"))
        return i ? l->items->v[i - 1] : jv_undef("previtem");
    if (!strcmp(name, "nextitem"))
        return i + 1 < n ? l->items->v[i + 1] : jv_undef("nextitem");
    if (!strcmp(name, "cycle"))
        return jv_native(r, "cycle", loop_cycle, (jv){.t = JV_LOOP, .u.loop = l});
    return jv_undef(name);
}

/* The names a loop or a set binds, as keys made once (not per iteration). */
static jv *target_keys(jr *r, const jnode *x)
{
    jv *keys = jr_alloc(r, x->n_names * sizeof *keys);
    for (size_t k = 0; k < x->n_names; k++)
        keys[k] = jv_cstr(r, x->names[k]);
    return keys;
}

static void bind_targets(jr *r, jframe *f, const jnode *x, const jv *keys, jv item)
{
    if (x->n_names == 1) {
        jd_set(r, &f->vars, keys[0], item);
        return;
    }
    if (item.t != JV_LIST && item.t != JV_STR)
        jr_fail(r, "cannot unpack a %s into %zu names", jv_type_name(item), x->n_names);
    jlist *l = item.t == JV_LIST ? item.u.l : jv_iter(r, item);
    if (l->n != x->n_names)
        jr_fail(r, "%s values to unpack (expected %zu, got %zu)", l->n < x->n_names ? "not enough" : "too many",
                x->n_names, l->n);
    for (size_t k = 0; k < x->n_names; k++)
        jd_set(r, &f->vars, keys[k], l->v[k]);
}

static int loop_depth(jframe *f)
{
    for (; f; f = f->parent) {
        jv *v = jd_get(&f->vars, "loop");
        if (v && v->t == JV_LOOP)
            return v->u.loop->depth;
    }
    return 0;
}

static void exec_for(jr *r, jframe *f, const jnode *x)
{
    jv seq = eval(r, f, x->a);
    jlist *items = jv_iter(r, seq);
    jv *keys = target_keys(r, x), loop_key = jv_cstr(r, "loop");
    if (x->b) { /* the loop filter, before loop.length is known */
        jlist *kept = jv_list(r, 0).u.l;
        jframe *tf = frame_new(r, f);
        for (size_t i = 0; i < items->n; i++) {
            jr_step(r);
            tf->vars.n = 0;
            bind_targets(r, tf, x, keys, items->v[i]);
            if (jv_truthy(eval(r, tf, x->b)))
                jl_push(r, kept, items->v[i]);
        }
        items = kept;
    }
    if (items->n > r->lim.max_loop)
        jr_limit(r, "loop iterations", r->lim.max_loop);
    if (!items->n) {
        if (x->d)
            exec(r, f, x->d);
        return;
    }
    jloop *l = jr_alloc(r, sizeof *l);
    l->items = items;
    l->depth = loop_depth(f) + 1;
    jframe *body = frame_new(r, f);
    for (l->i = 0; l->i < items->n; l->i++) {
        jr_step(r);
        /* Each iteration starts a fresh scope (jinja2: a set in the body does not outlive it). */
        body->vars.n = 0;
        bind_targets(r, body, x, keys, items->v[l->i]);
        jd_set(r, &body->vars, loop_key, (jv){.t = JV_LOOP, .u.loop = l});
        exec(r, body, x->c);
        int ctl = r->loop_ctl;
        r->loop_ctl = 0;
        if (ctl == 1)
            break;
    }
}

/* ---- calls ---- */
jv ja_arg(jargs *a, size_t i, const char *kw, jv def)
{
    if (i < a->npos)
        return a->pos[i];
    for (size_t k = 0; kw && k < a->nkw; k++)
        if (!strcmp(a->kwn[k], kw))
            return a->kwv[k];
    return def;
}

void ja_check(jr *r, jargs *a, size_t max_pos, const char *what)
{
    if (a->npos > max_pos)
        jr_fail(r, "%s takes at most %zu positional arguments (%zu given)", what, max_pos, a->npos);
}

static jv call_macro(jr *r, const jfunc *fn, jargs *a)
{
    const jnode *m = fn->macro;
    int is_caller = fn->call_body != NULL;
    jframe *mf = frame_new(r, fn->closure);
    jv varargs = jv_list(r, 0), kwargs = jv_dict(r, 0);
    varargs.flags = JF_TUPLE;
    for (size_t i = 0; i < a->npos; i++) {
        if (i < m->n_names)
            jd_set_str(r, &mf->vars, m->names[i], a->pos[i]);
        else
            jl_push(r, varargs.u.l, a->pos[i]);
    }
    for (size_t k = 0; k < a->nkw; k++) {
        size_t p = 0;
        while (p < m->n_names && strcmp(m->names[p], a->kwn[k]))
            p++;
        if (p < m->n_names) {
            if (p < a->npos)
                jr_fail(r, "macro '%s' got multiple values for argument '%s'", fn->name, a->kwn[k]);
            jd_set_str(r, &mf->vars, m->names[p], a->kwv[k]);
        } else if (!strcmp(a->kwn[k], "caller") && !is_caller) {
            jd_set_str(r, &mf->vars, "caller", a->kwv[k]);
        } else {
            jd_set_str(r, kwargs.u.d, a->kwn[k], a->kwv[k]);
        }
    }
    for (size_t p = 0; p < m->n_names; p++) {
        if (jd_get(&mf->vars, m->names[p]))
            continue;
        jv def = p < m->n2 && m->list2[p] ? eval(r, mf, m->list2[p]) : jv_undef(m->names[p]);
        jd_set_str(r, &mf->vars, m->names[p], def);
    }
    jd_set_str(r, &mf->vars, "varargs", varargs);
    jd_set_str(r, &mf->vars, "kwargs", kwargs);
    jbuf *saved = r->out, *buf = jb_new(r);
    int saved_ctl = r->loop_ctl;
    r->out = buf;
    exec(r, mf, is_caller ? fn->call_body : m->a);
    r->out = saved;
    r->loop_ctl = saved_ctl;
    return jb_value(r, buf);
}

jv jr_call(jr *r, jv fn, jargs *a)
{
    if (fn.t == JV_UNDEF)
        undefined_error(r, fn);
    if (fn.t != JV_FUNC)
        jr_fail(r, "'%s' object is not callable", jv_type_name(fn));
    enter(r);
    jv out = fn.u.fn->native ? fn.u.fn->native(r, fn.u.fn->self, a) : call_macro(r, fn.u.fn, a);
    r->depth--;
    return out;
}

static void eval_args(jr *r, jframe *f, const jnode *x, jargs *a, size_t extra)
{
    a->npos = x->n;
    a->pos = jr_alloc(r, (x->n + 1) * sizeof *a->pos);
    for (size_t i = 0; i < x->n; i++)
        a->pos[i] = eval(r, f, x->list[i]);
    a->nkw = x->n2;
    a->kwn = jr_alloc(r, (x->n2 + extra) * sizeof *a->kwn + 1);
    a->kwv = jr_alloc(r, (x->n2 + extra) * sizeof *a->kwv + 1);
    for (size_t k = 0; k < x->n2; k++) {
        a->kwn[k] = x->names[k];
        a->kwv[k] = eval(r, f, x->list2[k]);
    }
}

/* ---- filters and tests ---- */
static jv apply_filter(jr *r, jframe *f, const jnode *x, const jv *input)
{
    jv v = x->a ? eval(r, f, x->a) : *input;
    if (!x->a && x->a == NULL && input == NULL)
        jr_fail(r, "a filter without input");
    jargs a;
    eval_args(r, f, x, &a, 0);
    r->line = x->line;
    if (!x->filter)
        jr_fail(r, "no filter named '%s'", x->name);
    return x->filter(r, v, &a);
}

/* A filter chain of a block (innermost operand NULL) applied to `text`. */
static jv apply_chain(jr *r, jframe *f, const jnode *x, jv text)
{
    if (!x)
        return text;
    jv in = x->a ? apply_chain(r, f, x->a, text) : text;
    jargs a;
    eval_args(r, f, x, &a, 0);
    r->line = x->line;
    if (!x->filter)
        jr_fail(r, "no filter named '%s'", x->name);
    return x->filter(r, in, &a);
}

/* ---- operators ---- */
static int is_int(jv v) { return v.t == JV_INT || v.t == JV_BOOL; }
static int is_num(jv v) { return is_int(v) || v.t == JV_FLOAT; }
static double to_f(jv v) { return v.t == JV_FLOAT ? v.u.f : (double)v.u.i; }

static const char *OP_NAMES[] = {"", "+", "-", "*", "/", "//", "%", "**"};

static _Noreturn void bad_operands(jr *r, int op, jv a, jv b)
{
    if (a.t == JV_UNDEF)
        undefined_error(r, a);
    if (b.t == JV_UNDEF)
        undefined_error(r, b);
    jr_fail(r, "unsupported operand type(s) for %s: '%s' and '%s'", OP_NAMES[op], jv_type_name(a),
            jv_type_name(b));
}

static jv repeat(jr *r, jv seq, int64_t times)
{
    if (times < 0)
        times = 0;
    if (seq.t == JV_STR) {
        if (seq.u.s->len && (uint64_t)times > r->lim.max_output / seq.u.s->len)
            jr_limit(r, "output size (bytes)", r->lim.max_output);
        jbuf b = {0};
        for (int64_t i = 0; i < times; i++)
            jb_put(r, &b, seq.u.s->s, seq.u.s->len);
        return jb_value(r, &b);
    }
    if (seq.u.l->n && (uint64_t)times > r->lim.max_loop / seq.u.l->n)
        jr_limit(r, "loop iterations", r->lim.max_loop);
    jv out = jv_list(r, 0);
    out.flags = seq.flags & JF_TUPLE;
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < seq.u.l->n; k++)
            jl_push(r, out.u.l, seq.u.l->v[k]);
    return out;
}

jv jinja_escape(jr *r, jv v);
jv jinja_str_format(jr *r, jv fmt, jv args); /* printf-style "%s" % x (text/jinja_methods.c) */

static jv arith(jr *r, int op, jv a, jv b)
{
    if (is_int(a) && is_int(b)) {
        int64_t x = a.u.i, y = b.u.i, z;
        switch (op) {
        case OP_ADD:
            if (__builtin_add_overflow(x, y, &z))
                jr_fail(r, "integer overflow");
            return jv_int(z);
        case OP_SUB:
            if (__builtin_sub_overflow(x, y, &z))
                jr_fail(r, "integer overflow");
            return jv_int(z);
        case OP_MUL:
            if (__builtin_mul_overflow(x, y, &z))
                jr_fail(r, "integer overflow");
            return jv_int(z);
        case OP_DIV:
            if (!y)
                jr_fail(r, "division by zero");
            return jv_float((double)x / (double)y);
        case OP_FLOORDIV:
        case OP_MOD: {
            if (!y)
                jr_fail(r, "integer division or modulo by zero");
            if (x == INT64_MIN && y == -1)
                jr_fail(r, "integer overflow");
            int64_t q = x / y, m = x % y;
            if (m && ((m < 0) != (y < 0)))
                q--, m += y;
            return jv_int(op == OP_FLOORDIV ? q : m);
        }
        case OP_POW: {
            if (y < 0)
                return jv_float(pow((double)x, (double)y));
            int64_t p = 1;
            for (int64_t i = 0; i < y; i++) {
                if (__builtin_mul_overflow(p, x, &p))
                    jr_fail(r, "integer overflow");
                if (p == 0 || p == 1)
                    break;
            }
            return jv_int(p);
        }
        }
    }
    if (is_num(a) && is_num(b)) {
        double x = to_f(a), y = to_f(b);
        switch (op) {
        case OP_ADD: return jv_float(x + y);
        case OP_SUB: return jv_float(x - y);
        case OP_MUL: return jv_float(x * y);
        case OP_DIV:
            if (y == 0)
                jr_fail(r, "float division by zero");
            return jv_float(x / y);
        case OP_FLOORDIV:
            if (y == 0)
                jr_fail(r, "float floor division by zero");
            return jv_float(floor(x / y));
        case OP_MOD: {
            if (y == 0)
                jr_fail(r, "float modulo");
            double m = fmod(x, y);
            if (m != 0 && ((m < 0) != (y < 0)))
                m += y;
            return jv_float(m);
        }
        case OP_POW: return jv_float(pow(x, y));
        }
    }
    /* None or an undefined name beside a string adds as "" (where jinja2
     * raises): llama.cpp's template engine does so, and templates count on
     * it (Firefunction v2's `functions`, which only some callers define). */
    if (op == OP_ADD && ((a.t == JV_STR && (b.t == JV_UNDEF || b.t == JV_NONE)) ||
                         (b.t == JV_STR && (a.t == JV_UNDEF || a.t == JV_NONE))))
        return a.t == JV_STR ? a : b;
    if (op == OP_ADD && a.t == JV_STR && b.t == JV_STR) {
        /* Markup + str escapes the str (jinja2's Markup.__add__ / __radd__). */
        int safe = (a.flags | b.flags) & JF_SAFE;
        if (safe) {
            a = jinja_escape(r, a);
            b = jinja_escape(r, b);
        }
        jbuf buf = {0};
        jb_put(r, &buf, a.u.s->s, a.u.s->len);
        jb_put(r, &buf, b.u.s->s, b.u.s->len);
        jv out = jb_value(r, &buf);
        out.flags |= (uint8_t)safe;
        return out;
    }
    if (op == OP_ADD && a.t == JV_LIST && b.t == JV_LIST && (a.flags & JF_TUPLE) == (b.flags & JF_TUPLE)) {
        jv out = jv_list(r, a.u.l->n + b.u.l->n);
        out.flags = a.flags & JF_TUPLE;
        jcopy(out.u.l->v, a.u.l->v, a.u.l->n * sizeof(jv));
        jcopy(out.u.l->v + a.u.l->n, b.u.l->v, b.u.l->n * sizeof(jv));
        out.u.l->n = a.u.l->n + b.u.l->n;
        return out;
    }
    if (op == OP_MUL && (a.t == JV_STR || a.t == JV_LIST) && is_int(b))
        return repeat(r, a, b.u.i);
    if (op == OP_MUL && (b.t == JV_STR || b.t == JV_LIST) && is_int(a))
        return repeat(r, b, a.u.i);
    if (op == OP_MOD && a.t == JV_STR)
        return jinja_str_format(r, a, b);
    bad_operands(r, op, a, b);
}

static int contains(jr *r, jv container, jv item)
{
    if (container.t == JV_LIST)
        scan_cost(r, container.u.l->n);
    else if (container.t == JV_DICT)
        scan_cost(r, container.u.d->n);
    else if (container.t == JV_STR)
        scan_cost(r, container.u.s->len);
    switch (container.t) {
    case JV_UNDEF: return 0;
    case JV_STR:
        if (item.t != JV_STR)
            jr_fail(r, "'in <string>' requires string as left operand, not %s", jv_type_name(item));
        if (!item.u.s->len)
            return 1;
        return memmem(container.u.s->s, container.u.s->len, item.u.s->s, item.u.s->len) != NULL;
    case JV_LIST:
        for (size_t i = 0; i < container.u.l->n; i++)
            if (jv_equal(container.u.l->v[i], item))
                return 1;
        return 0;
    case JV_DICT:
        if (container.flags & JF_NS)
            break;
        return jd_find(r, container.u.d, item) != NULL;
    default: break;
    }
    jr_fail(r, "argument of type '%s' is not iterable", jv_type_name(container));
}

static int compare(jr *r, int op, jv a, jv b)
{
    switch (op) {
    case OP_EQ: return jv_equal(a, b);
    case OP_NE: return !jv_equal(a, b);
    case OP_IN: return contains(r, b, a);
    case OP_NOTIN: return !contains(r, b, a);
    default: break;
    }
    if (a.t == JV_UNDEF)
        undefined_error(r, a);
    if (b.t == JV_UNDEF)
        undefined_error(r, b);
    int c = jv_compare(r, a, b);
    switch (op) {
    case OP_LT: return c < 0;
    case OP_LE: return c <= 0;
    case OP_GT: return c > 0;
    default: return c >= 0;
    }
}

/* ---- expressions ---- */
static jv eval_inner(jr *r, jframe *f, const jnode *x)
{
    switch (x->kind) {
    case N_CONST: return x->val;
    case N_NAME: return lookup(r, f, x->name);
    case N_LIST:
    case N_TUPLE: {
        jv out = jv_list(r, x->n);
        out.flags = x->kind == N_TUPLE ? JF_TUPLE : 0;
        for (size_t i = 0; i < x->n; i++)
            out.u.l->v[i] = eval(r, f, x->list[i]);
        out.u.l->n = x->n;
        return out;
    }
    case N_DICT: {
        jv out = jv_dict(r, x->n);
        for (size_t i = 0; i < x->n; i++) {
            jv k = eval(r, f, x->list[i]);
            jd_set(r, out.u.d, k, eval(r, f, x->list2[i]));
        }
        return out;
    }
    case N_ATTR: {
        jv obj = eval(r, f, x->a);
        r->line = x->line;
        return jr_getattr(r, obj, x->name);
    }
    case N_ITEM: {
        jv obj = eval(r, f, x->a), key = eval(r, f, x->b);
        r->line = x->line;
        return jr_getitem(r, obj, key);
    }
    case N_SLICE: {
        jv obj = eval(r, f, x->a);
        jv a = x->b ? eval(r, f, x->b) : jv_none(), b = x->c ? eval(r, f, x->c) : jv_none(),
           c = x->d ? eval(r, f, x->d) : jv_none();
        r->line = x->line;
        return slice(r, obj, a, b, c);
    }
    case N_CALL: {
        jv fn = eval(r, f, x->a);
        jargs a;
        eval_args(r, f, x, &a, 0);
        r->line = x->line;
        return jr_call(r, fn, &a);
    }
    case N_FILTER: return apply_filter(r, f, x, NULL);
    case N_TEST: {
        jv v = eval(r, f, x->a);
        jargs a;
        eval_args(r, f, x, &a, 0);
        r->line = x->line;
        if (!x->test)
            jr_fail(r, "no test named '%s'", x->name);
        return jv_bool(x->test(r, v, &a));
    }
    case N_NOT: return jv_bool(!jv_truthy(eval(r, f, x->a)));
    case N_NEG:
    case N_POS: {
        jv v = eval(r, f, x->a);
        r->line = x->line;
        if (x->kind == N_POS && is_num(v))
            return v.t == JV_BOOL ? jv_int(v.u.i) : v;
        if (is_int(v)) {
            if (v.u.i == INT64_MIN)
                jr_fail(r, "integer overflow");
            return jv_int(-v.u.i);
        }
        if (v.t == JV_FLOAT)
            return jv_float(-v.u.f);
        if (v.t == JV_UNDEF)
            undefined_error(r, v);
        jr_fail(r, "bad operand type for unary %c: '%s'", x->kind == N_NEG ? '-' : '+', jv_type_name(v));
    }
    case N_BIN: {
        jv a = eval(r, f, x->a), b = eval(r, f, x->b);
        r->line = x->line;
        return arith(r, x->op, a, b);
    }
    case N_AND: {
        jv a = eval(r, f, x->a);
        return jv_truthy(a) ? eval(r, f, x->b) : a;
    }
    case N_OR: {
        jv a = eval(r, f, x->a);
        return jv_truthy(a) ? a : eval(r, f, x->b);
    }
    case N_COMPARE: {
        jv a = eval(r, f, x->list[0]);
        for (size_t i = 1; i < x->n; i++) {
            jv b = eval(r, f, x->list[i]);
            r->line = x->line;
            if (!compare(r, x->ops[i - 1], a, b))
                return jv_bool(0);
            a = b;
        }
        return jv_bool(1);
    }
    case N_COND:
        if (jv_truthy(eval(r, f, x->a)))
            return eval(r, f, x->b);
        return x->c ? eval(r, f, x->c) : jv_undef(NULL);
    case N_CONCAT: {
        jbuf b = {0};
        for (size_t i = 0; i < x->n; i++)
            jv_write_str(r, &b, eval(r, f, x->list[i]));
        return jb_value(r, &b);
    }
    default: jr_fail(r, "a statement where an expression was expected");
    }
}

static jv eval(jr *r, jframe *f, const jnode *x)
{
    jr_step(r);
    enter(r);
    int line = r->line;
    r->line = x->line;
    jv v = eval_inner(r, f, x);
    r->line = line;
    r->depth--;
    return v;
}

/* ---- statements ---- */
static void assign(jr *r, jframe *f, const jnode *x, jv v)
{
    if (x->attr) {
        jv ns = lookup(r, f, x->names[0]);
        if (ns.t != JV_DICT || !(ns.flags & JF_NS))
            jr_fail(r, "cannot assign attribute on non-namespace object '%s'", x->names[0]);
        jd_set_str(r, ns.u.d, x->attr, v);
        return;
    }
    bind_targets(r, f, x, target_keys(r, x), v);
}

static void exec_inner(jr *r, jframe *f, const jnode *x)
{
    switch (x->kind) {
    case N_BODY:
        for (size_t i = 0; i < x->n && !r->loop_ctl; i++)
            exec(r, f, x->list[i]);
        return;
    case N_TEXT: jb_put(r, r->out, x->val.u.s->s, x->val.u.s->len); return;
    case N_OUTPUT: jv_write_str(r, r->out, eval(r, f, x->a)); return;
    case N_IF:
        if (jv_truthy(eval(r, f, x->a)))
            exec(r, f, x->b);
        else if (x->c)
            exec(r, f, x->c);
        return;
    case N_FOR: exec_for(r, f, x); return;
    case N_SET: assign(r, f, x, eval(r, f, x->a)); return;
    case N_SETBLOCK: {
        jbuf *saved = r->out, *buf = jb_new(r);
        r->out = buf;
        exec(r, f, x->a);
        r->out = saved;
        jd_set_str(r, &f->vars, x->name, apply_chain(r, f, x->b, jb_value(r, buf)));
        return;
    }
    case N_MACRO: {
        jfunc *fn = jr_alloc(r, sizeof *fn);
        fn->name = x->name;
        fn->macro = x;
        fn->closure = f;
        jd_set_str(r, &f->vars, x->name, (jv){.t = JV_FUNC, .u.fn = fn});
        return;
    }
    case N_CALLBLOCK: {
        jfunc *caller = jr_alloc(r, sizeof *caller);
        caller->name = "caller";
        caller->macro = x;
        caller->closure = f;
        caller->call_body = x->b;
        const jnode *call = x->a;
        jv fn = eval(r, f, call->a);
        jargs a;
        eval_args(r, f, call, &a, 1);
        a.kwn[a.nkw] = "caller";
        a.kwv[a.nkw++] = (jv){.t = JV_FUNC, .u.fn = caller};
        jv_write_str(r, r->out, jr_call(r, fn, &a));
        return;
    }
    case N_FILTERBLOCK: {
        jbuf *saved = r->out, *buf = jb_new(r);
        r->out = buf;
        exec(r, f, x->a);
        r->out = saved;
        jv_write_str(r, r->out, apply_chain(r, f, x->b, jb_value(r, buf)));
        return;
    }
    case N_BREAK: r->loop_ctl = 1; return;
    case N_CONTINUE: r->loop_ctl = 2; return;
    default: jv_write_str(r, r->out, eval(r, f, x)); return;
    }
}

static void exec(jr *r, jframe *f, const jnode *x)
{
    jr_step(r);
    enter(r);
    r->line = x->line;
    exec_inner(r, f, x);
    r->depth--;
}

/* ---- the public face (text/jinja.h) ---- */
hx_jinja_limits hx_jinja_limits_default(void)
{
    return (hx_jinja_limits){.max_output = 16u << 20,
                             .max_memory = 64u << 20,
                             .max_depth = 1000,
                             .max_loop = 1000000,
                             .max_steps = 10000000};
}

hx_status hx_jinja_render_new(const hx_jinja_template *t, const hx_jinja_limits *lim, hx_jinja_render **out)
{
    if (!t || !out)
        return hx_error(HX_ERR_INVALID_ARG, "hx_jinja_render_new: NULL argument");
    jr *r = calloc(1, sizeof *r);
    if (!r)
        return hx_error(HX_ERR_NO_MEMORY, "chat template: no memory for a render");
    r->t = t;
    r->lim = lim ? *lim : hx_jinja_limits_default();
    r->arena.cap = r->lim.max_memory;
    r->now = time(NULL);
    if (setjmp(r->jmp)) {
        hx_status s = hx_error(r->err, "chat template %s", r->msg);
        hx_jinja_render_free(r);
        return s;
    }
    jinja_globals(r, &r->globals);
    *out = r;
    return HX_OK;
}

void hx_jinja_render_free(hx_jinja_render *r)
{
    if (!r)
        return;
    ja_free(&r->arena);
    free(r);
}

void hx_jinja_set_now(hx_jinja_render *r, time_t now) { r->now = now; }

hx_status hx_jinja_set_json(hx_jinja_render *r, const char *name, const char *json, size_t len)
{
    if (setjmp(r->jmp))
        return hx_error(r->err, "chat template variable '%s': %s", name, r->msg);
    jv v;
    const char *err = NULL;
    if (!jv_parse_json(r, json, len, &v, &err))
        return hx_error(HX_ERR_FORMAT, "chat template variable '%s': not JSON: %s", name, err);
    jd_set_str(r, &r->globals, name, v);
    return HX_OK;
}

hx_status hx_jinja_set_json_members(hx_jinja_render *r, const char *json, size_t len)
{
    if (setjmp(r->jmp))
        return hx_error(r->err, "chat template variables: %s", r->msg);
    jv v;
    const char *err = NULL;
    if (!jv_parse_json(r, json, len, &v, &err))
        return hx_error(HX_ERR_FORMAT, "chat template variables: not JSON: %s", err);
    if (v.t != JV_DICT)
        return hx_error(HX_ERR_FORMAT, "chat template variables: a JSON object expected, not %s", jv_type_name(v));
    for (size_t i = 0; i < v.u.d->n; i++)
        jd_set(r, &r->globals, v.u.d->k[i], v.u.d->v[i]);
    return HX_OK;
}

hx_status hx_jinja_set_str(hx_jinja_render *r, const char *name, const char *s)
{
    if (setjmp(r->jmp))
        return hx_error(r->err, "chat template variable '%s': %s", name, r->msg);
    jd_set_str(r, &r->globals, name, jv_cstr(r, s));
    return HX_OK;
}

hx_status hx_jinja_set_bool(hx_jinja_render *r, const char *name, int b)
{
    if (setjmp(r->jmp))
        return hx_error(r->err, "chat template variable '%s': %s", name, r->msg);
    jd_set_str(r, &r->globals, name, jv_bool(b));
    return HX_OK;
}

hx_status hx_jinja_pop_last(hx_jinja_render *r, const char *name, const char *role, hx_jinja_popped *m)
{
    *m = (hx_jinja_popped){0};
    if (setjmp(r->jmp))
        return hx_error(r->err, "chat template: %s", r->msg);
    jv *list = jd_get(&r->globals, name);
    if (!list || list->t != JV_LIST || !list->u.l->n)
        return HX_OK;
    jv last = list->u.l->v[list->u.l->n - 1];
    if (last.t != JV_DICT)
        return HX_OK;
    jv *rv = jd_get(last.u.d, "role");
    if (!rv || rv->t != JV_STR || strcmp(rv->u.s->s, role))
        return HX_OK;
    jv *calls = jd_get(last.u.d, "tool_calls");
    if (calls && calls->t == JV_LIST && calls->u.l->n) {
        m->tool_calls = 1;
        return HX_OK;
    }
    jv *th = jd_get(last.u.d, "reasoning_content");
    if (th && th->t != JV_STR && th->t != JV_NONE)
        return hx_error(HX_ERR_INVALID_ARG, "the last %s message's reasoning_content is a %s, not a string", role,
                        jv_type_name(*th));
    jv *c = jd_get(last.u.d, "content");
    jbuf b = {0};
    if (c && c->t == JV_STR) {
        jb_put(r, &b, c->u.s->s, c->u.s->len);
    } else if (c && c->t == JV_LIST) {
        for (size_t i = 0; i < c->u.l->n; i++) {
            jv part = c->u.l->v[i];
            jv *type = part.t == JV_DICT ? jd_get(part.u.d, "type") : NULL;
            jv *text = part.t == JV_DICT ? jd_get(part.u.d, "text") : NULL;
            if (!type || type->t != JV_STR || strcmp(type->u.s->s, "text") || !text || text->t != JV_STR)
                return hx_error(HX_ERR_INVALID_ARG, "the last %s message has a content part that is not text", role);
            if (b.len) /* "\n\n" after any text so far, as llama.cpp's render_content joins parts */
                jb_put(r, &b, "\n\n", 2);
            jb_put(r, &b, text->u.s->s, text->u.s->len);
        }
    } else if (c && c->t != JV_NONE) {
        return hx_error(HX_ERR_INVALID_ARG, "the last %s message's content is a %s, not a string", role,
                        jv_type_name(*c));
    }
    list->u.l->n--;
    m->content = jb_value(r, &b).u.s->s;
    m->thought = th && th->t == JV_STR ? th->u.s->s : "";
    return HX_OK;
}

hx_status hx_jinja_run(hx_jinja_render *r, const char **text, size_t *len)
{
    if (!r || !text || !len)
        return hx_error(HX_ERR_INVALID_ARG, "hx_jinja_run: NULL argument");
    if (setjmp(r->jmp))
        return hx_error(r->err, "chat template %s", r->msg);
    r->steps = 0;
    r->depth = 0;
    r->err = HX_OK;
    r->out = jb_new(r);
    jframe *root = frame_new(r, NULL);
    exec(r, root, r->t->root);
    *text = r->out->s ? r->out->s : "";
    *len = r->out->len;
    return HX_OK;
}
