/* hetero-server's HTTP side: OpenAI-style error objects, JSON responses,
 * and the routes (which need an API key, which drain on SIGTERM). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/server.h"

double srv_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct timespec srv_after_ms(long ms)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += ms % 1000 * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

/* Set by srv_route, which every answer passes: the server, for the
 * status counts and the drain's Connection: close. */
static srv *the_server;

enum MHD_Result srv_json_retry(struct MHD_Connection *c, unsigned status, json_t *body, unsigned retry_after)
{
    if (srv_captured) { /* a prompt of a batch (server_batch.c): its answer is kept */
        srv_captured->status = status;
        srv_captured->body = body;
        return body ? MHD_YES : MHD_NO;
    }
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text)
        return MHD_NO;
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "application/json");
    if (the_server)
        srv_cors_headers(the_server, c, r);
    if (retry_after) {
        char secs[16];
        snprintf(secs, sizeof secs, "%u", retry_after);
        MHD_add_response_header(r, "Retry-After", secs);
    }
    if (the_server && the_server->draining)
        MHD_add_response_header(r, "Connection", "close");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    if (the_server)
        srv_metrics_status(&the_server->metrics, status);
    return ret;
}

enum MHD_Result srv_json(struct MHD_Connection *c, unsigned status, json_t *body)
{
    /* A 503 is temporary: say when to come back (RFC 9110 10.2.3). */
    return srv_json_retry(c, status, body, status == 503 ? 1 : 0);
}

/* The error object alone, for a stream's error event too. */
json_t *srv_error_object(const char *type, const char *code, const char *message)
{
    return json_pack("{s:{s:s,s:s,s:s*}}", "error", "message", message, "type", type, "code", code);
}

enum MHD_Result srv_error(struct MHD_Connection *c, unsigned status, const char *type, const char *code,
                          const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* A message quoting bad input may not be valid UTF-8: jansson would
     * refuse it, so such bytes become '?'. */
    for (char *p = msg; *p; p++)
        if ((unsigned char)*p >= 0x80)
            *p = '?';
    return srv_json(c, status, srv_error_object(type, code, msg));
}

/* The tenant of the request's API key: 1 when it may go on, else the
 * 401 was queued. */
static int authorize(srv *S, struct MHD_Connection *c, srv_tenant **t, enum MHD_Result *ret)
{
    *t = NULL;
    if (!S->tenants.n)
        return 1;
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    const char *xkey = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Api-Key");
    if ((*t = srv_tenant_find(&S->tenants, auth, xkey)))
        return 1;
    *ret = srv_error(c, 401, "authentication_error", "invalid_api_key",
                     auth || xkey ? "Incorrect API key provided."
                                  : "No API key provided: send 'Authorization: Bearer KEY'.");
    return 0;
}

/* What ends a wait in a tenant's queue: the drain, or the client gone. */
typedef struct {
    srv *S;
    struct MHD_Connection *c;
} waiter;

static int give_up(void *arg)
{
    waiter *w = arg;
    return w->S->draining || srv_client_gone(w->c);
}

static enum MHD_Result rate_limited(srv *S, struct MHD_Connection *c, srv_tenant *t, unsigned retry)
{
    char msg[320];
    snprintf(msg, sizeof msg, "Rate limit reached for '%s' (%u concurrent, %u queued, %u tokens per minute); retry "
             "in %u s.", t->name, t->max_concurrent, t->queue, t->tokens_per_minute, retry);
    (void)S;
    return srv_json_retry(c, 429, srv_error_object("rate_limit_error", "rate_limit_exceeded", msg), retry);
}

int srv_admit(srv *S, struct MHD_Connection *c, srv_tenant *t, uint32_t prompt_tokens, enum MHD_Result *ret)
{
    /* The tenant's limits first: a request waiting in its tenant's queue
     * holds none of the server's --max-requests slots, so one tenant's
     * queue cannot fill them. */
    if (t) {
        int gave_up = 0;
        waiter w = {S, c};
        unsigned retry = srv_tenant_enter(&S->tenants, t, prompt_tokens, give_up, &w, &gave_up);
        if (retry) {
            *ret = rate_limited(S, c, t, retry);
            return 0;
        }
        if (gave_up) {
            *ret = S->draining ? srv_error(c, 503, "unavailable_error", "shutting_down", "The server is shutting down.")
                               : MHD_NO;
            return 0;
        }
    }
    pthread_mutex_lock(&S->metrics.lock);
    int busy = S->metrics.in_flight >= S->max_in_flight;
    if (!busy)
        S->metrics.in_flight++;
    pthread_mutex_unlock(&S->metrics.lock);
    if (busy) {
        if (t)
            srv_tenant_leave(&S->tenants, t);
        *ret = srv_error(c, 503, "unavailable_error", "server_busy",
                         "The server has %u requests in flight, its limit (--max-requests); retry later.",
                         S->max_in_flight);
        return 0;
    }
    return 1;
}

