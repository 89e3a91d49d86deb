/* The layouts and hyper-parameters of the architectures users load, beyond
 * what tests/test_model.c compares with the float64 reference: Phi-3's
 * fused tensors give the logits of the same weights written unfused, bit
 * for bit; rope.scaling.type is read as llama.cpp reads it and the types
 * hetero does not run are refused by name; so are Phi-3 128k's LongRoPE
 * factors, rope factors that would divide by zero, and architectures
 * outside the table. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "model/model.h"
#include "quantize/synthetic.h"
#include "text/tokenizer.h"
#include "tests/hx_test.h"
#include "tests/small_model.h"

static char dir[64];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/hx-layouts-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static void file(char *path, size_t cap, const char *name)
{
    snprintf(path, cap, "%s/%s.gguf", dir, name);
}

static const hx_synthetic_config phi3 = {"phi3", 128, 2, 4, 2, 256, 256, "phi3", 0};
static const hx_synthetic_config llama = {"llama", 128, 2, 4, 2, 256, 256, "llama", 0};

enum { N_TOK = 12 };
static const int32_t tokens[N_TOK] = {256, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 100};

/* Every position's logits: a prompt of N_TOK - 2 tokens, then two decode
 * steps; *n_vocab receives the row length. */
static float *logits_of(hx_runtime *rt, const char *path, uint32_t *n_vocab)
{
    hx_model *m = NULL;
    HX_ASSERT_OK(hx_model_load(rt, path, NULL, &m));
    const uint32_t V = m->info.n_vocab;
    float *all = malloc(sizeof(float) * V * N_TOK);
    hx_session *s = NULL;
    HX_ASSERT_OK(hx_session_open(m, &s));
    HX_ASSERT_OK(hx_session_eval(s, tokens, N_TOK - 2, 1));
    for (int i = 0; i < N_TOK - 2; i++)
        memcpy(all + (size_t)i * V, hx_session_logits(s, i), sizeof(float) * V);
    for (int i = N_TOK - 2; i < N_TOK; i++) {
        HX_ASSERT_OK(hx_session_eval(s, &tokens[i], 1, 0));
        memcpy(all + (size_t)i * V, hx_session_logits(s, -1), sizeof(float) * V);
    }
    HX_ASSERT_OK(hx_session_close(s));
    HX_ASSERT_OK(hx_model_free(m));
    *n_vocab = V;
    return all;
}

static void add(hx_gguf_writer *w, const char *name, const hx_gguf_tensor *t, uint64_t first_row, uint64_t rows)
{
    const size_t row = t->size / (t->n_dims > 1 ? t->ne[1] : 1);
    const uint64_t ne[2] = {t->ne[0], rows};
    HX_ASSERT_OK(hx_gguf_writer_add_tensor(w, name, t->type, rows > 1 ? 2 : 1, ne,
                                           (const uint8_t *)t->data + row * first_row));
}

/* The Phi-3 file at `src` with its fused tensors cut into the separate
 * ones, written as Qwen2, the unfused layout whose RoPE is Phi-3's (NEOX;
 * llama's pairs differ), its required biases zero (x + 0 is x). */
