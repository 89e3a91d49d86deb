/* The forward pass: logits against the independent float64 reference
 * (tests/ref_llama.py, llama.cpp's gguf reader + numpy), and against
 * itself under every way of batching the same tokens. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "quantize/synthetic.h"
#include "text/tokenizer.h"
#include "tests/hx_test.h"

#define N_POS 64
#define NV HX_TOKENIZER_BYTES_VOCAB

static char tmpdir[64];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/hx-model-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void remove_tmpdir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Shapes small enough for the reference to run in a second or two, with
 * rows that are whole Q4_K super-blocks (256). */
static const hx_synthetic_config mha = {"mha", 256, 2, 4, 4, 512, 512, "llama", 0};
static const hx_synthetic_config gqa = {"gqa", 256, 2, 8, 2, 512, 512, "llama", 0};
static const hx_synthetic_config qwen = {"qwen2", 256, 2, 4, 2, 512, 512, "qwen2", 0};
static const hx_synthetic_config tied = {"tied", 256, 2, 4, 4, 512, 512, "llama", 1};

/* The layouts of the architectures users load, each as its converter
 * writes it: Llama 3.1 with rope_freqs.weight (no scaling type, as
 * llama.cpp's converter writes it), Phi-3 with its fused attn_qkv and
 * gate/up, Qwen2 with a vocabulary past 16-bit ids. */
static const hx_synthetic_config llama3 = {"llama3", 256, 2, 4, 2, 512, 512, "llama", 0};
static const hx_synthetic_config phi3 = {"phi3", 256, 2, 4, 2, 512, 512, "phi3", 0};
static const hx_synthetic_config qwen_big = {"qwen2-big", 64, 2, 4, 2, 128, 512, "qwen2", 0};
#define BIG_VOCAB 70000u
/* Quantized files against the dequantized reference (see
 * quantized_match_dequantized_reference). */
#define QUANT_BOUND 3e-2

/* The architectures of llama.cpp's newer models: Qwen3 with heads of 128
 * that do not split n_embd; a Mixtral-style llama (8 experts, 2 used);
 * Qwen3-MoE (8 experts, 3 used, heads of 32); Qwen2-MoE with its shared
 * expert (and Qwen2's biases); Gemma 3 with a window of 8 on five of its
 * six layers and tied embeddings. */
static const hx_synthetic_config qwen3 = {"qwen3", 256, 2, 4, 2, 512, 512, "qwen3", 0};
static const hx_synthetic_config mixtral = {"mixtral", 256, 2, 4, 2, 256, 512, "llama", 0};
static const hx_synthetic_config qwen3moe = {"qwen3moe", 256, 2, 8, 4, 256, 512, "qwen3moe", 0};
static const hx_synthetic_config qwen2moe = {"qwen2moe", 256, 2, 4, 2, 256, 512, "qwen2moe", 0};
static const hx_synthetic_config gemma3 = {"gemma3", 256, 6, 4, 1, 512, 512, "gemma3", 1};

static const hx_synthetic_extras *extras_of(const hx_synthetic_config *c)
{
    static const hx_synthetic_extras none = {0}, freqs = {.rope_freqs = 1}, big = {.n_vocab = BIG_VOCAB},
                                     heads = {.head_dim = 128}, experts = {.n_expert = 8, .n_expert_used = 2},
                                     qexperts = {.head_dim = 32, .n_expert = 8, .n_expert_used = 3},
                                     shared = {.n_expert = 4, .n_expert_used = 2},
                                     windows = {.head_dim = 128, .window = 8};
    return c == &llama3     ? &freqs
           : c == &qwen_big ? &big
           : c == &qwen3    ? &heads
           : c == &mixtral  ? &experts
           : c == &qwen3moe ? &qexperts
           : c == &qwen2moe ? &shared
           : c == &gemma3   ? &windows
                            : &none;
}

static int vocab_of(const hx_synthetic_config *c)
{
    uint32_t v = extras_of(c)->n_vocab;
    return v > NV ? (int)v : NV;
}

static void write_model(const hx_synthetic_config *c, const char *type, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s-%s.gguf", tmpdir, c->name, type);
    HX_ASSERT_OK(hx_synthetic_write_with(path, c, extras_of(c), type, 42));
}

