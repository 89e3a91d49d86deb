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
    return (hx_chat_render_options){.add_generation_prompt = 1, .continue_final = 1};
}

/* Renders into a render-owned string; *prefill is the continued message's text. */
static hx_status render(const char *tmpl, const hx_chat_render_options *o, hx_jinja_render **out,
                        const char **text, size_t *len, const char **prefill)
{
    hx_jinja_template *t = NULL;
    hx_jinja_render *r = NULL;
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
    int add_gen = o->add_generation_prompt;
    *prefill = NULL;
    /* llama-server's prefill: a last assistant message is taken out, the
     * rest rendered with the generation prompt, and its text appended, so
     * the model continues it rather than answering it afresh. */
    if (s == HX_OK && o->continue_final) {
        s = hx_jinja_pop_last(r, "messages", "assistant", prefill);
        if (s == HX_OK && *prefill)
            add_gen = 1;
    }
    if (s == HX_OK)
        s = hx_jinja_set_bool(r, "add_generation_prompt", add_gen);
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

static hx_status chat_render(const char *tmpl, const hx_chat_render_options *o, char *buf, size_t cap, size_t *len)
{
    if (!tmpl || !o || !o->messages || (!buf && cap) || !len)
        return hx_error(HX_ERR_INVALID_ARG, "hx_chat_render: NULL argument");
    *len = 0;
    hx_jinja_render *r = NULL;
    const char *text, *prefill;
    size_t n;
    hx_status s = render(tmpl, o, &r, &text, &n, &prefill);
    if (s != HX_OK)
        return s;
    size_t extra = prefill ? strlen(prefill) : 0;
    *len = n + extra;
    if (*len >= cap) {
        if (cap)
            buf[0] = '\0';
        hx_jinja_render_free(r);
        return hx_error(HX_ERR_RANGE, "hx_chat_render: %zu bytes and a NUL do not fit in %zu", *len, cap);
    }
    memcpy(buf, text, n);
    if (extra)
        memcpy(buf + n, prefill, extra);
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
