/* Suite repack: weight matrices repacked for the CPU (kernels_cpu/repack.h).
 *
 * What is checked, and against what:
 *  - kernels (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K): every SIMD level's repacked gemm, 1..4 activation rows, on
 *    random rows quantized from random floats, equals bit for bit a plain
 *    loop over the original rows (per block the exact integer dot, then
 *    acc = fmaf(isum, d_w * d_a, acc), repack.h's arithmetic, Q4_1's
 *    and Q5_1's min, the K-quants' as it states), and lies
 *    within the quant suite's float bound of the row kernels' vec_dot;
 *    the 512-bit pair kernels (two groups at once) likewise on every two
 *    adjacent groups;
 *  - the CPU's matmul over a weight with a repacked copy: equal to the
 *    plain loop bit for bit, bias included, any token count and share
 *    count, a token's outputs the same alone as in a batch of five;
 *  - shapes and types without a layout are refused with an error naming
 *    them;
 *  - whole models (synthetic, every type above): the copies are made when
 *    asked and only then, the evaluation reads them (a zeroed copy changes
 *    the logits), and the logits with and without them agree within
 *    REPACK_LOGITS_TOL with the same argmax.  Not bit for bit in general:
 *    the row kernels sum in another order (half blocks at AVX2); on these
 *    models the difference mostly vanishes in the next matmul's 8-bit
 *    activations (rel L2 0 to 5e-3 measured). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_cpu/cpu_kernels.h"
#include "kernels_cpu/matmul_rows.h"
#include "kernels_cpu/quant.h"
#include "kernels_cpu/repack.h"
#include "model/model.h"
#include "quantize/synthetic.h"
#include "ops/ops.h"
#include "runtime/buffer.h"
#include "tests/hx_test.h"

/* As the quant suite's DOT_TOL: float32 summation of a few thousand block
 * terms against sum |w_i a_i|. */
#define DOT_TOL 1e-5
/* Logits with and without repacked weights, relative L2: the float
 * summation order differs in every matmul, which moves activations across
 * quantization steps; the levels without repacking differ as much from
 * each other on these models (about 1e-3 measured). */
#define REPACK_LOGITS_TOL 2e-2

static const hx_type repack_types[] = {HX_TYPE_Q4_0, HX_TYPE_Q4_1, HX_TYPE_Q5_0, HX_TYPE_Q5_1, HX_TYPE_Q8_0, HX_TYPE_Q4_K, HX_TYPE_Q5_K, HX_TYPE_Q6_K};

/* The K-quants: rows of whole super-blocks of 256. */
static int is_k_quant(hx_type t) { return t == HX_TYPE_Q4_K || t == HX_TYPE_Q5_K || t == HX_TYPE_Q6_K; }

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static float rng_normal(uint64_t *s)
{
    float u = 0;
    for (int i = 0; i < 4; i++)
        u += (float)((rng_next(s) >> 40) * (1.0 / 16777216.0));
    return (u - 2.0f) * 1.7320508f;
}

/* N rows of K elements of t from random floats (scales vary by row). */
static uint8_t *random_rows(hx_type t, uint64_t K, uint64_t N, uint64_t *seed)
{
    const size_t row = hx_type_row_size(t, K);
    uint8_t *w = malloc(row * N);
    float *x = malloc(K * sizeof *x);
    for (uint64_t n = 0; n < N; n++) {
        const float scale = 0.1f + (float)(n % 7);
        for (uint64_t k = 0; k < K; k++)
            x[k] = scale * rng_normal(seed);
        hx_quant_ops_get_level(t, HX_SIMD_SCALAR)->quantize_row(x, w + n * row, (int64_t)K);
    }
    free(x);
    return w;
}

/* Quant j of a Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/Q8_1 block, Q4_0's and Q5_0's
 * zero points removed (quant.h's layouts). */
