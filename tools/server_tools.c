/* hetero-server's function calling, as llama-server's Jinja path does it:
 * the request's `tools`, `tool_choice` and `parallel_tool_calls` and the
 * messages' tool fields checked (a malformed one is a 400 naming it, a
 * field hetero does not know is refused, never ignored); the tools and the
 * messages handed to the model's own template, assistant tool-call
 * arguments as the objects templates expect; `tool_choice` "required" or
 * a named function forcing a call with a grammar; and the answer read back
 * (hx_tool_calls_parse) into OpenAI's tool_calls, whole or as streamed
 * deltas (index, id and name first, then argument fragments), the call
 * text never sent as content. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "tools/server.h"

/* What one choice has streamed of its calls so far. */
typedef struct {
    size_t content_sent;        /* bytes of content */
    size_t n_calls;             /* calls whose id and name went */
    size_t args_sent[SRV_MAX_TOOL_CALLS];
    char id[SRV_MAX_TOOL_CALLS][40];
} stream_state;

struct srv_tools {
    hx_tool_format format;
    const char *tmpl;           /* the template to render with (the file's tool_use one when it has it) */
    char *tools_json;           /* what the template's `tools` is */
    char *grammar;              /* the forcing grammar (tool_choice required or a function), or NULL */
    int parallel;
    stream_state st[SRV_MAX_N];
};

typedef struct {
    char *msg;
    size_t cap;
    const char **code;
} err;

static int fail(err *e, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(err *e, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, e->cap, fmt, ap);
    va_end(ap);
    *e->code = code;
    return -1;
}

/* Keys of `o` outside `known` (a NULL-terminated list): the first one's
 * name, or NULL.  A key whose value is null counts as absent when
 * null_ok names it (fields OpenAI's clients send back as null). */
static const char *unknown_key(json_t *o, const char *const *known, const char *const *null_ok)
{
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        int ok = 0;
        for (size_t i = 0; known[i] && !ok; i++)
            ok = !strcmp(k, known[i]);
        for (size_t i = 0; null_ok && null_ok[i] && !ok; i++)
            ok = !strcmp(k, null_ok[i]) && json_is_null(v);
        if (!ok)
            return k;
    }
    return NULL;
}

/* A function name as OpenAI takes it: letters, digits, '_' and '-', 1 to 64. */
static int good_name(const char *s)
{
    size_t n = strlen(s);
    if (!n || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '_' || s[i] == '-' || s[i] == '.'))
            return 0;
    return 1;
}

static int check_tools(json_t *tools, err *e)
{
    static const char *const tool_keys[] = {"type", "function", NULL};
    static const char *const fn_keys[] = {"name", "description", "parameters", "strict", NULL};
    if (!json_is_array(tools))
        return fail(e, "invalid_type", "'tools' must be an array of {\"type\": \"function\", \"function\": {...}}");
    if (json_array_size(tools) > SRV_MAX_TOOLS)
        return fail(e, "invalid_value", "'tools' has %zu tools; at most %d", json_array_size(tools), SRV_MAX_TOOLS);
    for (size_t i = 0; i < json_array_size(tools); i++) {
        json_t *t = json_array_get(tools, i), *type = json_object_get(t, "type"), *fn = json_object_get(t, "function");
        const char *k;
        if (!json_is_object(t))
            return fail(e, "invalid_type", "tools[%zu] must be an object", i);
        if ((k = unknown_key(t, tool_keys, NULL)))
            return fail(e, "invalid_value", "tools[%zu].%s is not a field of a tool", i, k);
        if (!json_is_string(type) || strcmp(json_string_value(type), "function"))
            return fail(e, "invalid_value", "tools[%zu].type must be \"function\" (the one kind of tool)", i);
        if (!json_is_object(fn))
            return fail(e, "invalid_type", "tools[%zu].function must be an object", i);
        if ((k = unknown_key(fn, fn_keys, NULL)))
            return fail(e, "invalid_value", "tools[%zu].function.%s is not a field of a function", i, k);
        json_t *name = json_object_get(fn, "name"), *d = json_object_get(fn, "description");
        json_t *params = json_object_get(fn, "parameters"), *strict = json_object_get(fn, "strict");
        if (!json_is_string(name) || !good_name(json_string_value(name)))
            return fail(e, "invalid_value", "tools[%zu].function.name must be 1 to 64 letters, digits, '_', '-' or '.'",
                        i);
        for (size_t j = 0; j < i; j++)
            if (json_equal(name, json_object_get(json_object_get(json_array_get(tools, j), "function"), "name")))
                return fail(e, "invalid_value", "tools[%zu].function.name '%s' is also tools[%zu]'s", i,
                            json_string_value(name), j);
        if (d && !json_is_null(d) && !json_is_string(d))
            return fail(e, "invalid_type", "tools[%zu].function.description must be a string", i);
        if (params && !json_is_null(params) && !json_is_object(params))
            return fail(e, "invalid_type", "tools[%zu].function.parameters must be a JSON Schema object", i);
        if (strict && !json_is_null(strict) && !json_is_boolean(strict))
            return fail(e, "invalid_type", "tools[%zu].function.strict must be a boolean", i);
    }
    return 0;
}

