/* The KV cache as a shared store: prefix blocks attached instead of
 * evaluated, cached blocks evicted least recently used first, a full pool
 * refused with nothing changed, forks sharing blocks until they write.
 * Every logit is compared bit for bit with a model whose prefix cache is
 * off: sharing may save work, never change a result. */
#include <string.h>

#include "tests/hx_test.h"
#include "tests/kv_test.h"
#include "tests/small_model.h"

#define BS 16 /* tokens per block */

static hx_small_model sm;
static hx_runtime *rt;

static void setup(void)
{
    hx_small_model_write(&sm, "f32");
    rt = hx_small_runtime(2, NULL);
}

static void teardown(void)
{
    hx_runtime_close(rt);
    hx_small_model_remove(&sm);
}

static hx_model *load_kv(uint32_t kv_tokens, int prefix_cache, const char *kv_type)
{
    hx_model_options o = hx_model_options_default();
    o.kv_type = kv_type;
    o.kv_tokens = kv_tokens;
    o.kv_block = BS;
    o.n_ctx = 512;
    o.max_batch = 64;
    o.kv_prefix_cache = prefix_cache;
    hx_model *m = NULL;
    HX_ASSERT_OK(hx_model_load(rt, sm.path, &o, &m));
    return m;
}

static hx_model *load(uint32_t kv_tokens, int prefix_cache) { return load_kv(kv_tokens, prefix_cache, NULL); }

static size_t vocab(hx_model *m)
{
    hx_model_info in;
    HX_ASSERT_OK(hx_model_info_get(m, &in));
    return in.n_vocab;
}

static hx_model_stats stats(hx_model *m)
{
    hx_model_stats st;
    HX_ASSERT_OK(hx_model_stats_get(m, &st));
    return st;
}

/* The last logits of `s` equal `want`, bit for bit. */
static void same_logits(hx_session *s, const float *want, size_t V, const char *what)
{
    const float *got = hx_session_logits(s, -1);
    ck_assert_msg(got != NULL, "%s: no logits", what);
    for (size_t i = 0; i < V; i++)
        ck_assert_msg(memcmp(&got[i], &want[i], sizeof(float)) == 0, "%s: logit %zu is %.9g, %.9g unshared", what,
                      i, got[i], want[i]);
}

/* Evaluates `t` in a fresh session of the reference model, then `dec`
 * single tokens, keeping the last logits of each step in out[(1 + dec) * V]. */
static void reference(hx_model *ref, const int32_t *t, size_t n, const int32_t *dec, size_t n_dec, float *out)
{
    size_t V = vocab(ref);
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(ref, &s));
    HX_ASSERT_OK(hx_session_eval(s, t, n, 0));
    memcpy(out, hx_session_logits(s, -1), sizeof(float) * V);
    for (size_t k = 0; k < n_dec; k++) {
        HX_ASSERT_OK(hx_session_eval(s, &dec[k], 1, 0));
        memcpy(out + (k + 1) * V, hx_session_logits(s, -1), sizeof(float) * V);
    }
    ck_assert_uint_eq(hx_session_reused_tokens(s), 0);
    HX_ASSERT_OK(hx_session_close(s));
}

/* Sessions with a common prefix and different suffixes: the second on
 * evaluate their suffixes only, hold the prefix's full blocks together,
 * and give the logits of a model that shares nothing, prefill and decode.
 * The loop runs a prefix a whole number of blocks (and evaluation chunks)
 * long and one that is not: that one's last 8 tokens are copied from the
 * first session's block that holds them beside its own suffix. */