static int quant_at(hx_type t, const uint8_t *blk, int j)
{
    if (t == HX_TYPE_Q5_0 || t == HX_TYPE_Q5_1) {
        const int q1 = t == HX_TYPE_Q5_1;
        const uint8_t b = blk[(q1 ? offsetof(hx_block_q5_1, qs) : offsetof(hx_block_q5_0, qs)) + j % 16];
        uint32_t qh;
        memcpy(&qh, blk + (q1 ? offsetof(hx_block_q5_1, qh) : offsetof(hx_block_q5_0, qh)), 4);
        return ((j < 16 ? b & 15 : b >> 4) | (int)((qh >> j) & 1) << 4) - (q1 ? 0 : 16);
    }
    if (t == HX_TYPE_Q8_0)
        return ((const int8_t *)(blk + offsetof(hx_block_q8_0, qs)))[j];
    if (t == HX_TYPE_Q8_1)
        return ((const int8_t *)(blk + offsetof(hx_block_q8_1, qs)))[j];
    if (t == HX_TYPE_Q4_1) {
        const uint8_t b = blk[offsetof(hx_block_q4_1, qs) + j % 16];
        return j < 16 ? b & 15 : b >> 4;
    }
    const uint8_t b = blk[offsetof(hx_block_q4_0, qs) + j % 16];
    return (j < 16 ? b & 15 : b >> 4) - 8;
}

static float f16_at(const uint8_t *p)
{
    hx_half h;
    memcpy(&h, p, sizeof h);
    return hx_fp16_to_fp32(h);
}

/* Q4_K (or Q5_K, q5) against Q8_K: per super-block, S = sum_j sc_j *
 * (sub-block j's integer dot) and M = sum_j m_j * (sub-block j's
 * activation sum), from the file's packed scales and the activation
 * quants (not their bsums); Q5_K's fifth bit of element 32j + e is bit j
 * of qh[e]. */
static float plain_dot_k4(uint64_t K, const uint8_t *w, const uint8_t *a, int q5)
{
    const size_t wb = q5 ? sizeof(hx_block_q5_K) : sizeof(hx_block_q4_K);
    const size_t D = q5 ? offsetof(hx_block_q5_K, d) : offsetof(hx_block_q4_K, d);
    const size_t DMIN = q5 ? offsetof(hx_block_q5_K, dmin) : offsetof(hx_block_q4_K, dmin);
    const size_t SCALES = q5 ? offsetof(hx_block_q5_K, scales) : offsetof(hx_block_q4_K, scales);
    const size_t QS = q5 ? offsetof(hx_block_q5_K, qs) : offsetof(hx_block_q4_K, qs);
    float acc = 0;
    for (uint64_t i = 0; i < K / 256; i++, w += wb, a += sizeof(hx_block_q8_K)) {
        const int8_t *aq = (const int8_t *)(a + offsetof(hx_block_q8_K, qs));
        const uint8_t *q = w + QS, *qh = w + offsetof(hx_block_q5_K, qh);
        int32_t S = 0, M = 0;
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            hx_quant_k4_scale_min(w + SCALES, j, &sc, &m);
            int32_t isum = 0, asum = 0;
            for (int e = 0; e < 32; e++) {
                const uint8_t b = q[(j / 2) * 32 + e];
                const int fifth = q5 ? ((qh[e] >> j) & 1) << 4 : 0;
                isum += ((j % 2 ? b >> 4 : b & 15) | fifth) * aq[32 * j + e];
                asum += aq[32 * j + e];
            }
            S += sc * isum;
            M += m * asum;
        }
        float dy;
        memcpy(&dy, a + offsetof(hx_block_q8_K, d), sizeof dy);
        acc = fmaf((float)S, f16_at(w + D) * dy, acc);
        acc = fmaf(-(float)M, f16_at(w + DMIN) * dy, acc);
    }
    return acc;
}

/* Q6_K against Q8_K: per super-block S = sum_j sc_j * (sub-block j's
 * integer dot of q - 32 with the activations), from the file's fields as
 * quant.h documents them. */
