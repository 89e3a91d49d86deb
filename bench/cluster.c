/* hetero-bench --sim CLUSTER: a pipeline over several simulated nodes.
 *
 * A cluster description names its nodes, each a machine description
 * (bench/machines/), and the network between them:
 *
 *   cluster = 4x 2x EPYC 9654 + H200 + U55C, 200 Gb/s InfiniBand HDR
 *   bandwidth = 24G        # bytes/s one way on each link (k, M, G, T)
 *   latency = 2us          # per message (ns, us, ms, s)
 *   nodes = 4              # that many nodes of `machine`, or [node] sections
 *   machine = ../machines/epyc2s-h200-u55c.machine  # relative to this file
 *   [node a]               # (instead of nodes/machine) one node per section,
 *   machine = ...          #  in pipeline order
 *
 * What is predicted: pipeline parallelism as llama.cpp's RPC and the MPI
 * pipeline run it.  Node i holds a contiguous share of the layers (as
 * even as they divide; the output layer on the last node); between
 * neighbours each micro-batch sends its hidden state, n_embd x tokens in
 * F32, and for decode the last node sends the sampled token ids back to
 * the first.  A node's time for a micro-batch comes from the
 * single-machine simulator (the real task graph, placement policy and
 * device models; docs/simulator.md): the stage's layers are `NAME/N`
 * shapes, and two runs with different layer counts on the same machine
 * give the time per layer and the fixed part (embedding, output layer),
 * which is charged to the last node.  A message takes latency + bytes /
 * bandwidth; links are full duplex, one per pair of neighbours.
 *
 *   decode, B sequences as M micro-batches of b = B / M:
 *     round = max(sum_i s_i(b) + (N - 1) c(b) + c_back,  M max_i s_i(b),  M c(b))
 *     tokens/s = B / round    (a micro-batch's next token needs its last one)
 *   prefill of P tokens as M chunks of u = P / M, one after the other:
 *     time = sum_i s_i(u) + (N - 1) c(u) + (M - 1) max(max_i s_i(u), c(u))
 *
 * M is chosen per row (the best of 1 .. min(B, 2N) for decode, powers of
 * two down to 32-token chunks for prefill) and printed.  Everything here
 * is a prediction. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

#define HXB_MAX_NODES 64

typedef struct {
    char title[256];
    double bandwidth, latency;
    int n;
    char machine[HXB_MAX_NODES][1024];
} cluster;

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = 0;
    return s;
}

/* "24G" -> 24e9; "2us" -> 2e-6.  -1 when malformed. */
static double number(const char *v, int time)
{
    char *end = NULL;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || errno || !(x >= 0) || !isfinite(x))
        return -1;
    const char *u = end;
    static const struct { const char *s; double f; } sizes[] = {{"", 1}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}};
    static const struct { const char *s; double f; } times[] = {{"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}};
    if (time) {
        for (size_t i = 0; i < sizeof times / sizeof *times; i++)
            if (!strcmp(u, times[i].s))
                return x * times[i].f;
        return -1;
    }
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        if (!strcmp(u, sizes[i].s))
            return x * sizes[i].f;
    return -1;
}

/* Reads the first meaningful key: a cluster description starts with
 * `cluster =`. */
int hxb_is_cluster(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[1200];
    int yes = 0;
    while (fgets(line, sizeof line, f)) {
        char *h = strchr(line, '#');
        if (h)
            *h = 0;
        char *s = trim(line);
        if (!*s)
            continue;
        yes = !strncmp(s, "cluster", 7) && (s[7] == '=' || isspace((unsigned char)s[7])) && strchr(s, '=');
        break;
    }
    fclose(f);
    return yes;
}

static int bad(const char *path, int line, const char *why)
{
    fprintf(stderr, "hetero-bench: %s:%d: %s\n", path, line, why);
    return -1;
}

static int parse(const char *path, cluster *c)
{
    memset(c, 0, sizeof *c);
    c->bandwidth = c->latency = -1;
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "hetero-bench: --sim '%s': %s\n", path, strerror(errno));
        return -1;
    }
    char dir[1024];
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    char line[1200], shared[1024] = "";
    int ln = 0, nodes = 0, in_node = 0, rc = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        ln++;
        if (!strchr(line, '\n') && !feof(f)) {
            rc = bad(path, ln, "line too long");
            break;
        }
        char *h = strchr(line, '#');
        if (h)
            *h = 0;
        char *s = trim(line);
        if (!*s)
            continue;
        if (*s == '[') {
            if (strncmp(s, "[node", 5) || s[strlen(s) - 1] != ']') {
                rc = bad(path, ln, "expected [node NAME]");
                break;
            }
            if (c->n == HXB_MAX_NODES) {
                rc = bad(path, ln, "too many nodes (64 at most)");
                break;
            }
            c->machine[c->n++][0] = 0;
            in_node = 1;
            continue;
        }
        char *eq = strchr(s, '=');
        if (!eq) {
            rc = bad(path, ln, "expected KEY = VALUE");
            break;
        }
        *eq = 0;
        char *k = trim(s), *v = trim(eq + 1);
        if (!strcmp(k, "machine")) {
            char *to = in_node ? c->machine[c->n - 1] : shared;
            if (*v == '/')
                snprintf(to, 1024, "%s", v);
            else if ((size_t)snprintf(to, 1024, "%s/%s", dir, v) >= 1024)
                rc = bad(path, ln, "machine path too long");
        } else if (in_node) {
            rc = bad(path, ln, "a [node] section takes only `machine`");
        } else if (!strcmp(k, "cluster")) {
            snprintf(c->title, sizeof c->title, "%s", v);
        } else if (!strcmp(k, "bandwidth")) {
            if ((c->bandwidth = number(v, 0)) <= 0)
                rc = bad(path, ln, "bandwidth: a positive number of bytes/s, e.g. 24G");
        } else if (!strcmp(k, "latency")) {
            if ((c->latency = number(v, 1)) < 0)
                rc = bad(path, ln, "latency: a time, e.g. 2us");
        } else if (!strcmp(k, "nodes")) {
            char *end = NULL;
            long n = strtol(v, &end, 10);
            if (end == v || *end || n < 1 || n > HXB_MAX_NODES)
                rc = bad(path, ln, "nodes: 1 to 64");
            nodes = (int)n;
        } else {
            char why[160];
            snprintf(why, sizeof why, "unknown key '%s' (cluster, bandwidth, latency, nodes, machine, [node])", k);
            rc = bad(path, ln, why);
        }
    }
    fclose(f);
    if (rc)
        return rc;
    if (c->bandwidth <= 0 || c->latency < 0)
        return bad(path, ln, "the network's `bandwidth` and `latency` are required");
    if (nodes && c->n)
        return bad(path, ln, "either `nodes` with `machine`, or [node] sections, not both");
    if (nodes) {
        if (!*shared)
            return bad(path, ln, "`nodes` needs a `machine`");
        for (int i = 0; i < nodes; i++)
            snprintf(c->machine[i], sizeof c->machine[i], "%s", shared);
        c->n = nodes;
    }
    if (!c->n)
        return bad(path, ln, "no nodes");
    for (int i = 0; i < c->n; i++)
        if (!*c->machine[i])
            return bad(path, ln, "a [node] without `machine`");
    return 0;
}

