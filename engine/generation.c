/* The text side of a generation (engine/generation.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/generation.h"
#include "runtime/error.h"

void hx_generation_free(hx_generation *g)
{
    hx_sampler_free(g->smp);
    hx_grammar_state_free(g->gstate);
    hx_grammar_free(g->gram);
    free(g->masked);
    free(g->eog_ids);
    free(g->eog_masked);
    hx_stop_text_free(&g->stop);
    free(g->piece);
    memset(g, 0, sizeof *g);
}

hx_status hx_generation_init(hx_generation *g, const hx_model *m, const hx_sampling *sp)
{
    memset(g, 0, sizeof *g);
    hx_status st = hx_stop_text_init(&g->stop, sp->stop, sp->n_stop);
    hx_sampling p = *sp;
    if (p.dry_penalty_last_n == -1)
        p.dry_penalty_last_n = (int32_t)m->opts.n_ctx;
    if (st == HX_OK)
        st = hx_sampler_create_for(&p, m->tok, (int)m->info.n_vocab, &g->smp);
    g->ignore_eos = sp->ignore_eos;
    g->min_tokens = sp->min_tokens;
    if (st == HX_OK && (sp->ignore_eos || sp->min_tokens) && !m->tok)
        st = hx_error(HX_ERR_UNSUPPORTED, "ignore_eos and min_tokens need the model's tokenizer");
    if (st == HX_OK && (sp->ignore_eos || sp->min_tokens)) {
        g->eog_ids = malloc(m->info.n_vocab * sizeof *g->eog_ids);
        g->eog_masked = malloc(m->info.n_vocab * sizeof *g->eog_masked);
        if (!g->eog_ids || !g->eog_masked)
            st = hx_error(HX_ERR_NO_MEMORY, "generation: end-of-generation mask of %u logits", m->info.n_vocab);
        for (uint32_t t = 0; st == HX_OK && t < m->info.n_vocab; t++)
            if (hx_tokenizer_is_eog(m->tok, (int32_t)t))
                g->eog_ids[g->n_eog++] = (int32_t)t;
    }
    g->cap = hx_detok_max_out(m->tok) + 1;
    if (st == HX_OK && !(g->piece = malloc(g->cap)))
        st = hx_error(HX_ERR_NO_MEMORY, "generation");
    hx_detok_init(&g->dt, m->tok, 0);
    g->tok = m->tok;
    g->n_vocab = m->info.n_vocab;
    if (st == HX_OK && sp->grammar) {
        if (!m->tok)
            st = hx_error(HX_ERR_UNSUPPORTED, "a grammar needs the model's tokenizer");
        if (st == HX_OK)
            st = hx_grammar_parse(sp->grammar, strlen(sp->grammar), &g->gram);
        if (st == HX_OK)
            st = hx_grammar_state_create(g->gram, &g->gstate);
        if (st == HX_OK)
            st = hx_grammar_vocab_of(m->tok, &g->gvocab);
    }
    if (st)
        hx_generation_free(g);
    return st;
}

int hx_generation_last_probs(hx_generation *g, int32_t tok, int32_t *ids, float *probs, int cap, float *tok_prob)
{
    return hx_sampler_last_probs(g->smp, tok, ids, probs, cap, tok_prob);
}

hx_status hx_generation_sample(hx_generation *g, const float *logits, int32_t *tok)
{
    if (g->n_eog && (g->ignore_eos || g->generated < g->min_tokens)) {
        memcpy(g->eog_masked, logits, g->n_vocab * sizeof *g->eog_masked);
        for (uint32_t k = 0; k < g->n_eog; k++)
            g->eog_masked[g->eog_ids[k]] = -INFINITY;
        logits = g->eog_masked;
    }
    hx_status st = hx_sampler_sample(g->smp, logits, tok);
    if (st || !g->gstate)
        return st;
    if (hx_grammar_allows(g->gstate, g->gvocab, *tok))
        return HX_OK;
    if (!g->masked && !(g->masked = malloc(g->n_vocab * sizeof *g->masked)))
        return hx_error(HX_ERR_NO_MEMORY, "grammar: logits");
    memcpy(g->masked, logits, g->n_vocab * sizeof *g->masked);
    if ((st = hx_grammar_mask(g->gstate, g->gvocab, g->masked)))
        return st;
    uint32_t live = 0;
    for (uint32_t i = 0; i < g->n_vocab; i++)
        live += g->masked[i] != -INFINITY;
    if (!live)
        return hx_error(HX_ERR_STATE, "grammar: no token of the vocabulary continues the text");
    return hx_sampler_sample(g->smp, g->masked, tok);
}

hx_status hx_generation_accept(hx_generation *g, int32_t tok)
{
    hx_status st = hx_sampler_accept(g->smp, tok);
    g->generated += st == HX_OK;
    if (st == HX_OK && g->gstate)
        st = hx_grammar_accept_token(g->gstate, g->gvocab, tok);
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
