/* OpenAI's Responses API on the chat path, as llama-server serves it:
 * POST /v1/responses (and /responses), whole and streamed, and
 * /v1/responses/input_tokens (the prompt's tokens).
 *
 * The request becomes a chat completion's body: instructions as the
 * system message, input (a string, or items: input and output messages,
 * function_call and function_call_output, reasoning) as the messages,
 * function tools as the chat's (other tool types are refused: nothing
 * here runs them), tool_choice, max_output_tokens as max_tokens,
 * text.format as response_format.  previous_response_id and
 * conversation are refused (no response is kept to continue from), and
 * background, include, truncation other than "disabled", prompt
 * templates, max_tool_calls and top_logprobs; what changes nothing here
 * (store, metadata, user, service tier, caching and safety hints) is
 * dropped; the rest passes to the chat path.
 *
 * The answer is a response object: output items (a message with its
 * output_text, each function_call), status (completed, or incomplete
 * with max_output_tokens), usage.  Streamed, the events are named as
 * OpenAI's and numbered (sequence_number): response.created,
 * response.in_progress (also for return_progress, with prompt_progress),
 * output_item.added, content_part.added, output_text.delta,
 * function_call_arguments.delta, then each item's .done events and
 * response.completed; timings_per_token puts "timings" on the deltas and
 * the last event, as llama-server does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/server.h"

#define FAIL(...) (snprintf(msg, cap, __VA_ARGS__), -1)
#define FAIL_NULL(...) (snprintf(msg, cap, __VA_ARGS__), (json_t *)NULL)

/* An input message's content (a string, or input_text / output_text
 * parts) as the chat's text parts. */
static int content_parts(json_t *content, size_t i, json_t **out, char *msg, size_t cap)
{
    if (json_is_string(content)) {
        *out = json_incref(content);
        return 0;
    }
    if (!json_is_array(content))
        return FAIL("input[%zu].content must be a string or an array of parts", i);
    *out = json_array();
    size_t k;
    json_t *p;
    json_array_foreach(content, k, p) {
        const char *type = json_string_value(json_object_get(p, "type"));
        json_t *text = json_object_get(p, "text");
        if (type && (!strcmp(type, "input_text") || !strcmp(type, "output_text")) && json_is_string(text)) {
            json_array_append_new(*out, json_pack("{s:s,s:O}", "type", "text", "text", text));
            continue;
        }
        json_decref(*out);
        if (type && (!strcmp(type, "input_image") || !strcmp(type, "input_file") || !strcmp(type, "input_audio")))
            return FAIL("input[%zu].content[%zu]: %s is not supported (this server reads text only)", i, k, type);
        return FAIL("input[%zu].content[%zu] must be input_text or output_text with a string 'text'", i, k);
    }
    return 0;
}

/* The last message if it is the assistant's (an item to merge into). */
static json_t *last_assistant(json_t *msgs)
{
    json_t *m = json_array_get(msgs, json_array_size(msgs) - 1);
    const char *role = json_string_value(json_object_get(m, "role"));
    return role && !strcmp(role, "assistant") ? m : NULL;
}

