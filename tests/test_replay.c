/* Decode replay (partitioner/replay.c): a decode step submitted from the
 * recording of its shape gives the logits, bit for bit, that a graph built
 * fresh gives, over steps whose positions grow past several KV blocks,
 * sequences joining and leaving a batch, on the CPU and with PoCL as an
 * FPGA, and with that device failing for good in the middle of the run.
 * The model's counters say that replay happened (each test fails if it
 * did not), and a decode step allocates nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/alloc_count.h" /* every allocation of the process, counted */
#include "tests/hx_test.h"

enum { PROMPT = 5, STEPS = 24, KV_BLOCK = 4 };

typedef struct {
    hx_runtime *rt;
    hx_model *m;
    uint32_t n_vocab;
} rig;

static void model_path(char *path, size_t cap)
{
    HX_ASSERT_OK(hx_model_synthetic_cached("tiny", "q8_0", path, cap, NULL));
}

/* A runtime on `devices` (PoCL as the FPGA) under the static policy, whose
 * placement does not depend on timing, and the tiny model with replay on
 * (1) or off (-1).  Small KV blocks make the positions cross several. */
static rig open_rig_blocks(const char *devices, int replay, uint32_t kv_block)
{
    rig r;
    char path[512];
    model_path(path, sizeof path);
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = devices;
    o.fpga_emulation = "pocl";
    o.cpu_threads = 2;
    o.sched = "static";
    o.inject = "";
    o.trace = "";
    o.perfmodel_dir = "off";
    HX_ASSERT_OK(hx_runtime_open(&r.rt, &o));
    hx_model_options mo = hx_model_options_default();
    mo.kv_block = kv_block;
    mo.kv_tokens = 1024;
    mo.n_ctx = 256;
    mo.max_batch = 16;
    mo.graph_replay = replay;
    HX_ASSERT_OK(hx_model_load(r.rt, path, &mo, &r.m));
    hx_model_info in;
    HX_ASSERT_OK(hx_model_info_get(r.m, &in));
    r.n_vocab = in.n_vocab;
    return r;
}

static rig open_rig(const char *devices, int replay) { return open_rig_blocks(devices, replay, KV_BLOCK); }

static void close_rig(rig *r)
{
    HX_ASSERT_OK(hx_model_free(r->m));
    hx_runtime_close(r->rt);
}

static hx_model_stats stats_of(const rig *r)
{
    hx_model_stats st;
    HX_ASSERT_OK(hx_model_stats_get(r->m, &st));
    return st;
}

static int32_t token_at(int i) { return (int32_t)((i * 37 + 11) % 200 + 1); }

/* Called before each decode step (the failure injection's hook). */
typedef void (*step_hook)(rig *r, int step);

/* A prompt, then STEPS decode steps of one session; the last logits of each
 * evaluation, [1 + STEPS][n_vocab]. */
static float *decode(rig *r, step_hook hook)
{
    const size_t V = r->n_vocab;
    float *out = malloc(sizeof *out * V * (1 + STEPS));
    ck_assert_ptr_nonnull(out);
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(r->m, &s));
    int32_t p[PROMPT];
    for (int i = 0; i < PROMPT; i++)
        p[i] = token_at(i);
    HX_ASSERT_OK(hx_session_eval(s, p, PROMPT, 0));
    memcpy(out, hx_session_logits(s, -1), sizeof *out * V);
    for (int k = 0; k < STEPS; k++) {
        if (hook)
            hook(r, k);
        int32_t t = token_at(PROMPT + k);
        HX_ASSERT_OK(hx_session_eval(s, &t, 1, 0));
        memcpy(out + V * (1 + (size_t)k), hx_session_logits(s, -1), sizeof *out * V);
    }
    hx_session_close(s);
    return out;
}

static void assert_same(const float *got, const float *want, size_t rows, size_t V, const char *what)
{
    for (size_t i = 0; i < rows; i++)
        for (size_t v = 0; v < V; v++)
            ck_assert_msg(!memcmp(&got[i * V + v], &want[i * V + v], sizeof *got),
                          "%s: evaluation %zu, logit %zu: replayed %.9g, fresh %.9g", what, i, v, got[i * V + v],
                          want[i * V + v]);
}

/* Every evaluation was recorded or replayed, most replayed, and each new
 * KV block (a longer block table: another shape) recorded again. */
static uint64_t blocks_of(uint64_t tokens) { return (tokens + KV_BLOCK - 1) / KV_BLOCK; }
/* The shapes of one session's prompt and decode steps: the prompt's, then
 * one per length of the block table the steps reach. */
