/* hx_chat_render: a conversation (JSON, as the OpenAI API and
 * apply_chat_template take it) through a Jinja chat template, with the
 * variables Hugging Face's apply_chat_template passes (messages, tools,
 * add_generation_prompt, bos_token, eos_token, and any extra ones), and
 * llama-server's continuation of a last assistant message. */
#include <stdlib.h>
#include <string.h>

#include "hetero.h"
#include "runtime/error.h"
#include "text/jinja.h"
#include "text/jinja_impl.h"

hx_chat_render_options hx_chat_render_options_default(void)
{
    return (hx_chat_render_options){.add_generation_prompt = 1, .continue_final = HX_CONTINUE_AUTO};
}

/* Renders into a render-owned string.  With `pop`, a last assistant
 * message (without tool calls) is taken out first (*m), and the rest
 * rendered with the generation prompt, or without it (gen 0: where that
 * prompt starts). */
static hx_status render(const char *tmpl, const hx_chat_render_options *o, int pop, int gen, hx_jinja_render **out,
                        const char **text, size_t *len, hx_jinja_popped *m)
{
    hx_jinja_template *t = NULL;
    hx_jinja_render *r = NULL;
    *m = (hx_jinja_popped){0};
    hx_status s = hx_jinja_parse(tmpl, strlen(tmpl), &t);
    if (s == HX_OK)
        s = hx_jinja_render_new(t, NULL, &r);
    if (s == HX_OK && o->now)
        hx_jinja_set_now(r, (time_t)o->now);
    if (s == HX_OK && o->extra)
        s = hx_jinja_set_json_members(r, o->extra, strlen(o->extra));
    if (s == HX_OK)
        s = hx_jinja_set_json(r, "messages", o->messages, strlen(o->messages));
    /* apply_chat_template passes tools and documents, None when there are none. */
    if (s == HX_OK)
        s = o->tools ? hx_jinja_set_json(r, "tools", o->tools, strlen(o->tools)) : hx_jinja_set_json(r, "tools", "null", 4);
    if (s == HX_OK)
        s = hx_jinja_set_json(r, "documents", "null", 4);
    if (s == HX_OK)
        s = hx_jinja_set_str(r, "bos_token", o->bos_token ? o->bos_token : "");
    if (s == HX_OK)
        s = hx_jinja_set_str(r, "eos_token", o->eos_token ? o->eos_token : "");
    if (s == HX_OK && pop)
        s = hx_jinja_pop_last(r, "messages", "assistant", m);
    if (s == HX_OK)
        s = hx_jinja_set_bool(r, "add_generation_prompt", m->content ? gen : o->add_generation_prompt);
    if (s == HX_OK)
        s = hx_jinja_run(r, text, len);
    /* The tree is only read while rendering: freed now, the render keeps the text. */
    hx_jinja_free(t);
    if (s != HX_OK) {
        hx_jinja_render_free(r);
        return s;
    }
    *out = r;
    return HX_OK;
}

/* How much of the generation prompt `text` (n bytes) a continuation
 * keeps: up to the thought's start tag it opens, found after where the
 * prompt starts (the render without it); all of it when it opens none. */
static hx_status kept_prompt(const char *tmpl, const hx_chat_render_options *o, const char *text, size_t n,
                             const char *start, size_t *keep)
{
    hx_jinja_render *bare = NULL;
    const char *b;
    size_t n0;
    hx_jinja_popped m;
    hx_status s = render(tmpl, o, 1, 0, &bare, &b, &n0, &m);
    if (s != HX_OK)
        return s;
    const char *tag = strstr(text + (n0 <= n && !memcmp(text, b, n0) ? n0 : n), start);
    *keep = tag ? (size_t)(tag - text) : n;
    hx_jinja_render_free(bare);
    return HX_OK;
}

/* llama-server's continuation of a last assistant message (hx_continue):
 * the parts that follow the kept prompt. */
static hx_status continuation(const char *tmpl, const hx_chat_render_options *o, const hx_jinja_popped *m,
                              const char *text, size_t n, size_t *keep, const char *parts[4])
{
    const char *start = NULL, *end = NULL;
    const int tags = hx_reasoning_tags(tmpl, &start, &end);
    const int thought_only = o->continue_final == HX_CONTINUE_THOUGHT ||
                             (o->continue_final == HX_CONTINUE_AUTO && m->thought[0] && !m->content[0]);
    if (thought_only && !tags)
        return hx_error(HX_ERR_INVALID_ARG, "continuing the last message's thought: the chat template writes no "
                        "thought tags, so there is no thought to continue");
    *keep = n;
    hx_status s = tags ? kept_prompt(tmpl, o, text, n, start, keep) : HX_OK;
    parts[0] = tags ? start : "";
    parts[1] = tags ? m->thought : "";
    parts[2] = tags && !thought_only ? end : "";
    parts[3] = thought_only ? "" : m->content;
    return s;
}

