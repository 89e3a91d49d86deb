/* The serving engine (hx_engine) on the small synthetic model: a greedy
 * request gives the same tokens alone and among 16 submitted at once from
 * several threads (and as hx_session_generate gives them); a cancelled
 * request ends and frees its KV blocks; a pool too small for everyone
 * preempts and still completes every request with the same text; the
 * policies (FCFS, short-first, priority) and the tenants' turns order the
 * admissions; a tenant's short prompt gets into the step after it arrives
 * though another tenant's long prompts are being read, and while two
 * tenants are active the flood's steps read at most shared_prefill prompt
 * tokens and a newcomer's prompt goes whole into the next step; a KV shortage
 * preempts the tenant running the most, and a tenant under its share of
 * the running slots takes one from the flood; a request without
 * the prefix cache neither takes nor leaves cached blocks; bad requests
 * are refused at submission. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "engine/session.h"
#include "tests/hx_test.h"
#include "tests/small_model.h"

#define MAX_OUT 64

/* What a request's callback saw. */
typedef struct {
    int32_t tokens[MAX_OUT];
    float logprob[MAX_OUT];
    uint32_t n;
    char text[1024];
    int first_rank;           /* order of its first token among all requests */
    int lasts;                /* calls marked last */
    hx_finish_reason last_finish;
    atomic_int *rank;         /* shared counter of first tokens */
    /* A gate: the first token waits until the test opens it, so the
     * engine holds this request while the test queues others. */
    atomic_int *gate;
} seen;

static int on_token(void *user, const hx_engine_token *t)
{
    seen *s = user;
    if (t->last) {
        s->lasts++;
        s->last_finish = t->result->stats.finish;
    }
    if (t->token >= 0 && s->n < MAX_OUT) {
        s->logprob[s->n] = t->logprob;
        s->tokens[s->n++] = t->token;
    }
    if (s->n == 1 && t->token >= 0 && s->rank)
        s->first_rank = atomic_fetch_add(s->rank, 1);
    strncat(s->text, t->piece, sizeof s->text - strlen(s->text) - 1);
    while (s->gate && !atomic_load(s->gate))
        usleep(1000);
    return 0;
}

static int direct_token(void *user, int32_t token, const char *piece)
{
    hx_engine_token t = {.token = token, .piece = piece};
    return on_token(user, &t);
}

typedef struct {
    hx_small_model sm;
    hx_runtime *rt;
    hx_model *m;
    hx_engine *e;
} fixture;

/* prefix_cache: hx_model_options.kv_prefix_cache (1 on, -1 off). */
static void open_fixture_cache(fixture *f, uint32_t kv_tokens, const hx_engine_options *eo, int prefix_cache)
{
    hx_small_model_write(&f->sm, "f32");
    f->rt = hx_small_runtime(2, NULL);
    hx_model_options mo = hx_model_options_default();
    mo.kv_tokens = kv_tokens;
    mo.kv_block = 16;
    mo.kv_prefix_cache = prefix_cache;
    HX_ASSERT_OK(hx_model_load(f->rt, f->sm.path, &mo, &f->m));
    HX_ASSERT_OK(hx_engine_create(f->m, eo, &f->e));
}

static void open_fixture(fixture *f, uint32_t kv_tokens, const hx_engine_options *eo)
{
    open_fixture_cache(f, kv_tokens, eo, 1);
}

static void close_fixture(fixture *f)
{
    HX_ASSERT_OK(hx_engine_destroy(f->e));
    hx_model_stats ms;
    HX_ASSERT_OK(hx_model_stats_get(f->m, &ms));
    ck_assert_uint_eq(ms.sessions_open, 0);
    ck_assert_uint_eq(ms.kv_blocks_used, 0);
    HX_ASSERT_OK(hx_model_free(f->m));
    HX_ASSERT_OK(hx_runtime_close(f->rt));
    hx_small_model_remove(&f->sm);
}

static const char *prompts[16] = {
    "Once upon a time", "The quick brown fox", "In a hole in the ground", "It was a bright cold day",
    "Call me Ishmael", "All happy families", "A screaming comes", "Mother died today",
    "Happy families are all alike, every unhappy family is unhappy in its own way", "Far out",
    "Lolita, light of my life", "The sky above the port", "Many years later", "I am an invisible man",
    "It was the best of times, it was the worst of times", "Stately, plump"};

static hx_request greedy(const char *text, uint32_t max_tokens, seen *s)
{
    hx_request r = hx_request_default();
    r.text = text;
    r.max_tokens = max_tokens;
    r.sampling.temperature = 0;
    r.on_token = on_token;
    r.user = s;
    return r;
}

static hx_request_result run_one(hx_engine *e, const hx_request *r)
{
    uint64_t id;
    hx_request_result res;
    HX_ASSERT_OK(hx_engine_submit(e, r, &id));
    HX_ASSERT_OK(hx_engine_wait(e, id, -1, &res));
    ck_assert_msg(res.status == HX_OK, "%s", res.error);
    return res;
}

typedef struct {
    hx_engine *e;
    int first, count;
    seen *out;
    uint64_t *ids;
} submitter;

static void *submit_some(void *arg)
{
    submitter *s = arg;
    for (int i = s->first; i < s->first + s->count; i++) {
        hx_request r = greedy(prompts[i], 24, &s->out[i]);
        if (hx_engine_submit(s->e, &r, &s->ids[i]) != HX_OK)
            s->ids[i] = 0;
    }
    return NULL;
}

/* Submits the 16 prompts from 4 threads at once, waits for them all. */
static void run_sixteen(hx_engine *e, seen *out, hx_request_result *res)
{
    uint64_t ids[16];
    pthread_t th[4];
    submitter sub[4];
    for (int t = 0; t < 4; t++) {
        sub[t] = (submitter){e, 4 * t, 4, out, ids};
        ck_assert_int_eq(pthread_create(&th[t], NULL, submit_some, &sub[t]), 0);
    }
    for (int t = 0; t < 4; t++)
        pthread_join(th[t], NULL);
    for (int i = 0; i < 16; i++) {
        ck_assert_msg(ids[i] != 0, "submission %d refused", i);
        HX_ASSERT_OK(hx_engine_wait(e, ids[i], -1, &res[i]));
        ck_assert_msg(res[i].status == HX_OK, "request %d: %s", i, res[i].error);
    }
}

static void assert_same(const seen *a, const seen *b, int i)
{
    ck_assert_msg(a->n == b->n && !memcmp(a->tokens, b->tokens, sizeof *a->tokens * a->n),
                  "request %d: %u tokens alone, %u batched; texts '%s' / '%s'", i, a->n, b->n, a->text, b->text);
    ck_assert_str_eq(a->text, b->text);
}

