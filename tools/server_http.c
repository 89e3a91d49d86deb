/* hetero-server's HTTP side: OpenAI-style error objects, JSON responses,
 * and the routes (which need an API key, which drain on SIGTERM). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/server.h"

/* Every answer passes through here or srv_json: the status goes to
 * /metrics. */
static srv_metrics *status_metrics;

double srv_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

enum MHD_Result srv_json(struct MHD_Connection *c, unsigned status, json_t *body)
{
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
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    if (status_metrics)
        srv_metrics_status(status_metrics, status);
    return ret;
}

/* The error object alone, for a stream's error event too. */
static json_t *error_object(const char *type, const char *code, const char *message)
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
    return srv_json(c, status, error_object(type, code, msg));
}

static enum MHD_Result models(srv *S, struct MHD_Connection *c)
{
    json_t *m = json_pack("{s:s,s:s,s:I,s:s,s:{s:I,s:I,s:I}}", "id", S->model_name, "object", "model", "created",
                          (json_int_t)time(NULL), "owned_by", "hetero", "meta", "n_ctx", (json_int_t)S->info.n_ctx,
                          "n_vocab", (json_int_t)S->info.n_vocab, "n_params", (json_int_t)S->info.n_params);
    return srv_json(c, 200, json_pack("{s:s,s:[o]}", "object", "list", "data", m));
}

/* The tenant of the request's API key: 1 when it may go on, else the
 * 401 was queued. */
static int authorize(srv *S, struct MHD_Connection *c, srv_tenant **t, enum MHD_Result *ret)
{
    *t = NULL;
    if (!S->tenants.n)
        return 1;
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if ((*t = srv_tenant_find(&S->tenants, auth)))
        return 1;
    *ret = srv_error(c, 401, "invalid_request_error", "invalid_api_key",
                     auth ? "Incorrect API key provided." : "No API key provided: send 'Authorization: Bearer KEY'.");
    return 0;
}

static enum MHD_Result completion(srv *S, struct MHD_Connection *c, const char *body, size_t len, int chat,
                                  srv_tenant *t)
{
    pthread_mutex_lock(&S->metrics.lock);
    int busy = S->metrics.in_flight >= S->max_in_flight;
    if (!busy)
        S->metrics.in_flight++;
    pthread_mutex_unlock(&S->metrics.lock);
    if (busy)
        return srv_error(c, 503, "server_error", "server_busy",
                         "The server has %u requests in flight, its limit (--max-requests); retry later.",
                         S->max_in_flight);
    unsigned retry = t ? srv_tenant_enter(&S->tenants, t, srv_now()) : 0;
    enum MHD_Result ret;
    if (retry) {
        char secs[16];
        snprintf(secs, sizeof secs, "%u", retry);
        char msg[256];
        snprintf(msg, sizeof msg, "Rate limit reached for '%s' (%u concurrent, %u queued, %u tokens per minute); retry "
                                  "in %u s.", t->name, t->max_concurrent, t->queue, t->tokens_per_minute, retry);
        json_t *err = error_object("rate_limit_error", "rate_limit_exceeded", msg);
        char *text = json_dumps(err, JSON_COMPACT);
        json_decref(err);
        struct MHD_Response *r =
            text ? MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE) : NULL;
        if (!r) {
            free(text);
            srv_request_end(S, NULL, 0);
            return MHD_NO;
        }
        MHD_add_response_header(r, "Content-Type", "application/json");
        MHD_add_response_header(r, "Retry-After", secs);
        ret = MHD_queue_response(c, 429, r);
        MHD_destroy_response(r);
        srv_metrics_status(&S->metrics, 429);
        srv_request_end(S, NULL, 0);
        return ret;
    }
    int owned = 0;
    ret = srv_completion(S, c, body, len, chat, t, &owned);
    if (!owned)
        srv_request_end(S, t, 0);
    return ret;
}

void srv_request_end(srv *S, srv_tenant *t, uint64_t tokens)
{
    if (t)
        srv_tenant_leave(&S->tenants, t, tokens, srv_now());
    pthread_mutex_lock(&S->metrics.lock);
    S->metrics.in_flight--;
    pthread_mutex_unlock(&S->metrics.lock);
}

enum MHD_Result srv_route(srv *S, struct MHD_Connection *c, const char *method, const char *url, const char *body,
                          size_t len)
{
    status_metrics = &S->metrics;
    const int get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    if (!strncmp(url, "/v1/", 4) && (!strcmp(url + 3, "/completions") || !strcmp(url + 3, "/chat/completions")))
        url += 3; /* the same routes with or without /v1, as llama-server */
    if (!strcmp(url, "/health") && get)
        return S->draining ? srv_error(c, 503, "server_error", "shutting_down", "The server is shutting down.")
                           : srv_json(c, 200, json_pack("{s:s}", "status", "ok"));
    if (!strcmp(url, "/metrics") && get)
        return srv_metrics_page(S, c);
    struct {
        const char *path;
        int post;
    } routes[] = {{"/v1/models", 0}, {"/tokenize", 1}, {"/detokenize", 1}, {"/completions", 1},
                  {"/chat/completions", 1}};
    int known = -1;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (!strcmp(url, routes[i].path))
            known = (int)i;
    if (known < 0)
        return srv_error(c, 404, "invalid_request_error", "not_found", "No route %s %s.", method, url);
    if (routes[known].post ? !post : !get)
        return srv_error(c, 405, "invalid_request_error", "method_not_allowed", "%s takes %s, not %s.", url,
                         routes[known].post ? "POST" : "GET", method);
    srv_tenant *t;
    enum MHD_Result ret = MHD_NO;
    if (!authorize(S, c, &t, &ret))
        return ret;
    if (S->draining)
        return srv_error(c, 503, "server_error", "shutting_down", "The server is shutting down.");
    switch (known) {
    case 0: return models(S, c);
    case 1:
    case 2: return srv_tokenize(S, c, body, len, known == 2);
    default: return completion(S, c, body, len, known == 4, t);
    }
}
