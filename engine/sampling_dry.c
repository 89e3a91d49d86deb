/* The sampler's history-based stages: the repetition penalties and DRY
 * ("don't repeat yourself", llama.cpp's port of koboldcpp's), both over
 * the ring of accepted tokens. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sampling_impl.h"
#include "runtime/error.h"

/* ---- penalties ---------------------------------------------------------- */

/* Every distinct token among the last repeat_last_n: its logit divided by
 * repeat_penalty if > 0, multiplied if <= 0 (once, however often seen),
 * then count * frequency_penalty + presence_penalty taken off. */
void hx_smp_penalties(hx_sampler *s)
{
    if (++s->epoch == 0) { /* wrapped: old stamps could collide */
        memset(s->stamp, 0, (size_t)s->n_vocab * sizeof *s->stamp);
        s->epoch = 1;
    }
    const int n = s->hist_len < s->p.repeat_last_n ? s->hist_len : s->p.repeat_last_n;
    for (int i = 0; i < n; i++) {
        int32_t t = hx_smp_recent(s, i);
        if (s->stamp[t] != s->epoch) {
            s->stamp[t] = s->epoch;
            s->seen[t] = 0;
        }
        s->seen[t]++;
    }
    const float pen = s->p.repeat_penalty, freq = s->p.frequency_penalty, pres = s->p.presence_penalty;
    for (int i = 0; i < n; i++) {
        int32_t t = hx_smp_recent(s, i);
        if (s->seen[t] == 0 || s->work[t] == -INFINITY) { /* done, or never drawn: stays so */
            s->seen[t] = 0;
            continue;
        }
        float v = s->work[t];
        v = v <= 0.0f ? v * pen : v / pen;
        v -= (float)s->seen[t] * freq + pres;
        s->seen[t] = 0;
        /* An extreme penalty must not turn a finite logit into +-inf: +inf
         * would poison the softmax, -inf would silently mask the token. */
        s->work[t] = fminf(fmaxf(v, -FLT_MAX), FLT_MAX);
    }
    s->sorted = 0;
}

/* ---- DRY ---------------------------------------------------------------- */

static int by_head(const void *a, const void *b)
{
    const hx_dry_seq *x = a, *y = b;
    return (x->head > y->head) - (x->head < y->head);
}

/* The first restart sequence with this head, or -1. */
static int first_with_head(const hx_sampler *s, int32_t head)
{
    int lo = 0, hi = s->n_dry;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (s->dry[mid].head < head)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->n_dry && s->dry[lo].head == head ? lo : -1;
}

static hx_status add_seq(hx_sampler *s, int *cap, int32_t head, const int32_t *tail, int n_tail)
{
    for (int i = s->n_dry - 1; i >= 0 && s->dry[i].head == head; i--)
        if (s->dry[i].n_tail == n_tail &&
            (!n_tail || !memcmp(s->dry[i].tail, tail, (size_t)n_tail * sizeof *tail))) /* tail may be NULL */
            return HX_OK; /* already known */
    if (s->n_dry == *cap) {
        int nc = *cap ? 2 * *cap : 64;
        hx_dry_seq *g = realloc(s->dry, (size_t)nc * sizeof *g);
        if (!g)
            return hx_error(HX_ERR_NO_MEMORY, "sampler: DRY sequence breakers");
        s->dry = g;
        *cap = nc;
    }
    hx_dry_seq *q = &s->dry[s->n_dry++];
    q->head = head;
    q->n_tail = n_tail;
    if (n_tail) /* a one-token breaker has no tail (NULL) */
        memcpy(q->tail, tail, (size_t)n_tail * sizeof *tail);
    return HX_OK;
}

hx_status hx_smp_dry_breakers(hx_sampler *s, const hx_tokenizer *tok, const char *const *breakers, uint32_t n)
{
    int cap = 0;
    hx_status st = HX_OK;
    char piece[512];
    int32_t ids[64];
    for (int32_t id = 0; id < s->n_vocab && st == HX_OK; id++) {
        size_t wl = 0;
        if (hx_tokenizer_token_to_piece(tok, id, 1, piece, sizeof piece, &wl) != HX_OK)
            continue; /* a piece over 511 bytes (none in real vocabularies) is not looked at */
        for (uint32_t b = 0; b < n && st == HX_OK; b++) {
            if (!breakers[b])
                return hx_error(HX_ERR_INVALID_ARG, "sampler: DRY breaker %u is NULL", b);
            size_t sl = strlen(breakers[b]);
            if (sl > HX_DRY_MAX_CHARS)
                sl = HX_DRY_MAX_CHARS;
            if (!sl)
                return hx_error(HX_ERR_INVALID_ARG, "sampler: DRY breaker %u is empty", b);
            const char *str = breakers[b];
            int inside = 0;
            for (size_t pos = 0; pos + sl <= wl && !inside; pos++)
                inside = !memcmp(piece + pos, str, sl);
            if (inside) {
                st = add_seq(s, &cap, id, NULL, 0);
                continue;
            }
            /* The piece ends with the breaker's beginning: the rest of the
             * breaker, as tokens, must follow. */
            for (size_t pos = 0; pos < wl && st == HX_OK; pos++) {
                size_t k = wl - pos;
                if (k >= sl || memcmp(piece + pos, str, k))
                    continue;
                size_t nt = 0; /* at most HX_DRY_MAX_CHARS tokens: ids has room */
                hx_status e = hx_tokenizer_encode(tok, str + k, sl - k, 0, 0, ids, 64, &nt);
                if (e != HX_OK)
                    return e;
                st = add_seq(s, &cap, id, ids, (int)(nt > HX_DRY_MAX_TAIL ? HX_DRY_MAX_TAIL : nt));
            }
        }
    }
    if (st == HX_OK && s->n_dry)
        qsort(s->dry, (size_t)s->n_dry, sizeof *s->dry, by_head);
    return st;
}

