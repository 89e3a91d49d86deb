/* Importance matrices: what hx_imatrix_collect sums is each matmul's input
 * (the first layer's projections and a down projection against float64
 * recomputations from the file's weights, every matmul against a plain
 * observer), on the CPU and
 * with the second layer's matmuls on the PoCL OpenCL device; files written
 * in both forms read back; merging two files equals collecting over both
 * texts; broken files are refused with clear errors; hetero-imatrix
 * collects, merges and shows; and on SmolLM2 (HX_TEST_SMOLLM2) its sums
 * beside llama-imatrix's over the same text and chunks. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "gguf/gguf.h"
#include "quantize/imatrix.h"
#include "quantize/imatrix_impl.h"
#include "tests/cl_test.h"
#include "tests/ref_ops.h"
#include "tests/small_model.h"

#define N_TOK 40 /* one evaluation: at least the 16 rows llama-imatrix collects */

static const char *const layer_weights[] = {"attn_q", "attn_k", "attn_v", "attn_output",
                                            "ffn_gate", "ffn_up", "ffn_down"};
#define N_LAYER_WEIGHTS 7

static hx_model *load(hx_runtime *rt, const char *path, const char *partition)
{
    hx_model_options o = hx_model_options_default();
    o.kv_prefix_cache = -1;
    o.partition = partition;
    hx_model *m = NULL;
    HX_ASSERT_OK(hx_model_load(rt, path, &o, &m));
    return m;
}

/* Tokens of the byte vocabulary, different for each `salt`. */
static void tokens(int32_t *ids, int n, int salt)
{
    for (int i = 0; i < n; i++)
        ids[i] = 10 + (i * 37 + salt * 11) % 200;
}

static void eval(hx_model *m, const int32_t *ids, int n, int logits_all)
{
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(m, &s));
    HX_ASSERT_OK(hx_session_eval(s, ids, (size_t)n, logits_all));
    HX_ASSERT_OK(hx_session_close(s));
}

static hx_imatrix *collect(hx_model *m, const int32_t *ids, int n, unsigned flags)
{
    hx_imatrix *im;
    HX_ASSERT_OK(hx_imatrix_create(0, &im));
    HX_ASSERT_OK(hx_imatrix_collect(m, im, flags));
    eval(m, ids, n, flags & HX_IMATRIX_OUTPUT);
    HX_ASSERT_OK(hx_imatrix_collect(m, NULL, 0));
    return im;
}

static hx_imatrix_entry entry(const hx_imatrix *im, const char *name)
{
    hx_imatrix_info info;
    HX_ASSERT_OK(hx_imatrix_info_get(im, &info));
    for (size_t i = 0; i < info.n_entries; i++) {
        hx_imatrix_entry e;
        HX_ASSERT_OK(hx_imatrix_entry_at(im, i, &e));
        if (!strcmp(e.name, name))
            return e;
    }
    ck_abort_msg("no entry '%s'", name);
    return (hx_imatrix_entry){0};
}

/* The largest difference of two columns' sums, relative to the largest sum. */
static double rel_diff(const double *a, const double *b, int64_t n)
{
    double d = 0, ref = 0;
    for (int64_t j = 0; j < n; j++)
        d = fmax(d, fabs(a[j] - b[j])), ref = fmax(ref, fabs(b[j]));
    return ref > 0 ? d / ref : d;
}

/* Sum over the tokens of the squared input of blk.0's projections,
 * rmsnorm(token_embd[id]) * attn_norm, in double from the file (f32). */
static double *blk0_reference(const char *path, const int32_t *ids, int n, uint32_t *D)
{
    hx_gguf *g;
    HX_ASSERT_OK(hx_gguf_open(path, &g));
    const hx_gguf_tensor *emb = hx_gguf_find_tensor(g, "token_embd.weight");
    const hx_gguf_tensor *norm = hx_gguf_find_tensor(g, "blk.0.attn_norm.weight");
    ck_assert(emb && norm && emb->type == HX_TYPE_F32 && norm->type == HX_TYPE_F32);
    float eps;
    HX_ASSERT_OK(hx_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &eps));
    *D = (uint32_t)emb->ne[0];
    double *sum = calloc(*D, sizeof *sum), *y = malloc(*D * sizeof *y);
    hx_op_rmsnorm a = {1, *D, eps};
    for (int t = 0; t < n; t++) {
        hx_ref_rmsnorm(&a, (const float *)emb->data + (size_t)ids[t] * *D, norm->data, y);
        for (uint32_t j = 0; j < *D; j++)
            sum[j] += y[j] * y[j];
    }
    free(y);
    hx_gguf_close(g);
    return sum;
}

static void assert_blk0_matches_reference(const hx_imatrix *im, const char *path, const int32_t *ids, int n)
{
    uint32_t D;
    double *ref = blk0_reference(path, ids, n, &D);
    for (int k = 0; k < 3; k++) {
        char name[64];
        snprintf(name, sizeof name, "blk.0.%s.weight", layer_weights[k]);
        hx_imatrix_entry e = entry(im, name);
        ck_assert_int_eq(e.n, D);
        ck_assert_int_eq(e.count, n);
        double r = rel_diff(e.sums, ref, D);
        ck_assert_msg(r < 1e-5, "%s: sums differ from the float64 reference by %g", name, r);
        for (uint32_t j = 0; j < D; j++)
            ck_assert_msg(fabs(e.values[j] - ref[j] / n) <= 1e-5 * fabs(ref[j] / n) + 1e-9, "%s column %u", name, j);
    }
    free(ref);
}

