/* The KV store under several host threads at once: sessions that share a
 * prefix's blocks, fork, write into shared blocks, close, and evict each
 * other's cached blocks from a pool too small to keep them all, each
 * giving the logits it gives alone with no sharing, bit for bit. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "tests/hx_test.h"
#include "tests/small_model.h"

enum { THREADS = 4, ROUNDS = 10, PREFIX = 64, SUFFIX = 24, DEC = 2, BS = 16 };
enum { PROMPT = PREFIX + SUFFIX };

typedef struct {
    hx_model *m;
    int id;
    const float *want; /* [ROUNDS][2 sides][1 + DEC][V] */
    size_t V;
    hx_status status;
    char why[256];
} worker;

/* Thread `id`'s prompt in round `r`: the common prefix, its own suffix;
 * then DEC tokens for the parent (side 0) and for the fork (side 1). */
static void prompt_of(int id, int r, int32_t *t, int32_t dec[2][DEC])
{
    unsigned seed = 77;
    for (int i = 0; i < PROMPT; i++) {
        if (i == PREFIX)
            seed = 1000u + (unsigned)(id * ROUNDS + r);
        seed = seed * 1103515245u + 12345u;
        t[i] = (int32_t)((seed >> 16) % 256);
    }
    for (int side = 0; side < 2; side++)
        for (int d = 0; d < DEC; d++)
            dec[side][d] = (int32_t)((id * 31 + r * 7 + side * 101 + d * 13) % 256);
}

static const float *want_row(const worker *w, int r, int side, int step)
{
    return w->want + (((size_t)r * 2 + (size_t)side) * (1 + DEC) + (size_t)step) * w->V;
}

static int differs(worker *w, hx_session *s, const float *want, const char *what, int r)
{
    const float *got = hx_session_logits(s, -1);
    if (got && !memcmp(got, want, sizeof(float) * w->V))
        return 0;
    snprintf(w->why, sizeof w->why, "thread %d round %d: %s logits differ from an unshared run", w->id, r, what);
    return 1;
}

static void *worker_main(void *p)
{
    worker *w = p;
    for (int r = 0; r < ROUNDS && w->status == HX_OK; r++) {
        int32_t t[PROMPT], dec[2][DEC];
        prompt_of(w->id, r, t, dec);
        hx_session *s[2] = {NULL, NULL};
        hx_status st = hx_session_open(w->m, &s[0]);
        if (st == HX_OK)
            st = hx_session_eval(s[0], t, PROMPT, 0);
        if (st == HX_OK && differs(w, s[0], want_row(w, r, 0, 0), "prompt", r))
            st = HX_ERR_STATE;
        if (st == HX_OK)
            st = hx_session_fork(s[0], &s[1]);
        for (int d = 0; d < DEC && st == HX_OK; d++)
            for (int side = 0; side < 2 && st == HX_OK; side++) {
                st = hx_session_eval(s[side], &dec[side][d], 1, 0);
                if (st == HX_OK && differs(w, s[side], want_row(w, r, side, d + 1), side ? "fork" : "parent", r))
                    st = HX_ERR_STATE;
            }
        if (st && !w->why[0])
            snprintf(w->why, sizeof w->why, "thread %d round %d: %s", w->id, r, hx_last_error());
        w->status = st;
        hx_session_close(s[1]);
        hx_session_close(s[0]);
    }
    return NULL;
}

/* Each (thread, round)'s logits from a model that shares nothing. */
static float *solo_logits(hx_model *ref, size_t V)
{
    float *all = malloc(sizeof(float) * V * THREADS * ROUNDS * 2 * (1 + DEC));
    for (int id = 0; id < THREADS; id++)
        for (int r = 0; r < ROUNDS; r++) {
            int32_t t[PROMPT], dec[2][DEC];
            prompt_of(id, r, t, dec);
            for (int side = 0; side < 2; side++) {
                hx_session *s;
                HX_ASSERT_OK(hx_session_open(ref, &s));
                HX_ASSERT_OK(hx_session_eval(s, t, PROMPT, 0));
                float *row = all + ((((size_t)id * ROUNDS + (size_t)r) * 2 + (size_t)side) * (1 + DEC)) * V;
                memcpy(row, hx_session_logits(s, -1), sizeof(float) * V);
                for (int d = 0; d < DEC; d++) {
                    HX_ASSERT_OK(hx_session_eval(s, &dec[side][d], 1, 0));
                    memcpy(row + (size_t)(d + 1) * V, hx_session_logits(s, -1), sizeof(float) * V);
                }
                HX_ASSERT_OK(hx_session_close(s));
            }
        }
    return all;
}

START_TEST(threads_share_fork_and_evict)
{
    hx_small_model sm;
    hx_small_model_write(&sm, "f32");
    hx_runtime *rt = hx_small_runtime(2, NULL);
    hx_model_options o = hx_model_options_default();
    o.kv_block = BS;
    o.n_ctx = 256;
    o.max_batch = 64;
    o.kv_prefix_cache = -1;
    hx_model *ref, *m;
    HX_ASSERT_OK(hx_model_load(rt, sm.path, &o, &ref));
    /* Room for every thread's worst case at once (its prompt's blocks,
     * the prefix's not yet shared, and a fork's copy of the last one), not
     * for the blocks the rounds leave cached (one more per round: 40 and
     * the prefix's, so evictions happen however the threads interleave). */
    o.kv_tokens = THREADS * ((PROMPT + DEC + BS - 1) / BS + 2) * BS;
    o.kv_prefix_cache = 1;
    HX_ASSERT_OK(hx_model_load(rt, sm.path, &o, &m));
    hx_model_info in;
    HX_ASSERT_OK(hx_model_info_get(m, &in));
    const size_t V = in.n_vocab;
    float *want = solo_logits(ref, V);
    worker w[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){.m = m, .id = i, .V = V,
                        .want = want + (size_t)i * ROUNDS * 2 * (1 + DEC) * V};
        ck_assert_int_eq(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < THREADS; i++)
        ck_assert_msg(w[i].status == HX_OK, "%s: %s", hx_status_str(w[i].status), w[i].why);
    hx_model_stats st;
    HX_ASSERT_OK(hx_model_stats_get(m, &st));
    ck_assert_uint_eq(st.sessions_open, 0);
    ck_assert_uint_eq(st.kv_blocks_used, 0);
    ck_assert_uint_gt(st.kv_hits, 0);
    ck_assert_uint_gt(st.kv_evictions, 0);
    fprintf(stderr, "  %d threads x %d rounds (a prompt, a fork, %d tokens each) in a pool of %u blocks: every "
                    "request ran; %llu blocks found, %llu not, %llu evicted, %llu tokens reused\n",
            THREADS, ROUNDS, DEC, st.kv_blocks_total, (unsigned long long)st.kv_hits,
            (unsigned long long)st.kv_misses, (unsigned long long)st.kv_evictions,
            (unsigned long long)st.kv_tokens_reused);
    free(want);
    HX_ASSERT_OK(hx_model_free(m));
    HX_ASSERT_OK(hx_model_free(ref));
    hx_runtime_close(rt);
    hx_small_model_remove(&sm);
}
END_TEST

Suite *suite_stress_kv(void)
{
    Suite *s = suite_create("stress_kv");
    TCase *c = tcase_create("kv");
    tcase_set_timeout(c, 300);
    tcase_add_test(c, threads_share_fork_and_evict);
    suite_add_tcase(s, c);
    return s;
}
