/* Suite quant: tensor types' arithmetic (kernels_cpu/quant.h).
 *
 * What is checked, and against what:
 *  - block layouts: struct sizes equal the GGUF type table;
 *  - known answers: hand-built blocks whose values follow from the format
 *    description alone, through the scalar reference and every SIMD level;
 *  - dequantization: every SIMD level equals the scalar reference bit for
 *    bit on random blocks (random bytes, finite f16 scales), 1..64 blocks,
 *    unaligned source and destination;
 *  - dot products: every level within DOT_TOL * (sum |w_i a_i| + sum |m_b s_b|)
 *    of the scalar reference (the quants' integer sums are exact; only the
 *    float scaling and summation order differ), and the scalar reference
 *    within the same bound (plus the f16 rounding of Q8_1's s) of a double
 *    dot of the dequantized rows;
 *  - quantizers: quantize -> dequantize error per element within the
 *    format's bound (derived below per type) and RMS error within measured
 *    quality bounds; SIMD quantizers equal the scalar ones bit for bit;
 *  - an independent reference: gguf-py's numpy (de)quantizers (llama.cpp's
 *    own Python package), when python3 with gguf is installed. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels_cpu/quant.h"
#include "kernels_cpu/vmath.h"
#include "tests/hx_test.h"
#include "tests/ref_ops.h"

/* Relative bound on |dot - reference| against sum |w_i a_i| + sum |m_b s_b|:
 * float32 summation of at most a few thousand block terms, eps 2^-24. */
#define DOT_TOL 1e-5

static const hx_type weight_types[] = {HX_TYPE_F32,  HX_TYPE_F16,  HX_TYPE_BF16,   HX_TYPE_Q4_0,  HX_TYPE_Q4_1,
                                       HX_TYPE_Q5_0, HX_TYPE_Q5_1, HX_TYPE_Q8_0,   HX_TYPE_Q4_K,  HX_TYPE_Q5_K,
                                       HX_TYPE_Q6_K, HX_TYPE_Q2_K, HX_TYPE_Q3_K,   HX_TYPE_IQ4_NL, HX_TYPE_IQ4_XS};
#define N_WEIGHT_TYPES (sizeof weight_types / sizeof weight_types[0])
static const hx_type all_types[] = {HX_TYPE_F32,  HX_TYPE_F16,  HX_TYPE_BF16,   HX_TYPE_Q4_0,  HX_TYPE_Q4_1,
                                    HX_TYPE_Q5_0, HX_TYPE_Q5_1, HX_TYPE_Q8_0,   HX_TYPE_Q8_1,  HX_TYPE_Q4_K,
                                    HX_TYPE_Q5_K, HX_TYPE_Q6_K, HX_TYPE_Q8_K,   HX_TYPE_Q2_K,  HX_TYPE_Q3_K,
                                    HX_TYPE_IQ4_NL, HX_TYPE_IQ4_XS};
#define N_ALL_TYPES (sizeof all_types / sizeof all_types[0])

/* ---- helpers ------------------------------------------------------------ */

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static float rng_unit(uint64_t *s) { return (float)((rng_next(s) >> 40) * (1.0 / 16777216.0)); }

/* Roughly normal (sum of four uniforms), scaled. */
static float rng_normal(uint64_t *s, float sigma)
{
    return sigma * (rng_unit(s) + rng_unit(s) + rng_unit(s) + rng_unit(s) - 2.0f) * 1.7320508f;
}

/* A finite f16 with biased exponent in [emin, emax], random sign and mantissa. */
static hx_half rand_half(uint64_t *s, int emin, int emax)
{
    const uint64_t r = rng_next(s);
    const int e = emin + (int)((r >> 20) % (uint64_t)(emax - emin + 1));
    return (hx_half)(((r >> 40) & 0x8000u) | ((unsigned)e << 10) | (r & 0x3ffu));
}

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static uint16_t get16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

static size_t row_bytes(hx_type t, int64_t n) { return hx_type_row_size(t, (uint64_t)n); }
static int64_t block_len(hx_type t) { return hx_type_get(t)->block_size; }

/* Random bytes, then every scale field made a finite f16 (exponents 5..20,
 * about 2^-10..2^5) so products stay finite. */
static void fill_random(hx_type t, uint8_t *p, int64_t n, uint64_t *s)
{
    const size_t bytes = row_bytes(t, n);
    for (size_t i = 0; i < bytes; i++)
        p[i] = (uint8_t)(rng_next(s) >> 56);
    const size_t B = hx_type_get(t)->type_size;
    const int64_t nb = n / block_len(t);
    switch (t) {
    case HX_TYPE_F32:
        for (int64_t i = 0; i < n; i++) {
            const float f = rng_normal(s, 2.0f);
            memcpy(p + 4 * i, &f, 4);
        }
        break;
    case HX_TYPE_F16:
        for (int64_t i = 0; i < n; i++)
            put16(p + 2 * i, rand_half(s, 0, 30));
        break;
    case HX_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) /* exponents 100..150 */
            put16(p + 2 * i, (uint16_t)((rng_next(s) & 0x807f) | ((100 + rng_next(s) % 51) << 7)));
        break;
    case HX_TYPE_Q4_0:
    case HX_TYPE_Q5_0:
    case HX_TYPE_Q8_0:
    case HX_TYPE_IQ4_NL:
    case HX_TYPE_IQ4_XS:
        for (int64_t b = 0; b < nb; b++)
            put16(p + b * B, rand_half(s, 5, 20));
        break;
    case HX_TYPE_Q2_K:
        for (int64_t b = 0; b < nb; b++) {
            put16(p + b * B + offsetof(hx_block_q2_K, d), rand_half(s, 5, 20));
            put16(p + b * B + offsetof(hx_block_q2_K, dmin), rand_half(s, 5, 20));
        }
        break;
    case HX_TYPE_Q3_K:
        for (int64_t b = 0; b < nb; b++)
            put16(p + b * B + offsetof(hx_block_q3_K, d), rand_half(s, 5, 20));
        break;
    case HX_TYPE_Q4_1:
    case HX_TYPE_Q5_1:
    case HX_TYPE_Q8_1:
    case HX_TYPE_Q4_K:
    case HX_TYPE_Q5_K:
        for (int64_t b = 0; b < nb; b++) {
            put16(p + b * B, rand_half(s, 5, 20));
            put16(p + b * B + 2, rand_half(s, 5, 20));
        }
        break;
    case HX_TYPE_Q6_K:
        for (int64_t b = 0; b < nb; b++)
            put16(p + b * B + offsetof(hx_block_q6_K, d), rand_half(s, 5, 20));
        break;
    case HX_TYPE_Q8_K:
        for (int64_t b = 0; b < nb; b++) {
            const float d = rng_normal(s, 0.01f);
            memcpy(p + b * B, &d, 4);
        }
        break;
    default:
        ck_abort_msg("no random filler for %s", hx_type_name(t));
    }
}

/* Memory with room for an offset, freed by the caller. */
static uint8_t *alloc_bytes(size_t n)
{
    uint8_t *p = aligned_alloc(64, (n + 64 + 63) / 64 * 64);
    ck_assert_ptr_nonnull(p);
    return p;
}

static hx_simd_level max_level(void) { return hx_cpu_simd_max(); }

/* ---- layouts ------------------------------------------------------------ */

START_TEST(test_layouts)
{
    const struct {
        hx_type t;
        size_t size, block;
    } want[] = {
        {HX_TYPE_Q4_0, sizeof(hx_block_q4_0), HX_QK},  {HX_TYPE_Q4_1, sizeof(hx_block_q4_1), HX_QK},
        {HX_TYPE_Q5_0, sizeof(hx_block_q5_0), HX_QK},  {HX_TYPE_Q5_1, sizeof(hx_block_q5_1), HX_QK},
        {HX_TYPE_Q8_0, sizeof(hx_block_q8_0), HX_QK},  {HX_TYPE_Q8_1, sizeof(hx_block_q8_1), HX_QK},
        {HX_TYPE_Q4_K, sizeof(hx_block_q4_K), HX_QK_K}, {HX_TYPE_Q5_K, sizeof(hx_block_q5_K), HX_QK_K},
        {HX_TYPE_Q6_K, sizeof(hx_block_q6_K), HX_QK_K}, {HX_TYPE_Q8_K, sizeof(hx_block_q8_K), HX_QK_K},
        {HX_TYPE_Q2_K, sizeof(hx_block_q2_K), HX_QK_K}, {HX_TYPE_Q3_K, sizeof(hx_block_q3_K), HX_QK_K},
        {HX_TYPE_IQ4_NL, sizeof(hx_block_iq4_nl), HX_QK}, {HX_TYPE_IQ4_XS, sizeof(hx_block_iq4_xs), HX_QK_K},
        {HX_TYPE_F16, sizeof(hx_half), 1},              {HX_TYPE_BF16, sizeof(hx_bf16), 1},
        {HX_TYPE_F32, sizeof(float), 1},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const hx_type_traits *tr = hx_type_get(want[i].t);
        ck_assert_ptr_nonnull(tr);
        ck_assert_uint_eq(tr->type_size, want[i].size);
        ck_assert_uint_eq(tr->block_size, want[i].block);
    }
    /* ggml's byte sizes, independently of our structs */
    ck_assert_uint_eq(sizeof(hx_block_q4_K), 2 + 2 + 12 + 128);
    ck_assert_uint_eq(sizeof(hx_block_q5_K), 2 + 2 + 12 + 32 + 128);
    ck_assert_uint_eq(sizeof(hx_block_q6_K), 128 + 64 + 16 + 2);
    ck_assert_uint_eq(sizeof(hx_block_q8_K), 4 + 256 + 32);
    ck_assert_uint_eq(offsetof(hx_block_q6_K, d), 208);
    ck_assert_uint_eq(offsetof(hx_block_q8_K, bsums), 260);
}
END_TEST

/* ---- f16 / bf16 --------------------------------------------------------- */

START_TEST(test_fp16_known)
{
    const struct {
        float f;
        hx_half h;
    } exact[] = {{1.0f, 0x3c00}, {-2.0f, 0xc000}, {0.5f, 0x3800}, {65504.0f, 0x7bff},
                 {6.103515625e-05f, 0x0400}, /* smallest normal 2^-14 */
                 {5.9604644775390625e-08f, 0x0001}, /* smallest subnormal 2^-24 */
                 {0.0f, 0x0000}, {-0.0f, 0x8000}, {INFINITY, 0x7c00}, {-INFINITY, 0xfc00}};
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
        ck_assert_uint_eq(hx_fp32_to_fp16(exact[i].f), exact[i].h);
        const float back = hx_fp16_to_fp32(exact[i].h);
        ck_assert_mem_eq(&back, &exact[i].f, sizeof back);
    }
    /* rounding: ties to even, overflow, subnormal rounding */
    ck_assert_uint_eq(hx_fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00);            /* tie -> even */
    ck_assert_uint_eq(hx_fp32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3c02);        /* tie -> even */
    ck_assert_uint_eq(hx_fp32_to_fp16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01); /* above tie */
    ck_assert_uint_eq(hx_fp32_to_fp16(65519.0f), 0x7bff);
    ck_assert_uint_eq(hx_fp32_to_fp16(65520.0f), 0x7c00);
    ck_assert_uint_eq(hx_fp32_to_fp16(1e10f), 0x7c00);
    ck_assert_uint_eq(hx_fp32_to_fp16(0x1p-25f), 0x0000);          /* tie between 0 and 2^-24 */
    ck_assert_uint_eq(hx_fp32_to_fp16(0x1p-25f + 0x1p-40f), 0x0001);
    ck_assert_uint_eq(hx_fp32_to_fp16(3 * 0x1p-25f), 0x0002);      /* 1.5 units -> 2 (even) */
    ck_assert_uint_eq(hx_fp32_to_fp16(-1023 * 0x1p-24f), 0x83ff);  /* largest subnormal */
    ck_assert_uint_eq(hx_fp32_to_fp16(2047 * 0x1p-25f), 0x0400);   /* rounds up to normal */
    ck_assert(isnan(hx_fp16_to_fp32(0x7e00)) && isnan(hx_fp16_to_fp32(0x7c01)));
    ck_assert_uint_eq(hx_fp32_to_fp16(NAN) & 0x7e00, 0x7e00);
    /* every finite f16 survives f16 -> f32 -> f16 */
    for (uint32_t h = 0; h < 65536; h++) {
        if ((h & 0x7c00) == 0x7c00)
            continue;
        ck_assert_uint_eq(hx_fp32_to_fp16(hx_fp16_to_fp32((hx_half)h)), h);
    }
    /* bf16 */
    ck_assert_float_eq(hx_bf16_to_fp32(0x3f80), 1.0f);
    ck_assert_float_eq(hx_bf16_to_fp32(0xc040), -3.0f);
    ck_assert_uint_eq(hx_fp32_to_bf16(1.0f), 0x3f80);
    ck_assert_uint_eq(hx_fp32_to_bf16(1.0f + 0x1p-8f), 0x3f80);            /* tie -> even */
    ck_assert_uint_eq(hx_fp32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);        /* tie -> even */
    ck_assert_uint_eq(hx_fp32_to_bf16(-INFINITY), 0xff80);
    ck_assert_uint_eq(hx_fp32_to_bf16(NAN) & 0x7fc0, 0x7fc0);
}
END_TEST

