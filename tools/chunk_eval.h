/* What hetero-perplexity and hetero-imatrix share: a text read and
 * tokenized as llama.cpp's -f takes it, and a chunk of it evaluated from
 * an empty context as llama-perplexity and llama-imatrix evaluate theirs. */
#ifndef HX_TOOLS_CHUNK_EVAL_H
#define HX_TOOLS_CHUNK_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include "hetero.h"

/* The whole file, less one trailing newline: llama.cpp's -f drops it.
 * NULL after saying why on stderr, `prog:` first. */
char *chunk_read_text(const char *prog, const char *path, size_t *len);

/* The text's tokens as llama.cpp's perplexity takes them: special-token
 * text is plain text, BOS first where the model asks for one. */
int32_t *chunk_tokenize(const char *prog, const hx_tokenizer *tok, const char *text, size_t len, size_t *n);

/* Called with the logits of each scored position (from n_ctx/2 to the one
 * before the last) and the token that follows it; nonzero stops. */
typedef int (*chunk_scorer)(void *user, const float *logits, int32_t next);

/* Evaluates one chunk of n_ctx tokens from an empty context in
 * evaluations of `batch` tokens, its first token replaced by `bos` when
 * bos >= 0.  Logits are computed for the scored positions only, or with
 * all_logits for every position (llama-imatrix's output.weight sees them
 * all).  Returns 0, or -1 after saying why on stderr. */
int chunk_eval(const char *prog, hx_model *m, const int32_t *chunk, int n_ctx, int batch, int32_t bos,
               int all_logits, chunk_scorer score, void *user);

#endif
