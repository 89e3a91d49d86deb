/* llama-server's Prometheus metrics (server-task.cpp's to_metrics), beside
 * hetero's own on /metrics, under its names and meanings:
 *   counters: prompt_tokens_total (evaluated, the prefix cache's not),
 *   prompt_tokens_cached_total, prompt_seconds_total and
 *   tokens_predicted_seconds_total (each request's prompt and generation
 *   time, summed over requests as llama-server sums its slots'),
 *   tokens_predicted_total, n_decode_total (engine steps), n_tokens_max
 *   (the longest prompt plus answer), and the speculative-decoding
 *   counters, 0: hetero-server drafts nothing;
 *   gauges: prompt_tokens_seconds and predicted_tokens_seconds (tokens per
 *   second of the requests that ended since the last scrape),
 *   requests_processing (running in the engine), requests_deferred
 *   (waiting in it), n_busy_slots_per_decode (requests per step). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/server.h"

void srv_metrics_llama_end(srv_metrics *M, const hx_request_result *r)
{
    if (r->status != HX_OK)
        return;
    const uint32_t cached = r->prompt_tokens_cached, prompt = r->stats.prompt_tokens;
    const uint64_t evaluated = prompt > cached ? prompt - cached : 0, generated = r->stats.generated_tokens;
    /* the engine's clock: from the first evaluation to the first token,
     * then to the end (the first token costs no decode of its own) */
    const double p = r->first_token_seconds > r->queue_seconds ? r->first_token_seconds - r->queue_seconds : 0;
    const double d = r->total_seconds > r->first_token_seconds ? r->total_seconds - r->first_token_seconds : 0;
    pthread_mutex_lock(&M->lock);
    M->prompt_seconds += p;
    M->predict_seconds += d;
    M->win_prompt_seconds += p;
    M->win_predict_seconds += d;
    M->win_prompt_tokens += evaluated;
    M->win_predict_tokens += generated > 1 ? generated - 1 : 0;
    if (prompt + generated > M->n_tokens_max)
        M->n_tokens_max = prompt + generated;
    pthread_mutex_unlock(&M->lock);
}

typedef struct {
    const char *name, *help;
    double v;
} item;

static size_t emit(char *buf, size_t cap, const char *type, const item *it, size_t n)
{
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        int k = snprintf(buf ? buf + at : NULL, buf ? cap - at : 0,
                         "# HELP llamacpp:%s %s\n# TYPE llamacpp:%s %s\nllamacpp:%s %.17g\n", it[i].name,
                         it[i].help, it[i].name, type, it[i].name, it[i].v);
        at += k > 0 ? (size_t)k : 0;
    }
    return at;
}

char *srv_metrics_llama_text(srv *S, const hx_engine_stats *es)
{
    srv_metrics *M = &S->metrics;
    pthread_mutex_lock(&M->lock);
    const double ps = M->prompt_seconds, ds = M->predict_seconds;
    const double rate_p = M->win_prompt_seconds > 0 ? M->win_prompt_tokens / M->win_prompt_seconds : 0;
    const double rate_d = M->win_predict_seconds > 0 ? M->win_predict_tokens / M->win_predict_seconds : 0;
    const double tmax = (double)M->n_tokens_max;
    M->win_prompt_seconds = M->win_predict_seconds = 0; /* the gauges' next window */
    M->win_prompt_tokens = M->win_predict_tokens = 0;
    pthread_mutex_unlock(&M->lock);
    const item counters[] = {
        {"prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens", (double)es->prompt_tokens},
        {"prompt_tokens_cached_total", "Number of prompt tokens reused from the cache", (double)es->tokens_cached},
        {"prompt_seconds_total", "Total time spent processing prompts", ps},
        {"tokens_predicted_total", "Number of generation tokens processed", (double)es->generated_tokens},
        {"tokens_predicted_seconds_total", "Total time spent generating tokens", ds},
        {"n_decode_total", "Total number of engine steps (batched evaluations)", (double)es->steps},
        {"n_tokens_max", "Largest observed sequence length (prompt + generation)", tmax},
        {"spec_decode_num_draft_tokens_total", "Speculative: Total draft tokens generated (none: no drafts)", 0},
        {"spec_decode_num_accepted_tokens_total", "Speculative: Total draft tokens accepted by the target model "
                                                  "(none: no drafts)", 0},
        {"spec_decode_num_drafts_total", "Speculative: Total speculative decoding verification steps (none)", 0},
    };
    const item gauges[] = {
        {"prompt_tokens_seconds", "Average prompt throughput in tokens/s", rate_p},
        {"predicted_tokens_seconds", "Average generation throughput in tokens/s", rate_d},
        {"requests_processing", "Number of requests processing", (double)es->running},
        {"requests_deferred", "Number of requests deferred", (double)es->waiting},
        {"n_busy_slots_per_decode", "Average number of busy slots per engine step",
         es->steps ? (double)es->step_requests / (double)es->steps : 0},
    };
    const size_t nc = sizeof counters / sizeof counters[0], ng = sizeof gauges / sizeof gauges[0];
    const size_t len = emit(NULL, 0, "counter", counters, nc) + emit(NULL, 0, "gauge", gauges, ng);
    char *out = malloc(len + 1);
    if (out) {
        size_t at = emit(out, len + 1, "counter", counters, nc);
        emit(out + at, len + 1 - at, "gauge", gauges, ng);
    }
    return out;
}
