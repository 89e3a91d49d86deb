/* bench-soak: a serving process's weeks, shrunk to cycles.  One model is
 * loaded once; each cycle opens a session, generates greedily, checks the
 * tokens are those of the first cycle, and closes it.  Every K cycles a row
 * says what the process holds: resident memory, task records alive, KV
 * blocks in use (after the close), open sessions, and the time per cycle.
 * A runtime that keeps nothing from one cycle to the next draws flat lines
 * after the warm-up.
 *
 *   bench-soak [-m FILE | --synthetic PRESET:TYPE] [-n CYCLES] [-k EVERY]
 *              [-g TOKENS] [-p TEXT] [--devices LIST] [-t THREADS]
 *              [--warmup CYCLES] [--csv FILE] [--svg FILE] [--max-growth MIB]
 *
 * Exit status: 0; 1 when a cycle fails or generates other tokens, or when
 * the resident memory grew by more than --max-growth MiB after the
 * warm-up; 2 for a bad command line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "tools/cli_num.h"

typedef struct {
    const char *model, *synthetic, *prompt, *devices, *csv, *svg;
    int cycles, every, tokens, threads, warmup;
    double max_growth_mib; /* < 0: no limit */
} options;

typedef struct {
    int cycle;
    double rss_mib, ms_per_cycle;
    uint64_t tasks_alive;
    uint32_t kv_used, sessions;
} sample;

static void usage(FILE *f)
{
    fputs("usage: bench-soak [-m FILE | --synthetic PRESET:TYPE] [-n CYCLES] [-k EVERY] [-g TOKENS]\n"
          "                  [-p TEXT] [--devices LIST] [-t THREADS] [--warmup CYCLES]\n"
          "                  [--csv FILE] [--svg FILE] [--max-growth MIB]\n"
          "defaults: --synthetic tiny:q8_0, -n 1000, -k 100, -g 16, --warmup K,\n"
          "          -p \"The capital of France is\", the runtime's devices and threads\n",
          f);
}

static int parse_int(const char *flag, const char *v, int lo, int *out)
{
    return cli_int("bench-soak", flag, v, lo, 100000000, out);
}

/* 0, -1 after printing why, 1 for --help. */
static int parse(int argc, char **argv, options *o)
{
    *o = (options){.synthetic = "tiny:q8_0", .prompt = "The capital of France is", .cycles = 1000,
                   .every = 100, .tokens = 16, .warmup = -1, .max_growth_mib = -1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return 1;
        if (!v) {
            fprintf(stderr, "bench-soak: unknown option or missing value: %s\n", a);
            return -1;
        }
        i++;
        int bad = 0;
        if (!strcmp(a, "-m"))
            o->model = v;
        else if (!strcmp(a, "--synthetic"))
            o->synthetic = v;
        else if (!strcmp(a, "-p"))
            o->prompt = v;
        else if (!strcmp(a, "--devices"))
            o->devices = v;
        else if (!strcmp(a, "--csv"))
            o->csv = v;
        else if (!strcmp(a, "--svg"))
            o->svg = v;
        else if (!strcmp(a, "-n"))
            bad = parse_int(a, v, 1, &o->cycles);
        else if (!strcmp(a, "-k"))
            bad = parse_int(a, v, 1, &o->every);
        else if (!strcmp(a, "-g"))
            bad = parse_int(a, v, 1, &o->tokens);
        else if (!strcmp(a, "-t"))
            bad = parse_int(a, v, 0, &o->threads);
        else if (!strcmp(a, "--warmup"))
            bad = parse_int(a, v, 0, &o->warmup);
        else if (!strcmp(a, "--max-growth")) {
            bad = cli_double("bench-soak", a, v, 0, 1e9, &o->max_growth_mib);
        } else {
            fprintf(stderr, "bench-soak: unknown option %s\n", a);
            return -1;
        }
        if (bad)
            return -1;
    }
    if (o->warmup < 0)
        o->warmup = o->every;
    return 0;
}

