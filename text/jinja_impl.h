/* The Jinja engine's shared insides (text/jinja_*.c only): values, the
 * syntax tree, the render state.  Every value a render makes lives in the
 * render's arena and is freed with it, so errors unwind with longjmp and
 * leave nothing behind; the arena's size is the memory limit. */
#ifndef HX_TEXT_JINJA_IMPL_H
#define HX_TEXT_JINJA_IMPL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "runtime/error.h"
#include "text/jinja.h"

#include <string.h>

/* memcpy that takes an empty list's NULL array (memcpy itself may not). */
static inline void jcopy(void *dst, const void *src, size_t n)
{
    if (n)
        memcpy(dst, src, n);
}

/* ---- arena ---- */
typedef struct jchunk jchunk;
typedef struct {
    jchunk *head;
    size_t used, cap; /* bytes handed out in all, and the limit */
    int full;         /* the last allocation would have passed the limit */
} jarena;

void *ja_alloc(jarena *a, size_t n); /* zeroed, 16-aligned; NULL past the limit */
void ja_free(jarena *a);

/* ---- values ---- */
typedef enum {
    JV_UNDEF, /* a name or member that is not there (jinja2's Undefined) */
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST, /* flags & JF_TUPLE: a tuple */
    JV_DICT, /* flags & JF_NS: a namespace() */
    JV_FUNC, /* a global, a bound method, a macro, caller() */
    JV_LOOP, /* a for loop's `loop` */
} jv_type;

/* JF_SAFE: a str that is jinja2's Markup (from |safe, |escape): adding a
 * plain str to it escapes that str.  JF_GEN: a list that jinja2 holds as a
 * generator (what map, select... return): always true, no length, and
 * tojson refuses it. */
enum { JF_TUPLE = 1, JF_NS = 2, JF_SAFE = 4, JF_GEN = 8 };

typedef struct jstr {
    size_t len;
    char s[]; /* NUL-terminated */
} jstr;

typedef struct jv {
    uint8_t t, flags;
    union {
        int64_t i; /* JV_BOOL, JV_INT */
        double f;
        jstr *s;
        struct jlist *l;
        struct jdict *d;
        struct jfunc *fn;
        struct jloop *loop;
        const char *undef; /* the name that was missing, for the message */
    } u;
} jv;

typedef struct jlist {
    size_t n, cap;
    jv *v;
} jlist;

typedef struct jdict {
    size_t n, cap;
    jv *k, *v;
} jdict;

typedef struct jnode jnode;
typedef struct jframe jframe;
typedef struct hx_jinja_render jr;

/* Arguments of a call, a filter or a test. */
typedef struct {
    jv *pos;
    size_t npos;
    const char **kwn;
    jv *kwv;
    size_t nkw;
} jargs;

typedef jv (*jnative)(jr *r, jv self, jargs *a);

typedef struct jfunc {
    const char *name;
    jnative native;  /* a global or a bound method (self) */
    jv self;
    const jnode *macro; /* a macro or caller(): its definition */
    jframe *closure;    /* where it was defined */
    const jnode *call_body; /* caller(): the {% call %} block's body */
} jfunc;

typedef struct jloop {
    jlist *items;
    size_t i;
    int depth;
} jloop;

/* ---- syntax tree ---- */
typedef enum {
    /* expressions */
    N_CONST, N_NAME, N_LIST, N_TUPLE, N_DICT, N_ATTR, N_ITEM, N_SLICE, N_CALL, N_FILTER, N_TEST,
    N_NOT, N_NEG, N_POS, N_BIN, N_AND, N_OR, N_COMPARE, N_COND, N_CONCAT,
    /* statements */
    N_BODY, N_TEXT, N_OUTPUT, N_IF, N_FOR, N_SET, N_SETBLOCK, N_MACRO, N_CALLBLOCK, N_FILTERBLOCK,
    N_BREAK, N_CONTINUE,
} jnode_kind;

/* Binary and comparison operators. */
enum { OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW,
       OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN };

typedef jv (*jfilter_fn)(jr *r, jv v, jargs *a);
typedef int (*jtest_fn)(jr *r, jv v, jargs *a);

struct jnode {
    uint8_t kind, op, negate, soft;
    int line;
    jnode *a, *b, *c, *d; /* children: operand, index, slice parts, else... */
    jnode **list;         /* items, positional args, body, comparison operands */
    size_t n;
    jnode **list2; /* keyword argument values, else-body, parameter defaults */
    size_t n2;
    const char **names; /* keyword names, loop targets, parameters */
    size_t n_names;
    uint8_t *ops;  /* N_COMPARE: the operator between list[i] and list[i+1] */
    const char *name; /* N_NAME, N_ATTR, N_FILTER, N_TEST, N_MACRO, N_SET's target */
    const char *attr; /* N_SET to a namespace: the attribute */
    jv val;           /* N_CONST, N_TEXT */
    jfilter_fn filter;
    jtest_fn test;
};

struct hx_jinja_template {
    jarena arena; /* the tree, its names and constants */
    jnode *root;
};

/* ---- the render ---- */
struct jframe {
    jframe *parent;
    jdict vars;
};

typedef struct {
    char *s;
    size_t len, cap;
} jbuf;

