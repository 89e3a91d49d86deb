/* An importance matrix file as the quantizer's weights (quantize_plan.h).
 * Reading the file is model/imatrix.c's (hx_imatrix_load); until this
 * build has it, an imatrix file is refused, and callers pass weights
 * through hx_quantize_options.importance instead. */
#include "model/quantize_plan.h"
#include "runtime/error.h"

hx_status hx_quantize_imatrix_open(hx_quantize_plan *p, const char *path)
{
    (void)p;
    return hx_error(HX_ERR_UNSUPPORTED, "'%s': this build of hetero reads no importance matrix files", path);
}

void hx_quantize_imatrix_close(hx_quantize_plan *p)
{
    p->imatrix = NULL;
}