static uint64_t decode_shapes(void) { return 1 + blocks_of(PROMPT + STEPS) - blocks_of(PROMPT + 1) + 1; }

static void assert_replayed(const rig *r, uint64_t evaluations, uint64_t min_records)
{
    hx_model_stats st = stats_of(r);
    fprintf(stderr, "  %llu evaluations: %llu recorded, %llu replayed\n", (unsigned long long)evaluations,
            (unsigned long long)st.graphs_recorded, (unsigned long long)st.graphs_replayed);
    ck_assert_uint_eq(st.graphs_recorded + st.graphs_replayed, evaluations);
    ck_assert_uint_ge(st.graphs_recorded, min_records);
    ck_assert_uint_ge(st.graphs_replayed, evaluations / 2);
}

static uint64_t launches_of(const rig *r)
{
    hx_runtime_stats st;
    hx_runtime_stats_get(r->rt, &st);
    return st.graph_launches;
}

/* On the CPU alone every recorded evaluation is one graph launch
 * (runtime/task.h); beside another device, none is. */
static void compare_decode(const char *devices)
{
    rig fresh = open_rig(devices, -1), replay = open_rig(devices, 1);
    float *want = decode(&fresh, NULL), *got = decode(&replay, NULL);
    hx_model_stats off = stats_of(&fresh);
    ck_assert_uint_eq(off.graphs_recorded + off.graphs_replayed, 0);
    assert_replayed(&replay, 1 + STEPS, decode_shapes());
    ck_assert_uint_eq(launches_of(&fresh), 0);
    ck_assert_uint_eq(launches_of(&replay), strcmp(devices, "cpu") ? 0 : 1 + STEPS);
    assert_same(got, want, 1 + STEPS, fresh.n_vocab, devices);
    free(want);
    free(got);
    close_rig(&fresh);
    close_rig(&replay);
}

START_TEST(replayed_decode_equals_a_fresh_graph_on_the_cpu) { compare_decode("cpu"); }
END_TEST

START_TEST(replayed_decode_equals_a_fresh_graph_with_pocl) { compare_decode("cpu,fpga"); }
END_TEST

/* The same recordings launched as graphs and submitted task by task
 * (HX_GRAPH_LAUNCH=0): the same bits and the same task counts. */
START_TEST(a_graph_launch_gives_the_bits_and_counts_of_tasks_one_by_one)
{
    setenv("HX_GRAPH_LAUNCH", "0", 1);
    rig apart = open_rig("cpu", 1);
    unsetenv("HX_GRAPH_LAUNCH");
    rig launched = open_rig("cpu", 1);
    hx_runtime_stats_reset(apart.rt);
    hx_runtime_stats_reset(launched.rt);
    float *want = decode(&apart, NULL), *got = decode(&launched, NULL);
    assert_replayed(&apart, 1 + STEPS, decode_shapes());
    assert_replayed(&launched, 1 + STEPS, decode_shapes());
    hx_runtime_stats a, l;
    hx_runtime_stats_get(apart.rt, &a);
    hx_runtime_stats_get(launched.rt, &l);
    ck_assert_uint_eq(a.graph_launches, 0);
    ck_assert_uint_eq(l.graph_launches, 1 + STEPS);
    ck_assert_uint_gt(a.tasks_submitted, 1 + STEPS);
    ck_assert_uint_eq(l.tasks_submitted, a.tasks_submitted);
    ck_assert_uint_eq(l.tasks_done, a.tasks_done);
    hx_device_stats da, dl;
    HX_ASSERT_OK(hx_device_stats_get(apart.rt, 0, &da));
    HX_ASSERT_OK(hx_device_stats_get(launched.rt, 0, &dl));
    ck_assert_uint_eq(dl.tasks, da.tasks);
    assert_same(got, want, 1 + STEPS, apart.n_vocab, "graph launch");
    free(want);
    free(got);
    close_rig(&apart);
    close_rig(&launched);
}
END_TEST

/* The FPGA fails every task from step FAIL_AT on: each is retried on the
 * CPU, the device leaves service after HX_RETIRE_AFTER failures (within
 * that step: its kv_store and attention tasks of every layer), and the
 * recording made while it served is dropped for a fresh one at the next
 * step, which has the same block table as the failing one. */
enum { FAIL_AT = 8 };

