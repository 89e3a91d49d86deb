/* CPU implementations of the transformer layer's operations (ops/ops.h).
 * Each runs on the whole CPU team: member ith of nth takes its share of
 * rows, and the quantized dot products come from kernels_cpu/quant.h with the
 * best SIMD level the processor has. */
#include <math.h>
#include <string.h>

#include "kernels_cpu/attn_merge.h"
#include "kernels_cpu/cpu_kernels.h"
#include "kernels_cpu/hadamard.h"
#include "kernels_cpu/kv_meta.h"
#include "kernels_cpu/matmul_rows.h"
#include "kernels_cpu/quant.h"
#include "kernels_cpu/repack.h"
#include "kernels_cpu/vmath.h"
#include "ops/ops.h"

#define ALIGN64(n) (((n) + 63) & ~(size_t)63)

/* ---- get_rows ------------------------------------------------------------ */

int hx_cpu_get_rows(const hx_cpu_call *c)
{
    const hx_op_get_rows *a = c->args;
    const hx_quant_ops *q = hx_quant_ops_get((hx_type)a->type);
    size_t row = hx_type_row_size((hx_type)a->type, a->D);
    if (!q || !row)
        return HX_ERR_UNSUPPORTED;
    const uint8_t *table = c->buffers[0];
    const int32_t *ids = c->buffers[1];
    float *out = c->buffers[2];
    uint64_t V = c->sizes[0] / row, lo, hi;
    int rc = 0;
    hx_cpu_split(a->T, c->ith, c->nth, &lo, &hi);
    for (uint64_t t = lo; t < hi; t++) {
        if (ids[t] < 0 || (uint64_t)ids[t] >= V) {
            /* As on every device: the row is NaN and the task fails. */
            for (uint32_t i = 0; i < a->D; i++)
                out[t * a->D + i] = NAN;
            rc = HX_ERR_RANGE;
            continue;
        }
        q->dequantize_row(table + (uint64_t)ids[t] * row, out + t * a->D, a->D);
    }
    return rc;
}

/* ---- rmsnorm ------------------------------------------------------------- */

int hx_cpu_rmsnorm(const hx_cpu_call *c)
{
    const hx_op_rmsnorm *a = c->args;
    const float *x = c->buffers[0], *w = c->buffers[1];
    float *y = c->buffers[2];
    uint64_t lo, hi;
    hx_cpu_split(a->T, c->ith, c->nth, &lo, &hi);
    for (uint64_t t = lo; t < hi; t++) {
        const float *xr = x + t * a->D;
        float *yr = y + t * a->D;
        /* Eight partial sums in double: one chain of dependent adds held a
         * row of 512 for 2048 cycles, 2 % of a small model's prompt. */
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
        uint32_t i = 0;
        for (; i + 8 <= a->D; i += 8) {
            s0 += (double)xr[i] * xr[i], s1 += (double)xr[i + 1] * xr[i + 1];
            s2 += (double)xr[i + 2] * xr[i + 2], s3 += (double)xr[i + 3] * xr[i + 3];
            s4 += (double)xr[i + 4] * xr[i + 4], s5 += (double)xr[i + 5] * xr[i + 5];
            s6 += (double)xr[i + 6] * xr[i + 6], s7 += (double)xr[i + 7] * xr[i + 7];
        }
        double ss = ((s0 + s4) + (s1 + s5)) + ((s2 + s6) + (s3 + s7));
        for (; i < a->D; i++)
            ss += (double)xr[i] * xr[i];
        float scale = (float)(1.0 / sqrt(ss / a->D + a->eps));
        for (uint32_t i = 0; i < a->D; i++)
            yr[i] = xr[i] * scale * w[i];
    }
    return 0;
}

/* ---- matmul -------------------------------------------------------------- */

/* Activations quantized once into scratch, shared by the team: T rows of
 * the weight type's vec_dot partner. */
size_t hx_matmul_act_row(uint32_t wtype, uint32_t K)
{
    const hx_quant_ops *q = hx_quant_ops_get((hx_type)wtype);
    return q ? hx_type_row_size(q->vec_dot_type, K) : 0;
}

int hx_matmul_reads_input(uint32_t wtype)
{
    const hx_quant_ops *q = hx_quant_ops_get((hx_type)wtype);
    return q && q->vec_dot_type == HX_TYPE_F32;
}

