/* get_rows: out[t] = table[ids[t]] as F32 (ops/ops.h).  An id outside
 * the table is reported through the status word and gives a row of NaN. */
#include "common.cl"

#define GR_WG 32

#define HX_GET_ROWS_PARAMS                                                                          \
    __global const uchar *table, __global const int *ids, __global float *out, const uint T, const uint D, \
        const ulong table_bytes, __global uint *status

#define HX_GET_ROWS(ROW_BYTES, LOAD)                                                                \
    const uint d = get_global_id(0), t = get_global_id(1);                                          \
    if (d >= D || t >= T)                                                                           \
        return;                                                                                     \
    const ulong row_bytes = (ROW_BYTES);                                                            \
    const int id = ids[t];                                                                          \
    float v = NAN;                                                                                  \
    if (id >= 0 && (ulong)id < table_bytes / row_bytes) {                                           \
        __global const uchar *row = table + (ulong)id * row_bytes;                                  \
        v = (LOAD);                                                                                 \
    } else if (d == 0) {                                                                            \
        atomic_or(status, HX_BAD_INDEX);                                                            \
    }                                                                                               \
    out[(ulong)t * D + d] = v;

__kernel __attribute__((reqd_work_group_size(GR_WG, 1, 1)))
void get_rows_f32(HX_GET_ROWS_PARAMS) { HX_GET_ROWS((ulong)D * 4, ((__global const float *)row)[d]) }
__kernel __attribute__((reqd_work_group_size(GR_WG, 1, 1)))
void get_rows_f16(HX_GET_ROWS_PARAMS) { HX_GET_ROWS((ulong)D * 2, vload_half(d, (__global const half *)row)) }
__kernel __attribute__((reqd_work_group_size(GR_WG, 1, 1)))
void get_rows_q8_0(HX_GET_ROWS_PARAMS) { HX_GET_ROWS((ulong)(D / HX_QK) * HX_Q8_0_BYTES, hx_q8_0(row, d)) }
__kernel __attribute__((reqd_work_group_size(GR_WG, 1, 1)))
void get_rows_q4_0(HX_GET_ROWS_PARAMS) { HX_GET_ROWS((ulong)(D / HX_QK) * HX_Q4_0_BYTES, hx_q4_0(row, d)) }