/* Seconds of one evaluation on `machine` of the first `layers` layers of
 * shapes `name`: `tokens` prompt tokens (pp), or a decode step of
 * `tokens` sequences at `depth`. -1 when it failed. */
static double sim_eval(const hxb_params *p, const char *machine, const char *name, const char *type, int layers,
                       int prefill, int tokens, int depth, int gen)
{
    char shape[200];
    snprintf(shape, sizeof shape, "%s/%d:%s", name, layers, type);
    hxb_params q = *p;
    memset(&q.shapes, 0, sizeof q.shapes);
    memset(&q.models, 0, sizeof q.models);
    memset(&q.synthetic, 0, sizeof q.synthetic);
    q.shapes.item[0] = shape;
    q.shapes.n = 1;
    q.sim = machine;
    q.prompts = (hxb_intlist){.v = {prefill ? tokens : 0}, .n = 1};
    q.gens = (hxb_intlist){.v = {prefill ? 0 : gen}, .n = 1};
    q.seqs = (hxb_intlist){.v = {prefill ? 1 : tokens}, .n = 1};
    q.depths = (hxb_intlist){.v = {prefill ? 0 : depth}, .n = 1};
    q.threads.n = q.batches.n = q.partitions.n = q.devices.n = q.scheds.n = q.injects.n = 1;
    q.reps = 1;
    q.quiet = 1;
    q.progress = 0;
    q.prefix_share = 0;
    q.trace = q.plot = q.timeline = NULL;
    hxb_results r = {0};
    double sec = -1;
    if (!hxb_models_resolve(&q, &r) && !hxb_run_all(&q, &r) && r.nrows == 1 && r.rows[0].avg_ts > 0)
        sec = (prefill ? tokens : (double)tokens) / r.rows[0].avg_ts;
    hxb_results_free(&r);
    return sec;
}

