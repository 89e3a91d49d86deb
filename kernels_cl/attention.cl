/* attention over the paged KV cache (ops/ops.h), K and V in F32, F16
 * or Q8_0, grouped-query (query head h reads KV head h / (Hq / Hkv)).
 *
 * prefill: a work-group per 16 (token, query head) rows of one KV head,
 *   looping over 16-key tiles of K and V staged in local memory, with an
 *   online softmax (running max and sum per row, accumulators rescaled), so
 *   no score matrix is ever stored.  Rows of different sequences in one
 *   tile are handled one sequence at a time (at most 16 passes).
 * decode (flash-decoding): a work-group per (share of the token's keys,
 *   token, KV head); its 64 items split into (query head, key range)
 *   pairs, each with its own online softmax, then the partial results are
 *   merged through local memory.  With one share that is the output; with
 *   several each share writes its unnormalised output, maximum and sum to
 *   scratch, and attention_decode_merge weighs the shares into the output.
 *   The launch cuts the keys into shares so that a long context keeps many
 *   work-groups busy (devices/cl_launch.c).
 * A sliding window (window > 0) limits a token at pos to the positions
 * pos - window + 1 .. pos: the prefill's key tiles start at the earliest
 * first position of the tile's rows and each row masks the keys before
 * its own; the decode's shares start at the token's first position.
 * Blocks wholly before every row's window may be -1 in the block table
 * (returned to the pool): such keys are never read.
 * Rows whose metadata points outside the batch or the cache come out NaN
 * and set HX_BAD_META in the status word. */
#include "common.cl"

#define ATT_WG 64
#define ATT_ROWS 16
#define ATT_KEYS 16
/* Head sizes up to DH_MAX; a second set of kernels (_dh256) holds up to
 * 256 (Gemma 3, Gemma 2 9B/27B's 256-wide heads): its prefill tiles take
 * 33 KiB of local memory where these take 17, and its accumulators twice
 * the private memory, which the common sizes (64, 128) should not pay. */
#define DH_MAX 128
#define DEC_CHUNK 16

#define HX_ATTENTION_PARAMS                                                                         \
    __global const float *q, __global const uchar *kc, __global const uchar *vc, __global const int *meta, \
        __global float *out, const uint T, const uint S, const uint max_blocks, const uint block_size, \
        const uint Hq, const uint Hkv, const uint Dh, const float scale, const ulong k_bytes,       \
        const ulong v_bytes, const uint window, __global uint *status

#define F32_KV_ROW ((ulong)Dh * 4)
#define F16_KV_ROW ((ulong)Dh * 2)
#define Q8_0_KV_ROW ((ulong)(Dh / HX_QK) * HX_Q8_0_BYTES)

/* Loads the K or V rows of the tile's keys into KVs, 8 elements at a time
 * (and the last Dh % 8 one by one); keys without a slot read as zeros. */
#define HX_ATTENTION_TILE(CACHE, LOAD, LOAD8)                                                       \
    for (uint e = lid; e < ATT_KEYS * (Dh / 8); e += ATT_WG) {                                      \
        const uint c = e / (Dh / 8), d0 = e % (Dh / 8) * 8;                                         \
        const int s = Slots[c];                                                                     \
        vstore8(s >= 0 ? LOAD8(CACHE, (ulong)s * Hkv + g, Dh, d0) : (float8)(0.0f), 0, &KVs[c][d0]); \
    }                                                                                               \
    for (uint e = lid; e < ATT_KEYS * (Dh % 8); e += ATT_WG) {                                      \
        const uint c = e / (Dh % 8), d = Dh / 8 * 8 + e % (Dh % 8);                                 \
        const int s = Slots[c];                                                                     \
        KVs[c][d] = s >= 0 ? LOAD(CACHE, (ulong)s * Hkv + g, Dh, d) : 0.0f;                         \
    }

