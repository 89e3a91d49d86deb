/* Suite quant_recipe: llama-quantize's per-tensor choices (quantize/quant_recipe.h).
 *
 * The expected types are llama-quantize's own, from its --dry-run
 * (tests/gen-quant-recipes.sh wrote tests/fixtures/quant-recipes/, each
 * file naming its command): SmolLM2-135M (30 layers, rows of 576 and 1536,
 * grouped-query attention 9/3, tied embeddings), whose 576-element rows
 * take the fallbacks, and hetero's synthetic tiny model (5 layers, rows of
 * 512 and 1536, an output matrix of its own; hx_model_write_synthetic
 * "tiny" "f32" seed 1234), whose rows are whole K-quant blocks so that the
 * layer rules show.  Every recipe on both, and --pure, --tensor-type,
 * --output-tensor-type, --token-embedding-type, --leave-output-tensor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quantize/quant_recipe.h"
#include "tests/hx_test.h"

#define DIR "tests/fixtures/quant-recipes/"

typedef struct {
    char *names;
    hx_recipe_tensor *t;
    hx_type *want;
    size_t n;
    uint32_t n_layer, n_head, n_head_kv, n_expert;
} vectors;

static void vectors_free(vectors *v)
{
    for (size_t i = 0; i < v->n; i++)
        free((char *)v->t[i].name);
    free(v->t);
    free(v->want);
}

static vectors load(const char *file)
{
    char path[256];
    snprintf(path, sizeof path, DIR "%s", file);
    char *text = hx_test_slurp(path, NULL);
    vectors v = {0};
    size_t cap = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (sscanf(line, "# model n_layer %u n_head %u n_head_kv %u n_expert %u", &v.n_layer, &v.n_head,
                   &v.n_head_kv, &v.n_expert) >= 3)
            continue;
        if (line[0] == '#')
            continue;
        char name[128], from[16], to[16];
        unsigned long long ne0, ne1, ne2;
        ck_assert_msg(sscanf(line, "%127s %llu %llu %llu %15s %15s", name, &ne0, &ne1, &ne2, from, to) == 6,
                      "%s: bad line '%s'", file, line);
        if (v.n == cap) {
            cap = cap ? 2 * cap : 64;
            v.t = realloc(v.t, cap * sizeof *v.t);
            v.want = realloc(v.want, cap * sizeof *v.want);
        }
        hx_recipe_tensor *t = &v.t[v.n];
        *t = (hx_recipe_tensor){strdup(name), {ne0, ne1, ne2, 1}, HX_TYPE_COUNT};
        ck_assert_msg(hx_type_from_name(from, &t->type) && hx_type_from_name(to, &v.want[v.n]), "%s: type in '%s'",
                      file, line);
        v.n++;
    }
    free(text);
    ck_assert_msg(v.n > 0 && v.n_layer > 0, "%s: no tensors or no model line", file);
    return v;
}

typedef struct {
    const char *file, *recipe;
    int pure, leave_output;
    const char *output_type, *token_embd_type;
    const char *overrides[3]; /* PATTERN=TYPE */
} variant;

static const variant variants[] = {
    {.file = "smollm2.Q4_K_M-pure.txt", .recipe = "Q4_K_M", .pure = 1},
    {.file = "smollm2.Q4_K_M-overrides.txt", .recipe = "Q4_K_M", .token_embd_type = "q4_0",
     .overrides = {"attn_v=q8_0", "blk\\.1[0-9]\\.ffn_down=q5_k"}},
    {.file = "tiny.Q3_K_M-pure.txt", .recipe = "Q3_K_M", .pure = 1},
    {.file = "tiny.Q4_K_M-leave-output.txt", .recipe = "Q4_K_M", .leave_output = 1},
    {.file = "tiny.Q4_K_S-output-types.txt", .recipe = "Q4_K_S", .output_type = "q8_0", .token_embd_type = "q4_k"},
    {.file = "tiny.Q5_K_M-overrides.txt", .recipe = "Q5_K_M", .overrides = {"blk\\.[0-2]\\.attn_v=q4_0", "ffn=q6_k"}},
};

static const char *const recipe_names[] = {"Q2_K",   "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S",
                                           "Q5_K_M", "Q6_K",   "Q8_0",   "Q4_0",   "Q4_1",   "Q5_0",   "Q5_1",
                                           "IQ4_NL", "IQ4_XS", "F16",    "BF16",   "F32"};
#define N_RECIPES (sizeof recipe_names / sizeof *recipe_names)

static hx_type type_or_none(const char *name)
{
    hx_type t = HX_TYPE_COUNT;
    if (name)
        ck_assert_msg(hx_type_from_name(name, &t), "type %s", name);
    return t;
}

