/* llama-server's handling of a chat's last assistant message, the prefill
 * the model continues (server-common.cpp, common/chat.cpp):
 *   - two assistant messages at the end are refused ("Cannot have 2 or
 *     more assistant messages at the end of the list."), since it is not
 *     clear which one the model should continue;
 *   - a prefill given as content parts is continued as its text parts
 *     joined with "\n\n" (common_chat_msg::render_content's delimiter).
 * The body's messages are rewritten in place before the template reads
 * them, so the Jinja and built-in paths see the same prefill.
 * continue_final_message (vLLM's name for the same continuation, which
 * llama-server also takes) asks for it explicitly; "reasoning_content"
 * continues the message's thought instead (llama.cpp's
 * common_chat_continuation), which true and the prefill also do where the
 * message has a thought and no content. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/server.h"

static int is_assistant(json_t *m)
{
    const char *r = json_string_value(json_object_get(m, "role"));
    return r && !strcmp(r, "assistant");
}

/* Content c as one text, malloc'd into *out (length *len): a string as it
 * is, none or null "", text parts joined as render_content joins them
 * ("\n\n" after any text so far).  1, 0 where c holds something else (a
 * part that is not text), -1 out of memory. */
static int joined_text(json_t *c, char **out, size_t *len)
{
    size_t cap = json_string_length(c) + 1, k;
    json_t *part;
    if (c && !json_is_null(c) && !json_is_string(c) && !json_is_array(c))
        return 0;
    json_array_foreach(c, k, part) {
        const char *type = json_string_value(json_object_get(part, "type"));
        if (!type || strcmp(type, "text") || !json_is_string(json_object_get(part, "text")))
            return 0;
        cap += json_string_length(json_object_get(part, "text")) + 2;
    }
    char *w = *out = malloc(cap);
    if (!w)
        return -1;
    if (json_is_string(c)) {
        memcpy(w, json_string_value(c), json_string_length(c));
        w += json_string_length(c);
    }
    json_array_foreach(c, k, part) {
        json_t *text = json_object_get(part, "text");
        if (w != *out) {
            memcpy(w, "\n\n", 2);
            w += 2;
        }
        memcpy(w, json_string_value(text), json_string_length(text));
        w += json_string_length(text);
    }
    *w = '\0';
    *len = (size_t)(w - *out);
    return 1;
}

int srv_chat_prefill(json_t *body, char *msg, size_t cap)
{
    json_t *msgs = json_object_get(body, "messages");
    size_t n = json_array_size(msgs);
    json_t *cfm = json_object_get(body, "continue_final_message");
    /* llama-server's prefill applies when continue_final_message is not given */
    if (!n || !is_assistant(json_array_get(msgs, n - 1)) || (cfm && !json_is_null(cfm)))
        return 0;
    if (n >= 2 && is_assistant(json_array_get(msgs, n - 2))) {
        snprintf(msg, cap, "Cannot have 2 or more assistant messages at the end of the list.");
        return -1;
    }
    json_t *last = json_array_get(msgs, n - 1), *parts = json_object_get(last, "content");
    if (!json_is_array(parts))
        return 0;
    char *joined = NULL;
    size_t len = 0;
    const int got = joined_text(parts, &joined, &len);
    if (got < 0) {
        snprintf(msg, cap, "out of memory");
        return -1;
    }
    if (!got) /* a part of another kind is left for the content checks to refuse */
        return 0;
    json_t *s = json_stringn(joined, len);
    free(joined);
    if (!s || json_object_set_new(last, "content", s)) {
        snprintf(msg, cap, "the assistant message's content is not valid UTF-8");
        return -1;
    }
    return 0;
}

/* An assistant message with no content: none, null, "" or no parts. */
static int no_content(json_t *m)
{
    json_t *c = json_object_get(m, "content");
    return !c || json_is_null(c) || (json_is_string(c) && !json_string_length(c)) ||
           (json_is_array(c) && !json_array_size(c));
}

int srv_chat_continuation(json_t *body)
{
    json_t *v = json_object_get(body, "continue_final_message"), *msgs = json_object_get(body, "messages");
    json_t *last = json_array_get(msgs, json_array_size(msgs) ? json_array_size(msgs) - 1 : 0);
    const char *s = json_string_value(v);
    if (s && !strcmp(s, "reasoning_content"))
        return SRV_CONTINUE_THOUGHT;
    if (s && !strcmp(s, "content"))
        return SRV_CONTINUE_CONTENT;
    /* true, or llama-server's prefill: a last assistant message, the field
     * not given.  One with tool calls is a finished turn, rendered as it is
     * (llama-server refuses to continue it; asked for explicitly, so does
     * srv_chat_pop_final), its calls' arguments checked as any message's. */
    const int prefill = (!v || json_is_null(v)) && last && is_assistant(last) &&
                        !json_array_size(json_object_get(last, "tool_calls"));
    if (!json_is_true(v) && !prefill)
        return SRV_CONTINUE_NONE;
    json_t *thought = json_object_get(last, "reasoning_content");
    return json_is_string(thought) && json_string_length(thought) && no_content(last) ? SRV_CONTINUE_THOUGHT
                                                                                       : SRV_CONTINUE_CONTENT;
}

int srv_chat_continue(json_t *body, int add_generation_prompt, char *msg, size_t cap)
{
    json_t *v = json_object_get(body, "continue_final_message"), *msgs = json_object_get(body, "messages");
    if (!v || json_is_null(v) || json_is_false(v))
        return 0;
    const char *s = json_string_value(v);
    if (!json_is_true(v) && !(s && (!strcmp(s, "content") || !strcmp(s, "reasoning_content")))) {
        snprintf(msg, cap, "'continue_final_message' must be a boolean, \"content\" or \"reasoning_content\"");
        return -1;
    }
    if (add_generation_prompt) {
        snprintf(msg, cap, "Cannot set both add_generation_prompt and continue_final_message to true.");
        return -1;
    }
    json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);
    if (!is_assistant(last)) {
        snprintf(msg, cap, "'continue_final_message': the last message must be the assistant's, to continue it");
        return -1;
    }
    /* hx_chat_render refuses it too, but a template that writes no calls
     * gets them as text (server_tools.c) */
    if (json_array_size(json_object_get(last, "tool_calls"))) {
        snprintf(msg, cap, "Cannot continue an assistant message that contains tool calls.");
        return -1;
    }
    return 0;
}