/* The inputs of two matmuls of one evaluation, kept whole. */
typedef struct {
    const char *name[2];
    float *rows[2];
    uint32_t n_rows[2], cols[2];
} capture;

static void capture_observe(void *user, const char *tensor, const float *x, uint32_t rows, uint32_t cols)
{
    capture *c = user;
    for (int k = 0; k < 2; k++)
        if (!strcmp(tensor, c->name[k]) && !c->rows[k]) {
            c->rows[k] = malloc(sizeof(float) * rows * cols);
            memcpy(c->rows[k], x, sizeof(float) * rows * cols);
            c->n_rows[k] = rows, c->cols[k] = cols;
        }
}

/* The input ffn_down is given in layer `l` is SwiGLU(W_gate xn, W_up xn),
 * recomputed in float64 from the file's weights and the input ffn_gate
 * was given (xn): the observer reads the buffer the down projection reads,
 * wherever the layer ran. */
static void assert_ffn_down_input_is_swiglu(hx_model *m, const char *path, int l, const int32_t *ids, int n)
{
    char gate[64], up[64], down[64];
    snprintf(gate, sizeof gate, "blk.%d.ffn_gate.weight", l);
    snprintf(up, sizeof up, "blk.%d.ffn_up.weight", l);
    snprintf(down, sizeof down, "blk.%d.ffn_down.weight", l);
    capture c = {{gate, down}, {NULL, NULL}, {0, 0}, {0, 0}};
    HX_ASSERT_OK(hx_model_set_activation_observer(m, capture_observe, &c));
    eval(m, ids, n, 0);
    HX_ASSERT_OK(hx_model_set_activation_observer(m, NULL, NULL));
    ck_assert(c.rows[0] && c.rows[1] && c.n_rows[0] == (uint32_t)n && c.n_rows[1] == (uint32_t)n);
    hx_gguf *g;
    HX_ASSERT_OK(hx_gguf_open(path, &g));
    const hx_gguf_tensor *wg = hx_gguf_find_tensor(g, gate), *wu = hx_gguf_find_tensor(g, up);
    ck_assert(wg && wu && wg->type == HX_TYPE_F32 && wu->type == HX_TYPE_F32);
    const uint32_t K = c.cols[0], N = c.cols[1];
    ck_assert(wg->ne[0] == K && wg->ne[1] == N);
    double *yg = malloc(sizeof(double) * n * N), *yu = malloc(sizeof(double) * n * N);
    hx_op_matmul a = {HX_REF_F32, (uint32_t)n, N, K, 0};
    hx_ref_matmul(&a, wg->data, c.rows[0], NULL, yg);
    hx_ref_matmul(&a, wu->data, c.rows[0], NULL, yu);
    double diff = 0, ref = 0;
    for (size_t i = 0; i < (size_t)n * N; i++) {
        double h = yg[i] / (1 + exp(-yg[i])) * yu[i];
        diff = fmax(diff, fabs(c.rows[1][i] - h)), ref = fmax(ref, fabs(h));
    }
    ck_assert_msg(ref > 0 && diff / ref < 1e-4, "%s input: %g from SwiGLU recomputed in float64 (max %g)", down,
                  diff, ref);
    free(yg), free(yu), free(c.rows[0]), free(c.rows[1]);
    hx_gguf_close(g);
}

/* A plain observer: every call's squared columns, by tensor, in double. */
typedef struct {
    pthread_mutex_t lock;
    char names[32][48];
    double sums[32][512];
    int64_t rows[32];
    uint32_t cols[32];
    int n;
} plain;

static void plain_observe(void *user, const char *tensor, const float *x, uint32_t rows, uint32_t cols)
{
    plain *p = user;
    pthread_mutex_lock(&p->lock);
    int k = 0;
    while (k < p->n && strcmp(p->names[k], tensor))
        k++;
    if (k == p->n && p->n < 32 && cols <= 512)
        snprintf(p->names[p->n++], sizeof p->names[0], "%s", tensor);
    if (k < p->n) {
        for (uint32_t r = 0; r < rows; r++)
            for (uint32_t j = 0; j < cols; j++)
                p->sums[k][j] += (double)x[(size_t)r * cols + j] * x[(size_t)r * cols + j];
        p->rows[k] += rows, p->cols[k] = cols;
    }
    pthread_mutex_unlock(&p->lock);
}

/* What the collector holds is what a plain observer sees, for llama-imatrix's
 * matmuls only: every layer weight, output.weight with HX_IMATRIX_OUTPUT. */
