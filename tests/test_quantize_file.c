/* Suite quantize_file: hx_model_quantize_ex on hetero's synthetic tiny
 * model — the recipe's types in the file written, general.file_type and
 * general.quantization_version, --allow-requantize, importance weights,
 * mixed precision by budget, and bad input (each refused with a clear
 * error, no output file, nothing left beside it). */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "kernels_cpu/quant.h"
#include "gguf/gguf.h"
#include "quantize/imatrix.h"
#include "quantize/quant_recipe.h"
#include "tests/hx_test.h"

static char dir[64], f32[128], out[128];

/* The model is written once for the suite (unchecked fixture); each test
 * starts from a directory holding it alone. */
static void setup_model(void)
{
    snprintf(dir, sizeof dir, "/tmp/hx-quantize-%d", (int)getpid());
    char cmd[128];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(f32, sizeof f32, "%s/tiny-f32.gguf", dir);
    snprintf(out, sizeof out, "%s/out.gguf", dir);
    /* the model tests/fixtures/quant-recipes/tiny.* were made from */
    HX_ASSERT_OK(hx_model_write_synthetic(f32, "tiny", "f32", 1234));
}

static void remove_model(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static void clean_outputs(void)
{
    char cmd[160];
    snprintf(cmd, sizeof cmd, "find %s -type f ! -name tiny-f32.gguf -delete", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Files in dir besides the input: a failed write must leave none. */
static int other_files(void)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.' && strcmp(e->d_name, "tiny-f32.gguf") != 0;
    closedir(d);
    return n;
}

static uint32_t u32_key(const hx_gguf *g, const char *key)
{
    uint32_t v = 0;
    HX_ASSERT_OK(hx_gguf_get_u32(g, key, &v));
    return v;
}

/* The written file holds llama-quantize's types for this model, whole. */
START_TEST(test_recipe_written)
{
    hx_quantize_options o = hx_quantize_options_default();
    o.recipe = "Q4_K_M";
    hx_quantize_totals tot;
    o.totals = &tot;
    HX_ASSERT_OK(hx_model_quantize_ex(f32, out, &o));
    char *want = hx_test_slurp("tests/fixtures/quant-recipes/tiny.Q4_K_M.txt", NULL);
    hx_gguf *g;
    HX_ASSERT_OK(hx_gguf_open(out, &g));
    int checked = 0;
    for (char *line = strtok(want, "\n"); line; line = strtok(NULL, "\n")) {
        char name[128], to[16];
        if (line[0] == '#' || sscanf(line, "%127s %*s %*s %*s %*s %15s", name, to) != 2)
            continue;
        const hx_gguf_tensor *t = hx_gguf_find_tensor(g, name);
        ck_assert_msg(t != NULL, "%s missing", name);
        ck_assert_msg(strcasecmp(hx_type_name(t->type), to) == 0, "%s: %s, want %s", name, hx_type_name(t->type), to);
        checked++;
    }
    ck_assert_int_eq(checked, (int)hx_gguf_tensor_count(g));
    ck_assert_int_eq(u32_key(g, "general.file_type"), 15);
    ck_assert_int_eq(u32_key(g, "general.quantization_version"), 2);
    uint64_t bytes = 0;
    for (uint64_t i = 0; i < hx_gguf_tensor_count(g); i++)
        bytes += hx_gguf_tensor_at(g, i)->size;
    ck_assert_uint_eq(bytes, tot.out_bytes);
    ck_assert_int_eq(tot.file_type, 15);
    hx_gguf_close(g);
    free(want);
    /* a dry run chooses the same and writes nothing */
    ck_assert_int_eq(remove(out), 0);
    o.dry_run = 1;
    hx_quantize_totals dry;
    o.totals = &dry;
    HX_ASSERT_OK(hx_model_quantize_ex(f32, out, &o));
    ck_assert_uint_eq(dry.out_bytes, tot.out_bytes);
    /* and needs no kernels for the types: sizes come from the type table */
    o.recipe = "Q2_K";
    HX_ASSERT_OK(hx_model_quantize_ex(f32, out, &o));
    ck_assert_int_eq(dry.file_type, 10);
    ck_assert_uint_lt(dry.out_bytes, tot.out_bytes);
    ck_assert_int_eq(other_files(), 0);
}
END_TEST

START_TEST(test_requantize)
{
    char q8[160];
    snprintf(q8, sizeof q8, "%s/q8.gguf", dir);
    hx_quantize_options o = hx_quantize_options_default();
    o.recipe = "Q8_0";
    HX_ASSERT_OK(hx_model_quantize_ex(f32, q8, &o));
    o.recipe = "Q4_K_M";
    ck_assert_int_eq(hx_model_quantize_ex(q8, out, &o), HX_ERR_INVALID_ARG);
    ck_assert_msg(strstr(hx_last_error(), "--allow-requantize"), "%s", hx_last_error());
    ck_assert_int_eq(access(out, F_OK), -1);
    o.allow_requantize = 1;
    HX_ASSERT_OK(hx_model_quantize_ex(q8, out, &o));
    /* the old call still converts every matrix, requantizing freely */
    HX_ASSERT_OK(hx_model_quantize(q8, out, "q4_0", NULL, NULL));
    hx_gguf *g;
    HX_ASSERT_OK(hx_gguf_open(out, &g));
    ck_assert_int_eq(hx_gguf_find_tensor(g, "blk.0.attn_v.weight")->type, HX_TYPE_Q4_0);
    ck_assert_int_eq(u32_key(g, "general.file_type"), 2);
    hx_gguf_close(g);
}
END_TEST

/* ---- importance weights ---------------------------------------------------- */

typedef struct {
    int calls, bad_length, non_finite;
    float w[2048];
} weights;

static const float *weights_for(void *user, const char *tensor, int64_t *n)
{
    weights *w = user;
    w->calls++;
    *n = strstr(tensor, "ffn_down") ? 1536 : 512;
    if (w->bad_length && strstr(tensor, "attn_q"))
        *n = 7;
    if (w->non_finite && strstr(tensor, "attn_k")) {
        w->w[3] = NAN;
    }
    return w->w;
}

START_TEST(test_importance_weights)
{
    weights *w = calloc(1, sizeof *w);
    for (int j = 0; j < 2048; j++)
        w->w[j] = 0.5f + (float)((j * 7919) % 101) / 50.0f;
    hx_quantize_options o = hx_quantize_options_default();
    o.recipe = "Q4_K_S";
    o.importance = weights_for;
    o.importance_user = w;
    HX_ASSERT_OK(hx_model_quantize_ex(f32, out, &o));
    ck_assert_int_gt(w->calls, 0);

    /* each row is the type's weighted quantizer's with these weights when
     * it has one, its plain one when not (ggml_quantize_chunk's rule) */
    hx_gguf *g, *src;
    HX_ASSERT_OK(hx_gguf_open(out, &g));
    HX_ASSERT_OK(hx_gguf_open(f32, &src));
    const hx_gguf_tensor *t = hx_gguf_find_tensor(g, "blk.1.attn_q.weight"), *s = hx_gguf_find_tensor(src, t->name);
    const hx_quant_ops *q = hx_quant_ops_get(t->type);
    size_t row = hx_type_row_size(t->type, t->ne[0]);
    uint8_t *y = malloc(row);
    for (uint64_t r = 0; r < t->ne[1]; r += 37) {
        const float *x = (const float *)s->data + r * s->ne[0];
        if (q->quantize_weighted)
            q->quantize_weighted(x, y, (int64_t)t->ne[0], w->w);
        else
            q->quantize_row(x, y, (int64_t)t->ne[0]);
        ck_assert_msg(memcmp(y, (const uint8_t *)t->data + r * row, row) == 0, "row %llu", (unsigned long long)r);
    }
    free(y);
    hx_gguf_close(g);
    hx_gguf_close(src);

    ck_assert_int_eq(remove(out), 0);
    w->bad_length = 1;
    ck_assert_int_eq(hx_model_quantize_ex(f32, out, &o), HX_ERR_INVALID_ARG);
    ck_assert_msg(strstr(hx_last_error(), "attn_q") && strstr(hx_last_error(), "7 importance weights"), "%s",
                  hx_last_error());
    w->bad_length = 0;
    w->non_finite = 1;
    ck_assert_int_eq(hx_model_quantize_ex(f32, out, &o), HX_ERR_INVALID_ARG);
    ck_assert_msg(strstr(hx_last_error(), "not finite"), "%s", hx_last_error());
    ck_assert_int_eq(other_files(), 0);
    /* an imatrix file and weights at once is a contradiction */
    o.imatrix = "x.imatrix";
    ck_assert_int_eq(hx_model_quantize_ex(f32, out, &o), HX_ERR_INVALID_ARG);
    free(w);
}
END_TEST

/* An importance matrix file collected on the model (hx_imatrix_collect,
 * saved in llama.cpp's GGUF form) reaches the quantizer: each row is the
 * type's weighted quantizer's with the file's per-column means. */
START_TEST(test_imatrix_file)
{
    char im_path[160];
    snprintf(im_path, sizeof im_path, "%s/tiny.imatrix.gguf", dir);
    hx_runtime *rt;
    HX_ASSERT_OK(hx_runtime_open(&rt, NULL));
    hx_model_options mo = hx_model_options_default();
    mo.kv_prefix_cache = -1;
    hx_model *m;
    HX_ASSERT_OK(hx_model_load(rt, f32, &mo, &m));
    hx_imatrix *im;
    HX_ASSERT_OK(hx_imatrix_create(0, &im));
    HX_ASSERT_OK(hx_imatrix_collect(m, im, 0));
    int32_t ids[48];
    for (int i = 0; i < 48; i++)
        ids[i] = 10 + (i * 37) % 200;
    hx_session *se;
    HX_ASSERT_OK(hx_session_open(m, &se));
    HX_ASSERT_OK(hx_session_eval(se, ids, 48, 0));
    HX_ASSERT_OK(hx_session_close(se));
    HX_ASSERT_OK(hx_imatrix_collect(m, NULL, 0));
    HX_ASSERT_OK(hx_imatrix_save(im, im_path, HX_IMATRIX_GGUF));
    hx_imatrix_free(im);
    HX_ASSERT_OK(hx_model_free(m));
    HX_ASSERT_OK(hx_runtime_close(rt));

    hx_quantize_options o = hx_quantize_options_default();
    o.recipe = "Q4_K_S";
    o.imatrix = im_path;
    HX_ASSERT_OK(hx_model_quantize_ex(f32, out, &o));

    hx_imatrix *read;
    HX_ASSERT_OK(hx_imatrix_load(im_path, &read));
    hx_gguf *g, *src;
    HX_ASSERT_OK(hx_gguf_open(out, &g));
    HX_ASSERT_OK(hx_gguf_open(f32, &src));
    const hx_gguf_tensor *t = hx_gguf_find_tensor(g, "blk.1.ffn_down.weight"), *s = hx_gguf_find_tensor(src, t->name);
    int64_t n = 0;
    const float *w = hx_imatrix_find(read, t->name, &n);
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(n, (int64_t)t->ne[0]);
    const hx_quant_ops *q = hx_quant_ops_get(t->type);
    ck_assert_msg(q->quantize_weighted, "%s takes no importance weights", hx_type_name(t->type));
    size_t row = hx_type_row_size(t->type, t->ne[0]);
    uint8_t *y = malloc(row), *plain = malloc(row);
    int differs = 0;
    for (uint64_t r = 0; r < t->ne[1]; r += 29) {
        const float *x = (const float *)s->data + r * s->ne[0];
        q->quantize_weighted(x, y, (int64_t)t->ne[0], w);
        ck_assert_msg(memcmp(y, (const uint8_t *)t->data + r * row, row) == 0, "row %llu", (unsigned long long)r);
        q->quantize_row(x, plain, (int64_t)t->ne[0]);
        differs += memcmp(y, plain, row) != 0;
    }
    ck_assert_msg(differs > 0, "the importance matrix changed no row");
    free(y);
    free(plain);
    hx_gguf_close(g);
    hx_gguf_close(src);
    hx_imatrix_free(read);

    /* a file that is not an importance matrix: a clear error, no output */
    ck_assert_int_eq(remove(out), 0);
    o.imatrix = f32;
    ck_assert_int_ne(hx_model_quantize_ex(f32, out, &o), HX_OK);
    ck_assert_int_eq(other_files(), 1); /* the imatrix file alone */
}
END_TEST

/* ---- mixed precision by budget -------------------------------------------- */

typedef struct {
    uint64_t bytes;
    double error;
    int n;
} chosen;

static void on_choice(void *user, const char *tensor, const char *type, uint64_t bytes, double error)
{
    chosen *c = user;
    (void)tensor;
    (void)type;
    c->bytes += bytes;
    c->error += error;
    c->n++;
}

START_TEST(test_budget_file)
{
    hx_quantize_options o = hx_quantize_options_default();
    o.target_bpw = 5.0;
    chosen c = {0};
    hx_quantize_totals tot;
    o.choice = on_choice;
    o.user = &c;
    o.totals = &tot;
    HX_ASSERT_OK(hx_model_quantize_ex(f32, out, &o));
    ck_assert_int_eq(c.n, 5 * 7 + 2); /* every matrix of the 5 layers, token_embd, output */
    ck_assert_msg(tot.out_bytes * 8.0 / (double)tot.elements <= 5.0, "%llu bytes for %llu elements",
                  (unsigned long long)tot.out_bytes, (unsigned long long)tot.elements);
    ck_assert_msg(tot.out_bytes * 8.0 / (double)tot.elements > 4.5, "the budget is left unused");
    hx_gguf *g;
    HX_ASSERT_OK(hx_gguf_open(out, &g));
    uint64_t bytes = 0;
    for (uint64_t i = 0; i < hx_gguf_tensor_count(g); i++)
        bytes += hx_gguf_tensor_at(g, i)->size;
    ck_assert_uint_eq(bytes, tot.out_bytes);
    hx_gguf_close(g);

    /* an option naming a type fixes it; the budget moves the rest */
    ck_assert_int_eq(remove(out), 0);
    const char *tt[] = {"attn_v=q8_0"};
    o.tensor_types = tt;
    o.n_tensor_types = 1;
    c = (chosen){0};
    HX_ASSERT_OK(hx_model_quantize_ex(f32, out, &o));
    ck_assert_int_eq(c.n, 5 * 6 + 2);
    HX_ASSERT_OK(hx_gguf_open(out, &g));
    ck_assert_int_eq(hx_gguf_find_tensor(g, "blk.3.attn_v.weight")->type, HX_TYPE_Q8_0);
    hx_gguf_close(g);

    /* the types it may choose: every free matrix gets one of them */
    ck_assert_int_eq(remove(out), 0);
    o.n_tensor_types = 0;
    o.budget_types = "q4_K,q6_K";
    HX_ASSERT_OK(hx_model_quantize_ex(f32, out, &o));
    HX_ASSERT_OK(hx_gguf_open(out, &g));
    int seen[HX_TYPE_COUNT] = {0};
    for (uint64_t i = 0; i < hx_gguf_tensor_count(g); i++)
        if (hx_gguf_tensor_at(g, i)->n_dims >= 2)
            seen[hx_gguf_tensor_at(g, i)->type]++;
    hx_gguf_close(g);
    for (int t = 0; t < HX_TYPE_COUNT; t++)
        ck_assert_msg(!seen[t] || t == HX_TYPE_Q4_K || t == HX_TYPE_Q6_K, "%d matrices of %s", seen[t],
                      hx_type_name((hx_type)t));
    ck_assert_int_gt(seen[HX_TYPE_Q4_K] + seen[HX_TYPE_Q6_K], 0);
    ck_assert_int_eq(remove(out), 0);
    o.budget_types = "q4_K,q7_K";
    ck_assert_int_eq(hx_model_quantize_ex(f32, out, &o), HX_ERR_INVALID_ARG);
    ck_assert_msg(strstr(hx_last_error(), "q7_K"), "%s", hx_last_error());
    o.budget_types = NULL;

    /* below what the smallest types make: refused, nothing written */
    o.target_bpw = 1.0;
    ck_assert_int_eq(hx_model_quantize_ex(f32, out, &o), HX_ERR_RANGE);
    ck_assert_msg(strstr(hx_last_error(), "budget"), "%s", hx_last_error());
    o.target_bpw = 0;
    o.target_bytes = 1000;
    ck_assert_int_eq(hx_model_quantize_ex(f32, out, &o), HX_ERR_RANGE);
    ck_assert_int_eq(other_files(), 0);
}
END_TEST

/* ---- bad input ------------------------------------------------------------ */

START_TEST(test_bad_input)
{
    hx_quantize_options o = hx_quantize_options_default();
    o.recipe = "Q4_K_X";
    ck_assert_int_eq(hx_model_quantize_ex(f32, out, &o), HX_ERR_INVALID_ARG);
    ck_assert_msg(strstr(hx_last_error(), "unknown recipe 'Q4_K_X'") && strstr(hx_last_error(), "Q4_K_M"), "%s",
                  hx_last_error());
    o.recipe = "Q4_K_M";
    o.output_tensor_type = "q9_9";
    ck_assert_int_eq(hx_model_quantize_ex(f32, out, &o), HX_ERR_INVALID_ARG);
    ck_assert_msg(strstr(hx_last_error(), "q9_9"), "%s", hx_last_error());
    o.output_tensor_type = NULL;
    const char *bad[][1] = {{"attn_v"}, {"=q8_0"}, {"attn_v="}, {"attn_v=q9"}, {"attn_v[=q8_0"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        o.tensor_types = bad[i];
        o.n_tensor_types = 1;
        ck_assert_msg(hx_model_quantize_ex(f32, out, &o) == HX_ERR_INVALID_ARG, "%s accepted", bad[i][0]);
        ck_assert_msg(strstr(hx_last_error(), "--tensor-type"), "%s", hx_last_error());
    }
    o.n_tensor_types = 0;
    o.target_bpw = 4.0; /* a recipe and a budget */
    ck_assert_int_eq(hx_model_quantize_ex(f32, out, &o), HX_ERR_INVALID_ARG);
    o.target_bpw = 0;
    ck_assert_int_eq(hx_model_quantize_ex(f32, f32, &o), HX_ERR_INVALID_ARG);
    ck_assert_msg(strstr(hx_last_error(), "same file"), "%s", hx_last_error());
    ck_assert_int_eq(hx_model_quantize_ex(NULL, out, &o), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_model_quantize_ex(f32, out, NULL), HX_ERR_INVALID_ARG);

    /* a corrupt input: the tiny model cut short */
    char cut[160], cmd[400];
    snprintf(cut, sizeof cut, "%s/cut.gguf", dir);
    snprintf(cmd, sizeof cmd, "head -c 100000 %s > %s", f32, cut);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(hx_model_quantize_ex(cut, out, &o), HX_ERR_FORMAT);
    ck_assert_int_eq(remove(cut), 0);
    ck_assert_int_eq(hx_model_quantize_ex("/nonexistent/in.gguf", out, &o), HX_ERR_IO);

    /* an output that cannot be written: nothing left, and still usable */
    char nowhere[160];
    snprintf(nowhere, sizeof nowhere, "%s/no-such-dir/out.gguf", dir);
    ck_assert_int_eq(hx_model_quantize_ex(f32, nowhere, &o), HX_ERR_IO);
    ck_assert_msg(strstr(hx_last_error(), "no-such-dir"), "%s", hx_last_error());
    ck_assert_int_eq(other_files(), 0);
    HX_ASSERT_OK(hx_model_quantize_ex(f32, out, &o));

    /* a type hetero has no writer for is refused before any work */
    ck_assert_int_eq(remove(out), 0);
    const char *iq[] = {"ffn_up=iq2_xxs"};
    o.tensor_types = iq;
    o.n_tensor_types = 1;
    ck_assert_int_eq(hx_model_quantize_ex(f32, out, &o), HX_ERR_INVALID_ARG);
    ck_assert_msg(strstr(hx_last_error(), "importance matrix"), "%s", hx_last_error());
    ck_assert_int_eq(other_files(), 0);
}
END_TEST

Suite *suite_quantize_file(void)
{
    Suite *s = suite_create("quantize_file");
    TCase *tc = tcase_create("core");
    tcase_add_unchecked_fixture(tc, setup_model, remove_model);
    tcase_add_checked_fixture(tc, clean_outputs, NULL);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_recipe_written);
    tcase_add_test(tc, test_requantize);
    tcase_add_test(tc, test_importance_weights);
    tcase_add_test(tc, test_imatrix_file);
    tcase_add_test(tc, test_budget_file);
    tcase_add_test(tc, test_bad_input);
    suite_add_tcase(s, tc);
    return s;
}
