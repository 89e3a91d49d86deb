/* Tool calls (function calling): which format a chat template's model
 * writes its calls in, the calls read back out of its answer, and the GBNF
 * grammar that forces a call (hx_tool_* in hetero.h).
 *
 * The formats are llama.cpp's classic ones, recognised from the template
 * source as it recognises them:
 *   hermes   <tool_call>{"name": ..., "arguments": {...}}</tool_call>, any
 *            number of them, text around them (Qwen 2.5, Hermes 2 Pro);
 *            or the whole answer one such object, without the tags (a
 *            partial answer shows such a call only once it is whole: text
 *            after the object would make it the answer's text)
 *   llama3   the whole answer one {"name": ..., "parameters": {...}}, or
 *            <|python_tag|> and that object (Llama 3.1/3.2/3.3)
 *   mistral  text, then [TOOL_CALLS] and a JSON array of calls (Nemo)
 *   generic  the whole answer {"tool_calls": [calls]}, {"tool_call": call}
 *            or {"response": "text"} (any other template)
 *   xml      text and <tool_call><function=NAME><parameter=KEY>VALUE
 *            </parameter>...</function></tool_call> blocks, white space
 *            between (Qwen3-Coder, Qwen3.5, Nemotron 3, Step 3.5); seed: the
 *            same in <seed:tool_call> (Seed-OSS).  A value is text: it is
 *            the argument's JSON string where the function's schema says
 *            "string", else its JSON value when it is one (42, true, [1]),
 *            else a string.  Its arguments object is built, a parameter at
 *            a time, so the partial ones still grow as prefixes.
 *   glm      text and <tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE
 *            </arg_value>...</tool_call> blocks, white space between (GLM
 *            4.5-4.7), values as the xml format's
 *
 * A call's arguments are returned as the JSON text the model wrote (the
 * value's exact bytes), so that a prefix of the answer gives a prefix of
 * the final arguments: streamed argument fragments add up to the whole.
 * Parsing is pure and bounded (nesting depth, no allocation per byte). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "text/unicode.h"

#define MAX_DEPTH 256 /* nested JSON values a call may hold */

static const char *const format_names[] = {"generic", "hermes", "llama3", "mistral", "xml", "seed", "glm"};

const char *hx_tool_format_name(hx_tool_format f)
{
    return (unsigned)f < sizeof format_names / sizeof format_names[0] ? format_names[f] : NULL;
}

hx_status hx_tool_format_from_name(const char *name, hx_tool_format *out)
{
    hx_api_enter();
    for (size_t i = 0; name && i < sizeof format_names / sizeof format_names[0]; i++)
        if (!strcmp(name, format_names[i])) {
            *out = (hx_tool_format)i;
            return hx_api_leave(HX_OK);
        }
    return hx_api_leave(hx_error(HX_ERR_INVALID_ARG,
                                 "tool-call format '%s': generic, hermes, llama3, mistral, xml, seed or glm",
                                 name ? name : "(null)"));
}

hx_tool_format hx_tool_format_detect(const char *tmpl)
{
    if (!tmpl)
        return HX_TOOL_FORMAT_GENERIC;
    if (strstr(tmpl, "<arg_key>") && strstr(tmpl, "<arg_value>"))
        return HX_TOOL_FORMAT_GLM;
    if (strstr(tmpl, "<function=") && strstr(tmpl, "<parameter="))
        return strstr(tmpl, "<seed:tool_call>") ? HX_TOOL_FORMAT_SEED : HX_TOOL_FORMAT_XML;
    if (strstr(tmpl, "<tool_call>"))
        return HX_TOOL_FORMAT_HERMES;
    if (strstr(tmpl, "[TOOL_CALLS]"))
        return HX_TOOL_FORMAT_MISTRAL;
    if (strstr(tmpl, "<|start_header_id|>") && (strstr(tmpl, "ipython") || strstr(tmpl, "<|python_tag|>")))
        return HX_TOOL_FORMAT_LLAMA3;
    return HX_TOOL_FORMAT_GENERIC;
}

/* ---- a JSON scanner that knows when the text ran out ---- */

