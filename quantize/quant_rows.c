/* Rows into another type, and the weighted error of it (quant_rows.h). */
#include "quantize/quant_rows.h"

#include <stdlib.h>

#include "kernels_cpu/quant.h"
#include "runtime/error.h"

static const float *weights_of(const hx_quant_matrix *m, uint64_t r)
{
    return m->w ? m->w + (m->rows_per_slice ? r / m->rows_per_slice : 0) * m->ne0 : NULL;
}

static void quantize_row(const hx_quant_ops *q, const float *x, void *y, int64_t n, const float *w)
{
    if (w && q->quantize_weighted)
        q->quantize_weighted(x, y, n, w);
    else
        q->quantize_row(x, y, n);
}

static hx_status writable(hx_type to, const hx_quant_matrix *m, const hx_quant_ops **q)
{
    if (!m || !m->x)
        return hx_error(HX_ERR_INVALID_ARG, "quantizing rows: NULL matrix");
    *q = hx_quant_ops_get(to);
    if (!*q || !(*q)->quantize_row || !(*q)->dequantize_row)
        return hx_error(HX_ERR_UNSUPPORTED, "hetero cannot write %s", hx_type_name(to));
    if (hx_type_row_size(to, m->ne0) == 0)
        return hx_error(HX_ERR_INVALID_ARG, "rows of %llu elements are not whole %s blocks",
                        (unsigned long long)m->ne0, hx_type_name(to));
    return HX_OK;
}

hx_status hx_quant_rows(hx_type to, const hx_quant_matrix *m, void *out)
{
    const hx_quant_ops *q;
    hx_status s = writable(to, m, &q);
    if (s)
        return s;
    size_t row = hx_type_row_size(to, m->ne0);
    for (uint64_t r = 0; r < m->rows; r++)
        quantize_row(q, m->x + r * m->ne0, (uint8_t *)out + r * row, (int64_t)m->ne0, weights_of(m, r));
    return HX_OK;
}

hx_status hx_quant_weighted_error(hx_type to, const hx_quant_matrix *m, uint64_t max_rows, double *err)
{
    const hx_quant_ops *q;
    hx_status s = writable(to, m, &q);
    if (s)
        return s;
    if (!err)
        return hx_error(HX_ERR_INVALID_ARG, "hx_quant_weighted_error: NULL result");
    uint64_t n_rows = max_rows && max_rows < m->rows ? max_rows : m->rows;
    void *y = malloc(hx_type_row_size(to, m->ne0));
    float *back = malloc(m->ne0 * sizeof *back);
    if (!y || !back) {
        free(y);
        free(back);
        return hx_error(HX_ERR_NO_MEMORY, "measuring %s's error", hx_type_name(to));
    }
    double sum = 0;
    for (uint64_t k = 0; k < n_rows; k++) {
        /* evenly spaced rows, the first and (nearly) the last included */
        uint64_t r = n_rows == m->rows ? k : k * m->rows / n_rows;
        const float *x = m->x + r * m->ne0, *w = weights_of(m, r);
        quantize_row(q, x, y, (int64_t)m->ne0, w);
        q->dequantize_row(y, back, (int64_t)m->ne0);
        for (uint64_t j = 0; j < m->ne0; j++) {
            double d = (double)x[j] - back[j];
            sum += (w ? w[j] : 1.0) * d * d;
        }
    }
    free(y);
    free(back);
    *err = sum * ((double)m->rows / (double)n_rows);
    return HX_OK;
}