static void assert_matches_plain(hx_model *m, const hx_imatrix *im, const int32_t *ids, int n, int output)
{
    plain *p = calloc(1, sizeof *p);
    pthread_mutex_init(&p->lock, NULL);
    HX_ASSERT_OK(hx_model_set_activation_observer(m, plain_observe, p));
    eval(m, ids, n, output);
    HX_ASSERT_OK(hx_model_set_activation_observer(m, NULL, NULL));
    hx_model_info mi;
    HX_ASSERT_OK(hx_model_info_get(m, &mi));
    ck_assert_int_eq(p->n, (int)mi.n_layer * N_LAYER_WEIGHTS + 1); /* and output.weight */
    hx_imatrix_info info;
    HX_ASSERT_OK(hx_imatrix_info_get(im, &info));
    ck_assert_int_eq(info.n_entries, mi.n_layer * N_LAYER_WEIGHTS + (output ? 1 : 0));
    for (int k = 0; k < p->n; k++) {
        if (!strcmp(p->names[k], "output.weight") && !output) {
            ck_assert_int_eq(p->rows[k], 1); /* the last token's logits only */
            continue;
        }
        hx_imatrix_entry e = entry(im, p->names[k]);
        ck_assert_int_eq(e.n, p->cols[k]);
        ck_assert_int_eq(e.count, p->rows[k]);
        ck_assert_int_eq(e.count, n);
        double r = rel_diff(e.sums, p->sums[k], e.n);
        ck_assert_msg(r < 1e-12, "%s: %g", p->names[k], r);
    }
    pthread_mutex_destroy(&p->lock);
    free(p);
}

START_TEST(collects_each_matmul_input_on_the_cpu)
{
    hx_small_model sm;
    hx_small_model_write(&sm, "f32");
    hx_runtime *rt = hx_small_runtime(2, NULL);
    hx_model *m = load(rt, sm.path, NULL);
    int32_t ids[N_TOK];
    tokens(ids, N_TOK, 0);
    hx_imatrix *im = collect(m, ids, N_TOK, 0);
    assert_blk0_matches_reference(im, sm.path, ids, N_TOK);
    assert_matches_plain(m, im, ids, N_TOK, 0);
    assert_ffn_down_input_is_swiglu(m, sm.path, 1, ids, N_TOK);
    ck_assert_ptr_null(hx_imatrix_find(im, "output.weight", NULL));

    /* A decode step (one row) is left out, as llama-imatrix leaves it. */
    hx_session *s;
    HX_ASSERT_OK(hx_imatrix_collect(m, im, 0));
    HX_ASSERT_OK(hx_session_open(m, &s));
    HX_ASSERT_OK(hx_session_eval(s, ids, 1, 0));
    HX_ASSERT_OK(hx_session_eval(s, ids + 1, 1, 0));
    HX_ASSERT_OK(hx_session_close(s));
    HX_ASSERT_OK(hx_imatrix_collect(m, NULL, 0));
    ck_assert_int_eq(entry(im, "blk.1.ffn_down.weight").count, N_TOK);
    hx_imatrix_free(im);

    /* With HX_IMATRIX_OUTPUT and every position's logits, the output matrix too. */
    im = collect(m, ids, N_TOK, HX_IMATRIX_OUTPUT);
    assert_matches_plain(m, im, ids, N_TOK, 1);
    int64_t n;
    ck_assert_ptr_nonnull(hx_imatrix_find(im, "output.weight", &n));
    ck_assert_int_eq(n, 128);
    hx_imatrix_free(im);

    ck_assert_int_eq(hx_imatrix_collect(m, NULL, 7), HX_OK); /* flags are not read when stopping */
    HX_ASSERT_OK(hx_imatrix_create(0, &im));
    ck_assert_int_eq(hx_imatrix_collect(m, im, 2), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_model_set_activation_observer(NULL, plain_observe, NULL), HX_ERR_INVALID_ARG);
    hx_imatrix_free(im);
    HX_ASSERT_OK(hx_model_free(m));
    HX_ASSERT_OK(hx_runtime_close(rt));
    hx_small_model_remove(&sm);
}
END_TEST

/* Under the "layers" partition on CPU + PoCL the second layer's matmuls
 * run on the OpenCL device; the observer sees their inputs all the same. */
