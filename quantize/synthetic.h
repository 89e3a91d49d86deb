/* Synthetic LLaMA models for the default main job and the tests: GGUF
 * files of seeded random weights, each matrix written with the CPU's row
 * quantizer of the type asked for (quantize/synthetic.c). */
#ifndef HX_QUANTIZE_SYNTHETIC_H
#define HX_QUANTIZE_SYNTHETIC_H

#include "model/synthetic.h"

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
    /* <arch>.attention.key_length (and value_length) when not 0: heads of
     * that size, n_head of them, whatever n_embd is. */
    uint32_t head_dim;
    /* Experts, for the architectures that have them: 0 takes 4 experts, 2
     * used, where the architecture requires experts, and none in a
     * "llama" (whose experts are optional: a Mixtral).  Each expert (and
     * the shared one) is n_ff wide. */
    uint32_t n_expert, n_expert_used;
    /* A skewed router (0: none): every token embedding gets a common
     * component (mean 1), and expert e's router row a mean that shifts its
     * logit by about -router_skew * ln(1 + rank(e)), so that the top-k
     * choices follow a Zipf-like law of exponent about router_skew; the
     * ranks go by groups of 8 experts (group g's experts rank from
     * ((5 g + 3) mod (E / 8)) * 8), so that the most chosen experts are
     * not the first ones. */
    float router_skew;
    /* Multiplies the output matrix's spread (0: 1): larger makes the
     * next-token distributions more peaked. */
    float output_scale;
    /* The K bias's spread (0: 0.5, as the other biases'); Qwen2's keys carry
     * biases of 100 and more, far above their varying part. */
    float k_bias_sd;
    const char *chat_template; /* tokenizer.chat_template when not NULL */
    /* tokenizer.chat_template.NAME: pairs of name and source, NULL after the last */
    const char *const *named_templates;
} hx_synthetic_extras;
hx_status hx_synthetic_write_with(const char *path, const hx_synthetic_config *c, const hx_synthetic_extras *x,
                                  const char *type, uint64_t seed);
/* What preset `c` carries besides its shape (all zero for most), as
 * hx_model_write_synthetic writes it: a test may change one field. */
const hx_synthetic_extras *hx_synthetic_preset_extras(const hx_synthetic_config *c);

#endif