enum { SCAN_BAD = -1, SCAN_MORE = 0, SCAN_OK = 1 };

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static size_t skip_ws(const char *s, size_t n, size_t i)
{
    while (i < n && is_ws(s[i]))
        i++;
    return i;
}

/* A string starting at s[*i] == '"': SCAN_OK with *i past its closing quote. */
static int scan_string(const char *s, size_t n, size_t *i)
{
    size_t k = *i + 1;
    while (k < n) {
        unsigned char c = (unsigned char)s[k];
        if (c == '"') {
            *i = k + 1;
            return SCAN_OK;
        }
        if (c < 0x20)
            return SCAN_BAD;
        if (c == '\\') {
            if (k + 1 >= n)
                return SCAN_MORE;
            char e = s[k + 1];
            if (e == 'u') {
                for (size_t h = 2; h < 6; h++) {
                    if (k + h >= n)
                        return SCAN_MORE;
                    char x = s[k + h];
                    if (!((x >= '0' && x <= '9') || (x >= 'a' && x <= 'f') || (x >= 'A' && x <= 'F')))
                        return SCAN_BAD;
                }
                k += 6;
                continue;
            }
            if (!strchr("\"\\/bfnrt", e))
                return SCAN_BAD;
            k += 2;
            continue;
        }
        k++;
    }
    return SCAN_MORE;
}

/* A literal (true, false, null) or a number: its characters, checked
 * loosely here (jansson checks the whole value once it is complete). */
static int scan_atom(const char *s, size_t n, size_t *i)
{
    static const char *const words[] = {"true", "false", "null"};
    for (size_t w = 0; w < 3; w++) {
        size_t L = strlen(words[w]);
        if (s[*i] != words[w][0])
            continue;
        size_t have = n - *i < L ? n - *i : L;
        if (memcmp(s + *i, words[w], have))
            return SCAN_BAD;
        if (have < L)
            return SCAN_MORE;
        *i += L;
        return SCAN_OK;
    }
    size_t k = *i;
    while (k < n && strchr("0123456789+-.eE", s[k]))
        k++;
    if (k == *i)
        return SCAN_BAD;
    if (k == n)
        return SCAN_MORE; /* a number may go on */
    *i = k;
    return SCAN_OK;
}

static int scan_value(const char *s, size_t n, size_t *i, int depth)
{
    size_t k = skip_ws(s, n, *i);
    if (k >= n)
        return SCAN_MORE;
    if (s[k] == '"') {
        int r = scan_string(s, n, &k);
        if (r == SCAN_OK)
            *i = k;
        return r;
    }
    if (s[k] != '{' && s[k] != '[') {
        int r = scan_atom(s, n, &k);
        if (r == SCAN_OK)
            *i = k;
        return r;
    }
    if (depth >= MAX_DEPTH)
        return SCAN_BAD;
    const char close = s[k] == '{' ? '}' : ']';
    const int object = close == '}';
    k = skip_ws(s, n, k + 1);
    if (k >= n)
        return SCAN_MORE;
    if (s[k] == close) {
        *i = k + 1;
        return SCAN_OK;
    }
    for (;;) {
        if (object) {
            if (s[k] != '"')
                return SCAN_BAD;
            int r = scan_string(s, n, &k);
            if (r != SCAN_OK)
                return r;
            k = skip_ws(s, n, k);
            if (k >= n)
                return SCAN_MORE;
            if (s[k++] != ':')
                return SCAN_BAD;
        }
        int r = scan_value(s, n, &k, depth + 1);
        if (r != SCAN_OK)
            return r;
        k = skip_ws(s, n, k);
        if (k >= n)
            return SCAN_MORE;
        if (s[k] == close) {
            *i = k + 1;
            return SCAN_OK;
        }
        if (s[k++] != ',')
            return SCAN_BAD;
        k = skip_ws(s, n, k);
        if (k >= n)
            return SCAN_MORE;
    }
}

/* ---- one call: {"name": "f", "arguments"|"parameters": {...}} ---- */

typedef struct {
    char *name;           /* NULL until its string is complete */
    size_t args_at, args_len; /* the arguments' bytes in the text */
    int args_seen, args_string; /* arguments given as a JSON string */
    char *id;             /* Mistral's own */
    char *args_built;     /* xml: the arguments object built so far (owned), else NULL */
    int complete;
} call;