/* The scratch's first part: the quantized activation rows, where the
 * kernels do not read the input itself. */
static size_t act_bytes(const hx_op_matmul *a)
{
    return hx_matmul_reads_input(a->wtype) ? 0 : ALIGN64(hx_matmul_act_row(a->wtype, a->K) * a->T);
}

size_t hx_cpu_matmul_scratch(const void *args, const size_t *sizes, int nth)
{
    const hx_op_matmul *a = args;
    return act_bytes(a) + (size_t)nth * hx_matmul_convert_bytes(a->wtype, a->K, a->T);
}

/* Phase one: the activation rows, quantized to the weights' dot partner. */
int hx_cpu_matmul_prepare(const hx_cpu_call *c)
{
    const hx_op_matmul *a = c->args;
    const hx_quant_ops *q = hx_quant_ops_get((hx_type)a->wtype);
    size_t arow = hx_matmul_act_row(a->wtype, a->K);
    if (!q || !arow)
        return HX_ERR_UNSUPPORTED;
    if (c->sizes[1] < (size_t)a->T * a->K * sizeof(float))
        return HX_ERR_RANGE;
    if (hx_matmul_reads_input(a->wtype))
        return 0;
    const float *x = c->buffers[1];
    uint8_t *xq = c->scratch;
    const hx_quant_ops *aq = hx_quant_ops_get(q->vec_dot_type);
    uint64_t lo, hi;
    hx_cpu_split(a->T, c->ith, c->nth, &lo, &hi);
    for (uint64_t t = lo; t < hi; t++)
        aq->quantize_row(x + t * a->K, xq + t * arow, a->K);
    return 0;
}

uint64_t hx_cpu_matmul_prepare_elems(const void *args)
{
    const hx_op_matmul *a = args;
    /* 0 where the input is read in place: the phase then only checks its
     * size, alone, instead of starting the team for nothing. */
    return hx_matmul_reads_input(a->wtype) ? 0 : (uint64_t)a->T * a->K;
}

/* Bytes of weight rows a thread keeps in L2 while the token tiles pass. */
#define MATMUL_BLOCK (128u << 10)

/* Rows of a block converted to F32: MATMUL_BLOCK bytes of them, whole
 * tiles of four. */
static uint64_t convert_rows(uint32_t K)
{
    const uint64_t rb = (MATMUL_BLOCK / ((uint64_t)K * sizeof(float))) & ~(uint64_t)3;
    return rb < 4 ? 4 : rb;
}

size_t hx_matmul_convert_bytes(uint32_t wtype, uint32_t K, uint32_t T)
{
    const hx_quant_ops *q = hx_quant_ops_get((hx_type)wtype);
    if (!q || !hx_quant_convert_first(q) || T < 2)
        return 0;
    return ALIGN64(convert_rows(K) * K * sizeof(float));
}

int hx_matmul_rows_init(hx_matmul_rows *p, const hx_op_matmul *a, const void *W, size_t wbytes,
                        const void *layout, const void *xq, float *y, const float *bias)
{
    const hx_quant_ops *q = hx_quant_ops_get((hx_type)a->wtype);
    size_t wrow = hx_type_row_size((hx_type)a->wtype, a->K);
    size_t arow = hx_matmul_act_row(a->wtype, a->K);
    if (!q || !q->vec_dot || !q->gemm || !wrow || !arow)
        return HX_ERR_UNSUPPORTED;
    if (wbytes < wrow * a->N)
        return HX_ERR_RANGE;
    /* The weights' repacked copy (kernels_cpu/repack.h), where the buffer
     * has one for this shape and the current level a kernel for it. */
    const hx_repacked *r = layout;
    if (r && (r->type != (hx_type)a->wtype || r->K != a->K || r->N != a->N || !hx_repack_gemm(r->type)))
        r = NULL;
    *p = (hx_matmul_rows){.q = q, .r = r, .W = W, .wrow = wrow, .xq = xq, .arow = arow, .y = y, .bias = bias,
                          .T = a->T, .N = a->N, .K = a->K, .conv = NULL};
    return 0;
}

/* As below over the interleaved copy: groups of HX_REPACK_ROWS rows, each
 * one sequential stream, blocked for L2 the same way.  A padded last
 * group (repack.h) writes its rows through a tile of its own. */
