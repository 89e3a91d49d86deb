/* Tensor arithmetic on the CPU: GGUF's block layouts, (de)quantization and
 * dot products, with scalar, AVX2 and AVX-512 kernels chosen at run time.
 *
 * Block layouts are byte-for-byte those of ggml (ggml-common.h), so rows
 * mapped from a GGUF file are used in place.  Kernels take rows as plain
 * byte pointers and read every field with unaligned loads: a row inside a
 * GGUF mapping may start at any offset.  Rows hetero lays out itself are
 * 64-byte aligned, which the kernels exploit only through the cache.
 *
 * Activations: a weight row of type T is dotted with an activation row of
 * type ops->vec_dot_type, as llama.cpp does:
 *   F32, F16, BF16           -> F32 (exact f32 activations, no rounding)
 *   Q4_0, Q5_0, Q8_0         -> Q8_0
 *   Q4_1, Q5_1               -> Q8_1 (its `s` field carries d*sum(q), which
 *                               the weights' min needs: one multiply a block)
 *   Q2_K, Q3_K, Q4_K, Q5_K,
 *   Q6_K, IQ4_XS             -> Q8_K
 *   IQ4_NL                   -> Q8_0
 * The activation row is produced by hx_quant_ops_get(vec_dot_type)->quantize_row;
 * its 8-bit quants lie in -127..127, which the Q8_0 x Q8_0 kernels rely on
 * (they flip activation signs).  Dot products are exact integer sums per
 * block, scaled and summed in float: levels differ only in summation order.
 *
 * Row lengths `n` count elements and must be multiples of the type's block
 * size (hx_type_get(t)->block_size); callers check with hx_quant_row_check. */
#ifndef HX_KERNELS_CPU_QUANT_H
#define HX_KERNELS_CPU_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "hetero.h"
#include "ops/types.h"

#define HX_QK 32    /* elements per block of Q4_0 .. Q8_1 */
#define HX_QK_K 256 /* elements per super-block of the K-quants */
#define HX_K_SCALE_SIZE 12

typedef uint16_t hx_half; /* IEEE binary16, as stored */
typedef uint16_t hx_bf16; /* bfloat16, as stored      */

/* ---- block layouts (ggml's, field for field) ---------------------------- */

/* x = d * (q - 8); q[j] in the low nibble of qs[j], q[j+16] in the high. */
typedef struct {
    hx_half d;
    uint8_t qs[HX_QK / 2];
} hx_block_q4_0;

/* x = d * q + m */
typedef struct {
    hx_half d, m;
    uint8_t qs[HX_QK / 2];
} hx_block_q4_1;

/* x = d * (q - 16); bit j of the little-endian qh word is q[j]'s fifth bit. */
typedef struct {
    hx_half d;
    uint8_t qh[4];
    uint8_t qs[HX_QK / 2];
} hx_block_q5_0;

typedef struct {
    hx_half d, m;
    uint8_t qh[4];
    uint8_t qs[HX_QK / 2];
} hx_block_q5_1;

typedef struct {
    hx_half d;
    int8_t qs[HX_QK];
} hx_block_q8_0;

/* Activations for Q4_1/Q5_1: s = d * sum(qs), rounded to f16. */
typedef struct {
    hx_half d, s;
    int8_t qs[HX_QK];
} hx_block_q8_1;

/* Eight sub-blocks of 32: x = d*sc[j]*q - dmin*m[j] with 6-bit sc, m packed
 * in `scales` (see hx_quant_k4_scales); qs[32c + l] holds element 64c + l
 * in its low nibble and element 64c + 32 + l in its high nibble. */
typedef struct {
    hx_half d, dmin;
    uint8_t scales[HX_K_SCALE_SIZE];
    uint8_t qs[HX_QK_K / 2];
} hx_block_q4_K;

/* As Q4_K plus a fifth bit: bit 2c of qh[l] for element 64c + l, bit
 * 2c+1 for element 64c + 32 + l. */
