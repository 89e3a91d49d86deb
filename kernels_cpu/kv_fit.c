/* The KV cache's own quantizers (hx_quant_kv_quantizer): Q4_0 and Q8_0
 * blocks exactly as those types store them, each block's scale fitted by
 * least squares over a few candidate roundings instead of mapped from its
 * largest element.  A cache row has no importance matrix, so weights
 * stand in for one (Q4_0's; Q8_0's fit weighs every element alike):
 * - values (`equal`) weigh every element alike: attention sums V rows,
 *   so what it loses is their plain squared error;
 * - keys weigh each element by its square (as ggml's make_qx_quants
 *   does without an importance matrix): a score q.k is carried by the
 *   key's large elements, which the queries' large elements meet, and
 *   plain least squares trades their precision away.
 * kernels_cpu/kv_fit_avx2.c gives the same bytes at AVX2 and AVX-512;
 * the OpenCL and CUDA kv_store kernels run the Q8_0 fit's steps too. */
#include <stddef.h>

#include "kernels_cpu/quant_fit.h"
#include "ops/kv_fit.h"

/* Q4_0: hx_quant_fit_sym, the best of 19 roundings around -8/max.  On
 * SmolLM2 Q4_1 over GPL-3 (14 chunks of 512) the mean KLD from the F16
 * cache was, reference -> equal -> squares: K alone 0.0642 -> 0.0654 ->
 * 0.0627; V alone 0.0112 -> 0.0100 -> 0.0103; so each takes the better. */
static void quantize_q4_0_fit(const float *x, uint8_t *y, int64_t n, int equal_weights)
{
    static const float equal[HX_QK] = {[0 ... HX_QK - 1] = 1.0f};
    int8_t L[HX_QK];
    for (int64_t b = 0; b < n / HX_QK; b++, x += HX_QK, y += sizeof(hx_block_q4_0)) {
        const float d = hx_quant_fit_sym(HX_QK, 8, x, L, equal_weights ? equal : NULL);
        hx_st16(y, hx_fp32_to_fp16(d));
        hx_quant_pack32((const uint8_t *)L, y + offsetof(hx_block_q4_0, qs), NULL);
    }
}

void hx_quant_quantize_q4_0_keys(const float *x, void *y, int64_t n) { quantize_q4_0_fit(x, y, n, 0); }
void hx_quant_quantize_q4_0_values(const float *x, void *y, int64_t n) { quantize_q4_0_fit(x, y, n, 1); }

/* Q8_0: ops/kv_fit.h, the fit every device runs, keys and values alike. */
void hx_quant_quantize_q8_0_kv(const float *x, void *y, int64_t n) { hx_quant_q8_0_blocks(x, y, n, hx_kv_fit_q8_0); }
