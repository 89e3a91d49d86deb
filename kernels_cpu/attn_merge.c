/* Split-K attention on the CPU: a part's attention and the merge of the
 * parts (kernels_cpu/attn_merge.h).  Plain loops: the merge is O(parts x
 * Dh) per head, nothing beside the attention over the positions. */
#include <math.h>
#include <string.h>

#include "kernels_cpu/attn_merge.h"

void hx_attn_part_f32(const float *q, const float *k, const float *v, uint32_t n, uint32_t Dh, float scale,
                      float *out, float *max, float *sum)
{
    memset(out, 0, sizeof *out * Dh);
    float m = -INFINITY, l = 0;
    /* Online softmax: a larger score rescales what was summed so far, so
     * no exp() ever sees a positive argument. */
    for (uint32_t j = 0; j < n; j++) {
        const float *kj = k + (size_t)j * Dh, *vj = v + (size_t)j * Dh;
        float s = 0;
        for (uint32_t d = 0; d < Dh; d++)
            s += q[d] * kj[d];
        s *= scale;
        if (s > m) {
            float r = expf(m - s);
            for (uint32_t d = 0; d < Dh; d++)
                out[d] *= r;
            l *= r;
            m = s;
        }
        float w = expf(s - m);
        l += w;
        for (uint32_t d = 0; d < Dh; d++)
            out[d] += w * vj[d];
    }
    for (uint32_t d = 0; l > 0 && d < Dh; d++)
        out[d] /= l;
    *max = m;
    *sum = l;
}

void hx_attn_merge_f32(uint32_t n_parts, uint32_t Dh, const float *const *out, const float *max, const float *sum,
                       float *merged)
{
    float M = -INFINITY;
    for (uint32_t p = 0; p < n_parts; p++)
        if (sum[p] > 0 && max[p] > M)
            M = max[p];
    memset(merged, 0, sizeof *merged * Dh);
    float total = 0;
    for (uint32_t p = 0; p < n_parts; p++) {
        if (!(sum[p] > 0))
            continue;
        float w = expf(max[p] - M) * sum[p];
        total += w;
        for (uint32_t d = 0; d < Dh; d++)
            merged[d] += w * out[p][d];
    }
    for (uint32_t d = 0; total > 0 && d < Dh; d++)
        merged[d] /= total;
}
