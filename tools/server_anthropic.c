/* Anthropic's Messages API on the chat path, as llama-server serves it:
 * POST /v1/messages (whole and streamed) and /v1/messages/count_tokens.
 *
 * The request becomes a chat completion's body: the system prompt (a
 * string or text blocks) first, then each message with its content
 * blocks as the chat reads them (text as text parts, thinking as
 * reasoning_content, tool_use as tool_calls, each tool_result as a tool
 * message after it), the tools as functions (input_schema as parameters),
 * tool_choice (auto, any, tool, none; disable_parallel_tool_use),
 * stop_sequences as stop, max_tokens (4096 when absent, as llama-server),
 * thinking's type as the template's enable_thinking and its budget_tokens
 * as the reasoning budget, output_config.format as
 * response_format.  Fields that change nothing here (metadata,
 * cache_control marks: the prefix cache is automatic; service tier,
 * region, account) are dropped; Anthropic's fields for what this server
 * does not do (container, mcp_servers, context_management, diagnostics,
 * output_config.effort) are refused with a 400 naming them; every other
 * field passes to the chat path, which takes its own (top_k, min_p,
 * grammar, ...) and refuses llama-server's that it does not do.  Images
 * and documents are refused: no model here reads them.
 *
 * The answer is Anthropic's message: content blocks (text, tool_use with
 * its input parsed), stop_reason (end_turn, max_tokens, stop_sequence with
 * the sequence, tool_use), usage (input_tokens not read from the prefix
 * cache, cache_read_input_tokens, output_tokens).  Streamed, the events
 * are Anthropic's, each named: message_start, then per block
 * content_block_start / _delta (text_delta, input_json_delta) / _stop,
 * then message_delta (stop_reason, output_tokens) and message_stop; a
 * failure mid-stream is an error event. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/server.h"

#define FAIL(...) (snprintf(msg, cap, __VA_ARGS__), -1)
#define FAIL_NULL(...) (snprintf(msg, cap, __VA_ARGS__), (json_t *)NULL)

/* The text of a tool_result's content (or the system prompt's blocks): a
 * string, or text blocks joined, as llama-server joins them. */
static int blocks_text(json_t *content, size_t i, size_t k, json_t **out, char *msg, size_t cap)
{
    if (!content || json_is_string(content)) {
        *out = json_string(content ? json_string_value(content) : "");
        return 0;
    }
    if (!json_is_array(content))
        return FAIL("messages[%zu].content[%zu].content must be a string or an array of blocks", i, k);
    size_t at;
    json_t *b;
    char *text = strdup("");
    json_array_foreach(content, at, b) {
        const char *type = json_string_value(json_object_get(b, "type"));
        json_t *t = json_object_get(b, "text");
        if (!type || strcmp(type, "text") || !json_is_string(t)) {
            free(text);
            return FAIL("messages[%zu].content[%zu].content[%zu]: %s input is not supported (text blocks only)", i,
                        k, at, type && !strcmp(type, "image") ? "image" : "this block's");
        }
        char *more = text ? realloc(text, strlen(text) + json_string_length(t) + 1) : NULL;
        if (!more) {
            free(text);
            return FAIL("out of memory");
        }
        text = strcat(more, json_string_value(t));
    }
    *out = text ? json_string(text) : NULL;
    free(text);
    return *out ? 0 : FAIL("messages[%zu].content[%zu].content is not valid UTF-8", i, k);
}

/* One message's content blocks into the chat's messages (appended to
 * `out`): the message itself, then its tool results. */
