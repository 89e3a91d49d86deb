/* What an embedding or reranking file says beside the transformer: its
 * pooling type and its classifier head's tensors.  The engine's pooling
 * (engine/embed.c) reads them here, so that only the model reads the GGUF. */
#include <stdio.h>

#include "model/model.h"

hx_pooling hx_model_file_pooling(const hx_model *m)
{
    char key[64];
    snprintf(key, sizeof key, "%s.pooling_type", m->info.arch);
    uint32_t v = 0;
    if (hx_gguf_get_u32(m->gguf, key, &v) != HX_OK) {
        int32_t i = 0;
        if (hx_gguf_get_i32(m->gguf, key, &i) != HX_OK || i < 0)
            return HX_POOLING_NONE;
        v = (uint32_t)i;
    }
    return v <= HX_POOLING_RANK ? (hx_pooling)v : HX_POOLING_NONE;
}

const hx_gguf_tensor *hx_model_file_tensor(const hx_model *m, const char *name)
{
    return hx_gguf_find_tensor(m->gguf, name);
}