/* One assistant tool call of the history, {id, type, function: {name,
 * arguments (a JSON string)}}, as the template reads it: arguments
 * parsed into their object (as llama.cpp does; templates apply tojson to
 * them).  NULL after fail(). */
static json_t *history_call(json_t *tc, size_t i, size_t k, err *e)
{
    static const char *const keys[] = {"id", "type", "function", NULL};
    static const char *const fn_keys[] = {"name", "arguments", NULL};
    const char *u;
    json_t *id = json_object_get(tc, "id"), *type = json_object_get(tc, "type"), *fn = json_object_get(tc, "function");
    if (!json_is_object(tc)) {
        fail(e, "invalid_type", "messages[%zu].tool_calls[%zu] must be an object", i, k);
        return NULL;
    }
    if ((u = unknown_key(tc, keys, NULL))) {
        fail(e, "invalid_value", "messages[%zu].tool_calls[%zu].%s is not a field of a tool call", i, k, u);
        return NULL;
    }
    if (id && !json_is_null(id) && !json_is_string(id)) {
        fail(e, "invalid_type", "messages[%zu].tool_calls[%zu].id must be a string", i, k);
        return NULL;
    }
    if (type && !json_is_null(type) && (!json_is_string(type) || strcmp(json_string_value(type), "function"))) {
        fail(e, "invalid_value", "messages[%zu].tool_calls[%zu].type must be \"function\"", i, k);
        return NULL;
    }
    if (!json_is_object(fn)) {
        fail(e, "invalid_type", "messages[%zu].tool_calls[%zu].function must be an object", i, k);
        return NULL;
    }
    if ((u = unknown_key(fn, fn_keys, NULL))) {
        fail(e, "invalid_value", "messages[%zu].tool_calls[%zu].function.%s is not a field of a function call", i, k,
             u);
        return NULL;
    }
    json_t *name = json_object_get(fn, "name"), *args = json_object_get(fn, "arguments");
    if (!json_is_string(name) || !json_string_length(name)) {
        fail(e, "invalid_value", "messages[%zu].tool_calls[%zu].function.name must be a non-empty string", i, k);
        return NULL;
    }
    json_t *obj;
    if (json_is_string(args)) {
        json_error_t je;
        obj = json_loadb(json_string_value(args), json_string_length(args), 0, &je);
        if (!json_is_object(obj)) {
            json_decref(obj);
            fail(e, "invalid_value", "messages[%zu].tool_calls[%zu].function.arguments must be a JSON object in a "
                 "string", i, k);
            return NULL;
        }
    } else if (json_is_object(args)) {
        obj = json_incref(args);
    } else {
        fail(e, "invalid_type", "messages[%zu].tool_calls[%zu].function.arguments must be a string (JSON)", i, k);
        return NULL;
    }
    json_t *out = json_pack("{s:s,s:{s:O,s:o}}", "type", "function", "function", "name", name, "arguments", obj);
    if (out && json_is_string(id))
        json_object_set(out, "id", id);
    return out;
}

/* The generic format's instructions, for a template that has no place
 * for tools: the tools and the JSON the answer is read as, in the system
 * message (llama.cpp's polyfill does the same). */