static hx_status chat_render(const char *tmpl, const hx_chat_render_options *o, char *buf, size_t cap, size_t *len)
{
    if (!tmpl || !o || !o->messages || (!buf && cap) || !len)
        return hx_error(HX_ERR_INVALID_ARG, "hx_chat_render: NULL argument");
    if (o->continue_final < HX_CONTINUE_NONE || o->continue_final > HX_CONTINUE_THOUGHT)
        return hx_error(HX_ERR_INVALID_ARG, "hx_chat_render: continue_final %d is not an hx_continue",
                        o->continue_final);
    *len = 0;
    hx_jinja_render *r = NULL;
    const char *text, *parts[4] = {"", "", "", ""};
    size_t n, keep;
    hx_jinja_popped m;
    hx_status s = render(tmpl, o, o->continue_final != HX_CONTINUE_NONE, 1, &r, &text, &n, &m);
    if (s != HX_OK)
        return s;
    if (m.tool_calls && o->continue_final > HX_CONTINUE_AUTO)
        s = hx_error(HX_ERR_INVALID_ARG, "Cannot continue an assistant message that contains tool calls.");
    keep = n;
    if (s == HX_OK && m.content)
        s = continuation(tmpl, o, &m, text, n, &keep, parts);
    if (s != HX_OK) {
        hx_jinja_render_free(r);
        return s;
    }
    *len = keep;
    for (int i = 0; i < 4; i++)
        *len += strlen(parts[i]);
    if (*len >= cap) {
        if (cap)
            buf[0] = '\0';
        hx_jinja_render_free(r);
        return hx_error(HX_ERR_RANGE, "hx_chat_render: %zu bytes and a NUL do not fit in %zu", *len, cap);
    }
    memcpy(buf, text, keep);
    for (size_t i = 0, at = keep; i < 4; at += strlen(parts[i]), i++)
        memcpy(buf + at, parts[i], strlen(parts[i]));
    buf[*len] = '\0';
    hx_jinja_render_free(r);
    return HX_OK;
}

hx_status hx_chat_render(const char *tmpl, const hx_chat_render_options *o, char *buf, size_t cap, size_t *len)
{
    hx_api_enter();
    return hx_api_leave(chat_render(tmpl, o, buf, cap, len));
}

/* ---- plain messages for the built-in families ---- */

static hx_status plain_messages(const char *messages, hx_chat_message **msgs, size_t *n, char **storage)
{
    if (!messages || !msgs || !n || !storage)
        return hx_error(HX_ERR_INVALID_ARG, "hx_chat_plain_messages: NULL argument");
    *msgs = NULL, *n = 0, *storage = NULL;
    jr *r = calloc(1, sizeof *r);
    if (!r)
        return hx_error(HX_ERR_NO_MEMORY, "chat messages");
    r->lim = hx_jinja_limits_default();
    r->arena.cap = r->lim.max_memory;
    hx_status s = HX_OK;
    if (setjmp(r->jmp)) {
        s = hx_error(r->err, "chat messages: %s", r->msg);
        goto out;
    }
    jv v;
    const char *err = NULL;
    if (!jv_parse_json(r, messages, strlen(messages), &v, &err)) {
        s = hx_error(HX_ERR_FORMAT, "chat messages: not JSON: %s", err);
        goto out;
    }
    if (v.t != JV_LIST) {
        s = hx_error(HX_ERR_FORMAT, "chat messages: a JSON array expected, not %s", jv_type_name(v));
        goto out;
    }
    jlist *l = v.u.l;
    jv *texts = jr_alloc(r, (l->n + 1) * sizeof *texts), *roles = jr_alloc(r, (l->n + 1) * sizeof *roles);
    size_t total = 0;
    for (size_t i = 0; i < l->n; i++) {
        jv m = l->v[i];
        jv *role = m.t == JV_DICT ? jd_get(m.u.d, "role") : NULL, *c = m.t == JV_DICT ? jd_get(m.u.d, "content") : NULL;
        if (!role || role->t != JV_STR) {
            s = hx_error(HX_ERR_INVALID_ARG, "chat message %zu has no string 'role'", i);
            goto out;
        }
        jbuf b = {0};
        if (c && c->t == JV_STR) {
            jb_put(r, &b, c->u.s->s, c->u.s->len);
        } else if (c && c->t == JV_LIST) {
            for (size_t k = 0; k < c->u.l->n; k++) {
                jv part = c->u.l->v[k];
                jv *type = part.t == JV_DICT ? jd_get(part.u.d, "type") : NULL;
                jv *text = part.t == JV_DICT ? jd_get(part.u.d, "text") : NULL;
                if (!type || type->t != JV_STR || strcmp(type->u.s->s, "text") || !text || text->t != JV_STR) {
                    s = hx_error(HX_ERR_INVALID_ARG, "chat message %zu: content part %zu is not text", i, k);
                    goto out;
                }
                jb_put(r, &b, text->u.s->s, text->u.s->len);
            }
        } else if (c && c->t != JV_NONE) {
            s = hx_error(HX_ERR_INVALID_ARG, "chat message %zu: content is a %s, not text", i, jv_type_name(*c));
            goto out;
        }
        texts[i] = jb_value(r, &b);
        roles[i] = *role;
        total += texts[i].u.s->len + roles[i].u.s->len + 2;
    }
    *msgs = calloc(l->n ? l->n : 1, sizeof **msgs);
    *storage = malloc(total + 1);
    if (!*msgs || !*storage) {
        free(*msgs), free(*storage);
        *msgs = NULL, *storage = NULL;
        s = hx_error(HX_ERR_NO_MEMORY, "chat messages: %zu bytes", total);
        goto out;
    }
    char *w = *storage;
    for (size_t i = 0; i < l->n; i++) {
        memcpy(w, roles[i].u.s->s, roles[i].u.s->len + 1);
        (*msgs)[i].role = w;
        w += roles[i].u.s->len + 1;
        memcpy(w, texts[i].u.s->s, texts[i].u.s->len + 1);
        (*msgs)[i].content = w;
        w += texts[i].u.s->len + 1;
    }
    *n = l->n;
out:
    ja_free(&r->arena);
    free(r);
    return s;
}

hx_status hx_chat_plain_messages(const char *messages, hx_chat_message **msgs, size_t *n, char **storage)
{
    return plain_messages(messages, msgs, n, storage);
}
