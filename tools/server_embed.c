/* Embeddings and reranking, as llama-server serves them: /v1/embeddings
 * (OpenAI's shape: `input` a string, an array of strings or of token-id
 * arrays, `encoding_format` float or base64, usage), /embedding and
 * /embeddings (llama-server's own: `content`, per input {index,
 * embedding: [[...]]}, every token's row with pooling none), and
 * /rerank, /reranking, /v1/rerank, /v1/reranking (query and documents or
 * TEI's texts, top_n, results sorted by relevance_score) for a model
 * with a classifier head.  Each input is one embeddings request of the
 * engine, so concurrent requests share its batches with each other and
 * with completions. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

#define NOT_SUPPORTED(c, ...) srv_error(c, 501, "not_supported_error", NULL, __VA_ARGS__)
#define BAD(c, ...) srv_error(c, 400, "invalid_request_error", NULL, __VA_ARGS__)

/* One input's tokens, owned. */
typedef struct {
    int32_t *ids;
    size_t n;
} srv_input;

static void inputs_free(srv_input *in, size_t n)
{
    for (size_t i = 0; in && i < n; i++)
        free(in[i].ids);
    free(in);
}

/* Tokenizes text as llama-server does for embeddings (add_special: BOS
 * and EOS where the model asks; special tokens parsed) or for a rerank
 * prompt (neither, and the query and document without parsing special
 * tokens); 0, or -1 with the message in err. */
static int tokenize_as(srv *S, const char *text, size_t len, int add_special, int parse_special, srv_input *out,
                       char *err, size_t cap)
{
    size_t n = 0;
    hx_status st = hx_model_tokenize(S->m, text, len, add_special, parse_special, NULL, 0, &n);
    if (st != HX_OK && st != HX_ERR_RANGE)
        return snprintf(err, cap, "%s", hx_last_error()), -1;
    if (!(out->ids = malloc(sizeof *out->ids * (n ? n : 1))))
        return snprintf(err, cap, "out of memory"), -1;
    if (n && hx_model_tokenize(S->m, text, len, add_special, parse_special, out->ids, n, &n) != HX_OK)
        return snprintf(err, cap, "%s", hx_last_error()), -1;
    out->n = n;
    return 0;
}

static int tokenize(srv *S, const char *text, size_t len, int add_special, srv_input *out, char *err, size_t cap)
{
    return tokenize_as(S, text, len, add_special, 1, out, err, cap);
}

/* An array of token ids into out; -1 when an element is not one. */
static int token_array(srv *S, json_t *a, srv_input *out, char *err, size_t cap, size_t which)
{
    out->n = json_array_size(a);
    if (!(out->ids = malloc(sizeof *out->ids * (out->n ? out->n : 1))))
        return snprintf(err, cap, "out of memory"), -1;
    for (size_t i = 0; i < out->n; i++) {
        json_t *t = json_array_get(a, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= S->info.n_vocab)
            return snprintf(err, cap, "input %zu: element %zu is not a token id (0 to %u)", which, i,
                            S->info.n_vocab - 1), -1;
        out->ids[i] = (int32_t)json_integer_value(t);
    }
    return 0;
}

static int is_token_array(json_t *v)
{
    return json_is_array(v) && json_array_size(v) && json_is_integer(json_array_get(v, 0));
}

/* `input` / `content` as llama-server takes it: a string, an array of
 * token ids (one input), or an array of strings and token-id arrays. */
static int parse_inputs(srv *S, json_t *v, srv_input **out, size_t *n, char *err, size_t cap)
{
    const int many = json_is_array(v) && !is_token_array(v);
    *n = many ? json_array_size(v) : 1;
    if (many && *n == 0)
        return snprintf(err, cap, "\"input\" must not be empty"), -1;
    if (!(*out = calloc(*n, sizeof **out)))
        return snprintf(err, cap, "out of memory"), -1;
    for (size_t i = 0; i < *n; i++) {
        json_t *e = many ? json_array_get(v, i) : v;
        int rc;
        if (json_is_string(e))
            rc = tokenize(S, json_string_value(e), json_string_length(e), 1, &(*out)[i], err, cap);
        else if (json_is_array(e))
            rc = token_array(S, e, &(*out)[i], err, cap, i);
        else
            return snprintf(err, cap, "input %zu must be a string or an array of token ids", i), -1;
        if (rc)
            return -1;
        if ((*out)[i].n == 0)
            return snprintf(err, cap, "Input content cannot be empty (input %zu has no tokens)", i), -1;
        if ((*out)[i].n > S->info.n_ctx)
            return snprintf(err, cap, "input %zu is %zu tokens; the context is %u tokens", i, (*out)[i].n,
                            S->info.n_ctx), -1;
    }
    return 0;
}