static void write_unfused(hx_runtime *rt, const char *src, const char *dst)
{
    hx_model *m = NULL;
    HX_ASSERT_OK(hx_model_load(rt, src, NULL, &m));
    const hx_model_info in = m->info;
    const hx_model_hparams hp = m->hp;
    HX_ASSERT_OK(hx_model_free(m));
    hx_gguf *g = NULL;
    HX_ASSERT_OK(hx_gguf_open(src, &g));
    hx_gguf_writer *w = NULL;
    HX_ASSERT_OK(hx_gguf_writer_create(&w));
    HX_ASSERT_OK(hx_gguf_writer_set_str(w, "general.architecture", "qwen2"));
    const struct {
        const char *key;
        uint32_t v;
    } u32[] = {{"context_length", in.n_ctx_train}, {"embedding_length", in.n_embd},
               {"block_count", in.n_layer},        {"feed_forward_length", in.n_ff},
               {"attention.head_count", in.n_head}, {"attention.head_count_kv", in.n_head_kv},
               {"rope.dimension_count", hp.n_rot}};
    char key[96];
    for (size_t i = 0; i < sizeof u32 / sizeof u32[0]; i++) {
        snprintf(key, sizeof key, "qwen2.%s", u32[i].key);
        HX_ASSERT_OK(hx_gguf_writer_set_u32(w, key, u32[i].v));
    }
    HX_ASSERT_OK(hx_gguf_writer_set_f32(w, "qwen2.rope.freq_base", hp.rope_base));
    HX_ASSERT_OK(hx_gguf_writer_set_f32(w, "qwen2.attention.layer_norm_rms_epsilon", hp.eps));
    HX_ASSERT_OK(hx_tokenizer_write_bytes_kv(w));
    const uint64_t D = in.n_embd, Dkv = (uint64_t)in.n_head_kv * in.head_dim, F = in.n_ff;
    float *zeros = calloc(D, sizeof *zeros);
    const char *whole[] = {"token_embd.weight", "output_norm.weight", "output.weight"};
    for (int i = 0; i < 3; i++) {
        const hx_gguf_tensor *t = hx_gguf_find_tensor(g, whole[i]);
        ck_assert_ptr_nonnull(t);
        add(w, whole[i], t, 0, t->n_dims > 1 ? t->ne[1] : 1);
    }
    for (uint32_t l = 0; l < in.n_layer; l++) {
        char name[96];
#define TENSOR(n) (snprintf(name, sizeof name, "blk.%u.%s", l, n), hx_gguf_find_tensor(g, name))
#define OUT(n) (snprintf(key, sizeof key, "blk.%u.%s", l, n), key)
        const hx_gguf_tensor *qkv = TENSOR("attn_qkv.weight"), *gate_up = TENSOR("ffn_up.weight");
        ck_assert_ptr_nonnull(qkv);
        ck_assert_ptr_nonnull(gate_up);
        add(w, OUT("attn_q.weight"), qkv, 0, D);
        add(w, OUT("attn_k.weight"), qkv, D, Dkv);
        add(w, OUT("attn_v.weight"), qkv, D + Dkv, Dkv);
        add(w, OUT("ffn_gate.weight"), gate_up, 0, F);
        add(w, OUT("ffn_up.weight"), gate_up, F, F);
        const char *same[] = {"attn_norm.weight", "attn_output.weight", "ffn_norm.weight", "ffn_down.weight"};
        for (int i = 0; i < 4; i++) {
            const hx_gguf_tensor *t = TENSOR(same[i]);
            ck_assert_ptr_nonnull(t);
            add(w, OUT(same[i]), t, 0, t->n_dims > 1 ? t->ne[1] : 1);
        }
        const uint64_t q_ne[1] = {D}, kv_ne[1] = {Dkv};
        HX_ASSERT_OK(hx_gguf_writer_add_tensor(w, OUT("attn_q.bias"), HX_TYPE_F32, 1, q_ne, zeros));
        HX_ASSERT_OK(hx_gguf_writer_add_tensor(w, OUT("attn_k.bias"), HX_TYPE_F32, 1, kv_ne, zeros));
        HX_ASSERT_OK(hx_gguf_writer_add_tensor(w, OUT("attn_v.bias"), HX_TYPE_F32, 1, kv_ne, zeros));
#undef TENSOR
#undef OUT
    }
    HX_ASSERT_OK(hx_gguf_writer_write(w, dst));
    hx_gguf_writer_free(w);
    hx_gguf_close(g);
    free(zeros);
}

/* Q, K, V and gate, up are views of the fused tensors' rows: the same
 * bytes the unfused file holds, through the same kernels, so the logits
 * are equal bit for bit, in F32 and in a quantized type.  A Phi-3 whose
 * views were off by a row would differ from the first logit on. */
