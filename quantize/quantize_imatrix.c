/* An importance matrix file as the quantizer's weights (quantize_plan.h):
 * quantize/imatrix.c reads it (llama.cpp's GGUF or legacy form); each matrix's
 * weights are its per-column mean squared activations. */
#include "quantize/imatrix.h"
#include "quantize/quantize_plan.h"

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
