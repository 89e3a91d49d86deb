/* Attention on the CPU over the paged KV cache (ops/ops.h "attention" and
 * "attention_part"), flash-attention style.
 *
 * A column is one (token, query head).  Its positions are cut into chunks
 * of ATTN_CHUNK at fixed positions (0, 64, 128, ...), whatever the tile
 * or thread that computes it.  For each chunk a column gets a partial: its
 * scaled scores' maximum m, the sum l of exp(score - m) and the sum o of
 * exp(score - m) x V row; the partials are merged in chunk order (the
 * online softmax: the larger maximum wins, the other side is rescaled by
 * exp(difference)), and the merged sum is divided by the merged l at the
 * end.  The scores of a chunk live in L1, so nothing proportional to the
 * context is written; K rows meet the queries in the KV type's gemm tile
 * straight from the cache (F16 and Q8_0 rows against F32 queries in the
 * F32 tile, converted on the way; Q4_0 rows against queries quantized to
 * Q8_0), a prompt tile's F16 and Q8_0 rows converted to F32 once per
 * chunk instead, which gives the same bits (kernels_cpu/quant.h), V rows
 * are read in place or dequantized ATTN_CHUNK rows at a time, and each is
 * added to a block of columns at once (kernels_cpu/attn_values.h).
 *
 * Work:
 * - a prompt (or any batch with enough tokens) is cut into tiles of up
 *   to ATTN_TILE consecutive tokens of one sequence with the query heads
 *   of one KV head; a tile walks the chunks its columns see (a causal
 *   tile stops at its last token, a sliding window starts at its first
 *   token's window: whole chunks outside are never read);
 * - a batch of few tokens (decode) is cut by chunks instead: the first
 *   phase (`prepare`) spreads the (tile, chunk) pairs over the team, each
 *   for every head, writing the partials to scratch; the second merges
 *   each column's partials.  Every thread then streams its own part of
 *   the cache.
 * Either way a column's partials are computed by the same code from the
 * same inputs and merged in the same order, so a token's outputs keep
 * their bits whether it is evaluated alone, in a prompt, beside other
 * sequences or with any number of threads, as the prefix cache and the
 * serving engine rely on. */
#include <math.h>
#include <string.h>

#include "kernels_cpu/attn_values.h"
#include "kernels_cpu/cpu_kernels.h"
#include "kernels_cpu/hadamard.h"
#include "kernels_cpu/kv_meta.h"
#include "kernels_cpu/quant.h"
#include "kernels_cpu/vmath.h"
#include "ops/ops.h"

#define ALIGN64(n) (((n) + 63) & ~(size_t)63)

/* Tokens of one sequence whose queries meet each K and V row together. */
#define ATTN_TILE 16
/* Positions of one partial: its scores stay in L1, its V rows are
 * dequantized together. */
#define ATTN_CHUNK 64
/* V rows (F16, Q8_0, Q4_0) are read in place by this many columns or
 * fewer (a decode step: one pass of hx_attn_values over the rows); more
 * dequantize each row to F32 once for all of them (the same bits:
 * kernels_cpu/attn_values.h). */
#define ATTN_INPLACE_COLS 4
/* A decode token's query heads per KV head (chunk_partial_heads) read
 * the V rows in place up to this many: hx_attn_values converts each row
 * once per four columns, which at up to eight still costs less than a
 * pass that writes the rows out in F32 and reads them back (Qwen2.5's
 * seven, F16 cache, one core: 1.12x at AVX-512, 1.1x at AVX2; Q8_0 and
 * Q4_0 1.0-1.05x). */
#define ATTN_HEADS_INPLACE_COLS 8
/* Columns whose positions in a chunk differ (a prompt's diagonal) go to
 * hx_attn_values this many at a time (its register block). */
#define ATTN_MIX_COLS 4
/* Batches of at most a tile of tokens (split mode's scratch holds a
 * partial per token, head and chunk of the context, so it must not grow
 * with the team) with fewer than this many (token, KV head) pairs per
 * thread, or fewer than this many tokens, are cut by chunks (a decode
 * step).  By tokens too: a step of a few sequences of a model with many
 * KV heads would otherwise go to the team as (token, KV head) tiles, each
 * reading a head's slice of every cache row, an order the prefetchers follow
 * badly, where in split mode a token's chunk takes every head together
 * (chunk_partial_heads): an 8B's shapes (eight KV heads), one token on a
 * team of two, 4 -> 10 GB/s; SmolLM2, six sequences at 4k positions, two
 * threads, 89 -> 186 t/s. */
#define SPLIT_PAIRS_PER_THREAD 4
#define SPLIT_TOKENS_PER_THREAD 2

/* A head's K or V row lies rbytes past the last one's (the other heads'
 * rows between) and a block's end jumps to another block: a stride the
 * hardware prefetchers follow badly, so each pass asks for its rows this
 * many positions ahead. */
#define KV_AHEAD 6

/* One column: a token's query head and the positions it sees; the merged
 * maximum and sum of its partials so far. */
typedef struct {
    int32_t p0, p1; /* first and last position */
    uint32_t t, h;  /* token in the batch, query head */
    float m;
    double l;
} attn_col;

/* A chunk's partial for one column (o beside it); l == 0: no position. */
typedef struct {
    float m;
    double l;
} attn_stat;

static uint32_t attn_group(const hx_op_attention *a) { return a->Hkv ? a->Hq / a->Hkv : 1; }
static uint64_t attn_ctx(const hx_op_attention *a) { return (uint64_t)a->kv.max_blocks * a->kv.block_size; }
static uint64_t attn_chunks(const hx_op_attention *a) { return (attn_ctx(a) + ATTN_CHUNK - 1) / ATTN_CHUNK; }

static int split_mode(const hx_op_attention *a, int nth)
{
    return nth > 1 && a->kv.T <= ATTN_TILE &&
           ((uint64_t)a->kv.T * a->Hkv < (uint64_t)SPLIT_PAIRS_PER_THREAD * (uint64_t)nth ||
            a->kv.T < SPLIT_TOKENS_PER_THREAD * (uint64_t)nth);
}

/* The most columns a thread holds at once: a tile's or a token's every
 * head, or in split mode every head of the batch's tokens (at most a
 * tile of them). */
