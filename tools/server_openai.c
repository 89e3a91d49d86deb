/* hetero-server's OpenAI bodies: /v1/completions and /v1/chat/completions
 * requests checked field by field (a wrong type or a value out of range is
 * a 400 naming the field; a field that would change the answer and that
 * hetero does not do is refused, not ignored), their engine requests, and
 * the responses and stream chunks; /tokenize and /detokenize as
 * llama-server has them. */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/server.h"

/* A 400 waiting to be sent: the first problem found. */
typedef struct {
    char msg[384];
    const char *code;
} bad;

static int fail(bad *b, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(bad *b, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->msg, sizeof b->msg, fmt, ap);
    va_end(ap);
    b->code = code;
    return -1;
}

/* Optional number field in [lo, hi]; absent or null leaves *out. */
static int get_num(json_t *o, const char *key, double lo, double hi, double *out, bad *b)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v))
        return fail(b, "invalid_type", "'%s' must be a number", key);
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi))
        return fail(b, "invalid_value", "'%s' is %g; it must be in [%g, %g]", key, x, lo, hi);
    *out = x;
    return 0;
}

static int get_int(json_t *o, const char *key, long long lo, long long hi, long long *out, bad *b)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v))
        return fail(b, "invalid_type", "'%s' must be an integer", key);
    long long x = json_integer_value(v);
    if (x < lo || x > hi)
        return fail(b, "invalid_value", "'%s' is %lld; it must be in [%lld, %lld]", key, x, lo, hi);
    *out = x;
    return 0;
}

static int get_bool(json_t *o, const char *key, int *out, bad *b)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v))
        return fail(b, "invalid_type", "'%s' must be a boolean", key);
    *out = json_is_true(v);
    return 0;
}

/* What one completion request asks for. */
typedef struct {
    hx_request r;
    const char *stop[SRV_MAX_STOP];
    int n, stream, include_usage, logprobs;
    int id_slot;               /* llama-server's: the slot it names (server_lanes.c), -1 none */
    char *prompt;              /* the text (chat: formatted), owned */
    int32_t *tokens;           /* or the ids, owned */
    size_t n_tokens;
    const char *salt;          /* cache_salt: a narrower prefix-cache partition */
    srv_sampling_store store;  /* logit biases, DRY breakers, sampler order */
    char *grammar;             /* GBNF the answer must follow (grammar, json_schema, response_format), owned */
    srv_tools *tools;          /* the tools offered (chat), owned */
    int thought_continued;     /* the prompt ends inside the last message's thought (continue_final_message) */
} parsed;

static int parse_sampling(srv *S, json_t *o, parsed *p, int chat, bad *b)
{
    /* OpenAI's defaults, or the server's (-n, --temp, --seed). */
    const long long n_ctx = (long long)S->info.n_ctx;
    double temp = S->temperature >= 0 ? S->temperature : 1, top_p = 1, min_p = 0, rep = 1, pres = 0, freq = 0;
    long long top_k = 0, seed = S->seed, n = 1, last_n = 64, prio = 0, n_predict = 0;
    long long max_tokens = S->n_predict > 0 ? S->n_predict : S->n_predict < 0 || chat ? n_ctx : 16;
    if (get_num(o, "temperature", 0, 2, &temp, b) || get_num(o, "top_p", 0, 1, &top_p, b) ||
        get_num(o, "min_p", 0, 1, &min_p, b) || get_int(o, "top_k", 0, 1 << 20, &top_k, b) ||
        get_num(o, "repeat_penalty", 0.01, 10, &rep, b) || get_int(o, "repeat_last_n", 0, 1 << 20, &last_n, b) ||
        get_num(o, "presence_penalty", -2, 2, &pres, b) || get_num(o, "frequency_penalty", -2, 2, &freq, b) ||
        get_int(o, "seed", INT64_MIN, INT64_MAX, &seed, b) || get_int(o, "n_cmpl", 1, SRV_MAX_N, &n, b) ||
        get_int(o, "n", 1, SRV_MAX_N, &n, b) || get_int(o, "priority", INT32_MIN, INT32_MAX, &prio, b))
        return -1;
    /* llama-server's n_predict (-1: up to the context), then OpenAI's names. */
    if (get_int(o, "n_predict", -1, INT32_MAX, &n_predict, b))
        return -1;
    if (n_predict == -1)
        max_tokens = n_ctx;
    else if (json_object_get(o, "n_predict") && !json_is_null(json_object_get(o, "n_predict")))
        max_tokens = n_predict;
    if (get_int(o, "max_tokens", LLONG_MIN, LLONG_MAX, &max_tokens, b) ||
        get_int(o, "max_completion_tokens", LLONG_MIN, LLONG_MAX, &max_tokens, b))
        return -1;
    if (max_tokens <= 0)
        return fail(b, "invalid_value", "'max_tokens' (or 'n_predict') is %lld; it must be at least 1 (hetero-server "
                    "always generates)", max_tokens);
    if (top_p <= 0)
        return fail(b, "invalid_value", "'top_p' is 0; it must be in (0, 1]");
    hx_sampling *s = &p->r.sampling;
    s->temperature = (float)temp;
    s->top_p = (float)top_p;
    s->min_p = (float)min_p;
    s->top_k = (int32_t)top_k;
    s->repeat_penalty = (float)rep;
    s->repeat_last_n = (int32_t)last_n;
    s->frequency_penalty = (float)freq;
    s->presence_penalty = (float)pres;
    if (seed >= 0)
        s->seed = (uint64_t)seed;
    else
        s->seed = (uint64_t)(srv_now() * 1e9) * 1000003u ^ (uint64_t)(uintptr_t)p;
    p->r.max_tokens = max_tokens > UINT32_MAX ? UINT32_MAX : (uint32_t)max_tokens;
    p->r.priority = (int32_t)prio;
    p->n = (int)n;
    long long slot = -1;
    if (get_int(o, "id_slot", -1, INT32_MAX, &slot, b))
        return -1;
    if (slot >= (long long)S->native.parallel)
        return fail(b, "invalid_value", "'id_slot' is %lld; the server has %u slots (-np), 0 to %u", slot,
                    S->native.parallel, S->native.parallel - 1);
    p->id_slot = (int)slot;
    json_t *stop = json_object_get(o, "stop");
    if (json_is_string(stop)) {
        p->stop[0] = json_string_value(stop);
        s->n_stop = 1;
    } else if (json_is_array(stop)) {
        if (json_array_size(stop) > SRV_MAX_STOP)
            return fail(b, "invalid_value", "'stop' has %zu strings; at most %d", json_array_size(stop), SRV_MAX_STOP);
        for (size_t i = 0; i < json_array_size(stop); i++) {
            json_t *v = json_array_get(stop, i);
            if (!json_is_string(v) || !json_string_length(v))
                return fail(b, "invalid_type", "'stop' must hold non-empty strings");
            p->stop[s->n_stop++] = json_string_value(v);
        }
    } else if (stop && !json_is_null(stop)) {
        return fail(b, "invalid_type", "'stop' must be a string or an array of strings");
    } else if (json_is_string(stop) && !json_string_length(stop)) {
        return fail(b, "invalid_value", "'stop' is empty");
    }
    s->stop = p->stop;
    int cache_prompt = 1; /* llama-server's: false keeps the prompt out of the prefix cache both ways */
    /* ignore_eos as llama-server's: end-of-generation tokens are never drawn. */
    if (get_bool(o, "stream", &p->stream, b) || get_bool(o, "ignore_eos", &s->ignore_eos, b) ||
        get_bool(o, "cache_prompt", &cache_prompt, b))
        return -1;
    if (srv_parse_sampling_extra(S, o, s, &p->store, b->msg, sizeof b->msg, &b->code))
        return -1;
    if (s->min_tokens > p->r.max_tokens)
        return fail(b, "invalid_value", "'min_tokens' is %u; it must be at most max_tokens (%u)", s->min_tokens,
                    p->r.max_tokens);
    p->r.no_prefix_cache = !cache_prompt;
    json_t *salt = json_object_get(o, "cache_salt");
    if (salt && !json_is_null(salt) && !json_is_string(salt))
        return fail(b, "invalid_type", "'cache_salt' must be a string");
    p->salt = json_string_value(salt);
    json_t *so = json_object_get(o, "stream_options");
    if (so && !json_is_null(so) && (!json_is_object(so) || get_bool(so, "include_usage", &p->include_usage, b)))
        return b->code ? -1 : fail(b, "invalid_type", "'stream_options' must be an object");
    int backend = 0; /* llama-server's backend sampling: where, not what (srv_native_backend_sampling) */
    if (get_bool(o, "backend_sampling", &backend, b))
        return -1;
    char why[160];
    if (backend && srv_native_backend_sampling(S, why, sizeof why))
        return fail(b, "unsupported_parameter", "'backend_sampling': %s", why);
    /* Fields that would change the answer, which hetero does not do. */
    return srv_refused_field(o, chat == SRV_NATIVE, chat == 1 || chat == SRV_ANTHROPIC || chat == SRV_RESPONSES, b->msg,
                             sizeof b->msg, &b->code);
}

