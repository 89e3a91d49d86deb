/* CPU implementations of the mixture-of-experts ops (ops/ops.h): the
 * router's softmax and top-k, and the experts' two halves.  Each half
 * gathers the rows routed to one expert together (the route's `order`),
 * quantized once to the weights' dot partner, and multiplies them by that
 * expert's matrix with the dense matmul's kernels (matmul_rows.h): every
 * expert's weights are read once per batch, however many of its tokens
 * there are, and each output has the bits the dense matmul would give it.
 * A team member owns a range of output columns across all experts, so
 * the activation (gate/up) and the weighted sum over experts (down) need
 * nothing from another member. */
#include <math.h>
#include <string.h>

#include "kernels_cpu/cpu_kernels.h"
#include "kernels_cpu/matmul_rows.h"
#include "kernels_cpu/quant.h"
#include "kernels_cpu/vmath.h"
#include "ops/ops.h"

#define ALIGN64(n) (((n) + 63) & ~(size_t)63)

typedef struct {
    int32_t *ids;
    float *w;
    int32_t *off, *order, *inv;
} route_view;

static route_view route_of(void *buf, uint32_t T, uint32_t k, uint32_t E)
{
    int32_t *r = buf;
    const uint64_t tk = (uint64_t)T * k;
    return (route_view){.ids = r, .w = (float *)(r + tk), .off = r + 2 * tk, .order = r + 2 * tk + E + 1,
                        .inv = r + 3 * tk + E + 1};
}

/* The experts a task computes: a group's, or all E. */
static int group_of(uint32_t E, uint32_t e_lo, uint32_t e_n, uint32_t *lo, uint32_t *n)
{
    *lo = e_n ? e_lo : 0;
    *n = e_n ? e_n : E;
    return (uint64_t)*lo + *n <= E;
}

/* ---- moe_route ------------------------------------------------------------ */

int hx_cpu_moe_route(const hx_cpu_call *c)
{
    const hx_op_moe_route *a = c->args;
    if (a->k == 0 || a->k > HX_MOE_MAX_USED || a->k > a->E || a->E > 1024 || a->layer >= a->layers ||
        c->sizes[0] < (size_t)a->T * a->E * sizeof(float) ||
        c->sizes[1] < hx_moe_route_words(a->T, a->k, a->E) * sizeof(int32_t) ||
        c->sizes[2] < (size_t)a->layers * a->E * sizeof(uint64_t))
        return HX_ERR_INVALID_ARG;
    if (c->ith)
        return 0; /* T * E values: one member does it in less than the team takes to start */
    const float *logits = c->buffers[0];
    route_view r = route_of(c->buffers[1], a->T, a->k, a->E);
    uint64_t *counts = (uint64_t *)c->buffers[2] + (uint64_t)a->layer * a->E;
    for (uint32_t e = 0; e <= a->E; e++)
        r.off[e] = 0;
    for (uint32_t t = 0; t < a->T; t++) {
        const float *l = logits + (uint64_t)t * a->E;
        /* ggml's soft_max: exp of the difference with the largest, summed
         * in double, then scaled by the reciprocal in float. */
        float mx = -INFINITY;
        for (uint32_t e = 0; e < a->E; e++)
            mx = l[e] > mx ? l[e] : mx;
        double sum = 0;
        float p[1024];
        for (uint32_t e = 0; e < a->E; e++) {
            p[e] = expf(l[e] - mx);
            sum += p[e];
        }
        const float inv = (float)(1.0 / sum);
        for (uint32_t e = 0; e < a->E; e++)
            p[e] *= inv;
        int32_t *ids = r.ids + (uint64_t)t * a->k;
        float *w = r.w + (uint64_t)t * a->k;
        double wsum = 0;
        for (uint32_t j = 0; j < a->k; j++) {
            int32_t best = -1;
            for (uint32_t e = 0; e < a->E; e++) {
                int taken = 0;
                for (uint32_t i = 0; i < j; i++)
                    taken |= ids[i] == (int32_t)e;
                if (!taken && (best < 0 || p[e] > p[best]))
                    best = (int32_t)e;
            }
            ids[j] = best;
            w[j] = p[best];
            wsum += w[j];
            r.off[best + 1]++;
        }
        if (a->norm) {
            float s = (float)wsum;
            if (!(s >= 6.103515625e-5f))
                s = 6.103515625e-5f;
            for (uint32_t j = 0; j < a->k; j++)
                w[j] /= s;
        }
    }
    for (uint32_t e = 0; e < a->E; e++) {
        counts[e] += (uint64_t)r.off[e + 1];
        r.off[e + 1] += r.off[e];
    }
    /* A counting sort, stable: each expert's entries by token. */
    int32_t fill[1024];
    memcpy(fill, r.off, sizeof *fill * a->E);
    for (uint64_t i = 0; i < (uint64_t)a->T * a->k; i++) {
        const int32_t at = fill[r.ids[i]]++;
        r.order[at] = (int32_t)i;
        r.inv[i] = at;
    }
    return 0;
}

