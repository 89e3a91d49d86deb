/* The token sampler (see sampling.h for the chain and its conventions). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sampling.h"
#include "runtime/error.h"

struct hx_sampler {
    hx_sampling p;    /* without the stop strings, which it does not own */
    int n_vocab;
    float *work;      /* the penalized logits                           */
    double *weight;   /* exp((logit - max) / T) of each survivor        */
    int32_t *heap;    /* finite-logit token ids (a heap for top-p)      */
    int32_t *cand;    /* survivors, most likely first when ordered      */
    uint32_t *stamp;  /* counted in this call iff stamp == epoch        */
    int32_t *seen;    /* its count in the window, while stamped         */
    uint32_t epoch;
    int32_t *hist;    /* ring of the last repeat_last_n accepted tokens */
    int hist_len, hist_next;
    uint64_t rng[4];
};

/* llama.cpp's defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05,
 * no repetition penalty (1.0) over a window of 64; seed 0; no stop strings. */
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
static double rng_uniform(uint64_t s[4]) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }

static void rng_seed(uint64_t s[4], uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        s[i] = splitmix64(&seed); /* distinct inputs of a bijection: never the all-zero state */
}

/* ---- creation ----------------------------------------------------------- */

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
    return HX_OK;
}

static int penalties_on(const hx_sampler *s)
{
    return (s->p.repeat_penalty != 1.0f || s->p.frequency_penalty != 0.0f || s->p.presence_penalty != 0.0f) &&
           s->p.repeat_last_n > 0;
}

hx_status hx_sampler_create(const hx_sampling *params, int n_vocab, hx_sampler **out)
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
    s->n_vocab = n_vocab;
    size_t n = (size_t)n_vocab;
    s->work = malloc(n * sizeof *s->work);
    s->weight = malloc(n * sizeof *s->weight);
    s->heap = malloc(n * sizeof *s->heap);
    s->cand = malloc(n * sizeof *s->cand);
    int ok = s->work && s->weight && s->heap && s->cand;
    if (ok && penalties_on(s)) {
        s->stamp = calloc(n, sizeof *s->stamp);
        s->seen = calloc(n, sizeof *s->seen);
        s->hist = malloc((size_t)params->repeat_last_n * sizeof *s->hist);
        ok = s->stamp && s->seen && s->hist;
    }
    if (!ok) {
        hx_sampler_free(s);
        return hx_error(HX_ERR_NO_MEMORY, "sampler: buffers for %d tokens", n_vocab);
    }
    hx_sampler_reset(s);
    *out = s;
    return HX_OK;
}

void hx_sampler_reset(hx_sampler *s)
{
    if (!s)
        return;
    s->hist_len = s->hist_next = 0;
    rng_seed(s->rng, s->p.seed);
}

void hx_sampler_free(hx_sampler *s)
{
    if (!s)
        return;
    free(s->work);
    free(s->weight);
    free(s->heap);
    free(s->cand);
    free(s->stamp);
    free(s->seen);
    free(s->hist);
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
    s->hist_next = (s->hist_next + 1) % s->p.repeat_last_n;
    if (s->hist_len < s->p.repeat_last_n)
        s->hist_len++;
    return HX_OK;
}

/* ---- the chain ---------------------------------------------------------- */

static void apply_penalties(hx_sampler *s)
{
    if (++s->epoch == 0) { /* wrapped: old stamps could collide */
        memset(s->stamp, 0, (size_t)s->n_vocab * sizeof *s->stamp);
        s->epoch = 1;
    }
    /* How often each token is in the window (stamped this epoch), then
     * each distinct token penalized once, its count cleared as it is. */
    for (int i = 0; i < s->hist_len; i++) {
        int32_t t = s->hist[i];
        if (s->stamp[t] != s->epoch) {
            s->stamp[t] = s->epoch;
            s->seen[t] = 0;
        }
        s->seen[t]++;
    }
    const float pen = s->p.repeat_penalty, freq = s->p.frequency_penalty, pres = s->p.presence_penalty;
    for (int i = 0; i < s->hist_len; i++) {
        int32_t t = s->hist[i];
        if (s->seen[t] == 0)
            continue;
        float v = s->work[t];
        v = v <= 0.0f ? v * pen : v / pen;
        v -= (float)s->seen[t] * freq + pres;
        s->seen[t] = 0;
        /* An extreme penalty must not turn a finite logit into +-inf: +inf
         * would poison the softmax, -inf would silently mask the token. */
        s->work[t] = fminf(fmaxf(v, -FLT_MAX), FLT_MAX);
    }
}

/* The order of the sampler: larger logit first, the lower id on ties, so
 * every ordering decision (greedy, the top-k boundary) is deterministic. */
static int before(const float *w, int32_t a, int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); }

/* Binary heap of token ids: the root is the first in the sampler's order,
 * or with `worst_root` the last. */
static void sift_down(const float *w, int32_t *h, int n, int i, int worst_root)
{
    for (;;) {
        int l = 2 * i + 1, top = i;
        for (int c = l; c <= l + 1 && c < n; c++)
            if (worst_root ? before(w, h[top], h[c]) : before(w, h[c], h[top]))
                top = c;
        if (top == i)
            return;
        int32_t t = h[i];
        h[i] = h[top];
        h[top] = t;
        i = top;
    }
}