static float plain_dot_q6_K(uint64_t K, const uint8_t *w, const uint8_t *a)
{
    float acc = 0;
    for (uint64_t i = 0; i < K / 256; i++, w += sizeof(hx_block_q6_K), a += sizeof(hx_block_q8_K)) {
        const int8_t *aq = (const int8_t *)(a + offsetof(hx_block_q8_K, qs));
        const uint8_t *ql = w + offsetof(hx_block_q6_K, ql), *qh = w + offsetof(hx_block_q6_K, qh);
        const int8_t *sc = (const int8_t *)(w + offsetof(hx_block_q6_K, scales));
        int32_t S = 0;
        for (int j = 0; j < 16; j++) {
            int32_t isum = 0;
            for (int e = 16 * j; e < 16 * j + 16; e++) {
                const int h = e / 128, k = (e % 128) / 32, l = e % 32;
                const uint8_t b = ql[64 * h + l + 32 * (k & 1)];
                const int q = ((k < 2 ? b & 15 : b >> 4) | ((qh[32 * h + l] >> (2 * k)) & 3) << 4) - 32;
                isum += q * aq[e];
            }
            S += sc[j] * isum;
        }
        float dy;
        memcpy(&dy, a + offsetof(hx_block_q8_K, d), sizeof dy);
        acc = fmaf((float)S, f16_at(w + offsetof(hx_block_q6_K, d)) * dy, acc);
    }
    return acc;
}

/* repack.h's arithmetic over the original rows. */
static float plain_dot(hx_type t, uint64_t K, const uint8_t *w, const uint8_t *a)
{
    if (t == HX_TYPE_Q4_K || t == HX_TYPE_Q5_K)
        return plain_dot_k4(K, w, a, t == HX_TYPE_Q5_K);
    if (t == HX_TYPE_Q6_K)
        return plain_dot_q6_K(K, w, a);
    const int mins = t == HX_TYPE_Q4_1 || t == HX_TYPE_Q5_1;
    const hx_type at = mins ? HX_TYPE_Q8_1 : HX_TYPE_Q8_0;
    const size_t wb = hx_type_get(t)->type_size, ab = hx_type_get(at)->type_size;
    float acc = 0;
    for (uint64_t i = 0; i < K / 32; i++) {
        int32_t isum = 0;
        for (int j = 0; j < 32; j++)
            isum += quant_at(t, w + i * wb, j) * quant_at(at, a + i * ab, j);
        acc = fmaf((float)isum, f16_at(w + i * wb) * f16_at(a + i * ab), acc);
        if (mins) /* the min times the activations' d * sum (m at the same offset in both) */
            acc = fmaf(f16_at(w + i * wb + offsetof(hx_block_q4_1, m)), f16_at(a + i * ab + offsetof(hx_block_q8_1, s)),
                       acc);
    }
    return acc;
}

/* sum |w_i a_i| of the dequantized rows, the float bound's scale. */
static double abs_dot(hx_type t, uint64_t K, const uint8_t *w, const uint8_t *a)
{
    const hx_type at = hx_quant_ops_get_level(t, HX_SIMD_SCALAR)->vec_dot_type;
    float *wf = malloc(K * sizeof *wf), *af = malloc(K * sizeof *af);
    hx_quant_ops_get_level(t, HX_SIMD_SCALAR)->dequantize_row(w, wf, (int64_t)K);
    hx_quant_ops_get_level(at, HX_SIMD_SCALAR)->dequantize_row(a, af, (int64_t)K);
    double s = 0;
    for (uint64_t k = 0; k < K; k++)
        s += fabs((double)wf[k] * af[k]);
    free(wf), free(af);
    return s;
}

/* C activation rows of t's vec_dot_type. */
static uint8_t *random_acts(hx_type t, uint64_t K, int C, uint64_t *seed)
{
    const hx_quant_ops *aq = hx_quant_ops_get_level(hx_quant_ops_get_level(t, HX_SIMD_SCALAR)->vec_dot_type,
                                                    HX_SIMD_SCALAR);
    const size_t row = hx_type_row_size(aq->type, K);
    uint8_t *a = malloc(row * (size_t)C);
    float *x = malloc(K * sizeof *x);
    for (int c = 0; c < C; c++) {
        for (uint64_t k = 0; k < K; k++)
            x[k] = rng_normal(seed) * (c + 1);
        aq->quantize_row(x, a + c * row, (int64_t)K);
    }
    free(x);
    return a;
}

