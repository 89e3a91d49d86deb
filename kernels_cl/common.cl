/* Shared by the op kernels (included, never built alone): F16 and GGUF
 * block decoding, and the paged KV cache's addressing.
 *
 * Block layouts (bytes; d, dmin are IEEE half):
 *   Q8_0: 32 elements, 34 bytes:  d, int8 q[32];             x = d * q
 *   Q4_0: 32 elements, 18 bytes:  d, uint8 qs[16];           x[i] = d * ((qs[i] & 15) - 8),
 *                                                             x[i+16] = d * ((qs[i] >> 4) - 8)
 *   Q4_K: 256 elements, 144 bytes: d, dmin, uint8 scales[12], uint8 qs[128];
 *         8 sub-blocks of 32 with 6-bit scale sc and min m packed in scales;
 *         sub-blocks 2c and 2c+1 take the low and high nibbles of qs[32c..32c+31];
 *         x = d * sc * nibble - dmin * m
 * Every block is an even number of bytes, so the halves are aligned for
 * vload_half (which needs no cl_khr_fp16). */

/* Bits of the status word a kernel reports bad input through (the
 * backend's HX_OPENCL_BAD_*, devices/opencl.h). */
#define HX_BAD_INDEX 1u
#define HX_BAD_SLOT 2u
#define HX_BAD_META 4u

#define HX_QK 32
#define HX_QK_K 256
#define HX_Q8_0_BYTES 34
#define HX_Q4_0_BYTES 18
#define HX_Q4_K_BYTES 144

float hx_half(__global const uchar *p)
{
    return vload_half(0, (__global const half *)p);
}

float hx_q8_0(__global const uchar *row, uint k)
{
    __global const uchar *b = row + (k / HX_QK) * HX_Q8_0_BYTES;
    return hx_half(b) * (float)((__global const char *)b)[2 + k % HX_QK];
}

float hx_q4_0(__global const uchar *row, uint k)
{
    __global const uchar *b = row + (k / HX_QK) * HX_Q4_0_BYTES;
    uint j = k % HX_QK;
    uchar q = b[2 + (j & 15)];
    return hx_half(b) * (float)((int)(j < 16 ? (q & 15) : (q >> 4)) - 8);
}

