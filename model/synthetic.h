/* Synthetic LLaMA models for the default main job and the tests. */
#ifndef HX_MODEL_SYNTHETIC_H
#define HX_MODEL_SYNTHETIC_H

#include "hetero.h"

typedef struct {
    const char *name;
    uint32_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx;
    const char *arch; /* an entry of the architecture table (model/arch.h); NULL: "llama" */
    int tied;         /* no output.weight: the embedding matrix is reused */
} hx_synthetic_config;

/* "tiny" (~16M parameters, grouped-query attention 8/4) and "small"
 * (~107M, multi-head), or NULL. */
const hx_synthetic_config *hx_synthetic_preset(const char *name);
/* Writes a model of any shape; `type` names the 2-D weights' type. */
hx_status hx_synthetic_write(const char *path, const hx_synthetic_config *c, const char *type, uint64_t seed);
/* The same with <arch>.attention.sliding_window = `window` (0: none). */
hx_status hx_synthetic_write_windowed(const char *path, const hx_synthetic_config *c, const char *type,
                                      uint64_t seed, uint32_t window);

/* What a model may carry besides its shape; zero: nothing. */
typedef struct {
    uint32_t window; /* <arch>.attention.sliding_window */
    /* Rows of token_embd and output past the byte vocabulary's, as models
     * whose vocabulary outgrows 16-bit ids have (Qwen2's 151k). */
    uint32_t n_vocab;
    /* Llama 3.1's rope_freqs.weight, from its rope_scaling "llama3" (factor
     * 8, low/high frequency factors 1 and 4, original context n_ctx). */
    int rope_freqs;
    const char *rope_scaling;  /* <arch>.rope.scaling.type when not NULL */
    float rope_scaling_factor; /* <arch>.rope.scaling.factor when not 0 */
    const char *chat_template; /* tokenizer.chat_template when not NULL */
    /* tokenizer.chat_template.NAME: pairs of name and source, NULL after the last */
    const char *const *named_templates;
} hx_synthetic_extras;
hx_status hx_synthetic_write_with(const char *path, const hx_synthetic_config *c, const hx_synthetic_extras *x,
                                  const char *type, uint64_t seed);

#endif
