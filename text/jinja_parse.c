/* The Jinja parser: tokens into the syntax tree, by jinja2's grammar
 * (jinja2/parser.py): precedence from the conditional expression down to
 * filters, tests and calls; statements if/elif/else, for (loop filter,
 * else, recursive), set (targets, namespace attributes, blocks), macro,
 * call, filter, break/continue and transformers' generation block.  A
 * filter or test that does not exist is an error here unless it sits in a
 * condition (an if or a conditional expression), where jinja2 defers it
 * to the moment it runs. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja_impl.h"

enum { MAX_PARSE_DEPTH = 500 };

typedef struct {
    jarena *a;
    jtok *t;
    size_t i, n;
    int depth;
    jmp_buf jmp;
    char msg[400];
} parser;

static _Noreturn void perr(parser *P, const char *fmt, ...) HX_PRINTF(2, 3);
static _Noreturn void perr(parser *P, const char *fmt, ...)
{
    int n = snprintf(P->msg, sizeof P->msg, "line %d: ", P->t[P->i].line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(P->msg + n, sizeof P->msg - (size_t)n, fmt, ap);
    va_end(ap);
    longjmp(P->jmp, 1);
}

static void *palloc(parser *P, size_t n)
{
    void *p = ja_alloc(P->a, n);
    if (!p)
        perr(P, "the template is too large");
    return p;
}

static jnode *node(parser *P, int kind)
{
    jnode *x = palloc(P, sizeof *x);
    x->kind = (uint8_t)kind;
    x->line = P->t[P->i].line;
    return x;
}

static jtok *cur(parser *P) { return &P->t[P->i]; }
static int is_op(parser *P, const char *op) { return cur(P)->kind == TK_OP && !strcmp(cur(P)->s, op); }
static int is_name(parser *P, const char *name) { return cur(P)->kind == TK_NAME && !strcmp(cur(P)->s, name); }
static int accept_op(parser *P, const char *op) { return is_op(P, op) ? (P->i++, 1) : 0; }
static int accept_name(parser *P, const char *name) { return is_name(P, name) ? (P->i++, 1) : 0; }

static const char *tok_desc(jtok *t)
{
    switch (t->kind) {
    case TK_EOF: return "the end of the template";
    case TK_TEXT: return "text";
    case TK_VAR_BEGIN: return "'{{'";
    case TK_VAR_END: return "'}}'";
    case TK_BLOCK_BEGIN: return "'{%'";
    case TK_BLOCK_END: return "'%}'";
    case TK_STRING: return "a string";
    case TK_INT:
    case TK_FLOAT: return "a number";
    default: return t->s;
    }
}

static void expect_op(parser *P, const char *op)
{
    if (!accept_op(P, op))
        perr(P, "expected '%s', found %s", op, tok_desc(cur(P)));
}

static void expect_kind(parser *P, int kind, const char *what)
{
    if (cur(P)->kind != kind)
        perr(P, "expected %s, found %s", what, tok_desc(cur(P)));
    P->i++;
}

static const char *expect_name(parser *P)
{
    if (cur(P)->kind != TK_NAME)
        perr(P, "expected a name, found %s", tok_desc(cur(P)));
    return P->t[P->i++].s;
}

/* Growable arrays of nodes while parsing. */
typedef struct {
    jnode **v;
    size_t n, cap;
} nvec;

static void nv_push(parser *P, nvec *v, jnode *x)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        jnode **nv = palloc(P, cap * sizeof *nv);
        if (v->n)
            memcpy(nv, v->v, v->n * sizeof *nv);
        v->v = nv, v->cap = cap;
    }
    v->v[v->n++] = x;
}

typedef struct {
    const char **v;
    size_t n, cap;
} svec;

static void sv_push(parser *P, svec *v, const char *s)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        const char **nv = palloc(P, cap * sizeof *nv);
        if (v->n)
            memcpy(nv, v->v, v->n * sizeof *nv);
        v->v = nv, v->cap = cap;
    }
    v->v[v->n++] = s;
}

static jnode *parse_expr(parser *P);
static jnode *parse_or(parser *P);
static jnode *parse_unary(parser *P, int with_filter);
static jnode *parse_primary(parser *P);
static jnode *parse_postfix(parser *P, jnode *x);
static jnode *parse_tuple(parser *P, int with_condexpr, int explicit_parens);