typedef struct {
    const char *s;
    size_t n;
    int partial;
    json_t *tools;        /* xml: the tools offered, for their parameters' types, or NULL */
    call *calls;
    size_t n_calls, cap_calls;
    char *content;
    size_t content_len, content_cap;
    int bad;              /* no memory */
} parse;

static call *new_call(parse *P)
{
    if (P->n_calls == P->cap_calls) {
        size_t cap = P->cap_calls ? 2 * P->cap_calls : 4;
        call *c = realloc(P->calls, cap * sizeof *c);
        if (!c) {
            P->bad = 1;
            return NULL;
        }
        P->calls = c;
        P->cap_calls = cap;
    }
    call *c = &P->calls[P->n_calls++];
    memset(c, 0, sizeof *c);
    return c;
}

static void drop_calls(parse *P, size_t keep)
{
    while (P->n_calls > keep) {
        call *c = &P->calls[--P->n_calls];
        free(c->name);
        free(c->id);
        free(c->args_built);
    }
}

static void add_content(parse *P, const char *s, size_t n)
{
    if (P->content_len + n + 1 > P->content_cap) {
        size_t cap = 2 * (P->content_len + n + 1);
        char *c = realloc(P->content, cap);
        if (!c) {
            P->bad = 1;
            return;
        }
        P->content = c;
        P->content_cap = cap;
    }
    memcpy(P->content + P->content_len, s, n);
    P->content_len += n;
    P->content[P->content_len] = '\0';
}

static char *decode_string(const char *s, size_t n)
{
    json_t *v = json_loadb(s, n, JSON_DECODE_ANY, NULL);
    char *r = json_is_string(v) ? strdup(json_string_value(v)) : NULL;
    json_decref(v);
    return r;
}

static int key_is(const char *s, size_t at, size_t end, const char *key)
{
    size_t L = strlen(key);
    return end - at == L + 2 && !memcmp(s + at + 1, key, L);
}

/* Scans one call object at *i: SCAN_OK (complete and well formed),
 * SCAN_MORE (the text ran out inside it: c holds what is known) or
 * SCAN_BAD. */
static int scan_call(parse *P, size_t *i, call *c)
{
    const char *s = P->s;
    size_t n = P->n, k = skip_ws(s, n, *i);
    if (k >= n)
        return SCAN_MORE;
    if (s[k] != '{')
        return SCAN_BAD;
    k = skip_ws(s, n, k + 1);
    for (;;) {
        if (k >= n)
            return SCAN_MORE;
        if (s[k] == '}')
            break;
        if (s[k] != '"')
            return SCAN_BAD;
        size_t key_at = k;
        int r = scan_string(s, n, &k);
        if (r != SCAN_OK)
            return r;
        size_t key_end = k;
        k = skip_ws(s, n, k);
        if (k >= n)
            return SCAN_MORE;
        if (s[k++] != ':')
            return SCAN_BAD;
        k = skip_ws(s, n, k);
        size_t v_at = k;
        const int is_args = key_is(s, key_at, key_end, "arguments") || key_is(s, key_at, key_end, "parameters");
        if (is_args) {
            if (c->args_seen)
                return SCAN_BAD;
            c->args_seen = 1;
            c->args_at = v_at;
            c->args_len = 0;
        }
        r = scan_value(s, n, &k, 1);
        if (r == SCAN_BAD)
            return r;
        if (r == SCAN_MORE) {
            if (is_args && v_at < n && s[v_at] == '{')
                c->args_len = hx_unicode_whole_prefix(s + v_at, n - v_at);
            return SCAN_MORE;
        }
        if (is_args) {
            c->args_len = k - v_at;
            if (s[v_at] == '"')
                c->args_string = 1;
            else if (s[v_at] != '{')
                return SCAN_BAD;
        } else if (key_is(s, key_at, key_end, "name")) {
            if (c->name || s[v_at] != '"' || !(c->name = decode_string(s + v_at, k - v_at)) || !*c->name)
                return SCAN_BAD;
        } else if (key_is(s, key_at, key_end, "id")) {
            if (c->id || s[v_at] != '"' || !(c->id = decode_string(s + v_at, k - v_at)))
                return SCAN_BAD;
        } else if (key_is(s, key_at, key_end, "type")) {
            if (k - v_at != 10 || memcmp(s + v_at, "\"function\"", 10))
                return SCAN_BAD;
        } else {
            return SCAN_BAD; /* a key a call does not have */
        }
        k = skip_ws(s, n, k);
        if (k >= n)
            return SCAN_MORE;
        if (s[k] == ',') {
            k = skip_ws(s, n, k + 1);
            continue;
        }
        if (s[k] != '}')
            return SCAN_BAD;
    }
    if (!c->name)
        return SCAN_BAD;
    /* The whole object must be JSON (numbers and escapes included). */
    json_t *whole = json_loadb(s + *i, k + 1 - *i, JSON_DECODE_ANY, NULL);
    int ok = json_is_object(whole);
    json_decref(whole);
    if (!ok)
        return SCAN_BAD;
    *i = k + 1;
    c->complete = 1;
    return SCAN_OK;
}

