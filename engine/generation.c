/* The text side of a generation (engine/generation.h). */
#include <stdlib.h>
#include <string.h>

#include "engine/generation.h"
#include "runtime/error.h"

void hx_generation_free(hx_generation *g)
{
    hx_sampler_free(g->smp);
    hx_stop_text_free(&g->stop);
    free(g->piece);
    memset(g, 0, sizeof *g);
}

hx_status hx_generation_init(hx_generation *g, const hx_model *m, const hx_sampling *sp)
{
    memset(g, 0, sizeof *g);
    hx_status st = hx_stop_text_init(&g->stop, sp->stop, sp->n_stop);
    if (st == HX_OK)
        st = hx_sampler_create(sp, (int)m->info.n_vocab, &g->smp);
    g->cap = hx_detok_max_out(m->tok) + 1;
    if (st == HX_OK && !(g->piece = malloc(g->cap)))
        st = hx_error(HX_ERR_NO_MEMORY, "generation");
    hx_detok_init(&g->dt, m->tok, 0);
    if (st)
        hx_generation_free(g);
    return st;
}

hx_status hx_generation_next_text(hx_generation *g, int32_t tok, int eog, const char **text, int32_t *matched)
{
    size_t n = 0, len;
    hx_status st = eog ? HX_OK : hx_detok_push(&g->dt, tok, g->piece, g->cap - 1, &n);
    if (st == HX_OK)
        st = hx_stop_text_push(&g->stop, g->piece, n, text, &len, matched);
    return st;
}

hx_status hx_generation_last_text(hx_generation *g, const char **text, size_t *len, int32_t *matched)
{
    size_t n = 0;
    hx_status st = hx_detok_finish(&g->dt, g->piece, g->cap - 1, &n);
    return st ? st : hx_stop_text_finish(&g->stop, g->piece, n, text, len, matched);
}
