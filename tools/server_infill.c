/* /infill: code completion between a prefix and a suffix, as llama-server
 * takes it (input_prefix, input_suffix, input_extra [{filename, text}]
 * for repo-level context, prompt, and the completion's sampling fields),
 * with the model's FIM tokens.  The prompt is built token by token as
 * llama-server's format_prompt_infill builds it (Qwen2.5-Coder's
 * repo-level pattern, arXiv 2409.12186):
 *
 *   [FIM_REP]myproject\n [FIM_SEP]filename0\n text0 ... [FIM_SEP]filename\n
 *   [BOS] [FIM_PRE]prefix prompt [FIM_SUF]suffix [FIM_MID]
 *
 * with the prefix's last 3/4 of n_batch tokens, the suffix's first
 * n_batch/4 - 2 - |prompt|, and the extra context's last n_ctx - n_batch
 * - 2 n_predict tokens.  The answer is /completion's, llama-server's
 * native shape (content, tokens, timings...; streamed with "stream":
 * true). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

typedef struct {
    int32_t *v;
    size_t n, cap;
    int oom;
} toks;

static void push(toks *t, const int32_t *ids, size_t n)
{
    if (t->n + n > t->cap) {
        size_t cap = (t->n + n) * 2 + 16;
        int32_t *v = realloc(t->v, sizeof *v * cap);
        if (!v) {
            t->oom = 1;
            return;
        }
        t->v = v;
        t->cap = cap;
    }
    if (n) /* an empty piece may come as NULL */
        memcpy(t->v + t->n, ids, sizeof *ids * n);
    t->n += n;
}

static void push1(toks *t, int32_t id) { push(t, &id, 1); }

/* common_tokenize(text, add_special false, parse_special) appended. */
static int push_text(srv *S, toks *t, const char *text, size_t len, int parse_special)
{
    size_t n = 0;
    hx_status st = hx_model_tokenize(S->m, text, len, 0, parse_special, NULL, 0, &n);
    if (st != HX_OK && st != HX_ERR_RANGE)
        return -1;
    int32_t *ids = malloc(sizeof *ids * (n ? n : 1));
    if (!ids || (n && hx_model_tokenize(S->m, text, len, 0, parse_special, ids, n, &n) != HX_OK)) {
        free(ids);
        return -1;
    }
    push(t, ids, n);
    free(ids);
    return t->oom ? -1 : 0;
}

/* tokenize_mixed(json, false, false): a string, or an array of strings
 * and token ids. */
static int push_mixed(srv *S, toks *t, json_t *v, const char *field, char *err, size_t cap)
{
    if (json_is_string(v))
        return push_text(S, t, json_string_value(v), json_string_length(v), 0) ? (snprintf(err, cap, "%s: %s", field,
                                                                                           hx_last_error()), -1) : 0;
    if (!json_is_array(v))
        return snprintf(err, cap, "\"%s\" must be a string or an array of strings and token ids", field), -1;
    for (size_t i = 0; i < json_array_size(v); i++) {
        json_t *e = json_array_get(v, i);
        if (json_is_string(e)) {
            if (push_text(S, t, json_string_value(e), json_string_length(e), 0))
                return snprintf(err, cap, "%s: %s", field, hx_last_error()), -1;
        } else if (json_is_integer(e) && json_integer_value(e) >= 0 && json_integer_value(e) < S->info.n_vocab) {
            push1(t, (int32_t)json_integer_value(e));
        } else {
            return snprintf(err, cap, "\"%s\" element %zu is neither a string nor a token id", field, i), -1;
        }
    }
    return 0;
}

static long long min_ll(long long a, long long b) { return a < b ? a : b; }
static long long max_ll(long long a, long long b) { return a > b ? a : b; }

