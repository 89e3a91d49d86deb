/* The fast Walsh-Hadamard transform (kernels_cpu/hadamard.h): log2(w)
 * passes of sums and differences, then the 1/sqrt(w) scale, where a
 * matrix product would cost w multiplies a value. */
#include <math.h>

#include "kernels_cpu/hadamard.h"

int hx_hadamard_width_ok(uint32_t w, uint32_t n)
{
    if (w == 0)
        return 1;
    return w >= 2 && w <= HX_HADAMARD_MAX && (w & (w - 1)) == 0 && n % w == 0 && n <= HX_HADAMARD_MAX;
}

void hx_hadamard_rotate(float *x, uint32_t n, uint32_t w)
{
    if (!w) /* no rotation (and no groups to step over) */
        return;
    const float scale = 1.0f / sqrtf((float)w);
    for (uint32_t g = 0; g + w <= n; g += w) {
        float *y = x + g;
        for (uint32_t h = 1; h < w; h *= 2)
            for (uint32_t i = 0; i < w; i += 2 * h)
                for (uint32_t j = i; j < i + h; j++) {
                    const float a = y[j], b = y[j + h];
                    y[j] = a + b;
                    y[j + h] = a - b;
                }
        for (uint32_t i = 0; i < w; i++)
            y[i] *= scale;
    }
}
