/* Suite quant_budget: the weighted error a type costs (quantize/quant_rows.h)
 * against a direct computation, and the budget solver (quantize/quant_budget.h)
 * against the budget, against uniform types, and against the exhaustive
 * optimum of small instances. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_cpu/quant.h"
#include "quantize/quant_budget.h"
#include "quantize/quant_rows.h"
#include "tests/hx_test.h"

static uint64_t rng = 88172645463325252ull;
static double uniform01(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static float *random_matrix(uint64_t rows, uint64_t ne0, double scale)
{
    float *x = malloc(rows * ne0 * sizeof *x);
    for (uint64_t i = 0; i < rows * ne0; i++) /* heavy-ish tails, as weights have */
        x[i] = (float)(scale * (uniform01() - 0.5) * (uniform01() < 0.05 ? 8.0 : 1.0));
    return x;
}

/* sum over the listed rows of w[j] * (x - dequantize(quantize(x)))^2,
 * quantizing as llama.cpp does (weighted where the type takes weights). */
static double direct_error(hx_type t, const float *x, uint64_t ne0, const uint64_t *rows, size_t n, const float *w)
{
    const hx_quant_ops *q = hx_quant_ops_get(t);
    uint8_t *y = malloc(hx_type_row_size(t, ne0));
    float *back = malloc(ne0 * sizeof *back);
    double sum = 0;
    for (size_t k = 0; k < n; k++) {
        const float *r = x + rows[k] * ne0;
        if (w && q->quantize_weighted)
            q->quantize_weighted(r, y, (int64_t)ne0, w);
        else
            q->quantize_row(r, y, (int64_t)ne0);
        q->dequantize_row(y, back, (int64_t)ne0);
        for (uint64_t j = 0; j < ne0; j++)
            sum += (w ? w[j] : 1.0) * ((double)r[j] - back[j]) * ((double)r[j] - back[j]);
    }
    free(y);
    free(back);
    return sum;
}

START_TEST(test_error_direct)
{
    enum { ROWS = 37, NE0 = 512 };
    float *x = random_matrix(ROWS, NE0, 0.2), w[NE0];
    for (int j = 0; j < NE0; j++)
        w[j] = (float)(0.1 + 3.0 * uniform01());
    hx_type types[HX_BUDGET_MAX_OPTIONS];
    size_t nt = hx_quant_budget_candidates(NE0, 0, types, HX_BUDGET_MAX_OPTIONS);
    ck_assert_uint_ge(nt, 5); /* F16, Q8_0, Q6_K, Q4_K, Q4_0 at least */
    uint64_t all[ROWS], some[10];
    for (int r = 0; r < ROWS; r++)
        all[r] = (uint64_t)r;
    for (int k = 0; k < 10; k++)
        some[k] = (uint64_t)k * ROWS / 10;
    double prev_unweighted = -1;
    for (size_t i = 0; i < nt; i++) {
        for (int weighted = 0; weighted < 2; weighted++) {
            const float *wt = weighted ? w : NULL;
            hx_quant_matrix m = {x, ROWS, NE0, ROWS, wt};
            double got, want = direct_error(types[i], x, NE0, all, ROWS, wt);
            HX_ASSERT_OK(hx_quant_weighted_error(types[i], &m, 0, &got));
            ck_assert_msg(fabs(got - want) <= 1e-9 * want && want > 0, "%s: %g, direct %g", hx_type_name(types[i]),
                          got, want);
            /* ten evenly spaced rows, scaled to all 37 */
            want = direct_error(types[i], x, NE0, some, 10, wt) * ROWS / 10.0;
            HX_ASSERT_OK(hx_quant_weighted_error(types[i], &m, 10, &got));
            ck_assert_msg(fabs(got - want) <= 1e-9 * want, "%s sampled: %g, direct %g", hx_type_name(types[i]), got,
                          want);
            if (!weighted) {
                /* candidates come largest first: fewer bits, more error */
                ck_assert_msg(got >= prev_unweighted * 0.5, "%s", hx_type_name(types[i]));
                prev_unweighted = got;
            }
        }
    }
    /* weights in an expert's slice: rows 0..9 use w, rows 10.. use w + NE0 */
    float *w2 = malloc(2 * NE0 * sizeof *w2);
    for (int j = 0; j < 2 * NE0; j++)
        w2[j] = j < NE0 ? 1.0f : 4.0f;
    hx_quant_matrix m2 = {x, 20, NE0, 10, w2};
    double got, a = direct_error(HX_TYPE_Q8_0, x, NE0, all, 10, w2),
                b = direct_error(HX_TYPE_Q8_0, x, NE0, all + 10, 10, w2 + NE0);
    HX_ASSERT_OK(hx_quant_weighted_error(HX_TYPE_Q8_0, &m2, 0, &got));
    ck_assert_msg(fabs(got - (a + b)) <= 1e-9 * got, "experts: %g, direct %g", got, a + b);
    free(w2);
    /* bad input */
    hx_quant_matrix m = {x, ROWS, 100, ROWS, NULL};
    ck_assert_int_eq(hx_quant_weighted_error(HX_TYPE_Q4_K, &m, 0, &got), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_quant_weighted_error(HX_TYPE_IQ2_XXS, &m, 0, &got), HX_ERR_UNSUPPORTED);
    ck_assert_int_eq(hx_quant_weighted_error(HX_TYPE_Q8_0, NULL, 0, &got), HX_ERR_INVALID_ARG);
    free(x);
}
END_TEST

