/* Every OpenCL kernel of the layer ops (kernels_cl/) against the scalar
 * references of tests/ref_ops.c, on random inputs of many shapes, by
 * normalized mean squared error.  Bounds, each ~1000x what PoCL measures:
 * ops that only move or decode data 1e-12 (measured 0); float
 * accumulations (norms, matmuls over K up to 1024, softmax-weighted sums
 * over up to 200 keys) 1e-10 (measured <= 3e-13); rope 1e-9, since theta is
 * computed in float for positions up to 600 (measured <= 2e-11).  A Q8_0
 * cache written by the kernel may differ from the reference in a rounding
 * tie of the scale's division (1e-6 on the decoded values; measured 0). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ops/ops.h"
#include "tests/cl_test.h"
#include "tests/ref_ops.h"

#define NMSE_EXACT 1e-12
#define NMSE_ACCUM 1e-10
#define NMSE_ROPE 1e-9
#define NMSE_ATTENTION 1e-10

/* The same checks run on the CPU device (suite cpu_ops): every op on
 * every device against one reference.  On the CPU, quantized weights meet
 * activations quantized to Q8_0/Q8_K, and a Q8_0 KV cache meets a query
 * quantized to Q8_0, as in llama.cpp: rounding to 8 bits with one scale per
 * block costs ~1e-5 NMSE over many outputs, up to ~2e-4 for a single dot
 * product with cancellation, so those cases are held to 1e-3. */
static const char *target = "opencl";

static void target_cpu(void) { target = "cpu"; }
static int on_cpu(void) { return !strcmp(target, "cpu"); }

static double matmul_bound(uint32_t type)
{
    return on_cpu() && type != HX_REF_F32 && type != HX_REF_F16 ? 1e-3 : NMSE_ACCUM;
}

/* The CPU rounds the query to Q8_0 for a Q8_0 or Q4_0 cache's dot products. */
static double attention_bound(uint32_t kv_type)
{
    return on_cpu() && (kv_type == HX_REF_Q8_0 || kv_type == HX_REF_Q4_0) ? 1e-3 : NMSE_ATTENTION;
}

static hx_runtime *open_opencl(void)
{
    hx_runtime *rt = hx_cl_test_open(target, 0);
    if (!on_cpu())
        hx_cl_test_device(rt);
    return rt;
}

static hx_buffer *buffer_of(hx_runtime *rt, const void *data, size_t bytes)
{
    return hx_cl_test_buffer(rt, data, bytes);
}

static hx_buffer *buffer_empty(hx_runtime *rt, size_t bytes)
{
    hx_buffer *b;
    HX_ASSERT_OK(hx_buffer_create(rt, bytes, &b));
    return b;
}

static hx_status run(hx_runtime *rt, const char *op, const void *args, size_t args_size, int n, hx_buffer **b,
                     const hx_access *modes)
{
    hx_task_desc d = {.codelet = hx_codelet_builtin(op), .nbuffers = n, .args = args, .args_size = args_size,
                      .device = -1};
    ck_assert_ptr_nonnull(d.codelet);
    for (int i = 0; i < n; i++) {
        d.buffers[i] = b[i];
        d.modes[i] = modes[i];
    }
    hx_task *t;
    hx_status s = hx_task_submit(rt, &d, &t);
    return s ? s : hx_task_wait(t);
}

static void read_back(hx_buffer *b, void *dst, size_t bytes)
{
    void *p;
    HX_ASSERT_OK(hx_buffer_acquire(b, HX_R, &p));
    memcpy(dst, p, bytes);
}

static void destroy_all(hx_buffer **b, int n)
{
    for (int i = 0; i < n; i++)
        hx_buffer_destroy(b[i]);
}

static void random_floats(float *x, size_t n, unsigned *seed)
{
    for (size_t i = 0; i < n; i++)
        x[i] = hx_ref_uniform(seed);
}

/* ---- get_rows ------------------------------------------------------------ */

START_TEST(get_rows_matches_reference)
{
    hx_runtime *rt = open_opencl();
    const uint32_t types[] = {HX_REF_F32, HX_REF_F16, HX_REF_Q8_0, HX_REF_Q4_0};
    const uint32_t dims[][2] = {{1, 32}, {5, 96}, {17, 4096}, {3, 33}};
    unsigned seed = 1;
    for (int ti = 0; ti < 4; ti++)
        for (int s = 0; s < 4; s++) {
            uint32_t type = types[ti], T = dims[s][0], D = dims[s][1], V = 37;
            if (D % hx_ref_block(type))
                continue;
            size_t row = hx_ref_row_bytes(type, D);
            uint8_t *table = malloc(row * V);
            for (uint32_t v = 0; v < V; v++)
                hx_ref_random_row(type, table + v * row, D, &seed);
            int32_t *ids = malloc(4 * T);
            for (uint32_t t = 0; t < T; t++)
                ids[t] = (int32_t)(hx_ref_uniform(&seed) * 0.5f * V + 0.5f * V) % (int32_t)V;
            if (T > 2)
                ids[T - 1] = (int32_t)V; /* one past the table: an error, and a NaN row */
            hx_op_get_rows a = {type, T, D};
            double *ref = malloc(sizeof(double) * T * D);
            hx_ref_get_rows(&a, table, row * V, ids, ref);
            hx_buffer *b[3] = {buffer_of(rt, table, row * V), buffer_of(rt, ids, 4 * T),
                               buffer_empty(rt, 4ull * T * D)};
            hx_status st = run(rt, "get_rows", &a, sizeof a, 3, b, (hx_access[]){HX_R, HX_R, HX_W});
            if (T > 2) {
                ck_assert_int_eq(st, HX_ERR_RANGE);
                ck_assert_msg(strstr(hx_last_error(), "an index outside its table"), "%s", hx_last_error());
            } else {
                HX_ASSERT_OK(st);
            }
            float *out = malloc(4ull * T * D);
            read_back(b[2], out, 4ull * T * D);
            uint32_t good = T > 2 ? T - 1 : T;
            double e = hx_ref_nmse(out, ref, (size_t)good * D);
            ck_assert_msg(e <= NMSE_EXACT, "type %u T %u D %u: nmse %g", type, T, D, e);
            for (uint32_t d = 0; good < T && d < D; d++)
                ck_assert_msg(isnan(out[(size_t)good * D + d]), "out-of-table id gave %g", out[(size_t)good * D + d]);
            destroy_all(b, 3);
            free(table);
            free(ids);
            free(ref);
            free(out);
        }
    hx_runtime_close(rt);
}
END_TEST

