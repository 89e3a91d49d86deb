/* Suite quant_weighted: quantizers with importance weights
 * (hx_quant_ops.quantize_weighted, kernels_cpu/quant_weighted.c).
 *
 *  - without weights each gives quantize_row's bytes (ggml's quantize_*
 *    with no importance matrix is its reference quantizer);
 *  - with random positive weights, the weighted squared error
 *    sum qw (x - dequant(q))^2 over many rows is at most quantize_row's;
 *  - when HX_TEST_LIBGGML names llama.cpp's libggml-base.so, the bytes of
 *    ggml_quantize_chunk with the same importance row, for every type. */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_cpu/quant.h"
#include "tests/hx_test.h"

static const hx_type weighted_types[] = {HX_TYPE_Q4_0, HX_TYPE_Q4_1, HX_TYPE_Q5_0, HX_TYPE_Q5_1,
                                         HX_TYPE_Q4_K, HX_TYPE_Q5_K, HX_TYPE_Q6_K, HX_TYPE_Q2_K,
                                         HX_TYPE_Q3_K, HX_TYPE_IQ4_NL, HX_TYPE_IQ4_XS};
#define N_WEIGHTED (sizeof weighted_types / sizeof weighted_types[0])

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float rng_unit(uint64_t *s) { return (float)((rng_next(s) >> 40) * (1.0 / 16777216.0)); }
static float rng_normal(uint64_t *s, float sigma)
{
    const float u = rng_unit(s) + 1e-7f, v = rng_unit(s);
    return sigma * sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

/* A row like a model's weights: normal, a few outliers, a per-row offset
 * in some rows (the min matters), and weights spanning four decades as an
 * importance matrix's column statistics do. */
static void make_row(float *x, float *qw, int64_t n, int kind, uint64_t *s)
{
    const float off = kind % 3 == 2 ? 0.01f : 0.0f;
    for (int64_t j = 0; j < n; j++) {
        x[j] = rng_normal(s, 0.02f) + off;
        if (kind % 2 && j % 61 == 7)
            x[j] *= 8;
        qw[j] = powf(10.0f, 4.0f * rng_unit(s) - 2.0f);
    }
}

static double weighted_error(const hx_quant_ops *o, const void *q, const float *x, const float *qw, int64_t n,
                             float *tmp)
{
    o->dequantize_row(q, tmp, n);
    double e = 0;
    for (int64_t j = 0; j < n; j++)
        e += (double)qw[j] * ((double)x[j] - tmp[j]) * ((double)x[j] - tmp[j]);
    return e;
}

START_TEST(test_null_weights_are_quantize_row)
{
    const int64_t n = 3 * 256;
    uint64_t s = 0x17;
    float *x = malloc(4 * n), *qw = malloc(4 * n);
    ck_assert(x && qw);
    for (size_t ti = 0; ti < N_WEIGHTED; ti++) {
        const hx_type t = weighted_types[ti];
        const size_t rb = hx_type_row_size(t, (uint64_t)n);
        uint8_t *a = malloc(rb), *b = malloc(rb);
        ck_assert(a && b);
        for (int kind = 0; kind < 6; kind++) {
            make_row(x, qw, n, kind, &s);
            for (hx_simd_level l = HX_SIMD_SCALAR; l <= hx_cpu_simd_max(); l++) {
                const hx_quant_ops *o = hx_quant_ops_get_level(t, l);
                ck_assert_msg(o && o->quantize_weighted, "%s has no quantize_weighted at %s", hx_type_name(t),
                              hx_cpu_simd_name(l));
                o->quantize_row(x, a, n);
                memset(b, 0x5a, rb);
                o->quantize_weighted(x, b, n, NULL);
                ck_assert_msg(!memcmp(a, b, rb), "%s: quantize_weighted without weights is not quantize_row",
                              hx_type_name(t));
            }
        }
        free(a);
        free(b);
    }
    free(x);
    free(qw);
}
END_TEST

START_TEST(test_weights_lower_the_weighted_error)
{
    enum { ROWS = 64 };
    const int64_t n = 2 * 256;
    uint64_t s = 0x1a7;
    float *x = malloc(4 * n), *qw = malloc(4 * n), *tmp = malloc(4 * n);
    ck_assert(x && qw && tmp);
    for (size_t ti = 0; ti < N_WEIGHTED; ti++) {
        const hx_type t = weighted_types[ti];
        const hx_quant_ops *o = hx_quant_ops_get(t);
        const size_t rb = hx_type_row_size(t, (uint64_t)n);
        uint8_t *a = malloc(rb), *b = malloc(rb);
        ck_assert(a && b);
        double plain = 0, weighted = 0;
        int better = 0;
        for (int r = 0; r < ROWS; r++) {
            make_row(x, qw, n, r, &s);
            o->quantize_row(x, a, n);
            o->quantize_weighted(x, b, n, qw);
            const double ep = weighted_error(o, a, x, qw, n, tmp), ew = weighted_error(o, b, x, qw, n, tmp);
            plain += ep;
            weighted += ew;
            better += ew < ep;
        }
        fprintf(stderr, "  %s: weighted squared error with weights %.4g, without %.4g (%.1f %%), %d of %d rows lower\n",
                hx_type_name(t), weighted, plain, 100 * weighted / plain, better, ROWS);
        ck_assert_msg(weighted <= plain, "%s: weighted error %.6g above quantize_row's %.6g", hx_type_name(t),
                      weighted, plain);
        ck_assert_msg(better >= ROWS / 2, "%s: only %d of %d rows improved", hx_type_name(t), better, ROWS);
        free(a);
        free(b);
    }
    free(x);
    free(qw);
    free(tmp);
}
END_TEST

/* ggml_quantize_chunk(type, src, dst, start, nrows, n_per_row, imatrix) */
typedef size_t (*ggml_quantize_chunk_fn)(int, const float *, void *, int64_t, int64_t, int64_t, const float *);

START_TEST(test_ggml_bytes)
{
    const char *lib = getenv("HX_TEST_LIBGGML");
    if (!lib || !*lib) {
        fprintf(stderr, "quant_weighted: HX_TEST_LIBGGML (llama.cpp's libggml-base.so) not set; skipped the "
                        "byte-for-byte check against ggml_quantize_chunk\n");
        return;
    }
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(h, "dlopen %s: %s", lib, dlerror());
    ggml_quantize_chunk_fn chunk = (ggml_quantize_chunk_fn)(uintptr_t)dlsym(h, "ggml_quantize_chunk");
    ck_assert_msg(chunk, "%s has no ggml_quantize_chunk", lib);
    enum { ROWS = 8 };
    const int64_t n = 4 * 256;
    uint64_t s = 0x66;
    float *x = malloc(4 * ROWS * n), *qw = malloc(4 * n), *tmp = malloc(4 * n);
    ck_assert(x && qw && tmp);
    for (int r = 0; r < ROWS; r++)
        make_row(x + r * n, qw, n, r, &s);
    for (int with = 0; with < 2; with++) {
        for (size_t ti = 0; ti < N_WEIGHTED; ti++) {
            const hx_type t = weighted_types[ti]; /* hx_type numbers are ggml_type's */
            const size_t rb = hx_type_row_size(t, (uint64_t)n);
            uint8_t *ours = malloc(ROWS * rb), *theirs = malloc(ROWS * rb);
            ck_assert(ours && theirs);
            const hx_quant_ops *o = hx_quant_ops_get(t);
            for (int r = 0; r < ROWS; r++)
                o->quantize_weighted(x + r * n, ours + r * rb, n, with ? qw : NULL);
            ck_assert_uint_eq(chunk((int)t, x, theirs, 0, ROWS, n, with ? qw : NULL), ROWS * rb);
            size_t diff = 0, first = 0;
            for (size_t i = 0; i < ROWS * rb; i++)
                if (ours[i] != theirs[i] && !diff++)
                    first = i;
            fprintf(stderr, "  %s %s importance: %zu of %zu bytes differ from ggml's\n", hx_type_name(t),
                    with ? "with" : "without", diff, ROWS * rb);
            ck_assert_msg(!diff, "%s (%s weights): %zu bytes differ from ggml_quantize_chunk's, first at %zu",
                          hx_type_name(t), with ? "with" : "no", diff, first);
            free(ours);
            free(theirs);
        }
    }
    dlclose(h);
    free(x);
    free(qw);
    free(tmp);
}
END_TEST

Suite *suite_quant_weighted(void)
{
    Suite *s = suite_create("quant_weighted");
    TCase *tc = tcase_create("quant_weighted");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_null_weights_are_quantize_row);
    tcase_add_test(tc, test_weights_lower_the_weighted_error);
    tcase_add_test(tc, test_ggml_bytes);
    suite_add_tcase(s, tc);
    return s;
}