static uint64_t cols_cap(const hx_op_attention *a, int nth)
{
    const uint64_t tile = (uint64_t)ATTN_TILE * attn_group(a) > a->Hq ? (uint64_t)ATTN_TILE * attn_group(a) : a->Hq;
    const uint64_t split = (uint64_t)a->kv.T * a->Hq;
    return split_mode(a, nth) && split > tile ? split : tile;
}

/* The type the queries take to meet the K rows: F32 where the K type has
 * a tile for F32 activations (Q8_0: hx_quant_ops.gemm_f32_act), as the
 * reference and hetero's other devices meet them; else the type's dot
 * partner (F32 for F16 and BF16, Q8_0 for Q4_0, as llama.cpp's CPU
 * attention quantizes it for Q4_0 and Q8_0 keys alike). */
static hx_type query_type(const hx_quant_ops *kq) { return kq->gemm_f32_act ? HX_TYPE_F32 : kq->vec_dot_type; }

static size_t qstride_of(const hx_op_attention *a)
{
    const hx_quant_ops *q = hx_quant_ops_get((hx_type)a->kv_type);
    return q ? ALIGN64(hx_type_row_size(query_type(q), a->Dh)) : 0;
}

/* A stored partial: its stat, then Dh floats of o. */
static size_t partial_bytes(const hx_op_attention *a) { return ALIGN64(sizeof(attn_stat) + a->Dh * sizeof(float)); }

/* Per thread, for its columns: a chunk's scores, the queries quantized to
 * the K rows' dot partner, the columns, the chunk's stats and V sums;
 * then ATTN_CHUNK dequantized V rows, as many converted K rows and a gemm
 * tile's outputs for a lone K row. */
static size_t attn_thread_bytes(const hx_op_attention *a, int nth)
{
    const uint64_t cols = cols_cap(a, nth);
    return cols * (ATTN_CHUNK * sizeof(float) + qstride_of(a)) + ALIGN64(cols * sizeof(attn_col)) +
           ALIGN64(cols * sizeof(attn_stat)) + ALIGN64(cols * a->Dh * sizeof(float)) +
           2 * ALIGN64(ATTN_CHUNK * a->Dh * sizeof(float)) + ALIGN64(4 * HX_GEMM_COLS_MAX * sizeof(float));
}

/* Split mode's partials, after the threads' areas: [T][Hq][chunks]. */
static size_t split_bytes(const hx_op_attention *a, int nth)
{
    return split_mode(a, nth) ? (size_t)a->kv.T * a->Hq * attn_chunks(a) * partial_bytes(a) : 0;
}

size_t hx_cpu_attention_scratch(const void *args, const size_t *sizes, int nth)
{
    (void)sizes;
    return attn_thread_bytes(args, nth) * (size_t)nth + split_bytes(args, nth);
}

/* Is every block of the sequence from p0 up to `pos` a block of the cache? */
static int context_in_cache(const hx_kv_layout *l, const int32_t *meta, int32_t p0, int32_t pos, int32_t seq,
                            uint64_t slots)
{
    if (pos < 0 || seq < 0 || (uint32_t)seq >= l->S || (uint64_t)pos >= (uint64_t)l->max_blocks * l->block_size)
        return 0;
    const int32_t *blocks = hx_kv_seq_blocks(l, meta, seq);
    for (int32_t p = p0 - p0 % (int32_t)l->block_size; p <= pos; p += (int32_t)l->block_size) {
        int32_t b = blocks[p / l->block_size];
        if (b < 0 || (uint64_t)b * l->block_size >= slots)
            return 0;
    }
    return 1;
}

/* The cache row of position p of a sequence whose block table is `blocks`. */
static inline const uint8_t *kv_row(const uint8_t *cache, const hx_kv_layout *l, const int32_t *blocks, int32_t p,
                                    size_t rbytes)
{
    const int64_t slot = (int64_t)blocks[p / l->block_size] * l->block_size + p % l->block_size;
    return cache + (uint64_t)slot * rbytes;
}

/* The last position of the run from p within p's block, at most `last`. */
static inline int32_t run_last(int32_t p, uint32_t block_size, int32_t last)
{
    const int32_t bend = (p / (int32_t)block_size + 1) * (int32_t)block_size - 1;
    return bend < last ? bend : last;
}

static inline void prefetch_row(const uint8_t *cache, const hx_kv_layout *l, const int32_t *blocks, int32_t p,
                                size_t rbytes, size_t off, size_t bytes)
{
    if (blocks[p / l->block_size] < 0)
        return;
    const uint8_t *r = kv_row(cache, l, blocks, p, rbytes) + off;
    for (size_t k = 0; k < bytes; k += 64)
        __builtin_prefetch(r + k);
}

/* The run of positions from p that some column sees, within one block:
 * its last position, or -1 with *next the first seen position after p
 * (INT32_MAX: none).  Columns' ranges may leave gaps (a window over
 * tokens far apart), whose blocks may be gone. */
static int32_t seen_run(const attn_col *col, uint32_t ncol, int32_t p, uint32_t block_size, int32_t *next)
{
    int32_t end = -1, nx = INT32_MAX;
    for (uint32_t j = 0; j < ncol; j++) {
        if (col[j].p0 <= p && col[j].p1 > end && col[j].p1 >= p)
            end = col[j].p1;
        else if (col[j].p0 > p && col[j].p0 < nx)
            nx = col[j].p0;
    }
    *next = nx;
    return end < 0 ? -1 : run_last(p, block_size, end);
}

/* What every thread's work shares: the op, its kernels and row sizes. */
typedef struct {
    const hx_op_attention *a;
    const hx_quant_ops *kq, *vq, *qq;
    hx_gemm_fn kgemm; /* K rows x queries: the type's tile, or its tile for F32 queries */
    int kcols;        /* the columns kgemm runs at once */
    hx_gemm_block_fn kblock; /* kgemm's tiles over a run of rows in one call (F32 queries), or NULL */
    int k_to_f32; /* K rows convert to F32 (exactly) with kgemm's bits in the F32 tile */
    size_t rbytes, hbytes, qstride; /* K's row and head bytes */
    size_t vrbytes, vhbytes;        /* V's */
    uint64_t slots;
    const uint8_t *kc, *vc;
} attn_geom;

