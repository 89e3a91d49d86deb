/* bench-repack: the CPU matmul (kernels_cpu/cpu_ops.c) over a weight
 * matrix with and without its repacked copy (kernels_cpu/repack.h), per
 * type and SIMD level, on one thread: a decode step (1 token) over a
 * matrix larger than the last-level cache, in GB/s of weight bytes, and a
 * prompt (128 tokens by default) in tokens/s.  Each row is the fastest
 * and the median of the repetitions, the two layouts timed in turn so
 * that both see the same machine load; the fastest is the figure to
 * compare on a loaded machine.  Where a level has pair kernels for a
 * type (two groups at once, repack.h), its rows come twice: avx512-ymm
 * with the 256-bit kernels and avx512-zmm with the 512-bit pair kernels;
 * avx2-one with one group at a time and avx2-pair with two 256-bit tiles
 * side by side (whether or not the matmul takes the pairs by default).
 *
 *   bench-repack [--types q4_0,q4_1,q5_0,q5_1,q8_0,q4_K,q5_K,q6_K] [--k 4096] [--n 14336] [--tokens 128] [--reps 15]
 *
 * Uses the library's internal kernel API: this benchmark is of those
 * kernels, not of the public API. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels_cpu/cpu_kernels.h"
#include "kernels_cpu/quant.h"
#include "kernels_cpu/repack.h"
#include "ops/ops.h"
#include "tools/cli_num.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    hx_op_matmul args;
    void *buffers[4];
    size_t sizes[4];
    const void *layouts[4];
    void *scratch;
} matmul;

/* One matmul on one share: the activations quantized, then the product;
 * only the product is timed. */
static double run(matmul *m)
{
    hx_cpu_call c = {.ith = 0, .nth = 1, .buffers = m->buffers, .sizes = m->sizes, .args = &m->args,
                     .scratch = m->scratch, .layouts = m->layouts};
    if (hx_cpu_matmul_prepare(&c))
        return -1;
    double t0 = now();
    if (hx_cpu_matmul(&c))
        return -1;
    return now() - t0;
}

static float frand(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return (float)((*s >> 40) * (1.0 / 16777216.0)) - 0.5f;
}