static int convert_message(json_t *m, size_t i, json_t *out, char *msg, size_t cap)
{
    json_t *content = json_object_get(m, "content"), *role = json_object_get(m, "role");
    if (!json_is_object(m) || !json_is_string(role))
        return FAIL("messages[%zu] must be an object with a string 'role'", i);
    if (!json_is_array(content)) { /* a string (or what the chat path will refuse) */
        json_array_append(out, m);
        return 0;
    }
    json_t *parts = json_array(), *calls = json_array(), *results = json_array();
    json_t *reasoning = NULL;
    size_t k;
    json_t *b;
    int rc = 0;
    json_array_foreach(content, k, b) {
        const char *type = json_string_value(json_object_get(b, "type"));
        if (!type) {
            rc = FAIL("messages[%zu].content[%zu] has no 'type'", i, k);
        } else if (!strcmp(type, "text")) {
            json_t *t = json_object_get(b, "text");
            if (!json_is_string(t))
                rc = FAIL("messages[%zu].content[%zu].text must be a string", i, k);
            else
                json_array_append_new(parts, json_pack("{s:s,s:O}", "type", "text", "text", t));
        } else if (!strcmp(type, "thinking")) {
            json_t *t = json_object_get(b, "thinking");
            if (!json_is_string(t)) {
                rc = FAIL("messages[%zu].content[%zu].thinking must be a string", i, k);
            } else if (!reasoning) {
                reasoning = json_copy(t);
            } else {
                char *joined = malloc(json_string_length(reasoning) + json_string_length(t) + 1);
                if (joined) {
                    strcat(strcpy(joined, json_string_value(reasoning)), json_string_value(t));
                    json_string_set(reasoning, joined);
                }
                free(joined);
            }
        } else if (!strcmp(type, "redacted_thinking")) {
            /* encrypted for Anthropic's models: nothing a local template can show */
        } else if (!strcmp(type, "tool_use")) {
            json_t *id = json_object_get(b, "id"), *name = json_object_get(b, "name"), *in = json_object_get(b, "input");
            char *args = in ? json_dumps(in, JSON_COMPACT | JSON_ENCODE_ANY) : strdup("{}");
            if (!json_is_string(id) || !json_is_string(name) || (in && !json_is_object(in)) || !args)
                rc = FAIL("messages[%zu].content[%zu]: a tool_use needs a string 'id' and 'name' and an object "
                          "'input'", i, k);
            else
                json_array_append_new(calls, json_pack("{s:O,s:s,s:{s:O,s:s}}", "id", id, "type", "function",
                                                       "function", "name", name, "arguments", args));
            free(args);
        } else if (!strcmp(type, "tool_result")) {
            json_t *id = json_object_get(b, "tool_use_id"), *text = NULL;
            if (!json_is_string(id))
                rc = FAIL("messages[%zu].content[%zu]: a tool_result needs a string 'tool_use_id'", i, k);
            else if (!(rc = blocks_text(json_object_get(b, "content"), i, k, &text, msg, cap)))
                json_array_append_new(results, json_pack("{s:s,s:O,s:o}", "role", "tool", "tool_call_id", id,
                                                         "content", text));
        } else if (!strcmp(type, "image") || !strcmp(type, "document")) {
            rc = FAIL("messages[%zu].content[%zu]: %s input is not supported (this server reads text only)", i, k,
                      type);
        } else {
            rc = FAIL("messages[%zu].content[%zu]: content blocks of type '%s' are not supported", i, k, type);
        }
        if (rc)
            break;
    }
    if (!rc && (json_array_size(parts) || json_array_size(calls) || reasoning)) {
        json_t *nm = json_pack("{s:O,s:o}", "role", role, "content",
                               json_array_size(parts) ? json_incref(parts) : json_string(""));
        if (json_array_size(calls))
            json_object_set(nm, "tool_calls", calls);
        if (reasoning)
            json_object_set(nm, "reasoning_content", reasoning);
        json_array_append_new(out, nm);
    }
    if (!rc)
        json_array_extend(out, results);
    json_decref(parts);
    json_decref(calls);
    json_decref(results);
    json_decref(reasoning);
    return rc;
}