/* Every SIMD row conversion gives the scalar bits, over all 65536 f16
 * patterns (NaNs included) and random f32 patterns of every class. */
START_TEST(test_fp16_rows)
{
    enum { N = 65536 + 7 };
    uint8_t *h = alloc_bytes(2 * N), *h2 = alloc_bytes(2 * N);
    float *f = (float *)(void *)alloc_bytes(4 * N), *f2 = (float *)(void *)alloc_bytes(4 * N);
    uint64_t s = 0x1234;
    for (int i = 0; i < N; i++)
        put16(h + 2 * i, (uint16_t)i);
    for (hx_simd_level l = HX_SIMD_SCALAR; l <= max_level(); l++) {
        for (int t = 0; t < 2; t++) {
            const hx_type ty = t ? HX_TYPE_BF16 : HX_TYPE_F16;
            const hx_quant_ops *ref = hx_quant_ops_get_level(ty, HX_SIMD_SCALAR), *o = hx_quant_ops_get_level(ty, l);
            ck_assert_ptr_nonnull(o);
            ref->dequantize_row(h, f, N);
            o->dequantize_row(h, f2, N);
            ck_assert_msg(memcmp(f, f2, 4 * N) == 0, "%s dequantize differs at %s", hx_type_name(ty),
                          hx_cpu_simd_name(l));
            for (int i = 0; i < N; i++) {
                uint32_t u = (uint32_t)(rng_next(&s) >> 32);
                if (i % 4 == 1) /* near the f16 range: subnormals, overflow, ties */
                    u = (u & 0x80000000u) | (0x33000000u + (u % 0x14800000u));
                memcpy(f + i, &u, 4);
            }
            ref->quantize_row(f, h2, N);
            uint8_t *h3 = alloc_bytes(2 * N);
            o->quantize_row(f, h3, N);
            ck_assert_msg(memcmp(h2, h3, 2 * N) == 0, "%s quantize differs at %s", hx_type_name(ty),
                          hx_cpu_simd_name(l));
            free(h3);
        }
    }
    free(h);
    free(h2);
    free(f);
    free(f2);
}
END_TEST

/* ---- known answers ------------------------------------------------------ */

/* One hand-built block per type and the values the format says it holds. */
typedef struct {
    hx_type t;
    uint8_t block[300];
    float want[256];
    int n;
} known_block;

static void known_q4_0(known_block *k)
{
    k->t = HX_TYPE_Q4_0, k->n = 32;
    put16(k->block, 0x3800); /* d = 0.5 */
    for (int j = 0; j < 16; j++) {
        k->block[2 + j] = (uint8_t)(j | ((15 - j) << 4));
        k->want[j] = (float)(j - 8) * 0.5f;
        k->want[16 + j] = (float)(7 - j) * 0.5f;
    }
}

static void known_q4_1(known_block *k)
{
    k->t = HX_TYPE_Q4_1, k->n = 32;
    put16(k->block, 0x3c00);     /* d = 1 */
    put16(k->block + 2, 0xc000); /* m = -2 */
    for (int j = 0; j < 16; j++) {
        k->block[4 + j] = (uint8_t)(j | ((15 - j) << 4));
        k->want[j] = (float)(j - 2);
        k->want[16 + j] = (float)(13 - j);
    }
}

static void known_q5_0(known_block *k)
{
    k->t = HX_TYPE_Q5_0, k->n = 32;
    put16(k->block, 0x3c00); /* d = 1 */
    const uint32_t qh = 0x80000001u; /* fifth bits of elements 0 and 31 */
    memcpy(k->block + 2, &qh, 4);
    for (int j = 0; j < 16; j++) {
        k->block[6 + j] = (uint8_t)(0xf0 | j);
        k->want[j] = j == 0 ? 0.0f : (float)(j - 16);
        k->want[16 + j] = j == 15 ? 15.0f : -1.0f;
    }
}

static void known_q5_1(known_block *k)
{
    k->t = HX_TYPE_Q5_1, k->n = 32;
    put16(k->block, 0x3800);     /* d = 0.5 */
    put16(k->block + 2, 0x3c00); /* m = 1 */
    const uint32_t qh = 0x00010000u; /* fifth bit of element 16 */
    memcpy(k->block + 4, &qh, 4);
    for (int j = 0; j < 16; j++) {
        k->block[8 + j] = 0x21;
        k->want[j] = 1.5f;
        k->want[16 + j] = j == 0 ? 10.0f : 2.0f;
    }
}

static void known_q8_0(known_block *k)
{
    k->t = HX_TYPE_Q8_0, k->n = 32;
    put16(k->block, 0x3400); /* d = 0.25 */
    for (int j = 0; j < 32; j++) {
        k->block[2 + j] = (uint8_t)(int8_t)(j - 16);
        k->want[j] = (float)(j - 16) * 0.25f;
    }
}

/* Sub-block scales 1,2,3,4,5,6,7,63 and mins 0,1,2,3,60,5,6,7 packed by
 * hand: bytes 0-3 scales 0-3 plus bits 4-5 of scales 4-7 in bits 6-7,
 * bytes 4-7 mins 0-3 plus bits 4-5 of mins 4-7, bytes 8-11 the low four
 * bits of scales 4-7 (low nibble) and mins 4-7 (high nibble). */
static const uint8_t k4_scales[12] = {1, 2, 3, 4 | (3 << 6), 0 | (3 << 6), 1, 2, 3,
                                      5 | (12 << 4), 6 | (5 << 4), 7 | (6 << 4), 15 | (7 << 4)};
static const int k4_sc[8] = {1, 2, 3, 4, 5, 6, 7, 63}, k4_m[8] = {0, 1, 2, 3, 60, 5, 6, 7};

static void known_q4_K(known_block *k)
{
    k->t = HX_TYPE_Q4_K, k->n = 256;
    put16(k->block, 0x3c00);     /* d = 1 */
    put16(k->block + 2, 0x3800); /* dmin = 0.5 */
    memcpy(k->block + 4, k4_scales, 12);
    uint8_t *qs = k->block + 16;
    memset(qs, 0x5a, 128); /* low nibbles 10 (sub-blocks 0,2,4,6), high 5 */
    qs[3] = 0x0f;          /* element 3 -> 15, element 35 -> 0 */
    qs[127] = 0xf0;        /* element 223 -> 0, element 255 -> 15 */
    for (int e = 0; e < 256; e++) {
        const int j = e / 32;
        int q = j % 2 ? 5 : 10;
        if (e == 3 || e == 255)
            q = 15;
        if (e == 35 || e == 223)
            q = 0;
        k->want[e] = (float)(k4_sc[j] * q) - 0.5f * (float)k4_m[j];
    }
}

static void known_q5_K(known_block *k)
{
    k->t = HX_TYPE_Q5_K, k->n = 256;
    put16(k->block, 0x3c00);
    put16(k->block + 2, 0x3800);
    memcpy(k->block + 4, k4_scales, 12);
    uint8_t *qh = k->block + 16, *qs = k->block + 48;
    memset(qh, 0, 32);
    memset(qs, 0x5a, 128);
    qh[0] = 0x01;  /* element 0 (bit 0) */
    qh[5] = 0x0c;  /* elements 69 (bit 2) and 101 (bit 3) */
    qh[31] = 0x80; /* element 255 (bit 7) */
    for (int e = 0; e < 256; e++) {
        const int j = e / 32;
        int q = j % 2 ? 5 : 10;
        if (e == 0 || e == 69 || e == 101 || e == 255)
            q += 16;
        k->want[e] = (float)(k4_sc[j] * q) - 0.5f * (float)k4_m[j];
    }
}

static void known_q6_K(known_block *k)
{
    k->t = HX_TYPE_Q6_K, k->n = 256;
    uint8_t *ql = k->block, *qh = k->block + 128;
    int8_t *sc = (int8_t *)(k->block + 192);
    memset(k->block, 0, 210);
    put16(k->block + 208, 0x3c00); /* d = 1 */
    for (int g = 0; g < 16; g++)
        sc[g] = (int8_t)(g - 8);
    ql[0] = 0xa5;      /* element 0 low bits 5, element 64 low bits 10 */
    qh[0] = 0xe4;      /* top bits: element 0 -> 0, 32 -> 1, 64 -> 2, 96 -> 3 */
    ql[64 + 33] = 0xf0; /* element 128+96+1 = 225 -> 15, element 161 -> 0 */
    for (int e = 0; e < 256; e++)
        k->want[e] = (float)(-32 * (e / 16 - 8));
    k->want[0] = (float)((5 - 32) * -8);
    k->want[32] = (float)((16 - 32) * -6);
    k->want[64] = (float)((42 - 32) * -4);
    k->want[96] = (float)((48 - 32) * -2);
    k->want[225] = (float)((15 - 32) * 6);
}

static void known_q8_1(known_block *k)
{
    k->t = HX_TYPE_Q8_1, k->n = 32;
    put16(k->block, 0x3400);     /* d = 0.25 */
    put16(k->block + 2, 0xd000); /* s = -32: not used by dequantization */
    for (int j = 0; j < 32; j++) {
        k->block[4 + j] = (uint8_t)(int8_t)(15 - j);
        k->want[j] = (float)(15 - j) * 0.25f;
    }
}

static void known_q8_K(known_block *k)
{
    k->t = HX_TYPE_Q8_K, k->n = 256;
    const float d = 0.125f;
    memcpy(k->block, &d, 4);
    for (int j = 0; j < 256; j++) {
        k->block[4 + j] = (uint8_t)(int8_t)(j - 128);
        k->want[j] = (float)(j - 128) * 0.125f;
    }
}

static void known_plain(known_block *k, hx_type t)
{
    static const float v[4] = {1.0f, 2.0f, -3.0f, 0.5f};
    static const uint16_t h[4] = {0x3c00, 0x4000, 0xc200, 0x3800}, b[4] = {0x3f80, 0x4000, 0xc040, 0x3f00};
    k->t = t, k->n = 4;
    for (int i = 0; i < 4; i++) {
        if (t == HX_TYPE_F32)
            memcpy(k->block + 4 * i, &v[i], 4);
        else
            put16(k->block + 2 * i, t == HX_TYPE_F16 ? h[i] : b[i]);
        k->want[i] = v[i];
    }
}

/* An activation row of n elements whose every quant is 1 and scale 1, so
 * dot(w, it) is the plain sum of w's values. */
static void ones_activation(hx_type t, uint8_t *y, int64_t n)
{
    const size_t B = hx_type_get(t)->type_size;
    for (int64_t b = 0; b < n / block_len(t); b++) {
        uint8_t *p = y + b * B;
        if (t == HX_TYPE_F32) {
            const float one = 1;
            memcpy(p, &one, 4);
        } else if (t == HX_TYPE_Q8_0) {
            put16(p, 0x3c00);
            memset(p + 2, 1, 32);
        } else if (t == HX_TYPE_Q8_1) {
            put16(p, 0x3c00);
            put16(p + 2, 0x5000); /* s = 32 */
            memset(p + 4, 1, 32);
        } else if (t == HX_TYPE_Q8_K) {
            const float one = 1;
            memcpy(p, &one, 4);
            memset(p + 4, 1, 256);
            for (int g = 0; g < 16; g++)
                put16(p + 260 + 2 * g, 16);
        }
    }
}

START_TEST(test_known_answers)
{
    known_block k[13];
    memset(k, 0, sizeof k);
    known_q4_0(&k[0]), known_q4_1(&k[1]), known_q5_0(&k[2]), known_q5_1(&k[3]), known_q8_0(&k[4]);
    known_q4_K(&k[5]), known_q5_K(&k[6]), known_q6_K(&k[7]), known_q8_K(&k[8]);
    known_plain(&k[9], HX_TYPE_F32), known_plain(&k[10], HX_TYPE_F16), known_plain(&k[11], HX_TYPE_BF16);
    known_q8_1(&k[12]);
    int nk = 13;
    for (hx_simd_level l = HX_SIMD_SCALAR; l <= max_level(); l++) {
        for (int i = 0; i < nk; i++) {
            const hx_quant_ops *o = hx_quant_ops_get_level(k[i].t, l);
            ck_assert_ptr_nonnull(o);
            float got[256];
            o->dequantize_row(k[i].block, got, k[i].n);
            for (int e = 0; e < k[i].n; e++)
                ck_assert_msg(got[e] == k[i].want[e], "%s %s element %d: %g, want %g", hx_type_name(k[i].t),
                              hx_cpu_simd_name(l), e, got[e], k[i].want[e]);
            if (!o->vec_dot)
                continue;
            /* dot with all-ones activations is the sum of the values;
             * the F32 activation row is four ones */
            uint8_t act[300];
            float ones[4] = {1, 1, 1, 1};
            ones_activation(o->vec_dot_type, act, k[i].n);
            float want = 0, s = 0;
            for (int e = 0; e < k[i].n; e++)
                want += k[i].want[e];
            o->vec_dot(k[i].n, &s, k[i].block, o->vec_dot_type == HX_TYPE_F32 ? (void *)ones : (void *)act);
            ck_assert_msg(s == want, "%s %s dot %g, want %g", hx_type_name(k[i].t), hx_cpu_simd_name(l), s, want);
        }
    }
    /* the scale unpacking on its own */
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        hx_quant_k4_scale_min(k4_scales, j, &sc, &m);
        ck_assert_int_eq(sc, k4_sc[j]);
        ck_assert_int_eq(m, k4_m[j]);
    }
}
END_TEST

