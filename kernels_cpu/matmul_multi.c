/* "matmul_multi" on the CPU: several weights against one input in one
 * task.  The input rows are quantized once per distinct dot partner (Q,
 * K and V of a Q4_K_M file are Q4_K, Q4_K and Q6_K: one Q8_K copy serves
 * all three; parts whose partner is F32 read the input itself), and one
 * team run covers the union of the parts' row units, each unit computed
 * by the single matmul's loops (matmul_rows.h), so every output is bit
 * for bit what "matmul" writes. */
#include "kernels_cpu/cpu_kernels.h"
#include "kernels_cpu/matmul_rows.h"
#include "ops/ops.h"

#define ALIGN64(n) (((n) + 63) & ~(size_t)63)

/* A part that reads the input rows where they are (hx_matmul_reads_input). */
#define INPUT ((size_t)-1)

/* Where each part's quantized input lies in scratch (parts of the same dot
 * partner share one copy; INPUT: none, the part reads the input); the
 * scratch's size, or 0 for bad arguments. */
static size_t layout(const hx_op_matmul_multi *a, size_t off[HX_MATMUL_MULTI_MAX], int owner[HX_MATMUL_MULTI_MAX])
{
    if (!hx_matmul_multi_valid(a))
        return 0;
    size_t total = 0;
    for (uint32_t i = 0; i < a->n; i++) {
        const hx_quant_ops *q = hx_quant_ops_get((hx_type)a->wtype[i]);
        size_t arow = hx_matmul_act_row(a->wtype[i], a->K);
        if (!q || !arow)
            return 0;
        owner[i] = (int)i;
        if (hx_matmul_reads_input(a->wtype[i])) {
            off[i] = INPUT;
            continue;
        }
        for (uint32_t j = 0; j < i; j++)
            if (hx_quant_ops_get((hx_type)a->wtype[j])->vec_dot_type == q->vec_dot_type) {
                owner[i] = owner[j];
                break;
            }
        off[i] = owner[i] == (int)i ? total : off[owner[i]];
        if (owner[i] == (int)i)
            total += ALIGN64(arow * a->T);
    }
    return total ? total : 64;
}

/* Each share's room for converted weight rows: the largest part's need
 * (a share runs its parts one after the other). */
static size_t convert_bytes(const hx_op_matmul_multi *a)
{
    size_t most = 0;
    for (uint32_t i = 0; i < a->n && i < HX_MATMUL_MULTI_MAX; i++) {
        const size_t b = hx_matmul_convert_bytes(a->wtype[i], a->K, a->T);
        most = b > most ? b : most;
    }
    return most;
}

size_t hx_cpu_matmul_multi_scratch(const void *args, const size_t *sizes, int nth)
{
    size_t off[HX_MATMUL_MULTI_MAX];
    int owner[HX_MATMUL_MULTI_MAX];
    const size_t inputs = layout(args, off, owner);
    return inputs ? ALIGN64(inputs) + (size_t)nth * convert_bytes(args) : 0;
}

uint64_t hx_cpu_matmul_multi_prepare_elems(const void *args)
{
    const hx_op_matmul_multi *a = args;
    uint64_t parts = 0; /* at most: parts sharing a partner share its copy */
    for (uint32_t i = 0; i < a->n && i < HX_MATMUL_MULTI_MAX; i++)
        parts += !hx_matmul_reads_input(a->wtype[i]);
    return parts * a->T * a->K;
}

/* Phase one: each distinct partner's copy of the input, rows shared out. */
int hx_cpu_matmul_multi_prepare(const hx_cpu_call *c)
{
    const hx_op_matmul_multi *a = c->args;
    size_t off[HX_MATMUL_MULTI_MAX];
    int owner[HX_MATMUL_MULTI_MAX];
    if (!layout(a, off, owner))
        return hx_matmul_multi_valid(a) ? HX_ERR_UNSUPPORTED : HX_ERR_INVALID_ARG;
    if (c->sizes[0] < (size_t)a->T * a->K * sizeof(float))
        return HX_ERR_RANGE;
    const float *x = c->buffers[0];
    uint64_t lo, hi;
    hx_cpu_split((uint64_t)a->n * a->T, c->ith, c->nth, &lo, &hi);
    for (uint64_t it = lo; it < hi; it++) {
        const uint32_t i = (uint32_t)(it / a->T), t = (uint32_t)(it % a->T);
        if (owner[i] != (int)i || off[i] == INPUT)
            continue;
        const hx_quant_ops *aq = hx_quant_ops_get(hx_quant_ops_get((hx_type)a->wtype[i])->vec_dot_type);
        const size_t arow = hx_matmul_act_row(a->wtype[i], a->K);
        aq->quantize_row(x + (uint64_t)t * a->K, (uint8_t *)c->scratch + off[i] + t * arow, a->K);
    }
    return 0;
}

int hx_cpu_matmul_multi(const hx_cpu_call *c)
{
    const hx_op_matmul_multi *a = c->args;
    size_t off[HX_MATMUL_MULTI_MAX];
    int owner[HX_MATMUL_MULTI_MAX];
    const size_t inputs = layout(a, off, owner), conv = convert_bytes(a);
    if (!inputs)
        return HX_ERR_UNSUPPORTED;
    hx_matmul_rows p[HX_MATMUL_MULTI_MAX];
    uint64_t units = 0;
    for (uint32_t i = 0; i < a->n; i++) {
        const hx_op_matmul m = hx_matmul_multi_part(a, (int)i);
        const int w = hx_matmul_multi_w((int)i), y = hx_matmul_multi_y((int)i), b = hx_matmul_multi_bias(a, (int)i);
        if (c->sizes[y] < (size_t)a->T * m.N * sizeof(float) || (b >= 0 && c->sizes[b] < m.N * sizeof(float)))
            return HX_ERR_RANGE;
        if (off[i] == INPUT && c->sizes[0] < (size_t)a->T * a->K * sizeof(float))
            return HX_ERR_RANGE;
        const void *xq = off[i] == INPUT ? c->buffers[0] : (uint8_t *)c->scratch + off[i];
        int rc = hx_matmul_rows_init(&p[i], &m, c->buffers[w], c->sizes[w], c->layouts ? c->layouts[w] : NULL, xq,
                                     c->buffers[y], b >= 0 ? c->buffers[b] : NULL);
        if (rc)
            return rc;
        if (conv && !p[i].r && hx_matmul_convert_bytes(a->wtype[i], a->K, a->T))
            p[i].conv = (float *)((uint8_t *)c->scratch + ALIGN64(inputs) + (size_t)c->ith * conv);
        units += hx_matmul_rows_units(&p[i]);
    }
    /* This share's run of the parts' units laid end to end. */
    uint64_t lo, hi, base = 0;
    hx_cpu_split(units, c->ith, c->nth, &lo, &hi);
    for (uint32_t i = 0; i < a->n && lo < hi; i++) {
        const uint64_t u = hx_matmul_rows_units(&p[i]);
        if (lo < base + u) {
            const uint64_t end = hi < base + u ? hi : base + u;
            hx_matmul_rows_run(&p[i], lo - base, end - base);
            lo = end;
        }
        base += u;
    }
    return 0;
}