/* The Anthropic body as a chat completion's; NULL with the 400's message. */
static json_t *to_chat(json_t *in, int count, char *msg, size_t cap)
{
    json_t *msgs = json_object_get(in, "messages");
    if (!msgs)
        return FAIL_NULL("'messages' is required");
    if (!json_is_array(msgs))
        return FAIL_NULL("'messages' must be an array");
    json_t *out = json_object(), *chat = json_array(), *sys = json_object_get(in, "system");
    int rc = 0;
    if (json_is_string(sys)) {
        json_array_append_new(chat, json_pack("{s:s,s:O}", "role", "system", "content", sys));
    } else if (json_is_array(sys)) { /* text blocks, joined as llama-server joins them */
        json_t *text = NULL;
        rc = blocks_text(sys, 0, 0, &text, msg, cap);
        if (rc)
            rc = FAIL("'system' must be a string or an array of text blocks");
        else
            json_array_append_new(chat, json_pack("{s:s,s:o}", "role", "system", "content", text));
    } else if (sys && !json_is_null(sys)) {
        rc = FAIL("'system' must be a string or an array of text blocks");
    }
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) if (!rc) rc = convert_message(m, i, chat, msg, cap);
    json_object_set_new(out, "messages", chat);
    /* tools: Anthropic's {name, description, input_schema} as functions */
    json_t *tools = json_object_get(in, "tools");
    if (!rc && tools) {
        json_t *fns = json_array();
        size_t k;
        json_t *t;
        if (!json_is_array(tools))
            rc = FAIL("'tools' must be an array");
        json_array_foreach(tools, k, t) {
            json_t *name = json_object_get(t, "name"), *type = json_object_get(t, "type");
            if (rc)
                break;
            if (type && !json_is_null(type) && strcmp(json_string_value(type) ? json_string_value(type) : "", "custom"))
                rc = FAIL("tools[%zu]: server tools of type '%s' are not supported (client tools only)", k,
                          json_string_value(type) ? json_string_value(type) : "?");
            else if (!json_is_string(name))
                rc = FAIL("tools[%zu] needs a string 'name'", k);
            else {
                json_t *f = json_pack("{s:O}", "name", name);
                if (json_object_get(t, "description"))
                    json_object_set(f, "description", json_object_get(t, "description"));
                json_t *schema = json_object_get(t, "input_schema");
                json_object_set_new(f, "parameters", schema ? json_incref(schema) : json_object());
                json_array_append_new(fns, json_pack("{s:s,s:o}", "type", "function", "function", f));
            }
        }
        json_object_set_new(out, "tools", fns);
    }
    json_t *tc = json_object_get(in, "tool_choice");
    if (!rc && tc) {
        const char *type = json_string_value(json_object_get(tc, "type"));
        json_t *name = json_object_get(tc, "name");
        if (!type)
            rc = FAIL("'tool_choice' must be an object with a 'type'");
        else if (!strcmp(type, "auto") || !strcmp(type, "none"))
            json_object_set_new(out, "tool_choice", json_string(type));
        else if (!strcmp(type, "any"))
            json_object_set_new(out, "tool_choice", json_string("required"));
        else if (!strcmp(type, "tool") && json_is_string(name))
            json_object_set_new(out, "tool_choice", json_pack("{s:s,s:{s:O}}", "type", "function", "function",
                                                              "name", name));
        else
            rc = FAIL("'tool_choice' type '%s' is not auto, any, tool (with a 'name') or none", type);
        if (!rc && json_is_true(json_object_get(tc, "disable_parallel_tool_use")))
            json_object_set_new(out, "parallel_tool_calls", json_false());
    }
    json_t *thinking = json_object_get(in, "thinking");
    if (!rc && thinking) {
        /* The template's thinking switch, and budget_tokens as the
         * reasoning budget (below max_tokens, as Anthropic asks).  A
         * thought is not split from the answer here. */
        const char *type = json_string_value(json_object_get(thinking, "type"));
        json_t *budget = json_object_get(thinking, "budget_tokens"), *max = json_object_get(in, "max_tokens");
        const char *display = json_string_value(json_object_get(thinking, "display"));
        if (!type || (strcmp(type, "enabled") && strcmp(type, "disabled") && strcmp(type, "adaptive") &&
                      strcmp(type, "between_tools")))
            rc = FAIL("'thinking.type' must be \"enabled\", \"adaptive\", \"between_tools\" or \"disabled\"");
        else if (budget && !json_is_null(budget) &&
                 (!json_is_integer(budget) || json_integer_value(budget) < 0 ||
                  (json_is_integer(max) && json_integer_value(budget) >= json_integer_value(max))))
            rc = FAIL("'thinking.budget_tokens' must be an integer from 0 to below max_tokens");
        else if (display && strcmp(display, "summarized"))
            rc = FAIL("'thinking.display' \"%s\" is not supported: a thought is not split from the answer", display);
        if (!rc && json_is_integer(budget) && strcmp(type, "disabled"))
            json_object_set(out, "reasoning_budget_tokens", budget);
        if (!rc) {
            json_t *kw = json_object_get(in, "chat_template_kwargs");
            kw = json_is_object(kw) ? json_copy(kw) : json_object();
            json_object_set_new(kw, "enable_thinking", json_boolean(strcmp(type, "disabled")));
            json_object_set_new(out, "chat_template_kwargs", kw);
        }
    }
    /* output_config: format as the chat's response_format (a grammar);
     * effort has no counterpart here */
    json_t *oc = json_object_get(in, "output_config");
    if (!rc && oc && !json_is_null(oc)) {
        json_t *fmt = json_object_get(oc, "format"), *effort = json_object_get(oc, "effort");
        const char *ft = json_string_value(json_object_get(fmt, "type"));
        if (!json_is_object(oc))
            rc = FAIL("'output_config' must be an object");
        else if (effort && !json_is_null(effort))
            rc = FAIL("'output_config.effort' is not supported");
        else if (fmt && !json_is_null(fmt) && (!ft || strcmp(ft, "json_schema") ||
                                                !json_is_object(json_object_get(fmt, "schema"))))
            rc = FAIL("'output_config.format' must be {\"type\": \"json_schema\", \"schema\": {...}}");
        else if (fmt && !json_is_null(fmt))
            json_object_set_new(out, "response_format", json_pack("{s:s,s:{s:s,s:O}}", "type", "json_schema",
                                                                  "json_schema", "name", "output", "schema",
                                                                  json_object_get(fmt, "schema")));
        const char *key;
        json_t *v;
        json_object_foreach(oc, key, v) if (!rc && strcmp(key, "format") && strcmp(key, "effort"))
            rc = FAIL("'output_config.%s' is not supported", key);
    }
    if (!rc && json_object_get(in, "stop_sequences"))
        json_object_set(out, "stop", json_object_get(in, "stop_sequences"));
    if (!rc && !count)
        json_object_set_new(out, "max_tokens", json_object_get(in, "max_tokens") ? json_incref(json_object_get(in, "max_tokens"))
                                                                              : json_integer(4096));
    /* Anthropic's events have no place for llama-server's stream extras. */
    if (!rc && (json_is_true(json_object_get(in, "timings_per_token")) ||
                json_is_true(json_object_get(in, "return_progress"))))
        rc = FAIL("'timings_per_token' and 'return_progress' have no place in Anthropic's events (use "
                  "/v1/chat/completions)");
    /* Anthropic's fields for what this server does not do are refused
     * (and the chat's log-probabilities, which its answer cannot carry);
     * taken above, or changing nothing here: metadata, cache_control (the
     * prefix cache is automatic), service_tier, speed, inference_geo,
     * workspace_id, user_profile_id (one machine, one account); the rest
     * passes to the chat path. */
    static const char *const refused[] = {"container", "mcp_servers", "context_management", "diagnostics",
                                          /* the chat's, which Anthropic's answer has no place for */
                                          "logprobs", "top_logprobs", "n_probs", "post_sampling_probs"};
    static const char *const taken[] = {"messages", "system", "tools", "tool_choice", "thinking", "stop_sequences",
                                        "max_tokens", "chat_template_kwargs", "model", "output_config",
                                        "metadata", "cache_control", "service_tier", "speed", "inference_geo",
                                        "workspace_id", "user_profile_id", "stream"};
    if (!rc)
        rc = srv_dialect_rest(in, out, refused, sizeof refused / sizeof refused[0], taken,
                              sizeof taken / sizeof taken[0], msg, cap);
    if (!rc && !count && json_object_get(in, "stream"))
        json_object_set(out, "stream", json_object_get(in, "stream"));
    if (!rc && json_object_get(in, "chat_template_kwargs") && !json_object_get(out, "chat_template_kwargs"))
        json_object_set(out, "chat_template_kwargs", json_object_get(in, "chat_template_kwargs"));
    if (rc) {
        json_decref(out);
        return NULL;
    }
    return out;
}