/* Runs the inputs as embeddings requests of the engine, all submitted
 * before any is waited for (so they share steps); out[i] gets input i's
 * floats (n_out[i] of them).  0, or -1 with the status and message. */
static int embed_all(srv *S, srv_input *in, size_t n, hx_embed_options eo, float **out, size_t *n_out,
                     unsigned *status, char *err, size_t cap)
{
    uint64_t *ids = calloc(n, sizeof *ids);
    int rc = ids ? 0 : -1;
    size_t submitted = 0;
    *status = 500;
    if (!ids)
        snprintf(err, cap, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) {
        const size_t floats = eo.pooling == HX_POOLING_NONE ? in[i].n * S->info.n_embd
                              : eo.pooling == HX_POOLING_RANK ? S->embd_info.n_cls_out : S->info.n_embd;
        hx_request r = hx_request_default();
        r.tokens = in[i].ids;
        r.n_tokens = in[i].n;
        r.embed_request = 1;
        r.embed = eo;
        r.embedding = out[i] = malloc(sizeof(float) * floats);
        r.embedding_cap = floats;
        hx_status st = r.embedding ? hx_engine_submit(S->e, &r, &ids[i]) : HX_ERR_NO_MEMORY;
        if (st) {
            *status = st == HX_ERR_NO_MEMORY ? 503 : st == HX_ERR_RANGE || st == HX_ERR_INVALID_ARG ? 400 : 500;
            snprintf(err, cap, "input %zu: %s", i, hx_last_error());
            rc = -1;
        } else {
            submitted++;
        }
    }
    for (size_t i = 0; i < submitted; i++) {
        hx_request_result res;
        if (hx_engine_wait(S->e, ids[i], -1, &res) != HX_OK || res.status != HX_OK) {
            if (!rc)
                snprintf(err, cap, "input %zu: %s", i, res.error);
            rc = -1;
        }
        n_out[i] = res.embedding_n;
    }
    free(ids);
    return rc;
}

static json_t *floats_json(const float *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, json_real(v[i]));
    return a;
}

static char *base64(const void *data, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = data;
    char *out = malloc(4 * ((n + 2) / 3) + 1), *o = out;
    for (size_t i = 0; out && i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        *o++ = tab[v >> 18 & 63];
        *o++ = tab[v >> 12 & 63];
        *o++ = i + 1 < n ? tab[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? tab[v & 63] : '=';
    }
    if (out)
        *o = '\0';
    return out;
}

/* The request's embd_normalize (llama-server's), else 2. */
static int get_normalize(json_t *o, int32_t *out, char *err, size_t cap)
{
    json_t *v = json_object_get(o, "embd_normalize");
    *out = 2;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < -1 || json_integer_value(v) > 100)
        return snprintf(err, cap, "'embd_normalize' must be an integer: -1 none, 0 max, 1 taxicab, 2 L2, p > 2"), -1;
    *out = (int32_t)json_integer_value(v);
    return 0;
}

static const char *model_of(srv *S, json_t *o)
{
    json_t *m = json_object_get(o, "model");
    return json_is_string(m) ? json_string_value(m) : S->model_name;
}

