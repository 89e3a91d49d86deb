/* A model's chat templates: the default one and the named ones of its
 * GGUF (tokenizer.chat_template.NAME, e.g. tool_use), read at load; and
 * hx_model_chat_render, a conversation rendered as the model's prompt with
 * its BOS and EOS text, as llama.cpp's common_chat_templates_apply does. */
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "text/tokenizer.h"
#include "runtime/error.h"
#include "runtime/handle.h"
#include "text/jinja.h"

#define NAMED_PREFIX "tokenizer.chat_template."

hx_status hx_model_read_named_templates(hx_model *m)
{
    uint64_t n = hx_gguf_key_count(m->gguf);
    for (uint64_t i = 0; i < n; i++) {
        const char *key = hx_gguf_key_name(m->gguf, i);
        if (!key || strncmp(key, NAMED_PREFIX, strlen(NAMED_PREFIX)) || !key[strlen(NAMED_PREFIX)])
            continue;
        const char *t;
        uint64_t len;
        hx_status s = hx_gguf_get_str(m->gguf, key, &t, &len);
        if (s)
            return hx_error_context(s, "%s", key);
        hx_named_template *nt = realloc(m->named_templates, (m->n_named_templates + 1) * sizeof *nt);
        if (!nt)
            return hx_error(HX_ERR_NO_MEMORY, "%s", key);
        m->named_templates = nt;
        nt += m->n_named_templates;
        nt->name = strdup(key + strlen(NAMED_PREFIX));
        nt->source = malloc(len + 1);
        if (!nt->name || !nt->source) {
            free(nt->name);
            free(nt->source);
            return hx_error(HX_ERR_NO_MEMORY, "%s: %llu bytes", key, (unsigned long long)len);
        }
        memcpy(nt->source, t, len);
        nt->source[len] = '\0';
        m->n_named_templates++;
    }
    return HX_OK;
}

void hx_model_free_named_templates(hx_model *m)
{
    for (size_t i = 0; i < m->n_named_templates; i++) {
        free(m->named_templates[i].name);
        free(m->named_templates[i].source);
    }
    free(m->named_templates);
    m->named_templates = NULL;
    m->n_named_templates = 0;
}

const char *hx_model_chat_template_named(const hx_model *m, const char *name)
{
    if (hx_handle_check(m, HX_HANDLE_MODEL, "hx_model_chat_template_named") != HX_OK)
        return NULL;
    if (!name)
        return m->chat_template;
    for (size_t i = 0; i < m->n_named_templates; i++)
        if (!strcmp(m->named_templates[i].name, name))
            return m->named_templates[i].source;
    return NULL;
}

/* The text of special token `id` ("" when the model has none). */
static char *token_text(const hx_model *m, int32_t id)
{
    size_t len = 0;
    if (id < 0 || hx_tokenizer_token_to_piece(m->tok, id, 1, NULL, 0, &len) != HX_ERR_RANGE)
        return strdup("");
    char *s = malloc(len + 1);
    if (s && hx_tokenizer_token_to_piece(m->tok, id, 1, s, len + 1, &len) != HX_OK) {
        free(s);
        return strdup("");
    }
    return s;
}

static hx_status render_builtin(const char *family, const hx_chat_render_options *o, char *buf, size_t cap,
                                size_t *len)
{
    hx_chat_message *msgs = NULL;
    size_t n = 0;
    char *storage = NULL;
    hx_status s = hx_chat_plain_messages(o->messages, &msgs, &n, &storage);
    /* A last assistant message is continued here too: the rest with the
     * assistant's opening, then its text. */
    const char *prefill = NULL;
    int add = o->add_generation_prompt;
    if (s == HX_OK && o->continue_final == HX_CONTINUE_THOUGHT)
        s = hx_error(HX_ERR_INVALID_ARG, "continuing the last message's thought: the built-in %s format writes no "
                     "thought tags", family);
    if (s == HX_OK && o->continue_final != HX_CONTINUE_NONE && n && !strcmp(msgs[n - 1].role, "assistant")) {
        prefill = msgs[--n].content;
        add = 1;
    }
    size_t extra = prefill ? strlen(prefill) : 0, need = 0;
    if (s == HX_OK) {
        s = hx_chat_apply_template(family, msgs, n, add, buf, cap > extra ? cap - extra : 0, &need);
        *len = need + extra;
        if (s == HX_OK) {
            memcpy(buf + need, prefill ? prefill : "", extra + 1);
        } else if (s == HX_ERR_RANGE) {
            if (cap)
                buf[0] = '\0';
            s = hx_error(HX_ERR_RANGE, "hx_model_chat_render: %zu bytes and a NUL do not fit in %zu", *len, cap);
        }
    }
    free(msgs);
    free(storage);
    return s;
}

