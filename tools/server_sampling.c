/* hetero-server's sampler fields beyond OpenAI's: llama-server's
 * logit_bias, min_tokens, typical_p, mirostat, DRY, XTC, top_n_sigma,
 * dynatemp, samplers and min_keep, each checked (a 400 naming the field
 * and its range) into the request's hx_sampling; and the llama-server
 * fields hetero-server does not do, refused when given a value that would
 * change the answer (docs/server-fields.md lists every field). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli_samplers.h"
#include "tools/server.h"

#define SRV_MAX_BREAKERS 64
#define SRV_MAX_BIAS 4096

static int bad(char *msg, size_t cap, const char **code, const char *c, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int bad(char *msg, size_t cap, const char **code, const char *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
    *code = c;
    return -1;
}

#define BAD(c, ...) bad(msg, cap, code, c, __VA_ARGS__)

/* Optional number in [lo, hi]; absent or null leaves *out. */
static int num(json_t *o, const char *key, double lo, double hi, float *out, char *msg, size_t cap, const char **code)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v))
        return BAD("invalid_type", "'%s' must be a number", key);
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi))
        return BAD("invalid_value", "'%s' is %g; it must be in [%g, %g]", key, x, lo, hi);
    *out = (float)x;
    return 0;
}

static int integer(json_t *o, const char *key, long long lo, long long hi, int32_t *out, char *msg, size_t cap,
                   const char **code)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v))
        return BAD("invalid_type", "'%s' must be an integer", key);
    long long x = json_integer_value(v);
    if (x < lo || x > hi)
        return BAD("invalid_value", "'%s' is %lld; it must be in [%lld, %lld]", key, x, lo, hi);
    *out = (int32_t)x;
    return 0;
}

void srv_sampling_store_free(srv_sampling_store *st)
{
    free(st->bias);
    for (uint32_t i = 0; i < st->n_breakers; i++)
        free(st->breakers[i]);
    free(st->breakers);
    memset(st, 0, sizeof *st);
}

static int add_bias(srv_sampling_store *st, int32_t tok, float b, char *msg, size_t cap, const char **code)
{
    if (st->n_bias == SRV_MAX_BIAS)
        return BAD("invalid_value", "'logit_bias' names more than %d tokens", SRV_MAX_BIAS);
    if (!st->bias && !(st->bias = malloc(SRV_MAX_BIAS * sizeof *st->bias)))
        return BAD("server_error", "out of memory");
    st->bias[st->n_bias].token = tok;
    st->bias[st->n_bias++].bias = b;
    return 0;
}

/* One bias: a number, or false (the token is banned), as llama-server. */
static int bias_value(json_t *v, const char *where, float *out, char *msg, size_t cap, const char **code)
{
    if (json_is_false(v)) {
        *out = -INFINITY;
        return 0;
    }
    if (!json_is_number(v))
        return BAD("invalid_type", "'logit_bias' %s: a bias is a number, or false to ban the token", where);
    *out = (float)json_number_value(v);
    return 0;
}

/* A token id, or text whose every token gets the bias (llama-server's:
 * tokenized without BOS, special tokens as text). */
static int bias_key(srv *S, srv_sampling_store *st, const char *key, int is_text, long long id, float b, char *msg,
                    size_t cap, const char **code)
{
    if (!is_text) {
        if (id < 0 || id >= (long long)S->info.n_vocab)
            return BAD("invalid_value", "'logit_bias' token id %lld is outside the vocabulary [0, %u)", id,
                       S->info.n_vocab);
        return add_bias(st, (int32_t)id, b, msg, cap, code);
    }
    size_t n = 0, len = strlen(key);
    hx_status rc = hx_model_tokenize(S->m, key, len, 0, 0, NULL, 0, &n);
    if (rc != HX_OK && rc != HX_ERR_RANGE)
        return BAD("invalid_value", "'logit_bias' key \"%.40s\" cannot be tokenized: %s", key, hx_last_error());
    int32_t *ids = malloc(sizeof *ids * (n ? n : 1));
    if (!ids)
        return BAD("server_error", "out of memory");
    int r = hx_model_tokenize(S->m, key, len, 0, 0, ids, n, &n) == HX_OK
                ? 0
                : BAD("invalid_value", "'logit_bias' key \"%.40s\" cannot be tokenized", key);
    for (size_t i = 0; !r && i < n; i++)
        r = add_bias(st, ids[i], b, msg, cap, code);
    free(ids);
    return r;
}