static int convert_item(json_t *it, size_t i, json_t *msgs, char *msg, size_t cap)
{
    if (!json_is_object(it))
        return FAIL("input[%zu] must be an object", i);
    const char *type = json_string_value(json_object_get(it, "type"));
    const char *role = json_string_value(json_object_get(it, "role"));
    if ((!type || !strcmp(type, "message")) && role) {
        json_t *parts;
        if (strcmp(role, "user") && strcmp(role, "system") && strcmp(role, "developer") && strcmp(role, "assistant"))
            return FAIL("input[%zu].role '%s' is not user, system, developer or assistant", i, role);
        if (content_parts(json_object_get(it, "content"), i, &parts, msg, cap))
            return -1;
        json_array_append_new(msgs, json_pack("{s:s,s:o}", "role", role, "content", parts));
        return 0;
    }
    if (!type)
        return FAIL("input[%zu] has no 'type' (and no 'role')", i);
    if (!strcmp(type, "function_call")) {
        json_t *id = json_object_get(it, "call_id"), *name = json_object_get(it, "name");
        json_t *args = json_object_get(it, "arguments");
        if (!json_is_string(id) || !json_is_string(name) || !json_is_string(args))
            return FAIL("input[%zu]: a function_call needs string 'call_id', 'name' and 'arguments'", i);
        json_t *call = json_pack("{s:O,s:s,s:{s:O,s:O}}", "id", id, "type", "function", "function", "name", name,
                                 "arguments", args);
        json_t *prev = last_assistant(msgs);
        if (!prev)
            json_array_append_new(msgs, prev = json_pack("{s:s,s:s}", "role", "assistant", "content", ""));
        if (!json_object_get(prev, "tool_calls"))
            json_object_set_new(prev, "tool_calls", json_array());
        json_array_append_new(json_object_get(prev, "tool_calls"), call);
        return 0;
    }
    if (!strcmp(type, "function_call_output")) {
        json_t *id = json_object_get(it, "call_id"), *out = json_object_get(it, "output"), *parts;
        if (!json_is_string(id))
            return FAIL("input[%zu]: a function_call_output needs a string 'call_id'", i);
        if (content_parts(out, i, &parts, msg, cap))
            return -1;
        json_array_append_new(msgs, json_pack("{s:s,s:O,s:o}", "role", "tool", "tool_call_id", id, "content", parts));
        return 0;
    }
    if (!strcmp(type, "reasoning")) {
        json_t *text = json_object_get(json_array_get(json_object_get(it, "content"), 0), "text");
        if (!json_is_string(text))
            return FAIL("input[%zu]: a reasoning item needs content[0].text", i);
        json_t *prev = last_assistant(msgs);
        if (!prev)
            json_array_append_new(msgs, prev = json_pack("{s:s,s:s}", "role", "assistant", "content", ""));
        json_object_set(prev, "reasoning_content", text);
        return 0;
    }
    return FAIL("input[%zu]: items of type '%s' are not supported", i, type);
}

/* text.format as the chat's response_format. */
static int text_format(json_t *text, json_t *out, char *msg, size_t cap)
{
    const char *key;
    json_t *v;
    json_object_foreach(text, key, v) if (strcmp(key, "format") && !(!strcmp(key, "verbosity") &&
                                                                      json_is_string(v) &&
                                                                      !strcmp(json_string_value(v), "medium")))
        return FAIL("'text.%s' is not supported", key);
    json_t *f = json_object_get(text, "format");
    const char *type = json_string_value(json_object_get(f, "type"));
    if (!f)
        return 0;
    if (!type)
        return FAIL("'text.format' needs a 'type'");
    if (!strcmp(type, "text"))
        return 0;
    if (!strcmp(type, "json_object")) {
        json_object_set_new(out, "response_format", json_pack("{s:s}", "type", "json_object"));
        return 0;
    }
    if (strcmp(type, "json_schema"))
        return FAIL("'text.format.type' '%s' is not text, json_object or json_schema", type);
    json_t *js = json_object();
    static const char *const keys[] = {"name", "schema", "strict", "description"};
    for (size_t k = 0; k < 4; k++)
        if (json_object_get(f, keys[k]))
            json_object_set(js, keys[k], json_object_get(f, keys[k]));
    json_object_set_new(out, "response_format", json_pack("{s:s,s:o}", "type", "json_schema", "json_schema", js));
    return 0;
}