/* One thread's tile: its sequence's blocks, KV head and buffers. */
typedef struct {
    const attn_geom *g;
    const int32_t *blocks;
    uint32_t kvh;
    int32_t ahead_end; /* the last position this pass will read (prefetch bound) */
    float *score;      /* [ncol][ATTN_CHUNK], by position - chunk start */
    const uint8_t *q;  /* [ncol][qstride] */
    attn_stat *st;     /* [ncol] this chunk's */
    float *o;          /* [ncol][Dh] this chunk's */
    float *vbuf;       /* [ATTN_CHUNK][Dh] */
    float *kbuf;       /* [ATTN_CHUNK][Dh] K rows converted to F32 */
    float *lone;       /* [HX_GEMM_COLS_MAX][4] */
} attn_tile;

/* score[j][i] for i < n from the K rows of positions p .. p + n - 1 of
 * one block, as stored (k0: the first): four rows a gemm tile, a last one
 * to three alone. */
static void score_rows(const attn_tile *w, uint32_t ncol, const uint8_t *k0, int32_t n, float *score, int32_t p)
{
    const attn_geom *g = w->g;
    const hx_op_attention *a = g->a;
    const size_t rstride = g->rbytes;
    const uint32_t step = (uint32_t)g->kcols;
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        for (int32_t f = 0; f < 4 && p + i + KV_AHEAD + f <= w->ahead_end; f++)
            prefetch_row(g->kc, &a->kv, w->blocks, p + i + KV_AHEAD + f, g->rbytes, w->kvh * g->hbytes, g->hbytes);
        for (uint32_t j = 0; j < ncol; j += step) {
            const int nc = (int)(ncol - j < step ? ncol - j : step);
            g->kgemm(a->Dh, nc, score + j * ATTN_CHUNK + i, ATTN_CHUNK, k0 + (size_t)i * rstride, rstride,
                     w->q + j * g->qstride, g->qstride);
        }
    }
    for (; i < n; i++)
        for (uint32_t j = 0; j < ncol; j += step) {
            const int nc = (int)(ncol - j < step ? ncol - j : step);
            g->kgemm(a->Dh, nc, w->lone, 4, k0 + (size_t)i * rstride, 0, w->q + j * g->qstride, g->qstride);
            for (int c = 0; c < nc; c++)
                score[(j + c) * ATTN_CHUNK + i] = w->lone[4 * c];
        }
}

/* score[j][p - c0] = dot(K row p, query j) for every position p in
 * [lo, hi] some column sees.  Many columns over F16, BF16 or Q8_0 rows (a
 * prompt's tile): the rows are converted to F32 once (exactly) into
 * w->kbuf and meet the queries in the F32 tile, which gives the bits the
 * rows' own tile gives (kernels_cpu/quant.h: gemm_keep_f32, gemm_f32_act) at a
 * fraction of the conversions; otherwise the rows as stored, a block's
 * run at a time. */
static void chunk_scores(const attn_tile *w, const attn_col *col, uint32_t ncol, int32_t c0, int32_t lo, int32_t hi)
{
    const attn_geom *g = w->g;
    const hx_op_attention *a = g->a;
    const hx_kv_layout *l = &a->kv;
    const size_t koff = w->kvh * g->hbytes;
    const int convert = g->k_to_f32 && ncol > ATTN_INPLACE_COLS;
    for (int32_t p = lo, next; p <= hi;) {
        int32_t e = seen_run(col, ncol, p, l->block_size, &next);
        if (e < 0) {
            p = next;
            continue;
        }
        e = e < hi ? e : hi;
        const uint8_t *k0 = kv_row(g->kc, l, w->blocks, p, g->rbytes) + koff;
        if (!convert) {
            score_rows(w, ncol, k0, e - p + 1, w->score + (p - c0), p);
        } else {
            for (int32_t r = p; r <= e; r++) {
                if (r + KV_AHEAD <= w->ahead_end)
                    prefetch_row(g->kc, l, w->blocks, r + KV_AHEAD, g->rbytes, koff, g->hbytes);
                g->kq->dequantize_row(k0 + (size_t)(r - p) * g->rbytes, w->kbuf + (size_t)(r - c0) * a->Dh, a->Dh);
            }
            hx_quant_gemm_f32_block(a->Dh, e - p + 1, ncol, w->score + (p - c0), ATTN_CHUNK,
                                    w->kbuf + (size_t)(p - c0) * a->Dh, a->Dh * sizeof(float),
                                    (const float *)(const void *)w->q, g->qstride);
        }
        p = e + 1;
    }
}

/* Columns j0 .. j0 + nc - 1 add weight x V row for positions [p0, p1] of
 * the chunk at c0, which all of them see: from the rows in place (one
 * call per run within a block, whose rows lie one cache row apart) or
 * from w->vbuf. */
static void add_values(const attn_tile *w, uint32_t j0, uint32_t nc, int32_t c0, int32_t p0, int32_t p1, int inplace)
{
    const attn_geom *g = w->g;
    const hx_op_attention *a = g->a;
    const hx_kv_layout *l = &a->kv;
    float *acc = w->o + (size_t)j0 * a->Dh;
    const float *wt = w->score + (size_t)j0 * ATTN_CHUNK + (p0 - c0);
    if (!inplace) {
        hx_attn_values(acc, a->Dh, wt, ATTN_CHUNK, nc, w->vbuf + (size_t)(p0 - c0) * a->Dh, a->Dh * sizeof(float),
                       HX_TYPE_F32, p1 - p0 + 1, a->Dh);
        return;
    }
    const size_t voff = w->kvh * g->vhbytes;
    for (int32_t p = p0; p <= p1;) {
        const int32_t e = run_last(p, l->block_size, p1);
        hx_attn_values(acc, a->Dh, wt + (p - p0), ATTN_CHUNK, nc, kv_row(g->vc, l, w->blocks, p, g->vrbytes) + voff,
                       g->vrbytes, (hx_type)a->v_type, e - p + 1, a->Dh);
        p = e + 1;
    }
}

/* Column j's positions in the chunk at c0: [*a0, *a1], empty if *a0 > *a1. */
static inline void col_span(const attn_col *col, uint32_t j, int32_t c0, int32_t *a0, int32_t *a1)
{
    *a0 = col[j].p0 > c0 ? col[j].p0 : c0;
    *a1 = col[j].p1 < c0 + ATTN_CHUNK - 1 ? col[j].p1 : c0 + ATTN_CHUNK - 1;
}

