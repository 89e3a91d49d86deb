/* The sampler's filters over its candidates (sampling_impl.h), each with
 * llama.cpp's semantics (src/llama-sampler.cpp): top-k, top-p, min-p,
 * locally typical, top-n-sigma, XTC, temperature (with dynamic
 * temperature), Mirostat 1 and 2.  Each keeps at least one token. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sampling_impl.h"

/* ---- ordering ----------------------------------------------------------- */

/* Binary heap of token ids: the root is the first in the sampler's order,
 * or with `worst_root` the last. */
static void sift_down(const float *w, int32_t *h, int n, int i, int worst_root)
{
    for (;;) {
        int l = 2 * i + 1, top = i;
        for (int c = l; c <= l + 1 && c < n; c++)
            if (worst_root ? hx_smp_before(w, h[top], h[c]) : hx_smp_before(w, h[c], h[top]))
                top = c;
        if (top == i)
            return;
        int32_t t = h[i];
        h[i] = h[top];
        h[top] = t;
        i = top;
    }
}

/* Heap sort of h[0..n) into the sampler's order (a heap whose root is the
 * worst, the worst moved to the end each time). */
static void heap_sort(const float *w, int32_t *h, int n)
{
    for (int i = n / 2 - 1; i >= 0; i--)
        sift_down(w, h, n, i, 1);
    for (int end = n - 1; end > 0; end--) {
        int32_t t = h[0];
        h[0] = h[end];
        h[end] = t;
        sift_down(w, h, end, 0, 1);
    }
}

