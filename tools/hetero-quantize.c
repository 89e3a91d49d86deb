/* hetero-quantize [options] IN.gguf OUT.gguf RECIPE: llama-quantize's
 * convention, plus mixed precision by budget (--target-bpw, --target-size). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hetero.h"
#include "tools/cli_num.h"
#include "tools/cli_progress.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: hetero-quantize [options] IN.gguf OUT.gguf RECIPE\n"
            "       hetero-quantize [options] (--target-bpw BPW | --target-size SIZE) IN.gguf OUT.gguf\n"
            "  RECIPE: Q2_K, Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K, Q8_0, Q4_0, Q4_1,\n"
            "          Q5_0, Q5_1, IQ4_NL, IQ4_XS, F16, BF16, F32 (Q3_K, Q4_K, Q5_K: the _M recipes), with\n"
            "          llama-quantize's per-tensor rules\n"
            "  --allow-requantize           quantize matrices that are quantized already\n"
            "  --leave-output-tensor        output.weight keeps its type\n"
            "  --pure                       every matrix in the recipe's type (fallbacks aside)\n"
            "  --output-tensor-type TYPE    output.weight's type\n"
            "  --token-embedding-type TYPE  token_embd.weight's type\n"
            "  --tensor-type PATTERN=TYPE   matrices whose name matches PATTERN (a POSIX extended\n"
            "                               regular expression, repeatable, the first match wins)\n"
            "  --imatrix FILE               importance weights (llama-imatrix's file)\n"
            "  --target-bpw BPW             mixed precision: the types that minimise the weighted\n"
            "                               squared error within BPW bits per weight (all tensors)\n"
            "  --target-size SIZE           the same within SIZE bytes (suffixes K, M, G, KiB, MiB, GiB)\n"
            "  --budget-types LIST          budget mode: the types it may choose (comma-separated)\n"
            "  --dry-run                    choose and print the types, write nothing\n"
            "  -q, --quiet                  no progress line (there is one only on a terminal)\n");
}

typedef struct {
    int budget;
    cli_progress progress;
} printer;

static void progress(void *user, const char *step, size_t done, size_t total, const char *tensor)
{
    printer *p = user;
    cli_progress_update(&p->progress, step, done, total, tensor);
}

static void report(void *user, const char *tensor, const char *from, const char *to, uint64_t a, uint64_t b)
{
    (void)user;
    printf("%-40s %6s -> %-6s %10.3f MiB -> %10.3f MiB\n", tensor, from, to, a / 1048576.0, b / 1048576.0);
}

static void choice(void *user, const char *tensor, const char *type, uint64_t bytes, double error)
{
    printer *p = user;
    if (!p->budget++)
        printf("%-40s %-6s %12s %14s\n", "tensor", "type", "bytes", "error");
    printf("%-40s %-6s %12llu %14.6g\n", tensor, type, (unsigned long long)bytes, error);
}

/* "123", "60MiB", "1.5G", "800K": bytes (K, M, G as 1000s, KiB ... 1024s). */
static int parse_size(const char *s, uint64_t *out)
{
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || end == s || v <= 0)
        return 0;
    static const struct {
        const char *suffix;
        double scale;
    } units[] = {{"", 1},        {"B", 1},          {"K", 1e3},        {"KB", 1e3},        {"M", 1e6},
                 {"MB", 1e6},    {"G", 1e9},        {"GB", 1e9},       {"KiB", 1024.0},    {"MiB", 1048576.0},
                 {"GiB", 1073741824.0}};
    for (size_t i = 0; i < sizeof units / sizeof *units; i++)
        if (strcasecmp(end, units[i].suffix) == 0) {
            *out = (uint64_t)(v * units[i].scale);
            return *out > 0;
        }
    return 0;
}

static int need(int argc, char **argv, int i)
{
    if (i + 1 >= argc) {
        fprintf(stderr, "hetero-quantize: %s needs a value\n", argv[i]);
        return 0;
    }
    return 1;
}

int main(int argc, char **argv)
{
    hx_quantize_options o = hx_quantize_options_default();
    const char **tt = calloc((size_t)argc, sizeof *tt);
    printer pr = {0};
    hx_quantize_totals totals;
    o.report = report;
    o.choice = choice;
    o.user = &pr;
    o.totals = &totals;
    o.tensor_types = tt;
    o.progress = progress;
    int i = 1, quiet = 0;
    for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--allow-requantize")) {
            o.allow_requantize = 1;
        } else if (!strcmp(a, "--leave-output-tensor")) {
            o.leave_output_tensor = 1;
        } else if (!strcmp(a, "--pure")) {
            o.pure = 1;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (!strcmp(a, "--dry-run")) {
            o.dry_run = 1;
        } else if (!strcmp(a, "--output-tensor-type") && need(argc, argv, i)) {
            o.output_tensor_type = argv[++i];
        } else if (!strcmp(a, "--token-embedding-type") && need(argc, argv, i)) {
            o.token_embedding_type = argv[++i];
        } else if (!strcmp(a, "--tensor-type") && need(argc, argv, i)) {
            tt[o.n_tensor_types++] = argv[++i];
        } else if (!strcmp(a, "--imatrix") && need(argc, argv, i)) {
            o.imatrix = argv[++i];
        } else if (!strcmp(a, "--budget-types") && need(argc, argv, i)) {
            o.budget_types = argv[++i];
        } else if (!strcmp(a, "--target-bpw") && need(argc, argv, i)) {
            if (cli_double("hetero-quantize", a, argv[++i], 0.5, 64, &o.target_bpw)) {
                free(tt);
                return CLI_EXIT_USAGE;
            }
        } else if (!strcmp(a, "--target-size") && need(argc, argv, i)) {
            if (!parse_size(argv[++i], &o.target_bytes)) {
                fprintf(stderr, "hetero-quantize: --target-size takes a size above 0 bytes such as 123, 60MiB or "
                                "1.5G, not '%s'\n", argv[i]);
                free(tt);
                return CLI_EXIT_USAGE;
            }
        } else {
            if (!strstr(" --output-tensor-type --token-embedding-type --tensor-type --imatrix --target-bpw "
                        "--target-size --budget-types ", a) || i + 1 < argc)
                fprintf(stderr, "hetero-quantize: unknown option '%s'\n", a);
            usage(stderr);
            free(tt);
            return 2;
        }
    }
    cli_progress_init(&pr.progress, "hetero-quantize", quiet);
    int budget = o.target_bpw > 0 || o.target_bytes > 0;
    if (argc - i != (budget ? 2 : 3)) {
        usage(stderr);
        free(tt);
        return 2;
    }
    if (budget)
        o.report = NULL; /* the table of choices says it all */
    const char *in = argv[i], *out = argv[i + 1];
    o.recipe = budget ? NULL : argv[i + 2];
    if (hx_model_quantize_ex(in, out, &o) != HX_OK) {
        fprintf(stderr, "hetero-quantize: %s\n", hx_last_error());
        free(tt);
        return 1;
    }
    double e = totals.elements ? 8.0 / (double)totals.elements : 0;
    printf("model size: %.2f MiB (%.2f BPW) -> %.2f MiB (%.2f BPW), %s, file type %u\n", totals.in_bytes / 1048576.0,
           totals.in_bytes * e, totals.out_bytes / 1048576.0, totals.out_bytes * e,
           budget ? "mixed by budget" : o.recipe, totals.file_type);
    if (totals.fallbacks)
        printf("%d matrices took a fallback type (rows not whole blocks of the recipe's type)\n", totals.fallbacks);
    if (o.dry_run)
        printf("dry run: nothing written\n");
    free(tt);
    return 0;
}