/* ---- rmsnorm ------------------------------------------------------------- */

START_TEST(rmsnorm_matches_reference)
{
    hx_runtime *rt = open_opencl();
    const uint32_t dims[][2] = {{1, 1}, {3, 17}, {7, 4096}, {2, 1000}, {65, 64}};
    unsigned seed = 2;
    for (int s = 0; s < 5; s++) {
        uint32_t T = dims[s][0], D = dims[s][1];
        float *x = malloc(4ull * T * D), *w = malloc(4ull * D), *y = malloc(4ull * T * D);
        random_floats(x, (size_t)T * D, &seed);
        random_floats(w, D, &seed);
        hx_op_rmsnorm a = {T, D, 1e-5f};
        double *ref = malloc(sizeof(double) * T * D);
        hx_ref_rmsnorm(&a, x, w, ref);
        hx_buffer *b[3] = {buffer_of(rt, x, 4ull * T * D), buffer_of(rt, w, 4ull * D), buffer_empty(rt, 4ull * T * D)};
        HX_ASSERT_OK(run(rt, "rmsnorm", &a, sizeof a, 3, b, (hx_access[]){HX_R, HX_R, HX_W}));
        read_back(b[2], y, 4ull * T * D);
        double e = hx_ref_nmse(y, ref, (size_t)T * D);
        ck_assert_msg(e <= NMSE_ACCUM, "T %u D %u: nmse %g", T, D, e);
        destroy_all(b, 3);
        free(x);
        free(w);
        free(y);
        free(ref);
    }
    hx_runtime_close(rt);
}
END_TEST

/* ---- matmul -------------------------------------------------------------- */

static void check_matmul(hx_runtime *rt, uint32_t type, uint32_t T, uint32_t N, uint32_t K, int bias, unsigned *seed)
{
    size_t row = hx_ref_row_bytes(type, K);
    uint8_t *W = malloc(row * N);
    for (uint32_t n = 0; n < N; n++)
        hx_ref_random_row(type, W + n * row, K, seed);
    float *x = malloc(4ull * T * K + 4), *bs = malloc(4ull * N), *y = malloc(4ull * T * N);
    random_floats(x, (size_t)T * K, seed);
    random_floats(bs, N, seed);
    hx_op_matmul a = {type, T, N, K, (uint32_t)bias};
    double *ref = malloc(sizeof(double) * T * N);
    hx_ref_matmul(&a, W, x, bs, ref);
    hx_buffer *b[4] = {buffer_of(rt, W, row * N), buffer_of(rt, x, 4ull * T * K + 4), buffer_empty(rt, 4ull * T * N),
                       buffer_of(rt, bs, 4ull * N)};
    HX_ASSERT_OK(run(rt, "matmul", &a, sizeof a, bias ? 4 : 3, b, (hx_access[]){HX_R, HX_R, HX_W, HX_R}));
    read_back(b[2], y, 4ull * T * N);
    double e = hx_ref_nmse(y, ref, (size_t)T * N);
    ck_assert_msg(e <= matmul_bound(type), "type %u T %u N %u K %u bias %d: nmse %g", type, T, N, K, bias, e);
    destroy_all(b, 4);
    free(W);
    free(x);
    free(bs);
    free(y);
    free(ref);
}

START_TEST(matmul_matches_reference)
{
    hx_runtime *rt = open_opencl();
    const uint32_t types[] = {HX_REF_F32, HX_REF_F16, HX_REF_Q8_0, HX_REF_Q4_0, HX_REF_Q4_K};
    const uint32_t shapes[][3] = {{1, 1, 256}, {1, 67, 512}, {2, 33, 256}, {17, 45, 768}, {33, 70, 256}, {1, 300, 1024}};
    unsigned seed = 3;
    for (int ti = 0; ti < 5; ti++)
        for (int s = 0; s < 6; s++)
            check_matmul(rt, types[ti], shapes[s][0], shapes[s][1], shapes[s][2], s % 2, &seed);
    /* F32 and F16 take any K, including ones that end mid-block. */
    check_matmul(rt, HX_REF_F32, 1, 13, 77, 1, &seed);
    check_matmul(rt, HX_REF_F16, 5, 19, 45, 0, &seed);
    check_matmul(rt, HX_REF_F32, 16, 16, 33, 0, &seed);
    hx_runtime_close(rt);
}
END_TEST

/* ---- rope ---------------------------------------------------------------- */