hx_status hx_sampler_dry_breaker_tokens(hx_sampler *s, const int32_t *seq, int n)
{
    if (!s || !seq || n < 1 || n > HX_DRY_MAX_TAIL + 1)
        return hx_error(HX_ERR_INVALID_ARG, "sampler: a DRY breaker of %d tokens (1 to %d)", n, HX_DRY_MAX_TAIL + 1);
    int cap = s->n_dry; /* grows from here (realloc keeps what is there) */
    hx_status st = add_seq(s, &cap, seq[0], seq + 1, n - 1);
    if (st == HX_OK)
        qsort(s->dry, (size_t)s->n_dry, sizeof *s->dry, by_head);
    return st;
}

/* The longest repetition a restart sequence allows: the distance back to
 * the latest complete breaker in the window (the whole window if none). */
static int restart_limit(const hx_sampler *s, const int32_t *r, int n)
{
    for (int i = 0; i < n; i++) {
        int k = first_with_head(s, r[i]);
        if (k < 0)
            continue;
        int longest = -1;
        for (; k < s->n_dry && s->dry[k].head == r[i]; k++) {
            const hx_dry_seq *q = &s->dry[k];
            if (q->n_tail <= longest || q->n_tail > i)
                continue;
            int match = 1;
            /* The tail follows the head in time: towards the recent end. */
            for (int o = 0; o < q->n_tail && match; o++)
                match = q->tail[o] == r[i - o - 1];
            if (match)
                longest = q->n_tail;
        }
        if (longest >= 0)
            return i - longest;
    }
    return n;
}

void hx_smp_dry(hx_sampler *s)
{
    const int allowed = s->p.dry_allowed_length;
    const int n = s->hist_len < s->p.dry_penalty_last_n ? s->hist_len : s->p.dry_penalty_last_n;
    if (n <= allowed)
        return;
    int32_t *r = s->dry_rev, *z = s->dry_count;
    for (int i = 0; i < n; i++)
        r[i] = hx_smp_recent(s, i);
    const int limit = restart_limit(s, r, n);
    if (limit < allowed)
        return;
    /* Z-function of the reversed window: z[k] is how many of the latest
     * tokens are repeated just before position k back, so the token that
     * followed that earlier copy, r[k - 1], would extend a repetition of
     * z[k] tokens. */
    z[0] = n;
    for (int k = 1, l = 0, rr = 0; k < n; k++) {
        int v = 0;
        if (k < rr)
            v = z[k - l] < rr - k ? z[k - l] : rr - k;
        while (k + v < n && r[v] == r[k + v])
            v++;
        z[k] = v;
        if (k + v > rr) {
            l = k;
            rr = k + v;
        }
    }
    int n_touched = 0;
    for (int k = 1; k < n; k++) {
        int len = z[k] < limit ? z[k] : limit;
        if (len < allowed)
            continue;
        int32_t t = r[k - 1];
        if (s->dry_max[t] < 0)
            s->dry_touched[n_touched++] = t;
        if (len > s->dry_max[t])
            s->dry_max[t] = len;
    }
    /* The penalty's exponent is held where base^exponent would overflow. */
    const float base = s->p.dry_base, mult = s->p.dry_multiplier;
    const int max_exp = base > 1.000001f ? (int)(88.7228391f / logf(base)) : 0;
    for (int i = 0; i < n_touched; i++) {
        int32_t t = s->dry_touched[i];
        int single_breaker = 0;
        for (int k = first_with_head(s, t); k >= 0 && k < s->n_dry && s->dry[k].head == t; k++)
            single_breaker |= s->dry[k].n_tail == 0;
        if (!single_breaker && s->work[t] != -INFINITY) {
            int e = s->dry_max[t] - allowed;
            if (max_exp > 0 && e > max_exp)
                e = max_exp;
            s->work[t] = fmaxf(s->work[t] - mult * powf(base, (float)e), -FLT_MAX);
        }
        s->dry_max[t] = -1;
    }
    s->sorted = 0;
}