static void enter(parser *P)
{
    if (++P->depth > MAX_PARSE_DEPTH)
        perr(P, "expressions or statements nested deeper than %d", MAX_PARSE_DEPTH);
}

/* `(a, b=c)`: positional arguments into x->list, keyword ones into
 * x->names / x->list2.  The '(' is already consumed. */
static void parse_call_args(parser *P, jnode *x)
{
    nvec pos = {0}, kwv = {0};
    svec kwn = {0};
    while (!accept_op(P, ")")) {
        if (pos.n + kwv.n)
            expect_op(P, ",");
        if (accept_op(P, ")"))
            break;
        if (is_op(P, "*") || is_op(P, "**"))
            perr(P, "*args and **kwargs in a call are not supported");
        if (cur(P)->kind == TK_NAME && P->t[P->i + 1].kind == TK_OP && !strcmp(P->t[P->i + 1].s, "=")) {
            sv_push(P, &kwn, cur(P)->s);
            P->i += 2;
            nv_push(P, &kwv, parse_expr(P));
        } else {
            if (kwv.n)
                perr(P, "a positional argument after a keyword argument");
            nv_push(P, &pos, parse_expr(P));
        }
    }
    x->list = pos.v, x->n = pos.n;
    x->list2 = kwv.v, x->n2 = kwv.n;
    x->names = kwn.v, x->n_names = kwn.n;
}

static jnode *parse_filter(parser *P, jnode *operand)
{
    jnode *x = node(P, N_FILTER);
    x->a = operand;
    x->name = expect_name(P);
    while (accept_op(P, ".")) {
        const char *more = expect_name(P);
        size_t n = strlen(x->name) + strlen(more) + 2;
        char *s = palloc(P, n);
        snprintf(s, n, "%s.%s", x->name, more);
        x->name = s;
    }
    x->filter = jinja_filter(x->name);
    if (accept_op(P, "("))
        parse_call_args(P, x);
    return x;
}

static jnode *parse_test(parser *P, jnode *operand)
{
    jnode *x = node(P, N_TEST);
    x->a = operand;
    int negate = accept_name(P, "not");
    x->name = expect_name(P);
    x->test = jinja_test(x->name);
    jtok *t = cur(P);
    if (accept_op(P, "(")) {
        parse_call_args(P, x);
    } else if ((t->kind == TK_NAME || t->kind == TK_STRING || t->kind == TK_INT || t->kind == TK_FLOAT ||
                (t->kind == TK_OP && (is_op(P, "(") || is_op(P, "[") || is_op(P, "{")))) &&
               !is_name(P, "else") && !is_name(P, "or") && !is_name(P, "and")) {
        if (is_name(P, "is"))
            perr(P, "tests cannot be chained with 'is'");
        jnode *arg = parse_postfix(P, parse_primary(P));
        x->list = palloc(P, sizeof *x->list);
        x->list[0] = arg;
        x->n = 1;
    }
    if (negate) {
        jnode *n = node(P, N_NOT);
        n->a = x;
        return n;
    }
    return x;
}

static jnode *parse_filter_expr(parser *P, jnode *x)
{
    int deeper = 0;
    for (;;) {
        if (is_op(P, "|") || is_name(P, "is") || is_op(P, "("))
            enter(P), deeper++;
        if (accept_op(P, "|")) {
            x = parse_filter(P, x);
        } else if (accept_name(P, "is")) {
            x = parse_test(P, x);
        } else if (accept_op(P, "(")) {
            jnode *c = node(P, N_CALL);
            c->a = x;
            parse_call_args(P, c);
            x = c;
        } else {
            P->depth -= deeper;
            return x;
        }
    }
}

static jnode *parse_subscript(parser *P, jnode *obj)
{
    jnode *parts[3] = {0};
    int slice = 0;
    for (int k = 0; k < 3; k++) {
        if (!is_op(P, ":") && !is_op(P, "]"))
            parts[k] = parse_expr(P);
        if (k < 2 && accept_op(P, ":"))
            slice = 1;
        else
            break;
    }
    expect_op(P, "]");
    jnode *x = node(P, slice ? N_SLICE : N_ITEM);
    x->a = obj;
    if (!slice && !parts[0])
        perr(P, "an empty subscript []");
    x->b = parts[0], x->c = parts[1], x->d = parts[2];
    return x;
}

