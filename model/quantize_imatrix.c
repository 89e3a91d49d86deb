/* An importance matrix file as the quantizer's weights (quantize_plan.h).
 * Reading the file is model/imatrix.c's (hx_imatrix_load); a build without
 * it refuses an imatrix file, and callers pass weights through
 * hx_quantize_options.importance instead. */
#include "model/quantize_plan.h"
#include "runtime/error.h"

#if defined(__has_include)
#if __has_include("model/imatrix.h")
#define HX_QUANTIZE_IMATRIX 1
#endif
#endif

#ifdef HX_QUANTIZE_IMATRIX
#include "model/imatrix.h"

static const float *imatrix_weights(void *user, const char *tensor, int64_t *n)
{
    return hx_imatrix_find(user, tensor, n);
}

hx_status hx_quantize_imatrix_open(hx_quantize_plan *p, const char *path)
{
    hx_imatrix *im = NULL;
    hx_status s = hx_imatrix_load(path, &im);
    if (s)
        return s;
    p->imatrix = im;
    p->importance = imatrix_weights;
    p->importance_user = im;
    return HX_OK;
}

void hx_quantize_imatrix_close(hx_quantize_plan *p)
{
    if (p->imatrix)
        hx_imatrix_free(p->imatrix);
    p->imatrix = NULL;
}
#else
hx_status hx_quantize_imatrix_open(hx_quantize_plan *p, const char *path)
{
    (void)p;
    return hx_error(HX_ERR_UNSUPPORTED, "'%s': this build of hetero reads no importance matrix files", path);
}

void hx_quantize_imatrix_close(hx_quantize_plan *p)
{
    p->imatrix = NULL;
}
#endif