START_TEST(collects_where_matmuls_run_on_opencl)
{
    hx_small_model sm;
    hx_small_model_write(&sm, "f32");
    int32_t ids[N_TOK];
    tokens(ids, N_TOK, 0);
    hx_runtime *cpu = hx_small_runtime(2, NULL);
    hx_model *mc = load(cpu, sm.path, NULL);
    hx_imatrix *on_cpu = collect(mc, ids, N_TOK, 0);

    hx_runtime *rt = hx_cl_test_open("cpu,opencl", 0);
    int cl = hx_cl_test_device(rt);
    hx_model *m = load(rt, sm.path, "layers");
    /* Every projection of layer 1 (matmul, or matmul_multi where a
     * layer's Q/K/V and gate/up are fused) prefers the OpenCL device. */
    size_t matmuls = 0, cl_matmuls = 0;
    for (size_t i = 0; i < hx_model_plan_size(m); i++) {
        hx_plan_task t;
        HX_ASSERT_OK(hx_model_plan_get(m, i, &t));
        if (t.layer == 1 && !strncmp(t.op, "matmul", 6)) {
            matmuls++;
            cl_matmuls += t.device == cl;
        }
    }
    ck_assert_msg(matmuls > 0 && cl_matmuls == matmuls, "%zu of layer 1's %zu matmuls prefer the OpenCL device",
                  cl_matmuls, matmuls);
    hx_device_stats before, after;
    HX_ASSERT_OK(hx_device_stats_get(rt, cl, &before));
    hx_imatrix *im = collect(m, ids, N_TOK, 0);
    HX_ASSERT_OK(hx_device_stats_get(rt, cl, &after));
    ck_assert_uint_ge(after.tasks - before.tasks, N_LAYER_WEIGHTS);

    assert_blk0_matches_reference(im, sm.path, ids, N_TOK);
    assert_ffn_down_input_is_swiglu(m, sm.path, 1, ids, N_TOK); /* layer 1 ran on OpenCL */
    hx_imatrix_info info;
    HX_ASSERT_OK(hx_imatrix_info_get(im, &info));
    ck_assert_int_eq(info.n_entries, 2 * N_LAYER_WEIGHTS);
    for (size_t i = 0; i < info.n_entries; i++) {
        hx_imatrix_entry a, b;
        HX_ASSERT_OK(hx_imatrix_entry_at(im, i, &a));
        HX_ASSERT_OK(hx_imatrix_entry_at(on_cpu, i, &b));
        ck_assert_str_eq(a.name, b.name);
        ck_assert_int_eq(a.count, b.count);
        double r = rel_diff(a.sums, b.sums, a.n);
        ck_assert_msg(r < 1e-4, "%s: OpenCL run differs from the CPU's by %g", a.name, r);
    }
    hx_imatrix_free(im);
    hx_imatrix_free(on_cpu);
    HX_ASSERT_OK(hx_model_free(m));
    HX_ASSERT_OK(hx_runtime_close(rt));

    /* No CPU device, nowhere to run the observer: refused, not hung. */
    rt = hx_cl_test_open("opencl", 0);
    m = load(rt, sm.path, NULL);
    HX_ASSERT_OK(hx_imatrix_create(0, &im));
    ck_assert_int_eq(hx_imatrix_collect(m, im, 0), HX_ERR_NO_DEVICE);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "no CPU device"));
    eval(m, ids, N_TOK, 0); /* still usable, and nothing collected */
    HX_ASSERT_OK(hx_imatrix_info_get(im, &info));
    ck_assert_int_eq(info.n_entries, 0);
    hx_imatrix_free(im);
    HX_ASSERT_OK(hx_model_free(m));
    HX_ASSERT_OK(hx_runtime_close(rt));
    HX_ASSERT_OK(hx_model_free(mc));
    HX_ASSERT_OK(hx_runtime_close(cpu));
    hx_small_model_remove(&sm);
}
END_TEST

/* ---- files -------------------------------------------------------------- */

static char dir[64];