START_TEST(common_prefix_is_evaluated_once)
{
    const size_t prefix = _i ? 72 : 128, suffix = 9, n = prefix + suffix, n_sess = 4, n_dec = 3;
    hx_model *m = load(1024, 0), *ref = load(1024, -1);
    const size_t V = vocab(m);
    int32_t t[4][137 + 3];
    float *want = malloc(sizeof(float) * V * (n_dec + 1));
    hx_session *s[4];
    uint32_t used_before = 0;
    for (size_t k = 0; k < n_sess; k++) {
        hx_kv_test_tokens(t[k], prefix, 7);
        hx_kv_test_tokens(t[k] + prefix, suffix + n_dec, 100 + (unsigned)k);
        HX_ASSERT_OK(hx_session_open(m, &s[k]));
        HX_ASSERT_OK(hx_session_eval(s[k], t[k], n, 0));
        const uint32_t reused = hx_session_reused_tokens(s[k]);
        ck_assert_uint_eq(reused, k ? prefix : 0);
        ck_assert_uint_eq(hx_session_position(s[k]), n);
        reference(ref, t[k], n, t[k] + n, n_dec, want);
        same_logits(s[k], want, V, "prefill");
        hx_model_stats st = stats(m);
        if (k) /* the suffix's blocks only: the prefix's full blocks are shared */
            ck_assert_uint_eq(st.kv_blocks_used - used_before, (n + BS - 1) / BS - prefix / BS);
        used_before = st.kv_blocks_used;
        ck_assert_uint_eq(st.kv_blocks_shared, k ? prefix / BS : 0);
        for (size_t d = 0; d < n_dec; d++) {
            HX_ASSERT_OK(hx_session_eval(s[k], &t[k][n + d], 1, 0));
            same_logits(s[k], want + (d + 1) * V, V, "decode");
        }
        used_before = stats(m).kv_blocks_used;
    }
    hx_model_stats st = stats(m);
    ck_assert_uint_eq(st.kv_hits, (n_sess - 1) * (prefix / BS));
    ck_assert_uint_eq(st.kv_tokens_reused, (n_sess - 1) * prefix);
    ck_assert_uint_gt(st.kv_bytes_used, 0);
    for (size_t k = 0; k < n_sess; k++)
        HX_ASSERT_OK(hx_session_close(s[k]));
    st = stats(m);
    ck_assert_uint_eq(st.kv_blocks_used, 0);
    /* Kept for the next prompt: the prefix's full blocks once, and each
     * session's own full ones and its last, partial, block (their first
     * tokens are their own). */
    ck_assert_uint_eq(st.kv_blocks_cached, prefix / BS + n_sess * ((n + n_dec) / BS - prefix / BS) + n_sess);
    hx_model_stats rs = stats(ref);
    ck_assert_uint_eq(rs.kv_blocks_cached, 0);
    ck_assert_uint_eq(rs.kv_hits, 0);
    free(want);
    HX_ASSERT_OK(hx_model_free(m));
    HX_ASSERT_OK(hx_model_free(ref));
}
END_TEST

/* A prompt the cache holds whole still evaluates its last token (its
 * logits are the answer): three blocks attached, 15 rows of the fourth
 * copied; every-token logits evaluate every token. */
START_TEST(last_token_and_logits_all_are_evaluated)
{
    hx_model *m = load(512, 0), *ref = load(512, -1);
    const size_t V = vocab(m);
    int32_t t[64];
    float *want = malloc(sizeof(float) * V);
    hx_kv_test_tokens(t, 64, 3);
    hx_session *a, *b, *c;
    HX_ASSERT_OK(hx_session_open(m, &a));
    HX_ASSERT_OK(hx_session_eval(a, t, 64, 0));
    HX_ASSERT_OK(hx_session_open(m, &b));
    HX_ASSERT_OK(hx_session_eval(b, t, 64, 0));
    ck_assert_uint_eq(hx_session_reused_tokens(b), 63);
    reference(ref, t, 64, NULL, 0, want);
    same_logits(b, want, V, "whole prompt cached");
    HX_ASSERT_OK(hx_session_open(m, &c));
    HX_ASSERT_OK(hx_session_eval(c, t, 64, 1));
    ck_assert_uint_eq(hx_session_reused_tokens(c), 0);
    ck_assert_ptr_nonnull(hx_session_logits(c, 0));
    same_logits(c, want, V, "logits_all");
    HX_ASSERT_OK(hx_session_close(a));
    HX_ASSERT_OK(hx_session_close(b));
    HX_ASSERT_OK(hx_session_close(c));
    free(want);
    HX_ASSERT_OK(hx_model_free(m));
    HX_ASSERT_OK(hx_model_free(ref));
}
END_TEST

/* hx_batch_eval attaches cached blocks too: two sessions' prompts in one
 * batch, their entries interleaved, evaluate only what the cache lacks;
 * one that keeps an earlier token's logits evaluates everything. */