START_TEST(kernels_equal_plain_loop)
{
    static const uint64_t Ks[] = {32, 96, 256, 2048};
    const int nK = sizeof Ks / sizeof *Ks;
    uint64_t seed = 0x5eed1234u;
    for (size_t ti = 0; ti < sizeof repack_types / sizeof *repack_types; ti++)
        for (int ki = 0; ki < nK; ki++) {
            const hx_type t = repack_types[ti];
            const uint64_t K = is_k_quant(t) ? Ks[ki] * 8 : Ks[ki], N = 24; /* K-quants: whole super-blocks */
            const hx_type at = hx_quant_ops_get_level(t, HX_SIMD_SCALAR)->vec_dot_type;
            const size_t wrow = hx_type_row_size(t, K), arow = hx_type_row_size(at, K);
            uint8_t *w = random_rows(t, K, N, &seed), *a = random_acts(t, K, HX_GEMM_COLS, &seed);
            hx_repacked *r;
            HX_ASSERT_OK(hx_repack_make(t, K, N, w, &r));
            ck_assert_uint_eq(r->bytes, r->group_bytes * (N / HX_REPACK_ROWS));
            for (int l = 0; l < HX_SIMD_COUNT; l++) {
                hx_repack_gemm_fn gemm = hx_repack_gemm_level(t, (hx_simd_level)l);
                if (!gemm) {
                    ck_assert_int_gt(l, (int)hx_cpu_simd_max()); /* only a level the CPU lacks has none */
                    continue;
                }
                /* the one-group kernel on every group, then the level's pair kernel (if any) on every
                 * two adjacent groups: each output the plain loop's bits */
                hx_repack_gemm_fn pair = hx_repack_gemm_pair_level(t, (hx_simd_level)l);
                for (int two = 0; two <= (pair != NULL); two++)
                    for (int C = 1; C <= HX_GEMM_COLS; C++)
                        for (uint64_t g = 0; g + two < N / HX_REPACK_ROWS; g++) {
                            const int rows = (two + 1) * HX_REPACK_ROWS;
                            float s[HX_GEMM_COLS * 2 * HX_REPACK_ROWS];
                            (two ? pair : gemm)((int64_t)K, C, s, (size_t)rows, r->data + g * r->group_bytes, a, arow);
                            for (int c = 0; c < C; c++)
                                for (int i = 0; i < rows; i++) {
                                    const uint8_t *wr = w + (g * HX_REPACK_ROWS + i) * wrow, *ar = a + c * arow;
                                    const float want = plain_dot(t, K, wr, ar), got = s[c * rows + i];
                                    ck_assert_msg(memcmp(&got, &want, sizeof got) == 0,
                                                  "%s K %llu level %s%s C %d row %llu col %d: %.9g, plain loop %.9g",
                                                  hx_type_name(t), (unsigned long long)K,
                                                  hx_cpu_simd_name((hx_simd_level)l), two ? " (pair)" : "", C,
                                                  (unsigned long long)(g * HX_REPACK_ROWS + i), c, got, want);
                                    float dot;
                                    hx_quant_ops_get_level(t, HX_SIMD_SCALAR)->vec_dot((int64_t)K, &dot, wr, ar);
                                    ck_assert_double_le(fabs((double)got - dot), DOT_TOL * abs_dot(t, K, wr, ar) + 1e-30);
                                }
                        }
            }
            hx_repack_free(r);
            free(w);
            free(a);
        }
}
END_TEST

START_TEST(refuses_what_it_cannot_lay_out)
{
    uint8_t rows[2048] = {0};
    hx_repacked *r = (hx_repacked *)rows;
    ck_assert(!hx_repack_supported(HX_TYPE_Q4_0, 64, 0));  /* no rows */
    ck_assert(!hx_repack_supported(HX_TYPE_Q8_0, 48, 8));  /* not whole blocks */
    ck_assert(!hx_repack_supported(HX_TYPE_F16, 64, 8));   /* no layout for the type */
    ck_assert(hx_repack_supported(HX_TYPE_Q4_0, 64, 8));
    ck_assert(hx_repack_supported(HX_TYPE_Q4_0, 64, 12));  /* a padded last group */
    ck_assert_int_eq(hx_repack_make(HX_TYPE_Q8_0, 48, 8, rows, &r), HX_ERR_UNSUPPORTED);
    ck_assert_ptr_null(r);
    ck_assert_msg(strstr(hx_last_error(), "q8_0") && strstr(hx_last_error(), "48"), "%s", hx_last_error());
    ck_assert_int_eq(hx_repack_make(HX_TYPE_F16, 64, 8, rows, &r), HX_ERR_UNSUPPORTED);
    ck_assert_ptr_null(hx_repack_gemm_level(HX_TYPE_F16, HX_SIMD_SCALAR));
    hx_repack_free(NULL);
}
END_TEST

