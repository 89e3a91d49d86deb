/* Embeddings (hetero.h's "Embeddings and reranking") on the small
 * synthetic model: the hidden states kept in embeddings mode are the
 * final-norm rows the output matrix would multiply (seen through the
 * activation observer), pooling and normalization match a plain
 * reference over them, hx_model_embed packing several inputs into one
 * evaluation gives what each input alone gives, the serving engine's
 * embeddings requests (batched beside generation) give the same, rank
 * pooling applies a classifier head written into a copy of the file, the
 * FIM tokens are found, and bad inputs are refused with their reason. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "tests/hx_test.h"
#include "tests/small_model.h"

typedef struct {
    hx_small_model sm;
    hx_runtime *rt;
    hx_model *m;
    hx_model_info info;
} fixture;

static void open_fixture(fixture *f, const char *path)
{
    if (!path)
        hx_small_model_write(&f->sm, "f32");
    f->rt = hx_small_runtime(2, NULL);
    HX_ASSERT_OK(hx_model_load(f->rt, path ? path : f->sm.path, NULL, &f->m));
    HX_ASSERT_OK(hx_model_info_get(f->m, &f->info));
}

static void close_fixture(fixture *f, int remove)
{
    hx_model_stats ms;
    HX_ASSERT_OK(hx_model_stats_get(f->m, &ms));
    ck_assert_uint_eq(ms.sessions_open, 0);
    HX_ASSERT_OK(hx_model_free(f->m));
    HX_ASSERT_OK(hx_runtime_close(f->rt));
    if (remove)
        hx_small_model_remove(&f->sm);
}

static size_t tokenize(hx_model *m, const char *text, int32_t *ids, size_t cap)
{
    size_t n = 0;
    HX_ASSERT_OK(hx_model_tokenize(m, text, strlen(text), 1, 0, ids, cap, &n));
    return n;
}

/* Every token's final-norm hidden state, from the activation observer's
 * view of the output matrix's input in an ordinary evaluation. */
typedef struct {
    const char *name;
    float *rows;
    uint32_t n, cols;
} observed;

static void observe(void *user, const char *tensor, const float *x, uint32_t rows, uint32_t cols)
{
    observed *o = user;
    if (strcmp(tensor, o->name))
        return;
    o->rows = realloc(o->rows, sizeof(float) * rows * cols);
    memcpy(o->rows, x, sizeof(float) * rows * cols);
    o->n = rows;
    o->cols = cols;
}

static const char *texts[4] = {"The quick brown fox", "Call me Ishmael",
                               "It was the best of times, it was the worst of times", "A"};