static const char *tmp(const char *name)
{
    static char buf[4][128];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* Two texts' importance matrices on the small model, and both together. */
typedef struct {
    hx_small_model sm;
    hx_runtime *rt;
    hx_model *m;
    hx_imatrix *a, *b, *ab;
} fixture;

static void fixture_open(fixture *f)
{
    hx_test_tmpdir(dir, sizeof dir, "imatrix");
    hx_small_model_write(&f->sm, "q8_0");
    f->rt = hx_small_runtime(2, NULL);
    f->m = load(f->rt, f->sm.path, NULL);
    int32_t ta[N_TOK], tb[N_TOK + 8];
    tokens(ta, N_TOK, 1);
    tokens(tb, N_TOK + 8, 2);
    HX_ASSERT_OK(hx_imatrix_create(64, &f->a));
    HX_ASSERT_OK(hx_imatrix_create(64, &f->b));
    HX_ASSERT_OK(hx_imatrix_create(64, &f->ab));
    HX_ASSERT_OK(hx_imatrix_add_dataset(f->a, "a.txt"));
    HX_ASSERT_OK(hx_imatrix_add_dataset(f->b, "b.txt"));
    HX_ASSERT_OK(hx_imatrix_collect(f->m, f->a, 0));
    eval(f->m, ta, N_TOK, 0);
    HX_ASSERT_OK(hx_imatrix_collect(f->m, f->b, 0));
    eval(f->m, tb, N_TOK + 8, 0);
    HX_ASSERT_OK(hx_imatrix_collect(f->m, f->ab, 0));
    eval(f->m, ta, N_TOK, 0);
    eval(f->m, tb, N_TOK + 8, 0);
    HX_ASSERT_OK(hx_imatrix_collect(f->m, NULL, 0));
}

static void fixture_close(fixture *f)
{
    hx_imatrix_free(f->a);
    hx_imatrix_free(f->b);
    hx_imatrix_free(f->ab);
    HX_ASSERT_OK(hx_model_free(f->m));
    HX_ASSERT_OK(hx_runtime_close(f->rt));
    hx_small_model_remove(&f->sm);
    hx_test_rmdir(dir);
}

/* Every entry of `got` equals `want`'s: counts exactly, sums to float's
 * precision (the files keep float), per-column means likewise. */
static void assert_same(const hx_imatrix *got, const hx_imatrix *want, int with_sums)
{
    hx_imatrix_info gi, wi;
    HX_ASSERT_OK(hx_imatrix_info_get(got, &gi));
    HX_ASSERT_OK(hx_imatrix_info_get(want, &wi));
    ck_assert_int_eq(gi.n_entries, wi.n_entries);
    ck_assert_int_gt(wi.n_entries, 0);
    for (size_t i = 0; i < wi.n_entries; i++) {
        hx_imatrix_entry g, w;
        HX_ASSERT_OK(hx_imatrix_entry_at(got, i, &g));
        HX_ASSERT_OK(hx_imatrix_entry_at(want, i, &w));
        ck_assert_str_eq(g.name, w.name);
        ck_assert_int_eq(g.n, w.n);
        if (with_sums) {
            ck_assert_int_eq(g.count, w.count);
            ck_assert_msg(rel_diff(g.sums, w.sums, w.n) < 1e-6, "%s sums", w.name);
        }
        int64_t n;
        const float *v = hx_imatrix_find(got, w.name, &n);
        ck_assert_ptr_eq(v, g.values);
        for (int64_t j = 0; j < n; j++)
            ck_assert_msg(fabsf(v[j] - w.values[j]) <= 1e-6f * fabsf(w.values[j]) + 1e-12f, "%s[%lld]: %g vs %g",
                          w.name, (long long)j, v[j], w.values[j]);
    }
}

START_TEST(files_round_trip_in_both_forms)
{
    fixture f;
    fixture_open(&f);
    HX_ASSERT_OK(hx_imatrix_save(f.a, tmp("a.gguf"), HX_IMATRIX_GGUF));
    HX_ASSERT_OK(hx_imatrix_save(f.a, tmp("a.dat"), HX_IMATRIX_DAT));
    hx_imatrix *g, *d;
    HX_ASSERT_OK(hx_imatrix_load(tmp("a.gguf"), &g));
    HX_ASSERT_OK(hx_imatrix_load(tmp("a.dat"), &d));
    assert_same(g, f.a, 1);
    assert_same(d, f.a, 0); /* .dat keeps per-chunk means, not sums */

    /* The GGUF form's metadata is llama-imatrix's. */
    hx_gguf *gg;
    HX_ASSERT_OK(hx_gguf_open(tmp("a.gguf"), &gg));
    const char *str;
    uint64_t len;
    uint32_t u;
    HX_ASSERT_OK(hx_gguf_get_str(gg, "general.type", &str, &len));
    ck_assert(len == 7 && !memcmp(str, "imatrix", 7));
    HX_ASSERT_OK(hx_gguf_get_u32(gg, "imatrix.chunk_size", &u));
    ck_assert_uint_eq(u, 64);
    HX_ASSERT_OK(hx_gguf_get_u32(gg, "imatrix.chunk_count", &u));
    ck_assert_uint_eq(u, N_TOK / 64);
    hx_gguf_array arr;
    HX_ASSERT_OK(hx_gguf_get_arr(gg, "imatrix.datasets", &arr));
    ck_assert_uint_eq(arr.n, 1);
    const hx_gguf_tensor *t = hx_gguf_find_tensor(gg, "blk.1.ffn_down.weight.in_sum2");
    ck_assert(t && t->type == HX_TYPE_F32 && t->ne[0] == 256);
    t = hx_gguf_find_tensor(gg, "blk.1.ffn_down.weight.counts");
    ck_assert(t && t->type == HX_TYPE_F32 && ((const float *)t->data)[0] == N_TOK);
    hx_gguf_close(gg);

    /* The legacy form's sums come back as ncall * chunk_size rows, as
     * llama-imatrix --in-file takes them: here one chunk of 64. */
    hx_imatrix *m;
    HX_ASSERT_OK(hx_imatrix_create(64, &m));
    HX_ASSERT_OK(hx_imatrix_merge_file(m, tmp("a.dat")));
    ck_assert_int_eq(entry(m, "blk.0.attn_q.weight").count, 64);
    const char *ds;
    HX_ASSERT_OK(hx_imatrix_dataset_at(m, 0, &ds));
    ck_assert_str_eq(ds, "a.txt");
    ck_assert_int_eq(hx_imatrix_dataset_at(m, 1, &ds), HX_ERR_RANGE);
    hx_imatrix_free(m);
    hx_imatrix_free(g);
    hx_imatrix_free(d);

    /* Nothing to write is an error, not an empty file. */
    HX_ASSERT_OK(hx_imatrix_create(0, &m));
    ck_assert_int_eq(hx_imatrix_save(m, tmp("empty.gguf"), HX_IMATRIX_GGUF), HX_ERR_STATE);
    ck_assert_int_eq(hx_imatrix_save(m, tmp("x"), (hx_imatrix_format)9), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_imatrix_save(f.a, "/nonexistent-dir/a.dat", HX_IMATRIX_DAT), HX_ERR_IO);
    hx_imatrix_free(m);
    fixture_close(&f);
}
END_TEST

START_TEST(merging_files_equals_collecting_over_both_texts)
{
    fixture f;
    fixture_open(&f);
    HX_ASSERT_OK(hx_imatrix_save(f.a, tmp("a.gguf"), HX_IMATRIX_GGUF));
    HX_ASSERT_OK(hx_imatrix_save(f.b, tmp("b.gguf"), HX_IMATRIX_GGUF));
    hx_imatrix *m;
    HX_ASSERT_OK(hx_imatrix_create(0, &m));
    HX_ASSERT_OK(hx_imatrix_merge_file(m, tmp("a.gguf")));
    HX_ASSERT_OK(hx_imatrix_merge_file(m, tmp("b.gguf")));
    assert_same(m, f.ab, 1);
    hx_imatrix_info info;
    HX_ASSERT_OK(hx_imatrix_info_get(m, &info));
    ck_assert_int_eq(info.n_datasets, 2);
    ck_assert_uint_eq(info.chunk_size, 64);
    ck_assert_uint_eq(info.chunk_count, (2 * N_TOK + 8) / 64);
    /* The merge written and read again is the same. */
    HX_ASSERT_OK(hx_imatrix_save(m, tmp("ab.gguf"), HX_IMATRIX_GGUF));
    hx_imatrix_free(m);
    HX_ASSERT_OK(hx_imatrix_load(tmp("ab.gguf"), &m));
    assert_same(m, f.ab, 1);
    hx_imatrix_free(m);
    fixture_close(&f);
}
END_TEST

static void write_bytes(const char *path, const void *p, size_t n)
{
    FILE *fp = fopen(path, "wb");
    ck_assert_ptr_nonnull(fp);
    ck_assert_uint_eq(fwrite(p, 1, n, fp), n);
    fclose(fp);
}

static void assert_refused(const char *path, hx_status want, const char *says)
{
    hx_imatrix *im = (hx_imatrix *)1;
    ck_assert_int_eq(hx_imatrix_load(path, &im), want);
    ck_assert_ptr_null(im);
    ck_assert_msg(strstr(hx_last_error(), says), "'%s' lacks '%s'", hx_last_error(), says);
}

/* A GGUF file with the given F32 / F16 tensors of 4 values each. */
static void write_gguf(const char *path, const char *const *names, int n, hx_type type)
{
    static const float v[4] = {1, 2, 3, 4};
    hx_gguf_writer *w;
    HX_ASSERT_OK(hx_gguf_writer_create(&w));
    HX_ASSERT_OK(hx_gguf_writer_set_str(w, "general.type", "imatrix"));
    for (int i = 0; i < n; i++)
        HX_ASSERT_OK(hx_gguf_writer_add_tensor(w, names[i], type, 1, (const uint64_t[]){type == HX_TYPE_F32 ? 4 : 8},
                                               v));
    HX_ASSERT_OK(hx_gguf_writer_write(w, path));
    hx_gguf_writer_free(w);
}

START_TEST(broken_files_are_refused)
{
    fixture f;
    fixture_open(&f);
    HX_ASSERT_OK(hx_imatrix_save(f.a, tmp("a.gguf"), HX_IMATRIX_GGUF));
    HX_ASSERT_OK(hx_imatrix_save(f.a, tmp("a.dat"), HX_IMATRIX_DAT));
    size_t gl, dl;
    char *gguf = hx_test_slurp(tmp("a.gguf"), &gl), *dat = hx_test_slurp(tmp("a.dat"), &dl);

    assert_refused(tmp("missing"), HX_ERR_IO, "missing");
    write_bytes(tmp("empty"), "", 0);
    assert_refused(tmp("empty"), HX_ERR_FORMAT, "neither GGUF nor");
    write_bytes(tmp("cut.gguf"), gguf, gl / 2);
    assert_refused(tmp("cut.gguf"), HX_ERR_FORMAT, "cut.gguf");
    write_bytes(tmp("cut.gguf"), gguf, 40);
    assert_refused(tmp("cut.gguf"), HX_ERR_FORMAT, "cut.gguf");

    /* The legacy form cut anywhere inside its entries. */
    int32_t first_len;
    memcpy(&first_len, dat + 4, 4);
    const size_t cuts[] = {2, 4, 6, 8 + (size_t)first_len / 2, 8 + (size_t)first_len + 6, 200, dl / 2};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        write_bytes(tmp("cut.dat"), dat, cuts[i]);
        hx_imatrix *im;
        ck_assert_msg(hx_imatrix_load(tmp("cut.dat"), &im) == HX_ERR_FORMAT, "cut at %zu read", cuts[i]);
        ck_assert_ptr_nonnull(strstr(hx_last_error(), "cut.dat"));
    }
    /* An impossible value count. */
    char *bad = malloc(dl);
    memcpy(bad, dat, dl);
    int32_t neg = -5;
    memcpy(bad + 8 + first_len + 4, &neg, 4);
    write_bytes(tmp("bad.dat"), bad, dl);
    assert_refused(tmp("bad.dat"), HX_ERR_FORMAT, "impossible");
    free(bad);

    /* GGUF files whose tensors do not pair up, or are not F32. */
    write_gguf(tmp("x.gguf"), (const char *const[]){"blk.0.attn_q.weight.in_sum2"}, 1, HX_TYPE_F32);
    assert_refused(tmp("x.gguf"), HX_ERR_FORMAT, "no counts");
    write_gguf(tmp("x.gguf"), (const char *const[]){"blk.0.attn_q.weight.counts"}, 1, HX_TYPE_F32);
    assert_refused(tmp("x.gguf"), HX_ERR_FORMAT, "no sums");
    write_gguf(tmp("x.gguf"), (const char *const[]){"w.in_sum2", "w.counts"}, 2, HX_TYPE_F16);
    assert_refused(tmp("x.gguf"), HX_ERR_FORMAT, "must be F32");
    write_gguf(tmp("x.gguf"), (const char *const[]){"something.else"}, 1, HX_TYPE_F32);
    assert_refused(tmp("x.gguf"), HX_ERR_FORMAT, "no <tensor>.in_sum2");

    /* A merge with another width is refused whole: nothing is added. */
    write_gguf(tmp("x.gguf"), (const char *const[]){"blk.0.attn_q.weight.in_sum2", "blk.0.attn_q.weight.counts"}, 2,
               HX_TYPE_F32);
    hx_imatrix *im;
    HX_ASSERT_OK(hx_imatrix_load(tmp("x.gguf"), &im)); /* 4 sums for 4 counts: four 1-column matrices */
    hx_imatrix_free(im);
    HX_ASSERT_OK(hx_imatrix_create(0, &im));
    HX_ASSERT_OK(hx_imatrix_merge_file(im, tmp("a.gguf")));
    hx_imatrix_entry before = entry(im, "blk.1.attn_q.weight");
    ck_assert_int_eq(hx_imatrix_merge_file(im, tmp("x.gguf")), HX_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "blk.0.attn_q.weight"));
    hx_imatrix_info info;
    HX_ASSERT_OK(hx_imatrix_info_get(im, &info));
    ck_assert_int_eq(info.n_entries, 2 * N_LAYER_WEIGHTS);
    ck_assert_int_eq(entry(im, "blk.1.attn_q.weight").count, before.count);
    ck_assert_int_eq(hx_imatrix_merge_file(im, NULL), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_imatrix_load(NULL, &im), HX_ERR_INVALID_ARG);
    ck_assert_ptr_null(hx_imatrix_find(im, "blk.9.attn_q.weight", NULL));
    hx_imatrix_free(im);
    hx_imatrix_free(NULL);

    free(gguf);
    free(dat);
    fixture_close(&f);
}
END_TEST