/* ---- SIMD against scalar ------------------------------------------------ */

static const int block_counts[] = {1, 3, 8, 9, 17, 64};
#define N_COUNTS (sizeof block_counts / sizeof block_counts[0])

START_TEST(test_dequantize_exact)
{
    uint64_t s = 0xfeed;
    for (size_t ti = 0; ti < N_ALL_TYPES; ti++) {
        const hx_type t = all_types[ti];
        const hx_quant_ops *ref = hx_quant_ops_get_level(t, HX_SIMD_SCALAR);
        ck_assert_ptr_nonnull(ref);
        for (size_t ci = 0; ci < N_COUNTS; ci++) {
            /* plain types: an odd element count, to reach the tails */
            const int64_t n = block_len(t) == 1 ? block_counts[ci] * 37 : block_counts[ci] * block_len(t);
            const size_t bytes = row_bytes(t, n);
            uint8_t *buf = alloc_bytes(bytes + 64);
            float *want = (float *)(void *)alloc_bytes(4 * (size_t)n + 64);
            float *got = (float *)(void *)alloc_bytes(4 * (size_t)n + 64);
            const size_t off = (ci * 7 + 1) % 64; /* unaligned rows */
            fill_random(t, buf + off, n, &s);
            ref->dequantize_row(buf + off, want, n);
            for (hx_simd_level l = HX_SIMD_AVX2; l <= max_level(); l++) {
                const hx_quant_ops *o = hx_quant_ops_get_level(t, l);
                ck_assert_ptr_nonnull(o);
                o->dequantize_row(buf + off, got + 1, n); /* unaligned destination */
                ck_assert_msg(memcmp(want, got + 1, 4 * (size_t)n) == 0, "%s dequantize at %s differs (%lld elements)",
                              hx_type_name(t), hx_cpu_simd_name(l), (long long)n);
            }
            free(buf);
            free(want);
            free(got);
        }
    }
}
END_TEST

/* The low-bit types' dequantization against tests/ref_ops.c's float64
 * decoding, written from ggml's block descriptions: the kernels round
 * each product to float, so they agree within a few float roundings of
 * the block's largest term. */
START_TEST(test_dequantize_float64)
{
    static const hx_type ts[] = {HX_TYPE_Q2_K, HX_TYPE_Q3_K, HX_TYPE_IQ4_NL, HX_TYPE_IQ4_XS};
    uint64_t s = 0xf64;
    for (size_t ti = 0; ti < sizeof ts / sizeof ts[0]; ti++) {
        const hx_type t = ts[ti];
        const int64_t n = 9 * 256;
        uint8_t *buf = alloc_bytes(row_bytes(t, n));
        float *got = malloc(4 * (size_t)n);
        double *want = malloc(8 * (size_t)n);
        ck_assert(got && want);
        fill_random(t, buf, n, &s);
        hx_quant_ops_get_level(t, HX_SIMD_SCALAR)->dequantize_row(buf, got, n);
        hx_ref_dequantize((uint32_t)t, buf, want, (uint32_t)n);
        for (int64_t b = 0; b < n / 256; b++) {
            double big = 0;
            for (int j = 0; j < 256; j++)
                big = fmax(big, fabs(want[256 * b + j]));
            for (int j = 0; j < 256; j++) {
                const int64_t i = 256 * b + j;
                ck_assert_msg(fabs(got[i] - want[i]) <= 0x1p-21 * big, "%s element %lld: %.9g, float64 %.9g",
                              hx_type_name(t), (long long)i, got[i], want[i]);
            }
        }
        free(buf);
        free(got);
        free(want);
    }
}
END_TEST

/* Random floats quantized to the activation type t; returns the row. */
static uint8_t *make_activation(hx_type t, int64_t n, uint64_t *s, size_t off)
{
    float *f = malloc(4 * (size_t)n);
    ck_assert_ptr_nonnull(f);
    for (int64_t i = 0; i < n; i++)
        f[i] = rng_normal(s, 1.0f) + (i % 97 == 0 ? 4.0f : 0.0f);
    uint8_t *y = alloc_bytes(row_bytes(t, n) + 64);
    hx_quant_ops_get_level(t, HX_SIMD_SCALAR)->quantize_row(f, y + off, n);
    free(f);
    return y;
}

/* sum |w_i a_i| + sum over blocks |m_b * s_b| of a weight row against its
 * activation row, and the exact (double) dot of the dequantized rows. */
static void dot_scale(hx_type t, const uint8_t *x, const uint8_t *y, int64_t n, double *mag, double *exact,
                      double *min_mag)
{
    const hx_quant_ops *o = hx_quant_ops_get_level(t, HX_SIMD_SCALAR);
    const hx_quant_ops *a = hx_quant_ops_get_level(o->vec_dot_type, HX_SIMD_SCALAR);
    float *w = malloc(4 * (size_t)n), *v = malloc(4 * (size_t)n);
    ck_assert(w && v);
    o->dequantize_row(x, w, n);
    a->dequantize_row(y, v, n);
    double m = 0, e = 0, mm = 0;
    for (int64_t i = 0; i < n; i++) {
        m += fabs((double)w[i] * v[i]);
        e += (double)w[i] * v[i];
    }
    if (o->vec_dot_type == HX_TYPE_Q8_1) { /* the min times the activations' sum */
        const size_t B = hx_type_get(t)->type_size;
        for (int64_t b = 0; b < n / HX_QK; b++) {
            double sum = 0;
            for (int j = 0; j < HX_QK; j++)
                sum += v[b * HX_QK + j];
            mm += fabs(hx_fp16_to_fp32(get16(x + b * B + 2)) * sum);
        }
    }
    *mag = m;
    *exact = e;
    *min_mag = mm;
    free(w);
    free(v);
}

START_TEST(test_vec_dot)
{
    uint64_t s = 0xd07;
    for (size_t ti = 0; ti < N_WEIGHT_TYPES; ti++) {
        const hx_type t = weight_types[ti];
        const hx_quant_ops *ref = hx_quant_ops_get_level(t, HX_SIMD_SCALAR);
        for (size_t ci = 0; ci < N_COUNTS; ci++) {
            const int64_t n = block_len(t) == 1 ? block_counts[ci] * 37 : block_counts[ci] * block_len(t);
            const size_t xo = (ci * 13 + 3) % 64, yo = ref->vec_dot_type == HX_TYPE_F32 ? 4 * (ci % 4) : (ci * 5) % 64;
            uint8_t *x = alloc_bytes(row_bytes(t, n) + 64);
            fill_random(t, x + xo, n, &s);
            uint8_t *y = make_activation(ref->vec_dot_type, n, &s, yo);
            double mag, exact, min_mag;
            dot_scale(t, x + xo, y + yo, n, &mag, &exact, &min_mag);
            const double tol = DOT_TOL * (mag + min_mag) + 1e-30;
            float want;
            ref->vec_dot(n, &want, x + xo, y + yo);
            /* the reference against exact arithmetic; Q8_1 stores its
             * activation sum as f16, so the min term may be off by 2^-11 */
            ck_assert_msg(fabs(want - exact) <= tol + 0x1p-10 * min_mag, "%s scalar dot %.9g, exact %.9g (tol %.3g)",
                          hx_type_name(t), want, exact, tol);
            for (hx_simd_level l = HX_SIMD_AVX2; l <= max_level(); l++) {
                const hx_quant_ops *o = hx_quant_ops_get_level(t, l);
                float got = NAN;
                o->vec_dot(n, &got, x + xo, y + yo);
                ck_assert_msg(fabs((double)got - want) <= tol, "%s dot at %s: %.9g, scalar %.9g (tol %.3g, n %lld)",
                              hx_type_name(t), hx_cpu_simd_name(l), got, want, tol, (long long)n);
            }
            free(x);
            free(y);
        }
    }
}
END_TEST

/* The four-row dot equals four one-row dots, at every level. */
START_TEST(test_vec_dot4)
{
    uint64_t s = 0x4444;
    for (size_t ti = 0; ti < N_WEIGHT_TYPES; ti++) {
        const hx_type t = weight_types[ti];
        for (size_t ci = 0; ci < N_COUNTS; ci += 2) {
            const int64_t n = block_len(t) == 1 ? block_counts[ci] * 37 : block_counts[ci] * block_len(t);
            const size_t rb = row_bytes(t, n), stride = rb + 3; /* rows not aligned to each other */
            uint8_t *x = alloc_bytes(4 * stride + 64);
            for (int r = 0; r < 4; r++)
                fill_random(t, x + 1 + r * stride, n, &s);
            const hx_type at = hx_quant_ops_get_level(t, HX_SIMD_SCALAR)->vec_dot_type;
            uint8_t *y = make_activation(at, n, &s, at == HX_TYPE_F32 ? 0 : 5);
            const uint8_t *yr = y + (at == HX_TYPE_F32 ? 0 : 5);
            for (hx_simd_level l = HX_SIMD_SCALAR; l <= max_level(); l++) {
                const hx_quant_ops *o = hx_quant_ops_get_level(t, l);
                float four[4] = {NAN, NAN, NAN, NAN};
                o->vec_dot4(n, four, x + 1, stride, yr);
                for (int r = 0; r < 4; r++) {
                    float one;
                    o->vec_dot(n, &one, x + 1 + r * stride, yr);
                    double mag, exact, min_mag;
                    dot_scale(t, x + 1 + r * stride, yr, n, &mag, &exact, &min_mag);
                    ck_assert_msg(fabs((double)four[r] - one) <= DOT_TOL * (mag + min_mag) + 1e-30,
                                  "%s dot4 row %d at %s: %.9g vs %.9g", hx_type_name(t), r, hx_cpu_simd_name(l),
                                  four[r], one);
                }
            }
            free(x);
            free(y);
        }
    }
}
END_TEST

/* Quants at the ends of their ranges against activations of 127 of one
 * sign: every Q4_0 nibble 0, so q - 8 = -8 (Q5_0: -16), and for the types
 * with a min (Q4_1, Q5_1) every quant but a block's first at its top, 15
 * or 31.  The integer block sums are at their largest, where a kernel
 * that narrows them to 16 bits would saturate.  The tile must still equal
 * vec_dot and the exact sum. */
START_TEST(test_gemm_extremes)
{
    for (size_t ti = 0; ti < N_WEIGHT_TYPES; ti++) {
        const hx_type t = weight_types[ti];
        const hx_quant_ops *ref = hx_quant_ops_get_level(t, HX_SIMD_SCALAR);
        const hx_type at = ref->vec_dot_type;
        const int64_t n = block_len(t) == 1 ? 9 * 37 : 17 * block_len(t);
        /* f32 activation rows stay float-aligned, as the matmul lays them out */
        const size_t ya = at == HX_TYPE_F32 ? 4 : 3;
        const size_t xs = row_bytes(t, n) + 1, ys = row_bytes(at, n) + ya;
        uint8_t *x = alloc_bytes(4 * xs + 64), *y = alloc_bytes(HX_GEMM_COLS * ys + 64);
        float *f = malloc(4 * (size_t)n);
        ck_assert_ptr_nonnull(f);
        for (int r = 0; r < 4; r++) {
            for (int64_t i = 0; i < n; i++) {
                const float v = 1.0f + (float)((i / 32 + r) % 5);
                if (at == HX_TYPE_Q8_1) /* a block's lowest value first, then its highest */
                    f[i] = i % 32 ? v : -v;
                else /* a constant negative value per block: every quant at its lowest */
                    f[i] = -v;
            }
            ref->quantize_row(f, x + 1 + r * xs, n);
        }
        for (int c = 0; c < HX_GEMM_COLS; c++) {
            const float sign = c % 2 ? -1.0f : 1.0f;
            for (int64_t i = 0; i < n; i++)
                f[i] = sign * (2.0f + (float)c);
            hx_quant_ops_get_level(at, HX_SIMD_SCALAR)->quantize_row(f, y + ya + c * ys, n);
        }
        free(f);
        for (hx_simd_level l = HX_SIMD_SCALAR; l <= max_level(); l++) {
            const hx_quant_ops *o = hx_quant_ops_get_level(t, l);
            float out[HX_GEMM_COLS * 4];
            o->gemm(n, HX_GEMM_COLS, out, 4, x + 1, xs, y + ya, ys);
            for (int c = 0; c < HX_GEMM_COLS; c++)
                for (int r = 0; r < 4; r++) {
                    float want;
                    ref->vec_dot(n, &want, x + 1 + r * xs, y + ya + c * ys);
                    double mag, exact, min_mag;
                    dot_scale(t, x + 1 + r * xs, y + ya + c * ys, n, &mag, &exact, &min_mag);
                    ck_assert_msg(fabs((double)out[4 * c + r] - want) <= DOT_TOL * (mag + min_mag) + 1e-30,
                                  "%s extreme gemm row %d col %d at %s: %.9g, scalar vec_dot %.9g",
                                  hx_type_name(t), r, c, hx_cpu_simd_name(l), out[4 * c + r], want);
                }
        }
        free(x);
        free(y);
    }
}
END_TEST