/* Every column's sum of weight x V row over its positions of the chunk,
 * in position order, into w->o.  Columns go to hx_attn_values together:
 * a run of them with the same positions (below a prompt's diagonal: all)
 * in one call; otherwise up to ATTN_MIX_COLS that share some, the
 * shared positions together and each column's own before and after
 * them alone, so each column still adds its rows in order. */
static void chunk_values(const attn_tile *w, const attn_col *col, uint32_t ncol, int32_t c0, int inplace)
{
    for (uint32_t j0 = 0, j1; j0 < ncol; j0 = j1) {
        int32_t b0, b1, r0, r1;
        col_span(col, j0, c0, &b0, &b1);
        j1 = j0 + 1;
        if (b0 > b1)
            continue;
        while (j1 < ncol && (col_span(col, j1, c0, &r0, &r1), r0 == b0 && r1 == b1))
            j1++;
        if (j1 - j0 >= ATTN_MIX_COLS || j1 == ncol) {
            add_values(w, j0, j1 - j0, c0, b0, b1, inplace);
            continue;
        }
        int32_t A0 = b0, A1 = b1;
        for (j1 = j0 + 1; j1 < ncol && j1 - j0 < ATTN_MIX_COLS; j1++) {
            col_span(col, j1, c0, &r0, &r1);
            const int32_t s0 = r0 > A0 ? r0 : A0, s1 = r1 < A1 ? r1 : A1;
            if (r0 > r1 || s0 > s1)
                break;
            A0 = s0;
            A1 = s1;
        }
        for (uint32_t j = j0; j < j1; j++) {
            col_span(col, j, c0, &r0, &r1);
            if (r0 < A0)
                add_values(w, j, 1, c0, r0, A0 - 1, inplace);
        }
        add_values(w, j0, j1 - j0, c0, A0, A1, inplace);
        for (uint32_t j = j0; j < j1; j++) {
            col_span(col, j, c0, &r0, &r1);
            if (r1 > A1)
                add_values(w, j, 1, c0, A1 + 1, r1, inplace);
        }
    }
}

/* Column j's n scores from index i of its chunk turned into weights: its
 * partial's maximum and sum, and its V sum cleared. */
static void column_softmax(const attn_tile *w, uint32_t j, int32_t i, int32_t n)
{
    const hx_op_attention *a = w->g->a;
    float mx;
    const double sum = hx_vmath_softmax_terms(w->score + j * ATTN_CHUNK + i, n, a->scale, &mx);
    w->st[j] = (attn_stat){mx, sum};
    memset(w->o + (size_t)j * a->Dh, 0, a->Dh * sizeof(float));
}

/* The partials of the chunk starting at c0 for the tile's columns, into
 * w->st and w->o: each column's softmax over its own positions of the
 * chunk (scaled scores, their maximum, exp(score - max), their sum), then
 * its sum of weight x V row in position order. */
static void chunk_partial(const attn_tile *w, const attn_col *col, uint32_t ncol, int32_t c0)
{
    const attn_geom *g = w->g;
    const hx_op_attention *a = g->a;
    const hx_kv_layout *l = &a->kv;
    const int32_t c1 = c0 + ATTN_CHUNK - 1;
    int32_t lo = INT32_MAX, hi = -1;
    for (uint32_t j = 0; j < ncol; j++) {
        const int32_t a0 = col[j].p0 > c0 ? col[j].p0 : c0, a1 = col[j].p1 < c1 ? col[j].p1 : c1;
        if (a0 <= a1) {
            lo = a0 < lo ? a0 : lo;
            hi = a1 > hi ? a1 : hi;
        }
    }
    if (hi < 0) {
        for (uint32_t j = 0; j < ncol; j++)
            w->st[j] = (attn_stat){-INFINITY, 0};
        return;
    }
    chunk_scores(w, col, ncol, c0, lo, hi);
    for (uint32_t j = 0; j < ncol; j++) {
        const int32_t a0 = col[j].p0 > c0 ? col[j].p0 : c0, a1 = col[j].p1 < c1 ? col[j].p1 : c1;
        if (a0 > a1) {
            w->st[j] = (attn_stat){-INFINITY, 0};
            continue;
        }
        column_softmax(w, j, a0 - c0, a1 - a0 + 1);
    }
    const size_t voff = w->kvh * g->vhbytes;
    const int inplace = ncol <= ATTN_INPLACE_COLS && hx_attn_values_type_ok((hx_type)a->v_type);
    if (inplace) {
        for (int32_t p = lo + KV_AHEAD; p <= hi + KV_AHEAD && p <= w->ahead_end; p++)
            prefetch_row(g->vc, l, w->blocks, p, g->vrbytes, voff, g->vhbytes);
    } else {
        for (int32_t p = lo, next; p <= hi;) {
            int32_t e = seen_run(col, ncol, p, l->block_size, &next);
            if (e < 0) {
                p = next;
                continue;
            }
            for (e = e < hi ? e : hi; p <= e; p++) {
                if (p + KV_AHEAD <= w->ahead_end)
                    prefetch_row(g->vc, l, w->blocks, p + KV_AHEAD, g->vrbytes, voff, g->vhbytes);
                g->vq->dequantize_row(kv_row(g->vc, l, w->blocks, p, g->vrbytes) + voff,
                                      w->vbuf + (size_t)(p - c0) * a->Dh, a->Dh);
            }
        }
    }
    chunk_values(w, col, ncol, c0, inplace);
}

/* Asks the L2 for part `part` of `parts` of the rows of positions p ..
 * last, every head's (within a block, one contiguous run of the cache). */
static void prefetch_part(const uint8_t *cache, const hx_kv_layout *l, const int32_t *blocks, int32_t p, int32_t last,
                          size_t rbytes, uint32_t part, uint32_t parts)
{
    for (int32_t e; p <= last; p = e + 1) {
        e = run_last(p, l->block_size, last);
        if (blocks[p / l->block_size] < 0)
            continue;
        const uint8_t *r = kv_row(cache, l, blocks, p, rbytes);
        const size_t lines = ((size_t)(e - p + 1) * rbytes + 63) / 64;
        for (size_t k = lines * part / parts; k < lines * (part + 1) / parts; k++)
            __builtin_prefetch(r + 64 * k, 0, 1);
    }
}

