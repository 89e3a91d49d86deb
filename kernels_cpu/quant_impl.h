/* What the quant_*.c files share: per-level kernel tables and field loads.
 * Not for callers outside kernels_cpu/quant*.c: they use kernels_cpu/quant.h. */
#ifndef HX_KERNELS_CPU_QUANT_IMPL_H
#define HX_KERNELS_CPU_QUANT_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels_cpu/quant.h"

/* One level's kernels per type; NULL entries fall back to a lower level.
 * The tables are plain data so that reading them runs no code compiled
 * for an instruction set the CPU may lack. */
typedef struct {
    hx_dequantize_row_fn dequantize_row;
    hx_quantize_row_fn quantize_row;
    hx_vec_dot_fn vec_dot;
    hx_vec_dot4_fn vec_dot4;
    hx_gemm_fn gemm; /* set with vec_dot4: a level's vec_dot4 brings its gemm */
    hx_quantize_weighted_fn quantize_weighted; /* NULL: the type takes no importance weights */
    hx_gemm_keep_fn gemm_keep_f32; /* set with vec_dot4, as gemm (hx_quant_ops.gemm_keep_f32) */
} hx_quant_kernels;

extern const hx_quant_kernels hx_quant_scalar_kernels[HX_TYPE_COUNT];
extern const hx_quant_kernels hx_quant_avx2_kernels[HX_TYPE_COUNT];
extern const hx_quant_kernels hx_quant_avx512_kernels[HX_TYPE_COUNT];
/* Each level's hx_quant_ops.gemm_f32_act per type (NULL: none). */
extern const hx_gemm_fn hx_quant_scalar_gemm_f32_act[HX_TYPE_COUNT];
extern const hx_gemm_fn hx_quant_avx2_gemm_f32_act[HX_TYPE_COUNT];
extern const hx_gemm_fn hx_quant_avx512_gemm_f32_act[HX_TYPE_COUNT];

/* The kernels of Q2_K, Q3_K, IQ4_NL and IQ4_XS (in that order), per level,
 * in tables of their own (kernels_cpu/quant_*_lowbit.c); hx_quant_ops_get
 * merges them as it merges the tables above. */
#define HX_QUANT_LOWBIT_TYPES 4
extern const hx_type hx_quant_lowbit_types[HX_QUANT_LOWBIT_TYPES];
extern const hx_quant_kernels hx_quant_scalar_lowbit[HX_QUANT_LOWBIT_TYPES];
extern const hx_quant_kernels hx_quant_avx2_lowbit[HX_QUANT_LOWBIT_TYPES];
extern const hx_quant_kernels hx_quant_avx512_lowbit[HX_QUANT_LOWBIT_TYPES];

/* Q3_K's sixteen 6-bit sub-block scales, less their offset of 32. */
void hx_quant_q3_K_scales(const uint8_t *scales, int8_t sc[16]);

/* Each level's hx_quant_add_scaled_rows. */
void hx_quant_scalar_add_scaled_rows(float *acc, const float *x, size_t x_stride, const float *w, int64_t rows,
                                     int64_t n);
void hx_quant_avx2_add_scaled_rows(float *acc, const float *x, size_t x_stride, const float *w, int64_t rows,
                                   int64_t n);
void hx_quant_avx512_add_scaled_rows(float *acc, const float *x, size_t x_stride, const float *w, int64_t rows,
                                     int64_t n);
/* Each level's hx_quant_add_scaled_rows_f16. */
void hx_quant_scalar_add_scaled_rows_f16(float *acc, const hx_half *x, size_t x_stride, const float *w, int64_t rows,
                                         int64_t n);
void hx_quant_avx2_add_scaled_rows_f16(float *acc, const hx_half *x, size_t x_stride, const float *w, int64_t rows,
                                       int64_t n);
void hx_quant_avx512_add_scaled_rows_f16(float *acc, const hx_half *x, size_t x_stride, const float *w, int64_t rows,
                                         int64_t n);