#define HX_ATTENTION_PREFILL(ROW_BYTES, LOAD, LOAD8, DHM)                                           \
    __local float Qs[ATT_ROWS][DHM];                                                                \
    __local float KVs[ATT_KEYS][DHM];                                                               \
    __local float P[ATT_ROWS][ATT_KEYS];                                                            \
    __local float Ms[ATT_ROWS], Ls[ATT_ROWS], Alpha[ATT_ROWS];                                      \
    __local int RowSeq[ATT_ROWS], RowPos[ATT_ROWS], RowFirst[ATT_ROWS], Done[ATT_ROWS], Slots[ATT_KEYS]; \
    __local int cur_seq, cur_keys, cur_first, n_seqs;                                               \
    const uint lid = get_local_id(0), g = get_group_id(1), rep = Hq / Hkv;                          \
    const uint row0 = get_group_id(0) * ATT_ROWS, nrows = T * rep;                                  \
    const ulong n_slots = min(k_bytes, v_bytes) / (Hkv * (ROW_BYTES));                              \
    if (lid < ATT_ROWS) {                                                                           \
        const uint R = row0 + lid;                                                                  \
        int seq = -1, pos = -1;                                                                     \
        if (R < nrows) {                                                                            \
            const uint t = R / rep;                                                                 \
            seq = meta[2 * T + t];                                                                  \
            pos = meta[T + t];                                                                      \
            if (seq < 0 || (uint)seq >= S || pos < 0 || (ulong)pos >= (ulong)max_blocks * block_size) { \
                seq = -2;                                                                           \
                atomic_or(status, HX_BAD_META);                                                     \
            }                                                                                       \
        }                                                                                           \
        RowSeq[lid] = seq;                                                                          \
        RowPos[lid] = pos;                                                                          \
        RowFirst[lid] = window && pos >= (int)window ? pos - (int)window + 1 : 0;                   \
        Done[lid] = seq < 0;                                                                        \
    }                                                                                               \
    for (uint e = lid; e < ATT_ROWS * Dh; e += ATT_WG) {                                            \
        const uint r = e / Dh, d = e % Dh, R = row0 + r;                                            \
        Qs[r][d] = R < nrows ? q[((ulong)(R / rep) * Hq + g * rep + R % rep) * Dh + d] : 0.0f;      \
    }                                                                                               \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                   \
    /* One pass per sequence among the rows: a count every item reads, so that the loop             \
     * around the barriers runs alike in all (no break out of it after a barrier, which             \
     * PoCL 5's work-group compiler aborts on). */                                                  \
    if (lid == 0) {                                                                                 \
        int n = 0;                                                                                  \
        for (uint r = 0; r < ATT_ROWS; r++) {                                                       \
            int seen = Done[r];                                                                     \
            for (uint e = 0; e < r && !seen; e++)                                                   \
                seen = !Done[e] && RowSeq[e] == RowSeq[r];                                          \
            n += !seen;                                                                             \
        }                                                                                           \
        n_seqs = n;                                                                                 \
    }                                                                                               \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                   \
    const uint nseqs = (uint)n_seqs;                                                                \
    /* Accumulators: item (my_row, lane) owns dims lane * dq .. + dq - 1. */                        \
    const uint my_row = lid / 4, lane = lid % 4, dq = (Dh + 3) / 4, base = lane * dq;               \
    float acc[DHM / 4];                                                                             \
    for (uint it = 0; it < nseqs; it++) {                                                           \
        if (lid == 0) {                                                                             \
            int s = -1, n = 0, f = INT_MAX;                                                         \
            for (uint r = 0; r < ATT_ROWS; r++)                                                     \
                if (!Done[r] && (s < 0 || RowSeq[r] == s)) {                                        \
                    s = RowSeq[r];                                                                  \
                    n = max(n, RowPos[r] + 1);                                                      \
                    f = min(f, RowFirst[r]);                                                        \
                }                                                                                   \
            cur_seq = s;                                                                            \
            cur_keys = n;                                                                           \
            cur_first = s < 0 ? 0 : f;                                                              \
        }                                                                                           \
        barrier(CLK_LOCAL_MEM_FENCE);                                                               \
        const int seq = cur_seq;                                                                    \
        const uint nkeys = (uint)cur_keys, first = (uint)cur_first;                                 \
        const int mine = !Done[my_row] && RowSeq[my_row] == seq;                                    \
        if (lid < ATT_ROWS) {                                                                       \
            Ms[lid] = -INFINITY;                                                                    \
            Ls[lid] = 0.0f;                                                                         \
        }                                                                                           \
        for (uint k = 0; k < DHM / 4; k++)                                                          \
            acc[k] = 0.0f;                                                                          \
        for (uint j0 = first; j0 < nkeys; j0 += ATT_KEYS) {                                         \
            if (lid < ATT_KEYS) {                                                                   \
                /* Only a key some row attends to is read (a window's gap may be gone). */          \
                const int j = (int)(j0 + lid);                                                      \
                int need = 0;                                                                       \
                for (uint r = 0; r < ATT_ROWS; r++)                                                 \
                    need |= !Done[r] && RowSeq[r] == seq && RowFirst[r] <= j && j <= RowPos[r];     \
                Slots[lid] = need ? hx_kv_slot(meta, T, max_blocks, block_size, seq, (uint)j, n_slots) : -1; \
                if (need && Slots[lid] < 0)                                                         \
                    atomic_or(status, HX_BAD_META);                                                 \
            }                                                                                       \
            barrier(CLK_LOCAL_MEM_FENCE);                                                           \
            HX_ATTENTION_TILE(kc, LOAD, LOAD8)                                                      \
            barrier(CLK_LOCAL_MEM_FENCE);                                                           \
            for (uint e = lid; e < ATT_ROWS * ATT_KEYS; e += ATT_WG) {                              \
                const uint r = e / ATT_KEYS, c = e % ATT_KEYS;                                      \
                float sc = -INFINITY;                                                               \
                const int j = (int)(j0 + c);                                                        \
                if (!Done[r] && RowSeq[r] == seq && RowFirst[r] <= j && j <= RowPos[r] && Slots[c] >= 0) { \
                    float8 v8 = (float8)(0.0f);                                                     \
                    for (uint d = 0; d < Dh / 8; d++)                                               \
                        v8 += vload8(d, &Qs[r][0]) * vload8(d, &KVs[c][0]);                         \
                    float qk = dot(v8.lo, (float4)(1.0f)) + dot(v8.hi, (float4)(1.0f));             \
                    for (uint d = Dh / 8 * 8; d < Dh; d++)                                          \
                        qk += Qs[r][d] * KVs[c][d];                                                 \
                    sc = qk * scale;                                                                \
                }                                                                                   \
                P[r][c] = sc;                                                                       \
            }                                                                                       \
            barrier(CLK_LOCAL_MEM_FENCE);                                                           \
            if (lid < ATT_ROWS && !Done[lid] && RowSeq[lid] == seq) {                               \
                float mx = Ms[lid], alpha = 1.0f, sum = 0.0f;                                       \
                for (uint c = 0; c < ATT_KEYS; c++)                                                 \
                    mx = fmax(mx, P[lid][c]);                                                       \
                if (mx != -INFINITY)                                                                \
                    alpha = exp(Ms[lid] - mx);                                                      \
                for (uint c = 0; c < ATT_KEYS; c++) {                                               \
                    const float p = P[lid][c] == -INFINITY ? 0.0f : exp(P[lid][c] - mx);            \
                    P[lid][c] = p;                                                                  \
                    sum += p;                                                                       \
                }                                                                                   \
                Ls[lid] = Ls[lid] * alpha + sum;                                                    \
                Ms[lid] = mx;                                                                       \
                Alpha[lid] = alpha;                                                                 \
            }                                                                                       \
            HX_ATTENTION_TILE(vc, LOAD, LOAD8)                                                      \
            barrier(CLK_LOCAL_MEM_FENCE);                                                           \
            /* Every item sums, its row this sequence's or not (an item whose row is not            \
             * sums what its output write ignores; acc starts again at the next pass):              \
             * PoCL 6 computes this loop's results wrong with a branch on the row here.             \
             */                                                                                     \
            if (dq % 8 == 0) {                                                                      \
                const float a = Alpha[my_row];                                                      \
                for (uint k = 0; k < dq; k += 8) {                                                  \
                    float8 v = vload8(0, acc + k) * a;                                              \
                    for (uint c = 0; c < ATT_KEYS; c++)                                             \
                        v += P[my_row][c] * vload8(0, &KVs[c][base + k]);                           \
                    vstore8(v, 0, acc + k);                                                         \
                }                                                                                   \
            } else {                                                                                \
                const float a = Alpha[my_row];                                                      \
                for (uint k = 0; k < dq && base + k < Dh; k++) {                                    \
                    float v = acc[k] * a;                                                           \
                    for (uint c = 0; c < ATT_KEYS; c++)                                             \
                        v += P[my_row][c] * KVs[c][base + k];                                       \
                    acc[k] = v;                                                                     \
                }                                                                                   \
            }                                                                                       \
            barrier(CLK_LOCAL_MEM_FENCE);                                                           \
        }                                                                                           \
        if (mine) {                                                                                 \
            const uint R = row0 + my_row;                                                           \
            const float L = Ls[my_row];                                                             \
            __global float *o = out + ((ulong)(R / rep) * Hq + g * rep + R % rep) * Dh;             \
            for (uint k = 0; k < dq && base + k < Dh; k++)                                          \
                o[base + k] = L > 0.0f ? acc[k] / L : NAN;                                          \
        }                                                                                           \
        barrier(CLK_LOCAL_MEM_FENCE);                                                               \
        if (lid < ATT_ROWS && RowSeq[lid] == seq)                                                   \
            Done[lid] = 1;                                                                          \
        barrier(CLK_LOCAL_MEM_FENCE);                                                               \
    }                                                                                               \
    if (RowSeq[my_row] == -2) {                                                                     \
        const uint R = row0 + my_row;                                                               \
        __global float *o = out + ((ulong)(R / rep) * Hq + g * rep + R % rep) * Dh;                 \
        for (uint d = lane; d < Dh; d += 4)                                                         \
            o[d] = NAN;                                                                             \
    }

