/* A serving request's life outside the scheduler: its copy of what the
 * caller submitted, sampling one token with its text and log-probabilities,
 * preemption and its end. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "runtime/error.h"

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    return d ? memcpy(d, s, n) : NULL;
}

void hx_engine_req_free(hx_engine_req *q)
{
    if (!q)
        return;
    hx_session_close(q->sess);
    hx_generation_free(&q->gen);
    for (uint32_t i = 0; q->stop && i < q->r.sampling.n_stop; i++)
        free(q->stop[i]);
    free(q->stop);
    free(q->tenant);
    free(q->toks);
    free(q->embd_rows);
    free(q);
}

/* The prompt's tokens into q->toks, with room for max_tokens more. */
static hx_status copy_prompt(hx_engine *e, hx_engine_req *q, const hx_request *r)
{
    size_t n = r->n_tokens;
    if (r->text) {
        size_t len = strlen(r->text);
        hx_status st = hx_model_tokenize(e->m, r->text, len, 1, 1, NULL, 0, &n);
        if (st != HX_OK && st != HX_ERR_RANGE)
            return st;
    }
    if (n == 0)
        return hx_error(HX_ERR_INVALID_ARG, "hx_engine_submit: empty prompt");
    const uint32_t n_ctx = e->m->opts.n_ctx;
    if (n > n_ctx)
        return hx_error(HX_ERR_RANGE, "context too small: the prompt is %zu tokens; the context is %u tokens (n_ctx)",
                        n, n_ctx);
    const uint32_t pool = e->m->kv->n_blocks * e->m->kv->block_size;
    if (n > pool)
        return hx_error(HX_ERR_NO_MEMORY, "KV cache memory: the prompt is %zu tokens; the pool holds %u tokens in all "
                                          "(kv_tokens)", n, pool);
    uint64_t cap = (uint64_t)n + r->max_tokens;
    q->cap_toks = (uint32_t)(cap > n_ctx + 1u ? n_ctx + 1u : cap);
    if (!(q->toks = malloc(sizeof *q->toks * q->cap_toks)))
        return hx_error(HX_ERR_NO_MEMORY, "request of %zu tokens", n);
    if (r->text) {
        hx_status st = hx_model_tokenize(e->m, r->text, strlen(r->text), 1, 1, q->toks, n, &n);
        if (st)
            return st;
    } else {
        memcpy(q->toks, r->tokens, sizeof *q->toks * n);
    }
    for (size_t i = 0; i < n; i++)
        if (q->toks[i] < 0 || (uint32_t)q->toks[i] >= e->m->info.n_vocab)
            return hx_error(HX_ERR_RANGE, "token %zu is %d; the vocabulary has %u tokens", i, q->toks[i],
                            e->m->info.n_vocab);
    q->n_toks = q->n_prompt = (uint32_t)n;
    return HX_OK;
}

