/* bench-replan: a slowdown injected in the middle of a decode run under
 * the placement planner (--sched plan).  Prints every step's tokens/s and
 * where the plan puts the layers' GEMMs, then the best placement for the
 * slowed machine: each single device alone with the slowdown from the
 * start (and the planner itself with it from the start), and how close
 * the run came to it once it settled.
 *
 *   bench-replan [--sim MACHINE --shapes NAME:TYPE | -m FILE | --synthetic PRESET:TYPE]
 *                [--devices LIST] [--slow DEV=F] [--steps N] [--at K] [-t THREADS]
 *
 * On this machine (no --sim): the CPU and PoCL's OpenCL CPU device
 * (--devices cpu,opencl), whose kernels are measured before they can be
 * planned (the first steps are the planner's measuring plans). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hetero.h"

typedef struct {
    const char *sim, *shapes, *model, *synthetic, *devices;
    int slow_dev;
    double slow;
    int steps, at, threads;
    char path[512];
    char slow_name[128]; /* the slowed device's name and family, to find it in every device set */
    int slow_family;     /* (PoCL names its device after the CPU, as the CPU device is named) */
} config;

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double clock_of(hx_runtime *rt) { return hx_runtime_simulated(rt) ? hx_runtime_clock(rt) : wall(); }

static hx_runtime *open_rt(const config *c, const char *devices, const char *sched)
{
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = devices;
    o.sched = sched;
    o.inject = "";
    o.perfmodel_dir = "off"; /* every run measures afresh: no model learnt under another run's slowdown */
    if (c->sim)
        o.machine = c->sim;
    if (c->threads)
        o.cpu_threads = c->threads;
    hx_runtime *rt;
    if (hx_runtime_open(&rt, &o)) {
        fprintf(stderr, "bench-replan: --devices '%s' --sched %s: %s\n", devices, sched, hx_last_error());
        return NULL;
    }
    return rt;
}

static hx_status load(const config *c, hx_runtime *rt, hx_model **m)
{
    hx_model_options mo = hx_model_options_default();
    mo.n_ctx = 2048;
    mo.kv_prefix_cache = -1;
    if (c->sim) {
        char name[64], type[16] = "q4_0";
        snprintf(name, sizeof name, "%s", c->shapes);
        char *colon = strchr(name, ':');
        if (colon) {
            snprintf(type, sizeof type, "%s", colon + 1);
            *colon = '\0';
        }
        return hx_model_load_shapes(rt, name, type, &mo, m);
    }
    return hx_model_load(rt, c->path, &mo, m);
}

/* Layers whose GEMMs the current plan puts on each device: "d0:12 d1:20". */
static void plan_summary(hx_model *m, int ndev, char *out, size_t cap)
{
    int count[32] = {0};
    size_t n = hx_model_plan_size(m);
    for (size_t i = 0; i < n; i++) {
        hx_plan_task t;
        if (hx_model_plan_get(m, i, &t) == HX_OK && t.layer >= 0 && !strcmp(t.op, "matmul_multi") &&
            strstr(t.reason, "layer") && t.device >= 0 && t.device < 32)
            count[t.device]++;
    }
    out[0] = '\0';
    for (int d = 0; d < ndev && d < 32; d++)
        snprintf(out + strlen(out), cap - strlen(out), "%sdev%d:%d", d ? " " : "", d, count[d] / 2);
}

/* Decodes c->steps tokens; injects the slowdown before step `at` (-1:
 * from the start, before the warm-up); tokens/s of each step in ts[]. */
static int decode(config *c, const char *devices, const char *sched, int at, double *ts, int print)
{
    hx_runtime *rt = open_rt(c, devices, sched);
    if (!rt)
        return -1;
    hx_model *m = NULL;
    hx_session *s = NULL;
    int rc = -1;
    hx_injection inj = {.slow = c->slow};
    int dev = -1;
    hx_device_info info;
    if (!c->slow_name[0] && hx_runtime_device_info(rt, c->slow_dev, &info) == HX_OK) {
        snprintf(c->slow_name, sizeof c->slow_name, "%s", info.name);
        c->slow_family = (int)info.family;
    }
    for (int d = 0; d < hx_runtime_device_count(rt); d++)
        if (hx_runtime_device_info(rt, d, &info) == HX_OK && !strcmp(info.name, c->slow_name) &&
            (int)info.family == c->slow_family)
            dev = d; /* absent from this set: nothing to slow */
    if (load(c, rt, &m) || hx_session_open(m, &s)) {
        fprintf(stderr, "bench-replan: %s\n", hx_last_error());
        goto out;
    }
    if (at < 0 && dev >= 0 && hx_device_inject(rt, dev, &inj))
        goto out;
    int32_t prompt[8] = {1, 2, 3, 4, 5, 6, 7, 8}, id = 3;
    if (hx_session_eval(s, prompt, 8, 0))
        goto out;
    for (int i = 0; i < c->steps; i++) {
        if (i == at && dev >= 0) {
            if (hx_device_inject(rt, dev, &inj))
                goto out;
            if (print)
                printf("-- device %d (%s) slowed %.0fx --\n", dev, c->slow_name, c->slow);
        }
        double t0 = clock_of(rt);
        if (hx_session_eval(s, &id, 1, 0))
            goto out;
        ts[i] = 1 / (clock_of(rt) - t0);
        if (print) {
            char where[256];
            plan_summary(m, hx_runtime_device_count(rt), where, sizeof where);
            printf("step %3d  %10.2f t/s  layers: %s\n", i, ts[i], where);
        }
    }
    rc = 0;
out:
    if (rc)
        fprintf(stderr, "bench-replan: %s\n", hx_last_error());
    hx_session_close(s);
    hx_model_free(m);
    hx_runtime_close(rt);
    return rc;
}