START_TEST(greedy_alone_equals_among_sixteen)
{
    fixture f;
    open_fixture(&f, 0, NULL);
    static seen alone[16], together[16];
    memset(alone, 0, sizeof alone);
    memset(together, 0, sizeof together);
    for (int i = 0; i < 16; i++) {
        hx_request r = greedy(prompts[i], 24, &alone[i]);
        hx_request_result res = run_one(f.e, &r);
        ck_assert_uint_eq(res.stats.generated_tokens, alone[i].n);
        ck_assert_uint_gt(alone[i].n, 0);
        ck_assert_int_eq(alone[i].lasts, 1);
        ck_assert_int_eq(alone[i].last_finish, res.stats.finish);
    }
    hx_request_result res[16];
    run_sixteen(f.e, together, res);
    for (int i = 0; i < 16; i++)
        assert_same(&alone[i], &together[i], i);
    hx_engine_stats st;
    HX_ASSERT_OK(hx_engine_stats_get(f.e, &st));
    ck_assert_uint_eq(st.submitted, 32);
    ck_assert_uint_eq(st.finished, 32);
    ck_assert_uint_eq(st.waiting + st.running, 0);
    /* Batched: fewer steps than one per token. */
    uint64_t tokens = 0;
    for (int i = 0; i < 16; i++)
        tokens += together[i].n;
    ck_assert_uint_eq(st.generated_tokens, 2 * tokens);

    /* The engine's greedy text is hx_session_generate's. */
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(f.m, &s));
    int32_t ids[128];
    size_t n;
    HX_ASSERT_OK(hx_model_tokenize(f.m, prompts[0], strlen(prompts[0]), 1, 1, ids, 128, &n));
    hx_sampling sp = hx_sampling_default();
    sp.temperature = 0;
    seen direct = {0};
    hx_generation_stats gs;
    HX_ASSERT_OK(hx_session_generate(s, ids, n, 24, &sp, direct_token, &direct, &gs));
    HX_ASSERT_OK(hx_session_close(s));
    assert_same(&alone[0], &direct, 0);
    close_fixture(&f);
}
END_TEST

START_TEST(cancel_ends_a_request_and_frees_its_blocks)
{
    fixture f;
    open_fixture(&f, 0, NULL);
    atomic_int gate = 0;
    seen s = {.gate = &gate};
    hx_request r = greedy(prompts[1], 200, &s);
    r.sampling.temperature = 0.8f; /* no early end-of-text on a greedy loop */
    uint64_t id;
    HX_ASSERT_OK(hx_engine_submit(f.e, &r, &id));
    while (s.n == 0)
        usleep(1000);
    hx_model_stats ms;
    HX_ASSERT_OK(hx_model_stats_get(f.m, &ms));
    ck_assert_uint_eq(ms.sessions_open, 1);
    ck_assert_uint_gt(ms.kv_blocks_used, 0);
    HX_ASSERT_OK(hx_engine_cancel(f.e, id));
    atomic_store(&gate, 1);
    hx_request_result res;
    HX_ASSERT_OK(hx_engine_wait(f.e, id, -1, &res));
    ck_assert_int_eq(res.status, HX_OK);
    ck_assert_int_eq(res.stats.finish, HX_FINISH_CANCELLED);
    ck_assert_int_eq(s.lasts, 1);
    ck_assert_int_eq(s.last_finish, HX_FINISH_CANCELLED);
    ck_assert_uint_lt(res.stats.generated_tokens, 200);
    HX_ASSERT_OK(hx_model_stats_get(f.m, &ms));
    ck_assert_uint_eq(ms.sessions_open, 0);
    ck_assert_uint_eq(ms.kv_blocks_used, 0);
    ck_assert_int_eq(hx_engine_cancel(f.e, id), HX_ERR_NOT_FOUND);
    ck_assert_int_eq(hx_engine_wait(f.e, id, 0, &res), HX_ERR_NOT_FOUND);
    /* The engine goes on serving. */
    seen after = {0};
    hx_request r2 = greedy(prompts[2], 8, &after);
    hx_request_result res2 = run_one(f.e, &r2);
    ck_assert_uint_gt(after.n, 0);
    ck_assert_uint_eq(after.n, res2.stats.generated_tokens);
    close_fixture(&f);
}
END_TEST

START_TEST(a_small_pool_preempts_and_every_request_completes)
{
    static seen alone[16], together[16];
    memset(alone, 0, sizeof alone);
    memset(together, 0, sizeof together);
    fixture f;
    open_fixture(&f, 0, NULL);
    for (int i = 0; i < 16; i++) {
        hx_request r = greedy(prompts[i], 24, &alone[i]);
        run_one(f.e, &r);
    }
    close_fixture(&f);
    /* 8 blocks of 16 tokens: room for about two of the requests at once. */
    open_fixture(&f, 128, NULL);
    hx_request_result res[16];
    run_sixteen(f.e, together, res);
    uint32_t preempted = 0;
    for (int i = 0; i < 16; i++) {
        assert_same(&alone[i], &together[i], i);
        preempted += res[i].preemptions;
    }
    hx_engine_stats st;
    HX_ASSERT_OK(hx_engine_stats_get(f.e, &st));
    ck_assert_uint_gt(st.preemptions, 0);
    ck_assert_uint_eq(st.preemptions, preempted);
    /* A preempted request's blocks went back to the cache, and when it
     * came back the ones not evicted meanwhile were attached again. */
    uint64_t recomputed_cached = 0, cached = 0;
    for (int i = 0; i < 16; i++) {
        ck_assert_msg(res[i].preemptions || !res[i].recomputed_tokens_cached, "request %d: recomputed nothing", i);
        recomputed_cached += res[i].recomputed_tokens_cached;
        cached += res[i].prompt_tokens_cached + res[i].recomputed_tokens_cached;
    }
    ck_assert_uint_gt(recomputed_cached, 0);
    ck_assert_uint_eq(st.tokens_cached, cached);
    ck_assert_uint_eq(st.failed, 0);
    close_fixture(&f);
}
END_TEST

/* Requests that share a prefix of PREFIX_BLOCKS KV blocks, then a suffix
 * of their own, as token ids (a system prompt before each user's turn). */
#define PREFIX_BLOCKS 5
#define SHARED (PREFIX_BLOCKS * 16)
#define N_SHARING 8
#define SUFFIX 7

static void sharing_prompts(const hx_model *m, int32_t toks[N_SHARING][SHARED + SUFFIX])
{
    hx_model_info info;
    HX_ASSERT_OK(hx_model_info_get(m, &info));
    const uint32_t V = info.n_vocab - 1; /* token 0 may be special; any id works */
    for (int i = 0; i < N_SHARING; i++)
        for (int t = 0; t < SHARED + SUFFIX; t++)
            toks[i][t] = 1 + (int32_t)((t < SHARED ? 7u * t + 3 : 13u * t + 31u * i + 5) % V);
}

/* Runs the N_SHARING requests: the first alone, then the others at once,
 * through an engine whose token budget (24) puts chunk boundaries inside
 * the shared prefix and off block boundaries. */