/* A JSON Schema as the GBNF grammar hetero constrains decoding with. */
static int schema_grammar(json_t *schema, const char *field, parsed *p, bad *b)
{
    char *text = json_dumps(schema, JSON_COMPACT);
    size_t len = 0;
    hx_status st = text ? hx_json_schema_to_grammar(text, NULL, 0, &len) : HX_ERR_NO_MEMORY;
    if (st == HX_ERR_RANGE && (p->grammar = malloc(len + 1)))
        st = hx_json_schema_to_grammar(text, p->grammar, len + 1, &len);
    free(text);
    if (st == HX_ERR_INVALID_ARG)
        return fail(b, "invalid_value", "'%s': %s", field, hx_last_error());
    if (st)
        return fail(b, "server_error", "'%s': %s", field, hx_last_error());
    return 0;
}

/* Structured output: llama-server's `grammar` (GBNF) and `json_schema`,
 * and OpenAI's `response_format` (json_object, with llama-server's
 * optional `schema`; json_schema with `json_schema.schema`) — at most one. */
static int parse_grammar(json_t *o, parsed *p, bad *b)
{
    json_t *g = json_object_get(o, "grammar"), *js = json_object_get(o, "json_schema");
    json_t *rf = json_object_get(o, "response_format");
    const char *kind = NULL;
    if (rf && !json_is_null(rf)) {
        json_t *t = json_object_get(rf, "type");
        if (!json_is_object(rf) || !json_is_string(t))
            return fail(b, "invalid_type", "'response_format' must be an object with a 'type'");
        kind = json_string_value(t);
        if (!strcmp(kind, "text"))
            kind = NULL;
        else if (strcmp(kind, "json_object") && strcmp(kind, "json_schema"))
            return fail(b, "invalid_value", "'response_format.type' is '%s': text, json_object or json_schema", kind);
    }
    int have_g = g && !json_is_null(g) && !(json_is_string(g) && !json_string_length(g));
    int have_js = js && !json_is_null(js);
    if (have_g + have_js + (kind != NULL) > 1)
        return fail(b, "invalid_value", "give one of 'grammar', 'json_schema' and a JSON 'response_format'");
    if (have_g) {
        if (!json_is_string(g))
            return fail(b, "invalid_type", "'grammar' must be a string (GBNF)");
        return (p->grammar = strdup(json_string_value(g))) ? 0 : fail(b, "server_error", "out of memory");
    }
    if (have_js)
        return json_is_object(js) ? schema_grammar(js, "json_schema", p, b)
                                  : fail(b, "invalid_type", "'json_schema' must be an object");
    if (kind && !strcmp(kind, "json_object")) {
        json_t *schema = json_object_get(rf, "schema");
        if (schema && !json_is_null(schema))
            return schema_grammar(schema, "response_format.schema", p, b);
        json_t *any = json_pack("{s:s}", "type", "object");
        int rc = any ? schema_grammar(any, "response_format", p, b) : fail(b, "server_error", "out of memory");
        json_decref(any);
        return rc;
    }
    if (kind) {
        json_t *spec = json_object_get(rf, "json_schema"), *schema = json_object_get(spec, "schema");
        if (!json_is_object(spec) || !json_is_object(schema))
            return fail(b, "invalid_value", "'response_format' json_schema needs 'json_schema.schema', an object");
        return schema_grammar(schema, "response_format.json_schema.schema", p, b);
    }
    return 0;
}

