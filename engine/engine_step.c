/* One step of the serving engine: a single hx_batch_eval holding one
 * decode token for every running request that has one, the prefill chunks
 * of running requests still reading their prompt, and the first chunks of
 * newly admitted ones, up to the token budget (chunked prefill, as
 * Sarathi-Serve and vLLM do: decode goes first, so a long prompt delays
 * nobody's next token by more than one budget's worth of work).  Tenants
 * share the prefill part of the budget, a tenant with nothing running
 * goes first, and while several tenants are active steps are kept short
 * (plan, below). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "runtime/error.h"

static double now(hx_engine *e) { return hx_runtime_clock(e->m->rt); }

/* How long a tenant counts as active after it last had a request in the
 * engine: a client sending one short request at a time has nothing in the
 * engine between them, and the steps planned in that gap must already be
 * short when its next one comes. */
#define TENANT_ACTIVE_SECONDS 30.0

/* A tenant's load is the tokens evaluated for it, each counting less as
 * it ages, by e^(-age / LOAD_SECONDS): the tenants' recent shares of the
 * work, as a virtual token counter (Sheng et al., "Fairness in Serving
 * Large Language Models") but forgetting, so a tenant idle for a while
 * holds no credit and none of a debt. */
#define LOAD_SECONDS 10.0

static double load_now(const hx_engine_tenant *t, double at)
{
    return t->load * exp(-(at - t->load_at) / LOAD_SECONDS);
}

static void add_load(hx_engine_tenant *t, double at, uint32_t tokens)
{
    t->load = load_now(t, at) + tokens;
    t->load_at = at;
}

/* Appends up to `max` of q's pending tokens to the batch. */
static size_t add_entries(hx_engine *e, size_t n, hx_engine_req *q, uint32_t max)
{
    uint32_t pending = q->n_toks - q->n_eval, c = pending < max ? pending : max;
    for (uint32_t i = 0; i < c; i++) {
        e->b_tokens[n + i] = q->toks[q->n_eval + i];
        e->b_sessions[n + i] = q->sess;
        e->b_want[n + i] = q->r.embed_request ? (uint8_t)hx_engine_embed_want(q, q->n_eval + i)
                                              : c == pending && i + 1 == c;
        e->b_owner[n + i] = q;
    }
    return n + c;
}

/* Cancelled requests end; the others still waiting become the
 * candidates, in *cand (freed by the caller), their number returned. */
static size_t sweep(hx_engine *e, hx_engine_req ***cand)
{
    size_t n = 0, nc = 0;
    pthread_mutex_lock(&e->lock);
    const size_t all = e->n_all;
    hx_engine_req **c = *cand = malloc(sizeof *c * (all ? all : 1));
    for (size_t i = 0; c && i < all; i++) {
        hx_engine_req *q = e->all[i];
        if (q->state != HX_REQ_DONE && q->cancel)
            c[all - ++nc] = q; /* from the back */
        else if (q->state == HX_REQ_WAITING)
            c[n++] = q;
    }
    pthread_mutex_unlock(&e->lock);
    for (size_t i = 0; i < nc; i++)
        hx_engine_req_finish(e, c[all - 1 - i], HX_OK, HX_FINISH_CANCELLED);
    return n;
}

/* Opens q's session and attaches the leading KV blocks the prefix cache
 * holds for its tokens (its prompt, or after a preemption its prompt and
 * what it generated), all at once: chunks then start after them, so the
 * step's budget goes to tokens that need evaluating and a chunk boundary
 * inside the cached prefix loses nothing. */
static hx_status open_session(hx_engine *e, hx_engine_req *q)
{
    hx_status st = hx_session_open(e->m, &q->sess);
    uint32_t reused = 0;
    if (st == HX_OK) {
        q->sess->uncached = q->r.no_prefix_cache != 0;
        q->sess->embd = q->r.embed_request != 0;
        q->sess->salt = q->salt;
    }
    if (st == HX_OK)
        st = hx_session_attach_cached(q->sess, q->toks, q->n_toks, &reused);
    q->n_eval = reused;
    return st;
}

