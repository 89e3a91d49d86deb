/* Choosing kernels: one table per SIMD level, each entry the best kernel at
 * or below that level, built once; the current level is the CPU's best
 * unless HX_SIMD or hx_quant_set_level lowers it. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "kernels_cpu/quant_impl.h"
#include "ops/error.h"

static const hx_type dot_type[HX_TYPE_COUNT] = {
    [HX_TYPE_F32] = HX_TYPE_F32,   [HX_TYPE_F16] = HX_TYPE_F32,   [HX_TYPE_BF16] = HX_TYPE_F32,
    [HX_TYPE_Q4_0] = HX_TYPE_Q8_0, [HX_TYPE_Q4_1] = HX_TYPE_Q8_1, [HX_TYPE_Q5_0] = HX_TYPE_Q8_0,
    [HX_TYPE_Q5_1] = HX_TYPE_Q8_1, [HX_TYPE_Q8_0] = HX_TYPE_Q8_0, [HX_TYPE_Q8_1] = HX_TYPE_Q8_1,
    [HX_TYPE_Q4_K] = HX_TYPE_Q8_K, [HX_TYPE_Q5_K] = HX_TYPE_Q8_K, [HX_TYPE_Q6_K] = HX_TYPE_Q8_K,
    [HX_TYPE_Q8_K] = HX_TYPE_Q8_K, [HX_TYPE_Q2_K] = HX_TYPE_Q8_K, [HX_TYPE_Q3_K] = HX_TYPE_Q8_K,
    [HX_TYPE_IQ4_XS] = HX_TYPE_Q8_K, [HX_TYPE_IQ4_NL] = HX_TYPE_Q8_0,
};

/* Level and type whose gemm tile runs other than HX_GEMM_COLS columns at
 * once (hx_quant_ops.gemm_cols). */
static const unsigned char gemm_cols[HX_SIMD_COUNT][HX_TYPE_COUNT] = {
    [HX_SIMD_AVX2] = {[HX_TYPE_F32] = 3, [HX_TYPE_F16] = 3, [HX_TYPE_BF16] = 3},
    [HX_SIMD_AVX512] = {[HX_TYPE_F32] = 6, [HX_TYPE_F16] = 6, [HX_TYPE_BF16] = 6},
};

const hx_type hx_quant_lowbit_types[HX_QUANT_LOWBIT_TYPES] = {HX_TYPE_Q2_K, HX_TYPE_Q3_K, HX_TYPE_IQ4_NL,
                                                              HX_TYPE_IQ4_XS};

/* A level's kernels of type t: its main table's, or its low-bit table's. */
static const hx_quant_kernels *level_kernels(int level, int t)
{
    static const hx_quant_kernels *const lowbit[HX_SIMD_COUNT] = {hx_quant_scalar_lowbit, hx_quant_avx2_lowbit,
                                                                  hx_quant_avx512_lowbit};
    for (int k = 0; k < HX_QUANT_LOWBIT_TYPES; k++)
        if (hx_quant_lowbit_types[k] == (hx_type)t)
            return &lowbit[level][k];
    const hx_quant_kernels *levels[HX_SIMD_COUNT] = {hx_quant_scalar_kernels, hx_quant_avx2_kernels,
                                                     hx_quant_avx512_kernels};
    return &levels[level][t];
}

static hx_quant_ops tables[HX_SIMD_COUNT][HX_TYPE_COUNT];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
static _Atomic int current_level;
/* The current level's table and the CPU's best level, set with the
 * tables: a lookup on a matmul's path is then one load (every share of
 * every task looks its kernels up). */
static _Atomic(const hx_quant_ops *) current_table;
static hx_simd_level max_level;

static const hx_gemm_fn *const levels_f32_act[HX_SIMD_COUNT] = {
    hx_quant_scalar_gemm_f32_act, hx_quant_avx2_gemm_f32_act, hx_quant_avx512_gemm_f32_act};
