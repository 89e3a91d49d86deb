/* GBNF grammars (llama.cpp's grammar format) for constrained decoding.
 *
 *   root   ::= object
 *   object ::= "{" ws ( pair ( "," ws pair )* )? "}"
 *   pair   ::= [a-z]+ ":" ws [0-9]+     # comments run to the line's end
 *
 * A grammar is parsed once into rules of elements (as llama.cpp lays them
 * out: alternatives separated by ALT, a rule ended by END, a character set
 * as CHAR/CHAR_NOT followed by RNG_UPPER and CHAR_ALT elements).  Literals,
 * character classes (ranges, negation, escapes \n \t \r \\ \" \] \xHH
 * \uHHHH \UHHHHHHHH), rule references, groups, `.`, and the repetitions
 * `* + ? {m} {m,} {m,n}` (expanded into generated rules) are supported.
 * Refused with line and column: syntax errors, undefined rules, a missing
 * `root`, left recursion (which no stack machine can run), and grammars
 * past the limits below.
 *
 * Matching follows llama.cpp: the state is a set of stacks of positions,
 * each stack's top a character set; a code point advances every stack whose
 * top matches it and expands rule references until every top is a
 * character set again.  Bytes are fed one at a time; an incomplete UTF-8
 * sequence is kept while some stack could still match a character it
 * begins.  A stack that empties means the grammar may end there.
 *
 * Costs: feeding one code point is O(stacks x expansion); masking a
 * vocabulary (hx_grammar_mask) walks a byte trie of the tokens' pieces, so
 * a shared prefix is matched once and a dead prefix prunes its whole
 * subtree. */
#ifndef HX_TEXT_GRAMMAR_H
#define HX_TEXT_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "hetero.h"
#include "text/tokenizer.h"

/* Bounds that keep a hostile grammar from taking the process down. */
#define HX_GRAMMAR_MAX_SOURCE (1u << 20)    /* bytes of GBNF text            */
#define HX_GRAMMAR_MAX_ELEMENTS (1u << 20)  /* elements after expansion      */
#define HX_GRAMMAR_MAX_REPEAT 10000         /* m and n of {m,n}              */
#define HX_GRAMMAR_MAX_NESTING 256          /* nested parentheses            */
#define HX_GRAMMAR_MAX_STACKS 1024          /* live stacks in one state      */
#define HX_GRAMMAR_MAX_WORK (1u << 21)      /* stack positions written while
                                               matching one character        */
#define HX_GRAMMAR_MAX_STACK_DEPTH 4096     /* positions in one stack        */

typedef struct hx_grammar hx_grammar;
typedef struct hx_grammar_state hx_grammar_state;
typedef struct hx_grammar_vocab hx_grammar_vocab;

/* Parses GBNF text (len bytes, not necessarily NUL-terminated) whose start
 * rule is `root`.  HX_ERR_INVALID_ARG with "line L, column C: ..." on a bad
 * grammar; *out is NULL then. */
hx_status hx_grammar_parse(const char *src, size_t len, hx_grammar **out);
void hx_grammar_free(hx_grammar *g);
/* Number of rules (generated ones included) and elements: for tests. */
size_t hx_grammar_rule_count(const hx_grammar *g);

/* A matching state at the grammar's start.  The grammar must outlive it. */
hx_status hx_grammar_state_create(const hx_grammar *g, hx_grammar_state **out);
void hx_grammar_state_free(hx_grammar_state *s);
/* Feeds bytes: 1 when the grammar accepts them (the state advanced), 0
 * when it does not (the state is unchanged), -1 on an allocation failure
 * or a limit (hx_last_error says which; the state is unchanged). */
int hx_grammar_accept(hx_grammar_state *s, const char *bytes, size_t n);
/* Whether the text fed so far is a whole sentence of the grammar. */
int hx_grammar_can_end(const hx_grammar_state *s);

/* The tokens' pieces as a byte trie. */
hx_status hx_grammar_vocab_create(const hx_tokenizer *t, hx_grammar_vocab **out);
void hx_grammar_vocab_free(hx_grammar_vocab *v);
/* The tokenizer's own trie, built on the first call and kept (freed with
 * the tokenizer); safe to call from several threads. */
hx_status hx_grammar_vocab_of(const hx_tokenizer *t, const hx_grammar_vocab **out);
/* Whether token `id` may come next: its piece is accepted whole (an
 * end-of-generation token: the grammar can end; a token with no text:
 * never). */
int hx_grammar_allows(const hx_grammar_state *s, const hx_grammar_vocab *v, int32_t id);
/* Sets logits[id] to -inf for every token that may not come next. */
hx_status hx_grammar_mask(const hx_grammar_state *s, const hx_grammar_vocab *v, float *logits);
/* Advances the state past token `id` (hx_grammar_accept on its piece;
 * nothing for an end-of-generation token).  HX_ERR_INVALID_ARG if the
 * grammar does not allow it. */
hx_status hx_grammar_accept_token(hx_grammar_state *s, const hx_grammar_vocab *v, int32_t id);

#endif