/* A GEMM tile equals vec_dot of each (row, column) pair at every level, for
 * every tile width, with weight and activation rows at odd offsets and
 * strides; block counts leave partial groups of eight. */
START_TEST(test_gemm)
{
    uint64_t s = 0x6e33;
    for (size_t ti = 0; ti < N_WEIGHT_TYPES; ti++) {
        const hx_type t = weight_types[ti];
        const hx_type at = hx_quant_ops_get_level(t, HX_SIMD_SCALAR)->vec_dot_type;
        for (size_t ci = 0; ci < N_COUNTS; ci++) {
            const int64_t n = block_len(t) == 1 ? block_counts[ci] * 37 : block_counts[ci] * block_len(t);
            const size_t xs = row_bytes(t, n) + 3, ys = row_bytes(at, n) + (at == HX_TYPE_F32 ? 4 : 5);
            const size_t xo = 1 + ci % 7, yo = at == HX_TYPE_F32 ? 4 : 3;
            uint8_t *x = alloc_bytes(4 * xs + 64), *y = alloc_bytes(HX_GEMM_COLS_MAX * ys + 64);
            for (int r = 0; r < 4; r++)
                fill_random(t, x + xo + r * xs, n, &s);
            float *f = malloc(4 * (size_t)n);
            ck_assert_ptr_nonnull(f);
            for (int c = 0; c < HX_GEMM_COLS_MAX; c++) {
                for (int64_t i = 0; i < n; i++)
                    f[i] = rng_normal(&s, 1.0f) + (i % 89 == c ? 3.0f : 0.0f);
                hx_quant_ops_get_level(at, HX_SIMD_SCALAR)->quantize_row(f, y + yo + c * ys, n);
            }
            free(f);
            for (hx_simd_level l = HX_SIMD_SCALAR; l <= max_level(); l++) {
                const hx_quant_ops *o = hx_quant_ops_get_level(t, l);
                ck_assert_ptr_nonnull(o->gemm);
                ck_assert_int_le(o->gemm_cols, HX_GEMM_COLS_MAX);
                for (int nc = 1; nc <= o->gemm_cols; nc++) {
                    enum { SS = 7 }; /* output rows wider than the tile */
                    float out[HX_GEMM_COLS_MAX * SS];
                    for (int k = 0; k < HX_GEMM_COLS_MAX * SS; k++)
                        out[k] = -777.0f;
                    o->gemm(n, nc, out, SS, x + xo, xs, y + yo, ys);
                    for (int c = 0; c < HX_GEMM_COLS_MAX; c++)
                        for (int r = 0; r < SS; r++) {
                            const float got = out[c * SS + r];
                            if (c >= nc || r >= 4) { /* outside the tile: untouched */
                                ck_assert_msg(got == -777.0f, "%s gemm at %s wrote outside its tile",
                                              hx_type_name(t), hx_cpu_simd_name(l));
                                continue;
                            }
                            float one;
                            o->vec_dot(n, &one, x + xo + r * xs, y + yo + c * ys);
                            double mag, exact, min_mag;
                            dot_scale(t, x + xo + r * xs, y + yo + c * ys, n, &mag, &exact, &min_mag);
                            ck_assert_msg(fabs((double)got - one) <= DOT_TOL * (mag + min_mag) + 1e-30,
                                          "%s gemm (%d cols) row %d col %d at %s: %.9g vs vec_dot %.9g (n %lld)",
                                          hx_type_name(t), nc, r, c, hx_cpu_simd_name(l), got, one, (long long)n);
                        }
                }
                /* an output's bits do not depend on the tile's width (the
                 * matmul relies on it: one token or a prompt, same logits) */
                float tile[HX_GEMM_COLS_MAX * 4];
                o->gemm(n, o->gemm_cols, tile, 4, x + xo, xs, y + yo, ys);
                /* a lone column reads plain rows one at a time or
                 * interleaved (hx_quant_decode_rows_alone): both ways */
                for (int mode = HX_DECODE_ROWS_ALONE; mode <= HX_DECODE_ROWS_TOGETHER; mode++) {
                    hx_quant_set_decode_rows((hx_decode_rows_mode)mode);
                    for (int c = 0; c < o->gemm_cols; c++) {
                        float col[4];
                        o->gemm(n, 1, col, 4, x + xo, xs, y + yo + c * ys, ys);
                        ck_assert_msg(!memcmp(col, tile + 4 * c, sizeof col),
                                      "%s gemm at %s: column %d alone differs (rows %s)", hx_type_name(t),
                                      hx_cpu_simd_name(l), c, mode == HX_DECODE_ROWS_ALONE ? "alone" : "together");
                    }
                }
                hx_quant_set_decode_rows(HX_DECODE_ROWS_PAYING);
            }
            free(x);
            free(y);
        }
    }
}
END_TEST

/* Where a prompt's F16 or BF16 rows meet the F32 tile converted
 * (hx_quant_ops.gemm_keep_f32), the converting tile leaves exactly the
 * converted rows and the F32 tile's bits over them, at every width up to
 * the F32 tile's, with rows whose lengths leave partial vectors. */
START_TEST(test_gemm_keep)
{
    uint64_t s = 0x4ee9;
    const hx_type types[] = {HX_TYPE_F16, HX_TYPE_BF16};
    const int64_t lens[] = {37, 64, 149, 1000};
    int kept = 0;
    for (size_t ti = 0; ti < 2; ti++)
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            const hx_type t = types[ti];
            const int64_t n = lens[li];
            const size_t xs = row_bytes(t, n) + 6, ys = 4 * (size_t)n + 8;
            uint8_t *x = alloc_bytes(4 * xs + 64), *y = alloc_bytes(HX_GEMM_COLS_MAX * ys + 64);
            float *conv = malloc(sizeof(float) * 4 * (size_t)n), *keep = malloc(sizeof(float) * 4 * (size_t)n);
            ck_assert(conv && keep);
            for (int r = 0; r < 4; r++) {
                fill_random(t, x + 2 + r * xs, n, &s);
                hx_quant_ops_get_level(t, HX_SIMD_SCALAR)->dequantize_row(x + 2 + r * xs, conv + r * n, n);
            }
            for (int c = 0; c < HX_GEMM_COLS_MAX; c++)
                for (int64_t i = 0; i < n; i++)
                    ((float *)(void *)(y + 4 + c * ys))[i] = rng_normal(&s, 1.0f);
            for (hx_simd_level l = HX_SIMD_SCALAR; l <= max_level(); l++) {
                const hx_quant_ops *o = hx_quant_ops_get_level(t, l), *f = hx_quant_ops_get_level(HX_TYPE_F32, l);
                if (!o->gemm_keep_f32)
                    continue;
                kept++;
                for (int nc = 1; nc <= f->gemm_cols; nc++) {
                    float got[HX_GEMM_COLS_MAX * 4], want[HX_GEMM_COLS_MAX * 4];
                    for (int64_t k = 0; k < 4 * n; k++)
                        keep[k] = -777.0f;
                    o->gemm_keep_f32(n, nc, got, 4, x + 2, xs, y + 4, ys, keep);
                    f->gemm(n, nc, want, 4, conv, 4 * (size_t)n, y + 4, ys);
                    ck_assert_msg(!memcmp(keep, conv, sizeof(float) * 4 * (size_t)n),
                                  "%s at %s (n %lld, %d cols): rows left other than converted", hx_type_name(t),
                                  hx_cpu_simd_name(l), (long long)n, nc);
                    ck_assert_msg(!memcmp(got, want, sizeof(float) * 4 * (size_t)nc),
                                  "%s at %s (n %lld, %d cols): not the F32 tile's bits", hx_type_name(t),
                                  hx_cpu_simd_name(l), (long long)n, nc);
                }
            }
            free(x), free(y), free(conv), free(keep);
        }
    /* F16 and BF16 at each of AVX2 and AVX-512 that the CPU runs, at every length */
    ck_assert_int_eq(kept, 2 * 4 * (int)max_level());
}
END_TEST

/* Q8_0 rows against F32 activations (hx_quant_ops.gemm_f32_act, a KV
 * cache's keys against F32 queries): at every level, every width up to
 * its own and both ways of a decode step's rows, exactly the bits of the
 * level's F32 tile over the dequantized rows; a lone row (stride 0) gives
 * four equal outputs; the last row ends where its allocation ends. */
START_TEST(test_gemm_f32_act)
{
    uint64_t s = 0xf32a;
    const int64_t lens[] = {32, 64, 128, 96, 1024};
    int levels = 0;
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        const int64_t n = lens[li];
        const size_t rb = row_bytes(HX_TYPE_Q8_0, n), xs = rb + 6, ys = 4 * (size_t)n + 8;
        uint8_t *x = malloc(3 * xs + 2 + rb), *y = alloc_bytes(HX_GEMM_COLS_MAX * ys + 64);
        float *conv = malloc(sizeof(float) * 4 * (size_t)n);
        ck_assert(x && conv);
        for (int r = 0; r < 4; r++) {
            fill_random(HX_TYPE_Q8_0, x + 2 + r * xs, n, &s);
            hx_quant_ops_get_level(HX_TYPE_Q8_0, HX_SIMD_SCALAR)->dequantize_row(x + 2 + r * xs, conv + r * n, n);
        }
        for (int c = 0; c < HX_GEMM_COLS_MAX; c++)
            for (int64_t i = 0; i < n; i++)
                ((float *)(void *)(y + 4 + c * ys))[i] = rng_normal(&s, 1.0f);
        for (hx_simd_level l = HX_SIMD_SCALAR; l <= max_level(); l++) {
            const hx_quant_ops *o = hx_quant_ops_get_level(HX_TYPE_Q8_0, l), *f = hx_quant_ops_get_level(HX_TYPE_F32, l);
            ck_assert_msg(o->gemm_f32_act && o->gemm_f32_act_cols == f->gemm_cols, "Q8_0 at %s: no F32-query tile",
                          hx_cpu_simd_name(l));
            levels += li == 0;
            for (int mode = HX_DECODE_ROWS_ALONE; mode <= HX_DECODE_ROWS_TOGETHER; mode++) {
                hx_quant_set_decode_rows((hx_decode_rows_mode)mode);
                for (int nc = 1; nc <= o->gemm_f32_act_cols; nc++) {
                    float got[HX_GEMM_COLS_MAX * 4], want[HX_GEMM_COLS_MAX * 4], lone[HX_GEMM_COLS_MAX * 4];
                    o->gemm_f32_act(n, nc, got, 4, x + 2, xs, y + 4, ys);
                    f->gemm(n, nc, want, 4, conv, 4 * (size_t)n, y + 4, ys);
                    ck_assert_msg(!memcmp(got, want, sizeof(float) * 4 * (size_t)nc),
                                  "Q8_0 x F32 at %s (n %lld, %d cols): not the F32 tile's bits (%g, %g)",
                                  hx_cpu_simd_name(l), (long long)n, nc, (double)got[0], (double)want[0]);
                    o->gemm_f32_act(n, nc, lone, 4, x + 2 + 3 * xs, 0, y + 4, ys);
                    for (int c = 0; c < nc; c++)
                        for (int r = 0; r < 4; r++)
                            ck_assert_msg(!memcmp(&lone[4 * c + r], &got[4 * c + 3], sizeof(float)),
                                          "Q8_0 x F32 at %s (n %lld): a lone row differs", hx_cpu_simd_name(l),
                                          (long long)n);
                }
            }
            hx_quant_set_decode_rows(HX_DECODE_ROWS_PAYING);
        }
        free(x), free(y), free(conv);
    }
    ck_assert_int_eq(levels, (int)max_level() + 1);
}
END_TEST

/* Rows that end exactly where their allocation ends: under AddressSanitizer
 * any read past a row (a vector load running over the last block) fails. */