/* One token's partials of the chunk at c0, every head at once (a decode
 * step, in split mode or one of several sequences): columns
 * [KV head][group], all with the token's positions.
 * A cache row holds every KV head's K (or V) one after another, and the
 * kernels read a head's slice of four or sixteen rows at a time: an order
 * the hardware prefetchers follow badly (a thread then reads the cache
 * from memory at a third of the rate it streams at).  So every head meets
 * a block's rows before the next block, and the rows are asked for into
 * the L2 in their order in memory, a slice before each kernel call: the
 * chunk's V rows while its keys are scored, the next chunk's K rows while
 * its values are added.  A head's keys of a block run meet its queries in
 * one call (gemm_f32_block, where the K type has one: the tiles
 * score_rows runs, without a call per four rows), and up to
 * ATTN_HEADS_INPLACE_COLS query heads read the V rows in place.  The
 * kernels give the bits chunk_partial's give over the same rows in the
 * same order: a token's outputs are those of a prompt's token. */
static void chunk_partial_heads(const attn_tile *w, const attn_col *col, uint32_t group, int32_t c0)
{
    const attn_geom *g = w->g;
    const hx_op_attention *a = g->a;
    const hx_kv_layout *l = &a->kv;
    const int32_t p0 = col[0].p0 > c0 ? col[0].p0 : c0;
    const int32_t p1 = col[0].p1 < c0 + ATTN_CHUNK - 1 ? col[0].p1 : c0 + ATTN_CHUNK - 1;
    if (p0 > p1) {
        for (uint32_t j = 0; j < a->Hq; j++)
            w->st[j] = (attn_stat){-INFINITY, 0};
        return;
    }
    attn_tile head = *w;
    head.ahead_end = -1; /* score_rows asks for nothing: the rows are asked for here */
    for (int32_t p = p0, e; p <= p1; p = e + 1) {
        e = run_last(p, l->block_size, p1);
        const uint8_t *k0 = kv_row(g->kc, l, w->blocks, p, g->rbytes);
        if (g->kblock) { /* the run's tiles in one call per head */
            for (uint32_t kv = 0; kv < a->Hkv; kv++) {
                prefetch_part(g->vc, l, w->blocks, p, e, g->vrbytes, kv, a->Hkv);
                g->kblock(a->Dh, e - p + 1, group, w->score + (size_t)kv * group * ATTN_CHUNK + (p - c0), ATTN_CHUNK,
                          k0 + kv * g->hbytes, g->rbytes,
                          (const float *)(const void *)(w->q + (size_t)kv * group * g->qstride), g->qstride);
            }
            continue;
        }
        for (int32_t r = p; r <= e; r += 4) { /* score_rows' tiles of four rows, as over the whole run */
            const int32_t n = e - r + 1 < 4 ? e - r + 1 : 4;
            for (uint32_t kv = 0; kv < a->Hkv; kv++) {
                prefetch_part(g->vc, l, w->blocks, r, r + n - 1, g->vrbytes, kv, a->Hkv);
                head.q = w->q + (size_t)kv * group * g->qstride;
                score_rows(&head, group, k0 + (size_t)(r - p) * g->rbytes + kv * g->hbytes, n,
                           w->score + (size_t)kv * group * ATTN_CHUNK + (r - c0), r);
            }
        }
    }
    for (uint32_t j = 0; j < a->Hq; j++)
        column_softmax(w, j, p0 - c0, p1 - p0 + 1);
    const int inplace = group <= ATTN_HEADS_INPLACE_COLS && hx_attn_values_type_ok((hx_type)a->v_type);
    for (int32_t p = p0, e; p <= p1; p = e + 1) {
        e = run_last(p, l->block_size, p1);
        const int32_t n0 = p + ATTN_CHUNK, n1 = e + ATTN_CHUNK < w->ahead_end ? e + ATTN_CHUNK : w->ahead_end;
        for (uint32_t kv = 0; kv < a->Hkv; kv++) {
            prefetch_part(g->kc, l, w->blocks, n0, n1, g->rbytes, kv, a->Hkv);
            head.kvh = kv;
            for (int32_t r = p; !inplace && r <= e; r++)
                g->vq->dequantize_row(kv_row(g->vc, l, w->blocks, r, g->vrbytes) + kv * g->vhbytes,
                                      w->vbuf + (size_t)(r - c0) * a->Dh, a->Dh);
            add_values(&head, kv * group, group, c0, p, e, inplace);
        }
    }
}

/* Merges a chunk's partial (m, l, o) into a column's (*M, *L, O), chunks
 * in order: the first is copied; after that the side with the smaller
 * maximum is scaled by exp(its max - the larger). */
static void merge_partial(float *O, float *M, double *L, const float *o, float m, double l, uint32_t Dh)
{
    if (l == 0)
        return;
    if (*L == 0) {
        memcpy(O, o, Dh * sizeof(float));
        *M = m;
        *L = l;
    } else if (m > *M) {
        const float r = expf(*M - m);
        hx_vmath_scale_add(O, r, o, Dh);
        *L = *L * r + l;
        *M = m;
    } else {
        const float r = expf(m - *M);
        hx_vmath_add_scaled(O, o, r, Dh);
        *L += l * r;
    }
}

/* A merged column's output: the sum divided by the sum of weights, turned
 * back by H where the values were stored rotated; its stats for a part. */
static void column_finish(const hx_op_attention *a, float *O, float M, double L, float *stats)
{
    const float inv = (float)(1.0 / L);
    for (uint32_t d = 0; d < a->Dh; d++)
        O[d] *= inv;
    if (a->rot_v)
        hx_hadamard_rotate(O, a->Dh, a->rot_v);
    if (stats) {
        stats[0] = M;
        stats[1] = (float)L;
    }
}

/* A query quantized to the K rows' dot partner; rotated first as the
 * cache's keys were, so that their dot products are the plain ones. */
static void query_row(const hx_quant_ops *qq, const float *q, uint8_t *dst, uint32_t Dh, uint32_t rot)
{
    if (!rot) {
        qq->quantize_row(q, dst, Dh);
        return;
    }
    float x[HX_HADAMARD_MAX];
    memcpy(x, q, Dh * sizeof(float));
    hx_hadamard_rotate(x, Dh, rot);
    qq->quantize_row(x, dst, Dh);
}