static void matmul_repacked(const hx_matmul_rows *p, uint64_t glo, uint64_t ghi)
{
    const hx_repacked *r = p->r;
    const hx_repack_gemm_fn gemm = hx_repack_gemm(r->type), pair = hx_repack_gemm_pair(r->type, p->T);
    const uint64_t whole = p->N / HX_REPACK_ROWS; /* groups without padding */
    uint64_t gb = MATMUL_BLOCK / r->group_bytes;
    if (gb < 2)
        gb = 2;
    for (uint64_t g0 = glo; g0 < ghi; g0 += gb) {
        const uint64_t g1 = g0 + gb < ghi ? g0 + gb : ghi;
        for (uint32_t t = 0; t < p->T; t += HX_GEMM_COLS) {
            const int nc = p->T - t < HX_GEMM_COLS ? (int)(p->T - t) : HX_GEMM_COLS;
            for (uint64_t g = g0; g < g1;) {
                /* two groups at once where the level has a kernel */
                const int two = pair && g + 1 < g1 && g + 1 < whole;
                const uint64_t n = g * HX_REPACK_ROWS;
                const int rows = g < whole ? (two ? 2 : 1) * HX_REPACK_ROWS : (int)(p->N - n);
                float part[HX_GEMM_COLS * HX_REPACK_ROWS];
                float *yr = p->y + (uint64_t)t * p->N + n, *out = g < whole ? yr : part;
                const size_t ss = g < whole ? p->N : HX_REPACK_ROWS;
                (two ? pair : gemm)(p->K, nc, out, ss, r->data + g * r->group_bytes, p->xq + (uint64_t)t * p->arow, p->arow);
                for (int k = 0; out == part && k < nc; k++)
                    memcpy(yr + (uint64_t)k * p->N, part + (size_t)k * HX_REPACK_ROWS, sizeof(float) * (size_t)rows);
                for (int k = 0; p->bias && k < nc; k++)
                    for (int i = 0; i < rows; i++)
                        yr[(uint64_t)k * p->N + i] += p->bias[n + i];
                g += two ? 2 : 1;
            }
        }
    }
}

void hx_matmul_rows_run(const hx_matmul_rows *p, uint64_t glo, uint64_t ghi)
{
    if (p->r) {
        matmul_repacked(p, glo, ghi);
        return;
    }
    const hx_quant_ops *q = p->q;
    const size_t wrow = p->wrow, arow = p->arow;
    const uint64_t N = p->N;
    const float *bias = p->bias;
    float *y = p->y;

    /* Output columns are split in multiples of 4 so the GEMM tiles read
     * four weight rows per pass.  A tile of 4 rows x gemm_cols tokens
     * reuses each loaded block across the tile (register blocking); blocks
     * of rows worth MATMUL_BLOCK bytes of weights then meet every token
     * tile in turn, so the block's weights stay in L2 across the tiles and
     * a tile's activations across the block's rows.  A single token takes
     * the same kernel: an output's bits then do not depend on how many
     * tokens share its evaluation, where another summation order would
     * move activations across quantization steps. */
    uint64_t n0 = glo * 4, n1 = ghi * 4 < N ? ghi * 4 : N;
    uint64_t nfull = n0 + (n1 - n0) / 4 * 4;
    /* Where the type's prompt tiles are slower than F32's, each block's
     * rows are converted (exactly) by its first token tile and meet the
     * other tiles as F32: the same sums in the same order, so the same
     * bits, and no pass of its own over the block to convert it. */
    const hx_quant_ops *f32 = p->conv ? hx_quant_ops_get_level(HX_TYPE_F32, q->level) : NULL;
    const hx_gemm_fn gemm = f32 ? f32->gemm : q->gemm;
    const uint32_t cols = (uint32_t)(f32 ? f32 : q)->gemm_cols;
    uint64_t rb = f32 ? convert_rows(p->K) : (MATMUL_BLOCK / wrow) & ~(uint64_t)3;
    if (rb < 4)
        rb = 4;
    for (uint64_t nb = n0; nb < nfull; nb += rb) {
        const uint64_t ne = nb + rb < nfull ? nb + rb : nfull;
        const size_t stride = f32 ? p->K * sizeof(float) : wrow;
        for (uint32_t t = 0; t < p->T; t += cols) {
            const int nc = p->T - t < cols ? (int)(p->T - t) : (int)cols;
            for (uint64_t n = nb; n < ne; n += 4) {
                float *yr = y + (uint64_t)t * N + n;
                const uint8_t *xq = p->xq + (uint64_t)t * arow;
                float *conv = f32 ? p->conv + (n - nb) * p->K : NULL;
                if (f32 && !t)
                    q->gemm_keep_f32(p->K, nc, yr, N, p->W + n * wrow, wrow, xq, arow, conv);
                else
                    gemm(p->K, nc, yr, N, f32 ? (const uint8_t *)conv : p->W + n * wrow, stride, xq, arow);
                for (int k = 0; bias && k < nc; k++)
                    for (int r = 0; r < 4; r++)
                        yr[(uint64_t)k * N + r] += bias[n + r];
            }
        }
    }
    for (uint64_t k = nfull; k < n1; k++)
        for (uint32_t t = 0; t < p->T; t++) {
            float s;
            q->vec_dot(p->K, &s, p->W + k * wrow, p->xq + (uint64_t)t * arow);
            y[(uint64_t)t * N + k] = bias ? s + bias[k] : s;
        }
}

