/* A runtime that serves for weeks holds what its work in flight needs, not
 * its history: after a warm-up, session cycles and hundreds of thousands
 * of tasks leave the heap where it was, no task record alive, and no
 * buffer remembering the tasks that read it.  Memory is asserted, never
 * time: the bytes the allocator has handed out and not taken back (the
 * sanitizer's count under `make asan`, glibc's otherwise), the runtime's
 * task records, the buffers' reader lists. */
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "model/model.h"
#include "runtime/buffer.h"
#include "tests/hx_test.h"
#include "tests/small_model.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HX_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define HX_TEST_ASAN 1
#endif
#ifdef HX_TEST_ASAN
/* The sanitizer's allocator's count (sanitizer/allocator_interface.h,
 * which GCC does not ship; libasan exports it with either compiler). */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

static long heap_in_use(void)
{
#ifdef HX_TEST_ASAN
    return (long)__sanitizer_get_current_allocated_bytes();
#else
    struct mallinfo2 mi = mallinfo2();
    return (long)(mi.uordblks + mi.hblkhd);
#endif
}

static uint64_t tasks_alive(hx_runtime *rt)
{
    hx_runtime_stats st;
    hx_runtime_stats_get(rt, &st);
    return st.tasks_alive;
}

/* Nothing remembers a finished task. */
static void forgotten(const hx_buffer *b, const char *what)
{
    ck_assert_msg(b->nreaders == 0 && !b->last_writer, "%s still lists %d readers%s", what, b->nreaders,
                  b->last_writer ? " and a writer" : "");
}

enum { N_PREDICT = 8 };

typedef struct {
    int32_t tok[N_PREDICT];
    int n;
} generated;

static int keep(void *user, int32_t token, const char *piece)
{
    generated *g = user;
    (void)piece;
    if (token >= 0 && g->n < N_PREDICT)
        g->tok[g->n++] = token;
    return 0;
}

/* A serving process's life, shrunk: one session opened, generating and
 * closed again and again. */
static void cycle(hx_model *m, generated *g)
{
    static const int32_t prompt[] = {256, 84, 104, 101, 32, 99, 97, 116};
    hx_sampling greedy = hx_sampling_default();
    greedy.temperature = 0;
    hx_session *s;
    memset(g, 0, sizeof *g);
    HX_ASSERT_OK(hx_session_open(m, &s));
    HX_ASSERT_OK(hx_session_generate(s, prompt, sizeof prompt / sizeof prompt[0], N_PREDICT, &greedy, keep, g,
                                     NULL));
    HX_ASSERT_OK(hx_session_close(s));
}

START_TEST(session_cycles_keep_memory_flat)
{
    enum { WARMUP = 8, CYCLES = 48 };
    hx_small_model sm;
    hx_small_model_write(&sm, "q8_0");
    hx_runtime *rt = hx_small_runtime(1, NULL);
    hx_model *m;
    HX_ASSERT_OK(hx_model_load(rt, sm.path, NULL, &m));
    generated first, g;
    for (int i = 0; i < WARMUP; i++)
        cycle(m, i ? &g : &first);
    long base = heap_in_use();
    for (int i = 0; i < CYCLES; i++) {
        cycle(m, &g);
        ck_assert_msg(g.n == first.n && !memcmp(g.tok, first.tok, sizeof g.tok),
                      "cycle %d generated other tokens than the first", WARMUP + i);
        ck_assert_uint_eq(tasks_alive(rt), 0);
        hx_model_stats ms;
        HX_ASSERT_OK(hx_model_stats_get(m, &ms));
        ck_assert_uint_eq(ms.kv_blocks_used, 0);
        ck_assert_uint_eq(ms.sessions_open, 0);
    }
    long growth = heap_in_use() - base;
    printf("  %d session cycles after %d of warm-up: heap %+ld bytes, %llu tasks alive\n", CYCLES, WARMUP, growth,
           (unsigned long long)tasks_alive(rt));
    /* Weights are read by every evaluation and written by none; the
     * positions and the KV bookkeeping are written by the host. */
    forgotten(m->tok_embd.buf, "token_embd");
    forgotten(m->layers[0].w[HX_LW_Q].buf, "blk.0.attn_q");
    forgotten(m->act[0].pos, "the positions of a decode step");
    forgotten(m->act[0].meta, "the KV bookkeeping of a decode step");
    /* The lists each kept a task record (~400 bytes) per reader: 48
     * cycles of this model left megabytes. */
    ck_assert_msg(growth < 64 * 1024, "the heap grew by %ld bytes over %d session cycles", growth, CYCLES);
    HX_ASSERT_OK(hx_model_free(m));
    HX_ASSERT_OK(hx_runtime_close(rt));
    hx_small_model_remove(&sm);
}
END_TEST