int srv_infill_tokens(srv *S, json_t *o, int32_t **out, size_t *n_out, char *err, size_t cap)
{
    const hx_fim_tokens *F = &S->fim;
    json_t *prompt = json_object_get(o, "prompt"), *extra = json_object_get(o, "input_extra");
    if (prompt && !json_is_string(prompt))
        return snprintf(err, cap, "\"prompt\" must be a string"), -1;
    if (!json_object_get(o, "input_prefix"))
        return snprintf(err, cap, "\"input_prefix\" is required"), -1;
    if (!json_object_get(o, "input_suffix"))
        return snprintf(err, cap, "\"input_suffix\" is required"), -1;
    if (extra && !json_is_array(extra))
        return snprintf(err, cap, "\"input_extra\" must be an array of {\"filename\": string, \"text\": string}"), -1;
    for (size_t i = 0; i < json_array_size(extra); i++) {
        json_t *ch = json_array_get(extra, i), *fn = json_object_get(ch, "filename");
        if (!json_is_string(json_object_get(ch, "text")))
            return snprintf(err, cap, "extra_context chunk must contain a \"text\" field with a string value"), -1;
        if (fn && !json_is_string(fn))
            return snprintf(err, cap, "extra_context chunk's \"filename\" field must be a string"), -1;
    }
    toks pre = {0}, suf = {0}, ext = {0}, pr = {0}, all = {0};
    int rc = push_mixed(S, &pre, json_object_get(o, "input_prefix"), "input_prefix", err, cap);
    if (!rc)
        rc = push_mixed(S, &suf, json_object_get(o, "input_suffix"), "input_suffix", err, cap);
    if (!rc && prompt && push_text(S, &pr, json_string_value(prompt), json_string_length(prompt), 1))
        rc = (snprintf(err, cap, "prompt: %s", hx_last_error()), -1);
    /* The repo-level context. */
    if (!rc && F->rep >= 0) {
        push1(&ext, F->rep);
        rc = push_text(S, &ext, "myproject\n", 10, 0);
    }
    for (size_t i = 0; !rc && i < json_array_size(extra); i++) {
        json_t *ch = json_array_get(extra, i);
        const char *fn = json_string_value(json_object_get(ch, "filename"));
        json_t *text = json_object_get(ch, "text");
        if (F->sep >= 0) {
            char name[1024];
            int ln = snprintf(name, sizeof name, "%s\n", fn ? fn : "tmp");
            push1(&ext, F->sep);
            rc = push_text(S, &ext, name, (size_t)ln < sizeof name ? (size_t)ln : sizeof name - 1, 0);
        } else {
            static const char chunk[] = "\n\n--- snippet ---\n\n";
            rc = push_text(S, &ext, chunk, sizeof chunk - 1, 0);
        }
        if (!rc)
            rc = push_text(S, &ext, json_string_value(text), json_string_length(text), 0);
    }
    if (!rc && F->sep >= 0) {
        push1(&ext, F->sep);
        rc = push_text(S, &ext, "filename\n", 9, 0);
    }
    if (!rc) {
        /* The sizes as llama-server takes them (its n_batch, n_predict, slot context). */
        const long long nb = S->n_batch, np = S->n_predict > 0 ? S->n_predict : -1, nc = S->info.n_ctx;
        const long long n_pre = min_ll((long long)pre.n, 3 * (nb / 4));
        const long long n_suf = min_ll((long long)suf.n, max_ll(0, nb / 4 - (2 + (long long)pr.n)));
        const long long n_ext = min_ll(max_ll(0, nc - nb - 2 * np), (long long)ext.n);
        push(&all, ext.v + ext.n - n_ext, (size_t)n_ext);
        if (S->info.add_bos && S->info.bos >= 0)
            push1(&all, S->info.bos);
        push1(&all, F->pre);
        push(&all, pre.v + pre.n - n_pre, (size_t)n_pre);
        push(&all, pr.v, pr.n);
        push1(&all, F->suf);
        push(&all, suf.v, (size_t)n_suf);
        push1(&all, F->mid);
        if (all.oom)
            rc = (snprintf(err, cap, "out of memory"), -1);
    }
    free(pre.v);
    free(suf.v);
    free(ext.v);
    free(pr.v);
    if (rc) {
        free(all.v);
        return -1;
    }
    *out = all.v;
    *n_out = all.n;
    return 0;
}

enum MHD_Result srv_infill(srv *S, struct MHD_Connection *c, const char *body, size_t len, srv_tenant *tenant)
{
    char missing[96] = "";
    if (S->fim.pre < 0)
        strcat(missing, "prefix token is missing. ");
    if (S->fim.suf < 0)
        strcat(missing, "suffix token is missing. ");
    if (S->fim.mid < 0)
        strcat(missing, "middle token is missing. ");
    if (missing[0])
        return srv_error(c, 501, "not_supported_error", NULL, "Infill is not supported by this model: %s", missing);
    json_error_t je;
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!o || !json_is_object(o)) {
        json_decref(o);
        return srv_error(c, 400, "invalid_request_error", "invalid_json", "The body must be a JSON object%s%s",
                         o ? "" : ": ", o ? "" : je.text);
    }
    char err[512];
    int32_t *ids = NULL;
    size_t n = 0;
    json_t *np = json_object_get(o, "n_predict"), *indent = json_object_get(o, "n_indent");
    if (np && !json_is_null(np) && !json_is_integer(np)) {
        json_decref(o);
        return srv_error(c, 400, "invalid_request_error", "invalid_type", "'n_predict' must be an integer");
    }
    if (indent && !json_is_null(indent) && !(json_is_integer(indent) && json_integer_value(indent) == 0)) {
        json_decref(o);
        return srv_error(c, 400, "invalid_request_error", "unsupported_parameter", "'n_indent' is not supported");
    }
    if (srv_infill_tokens(S, o, &ids, &n, err, sizeof err)) {
        json_decref(o);
        return srv_error(c, 400, "invalid_request_error", NULL, "%s", err);
    }
    /* The completion: the prompt's tokens, n_predict as max_tokens
     * (llama-server's -1 and its default: up to the context). */
    json_t *tokens = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(tokens, json_integer(ids[i]));
    free(ids);
    long long max = S->n_predict > 0 ? S->n_predict : (long long)S->info.n_ctx;
    if (json_is_integer(np))
        max = json_integer_value(np) > 0 ? json_integer_value(np) : (long long)S->info.n_ctx;
    json_object_del(o, "input_prefix");
    json_object_del(o, "input_suffix");
    json_object_del(o, "input_extra");
    json_object_del(o, "n_indent");
    json_object_set_new(o, "prompt", tokens);
    if (!json_object_get(o, "max_tokens"))
        json_object_set_new(o, "n_predict", json_integer(max));
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!text)
        return srv_error(c, 500, "server_error", NULL, "out of memory");
    /* answered as /completion is, llama-server's native shape (its infill is a completion task) */
    enum MHD_Result ret = srv_completion(S, c, text, strlen(text), SRV_NATIVE, tenant);
    free(text);
    return ret;
}