START_TEST(phi3_equals_its_weights_unfused)
{
    const char *type = _i ? "q8_0" : "f32";
    char fused[128], unfused[128];
    file(fused, sizeof fused, "phi3");
    file(unfused, sizeof unfused, "phi3-unfused");
    HX_ASSERT_OK(hx_synthetic_write(fused, &phi3, type, 5));
    hx_runtime *rt = hx_small_runtime(2, NULL);
    write_unfused(rt, fused, unfused);
    uint32_t va, vb;
    float *a = logits_of(rt, fused, &va), *b = logits_of(rt, unfused, &vb);
    ck_assert_uint_eq(va, vb);
    size_t differ = 0;
    for (size_t i = 0; i < (size_t)va * N_TOK; i++)
        differ += memcmp(&a[i], &b[i], sizeof *a) != 0;
    fprintf(stderr, "  phi3 %s fused vs unfused: %zu of %zu logits differ\n", type, differ, (size_t)va * N_TOK);
    ck_assert_uint_eq(differ, 0);
    free(a);
    free(b);
    HX_ASSERT_OK(hx_runtime_close(rt));
}
END_TEST

/* Copies `src` with tensor `drop` left out, `extra` (n floats) added, and
 * the key `u32_key` set to `u32` when not NULL. */
static void copy_with_key(const char *src, const char *dst, const char *drop, const char *extra, const float *v,
                          uint64_t n, const char *u32_key, uint32_t u32)
{
    hx_gguf *g = NULL;
    HX_ASSERT_OK(hx_gguf_open(src, &g));
    hx_gguf_writer *w = NULL;
    HX_ASSERT_OK(hx_gguf_writer_create(&w));
    HX_ASSERT_OK(hx_gguf_writer_copy_kv(w, g));
    if (u32_key)
        HX_ASSERT_OK(hx_gguf_writer_set_u32(w, u32_key, u32));
    for (uint64_t i = 0; i < hx_gguf_tensor_count(g); i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        if (!drop || strcmp(t->name, drop))
            add(w, t->name, t, 0, t->n_dims > 1 ? t->ne[1] : 1);
    }
    if (extra)
        HX_ASSERT_OK(hx_gguf_writer_add_tensor(w, extra, HX_TYPE_F32, 1, &n, v));
    HX_ASSERT_OK(hx_gguf_writer_write(w, dst));
    hx_gguf_writer_free(w);
    hx_gguf_close(g);
}

static void copy_with(const char *src, const char *dst, const char *drop, const char *extra, const float *v,
                      uint64_t n)
{
    copy_with_key(src, dst, drop, extra, v, n, NULL, 0);
}

static hx_status load_with(hx_runtime *rt, const char *name, const hx_synthetic_extras *x, hx_model **m)
{
    char path[128];
    file(path, sizeof path, name);
    HX_ASSERT_OK(hx_synthetic_write_with(path, &llama, x, "f32", 3));
    *m = NULL;
    return hx_model_load(rt, path, NULL, m);
}

static void refused_with(hx_runtime *rt, const char *name, const hx_synthetic_extras *x, const char *says)
{
    hx_model *m = (hx_model *)&m;
    ck_assert_int_eq(load_with(rt, name, x, &m), HX_ERR_UNSUPPORTED);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(hx_last_error(), says), "'%s' does not say '%s'", hx_last_error(), says);
}

/* As llama.cpp: no type is "linear", and the factor divides the
 * frequencies whatever the type; "llama3" is Llama 3.1's rope_freqs. */
