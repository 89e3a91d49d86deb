/* The run: every configuration is opened once before anything is measured,
 * so a misspelt policy or an absent device fails in a second rather than
 * after minutes of measurements; then every combination is measured.  A
 * runtime is opened per (devices, policy, injection, threads) and each model
 * loaded per batch limit, the only option a loaded model fixes. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"

typedef struct {
    int d, s, i, t; /* devices, sched, inject (-1: none), threads indices */
} config;

static const char *policy_name(const hxb_params *p, int s)
{
    return *p->scheds.item[s] ? p->scheds.item[s] : hxb_hooks_default_policy();
}

static int open_runtime_quiet(const hxb_params *p, config c, hx_runtime **rt, hx_status *quiet);

static int open_runtime(const hxb_params *p, config c, hx_runtime **rt)
{
    return open_runtime_quiet(p, c, rt, NULL);
}

/* Opens the runtime of a configuration; quiet = NULL prints why it fails. */
static int open_runtime_quiet(const hxb_params *p, config c, hx_runtime **rt, hx_status *quiet)
{
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = p->devices.item[c.d];
    o.sched = *p->scheds.item[c.s] ? p->scheds.item[c.s] : NULL;
    o.cpu_threads = p->threads.v[c.t];
    o.fpga_emulation = p->fpga_emulation ? p->fpga_emulation : "off";
    char err[512];
    const char *inject = c.i >= 0 ? p->injects.item[c.i] : "";
    if (hxb_hooks_options(&o, p, inject, err, sizeof err)) {
        fprintf(stderr, "hetero-bench: %s\n", err);
        return -1;
    }
    hx_status st = hx_runtime_open(rt, &o);
    if (st == HX_OK)
        return 0;
    if (quiet) {
        *quiet = st;
        return -1;
    }
    /* The runtime's message names the value at fault; the options say
     * which configuration of the lists it was. */
    char t[200] = "";
    if (p->threads.v[c.t])
        snprintf(t, sizeof t, " -t %d", p->threads.v[c.t]);
    if (*inject)
        snprintf(t + strlen(t), sizeof t - strlen(t), " --inject '%.150s'", inject);
    fprintf(stderr, "hetero-bench: --devices '%s' --sched '%s'%s: %s%s\n", p->devices.item[c.d],
            policy_name(p, c.s), t, hx_last_error(),
            st == HX_ERR_NO_DEVICE && strstr(p->devices.item[c.d], "fpga") && !p->fpga_emulation
                ? " (to emulate an FPGA with PoCL, pass --fpga-emulation pocl)"
                : "");
    return -1;
}

static void device_label(const hx_device_info *d, char *buf, size_t cap)
{
    const char *l = "cpu";
    if (d->family == HX_FAMILY_CUDA) l = "cuda";
    else if (d->family == HX_FAMILY_OPENCL)
        l = d->kind == HX_KIND_FPGA ? "fpga" : d->kind == HX_KIND_GPU ? "cl-gpu"
          : d->kind == HX_KIND_CPU ? "cl-cpu" : "cl-acc";
    snprintf(buf, cap, "%s", l);
}

static void describe_devices(hx_runtime *rt, const char *set, hxb_row *row)
{
    int n = hx_runtime_device_count(rt), emulated = 0;
    row->threads = 0;
    row->ndev = n < HXB_MAX_DEVICES ? n : HXB_MAX_DEVICES;
    for (int d = 0; d < row->ndev; d++) {
        hx_device_info info;
        if (hx_runtime_device_info(rt, d, &info) != HX_OK)
            continue;
        device_label(&info, row->dev[d].label, sizeof row->dev[d].label);
        snprintf(row->dev[d].name, sizeof row->dev[d].name, "%s", info.name);
        row->dev[d].emulated = info.emulated;
        emulated |= info.emulated;
        if (info.family == HX_FAMILY_CPU && !row->threads)
            row->threads = info.compute_units;
    }
    snprintf(row->devices, sizeof row->devices, "%s%s%s", set, emulated ? "[pocl]" : "",
             hx_runtime_simulated(rt) ? "[sim]" : "");
}