enum MHD_Result srv_anthropic(srv *S, struct MHD_Connection *c, const char *body, size_t len, int count,
                              srv_tenant *tenant)
{
    return srv_dialect_request(S, c, body, len, to_chat, count, SRV_ANTHROPIC, tenant);
}

/* The answer's side. */

enum { TOOL_USE, TEXT, THINKING };

typedef struct {
    json_t *stop;       /* the request's stop strings, for stop_sequence */
    char id[64];
    int started;        /* message_start sent */
    int open;           /* the block open now, -1 none */
    int open_kind;      /* its kind: TEXT, THINKING or TOOL_USE */
    int n_blocks;       /* blocks opened so far */
    int tool_block[SRV_MAX_TOOL_CALLS]; /* each call's block */
} anthropic;

static void *a_open(srv_job *j, json_t *chat_body)
{
    anthropic *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    json_t *stop = json_object_get(chat_body, "stop");
    a->stop = json_is_string(stop) ? json_pack("[O]", stop) : json_incref(stop);
    /* the chat's id, spelled as Anthropic's */
    const char *dash = strchr(j->id, '-');
    snprintf(a->id, sizeof a->id, "msg_%s", dash ? dash + 1 : j->id);
    a->open = -1;
    return a;
}

static void a_close(void *state)
{
    anthropic *a = state;
    json_decref(a->stop);
    free(a);
}

