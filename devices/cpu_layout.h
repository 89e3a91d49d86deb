/* The CPU backend's lay_out_weight (runtime/device.h). Internal. */
#ifndef HX_DEVICES_CPU_LAYOUT_H
#define HX_DEVICES_CPU_LAYOUT_H

#include "runtime/device.h"

hx_status hx_cpu_lay_out_weight(hx_device *d, hx_buffer *b, hx_type type, uint64_t cols, uint64_t rows, int always,
                                size_t *bytes);

#endif
