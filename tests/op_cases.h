/* Inputs of the layer ops that the op suites share: random floats, buffers
 * filled from host arrays, a task run on one device (or any), and the
 * paged-KV attention cases (block tables, metadata and caches written by
 * the reference). */
#ifndef HX_TESTS_OP_CASES_H
#define HX_TESTS_OP_CASES_H

#include <stddef.h>
#include <stdint.h>

#include "hetero.h"
#include "ops/ops.h"

/* n values uniform in [-1, 1) (tests/ref_ops.c's generator). */
void hx_case_random(float *x, size_t n, unsigned *seed);

/* A buffer holding a copy of `bytes` of data, or an uninitialized one. */
hx_buffer *hx_case_buffer(hx_runtime *rt, const void *data, size_t bytes);
hx_buffer *hx_case_empty(hx_runtime *rt, size_t bytes);
void hx_case_read(hx_buffer *b, void *dst, size_t bytes);
void hx_case_destroy(hx_buffer **b, int n);

/* Submits the built-in op `name` on `device` (-1: wherever the scheduler
 * places it) and waits for it; the task's status. */
hx_status hx_case_run(hx_runtime *rt, int device, const char *name, const void *args, size_t args_size, int n,
                      hx_buffer **b, const hx_access *modes);

#define HX_ATT_MAX_SEQS 8

typedef struct {
    uint32_t kv_type, Hq, Hkv, Dh, block_size, S;
    uint32_t ctx[HX_ATT_MAX_SEQS];   /* tokens each sequence holds, this batch's included */
    uint32_t fresh[HX_ATT_MAX_SEQS]; /* the batch's tokens: the last `fresh` positions */
    int interleave;    /* tokens of the sequences alternate in the batch */
} hx_att_case;

/* A cache other than the case's one type for both, stored as it is: the V
 * cache's type, the rows' Walsh-Hadamard widths (ops/ops.h). */
typedef struct {
    uint32_t v_type, rot_k, rot_v;
} hx_att_kv;

typedef struct {
    hx_op_attention a;
    float *q;
    uint8_t *kc, *vc;
    int32_t *meta;
    size_t q_floats, cache_bytes, v_cache_bytes, meta_ints;
} hx_att_setup;

/* Block tables shuffled over a cache with spare blocks of garbage, every
 * slot's K and V written by the reference, random queries. */
void hx_att_setup_make(const hx_att_case *c, hx_att_setup *o, unsigned *seed);
void hx_att_setup_make_kv(const hx_att_case *c, const hx_att_kv *kv, hx_att_setup *o, unsigned *seed);
void hx_att_setup_free(hx_att_setup *o);
/* The five buffers of an attention task over the setup (out last, empty). */
void hx_att_buffers(hx_runtime *rt, const hx_att_setup *o, hx_buffer *b[5]);

#endif