static void fail_fpga(rig *r, int step)
{
    if (step != FAIL_AT)
        return;
    for (int d = 0; d < hx_runtime_device_count(r->rt); d++) {
        hx_device_info di;
        HX_ASSERT_OK(hx_runtime_device_info(r->rt, d, &di));
        if (di.kind == HX_KIND_FPGA) {
            hx_injection inj = {.slow = 1, .fail = 1};
            HX_ASSERT_OK(hx_device_inject(r->rt, d, &inj));
            return;
        }
    }
    ck_abort_msg("no FPGA device (PoCL)");
}

START_TEST(a_device_failing_mid_run_is_replayed_around)
{
    rig fresh = open_rig("cpu,fpga", -1), replay = open_rig("cpu,fpga", 1);
    float *want = decode(&fresh, fail_fpga);
    hx_model_stats before = stats_of(&replay);
    float *got = decode(&replay, fail_fpga);
    hx_runtime_stats rs;
    hx_runtime_stats_get(replay.rt, &rs);
    ck_assert_uint_eq(rs.devices_retired, 1);
    ck_assert_uint_eq(rs.tasks_failed, 0);
    ck_assert_uint_ge(rs.retries, HX_RETIRE_AFTER);
    /* Besides the block table's growth, one more recording: the devices in
     * service changed. */
    ck_assert_uint_eq(blocks_of(PROMPT + FAIL_AT + 1), blocks_of(PROMPT + FAIL_AT + 2));
    assert_replayed(&replay, 1 + STEPS, decode_shapes() + 1);
    ck_assert_uint_eq(before.graphs_recorded, 0);
    assert_same(got, want, 1 + STEPS, fresh.n_vocab, "cpu,fpga with the fpga failing");
    free(want);
    free(got);
    close_rig(&fresh);
    close_rig(&replay);
}
END_TEST

/* Three sequences decode together; the second leaves for three steps and
 * comes back.  Each change of the batch is a new shape, recorded again;
 * each sequence's logits are those of a fresh graph. */
enum { SEQS = 3, BATCH_STEPS = 9 };

static void batch_steps(rig *r, float *out)
{
    const size_t V = r->n_vocab;
    hx_session *s[SEQS];
    for (int k = 0; k < SEQS; k++) {
        HX_ASSERT_OK(hx_session_open(r->m, &s[k]));
        int32_t p[PROMPT + SEQS];
        for (int i = 0; i < PROMPT + k; i++)
            p[i] = token_at(10 * k + i);
        HX_ASSERT_OK(hx_session_eval(s[k], p, (size_t)(PROMPT + k), 0));
    }
    for (int step = 0; step < BATCH_STEPS; step++) {
        const int second_away = step >= 3 && step < 6;
        hx_session *in[SEQS];
        int32_t tok[SEQS];
        size_t n = 0;
        for (int k = 0; k < SEQS; k++)
            if (!(k == 1 && second_away)) {
                in[n] = s[k];
                tok[n++] = token_at(step * SEQS + k);
            }
        hx_batch b = {.n = n, .tokens = tok, .sessions = in};
        HX_ASSERT_OK(hx_batch_eval(r->m, &b));
        for (int k = 0; k < SEQS; k++) {
            float *row = out + V * ((size_t)step * SEQS + (size_t)k);
            if (k == 1 && second_away)
                memset(row, 0, sizeof *row * V);
            else
                memcpy(row, hx_session_logits(s[k], -1), sizeof *row * V);
        }
    }
    for (int k = 0; k < SEQS; k++)
        hx_session_close(s[k]);
}

START_TEST(sequences_joining_and_leaving_a_batch_are_recorded_again)
{
    rig fresh = open_rig("cpu", -1), replay = open_rig("cpu", 1);
    const size_t V = fresh.n_vocab, rows = (size_t)BATCH_STEPS * SEQS;
    float *want = calloc(rows * V, sizeof *want), *got = calloc(rows * V, sizeof *got);
    ck_assert_ptr_nonnull(want);
    ck_assert_ptr_nonnull(got);
    batch_steps(&fresh, want);
    batch_steps(&replay, got);
    assert_same(got, want, rows, V, "batch of sequences joining and leaving");
    hx_model_stats st = stats_of(&replay);
    fprintf(stderr, "  batch: %llu recorded, %llu replayed\n", (unsigned long long)st.graphs_recorded,
            (unsigned long long)st.graphs_replayed);
    /* The prompts (three shapes), then three, two and three sequences. */
    ck_assert_uint_eq(st.graphs_recorded + st.graphs_replayed, SEQS + BATCH_STEPS);
    ck_assert_uint_ge(st.graphs_recorded, SEQS + 3);
    ck_assert_uint_ge(st.graphs_replayed, 3);
    free(want);
    free(got);
    close_rig(&fresh);
    close_rig(&replay);
}
END_TEST