/* A completion's prompt: a string, or token ids, or a one-element array of
 * either (several prompts in one request are refused). */
static int parse_prompt(json_t *o, parsed *p, bad *b)
{
    json_t *v = json_object_get(o, "prompt");
    if (json_is_array(v) && json_array_size(v) == 1 &&
        (json_is_string(json_array_get(v, 0)) || json_is_array(json_array_get(v, 0))))
        v = json_array_get(v, 0);
    else if (json_is_array(v) && json_array_size(v) > 1 &&
             (json_is_string(json_array_get(v, 0)) || json_is_array(json_array_get(v, 0))))
        return fail(b, "unsupported_parameter", "'prompt' holds %zu prompts; hetero-server answers one prompt per "
                    "request: send each in a request of its own", json_array_size(v));
    if (json_is_string(v)) {
        p->prompt = strdup(json_string_value(v));
        return p->prompt ? 0 : fail(b, "server_error", "out of memory");
    }
    if (!json_is_array(v) || !json_array_size(v))
        return fail(b, "invalid_type", v ? "'prompt' must be a string or an array of token ids (one prompt per request)"
                                         : "'prompt' is missing");
    p->n_tokens = json_array_size(v);
    if (!(p->tokens = malloc(sizeof *p->tokens * p->n_tokens)))
        return fail(b, "server_error", "out of memory");
    for (size_t i = 0; i < p->n_tokens; i++) {
        json_t *t = json_array_get(v, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > INT32_MAX)
            return fail(b, "invalid_type", "'prompt' element %zu is not a token id", i);
        p->tokens[i] = (int32_t)json_integer_value(t);
    }
    return 0;
}

/* A message's content: a string, or an array of {"type":"text","text":...}. */
static char *content_text(json_t *c, bad *b, size_t i)
{
    if (json_is_string(c))
        return strdup(json_string_value(c));
    if (!c || json_is_null(c)) /* absent: an assistant's tool calls alone (server_tools.c checks) */
        return strdup("");
    if (!json_is_array(c)) {
        fail(b, "invalid_type", "messages[%zu].content must be a string or an array of text parts", i);
        return NULL;
    }
    size_t len = 0;
    for (size_t k = 0; k < json_array_size(c); k++) {
        json_t *part = json_array_get(c, k), *t = json_object_get(part, "text");
        json_t *type = json_object_get(part, "type");
        if (!json_is_string(type) || strcmp(json_string_value(type), "text") || !json_is_string(t)) {
            fail(b, "unsupported_parameter", "messages[%zu].content[%zu]: only text parts are supported", i, k);
            return NULL;
        }
        len += json_string_length(t);
    }
    char *s = malloc(len + 1), *w = s;
    for (size_t k = 0; s && k < json_array_size(c); k++) {
        json_t *t = json_object_get(json_array_get(c, k), "text");
        memcpy(w, json_string_value(t), json_string_length(t));
        w += json_string_length(t);
    }
    if (s)
        *w = '\0';
    return s;
}

/* The template's text for the messages and options, malloc'd into *out. */
static int render_chat(srv *S, const char *tmpl, const hx_chat_render_options *ro, char **out, bad *b)
{
    size_t len = 0;
    if (hx_model_chat_render(S->m, tmpl, ro, NULL, 0, &len) != HX_ERR_RANGE)
        return fail(b, "chat_template", "the chat template cannot format this conversation: %s", hx_last_error());
    if (!(*out = malloc(len + 1)))
        return fail(b, "server_error", "out of memory");
    if (hx_model_chat_render(S->m, tmpl, ro, *out, len + 1, &len) != HX_OK) {
        free(*out);
        *out = NULL;
        return fail(b, "chat_template", "the chat template cannot format this conversation: %s", hx_last_error());
    }
    return 0;
}

/* The conversation through the chat template into p->prompt: the
 * messages, checked, go to the template as JSON (hx_model_chat_render),
 * where a last assistant message is continued, as llama-server does: its
 * content, or its thought (server_prefill.c decides which, hx_chat_render
 * writes it). */