typedef struct {
    hx_half d, dmin;
    uint8_t scales[HX_K_SCALE_SIZE];
    uint8_t qh[HX_QK_K / 8];
    uint8_t qs[HX_QK_K / 2];
} hx_block_q5_K;

/* Sixteen sub-blocks of 16: x = d * scales[e/16] * (q - 32), q 6 bits. In
 * each half h of 128: element 128h + 32k + l (k = 0..3, l = 0..31) has its
 * low 4 bits in ql[64h + l + 32(k&1)] (low nibble for k < 2, high for
 * k >= 2) and its top 2 bits in bits 2k..2k+1 of qh[32h + l]. */
typedef struct {
    uint8_t ql[HX_QK_K / 2];
    uint8_t qh[HX_QK_K / 4];
    int8_t scales[HX_QK_K / 16];
    hx_half d;
} hx_block_q6_K;

/* Sixteen sub-blocks of 16: x = d*(sc[s] & 0xf)*q - dmin*(sc[s] >> 4), q
 * 2 bits.  In each half h of 128, element 128h + 32k + l (k = 0..3, l =
 * 0..31) is bits 2k..2k+1 of qs[32h + l]. */
typedef struct {
    uint8_t scales[HX_QK_K / 16];
    uint8_t qs[HX_QK_K / 4];
    hx_half d, dmin;
} hx_block_q2_K;

/* Sixteen sub-blocks of 16: x = d * (sc[s] - 32) * (q - 4), q 3 bits: the
 * low two as Q2_K's qs, the third bit of element 128h + 32k + l is bit
 * 4h + k of hmask[l].  The 6-bit scales: low 4 bits in the nibbles of
 * scales[0..7] (sub-block s < 8 low nibble of scales[s], s >= 8 high
 * nibble of scales[s - 8]), top 2 bits in bits 2(s/4).. of scales[8 + s%4]. */
typedef struct {
    uint8_t hmask[HX_QK_K / 8];
    uint8_t qs[HX_QK_K / 4];
    uint8_t scales[12];
    hx_half d;
} hx_block_q3_K;

/* Non-linear 4-bit quants: x = d * hx_iq4nl_values[q], q[j] in the low
 * nibble of qs[j], q[j+16] in the high. */
typedef struct {
    hx_half d;
    uint8_t qs[HX_QK / 2];
} hx_block_iq4_nl;

/* Eight IQ4_NL sub-blocks of 32 under one f16: x = d * (ls - 32) * value,
 * ls 6 bits: the low 4 in nibble (s%2) of scales_l[s/2], the top 2 in
 * bits 2s..2s+1 of scales_h; qs[16s..16s+15] as an IQ4_NL block's qs. */
typedef struct {
    hx_half d;
    uint16_t scales_h;
    uint8_t scales_l[HX_QK_K / 64];
    uint8_t qs[HX_QK_K / 2];
} hx_block_iq4_xs;

/* Activations for the K-quants: bsums[g] = sum of qs[16g .. 16g+15]. */
typedef struct {
    float d;
    int8_t qs[HX_QK_K];
    int16_t bsums[HX_QK_K / 16];
} hx_block_q8_K;

/* ---- scalar conversions (exact; round to nearest even) ------------------ */

float hx_fp16_to_fp32(hx_half h);
/* NaN stays NaN (quiet, top payload bits kept) as F16C does; overflow
 * gives infinity; subnormals are rounded, not flushed. */
hx_half hx_fp32_to_fp16(float f);
float hx_bf16_to_fp32(hx_bf16 h);
hx_bf16 hx_fp32_to_bf16(float f);

/* The K-quants' 6-bit scale and min of sub-block j (0..7). */
void hx_quant_k4_scale_min(const uint8_t scales[HX_K_SCALE_SIZE], int j, uint8_t *sc, uint8_t *m);

/* ---- CPU features and SIMD levels --------------------------------------- */

