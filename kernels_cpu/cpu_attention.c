/* Attention on the CPU over the paged KV cache (ops/ops.h "attention" and
 * "attention_part").
 *
 * Work is cut into tiles: up to ATTN_TILE consecutive tokens of one
 * sequence (a prompt's, or one decode token) with the query heads of one
 * KV head (grouped-query attention).  A tile's columns, one per (token,
 * query head), meet each K row in one gemm tile of the KV type (4 rows x
 * up to HX_GEMM_COLS columns, kernels_cpu/quant.h) and each V row once
 * dequantized, where one token at a time re-read and re-converted the
 * context for each token.  Every column's arithmetic is the same whatever
 * tile holds it: its scores come from the same gemm kernel, a lone K row
 * through the tile with a zero row stride; its softmax and V sum run over
 * its own positions in order (hx_quant_add_scaled_rows: a multiply and an
 * add per position, as at every level).  A token's outputs therefore keep their
 * bits whether it is evaluated alone, in a prompt or beside other
 * sequences, as the prefix cache and the serving engine rely on. */
#include <math.h>
#include <string.h>

#include "kernels_cpu/cpu_kernels.h"
#include "kernels_cpu/hadamard.h"
#include "kernels_cpu/kv_meta.h"
#include "kernels_cpu/quant.h"
#include "kernels_cpu/vmath.h"
#include "ops/ops.h"

#define ALIGN64(n) (((n) + 63) & ~(size_t)63)

/* Tokens of one sequence whose queries meet each K and V row together. */
#define ATTN_TILE 16
/* At most this many bytes of a tile's scores per thread: a long context
 * takes fewer tokens a tile. */
#define ATTN_SCORE_BYTES (2u << 20)
/* V rows dequantized at a time, which every column then sums from L1
 * with its accumulators in registers. */
#define ATTN_V_ROWS 64

/* A head's K or V row lies rbytes past the last one's (the other heads'
 * rows between) and a block's end jumps to another block: a stride the
 * hardware prefetchers follow badly, and with many sequences the cache
 * is far larger than the caches, so each pass asks for its rows this
 * many positions ahead. */
#define KV_AHEAD 6

/* One column of a tile: a token's query head and the positions it sees. */
typedef struct {
    int32_t p0, p1; /* first and last position */
    uint32_t t, h;  /* token in the batch, query head */
} attn_col;

static uint32_t attn_group(const hx_op_attention *a) { return a->Hkv ? a->Hq / a->Hkv : 1; }
static uint64_t attn_ctx(const hx_op_attention *a) { return (uint64_t)a->kv.max_blocks * a->kv.block_size; }

static uint32_t tile_tokens(const hx_op_attention *a)
{
    const uint64_t per = attn_group(a) * ALIGN64(attn_ctx(a) * sizeof(float));
    const uint64_t n = per ? ATTN_SCORE_BYTES / per : ATTN_TILE;
    return n < 1 ? 1 : n > ATTN_TILE ? ATTN_TILE : (uint32_t)n;
}

/* Per thread, for a tile's columns: scores over the whole context (by
 * position), the queries quantized to the K rows' dot partner, the
 * columns; then ATTN_V_ROWS dequantized V rows and a gemm tile's outputs
 * for a lone K row. */
static size_t attn_thread_bytes(const hx_op_attention *a)
{
    const hx_quant_ops *q = hx_quant_ops_get((hx_type)a->kv_type);
    const size_t qrow = q ? hx_type_row_size(q->vec_dot_type, a->Dh) : 0;
    const uint64_t cols = (uint64_t)tile_tokens(a) * attn_group(a);
    return cols * (ALIGN64(attn_ctx(a) * sizeof(float)) + ALIGN64(qrow)) + ALIGN64(cols * sizeof(attn_col)) +
           ALIGN64(ATTN_V_ROWS * a->Dh * sizeof(float)) + ALIGN64(4 * HX_GEMM_COLS_MAX * sizeof(float));
}

