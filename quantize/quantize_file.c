/* hx_model_quantize_ex: a GGUF file's matrices in other types, as
 * llama-quantize writes them (recipes, options, importance weights), or
 * mixed by budget; hx_model_quantize: every matrix in one type. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kernels_cpu/quant.h"
#include "quantize/quant_rows.h"
#include "quantize/quantize_plan.h"
#include "runtime/error.h"

hx_quantize_options hx_quantize_options_default(void)
{
    return (hx_quantize_options){0};
}

uint64_t hx_quantize_tensor_rows(const hx_gguf_tensor *t)
{
    size_t row = hx_type_row_size(t->type, t->ne[0]);
    return row ? t->size / row : 0;
}

hx_status hx_quantize_floats(const hx_gguf_tensor *t, const float **x, float **owned)
{
    *owned = NULL;
    if (t->type == HX_TYPE_F32) {
        *x = t->data;
        return HX_OK;
    }
    const hx_quant_ops *src = hx_quant_ops_get(t->type);
    size_t in_row = hx_type_row_size(t->type, t->ne[0]);
    if (!src || !src->dequantize_row || !in_row)
        return hx_error(HX_ERR_UNSUPPORTED, "tensor '%s': hetero cannot read %s", t->name, hx_type_name(t->type));
    uint64_t rows = hx_quantize_tensor_rows(t);
    float *f = malloc(rows * t->ne[0] * sizeof *f);
    if (!f)
        return hx_error(HX_ERR_NO_MEMORY, "tensor '%s' as floats", t->name);
    for (uint64_t r = 0; r < rows; r++)
        src->dequantize_row((const uint8_t *)t->data + r * in_row, f + r * t->ne[0], (int64_t)t->ne[0]);
    *x = *owned = f;
    return HX_OK;
}

hx_status hx_quantize_weights(const hx_quantize_plan *p, const hx_gguf_tensor *t, const float **w)
{
    *w = NULL;
    if (!p->importance)
        return HX_OK;
    int64_t n = 0;
    const float *v = p->importance(p->importance_user, t->name, &n);
    if (!v)
        return HX_OK; /* llama-quantize too goes on without, and says so */
    uint64_t per_expert = t->ne[0] * t->ne[2];
    if ((uint64_t)n != per_expert) {
        if (strcmp(t->name, "token_embd.weight") == 0)
            return HX_OK; /* an imatrix's token_embd never fits; llama.cpp ignores it */
        return hx_error(HX_ERR_INVALID_ARG, "tensor '%s': %lld importance weights, expected %llu", t->name,
                        (long long)n, (unsigned long long)per_expert);
    }
    for (int64_t j = 0; j < n; j++)
        if (!isfinite(v[j]))
            return hx_error(HX_ERR_INVALID_ARG, "tensor '%s': importance weight %lld is not finite", t->name,
                            (long long)j);
    *w = v;
    return HX_OK;
}

/* ---- planning ------------------------------------------------------------- */

static uint32_t hparam(const hx_gguf *g, const char *arch, const char *key, uint32_t dflt)
{
    char k[160];
    uint32_t v;
    snprintf(k, sizeof k, "%.*s.%s", 64, arch, key);
    return hx_gguf_get_u32(g, k, &v) == HX_OK ? v : dflt;
}

static hx_status model_params(hx_quantize_plan *p)
{
    const char *s = NULL;
    uint64_t len = 0;
    char arch[65] = "llama";
    if (hx_gguf_get_str(p->g, "general.architecture", &s, &len) == HX_OK && len < sizeof arch) {
        memcpy(arch, s, len);
        arch[len] = '\0';
    }
    p->rp.n_layer = hparam(p->g, arch, "block_count", 0);
    p->rp.n_head = hparam(p->g, arch, "attention.head_count", 0);
    p->rp.n_head_kv = hparam(p->g, arch, "attention.head_count_kv", p->rp.n_head);
    p->rp.n_expert = hparam(p->g, arch, "expert_count", 0);
    p->n = hx_gguf_tensor_count(p->g);
    p->rt = calloc(p->n ? p->n : 1, sizeof *p->rt);
    p->to = calloc(p->n ? p->n : 1, sizeof *p->to);
    if (!p->rt || !p->to)
        return hx_error(HX_ERR_NO_MEMORY, "tensor table");
    for (size_t i = 0; i < p->n; i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(p->g, i);
        p->rt[i] = (hx_recipe_tensor){t->name, {t->ne[0], t->ne[1], t->ne[2], t->ne[3]}, t->type};
    }
    return HX_OK;
}