START_TEST(batch_reuses_prefixes)
{
    hx_model *m = load(512, 0), *ref = load(512, -1);
    const size_t V = vocab(m), n = BS + 14;
    int32_t p[3][BS + 14];
    for (int k = 0; k < 3; k++) {
        hx_kv_test_tokens(p[k], BS, 40);
        hx_kv_test_tokens(p[k] + BS, n - BS, 41 + (unsigned)k);
    }
    hx_session *a, *s[2];
    HX_ASSERT_OK(hx_session_open(m, &a));
    HX_ASSERT_OK(hx_session_eval(a, p[0], n, 0));
    int32_t tokens[2 * (BS + 14)];
    hx_session *who[2 * (BS + 14)];
    uint8_t want[2 * (BS + 14)] = {0};
    for (int k = 0; k < 2; k++)
        HX_ASSERT_OK(hx_session_open(m, &s[k]));
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 2; k++) {
            tokens[2 * i + (size_t)k] = p[1 + k][i];
            who[2 * i + (size_t)k] = s[k];
        }
    want[2 * n - 2] = want[2 * n - 1] = 1;
    want[1] = 1; /* session 1 keeps its first token's logits: no reuse */
    hx_batch b = {2 * n, tokens, who, want};
    HX_ASSERT_OK(hx_batch_eval(m, &b));
    ck_assert_uint_eq(hx_session_reused_tokens(s[0]), BS);
    ck_assert_uint_eq(hx_session_reused_tokens(s[1]), 0);
    ck_assert_ptr_nonnull(hx_session_logits(s[1], 0));
    ck_assert_ptr_null(hx_session_logits(s[0], 0));
    float *w = malloc(sizeof(float) * V);
    for (int k = 0; k < 2; k++) {
        ck_assert_uint_eq(hx_session_position(s[k]), n);
        reference(ref, p[1 + k], n, NULL, 0, w);
        same_logits(s[k], w, V, k ? "batch, every token evaluated" : "batch, prefix attached");
        HX_ASSERT_OK(hx_session_close(s[k]));
    }
    HX_ASSERT_OK(hx_session_close(a));
    free(w);
    HX_ASSERT_OK(hx_model_free(m));
    HX_ASSERT_OK(hx_model_free(ref));
}
END_TEST

/* A pool of 12 blocks and prompts of 5: closed sessions' blocks stay
 * cached, a new prompt evicts the least recently used, a prompt whose
 * blocks survived finds them, and every request that fits alone runs. */
START_TEST(cached_blocks_are_evicted_least_recently_used_first)
{
    hx_model *m = load(12 * BS, 0), *ref = load(12 * BS, -1);
    const size_t V = vocab(m), n = 5 * BS;
    int32_t p[3][5 * BS];
    float *want = malloc(sizeof(float) * V);
    for (int k = 0; k < 3; k++)
        hx_kv_test_tokens(p[k], n, 20 + (unsigned)k);
    hx_session *s;
    for (int k = 0; k < 2; k++) { /* A, then B: 10 blocks cached */
        HX_ASSERT_OK(hx_session_open(m, &s));
        HX_ASSERT_OK(hx_session_eval(s, p[k], n, 0));
        HX_ASSERT_OK(hx_session_close(s));
    }
    hx_model_stats st = stats(m);
    ck_assert_uint_eq(st.kv_blocks_cached, 10);
    ck_assert_uint_eq(st.kv_evictions, 0);
    /* C needs 5 blocks, 2 are free: 3 of A's go, A's last ones first. */
    HX_ASSERT_OK(hx_session_open(m, &s));
    HX_ASSERT_OK(hx_session_eval(s, p[2], n, 0));
    ck_assert_uint_eq(hx_session_reused_tokens(s), 0);
    reference(ref, p[2], n, NULL, 0, want);
    same_logits(s, want, V, "C");
    HX_ASSERT_OK(hx_session_close(s));
    st = stats(m);
    ck_assert_uint_eq(st.kv_evictions, 3);
    const uint64_t hits = st.kv_hits;
    /* B survived whole: its first 4 blocks are found, and the first 15
     * rows of the 5th copied (its last token is always evaluated). */
    HX_ASSERT_OK(hx_session_open(m, &s));
    HX_ASSERT_OK(hx_session_eval(s, p[1], n, 0));
    ck_assert_uint_eq(hx_session_reused_tokens(s), 5 * BS - 1);
    reference(ref, p[1], n, NULL, 0, want);
    same_logits(s, want, V, "B again");
    HX_ASSERT_OK(hx_session_close(s));
    /* The copy of B's last block took the next in line, A's second: A
     * kept its first block only. */
    HX_ASSERT_OK(hx_session_open(m, &s));
    HX_ASSERT_OK(hx_session_eval(s, p[0], n, 0));
    ck_assert_uint_eq(hx_session_reused_tokens(s), BS);
    reference(ref, p[0], n, NULL, 0, want);
    same_logits(s, want, V, "A again");
    HX_ASSERT_OK(hx_session_close(s));
    st = stats(m);
    fprintf(stderr, "  pool of 12 blocks, prompts of 5: %llu blocks found, %llu not, %llu evicted\n",
            (unsigned long long)st.kv_hits, (unsigned long long)st.kv_misses,
            (unsigned long long)st.kv_evictions);
    ck_assert_uint_eq(st.kv_hits - hits, 5);
    /* C 3, the copy of B's last block 1, A's four: the copy (its key was
     * cached already, so it stayed unkeyed) was free, so 3. */
    ck_assert_uint_eq(st.kv_evictions, 3 + 1 + 3);
    ck_assert_uint_ge(st.kv_misses, 2);
    free(want);
    HX_ASSERT_OK(hx_model_free(m));
    HX_ASSERT_OK(hx_model_free(ref));
}
END_TEST