size_t hx_cpu_attention_scratch(const void *args, const size_t *sizes, int nth)
{
    (void)sizes;
    return attn_thread_bytes(args) * (size_t)nth;
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
    if (end < 0)
        return -1;
    const int32_t bend = (p / (int32_t)block_size + 1) * (int32_t)block_size - 1;
    return end < bend ? end : bend;
}

typedef struct {
    const hx_op_attention *a;
    const hx_quant_ops *kq, *vq;
    size_t rbytes, hbytes, qstride; /* K's row and head bytes */
    size_t vrbytes, vhbytes;        /* V's */
    const uint8_t *kc, *vc;
    const int32_t *blocks;
    uint32_t kvh;
    float *score; /* [ncol][per_col] */
    size_t per_col;
    const uint8_t *q; /* [ncol][qstride] */
    float *lone;      /* [HX_GEMM_COLS_MAX][4] */
} attn_tile;

/* scores[j][p] = dot(K row p, query j) for every position p a column
 * sees, four rows a gemm tile where a block's run has them. */
static void tile_scores(const attn_tile *w, const attn_col *col, uint32_t ncol, int32_t P0, int32_t P1)
{
    const hx_op_attention *a = w->a;
    const hx_kv_layout *l = &a->kv;
    const uint32_t step = (uint32_t)w->kq->gemm_cols;
    const size_t koff = w->kvh * w->hbytes;
    for (int32_t p = P0, next; p != INT32_MAX;) {
        const int32_t e = seen_run(col, ncol, p, l->block_size, &next);
        if (e < 0) {
            p = next;
            continue;
        }
        const uint8_t *k0 = kv_row(w->kc, l, w->blocks, p, w->rbytes) + koff;
        const int32_t n = e - p + 1;
        int32_t i = 0;
        for (; i + 4 <= n; i += 4) {
            for (int32_t f = 0; f < 4 && p + i + KV_AHEAD + f <= P1; f++)
                prefetch_row(w->kc, l, w->blocks, p + i + KV_AHEAD + f, w->rbytes, koff, w->hbytes);
            for (uint32_t j = 0; j < ncol; j += step) {
                const int nc = (int)(ncol - j < step ? ncol - j : step);
                w->kq->gemm(a->Dh, nc, w->score + j * w->per_col + p + i, w->per_col, k0 + (size_t)i * w->rbytes,
                            w->rbytes, w->q + j * w->qstride, w->qstride);
            }
        }
        for (; i < n; i++)
            for (uint32_t j = 0; j < ncol; j += step) {
                const int nc = (int)(ncol - j < step ? ncol - j : step);
                w->kq->gemm(a->Dh, nc, w->lone, 4, k0 + (size_t)i * w->rbytes, 0, w->q + j * w->qstride,
                            w->qstride);
                for (int c = 0; c < nc; c++)
                    w->score[(j + c) * w->per_col + p + i] = w->lone[4 * c];
            }
        p = e + 1;
    }
}

/* Each column's softmax over its own positions, in order: the largest
 * scaled score, exp(score - max), 1 / their sum; in place, each
 * position's weight exp(score - max) x (1 / sum). */
static void tile_softmax(const attn_tile *w, attn_col *col, uint32_t ncol, float *stats)
{
    for (uint32_t j = 0; j < ncol; j++) {
        float *sc = w->score + j * w->per_col;
        float mx = -INFINITY;
        for (int32_t p = col[j].p0; p <= col[j].p1; p++) {
            sc[p] *= w->a->scale;
            if (sc[p] > mx)
                mx = sc[p];
        }
        hx_vmath_exp_shifted(sc + col[j].p0, mx, col[j].p1 - col[j].p0 + 1);
        double sum = 0;
        for (int32_t p = col[j].p0; p <= col[j].p1; p++)
            sum += sc[p];
        const float inv = (float)(1.0 / sum);
        for (int32_t p = col[j].p0; p <= col[j].p1; p++)
            sc[p] *= inv;
        if (stats) {
            float *st = stats + ((uint64_t)col[j].t * w->a->Hq + col[j].h) * 2;
            st[0] = mx;
            st[1] = (float)sum;
        }
    }
}

