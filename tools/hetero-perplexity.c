/* hetero-perplexity: how well a model predicts a text, and how far its
 * predictions are from a base model's, with llama-perplexity's conventions.
 *
 *   hetero-perplexity -m MODEL.gguf -f TEXT [-c 512] [--chunks N]
 *   hetero-perplexity -m BASE.gguf -f TEXT --kl-divergence-base FILE
 *   hetero-perplexity -m OTHER.gguf --kl-divergence-base FILE --kl-divergence
 *
 * The text is tokenized whole (BOS first where the model asks for one) and
 * cut into chunks of -c tokens.  Each chunk is evaluated alone from an empty
 * context, its first token replaced by BOS where the model asks for one, and
 * only its second half is scored, so that every scored token was predicted
 * from at least c/2 tokens: PPL = exp(mean negative log-likelihood), and its
 * +/- is PPL times the standard error of that mean.
 *
 * --kl-divergence-base alone also saves the base model's log-probabilities
 * of every scored position; with --kl-divergence they are read back (with
 * the tokens: no text is needed) and compared with this model's: mean KL
 * divergence, how often both put the same token on top, the spread of the
 * change in the probability of the right token (Δp), and PPL(Q)/PPL(base).
 * The file has llama.cpp's layout, so a base saved by llama-perplexity can
 * judge hetero and the other way round (little-endian, as on x86-64):
 *   "_logits_", uint32 n_ctx, int32 n_vocab, int32 n_chunk,
 *   int32 tokens[n_chunk * n_ctx] (as tokenized, before BOS replaces any),
 *   then per chunk, per scored position, one row of nv = 2*ceil(n_vocab/2)+4
 *   uint16: float scale, float min (4 uint16), then log p(token i) ~= min +
 *   scale * q[i] for each token, q = 0 for every log p below max - 16. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hetero.h"
#include "tools/chunk_eval.h"

#define PROG "hetero-perplexity"

static void usage(FILE *f)
{
    fputs("usage: hetero-perplexity -m MODEL.gguf (-f TEXT | --kl-divergence-base FILE --kl-divergence) [options]\n"
          "  -f FILE                   text to score (one trailing newline is dropped, as llama.cpp does)\n"
          "  -c N                      tokens per chunk (default 512); the second half of each is scored\n"
          "  --chunks N                score at most the first N chunks (default: all)\n"
          "  --kl-divergence-base FILE save the log-probabilities of every scored position there\n"
          "                            (llama-perplexity's format), or with --kl-divergence read them\n"
          "  --kl-divergence           compare with the base saved in --kl-divergence-base FILE\n"
          CHUNK_OPTIONS_USAGE,
          f);
}

typedef struct {
    chunk_options c;
    const char *base;
    int kld;
} args;

static int parse(int argc, char **argv, args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int taken = chunk_option(PROG, &a->c, o, v);
        if (taken < 0)
            return -1;
        if (taken) {
            i += taken - 1;
            continue;
        }
#define OPT(name) (!strcmp(o, name) && v && ++i)
        if (OPT("--kl-divergence-base")) a->base = v;
        else if (!strcmp(o, "--kl-divergence")) a->kld = 1;
        else if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage(stdout);
            exit(0);
        } else {
            fprintf(stderr, "hetero-perplexity: unknown or incomplete option '%s'\n", o);
            usage(stderr);
            return -1;
        }
#undef OPT
    }
    const char *missing = !a->c.model               ? "-m MODEL.gguf"
                          : a->kld && !a->base      ? "--kl-divergence-base FILE (the base to compare with)"
                          : !a->kld && !a->c.text   ? "-f TEXT"
                                                    : NULL;
    if (missing) {
        fprintf(stderr, "hetero-perplexity: missing %s\n", missing);
        usage(stderr);
        return -1;
    }
    return 0;
}

/* ---- one row of logits ---------------------------------------------------- */

typedef struct {
    double max, lse; /* largest logit; log of sum(exp(logit - max)) */
    int32_t top;     /* first token with the largest logit */
} row_stats;