/* With every block held by open sessions the pool refuses a request with
 * HX_ERR_NO_MEMORY and changes nothing: the session keeps its position
 * and logits, the pool its counts; once a session closes it runs. */
START_TEST(full_pool_refuses_with_nothing_changed)
{
    hx_model *m = load(6 * BS, 0);
    const size_t V = vocab(m);
    int32_t t[4 * BS], u[4 * BS];
    hx_kv_test_tokens(t, 4 * BS, 1);
    hx_kv_test_tokens(u, 4 * BS, 2);
    memcpy(u, t, sizeof(int32_t) * 2 * BS); /* a common prefix of 2 blocks */
    hx_session *a, *b;
    HX_ASSERT_OK(hx_session_open(m, &a));
    HX_ASSERT_OK(hx_session_eval(a, t, 4 * BS, 0));
    HX_ASSERT_OK(hx_session_open(m, &b));
    HX_ASSERT_OK(hx_session_eval(b, t, 8, 0));
    float *before = malloc(sizeof(float) * V);
    memcpy(before, hx_session_logits(b, -1), sizeof(float) * V);
    hx_model_stats s0 = stats(m);
    /* b at 8 tokens (not a block boundary) wants 4 blocks, the pool has 1. */
    ck_assert_int_eq(hx_session_eval(b, u + 8, 4 * BS - 8, 0), HX_ERR_NO_MEMORY);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "KV cache memory"));
    ck_assert_uint_eq(hx_session_position(b), 8);
    same_logits(b, before, V, "after the refusal");
    hx_model_stats s1 = stats(m);
    ck_assert_uint_eq(s1.kv_blocks_used, s0.kv_blocks_used);
    ck_assert_uint_eq(s1.kv_blocks_cached, s0.kv_blocks_cached);
    /* A fresh session whose prefix is cached still needs 4 blocks of its
     * own beyond the 2 it attaches: refused, and the attached ones are
     * let go. */
    hx_session *c;
    HX_ASSERT_OK(hx_session_open(m, &c));
    int32_t w[6 * BS];
    memcpy(w, t, sizeof(int32_t) * 2 * BS);
    hx_kv_test_tokens(w + 2 * BS, 4 * BS, 9);
    ck_assert_int_eq(hx_session_eval(c, w, 6 * BS, 0), HX_ERR_NO_MEMORY);
    ck_assert_uint_eq(hx_session_position(c), 0);
    ck_assert_uint_eq(hx_session_reused_tokens(c), 0);
    s1 = stats(m);
    ck_assert_uint_eq(s1.kv_blocks_used, s0.kv_blocks_used);
    ck_assert_uint_eq(s1.kv_blocks_shared, 0);
    /* Its first 4 blocks in a batch (max_batch): 2 attached, 2 more
     * needed, 1 free: refused as well, nothing attached. */
    hx_session *who[4 * BS];
    for (int i = 0; i < 4 * BS; i++)
        who[i] = c;
    hx_batch batch = {4 * BS, w, who, NULL};
    ck_assert_int_eq(hx_batch_eval(m, &batch), HX_ERR_NO_MEMORY);
    ck_assert_uint_eq(hx_session_position(c), 0);
    s1 = stats(m);
    ck_assert_uint_eq(s1.kv_blocks_used, s0.kv_blocks_used);
    ck_assert_uint_eq(s1.kv_blocks_shared, 0);
    HX_ASSERT_OK(hx_session_close(a));
    HX_ASSERT_OK(hx_session_eval(b, u + 8, 4 * BS - 8, 0));
    ck_assert_uint_eq(hx_session_position(b), 4 * BS);
    HX_ASSERT_OK(hx_session_close(b));
    HX_ASSERT_OK(hx_session_close(c));
    free(before);
    HX_ASSERT_OK(hx_model_free(m));
}
END_TEST