/* A serving engine's steps change shape all the time: here one session's
 * decode step (one token), a batch of two sessions' decode steps, and one
 * session taking two tokens at once (a prefill chunk), in turn.  The KV
 * blocks are large enough that no block table grows, so after two rounds
 * (the first records each shape; a reallocated meta or logits buffer may
 * drop them once) every step replays the recording of its shape.  A cache
 * of one recording (HX_REPLAY_SHAPES=1) records every step instead. */
enum { ROUNDS = 6, WARM_ROUNDS = 2, FAIL_ROUND = 3 };

typedef void (*round_hook)(rig *r, int round);

static void fail_fpga_at_round(rig *r, int round) { fail_fpga(r, round == FAIL_ROUND ? FAIL_AT : -1); }

/* Runs ROUNDS rounds of the first `shapes` (2 or 3) shapes; the last
 * logits of each step, [ROUNDS * shapes][2][n_vocab] (zero where a
 * session did not take part), and the counters after the warm rounds. */
static void alternate(rig *r, int shapes, round_hook hook, float *out, hx_model_stats *warm)
{
    const size_t V = r->n_vocab;
    hx_session *s[2];
    for (int k = 0; k < 2; k++) {
        HX_ASSERT_OK(hx_session_open(r->m, &s[k]));
        int32_t p[PROMPT];
        for (int i = 0; i < PROMPT; i++)
            p[i] = token_at(7 * k + i);
        HX_ASSERT_OK(hx_session_eval(s[k], p, PROMPT, 0));
    }
    for (int round = 0; round < ROUNDS; round++) {
        if (round == WARM_ROUNDS)
            *warm = stats_of(r);
        if (hook)
            hook(r, round);
        for (int shape = 0; shape < shapes; shape++) {
            const int step = round * shapes + shape;
            int32_t t[2] = {token_at(2 * step), token_at(2 * step + 1)};
            if (shape == 0) {
                HX_ASSERT_OK(hx_session_eval(s[0], t, 1, 0));
            } else if (shape == 1) {
                hx_batch b = {.n = 2, .tokens = t, .sessions = s};
                HX_ASSERT_OK(hx_batch_eval(r->m, &b));
            } else {
                HX_ASSERT_OK(hx_session_eval(s[1], t, 2, 0));
            }
            for (int k = 0; k < 2; k++) {
                float *row = out + V * ((size_t)step * 2 + (size_t)k);
                if ((shape == 0 && k == 1) || (shape == 2 && k == 0))
                    memset(row, 0, sizeof *row * V);
                else
                    memcpy(row, hx_session_logits(s[k], -1), sizeof *row * V);
            }
        }
    }
    for (int k = 0; k < 2; k++)
        hx_session_close(s[k]);
}

static void compare_alternating(const char *devices, int shapes, round_hook hook)
{
    rig fresh = open_rig_blocks(devices, -1, 64), replay = open_rig_blocks(devices, 1, 64);
    const size_t V = fresh.n_vocab, rows = (size_t)ROUNDS * (size_t)shapes * 2;
    float *want = calloc(rows * V, sizeof *want), *got = calloc(rows * V, sizeof *got);
    ck_assert_ptr_nonnull(want);
    ck_assert_ptr_nonnull(got);
    hx_model_stats warm_fresh, warm;
    alternate(&fresh, shapes, hook, want, &warm_fresh);
    alternate(&replay, shapes, hook, got, &warm);
    assert_same(got, want, rows, V, "alternating shapes");
    hx_model_stats st = stats_of(&replay);
    const uint64_t evaluations = 2 + (uint64_t)ROUNDS * (uint64_t)shapes;
    const uint64_t after_warm = (uint64_t)(ROUNDS - WARM_ROUNDS) * (uint64_t)shapes;
    fprintf(stderr, "  %d shapes, %llu evaluations: %llu recorded, %llu replayed (%llu after the warm rounds)\n",
            shapes, (unsigned long long)evaluations, (unsigned long long)st.graphs_recorded,
            (unsigned long long)st.graphs_replayed, (unsigned long long)(st.graphs_replayed - warm.graphs_replayed));
    ck_assert_uint_eq(warm_fresh.graphs_recorded + warm_fresh.graphs_replayed, 0);
    ck_assert_uint_eq(st.graphs_recorded + st.graphs_replayed, evaluations);
    if (!hook) {
        /* After the warm rounds: every step a replay. */
        ck_assert_uint_eq(st.graphs_recorded, warm.graphs_recorded);
        ck_assert_uint_eq(st.graphs_replayed - warm.graphs_replayed, after_warm);
    } else {
        /* The device leaves service in the first step of FAIL_ROUND: every
         * recording is dropped, and each shape recorded once more. */
        hx_runtime_stats rs;
        hx_runtime_stats_get(replay.rt, &rs);
        ck_assert_uint_eq(rs.devices_retired, 1);
        ck_assert_uint_eq(rs.tasks_failed, 0);
        ck_assert_uint_eq(st.graphs_recorded - warm.graphs_recorded, (uint64_t)shapes);
        ck_assert_uint_eq(st.graphs_replayed - warm.graphs_replayed, after_warm - (uint64_t)shapes);
    }
    free(want);
    free(got);
    close_rig(&fresh);
    close_rig(&replay);
}