START_TEST(test_row_bounds)
{
    uint64_t s = 0xb0b;
    for (size_t ti = 0; ti < N_ALL_TYPES; ti++) {
        const hx_type t = all_types[ti];
        const hx_quant_ops *ref = hx_quant_ops_get_level(t, HX_SIMD_SCALAR);
        /* whole groups of eight blocks end the row too (8, 16) */
        static const int64_t counts[] = {1, 8, 9, 16};
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
            const int64_t nb = counts[ci];
            const int64_t n = block_len(t) == 1 ? 7 * nb : nb * block_len(t);
            const size_t rb = row_bytes(t, n);
            uint8_t *tmp = alloc_bytes(4 * rb);
            fill_random(t, tmp, 4 * n, &s); /* four rows of n, contiguous */
            uint8_t *x = malloc(4 * rb);
            ck_assert_ptr_nonnull(x);
            memcpy(x, tmp, 4 * rb);
            float *out = malloc(sizeof(float) * (size_t)n);
            ck_assert_ptr_nonnull(out);
            uint8_t *y = NULL;
            if (ref->vec_dot) {
                uint8_t *a = make_activation(ref->vec_dot_type, n, &s, 0);
                const size_t ab = row_bytes(ref->vec_dot_type, n);
                y = malloc(ab);
                ck_assert_ptr_nonnull(y);
                memcpy(y, a, ab);
                free(a);
            }
            for (hx_simd_level l = HX_SIMD_SCALAR; l <= max_level(); l++) {
                const hx_quant_ops *o = hx_quant_ops_get_level(t, l);
                o->dequantize_row(x + 3 * rb, out, n);
                if (o->vec_dot) {
                    float d, d4[4];
                    o->vec_dot(n, &d, x + 3 * rb, y);
                    o->vec_dot4(n, d4, x, rb, y);
                    ck_assert(isfinite(d) && isfinite(d4[3]));
                }
            }
            free(tmp);
            free(x);
            free(y);
            free(out);
        }
    }
}
END_TEST

/* ---- quantizers --------------------------------------------------------- */

/* Bounds of one block's error, from what the block stores. */
static double block_bound(hx_type t, const uint8_t *b, const float *x, int e)
{
    float amax = 0;
    const int bl = (int)block_len(t);
    for (int i = 0; i < bl; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    const double d = fabs(hx_fp16_to_fp32(get16(b)));
    switch (t) {
    case HX_TYPE_F16: /* half an ulp: 2^-11 relative, 2^-25 absolute below 2^-14 */
        return fmax(fabs(x[0]) * 0x1p-11, 0x1p-25);
    case HX_TYPE_BF16:
        return fabs(x[0]) * 0x1p-8;
    case HX_TYPE_Q8_0:
    case HX_TYPE_Q8_1: /* half a step of amax/127, plus the f16 rounding of d times 127 */
        return amax / 127.0 * (0.5 + 127 * 0x1p-11) * 1.0001;
    case HX_TYPE_Q8_K: /* d kept in f32 */
        return amax / 127.0 * 0.5 * 1.0001;
    case HX_TYPE_Q4_0: /* |d| = amax/8; the top end clamps to q=15: one whole step */
    case HX_TYPE_Q5_0: /* |d| = amax/16; likewise at q=31 */
        return (t == HX_TYPE_Q4_0 ? amax / 8.0 : amax / 16.0) * (1 + 16 * 0x1p-11) * 1.0001;
    case HX_TYPE_Q4_1:
    case HX_TYPE_Q5_1: { /* half a step, plus f16 rounding of d (x15/31) and of the min */
        const double m = fabs(hx_fp16_to_fp32(get16(b + 2)));
        const double q = t == HX_TYPE_Q4_1 ? 15 : 31;
        return d * (0.5 + q * 0x1p-11) * 1.0001 + m * 0x1p-11;
    }
    case HX_TYPE_Q4_K:
    case HX_TYPE_Q5_K: {
        /* one step of the sub-block's scale (half for rounding, and the
         * least-squares grid may leave the extremes up to half a step
         * outside, clamped), plus what 6-bit scales and mins lose: a scale
         * may be 1/126 of the largest off, which stretches the grid by
         * nmax/126 steps at most, and a min 1/126 of the largest min */
        const double dmin = fabs(hx_fp16_to_fp32(get16(b + 2)));
        uint8_t sc, m;
        hx_quant_k4_scale_min(b + 4, e / 32, &sc, &m);
        const double nmax = t == HX_TYPE_Q4_K ? 15 : 31;
        return d * sc + d * 63 * nmax / 126 + dmin * 63 / 126 + 1e-6 * amax;
    }
    case HX_TYPE_Q6_K: {
        const double d6 = fabs(hx_fp16_to_fp32(get16(b + 208)));
        const int sc = abs((int8_t)b[192 + e / 16]);
        /* half a step, plus the clamp at +31 (one step) and the 8-bit
         * rounding of the sub-block scale (half of d over 32 steps) */
        return d6 * sc * 1.0 + d6 * 16.5 + 1e-6 * amax;
    }
    case HX_TYPE_Q2_K: {
        /* a step and a half of the sub-block's scale (rounding, and the
         * absolute-error fit may leave extremes outside, clamped), plus
         * what 4-bit scales and mins lose (half a step of each, stretched
         * over the three steps of the quants) */
        const uint8_t sc = b[e / 16];
        const double d2 = fabs(hx_fp16_to_fp32(get16(b + 80))), m2 = fabs(hx_fp16_to_fp32(get16(b + 82)));
        return 1.5 * d2 * (sc & 15) + 1.5 * d2 + 0.5 * m2 + 1e-6 * amax;
    }
    case HX_TYPE_Q3_K: {
        /* a step and a half of the sub-block's scale (the clamp at +3),
         * plus half a step of the 6-bit scale over four quant steps */
        int8_t sc[16];
        for (int s = 0; s < 16; s++) {
            const int lo = s < 8 ? b[96 + s] & 15 : b[96 + s - 8] >> 4;
            sc[s] = (int8_t)((lo | (((b[104 + s % 4] >> (2 * (s / 4))) & 3) << 4)) - 32);
        }
        const double d3 = fabs(hx_fp16_to_fp32(get16(b + 108)));
        return 1.5 * d3 * abs(sc[e / 16]) + 2 * d3 + 1e-6 * amax;
    }
    case HX_TYPE_IQ4_NL: /* half the widest gap between the 16 values (24), plus the top's clamp */
        return 24 * d + 1e-6 * amax;
    case HX_TYPE_IQ4_XS: {
        const int s = e / 32;
        const int ls = ((b[4 + s / 2] >> (4 * (s % 2))) & 15) | (((get16(b + 2) >> (2 * s)) & 3) << 4);
        return 24 * d * abs(ls - 32) + 64 * d + 1e-6 * amax;
    }
    default:
        return 0;
    }
}

START_TEST(test_quantize_roundtrip)
{
    /* RMS error over RMS value on normal data: limits 1.25x what these
     * quantizers (ggml's reference algorithms) give on it: f16 0.00021,
     * bf16 0.0016, q8_0/q8_1 0.0051, q4_0 0.083, q4_1 0.077, q5_0 0.040,
     * q5_1 0.037, q4_K 0.070, q5_K 0.035, q6_K 0.017, q8_K 0.0063, q2_K 0.292,
     * q3_K 0.146, iq4_nl 0.074, iq4_xs 0.075 */
    const struct {
        hx_type t;
        double rms;
    } types[] = {{HX_TYPE_F16, 0.00027}, {HX_TYPE_BF16, 0.002}, {HX_TYPE_Q8_0, 0.0064}, {HX_TYPE_Q8_1, 0.0064},
                 {HX_TYPE_Q4_0, 0.104},  {HX_TYPE_Q4_1, 0.096}, {HX_TYPE_Q5_0, 0.050},  {HX_TYPE_Q5_1, 0.046},
                 {HX_TYPE_Q4_K, 0.087},  {HX_TYPE_Q5_K, 0.043}, {HX_TYPE_Q6_K, 0.021},  {HX_TYPE_Q8_K, 0.0079},
                 {HX_TYPE_Q2_K, 0.365},  {HX_TYPE_Q3_K, 0.182}, {HX_TYPE_IQ4_NL, 0.093}, {HX_TYPE_IQ4_XS, 0.094}};
    const int64_t n = 17 * 256;
    uint64_t s = 0x9e37;
    float *x = malloc(4 * (size_t)n), *y = malloc(4 * (size_t)n);
    ck_assert(x && y);
    for (int dist = 0; dist < 3; dist++) {
        /* normal; normal with outliers; positive-skewed (mins matter) */
        for (int64_t i = 0; i < n; i++) {
            x[i] = rng_normal(&s, 0.02f);
            if (dist == 1 && i % 61 == 0)
                x[i] *= 12;
            if (dist == 2)
                x[i] = fabsf(x[i]) + 0.01f;
        }
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
            const hx_type t = types[ti].t;
            const hx_quant_ops *ref = hx_quant_ops_get_level(t, HX_SIMD_SCALAR);
            const size_t B = hx_type_get(t)->type_size, bl = (size_t)block_len(t);
            uint8_t *q = alloc_bytes(row_bytes(t, n) + 64), *q2 = alloc_bytes(row_bytes(t, n) + 64);
            ref->quantize_row(x, q + 1, n);
            for (hx_simd_level l = HX_SIMD_AVX2; l <= max_level(); l++) {
                hx_quant_ops_get_level(t, l)->quantize_row(x, q2, n);
                ck_assert_msg(memcmp(q + 1, q2, row_bytes(t, n)) == 0, "%s quantize at %s differs",
                              hx_type_name(t), hx_cpu_simd_name(l));
            }
            ref->dequantize_row(q + 1, y, n);
            double se = 0, sx = 0, worst = 0;
            for (int64_t i = 0; i < n; i++) {
                const int64_t b = i / (int64_t)bl;
                const double err = fabs((double)y[i] - x[i]);
                const double bound = block_bound(t, q + 1 + b * B, x + b * bl + (bl == 1 ? 0 : 0), (int)(i % (int64_t)bl));
                ck_assert_msg(err <= bound, "%s (data %d) element %lld: %g -> %g, error %g > bound %g",
                              hx_type_name(t), dist, (long long)i, x[i], y[i], err, bound);
                se += err * err;
                sx += (double)x[i] * x[i];
                worst = fmax(worst, err / bound);
            }
            if (getenv("HX_QUANT_VERBOSE"))
                fprintf(stderr, "%s data %d: relative RMS error %.5f, worst error/bound %.3f\n", hx_type_name(t), dist,
                        sqrt(se / sx), worst);
            if (dist == 0)
                ck_assert_msg(sqrt(se / sx) <= types[ti].rms, "%s: relative RMS error %.4f > %.4f", hx_type_name(t),
                              sqrt(se / sx), types[ti].rms);
            free(q);
            free(q2);
        }
    }
    /* all-zero blocks quantize to zeros and back */
    memset(x, 0, 4 * 512);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const hx_quant_ops *ref = hx_quant_ops_get_level(types[ti].t, HX_SIMD_SCALAR);
        uint8_t *q = alloc_bytes(row_bytes(types[ti].t, 512));
        ref->quantize_row(x, q, 512);
        ref->dequantize_row(q, y, 512);
        for (int i = 0; i < 512; i++)
            ck_assert_msg(y[i] == 0, "%s: zero row gives %g", hx_type_name(types[ti].t), y[i]);
        free(q);
    }
    free(x);
    free(y);
}
END_TEST

/* Rounding of the 8-bit quantizers at halves, by hand: Q8_0/Q8_1 round
 * half away from zero (roundf, as ggml), Q8_K half to even, and Q8_K's
 * scale comes from the first element of largest magnitude, with its sign. */
START_TEST(test_quantize_ties)
{
    float x[256] = {0};
    const float v[10] = {127.0f, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 126.5f, 0.49999997f, -126.5f, 3.4999998f};
    const int8_t want0[10] = {127, 1, -1, 2, 3, -3, 127, 0, -127, 3};
    memcpy(x, v, sizeof v); /* amax 127: d = 1, the quants are the values rounded */
    for (hx_simd_level l = HX_SIMD_SCALAR; l <= max_level(); l++) {
        uint8_t q[sizeof(hx_block_q8_1) * 8];
        hx_quant_ops_get_level(HX_TYPE_Q8_0, l)->quantize_row(x, q, 32);
        ck_assert_uint_eq(get16(q), 0x3c00);
        for (int j = 0; j < 10; j++)
            ck_assert_msg((int8_t)q[2 + j] == want0[j], "q8_0 at %s: %g -> %d, want %d", hx_cpu_simd_name(l), v[j],
                          (int8_t)q[2 + j], want0[j]);
        hx_quant_ops_get_level(HX_TYPE_Q8_1, l)->quantize_row(x, q, 32);
        ck_assert_uint_eq(get16(q + 2), hx_fp32_to_fp16(127 + 1 - 1 + 2 + 3 - 3 + 127 + 0 - 127 + 3)); /* s = d*sum */
        for (int j = 0; j < 10; j++)
            ck_assert_int_eq((int8_t)q[4 + j], want0[j]);
    }
    /* Q8_K: max -127 first, so iscale = 1 and d = 1 */
    const float k[8] = {-127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 126.5f, 127.0f};
    const int8_t wantk[8] = {-127, 0, 2, 2, 0, -2, 126, 127};
    memset(x, 0, sizeof x);
    memcpy(x, k, sizeof k);
    x[200] = -3.5f; /* group 12: -4 */
    for (hx_simd_level l = HX_SIMD_SCALAR; l <= max_level(); l++) {
        uint8_t q[sizeof(hx_block_q8_K)];
        hx_quant_ops_get_level(HX_TYPE_Q8_K, l)->quantize_row(x, q, 256);
        float d;
        memcpy(&d, q, 4);
        ck_assert_float_eq(d, 1.0f);
        for (int j = 0; j < 8; j++)
            ck_assert_msg((int8_t)q[4 + j] == wantk[j], "q8_K at %s: %g -> %d, want %d", hx_cpu_simd_name(l), k[j],
                          (int8_t)q[4 + j], wantk[j]);
        ck_assert_int_eq((int8_t)q[4 + 200], -4);
        ck_assert_int_eq((int16_t)get16(q + 260), -127 + 0 + 2 + 2 + 0 - 2 + 126 + 127);
        ck_assert_int_eq((int16_t)get16(q + 260 + 2 * 12), -4);
    }
    /* a tie of magnitudes: the first (+50) sets the sign, so d < 0 */
    memset(x, 0, sizeof x);
    x[3] = 50.0f;
    x[10] = -50.0f;
    for (hx_simd_level l = HX_SIMD_SCALAR; l <= max_level(); l++) {
        uint8_t q[sizeof(hx_block_q8_K)];
        hx_quant_ops_get_level(HX_TYPE_Q8_K, l)->quantize_row(x, q, 256);
        float d;
        memcpy(&d, q, 4);
        ck_assert(d < 0);
        ck_assert_int_eq((int8_t)q[4 + 3], -127);
        ck_assert_int_eq((int8_t)q[4 + 10], 127);
    }
}
END_TEST