/* ---- moe_gate_up ---------------------------------------------------------- */

/* The route as read by the experts' halves: its offsets and order must
 * describe T * k entries of experts below E. */
static int route_valid(const route_view *r, uint32_t T, uint32_t k, uint32_t E)
{
    const int64_t tk = (int64_t)T * k;
    if (r->off[0] != 0 || r->off[E] != tk)
        return 0;
    for (uint32_t e = 0; e < E; e++)
        if (r->off[e + 1] < r->off[e])
            return 0;
    for (int64_t i = 0; i < tk; i++)
        if (r->order[i] < 0 || r->order[i] >= tk || r->inv[i] < 0 || r->inv[i] >= tk)
            return 0;
    return 1;
}

static size_t gate_up_xq(const hx_op_moe_gate_up *a, uint32_t type)
{
    return ALIGN64(hx_matmul_act_row(type, a->D) * a->T * a->k);
}

/* The up rows' room, after the two gathered copies of x. */
static size_t gate_up_u_at(const hx_op_moe_gate_up *a)
{
    return gate_up_xq(a, a->gate_type) + gate_up_xq(a, a->up_type);
}

size_t hx_cpu_moe_gate_up_scratch(const void *args, const size_t *sizes, int nth)
{
    const hx_op_moe_gate_up *a = args;
    (void)sizes, (void)nth;
    return gate_up_u_at(a) + (size_t)a->T * a->k * a->F * sizeof(float);
}

uint64_t hx_cpu_moe_gate_up_prepare_elems(const void *args)
{
    const hx_op_moe_gate_up *a = args;
    return 2ull * a->T * a->k * a->D;
}

static int gate_up_check(const hx_cpu_call *c)
{
    const hx_op_moe_gate_up *a = c->args;
    if (a->k == 0 || a->k > HX_MOE_MAX_USED || a->act > 1 || !hx_matmul_act_row(a->gate_type, a->D) ||
        !hx_matmul_act_row(a->up_type, a->D))
        return HX_ERR_UNSUPPORTED;
    uint32_t g0, gn;
    if (!group_of(a->E, a->e_lo, a->e_n, &g0, &gn))
        return HX_ERR_RANGE;
    const uint64_t rows = (uint64_t)gn * a->F;
    if (c->sizes[0] < (size_t)a->T * a->D * sizeof(float) ||
        c->sizes[1] < hx_moe_route_words(a->T, a->k, a->E) * sizeof(int32_t) ||
        c->sizes[2] < hx_type_row_size((hx_type)a->gate_type, a->D) * rows ||
        c->sizes[3] < hx_type_row_size((hx_type)a->up_type, a->D) * rows ||
        c->sizes[4] < (size_t)a->T * a->k * a->F * sizeof(float))
        return HX_ERR_RANGE;
    route_view r = route_of(c->buffers[1], a->T, a->k, a->E);
    return route_valid(&r, a->T, a->k, a->E) ? 0 : HX_ERR_RANGE;
}

/* Each entry's token row, quantized to a weight type's dot partner, at
 * its place in the route's order. */
static void gather(const float *x, uint32_t D, const route_view *r, uint32_t k, uint32_t wtype, uint8_t *xq,
                   uint64_t lo, uint64_t hi)
{
    const hx_quant_ops *q = hx_quant_ops_get((hx_type)wtype);
    const hx_quant_ops *aq = hx_quant_ops_get(q->vec_dot_type);
    const size_t arow = hx_matmul_act_row(wtype, D);
    for (uint64_t i = lo; i < hi; i++)
        aq->quantize_row(x + (uint64_t)(r->order[i] / (int32_t)k) * D, xq + i * arow, D);
}