START_TEST(two_alternating_shapes_each_replay) { compare_alternating("cpu", 2, NULL); }
END_TEST

START_TEST(three_alternating_shapes_each_replay) { compare_alternating("cpu", 3, NULL); }
END_TEST

START_TEST(a_retired_device_drops_every_recorded_shape) { compare_alternating("cpu,fpga", 3, fail_fpga_at_round); }
END_TEST

#if HX_ALLOC_COUNTING
static int cmp_ulong(const void *a, const void *b)
{
    unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;
    return (x > y) - (x < y);
}
#endif

/* A decode step allocates nothing: the graph is replayed, the task records
 * come from the runtime's pool and the batch's tables from the model's
 * scratch.  (A step that crosses into a new KV block records its graph
 * again, and the performance model may add a size bucket: the median step
 * is the one checked.) */
START_TEST(a_replayed_decode_step_allocates_nothing)
{
#if HX_ALLOC_COUNTING
    rig r = open_rig("cpu", 1);
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(r.m, &s));
    int32_t p[PROMPT];
    for (int i = 0; i < PROMPT; i++)
        p[i] = token_at(i);
    HX_ASSERT_OK(hx_session_eval(s, p, PROMPT, 0));
    unsigned long per_step[STEPS];
    /* Checked after the loop: a passing assertion of Check's allocates. */
    hx_status st[STEPS];
    for (int k = 0; k < STEPS; k++) {
        int32_t t = token_at(PROMPT + k);
        unsigned long a0 = hx_allocations_count();
        st[k] = hx_session_eval(s, &t, 1, 0);
        per_step[k] = hx_allocations_count() - a0;
    }
    for (int k = 0; k < STEPS; k++)
        HX_ASSERT_OK(st[k]);
    /* The counter counts: a plain allocation moves it. */
    unsigned long a0 = hx_allocations_count();
    void *(*volatile alloc)(size_t) = malloc; /* not one the compiler may leave out */
    void *probe = alloc(16);
    ck_assert_uint_eq(hx_allocations_count() - a0, 1);
    free(probe);
    char list[STEPS * 8] = "";
    for (int k = 0; k < STEPS; k++)
        snprintf(list + strlen(list), sizeof list - strlen(list), " %lu", per_step[k]);
    qsort(per_step, STEPS, sizeof *per_step, cmp_ulong);
    ck_assert_msg(per_step[STEPS / 2] == 0, "allocations per decode step:%s", list);
    hx_session_close(s);
    close_rig(&r);
#else
    fprintf(stderr, "SKIPPED allocation count: under a sanitizer's allocator\n");
#endif
}
END_TEST

Suite *suite_replay(void)
{
    Suite *s = suite_create("replay");
    TCase *tc = tcase_create("bit_for_bit");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, replayed_decode_equals_a_fresh_graph_on_the_cpu);
    tcase_add_test(tc, replayed_decode_equals_a_fresh_graph_with_pocl);
    tcase_add_test(tc, a_graph_launch_gives_the_bits_and_counts_of_tasks_one_by_one);
    tcase_add_test(tc, a_device_failing_mid_run_is_replayed_around);
    tcase_add_test(tc, sequences_joining_and_leaving_a_batch_are_recorded_again);
    tcase_add_test(tc, a_replayed_decode_step_allocates_nothing);
    tcase_add_test(tc, two_alternating_shapes_each_replay);
    tcase_add_test(tc, three_alternating_shapes_each_replay);
    tcase_add_test(tc, a_retired_device_drops_every_recorded_shape);
    suite_add_tcase(s, tc);
    return s;
}