static jnode *parse_postfix(parser *P, jnode *x)
{
    int deeper = 0;
    for (;;) {
        if (is_op(P, ".") || is_op(P, "[") || is_op(P, "("))
            enter(P), deeper++;
        if (accept_op(P, ".")) {
            jnode *a = node(P, N_ATTR);
            a->a = x;
            if (cur(P)->kind == TK_INT) {
                /* foo.0 is foo[0] */
                a->kind = N_ITEM;
                a->b = node(P, N_CONST);
                a->b->val = jv_int(cur(P)->i);
                P->i++;
            } else {
                a->name = expect_name(P);
            }
            x = a;
        } else if (accept_op(P, "[")) {
            x = parse_subscript(P, x);
        } else if (accept_op(P, "(")) {
            jnode *c = node(P, N_CALL);
            c->a = x;
            parse_call_args(P, c);
            x = c;
        } else {
            P->depth -= deeper;
            return x;
        }
    }
}

static jnode *const_str(parser *P, const char *s, size_t n)
{
    jnode *x = node(P, N_CONST);
    jstr *js = palloc(P, sizeof *js + n + 1);
    js->len = n;
    memcpy(js->s, s, n);
    x->val.t = JV_STR;
    x->val.u.s = js;
    return x;
}

static jnode *parse_primary(parser *P)
{
    enter(P);
    jtok *t = cur(P);
    jnode *x;
    if (t->kind == TK_NAME) {
        P->i++;
        x = node(P, N_CONST);
        x->line = t->line;
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True"))
            x->val = jv_bool(1);
        else if (!strcmp(t->s, "false") || !strcmp(t->s, "False"))
            x->val = jv_bool(0);
        else if (!strcmp(t->s, "none") || !strcmp(t->s, "None"))
            x->val = jv_none();
        else
            x->kind = N_NAME, x->name = t->s;
    } else if (t->kind == TK_STRING) {
        /* Adjacent literals are one string. */
        size_t n = 0, j = P->i;
        for (; P->t[j].kind == TK_STRING; j++)
            n += P->t[j].len;
        char *s = palloc(P, n + 1);
        n = 0;
        for (; P->t[P->i].kind == TK_STRING; P->i++) {
            memcpy(s + n, P->t[P->i].s, P->t[P->i].len);
            n += P->t[P->i].len;
        }
        x = const_str(P, s, n);
        x->line = t->line;
    } else if (t->kind == TK_INT || t->kind == TK_FLOAT) {
        P->i++;
        x = node(P, N_CONST);
        x->val = t->kind == TK_INT ? jv_int(t->i) : jv_float(t->f);
    } else if (accept_op(P, "(")) {
        x = parse_tuple(P, 1, 1);
        expect_op(P, ")");
    } else if (accept_op(P, "[")) {
        x = node(P, N_LIST);
        nvec v = {0};
        while (!accept_op(P, "]")) {
            if (v.n)
                expect_op(P, ",");
            if (accept_op(P, "]"))
                break;
            nv_push(P, &v, parse_expr(P));
        }
        x->list = v.v, x->n = v.n;
    } else if (accept_op(P, "{")) {
        x = node(P, N_DICT);
        nvec k = {0}, v = {0};
        while (!accept_op(P, "}")) {
            if (k.n)
                expect_op(P, ",");
            if (accept_op(P, "}"))
                break;
            nv_push(P, &k, parse_expr(P));
            expect_op(P, ":");
            nv_push(P, &v, parse_expr(P));
        }
        x->list = k.v, x->n = k.n;
        x->list2 = v.v, x->n2 = v.n;
    } else {
        perr(P, "unexpected %s", tok_desc(t));
    }
    P->depth--;
    return x;
}

static jnode *parse_unary(parser *P, int with_filter)
{
    enter(P);
    jnode *x;
    if (is_op(P, "-") || is_op(P, "+")) {
        x = node(P, is_op(P, "-") ? N_NEG : N_POS);
        P->i++;
        x->a = parse_unary(P, 0);
    } else {
        x = parse_primary(P);
    }
    x = parse_postfix(P, x);
    if (with_filter)
        x = parse_filter_expr(P, x);
    P->depth--;
    return x;
}

static jnode *binary(parser *P, int op, jnode *l, jnode *r, int line)
{
    jnode *x = node(P, N_BIN);
    x->op = (uint8_t)op;
    x->a = l, x->b = r;
    x->line = line;
    return x;
}