/* The CPU matmul's shares, in order, as the CPU device runs them. */
static void run_matmul(const hx_op_matmul *a, const uint8_t *w, size_t wbytes, const hx_repacked *r,
                       const float *x, float *y, const float *bias, int nth)
{
    void *buffers[4] = {(void *)w, (void *)x, y, (void *)bias};
    size_t sizes[4] = {wbytes, a->T * a->K * sizeof(float), a->T * a->N * sizeof(float), a->N * sizeof(float)};
    const void *layouts[4] = {r, NULL, NULL, NULL};
    void *scratch = aligned_alloc(64, hx_cpu_matmul_scratch(a, sizes, nth) + 64);
    for (int phase = 0; phase < 2; phase++)
        for (int i = 0; i < nth; i++) {
            hx_cpu_call c = {.ith = i, .nth = nth, .buffers = buffers, .sizes = sizes, .args = a,
                             .scratch = scratch, .layouts = layouts};
            ck_assert_int_eq(phase ? hx_cpu_matmul(&c) : hx_cpu_matmul_prepare(&c), 0);
        }
    free(scratch);
}

/* An input buffer shorter than T rows of K floats is refused before any
 * row is read: by the quantizing phase, and by the matmul itself where
 * it reads the input where it lies (F16, whose dot partner is F32). */
START_TEST(a_short_input_is_refused)
{
    uint64_t seed = 5;
    const uint32_t K = 64, N = 8, T = 3;
    const hx_type types[] = {HX_TYPE_F16, HX_TYPE_Q8_0};
    for (size_t ti = 0; ti < 2; ti++) {
        const hx_op_matmul a = {.wtype = types[ti], .T = T, .N = N, .K = K};
        uint8_t *w = random_rows(types[ti], K, N, &seed);
        float *x = malloc(sizeof(float) * T * K), *y = malloc(sizeof(float) * T * N);
        void *buffers[4] = {w, x, y, NULL};
        size_t sizes[4] = {hx_type_row_size(types[ti], K) * N, sizeof(float) * (T * K - 1), sizeof(float) * T * N, 0};
        void *scratch = aligned_alloc(64, hx_cpu_matmul_scratch(&a, sizes, 1) + 64);
        hx_cpu_call c = {.ith = 0, .nth = 1, .buffers = buffers, .sizes = sizes, .args = &a, .scratch = scratch};
        ck_assert_int_eq(hx_cpu_matmul_prepare(&c), HX_ERR_RANGE);
        if (types[ti] == HX_TYPE_F16)
            ck_assert_int_eq(hx_cpu_matmul(&c), HX_ERR_RANGE);
        free(w), free(x), free(y), free(scratch);
    }
}
END_TEST

