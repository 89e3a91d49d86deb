/* Chunks of a text, evaluated as llama-perplexity and llama-imatrix do. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/chunk_eval.h"
#include "tools/cli_num.h"

static int parse_count(const char *prog, const char *opt, const char *v, long lo, long *out)
{
    long long n;
    if (cli_long(prog, opt, v, lo, 1 << 20, &n))
        return -1;
    *out = (long)n;
    return 2;
}

int chunk_option(const char *prog, chunk_options *o, const char *opt, const char *v)
{
    const char **str = !strcmp(opt, "-m")          ? &o->model
                       : !strcmp(opt, "-f")        ? &o->text
                       : !strcmp(opt, "--devices") ? &o->devices
                       : !strcmp(opt, "--sched")   ? &o->sched
                       : !strcmp(opt, "--kv-type") ? &o->kv_type
                       : !strcmp(opt, "-ctk") || !strcmp(opt, "--cache-type-k") ? &o->kv_type_k
                       : !strcmp(opt, "-ctv") || !strcmp(opt, "--cache-type-v") ? &o->kv_type_v
                                                   : NULL;
    if (str && v) {
        *str = v;
        return 2;
    }
    if (!strcmp(opt, "-q") || !strcmp(opt, "--quiet")) {
        o->quiet = 1;
        return 1;
    }
    if (!v)
        return 0;
    return !strcmp(opt, "-c")         ? parse_count(prog, opt, v, 4, &o->n_ctx)
           : !strcmp(opt, "--chunks") ? parse_count(prog, opt, v, 1, &o->chunks)
           : !strcmp(opt, "-b")       ? parse_count(prog, opt, v, 1, &o->batch)
           : !strcmp(opt, "-t")       ? parse_count(prog, opt, v, 0, &o->threads)
                                      : 0;
}

double chunk_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void chunk_eta(const char *prog, const chunk_options *o, int done, int total, double seconds)
{
    int step = total >= 10 ? total / 10 : 1;
    if (o->quiet || !isatty(STDERR_FILENO) || done >= total || (done != 1 && done % step))
        return;
    double per = seconds / done;
    /* stdout's [n] values share the terminal: the line of its own. */
    fflush(stdout);
    fprintf(stderr, "%s%s: %.2f seconds per pass - chunk %d of %d - ETA %.2f minutes\n", done > 1 ? "\n" : "",
            prog, per, done, total, per * (total - done) / 60.0);
}

hx_status chunk_open(const chunk_options *o, int batch, int every_token, hx_runtime **rt, hx_model **m)
{
    hx_runtime_options ro = hx_runtime_options_default();
    ro.devices = o->devices;
    ro.cpu_threads = (int)o->threads;
    ro.sched = o->sched;
    hx_model_options mo = hx_model_options_default();
    mo.kv_type = o->kv_type;
    mo.kv_type_k = o->kv_type_k;
    mo.kv_type_v = o->kv_type_v;
    mo.kv_tokens = (uint32_t)o->n_ctx;
    mo.max_batch = (uint32_t)batch;
    if (every_token)
        mo.kv_prefix_cache = -1;
    hx_status s = hx_runtime_open(rt, &ro);
    return s ? s : hx_model_load(*rt, o->model, &mo, m);
}

char *chunk_read_text(const char *prog, const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open %s: %s\n", prog, path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0)
        if ((n += got) == cap) {
            char *p = realloc(buf, cap *= 2);
            if (!p)
                free(buf);
            buf = p;
        }
    int err = ferror(f);
    fclose(f);
    if (!buf || err) {
        fprintf(stderr, "%s: cannot read %s\n", prog, path);
        free(buf);
        return NULL;
    }
    if (n && buf[n - 1] == '\n')
        n--;
    *len = n;
    return buf;
}

int32_t *chunk_tokenize(const char *prog, const hx_tokenizer *tok, const char *text, size_t len, size_t *n)
{
    int bos = hx_tokenizer_wants_bos(tok);
    int32_t *ids = NULL;
    if (hx_tokenizer_encode(tok, text, len, bos, 0, NULL, 0, n) == HX_ERR_RANGE && (ids = malloc(*n * sizeof *ids)) &&
        hx_tokenizer_encode(tok, text, len, bos, 0, ids, *n, n) == HX_OK)
        return ids;
    fprintf(stderr, "%s: tokenizing the text: %s\n", prog, ids ? hx_last_error() : "out of memory");
    free(ids);
    return NULL;
}

int chunk_eval(const char *prog, hx_model *m, const int32_t *chunk, int n_ctx, int batch, int32_t bos,
               int all_logits, chunk_scorer score, void *user)
{
    int32_t *toks = malloc(sizeof *toks * batch);
    hx_session **who = malloc(sizeof *who * batch);
    uint8_t *want = malloc((size_t)batch);
    hx_session *s = NULL;
    int rc = -1, first = n_ctx / 2;
    if (!toks || !who || !want || hx_session_open(m, &s))
        goto out;
    for (int b0 = 0; b0 < n_ctx; b0 += batch) {
        int nb = n_ctx - b0 < batch ? n_ctx - b0 : batch;
        for (int i = 0; i < nb; i++) {
            int pos = b0 + i;
            toks[i] = pos == 0 && bos >= 0 ? bos : chunk[pos];
            who[i] = s;
            want[i] = all_logits || (pos >= first && pos < n_ctx - 1);
        }
        hx_batch hb = {(size_t)nb, toks, who, want};
        if (hx_batch_eval(m, &hb))
            goto out;
        for (int i = 0; i < nb; i++) {
            int pos = b0 + i;
            if (pos >= first && pos < n_ctx - 1 && score(user, hx_session_logits(s, i), chunk[pos + 1]))
                goto out_quiet;
        }
    }
    rc = 0;
    goto out_quiet;
out:
    fprintf(stderr, "%s: %s\n", prog, toks && who && want ? hx_last_error() : "out of memory");
out_quiet:
    hx_session_close(s);
    free(toks);
    free(who);
    free(want);
    return rc;
}
