/* Batched decode: one step over B sequences (what a server runs, one
 * hx_batch_eval over every running request) gives each sequence the very
 * logits, bit for bit, that a step of that sequence alone gives.  On the
 * CPU every output of a matmul is one GEMM tile's (row, column) sum whose
 * order does not depend on how many columns share the tile, and norms,
 * RoPE and attention work per token, so equality is exact: any difference
 * means a kernel's result depends on the batch, which a server would turn
 * into answers that change with the load.  The shapes leave a partial
 * group of blocks at the end of each row (the tiles' tail) and a partial
 * column tile (B = 13), and the sequences have different context lengths
 * over several KV blocks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_cpu/quant.h"
#include "quantize/synthetic.h"
#include "text/tokenizer.h"
#include "tests/hx_test.h"

#define NV HX_TOKENIZER_BYTES_VOCAB
enum { B = 13, STEPS = 3 };

/* n_embd 320 is ten blocks of 32 and n_ff 544 seventeen: neither is a
 * whole number of the AVX-512 tiles' eight-block step. */
static const hx_synthetic_config ragged = {"ragged", 320, 2, 5, 1, 544, 512, "llama", 0};
/* The K-quants need whole super-blocks of 256. */
static const hx_synthetic_config kquant = {"kquant", 256, 2, 4, 2, 512, 512, "llama", 0};

typedef struct {
    hx_runtime *rt;
    hx_model *m;
    hx_session *batched[B], *solo[B];
} fixture;

static void open_fixture(fixture *f, const char *path)
{
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = "cpu";
    HX_ASSERT_OK(hx_runtime_open(&f->rt, &o));
    hx_model_options mo = hx_model_options_default();
    mo.max_batch = 64;
    mo.kv_tokens = 2048;
    HX_ASSERT_OK(hx_model_load(f->rt, path, &mo, &f->m));
    for (int k = 0; k < B; k++) {
        HX_ASSERT_OK(hx_session_open(f->m, &f->batched[k]));
        HX_ASSERT_OK(hx_session_open(f->m, &f->solo[k]));
    }
}

static void close_fixture(fixture *f)
{
    for (int k = 0; k < B; k++) {
        hx_session_close(f->batched[k]);
        hx_session_close(f->solo[k]);
    }
    hx_model_free(f->m);
    hx_runtime_close(f->rt);
}

/* Sequence k's prompt: 3k + 1 tokens, so the contexts span from one KV
 * block to several. */
static int prompt(int k, int32_t *ids)
{
    srand(1000u + (unsigned)k);
    int n = 3 * k + 1;
    for (int i = 0; i < n; i++)
        ids[i] = rand() % 256;
    return n;
}

static int32_t argmax(const float *v)
{
    int32_t best = 0;
    for (int32_t i = 1; i < NV; i++)
        if (v[i] > v[best])
            best = i;
    return best;
}

/* Both sets of sessions evaluate the same prompts the same way, then
 * decode STEPS tokens: the batched set in one evaluation per step, the
 * solo set one sequence at a time.  Returns the first mismatch found as
 * text, or NULL. */
static char *compare_steps(const char *path, const char *what)
{
    fixture f;
    open_fixture(&f, path);
    int32_t ids[3 * B + 1], cur[B];
    for (int k = 0; k < B; k++) {
        int n = prompt(k, ids);
        HX_ASSERT_OK(hx_session_eval(f.batched[k], ids, (size_t)n, 0));
        HX_ASSERT_OK(hx_session_eval(f.solo[k], ids, (size_t)n, 0));
        cur[k] = argmax(hx_session_logits(f.solo[k], -1));
    }
    char *bad = NULL;
    for (int step = 0; step < STEPS && !bad; step++) {
        hx_batch b = {.n = B, .tokens = cur, .sessions = f.batched};
        HX_ASSERT_OK(hx_batch_eval(f.m, &b));
        for (int k = 0; k < B && !bad; k++) {
            HX_ASSERT_OK(hx_session_eval(f.solo[k], &cur[k], 1, 0));
            const float *got = hx_session_logits(f.batched[k], -1), *want = hx_session_logits(f.solo[k], -1);
            ck_assert_ptr_nonnull(got);
            ck_assert_ptr_nonnull(want);
            for (int v = 0; v < NV && !bad; v++)
                if (memcmp(&got[v], &want[v], sizeof *got)) {
                    bad = malloc(256);
                    snprintf(bad, 256, "%s: step %d, sequence %d, logit %d: batched %.9g, alone %.9g", what, step,
                             k, v, got[v], want[v]);
                }
        }
        for (int k = 0; k < B; k++)
            cur[k] = argmax(hx_session_logits(f.solo[k], -1));
    }
    close_fixture(&f);
    return bad;
}

