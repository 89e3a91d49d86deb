/* Mixed precision by budget: candidates and the solver (quant_budget.h). */
#include "quantize/quant_budget.h"

#include <stdlib.h>
#include <string.h>

#include "kernels_cpu/quant.h"
#include "runtime/error.h"

size_t hx_quant_budget_candidates(uint64_t ne0, uint64_t only, hx_type *types, size_t cap)
{
    static const hx_type order[] = {HX_TYPE_F16,  HX_TYPE_Q8_0, HX_TYPE_Q6_K,   HX_TYPE_Q5_K,   HX_TYPE_Q5_1,
                                    HX_TYPE_Q5_0, HX_TYPE_Q4_K, HX_TYPE_Q4_1,   HX_TYPE_Q4_0,   HX_TYPE_IQ4_NL,
                                    HX_TYPE_IQ4_XS, HX_TYPE_Q3_K, HX_TYPE_Q2_K};
    size_t n = 0;
    for (size_t i = 0; i < sizeof order / sizeof *order && n < cap; i++) {
        const hx_quant_ops *q = hx_quant_ops_get(order[i]);
        if (only && !(only >> order[i] & 1))
            continue;
        if (q && q->quantize_row && q->dequantize_row && q->vec_dot && hx_type_row_size(order[i], ne0))
            types[n++] = order[i];
    }
    return n;
}

/* Indices of t's lower convex hull of (bytes, error), cheapest first:
 * bytes rise and error falls along it, each step buying less per byte. */
static size_t hull(const hx_budget_tensor *t, size_t *h)
{
    size_t idx[HX_BUDGET_MAX_OPTIONS], n = t->n;
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    for (size_t i = 1; i < n; i++) /* by bytes, then error */
        for (size_t j = i; j > 0; j--) {
            const hx_budget_option *a = &t->opt[idx[j - 1]], *b = &t->opt[idx[j]];
            if (a->bytes < b->bytes || (a->bytes == b->bytes && a->error <= b->error))
                break;
            size_t x = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = x;
        }
    size_t m = 0;
    for (size_t k = 0; k < n; k++) {
        const hx_budget_option *p = &t->opt[idx[k]];
        if (m && p->error >= t->opt[h[m - 1]].error)
            continue; /* no better than a cheaper one */
        while (m >= 2) {
            /* drop h[m-1] if it lies on or above the segment h[m-2] -> p */
            const hx_budget_option *a = &t->opt[h[m - 2]], *b = &t->opt[h[m - 1]];
            double lhs = (a->error - b->error) * (double)(p->bytes - a->bytes);
            double rhs = (a->error - p->error) * (double)(b->bytes - a->bytes);
            if (lhs > rhs)
                break;
            m--;
        }
        h[m++] = idx[k];
    }
    return m;
}

static double total_error(const hx_budget_tensor *t, size_t n, const size_t *pick)
{
    double e = 0;
    for (size_t i = 0; i < n; i++)
        e += t[i].opt[pick[i]].error;
    return e;
}

/* The uniform assignments: the same type for every tensor, where every
 * tensor has it; the best one that fits replaces `pick` if it beats it. */
static void try_uniform(const hx_budget_tensor *t, size_t n, uint64_t budget, size_t *pick, size_t *tmp)
{
    if (n == 0)
        return;
    for (size_t k = 0; k < t[0].n; k++) {
        hx_type ty = t[0].opt[k].type;
        uint64_t bytes = 0;
        size_t i = 0;
        for (; i < n; i++) {
            size_t j = 0;
            while (j < t[i].n && t[i].opt[j].type != ty)
                j++;
            if (j == t[i].n)
                break;
            tmp[i] = j;
            bytes += t[i].opt[j].bytes;
        }
        if (i == n && bytes <= budget && total_error(t, n, tmp) < total_error(t, n, pick))
            memcpy(pick, tmp, n * sizeof *pick);
    }
}

hx_status hx_quant_budget_solve(hx_budget_tensor *t, size_t n, uint64_t budget)
{
    if (!t && n)
        return hx_error(HX_ERR_INVALID_ARG, "hx_quant_budget_solve: NULL tensors");
    size_t *hulls = malloc((n ? n : 1) * (HX_BUDGET_MAX_OPTIONS + 4) * sizeof *hulls);
    if (!hulls)
        return hx_error(HX_ERR_NO_MEMORY, "budget solver");
    size_t *len = hulls + n * HX_BUDGET_MAX_OPTIONS, *at = len + n, *pick = at + n, *tmp = pick + n;
    uint64_t used = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i].n == 0 || t[i].n > HX_BUDGET_MAX_OPTIONS) {
            free(hulls);
            return hx_error(HX_ERR_INVALID_ARG, "budget solver: tensor %zu has %zu options", i, t[i].n);
        }
        len[i] = hull(&t[i], hulls + i * HX_BUDGET_MAX_OPTIONS);
        at[i] = 0;
        used += t[i].opt[hulls[i * HX_BUDGET_MAX_OPTIONS]].bytes;
    }
    if (used > budget) {
        free(hulls);
        return hx_error(HX_ERR_RANGE, "a budget of %llu bytes is below the smallest these types make, %llu bytes",
                        (unsigned long long)budget, (unsigned long long)used);
    }
    for (;;) {
        size_t best = n;
        double best_slope = 0;
        for (size_t i = 0; i < n; i++) {
            if (at[i] + 1 >= len[i])
                continue;
            const size_t *h = hulls + i * HX_BUDGET_MAX_OPTIONS;
            const hx_budget_option *a = &t[i].opt[h[at[i]]], *b = &t[i].opt[h[at[i] + 1]];
            if (b->bytes - a->bytes > budget - used) {
                len[i] = at[i] + 1; /* later steps cost more still: this tensor is done */
                continue;
            }
            double slope = (a->error - b->error) / (double)(b->bytes - a->bytes);
            if (best == n || slope > best_slope) {
                best = i;
                best_slope = slope;
            }
        }
        if (best == n)
            break;
        const size_t *h = hulls + best * HX_BUDGET_MAX_OPTIONS;
        used += t[best].opt[h[at[best] + 1]].bytes - t[best].opt[h[at[best]]].bytes;
        at[best]++;
    }
    for (size_t i = 0; i < n; i++)
        pick[i] = hulls[i * HX_BUDGET_MAX_OPTIONS + at[i]];
    try_uniform(t, n, budget, pick, tmp);
    for (size_t i = 0; i < n; i++)
        t[i].chosen = pick[i];
    free(hulls);
    return HX_OK;
}