START_TEST(hidden_states_are_the_final_norm_rows_and_pool_as_the_reference)
{
    fixture f;
    open_fixture(&f, NULL);
    const uint32_t D = f.info.n_embd;
    int32_t ids[128];
    size_t n = tokenize(f.m, texts[2], ids, 128);
    ck_assert_uint_gt(n, 8);
    /* The reference: the observer sees the output matrix's input rows. */
    observed ob = {.name = "output.weight"};
    HX_ASSERT_OK(hx_model_set_activation_observer(f.m, observe, &ob));
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(f.m, &s));
    HX_ASSERT_OK(hx_session_eval(s, ids, n, 1));
    HX_ASSERT_OK(hx_session_close(s));
    HX_ASSERT_OK(hx_model_set_activation_observer(f.m, NULL, NULL));
    if (ob.n != n) { /* tied embeddings: the matmul reads token_embd.weight */
        ob.name = "token_embd.weight";
        HX_ASSERT_OK(hx_model_set_activation_observer(f.m, observe, &ob));
        HX_ASSERT_OK(hx_session_open(f.m, &s));
        HX_ASSERT_OK(hx_session_eval(s, ids, n, 1));
        HX_ASSERT_OK(hx_session_close(s));
        HX_ASSERT_OK(hx_model_set_activation_observer(f.m, NULL, NULL));
    }
    ck_assert_uint_eq(ob.n, n);
    ck_assert_uint_eq(ob.cols, D);
    /* Embeddings mode keeps the same rows; logits are not kept. */
    HX_ASSERT_OK(hx_session_open(f.m, &s));
    HX_ASSERT_OK(hx_session_set_embeddings(s, 1));
    HX_ASSERT_OK(hx_session_eval(s, ids, n, 1));
    ck_assert_ptr_null(hx_session_logits(s, -1));
    double worst = 0;
    for (size_t t = 0; t < n; t++) {
        const float *row = hx_session_embeddings(s, (int)t);
        ck_assert_ptr_nonnull(row);
        for (uint32_t c = 0; c < D; c++)
            worst = fmax(worst, fabs(row[c] - ob.rows[t * D + c]));
    }
    ck_assert_msg(worst < 1e-5, "hidden state differs from the observed row by %g", worst);
    /* Pooling and normalization against a plain reference. */
    float *out = malloc(sizeof(float) * D * n);
    double *ref = malloc(sizeof(double) * D);
    const hx_pooling kinds[3] = {HX_POOLING_MEAN, HX_POOLING_CLS, HX_POOLING_LAST};
    const int32_t norms[4] = {-1, 0, 1, 2};
    for (int k = 0; k < 3; k++)
        for (int q = 0; q < 4; q++) {
            for (uint32_t c = 0; c < D; c++) {
                double v = 0;
                if (kinds[k] == HX_POOLING_MEAN) {
                    for (size_t t = 0; t < n; t++)
                        v += ob.rows[t * D + c];
                    v /= (double)n;
                } else {
                    v = ob.rows[(kinds[k] == HX_POOLING_CLS ? 0 : n - 1) * D + c];
                }
                ref[c] = v;
            }
            double norm = 1;
            if (norms[q] == 0) {
                norm = 0;
                for (uint32_t c = 0; c < D; c++)
                    norm = fmax(norm, fabs(ref[c]));
                norm /= 32760.0;
            } else if (norms[q] > 0) {
                norm = 0;
                for (uint32_t c = 0; c < D; c++)
                    norm += pow(fabs(ref[c]), norms[q]);
                norm = pow(norm, 1.0 / norms[q]);
            }
            hx_embed_options eo = {kinds[k], norms[q]};
            size_t got = 0;
            HX_ASSERT_OK(hx_model_pool(f.m, ob.rows, n, &eo, out, D * n, &got));
            ck_assert_uint_eq(got, D);
            double err = 0, len2 = 0;
            for (uint32_t c = 0; c < D; c++) {
                err = fmax(err, fabs(out[c] - ref[c] / norm) / fmax(1.0, fabs(ref[c] / norm)));
                len2 += (double)out[c] * out[c];
            }
            ck_assert_msg(err < 1e-5, "pooling %s, normalize %d: off by %g", hx_pooling_str(kinds[k]), norms[q], err);
            if (norms[q] == 2)
                ck_assert_double_eq_tol(sqrt(len2), 1.0, 1e-5);
        }
    /* none: every row, not normalized (llama-server's). */
    hx_embed_options none = {HX_POOLING_NONE, 2};
    size_t got = 0;
    HX_ASSERT_OK(hx_model_pool(f.m, ob.rows, n, &none, out, D * n, &got));
    ck_assert_uint_eq(got, D * n);
    ck_assert_int_eq(memcmp(out, ob.rows, sizeof(float) * D * n), 0);
    /* Too small a buffer. */
    ck_assert_int_eq(hx_model_pool(f.m, ob.rows, n, &none, out, D, &got), HX_ERR_RANGE);
    HX_ASSERT_OK(hx_session_close(s));
    free(out);
    free(ref);
    free(ob.rows);
    close_fixture(&f, 1);
}
END_TEST

/* hx_model_embed of several inputs together equals each alone, and the
 * engine's embeddings requests (among generation requests) the same. */
START_TEST(batched_inputs_and_engine_requests_equal_each_input_alone)
{
    fixture f;
    open_fixture(&f, NULL);
    const uint32_t D = f.info.n_embd;
    int32_t ids[4][128];
    size_t n[4];
    const int32_t *in[4];
    for (int i = 0; i < 4; i++) {
        n[i] = tokenize(f.m, texts[i], ids[i], 128);
        in[i] = ids[i];
    }
    hx_embed_options eo = hx_embed_options_default();
    eo.pooling = HX_POOLING_MEAN;
    float *all = malloc(sizeof(float) * 4 * D), *one = malloc(sizeof(float) * D);
    size_t got = 0;
    HX_ASSERT_OK(hx_model_embed(f.m, in, n, 4, &eo, all, 4 * D, &got));
    ck_assert_uint_eq(got, 4 * D);
    for (int i = 0; i < 4; i++) {
        HX_ASSERT_OK(hx_model_embed(f.m, &in[i], &n[i], 1, &eo, one, D, &got));
        for (uint32_t c = 0; c < D; c++)
            ck_assert_msg(fabsf(one[c] - all[i * D + c]) < 1e-5, "input %d differs batched", i);
    }
    /* The engine: four embeddings requests and a generation at once. */
    hx_engine *e;
    HX_ASSERT_OK(hx_engine_create(f.m, NULL, &e));
    float *eng = calloc(4 * D, sizeof(float));
    uint64_t id[5];
    hx_request g = hx_request_default();
    g.text = "Once upon a time";
    g.max_tokens = 8;
    HX_ASSERT_OK(hx_engine_submit(e, &g, &id[4]));
    for (int i = 0; i < 4; i++) {
        hx_request r = hx_request_default();
        r.tokens = ids[i];
        r.n_tokens = n[i];
        r.embed_request = 1;
        r.embed = eo;
        r.embedding = eng + i * D;
        r.embedding_cap = D;
        HX_ASSERT_OK(hx_engine_submit(e, &r, &id[i]));
    }
    for (int i = 0; i < 5; i++) {
        hx_request_result res;
        HX_ASSERT_OK(hx_engine_wait(e, id[i], -1, &res));
        ck_assert_msg(res.status == HX_OK, "request %d: %s", i, res.error);
        ck_assert_uint_eq(res.embedding_n, i < 4 ? D : 0);
    }
    for (int i = 0; i < 4 * (int)D; i++)
        ck_assert_msg(fabsf(eng[i] - all[i]) < 1e-5, "engine's embedding differs at %d: %g vs %g", i, eng[i], all[i]);
    /* A buffer too small is refused at submission. */
    hx_request r = hx_request_default();
    r.tokens = ids[0];
    r.n_tokens = n[0];
    r.embed_request = 1;
    r.embed = eo;
    r.embedding = eng;
    r.embedding_cap = D - 1;
    uint64_t bad;
    ck_assert_int_eq(hx_engine_submit(e, &r, &bad), HX_ERR_RANGE);
    HX_ASSERT_OK(hx_engine_destroy(e));
    free(all);
    free(one);
    free(eng);
    close_fixture(&f, 1);
}
END_TEST

