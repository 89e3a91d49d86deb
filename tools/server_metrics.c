/* hetero-server's /metrics, in Prometheus' text format: requests by
 * status, tokens, latency histograms (time to first token, inter-token,
 * end to end, queue), the engine's queue and preemptions, the KV pool and
 * each device's busy share; then llama-server's own (llamacpp:*,
 * server_metrics_llama.c).  Served with --metrics, as llama-server's. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/server.h"

static const double bounds[SRV_HIST_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                1,     2.5,  5,     10,   20,  40,  80};

void srv_metrics_init(srv_metrics *M)
{
    memset(M, 0, sizeof *M);
    pthread_mutex_init(&M->lock, NULL);
}

void srv_hist_add(srv_metrics *M, srv_hist *h, double s)
{
    pthread_mutex_lock(&M->lock);
    int b = 0;
    while (b < SRV_HIST_BUCKETS && s > bounds[b])
        b++;
    h->count[b]++;
    h->sum += s;
    h->n++;
    pthread_mutex_unlock(&M->lock);
}

/* A monitoring read answered 2xx (a health check, a scrape, a /props
 * poll, a preflight, the page) is not counted: a prober asking every
 * second would bury the API's answers, and a sleeping server's scrape
 * would change what it reports.  Its errors (a 401 above all) are
 * counted.  Per thread: each connection has its own. */
static __thread int monitoring_read;

void srv_metrics_monitoring_read(int yes) { monitoring_read = yes; }

void srv_metrics_status(srv_metrics *M, unsigned status)
{
    if (monitoring_read && status / 100 == 2)
        return;
    int k = status / 100 == 2 ? 0 : status == 400 ? 1 : status == 401 ? 2 : status == 429 ? 3 : status >= 500 ? 4 : 5;
    pthread_mutex_lock(&M->lock);
    M->requests[k]++;
    pthread_mutex_unlock(&M->lock);
}

/* A growing text buffer. */
typedef struct {
    char *s;
    size_t n, cap;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = t->s ? vsnprintf(t->s + t->n, t->cap - t->n, fmt, ap) : -1;
        va_end(ap);
        if (k >= 0 && (size_t)k < t->cap - t->n) {
            t->n += (size_t)k;
            return;
        }
        size_t cap = t->cap ? t->cap * 2 : 8192;
        char *s = realloc(t->s, cap);
        if (!s)
            return;
        t->s = s;
        t->cap = cap;
    }
}

static void metric(text *t, const char *name, const char *type, const char *help)
{
    put(t, "# HELP hetero_%s %s\n# TYPE hetero_%s %s\n", name, help, name, type);
}

/* One counter or gauge; integers up to 2^53 print exactly. */
static void scalar(text *t, const char *name, const char *type, const char *help, double v)
{
    metric(t, name, type, help);
    put(t, "hetero_%s %.17g\n", name, v);
}

static void hist(text *t, const char *name, const char *help, const srv_hist *h)
{
    metric(t, name, "histogram", help);
    uint64_t cum = 0;
    for (int b = 0; b < SRV_HIST_BUCKETS; b++) {
        cum += h->count[b];
        put(t, "hetero_%s_bucket{le=\"%g\"} %llu\n", name, bounds[b], (unsigned long long)cum);
    }
    put(t, "hetero_%s_bucket{le=\"+Inf\"} %llu\nhetero_%s_sum %.6f\nhetero_%s_count %llu\n", name,
        (unsigned long long)h->n, name, h->sum, name, (unsigned long long)h->n);
}

/* The text, which it frees, as /metrics' answer. */
static enum MHD_Result respond(srv *S, struct MHD_Connection *c, char *s, size_t n)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(n, s, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4");
    char start[32]; /* llama-server's header: when the process started, Unix seconds */
    snprintf(start, sizeof start, "%lld", (long long)time(NULL) - (long long)(srv_now() - S->started));
    MHD_add_response_header(r, "Process-Start-Time-Unix", start);
    srv_cors_headers(S, c, r);
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    srv_metrics_status(&S->metrics, 200);
    return ret;
}