/* The request's prompt progress (hx_request.on_progress), its first
 * reading only: a recomputation after a preemption reports nothing. */
static void progress(hx_engine *e, hx_engine_req *q)
{
    if (!q->r.on_progress || q->res.preemptions || q->r.embed_request)
        return;
    const hx_engine_progress p = {q->n_prompt, q->res.prompt_tokens_cached,
                                  q->n_eval < q->n_prompt ? q->n_eval : q->n_prompt, now(e) - q->t_first_eval};
    q->r.on_progress(q->r.user, &p);
}

/* What the cache gave q at this admission, for its result and the stats. */
static void count_cached(hx_engine *e, hx_engine_req *q)
{
    if (!q->n_eval)
        return;
    if (q->res.preemptions)
        q->res.recomputed_tokens_cached += q->n_eval;
    else
        q->res.prompt_tokens_cached = q->n_eval;
    pthread_mutex_lock(&e->lock);
    e->stats.tokens_cached += q->n_eval;
    pthread_mutex_unlock(&e->lock);
}

/* Tokens q's tenant may still take in a pass that gives each tenant up
 * to `cap` prefill tokens. */
static uint32_t tenant_room(hx_engine *e, const hx_engine_req *q, uint32_t cap)
{
    const hx_engine_tenant *t = hx_engine_tenant_of(e, q->tenant);
    return !t ? cap : t->step_tokens < cap ? cap - t->step_tokens : 0;
}

static void give(hx_engine *e, hx_engine_req *q, uint32_t c)
{
    hx_engine_tenant *t = hx_engine_tenant_of(e, q->tenant);
    q->take += c;
    if (t)
        t->step_tokens += c;
}

static uint32_t min3(uint32_t a, uint32_t b, uint32_t c)
{
    const uint32_t m = a < b ? a : b;
    return m < c ? m : c;
}

/* With several tenants known, the last free running slot is kept for a
 * tenant with no request running, or one under its share of the slots
 * among the active: else one tenant keeping max_running requests in
 * flight holds every slot, and another's request waits for one of them to
 * end however short it is.  (A lone tenant, the server without API keys,
 * keeps every slot.) */
static int last_slot_kept(hx_engine *e, const hx_engine_req *q)
{
    const hx_engine_tenant *t = hx_engine_tenant_of(e, q->tenant);
    const int under_share = e->active > 1 && t && t->running < e->o.max_running / e->active;
    return e->n_tenants > 1 && e->n_running + 1 >= e->o.max_running && t && t->running > 0 && !under_share;
}

/* Whether q comes as a newcomer: its tenant has nothing running, or
 * nothing reading a prompt while the tenant is the lightest active one by
 * more than q's prompt (a light user's next question while its last
 * answer streams: else its prompt waits for a share of several steps
 * beside the flood's; a flood between its prompts is not light). */
static int newcomer(hx_engine *e, const hx_engine_req *q, double at)
{
    const hx_engine_tenant *t = hx_engine_tenant_of(e, q->tenant);
    if (!t || !t->running)
        return t != NULL;
    if (t->reading)
        return 0;
    const double mine = load_now(t, at) + q->n_toks;
    int others = 0;
    for (size_t i = 0; i < e->n_tenants; i++) {
        const hx_engine_tenant *u = &e->tenants[i];
        if (u == t || at - u->seen >= TENANT_ACTIVE_SECONDS)
            continue;
        if (load_now(u, at) < mine)
            return 0;
        others = 1;
    }
    return others;
}

/* Admits waiting requests while the step's `budget`, max_running and the
 * KV pool allow, each tenant taking up to `cap` prefill tokens: each gets
 * a session, the cached blocks of its prefix and its first prefill chunk.
 * Those admitted leave cand[0..*nc); a tenant's candidates that found no
 * room under the cap stay for a later pass.  With `newcomers`, only
 * newcomers' requests, in the policy's order among them (under
 * HX_POLICY_PRIORITY, those of the highest priority waiting). */