static int parse_messages(srv *S, json_t *o, parsed *p, bad *b)
{
    json_t *msgs = json_object_get(o, "messages");
    /* An empty conversation is the template's generation prompt alone, as
     * llama-server takes it (OpenAI refuses it). */
    if (!json_is_array(msgs))
        return fail(b, msgs ? "invalid_type" : "missing_parameter",
                    msgs ? "'messages' must be an array" : "'messages' is missing");
    char pwhy[256];
    if (srv_chat_prefill(o, pwhy, sizeof pwhy))
        return fail(b, "invalid_value", "%s", pwhy);
    size_t n = json_array_size(msgs);
    json_t *plain = json_array();
    int rc = plain ? 0 : fail(b, "server_error", "out of memory");
    for (size_t i = 0; !rc && i < n; i++) {
        json_t *msg = json_array_get(msgs, i), *role = json_object_get(msg, "role");
        if (!json_is_object(msg) || !json_is_string(role)) {
            rc = fail(b, "invalid_type", "messages[%zu] must be an object with a string 'role'", i);
            break;
        }
        const char *r = json_string_value(role);
        /* Jinja templates read the messages as they are (tool results too); the built-in families know these roles. */
        if (strcmp(r, "system") && strcmp(r, "developer") && strcmp(r, "user") && strcmp(r, "assistant") &&
            (!S->jinja || strcmp(r, "tool"))) {
            rc = fail(b, "invalid_value", "messages[%zu].role '%s' is not system, user or assistant%s", i, r,
                      S->jinja ? " or tool" : "");
            break;
        }
        char *text = content_text(json_object_get(msg, "content"), b, i);
        if (!text) {
            rc = b->code ? -1 : fail(b, "server_error", "out of memory");
            break;
        }
        free(text);
        if (!S->jinja) {
            /* OpenAI's newer name for the system role, which the built-in families do not know */
            json_t *m = json_pack("{s:s, s:O}", "role", strcmp(r, "developer") ? r : "system", "content",
                                  json_object_get(msg, "content"));
            if (!m || json_array_append_new(plain, m))
                rc = fail(b, "server_error", "out of memory");
        }
    }
    hx_chat_render_options ro = hx_chat_render_options_default();
    if (!rc)
        rc = get_bool(o, "add_generation_prompt", &ro.add_generation_prompt, b); /* llama-server's, default true */
    /* vLLM's continue_final_message (server_prefill.c) */
    if (!rc && srv_chat_continue(o, ro.add_generation_prompt, pwhy, sizeof pwhy))
        rc = fail(b, "invalid_value", "%s", pwhy);
    /* The continued message: the template renderer continues it
     * (hx_continue), its content or its thought. */
    const int cont = rc ? SRV_CONTINUE_NONE : srv_chat_continuation(o);
    ro.continue_final = cont == SRV_CONTINUE_THOUGHT    ? HX_CONTINUE_THOUGHT
                        : cont == SRV_CONTINUE_CONTENT ? HX_CONTINUE_CONTENT
                                                       : HX_CONTINUE_NONE;
    if (cont == SRV_CONTINUE_THOUGHT && !S->jinja)
        rc = fail(b, "invalid_value", "'continue_final_message': continuing a thought needs a Jinja chat template");
    p->thought_continued = cont == SRV_CONTINUE_THOUGHT;
    /* Tools, and the messages as the template reads them (server_tools.c). */
    char *text = NULL;
    if (!rc && srv_tools_request(S, o, &p->tools, &text, b->msg, sizeof b->msg, &b->code))
        rc = -1;
    if (!rc && !text)
        text = json_dumps(plain, JSON_COMPACT);
    json_decref(plain);
    if (!rc && !text)
        rc = fail(b, "server_error", "out of memory");
    const char *tmpl = srv_tools_template(p->tools) ? srv_tools_template(p->tools) : S->chat_template;
    if (!rc && S->jinja && srv_chat_join_parts(S, tmpl, &text))
        rc = fail(b, "server_error", "out of memory");
    ro.messages = text;
    ro.tools = srv_tools_json(p->tools);
    ro.no_jinja = !S->jinja;
    int thinking = 1;
    char why[256];
    char *extra = !rc && S->jinja ? srv_chat_extra(S, o, &thinking, why, sizeof why) : NULL;
    if (!rc && S->jinja && !extra)
        rc = fail(b, "invalid_value", "%s", why);
    ro.extra = extra;
    if (!rc)
        rc = render_chat(S, tmpl, &ro, &p->prompt, b);
    if (!rc)
        srv_chat_close_thought(&p->prompt, thinking, tmpl);
    free(text);
    free(extra);
    return rc;
}

static int parse_logprobs(json_t *o, parsed *p, int chat, bad *b)
{
    long long top = 0, n_probs = 0;
    /* llama-server's post_sampling_probs: the probabilities of the
     * distribution each token was drawn from (hx_request.post_sampling_probs) */
    if (get_bool(o, "post_sampling_probs", &p->r.post_sampling_probs, b))
        return -1;
    /* llama-server's n_probs: that many alternatives per token, with the
     * token's own log-probability, in the endpoint's logprobs format. */
    if (get_int(o, "n_probs", 0, HX_ENGINE_MAX_TOP, &n_probs, b))
        return -1;
    if (n_probs > 0) {
        p->logprobs = 1;
        p->r.top_logprobs = (uint32_t)n_probs;
        json_t *lp = json_object_get(o, "logprobs"), *tl = json_object_get(o, "top_logprobs");
        if ((lp && !json_is_null(lp)) || (tl && !json_is_null(tl)))
            return fail(b, "invalid_value", "give 'n_probs' or 'logprobs', not both");
        return 0;
    }
    if (chat) {
        if (get_bool(o, "logprobs", &p->logprobs, b) || get_int(o, "top_logprobs", 0, HX_ENGINE_MAX_TOP, &top, b))
            return -1;
        if (top && !p->logprobs)
            return fail(b, "invalid_value", "'top_logprobs' needs 'logprobs': true");
    } else {
        long long lp = -1;
        if (get_int(o, "logprobs", 0, HX_ENGINE_MAX_TOP, &lp, b))
            return -1;
        p->logprobs = lp >= 0;
        top = lp > 0 ? lp : 0;
    }
    p->r.top_logprobs = (uint32_t)top;
    return 0;
}

/* Text as JSON, bytes that are not UTF-8 replaced by U+FFFD (a token's
 * piece may be part of a character). */
json_t *srv_utf8_string(const char *s, size_t n)
{
    json_t *v = json_stringn(s, n);
    if (v)
        return v;
    char *w = malloc(3 * n + 1);
    size_t k = 0;
    for (size_t i = 0; w && i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        json_t *one = len && i + len <= n ? json_stringn(s + i, (size_t)len) : NULL;
        if (one) {
            memcpy(w + k, s + i, (size_t)len);
            k += (size_t)len;
            i += (size_t)len - 1;
            json_decref(one);
        } else {
            memcpy(w + k, "\xef\xbf\xbd", 3);
            k += 3;
        }
    }
    v = w ? json_stringn(w, k) : NULL;
    free(w);
    return v;
}

static json_t *token_text(srv *S, int32_t id, json_t **bytes)
{
    char buf[256];
    size_t len = 0;
    if (hx_model_token_to_piece(S->m, id, buf, sizeof buf, &len) != HX_OK)
        len = 0;
    if (bytes) {
        *bytes = json_array();
        for (size_t i = 0; i < len; i++)
            json_array_append_new(*bytes, json_integer((unsigned char)buf[i]));
    }
    return srv_utf8_string(buf, len);
}