/* hx_model_quantize's rule: every matrix whose rows are whole blocks. */
static void uniform_types(hx_quantize_plan *p, hx_type to)
{
    for (size_t i = 0; i < p->n; i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(p->g, i);
        const hx_quant_ops *src = hx_quant_ops_get(t->type);
        int converts = t->n_dims >= 2 && src && src->dequantize_row && hx_type_row_size(to, t->ne[0]);
        p->to[i] = converts ? to : t->type;
    }
}

/* What llama-quantize refuses, and what hetero cannot write, before any
 * work: a failure leaves nothing behind.  A dry run, like llama-quantize's,
 * checks only the importance weights. */
static hx_status check_plan(const hx_quantize_plan *p)
{
    for (size_t i = 0; i < p->n; i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(p->g, i);
        hx_type to = p->to[i];
        if (to == t->type)
            continue;
        const float *w;
        hx_status s = hx_quantize_weights(p, t, &w);
        if (s)
            return s;
        if (!w && hx_quant_requires_imatrix(t->name, to))
            return hx_error(HX_ERR_INVALID_ARG, "tensor '%s': %s needs an importance matrix (--imatrix)", t->name,
                            hx_type_name(to));
        if (p->o->dry_run)
            continue; /* sizes need no kernels; llama-quantize's dry run checks no more */
        if (hx_type_is_quantized(t->type) && !p->o->allow_requantize)
            return hx_error(HX_ERR_INVALID_ARG,
                            "tensor '%s' is already %s: requantizing is disabled (--allow-requantize)", t->name,
                            hx_type_name(t->type));
        const hx_quant_ops *src = hx_quant_ops_get(t->type), *dst = hx_quant_ops_get(to);
        if (!src || !src->dequantize_row)
            return hx_error(HX_ERR_UNSUPPORTED, "tensor '%s': hetero cannot read %s", t->name, hx_type_name(t->type));
        if (!dst || !dst->quantize_row || !dst->dequantize_row)
            return hx_error(HX_ERR_UNSUPPORTED, "tensor '%s': hetero cannot write %s yet", t->name,
                            hx_type_name(to));
        if (!hx_type_row_size(to, t->ne[0]))
            return hx_error(HX_ERR_INVALID_ARG, "tensor '%s': rows of %llu are not whole %s blocks", t->name,
                            (unsigned long long)t->ne[0], hx_type_name(to));
    }
    return HX_OK;
}

/* general.file_type for a mix the budget chose: llama.cpp's guess from the
 * type most matrices have. */
static hx_ftype majority_ftype(const hx_quantize_plan *p)
{
    unsigned count[HX_TYPE_COUNT] = {0};
    hx_type best = HX_TYPE_F32;
    for (size_t i = 0; i < p->n; i++)
        if (hx_quant_recipe_quantizable(&p->rp, &p->rt[i]) && ++count[p->to[i]] > count[best])
            best = p->to[i];
    return hx_quant_ftype_of_type(best);
}

/* ---- writing ----------------------------------------------------------------- */

