/* hetero-imatrix: the importance matrix of a model over a calibration
 * text, with llama-imatrix's conventions and files.
 *
 *   hetero-imatrix -m MODEL.gguf -f TEXT [-o imatrix.gguf] [-c 512] [--chunks N]
 *   hetero-imatrix --in-file A.gguf --in-file B.dat ... [-o merged.gguf]
 *   hetero-imatrix --in-file imatrix.gguf --show-statistics
 *
 * The text is cut into chunks of -c tokens, each evaluated from an empty
 * context as hetero-perplexity does (and its perplexity printed on the
 * way, as llama-imatrix does); every matmul of at least 16 rows with a
 * layer's weight adds its input's squared columns to that weight's sums
 * (hx_imatrix_collect in hetero.h), whatever device ran it.  --in-file
 * adds files written before (either form) to what is collected, or, with
 * no text, merges them.  The result is written in llama.cpp's GGUF form,
 * or its legacy .dat form with --output-format dat. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hetero.h"
#include "tools/chunk_eval.h"

#define PROG "hetero-imatrix"
#define MAX_IN_FILES 64

static void usage(FILE *f)
{
    fputs("usage: hetero-imatrix -m MODEL.gguf -f TEXT [-o imatrix.gguf] [options]\n"
          "       hetero-imatrix --in-file F [--in-file F ...] [-o imatrix.gguf]   (merge)\n"
          "       hetero-imatrix --in-file F --show-statistics\n"
          "  -f FILE                   calibration text (one trailing newline is dropped, as llama.cpp does)\n"
          "  -o FILE                   where to write (default imatrix.gguf)\n"
          "  --output-format F         gguf (default) or dat (llama.cpp's legacy format)\n"
          "  -c N                      tokens per chunk (default 512)\n"
          "  --chunks N                evaluate at most the first N chunks (default: all)\n"
          "  --in-file FILE            add an imatrix file written before (GGUF or .dat); repeatable\n"
          "  --process-output          collect output.weight too (its input is every position's)\n"
          "  --no-ppl                  do not compute the perplexity along the way\n"
          "  --show-statistics         statistics of the one --in-file, as llama-imatrix prints them\n"
          CHUNK_OPTIONS_USAGE,
          f);
}

typedef struct {
    chunk_options c;
    const char *out;
    const char *in[MAX_IN_FILES];
    int n_in;
    hx_imatrix_format format;
    int process_output, no_ppl, show_stats;
} args;

static int parse_format(const char *v, hx_imatrix_format *out)
{
    if (!strcmp(v, "gguf") || !strcmp(v, "dat")) {
        *out = !strcmp(v, "dat") ? HX_IMATRIX_DAT : HX_IMATRIX_GGUF;
        return 0;
    }
    fprintf(stderr, PROG ": --output-format is gguf or dat, not '%s'\n", v);
    return -1;
}

static int parse(int argc, char **argv, args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0, taken = chunk_option(PROG, &a->c, o, v);
        if (taken < 0)
            return -1;
        if (taken) {
            i += taken - 1;
            continue;
        }
#define OPT(name) (!strcmp(o, name) && v && ++i)
        if (OPT("-o")) a->out = v;
        else if (OPT("--output-format")) bad = parse_format(v, &a->format);
        else if (OPT("--in-file")) {
            if (a->n_in == MAX_IN_FILES) {
                fprintf(stderr, PROG ": at most %d --in-file\n", MAX_IN_FILES);
                return -1;
            }
            a->in[a->n_in++] = v;
        } else if (!strcmp(o, "--process-output")) a->process_output = 1;
        else if (!strcmp(o, "--no-ppl")) a->no_ppl = 1;
        else if (!strcmp(o, "--show-statistics")) a->show_stats = 1;
        else if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage(stdout);
            exit(0);
        } else {
            fprintf(stderr, PROG ": unknown or incomplete option '%s'\n", o);
            usage(stderr);
            return -1;
        }
#undef OPT
        if (bad)
            return -1;
    }
    const char *missing = a->show_stats && a->n_in != 1             ? "one --in-file (the file to show)"
                          : !a->show_stats && !a->c.text && !a->n_in ? "-f TEXT (or --in-file files to merge)"
                          : a->c.text && !a->c.model                 ? "-m MODEL.gguf"
                                                                     : NULL;
    if (missing) {
        fprintf(stderr, PROG ": missing %s\n", missing);
        usage(stderr);
        return -1;
    }
    return 0;
}

/* ---- statistics (llama-imatrix --show-statistics) -------------------------- */