enum MHD_Result srv_embeddings(srv *S, struct MHD_Connection *c, const char *body, size_t len, int oai,
                               srv_tenant *tenant)
{
    json_error_t je;
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!o || !json_is_object(o)) {
        json_decref(o);
        return BAD(c, "The body must be a JSON object: %s", o ? "" : je.text);
    }
    char err[512] = "";
    json_t *input = json_object_get(o, "input");
    if (!input && (input = json_object_get(o, "content")))
        oai = 0; /* "content" is llama-server's own shape */
    const char *fmt = json_string_value(json_object_get(o, "encoding_format"));
    json_t *fmt_v = json_object_get(o, "encoding_format");
    hx_embed_options eo = {S->pooling, 2};
    srv_input *in = NULL;
    size_t n = 0;
    enum MHD_Result ret;
    if (!input) {
        ret = BAD(c, "\"input\" or \"content\" must be provided");
    } else if (fmt_v && !json_is_null(fmt_v) && (!fmt || (strcmp(fmt, "float") && strcmp(fmt, "base64")))) {
        ret = BAD(c, "The format to return the embeddings in. Can be either float or base64");
    } else if (oai && S->pooling == HX_POOLING_NONE) {
        ret = BAD(c, "Pooling type 'none' is not OAI compatible. Please use a different pooling type");
    } else if (S->pooling == HX_POOLING_RANK) {
        ret = BAD(c, "This server ranks (pooling rank): use /v1/rerank");
    } else if (get_normalize(o, &eo.normalize, err, sizeof err) ||
               parse_inputs(S, input, &in, &n, err, sizeof err)) {
        ret = BAD(c, "%s", err);
    } else {
        size_t total = 0;
        for (size_t i = 0; i < n; i++)
            total += in[i].n;
        if (!srv_admit(S, c, tenant, (uint32_t)(total > UINT32_MAX ? UINT32_MAX : total), &ret)) {
            inputs_free(in, n);
            json_decref(o);
            return ret;
        }
        float **vec = calloc(n, sizeof *vec);
        size_t *nv = calloc(n, sizeof *nv);
        unsigned status = 500;
        if (!vec || !nv) {
            ret = srv_error(c, 500, "server_error", NULL, "out of memory");
        } else if (embed_all(S, in, n, eo, vec, nv, &status, err, sizeof err)) {
            ret = srv_error(c, status, status == 400 ? "invalid_request_error" : "server_error", NULL, "%s", err);
        } else {
            json_t *data = json_array();
            const int b64 = fmt && !strcmp(fmt, "base64");
            for (size_t i = 0; i < n; i++) {
                json_t *e;
                if (!oai) {
                    /* [[row], ...]: every token's with pooling none, else the one pooled. */
                    json_t *rows = json_array();
                    const size_t D = S->info.n_embd, nr = S->pooling == HX_POOLING_NONE ? nv[i] / D : 1;
                    for (size_t r = 0; r < nr; r++)
                        json_array_append_new(rows, floats_json(vec[i] + r * (nv[i] / nr), nv[i] / nr));
                    e = json_pack("{s:I,s:o}", "index", (json_int_t)i, "embedding", rows);
                } else if (b64) {
                    char *text = base64(vec[i], nv[i] * sizeof(float));
                    e = json_pack("{s:s,s:I,s:s,s:s}", "embedding", text ? text : "", "index", (json_int_t)i,
                                  "object", "embedding", "encoding_format", "base64");
                    free(text);
                } else {
                    e = json_pack("{s:o,s:I,s:s}", "embedding", floats_json(vec[i], nv[i]), "index", (json_int_t)i,
                                  "object", "embedding");
                }
                json_array_append_new(data, e);
            }
            pthread_mutex_lock(&S->metrics.lock);
            S->metrics.prompt_tokens += total;
            pthread_mutex_unlock(&S->metrics.lock);
            ret = srv_json(c, 200,
                           oai ? json_pack("{s:s,s:s,s:{s:I,s:I},s:o}", "model", model_of(S, o), "object", "list",
                                           "usage", "prompt_tokens", (json_int_t)total, "total_tokens",
                                           (json_int_t)total, "data", data)
                               : data);
        }
        for (size_t i = 0; vec && i < n; i++)
            free(vec[i]);
        free(vec);
        free(nv);
        srv_request_end(S, tenant);
    }
    inputs_free(in, n);
    json_decref(o);
    return ret;
}

/* format_prompt_rerank: the file's rerank template with {query} and
 * {document} put in, else BOS query EOS doc EOS where the model adds
 * them. */