/* OpenAI's {"id": bias}, llama-server's [[id, bias|false]], and either
 * with text instead of an id. */
static int parse_logit_bias(srv *S, json_t *o, srv_sampling_store *st, char *msg, size_t cap, const char **code)
{
    json_t *lb = json_object_get(o, "logit_bias");
    if (!lb || json_is_null(lb))
        return 0;
    if (json_is_object(lb)) {
        const char *key;
        json_t *v;
        json_object_foreach(lb, key, v) {
            float b = 0.0f;
            if (bias_value(v, key, &b, msg, cap, code))
                return -1;
            char *end;
            long long id = strtoll(key, &end, 10);
            int is_text = !*key || *end;
            if (bias_key(S, st, key, is_text, id, b, msg, cap, code))
                return -1;
        }
        return 0;
    }
    if (!json_is_array(lb))
        return BAD("invalid_type", "'logit_bias' must be an object {\"token id or text\": bias} or an array of "
                   "[token id or text, bias or false] pairs");
    for (size_t i = 0; i < json_array_size(lb); i++) {
        json_t *e = json_array_get(lb, i), *k = json_array_get(e, 0);
        char where[32];
        snprintf(where, sizeof where, "element %zu", i);
        float b = 0.0f;
        if (!json_is_array(e) || json_array_size(e) != 2 || !(json_is_integer(k) || json_is_string(k)))
            return BAD("invalid_type", "'logit_bias' %s must be a pair [token id or text, bias or false]", where);
        if (bias_value(json_array_get(e, 1), where, &b, msg, cap, code) ||
            bias_key(S, st, json_string_value(k), json_is_string(k), json_is_integer(k) ? json_integer_value(k) : 0,
                     b, msg, cap, code))
            return -1;
    }
    return 0;
}

static int parse_samplers(json_t *o, srv_sampling_store *st, hx_sampling *s, char *msg, size_t cap, const char **code)
{
    json_t *v = json_object_get(o, "samplers");
    if (!v || json_is_null(v))
        return 0;
    const size_t most = sizeof st->samplers - 1;
    size_t n = 0;
    if (json_is_string(v)) {
        const char *c = json_string_value(v);
        for (; *c; c++) {
            if (*c == 'i' || *c == 'a')
                return BAD("unsupported_parameter", "'samplers': '%c' (%s) is not supported", *c,
                           *c == 'i' ? "infill" : "adaptive_p");
            if (!strchr(CLI_SAMPLER_LETTERS, *c))
                return BAD("invalid_value", "'samplers': '%c' is not a sampler letter (e penalties, d dry, s "
                           "top_n_sigma, k top_k, y typ_p, p top_p, m min_p, x xtc, t temperature)", *c);
            if (n == most)
                return BAD("invalid_value", "'samplers' has more than %zu samplers", most);
            st->samplers[n++] = *c;
        }
    } else if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            json_t *e = json_array_get(v, i);
            if (!json_is_string(e))
                return BAD("invalid_type", "'samplers' must be a string of letters or an array of sampler names");
            const char *name = json_string_value(e);
            char c = cli_sampler_letter(name);
            if (c == 'i' || c == 'a')
                return BAD("unsupported_parameter", "'samplers': \"%s\" is not supported", name);
            if (!c)
                return BAD("invalid_value", "'samplers': \"%.40s\" is not a sampler (" CLI_SAMPLER_NAMES ")", name);
            if (n == most)
                return BAD("invalid_value", "'samplers' has more than %zu samplers", most);
            st->samplers[n++] = c;
        }
    } else {
        return BAD("invalid_type", "'samplers' must be a string of letters or an array of sampler names");
    }
    st->samplers[n] = '\0';
    s->samplers = st->samplers;
    return 0;
}

static int parse_breakers(json_t *o, srv_sampling_store *st, hx_sampling *s, char *msg, size_t cap, const char **code)
{
    json_t *v = json_object_get(o, "dry_sequence_breakers");
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_array(v) || !json_array_size(v))
        return BAD(json_is_array(v) ? "invalid_value" : "invalid_type",
                   "'dry_sequence_breakers' must be a non-empty array of strings");
    size_t n = json_array_size(v);
    if (n > SRV_MAX_BREAKERS)
        return BAD("invalid_value", "'dry_sequence_breakers' has %zu strings; at most %d", n, SRV_MAX_BREAKERS);
    if (!(st->breakers = calloc(n, sizeof *st->breakers)))
        return BAD("server_error", "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(v, i);
        if (!json_is_string(e) || !json_string_length(e))
            return BAD("invalid_type", "'dry_sequence_breakers' must hold non-empty strings");
        if (!(st->breakers[i] = strdup(json_string_value(e))))
            return BAD("server_error", "out of memory");
        st->n_breakers++;
    }
    s->dry_breakers = (const char *const *)st->breakers;
    s->n_dry_breakers = st->n_breakers;
    return 0;
}

