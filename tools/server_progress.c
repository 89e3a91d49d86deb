/* llama-server's timings_per_token and return_progress on streamed
 * answers.
 *   timings_per_token: every event after a chat's role chunk carries
 *   "timings" (cache_n, prompt_n, prompt_ms, predicted_n, predicted_ms and
 *   the rates) as they stand when it is sent; the last event's are the
 *   engine's final ones, as a whole /completion answer has them.
 *   return_progress: an event as the prompt is read (the engine's
 *   hx_request.on_progress): one at admission (processed == cache, nothing
 *   evaluated), then one after each step that evaluated part of it, the
 *   last with processed == total, each carrying
 *   prompt_progress {total, cache, processed, time_ms} (and timings with
 *   timings_per_token): /completion's an empty partial, a chat's a
 *   {role: assistant, content: null} delta, /v1/completions' an empty
 *   text, as llama-server's.  A whole answer has no events to carry them
 *   (as llama-server's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/server.h"

/* llama-server's rates: over the prompt's evaluated tokens, and over the
 * decode steps (n tokens take n - 1: the first comes with the prompt). */
static json_t *timings_of(uint32_t cached, uint32_t prompt_n, double p_ms, uint32_t predicted, double d_ms)
{
    const uint32_t steps = predicted > 0 ? predicted - 1 : 0;
    return json_pack("{s:i,s:i,s:f,s:f,s:f,s:i,s:f,s:f,s:f}", "cache_n", (int)cached, "prompt_n", (int)prompt_n,
                     "prompt_ms", p_ms, "prompt_per_token_ms", prompt_n ? p_ms / prompt_n : 0.0,
                     "prompt_per_second", p_ms > 0 ? prompt_n * 1e3 / p_ms : 0.0, "predicted_n", (int)predicted,
                     "predicted_ms", d_ms, "predicted_per_token_ms", steps ? d_ms / steps : 0.0,
                     "predicted_per_second", d_ms > 0 ? steps * 1e3 / d_ms : 0.0);
}

json_t *srv_timings_json(srv_job *j, srv_choice *ch)
{
    if (ch->ended) {
        /* the engine's clock: queued, then the prompt up to the first token, then the rest */
        const hx_request_result *r = &ch->res;
        const uint32_t cached = r->prompt_tokens_cached, prompt = j->prompt_tokens;
        return timings_of(cached, prompt > cached ? prompt - cached : 0,
                          (r->first_token_seconds - r->queue_seconds) * 1e3, r->stats.generated_tokens,
                          (r->total_seconds - r->first_token_seconds) * 1e3);
    }
    /* on the way: the prompt as far as the engine said, the tokens so far */
    const double now = srv_now();
    const uint32_t cached = ch->progress.cached;
    const uint32_t done = ch->n_pieces ? j->prompt_tokens : ch->progress.processed;
    const uint32_t prompt_n = done > cached ? done - cached : 0;
    double p_ms = 0;
    if (prompt_n && ch->t_eval_start > 0)
        p_ms = ((ch->n_pieces ? ch->t_first : ch->t_progress) - ch->t_eval_start) * 1e3;
    const double d_ms = ch->n_pieces ? (now - ch->t_first) * 1e3 : 0;
    return timings_of(cached, prompt_n, p_ms > 0 ? p_ms : 0, (uint32_t)ch->n_pieces, d_ms > 0 ? d_ms : 0);
}

void srv_on_progress(void *user, const hx_engine_progress *p)
{
    srv_choice *ch = user;
    srv_job *j = ch->job;
    const double now = srv_now();
    pthread_mutex_lock(&j->lock);
    ch->progress = *p;
    ch->t_progress = now;
    if (ch->t_eval_start <= 0)
        ch->t_eval_start = now - p->seconds;
    if (j->stream && j->return_progress && !j->gone) {
        json_t *prog = json_pack("{s:i,s:i,s:i,s:I}", "total", (int)p->total, "cache", (int)p->cached, "processed",
                                 (int)p->processed, "time_ms", (json_int_t)((now - j->t_submit) * 1e3));
        json_t *ev;
        if (j->dialect) { /* the API says it in its own event */
            if (j->dialect->progress)
                j->dialect->progress(j, ch, prog);
            else
                json_decref(prog);
            prog = NULL;
            ev = NULL;
        } else if (j->native_answer)
            ev = json_pack("{s:i,s:s,s:[],s:b,s:i,s:i,s:I}", "index", ch->index, "content", "", "tokens", "stop", 0,
                           "id_slot", srv_answer_slot(j, ch), "tokens_predicted", 0, "tokens_evaluated",
                           (json_int_t)p->total);
        else
            ev = srv_stream_chunk(j, json_pack("[{s:i,s:o,s:n,s:n}]", "index", ch->index, j->chat ? "delta" : "text",
                                               j->chat ? json_pack("{s:s,s:n}", "role", "assistant", "content")
                                                       : json_string(""),
                                               "logprobs", "finish_reason"));
        if (ev) {
            json_object_set_new(ev, "prompt_progress", prog);
            if (j->timings_per_token)
                json_object_set_new(ev, "timings", srv_timings_json(j, ch));
            srv_stream_event(j, ev);
        } else {
            json_decref(prog);
        }
        pthread_cond_broadcast(&j->cond);
    }
    pthread_mutex_unlock(&j->lock);
}
