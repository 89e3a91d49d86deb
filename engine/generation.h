/* The text side of one generation, beside its session: the sampler, the
 * streaming detokenizer, the stop strings and the piece buffer.  Shared by
 * hx_session_generate (one caller) and the serving engine (many requests
 * in one batch).  Internal. */
#ifndef HX_ENGINE_GENERATION_H
#define HX_ENGINE_GENERATION_H

#include "engine/sampling.h"
#include "engine/stop_text.h"
#include "model/model.h"
#include "text/grammar.h"
#include "text/tokenizer.h"

typedef struct {
    hx_sampler *smp;
    hx_detok dt;
    hx_stop_text stop;
    char *piece;
    size_t cap;
    /* The grammar the text must follow (hx_sampling.grammar), or NULL;
     * the tokenizer's trie of pieces (hx_grammar_vocab_of), borrowed. */
    hx_grammar *gram;
    hx_grammar_state *gstate;
    const hx_grammar_vocab *gvocab;
    float *masked;
    const hx_tokenizer *tok;
    uint32_t n_vocab;
    /* End-of-generation tokens kept from being drawn: always
     * (ignore_eos), or until min_tokens were generated (vLLM's); the
     * logits go through eog_masked with theirs at -inf. */
    int ignore_eos;
    uint32_t min_tokens, generated;
    int32_t *eog_ids;
    uint32_t n_eog;
    float *eog_masked;
    /* The reasoning budget (hx_sampling.reasoning_*): the tags as tokens,
     * the forced sequence (message and end tag), the last tokens generated
     * (as many as the longer tag) to match them, and where the thought
     * stands. */
    int rb_on;
    uint32_t rb_budget, rb_left;
    int32_t *rb_start, *rb_end, *rb_forced, *rb_recent;
    size_t n_rb_start, n_rb_end, n_rb_forced, n_rb_recent, rb_window, rb_pos;
    enum { HX_RB_IDLE, HX_RB_COUNTING, HX_RB_WAIT_CHAR, HX_RB_FORCING, HX_RB_DONE } rb_state;
    int rb_forced_last; /* the last draw was forced */
} hx_generation;

/* Validates `sp` (its stop strings are not copied: they must outlive g;
 * its other pointers are read here).  A dry_penalty_last_n of -1 is the
 * model's context. */
hx_status hx_generation_init(hx_generation *g, const hx_model *m, const hx_sampling *sp);
void hx_generation_free(hx_generation *g);

/* Draws the next token from logits[n_vocab]: the sampler's draw where the
 * grammar allows it, else a draw from the logits of the tokens it allows
 * (llama.cpp's order: the common case costs one check, not a pass over the
 * vocabulary).  HX_ERR_STATE when the grammar allows no token at all. */
hx_status hx_generation_sample(hx_generation *g, const float *logits, int32_t *tok);
/* After hx_generation_sample: the distribution `tok` was drawn from, as
 * hx_sampler_last_probs gives it (the grammar's allowed tokens where it
 * redrew). */
int hx_generation_last_probs(hx_generation *g, int32_t tok, int32_t *ids, float *probs, int cap, float *tok_prob);
/* Records a token the generation produced: the sampler's penalty window,
 * the grammar's state, and the count min_tokens looks at. */
hx_status hx_generation_accept(hx_generation *g, int32_t tok);

/* The text token `tok` completes, through the stop strings: *text is what
 * to pass on, *matched the stop string it ended at (-1: none).  An
 * end-of-generation token (eog) adds no text. */
hx_status hx_generation_next_text(hx_generation *g, int32_t tok, int eog, const char **text, int32_t *matched);

/* What is still held once generation ended without a stop string: an
 * incomplete character (as U+FFFD) and text that began a stop string. */
hx_status hx_generation_last_text(hx_generation *g, const char **text, size_t *len, int32_t *matched);

#endif