static size_t admit(hx_engine *e, size_t n, uint32_t budget, hx_engine_req **cand, size_t *nc, uint32_t cap,
                    int64_t *free_tokens, int newcomers)
{
    size_t m = *nc; /* cand[0..m) are still considered in this pass */
    if (newcomers) {
        const double at = now(e);
        int32_t top = INT32_MIN;
        for (size_t i = 0; e->o.policy == HX_POLICY_PRIORITY && i < m; i++)
            top = cand[i]->r.priority > top ? cand[i]->r.priority : top;
        size_t kept = 0;
        for (size_t i = 0; i < m; i++)
            if (cand[i]->r.priority >= top && newcomer(e, cand[i], at)) {
                hx_engine_req *q = cand[kept];
                cand[kept++] = cand[i];
                cand[i] = q;
            }
        m = kept;
    }
    while (n < budget && e->n_running < e->o.max_running && m) {
        ptrdiff_t k = hx_engine_pick(e, cand, m);
        if (k < 0)
            break;
        hx_engine_req *q = cand[k];
        const uint32_t room = last_slot_kept(e, q) ? 0 : tenant_room(e, q, cap);
        if (!room) {
            cand[k] = cand[m - 1];
            cand[--m] = q;
            continue;
        }
        const uint32_t limit = (uint32_t)(budget - n) < room ? (uint32_t)(budget - n) : room;
        /* Room for its first chunk as if nothing were cached: cached
         * blocks no session holds count as free room until attached. */
        const uint32_t most = q->n_toks < limit ? q->n_toks : limit;
        if (most > *free_tokens)
            break; /* the policy's next one waits for room rather than being overtaken */
        cand[k] = cand[m - 1];
        cand[--m] = cand[--*nc];
        hx_status st = open_session(e, q);
        const uint32_t pending = q->n_toks - q->n_eval;
        const uint32_t chunk = pending < limit ? pending : limit;
        for (uint32_t i = 0; st == HX_OK && !q->started && i < q->n_prompt; i++)
            st = hx_sampler_accept(q->gen.smp, q->toks[i]);
        if (st) {
            hx_engine_req_finish(e, q, st, HX_FINISH_NONE);
            continue;
        }
        q->started = 1;
        if (q->t_first_eval <= 0)
            q->t_first_eval = now(e);
        count_cached(e, q);
        progress(e, q);
        hx_engine_running_add(e, q);
        give(e, q, chunk);
        n += chunk;
        *free_tokens -= q->n_eval + chunk; /* at most what attaching and the chunk take */
    }
    return n;
}

/* Prefill chunks of running requests still reading their prompt, each
 * tenant up to `cap` tokens of the step's `budget`; with free_tokens, what
 * they take is counted against the room admissions see. */
static size_t plan_prefill(hx_engine *e, size_t n, uint32_t budget, uint32_t cap, int64_t *free_tokens)
{
    for (uint32_t i = 0; i < e->n_running && n < budget; i++) {
        hx_engine_req *q = e->running[i];
        const uint32_t pending = q->n_toks - q->n_eval;
        if (pending <= 1 || q->take >= pending)
            continue; /* decoding: its token went first */
        const uint32_t c = min3(pending - q->take, (uint32_t)(budget - n), tenant_room(e, q, cap));
        give(e, q, c);
        n += c;
        if (free_tokens)
            *free_tokens -= c;
    }
    return n;
}

/* Notes that q's tenant has a request in the engine at time t, and
 * whether it has prompt tokens to read in this step; the tenant, or NULL
 * without memory for it. */
static hx_engine_tenant *mark(hx_engine *e, const hx_engine_req *q, double t, int reads)
{
    hx_engine_tenant *x = hx_engine_tenant_of(e, q->tenant);
    if (x) {
        x->seen = t;
        x->step_tokens |= (uint32_t)reads;
    }
    return x;
}

static int reads_prompt(const hx_engine_req *q) { return q->n_toks - q->n_eval > 1; }

/* Tenants with prompt tokens to read (running requests' chunks, and the
 * waiting requests when admission is open) into *reading; returned: the
 * tenants active, with a request in the engine now or lately. */