static double median_tail(const double *ts, int from, int to)
{
    double v[4096];
    int n = 0;
    for (int i = from; i < to && n < 4096; i++)
        v[n++] = ts[i];
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double x = v[j];
            v[j] = v[j - 1];
            v[j - 1] = x;
        }
    return n ? (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2) : 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: bench-replan [--sim MACHINE --shapes NAME:TYPE | -m FILE | --synthetic PRESET:TYPE]\n"
                    "                    [--devices LIST] [--slow DEV=F] [--steps N] [--at K] [-t THREADS]\n");
    return 2;
}

int main(int argc, char **argv)
{
    config c = {.shapes = "llama2-7b:q4_0", .synthetic = "small:q8_0", .slow_dev = 1, .slow = 10, .steps = 40,
                .at = 12};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return usage() ? 0 : 0;
        if (!v)
            return usage();
        i++;
        if (!strcmp(a, "--sim"))
            c.sim = v;
        else if (!strcmp(a, "--shapes"))
            c.shapes = v;
        else if (!strcmp(a, "-m"))
            c.model = v;
        else if (!strcmp(a, "--synthetic"))
            c.synthetic = v;
        else if (!strcmp(a, "--devices"))
            c.devices = v;
        else if (!strcmp(a, "--slow")) {
            char *end;
            long d = strtol(v, &end, 10);
            double f = *end == '=' ? strtod(end + 1, &end) : 0;
            if (d < 0 || d > 31 || !(f >= 1 && f <= 1000) || *end)
                return fprintf(stderr, "bench-replan: --slow '%s': expected DEV=F, F from 1 to 1000\n", v), 2;
            c.slow_dev = (int)d;
            c.slow = f;
        } else if (!strcmp(a, "--steps") || !strcmp(a, "--at") || !strcmp(a, "-t")) {
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || n < 0 || n > 4096 || (!strcmp(a, "--steps") && n < 2))
                return fprintf(stderr, "bench-replan: %s '%s': expected a whole number (steps 2-4096)\n", a, v), 2;
            if (!strcmp(a, "--steps"))
                c.steps = (int)n;
            else if (!strcmp(a, "--at"))
                c.at = (int)n;
            else
                c.threads = (int)n;
        } else
            return usage();
    }
    if (c.at >= c.steps)
        return fprintf(stderr, "bench-replan: --at %d: the run has %d steps\n", c.at, c.steps), 2;
    if (!c.devices)
        c.devices = c.sim ? "all" : "cpu,opencl";
    if (!c.sim) {
        if (c.model) {
            snprintf(c.path, sizeof c.path, "%s", c.model);
        } else {
            char preset[32], type[16] = "q8_0";
            snprintf(preset, sizeof preset, "%s", c.synthetic);
            char *colon = strchr(preset, ':');
            if (colon) {
                snprintf(type, sizeof type, "%s", colon + 1);
                *colon = '\0';
            }
            int written;
            if (hx_model_synthetic_cached(preset, type, c.path, sizeof c.path, &written))
                return fprintf(stderr, "bench-replan: %s\n", hx_last_error()), 1;
        }
    }
    double *ts = calloc((size_t)c.steps, sizeof *ts), *ref = calloc((size_t)c.steps, sizeof *ref);
    if (!ts || !ref)
        return 1;
    printf("%s; devices %s; device %d slowed %.0fx before step %d of %d; %s\n",
           c.sim ? "SIMULATED (times are the simulator's predictions)" : "measured on this machine", c.devices,
           c.slow_dev, c.slow, c.at, c.steps, c.sim ? c.shapes : c.path);
    if (decode(&c, c.devices, "plan", c.at, ts, 1))
        return 1;
    double before = median_tail(ts, c.at / 2, c.at);
    /* Settled: the steps after the first few that follow the slowdown. */
    int settle = c.at + (c.steps - c.at) / 3;
    double after = median_tail(ts, settle, c.steps);
    int changed = -1;
    for (int i = c.at; i < c.steps && changed < 0; i++)
        if (ts[i] >= 0.9 * after)
            changed = i - c.at;
    printf("\nbefore the slowdown: %.2f t/s (median); settled after it: %.2f t/s (median of steps %d-%d); "
           "within 10%% of that from %d step(s) after it\n",
           before, after, settle, c.steps - 1, changed);
    /* The best placements for the slowed machine. */
    printf("\n| placement, %s slowed %.0fx from the start | t/s (median) |\n| --- | ---: |\n", c.slow_name,
           c.slow);
    double best = 0;
    char sets[4][32] = {"cpu", "", "", ""};
    int nsets = 1;
    if (c.sim) {
        snprintf(sets[nsets++], sizeof sets[0], "gpu");
    } else {
        snprintf(sets[nsets++], sizeof sets[0], "opencl");
    }
    for (int k = 0; k < nsets; k++) {
        if (decode(&c, sets[k], "static", -1, ref, 0))
            continue;
        double r = median_tail(ref, c.steps / 3, c.steps);
        printf("| %s alone | %.2f |\n", sets[k], r);
        best = r > best ? r : best;
    }
    if (!decode(&c, c.devices, "plan", -1, ref, 0)) {
        double r = median_tail(ref, c.steps / 3, c.steps);
        printf("| plan on %s | %.2f |\n", c.devices, r);
        best = r > best ? r : best;
    }
    printf("\nsettled run / best placement for the slowed machine: %.2fx\n", best > 0 ? after / best : 0);
    free(ts);
    free(ref);
    return 0;
}