/* Token t's positions: 0, or the window's start, to its own position;
 * then a part's cut.  1: some, 0: none (an empty part), -1: metadata
 * naming something outside the cache. */
static int token_range(const attn_geom *g, const hx_op_attention_part *part, const int32_t *meta, uint32_t t,
                       int32_t *p0_out, int32_t *p1_out)
{
    const hx_op_attention *a = g->a;
    const hx_kv_layout *l = &a->kv;
    const int32_t pos = hx_kv_token_pos(l, meta, t), seq = hx_kv_token_seq(l, meta, t);
    int32_t p0 = a->window && pos >= (int32_t)a->window ? pos - (int32_t)a->window + 1 : 0, p1 = pos;
    if (part && pos >= 0) {
        const int32_t cut = (int32_t)hx_attention_cut((uint32_t)pos, part->recent, l->block_size);
        if (part->part == 0)
            p1 = cut - 1 < p1 ? cut - 1 : p1;
        else
            p0 = cut > p0 ? cut : p0;
    }
    if (!context_in_cache(l, meta, p0, pos, seq, g->slots))
        return -1;
    *p0_out = p0;
    *p1_out = p1;
    return p1 >= p0;
}

/* A token's rows when it gets no attention: NaN for bad metadata (as on
 * every device: NaN rows and a failed task, and no read outside the
 * cache), zeros and an empty part's stats for no position. */
static void fill_rows(const hx_op_attention *a, float *o, float *st, uint32_t heads, int bad)
{
    for (uint64_t i = 0; i < (uint64_t)heads * a->Dh; i++)
        o[i] = bad ? NAN : 0.0f;
    for (uint32_t g = 0; st && g < heads; g++) {
        st[2 * g] = bad ? NAN : -INFINITY;
        st[2 * g + 1] = bad ? NAN : 0;
    }
}

static int geom_init(const hx_cpu_call *c, const hx_op_attention *a, attn_geom *g)
{
    const hx_quant_ops *kq = hx_quant_ops_get((hx_type)a->kv_type), *vq = hx_quant_ops_get((hx_type)a->v_type);
    if (!kq || !kq->gemm || !vq || !vq->dequantize_row || a->Hkv == 0 || a->Hq % a->Hkv)
        return HX_ERR_INVALID_ARG;
    const uint64_t kvrow = (uint64_t)a->Hkv * a->Dh;
    *g = (attn_geom){.a = a, .kq = kq, .vq = vq, .qq = hx_quant_ops_get(query_type(kq)),
                     .kgemm = kq->gemm_f32_act ? kq->gemm_f32_act : kq->gemm,
                     .kcols = kq->gemm_f32_act ? kq->gemm_f32_act_cols : kq->gemm_cols,
                     .rbytes = hx_type_row_size((hx_type)a->kv_type, kvrow),
                     .hbytes = hx_type_row_size((hx_type)a->kv_type, a->Dh), .qstride = qstride_of(a),
                     .vrbytes = hx_type_row_size((hx_type)a->v_type, kvrow),
                     .vhbytes = hx_type_row_size((hx_type)a->v_type, a->Dh), .kc = c->buffers[1],
                     .vc = c->buffers[2]};
    g->k_to_f32 = (kq->gemm_keep_f32 && kq->vec_dot_type == HX_TYPE_F32) || kq->gemm_f32_act;
    g->kblock = query_type(kq) == HX_TYPE_F32 ? kq->gemm_f32_block : NULL;
    if (!g->qq || !g->rbytes || !g->hbytes || g->hbytes * a->Hkv != g->rbytes || !g->vrbytes || !g->vhbytes ||
        g->vhbytes * a->Hkv != g->vrbytes)
        return HX_ERR_INVALID_ARG; /* rows must split into whole blocks per head */
    if (!hx_hadamard_width_ok(a->rot_k, a->Dh) || !hx_hadamard_width_ok(a->rot_v, a->Dh))
        return HX_ERR_INVALID_ARG;
    const uint64_t kslots = c->sizes[1] / g->rbytes, vslots = c->sizes[2] / g->vrbytes;
    g->slots = kslots < vslots ? kslots : vslots;
    return 0;
}

/* This thread's buffers in the scratch. */
static void tile_buffers(const hx_cpu_call *c, const attn_geom *g, attn_tile *w, attn_col **col)
{
    const hx_op_attention *a = g->a;
    const uint64_t cols = cols_cap(a, c->nth);
    uint8_t *p = (uint8_t *)c->scratch + attn_thread_bytes(a, c->nth) * (size_t)c->ith;
    *w = (attn_tile){.g = g};
    w->score = (float *)p;
    p += cols * ATTN_CHUNK * sizeof(float);
    w->q = p;
    p += cols * g->qstride;
    *col = (attn_col *)p;
    p += ALIGN64(cols * sizeof(attn_col));
    w->st = (attn_stat *)p;
    p += ALIGN64(cols * sizeof(attn_stat));
    w->o = (float *)p;
    p += ALIGN64(cols * a->Dh * sizeof(float));
    w->vbuf = (float *)p;
    p += ALIGN64(ATTN_CHUNK * a->Dh * sizeof(float));
    w->kbuf = (float *)p;
    p += ALIGN64(ATTN_CHUNK * a->Dh * sizeof(float));
    w->lone = (float *)p;
}

/* The end of the run of tokens from ta that one tile takes: consecutive,
 * of one sequence, at most ATTN_TILE. */
static uint32_t tile_end(const hx_kv_layout *l, const int32_t *meta, uint32_t ta)
{
    const int32_t seq = hx_kv_token_seq(l, meta, ta);
    uint32_t tb = ta + 1;
    while (tb < l->T && tb % ATTN_TILE != 0 && hx_kv_token_seq(l, meta, tb) == seq)
        tb++;
    return tb;
}

/* Tiles, each with a KV head's query heads (or one query head where the
 * groups are too few to keep the team busy), walk their chunks in order,
 * merging into the output rows. */