START_TEST(matmul_reads_the_copy)
{
    uint64_t seed = 77;
    const uint32_t K = 512, T = 5;
    /* whole groups, a padded last group, and only a padded group */
    const uint32_t rows[] = {40, 43, 5};
    for (size_t ni = 0; ni < sizeof rows / sizeof *rows; ni++)
    for (size_t ti = 0; ti < sizeof repack_types / sizeof *repack_types; ti++) {
        const uint32_t N = rows[ni];
        const hx_type t = repack_types[ti];
        const hx_type at = hx_quant_ops_get(t)->vec_dot_type;
        const size_t wrow = hx_type_row_size(t, K), arow = hx_type_row_size(at, K);
        uint8_t *w = random_rows(t, K, N, &seed);
        hx_repacked *r;
        HX_ASSERT_OK(hx_repack_make(t, K, N, w, &r));
        float *x = malloc(sizeof(float) * T * K), *bias = malloc(sizeof(float) * N);
        float *y = malloc(sizeof(float) * T * N), *y1 = malloc(sizeof(float) * N);
        for (uint32_t i = 0; i < T * K; i++)
            x[i] = rng_normal(&seed);
        for (uint32_t i = 0; i < N; i++)
            bias[i] = rng_normal(&seed);
        const hx_op_matmul a = {.wtype = t, .T = T, .N = N, .K = K, .has_bias = 1};
        run_matmul(&a, w, wrow * N, r, x, y, bias, 3);
        uint8_t *xq = malloc(arow);
        for (uint32_t tok = 0; tok < T; tok++) {
            hx_quant_ops_get(at)->quantize_row(x + tok * K, xq, K);
            for (uint32_t n = 0; n < N; n++) {
                const float want = plain_dot(t, K, w + n * wrow, xq) + bias[n];
                ck_assert_msg(memcmp(&y[tok * N + n], &want, sizeof want) == 0,
                              "%s, %u rows, token %u row %u: %.9g, want %.9g", hx_type_name(t), N, tok, n,
                              y[tok * N + n], want);
            }
        }
        /* The last token alone: the same bits as in the batch. */
        const hx_op_matmul one = {.wtype = t, .T = 1, .N = N, .K = K, .has_bias = 1};
        run_matmul(&one, w, wrow * N, r, x + (T - 1) * K, y1, bias, 8);
        ck_assert_int_eq(memcmp(y1, y + (T - 1) * N, sizeof(float) * N), 0);
        hx_repack_free(r);
        free(w), free(x), free(bias), free(y), free(y1), free(xq);
    }
}
END_TEST

/* F16 and BF16 prompts, their rows converted to F32 by each block's
 * first token tile (hx_quant_convert_first, forced on) or read as stored
 * by the 16-bit tile (forced off), at every level, in chunks of the tile's
 * hx_quant_ops.gemm_cols columns: every token's outputs keep the bits of
 * that token alone (its one-column tile reads the rows as stored), across
 * several blocks and a last short tile, either way; and they are the
 * products (against a double sum). */
START_TEST(converted_rows_keep_the_bits)
{
    uint64_t seed = 91;
    const uint32_t K = 1000, N = 70, T = 7; /* 32 converted rows a block: three blocks, a tail of 2 */
    const hx_type types[] = {HX_TYPE_F16, HX_TYPE_BF16};
    const hx_simd_level saved = hx_quant_level();
    int converted = 0;
    for (int level = HX_SIMD_SCALAR; level <= (int)hx_cpu_simd_max(); level++)
        for (size_t ti = 0; ti < 2; ti++)
            for (int mode = HX_CONVERT_NEVER; mode <= HX_CONVERT_ALWAYS; mode++) {
                const hx_type t = types[ti];
                HX_ASSERT_OK(hx_quant_set_level((hx_simd_level)level));
                hx_quant_set_convert((hx_convert_mode)mode);
                const size_t wrow = hx_type_row_size(t, K);
                uint8_t *w = random_rows(t, K, N, &seed);
                float *x = malloc(sizeof(float) * T * K), *bias = malloc(sizeof(float) * N);
                float *y = malloc(sizeof(float) * T * N), *y1 = malloc(sizeof(float) * N);
                float *wf = malloc(sizeof(float) * K);
                for (uint32_t i = 0; i < T * K; i++)
                    x[i] = rng_normal(&seed);
                for (uint32_t i = 0; i < N; i++)
                    bias[i] = rng_normal(&seed);
                const hx_op_matmul a = {.wtype = t, .T = T, .N = N, .K = K, .has_bias = 1};
                const int converts = hx_matmul_convert_bytes(t, K, T) > 0;
                ck_assert_int_eq(converts, mode == HX_CONVERT_ALWAYS && level > HX_SIMD_SCALAR);
                converted += converts;
                run_matmul(&a, w, wrow * N, NULL, x, y, bias, 3);
                const hx_op_matmul one = {.wtype = t, .T = 1, .N = N, .K = K, .has_bias = 1};
                for (uint32_t tok = 0; tok < T; tok++) {
                    run_matmul(&one, w, wrow * N, NULL, x + tok * K, y1, bias, 2);
                    ck_assert_msg(!memcmp(y1, y + tok * N, sizeof(float) * N),
                                  "%s level %d convert %d token %u: not its bits alone", hx_type_name(t), level, mode,
                                  tok);
                    for (uint32_t n = 0; n < N; n++) {
                        hx_quant_ops_get_level(t, HX_SIMD_SCALAR)->dequantize_row(w + n * wrow, wf, K);
                        double want = bias[n], mag = fabs(bias[n]);
                        for (uint32_t k = 0; k < K; k++) {
                            want += (double)wf[k] * x[tok * K + k];
                            mag += fabs((double)wf[k] * x[tok * K + k]);
                        }
                        ck_assert_msg(fabs(y[tok * N + n] - want) <= 1e-5 * mag,
                                      "%s level %d token %u row %u: %.9g, want %.9g", hx_type_name(t), level, tok, n,
                                      y[tok * N + n], want);
                    }
                }
                free(w), free(x), free(bias), free(y), free(y1), free(wf);
            }
    hx_quant_set_convert(HX_CONVERT_PAYING);
    HX_ASSERT_OK(hx_quant_set_level(saved));
    /* F16 and BF16 at each of AVX2 and AVX-512 that the CPU runs */
    const int want = 2 * (int)hx_cpu_simd_max();
    ck_assert_msg(converted == want, "AVX2 and AVX-512 convert F16 and BF16 prompt rows: %d of %d did", converted,
                  want);
}
END_TEST