static json_t *logprobs_json(srv_job *j, const srv_choice *ch, size_t from)
{
    srv *S = j->S;
    if (j->chat) {
        json_t *content = json_array();
        for (size_t i = from; i < ch->n_pieces; i++) {
            const srv_piece *p = &ch->pieces[i];
            json_t *bytes, *tops = json_array();
            /* post_sampling_probs: llama-server's keys and the probability itself */
            const int ps = j->post_sampling;
            for (uint32_t k = 0; k < p->n_top; k++) {
                json_t *tb, *tt = token_text(S, p->top_token[k], &tb);
                const double v = ps ? (double)expf(p->top_logprob[k]) : (double)p->top_logprob[k];
                json_array_append_new(tops, json_pack("{s:o,s:f,s:o}", "token", tt, ps ? "prob" : "logprob", v,
                                                      "bytes", tb));
            }
            json_t *tt = token_text(S, p->token, &bytes);
            const double v = ps ? (double)expf(p->logprob) : (double)p->logprob;
            json_array_append_new(content, json_pack("{s:o,s:f,s:o,s:o}", "token", tt, ps ? "prob" : "logprob", v,
                                                     "bytes", bytes, ps ? "top_probs" : "top_logprobs", tops));
        }
        return json_pack("{s:o}", "content", content);
    }
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    size_t off = 0; /* offsets count from the text of this response or chunk */
    for (size_t i = from; i < ch->n_pieces; i++) {
        const srv_piece *p = &ch->pieces[i];
        json_t *t = token_text(S, p->token, NULL);
        json_array_append_new(offs, json_integer((json_int_t)off));
        off += json_string_length(t);
        json_array_append_new(tokens, t);
        json_array_append_new(lps, json_real(p->logprob));
        /* The legacy format keys alternatives by their text: of tokens
         * that read the same, the most likely (listed first) keeps the
         * key, not the last one seen. */
        json_t *top = json_object();
        for (uint32_t k = 0; k < p->n_top; k++) {
            json_t *tt = token_text(S, p->top_token[k], NULL);
            if (!json_object_get(top, json_string_value(tt)))
                json_object_set_new(top, json_string_value(tt), json_real(p->top_logprob[k]));
            json_decref(tt);
        }
        json_array_append_new(tops, top);
    }
    return json_pack("{s:o,s:o,s:o,s:o}", "tokens", tokens, "token_logprobs", lps, "top_logprobs", tops,
                     "text_offset", offs);
}

const char *srv_finish_str(const srv_choice *ch)
{
    if (ch->limited)
        return "length"; /* the tenant's tokens per minute ran out */
    switch (ch->res.stats.finish) {
    case HX_FINISH_LENGTH: return "length";
    default: return "stop";
    }
}

json_t *srv_choice_json(srv_job *j, srv_choice *ch, size_t from_piece, size_t from_text, int final)
{
    json_t *text = srv_utf8_string(ch->text ? ch->text + from_text : "", ch->text_len - from_text);
    json_t *c = json_pack("{s:i}", "index", ch->index);
    const char *finish = final ? srv_finish_str(ch) : NULL;
    if (j->chat && (j->tools || j->thought.start || *j->thought.prefix)) { /* server_thought.c */
        json_t *m = srv_thought_message(j, ch, final);
        if (!m) {
            json_decref(text);
            json_decref(c);
            return NULL;
        }
        json_decref(text);
        json_object_set_new(c, j->stream ? "delta" : "message", m);
        if (final && srv_tools_finish(j, ch))
            finish = srv_tools_finish(j, ch);
    } else if (j->chat && j->stream && !json_string_length(text)) {
        json_decref(text); /* no text in this chunk (the last): an empty delta, as llama-server's */
        json_object_set_new(c, "delta", json_object());
    } else if (j->chat)
        json_object_set_new(c, j->stream ? "delta" : "message",
                            j->stream ? json_pack("{s:o}", "content", text)
                                      : json_pack("{s:s,s:o}", "role", "assistant", "content", text));
    else
        json_object_set_new(c, "text", text);
    json_object_set_new(c, "logprobs", j->logprobs ? logprobs_json(j, ch, from_piece) : json_null());
    json_object_set_new(c, "finish_reason", finish ? json_string(finish) : json_null());
    return c;
}

json_t *srv_usage_json(srv_job *j)
{
    json_int_t completion = 0, cached = -1;
    for (int i = 0; i < j->n; i++) {
        /* A choice stopped by its tenant's tokens per minute: the token
         * that found the budget spent was not given. */
        completion += j->ch[i].limited ? (json_int_t)j->ch[i].n_pieces : j->ch[i].res.stats.generated_tokens;
        /* The prompt counts once, as the choice that found least of it
         * cached (the first of n may have filled the cache for the rest). */
        json_int_t c = j->ch[i].res.prompt_tokens_cached;
        cached = cached < 0 || c < cached ? c : cached;
    }
    json_t *u = json_pack("{s:I,s:I,s:I,s:{s:I}}", "prompt_tokens", (json_int_t)j->prompt_tokens,
                          "completion_tokens", completion, "total_tokens", (json_int_t)j->prompt_tokens + completion,
                          "prompt_tokens_details", "cached_tokens", cached < 0 ? 0 : cached);
    if (u && j->chat && j->thought.start) { /* the thought's share (server_thought.c) */
        json_int_t reasoning = 0;
        for (int i = 0; i < j->n; i++)
            reasoning += srv_thought_tokens(j, &j->ch[i]);
        json_object_set_new(u, "completion_tokens_details", json_pack("{s:I}", "reasoning_tokens", reasoning));
    }
    return u;
}

