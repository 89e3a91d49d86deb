/* The orthonormal Walsh-Hadamard rotation a quantized KV cache stores its
 * rows in (ops/ops.h, rot_k / rot_v): H[i][j] = (-1)^popcount(i & j) /
 * sqrt(w), symmetric and its own inverse. */
#ifndef HX_KERNELS_CPU_HADAMARD_H
#define HX_KERNELS_CPU_HADAMARD_H

#include <stdint.h>

/* The widest rotation the CPU kernels take, and the longest head row they
 * rotate on the stack. */
#define HX_HADAMARD_MAX 1024

/* Whether w is a width rows of n values can be rotated in: 0 (none), or a
 * power of two from 2 to HX_HADAMARD_MAX dividing n, with n at most
 * HX_HADAMARD_MAX when rotated. */
int hx_hadamard_width_ok(uint32_t w, uint32_t n);

/* x[0..n) rotated in place, each consecutive group of w values by H
 * (n a multiple of w; w a power of two, or 0: x unchanged). */
void hx_hadamard_rotate(float *x, uint32_t n, uint32_t w);

#endif
