/* The serving engine's choices: which waiting request is admitted next
 * (tenants in turn, then the policy) and which running one is preempted
 * when the KV pool runs out (the lowest priority; among equals one of the
 * tenant running the most, so a flood gives way before the request of a
 * tenant it crowds; then the latest, as vLLM preempts: the oldest request
 * keeps going, so every request ends). */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

hx_engine_tenant *hx_engine_tenant_of(hx_engine *e, const char *name)
{
    for (size_t i = 0; i < e->n_tenants; i++)
        if (!strcmp(e->tenants[i].name, name))
            return &e->tenants[i];
    hx_engine_tenant *t = realloc(e->tenants, sizeof *t * (e->n_tenants + 1));
    char *copy = malloc(strlen(name) + 1);
    if (t)
        e->tenants = t;
    if (!t || !copy) {
        free(copy);
        return NULL;
    }
    t = &e->tenants[e->n_tenants++];
    *t = (hx_engine_tenant){.name = strcpy(copy, name)};
    return t;
}

static uint64_t expected_len(const hx_engine_req *q)
{
    return q->r.expected_tokens ? q->r.expected_tokens : q->r.max_tokens;
}

/* Negative when a goes before b under the engine's policy. */
static int policy_cmp(const hx_engine *e, const hx_engine_req *a, const hx_engine_req *b)
{
    if (e->o.policy == HX_POLICY_PRIORITY && a->r.priority != b->r.priority)
        return a->r.priority > b->r.priority ? -1 : 1;
    if (e->o.policy == HX_POLICY_SHORT_FIRST && expected_len(a) != expected_len(b))
        return expected_len(a) < expected_len(b) ? -1 : 1;
    /* A preempted request has been waiting longest of all: arrival order
     * puts it back first. */
    return a->arrival < b->arrival ? -1 : a->arrival > b->arrival;
}

ptrdiff_t hx_engine_pick(hx_engine *e, hx_engine_req *const *cand, size_t n)
{
    /* Tenants are looked up first: a new one may move the table. */
    for (size_t i = 0; i < n; i++)
        if (!hx_engine_tenant_of(e, cand[i]->tenant))
            return -1;
    ptrdiff_t best = -1;
    const hx_engine_tenant *bt = NULL;
    for (size_t i = 0; i < n; i++) {
        const hx_engine_tenant *t = hx_engine_tenant_of(e, cand[i]->tenant);
        int better = best < 0;
        if (!better && e->o.policy == HX_POLICY_PRIORITY && cand[i]->r.priority != cand[best]->r.priority)
            better = cand[i]->r.priority > cand[best]->r.priority;
        else if (!better && t != bt)
            better = t->running != bt->running ? t->running < bt->running : t->last_admit < bt->last_admit;
        else if (!better)
            better = policy_cmp(e, cand[i], cand[best]) < 0;
        if (better) {
            best = (ptrdiff_t)i;
            bt = t;
        }
    }
    return best;
}

static uint32_t tenant_running(hx_engine *e, const hx_engine_req *q)
{
    const hx_engine_tenant *t = hx_engine_tenant_of(e, q->tenant);
    return t ? t->running : 0;
}

/* Whether q is preempted before v. */
static int preempted_before(hx_engine *e, const hx_engine_req *q, const hx_engine_req *v)
{
    if (q->r.priority != v->r.priority)
        return q->r.priority < v->r.priority;
    const uint32_t qr = tenant_running(e, q), vr = tenant_running(e, v);
    return qr != vr ? qr > vr : q->arrival > v->arrival;
}

hx_engine_req *hx_engine_victim(hx_engine *e)
{
    hx_engine_req *v = NULL;
    for (uint32_t i = 0; i < e->n_running; i++)
        if (!v || preempted_before(e, e->running[i], v))
            v = e->running[i];
    return v;
}

hx_engine_req *hx_engine_slot_victim(hx_engine *e, hx_engine_req *const *cand, size_t n, uint32_t active)
{
    if (active < 2 || e->n_running < e->o.max_running)
        return NULL;
    const uint32_t share = e->o.max_running / active;
    int wants = 0;
    for (size_t i = 0; i < n && !wants; i++)
        wants = tenant_running(e, cand[i]) < share;
    hx_engine_req *v = NULL;
    for (uint32_t i = 0; wants && i < e->n_running; i++) {
        hx_engine_req *q = e->running[i];
        if (tenant_running(e, q) > share && (!v || preempted_before(e, q, v)))
            v = q;
    }
    return v;
}

void hx_engine_running_add(hx_engine *e, hx_engine_req *q)
{
    e->running[e->n_running++] = q;
    hx_engine_tenant *t = hx_engine_tenant_of(e, q->tenant);
    if (t) {
        t->running++;
        t->last_admit = ++e->admissions;
    }
    hx_engine_req_set_state(e, q, HX_REQ_RUNNING);
}

void hx_engine_running_remove(hx_engine *e, hx_engine_req *q)
{
    for (uint32_t i = 0; i < e->n_running; i++)
        if (e->running[i] == q) {
            memmove(e->running + i, e->running + i + 1, sizeof *e->running * (e->n_running - i - 1));
            e->n_running--;
            hx_engine_tenant *t = hx_engine_tenant_of(e, q->tenant);
            if (t && t->running)
                t->running--;
            return;
        }
}