static row_stats stats_of(const float *l, int32_t n_vocab)
{
    row_stats r = {l[0], 0, 0};
    for (int32_t i = 1; i < n_vocab; i++)
        if (l[i] > r.max)
            r.max = l[i], r.top = i;
    double sum = 0;
    for (int32_t i = 0; i < n_vocab; i++)
        sum += exp((double)l[i] - r.max);
    r.lse = log(sum);
    return r;
}

/* Number of uint16 in one saved row. */
static size_t row_width(int32_t n_vocab) { return 2 * (((size_t)n_vocab + 1) / 2) + 4; }

/* A row's log-probabilities in 16 bits over [max - 16, max] (llama.cpp's
 * layout): scale and the smallest log-probability kept, then a step count
 * per token, rounded to nearest, 0 for anything below the range. */
static void encode_row(const float *l, int32_t n_vocab, row_stats r, uint16_t *out)
{
    float lo = l[0];
    for (int32_t i = 1; i < n_vocab; i++)
        lo = l[i] < lo ? l[i] : lo;
    if (lo < r.max - 16)
        lo = (float)(r.max - 16);
    float scale = (float)((r.max - lo) / 65535), min_lp = (float)(lo - r.max - r.lse);
    memcpy(out, &scale, sizeof scale);
    memcpy(out + 2, &min_lp, sizeof min_lp);
    memset(out + 4, 0, (row_width(n_vocab) - 4) * sizeof *out);
    for (int32_t i = 0; scale > 0 && i < n_vocab; i++)
        out[4 + i] = l[i] > lo ? (uint16_t)lrintf((l[i] - lo) / scale) : 0;
}

static void decode_row_header(const uint16_t *row, float *scale, float *min_lp)
{
    memcpy(scale, row, sizeof *scale);
    memcpy(min_lp, row + 2, sizeof *min_lp);
}

/* ---- statistics --------------------------------------------------------- */

/* Mean of n values from their sum and sum of squares, with the standard
 * error of that mean (0 for fewer than 11 values, as llama.cpp has it). */
static void mean_err(double sum, double sum2, size_t n, double *mean, double *err)
{
    *mean = n ? sum / n : 0;
    double var = n ? sum2 / n - *mean * *mean : 0;
    *err = var > 0 && n > 10 ? sqrt(var / (n - 1)) : 0;
}

typedef struct {
    size_t count, same_top;
    double nll, nll2, nll_base, nll_base2, nll_nll_base;
    double kld, kld2, dp, dp2, dp4;
    float *kld_v, *dp_v; /* every position's KLD and Δp, for percentiles */
} kld_sums;

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Linear interpolation between the sorted values around fraction f. */
static double percentile(const float *v, size_t n, double f)
{
    double p = f * (double)(n - 1);
    size_t i = (size_t)p;
    return i + 1 < n ? (1 - (p - i)) * v[i] + (p - i) * v[i + 1] : v[n - 1];
}

/* One scored position against the base's row: llama.cpp's definitions. */
static void kld_add(kld_sums *k, const float *l, int32_t n_vocab, const uint16_t *base, int32_t next)
{
    row_stats r = stats_of(l, n_vocab);
    float scale, min_lp;
    decode_row_header(base, &scale, &min_lp);
    const uint16_t *q = base + 4;
    double nll = r.max + r.lse - l[next], nll_base = -(scale * q[next] + min_lp);
    double sum = 0, best = 0;
    int32_t top_base = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        double lp_base = scale * q[i] + min_lp;
        if (i == 0 || lp_base > best)
            best = lp_base, top_base = i;
        if (lp_base > -16)
            sum += exp(lp_base) * (lp_base - (l[i] - r.max - r.lse));
    }
    double dp = exp(-nll) - exp(-nll_base);
    k->nll += nll, k->nll2 += nll * nll;
    k->nll_base += nll_base, k->nll_base2 += nll_base * nll_base;
    k->nll_nll_base += nll * nll_base;
    k->kld += sum, k->kld2 += sum * sum;
    k->dp += dp, k->dp2 += dp * dp, k->dp4 += dp * dp * dp * dp;
    k->same_top += r.top == top_base;
    k->kld_v[k->count] = (float)sum;
    k->dp_v[k->count] = (float)dp;
    k->count++;
}

