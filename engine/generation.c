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
    free(g->rb_start);
    free(g->rb_end);
    free(g->rb_forced);
    free(g->rb_recent);
    hx_stop_text_free(&g->stop);
    free(g->piece);
    memset(g, 0, sizeof *g);
}

/* text as tokens (control tokens' text as those tokens), malloc'd. */
static hx_status tags_tokens(const hx_tokenizer *tok, const char *text, int32_t **out, size_t *n)
{
    size_t len = strlen(text);
    *n = 0;
    hx_status st = hx_tokenizer_encode(tok, text, len, 0, 1, NULL, 0, n);
    if (st != HX_OK && st != HX_ERR_RANGE)
        return st;
    if (!(*out = malloc((*n ? *n : 1) * sizeof **out)))
        return hx_error(HX_ERR_NO_MEMORY, "reasoning budget: tags");
    return hx_tokenizer_encode(tok, text, len, 0, 1, *out, *n, n);
}

/* The reasoning budget's tags and its first state. */
static hx_status budget_init(hx_generation *g, const hx_model *m, const hx_sampling *sp)
{
    if (!m->tok)
        return hx_error(HX_ERR_UNSUPPORTED, "a reasoning budget needs the model's tokenizer");
    if (sp->grammar)
        return hx_error(HX_ERR_UNSUPPORTED, "a reasoning budget cannot be combined with a grammar");
    const char *start = sp->reasoning_start ? sp->reasoning_start : "<think>";
    const char *end = sp->reasoning_end ? sp->reasoning_end : "</think>";
    const char *msg = sp->reasoning_message ? sp->reasoning_message : "";
    if (!*start || !*end)
        return hx_error(HX_ERR_INVALID_ARG, "reasoning budget: the start and end tags must not be empty");
    char *forced = malloc(strlen(msg) + strlen(end) + 1);
    if (!forced)
        return hx_error(HX_ERR_NO_MEMORY, "reasoning budget");
    strcat(strcpy(forced, msg), end);
    hx_status st = tags_tokens(m->tok, start, &g->rb_start, &g->n_rb_start);
    if (st == HX_OK)
        st = tags_tokens(m->tok, end, &g->rb_end, &g->n_rb_end);
    if (st == HX_OK)
        st = tags_tokens(m->tok, forced, &g->rb_forced, &g->n_rb_forced);
    free(forced);
    if (st)
        return st;
    g->rb_window = g->n_rb_start > g->n_rb_end ? g->n_rb_start : g->n_rb_end;
    if (!(g->rb_recent = malloc(g->rb_window * sizeof *g->rb_recent)))
        return hx_error(HX_ERR_NO_MEMORY, "reasoning budget");
    g->rb_on = 1;
    g->rb_budget = g->rb_left = sp->reasoning_budget;
    g->rb_state = !sp->reasoning_open ? HX_RB_IDLE : sp->reasoning_budget ? HX_RB_COUNTING : HX_RB_FORCING;
    return HX_OK;
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
    if (st == HX_OK && sp->reasoning_budget_on)
        st = budget_init(g, m, sp);
    if (st)
        hx_generation_free(g);
    return st;
}

int hx_generation_last_probs(hx_generation *g, int32_t tok, int32_t *ids, float *probs, int cap, float *tok_prob)
{
    if (g->rb_forced_last) { /* every other token was kept out */
        *tok_prob = 1.0f;
        if (cap < 1)
            return 0;
        ids[0] = tok;
        probs[0] = 1.0f;
        return 1;
    }
    return hx_sampler_last_probs(g->smp, tok, ids, probs, cap, tok_prob);
}

hx_status hx_generation_sample(hx_generation *g, const float *logits, int32_t *tok)
{
    g->rb_forced_last = g->rb_on && g->rb_state == HX_RB_FORCING && g->rb_pos < g->n_rb_forced;
    if (g->rb_forced_last) {
        *tok = g->rb_forced[g->rb_pos];
        return HX_OK;
    }
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

/* Whether the last tokens generated end with seq. */
static int ends_with(const hx_generation *g, const int32_t *seq, size_t n)
{
    if (!n || n > g->n_rb_recent)
        return 0;
    return !memcmp(g->rb_recent + g->n_rb_recent - n, seq, n * sizeof *seq);
}

/* Whether tok's bytes end on a whole character. */
static int whole_char(const hx_generation *g, int32_t tok)
{
    char buf[256];
    size_t len = 0;
    if (hx_tokenizer_token_to_piece(g->tok, tok, 0, buf, sizeof buf, &len) != HX_OK || !len)
        return 1;
    size_t i = len, cont = 0;
    while (i > 0 && ((unsigned char)buf[i - 1] & 0xC0) == 0x80 && cont < 3)
        i--, cont++;
    if (i == 0)
        return 1; /* continuation bytes alone: they finish an earlier character */
    const unsigned char lead = (unsigned char)buf[i - 1];
    const size_t want = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : 0;
    return cont >= want;
}

/* The budget's state after a generated token, as llama.cpp's. */
static void budget_accept(hx_generation *g, int32_t tok)
{
    if (g->n_rb_recent == g->rb_window)
        memmove(g->rb_recent, g->rb_recent + 1, (g->rb_window - 1) * sizeof *g->rb_recent);
    else
        g->n_rb_recent++;
    g->rb_recent[g->n_rb_recent - 1] = tok;
    switch (g->rb_state) {
    case HX_RB_IDLE:
    case HX_RB_DONE: /* a new thought opens a new budget */
        if (ends_with(g, g->rb_start, g->n_rb_start)) {
            g->rb_left = g->rb_budget;
            g->rb_state = g->rb_budget ? HX_RB_COUNTING : HX_RB_FORCING;
            g->rb_pos = 0;
            g->n_rb_recent = 0;
        }
        break;
    case HX_RB_COUNTING:
    case HX_RB_WAIT_CHAR:
        if (ends_with(g, g->rb_end, g->n_rb_end)) {
            g->rb_state = HX_RB_DONE;
            g->n_rb_recent = 0;
        } else if (g->rb_state == HX_RB_WAIT_CHAR || --g->rb_left == 0) {
            g->rb_state = whole_char(g, tok) ? HX_RB_FORCING : HX_RB_WAIT_CHAR;
            g->rb_pos = 0;
        }
        break;
    case HX_RB_FORCING:
        if (++g->rb_pos >= g->n_rb_forced) {
            g->rb_state = HX_RB_DONE;
            g->n_rb_recent = 0;
        }
        break;
    }
}

hx_status hx_generation_accept(hx_generation *g, int32_t tok)
{
    if (g->rb_on)
        budget_accept(g, tok);
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