/* A column's sum over its positions in [c0, c1] (`weight` its softmax
 * weights by position), straight from the F16 cache rows: one call per
 * run of positions within a block, whose rows lie one cache row apart. */
static void column_values_f16(const attn_tile *w, const attn_col *cj, const float *weight, int32_t c0, int32_t c1,
                              float *oj, size_t voff)
{
    const hx_kv_layout *l = &w->a->kv;
    const int32_t bs = (int32_t)l->block_size;
    int32_t p = cj->p0 > c0 ? cj->p0 : c0;
    const int32_t hi = cj->p1 < c1 ? cj->p1 : c1;
    while (p <= hi) {
        const int32_t bend = (p / bs + 1) * bs - 1, e = bend < hi ? bend : hi;
        const hx_half *v = (const hx_half *)(const void *)(kv_row(w->vc, l, w->blocks, p, w->vrbytes) + voff);
        hx_quant_add_scaled_rows_f16(oj, v, w->vrbytes / sizeof(hx_half), weight + p,
                                     e - p + 1, w->a->Dh);
        p = e + 1;
    }
}

/* out[j] = sum over its positions p, in order, of weight(j, p) x V row p,
 * ATTN_V_ROWS positions at a time for every column, so that the tile's
 * columns meet each V row while it is in L1: read as F16 where the cache
 * holds F16, else each row dequantized once for the tile's columns. */