/* ln PPL(Q), ln PPL(base) and the ratio's uncertainty, which subtracts
 * their covariance: the two are measured on the same tokens. */
typedef struct {
    double lq, lq_err, lb, lb_err, ratio_err;
} log_ppls;

static log_ppls log_ppl_of(const kld_sums *k)
{
    log_ppls p;
    mean_err(k->nll, k->nll2, k->count, &p.lq, &p.lq_err);
    mean_err(k->nll_base, k->nll_base2, k->count, &p.lb, &p.lb_err);
    double cov = k->count < 10 ? 0 : (k->nll_nll_base / k->count - p.lq * p.lb) / (k->count - 1);
    double v = p.lq_err * p.lq_err + p.lb_err * p.lb_err - 2 * cov;
    p.ratio_err = v > 0 ? sqrt(v) : 0;
    return p;
}

/* The RMS of Δp, with its uncertainty from the sums of Δp² and Δp⁴. */
static void rms_dp(const kld_sums *k, double *rms, double *err)
{
    double ms, ms_err;
    mean_err(k->dp2, k->dp4, k->count, &ms, &ms_err);
    *rms = sqrt(ms);
    *err = *rms > 0 ? 0.5 / *rms * ms_err : 0;
}

/* How often the top token is the base's, with its binomial uncertainty. */
static void same_top(const kld_sums *k, double *f, double *err)
{
    *f = (double)k->same_top / k->count;
    *err = k->count > 1 ? sqrt(*f * (1 - *f) / (k->count - 1)) : 0;
}

static void print_chunk_kld(int chunk, const kld_sums *k)
{
    log_ppls p = log_ppl_of(k);
    double kl, kl_err, rms, rms_err, top, top_err;
    mean_err(k->kld, k->kld2, k->count, &kl, &kl_err);
    rms_dp(k, &rms, &rms_err);
    same_top(k, &top, &top_err);
    printf("%4d    %9.4f ± %9.4f    %10.5f ± %10.5f    %10.5f ± %10.5f    %6.3f ± %6.3f %%    %6.3f ± %6.3f %%\n",
           chunk, exp(p.lq), exp(p.lq) * p.lq_err, p.lq - p.lb, p.ratio_err, kl, kl_err, 100 * rms, 100 * rms_err,
           100 * top, 100 * top_err);
    fflush(stdout);
}