hx_status hx_engine_req_create(hx_engine *e, const hx_request *r, hx_engine_req **out)
{
    *out = NULL;
    if (!r || (!r->text && (!r->tokens || !r->n_tokens)))
        return hx_error(HX_ERR_INVALID_ARG, "hx_engine_submit: no prompt (tokens or text)");
    if (r->max_tokens == 0 && !r->embed_request)
        return hx_error(HX_ERR_INVALID_ARG, "hx_engine_submit: max_tokens is 0; ask for at least one token");
    if (r->top_logprobs > HX_ENGINE_MAX_TOP)
        return hx_error(HX_ERR_INVALID_ARG, "hx_engine_submit: top_logprobs is %u; at most %d", r->top_logprobs,
                        HX_ENGINE_MAX_TOP);
    if (r->sampling.n_stop && !r->sampling.stop)
        return hx_error(HX_ERR_INVALID_ARG, "hx_engine_submit: %u stop strings and a NULL array", r->sampling.n_stop);
    hx_engine_req *q = calloc(1, sizeof *q);
    if (!q)
        return hx_error(HX_ERR_NO_MEMORY, "request");
    q->r = *r;
    q->r.text = NULL;
    q->r.tokens = NULL;
    if (r->embed_request) {
        /* Nothing is generated: room for no token past the prompt, no
         * sampling asked of the caller. */
        q->r.max_tokens = 1;
        q->r.sampling = hx_sampling_default();
        q->r.top_logprobs = 0;
        q->r.no_prefix_cache = 1;
    }
    hx_status st = copy_prompt(e, q, r);
    const uint32_t ns = r->sampling.n_stop;
    if (st == HX_OK && ns && !(q->stop = calloc(ns, sizeof *q->stop)))
        st = hx_error(HX_ERR_NO_MEMORY, "stop strings");
    for (uint32_t i = 0; st == HX_OK && i < ns; i++)
        if (r->sampling.stop[i] && !(q->stop[i] = dup_str(r->sampling.stop[i])))
            st = hx_error(HX_ERR_NO_MEMORY, "stop strings");
    q->r.sampling.stop = (const char *const *)q->stop;
    q->r.sampling.n_stop = q->stop ? ns : 0;
    if (st == HX_OK && !(q->tenant = dup_str(r->tenant ? r->tenant : "")))
        st = hx_error(HX_ERR_NO_MEMORY, "tenant");
    q->r.tenant = q->tenant;
    q->salt = hx_session_salt_hash(r->cache_salt);
    q->r.cache_salt = NULL; /* not kept: its hash is */
    if (st == HX_OK && r->embed_request)
        st = hx_engine_embed_prepare(e, q);
    if (st == HX_OK)
        st = hx_generation_init(&q->gen, e->m, &q->r.sampling);
    /* What the sampler read at its creation is not kept. */
    q->r.sampling.logit_bias = NULL;
    q->r.sampling.n_logit_bias = 0;
    q->r.sampling.dry_breakers = NULL;
    q->r.sampling.n_dry_breakers = 0;
    q->r.sampling.samplers = NULL;
    q->r.sampling.grammar = NULL;
    q->r.sampling.reasoning_start = q->r.sampling.reasoning_end = q->r.sampling.reasoning_message = NULL;
    if (st) {
        hx_engine_req_free(q);
        return st;
    }
    q->res.stats.prompt_tokens = q->n_prompt;
    q->res.stats.stop_index = -1;
    *out = q;
    return HX_OK;
}

/* log p(token) and the n most likely tokens, from raw logits. */
static void logprobs(const float *l, int32_t V, hx_engine_token *t)
{
    float mx = -INFINITY;
    for (int32_t i = 0; i < V; i++)
        mx = l[i] > mx ? l[i] : mx;
    double sum = 0;
    for (int32_t i = 0; i < V; i++)
        sum += exp((double)(l[i] - mx));
    const float lse = mx + (float)log(sum);
    t->logprob = l[t->token] - lse;
    uint32_t k = 0;
    for (int32_t i = 0; i < V && t->n_top; i++) {
        if (k == t->n_top && l[i] <= t->top_logprob[k - 1])
            continue;
        uint32_t j = k < t->n_top ? k++ : k - 1;
        while (j > 0 && t->top_logprob[j - 1] < l[i]) {
            t->top_logprob[j] = t->top_logprob[j - 1];
            t->top_token[j] = t->top_token[j - 1];
            j--;
        }
        t->top_logprob[j] = l[i];
        t->top_token[j] = i;
    }
    t->n_top = k;
    for (uint32_t j = 0; j < k; j++)
        t->top_logprob[j] -= lse;
}

/* The same from the distribution the token was drawn from (the sampler
 * chain's survivors, renormalized): llama-server's post_sampling_probs. */
static void post_sampling_logprobs(hx_generation *g, hx_engine_token *t)
{
    float probs[HX_ENGINE_MAX_TOP], p;
    const int n = hx_generation_last_probs(g, t->token, t->top_token, probs, (int)t->n_top, &p);
    t->logprob = logf(p);
    t->n_top = (uint32_t)n;
    for (int k = 0; k < n; k++)
        t->top_logprob[k] = logf(probs[k]);
}

static double now(hx_engine *e) { return hx_runtime_clock(e->m->rt); }

