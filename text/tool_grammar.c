/* The GBNF grammar that forces a tool call (hx_tool_calls_grammar in
 * hetero.h): the format's wrapper around one call object per function,
 * {"name": <that name>, "arguments": <its parameters' schema>}, so that
 * the answer parses as a call and its arguments validate.  The call
 * objects go through the JSON Schema converter as one schema (an anyOf of
 * the functions); Hermes' text wrapper is written around its rules.  The
 * xml and glm formats are not JSON: their grammar is written here, a
 * function's parameters in its schema's order (the required ones present),
 * a value that is a string as text, any other through the converter. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "text/grammar.h"

/* One function's call object. */
static json_t *call_schema(hx_tool_format f, json_t *fn)
{
    json_t *params = json_object_get(fn, "parameters");
    json_t *args = params && !json_is_null(params) ? json_deep_copy(params) : json_pack("{s:s}", "type", "object");
    json_t *props = json_pack("{s:{s:o},s:o}", "name", "const", json_deep_copy(json_object_get(fn, "name")),
                              f == HX_TOOL_FORMAT_LLAMA3 ? "parameters" : "arguments", args);
    json_t *req = json_pack("[s,s]", "name", f == HX_TOOL_FORMAT_LLAMA3 ? "parameters" : "arguments");
    if (f == HX_TOOL_FORMAT_MISTRAL) {
        /* Nemo writes each call's id (nine letters and digits) after its arguments. */
        json_object_set_new(props, "id", json_pack("{s:s,s:i,s:i}", "type", "string", "minLength", 9, "maxLength", 9));
        json_array_append_new(req, json_string("id"));
    }
    return json_pack("{s:s,s:o,s:o,s:b}", "type", "object", "properties", props, "required", req,
                     "additionalProperties", 0);
}

static hx_status schema_grammar(json_t *schema, char **out)
{
    char *text = json_dumps(schema, JSON_COMPACT);
    size_t len = 0;
    char *g = NULL;
    hx_status st = text ? hx_json_schema_to_grammar(text, NULL, 0, &len) : HX_ERR_NO_MEMORY;
    if (st == HX_ERR_RANGE)
        st = (g = malloc(len + 1)) ? hx_json_schema_to_grammar(text, g, len + 1, &len) : HX_ERR_NO_MEMORY;
    free(text);
    if (st) {
        free(g);
        return st == HX_ERR_NO_MEMORY ? hx_error(st, "tool-call grammar: out of memory") : st;
    }
    *out = g;
    return HX_OK;
}

/* Every rule of grammar g renamed: root to `prefix`, another rule X to
 * prefix-X (references too, outside literals and classes), so that the
 * converter's grammars (one per schema) become parts of a larger one. */