static jnode *parse_pow(parser *P)
{
    jnode *x = parse_unary(P, 1);
    int deeper = 0;
    while (is_op(P, "**")) {
        int line = cur(P)->line;
        P->i++;
        enter(P), deeper++;
        x = binary(P, OP_POW, x, parse_unary(P, 1), line);
    }
    P->depth -= deeper;
    return x;
}

static jnode *parse_math2(parser *P)
{
    jnode *x = parse_pow(P);
    int deeper = 0;
    for (;;) {
        int op = is_op(P, "*") ? OP_MUL : is_op(P, "/") ? OP_DIV : is_op(P, "//") ? OP_FLOORDIV
                 : is_op(P, "%") ? OP_MOD : 0;
        if (!op) {
            P->depth -= deeper;
            return x;
        }
        int line = cur(P)->line;
        P->i++;
        enter(P), deeper++;
        x = binary(P, op, x, parse_pow(P), line);
    }
}

static jnode *parse_concat(parser *P)
{
    jnode *x = parse_math2(P);
    if (!is_op(P, "~"))
        return x;
    jnode *c = node(P, N_CONCAT);
    nvec v = {0};
    nv_push(P, &v, x);
    while (accept_op(P, "~"))
        nv_push(P, &v, parse_math2(P));
    c->list = v.v, c->n = v.n;
    return c;
}

static jnode *parse_math1(parser *P)
{
    jnode *x = parse_concat(P);
    int deeper = 0;
    for (;;) {
        int op = is_op(P, "+") ? OP_ADD : is_op(P, "-") ? OP_SUB : 0;
        if (!op) {
            P->depth -= deeper;
            return x;
        }
        int line = cur(P)->line;
        P->i++;
        enter(P), deeper++;
        x = binary(P, op, x, parse_concat(P), line);
    }
}

static jnode *parse_compare(parser *P)
{
    jnode *x = parse_math1(P);
    nvec v = {0};
    uint8_t ops[64];
    size_t n_ops = 0;
    for (;;) {
        int op = is_op(P, "==") ? OP_EQ : is_op(P, "!=") ? OP_NE : is_op(P, "<") ? OP_LT : is_op(P, "<=") ? OP_LE
                 : is_op(P, ">") ? OP_GT : is_op(P, ">=") ? OP_GE : is_name(P, "in") ? OP_IN : 0;
        if (op) {
            P->i++;
        } else if (is_name(P, "not") && P->t[P->i + 1].kind == TK_NAME && !strcmp(P->t[P->i + 1].s, "in")) {
            op = OP_NOTIN;
            P->i += 2;
        } else {
            break;
        }
        if (n_ops == sizeof ops)
            perr(P, "too many chained comparisons");
        if (!v.n)
            nv_push(P, &v, x);
        ops[n_ops++] = (uint8_t)op;
        nv_push(P, &v, parse_math1(P));
    }
    if (!n_ops)
        return x;
    jnode *c = node(P, N_COMPARE);
    c->line = x->line;
    c->list = v.v, c->n = v.n;
    c->ops = palloc(P, n_ops);
    memcpy(c->ops, ops, n_ops);
    return c;
}

static jnode *parse_not(parser *P)
{
    if (is_name(P, "not")) {
        enter(P);
        jnode *x = node(P, N_NOT);
        P->i++;
        x->a = parse_not(P);
        P->depth--;
        return x;
    }
    return parse_compare(P);
}

/* `and` and `or`: left-associative chains of one keyword over the next
 * level's expressions. */
static jnode *parse_chain(parser *P, const char *word, int kind, jnode *(*next)(parser *))
{
    jnode *x = next(P);
    int deeper = 0;
    while (is_name(P, word)) {
        enter(P), deeper++;
        jnode *a = node(P, kind);
        P->i++;
        a->a = x;
        a->b = next(P);
        x = a;
    }
    P->depth -= deeper;
    return x;
}

static jnode *parse_and(parser *P)
{
    return parse_chain(P, "and", N_AND, parse_not);
}

static jnode *parse_or(parser *P)
{
    return parse_chain(P, "or", N_OR, parse_and);
}

static jnode *parse_condexpr(parser *P)
{
    enter(P);
    jnode *x = parse_or(P);
    int deeper = 0;
    while (is_name(P, "if")) {
        enter(P), deeper++;
        jnode *c = node(P, N_COND);
        P->i++;
        c->b = x;
        c->a = parse_or(P);
        if (accept_name(P, "else"))
            c->c = parse_condexpr(P);
        x = c;
    }
    P->depth -= deeper + 1;
    return x;
}