static json_t *to_chat(json_t *in, int count, char *msg, size_t cap)
{
    (void)count; /* counting takes the same body */
    json_t *input = json_object_get(in, "input"), *prev = json_object_get(in, "previous_response_id");
    if (!input)
        return FAIL_NULL("'input' is required");
    if (prev && !json_is_null(prev))
        return FAIL_NULL("'previous_response_id' is not supported: no response is stored (send the whole input)");
    json_t *out = json_object(), *msgs = json_array(), *ins = json_object_get(in, "instructions");
    int rc = 0;
    if (json_is_string(ins))
        json_array_append_new(msgs, json_pack("{s:s,s:O}", "role", "system", "content", ins));
    else if (ins && !json_is_null(ins))
        rc = FAIL("'instructions' must be a string");
    if (json_is_string(input)) {
        json_array_append_new(msgs, json_pack("{s:s,s:O}", "role", "user", "content", input));
    } else if (json_is_array(input)) {
        size_t i;
        json_t *it;
        json_array_foreach(input, i, it) if (!rc) rc = convert_item(it, i, msgs, msg, cap);
    } else if (!rc) {
        rc = FAIL("'input' must be a string or an array of items");
    }
    json_object_set_new(out, "messages", msgs);
    json_t *tools = json_object_get(in, "tools");
    if (!rc && tools) {
        json_t *fns = json_array();
        size_t k;
        json_t *t;
        if (!json_is_array(tools))
            rc = FAIL("'tools' must be an array");
        json_array_foreach(tools, k, t) {
            const char *type = json_string_value(json_object_get(t, "type"));
            if (rc)
                break;
            if (!type || strcmp(type, "function")) {
                rc = FAIL("tools[%zu]: tools of type '%s' are not supported (function tools only)", k,
                          type ? type : "?");
                break;
            }
            json_t *f = json_deep_copy(t);
            json_object_del(f, "type");
            json_array_append_new(fns, json_pack("{s:s,s:o}", "type", "function", "function", f));
        }
        json_object_set_new(out, "tools", fns);
    }
    json_t *tc = json_object_get(in, "tool_choice");
    if (!rc && json_is_object(tc)) {
        const char *type = json_string_value(json_object_get(tc, "type"));
        json_t *name = json_object_get(tc, "name");
        if (!type || strcmp(type, "function") || !json_is_string(name))
            rc = FAIL("'tool_choice' must be auto, none, required or {\"type\": \"function\", \"name\": ...}");
        else
            json_object_set_new(out, "tool_choice", json_pack("{s:s,s:{s:O}}", "type", "function", "function",
                                                              "name", name));
    } else if (!rc && tc) {
        json_object_set(out, "tool_choice", tc);
    }
    json_t *text = json_object_get(in, "text");
    if (!rc && text)
        rc = json_is_object(text) ? text_format(text, out, msg, cap) : FAIL("'text' must be an object");
    if (!rc && json_object_get(in, "max_output_tokens"))
        json_object_set(out, "max_tokens", json_object_get(in, "max_output_tokens"));
    json_t *reasoning = json_object_get(in, "reasoning");
    if (!rc && json_is_object(reasoning) && json_object_get(reasoning, "effort"))
        json_object_set(out, "reasoning_effort", json_object_get(reasoning, "effort")); /* the chat path's answer */
    json_t *trunc = json_object_get(in, "truncation"), *include = json_object_get(in, "include");
    if (!rc && trunc && !json_is_null(trunc) && strcmp(json_string_value(trunc) ? json_string_value(trunc) : "",
                                                       "disabled"))
        rc = FAIL("'truncation' must be \"disabled\": a prompt longer than the context is refused");
    if (!rc && include && json_array_size(include))
        rc = FAIL("'include' is not supported");
    if (!rc && json_is_true(json_object_get(in, "background")))
        rc = FAIL("'background' is not supported: responses are answered on the request");
    /* Refused: what keeps state or runs elsewhere.  Dropped: what changes
     * nothing here (store: nothing is kept either way; stream_options'
     * obfuscation padding; caching and safety hints).  The rest passes to
     * the chat path. */
    static const char *const refused[] = {"conversation", "prompt", "max_tool_calls", "top_logprobs",
                                          /* the chat's, which this answer does not carry */
                                          "logprobs", "n_probs", "post_sampling_probs"};
    static const char *const taken[] = {"input", "instructions", "previous_response_id", "tools", "tool_choice",
                                        "text", "max_output_tokens", "reasoning", "truncation", "include",
                                        "background", "store", "metadata", "user", "model", "stream_options",
                                        "service_tier", "prompt_cache_key", "safety_identifier"};
    if (!rc)
        rc = srv_dialect_rest(in, out, refused, sizeof refused / sizeof refused[0], taken,
                              sizeof taken / sizeof taken[0], msg, cap);
    if (rc) {
        json_decref(out);
        return NULL;
    }
    return out;
}