static char *generic_instructions(json_t *tools, int parallel)
{
    size_t cap = 512, n = 0;
    char *s = malloc(cap);
    if (!s)
        return NULL;
    n = (size_t)snprintf(s, cap, "You can call these tools (each one's parameters are a JSON Schema):\n");
    for (size_t i = 0; i < json_array_size(tools); i++) {
        char *t = json_dumps(json_object_get(json_array_get(tools, i), "function"), JSON_COMPACT);
        size_t tl = t ? strlen(t) : 0;
        if (n + tl + 2 > cap) {
            char *g = realloc(s, cap = 2 * (n + tl + 2));
            if (!g) {
                free(t);
                free(s);
                return NULL;
            }
            s = g;
        }
        if (t) {
            memcpy(s + n, t, tl);
            n += tl;
        }
        s[n++] = '\n';
        s[n] = '\0';
        free(t);
    }
    const char *how = parallel ? "\nTo call tools, answer with only the JSON object {\"tool_calls\": [{\"name\": "
                                 "<function name>, \"arguments\": <arguments object>}, ...]}; to answer the user, "
                                 "answer with {\"response\": <your answer>}."
                               : "\nTo call a tool, answer with only the JSON object {\"tool_call\": {\"name\": "
                                 "<function name>, \"arguments\": <arguments object>}}; to answer the user, answer "
                                 "with {\"response\": <your answer>}.";
    size_t hl = strlen(how);
    char *g = realloc(s, n + hl + 1);
    if (!g) {
        free(s);
        return NULL;
    }
    memcpy(g + n, how, hl + 1);
    return g;
}

/* The messages as the template reads them: tool calls checked and their
 * arguments parsed; for a template that knows nothing of tools, calls
 * written into the content as the generic format has them. */
static json_t *render_messages(json_t *msgs, int knows_calls, err *e)
{
    static const char *const keys[] = {"role", "content", "name", "tool_calls", "tool_call_id", "reasoning_content",
                                       NULL};
    static const char *const null_ok[] = {"refusal", "function_call", "audio", "annotations", NULL};
    json_t *out = json_array();
    for (size_t i = 0; out && i < json_array_size(msgs); i++) {
        json_t *m = json_array_get(msgs, i);
        const char *role = json_string_value(json_object_get(m, "role")), *u;
        if ((u = unknown_key(m, keys, null_ok))) {
            fail(e, "invalid_value", "messages[%zu].%s is not a field of a message", i, u);
            json_decref(out);
            return NULL;
        }
        json_t *name = json_object_get(m, "name"), *tcid = json_object_get(m, "tool_call_id");
        json_t *calls = json_object_get(m, "tool_calls"), *rc = json_object_get(m, "reasoning_content");
        int bad = 0;
        if (name && !json_is_null(name) && !json_is_string(name))
            bad = fail(e, "invalid_type", "messages[%zu].name must be a string", i);
        else if (rc && !json_is_null(rc) && !json_is_string(rc))
            bad = fail(e, "invalid_type", "messages[%zu].reasoning_content must be a string", i);
        else if (!strcmp(role, "tool") && !json_is_string(tcid))
            bad = fail(e, tcid ? "invalid_type" : "missing_parameter",
                       "messages[%zu].tool_call_id must be a string: the id of the call this is the result of", i);
        else if (strcmp(role, "tool") && tcid && !json_is_null(tcid))
            bad = fail(e, "invalid_value", "messages[%zu].tool_call_id belongs to role 'tool' only", i);
        else if (strcmp(role, "assistant") && calls && !json_is_null(calls))
            bad = fail(e, "invalid_value", "messages[%zu].tool_calls belongs to role 'assistant' only", i);
        else if (calls && !json_is_null(calls) && !json_is_array(calls))
            bad = fail(e, "invalid_type", "messages[%zu].tool_calls must be an array", i);
        else if (!json_object_get(m, "content") && !json_array_size(calls) &&
                 !(!strcmp(role, "assistant") && json_string_length(rc))) /* a thought alone: continued */
            bad = fail(e, "missing_parameter", "messages[%zu].content is missing", i);
        if (bad) {
            json_decref(out);
            return NULL;
        }
        json_t *copy = json_copy(m);
        json_object_del(copy, "refusal");
        json_object_del(copy, "function_call");
        json_object_del(copy, "audio");
        json_object_del(copy, "annotations");
        if (json_array_size(calls)) {
            json_t *list = json_array();
            for (size_t k = 0; k < json_array_size(calls); k++) {
                json_t *c = history_call(json_array_get(calls, k), i, k, e);
                if (!c) {
                    json_decref(list);
                    json_decref(copy);
                    json_decref(out);
                    return NULL;
                }
                json_array_append_new(list, c);
            }
            /* Templates that write calls often test the content with
             * `+` or `is none`: null is "" there, as llama.cpp makes it. */
            json_t *content = json_object_get(copy, "content");
            if (!content || json_is_null(content))
                json_object_set_new(copy, "content", json_string(""));
            if (knows_calls) {
                json_object_set_new(copy, "tool_calls", list);
            } else {
                json_t *g = json_object(), *flat = json_array();
                for (size_t k = 0; k < json_array_size(list); k++) {
                    json_t *fn = json_object_get(json_array_get(list, k), "function");
                    json_array_append(flat, fn);
                }
                json_object_set_new(g, "tool_calls", flat);
                char *text = json_dumps(g, JSON_COMPACT);
                json_object_set_new(copy, "content", json_string(text ? text : ""));
                json_object_del(copy, "tool_calls");
                free(text);
                json_decref(g);
                json_decref(list);
            }
        } else if (calls) {
            json_object_del(copy, "tool_calls");
        }
        json_array_append_new(out, copy);
    }
    return out;
}