static jnode *parse_expr(parser *P) { return parse_condexpr(P); }

/* A tuple without parentheses where the grammar allows one ("a, b"). */
static jnode *parse_tuple(parser *P, int with_condexpr, int explicit_parens)
{
    nvec v = {0};
    int comma = 0;
    int line = cur(P)->line;
    for (;;) {
        if (v.n && !accept_op(P, ","))
            break;
        if (v.n)
            comma = 1;
        if (is_op(P, ")") || cur(P)->kind == TK_BLOCK_END || cur(P)->kind == TK_VAR_END ||
            (v.n && is_name(P, "if")) || is_name(P, "recursive"))
            break;
        nv_push(P, &v, with_condexpr ? parse_expr(P) : parse_or(P));
    }
    if (!comma && v.n == 1)
        return v.v[0];
    if (!v.n && !explicit_parens)
        perr(P, "expected an expression, found %s", tok_desc(cur(P)));
    jnode *x = node(P, N_TUPLE);
    x->line = line;
    x->list = v.v, x->n = v.n;
    return x;
}

/* ---- statements ---- */

static jnode *parse_body(parser *P, const char *const *ends);

static void block_end(parser *P) { expect_kind(P, TK_BLOCK_END, "'%}'"); }

/* At "{% NAME": whether NAME is one of `ends`. */
static int at_end(parser *P, const char *const *ends)
{
    if (cur(P)->kind != TK_BLOCK_BEGIN || !ends)
        return 0;
    jtok *n = &P->t[P->i + 1];
    if (n->kind != TK_NAME)
        return 0;
    for (size_t k = 0; ends[k]; k++)
        if (!strcmp(n->s, ends[k]))
            return 1;
    return 0;
}

/* Consumes "{% NAME" of an end tag; returns the name. */
static const char *take_end(parser *P, const char *what, int line)
{
    if (cur(P)->kind != TK_BLOCK_BEGIN)
        perr(P, "the %s opened on line %d is not closed", what, line);
    P->i++;
    return expect_name(P);
}

static void parse_targets(parser *P, svec *names)
{
    int paren = accept_op(P, "(");
    do {
        sv_push(P, names, expect_name(P));
    } while (accept_op(P, ","));
    if (paren)
        expect_op(P, ")");
}

static jnode *parse_if(parser *P, int line)
{
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    enter(P);
    jnode *x = node(P, N_IF);
    x->line = line;
    x->a = parse_tuple(P, 0, 0);
    block_end(P);
    x->b = parse_body(P, ends);
    const char *e = take_end(P, "if", line);
    if (!strcmp(e, "elif")) {
        jnode *body = node(P, N_BODY);
        body->list = palloc(P, sizeof *body->list);
        body->list[0] = parse_if(P, cur(P)->line);
        body->n = 1;
        x->c = body;
        P->depth--;
        return x;
    }
    if (!strcmp(e, "else")) {
        block_end(P);
        static const char *const endif[] = {"endif", NULL};
        x->c = parse_body(P, endif);
        take_end(P, "if", line);
    }
    block_end(P);
    P->depth--;
    return x;
}

static jnode *parse_for(parser *P, int line)
{
    static const char *const ends[] = {"else", "endfor", NULL};
    jnode *x = node(P, N_FOR);
    x->line = line;
    svec t = {0};
    parse_targets(P, &t);
    x->names = t.v, x->n_names = t.n;
    if (!accept_name(P, "in"))
        perr(P, "expected 'in' in a for loop, found %s", tok_desc(cur(P)));
    x->a = parse_tuple(P, 0, 0);
    if (accept_name(P, "if"))
        x->b = parse_expr(P);
    if (accept_name(P, "recursive"))
        x->op = 1;
    block_end(P);
    x->c = parse_body(P, ends);
    if (!strcmp(take_end(P, "for", line), "else")) {
        block_end(P);
        static const char *const endfor[] = {"endfor", NULL};
        x->d = parse_body(P, endfor);
        take_end(P, "for", line);
    }
    block_end(P);
    return x;
}