static enum MHD_Result respond_whole(struct MHD_Connection *c, srv_job *j)
{
    if (srv_job_wait_client(j, c)) {
        /* Nobody to answer: the choices still running are cancelled and
         * their KV blocks go back at the engine's next step. */
        srv_job_free(j);
        return MHD_NO;
    }
    if (j->cut) {
        srv_job_free(j);
        return srv_error(c, 503, "server_error", "shutting_down",
                         "The server shut down before the answer was complete (--drain-timeout).");
    }
    for (int i = 0; i < j->n; i++)
        if (j->ch[i].res.status != HX_OK) {
            enum MHD_Result r = srv_error(c, 500, "server_error", hx_status_str(j->ch[i].res.status), "%s",
                                          j->ch[i].res.error);
            srv_job_free(j);
            return r;
        }
    if (j->native_answer) {
        enum MHD_Result r = srv_json(c, 200, srv_native_final(j));
        srv_job_free(j);
        return r;
    }
    json_t *choices = json_array();
    for (int i = 0; i < j->n; i++)
        json_array_append_new(choices, srv_choice_json(j, &j->ch[i], 0, 0, 1));
    json_t *body = json_pack("{s:s,s:s,s:I,s:s,s:o,s:o}", "id", j->id, "object",
                             j->chat ? "chat.completion" : "text_completion", "created", (json_int_t)j->created,
                             "model", j->S->model_name, "choices", choices, "usage", srv_usage_json(j));
    if (j->native && !j->dialect) /* --verbose */
        json_object_set_new(body, "__verbose", srv_native_final(j));
    if (j->dialect)
        body = j->dialect->whole(j, body);
    enum MHD_Result r = body ? srv_json(c, 200, body) : srv_error(c, 500, "server_error", "out_of_memory",
                                                                  "out of memory");
    srv_job_free(j);
    return r;
}

/* A prompt longer than the context: llama-server's error, with the
 * numbers a client needs to cut it. */
static enum MHD_Result context_exceeded(srv *S, struct MHD_Connection *c, size_t n_prompt)
{
    char msg[512];
    snprintf(msg, sizeof msg, "request (%zu tokens) exceeds the available context size (%u tokens), try increasing "
             "it (%s)", n_prompt, S->info.n_ctx, hx_last_error());
    json_t *e = srv_error_object("exceed_context_size_error", "context_length_exceeded", msg);
    json_object_set_new(json_object_get(e, "error"), "n_prompt_tokens", json_integer((json_int_t)n_prompt));
    json_object_set_new(json_object_get(e, "error"), "n_ctx", json_integer((json_int_t)S->info.n_ctx));
    return srv_json(c, 400, e);
}

/* An engine refusal as the HTTP status a client expects. */
static enum MHD_Result refused(srv *S, struct MHD_Connection *c, hx_status st, size_t n_prompt)
{
    if ((st == HX_ERR_RANGE && strstr(hx_last_error(), "context")) || (st == HX_ERR_NO_MEMORY &&
                                                                       !strstr(hx_last_error(), "waiting")))
        return context_exceeded(S, c, n_prompt);
    if (st == HX_ERR_RANGE || st == HX_ERR_INVALID_ARG)
        return srv_error(c, 400, "invalid_request_error", "invalid_value", "%s", hx_last_error());
    if (st == HX_ERR_NO_MEMORY)
        return srv_error(c, 503, "unavailable_error", "server_busy", "%s", hx_last_error());
    return srv_error(c, 500, "server_error", hx_status_str(st), "%s", hx_last_error());
}

/* The prompt as token ids, tokenized here (as the engine would) so that a
 * tenant's tokens per minute can count it before admission. */
static int tokenize_prompt(srv *S, parsed *p, bad *b)
{
    if (!p->prompt)
        return 0;
    size_t len = strlen(p->prompt), n = 0;
    hx_status st = hx_model_tokenize(S->m, p->prompt, len, 1, 1, NULL, 0, &n);
    if (st != HX_OK && st != HX_ERR_RANGE)
        return fail(b, "invalid_value", "the prompt cannot be tokenized: %s", hx_last_error());
    if (!n)
        return fail(b, "invalid_value", "the prompt is empty");
    if (!(p->tokens = malloc(sizeof *p->tokens * n)))
        return fail(b, "server_error", "out of memory");
    if (hx_model_tokenize(S->m, p->prompt, len, 1, 1, p->tokens, n, &n) != HX_OK)
        return fail(b, "invalid_value", "the prompt cannot be tokenized: %s", hx_last_error());
    p->n_tokens = n;
    return 0;
}

/* The tokens of what follows the prompt's thought tag: a chat's budget
 * counts them (the template's "\n" after "<think>"), as llama.cpp's does. */
static uint32_t after_start(srv *S, const char *prompt, const char *start)
{
    const char *tag = srv_thought_last_tag(prompt, start), *tail = tag ? tag + strlen(start) : "";
    size_t n = 0;
    if (*tail && hx_model_tokenize(S->m, tail, strlen(tail), 0, 1, NULL, 0, &n) != HX_ERR_RANGE)
        n = 0;
    return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

static uint32_t min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }

/* /completion's n_predict (llama-server's name for max_tokens): -1 is
 * the context; 0 (llama-server: evaluate the prompt only) is refused. */
static int native_n_predict(srv *S, json_t *o, parsed *p, bad *b)
{
    long long n = 0;
    if (!json_object_get(o, "n_predict"))
        return 0;
    if (get_int(o, "n_predict", -1, LLONG_MAX, &n, b))
        return -1;
    if (!n)
        return fail(b, "invalid_value", "'n_predict' is 0: hetero-server generates at least one token");
    n = n < 0 ? (long long)S->info.n_ctx : n;
    p->r.max_tokens = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
    return 0;
}

/* The prefix cache's partition: by default each API key's own (a salt of
 * the process's secret and the key's index, which no client knows), and
 * within it the request's cache_salt; --prefix-cache-shared leaves the
 * keys one partition. */
static void cache_salt(srv *S, const parsed *p, const srv_tenant *t, char *out, size_t cap)
{
    const int by_key = t && !S->prefix_shared;
    if (!by_key && !p->salt) {
        *out = '\0';
        return;
    }
    snprintf(out, cap, "%s:%zu:%s", S->secret, by_key ? t->index + 1 : 0, p->salt ? p->salt : "");
}

