/* llama-server's own endpoints, with its bodies: /completion (and
 * /completions without /v1: a prompt, answered with content, tokens, stop,
 * stop_type, timings, generation_settings...; streamed as `data:` events
 * with no [DONE], as llama-server streams them), GET /props (POST with
 * --props), GET /slots (--slots, the default; --no-slots: 501), POST
 * /apply-template, GET /models and /v1/models with llama-server's details,
 * and /detokenize keeping special tokens.  The request's fields go through
 * the same checks as an OpenAI completion's (server_openai.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/server.h"

void srv_native_defaults(srv_native *N)
{
    N->slots = 1;
    N->cors_origins = "*";
    N->cors_methods = "GET, POST, DELETE, OPTIONS";
    N->cors_headers = "*";
    N->cors_credentials = 1;
}

static int count_gpus(srv *S)
{
    int gpus = 0;
    for (int i = 0; i < hx_runtime_device_count(S->rt); i++) {
        hx_device_info d;
        if (hx_runtime_device_info(S->rt, i, &d) == HX_OK && d.kind == HX_KIND_GPU)
            gpus++;
    }
    return gpus;
}

int srv_native_open(srv *S)
{
    S->native.gpus = count_gpus(S);
    if (hx_tokenizer_open(S->native.model_path, &S->native.tok) != HX_OK) {
        fprintf(stderr, "hetero-server: %s: its vocabulary: %s\n", S->native.model_path, hx_last_error());
        return -1;
    }
    return 0;
}

void srv_native_close(srv *S)
{
    hx_tokenizer_close(S->native.tok);
    S->native.tok = NULL;
}

/* A float setting as the shortest decimal that reads back as the same
 * float (0.8, not 0.800000011920929). */
static double dec(float x)
{
    char b[32];
    for (int digits = 6; digits <= 9; digits++) {
        snprintf(b, sizeof b, "%.*g", digits, (double)x);
        if ((float)strtod(b, NULL) == x)
            break;
    }
    return strtod(b, NULL);
}

json_t *srv_native_settings(srv *S, const hx_request *r, int stream, const char *prompt)
{
    const hx_sampling *s = &r->sampling;
    json_t *stop = json_array();
    for (size_t i = 0; i < s->n_stop; i++)
        json_array_append_new(stop, json_string(s->stop[i]));
    /* hetero's samplers only: a setting it does not have is not shown */
    json_t *g = json_pack("{s:I,s:f,s:i,s:f,s:f,s:i,s:f,s:f,s:f,s:I,s:I,s:b,s:b,s:i,s:o,s:b}", "seed",
                          (json_int_t)s->seed, "temperature", dec(s->temperature), "top_k", s->top_k, "top_p",
                          dec(s->top_p), "min_p", dec(s->min_p), "repeat_last_n", s->repeat_last_n,
                          "repeat_penalty", dec(s->repeat_penalty), "presence_penalty",
                          dec(s->presence_penalty), "frequency_penalty", dec(s->frequency_penalty),
                          "max_tokens", (json_int_t)r->max_tokens, "n_predict", (json_int_t)r->max_tokens,
                          "ignore_eos", r->ignore_eos || s->ignore_eos, "stream", stream, "n_probs", (int)r->top_logprobs, "stop",
                          stop, "cache_prompt", !r->no_prefix_cache);
    json_object_set_new(g, "post_sampling_probs", json_boolean(r->post_sampling_probs));
    if (s->grammar)
        json_object_set_new(g, "grammar", json_string(s->grammar));
    /* llama-server's list: the request's biases, then with ignore_eos each
     * end-of-generation token's -inf (null in JSON), the ban it amounts to */
    json_t *bias = json_array();
    for (uint32_t i = 0; i < s->n_logit_bias; i++)
        json_array_append_new(bias, json_pack("{s:o,s:i}", "bias", isfinite(s->logit_bias[i].bias)
                                                               ? json_real(s->logit_bias[i].bias) : json_null(),
                                              "token", s->logit_bias[i].token));
    for (int32_t id = 0; (r->ignore_eos || s->ignore_eos) && S->native.tok && id < (int32_t)S->info.n_vocab; id++)
        if (hx_tokenizer_is_eog(S->native.tok, id))
            json_array_append_new(bias, json_pack("{s:n,s:i}", "bias", "token", id));
    json_object_set_new(g, "logit_bias", bias);
    return json_pack("{s:o,s:s}", "settings", g, "prompt", prompt ? prompt : "");
}

