/* hetero-bench: tokens per second of prompt processing and generation for
 * every combination of models, device sets, scheduling policies, threads
 * and batch sizes, with what the runtime did meanwhile; llama-bench's
 * conventions (see hetero-bench --help).
 *   Exit status: 0, 1 when a run failed, 2 for a bad command line. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "bench/bench.h"

static int make_dir(const char *dir)
{
    char path[1024];
    snprintf(path, sizeof path, "%s", dir);
    for (char *s = path + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            mkdir(path, 0755);
            *s = '/';
        }
    if (mkdir(path, 0755) && errno != EEXIST) {
        fprintf(stderr, "hetero-bench: --plot '%s': %s\n", dir, strerror(errno));
        return -1;
    }
    return 0;
}

static int write_plots(const hxb_params *p, const hxb_results *r)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/hetero-bench.json", p->plot);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "hetero-bench: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    hxb_report_json(f, r, p);
    if (fclose(f)) {
        fprintf(stderr, "hetero-bench: writing %s failed\n", path);
        return -1;
    }
    return hxb_chart_write(p->plot, r);
}

static int draw_timeline(const hxb_params *p)
{
    char path[1100], err[512];
    snprintf(path, sizeof path, "%s/timeline.svg", p->plot);
    if (hxb_timeline_write(p->timeline, path, NULL, err, sizeof err)) {
        fprintf(stderr, "hetero-bench: --timeline '%s': %s\n", p->timeline, err);
        return -1;
    }
    fprintf(stderr, "hetero-bench: wrote %s\n", path);
    return 0;
}

/* "trace.json" for device set "cpu,fpga" of several: "trace-cpu_fpga.json". */
static void per_set(char *out, size_t cap, const char *path, const char *set, int many)
{
    const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
    if (!many) {
        snprintf(out, cap, "%s", path);
        return;
    }
    if (!dot || (slash && dot < slash))
        dot = path + strlen(path);
    size_t n = (size_t)snprintf(out, cap, "%.*s-", (int)(dot - path), path);
    for (; *set && n + 1 < cap; set++)
        out[n++] = (*set >= 'a' && *set <= 'z') || (*set >= '0' && *set <= '9') ? *set : '_';
    snprintf(out + n, cap - n, "%s", dot);
}

/* One traced token per device set, so the placements compared in the
 * tables can be compared as pictures too. */
static int trace_sets(const hxb_params *p, hxb_results *r)
{
    for (int d = 0; d < p->devices.n; d++) {
        char trace[1100], svg[1200], title[400], err[512];
        per_set(trace, sizeof trace, p->trace, p->devices.item[d], p->devices.n > 1);
        if (hxb_run_trace(p, r, d, trace))
            return -1;
        if (!p->plot)
            continue;
        char name[1100];
        per_set(name, sizeof name, "timeline.svg", p->devices.item[d], p->devices.n > 1);
        snprintf(svg, sizeof svg, "%s/%s", p->plot, name);
        snprintf(title, sizeof title, "one generated token: %s, devices %s, policy %s", r->models[0].name,
                 p->devices.item[d], *p->scheds.item[0] ? p->scheds.item[0] : hxb_hooks_default_policy());
        if (hxb_timeline_write(trace, svg, title, err, sizeof err)) {
            fprintf(stderr, "hetero-bench: --trace '%s': %s\n", trace, err);
            return -1;
        }
        fprintf(stderr, "hetero-bench: wrote %s\n", svg);
    }
    return 0;
}

int main(int argc, char **argv)
{
    hxb_params p;
    int rc = hxb_args_parse(argc, argv, &p);
    if (rc) {
        hxb_args_free(&p);
        if (rc > 0)
            hxb_args_usage(stdout);
        return rc > 0 ? 0 : 2;
    }
    if (cli_dist_init("hetero-bench", &argc, &argv, &p.dist)) {
        hxb_args_free(&p);
        return 1;
    }
    if (p.dist.info.rank > 0) { /* under mpirun: serve rank 0's models */
        rc = hxb_run_worker(&p);
        hxb_args_free(&p);
        return rc;
    }
    if (p.plot && make_dir(p.plot)) {
        hxb_args_free(&p);
        return 1;
    }
    if (p.timeline) {
        rc = draw_timeline(&p) ? 1 : 0;
        hxb_args_free(&p);
        return rc;
    }
    if (p.sim && hxb_is_cluster(p.sim)) {
        rc = hxb_cluster_run(&p);
        hxb_args_free(&p);
        return rc;
    }
    hxb_results r = {0};
    if (p.prefix_share) {
        rc = hxb_models_resolve(&p, &r) || hxb_prefix_share(&p, &r) ? 1 : 0;
    } else if (hxb_models_resolve(&p, &r) || hxb_run_all(&p, &r)) {
        rc = 1;
    } else {
        if (p.format == HXB_MD) hxb_report_md(stdout, &r);
        else if (p.format == HXB_JSON) hxb_report_json(stdout, &r, &p);
        else hxb_report_csv(stdout, &r);
        if (fflush(stdout)) {
            fprintf(stderr, "hetero-bench: writing the results failed: %s\n", strerror(errno));
            rc = 1;
        }
        if (p.plot && write_plots(&p, &r))
            rc = 1;
        if (p.trace && trace_sets(&p, &r))
            rc = 1;
    }
    cli_dist_report("hetero-bench");
    hxb_results_free(&r);
    hxb_args_free(&p);
    hx_dist_finalize();
    return rc;
}
