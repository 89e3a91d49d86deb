/* Weight matrices laid out for the CPU kernels: a copy of a matrix with
 * HX_REPACK_ROWS rows interleaved, so that one SIMD pass over a block
 * serves that many output rows and one decode step reads one sequential
 * stream per group of rows instead of one per row.
 *
 * A repacked matrix is made once, when a model loads, beside the GGUF
 * mapping it was read from (which other devices keep using); the CPU's
 * matmul takes it when a weight has one (kernels_cpu/cpu_ops.c).
 *
 * Layout: the rows in groups of HX_REPACK_ROWS, each group's K/32 blocks
 * in order; where N is not a multiple of HX_REPACK_ROWS the last group is
 * padded with rows of zeros, whose outputs are dropped (a vocabulary of
 * 32001 tokens keeps its output matrix in the layout).  A group's block i holds the group's rows' block i: their
 * eight f16 scales, then their quants four bytes at a time (row r's bytes
 * 4k..4k+3 at 32k + 4r), so that a vector of 32 bytes holds four quants
 * of each row and one broadcast activation word meets all eight.
 *   Q8_0: 16 + 8 x 32 bytes; the quants as in the file.
 *   Q4_0: 16 + 8 x 16 bytes; each byte xor 0x88, so that a nibble read as
 *         a signed 4-bit number is q - 8 (the low one after a shift left
 *         by 4, both as 16 (q - 8) in a signed byte).
 *   Q4_1: 16 + 16 + 8 x 16 bytes: the eight d, the eight m, then the
 *         quants as Q4_0's, unsigned (no xor).
 *   Q5_0: 16 + 8 x 4 + 8 x 16 bytes: the eight d, each row's qh word
 *         with its bits moved (element 4k + i's fifth bit at 8i + k,
 *         16 + 4k + i's at 8i + 4 + k, so that one shift by k brings
 *         chunk k's to bit 4 of each byte), then the nibbles as Q4_1's.
 *   Q5_1: the eight d, the eight m, then Q5_0's qh words and nibbles.
 *   Q4_K (super-blocks of 256): the eight d, the eight dmin (f16), the
 *         6-bit scales unpacked as bytes [sub-block j][row] (64), the mins
 *         as bytes [pair of sub-blocks p][row][2] (64), then the quants as
 *         above, 4 x 8 vectors: pair p's chunk k holds each row's bytes
 *         32p + 4k.. (low nibbles sub-block 2p, high ones 2p + 1).
 *   Q5_K: Q4_K's, with the rows' 32 qh bytes (8 vectors, four bytes a
 *         row) between the mins and the quants.
 *   Q6_K (super-blocks of 256): the eight d, the int8 scales as bytes
 *         [pair of sub-blocks p][row][2] (128), then per half h of 128
 *         elements the rows' qh bytes 32h.. (8 vectors of 32), then their
 *         ql bytes 64h.. (16 vectors), each four bytes a row as above.
 *
 * Arithmetic: output row r of a group, for activation row y (Q8_0), is
 *   acc = 0; for each block i: acc = fmaf((float)isum_i, d_r * d_y, acc)
 * with isum_i the block's exact integer dot product, Q5_0's quants taken
 * as q - 16 (Q4_1 and Q5_1, against Q8_1, then
 *   acc = fmaf(m_r, s_y, acc) with s_y the activation block's d * sum(q);
 * Q4_K, per super-block:
 *   acc = fmaf((float)S, d_r * d_y, acc); acc = fmaf(-(float)M, dmin_r * d_y, acc)
 * with S = sum_j sc_j * isum_j and M = sum_j m_j * (sum of sub-block j's
 * activations), both exact integers; Q5_K as Q4_K with q 5 bits; Q6_K, per super-block:
 *   acc = fmaf((float)S, d_r * d_y, acc), S = sum_j sc_j * isum_j over
 * the 16 sub-blocks, isum_j the exact dot of (q - 32) with the
 * activations); every level computes
 * exactly that, so the levels agree bit for bit with each other and with
 * the plain loop of tests/test_repack.c, and a token's outputs do not
 * depend on how many tokens share the tile.  Against the row-at-a-time
 * kernels (quant.h) only the float summation order differs. */