/* Chooses v's types with `var`'s options and compares with llama-quantize's;
 * the list is also chosen reversed, which must not change a thing (the
 * layer counts follow llama.cpp's order, not the file's). */
static void check_variant(const variant *var)
{
    vectors v = load(var->file);
    const hx_quant_recipe *r = hx_quant_recipe_find(var->recipe);
    ck_assert_ptr_nonnull(r);
    hx_recipe_override ov[3];
    size_t n_ov = 0;
    for (; n_ov < 3 && var->overrides[n_ov]; n_ov++) {
        char pat[128];
        const char *eq = strchr(var->overrides[n_ov], '=');
        snprintf(pat, sizeof pat, "%.*s", (int)(eq - var->overrides[n_ov]), var->overrides[n_ov]);
        ck_assert_int_eq(regcomp(&ov[n_ov].re, pat, REG_EXTENDED | REG_NOSUB), 0);
        ov[n_ov].type = type_or_none(eq + 1);
    }
    hx_recipe_params p = {.ftype = r->ftype, .base = r->base, .pure = var->pure, .leave_output = var->leave_output,
                          .output_type = type_or_none(var->output_type),
                          .token_embd_type = type_or_none(var->token_embd_type), .overrides = ov,
                          .n_overrides = n_ov, .n_layer = v.n_layer, .n_head = v.n_head, .n_head_kv = v.n_head_kv,
                          .n_expert = v.n_expert};
    hx_type *got = malloc(v.n * sizeof *got);
    HX_ASSERT_OK(hx_quant_recipe_choose(&p, v.t, v.n, got, NULL));
    int wrong = 0;
    for (size_t i = 0; i < v.n; i++)
        if (got[i] != v.want[i] && wrong++ < 5)
            fprintf(stderr, "%s: %s: hetero %s, llama-quantize %s\n", var->file, v.t[i].name, hx_type_name(got[i]),
                    hx_type_name(v.want[i]));
    ck_assert_msg(wrong == 0, "%s: %d tensors differ from llama-quantize", var->file, wrong);

    hx_recipe_tensor *rev = malloc(v.n * sizeof *rev);
    for (size_t i = 0; i < v.n; i++)
        rev[i] = v.t[v.n - 1 - i];
    HX_ASSERT_OK(hx_quant_recipe_choose(&p, rev, v.n, got, NULL));
    for (size_t i = 0; i < v.n; i++)
        ck_assert_msg(got[i] == v.want[v.n - 1 - i], "%s reversed: %s", var->file, rev[i].name);
    free(rev);
    free(got);
    for (size_t i = 0; i < n_ov; i++)
        regfree(&ov[i].re);
    vectors_free(&v);
}

START_TEST(test_recipes_smollm2)
{
    char file[64];
    snprintf(file, sizeof file, "smollm2.%s.txt", recipe_names[_i]);
    check_variant(&(variant){.file = file, .recipe = recipe_names[_i]});
}
END_TEST

START_TEST(test_recipes_tiny)
{
    char file[64];
    snprintf(file, sizeof file, "tiny.%s.txt", recipe_names[_i]);
    check_variant(&(variant){.file = file, .recipe = recipe_names[_i]});
}
END_TEST

/* How many of `file`'s tensors `recipe` types otherwise than the file says
 * llama-quantize did, with the file's expert count or none. */
static int tensors_differing(const char *file, const char *recipe, int with_experts)
{
    vectors v = load(file);
    const hx_quant_recipe *r = hx_quant_recipe_find(recipe);
    hx_recipe_params p = {.ftype = r->ftype, .base = r->base, .output_type = HX_TYPE_COUNT,
                          .token_embd_type = HX_TYPE_COUNT, .n_layer = v.n_layer, .n_head = v.n_head,
                          .n_head_kv = v.n_head_kv, .n_expert = with_experts ? v.n_expert : 0};
    hx_type *got = malloc(v.n * sizeof *got);
    HX_ASSERT_OK(hx_quant_recipe_choose(&p, v.t, v.n, got, NULL));
    int differ = 0;
    for (size_t i = 0; i < v.n; i++)
        differ += got[i] != v.want[i];
    free(got);
    vectors_free(&v);
    return differ;
}

/* The other architectures' synthetic files (hetero-run --synthetic P:f32):
 * Qwen3's per-head norms, Gemma 3's extra norms and single KV head, and
 * the experts' 3-D tensors of Mixtral (8 experts, whose attn_v llama.cpp
 * raises) and Qwen3-MoE (16), under the recipes whose rules differ. */
