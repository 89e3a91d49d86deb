/* Attention split over parts of a sequence's positions (flash-decoding's
 * split-K): each part is attended to alone, its softmax taken within it,
 * and the parts' results are merged with one rescale.  What lets a
 * sequence's KV blocks live in several places (host memory and a device)
 * with attention for each part run where its blocks are. */
#ifndef HX_KERNELS_CPU_ATTN_MERGE_H
#define HX_KERNELS_CPU_ATTN_MERGE_H

#include <stdint.h>

/* One query head over n positions of f32 K and V rows ([n][Dh]): `out`
 * (Dh) the softmax-weighted sum of the V rows, normalized within the part,
 * *max the largest scaled score, *sum the sum of exp(score - *max).  A part
 * of no positions gives max = -INFINITY, sum = 0, out zeros. */
void hx_attn_part_f32(const float *q, const float *k, const float *v, uint32_t n, uint32_t Dh, float scale,
                      float *out, float *max, float *sum);

/* The attention over all n_parts parts at once: out[p] (Dh each),
 * max[p] and sum[p] as hx_attn_part_f32 gives them, merged into `merged`
 * (Dh): each part weighted by exp(max[p] - M) * sum[p] with M the largest
 * max, over the sum of those weights.  Parts of no positions count for
 * nothing; when every part is empty `merged` is zeros. */
void hx_attn_merge_f32(uint32_t n_parts, uint32_t Dh, const float *const *out, const float *max, const float *sum,
                       float *merged);

#endif