/* A sequence's last block, partly filled, stays cached when it ends: a
 * prompt shorter than a block is computed once, and a prompt that shares
 * only its first tokens with it takes those rows.  Every logit, prefill
 * and decode, equals a model's that shares nothing.  The same prompt
 * again keeps one partial block, not one per run; a longer one that
 * begins as a cached partial block replaces it. */
START_TEST(partial_blocks_are_reused)
{
    hx_model *m = load(512, 0), *ref = load(512, -1);
    const size_t V = vocab(m), n = 10, n_dec = 3;
    int32_t t[10 + 3], u[10 + 3], w[14];
    hx_kv_test_tokens(t, n + n_dec, 5);
    hx_kv_test_tokens(u, n + n_dec, 6);
    memcpy(u, t, sizeof *u * 6); /* shares 6 tokens with t */
    memcpy(w, t, sizeof *w * 13);
    w[13] = 77; /* t and what t generated, and one more */
    float *want = malloc(sizeof(float) * V * (n_dec + 1));
    hx_session *s;
    for (int run = 0; run < 3; run++) {
        HX_ASSERT_OK(hx_session_open(m, &s));
        HX_ASSERT_OK(hx_session_eval(s, t, n, 0));
        /* the first run computes all; then all but the last token were
         * kept (the last block of the run before held 12 of them) */
        ck_assert_uint_eq(hx_session_reused_tokens(s), run ? n - 1 : 0);
        reference(ref, t, n, t + n, n_dec, want);
        same_logits(s, want, V, "a prompt shorter than a block, again");
        for (size_t d = 0; d < n_dec; d++) {
            HX_ASSERT_OK(hx_session_eval(s, &t[n + d], 1, 0));
            same_logits(s, want + (d + 1) * V, V, "decode after a partial block");
        }
        HX_ASSERT_OK(hx_session_close(s));
        ck_assert_uint_eq(stats(m).kv_blocks_cached, 1);
    }
    HX_ASSERT_OK(hx_session_open(m, &s));
    HX_ASSERT_OK(hx_session_eval(s, u, n, 0));
    ck_assert_uint_eq(hx_session_reused_tokens(s), 6);
    reference(ref, u, n, NULL, 0, want);
    same_logits(s, want, V, "a prompt sharing 6 tokens");
    HX_ASSERT_OK(hx_session_close(s));
    /* u's block parts from t's after 6 tokens: both are kept */
    ck_assert_uint_eq(stats(m).kv_blocks_cached, 2);
    HX_ASSERT_OK(hx_session_open(m, &s));
    HX_ASSERT_OK(hx_session_eval(s, w, 14, 0));
    ck_assert_uint_eq(hx_session_reused_tokens(s), 13);
    reference(ref, w, 14, NULL, 0, want);
    same_logits(s, want, V, "a prompt extending a partial block");
    HX_ASSERT_OK(hx_session_close(s));
    /* w's block begins with all of t's: it replaces it */
    ck_assert_uint_eq(stats(m).kv_blocks_cached, 2);
    ck_assert_uint_eq(stats(m).kv_tokens_reused, 2 * (n - 1) + 6 + 13);
    free(want);
    HX_ASSERT_OK(hx_model_free(m));
    HX_ASSERT_OK(hx_model_free(ref));
}
END_TEST

/* Random prompts made of the first L tokens of one of three texts and a
 * few of their own, each decoding a few tokens, one session after the
 * other in a pool that evicts nothing: each reuses exactly the longest
 * prefix it shares with any sequence before it (whole blocks, then rows
 * of a partial or full one; never its last token), and every logit,
 * prefill and decode, equals a model's that shares nothing. */