struct hx_jinja_render {
    const hx_jinja_template *t;
    hx_jinja_limits lim;
    jarena arena;
    jdict globals; /* the caller's variables */
    jbuf *out;
    uint64_t steps;
    uint32_t depth;
    int line;     /* the template line being evaluated, for messages */
    time_t now;
    int loop_ctl; /* a break (1) or continue (2) on its way to its loop */
    jmp_buf jmp;
    int jmp_set;
    hx_status err;
    char msg[512];
    const char *result;
    size_t result_len;
};

/* Ends the render with an error naming the template line (longjmp). */
_Noreturn void jr_fail(jr *r, const char *fmt, ...) HX_PRINTF(2, 3);
_Noreturn void jr_limit(jr *r, const char *what, unsigned long long limit);

/* Values.  Constructors allocate in the render's arena (jr_fail past its limit). */
void *jr_alloc(jr *r, size_t n);
jv jv_undef(const char *name);
jv jv_none(void);
jv jv_bool(int b);
jv jv_int(int64_t i);
jv jv_float(double f);
jv jv_str(jr *r, const char *s, size_t n);
jv jv_cstr(jr *r, const char *s);
jv jv_list(jr *r, size_t cap);
jv jv_dict(jr *r, size_t cap);
jv jv_native(jr *r, const char *name, jnative fn, jv self);
void jl_push(jr *r, jlist *l, jv v);
jv *jd_get(jdict *d, const char *key);    /* a string key; NULL when absent */
jv *jd_find(jr *r, jdict *d, jv key);     /* any key, by ==; NULL when absent */
void jd_set(jr *r, jdict *d, jv key, jv val);
void jd_append(jr *r, jdict *d, jv key, jv val); /* without looking for `key` first */
void jd_set_str(jr *r, jdict *d, const char *key, jv val);
const char *jv_type_name(jv v);
int jv_truthy(jv v);
int jv_equal(jv a, jv b);
int jv_compare(jr *r, jv a, jv b); /* <0, 0, >0; jr_fail when they do not order */
int jv_is_str(jv v);
/* The list a value iterates as (a list, a dict's keys, a string's characters). */
jlist *jv_iter(jr *r, jv v);
/* Number of elements (characters of a string). */
size_t jv_length(jr *r, jv v);
/* UTF-8 characters of a string (for slicing and length). */
size_t utf8_count(const char *s, size_t n);

/* Text buffers (the arena's; jr_fail past max_output). */
void jb_put(jr *r, jbuf *b, const char *s, size_t n);
void jb_puts(jr *r, jbuf *b, const char *s);
jbuf *jb_new(jr *r);
jv jb_value(jr *r, jbuf *b);
/* str(v) as Python writes it, appended to b; repr for the items of containers. */
void jv_write_str(jr *r, jbuf *b, jv v);
void jv_write_repr(jr *r, jbuf *b, jv v);
jv jv_to_str(jr *r, jv v);
/* Python's repr of a float. */
void fmt_float(char *out, size_t cap, double f);

/* JSON: transformers' tojson (json.dumps), and reading a JSON text. */
typedef struct {
    int ensure_ascii, sort_keys;
    const char *indent; /* NULL: one line */
    const char *item_sep, *key_sep;
} jjson_opts;
void jv_write_json(jr *r, jbuf *b, jv v, const jjson_opts *o, int level);
/* Parses JSON into values; returns 0 and sets *err on malformed text. */
int jv_parse_json(jr *r, const char *s, size_t n, jv *out, const char **err);

/* Built-ins (text/jinja_filters.c, text/jinja_tests.c, text/jinja_methods.c, text/jinja_globals.c). */
jfilter_fn jinja_filter(const char *name);
jtest_fn jinja_test(const char *name);
/* obj.name for a method of a string, list or dict; 0 when there is none. */
int jinja_method(jr *r, jv obj, const char *name, jv *out);
void jinja_globals(jr *r, jdict *g);
/* Looks up argument `i` or keyword `kw`; `def` when absent. */
jv ja_arg(jargs *a, size_t i, const char *kw, jv def);
void ja_check(jr *r, jargs *a, size_t max_pos, const char *what);

/* The evaluator (text/jinja_eval.c), which filters such as map() call back. */
jv jr_call(jr *r, jv fn, jargs *a);
jv jr_getattr(jr *r, jv obj, const char *name);
jv jr_getitem(jr *r, jv obj, jv key);
void jr_step(jr *r);

/* The lexer's tokens, for the parser (text/jinja_lex.c). */
typedef enum {
    TK_EOF, TK_TEXT, TK_VAR_BEGIN, TK_VAR_END, TK_BLOCK_BEGIN, TK_BLOCK_END,
    TK_NAME, TK_STRING, TK_INT, TK_FLOAT, TK_OP,
} jtok_kind;

typedef struct {
    uint8_t kind;
    int line;
    const char *s; /* TK_TEXT, TK_NAME, TK_STRING: the text (unescaped, NUL-terminated); TK_OP: the operator */
    size_t len;
    int64_t i;
    double f;
} jtok;

typedef struct {
    jtok *v;
    size_t n;
} jtoks;

/* Splits normalized source into tokens, whitespace control applied.
 * Returns 0 and writes msg (naming the line) on an error. */
int jinja_lex(jarena *a, const char *src, size_t len, jtoks *out, char *msg, size_t msg_cap);

#endif
