/* The centre a quantized K cache stores a model's keys less
 * (model/kv_center.c): its K bias turned by the mean of RoPE's rotations
 * over the positions a session can reach, made for the layers that have
 * a bias when the K cache is quantized and kv_rotate is on, and nowhere
 * else. */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "model/model.h"
#include "quantize/synthetic.h"
#include "tests/hx_test.h"
#include "tests/small_model.h"

/* The mean over positions p < n of the bias rotated as hx_op_rope rotates
 * a key at p, summed position by position in double. */
static void direct_mean(const float *bias, double *out, uint32_t Dh, uint32_t n_rot, int neox, double base,
                        double scale, const float *factors, uint32_t n)
{
    const uint32_t half = n_rot / 2;
    for (uint32_t d = 0; d < Dh; d++)
        out[d] = d < n_rot ? 0 : bias[d];
    for (uint32_t p = 0; p < n; p++)
        for (uint32_t i = 0; i < half; i++) {
            const double th = p * scale * pow(base, -2.0 * i / n_rot) / (factors ? factors[i] : 1.0);
            const uint32_t i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
            out[i0] += (bias[i0] * cos(th) - bias[i1] * sin(th)) / n;
            out[i1] += (bias[i0] * sin(th) + bias[i1] * cos(th)) / n;
        }
}

START_TEST(centre_is_the_rotated_bias_mean)
{
    const uint32_t Dh = 64;
    float bias[64], factors[32], got[64];
    double want[64];
    unsigned seed = 3;
    for (uint32_t d = 0; d < Dh; d++)
        bias[d] = (float)(rand_r(&seed) % 2001 - 1000) / 10.0f;
    for (uint32_t i = 0; i < 32; i++)
        factors[i] = 1.0f + (float)(rand_r(&seed) % 70) / 10.0f;
    const uint32_t positions[] = {1, 7, 300, 2048};
    for (int v = 0; v < 16; v++) {
        const int neox = v & 1, with_factors = v >> 1 & 1;
        const uint32_t n_rot = v >> 2 & 1 ? 48 : 64, n = positions[v >> 3 ? 3 : (v >> 2 & 1) + 1];
        const double base = v >> 3 ? 1e6 : 1e4, scale = v >> 3 ? 0.25 : 1.0;
        hx_kv_center_head(bias, got, Dh, n_rot, neox, base, scale, with_factors ? factors : NULL, n);
        direct_mean(bias, want, Dh, n_rot, neox, base, scale, with_factors ? factors : NULL, n);
        for (uint32_t d = 0; d < Dh; d++)
            ck_assert_msg(fabs(got[d] - want[d]) <= 1e-4 * (1 + fabs(want[d])),
                          "case %d (n_rot %u, neox %d, %u positions): dim %u: %.7g, the direct mean %.7g", v, n_rot,
                          neox, n, d, (double)got[d], want[d]);
    }
    /* One position: the bias itself (RoPE turns position 0 by nothing). */
    hx_kv_center_head(bias, got, Dh, Dh, 1, 1e4, 1.0, NULL, 1);
    for (uint32_t d = 0; d < Dh; d++)
        ck_assert_float_eq(got[d], bias[d]);
}
END_TEST

static char dir[64], qwen_path[128], llama_path[128];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/hx-center-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(qwen_path, sizeof qwen_path, "%s/qwen2.gguf", dir);
    snprintf(llama_path, sizeof llama_path, "%s/llama.gguf", dir);
    /* Heads of 64 (rotated in a quantized cache), two layers. */
    static const hx_synthetic_config qwen = {"qwen2", 256, 2, 4, 2, 256, 256, "qwen2", 0};
    static const hx_synthetic_config llama = {"llama", 256, 2, 4, 2, 256, 256, "llama", 0};
    HX_ASSERT_OK(hx_synthetic_write(qwen_path, &qwen, "f32", 5));
    HX_ASSERT_OK(hx_synthetic_write(llama_path, &llama, "f32", 5));
}

static void teardown(void)
{
    unlink(qwen_path);
    unlink(llama_path);
    rmdir(dir);
}

static hx_model *load(hx_runtime *rt, const char *path, const char *kv_k, int rotate)
{
    hx_model_options o = hx_model_options_default();
    o.kv_type_k = kv_k;
    o.kv_rotate = rotate;
    o.n_ctx = 384;
    o.kv_tokens = 1024;
    hx_model *m = NULL;
    HX_ASSERT_OK(hx_model_load(rt, path, &o, &m));
    return m;
}

START_TEST(biased_models_quantized_keys_are_centred)
{
    hx_runtime *rt = hx_small_runtime(1, NULL);
    const struct {
        const char *path, *kv_k;
        int rotate, centred;
    } cases[] = {
        {qwen_path, "q4_0", 0, 1},  {qwen_path, "q8_0", 0, 1}, {qwen_path, "f16", 0, 0},
        {qwen_path, "q8_0", -1, 0}, {llama_path, "q4_0", 0, 0},
    };
    for (int c = 0; c < 5; c++) {
        hx_model *m = load(rt, cases[c].path, cases[c].kv_k, cases[c].rotate);
        const uint32_t Dh = m->info.head_dim, Hkv = m->info.n_head_kv;
        for (uint32_t l = 0; l < m->info.n_layer; l++) {
            hx_buffer *kc = m->layers[l].k_center;
            ck_assert_msg((kc != NULL) == cases[c].centred, "case %d layer %u: centre %s", c, l,
                          kc ? "made" : "missing");
            if (!kc)
                continue;
            const float *bias, *centre;
            HX_ASSERT_OK(hx_buffer_acquire(m->layers[l].w[HX_LW_K_BIAS].buf, HX_R, (void **)&bias));
            HX_ASSERT_OK(hx_buffer_acquire(kc, HX_R, (void **)&centre));
            float want[64];
            for (uint32_t h = 0; h < Hkv; h++) {
                /* The session's 384 positions, fewer than the pool's 1024. */
                hx_kv_center_head(bias + h * Dh, want, Dh, m->hp.n_rot, m->arch->rope == HX_ROPE_NEOX,
                                  m->hp.rope_base, m->hp.rope_scale, NULL, 384);
                for (uint32_t d = 0; d < Dh; d++)
                    ck_assert_float_eq(centre[h * Dh + d], want[d]);
            }
            /* Not the bias as it is: RoPE's fast pairs average out. */
            ck_assert_float_ne(centre[0], bias[0]);
        }
        HX_ASSERT_OK(hx_model_free(m));
    }
    hx_runtime_close(rt);
}
END_TEST

Suite *suite_kv_center(void)
{
    Suite *s = suite_create("kv_center");
    TCase *c = tcase_create("center");
    tcase_add_test(c, centre_is_the_rotated_bias_mean);
    suite_add_tcase(s, c);
    TCase *m = tcase_create("model");
    tcase_add_checked_fixture(m, setup, teardown);
    tcase_set_timeout(m, 120);
    tcase_add_test(m, biased_models_quantized_keys_are_centred);
    suite_add_tcase(s, m);
    return s;
}