void srv_native_keep(srv *S, srv_job *j, json_t *body, const hx_request *r, int stream)
{
    /* the prompt as the model reads it: its tokens' text, BOS and special tokens spelled */
    size_t need = 0;
    char *prompt = NULL;
    hx_status st = hx_tokenizer_decode(S->native.tok, r->tokens, r->n_tokens, 0, 1, NULL, 0, &need);
    if ((st == HX_OK || st == HX_ERR_RANGE) && (prompt = malloc(need + 1)) &&
        hx_tokenizer_decode(S->native.tok, r->tokens, r->n_tokens, 0, 1, prompt, need + 1, &need) != HX_OK) {
        free(prompt);
        prompt = NULL;
    }
    j->native = srv_native_settings(S, r, stream, prompt);
    free(prompt);
    json_t *rt = json_object_get(body, "return_tokens"), *rf = json_object_get(body, "response_fields");
    json_object_set_new(j->native, "return_tokens", json_boolean(json_is_true(rt)));
    if (json_is_array(rf))
        json_object_set(j->native, "response_fields", rf);
}

/* llama-server's stop_type: eos, word (a stop string), limit, none. */
static const char *stop_type(const srv_choice *ch, const char **word, json_t *stops)
{
    *word = "";
    if (ch->limited)
        return "limit";
    switch (ch->res.stats.finish) {
    case HX_FINISH_LENGTH: return "limit";
    case HX_FINISH_STOP:
        if (ch->res.stats.stop_index < 0)
            return "eos";
        *word = json_string_value(json_array_get(stops, (size_t)ch->res.stats.stop_index));
        if (!*word)
            *word = "";
        return "word";
    default: return "none";
    }
}

static json_t *tokens_of(const srv_choice *ch, size_t from)
{
    json_t *t = json_array();
    for (size_t i = from; i < ch->n_pieces; i++)
        json_array_append_new(t, json_integer(ch->pieces[i].token));
    return t;
}

/* llama-server's response_fields: only the paths asked for ("a/b" reads
 * nested objects), each under its path as the key. */
static json_t *pick_fields(json_t *res, json_t *fields)
{
    json_t *out = json_object();
    size_t i;
    json_t *f;
    json_array_foreach(fields, i, f) {
        const char *path = json_string_value(f);
        json_t *v = res;
        char part[128];
        for (const char *p = path; v && p && *p;) {
            size_t n = strcspn(p, "/");
            snprintf(part, sizeof part, "%.*s", (int)n, p);
            v = json_is_object(v) ? json_object_get(v, part) : NULL;
            p += n + (p[n] == '/');
        }
        if (v && path)
            json_object_set(out, path, v);
    }
    json_decref(res);
    return out;
}

static json_t *final_object(srv_job *j, srv_choice *ch, const char *content, size_t content_len, json_t *tokens)
{
    json_t *settings = json_object_get(j->native, "settings");
    const char *word;
    const char *type = stop_type(ch, &word, json_object_get(settings, "stop"));
    json_t *text = json_stringn(content, content_len);
    if (!text)
        text = json_string("\xef\xbf\xbd"); /* not UTF-8: checked by the OpenAI path too */
    const uint32_t generated = ch->res.stats.generated_tokens;
    json_t *res = json_pack("{s:i,s:o,s:o,s:i,s:b,s:s,s:I,s:I,s:O,s:O,s:b,s:b,s:s,s:s,s:I,s:o}", "index", ch->index,
                            "content", text, "tokens", tokens, "id_slot", srv_answer_slot(j, ch), "stop", 1, "model",
                            j->S->model_name,
                            "tokens_predicted", (json_int_t)generated, "tokens_evaluated",
                            (json_int_t)j->prompt_tokens, "generation_settings", settings, "prompt",
                            json_object_get(j->native, "prompt"), "has_new_line",
                            ch->text && memchr(ch->text, '\n', ch->text_len) != NULL, "truncated",
                            /* llama-server's: the context filled up before the answer ended */
                            ch->res.stats.finish == HX_FINISH_LENGTH &&
                                j->prompt_tokens + generated >= j->S->info.n_ctx,
                            "stop_type",
                            type, "stopping_word", word, "tokens_cached", (json_int_t)(j->prompt_tokens + generated),
                            "timings", srv_timings_json(j, ch) /* server_progress.c */);
    if (!j->stream && j->logprobs) /* n_probs (server_probs.c); a stream's events carried them */
        json_object_set_new(res, "completion_probabilities", srv_native_probs(j, ch, 0, ch->n_pieces));
    json_t *fields = json_object_get(j->native, "response_fields");
    if (json_array_size(fields))
        res = pick_fields(res, fields);
    return res;
}