static double total_error(const hx_budget_tensor *t, size_t n, uint64_t *bytes)
{
    double e = 0;
    *bytes = 0;
    for (size_t i = 0; i < n; i++) {
        e += t[i].opt[t[i].chosen].error;
        *bytes += t[i].opt[t[i].chosen].bytes;
    }
    return e;
}

/* A synthetic model: matrices of different shapes and scales, each
 * candidate's error measured, as hetero-quantize measures it. */
START_TEST(test_budget_synthetic_model)
{
    enum { N = 12 };
    hx_budget_tensor t[N];
    uint64_t smallest = 0, largest = 0, elements = 0;
    double least_error = 0;
    for (int i = 0; i < N; i++) {
        uint64_t rows = 16 + 16 * (uint64_t)(i % 4), ne0 = i % 3 == 0 ? 768 : 512;
        float *x = random_matrix(rows, ne0, 0.02 * (1 + i % 5) * (i == 7 ? 10 : 1));
        hx_type types[HX_BUDGET_MAX_OPTIONS];
        t[i].n = hx_quant_budget_candidates(ne0, 0, types, HX_BUDGET_MAX_OPTIONS);
        hx_quant_matrix m = {x, rows, ne0, rows, NULL};
        uint64_t lo = UINT64_MAX, hi = 0;
        for (size_t k = 0; k < t[i].n; k++) {
            t[i].opt[k].type = types[k];
            t[i].opt[k].bytes = rows * hx_type_row_size(types[k], ne0);
            HX_ASSERT_OK(hx_quant_weighted_error(types[k], &m, 0, &t[i].opt[k].error));
            lo = t[i].opt[k].bytes < lo ? t[i].opt[k].bytes : lo;
            hi = t[i].opt[k].bytes > hi ? t[i].opt[k].bytes : hi;
        }
        double least = INFINITY;
        for (size_t k = 0; k < t[i].n; k++)
            least = fmin(least, t[i].opt[k].error);
        least_error += least;
        smallest += lo;
        largest += hi;
        elements += rows * ne0;
        free(x);
    }
    for (double bpw = 4.0; bpw <= 16.5; bpw += 0.25) {
        uint64_t budget = (uint64_t)(bpw * (double)elements / 8);
        if (budget < smallest) {
            ck_assert_int_eq(hx_quant_budget_solve(t, N, budget), HX_ERR_RANGE);
            continue;
        }
        HX_ASSERT_OK(hx_quant_budget_solve(t, N, budget));
        uint64_t used;
        double err = total_error(t, N, &used);
        ck_assert_msg(used <= budget, "%.2f bpw: %llu > %llu bytes", bpw, (unsigned long long)used,
                      (unsigned long long)budget);
        /* no worse than any one type for every matrix that fits */
        for (size_t k = 0; k < t[0].n; k++) {
            uint64_t ub = 0;
            double ue = 0;
            int all = 1;
            for (int i = 0; i < N; i++) {
                size_t j = 0;
                while (j < t[i].n && t[i].opt[j].type != t[0].opt[k].type)
                    j++;
                if (j == t[i].n) {
                    all = 0;
                    break;
                }
                ub += t[i].opt[j].bytes;
                ue += t[i].opt[j].error;
            }
            if (all && ub <= budget)
                ck_assert_msg(err <= ue, "%.2f bpw: %g worse than all %s (%g)", bpw, err,
                              hx_type_name(t[0].opt[k].type), ue);
        }
        if (budget >= largest) /* room for every matrix's least error */
            ck_assert_msg(fabs(err - least_error) <= 1e-12 * least_error, "%.2f bpw: %g, least %g", bpw, err,
                          least_error);
    }
}
END_TEST