static int rerank_prompt(srv *S, const char *query, const char *doc, srv_input *out, char *err, size_t cap)
{
    const char *tpl = hx_model_chat_template_named(S->m, "rerank");
    if (tpl) {
        size_t lq = strlen(query), ld = strlen(doc), n = 0, room = strlen(tpl) + 1;
        for (const char *p = tpl; (p = strchr(p, '{')); p++)
            room += lq + ld;
        char *text = malloc(room);
        if (!text)
            return snprintf(err, cap, "out of memory"), -1;
        for (const char *p = tpl; *p;) {
            if (!strncmp(p, "{query}", 7)) {
                memcpy(text + n, query, lq), n += lq, p += 7;
            } else if (!strncmp(p, "{document}", 10)) {
                memcpy(text + n, doc, ld), n += ld, p += 10;
            } else {
                text[n++] = *p++;
            }
        }
        int rc = tokenize(S, text, n, 0, out, err, cap);
        free(text);
        return rc;
    }
    srv_input q = {0}, d = {0};
    if (tokenize_as(S, query, strlen(query), 0, 0, &q, err, cap) ||
        tokenize_as(S, doc, strlen(doc), 0, 0, &d, err, cap)) {
        free(q.ids);
        free(d.ids);
        return -1;
    }
    out->ids = malloc(sizeof *out->ids * (q.n + d.n + 3));
    out->n = 0;
    if (out->ids) {
        if (S->info.add_bos && S->info.bos >= 0)
            out->ids[out->n++] = S->info.bos;
        memcpy(out->ids + out->n, q.ids, sizeof *q.ids * q.n), out->n += q.n;
        if (S->info.add_eos && S->info.eos >= 0)
            out->ids[out->n++] = S->info.eos;
        memcpy(out->ids + out->n, d.ids, sizeof *d.ids * d.n), out->n += d.n;
        if (S->info.add_eos && S->info.eos >= 0)
            out->ids[out->n++] = S->info.eos;
    }
    free(q.ids);
    free(d.ids);
    return out->ids ? 0 : (snprintf(err, cap, "out of memory"), -1);
}

typedef struct {
    size_t index;
    double score;
} ranked;

static int by_score(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    return (x->score < y->score) - (x->score > y->score);
}