static int32_t heap_pop(const float *w, int32_t *h, int *n)
{
    int32_t top = h[0];
    h[0] = h[--*n];
    sift_down(w, h, *n, 0, 0);
    return top;
}

/* The k best of the m ids in s->heap into s->cand, best first: one pass
 * keeping the k best seen in a heap whose root is the worst of them
 * (O(m log k), and mostly one comparison per id), then a heap sort. */
static void select_top_k(hx_sampler *s, int m, int k)
{
    const float *w = s->work;
    int32_t *h = s->cand;
    for (int i = 0; i < k; i++)
        h[i] = s->heap[i];
    for (int i = k / 2 - 1; i >= 0; i--)
        sift_down(w, h, k, i, 1);
    for (int i = k; i < m; i++) {
        if (before(w, s->heap[i], h[0])) {
            h[0] = s->heap[i];
            sift_down(w, h, k, 0, 1);
        }
    }
    for (int end = k - 1; end > 0; end--) { /* the worst goes last */
        int32_t t = h[0];
        h[0] = h[end];
        h[end] = t;
        sift_down(w, h, end, 0, 1);
    }
}

/* Top-p over the n survivors of top-k in s->cand (best first), the
 * probabilities renormalized over them. */
static int cut_top_p(const hx_sampler *s, int n, float max)
{
    const float *w = s->work;
    double z = 0.0, cum = 0.0;
    for (int i = 0; i < n; i++)
        z += expf(w[s->cand[i]] - max);
    for (int i = 0; i < n; i++) {
        cum += expf(w[s->cand[i]] - max) / z;
        if (cum >= s->p.top_p)
            return i + 1;
    }
    return n;
}

/* Top-p over all m ids in s->heap: heapify, then pop only as far as the
 * nucleus reaches (O(m + n log m) for a nucleus of n). */
static int select_top_p(hx_sampler *s, int m, float max)
{
    const float *w = s->work;
    double z = 0.0, cum = 0.0;
    for (int i = 0; i < m; i++)
        z += expf(w[s->heap[i]] - max);
    for (int i = m / 2 - 1; i >= 0; i--)
        sift_down(w, s->heap, m, i, 0);
    int hn = m, n = 0;
    while (hn > 0) {
        int32_t t = heap_pop(w, s->heap, &hn);
        s->cand[n++] = t;
        cum += expf(w[t] - max) / z;
        if (cum >= s->p.top_p)
            break;
    }
    return n;
}

hx_status hx_sampler_sample(hx_sampler *s, const float *logits, int32_t *token)
{
    if (!s || !logits || !token)
        return hx_error(HX_ERR_INVALID_ARG, "sampler: NULL %s", !s ? "sampler" : !logits ? "logits" : "token");
    const int nv = s->n_vocab;
    float *w = s->work;
    for (int i = 0; i < nv; i++) {
        float v = logits[i];
        if (isnan(v) || v == INFINITY)
            return hx_error(HX_ERR_INVALID_ARG, "sampler: logit of token %d is %g", i, (double)v);
        w[i] = v;
    }
    if (penalties_on(s))
        apply_penalties(s);

    /* The finite logits are the candidates; the best one survives every filter. */
    int m = 0;
    int32_t best = -1;
    for (int i = 0; i < nv; i++) {
        if (w[i] == -INFINITY)
            continue;
        s->heap[m++] = i;
        if (best < 0 || w[i] > w[best])
            best = i;
    }
    if (m == 0)
        return hx_error(HX_ERR_INVALID_ARG, "sampler: every logit is -inf");
    if (s->p.temperature == 0.0f) {
        *token = best;
        return HX_OK;
    }
    const float max = w[best];

    int n;
    if (s->p.top_k > 0 && s->p.top_k < m) {
        select_top_k(s, m, s->p.top_k);
        n = s->p.top_p < 1.0f ? cut_top_p(s, s->p.top_k, max) : s->p.top_k;
    } else if (s->p.top_p < 1.0f) {
        n = select_top_p(s, m, max);
    } else {
        memcpy(s->cand, s->heap, (size_t)m * sizeof *s->cand);
        n = m;
    }

    if (s->p.min_p > 0.0f) {
        const float floor_logit = max + logf(s->p.min_p);
        int kept = 0;
        for (int i = 0; i < n; i++)
            if (w[s->cand[i]] >= floor_logit)
                s->cand[kept++] = s->cand[i];
        n = kept; /* >= 1: the max is always kept, since ln(min_p) <= 0 */
    }

    /* Divided, not multiplied by 1/T: with a subnormal T, 1/T is inf and
     * 0 * inf would make the leader's weight NaN.  Weights are in (0, 1],
     * so float keeps them to 1e-7 relative; their sum is kept in double. */
    const float t = s->p.temperature;
    double z = 0.0;
    for (int i = 0; i < n; i++) {
        s->weight[i] = expf((w[s->cand[i]] - max) / t);
        z += s->weight[i];
    }
    double u = rng_uniform(s->rng) * z, acc = 0.0;
    for (int i = 0; i < n; i++) {
        acc += s->weight[i];
        if (u < acc) {
            *token = s->cand[i];
            return HX_OK;
        }
    }
    *token = s->cand[n - 1]; /* u landed in the last ulp of rounding */
    return HX_OK;
}