static void test_tokens(int32_t *ids, int n, unsigned seed)
{
    srand(seed);
    ids[0] = 256; /* BOS of the byte vocabulary */
    for (int i = 1; i < n; i++)
        ids[i] = rand() % 256;
}

static char *token_list(const int32_t *ids, int n)
{
    char *s = malloc((size_t)n * 12 + 1), *p = s;
    for (int i = 0; i < n; i++)
        p += sprintf(p, i ? ",%d" : "%d", ids[i]);
    return s;
}

static float *read_floats(const char *path, size_t n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    float *v = malloc(n * sizeof *v);
    size_t got = fread(v, sizeof *v, n, f);
    int extra = fgetc(f);
    fclose(f);
    ck_assert_msg(got == n && extra == EOF, "%s: %zu floats, expected %zu", path, got, n);
    return v;
}

typedef struct {
    double rel_l2;
    int argmax_mismatch;
} comparison;

static comparison compare(const float *a, const float *ref, int n_pos, int n_vocab)
{
    comparison c = {0, 0};
    double num = 0, den = 0;
    for (int p = 0; p < n_pos; p++) {
        int am = 0, ar = 0;
        for (int v = 0; v < n_vocab; v++) {
            size_t i = (size_t)p * n_vocab + v;
            double d = (double)a[i] - ref[i];
            num += d * d;
            den += (double)ref[i] * ref[i];
            if (a[i] > a[(size_t)p * n_vocab + am]) am = v;
            if (ref[i] > ref[(size_t)p * n_vocab + ar]) ar = v;
        }
        c.argmax_mismatch += am != ar;
    }
    c.rel_l2 = sqrt(num / den);
    return c;
}

/* hetero-run --tokens --logits against ref_llama.py on the same file.  The
 * KV cache is kept in the weights' precision for F32 files (the F16 cache
 * alone would cost ~1e-4), in F16 otherwise (hetero's default). */
static comparison against_reference_on(const hx_synthetic_config *c, const char *type, const char *devices)
{
    char model[256], out[300], ref[300], cmd[4096];
    write_model(c, type, model, sizeof model);
    int32_t ids[N_POS];
    const int V = vocab_of(c);
    test_tokens(ids, N_POS, 7);
    for (int i = 3; V > 65536 && i < N_POS; i += 2) /* ids that need more than 16 bits */
        ids[i] = 65536 + (int32_t)((unsigned)i * 2654435761u % (unsigned)(V - 65536));
    char *list = token_list(ids, N_POS);
    snprintf(out, sizeof out, "%s/hetero.f32", tmpdir);
    snprintf(ref, sizeof ref, "%s/ref.f32", tmpdir);
    snprintf(cmd, sizeof cmd, "%s/hetero-run -m %s --tokens %s --logits %s --kv-type %s%s%s 2>%s/run.log",
             hx_test_build_dir(), model, list, out, strcmp(type, "f32") ? "f16" : "f32",
             devices ? " --devices " : "", devices ? devices : "", tmpdir);
    ck_assert_msg(system(cmd) == 0, "hetero-run failed: %s", cmd);
    int quantized = strcmp(type, "f32") && strcmp(type, "f16");
    snprintf(cmd, sizeof cmd, "python3 tests/ref_llama.py %s --tokens %s --out %s%s >/dev/null", model, list, ref,
             quantized ? " --dequantized" : "");
    ck_assert_msg(system(cmd) == 0,
                  "the reference failed (pip install -r tests/requirements.txt installs what it needs): %s", cmd);
    free(list);
    float *a = read_floats(out, (size_t)N_POS * V), *r = read_floats(ref, (size_t)N_POS * V);
    comparison cmp = compare(a, r, N_POS, V);
    free(a);
    free(r);
    fprintf(stderr, "  %-6s %-5s%s%s rel L2 %.3g, argmax mismatches %d/%d\n", c->name, type, devices ? " on " : "",
            devices ? devices : "", cmp.rel_l2, cmp.argmax_mismatch, N_POS);
    return cmp;
}

static comparison against_reference(const hx_synthetic_config *c, const char *type)
{
    return against_reference_on(c, type, NULL);
}

