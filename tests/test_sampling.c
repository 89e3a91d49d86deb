/* The sampler: greedy, seeds, the drawn distribution against a plain
 * reference of the chain, each filter's kept set, penalties, bad input. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sampling.h"
#include "runtime/error.h"
#include "tests/hx_test.h"

/* ---- helpers ------------------------------------------------------------ */

/* Each test seeds this itself, so its logits do not depend on which tests
 * ran before it in the same process. */
static uint64_t test_rng;

static void test_seed(uint64_t seed) { test_rng = seed * 0x9e3779b97f4a7c15ull | 1; }

static double test_uniform(void)
{
    test_rng ^= test_rng << 13;
    test_rng ^= test_rng >> 7;
    test_rng ^= test_rng << 17;
    return (double)(test_rng >> 11) * 0x1.0p-53;
}

static void random_logits(float *l, int n, float lo, float hi)
{
    for (int i = 0; i < n; i++)
        l[i] = lo + (hi - lo) * (float)test_uniform();
}

static hx_sampling plain(float temperature, uint64_t seed)
{
    hx_sampling p = hx_sampling_default();
    p.temperature = temperature;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    p.seed = seed;
    return p;
}

static hx_sampler *make(const hx_sampling *p, int n)
{
    hx_sampler *s = NULL;
    HX_ASSERT_OK(hx_sampler_create(p, n, &s));
    return s;
}

static int32_t draw(hx_sampler *s, const float *logits)
{
    int32_t t = -1;
    HX_ASSERT_OK(hx_sampler_sample(s, logits, &t));
    return t;
}

static int scalar_argmax(const float *l, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > l[b])
            b = i;
    return b;
}

static const float *sort_logits;
static int by_logit_desc(const void *a, const void *b)
{
    int i = *(const int *)a, j = *(const int *)b;
    if (sort_logits[i] != sort_logits[j])
        return sort_logits[i] > sort_logits[j] ? -1 : 1;
    return i - j;
}

/* The chain written out plainly: sort everything, cut with top-k, top-p
 * (probabilities of the survivors at T = 1), min-p, then the softmax at T
 * of what is left.  prob[i] = 0 for every token cut. */
static void reference_distribution(const hx_sampling *p, const float *l, int n, double *prob)
{
    int *order = malloc((size_t)n * sizeof *order);
    for (int i = 0; i < n; i++)
        order[i] = i;
    sort_logits = l;
    qsort(order, (size_t)n, sizeof *order, by_logit_desc);
    int keep = n;
    if (p->top_k > 0 && p->top_k < keep)
        keep = p->top_k;
    if (p->top_p < 1.0f) {
        double z = 0, cum = 0;
        for (int i = 0; i < keep; i++)
            z += exp((double)l[order[i]] - l[order[0]]);
        for (int i = 0; i < keep; i++) {
            cum += exp((double)l[order[i]] - l[order[0]]) / z;
            if (cum >= p->top_p) {
                keep = i + 1;
                break;
            }
        }
    }
    if (p->min_p > 0.0f) {
        int k = 0;
        while (k < keep && exp((double)l[order[k]] - l[order[0]]) >= p->min_p * (1 - 1e-12))
            k++;
        keep = k;
    }
    memset(prob, 0, (size_t)n * sizeof *prob);
    double z = 0;
    for (int i = 0; i < keep; i++)
        z += prob[order[i]] = exp(((double)l[order[i]] - l[order[0]]) / p->temperature);
    for (int i = 0; i < keep; i++)
        prob[order[i]] /= z;
    free(order);
}

/* Draws `draws` tokens and checks the counts against `prob` with a
 * chi-square test at the 0.9999 quantile (Wilson-Hilferty): a real bias
 * gives a statistic in the hundreds at these sample sizes.  Tokens of
 * probability 0 must never come.  The seed is fixed, so the outcome is too. */
