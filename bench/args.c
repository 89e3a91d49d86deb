/* hetero-bench's command line, in llama-bench's conventions: list options
 * take comma-separated values (or ranges A-B, A-B+STEP, A-B*FACTOR) and may
 * be repeated; every combination of their values is one row. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "tools/cli_num.h"

void hxb_args_usage(FILE *f)
{
    fputs("usage: hetero-bench [options]\n"
          "Measures prompt processing (ppN: N tokens in one evaluation of a fresh session) and\n"
          "generation (tgN: N tokens one at a time) for every combination of the lists below.\n"
          "\n"
          "  -m FILE              GGUF model; repeatable (default: the embedded synthetic models)\n"
          "  --synthetic LIST     embedded models as PRESET:TYPE (default tiny:f16,tiny:q8_0,tiny:q4_0)\n"
          "  -p LIST              prompt sizes (default 64; 0 = no pp test)\n"
          "  -n LIST              generated tokens (default 32; 0 = no tg test)\n"
          "  -r N                 repetitions of each test (default 3)\n"
          "  -t LIST              CPU threads (default: the runtime's, one per physical core)\n"
          "  -b LIST              largest batch per evaluation (default 512)\n"
          "  --partition LIST     how each layer's tasks prefer devices: affinity, layers, auto,\n"
          "                       colocated\n"
          "                       (default: the runtime's, HX_PARTITION or affinity)\n"
          "  --seqs LIST          sequences generated together in one batch (tg; default 1)\n"
          "  -d LIST              context depth: tokens each session evaluates, unmeasured, before\n"
          "                       the test (llama-bench's -d; default 0)\n"
          "  --devices SETS       device sets, ';'-separated or repeated, each a runtime device\n"
          "                       list: cpu, cpu,fpga, cpu,cuda, cpu,opencl, all ... (default cpu)\n"
          "  --sched LIST         scheduling policies: static, eager, ws, dmda, plan (the placement\n"
          "                       planner), ngl (llama.cpp's -ngl layer split) (default: the\n"
          "                       runtime's)\n"
          "  --inject SPECS       slowdowns injected by the runtime, ';'-separated or repeated\n"
          "                       ('none' = no injection)\n"
          "  --fpga-emulation pocl  present PoCL as an emulated FPGA (never done implicitly)\n"
          "  --kv-type T          KV cache type: f16 (default), q8_0, q4_0, f32\n"
          "  -o md|json|csv       output format (default md)\n"
          "  --plot DIR           also write DIR/hetero-bench.json and SVG charts of each test\n"
          "  --trace FILE         have the runtime write a Chrome trace of one token to FILE\n"
          "                       (drawn as DIR/timeline.svg with --plot)\n"
          "  --timeline FILE      draw an existing Chrome trace as DIR/timeline.svg (needs --plot)\n"
          "                       and run nothing else\n"
          "  --sim MACHINE        run on the machine a description file describes, in the simulator\n"
          "                       (bench/machines/); times are the simulated machine's; a cluster\n"
          "                       description (bench/clusters/) predicts a pipeline over its nodes\n"
          "  --shapes LIST        with --sim: models without weights as NAME:TYPE, NAME one of\n"
          "                       llama2-7b, llama2-13b, llama2-70b, llama3-8b, llama3-70b,\n"
          "                       mixtral-8x7b, qwen3-30b-a3b, smollm2-135m, tiny, small (default\n"
          "                       llama2-7b:q4_0 when no -m is given); NAME/N: its first N layers\n"
          "  --prefix-share N     instead of pp/tg: N sessions whose prompts share a prefix, with\n"
          "                       the KV prefix cache and without (tokens evaluated, time, KV held)\n"
          "  --prefix-len L       --prefix-share's common prefix (default 1024 tokens)\n"
          "  --suffix-len S       --prefix-share's different suffixes (default 32 tokens)\n"
          "  --no-warmup          skip the warm-up run before each test\n"
          "  --progress           report each combination on stderr (as it starts)\n"
          "  -q, --quiet          no rows on stderr as they finish (there are, on a terminal)\n"
          CLI_DIST_USAGE
          "  -h, --help           this text\n"
          "List: 64,128,256 or 64-512*2 (64,128,256,512) or 1-4+1 (1,2,3,4).\n",
          f);
}

static int strlist_add(hxb_strlist *l, const char *s, size_t len)
{
    if (l->n == HXB_MAX_LIST) {
        fprintf(stderr, "hetero-bench: more than %d values in one list\n", HXB_MAX_LIST);
        return -1;
    }
    char *c = malloc(len + 1);
    if (!c) {
        fprintf(stderr, "hetero-bench: out of memory\n");
        return -1;
    }
    memcpy(c, s, len);
    c[len] = 0;
    l->item[l->n++] = c;
    return 0;
}

/* Splits on `sep`, trimming blanks; empty items are errors. */
static int strlist_split(hxb_strlist *l, const char *opt, const char *s, char sep)
{
    const char *all = s;
    for (;;) {
        const char *e = strchr(s, sep);
        size_t len = e ? (size_t)(e - s) : strlen(s);
        while (len && (*s == ' ' || *s == '\t'))
            s++, len--;
        while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
            len--;
        if (!len) {
            fprintf(stderr, "hetero-bench: %s: empty value in '%s'\n", opt, all);
            return -1;
        }
        if (strlist_add(l, s, len))
            return -1;
        if (!e)
            return 0;
        s = e + 1;
    }
}