typedef enum {
    HX_SIMD_SCALAR = 0,
    HX_SIMD_AVX2 = 1,   /* AVX2 + FMA + F16C                              */
    HX_SIMD_AVX512 = 2, /* AVX-512 F, BW, VL, DQ, VNNI (+ AVX2, FMA, F16C) */
    HX_SIMD_COUNT
} hx_simd_level;

enum {
    HX_CPU_AVX = 1u << 0,
    HX_CPU_AVX2 = 1u << 1,
    HX_CPU_FMA = 1u << 2,
    HX_CPU_F16C = 1u << 3,
    HX_CPU_AVX512F = 1u << 4,
    HX_CPU_AVX512BW = 1u << 5,
    HX_CPU_AVX512VL = 1u << 6,
    HX_CPU_AVX512DQ = 1u << 7,
    HX_CPU_AVX512VNNI = 1u << 8,
    HX_CPU_AVX512BF16 = 1u << 9,
    HX_CPU_AVXVNNI = 1u << 10,
    HX_CPU_OS_YMM = 1u << 11, /* the OS saves ymm state (XCR0)         */
    HX_CPU_OS_ZMM = 1u << 12, /* the OS saves zmm and opmask state     */
    /* Its cores run a 512-bit instruction at full width, as Intel's and
     * AMD's Zen 5 do, where Zen 4 runs it as two 256-bit halves: wider
     * prompt kernels pay on the first kind only (kernels_cpu/repack.c). */
    HX_CPU_ZMM_FULL = 1u << 13,
    HX_CPU_INTEL = 1u << 14, /* "GenuineIntel": a few kernel choices were measured to differ by vendor */
};

/* HX_CPU_* bits of this CPU (cpuid + xgetbv); computed once. */
uint32_t hx_cpu_features(void);
/* The best level this CPU and OS run. */
hx_simd_level hx_cpu_simd_max(void);
const char *hx_cpu_simd_name(hx_simd_level l); /* "scalar", "avx2", "avx512" */
int hx_cpu_simd_from_name(const char *name, hx_simd_level *out);

/* ---- per-type kernels --------------------------------------------------- */

/* x: n elements of the type, y: n floats. */
typedef void (*hx_dequantize_row_fn)(const void *x, float *y, int64_t n);
/* x: n floats, y: n elements of the type. */
typedef void (*hx_quantize_row_fn)(const float *x, void *y, int64_t n);
/* x: n floats, y: n elements of the type, chosen to minimise the weighted
 * error sum_j qw[j] * (x[j] - q[j])^2 as ggml's quantize_row_*_impl do;
 * qw: the row's n importance weights (an importance matrix's per-column
 * statistics), or NULL for the type's own weighting when none is given. */
typedef void (*hx_quantize_weighted_fn)(const float *x, void *y, int64_t n, const float *qw);
/* *s = dot(weight row x, activation row y of vec_dot_type), n elements. */
typedef void (*hx_vec_dot_fn)(int64_t n, float *s, const void *x, const void *y);
/* s[r] = dot(row r, y) for the 4 weight rows at x + r*x_stride (bytes);
 * at the SIMD levels, the gemm tile below with one column, bit for bit. */
typedef void (*hx_vec_dot4_fn)(int64_t n, float *s, const void *x, size_t x_stride,
                               const void *y);
/* A tile of a matrix product, for prompts: s[c*s_stride + r] = dot(weight
 * row x + r*x_stride, activation row y + c*y_stride) for r = 0..3 and
 * c = 0..ncols-1, 1 <= ncols <= HX_GEMM_COLS (strides in bytes for x and
 * y, in floats for s).  Each weight block loaded meets every activation
 * row of the tile and each activation block every weight row, where a
 * loop of vec_dot4 re-reads the weights once per activation row.  Results
 * equal vec_dot's within the same float bound: the per-block integer sums
 * are the same, the float summation order may differ. */