/* Logits of a few tokens' prompt, every position, with `repack`; with
 * `spoil`, the copy of layer 0's FFN down matrix zeroed first, to show the
 * CPU reads the copies. */
static float *model_logits(hx_runtime *rt, const char *path, int repack, int spoil, uint64_t *repacked,
                           uint32_t *nv)
{
    hx_model_options o = hx_model_options_default();
    o.repack = repack;
    o.n_ctx = 64;
    hx_model *m;
    HX_ASSERT_OK(hx_model_load(rt, path, &o, &m));
    hx_model_info in;
    HX_ASSERT_OK(hx_model_info_get(m, &in));
    *repacked = in.repacked_bytes;
    *nv = in.n_vocab;
    if (spoil) {
        hx_repacked *r = m->layers[0].w[HX_LW_DOWN].buf->cpu_layout;
        ck_assert_ptr_nonnull(r);
        memset(r->data, 0, r->bytes);
    }
    static const int32_t ids[] = {256, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114};
    const size_t n = sizeof ids / sizeof *ids;
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(m, &s));
    HX_ASSERT_OK(hx_session_eval(s, ids, n, 1));
    float *l = malloc(sizeof(float) * n * in.n_vocab);
    for (size_t p = 0; p < n; p++)
        memcpy(l + p * in.n_vocab, hx_session_logits(s, (int)p), sizeof(float) * in.n_vocab);
    HX_ASSERT_OK(hx_session_close(s));
    HX_ASSERT_OK(hx_model_free(m));
    return l;
}

