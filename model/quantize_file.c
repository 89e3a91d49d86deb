/* hx_model_quantize: rewrite a GGUF file's matrices in another type. */
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "kernels_cpu/quant.h"
#include "runtime/error.h"

/* Matrices (2-D and up, rows in whole target blocks) change type; vectors
 * such as norms and biases stay, as llama-quantize leaves them. */
static int converts(const hx_gguf_tensor *t, hx_type to)
{
    if (t->n_dims < 2 || t->type == to)
        return 0;
    const hx_quant_ops *src = hx_quant_ops_get(t->type);
    return src && src->dequantize_row && hx_type_row_size(to, t->ne[0]) != 0;
}

static hx_status convert(const hx_gguf_tensor *t, hx_type to, void **out, uint64_t *bytes)
{
    const hx_quant_ops *src = hx_quant_ops_get(t->type), *dst = hx_quant_ops_get(to);
    uint64_t rows = t->size / hx_type_row_size(t->type, t->ne[0]);
    size_t in_row = hx_type_row_size(t->type, t->ne[0]), out_row = hx_type_row_size(to, t->ne[0]);
    uint8_t *data = malloc(out_row * rows);
    float *f = malloc(sizeof *f * t->ne[0]);
    if (!data || !f) {
        free(data);
        free(f);
        return hx_error(HX_ERR_NO_MEMORY, "quantizing '%s'", t->name);
    }
    for (uint64_t r = 0; r < rows; r++) {
        src->dequantize_row((const uint8_t *)t->data + r * in_row, f, (int64_t)t->ne[0]);
        dst->quantize_row(f, data + r * out_row, (int64_t)t->ne[0]);
    }
    free(f);
    *out = data;
    *bytes = out_row * rows;
    return HX_OK;
}

static hx_status quantize_file(const char *in_path, const char *out_path, const char *type, hx_quantize_report report,
                               void *user)
{
    hx_type to;
    if (!in_path || !out_path || !type)
        return hx_error(HX_ERR_INVALID_ARG, "hx_model_quantize: NULL argument");
    if (!hx_type_from_name(type, &to))
        return hx_error(HX_ERR_INVALID_ARG, "unknown type '%s'", type);
    const hx_quant_ops *q = hx_quant_ops_get(to);
    if (!q || !q->quantize_row || !q->vec_dot)
        return hx_error(HX_ERR_UNSUPPORTED, "hetero cannot quantize to %s (f32, f16, bf16, q8_0, q4_0, q4_K ...)",
                        hx_type_name(to));
    hx_gguf *g;
    hx_status s = hx_gguf_open(in_path, &g);
    if (s)
        return s;
    hx_gguf_writer *w = NULL;
    uint64_t n = hx_gguf_tensor_count(g);
    void **owned = calloc(n ? n : 1, sizeof *owned);
    if (!owned)
        s = hx_error(HX_ERR_NO_MEMORY, "tensor table");
    if (s == HX_OK)
        s = hx_gguf_writer_create(&w);
    if (s == HX_OK)
        s = hx_gguf_writer_copy_kv(w, g);
    for (uint64_t i = 0; s == HX_OK && i < n; i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        hx_type ty = t->type;
        const void *data = t->data;
        uint64_t bytes = t->size;
        if (converts(t, to)) {
            s = convert(t, to, &owned[i], &bytes);
            data = owned[i];
            ty = to;
        }
        if (s == HX_OK)
            s = hx_gguf_writer_add_tensor(w, t->name, ty, t->n_dims, t->ne, data);
        if (s == HX_OK && report)
            report(user, t->name, hx_type_name(t->type), hx_type_name(ty), t->size, bytes);
    }
    if (s == HX_OK)
        s = hx_gguf_writer_write(w, out_path);
    hx_gguf_writer_free(w);
    for (uint64_t i = 0; owned && i < n; i++)
        free(owned[i]);
    free(owned);
    hx_gguf_close(g);
    return s;
}

hx_status hx_model_quantize(const char *in_path, const char *out_path, const char *type, hx_quantize_report report,
                            void *user)
{
    hx_api_enter();
    return hx_api_leave(quantize_file(in_path, out_path, type, report, user));
}
