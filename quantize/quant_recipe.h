/* llama-quantize's recipes: which type each tensor of a model gets.
 *
 * A pure function of the tensor list (names, shapes, types), the model's
 * layer and head counts and the options; it reads no data.  The rules are
 * those of llama.cpp's llama_tensor_get_type for the recipes below, for
 * dense models (no experts, not Falcon): attn_v, ffn_down, attn_output and
 * output by recipe, layer position and grouped-query attention; fallbacks
 * for rows that are not whole 256-element blocks; --pure, --tensor-type,
 * --output-tensor-type, --token-embedding-type, --leave-output-tensor.
 * tests/fixtures/quant-recipes holds llama-quantize's own choices. */
#ifndef HX_QUANTIZE_QUANT_RECIPE_H
#define HX_QUANTIZE_QUANT_RECIPE_H

#include <regex.h>
#include <stddef.h>
#include <stdint.h>

#include "hetero.h"
#include "ops/types.h"

/* llama.cpp's file types (LLAMA_FTYPE_*), as general.file_type holds them. */
typedef enum {
    HX_FTYPE_ALL_F32 = 0,
    HX_FTYPE_F16 = 1,
    HX_FTYPE_Q4_0 = 2,
    HX_FTYPE_Q4_1 = 3,
    HX_FTYPE_Q8_0 = 7,
    HX_FTYPE_Q5_0 = 8,
    HX_FTYPE_Q5_1 = 9,
    HX_FTYPE_Q2_K = 10,
    HX_FTYPE_Q3_K_S = 11,
    HX_FTYPE_Q3_K_M = 12,
    HX_FTYPE_Q3_K_L = 13,
    HX_FTYPE_Q4_K_S = 14,
    HX_FTYPE_Q4_K_M = 15,
    HX_FTYPE_Q5_K_S = 16,
    HX_FTYPE_Q5_K_M = 17,
    HX_FTYPE_Q6_K = 18,
    HX_FTYPE_IQ4_NL = 25,
    HX_FTYPE_IQ4_XS = 30,
    HX_FTYPE_BF16 = 32,
} hx_ftype;

/* The version of the block layouts (GGML_QNT_VERSION). */
#define HX_QUANTIZATION_VERSION 2

typedef struct {
    const char *name; /* as llama-quantize takes it: "Q4_K_M" */
    hx_ftype ftype;
    hx_type base;     /* the type most matrices get */
} hx_quant_recipe;

/* The recipe named `name` (case-insensitive; "Q3_K", "Q4_K", "Q5_K" are
 * llama-quantize's aliases of the _M recipes), or NULL. */
const hx_quant_recipe *hx_quant_recipe_find(const char *name);
/* The recipes' names, comma separated, for messages. */
const char *hx_quant_recipe_names(void);
/* The file type llama.cpp would guess for a file whose matrices are mostly
 * of type `t` (its loader's guess when general.file_type is absent). */
hx_ftype hx_quant_ftype_of_type(hx_type t);

typedef struct {
    const char *name;
    uint64_t ne[4]; /* ne[0] is the row length; unused dimensions are 1 */
    hx_type type;   /* its type in the input file */
} hx_recipe_tensor;

/* --tensor-type PATTERN=TYPE, compiled. */
typedef struct {
    regex_t re;
    hx_type type;
} hx_recipe_override;

typedef struct {
    hx_ftype ftype;
    hx_type base;
    int pure, leave_output, has_imatrix;
    hx_type output_type, token_embd_type; /* HX_TYPE_COUNT: the recipe's */
    const hx_recipe_override *overrides;
    size_t n_overrides;
    uint32_t n_layer, n_head, n_head_kv; /* the model's hyperparameters */
    uint32_t n_expert; /* <arch>.expert_count; 0 for a dense model */
} hx_recipe_params;

/* Whether llama-quantize changes this tensor's type at all (matrices
 * named *weight, not norms, not output.weight under leave_output ...). */
int hx_quant_recipe_quantizable(const hx_recipe_params *p, const hx_recipe_tensor *t);
/* Whether a tensor's override (an --output-tensor-type, a
 * --token-embedding-type or a --tensor-type pattern) names its type. */
int hx_quant_recipe_fixed(const hx_recipe_params *p, const hx_recipe_tensor *t);
/* types[i] = the type tensors[i] gets (its own when it stays).  Counts
 * llama.cpp keeps (the i-th attn_v, the i-th ffn_down) follow its order:
 * by layer, then name, whatever the order of `t`.  *n_fallback (may be
 * NULL): tensors whose rows forced a fallback type. */
hx_status hx_quant_recipe_choose(const hx_recipe_params *p, const hx_recipe_tensor *t, size_t n, hx_type *types,
                                 int *n_fallback);
/* The type llama.cpp falls back to when a row of ne0 elements is not whole
 * blocks of `t` (t itself when it is); F16 when no block type fits. */
hx_type hx_quant_recipe_fallback(hx_type t, uint64_t ne0);
/* llama.cpp refuses to write these without an importance matrix (IQ1/IQ2,
 * IQ3_XXS), output and token embeddings aside. */
int hx_quant_requires_imatrix(const char *name, hx_type t);
/* Blocks of integers with scales (not F32, F16, BF16). */
int hx_type_is_quantized(hx_type t);

#endif