START_TEST(rope_scaling_types)
{
    hx_runtime *rt = hx_small_runtime(1, NULL);
    const struct {
        const char *name, *type;
        float factor, scale;
    } ok[] = {{"absent", NULL, 0, 1}, {"default-linear", NULL, 4, 0.25f}, {"linear", "linear", 2, 0.5f},
              {"none", "none", 0, 1}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        hx_model *m = NULL;
        HX_ASSERT_OK(load_with(rt, ok[i].name, &(hx_synthetic_extras){.rope_scaling = ok[i].type,
                                                                        .rope_scaling_factor = ok[i].factor}, &m));
        ck_assert_msg(m->hp.rope_scale == ok[i].scale, "%s: scale %g", ok[i].name, (double)m->hp.rope_scale);
        ck_assert_ptr_null(m->rope_freqs.buf);
        HX_ASSERT_OK(hx_model_free(m));
    }
    /* rope_freqs with and without the type "llama3": the same model. */
    uint32_t va, vb;
    char a[128], b[128];
    hx_model *m = NULL;
    HX_ASSERT_OK(load_with(rt, "llama3-typed", &(hx_synthetic_extras){.rope_freqs = 1, .rope_scaling = "llama3"}, &m));
    ck_assert_ptr_nonnull(m->rope_freqs.buf);
    HX_ASSERT_OK(hx_model_free(m));
    HX_ASSERT_OK(load_with(rt, "llama3", &(hx_synthetic_extras){.rope_freqs = 1}, &m));
    ck_assert_ptr_nonnull(m->rope_freqs.buf);
    HX_ASSERT_OK(hx_model_free(m));
    file(a, sizeof a, "llama3-typed");
    file(b, sizeof b, "llama3");
    float *la = logits_of(rt, a, &va), *lb = logits_of(rt, b, &vb);
    ck_assert_int_eq(memcmp(la, lb, sizeof(float) * va * N_TOK), 0);
    /* ... and not the model without them: the factors are applied. */
    char plain[128];
    file(plain, sizeof plain, "absent");
    float *lc = logits_of(rt, plain, &vb);
    ck_assert_int_ne(memcmp(la, lc, sizeof(float) * va * N_TOK), 0);
    free(la);
    free(lb);
    free(lc);

    refused_with(rt, "yarn", &(hx_synthetic_extras){.rope_scaling = "yarn", .rope_scaling_factor = 4},
                 "YaRN is not implemented");
    refused_with(rt, "longrope", &(hx_synthetic_extras){.rope_scaling = "longrope"}, "LongRoPE is not implemented");
    refused_with(rt, "bogus", &(hx_synthetic_extras){.rope_scaling = "bogus"}, "'bogus'");
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "none, linear and llama3"));
    /* "llama3" without its factors is a broken file. */
    ck_assert_int_eq(load_with(rt, "llama3-bare", &(hx_synthetic_extras){.rope_scaling = "llama3"}, &m),
                     HX_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "rope_freqs.weight"));
    HX_ASSERT_OK(hx_runtime_close(rt));
}
END_TEST

/* Factors that are zero, negative or not numbers would divide by them. */
START_TEST(bad_rope_factors_are_refused)
{
    hx_runtime *rt = hx_small_runtime(1, NULL);
    char src[128], dst[128];
    file(src, sizeof src, "llama3");
    file(dst, sizeof dst, "llama3-bad");
    HX_ASSERT_OK(hx_synthetic_write_with(src, &llama, &(hx_synthetic_extras){.rope_freqs = 1}, "f32", 3));
    const uint32_t half = llama.n_embd / llama.n_head / 2;
    float *f = malloc(sizeof *f * half);
    const float bad[] = {0.0f, -1.0f, NAN, INFINITY};
    for (int k = 0; k < 4; k++) {
        for (uint32_t i = 0; i < half; i++)
            f[i] = 1.0f;
        f[half / 2] = bad[k];
        copy_with(src, dst, "rope_freqs.weight", "rope_freqs.weight", f, half);
        hx_model *m = (hx_model *)&m;
        ck_assert_int_eq(hx_model_load(rt, dst, NULL, &m), HX_ERR_FORMAT);
        ck_assert_ptr_null(m);
        ck_assert_msg(strstr(hx_last_error(), "rope_freqs.weight"), "%s", hx_last_error());
    }
    /* The wrong length: a shape error naming the tensor. */
    copy_with(src, dst, "rope_freqs.weight", "rope_freqs.weight", f, half - 1);
    hx_model *m = NULL;
    ck_assert_int_eq(hx_model_load(rt, dst, NULL, &m), HX_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "rope_freqs.weight"));
    free(f);
    HX_ASSERT_OK(hx_runtime_close(rt));
}
END_TEST

/* Phi-3 128k carries LongRoPE's long and short factors: refused by name
 * rather than run with the 4k model's rotation. */
