/* Vertex AI's custom-container contract, as llama-server keeps it: with
 * AIP_MODE=PREDICTION in the environment, POST AIP_PREDICT_ROUTE (default
 * /predict) takes {"instances": [...]}, each instance a request body with
 * "@requestFormat" naming its route (a path, or its camelCase name:
 * "chatCompletions" is /v1/chat/completions, "applyTemplate"
 * /apply-template); the instances run at once (a thread each, so the
 * engine batches them) and the answer is {"predictions": [...]}, each the
 * route's answer body, or its error object.  An instance cannot stream.
 * AIP_HEALTH_ROUTE, when set, answers as /health; AIP_HTTP_PORT is the
 * port (hetero-server.c). */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/server.h"

#define MAX_INSTANCES 128 /* llama-server's */

/* An environment route, with the leading '/' it may lack (static). */
static const char *route_env(const char *name, const char *deflt, char *buf, size_t cap)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return deflt;
    snprintf(buf, cap, "%s%s", *v == '/' ? "" : "/", v);
    return buf;
}

static int enabled(void)
{
    const char *mode = getenv("AIP_MODE");
    return mode && !strcmp(mode, "PREDICTION");
}

/* Read once: every request asks, from many threads. */
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static const char *predict_route, *health_route;

static void read_env(void)
{
    static char predict[256], health[256];
    if (!enabled())
        return;
    predict_route = route_env("AIP_PREDICT_ROUTE", "/predict", predict, sizeof predict);
    health_route = route_env("AIP_HEALTH_ROUTE", NULL, health, sizeof health);
}

const char *srv_predict_route(void)
{
    pthread_once(&env_once, read_env);
    return predict_route;
}

const char *srv_predict_health(void)
{
    pthread_once(&env_once, read_env);
    return health_route;
}

/* The routes an instance may name (POST ones), by path and camelCase. */
static const char *const routes[] = {"/v1/chat/completions", "/v1/completions", "/completion", "/v1/embeddings",
                                     "/embedding", "/v1/rerank", "/infill", "/tokenize", "/detokenize",
                                     "/apply-template", "/v1/messages", "/v1/messages/count_tokens", "/v1/responses"};

/* "/v1/chat/completions" -> "chatCompletions", as llama-server spells it. */
static void camel(const char *path, char *out, size_t cap)
{
    if (!strncmp(path, "/v1", 3))
        path += 3;
    size_t n = 0;
    int up = 0;
    for (const char *p = path; *p && n + 1 < cap; p++) {
        if (*p == '/' || *p == '-' || *p == '_') {
            up = n > 0;
            continue;
        }
        out[n++] = up ? (char)toupper((unsigned char)*p) : *p;
        up = 0;
    }
    out[n] = '\0';
}

static const char *resolve(const char *format)
{
    char name[64];
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        camel(routes[i], name, sizeof name);
        if (!strcmp(format, routes[i]) || !strcmp(format, name))
            return routes[i];
    }
    return NULL;
}

typedef struct {
    srv *S;
    struct MHD_Connection *c;
    const char *path;
    char *body;
    srv_capture cap;
} instance;

static void *run_instance(void *arg)
{
    instance *in = arg;
    srv_captured = &in->cap;
    srv_route(in->S, in->c, "POST", in->path, in->body, strlen(in->body));
    srv_captured = NULL;
    return NULL;
}

static json_t *error_json(const char *msg)
{
    return srv_error_object("invalid_request_error", "invalid_value", msg);
}

enum MHD_Result srv_predict(srv *S, struct MHD_Connection *c, const char *method, const char *body, size_t len)
{
    if (strcmp(method, "POST"))
        return srv_error(c, 405, "invalid_request_error", "method_not_allowed", "%s takes POST, not %s.",
                         srv_predict_route(), method);
    json_error_t je;
    json_t *o = json_loadb(body, len, 0, &je), *list = json_object_get(o, "instances");
    if (!json_is_object(o) || !json_is_array(list)) {
        json_decref(o);
        return srv_error(c, 400, "invalid_request_error", "invalid_value",
                         "the body must be a JSON object with an array field named instances");
    }
    const size_t n = json_array_size(list);
    if (n > MAX_INSTANCES) {
        json_decref(o);
        return srv_error(c, 400, "invalid_request_error", "invalid_value",
                         "instances holds %zu; a request takes at most %d", n, MAX_INSTANCES);
    }
    instance *ins = calloc(n ? n : 1, sizeof *ins);
    pthread_t *th = calloc(n ? n : 1, sizeof *th);
    int *started = calloc(n ? n : 1, sizeof *started);
    json_t *preds = json_array();
    if (!ins || !th || !started || !preds) {
        free(ins), free(th), free(started), json_decref(preds), json_decref(o);
        return srv_error(c, 500, "server_error", "out_of_memory", "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        json_t *it = json_array_get(list, i), *fmt = json_object_get(it, "@requestFormat");
        ins[i].S = S;
        ins[i].c = c;
        if (!json_is_object(it) || !json_is_string(fmt))
            continue; /* answered below */
        if (!(ins[i].path = resolve(json_string_value(fmt))))
            continue;
        json_t *payload = json_deep_copy(it);
        json_object_del(payload, "@requestFormat");
        if (json_object_get(payload, "stream")) /* a prediction is one body */
            json_object_set_new(payload, "stream", json_false());
        ins[i].body = json_dumps(payload, JSON_COMPACT);
        json_decref(payload);
        if (ins[i].body)
            started[i] = !pthread_create(&th[i], NULL, run_instance, &ins[i]);
    }
    for (size_t i = 0; i < n; i++) {
        json_t *it = json_array_get(list, i), *fmt = json_object_get(it, "@requestFormat");
        char why[160];
        if (started[i])
            pthread_join(th[i], NULL);
        if (!json_is_object(it))
            json_array_append_new(preds, error_json("each instance must be a JSON object"));
        else if (!json_is_string(fmt))
            json_array_append_new(preds, error_json("each instance must include a string @requestFormat"));
        else if (!ins[i].path)
            json_array_append_new(preds, (snprintf(why, sizeof why, "no route for @requestFormat '%.100s'",
                                                   json_string_value(fmt)),
                                          error_json(why)));
        else if (!started[i])
            json_array_append_new(preds, srv_error_object("server_error", "server_busy", "no thread for the instance"));
        else if (!ins[i].cap.body)
            json_array_append_new(preds, srv_error_object("server_error", "cancelled", "the client left"));
        else {
            json_array_append_new(preds, ins[i].cap.body);
            ins[i].cap.body = NULL;
        }
        free(ins[i].body);
    }
    free(ins), free(th), free(started);
    json_decref(o);
    return srv_json(c, 200, json_pack("{s:o}", "predictions", preds));
}
