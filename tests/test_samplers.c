/* llama.cpp's other samplers, each against a plain reference written out
 * here on crafted logits: the distribution the chain leaves
 * (hx_sampler_distribution) compared token by token with the reference's,
 * and for the stochastic parts (XTC's coin, Mirostat's mu) the behaviour
 * step by step or in frequency. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sampling.h"
#include "runtime/error.h"
#include "tests/hx_test.h"

enum { MAXV = 512 };

static uint64_t trng;
static void tseed(uint64_t s) { trng = s * 0x9e3779b97f4a7c15ull | 1; }
static double tuni(void)
{
    trng ^= trng << 13;
    trng ^= trng >> 7;
    trng ^= trng << 17;
    return (double)(trng >> 11) * 0x1.0p-53;
}

static void rand_logits(float *l, int n, float lo, float hi)
{
    for (int i = 0; i < n; i++)
        l[i] = lo + (hi - lo) * (float)tuni();
}

/* Every stage off but the one a test turns on; temperature 1. */
static hx_sampling bare(uint64_t seed)
{
    hx_sampling p = hx_sampling_default();
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    return p;
}

static hx_sampler *mk(const hx_sampling *p, int n)
{
    hx_sampler *s = NULL;
    HX_ASSERT_OK(hx_sampler_create(p, n, &s));
    return s;
}

/* The chain's distribution as a dense vector over the vocabulary. */
static void dist_of(hx_sampler *s, const float *l, int n, double *dense)
{
    int32_t ids[MAXV];
    double pr[MAXV];
    int m = 0;
    HX_ASSERT_OK(hx_sampler_distribution(s, l, ids, pr, &m));
    for (int i = 0; i < n; i++)
        dense[i] = 0.0;
    for (int i = 0; i < m; i++)
        dense[ids[i]] = pr[i];
}

static void expect_same(const double *got, const double *want, int n, const char *what)
{
    for (int i = 0; i < n; i++)
        ck_assert_msg(fabs(got[i] - want[i]) < 1e-5, "%s: token %d has probability %.7f; the reference %.7f", what,
                      i, got[i], want[i]);
}

/* softmax over the tokens with keep[i] (all when keep is NULL) of l / t. */
static void ref_softmax(const float *l, const int *keep, int n, double t, double *out)
{
    double mx = -INFINITY, z = 0.0;
    for (int i = 0; i < n; i++)
        if ((!keep || keep[i]) && l[i] != -INFINITY)
            mx = fmax(mx, l[i] / t);
    for (int i = 0; i < n; i++) {
        out[i] = (!keep || keep[i]) && l[i] != -INFINITY ? exp(l[i] / t - mx) : 0.0;
        z += out[i];
    }
    for (int i = 0; i < n; i++)
        out[i] /= z;
}

/* Indices sorted by probability, most likely first (stable on ids). */
static const double *sort_key;
static int by_key_desc(const void *a, const void *b)
{
    int i = *(const int *)a, j = *(const int *)b;
    if (sort_key[i] != sort_key[j])
        return sort_key[i] > sort_key[j] ? -1 : 1;
    return i - j;
}
static void order_by(const double *p, int n, int *idx)
{
    for (int i = 0; i < n; i++)
        idx[i] = i;
    sort_key = p;
    qsort(idx, (size_t)n, sizeof *idx, by_key_desc);
}

/* ---- logit bias --------------------------------------------------------- */

START_TEST(logit_bias_adds_to_the_logits)
{
    tseed(11);
    enum { N = 64 };
    float l[N], biased[N];
    rand_logits(l, N, -3, 3);
    hx_logit_bias b[] = {{5, 2.5f}, {9, -1.0f}, {17, -INFINITY}, {5, 0.5f}}; /* the same token twice: both add */
    hx_sampling p = bare(1);
    p.logit_bias = b;
    p.n_logit_bias = 4;
    hx_sampler *s = mk(&p, N);
    memcpy(biased, l, sizeof l);
    biased[5] += 3.0f;
    biased[9] -= 1.0f;
    biased[17] = -INFINITY;
    double got[N], want[N];
    dist_of(s, l, N, got);
    ref_softmax(biased, NULL, N, 1.0, want);
    expect_same(got, want, N, "logit_bias");
    ck_assert(got[17] == 0.0);
    hx_sampler_free(s);

    /* Greedy: a bias makes a token the argmax; a ban moves it off. */
    int top = 0;
    for (int i = 1; i < N; i++)
        top = l[i] > l[top] ? i : top;
    hx_logit_bias up = {40, 100.0f}, ban = {(int32_t)top, -INFINITY};
    p = bare(1);
    p.temperature = 0.0f;
    p.logit_bias = &up;
    p.n_logit_bias = 1;
    s = mk(&p, N);
    int32_t t;
    HX_ASSERT_OK(hx_sampler_sample(s, l, &t));
    ck_assert_int_eq(t, 40);
    hx_sampler_free(s);
    p.logit_bias = &ban;
    s = mk(&p, N);
    HX_ASSERT_OK(hx_sampler_sample(s, l, &t));
    ck_assert_int_ne(t, top);
    float second = -INFINITY;
    for (int i = 0; i < N; i++)
        if (i != top)
            second = fmaxf(second, l[i]);
    ck_assert(l[t] == second);
    hx_sampler_free(s);
}
END_TEST