/* Calls in a JSON array at *i (Mistral's, the generic tool_calls). */
static int scan_call_array(parse *P, size_t *i)
{
    const char *s = P->s;
    size_t n = P->n, k = skip_ws(s, n, *i);
    if (k >= n)
        return SCAN_MORE;
    if (s[k] != '[')
        return SCAN_BAD;
    k = skip_ws(s, n, k + 1);
    for (;;) {
        call *c = new_call(P);
        if (!c)
            return SCAN_BAD;
        int r = scan_call(P, &k, c);
        if (r != SCAN_OK)
            return r;
        k = skip_ws(s, n, k);
        if (k >= n)
            return SCAN_MORE;
        if (s[k] == ']') {
            *i = k + 1;
            return SCAN_OK;
        }
        if (s[k++] != ',')
            return SCAN_BAD;
    }
}

/* The length of the longest suffix of s[0, n) that begins `marker`
 * (withheld from streamed content: it may be the marker coming). */
static size_t marker_prefix_at_end(const char *s, size_t n, const char *marker)
{
    size_t L = strlen(marker);
    for (size_t k = L - 1 < n ? L - 1 : n; k > 0; k--)
        if (!memcmp(s + n - k, marker, k))
            return k;
    return 0;
}

static const char *find(const char *s, size_t n, size_t from, const char *needle)
{
    size_t L = strlen(needle);
    for (size_t i = from; i + L <= n; i++)
        if (s[i] == needle[0] && !memcmp(s + i, needle, L))
            return s + i;
    return NULL;
}

static void parse_bare(parse *P, const char *tag);

/* Literal `lit` at *k: SCAN_OK past it, SCAN_MORE when the text ends
 * inside it, else SCAN_BAD. */
static int expect(const char *s, size_t n, size_t *k, const char *lit)
{
    size_t L = strlen(lit), have = n - *k < L ? n - *k : L;
    if (memcmp(s + *k, lit, have))
        return SCAN_BAD;
    if (have < L)
        return SCAN_MORE;
    *k += L;
    return SCAN_OK;
}

/* One call after its block's open tag, through the block's close tag:
 * SCAN_OK with *i past it, SCAN_MORE (c holds what is known) or SCAN_BAD. */
typedef int (*scan_block)(parse *P, size_t *i, call *c, const char *close);

/* Text and open...close blocks, each one call read by `scan`.  A block
 * that is not a call stays in the content as it was written. */
static void parse_blocks(parse *P, const char *open, const char *close, scan_block scan)
{
    const char *s = P->s;
    size_t n = P->n, i = 0;
    while (i < n) {
        const char *o = find(s, n, i, open);
        if (!o) {
            size_t keep = P->partial ? marker_prefix_at_end(s + i, n - i, open) : 0;
            add_content(P, s + i, n - i - keep);
            return;
        }
        add_content(P, s + i, (size_t)(o - s) - i);
        size_t k = (size_t)(o - s) + strlen(open), before = P->n_calls;
        call *c = new_call(P);
        if (!c)
            return;
        int r = scan(P, &k, c, close);
        if (r == SCAN_MORE && P->partial)
            return; /* the call being written: what is known of it stays */
        if (r != SCAN_OK) {
            /* Not a call (or one cut short): its text is the model's answer. */
            drop_calls(P, before);
            size_t end = r == SCAN_MORE ? n : (size_t)(o - s) + strlen(open);
            add_content(P, o, end - (size_t)(o - s));
            i = end;
            continue;
        }
        i = k;
    }
}

