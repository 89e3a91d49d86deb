/* rope: rotates the first n_rot dims of each head by pos * freq_scale *
 * base^(-2i/n_rot) / factors[i] (factors read only when has_factors: Llama
 * 3.1's rope_freqs); pairs (2i, 2i+1) in normal mode, (i, i + n_rot/2) in
 * neox mode.  One work-item per pair. */

#define ROPE_WG 16

void hx_rope_pair(__global float *head, uint a, uint b, float theta)
{
    const float c = cos(theta), s = sin(theta);
    const float x0 = head[a], x1 = head[b];
    head[a] = x0 * c - x1 * s;
    head[b] = x0 * s + x1 * c;
}

float hx_rope_theta(int pos, uint i, uint n_rot, float base, float scale, __global const float *factors,
                    uint has_factors)
{
    const float theta = (float)pos * scale * pow(base, -2.0f * (float)i / (float)n_rot);
    return has_factors ? theta / factors[i] : theta;
}

__kernel __attribute__((reqd_work_group_size(ROPE_WG, 1, 1)))
void rope_norm(__global float *x, __global const int *pos, const uint T, const uint H, const uint Dh,
                        const uint n_rot, const float base, const float scale,
                        __global const float *factors, const uint has_factors)
{
    const uint i = get_global_id(0), h = get_global_id(1), t = get_global_id(2);
    if (i >= n_rot / 2 || h >= H || t >= T)
        return;
    hx_rope_pair(x + ((ulong)t * H + h) * Dh, 2 * i, 2 * i + 1, hx_rope_theta(pos[t], i, n_rot, base, scale, factors, has_factors));
}

__kernel __attribute__((reqd_work_group_size(ROPE_WG, 1, 1)))
void rope_neox(__global float *x, __global const int *pos, const uint T, const uint H, const uint Dh,
                        const uint n_rot, const float base, const float scale,
                        __global const float *factors, const uint has_factors)
{
    const uint i = get_global_id(0), h = get_global_id(1), t = get_global_id(2);
    if (i >= n_rot / 2 || h >= H || t >= T)
        return;
    hx_rope_pair(x + ((ulong)t * H + h) * Dh, i, i + n_rot / 2, hx_rope_theta(pos[t], i, n_rot, base, scale, factors, has_factors));
}
