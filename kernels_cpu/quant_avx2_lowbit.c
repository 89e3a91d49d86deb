/* AVX2 kernels of Q2_K, Q3_K, IQ4_NL and IQ4_XS (kernels_cpu/quant_lowbit_x86.h). */
#define LOWBIT_TABLE hx_quant_avx2_lowbit
#include "kernels_cpu/quant_lowbit_x86.h"