static int attend_tiles(const hx_cpu_call *c, const attn_geom *g, const hx_op_attention_part *part, float *stats)
{
    const hx_op_attention *a = g->a;
    const hx_kv_layout *l = &a->kv;
    const int32_t *meta = c->buffers[3];
    const float *qv = c->buffers[0];
    float *out = c->buffers[4];
    const uint32_t group = attn_group(a);
    attn_tile w;
    attn_col *col;
    tile_buffers(c, g, &w, &col);
    uint64_t tiles = 0;
    for (uint32_t ta = 0; ta < l->T; ta = tile_end(l, meta, ta))
        tiles++;
    /* Items go to the team in turn: a prompt's later tiles see more
     * positions.  A batch of lone tokens (a decode step of several
     * sequences) with enough of them takes each token's heads together,
     * walking its cache rows in order (chunk_partial_heads). */
    const int lone = tiles == l->T && tiles >= 2 * (uint64_t)c->nth;
    const uint32_t heads = lone ? a->Hq : tiles * a->Hkv >= 2 * (uint64_t)c->nth ? group : 1;
    const uint32_t per_tile = a->Hq / heads;
    int rc = 0;
    uint64_t it = 0;
    for (uint32_t ta = 0, tb; ta < l->T; ta = tb) {
        tb = tile_end(l, meta, ta);
        for (uint32_t k = 0; k < per_tile; k++) {
            if (it++ % (uint64_t)c->nth != (uint64_t)c->ith)
                continue;
            const uint32_t h0 = k * heads;
            w.kvh = h0 / group;
            w.blocks = hx_kv_seq_blocks(l, meta, hx_kv_token_seq(l, meta, ta));
            uint32_t ncol = 0;
            int32_t P0 = INT32_MAX, P1 = -1;
            for (uint32_t t = ta; t < tb; t++) {
                float *o0 = out + ((uint64_t)t * a->Hq + h0) * a->Dh;
                float *st = part ? stats + ((uint64_t)t * a->Hq + h0) * 2 : NULL;
                int32_t p0, p1;
                const int r = token_range(g, part, meta, t, &p0, &p1);
                if (r <= 0) {
                    fill_rows(a, o0, st, heads, r < 0);
                    rc = r < 0 ? HX_ERR_RANGE : rc;
                    continue;
                }
                for (uint32_t h = 0; h < heads; h++, ncol++) {
                    col[ncol] = (attn_col){.p0 = p0, .p1 = p1, .t = t, .h = h0 + h, .m = -INFINITY, .l = 0};
                    query_row(g->qq, qv + ((uint64_t)t * a->Hq + h0 + h) * a->Dh, (uint8_t *)w.q + ncol * g->qstride,
                              a->Dh, a->rot_k);
                }
                P0 = p0 < P0 ? p0 : P0;
                P1 = p1 > P1 ? p1 : P1;
            }
            if (!ncol)
                continue;
            w.ahead_end = P1;
            for (int32_t c0 = P0 - P0 % ATTN_CHUNK; c0 <= P1; c0 += ATTN_CHUNK) {
                if (lone)
                    chunk_partial_heads(&w, col, group, c0);
                else
                    chunk_partial(&w, col, ncol, c0);
                for (uint32_t j = 0; j < ncol; j++)
                    merge_partial(out + ((uint64_t)col[j].t * a->Hq + col[j].h) * a->Dh, &col[j].m, &col[j].l,
                                  w.o + (size_t)j * a->Dh, w.st[j].m, w.st[j].l, a->Dh);
            }
            for (uint32_t j = 0; j < ncol; j++)
                column_finish(a, out + ((uint64_t)col[j].t * a->Hq + col[j].h) * a->Dh, col[j].m, col[j].l,
                              part ? stats + ((uint64_t)col[j].t * a->Hq + col[j].h) * 2 : NULL);
        }
    }
    return rc;
}

/* Columns' partials of chunk ci (w->st, w->o) into split mode's scratch. */
static void store_partials(const attn_tile *w, const hx_op_attention *a, const attn_col *col, uint32_t ncol,
                           uint8_t *partials, int32_t ci)
{
    const uint64_t nch = attn_chunks(a);
    const size_t pb = partial_bytes(a);
    for (uint32_t j = 0; j < ncol; j++) {
        uint8_t *dst = partials + (((uint64_t)col[j].t * a->Hq + col[j].h) * nch + (uint64_t)ci) * pb;
        memcpy(dst, &w->st[j], sizeof(attn_stat));
        if (w->st[j].l != 0)
            memcpy(dst + sizeof(attn_stat), w->o + (size_t)j * a->Dh, a->Dh * sizeof(float));
    }
}

/* Split mode, first phase: the (tile, chunk) pairs in a row, each thread a
 * consecutive share of them, every head of each; the partials go to
 * scratch at [t][h][chunk]. */
