/* bench-quant: throughput of the quantized dot products, per type and SIMD
 * level, as a decode GEMV sees them: one activation row against a weight
 * matrix larger than the last-level cache, 1 and 2 threads, in GB/s of
 * weight bytes read.  Next to it, the memory read bandwidth this program
 * measures with a plain streaming read-sum over the same size.  Median of
 * several repetitions.  The last column is the compute ceiling: the same
 * GEMV over 1 MiB of rows that stay in cache, and next to it the prompt
 * kernel's: the GEMM tile (4 weight rows x HX_GEMM_COLS activation rows)
 * over the same rows, in GB/s of weight bytes times activation rows, so
 * that it reads as the hot dot4 column would if the tile gained nothing.
 * The dot4 columns run vec_dot4, which at the SIMD levels is that tile
 * with one column: what a decode step's matmul runs.
 *
 *   bench-quant [--mib N] [--reps R] [--n ELEMS] [--types q4_0,q8_0,...]
 *
 * Uses the library's internal kernel API (kernels_cpu/quant.h): this benchmark
 * is of those kernels, not of the public API. */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels_cpu/quant.h"
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

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- the work one thread does ------------------------------------------ */

typedef struct {
    const hx_quant_ops *ops;
    const uint8_t *w; /* weight rows */
    size_t row_bytes;
    int64_t n, row0, row1;
    const void *act;
    size_t act_bytes; /* row stride of act, for the GEMM tile */
    float *out;
    int use4; /* 2: the GEMM tile over HX_GEMM_COLS activation rows */
    /* memory bandwidth mode */
    const uint8_t *mem;
    size_t mem_bytes;
    double sink;
} job;

static void gemv_rows(job *j)
{
    int64_t r = j->row0;
    if (j->use4 == 2) /* out: HX_GEMM_COLS rows of row1 floats */
        for (; r + 4 <= j->row1; r += 4)
            j->ops->gemm(j->n, HX_GEMM_COLS, j->out + r, (size_t)j->row1, j->w + (size_t)r * j->row_bytes,
                         j->row_bytes, j->act, j->act_bytes);
    if (j->use4)
        for (; r + 4 <= j->row1; r += 4)
            j->ops->vec_dot4(j->n, j->out + r, j->w + (size_t)r * j->row_bytes, j->row_bytes, j->act);
    for (; r < j->row1; r++)
        j->ops->vec_dot(j->n, j->out + r, j->w + (size_t)r * j->row_bytes, j->act);
}

__attribute__((target("avx512f"))) static double read_sum_avx512(const uint8_t *p, size_t bytes)
{
    __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i + 256 <= bytes; i += 256) {
        s0 = _mm512_add_epi64(s0, _mm512_load_si512(p + i));
        s1 = _mm512_add_epi64(s1, _mm512_load_si512(p + i + 64));
        s2 = _mm512_add_epi64(s2, _mm512_load_si512(p + i + 128));
        s3 = _mm512_add_epi64(s3, _mm512_load_si512(p + i + 192));
    }
    return (double)_mm512_reduce_add_epi64(_mm512_add_epi64(_mm512_add_epi64(s0, s1), _mm512_add_epi64(s2, s3)));
}

static double read_sum_sse2(const uint8_t *p, size_t bytes)
{
    __m128i s0 = _mm_setzero_si128(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i + 64 <= bytes; i += 64) {
        s0 = _mm_add_epi64(s0, _mm_load_si128((const __m128i *)(p + i)));
        s1 = _mm_add_epi64(s1, _mm_load_si128((const __m128i *)(p + i + 16)));
        s2 = _mm_add_epi64(s2, _mm_load_si128((const __m128i *)(p + i + 32)));
        s3 = _mm_add_epi64(s3, _mm_load_si128((const __m128i *)(p + i + 48)));
    }
    long long v[2];
    _mm_storeu_si128((__m128i *)v, _mm_add_epi64(_mm_add_epi64(s0, s1), _mm_add_epi64(s2, s3)));
    return (double)(v[0] + v[1]);
}

static void *worker(void *arg)
{
    job *j = arg;
    if (j->mem)
        j->sink = hx_cpu_simd_max() >= HX_SIMD_AVX512 ? read_sum_avx512(j->mem, j->mem_bytes)
                                                      : read_sum_sse2(j->mem, j->mem_bytes);
    else
        gemv_rows(j);
    return NULL;
}

/* Runs the jobs on nt threads (the caller's thread is one) and returns the
 * wall time. */
static double run_jobs(job *jobs, int nt)
{
    pthread_t th[8];
    const double t0 = now();
    for (int i = 1; i < nt; i++)
        if (pthread_create(&th[i], NULL, worker, &jobs[i]) != 0) {
            fprintf(stderr, "bench-quant: pthread_create failed\n");
            exit(1);
        }
    worker(&jobs[0]);
    for (int i = 1; i < nt; i++)
        pthread_join(th[i], NULL);
    return now() - t0;
}