/* end_turn, max_tokens, stop_sequence (*seq the string), tool_use. */
static const char *stop_reason(srv_job *j, const char *finish, json_t **seq)
{
    anthropic *a = j->dialect_state;
    const hx_generation_stats *st = &j->ch[0].res.stats;
    *seq = json_null();
    if (finish && !strcmp(finish, "tool_calls"))
        return "tool_use";
    if (finish && !strcmp(finish, "length"))
        return "max_tokens";
    if (st->finish == HX_FINISH_STOP && st->stop_index >= 0 && json_array_get(a->stop, (size_t)st->stop_index)) {
        *seq = json_incref(json_array_get(a->stop, (size_t)st->stop_index));
        return "stop_sequence";
    }
    return "end_turn";
}

static json_t *usage(srv_job *j, int whole)
{
    json_int_t prompt, cached, out;
    srv_dialect_usage(j, &prompt, &cached, &out, NULL);
    return whole ? json_pack("{s:I,s:I,s:I,s:I}", "input_tokens", prompt - cached, "cache_read_input_tokens", cached,
                             "cache_creation_input_tokens", (json_int_t)0, "output_tokens", out)
                 : json_pack("{s:I}", "output_tokens", out);
}

/* A tool call's arguments as Anthropic's input (an object; {} when the
 * model wrote no valid JSON object). */
static json_t *call_input(json_t *call)
{
    const char *args = json_string_value(json_object_get(json_object_get(call, "function"), "arguments"));
    json_t *v = args ? json_loads(args, 0, NULL) : NULL;
    if (!json_is_object(v)) {
        json_decref(v);
        v = json_object();
    }
    return v;
}

static json_t *a_whole(srv_job *j, json_t *chat)
{
    anthropic *a = j->dialect_state;
    json_t *choice = json_array_get(json_object_get(chat, "choices"), 0), *m = json_object_get(choice, "message");
    json_t *content = json_array(), *text = json_object_get(m, "content");
    json_t *thought = json_object_get(m, "reasoning_content");
    /* The thought first, as Anthropic's extended thinking: a local model
     * signs nothing, so the signature is empty (as llama-server's). */
    if (json_string_length(thought))
        json_array_append_new(content, json_pack("{s:s,s:O,s:s}", "type", "thinking", "thinking", thought, "signature",
                                                 ""));
    if (json_string_length(text))
        json_array_append_new(content, json_pack("{s:s,s:O}", "type", "text", "text", text));
    size_t i;
    json_t *call;
    json_array_foreach(json_object_get(m, "tool_calls"), i, call)
        json_array_append_new(content, json_pack("{s:s,s:O,s:O,s:o}", "type", "tool_use", "id",
                                                 json_object_get(call, "id"), "name",
                                                 json_object_get(json_object_get(call, "function"), "name"), "input",
                                                 call_input(call)));
    json_t *seq;
    const char *reason = stop_reason(j, json_string_value(json_object_get(choice, "finish_reason")), &seq);
    json_t *out = json_pack("{s:s,s:s,s:s,s:o,s:s,s:s,s:o,s:o}", "id", a->id, "type", "message", "role", "assistant",
                            "content", content, "model", j->S->model_name, "stop_reason", reason, "stop_sequence", seq,
                            "usage", usage(j, 1));
    json_decref(chat);
    return out;
}

/* One named event, its type first as Anthropic's (takes v). */
static void event(srv_job *j, const char *type, json_t *v)
{
    json_t *e = json_pack("{s:s}", "type", type);
    json_object_update(e, v);
    json_decref(v);
    srv_stream_named(j, type, e);
}