json_t *srv_native_final(srv_job *j)
{
    srv_choice *ch = &j->ch[0];
    int want_tokens = json_is_true(json_object_get(j->native, "return_tokens"));
    return final_object(j, ch, ch->text ? ch->text : "", ch->text_len, want_tokens ? tokens_of(ch, 0) : json_array());
}

json_t *srv_native_chunk(srv_job *j, srv_choice *ch, size_t from_piece, size_t from_text, int final)
{
    if (final)
        return final_object(j, ch, "", 0, json_array());
    json_t *text = json_stringn(ch->text + from_text, ch->text_len - from_text);
    if (!text)
        text = json_string("\xef\xbf\xbd");
    return json_pack("{s:i,s:o,s:o,s:b,s:i,s:I,s:I}", "index", ch->index, "content", text, "tokens",
                     tokens_of(ch, from_piece), "stop", 0, "id_slot", srv_answer_slot(j, ch), "tokens_predicted",
                     (json_int_t)ch->n_pieces, "tokens_evaluated", (json_int_t)j->prompt_tokens);
}

static json_t *split_list(const char *list, const char *fallback)
{
    json_t *a = json_array();
    if (!list) {
        if (fallback)
            json_array_append_new(a, json_string(fallback));
        return a;
    }
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        if (n)
            json_array_append_new(a, json_stringn(p, n));
        p += n + (p[n] == ',');
    }
    return a;
}

static json_t *model_info(srv *S)
{
    const hx_model_info *i = &S->info;
    return json_pack("{s:s,s:o,s:o,s:s,s:I,s:s,s:{s:I,s:I,s:I,s:I,s:I,s:s}}", "id", S->model_name, "aliases",
                     split_list(S->native.aliases, S->model_name), "tags", split_list(S->native.tags, NULL),
                     "object", "model", "created", (json_int_t)time(NULL), "owned_by", "hetero", "meta", "n_vocab",
                     (json_int_t)i->n_vocab, "n_ctx", (json_int_t)i->n_ctx, "n_ctx_train",
                     (json_int_t)i->n_ctx_train, "n_embd", (json_int_t)i->n_embd, "n_params",
                     (json_int_t)i->n_params, "ftype", i->ftype);
}

enum MHD_Result srv_models(srv *S, struct MHD_Connection *c)
{
    json_t *ollama = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:[s],s:[s],s:s,s:{s:s,s:s,s:s,s:[s],s:s,s:s}}", "name",
                               S->model_name, "model", S->model_name, "modified_at", "", "size", "", "digest", "",
                               "type", "model", "description", "", "tags", "", "capabilities", "completion",
                               "parameters", "", "details", "parent_model", "", "format", "gguf", "family",
                               S->info.arch, "families", S->info.arch, "parameter_size", "", "quantization_level",
                               S->info.ftype);
    return srv_json(c, 200, json_pack("{s:[o],s:s,s:[o]}", "models", ollama, "object", "list", "data", model_info(S)));
}

/* The settings of a request that sets nothing, as /completion would take it. */
static json_t *default_params(srv *S)
{
    hx_request r = hx_request_default();
    if (srv_default_request(S, &r))
        return json_object();
    json_t *n = srv_native_settings(S, &r, 0, NULL), *g = json_incref(json_object_get(n, "settings"));
    json_decref(n);
    /* seed -1: each request draws its own, as llama-server's default */
    if (S->seed < 0)
        json_object_set_new(g, "seed", json_integer(-1));
    return g;
}