/* The reference itself is checked against a second, loop-based
 * implementation before anything is compared with it. */
START_TEST(reference_passes_its_self_test)
{
    ck_assert_msg(system("python3 tests/ref_llama_selftest.py >/dev/null") == 0,
                  "tests/ref_llama_selftest.py failed (pip install -r tests/requirements.txt)");
}
END_TEST

START_TEST(f32_matches_reference)
{
    make_tmpdir();
    const hx_synthetic_config *cs[] = {&mha, &gqa, &qwen, &tied, &llama3, &phi3, &qwen_big};
    for (int i = 0; i < 7; i++) {
        comparison c = against_reference(cs[i], "f32");
        ck_assert_msg(c.rel_l2 <= 1e-4, "%s f32: rel L2 %g > 1e-4", cs[i]->name, c.rel_l2);
        ck_assert_int_eq(c.argmax_mismatch, 0);
    }
    remove_tmpdir();
}
END_TEST

START_TEST(f16_matches_reference)
{
    make_tmpdir();
    const hx_synthetic_config *cs[] = {&mha, &gqa};
    for (int i = 0; i < 2; i++) {
        comparison c = against_reference(cs[i], "f16");
        ck_assert_msg(c.rel_l2 <= 1e-3, "%s f16: rel L2 %g > 1e-3", cs[i]->name, c.rel_l2);
        ck_assert_int_eq(c.argmax_mismatch, 0);
    }
    remove_tmpdir();
}
END_TEST

/* The newer architectures against the reference's own reading of them
 * (llama.cpp's graphs, tests/ref_llama.py).  Gemma 3's GELU goes through
 * ggml's f16 table, as in llama.cpp, and the reference's does not: its
 * bound is 1e-3. */
START_TEST(new_architectures_match_reference)
{
    make_tmpdir();
    const hx_synthetic_config *cs[] = {&qwen3, &mixtral, &qwen3moe, &qwen2moe, &gemma3};
    for (int i = 0; i < 5; i++) {
        comparison c = against_reference(cs[i], "f32");
        const double bound = cs[i] == &gemma3 ? 1e-3 : 1e-4;
        ck_assert_msg(c.rel_l2 <= bound, "%s f32: rel L2 %g > %g", cs[i]->name, c.rel_l2, bound);
        ck_assert_int_eq(c.argmax_mismatch, 0);
    }
    /* Experts in quantized types, through the expert ops' quantized paths. */
    const char *types[] = {"q8_0", "q4_K"};
    for (int t = 0; t < 2; t++)
        for (int i = 1; i < 3; i++) {
            comparison c = against_reference(cs[i], types[t]);
            ck_assert_msg(c.rel_l2 <= QUANT_BOUND, "%s %s: rel L2 %g > %g", cs[i]->name, types[t], c.rel_l2,
                          QUANT_BOUND);
        }
    remove_tmpdir();
}
END_TEST

/* The same layouts with every task on PoCL's OpenCL device: rope with
 * Llama 3.1's factors, Phi-3's row views, Qwen2's biases and 70,000-row
 * embedding and output matrices in the OpenCL kernels. */
START_TEST(layouts_on_opencl_match_reference)
{
    make_tmpdir();
    const hx_synthetic_config *cs[] = {&llama3, &phi3, &qwen_big};
    for (int i = 0; i < 3; i++) {
        comparison c = against_reference_on(cs[i], "f32", "opencl");
        ck_assert_msg(c.rel_l2 <= 1e-4, "%s f32 on OpenCL: rel L2 %g > 1e-4", cs[i]->name, c.rel_l2);
        ck_assert_int_eq(c.argmax_mismatch, 0);
    }
    remove_tmpdir();
}
END_TEST

/* The reference multiplies the dequantized weights in float64; hetero,
 * like llama.cpp, quantizes each activation row to Q8_0 / Q8_K (blocks of
 * 32 / 256 with one scale) before the integer dot products, which alone
 * costs about 0.3-0.5% relative error per projection. */

