/* Embeddings' insides (engine/embed.c): the classifier head, pooling with
 * resolved options, and what the serving engine asks of them
 * (engine/engine_embed.c).  Internal. */
#ifndef HX_ENGINE_EMBED_H
#define HX_ENGINE_EMBED_H

#include "engine/session.h"

/* The file's classifier head (rank pooling): cls.weight [n_embd -> mid]
 * and its bias, then cls.output.weight [mid -> n_out] and its bias; any
 * may be NULL.  n_out 0: no head. */
typedef struct {
    const hx_gguf_tensor *cls, *cls_b, *out, *out_b;
    uint32_t n_out;
} hx_embed_head;

hx_status hx_embed_head_read(const hx_model *m, hx_embed_head *h);
/* `o` (NULL: the defaults) with the file's pooling filled in, checked:
 * rank needs a head. */
hx_status hx_embed_resolve(const hx_model *m, const hx_embed_options *o, hx_embed_options *r);
/* Floats one input of n_tokens gives under resolved options r. */
size_t hx_embed_floats(const hx_model *m, const hx_embed_options *r, size_t n_tokens);
/* Whether the hidden state at position pos of an input of n_tokens is
 * needed by r's pooling. */
int hx_embed_wants(const hx_embed_options *r, size_t pos, size_t n_tokens);
/* Pools the kept rows (hx_embed_wants' rows, in order) into out. */
hx_status hx_embed_pool(const hx_model *m, const hx_embed_options *r, const float *rows, size_t n_rows, float *out,
                        size_t cap, size_t *n_out);

#endif