enum MHD_Result srv_props(srv *S, struct MHD_Connection *c, int post, const char *body, size_t len)
{
    if (post) {
        if (!S->native.props_post)
            return srv_error(c, 501, "not_supported_error", "not_supported",
                             "This server does not support changing global properties. Start it with `--props`");
        json_error_t je;
        json_t *o = len ? json_loadb(body, len, 0, &je) : json_object();
        if (!json_is_object(o)) {
            json_decref(o);
            return srv_error(c, 400, "invalid_request_error", "invalid_json", "The body must be a JSON object");
        }
        /* llama-server takes no property here either: a field is refused, not ignored */
        const char *key = json_object_size(o) ? json_object_iter_key(json_object_iter(o)) : NULL;
        enum MHD_Result r = key ? srv_error(c, 400, "invalid_request_error", "unsupported_parameter",
                                            "'%s': no global property can be changed while serving", key)
                                : srv_json(c, 200, json_pack("{s:b}", "success", 1));
        json_decref(o);
        return r;
    }
    char bos[256] = "", eos[256] = "";
    size_t l;
    if (S->info.bos >= 0)
        hx_tokenizer_token_to_piece(S->native.tok, S->info.bos, 1, bos, sizeof bos, &l);
    if (S->info.eos >= 0)
        hx_tokenizer_token_to_piece(S->native.tok, S->info.eos, 1, eos, sizeof eos, &l);
    char build[64];
    snprintf(build, sizeof build, "hetero %d.%d.%d", HX_VERSION_MAJOR, HX_VERSION_MINOR, HX_VERSION_PATCH);
    json_t *dgs = json_pack("{s:i,s:i,s:I,s:b,s:b,s:o}", "id", 0, "id_task", -1, "n_ctx", (json_int_t)S->info.n_ctx,
                            "speculative", 0, "is_processing", 0, "params", default_params(S));
    json_t *props = json_pack("{s:o,s:I,s:s,s:s,s:s,s:{s:b,s:b,s:b},s:b,s:b,s:b,s:b,s:s,s:s,s:s,s:s,s:b}",
                              "default_generation_settings", dgs, "total_slots", (json_int_t)S->native.parallel,
                              "model_alias", S->model_name, "model_ftype", S->info.ftype, "model_path",
                              S->native.model_path, "modalities", "vision", 0, "video", 0, "audio", 0,
                              "endpoint_slots", S->native.slots, "endpoint_props", S->native.props_post,
                              "endpoint_metrics", 1, "ui", !S->no_webui, "chat_template", S->chat_template,
                              "bos_token", bos, "eos_token", eos, "build_info", build, "is_sleeping", srv_asleep(S));
    return srv_json(c, 200, props);
}

/* One running answer as llama-server shows a busy slot. */
static json_t *busy_slot(const srv *S, const srv_job *j, const srv_choice *ch, uint32_t id)
{
    const int nl = ch->text && memchr(ch->text, '\n', ch->text_len) != NULL;
    json_t *next = json_pack("{s:b,s:b,s:I,s:s}", "has_next_token", 1, "has_new_line", nl, "n_decoded",
                             (json_int_t)ch->n_pieces, "stopping_word", "");
    json_t *np = json_object_get(json_object_get(j->native, "settings"), "n_predict");
    if (np) /* a /completion's: its budget left */
        json_object_set_new(next, "n_remain", json_integer(json_integer_value(np) - (json_int_t)ch->n_pieces));
    return json_pack("{s:i,s:I,s:s,s:I,s:b,s:b,s:I,s:[o]}", "id", (int)id, "id_task", (json_int_t)ch->id, "request",
                     j->id, "n_ctx", (json_int_t)S->info.n_ctx, "speculative", 0, "is_processing", 1,
                     "n_prompt_tokens", (json_int_t)j->prompt_tokens, "next_token", next);
}

/* The requests running now, as llama-server's -np slots: a request that
 * named a slot (id_slot, server_lanes.c) at that slot, the others in the
 * free slots in turn (hetero has no fixed slots: the engine batches up to
 * -np requests at once). */