typedef struct {
    int32_t *tok;
    int n, cap;
} tokens;

static int collect(void *user, int32_t token, const char *piece)
{
    tokens *t = user;
    (void)piece;
    if (token >= 0 && t->n < t->cap)
        t->tok[t->n++] = token;
    return 0;
}

/* ---- the plot: one panel per quantity, cycles across ------------------- */

enum { W = 880, PANEL_H = 170, GAP = 56, LEFT = 80, RIGHT = 24, TOP = 60 };

typedef double (*field_fn)(const sample *s);
static double f_rss(const sample *s) { return s->rss_mib; }
static double f_tasks(const sample *s) { return (double)s->tasks_alive; }
static double f_kv(const sample *s) { return s->kv_used; }
static double f_ms(const sample *s) { return s->ms_per_cycle; }

static void panel(FILE *f, int k, const char *title, field_fn get, const sample *s, int n, int cycles,
                  int warmup)
{
    double y0 = TOP + k * (PANEL_H + GAP), h = PANEL_H, w = W - LEFT - RIGHT, max = 0;
    for (int i = 0; i < n; i++)
        if (get(&s[i]) > max)
            max = get(&s[i]);
    double step = hxb_svg_nice_step(max > 0 ? max * 1.1 : 1, 4), top = step * 4;
    while (top < max)
        top += step;
    hxb_svg_text(f, LEFT, y0 - 8, "start", 13, "#000", "%s", title);
    for (double v = 0; v <= top + step / 2; v += step) {
        double y = y0 + h - v / top * h;
        hxb_svg_line(f, LEFT, y, LEFT + w, y, "#ddd", 1);
        hxb_svg_text(f, LEFT - 6, y + 4, "end", 11, "#444", "%g", v);
    }
    double xstep = hxb_svg_nice_step(cycles, 8);
    for (double c = 0; c <= cycles; c += xstep) {
        double x = LEFT + c / cycles * w;
        hxb_svg_line(f, x, y0 + h, x, y0 + h + 4, "#444", 1);
        hxb_svg_text(f, x, y0 + h + 16, "middle", 11, "#444", "%g", c);
    }
    hxb_svg_line(f, LEFT, y0 + h, LEFT + w, y0 + h, "#444", 1);
    if (warmup > 0 && warmup < cycles) {
        double x = LEFT + (double)warmup / cycles * w;
        hxb_svg_line(f, x, y0, x, y0 + h, "#bbb", 1);
        hxb_svg_text(f, x + 4, y0 + 12, "start", 10, "#888", "warm-up ends");
    }
    const char *c = hxb_svg_color(k);
    for (int i = 0; i < n; i++) {
        double x = LEFT + (double)s[i].cycle / cycles * w, y = y0 + h - get(&s[i]) / top * h;
        if (i) {
            double px = LEFT + (double)s[i - 1].cycle / cycles * w, py = y0 + h - get(&s[i - 1]) / top * h;
            hxb_svg_line(f, px, py, x, y, c, 2);
        }
        char tip[96];
        snprintf(tip, sizeof tip, "cycle %d: %g", s[i].cycle, get(&s[i]));
        hxb_svg_rect(f, x - 2, y - 2, 4, 4, c, tip);
    }
}

static int write_svg(const char *path, const char *title, const sample *s, int n, int cycles, int warmup)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "bench-soak: cannot write %s\n", path);
        return -1;
    }
    hxb_svg_begin(f, W, TOP + 4 * (PANEL_H + GAP));
    hxb_svg_text(f, W / 2.0, 24, "middle", 15, "#000", "%s", title);
    hxb_svg_text(f, W / 2.0, 42, "middle", 11, "#444", "session cycles (open, generate, close) on the x axes");
    panel(f, 0, "resident memory (MiB)", f_rss, s, n, cycles, warmup);
    panel(f, 1, "task records alive after the close", f_tasks, s, n, cycles, warmup);
    panel(f, 2, "KV blocks in use after the close", f_kv, s, n, cycles, warmup);
    panel(f, 3, "ms per cycle (mean of the last K)", f_ms, s, n, cycles, warmup);
    hxb_svg_end(f);
    int bad = ferror(f);
    if (fclose(f) || bad) {
        fprintf(stderr, "bench-soak: writing %s failed\n", path);
        return -1;
    }
    return 0;
}

