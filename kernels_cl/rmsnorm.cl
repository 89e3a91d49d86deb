/* rmsnorm: y = x / sqrt(mean(x^2) + eps) * w, one work-group per row. */

#define RMS_WG 64

__kernel __attribute__((reqd_work_group_size(RMS_WG, 1, 1)))
void rmsnorm(__global const float *x, __global const float *w, __global float *y, const uint T, const uint D,
             const float eps)
{
    __local float part[RMS_WG];
    const uint lid = get_local_id(0), t = get_group_id(0);
    __global const float *xr = x + (ulong)t * D;
    float s = 0.0f;
    for (uint i = lid; i < D; i += RMS_WG)
        s += xr[i] * xr[i];
    part[lid] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint half_n = RMS_WG / 2; half_n > 0; half_n /= 2) {
        if (lid < half_n)
            part[lid] += part[lid + half_n];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float inv = 1.0f / sqrt(part[0] / (float)D + eps);
    __global float *yr = y + (ulong)t * D;
    for (uint i = lid; i < D; i += RMS_WG)
        yr[i] = xr[i] * inv * w[i];
}
