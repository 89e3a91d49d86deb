/* Suite attn_values: kernels_cpu/attn_values.h, attention's sums of value
 * rows for several columns at once.  At every SIMD level, for F32, F16,
 * Q8_0 and Q4_0 rows (unaligned, as a cache's rows of one head are), 1 to
 * 9 columns and row lengths with and without partial vectors: each
 * column's result has exactly the bits of a plain loop over that column
 * alone (rows dequantized by the scalar reference, then an fmaf per row,
 * in row order), and nothing past a column's n elements is written. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_cpu/attn_values.h"
#include "kernels_cpu/quant.h"
#include "tests/hx_test.h"

static uint64_t next(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 11;
}

static float uniform(uint64_t *s) { return (float)((double)next(s) / (double)(1ull << 53)) * 2.0f - 1.0f; }

enum { MAXC = 9, MAXR = 19, MAXN = 160, PAD = 5 };

static void check_type(hx_type t, const int64_t *lens, size_t nlens, uint64_t *seed)
{
    const hx_simd_level saved = hx_quant_level();
    HX_ASSERT_OK(hx_quant_set_level(HX_SIMD_SCALAR));
    const hx_quant_ops *q = hx_quant_ops_get(t);
    ck_assert_ptr_nonnull(q);
    ck_assert(hx_attn_values_type_ok(t));
    const size_t acc_stride = MAXN + PAD, w_stride = MAXR + 2;
    float *src = malloc(sizeof(float) * MAXN), *v = malloc(sizeof(float) * MAXR * MAXN);
    float *w = malloc(sizeof(float) * MAXC * w_stride), *start = malloc(sizeof(float) * MAXC * acc_stride);
    float *want = malloc(sizeof(float) * MAXC * acc_stride), *got = malloc(sizeof(float) * MAXC * acc_stride);
    for (size_t li = 0; li < nlens; li++) {
        const int64_t n = lens[li];
        const size_t rb = hx_type_row_size(t, (uint64_t)n), xs = rb + 3; /* rows 3 bytes apart: unaligned */
        uint8_t *x = malloc(xs * MAXR + 1);
        for (int64_t r = 0; r < MAXR; r++) {
            for (int64_t i = 0; i < n; i++)
                src[i] = 2.0f * uniform(seed);
            q->quantize_row(src, x + 1 + (size_t)r * xs, n);
            q->dequantize_row(x + 1 + (size_t)r * xs, v + (size_t)r * n, n);
        }
        for (int64_t cols = 1; cols <= MAXC; cols++)
            for (int64_t rows = 1; rows <= MAXR; rows += 6) {
                HX_ASSERT_OK(hx_quant_set_level(HX_SIMD_SCALAR));
                for (size_t k = 0; k < MAXC * acc_stride; k++)
                    start[k] = 3.0f * uniform(seed);
                for (size_t k = 0; k < MAXC * w_stride; k++)
                    w[k] = uniform(seed) > 0.8f ? 0.0f : (1.0f + uniform(seed)) * 0.5f;
                memcpy(want, start, sizeof(float) * MAXC * acc_stride);
                for (int64_t c = 0; c < cols; c++)
                    for (int64_t i = 0; i < n; i++) {
                        float s = want[(size_t)c * acc_stride + i];
                        for (int64_t r = 0; r < rows; r++)
                            s = fmaf(w[(size_t)c * w_stride + r], v[(size_t)r * n + i], s);
                        want[(size_t)c * acc_stride + i] = s;
                    }
                for (hx_simd_level l = HX_SIMD_SCALAR; l <= hx_cpu_simd_max(); l++) {
                    HX_ASSERT_OK(hx_quant_set_level(l));
                    memcpy(got, start, sizeof(float) * MAXC * acc_stride);
                    hx_attn_values(got, acc_stride, w, w_stride, cols, x + 1, xs, t, rows, n);
                    for (size_t k = 0; k < MAXC * acc_stride; k++)
                        ck_assert_msg(!memcmp(&got[k], &want[k], sizeof(float)),
                                      "%s, type %s, n %lld, %lld columns, %lld rows: column %zu element %zu: %.9g, "
                                      "want %.9g",
                                      hx_cpu_simd_name(l), hx_type_name(t), (long long)n, (long long)cols,
                                      (long long)rows, k / acc_stride, k % acc_stride, got[k], want[k]);
                }
            }
        free(x);
    }
    free(src);
    free(v);
    free(w);
    free(start);
    free(want);
    free(got);
    HX_ASSERT_OK(hx_quant_set_level(saved));
}

START_TEST(columns_get_a_plain_loops_bits_at_every_level)
{
    uint64_t seed = 35;
    const int64_t any[] = {1, 7, 8, 15, 16, 17, 20, 33, 36, 40, 64, 100, 128, 160};
    const int64_t blocks[] = {32, 64, 96, 128, 160};
    check_type(HX_TYPE_F32, any, sizeof any / sizeof *any, &seed);
    check_type(HX_TYPE_F16, any, sizeof any / sizeof *any, &seed);
    check_type(HX_TYPE_Q8_0, blocks, sizeof blocks / sizeof *blocks, &seed);
    check_type(HX_TYPE_Q4_0, blocks, sizeof blocks / sizeof *blocks, &seed);
}
END_TEST

START_TEST(other_types_are_refused)
{
    ck_assert(!hx_attn_values_type_ok(HX_TYPE_Q4_1));
    ck_assert(!hx_attn_values_type_ok(HX_TYPE_BF16));
    ck_assert(!hx_attn_values_type_ok(HX_TYPE_Q4_K));
}
END_TEST

Suite *suite_attn_values(void)
{
    Suite *s = suite_create("attn_values");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, columns_get_a_plain_loops_bits_at_every_level);
    tcase_add_test(tc, other_types_are_refused);
    suite_add_tcase(s, tc);
    return s;
}