void srv_request_end(srv *S, srv_tenant *t)
{
    if (t)
        srv_tenant_leave(&S->tenants, t);
    pthread_mutex_lock(&S->metrics.lock);
    S->metrics.in_flight--;
    pthread_mutex_unlock(&S->metrics.lock);
    srv_sleep_touch(S);
}

/* llama-server's routes; /completion and /completions are its own
 * completion, /v1/completions OpenAI's. */
enum {
    MODELS, TOKENIZE, DETOKENIZE, V1_COMPLETIONS, CHAT, METRICS, COMPLETION, PROPS, SLOTS, APPLY_TEMPLATE,
    EMBEDDINGS_OAI, EMBEDDINGS, RERANK, INFILL, INPUT_TOKENS, MESSAGES, COUNT_TOKENS, RESPONSES, RESPONSE_TOKENS, PREDICT
};

static enum MHD_Result dispatch(srv *S, struct MHD_Connection *c, int route, int post, const char *body, size_t len,
                                srv_tenant *t)
{
    switch (route) {
    case MODELS: return srv_models(S, c);
    case TOKENIZE: return srv_tokenize(S, c, body, len, 0);
    case DETOKENIZE: return srv_detokenize(S, c, body, len);
    case PROPS: return srv_props(S, c, post, body, len);
    case SLOTS: return srv_slots(S, c);
    case APPLY_TEMPLATE: return srv_apply_template(S, c, body, len);
    case INPUT_TOKENS: return srv_input_tokens(S, c, body, len);
    case EMBEDDINGS_OAI:
    case EMBEDDINGS: return srv_embeddings(S, c, body, len, route == EMBEDDINGS_OAI, t);
    case RERANK: return srv_rerank(S, c, body, len, t);
    case COUNT_TOKENS: return srv_anthropic(S, c, body, len, 1, t);
    case RESPONSE_TOKENS: return srv_responses(S, c, body, len, 1, t);
    default:
        /* --embedding serves embeddings only, as llama-server's. */
        if (S->embedding_only)
            return srv_error(c, 501, "not_supported_error", NULL,
                             "This server does not support completions. Start it without `--embeddings`");
        if (route == INFILL)
            return srv_infill(S, c, body, len, t);
        if (route == MESSAGES)
            return srv_anthropic(S, c, body, len, 0, t);
        if (route == RESPONSES)
            return srv_responses(S, c, body, len, 0, t);
        if (route != CHAT && srv_batch_size(body, len)) /* several prompts (server_batch.c) */
            return srv_batch(S, c, body, len, route == COMPLETION ? SRV_NATIVE : 0, t);
        return srv_completion(S, c, body, len, route == COMPLETION ? SRV_NATIVE : route == CHAT, t);
    }
}