static void run_sharing(int prefix_cache, seen out[N_SHARING], hx_request_result res[N_SHARING],
                        hx_engine_stats *es, hx_model_stats *ms)
{
    hx_engine_options eo = hx_engine_options_default();
    eo.token_budget = 24;
    eo.max_running = 8;
    fixture f;
    open_fixture_cache(&f, 2048, &eo, prefix_cache); /* room for all: no preemption */
    static int32_t toks[N_SHARING][SHARED + SUFFIX];
    sharing_prompts(f.m, toks);
    uint64_t ids[N_SHARING];
    for (int i = 0; i < N_SHARING; i++) {
        memset(&out[i], 0, sizeof out[i]);
        hx_request r = greedy(NULL, 12, &out[i]);
        r.tokens = toks[i];
        r.n_tokens = SHARED + SUFFIX;
        r.ignore_eos = 1;
        HX_ASSERT_OK(hx_engine_submit(f.e, &r, &ids[i]));
        if (i == 0 || i == N_SHARING - 1)
            for (int j = i == 0 ? 0 : 1; j <= i; j++) {
                HX_ASSERT_OK(hx_engine_wait(f.e, ids[j], -1, &res[j]));
                ck_assert_msg(res[j].status == HX_OK, "request %d: %s", j, res[j].error);
            }
    }
    HX_ASSERT_OK(hx_engine_stats_get(f.e, es));
    HX_ASSERT_OK(hx_model_stats_get(f.m, ms));
    close_fixture(&f);
}

START_TEST(a_shared_prefix_is_taken_from_the_cache_through_chunked_prefill)
{
    static seen off[N_SHARING], on[N_SHARING];
    hx_request_result res_off[N_SHARING], res_on[N_SHARING];
    hx_engine_stats es_off, es_on;
    hx_model_stats ms_off, ms_on;
    run_sharing(-1, off, res_off, &es_off, &ms_off);
    run_sharing(1, on, res_on, &es_on, &ms_on);
    for (int i = 0; i < N_SHARING; i++) {
        assert_same(&off[i], &on[i], i);
        ck_assert_uint_eq(on[i].n, 12);
        ck_assert_uint_eq(res_off[i].prompt_tokens_cached, 0);
        /* The first one found nothing; every later one the whole shared
         * prefix, though 24-token chunks cut it mid-block. */
        ck_assert_msg(res_on[i].prompt_tokens_cached == (i ? SHARED : 0u), "request %d: %u cached prompt tokens",
                      i, res_on[i].prompt_tokens_cached);
        ck_assert_uint_eq(res_on[i].stats.prompt_tokens, SHARED + SUFFIX);
    }
    ck_assert_uint_eq(es_off.tokens_cached, 0);
    ck_assert_uint_eq(es_on.tokens_cached, (N_SHARING - 1) * SHARED);
    /* Only what was not cached was evaluated. */
    ck_assert_uint_eq(es_off.prompt_tokens, N_SHARING * (SHARED + SUFFIX));
    ck_assert_uint_eq(es_on.prompt_tokens, N_SHARING * (SHARED + SUFFIX) - (N_SHARING - 1) * SHARED);
    ck_assert_uint_eq(ms_on.kv_hits, (N_SHARING - 1) * PREFIX_BLOCKS);
    ck_assert_uint_eq(ms_on.kv_tokens_reused, (N_SHARING - 1) * SHARED);
    ck_assert_uint_eq(ms_off.kv_hits, 0);
}
END_TEST

/* One request holds the only running slot (its first token waits on a
 * gate) while four more queue; the order in which those four start is the
 * policy's.  Returns the first-token ranks of the four. */
static void queued_order(hx_engine_policy policy, const uint32_t max_tokens[4], const int32_t prio[4],
                         const char *const tenants[4], int rank_out[4])
{
    hx_engine_options eo = hx_engine_options_default();
    eo.policy = policy;
    eo.max_running = 1;
    fixture f;
    open_fixture(&f, 0, &eo);
    atomic_int gate = 0, rank = 0;
    seen blocker = {.gate = &gate, .rank = &rank};
    static seen s[4];
    memset(s, 0, sizeof s);
    hx_request r = greedy(prompts[0], 4, &blocker);
    r.tenant = tenants[0];
    uint64_t bid, ids[4];
    HX_ASSERT_OK(hx_engine_submit(f.e, &r, &bid));
    while (blocker.n == 0)
        usleep(1000);
    for (int i = 0; i < 4; i++) {
        s[i].rank = &rank;
        hx_request q = greedy(prompts[i + 1], max_tokens[i], &s[i]);
        q.priority = prio[i];
        q.tenant = tenants[i];
        HX_ASSERT_OK(hx_engine_submit(f.e, &q, &ids[i]));
    }
    atomic_store(&gate, 1);
    hx_request_result res;
    HX_ASSERT_OK(hx_engine_wait(f.e, bid, -1, &res));
    for (int i = 0; i < 4; i++) {
        HX_ASSERT_OK(hx_engine_wait(f.e, ids[i], -1, &res));
        ck_assert_msg(res.status == HX_OK, "%s", res.error);
        rank_out[i] = s[i].first_rank;
    }
    close_fixture(&f);
}

START_TEST(policies_order_the_queue)
{
    const uint32_t len[4] = {12, 3, 8, 5};
    const int32_t prio[4] = {0, 1, 5, 0};
    const char *const one[4] = {"a", "a", "a", "a"};
    int rank[4];
    /* rank 0 is the blocker's first token. */
    queued_order(HX_POLICY_FCFS, len, prio, one, rank);
    ck_assert_msg(rank[0] == 1 && rank[1] == 2 && rank[2] == 3 && rank[3] == 4, "fcfs: %d %d %d %d", rank[0],
                  rank[1], rank[2], rank[3]);
    queued_order(HX_POLICY_SHORT_FIRST, len, prio, one, rank);
    ck_assert_msg(rank[1] == 1 && rank[3] == 2 && rank[2] == 3 && rank[0] == 4, "short-first: %d %d %d %d", rank[0],
                  rank[1], rank[2], rank[3]);
    queued_order(HX_POLICY_PRIORITY, len, prio, one, rank);
    ck_assert_msg(rank[2] == 1 && rank[1] == 2 && rank[0] == 3 && rank[3] == 4, "priority: %d %d %d %d", rank[0],
                  rank[1], rank[2], rank[3]);
    /* Tenants take turns: b's one request goes before a's queue behind it. */
    const char *const two[4] = {"a", "a", "a", "b"};
    queued_order(HX_POLICY_FCFS, len, prio, two, rank);
    ck_assert_msg(rank[3] == 1 && rank[0] == 2 && rank[1] == 3 && rank[2] == 4, "tenants: %d %d %d %d", rank[0],
                  rank[1], rank[2], rank[3]);
}
END_TEST

/* The flood's first request: on its second token (the flood's long
 * prompts admitted meanwhile) it submits the other tenant's short request
 * from the engine thread, as a client arriving in the middle of the
 * flood's prefill. */
typedef struct {
    seen s;
    hx_engine *e;
    hx_request late;
    uint64_t late_id;
    int submitted;
} arrival;