typedef struct {
    const char *name;
    char layer[16], tensor[64];
    int blk;
    const float *v; /* per column: sum / count */
    int n;
    float total, min, max, mean, sd, active, entropy, zd, cossim;
} tstats;

/* "blk.3.attn_q.weight" -> layer "3", tensor "attn_q"; others: "-", the name. */
static void split_name(tstats *t)
{
    int end = 0;
    if (sscanf(t->name, "blk.%15[0-9].%n", t->layer, &end) == 1 && end > 0) {
        t->blk = atoi(t->layer);
        snprintf(t->tensor, sizeof t->tensor, "%s", t->name + end);
    } else {
        t->blk = -1;
        snprintf(t->layer, sizeof t->layer, "-");
        snprintf(t->tensor, sizeof t->tensor, "%s", t->name);
    }
    char *w = strstr(t->tensor, ".weight");
    if (w)
        *w = 0;
}

static void compute(tstats *t)
{
    float total = 0, sq = 0;
    int inactive = 0, above = 0;
    t->min = t->max = t->v[0];
    for (int i = 0; i < t->n; i++) {
        total += t->v[i], sq += t->v[i] * t->v[i];
        t->min = fminf(t->min, t->v[i]), t->max = fmaxf(t->max, t->v[i]);
        inactive += fabsf(t->v[i]) <= 1e-5f;
    }
    t->total = total, t->mean = total / t->n;
    t->sd = sqrtf(fmaxf(0, sq / t->n - t->mean * t->mean));
    t->active = 1 - (float)inactive / t->n;
    t->entropy = 0;
    for (int i = 0; total > 0 && i < t->n; i++) {
        float p = t->v[i] / total;
        if (p > 0)
            t->entropy -= p * log2f(p);
    }
    for (int i = 0; t->sd > 0 && i < t->n; i++)
        above += (t->v[i] - t->mean) / t->sd > 1;
    t->zd = (float)above / t->n;
}

/* Cosine similarity with the same tensor of the layer before. */
static void cossims(tstats *ts, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        ts[i].cossim = 0;
        for (size_t k = 0; ts[i].blk > 0 && k < n; k++)
            if (ts[k].blk == ts[i].blk - 1 && !strcmp(ts[k].tensor, ts[i].tensor) && ts[k].n == ts[i].n) {
                double dot = 0, a = 0, b = 0;
                for (int j = 0; j < ts[i].n; j++)
                    dot += (double)ts[i].v[j] * ts[k].v[j], a += (double)ts[i].v[j] * ts[i].v[j],
                        b += (double)ts[k].v[j] * ts[k].v[j];
                ts[i].cossim = a > 0 && b > 0 ? (float)(dot / sqrt(a * b)) : 0;
            }
    }
}

static int by_tensor_then_total(const void *x, const void *y)
{
    const tstats *a = x, *b = y;
    int c = strcmp(a->tensor, b->tensor);
    return c ? c : (a->total < b->total) - (a->total > b->total);
}