/* A filter chain ("| a | b(c)") over a NULL operand, applied to a block's text. */
static jnode *parse_filter_chain(parser *P, int need_first)
{
    jnode *x = NULL;
    if (need_first || accept_op(P, "|")) {
        do {
            x = parse_filter(P, x);
        } while (accept_op(P, "|"));
    }
    return x;
}

static jnode *parse_set(parser *P, int line)
{
    jnode *x = node(P, N_SET);
    x->line = line;
    svec t = {0};
    const char *first = expect_name(P);
    sv_push(P, &t, first);
    if (accept_op(P, ".")) {
        x->attr = expect_name(P);
    } else {
        while (accept_op(P, ","))
            sv_push(P, &t, expect_name(P));
    }
    x->names = t.v, x->n_names = t.n;
    if (accept_op(P, "=")) {
        x->a = parse_tuple(P, 1, 0);
        block_end(P);
        return x;
    }
    if (x->attr || t.n != 1)
        perr(P, "a block set takes one name");
    x->kind = N_SETBLOCK;
    x->name = first;
    x->b = parse_filter_chain(P, 0);
    block_end(P);
    static const char *const ends[] = {"endset", NULL};
    x->a = parse_body(P, ends);
    take_end(P, "set", line);
    block_end(P);
    return x;
}

/* Parameters "(a, b=1)" of a macro or a call block. */
static void parse_params(parser *P, jnode *x)
{
    svec names = {0};
    nvec defs = {0};
    expect_op(P, "(");
    while (!accept_op(P, ")")) {
        if (names.n)
            expect_op(P, ",");
        if (accept_op(P, ")"))
            break;
        sv_push(P, &names, expect_name(P));
        nv_push(P, &defs, accept_op(P, "=") ? parse_expr(P) : NULL);
    }
    x->names = names.v, x->n_names = names.n;
    x->list2 = defs.v, x->n2 = defs.n;
}

static jnode *parse_stmt(parser *P)
{
    int line = cur(P)->line;
    P->i++; /* {% */
    const char *kw = expect_name(P);
    jnode *x;
    if (!strcmp(kw, "if"))
        return parse_if(P, line);
    if (!strcmp(kw, "for"))
        return parse_for(P, line);
    if (!strcmp(kw, "set"))
        return parse_set(P, line);
    if (!strcmp(kw, "macro")) {
        x = node(P, N_MACRO);
        x->line = line;
        x->name = expect_name(P);
        parse_params(P, x);
        block_end(P);
        static const char *const ends[] = {"endmacro", NULL};
        x->a = parse_body(P, ends);
        take_end(P, "macro", line);
        accept_name(P, x->name);
        block_end(P);
        return x;
    }
    if (!strcmp(kw, "call")) {
        x = node(P, N_CALLBLOCK);
        x->line = line;
        if (is_op(P, "("))
            parse_params(P, x);
        x->a = parse_expr(P);
        if (x->a->kind != N_CALL)
            perr(P, "{%% call %%} expects a macro call");
        block_end(P);
        static const char *const ends[] = {"endcall", NULL};
        x->b = parse_body(P, ends);
        take_end(P, "call", line);
        block_end(P);
        return x;
    }
    if (!strcmp(kw, "filter")) {
        x = node(P, N_FILTERBLOCK);
        x->line = line;
        x->b = parse_filter_chain(P, 1);
        block_end(P);
        static const char *const ends[] = {"endfilter", NULL};
        x->a = parse_body(P, ends);
        take_end(P, "filter", line);
        block_end(P);
        return x;
    }
    if (!strcmp(kw, "generation")) {
        /* transformers' AssistantTracker: marks the assistant's text, renders as is. */
        block_end(P);
        static const char *const ends[] = {"endgeneration", NULL};
        x = parse_body(P, ends);
        take_end(P, "generation", line);
        block_end(P);
        return x;
    }
    if (!strcmp(kw, "break") || !strcmp(kw, "continue")) {
        x = node(P, kw[0] == 'b' ? N_BREAK : N_CONTINUE);
        x->line = line;
        block_end(P);
        return x;
    }
    P->i--;
    if (!strncmp(kw, "end", 3) || !strcmp(kw, "else") || !strcmp(kw, "elif"))
        perr(P, "unexpected '%s'", kw);
    perr(P, "the statement '%s' is not supported", kw);
}