/* A node's time per layer and fixed time for one evaluation shape. */
typedef struct {
    double per_layer, fixed;
} stage_model;

static int stage_fit(const hxb_params *p, const char *machine, const char *name, const char *type, int most,
                     int prefill, int tokens, int depth, int gen, stage_model *out)
{
    int a = most < 2 ? 2 : most, b = a / 2;
    double ta = sim_eval(p, machine, name, type, a, prefill, tokens, depth, gen);
    double tb = ta > 0 ? sim_eval(p, machine, name, type, b, prefill, tokens, depth, gen) : -1;
    if (ta <= 0 || tb <= 0)
        return -1;
    out->per_layer = (ta - tb) / (a - b);
    out->fixed = fmax(0, ta - a * out->per_layer);
    return 0;
}

typedef struct {
    int M;
    double tps, stage_max, link;
} pipe_result;

/* Time of node i's share for one micro-batch. */
static double stage_time(const stage_model *sm, const int *layers, int n, int i)
{
    return layers[i] * sm[i].per_layer + (i == n - 1 ? sm[i].fixed : 0);
}

static double message(const cluster *c, double bytes) { return c->latency + bytes / c->bandwidth; }

/* The presets' layers and width (model/shapes.c). */
static int model_dims(const char *name, int *n_layer, int *n_embd)
{
    static const struct { const char *name; int layers, embd; } known[] = {
        {"llama2-7b", 32, 4096},  {"llama2-13b", 40, 5120},  {"llama2-70b", 80, 8192},     {"llama3-8b", 32, 4096},
        {"llama3-70b", 80, 8192}, {"mixtral-8x7b", 32, 4096}, {"qwen3-30b-a3b", 48, 2048},
        {"smollm2-135m", 30, 576},
    };
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (!strcmp(known[i].name, name)) {
            *n_layer = known[i].layers;
            *n_embd = known[i].embd;
            return 0;
        }
    return -1;
}