START_TEST(quantized_match_dequantized_reference)
{
    make_tmpdir();
    const char *types[] = {"q8_0", "q4_0", "q4_K"};
    for (int i = 0; i < 3; i++) {
        comparison c = against_reference(&gqa, types[i]);
        ck_assert_msg(c.rel_l2 <= QUANT_BOUND, "%s: rel L2 %g > %g", types[i], c.rel_l2, QUANT_BOUND);
        /* Phi-3's Q, K, V and gate, up are row ranges of quantized tensors. */
        c = against_reference(&phi3, types[i]);
        ck_assert_msg(c.rel_l2 <= QUANT_BOUND, "phi3 %s: rel L2 %g > %g", types[i], c.rel_l2, QUANT_BOUND);
    }
    remove_tmpdir();
}
END_TEST

/* ---- batching invariance ------------------------------------------------ */

typedef struct {
    hx_runtime *rt;
    hx_model *m;
} loaded;

static loaded load(const char *path, const char *kv_type, uint32_t max_batch)
{
    loaded l;
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = "cpu";
    HX_ASSERT_OK(hx_runtime_open(&l.rt, &o));
    hx_model_options mo = hx_model_options_default();
    mo.kv_type = kv_type;
    mo.max_batch = max_batch;
    mo.kv_tokens = 1024;
    HX_ASSERT_OK(hx_model_load(l.rt, path, &mo, &l.m));
    return l;
}

static void unload(loaded *l)
{
    hx_model_free(l->m);
    hx_runtime_close(l->rt);
}

/* Logits of every position, evaluating `chunk` tokens at a time. */
static float *logits_in_chunks(hx_model *m, const int32_t *ids, int n, int chunk)
{
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(m, &s));
    float *all = malloc(sizeof(float) * NV * (size_t)n);
    for (int off = 0; off < n; off += chunk) {
        int c = n - off < chunk ? n - off : chunk;
        HX_ASSERT_OK(hx_session_eval(s, ids + off, (size_t)c, 1));
        for (int i = 0; i < c; i++) {
            const float *l = hx_session_logits(s, i);
            ck_assert_ptr_nonnull(l);
            memcpy(all + (size_t)(off + i) * NV, l, sizeof(float) * NV);
        }
    }
    ck_assert_uint_eq(hx_session_position(s), (unsigned)n);
    hx_session_close(s);
    return all;
}

/* Also for the experts: a token's expert rows are gathered with other
 * tokens' or alone, and its logits must not change. */
START_TEST(batching_does_not_change_logits)
{
    make_tmpdir();
    char path[256];
    const hx_synthetic_config *cs[] = {&gqa, &mixtral, &qwen3moe};
    write_model(cs[_i], "q8_0", path, sizeof path);
    int32_t ids[N_POS];
    test_tokens(ids, N_POS, 11);
    /* max_batch 24 also splits the whole-prompt evaluation into chunks. */
    loaded l = load(path, "f16", 24);
    float *whole = logits_in_chunks(l.m, ids, N_POS, N_POS);
    const int chunks[] = {1, 5, 16, 17};
    for (int k = 0; k < 4; k++) {
        float *c = logits_in_chunks(l.m, ids, N_POS, chunks[k]);
        comparison cmp = compare(c, whole, N_POS, NV);
        ck_assert_msg(cmp.rel_l2 <= 1e-6, "chunks of %d: rel L2 %g", chunks[k], cmp.rel_l2);
        ck_assert_int_eq(cmp.argmax_mismatch, 0);
        free(c);
    }
    free(whole);
    unload(&l);
    remove_tmpdir();
}
END_TEST

/* The router's tallies (hx_model_expert_counts): each evaluated token
 * counted once for each expert it went to, in every layer; nothing for a
 * dense model; a bad layer or a short array refused. */