START_TEST(reuse_is_the_longest_common_prefix)
{
    enum { ROUNDS = 30, BASE = 80, MAXN = BASE + 20 + 4 };
    hx_model *m = load(8192, 0), *ref = load(8192, -1);
    const size_t V = vocab(m);
    int32_t base[3][BASE], seq[ROUNDS][MAXN];
    size_t len[ROUNDS];
    for (int b = 0; b < 3; b++)
        hx_kv_test_tokens(base[b], BASE, 300 + (unsigned)b);
    float *want = malloc(sizeof(float) * V * 5);
    unsigned r = 12345;
    uint64_t reused_all = 0;
    for (int k = 0; k < ROUNDS; k++) {
        r = r * 1103515245u + 12345u;
        const size_t L = (r >> 8) % 70, own = 1 + (r >> 16) % 20, n_dec = (r >> 24) % 4, n = L + own;
        int32_t *t = seq[k];
        memcpy(t, base[k % 3], sizeof *t * L);
        hx_kv_test_tokens(t + L, own + n_dec, 1000 + (unsigned)k);
        size_t expect = 0;
        for (int h = 0; h < k; h++) {
            size_t c = 0;
            while (c < len[h] && c < n && seq[h][c] == t[c])
                c++;
            expect = c > expect ? c : expect;
        }
        if (n < 2)
            expect = 0;
        else if (expect > n - 1)
            expect = n - 1;
        hx_session *s;
        HX_ASSERT_OK(hx_session_open(m, &s));
        HX_ASSERT_OK(hx_session_eval(s, t, n, 0));
        ck_assert_msg(hx_session_reused_tokens(s) == expect, "round %d (%zu shared, %zu own): %u reused, %zu expected",
                      k, L, own, hx_session_reused_tokens(s), expect);
        reused_all += expect;
        reference(ref, t, n, t + n, n_dec, want);
        same_logits(s, want, V, "prefill after a reused prefix");
        for (size_t d = 0; d < n_dec; d++) {
            HX_ASSERT_OK(hx_session_eval(s, &t[n + d], 1, 0));
            same_logits(s, want + (d + 1) * V, V, "decode after a reused prefix");
        }
        len[k] = n + n_dec; /* what it evaluated */
        HX_ASSERT_OK(hx_session_close(s));
    }
    hx_model_stats st = stats(m);
    ck_assert_uint_eq(st.kv_tokens_reused, reused_all);
    ck_assert_uint_eq(st.kv_evictions, 0);
    ck_assert_uint_gt(reused_all, 0);
    free(want);
    HX_ASSERT_OK(hx_model_free(m));
    HX_ASSERT_OK(hx_model_free(ref));
}
END_TEST

/* With no block free beside the cached partial one, nothing is copied:
 * the prompt is computed whole, and right. */
START_TEST(partial_block_without_room_is_computed)
{
    hx_model *m = load(2 * BS, 0), *ref = load(2 * BS, -1);
    const size_t V = vocab(m);
    int32_t t[2 * BS];
    hx_kv_test_tokens(t, 2 * BS, 8);
    float *want = malloc(sizeof(float) * V);
    hx_session *a, *b;
    HX_ASSERT_OK(hx_session_open(m, &a));
    HX_ASSERT_OK(hx_session_eval(a, t, 10, 0));
    HX_ASSERT_OK(hx_session_close(a)); /* 1 partial block cached, 1 free */
    HX_ASSERT_OK(hx_session_open(m, &a));
    HX_ASSERT_OK(hx_session_eval(a, t + BS, 12, 0)); /* holds the free block */
    HX_ASSERT_OK(hx_session_open(m, &b));
    HX_ASSERT_OK(hx_session_eval(b, t, 10, 0));
    ck_assert_uint_eq(hx_session_reused_tokens(b), 0);
    reference(ref, t, 10, NULL, 0, want);
    same_logits(b, want, V, "no room for the copy");
    HX_ASSERT_OK(hx_session_close(a));
    HX_ASSERT_OK(hx_session_close(b));
    free(want);
    HX_ASSERT_OK(hx_model_free(m));
    HX_ASSERT_OK(hx_model_free(ref));
}
END_TEST

/* A fork mid-block: both continuations equal independent sessions fed the
 * same tokens; until one writes they hold the same blocks, and the
 * partial block is copied when each writes into it. */
