/* What the other APIs over the chat share (server_anthropic.c,
 * server_responses.c): the request read, turned into a chat completion's
 * body by the API's own translation, and answered in that API's shape or
 * counted; the body's fields the translation left; the usage numbers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/server.h"

enum MHD_Result srv_dialect_request(srv *S, struct MHD_Connection *c, const char *body, size_t len,
                                    srv_to_chat to_chat, int count, int mode, srv_tenant *tenant)
{
    json_error_t je;
    json_t *in = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!in)
        return srv_error(c, 400, "invalid_request_error", "invalid_json", "The body is not valid JSON: %s (line %d, "
                         "column %d)", je.text, je.line, je.column);
    char msg[512];
    json_t *chat = json_is_object(in) ? to_chat(in, count, msg, sizeof msg) : NULL;
    if (!json_is_object(in))
        snprintf(msg, sizeof msg, "The body must be a JSON object");
    json_decref(in);
    if (!chat)
        return srv_error(c, 400, "invalid_request_error", "invalid_value", "%s", msg);
    char *text = json_dumps(chat, JSON_COMPACT);
    json_decref(chat);
    if (!text)
        return srv_error(c, 500, "server_error", "out_of_memory", "out of memory");
    /* counting: what /chat/completions/input_tokens says, in the same shape */
    enum MHD_Result r = count ? srv_input_tokens(S, c, text, strlen(text))
                              : srv_completion(S, c, text, strlen(text), mode, tenant);
    free(text);
    return r;
}

static int listed(const char *key, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(key, list[i]))
            return 1;
    return 0;
}

int srv_dialect_rest(json_t *in, json_t *out, const char *const *refused, size_t n_refused, const char *const *taken,
                     size_t n_taken, char *msg, size_t cap)
{
    const char *key;
    json_t *v;
    json_object_foreach(in, key, v) {
        const int inert = json_is_null(v) || json_is_false(v) || (json_is_integer(v) && !json_integer_value(v));
        if (listed(key, refused, n_refused) && !inert) {
            snprintf(msg, cap, "'%s' is not supported", key);
            return -1;
        }
        if (!listed(key, refused, n_refused) && !listed(key, taken, n_taken))
            json_object_set(out, key, v);
    }
    return 0;
}

void srv_dialect_usage(srv_job *j, json_int_t *prompt, json_int_t *cached, json_int_t *completion,
                       json_int_t *reasoning)
{
    json_t *u = srv_usage_json(j);
    if (reasoning)
        *reasoning = json_integer_value(json_object_get(json_object_get(u, "completion_tokens_details"),
                                                        "reasoning_tokens"));
    *prompt = json_integer_value(json_object_get(u, "prompt_tokens"));
    *cached = json_integer_value(json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens"));
    *completion = json_integer_value(json_object_get(u, "completion_tokens"));
    json_decref(u);
}