enum MHD_Result srv_responses(srv *S, struct MHD_Connection *c, const char *body, size_t len, int count,
                              srv_tenant *tenant)
{
    return srv_dialect_request(S, c, body, len, to_chat, count, SRV_RESPONSES, tenant);
}

/* The answer's side. */

typedef struct {
    char id[64], msg_id[64], rs_id[64], fc_id[80];
    long created;
    long long seq;      /* sequence_number of the next event */
    int started;        /* response.created sent */
    int open;           /* 0 none, 1 a message, 2 a function call, 3 a reasoning item */
    json_t *output;     /* the items done */
    json_t *item;       /* the open one */
    char *acc;          /* its text or arguments so far */
    size_t acc_len;
} responses;

static void *r_open(srv_job *j, json_t *chat_body)
{
    (void)chat_body;
    responses *r = calloc(1, sizeof *r);
    if (!r || !(r->output = json_array())) {
        free(r);
        return NULL;
    }
    const char *dash = strchr(j->id, '-');
    snprintf(r->id, sizeof r->id, "resp_%s", dash ? dash + 1 : j->id);
    snprintf(r->msg_id, sizeof r->msg_id, "msg_%s", dash ? dash + 1 : j->id);
    snprintf(r->rs_id, sizeof r->rs_id, "rs_%s", dash ? dash + 1 : j->id);
    r->created = (long)time(NULL);
    return r;
}

static void r_close(void *state)
{
    responses *r = state;
    json_decref(r->output);
    json_decref(r->item);
    free(r->acc);
    free(r);
}

static json_t *usage(srv_job *j)
{
    json_int_t prompt, cached, out, reasoning;
    srv_dialect_usage(j, &prompt, &cached, &out, &reasoning);
    return json_pack("{s:I,s:{s:I},s:I,s:{s:I},s:I}", "input_tokens", prompt, "input_tokens_details", "cached_tokens",
                     cached, "output_tokens", out, "output_tokens_details", "reasoning_tokens", reasoning,
                     "total_tokens", prompt + out);
}

/* The response object; status "completed", "incomplete" (the length
 * ran out) or "in_progress" (output so far, no usage). */
static json_t *response(srv_job *j, json_t *output, const char *finish)
{
    responses *r = j->dialect_state;
    const int incomplete = finish && !strcmp(finish, "length");
    json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:s,s:O,s:o}", "id", r->id, "object", "response", "created_at",
                          (json_int_t)r->created, "status", !finish ? "in_progress" : incomplete ? "incomplete"
                                                                                               : "completed",
                          "model", j->S->model_name, "output", output, "incomplete_details",
                          incomplete ? json_pack("{s:s}", "reason", "max_output_tokens") : json_null());
    if (finish) {
        json_object_set_new(o, "completed_at", json_integer((json_int_t)time(NULL)));
        json_object_set_new(o, "usage", usage(j));
    }
    return o;
}

static json_t *message_item(const char *id, json_t *text, const char *status)
{
    return json_pack("{s:s,s:s,s:s,s:s,s:[{s:s,s:O,s:[],s:[]}]}", "type", "message", "id", id, "status", status, "role",
                     "assistant", "content", "type", "output_text", "text", text, "annotations", "logprobs");
}

/* The thought as a reasoning item (its text whole; no summary, nothing
 * encrypted), as llama-server writes it. */
static json_t *reasoning_item(const char *id, json_t *text, const char *status)
{
    return json_pack("{s:s,s:s,s:s,s:[],s:o,s:s}", "type", "reasoning", "id", id, "status", status, "summary",
                     "content", text ? json_pack("[{s:s,s:O}]", "type", "reasoning_text", "text", text) : json_array(),
                     "encrypted_content", "");
}

static json_t *call_item(json_t *call, const char *status)
{
    json_t *fn = json_object_get(call, "function"), *id = json_object_get(call, "id");
    char fc[80];
    snprintf(fc, sizeof fc, "fc_%s", json_string_value(id) ? json_string_value(id) : "");
    return json_pack("{s:s,s:s,s:O,s:O,s:O,s:s}", "type", "function_call", "id", fc, "call_id", id, "name",
                     json_object_get(fn, "name"), "arguments", json_object_get(fn, "arguments"), "status", status);
}

