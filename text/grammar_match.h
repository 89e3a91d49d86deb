/* The matcher's stack sets, shared by text/grammar_match.c and the
 * vocabulary walk in text/grammar_vocab.c only. */
#ifndef HX_TEXT_GRAMMAR_MATCH_H
#define HX_TEXT_GRAMMAR_MATCH_H

#include <stdint.h>

#include "text/grammar_impl.h"

/* A set of stacks, each stored as [length, hash, positions...] in data,
 * with an open-addressing index for finding duplicates; a slot is live
 * while its stamp equals the set's, so clearing the set is O(1). */
typedef struct {
    uint32_t *data, n_data, cap_data;
    uint32_t *off, n, cap_off;
    uint32_t *slot_idx, *slot_stamp, slot_cap, stamp;
} hx_gset;

/* An incomplete UTF-8 sequence: its bits so far and the bytes it lacks. */
typedef struct {
    uint32_t value;
    int remain;
    uint32_t min; /* the smallest code point of its length (no overlong forms) */
} hx_gpartial;

/* Scratch space for expansions, reused across calls. */
typedef struct {
    hx_gset work;
    uint32_t *scratch, cap_scratch;
    uint32_t *scratch2, cap_scratch2;
    hx_status st; /* why the last call returned -1 */
    uint32_t steps; /* positions written for the current character */
} hx_gctx;

void hx_gset_free(hx_gset *s);
void hx_gset_clear(hx_gset *s);
/* The set at the grammar's start. */
hx_status hx_gset_start(const hx_grammar *g, hx_gctx *c, hx_gset *out);
/* Feeds one byte: 1 accepted, 0 rejected, -1 on a failure (c->st, hx_last_error).
 * *pt is updated; when a character completes, the advanced set is in out
 * and *advanced is 1, otherwise `in` stands unchanged (out is untouched). */
int hx_gset_accept_byte(const hx_grammar *g, hx_gctx *c, const hx_gset *in, hx_gpartial *pt, uint8_t b,
                        hx_gset *out, int *advanced);
int hx_gset_can_end(const hx_gset *s, const hx_gpartial *pt);
void hx_gctx_free(hx_gctx *c);

/* A state's current set and partial character, grammar and scratch. */
const hx_gset *hx_grammar_state_set(const hx_grammar_state *s, hx_gpartial *pt);
const hx_grammar *hx_grammar_state_grammar(const hx_grammar_state *s);
hx_gctx *hx_grammar_state_ctx(hx_grammar_state *s);

#endif
