/* bench-decode: what a decode step costs outside the kernels, with the
 * graph built fresh and replayed (hx_model_options.graph_replay).  The
 * model is loaded twice in one process, replay off and on, and the two
 * decode one token at a time in alternating rounds; per step it reports
 * the median wall time, the calling thread's CPU time (building or
 * replaying the graph, submitting it, preparing the batch, collecting the
 * logits: the host's share, which the kernels' threads do not pay) and
 * the allocations the whole process made (malloc, calloc and realloc
 * counted on their way to the C library's).
 *   bench-decode [-m FILE | --synthetic PRESET:TYPE] [-t THREADS] [-n STEPS] [-r ROUNDS] [--shapes 1-3] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/alloc_count.h"
#include "bench/bench.h"
#include "hetero.h"
#include "tools/cli_num.h"

static double seconds(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct {
    const char *name;
    hx_model *m;
    hx_session *s[2];
    double *wall, *host, *allocs; /* per measured step, every round */
    int n;
} arm;

static int fail(const char *what)
{
    fprintf(stderr, "bench-decode: %s: %s\n", what, hx_last_error());
    return 1;
}

static int32_t token_at(int i) { return (int32_t)((i * 37 + 11) % 200 + 1); }

/* Fresh sessions: their prompts, unmeasured, then `steps` measured steps.
 * With one shape, every step is one token of the first session; with two
 * or three, the steps cycle through that one, a batch of both sessions'
 * tokens, and two tokens of the second session at once (a prefill chunk),
 * as a serving engine's steps change shape. */
