/* bench-sched: scheduling policies on the CPU + the emulated FPGA (PoCL),
 * with the FPGA slowed 1x, 3x and 10x by injection.
 *   1. decode: tokens/s of the synthetic model, per-device busy %, tasks
 *      per token on the FPGA, bytes moved between memory nodes per token,
 *      for static, eager and dmda, for the CPU alone, and for dmda on the
 *      CPU alone (its bookkeeping without the FPGA); the better
 *      single-device placement (the CPU alone, or static: everything the
 *      FPGA can run on the FPGA) is what the dynamic policies are judged
 *      against.  Each of R repetitions runs every configuration once, in
 *      turn, so that the machine's noise hits them alike; the table shows
 *      medians over the repetitions.
 *   2. a DAG of gemm_f32 tasks (which the FPGA runs today), half of them
 *      preferring each device: tasks/s and the same figures (one run each).
 *   bench-sched [-t THREADS] [-n TOKENS] [-g TASKS] [-r REPS] [--preset tiny|small] [--type f16|q8_0...]
 * A benchmark, not a test: it prints a table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hetero.h"
#include "tools/cli_num.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct {
    int threads, tokens, gemms, reps;
    const char *preset, *type;
    char dir[64], model[128];
} config;

typedef struct {
    double rate;            /* tokens or tasks per second */
    double busy[2];         /* % of the timed span */
    double fpga_share;      /* FPGA tasks per token / per task */
    double bytes_per;       /* bytes moved per token / per task */
    uint64_t migrations, retries;
} result;

/* devices: "cpu,fpga", or "cpu" for the CPU alone (nothing to slow). */
static hx_runtime *open_rt(const config *c, const char *devices, const char *sched, int slow)
{
    char inject[64] = "", pm[128];
    if (slow > 1 && strstr(devices, "fpga"))
        snprintf(inject, sizeof inject, "kind=fpga,slow=%d", slow);
    snprintf(pm, sizeof pm, "%s/perfmodels", c->dir);
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = devices;
    o.fpga_emulation = "pocl";
    o.cpu_threads = c->threads;
    o.sched = sched;
    o.inject = inject;
    o.perfmodel_dir = pm;
    hx_runtime *rt;
    if (hx_runtime_open(&rt, &o) != HX_OK) {
        fprintf(stderr, "bench-sched: %s\n", hx_last_error());
        return NULL;
    }
    return rt;
}

static void collect(hx_runtime *rt, double span, double units, result *r)
{
    hx_runtime_stats st;
    hx_runtime_stats_get(rt, &st);
    uint64_t tasks[2] = {0, 0};
    r->busy[1] = -1; /* no FPGA */
    for (int d = 0; d < 2 && d < hx_runtime_device_count(rt); d++) {
        hx_device_stats ds;
        hx_device_stats_get(rt, d, &ds);
        r->busy[d] = 100 * ds.busy_seconds / span;
        tasks[d] = ds.tasks;
    }
    r->rate = units / span;
    r->fpga_share = tasks[1] / units;
    r->bytes_per = st.bytes_copied / units;
    r->migrations = st.migrations;
    r->retries = st.retries;
}

static int argmax(const float *x, uint32_t n)
{
    int best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = (int)i;
    return best;
}