/* ---- the tool ------------------------------------------------------------ */

static int run_tool(const char *opts, char **out)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s/hetero-imatrix --devices cpu -t 2 %s >%s 2>&1", hx_test_build_dir(), opts,
             tmp("out.txt"));
    int rc = system(cmd);
    *out = hx_test_slurp(tmp("out.txt"), NULL);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

START_TEST(tool_collects_merges_and_shows)
{
    hx_small_model sm;
    hx_test_tmpdir(dir, sizeof dir, "imatrix-tool");
    hx_small_model_write(&sm, "q8_0");
    char opts[1024], *out;
    snprintf(opts, sizeof opts, "-m %s -f tests/fixtures/gpl-3.0.txt -c 64 --chunks 3 -o %s", sm.path,
             tmp("t.gguf"));
    ck_assert_msg(run_tool(opts, &out) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "Final estimate: PPL = "));
    free(out);
    hx_imatrix *im;
    HX_ASSERT_OK(hx_imatrix_load(tmp("t.gguf"), &im));
    hx_imatrix_info info;
    HX_ASSERT_OK(hx_imatrix_info_get(im, &info));
    ck_assert_int_eq(info.n_entries, 2 * N_LAYER_WEIGHTS);
    ck_assert_uint_eq(info.chunk_count, 3);
    ck_assert_int_eq(entry(im, "blk.0.ffn_down.weight").count, 3 * 64);
    hx_imatrix_free(im);

    snprintf(opts, sizeof opts, "-c 64 --in-file %s --in-file %s -o %s --output-format dat", tmp("t.gguf"), tmp("t.gguf"),
             tmp("tt.dat"));
    ck_assert_msg(run_tool(opts, &out) == 0, "%s", out);
    free(out);
    HX_ASSERT_OK(hx_imatrix_create(64, &im));
    HX_ASSERT_OK(hx_imatrix_merge_file(im, tmp("tt.dat")));
    ck_assert_int_eq(entry(im, "blk.0.ffn_down.weight").count, 6 * 64);
    hx_imatrix_free(im);

    snprintf(opts, sizeof opts, "--in-file %s --show-statistics", tmp("t.gguf"));
    ck_assert_msg(run_tool(opts, &out) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "Computing statistics for"));
    ck_assert_ptr_nonnull(strstr(out, "ffn_down"));
    ck_assert_ptr_nonnull(strstr(out, "Computing weighted average statistics per layer (2 layers)"));
    free(out);

    snprintf(opts, sizeof opts, "--in-file %s", tmp("missing.gguf"));
    ck_assert_int_ne(run_tool(opts, &out), 0);
    ck_assert_ptr_nonnull(strstr(out, "missing.gguf"));
    free(out);
    ck_assert_int_eq(run_tool("--output-format xml --in-file x", &out), 2);
    free(out);
    hx_small_model_remove(&sm);
    hx_test_rmdir(dir);
}
END_TEST