int main(int argc, char **argv)
{
    const char *types = "q4_0,q4_1,q5_0,q5_1,q8_0,q4_K,q5_K,q6_K";
    uint32_t K = 4096, N = 14336, T = 128;
    int reps = 15;
    static const char usage[] =
        "usage: bench-repack [--types q4_0,q4_1,q5_0,q5_1,q8_0,q4_K,q5_K,q6_K] [--k K] [--n N] [--tokens T] [--reps R]\n";
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0, x = 0;
        if (!strcmp(o, "-h") || !strcmp(o, "--help"))
            return fputs(usage, stdout), 0;
        else if (!strcmp(o, "--types") && v)
            types = argv[++i];
        else if (!strcmp(o, "--k") && v)
            bad = cli_int("bench-repack", o, argv[++i], 256, 1 << 20, &x), K = (uint32_t)x;
        else if (!strcmp(o, "--n") && v)
            bad = cli_int("bench-repack", o, argv[++i], 1, 1 << 20, &x), N = (uint32_t)x;
        else if (!strcmp(o, "--tokens") && v)
            bad = cli_int("bench-repack", o, argv[++i], 1, 1 << 16, &x), T = (uint32_t)x;
        else if (!strcmp(o, "--reps") && v)
            bad = cli_int("bench-repack", o, argv[++i], 1, 10000, &reps);
        else {
            fputs(usage, stderr);
            return CLI_EXIT_USAGE;
        }
        if (bad)
            return CLI_EXIT_USAGE;
    }
    if (K % 256 || N % HX_REPACK_ROWS || !T || reps < 1) {
        fprintf(stderr, "bench-repack: K must be a multiple of 256, N of %d, T and reps positive\n", HX_REPACK_ROWS);
        return 2;
    }
    printf("| type | level | test | rows: best | median | repacked: best | median | speed-up (best) |\n");
    printf("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
    uint64_t seed = 1;
    float *x = malloc(sizeof(float) * T * K), *y = malloc(sizeof(float) * T * N), *row = malloc(sizeof(float) * K);
    for (size_t i = 0; i < (size_t)T * K; i++)
        x[i] = frand(&seed);
    char list[128];
    snprintf(list, sizeof list, "%s", types);
    for (char *name = strtok(list, ","); name; name = strtok(NULL, ",")) {
        hx_type t;
        if (!hx_type_from_name(name, &t) || !hx_repack_supported(t, K, N)) {
            fprintf(stderr, "bench-repack: no repacked layout for '%s'\n", name);
            return 2;
        }
        const size_t wrow = hx_type_row_size(t, K);
        uint8_t *w = malloc(wrow * N);
        for (uint32_t n = 0; n < N; n++) {
            for (uint32_t k = 0; k < K; k++)
                row[k] = frand(&seed);
            hx_quant_ops_get_level(t, HX_SIMD_SCALAR)->quantize_row(row, w + n * wrow, K);
        }
        hx_repacked *r;
        if (hx_repack_make(t, K, N, w, &r)) {
            fprintf(stderr, "bench-repack: %s\n", hx_last_error());
            return 1;
        }
        for (int l = HX_SIMD_AVX2; l <= (int)hx_cpu_simd_max(); l++)
        for (int zmm = 0; zmm < 2; zmm++) {
            /* where the level has pair kernels for t: the one-group kernels, then the pairs */
            hx_quant_set_level((hx_simd_level)l);
            const int has_pairs = hx_repack_gemm_pair_level(t, (hx_simd_level)l) != NULL;
            if (zmm && !has_pairs)
                continue;
            hx_repack_set_pairs(zmm ? HX_REPACK_PAIRS_ALL : HX_REPACK_PAIRS_OFF);
            char level[32];
            snprintf(level, sizeof level, "%s%s", hx_cpu_simd_name((hx_simd_level)l),
                     !has_pairs ? "" : l == HX_SIMD_AVX512 ? (zmm ? "-zmm" : "-ymm") : (zmm ? "-pair" : "-one"));
            const uint32_t tokens[2] = {1, T};
            for (int ti = 0; ti < 2; ti++) {
                matmul m[2];
                for (int v = 0; v < 2; v++) {
                    m[v] = (matmul){.args = {.wtype = t, .T = tokens[ti], .N = N, .K = K},
                                    .buffers = {w, x, y, NULL},
                                    .sizes = {wrow * N, sizeof(float) * tokens[ti] * K, sizeof(float) * tokens[ti] * N, 0},
                                    .layouts = {v ? r : NULL}};
                    m[v].scratch = aligned_alloc(64, hx_cpu_matmul_scratch(&m[v].args, m[v].sizes, 1) + 64);
                }
                double *tm[2] = {malloc(sizeof(double) * reps), malloc(sizeof(double) * reps)};
                run(&m[0]), run(&m[1]); /* warm-up */
                for (int i = 0; i < reps; i++) /* the order flipped every repetition */
                    for (int k = 0; k < 2; k++) {
                        const int v = (i + k) % 2;
                        tm[v][i] = run(&m[v]);
                    }
                double best[2], med[2];
                for (int v = 0; v < 2; v++) {
                    qsort(tm[v], (size_t)reps, sizeof(double), cmp_double);
                    best[v] = tm[v][0], med[v] = tm[v][reps / 2];
                    free(m[v].scratch);
                }
                /* decode: weight GB/s; prompt: tokens/s */
                const double unit = ti ? (double)tokens[ti] : (double)(wrow * N) / 1e9;
                printf("| %s | %s | %s%u | %.1f | %.1f | %.1f | %.1f | %.2fx |\n", name, level, ti ? "pp" : "tg (GB/s) ", tokens[ti], unit / best[0],
                       unit / med[0], unit / best[1], unit / med[1], best[0] / best[1]);
                free(tm[0]), free(tm[1]);
            }
        }
        hx_repack_set_pairs(HX_REPACK_PAIRS_PAYING);
        hx_repack_free(r);
        free(w);
    }
    free(x), free(y), free(row);
    return 0;
}
