/* The CPU's layout of a loaded model's weight matrices (kernels_cpu/repack.h):
 * the interleaved copy its repacked kernels read, made once at load and
 * hung on the weight's buffer, which CPU tasks receive beside the mapped
 * rows and other devices never see.  The CPU backend's lay_out_weight. */
#include "devices/cpu_layout.h"
#include "kernels_cpu/repack.h"
#include "runtime/buffer.h"

/* The types whose repacked kernels beat the row-at-a-time ones on this
 * code's measurements (docs/repack.md), and so repacked unless asked not
 * to be. */
static int repack_pays(hx_type t)
{
    switch (t) {
    case HX_TYPE_Q4_0:
    case HX_TYPE_Q4_1:
    case HX_TYPE_Q5_0:
    case HX_TYPE_Q5_1:
    case HX_TYPE_Q8_0:
    case HX_TYPE_Q4_K:
    case HX_TYPE_Q5_K:
    case HX_TYPE_Q6_K: return 1;
    default: return 0;
    }
}

hx_status hx_cpu_lay_out_weight(hx_device *d, hx_buffer *b, hx_type type, uint64_t cols, uint64_t rows, int always,
                                size_t *bytes)
{
    (void)d;
    *bytes = 0;
    if (rows < 2 || b->cpu_layout || !hx_repack_supported(type, cols, rows) || (!always && !repack_pays(type)))
        return HX_OK;
    hx_repacked *r;
    hx_status s = hx_repack_make(type, cols, rows, b->host, &r);
    if (s)
        return s;
    hx_buffer_set_cpu_layout(b, r, hx_repack_free);
    *bytes = r->bytes;
    return HX_OK;
}