/* Q8_K's block sums are the sums of its quants; Q8_1's s is d*sum(q). */
START_TEST(test_activation_sums)
{
    uint64_t s = 0xabc;
    const int64_t n = 3 * 256;
    float x[3 * 256];
    for (int64_t i = 0; i < n; i++)
        x[i] = rng_normal(&s, 3.0f);
    uint8_t k[3 * sizeof(hx_block_q8_K)], o[24 * sizeof(hx_block_q8_1)];
    hx_quant_ops_get(HX_TYPE_Q8_K)->quantize_row(x, k, n);
    for (int b = 0; b < 3; b++) {
        const uint8_t *p = k + b * sizeof(hx_block_q8_K);
        for (int g = 0; g < 16; g++) {
            int sum = 0;
            for (int l = 0; l < 16; l++)
                sum += (int8_t)p[4 + 16 * g + l];
            ck_assert_int_eq((int16_t)get16(p + 260 + 2 * g), sum);
        }
    }
    hx_quant_ops_get(HX_TYPE_Q8_1)->quantize_row(x, o, n);
    for (int b = 0; b < 24; b++) {
        const uint8_t *p = o + b * sizeof(hx_block_q8_1);
        int sum = 0;
        float amax = 0;
        for (int l = 0; l < 32; l++) {
            sum += (int8_t)p[4 + l];
            amax = fmaxf(amax, fabsf(x[32 * b + l]));
        }
        /* s is made from d before d is rounded to f16 */
        ck_assert_uint_eq(get16(p + 2), hx_fp32_to_fp16((float)sum * (amax / 127.0f)));
    }
}
END_TEST

/* ---- the KV cache's quantizer ------------------------------------------ */

/* The sum over n elements of (x - q)^2, times x^2 with `by_square`. */
static double kv_fit_error(const float *x, const float *q, int n, int by_square)
{
    double e = 0;
    for (int i = 0; i < n; i++)
        e += (by_square ? (double)x[i] * x[i] : 1.0) * ((double)x[i] - q[i]) * ((double)x[i] - q[i]);
    return e;
}

/* hx_quant_kv_quantizer: Q4_0 and Q8_0 keys and values take their fits
 * (Q8_0 one for both),
 * whose blocks are the same bytes at every level (edge blocks included),
 * and lower the error each is fitted for below the reference quantizer's;
 * every other type keeps its quantize_row. */
START_TEST(test_kv_quantizer)
{
    enum { BLOCKS = 400, N = 32 * BLOCKS, EDGE = 6 * 32, MAXB = 34 };
    float *x = malloc(sizeof(float) * N), *q = malloc(sizeof(float) * N);
    uint8_t *want = malloc(MAXB * BLOCKS), *got = malloc(MAXB * BLOCKS);
    unsigned seed = 77;
    for (int b = 0; b < BLOCKS; b++) { /* scales from 1e-3 to 1e3, a Gaussian-like sum of uniforms */
        const float scale = powf(10.0f, (float)(b % 7) - 3.0f);
        for (int i = 0; i < 32; i++)
            x[32 * b + i] = scale * (hx_ref_uniform(&seed) + hx_ref_uniform(&seed) + hx_ref_uniform(&seed));
    }
    memset(x, 0, 32 * sizeof(float)); /* a block of zeros */
    for (int i = 0; i < 32; i++) {
        x[32 + i] = 0.25f;                             /* all equal */
        x[64 + i] = (float)(i % 16) - 8.0f;            /* Q4_0's quants themselves */
        x[96 + i] = i == 5 ? -1e4f : 1e-3f * (float)i; /* one outlier */
        x[128 + i] = 0.5f * (float)(i - 16);           /* ties at every step */
        x[160 + i] = (float)(8 * i - 127);             /* Q8_0's quants themselves */
    }
    const struct {
        hx_type type;
        size_t bytes;
        int exact;      /* the edge block its blocks store exactly */
        int key_square; /* keys are fitted weighing each element by its square */
    } types[] = {{HX_TYPE_Q4_0, 18, 64, 1}, {HX_TYPE_Q8_0, 34, 160, 0}};
    const hx_simd_level saved = hx_quant_level();
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (int values = 0; values < 2; values++) {
            const size_t B = types[t].bytes;
            const char *name = hx_type_name(types[t].type), *part = values ? "values" : "keys";
            HX_ASSERT_OK(hx_quant_set_level(HX_SIMD_SCALAR));
            hx_quant_kv_quantizer(types[t].type, values)(x, want, N);
            for (hx_simd_level l = HX_SIMD_SCALAR; l <= max_level(); l++) {
                HX_ASSERT_OK(hx_quant_set_level(l));
                const hx_quantize_row_fn f = hx_quant_kv_quantizer(types[t].type, values);
                ck_assert_ptr_nonnull(f);
                ck_assert_ptr_ne(f, hx_quant_ops_get(types[t].type)->quantize_row);
                memset(got, 0xa5, B * BLOCKS);
                f(x, got, N);
                for (int b = 0; b < BLOCKS; b++)
                    ck_assert_msg(!memcmp(got + B * b, want + B * b, B), "%s %s at %s: block %d differs from scalar",
                                  name, part, hx_cpu_simd_name(l), b);
                ck_assert_ptr_eq(hx_quant_kv_quantizer(HX_TYPE_F16, values), hx_quant_ops_get(HX_TYPE_F16)->quantize_row);
                if (!types[t].key_square) /* one fit for keys and values */
                    ck_assert_ptr_eq(f, hx_quant_kv_quantizer(types[t].type, !values));
            }
            /* the error each fit is for, over the random blocks, against the reference's */
            const hx_quant_ops *o = hx_quant_ops_get_level(types[t].type, HX_SIMD_SCALAR);
            o->dequantize_row(want, q, N);
            const int by_square = !values && types[t].key_square;
            const double fitted = kv_fit_error(x + EDGE, q + EDGE, N - EDGE, by_square);
            o->quantize_row(x, got, N);
            o->dequantize_row(got, q, N);
            const double reference = kv_fit_error(x + EDGE, q + EDGE, N - EDGE, by_square);
            ck_assert_msg(fitted < 0.97 * reference, "%s %s: fitted error %g, the reference's %g", name, part, fitted,
                          reference);
            o->dequantize_row(want, q, EDGE); /* the edge blocks decode to what they should */
            const int e = types[t].exact;
            for (int i = 0; i < 32; i++) {
                ck_assert_float_eq(q[i], 0.0f);
                /* Q8_0's scale 0.25/127 (or the fit's) is not exact in f16 */
                const float tol = types[t].type == HX_TYPE_Q8_0 ? 0.25f / 1024 : 0.0f;
                ck_assert_msg(fabsf(q[32 + i] - 0.25f) <= tol, "%s %s: all-equal block decodes to %g", name, part,
                              q[32 + i]);
                ck_assert_float_eq(q[e + i], x[e + i]);
            }
            for (int i = 0; i < EDGE; i++) /* Q8_0 stores no quant of -128 (the int8 dot products' sign steps) */
                if (types[t].type == HX_TYPE_Q8_0)
                    ck_assert_int_ne((int8_t)want[i / 32 * B + 2 + i % 32], -128);
        }
    HX_ASSERT_OK(hx_quant_set_level(saved));
    free(x);
    free(q);
    free(want);
    free(got);
}
END_TEST

/* ---- dispatch ----------------------------------------------------------- */

START_TEST(test_dispatch)
{
    const hx_simd_level top = max_level(), saved = hx_quant_level();
    const uint32_t f = hx_cpu_features();
    if (top >= HX_SIMD_AVX2)
        ck_assert((f & (HX_CPU_AVX2 | HX_CPU_FMA | HX_CPU_F16C | HX_CPU_OS_YMM)) ==
                  (HX_CPU_AVX2 | HX_CPU_FMA | HX_CPU_F16C | HX_CPU_OS_YMM));
    if (top >= HX_SIMD_AVX512)
        ck_assert((f & (HX_CPU_AVX512F | HX_CPU_AVX512BW | HX_CPU_AVX512VL | HX_CPU_AVX512VNNI | HX_CPU_OS_ZMM)) ==
                  (HX_CPU_AVX512F | HX_CPU_AVX512BW | HX_CPU_AVX512VL | HX_CPU_AVX512VNNI | HX_CPU_OS_ZMM));
    for (hx_simd_level l = HX_SIMD_SCALAR; l <= top; l++) {
        HX_ASSERT_OK(hx_quant_set_level(l));
        ck_assert_int_eq(hx_quant_level(), l);
        for (size_t ti = 0; ti < N_ALL_TYPES; ti++) {
            const hx_quant_ops *o = hx_quant_ops_get(all_types[ti]);
            ck_assert_ptr_nonnull(o);
            ck_assert_int_eq(o->level, l);
            ck_assert_int_eq(o->type, all_types[ti]);
            ck_assert_ptr_nonnull(o->dequantize_row);
            ck_assert_ptr_nonnull(o->quantize_row);
            ck_assert((o->vec_dot == NULL) == (o->vec_dot4 == NULL));
        }
        hx_simd_level back;
        ck_assert(hx_cpu_simd_from_name(hx_cpu_simd_name(l), &back) && back == l);
    }
    if (top < HX_SIMD_AVX512) {
        ck_assert_int_eq(hx_quant_set_level(HX_SIMD_AVX512), HX_ERR_UNSUPPORTED);
        ck_assert_ptr_null(hx_quant_ops_get_level(HX_TYPE_Q4_0, HX_SIMD_AVX512));
    }
    ck_assert_int_eq(hx_quant_set_level((hx_simd_level)7), HX_ERR_INVALID_ARG);
    HX_ASSERT_OK(hx_quant_set_level(saved));
    /* the type table calls computable exactly the types with dot-product
     * kernels: the model checks its tensors against the table alone
     * (hx_type_row_check), the kernels against their own (hx_quant_row_check) */
    for (uint32_t t = 0; t < HX_TYPE_COUNT; t++) {
        const hx_type_traits *tr = hx_type_get(t);
        const hx_quant_ops *o = hx_quant_ops_get((hx_type)t);
        if (tr && tr->computable)
            ck_assert_msg(o && o->vec_dot, "%s is computable but has no kernels", tr->name);
        else
            ck_assert_msg(!o || !o->vec_dot, "type %u has kernels but is not computable", t);
        if (tr && tr->computable)
            ck_assert_int_eq(hx_type_row_check((hx_type)t, tr->block_size * 4), HX_OK);
        else
            ck_assert_int_ne(hx_type_row_check((hx_type)t, tr ? tr->block_size * 4 : 256), HX_OK);
    }
    ck_assert_int_eq(hx_type_row_check(HX_TYPE_Q4_K, 100), HX_ERR_INVALID_ARG);
    ck_assert(strstr(hx_last_error(), "q4_K") != NULL);
    ck_assert_int_eq(hx_type_row_check(HX_TYPE_IQ2_XXS, 256), HX_ERR_UNSUPPORTED);
    ck_assert(strstr(hx_last_error(), "iq2_xxs") != NULL);
    ck_assert_ptr_null(hx_quant_ops_get(HX_TYPE_IQ2_XXS));
    ck_assert_ptr_null(hx_quant_ops_get((hx_type)5));
    ck_assert_ptr_null(hx_quant_ops_get((hx_type)999));
    ck_assert_int_eq(hx_quant_ops_get(HX_TYPE_Q4_1)->vec_dot_type, HX_TYPE_Q8_1);
    ck_assert_int_eq(hx_quant_ops_get(HX_TYPE_Q6_K)->vec_dot_type, HX_TYPE_Q8_K);
    ck_assert_int_eq(hx_quant_ops_get(HX_TYPE_F16)->vec_dot_type, HX_TYPE_F32);
    HX_ASSERT_OK(hx_quant_row_check(HX_TYPE_Q4_K, 512));
    HX_ASSERT_OK(hx_quant_row_check(HX_TYPE_F16, 3));
    ck_assert_int_eq(hx_quant_row_check(HX_TYPE_Q4_K, 100), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_quant_row_check(HX_TYPE_Q8_0, 0), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_quant_row_check(HX_TYPE_IQ2_XXS, 256), HX_ERR_UNSUPPORTED);
    ck_assert_int_eq(hx_quant_ops_get(HX_TYPE_Q2_K)->vec_dot_type, HX_TYPE_Q8_K);
    ck_assert_int_eq(hx_quant_ops_get(HX_TYPE_IQ4_NL)->vec_dot_type, HX_TYPE_Q8_0);
    ck_assert_int_eq(hx_quant_row_check((hx_type)4, 32), HX_ERR_INVALID_ARG);
    ck_assert(strstr(hx_last_error(), "4") != NULL);
}
END_TEST