static json_t *r_whole(srv_job *j, json_t *chat)
{
    responses *r = j->dialect_state;
    json_t *choice = json_array_get(json_object_get(chat, "choices"), 0), *m = json_object_get(choice, "message");
    json_t *text = json_object_get(m, "content"), *thought = json_object_get(m, "reasoning_content");
    if (json_string_length(thought))
        json_array_append_new(r->output, reasoning_item(r->rs_id, thought, "completed"));
    if (json_string_length(text))
        json_array_append_new(r->output, message_item(r->msg_id, text, "completed"));
    size_t i;
    json_t *call;
    json_array_foreach(json_object_get(m, "tool_calls"), i, call)
        json_array_append_new(r->output, call_item(call, "completed"));
    const char *finish = json_string_value(json_object_get(choice, "finish_reason"));
    json_t *out = response(j, r->output, finish ? finish : "stop");
    json_decref(chat);
    return out;
}

/* One named, numbered event (its type is its name; takes v). */
static void event(srv_job *j, const char *type, json_t *v)
{
    responses *r = j->dialect_state;
    json_t *e = json_pack("{s:s,s:I}", "type", type, "sequence_number", (json_int_t)r->seq++);
    json_object_update(e, v);
    json_decref(v);
    srv_stream_named(j, type, e);
}

static void start(srv_job *j)
{
    responses *r = j->dialect_state;
    if (r->started)
        return;
    r->started = 1;
    event(j, "response.created", json_pack("{s:o}", "response", response(j, r->output, NULL)));
    event(j, "response.in_progress", json_pack("{s:o}", "response", response(j, r->output, NULL)));
}

static void accumulate(responses *r, const char *s)
{
    size_t n = strlen(s);
    char *more = realloc(r->acc, r->acc_len + n + 1);
    if (!more)
        return;
    memcpy(more + r->acc_len, s, n + 1);
    r->acc = more;
    r->acc_len += n;
}

/* The open item's .done events; it joins the output. */
static void close_item(srv_job *j)
{
    responses *r = j->dialect_state;
    const json_int_t at = (json_int_t)json_array_size(r->output);
    json_t *acc = json_string(r->acc ? r->acc : "");
    if (r->open == 1) {
        event(j, "response.output_text.done", json_pack("{s:s,s:I,s:i,s:O,s:[]}", "item_id", r->msg_id,
                                                                    "output_index", at, "content_index", 0, "text", acc,
                                                                    "logprobs"));
        event(j, "response.content_part.done",
                          json_pack("{s:s,s:I,s:i,s:{s:s,s:O,s:[],s:[]}}", "item_id", r->msg_id, "output_index", at,
                                    "content_index", 0, "part", "type", "output_text", "text", acc, "annotations",
                                    "logprobs"));
        json_decref(r->item);
        r->item = message_item(r->msg_id, acc, "completed");
    } else if (r->open == 3) {
        event(j, "response.reasoning_text.done", json_pack("{s:s,s:I,s:i,s:O}", "item_id", r->rs_id, "output_index",
                                                           at, "content_index", 0, "text", acc));
        json_decref(r->item);
        r->item = reasoning_item(r->rs_id, acc, "completed");
    } else if (r->open == 2) {
        event(j, "response.function_call_arguments.done",
                          json_pack("{s:s,s:I,s:O}", "item_id", r->fc_id, "output_index", at, "arguments", acc));
        json_object_set(r->item, "arguments", acc);
        json_object_set_new(r->item, "status", json_string("completed"));
    }
    if (r->open) {
        event(j, "response.output_item.done", json_pack("{s:I,s:O}", "output_index", at, "item", r->item));
        json_array_append(r->output, r->item);
    }
    json_decref(acc);
    json_decref(r->item);
    r->item = NULL;
    free(r->acc);
    r->acc = NULL;
    r->acc_len = 0;
    r->open = 0;
}

static void timed(srv_job *j, srv_choice *ch, json_t *ev)
{
    if (j->timings_per_token)
        json_object_set_new(ev, "timings", srv_timings_json(j, ch));
}