static int run_decode(const config *c, const char *devices, const char *sched, int slow, result *r)
{
    hx_runtime *rt = open_rt(c, devices, sched, slow);
    if (!rt)
        return -1;
    hx_model_options mo = hx_model_options_default();
    mo.partition = "affinity";
    mo.kv_tokens = 1024;
    mo.kv_prefix_cache = -1; /* each run evaluates the same tokens afresh */
    hx_model *m = NULL;
    hx_session *s = NULL;
    int rc = -1;
    if (hx_model_load(rt, c->model, &mo, &m) || hx_session_open(m, &s))
        goto out;
    hx_model_info info;
    hx_model_info_get(m, &info);
    int32_t prompt[8] = {256, 72, 101, 108, 108, 111, 32, 119};
    if (hx_session_eval(s, prompt, 8, 0))
        goto out;
    /* Warm-up tokens: program builds, dmda's calibration. */
    int32_t tok = argmax(hx_session_logits(s, -1), info.n_vocab);
    for (int i = 0; i < 4; i++) {
        if (hx_session_eval(s, &tok, 1, 0))
            goto out;
        tok = argmax(hx_session_logits(s, -1), info.n_vocab);
    }
    hx_runtime_stats_reset(rt);
    double t0 = now();
    for (int i = 0; i < c->tokens; i++) {
        if (hx_session_eval(s, &tok, 1, 0))
            goto out;
        tok = argmax(hx_session_logits(s, -1), info.n_vocab);
    }
    collect(rt, now() - t0, c->tokens, r);
    rc = 0;
out:
    if (rc)
        fprintf(stderr, "bench-sched: %s\n", hx_last_error());
    hx_session_close(s);
    hx_model_free(m);
    hx_runtime_close(rt);
    return rc;
}

enum { GM = 32, GN = 256, GK = 256, GBUF = 8, MAX_REPS = 100 };

static int run_gemms(const config *c, const char *sched, int slow, result *r)
{
    hx_runtime *rt = open_rt(c, "cpu,fpga", sched, slow);
    if (!rt)
        return -1;
    int rc = -1;
    hx_buffer *A = NULL, *B = NULL, *C[GBUF] = {0};
    if (hx_buffer_create(rt, sizeof(float) * GM * GK, &A) || hx_buffer_create(rt, sizeof(float) * GN * GK, &B))
        goto out;
    float *p;
    hx_buffer_acquire(A, HX_W, (void **)&p);
    for (int i = 0; i < GM * GK; i++)
        p[i] = (float)(i % 7) * 0.25f;
    hx_buffer_acquire(B, HX_W, (void **)&p);
    for (int i = 0; i < GN * GK; i++)
        p[i] = (float)(i % 5) * 0.5f;
    for (int i = 0; i < GBUF; i++)
        if (hx_buffer_create(rt, sizeof(float) * GM * GN, &C[i]))
            goto out;
    hx_args_gemm_f32 g = {GM, GN, GK};
    for (int round = 0; round < 2; round++) {
        if (round == 1)
            hx_runtime_stats_reset(rt);
        double t0 = now();
        int n = round ? c->gemms : 16; /* round 0 warms up and calibrates */
        for (int i = 0; i < n; i++) {
            hx_task_desc d = {.codelet = hx_codelet_builtin("gemm_f32"), .nbuffers = 3,
                              .buffers = {A, B, C[i % GBUF]}, .modes = {HX_R, HX_R, HX_W}, .args = &g,
                              .args_size = sizeof g, .device = -1, .prefer = 1u << (i % 2)};
            if (hx_task_submit(rt, &d, NULL))
                goto out;
        }
        if (hx_runtime_wait_all(rt))
            goto out;
        if (round == 1)
            collect(rt, now() - t0, n, r);
    }
    rc = 0;
out:
    if (rc)
        fprintf(stderr, "bench-sched: %s\n", hx_last_error());
    hx_buffer_destroy(A);
    hx_buffer_destroy(B);
    for (int i = 0; i < GBUF; i++)
        hx_buffer_destroy(C[i]);
    hx_runtime_close(rt);
    return rc;
}

static void header(const char *unit)
{
    printf("| policy | fpga slow | %s | cpu busy %% | fpga busy %% | fpga tasks/%s | bytes moved/%s | migrations | retries |\n",
           !strcmp(unit, "token") ? "tokens/s" : "tasks/s", unit, unit);
    printf("|---|---|---|---|---|---|---|---|---|\n");
}