static int parse_long(const char **s, long *v)
{
    char *end;
    errno = 0;
    if (**s < '0' || **s > '9')
        return -1;
    *v = strtol(*s, &end, 10);
    if (errno || end == *s)
        return -1;
    *s = end;
    return 0;
}

static int intlist_push(hxb_intlist *l, long v)
{
    if (l->n == HXB_MAX_LIST)
        return -1;
    l->v[l->n++] = (int)v;
    return 0;
}

/* "8,16", "8-64*2", "1-4+1"; every value in [lo, hi]. */
static int intlist_parse(hxb_intlist *l, const char *opt, const char *s, long lo, long hi)
{
    const char *p = s;
    for (;;) {
        long a, b, step = 0;
        char op = 0;
        if (parse_long(&p, &a) || a < lo || a > hi)
            goto bad;
        b = a;
        if (*p == '-') {
            p++;
            if (parse_long(&p, &b) || b < a || b > hi)
                goto bad;
            op = '+', step = 1;
            if (*p == '+' || *p == '*') {
                op = *p++;
                if (parse_long(&p, &step) || step < (op == '*' ? 2 : 1) || (op == '*' && a < 1))
                    goto bad;
            }
        }
        for (long v = a; v <= b; v = op == '*' ? v * step : v + (step ? step : 1)) {
            if (intlist_push(l, v)) {
                fprintf(stderr, "hetero-bench: %s '%s': more than %d values\n", opt, s, HXB_MAX_LIST);
                return -1;
            }
            if (a == b)
                break;
        }
        if (!*p)
            return 0;
        if (*p++ != ',')
            goto bad;
    }
bad:
    /* cli_num.h's message, for a list: llama-bench's lists of numbers. */
    fprintf(stderr, "hetero-bench: %s takes whole numbers from %ld to %ld (one, a comma-separated list, or ranges "
                    "A-B, A-B+STEP, A-B*FACTOR), not '%s'\n",
            opt, lo, hi, s);
    return -1;
}

static int parse_format(const char *v, hxb_format *f)
{
    if (!strcmp(v, "md")) *f = HXB_MD;
    else if (!strcmp(v, "json")) *f = HXB_JSON;
    else if (!strcmp(v, "csv")) *f = HXB_CSV;
    else {
        fprintf(stderr, "hetero-bench: -o '%s': expected md, json or csv\n", v);
        return -1;
    }
    return 0;
}