int srv_tools_request(srv *S, json_t *body, srv_tools **out, char **messages_json, char *msg, size_t cap,
                      const char **code)
{
    err e = {msg, cap, code};
    *out = NULL;
    *messages_json = NULL;
    json_t *tools = json_object_get(body, "tools"), *choice = json_object_get(body, "tool_choice");
    json_t *par = json_object_get(body, "parallel_tool_calls"), *msgs = json_object_get(body, "messages");
    if (tools && json_is_null(tools))
        tools = NULL;
    if (tools && check_tools(tools, &e))
        return -1;
    if (tools && !json_array_size(tools))
        tools = NULL; /* an empty list offers nothing, as llama-server reads it */
    if (par && !json_is_null(par) && !json_is_boolean(par))
        return fail(&e, "invalid_type", "'parallel_tool_calls' must be a boolean");
    /* tool_choice: "none", "auto", "required" or {"type": "function", "function": {"name": N}}. */
    const char *mode = "auto", *forced = NULL;
    if (choice && !json_is_null(choice)) {
        static const char *const keys[] = {"type", "function", NULL};
        const char *u;
        json_t *fn = json_object_get(choice, "function"), *name = json_object_get(fn, "name");
        if (json_is_string(choice)) {
            mode = json_string_value(choice);
            if (strcmp(mode, "none") && strcmp(mode, "auto") && strcmp(mode, "required"))
                return fail(&e, "invalid_value", "'tool_choice' is '%s': none, auto, required or {\"type\": "
                            "\"function\", \"function\": {\"name\": ...}}", mode);
        } else if (!json_is_object(choice)) {
            return fail(&e, "invalid_type", "'tool_choice' must be a string or an object");
        } else if ((u = unknown_key(choice, keys, NULL))) {
            return fail(&e, "invalid_value", "tool_choice.%s is not a field of a tool choice", u);
        } else if (!json_is_string(json_object_get(choice, "type")) ||
                   strcmp(json_string_value(json_object_get(choice, "type")), "function")) {
            return fail(&e, "invalid_value", "tool_choice.type must be \"function\"");
        } else if (!json_is_object(fn) || json_object_size(fn) != 1 || !json_is_string(name)) {
            return fail(&e, "invalid_value", "tool_choice.function must be {\"name\": <a function of 'tools'>}");
        } else {
            mode = "required";
            forced = json_string_value(name);
            int found = 0;
            for (size_t i = 0; tools && i < json_array_size(tools) && !found; i++)
                found = json_equal(name, json_object_get(json_object_get(json_array_get(tools, i), "function"),
                                                         "name"));
            if (!found)
                return fail(&e, "invalid_value", "tool_choice names '%s', which is not a function of 'tools'", forced);
        }
    }
    if (!tools && !strcmp(mode, "required"))
        return fail(&e, "invalid_value", "'tool_choice' '%s' needs 'tools'", "required");
    int has_calls = 0;
    for (size_t i = 0; i < json_array_size(msgs); i++)
        has_calls |= json_array_size(json_object_get(json_array_get(msgs, i), "tool_calls")) > 0 ||
                     !strcmp(json_string_value(json_object_get(json_array_get(msgs, i), "role")), "tool");
    if (!S->jinja) {
        if (tools || has_calls)
            return fail(&e, "unsupported_parameter", "tools and tool calls need the Jinja chat template (the server "
                        "runs with --no-jinja)");
        return 0;
    }
    /* The template: the file's tool_use one when there are tools and the
     * server was not given one (llama.cpp's choice), else the default. */
    const char *tmpl = NULL, *src = S->chat_template;
    if (tools && S->template_is_models && hx_model_chat_template_named(S->m, "tool_use"))
        src = tmpl = hx_model_chat_template_named(S->m, "tool_use");
    const int knows_tools = src && strstr(src, "tools"), knows_calls = src && strstr(src, "tool_calls");
    const int offered = tools && strcmp(mode, "none");
    const int parallel = json_is_true(par);
    json_t *rendered = render_messages(msgs, knows_calls, &e);
    if (!rendered)
        return -1;
    srv_tools *t = NULL;
    if (offered) {
        if (!(t = calloc(1, sizeof *t))) {
            json_decref(rendered);
            return fail(&e, "server_error", "out of memory");
        }
        t->format = hx_tool_format_detect(src);
        t->tmpl = tmpl;
        t->parallel = parallel;
        if (!knows_tools) {
            /* No place for tools in the template: they go in the system message. */
            char *ins = generic_instructions(tools, parallel);
            json_t *first = json_array_get(rendered, 0);
            const char *r0 = json_string_value(json_object_get(first, "role"));
            json_t *c0 = json_object_get(first, "content");
            if (ins && r0 && (!strcmp(r0, "system") || !strcmp(r0, "developer")) && json_is_string(c0)) {
                size_t need = json_string_length(c0) + strlen(ins) + 3;
                char *both = malloc(need);
                if (both) {
                    snprintf(both, need, "%s\n\n%s", json_string_value(c0), ins);
                    json_object_set_new(first, "content", json_string(both));
                }
                free(both);
            } else if (ins) {
                json_array_insert_new(rendered, 0, json_pack("{s:s,s:s}", "role", "system", "content", ins));
            }
            free(ins);
        } else {
            t->tools_json = json_dumps(tools, JSON_COMPACT);
        }
        if (!strcmp(mode, "required")) {
            char *tj = json_dumps(tools, JSON_COMPACT);
            size_t len = 0;
            hx_status st = tj ? hx_tool_calls_grammar(t->format, tj, forced, parallel, NULL, 0, &len) : HX_ERR_NO_MEMORY;
            if (st == HX_ERR_RANGE)
                st = (t->grammar = malloc(len + 1)) ? hx_tool_calls_grammar(t->format, tj, forced, parallel, t->grammar,
                                                                            len + 1, &len)
                                                    : HX_ERR_NO_MEMORY;
            free(tj);
            if (st) {
                srv_tools_free(t);
                json_decref(rendered);
                return st == HX_ERR_INVALID_ARG
                           ? fail(&e, "invalid_value", "'tool_choice' %s needs a grammar of the tools: %s",
                                  forced ? "names a function and" : "is 'required' and", hx_last_error())
                           : fail(&e, "server_error", "tool-call grammar: %s", hx_last_error());
            }
        }
    }
    *messages_json = json_dumps(rendered, JSON_COMPACT);
    json_decref(rendered);
    if (!*messages_json) {
        srv_tools_free(t);
        return fail(&e, "server_error", "out of memory");
    }
    *out = t;
    return 0;
}