START_TEST(bad_inputs_are_refused_with_their_reason)
{
    fixture f;
    open_fixture(&f, NULL);
    const uint32_t D = f.info.n_embd;
    float *out = malloc(sizeof(float) * D);
    int32_t ids[4] = {1, 2, 3, 4};
    const int32_t *in[1] = {ids};
    size_t zero = 0, big = (size_t)f.info.n_ctx + 1, got;
    hx_embed_options eo = hx_embed_options_default();
    ck_assert_int_eq(hx_model_embed(f.m, in, &zero, 1, &eo, out, D, &got), HX_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "empty"));
    int32_t *long_ids = calloc(big, sizeof *long_ids);
    const int32_t *lin[1] = {long_ids};
    ck_assert_int_eq(hx_model_embed(f.m, lin, &big, 1, &eo, out, D, &got), HX_ERR_RANGE);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "context"));
    ids[2] = (int32_t)f.info.n_vocab;
    size_t four = 4;
    ck_assert_int_eq(hx_model_embed(f.m, in, &four, 1, &eo, out, D, &got), HX_ERR_RANGE);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "vocabulary"));
    ids[2] = 3;
    eo.pooling = HX_POOLING_RANK;
    ck_assert_int_eq(hx_model_embed(f.m, in, &four, 1, &eo, out, D, &got), HX_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "classifier head"));
    eo.pooling = HX_POOLING_MEAN;
    eo.normalize = -2;
    ck_assert_int_eq(hx_model_embed(f.m, in, &four, 1, &eo, out, D, &got), HX_ERR_INVALID_ARG);
    hx_pooling p;
    ck_assert_int_eq(hx_pooling_parse("avg", &p), HX_ERR_INVALID_ARG);
    HX_ASSERT_OK(hx_pooling_parse("last", &p));
    ck_assert_int_eq(p, HX_POOLING_LAST);
    hx_model_embedding_info ei;
    HX_ASSERT_OK(hx_model_embedding_info_get(f.m, &ei));
    ck_assert_int_eq(ei.pooling, HX_POOLING_NONE);
    ck_assert_uint_eq(ei.n_cls_out, 0);
    hx_fim_tokens fim;
    HX_ASSERT_OK(hx_model_fim_tokens(f.m, &fim));
    ck_assert_int_eq(fim.pre, -1); /* a byte vocabulary has none */
    ck_assert_int_eq(fim.mid, -1);
    free(long_ids);
    free(out);
    close_fixture(&f, 1);
}
END_TEST

/* A copy of the small model with a classifier head (cls.weight, cls.bias,
 * cls.output.weight of 2 outputs, f32) and pooling_type rank. */
