/* What the long-run and misuse suites share: a small synthetic model in a
 * temporary directory (two layers, grouped-query attention, the byte
 * vocabulary: a few hundred tasks per token, fast under the sanitizers),
 * and a CPU runtime that neither reads nor writes the caches. */
#ifndef HX_TESTS_SMALL_MODEL_H
#define HX_TESTS_SMALL_MODEL_H

#include "hetero.h"

typedef struct {
    char dir[64], path[128];
} hx_small_model;

/* Writes the model's 2-D weights in `type` ("f32", "q8_0"...). */
void hx_small_model_write(hx_small_model *sm, const char *type);
void hx_small_model_remove(hx_small_model *sm);
/* The CPU alone, `sched` (NULL: the default policy), no injection nor
 * trace, performance models in memory only. */
hx_runtime *hx_small_runtime(int cpu_threads, const char *sched);

#endif