static int submit_on_second(void *user, const hx_engine_token *t)
{
    arrival *a = user;
    on_token(&a->s, t);
    if (t->token >= 0 && a->s.n == 2 && !a->submitted)
        a->submitted = hx_engine_submit(a->e, &a->late, &a->late_id) == HX_OK ? 1 : -1;
    return 0;
}

#define FLOOD 4
#define FLOOD_LEN 200

START_TEST(a_tenants_short_prompt_is_not_kept_out_by_anothers_long_ones)
{
    hx_engine_options eo = hx_engine_options_default();
    eo.token_budget = 32;
    eo.max_running = 8;
    fixture f;
    open_fixture(&f, 4096, &eo);
    hx_model_info info;
    HX_ASSERT_OK(hx_model_info_get(f.m, &info));
    atomic_int gate = 0, rank = 0;
    static arrival a;
    static seen flood[FLOOD], victim;
    memset(&a, 0, sizeof a);
    memset(flood, 0, sizeof flood);
    memset(&victim, 0, sizeof victim);
    a.s = (seen){.gate = &gate, .rank = &rank};
    a.e = f.e;
    victim.rank = &rank;
    a.late = greedy(prompts[9], 4, &victim);
    a.late.tenant = "victim";
    hx_request r = greedy(prompts[0], 8, NULL);
    r.on_token = submit_on_second;
    r.user = &a;
    r.ignore_eos = 1;
    r.tenant = "flood";
    uint64_t bid, ids[FLOOD];
    HX_ASSERT_OK(hx_engine_submit(f.e, &r, &bid));
    while (a.s.n == 0)
        usleep(1000);
    static int32_t toks[FLOOD][FLOOD_LEN];
    for (int i = 0; i < FLOOD; i++) {
        for (int t = 0; t < FLOOD_LEN; t++)
            toks[i][t] = 1 + (int32_t)((11u * t + 17u * i + 3) % (info.n_vocab - 1));
        flood[i].rank = &rank;
        hx_request q = greedy(NULL, 4, &flood[i]);
        q.tokens = toks[i];
        q.n_tokens = FLOOD_LEN;
        q.tenant = "flood";
        HX_ASSERT_OK(hx_engine_submit(f.e, &q, &ids[i]));
    }
    atomic_store(&gate, 1);
    hx_request_result res;
    HX_ASSERT_OK(hx_engine_wait(f.e, bid, -1, &res));
    ck_assert_int_eq(a.submitted, 1);
    HX_ASSERT_OK(hx_engine_wait(f.e, a.late_id, -1, &res));
    ck_assert_msg(res.status == HX_OK, "%s", res.error);
    for (int i = 0; i < FLOOD; i++) {
        hx_request_result fr;
        HX_ASSERT_OK(hx_engine_wait(f.e, ids[i], -1, &fr));
        ck_assert_msg(fr.status == HX_OK, "flood %d: %s", i, fr.error);
        /* The victim arrived while the first of these read its prompt,
         * 31 tokens into 200 at a budget of 32: its prompt went into the
         * next step beside the flood's share, so its first token came
         * before any of the flood's. */
        ck_assert_msg(flood[i].first_rank > victim.first_rank, "flood %d's first token ranks %d, the victim's %d", i,
                      flood[i].first_rank, victim.first_rank);
    }
    ck_assert_int_eq(victim.first_rank, 1); /* rank 0: the blocker's */
    close_fixture(&f);
}
END_TEST

/* A request that notes, at each of its tokens, the most requests the
 * engine ran at once. */
typedef struct {
    seen s;
    hx_engine *e;
    uint32_t most_running;
} watcher;

static int watch_running(void *user, const hx_engine_token *t)
{
    watcher *w = user;
    on_token(&w->s, t);
    hx_engine_stats st;
    if (hx_engine_stats_get(w->e, &st) == HX_OK && st.running > w->most_running)
        w->most_running = st.running;
    return 0;
}

/* Tenant "a" submits two requests to an engine of two running slots,
 * the second while the first holds the engine thread; with tenant "b"
 * known (it was served before), the second waits for the first to end
 * rather than take the last slot.  The most running at once. */
static uint32_t two_of_one_tenant(int other_known)
{
    hx_engine_options eo = hx_engine_options_default();
    eo.max_running = 2;
    fixture f;
    open_fixture(&f, 2048, &eo);
    static seen quiet[2];
    memset(quiet, 0, sizeof quiet);
    if (other_known) {
        hx_request b = greedy(prompts[3], 2, &quiet[0]);
        b.tenant = "b";
        run_one(f.e, &b);
    }
    atomic_int gate = 0;
    static watcher w;
    memset(&w, 0, sizeof w);
    w.s.gate = &gate;
    w.e = f.e;
    hx_request r = greedy(prompts[0], 12, NULL);
    r.on_token = watch_running;
    r.user = &w;
    r.ignore_eos = 1;
    r.tenant = "a";
    uint64_t first, second;
    HX_ASSERT_OK(hx_engine_submit(f.e, &r, &first));
    while (w.s.n == 0)
        usleep(1000);
    hx_request r2 = greedy(prompts[1], 4, &quiet[1]);
    r2.tenant = "a";
    HX_ASSERT_OK(hx_engine_submit(f.e, &r2, &second));
    atomic_store(&gate, 1);
    hx_request_result res;
    HX_ASSERT_OK(hx_engine_wait(f.e, first, -1, &res));
    ck_assert_msg(res.status == HX_OK, "%s", res.error);
    HX_ASSERT_OK(hx_engine_wait(f.e, second, -1, &res));
    ck_assert_msg(res.status == HX_OK, "%s", res.error);
    close_fixture(&f);
    return w.most_running;
}

START_TEST(the_last_running_slot_is_kept_for_a_tenant_with_none)
{
    ck_assert_uint_eq(two_of_one_tenant(0), 2); /* a lone tenant takes every slot */
    ck_assert_uint_eq(two_of_one_tenant(1), 1);
}
END_TEST

/* A flood's first request watches the steps: being first in every
 * batch, the prompt tokens the engine counted between two of its tokens
 * are one step's prefill.  On its first token it submits the flood's long
 * prompts (and, with `streaming`, a request of tenant "newcomer" that
 * goes on decoding); on its token `newcomer` (0: never) the other
 * tenant's request, a prompt of NEWCOMER_LEN tokens, from the engine
 * thread as a client arriving in the middle of the flood's prefill. */
typedef struct {
    seen s;
    hx_engine *e;
    unsigned newcomer;
    int streaming;
    uint64_t ids[FLOOD + 2];
    int submitted;
    uint64_t last_prompt;
    uint32_t most_prefill;  /* the most prompt tokens in one step after the first, but the newcomer's */
    uint32_t newcomer_step; /* prompt tokens counted between the watcher's third and fourth tokens */
    atomic_uint newcomer_at; /* the watcher's tokens when the newcomer's first came */
} step_watch;