/* Each level's blocks of the tiles above (hx_quant_ops.gemm_f32_block):
 * none at the scalar level. */
static const hx_gemm_block_fn *const levels_f32_block[HX_SIMD_COUNT] = {
    NULL, hx_quant_avx2_gemm_f32_blocks, hx_quant_avx512_gemm_f32_blocks};

static void build_tables(void)
{
    for (int l = 0; l < HX_SIMD_COUNT; l++) {
        for (int t = 0; t < HX_TYPE_COUNT; t++) {
            hx_quant_ops *o = &tables[l][t];
            o->type = (hx_type)t;
            o->vec_dot_type = dot_type[t];
            o->level = (hx_simd_level)l;
            for (int k = 0; k <= l; k++) { /* higher levels override lower ones */
                const hx_quant_kernels *q = level_kernels(k, t);
                if (q->dequantize_row)
                    o->dequantize_row = q->dequantize_row;
                if (q->quantize_row)
                    o->quantize_row = q->quantize_row;
                if (q->quantize_weighted)
                    o->quantize_weighted = q->quantize_weighted;
                if (q->vec_dot)
                    o->vec_dot = q->vec_dot;
                const hx_gemm_fn f32_act = levels_f32_act[k][t];
                /* a block only beside the tile it runs, of the same level */
                const hx_gemm_block_fn block = levels_f32_block[k] ? levels_f32_block[k][t] : NULL;
                if (f32_act) {
                    o->gemm_f32_act = f32_act;
                    o->gemm_f32_act_cols = gemm_cols[k][HX_TYPE_F32] ? gemm_cols[k][HX_TYPE_F32] : HX_GEMM_COLS;
                    o->gemm_f32_block = block;
                }
                if (q->vec_dot4) { /* never a slower level's gemm next to a faster vec_dot4 */
                    o->vec_dot4 = q->vec_dot4;
                    o->gemm = q->gemm;
                    o->gemm_keep_f32 = q->gemm_keep_f32;
                    o->gemm_cols = gemm_cols[k][t] ? gemm_cols[k][t] : HX_GEMM_COLS;
                    if (dot_type[t] == HX_TYPE_F32)
                        o->gemm_f32_block = block;
                }
            }
        }
    }
    max_level = hx_cpu_simd_max();
    hx_simd_level level = max_level, want;
    const char *env = getenv("HX_SIMD");
    if (env && hx_cpu_simd_from_name(env, &want) && want < level)
        level = want;
    atomic_store(&current_level, (int)level);
    atomic_store_explicit(&current_table, tables[level], memory_order_release);
}

static _Atomic int convert_mode = HX_CONVERT_PAYING;

void hx_quant_set_convert(hx_convert_mode mode) { atomic_store(&convert_mode, (int)mode); }

/* Intel's cores convert F16 (and widen BF16) with a uop on a port the
 * FMAs use, so there a prompt's rows are converted once per block, as
 * they have been since that beat the narrower 16-bit tiles of the time
 * (F16 prompts +36 %).  On Zen 5 the 16-bit tile at the F32 tile's width
 * beats the pass and the F32 tile (small f16 pp128, 2 threads: AVX2 810
 * -> 848 t/s, AVX-512 896 -> 918; bf16 at AVX-512 818 -> 929), except
 * for BF16 at AVX2, whose widening is two integer instructions per
 * vector on the FMAs' pipes (803 -> 743).  Zen 4 chooses alike (the
 * same test, medians of 12 alternating: AVX2 659 converted first -> 741,
 * AVX-512 837 -> 881); the other AMD cores take the same choices
 * unmeasured. */
int hx_quant_convert_first(const hx_quant_ops *q)
{
    if (!q->gemm_keep_f32)
        return 0;
    switch (atomic_load(&convert_mode)) {
    case HX_CONVERT_NEVER: return 0;
    case HX_CONVERT_ALWAYS: return 1;
    default:
        return (hx_cpu_features() & HX_CPU_INTEL) || (q->type == HX_TYPE_BF16 && q->level == HX_SIMD_AVX2);
    }
}