static int defaults(hxb_params *p)
{
    static const char *const synth[] = {"tiny:f16", "tiny:q8_0", "tiny:q4_0"};
    if (p->shapes.n && !p->sim) {
        fprintf(stderr, "hetero-bench: --shapes are models without weights: they run only with --sim MACHINE\n");
        return -1;
    }
    if (p->sim && !p->models.n && !p->synthetic.n && !p->shapes.n &&
        strlist_add(&p->shapes, "llama2-7b:q4_0", strlen("llama2-7b:q4_0")))
        return -1;
    if (!p->models.n && !p->synthetic.n && !p->shapes.n)
        for (size_t i = 0; i < sizeof synth / sizeof synth[0]; i++)
            if (strlist_add(&p->synthetic, synth[i], strlen(synth[i])))
                return -1;
    if (!p->prompts.n) intlist_push(&p->prompts, 64);
    if (!p->gens.n) intlist_push(&p->gens, 32);
    if (!p->seqs.n) intlist_push(&p->seqs, 1);
    if (!p->depths.n) intlist_push(&p->depths, 0);
    if (!p->threads.n) intlist_push(&p->threads, 0);
    if (!p->batches.n) intlist_push(&p->batches, 512);
    if (!p->partitions.n && strlist_add(&p->partitions, "", 0))
        return -1;
    for (int i = 0; i < p->partitions.n; i++)
        if (strcmp(p->partitions.item[i], "affinity") && strcmp(p->partitions.item[i], "layers") &&
            strcmp(p->partitions.item[i], "auto") && strcmp(p->partitions.item[i], "colocated") &&
            *p->partitions.item[i]) {
            fprintf(stderr, "hetero-bench: --partition '%s': expected affinity, layers, auto or colocated\n",
                    p->partitions.item[i]);
            return -1;
        }
    /* A described machine is there to be used whole. */
    if (!p->devices.n && strlist_add(&p->devices, p->sim ? "all" : "cpu", 3))
        return -1;
    if (!p->scheds.n && strlist_add(&p->scheds, "", 0))
        return -1;
    /* HX_INJECT supplies the default, shown in the rows like --inject. */
    const char *env = getenv("HX_INJECT");
    if (!p->injects.n && strlist_add(&p->injects, env ? env : "", env ? strlen(env) : 0))
        return -1;
    for (int i = 0; i < p->injects.n; i++)
        if (!strcmp(p->injects.item[i], "none"))
            p->injects.item[i][0] = 0;
    int any = 0;
    for (int i = 0; i < p->prompts.n; i++)
        any |= p->prompts.v[i] > 0;
    for (int i = 0; i < p->gens.n; i++)
        any |= p->gens.v[i] > 0;
    if (!any && !p->timeline) {
        fprintf(stderr, "hetero-bench: -p and -n are all 0: nothing to measure\n");
        return -1;
    }
    if (p->timeline && !p->plot) {
        fprintf(stderr, "hetero-bench: --timeline draws into the --plot directory: give --plot DIR\n");
        return -1;
    }
    return 0;
}

/* An option taking one number, not a list. */
static int one_int(const char *o, const char *v, long lo, long hi, int *out)
{
    return cli_int("hetero-bench", o, v, (int)lo, (int)hi, out);
}

