/* The serving engine's embeddings requests: their prompts go into the
 * steps' batches beside the other requests' tokens (the sessions in
 * embeddings mode), the hidden states their pooling needs are kept as
 * each chunk comes back, and once the prompt is read they are pooled and
 * the request ends without sampling. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "runtime/error.h"

/* Rows a request keeps: every position for none and mean, else one. */
static size_t kept_rows(const hx_engine_req *q)
{
    const hx_pooling p = q->embd.pooling;
    return p == HX_POOLING_NONE || p == HX_POOLING_MEAN ? q->n_prompt : 1;
}

hx_status hx_engine_embed_prepare(hx_engine *e, hx_engine_req *q)
{
    hx_status st = hx_embed_resolve(e->m, &q->r.embed, &q->embd);
    if (st)
        return st;
    const size_t need = hx_embed_floats(e->m, &q->embd, q->n_prompt);
    if (!q->r.embedding || q->r.embedding_cap < need)
        return hx_error(HX_ERR_RANGE, "hx_engine_submit: the embedding takes %zu floats, room for %zu", need,
                        q->r.embedding ? q->r.embedding_cap : 0);
    if (!(q->embd_rows = malloc(sizeof *q->embd_rows * kept_rows(q) * e->m->info.n_embd)))
        return hx_error(HX_ERR_NO_MEMORY, "embeddings request of %u tokens", q->n_prompt);
    return HX_OK;
}

int hx_engine_embed_want(const hx_engine_req *q, uint32_t pos)
{
    return hx_embed_wants(&q->embd, pos, q->n_prompt);
}

hx_status hx_engine_embed_collect(hx_engine_req *q, uint32_t first, uint32_t count)
{
    const size_t D = q->sess->m->info.n_embd;
    const int by_position = kept_rows(q) > 1 || q->n_prompt == 1;
    for (uint32_t k = 0; k < count; k++) {
        if (!hx_engine_embed_want(q, first + k))
            continue;
        const float *row = hx_session_embeddings(q->sess, (int)k);
        if (!row)
            return hx_error(HX_ERR_STATE, "request %llu: no hidden state kept for position %u",
                            (unsigned long long)q->id, first + k);
        memcpy(q->embd_rows + (by_position ? first + k : 0) * D, row, sizeof *row * D);
    }
    return HX_OK;
}

void hx_engine_embed_finish(hx_engine *e, hx_engine_req *q, hx_status st)
{
    size_t n = 0;
    if (st == HX_OK)
        st = hx_embed_pool(e->m, &q->embd, q->embd_rows, kept_rows(q), q->r.embedding, q->r.embedding_cap, &n);
    q->res.embedding_n = st ? 0 : n;
    hx_engine_req_finish(e, q, st, HX_FINISH_STOP);
}
