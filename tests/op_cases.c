/* Inputs of the layer ops shared by the op suites (tests/op_cases.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/hx_test.h"
#include "tests/op_cases.h"
#include "tests/ref_ops.h"

void hx_case_random(float *x, size_t n, unsigned *seed)
{
    for (size_t i = 0; i < n; i++)
        x[i] = hx_ref_uniform(seed);
}

hx_buffer *hx_case_empty(hx_runtime *rt, size_t bytes)
{
    hx_buffer *b;
    HX_ASSERT_OK(hx_buffer_create(rt, bytes, &b));
    return b;
}

hx_buffer *hx_case_buffer(hx_runtime *rt, const void *data, size_t bytes)
{
    hx_buffer *b = hx_case_empty(rt, bytes);
    void *p;
    HX_ASSERT_OK(hx_buffer_acquire(b, HX_W, &p));
    memcpy(p, data, bytes);
    return b;
}

void hx_case_read(hx_buffer *b, void *dst, size_t bytes)
{
    void *p;
    HX_ASSERT_OK(hx_buffer_acquire(b, HX_R, &p));
    memcpy(dst, p, bytes);
}

void hx_case_destroy(hx_buffer **b, int n)
{
    for (int i = 0; i < n; i++)
        hx_buffer_destroy(b[i]);
}

hx_status hx_case_run(hx_runtime *rt, int device, const char *name, const void *args, size_t args_size, int n,
                      hx_buffer **b, const hx_access *modes)
{
    hx_task_desc d = {.codelet = hx_codelet_builtin(name), .nbuffers = n, .args = args, .args_size = args_size,
                      .device = device};
    ck_assert_msg(d.codelet != NULL, "no built-in op %s", name);
    for (int i = 0; i < n; i++) {
        d.buffers[i] = b[i];
        d.modes[i] = modes[i];
    }
    hx_task *t;
    hx_status s = hx_task_submit(rt, &d, &t);
    return s ? s : hx_task_wait(t);
}

/* Block tables: a shuffled permutation, so neighbours in a sequence are
 * not neighbours in the cache. */
static void shuffled_tables(const hx_att_case *c, int32_t *table, uint32_t max_blocks, uint32_t n_blocks,
                            unsigned *seed)
{
    uint32_t *perm = malloc(4 * n_blocks);
    for (uint32_t i = 0; i < n_blocks; i++)
        perm[i] = i;
    for (uint32_t i = n_blocks - 1; i > 0; i--) {
        uint32_t j = (uint32_t)((hx_ref_uniform(seed) + 1.0f) * 0.5f * (float)(i + 1)) % (i + 1), x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    for (uint32_t s = 0, next = 0; s < c->S; s++)
        for (uint32_t b = 0; b < (c->ctx[s] + c->block_size - 1) / c->block_size; b++)
            table[s * max_blocks + b] = (int32_t)perm[next++];
    free(perm);
}

/* Every slot of the cache gets random K and V, written by the reference. */
static void random_caches(const hx_att_case *c, hx_att_setup *o, uint32_t n_slots, unsigned *seed)
{
    o->cache_bytes = (size_t)n_slots * c->Hkv * hx_ref_row_bytes(c->kv_type, c->Dh);
    o->v_cache_bytes = (size_t)n_slots * c->Hkv * hx_ref_row_bytes(o->a.v_type, c->Dh);
    o->kc = malloc(o->cache_bytes);
    o->vc = malloc(o->v_cache_bytes);
    size_t nkv = (size_t)n_slots * c->Hkv * c->Dh;
    float *k = malloc(4 * nkv), *v = malloc(4 * nkv);
    hx_case_random(k, nkv, seed);
    hx_case_random(v, nkv, seed);
    for (size_t i = 0; i < nkv; i++)
        k[i] *= 2.0f; /* sharper softmax */
    hx_kv_layout all = {n_slots, 1, 0, c->block_size};
    int32_t *ident = malloc(4 * hx_meta_ints(&all));
    for (uint32_t i = 0; i < n_slots; i++)
        ident[i] = (int32_t)i;
    hx_op_kv_store st = {all, c->Hkv, c->Dh, c->kv_type, o->a.v_type, o->a.rot_k, o->a.rot_v, 0};
    hx_ref_kv_store(&st, k, v, o->kc, o->vc, ident, n_slots, NULL);
    free(ident);
    free(k);
    free(v);
}

void hx_att_setup_make(const hx_att_case *c, hx_att_setup *o, unsigned *seed) { hx_att_setup_make_kv(c, NULL, o, seed); }

void hx_att_setup_make_kv(const hx_att_case *c, const hx_att_kv *ckv, hx_att_setup *o, unsigned *seed)
{
    uint32_t T = 0, max_blocks = 0, n_blocks = 3; /* spare blocks hold garbage nobody may read */
    for (uint32_t s = 0; s < c->S; s++) {
        uint32_t nb = (c->ctx[s] + c->block_size - 1) / c->block_size;
        max_blocks = nb > max_blocks ? nb : max_blocks;
        n_blocks += nb;
        T += c->fresh[s];
    }
    hx_kv_layout kv = {T, c->S, max_blocks, c->block_size};
    o->a = (hx_op_attention){kv,          c->Hq, c->Hkv, c->Dh, c->kv_type, 1.0f / sqrtf((float)c->Dh), 0,
                             c->kv_type, 0,     0};
    if (ckv) {
        o->a.v_type = ckv->v_type;
        o->a.rot_k = ckv->rot_k;
        o->a.rot_v = ckv->rot_v;
    }
    o->meta_ints = hx_meta_ints(&kv);
    o->meta = malloc(4 * o->meta_ints);
    for (size_t i = 0; i < o->meta_ints; i++)
        o->meta[i] = -1;
    int32_t *table = o->meta + 3 * T;
    shuffled_tables(c, table, max_blocks, n_blocks, seed);
    /* The batch's tokens. */
    uint32_t t = 0, done[HX_ATT_MAX_SEQS] = {0};
    while (t < T)
        for (uint32_t s = 0; s < c->S; s++) {
            uint32_t take = c->interleave ? 1 : c->fresh[s];
            for (uint32_t i = 0; i < take && done[s] < c->fresh[s]; i++, done[s]++, t++) {
                uint32_t pos = c->ctx[s] - c->fresh[s] + done[s];
                o->meta[t] = table[s * max_blocks + pos / c->block_size] * (int32_t)c->block_size +
                             (int32_t)(pos % c->block_size);
                o->meta[T + t] = (int32_t)pos;
                o->meta[2 * T + t] = (int32_t)s;
            }
        }
    random_caches(c, o, n_blocks * c->block_size, seed);
    o->q_floats = (size_t)T * c->Hq * c->Dh;
    o->q = malloc(4 * o->q_floats);
    hx_case_random(o->q, o->q_floats, seed);
}

void hx_att_setup_free(hx_att_setup *o)
{
    free(o->q);
    free(o->kc);
    free(o->vc);
    free(o->meta);
}

void hx_att_buffers(hx_runtime *rt, const hx_att_setup *o, hx_buffer *b[5])
{
    b[0] = hx_case_buffer(rt, o->q, 4 * o->q_floats);
    b[1] = hx_case_buffer(rt, o->kc, o->cache_bytes);
    b[2] = hx_case_buffer(rt, o->vc, o->v_cache_bytes);
    b[3] = hx_case_buffer(rt, o->meta, 4 * o->meta_ints);
    b[4] = hx_case_empty(rt, 4 * o->q_floats);
}