/* ---- typical ------------------------------------------------------------ */

static void ref_typical(const float *l, int n, double tp, int min_keep, double *out)
{
    double p[MAXV], h = 0.0, score[MAXV];
    ref_softmax(l, NULL, n, 1.0, p);
    for (int i = 0; i < n; i++)
        h -= p[i] > 0 ? p[i] * log(p[i]) : 0.0;
    int idx[MAXV];
    for (int i = 0; i < n; i++)
        score[i] = -fabs(-log(p[i]) - h); /* sorted descending: nearest the entropy first */
    order_by(score, n, idx);
    int keep[MAXV] = {0};
    double cum = 0.0;
    for (int i = 0; i < n; i++) {
        keep[idx[i]] = 1;
        cum += p[idx[i]];
        if (cum > tp && i + 1 >= min_keep)
            break;
    }
    ref_softmax(l, keep, n, 1.0, out);
}

START_TEST(typical_keeps_the_tokens_nearest_the_entropy)
{
    tseed(12);
    enum { N = 80 };
    float l[N];
    static const double ps[] = {0.2, 0.5, 0.9, 0.99};
    for (int c = 0; c < 8; c++) {
        rand_logits(l, N, -4, 4);
        hx_sampling p = bare(2);
        p.typical_p = (float)ps[c % 4];
        p.min_keep = c >= 4 ? 5 : 0;
        hx_sampler *s = mk(&p, N);
        double got[N], want[N];
        dist_of(s, l, N, got);
        ref_typical(l, N, p.typical_p, p.min_keep, want);
        expect_same(got, want, N, "typical_p");
        int kept = 0;
        for (int i = 0; i < N; i++)
            kept += got[i] > 0;
        ck_assert_int_lt(kept, N); /* it did cut */
        hx_sampler_free(s);
    }
}
END_TEST

/* ---- top-n-sigma -------------------------------------------------------- */

START_TEST(top_n_sigma_keeps_logits_near_the_max)
{
    tseed(13);
    enum { N = 100 };
    float l[N];
    static const float ns[] = {0.5f, 1.0f, 2.0f};
    for (int c = 0; c < 3; c++) {
        rand_logits(l, N, -5, 5);
        double mean = 0, var = 0, mx = -INFINITY;
        for (int i = 0; i < N; i++) {
            mean += l[i] / (double)N;
            mx = fmax(mx, l[i]);
        }
        for (int i = 0; i < N; i++)
            var += (l[i] - mean) * (l[i] - mean) / N;
        int keep[N];
        for (int i = 0; i < N; i++)
            keep[i] = l[i] >= mx - ns[c] * sqrt(var);
        hx_sampling p = bare(3);
        p.top_n_sigma = ns[c];
        hx_sampler *s = mk(&p, N);
        double got[N], want[N];
        dist_of(s, l, N, got);
        ref_softmax(l, keep, N, 1.0, want);
        expect_same(got, want, N, "top_n_sigma");
        hx_sampler_free(s);
    }
}
END_TEST

/* ---- XTC ---------------------------------------------------------------- */