/* Optional non-empty string; absent or null leaves *out (which points
 * into o). */
static int text_field(json_t *o, const char *key, int empty_ok, const char **out, char *msg, size_t cap,
                      const char **code)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v) || (!empty_ok && !json_string_length(v)))
        return BAD("invalid_type", "'%s' must be a%s string", key, empty_ok ? "" : " non-empty");
    *out = json_string_value(v);
    return 0;
}

/* llama-server's reasoning budget: reasoning_budget_tokens (or
 * thinking_budget_tokens, its Anthropic spelling; -1 none, else the
 * thought's tokens; --reasoning-budget by default), its tags and the
 * message written before the end tag. */
static int parse_reasoning_budget(srv *S, json_t *o, hx_sampling *s, char *msg, size_t cap, const char **code)
{
    int32_t budget = S->reasoning_budget, other = INT32_MIN;
    if (integer(o, "reasoning_budget_tokens", -1, INT32_MAX, &budget, msg, cap, code) ||
        integer(o, "thinking_budget_tokens", -1, INT32_MAX, &other, msg, cap, code))
        return -1;
    if (other != INT32_MIN && json_object_get(o, "reasoning_budget_tokens") && other != budget)
        return BAD("invalid_value", "'reasoning_budget_tokens' %d and 'thinking_budget_tokens' %d disagree", budget,
                   other);
    if (other != INT32_MIN)
        budget = other;
    json_t *ends = json_object_get(o, "reasoning_budget_end_tags");
    if (ends && !json_is_null(ends) && !(json_is_array(ends) && json_array_size(ends) <= 1))
        return BAD("unsupported_parameter", "'reasoning_budget_end_tags': one end tag is supported "
                   "('reasoning_budget_end_tag')");
    if (json_array_size(ends) && !json_is_string(json_array_get(ends, 0)))
        return BAD("invalid_type", "'reasoning_budget_end_tags' must hold strings");
    if (json_array_size(ends))
        s->reasoning_end = json_string_value(json_array_get(ends, 0));
    if (text_field(o, "reasoning_budget_start_tag", 0, &s->reasoning_start, msg, cap, code) ||
        text_field(o, "reasoning_budget_end_tag", 0, &s->reasoning_end, msg, cap, code) ||
        text_field(o, "reasoning_budget_message", 1, &s->reasoning_message, msg, cap, code))
        return -1;
    s->reasoning_budget_on = budget >= 0;
    s->reasoning_budget = budget >= 0 ? (uint32_t)budget : 0;
    return 0;
}

int srv_parse_sampling_extra(srv *S, json_t *o, hx_sampling *s, srv_sampling_store *st, char *msg, size_t cap,
                             const char **code)
{
    int32_t min_tokens = 0;
    if (integer(o, "min_tokens", 0, INT32_MAX, &min_tokens, msg, cap, code) ||
        num(o, "typical_p", 0, 1, &s->typical_p, msg, cap, code) ||
        integer(o, "mirostat", 0, 2, &s->mirostat, msg, cap, code) ||
        num(o, "mirostat_tau", 1e-6, 1e6, &s->mirostat_tau, msg, cap, code) ||
        num(o, "mirostat_eta", 0, 1e6, &s->mirostat_eta, msg, cap, code) ||
        num(o, "dry_multiplier", 0, 1e6, &s->dry_multiplier, msg, cap, code) ||
        num(o, "dry_base", 1, 1e6, &s->dry_base, msg, cap, code) ||
        integer(o, "dry_allowed_length", 0, INT32_MAX, &s->dry_allowed_length, msg, cap, code) ||
        integer(o, "dry_penalty_last_n", -1, 1 << 20, &s->dry_penalty_last_n, msg, cap, code) ||
        num(o, "xtc_probability", 0, 1, &s->xtc_probability, msg, cap, code) ||
        num(o, "xtc_threshold", 0, 1, &s->xtc_threshold, msg, cap, code) ||
        num(o, "top_n_sigma", -1e6, 1e6, &s->top_n_sigma, msg, cap, code) ||
        num(o, "dynatemp_range", 0, 1e6, &s->dynatemp_range, msg, cap, code) ||
        num(o, "dynatemp_exponent", 0, 1e6, &s->dynatemp_exponent, msg, cap, code) ||
        integer(o, "min_keep", 0, INT32_MAX, &s->min_keep, msg, cap, code))
        return -1;
    s->min_tokens = (uint32_t)min_tokens;
    if (parse_samplers(o, st, s, msg, cap, code) || parse_breakers(o, st, s, msg, cap, code) ||
        parse_logit_bias(S, o, st, msg, cap, code) || parse_reasoning_budget(S, o, s, msg, cap, code))
        return -1;
    s->logit_bias = st->bias;
    s->n_logit_bias = st->n_bias;
    return 0;
}