static void close_block(srv_job *j, anthropic *a)
{
    /* Anthropic's clients wait for a thinking block's signature before
     * its end: an empty one, as for the whole answer */
    if (a->open >= 0 && a->open_kind == THINKING)
        event(j, "content_block_delta", json_pack("{s:i,s:{s:s,s:s}}", "index", a->open, "delta", "type",
                                                  "signature_delta", "signature", ""));
    if (a->open >= 0)
        event(j, "content_block_stop", json_pack("{s:i}", "index", a->open));
    a->open = -1;
}

static void a_chunk(srv_job *j, srv_choice *ch, json_t *choice, int final)
{
    anthropic *a = j->dialect_state;
    (void)ch;
    if (!a->started) {
        event(j, "message_start", json_pack("{s:{s:s,s:s,s:s,s:[],s:s,s:n,s:n,s:{s:I,s:i,s:i,s:i}}}", "message", "id",
                                            a->id, "type", "message", "role", "assistant", "content", "model",
                                            j->S->model_name, "stop_reason", "stop_sequence", "usage", "input_tokens",
                                            (json_int_t)j->prompt_tokens, "cache_read_input_tokens", 0,
                                            "cache_creation_input_tokens", 0, "output_tokens", 0));
        a->started = 1;
    }
    if (!choice)
        return;
    json_t *delta = json_object_get(choice, "delta"), *text = json_object_get(delta, "content");
    json_t *thought = json_object_get(delta, "reasoning_content");
    if (json_string_length(thought)) {
        if (a->open < 0 || a->open_kind != THINKING) {
            close_block(j, a);
            a->open = a->n_blocks++;
            a->open_kind = THINKING;
            event(j, "content_block_start", json_pack("{s:i,s:{s:s,s:s,s:s}}", "index", a->open, "content_block",
                                                      "type", "thinking", "thinking", "", "signature", ""));
        }
        event(j, "content_block_delta", json_pack("{s:i,s:{s:s,s:O}}", "index", a->open, "delta", "type",
                                                  "thinking_delta", "thinking", thought));
    }
    if (json_string_length(text)) {
        if (a->open < 0 || a->open_kind != TEXT) {
            close_block(j, a);
            a->open = a->n_blocks++;
            a->open_kind = TEXT;
            event(j, "content_block_start", json_pack("{s:i,s:{s:s,s:s}}", "index", a->open, "content_block", "type",
                                                      "text", "text", ""));
        }
        event(j, "content_block_delta", json_pack("{s:i,s:{s:s,s:O}}", "index", a->open, "delta", "type", "text_delta",
                                                  "text", text));
    }
    size_t i;
    json_t *call;
    json_array_foreach(json_object_get(delta, "tool_calls"), i, call) {
        json_int_t k = json_integer_value(json_object_get(call, "index"));
        json_t *fn = json_object_get(call, "function");
        if (k < 0 || k >= SRV_MAX_TOOL_CALLS)
            continue;
        if (json_object_get(call, "id")) { /* a new call: its block */
            close_block(j, a);
            a->open = a->tool_block[k] = a->n_blocks++;
            a->open_kind = TOOL_USE;
            event(j, "content_block_start", json_pack("{s:i,s:{s:s,s:O,s:O,s:{}}}", "index", a->open, "content_block",
                                                      "type", "tool_use", "id", json_object_get(call, "id"), "name",
                                                      json_object_get(fn, "name"), "input"));
        }
        json_t *args = json_object_get(fn, "arguments");
        if (json_string_length(args))
            event(j, "content_block_delta", json_pack("{s:i,s:{s:s,s:O}}", "index", a->tool_block[k], "delta", "type",
                                                      "input_json_delta", "partial_json", args));
    }
    if (final) {
        close_block(j, a);
        json_t *seq;
        const char *reason = stop_reason(j, json_string_value(json_object_get(choice, "finish_reason")), &seq);
        event(j, "message_delta", json_pack("{s:{s:s,s:o},s:o}", "delta", "stop_reason", reason, "stop_sequence", seq,
                                            "usage", usage(j, 0)));
        event(j, "message_stop", json_object());
    }
    json_decref(choice);
}

static void a_error(srv_job *j, const char *type, const char *message)
{
    event(j, "error", json_pack("{s:{s:s,s:s}}", "error", "type", !strcmp(type, "server_error") ? "api_error" : type,
                                "message", message ? message : ""));
}

/* No progress events: return_progress is refused for this API (to_chat). */
const srv_dialect srv_anthropic_dialect = {a_open, a_whole, a_chunk, NULL, a_error, a_close};