START_TEST(xtc_removes_the_top_choices_but_the_last)
{
    /* Probabilities about .40 .25 .15 .10 then small: with threshold .12,
     * the first two go and the .15 one stays. */
    enum { N = 20 };
    float l[N];
    double pr[N] = {0.40, 0.25, 0.15, 0.10};
    for (int i = 4; i < N; i++)
        pr[i] = 0.10 / (N - 4);
    for (int i = 0; i < N; i++)
        l[i] = (float)log(pr[i]);
    hx_sampling p = bare(4);
    p.xtc_probability = 1.0f;
    p.xtc_threshold = 0.12f;
    hx_sampler *s = mk(&p, N);
    double got[N], want[N];
    int keep[N];
    for (int i = 0; i < N; i++)
        keep[i] = i >= 2;
    dist_of(s, l, N, got);
    ref_softmax(l, keep, N, 1.0, want);
    expect_same(got, want, N, "xtc");
    hx_sampler_free(s);

    /* min_keep larger than what would be left: nothing removed. */
    p.min_keep = N - 1;
    s = mk(&p, N);
    dist_of(s, l, N, got);
    ref_softmax(l, NULL, N, 1.0, want);
    expect_same(got, want, N, "xtc with min_keep");
    hx_sampler_free(s);

    /* A threshold above .5 is off; so is one only the top token reaches. */
    p.min_keep = 0;
    p.xtc_threshold = 0.3f;
    s = mk(&p, N);
    dist_of(s, l, N, got);
    expect_same(got, want, N, "xtc, one token above the threshold");
    hx_sampler_free(s);

    /* The coin: with probability .5, token 0 (p .4) can be drawn only
     * when XTC does not fire: .5 * .4 = .2 of the draws. */
    p.xtc_threshold = 0.12f;
    p.xtc_probability = 0.5f;
    s = mk(&p, N);
    int hits = 0, draws = 40000;
    for (int i = 0; i < draws; i++) {
        int32_t t;
        HX_ASSERT_OK(hx_sampler_sample(s, l, &t));
        hits += t == 0;
    }
    double f = (double)hits / draws; /* sd of f: sqrt(.2 * .8 / 40000) = .002 */
    ck_assert_msg(fabs(f - 0.2) < 0.012, "token 0 drawn %.4f of the time; expected 0.2", f);
    hx_sampler_free(s);
}
END_TEST

/* ---- dynamic temperature ------------------------------------------------ */

START_TEST(dynatemp_maps_entropy_to_temperature)
{
    tseed(15);
    enum { N = 60 };
    float l[N];
    struct { float t, range, exponent; } cases[] = {{1.0f, 0.5f, 1.0f}, {0.8f, 0.6f, 2.0f}, {0.3f, 0.5f, 0.5f}};
    for (int c = 0; c < 3; c++) {
        rand_logits(l, N, -3 * (c + 1), 3 * (c + 1));
        double p0[N], h = 0;
        ref_softmax(l, NULL, N, 1.0, p0);
        for (int i = 0; i < N; i++)
            h -= p0[i] * log(p0[i]);
        double lo = fmax(0.0, cases[c].t - cases[c].range), hi = cases[c].t + cases[c].range;
        double t = lo + (hi - lo) * pow(h / log((double)N), cases[c].exponent);
        hx_sampling p = bare(5);
        p.temperature = cases[c].t;
        p.dynatemp_range = cases[c].range;
        p.dynatemp_exponent = cases[c].exponent;
        hx_sampler *s = mk(&p, N);
        double got[N], want[N];
        dist_of(s, l, N, got);
        ref_softmax(l, NULL, N, t, want);
        expect_same(got, want, N, "dynatemp");
        hx_sampler_free(s);
    }
}
END_TEST

/* ---- Mirostat ----------------------------------------------------------- */

/* Mirostat 2's filter at mu: the most likely tokens whose surprise is at
 * most mu (at least one), renormalized. */
static void ref_mirostat2(const float *l, int n, double mu, double *out)
{
    double p[MAXV];
    int idx[MAXV], keep[MAXV] = {0};
    ref_softmax(l, NULL, n, 1.0, p);
    order_by(p, n, idx);
    keep[idx[0]] = 1;
    for (int i = 0; i < n && -log2(p[idx[i]]) <= mu; i++)
        keep[idx[i]] = 1;
    ref_softmax(l, keep, n, 1.0, out);
}