/* The decode kernels' parameters: the attention's, then the scratch the
 * shares of the keys write to when there are several, and their count. */
#define HX_ATTENTION_DECODE_PARAMS HX_ATTENTION_PARAMS, __global float *part, const uint nsplit

/* A share's output for (token t, query head r, share s) in scratch: Dh
 * floats of unnormalised output, then its running maximum and sum. */
#define DEC_PART(t, r, s) (part + (((ulong)(t) * Hq + (r)) * nsplit + (s)) * (Dh + 2))

#define HX_ATTENTION_DECODE(ROW_BYTES, DOT, AXPYN, DHM)                                             \
    __local float Mloc[ATT_WG], Lloc[ATT_WG], Mh[ATT_WG], Lh[ATT_WG];                               \
    __local float Buf[ATT_WG][DEC_CHUNK];                                                           \
    const uint lid = get_local_id(0), share = get_group_id(0), t = get_group_id(1), g = get_group_id(2); \
    const uint rep = Hq / Hkv, nrange = ATT_WG / rep, hh = lid % rep, range = lid / rep;            \
    const int active = range < nrange;                                                              \
    const ulong n_slots = min(k_bytes, v_bytes) / (Hkv * (ROW_BYTES));                              \
    const int seq = meta[2 * T + t], pos = meta[T + t];                                             \
    const int valid = seq >= 0 && (uint)seq < S && pos >= 0 && (ulong)pos < (ulong)max_blocks * block_size; \
    if (!valid && lid == 0 && share == 0)                                                           \
        atomic_or(status, HX_BAD_META);                                                             \
    /* This share's keys (the token's cut into nsplit runs), then this                              \
     * item's range of them. */                                                                     \
    const uint first = valid && window && (uint)pos >= window ? (uint)pos - window + 1 : 0;         \
    const uint nkeys = valid ? (uint)pos + 1 - first : 0, per_share = (nkeys + nsplit - 1) / nsplit; \
    const uint s_begin = first + min(nkeys, share * per_share);                                     \
    const uint s_keys = first + min(nkeys, share * per_share + per_share) - s_begin;                \
    const uint chunk = (s_keys + nrange - 1) / nrange;                                              \
    const uint j_begin = s_begin + min(s_keys, range * chunk), j_end = s_begin + min(s_keys, range * chunk + chunk); \
    __global const float *qv = q + ((ulong)t * Hq + g * rep + hh) * Dh;                             \
    float m = -INFINITY, l = 0.0f, acc[DHM];                                                        \
    for (uint d = 0; d < DHM; d++)                                                                  \
        acc[d] = 0.0f;                                                                              \
    int bad = 0;                                                                                    \
    HX_KV_ATTEND(DOT, AXPYN, (uint)seq, active ? j_begin : j_end, j_end, g, qv, m, l, acc, bad)     \
    if (bad)                                                                                        \
        atomic_or(status, HX_BAD_META);                                                             \
    Mloc[lid] = active ? m : -INFINITY;                                                             \
    Lloc[lid] = active ? l : 0.0f;                                                                  \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                   \
    if (lid < rep) {                                                                                \
        float M = -INFINITY, L = 0.0f;                                                              \
        for (uint s = 0; s < nrange; s++)                                                           \
            M = fmax(M, Mloc[s * rep + lid]);                                                       \
        for (uint s = 0; s < nrange; s++)                                                           \
            if (Mloc[s * rep + lid] != -INFINITY)                                                   \
                L += exp(Mloc[s * rep + lid] - M) * Lloc[s * rep + lid];                            \
        Mh[lid] = M;                                                                                \
        Lh[lid] = L;                                                                                \
        if (nsplit > 1) {                                                                           \
            DEC_PART(t, g * rep + lid, share)[Dh] = M;                                              \
            DEC_PART(t, g * rep + lid, share)[Dh + 1] = L;                                          \
        }                                                                                           \
    }                                                                                               \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                   \
    const float w = active && m != -INFINITY ? exp(m - Mh[hh]) : 0.0f;                              \
    for (uint d0 = 0; d0 < Dh; d0 += DEC_CHUNK) {                                                   \
        for (uint i = 0; i < DEC_CHUNK; i++)                                                        \
            Buf[lid][i] = w > 0.0f && d0 + i < Dh ? acc[d0 + i] * w : 0.0f;                         \
        barrier(CLK_LOCAL_MEM_FENCE);                                                               \
        for (uint o = lid; o < rep * DEC_CHUNK; o += ATT_WG) {                                      \
            const uint h2 = o / DEC_CHUNK, i = o % DEC_CHUNK;                                       \
            if (d0 + i < Dh) {                                                                      \
                float sum = 0.0f;                                                                   \
                for (uint s = 0; s < nrange; s++)                                                   \
                    sum += Buf[s * rep + h2][i];                                                    \
                if (nsplit > 1)                                                                     \
                    DEC_PART(t, g * rep + h2, share)[d0 + i] = sum;                                 \
                else                                                                                \
                    out[((ulong)t * Hq + g * rep + h2) * Dh + d0 + i] = Lh[h2] > 0.0f ? sum / Lh[h2] : NAN; \
            }                                                                                       \
        }                                                                                           \
        barrier(CLK_LOCAL_MEM_FENCE);                                                               \
    }