/* Each level's hx_quant_gemm_f32_block, and its hx_quant_ops.gemm_f32_block
 * by type (F32's is the first). */
void hx_quant_scalar_gemm_f32_block(int64_t n, int64_t rows, int64_t cols, float *s, size_t s_stride, const void *x,
                                    size_t x_stride, const float *y, size_t y_stride);
void hx_quant_avx2_gemm_f32_block(int64_t n, int64_t rows, int64_t cols, float *s, size_t s_stride, const void *x,
                                  size_t x_stride, const float *y, size_t y_stride);
void hx_quant_avx512_gemm_f32_block(int64_t n, int64_t rows, int64_t cols, float *s, size_t s_stride, const void *x,
                                    size_t x_stride, const float *y, size_t y_stride);
extern const hx_gemm_block_fn hx_quant_avx2_gemm_f32_blocks[HX_TYPE_COUNT];
extern const hx_gemm_block_fn hx_quant_avx512_gemm_f32_blocks[HX_TYPE_COUNT];

/* A level's hx_quant_gemm_f32_block over its `cols_fn(n, cols, s, ss, x,
 * bx, y, by)`, which runs four rows by any number of columns in tiles of
 * up to W: whole fours of rows, then each last row alone (stride 0, the
 * first of the tile's four equal outputs), as a lone row's tile runs. */
#define HX_QUANT_GEMM_F32_BLOCK(name, cols_fn, W)                                                                 \
    void name(int64_t n, int64_t rows, int64_t cols, float *s, size_t ss, const void *x, size_t bx,              \
              const float *y, size_t by)                                                                          \
    {                                                                                                             \
        const uint8_t *xb = (const uint8_t *)x, *yb = (const uint8_t *)y;                                         \
        int64_t r = 0;                                                                                            \
        for (; r + 4 <= rows; r += 4)                                                                             \
            cols_fn(n, cols, s + r, ss, xb + (size_t)r * bx, bx, yb, by);                                         \
        for (; r < rows; r++)                                                                                     \
            for (int64_t c = 0; c < cols; c += (W)) {                                                             \
                float t[4 * (W)];                                                                                 \
                const int64_t nc = cols - c < (W) ? cols - c : (W);                                               \
                cols_fn(n, nc, t, 4, xb + (size_t)r * bx, 0, yb + (size_t)c * by, by);                            \
                for (int64_t k = 0; k < nc; k++)                                                                  \
                    s[(size_t)(c + k) * ss + (size_t)r] = t[4 * k];                                               \
            }                                                                                                     \
    }

/* A level's hx_quant_gemm_f32_block (`f32_name`) and its table of
 * hx_quant_ops.gemm_f32_block (`table`) over `cols_of(n, cols, s, ss, x,
 * bx, y, by, T)`, the level's tiles of rows of type T in W columns. */
#define HX_QUANT_BLOCK_COLS(name, cols_of, T)                                                                     \
    static void name(int64_t n, int64_t cols, float *s, size_t ss, const uint8_t *x, size_t bx, const uint8_t *y, \
                     size_t by)                                                                                   \
    {                                                                                                             \
        cols_of(n, cols, s, ss, x, bx, y, by, T);                                                                 \
    }