static jnode *parse_body(parser *P, const char *const *ends)
{
    enter(P);
    jnode *body = node(P, N_BODY);
    nvec v = {0};
    for (;;) {
        jtok *t = cur(P);
        if (t->kind == TK_EOF) {
            if (ends) {
                size_t last = 0;
                while (ends[last + 1])
                    last++;
                perr(P, "the template ends inside a block that is not closed (expected '{%% %s %%}')", ends[last]);
            }
            break;
        }
        if (at_end(P, ends))
            break;
        if (t->kind == TK_TEXT) {
            jnode *x = node(P, N_TEXT);
            jstr *s = palloc(P, sizeof *s + t->len + 1);
            s->len = t->len;
            memcpy(s->s, t->s, t->len);
            x->val.t = JV_STR;
            x->val.u.s = s;
            P->i++;
            nv_push(P, &v, x);
        } else if (t->kind == TK_VAR_BEGIN) {
            P->i++;
            jnode *x = node(P, N_OUTPUT);
            x->a = parse_tuple(P, 1, 0);
            expect_kind(P, TK_VAR_END, "'}}'");
            nv_push(P, &v, x);
        } else if (t->kind == TK_BLOCK_BEGIN) {
            nv_push(P, &v, parse_stmt(P));
        } else {
            perr(P, "unexpected %s", tok_desc(t));
        }
    }
    body->list = v.v, body->n = v.n;
    P->depth--;
    return body;
}

/* jinja2 refuses a filter or test that does not exist when it compiles,
 * unless it is in an if or a conditional expression (a "soft" frame,
 * which loops and macros inside it leave). */
static void check_names(parser *P, jnode *x, int soft)
{
    if (!x)
        return;
    if ((x->kind == N_FILTER && !x->filter) || (x->kind == N_TEST && !x->test)) {
        if (!soft) {
            P->i = 0;
            snprintf(P->msg, sizeof P->msg, "line %d: no %s named '%s'", x->line,
                     x->kind == N_FILTER ? "filter" : "test", x->name);
            longjmp(P->jmp, 1);
        }
    }
    int inner = soft;
    switch (x->kind) {
    case N_IF:
    case N_COND:
        inner = 1;
        break;
    case N_FOR:
        check_names(P, x->a, soft);
        check_names(P, x->b, 0);
        check_names(P, x->c, 0);
        check_names(P, x->d, 0);
        return;
    case N_MACRO:
    case N_CALLBLOCK:
    case N_FILTERBLOCK:
    case N_SETBLOCK:
        inner = 0;
        break;
    default:
        break;
    }
    check_names(P, x->a, inner);
    check_names(P, x->b, inner);
    check_names(P, x->c, inner);
    check_names(P, x->d, inner);
    for (size_t k = 0; k < x->n; k++)
        check_names(P, x->list[k], inner);
    for (size_t k = 0; k < x->n2; k++)
        check_names(P, x->list2[k], inner);
}

hx_status hx_jinja_parse(const char *src, size_t len, hx_jinja_template **out)
{
    if (!src || !out)
        return hx_error(HX_ERR_INVALID_ARG, "hx_jinja_parse: NULL argument");
    *out = NULL;
    hx_jinja_template *t = calloc(1, sizeof *t);
    if (!t)
        return hx_error(HX_ERR_NO_MEMORY, "chat template: no memory for the template");
    /* The tree of a template takes a few times its source. */
    t->arena.cap = len * 64 + (1u << 20);
    jtoks toks;
    char msg[400];
    if (!jinja_lex(&t->arena, src, len, &toks, msg, sizeof msg)) {
        hx_jinja_free(t);
        return hx_error(HX_ERR_FORMAT, "chat template %s", msg);
    }
    parser *P = calloc(1, sizeof *P);
    if (!P) {
        hx_jinja_free(t);
        return hx_error(HX_ERR_NO_MEMORY, "chat template: no memory to parse it");
    }
    P->a = &t->arena;
    P->t = toks.v;
    P->n = toks.n;
    if (setjmp(P->jmp)) {
        hx_status s = hx_error(HX_ERR_FORMAT, "chat template %s", P->msg);
        free(P);
        hx_jinja_free(t);
        return s;
    }
    t->root = parse_body(P, NULL);
    check_names(P, t->root, 0);
    free(P);
    *out = t;
    return HX_OK;
}

void hx_jinja_free(hx_jinja_template *t)
{
    if (!t)
        return;
    ja_free(&t->arena);
    free(t);
}