int hxb_args_parse(int argc, char **argv, hxb_params *p)
{
    memset(p, 0, sizeof *p);
    p->reps = 3;
    p->prefix_len = 1024;
    p->suffix_len = 32;
    p->warmup = 1;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help"))
            return 1;
        if (!strcmp(o, "--no-warmup")) {
            p->warmup = 0;
            continue;
        }
        if (!strcmp(o, "--tensor-parallel") || !strcmp(o, "--tp")) {
            p->dist.o.tensor_parallel = 1;
            continue;
        }
        if (!strcmp(o, "--progress")) {
            p->progress = 1;
            continue;
        }
        if (!strcmp(o, "-q") || !strcmp(o, "--quiet")) {
            p->quiet = 1;
            continue;
        }
        static const char *const with_value[] = {
            "-m", "--synthetic", "-p", "-n", "-r", "-t", "-b", "--seqs", "-d", "--devices", "--sched", "--inject",
            "--fpga-emulation", "--kv-type", "-o", "--plot", "--trace", "--timeline", "--sim", "--shapes", "--partition",
            "--prefix-share", "--prefix-len", "--suffix-len", "--split", "--mpi-timeout", NULL};
        int known = 0;
        for (int k = 0; with_value[k]; k++)
            known |= !strcmp(o, with_value[k]);
        if (!known) {
            fprintf(stderr, "hetero-bench: unknown option '%s' (see hetero-bench --help)\n", o);
            return -1;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "hetero-bench: option '%s' needs a value\n", o);
            return -1;
        }
        const char *v = argv[++i];
        int rc = 0;
        if (!strcmp(o, "-m")) rc = strlist_add(&p->models, v, strlen(v));
        else if (!strcmp(o, "--synthetic")) rc = strlist_split(&p->synthetic, o, v, ',');
        else if (!strcmp(o, "--shapes")) rc = strlist_split(&p->shapes, o, v, ',');
        else if (!strcmp(o, "--partition")) rc = strlist_split(&p->partitions, o, v, ',');
        else if (!strcmp(o, "-p")) rc = intlist_parse(&p->prompts, o, v, 0, 65536);
        else if (!strcmp(o, "-n")) rc = intlist_parse(&p->gens, o, v, 0, 65536);
        else if (!strcmp(o, "-t")) rc = intlist_parse(&p->threads, o, v, 0, 1024);
        else if (!strcmp(o, "-b")) rc = intlist_parse(&p->batches, o, v, 1, 65536);
        else if (!strcmp(o, "--seqs")) rc = intlist_parse(&p->seqs, o, v, 1, 256);
        else if (!strcmp(o, "-d")) rc = intlist_parse(&p->depths, o, v, 0, 65536);
        else if (!strcmp(o, "--devices")) rc = strlist_split(&p->devices, o, v, ';');
        else if (!strcmp(o, "--sched")) rc = strlist_split(&p->scheds, o, v, ',');
        else if (!strcmp(o, "--inject")) rc = strlist_split(&p->injects, o, v, ';');
        else if (!strcmp(o, "-o")) rc = parse_format(v, &p->format);
        else if (!strcmp(o, "--kv-type")) p->kv_type = v;
        else if (!strcmp(o, "--split")) p->dist.o.split = v;
        else if (!strcmp(o, "--mpi-timeout")) rc = cli_double("hetero-bench", o, v, 0.01, 1e7, &p->dist.o.timeout_s);
        else if (!strcmp(o, "--plot")) p->plot = v;
        else if (!strcmp(o, "--trace")) p->trace = v;
        else if (!strcmp(o, "--timeline")) p->timeline = v;
        else if (!strcmp(o, "--sim")) p->sim = v;
        else if (!strcmp(o, "--fpga-emulation")) {
            if (strcmp(v, "pocl")) {
                fprintf(stderr, "hetero-bench: --fpga-emulation '%s': the only emulator is 'pocl'\n", v);
                rc = -1;
            }
            p->fpga_emulation = v;
        } else if (!strcmp(o, "--prefix-share") || !strcmp(o, "--prefix-len") || !strcmp(o, "--suffix-len")) {
            rc = one_int(o, v, !strcmp(o, "--prefix-share") ? 1 : 0, !strcmp(o, "--prefix-share") ? 256 : 65536,
                         !strcmp(o, "--prefix-share") ? &p->prefix_share
                         : !strcmp(o, "--prefix-len") ? &p->prefix_len : &p->suffix_len);
        } else if (!strcmp(o, "-r")) {
            rc = one_int(o, v, 1, 1000, &p->reps);
        }
        if (rc)
            return -1;
    }
    return defaults(p);
}

static void strlist_free(hxb_strlist *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->item[i]);
    l->n = 0;
}

void hxb_args_free(hxb_params *p)
{
    strlist_free(&p->models);
    strlist_free(&p->synthetic);
    strlist_free(&p->shapes);
    strlist_free(&p->partitions);
    strlist_free(&p->devices);
    strlist_free(&p->scheds);
    strlist_free(&p->injects);
}
