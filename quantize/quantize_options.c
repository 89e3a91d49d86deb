/* hx_quantize_options into the recipe's parameters (quantize_plan.h). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "quantize/quantize_plan.h"
#include "runtime/error.h"

static hx_status type_option(const char *what, const char *name, hx_type *out)
{
    *out = HX_TYPE_COUNT;
    if (!name)
        return HX_OK;
    if (!hx_type_from_name(name, out))
        return hx_error(HX_ERR_INVALID_ARG, "%s: unknown type '%s'", what, name);
    return HX_OK;
}

/* "PATTERN=TYPE", as llama-quantize's --tensor-type: the pattern is
 * lower-cased and searched in the tensor's name. */
static hx_status tensor_type(const char *spec, hx_recipe_override *ov)
{
    const char *eq = spec ? strchr(spec, '=') : NULL;
    if (!eq)
        return hx_error(HX_ERR_INVALID_ARG, "--tensor-type '%s': expected PATTERN=TYPE", spec ? spec : "(null)");
    if (eq == spec)
        return hx_error(HX_ERR_INVALID_ARG, "--tensor-type '%s': missing tensor name", spec);
    if (!eq[1])
        return hx_error(HX_ERR_INVALID_ARG, "--tensor-type '%s': missing quantization type", spec);
    if (!hx_type_from_name(eq + 1, &ov->type))
        return hx_error(HX_ERR_INVALID_ARG, "--tensor-type '%s': unknown type '%s'", spec, eq + 1);
    size_t len = (size_t)(eq - spec);
    char *pat = malloc(len + 1);
    if (!pat)
        return hx_error(HX_ERR_NO_MEMORY, "--tensor-type");
    for (size_t i = 0; i < len; i++)
        pat[i] = (char)tolower((unsigned char)spec[i]);
    pat[len] = '\0';
    int rc = regcomp(&ov->re, pat, REG_EXTENDED | REG_NOSUB);
    free(pat);
    if (rc != 0) {
        char why[128];
        regerror(rc, &ov->re, why, sizeof why);
        return hx_error(HX_ERR_INVALID_ARG, "--tensor-type '%s': %s", spec, why);
    }
    return HX_OK;
}

hx_status hx_quantize_options_parse(const hx_quantize_options *o, hx_quantize_plan *p)
{
    hx_recipe_params *rp = &p->rp;
    int modes = (o->recipe != NULL) + (o->target_bpw != 0) + (o->target_bytes != 0);
    if (modes != 1)
        return hx_error(HX_ERR_INVALID_ARG, "quantize: give one of a recipe, a target bpw or a target size (%d given)",
                        modes);
    if (o->target_bpw < 0 || o->target_bpw != o->target_bpw)
        return hx_error(HX_ERR_INVALID_ARG, "quantize: target bpw %g is not a positive number", o->target_bpw);
    if (o->recipe && o->budget_types)
        return hx_error(HX_ERR_INVALID_ARG, "quantize: budget types '%s' without a target bpw or size",
                        o->budget_types);
    if (o->recipe) {
        const hx_quant_recipe *r = hx_quant_recipe_find(o->recipe);
        if (!r)
            return hx_error(HX_ERR_INVALID_ARG, "unknown recipe '%s' (%s)", o->recipe, hx_quant_recipe_names());
        rp->ftype = r->ftype;
        rp->base = r->base;
    }
    rp->pure = o->pure;
    rp->leave_output = o->leave_output_tensor;
    hx_status s = type_option("--output-tensor-type", o->output_tensor_type, &rp->output_type);
    if (s == HX_OK)
        s = type_option("--token-embedding-type", o->token_embedding_type, &rp->token_embd_type);
    if (s)
        return s;
    if (o->n_tensor_types && !o->tensor_types)
        return hx_error(HX_ERR_INVALID_ARG, "quantize: %zu tensor types but no list", o->n_tensor_types);
    p->ov = calloc(o->n_tensor_types ? o->n_tensor_types : 1, sizeof *p->ov);
    if (!p->ov)
        return hx_error(HX_ERR_NO_MEMORY, "--tensor-type");
    for (size_t i = 0; i < o->n_tensor_types; i++) {
        if ((s = tensor_type(o->tensor_types[i], &p->ov[i])) != HX_OK)
            return s;
        rp->n_overrides = i + 1; /* compiled so far: hx_quantize_plan_free frees them */
    }
    rp->overrides = p->ov;
    return HX_OK;
}

void hx_quantize_plan_free(hx_quantize_plan *p)
{
    for (size_t i = 0; p->ov && i < p->rp.n_overrides; i++)
        regfree(&p->ov[i].re);
    free(p->ov);
    free(p->rt);
    free(p->to);
    free(p->error);
}