/* Hermes' block: a call object, then the close tag. */
static int scan_hermes_call(parse *P, size_t *i, call *c, const char *close)
{
    int r = scan_call(P, i, c);
    size_t k = skip_ws(P->s, P->n, *i);
    if (r == SCAN_OK && (r = expect(P->s, P->n, &k, close)) == SCAN_OK)
        *i = k;
    return r;
}

/* Hermes: text and <tool_call>...</tool_call> blocks, or the whole answer
 * one call without them. */
static void parse_hermes(parse *P)
{
    if (skip_ws(P->s, P->n, 0) < P->n && P->s[skip_ws(P->s, P->n, 0)] == '{')
        parse_bare(P, NULL);
    else
        parse_blocks(P, "<tool_call>", "</tool_call>", scan_hermes_call);
}

/* The whole answer one call: Llama 3.x's (after <|python_tag|> or not),
 * and Hermes' models that leave out the tags (llama.cpp's Hermes parser
 * takes those too). */
static void parse_bare(parse *P, const char *tag)
{
    const char *s = P->s;
    size_t n = P->n, k = skip_ws(s, n, 0), tl = tag ? strlen(tag) : 0;
    if (tag && n - k >= tl && !memcmp(s + k, tag, tl))
        k += tl;
    else if (tag && P->partial && k < n && n - k < tl && !memcmp(s + k, tag, n - k))
        return; /* the tag coming */
    k = skip_ws(s, n, k);
    if (k >= n) {
        if (!P->partial)
            add_content(P, s, n);
        return;
    }
    if (s[k] != '{') {
        add_content(P, s, n);
        return;
    }
    /* Whether this is a call is known only at the end (text after the
     * object makes it the answer's text): a partial answer shows nothing. */
    if (P->partial)
        return;
    call *c = new_call(P);
    if (!c)
        return;
    int r = scan_call(P, &k, c);
    if (r == SCAN_OK && skip_ws(s, n, k) < n)
        r = SCAN_BAD; /* text after the call: this was no call */
    if (r != SCAN_OK) {
        drop_calls(P, 0);
        add_content(P, s, n);
    }
}

/* Mistral: text, then [TOOL_CALLS] and the array of calls. */
static void parse_mistral(parse *P)
{
    static const char tag[] = "[TOOL_CALLS]";
    const char *s = P->s, *t = find(s, P->n, 0, tag);
    size_t n = P->n;
    if (!t) {
        add_content(P, s, n - (P->partial ? marker_prefix_at_end(s, n, tag) : 0));
        return;
    }
    add_content(P, s, (size_t)(t - s));
    size_t k = (size_t)(t - s) + sizeof tag - 1;
    int r = scan_call_array(P, &k);
    if (r == SCAN_OK && skip_ws(s, n, k) < n)
        r = SCAN_BAD;
    if (r == SCAN_MORE && P->partial)
        return;
    if (r != SCAN_OK) {
        drop_calls(P, 0);
        add_content(P, t, n - (size_t)(t - s));
    }
}

/* Generic: {"tool_calls": [...]}, {"tool_call": {...}} or {"response": "..."}. */
/* ---- xml: <function=NAME><parameter=KEY>VALUE</parameter></function> ---- */

/* A name (letters, digits, "_.-:", at most 256 bytes) up to the first
 * other byte, which it leaves: SCAN_MORE when the text ends first. */
static int scan_name(const char *s, size_t n, size_t *k, size_t *at, size_t *len)
{
    size_t i = *k;
    while (i < n && i - *k <= 256) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '-' || c == ':'))
            break;
        i++;
    }
    if (i - *k > 256 || (i < n && i == *k))
        return SCAN_BAD;
    if (i >= n)
        return SCAN_MORE;
    *at = *k;
    *len = i - *k;
    *k = i;
    return SCAN_OK;
}