/* ---- gguf-py as an independent reference -------------------------------- */

static int have_gguf_py(void)
{
    return system("python3 -c 'import gguf, numpy' >/dev/null 2>&1") == 0;
}

static void write_file(const char *dir, const char *name, const void *p, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(p, 1, n, f), n);
    fclose(f);
}

START_TEST(test_gguf_py_reference)
{
    if (!have_gguf_py()) {
        fprintf(stderr, "quant: python3 with gguf and numpy not found; skipped the gguf-py cross-check\n");
        return;
    }
    char dir[] = "/tmp/hx-quant-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    uint64_t s = 0x5eed;
    const int64_t n = 32 * 256;
    float *x = malloc(4 * (size_t)n), *y = malloc(4 * (size_t)n);
    ck_assert(x && y);
    for (int64_t i = 0; i < n; i++)
        x[i] = rng_normal(&s, 0.05f) + (i % 53 == 0 ? 0.3f : 0.0f);
    write_file(dir, "input.f32", x, 4 * (size_t)n);
    static const hx_type ts[] = {HX_TYPE_F16,  HX_TYPE_BF16, HX_TYPE_Q4_0, HX_TYPE_Q4_1, HX_TYPE_Q5_0,
                                 HX_TYPE_Q5_1, HX_TYPE_Q8_0, HX_TYPE_Q4_K, HX_TYPE_Q5_K, HX_TYPE_Q6_K,
                                 HX_TYPE_Q2_K, HX_TYPE_Q3_K, HX_TYPE_IQ4_NL, HX_TYPE_IQ4_XS};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        const hx_quant_ops *o = hx_quant_ops_get(ts[i]);
        const size_t bytes = row_bytes(ts[i], n);
        uint8_t *q = alloc_bytes(bytes);
        char name[64];
        /* our quantization of the input, and its dequantization */
        o->quantize_row(x, q, n);
        snprintf(name, sizeof name, "%s.quant", hx_type_name(ts[i]));
        write_file(dir, name, q, bytes);
        /* random blocks (finite scales) and their dequantization */
        fill_random(ts[i], q, n, &s);
        o->dequantize_row(q, y, n);
        snprintf(name, sizeof name, "%s.blocks", hx_type_name(ts[i]));
        write_file(dir, name, q, bytes);
        snprintf(name, sizeof name, "%s.deq", hx_type_name(ts[i]));
        write_file(dir, name, y, 4 * (size_t)n);
        free(q);
    }
    free(x);
    free(y);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "python3 tests/quant_ref.py %s 1>&2", dir);
    const int rc = system(cmd);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_msg(rc == 0, "tests/quant_ref.py disagrees with hetero (see its output)");
}
END_TEST

/* hx_quant_ops.gemm_f32_block (F32, F16, BF16 and Q8_0 rows against F32
 * columns, at AVX2 and AVX-512; none at the scalar level): every output
 * has the bits of the tile the type meets F32 columns with (gemm, or
 * gemm_f32_act for Q8_0) for that row and column alone, over blocks whose
 * rows and columns leave partial tiles; nothing outside the block's
 * outputs is written. */
START_TEST(test_gemm_f32_blocks)
{
    const hx_simd_level saved = hx_quant_level();
    uint64_t seed = 0xb10c5;
    enum { MAXR = 18, MAXC = 8, SS = 19 };
    const hx_type types[] = {HX_TYPE_F32, HX_TYPE_F16, HX_TYPE_BF16, HX_TYPE_Q8_0};
    const int64_t lens[] = {64, 128, 40};
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++)
        for (size_t k = 0; k < sizeof lens / sizeof *lens; k++) {
            const hx_type t = types[ti];
            const int64_t n = lens[k];
            if (t == HX_TYPE_Q8_0 && n % 32)
                continue;
            const size_t rb = hx_type_row_size(t, (uint64_t)n), xs = rb + 6, ys = (size_t)(n + 5) * sizeof(float);
            uint8_t *x = calloc(MAXR, xs);
            float *y = malloc(MAXC * ys), *row = malloc((size_t)n * sizeof(float));
            ck_assert_ptr_nonnull(x);
            ck_assert_ptr_nonnull(y);
            ck_assert_ptr_nonnull(row);
            for (int r = 0; r < MAXR; r++) {
                for (int64_t i = 0; i < n; i++)
                    row[i] = rng_normal(&seed, 1.0f);
                hx_quant_ops_get_level(t, HX_SIMD_SCALAR)->quantize_row(row, x + (size_t)r * xs, n);
            }
            for (size_t i = 0; i < MAXC * ys / sizeof(float); i++)
                y[i] = rng_normal(&seed, 1.0f);
            for (hx_simd_level l = HX_SIMD_SCALAR; l <= max_level(); l++) {
                HX_ASSERT_OK(hx_quant_set_level(l));
                const hx_quant_ops *o = hx_quant_ops_get_level(t, l);
                if (l == HX_SIMD_SCALAR) {
                    ck_assert_msg(!o->gemm_f32_block, "%s: a block at the scalar level", hx_type_name(t));
                    continue;
                }
                ck_assert_msg(o->gemm_f32_block, "%s at %s: no block", hx_type_name(t), hx_cpu_simd_name(l));
                const hx_gemm_fn tile = o->gemm_f32_act ? o->gemm_f32_act : o->gemm;
                for (int64_t rows = 1; rows <= MAXR; rows += 3)
                    for (int64_t cols = 1; cols <= MAXC; cols++) {
                        float out[MAXC * SS];
                        for (int i = 0; i < MAXC * SS; i++)
                            out[i] = -777.0f;
                        o->gemm_f32_block(n, rows, cols, out, SS, x, xs, y, ys);
                        for (int64_t c = 0; c < MAXC; c++)
                            for (int64_t r = 0; r < SS; r++) {
                                const float got = out[c * SS + r];
                                if (c >= cols || r >= rows) {
                                    ck_assert_msg(got == -777.0f, "%s at %s: block %lldx%lld wrote outside it",
                                                  hx_type_name(t), hx_cpu_simd_name(l), (long long)rows,
                                                  (long long)cols);
                                    continue;
                                }
                                float one[4];
                                tile(n, 1, one, 4, x + (size_t)r * xs, 0, (const uint8_t *)y + (size_t)c * ys, ys);
                                ck_assert_msg(!memcmp(&got, &one[0], sizeof got),
                                              "%s at %s, n %lld, block %lldx%lld, row %lld col %lld: %.9g, the "
                                              "tile's %.9g",
                                              hx_type_name(t), hx_cpu_simd_name(l), (long long)n, (long long)rows,
                                              (long long)cols, (long long)r, (long long)c, got, one[0]);
                            }
                    }
            }
            free(x);
            free(y);
            free(row);
        }
    HX_ASSERT_OK(hx_quant_set_level(saved));
}
END_TEST

/* hx_quant_gemm_f32_block: at each level, every output has the bits of
 * the level's F32 gemm tile for that row and column alone, over blocks
 * whose rows and columns leave partial tiles and lengths with partial
 * vectors; nothing outside the block's outputs is written. */
START_TEST(test_gemm_f32_block)
{
    const hx_simd_level saved = hx_quant_level();
    uint64_t seed = 0xb10c;
    enum { MAXR = 11, MAXC = 14, SS = 13 };
    const int64_t lens[] = {8, 37, 64, 128};
    for (size_t k = 0; k < sizeof lens / sizeof *lens; k++) {
        const int64_t n = lens[k];
        const size_t xs = (size_t)(n + 3) * sizeof(float), ys = (size_t)(n + 5) * sizeof(float);
        float *x = malloc(MAXR * xs), *y = malloc(MAXC * ys);
        ck_assert_ptr_nonnull(x);
        ck_assert_ptr_nonnull(y);
        for (size_t i = 0; i < MAXR * xs / sizeof(float); i++)
            x[i] = rng_normal(&seed, 1.0f);
        for (size_t i = 0; i < MAXC * ys / sizeof(float); i++)
            y[i] = rng_normal(&seed, 1.0f);
        for (hx_simd_level l = HX_SIMD_SCALAR; l <= max_level(); l++) {
            HX_ASSERT_OK(hx_quant_set_level(l));
            const hx_quant_ops *o = hx_quant_ops_get_level(HX_TYPE_F32, l);
            for (int64_t rows = 1; rows <= MAXR; rows += 3)
                for (int64_t cols = 1; cols <= MAXC; cols += 4) {
                    float out[MAXC * SS];
                    for (int i = 0; i < MAXC * SS; i++)
                        out[i] = -777.0f;
                    hx_quant_gemm_f32_block(n, rows, cols, out, SS, x, xs, y, ys);
                    for (int64_t c = 0; c < MAXC; c++)
                        for (int64_t r = 0; r < SS; r++) {
                            const float got = out[c * SS + r];
                            if (c >= cols || r >= rows) {
                                ck_assert_msg(got == -777.0f, "%s: block %lldx%lld wrote outside it",
                                              hx_cpu_simd_name(l), (long long)rows, (long long)cols);
                                continue;
                            }
                            float one[4];
                            o->gemm(n, 1, one, 4, (const uint8_t *)x + (size_t)r * xs, 0,
                                    (const uint8_t *)y + (size_t)c * ys, ys);
                            ck_assert_msg(!memcmp(&got, &one[0], sizeof got),
                                          "%s, n %lld, block %lldx%lld, row %lld col %lld: %.9g, the tile's %.9g",
                                          hx_cpu_simd_name(l), (long long)n, (long long)rows, (long long)cols,
                                          (long long)r, (long long)c, got, one[0]);
                        }
                }
        }
        free(x);
        free(y);
    }
    HX_ASSERT_OK(hx_quant_set_level(saved));
}
END_TEST

/* Attention's value sum: each level gives the plain loop's bits (a
 * multiply, then an add, row after row), one row or several, at lengths
 * with and without a partial vector and past the register slices; over
 * F16 rows the bits of the F32 sum over their values. */
START_TEST(test_add_scaled)
{
    const hx_simd_level saved = hx_quant_level();
    uint64_t seed = 77;
    enum { MAXN = 160, MAXR = 5, STRIDE = 163 };
    const int64_t lens[] = {1, 7, 8, 15, 16, 17, 33, 64, 100, 128, 160};
    static float x[MAXR * STRIDE];
    static hx_half xh[MAXR * STRIDE];
    for (size_t k = 0; k < sizeof lens / sizeof *lens; k++)
        for (int64_t rows = 1; rows <= MAXR; rows += 2) {
            const int64_t n = lens[k];
            float start[MAXN + 1], want[MAXN], got[MAXN + 1], w[MAXR];
            for (int64_t i = 0; i < n; i++)
                start[i] = rng_normal(&seed, 3.0f);
            /* F16 rows too, the F32 ones their exact values: the F16 sum
             * must give the same bits */
            for (int64_t r = 0; r < rows; r++) {
                w[r] = rng_normal(&seed, 1.0f);
                for (int64_t i = 0; i < n; i++) {
                    xh[r * STRIDE + i] = hx_fp32_to_fp16(rng_normal(&seed, 2.0f));
                    x[r * STRIDE + i] = hx_fp16_to_fp32(xh[r * STRIDE + i]);
                }
            }
            for (int64_t i = 0; i < n; i++) {
                want[i] = start[i];
                for (int64_t r = 0; r < rows; r++) {
                    volatile float prod = w[r] * x[r * STRIDE + i]; /* rounded on its own, as the kernels do */
                    want[i] = want[i] + prod;
                }
            }
            for (hx_simd_level l = HX_SIMD_SCALAR; l <= max_level(); l++) {
                HX_ASSERT_OK(hx_quant_set_level(l));
                memcpy(got, start, sizeof(float) * (size_t)n);
                got[n] = 12345.0f; /* past the end: must stay */
                hx_quant_add_scaled_rows(got, x, STRIDE, w, rows, n);
                for (int64_t i = 0; i < n; i++)
                    ck_assert_msg(!memcmp(&got[i], &want[i], sizeof(float)),
                                  "%s, n %lld, %lld rows, element %lld: %.9g, want %.9g", hx_cpu_simd_name(l),
                                  (long long)n, (long long)rows, (long long)i, got[i], want[i]);
                ck_assert_float_eq(got[n], 12345.0f);
                memcpy(got, start, sizeof(float) * (size_t)n);
                hx_quant_add_scaled_rows_f16(got, xh, STRIDE, w, rows, n);
                for (int64_t i = 0; i < n; i++)
                    ck_assert_msg(!memcmp(&got[i], &want[i], sizeof(float)),
                                  "F16 rows, %s, n %lld, %lld rows, element %lld: %.9g, want %.9g",
                                  hx_cpu_simd_name(l), (long long)n, (long long)rows, (long long)i, got[i], want[i]);
                ck_assert_float_eq(got[n], 12345.0f);
            }
        }
    HX_ASSERT_OK(hx_quant_set_level(saved));
}
END_TEST