/* ---- the run ------------------------------------------------------------ */

static int fail(const char *what)
{
    fprintf(stderr, "bench-soak: %s: %s\n", what, hx_last_error());
    return 1;
}

static int soak(const options *o, hx_runtime *rt, hx_model *m, const char *label)
{
    int32_t prompt[512];
    size_t n_prompt;
    if (hx_model_tokenize(m, o->prompt, strlen(o->prompt), 1, 1, prompt, 512, &n_prompt))
        return fail("tokenizing the prompt");
    hx_sampling greedy = hx_sampling_default();
    greedy.temperature = 0;
    tokens first = {calloc((size_t)o->tokens, sizeof(int32_t)), 0, o->tokens};
    tokens got = {calloc((size_t)o->tokens, sizeof(int32_t)), 0, o->tokens};
    sample *s = calloc((size_t)(o->cycles / o->every + 1), sizeof *s);
    FILE *csv = o->csv ? fopen(o->csv, "w") : NULL;
    int rc = 0, ns = 0;
    if (!first.tok || !got.tok || !s || (o->csv && !csv)) {
        fprintf(stderr, "bench-soak: %s\n", o->csv && !csv ? "cannot write the CSV file" : "out of memory");
        rc = 1;
    }
    if (csv)
        fputs("cycle,rss_mib,tasks_alive,kv_blocks_used,sessions_open,ms_per_cycle\n", csv);
    hx_model_stats ms;
    if (!rc && hx_model_stats_get(m, &ms))
        rc = fail("model statistics");
    if (!rc)
        printf("%d cycles of %zu prompt + %d generated tokens; KV pool %u blocks of %u tokens\n\n"
               "%8s %10s %12s %10s %9s %12s\n",
               o->cycles, n_prompt, o->tokens, ms.kv_blocks_total, ms.kv_block_tokens, "cycle", "RSS MiB",
               "tasks alive", "KV in use", "sessions", "ms/cycle");
    double t_mark = hxb_stats_now_ns();
    for (int c = 1; c <= o->cycles && !rc; c++) {
        hx_session *se;
        tokens *t = c == 1 ? &first : &got;
        t->n = 0;
        if (hx_session_open(m, &se))
            rc = fail("opening a session");
        else if (hx_session_generate(se, prompt, n_prompt, (uint32_t)o->tokens, &greedy, collect, t, NULL))
            rc = fail("generating");
        if (!rc && hx_session_close(se))
            rc = fail("closing the session");
        if (!rc && c > 1 && (got.n != first.n || memcmp(got.tok, first.tok, sizeof(int32_t) * (size_t)got.n))) {
            fprintf(stderr, "bench-soak: cycle %d generated other tokens than the first\n", c);
            rc = 1;
        }
        if (rc || c % o->every)
            continue;
        hx_runtime_stats rs;
        hx_runtime_stats_get(rt, &rs);
        if (hx_model_stats_get(m, &ms))
            rc = fail("model statistics");
        double now = hxb_stats_now_ns();
        sample *x = &s[ns++];
        *x = (sample){c, (double)hxb_stats_rss() / (1 << 20), (now - t_mark) / 1e6 / o->every, rs.tasks_alive,
                      ms.kv_blocks_used, ms.sessions_open};
        t_mark = now;
        printf("%8d %10.1f %12llu %10u %9u %12.1f\n", c, x->rss_mib, (unsigned long long)x->tasks_alive,
               x->kv_used, x->sessions, x->ms_per_cycle);
        fflush(stdout);
        if (csv)
            fprintf(csv, "%d,%.2f,%llu,%u,%u,%.3f\n", c, x->rss_mib, (unsigned long long)x->tasks_alive,
                    x->kv_used, x->sessions, x->ms_per_cycle);
    }
    /* The baseline: the first row at or after the warm-up. */
    int b = 0;
    while (b < ns && s[b].cycle < o->warmup)
        b++;
    if (!rc && b < ns - 1) {
        double growth = s[ns - 1].rss_mib - s[b].rss_mib;
        uint64_t alive = 0;
        for (int i = b; i < ns; i++)
            alive = s[i].tasks_alive > alive ? s[i].tasks_alive : alive;
        printf("\nafter the warm-up (cycle %d to %d): RSS %+.1f MiB (%+.1f KiB per 1000 cycles), "
               "at most %llu tasks alive, %.1f -> %.1f ms per cycle\n",
               s[b].cycle, s[ns - 1].cycle, growth, growth * 1024 * 1000 / (s[ns - 1].cycle - s[b].cycle),
               (unsigned long long)alive, s[b].ms_per_cycle, s[ns - 1].ms_per_cycle);
        if (o->max_growth_mib >= 0 && growth > o->max_growth_mib) {
            fprintf(stderr, "bench-soak: RSS grew by %.1f MiB after the warm-up (--max-growth %g)\n", growth,
                    o->max_growth_mib);
            rc = 1;
        }
    }
    if (o->svg && ns && write_svg(o->svg, label, s, ns, o->cycles, o->warmup))
        rc = 1;
    if (csv && fclose(csv)) {
        fprintf(stderr, "bench-soak: writing %s failed\n", o->csv);
        rc = 1;
    }
    free(first.tok);
    free(got.tok);
    free(s);
    return rc;
}