static void split_partials(const hx_cpu_call *c, const attn_geom *g, const hx_op_attention_part *part)
{
    const hx_op_attention *a = g->a;
    const hx_kv_layout *l = &a->kv;
    const int32_t *meta = c->buffers[3];
    const float *qv = c->buffers[0];
    const uint32_t group = attn_group(a);
    uint8_t *partials = (uint8_t *)c->scratch + attn_thread_bytes(a, c->nth) * (size_t)c->nth;
    attn_tile w;
    attn_col *col;
    tile_buffers(c, g, &w, &col);
    /* Count the pairs: a tile's chunks from its first seen position's to
     * its last's. */
    uint64_t total = 0;
    for (uint32_t ta = 0; ta < l->T; ta = tile_end(l, meta, ta)) {
        int32_t P0 = INT32_MAX, P1 = -1, p0, p1;
        for (uint32_t t = ta; t < tile_end(l, meta, ta); t++)
            if (token_range(g, part, meta, t, &p0, &p1) > 0) {
                P0 = p0 < P0 ? p0 : P0;
                P1 = p1 > P1 ? p1 : P1;
            }
        total += P1 < 0 ? 0 : (uint64_t)(P1 / ATTN_CHUNK - P0 / ATTN_CHUNK + 1);
    }
    uint64_t lo, hi, at = 0;
    hx_cpu_split(total, c->ith, c->nth, &lo, &hi);
    for (uint32_t ta = 0, tb; ta < l->T && at < hi; ta = tb) {
        tb = tile_end(l, meta, ta);
        /* The tile's columns, KV head by KV head: [kvh][token][head of the group]. */
        uint32_t ntok = 0;
        int32_t P0 = INT32_MAX, P1 = -1;
        for (uint32_t t = ta; t < tb; t++) {
            int32_t p0, p1;
            if (token_range(g, part, meta, t, &p0, &p1) <= 0)
                continue;
            for (uint32_t h = 0; h < a->Hq; h++)
                col[(h / group) * (tb - ta) * group + ntok * group + h % group] =
                    (attn_col){.p0 = p0, .p1 = p1, .t = t, .h = h};
            ntok++;
            P0 = p0 < P0 ? p0 : P0;
            P1 = p1 > P1 ? p1 : P1;
        }
        if (P1 < 0)
            continue;
        const uint64_t n = (uint64_t)(P1 / ATTN_CHUNK - P0 / ATTN_CHUNK + 1);
        if (at + n <= lo) {
            at += n;
            continue;
        }
        const uint64_t first = lo > at ? lo - at : 0, last = hi - at < n ? hi - at : n;
        const uint32_t per_kvh = (tb - ta) * group, cols = ntok * group;
        for (uint32_t kv = 0; kv < a->Hkv; kv++)
            for (uint32_t j = 0; j < cols; j++) {
                const attn_col *cj = &col[kv * per_kvh + j];
                query_row(g->qq, qv + ((uint64_t)cj->t * a->Hq + cj->h) * a->Dh,
                          (uint8_t *)w.q + ((size_t)kv * per_kvh + j) * g->qstride, a->Dh, a->rot_k);
            }
        w.blocks = hx_kv_seq_blocks(l, meta, hx_kv_token_seq(l, meta, ta));
        const int32_t cbase = P0 / ATTN_CHUNK;
        w.ahead_end = (int32_t)((cbase + (int64_t)last) * ATTN_CHUNK - 1);
        w.ahead_end = w.ahead_end < P1 ? w.ahead_end : P1;
        for (uint64_t k = first; k < last; k++) {
            const int32_t ci = cbase + (int32_t)k;
            if (tb - ta == 1 && ntok == 1) { /* one token: its columns are [kvh][group] */
                chunk_partial_heads(&w, col, group, ci * ATTN_CHUNK);
                store_partials(&w, a, col, a->Hq, partials, ci);
                continue;
            }
            for (uint32_t kv = 0; kv < a->Hkv; kv++) {
                attn_tile wk = w;
                wk.kvh = kv;
                wk.q = w.q + (size_t)kv * per_kvh * g->qstride;
                const attn_col *ck = col + kv * per_kvh;
                chunk_partial(&wk, ck, cols, ci * ATTN_CHUNK);
                store_partials(&w, a, ck, cols, partials, ci);
            }
        }
        at += n;
    }
}

/* Split mode, second phase: each (token, head) row merges its chunks'
 * partials in order. */
static int split_merge(const hx_cpu_call *c, const attn_geom *g, const hx_op_attention_part *part, float *stats)
{
    const hx_op_attention *a = g->a;
    const int32_t *meta = c->buffers[3];
    float *out = c->buffers[4];
    const uint64_t nch = attn_chunks(a);
    const size_t pb = partial_bytes(a);
    const uint8_t *partials = (const uint8_t *)c->scratch + attn_thread_bytes(a, c->nth) * (size_t)c->nth;
    uint64_t lo, hi;
    int rc = 0;
    hx_cpu_split((uint64_t)a->kv.T * a->Hq, c->ith, c->nth, &lo, &hi);
    for (uint64_t r = lo; r < hi; r++) {
        const uint32_t t = (uint32_t)(r / a->Hq);
        float *o = out + r * a->Dh, *st = part ? stats + r * 2 : NULL;
        int32_t p0, p1;
        const int k = token_range(g, part, meta, t, &p0, &p1);
        if (k <= 0) {
            fill_rows(a, o, st, 1, k < 0);
            rc = k < 0 ? HX_ERR_RANGE : rc;
            continue;
        }
        float M = -INFINITY;
        double L = 0;
        for (int32_t ci = p0 / ATTN_CHUNK; ci <= p1 / ATTN_CHUNK; ci++) {
            const uint8_t *src = partials + (r * nch + (uint64_t)ci) * pb;
            attn_stat s;
            memcpy(&s, src, sizeof s);
            merge_partial(o, &M, &L, (const float *)(const void *)(src + sizeof(attn_stat)), s.m, s.l, a->Dh);
        }
        column_finish(a, o, M, L, st);
    }
    return rc;
}

/* Attention over each token's positions, or (`part` not NULL) over one
 * part of them with the part's maxima and sums into `stats`. */
static int attend(const hx_cpu_call *c, const hx_op_attention *a, const hx_op_attention_part *part, float *stats)
{
    attn_geom g;
    const int rc = geom_init(c, a, &g);
    if (rc)
        return rc;
    return split_mode(a, c->nth) ? split_merge(c, &g, part, stats) : attend_tiles(c, &g, part, stats);
}

/* The first phase: split mode's partials; nothing otherwise. */
static int attend_prepare(const hx_cpu_call *c, const hx_op_attention *a, const hx_op_attention_part *part)
{
    attn_geom g;
    if (!split_mode(a, c->nth) || geom_init(c, a, &g))
        return 0; /* the second phase reports bad arguments */
    split_partials(c, &g, part);
    return 0;
}

int hx_cpu_attention(const hx_cpu_call *c) { return attend(c, c->args, NULL, NULL); }
int hx_cpu_attention_prepare(const hx_cpu_call *c) { return attend_prepare(c, c->args, NULL); }

size_t hx_cpu_attention_part_scratch(const void *args, const size_t *sizes, int nth)
{
    return hx_cpu_attention_scratch(&((const hx_op_attention_part *)args)->at, sizes, nth);
}

static int part_args_ok(const hx_cpu_call *c)
{
    const hx_op_attention_part *p = c->args;
    const uint64_t rows = (uint64_t)p->at.kv.T * p->at.Hq;
    return p->recent != 0 && p->part <= 1 && c->sizes[5] >= rows * 2 * sizeof(float) &&
           c->sizes[4] >= rows * p->at.Dh * sizeof(float);
}

int hx_cpu_attention_part(const hx_cpu_call *c)
{
    const hx_op_attention_part *p = c->args;
    if (!part_args_ok(c))
        return HX_ERR_INVALID_ARG;
    return attend(c, &p->at, p, c->buffers[5]);
}

int hx_cpu_attention_part_prepare(const hx_cpu_call *c)
{
    const hx_op_attention_part *p = c->args;
    return part_args_ok(c) ? attend_prepare(c, &p->at, p) : 0;
}