#define NEWCOMER_LEN 24
#define SHARED_PREFILL 16
static int32_t flood_toks[FLOOD][FLOOD_LEN], newcomer_toks[NEWCOMER_LEN];
static seen newcomer_seen, flood_seen[FLOOD + 2];
static step_watch *watched;

static int newcomer_token(void *user, const hx_engine_token *t)
{
    on_token(user, t);
    if (t->token >= 0 && newcomer_seen.n == 1)
        atomic_store(&watched->newcomer_at, watched->s.n);
    return 0;
}

static int watch_steps(void *user, const hx_engine_token *t)
{
    step_watch *w = user;
    on_token(&w->s, t);
    if (t->token < 0)
        return 0;
    hx_engine_stats st;
    if (hx_engine_stats_get(w->e, &st) != HX_OK)
        return 1;
    /* Between the watcher's tokens `newcomer` and the next came the
     * newcomer's step, whose prompt is not the flood's. */
    const uint64_t step = st.prompt_tokens - w->last_prompt;
    if (w->newcomer && w->s.n == w->newcomer + 1)
        w->newcomer_step = (uint32_t)step;
    else if (w->s.n > 1 && step > w->most_prefill)
        w->most_prefill = (uint32_t)step;
    w->last_prompt = st.prompt_tokens;
    for (int i = 0; w->s.n == 1 && i < FLOOD; i++) {
        hx_request q = greedy(NULL, 4, &flood_seen[i]);
        q.tokens = flood_toks[i];
        q.n_tokens = FLOOD_LEN;
        q.tenant = "flood";
        w->submitted += hx_engine_submit(w->e, &q, &w->ids[i]) == HX_OK;
    }
    if (w->s.n == 1 && w->streaming) {
        hx_request q = greedy(prompts[9], 40, &flood_seen[FLOOD + 1]);
        q.ignore_eos = 1;
        q.tenant = "newcomer";
        w->submitted += hx_engine_submit(w->e, &q, &w->ids[FLOOD + 1]) == HX_OK;
    }
    if (w->s.n == w->newcomer) {
        hx_request q = greedy(NULL, 4, &newcomer_seen);
        q.tokens = newcomer_toks;
        q.n_tokens = NEWCOMER_LEN;
        q.tenant = "newcomer";
        q.on_token = newcomer_token;
        w->submitted += hx_engine_submit(w->e, &q, &w->ids[FLOOD]) == HX_OK;
    }
    return 0;
}

/* Runs the watcher and the flood on an engine of 64 tokens per step,
 * shared_prefill 16; with `other_known`, tenant "newcomer" was served
 * just before (so two tenants are active) and comes again mid-flood, on
 * the watcher's token `at`, with `streaming` while a request of its own
 * decodes. */
static void watch_a_flood(int other_known, unsigned at, int streaming, step_watch *w)
{
    hx_engine_options eo = hx_engine_options_default();
    eo.token_budget = 64;
    eo.max_running = 8;
    eo.shared_prefill = SHARED_PREFILL;
    fixture f;
    open_fixture(&f, 4096, &eo);
    hx_model_info info;
    HX_ASSERT_OK(hx_model_info_get(f.m, &info));
    for (int i = 0; i < FLOOD; i++)
        for (int t = 0; t < FLOOD_LEN; t++)
            flood_toks[i][t] = 1 + (int32_t)((13u * t + 7u * i + 5) % (info.n_vocab - 1));
    for (int t = 0; t < NEWCOMER_LEN; t++)
        newcomer_toks[t] = 1 + (int32_t)((3u * t + 1) % (info.n_vocab - 1));
    memset(w, 0, sizeof *w);
    memset(&newcomer_seen, 0, sizeof newcomer_seen);
    memset(flood_seen, 0, sizeof flood_seen);
    watched = w;
    w->e = f.e;
    w->newcomer = other_known ? at : 0;
    w->streaming = streaming;
    if (other_known) {
        hx_request b = greedy(prompts[3], 2, &flood_seen[FLOOD]);
        b.tenant = "newcomer";
        run_one(f.e, &b);
    }
    hx_engine_stats st;
    HX_ASSERT_OK(hx_engine_stats_get(f.e, &st));
    w->last_prompt = st.prompt_tokens;
    hx_request r = greedy(prompts[0], 24, NULL);
    r.on_token = watch_steps;
    r.user = w;
    r.ignore_eos = 1;
    r.tenant = "flood";
    uint64_t id;
    hx_request_result res;
    HX_ASSERT_OK(hx_engine_submit(f.e, &r, &id));
    HX_ASSERT_OK(hx_engine_wait(f.e, id, -1, &res));
    ck_assert_msg(res.status == HX_OK, "%s", res.error);
    const int n = FLOOD + other_known + streaming;
    ck_assert_int_eq(w->submitted, n);
    for (int i = 0; i < n; i++) {
        HX_ASSERT_OK(hx_engine_wait(f.e, w->ids[i < FLOOD + other_known ? i : FLOOD + 1], -1, &res));
        ck_assert_msg(res.status == HX_OK, "request %d: %s", i, res.error);
    }
    close_fixture(&f);
}

START_TEST(steps_stay_short_while_another_tenant_is_active_and_a_newcomer_goes_first)
{
    static step_watch w;
    /* Alone, the flood's steps read as much as the budget holds. */
    watch_a_flood(0, 0, 0, &w);
    ck_assert_msg(w.most_prefill > SHARED_PREFILL, "a lone tenant's steps read at most %u prompt tokens",
                  w.most_prefill);
    /* With another tenant active, no step of the flood's reads more than
     * shared_prefill, and the newcomer's whole prompt (more than that) goes
     * into the step after it came, alone: without the flood's decode
     * tokens, so its first token comes before the watcher's fourth, and
     * without their prompt tokens, so that between the watcher's third
     * and fourth only the rest of the third's step (counted after the
     * watcher, its first request) and the newcomer's prompt were read. */
    watch_a_flood(1, 3, 0, &w);
    ck_assert_msg(w.most_prefill <= SHARED_PREFILL, "a step read %u prompt tokens (shared_prefill %d)",
                  w.most_prefill, SHARED_PREFILL);
    ck_assert_msg(w.newcomer_step >= NEWCOMER_LEN && w.newcomer_step <= NEWCOMER_LEN + SHARED_PREFILL,
                  "%u prompt tokens around the newcomer's step", w.newcomer_step);
    const unsigned at = atomic_load(&w.newcomer_at);
    ck_assert_msg(at == 3, "the newcomer's first token came with the watcher's token %u, not before its fourth", at);
}
END_TEST

/* The same tenant's next question while its last answer still streams,
 * once the flood has read more than both: it is the lighter tenant by
 * more than that prompt, and reads nothing else, so its prompt goes
 * into a step alone as a newcomer's would, not a share of several. */
START_TEST(a_light_tenants_prompt_goes_first_while_its_last_answer_streams)
{
    static step_watch w;
    watch_a_flood(1, 8, 1, &w);
    ck_assert_uint_eq(flood_seen[FLOOD + 1].n, 40);
    const unsigned at = atomic_load(&w.newcomer_at);
    ck_assert_msg(at == 8, "the newcomer's first token came with the watcher's token %u, not before its ninth", at);
}
END_TEST