static void write_rank_model(const char *src, const char *dst, uint32_t D, float *w1, float *b1, float *w2)
{
    hx_gguf *g;
    HX_ASSERT_OK(hx_gguf_open(src, &g));
    hx_gguf_writer *w;
    HX_ASSERT_OK(hx_gguf_writer_create(&w));
    HX_ASSERT_OK(hx_gguf_writer_copy_kv(w, g));
    const char *arch;
    uint64_t alen;
    HX_ASSERT_OK(hx_gguf_get_str(g, "general.architecture", &arch, &alen));
    char key[64];
    snprintf(key, sizeof key, "%.*s.pooling_type", (int)alen, arch);
    HX_ASSERT_OK(hx_gguf_writer_set_u32(w, key, HX_POOLING_RANK));
    for (uint64_t i = 0; i < hx_gguf_tensor_count(g); i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        HX_ASSERT_OK(hx_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data));
    }
    srand(7);
    for (uint32_t i = 0; i < D * D; i++)
        w1[i] = (float)((double)rand() / RAND_MAX) - 0.5f;
    for (uint32_t i = 0; i < D; i++)
        b1[i] = (float)((double)rand() / RAND_MAX) - 0.5f;
    for (uint32_t i = 0; i < 2 * D; i++)
        w2[i] = (float)((double)rand() / RAND_MAX) - 0.5f;
    const uint64_t ne1[2] = {D, D}, neb[1] = {D}, ne2[2] = {D, 2};
    HX_ASSERT_OK(hx_gguf_writer_add_tensor(w, "cls.weight", HX_TYPE_F32, 2, ne1, w1));
    HX_ASSERT_OK(hx_gguf_writer_add_tensor(w, "cls.bias", HX_TYPE_F32, 1, neb, b1));
    HX_ASSERT_OK(hx_gguf_writer_add_tensor(w, "cls.output.weight", HX_TYPE_F32, 2, ne2, w2));
    HX_ASSERT_OK(hx_gguf_writer_write(w, dst));
    hx_gguf_writer_free(w);
    hx_gguf_close(g);
}

START_TEST(rank_pooling_applies_the_files_classifier_head)
{
    fixture f;
    open_fixture(&f, NULL);
    const uint32_t D = f.info.n_embd;
    float *w1 = malloc(sizeof(float) * D * D), *b1 = malloc(sizeof(float) * D), *w2 = malloc(sizeof(float) * 2 * D);
    char path[160];
    snprintf(path, sizeof path, "%s/rank.gguf", f.sm.dir);
    write_rank_model(f.sm.path, path, D, w1, b1, w2);
    HX_ASSERT_OK(hx_model_free(f.m));
    HX_ASSERT_OK(hx_model_load(f.rt, path, NULL, &f.m));
    hx_model_embedding_info ei;
    HX_ASSERT_OK(hx_model_embedding_info_get(f.m, &ei));
    ck_assert_int_eq(ei.pooling, HX_POOLING_RANK);
    ck_assert_uint_eq(ei.n_cls_out, 2);
    int32_t ids[128];
    size_t n = tokenize(f.m, texts[0], ids, 128);
    /* The reference: the last token's hidden state through the head. */
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(f.m, &s));
    HX_ASSERT_OK(hx_session_set_embeddings(s, 1));
    HX_ASSERT_OK(hx_session_eval(s, ids, n, 0));
    const float *x = hx_session_embeddings(s, -1);
    ck_assert_ptr_nonnull(x);
    double mid[1024], ref[2];
    ck_assert_uint_le(D, 1024);
    for (uint32_t r = 0; r < D; r++) {
        double a = b1[r];
        for (uint32_t c = 0; c < D; c++)
            a += (double)w1[r * D + c] * x[c];
        mid[r] = tanh(a);
    }
    for (int r = 0; r < 2; r++) {
        ref[r] = 0;
        for (uint32_t c = 0; c < D; c++)
            ref[r] += (double)w2[r * D + c] * mid[c];
    }
    HX_ASSERT_OK(hx_session_close(s));
    const int32_t *in[1] = {ids};
    float out[2];
    size_t got = 0;
    hx_embed_options eo = hx_embed_options_default(); /* the file's: rank */
    HX_ASSERT_OK(hx_model_embed(f.m, in, &n, 1, &eo, out, 2, &got));
    ck_assert_uint_eq(got, 2);
    for (int r = 0; r < 2; r++)
        ck_assert_msg(fabs(out[r] - ref[r]) < 1e-4 * fmax(1.0, fabs(ref[r])), "score %d: %g vs %g", r, out[r], ref[r]);
    remove(path);
    free(w1);
    free(b1);
    free(w2);
    close_fixture(&f, 1);
}
END_TEST

Suite *suite_embed(void)
{
    Suite *s = suite_create("embed");
    TCase *tc = tcase_create("embeddings");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, hidden_states_are_the_final_norm_rows_and_pool_as_the_reference);
    tcase_add_test(tc, batched_inputs_and_engine_requests_equal_each_input_alone);
    tcase_add_test(tc, bad_inputs_are_refused_with_their_reason);
    tcase_add_test(tc, rank_pooling_applies_the_files_classifier_head);
    suite_add_tcase(s, tc);
    return s;
}