int hx_cpu_matmul(const hx_cpu_call *c)
{
    const hx_op_matmul *a = c->args;
    hx_matmul_rows p;
    const int direct = hx_matmul_reads_input(a->wtype);
    if (direct && c->sizes[1] < (size_t)a->T * a->K * sizeof(float))
        return HX_ERR_RANGE;
    int rc = hx_matmul_rows_init(&p, a, c->buffers[0], c->sizes[0], c->layouts ? c->layouts[0] : NULL,
                                 direct ? c->buffers[1] : c->scratch, c->buffers[2],
                                 a->has_bias ? c->buffers[3] : NULL);
    if (rc)
        return rc;
    const size_t conv = hx_matmul_convert_bytes(a->wtype, a->K, a->T);
    if (conv && !p.r)
        p.conv = (float *)((uint8_t *)c->scratch + act_bytes(a) + (size_t)c->ith * conv);
    uint64_t lo, hi;
    hx_cpu_split(hx_matmul_rows_units(&p), c->ith, c->nth, &lo, &hi);
    hx_matmul_rows_run(&p, lo, hi);
    return 0;
}

/* ---- rope ---------------------------------------------------------------- */

void hx_cpu_rope_inv_freq(double *inv_freq, uint32_t n_rot, float base, const float *factors)
{
    /* base^(-2i/n_rot) as a running product: one pow per call instead of
     * one per frequency (double keeps the product within ~1e-13). */
    const double step = pow((double)base, -2.0 / n_rot);
    double f = 1.0;
    for (uint32_t i = 0; i < n_rot / 2; i++, f *= step)
        inv_freq[i] = factors ? f / factors[i] : f;
}

int hx_cpu_rope(const hx_cpu_call *c)
{
    const hx_op_rope *a = c->args;
    float *x = c->buffers[0];
    const int32_t *pos = c->buffers[1];
    if (a->n_rot > a->Dh || a->n_rot % 2 || a->n_rot > 1024 ||
        (a->has_factors && c->sizes[2] < sizeof(float) * (a->n_rot / 2)))
        return HX_ERR_INVALID_ARG;
    const uint32_t half = a->n_rot / 2;
    uint64_t lo, hi;
    hx_cpu_split(a->T, c->ith, c->nth, &lo, &hi);
    if (lo >= hi)
        return 0; /* a decode step has one row: most shares have nothing to do */
    double inv_freq[512];
    hx_cpu_rope_inv_freq(inv_freq, a->n_rot, a->freq_base, a->has_factors ? c->buffers[2] : NULL);
    for (uint64_t t = lo; t < hi; t++) {
        float cs[512], sn[512];
        for (uint32_t i = 0; i < half; i++) {
            double th = (double)pos[t] * a->freq_scale * inv_freq[i];
            cs[i] = (float)cos(th);
            sn[i] = (float)sin(th);
        }
        for (uint32_t h = 0; h < a->H; h++) {
            float *v = x + (t * a->H + h) * a->Dh;
            for (uint32_t i = 0; i < half; i++) {
                uint32_t i0 = a->neox ? i : 2 * i, i1 = a->neox ? i + half : 2 * i + 1;
                float x0 = v[i0], x1 = v[i1];
                v[i0] = x0 * cs[i] - x1 * sn[i];
                v[i1] = x0 * sn[i] + x1 * cs[i];
            }
        }
    }
    return 0;
}