START_TEST(model_logits_with_and_without)
{
    static const hx_synthetic_config gqa = {"gqa", 256, 2, 8, 2, 512, 512, "llama", 0};
    static const char *const types[] = {"q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_K", "q5_K", "q6_K"};
    char dir[64], path[128];
    hx_test_tmpdir(dir, sizeof dir, "repack");
    hx_runtime_options ro = hx_runtime_options_default();
    ro.devices = "cpu";
    hx_runtime *rt;
    HX_ASSERT_OK(hx_runtime_open(&rt, &ro));
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        snprintf(path, sizeof path, "%s/%s.gguf", dir, types[i]);
        HX_ASSERT_OK(hx_synthetic_write(path, &gqa, types[i], 42));
        uint64_t on_bytes, off_bytes;
        uint32_t nv;
        float *on = model_logits(rt, path, 1, 0, &on_bytes, &nv), *off = model_logits(rt, path, -1, 0, &off_bytes, &nv);
        float *spoilt = model_logits(rt, path, 1, 1, &on_bytes, &nv);
        ck_assert_msg(memcmp(spoilt, on, sizeof(float) * 11 * nv) != 0, "the CPU did not read the repacked copy");
        free(spoilt);
        ck_assert_uint_eq(off_bytes, 0);
        ck_assert_uint_gt(on_bytes, 0);
        double num = 0, den = 0;
        int mismatches = 0;
        for (int p = 0; p < 11; p++) {
            int a = 0, b = 0;
            for (uint32_t v = 0; v < nv; v++) {
                const float x = on[p * nv + v], y = off[p * nv + v];
                ck_assert(isfinite(x));
                num += ((double)x - y) * ((double)x - y);
                den += (double)y * y;
                a = x > on[p * nv + a] ? (int)v : a;
                b = y > off[p * nv + b] ? (int)v : b;
            }
            mismatches += a != b;
        }
        fprintf(stderr, "  repack %s: %llu bytes repacked, logits rel L2 %.3g, argmax mismatches %d/11\n", types[i],
                (unsigned long long)on_bytes, sqrt(num / den), mismatches);
        ck_assert_double_le(sqrt(num / den), REPACK_LOGITS_TOL);
        ck_assert_int_eq(mismatches, 0);
        free(on);
        free(off);
    }
    HX_ASSERT_OK(hx_runtime_close(rt));
    hx_test_rmdir(dir);
}
END_TEST

/* A mixture of experts: its attention and router matrices are laid out
 * for the CPU, its experts' tensors are not (the expert kernels read the
 * mapped rows; a copy was memory spent for nothing, as much as the file's
 * experts). */
START_TEST(experts_are_not_copied)
{
    char dir[64], path[128];
    hx_test_tmpdir(dir, sizeof dir, "repack-moe");
    snprintf(path, sizeof path, "%s/moe.gguf", dir);
    HX_ASSERT_OK(hx_model_write_synthetic(path, "mixtral-tiny", "q4_0", 5));
    hx_runtime_options ro = hx_runtime_options_default();
    ro.devices = "cpu";
    hx_runtime *rt;
    HX_ASSERT_OK(hx_runtime_open(&rt, &ro));
    hx_model_options o = hx_model_options_default();
    o.repack = 1;
    o.n_ctx = 64;
    hx_model *m;
    HX_ASSERT_OK(hx_model_load(rt, path, &o, &m));
    hx_model_info in;
    HX_ASSERT_OK(hx_model_info_get(m, &in));
    ck_assert_uint_gt(in.n_expert, 0);
    uint64_t experts = 0;
    for (uint32_t l = 0; l < in.n_layer; l++) {
        ck_assert_ptr_nonnull(m->layers[l].w[HX_LW_Q].buf->cpu_layout);
        for (int i = HX_LW_GATE_EXPS; i <= HX_LW_DOWN_EXPS; i++) {
            const hx_buffer *b = m->layers[l].w[i].buf;
            ck_assert_ptr_null(b->cpu_layout);
            experts += hx_buffer_size(b);
        }
    }
    ck_assert_uint_gt(in.repacked_bytes, 0);
    ck_assert_msg(in.repacked_bytes + experts <= in.file_bytes, "%llu bytes repacked, %llu of experts, file %llu",
                  (unsigned long long)in.repacked_bytes, (unsigned long long)experts,
                  (unsigned long long)in.file_bytes);
    HX_ASSERT_OK(hx_model_free(m));
    HX_ASSERT_OK(hx_runtime_close(rt));
    hx_test_rmdir(dir);
}
END_TEST

Suite *suite_repack(void)
{
    Suite *s = suite_create("repack");
    TCase *tc = tcase_create("repack");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, kernels_equal_plain_loop);
    tcase_add_test(tc, refuses_what_it_cannot_lay_out);
    tcase_add_test(tc, matmul_reads_the_copy);
    tcase_add_test(tc, experts_are_not_copied);
    tcase_add_test(tc, a_short_input_is_refused);
    tcase_add_test(tc, converted_rows_keep_the_bits);
    tcase_add_test(tc, model_logits_with_and_without);
    suite_add_tcase(s, tc);
    return s;
}