/* A pool of 8 blocks of 16 tokens and three requests of tenant "flood"
 * and then one of "crowded", all queued while the first holds the engine
 * thread: short prompts, so all are admitted, that cannot all grow by
 * their 40 tokens at once; the preempted are the flood's (the tenant
 * running the most), not the latest arrival, the crowded tenant's. */
START_TEST(a_kv_shortage_preempts_the_tenant_running_the_most)
{
    fixture f;
    open_fixture(&f, 128, NULL);
    atomic_int gate = 0;
    static seen s[4];
    memset(s, 0, sizeof s);
    s[0].gate = &gate;
    const char *const tenant[4] = {"flood", "flood", "flood", "crowded"};
    const int prompt[4] = {1, 4, 9, 12};
    uint64_t ids[4];
    for (int i = 0; i < 4; i++) {
        hx_request r = greedy(prompts[prompt[i]], 40, &s[i]);
        r.ignore_eos = 1;
        r.tenant = tenant[i];
        HX_ASSERT_OK(hx_engine_submit(f.e, &r, &ids[i]));
        while (i == 0 && s[0].n == 0)
            usleep(1000);
    }
    atomic_store(&gate, 1);
    uint32_t flood_preempted = 0;
    hx_request_result res[4];
    for (int i = 0; i < 4; i++) {
        HX_ASSERT_OK(hx_engine_wait(f.e, ids[i], -1, &res[i]));
        ck_assert_msg(res[i].status == HX_OK, "request %d: %s", i, res[i].error);
        flood_preempted += i < 3 ? res[i].preemptions : 0;
    }
    ck_assert_msg(flood_preempted > 0, "flood preempted %u times, the crowded tenant %u", flood_preempted, res[3].preemptions);
    ck_assert_msg(res[3].preemptions == 0, "the crowded tenant's request was preempted %u times",
                  res[3].preemptions);
    close_fixture(&f);
}
END_TEST

/* Two requests of tenant "crowded" come together while "flood" holds
 * three of the four running slots (the last kept for a tenant with none):
 * the first takes that slot, and the second, with its tenant under its
 * share of the slots (two of four), has one of the flood's preempted for
 * it, so its first token comes while the first is still running rather
 * than after it or a flood request ended. */
static seen crowded[2];
static int second_saw_first_ended = -1;

static int second_crowded_token(void *user, const hx_engine_token *t)
{
    on_token(user, t);
    if (t->token >= 0 && crowded[1].n == 1)
        second_saw_first_ended = crowded[0].lasts;
    return 0;
}

START_TEST(a_tenant_under_its_share_of_the_running_slots_takes_one_from_the_flood)
{
    hx_engine_options eo = hx_engine_options_default();
    eo.max_running = 4;
    fixture f;
    open_fixture(&f, 4096, &eo);
    static seen flood[3], known;
    memset(flood, 0, sizeof flood);
    memset(crowded, 0, sizeof crowded);
    memset(&known, 0, sizeof known);
    second_saw_first_ended = -1;
    hx_request b = greedy(prompts[3], 2, &known);
    b.tenant = "crowded";
    run_one(f.e, &b);
    uint64_t ids[5];
    for (int i = 0; i < 3; i++) {
        hx_request r = greedy(prompts[i], 60, &flood[i]);
        r.ignore_eos = 1;
        r.tenant = "flood";
        HX_ASSERT_OK(hx_engine_submit(f.e, &r, &ids[i]));
    }
    for (hx_engine_stats st = {0}; st.running < 3;)
        HX_ASSERT_OK(hx_engine_stats_get(f.e, &st));
    for (int i = 0; i < 2; i++) {
        hx_request r = greedy(prompts[5 + i], 30, &crowded[i]);
        r.ignore_eos = 1;
        r.tenant = "crowded";
        if (i == 1)
            r.on_token = second_crowded_token;
        HX_ASSERT_OK(hx_engine_submit(f.e, &r, &ids[3 + i]));
    }
    uint32_t flood_preempted = 0;
    for (int i = 0; i < 5; i++) {
        hx_request_result res;
        HX_ASSERT_OK(hx_engine_wait(f.e, ids[i], -1, &res));
        ck_assert_msg(res.status == HX_OK, "request %d: %s", i, res.error);
        flood_preempted += i < 3 ? res.preemptions : 0;
    }
    ck_assert_uint_gt(flood_preempted, 0);
    ck_assert_msg(second_saw_first_ended == 0, "the second crowded request's first token came after the first ended");
    for (int i = 0; i < 3; i++)
        ck_assert_uint_eq(flood[i].lasts, 1);
    close_fixture(&f);
}
END_TEST

/* Token ids of a prompt of n tokens, the same for every call. */
static void plain_prompt(const hx_model *m, int32_t *toks, uint32_t n)
{
    hx_model_info info;
    HX_ASSERT_OK(hx_model_info_get(m, &info));
    for (uint32_t t = 0; t < n; t++)
        toks[t] = 1 + (int32_t)((5u * t + 9) % (info.n_vocab - 1));
}

START_TEST(a_request_without_the_prefix_cache_neither_takes_nor_leaves_blocks)
{
    fixture f;
    open_fixture(&f, 2048, NULL);
    int32_t toks[80]; /* five blocks of 16: four attached and 15 rows of the fifth copied; the last token is evaluated */
    plain_prompt(f.m, toks, 80);
    static seen s[4];
    memset(s, 0, sizeof s);
    const int uncached[4] = {1, 0, 1, 0};
    const uint32_t expect_cached[4] = {0, 0, 0, 79};
    for (int i = 0; i < 4; i++) {
        hx_request r = greedy(NULL, 6, &s[i]);
        r.tokens = toks;
        r.n_tokens = 80;
        r.no_prefix_cache = uncached[i];
        hx_request_result res = run_one(f.e, &r);
        /* The first left nothing for the second; the second's blocks
         * were not given to the third, and are there for the fourth. */
        ck_assert_msg(res.prompt_tokens_cached == expect_cached[i], "request %d: %u cached", i,
                      res.prompt_tokens_cached);
        assert_same(&s[0], &s[i], i);
    }
    hx_model_stats ms;
    HX_ASSERT_OK(hx_model_stats_get(f.m, &ms));
    ck_assert_uint_eq(ms.kv_hits, 4);
    ck_assert_uint_eq(ms.kv_blocks_used, 0);
    close_fixture(&f);
}
END_TEST

/* cache_salt partitions the prefix cache: a request finds cached only
 * the blocks of requests with its own salt (the same tokens under another
 * salt, or none, are evaluated again), and its answer is the same. */