enum MHD_Result srv_rerank(srv *S, struct MHD_Connection *c, const char *body, size_t len, srv_tenant *tenant)
{
    if (S->pooling != HX_POOLING_RANK)
        return NOT_SUPPORTED(c, "This server does not support reranking. Start it with `--reranking` (a model with "
                                "a classifier head, cls.output.weight)");
    json_error_t je;
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!o || !json_is_object(o)) {
        json_decref(o);
        return BAD(c, "The body must be a JSON object: %s", o ? "" : je.text);
    }
    json_t *query = json_object_get(o, "query"), *docs = json_object_get(o, "documents");
    const int tei = json_object_get(o, "texts") != NULL;
    if (!docs)
        docs = json_object_get(o, "texts");
    const size_t nd = json_array_size(docs);
    json_t *top = json_object_get(o, "top_n");
    int return_text = 0;
    char err[512] = "";
    enum MHD_Result ret;
    srv_input *in = NULL;
    if (!query) {
        ret = BAD(c, "\"query\" must be provided");
    } else if (!json_is_string(query)) {
        ret = BAD(c, "\"query\" must be a string");
    } else if (!json_is_array(docs) || !nd) {
        ret = BAD(c, "\"documents\" must be a non-empty string array");
    } else if (top && !json_is_null(top) && (!json_is_integer(top) || json_integer_value(top) < 0)) {
        ret = BAD(c, "\"top_n\" must be a non-negative integer");
    } else if (json_object_get(o, "return_text") && !json_is_boolean(json_object_get(o, "return_text"))) {
        ret = BAD(c, "\"return_text\" must be a boolean");
    } else if (!(in = calloc(nd, sizeof *in))) {
        ret = srv_error(c, 500, "server_error", NULL, "out of memory");
    } else {
        return_text = tei && json_is_true(json_object_get(o, "return_text"));
        int rc = 0;
        size_t total = 0;
        for (size_t i = 0; !rc && i < nd; i++) {
            json_t *d = json_array_get(docs, i);
            if (!json_is_string(d))
                rc = (snprintf(err, sizeof err, "\"documents\" must be a non-empty string array (element %zu)", i), -1);
            else
                rc = rerank_prompt(S, json_string_value(query), json_string_value(d), &in[i], err, sizeof err);
            if (!rc && in[i].n > S->info.n_ctx)
                rc = (snprintf(err, sizeof err, "document %zu: the prompt is %zu tokens; the context is %u tokens", i,
                              in[i].n, S->info.n_ctx), -1);
            if (!rc && !in[i].n)
                rc = (snprintf(err, sizeof err, "document %zu: an empty prompt", i), -1);
            total += rc ? 0 : in[i].n;
        }
        if (rc) {
            ret = BAD(c, "%s", err);
        } else if (srv_admit(S, c, tenant, (uint32_t)(total > UINT32_MAX ? UINT32_MAX : total), &ret)) {
            float **vec = calloc(nd, sizeof *vec);
            size_t *nv = calloc(nd, sizeof *nv);
            ranked *rk = calloc(nd, sizeof *rk);
            unsigned status = 500;
            hx_embed_options eo = {HX_POOLING_RANK, -1};
            if (!vec || !nv || !rk) {
                ret = srv_error(c, 500, "server_error", NULL, "out of memory");
            } else if (embed_all(S, in, nd, eo, vec, nv, &status, err, sizeof err)) {
                ret = srv_error(c, status, status == 400 ? "invalid_request_error" : "server_error", NULL, "%s", err);
            } else {
                for (size_t i = 0; i < nd; i++)
                    rk[i] = (ranked){i, nv[i] ? vec[i][0] : 0.0};
                qsort(rk, nd, sizeof *rk, by_score);
                size_t keep = top && json_is_integer(top) && (size_t)json_integer_value(top) < nd
                                  ? (size_t)json_integer_value(top) : nd;
                json_t *results = json_array();
                for (size_t i = 0; i < keep; i++) {
                    json_t *e = json_pack("{s:I,s:f}", "index", (json_int_t)rk[i].index,
                                          tei ? "score" : "relevance_score", rk[i].score);
                    if (return_text)
                        json_object_set(e, "text", json_array_get(docs, rk[i].index));
                    json_array_append_new(results, e);
                }
                ret = srv_json(c, 200,
                               tei ? results
                                   : json_pack("{s:s,s:s,s:{s:I,s:I},s:o}", "model", model_of(S, o), "object", "list",
                                               "usage", "prompt_tokens", (json_int_t)total, "total_tokens",
                                               (json_int_t)total, "results", results));
            }
            for (size_t i = 0; vec && i < nd; i++)
                free(vec[i]);
            free(vec);
            free(nv);
            free(rk);
            srv_request_end(S, tenant);
        }
    }
    inputs_free(in, nd);
    json_decref(o);
    return ret;
}

int srv_embed_setup(srv *S, int embedding_only, const char *pooling, uint32_t n_batch)
{
    S->embedding_only = embedding_only;
    S->n_batch = n_batch;
    hx_status st = hx_model_embedding_info_get(S->m, &S->embd_info);
    if (st == HX_OK)
        st = hx_model_fim_tokens(S->m, &S->fim);
    S->pooling = S->embd_info.pooling;
    if (st == HX_OK && pooling)
        st = hx_pooling_parse(pooling, &S->pooling);
    if (st == HX_OK && S->pooling == HX_POOLING_RANK && !S->embd_info.n_cls_out) {
        fprintf(stderr, "hetero-server: pooling rank: the model has no classifier head (cls.weight, "
                        "cls.output.weight)\n");
        st = HX_ERR_INVALID_ARG;
    } else if (st)
        fprintf(stderr, "hetero-server: %s\n", hx_last_error());
    if (st == HX_OK && embedding_only)
        fprintf(stderr, "hetero-server: embeddings only (pooling %s); completions are refused\n",
                hx_pooling_str(S->pooling));
    return st ? -1 : 0;
}