#define HX_GEMM_COLS 4
/* The most columns any level's tile runs at once (hx_quant_ops.gemm_cols:
 * F32 at AVX-512). */
#define HX_GEMM_COLS_MAX 6
typedef void (*hx_gemm_fn)(int64_t n, int ncols, float *s, size_t s_stride, const void *x, size_t x_stride,
                           const void *y, size_t y_stride);
typedef void (*hx_gemm_keep_fn)(int64_t n, int ncols, float *s, size_t s_stride, const void *x, size_t x_stride,
                                const void *y, size_t y_stride, float *keep);
/* s[c*s_stride + r] = dot(x row r, y row c) for r < rows and c < cols: x
 * rows of n elements as stored, y rows of n F32 (strides in bytes for x
 * and y, in floats for s). */
typedef void (*hx_gemm_block_fn)(int64_t n, int64_t rows, int64_t cols, float *s, size_t s_stride, const void *x,
                                 size_t x_stride, const float *y, size_t y_stride);

typedef struct {
    hx_type type;
    hx_type vec_dot_type;                /* the activation type vec_dot takes */
    hx_dequantize_row_fn dequantize_row; /* every type listed above          */
    hx_quantize_row_fn quantize_row;     /* weights and activations; F32 copies */
    hx_quantize_weighted_fn quantize_weighted; /* NULL: the type takes no importance weights */
    hx_vec_dot_fn vec_dot;               /* NULL for activation-only types  */
    hx_vec_dot4_fn vec_dot4;             /* NULL where vec_dot is NULL      */
    hx_gemm_fn gemm;                     /* NULL where vec_dot is NULL      */
    /* F16 and BF16 at AVX2 and AVX-512: the F32 tile of the same level
     * (up to its gemm_cols columns) over 4 rows as stored, converting
     * them on the way (exactly, so with the same bits as `gemm`) and
     * leaving them converted at `keep` (row r at keep + r*n), for a
     * block's first token tile where hx_quant_convert_first says so;
     * NULL elsewhere. */
    hx_gemm_keep_fn gemm_keep_f32;
    /* Q8_0 at every level: rows as stored x F32 activation rows (1 ..
     * gemm_f32_act_cols at once), each row converted on the way exactly
     * (a block's byte times its scale), so the bits are those of the
     * level's F32 tile over the dequantized rows, at any width.  For a KV
     * cache's keys: the queries stay in F32, as on hetero's other devices
     * and in its reference.  NULL elsewhere. */
    hx_gemm_fn gemm_f32_act;
    int gemm_f32_act_cols;
    /* F32, F16, BF16 (the tile of `gemm`) and Q8_0 (that of
     * gemm_f32_act) at AVX2 and AVX-512: rows as stored x F32 columns,
     * every tile of a block in one call and without the tiles' prefetches
     * (the caller asks for the rows): that tile's sums bit for bit, with
     * one call where a loop over the tiles makes one per four rows.  NULL
     * elsewhere. */
    hx_gemm_block_fn gemm_f32_block;
    /* The columns `gemm` runs at once (1 .. HX_GEMM_COLS): a caller with
     * more tokens hands it chunks of this many, so that no chunk leaves a
     * lone column to a tile built for several (F32 at AVX2 runs threes). */
    int gemm_cols;
    hx_simd_level level;                 /* the level these ops were chosen for */
} hx_quant_ops;

/* 1 where a prompt's tiles over q's rows run over each block of rows
 * converted to F32 first (q->gemm_keep_f32 for a block's first token
 * tile, the F32 tile for the others) rather than over the rows as stored:
 * the same bits either way, chosen for speed (kernels_cpu/quant.c says by
 * what), or as hx_quant_set_convert says. */
int hx_quant_convert_first(const hx_quant_ops *q);
typedef enum {
    HX_CONVERT_PAYING, /* the default: where it was measured to pay */
    HX_CONVERT_NEVER,
    HX_CONVERT_ALWAYS, /* wherever the type has gemm_keep_f32 */
} hx_convert_mode;
/* Process-wide, for tests and benches comparing the two. */
void hx_quant_set_convert(hx_convert_mode mode);