/* Small random instances against the exhaustive optimum: the greedy walk
 * up the hulls is within one step's gain of the linear relaxation, which is
 * at least as good as the optimum: err <= opt + the largest single step. */
START_TEST(test_budget_exhaustive)
{
    enum { N = 5, K = 4 };
    for (int trial = 0; trial < 300; trial++) {
        hx_budget_tensor t[N];
        double max_gain = 0;
        uint64_t smallest = 0, largest = 0;
        for (int i = 0; i < N; i++) {
            t[i].n = K;
            uint64_t lo = UINT64_MAX, hi = 0;
            for (int k = 0; k < K; k++) {
                t[i].opt[k] = (hx_budget_option){(hx_type)k, 10 + (uint64_t)(uniform01() * 90),
                                                  uniform01() * 100.0};
                lo = t[i].opt[k].bytes < lo ? t[i].opt[k].bytes : lo;
                hi = t[i].opt[k].bytes > hi ? t[i].opt[k].bytes : hi;
            }
            for (int a = 0; a < K; a++)
                for (int b = 0; b < K; b++)
                    if (t[i].opt[b].error < t[i].opt[a].error && t[i].opt[a].error - t[i].opt[b].error > max_gain)
                        max_gain = t[i].opt[a].error - t[i].opt[b].error;
            smallest += lo;
            largest += hi;
        }
        uint64_t budget = smallest + (uint64_t)(uniform01() * (double)(largest - smallest));
        double opt = INFINITY;
        for (int code = 0; code < 1024; code++) { /* K^N = 4^5 */
            uint64_t b = 0;
            double e = 0;
            for (int i = 0, c = code; i < N; i++, c /= K) {
                b += t[i].opt[c % K].bytes;
                e += t[i].opt[c % K].error;
            }
            if (b <= budget && e < opt)
                opt = e;
        }
        HX_ASSERT_OK(hx_quant_budget_solve(t, N, budget));
        uint64_t used;
        double err = total_error(t, N, &used);
        ck_assert_uint_le(used, budget);
        ck_assert_msg(err <= opt + max_gain + 1e-9, "trial %d: %g, optimum %g", trial, err, opt);
    }
    /* bad input */
    hx_budget_tensor none = {0};
    ck_assert_int_eq(hx_quant_budget_solve(&none, 1, 100), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_quant_budget_solve(NULL, 1, 100), HX_ERR_INVALID_ARG);
    HX_ASSERT_OK(hx_quant_budget_solve(NULL, 0, 0));
}
END_TEST

Suite *suite_quant_budget(void)
{
    Suite *s = suite_create("quant_budget");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_error_direct);
    tcase_add_test(tc, test_budget_synthetic_model);
    tcase_add_test(tc, test_budget_exhaustive);
    suite_add_tcase(s, tc);
    return s;
}