enum MHD_Result srv_metrics_page(srv *S, struct MHD_Connection *c)
{
    srv_metrics m;
    pthread_mutex_lock(&S->metrics.lock);
    m = S->metrics;
    pthread_mutex_unlock(&S->metrics.lock);
    hx_engine_stats es = S->sleep.engine; /* asleep: as they were when it fell asleep (server_sleep.c) */
    hx_model_stats ms = S->sleep.model;
    const int asleep = srv_asleep(S);
    char *frozen;
    size_t frozen_n;
    if (asleep && srv_sleep_frozen_metrics(S, &frozen, &frozen_n))
        return respond(S, c, frozen, frozen_n);
    if (!asleep) {
        hx_engine_stats_get(S->e, &es);
        hx_model_stats_get(S->m, &ms);
    }
    text t = {0};
    static const char *const classes[6] = {"2xx", "400", "401", "429", "5xx", "other"};
    metric(&t, "requests_total", "counter", "HTTP requests answered, by status (monitoring reads answered 2xx left out).");
    for (int k = 0; k < 6; k++)
        put(&t, "hetero_requests_total{code=\"%s\"} %llu\n", classes[k], (unsigned long long)m.requests[k]);
    scalar(&t, "requests_in_flight", "gauge", "Completion requests being answered now.", (double)m.in_flight);
    scalar(&t, "prompt_tokens_total", "counter",
           "Prompt tokens evaluated (recomputation after preemption included; those taken from the prefix cache not).",
           (double)es.prompt_tokens);
    scalar(&t, "prompt_tokens_cached_total", "counter",
           "Tokens requests took from the prefix cache at admission instead of evaluating them.",
           (double)es.tokens_cached);
    scalar(&t, "generation_tokens_total", "counter", "Tokens generated.", (double)es.generated_tokens);
    hist(&t, "time_to_first_token_seconds", "From the request's arrival to its first token.", &m.ttft);
    hist(&t, "inter_token_latency_seconds", "Between two tokens of one choice.", &m.itl);
    hist(&t, "e2e_request_latency_seconds", "From the request's arrival to its last token.", &m.e2e);
    hist(&t, "queue_time_seconds", "From the request's arrival to its first evaluation.", &m.queue);
    scalar(&t, "requests_waiting", "gauge", "Requests queued in the engine (preempted ones included).",
           (double)es.waiting);
    scalar(&t, "requests_running", "gauge", "Requests holding KV blocks in the engine.", (double)es.running);
    scalar(&t, "requests_cancelled_total", "counter",
           "Requests ended before their end: their client left, or the server stopped.", (double)es.cancelled);
    scalar(&t, "preemptions_total", "counter", "Requests preempted because the KV pool was full.",
           (double)es.preemptions);
    scalar(&t, "engine_steps_total", "counter", "Engine steps (one batched evaluation each).", (double)es.steps);
    scalar(&t, "engine_busy_seconds_total", "counter", "Time the engine spent evaluating.", (double)es.busy_seconds);
    scalar(&t, "kv_blocks_used", "gauge", "KV blocks held by sequences.", (double)ms.kv_blocks_used);
    scalar(&t, "kv_blocks_total", "gauge", "KV blocks in the pool.", (double)ms.kv_blocks_total);
    scalar(&t, "kv_block_tokens", "gauge", "Tokens per KV block.", (double)ms.kv_block_tokens);
    scalar(&t, "kv_blocks_cached", "gauge", "KV blocks held by no sequence, kept for a later prompt (evictable).",
           (double)ms.kv_blocks_cached);
    scalar(&t, "kv_blocks_shared", "gauge", "KV blocks held by more than one sequence.", (double)ms.kv_blocks_shared);
    scalar(&t, "kv_bytes_used", "gauge", "Bytes of the KV blocks held by sequences, all layers.",
           (double)ms.kv_bytes_used);
    scalar(&t, "kv_prefix_hits_total", "counter", "A prompt's full KV blocks found in the prefix cache.",
           (double)ms.kv_hits);
    scalar(&t, "kv_prefix_misses_total", "counter", "A prompt's full KV blocks not found in the prefix cache.",
           (double)ms.kv_misses);
    scalar(&t, "kv_evictions_total", "counter", "Cached KV blocks whose room went to another block.",
           (double)ms.kv_evictions);
    scalar(&t, "kv_tokens_reused_total", "counter", "Prompt tokens attached from the prefix cache instead of evaluated.",
           (double)ms.kv_tokens_reused);
    scalar(&t, "graphs_recorded_total", "counter",
           "Evaluations whose task list was recorded for their batch shape (decode replay).",
           (double)ms.graphs_recorded);
    scalar(&t, "graphs_replayed_total", "counter",
           "Evaluations submitted from the recording of their batch shape (decode replay).",
           (double)ms.graphs_replayed);
    pthread_mutex_lock(&S->conns.lock);
    const double open = S->conns.n, refused = (double)S->conns.refused, evicted = (double)S->conns.evicted,
                 timed_out = (double)S->conns.timed_out;
    pthread_mutex_unlock(&S->conns.lock);
    scalar(&t, "connections_open", "gauge", "HTTP connections open.", open);
    scalar(&t, "connections_refused_total", "counter",
           "Connections refused at accept: past --max-connections-per-ip, or past --max-connections with none to "
           "give way.", refused);
    scalar(&t, "connections_evicted_total", "counter",
           "Connections waiting for a request closed to make room for a new one (--max-connections).", evicted);
    scalar(&t, "connections_timed_out_total", "counter",
           "Connections closed for not sending a whole request in --idle-timeout seconds.", timed_out);
    metric(&t, "device_busy_ratio", "gauge", "Each device's busy share over the last second or so.");
    for (int d = 0; d < hx_runtime_device_count(S->rt); d++) {
        hx_device_info di;
        hx_device_stats ds;
        if (hx_runtime_device_info(S->rt, d, &di) || hx_device_stats_get(S->rt, d, &ds))
            continue;
        json_t *name = json_string(di.name);
        char *q = name ? json_dumps(name, JSON_ENCODE_ANY) : NULL;
        put(&t, "hetero_device_busy_ratio{device=\"%d\",name=%s} %.4f\n", d, q ? q : "\"?\"", ds.recent_busy);
        free(q);
        json_decref(name);
    }
    char *llama = srv_metrics_llama_text(S, &es); /* llama-server's llamacpp:* names */
    if (llama)
        put(&t, "%s", llama);
    free(llama);
    if (!t.s)
        return MHD_NO;
    if (!asleep)
        srv_sleep_keep_scrape(S, t.s, t.n);
    return respond(S, c, t.s, t.n);
}