#define HX_QUANT_GEMM_F32_BLOCKS(f32_name, table, cols_of, W)                                                     \
    HX_QUANT_BLOCK_COLS(block_cols_f32, cols_of, HX_TYPE_F32)                                                     \
    HX_QUANT_BLOCK_COLS(block_cols_f16, cols_of, HX_TYPE_F16)                                                     \
    HX_QUANT_BLOCK_COLS(block_cols_bf16, cols_of, HX_TYPE_BF16)                                                   \
    HX_QUANT_BLOCK_COLS(block_cols_q8_0, cols_of, HX_TYPE_Q8_0)                                                   \
    HX_QUANT_GEMM_F32_BLOCK(f32_name, block_cols_f32, W)                                                          \
    static HX_QUANT_GEMM_F32_BLOCK(gemm_block_f16, block_cols_f16, W)                                             \
    static HX_QUANT_GEMM_F32_BLOCK(gemm_block_bf16, block_cols_bf16, W)                                           \
    static HX_QUANT_GEMM_F32_BLOCK(gemm_block_q8_0, block_cols_q8_0, W)                                           \
    const hx_gemm_block_fn table[HX_TYPE_COUNT] = {                                                               \
        [HX_TYPE_F32] = f32_name,                                                                                 \
        [HX_TYPE_F16] = gemm_block_f16,                                                                           \
        [HX_TYPE_BF16] = gemm_block_bf16,                                                                         \
        [HX_TYPE_Q8_0] = gemm_block_q8_0,                                                                         \
    };

/* How far ahead (bytes) the SIMD dot products prefetch weight rows.  A
 * prefetch never faults, so reaching past a row's end is harmless. */
#define HX_QUANT_PREFETCH 2048

/* How a quantized GEMM tile walks its four weight rows.  With several
 * activation rows (a prompt) it reads the four together, each weight
 * block meeting every activation row.  With one (a decode step, streaming
 * the weights from memory) it reads them one after the other where each
 * row's sums are its own: four interleaved streams over rows of a few KB
 * left the hardware prefetchers untrained and streamed at half to a third
 * of the rate of one sequential stream.  A row's arithmetic is the same
 * either way, so an output's bits do not depend on the tile's width.
 * (The plain types' tiles read four rows together always: there one row
 * is one FMA chain, see gemm_plain_tile.) */
#define HX_TILE_ROWS(C) ((C) == 1 ? 1 : 4)

/* What a GEMM tile reading `rows` of its four weight rows together (1 or
 * 4) prefetches for the weight bytes at p, `off` bytes into one of them
 * (bx bytes apart).  One row: HX_QUANT_PREFETCH ahead, as a one-row dot,
 * on into the rows that follow.  Four: a quarter of that ahead in the row
 * (as much in flight over the four) or, past the row's end, in the same
 * row of the next four rows: the matmul walks a matrix's groups of four
 * rows in order, so those are the bytes the next tile reads, where
 * prefetching straight on would fetch the rows the tile is reading itself
 * and leave the next tile's row starts to demand misses.  Rows shorter
 * than the distance prefetch the next group's bytes at the same offset. */
static inline const char *hx_tile_prefetch(const uint8_t *p, size_t off, size_t bx, int rows)
{
    const size_t d = HX_QUANT_PREFETCH / 4;
    if (rows == 1)
        return (const char *)p + HX_QUANT_PREFETCH;
    return (const char *)p + (bx <= d ? 4 * bx : off + d < bx ? d : d + 3 * bx);
}

/* Weight quantizers (round to nearest, as ggml's reference quantizers). */
void hx_quant_quantize_f32(const float *x, void *y, int64_t n);
void hx_quant_quantize_f16(const float *x, void *y, int64_t n);
void hx_quant_quantize_bf16(const float *x, void *y, int64_t n);
void hx_quant_quantize_q4_0(const float *x, void *y, int64_t n);
void hx_quant_quantize_q4_1(const float *x, void *y, int64_t n);
void hx_quant_quantize_q5_0(const float *x, void *y, int64_t n);
void hx_quant_quantize_q5_1(const float *x, void *y, int64_t n);
void hx_quant_quantize_q8_0(const float *x, void *y, int64_t n);
void hx_quant_quantize_q8_1(const float *x, void *y, int64_t n);
void hx_quant_quantize_q4_K(const float *x, void *y, int64_t n);
void hx_quant_quantize_q5_K(const float *x, void *y, int64_t n);
void hx_quant_quantize_q6_K(const float *x, void *y, int64_t n);
void hx_quant_quantize_q8_K(const float *x, void *y, int64_t n);

/* Weight quantizers with importance weights (qw NULL: quantize_row's
 * blocks, as ggml's quantize_* without an importance matrix). */