/* ---- fields hetero-server does not do ----------------------------------- */

/* A value that asks for nothing: absent, null, false, 0, "", [] or {}, or
 * the field's llama-server default. */
static int inert(json_t *v, const char *deflt)
{
    if (!v || json_is_null(v) || json_is_false(v))
        return 1;
    if (json_is_number(v) && json_number_value(v) == 0)
        return 1;
    if ((json_is_array(v) && !json_array_size(v)) || (json_is_object(v) && !json_object_size(v)) ||
        (json_is_string(v) && !json_string_length(v)))
        return 1;
    if (!deflt)
        return 0;
    if (json_is_number(v))
        return json_number_value(v) == atof(deflt);
    if (json_is_string(v))
        return !strcmp(json_string_value(v), deflt);
    if (json_is_true(v))
        return !strcmp(deflt, "true");
    return 0;
}

int srv_refused_field(json_t *o, int native, int chat, char *msg, size_t cap, const char **code)
{
    /* Each with the reason a client reads, and its inert default. */
    static const struct { const char *name, *deflt, *why; } refused[] = {
        {"functions", NULL, "function calls are not supported"},
        {"function_call", "none", "function calls are not supported"},
        {"suffix", NULL, "infill (a suffix) is not supported"},
        {"best_of", "1", "best_of is not supported"},
        {"echo", NULL, "echoing the prompt is not supported"},
        {"n_keep", "-1", "hetero-server does not shift the context: a request ends at the context "
                         "(finish_reason \"length\")"},
        {"n_discard", NULL, "hetero-server does not shift the context"},
        {"n_indent", NULL, "n_indent is not supported"},
        {"n_cache_reuse", NULL, "KV shifting reuse is not supported (the prefix cache reuses whole blocks)"},
        {"t_max_predict_ms", NULL, "time limits on prediction are not supported"},
        {"t_max_prompt_ms", NULL, "time limits on prompts are not supported"},
        {"return_tokens", NULL, "token ids are in /completion's answers only"},
        {"response_fields", NULL, "response_fields shapes /completion's answers only"},
        {"lora", NULL, "LoRA adapters are not supported"},
        {"sse_ping_interval", "-1", "SSE pings are not supported"},
        {"adaptive_target", "-1", "the adaptive-p sampler is not supported"},
        {"adaptive_decay", "0.9", "the adaptive-p sampler is not supported"},
        {"grammar_lazy", NULL, "lazy grammars are not supported"},
        {"grammar_triggers", NULL, "grammar triggers are not supported"},
        {"preserved_tokens", NULL, "preserved tokens are not supported"},
        {"chat_format", NULL, "chat_format is internal to llama-server"},
        {"chat_parser", NULL, "chat_parser is internal to llama-server"},
        {"reasoning_format", "none", "a thought is read out of chat completions only"},
        {"reasoning_effort", NULL, "reasoning_effort reaches chat templates only"},
        {"reasoning_control", NULL, "reasoning control is not supported"},
        {"generation_prompt", NULL, "generation_prompt is not supported"},
        {"parse_tool_calls", NULL, "tool calls are always parsed (llama-server's switch is not taken)"},
        {"multimodal_data", NULL, "multimodal input is not supported"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        if (!(native && (!strcmp(refused[i].name, "return_tokens") || !strcmp(refused[i].name, "response_fields"))) &&
            !(chat && (!strcmp(refused[i].name, "reasoning_format") || /* server_thought.c's */
                       !strcmp(refused[i].name, "reasoning_effort"))) &&  /* the template's (srv_chat_extra) */
            !inert(json_object_get(o, refused[i].name), refused[i].deflt))
            return BAD("unsupported_parameter", "'%s' is not supported: %s", refused[i].name, refused[i].why);
    return 0;
}