START_TEST(fork_continues_as_an_independent_session)
{
    const int cache = _i ? -1 : 0;
    hx_model *m = load(512, cache), *ref = load(512, -1);
    const size_t V = vocab(m), n = 40;
    int32_t t[40 + 4], u[40 + 4];
    hx_kv_test_tokens(t, n + 4, 5);
    memcpy(u, t, sizeof(int32_t) * n);
    hx_kv_test_tokens(u + n, 4, 6);
    float *wt = malloc(sizeof(float) * V * 5), *wu = malloc(sizeof(float) * V * 5);
    reference(ref, t, n, t + n, 4, wt);
    reference(ref, u, n, u + n, 4, wu);
    hx_session *a, *b;
    HX_ASSERT_OK(hx_session_open(m, &a));
    HX_ASSERT_OK(hx_session_eval(a, t, n, 0));
    const uint32_t used = stats(m).kv_blocks_used;
    HX_ASSERT_OK(hx_session_fork(a, &b));
    ck_assert_uint_eq(hx_session_position(b), n);
    same_logits(b, wt, V, "fork's first logits");
    hx_model_stats st = stats(m);
    ck_assert_uint_eq(st.kv_blocks_used, used);
    ck_assert_uint_eq(st.kv_blocks_shared, (n + BS - 1) / BS);
    for (int d = 0; d < 4; d++) {
        HX_ASSERT_OK(hx_session_eval(a, &t[n + d], 1, 0));
        same_logits(a, wt + (d + 1) * V, V, "parent");
        HX_ASSERT_OK(hx_session_eval(b, &u[n + d], 1, 0));
        same_logits(b, wu + (d + 1) * V, V, "fork");
    }
    st = stats(m);
    ck_assert_uint_eq(st.kv_blocks_used, used + 1); /* the partial block, copied */
    ck_assert_uint_eq(st.kv_blocks_shared, n / BS);
    HX_ASSERT_OK(hx_session_close(a));
    ck_assert_uint_eq(stats(m).kv_blocks_shared, 0);
    HX_ASSERT_OK(hx_session_eval(b, &u[n], 1, 0)); /* still whole alone */
    HX_ASSERT_OK(hx_session_close(b));
    free(wt);
    free(wu);
    HX_ASSERT_OK(hx_model_free(m));
    HX_ASSERT_OK(hx_model_free(ref));
}
END_TEST

/* Every KV type shares prefixes bit for bit, its blocks weigh what its
 * rows do, and its logits stay near an f32 cache's. */
START_TEST(kv_types_share_prefixes_and_shrink)
{
    static const char *const types[] = {"f32", "f16", "q8_0", "q4_0"};
    static const double bound[] = {0, 1e-3, 1e-2, 0.1};
    const size_t n = 3 * BS + 5;
    int32_t a[3 * BS + 5], b[3 * BS + 5];
    hx_kv_test_tokens(a, n, 31);
    memcpy(b, a, sizeof a);
    hx_kv_test_tokens(b + 2 * BS, n - 2 * BS, 32);
    float *f32 = NULL;
    uint64_t bytes[4];
    for (int i = 0; i < 4; i++) {
        hx_model *m = load_kv(512, 0, types[i]), *ref = load_kv(512, -1, types[i]);
        const size_t V = vocab(m);
        float *want = malloc(sizeof(float) * V);
        reference(ref, b, n, NULL, 0, want);
        hx_session *sa, *sb;
        HX_ASSERT_OK(hx_session_open(m, &sa));
        HX_ASSERT_OK(hx_session_eval(sa, a, n, 0));
        HX_ASSERT_OK(hx_session_open(m, &sb));
        HX_ASSERT_OK(hx_session_eval(sb, b, n, 0));
        ck_assert_uint_eq(hx_session_reused_tokens(sb), 2 * BS);
        same_logits(sb, want, V, types[i]);
        bytes[i] = stats(m).kv_bytes_used;
        if (!f32) {
            f32 = want;
        } else {
            double e = hx_kv_test_rel_l2(want, f32, V);
            fprintf(stderr, "  kv %s: logits rel L2 %.3g from an f32 cache; %llu bytes held\n", types[i], e,
                    (unsigned long long)bytes[i]);
            ck_assert_msg(e <= bound[i], "kv %s: rel L2 %g from f32", types[i], e);
            free(want);
        }
        HX_ASSERT_OK(hx_session_close(sa));
        HX_ASSERT_OK(hx_session_close(sb));
        HX_ASSERT_OK(hx_model_free(m));
        HX_ASSERT_OK(hx_model_free(ref));
    }
    /* Head size 32: 128, 64, 34 and 18 bytes per head row. */
    ck_assert_uint_eq(bytes[0] * 64, bytes[1] * 128);
    ck_assert_uint_eq(bytes[0] * 34, bytes[2] * 128);
    ck_assert_uint_eq(bytes[0] * 18, bytes[3] * 128);
    free(f32);
}
END_TEST

/* K and V caches of different types (-ctk / -ctv): blocks weigh what the
 * two rows do, logits stay near an f32 cache's, prefixes are shared; a
 * bad type name is refused, naming the option. */