static void tile_values(const attn_tile *w, const attn_col *col, uint32_t ncol, int32_t P0, int32_t P1, float *out,
                        float *vbuf)
{
    const hx_op_attention *a = w->a;
    const hx_kv_layout *l = &a->kv;
    const size_t voff = w->kvh * w->vhbytes;
    for (uint32_t j = 0; j < ncol; j++)
        memset(out + ((uint64_t)col[j].t * a->Hq + col[j].h) * a->Dh, 0, a->Dh * sizeof(float));
    for (int32_t c0 = P0; c0 <= P1; c0 += ATTN_V_ROWS) {
        const int32_t c1 = P1 - c0 >= ATTN_V_ROWS ? c0 + ATTN_V_ROWS - 1 : P1;
        if (a->v_type == HX_TYPE_F16) {
            for (int32_t p = c0 + KV_AHEAD; p <= c1 + KV_AHEAD && p <= P1; p++)
                prefetch_row(w->vc, l, w->blocks, p, w->vrbytes, voff, w->vhbytes);
            for (uint32_t j = 0; j < ncol; j++)
                column_values_f16(w, &col[j], w->score + j * w->per_col, c0, c1,
                                  out + ((uint64_t)col[j].t * a->Hq + col[j].h) * a->Dh, voff);
            continue;
        }
        for (int32_t p = c0, next; p <= c1;) {
            int32_t e = seen_run(col, ncol, p, l->block_size, &next);
            if (e < 0) {
                p = next;
                continue;
            }
            for (e = e < c1 ? e : c1; p <= e; p++) {
                if (p + KV_AHEAD <= P1)
                    prefetch_row(w->vc, l, w->blocks, p + KV_AHEAD, w->vrbytes, voff, w->vhbytes);
                w->vq->dequantize_row(kv_row(w->vc, l, w->blocks, p, w->vrbytes) + voff,
                                      vbuf + (size_t)(p - c0) * a->Dh, a->Dh);
            }
        }
        for (uint32_t j = 0; j < ncol; j++) {
            const int32_t lo = col[j].p0 > c0 ? col[j].p0 : c0, hi = col[j].p1 < c1 ? col[j].p1 : c1;
            if (lo <= hi)
                hx_quant_add_scaled_rows(out + ((uint64_t)col[j].t * a->Hq + col[j].h) * a->Dh,
                                         vbuf + (size_t)(lo - c0) * a->Dh, a->Dh, w->score + j * w->per_col + lo,
                                         hi - lo + 1, a->Dh);
        }
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

/* Attention over each token's positions, or (`part` not NULL) over one
 * part of them with the part's maxima and sums into `stats`. */
static int attend(const hx_cpu_call *c, const hx_op_attention *a, const hx_op_attention_part *part, float *stats)
{
    const hx_kv_layout *l = &a->kv;
    const hx_quant_ops *kq = hx_quant_ops_get((hx_type)a->kv_type), *vq = hx_quant_ops_get((hx_type)a->v_type);
    if (!kq || !kq->gemm || !vq || !vq->dequantize_row || a->Hkv == 0 || a->Hq % a->Hkv)
        return HX_ERR_INVALID_ARG;
    const hx_quant_ops *qq = hx_quant_ops_get(kq->vec_dot_type);
    const uint64_t kvrow = (uint64_t)a->Hkv * a->Dh;
    const size_t rbytes = hx_type_row_size((hx_type)a->kv_type, kvrow);
    const size_t hbytes = hx_type_row_size((hx_type)a->kv_type, a->Dh);
    const size_t vrbytes = hx_type_row_size((hx_type)a->v_type, kvrow);
    const size_t vhbytes = hx_type_row_size((hx_type)a->v_type, a->Dh);
    if (!rbytes || !hbytes || hbytes * a->Hkv != rbytes || !vrbytes || !vhbytes || vhbytes * a->Hkv != vrbytes)
        return HX_ERR_INVALID_ARG; /* rows must split into whole blocks per head */
    if (!hx_hadamard_width_ok(a->rot_k, a->Dh) || !hx_hadamard_width_ok(a->rot_v, a->Dh))
        return HX_ERR_INVALID_ARG;
    const float *qv = c->buffers[0];
    const int32_t *meta = c->buffers[3];
    float *out = c->buffers[4];
    const uint64_t kslots = c->sizes[1] / rbytes, vslots = c->sizes[2] / vrbytes;
    const uint64_t slots = kslots < vslots ? kslots : vslots;
    const uint32_t group = attn_group(a), QT = tile_tokens(a);
    const uint64_t cols_max = (uint64_t)QT * group;

    uint8_t *mine = (uint8_t *)c->scratch + attn_thread_bytes(a) * (size_t)c->ith;
    attn_tile w = {.a = a, .kq = kq, .vq = vq, .rbytes = rbytes, .hbytes = hbytes, .vrbytes = vrbytes,
                   .vhbytes = vhbytes,
                   .qstride = ALIGN64(hx_type_row_size(kq->vec_dot_type, a->Dh)), .kc = c->buffers[1],
                   .vc = c->buffers[2], .score = (float *)mine, .per_col = ALIGN64(attn_ctx(a) * sizeof(float)) / sizeof(float)};
    uint8_t *qrow = mine + cols_max * w.per_col * sizeof(float);
    attn_col *col = (attn_col *)(qrow + cols_max * w.qstride);
    float *vbuf = (float *)((uint8_t *)col + ALIGN64(cols_max * sizeof(attn_col)));
    w.q = qrow;
    w.lone = vbuf + ALIGN64(ATTN_V_ROWS * a->Dh * sizeof(float)) / sizeof(float);

    /* Tiles: runs of consecutive tokens of one sequence, at most QT long. */
    uint64_t tiles = 0;
    for (uint32_t t = 0; t < l->T; t++)
        tiles += t == 0 || t % QT == 0 || hx_kv_token_seq(l, meta, t) != hx_kv_token_seq(l, meta, t - 1);
    /* An item is a tile with a KV head's group of query heads, or with one
     * query head where the groups are too few to keep the team busy (a
     * decode step of one sequence has as many as KV heads).  Items go to
     * the team in turn: a prompt's later tiles see more positions. */
    const uint32_t heads = tiles * a->Hkv >= 2 * (uint64_t)c->nth ? group : 1;
    const uint32_t per_tile = a->Hq / heads;
    int rc = 0;
    uint64_t it = 0;
    for (uint32_t ta = 0, tb; ta < l->T; ta = tb) {
        const int32_t seq = hx_kv_token_seq(l, meta, ta);
        for (tb = ta + 1; tb < l->T && tb % QT != 0 && hx_kv_token_seq(l, meta, tb) == seq; tb++)
            ;
        for (uint32_t k = 0; k < per_tile; k++) {
            if (it++ % (uint64_t)c->nth != (uint64_t)c->ith)
                continue;
            const uint32_t h0 = k * heads;
            w.kvh = h0 / group;
            uint32_t ncol = 0;
            int32_t P0 = INT32_MAX, P1 = -1; /* the first and last position a column sees */
            for (uint32_t t = ta; t < tb; t++) {
                const int32_t pos = hx_kv_token_pos(l, meta, t);
                float *o0 = out + ((uint64_t)t * a->Hq + h0) * a->Dh;
                float *st = part ? stats + ((uint64_t)t * a->Hq + h0) * 2 : NULL;
                /* The first position it sees: 0, or the window's start;
                 * then the part's cut. */
                int32_t p0 = a->window && pos >= (int32_t)a->window ? pos - (int32_t)a->window + 1 : 0;
                int32_t p1 = pos;
                if (part && pos >= 0) {
                    const int32_t cut = (int32_t)hx_attention_cut((uint32_t)pos, part->recent, l->block_size);
                    if (part->part == 0)
                        p1 = cut - 1 < p1 ? cut - 1 : p1;
                    else
                        p0 = cut > p0 ? cut : p0;
                }
                /* Bad metadata, as on every device: NaN rows and a
                 * failed task, and no read outside the cache. */
                if (!context_in_cache(l, meta, p0, pos, seq, slots)) {
                    for (uint64_t i = 0; i < (uint64_t)heads * a->Dh; i++)
                        o0[i] = NAN;
                    for (uint32_t g = 0; st && g < heads; g++)
                        st[2 * g] = st[2 * g + 1] = NAN;
                    rc = HX_ERR_RANGE;
                    continue;
                }
                if (p1 < p0) { /* an empty part */
                    memset(o0, 0, (size_t)heads * a->Dh * sizeof(float));
                    for (uint32_t g = 0; st && g < heads; g++) {
                        st[2 * g] = -INFINITY;
                        st[2 * g + 1] = 0;
                    }
                    continue;
                }
                for (uint32_t g = 0; g < heads; g++, ncol++) {
                    col[ncol] = (attn_col){.p0 = p0, .p1 = p1, .t = t, .h = h0 + g};
                    query_row(qq, qv + ((uint64_t)t * a->Hq + h0 + g) * a->Dh, qrow + ncol * w.qstride, a->Dh,
                              a->rot_k);
                }
                P0 = p0 < P0 ? p0 : P0;
                P1 = p1 > P1 ? p1 : P1;
            }
            if (!ncol)
                continue;
            w.blocks = hx_kv_seq_blocks(l, meta, seq);
            tile_scores(&w, col, ncol, P0, P1);
            tile_softmax(&w, col, ncol, stats);
            tile_values(&w, col, ncol, P0, P1, out, vbuf);
            /* Rotated values sum to the rotated output: H turns it back. */
            for (uint32_t j = 0; a->rot_v && j < ncol; j++)
                hx_hadamard_rotate(out + ((uint64_t)col[j].t * a->Hq + col[j].h) * a->Dh, a->Dh, a->rot_v);
        }
    }
    return rc;
}

int hx_cpu_attention(const hx_cpu_call *c) { return attend(c, c->args, NULL, NULL); }

size_t hx_cpu_attention_part_scratch(const void *args, const size_t *sizes, int nth)
{
    return hx_cpu_attention_scratch(&((const hx_op_attention_part *)args)->at, sizes, nth);
}

int hx_cpu_attention_part(const hx_cpu_call *c)
{
    const hx_op_attention_part *p = c->args;
    const uint64_t rows = (uint64_t)p->at.kv.T * p->at.Hq;
    if (p->recent == 0 || p->part > 1 || c->sizes[5] < rows * 2 * sizeof(float) ||
        c->sizes[4] < rows * p->at.Dh * sizeof(float))
        return HX_ERR_INVALID_ARG;
    return attend(c, &p->at, p, c->buffers[5]);
}