int hx_cpu_moe_gate_up_prepare(const hx_cpu_call *c)
{
    const hx_op_moe_gate_up *a = c->args;
    int rc = gate_up_check(c);
    if (rc)
        return rc;
    route_view r = route_of(c->buffers[1], a->T, a->k, a->E);
    uint32_t g0, gn;
    group_of(a->E, a->e_lo, a->e_n, &g0, &gn);
    const uint64_t first = (uint64_t)r.off[g0];
    uint64_t lo, hi;
    hx_cpu_split((uint64_t)r.off[g0 + gn] - first, c->ith, c->nth, &lo, &hi);
    lo += first, hi += first;
    uint8_t *s = c->scratch;
    gather(c->buffers[0], a->D, &r, a->k, a->gate_type, s, lo, hi);
    gather(c->buffers[0], a->D, &r, a->k, a->up_type, s + gate_up_xq(a, a->gate_type), lo, hi);
    return 0;
}

/* y rows of expert e's [F][K] matrix at W for its n tokens, units [lo, hi). */
static int expert_rows(uint32_t wtype, uint32_t N, uint32_t K, const uint8_t *W, uint32_t e, const uint8_t *xq,
                       uint32_t n, float *y, uint64_t lo, uint64_t hi)
{
    const size_t wrow = hx_type_row_size((hx_type)wtype, K);
    const hx_op_matmul m = {wtype, n, N, K, 0};
    hx_matmul_rows p;
    int rc = hx_matmul_rows_init(&p, &m, W + (uint64_t)e * N * wrow, (size_t)N * wrow, NULL, xq, y, NULL);
    if (rc)
        return rc;
    const uint64_t units = hx_matmul_rows_units(&p);
    hx_matmul_rows_run(&p, lo < units ? lo : units, hi < units ? hi : units);
    return 0;
}

int hx_cpu_moe_gate_up(const hx_cpu_call *c)
{
    const hx_op_moe_gate_up *a = c->args;
    route_view r = route_of(c->buffers[1], a->T, a->k, a->E);
    const uint8_t *xg = c->scratch, *xu = xg + gate_up_xq(a, a->gate_type);
    float *u = (float *)((uint8_t *)c->scratch + gate_up_u_at(a)), *h = c->buffers[4];
    const size_t ag = hx_matmul_act_row(a->gate_type, a->D), au = hx_matmul_act_row(a->up_type, a->D);
    uint64_t lo, hi;
    hx_cpu_split((a->F + 3) / 4, c->ith, c->nth, &lo, &hi);
    const uint64_t f0 = lo * 4, f1 = hi * 4 < a->F ? hi * 4 : a->F;
    if (f0 >= f1)
        return 0;
    uint32_t g0, gn;
    group_of(a->E, a->e_lo, a->e_n, &g0, &gn);
    for (uint32_t e = g0; e < g0 + gn; e++) {
        const uint32_t at = (uint32_t)r.off[e], n = (uint32_t)(r.off[e + 1] - r.off[e]);
        if (!n)
            continue;
        int rc = expert_rows(a->gate_type, a->F, a->D, c->buffers[2], e - g0, xg + (uint64_t)at * ag, n,
                             h + (uint64_t)at * a->F, lo, hi);
        if (!rc)
            rc = expert_rows(a->up_type, a->F, a->D, c->buffers[3], e - g0, xu + (uint64_t)at * au, n,
                             u + (uint64_t)at * a->F, lo, hi);
        if (rc)
            return rc;
        for (uint32_t i = at; i < at + n; i++) {
            float *hr = h + (uint64_t)i * a->F + f0;
            const float *ur = u + (uint64_t)i * a->F + f0;
            if (a->act)
                hx_vmath_geglu(hr, ur, hr, (int64_t)(f1 - f0));
            else
                hx_vmath_swiglu(hr, ur, hr, (int64_t)(f1 - f0));
        }
    }
    return 0;
}

/* ---- moe_down ------------------------------------------------------------- */

static size_t down_xq(const hx_op_moe_down *a)
{
    return ALIGN64(hx_matmul_act_row(a->down_type, a->F) * a->T * a->k);
}

size_t hx_cpu_moe_down_scratch(const void *args, const size_t *sizes, int nth)
{
    const hx_op_moe_down *a = args;
    (void)sizes, (void)nth;
    return down_xq(a) + (size_t)a->T * a->k * a->D * sizeof(float);
}

