/* hetero-server's embeddings, rerank and infill endpoints
 * (tests/server_embed_check.py) on the small synthetic model and two
 * copies of it written here: one with a classifier head and rank
 * pooling, one whose vocabulary names FIM tokens. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "gguf/gguf.h"
#include "tests/hx_test.h"
#include "tests/small_model.h"

/* A copy of src with extra u32 keys and, when D, a classifier head
 * (cls.weight [D, D], cls.bias, cls.output.weight [D, 1]). */
static void write_copy(const char *src, const char *dst, const char *const *keys, const uint32_t *vals, int n_keys,
                       uint32_t D)
{
    hx_gguf *g;
    HX_ASSERT_OK(hx_gguf_open(src, &g));
    hx_gguf_writer *w;
    HX_ASSERT_OK(hx_gguf_writer_create(&w));
    HX_ASSERT_OK(hx_gguf_writer_copy_kv(w, g));
    for (int i = 0; i < n_keys; i++)
        HX_ASSERT_OK(hx_gguf_writer_set_u32(w, keys[i], vals[i]));
    for (uint64_t i = 0; i < hx_gguf_tensor_count(g); i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        HX_ASSERT_OK(hx_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data));
    }
    float *w1 = NULL, *b1 = NULL, *w2 = NULL;
    if (D) {
        w1 = malloc(sizeof(float) * D * D), b1 = malloc(sizeof(float) * D), w2 = malloc(sizeof(float) * D);
        srand(11);
        for (uint32_t i = 0; i < D * D; i++)
            w1[i] = ((float)((double)rand() / RAND_MAX) - 0.5f) * 0.2f;
        for (uint32_t i = 0; i < D; i++) {
            b1[i] = (float)((double)rand() / RAND_MAX) - 0.5f;
            w2[i] = (float)((double)rand() / RAND_MAX) - 0.5f;
        }
        const uint64_t ne1[2] = {D, D}, neb[1] = {D}, ne2[2] = {D, 1};
        HX_ASSERT_OK(hx_gguf_writer_add_tensor(w, "cls.weight", HX_TYPE_F32, 2, ne1, w1));
        HX_ASSERT_OK(hx_gguf_writer_add_tensor(w, "cls.bias", HX_TYPE_F32, 1, neb, b1));
        HX_ASSERT_OK(hx_gguf_writer_add_tensor(w, "cls.output.weight", HX_TYPE_F32, 2, ne2, w2));
    }
    HX_ASSERT_OK(hx_gguf_writer_write(w, dst));
    hx_gguf_writer_free(w);
    hx_gguf_close(g);
    free(w1);
    free(b1);
    free(w2);
}

START_TEST(embeddings_rerank_and_infill_endpoints)
{
    hx_small_model sm;
    hx_small_model_write(&sm, "f32");
    hx_gguf *g;
    HX_ASSERT_OK(hx_gguf_open(sm.path, &g));
    const char *arch;
    uint64_t alen;
    uint32_t D = 0;
    HX_ASSERT_OK(hx_gguf_get_str(g, "general.architecture", &arch, &alen));
    char pool_key[64], embd_key[64];
    snprintf(pool_key, sizeof pool_key, "%.*s.pooling_type", (int)alen, arch);
    snprintf(embd_key, sizeof embd_key, "%.*s.embedding_length", (int)alen, arch);
    HX_ASSERT_OK(hx_gguf_get_u32(g, embd_key, &D));
    hx_gguf_close(g);
    char rank[160], fim[160], cmd[600];
    snprintf(rank, sizeof rank, "%s/rank.gguf", sm.dir);
    snprintf(fim, sizeof fim, "%s/fim.gguf", sm.dir);
    const char *rk[1] = {pool_key};
    const uint32_t rv[1] = {4};
    write_copy(sm.path, rank, rk, rv, 1, D);
    /* Byte tokens of rare bytes stand for the FIM tokens. */
    const char *fk[5] = {"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.fim_suf_token_id",
                         "tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.fim_rep_token_id",
                         "tokenizer.ggml.fim_sep_token_id"};
    const uint32_t fv[5] = {250, 251, 252, 253, 254};
    write_copy(sm.path, fim, fk, fv, 5, 0);
    snprintf(cmd, sizeof cmd, "python3 tests/server_embed_check.py %s %s %s %s", hx_test_build_dir(), sm.path, rank,
             fim);
    int st = system(cmd);
    remove(rank);
    remove(fim);
    hx_small_model_remove(&sm);
    ck_assert_msg(WIFEXITED(st), "%s did not exit", cmd);
    ck_assert_msg(WEXITSTATUS(st) != 3, "python3 lacks numpy: pip install -r tests/requirements.txt");
    ck_assert_msg(WEXITSTATUS(st) == 0, "%s failed (its FAIL line above says which check)", cmd);
}
END_TEST

Suite *suite_server_embed(void)
{
    Suite *s = suite_create("server_embed");
    TCase *tc = tcase_create("endpoints");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, embeddings_rerank_and_infill_endpoints);
    suite_add_tcase(s, tc);
    return s;
}
