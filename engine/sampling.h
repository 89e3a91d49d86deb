/* The token sampler: logits [n_vocab] in, one token id out.
 *
 * The chain runs in llama.cpp's order (common_sampler's default):
 *
 *   repetition penalty -> top-k -> top-p -> min-p -> temperature -> draw
 *
 * so top-p and min-p look at probabilities at temperature 1 and the
 * temperature only reshapes the survivors.  Each filter keeps at least the
 * most likely token.  Conventions, as llama.cpp has them:
 *   - penalty: every distinct token among the last repeat_last_n accepted
 *     ones has its logit divided by repeat_penalty if it is > 0 and
 *     multiplied by it if it is <= 0 (once per token, however often seen),
 *     then loses count * frequency_penalty + presence_penalty (OpenAI's);
 *   - top-k keeps the k largest logits (ties broken towards the lower id);
 *   - top-p keeps the smallest prefix of the tokens sorted by probability
 *     whose cumulative probability is >= top_p (renormalized after top-k);
 *   - min-p keeps the tokens whose probability is >= min_p times the
 *     largest (logit >= max_logit + ln(min_p));
 *   - temperature 0 is greedy: the argmax of the penalized logits, the
 *     lowest id on ties; the other filters and the RNG are then unused.
 * Logits of -inf mark tokens that can never be drawn; NaN and +inf are
 * refused.  Draws come from the sampler's own xoshiro256** stream seeded
 * from `seed`, so a seed fixes the sequence on every platform.
 *
 * Cost per token: O(n_vocab) with top-k and top-p off; O(n_vocab log k)
 * at worst with top-k (one pass keeping the k best); O(n_vocab + m log
 * n_vocab) with top-p alone, for a nucleus of m tokens.  All memory is
 * allocated by hx_sampler_create.  A sampler is not thread-safe: use one
 * per sequence. */
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
 * [0, HX_SAMPLER_MAX_LAST_N]) and allocates everything sampling needs.
 * *out is NULL on failure. */
hx_status hx_sampler_create(const hx_sampling *params, int n_vocab, hx_sampler **out);
/* Draws a token from logits[n_vocab] (not modified).  Does not record it:
 * call hx_sampler_accept with the token actually used. */
hx_status hx_sampler_sample(hx_sampler *s, const float *logits, int32_t *token);
/* Adds a token (prompt or generated) to the penalty window;
 * HX_ERR_RANGE if it is not in [0, n_vocab). */
hx_status hx_sampler_accept(hx_sampler *s, int32_t token);
/* Forgets the history and restarts the random stream from the seed. */
void hx_sampler_reset(hx_sampler *s);
void hx_sampler_free(hx_sampler *s);

#endif
