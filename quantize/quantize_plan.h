/* The plan of one quantization: each tensor of the input file and the type
 * it gets, shared by the driver (quantize_file.c), the option parser
 * (quantize_options.c) and the budget mode (quantize_budget_file.c). */
#ifndef HX_QUANTIZE_QUANTIZE_PLAN_H
#define HX_QUANTIZE_QUANTIZE_PLAN_H

#include "hetero.h"
#include "gguf/gguf.h"
#include "quantize/quant_recipe.h"

typedef struct {
    const hx_gguf *g;
    const hx_quantize_options *o;
    hx_recipe_params rp;         /* the recipe (or base) and the overrides, compiled */
    hx_recipe_override *ov;      /* owned: rp.overrides */
    size_t n;                    /* tensors */
    hx_recipe_tensor *rt;        /* their names, shapes and types */
    hx_type *to;                 /* the type each gets */
    double *error;               /* budget mode: each matrix's measured error, else NULL */
    uint64_t budget_types;       /* budget mode: bit t = type t may be chosen; 0: any */
    int n_fallback;
    /* Importance weights: the option's callback, or an imatrix file's. */
    const float *(*importance)(void *user, const char *tensor, int64_t *n);
    void *importance_user;
    void *imatrix;               /* owned: the file's table, if one was read */
} hx_quantize_plan;

/* Fills p->rp from o (recipe, pure, leave_output, output and token
 * embedding types, --tensor-type patterns); HX_ERR_INVALID_ARG naming what
 * is wrong.  hx_quantize_plan_free releases what it compiled. */
hx_status hx_quantize_options_parse(const hx_quantize_options *o, hx_quantize_plan *p);
void hx_quantize_plan_free(hx_quantize_plan *p);

/* Reads the option's imatrix file into p->imatrix and points
 * p->importance at it (quantize_imatrix.c); frees it. */
hx_status hx_quantize_imatrix_open(hx_quantize_plan *p, const char *path);
void hx_quantize_imatrix_close(hx_quantize_plan *p);

/* The importance weights of tensor `t` (NULL when none or the option is
 * unset), checked as llama.cpp checks them: one per column (per expert),
 * finite; a vector of another length is an error, except for the token
 * embeddings, which go without. */
hx_status hx_quantize_weights(const hx_quantize_plan *p, const hx_gguf_tensor *t, const float **w);

/* Rows of a tensor (all its dimensions past the first). */
uint64_t hx_quantize_tensor_rows(const hx_gguf_tensor *t);

/* The tensor's rows as floats: its data when F32, else *owned (free it). */
hx_status hx_quantize_floats(const hx_gguf_tensor *t, const float **x, float **owned);

/* Budget mode: sets p->to for every quantizable matrix (and p->error),
 * measuring each candidate type's weighted error. */
hx_status hx_quantize_budget_plan(hx_quantize_plan *p, uint64_t budget);

#endif