enum MHD_Result srv_completion(srv *S, struct MHD_Connection *c, const char *body, size_t len, int mode,
                               srv_tenant *tenant)
{
    const int native = mode == SRV_NATIVE, chat = mode == 1 || mode == SRV_ANTHROPIC || mode == SRV_RESPONSES;
    const srv_dialect *dialect = mode == SRV_ANTHROPIC   ? &srv_anthropic_dialect
                                 : mode == SRV_RESPONSES ? &srv_responses_dialect
                                                         : NULL;
    json_error_t je;
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!o)
        return srv_error(c, 400, "invalid_request_error", "invalid_json", "The body is not valid JSON: %s (line %d, "
                         "column %d)", je.text, je.line, je.column);
    parsed p = {.r = hx_request_default(), .id_slot = -1};
    bad b = {{0}, NULL};
    int rc = json_is_object(o) ? 0 : fail(&b, "invalid_type", "The body must be a JSON object");
    if (!rc && native) {
        srv_native_fill_defaults(S, o);
        char why[256];
        if (srv_native_prompt(S, o, why, sizeof why))
            rc = fail(&b, "invalid_value", "%s", why);
    }
    if (!rc)
        rc = parse_sampling(S, o, &p, mode, &b);
    if (!rc && native)
        rc = native_n_predict(S, o, &p, &b);
    if (!rc)
        rc = chat ? parse_messages(S, o, &p, &b) : parse_prompt(o, &p, &b);
    if (!rc)
        rc = parse_logprobs(o, &p, chat, &b);
    if (!rc)
        rc = parse_grammar(o, &p, &b);
    if (!rc && dialect && p.n != 1)
        rc = fail(&b, "invalid_value", "'n' is %d: this API answers one choice", p.n);
    if (!rc && srv_tools_grammar(p.tools) && p.grammar)
        rc = fail(&b, "invalid_value", "a forced tool call (tool_choice) cannot be combined with 'grammar', "
                  "'json_schema' or a JSON 'response_format'");
    p.r.sampling.grammar = srv_tools_grammar(p.tools) ? srv_tools_grammar(p.tools) : p.grammar;
    /* A grammar shapes the whole text: a budget the request asks for
     * cannot be kept with it, the server's default (--reasoning-budget)
     * is left out. */
    json_t *rbt = json_object_get(o, "reasoning_budget_tokens"), *tbt = json_object_get(o, "thinking_budget_tokens");
    const int asked_budget = (rbt && !json_is_null(rbt)) || (tbt && !json_is_null(tbt));
    if (!rc && p.r.sampling.reasoning_budget_on && p.r.sampling.grammar && asked_budget)
        rc = fail(&b, "unsupported_parameter", "a reasoning budget cannot be combined with a grammar, a JSON "
                  "'response_format' or a forced tool call (set 'reasoning_budget_tokens' to -1)");
    if (p.r.sampling.grammar)
        p.r.sampling.reasoning_budget_on = 0;
    /* The thought's tags, the template's: read out of the answer
     * (server_thought.c), and the budget's unless the request names its own. */
    srv_thought thought = {0};
    if (!rc && chat) {
        const char *tmpl = srv_tools_template(p.tools) ? srv_tools_template(p.tools) : S->chat_template, *ts, *te;
        if (srv_thought_setup(S, o, tmpl, p.prompt, p.thought_continued, p.r.sampling.grammar != NULL, p.stream,
                              &thought, b.msg, sizeof b.msg))
            rc = -1, b.code = "invalid_value";
        if (S->jinja && hx_reasoning_tags(tmpl, &ts, &te)) {
            p.r.sampling.reasoning_start = p.r.sampling.reasoning_start ? p.r.sampling.reasoning_start : ts;
            p.r.sampling.reasoning_end = p.r.sampling.reasoning_end ? p.r.sampling.reasoning_end : te;
        }
    }
    const char *budget_start = p.r.sampling.reasoning_start ? p.r.sampling.reasoning_start : "<think>";
    if (!rc && p.r.sampling.reasoning_budget_on)
        p.r.sampling.reasoning_open = p.thought_continued || srv_thought_opens(p.prompt, budget_start);
    if (!rc && chat && p.r.sampling.reasoning_budget_on && p.r.sampling.reasoning_open)
        p.r.sampling.reasoning_budget -= min_u32(p.r.sampling.reasoning_budget, after_start(S, p.prompt, budget_start));
    if (!rc)
        rc = tokenize_prompt(S, &p, &b);
    int verbose = 0; /* llama-server's per-request switch for __verbose */
    if (!rc)
        rc = get_bool(o, "verbose", &verbose, &b);
    int per_token = 0, progress = 0; /* llama-server's stream fields (server_progress.c) */
    if (!rc && (get_bool(o, "timings_per_token", &per_token, &b) || get_bool(o, "return_progress", &progress, &b)))
        rc = -1;
    /* llama-server's context holds the prompt and the answer together */
    if (!rc && native && p.n_tokens < S->info.n_ctx && p.r.max_tokens > S->info.n_ctx - p.n_tokens)
        p.r.max_tokens = S->info.n_ctx - (uint32_t)p.n_tokens;
    enum MHD_Result ret = MHD_NO;
    if (rc) {
        ret = srv_error(c, 400, "invalid_request_error", b.code, "%s", b.msg);
    } else if (srv_admit(S, c, tenant, (uint32_t)(p.n_tokens > UINT32_MAX ? UINT32_MAX : p.n_tokens), &ret)) {
        srv_job *j = NULL;
        if (srv_lane_take(S, p.id_slot)) {
            srv_request_end(S, tenant);
            ret = srv_error(c, 503, "unavailable_error", "shutting_down", "The server is shutting down.");
        } else if (!(j = srv_job_new(S, chat, p.n))) {
            srv_lane_give(S, p.id_slot);
            srv_request_end(S, tenant);
            ret = srv_error(c, 500, "server_error", "out_of_memory", "out of memory");
        } else {
            j->lane = p.id_slot; /* given back with the job */
            j->stream = p.stream;
            j->include_usage = p.include_usage;
            j->logprobs = p.logprobs;
            j->post_sampling = p.r.post_sampling_probs;
            j->tenant = tenant;
            j->owns_slot = 1;
            j->prompt_tokens = (uint32_t)p.n_tokens;
            j->tools = p.tools; /* the job reads the answer's calls with them */
            j->thought = thought;
            p.tools = NULL;
            char salt[160];
            cache_salt(S, &p, tenant, salt, sizeof salt);
            p.r.text = NULL;
            p.r.tokens = p.tokens;
            p.r.n_tokens = p.n_tokens;
            p.r.tenant = tenant ? tenant->name : NULL;
            p.r.cache_salt = salt;
            p.r.on_token = srv_on_token;
            j->timings_per_token = per_token;
            j->return_progress = progress;
            if (p.stream && (per_token || progress))
                p.r.on_progress = srv_on_progress;
            j->native_answer = native;
            j->dialect = dialect;
            if (dialect && !(j->dialect_state = dialect->open(j, o))) {
                srv_job_free(j);
                ret = srv_error(c, 500, "server_error", "out_of_memory", "out of memory");
                goto done; /* the parsed request's cleanup */
            }
            if (native || S->native.verbose || verbose)
                srv_native_keep(S, j, o, &p.r, p.stream);
            const uint64_t seed = p.r.sampling.seed;
            hx_status st = HX_OK;
            for (int i = 0; i < p.n && st == HX_OK; i++) {
                p.r.user = &j->ch[i];
                p.r.sampling.seed = seed + (uint64_t)i;
                st = hx_engine_submit(S->e, &p.r, &j->ch[i].id);
            }
            if (st) {
                ret = refused(S, c, st, p.n_tokens);
                srv_job_free(j);
            } else {
                ret = p.stream ? srv_stream_respond(c, j) : respond_whole(c, j);
            }
        }
    }
