/* Misuse of handles is detected, never undefined (hetero.h, "Handles"):
 * a handle used after its close, closed twice, or closed while others
 * depend on it gets HX_ERR_STATE and a message naming what is wrong, and
 * everything still open stays usable.  Each case prints its status and
 * message; under `make asan` none may read freed memory.  Also: a call
 * that succeeds leaves hx_last_error() empty. */
#include <stdio.h>
#include <string.h>

#include "tests/hx_test.h"
#include "tests/small_model.h"

/* Asserts `call` returns `want` with a message holding `needle`, and shows
 * both. */
#define EXPECT_REFUSED(call, want, needle)                                                            \
    do {                                                                                            \
        hx_status got_ = (call);                                                                    \
        printf("  %-58s %-18s %s\n", #call, hx_status_str(got_), hx_last_error());                  \
        ck_assert_msg(got_ == (want), "%s -> %s, expected %s: %s", #call, hx_status_str(got_),      \
                      hx_status_str(want), hx_last_error());                                        \
        ck_assert_msg(strstr(hx_last_error(), needle), "%s: '%s' lacks '%s'", #call, hx_last_error(), \
                      needle);                                                                      \
    } while (0)

static hx_small_model sm;
static hx_runtime *rt;
static hx_model *m;

static void setup(void)
{
    hx_small_model_write(&sm, "f32");
    rt = hx_small_runtime(1, NULL);
    HX_ASSERT_OK(hx_model_load(rt, sm.path, NULL, &m));
}

static void teardown(void) { hx_small_model_remove(&sm); }

/* How every case ends: the model freed, then the runtime closed. */
static void close_all(void)
{
    HX_ASSERT_OK(hx_model_free(m));
    HX_ASSERT_OK(hx_runtime_close(rt));
}

static const int32_t prompt[] = {256, 72, 101, 108, 108, 111};
enum { N_PROMPT = sizeof prompt / sizeof prompt[0] };

/* The session works: an evaluation gives logits. */
static void session_works(hx_session *s)
{
    HX_ASSERT_OK(hx_session_eval(s, prompt, N_PROMPT, 0));
    ck_assert_ptr_nonnull(hx_session_logits(s, -1));
}

START_TEST(a_session_closed_twice_is_refused)
{
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(m, &s));
    session_works(s);
    HX_ASSERT_OK(hx_session_close(s));
    EXPECT_REFUSED(hx_session_close(s), HX_ERR_STATE, "not an open session");
    EXPECT_REFUSED(hx_session_eval(s, prompt, N_PROMPT, 0), HX_ERR_STATE, "hx_session_eval");
    EXPECT_REFUSED(hx_session_generate(s, prompt, N_PROMPT, 4, NULL, NULL, NULL, NULL), HX_ERR_STATE,
                   "hx_session_generate");
    ck_assert_ptr_null(hx_session_logits(s, -1));
    ck_assert_uint_eq(hx_session_position(s), 0);
    hx_session *entries[1] = {s};
    hx_batch b = {1, prompt, entries, NULL};
    EXPECT_REFUSED(hx_batch_eval(m, &b), HX_ERR_STATE, "entry 0");
    /* The model and the runtime go on. */
    HX_ASSERT_OK(hx_session_open(m, &s));
    session_works(s);
    HX_ASSERT_OK(hx_session_close(s));
    HX_ASSERT_OK(hx_session_close(NULL));
    close_all();
}
END_TEST

START_TEST(a_model_with_open_sessions_is_not_freed)
{
    hx_session *s1, *s2;
    HX_ASSERT_OK(hx_session_open(m, &s1));
    HX_ASSERT_OK(hx_session_open(m, &s2));
    EXPECT_REFUSED(hx_model_free(m), HX_ERR_STATE, "2 sessions of model 'hetero-synthetic-small-test-f32' are still open");
    /* Refused means untouched: both sessions and the model still work. */
    session_works(s1);
    HX_ASSERT_OK(hx_session_close(s1));
    EXPECT_REFUSED(hx_model_free(m), HX_ERR_STATE, "1 session of model 'hetero-synthetic-small-test-f32' is still open");
    session_works(s2);
    HX_ASSERT_OK(hx_session_close(s2));
    HX_ASSERT_OK(hx_model_free(m));
    /* The model is gone: everything that names it is refused. */
    EXPECT_REFUSED(hx_model_free(m), HX_ERR_STATE, "not an open model");
    EXPECT_REFUSED(hx_session_open(m, &s1), HX_ERR_STATE, "hx_session_open");
    ck_assert_ptr_null(s1);
    hx_model_info info;
    EXPECT_REFUSED(hx_model_info_get(m, &info), HX_ERR_STATE, "hx_model_info_get");
    hx_model_stats ms;
    EXPECT_REFUSED(hx_model_stats_get(m, &ms), HX_ERR_STATE, "hx_model_stats_get");
    size_t n;
    int32_t ids[8];
    EXPECT_REFUSED(hx_model_tokenize(m, "hi", 2, 0, 0, ids, 8, &n), HX_ERR_STATE, "hx_model_tokenize");
    ck_assert_uint_eq(hx_model_plan_size(m), 0);
    HX_ASSERT_OK(hx_runtime_close(rt));
}
END_TEST