int hxb_cluster_run(const hxb_params *p)
{
    cluster c;
    if (parse(p->sim, &c))
        return 1;
    printf("Simulated cluster: %s: %d node%s, links %.3g GB/s, %.3g us per message (predictions, not "
           "measurements)\n\n",
           *c.title ? c.title : p->sim, c.n, c.n > 1 ? "s" : "", c.bandwidth / 1e9, c.latency * 1e6);
    printf("| model | nodes | test | micro-batches | slowest stage ms | message ms | t/s | t/s per node |\n");
    printf("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |\n");
    int rc = 0;
    for (int si = 0; si < p->shapes.n; si++) {
        char name[128], type[32] = "q4_0";
        const char *colon = strchr(p->shapes.item[si], ':');
        snprintf(name, sizeof name, "%.*s", colon ? (int)(colon - p->shapes.item[si]) : (int)strlen(p->shapes.item[si]),
                 p->shapes.item[si]);
        if (colon)
            snprintf(type, sizeof type, "%s", colon + 1);
        int L, D;
        if (model_dims(name, &L, &D)) {
            fprintf(stderr, "hetero-bench: --sim CLUSTER runs the shapes presets of dense and MoE models "
                            "(llama2-7b, llama2-13b, llama2-70b, llama3-8b, llama3-70b, mixtral-8x7b, qwen3-30b-a3b, "
                            "smollm2-135m), "
                            "not '%s'\n",
                    name);
            return 1;
        }
        if (c.n > L) {
            fprintf(stderr, "hetero-bench: %d nodes for %d layers\n", c.n, L);
            return 1;
        }
        int layers[HXB_MAX_NODES], most = 0;
        for (int i = 0; i < c.n; i++) {
            layers[i] = L / c.n + (i < L % c.n);
            most = layers[i] > most ? layers[i] : most;
        }
        /* Tests: every prompt size (prefill), every gen x seqs x depth (decode). */
        for (int kind = 0; kind < 2; kind++) {
            const hxb_intlist *sizes = kind ? &p->gens : &p->prompts;
            for (int zi = 0; zi < sizes->n; zi++) {
                int size = sizes->v[zi];
                if (size <= 0)
                    continue;
                for (int bi = 0; bi < (kind ? p->seqs.n : 1); bi++)
                    for (int di = 0; di < (kind ? p->depths.n : 1); di++) {
                        int B = kind ? p->seqs.v[bi] : 1, depth = kind ? p->depths.v[di] : 0;
                        pipe_result best = {0};
                        int Mmax = kind ? (B < 2 * c.n ? B : 2 * c.n) : 64;
                        for (int M = 1; M <= Mmax; M = kind ? M + 1 : M * 2) {
                            int tokens = kind ? (B + M - 1) / M : (size + M - 1) / M;
                            if (!kind && M > 1 && tokens < 32)
                                break;
                            stage_model sm[HXB_MAX_NODES];
                            int ok = 1;
                            for (int i = 0; i < c.n && ok; i++) {
                                int same = 0;
                                for (int j = 0; j < i && !same; j++)
                                    if (!strcmp(c.machine[j], c.machine[i])) {
                                        sm[i] = sm[j];
                                        same = 1;
                                    }
                                if (!same)
                                    ok = !stage_fit(p, c.machine[i], name, type, most, !kind, tokens, depth, size,
                                                    &sm[i]);
                            }
                            if (!ok) {
                                fprintf(stderr, "hetero-bench: %s on %s: a stage did not run in the simulator\n",
                                        p->shapes.item[si], p->sim);
                                rc = 1;
                                break;
                            }
                            double sum = 0, mx = 0;
                            for (int i = 0; i < c.n; i++) {
                                double t = stage_time(sm, layers, c.n, i);
                                sum += t;
                                mx = fmax(mx, t);
                            }
                            double msg = c.n > 1 ? message(&c, 4.0 * D * tokens) : 0;
                            double tps;
                            if (kind) {
                                double back = c.n > 1 ? message(&c, 4.0 * tokens) : 0;
                                double round = fmax(sum + (c.n - 1) * msg + back, fmax(M * mx, M * msg));
                                tps = B / round;
                            } else {
                                double t = sum + (c.n - 1) * msg + (M - 1) * fmax(mx, msg);
                                tps = size / t;
                            }
                            if (tps > best.tps)
                                best = (pipe_result){M, tps, mx, msg};
                        }
                        if (!best.tps)
                            continue;
                        char test[64];
                        if (kind && B > 1)
                            snprintf(test, sizeof test, "tg%dx%d@d%d", size, B, depth);
                        else if (kind)
                            snprintf(test, sizeof test, "tg%d@d%d", size, depth);
                        else
                            snprintf(test, sizeof test, "pp%d", size);
                        printf("| %s | %d | %s | %d | %.3f | %.4f | %.2f | %.2f |\n", p->shapes.item[si], c.n, test,
                               best.M, best.stage_max * 1e3, best.link * 1e3, best.tps, best.tps / c.n);
                        fflush(stdout);
                    }
            }
        }
    }
    return rc;
}