/* hetero-imatrix on SmolLM2 beside llama-imatrix (the fixture): the same
 * 210 matrices, 512 rows each, and each matrix's summed importances
 * within 2% (they differ as the two runtimes' activations do: 0.6% at
 * most when recorded). */
START_TEST(smollm2_beside_llama_imatrix)
{
    const char *model = hx_test_smollm2("hetero-imatrix on SmolLM2 beside llama-imatrix");
    if (!model)
        return;
    hx_test_tmpdir(dir, sizeof dir, "imatrix-smollm2");
    char opts[1024], *out;
    snprintf(opts, sizeof opts, "-m %s -f tests/fixtures/gpl-3.0.txt -c 128 --chunks 4 --no-ppl -o %s", model,
             tmp("s.gguf"));
    ck_assert_msg(run_tool(opts, &out) == 0, "%s", out);
    free(out);
    hx_imatrix *im;
    HX_ASSERT_OK(hx_imatrix_load(tmp("s.gguf"), &im));
    char *rec = hx_test_slurp("tests/fixtures/smollm2-gpl-3.0.llama-imatrix.txt", NULL);
    int n = 0;
    double worst = 0, sum = 0;
    for (char *line = strtok(rec, "\n"); line; line = strtok(NULL, "\n")) {
        char name[64];
        double want;
        if (line[0] == '#' || sscanf(line, "%63s %lf", name, &want) != 2)
            continue;
        int64_t k;
        const float *v = hx_imatrix_find(im, name, &k);
        ck_assert_msg(v != NULL, "hetero-imatrix has no %s", name);
        ck_assert_int_eq(entry(im, name).count, 512);
        double got = 0;
        for (int64_t j = 0; j < k; j++)
            got += v[j];
        double r = fabs(got - want) / want;
        ck_assert_msg(r < 0.02, "%s: %g, llama-imatrix %g", name, got, want);
        worst = fmax(worst, r), sum += r, n++;
    }
    hx_imatrix_info info;
    HX_ASSERT_OK(hx_imatrix_info_get(im, &info));
    ck_assert_int_eq(n, 210);
    ck_assert_int_eq(info.n_entries, 210);
    fprintf(stderr, "hetero-imatrix beside llama-imatrix on SmolLM2: %d matrices, mean %.3g%%, worst %.3g%%\n", n,
            100 * sum / n, 100 * worst);
    free(rec);
    hx_imatrix_free(im);
    hx_test_rmdir(dir);
}
END_TEST