START_TEST(a_runtime_with_open_models_or_buffers_is_not_closed)
{
    EXPECT_REFUSED(hx_runtime_close(rt), HX_ERR_STATE, "1 model is still loaded ('hetero-synthetic-small-test-f32')");
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(m, &s));
    session_works(s);
    HX_ASSERT_OK(hx_session_close(s));
    HX_ASSERT_OK(hx_model_free(m));
    hx_buffer *b;
    HX_ASSERT_OK(hx_buffer_create(rt, 256, &b));
    EXPECT_REFUSED(hx_runtime_close(rt), HX_ERR_STATE, "1 buffer is not destroyed");
    hx_buffer_destroy(b);
    HX_ASSERT_OK(hx_runtime_close(rt));
    /* The runtime is gone. */
    EXPECT_REFUSED(hx_runtime_close(rt), HX_ERR_STATE, "not an open runtime");
    EXPECT_REFUSED(hx_model_load(rt, sm.path, NULL, &m), HX_ERR_STATE, "hx_model_load");
    ck_assert_ptr_null(m);
    EXPECT_REFUSED(hx_buffer_create(rt, 256, &b), HX_ERR_STATE, "hx_buffer_create");
    EXPECT_REFUSED(hx_runtime_wait_all(rt), HX_ERR_STATE, "hx_runtime_wait_all");
    hx_task_desc d = {.codelet = hx_codelet_builtin("vector_add"), .device = -1};
    EXPECT_REFUSED(hx_task_submit(rt, &d, NULL), HX_ERR_STATE, "hx_task_submit");
    ck_assert_int_eq(hx_runtime_device_count(rt), 0);
    hx_runtime_stats st;
    hx_runtime_stats_get(rt, &st);
    ck_assert_uint_eq(st.tasks_submitted, 0);
}
END_TEST

START_TEST(null_handles_are_named)
{
    hx_device_stats ds;
    EXPECT_REFUSED(hx_device_stats_get(rt, 0, NULL), HX_ERR_INVALID_ARG, "NULL output");
    EXPECT_REFUSED(hx_device_stats_get(rt, 99, &ds), HX_ERR_RANGE, "no device 99");
    EXPECT_REFUSED(hx_device_stats_get(NULL, 0, &ds), HX_ERR_INVALID_ARG, "NULL runtime");
    EXPECT_REFUSED(hx_session_generate(NULL, prompt, N_PROMPT, 4, NULL, NULL, NULL, NULL), HX_ERR_INVALID_ARG,
                   "hx_session_generate: NULL session");
    EXPECT_REFUSED(hx_session_eval(NULL, prompt, N_PROMPT, 0), HX_ERR_INVALID_ARG, "NULL session");
    EXPECT_REFUSED(hx_session_open(NULL, NULL), HX_ERR_INVALID_ARG, "NULL model");
    HX_ASSERT_OK(hx_model_free(NULL));
    HX_ASSERT_OK(hx_runtime_close(NULL));
    close_all();
}
END_TEST

/* The lookups a load tolerates (optional GGUF keys) and a failure before
 * the call leave nothing behind a success. */
START_TEST(a_success_leaves_no_error)
{
    hx_model *m2;
    ck_assert_int_eq(hx_session_eval(NULL, prompt, 1, 0), HX_ERR_INVALID_ARG);
    ck_assert_str_ne(hx_last_error(), "");
    HX_ASSERT_OK(hx_model_load(rt, sm.path, NULL, &m2));
    ck_assert_msg(!*hx_last_error(), "after a successful load: '%s'", hx_last_error());
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(m2, &s));
    hx_sampling greedy = hx_sampling_default();
    greedy.temperature = 0;
    ck_assert_int_eq(hx_model_free(m2), HX_ERR_STATE);
    HX_ASSERT_OK(hx_session_generate(s, prompt, N_PROMPT, 4, &greedy, NULL, NULL, NULL));
    ck_assert_msg(!*hx_last_error(), "after a successful generation: '%s'", hx_last_error());
    HX_ASSERT_OK(hx_session_close(s));
    HX_ASSERT_OK(hx_model_free(m2));
    close_all();
    ck_assert_str_eq(hx_last_error(), "");
}
END_TEST

Suite *suite_misuse(void)
{
    Suite *s = suite_create("misuse");
    TCase *tc = tcase_create("handles");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, a_session_closed_twice_is_refused);
    tcase_add_test(tc, a_model_with_open_sessions_is_not_freed);
    tcase_add_test(tc, a_runtime_with_open_models_or_buffers_is_not_closed);
    tcase_add_test(tc, null_handles_are_named);
    tcase_add_test(tc, a_success_leaves_no_error);
    suite_add_tcase(s, tc);
    return s;
}
