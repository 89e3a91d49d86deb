/* Mixed precision by budget over a file's matrices (quantize_plan.h):
 * measures each candidate type's weighted error on each free matrix and
 * hands the table to the solver (quant_budget.h). */
#include <stdlib.h>
#include <string.h>

#include "quantize/quant_budget.h"
#include "quantize/quant_rows.h"
#include "quantize/quantize_plan.h"
#include "runtime/error.h"

/* Rows measured per matrix and candidate: evenly spaced, the sum scaled to
 * the whole matrix.  Enough for a stable ranking of types (the error of a
 * row varies little along a matrix) at a fraction of quantizing it all
 * once per candidate. */
#define SAMPLE_ROWS 256

static hx_status measure(const hx_quantize_plan *p, size_t i, hx_budget_tensor *bt)
{
    const hx_gguf_tensor *t = hx_gguf_tensor_at(p->g, i);
    hx_type types[HX_BUDGET_MAX_OPTIONS];
    bt->n = 0;
    size_t nt = hx_quant_budget_candidates(t->ne[0], p->budget_types, types, HX_BUDGET_MAX_OPTIONS);
    if (nt == 0)
        return hx_error(HX_ERR_UNSUPPORTED, "tensor '%s': no type hetero writes takes rows of %llu", t->name,
                        (unsigned long long)t->ne[0]);
    const float *w = NULL, *x = NULL;
    float *owned = NULL;
    hx_status s = hx_quantize_weights(p, t, &w);
    if (s == HX_OK)
        s = hx_quantize_floats(t, &x, &owned);
    hx_quant_matrix m = {x, hx_quantize_tensor_rows(t), t->ne[0], t->ne[1], w};
    for (size_t k = 0; s == HX_OK && k < nt; k++) {
        hx_budget_option *op = &bt->opt[bt->n++];
        op->type = types[k];
        op->bytes = m.rows * hx_type_row_size(types[k], t->ne[0]);
        s = hx_quant_weighted_error(types[k], &m, SAMPLE_ROWS, &op->error);
    }
    free(owned);
    return s == HX_OK ? HX_OK : hx_error_context(s, "measuring '%s'", t->name);
}

/* hx_quantize_options.budget_types ("q4_K,q5_K,q6_K") as a set of types. */
static hx_status parse_types(const char *list, uint64_t *out)
{
    *out = 0;
    for (const char *s = list; s && *s;) {
        size_t n = strcspn(s, ",");
        char name[16];
        hx_type t;
        if (n == 0 || n >= sizeof name)
            return hx_error(HX_ERR_INVALID_ARG, "budget types '%s': an empty or overlong name", list);
        memcpy(name, s, n);
        name[n] = '\0';
        if (!hx_type_from_name(name, &t) || (unsigned)t >= 64)
            return hx_error(HX_ERR_INVALID_ARG, "budget types '%s': unknown type '%s'", list, name);
        *out |= UINT64_C(1) << t;
        s += n + (s[n] == ',');
    }
    return HX_OK;
}

hx_status hx_quantize_budget_plan(hx_quantize_plan *p, uint64_t budget)
{
    hx_status ps = parse_types(p->o->budget_types, &p->budget_types);
    if (ps)
        return ps;
    hx_budget_tensor *bt = calloc(p->n ? p->n : 1, sizeof *bt);
    size_t *idx = calloc(p->n ? p->n : 1, sizeof *idx);
    p->error = calloc(p->n ? p->n : 1, sizeof *p->error);
    if (!bt || !idx || !p->error) {
        free(bt);
        free(idx);
        return hx_error(HX_ERR_NO_MEMORY, "budget table");
    }
    /* What the budget cannot move (vectors, and matrices whose type an
     * option names) at the size they will have, and the least the others
     * can take: a budget below both is refused before measuring. */
    uint64_t fixed = 0, least = 0;
    size_t nb = 0;
    for (size_t i = 0; i < p->n; i++) {
        const hx_recipe_tensor *t = &p->rt[i];
        uint64_t rows = hx_quantize_tensor_rows(hx_gguf_tensor_at(p->g, i));
        if (hx_quant_recipe_quantizable(&p->rp, t) && !hx_quant_recipe_fixed(&p->rp, t)) {
            hx_type types[HX_BUDGET_MAX_OPTIONS];
            size_t nt = hx_quant_budget_candidates(t->ne[0], p->budget_types, types, HX_BUDGET_MAX_OPTIONS);
            uint64_t min = UINT64_MAX;
            for (size_t k = 0; k < nt; k++)
                if (rows * hx_type_row_size(types[k], t->ne[0]) < min)
                    min = rows * hx_type_row_size(types[k], t->ne[0]);
            least += nt ? min : 0;
            idx[nb++] = i;
        } else {
            fixed += rows * hx_type_row_size(p->to[i], t->ne[0]);
        }
    }
    hx_status s = HX_OK;
    if (fixed + least > budget)
        s = hx_error(HX_ERR_RANGE,
                     "a budget of %llu bytes is below the smallest these types make: %llu bytes (%llu of them in "
                     "tensors the budget cannot change)",
                     (unsigned long long)budget, (unsigned long long)(fixed + least), (unsigned long long)fixed);
    for (size_t k = 0; s == HX_OK && k < nb; k++) {
        if (p->o->progress)
            p->o->progress(p->o->user, "measuring", k, nb, hx_gguf_tensor_at(p->g, idx[k])->name);
        s = measure(p, idx[k], &bt[k]);
    }
    if (s == HX_OK && p->o->progress)
        p->o->progress(p->o->user, "measuring", nb, nb, NULL);
    if (s == HX_OK)
        s = hx_quant_budget_solve(bt, nb, budget - fixed);
    for (size_t k = 0; s == HX_OK && k < nb; k++) {
        p->to[idx[k]] = bt[k].opt[bt[k].chosen].type;
        p->error[idx[k]] = bt[k].opt[bt[k].chosen].error;
    }
    free(bt);
    free(idx);
    return s;
}
