/* A batch of prompts in one completion request, as llama-server takes it
 * (tokenize_input_prompts): a "prompt" array with no token id at its top
 * level is a list of prompts, each a string, token ids, ids and strings
 * mixed, or {"prompt_string"}.  Each runs as a request of its own, all at
 * once (a thread each: the engine batches them), and the answer is
 * llama-server's: /completion's an array of its answers in order,
 * /v1/completions one answer whose choices are the prompts' in order
 * (index: the prompt's, times n, plus the choice's) and whose usage sums
 * theirs.  A batch of one is the one prompt.  The first prompt that
 * fails (in order) is the answer: its status and error.  A batch is not
 * streamed (400): llama-server interleaves the prompts' events, which
 * hetero-server does not. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/server.h"

_Thread_local srv_capture *srv_captured;

typedef struct {
    srv *S;
    struct MHD_Connection *c;
    char *body;
    int mode;
    srv_tenant *tenant;
    srv_capture cap;
    enum MHD_Result ret;
} sub;

static void *run_sub(void *arg)
{
    sub *s = arg;
    srv_captured = &s->cap;
    s->ret = srv_completion(s->S, s->c, s->body, strlen(s->body), s->mode, s->tenant);
    srv_captured = NULL;
    return NULL;
}

int srv_batch_size(const char *body, size_t len)
{
    json_t *o = json_loadb(body, len, 0, NULL), *p = json_object_get(o, "prompt");
    int n = 0;
    if (json_is_array(p) && json_array_size(p)) {
        size_t i;
        json_t *v;
        n = (int)json_array_size(p);
        json_array_foreach(p, i, v) if (json_is_integer(v)) n = 0;
        /* one string or id list is the prompt itself; one object is not */
        if (n == 1 && !json_is_object(json_array_get(p, 0)))
            n = 0;
    }
    json_decref(o);
    return n;
}

/* /v1/completions: the prompts' choices in one answer. */
static json_t *merge_oai(sub *subs, size_t n)
{
    json_t *out = subs[0].cap.body, *choices = json_object_get(out, "choices"), *usage = json_object_get(out, "usage");
    const size_t per = json_array_size(choices);
    json_int_t sums[3] = {0, 0, 0};
    static const char *const keys[3] = {"prompt_tokens", "completion_tokens", "total_tokens"};
    for (size_t i = 0; i < n; i++) {
        json_t *u = json_object_get(subs[i].cap.body, "usage"), *ch = json_object_get(subs[i].cap.body, "choices");
        for (int k = 0; k < 3; k++)
            sums[k] += json_integer_value(json_object_get(u, keys[k]));
        size_t k;
        json_t *c;
        json_array_foreach(ch, k, c) {
            json_object_set_new(c, "index", json_integer((json_int_t)(i * per + k)));
            if (i)
                json_array_append(choices, c);
        }
    }
    for (int k = 0; k < 3; k++)
        json_object_set_new(usage, keys[k], json_integer(sums[k]));
    json_object_del(usage, "prompt_tokens_details"); /* the first prompt's alone would mislead */
    json_object_del(out, "__verbose");
    subs[0].cap.body = NULL;
    return out;
}

enum MHD_Result srv_batch(srv *S, struct MHD_Connection *c, const char *body, size_t len, int mode,
                          srv_tenant *tenant)
{
    json_t *o = json_loadb(body, len, 0, NULL), *prompts = json_incref(json_object_get(o, "prompt"));
    const size_t n = json_array_size(prompts);
    if (json_is_true(json_object_get(o, "stream")) && n > 1) {
        json_decref(o);
        json_decref(prompts);
        return srv_error(c, 400, "invalid_request_error", "unsupported_parameter",
                         "'prompt' holds %zu prompts: a batch is answered whole, not streamed (stream each prompt "
                         "in a request of its own)", n);
    }
    if (n == 1) { /* [{"prompt_string"}]: the one prompt, answered (or streamed) as itself */
        json_object_set(o, "prompt", json_array_get(prompts, 0));
        char *one = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        json_decref(prompts);
        if (!one)
            return srv_error(c, 500, "server_error", "out_of_memory", "out of memory");
        enum MHD_Result r = srv_completion(S, c, one, strlen(one), mode, tenant);
        free(one);
        return r;
    }
    if (n > SRV_MAX_BATCH) {
        json_decref(o);
        json_decref(prompts);
        return srv_error(c, 400, "invalid_request_error", "invalid_value",
                         "'prompt' holds %zu prompts; a request takes at most %d", n, SRV_MAX_BATCH);
    }
    sub *subs = calloc(n, sizeof *subs);
    pthread_t *th = calloc(n, sizeof *th);
    int *started = calloc(n, sizeof *started);
    int ok = subs && th && started;
    for (size_t i = 0; ok && i < n; i++) {
        json_object_set(o, "prompt", json_array_get(prompts, i));
        subs[i] = (sub){S, c, json_dumps(o, JSON_COMPACT), mode, tenant, {0, NULL}, MHD_NO};
        ok = subs[i].body != NULL;
    }
    for (size_t i = 0; ok && i < n; i++)
        started[i] = !pthread_create(&th[i], NULL, run_sub, &subs[i]);
    for (size_t i = 0; ok && i < n; i++)
        if (started[i])
            pthread_join(th[i], NULL);
        else
            subs[i].cap.status = 503; /* no thread for it: the batch is refused below */
    enum MHD_Result ret = MHD_NO;
    size_t bad = n;
    for (size_t i = 0; ok && i < n && bad == n; i++)
        if (subs[i].cap.status != 200)
            bad = i;
    if (!ok) {
        ret = srv_error(c, 500, "server_error", "out_of_memory", "out of memory");
    } else if (bad < n && !subs[bad].cap.body) {
        ret = subs[bad].cap.status == 503
                  ? srv_error(c, 503, "unavailable_error", "server_busy", "no thread for the batch's prompt %zu", bad)
                  : MHD_NO; /* the client left */
    } else if (bad < n) {
        ret = srv_json(c, subs[bad].cap.status, subs[bad].cap.body);
        subs[bad].cap.body = NULL;
    } else if (mode == SRV_NATIVE) {
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++) {
            json_array_append_new(arr, subs[i].cap.body);
            subs[i].cap.body = NULL;
        }
        ret = srv_json(c, 200, arr);
    } else {
        ret = srv_json(c, 200, merge_oai(subs, n));
    }
    for (size_t i = 0; subs && i < n; i++) {
        free(subs[i].body);
        json_decref(subs[i].cap.body);
    }
    free(subs);
    free(th);
    free(started);
    json_decref(o);
    json_decref(prompts);
    return ret;
}