static void print_kld_summary(kld_sums *k)
{
    size_t n = k->count;
    log_ppls p = log_ppl_of(k);
    double q = exp(p.lq), qe = q * p.lq_err, b = exp(p.lb), be = b * p.lb_err;
    double cov = n < 10 ? 0 : (k->nll_nll_base / n - p.lq * p.lb) / (n - 1);
    double diff_var = qe * qe + be * be - 2 * q * b * cov;
    printf("\n====== Perplexity statistics ======\n");
    printf("Mean PPL(Q)                   : %10.6f ± %10.6f\n", q, qe);
    printf("Mean PPL(base)                : %10.6f ± %10.6f\n", b, be);
    printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n",
           p.lq_err * p.lb_err > 0 ? 100 * cov / (p.lq_err * p.lb_err) : 0);
    printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", p.lq - p.lb, p.ratio_err);
    printf("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", exp(p.lq - p.lb), exp(p.lq - p.lb) * p.ratio_err);
    printf("Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n", q - b, diff_var > 0 ? sqrt(diff_var) : 0);

    qsort(k->kld_v, n, sizeof *k->kld_v, cmp_float);
    qsort(k->dp_v, n, sizeof *k->dp_v, cmp_float);
    double kl, kl_err;
    mean_err(k->kld, k->kld2, n, &kl, &kl_err);
    printf("\n====== KL divergence statistics ======\n");
    printf("Mean    KLD: %10.6f ± %10.6f\n", kl, kl_err);
    static const struct { const char *name; double f; } kq[] = {
        {"Maximum", 1},   {"99.9%  ", .999}, {"99.0%  ", .99}, {"95.0%  ", .95},  {"90.0%  ", .9},  {"Median ", .5},
        {"10.0%  ", .1},  {" 5.0%  ", .05},  {" 1.0%  ", .01}, {" 0.1%  ", .001}, {"Minimum", 0},
    };
    for (size_t i = 0; i < sizeof kq / sizeof *kq; i++)
        printf("%s KLD: %10.6f\n", kq[i].name, percentile(k->kld_v, n, kq[i].f));

    double dp, dp_err, rms, rms_err, top, top_err;
    mean_err(k->dp, k->dp2, n, &dp, &dp_err);
    printf("\n====== Token probability statistics ======\n");
    printf("Mean    Δp: %6.3f ± %5.3f %%\n", 100 * dp, 100 * dp_err);
    static const struct { const char *name; double f; } pq[] = {
        {"Maximum", 1},  {"99.9%  ", .999}, {"99.0%  ", .99}, {"95.0%  ", .95}, {"90.0%  ", .9},
        {"75.0%  ", .75}, {"Median ", .5},  {"25.0%  ", .25}, {"10.0%  ", .1},  {" 5.0%  ", .05},
        {" 1.0%  ", .01}, {" 0.1%  ", .001}, {"Minimum", 0},
    };
    for (size_t i = 0; i < sizeof pq / sizeof *pq; i++)
        printf("%s Δp: %6.3f%%\n", pq[i].name, 100 * percentile(k->dp_v, n, pq[i].f));
    rms_dp(k, &rms, &rms_err);
    same_top(k, &top, &top_err);
    printf("RMS Δp    : %6.3f ± %5.3f %%\n", 100 * rms, 100 * rms_err);
    printf("Same top p: %6.3f ± %5.3f %%\n", 100 * top, 100 * top_err);
}

/* ---- evaluation ----------------------------------------------------------- */

/* What a run does with each scored position's logits. */
typedef struct {
    int32_t n_vocab;
    int kld;                 /* compare with a base (else: perplexity) */
    FILE *base;              /* the base: written, or read with kld */
    uint16_t *row;           /* one saved row */
    double nll, nll2;        /* perplexity mode */
    size_t count;
    kld_sums k;
} scorer;

static int score(void *user, const float *l, int32_t next)
{
    scorer *sc = user;
    size_t w = row_width(sc->n_vocab);
    if (sc->kld) {
        if (fread(sc->row, sizeof *sc->row, w, sc->base) != w) {
            fprintf(stderr, "hetero-perplexity: the base file ends early\n");
            return -1;
        }
        kld_add(&sc->k, l, sc->n_vocab, sc->row, next);
        return 0;
    }
    row_stats r = stats_of(l, sc->n_vocab);
    double nll = r.max + r.lse - l[next];
    sc->nll += nll, sc->nll2 += nll * nll, sc->count++;
    if (sc->base) {
        encode_row(l, sc->n_vocab, r, sc->row);
        if (fwrite(sc->row, sizeof *sc->row, w, sc->base) != w) {
            fprintf(stderr, "hetero-perplexity: writing the base file: %s\n", strerror(errno));
            return -1;
        }
    }
    return 0;
}

/* ---- the base file ---------------------------------------------------------- */

static int write_base_header(FILE *f, uint32_t n_ctx, int32_t n_vocab, int32_t n_chunk, const int32_t *tokens)
{
    return fwrite("_logits_", 1, 8, f) == 8 && fwrite(&n_ctx, 4, 1, f) == 1 && fwrite(&n_vocab, 4, 1, f) == 1 &&
                   fwrite(&n_chunk, 4, 1, f) == 1 &&
                   fwrite(tokens, 4, (size_t)n_chunk * n_ctx, f) == (size_t)n_chunk * n_ctx
               ? 0
               : -1;
}

/* Reads the header and tokens of a saved base, checking them against the
 * file's size and the model's vocabulary. */