START_TEST(expert_counts_add_up)
{
    make_tmpdir();
    char path[256];
    write_model(&qwen3moe, "f32", path, sizeof path);
    loaded l = load(path, "f16", 16);
    hx_model_info in;
    HX_ASSERT_OK(hx_model_info_get(l.m, &in));
    ck_assert_uint_eq(in.n_expert, 8);
    ck_assert_uint_eq(in.n_expert_used, 3);
    int32_t ids[N_POS];
    test_tokens(ids, N_POS, 5);
    float *lg = logits_in_chunks(l.m, ids, 40, 7);
    free(lg);
    uint64_t counts[8];
    size_t n = 0;
    for (uint32_t layer = 0; layer < in.n_layer; layer++) {
        HX_ASSERT_OK(hx_model_expert_counts(l.m, layer, counts, 8, &n));
        ck_assert_uint_eq(n, 8);
        uint64_t sum = 0, used = 0;
        for (int e = 0; e < 8; e++) {
            sum += counts[e];
            used += counts[e] > 0;
        }
        ck_assert_uint_eq(sum, 40 * 3);
        ck_assert_uint_ge(used, 3);
    }
    ck_assert_int_eq(hx_model_expert_counts(l.m, in.n_layer, counts, 8, &n), HX_ERR_RANGE);
    ck_assert_int_eq(hx_model_expert_counts(l.m, 0, counts, 7, &n), HX_ERR_RANGE);
    ck_assert_int_eq(hx_model_expert_counts(l.m, 0, NULL, 8, &n), HX_ERR_INVALID_ARG);
    unload(&l);
    write_model(&gqa, "f32", path, sizeof path);
    l = load(path, "f16", 16);
    HX_ASSERT_OK(hx_model_expert_counts(l.m, 0, counts, 8, &n));
    ck_assert_uint_eq(n, 0);
    unload(&l);
    remove_tmpdir();
}
END_TEST

START_TEST(interleaved_sequences_match_solo_runs)
{
    make_tmpdir();
    char path[256];
    write_model(&gqa, "f16", path, sizeof path);
    loaded l = load(path, "f16", 64);
    enum { NS = 3, LEN = 20 };
    int32_t ids[NS][LEN];
    float *solo[NS];
    for (int k = 0; k < NS; k++) {
        test_tokens(ids[k], LEN, 100 + k);
        solo[k] = logits_in_chunks(l.m, ids[k], LEN, LEN);
    }
    /* One batch holding all three prompts, interleaved token by token;
     * then decode steps where each batch holds one token per session. */
    hx_session *s[NS];
    for (int k = 0; k < NS; k++)
        HX_ASSERT_OK(hx_session_open(l.m, &s[k]));
    const int pre = 12;
    int32_t tok[NS * LEN];
    hx_session *who[NS * LEN];
    uint8_t want[NS * LEN];
    size_t n = 0;
    for (int i = 0; i < pre; i++)
        for (int k = 0; k < NS; k++, n++)
            tok[n] = ids[k][i], who[n] = s[k], want[n] = 1;
    hx_batch b = {n, tok, who, want};
    HX_ASSERT_OK(hx_batch_eval(l.m, &b));
    for (int k = 0; k < NS; k++)
        for (int i = 0; i < pre; i++) {
            const float *got = hx_session_logits(s[k], i);
            ck_assert_ptr_nonnull(got);
            comparison c = compare(got, solo[k] + (size_t)i * NV, 1, NV);
            ck_assert_msg(c.rel_l2 <= 1e-6, "session %d position %d: rel L2 %g", k, i, c.rel_l2);
        }
    for (int i = pre; i < LEN; i++) {
        n = 0;
        for (int k = 0; k < NS; k++, n++)
            tok[n] = ids[k][i], who[n] = s[k];
        hx_batch d = {n, tok, who, NULL};
        HX_ASSERT_OK(hx_batch_eval(l.m, &d));
        for (int k = 0; k < NS; k++) {
            comparison c = compare(hx_session_logits(s[k], -1), solo[k] + (size_t)i * NV, 1, NV);
            ck_assert_msg(c.rel_l2 <= 1e-6, "decode: session %d position %d: rel L2 %g", k, i, c.rel_l2);
        }
    }
    for (int k = 0; k < NS; k++) {
        hx_session_close(s[k]);
        free(solo[k]);
    }
    unload(&l);
    remove_tmpdir();
}
END_TEST

/* Q8_0 keys and values round each head row to 8 bits with one scale per
 * 32 values: about 0.4% error per element, averaged by attention. */