static int by_pair(const void *a, const void *b)
{
    const hx_smp_pair *x = a, *y = b;
    if (x->logit != y->logit)
        return x->logit > y->logit ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* A full sort: the logits copied beside their ids first, so that the
 * comparisons read memory in order (the logits by id are scattered). */
void hx_smp_sort(hx_sampler *s)
{
    if (s->sorted)
        return;
    for (int i = 0; i < s->n; i++) {
        s->pairs[i].logit = s->work[s->cand[i]];
        s->pairs[i].id = s->cand[i];
    }
    qsort(s->pairs, (size_t)s->n, sizeof *s->pairs, by_pair);
    for (int i = 0; i < s->n; i++)
        s->cand[i] = s->pairs[i].id;
    s->sorted = 1;
}

static float cand_max(const hx_sampler *s)
{
    if (s->sorted)
        return s->work[s->cand[0]];
    float m = -INFINITY;
    for (int i = 0; i < s->n; i++)
        m = fmaxf(m, s->work[s->cand[i]]);
    return m;
}

void hx_smp_softmax(hx_sampler *s, int sort)
{
    if (sort)
        hx_smp_sort(s);
    const float max = cand_max(s);
    double z = 0.0;
    for (int i = 0; i < s->n; i++) {
        s->prob[i] = exp((double)s->work[s->cand[i]] - max);
        z += s->prob[i];
    }
    for (int i = 0; i < s->n; i++)
        s->prob[i] /= z;
}

/* ---- top-k -------------------------------------------------------------- */

/* The k best candidates, best first: one pass keeping the k best seen in
 * a heap whose root is the worst of them (O(n log k), mostly one
 * comparison per id), then a heap sort of those k. */
void hx_smp_top_k(hx_sampler *s, int k)
{
    if (k <= 0 || k >= s->n)
        return;
    const float *w = s->work;
    int32_t *h = s->heap;
    memcpy(h, s->cand, (size_t)k * sizeof *h);
    for (int i = k / 2 - 1; i >= 0; i--)
        sift_down(w, h, k, i, 1);
    for (int i = k; i < s->n; i++) {
        if (hx_smp_before(w, s->cand[i], h[0])) {
            h[0] = s->cand[i];
            sift_down(w, h, k, 0, 1);
        }
    }
    heap_sort(w, h, k);
    memcpy(s->cand, h, (size_t)k * sizeof *h);
    s->n = k;
    s->sorted = 1;
}

/* ---- top-p -------------------------------------------------------------- */

/* The smallest prefix, most likely first, whose probability reaches p
 * (and at least min_keep tokens).  Unsorted candidates are heapified and
 * popped only as far as the nucleus reaches (O(n + m log n) for m kept). */
void hx_smp_top_p(hx_sampler *s, float p, int min_keep)
{
    if (p >= 1.0f)
        return;
    const float *w = s->work;
    const float max = cand_max(s);
    double z = 0.0, cum = 0.0;
    for (int i = 0; i < s->n; i++)
        z += exp((double)w[s->cand[i]] - max);
    if (s->sorted) {
        for (int i = 0; i < s->n; i++) {
            cum += exp((double)w[s->cand[i]] - max) / z;
            if (cum >= p && i + 1 >= min_keep) {
                s->n = i + 1;
                return;
            }
        }
        return;
    }
    int32_t *h = s->heap;
    int hn = s->n, kept = 0;
    memcpy(h, s->cand, (size_t)hn * sizeof *h);
    for (int i = hn / 2 - 1; i >= 0; i--)
        sift_down(w, h, hn, i, 0);
    while (hn > 0) {
        int32_t t = h[0];
        h[0] = h[--hn];
        sift_down(w, h, hn, 0, 0);
        s->cand[kept++] = t;
        cum += exp((double)w[t] - max) / z;
        if (cum >= p && kept >= min_keep)
            break;
    }
    s->n = kept;
    s->sorted = 1;
}

/* ---- min-p -------------------------------------------------------------- */

/* The tokens whose probability is at least p times the largest (logit >=
 * max + ln p), at least min_keep of them (the most likely). */
void hx_smp_min_p(hx_sampler *s, float p, int min_keep)
{
    if (p <= 0.0f || s->n == 0)
        return;
    const float floor_logit = cand_max(s) + logf(p);
    int kept = 0;
    for (int i = 0; i < s->n; i++)
        kept += s->work[s->cand[i]] >= floor_logit;
    if (kept < min_keep) {
        hx_smp_sort(s); /* the kept ones are a prefix; min_keep extends it */
        s->n = min_keep < s->n ? min_keep : s->n;
        return;
    }
    kept = 0;
    for (int i = 0; i < s->n; i++)
        if (s->work[s->cand[i]] >= floor_logit)
            s->cand[kept++] = s->cand[i];
    s->n = kept; /* >= 1: the max is kept, since ln p <= 0 */
}

/* ---- locally typical ---------------------------------------------------- */

static int by_score(const void *a, const void *b)
{
    const hx_smp_scored *x = a, *y = b;
    if (x->score != y->score)
        return x->score < y->score ? -1 : 1;
    return x->pos - y->pos;
}

/* Tokens ordered by how far their surprise -ln p is from the entropy, the
 * nearest first, kept until their probability exceeds p (and at least
 * min_keep); they stay in that order, unsorted. */
void hx_smp_typical(hx_sampler *s, float p, int min_keep)
{
    if (p >= 1.0f || p <= 0.0f || s->n <= 1)
        return;
    hx_smp_softmax(s, 1);
    double h = 0.0;
    for (int i = 0; i < s->n; i++)
        if (s->prob[i] > 0.0)
            h -= s->prob[i] * log(s->prob[i]);
    hx_smp_scored *sc = s->scored;
    for (int i = 0; i < s->n; i++) {
        sc[i].score = s->prob[i] > 0.0 ? fabs(-log(s->prob[i]) - h) : INFINITY;
        sc[i].pos = i;
    }
    qsort(sc, (size_t)s->n, sizeof *sc, by_score);
    double cum = 0.0;
    int last = s->n;
    for (int i = 0; i < s->n; i++) {
        cum += s->prob[sc[i].pos];
        if (cum > p && (min_keep == 0 || i >= min_keep - 1)) {
            last = i + 1;
            break;
        }
    }
    for (int i = 0; i < last; i++)
        s->heap[i] = s->cand[sc[i].pos];
    memcpy(s->cand, s->heap, (size_t)last * sizeof *s->cand);
    s->n = last;
    s->sorted = 0;
}

/* ---- top-n-sigma -------------------------------------------------------- */

/* The tokens whose logit is within n standard deviations (of the
 * candidates' logits) of the largest. */
void hx_smp_top_n_sigma(hx_sampler *s, float nsig)
{
    if (nsig <= 0.0f || s->n <= 1)
        return;
    const float *w = s->work;
    double sum = 0.0, max = -INFINITY;
    for (int i = 0; i < s->n; i++) {
        sum += w[s->cand[i]];
        max = fmax(max, w[s->cand[i]]);
    }
    const double mean = sum / s->n;
    double acc = 0.0;
    for (int i = 0; i < s->n; i++)
        acc += (w[s->cand[i]] - mean) * (w[s->cand[i]] - mean);
    const double floor_logit = max - nsig * sqrt(acc / s->n);
    int kept = 0;
    for (int i = 0; i < s->n; i++)
        if (w[s->cand[i]] >= floor_logit)
            s->cand[kept++] = s->cand[i];
    s->n = kept;
}

/* ---- XTC ---------------------------------------------------------------- */

/* With the given probability, the tokens at or above the threshold go,
 * all but the least likely of them (so something above it stays); not
 * when fewer than min_keep would be left. */
void hx_smp_xtc(hx_sampler *s, float probability, float threshold, int min_keep)
{
    if (probability <= 0.0f || threshold > 0.5f || s->n < 2)
        return;
    if (hx_smp_uniform(s) > probability)
        return;
    hx_smp_softmax(s, 1);
    int last = 0;
    while (last + 1 < s->n && s->prob[last + 1] >= threshold)
        last++;
    if (s->prob[0] < threshold)
        last = 0;
    if (last > 0 && s->n - last >= min_keep) {
        memmove(s->cand, s->cand + last, (size_t)(s->n - last) * sizeof *s->cand);
        s->n -= last;
    }
}

/* ---- temperature -------------------------------------------------------- */

static void keep_best(hx_sampler *s)
{
    int32_t best = s->cand[0];
    for (int i = 1; i < s->n; i++)
        if (hx_smp_before(s->work, s->cand[i], best))
            best = s->cand[i];
    s->cand[0] = best;
    s->n = 1;
    s->sorted = 1;
}

/* Logits divided by t; t <= 0 keeps only the most likely (greedy), as
 * does a t so small that a logit over it overflows. */
static void scale(hx_sampler *s, float t)
{
    if (s->n == 0)
        return;
    if (t <= 0.0f) {
        keep_best(s);
        return;
    }
    float big = 0.0f;
    for (int i = 0; i < s->n; i++)
        big = fmaxf(big, fabsf(s->work[s->cand[i]]));
    if (isinf(big / t)) {
        keep_best(s);
        return;
    }
    for (int i = 0; i < s->n; i++)
        s->work[s->cand[i]] /= t; /* divided, not times 1/t: 1/t may be inf */
}

void hx_smp_temperature(hx_sampler *s, float t, float range, float exponent)
{
    if (range <= 0.0f) {
        scale(s, t);
        return;
    }
    if (s->n <= 1)
        return;
    const float lo = fmaxf(0.0f, t - range), hi = t + range;
    const double max_entropy = log((double)s->n);
    hx_smp_softmax(s, 1);
    double h = 0.0;
    for (int i = 0; i < s->n; i++)
        if (s->prob[i] > 0.0)
            h -= s->prob[i] * log(s->prob[i]);
    const double norm = h / max_entropy;
    scale(s, (float)(lo + (hi - lo) * pow(norm, exponent)));
}

/* ---- the draw and Mirostat ---------------------------------------------- */

/* The index of a candidate drawn from prob[] (normalized). */
static int draw_index(hx_sampler *s)
{
    double u = hx_smp_uniform(s), acc = 0.0;
    for (int i = 0; i < s->n; i++) {
        acc += s->prob[i];
        if (u < acc)
            return i;
    }
    return s->n - 1;
}

/* The probabilities of the m most likely candidates, most likely first,
 * into s->prob[0..m), without reordering the candidates (a heap selection
 * over the logits, then their softmax over all). */
static void top_probs(hx_sampler *s, int m)
{
    const float *w = s->work;
    int32_t *h = s->heap;
    memcpy(h, s->cand, (size_t)m * sizeof *h);
    for (int i = m / 2 - 1; i >= 0; i--)
        sift_down(w, h, m, i, 1);
    for (int i = m; i < s->n; i++)
        if (hx_smp_before(w, s->cand[i], h[0])) {
            h[0] = s->cand[i];
            sift_down(w, h, m, 0, 1);
        }
    heap_sort(w, h, m);
    const float max = w[h[0]];
    double z = 0.0;
    for (int i = 0; i < s->n; i++)
        z += exp((double)w[s->cand[i]] - max);
    for (int i = 0; i < m; i++)
        s->prob[i] = exp((double)w[h[i]] - max) / z;
}

void hx_smp_mirostat_filter(hx_sampler *s, int version)
{
    if (version == 1 && s->n > 1) {
        /* Zipf's exponent estimated from the 100 most likely tokens, then
         * the k that makes the expected surprise mu. */
        const int m = s->n < 100 ? s->n : 100;
        top_probs(s, m);
        double sum_tb = 0.0, sum_tt = 0.0;
        for (int i = 0; i < m - 1; i++) {
            double ti = log((double)(i + 2) / (double)(i + 1));
            double bi = log(s->prob[i] / s->prob[i + 1]);
            sum_tb += ti * bi;
            sum_tt += ti * ti;
        }
        const double s_hat = sum_tb / sum_tt, eps = s_hat - 1.0;
        const double k = pow(eps * pow(2.0, s->mu) / (1.0 - pow((double)s->n_vocab, -eps)), 1.0 / s_hat);
        int ki = !(k >= 1.0) ? 1 : k >= (double)s->n ? s->n : (int)k;
        hx_smp_top_k(s, ki);
    } else if (version == 2) {
        /* The tokens whose surprise (bits) is at most mu: p >= 2^-mu, a
         * prefix of the sorted candidates, found before sorting them. */
        const float max = cand_max(s);
        double z = 0.0;
        for (int i = 0; i < s->n; i++)
            z += exp((double)s->work[s->cand[i]] - max);
        int keep = 0;
        for (int i = 0; i < s->n; i++)
            if (-log2(exp((double)s->work[s->cand[i]] - max) / z) <= s->mu)
                s->cand[keep++] = s->cand[i];
        if (keep)
            s->n = keep;
        else
            hx_smp_top_k(s, 1);
    }
    hx_smp_softmax(s, 1);
}

int32_t hx_smp_mirostat(hx_sampler *s, int version)
{
    hx_smp_mirostat_filter(s, version);
    const int idx = draw_index(s);
    const double surprise = -log2(s->prob[idx]);
    s->mu -= s->p.mirostat_eta * (float)(surprise - s->p.mirostat_tau);
    return s->cand[idx];
}