static void r_chunk(srv_job *j, srv_choice *ch, json_t *choice, int final)
{
    responses *r = j->dialect_state;
    start(j);
    if (!choice)
        return;
    json_t *delta = json_object_get(choice, "delta"), *text = json_object_get(delta, "content");
    json_t *thought = json_object_get(delta, "reasoning_content");
    if (json_string_length(thought)) {
        if (r->open != 3) {
            close_item(j);
            r->open = 3;
            r->item = reasoning_item(r->rs_id, NULL, "in_progress");
            event(j, "response.output_item.added", json_pack("{s:I,s:O}", "output_index",
                                                             (json_int_t)json_array_size(r->output), "item", r->item));
        }
        accumulate(r, json_string_value(thought));
        json_t *ev = json_pack("{s:s,s:I,s:i,s:O}", "item_id", r->rs_id, "output_index",
                               (json_int_t)json_array_size(r->output), "content_index", 0, "delta", thought);
        timed(j, ch, ev);
        event(j, "response.reasoning_text.delta", ev);
    }
    if (json_string_length(text)) {
        if (r->open != 1) {
            close_item(j);
            const json_int_t at = (json_int_t)json_array_size(r->output);
            r->open = 1;
            r->item = json_pack("{s:s,s:s,s:s,s:s,s:[]}", "type", "message", "id", r->msg_id, "status", "in_progress",
                                "role", "assistant", "content");
            event(j, "response.output_item.added", json_pack("{s:I,s:O}", "output_index", at, "item",
                                                                         r->item));
            event(j, "response.content_part.added",
                              json_pack("{s:s,s:I,s:i,s:{s:s,s:s,s:[],s:[]}}", "item_id", r->msg_id, "output_index", at,
                                        "content_index", 0, "part", "type", "output_text", "text", "", "annotations",
                                        "logprobs"));
        }
        accumulate(r, json_string_value(text));
        json_t *ev = json_pack("{s:s,s:I,s:i,s:O,s:[]}", "item_id", r->msg_id, "output_index",
                               (json_int_t)json_array_size(r->output), "content_index", 0, "delta", text, "logprobs");
        timed(j, ch, ev);
        event(j, "response.output_text.delta", ev);
    }
    size_t i;
    json_t *call;
    json_array_foreach(json_object_get(delta, "tool_calls"), i, call) {
        json_t *fn = json_object_get(call, "function"), *args = json_object_get(fn, "arguments");
        if (json_object_get(call, "id")) { /* a new call: its item */
            close_item(j);
            r->open = 2;
            r->item = call_item(call, "in_progress");
            json_object_set_new(r->item, "arguments", json_string(""));
            snprintf(r->fc_id, sizeof r->fc_id, "%s", json_string_value(json_object_get(r->item, "id")));
            event(j, "response.output_item.added",
                              json_pack("{s:I,s:O}", "output_index", (json_int_t)json_array_size(r->output), "item",
                                        r->item));
        }
        if (json_string_length(args) && r->open == 2) {
            accumulate(r, json_string_value(args));
            json_t *ev = json_pack("{s:s,s:I,s:O}", "item_id", r->fc_id, "output_index",
                                   (json_int_t)json_array_size(r->output), "delta", args);
            timed(j, ch, ev);
            event(j, "response.function_call_arguments.delta", ev);
        }
    }
    if (final) {
        close_item(j);
        json_t *done = json_pack("{s:o}", "response", response(j, r->output,
                                                                json_string_value(json_object_get(choice, "finish_reason"))));
        timed(j, ch, done);
        event(j, "response.completed", done);
    }
    json_decref(choice);
}

static void r_progress(srv_job *j, srv_choice *ch, json_t *progress)
{
    responses *r = j->dialect_state;
    start(j);
    json_t *ev = json_pack("{s:o,s:o}", "response", response(j, r->output, NULL), "prompt_progress", progress);
    timed(j, ch, ev);
    event(j, "response.in_progress", ev);
}

static void r_error(srv_job *j, const char *type, const char *message)
{
    event(j, "error", json_pack("{s:s,s:s,s:n}", "code", type, "message", message ? message : "", "param"));
}

const srv_dialect srv_responses_dialect = {r_open, r_whole, r_chunk, r_progress, r_error, r_close};
