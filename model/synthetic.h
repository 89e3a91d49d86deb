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

#endif