static int show_statistics(const hx_imatrix *im, const char *path)
{
    hx_imatrix_info info;
    hx_imatrix_info_get(im, &info);
    tstats *ts = calloc(info.n_entries ? info.n_entries : 1, sizeof *ts);
    if (!ts) {
        fprintf(stderr, PROG ": out of memory\n");
        return 1;
    }
    size_t n = 0;
    for (size_t i = 0; i < info.n_entries; i++) {
        hx_imatrix_entry e;
        if (hx_imatrix_entry_at(im, i, &e) || e.count == 0)
            continue;
        ts[n] = (tstats){.name = e.name, .v = e.values, .n = (int)e.n};
        split_name(&ts[n]);
        compute(&ts[n++]);
    }
    cossims(ts, n);
    qsort(ts, n, sizeof *ts, by_tensor_then_total);
    printf("\nComputing statistics for %s (%zu tensors)\n\n", path, n);
    printf(" Layer\t       Tensor\t          Σ(Act²)\t  Min\t            Max\t           μ\t   σ\t %% Active\tN\t"
           "   Entropy\tE (norm)\tZD\t  CosSim\n");
    printf("================================================================================================"
           "=========================================================================\n");
    int max_blk = -1;
    for (size_t i = 0; i < n; i++) {
        const tstats *t = &ts[i];
        printf("%5s\t%-20s\t%10.2f\t%8.4f\t%11.4f\t%6.2f\t%6.2f\t%8.2f%%\t%6d\t%10.4f\t%6.2f%%\t%10.2f%%\t%8.4f\n",
               t->layer, t->tensor, t->total, t->min, t->max, t->mean, t->sd, 100 * t->active, t->n, t->entropy,
               t->n > 1 ? 100 * t->entropy / log2f((float)t->n) : 0, 100 * t->zd, t->cossim);
        max_blk = t->blk > max_blk ? t->blk : max_blk;
    }
    /* Per layer, each tensor's figures weighted by its column count. */
    printf("\nComputing weighted average statistics per layer (%d layers)\n\n", max_blk + 1);
    printf("  Layer\t     μΣ(Act²)\t      μZD\tμCosSim\n");
    printf("================================================\n");
    for (int l = 0; l <= max_blk; l++) {
        double bias = 0, zd = 0, cs = 0, w = 0;
        for (size_t i = 0; i < n; i++)
            if (ts[i].blk == l)
                bias += ts[i].n * ts[i].total, zd += ts[i].n * ts[i].zd, cs += ts[i].n * ts[i].cossim, w += ts[i].n;
        if (w > 0)
            printf("%5d\t%14.2f\t%10.4f%%\t%6.4f\n", l, bias / w, 100 * zd / w, cs / w);
    }
    printf("\n");
    free(ts);
    return 0;
}

/* ---- collection ---------------------------------------------------------- */

typedef struct {
    int32_t n_vocab;
    double nll, nll2;
    size_t count;
} ppl;

static int score(void *user, const float *l, int32_t next)
{
    ppl *p = user;
    double max = l[0], sum = 0;
    for (int32_t i = 1; i < p->n_vocab; i++)
        max = l[i] > max ? l[i] : max;
    for (int32_t i = 0; i < p->n_vocab; i++)
        sum += exp(l[i] - max);
    double nll = max + log(sum) - l[next];
    p->nll += nll, p->nll2 += nll * nll, p->count++;
    return 0;
}

static int no_score(void *user, const float *l, int32_t next) { return 0; }