/* A test at a depth is named as llama-bench names it ("tg64 @ d128"),
 * without the spaces, since the name is also a chart's file name. */
static void name_depth(hxb_test *t)
{
    size_t len = strlen(t->name);
    if (t->depth > 0)
        snprintf(t->name + len, sizeof t->name - len, "@d%d", t->depth);
}

static int build_tests(const hxb_params *p, hxb_results *r)
{
    r->tests = calloc((size_t)((p->prompts.n + p->gens.n * p->seqs.n) * p->depths.n), sizeof *r->tests);
    if (!r->tests)
        return -1;
    for (int d = 0; d < p->depths.n; d++)
        for (int i = 0; i < p->prompts.n; i++)
            if (p->prompts.v[i] > 0) {
                hxb_test *t = &r->tests[r->ntests++];
                *t = (hxb_test){HXB_PP, p->prompts.v[i], 1, p->depths.v[d], ""};
                snprintf(t->name, sizeof t->name, "pp%d", t->n);
                name_depth(t);
            }
    for (int d = 0; d < p->depths.n; d++)
        for (int i = 0; i < p->gens.n; i++)
            for (int k = 0; k < p->seqs.n && p->gens.v[i] > 0; k++) {
                hxb_test *t = &r->tests[r->ntests++];
                *t = (hxb_test){HXB_TG, p->gens.v[i], p->seqs.v[k], p->depths.v[d], ""};
                snprintf(t->name, sizeof t->name, p->seqs.v[k] > 1 ? "tg%dx%d" : "tg%d", t->n, t->seqs);
                name_depth(t);
            }
    return 0;
}

/* Positions a test's session holds: its depth and its own tokens. */
static uint64_t positions(const hxb_results *r, int t)
{
    return (uint64_t)r->tests[t].n + (uint64_t)r->tests[t].depth;
}

static int describe_model(hx_runtime *rt, const hxb_params *p, const hxb_results *r, hxb_model *md)
{
    hx_model_options mo = hx_model_options_default();
    mo.kv_type = p->kv_type;
    hx_model *m;
    hx_status st = hxb_model_open(rt, md, &mo, &m);
    if (st) {
        fprintf(stderr, "hetero-bench: model '%s': %s\n", md->path, hx_last_error());
        return -1;
    }
    hx_model_info in;
    hx_model_info_get(m, &in);
    snprintf(md->name, sizeof md->name, "%s", in.name);
    snprintf(md->arch, sizeof md->arch, "%s", in.arch);
    snprintf(md->type, sizeof md->type, "%s", in.ftype);
    md->params = in.n_params;
    md->bytes = in.file_bytes;
    md->n_vocab = in.n_vocab;
    md->n_ctx = in.n_ctx_train;
    hx_model_free(m);
    /* Past the trained context the text means nothing but the work per
     * token is the same, so the speed is measured, as llama-bench does. */
    for (int t = 0; t < r->ntests; t++)
        if (positions(r, t) > md->n_ctx) {
            fprintf(stderr, "hetero-bench: warning: %s needs %llu positions, past model '%s''s trained context of %u "
                    "(the speed is measured; text there would be meaningless)\n",
                    r->tests[t].name, (unsigned long long)positions(r, t), md->name, md->n_ctx);
            break;
        }
    return 0;
}