hx_status hx_engine_req_sample(hx_engine *e, hx_engine_req *q, int *ended)
{
    *ended = 0;
    const float *l = hx_session_logits(q->sess, -1);
    if (!l)
        return hx_error(HX_ERR_STATE, "request %llu: no logits after its evaluation", (unsigned long long)q->id);
    hx_engine_token t = {.id = q->id, .n_top = q->r.top_logprobs};
    hx_status st = hx_generation_sample(&q->gen, l, &t.token);
    if (st == HX_OK && q->r.post_sampling_probs)
        post_sampling_logprobs(&q->gen, &t);
    if (st == HX_OK)
        st = hx_generation_accept(&q->gen, t.token);
    if (st)
        return st;
    if (!q->r.post_sampling_probs)
        logprobs(l, (int32_t)e->m->info.n_vocab, &t);
    if (!q->generated++)
        q->t_first_token = now(e);
    q->toks[q->n_toks++] = t.token;
    pthread_mutex_lock(&e->lock);
    e->stats.generated_tokens++;
    pthread_mutex_unlock(&e->lock);
    int eog = !q->r.ignore_eos && hx_model_is_eog(e->m, t.token);
    int32_t matched = -1;
    if ((st = hx_generation_next_text(&q->gen, t.token, eog, &t.piece, &matched)))
        return st;
    hx_generation_stats *gs = &q->res.stats;
    gs->generated_tokens = q->generated;
    if (eog || matched >= 0) {
        gs->finish = HX_FINISH_STOP;
        gs->stop_index = matched;
    } else if (q->generated >= q->r.max_tokens || q->n_eval >= e->m->opts.n_ctx || q->n_toks >= q->cap_toks) {
        gs->finish = HX_FINISH_LENGTH;
    }
    if (q->r.on_token && q->r.on_token(q->r.user, &t) && !gs->finish)
        gs->finish = HX_FINISH_CALLBACK;
    *ended = gs->finish != HX_FINISH_NONE;
    return HX_OK;
}

void hx_engine_req_finish(hx_engine *e, hx_engine_req *q, hx_status st, hx_finish_reason why)
{
    hx_generation_stats *gs = &q->res.stats;
    if (st && !q->res.error[0])
        snprintf(q->res.error, sizeof q->res.error, "%s", hx_last_error());
    const char *held = "";
    if (st == HX_OK && why != HX_FINISH_CANCELLED && gs->stop_index < 0 && q->started) {
        size_t n = 0;
        int32_t matched = -1;
        st = hx_generation_last_text(&q->gen, &held, &n, &matched);
        if (st == HX_OK && matched >= 0) {
            why = HX_FINISH_STOP;
            gs->stop_index = matched;
        }
        if (st) {
            snprintf(q->res.error, sizeof q->res.error, "%s", hx_last_error());
            held = "";
        }
    }
    if (q->state == HX_REQ_RUNNING)
        hx_engine_running_remove(e, q);
    hx_session_close(q->sess);
    q->sess = NULL;
    gs->finish = st ? HX_FINISH_NONE : why;
    q->res.status = st;
    const double t = now(e);
    q->res.total_seconds = t - q->t_submit;
    q->res.first_token_seconds = q->generated ? q->t_first_token - q->t_submit : 0;
    q->res.queue_seconds = q->t_first_eval > 0 ? q->t_first_eval - q->t_submit : q->res.total_seconds;
    if (q->r.on_token) {
        hx_engine_token last = {.id = q->id, .last = 1, .result = &q->res, .token = -1, .piece = held};
        q->r.on_token(q->r.user, &last);
    }
    pthread_mutex_lock(&e->lock);
    e->stats.finished++;
    e->stats.failed += st != HX_OK;
    e->stats.cancelled += why == HX_FINISH_CANCELLED;
    pthread_mutex_unlock(&e->lock);
    hx_engine_req_set_state(e, q, HX_REQ_DONE);
}

void hx_engine_req_set_state(hx_engine *e, hx_engine_req *q, hx_req_state s)
{
    pthread_mutex_lock(&e->lock);
    e->stats.waiting -= q->state == HX_REQ_WAITING;
    e->stats.running -= q->state == HX_REQ_RUNNING;
    q->state = s;
    e->stats.waiting += s == HX_REQ_WAITING;
    e->stats.running += s == HX_REQ_RUNNING;
    if (s == HX_REQ_DONE)
        pthread_cond_broadcast(&e->done);
    pthread_mutex_unlock(&e->lock);
}

void hx_engine_req_preempt(hx_engine *e, hx_engine_req *q)
{
    hx_engine_running_remove(e, q);
    hx_session_close(q->sess);
    q->sess = NULL;
    q->n_eval = 0;
    q->res.preemptions++;
    pthread_mutex_lock(&e->lock);
    e->stats.preemptions++;
    pthread_mutex_unlock(&e->lock);
    hx_engine_req_set_state(e, q, HX_REQ_WAITING);
}