int main(int argc, char **argv)
{
    options o;
    int p = parse(argc, argv, &o);
    if (p) {
        usage(p > 0 ? stdout : stderr);
        return p > 0 ? 0 : 2;
    }
    char path[1024];
    if (o.model) {
        snprintf(path, sizeof path, "%s", o.model);
    } else {
        char preset[64], type[32];
        const char *colon = strchr(o.synthetic, ':');
        snprintf(preset, sizeof preset, "%.*s", colon ? (int)(colon - o.synthetic) : (int)strlen(o.synthetic),
                 o.synthetic);
        snprintf(type, sizeof type, "%s", colon ? colon + 1 : "q8_0");
        if (hx_model_synthetic_cached(preset, type, path, sizeof path, NULL))
            return fail("the embedded model");
    }
    hx_runtime_options ro = hx_runtime_options_default();
    ro.devices = o.devices;
    ro.cpu_threads = o.threads;
    hx_runtime *rt;
    if (hx_runtime_open(&rt, &ro))
        return fail("opening the runtime");
    hx_model *m;
    if (hx_model_load(rt, path, NULL, &m)) {
        hx_runtime_close(rt);
        return fail("loading the model");
    }
    hx_model_info mi;
    hx_model_info_get(m, &mi);
    char devs[256] = "";
    for (int d = 0; d < hx_runtime_device_count(rt); d++) {
        hx_device_info di;
        if (hx_runtime_device_info(rt, d, &di) == HX_OK)
            snprintf(devs + strlen(devs), sizeof devs - strlen(devs), "%s%s", d ? ", " : "", di.name);
    }
    char label[512];
    snprintf(label, sizeof label, "bench-soak: %s (%s) on %s", mi.name, mi.ftype, devs);
    printf("%s\n", label);
    int rc = soak(&o, rt, m, label);
    if (hx_model_free(m) || hx_runtime_close(rt))
        rc = fail("closing");
    return rc;
}
