/* The serving engine's insides (hetero.h's hx_engine): requests, the
 * scheduler's choices and the step.  Internal.
 *
 * Threads: any thread submits, cancels and waits under `lock`; one engine
 * thread runs the steps.  A request's generation state (context tokens,
 * session, sampler) belongs to the engine thread once submitted; the
 * fields shared with other threads (state, cancel, result) change under
 * `lock`. */
#ifndef HX_ENGINE_ENGINE_H
#define HX_ENGINE_ENGINE_H

#include <pthread.h>

#include "engine/embed.h"
#include "engine/generation.h"
#include "engine/session.h"

typedef enum { HX_REQ_WAITING, HX_REQ_RUNNING, HX_REQ_DONE } hx_req_state;

typedef struct hx_engine_req {
    uint64_t id, arrival;       /* arrival: submission order */
    hx_request r;               /* the caller's request; pointers below are our copies */
    char *tenant;
    uint64_t salt;              /* hx_session_salt_hash(r.cache_salt) */
    char **stop;
    int32_t *toks;              /* prompt then generated tokens */
    uint32_t n_toks, cap_toks, n_prompt;
    uint32_t n_eval;            /* tokens of toks in the session's KV */
    uint32_t take;              /* tokens the step being planned gives it */
    uint32_t generated;
    int started;                /* its prompt went into the sampler */
    hx_session *sess;
    hx_generation gen;
    hx_req_state state;
    int cancel;
    double t_submit, t_first_eval, t_first_token;
    hx_request_result res;
    /* An embeddings request (hx_request.embed_request): its options
     * resolved, and the hidden states its pooling keeps, by position
     * (none, mean) or the one row (cls, last, rank). */
    hx_embed_options embd;
    float *embd_rows;
} hx_engine_req;

/* A tenant's share of the running requests, for round robin, and of the
 * step being planned's prefill tokens; `seen`: the engine clock when it
 * last had a request in the engine (waiting or running); `load`: the
 * tokens evaluated for it, decaying (engine_step.c), as of `load_at`;
 * `reading`: its running requests with prompt tokens left. */
typedef struct {
    char *name;
    uint32_t running, reading;
    uint64_t last_admit;
    uint32_t step_tokens;
    double seen, load, load_at;
} hx_engine_tenant;

struct hx_engine {
    hx_model *m;
    hx_engine_options o;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t work, done;
    int stop, thread_started;
    hx_engine_req **all;        /* every request not yet waited for */
    size_t n_all, cap_all;
    uint64_t next_id;
    hx_engine_stats stats;
    /* the engine thread's own */
    hx_engine_req **running;
    uint32_t n_running;
    hx_engine_tenant *tenants;
    size_t n_tenants;
    uint32_t active;            /* tenants active at the step being planned (engine_step.c) */
    uint64_t admissions;
    /* The last step ran out of KV room and preempted: the next one
     * admits nobody, so the running requests make progress before the
     * victim comes back (else it is readmitted into the same shortage,
     * forever). */
    int hold_admission;
    int32_t *b_tokens;
    hx_session **b_sessions;
    uint8_t *b_want;
    hx_engine_req **b_owner;
};

/* engine_request.c: a request's life outside the scheduler. */
hx_status hx_engine_req_create(hx_engine *e, const hx_request *r, hx_engine_req **out);
void hx_engine_req_free(hx_engine_req *q);
/* Samples the next token from the session's last logits, passes its text
 * and log-probabilities to the callback, and says whether the request
 * ended (res.stats.finish set). */
hx_status hx_engine_req_sample(hx_engine *e, hx_engine_req *q, int *ended);
/* Flushes held text where no stop string ended it, closes the session and
 * records the end (status st) for hx_engine_wait.  Takes `lock`. */
void hx_engine_req_finish(hx_engine *e, hx_engine_req *q, hx_status st, hx_finish_reason why);
/* Moves q to state `s` under `lock`, keeping the waiting and running
 * counts, and wakes hx_engine_wait when it is done. */
void hx_engine_req_set_state(hx_engine *e, hx_engine_req *q, hx_req_state s);
/* Closes the request's session and queues it again to be recomputed. */
void hx_engine_req_preempt(hx_engine *e, hx_engine_req *q);

/* engine_embed.c: embeddings requests.  Checks q's options and buffer
 * and takes room for its rows (at submission); whether the hidden state
 * at pos is kept; keeps the rows of q's `count` entries of the step that
 * ran, from position first; pools them into the caller's buffer and ends
 * q (st: a failure that ends it instead). */
hx_status hx_engine_embed_prepare(hx_engine *e, hx_engine_req *q);
int hx_engine_embed_want(const hx_engine_req *q, uint32_t pos);
hx_status hx_engine_embed_collect(hx_engine_req *q, uint32_t first, uint32_t count);
void hx_engine_embed_finish(hx_engine *e, hx_engine_req *q, hx_status st);

/* engine_sched.c: who is admitted, who is preempted. */
hx_engine_tenant *hx_engine_tenant_of(hx_engine *e, const char *name);
/* The waiting request to admit next among cand[0..n), or -1. */
ptrdiff_t hx_engine_pick(hx_engine *e, hx_engine_req *const *cand, size_t n);
/* The running request to preempt: lowest priority, then of the tenant
 * with the most running, then latest arrival. */
hx_engine_req *hx_engine_victim(hx_engine *e);
/* With every running slot taken and `active` tenants (two or more), a
 * waiting request among cand[0..n) of a tenant holding fewer than its
 * share of the slots (max_running / active) gets one from a tenant
 * holding more: the running request to preempt for it (as
 * hx_engine_victim orders them, among the tenants over their share), or
 * NULL.  Else the crowded tenant waits for one of the flood's requests to
 * end; the preempted one's blocks go to the prefix cache, so its
 * recomputation mostly attaches them again. */
hx_engine_req *hx_engine_slot_victim(hx_engine *e, hx_engine_req *const *cand, size_t n, uint32_t active);
void hx_engine_running_add(hx_engine *e, hx_engine_req *q);
void hx_engine_running_remove(hx_engine *e, hx_engine_req *q);

/* engine_step.c: one batch over the running requests and new admissions;
 * *idle when there was nothing to do. */
hx_status hx_engine_step(hx_engine *e, int *idle);

#endif