const char *srv_tools_json(const srv_tools *t) { return t ? t->tools_json : NULL; }
const char *srv_tools_grammar(const srv_tools *t) { return t ? t->grammar : NULL; }
const char *srv_tools_template(const srv_tools *t) { return t ? t->tmpl : NULL; }

void srv_tools_free(srv_tools *t)
{
    if (!t)
        return;
    free(t->tools_json);
    free(t->grammar);
    free(t);
}

/* A call id as OpenAI writes them: "call_" and 24 letters and digits. */
static void new_id(char *out, size_t cap)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char r[24];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
        static unsigned long long serial;
        unsigned long long x = __atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED) * 0x9E3779B97F4A7C15ull ^
                               (unsigned long long)(srv_now() * 1e9);
        for (size_t i = 0; i < sizeof r; i++, x = x * 6364136223846793005ull + 1442695040888963407ull)
            r[i] = (unsigned char)(x >> 56);
    }
    size_t n = snprintf(out, cap, "call_");
    for (size_t i = 0; i < sizeof r && n + 1 < cap; i++)
        out[n++] = abc[r[i] % (sizeof abc - 1)];
    out[n] = '\0';
}

/* The choice's answer so far read for calls (a JSON object, see hx_tool_calls_parse). */
static json_t *read_calls(const srv_job *j, const srv_choice *ch, int partial)
{
    hx_reasoning_span sp;
    srv_thought_split(j, ch, partial, &sp);
    const srv_tools *t = j->tools;
    const char *text = ch->text ? ch->text + sp.content_at : "";
    size_t len = 0, n = ch->text ? ch->text_len - sp.content_at : 0; /* a character cut short: the parser's */
    hx_status st = hx_tool_calls_parse_tools(t->format, t->tools_json, text, n, partial, NULL, 0, &len);
    char *buf = st == HX_ERR_RANGE ? malloc(len + 1) : NULL;
    json_t *v = NULL;
    if (buf && hx_tool_calls_parse_tools(t->format, t->tools_json, text, n, partial, buf, len + 1, &len) == HX_OK)
        v = json_loads(buf, 0, NULL);
    free(buf);
    return v;
}