enum MHD_Result srv_slots(srv *S, struct MHD_Connection *c)
{
    if (!S->native.slots)
        return srv_error(c, 501, "not_supported_error", "not_supported",
                         "This server does not support slots endpoint. Start it with `--slots`");
    const uint32_t n_slots = S->native.parallel;
    json_t **at = calloc(n_slots, sizeof *at);
    if (!at)
        return srv_error(c, 500, "server_error", "out_of_memory", "out of memory");
    uint32_t next_free = 0;
    pthread_mutex_lock(&S->jobs_lock);
    for (int named = 1; named >= 0; named--) { /* the named slots first */
        for (srv_job *j = S->jobs; j; j = j->next) {
            pthread_mutex_lock(&j->lock);
            for (int k = 0; k < j->n; k++) {
                /* A request's first answer runs in the slot it named, the
                 * others in free ones, as llama-server's child tasks. */
                if (j->ch[k].ended || (j->lane >= 0 && k == 0) != named)
                    continue;
                while (!named && next_free < n_slots && at[next_free])
                    next_free++;
                const uint32_t id = named ? (uint32_t)j->lane : next_free;
                if (id < n_slots)
                    at[id] = busy_slot(S, j, &j->ch[k], id);
            }
            pthread_mutex_unlock(&j->lock);
        }
    }
    pthread_mutex_unlock(&S->jobs_lock);
    json_t *arr = json_array();
    for (uint32_t i = 0; i < n_slots; i++)
        json_array_append_new(arr, at[i] ? at[i]
                                         : json_pack("{s:i,s:i,s:I,s:b,s:b}", "id", (int)i, "id_task", -1, "n_ctx",
                                                     (json_int_t)S->info.n_ctx, "speculative", 0, "is_processing", 0));
    free(at);
    return srv_json(c, 200, arr);
}

enum MHD_Result srv_apply_template(srv *S, struct MHD_Connection *c, const char *body, size_t len)
{
    json_error_t je;
    json_t *o = json_loadb(body, len, 0, &je);
    if (!json_is_object(o)) {
        json_decref(o);
        return srv_error(c, 400, "invalid_request_error", "invalid_json", "The body must be a JSON object%s%s",
                         o ? "" : ": ", o ? "" : je.text);
    }
    char err[512];
    char *prompt = srv_chat_prompt(S, o, err, sizeof err);
    json_decref(o);
    if (!prompt)
        return srv_error(c, 400, "invalid_request_error", "invalid_value", "%s", err);
    json_t *p = json_string(prompt);
    free(prompt);
    return p ? srv_json(c, 200, json_pack("{s:o}", "prompt", p))
             : srv_error(c, 500, "server_error", "invalid_utf8", "the template's output is not UTF-8");
}

/* The ids' text, special tokens spelled ("<|im_start|>"), as llama-server. */
enum MHD_Result srv_detokenize(srv *S, struct MHD_Connection *c, const char *body, size_t len)
{
    json_error_t je;
    json_t *o = json_loadb(body, len, 0, &je), *ids = json_object_get(o, "tokens");
    if (!json_is_object(o) || (ids && !json_is_array(ids))) {
        json_decref(o);
        return srv_error(c, 400, "invalid_request_error", "invalid_type",
                         "The body must be a JSON object with 'tokens', an array of token ids");
    }
    size_t n = json_array_size(ids);
    int32_t *t = malloc(sizeof *t * (n ? n : 1));
    for (size_t i = 0; t && i < n; i++) {
        json_t *v = json_array_get(ids, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= S->info.n_vocab) {
            free(t);
            json_decref(o);
            return srv_error(c, 400, "invalid_request_error", "invalid_value",
                             "'tokens'[%zu] is not a token id (0 to %u)", i, S->info.n_vocab - 1);
        }
        t[i] = (int32_t)json_integer_value(v);
    }
    json_decref(o);
    size_t need = 0;
    char *text = NULL;
    hx_status st = t ? hx_tokenizer_decode(S->native.tok, t, n, 0, 1, NULL, 0, &need) : HX_ERR_NO_MEMORY;
    if (st == HX_OK || st == HX_ERR_RANGE)
        st = (text = malloc(need + 1)) ? hx_tokenizer_decode(S->native.tok, t, n, 0, 1, text, need + 1, &need)
                                       : HX_ERR_NO_MEMORY;
    free(t);
    enum MHD_Result r = st ? srv_error(c, 500, "server_error", hx_status_str(st), "%s", hx_last_error())
                           : srv_json(c, 200, json_pack("{s:s%}", "content", text, need));
    free(text);
    return r;
}

