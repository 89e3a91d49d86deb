/* The architecture table (model/arch.h): every entry's synthetic model
 * loads with the weights its entry names, evaluates, and serves requests
 * in the serving engine; a file of an architecture the table lacks is
 * refused with the ones it has.  A new entry is covered here without a
 * line of test. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "model/model.h"
#include "quantize/synthetic.h"
#include "tests/hx_test.h"
#include "tests/small_model.h"

static char tmpdir[64];

START_TEST(every_entry_loads_and_evaluates)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/hx-arch-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    hx_runtime *rt = hx_small_runtime(2, NULL);
    const hx_arch *a;
    size_t n = 0;
    for (; (a = hx_arch_at(n)); n++) {
        char path[128];
        snprintf(path, sizeof path, "%s/%s.gguf", tmpdir, a->name);
        const hx_synthetic_config c = {a->name, 128, 2, 4, 2, 256, 256, a->name, 0};
        HX_ASSERT_OK(hx_synthetic_write(path, &c, "f32", 11));
        hx_model *m = NULL;
        HX_ASSERT_OK(hx_model_load(rt, path, NULL, &m));
        ck_assert_ptr_eq(m->arch, a);
        ck_assert_str_eq(m->info.arch, a->name);
        /* What the entry requires is there; what it never has is not. */
        for (int i = 0; i < HX_LAYER_SLOTS; i++)
            for (uint32_t l = 0; l < m->info.n_layer; l++)
                ck_assert_msg((m->layers[l].w[i].buf != NULL) ==
                                  (hx_arch_presence(a, (hx_layer_slot)i, m->hp.n_expert > 0) == HX_TENSOR_REQUIRED),
                              "%s: blk.%u slot %d", a->name, l, i);
        ck_assert_float_eq(m->hp.rope_base, a->typical_rope_base);
        ck_assert_float_eq(m->hp.eps, a->typical_norm_eps);
        hx_session *s = NULL;
        const int32_t ids[] = {256, 72, 101, 108};
        HX_ASSERT_OK(hx_session_open(m, &s));
        HX_ASSERT_OK(hx_session_eval(s, ids, 4, 0));
        const float *lg = hx_session_logits(s, -1);
        ck_assert_ptr_nonnull(lg);
        float lo = lg[0], hi = lg[0];
        for (uint32_t v = 0; v < m->info.n_vocab; v++) {
            ck_assert_msg(isfinite(lg[v]), "%s: logit %u is %g", a->name, v, (double)lg[v]);
            lo = fminf(lo, lg[v]);
            hi = fmaxf(hi, lg[v]);
        }
        ck_assert_msg(hi > lo, "%s: all logits are %g", a->name, (double)lo);
        HX_ASSERT_OK(hx_session_close(s));
        /* The serving engine runs it: two greedy requests, batched
         * together, both complete and generate as many tokens. */
        hx_engine *e = NULL;
        HX_ASSERT_OK(hx_engine_create(m, NULL, &e));
        const int32_t prompt[] = {256, 72, 101, 108, 108, 111};
        hx_request r = hx_request_default();
        r.tokens = prompt;
        r.n_tokens = 6;
        r.max_tokens = 5;
        r.sampling.temperature = 0;
        uint64_t id[2];
        hx_request_result res[2];
        for (int k = 0; k < 2; k++)
            HX_ASSERT_OK(hx_engine_submit(e, &r, &id[k]));
        for (int k = 0; k < 2; k++) {
            HX_ASSERT_OK(hx_engine_wait(e, id[k], -1, &res[k]));
            ck_assert_msg(res[k].status == HX_OK, "%s: engine: %s", a->name, res[k].error);
            ck_assert_uint_eq(res[k].stats.prompt_tokens, 6);
        }
        ck_assert_uint_eq(res[0].stats.generated_tokens, res[1].stats.generated_tokens);
        ck_assert_uint_ge(res[0].stats.generated_tokens, 1);
        HX_ASSERT_OK(hx_engine_destroy(e));
        HX_ASSERT_OK(hx_model_free(m));
        unlink(path);
    }
    ck_assert_uint_ge(n, 3);
    HX_ASSERT_OK(hx_runtime_close(rt));
    rmdir(tmpdir);
}
END_TEST

START_TEST(unknown_architecture_is_refused_with_the_known_ones)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/hx-arch-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    char path[128];
    snprintf(path, sizeof path, "%s/gpt2.gguf", tmpdir);
    hx_gguf_writer *w = NULL;
    HX_ASSERT_OK(hx_gguf_writer_create(&w));
    HX_ASSERT_OK(hx_gguf_writer_set_str(w, "general.architecture", "gpt2"));
    HX_ASSERT_OK(hx_gguf_writer_write(w, path));
    hx_gguf_writer_free(w);
    hx_runtime *rt = hx_small_runtime(1, NULL);
    hx_model *m = (hx_model *)&m;
    ck_assert_int_eq(hx_model_load(rt, path, NULL, &m), HX_ERR_UNSUPPORTED);
    ck_assert_ptr_null(m);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "'gpt2'"));
    const hx_arch *a;
    for (size_t i = 0; (a = hx_arch_at(i)); i++)
        ck_assert_msg(strstr(hx_last_error(), a->name), "'%s' does not name %s", hx_last_error(), a->name);
    /* The public list is the table's, and says when it does not fit. */
    char names[256];
    HX_ASSERT_OK(hx_model_architectures(names, sizeof names));
    for (size_t i = 0; (a = hx_arch_at(i)); i++)
        ck_assert_msg(strstr(names, a->name), "'%s' lacks %s", names, a->name);
    ck_assert_int_eq(hx_model_architectures(names, 8), HX_ERR_RANGE);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "bytes needed"));
    ck_assert_int_eq(hx_model_architectures(NULL, 8), HX_ERR_INVALID_ARG);
    /* The synthetic writer refuses it the same way. */
    const hx_synthetic_config c = {"gpt2", 128, 1, 4, 2, 256, 256, "gpt2", 0};
    ck_assert_int_eq(hx_synthetic_write(path, &c, "f32", 1), HX_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "gpt2"));
    HX_ASSERT_OK(hx_runtime_close(rt));
    unlink(path);
    rmdir(tmpdir);
}
END_TEST

Suite *suite_arch(void)
{
    Suite *s = suite_create("arch");
    TCase *t = tcase_create("table");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, every_entry_loads_and_evaluates);
    tcase_add_test(t, unknown_architecture_is_refused_with_the_known_ones);
    suite_add_tcase(s, t);
    return s;
}