static const char *const arch_names[] = {"qwen3-tiny", "mixtral-tiny", "qwen3moe-tiny", "gemma3-tiny"};
static const char *const arch_recipes[] = {"Q2_K",   "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S",
                                           "Q4_K_M", "Q5_K_M", "Q6_K",   "IQ4_XS"};
#define N_ARCH_RECIPES (sizeof arch_recipes / sizeof *arch_recipes)

START_TEST(test_recipes_archs)
{
    const char *arch = arch_names[_i / N_ARCH_RECIPES], *recipe = arch_recipes[_i % N_ARCH_RECIPES];
    char file[64];
    snprintf(file, sizeof file, "%s.%s.txt", arch, recipe);
    check_variant(&(variant){.file = file, .recipe = recipe});
}
END_TEST

/* The expert count is part of the rules: Mixtral's vectors taken as a
 * dense model's must differ (its attn_v). */
START_TEST(test_recipes_need_the_expert_count)
{
    ck_assert_int_eq(tensors_differing("mixtral-tiny.Q4_K_M.txt", "Q4_K_M", 1), 0);
    ck_assert_int_gt(tensors_differing("mixtral-tiny.Q4_K_M.txt", "Q4_K_M", 0), 0);
}
END_TEST

START_TEST(test_recipe_options)
{
    check_variant(&variants[_i]);
}
END_TEST

/* The vectors must be able to fail: a recipe's rules differ from its
 * neighbour's on these models. */
START_TEST(test_recipes_differ)
{
    ck_assert_int_gt(tensors_differing("tiny.Q4_K_M.txt", "Q4_K_S", 1), 0);
}
END_TEST

START_TEST(test_recipe_names_and_fallbacks)
{
    ck_assert_ptr_null(hx_quant_recipe_find("Q4_K_X"));
    ck_assert_ptr_null(hx_quant_recipe_find(NULL));
    ck_assert_int_eq(hx_quant_recipe_find("q4_k")->ftype, HX_FTYPE_Q4_K_M);
    ck_assert_int_eq(hx_quant_recipe_find("Q3_K_L")->ftype, 13);
    ck_assert_int_eq(hx_quant_recipe_find("bf16")->ftype, 32);
    /* llama.cpp's fallbacks for rows that are not whole 256-blocks */
    ck_assert_int_eq(hx_quant_recipe_fallback(HX_TYPE_Q4_K, 576), HX_TYPE_Q5_0);
    ck_assert_int_eq(hx_quant_recipe_fallback(HX_TYPE_Q5_K, 576), HX_TYPE_Q5_1);
    ck_assert_int_eq(hx_quant_recipe_fallback(HX_TYPE_Q6_K, 576), HX_TYPE_Q8_0);
    ck_assert_int_eq(hx_quant_recipe_fallback(HX_TYPE_Q3_K, 576), HX_TYPE_Q4_0);
    ck_assert_int_eq(hx_quant_recipe_fallback(HX_TYPE_Q2_K, 576), HX_TYPE_Q4_0);
    ck_assert_int_eq(hx_quant_recipe_fallback(HX_TYPE_IQ4_XS, 576), HX_TYPE_IQ4_NL);
    ck_assert_int_eq(hx_quant_recipe_fallback(HX_TYPE_Q4_K, 512), HX_TYPE_Q4_K);
    ck_assert_int_eq(hx_quant_recipe_fallback(HX_TYPE_Q4_K, 100), HX_TYPE_F16);
    ck_assert_int_eq(hx_quant_recipe_fallback(HX_TYPE_Q8_0, 100), HX_TYPE_F16);
    ck_assert(hx_quant_requires_imatrix("blk.0.ffn_up.weight", HX_TYPE_IQ2_XS));
    ck_assert(!hx_quant_requires_imatrix("token_embd.weight", HX_TYPE_IQ2_XS));
    ck_assert(!hx_quant_requires_imatrix("blk.0.ffn_up.weight", HX_TYPE_Q2_K));
}
END_TEST

Suite *suite_quant_recipe(void)
{
    Suite *s = suite_create("quant_recipe");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, test_recipes_smollm2, 0, N_RECIPES);
    tcase_add_loop_test(tc, test_recipes_tiny, 0, N_RECIPES);
    tcase_add_loop_test(tc, test_recipes_archs, 0, 4 * N_ARCH_RECIPES);
    tcase_add_test(tc, test_recipes_need_the_expert_count);
    tcase_add_loop_test(tc, test_recipe_options, 0, sizeof variants / sizeof *variants);
    tcase_add_test(tc, test_recipes_differ);
    tcase_add_test(tc, test_recipe_names_and_fallbacks);
    suite_add_tcase(s, tc);
    return s;
}