/* A quarter of a million tasks through one runtime, with the trace and the
 * performance models recording: what it holds after them is what it held
 * after the first thousands. */
START_TEST(task_bookkeeping_is_bounded)
{
    enum { N = 64, PER_ROUND = 500, WARMUP = 10, ROUNDS = 500, OUTS = 8 };
    hx_runtime *rt = hx_small_runtime(1, NULL);
    static float weights[N];
    for (int i = 0; i < N; i++)
        weights[i] = (float)i;
    hx_buffer *w, *out[OUTS];
    HX_ASSERT_OK(hx_buffer_wrap(rt, weights, sizeof weights, 1, &w));
    for (int k = 0; k < OUTS; k++)
        HX_ASSERT_OK(hx_buffer_create(rt, sizeof weights, &out[k]));
    char dir[64], trace[96];
    snprintf(dir, sizeof dir, "/tmp/hx-longrun-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(trace, sizeof trace, "%s/trace.json", dir);
    HX_ASSERT_OK(hx_runtime_trace_start(rt, trace));
    hx_args_vector_add a = {N};
    long base = 0;
    for (int r = 0; r < ROUNDS; r++) {
        if (r == WARMUP)
            base = heap_in_use();
        /* Every other round waits for each task through its handle. */
        hx_task *t[PER_ROUND];
        for (int i = 0; i < PER_ROUND; i++) {
            hx_task_desc d = {.codelet = hx_codelet_builtin("vector_add"), .nbuffers = 3,
                              .buffers = {w, w, out[i % OUTS]}, .modes = {HX_R, HX_R, HX_W},
                              .args = &a, .args_size = sizeof a, .device = -1};
            HX_ASSERT_OK(hx_task_submit(rt, &d, r % 2 ? &t[i] : NULL));
        }
        if (r % 2)
            for (int i = 0; i < PER_ROUND; i++)
                HX_ASSERT_OK(hx_task_wait(t[i]));
        HX_ASSERT_OK(hx_runtime_wait_all(rt));
        /* A host write between rounds. */
        float *p;
        HX_ASSERT_OK(hx_buffer_acquire(out[r % OUTS], HX_W, (void **)&p));
        p[0] = (float)r;
        ck_assert_uint_eq(tasks_alive(rt), 0);
    }
    long growth = heap_in_use() - base;
    printf("  %d tasks after %d of warm-up: heap %+ld bytes, %llu tasks alive\n", (ROUNDS - WARMUP) * PER_ROUND,
           WARMUP * PER_ROUND, growth, (unsigned long long)tasks_alive(rt));
    forgotten(w, "the read-only input");
    for (int k = 0; k < OUTS; k++)
        forgotten(out[k], "an output");
    ck_assert_msg(growth < 64 * 1024, "the heap grew by %ld bytes over %d tasks", growth,
                  (ROUNDS - WARMUP) * PER_ROUND);
    HX_ASSERT_OK(hx_runtime_trace_stop(rt));
    hx_runtime_stats st;
    hx_runtime_stats_get(rt, &st);
    ck_assert_uint_eq(st.tasks_done, (uint64_t)ROUNDS * PER_ROUND);
    hx_buffer_destroy(w);
    for (int k = 0; k < OUTS; k++)
        hx_buffer_destroy(out[k]);
    HX_ASSERT_OK(hx_runtime_close(rt));
    unlink(trace);
    rmdir(dir);
}
END_TEST

Suite *suite_longrun(void)
{
    Suite *s = suite_create("longrun");
    TCase *tc = tcase_create("memory");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, session_cycles_keep_memory_flat);
    tcase_add_test(tc, task_bookkeeping_is_bounded);
    suite_add_tcase(s, tc);
    return s;
}