static void check_types(const hx_synthetic_config *c, const char *const *types, int ntypes)
{
    char dir[64];
    hx_test_tmpdir(dir, sizeof dir, "batch");
    const hx_simd_level saved = hx_quant_level();
    for (int t = 0; t < ntypes; t++) {
        char path[128], what[96];
        snprintf(path, sizeof path, "%s/%s-%s.gguf", dir, c->name, types[t]);
        HX_ASSERT_OK(hx_synthetic_write(path, c, types[t], 7));
        for (hx_simd_level l = HX_SIMD_SCALAR; l <= hx_cpu_simd_max(); l++) {
            HX_ASSERT_OK(hx_quant_set_level(l));
            snprintf(what, sizeof what, "%s %s at %s", c->name, types[t], hx_cpu_simd_name(l));
            char *bad = compare_steps(path, what);
            HX_ASSERT_OK(hx_quant_set_level(saved));
            ck_assert_msg(bad == NULL, "%s", bad);
        }
    }
    hx_test_rmdir(dir);
}

START_TEST(a_batched_step_equals_single_steps)
{
    static const char *const types[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1"};
    check_types(&ragged, types, (int)(sizeof types / sizeof *types));
}
END_TEST

START_TEST(a_batched_step_equals_single_steps_kquants)
{
    static const char *const types[] = {"q4_K", "q5_K", "q6_K"};
    check_types(&kquant, types, (int)(sizeof types / sizeof *types));
}
END_TEST

/* Entries of one session spread through a batch (a server's prompt
 * chunks beside other requests' decode steps): without want_logits each
 * session keeps its last entry's logits only, and they equal, bit for
 * bit, those of the same tokens evaluated alone. */
START_TEST(sessions_spread_through_a_batch_keep_their_last_logits)
{
    char dir[64], path[128];
    hx_test_tmpdir(dir, sizeof dir, "batch");
    snprintf(path, sizeof path, "%s/ragged-q8_0.gguf", dir);
    HX_ASSERT_OK(hx_synthetic_write(path, &ragged, "q8_0", 7));
    fixture f;
    open_fixture(&f, path);
    enum { N = 11 };
    const int who[N] = {0, 1, 0, 2, 1, 0, 3, 3, 1, 0, 2}; /* four sessions, 1 to 4 entries each */
    int32_t tok[N], per[4][N];
    int nper[4] = {0};
    hx_session *sess[N];
    for (int i = 0; i < N; i++) {
        tok[i] = (int32_t)(17 * i + 5) % 256;
        sess[i] = f.batched[who[i]];
        per[who[i]][nper[who[i]]++] = tok[i];
    }
    hx_batch b = {.n = N, .tokens = tok, .sessions = sess};
    HX_ASSERT_OK(hx_batch_eval(f.m, &b));
    for (int k = 0; k < 4; k++) {
        HX_ASSERT_OK(hx_session_eval(f.solo[k], per[k], (size_t)nper[k], 0));
        const float *got = hx_session_logits(f.batched[k], -1), *want = hx_session_logits(f.solo[k], -1);
        ck_assert_ptr_nonnull(got);
        ck_assert_ptr_nonnull(want);
        for (int v = 0; v < NV; v++)
            ck_assert_msg(!memcmp(&got[v], &want[v], sizeof *got),
                          "session %d, logit %d: batched %.9g, alone %.9g", k, v, got[v], want[v]);
        if (nper[k] > 1)
            ck_assert_ptr_null(hx_session_logits(f.batched[k], 0));
    }
    close_fixture(&f);
    hx_test_rmdir(dir);
}
END_TEST

Suite *suite_batch_decode(void)
{
    Suite *s = suite_create("batch_decode");
    TCase *tc = tcase_create("bit_for_bit");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, a_batched_step_equals_single_steps);
    tcase_add_test(tc, a_batched_step_equals_single_steps_kquants);
    tcase_add_test(tc, sessions_spread_through_a_batch_keep_their_last_logits);
    suite_add_tcase(s, tc);
    return s;
}
