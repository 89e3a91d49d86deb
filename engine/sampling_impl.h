/* The sampler's state, shared by its files (sampling.c: creation, the
 * chain and the draw; sampling_filters.c: the filters; sampling_dry.c:
 * penalties and DRY).  Internal to the engine.
 *
 * The candidates are token ids in `cand` (n of them); their logits live
 * in `work`, indexed by token id, so a filter only shrinks `cand` and a
 * temperature rescales work[] of the survivors.  `sorted` says cand is in
 * the sampler's order (larger logit first, the lower id on ties). */
#ifndef HX_ENGINE_SAMPLING_IMPL_H
#define HX_ENGINE_SAMPLING_IMPL_H

#include <stdint.h>

#include "engine/sampling.h"

/* llama.cpp's limits on DRY's breakers: characters kept of each, and
 * tokens kept of a breaker's tail after its head token. */
#define HX_DRY_MAX_CHARS 40
#define HX_DRY_MAX_TAIL 20

/* A DRY restart sequence: a head token and the tokens that must follow
 * it (none for a breaker within one token). */
typedef struct {
    int32_t head;
    int n_tail;
    int32_t tail[HX_DRY_MAX_TAIL];
} hx_dry_seq;

/* Typical sampling's scratch: a candidate's distance from the entropy. */
typedef struct {
    double score;
    int pos;
} hx_smp_scored;

/* A candidate with its logit beside it, for sorting in cache order. */
typedef struct {
    float logit;
    int32_t id;
} hx_smp_pair;

struct hx_sampler {
    hx_sampling p;    /* without its pointers, which it does not own     */
    int n_vocab;
    char order[32];   /* the chain's letters (hx_sampling.samplers)       */
    hx_logit_bias *bias;
    uint32_t n_bias;
    float *work;      /* the logits, biased and penalized; per token id   */
    double *prob;     /* softmax of the candidates, parallel to cand      */
    int32_t *heap;    /* scratch of n_vocab ids                           */
    int32_t *cand;    /* the candidates                                   */
    int n;
    int sorted;
    uint32_t *stamp;  /* counted in this call iff stamp == epoch        */
    int32_t *seen;    /* its count in the window, while stamped         */
    uint32_t epoch;
    int32_t *hist;    /* ring of the last hist_cap accepted tokens      */
    int hist_cap, hist_len, hist_next;
    uint64_t rng[4];
    float mu;         /* Mirostat's running maximum surprise            */
    hx_smp_scored *scored; /* n_vocab of them, with typical sampling on  */
    hx_smp_pair *pairs;    /* n_vocab of them: sorting's scratch          */
    /* DRY: its restart sequences sorted by head, its scratch. */
    hx_dry_seq *dry;
    int n_dry;
    int32_t *dry_count;   /* repeat length ending at each window position  */
    int32_t *dry_max;     /* per token id: longest repeat it would extend; -1 none */
    int32_t *dry_touched; /* ids whose dry_max was set in this call        */
    int32_t *dry_rev;     /* the window, the most recent first             */
};

/* Larger logit first, the lower id on ties. */
static inline int hx_smp_before(const float *w, int32_t a, int32_t b)
{
    return w[a] > w[b] || (w[a] == w[b] && a < b);
}

/* Uniform in [0, 1) from the sampler's stream. */
double hx_smp_uniform(hx_sampler *s);
/* The i-th most recent accepted token (0 = the last); i < hist_len. */
int32_t hx_smp_recent(const hx_sampler *s, int i);

/* ---- sampling_filters.c ---- */
/* Sorts the candidates (no-op when sorted). */
void hx_smp_sort(hx_sampler *s);
/* prob[] = softmax of the candidates' logits (sorting first if asked). */
void hx_smp_softmax(hx_sampler *s, int sort);
void hx_smp_top_k(hx_sampler *s, int k);
void hx_smp_top_p(hx_sampler *s, float p, int min_keep);
void hx_smp_min_p(hx_sampler *s, float p, int min_keep);
void hx_smp_typical(hx_sampler *s, float p, int min_keep);
void hx_smp_top_n_sigma(hx_sampler *s, float n);
void hx_smp_xtc(hx_sampler *s, float probability, float threshold, int min_keep);
/* Temperature, with dynamic temperature when range > 0. */
void hx_smp_temperature(hx_sampler *s, float t, float range, float exponent);
/* Mirostat 1 or 2: the filter (what the draw sees, prob[] its softmax),
 * and the whole step: filter, draw, mu updated; the token drawn. */
void hx_smp_mirostat_filter(hx_sampler *s, int version);
int32_t hx_smp_mirostat(hx_sampler *s, int version);

/* ---- sampling_dry.c ---- */
void hx_smp_penalties(hx_sampler *s);
void hx_smp_dry(hx_sampler *s);
/* DRY's restart sequences from the breakers' text (llama.cpp's: every
 * token whose text holds a breaker, and every token whose text ends with
 * a breaker's beginning, followed by the tokens of the breaker's rest). */
hx_status hx_smp_dry_breakers(hx_sampler *s, const hx_tokenizer *tok, const char *const *breakers, uint32_t n);

#endif
