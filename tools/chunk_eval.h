/* What hetero-perplexity and hetero-imatrix share: a text read and
 * tokenized as llama.cpp's -f takes it, and a chunk of it evaluated from
 * an empty context as llama-perplexity and llama-imatrix evaluate theirs. */
#ifndef HX_TOOLS_CHUNK_EVAL_H
#define HX_TOOLS_CHUNK_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include "hetero.h"

/* The options both tools take alike: the model, the text, its chunks and
 * where to evaluate them. */
typedef struct {
    const char *model, *text, *devices, *sched, *kv_type; /* -m -f --devices --sched --kv-type */
    const char *kv_type_k, *kv_type_v;                    /* -ctk -ctv */
    long n_ctx, chunks, batch, threads;                   /* -c (default 512) --chunks -b -t */
    int quiet;                                            /* -q: no time estimate */
} chunk_options;

/* The usage lines of -b, -t, --devices, --sched, --kv-type, -ctk, -ctv and -q. */
#define CHUNK_OPTIONS_USAGE                                                              \
    "  -b N                      tokens per evaluation (default: one chunk)\n"             \
    "  -t N                      CPU threads (default: one per core)\n"                    \
    "  --devices LIST            devices to use (all, cpu, opencl, fpga, gpu, cuda)\n"     \
    "  --sched P                 scheduling policy: eager, static, ws, dmda\n"             \
    "  --kv-type T               KV cache type: f16 (default), q8_0, q4_0, f32\n"             \
    "  -ctk, --cache-type-k T    the K cache's type alone (default: --kv-type)\n"         \
    "  -ctv, --cache-type-v T    the V cache's type alone (default: --kv-type)\n"         \
    "  -q, --quiet               no time estimate (there is one only on a terminal)\n"

/* Takes option `opt` with its value `v` (NULL when none follows) if it is
 * one of chunk_options': the arguments taken (2 with a value, 1 for -q), 0
 * when it is not one of them or lacks its value, -1 for a bad value (said
 * on stderr). */
int chunk_option(const char *prog, chunk_options *o, const char *opt, const char *v);

/* After chunk `done` of `total` took `seconds` from the start: the time
 * per chunk and what is left, on stderr, as llama-perplexity prints it
 * after its first pass, then again every tenth of the way; only on a
 * terminal, and not with -q. */
void chunk_eta(const char *prog, const chunk_options *o, int done, int total, double seconds);
double chunk_clock(void);

/* The runtime and the model as the options ask, for evaluations of up to
 * `batch` tokens of one chunk; every_token turns the prefix cache off, so
 * that no chunk's tokens are attached instead of evaluated. */
hx_status chunk_open(const chunk_options *o, int batch, int every_token, hx_runtime **rt, hx_model **m);

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