START_TEST(phi3_longrope_is_refused)
{
    hx_runtime *rt = hx_small_runtime(1, NULL);
    char src[128], dst[128];
    file(src, sizeof src, "phi3");
    file(dst, sizeof dst, "phi3-128k");
    HX_ASSERT_OK(hx_synthetic_write(src, &phi3, "f32", 3));
    float f[16];
    for (int i = 0; i < 16; i++)
        f[i] = 1.0f + (float)i;
    copy_with(src, dst, NULL, "rope_factors_long.weight", f, 16);
    hx_model *m = (hx_model *)&m;
    ck_assert_int_eq(hx_model_load(rt, dst, NULL, &m), HX_ERR_UNSUPPORTED);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(hx_last_error(), "rope_factors_long.weight") && strstr(hx_last_error(), "LongRoPE"), "%s",
                  hx_last_error());
    /* Phi-3 has no sliding window to write (llama.cpp ignores it). */
    ck_assert_int_eq(hx_synthetic_write_windowed(dst, &phi3, "f32", 3, 16), HX_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "ignores"));
    /* The plain file still loads: the runtime is fine. */
    HX_ASSERT_OK(hx_model_load(rt, src, NULL, &m));
    HX_ASSERT_OK(hx_model_free(m));
    HX_ASSERT_OK(hx_runtime_close(rt));
}
END_TEST

/* Converted Phi-3 files carry attention.sliding_window (2047 for the 4k
 * models), which llama.cpp ignores: a window of 4 over 12 tokens changes
 * nothing here either. */
START_TEST(phi3_ignores_its_sliding_window)
{
    hx_runtime *rt = hx_small_runtime(1, NULL);
    char src[128], dst[128];
    file(src, sizeof src, "phi3");
    file(dst, sizeof dst, "phi3-window");
    HX_ASSERT_OK(hx_synthetic_write(src, &phi3, "f32", 3));
    copy_with_key(src, dst, NULL, NULL, NULL, 0, "phi3.attention.sliding_window", 4);
    hx_model *m = NULL;
    HX_ASSERT_OK(hx_model_load(rt, dst, NULL, &m));
    ck_assert_uint_eq(m->hp.n_swa, 0);
    ck_assert_uint_eq(m->info.sliding_window, 0);
    HX_ASSERT_OK(hx_model_free(m));
    uint32_t va, vb;
    float *a = logits_of(rt, src, &va), *b = logits_of(rt, dst, &vb);
    ck_assert_int_eq(memcmp(a, b, sizeof(float) * va * N_TOK), 0);
    free(a);
    free(b);
    HX_ASSERT_OK(hx_runtime_close(rt));
}
END_TEST

/* What llama.cpp runs and hetero does not: the message names the file's
 * architecture and every one hetero runs. */
START_TEST(other_architectures_are_refused_by_name)
{
    hx_runtime *rt = hx_small_runtime(1, NULL);
    const char *others[] = {"gemma", "gemma2", "falcon", "phi2", "starcoder2", "deepseek2"};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        char path[128], want[64];
        file(path, sizeof path, others[i]);
        hx_gguf_writer *w = NULL;
        HX_ASSERT_OK(hx_gguf_writer_create(&w));
        HX_ASSERT_OK(hx_gguf_writer_set_str(w, "general.architecture", others[i]));
        HX_ASSERT_OK(hx_gguf_writer_write(w, path));
        hx_gguf_writer_free(w);
        hx_model *m = (hx_model *)&m;
        ck_assert_int_eq(hx_model_load(rt, path, NULL, &m), HX_ERR_UNSUPPORTED);
        ck_assert_ptr_null(m);
        snprintf(want, sizeof want, "architecture '%s'", others[i]);
        ck_assert_msg(strstr(hx_last_error(), want), "'%s' does not name %s", hx_last_error(), others[i]);
        ck_assert_msg(strstr(hx_last_error(), "llama, mistral, qwen2, phi3"), "'%s'", hx_last_error());
    }
    HX_ASSERT_OK(hx_runtime_close(rt));
}
END_TEST

Suite *suite_arch_layouts(void)
{
    Suite *s = suite_create("arch_layouts");
    TCase *t = tcase_create("layouts");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 120);
    tcase_add_loop_test(t, phi3_equals_its_weights_unfused, 0, 2);
    tcase_add_test(t, rope_scaling_types);
    tcase_add_test(t, bad_rope_factors_are_refused);
    tcase_add_test(t, phi3_longrope_is_refused);
    tcase_add_test(t, phi3_ignores_its_sliding_window);
    tcase_add_test(t, other_architectures_are_refused_by_name);
    suite_add_tcase(s, t);
    return s;
}
