/* The serving engine's public face (hetero.h, hx_engine): creation, the
 * engine thread's loop, and what other threads call: submit, cancel,
 * wait, statistics. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "runtime/error.h"
#include "runtime/handle.h"

hx_engine_options hx_engine_options_default(void)
{
    return (hx_engine_options){.policy = HX_POLICY_FCFS};
}

hx_request hx_request_default(void)
{
    return (hx_request){.sampling = hx_sampling_default(), .max_tokens = 16};
}

/* Everything running or waiting ends as cancelled (at destroy). */
static void cancel_all(hx_engine *e)
{
    for (;;) {
        hx_engine_req *q = NULL;
        pthread_mutex_lock(&e->lock);
        for (size_t i = 0; i < e->n_all && !q; i++)
            if (e->all[i]->state != HX_REQ_DONE)
                q = e->all[i];
        pthread_mutex_unlock(&e->lock);
        if (!q)
            return;
        hx_engine_req_finish(e, q, HX_OK, HX_FINISH_CANCELLED);
    }
}

static void *engine_thread(void *arg)
{
    hx_engine *e = arg;
    for (;;) {
        pthread_mutex_lock(&e->lock);
        while (!e->stop && !e->stats.waiting && !e->n_running)
            pthread_cond_wait(&e->work, &e->lock);
        int stop = e->stop;
        pthread_mutex_unlock(&e->lock);
        if (stop)
            break;
        int idle;
        if (hx_engine_step(e, &idle) != HX_OK || idle) {
            /* Waiting requests that cannot start yet (no memory for the
             * step itself): try again shortly rather than spin. */
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    cancel_all(e);
    return NULL;
}

static void engine_free(hx_engine *e)
{
    for (size_t i = 0; i < e->n_all; i++)
        hx_engine_req_free(e->all[i]);
    for (size_t i = 0; i < e->n_tenants; i++)
        free(e->tenants[i].name);
    free(e->tenants);
    free(e->all);
    free(e->running);
    free(e->b_tokens);
    free(e->b_sessions);
    free(e->b_want);
    free(e->b_owner);
    pthread_cond_destroy(&e->work);
    pthread_cond_destroy(&e->done);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

static hx_status engine_create(hx_model *m, const hx_engine_options *opts, hx_engine **out)
{
    hx_status st = hx_handle_check_call(m, HX_HANDLE_MODEL, out, "hx_engine_create");
    if (st)
        return st;
    hx_engine_options o = opts ? *opts : hx_engine_options_default();
    if ((unsigned)o.policy > HX_POLICY_PRIORITY)
        return hx_error(HX_ERR_INVALID_ARG, "hx_engine_create: unknown policy %d", (int)o.policy);
    if (!m->tok)
        return hx_error(HX_ERR_UNSUPPORTED, "hx_engine_create: the model has no tokenizer (shapes only)");
    if (!o.max_running)
        o.max_running = 64;
    if (!o.token_budget || o.token_budget > m->opts.max_batch)
        o.token_budget = m->opts.max_batch;
    if (o.token_budget < o.max_running)
        return hx_error(HX_ERR_INVALID_ARG, "hx_engine_create: a token budget of %u cannot give each of %u running "
                                            "requests its decode token", o.token_budget, o.max_running);
    hx_engine *e = calloc(1, sizeof *e);
    if (!e)
        return hx_error(HX_ERR_NO_MEMORY, "engine");
    e->m = m;
    e->o = o;
    e->next_id = 1;
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->work, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->done, &ca);
    pthread_condattr_destroy(&ca);
    const uint32_t B = o.token_budget;
    e->running = malloc(sizeof *e->running * o.max_running);
    e->b_tokens = malloc(sizeof *e->b_tokens * B);
    e->b_sessions = malloc(sizeof *e->b_sessions * B);
    e->b_want = malloc(B);
    e->b_owner = malloc(sizeof *e->b_owner * B);
    if (!e->running || !e->b_tokens || !e->b_sessions || !e->b_want || !e->b_owner) {
        engine_free(e);
        return hx_error(HX_ERR_NO_MEMORY, "engine of %u tokens per step", B);
    }
    if (pthread_create(&e->thread, NULL, engine_thread, e)) {
        engine_free(e);
        return hx_error(HX_ERR_NO_MEMORY, "hx_engine_create: cannot start the engine thread");
    }
    *out = e;
    return HX_OK;
}

hx_status hx_engine_create(hx_model *m, const hx_engine_options *opts, hx_engine **out)
{
    hx_api_enter();
    if (out)
        *out = NULL;
    return hx_api_leave(engine_create(m, opts, out));
}

hx_status hx_engine_destroy(hx_engine *e)
{
    hx_api_enter();
    if (!e)
        return hx_api_leave(HX_OK);
    pthread_mutex_lock(&e->lock);
    e->stop = 1;
    pthread_cond_broadcast(&e->work);
    pthread_mutex_unlock(&e->lock);
    pthread_join(e->thread, NULL);
    engine_free(e);
    return hx_api_leave(HX_OK);
}

static hx_status engine_submit(hx_engine *e, const hx_request *r, uint64_t *id)
{
    if (!e || !id)
        return hx_error(HX_ERR_INVALID_ARG, "hx_engine_submit: NULL engine or id");
    hx_engine_req *q;
    hx_status st = hx_engine_req_create(e, r, &q);
    if (st)
        return st;
    pthread_mutex_lock(&e->lock);
    if (e->stop)
        st = hx_error(HX_ERR_STATE, "hx_engine_submit: the engine is closing");
    else if (e->o.max_waiting && e->stats.waiting >= e->o.max_waiting)
        st = hx_error(HX_ERR_NO_MEMORY, "hx_engine_submit: %u requests are waiting already (max_waiting)",
                      e->stats.waiting);
    else if (e->n_all == e->cap_all) {
        size_t cap = e->cap_all ? 2 * e->cap_all : 64;
        hx_engine_req **a = realloc(e->all, sizeof *a * cap);
        if (!a)
            st = hx_error(HX_ERR_NO_MEMORY, "request table");
        else
            e->all = a, e->cap_all = cap;
    }
    if (st == HX_OK) {
        q->id = *id = e->next_id++;
        q->arrival = q->id;
        q->t_submit = hx_runtime_clock(e->m->rt);
        q->state = HX_REQ_WAITING;
        e->all[e->n_all++] = q;
        e->stats.waiting++;
        e->stats.submitted++;
        pthread_cond_signal(&e->work);
    }
    pthread_mutex_unlock(&e->lock);
    if (st)
        hx_engine_req_free(q);
    return st;
}

hx_status hx_engine_submit(hx_engine *e, const hx_request *r, uint64_t *id)
{
    hx_api_enter();
    return hx_api_leave(engine_submit(e, r, id));
}

/* The request `id` in e->all (under the lock), or -1. */
static ptrdiff_t find(const hx_engine *e, uint64_t id)
{
    for (size_t i = 0; i < e->n_all; i++)
        if (e->all[i]->id == id)
            return (ptrdiff_t)i;
    return -1;
}

hx_status hx_engine_cancel(hx_engine *e, uint64_t id)
{
    hx_api_enter();
    if (!e)
        return hx_api_leave(hx_error(HX_ERR_INVALID_ARG, "hx_engine_cancel: NULL engine"));
    pthread_mutex_lock(&e->lock);
    ptrdiff_t k = find(e, id);
    if (k >= 0) {
        e->all[k]->cancel = 1;
        pthread_cond_signal(&e->work);
    }
    pthread_mutex_unlock(&e->lock);
    return hx_api_leave(k < 0 ? hx_error(HX_ERR_NOT_FOUND, "hx_engine_cancel: no request %llu (never submitted, "
                                                            "or waited for already)", (unsigned long long)id)
                              : HX_OK);
}

static hx_status engine_wait(hx_engine *e, uint64_t id, double timeout_s, hx_request_result *out)
{
    if (!e || !out)
        return hx_error(HX_ERR_INVALID_ARG, "hx_engine_wait: NULL engine or result");
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    if (timeout_s >= 0) {
        double whole = floor(timeout_s);
        until.tv_sec += (time_t)whole;
        until.tv_nsec += (long)((timeout_s - whole) * 1e9);
        if (until.tv_nsec >= 1000000000L)
            until.tv_sec++, until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&e->lock);
    ptrdiff_t k = find(e, id);
    int timed_out = 0;
    while (k >= 0 && e->all[k]->state != HX_REQ_DONE && !timed_out) {
        if (timeout_s < 0)
            pthread_cond_wait(&e->done, &e->lock);
        else
            timed_out = pthread_cond_timedwait(&e->done, &e->lock, &until) == ETIMEDOUT;
        k = find(e, id);
    }
    hx_engine_req *q = NULL;
    if (k >= 0 && e->all[k]->state == HX_REQ_DONE) {
        q = e->all[k];
        e->all[k] = e->all[--e->n_all];
    }
    pthread_mutex_unlock(&e->lock);
    if (k < 0)
        return hx_error(HX_ERR_NOT_FOUND, "hx_engine_wait: no request %llu (never submitted, or waited for already)",
                        (unsigned long long)id);
    if (!q)
        return hx_error(HX_ERR_STATE, "hx_engine_wait: request %llu still running after %g s",
                        (unsigned long long)id, timeout_s);
    *out = q->res;
    hx_engine_req_free(q);
    return HX_OK;
}

hx_status hx_engine_wait(hx_engine *e, uint64_t id, double timeout_s, hx_request_result *out)
{
    hx_api_enter();
    return hx_api_leave(engine_wait(e, id, timeout_s, out));
}

hx_status hx_engine_stats_get(hx_engine *e, hx_engine_stats *out)
{
    hx_api_enter();
    if (!e || !out)
        return hx_api_leave(hx_error(HX_ERR_INVALID_ARG, "hx_engine_stats_get: NULL engine or stats"));
    pthread_mutex_lock(&e->lock);
    *out = e->stats;
    pthread_mutex_unlock(&e->lock);
    return hx_api_leave(HX_OK);
}