static double mem_bandwidth(const uint8_t *buf, size_t bytes, int nt, int reps)
{
    double t[32];
    job jobs[8];
    memset(jobs, 0, sizeof jobs);
    const size_t part = bytes / (size_t)nt / 256 * 256;
    for (int i = 0; i < nt; i++) {
        jobs[i].mem = buf + (size_t)i * part;
        jobs[i].mem_bytes = part;
    }
    for (int r = 0; r < reps; r++)
        t[r] = run_jobs(jobs, nt);
    return (double)(part * (size_t)nt) / median(t, reps) / 1e9;
}

static double gemv_bandwidth(const hx_quant_ops *ops, const uint8_t *w, size_t row_bytes, int64_t rows, int64_t n,
                             const void *act, size_t act_bytes, float *out, int nt, int use4, int reps)
{
    double t[32];
    job jobs[8];
    memset(jobs, 0, sizeof jobs);
    for (int i = 0; i < nt; i++) {
        jobs[i] = (job){.ops = ops, .w = w, .row_bytes = row_bytes, .n = n, .act = act, .act_bytes = act_bytes,
                        .out = out, .use4 = use4};
        jobs[i].row0 = rows * i / nt / 4 * 4;
        jobs[i].row1 = i == nt - 1 ? rows : rows * (i + 1) / nt / 4 * 4;
    }
    for (int r = 0; r < reps; r++)
        t[r] = run_jobs(jobs, nt);
    return (double)row_bytes * (double)rows / median(t, reps) / 1e9;
}