/* The JSON type the function `name`'s schema gives parameter `key`, or NULL. */
static const char *param_type(json_t *tools, const char *name, const char *key, size_t key_len)
{
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *fn = json_object_get(t, "function");
        const char *fn_name = json_string_value(json_object_get(fn, "name"));
        if (fn_name && !strcmp(fn_name, name)) {
            json_t *props = json_object_get(json_object_get(fn, "parameters"), "properties");
            json_t *p = json_object_getn(props, key, key_len);
            return json_string_value(json_object_get(p, "type"));
        }
    }
    return NULL;
}

/* A parameter's value text as JSON text (malloc'd): a string where its
 * type is "string", else its own JSON value when it is one, else a string. */
static char *value_json(const char *v, size_t n, const char *type)
{
    json_t *x = NULL;
    if (!type || strcmp(type, "string")) {
        x = json_loadb(v, n, JSON_DECODE_ANY, NULL);
        if (json_is_string(x) && type == NULL) { /* "quoted" text is that text, as a string would be */
            json_decref(x);
            x = NULL;
        }
    }
    if (!x)
        x = json_stringn(v, n);
    char *out = x ? json_dumps(x, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    json_decref(x);
    return out;
}

static int append(char **buf, const char *a, const char *b, const char *c)
{
    size_t have = *buf ? strlen(*buf) : 0, need = have + strlen(a) + strlen(b) + strlen(c) + 1;
    char *m = realloc(*buf, need);
    if (!m)
        return -1;
    m[have] = '\0';
    strcat(strcat(strcat(m, a), b), c);
    *buf = m;
    return 0;
}

/* The tags of a format that writes each argument as text: a call is
 * fn_open NAME name_end, then key_open KEY key_close val_open VALUE
 * val_close for each argument (white space between), then fn_close (if
 * any) and the block's close tag. */
typedef struct {
    const char *fn_open, *name_end, *fn_close; /* "" / NULL: none */
    const char *key_open, *key_close, *val_open, *val_close;
    int trim; /* one line break on each side of a value is the format's */
} text_args;

static const text_args QWEN_XML = {"<function=", ">", "</function>", "<parameter=", ">", "", "</parameter>", 1};
static const text_args GLM_ARGS = {"", NULL, NULL, "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", 0};

/* One call after its block's open tag, through the block's close tag.  On
 * SCAN_MORE, c holds the name once whole and the arguments of those closed
 * so far. */
static int scan_text_args(parse *P, size_t *i, call *c, const char *close, const text_args *t)
{
    const char *s = P->s;
    size_t n = P->n, k = skip_ws(s, n, *i), at, len;
    int r = k >= n ? SCAN_MORE : *t->fn_open ? expect(s, n, &k, t->fn_open) : SCAN_OK;
    if (r == SCAN_OK)
        r = scan_name(s, n, &k, &at, &len);
    if (r == SCAN_OK && t->name_end)
        r = expect(s, n, &k, t->name_end);
    if (r != SCAN_OK)
        return r;
    if (!(c->name = malloc(len + 1)) || append(&c->args_built, "{", "", "")) {
        P->bad = 1;
        return SCAN_BAD;
    }
    memcpy(c->name, s + at, len);
    c->name[len] = '\0';
    const char *end = t->fn_close ? t->fn_close : close;
    for (int first = 1;; first = 0) {
        k = skip_ws(s, n, k);
        if (k >= n)
            return SCAN_MORE;
        size_t j = k;
        if ((r = expect(s, n, &j, end)) != SCAN_BAD) {
            if (r == SCAN_MORE)
                return SCAN_MORE;
            k = j;
            break;
        }
        if ((r = expect(s, n, &k, t->key_open)) == SCAN_OK && (r = scan_name(s, n, &k, &at, &len)) == SCAN_OK &&
            (r = expect(s, n, &k, t->key_close)) == SCAN_OK && *t->val_open) {
            k = skip_ws(s, n, k);
            r = k >= n ? SCAN_MORE : expect(s, n, &k, t->val_open);
        }
        if (r != SCAN_OK)
            return r;
        const char *e = find(s, n, k, t->val_close);
        if (!e)
            return SCAN_MORE;
        size_t v = k, ve = (size_t)(e - s);
        if (t->trim && v < ve && s[v] == '\n')
            v++;
        if (t->trim && ve > v && s[ve - 1] == '\n')
            ve--;
        char *key = value_json(s + at, len, "string");
        char *val = value_json(s + v, ve - v, P->tools ? param_type(P->tools, c->name, s + at, len) : NULL);
        int bad = !key || !val || append(&c->args_built, first ? "" : ", ", key, ": ") ||
                  append(&c->args_built, val, "", "");
        free(key);
        free(val);
        if (bad) {
            P->bad = 1;
            return SCAN_BAD;
        }
        k = (size_t)(e - s) + strlen(t->val_close);
    }
    if (t->fn_close) {
        k = skip_ws(s, n, k);
        if (k >= n)
            return SCAN_MORE;
        if ((r = expect(s, n, &k, close)) != SCAN_OK)
            return r;
    }
    if (append(&c->args_built, "}", "", "")) {
        P->bad = 1;
        return SCAN_BAD;
    }
    c->complete = 1;
    *i = k;
    return SCAN_OK;
}

static int scan_xml_call(parse *P, size_t *i, call *c, const char *close)
{
    return scan_text_args(P, i, c, close, &QWEN_XML);
}

static int scan_glm_call(parse *P, size_t *i, call *c, const char *close)
{
    return scan_text_args(P, i, c, close, &GLM_ARGS);
}

static void parse_generic(parse *P)
{
    const char *s = P->s;
    size_t n = P->n, k = skip_ws(s, n, 0);
    if (k >= n) {
        if (!P->partial)
            add_content(P, s, n);
        return;
    }
    if (s[k] != '{') {
        add_content(P, s, n);
        return;
    }
    int r = SCAN_MORE;
    k = skip_ws(s, n, k + 1);
    size_t key_at = k;
    if (k < n && s[k] != '"')
        r = SCAN_BAD;
    else if (k < n && (r = scan_string(s, n, &k)) == SCAN_OK) {
        size_t key_end = k;
        k = skip_ws(s, n, k);
        if (k >= n)
            r = SCAN_MORE;
        else if (s[k++] != ':')
            r = SCAN_BAD;
        else if (key_is(s, key_at, key_end, "tool_calls"))
            r = scan_call_array(P, &k);
        else if (key_is(s, key_at, key_end, "tool_call")) {
            call *c = new_call(P);
            r = c ? scan_call(P, &k, c) : SCAN_BAD;
        } else if (key_is(s, key_at, key_end, "response")) {
            size_t v = skip_ws(s, n, k);
            r = v >= n ? SCAN_MORE : s[v] != '"' ? SCAN_BAD : scan_string(s, n, &v);
            if (r == SCAN_OK) {
                char *text = decode_string(s + skip_ws(s, n, k), v - skip_ws(s, n, k));
                if (text)
                    add_content(P, text, strlen(text));
                else
                    r = SCAN_BAD;
                free(text);
                k = v;
            }
        } else
            r = SCAN_BAD;
        if (r == SCAN_OK) {
            k = skip_ws(s, n, k);
            r = k >= n ? SCAN_MORE : s[k] != '}' ? SCAN_BAD : skip_ws(s, n, k + 1) < n ? SCAN_BAD : SCAN_OK;
        }
    }
    if (r == SCAN_MORE && P->partial)
        return;
    if (r != SCAN_OK) {
        drop_calls(P, 0);
        P->content_len = 0;
        add_content(P, s, n);
    }
}

static char *trimmed(const char *s, size_t n, int partial, size_t *out_len)
{
    size_t a = 0;
    while (a < n && is_ws(s[a]))
        a++;
    while (n > a && is_ws(s[n - 1]))
        n--;
    if (partial)
        n = a + hx_unicode_whole_prefix(s + a, n - a);
    *out_len = n - a;
    return (char *)s + a;
}

hx_status hx_tool_calls_parse(hx_tool_format f, const char *text, size_t n, int partial, char *buf, size_t cap,
                              size_t *len)
{
    return hx_tool_calls_parse_tools(f, NULL, text, n, partial, buf, cap, len);
}

hx_status hx_tool_calls_parse_tools(hx_tool_format f, const char *tools_json, const char *text, size_t n, int partial,
                                    char *buf, size_t cap, size_t *len)
{
    hx_api_enter();
    if (!text || !len || (cap && !buf) || (unsigned)f > HX_TOOL_FORMAT_GLM)
        return hx_api_leave(
            hx_error(HX_ERR_INVALID_ARG, "hx_tool_calls_parse: text, len, a buffer for cap and a format"));
    /* only the formats that write values as text read the tools (a
     * streamed answer is parsed again at every chunk) */
    const int typed = f == HX_TOOL_FORMAT_XML || f == HX_TOOL_FORMAT_SEED || f == HX_TOOL_FORMAT_GLM;
    parse P = {.s = text, .n = n, .partial = partial};
    P.tools = typed && tools_json ? json_loads(tools_json, 0, NULL) : NULL;
    switch (f) {
    case HX_TOOL_FORMAT_HERMES: parse_hermes(&P); break;
    case HX_TOOL_FORMAT_LLAMA3: parse_bare(&P, "<|python_tag|>"); break;
    case HX_TOOL_FORMAT_MISTRAL: parse_mistral(&P); break;
    case HX_TOOL_FORMAT_XML: parse_blocks(&P, "<tool_call>", "</tool_call>", scan_xml_call); break;
    case HX_TOOL_FORMAT_SEED: parse_blocks(&P, "<seed:tool_call>", "</seed:tool_call>", scan_xml_call); break;
    case HX_TOOL_FORMAT_GLM: parse_blocks(&P, "<tool_call>", "</tool_call>", scan_glm_call); break;
    default: parse_generic(&P); break;
    }
    json_decref(P.tools);
    json_t *calls = json_array(), *out = NULL;
    size_t cl = 0;
    const char *c = trimmed(P.content ? P.content : "", P.content_len, partial, &cl);
    json_t *content = cl ? json_stringn(c, cl) : json_null();
    if (!content && cl) /* bytes that are not UTF-8: the answer as it came is no call either */
        content = json_null();
    for (size_t i = 0; calls && i < P.n_calls && !P.bad; i++) {
        const call *k = &P.calls[i];
        if (!k->name)
            continue; /* a call being written shows once its name is whole */
        json_t *args;
        if (k->args_built) {
            args = json_string(k->args_built);
        } else if (k->args_string && k->complete) {
            char *v = decode_string(text + k->args_at, k->args_len);
            args = v ? json_string(v) : NULL;
            free(v);
        } else if (k->args_string) {
            args = json_string(""); /* a string's arguments show whole, at the end */
        } else if (k->args_seen) {
            args = json_stringn(text + k->args_at, k->args_len);
        } else {
            args = json_string(k->complete ? "{}" : "");
        }
        json_t *one = json_pack("{s:s,s:o}", "name", k->name, "arguments", args ? args : json_string(""));
        if (one && k->id)
            json_object_set_new(one, "id", json_string(k->id));
        if (!one || json_array_append_new(calls, one))
            P.bad = 1;
    }
    if (calls && content && !P.bad)
        out = json_pack("{s:o,s:O}", "content", content, "tool_calls", calls); /* takes content, even on failure */
    else
        json_decref(content);
    json_decref(calls);
    drop_calls(&P, 0);
    free(P.calls);
    free(P.content);
    char *dump = out ? json_dumps(out, JSON_COMPACT) : NULL;
    json_decref(out);
    if (!dump)
        return hx_api_leave(hx_error(HX_ERR_NO_MEMORY, "tool calls: out of memory"));
    *len = strlen(dump);
    hx_status st = HX_OK;
    if (cap <= *len)
        st = hx_error(HX_ERR_RANGE, "hx_tool_calls_parse: the result takes %zu bytes and a NUL; the buffer has %zu",
                      *len, cap);
    else
        memcpy(buf, dump, *len + 1);
    free(dump);
    return hx_api_leave(st);
}