/* Mirostat 1's: Zipf's exponent from the top 100, then top-k. */
static void ref_mirostat1(const float *l, int n, int n_vocab, double mu, double *out)
{
    double p[MAXV];
    int idx[MAXV], keep[MAXV] = {0};
    ref_softmax(l, NULL, n, 1.0, p);
    order_by(p, n, idx);
    double tb = 0, tt = 0;
    for (int i = 0; i < 99 && i < n - 1; i++) {
        double ti = log((i + 2.0) / (i + 1.0)), bi = log(p[idx[i]] / p[idx[i + 1]]);
        tb += ti * bi;
        tt += ti * ti;
    }
    double sh = tb / tt, e = sh - 1;
    double k = pow(e * pow(2.0, mu) / (1 - pow(n_vocab, -e)), 1 / sh);
    int ki = k < 1 ? 1 : k > n ? n : (int)k;
    for (int i = 0; i < ki; i++)
        keep[idx[i]] = 1;
    ref_softmax(l, keep, n, 1.0, out);
}

static void mirostat_steps(int version)
{
    tseed(16 + (uint64_t)version);
    enum { N = 300 };
    float l[N];
    for (int i = 0; i < N; i++) /* Zipf-like, as text is */
        l[i] = (float)(-1.1 * log(i + 1.0) + 0.3 * tuni());
    hx_sampling p = bare(6);
    p.mirostat = version;
    p.mirostat_tau = 3.0f;
    p.mirostat_eta = 0.2f;
    p.top_k = 40; /* ignored with Mirostat, as in llama.cpp */
    hx_sampler *s = mk(&p, N);
    double mu = 2 * 3.0;
    ck_assert(fabs(hx_sampler_mirostat_mu(s) - mu) < 1e-6);
    int distinct_sizes = 0, last_kept = -1;
    for (int step = 0; step < 40; step++) {
        double got[N], want[N];
        dist_of(s, l, N, got);
        if (version == 2)
            ref_mirostat2(l, N, mu, want);
        else
            ref_mirostat1(l, N, N, mu, want);
        expect_same(got, want, N, version == 2 ? "mirostat 2" : "mirostat 1");
        int kept = 0;
        for (int i = 0; i < N; i++)
            kept += want[i] > 0;
        distinct_sizes += kept != last_kept;
        last_kept = kept;
        int32_t t;
        HX_ASSERT_OK(hx_sampler_sample(s, l, &t));
        ck_assert_msg(want[t] > 0, "mirostat drew token %d, outside its filter", t);
        mu -= 0.2 * (-log2(want[t]) - 3.0);
        ck_assert_msg(fabs(hx_sampler_mirostat_mu(s) - mu) < 1e-3, "step %d: mu %g, the reference %g", step,
                      (double)hx_sampler_mirostat_mu(s), mu);
    }
    ck_assert_int_gt(distinct_sizes, 3); /* mu moved the cut */
    /* A reset starts mu again at 2 tau. */
    hx_sampler_reset(s);
    ck_assert(fabs(hx_sampler_mirostat_mu(s) - 6.0) < 1e-6);
    hx_sampler_free(s);
}

START_TEST(mirostat_2_follows_the_reference_step_by_step) { mirostat_steps(2); }
END_TEST

START_TEST(mirostat_1_follows_the_reference_step_by_step) { mirostat_steps(1); }
END_TEST

/* ---- DRY ---------------------------------------------------------------- */

/* The naive DRY: for each earlier position j of the window, the token
 * there would extend a repetition as long as the run of tokens before j
 * that equals the window's end (capped where the latest breaker is). */
static void ref_dry(const float *l, int n, const int32_t *hist, int len, int last_n, float mult, float base,
                    int allowed, const int32_t *single, int n_single, const int32_t pair[2], float *out)
{
    memcpy(out, l, sizeof *out * (size_t)n);
    int N = len < last_n ? len : last_n;
    const int32_t *w = hist + len - N;
    if (N <= allowed)
        return;
    int limit = N;
    for (int i = 0; i < N; i++) { /* from the newest back */
        int32_t t = w[N - 1 - i];
        int is_single = 0;
        for (int k = 0; k < n_single; k++)
            is_single |= single[k] == t;
        if (is_single) {
            limit = i;
            break;
        }
        if (pair && t == pair[0] && i >= 1 && w[N - i] == pair[1]) {
            limit = i - 1;
            break;
        }
    }
    if (limit < allowed)
        return;
    int best[MAXV];
    for (int i = 0; i < n; i++)
        best[i] = -1;
    for (int j = 1; j < N; j++) {
        int k = 0;
        while (k < j && w[j - 1 - k] == w[N - 1 - k])
            k++;
        if (k > limit)
            k = limit;
        if (k >= allowed && k > best[w[j]])
            best[w[j]] = k;
    }
    for (int c = 0; c < n; c++) {
        int is_single = 0;
        for (int k = 0; k < n_single; k++)
            is_single |= single[k] == c;
        if (best[c] >= 0 && !is_single)
            out[c] -= mult * powf(base, (float)(best[c] - allowed));
    }
}