START_TEST(k_and_v_types_apart)
{
    const size_t n = 2 * BS + 3;
    int32_t a[2 * BS + 3];
    hx_kv_test_tokens(a, n, 41);
    hx_model *f32 = load_kv(512, 0, "f32");
    const size_t V = vocab(f32);
    float *want = malloc(sizeof(float) * V), *got = malloc(sizeof(float) * V);
    reference(f32, a, n, NULL, 0, want);
    const uint64_t f32_bytes = stats(f32).kv_bytes_used;
    HX_ASSERT_OK(hx_model_free(f32));
    static const char *const kv[][2] = {{"q4_0", "f16"}, {"f16", "q8_0"}};
    static const uint64_t row[][2] = {{18, 64}, {64, 34}}; /* bytes of a head row of 32 */
    for (int i = 0; i < 2; i++) {
        hx_model_options o = hx_model_options_default();
        o.kv_type = "f32"; /* overridden by both */
        o.kv_type_k = kv[i][0];
        o.kv_type_v = kv[i][1];
        o.kv_block = BS;
        o.n_ctx = 512;
        hx_model *m = NULL;
        HX_ASSERT_OK(hx_model_load(rt, sm.path, &o, &m));
        reference(m, a, n, NULL, 0, got);
        const double e = hx_kv_test_rel_l2(got, want, V);
        fprintf(stderr, "  kv K %s V %s: logits rel L2 %.3g from an f32 cache\n", kv[i][0], kv[i][1], e);
        ck_assert_msg(e > 0 && e <= 0.1, "K %s V %s: rel L2 %g from f32", kv[i][0], kv[i][1], e);
        ck_assert_uint_eq(stats(m).kv_bytes_used * 256, f32_bytes * (row[i][0] + row[i][1]));
        HX_ASSERT_OK(hx_model_free(m));
    }
    hx_model_options o = hx_model_options_default();
    o.kv_type_v = "q5_1";
    hx_model *m = (hx_model *)1;
    ck_assert_int_eq(hx_model_load(rt, sm.path, &o, &m), HX_ERR_INVALID_ARG);
    ck_assert_msg(strstr(hx_last_error(), "kv_type_v 'q5_1'"), "%s", hx_last_error());
    o.kv_type_v = NULL;
    o.kv_type_k = "";  /* empty: the default */
    o.kv_type = "q9";
    ck_assert_int_eq(hx_model_load(rt, sm.path, &o, &m), HX_ERR_INVALID_ARG);
    ck_assert_msg(strstr(hx_last_error(), "kv_type 'q9'"), "%s", hx_last_error());
    free(want);
    free(got);
}
END_TEST

START_TEST(fork_and_reuse_refuse_bad_handles)
{
    hx_model *m = load(512, 0);
    hx_session *s, *f = (hx_session *)1;
    ck_assert_int_eq(hx_session_fork(NULL, &f), HX_ERR_INVALID_ARG);
    ck_assert_ptr_null(f);
    HX_ASSERT_OK(hx_session_open(m, &s));
    ck_assert_int_eq(hx_session_fork(s, NULL), HX_ERR_INVALID_ARG);
    HX_ASSERT_OK(hx_session_fork(s, &f)); /* an empty session forks too */
    ck_assert_uint_eq(hx_session_position(f), 0);
    ck_assert_ptr_null(hx_session_logits(f, -1));
    HX_ASSERT_OK(hx_session_close(f));
    HX_ASSERT_OK(hx_session_close(s));
    ck_assert_int_eq(hx_session_fork(s, &f), HX_ERR_STATE);
    ck_assert_uint_eq(hx_session_reused_tokens(s), 0);
    ck_assert_uint_eq(hx_session_reused_tokens(NULL), 0);
    HX_ASSERT_OK(hx_model_free(m));
}
END_TEST

Suite *suite_kv(void)
{
    Suite *s = suite_create("kv");
    TCase *c = tcase_create("prefix");
    tcase_add_checked_fixture(c, setup, teardown);
    tcase_set_timeout(c, 300);
    tcase_add_loop_test(c, common_prefix_is_evaluated_once, 0, 2);
    tcase_add_test(c, last_token_and_logits_all_are_evaluated);
    tcase_add_test(c, batch_reuses_prefixes);
    tcase_add_test(c, cached_blocks_are_evicted_least_recently_used_first);
    tcase_add_test(c, full_pool_refuses_with_nothing_changed);
    tcase_add_test(c, partial_blocks_are_reused);
    tcase_add_test(c, partial_block_without_room_is_computed);
    tcase_add_test(c, reuse_is_the_longest_common_prefix);
    tcase_add_loop_test(c, fork_continues_as_an_independent_session, 0, 2);
    tcase_add_test(c, kv_types_share_prefixes_and_shrink);
    tcase_add_test(c, k_and_v_types_apart);
    tcase_add_test(c, fork_and_reuse_refuse_bad_handles);
    suite_add_tcase(s, c);
    return s;
}
