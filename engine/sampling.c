/* The token sampler (see sampling.h for the chain and its conventions):
 * creation, the chain in its order, and the draw. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sampling_impl.h"
#include "runtime/error.h"

/* llama.cpp's default order: penalties, DRY, top-n-sigma, top-k,
 * typical, top-p, min-p, XTC, temperature. */
#define HX_DEFAULT_ORDER "edskypmxt"

/* llama.cpp's defaults (common_params_sampling): temperature 0.8, top-k
 * 40, top-p 0.95, min-p 0.05, no repetition penalty (1.0) over a window
 * of 64; typical, Mirostat, DRY, XTC, top-n-sigma and dynamic temperature
 * off with their default settings; seed 0; no stop strings. */
hx_sampling hx_sampling_default(void)
{
    hx_sampling p = {
        .temperature = 0.8f,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .repeat_penalty = 1.0f,
        .repeat_last_n = 64,
        .seed = 0,
        .typical_p = 1.0f,
        .mirostat_tau = 5.0f,
        .mirostat_eta = 0.1f,
        .dry_base = 1.75f,
        .dry_allowed_length = 2,
        .dry_penalty_last_n = 64,
        .xtc_threshold = 0.1f,
        .top_n_sigma = -1.0f,
        .dynatemp_exponent = 1.0f,
    };
    return p;
}

/* ---- random numbers: xoshiro256** seeded through splitmix64 ---------- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(uint64_t s[4])
{
    uint64_t r = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

/* Uniform in [0, 1) with 53 random bits. */
double hx_smp_uniform(hx_sampler *s) { return (double)(rng_next(s->rng) >> 11) * 0x1.0p-53; }

static void rng_seed(uint64_t s[4], uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        s[i] = splitmix64(&seed); /* distinct inputs of a bijection: never the all-zero state */
}

int32_t hx_smp_recent(const hx_sampler *s, int i)
{
    int k = s->hist_next - 1 - i;
    return s->hist[k < 0 ? k + s->hist_cap : k];
}

/* ---- creation ----------------------------------------------------------- */

static int is_finite(float x) { return !isnan(x) && !isinf(x); }