void hx_quant_weighted_q4_0(const float *x, void *y, int64_t n, const float *qw);
/* The KV cache's quantizers (kernels_cpu/kv_fit.c), and the same blocks
 * at AVX2 (kernels_cpu/kv_fit_avx2.c). */
void hx_quant_quantize_q4_0_keys(const float *x, void *y, int64_t n);
void hx_quant_quantize_q4_0_values(const float *x, void *y, int64_t n);
void hx_quant_quantize_q8_0_kv(const float *x, void *y, int64_t n);
void hx_quant_avx2_quantize_q4_0_keys(const float *x, void *y, int64_t n);
void hx_quant_avx2_quantize_q4_0_values(const float *x, void *y, int64_t n);
void hx_quant_avx2_quantize_q8_0_kv(const float *x, void *y, int64_t n);
void hx_quant_weighted_q4_1(const float *x, void *y, int64_t n, const float *qw);
void hx_quant_weighted_q5_0(const float *x, void *y, int64_t n, const float *qw);
void hx_quant_weighted_q5_1(const float *x, void *y, int64_t n, const float *qw);
void hx_quant_weighted_q4_K(const float *x, void *y, int64_t n, const float *qw);
void hx_quant_weighted_q5_K(const float *x, void *y, int64_t n, const float *qw);
void hx_quant_weighted_q6_K(const float *x, void *y, int64_t n, const float *qw);
void hx_quant_quantize_q2_K(const float *x, void *y, int64_t n);
void hx_quant_quantize_q3_K(const float *x, void *y, int64_t n);
void hx_quant_quantize_iq4_nl(const float *x, void *y, int64_t n);
void hx_quant_quantize_iq4_xs(const float *x, void *y, int64_t n);
void hx_quant_weighted_q2_K(const float *x, void *y, int64_t n, const float *qw);
void hx_quant_weighted_q3_K(const float *x, void *y, int64_t n, const float *qw);
void hx_quant_weighted_iq4_nl(const float *x, void *y, int64_t n, const float *qw);
void hx_quant_weighted_iq4_xs(const float *x, void *y, int64_t n, const float *qw);