json_t *srv_tools_message(srv_job *j, srv_choice *ch, int final)
{
    srv_tools *t = j->tools;
    json_t *parsed = read_calls(j, ch, j->stream && !final);
    if (!parsed)
        return NULL;
    json_t *content = json_object_get(parsed, "content"), *calls = json_object_get(parsed, "tool_calls");
    size_t n_calls = json_array_size(calls) < SRV_MAX_TOOL_CALLS ? json_array_size(calls) : SRV_MAX_TOOL_CALLS;
    json_t *m;
    if (!j->stream) {
        m = json_pack("{s:s,s:O}", "role", "assistant", "content", content);
        if (n_calls) {
            json_t *list = json_array();
            for (size_t i = 0; i < n_calls; i++) {
                json_t *c = json_array_get(calls, i), *id = json_object_get(c, "id");
                char fresh[40];
                new_id(fresh, sizeof fresh);
                json_array_append_new(list, json_pack("{s:s,s:s,s:{s:O,s:O}}", "id",
                                                      json_is_string(id) ? json_string_value(id) : fresh, "type",
                                                      "function", "function", "name", json_object_get(c, "name"),
                                                      "arguments", json_object_get(c, "arguments")));
            }
            json_object_set_new(m, "tool_calls", list);
        }
        json_decref(parsed);
        return m;
    }
    /* Streamed: what is new since the last chunk. */
    stream_state *s = &t->st[ch->index];
    m = json_object();
    const char *c = json_string_value(content);
    size_t cl = c ? strlen(c) : 0;
    if (cl > s->content_sent) {
        json_object_set_new(m, "content", json_stringn(c + s->content_sent, cl - s->content_sent));
        s->content_sent = cl;
    }
    json_t *deltas = json_array();
    for (size_t i = 0; i < n_calls; i++) {
        json_t *call = json_array_get(calls, i), *id = json_object_get(call, "id");
        const char *args = json_string_value(json_object_get(call, "arguments"));
        size_t al = strlen(args);
        if (i >= s->n_calls) {
            if (json_is_string(id))
                snprintf(s->id[i], sizeof s->id[i], "%s", json_string_value(id));
            else
                new_id(s->id[i], sizeof s->id[i]);
            json_array_append_new(deltas, json_pack("{s:I,s:s,s:s,s:{s:O,s:s}}", "index", (json_int_t)i, "id", s->id[i],
                                                    "type", "function", "function", "name",
                                                    json_object_get(call, "name"), "arguments", args));
            s->args_sent[i] = al;
            s->n_calls = i + 1;
        } else if (al > s->args_sent[i]) {
            json_array_append_new(deltas, json_pack("{s:I,s:{s:s%}}", "index", (json_int_t)i, "function", "arguments",
                                                    args + s->args_sent[i], al - s->args_sent[i]));
            s->args_sent[i] = al;
        }
    }
    if (json_array_size(deltas))
        json_object_set_new(m, "tool_calls", deltas);
    else
        json_decref(deltas);
    json_decref(parsed);
    if (!json_object_size(m) && !final && !j->logprobs) {
        json_decref(m);
        return NULL; /* nothing to say yet: the call's text is being written */
    }
    return m;
}

const char *srv_tools_finish(srv_job *j, srv_choice *ch)
{
    if (!j->tools || ch->limited || ch->res.stats.finish == HX_FINISH_LENGTH)
        return NULL;
    if (j->stream)
        return j->tools->st[ch->index].n_calls ? "tool_calls" : NULL;
    json_t *parsed = read_calls(j, ch, 0);
    const char *r = json_array_size(json_object_get(parsed, "tool_calls")) ? "tool_calls" : NULL;
    json_decref(parsed);
    return r;
}