START_TEST(rope_matches_reference)
{
    hx_runtime *rt = open_opencl();
    const uint32_t shapes[][4] = {{5, 3, 64, 64}, {1, 8, 128, 128}, {7, 2, 10, 10}, {4, 3, 64, 32}, {9, 1, 96, 96}};
    unsigned seed = 4;
    for (int s = 0; s < 5; s++)
        for (uint32_t neox = 0; neox < 2; neox++) {
            uint32_t T = shapes[s][0], H = shapes[s][1], Dh = shapes[s][2], n_rot = shapes[s][3];
            size_t n = (size_t)T * H * Dh;
            float *x = malloc(4 * n), *y = malloc(4 * n);
            int32_t *pos = malloc(4 * T);
            random_floats(x, n, &seed);
            for (uint32_t t = 0; t < T; t++)
                pos[t] = (int32_t)((hx_ref_uniform(&seed) + 1.0f) * 300.0f);
            hx_op_rope a = {T, H, Dh, n_rot, 10000.0f, s == 3 ? 0.5f : 1.0f, neox};
            double *ref = malloc(sizeof(double) * n);
            hx_ref_rope(&a, x, pos, ref);
            hx_buffer *b[2] = {buffer_of(rt, x, 4 * n), buffer_of(rt, pos, 4 * T)};
            HX_ASSERT_OK(run(rt, "rope", &a, sizeof a, 2, b, (hx_access[]){HX_RW, HX_R}));
            read_back(b[0], y, 4 * n);
            double e = hx_ref_nmse(y, ref, n);
            ck_assert_msg(e <= NMSE_ROPE, "shape %d neox %u: nmse %g", s, neox, e);
            destroy_all(b, 2);
            free(x);
            free(y);
            free(pos);
            free(ref);
        }
    hx_runtime_close(rt);
}
END_TEST

/* ---- kv_store ------------------------------------------------------------ */

/* With `bad`, two tokens name slots outside the cache: the task fails with
 * HX_ERR_RANGE, writes the valid ones and nothing else. */
static void check_kv_store(hx_runtime *rt, uint32_t kv_type, uint32_t Hkv, uint32_t Dh, int bad, unsigned *seed)
{
    const uint32_t T = 7, block_size = 16, n_blocks = 6, S = 2, max_blocks = 3;
    const uint64_t n_slots = (uint64_t)n_blocks * block_size;
    size_t row = hx_ref_row_bytes(kv_type, Dh), cache = n_slots * Hkv * row;
    uint8_t *kc = malloc(cache), *vc = malloc(cache), *kref = malloc(cache), *vref = malloc(cache);
    for (size_t i = 0; i < cache; i++) {
        kc[i] = (uint8_t)(hx_ref_uniform(seed) * 127);
        vc[i] = (uint8_t)(hx_ref_uniform(seed) * 127);
    }
    memcpy(kref, kc, cache);
    memcpy(vref, vc, cache);
    hx_kv_layout kv = {T, S, max_blocks, block_size};
    int32_t *meta = calloc(hx_meta_ints(&kv), 4);
    /* Distinct slots spread over the cache (with `bad`, one invalid each way). */
    const int32_t slots[7] = {3, 17, 95, 40, bad ? -1 : 0, 64, bad ? (int32_t)n_slots : 80};
    for (uint32_t t = 0; t < T; t++)
        meta[t] = slots[t];
    size_t n = (size_t)T * Hkv * Dh;
    float *k = malloc(4 * n), *v = malloc(4 * n);
    random_floats(k, n, seed);
    random_floats(v, n, seed);
    hx_op_kv_store a = {kv, Hkv, Dh, kv_type};
    hx_ref_kv_store(&a, k, v, kref, vref, meta, n_slots);
    hx_buffer *b[5] = {buffer_of(rt, k, 4 * n), buffer_of(rt, v, 4 * n), buffer_of(rt, kc, cache),
                       buffer_of(rt, vc, cache), buffer_of(rt, meta, 4ull * hx_meta_ints(&kv))};
    hx_status st = run(rt, "kv_store", &a, sizeof a, 5, b, (hx_access[]){HX_R, HX_R, HX_RW, HX_RW, HX_R});
    if (bad) {
        ck_assert_int_eq(st, HX_ERR_RANGE);
        ck_assert_msg(strstr(hx_last_error(), "a KV slot outside the cache"), "%s", hx_last_error());
    } else {
        HX_ASSERT_OK(st);
    }
    read_back(b[2], kc, cache);
    read_back(b[3], vc, cache);
    /* Decoded, the written rows match the reference; rows not written are
     * untouched, byte for byte. */
    double *want = malloc(sizeof(double) * Dh), *orig = malloc(sizeof(double) * Dh);
    float *got = malloc(4 * Dh);
    for (uint64_t slot = 0; slot < n_slots; slot++) {
        int written = -1;
        for (uint32_t t = 0; t < T; t++)
            if (slots[t] >= 0 && (uint64_t)slots[t] == slot)
                written = (int)t;
        for (uint32_t h = 0; h < Hkv; h++)
            for (int which = 0; which < 2; which++) {
                const uint8_t *mine = (which ? vc : kc) + (slot * Hkv + h) * row;
                const uint8_t *ref = (which ? vref : kref) + (slot * Hkv + h) * row;
                if (written < 0) {
                    ck_assert_msg(!memcmp(mine, ref, row), "slot %llu head %u was overwritten",
                                  (unsigned long long)slot, h);
                    continue;
                }
                double *dec = malloc(sizeof(double) * Dh);
                hx_ref_dequantize(kv_type, mine, dec, Dh);
                for (uint32_t d = 0; d < Dh; d++)
                    got[d] = (float)dec[d];
                free(dec);
                hx_ref_dequantize(kv_type, ref, want, Dh);
                double e = hx_ref_nmse(got, want, Dh);
                ck_assert_msg(e <= (kv_type != HX_REF_Q8_0 ? NMSE_EXACT : 1e-6), "type %u slot %llu: nmse %g", kv_type,
                              (unsigned long long)slot, e);
                const float *src = (which ? v : k) + ((size_t)written * Hkv + h) * Dh;
                for (uint32_t d = 0; d < Dh; d++)
                    orig[d] = src[d];
                e = hx_ref_nmse(got, orig, Dh);
                ck_assert_msg(e <= 1e-4, "type %u slot %llu: %g from the stored values", kv_type,
                              (unsigned long long)slot, e);
            }
    }
    destroy_all(b, 5);
    free(kc);
    free(vc);
    free(kref);
    free(vref);
    free(meta);
    free(k);
    free(v);
    free(want);
    free(orig);
    free(got);
}

