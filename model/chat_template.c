/* Chat templates: a conversation as the prompt text of a model's chat
 * family, as llama.cpp's llama_chat_apply_template writes it (its built-in
 * families, not a Jinja engine).  Most families are one format per role,
 * in a table; the few whose turns depend on the messages before them
 * (Llama 2, Mistral, Gemma, Orion) have their own function. */
#include <ctype.h>
#include <stdint.h>
#include <string.h>

#include "hetero.h"
#include "model/chat_template.h"
#include "runtime/error.h"

/* The text written so far; bytes past `cap` are only counted, so one pass
 * both sizes and writes. */
typedef struct {
    char *buf;
    size_t cap, len;
    int overflow; /* the length no longer fits a size_t */
} chat_out;

static void put_n(chat_out *o, const char *s, size_t n)
{
    if (o->overflow || n >= SIZE_MAX - o->len) {
        o->overflow = 1;
        return;
    }
    if (o->len + n < o->cap)
        memcpy(o->buf + o->len, s, n);
    o->len += n;
}

static void put(chat_out *o, const char *s) { put_n(o, s, strlen(s)); }

/* llama.cpp trims with isspace in the C locale: " \t\n\v\f\r". */
static void put_trimmed(chat_out *o, const char *s)
{
    size_t n = strlen(s);
    while (n && isspace((unsigned char)*s))
        s++, n--;
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    put_n(o, s, n);
}

/* One message in format `fmt`: %r the role, %R the role with a capital
 * first letter, %U the role in capitals, %c the content, %t the content
 * trimmed; everything else as is. */
static void put_turn(chat_out *o, const char *fmt, const hx_chat_message *m)
{
    for (const char *p = fmt; *p;) {
        const char *q = strchr(p, '%');
        if (!q) {
            put(o, p);
            return;
        }
        put_n(o, p, (size_t)(q - p));
        if (q[1] == 'r') {
            put(o, m->role);
        } else if (q[1] == 'R' || q[1] == 'U') {
            for (size_t i = 0; m->role[i]; i++) {
                char c = q[1] == 'U' || i == 0 ? (char)toupper((unsigned char)m->role[i]) : m->role[i];
                put_n(o, &c, 1);
            }
        } else if (q[1] == 'c') {
            put(o, m->content);
        } else if (q[1] == 't') {
            put_trimmed(o, m->content);
        }
        p = q + 2;
    }
}

/* A message's format in a table family; role NULL stands for every role
 * not listed before it.  A role a family does not list is refused: there
 * llama.cpp drops the message, and a caller would lose it unawares. */
typedef struct {
    const char *role, *fmt;
} chat_turn;

typedef struct chat_family chat_family;
struct chat_family {
    const char *name;
    const char *begin;    /* before the first message */
    const char *between;  /* before every message but the first */
    chat_turn turns[5];
    const char *opening;  /* the assistant's turn, when asked for; NULL: the family has none */
};

static const chat_family families[] = {
    {"chatml", NULL, NULL, {{NULL, "<|im_start|>%r\n%c<|im_end|>\n"}}, "<|im_start|>assistant\n"},
};
enum { N_FAMILIES = sizeof families / sizeof families[0] };

static const chat_family *family_named(const char *name)
{
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (!strcmp(families[i].name, name))
            return &families[i];
    return NULL;
}

static hx_status format_table(const chat_family *f, const hx_chat_message *msgs, size_t n, int add_assistant,
                              chat_out *o)
{
    if (f->begin)
        put(o, f->begin);
    for (size_t i = 0; i < n; i++) {
        const chat_turn *t = f->turns;
        while (t < f->turns + 5 && t->fmt && t->role && strcmp(t->role, msgs[i].role))
            t++;
        if (t == f->turns + 5 || !t->fmt)
            return hx_error(HX_ERR_UNSUPPORTED, "chat template '%s' has no role '%s' (message %zu)", f->name,
                            msgs[i].role, i);
        if (i && f->between)
            put(o, f->between);
        put_turn(o, t->fmt, &msgs[i]);
    }
    if (add_assistant && f->opening)
        put(o, f->opening);
    return HX_OK;
}

const char *hx_chat_template_builtin(size_t i) { return i < N_FAMILIES ? families[i].name : NULL; }

/* The family `tmpl` names or is, with the reason in hx_last_error when
 * there is none. */
static hx_status family_of(const char *tmpl, const chat_family **out)
{
    const chat_family *f = family_named(tmpl);
    const char *detected = f ? f->name : hx_chat_detect(tmpl);
    if (!detected)
        return hx_error(HX_ERR_UNSUPPORTED,
                        "chat template \"%.48s%s\" is no built-in family name, nor a template whose markers "
                        "name one (hx_chat_template_builtin lists the families)",
                        tmpl, strlen(tmpl) > 48 ? "..." : "");
    if (!(f = family_named(detected)))
        return hx_error(HX_ERR_UNSUPPORTED, "chat template family '%s' is one hetero does not format", detected);
    *out = f;
    return HX_OK;
}

hx_status hx_chat_template_name(const char *tmpl, const char **name)
{
    if (!tmpl || !name)
        return hx_error(HX_ERR_INVALID_ARG, "hx_chat_template_name: NULL argument");
    const chat_family *f;
    hx_status st = family_of(tmpl, &f);
    *name = st == HX_OK ? f->name : NULL;
    return st;
}

hx_status hx_chat_apply_template(const char *tmpl, const hx_chat_message *msgs, size_t n, int add_assistant,
                                 char *buf, size_t cap, size_t *len)
{
    if (!tmpl || (!msgs && n) || (!buf && cap) || !len)
        return hx_error(HX_ERR_INVALID_ARG, "hx_chat_apply_template: NULL argument");
    for (size_t i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content)
            return hx_error(HX_ERR_INVALID_ARG, "hx_chat_apply_template: message %zu has a NULL %s", i,
                            msgs[i].role ? "content" : "role");
    *len = 0;
    const chat_family *f;
    hx_status st = family_of(tmpl, &f);
    if (st != HX_OK)
        return st;
    chat_out o = {buf, cap, 0, 0};
    st = format_table(f, msgs, n, add_assistant, &o);
    if (st != HX_OK)
        return st;
    if (o.overflow)
        return hx_error(HX_ERR_RANGE, "hx_chat_apply_template: the text is longer than memory");
    *len = o.len;
    if (o.len >= cap) {
        if (cap)
            buf[0] = '\0';
        return hx_error(HX_ERR_RANGE, "hx_chat_apply_template: %zu bytes and a NUL do not fit in %zu", o.len,
                        cap);
    }
    buf[o.len] = '\0';
    return HX_OK;
}