static char *prefixed(const char *g, const char *prefix)
{
    /* the rules g defines: a name at a line's start, then " ::=" */
    size_t n = strlen(g), pl = strlen(prefix), n_names = 0, cap = n + 1;
    for (const char *l = g; l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (strstr(l, " ::=") && (!strchr(l, '\n') || strstr(l, " ::=") < strchr(l, '\n')))
            n_names++;
    const char **names = calloc(n_names + 1, sizeof *names);
    size_t *lens = calloc(n_names + 1, sizeof *lens), k = 0;
    for (const char *l = g; names && lens && l && k < n_names; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        const char *d = strstr(l, " ::=");
        if (d && (!strchr(l, '\n') || d < strchr(l, '\n'))) {
            names[k] = l;
            lens[k++] = (size_t)(d - l);
        }
    }
    cap += (pl + 1) * (n / 2 + 1); /* a prefix per word at most, and words are apart */
    char *out = names && lens ? malloc(cap) : NULL;
    size_t w = 0;
    char quote = 0;
    for (size_t i = 0; out && i < n;) {
        char c = g[i];
        if (quote) {
            out[w++] = g[i++];
            if (c == '\\' && i < n)
                out[w++] = g[i++];
            else if (c == quote)
                quote = 0;
            continue;
        }
        if (c == '"' || c == '[') {
            quote = c == '"' ? '"' : ']';
            out[w++] = g[i++];
            continue;
        }
        size_t e = i;
        while (e < n && (g[e] == '-' || g[e] == '_' || (g[e] >= 'a' && g[e] <= 'z') || (g[e] >= 'A' && g[e] <= 'Z') ||
                         (g[e] >= '0' && g[e] <= '9')))
            e++;
        if (e == i) {
            out[w++] = g[i++];
            continue;
        }
        int is_rule = 0;
        for (size_t r = 0; r < k && !is_rule; r++)
            is_rule = lens[r] == e - i && !memcmp(names[r], g + i, e - i);
        if (is_rule && e - i == 4 && !memcmp(g + i, "root", 4)) {
            memcpy(out + w, prefix, pl);
            w += pl;
        } else if (is_rule) {
            memcpy(out + w, prefix, pl);
            out[w + pl] = '-';
            w += pl + 1;
            memcpy(out + w, g + i, e - i);
            w += e - i;
        } else {
            memcpy(out + w, g + i, e - i);
            w += e - i;
        }
        i = e;
    }
    if (out)
        out[w] = '\0';
    free(names);
    free(lens);
    return out;
}

/* Appends printf-formatted text to *g (NULL on failure, *g freed). */
static void add(char **g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(char **g, const char *fmt, ...)
{
    if (!*g)
        return;
    va_list ap, aq;
    va_start(ap, fmt);
    va_copy(aq, ap);
    int more = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    size_t have = strlen(*g);
    char *m = more >= 0 ? realloc(*g, have + (size_t)more + 1) : NULL;
    if (m)
        vsnprintf(m + have, (size_t)more + 1, fmt, aq);
    else
        free(*g);
    va_end(aq);
    *g = m;
}

/* A GBNF literal of s (quotes and backslashes escaped). */
static void add_literal(char **g, const char *s)
{
    add(g, "\"");
    for (; *g && *s; s++)
        if (*s == '"' || *s == '\\')
            add(g, "\\%c", *s);
        else if (*s == '\n')
            add(g, "\\n");
        else
            add(g, "%c", *s);
    add(g, "\"");
}

/* How a format that writes arguments as text writes a call (literals):
 * call_open NAME after_name, then arg_open KEY arg_mid VALUE arg_close for
 * each argument, then call_close. */
typedef struct {
    const char *call_open, *after_name, *arg_open, *arg_mid, *arg_close, *call_close;
} text_style;

static const text_style QWEN_XML = {"<tool_call>\n<function=", ">\n", "<parameter=", ">\n", "\n</parameter>\n",
                                    "</function>\n</tool_call>"};
static const text_style SEED_XML = {"<seed:tool_call>\n<function=", ">\n", "<parameter=", ">\n",
                                    "\n</parameter>\n", "</function>\n</seed:tool_call>"};
static const text_style GLM_ARGS = {"<tool_call>", "\n", "<arg_key>", "</arg_key>\n<arg_value>", "</arg_value>\n",
                                    "</tool_call>"};

/* The rules of function i's call: NAME and its parameters (rule xml-fI),
 * each written as the style writes one. */
static hx_status xml_function(char **g, size_t i, json_t *fn, const text_style *st)
{
    json_t *params = json_object_get(fn, "parameters"), *props = json_object_get(params, "properties");
    json_t *req = json_object_get(params, "required");
    add(g, "xml-f%zu ::= ", i);
    add_literal(g, json_string_value(json_object_get(fn, "name")));
    add(g, " ");
    add_literal(g, st->after_name);
    const char *key;
    json_t *p;
    size_t j = 0;
    json_object_foreach(props, key, p) {
        int required = 0;
        for (size_t r = 0; r < json_array_size(req); r++) {
            const char *name = json_string_value(json_array_get(req, r));
            required |= name && !strcmp(name, key);
        }
        add(g, " xml-f%zu-p%zu%s", i, j++, required ? "" : "?");
    }
    add(g, "\n");
    j = 0;
    json_object_foreach(props, key, p) {
        add(g, "xml-f%zu-p%zu ::= ", i, j);
        add_literal(g, st->arg_open);
        add(g, " ");
        add_literal(g, key);
        add(g, " ");
        add_literal(g, st->arg_mid);
        add(g, " xml-f%zu-v%zu ", i, j);
        add_literal(g, st->arg_close);
        add(g, "\n");
        const char *type = json_string_value(json_object_get(p, "type"));
        json_t *en = json_object_get(p, "enum");
        int text_enum = json_array_size(en) > 0;
        for (size_t e = 0; e < json_array_size(en); e++)
            text_enum &= json_is_string(json_array_get(en, e));
        if (text_enum) { /* a choice of words, written as they are */
            add(g, "xml-f%zu-v%zu ::=", i, j);
            for (size_t e = 0; e < json_array_size(en); e++) {
                add(g, e ? " | " : " ");
                add_literal(g, json_string_value(json_array_get(en, e)));
            }
            add(g, "\n");
        } else if (type && !strcmp(type, "string")) {
            static const char *const unenforced[] = {"pattern", "format", "const"};
            for (size_t u = 0; u < sizeof unenforced / sizeof unenforced[0]; u++)
                if (json_object_get(p, unenforced[u]))
                    return hx_error(HX_ERR_INVALID_ARG, "a tool's parameters cannot be enforced: '%s' of parameter "
                                    "'%s' (a text value in this tool-call format)", unenforced[u], key);
            json_t *lo = json_object_get(p, "minLength"), *hi = json_object_get(p, "maxLength");
            if ((lo && (!json_is_integer(lo) || json_integer_value(lo) < 0)) ||
                (hi && (!json_is_integer(hi) || json_integer_value(hi) < json_integer_value(lo))))
                return hx_error(HX_ERR_INVALID_ARG, "parameter '%s': minLength and maxLength must be counts, "
                                "the first no larger", key);
            if (lo || hi) { /* counted characters: a bounded text holds no '<' */
                add(g, "xml-f%zu-v%zu ::= [^<]{%lld,", i, j, lo ? (long long)json_integer_value(lo) : 0LL);
                if (hi)
                    add(g, "%lld", (long long)json_integer_value(hi));
                add(g, "}\n");
            } else {
                add(g, "xml-f%zu-v%zu ::= xml-text\n", i, j);
            }
        } else { /* its JSON value, as the converter writes the schema */
            char *sg = NULL, name[64];
            hx_status st = schema_grammar(p, &sg);
            if (st)
                return st == HX_ERR_INVALID_ARG ? hx_error_context(st, "a tool's parameters cannot be enforced: ") : st;
            snprintf(name, sizeof name, "xml-f%zu-v%zu", i, j);
            char *r = prefixed(sg, name);
            free(sg);
            if (!r)
                return hx_error(HX_ERR_NO_MEMORY, "tool-call grammar: out of memory");
            add(g, "%s\n", r);
            free(r);
        }
        j++;
    }
    return *g ? HX_OK : hx_error(HX_ERR_NO_MEMORY, "tool-call grammar: out of memory");
}

/* An xml format's grammar: its wrapper around <function=NAME> and the
 * function's parameters, one call or (parallel) several. */
static hx_status xml_grammar(hx_tool_format f, json_t *tools, const char *only, int parallel, char **result)
{
    const text_style *style = f == HX_TOOL_FORMAT_SEED  ? &SEED_XML
                              : f == HX_TOOL_FORMAT_GLM ? &GLM_ARGS
                                                        : &QWEN_XML;
    char *g = strdup("");
    add(&g, "root ::= xml-call%s\n", parallel ? " (\"\\n\" xml-call)*" : "");
    add(&g, "xml-call ::= ");
    add_literal(&g, style->call_open);
    add(&g, " (");
    size_t n = 0;
    for (size_t i = 0; i < json_array_size(tools); i++) {
        json_t *fn = json_object_get(json_array_get(tools, i), "function");
        if (!only || !strcmp(only, json_string_value(json_object_get(fn, "name"))))
            add(&g, "%sxml-f%zu", n++ ? " | " : " ", i);
    }
    add(&g, " ) ");
    add_literal(&g, style->call_close);
    add(&g, "\n");
    /* a text value: anything that does not close a tag */
    add(&g, "xml-text ::= ([^<] | \"<\" [^/])*\n");
    hx_status st = n ? HX_OK : hx_error(HX_ERR_INVALID_ARG, "no tool is named '%s'", only ? only : "");
    for (size_t i = 0; !st && i < json_array_size(tools); i++) {
        json_t *fn = json_object_get(json_array_get(tools, i), "function");
        if (!only || !strcmp(only, json_string_value(json_object_get(fn, "name"))))
            st = xml_function(&g, i, fn, style);
    }
    if (!st && !g)
        st = hx_error(HX_ERR_NO_MEMORY, "tool-call grammar: out of memory");
    if (st) {
        free(g);
        return st;
    }
    *result = g;
    return HX_OK;
}

static hx_status build(hx_tool_format f, const char *tools_json, const char *only, int parallel, char **result);

hx_status hx_tool_calls_grammar(hx_tool_format f, const char *tools_json, const char *only, int parallel, char *buf,
                                size_t cap, size_t *len)
{
    hx_api_enter();
    if (!tools_json || !len || (cap && !buf) || (unsigned)f > HX_TOOL_FORMAT_GLM)
        return hx_api_leave(
            hx_error(HX_ERR_INVALID_ARG, "hx_tool_calls_grammar: tools, len, a buffer for cap and a format"));
    char *out = NULL;
    hx_status st = build(f, tools_json, only, parallel, &out);
    if (!st) {
        /* The result must be a grammar the parser takes. */
        hx_grammar *g = NULL;
        st = hx_grammar_parse(out, strlen(out), &g);
        hx_grammar_free(g);
    }
    if (!st) {
        *len = strlen(out);
        if (cap <= *len)
            st = hx_error(HX_ERR_RANGE, "hx_tool_calls_grammar: the grammar takes %zu bytes and a NUL; the buffer "
                          "has %zu", *len, cap);
        else
            memcpy(buf, out, *len + 1);
    }
    free(out);
    return hx_api_leave(st);
}

static hx_status build(hx_tool_format f, const char *tools_json, const char *only, int parallel, char **result)
{
    json_error_t je;
    json_t *tools = json_loads(tools_json, 0, &je);
    if (!json_is_array(tools) || !json_array_size(tools)) {
        json_decref(tools);
        return hx_error(HX_ERR_INVALID_ARG, "tools: a non-empty JSON array of tool definitions");
    }
    json_t *alts = json_array();
    hx_status st = HX_OK;
    for (size_t i = 0; i < json_array_size(tools) && !st; i++) {
        json_t *t = json_array_get(tools, i), *fn = json_object_get(t, "function");
        json_t *name = json_object_get(fn, "name");
        if (!json_is_string(name)) {
            st = hx_error(HX_ERR_INVALID_ARG, "tools[%zu]: no function.name", i);
            break;
        }
        if (!only || !strcmp(only, json_string_value(name)))
            json_array_append_new(alts, call_schema(f, fn));
    }
    if (!st && (f == HX_TOOL_FORMAT_XML || f == HX_TOOL_FORMAT_SEED || f == HX_TOOL_FORMAT_GLM)) {
        st = xml_grammar(f, tools, only, parallel, result);
        json_decref(alts);
        json_decref(tools);
        return st;
    }
    if (!st && !json_array_size(alts))
        st = hx_error(HX_ERR_INVALID_ARG, "no tool is named '%s'", only ? only : "");
    json_t *one = st ? NULL : json_array_size(alts) == 1 ? json_incref(json_array_get(alts, 0))
                                                         : json_pack("{s:O}", "anyOf", alts);
    json_t *schema = NULL;
    if (one && f == HX_TOOL_FORMAT_MISTRAL)
        schema = parallel ? json_pack("{s:s,s:O,s:i}", "type", "array", "items", one, "minItems", 1)
                          : json_pack("{s:s,s:O,s:i,s:i}", "type", "array", "items", one, "minItems", 1, "maxItems", 1);
    else if (one && f == HX_TOOL_FORMAT_GENERIC)
        schema = parallel ? json_pack("{s:s,s:{s:{s:s,s:O,s:i}},s:[s],s:b}", "type", "object", "properties",
                                      "tool_calls", "type", "array", "items", one, "minItems", 1, "required",
                                      "tool_calls", "additionalProperties", 0)
                          : json_pack("{s:s,s:{s:O},s:[s],s:b}", "type", "object", "properties", "tool_call", one,
                                      "required", "tool_call", "additionalProperties", 0);
    else if (one)
        schema = json_incref(one);
    json_decref(one);
    char *g = NULL, *out = NULL;
    if (!st && !schema)
        st = hx_error(HX_ERR_NO_MEMORY, "tool-call grammar: out of memory");
    if (!st && (st = schema_grammar(schema, &g)) == HX_ERR_INVALID_ARG)
        hx_error_context(st, "a tool's parameters cannot be enforced: ");
    json_decref(schema);
    json_decref(alts);
    json_decref(tools);
    if (st)
        return st;
    if (f == HX_TOOL_FORMAT_HERMES || f == HX_TOOL_FORMAT_MISTRAL) {
        /* Hermes: <tool_call>\n{...}\n</tool_call>, once or (parallel)
         * several times; Mistral: [TOOL_CALLS] and the array. */
        char *calls = prefixed(g, "tool-call-json");
        static const char hermes[] =
            "root ::= tool-call-block%s\n"
            "tool-call-block ::= \"<tool_call>\" \"\\n\"? tool-call-json \"\\n\"? \"</tool_call>\"\n";
        static const char mistral[] = "root ::= \"[TOOL_CALLS]\" tool-call-json\n";
        size_t need = calls ? sizeof hermes + strlen(calls) + 64 : 0;
        if (calls && (out = malloc(need))) {
            int w = f == HX_TOOL_FORMAT_HERMES
                        ? snprintf(out, need, hermes, parallel ? " (\"\\n\" tool-call-block)*" : "")
                        : snprintf(out, need, "%s", mistral);
            memcpy(out + w, calls, strlen(calls) + 1);
        }
        free(calls);
        free(g);
        if (!out)
            return hx_error(HX_ERR_NO_MEMORY, "tool-call grammar: out of memory");
    } else {
        out = g;
    }
    *result = out;
    return HX_OK;
}