START_TEST(kv_store_matches_reference)
{
    hx_runtime *rt = open_opencl();
    unsigned seed = 5;
    for (int bad = 0; bad < 2; bad++) {
        check_kv_store(rt, HX_REF_F32, 2, 24, bad, &seed);
        check_kv_store(rt, HX_REF_F16, 1, 64, bad, &seed);
        check_kv_store(rt, HX_REF_F16, 4, 40, bad, &seed);
        check_kv_store(rt, HX_REF_Q8_0, 2, 64, bad, &seed);
        check_kv_store(rt, HX_REF_Q8_0, 3, 128, bad, &seed);
    }
    hx_runtime_close(rt);
}
END_TEST

/* ---- attention ----------------------------------------------------------- */

typedef struct {
    uint32_t kv_type, Hq, Hkv, Dh, block_size, S;
    uint32_t ctx[4];   /* tokens each sequence holds, this batch's included */
    uint32_t fresh[4]; /* the batch's tokens: the last `fresh` positions */
    int interleave;    /* tokens of the sequences alternate in the batch */
} att_case;

typedef struct {
    hx_op_attention a;
    float *q;
    uint8_t *kc, *vc;
    int32_t *meta;
    size_t q_floats, cache_bytes, meta_ints;
} att_setup;

static void attention_setup(const att_case *c, att_setup *o, unsigned *seed)
{
    uint32_t T = 0, max_blocks = 0, n_blocks = 3; /* spare blocks hold garbage nobody may read */
    for (uint32_t s = 0; s < c->S; s++) {
        uint32_t nb = (c->ctx[s] + c->block_size - 1) / c->block_size;
        max_blocks = nb > max_blocks ? nb : max_blocks;
        n_blocks += nb;
        T += c->fresh[s];
    }
    hx_kv_layout kv = {T, c->S, max_blocks, c->block_size};
    o->a = (hx_op_attention){kv, c->Hq, c->Hkv, c->Dh, c->kv_type, 1.0f / sqrtf((float)c->Dh), 0};
    o->meta_ints = hx_meta_ints(&kv);
    o->meta = malloc(4 * o->meta_ints);
    for (size_t i = 0; i < o->meta_ints; i++)
        o->meta[i] = -1;
    /* Block tables: a shuffled permutation, so neighbours in a sequence are
     * not neighbours in the cache. */
    uint32_t *perm = malloc(4 * n_blocks);
    for (uint32_t i = 0; i < n_blocks; i++)
        perm[i] = i;
    for (uint32_t i = n_blocks - 1; i > 0; i--) {
        uint32_t j = (uint32_t)((hx_ref_uniform(seed) + 1.0f) * 0.5f * (float)(i + 1)) % (i + 1), x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    int32_t *table = o->meta + 3 * T;
    for (uint32_t s = 0, next = 0; s < c->S; s++)
        for (uint32_t b = 0; b < (c->ctx[s] + c->block_size - 1) / c->block_size; b++)
            table[s * max_blocks + b] = (int32_t)perm[next++];
    free(perm);
    /* The batch's tokens. */
    uint32_t t = 0, done[4] = {0};
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
    /* Every slot of the cache gets random K and V, written by the reference. */
    uint32_t n_slots = n_blocks * c->block_size;
    size_t row = hx_ref_row_bytes(c->kv_type, c->Dh);
    o->cache_bytes = (size_t)n_slots * c->Hkv * row;
    o->kc = malloc(o->cache_bytes);
    o->vc = malloc(o->cache_bytes);
    size_t nkv = (size_t)n_slots * c->Hkv * c->Dh;
    float *k = malloc(4 * nkv), *v = malloc(4 * nkv);
    random_floats(k, nkv, seed);
    random_floats(v, nkv, seed);
    for (size_t i = 0; i < nkv; i++)
        k[i] *= 2.0f; /* sharper softmax */
    hx_kv_layout all = {n_slots, 1, 0, c->block_size};
    int32_t *ident = malloc(4 * hx_meta_ints(&all));
    for (uint32_t i = 0; i < n_slots; i++)
        ident[i] = (int32_t)i;
    hx_op_kv_store st = {all, c->Hkv, c->Dh, c->kv_type};
    hx_ref_kv_store(&st, k, v, o->kc, o->vc, ident, n_slots);
    free(ident);
    free(k);
    free(v);
    o->q_floats = (size_t)T * c->Hq * c->Dh;
    o->q = malloc(4 * o->q_floats);
    random_floats(o->q, o->q_floats, seed);
}

static void attention_free(att_setup *o)
{
    free(o->q);
    free(o->kc);
    free(o->vc);
    free(o->meta);
}

/* What the last attention_run's task said: reading its output back
 * succeeds, and a success empties hx_last_error(). */
static char run_error[1024];

static float *attention_run(hx_runtime *rt, att_setup *o, hx_status expect)
{
    hx_buffer *b[5] = {buffer_of(rt, o->q, 4 * o->q_floats), buffer_of(rt, o->kc, o->cache_bytes),
                       buffer_of(rt, o->vc, o->cache_bytes), buffer_of(rt, o->meta, 4 * o->meta_ints),
                       buffer_empty(rt, 4 * o->q_floats)};
    hx_status st = run(rt, "attention", &o->a, sizeof o->a, 5, b, (hx_access[]){HX_R, HX_R, HX_R, HX_R, HX_W});
    ck_assert_msg(st == expect, "attention: %s, expected %s: %s", hx_status_str(st), hx_status_str(expect),
                  hx_last_error());
    snprintf(run_error, sizeof run_error, "%s", hx_last_error());
    float *out = malloc(4 * o->q_floats);
    read_back(b[4], out, 4 * o->q_floats);
    destroy_all(b, 5);
    return out;
}

static void check_attention(hx_runtime *rt, const att_case *c, unsigned *seed, const char *what)
{
    att_setup o;
    attention_setup(c, &o, seed);
    double *ref = malloc(sizeof(double) * o.q_floats);
    hx_ref_attention(&o.a, o.q, o.kc, o.vc, o.meta, ref);
    float *out = attention_run(rt, &o, HX_OK);
    double e = hx_ref_nmse(out, ref, o.q_floats);
    ck_assert_msg(e <= attention_bound(c->kv_type), "%s: type %u Hq %u Hkv %u Dh %u bs %u S %u T %u: nmse %g", what, c->kv_type,
                  c->Hq, c->Hkv, c->Dh, c->block_size, c->S, o.a.kv.T, e);
    free(ref);
    free(out);
    attention_free(&o);
}

START_TEST(attention_prefill_matches_reference)
{
    hx_runtime *rt = open_opencl();
    unsigned seed = 6;
    const uint32_t types[] = {HX_REF_F32, HX_REF_F16, HX_REF_Q8_0};
    const uint32_t gqa[][2] = {{4, 4}, {4, 2}, {8, 2}, {8, 1}};
    for (int ti = 0; ti < 3; ti++)
        for (int g = 0; g < 4; g++) {
            /* One sequence from scratch, crossing several blocks. */
            att_case one = {types[ti], gqa[g][0], gqa[g][1], 64, 16, 1, {37}, {37}, 0};
            check_attention(rt, &one, &seed, "one sequence");
            /* Three sequences, each a chunk after cached context. */
            att_case three = {types[ti], gqa[g][0], gqa[g][1], 32, 16, 3, {50, 17, 90}, {9, 17, 5}, g % 2};
            check_attention(rt, &three, &seed, "three sequences");
        }
    /* Head sizes at the edges, odd block sizes. */
    att_case wide = {HX_REF_F16, 4, 2, 128, 5, 2, {23, 11}, {8, 11}, 1};
    check_attention(rt, &wide, &seed, "Dh 128, block 5");
    att_case narrow = {HX_REF_F16, 6, 3, 40, 7, 2, {30, 3}, {30, 2}, 0};
    check_attention(rt, &narrow, &seed, "Dh 40, block 7");
    att_case q8wide = {HX_REF_Q8_0, 8, 8, 128, 16, 1, {70}, {20}, 0};
    check_attention(rt, &q8wide, &seed, "q8_0 Dh 128");
    /* Head sizes off the kernels' 8-wide vectors. */
    att_case tail = {HX_REF_F16, 4, 2, 20, 16, 2, {40, 19}, {33, 19}, 1};
    check_attention(rt, &tail, &seed, "Dh 20");
    att_case tail32 = {HX_REF_F32, 3, 1, 36, 8, 1, {25}, {25}, 0};
    check_attention(rt, &tail32, &seed, "f32 Dh 36");
    hx_runtime_close(rt);
}
END_TEST

START_TEST(attention_decode_matches_reference)
{
    hx_runtime *rt = open_opencl();
    unsigned seed = 7;
    const uint32_t types[] = {HX_REF_F32, HX_REF_F16, HX_REF_Q8_0};
    const uint32_t gqa[][2] = {{4, 4}, {4, 2}, {8, 2}, {8, 1}, {16, 2}};
    for (int ti = 0; ti < 3; ti++)
        for (int g = 0; g < 5; g++) {
            att_case one = {types[ti], gqa[g][0], gqa[g][1], 64, 16, 1, {1}, {1}, 0};
            check_attention(rt, &one, &seed, "first token");
            att_case batch = {types[ti], gqa[g][0], gqa[g][1], 64, 16, 4, {33, 200, 16, 17}, {1, 1, 1, 1}, 0};
            check_attention(rt, &batch, &seed, "decode batch");
        }
    att_case odd = {HX_REF_F16, 6, 2, 40, 3, 3, {10, 1, 52}, {1, 1, 1}, 0};
    check_attention(rt, &odd, &seed, "Dh 40, block 3");
    att_case tail = {HX_REF_F16, 4, 4, 20, 16, 2, {33, 70}, {1, 1}, 0};
    check_attention(rt, &tail, &seed, "Dh 20");
    att_case wide = {HX_REF_Q8_0, 32, 4, 128, 16, 2, {129, 64}, {1, 1}, 0};
    check_attention(rt, &wide, &seed, "Dh 128, 8 heads per KV head");
    hx_runtime_close(rt);
}
END_TEST

/* A Q4_0 cache: the CPU's kernels read it (the OpenCL and CUDA ones refuse
 * it, which leaves such attention to the CPU: see
 * q4_0_cache_goes_to_the_cpu). */
START_TEST(attention_q4_0_matches_reference)
{
    hx_runtime *rt = open_opencl();
    unsigned seed = 17;
    att_case prefill = {HX_REF_Q4_0, 8, 2, 64, 16, 3, {50, 17, 90}, {9, 17, 5}, 1};
    check_attention(rt, &prefill, &seed, "q4_0 prefill");
    att_case decode = {HX_REF_Q4_0, 8, 4, 128, 16, 4, {33, 200, 16, 17}, {1, 1, 1, 1}, 0};
    check_attention(rt, &decode, &seed, "q4_0 decode");
    hx_runtime_close(rt);
}
END_TEST

/* Metadata pointing outside the batch or the cache fails the task with
 * HX_ERR_RANGE and gives NaN rows, never a stray access; the other rows
 * are still right. */
START_TEST(attention_bad_metadata_gives_nan_rows)
{
    hx_runtime *rt = open_opencl();
    unsigned seed = 8;
    for (int decode = 0; decode < 2; decode++) {
        att_case c = {HX_REF_F16, 4, 2, 32, 16, 2, {20, 30}, {decode ? 1 : 4, decode ? 1 : 3}, 0};
        att_setup o;
        attention_setup(&c, &o, &seed);
        uint32_t T = o.a.kv.T;
        double *ref = malloc(sizeof(double) * o.q_floats);
        hx_ref_attention(&o.a, o.q, o.kc, o.vc, o.meta, ref);
        o.meta[2 * T + T - 1] = 7;        /* last token: a sequence that does not exist */
        o.meta[T + 0] = 1 << 30;          /* first token: a position past every block */
        float *out = attention_run(rt, &o, HX_ERR_RANGE);
        ck_assert_msg(strstr(run_error, "KV metadata"), "%s", run_error);
        size_t row = (size_t)c.Hq * c.Dh;
        for (size_t i = 0; i < row; i++) {
            ck_assert(isnan(out[i]));
            ck_assert(isnan(out[(T - 1) * row + i]));
        }
        if (T > 2) {
            double e = hx_ref_nmse(out + row, ref + row, (T - 2) * row);
            ck_assert_msg(e <= NMSE_ATTENTION, "valid rows: nmse %g", e);
        }
        free(ref);
        free(out);
        attention_free(&o);
    }
    /* A block table entry past the cache: both kernels refuse to read it. */
    for (int decode = 0; decode < 2; decode++) {
        att_case c = {HX_REF_Q8_0, 4, 2, 32, 16, 2, {20, 30}, {decode ? 1 : 4, decode ? 1 : 3}, 0};
        att_setup o;
        attention_setup(&c, &o, &seed);
        o.meta[3 * o.a.kv.T + o.a.kv.max_blocks + 1] = 1 << 20; /* sequence 1, block 1 */
        free(attention_run(rt, &o, HX_ERR_RANGE));
        attention_free(&o);
    }
    hx_runtime_close(rt);
}
END_TEST

/* An emulated FPGA runs the attention its bitstream holds, and is never
 * given a matmul, which the bitstream lacks. */
START_TEST(emulated_fpga_runs_only_its_bitstream)
{
    hx_runtime *rt = hx_cl_test_open("fpga", 1);
    unsigned seed = 10;
    att_case c = {HX_REF_Q8_0, 8, 2, 64, 16, 2, {40, 9}, {1, 1}, 0};
    check_attention(rt, &c, &seed, "emulated FPGA decode");
    c.fresh[0] = 12;
    check_attention(rt, &c, &seed, "emulated FPGA prefill");
    hx_buffer *b[3];
    for (int i = 0; i < 3; i++)
        b[i] = buffer_empty(rt, 4096);
    hx_op_matmul mm = {HX_REF_F32, 1, 4, 4, 0};
    ck_assert_int_eq(run(rt, "matmul", &mm, sizeof mm, 3, b, (hx_access[]){HX_R, HX_R, HX_W}), HX_ERR_NO_DEVICE);
    destroy_all(b, 3);
    hx_runtime_close(rt);
}
END_TEST

/* Tasks whose arguments OpenCL does not cover go to the CPU, and never
 * fail on PoCL: a Q6_K matmul (K-quant files mix it in) and a head size
 * beyond the attention kernels'. */
START_TEST(unsupported_arguments_go_to_the_cpu)
{
    hx_runtime *rt = hx_cl_test_open("cpu,opencl", 0);
    int cl = hx_cl_test_device(rt), cpu = hx_cl_test_cpu(rt);
    const uint32_t N = 8, K = 256;
    uint8_t *W = calloc(N, 210); /* Q6_K: 210 bytes per 256 weights; zeros decode to zeros */
    float x[256];
    unsigned seed = 11;
    random_floats(x, K, &seed);
    hx_buffer *b[3] = {buffer_of(rt, W, N * 210), buffer_of(rt, x, sizeof x), buffer_empty(rt, 4 * N)};
    hx_op_matmul mm = {14 /* Q6_K */, 1, N, K, 0};
    hx_task_desc d = {.codelet = hx_codelet_builtin("matmul"), .nbuffers = 3, .buffers = {b[0], b[1], b[2]},
                      .modes = {HX_R, HX_R, HX_W}, .args = &mm, .args_size = sizeof mm, .device = -1};
    for (int i = 0; i < 8; i++) { /* eager would hand some to an idle PoCL */
        hx_task *t;
        HX_ASSERT_OK(hx_task_submit(rt, &d, &t));
        HX_ASSERT_OK(hx_task_wait(t));
    }
    hx_device_stats st;
    HX_ASSERT_OK(hx_device_stats_get(rt, cl, &st));
    ck_assert_uint_eq(st.tasks, 0);
    HX_ASSERT_OK(hx_device_stats_get(rt, cpu, &st));
    ck_assert_uint_eq(st.tasks, 8);
    d.device = cl;
    ck_assert_int_eq(hx_task_submit(rt, &d, NULL), HX_ERR_NO_DEVICE);
    /* The same codelet with a type PoCL has runs there when pinned. */
    mm.wtype = HX_REF_F32;
    d.device = cl;
    destroy_all(b, 1);
    float *Wf = calloc(N * K, 4);
    d.buffers[0] = b[0] = buffer_of(rt, Wf, 4ull * N * K);
    hx_task *t;
    HX_ASSERT_OK(hx_task_submit(rt, &d, &t));
    HX_ASSERT_OK(hx_task_wait(t));
    destroy_all(b, 3);
    free(W);
    free(Wf);
    hx_runtime_close(rt);
}
END_TEST

/* A bitstream with only the decode kernels: decode steps go to the FPGA,
 * prefills to the CPU, as they would on a card built so. */
/* Attention the OpenCL kernels do not take (a Q4_0 cache, a sliding
 * window) runs on the CPU beside them, right, and pinned to the OpenCL
 * device it is refused. */
START_TEST(q4_0_cache_goes_to_the_cpu)
{
    hx_runtime *rt = hx_cl_test_open("cpu,opencl", 0);
    int cl = hx_cl_test_device(rt), cpu = hx_cl_test_cpu(rt);
    unsigned seed = 23;
    att_case q4 = {HX_REF_Q4_0, 4, 2, 64, 16, 2, {40, 20}, {1, 1}, 0};
    att_case window = {HX_REF_F16, 4, 2, 64, 16, 2, {40, 20}, {1, 1}, 0};
    const att_case *cases[] = {&q4, &window};
    for (int i = 0; i < 2; i++) {
        att_setup o;
        attention_setup(cases[i], &o, &seed);
        o.a.window = i ? 8 : 0;
        hx_device_stats before, after;
        HX_ASSERT_OK(hx_device_stats_get(rt, cl, &before));
        for (int k = 0; k < 4; k++) /* eager would hand some to an idle PoCL */
            free(attention_run(rt, &o, HX_OK));
        HX_ASSERT_OK(hx_device_stats_get(rt, cl, &after));
        ck_assert_uint_eq(after.tasks, before.tasks);
        HX_ASSERT_OK(hx_device_stats_get(rt, cpu, &after));
        ck_assert_uint_ge(after.tasks, 4);
        hx_buffer *b[5] = {buffer_of(rt, o.q, 4 * o.q_floats), buffer_of(rt, o.kc, o.cache_bytes),
                           buffer_of(rt, o.vc, o.cache_bytes), buffer_of(rt, o.meta, 4 * o.meta_ints),
                           buffer_empty(rt, 4 * o.q_floats)};
        hx_task_desc d = {.codelet = hx_codelet_builtin("attention"), .nbuffers = 5, .args = &o.a,
                          .args_size = sizeof o.a, .device = cl, .buffers = {b[0], b[1], b[2], b[3], b[4]},
                          .modes = {HX_R, HX_R, HX_R, HX_R, HX_W}};
        ck_assert_int_eq(hx_task_submit(rt, &d, NULL), HX_ERR_NO_DEVICE);
        destroy_all(b, 5);
        attention_free(&o);
    }
    hx_runtime_close(rt);
}
END_TEST

START_TEST(partial_bitstream_splits_by_kernel)
{
    char dir[300], path[400];
    snprintf(dir, sizeof dir, "%s/partial-bitstream", hx_cl_test_cache);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    snprintf(path, sizeof path, "%s/manifest.txt", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("platform pocl-emulation hetero-pocl-emulation.xclbin\nkernel attention_decode_f16 attention\n", f);
    fclose(f);
    setenv("HX_BITSTREAM_DIR", dir, 1);
    hx_runtime *rt = hx_cl_test_open("cpu,fpga", 1);
    unsetenv("HX_BITSTREAM_DIR");
    int fpga = hx_cl_test_device(rt), cpu = hx_cl_test_cpu(rt);
    unsigned seed = 12;
    att_case c = {HX_REF_F16, 4, 2, 32, 16, 2, {20, 9}, {1, 1}, 0};
    for (int prefill = 0; prefill < 2; prefill++) {
        c.fresh[1] = prefill ? 5 : 1;
        att_setup o;
        attention_setup(&c, &o, &seed);
        hx_buffer *b[5] = {buffer_of(rt, o.q, 4 * o.q_floats), buffer_of(rt, o.kc, o.cache_bytes),
                           buffer_of(rt, o.vc, o.cache_bytes), buffer_of(rt, o.meta, 4 * o.meta_ints),
                           buffer_empty(rt, 4 * o.q_floats)};
        hx_task_desc d = {.codelet = hx_codelet_builtin("attention"), .nbuffers = 5,
                          .buffers = {b[0], b[1], b[2], b[3], b[4]}, .modes = {HX_R, HX_R, HX_R, HX_R, HX_W},
                          .args = &o.a, .args_size = sizeof o.a, .device = fpga};
        hx_task *t;
        if (prefill) {
            ck_assert_int_eq(hx_task_submit(rt, &d, NULL), HX_ERR_NO_DEVICE);
            d.device = -1;
        }
        HX_ASSERT_OK(hx_task_submit(rt, &d, &t));
        HX_ASSERT_OK(hx_runtime_wait_all(rt));
        ck_assert_int_eq(hx_task_device(t), prefill ? cpu : fpga);
        HX_ASSERT_OK(hx_task_wait(t));
        destroy_all(b, 5);
        attention_free(&o);
    }
    hx_runtime_close(rt);
}
END_TEST

/* ---- add, swiglu --------------------------------------------------------- */

START_TEST(elementwise_ops_match_reference)
{
    hx_runtime *rt = open_opencl();
    const uint64_t sizes[] = {1, 1000, 100003};
    unsigned seed = 9;
    for (int s = 0; s < 3; s++) {
        uint64_t n = sizes[s];
        float *x = malloc(4 * n), *y = malloc(4 * n), *z = malloc(4 * n);
        double *ref = malloc(sizeof(double) * n);
        random_floats(x, n, &seed);
        random_floats(y, n, &seed);
        for (uint64_t i = 0; i < n; i++)
            x[i] *= 6.0f; /* gates far into both tails of silu */

        hx_op_swiglu sw = {n};
        hx_ref_swiglu(n, x, y, ref);
        hx_buffer *b[3] = {buffer_of(rt, x, 4 * n), buffer_of(rt, y, 4 * n), buffer_empty(rt, 4 * n)};
        HX_ASSERT_OK(run(rt, "swiglu", &sw, sizeof sw, 3, b, (hx_access[]){HX_R, HX_R, HX_W}));
        read_back(b[2], z, 4 * n);
        double e = hx_ref_nmse(z, ref, n);
        ck_assert_msg(e <= NMSE_ACCUM, "swiglu n %llu: nmse %g", (unsigned long long)n, e);

        hx_op_add ad = {n};
        hx_ref_add(n, x, y, ref);
        HX_ASSERT_OK(run(rt, "add", &ad, sizeof ad, 2, b, (hx_access[]){HX_RW, HX_R}));
        read_back(b[0], z, 4 * n);
        e = hx_ref_nmse(z, ref, n);
        ck_assert_msg(e <= NMSE_EXACT, "add n %llu: nmse %g", (unsigned long long)n, e);
        destroy_all(b, 3);
        free(x);
        free(y);
        free(z);
        free(ref);
    }
    hx_runtime_close(rt);
}
END_TEST

/* ---- arguments the launches refuse ---------------------------------------- */

START_TEST(bad_arguments_are_refused)
{
    hx_runtime *rt = open_opencl();
    hx_buffer *b[5];
    for (int i = 0; i < 5; i++)
        b[i] = buffer_empty(rt, 4096);
    const hx_access r3w[] = {HX_R, HX_R, HX_W, HX_R, HX_R};

    hx_op_matmul mm = {HX_REF_Q8_0, 1, 4, 48, 0}; /* K not a multiple of 32 */
    ck_assert_int_eq(run(rt, "matmul", &mm, sizeof mm, 3, b, r3w), HX_ERR_INVALID_ARG);
    ck_assert_msg(strstr(hx_last_error(), "K=48"), "%s", hx_last_error());
    mm = (hx_op_matmul){HX_REF_F32, 1, 64, 64, 0}; /* 16 KiB of weights in 4 KiB */
    ck_assert_int_eq(run(rt, "matmul", &mm, sizeof mm, 3, b, r3w), HX_ERR_INVALID_ARG);
    ck_assert_msg(strstr(hx_last_error(), "W"), "%s", hx_last_error());
    mm = (hx_op_matmul){HX_REF_F32, 1, 4, 4, 1}; /* a bias without its buffer */
    ck_assert_int_eq(run(rt, "matmul", &mm, sizeof mm, 3, b, r3w), HX_ERR_INVALID_ARG);
    /* Arguments no OpenCL kernel covers find no device (PoCL is the only
     * one here). */
    mm = (hx_op_matmul){6 /* Q5_0 */, 1, 4, 32, 0};
    ck_assert_int_eq(run(rt, "matmul", &mm, sizeof mm, 3, b, r3w), HX_ERR_NO_DEVICE);

    hx_op_attention at = {{1, 1, 1, 16}, 4, 4, 256, HX_REF_F16, 1.0f, 0};
    ck_assert_int_eq(run(rt, "attention", &at, sizeof at, 5, b, (hx_access[]){HX_R, HX_R, HX_R, HX_R, HX_W}),
                     HX_ERR_NO_DEVICE);
    at = (hx_op_attention){{1, 1, 1, 16}, 6, 4, 32, HX_REF_F16, 1.0f, 0};
    ck_assert_int_eq(run(rt, "attention", &at, sizeof at, 5, b, (hx_access[]){HX_R, HX_R, HX_R, HX_R, HX_W}),
                     HX_ERR_INVALID_ARG);
    at = (hx_op_attention){{1u << 30, 1, 1, 16}, 4, 4, 32, HX_REF_F16, 1.0f, 0};
    ck_assert_int_eq(run(rt, "attention", &at, sizeof at, 5, b, (hx_access[]){HX_R, HX_R, HX_R, HX_R, HX_W}),
                     HX_ERR_INVALID_ARG);
    hx_op_rope ro = {1, 1, 8, 9, 10000.0f, 1.0f, 0};
    ck_assert_int_eq(run(rt, "rope", &ro, sizeof ro, 2, b, (hx_access[]){HX_RW, HX_R}), HX_ERR_INVALID_ARG);
    hx_op_get_rows gr = {HX_REF_Q4_K, 1, 256};
    ck_assert_int_eq(run(rt, "get_rows", &gr, sizeof gr, 3, b, r3w), HX_ERR_NO_DEVICE);
    hx_op_add ad = {UINT64_MAX / 2};
    ck_assert_int_eq(run(rt, "add", &ad, sizeof ad, 2, b, (hx_access[]){HX_RW, HX_R}), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_runtime_wait_all(rt), HX_ERR_INVALID_ARG);

    /* Still usable. */
    hx_op_add ok = {1024};
    HX_ASSERT_OK(run(rt, "add", &ok, sizeof ok, 2, b, (hx_access[]){HX_RW, HX_R}));
    destroy_all(b, 5);
    hx_runtime_close(rt);
}
END_TEST

Suite *suite_cl_ops(void)
{
    Suite *s = suite_create("cl_ops");
    TCase *tc = tcase_create("pocl");
    tcase_set_timeout(tc, 600);
    tcase_add_unchecked_fixture(tc, hx_cl_test_cache_setup, hx_cl_test_cache_teardown);
    tcase_add_test(tc, get_rows_matches_reference);
    tcase_add_test(tc, rmsnorm_matches_reference);
    tcase_add_test(tc, matmul_matches_reference);
    tcase_add_test(tc, rope_matches_reference);
    tcase_add_test(tc, kv_store_matches_reference);
    tcase_add_test(tc, attention_prefill_matches_reference);
    tcase_add_test(tc, attention_decode_matches_reference);
    tcase_add_test(tc, attention_bad_metadata_gives_nan_rows);
    tcase_add_test(tc, emulated_fpga_runs_only_its_bitstream);
    tcase_add_test(tc, unsupported_arguments_go_to_the_cpu);
    tcase_add_test(tc, q4_0_cache_goes_to_the_cpu);
    tcase_add_test(tc, partial_bitstream_splits_by_kernel);
    tcase_add_test(tc, elementwise_ops_match_reference);
    tcase_add_test(tc, bad_arguments_are_refused);
    suite_add_tcase(s, tc);
    return s;
}

Suite *suite_cpu_ops(void)
{
    Suite *s = suite_create("cpu_ops");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, target_cpu, NULL);
    tcase_add_test(tc, get_rows_matches_reference);
    tcase_add_test(tc, rmsnorm_matches_reference);
    tcase_add_test(tc, matmul_matches_reference);
    tcase_add_test(tc, rope_matches_reference);
    tcase_add_test(tc, attention_prefill_matches_reference);
    tcase_add_test(tc, attention_decode_matches_reference);
    tcase_add_test(tc, attention_bad_metadata_gives_nan_rows);
    tcase_add_test(tc, attention_q4_0_matches_reference);
    tcase_add_test(tc, elementwise_ops_match_reference);
    suite_add_tcase(s, tc);
    return s;
}