static int32_t *read_base_header(FILE *f, const char *path, int32_t n_vocab, uint32_t *n_ctx, int32_t *n_chunk)
{
    char magic[8];
    int32_t nv;
    struct stat st;
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "_logits_", 8) || fread(n_ctx, 4, 1, f) != 1 ||
        fread(&nv, 4, 1, f) != 1 || fread(n_chunk, 4, 1, f) != 1 || fstat(fileno(f), &st)) {
        fprintf(stderr, "hetero-perplexity: %s is not a file of saved log-probabilities (no _logits_ header)\n", path);
        return NULL;
    }
    if (nv != n_vocab) {
        fprintf(stderr, "hetero-perplexity: %s was saved with a vocabulary of %d tokens, the model has %d\n", path,
                nv, n_vocab);
        return NULL;
    }
    uint64_t rows = (uint64_t)(*n_ctx - 1 - *n_ctx / 2) * (uint64_t)*n_chunk;
    uint64_t size = 20 + 4 * (uint64_t)*n_ctx * (uint64_t)*n_chunk + 2 * rows * row_width(nv);
    if (*n_ctx < 4 || *n_ctx > 1 << 20 || *n_chunk < 1 || *n_chunk > 1 << 20 || (uint64_t)st.st_size != size) {
        fprintf(stderr, "hetero-perplexity: %s: n_ctx %u, %d chunks and %d tokens make %llu bytes, the file has %lld\n",
                path, *n_ctx, *n_chunk, nv, (unsigned long long)size, (long long)st.st_size);
        return NULL;
    }
    size_t n = (size_t)*n_ctx * (size_t)*n_chunk;
    int32_t *tokens = malloc(n * sizeof *tokens);
    if (!tokens || fread(tokens, 4, n, f) != n) {
        fprintf(stderr, "hetero-perplexity: reading the tokens of %s failed\n", path);
        free(tokens);
        return NULL;
    }
    return tokens;
}

