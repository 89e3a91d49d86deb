/* The GBNF grammar that forces a tool call (hx_tool_calls_grammar in
 * hetero.h): the format's wrapper around one call object per function,
 * {"name": <that name>, "arguments": <its parameters' schema>}, so that
 * the answer parses as a call and its arguments validate.  The call
 * objects go through the JSON Schema converter as one schema (an anyOf of
 * the functions); Hermes' text wrapper is written around its rules. */
#include <jansson.h>
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

/* Renames rule `root` to `to` where it is defined or referred to (outside
 * literals and character classes): the schema's rules become part of a
 * larger grammar. */
static char *rename_root(const char *g, const char *to)
{
    size_t n = strlen(g), tl = strlen(to), cap = n + 1, w = 0;
    for (const char *p = strstr(g, "root"); p; p = strstr(p + 1, "root"))
        cap += tl;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    char quote = 0;
    for (size_t i = 0; i < n;) {
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
        if (c == '#') { /* a comment, to the line's end */
            while (i < n && g[i] != '\n')
                out[w++] = g[i++];
            continue;
        }
        int word_start = i == 0 || !(g[i - 1] == '-' || g[i - 1] == '_' || (g[i - 1] >= 'a' && g[i - 1] <= 'z') ||
                                     (g[i - 1] >= 'A' && g[i - 1] <= 'Z') || (g[i - 1] >= '0' && g[i - 1] <= '9'));
        char e = i + 4 < n ? g[i + 4] : '\0';
        int word_end = !(e == '-' || e == '_' || (e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9'));
        if (word_start && word_end && !strncmp(g + i, "root", 4)) {
            memcpy(out + w, to, tl);
            w += tl;
            i += 4;
            continue;
        }
        out[w++] = g[i++];
    }
    out[w] = '\0';
    return out;
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

static hx_status build(hx_tool_format f, const char *tools_json, const char *only, int parallel, char **result);

hx_status hx_tool_calls_grammar(hx_tool_format f, const char *tools_json, const char *only, int parallel, char *buf,
                                size_t cap, size_t *len)
{
    hx_api_enter();
    if (!tools_json || !len || (cap && !buf) || (unsigned)f > HX_TOOL_FORMAT_MISTRAL)
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
        char *calls = rename_root(g, "tool-call-json");
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