static hx_status model_chat_render(const hx_model *m, const char *tmpl, const hx_chat_render_options *o, char *buf,
                                   size_t cap, size_t *len)
{
    hx_status s = hx_handle_check(m, HX_HANDLE_MODEL, "hx_model_chat_render");
    if (s)
        return s;
    if (!o || !o->messages || (!buf && cap) || !len)
        return hx_error(HX_ERR_INVALID_ARG, "hx_model_chat_render: NULL argument");
    if (!m->tok)
        return hx_error(HX_ERR_UNSUPPORTED, "hx_model_chat_render: the model has no tokenizer (shapes only)");
    *len = 0;
    if (!tmpl)
        tmpl = m->chat_template ? m->chat_template : "chatml";
    const char *family = NULL;
    /* A family name, or --no-jinja: the built-in list. */
    if (o->no_jinja || !strchr(tmpl, '{')) {
        if (hx_chat_template_name(tmpl, &family) != HX_OK)
            return hx_error_context(HX_ERR_UNSUPPORTED, "hx_model_chat_render");
        return render_builtin(family, o, buf, cap, len);
    }
    hx_chat_render_options ro = *o;
    char *bos = o->bos_token ? NULL : token_text(m, hx_tokenizer_bos(m->tok));
    char *eos = o->eos_token ? NULL : token_text(m, hx_tokenizer_eos(m->tok));
    if ((!o->bos_token && !bos) || (!o->eos_token && !eos)) {
        free(bos);
        free(eos);
        return hx_error(HX_ERR_NO_MEMORY, "hx_model_chat_render: token text");
    }
    if (!o->bos_token)
        ro.bos_token = bos;
    if (!o->eos_token)
        ro.eos_token = eos;
    /* Rendered whole first: the BOS and EOS llama.cpp drops are known only then. */
    size_t need = 0;
    char *text = NULL;
    s = hx_chat_render(tmpl, &ro, NULL, 0, &need);
    if (s == HX_ERR_RANGE) {
        if (!(text = malloc(need + 1)))
            s = hx_error(HX_ERR_NO_MEMORY, "hx_model_chat_render: %zu bytes", need);
        else
            s = hx_chat_render(tmpl, &ro, text, need + 1, &need);
    }
    if (s == HX_OK) {
        /* As llama.cpp: the tokenizer adds BOS (EOS) itself, so one the
         * text starts (ends) with goes, lest the prompt hold two. */
        const char *start = text;
        size_t n = need, bl = strlen(ro.bos_token), el = strlen(ro.eos_token);
        if (hx_tokenizer_wants_bos(m->tok) && bl && n >= bl && !memcmp(start, ro.bos_token, bl))
            start += bl, n -= bl;
        if (hx_tokenizer_wants_eos(m->tok) && el && n >= el && !memcmp(start + n - el, ro.eos_token, el))
            n -= el;
        *len = n;
        if (n >= cap) {
            if (cap)
                buf[0] = '\0';
            s = hx_error(HX_ERR_RANGE, "hx_model_chat_render: %zu bytes and a NUL do not fit in %zu", n, cap);
        } else {
            memcpy(buf, start, n);
            buf[n] = '\0';
        }
    }
    free(text);
    free(bos);
    free(eos);
    return s;
}

hx_status hx_model_chat_render(const hx_model *m, const char *tmpl, const hx_chat_render_options *o, char *buf,
                               size_t cap, size_t *len)
{
    hx_api_enter();
    return hx_api_leave(model_chat_render(m, tmpl, o, buf, cap, len));
}
