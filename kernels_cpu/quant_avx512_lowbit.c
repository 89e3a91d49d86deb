/* AVX-512 kernels of Q2_K, Q3_K, IQ4_NL and IQ4_XS: the AVX2 ones with the
 * scaled pair sums added by VNNI's vpdpwssd (kernels_cpu/quant_lowbit_x86.h).
 * 256-bit vectors: a Q2_K/Q3_K run of 32 quants and an IQ4 sub-block are
 * one ymm each, and a zmm of two would need its scales spread across
 * lanes again. */
#define LOWBIT_TABLE hx_quant_avx512_lowbit
#define LOWBIT_VNNI 1
#include "kernels_cpu/quant_lowbit_x86.h"