static void check_distribution(const hx_sampling *p, const float *l, int n, int draws)
{
    double *prob = malloc((size_t)n * sizeof *prob);
    int *count = calloc((size_t)n, sizeof *count);
    reference_distribution(p, l, n, prob);
    hx_sampler *s = make(p, n);
    for (int i = 0; i < draws; i++) {
        int32_t t = draw(s, l);
        ck_assert(t >= 0 && t < n);
        count[t]++;
    }
    double chi2 = 0;
    int df = -1;
    for (int i = 0; i < n; i++) {
        if (prob[i] == 0) {
            ck_assert_msg(count[i] == 0, "token %d (cut by the filters) drawn %d times", i, count[i]);
            continue;
        }
        double e = prob[i] * draws;
        chi2 += (count[i] - e) * (count[i] - e) / e;
        df++;
    }
    if (df > 0) {
        double a = 2.0 / (9.0 * df);
        double bound = df * pow(1 - a + 3.719 * sqrt(a), 3);
        ck_assert_msg(chi2 < bound, "chi2 %.2f >= %.2f (df %d; T %g k %d p %g min_p %g)", chi2, bound, df,
                      (double)p->temperature, (int)p->top_k, (double)p->top_p, (double)p->min_p);
    }
    hx_sampler_free(s);
    free(prob);
    free(count);
}

/* Which tokens `draws` draws produce: seen[i] = 1 if token i came. */
static void tokens_seen(const hx_sampling *p, const float *l, int n, int draws, int *seen)
{
    hx_sampler *s = make(p, n);
    memset(seen, 0, (size_t)n * sizeof *seen);
    for (int i = 0; i < draws; i++)
        seen[draw(s, l)] = 1;
    hx_sampler_free(s);
}

/* Logits whose softmax is exactly `probs` (up to rounding). */
static void logits_of(const double *probs, int n, float *l)
{
    for (int i = 0; i < n; i++)
        l[i] = (float)log(probs[i]);
}

/* ---- tests -------------------------------------------------------------- */

START_TEST(greedy_is_argmax)
{
    test_seed(1);
    static const int sizes[] = {1, 2, 7, 1000, 32000};
    float *l = malloc(32000 * sizeof *l);
    for (int k = 0; k < 5; k++) {
        int n = sizes[k];
        hx_sampling p = hx_sampling_default(); /* filters on, as a user would leave them */
        p.temperature = 0.0f;
        hx_sampler *s = make(&p, n);
        for (int trial = 0; trial < 20; trial++) {
            random_logits(l, n, -10.0f, 10.0f);
            ck_assert_int_eq(draw(s, l), scalar_argmax(l, n));
        }
        if (n >= 7) { /* ties go to the lowest id */
            l[n - 1] = l[5] = l[3] = 50.0f;
            ck_assert_int_eq(draw(s, l), 3);
        }
        hx_sampler_free(s);
    }
    free(l);
}
END_TEST

START_TEST(seed_fixes_the_sequence)
{
    test_seed(2);
    enum { N = 500, DRAWS = 300 };
    float l[N];
    random_logits(l, N, -2.0f, 2.0f);
    hx_sampling p = plain(1.0f, 42);
    hx_sampler *a = make(&p, N), *b = make(&p, N);
    p.seed = 43;
    hx_sampler *c = make(&p, N);
    int32_t first[DRAWS];
    int differ = 0;
    for (int i = 0; i < DRAWS; i++) {
        first[i] = draw(a, l);
        ck_assert_int_eq(first[i], draw(b, l));
        differ += first[i] != draw(c, l);
    }
    ck_assert_msg(differ > DRAWS / 2, "seeds 42 and 43 agree on %d of %d draws", DRAWS - differ, DRAWS);
    hx_sampler_reset(a);
    for (int i = 0; i < DRAWS; i++)
        ck_assert_int_eq(draw(a, l), first[i]);
    hx_sampler_free(a);
    hx_sampler_free(b);
    hx_sampler_free(c);
}
END_TEST

START_TEST(distribution_matches_softmax)
{
    test_seed(3);
    enum { N = 12 };
    float l[N];
    random_logits(l, N, -2.0f, 2.0f);
    static const float temps[] = {0.5f, 1.0f, 1.7f};
    for (int i = 0; i < 3; i++) {
        hx_sampling p = plain(temps[i], 1000 + (uint64_t)i);
        check_distribution(&p, l, N, 120000);
    }
}
END_TEST