START_TEST(a_salted_request_finds_only_its_own_salts_blocks)
{
    fixture f;
    open_fixture(&f, 2048, NULL);
    int32_t toks[80]; /* five blocks of 16: all but the last token may come from the cache */
    plain_prompt(f.m, toks, 80);
    static seen s[6];
    memset(s, 0, sizeof s);
    const char *salt[6] = {"tenant-a", "tenant-b", NULL, "", "tenant-a", "tenant-b"};
    const uint32_t expect_cached[6] = {0, 0, 0, 79, 79, 79};
    for (int i = 0; i < 6; i++) {
        hx_request r = greedy(NULL, 6, &s[i]);
        r.tokens = toks;
        r.n_tokens = 80;
        r.cache_salt = salt[i];
        hx_request_result res = run_one(f.e, &r);
        /* a, b and the common partition each evaluate the prompt once;
         * "" is the common partition; a and b then find their own. */
        ck_assert_msg(res.prompt_tokens_cached == expect_cached[i], "request %d (salt %s): %u cached", i,
                      salt[i] ? salt[i] : "NULL", res.prompt_tokens_cached);
        assert_same(&s[0], &s[i], i);
    }
    ck_assert_uint_ne(hx_session_salt_hash("tenant-a"), hx_session_salt_hash("tenant-b"));
    ck_assert_uint_eq(hx_session_salt_hash(""), 0);
    ck_assert_uint_eq(hx_session_salt_hash(NULL), 0);
    close_fixture(&f);
}
END_TEST

START_TEST(bad_requests_are_refused_at_submission)
{
    fixture f;
    open_fixture(&f, 0, NULL);
    uint64_t id;
    hx_request r = greedy(prompts[0], 0, NULL);
    ck_assert_int_eq(hx_engine_submit(f.e, &r, &id), HX_ERR_INVALID_ARG);
    ck_assert_msg(strstr(hx_last_error(), "max_tokens"), "%s", hx_last_error());
    r.max_tokens = 4;
    r.sampling.top_p = 2;
    ck_assert_int_eq(hx_engine_submit(f.e, &r, &id), HX_ERR_INVALID_ARG);
    ck_assert_msg(strstr(hx_last_error(), "top_p"), "%s", hx_last_error());
    static char longp[2048];
    memset(longp, 'x', sizeof longp - 1);
    hx_request big = greedy(longp, 4, NULL);
    ck_assert_int_eq(hx_engine_submit(f.e, &big, &id), HX_ERR_RANGE);
    ck_assert_msg(strstr(hx_last_error(), "context"), "%s", hx_last_error());
    int32_t bad = 1 << 20;
    hx_request tok = hx_request_default();
    tok.tokens = &bad;
    tok.n_tokens = 1;
    ck_assert_int_eq(hx_engine_submit(f.e, &tok, &id), HX_ERR_RANGE);
    hx_request none = hx_request_default();
    ck_assert_int_eq(hx_engine_submit(f.e, &none, &id), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_engine_submit(NULL, &r, &id), HX_ERR_INVALID_ARG);
    hx_engine_stats st;
    HX_ASSERT_OK(hx_engine_stats_get(f.e, &st));
    ck_assert_uint_eq(st.submitted, 0);
    close_fixture(&f);
}
END_TEST

START_TEST(ignore_eos_runs_to_max_tokens)
{
    fixture f;
    open_fixture(&f, 0, NULL);
    /* Greedy, this prompt ends at an end-of-generation token before 32. */
    seen stops = {0}, goes_on = {0};
    hx_request r = greedy(prompts[2], 32, &stops);
    hx_request_result res = run_one(f.e, &r);
    ck_assert_int_eq(res.stats.finish, HX_FINISH_STOP);
    ck_assert_int_eq(res.stats.stop_index, -1);
    ck_assert_uint_lt(stops.n, 32);
    r = greedy(prompts[2], 32, &goes_on);
    r.ignore_eos = 1;
    res = run_one(f.e, &r);
    ck_assert_int_eq(res.stats.finish, HX_FINISH_LENGTH);
    ck_assert_uint_eq(goes_on.n, 32);
    ck_assert_int_eq(memcmp(stops.tokens, goes_on.tokens, sizeof *stops.tokens * stops.n), 0);
    close_fixture(&f);
}
END_TEST

/* min_tokens (vLLM's): the end of generation is held back until that many
 * tokens, the text before it unchanged; hx_sampling.ignore_eos
 * (llama.cpp's) never draws one. */
START_TEST(min_tokens_hold_the_end_back)
{
    fixture f;
    open_fixture(&f, 0, NULL);
    seen stops = {0}, held = {0}, never = {0};
    hx_request r = greedy(prompts[2], 32, &stops);
    hx_request_result res = run_one(f.e, &r);
    ck_assert_int_eq(res.stats.finish, HX_FINISH_STOP);
    ck_assert_uint_ge(stops.n, 1);
    r = greedy(prompts[2], 32, &held);
    r.sampling.min_tokens = stops.n + 3;
    res = run_one(f.e, &r);
    ck_assert_uint_ge(held.n, stops.n + 3);
    ck_assert_int_eq(memcmp(stops.tokens, held.tokens, sizeof *stops.tokens * (stops.n - 1)), 0);
    for (uint32_t i = 0; i < stops.n + 2; i++)
        ck_assert_msg(!hx_model_is_eog(f.m, held.tokens[i]), "token %u ends generation before min_tokens", i);
    r = greedy(prompts[2], 32, &never);
    r.sampling.ignore_eos = 1;
    res = run_one(f.e, &r);
    ck_assert_int_eq(res.stats.finish, HX_FINISH_LENGTH);
    for (uint32_t i = 0; i < never.n; i++)
        ck_assert(!hx_model_is_eog(f.m, never.tokens[i]));
    close_fixture(&f);
}
END_TEST

/* The tokens of text (control tokens' text as those tokens), no BOS. */
static size_t tokens_of(hx_model *m, const char *text, int32_t *out, size_t cap)
{
    size_t n = 0;
    HX_ASSERT_OK(hx_model_tokenize(m, text, strlen(text), 0, 1, out, cap, &n));
    return n;
}

/* Where the forced sequence starts in s's tokens (s->n if nowhere). */
static uint32_t forced_at(const seen *s, const int32_t *forced, size_t nf)
{
    for (uint32_t j = 0; j + nf <= s->n; j++)
        if (!memcmp(s->tokens + j, forced, sizeof *forced * nf))
            return j;
    return s->n;
}

/* A reasoning budget (llama.cpp's): from an opened thought (or its start
 * tag), `budget` free tokens, then the message and end tag forced one a
 * step with probability 1, then free generation again; the model's own
 * end tag ends the budget first; a later start tag opens a new one. */