static uint32_t count_tenants(hx_engine *e, hx_engine_req *const *cand, size_t nc, int admitting, uint32_t *reading)
{
    const double t = now(e);
    for (size_t i = 0; i < e->n_tenants; i++)
        e->tenants[i].step_tokens = e->tenants[i].reading = 0;
    for (uint32_t i = 0; i < e->n_running; i++) {
        const int reads = reads_prompt(e->running[i]);
        hx_engine_tenant *x = mark(e, e->running[i], t, reads);
        if (x)
            x->reading += (uint32_t)reads;
    }
    for (size_t i = 0; i < nc; i++)
        mark(e, cand[i], t, admitting);
    uint32_t active = 0;
    *reading = 0;
    for (size_t i = 0; i < e->n_tenants; i++) {
        *reading += e->tenants[i].step_tokens;
        active += t - e->tenants[i].seen < TENANT_ACTIVE_SECONDS;
        e->tenants[i].step_tokens = 0;
    }
    return active;
}

/* The step's token limit once decoding took n: the whole budget for a
 * lone tenant; with several active, n and at most shared_prefill prompt
 * tokens, so that the step in flight when another tenant's request comes
 * is short (its first token waits for that step, then its own). */
static uint32_t step_limit(const hx_engine *e, size_t n, uint32_t active)
{
    const uint32_t budget = e->o.token_budget;
    if (active < 2 || n >= budget)
        return budget;
    uint32_t shared = e->o.shared_prefill ? e->o.shared_prefill : budget / 32;
    shared = shared ? shared : 1;
    return budget - n > shared ? (uint32_t)n + shared : budget;
}

/* The step's batch: a decode token for every running request that has
 * one, then prefill.  A newcomer (see newcomer()) has its
 * waiting request admitted first, with the whole budget: else its first
 * token waits for shares of several steps (the step is as long as the
 * newcomer's prompt makes it, as it would be alone; while several
 * tenants are active it holds the newcomers' prompts alone, the others'
 * decode tokens waiting one step).  The others' prompt
 * tokens fill the step up to step_limit.  Then, with several tenants reading prompts, the prefill room is shared
 * out, each tenant up to an equal share (its running chunks, then its
 * admissions), so one tenant's long prompts cannot keep another's short
 * one out of the next step; what a tenant leaves of its share goes to
 * whoever has more, in the same order, so a step is as full as its limit
 * allows.  A single tenant's steps are planned as without the shares. */
static void plan(hx_engine *e, hx_engine_req **cand, size_t nc)
{
    const uint32_t budget = e->o.token_budget;
    const int admitting = !e->hold_admission || e->n_running == 0;
    uint32_t k;
    const uint32_t active = e->active = count_tenants(e, cand, nc, admitting, &k);
    hx_engine_req *crowding = admitting ? hx_engine_slot_victim(e, cand, nc, active) : NULL;
    if (crowding)
        hx_engine_req_preempt(e, crowding);
    size_t n = 0;
    for (uint32_t i = 0; i < e->n_running; i++)
        e->running[i]->take = 0;
    for (uint32_t i = 0; i < e->n_running && n < budget; i++)
        if (e->running[i]->n_toks - e->running[i]->n_eval == 1) {
            e->running[i]->take = 1;
            n++;
        }
    int64_t free_tokens = 0;
    if (admitting)
        /* The pool's free and cached blocks (a count kept, not hx_model_stats'
         * walk over every block), less room kept back for the running
         * requests' next tokens. */
        free_tokens = (int64_t)hx_kv_pool_free_tokens(e->m->kv) - (int64_t)e->n_running -
                      (int64_t)e->m->kv->block_size;
    const uint32_t limit = step_limit(e, n, active);
    const uint32_t before = e->n_running;
    if (admitting)
        n = admit(e, n, budget, cand, &nc, budget, &free_tokens, 1);
    if (active > 1 && e->n_running > before) {
        /* A newcomer's step is its prompt alone: the others' decode
         * tokens wait one step, so its first token costs what it would
         * alone plus the step in flight when it came. */
        for (uint32_t i = 0; i < before; i++)
            e->running[i]->take = 0;
        return;
    }
    const uint32_t share = k > 1 && n < limit ? (uint32_t)(limit - n) / k : limit;
    const uint32_t cap = share ? share : 1;
    n = plan_prefill(e, n, limit, cap, NULL);
    if (admitting)
        n = admit(e, n, limit, cand, &nc, cap, &free_tokens, 0);
    if (cap < limit) {
        n = plan_prefill(e, n, limit, limit, &free_tokens);
        if (admitting)
            admit(e, n, limit, cand, &nc, limit, &free_tokens, 0);
    }
}