/* Scale and min of sub-block j (0..7) from the 12 packed bytes. */
void hx_q4_k_scale_min(__global const uchar *s, uint j, float *sc, float *m)
{
    if (j < 4) {
        *sc = (float)(s[j] & 63);
        *m = (float)(s[j + 4] & 63);
    } else {
        *sc = (float)((s[j + 4] & 15) | ((s[j - 4] >> 6) << 4));
        *m = (float)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

float hx_q4_k(__global const uchar *row, uint k)
{
    __global const uchar *b = row + (k / HX_QK_K) * HX_Q4_K_BYTES;
    uint i = k % HX_QK_K, chunk = i / 64, hi = (i / 32) & 1, l = i % 32;
    float sc, m;
    hx_q4_k_scale_min(b + 4, 2 * chunk + hi, &sc, &m);
    uchar q = b[16 + 32 * chunk + l];
    return hx_half(b) * sc * (float)(hi ? (q >> 4) : (q & 15)) - hx_half(b + 2) * m;
}

/* ---- the paged KV cache (ops/ops.h) ------------------------------- */

/* The cache slot of position j of sequence `seq`, or -1 when the block
 * table points outside the cache (bad metadata must not read out of it). */
int hx_kv_slot(__global const int *meta, uint T, uint max_blocks, uint block_size, uint seq, uint j,
               ulong n_slots)
{
    uint b = j / block_size;
    if (b >= max_blocks)
        return -1;
    int blk = meta[3 * T + seq * max_blocks + b];
    if (blk < 0)
        return -1;
    ulong slot = (ulong)blk * block_size + j % block_size;
    return slot < n_slots ? (int)slot : -1;
}

/* Element d of KV row `row` (= slot * Hkv + head). */
float hx_kv_f32(__global const uchar *cache, ulong row, uint Dh, uint d)
{
    return ((__global const float *)cache)[row * Dh + d];
}

float hx_kv_f16(__global const uchar *cache, ulong row, uint Dh, uint d)
{
    return vload_half(row * Dh + d, (__global const half *)cache);
}

float hx_kv_q8_0(__global const uchar *cache, ulong row, uint Dh, uint d)
{
    return hx_q8_0(cache + row * (Dh / HX_QK) * HX_Q8_0_BYTES, d);
}

/* Elements d0 .. d0+7 of a KV row (d0 a multiple of 8, d0 + 8 <= Dh). */
float8 hx_kv8_f32(__global const uchar *cache, ulong row, uint Dh, uint d0)
{
    return vload8(0, (__global const float *)cache + row * Dh + d0);
}

float8 hx_kv8_f16(__global const uchar *cache, ulong row, uint Dh, uint d0)
{
    return vload_half8(0, (__global const half *)cache + row * Dh + d0);
}

float8 hx_kv8_q8_0(__global const uchar *cache, ulong row, uint Dh, uint d0)
{
    __global const uchar *b = cache + row * (Dh / HX_QK) * HX_Q8_0_BYTES + (d0 / HX_QK) * HX_Q8_0_BYTES;
    return hx_half(b) * convert_float8(vload8(0, (__global const char *)(b + 2) + d0 % HX_QK));
}

/* Whole KV rows against a query (dot), and several into an accumulator
 * (axpyn, below): Q8_0 rows decode their scale once per 32 elements. */
float hx_kv_dot_f32(__global const uchar *cache, ulong row, uint Dh, __global const float *q)
{
    __global const float *k = (__global const float *)cache + row * Dh;
    float s = 0.0f;
    for (uint d = 0; d < Dh; d++)
        s += q[d] * k[d];
    return s;
}

float hx_kv_dot_f16(__global const uchar *cache, ulong row, uint Dh, __global const float *q)
{
    __global const half *k = (__global const half *)cache + row * Dh;
    float8 v = (float8)(0.0f);
    uint d = 0;
    for (; d + 8 <= Dh; d += 8)
        v += vload8(0, q + d) * vload_half8(0, k + d);
    float s = dot(v.lo, (float4)(1.0f)) + dot(v.hi, (float4)(1.0f));
    for (; d < Dh; d++)
        s += q[d] * vload_half(d, k);
    return s;
}

float hx_kv_dot_q8_0(__global const uchar *cache, ulong row, uint Dh, __global const float *q)
{
    __global const uchar *b = cache + row * (Dh / HX_QK) * HX_Q8_0_BYTES;
    float s = 0.0f;
    for (uint blk = 0; blk < Dh / HX_QK; blk++, b += HX_Q8_0_BYTES, q += HX_QK) {
        __global const char *k = (__global const char *)(b + 2);
        float8 t = (float8)(0.0f);
        for (uint i = 0; i < HX_QK; i += 8)
            t += vload8(0, q + i) * convert_float8(vload8(0, k + i));
        s += hx_half(b) * (dot(t.lo, (float4)(1.0f)) + dot(t.hi, (float4)(1.0f)));
    }
    return s;
}

/* Up to 8 rows at once into an accumulator (acc = acc * corr + sum of
 * p[u] * row u): each 8 elements of acc loaded and stored once for all. */
void hx_kv_axpyn_f32(__global const uchar *cache, const ulong *rows, uint n, uint Dh, const float *p, float corr,
                     float *acc)
{
    __global const float *v = (__global const float *)cache;
    uint d = 0;
    for (; d + 8 <= Dh; d += 8) {
        float8 a = vload8(0, acc + d) * corr;
        for (uint u = 0; u < n; u++)
            a += p[u] * vload8(0, v + rows[u] * Dh + d);
        vstore8(a, 0, acc + d);
    }
    for (; d < Dh; d++) {
        float a = acc[d] * corr;
        for (uint u = 0; u < n; u++)
            a += p[u] * v[rows[u] * Dh + d];
        acc[d] = a;
    }
}

void hx_kv_axpyn_f16(__global const uchar *cache, const ulong *rows, uint n, uint Dh, const float *p, float corr,
                     float *acc)
{
    __global const half *v = (__global const half *)cache;
    uint d = 0;
    for (; d + 8 <= Dh; d += 8) {
        float8 a = vload8(0, acc + d) * corr;
        for (uint u = 0; u < n; u++)
            a += p[u] * vload_half8(0, v + rows[u] * Dh + d);
        vstore8(a, 0, acc + d);
    }
    for (; d < Dh; d++) {
        float a = acc[d] * corr;
        for (uint u = 0; u < n; u++)
            a += p[u] * vload_half(rows[u] * Dh + d, v);
        acc[d] = a;
    }
}

void hx_kv_axpyn_q8_0(__global const uchar *cache, const ulong *rows, uint n, uint Dh, const float *p, float corr,
                      float *acc)
{
    const ulong row_bytes = (ulong)(Dh / HX_QK) * HX_Q8_0_BYTES;
    for (uint blk = 0; blk < Dh / HX_QK; blk++) {
        float pd[8];
        for (uint u = 0; u < n; u++)
            pd[u] = p[u] * hx_half(cache + rows[u] * row_bytes + blk * HX_Q8_0_BYTES);
        for (uint i = 0; i < HX_QK; i += 8) {
            float *ap = acc + blk * HX_QK + i;
            float8 a = vload8(0, ap) * corr;
            for (uint u = 0; u < n; u++)
                a += pd[u] * convert_float8(vload8(0, (__global const char *)(cache + rows[u] * row_bytes +
                                                                             blk * HX_Q8_0_BYTES + 2) + i));
            vstore8(a, 0, ap);
        }
    }
}

/* One query's online softmax over keys j_begin .. j_end - 1 of sequence
 * seq and KV head g, into m (running maximum), l (sum) and acc
 * (unnormalised output): HX_KV_BATCH keys at a time, their scores first,
 * then one rescale and one vector exp for all and one pass of AXPYN over
 * acc.  The block table is read once a block, not once a key; a key
 * whose block points outside the cache is skipped and sets `bad`.  Uses
 * the attention kernels' parameters meta, T, max_blocks, block_size, Hkv,
 * Dh, scale, kc, vc and n_slots. */
#define HX_KV_BATCH 8
#define HX_KV_ATTEND(DOT, AXPYN, seq, j_begin, j_end, g, qv, m, l, acc, bad)                       \
    {                                                                                               \
        int base_ = -1;                                                                             \
        for (uint j_ = (j_begin); j_ < (j_end);) {                                                  \
            ulong rows_[HX_KV_BATCH];                                                               \
            float sc_[HX_KV_BATCH], p_[HX_KV_BATCH];                                                \
            uint n_ = 0;                                                                            \
            for (; n_ < HX_KV_BATCH && j_ < (j_end); j_++) {                                        \
                if (base_ < 0 || j_ % block_size == 0) {                                            \
                    const int slot_ = hx_kv_slot(meta, T, max_blocks, block_size, (seq), j_, n_slots); \
                    base_ = slot_ < 0 ? -1 : slot_ - (int)(j_ % block_size);                        \
                    if (slot_ < 0 || (ulong)base_ + block_size > n_slots) {                         \
                        (bad) = 1;                                                                  \
                        base_ = -1;                                                                 \
                        continue;                                                                   \
                    }                                                                               \
                }                                                                                   \
                rows_[n_] = ((ulong)base_ + j_ % block_size) * Hkv + (g);                           \
                sc_[n_] = DOT(kc, rows_[n_], Dh, (qv)) * scale;                                     \
                n_++;                                                                               \
            }                                                                                       \
            float mx_ = (m);                                                                        \
            for (uint u_ = 0; u_ < n_; u_++)                                                        \
                mx_ = fmax(mx_, sc_[u_]);                                                           \
            for (uint u_ = n_; u_ < HX_KV_BATCH; u_++)                                              \
                sc_[u_] = -INFINITY;                                                                \
            const float corr_ = exp((m) - mx_);                                                     \
            const float8 p8_ = exp(vload8(0, sc_) - mx_);                                           \
            vstore8(p8_, 0, p_);                                                                    \
            if (n_) {                                                                               \
                (l) = (l) * corr_ + dot(p8_.lo, (float4)(1.0f)) + dot(p8_.hi, (float4)(1.0f));      \
                AXPYN(vc, rows_, n_, Dh, p_, corr_, (acc));                                         \
                (m) = mx_;                                                                          \
            }                                                                                       \
        }                                                                                           \
    }