/* ---- main ------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    args a = {.c = {.n_ctx = 512}};
    if (parse(argc, argv, &a))
        return 2;
    hx_runtime *rt = NULL;
    hx_model *m = NULL;
    hx_tokenizer *tok = NULL;
    int32_t *tokens = NULL;
    char *text = NULL;
    scorer sc = {.kld = a.kld};
    int rc = 1;
    uint32_t n_ctx = (uint32_t)a.c.n_ctx;
    int32_t n_chunk = 0;
    size_t n_tokens = 0;

    if (hx_tokenizer_open(a.c.model, &tok)) {
        fprintf(stderr, "hetero-perplexity: %s\n", hx_last_error());
        goto out;
    }
    sc.n_vocab = hx_tokenizer_vocab_size(tok);
    if (a.kld) {
        if (!(sc.base = fopen(a.base, "rb"))) {
            fprintf(stderr, "hetero-perplexity: cannot open %s: %s\n", a.base, strerror(errno));
            goto out;
        }
        if (!(tokens = read_base_header(sc.base, a.base, sc.n_vocab, &n_ctx, &n_chunk)))
            goto out;
        n_tokens = (size_t)n_ctx * n_chunk;
        if (a.c.text)
            fprintf(stderr, "hetero-perplexity: -f is not read: the tokens come from %s\n", a.base);
        if (n_ctx != (uint32_t)a.c.n_ctx)
            fprintf(stderr, "hetero-perplexity: %s was saved with chunks of %u tokens; using that\n", a.base, n_ctx);
    } else {
        size_t len;
        if (!(text = chunk_read_text(PROG, a.c.text, &len)) ||
            !(tokens = chunk_tokenize(PROG, tok, text, len, &n_tokens)))
            goto out;
        if (n_tokens < 2 * (size_t)n_ctx) {
            fprintf(stderr, "hetero-perplexity: %s is %zu tokens; chunks of %u need at least %u (-c sets it)\n",
                    a.c.text, n_tokens, n_ctx, 2 * n_ctx);
            goto out;
        }
        n_chunk = (int32_t)(n_tokens / n_ctx);
    }
    if (a.c.chunks && a.c.chunks < n_chunk)
        n_chunk = (int32_t)a.c.chunks;

    int batch = a.c.batch && a.c.batch < (long)n_ctx ? (int)a.c.batch : (int)n_ctx;
    a.c.n_ctx = n_ctx; /* a base file's, with --kl-divergence */
    if (chunk_open(&a.c, batch, 0, &rt, &m)) {
        fprintf(stderr, "hetero-perplexity: %s\n", hx_last_error());
        goto out;
    }
    hx_model_info info;
    hx_model_info_get(m, &info);
    if ((int32_t)info.n_vocab != sc.n_vocab) {
        fprintf(stderr, "hetero-perplexity: the model's output has %u tokens, its vocabulary %d\n", info.n_vocab,
                sc.n_vocab);
        goto out;
    }
    if (info.n_ctx_train && n_ctx > info.n_ctx_train)
        fprintf(stderr, "hetero-perplexity: chunks of %u tokens exceed the %u the model was trained on\n", n_ctx,
                info.n_ctx_train);
    int32_t bos = hx_tokenizer_wants_bos(tok) ? hx_tokenizer_bos(tok) : -1;
    fprintf(stderr, "hetero-perplexity: %s (%s, %s): %zu tokens, %d chunks of %u, %u scored in each%s\n", info.name,
            info.arch, info.ftype, n_tokens, n_chunk, n_ctx, n_ctx - 1 - n_ctx / 2,
            bos >= 0 ? ", each starting with BOS" : "");

    size_t rows = (size_t)(n_ctx - 1 - n_ctx / 2) * n_chunk;
    sc.row = malloc(row_width(sc.n_vocab) * sizeof *sc.row);
    if (a.kld) {
        sc.k.kld_v = malloc(rows * sizeof *sc.k.kld_v);
        sc.k.dp_v = malloc(rows * sizeof *sc.k.dp_v);
    } else if (a.base && (!(sc.base = fopen(a.base, "wb")) ||
                          write_base_header(sc.base, n_ctx, sc.n_vocab, n_chunk, tokens))) {
        fprintf(stderr, "hetero-perplexity: cannot write %s: %s\n", a.base, strerror(errno));
        goto out;
    }
    if (!sc.row || (a.kld && (!sc.k.kld_v || !sc.k.dp_v))) {
        fprintf(stderr, "hetero-perplexity: out of memory\n");
        goto out;
    }
    if (a.kld)
        printf("chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              "
               "Δp RMS            Same top p\n");
    double t0 = chunk_clock();
    for (int32_t c = 0; c < n_chunk; c++) {
        if (chunk_eval(PROG, m, tokens + (size_t)c * n_ctx, (int)n_ctx, batch, bos, 0, score, &sc))
            goto out;
        chunk_eta(PROG, &a.c, c + 1, n_chunk, chunk_clock() - t0);
        if (a.kld) {
            print_chunk_kld(c + 1, &sc.k);
        } else {
            printf("[%d]%.4f,", c + 1, exp(sc.nll / sc.count));
            fflush(stdout);
        }
    }
    if (a.kld) {
        if (sc.k.count < 100)
            fprintf(stderr, "hetero-perplexity: %zu positions are too few for statistics\n", sc.k.count);
        else
            print_kld_summary(&sc.k);
    } else {
        double mean = sc.nll / sc.count, var = sc.nll2 / sc.count - mean * mean, ppl = exp(mean);
        double err = var > 0 && sc.count > 1 ? sqrt(var / (sc.count - 1)) * ppl : 0;
        printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl, err);
        if (sc.base && fflush(sc.base)) {
            fprintf(stderr, "hetero-perplexity: writing %s: %s\n", a.base, strerror(errno));
            goto out;
        }
        if (sc.base)
            fprintf(stderr, "hetero-perplexity: log-probabilities of %zu positions saved in %s\n", sc.count, a.base);
    }
    rc = 0;
out:
    if (sc.base && fclose(sc.base) && !a.kld && rc == 0) {
        fprintf(stderr, "hetero-perplexity: writing %s: %s\n", a.base, strerror(errno));
        rc = 1;
    }
    free(sc.row);
    free(sc.k.kld_v);
    free(sc.k.dp_v);
    free(tokens);
    free(text);
    hx_tokenizer_close(tok);
    hx_model_free(m);
    hx_runtime_close(rt);
    return rc;
}
