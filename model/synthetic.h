/* The shapes of the synthetic models (the default main job's and the
 * tests'): written with weights by quantize/synthetic.h, and run without weights on a
 * simulated machine (model/shapes.c). */
#ifndef HX_MODEL_SYNTHETIC_H
#define HX_MODEL_SYNTHETIC_H

#include "hetero.h"

typedef struct {
    const char *name;
    uint32_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx;
    const char *arch; /* an entry of the architecture table (model/arch.h); NULL: "llama" */
    int tied;         /* no output.weight: the embedding matrix is reused */
} hx_synthetic_config;

/* "tiny" (~16M parameters, grouped-query attention 8/4), "small" (~107M,
 * multi-head), and one small preset of each other architecture
 * (qwen3-tiny, mixtral-tiny, qwen3moe-tiny, gemma3-tiny); NULL for any
 * other name. */
const hx_synthetic_config *hx_synthetic_preset(const char *name);

#endif