/* ---- paged KV cache ------------------------------------------------------ */

/* One token's row of Hkv heads into the cache: each head centred (minus
 * `center`'s head, when set) and rotated (when `rot` is) first, in a copy
 * on the stack: the input is read-only. */
static void store_row(hx_quantize_row_fn store, const float *x, uint8_t *dst, uint32_t Hkv, uint32_t Dh,
                      size_t hbytes, uint32_t rot, const float *center)
{
    if (!rot && !center) {
        store(x, dst, (int64_t)Hkv * Dh);
        return;
    }
    float head[HX_HADAMARD_MAX];
    for (uint32_t h = 0; h < Hkv; h++) {
        const float *xh = x + (size_t)h * Dh;
        for (uint32_t d = 0; d < Dh; d++)
            head[d] = center ? xh[d] - center[(size_t)h * Dh + d] : xh[d];
        if (rot)
            hx_hadamard_rotate(head, Dh, rot);
        store(head, dst + h * hbytes, Dh);
    }
}

int hx_cpu_kv_store(const hx_cpu_call *c)
{
    const hx_op_kv_store *a = c->args;
    const uint64_t row = (uint64_t)a->Hkv * a->Dh;
    const size_t krb = hx_type_row_size((hx_type)a->kv_type, row), vrb = hx_type_row_size((hx_type)a->v_type, row);
    const hx_quantize_row_fn kq = hx_quant_kv_quantizer((hx_type)a->kv_type, 0),
                             vq = hx_quant_kv_quantizer((hx_type)a->v_type, 1);
    if (!kq || !vq || !krb || !vrb)
        return HX_ERR_UNSUPPORTED;
    /* A rotated head must be whole blocks of its type. */
    const size_t khb = hx_type_row_size((hx_type)a->kv_type, a->Dh), vhb = hx_type_row_size((hx_type)a->v_type, a->Dh);
    if (!hx_hadamard_width_ok(a->rot_k, a->Dh) || !hx_hadamard_width_ok(a->rot_v, a->Dh) ||
        ((a->rot_k || a->center_k) && (khb * a->Hkv != krb || a->Dh > HX_HADAMARD_MAX)) ||
        (a->rot_v && vhb * a->Hkv != vrb) || a->center_k > 1 ||
        (a->center_k && c->sizes[5] < sizeof(float) * row))
        return HX_ERR_INVALID_ARG;
    const float *center = a->center_k ? c->buffers[5] : NULL;
    const float *k = c->buffers[0], *v = c->buffers[1];
    uint8_t *kc = c->buffers[2], *vc = c->buffers[3];
    const int32_t *meta = c->buffers[4];
    const uint64_t kslots = c->sizes[2] / krb, vslots = c->sizes[3] / vrb;
    const uint64_t slots = kslots < vslots ? kslots : vslots;
    uint64_t lo, hi;
    int bad = 0;
    hx_cpu_split(a->kv.T, c->ith, c->nth, &lo, &hi);
    for (uint64_t t = lo; t < hi; t++) {
        int32_t s = hx_kv_token_slot(meta, (uint32_t)t);
        /* A slot outside the cache fails the task, but the batch's valid
         * tokens are still written, as every device's kv_store does. */
        if (s < 0 || (uint64_t)s >= slots) {
            bad = 1;
            continue;
        }
        store_row(kq, k + t * row, kc + (uint64_t)s * krb, a->Hkv, a->Dh, khb, a->rot_k, center);
        store_row(vq, v + t * row, vc + (uint64_t)s * vrb, a->Hkv, a->Dh, vhb, a->rot_v, NULL);
    }
    return bad ? HX_ERR_RANGE : 0;
}