/* 1 where a decode step's tile over plain (F32, F16, BF16) rows, one
 * activation column streamed against four weight rows, reads the rows
 * one after another (one FMA chain each), 0 where it reads them
 * interleaved (four chains): the same bits either way, chosen by CPU for
 * speed (kernels_cpu/quant.c says by what), or as hx_quant_set_decode_rows
 * says. */
int hx_quant_decode_rows_alone(void);
typedef enum {
    HX_DECODE_ROWS_PAYING, /* the default: where it was measured to pay */
    HX_DECODE_ROWS_ALONE,
    HX_DECODE_ROWS_TOGETHER,
} hx_decode_rows_mode;
/* Process-wide, for tests and benches comparing the two. */
void hx_quant_set_decode_rows(hx_decode_rows_mode mode);

/* The kernels of type t at the current level, or NULL if hetero has none
 * for t.  The current level is the best the CPU runs, lowered by HX_SIMD
 * (scalar|avx2|avx512) or hx_quant_set_level.  Entries a level does not
 * specialise fall back to the next lower level's. */
const hx_quant_ops *hx_quant_ops_get(hx_type t);

/* How the KV cache stores a row of type t, of keys or (`values`) of
 * values (kv_store, kv_shift): Q4_0 and Q8_0 by a least-squares fit of
 * each block's scale (the blocks as stored; kernels_cpu/kv_fit.c says
 * how each is weighed), every other type by its quantize_row; NULL for a
 * type without kernels. */
hx_quantize_row_fn hx_quant_kv_quantizer(hx_type t, int values);
/* The kernels of a given level, or NULL if t has none or the CPU cannot
 * run that level (for tests and benchmarks). */
const hx_quant_ops *hx_quant_ops_get_level(hx_type t, hx_simd_level level);
/* Forces the level hx_quant_ops_get uses; HX_ERR_UNSUPPORTED if the CPU
 * cannot run it.  Process-wide: meant for start-up, tests and benches. */
hx_status hx_quant_set_level(hx_simd_level level);
hx_simd_level hx_quant_level(void);

/* acc[i] += w[r] * x[r*x_stride + i] for r = 0 .. rows-1 in turn and
 * i < n (x_stride in floats), at the current level: attention's sum of
 * value rows.  Each step is a multiply then an add, in row order, at
 * every level, so the levels agree bit for bit with each other and with
 * a plain loop; the accumulators stay in registers across the rows. */
void hx_quant_add_scaled_rows(float *acc, const float *x, size_t x_stride, const float *w, int64_t rows, int64_t n);
/* The same over F16 rows (x_stride in halves), each element converted
 * (exactly) as it is read: the bits of hx_quant_add_scaled_rows over the
 * rows dequantized first, without the pass that dequantizes them. */
void hx_quant_add_scaled_rows_f16(float *acc, const hx_half *x, size_t x_stride, const float *w, int64_t rows,
                                  int64_t n);

/* s[c*s_stride + r] = dot(x row r, y row c) for r < rows and c < cols,
 * rows of n F32 (strides in bytes for x and y, in floats for s), at the
 * current level: the F32 gemm tiles' sums bit for bit, every tile of the
 * block in one call and without the tiles' prefetches, for rows already
 * in L1 (attention's K rows of a chunk, converted to F32 once for a
 * prompt's many queries). */
void hx_quant_gemm_f32_block(int64_t n, int64_t rows, int64_t cols, float *s, size_t s_stride, const float *x,
                             size_t x_stride, const float *y, size_t y_stride);

/* HX_OK if a row of n elements of t has kernels and whole blocks; else an
 * error naming the type (HX_ERR_UNSUPPORTED / HX_ERR_INVALID_ARG). */
hx_status hx_quant_row_check(hx_type t, int64_t n);

#endif