/* A decode step's plain tile, rows of a SmolLM-sized F16 file (tg64, 2
 * threads).  On Zen 5 the four rows read interleaved left the hardware
 * prefetchers behind, and one row at a time, one FMA chain each, streams
 * faster (AVX-512 96 -> 134 t/s).  On Intel's Emerald Rapids it is the
 * other way round: one chain adds a vector per FMA latency, below a
 * core's share of the memory's rate, and four rows interleaved, four
 * chains, stream faster (AVX-512 71 -> 100 t/s, AVX2 55 -> 95; one
 * thread 36 -> 52 and 29 -> 51).  Zen 4 streams as Zen 5 does (small
 * f16 tg64, medians of 12 alternating, interleaved -> alone: AVX2 95 ->
 * 132, AVX-512 100 -> 138); the other AMD cores take that choice
 * unmeasured.  Either way the sums are the tile's, bit for bit. */
static int decode_rows_alone_pays(void) { return !(hx_cpu_features() & HX_CPU_INTEL); }

/* The choice resolved (1 or 0), -1 until first asked: every decode tile
 * asks, so it is one load there. */
static _Atomic int decode_rows_alone = -1;

void hx_quant_set_decode_rows(hx_decode_rows_mode mode)
{
    atomic_store(&decode_rows_alone, mode == HX_DECODE_ROWS_ALONE      ? 1
                                     : mode == HX_DECODE_ROWS_TOGETHER ? 0
                                                                       : decode_rows_alone_pays());
}

int hx_quant_decode_rows_alone(void)
{
    int v = atomic_load_explicit(&decode_rows_alone, memory_order_relaxed);
    if (v < 0) { /* racing first callers store the same value */
        v = decode_rows_alone_pays();
        atomic_store_explicit(&decode_rows_alone, v, memory_order_relaxed);
    }
    return v;
}

/* The current level's table, the tables built on first use. */
static const hx_quant_ops *current(void)
{
    const hx_quant_ops *table = atomic_load_explicit(&current_table, memory_order_acquire);
    if (!table) {
        pthread_once(&tables_once, build_tables);
        table = atomic_load_explicit(&current_table, memory_order_acquire);
    }
    return table;
}

static const hx_quant_ops *table_of_type(const hx_quant_ops *table, hx_type t)
{
    if ((unsigned)t >= HX_TYPE_COUNT)
        return NULL;
    const hx_quant_ops *o = &table[t];
    return o->dequantize_row ? o : NULL;
}

const hx_quant_ops *hx_quant_ops_get_level(hx_type t, hx_simd_level level)
{
    (void)current(); /* the tables and max_level */
    if ((unsigned)level >= HX_SIMD_COUNT || level > max_level)
        return NULL;
    return table_of_type(tables[level], t);
}

const hx_quant_ops *hx_quant_ops_get(hx_type t) { return table_of_type(current(), t); }

hx_quantize_row_fn hx_quant_kv_quantizer(hx_type t, int values)
{
    const hx_quant_ops *q = hx_quant_ops_get(t);
    if (!q)
        return NULL;
    const int avx2 = q->level >= HX_SIMD_AVX2;
    if (t == HX_TYPE_Q4_0 && avx2)
        return values ? hx_quant_avx2_quantize_q4_0_values : hx_quant_avx2_quantize_q4_0_keys;
    if (t == HX_TYPE_Q4_0)
        return values ? hx_quant_quantize_q4_0_values : hx_quant_quantize_q4_0_keys;
    if (t == HX_TYPE_Q8_0)
        return avx2 ? hx_quant_avx2_quantize_q8_0_kv : hx_quant_quantize_q8_0_kv;
    return q->quantize_row;
}