START_TEST(dry_penalizes_tokens_that_extend_repetitions)
{
    tseed(17);
    enum { N = 12 };
    float l[N], want_l[N];
    rand_logits(l, N, -1, 1);
    static const int32_t single[] = {11};
    static const int32_t pair[2] = {9, 10};
    for (int c = 0; c < 60; c++) {
        int len = 5 + (int)(tuni() * 60);
        int32_t hist[80];
        /* Short alphabets make repeats; breakers now and then. */
        for (int i = 0; i < len; i++)
            hist[i] = tuni() < 0.05 ? 11 : tuni() < 0.05 ? 9 : (int32_t)(tuni() * (c % 3 == 0 ? 3 : 5));
        if (c % 4 == 1) /* a long literal repeat */
            for (int i = len / 2; i < len; i++)
                hist[i] = hist[i - len / 2];
        hx_sampling p = bare(7);
        p.dry_multiplier = 0.8f;
        p.dry_base = c % 2 ? 1.75f : 2.5f;
        p.dry_allowed_length = c % 3;
        p.dry_penalty_last_n = 40;
        static const char *const none[1] = {NULL};
        p.dry_breakers = none;
        p.n_dry_breakers = 0;
        hx_sampler *s = mk(&p, N);
        HX_ASSERT_OK(hx_sampler_dry_breaker_tokens(s, single, 1));
        HX_ASSERT_OK(hx_sampler_dry_breaker_tokens(s, pair, 2));
        for (int i = 0; i < len; i++)
            HX_ASSERT_OK(hx_sampler_accept(s, hist[i]));
        ref_dry(l, N, hist, len, 40, p.dry_multiplier, p.dry_base, p.dry_allowed_length, single, 1, pair, want_l);
        double got[N], want[N];
        dist_of(s, l, N, got);
        ref_softmax(want_l, NULL, N, 1.0, want);
        expect_same(got, want, N, "dry");
        hx_sampler_free(s);
    }
}
END_TEST

START_TEST(dry_without_a_tokenizer_needs_token_breakers)
{
    hx_sampling p = bare(8);
    p.dry_multiplier = 0.8f;
    hx_sampler *s = NULL;
    ck_assert_int_eq(hx_sampler_create(&p, 10, &s), HX_ERR_UNSUPPORTED);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(hx_last_error(), "tokenizer"), "%s", hx_last_error());
}
END_TEST

/* ---- the order, min_keep ------------------------------------------------ */

START_TEST(samplers_order_is_followed)
{
    tseed(18);
    enum { N = 50 };
    float l[N];
    rand_logits(l, N, -3, 3);
    /* top-p .6 at temperature 1 then T = .5, against T = .5 first. */
    double p1[N], want[N], got[N];
    int idx[N], keep[N];
    for (int order = 0; order < 2; order++) {
        double t_before = order ? 0.5 : 1.0;
        ref_softmax(l, NULL, N, t_before, p1);
        order_by(p1, N, idx);
        memset(keep, 0, sizeof keep);
        double cum = 0;
        for (int i = 0; i < N; i++) {
            keep[idx[i]] = 1;
            cum += p1[idx[i]];
            if (cum >= 0.6)
                break;
        }
        ref_softmax(l, keep, N, 0.5, want);
        hx_sampling p = bare(9);
        p.temperature = 0.5f;
        p.top_p = 0.6f;
        p.samplers = order ? "tp" : "pt";
        hx_sampler *s = mk(&p, N);
        dist_of(s, l, N, got);
        expect_same(got, want, N, order ? "samplers tp" : "samplers pt");
        hx_sampler_free(s);
    }
    /* Without 't' the temperature is not applied; without 'k' no top-k. */
    hx_sampling p = bare(9);
    p.temperature = 0.0f;
    p.top_k = 3;
    p.samplers = "p";
    hx_sampler *s = mk(&p, N);
    dist_of(s, l, N, got);
    ref_softmax(l, NULL, N, 1.0, want);
    expect_same(got, want, N, "samplers without t and k");
    hx_sampler_free(s);
    /* A letter given twice runs twice: top-k 10 then top-k 10 is top-k 10. */
    p.temperature = 1.0f;
    p.top_k = 10;
    p.samplers = "kk";
    s = mk(&p, N);
    dist_of(s, l, N, got);
    int kept = 0;
    for (int i = 0; i < N; i++)
        kept += got[i] > 0;
    ck_assert_int_eq(kept, 10);
    hx_sampler_free(s);
}
END_TEST