__kernel __attribute__((reqd_work_group_size(ATT_WG, 1, 1)))
void attention_prefill_f32(HX_ATTENTION_PARAMS) { HX_ATTENTION_PREFILL(F32_KV_ROW, hx_kv_f32, hx_kv8_f32, DH_MAX) }
__kernel __attribute__((reqd_work_group_size(ATT_WG, 1, 1)))
void attention_prefill_f32_dh256(HX_ATTENTION_PARAMS) { HX_ATTENTION_PREFILL(F32_KV_ROW, hx_kv_f32, hx_kv8_f32, 256) }
__kernel __attribute__((reqd_work_group_size(ATT_WG, 1, 1)))
void attention_prefill_f16(HX_ATTENTION_PARAMS) { HX_ATTENTION_PREFILL(F16_KV_ROW, hx_kv_f16, hx_kv8_f16, DH_MAX) }
__kernel __attribute__((reqd_work_group_size(ATT_WG, 1, 1)))
void attention_prefill_f16_dh256(HX_ATTENTION_PARAMS) { HX_ATTENTION_PREFILL(F16_KV_ROW, hx_kv_f16, hx_kv8_f16, 256) }
__kernel __attribute__((reqd_work_group_size(ATT_WG, 1, 1)))
void attention_prefill_q8_0(HX_ATTENTION_PARAMS) { HX_ATTENTION_PREFILL(Q8_0_KV_ROW, hx_kv_q8_0, hx_kv8_q8_0, DH_MAX) }
__kernel __attribute__((reqd_work_group_size(ATT_WG, 1, 1)))
void attention_prefill_q8_0_dh256(HX_ATTENTION_PARAMS) { HX_ATTENTION_PREFILL(Q8_0_KV_ROW, hx_kv_q8_0, hx_kv8_q8_0, 256) }
__kernel __attribute__((reqd_work_group_size(ATT_WG, 1, 1)))
void attention_decode_f32(HX_ATTENTION_DECODE_PARAMS) { HX_ATTENTION_DECODE(F32_KV_ROW, hx_kv_dot_f32, hx_kv_axpyn_f32, DH_MAX) }
__kernel __attribute__((reqd_work_group_size(ATT_WG, 1, 1)))
void attention_decode_f32_dh256(HX_ATTENTION_DECODE_PARAMS) { HX_ATTENTION_DECODE(F32_KV_ROW, hx_kv_dot_f32, hx_kv_axpyn_f32, 256) }
__kernel __attribute__((reqd_work_group_size(ATT_WG, 1, 1)))
void attention_decode_f16(HX_ATTENTION_DECODE_PARAMS) { HX_ATTENTION_DECODE(F16_KV_ROW, hx_kv_dot_f16, hx_kv_axpyn_f16, DH_MAX) }
__kernel __attribute__((reqd_work_group_size(ATT_WG, 1, 1)))
void attention_decode_f16_dh256(HX_ATTENTION_DECODE_PARAMS) { HX_ATTENTION_DECODE(F16_KV_ROW, hx_kv_dot_f16, hx_kv_axpyn_f16, 256) }
__kernel __attribute__((reqd_work_group_size(ATT_WG, 1, 1)))
void attention_decode_q8_0(HX_ATTENTION_DECODE_PARAMS) { HX_ATTENTION_DECODE(Q8_0_KV_ROW, hx_kv_dot_q8_0, hx_kv_axpyn_q8_0, DH_MAX) }
__kernel __attribute__((reqd_work_group_size(ATT_WG, 1, 1)))
void attention_decode_q8_0_dh256(HX_ATTENTION_DECODE_PARAMS) { HX_ATTENTION_DECODE(Q8_0_KV_ROW, hx_kv_dot_q8_0, hx_kv_axpyn_q8_0, 256) }

