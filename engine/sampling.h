/* The token sampler: logits [n_vocab] in, one token id out.
 *
 * The chain is llama.cpp's (common_sampler): the logit bias first, then
 * the stages in hx_sampling.samplers' order, by default
 *
 *   penalties -> DRY -> top-n-sigma -> top-k -> typical -> top-p ->
 *   min-p -> XTC -> temperature (dynamic with dynatemp_range) -> draw
 *
 * so top-p and min-p look at probabilities at temperature 1 and the
 * temperature only reshapes the survivors; with Mirostat the chain is
 * the logit bias, the temperature and Mirostat alone.  Each filter keeps
 * at least the most likely token (XTC excepted: it drops the likeliest on
 * purpose).  Conventions, as llama.cpp has them:
 *   - penalty: every distinct token among the last repeat_last_n accepted
 *     ones has its logit divided by repeat_penalty if it is > 0 and
 *     multiplied by it if it is <= 0 (once per token, however often seen),
 *     then loses count * frequency_penalty + presence_penalty (OpenAI's);
 *   - top-k keeps the k largest logits (ties broken towards the lower id);
 *   - top-p keeps the smallest prefix of the tokens sorted by probability
 *     whose cumulative probability is >= top_p (renormalized over what
 *     the stages before it left);
 *   - min-p keeps the tokens whose probability is >= min_p times the
 *     largest (logit >= max_logit + ln(min_p));
 *   - temperature 0 is greedy: the stage keeps only the argmax (the
 *     lowest id on ties), and the draw of one token uses no randomness;
 *     the stages that always keep the argmax are then skipped.
 * Logits of -inf mark tokens that can never be drawn (they are not
 * candidates); NaN and +inf are refused.  Draws (and XTC's coin) come from
 * the sampler's own xoshiro256** stream seeded from `seed`, so a seed fixes
 * the sequence on every platform.
 *
 * Cost per token: O(n_vocab) for the default chain, O(n_vocab log k) at
 * worst with top-k (one pass keeping the k best); top-p alone pops a heap
 * only as far as its nucleus; typical, XTC, dynamic temperature and
 * Mirostat sort what they see (O(m log m) for m candidates: after top-k,
 * m = k).  All memory is allocated by the create call.  A sampler is not
 * thread-safe: use one per sequence. */
#ifndef HX_ENGINE_SAMPLING_H
#define HX_ENGINE_SAMPLING_H

#include <stdint.h>

#include "hetero.h"

/* The longest repetition window accepted (tokens). */
#define HX_SAMPLER_MAX_LAST_N (1 << 20)

typedef struct hx_sampler hx_sampler;

/* Takes the public hx_sampling (hetero.h; hx_sampling_default gives
 * llama.cpp's defaults) less its stop strings, which are text, not
 * tokens: engine/stop_text.c has them.  Validates the parameters
 * (HX_ERR_INVALID_ARG naming the bad one: temperature >= 0, top_k >= 0,
 * top_p in (0, 1], min_p in [0, 1], repeat_penalty > 0, repeat_last_n in
 * [0, HX_SAMPLER_MAX_LAST_N], and each added sampler's own range, as
 * hetero.h gives them) and allocates everything sampling needs.
 * *out is NULL on failure. */
hx_status hx_sampler_create(const hx_sampling *params, int n_vocab, hx_sampler **out);
/* The same, with the tokenizer DRY reads its text sequence breakers with
 * (hx_sampler_create has none: DRY with breakers then fails with
 * HX_ERR_UNSUPPORTED; give an empty, non-NULL dry_breakers and add token
 * breakers with hx_sampler_dry_breaker_tokens). */
hx_status hx_sampler_create_for(const hx_sampling *params, const hx_tokenizer *tok, int n_vocab, hx_sampler **out);
/* A DRY restart sequence as tokens: seq[0] followed by seq[1..n); n in
 * [1, 21].  Tests and callers without a tokenizer. */
hx_status hx_sampler_dry_breaker_tokens(hx_sampler *s, const int32_t *seq, int n);
/* Draws a token from logits[n_vocab] (not modified).  Does not record it:
 * call hx_sampler_accept with the token actually used. */
hx_status hx_sampler_sample(hx_sampler *s, const float *logits, int32_t *token);
/* The distribution the next draw would come from, without drawing (nor
 * changing Mirostat's mu; XTC's coin is tossed): ids[] and probs[] (room
 * for n_vocab) get the candidates left by the chain and their
 * probabilities, *n their number.  For tests and post-sampling
 * probabilities. */
hx_status hx_sampler_distribution(hx_sampler *s, const float *logits, int32_t *ids, double *probs, int *n);
/* After a draw: the candidates it was drawn from, most likely first, and
 * their probabilities (llama-server's post_sampling_probs), at most cap
 * of them and none whose probability rounds to 0 in float; the count is
 * returned, *token_prob gets `token`'s (0 if it was not a candidate). */
int hx_sampler_last_probs(hx_sampler *s, int32_t token, int32_t *ids, float *probs, int cap, float *token_prob);
/* Mirostat's running target surprise (2 * tau at the start); NaN for NULL. */
float hx_sampler_mirostat_mu(const hx_sampler *s);
/* Adds a token (prompt or generated) to the penalty window;
 * HX_ERR_RANGE if it is not in [0, n_vocab). */
hx_status hx_sampler_accept(hx_sampler *s, int32_t token);
/* Forgets the history and restarts the random stream from the seed. */
void hx_sampler_reset(hx_sampler *s);
void hx_sampler_free(hx_sampler *s);

#endif