static hx_status convert(const hx_quantize_plan *p, const hx_gguf_tensor *t, hx_type to, void **out,
                         uint64_t *bytes)
{
    const float *x, *w;
    float *owned = NULL;
    hx_status s = hx_quantize_weights(p, t, &w);
    if (s == HX_OK)
        s = hx_quantize_floats(t, &x, &owned);
    if (s)
        return s;
    hx_quant_matrix m = {x, hx_quantize_tensor_rows(t), t->ne[0], t->ne[1], w};
    *bytes = m.rows * hx_type_row_size(to, t->ne[0]);
    *out = malloc(*bytes ? *bytes : 1);
    s = *out ? hx_quant_rows(to, &m, *out) : hx_error(HX_ERR_NO_MEMORY, "quantizing '%s'", t->name);
    free(owned);
    return s;
}

static hx_status write_file(const hx_quantize_plan *p, const char *out_path, hx_ftype ftype)
{
    hx_gguf_writer *w = NULL;
    void **owned = calloc(p->n ? p->n : 1, sizeof *owned);
    hx_status s = owned ? hx_gguf_writer_create(&w) : hx_error(HX_ERR_NO_MEMORY, "tensor table");
    if (s == HX_OK)
        s = hx_gguf_writer_copy_kv(w, p->g);
    if (s == HX_OK)
        s = hx_gguf_writer_set_u32(w, "general.quantization_version", HX_QUANTIZATION_VERSION);
    if (s == HX_OK)
        s = hx_gguf_writer_set_u32(w, "general.file_type", (uint32_t)ftype);
    if (s == HX_OK && p->o->imatrix) /* as llama-quantize records it */
        s = hx_gguf_writer_set_str(w, "quantize.imatrix.file", p->o->imatrix);
    for (size_t i = 0; s == HX_OK && i < p->n; i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(p->g, i);
        const void *data = t->data;
        uint64_t bytes = t->size;
        if (p->o->progress)
            p->o->progress(p->o->user, "quantizing", i, p->n, t->name);
        if (p->to[i] != t->type) {
            s = convert(p, t, p->to[i], &owned[i], &bytes);
            data = owned[i];
        }
        if (s == HX_OK)
            s = hx_gguf_writer_add_tensor(w, t->name, p->to[i], t->n_dims, t->ne, data);
    }
    if (s == HX_OK && p->o->progress)
        p->o->progress(p->o->user, "quantizing", p->n, p->n, NULL);
    if (s == HX_OK)
        s = hx_gguf_writer_write(w, out_path);
    hx_gguf_writer_free(w);
    for (size_t i = 0; owned && i < p->n; i++)
        free(owned[i]);
    free(owned);
    return s;
}

static void report(const hx_quantize_plan *p, hx_ftype ftype)
{
    hx_quantize_totals sum = {.fallbacks = p->n_fallback, .file_type = (uint32_t)ftype};
    for (size_t i = 0; i < p->n; i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(p->g, i);
        const hx_recipe_tensor *rt = &p->rt[i];
        uint64_t bytes = hx_quantize_tensor_rows(t) * hx_type_row_size(p->to[i], t->ne[0]);
        sum.elements += rt->ne[0] * rt->ne[1] * rt->ne[2] * rt->ne[3];
        sum.in_bytes += t->size;
        sum.out_bytes += bytes;
        if (p->error && p->o->choice && hx_quant_recipe_quantizable(&p->rp, rt) && !hx_quant_recipe_fixed(&p->rp, rt))
            p->o->choice(p->o->user, t->name, hx_type_name(p->to[i]), bytes, p->error[i]);
        if (p->o->report)
            p->o->report(p->o->user, t->name, hx_type_name(t->type), hx_type_name(p->to[i]), t->size, bytes);
    }
    if (p->o->totals)
        *p->o->totals = sum;
}