static int run_round(arm *a, int steps, int shapes)
{
    for (int k = 0; k < 2; k++) {
        if (a->s[k])
            hx_session_close(a->s[k]);
        a->s[k] = NULL;
        if (k && shapes < 2)
            break;
        if (hx_session_open(a->m, &a->s[k]))
            return fail("session");
        int32_t prompt[8];
        for (int i = 0; i < 8; i++)
            prompt[i] = token_at(i + k);
        if (hx_session_eval(a->s[k], prompt, 8, 0))
            return fail("prompt");
    }
    for (int k = 0; k < steps; k++) {
        int32_t t[2] = {token_at(8 + 2 * k), token_at(9 + 2 * k)};
        hx_batch b = {.n = 2, .tokens = t, .sessions = a->s};
        const int shape = k % shapes;
        unsigned long a0 = hx_allocations_count();
        double w0 = seconds(CLOCK_MONOTONIC), c0 = seconds(CLOCK_THREAD_CPUTIME_ID);
        hx_status st = shape == 0   ? hx_session_eval(a->s[0], t, 1, 0)
                       : shape == 1 ? hx_batch_eval(a->m, &b)
                                    : hx_session_eval(a->s[1], t, 2, 0);
        double c1 = seconds(CLOCK_THREAD_CPUTIME_ID), w1 = seconds(CLOCK_MONOTONIC);
        unsigned long a1 = hx_allocations_count();
        if (st)
            return fail("decode step");
        a->wall[a->n] = (w1 - w0) * 1e6;
        a->host[a->n] = (c1 - c0) * 1e6;
        a->allocs[a->n++] = (double)(a1 - a0);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *file = NULL, *synthetic = "tiny:q8_0";
    int threads = 0, steps = 64, rounds = 3, shapes = 1;
    static const char usage[] = "usage: bench-decode [-m FILE | --synthetic PRESET:TYPE] [-t THREADS] [-n STEPS] "
                                "[-r ROUNDS] [--shapes 1-3]\n";
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(o, "-h") || !strcmp(o, "--help"))
            return fputs(usage, stdout), 0;
        else if (!strcmp(o, "-m") && v)
            file = argv[++i];
        else if (!strcmp(o, "--synthetic") && v)
            synthetic = argv[++i];
        else if (!strcmp(o, "-t") && v)
            bad = cli_int("bench-decode", o, argv[++i], 0, 4096, &threads);
        else if (!strcmp(o, "-n") && v)
            bad = cli_int("bench-decode", o, argv[++i], 1, 1 << 20, &steps);
        else if (!strcmp(o, "-r") && v)
            bad = cli_int("bench-decode", o, argv[++i], 1, 1000, &rounds);
        else if (!strcmp(o, "--shapes") && v)
            bad = cli_int("bench-decode", o, argv[++i], 1, 3, &shapes);
        else {
            fputs(usage, stderr);
            return CLI_EXIT_USAGE;
        }
        if (bad)
            return CLI_EXIT_USAGE;
    }
    if (steps < 1 || rounds < 1)
        return fprintf(stderr, "bench-decode: -n and -r must be positive\n"), 2;
    if (shapes < 1 || shapes > 3)
        return fprintf(stderr, "bench-decode: --shapes is 1, 2 or 3\n"), 2;
    char path[1024];
    if (!file) {
        char preset[64];
        snprintf(preset, sizeof preset, "%s", synthetic);
        char *type = strchr(preset, ':');
        if (type)
            *type++ = '\0';
        if (hx_model_synthetic_cached(preset, type ? type : "f16", path, sizeof path, NULL))
            return fail(synthetic);
        file = path;
    }
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = "cpu";
    o.cpu_threads = threads;
    hx_runtime *rt;
    if (hx_runtime_open(&rt, &o))
        return fail("runtime");
    arm arms[2] = {{.name = "fresh"}, {.name = "replay"}};
    int rc = 0;
    for (int k = 0; k < 2 && !rc; k++) {
        hx_model_options mo = hx_model_options_default();
        mo.graph_replay = k ? 1 : -1;
        mo.n_ctx = (uint32_t)(8 + 2 * steps + 8);
        size_t cells = (size_t)steps * (size_t)rounds;
        arms[k].wall = malloc(sizeof(double) * cells);
        arms[k].host = malloc(sizeof(double) * cells);
        arms[k].allocs = malloc(sizeof(double) * cells);
        if (!arms[k].wall || !arms[k].host || !arms[k].allocs)
            rc = fprintf(stderr, "bench-decode: out of memory\n");
        else if (hx_model_load(rt, file, &mo, &arms[k].m))
            rc = fail(file);
    }
    for (int r = 0; r < rounds && !rc; r++)
        for (int k = 0; k < 2 && !rc; k++)
            rc = run_round(&arms[r % 2 ? 1 - k : k], steps, shapes);
    if (!rc) {
        printf("%s, %d threads, %d steps x %d rounds alternating, %d shape%s (medians per step)\n", file, threads,
               steps, rounds, shapes, shapes > 1 ? "s" : "");
        printf("| graph  |  wall µs | host CPU µs | allocations | recorded | replayed |\n");
        printf("| ------ | -------: | ----------: | ----------: | -------: | -------: |\n");
        for (int k = 0; k < 2; k++) {
            hx_model_stats ms = {0};
            hx_model_stats_get(arms[k].m, &ms);
            printf("| %-6s | %8.1f | %11.1f | %11.0f | %8llu | %8llu |\n", arms[k].name,
                   hxb_stats_median(arms[k].wall, arms[k].n), hxb_stats_median(arms[k].host, arms[k].n),
                   hxb_stats_median(arms[k].allocs, arms[k].n), (unsigned long long)ms.graphs_recorded,
                   (unsigned long long)ms.graphs_replayed);
        }
    }
    for (int k = 0; k < 2; k++) {
        for (int j = 0; j < 2; j++)
            if (arms[k].s[j])
                hx_session_close(arms[k].s[j]);
        if (arms[k].m)
            hx_model_free(arms[k].m);
        free(arms[k].wall);
        free(arms[k].host);
        free(arms[k].allocs);
    }
    hx_runtime_close(rt);
    return rc;
}
