/* Text content parts for templates that read a message's content as a
 * string.  OpenAI's messages may give content as [{"type": "text",
 * "text": ...}, ...]; most chat templates only add content to strings
 * ("..." + message['content']) and fail on a list.  As llama.cpp does
 * (its template capabilities, supports_typed_content), the template is
 * asked once per request that has such a message: a probe message with
 * typed content is rendered, and when the probe's text does not come out
 * alone (the render fails, or prints the list itself) the parts are
 * joined with "\n" into a string before the real render. */
#include <stdlib.h>
#include <string.h>

#include "tools/server.h"

#define PROBE "hx-typed-content-probe"

static int has_parts(json_t *msgs)
{
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) if (json_is_array(json_object_get(m, "content"))) return 1;
    return 0;
}

/* Whether tmpl renders typed content (a probe part's text comes out). */
static int reads_parts(srv *S, const char *tmpl)
{
    hx_chat_render_options ro = hx_chat_render_options_default();
    ro.messages = "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"" PROBE "\"}]}]";
    char buf[4096];
    size_t len = 0;
    hx_status st = hx_model_chat_render(S->m, tmpl, &ro, buf, sizeof buf, &len);
    /* the probe's text alone: a template that prints the list whole
     * ("[{'type': 'text', ...}]") does not read parts */
    return st == HX_OK && strstr(buf, PROBE) && !strstr(buf, "'type'") && !strstr(buf, "\"type\"");
}

static json_t *joined(json_t *parts)
{
    size_t len = 0, i;
    json_t *p;
    json_array_foreach(parts, i, p) len += json_string_length(json_object_get(p, "text")) + 1;
    char *s = malloc(len + 1), *w = s;
    if (!s)
        return NULL;
    json_array_foreach(parts, i, p) {
        json_t *t = json_object_get(p, "text");
        if (w != s)
            *w++ = '\n';
        memcpy(w, json_string_value(t) ? json_string_value(t) : "", json_string_length(t));
        w += json_string_length(t);
    }
    json_t *out = json_stringn(s, (size_t)(w - s));
    free(s);
    return out;
}

int srv_chat_join_parts(srv *S, const char *tmpl, char **messages_json)
{
    /* the messages as jansson writes them compact: no list, nothing to do */
    if (!strstr(*messages_json, "\"content\":["))
        return 0;
    json_t *msgs = json_loads(*messages_json, 0, NULL);
    if (!json_is_array(msgs) || !has_parts(msgs) || reads_parts(S, tmpl)) {
        json_decref(msgs);
        return 0;
    }
    size_t i;
    json_t *m;
    int rc = 0;
    json_array_foreach(msgs, i, m) {
        json_t *c = json_object_get(m, "content");
        json_t *s = json_is_array(c) ? joined(c) : NULL;
        if (json_is_array(c) && (!s || json_object_set_new(m, "content", s)))
            rc = -1;
    }
    char *text = rc ? NULL : json_dumps(msgs, JSON_COMPACT);
    json_decref(msgs);
    if (!text)
        return -1;
    free(*messages_json);
    *messages_json = text;
    return 0;
}