static float frand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (float)((*s >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

int main(int argc, char **argv)
{
    size_t mib = 256;
    int reps = 5;
    int64_t n = 4096;
    const char *only = NULL;
    int bandwidth_only = 0; /* the roofline's denominator, without the table */
    static const char usage[] =
        "usage: bench-quant [--mib N] [--reps R] [--n ELEMS] [--types q4_0,q8_0,...] [--bandwidth-only]\n";
    for (int i = 1; i < argc; i++) {
        long long x;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return fputs(usage, stdout), 0;
        else if (!strcmp(argv[i], "--mib") && i + 1 < argc) {
            if (cli_long("bench-quant", argv[i], argv[i + 1], 1, 1 << 20, &x))
                return CLI_EXIT_USAGE;
            mib = (size_t)x, i++;
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            if (cli_int("bench-quant", argv[i], argv[i + 1], 1, 31, &reps))
                return CLI_EXIT_USAGE;
            i++;
        } else if (!strcmp(argv[i], "--n") && i + 1 < argc) {
            if (cli_long("bench-quant", argv[i], argv[i + 1], 256, 1LL << 32, &x))
                return CLI_EXIT_USAGE;
            n = x, i++;
        } else if (!strcmp(argv[i], "--types") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--bandwidth-only"))
            bandwidth_only = 1;
        else {
            fputs(usage, stderr);
            return CLI_EXIT_USAGE;
        }
    }
    if (reps < 1 || reps > 31 || n <= 0 || n % 256 || mib < 1) {
        fprintf(stderr, "bench-quant: need 1 <= reps <= 31, n a multiple of 256, mib >= 1\n");
        return 2;
    }
    const size_t bytes = mib << 20;
    uint8_t *buf = aligned_alloc(64, bytes);
    float *x = malloc(sizeof(float) * (size_t)n);
    uint8_t *act = aligned_alloc(64, 4 * (size_t)n + 64), *row = malloc(4 * (size_t)n);
    uint8_t *acts = aligned_alloc(64, HX_GEMM_COLS * (4 * (size_t)n + 64));
    if (!buf || !x || !act || !row || !acts) {
        fprintf(stderr, "bench-quant: out of memory\n");
        return 1;
    }
    memset(buf, 1, bytes);
    uint64_t seed = 42;
    for (int64_t i = 0; i < n; i++)
        x[i] = frand(&seed);

    const hx_simd_level top = hx_cpu_simd_max();
    printf("bench-quant: %zu MiB weights, rows of %lld elements, median of %d; CPU best level %s\n", mib,
           (long long)n, reps, hx_cpu_simd_name(top));
    const double bw1 = mem_bandwidth(buf, bytes, 1, reps), bw2 = mem_bandwidth(buf, bytes, 2, reps);
    printf("memory read bandwidth (%s streaming read-sum, %zu MiB): 1 thread %.1f GB/s, 2 threads %.1f GB/s\n\n",
           top >= HX_SIMD_AVX512 ? "AVX-512" : "SSE2", mib, bw1, bw2);
    if (bandwidth_only) {
        free(acts);
        free(row);
        free(act);
        free(x);
        free(buf);
        return 0;
    }
    printf("(scalar rows: the first 32 MiB of the matrix)\n\n");
    printf("| type | level  | bytes/weight | 1T dot GB/s | 1T dot4 GB/s | 2T dot GB/s | 2T dot4 GB/s | 2T vs mem | 1T hot dot4 | 1T hot gemm |\n");
    printf("|------|--------|-------------:|------------:|-------------:|------------:|-------------:|----------:|------------:|------------:|\n");

    static const hx_type types[] = {HX_TYPE_F32,  HX_TYPE_F16,  HX_TYPE_BF16, HX_TYPE_Q8_0,
                                    HX_TYPE_Q4_0, HX_TYPE_Q4_1, HX_TYPE_Q5_0, HX_TYPE_Q5_1,
                                    HX_TYPE_Q4_K, HX_TYPE_Q5_K, HX_TYPE_Q6_K, HX_TYPE_Q2_K,
                                    HX_TYPE_Q3_K, HX_TYPE_IQ4_NL, HX_TYPE_IQ4_XS};
    float *out = NULL;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const hx_type t = types[ti];
        if (only && !strstr(only, hx_type_name(t)))
            continue;
        const size_t rb = hx_type_row_size(t, (uint64_t)n);
        const int64_t rows = (int64_t)(bytes / rb), scalar_rows = (int64_t)((32u << 20) / rb);
        /* one quantized row of random values, repeated: the memory traffic
         * is what is measured, not the values */
        const hx_quant_ops *ref = hx_quant_ops_get_level(t, HX_SIMD_SCALAR);
        ref->quantize_row(x, row, n);
        for (int64_t r = 0; r < rows; r++)
            memcpy(buf + (size_t)r * rb, row, rb);
        hx_quant_ops_get_level(ref->vec_dot_type, HX_SIMD_SCALAR)->quantize_row(x, act, n);
        /* the tile's activation rows: the same row, one copy per column */
        const size_t arow = (hx_type_row_size(ref->vec_dot_type, (uint64_t)n) + 63) & ~(size_t)63;
        for (int c = 0; c < HX_GEMM_COLS; c++)
            memcpy(acts + (size_t)c * arow, act, hx_type_row_size(ref->vec_dot_type, (uint64_t)n));
        free(out);
        /* room for the GEMM tile's HX_GEMM_COLS output rows over the hot rows too */
        out = malloc(sizeof(float) * ((size_t)rows + HX_GEMM_COLS * ((1u << 20) / rb + 4)));
        if (!out)
            return 1;
        for (hx_simd_level l = HX_SIMD_SCALAR; l <= top; l++) {
            const hx_quant_ops *o = hx_quant_ops_get_level(t, l);
            /* the scalar level is compute-bound far below memory speed: a
             * slice of the matrix and fewer repetitions keep the run short */
            const int r = l == HX_SIMD_SCALAR ? (reps < 3 ? reps : 3) : reps;
            const int64_t nr = l == HX_SIMD_SCALAR && rows > scalar_rows ? scalar_rows : rows;
            const double d1 = gemv_bandwidth(o, buf, rb, nr, n, act, 0, out, 1, 0, r);
            const double d2 = gemv_bandwidth(o, buf, rb, nr, n, act, 0, out, 2, 0, r);
            if (l == HX_SIMD_SCALAR) {
                printf("| %-4s | %-6s | %12.4f | %11.2f | %12s | %11.2f | %12s | %8.0f%% | %11s | %11s |\n",
                       hx_type_name(t), hx_cpu_simd_name(l), (double)rb / (double)n, d1, "-", d2, "-", 100 * d2 / bw2,
                       "-", "-");
                continue;
            }
            const double q1 = gemv_bandwidth(o, buf, rb, rows, n, act, 0, out, 1, 1, r);
            const double q2 = gemv_bandwidth(o, buf, rb, rows, n, act, 0, out, 2, 1, r);
            const double best2 = d2 > q2 ? d2 : q2;
            /* the compute ceiling: the same GEMV over 1 MiB that stays in
             * cache, run many times */
            const int64_t hot = (int64_t)((1u << 20) / rb) / 4 * 4;
            double th[31];
            for (int k = 0; k < 31; k++)
                th[k] = gemv_bandwidth(o, buf, rb, hot, n, act, 0, out, 1, 1, 1);
            const double h1 = median(th, 31);
            for (int k = 0; k < 31; k++)
                th[k] = HX_GEMM_COLS * gemv_bandwidth(o, buf, rb, hot, n, acts, arow, out, 1, 2, 1);
            const double g1 = median(th, 31);
            printf("| %-4s | %-6s | %12.4f | %11.2f | %12.2f | %11.2f | %12.2f | %8.0f%% | %11.2f | %11.2f |\n",
                   hx_type_name(t), hx_cpu_simd_name(l), (double)rb / (double)n, d1, q1, d2, q2, 100 * best2 / bw2, h1,
                   g1);
        }
        fflush(stdout);
    }
    printf("\nmemory read bandwidth again: 1 thread %.1f GB/s, 2 threads %.1f GB/s\n", mem_bandwidth(buf, bytes, 1, reps),
           mem_bandwidth(buf, bytes, 2, reps));
    free(out);
    free(buf);
    free(x);
    free(act);
    free(acts);
    free(row);
    return 0;
}