uint64_t hx_cpu_moe_down_prepare_elems(const void *args)
{
    const hx_op_moe_down *a = args;
    return (uint64_t)a->T * a->k * a->F;
}

int hx_cpu_moe_down_prepare(const hx_cpu_call *c)
{
    const hx_op_moe_down *a = c->args;
    if (a->k == 0 || a->k > HX_MOE_MAX_USED || !hx_matmul_act_row(a->down_type, a->F) || a->accumulate > 1)
        return HX_ERR_UNSUPPORTED;
    uint32_t g0, gn;
    if (!group_of(a->E, a->e_lo, a->e_n, &g0, &gn))
        return HX_ERR_RANGE;
    if (c->sizes[0] < (size_t)a->T * a->k * a->F * sizeof(float) ||
        c->sizes[1] < hx_moe_route_words(a->T, a->k, a->E) * sizeof(int32_t) ||
        c->sizes[2] < hx_type_row_size((hx_type)a->down_type, a->F) * gn * a->D ||
        c->sizes[3] < (size_t)a->T * a->D * sizeof(float))
        return HX_ERR_RANGE;
    route_view r = route_of(c->buffers[1], a->T, a->k, a->E);
    if (!route_valid(&r, a->T, a->k, a->E))
        return HX_ERR_RANGE;
    const hx_quant_ops *aq = hx_quant_ops_get(hx_quant_ops_get((hx_type)a->down_type)->vec_dot_type);
    const size_t arow = hx_matmul_act_row(a->down_type, a->F);
    const float *h = c->buffers[0];
    uint8_t *hq = c->scratch;
    const uint64_t first = (uint64_t)r.off[g0];
    uint64_t lo, hi;
    hx_cpu_split((uint64_t)r.off[g0 + gn] - first, c->ith, c->nth, &lo, &hi);
    lo += first, hi += first;
    for (uint64_t i = lo; i < hi; i++)
        aq->quantize_row(h + i * a->F, hq + i * arow, a->F);
    return 0;
}

int hx_cpu_moe_down(const hx_cpu_call *c)
{
    const hx_op_moe_down *a = c->args;
    route_view r = route_of(c->buffers[1], a->T, a->k, a->E);
    const uint8_t *hq = c->scratch;
    float *Y = (float *)((uint8_t *)c->scratch + down_xq(a)), *out = c->buffers[3];
    const size_t arow = hx_matmul_act_row(a->down_type, a->F);
    uint64_t lo, hi;
    hx_cpu_split((a->D + 3) / 4, c->ith, c->nth, &lo, &hi);
    const uint64_t n0 = lo * 4, n1 = hi * 4 < a->D ? hi * 4 : a->D;
    if (n0 >= n1)
        return 0;
    uint32_t g0, gn;
    group_of(a->E, a->e_lo, a->e_n, &g0, &gn);
    for (uint32_t e = g0; e < g0 + gn; e++) {
        const uint32_t at = (uint32_t)r.off[e], n = (uint32_t)(r.off[e + 1] - r.off[e]);
        int rc = n ? expert_rows(a->down_type, a->D, a->F, c->buffers[2], e - g0, hq + (uint64_t)at * arow, n,
                                 Y + (uint64_t)at * a->D, lo, hi)
                   : 0;
        if (rc)
            return rc;
    }
    /* llama.cpp's order: each expert's output times its weight, then the
     * k products added in turn (0 + x is x: the whole set gives the bits
     * it gave before groups existed).  A group adds its own entries only. */
    for (uint32_t t = 0; t < a->T; t++) {
        float *o = out + (uint64_t)t * a->D;
        if (!a->accumulate)
            for (uint64_t d = n0; d < n1; d++)
                o[d] = 0;
        for (uint32_t j = 0; j < a->k; j++) {
            const uint32_t e = (uint32_t)r.ids[(uint64_t)t * a->k + j];
            if (e < g0 || e >= g0 + gn)
                continue;
            const float w = r.w[(uint64_t)t * a->k + j];
            const float *y = Y + (uint64_t)r.inv[(uint64_t)t * a->k + j] * a->D;
            for (uint64_t d = n0; d < n1; d++) {
                const float v = w * y[d];
                o[d] += v;
            }
        }
    }
    return 0;
}