char *srv_chat_extra(srv *S, json_t *body, int *thinking, char *err, size_t cap)
{
    char date[32], datetime[32];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(date, sizeof date, "%d %b %Y", &tm);
    strftime(datetime, sizeof datetime, "%b %d %Y", &tm);
    json_t *x = json_pack("{s:s,s:s,s:b}", "date_string", date, "datetime", datetime, "enable_thinking",
                          !S->native.reasoning_off);
    json_t *kw = json_object_get(body, "chat_template_kwargs");
    if (kw && !json_is_null(kw)) {
        if (!json_is_object(kw)) {
            snprintf(err, cap, "'chat_template_kwargs' must be an object");
            json_decref(x);
            return NULL;
        }
        json_t *et = json_object_get(kw, "enable_thinking");
        if (et && !json_is_boolean(et)) {
            snprintf(err, cap, "'chat_template_kwargs.enable_thinking' must be a boolean");
            json_decref(x);
            return NULL;
        }
        json_object_update(x, kw);
    }
    /* OpenAI's reasoning_effort, as llama-server takes it: "none" turns
     * thinking off, another level reaches the template (GPT-OSS's reads it) */
    json_t *effort = json_object_get(body, "reasoning_effort");
    if (effort && !json_is_null(effort)) {
        if (!json_is_string(effort) || !json_string_length(effort)) {
            snprintf(err, cap, "'reasoning_effort' must be a string (\"none\", \"low\", \"medium\", \"high\"...)");
            json_decref(x);
            return NULL;
        }
        if (!strcmp(json_string_value(effort), "none"))
            json_object_set_new(x, "enable_thinking", json_false());
        else
            json_object_set(x, "reasoning_effort", effort);
    }
    *thinking = json_is_true(json_object_get(x, "enable_thinking"));
    char *text = json_dumps(x, JSON_COMPACT);
    json_decref(x);
    if (!text)
        snprintf(err, cap, "out of memory");
    return text;
}

void srv_chat_close_thought(char **prompt, int thinking, const char *tmpl)
{
    const char *start = "<think>", *end = "</think>";
    hx_reasoning_tags(tmpl, &start, &end); /* the template's own, else <think> */
    size_t n = *prompt ? strlen(*prompt) : 0, k = strlen(start), e = strlen(end);
    if (thinking || !n)
        return;
    /* the start tag, then a newline or nothing */
    const size_t at = n >= 1 && (*prompt)[n - 1] == '\n' ? n - 1 : n;
    if (at >= k && !memcmp(*prompt + at - k, start, k)) {
        char *p = realloc(*prompt, n + e + 1);
        if (p) {
            memcpy(p + n, end, e + 1);
            *prompt = p;
        }
    }
}

/* A prompt of token ids and strings mixed in one sequence (llama-server's
 * tokenize_mixed): each string tokenized in place, the first element with
 * BOS where the model adds it. */
static json_t *mixed_prompt(srv *S, json_t *arr, char *err, size_t cap)
{
    json_t *ids = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        if (json_is_integer(v)) {
            json_array_append(ids, v);
            continue;
        }
        size_t n = 0, len = json_string_length(v);
        const char *t = json_string_value(v);
        hx_model_tokenize(S->m, t, len, i == 0, 1, NULL, 0, &n);
        int32_t *tok = malloc(sizeof *tok * (n ? n : 1));
        if (!tok || hx_model_tokenize(S->m, t, len, i == 0, 1, tok, n, &n) != HX_OK) {
            snprintf(err, cap, "'prompt'[%zu] cannot be tokenized: %s", i, hx_last_error());
            free(tok);
            json_decref(ids);
            return NULL;
        }
        for (size_t k = 0; k < n; k++)
            json_array_append_new(ids, json_integer(tok[k]));
        free(tok);
    }
    return ids;
}

int srv_native_prompt(srv *S, json_t *body, char *err, size_t cap)
{
    json_t *p = json_object_get(body, "prompt");
    /* llama-server's prompt object: {"prompt_string", "multimodal_data"} */
    if (json_is_object(p)) {
        json_t *ps = json_object_get(p, "prompt_string");
        if (json_object_get(p, "multimodal_data")) {
            snprintf(err, cap, "'prompt.multimodal_data': this model takes no images or audio");
            return -1;
        }
        if (!json_is_string(ps)) {
            snprintf(err, cap, "'prompt' as an object needs 'prompt_string', a string");
            return -1;
        }
        json_object_set(body, "prompt", ps);
        return 0;
    }
    int ints = 0, strs = 0;
    size_t i;
    json_t *v;
    if (json_is_array(p))
        json_array_foreach(p, i, v) {
            ints += json_is_integer(v);
            strs += json_is_string(v);
        }
    if (ints && strs && ints + strs == (int)json_array_size(p)) {
        json_t *ids = mixed_prompt(S, p, err, cap);
        if (!ids)
            return -1;
        json_object_set_new(body, "prompt", ids);
    }
    return 0;
}

