/* What the sampler chain costs a generation step over a real model's
 * vocabulary: one draw (hx_sampler_sample on a copy of the logits, as
 * the engine calls it) with each sampler on in turn over llama.cpp's
 * default chain (top-k 40, top-p 0.95, min-p 0.05, T 0.8), and with the
 * filters off (the whole vocabulary).  The logits are the model's own
 * after a short prompt; the history is 64 tokens of it.  It times
 * engine/sampling.h, so it links the static library. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/sampling.h"
#include "hetero.h"
#include "tools/cli_num.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    const char *model = NULL;
    int reps = 400;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) {
            if (cli_int("bench-samplers", "-r", argv[++i], 1, 1000000, &reps))
                return CLI_EXIT_USAGE;
        } else {
            fputs("usage: bench-samplers -m MODEL.gguf [-r REPS]\n"
                  "  microseconds per draw of the sampler chain, each sampler on in turn\n",
                  strcmp(argv[i], "-h") && strcmp(argv[i], "--help") ? stderr : stdout);
            return strcmp(argv[i], "-h") && strcmp(argv[i], "--help") ? CLI_EXIT_USAGE : 0;
        }
    }
    if (!model) {
        fputs("bench-samplers: -m MODEL.gguf is needed\n", stderr);
        return CLI_EXIT_USAGE;
    }
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = "cpu";
    hx_runtime *rt;
    hx_model *m;
    hx_session *s;
    hx_model_options mo = hx_model_options_default();
    mo.n_ctx = 256;
    const char *text = "The capital of France is Paris. The capital of Italy is Rome. The capital of Spain is";
    int32_t ids[256];
    size_t n = 0;
    if (hx_runtime_open(&rt, &o) || hx_model_load(rt, model, &mo, &m) ||
        hx_model_tokenize(m, text, strlen(text), 1, 1, ids, 256, &n) || hx_session_open(m, &s) ||
        hx_session_eval(s, ids, n, 0)) {
        fprintf(stderr, "bench-samplers: %s\n", hx_last_error());
        return 1;
    }
    hx_model_info info;
    hx_tokenizer *tok;
    if (hx_model_info_get(m, &info) || hx_tokenizer_open(model, &tok)) {
        fprintf(stderr, "bench-samplers: %s\n", hx_last_error());
        return 1;
    }
    const int nv = (int)info.n_vocab;
    const float *logits = hx_session_logits(s, -1);
    struct { const char *name; hx_sampling p; } cases[16];
    int nc = 0;
    hx_sampling d = hx_sampling_default();
#define CASE(label, ...)                                                                                              \
    do {                                                                                                              \
        hx_sampling p = d;                                                                                            \
        __VA_ARGS__;                                                                                                  \
        cases[nc].name = label;                                                                                       \
        cases[nc++].p = p;                                                                                            \
    } while (0)
    CASE("greedy (temperature 0)", p.temperature = 0.0f);
    CASE("default chain: top-k 40, top-p .95, min-p .05, T .8", (void)0);
    CASE("no filters: softmax of the whole vocabulary", p.top_k = 0; p.top_p = 1.0f; p.min_p = 0.0f);
    CASE("top-p .95 alone (no top-k)", p.top_k = 0; p.min_p = 0.0f);
    CASE("+ repetition penalties (1.1, freq .1, pres .1, last 64)", p.repeat_penalty = 1.1f;
         p.frequency_penalty = 0.1f; p.presence_penalty = 0.1f);
    CASE("+ logit_bias (8 tokens)", static hx_logit_bias b[8];
         for (int i = 0; i < 8; i++) b[i] = (hx_logit_bias){(int32_t)(i * 977), -1.0f};
         p.logit_bias = b; p.n_logit_bias = 8);
    CASE("+ DRY (0.8, 1.75, 2, last 64)", p.dry_multiplier = 0.8f);
    CASE("+ top-n-sigma 1.5", p.top_n_sigma = 1.5f);
    CASE("+ typical .9", p.typical_p = 0.9f);
    CASE("+ XTC (probability 1, threshold .1)", p.xtc_probability = 1.0f);
    CASE("+ dynatemp (range .5)", p.dynatemp_range = 0.5f);
    CASE("mirostat 2 (tau 5)", p.mirostat = 2);
    CASE("mirostat 1 (tau 5)", p.mirostat = 1);
    CASE("top-n-sigma 1.5 alone (no top-k)", p.top_k = 0; p.top_p = 1.0f; p.min_p = 0.0f; p.top_n_sigma = 1.5f);
    CASE("typical .9 alone (no top-k: sorts the vocabulary)", p.top_k = 0; p.top_p = 1.0f; p.min_p = 0.0f;
         p.typical_p = 0.9f);
#undef CASE
    printf("bench-samplers: %s, %d tokens, %d draws each (median, and 10th-90th percentile, microseconds)\n", model,
           nv, reps);
    double *t = malloc(sizeof *t * (size_t)reps);
    for (int c = 0; c < nc && t; c++) {
        hx_sampler *smp;
        if (hx_sampler_create_for(&cases[c].p, tok, nv, &smp)) {
            fprintf(stderr, "bench-samplers: %s: %s\n", cases[c].name, hx_last_error());
            return 1;
        }
        for (size_t i = 0; i < n; i++)
            hx_sampler_accept(smp, ids[i]);
        for (int i = 0; i < 64 - (int)n; i++)
            hx_sampler_accept(smp, ids[i % n]);
        for (int r = 0; r < reps; r++) {
            int32_t out;
            double t0 = now();
            hx_sampler_sample(smp, logits, &out);
            t[r] = (now() - t0) * 1e6;
        }
        qsort(t, (size_t)reps, sizeof *t, cmp_double);
        printf("  %-58s %9.1f  (%.1f-%.1f)\n", cases[c].name, t[reps / 2], t[reps / 10], t[reps * 9 / 10]);
        hx_sampler_free(smp);
    }
    free(t);
    hx_tokenizer_close(tok);
    hx_session_close(s);
    hx_model_free(m);
    hx_runtime_close(rt);
    return 0;
}