START_TEST(q8_0_kv_cache_stays_close)
{
    make_tmpdir();
    char path[256];
    write_model(&gqa, "f32", path, sizeof path);
    int32_t ids[N_POS];
    test_tokens(ids, N_POS, 5);
    loaded a = load(path, "f16", 64), b = load(path, "q8_0", 64);
    float *fa = logits_in_chunks(a.m, ids, N_POS, N_POS), *fb = logits_in_chunks(b.m, ids, N_POS, N_POS);
    comparison c = compare(fb, fa, N_POS, NV);
    fprintf(stderr, "  q8_0 KV vs f16 KV: rel L2 %.3g, argmax mismatches %d\n", c.rel_l2, c.argmax_mismatch);
    ck_assert_msg(c.rel_l2 <= 1e-2, "q8_0 KV: rel L2 %g", c.rel_l2);
    free(fa);
    free(fb);
    unload(&a);
    unload(&b);
    remove_tmpdir();
}
END_TEST

START_TEST(bad_evaluations_lose_nothing)
{
    make_tmpdir();
    char path[256];
    write_model(&mha, "f16", path, sizeof path);
    hx_runtime *rt;
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = "cpu";
    HX_ASSERT_OK(hx_runtime_open(&rt, &o));
    hx_model_options mo = hx_model_options_default();
    mo.kv_tokens = 32; /* two blocks of 16 */
    hx_model *m;
    HX_ASSERT_OK(hx_model_load(rt, path, &mo, &m));
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(m, &s));
    int32_t ids[40];
    test_tokens(ids, 40, 3);
    HX_ASSERT_OK(hx_session_eval(s, ids, 10, 0));
    float keep[NV];
    memcpy(keep, hx_session_logits(s, -1), sizeof keep);

    int32_t bad = NV;
    ck_assert_int_eq(hx_session_eval(s, &bad, 1, 0), HX_ERR_RANGE);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "vocabulary"));
    ck_assert_uint_eq(hx_session_position(s), 10);
    ck_assert_int_eq(hx_session_eval(s, ids + 10, 30, 0), HX_ERR_NO_MEMORY);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "KV cache memory"));
    ck_assert_uint_eq(hx_session_position(s), 10);

    /* The session continues as if the failures never happened. */
    hx_session *fresh;
    HX_ASSERT_OK(hx_session_open(m, &fresh));
    HX_ASSERT_OK(hx_session_eval(s, ids + 10, 5, 0));
    hx_session_close(s);
    HX_ASSERT_OK(hx_session_eval(fresh, ids, 15, 0));
    hx_session_close(fresh);
    hx_model_free(m);

    /* A truncated file is refused with the reason, the runtime lives on. */
    char cut[300], cmd[700];
    snprintf(cut, sizeof cut, "%s/cut.gguf", tmpdir);
    snprintf(cmd, sizeof cmd, "head -c 100000 %s > %s", path, cut);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_ne(hx_model_load(rt, cut, NULL, &m), HX_OK);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "cut.gguf"));
    ck_assert_int_eq(hx_model_load(rt, "/nonexistent/model.gguf", NULL, &m), HX_ERR_IO);
    HX_ASSERT_OK(hx_model_load(rt, path, &mo, &m));
    hx_model_free(m);
    hx_runtime_close(rt);
    remove_tmpdir();
}
END_TEST

Suite *suite_model(void)
{
    Suite *s = suite_create("model");
    TCase *ref = tcase_create("reference");
    tcase_set_timeout(ref, 300);
    tcase_add_test(ref, reference_passes_its_self_test);
    tcase_add_test(ref, f32_matches_reference);
    tcase_add_test(ref, f16_matches_reference);
    tcase_add_test(ref, layouts_on_opencl_match_reference);
    tcase_add_test(ref, new_architectures_match_reference);
    tcase_add_test(ref, quantized_match_dequantized_reference);
    suite_add_tcase(s, ref);
    TCase *inv = tcase_create("invariance");
    tcase_set_timeout(inv, 300);
    tcase_add_loop_test(inv, batching_does_not_change_logits, 0, 3);
    tcase_add_test(inv, interleaved_sequences_match_solo_runs);
    tcase_add_test(inv, expert_counts_add_up);
    tcase_add_test(inv, q8_0_kv_cache_stays_close);
    tcase_add_test(inv, bad_evaluations_lose_nothing);
    suite_add_tcase(s, inv);
    return s;
}