/* hetero-imatrix on a mixture of experts beside llama-imatrix (the
 * fixture): every expert of every layer's gate, up and down its own
 * matrix, with llama-imatrix's rows per expert (every token counted by
 * each of its 4 experts, 2048 rows a matrix) and importances.  A router
 * near-tie could send one token elsewhere on another SIMD level, so an
 * expert's rows may be 2 off and its importance 1 %; they were equal, and
 * 7e-5 apart at most, when recorded. */
START_TEST(experts_beside_llama_imatrix)
{
    hx_test_tmpdir(dir, sizeof dir, "imatrix-moe");
    HX_ASSERT_OK(hx_model_write_synthetic(tmp("moe.gguf"), "qwen3moe-tiny", "f32", 1234));
    char opts[1024], *out;
    snprintf(opts, sizeof opts, "-m %s -f tests/fixtures/gpl-3.0.txt -c 128 --chunks 4 --no-ppl -o %s",
             tmp("moe.gguf"), tmp("m.gguf"));
    ck_assert_msg(run_tool(opts, &out) == 0, "%s", out);
    free(out);
    hx_imatrix *im;
    HX_ASSERT_OK(hx_imatrix_load(tmp("m.gguf"), &im));
    char *rec = hx_test_slurp("tests/fixtures/qwen3moe-tiny-gpl-3.0.llama-imatrix.txt", NULL);
    int n = 0, n_expert_rows = 0;
    double worst = 0;
    for (char *line = strtok(rec, "\n"); line; line = strtok(NULL, "\n")) {
        char name[64], expert[8];
        long long rows;
        double want;
        if (line[0] == '#' || sscanf(line, "%63s %7s %lld %lf", name, expert, &rows, &want) != 4)
            continue;
        const int e = expert[0] == '-' ? 0 : atoi(expert);
        const hx_imatrix_tensor *t = NULL;
        for (size_t i = 0; i < im->n && !t; i++)
            t = strcmp(im->t[i].name, name) ? NULL : &im->t[i];
        ck_assert_msg(t != NULL, "hetero-imatrix has no %s", name);
        ck_assert_int_eq(t->nmat, expert[0] == '-' ? 1 : 16);
        ck_assert_msg(llabs(t->count[e] - rows) <= 2, "%s expert %s: %lld rows, llama-imatrix %lld", name, expert,
                      (long long)t->count[e], rows);
        int64_t total = 0;
        for (int64_t x = 0; x < t->nmat; x++)
            total += t->count[x];
        ck_assert_int_eq(total, expert[0] == '-' ? 512 : 4 * 512);
        double got = 0;
        for (int64_t j = 0; j < t->ncol; j++)
            got += t->mean[e * t->ncol + j];
        const double r = fabs(got - want) / want;
        ck_assert_msg(r < 0.01, "%s expert %s: importance %g, llama-imatrix %g", name, expert, got, want);
        worst = fmax(worst, r), n++;
        n_expert_rows += expert[0] != '-';
    }
    ck_assert_int_eq(n, 20 + 4 * 3 * 16);
    ck_assert_int_eq(n_expert_rows, 4 * 3 * 16);
    /* the rows: each expert's as recorded, give or take a near-tie */
    hx_imatrix_info info;
    HX_ASSERT_OK(hx_imatrix_info_get(im, &info));
    ck_assert_int_eq(info.n_entries, 32);
    fprintf(stderr, "hetero-imatrix beside llama-imatrix on qwen3moe-tiny: %d matrices and experts, worst %.3g%%\n", n,
            100 * worst);
    free(rec);
    hx_imatrix_free(im);
    hx_test_rmdir(dir);
}
END_TEST

Suite *suite_imatrix(void)
{
    Suite *s = suite_create("imatrix");
    TCase *t = tcase_create("collect");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, collects_each_matmul_input_on_the_cpu);
    tcase_add_test(t, collects_where_matmuls_run_on_opencl);
    suite_add_tcase(s, t);
    TCase *f = tcase_create("files");
    tcase_set_timeout(f, 300);
    tcase_add_test(f, files_round_trip_in_both_forms);
    tcase_add_test(f, merging_files_equals_collecting_over_both_texts);
    tcase_add_test(f, broken_files_are_refused);
    tcase_add_test(f, tool_collects_merges_and_shows);
    suite_add_tcase(s, f);
    TCase *r = tcase_create("smollm2");
    tcase_set_timeout(r, 600);
    tcase_add_test(r, smollm2_beside_llama_imatrix);
    tcase_add_test(r, experts_beside_llama_imatrix);
    suite_add_tcase(s, r);
    return s;
}
