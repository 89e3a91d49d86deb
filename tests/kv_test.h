/* What the KV cache suites share: byte-vocabulary prompts, the relative
 * L2 distance of two logit rows, and greedy decoding's next token. */
#ifndef HX_TESTS_KV_TEST_H
#define HX_TESTS_KV_TEST_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* n pseudo-random byte tokens from `seed`. */
static inline void hx_kv_test_tokens(int32_t *t, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        t[i] = (int32_t)((seed >> 16) % 256);
    }
}

/* |a - b| / |b| over n values. */
static inline double hx_kv_test_rel_l2(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return sqrt(num / den);
}

static inline int32_t hx_kv_test_argmax(const float *l, uint32_t n)
{
    int32_t best = 0;
    for (uint32_t v = 1; v < n; v++)
        if (l[v] > l[best])
            best = (int32_t)v;
    return best;
}

#endif
