/* hetero-server's GET /machine: the machine at work as one JSON object,
 * for the web page's live panel (tools/webui) and for scripts that would
 * rather not parse /metrics' Prometheus text.  The same counters as
 * /metrics: each device's busy share from the runtime's own load monitor
 * (hx_device_stats), the KV pool and prefix cache (hx_model_stats), the
 * engine's queue and token counts (hx_engine_stats).  Counters are totals
 * since the start; "uptime_s" is the server's monotonic clock, so a client
 * turns two readings into rates (tokens per second) without trusting its
 * own clock or the network's delays. */
#include <stdio.h>

#include "tools/server.h"

static json_t *devices(srv *S)
{
    json_t *a = json_array();
    for (int d = 0; a && d < hx_runtime_device_count(S->rt); d++) {
        hx_device_info di;
        hx_device_stats ds;
        if (hx_runtime_device_info(S->rt, d, &di) || hx_device_stats_get(S->rt, d, &ds))
            continue;
        json_array_append_new(
            a, json_pack("{s:i,s:s,s:s,s:b,s:f,s:f,s:f,s:I,s:i,s:f,s:b,s:I}", "index", d, "name", di.name, "kind",
                         hx_device_kind_str(di.kind), "emulated", di.emulated, "busy_recent", ds.recent_busy,
                         "busy_total", ds.busy_fraction, "busy_seconds", ds.busy_seconds, "tasks",
                         (json_int_t)ds.tasks, "queue_depth", (int)ds.queue_depth, "tasks_per_second",
                         ds.tasks_per_second, "retired", ds.retired, "failures", (json_int_t)ds.failures));
    }
    return a;
}

enum MHD_Result srv_machine_page(srv *S, struct MHD_Connection *c)
{
    hx_engine_stats es = S->sleep.engine; /* asleep: as they were (server_sleep.c) */
    hx_model_stats ms = S->sleep.model;
    if (srv_asleep(S)) { /* the pool is freed: nothing held or cached */
        ms.sessions_open = ms.kv_blocks_used = ms.kv_blocks_cached = ms.kv_blocks_shared = 0;
        ms.kv_bytes_used = 0;
    } else if (hx_engine_stats_get(S->e, &es) || hx_model_stats_get(S->m, &ms)) {
        return srv_error(c, 500, "server_error", "stats_unavailable", "The engine's counters could not be read: %s",
                         hx_last_error());
    }
    pthread_mutex_lock(&S->metrics.lock);
    const uint32_t in_flight = S->metrics.in_flight;
    pthread_mutex_unlock(&S->metrics.lock);
    json_t *kv = json_pack("{s:i,s:i,s:i,s:i,s:i,s:I,s:I,s:I,s:I,s:I}", "blocks_total", (int)ms.kv_blocks_total,
                           "blocks_used", (int)ms.kv_blocks_used, "blocks_cached", (int)ms.kv_blocks_cached,
                           "blocks_shared", (int)ms.kv_blocks_shared, "block_tokens", (int)ms.kv_block_tokens,
                           "bytes_used", (json_int_t)ms.kv_bytes_used, "prefix_hits", (json_int_t)ms.kv_hits,
                           "prefix_misses", (json_int_t)ms.kv_misses, "tokens_reused",
                           (json_int_t)ms.kv_tokens_reused, "evictions", (json_int_t)ms.kv_evictions);
    json_t *engine = json_pack(
        "{s:i,s:i,s:i,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:f}", "waiting", (int)es.waiting, "running",
        (int)es.running, "in_flight", (int)in_flight, "submitted", (json_int_t)es.submitted, "finished",
        (json_int_t)es.finished, "cancelled", (json_int_t)es.cancelled, "preemptions", (json_int_t)es.preemptions,
        "steps", (json_int_t)es.steps, "prompt_tokens", (json_int_t)es.prompt_tokens, "prompt_tokens_cached",
        (json_int_t)es.tokens_cached, "generated_tokens", (json_int_t)es.generated_tokens, "busy_seconds",
        es.busy_seconds);
    json_t *body = json_pack("{s:s,s:f,s:o,s:o,s:o}", "model", S->model_name, "uptime_s", srv_now() - S->started,
                             "devices", devices(S), "kv", kv, "engine", engine);
    if (!body)
        return srv_error(c, 500, "server_error", "internal_error", "Out of memory.");
    return srv_json(c, 200, body);
}