START_TEST(min_keep_holds_top_p_and_min_p_open)
{
    tseed(19);
    enum { N = 40 };
    float l[N];
    rand_logits(l, N, -2, 2);
    l[7] = 12.0f; /* one token holds nearly everything */
    for (int which = 0; which < 2; which++) {
        hx_sampling p = bare(10);
        if (which)
            p.min_p = 0.5f;
        else
            p.top_p = 0.5f;
        p.min_keep = 6;
        hx_sampler *s = mk(&p, N);
        double got[N], p0[N], want[N];
        dist_of(s, l, N, got);
        ref_softmax(l, NULL, N, 1.0, p0);
        int idx[N], keep[N] = {0};
        order_by(p0, N, idx);
        for (int i = 0; i < 6; i++)
            keep[idx[i]] = 1;
        ref_softmax(l, keep, N, 1.0, want);
        expect_same(got, want, N, which ? "min_p with min_keep" : "top_p with min_keep");
        hx_sampler_free(s);
    }
}
END_TEST

/* ---- all at once: seeds, bad parameters --------------------------------- */

START_TEST(every_sampler_is_deterministic_with_a_seed)
{
    tseed(20);
    enum { N = 200, STEPS = 200 };
    float l[N];
    for (int v = 0; v < 3; v++) {
        hx_sampling p = hx_sampling_default();
        p.seed = 1234;
        p.repeat_penalty = 1.1f;
        p.typical_p = 0.9f;
        p.xtc_probability = 0.3f;
        p.top_n_sigma = 2.0f;
        p.dynatemp_range = 0.3f;
        p.dry_multiplier = 0.5f;
        static const char *const none[1] = {NULL};
        p.dry_breakers = none;
        p.n_dry_breakers = 0;
        p.mirostat = v;
        hx_sampler *a = mk(&p, N), *b = mk(&p, N);
        for (int i = 0; i < STEPS; i++) {
            rand_logits(l, N, -4, 4);
            int32_t x, y;
            HX_ASSERT_OK(hx_sampler_sample(a, l, &x));
            HX_ASSERT_OK(hx_sampler_sample(b, l, &y));
            ck_assert_int_eq(x, y);
            HX_ASSERT_OK(hx_sampler_accept(a, x));
            HX_ASSERT_OK(hx_sampler_accept(b, y));
        }
        hx_sampler_free(a);
        hx_sampler_free(b);
    }
}
END_TEST

/* hx_sampler_last_probs after a draw: the distribution the draw came
 * from (hx_sampler_distribution's from a twin sampler), most likely first,
 * cut at cap, the drawn token's own among them; after Mirostat its filter's
 * survivors; greedy: the one token at 1. */
START_TEST(last_probs_are_the_drawn_distribution)
{
    enum { N = 200 };
    float l[N], probs[N], p;
    int32_t ids[N], tok;
    double want[N], got[N];
    rand_logits(l, N, -4.0f, 4.0f);
    for (int mode = 0; mode < 4; mode++) {
        hx_sampling sp = bare(7);
        if (mode == 0)
            sp.top_k = 12;
        else if (mode == 1)
            sp.top_p = 0.7f, sp.temperature = 0.8f;
        else if (mode == 2)
            sp.mirostat = 2;
        else
            sp.temperature = 0.0f;
        hx_sampler *a = mk(&sp, N), *b = mk(&sp, N);
        HX_ASSERT_OK(hx_sampler_sample(a, l, &tok));
        const int n = hx_sampler_last_probs(a, tok, ids, probs, N, &p);
        dist_of(b, l, N, want);
        ck_assert_msg(n >= 1 && p > 0.0f, "mode %d: %d candidates, drawn %g", mode, n, p);
        for (int i = 0; i < N; i++)
            got[i] = 0.0;
        for (int k = 0; k < n; k++) {
            got[ids[k]] = probs[k];
            ck_assert_msg(k == 0 || probs[k] <= probs[k - 1], "mode %d: not most likely first at %d", mode, k);
        }
        expect_same(got, want, N, "last_probs");
        ck_assert_float_eq(p, (float)got[tok]);
        if (mode == 3)
            ck_assert_msg(n == 1 && probs[0] == 1.0f && ids[0] == tok, "greedy: %d, %g", n, probs[0]);
        /* cut at cap: the first of the whole list */
        int32_t ids2[3];
        float probs2[3];
        HX_ASSERT_OK(hx_sampler_sample(b, l, &tok));
        const int n2 = hx_sampler_last_probs(b, tok, ids2, probs2, 3, &p);
        ck_assert_int_eq(n2, n < 3 ? n : 3);
        for (int k = 0; k < n2; k++)
            ck_assert(ids2[k] == ids[k] && probs2[k] == probs[k]);
        hx_sampler_free(a);
        hx_sampler_free(b);
    }
}
END_TEST