/* kernels_cpu/vmath.h at each level: exp within 2 ulp of the double exp
 * over the whole finite range (flushed to zero below FLT_MIN), its edges
 * (0 -> 1, overflow -> inf, -inf -> 0, NaN -> NaN), a row's elements
 * equal to each computed alone (no dependence on the row's length), and
 * SwiGLU against its double formula. */
START_TEST(test_vmath)
{
    const hx_simd_level saved = hx_quant_level();
    uint64_t seed = 5;
    enum { N = 4099 };
    static float x[N], got[N], g[N], u[N], o[N];
    for (int i = 0; i < N; i++)
        x[i] = ((float)(rng_next(&seed) >> 40) / (float)(1u << 24)) * 200.0f - 100.0f;
    const float edges[] = {0.0f, -0.0f, 1.0f, -1.0f, 88.7f, 88.72283f, 88.7229f, 89.0f, -87.33f, -87.34f, -103.0f,
                           INFINITY, -INFINITY, NAN, 1e-30f, -1e-30f};
    memcpy(x, edges, sizeof edges);
    for (int i = 0; i < N; i++) {
        g[i] = rng_normal(&seed, 4.0f) * (i % 97 == 0 ? 30.0f : 1.0f);
        u[i] = rng_normal(&seed, 1.0f);
    }
    for (hx_simd_level l = HX_SIMD_SCALAR; l <= max_level(); l++) {
        HX_ASSERT_OK(hx_quant_set_level(l));
        const float shift = 0.5f;
        for (int i = 0; i < N; i++)
            got[i] = x[i] + shift;
        hx_vmath_exp_shifted(got, shift, N);
        for (int i = 0; i < N; i++) {
            const float xi = (x[i] + shift) - shift;
            const double want = exp((double)xi);
            if (isnan(xi)) {
                ck_assert_msg(isnan(got[i]), "%s: exp(NaN) = %g", hx_cpu_simd_name(l), got[i]);
                continue;
            }
            if (want > FLT_MAX) {
                ck_assert_msg(isinf(got[i]) && got[i] > 0, "%s: exp(%.9g) = %g, want inf", hx_cpu_simd_name(l), xi,
                              got[i]);
                continue;
            }
            const double tol = want < FLT_MIN ? FLT_MIN : 2.0 * want * FLT_EPSILON;
            ck_assert_msg(fabs(got[i] - want) <= tol, "%s: exp(%.9g) = %.9g, want %.9g", hx_cpu_simd_name(l), xi,
                          got[i], want);
            float one = x[i] + shift;
            hx_vmath_exp_shifted(&one, shift, 1);
            ck_assert_msg(!memcmp(&one, &got[i], sizeof one), "%s: exp(%.9g) alone %.9g, in a row %.9g",
                          hx_cpu_simd_name(l), xi, one, got[i]);
        }
        ck_assert_float_eq(got[0], 1.0f);
        hx_vmath_swiglu(g, u, o, N);
        for (int i = 0; i < N; i++) {
            const double want = (double)g[i] / (1.0 + exp(-(double)g[i])) * u[i];
            ck_assert_msg(fabs(o[i] - want) <= 4e-7 * fabs(want) + 1e-30, "%s: swiglu(%.9g, %.9g) = %.9g, want %.9g",
                          hx_cpu_simd_name(l), g[i], u[i], o[i], want);
        }
    }
    HX_ASSERT_OK(hx_quant_set_level(saved));
}
END_TEST

/* GeGLU at every level: bit for bit ggml's GELU (tanh form, input and
 * result rounded to f16, 0 at or below -10, the input at or above 10)
 * times u, over every f16 value, values between them, the bounds and
 * the specials, in a row whose length is no multiple of a vector. */
static float ggml_gelu(float x)
{
    if (x <= -10.0f)
        return 0.0f;
    if (x >= 10.0f)
        return x;
    const float h = hx_fp16_to_fp32(hx_fp32_to_fp16(x));
    const float g = 0.5f * h * (1.0f + tanhf(0.79788456080286535587989211986876f * h * (1.0f + 0.044715f * h * h)));
    return hx_fp16_to_fp32(hx_fp32_to_fp16(g));
}

START_TEST(test_vmath_geglu)
{
    const hx_simd_level saved = hx_quant_level();
    uint64_t seed = 9;
    enum { N = 65536 + 4099 + 16 };
    static float g[N], u[N], o[N];
    for (int i = 0; i < 65536; i++)
        g[i] = hx_fp16_to_fp32((hx_half)i);
    for (int i = 65536; i < N; i++)
        g[i] = rng_normal(&seed, 4.0f) * (i % 97 == 0 ? 5.0f : 1.0f);
    const float edges[] = {-10.0f, 10.0f, nextafterf(-10.0f, 0.0f), nextafterf(10.0f, 0.0f), nextafterf(-10.0f, -20.0f),
                           nextafterf(10.0f, 20.0f), INFINITY, -INFINITY, NAN, 1e-30f, -1e-30f, 0.0f, -0.0f,
                           65519.0f, 65520.0f, -1e9f};
    memcpy(g + N - 16, edges, sizeof edges);
    for (int i = 0; i < N; i++)
        u[i] = i % 5 ? rng_normal(&seed, 1.0f) : 1.0f;
    for (hx_simd_level l = HX_SIMD_SCALAR; l <= max_level(); l++) {
        HX_ASSERT_OK(hx_quant_set_level(l));
        memset(o, 0, sizeof o);
        hx_vmath_geglu(g, u, o, N);
        for (int i = 0; i < N; i++) {
            const float want = ggml_gelu(g[i]) * u[i];
            if (isnan(want)) {
                ck_assert_msg(isnan(o[i]), "%s: geglu(NaN) = %g", hx_cpu_simd_name(l), o[i]);
                continue;
            }
            ck_assert_msg(!memcmp(&want, &o[i], sizeof want), "%s: geglu(%.9g, %.9g) = %.9g, want %.9g",
                          hx_cpu_simd_name(l), g[i], u[i], o[i], want);
        }
        /* in place, as the MoE kernel calls it */
        static float io[37];
        memcpy(io, g + 65536, sizeof io);
        hx_vmath_geglu(io, u + 65536, io, 37);
        ck_assert(!memcmp(io, o + 65536, sizeof io));
    }
    HX_ASSERT_OK(hx_quant_set_level(saved));
}
END_TEST

/* The softmax chunk of attention and the merge's rescaling: at every level
 * the bits of their definitions in kernels_cpu/vmath.h, written here
 * plainly (the level's own exp), for lengths around the 16 lanes, values
 * far apart, NaN and infinities; AVX2 and AVX-512 alike. */
static double lanes_sum_ref(const float *x, int n)
{
    float s[16] = {0};
    for (int i = 0; i < n; i++)
        s[i % 16] += x[i];
    double t[16];
    for (int k = 0; k < 16; k++)
        t[k] = s[k];
    for (int w = 8; w >= 1; w /= 2)
        for (int k = 0; k < w; k++)
            t[k] = t[k] + t[k + w];
    return t[0];
}

START_TEST(test_vmath_softmax_terms)
{
    const hx_simd_level saved = hx_quant_level();
    uint64_t seed = 41;
    enum { N = 70 };
    float src[N], want[N], got[N];
    double sums[HX_SIMD_COUNT][3];
    for (int n = 0; n <= N; n++)
        for (int kind = 0; kind < 3; kind++) {
            for (int i = 0; i < n; i++)
                src[i] = rng_normal(&seed, kind ? 30.0f : 3.0f);
            if (kind == 2 && n > 2) {
                src[n / 2] = NAN;
                src[n - 1] = -INFINITY;
            }
            for (hx_simd_level l = HX_SIMD_SCALAR; l <= max_level(); l++) {
                HX_ASSERT_OK(hx_quant_set_level(l));
                float mx = -INFINITY;
                for (int i = 0; i < n; i++) {
                    want[i] = src[i] * 0.125f;
                    mx = want[i] > mx ? want[i] : mx; /* NaN never wins */
                }
                hx_vmath_exp_shifted(want, mx, n);
                memcpy(got, src, sizeof(float) * (size_t)n);
                float gmx = 0;
                const double sum = hx_vmath_softmax_terms(got, n, 0.125f, &gmx);
                const double wsum = lanes_sum_ref(want, n);
                ck_assert_msg(!memcmp(&gmx, &mx, sizeof mx), "%s n %d: max %.9g, want %.9g", hx_cpu_simd_name(l), n,
                              gmx, mx);
                ck_assert_msg(!memcmp(&sum, &wsum, sizeof sum) || (isnan(sum) && isnan(wsum)),
                              "%s n %d kind %d: sum %.17g, want %.17g", hx_cpu_simd_name(l), n, kind, sum, wsum);
                for (int i = 0; i < n; i++)
                    ck_assert_msg(!memcmp(&got[i], &want[i], sizeof(float)) || (isnan(got[i]) && isnan(want[i])),
                                  "%s n %d: term %d %.9g, want %.9g", hx_cpu_simd_name(l), n, i, got[i], want[i]);
                sums[l][kind] = sum;
            }
            if (max_level() >= HX_SIMD_AVX512)
                ck_assert(!memcmp(&sums[HX_SIMD_AVX2][kind], &sums[HX_SIMD_AVX512][kind], sizeof(double)) ||
                          isnan(sums[HX_SIMD_AVX2][kind]));
        }
    /* the merge: y * a + x and y + x * a, a multiply then an add */
    float y[N], x[N], a[N], b[N];
    for (int i = 0; i < N; i++) {
        y[i] = rng_normal(&seed, 1.0f);
        x[i] = rng_normal(&seed, 1.0f);
    }
    for (hx_simd_level l = HX_SIMD_SCALAR; l <= max_level(); l++) {
        HX_ASSERT_OK(hx_quant_set_level(l));
        for (int n = 0; n <= N; n += 7) {
            memcpy(a, y, sizeof y);
            memcpy(b, y, sizeof y);
            hx_vmath_scale_add(a, 0.3f, x, n);
            hx_vmath_add_scaled(b, x, 0.3f, n);
            for (int i = 0; i < N; i++) {
                volatile float p = y[i] * 0.3f, q = x[i] * 0.3f;
                const float wa = i < n ? p + x[i] : y[i], wb = i < n ? y[i] + q : y[i];
                ck_assert_msg(!memcmp(&a[i], &wa, sizeof wa) && !memcmp(&b[i], &wb, sizeof wb),
                              "%s n %d element %d", hx_cpu_simd_name(l), n, i);
            }
        }
    }
    HX_ASSERT_OK(hx_quant_set_level(saved));
}
END_TEST

Suite *suite_quant(void)
{
    Suite *s = suite_create("quant");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_layouts);
    tcase_add_test(tc, test_fp16_known);
    tcase_add_test(tc, test_fp16_rows);
    tcase_add_test(tc, test_known_answers);
    tcase_add_test(tc, test_dequantize_exact);
    tcase_add_test(tc, test_dequantize_float64);
    tcase_add_test(tc, test_vec_dot);
    tcase_add_test(tc, test_vec_dot4);
    tcase_add_test(tc, test_gemm);
    tcase_add_test(tc, test_gemm_extremes);
    tcase_add_test(tc, test_gemm_keep);
    tcase_add_test(tc, test_gemm_f32_act);
    tcase_add_test(tc, test_gemm_f32_block);
    tcase_add_test(tc, test_gemm_f32_blocks);
    tcase_add_test(tc, test_row_bounds);
    tcase_add_test(tc, test_quantize_roundtrip);
    tcase_add_test(tc, test_quantize_ties);
    tcase_add_test(tc, test_activation_sums);
    tcase_add_test(tc, test_dispatch);
    tcase_add_test(tc, test_kv_quantizer);
    tcase_add_test(tc, test_add_scaled);
    tcase_add_test(tc, test_vmath);
    tcase_add_test(tc, test_vmath_geglu);
    tcase_add_test(tc, test_vmath_softmax_terms);
    tcase_add_test(tc, test_gguf_py_reference);
    suite_add_tcase(s, tc);
    return s;
}