/* After the evaluation: requests whose every token is in the KV sample
 * their next one, and those that ended leave. */
static void collect(hx_engine *e, size_t n)
{
    const double at = now(e);
    for (size_t i = 0, j; i < n; i = j) {
        hx_engine_req *q = e->b_owner[i];
        for (j = i; j < n && e->b_owner[j] == q; j++)
            ;
        hx_engine_tenant *t = hx_engine_tenant_of(e, q->tenant);
        if (t)
            add_load(t, at, (uint32_t)(j - i));
        const uint32_t first = q->n_eval;
        q->n_eval += (uint32_t)(j - i);
        if (first < q->n_prompt) {
            pthread_mutex_lock(&e->lock);
            e->stats.prompt_tokens += (q->n_eval < q->n_prompt ? q->n_eval : q->n_prompt) - first;
            pthread_mutex_unlock(&e->lock);
            progress(e, q);
        }
        if (q->r.embed_request) {
            hx_status st = hx_engine_embed_collect(q, first, (uint32_t)(j - i));
            if (st || q->n_eval >= q->n_toks)
                hx_engine_embed_finish(e, q, st);
            continue;
        }
        if (q->n_eval < q->n_toks)
            continue;
        int ended = 0;
        hx_status st = hx_engine_req_sample(e, q, &ended);
        if (st || ended)
            hx_engine_req_finish(e, q, st, q->res.stats.finish);
    }
}

hx_status hx_engine_step(hx_engine *e, int *idle)
{
    *idle = 0;
    hx_engine_req **cand;
    size_t nc = sweep(e, &cand);
    if (!cand)
        return hx_error(HX_ERR_NO_MEMORY, "engine step");
    plan(e, cand, nc);
    size_t n = 0;
    uint32_t in_batch = 0;
    for (uint32_t i = 0; i < e->n_running; i++)
        if (e->running[i]->take) {
            n = add_entries(e, n, e->running[i], e->running[i]->take);
            in_batch++;
        }
    free(cand);
    if (n == 0) {
        *idle = 1;
        return HX_OK;
    }
    const hx_batch b = {n, e->b_tokens, e->b_sessions, e->b_want};
    double t0 = now(e);
    hx_status st = hx_batch_eval(e->m, &b);
    pthread_mutex_lock(&e->lock);
    e->stats.busy_seconds += now(e) - t0;
    e->stats.steps++;
    e->stats.step_requests += in_batch;
    pthread_mutex_unlock(&e->lock);
    if (st == HX_ERR_NO_MEMORY) {
        /* The pool is full: the victim's blocks go back and it is
         * recomputed later; alone, a request that cannot fit fails. */
        hx_engine_req *v = hx_engine_victim(e);
        e->hold_admission = 1;
        if (e->n_running > 1)
            hx_engine_req_preempt(e, v);
        else if (v)
            hx_engine_req_finish(e, v, st, HX_FINISH_NONE);
        return HX_OK;
    }
    if (st) {
        /* A failed evaluation fails its requests, not the engine. */
        char why[sizeof e->b_owner[0]->res.error];
        snprintf(why, sizeof why, "%s", hx_last_error());
        for (size_t i = 0; i < n; i++)
            if (e->b_owner[i]->state == HX_REQ_RUNNING) {
                snprintf(e->b_owner[i]->res.error, sizeof why, "%s", why);
                hx_engine_req_finish(e, e->b_owner[i], st, HX_FINISH_NONE);
            }
        return HX_OK;
    }
    e->hold_admission = 0;
    collect(e, n);
    return HX_OK;
}