done:
    free(p.prompt);
    free(p.tokens);
    free(p.grammar);
    srv_tools_free(p.tools);
    srv_sampling_store_free(&p.store);
    json_decref(o);
    return ret;
}

enum MHD_Result srv_tokenize(srv *S, struct MHD_Connection *c, const char *body, size_t len, int detokenize)
{
    json_error_t je;
    json_t *o = json_loadb(body, len, 0, &je);
    if (!json_is_object(o)) {
        json_decref(o);
        return srv_error(c, 400, "invalid_request_error", "invalid_json", "The body is not a JSON object: %s",
                         o ? "" : je.text);
    }
    enum MHD_Result ret;
    if (detokenize) {
        json_t *ids = json_object_get(o, "tokens");
        char *text = NULL;
        size_t n = 0, cap = 0;
        int ok = json_is_array(ids);
        for (size_t i = 0; ok && i < json_array_size(ids); i++) {
            json_t *t = json_array_get(ids, i);
            char piece[256];
            size_t pl = 0;
            ok = json_is_integer(t) && json_integer_value(t) >= 0 && json_integer_value(t) < S->info.n_vocab &&
                 hx_model_token_to_piece(S->m, (int32_t)json_integer_value(t), piece, sizeof piece, &pl) == HX_OK;
            if (ok && n + pl + 1 > cap) {
                char *g = realloc(text, cap = 2 * (n + pl + 1));
                ok = g != NULL;
                if (g)
                    text = g;
            }
            if (ok) {
                memcpy(text + n, piece, pl);
                n += pl;
            }
        }
        ret = ok ? srv_json(c, 200, json_pack("{s:o}", "content", srv_utf8_string(text ? text : "", n)))
                 : srv_error(c, 400, "invalid_request_error", "invalid_value",
                             "'tokens' must be an array of token ids below %u", S->info.n_vocab);
        free(text);
    } else {
        json_t *content = json_object_get(o, "content");
        int add_special = 0, parse_special = 1, pieces = 0;
        bad b = {{0}, NULL};
        if (!json_is_string(content) || get_bool(o, "add_special", &add_special, &b) ||
            get_bool(o, "parse_special", &parse_special, &b) || get_bool(o, "with_pieces", &pieces, &b)) {
            ret = srv_error(c, 400, "invalid_request_error", b.code ? b.code : "invalid_type", "%s",
                            b.code ? b.msg : "'content' must be a string");
        } else {
            size_t n = 0, tl = json_string_length(content);
            const char *s = json_string_value(content);
            hx_model_tokenize(S->m, s, tl, add_special, parse_special, NULL, 0, &n);
            int32_t *ids = malloc(sizeof *ids * (n ? n : 1));
            hx_status st = ids ? hx_model_tokenize(S->m, s, tl, add_special, parse_special, ids, n, &n)
                               : HX_ERR_NO_MEMORY;
            json_t *arr = json_array();
            for (size_t i = 0; st == HX_OK && i < n; i++)
                json_array_append_new(arr, pieces ? json_pack("{s:i,s:o}", "id", ids[i], "piece",
                                                              srv_piece_json(S, ids[i]))
                                                  : json_integer(ids[i]));
            ret = st ? (json_decref(arr), srv_error(c, 500, "server_error", hx_status_str(st), "%s", hx_last_error()))
                     : srv_json(c, 200, json_pack("{s:o}", "tokens", arr));
            free(ids);
        }
    }
    json_decref(o);
    return ret;
}

char *srv_chat_prompt(srv *S, json_t *body, char *err, size_t cap)
{
    parsed p = {.r = hx_request_default(), .id_slot = -1};
    bad b = {{0}, NULL};
    const int rc = parse_messages(S, body, &p, &b);
    srv_tools_free(p.tools);
    if (rc) {
        snprintf(err, cap, "%s", b.msg);
        free(p.prompt);
        return NULL;
    }
    return p.prompt;
}

int srv_default_request(srv *S, hx_request *r)
{
    parsed p = {.r = hx_request_default(), .id_slot = -1};
    bad b = {{0}, NULL};
    json_t *o = json_object();
    if (o)
        srv_native_fill_defaults(S, o);
    int rc = o ? parse_sampling(S, o, &p, SRV_NATIVE, &b) : -1;
    json_decref(o);
    *r = p.r;
    r->sampling.stop = NULL; /* none: parse_sampling pointed it at p */
    r->sampling.n_stop = 0;
    return rc;
}
