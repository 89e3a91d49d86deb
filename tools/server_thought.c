/* A chat answer's thought as reasoning_content (llama-server's
 * --reasoning-format): which tags a request's template thinks between,
 * whether its prompt opened the thought, and each choice's text split at
 * them (hx_reasoning_split) into reasoning_content and the answer that
 * the content and the tool calls are read from, whole or streamed. */
#include <string.h>

#include "tools/server.h"

static const char *const format_names[] = {"none", "auto", "deepseek", "deepseek-legacy"};

int srv_reasoning_format_from_name(const char *name, int *out)
{
    for (int i = 0; name && i < (int)(sizeof format_names / sizeof format_names[0]); i++)
        if (!strcmp(name, format_names[i])) {
            *out = i;
            return 0;
        }
    return -1;
}

int srv_thought_opens(const char *prompt, const char *start)
{
    size_t n = prompt ? strlen(prompt) : 0, k = strlen(start);
    while (n && (prompt[n - 1] == ' ' || prompt[n - 1] == '\n' || prompt[n - 1] == '\r' || prompt[n - 1] == '\t'))
        n--;
    return n >= k && !memcmp(prompt + n - k, start, k);
}

const char *srv_thought_last_tag(const char *prompt, const char *start)
{
    const char *tag = prompt ? strstr(prompt, start) : NULL, *next;
    while (tag && (next = strstr(tag + 1, start)))
        tag = next;
    return tag;
}

int srv_thought_setup(srv *S, json_t *body, const char *tmpl, const char *prompt, int continued, int grammar,
                      int stream, srv_thought *out, char *msg, size_t cap)
{
    memset(out, 0, sizeof *out);
    int format = S->reasoning_format;
    json_t *v = json_object_get(body, "reasoning_format");
    if (v && !json_is_null(v) &&
        (!json_is_string(v) || srv_reasoning_format_from_name(json_string_value(v), &format))) {
        snprintf(msg, cap, "'reasoning_format' must be \"none\", \"auto\", \"deepseek\" or \"deepseek-legacy\"");
        return -1;
    }
    /* the tags the template writes; deepseek names its own where it writes none */
    const char *start = NULL, *end = NULL;
    if (!(S->jinja && hx_reasoning_tags(tmpl, &start, &end)) && format != SRV_REASONING_DEEPSEEK &&
        format != SRV_REASONING_LEGACY)
        return 0;
    start = start ? start : "<think>";
    end = end ? end : "</think>";
    /* A grammar shapes the text from its first token: what it writes is
     * the answer, even where the prompt opened a thought. */
    const int opened = !grammar && (continued || srv_thought_opens(prompt, start));
    /* Where the thought stays in content (none, deepseek-legacy), content
     * begins with what the prompt wrote of it, its tag and the white space
     * after (llama.cpp's parser reads the generation prompt's thought as
     * the answer's start): a client that reads <think> in content sees
     * both tags. */
    if (opened && !continued && (format == SRV_REASONING_NONE || format == SRV_REASONING_LEGACY)) {
        const char *tag = srv_thought_last_tag(prompt, start);
        if (tag && strlen(tag) < sizeof out->prefix)
            snprintf(out->prefix, sizeof out->prefix, "%s", tag);
    }
    if (format == SRV_REASONING_NONE)
        return 0;
    out->start = start;
    out->end = end;
    out->opened = opened;
    /* deepseek-legacy keeps the thought in content too; streamed, it is
     * content only (as llama.cpp streamed it), so nothing is split */
    out->legacy = format == SRV_REASONING_LEGACY;
    if (out->legacy && stream)
        out->start = out->end = NULL;
    return 0;
}

void srv_thought_split(const srv_job *j, const srv_choice *ch, int partial, hx_reasoning_span *sp)
{
    const char *text = ch->text ? ch->text : "";
    memset(sp, 0, sizeof *sp);
    if (!j->thought.start || hx_reasoning_split(text, ch->text_len, j->thought.start, j->thought.end,
                                                j->thought.opened, partial, sp) != HX_OK) {
        sp->content_len = ch->text_len; /* no thought read: the whole text is the answer */
        return;
    }
    if (j->thought.legacy) { /* the whole text stays the answer */
        sp->content_at = 0;
        sp->content_len = ch->text_len;
    }
}

json_t *srv_thought_message(srv_job *j, srv_choice *ch, int final)
{
    const int partial = j->stream && !final;
    hx_reasoning_span sp;
    srv_thought_split(j, ch, partial, &sp);
    json_t *m;
    if (j->tools) { /* content and calls, read from the answer (server_tools.c) */
        m = srv_tools_message(j, ch, final);
        if (!m && (!j->stream || sp.reasoning_len <= ch->sent_reasoning))
            return NULL;
        m = m ? m : json_object();
    } else {
        /* the content: the prompt's part of the thought (when it stays in
         * content), then the answer; streamed, from what was sent */
        const size_t pl = strlen(j->thought.prefix), total = pl + sp.content_len;
        const size_t from = j->stream ? ch->sent_content : 0;
        m = j->stream ? json_object() : json_pack("{s:s}", "role", "assistant");
        char *c = total > from || !j->stream ? malloc(total - from + 1) : NULL;
        if (c) {
            for (size_t i = from; i < total; i++)
                c[i - from] = i < pl ? j->thought.prefix[i] : ch->text[sp.content_at + i - pl];
            json_object_set_new(m, "content", srv_utf8_string(c, total - from));
            ch->sent_content = total;
        }
        free(c);
    }
    if (!m)
        return NULL;
    if (!j->stream && sp.reasoning_len)
        json_object_set_new(m, "reasoning_content", srv_utf8_string(ch->text + sp.reasoning_at, sp.reasoning_len));
    else if (j->stream && sp.reasoning_len > ch->sent_reasoning) {
        json_object_set_new(m, "reasoning_content", srv_utf8_string(ch->text + sp.reasoning_at + ch->sent_reasoning,
                                                                 sp.reasoning_len - ch->sent_reasoning));
        ch->sent_reasoning = sp.reasoning_len;
    }
    if (j->stream && !json_object_size(m) && !final && !j->logprobs) {
        json_decref(m);
        return NULL; /* nothing to say yet: a tag or a character is being written */
    }
    return m;
}

uint32_t srv_thought_tokens(const srv_job *j, const srv_choice *ch)
{
    hx_reasoning_span sp;
    srv_thought_split(j, ch, 0, &sp);
    if (!sp.has_reasoning)
        return 0;
    const size_t answer = sp.closed ? sp.content_at : ch->text_len;
    uint32_t n = 0;
    for (size_t i = 0; i < ch->n_pieces && ch->pieces[i].text_at < answer; i++)
        n++;
    return n;
}