void srv_native_fill_defaults(srv *S, json_t *body)
{
    /* llama-server's sampling defaults (common_params_sampling), where
     * /v1's are OpenAI's; the server's --temp still wins */
    if (!json_object_get(body, "temperature") && S->temperature < 0)
        json_object_set_new(body, "temperature", json_real(0.8));
    if (!json_object_get(body, "top_k"))
        json_object_set_new(body, "top_k", json_integer(40));
    if (!json_object_get(body, "top_p"))
        json_object_set_new(body, "top_p", json_real(0.95));
    if (!json_object_get(body, "min_p"))
        json_object_set_new(body, "min_p", json_real(0.05));
}

json_t *srv_piece_json(srv *S, int32_t id)
{
    char buf[256];
    size_t len = 0;
    if (hx_tokenizer_token_to_piece(S->native.tok, id, 1, buf, sizeof buf, &len) != HX_OK)
        len = 0;
    json_t *v = json_stringn(buf, len);
    if (v)
        return v;
    v = json_array(); /* part of a character: its bytes, as llama-server gives them */
    for (size_t i = 0; i < len; i++)
        json_array_append_new(v, json_integer((unsigned char)buf[i]));
    return v;
}

/* -ngl N > 0: every layer goes where hetero places it, which is what
 * llama-server's "all layers" means; said plainly when there is no GPU. */
int srv_native_backend_sampling(const srv *S, char *why, size_t cap)
{
    if (!S->native.gpus)
        return 0;
    snprintf(why, cap, "hetero samples on the host, and this server's logits come from a GPU (%d here): leave "
             "backend sampling off", S->native.gpus);
    return -1;
}

int srv_native_check_ngl(srv *S, const char *ngl)
{
    long n = strtol(ngl, NULL, 10);
    const int gpus = count_gpus(S);
    if (strcmp(ngl, "all") && strcmp(ngl, "auto") && n >= 0 && n < (long)S->info.n_layer && gpus) {
        fprintf(stderr, "hetero-server: -ngl %s: hetero places the model's %u layers over the devices itself and "
                "cannot keep only some of them on the GPU; give -ngl all (or 0 for the CPU only), or --devices LIST\n",
                ngl, S->info.n_layer);
        return -1;
    }
    if (!gpus)
        fprintf(stderr, "hetero-server: -ngl %s: no GPU in this build or machine (%s): every layer runs on the CPU\n",
                ngl, hx_runtime_absence_reason(S->rt, HX_FAMILY_CUDA) ? hx_runtime_absence_reason(S->rt, HX_FAMILY_CUDA)
                                                                      : "none found");
    return 0;
}

/* --alias a,b,c: the model's id is the first in alphabetical order, as
 * llama-server's; /models lists them all. */
const char *srv_native_first_alias(const char *list)
{
    static char best[256];
    best[0] = '\0';
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        char one[256];
        snprintf(one, sizeof one, "%.*s", (int)n, p);
        if (n && (!best[0] || strcmp(one, best) < 0))
            snprintf(best, sizeof best, "%s", one);
        p += n + (p[n] == ',');
    }
    return best[0] ? best : list;
}

enum MHD_Result srv_input_tokens(srv *S, struct MHD_Connection *c, const char *body, size_t len)
{
    json_error_t je;
    json_t *o = json_loadb(body, len, 0, &je);
    if (!json_is_object(o)) {
        json_decref(o);
        return srv_error(c, 400, "invalid_request_error", "invalid_json", "The body must be a JSON object");
    }
    char err[512];
    char *prompt = srv_chat_prompt(S, o, err, sizeof err);
    json_decref(o);
    if (!prompt)
        return srv_error(c, 400, "invalid_request_error", "invalid_value", "%s", err);
    size_t n = 0;
    /* counted as a chat completion's prompt is: BOS where the model adds it, special tokens parsed */
    hx_status st = hx_model_tokenize(S->m, prompt, strlen(prompt), 1, 1, NULL, 0, &n);
    free(prompt);
    if (st != HX_OK && st != HX_ERR_RANGE)
        return srv_error(c, 500, "server_error", hx_status_str(st), "%s", hx_last_error());
    return srv_json(c, 200, json_pack("{s:I}", "input_tokens", (json_int_t)n));
}