enum MHD_Result srv_route(srv *S, struct MHD_Connection *c, const char *method, const char *url, const char *body,
                          size_t len)
{
    the_server = S;
    /* A CORS preflight, on any path, before any key is asked for. */
    srv_metrics_monitoring_read(!strcmp(method, "OPTIONS"));
    if (!strcmp(method, "OPTIONS"))
        return srv_cors_preflight(S, c);
    /* HEAD is GET without the body (libmicrohttpd leaves the body out). */
    const int post = !strcmp(method, "POST"), get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    if (!strncmp(url, "/v1/", 4) && (!strcmp(url + 3, "/chat/completions") || !strcmp(url + 3, "/health") ||
                                     !strcmp(url + 3, "/chat/completions/input_tokens")))
        url += 3; /* the same routes with or without /v1, as llama-server */
    srv_metrics_monitoring_read(get); /* /health, the page, /machine; the routes below say again */
    const char *aip_health = srv_predict_health(); /* Vertex AI's names for two routes (server_predict.c) */
    if ((!strcmp(url, "/health") || (aip_health && !strcmp(url, aip_health))) && get)
        return S->draining ? srv_error(c, 503, "unavailable_error", "shutting_down", "The server is shutting down.")
                           : srv_json(c, 200, json_pack("{s:s}", "status", "ok"));
    /* The web page is public; /machine follows the keys as /metrics does. */
    enum MHD_Result page = MHD_NO;
    if (srv_webui(S, c, method, url, &page))
        return page;
    if (!strcmp(url, "/machine")) {
        srv_tenant *who;
        if (!get)
            return srv_error(c, 405, "invalid_request_error", "method_not_allowed", "/machine takes GET, not %s.",
                             method);
        if (!S->metrics_public && !authorize(S, c, &who, &page))
            return page;
        srv_awake_enter(S, 0); /* asleep: the counters as they were (server_sleep.c) */
        page = srv_machine_page(S, c);
        srv_awake_leave(S, 0);
        return page;
    }
    /* llama-server's routes; /completion and /completions are its own
     * completion, /v1/completions OpenAI's. */
    const struct { /* not static: the prediction route comes from the environment */
        const char *path;
        int route, post, get;
    } routes[] = {{"/v1/models", MODELS, 0, 1}, {"/models", MODELS, 0, 1}, {"/tokenize", TOKENIZE, 1, 0},
                  {"/detokenize", DETOKENIZE, 1, 0}, {"/v1/completions", V1_COMPLETIONS, 1, 0},
                  {"/chat/completions", CHAT, 1, 0}, {"/metrics", METRICS, 0, 1}, {"/completion", COMPLETION, 1, 0},
                  {"/completions", COMPLETION, 1, 0}, {"/props", PROPS, 1, 1}, {"/slots", SLOTS, 0, 1},
                  {"/apply-template", APPLY_TEMPLATE, 1, 0},
                  /* server_embed.c, server_infill.c */
                  {"/v1/embeddings", EMBEDDINGS_OAI, 1, 0}, {"/embedding", EMBEDDINGS, 1, 0},
                  {"/embeddings", EMBEDDINGS, 1, 0}, {"/v1/rerank", RERANK, 1, 0}, {"/rerank", RERANK, 1, 0},
                  {"/v1/reranking", RERANK, 1, 0}, {"/reranking", RERANK, 1, 0}, {"/infill", INFILL, 1, 0},
                  {"/chat/completions/input_tokens", INPUT_TOKENS, 1, 0},
                  /* other APIs over the chat (server_anthropic.c, server_responses.c, server_predict.c) */
                  {"/v1/messages", MESSAGES, 1, 0}, {"/v1/messages/count_tokens", COUNT_TOKENS, 1, 0},
                  {"/v1/responses", RESPONSES, 1, 0}, {"/responses", RESPONSES, 1, 0},
                  {"/v1/responses/input_tokens", RESPONSE_TOKENS, 1, 0},
                  {srv_predict_route(), PREDICT, 1, 0}};
    int known = -1;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (routes[i].path && !strcmp(url, routes[i].path))
            known = (int)i;
    if (known < 0)
        return srv_error(c, 404, "not_found_error", "not_found", "No route %s %s.", method, url);
    if (!(post && routes[known].post) && !(get && routes[known].get))
        return srv_error(c, 405, "invalid_request_error", "method_not_allowed", "%s takes %s, not %s.", url,
                         routes[known].post ? routes[known].get ? "GET or POST" : "POST" : "GET", method);
    const int route = routes[known].route;
    srv_metrics_monitoring_read(get && (route == MODELS || route == METRICS || route == PROPS || route == SLOTS));
    srv_tenant *t = NULL;
    enum MHD_Result ret = MHD_NO;
    /* Every route but /health needs a key when keys are set, as
     * llama-server's; /metrics too, unless --metrics-public. */
    if (!(route == METRICS && S->metrics_public) && !authorize(S, c, &t, &ret))
        return ret;
    if (route == METRICS && !S->metrics_on) /* off unless asked for, as llama-server's */
        return srv_error(c, 501, "not_supported_error", NULL,
                         "This server does not support metrics endpoint. Start it with `--metrics`");
    if (route == METRICS) { /* asleep: the counters as they were (server_sleep.c) */
        srv_awake_enter(S, 0);
        ret = srv_metrics_page(S, c);
        srv_awake_leave(S, 0);
        return ret;
    }
    if (S->draining)
        return srv_error(c, 503, "unavailable_error", "shutting_down", "The server is shutting down.");
    if (route == PREDICT) /* each instance takes the model itself (server_predict.c) */
        return srv_predict(S, c, method, body, len);
    /* The model stays in place while the handler runs; a route that reads
     * it wakes it when it sleeps (server_sleep.c), /props and /models do
     * not. */
    const int wake = route != PROPS && route != MODELS;
    if (srv_awake_enter(S, wake))
        return srv_error(c, 503, "unavailable_error", "loading_failed", "The model could not be loaded again: %s",
                         hx_last_error());
    ret = dispatch(S, c, route, post, body, len, t);
    srv_awake_leave(S, wake);
    return ret;
}