/* Evaluates the text's chunks with the collector attached. */
static int collect(const args *a, hx_imatrix *im)
{
    hx_runtime *rt = NULL;
    hx_model *m = NULL;
    hx_tokenizer *tok = NULL;
    int32_t *tokens = NULL;
    char *text = NULL;
    int rc = 1;
    const int n_ctx = (int)a->c.n_ctx;
    size_t n_tokens = 0, len;
    ppl p = {0};

    if (hx_tokenizer_open(a->c.model, &tok)) {
        fprintf(stderr, PROG ": %s\n", hx_last_error());
        goto out;
    }
    if (!(text = chunk_read_text(PROG, a->c.text, &len)) || !(tokens = chunk_tokenize(PROG, tok, text, len, &n_tokens)))
        goto out;
    if (n_tokens < 2 * (size_t)n_ctx) {
        fprintf(stderr, PROG ": %s is %zu tokens; chunks of %d need at least %d (-c sets it)\n", a->c.text, n_tokens,
                n_ctx, 2 * n_ctx);
        goto out;
    }
    int32_t n_chunk = (int32_t)(n_tokens / (size_t)n_ctx);
    if (a->c.chunks && a->c.chunks < n_chunk)
        n_chunk = (int32_t)a->c.chunks;
    int batch = a->c.batch && a->c.batch < n_ctx ? (int)a->c.batch : n_ctx;
    /* Every token evaluated (no prefix cache), so every token observed. */
    if (chunk_open(&a->c, batch, 1, &rt, &m) ||
        hx_imatrix_add_dataset(im, a->c.text) ||
        hx_imatrix_collect(m, im, a->process_output ? HX_IMATRIX_OUTPUT : 0)) {
        fprintf(stderr, PROG ": %s\n", hx_last_error());
        goto out;
    }
    hx_model_info info;
    hx_model_info_get(m, &info);
    p.n_vocab = (int32_t)info.n_vocab;
    int32_t bos = hx_tokenizer_wants_bos(tok) ? hx_tokenizer_bos(tok) : -1;
    fprintf(stderr, PROG ": %s (%s, %s): %zu tokens, %d chunks of %d%s\n", info.name, info.arch, info.ftype, n_tokens,
            n_chunk, n_ctx, bos >= 0 ? ", each starting with BOS" : "");
    double t0 = chunk_clock();
    for (int32_t c = 0; c < n_chunk; c++) {
        if (chunk_eval(PROG, m, tokens + (size_t)c * n_ctx, n_ctx, batch, bos, a->process_output,
                       a->no_ppl ? no_score : score, &p))
            goto out;
        chunk_eta(PROG, &a->c, c + 1, n_chunk, chunk_clock() - t0);
        if (!a->no_ppl)
            printf("[%d]%.4f,", c + 1, exp(p.nll / p.count));
        fflush(stdout);
    }
    if (!a->no_ppl) {
        double mean = p.nll / p.count, var = p.nll2 / p.count - mean * mean, v = exp(mean);
        printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", v, var > 0 && p.count > 1 ? sqrt(var / (p.count - 1)) * v : 0);
    }
    rc = 0;
out:
    if (m)
        hx_imatrix_collect(m, NULL, 0);
    free(tokens);
    free(text);
    hx_tokenizer_close(tok);
    hx_model_free(m);
    hx_runtime_close(rt);
    return rc;
}

int main(int argc, char **argv)
{
    args a = {.c = {.n_ctx = 512}, .out = "imatrix.gguf"};
    if (parse(argc, argv, &a))
        return 2;
    hx_imatrix *im = NULL;
    int rc = 1;
    if (hx_imatrix_create((uint32_t)a.c.n_ctx, &im))
        goto fail;
    for (int i = 0; i < a.n_in; i++) {
        fprintf(stderr, PROG ": loading %s\n", a.in[i]);
        if (hx_imatrix_merge_file(im, a.in[i]))
            goto fail;
    }
    if (a.show_stats) {
        rc = show_statistics(im, a.in[0]);
        goto out;
    }
    if (a.c.text && collect(&a, im))
        goto out;
    if (a.format == HX_IMATRIX_GGUF && (strlen(a.out) < 5 || strcmp(a.out + strlen(a.out) - 5, ".gguf")))
        fprintf(stderr, PROG ": writing GGUF to %s, whose name does not end in .gguf (--output-format dat for the "
                        "legacy format)\n", a.out);
    hx_imatrix_info info;
    if (hx_imatrix_save(im, a.out, a.format) || hx_imatrix_info_get(im, &info))
        goto fail;
    fprintf(stderr, PROG ": %zu matrices over %u chunks of %u tokens written to %s\n", info.n_entries,
            info.chunk_count, info.chunk_size, a.out);
    rc = 0;
    goto out;
fail:
    fprintf(stderr, PROG ": %s\n", hx_last_error());
out:
    hx_imatrix_free(im);
    return rc;
}