#ifndef HX_KERNELS_CPU_REPACK_H
#define HX_KERNELS_CPU_REPACK_H

#include <stddef.h>
#include <stdint.h>

#include "hetero.h"
#include "kernels_cpu/quant.h"

#define HX_REPACK_ROWS 8

typedef struct {
    hx_type type;       /* the original rows' type                        */
    uint64_t K, N;      /* row length and rows, as the original           */
    size_t group_bytes; /* one group of HX_REPACK_ROWS rows (the last padded) */
    size_t bytes;       /* the whole copy                                 */
    uint8_t *data;      /* 64-byte aligned                                */
} hx_repacked;

/* Whether hetero has a repacked layout for a K x N matrix of type t. */
int hx_repack_supported(hx_type t, uint64_t K, uint64_t N);

/* The repacked copy of the N rows of K elements at `rows` (*out freed by
 * hx_repack_free).  HX_ERR_UNSUPPORTED where hx_repack_supported says no,
 * HX_ERR_NO_MEMORY. */
hx_status hx_repack_make(hx_type t, uint64_t K, uint64_t N, const void *rows, hx_repacked **out);
void hx_repack_free(void *repacked);

/* Outputs of one group against C activation rows (1 <= C <= HX_GEMM_COLS):
 * s[c*ss + r] = dot(row r of the group, activation row y + c*by) for
 * r < HX_REPACK_ROWS; `group` points at the group's first block, K its
 * row length.  Activations are of the type's vec_dot_type (quant.h). */
typedef void (*hx_repack_gemm_fn)(int64_t K, int C, float *s, size_t ss, const void *group, const void *y,
                                  size_t by);

/* The kernel of type t at the current level (hx_quant_level), or NULL
 * where t has no repacked layout. */
hx_repack_gemm_fn hx_repack_gemm(hx_type t);
/* At a given level, NULL where the CPU cannot run it (tests, benches). */
hx_repack_gemm_fn hx_repack_gemm_level(hx_type t, hx_simd_level level);

/* Two adjacent groups at once (16 rows, s[c*ss + r] for r < 2
 * HX_REPACK_ROWS; `group` the first, the second one group's bytes on),
 * the same bits as the one-group kernel on each: AVX-512's 512-bit
 * kernels, and AVX2's two 256-bit tiles side by side (two weight streams
 * in flight, for decode; the 32-element types).  _level: the level's
 * kernel, NULL where it has none for t or the CPU cannot run it (tests,
 * benches); hx_repack_gemm_pair: the one the
 * CPU matmul takes at the current level for `cols` columns (tokens), as
 * hx_repack_set_pairs says. */
hx_repack_gemm_fn hx_repack_gemm_pair(hx_type t, uint32_t cols);
hx_repack_gemm_fn hx_repack_gemm_pair_level(hx_type t, hx_simd_level level);

typedef enum {
    HX_REPACK_PAIRS_PAYING, /* the default: the types where they beat the 256-bit kernels */
    HX_REPACK_PAIRS_OFF,
    HX_REPACK_PAIRS_ALL,
} hx_repack_pairs;
/* Process-wide, for benches comparing the two widths. */
void hx_repack_set_pairs(hx_repack_pairs mode);

/* Bytes of one repacked block (HX_REPACK_ROWS rows' block i); 0 where
 * t has no layout. */
size_t hx_repack_block_bytes(hx_type t);

/* Each level's kernels by type (NULL: none at that level). */
extern const hx_repack_gemm_fn hx_repack_scalar_kernels[HX_TYPE_COUNT];
extern const hx_repack_gemm_fn hx_repack_avx2_kernels[HX_TYPE_COUNT];
extern const hx_repack_gemm_fn hx_repack_avx512_kernels[HX_TYPE_COUNT];
extern const hx_repack_gemm_fn hx_repack_avx2_pair_kernels[HX_TYPE_COUNT];
extern const hx_repack_gemm_fn hx_repack_avx512_pair_kernels[HX_TYPE_COUNT];

#endif