START_TEST(a_reasoning_budget_forces_the_end_of_the_thought)
{
    fixture f;
    open_fixture(&f, 0, NULL);
    seen base = {0};
    hx_request r = greedy(prompts[2], 40, &base);
    r.ignore_eos = 1;
    run_one(f.e, &r);
    ck_assert_uint_eq(base.n, 40);
    int32_t forced[64];
    const size_t nf = tokens_of(f.m, "[done]</think>", forced, 64);
    ck_assert_uint_ge(nf, 1);
    for (uint32_t budget = 0; budget <= 5; budget += 5) {
        seen got = {0};
        r = greedy(prompts[2], 40, &got);
        r.ignore_eos = 1;
        r.sampling.reasoning_budget_on = 1;
        r.sampling.reasoning_budget = budget;
        r.sampling.reasoning_open = 1;
        r.sampling.reasoning_message = "[done]";
        run_one(f.e, &r);
        /* the first `budget` tokens as without a budget (and up to 3 more
         * that finish a character: this vocabulary has byte tokens), then
         * the forced ones, each at probability 1 */
        const uint32_t j = forced_at(&got, forced, nf);
        ck_assert_msg(j >= budget && j <= budget + 3, "forced from token %u, budget %u", j, budget);
        ck_assert_int_eq(memcmp(got.tokens, base.tokens, sizeof *got.tokens * j), 0);
        ck_assert_uint_eq(got.n, 40);
    }
    /* Sampled (temperature 1): the drawn tokens have their probabilities,
     * the forced ones 1. */
    seen drawn = {0};
    r = greedy(prompts[2], 40, &drawn);
    r.ignore_eos = 1;
    r.post_sampling_probs = 1;
    r.top_logprobs = 2;
    r.sampling = hx_sampling_default();
    r.sampling.temperature = 1.0f;
    r.sampling.top_k = 0;
    r.sampling.top_p = 1.0f;
    r.sampling.min_p = 0.0f;
    r.sampling.seed = 7;
    r.sampling.reasoning_budget_on = 1;
    r.sampling.reasoning_budget = 4;
    r.sampling.reasoning_open = 1;
    r.sampling.reasoning_message = "[done]";
    run_one(f.e, &r);
    const uint32_t jd = forced_at(&drawn, forced, nf);
    ck_assert_msg(jd >= 4 && jd <= 7, "forced from token %u, budget 4", jd);
    int below_one = 0;
    for (uint32_t k = 0; k < jd; k++)
        below_one |= drawn.logprob[k] < 0.0f;
    ck_assert_msg(below_one, "every drawn token had probability 1: the check below would prove nothing");
    for (size_t k = jd; k < jd + nf; k++)
        ck_assert_msg(drawn.logprob[k] == 0.0f, "forced token %zu: log-probability %g, not 0", k,
                      (double)drawn.logprob[k]);
    /* A start tag the greedy text writes: the budget counts from after it.
     * The tag is a token of the baseline whose text tokenizes back to it. */
    uint32_t at = 0;
    int32_t one[8];
    char piece[64];
    for (at = 3; at < 20; at++) {
        size_t len = 0;
        HX_ASSERT_OK(hx_model_token_to_piece(f.m, base.tokens[at], piece, sizeof piece, &len));
        piece[len] = '\0';
        int earlier = 0;
        for (uint32_t k = 0; k < at; k++)
            earlier |= base.tokens[k] == base.tokens[at];
        if (len && !earlier && tokens_of(f.m, piece, one, 8) == 1 && one[0] == base.tokens[at])
            break;
    }
    ck_assert_msg(at < 20, "no baseline token tokenizes back to itself");
    seen tagged = {0};
    r = greedy(prompts[2], 40, &tagged);
    r.ignore_eos = 1;
    r.sampling.reasoning_budget_on = 1;
    r.sampling.reasoning_budget = 2;
    r.sampling.reasoning_start = piece;
    run_one(f.e, &r);
    const size_t ne = tokens_of(f.m, "</think>", forced, 64);
    const uint32_t j = forced_at(&tagged, forced, ne);
    ck_assert_msg(j >= at + 3 && j <= at + 6, "forced from token %u, the tag at %u", j, at);
    ck_assert_int_eq(memcmp(tagged.tokens, base.tokens, sizeof *base.tokens * j), 0);
    /* the model's own end tag (the token after the start here) ends the budget: nothing forced */
    size_t len = 0;
    char end[64];
    HX_ASSERT_OK(hx_model_token_to_piece(f.m, base.tokens[at + 1], end, sizeof end, &len));
    end[len] = '\0';
    if (tokens_of(f.m, end, one, 8) == 1 && one[0] == base.tokens[at + 1]) {
        seen natural = {0};
        r = greedy(prompts[2], 40, &natural);
        r.ignore_eos = 1;
        r.sampling.reasoning_budget_on = 1;
        r.sampling.reasoning_budget = 3;
        r.sampling.reasoning_start = piece;
        r.sampling.reasoning_end = end;
        run_one(f.e, &r);
        ck_assert_int_eq(memcmp(natural.tokens, base.tokens, sizeof *base.tokens * 40), 0);
    }
    /* refused: with a grammar, an empty tag */
    uint64_t id;
    r = greedy(prompts[2], 4, NULL);
    r.sampling.reasoning_budget_on = 1;
    r.sampling.grammar = "root ::= \"a\"";
    ck_assert_int_eq(hx_engine_submit(f.e, &r, &id), HX_ERR_UNSUPPORTED);
    r.sampling.grammar = NULL;
    r.sampling.reasoning_end = "";
    ck_assert_int_eq(hx_engine_submit(f.e, &r, &id), HX_ERR_INVALID_ARG);
    close_fixture(&f);
}
END_TEST

Suite *suite_engine(void)
{
    Suite *s = suite_create("engine");
    TCase *tc = tcase_create("serving");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, greedy_alone_equals_among_sixteen);
    tcase_add_test(tc, cancel_ends_a_request_and_frees_its_blocks);
    tcase_add_test(tc, a_small_pool_preempts_and_every_request_completes);
    tcase_add_test(tc, a_shared_prefix_is_taken_from_the_cache_through_chunked_prefill);
    tcase_add_test(tc, policies_order_the_queue);
    tcase_add_test(tc, a_tenants_short_prompt_is_not_kept_out_by_anothers_long_ones);
    tcase_add_test(tc, the_last_running_slot_is_kept_for_a_tenant_with_none);
    tcase_add_test(tc, steps_stay_short_while_another_tenant_is_active_and_a_newcomer_goes_first);
    tcase_add_test(tc, a_light_tenants_prompt_goes_first_while_its_last_answer_streams);
    tcase_add_test(tc, a_kv_shortage_preempts_the_tenant_running_the_most);
    tcase_add_test(tc, a_tenant_under_its_share_of_the_running_slots_takes_one_from_the_flood);
    tcase_add_test(tc, a_request_without_the_prefix_cache_neither_takes_nor_leaves_blocks);
    tcase_add_test(tc, a_salted_request_finds_only_its_own_salts_blocks);
    tcase_add_test(tc, bad_requests_are_refused_at_submission);
    tcase_add_test(tc, ignore_eos_runs_to_max_tokens);
    tcase_add_test(tc, min_tokens_hold_the_end_back);
    tcase_add_test(tc, a_reasoning_budget_forces_the_end_of_the_thought);
    suite_add_tcase(s, tc);
    return s;
}