START_TEST(filtered_distribution_matches_reference)
{
    test_seed(4);
    enum { N = 40 };
    float l[N];
    random_logits(l, N, -3.0f, 3.0f);
    struct { float t; int k; float top_p, min_p; } cases[] = {
        {1.0f, 5, 1.0f, 0.0f},   {0.7f, 0, 0.8f, 0.0f},   {1.3f, 0, 1.0f, 0.1f},
        {0.9f, 10, 0.9f, 0.05f}, {2.0f, 25, 0.5f, 0.0f},  {1.0f, 0, 0.95f, 0.2f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hx_sampling p = plain(cases[i].t, 77 + i);
        p.top_k = cases[i].k;
        p.top_p = cases[i].top_p;
        p.min_p = cases[i].min_p;
        check_distribution(&p, l, N, 100000);
    }
}
END_TEST

START_TEST(top_k_stays_in_the_top_k)
{
    test_seed(5);
    enum { N = 1000, K = 10 };
    float l[N];
    int seen[N], order[N];
    for (int trial = 0; trial < 3; trial++) {
        random_logits(l, N, -1.0f, 1.0f);
        for (int i = 0; i < N; i++)
            order[i] = i;
        sort_logits = l;
        qsort(order, N, sizeof *order, by_logit_desc);
        hx_sampling p = plain(3.0f, 5 + (uint64_t)trial); /* hot: every survivor is likely */
        p.top_k = K;
        tokens_seen(&p, l, N, 20000, seen);
        for (int r = 0; r < N; r++)
            ck_assert_msg(seen[order[r]] == (r < K), "token of rank %d: seen %d", r, seen[order[r]]);
    }
}
END_TEST

START_TEST(top_k_breaks_ties_towards_lower_ids)
{
    const float l[6] = {1.0f, 5.0f, 2.0f, 5.0f, 5.0f, 0.0f};
    hx_sampling p = plain(1.0f, 4);
    p.top_k = 2;
    int seen[6];
    tokens_seen(&p, l, 6, 2000, seen);
    ck_assert(!seen[0] && seen[1] && !seen[2] && seen[3] && !seen[4] && !seen[5]);
}
END_TEST

START_TEST(top_p_keeps_the_smallest_nucleus)
{
    /* Sorted: 0.4 0.3 0.15 0.1 0.05, cumulative .4 .7 .85 .95 1. */
    const double probs[5] = {0.05, 0.4, 0.1, 0.3, 0.15};
    float l[5];
    logits_of(probs, 5, l);
    struct { float p; int expect[5]; } cases[] = {
        {0.3f, {0, 1, 0, 0, 0}}, {0.65f, {0, 1, 0, 1, 0}}, {0.8f, {0, 1, 0, 1, 1}},
        {0.9f, {0, 1, 1, 1, 1}}, {0.97f, {1, 1, 1, 1, 1}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        hx_sampling p = plain(1.0f, 9);
        p.top_p = cases[c].p;
        int seen[5];
        tokens_seen(&p, l, 5, 4000, seen);
        for (int i = 0; i < 5; i++)
            ck_assert_msg(seen[i] == cases[c].expect[i], "top_p %g: token %d seen %d", (double)cases[c].p, i,
                          seen[i]);
    }
}
END_TEST

START_TEST(min_p_keeps_tokens_near_the_best)
{
    const double probs[5] = {0.06, 0.5, 0.1, 0.04, 0.3};
    float l[5];
    logits_of(probs, 5, l);
    struct { float m; int expect[5]; } cases[] = {
        {0.15f, {0, 1, 1, 0, 1}}, /* floor 0.075 */
        {0.5f, {0, 1, 0, 0, 1}},  /* floor 0.25  */
        {1.0f, {0, 1, 0, 0, 0}},
        {0.01f, {1, 1, 1, 1, 1}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        hx_sampling p = plain(1.0f, 11);
        p.min_p = cases[c].m;
        int seen[5];
        tokens_seen(&p, l, 5, 4000, seen);
        for (int i = 0; i < 5; i++)
            ck_assert_msg(seen[i] == cases[c].expect[i], "min_p %g: token %d seen %d", (double)cases[c].m, i,
                          seen[i]);
    }
}
END_TEST

START_TEST(temperature_comes_after_the_filters)
{
    /* At T = 100 the distribution is nearly flat: were top-p applied after
     * the temperature, it would keep 4 tokens; applied first, 2. */
    const double probs[5] = {0.4, 0.3, 0.15, 0.1, 0.05};
    float l[5];
    logits_of(probs, 5, l);
    hx_sampling p = plain(100.0f, 3);
    p.top_p = 0.65f;
    int seen[5];
    tokens_seen(&p, l, 5, 4000, seen);
    ck_assert(seen[0] && seen[1] && !seen[2] && !seen[3] && !seen[4]);
}
END_TEST

START_TEST(repetition_penalty)
{
    enum { N = 8 };
    hx_sampling p = plain(0.0f, 0);
    p.repeat_penalty = 1.1f;
    p.repeat_last_n = 2;

    /* Positive logits are divided: 2.0 / 1.1 = 1.82 < 1.9. */
    float pos[N] = {2.0f, 1.9f, 0.5f, -3.0f, 0.1f, 0.2f, 0.3f, -1.0f};
    hx_sampler *s = make(&p, N);
    ck_assert_int_eq(draw(s, pos), 0);
    HX_ASSERT_OK(hx_sampler_accept(s, 0));
    ck_assert_int_eq(draw(s, pos), 1);
    ck_assert_float_eq(pos[0], 2.0f); /* the caller's logits stay as they were */
    /* The window holds 2 tokens: after two others, 0 is no longer penalized. */
    HX_ASSERT_OK(hx_sampler_accept(s, 5));
    ck_assert_int_eq(draw(s, pos), 1);
    HX_ASSERT_OK(hx_sampler_accept(s, 6));
    ck_assert_int_eq(draw(s, pos), 0);
    hx_sampler_free(s);

    /* Negative logits are multiplied: -1.0 * 1.1 = -1.1 < -1.05. */
    float neg[N] = {-1.0f, -1.05f, -5.0f, -6.0f, -7.0f, -8.0f, -9.0f, -9.5f};
    s = make(&p, N);
    ck_assert_int_eq(draw(s, neg), 0);
    HX_ASSERT_OK(hx_sampler_accept(s, 0));
    ck_assert_int_eq(draw(s, neg), 1);
    hx_sampler_free(s);

    /* Once per distinct token: 2.0 / 1.1 = 1.82 > 1.7, while 2.0 / 1.21 would not be. */
    float once[N] = {2.0f, 1.7f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    s = make(&p, N);
    HX_ASSERT_OK(hx_sampler_accept(s, 0));
    HX_ASSERT_OK(hx_sampler_accept(s, 0));
    ck_assert_int_eq(draw(s, once), 0);
    /* Out-of-vocabulary tokens are refused and change nothing. */
    ck_assert_int_eq(hx_sampler_accept(s, N), HX_ERR_RANGE);
    ck_assert_int_eq(hx_sampler_accept(s, -1), HX_ERR_RANGE);
    ck_assert_int_eq(draw(s, once), 0);
    hx_sampler_free(s);

    /* Penalty 1 is off: accepted tokens change nothing. */
    p.repeat_penalty = 1.0f;
    s = make(&p, N);
    HX_ASSERT_OK(hx_sampler_accept(s, 0));
    ck_assert_int_eq(draw(s, pos), 0);
    hx_sampler_free(s);

    /* An extreme penalty leaves the logit finite (and the draw defined). */
    p.repeat_penalty = 1e-39f; /* 1.9 / 1e-39 overflows float */
    p.temperature = 1.0f;
    s = make(&p, N);
    HX_ASSERT_OK(hx_sampler_accept(s, 1));
    ck_assert_int_eq(draw(s, pos), 1);
    hx_sampler_free(s);
}
END_TEST

/* OpenAI's penalties, as llama.cpp applies them: a token seen c times in
 * the window loses c * frequency + presence, after the repetition penalty. */
START_TEST(frequency_and_presence_penalties)
{
    enum { N = 6 };
    hx_sampling p = plain(0.0f, 0);
    p.repeat_last_n = 8;
    float l[N] = {3.0f, 2.5f, 2.2f, 0.0f, -1.0f, -2.0f};

    /* Frequency: token 0 seen twice loses 2 * 0.3 = 0.6 -> 2.4 < 2.5. */
    p.frequency_penalty = 0.3f;
    hx_sampler *s = make(&p, N);
    HX_ASSERT_OK(hx_sampler_accept(s, 0));
    ck_assert_int_eq(draw(s, l), 0); /* once: 2.7 > 2.5 */
    HX_ASSERT_OK(hx_sampler_accept(s, 0));
    ck_assert_int_eq(draw(s, l), 1);
    hx_sampler_free(s);

    /* Presence: once, however often seen: 3.0 - 0.4 = 2.6 > 2.5 after 3 times. */
    p.frequency_penalty = 0.0f;
    p.presence_penalty = 0.4f;
    s = make(&p, N);
    for (int i = 0; i < 3; i++)
        HX_ASSERT_OK(hx_sampler_accept(s, 0));
    ck_assert_int_eq(draw(s, l), 0);
    /* Token 1 seen too: 2.5 - 0.4 = 2.1 < 2.2. */
    HX_ASSERT_OK(hx_sampler_accept(s, 1));
    p.presence_penalty = 0.6f; /* another sampler: 3.0 - 0.6 = 2.4 < 2.5 */
    hx_sampler *s2 = make(&p, N);
    HX_ASSERT_OK(hx_sampler_accept(s2, 0));
    ck_assert_int_eq(draw(s2, l), 1);
    hx_sampler_free(s2);
    ck_assert_int_eq(draw(s, l), 0);
    hx_sampler_free(s);

    /* A negative penalty favours what was seen: token 2 gains 2 * 0.5 = 1 -> 3.2. */
    p.presence_penalty = 0.0f;
    p.frequency_penalty = -0.5f;
    s = make(&p, N);
    HX_ASSERT_OK(hx_sampler_accept(s, 2));
    HX_ASSERT_OK(hx_sampler_accept(s, 2));
    ck_assert_int_eq(draw(s, l), 2);
    hx_sampler_free(s);

    /* After the repetition penalty: 3.0 / 1.5 - 0.1 = 1.9 and 2.5 / 1.5 - 0.1
     * = 1.57 fall below the unseen 2.2. */
    p.frequency_penalty = 0.1f;
    p.repeat_penalty = 1.5f;
    s = make(&p, N);
    HX_ASSERT_OK(hx_sampler_accept(s, 0));
    HX_ASSERT_OK(hx_sampler_accept(s, 1));
    ck_assert_int_eq(draw(s, l), 2);
    hx_sampler_free(s);

    /* Out of range is refused. */
    p = plain(0.0f, 0);
    p.presence_penalty = 2.5f;
    ck_assert_int_eq(hx_sampler_create(&p, N, &s), HX_ERR_INVALID_ARG);
    p.presence_penalty = NAN;
    ck_assert_int_eq(hx_sampler_create(&p, N, &s), HX_ERR_INVALID_ARG);
}
END_TEST

START_TEST(invalid_params_are_refused)
{
    hx_sampler *s = (hx_sampler *)&s; /* must come back NULL */
    hx_sampling good = hx_sampling_default();
    ck_assert_int_eq(hx_sampler_create(NULL, 10, &s), HX_ERR_INVALID_ARG);
    ck_assert_ptr_null(s);
    ck_assert_int_eq(hx_sampler_create(&good, 10, NULL), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_sampler_create(&good, 0, &s), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_sampler_create(&good, -5, &s), HX_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "n_vocab"));

    struct { const char *field; hx_sampling p; } bad[] = {
        {"temperature", good}, {"temperature", good}, {"temperature", good}, {"top_k", good},
        {"top_p", good},       {"top_p", good},       {"top_p", good},       {"top_p", good},
        {"min_p", good},       {"min_p", good},       {"min_p", good},       {"repeat_penalty", good},
        {"repeat_penalty", good}, {"repeat_penalty", good}, {"repeat_penalty", good},
        {"repeat_last_n", good}, {"repeat_last_n", good},
    };
    int i = 0;
    bad[i++].p.temperature = -0.1f;
    bad[i++].p.temperature = NAN;
    bad[i++].p.temperature = INFINITY;
    bad[i++].p.top_k = -1;
    bad[i++].p.top_p = 0.0f;
    bad[i++].p.top_p = -0.5f;
    bad[i++].p.top_p = 1.01f;
    bad[i++].p.top_p = NAN;
    bad[i++].p.min_p = -0.01f;
    bad[i++].p.min_p = 1.5f;
    bad[i++].p.min_p = NAN;
    bad[i++].p.repeat_penalty = 0.0f;
    bad[i++].p.repeat_penalty = -1.0f;
    bad[i++].p.repeat_penalty = NAN;
    bad[i++].p.repeat_penalty = INFINITY;
    bad[i++].p.repeat_last_n = -1;
    bad[i++].p.repeat_last_n = HX_SAMPLER_MAX_LAST_N + 1;
    ck_assert_int_eq(i, (int)(sizeof bad / sizeof bad[0]));
    for (i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
        s = (hx_sampler *)&s;
        ck_assert_int_eq(hx_sampler_create(&bad[i].p, 10, &s), HX_ERR_INVALID_ARG);
        ck_assert_ptr_null(s);
        ck_assert_msg(strstr(hx_last_error(), bad[i].field), "case %d: '%s' does not name %s", i,
                      hx_last_error(), bad[i].field);
    }

    /* The edges of each range are valid. */
    hx_sampling edge = good;
    edge.top_p = 1.0f;
    edge.min_p = 1.0f;
    edge.top_k = 1000000;
    edge.repeat_last_n = 0;
    edge.repeat_penalty = 1.5f;
    s = make(&edge, 10);
    hx_sampler_free(s);
    edge.min_p = 0.0f;
    edge.temperature = 0.0f;
    edge.repeat_last_n = HX_SAMPLER_MAX_LAST_N;
    s = make(&edge, 10);
    hx_sampler_free(s);
    hx_sampler_free(NULL);
    hx_sampler_reset(NULL);
}
END_TEST

START_TEST(bad_logits_are_refused)
{
    test_seed(6);
    enum { N = 16 };
    float l[N];
    random_logits(l, N, -1.0f, 1.0f);
    hx_sampling p = hx_sampling_default();
    hx_sampler *s = make(&p, N);
    int32_t t;
    ck_assert_int_eq(hx_sampler_sample(NULL, l, &t), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_sampler_sample(s, NULL, &t), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_sampler_sample(s, l, NULL), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_sampler_accept(NULL, 0), HX_ERR_INVALID_ARG);

    float saved = l[7];
    l[7] = NAN;
    ck_assert_int_eq(hx_sampler_sample(s, l, &t), HX_ERR_INVALID_ARG);
    l[7] = INFINITY;
    ck_assert_int_eq(hx_sampler_sample(s, l, &t), HX_ERR_INVALID_ARG);
    l[7] = saved;

    float masked[N];
    for (int i = 0; i < N; i++)
        masked[i] = -INFINITY;
    ck_assert_int_eq(hx_sampler_sample(s, masked, &t), HX_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "-inf"));

    /* -inf masks a token for good; the sampler still works after errors. */
    hx_sampler_free(s);
    p = plain(2.0f, 8);
    s = make(&p, N);
    for (int i = 0; i < N; i++)
        masked[i] = (i % 3 == 0) ? -INFINITY : l[i];
    for (int i = 0; i < 3000; i++) {
        t = draw(s, masked);
        ck_assert_msg(t % 3 != 0, "masked token %d drawn", t);
    }
    hx_sampler_free(s);

    /* A subnormal temperature is effectively greedy, never NaN. */
    p = plain(1e-40f, 8);
    s = make(&p, N);
    for (int i = 0; i < 50; i++)
        ck_assert_int_eq(draw(s, l), scalar_argmax(l, N));
    hx_sampler_free(s);
}
END_TEST

Suite *suite_sampling(void)
{
    Suite *s = suite_create("sampling");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, greedy_is_argmax);
    tcase_add_test(tc, seed_fixes_the_sequence);
    tcase_add_test(tc, distribution_matches_softmax);
    tcase_add_test(tc, filtered_distribution_matches_reference);
    tcase_add_test(tc, top_k_stays_in_the_top_k);
    tcase_add_test(tc, top_k_breaks_ties_towards_lower_ids);
    tcase_add_test(tc, top_p_keeps_the_smallest_nucleus);
    tcase_add_test(tc, min_p_keeps_tokens_near_the_best);
    tcase_add_test(tc, temperature_comes_after_the_filters);
    tcase_add_test(tc, repetition_penalty);
    tcase_add_test(tc, frequency_and_presence_penalties);
    tcase_add_test(tc, invalid_params_are_refused);
    tcase_add_test(tc, bad_logits_are_refused);
    suite_add_tcase(s, tc);
    return s;
}