static void machine(hx_runtime *rt, hxb_results *r)
{
    hx_topology_info topo;
    hx_device_info d;
    if (hx_runtime_topology(rt, &topo) == HX_OK)
        r->cores = topo.cores, r->memory_bytes = topo.memory_bytes;
    for (int i = 0; i < hx_runtime_device_count(rt); i++)
        if (hx_runtime_device_info(rt, i, &d) == HX_OK && d.family == HX_FAMILY_CPU) {
            snprintf(r->cpu, sizeof r->cpu, "%s", d.name);
            if (hx_runtime_simulated(rt)) /* the described machine's, not this one's */
                r->cores = d.compute_units, r->memory_bytes = d.global_mem_bytes;
            if (hx_runtime_simulated(rt))
                snprintf(r->simulated, sizeof r->simulated, "%s", d.version); /* the description's file name */
            break;
        }
    time_t now = time(NULL);
    strftime(r->started, sizeof r->started, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
}

/* An injection that names a device a set lacks (kind=fpga on "cpu") does
 * not apply there: the set's rows are skipped with a note, so one run can
 * hold the CPU alone beside heterogeneous sets under injected slowdowns.
 * Any other failure is an error. */
static int check_injections(const hxb_params *p, hxb_results *r)
{
    for (int i = 0; i < p->injects.n; i++) {
        if (!*p->injects.item[i])
            continue;
        int usable = 0;
        for (int d = 0; d < p->devices.n; d++) {
            hx_runtime *rt;
            hx_status st;
            if (open_runtime_quiet(p, (config){d, 0, i, 0}, &rt, &st) == 0) {
                hx_runtime_close(rt);
                usable = 1;
                continue;
            }
            if (st != HX_ERR_NO_DEVICE)
                return open_runtime(p, (config){d, 0, i, 0}, &rt);
            r->skip[d][i] = 1;
            fprintf(stderr, "hetero-bench: --inject '%s' skipped on --devices '%s': %s\n", p->injects.item[i],
                    p->devices.item[d], hx_last_error());
        }
        if (!usable) {
            fprintf(stderr, "hetero-bench: --inject '%s' applies to no device set\n", p->injects.item[i]);
            return -1;
        }
    }
    return 0;
}

/* Every device set and every policy opens, every model loads and fits. */
static int preflight(const hxb_params *p, hxb_results *r)
{
    char err[512];
    if (hxb_hooks_check(p, err, sizeof err)) {
        fprintf(stderr, "hetero-bench: %s\n", err);
        return -1;
    }
    for (int d = 0; d < p->devices.n; d++)
        for (int s = 0; s < (d ? 1 : p->scheds.n); s++) {
            hx_runtime *rt;
            if (open_runtime(p, (config){d, s, -1, 0}, &rt))
                return -1;
            if (d == 0 && s == 0) {
                machine(rt, r);
                for (int m = 0; m < r->nmodels; m++)
                    if (describe_model(rt, p, r, &r->models[m])) {
                        hx_runtime_close(rt);
                        return -1;
                    }
            }
            hx_runtime_close(rt);
        }
    return check_injections(p, r);
}

/* The KV pool holds one context of up to 4096 tokens (the model's own,
 * 128k for Llama 3.1, would be sized for a context no test uses, and on a
 * GPU take the memory of the weights); sequences generated together need
 * one each (in whole blocks of 16), as llama-bench sizes its context to
 * the test. */
static uint32_t kv_tokens(const hxb_results *r, const hxb_model *md)
{
    uint64_t need = 0, dflt = md->n_ctx < 4096 ? md->n_ctx : 4096;
    for (int t = 0; t < r->ntests; t++) {
        uint64_t len = positions(r, t);
        /* A run at a depth forks the held context: its blocks are shared,
         * and a fork writing into the partial last one copies it. */
        uint64_t n = (uint64_t)r->tests[t].seqs * ((len + 15) / 16 * 16) + (r->tests[t].depth ? 32 : 0);
        if (n > need)
            need = n;
    }
    if (need > UINT32_MAX)
        return 0;
    return (uint32_t)(need > dflt ? need : dflt);
}

/* The context a session needs when a test reaches past the model's
 * trained one (0 = the trained context, which holds every test). */
static uint32_t longest_past_trained(const hxb_results *r, const hxb_model *md)
{
    uint64_t longest = 0;
    for (int t = 0; t < r->ntests; t++)
        if (positions(r, t) > longest)
            longest = positions(r, t);
    return longest > md->n_ctx && longest <= UINT32_MAX ? (uint32_t)longest : 0;
}

static hxb_row *new_row(hxb_results *r)
{
    if (r->nrows == r->cap) {
        int cap = r->cap ? 2 * r->cap : 64;
        hxb_row *rows = realloc(r->rows, sizeof *rows * (size_t)cap);
        if (!rows)
            return NULL;
        r->rows = rows, r->cap = cap;
    }
    hxb_row *row = &r->rows[r->nrows++];
    memset(row, 0, sizeof *row);
    return row;
}

static int run_config(const hxb_params *p, hxb_results *r, config c, int *done, int total)
{
    hx_runtime *rt;
    if (open_runtime(p, c, &rt))
        return -1;
    hxb_row proto = {.devices_i = c.d, .sched_i = c.s, .inject_i = c.i, .threads_i = c.t};
    describe_devices(rt, p->devices.item[c.d], &proto);
    if (!proto.threads)
        proto.threads = p->threads.v[c.t];
    snprintf(proto.sched, sizeof proto.sched, "%s", policy_name(p, c.s));
    snprintf(proto.inject, sizeof proto.inject, "%s", p->injects.item[c.i]);
    /* The strategy a row without --partition gets: the runtime's default. */
    const char *env_part = getenv("HX_PARTITION");
    const char *default_part = env_part && *env_part ? env_part : "affinity";
    int rc = 0;
    for (int mi = 0; mi < r->nmodels && !rc; mi++)
        for (int b = 0; b < p->batches.n * p->partitions.n && !rc; b++) {
            const int bi = b / p->partitions.n, pi = b % p->partitions.n;
            const char *part = p->partitions.item[pi];
            hx_model_options mo = hx_model_options_default();
            mo.kv_type = p->kv_type;
            mo.max_batch = (uint32_t)p->batches.v[bi];
            mo.partition = *part ? part : NULL;
            mo.kv_tokens = kv_tokens(r, &r->models[mi]);
            mo.n_ctx = longest_past_trained(r, &r->models[mi]);
            /* Every repetition evaluates the same tokens: with the prefix
             * cache on, the later ones would attach the first one's KV
             * blocks and a prefill would time a lookup.  llama-bench clears
             * its cache between runs; --prefix-share measures the cache. */
            mo.kv_prefix_cache = -1;
            hx_model *m;
            hx_status st = hxb_model_open(rt, &r->models[mi], &mo, &m);
            if (st) {
                fprintf(stderr, "hetero-bench: model '%s': %s\n", r->models[mi].path, hx_last_error());
                rc = -1;
                break;
            }
            for (int t = 0; t < r->ntests && !rc; t++) {
                hxb_row *row = new_row(r);
                if (!row) {
                    fprintf(stderr, "hetero-bench: out of memory\n");
                    rc = -1;
                    break;
                }
                *row = proto;
                row->model = mi, row->test = t, row->batch_i = bi, row->partition_i = pi;
                row->batch = p->batches.v[bi];
                snprintf(row->partition, sizeof row->partition, "%s", *part ? part : default_part);
                row->t = r->tests[t];
                if (p->progress)
                    fprintf(stderr, "hetero-bench: [%d/%d] %s, %s, %s, %d threads, batch %d: %s\n", ++*done, total,
                            r->models[mi].name, row->devices, row->sched, row->threads, row->batch, row->t.name);
                if ((st = hxb_measure(rt, m, &r->models[mi], &row->t, p, row))) {
                    fprintf(stderr, "hetero-bench: %s on '%s' (devices %s, policy %s): %s\n", row->t.name,
                            r->models[mi].name, row->devices, row->sched, hx_last_error());
                    rc = -1;
                } else if (!p->quiet && isatty(STDERR_FILENO)) {
                    /* As llama-bench prints each row when it is measured;
                     * the aligned tables follow on stdout at the end. */
                    fprintf(stderr, "| %s | %s | %s | %d threads | batch %d | %s | %.2f ± %.2f t/s |\n",
                            r->models[mi].name, row->devices, row->sched, row->threads, row->batch, row->t.name,
                            row->avg_ts, row->stddev_ts);
                }
            }
            hxb_depth_release(); /* its session belongs to the model */
            hx_model_free(m);
        }
    hx_runtime_close(rt);
    return rc;
}

int hxb_run_worker(const hxb_params *p)
{
    hx_runtime *rt = NULL;
    if (open_runtime(p, (config){0, 0, 0, 0}, &rt))
        rt = NULL;
    return cli_dist_worker("hetero-bench", rt);
}

int hxb_run_all(const hxb_params *p, hxb_results *r)
{
    if (build_tests(p, r) || preflight(p, r))
        return -1;
    int pairs = 0;
    for (int d = 0; d < p->devices.n; d++)
        for (int i = 0; i < p->injects.n; i++)
            pairs += !r->skip[d][i];
    int total = pairs * p->scheds.n * p->threads.n * r->nmodels * p->batches.n * p->partitions.n * r->ntests;
    int done = 0;
    for (int d = 0; d < p->devices.n; d++)
        for (int s = 0; s < p->scheds.n; s++)
            for (int i = 0; i < p->injects.n; i++)
                for (int t = 0; t < p->threads.n; t++)
                    if (!r->skip[d][i] && run_config(p, r, (config){d, s, i, t}, &done, total))
                        return -1;
    hxb_results_sort(r);
    return 0;
}

/* The trace holds one token after a warm-up one, so the timeline shows
 * the steady state of generation, not the first touch of the weights. */
int hxb_run_trace(const hxb_params *p, hxb_results *r, int set, const char *path)
{
    hx_runtime *rt;
    hx_model *m = NULL;
    hx_session *s = NULL;
    char err[512] = "";
    if (open_runtime(p, (config){set, 0, 0, 0}, &rt))
        return -1;
    hx_model_options mo = hx_model_options_default();
    mo.kv_type = p->kv_type;
    mo.max_batch = (uint32_t)p->batches.v[0];
    int32_t tok[2] = {1 % (int32_t)r->models[0].n_vocab, 2 % (int32_t)r->models[0].n_vocab};
    int rc = -1;
    if (hxb_model_open(rt, &r->models[0], &mo, &m) || hx_session_open(m, &s) || hx_session_eval(s, tok, 1, 0)) {
        snprintf(err, sizeof err, "%s", hx_last_error());
    } else if (hxb_hooks_trace_start(rt, path, err, sizeof err) == 0) {
        hx_status st = hx_session_eval(s, tok + 1, 1, 0);
        rc = hxb_hooks_trace_stop(rt, err, sizeof err);
        if (st) {
            snprintf(err, sizeof err, "%s", hx_last_error());
            rc = -1;
        }
    }
    if (rc)
        fprintf(stderr, "hetero-bench: tracing one token on --devices '%s': %s\n", p->devices.item[set], err);
    hx_session_close(s);
    hx_model_free(m);
    hx_runtime_close(rt);
    return rc;
}

static int row_cmp(const void *a, const void *b)
{
    const hxb_row *x = a, *y = b;
    const int kx[] = {x->model, x->test, x->threads_i, x->batch_i, x->partition_i, x->devices_i, x->sched_i, x->inject_i};
    const int ky[] = {y->model, y->test, y->threads_i, y->batch_i, y->partition_i, y->devices_i, y->sched_i, y->inject_i};
    for (size_t i = 0; i < sizeof kx / sizeof kx[0]; i++)
        if (kx[i] != ky[i])
            return kx[i] < ky[i] ? -1 : 1;
    return 0;
}

void hxb_results_sort(hxb_results *r)
{
    if (r->nrows)
        qsort(r->rows, (size_t)r->nrows, sizeof *r->rows, row_cmp);
}

int hxb_results_reference(const hxb_results *r, int row)
{
    const hxb_row *x = &r->rows[row];
    int ref = -1, group = 0;
    for (int i = 0; i < r->nrows; i++)
        if (r->rows[i].model == x->model && r->rows[i].test == x->test && group++ == 0)
            ref = i;
    return group > 1 ? ref : -1;
}

void hxb_results_free(hxb_results *r)
{
    for (int i = 0; i < r->nrows; i++)
        free(r->rows[i].samples_ns);
    free(r->rows);
    free(r->tests);
    free(r->models);
    memset(r, 0, sizeof *r);
}