static void row(const char *policy, int slow, const result *r)
{
    printf("| %-6s | %2dx | %8.1f | %5.1f | %5.1f | %6.2f | %10.0f | %5llu | %4llu |\n", policy, slow, r->rate,
           r->busy[0], r->busy[1], r->fpga_share, r->bytes_per, (unsigned long long)r->migrations,
           (unsigned long long)r->retries);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Each column's median over the repetitions (a row need not be one run). */
static result median_result(const result *runs, int n)
{
    double v[6][MAX_REPS];
    for (int i = 0; i < n; i++) {
        v[0][i] = runs[i].rate;
        v[1][i] = runs[i].busy[0];
        v[2][i] = runs[i].busy[1];
        v[3][i] = runs[i].fpga_share;
        v[4][i] = runs[i].bytes_per;
        v[5][i] = (double)runs[i].migrations;
    }
    result m = {0};
    m.rate = median(v[0], n);
    m.busy[0] = median(v[1], n);
    m.busy[1] = median(v[2], n);
    m.fpga_share = median(v[3], n);
    m.bytes_per = median(v[4], n);
    m.migrations = (uint64_t)(median(v[5], n) + 0.5);
    for (int i = 0; i < n; i++)
        m.retries += runs[i].retries;
    return m;
}

/* The decode configurations: the CPU alone, then the policies on both. */
typedef struct {
    const char *label, *devices, *sched;
} decode_config;

static const decode_config decode_configs[] = {
    {"cpu alone", "cpu", "eager"},
    {"static", "cpu,fpga", "static"},
    {"eager", "cpu,fpga", "eager"},
    {"dmda", "cpu,fpga", "dmda"},
    /* dmda's own cost (perf-model bookkeeping per task) apart from where
     * it places the tasks. */
    {"dmda, cpu", "cpu", "dmda"},
};
enum { NCONF = 5, NSLOW = 3, CPU_ALONE = 0, STATIC = 1 };

static int decode_table(const config *c, const int *slows)
{
    result *runs = calloc((size_t)NSLOW * NCONF * c->reps, sizeof *runs);
    if (!runs)
        return -1;
    for (int rep = 0; rep < c->reps; rep++)
        for (int k = 0; k < NSLOW; k++)
            for (int p = 0; p < NCONF; p++) {
                const decode_config *dc = &decode_configs[p];
                result *r = &runs[(k * NCONF + p) * c->reps + rep];
                if (run_decode(c, dc->devices, dc->sched, slows[k], r)) {
                    free(runs);
                    return -1;
                }
                fprintf(stderr, "\rrepetition %d/%d  fpga %2dx  %-9s %8.1f tok/s", rep + 1, c->reps, slows[k],
                        dc->label, r->rate);
            }
    fprintf(stderr, "\r%60s\r", "");
    printf("| configuration | fpga slow | tokens/s | cpu busy %% | fpga busy %% | fpga tasks/token | bytes moved/token "
           "| migrations | retries | / best single |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|\n");
    for (int k = 0; k < NSLOW; k++) {
        result m[NCONF];
        for (int p = 0; p < NCONF; p++)
            m[p] = median_result(&runs[(k * NCONF + p) * c->reps], c->reps);
        for (int p = 0; p < NCONF; p++) {
            /* Paired within each repetition: its runs follow one another,
             * so a burst of load on the machine hits both sides alike. */
            double ratio[MAX_REPS];
            for (int rep = 0; rep < c->reps; rep++) {
                const result *r = &runs[(k * NCONF) * c->reps + rep];
                double best = r[CPU_ALONE * c->reps].rate > r[STATIC * c->reps].rate ? r[CPU_ALONE * c->reps].rate
                                                                                      : r[STATIC * c->reps].rate;
                ratio[rep] = best > 0 ? runs[(k * NCONF + p) * c->reps + rep].rate / best : 0;
            }
            char fb[16];
            if (m[p].busy[1] < 0)
                snprintf(fb, sizeof fb, "%5s", "-");
            else
                snprintf(fb, sizeof fb, "%5.1f", m[p].busy[1]);
            printf("| %-9s | %2dx | %8.1f | %5.1f | %s | %6.2f | %10.0f | %5llu | %4llu | %5.2f |\n",
                   decode_configs[p].label, slows[k], m[p].rate, m[p].busy[0], fb, m[p].fpga_share,
                   m[p].bytes_per, (unsigned long long)m[p].migrations, (unsigned long long)m[p].retries,
                   median(ratio, c->reps));
        }
    }
    printf("\n/ best single: median over the %d repetitions of tokens/s over max(cpu alone, static) of the same\n"
           "repetition; the other columns are medians over the repetitions, each on its own; retries are summed.\n",
           c->reps);
    free(runs);
    return 0;
}

int main(int argc, char **argv)
{
    config c = {.threads = 0, .tokens = 32, .gemms = 256, .reps = 5, .preset = "tiny", .type = "f16"};
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        const char *o = argv[i];
        static const char usage[] = "usage: bench-sched [-t THREADS] [-n TOKENS] [-g TASKS] [-r REPS] [--preset P] "
                                    "[--type T]\n";
        int bad = 0;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) return fputs(usage, stdout), 0;
        else if (!strcmp(o, "-t") && v) bad = cli_int("bench-sched", o, argv[++i], 0, 4096, &c.threads);
        else if (!strcmp(o, "-n") && v) bad = cli_int("bench-sched", o, argv[++i], 1, 1 << 20, &c.tokens);
        else if (!strcmp(o, "-g") && v) bad = cli_int("bench-sched", o, argv[++i], 2, 1 << 20, &c.gemms);
        else if (!strcmp(o, "-r") && v) bad = cli_int("bench-sched", o, argv[++i], 1, MAX_REPS, &c.reps);
        else if (!strcmp(o, "--preset") && v) c.preset = argv[++i];
        else if (!strcmp(o, "--type") && v) c.type = argv[++i];
        else {
            fputs(usage, stderr);
            return CLI_EXIT_USAGE;
        }
        if (bad)
            return CLI_EXIT_USAGE;
    }
    if (c.tokens < 1 || c.gemms < 2 || c.threads < 0 || c.reps < 1 || c.reps > MAX_REPS) {
        fprintf(stderr, "bench-sched: -n >= 1, -g >= 2, -t >= 0, 1 <= -r <= %d\n", MAX_REPS);
        return 2;
    }
    snprintf(c.dir, sizeof c.dir, "/tmp/bench-sched-XXXXXX");
    if (!mkdtemp(c.dir)) {
        perror("bench-sched: mkdtemp");
        return 1;
    }
    snprintf(c.model, sizeof c.model, "%s/model.gguf", c.dir);
    int rc = 1;
    if (hx_model_write_synthetic(c.model, c.preset, c.type, 1234) != HX_OK) {
        fprintf(stderr, "bench-sched: %s\n", hx_last_error());
        goto done;
    }
    const char *const all[] = {"static", "eager", "ws", "dmda"};
    const int slows[] = {1, 3, 10};
    printf("decode, synthetic %s %s, partition affinity, %d tokens after 4 of warm-up, %d repetitions\n\n",
           c.preset, c.type, c.tokens, c.reps);
    if (decode_table(&c, slows))
        goto done;
    printf("\n%d independent gemm_f32 tasks (%dx%dx%d), half preferring each device\n\n", c.gemms, GM, GN, GK);
    header("task");
    for (int p = 0; p < 4; p++)
        for (int k = 0; k < 3; k++) {
            result r = {0};
            if (run_gemms(&c, all[p], slows[k], &r))
                goto done;
            row(all[p], slows[k], &r);
        }
    rc = 0;
done:;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", c.dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench-sched: could not remove %s\n", c.dir);
    return rc;
}