int hx_cpu_attn_merge(const hx_cpu_call *c)
{
    const hx_op_attn_merge *a = c->args;
    const size_t out_bytes = a->rows * a->Dh * sizeof(float), stat_bytes = a->rows * 2 * sizeof(float);
    if (c->sizes[0] < out_bytes || c->sizes[2] < out_bytes || c->sizes[4] < out_bytes || c->sizes[1] < stat_bytes ||
        c->sizes[3] < stat_bytes)
        return HX_ERR_INVALID_ARG;
    const float *o0 = c->buffers[0], *s0 = c->buffers[1], *o1 = c->buffers[2], *s1 = c->buffers[3];
    float *out = c->buffers[4];
    uint64_t lo, hi;
    hx_cpu_split(a->rows, c->ith, c->nth, &lo, &hi);
    for (uint64_t r = lo; r < hi; r++) {
        const float mx[2] = {s0[2 * r], s1[2 * r]}, sm[2] = {s0[2 * r + 1], s1[2 * r + 1]};
        const float *parts[2] = {o0 + r * a->Dh, o1 + r * a->Dh};
        hx_attn_merge_f32(2, a->Dh, parts, mx, sm, out + r * a->Dh);
    }
    return 0;
}

/* ---- element-wise -------------------------------------------------------- */

int hx_cpu_add(const hx_cpu_call *c)
{
    const hx_op_add *a = c->args;
    float *x = c->buffers[0];
    const float *y = c->buffers[1];
    uint64_t lo, hi;
    hx_cpu_split(a->n, c->ith, c->nth, &lo, &hi);
    for (uint64_t i = lo; i < hi; i++)
        x[i] += y[i];
    return 0;
}

int hx_cpu_swiglu(const hx_cpu_call *c)
{
    const hx_op_swiglu *a = c->args;
    const float *g = c->buffers[0], *u = c->buffers[1];
    float *o = c->buffers[2];
    uint64_t lo, hi;
    hx_cpu_split(a->n, c->ith, c->nth, &lo, &hi);
    hx_vmath_swiglu(g + lo, u + lo, o + lo, (int64_t)(hi - lo));
    return 0;
}

/* ---- Gemma's and the shared expert's element-wise ops --------------------- */

int hx_cpu_scale(const hx_cpu_call *c)
{
    const hx_op_scale *a = c->args;
    if (c->sizes[0] < a->n * sizeof(float) || !(a->cap >= 0.0f))
        return HX_ERR_INVALID_ARG;
    float *x = c->buffers[0];
    uint64_t lo, hi;
    hx_cpu_split(a->n, c->ith, c->nth, &lo, &hi);
    const float inv = a->cap > 0.0f ? 1.0f / a->cap : 0.0f;
    for (uint64_t i = lo; i < hi; i++) {
        float v = x[i] * a->scale;
        x[i] = a->cap > 0.0f ? tanhf(v * inv) * a->cap : v;
    }
    return 0;
}

int hx_cpu_geglu(const hx_cpu_call *c)
{
    const hx_op_geglu *a = c->args;
    if (c->sizes[0] < a->n * sizeof(float) || c->sizes[1] < a->n * sizeof(float) || c->sizes[2] < a->n * sizeof(float))
        return HX_ERR_INVALID_ARG;
    uint64_t lo, hi;
    hx_cpu_split(a->n, c->ith, c->nth, &lo, &hi);
    hx_vmath_geglu((const float *)c->buffers[0] + lo, (const float *)c->buffers[1] + lo, (float *)c->buffers[2] + lo,
                   (int64_t)(hi - lo));
    return 0;
}

int hx_cpu_add_gated(const hx_cpu_call *c)
{
    const hx_op_add_gated *a = c->args;
    const size_t rows = (size_t)a->T * a->D * sizeof(float);
    if (c->sizes[0] < rows || c->sizes[1] < rows || c->sizes[2] < a->T * sizeof(float))
        return HX_ERR_INVALID_ARG;
    float *x = c->buffers[0];
    const float *y = c->buffers[1], *g = c->buffers[2];
    uint64_t lo, hi;
    hx_cpu_split(a->T, c->ith, c->nth, &lo, &hi);
    for (uint64_t t = lo; t < hi; t++) {
        /* ggml_sigmoid, then the product, then the sum: llama.cpp's steps. */
        const float s = 1.0f / (1.0f + expf(-g[t]));
        for (uint32_t i = 0; i < a->D; i++) {
            const float v = y[t * a->D + i] * s;
            x[t * a->D + i] += v;
        }
    }
    return 0;
}