/* Weighs a decode's shares into its output: a work-group per (token,
 * query head), each share by exp(its max - the largest) over the total
 * sum; an empty share (sum 0) counts for nothing. */
__kernel __attribute__((reqd_work_group_size(ATT_WG, 1, 1)))
void attention_decode_merge(HX_ATTENTION_DECODE_PARAMS)
{
    const uint lid = get_local_id(0), t = get_group_id(1), r = get_group_id(2);
    const int seq = meta[2 * T + t], pos = meta[T + t];
    const int valid = seq >= 0 && (uint)seq < S && pos >= 0 && (ulong)pos < (ulong)max_blocks * block_size;
    float M = -INFINITY, L = 0.0f;
    for (uint s = 0; s < nsplit; s++)
        if (DEC_PART(t, r, s)[Dh + 1] > 0.0f)
            M = fmax(M, DEC_PART(t, r, s)[Dh]);
    for (uint s = 0; s < nsplit; s++)
        if (DEC_PART(t, r, s)[Dh + 1] > 0.0f)
            L += exp(DEC_PART(t, r, s)[Dh] - M) * DEC_PART(t, r, s)[Dh + 1];
    for (uint d = lid; d < Dh; d += ATT_WG) {
        float o = 0.0f;
        for (uint s = 0; s < nsplit; s++)
            if (DEC_PART(t, r, s)[Dh + 1] > 0.0f)
                o += exp(DEC_PART(t, r, s)[Dh] - M) * DEC_PART(t, r, s)[d];
        out[((ulong)t * Hq + r) * Dh + d] = valid && L > 0.0f ? o / L : NAN;
    }
}