START_TEST(bad_sampler_parameters_are_refused)
{
    struct { const char *field; void (*set)(hx_sampling *); } cases[] = {
        {"typical_p", NULL}, {"mirostat", NULL}, {"mirostat_tau", NULL}, {"dry_multiplier", NULL},
        {"dry_base", NULL}, {"dry_allowed_length", NULL}, {"xtc_probability", NULL}, {"top_n_sigma", NULL},
        {"dynatemp_range", NULL}, {"min_keep", NULL}, {"samplers", NULL}, {"logit_bias", NULL},
    };
    hx_logit_bias out_of_vocab = {10, 1.0f}, nan_bias = {1, NAN};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hx_sampling p = hx_sampling_default();
        static const char *const none[1] = {NULL};
        switch (i) {
        case 0: p.typical_p = 1.5f; break;
        case 1: p.mirostat = 3; break;
        case 2: p.mirostat = 2; p.mirostat_tau = 0.0f; break;
        case 3: p.dry_multiplier = -1.0f; break;
        case 4: p.dry_multiplier = 1.0f; p.dry_base = 0.5f; p.dry_breakers = none; break;
        case 5: p.dry_multiplier = 1.0f; p.dry_allowed_length = -1; p.dry_breakers = none; break;
        case 6: p.xtc_probability = 2.0f; break;
        case 7: p.top_n_sigma = INFINITY; break;
        case 8: p.dynatemp_range = -0.5f; break;
        case 9: p.min_keep = -2; break;
        case 10: p.samplers = "kpz"; break;
        case 11: p.logit_bias = i % 2 ? &out_of_vocab : &nan_bias; p.n_logit_bias = 1; break;
        }
        hx_sampler *s = NULL;
        ck_assert_int_eq(hx_sampler_create(&p, 10, &s), HX_ERR_INVALID_ARG);
        ck_assert_ptr_null(s);
        ck_assert_msg(strstr(hx_last_error(), cases[i].field), "%s: %s", cases[i].field, hx_last_error());
    }
    hx_sampling p = hx_sampling_default();
    p.logit_bias = &nan_bias;
    p.n_logit_bias = 1;
    hx_sampler *s = NULL;
    ck_assert_int_eq(hx_sampler_create(&p, 10, &s), HX_ERR_INVALID_ARG);
}
END_TEST

Suite *suite_samplers(void)
{
    Suite *s = suite_create("samplers");
    TCase *tc = tcase_create("reference");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, logit_bias_adds_to_the_logits);
    tcase_add_test(tc, typical_keeps_the_tokens_nearest_the_entropy);
    tcase_add_test(tc, top_n_sigma_keeps_logits_near_the_max);
    tcase_add_test(tc, xtc_removes_the_top_choices_but_the_last);
    tcase_add_test(tc, dynatemp_maps_entropy_to_temperature);
    tcase_add_test(tc, mirostat_2_follows_the_reference_step_by_step);
    tcase_add_test(tc, mirostat_1_follows_the_reference_step_by_step);
    tcase_add_test(tc, dry_penalizes_tokens_that_extend_repetitions);
    tcase_add_test(tc, dry_without_a_tokenizer_needs_token_breakers);
    tcase_add_test(tc, samplers_order_is_followed);
    tcase_add_test(tc, min_keep_holds_top_p_and_min_p_open);
    tcase_add_test(tc, every_sampler_is_deterministic_with_a_seed);
    tcase_add_test(tc, bad_sampler_parameters_are_refused);
    tcase_add_test(tc, last_probs_are_the_drawn_distribution);
    suite_add_tcase(s, tc);
    return s;
}