static hx_status check_params(const hx_sampling *p, int n_vocab)
{
    if (n_vocab <= 0)
        return hx_error(HX_ERR_INVALID_ARG, "sampler: n_vocab %d must be > 0", n_vocab);
    if (!(p->temperature >= 0.0f) || isinf(p->temperature))
        return hx_error(HX_ERR_INVALID_ARG, "sampler: temperature %g must be finite and >= 0 (0 = greedy)",
                        (double)p->temperature);
    if (p->top_k < 0)
        return hx_error(HX_ERR_INVALID_ARG, "sampler: top_k %d must be >= 0 (0 = off)", (int)p->top_k);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return hx_error(HX_ERR_INVALID_ARG, "sampler: top_p %g must be in (0, 1] (1 = off)", (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return hx_error(HX_ERR_INVALID_ARG, "sampler: min_p %g must be in [0, 1] (0 = off)", (double)p->min_p);
    if (!(p->repeat_penalty > 0.0f) || isinf(p->repeat_penalty))
        return hx_error(HX_ERR_INVALID_ARG, "sampler: repeat_penalty %g must be finite and > 0 (1 = off)",
                        (double)p->repeat_penalty);
    if (!(fabsf(p->frequency_penalty) <= 2.0f) || !(fabsf(p->presence_penalty) <= 2.0f))
        return hx_error(HX_ERR_INVALID_ARG,
                        "sampler: frequency_penalty %g and presence_penalty %g must be in [-2, 2] (0 = off)",
                        (double)p->frequency_penalty, (double)p->presence_penalty);
    if (p->repeat_last_n < 0 || p->repeat_last_n > HX_SAMPLER_MAX_LAST_N)
        return hx_error(HX_ERR_INVALID_ARG, "sampler: repeat_last_n %d must be in [0, %d] (0 = off)",
                        (int)p->repeat_last_n, HX_SAMPLER_MAX_LAST_N);
    if (p->n_logit_bias && !p->logit_bias)
        return hx_error(HX_ERR_INVALID_ARG, "sampler: %u logit biases and a NULL array", p->n_logit_bias);
    for (uint32_t i = 0; i < p->n_logit_bias; i++) {
        const hx_logit_bias *b = &p->logit_bias[i];
        if (b->token < 0 || b->token >= n_vocab)
            return hx_error(HX_ERR_INVALID_ARG, "sampler: logit_bias token %d outside [0, %d)", (int)b->token, n_vocab);
        if (isnan(b->bias) || b->bias == INFINITY)
            return hx_error(HX_ERR_INVALID_ARG, "sampler: logit_bias of token %d is %g (finite, or -inf to ban it)",
                            (int)b->token, (double)b->bias);
    }
    if (!(p->typical_p >= 0.0f && p->typical_p <= 1.0f))
        return hx_error(HX_ERR_INVALID_ARG, "sampler: typical_p %g must be in [0, 1] (1 = off)", (double)p->typical_p);
    if (p->mirostat < 0 || p->mirostat > 2)
        return hx_error(HX_ERR_INVALID_ARG, "sampler: mirostat %d must be 0 (off), 1 or 2", (int)p->mirostat);
    if (p->mirostat && (!(p->mirostat_tau > 0.0f) || !is_finite(p->mirostat_tau) || !(p->mirostat_eta >= 0.0f) ||
                        !is_finite(p->mirostat_eta)))
        return hx_error(HX_ERR_INVALID_ARG, "sampler: mirostat_tau %g must be > 0 and mirostat_eta %g >= 0, finite",
                        (double)p->mirostat_tau, (double)p->mirostat_eta);
    if (!(p->dry_multiplier >= 0.0f) || !is_finite(p->dry_multiplier))
        return hx_error(HX_ERR_INVALID_ARG, "sampler: dry_multiplier %g must be finite and >= 0 (0 = off)",
                        (double)p->dry_multiplier);
    if (p->dry_multiplier > 0.0f) {
        if (!(p->dry_base >= 1.0f) || !is_finite(p->dry_base))
            return hx_error(HX_ERR_INVALID_ARG, "sampler: dry_base %g must be finite and >= 1", (double)p->dry_base);
        if (p->dry_allowed_length < 0)
            return hx_error(HX_ERR_INVALID_ARG, "sampler: dry_allowed_length %d must be >= 0", (int)p->dry_allowed_length);
        if (p->dry_penalty_last_n < 0 || p->dry_penalty_last_n > HX_SAMPLER_MAX_LAST_N)
            return hx_error(HX_ERR_INVALID_ARG, "sampler: dry_penalty_last_n %d must be in [0, %d] (0 = off)",
                            (int)p->dry_penalty_last_n, HX_SAMPLER_MAX_LAST_N);
        if (p->n_dry_breakers && !p->dry_breakers)
            return hx_error(HX_ERR_INVALID_ARG, "sampler: %u DRY breakers and a NULL array", p->n_dry_breakers);
    }
    if (!(p->xtc_probability >= 0.0f && p->xtc_probability <= 1.0f) ||
        !(p->xtc_threshold >= 0.0f && p->xtc_threshold <= 1.0f))
        return hx_error(HX_ERR_INVALID_ARG, "sampler: xtc_probability %g and xtc_threshold %g must be in [0, 1]",
                        (double)p->xtc_probability, (double)p->xtc_threshold);
    if (isnan(p->top_n_sigma) || isinf(p->top_n_sigma))
        return hx_error(HX_ERR_INVALID_ARG, "sampler: top_n_sigma %g must be finite (<= 0 = off)", (double)p->top_n_sigma);
    if (!(p->dynatemp_range >= 0.0f) || !is_finite(p->dynatemp_range) || !(p->dynatemp_exponent >= 0.0f) ||
        !is_finite(p->dynatemp_exponent))
        return hx_error(HX_ERR_INVALID_ARG, "sampler: dynatemp_range %g and dynatemp_exponent %g must be finite "
                        "and >= 0", (double)p->dynatemp_range, (double)p->dynatemp_exponent);
    if (p->min_keep < 0)
        return hx_error(HX_ERR_INVALID_ARG, "sampler: min_keep %d must be >= 0", (int)p->min_keep);
    if (p->samplers) {
        size_t n = strlen(p->samplers);
        if (n >= sizeof ((hx_sampler *)0)->order)
            return hx_error(HX_ERR_INVALID_ARG, "sampler: samplers \"%.40s...\" has %zu letters; at most %zu", p->samplers,
                            n, sizeof ((hx_sampler *)0)->order - 1);
        for (size_t i = 0; i < n; i++)
            if (!strchr(HX_DEFAULT_ORDER, p->samplers[i]))
                return hx_error(HX_ERR_INVALID_ARG, "sampler: samplers \"%s\": '%c' is not one of %s (e penalties, "
                                "d dry, s top_n_sigma, k top_k, y typical, p top_p, m min_p, x xtc, t temperature)",
                                p->samplers, p->samplers[i], HX_DEFAULT_ORDER);
    }
    return HX_OK;
}

static int penalties_on(const hx_sampling *p)
{
    return (p->repeat_penalty != 1.0f || p->frequency_penalty != 0.0f || p->presence_penalty != 0.0f) &&
           p->repeat_last_n > 0;
}

static int dry_on(const hx_sampling *p) { return p->dry_multiplier > 0.0f && p->dry_penalty_last_n > 0; }

static const char *const dry_default_breakers[] = {"\n", ":", "\"", "*"};

hx_status hx_sampler_create_for(const hx_sampling *params, const hx_tokenizer *tok, int n_vocab, hx_sampler **out)
{
    if (!out)
        return hx_error(HX_ERR_INVALID_ARG, "sampler: NULL output pointer");
    *out = NULL;
    if (!params)
        return hx_error(HX_ERR_INVALID_ARG, "sampler: NULL parameters");
    hx_status st = check_params(params, n_vocab);
    if (st != HX_OK)
        return st;

    hx_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return hx_error(HX_ERR_NO_MEMORY, "sampler: %zu bytes", sizeof *s);
    s->p = *params;
    s->p.stop = NULL;
    s->p.n_stop = 0;
    s->p.grammar = NULL;
    s->p.logit_bias = NULL;
    s->p.dry_breakers = NULL;
    s->p.samplers = NULL;
    snprintf(s->order, sizeof s->order, "%s", params->samplers ? params->samplers : HX_DEFAULT_ORDER);
    s->n_vocab = n_vocab;
    size_t n = (size_t)n_vocab;
    s->work = malloc(n * sizeof *s->work);
    s->prob = malloc(n * sizeof *s->prob);
    s->heap = malloc(n * sizeof *s->heap);
    s->cand = malloc(n * sizeof *s->cand);
    s->pairs = malloc(n * sizeof *s->pairs);
    int ok = s->work && s->prob && s->heap && s->cand && s->pairs;
    if (ok && params->n_logit_bias) {
        s->n_bias = params->n_logit_bias;
        ok = (s->bias = malloc(s->n_bias * sizeof *s->bias)) != NULL;
        if (ok)
            memcpy(s->bias, params->logit_bias, s->n_bias * sizeof *s->bias);
    }
    const int pen = penalties_on(&s->p) && !s->p.mirostat, dry = dry_on(&s->p) && !s->p.mirostat;
    s->hist_cap = pen ? s->p.repeat_last_n : 0;
    if (dry && s->p.dry_penalty_last_n > s->hist_cap)
        s->hist_cap = s->p.dry_penalty_last_n;
    if (ok && pen) {
        s->stamp = calloc(n, sizeof *s->stamp);
        s->seen = calloc(n, sizeof *s->seen);
        ok = s->stamp && s->seen;
    }
    if (ok && dry) {
        s->dry_count = malloc((size_t)s->p.dry_penalty_last_n * sizeof *s->dry_count);
        s->dry_max = malloc(n * sizeof *s->dry_max);
        s->dry_touched = malloc((size_t)s->p.dry_penalty_last_n * sizeof *s->dry_touched);
        s->dry_rev = malloc((size_t)s->p.dry_penalty_last_n * sizeof *s->dry_rev);
        ok = s->dry_count && s->dry_max && s->dry_touched && s->dry_rev;
        for (size_t i = 0; ok && i < n; i++)
            s->dry_max[i] = -1;
    }
    if (ok && s->p.typical_p > 0.0f && s->p.typical_p < 1.0f)
        ok = (s->scored = malloc(n * sizeof *s->scored)) != NULL;
    if (ok && s->hist_cap)
        ok = (s->hist = malloc((size_t)s->hist_cap * sizeof *s->hist)) != NULL;
    if (!ok) {
        hx_sampler_free(s);
        return hx_error(HX_ERR_NO_MEMORY, "sampler: buffers for %d tokens", n_vocab);
    }
    if (dry) {
        const char *const *br = params->dry_breakers ? params->dry_breakers : dry_default_breakers;
        uint32_t nb = params->dry_breakers ? params->n_dry_breakers : 4;
        if (nb && !tok)
            st = hx_error(HX_ERR_UNSUPPORTED, "sampler: DRY's sequence breakers are text: they need the tokenizer");
        else if (nb)
            st = hx_smp_dry_breakers(s, tok, br, nb);
        if (st) {
            hx_sampler_free(s);
            return st;
        }
    }
    hx_sampler_reset(s);
    *out = s;
    return HX_OK;
}

hx_status hx_sampler_create(const hx_sampling *params, int n_vocab, hx_sampler **out)
{
    return hx_sampler_create_for(params, NULL, n_vocab, out);
}

void hx_sampler_reset(hx_sampler *s)
{
    if (!s)
        return;
    s->hist_len = s->hist_next = 0;
    s->mu = 2.0f * s->p.mirostat_tau;
    rng_seed(s->rng, s->p.seed);
}

void hx_sampler_free(hx_sampler *s)
{
    if (!s)
        return;
    free(s->bias);
    free(s->work);
    free(s->prob);
    free(s->heap);
    free(s->cand);
    free(s->stamp);
    free(s->seen);
    free(s->hist);
    free(s->dry);
    free(s->dry_count);
    free(s->dry_max);
    free(s->dry_touched);
    free(s->dry_rev);
    free(s->scored);
    free(s->pairs);
    free(s);
}

hx_status hx_sampler_accept(hx_sampler *s, int32_t token)
{
    if (!s)
        return hx_error(HX_ERR_INVALID_ARG, "sampler: NULL sampler");
    if (token < 0 || token >= s->n_vocab)
        return hx_error(HX_ERR_RANGE, "sampler: token %d outside [0, %d)", (int)token, s->n_vocab);
    if (!s->hist)
        return HX_OK;
    s->hist[s->hist_next] = token;
    s->hist_next = (s->hist_next + 1) % s->hist_cap;
    if (s->hist_len < s->hist_cap)
        s->hist_len++;
    return HX_OK;
}

/* ---- the chain ---------------------------------------------------------- */

/* Whether stage c would change anything with these settings. */
static int stage_on(const hx_sampler *s, char c)
{
    const hx_sampling *p = &s->p;
    switch (c) {
    case 'e': return penalties_on(p);
    case 'd': return dry_on(p);
    case 's': return p->top_n_sigma > 0.0f;
    case 'k': return p->top_k > 0;
    case 'y': return p->typical_p > 0.0f && p->typical_p < 1.0f;
    case 'p': return p->top_p < 1.0f;
    case 'm': return p->min_p > 0.0f;
    case 'x': return p->xtc_probability > 0.0f && p->xtc_threshold <= 0.5f;
    case 't': return 1;
    }
    return 0;
}

static void run_stage(hx_sampler *s, char c)
{
    const hx_sampling *p = &s->p;
    switch (c) {
    case 'e': hx_smp_penalties(s); break;
    case 'd': hx_smp_dry(s); break;
    case 's': hx_smp_top_n_sigma(s, p->top_n_sigma); break;
    case 'k': hx_smp_top_k(s, p->top_k); break;
    case 'y': hx_smp_typical(s, p->typical_p, p->min_keep); break;
    case 'p': hx_smp_top_p(s, p->top_p, p->min_keep); break;
    case 'm': hx_smp_min_p(s, p->min_p, p->min_keep); break;
    case 'x': hx_smp_xtc(s, p->xtc_probability, p->xtc_threshold, p->min_keep); break;
    case 't': hx_smp_temperature(s, p->temperature, p->dynatemp_range, p->dynatemp_exponent); break;
    }
}

/* The draw from the softmax of the candidates' (scaled) logits. */
static int32_t draw(hx_sampler *s)
{
    if (s->n == 1)
        return s->cand[0];
    const float *w = s->work;
    float max = -INFINITY;
    for (int i = 0; i < s->n; i++)
        max = fmaxf(max, w[s->cand[i]]);
    /* Weights are in (0, 1], so float keeps them to 1e-7 relative; their
     * sum is kept in double. */
    double z = 0.0;
    for (int i = 0; i < s->n; i++) {
        s->prob[i] = expf(w[s->cand[i]] - max);
        z += s->prob[i];
    }
    double u = hx_smp_uniform(s) * z, acc = 0.0;
    for (int i = 0; i < s->n; i++) {
        acc += s->prob[i];
        if (u < acc)
            return s->cand[i];
    }
    return s->cand[s->n - 1]; /* u landed in the last ulp of rounding */
}

/* The logits through the bias and the stages: s->cand[0..n) are left.
 * With Mirostat, only the temperature (Mirostat itself filters as it
 * draws). */
static hx_status run_chain(hx_sampler *s, const float *logits)
{
    const int nv = s->n_vocab;
    float *w = s->work;
    for (int i = 0; i < nv; i++) {
        float v = logits[i];
        if (isnan(v) || v == INFINITY)
            return hx_error(HX_ERR_INVALID_ARG, "sampler: logit of token %d is %g", i, (double)v);
        w[i] = v;
    }
    /* The logit bias first, as llama.cpp's chain has it; a finite sum
     * that overflows stays finite, -inf bans. */
    for (uint32_t i = 0; i < s->n_bias; i++) {
        float v = w[s->bias[i].token] + s->bias[i].bias;
        w[s->bias[i].token] = v == -INFINITY || isnan(v) ? -INFINITY : fminf(fmaxf(v, -FLT_MAX), FLT_MAX);
    }
    /* The finite logits are the candidates, in id order. */
    int m = 0;
    for (int i = 0; i < nv; i++)
        if (w[i] != -INFINITY)
            s->cand[m++] = i;
    if (m == 0)
        return hx_error(HX_ERR_INVALID_ARG, "sampler: every logit is -inf");
    s->n = m;
    s->sorted = 0;

    if (s->p.mirostat) { /* llama.cpp's: temperature, then Mirostat alone */
        hx_smp_temperature(s, s->p.temperature, 0.0f, 1.0f);
        return HX_OK;
    }
    /* Greedy: the stages that always keep the most likely token and
     * change no logit are skipped, unless typical or XTC (which can drop
     * it) look at what they leave. */
    int skip_keepers = 0;
    if (s->p.temperature <= 0.0f) {
        skip_keepers = 1;
        for (const char *c = s->order; *c; c++)
            if ((*c == 'y' || *c == 'x') && stage_on(s, *c))
                skip_keepers = 0;
    }
    for (const char *c = s->order; *c && s->n > 0; c++) {
        if (!stage_on(s, *c))
            continue;
        if (skip_keepers && strchr("skpm", *c))
            continue;
        run_stage(s, *c);
    }
    return HX_OK;
}

hx_status hx_sampler_sample(hx_sampler *s, const float *logits, int32_t *token)
{
    if (!s || !logits || !token)
        return hx_error(HX_ERR_INVALID_ARG, "sampler: NULL %s", !s ? "sampler" : !logits ? "logits" : "token");
    hx_status st = run_chain(s, logits);
    if (st)
        return st;
    *token = s->p.mirostat ? hx_smp_mirostat(s, s->p.mirostat) : draw(s);
    return HX_OK;
}

hx_status hx_sampler_distribution(hx_sampler *s, const float *logits, int32_t *ids, double *probs, int *n)
{
    if (!s || !logits || !ids || !probs || !n)
        return hx_error(HX_ERR_INVALID_ARG, "sampler: NULL argument");
    hx_status st = run_chain(s, logits);
    if (st)
        return st;
    if (s->p.mirostat)
        hx_smp_mirostat_filter(s, s->p.mirostat);
    hx_smp_softmax(s, 0);
    for (int i = 0; i < s->n; i++) {
        ids[i] = s->cand[i];
        probs[i] = s->prob[i];
    }
    *n = s->n;
    return HX_OK;
}

int hx_sampler_last_probs(hx_sampler *s, int32_t token, int32_t *ids, float *probs, int cap, float *token_prob)
{
    /* The draw left the candidates and their logits (Mirostat: its filter's
     * survivors); their softmax, sorted, is the distribution it drew from. */
    hx_smp_softmax(s, 1);
    *token_prob = 0.0f;
    for (int i = 0; i < s->n; i++)
        if (s->cand[i] == token)
            *token_prob = (float)s->prob[i];
    int k = 0;
    for (int i = 0; i < s->n && k < cap && (float)s->prob[i] > 0.0f; i++, k++) {
        ids[k] = s->cand[i];
        probs[k] = (float)s->prob[i];
    }
    return k;
}

float hx_sampler_mirostat_mu(const hx_sampler *s) { return s ? s->mu : NAN; }