hx_status hx_quant_set_level(hx_simd_level level)
{
    pthread_once(&tables_once, build_tables);
    if ((unsigned)level >= HX_SIMD_COUNT)
        return hx_error(HX_ERR_INVALID_ARG, "SIMD level %d does not exist", (int)level);
    if (level > hx_cpu_simd_max())
        return hx_error(HX_ERR_UNSUPPORTED, "this CPU cannot run %s kernels (best: %s)",
                        hx_cpu_simd_name(level), hx_cpu_simd_name(hx_cpu_simd_max()));
    atomic_store(&current_level, (int)level);
    atomic_store_explicit(&current_table, tables[level], memory_order_release);
    return HX_OK;
}

hx_simd_level hx_quant_level(void)
{
    (void)current();
    return (hx_simd_level)atomic_load_explicit(&current_level, memory_order_relaxed);
}

void hx_quant_add_scaled_rows(float *acc, const float *x, size_t x_stride, const float *w, int64_t rows, int64_t n)
{
    static void (*const by_level[HX_SIMD_COUNT])(float *, const float *, size_t, const float *, int64_t, int64_t) = {
        hx_quant_scalar_add_scaled_rows, hx_quant_avx2_add_scaled_rows, hx_quant_avx512_add_scaled_rows};
    by_level[hx_quant_level()](acc, x, x_stride, w, rows, n);
}

void hx_quant_add_scaled_rows_f16(float *acc, const hx_half *x, size_t x_stride, const float *w, int64_t rows,
                                  int64_t n)
{
    static void (*const by_level[HX_SIMD_COUNT])(float *, const hx_half *, size_t, const float *, int64_t,
                                                 int64_t) = {hx_quant_scalar_add_scaled_rows_f16,
                                                             hx_quant_avx2_add_scaled_rows_f16,
                                                             hx_quant_avx512_add_scaled_rows_f16};
    by_level[hx_quant_level()](acc, x, x_stride, w, rows, n);
}

/* The scalar level's columns for HX_QUANT_GEMM_F32_BLOCK: its F32 gemm
 * tiles, HX_GEMM_COLS columns at a time. */
static void scalar_block_cols(int64_t n, int64_t cols, float *s, size_t ss, const uint8_t *x, size_t bx,
                              const uint8_t *y, size_t by)
{
    const hx_gemm_fn gemm = hx_quant_scalar_kernels[HX_TYPE_F32].gemm;
    for (int64_t c = 0; c < cols; c += HX_GEMM_COLS)
        gemm(n, (int)(cols - c < HX_GEMM_COLS ? cols - c : HX_GEMM_COLS), s + (size_t)c * ss, ss, x, bx,
             y + (size_t)c * by, by);
}

HX_QUANT_GEMM_F32_BLOCK(hx_quant_scalar_gemm_f32_block, scalar_block_cols, HX_GEMM_COLS)

void hx_quant_gemm_f32_block(int64_t n, int64_t rows, int64_t cols, float *s, size_t s_stride, const float *x,
                             size_t x_stride, const float *y, size_t y_stride)
{
    static const hx_gemm_block_fn by_level[HX_SIMD_COUNT] = {
        hx_quant_scalar_gemm_f32_block, hx_quant_avx2_gemm_f32_block, hx_quant_avx512_gemm_f32_block};
    by_level[hx_quant_level()](n, rows, cols, s, s_stride, x, x_stride, y, y_stride);
}

hx_status hx_quant_row_check(hx_type t, int64_t n)
{
    const hx_type_traits *tr = hx_type_get((uint32_t)t);
    if (!tr)
        return hx_error(HX_ERR_INVALID_ARG, "tensor type %d does not exist", (int)t);
    if (!hx_quant_ops_get_level(t, HX_SIMD_SCALAR))
        return hx_error(HX_ERR_UNSUPPORTED, "no CPU kernels for tensor type %s", tr->name);
    if (n <= 0 || n % tr->block_size)
        return hx_error(HX_ERR_INVALID_ARG, "a %s row of %lld elements is not whole blocks of %u", tr->name,
                        (long long)n, tr->block_size);
    return HX_OK;
}
