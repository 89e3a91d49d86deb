/* Mixed precision by budget: a type per matrix that minimises the total
 * importance-weighted squared error under a size budget.
 *
 * Each matrix has options (a type, its bytes, its measured error); the
 * choice is a multiple-choice knapsack.  The solver takes each matrix's
 * lower convex hull of (bytes, error) — an option above the segment joining
 * two others is never worth its bytes at any price per byte — starts every
 * matrix at its smallest option and repeatedly takes, over all matrices,
 * the step up its hull that buys the most error reduction per byte and
 * still fits.  That is the Lagrangian relaxation's solution (every
 * matrix's step is taken while its slope beats the budget's shadow price)
 * walked from the cheapest end; it is optimal at every budget the hull
 * steps add up to exactly, and within one step of it in between.  Last,
 * each uniform assignment (one type for every matrix) that fits is
 * compared, and the better of the two kept, so the answer is never worse
 * than a single type of the same size or smaller. */
#ifndef HX_QUANTIZE_QUANT_BUDGET_H
#define HX_QUANTIZE_QUANT_BUDGET_H

#include <stddef.h>
#include <stdint.h>

#include "hetero.h"
#include "ops/types.h"

#define HX_BUDGET_MAX_OPTIONS 16

typedef struct {
    hx_type type;
    uint64_t bytes;
    double error;
} hx_budget_option;

typedef struct {
    size_t n;                                   /* options, any order */
    hx_budget_option opt[HX_BUDGET_MAX_OPTIONS];
    size_t chosen;                              /* index into opt, set by the solver */
} hx_budget_tensor;

/* The types hetero can write (quantize and read back) for rows of ne0
 * elements, from the largest to the smallest: F16, Q8_0, Q6_K, Q5_K, Q5_1,
 * Q5_0, Q4_K, Q4_1, Q4_0, IQ4_NL, IQ4_XS, Q3_K, Q2_K, those present;
 * only those whose bit (1 << type) is set in `only` unless it is 0. */
size_t hx_quant_budget_candidates(uint64_t ne0, uint64_t only, hx_type *types, size_t cap);

/* Chooses t[i].chosen so that the sum of the chosen bytes is at most
 * `budget` and the sum of errors is as small as the method above finds.
 * HX_ERR_RANGE, naming the smallest possible size, when even every
 * smallest option together exceeds the budget. */
hx_status hx_quant_budget_solve(hx_budget_tensor *t, size_t n, uint64_t budget);

#endif