/* Unaligned little-endian field loads (x86 is little-endian, as GGUF). */
static inline uint16_t hx_ld16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline uint32_t hx_ld32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline float hx_ldf(const uint8_t *p)
{
    float v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The unpacked 6-bit scales (bytes 0..7) and mins (bytes 8..15) of a
 * Q4_K/Q5_K super-block, as two little-endian words of eight bytes. */
static inline void hx_quant_k4_unpack(const uint8_t *scales, uint64_t *sc, uint64_t *m)
{
    const uint32_t w0 = hx_ld32(scales), w1 = hx_ld32(scales + 4), w2 = hx_ld32(scales + 8);
    /* sub-blocks 0..3 keep 6 bits in bytes 0..3 (scales) and 4..7 (mins);
     * sub-blocks 4..7 take 4 bits from bytes 8..11 and their top 2 bits
     * from the spare bits 6..7 of bytes 0..3 / 4..7. */
    const uint32_t sc_lo = w0 & 0x3f3f3f3fu, m_lo = w1 & 0x3f3f3f3fu;
    const uint32_t sc_hi = (w2 & 0x0f0f0f0fu) | (((w0 >> 6) & 0x03030303u) << 4);
    const uint32_t m_hi = ((w2 >> 4) & 0x0f0f0f0fu) | (((w1 >> 6) & 0x03030303u) << 4);
    *sc = (uint64_t)sc_lo | ((uint64_t)sc_hi << 32);
    *m = (uint64_t)m_lo | ((uint64_t)m_hi << 32);
}

/* A vec_dot4 made of four vec_dots, for types without a fused one. */
#define HX_QUANT_DOT4_OF(name, dot)                                                   \
    static void name(int64_t n, float *s, const void *x, size_t x_stride, const void *y) \
    {                                                                                 \
        for (int r = 0; r < 4; r++)                                                   \
            dot(n, s + r, (const uint8_t *)x + (size_t)r * x_stride, y);              \
    }

/* A vec_dot4 that is a one-column gemm tile: the kernel a decode step's
 * matmul runs, so the two agree bit for bit. */
#define HX_QUANT_DOT4_OF_GEMM(name, gemm)                                                 \
    static void name(int64_t n, float *s, const void *x, size_t x_stride, const void *y) \
    {                                                                                     \
        gemm(n, 1, s, 0, x, x_stride, y, 0);                                              \
    }

/* A gemm entry calling a tile with its column count as a constant, so
 * that the tile's loops over the columns unroll; extra arguments follow
 * the count. */
#define HX_QUANT_GEMM_BY_COLS(name, tile, ...)                                                                   \
    static void name(int64_t n, int ncols, float *s, size_t ss, const void *x, size_t bx, const void *y, size_t by) \
    {                                                                                                             \
        switch (ncols) {                                                                                          \
        case 4: tile(n, s, ss, x, bx, y, by, 4, ##__VA_ARGS__); break;                                            \
        case 3: tile(n, s, ss, x, bx, y, by, 3, ##__VA_ARGS__); break;                                            \
        case 2: tile(n, s, ss, x, bx, y, by, 2, ##__VA_ARGS__); break;                                            \
        default: tile(n, s, ss, x, bx, y, by, 1, ##__VA_ARGS__); break;                                           \
        }                                                                                                         \
    }

/* A gemm entry calling a gemm_keep_f32-shaped tile (the plain types')
 * with nothing kept. */
#define HX_QUANT_GEMM_OF_KEEP(name, cols)                                                                         \
    static void name(int64_t n, int ncols, float *s, size_t ss, const void *x, size_t bx, const void *y, size_t by) \
    {                                                                                                             \
        cols(n, ncols, s, ss, x, bx, y, by, NULL);                                                                \
    }

/* Every weight type's vec_dot4 (dot4_f32 ...) as its one-column tile, for
 * a level whose file defines gemm_f32 ... gemm_q6_K. */
#define HX_QUANT_DOT4S_OF_GEMMS                         \
    HX_QUANT_DOT4_OF_GEMM(dot4_f32, gemm_f32)           \
    HX_QUANT_DOT4_OF_GEMM(dot4_f16, gemm_f16)           \
    HX_QUANT_DOT4_OF_GEMM(dot4_bf16, gemm_bf16)         \
    HX_QUANT_DOT4_OF_GEMM(dot4_q4_0, gemm_q4_0)         \
    HX_QUANT_DOT4_OF_GEMM(dot4_q4_1, gemm_q4_1)         \
    HX_QUANT_DOT4_OF_GEMM(dot4_q5_0, gemm_q5_0)         \
    HX_QUANT_DOT4_OF_GEMM(dot4_q5_1, gemm_q5_1)         \
    HX_QUANT_DOT4_OF_GEMM(dot4_q8_0, gemm_q8_0)         \
    HX_QUANT_DOT4_OF_GEMM(dot4_q4_K, gemm_q4_K)         \
    HX_QUANT_DOT4_OF_GEMM(dot4_q5_K, gemm_q5_K)         \
    HX_QUANT_DOT4_OF_GEMM(dot4_q6_K, gemm_q6_K)

/* A gemm made of vec_dot4 calls, one per activation row, for types and
 * levels without a register-blocked kernel. */
#define HX_QUANT_GEMM_OF(name, dot4)                                                                \
    static void name(int64_t n, int ncols, float *s, size_t s_stride, const void *x, size_t x_stride, \
                     const void *y, size_t y_stride)                                                \
    {                                                                                               \
        for (int c = 0; c < ncols; c++)                                                             \
            dot4(n, s + (size_t)c * s_stride, x, x_stride, (const uint8_t *)y + (size_t)c * y_stride);  \
    }

#endif
