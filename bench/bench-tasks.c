/* bench-tasks: the runtime's own costs.
 *   1. submitting and running an empty task on the CPU device (µs);
 *   2. METG (Task Bench, SC20): the smallest task granularity at which the
 *      runtime keeps the cores at least 50% busy with useful work.
 * Each task carries `g` µs of arithmetic per CPU thread, cut into the
 * shares the CPU device hands out; the efficiency is useful core-time /
 * (wall time x threads).
 *   bench-tasks [-t THREADS] [-n TASKS] [-r REPS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hetero.h"
#include "tools/cli_num.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Dependent arithmetic the compiler cannot drop: `iters` rounds of FMA. */
static volatile double sink;
static double spin(long iters)
{
    double x = 1.0, y = 1e-9;
    for (long i = 0; i < iters; i++)
        x = x * 0.9999999 + y;
    return x;
}

typedef struct {
    long iters;  /* per thread */
    int threads;
} work_args;

static int work_cpu(const hx_cpu_call *c)
{
    const work_args *a = c->args;
    sink = spin(a->iters * a->threads / c->nth);
    return 0;
}

static int empty_cpu(const hx_cpu_call *c) { return 0; }

static const hx_codelet work = {.name = "bench_work", .cpu = work_cpu};
static const hx_codelet empty = {.name = "bench_empty", .cpu = empty_cpu};

static double iters_per_us(void)
{
    long n = 1 << 22;
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        double t0 = now();
        sink = spin(n);
        double t = now() - t0;
        if (t < best)
            best = t;
    }
    return n / (best * 1e6);
}

int main(int argc, char **argv)
{
    int threads = 0, ntasks = 2000, reps = 5;
    for (int i = 1; i < argc; i++) {
        static const char usage[] = "usage: bench-tasks [-t THREADS] [-n TASKS] [-r REPS]\n";
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) return fputs(usage, stdout), 0;
        else if (!strcmp(o, "-t") && v) bad = cli_int("bench-tasks", o, argv[++i], 0, 4096, &threads);
        else if (!strcmp(o, "-n") && v) bad = cli_int("bench-tasks", o, argv[++i], 10, 1 << 24, &ntasks);
        else if (!strcmp(o, "-r") && v) bad = cli_int("bench-tasks", o, argv[++i], 1, 100, &reps);
        else {
            fputs(usage, stderr);
            return CLI_EXIT_USAGE;
        }
        if (bad)
            return CLI_EXIT_USAGE;
    }
    if (ntasks < 10 || reps < 1 || reps > 100) {
        fprintf(stderr, "bench-tasks: need -n >= 10 and 1 <= -r <= 100\n");
        return 2;
    }
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = "cpu";
    o.cpu_threads = threads;
    hx_runtime *rt;
    if (hx_runtime_open(&rt, &o) != HX_OK) {
        fprintf(stderr, "bench-tasks: %s\n", hx_last_error());
        return 1;
    }
    hx_device_info cpu;
    hx_runtime_device_info(rt, 0, &cpu);
    int nth = cpu.compute_units;
    printf("CPU device: %s, %d threads\n\n", cpu.name, nth);

    /* 1. Empty tasks, independent, and a dependent chain through a buffer. */
    hx_buffer *b;
    hx_buffer_create(rt, 64, &b);
    double ind[100], dep[100], sub[100];
    for (int r = 0; r < reps; r++) {
        hx_task_desc d = {.codelet = &empty, .device = -1};
        hx_runtime_stats_reset(rt);
        double t0 = now();
        for (int i = 0; i < ntasks; i++)
            hx_task_submit(rt, &d, NULL);
        hx_runtime_wait_all(rt);
        ind[r] = (now() - t0) / ntasks * 1e6;
        hx_runtime_stats st;
        hx_runtime_stats_get(rt, &st);
        sub[r] = st.submit_overhead_us;
        d.nbuffers = 1;
        d.buffers[0] = b;
        d.modes[0] = HX_RW;
        t0 = now();
        for (int i = 0; i < ntasks; i++)
            hx_task_submit(rt, &d, NULL);
        hx_runtime_wait_all(rt);
        dep[r] = (now() - t0) / ntasks * 1e6;
    }
    printf("empty task, submit + run, median of %d x %d tasks:\n", reps, ntasks);
    printf("  independent      %8.2f us/task\n", median(ind, reps));
    printf("  dependent chain  %8.2f us/task\n", median(dep, reps));
    printf("  submission alone %8.2f us/task\n\n", median(sub, reps));

    /* 2. METG: dependent chain of tasks of granularity g on every member. */
    double ipu = iters_per_us();
    printf("METG (task = g us of arithmetic per thread, %d threads; chain of dependent tasks)\n", nth);
    printf("  %10s %12s %12s\n", "g (us)", "efficiency", "wall/task us");
    double metg = -1;
    const double grains[] = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000};
    for (size_t k = 0; k < sizeof grains / sizeof grains[0]; k++) {
        double g = grains[k];
        work_args a = {(long)(g * ipu), nth};
        int n = (int)(200000.0 / (g + 20));
        if (n > ntasks) n = ntasks;
        if (n < 20) n = 20;
        double eff[100], per[100];
        for (int r = 0; r < reps; r++) {
            hx_task_desc d = {.codelet = &work, .nbuffers = 1, .buffers = {b}, .modes = {HX_RW},
                              .args = &a, .args_size = sizeof a, .device = -1};
            double t0 = now();
            for (int i = 0; i < n; i++)
                hx_task_submit(rt, &d, NULL);
            hx_runtime_wait_all(rt);
            double wall = now() - t0;
            eff[r] = (n * g * 1e-6) / wall; /* each member worked g per task */
            per[r] = wall / n * 1e6;
        }
        double e = median(eff, reps);
        printf("  %10.0f %11.1f%% %12.2f\n", g, 100 * e, median(per, reps));
        if (metg < 0 && e >= 0.5)
            metg = g;
    }
    if (metg > 0)
        printf("\nMETG(50%%) <= %.0f us (smallest granularity measured with >= 50%% efficiency)\n", metg);
    else
        printf("\nMETG(50%%): not reached at the granularities measured\n");
    hx_buffer_destroy(b);
    hx_runtime_close(rt);
    return 0;
}