static int same_file(const char *a, const char *b)
{
    struct stat x, y;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

static uint64_t budget_bytes(const hx_quantize_plan *p)
{
    if (p->o->target_bytes)
        return p->o->target_bytes;
    uint64_t elements = 0;
    for (size_t i = 0; i < p->n; i++)
        elements += p->rt[i].ne[0] * p->rt[i].ne[1] * p->rt[i].ne[2] * p->rt[i].ne[3];
    return (uint64_t)(p->o->target_bpw * (double)elements / 8.0);
}

/* uniform: hx_model_quantize's one type, else HX_TYPE_COUNT. */
static hx_status quantize_file(const char *in_path, const char *out_path, const hx_quantize_options *o, hx_type uniform)
{
    if (!in_path || !out_path || !o)
        return hx_error(HX_ERR_INVALID_ARG, "hx_model_quantize: NULL argument");
    hx_quantize_plan p = {.o = o};
    hx_gguf *g = NULL;
    hx_status s = uniform != HX_TYPE_COUNT ? HX_OK : hx_quantize_options_parse(o, &p);
    /* llama-quantize refuses to overwrite its input; hx_model_quantize
     * always allowed it (the file is written beside and renamed over, so
     * the mapping being read stays intact) */
    if (s == HX_OK && uniform == HX_TYPE_COUNT && !o->dry_run && same_file(in_path, out_path))
        s = hx_error(HX_ERR_INVALID_ARG, "input and output are the same file: '%s'", in_path);
    if (s == HX_OK)
        s = hx_gguf_open(in_path, &g);
    p.g = g;
    if (s == HX_OK)
        s = model_params(&p);
    int budget = uniform == HX_TYPE_COUNT && !o->recipe;
    if (s == HX_OK && budget) {
        /* the types options name, and what stays; the budget does the rest */
        p.rp.base = HX_TYPE_Q8_0;
        p.rp.pure = 1;
    }
    p.importance = o->importance;
    p.importance_user = o->importance_user;
    if (s == HX_OK && o->imatrix)
        s = o->importance ? hx_error(HX_ERR_INVALID_ARG, "quantize: both an imatrix file and importance weights")
                          : hx_quantize_imatrix_open(&p, o->imatrix);
    p.rp.has_imatrix = p.importance != NULL;
    if (s == HX_OK && uniform != HX_TYPE_COUNT)
        uniform_types(&p, uniform);
    else if (s == HX_OK)
        s = hx_quant_recipe_choose(&p.rp, p.rt, p.n, p.to, &p.n_fallback);
    if (s == HX_OK && budget)
        s = hx_quantize_budget_plan(&p, budget_bytes(&p));
    if (s == HX_OK)
        s = check_plan(&p);
    hx_ftype ftype = uniform != HX_TYPE_COUNT ? hx_quant_ftype_of_type(uniform)
                     : budget                 ? majority_ftype(&p)
                                              : p.rp.ftype;
    if (s == HX_OK && !o->dry_run)
        s = write_file(&p, out_path, ftype);
    if (s == HX_OK)
        report(&p, ftype);
    hx_quantize_imatrix_close(&p);
    hx_quantize_plan_free(&p);
    hx_gguf_close(g);
    return s;
}

hx_status hx_model_quantize_ex(const char *in_path, const char *out_path, const hx_quantize_options *o)
{
    hx_api_enter();
    return hx_api_leave(quantize_file(in_path, out_path, o, HX_TYPE_COUNT));
}

hx_status hx_model_quantize(const char *in_path, const char *out_path, const char *type, hx_quantize_report report,
                            void *user)
{
    hx_api_enter();
    hx_type to;
    if (!in_path || !out_path || !type)
        return hx_api_leave(hx_error(HX_ERR_INVALID_ARG, "hx_model_quantize: NULL argument"));
    if (!hx_type_from_name(type, &to))
        return hx_api_leave(hx_error(HX_ERR_INVALID_ARG, "unknown type '%s'", type));
    const hx_quant_ops *q = hx_quant_ops_get(to);
    if (!q || !q->quantize_row || !q->vec_dot)
        return hx_api_leave(hx_error(HX_ERR_UNSUPPORTED,
                                     "hetero cannot quantize to %s (f32, f16, bf16, q8_0, q4_0, q4_K ...)",
                                     hx_type_name(to)));
    hx_quantize_options o = {.allow_requantize = 1, .report = report, .user = user};
    return hx_api_leave(quantize_file(in_path, out_path, &o, to));
}
