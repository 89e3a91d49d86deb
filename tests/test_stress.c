/* Stress of the concurrency under every task: the CPU team, the worker,
 * the DAG, several host threads, concurrent model evaluations.  Each test
 * asserts only exact results (every share ran once, every value is the one
 * a sequential replay computes), never a duration: a lost wake-up, an early
 * return or a stale read shows as a wrong number. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "quantize/synthetic.h"
#include "runtime/threadpool.h"
#include "tests/hx_test.h"
#include "tests/small_model.h"

/* ---------------------------------------------------------------------
 * The team alone
 * ------------------------------------------------------------------- */

/* ck_assert records a mark point (a write to Check's pipe) even when it
 * holds: too slow for the hundreds of thousands of checks below. */
#define EXPECT(cond, ...)                \
    do {                                 \
        if (!(cond))                     \
            ck_abort_msg(__VA_ARGS__);   \
    } while (0)

#define TEAM_MAX_CHUNKS 64

typedef struct {
    unsigned run;
    _Atomic unsigned hits[TEAM_MAX_CHUNKS];
    unsigned stamp[TEAM_MAX_CHUNKS];
} team_ctx;

static void pause_us(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

/* The hit is counted last, so a caller that returns before a member
 * finishes its chunk sees a missing hit. */
static void team_chunk(void *p, int chunk, int nchunks)
{
    team_ctx *c = p;
    if (nchunks > 2 && chunk == (int)(c->run % (unsigned)nchunks) && c->run % 256 == 0)
        pause_us(200);
    else
        for (volatile int i = 0; i < (chunk % 3) * 20; i++)
            ;
    c->stamp[chunk] = c->run;
    atomic_fetch_add(&c->hits[chunk], 1);
}

/* The sanitizers slow every run down about tenfold. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define TEAM_RUNS 30000u
#else
#define TEAM_RUNS 200000u
#endif

/* Threads that keep yielding, so that the team's members get preempted at
 * arbitrary points (between counting a chunk and waking the caller, say)
 * far more often than on an idle machine. */
static _Atomic int noise_stop;

static void *noise_main(void *p)
{
    (void)p;
    while (!atomic_load(&noise_stop))
        sched_yield();
    return NULL;
}

static void team_runs_chunks_once(int nthreads, unsigned runs)
{
    hx_team *t;
    HX_ASSERT_OK(hx_team_create(nthreads, NULL, 0, &t));
    pthread_t noise[2];
    atomic_store(&noise_stop, 0);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&noise[i], NULL, noise_main, NULL), 0);
    /* Two contexts used in turn: a member still in the previous run would
     * write into the other one after it was checked and cleared. */
    team_ctx *ctx = calloc(2, sizeof *ctx);
    for (unsigned r = 1; r <= runs; r++) {
        team_ctx *c = &ctx[r % 2];
        /* Mostly one chunk per thread: then the last chunk to finish is
         * often a member's, whose wake-up of the caller can come late, in
         * the next run (the race this was written for, seen only with
         * more threads than cores). */
        int n = r % 8 ? nthreads : 1 + (int)((r / 8) % (unsigned)(4 * nthreads));
        c->run = r;
        hx_team_run(t, team_chunk, c, n);
        for (int k = 0; k < n; k++) {
            unsigned h = atomic_load(&c->hits[k]);
            EXPECT(h == 1, "%d threads, run %u of %d chunks: chunk %d ran %u times by its end",
                          nthreads, r, n, k, h);
            EXPECT(c->stamp[k] == r, "run %u: chunk %d stamped by run %u", r, k, c->stamp[k]);
        }
        team_ctx *other = &ctx[(r + 1) % 2];
        for (int k = 0; k < TEAM_MAX_CHUNKS; k++)
            EXPECT(atomic_load(&other->hits[k]) == 0, "run %u: chunk %d of an older run ran late", r, k);
        memset(c, 0, sizeof *c);
    }
    atomic_store(&noise_stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(noise[i], NULL);
    hx_team_destroy(t);
    free(ctx);
}

/* 1 thread runs inline; 6 and 8 oversubscribe the cores of most test
 * machines. */
static const int team_threads[] = {1, 2, 3, 4, 6, 8};

START_TEST(team_runs_every_chunk_once_and_waits_for_it)
{
    team_runs_chunks_once(team_threads[_i], team_threads[_i] == 1 ? 1000 : TEAM_RUNS);
}
END_TEST

/* ---------------------------------------------------------------------
 * A codelet of the test's own: each share steps its range of a buffer
 * with an order-dependent recurrence and counts its visits.
 * ------------------------------------------------------------------- */

typedef struct {
    uint32_t n;     /* elements */
    uint32_t step;  /* the task's number in its chain */
    uint32_t slow;  /* share that dawdles (nth = none) */
    uint32_t add;   /* 1: data += step (commutative), else the recurrence */
} step_args;

static uint64_t step_value(uint64_t x, uint32_t step, uint32_t e)
{
    return x * 6364136223846793005ull + (uint64_t)step * 1442695040888963407ull + e;
}

/* Not inlined: gcc 12 inlines it into host_main's chain loop and then
 * reports undefined behaviour in that loop's fourth iteration that is not
 * there (-Waggressive-loop-optimizations). */
__attribute__((noinline)) static void replay(uint64_t *x, uint32_t n, uint32_t step)
{
    for (uint32_t e = 0; e < n; e++)
        x[e] = step_value(x[e], step, e);
}

static void share_range(const hx_cpu_call *c, uint32_t n, uint32_t *lo, uint32_t *hi)
{
    *lo = (uint32_t)((uint64_t)n * (uint64_t)c->ith / (uint64_t)c->nth);
    *hi = (uint32_t)((uint64_t)n * (uint64_t)(c->ith + 1) / (uint64_t)c->nth);
}

static int step_cpu(const hx_cpu_call *c)
{
    const step_args *a = c->args;
    uint64_t *data = c->buffers[0];
    uint32_t *marks = c->buffers[1];
    if (c->sizes[0] < a->n * sizeof *data || c->sizes[1] < a->n * sizeof *marks)
        return HX_ERR_INVALID_ARG;
    if ((uint32_t)c->ith == a->slow)
        pause_us(100 + (a->step % 4) * 100);
    uint32_t lo, hi;
    share_range(c, a->n, &lo, &hi);
    for (uint32_t e = lo; e < hi; e++) {
        data[e] = a->add ? data[e] + a->step : step_value(data[e], a->step, e);
        marks[e]++;
    }
    return 0;
}

static const hx_codelet step_codelet = {.name = "stress_step", .cpu = step_cpu};

/* "stress_fold": out[e] = out[e] * 3 + sum of the inputs' e-th elements
 * (buffers: out RW, then inputs R), an order-dependent reader. */
static int fold_cpu(const hx_cpu_call *c)
{
    const step_args *a = c->args;
    uint64_t *out = c->buffers[0];
    uint32_t lo, hi;
    share_range(c, a->n, &lo, &hi);
    if ((uint32_t)c->ith == a->slow)
        pause_us(150);
    for (uint32_t e = lo; e < hi; e++) {
        uint64_t s = 0;
        for (uint32_t b = 0; b < a->step; b++)
            s += ((const uint64_t *)c->buffers[1 + b])[e];
        out[e] = out[e] * 3 + s;
    }
    return 0;
}

static const hx_codelet fold_codelet = {.name = "stress_fold", .cpu = fold_cpu};

/* "stress_phases": cpu_prepare writes one word per share into the shared
 * scratch (some shares late); cpu reads its neighbour's word.  A phase
 * started before the last prepare share finished reads the previous
 * task's word. */
static size_t phases_scratch(const void *args, const size_t *sizes, int nth)
{
    (void)args;
    (void)sizes;
    return (size_t)nth * sizeof(uint64_t);
}

static int phases_prepare(const hx_cpu_call *c)
{
    const step_args *a = c->args;
    if ((uint32_t)c->ith == a->slow)
        pause_us(200);
    ((uint64_t *)c->scratch)[c->ith] = step_value(a->step, a->step, (uint32_t)c->ith);
    return 0;
}

static int phases_cpu(const hx_cpu_call *c)
{
    uint64_t *out = c->buffers[0];
    int from = (c->ith + 1) % c->nth;
    /* Out holds one word per share of the largest team tested. */
    if ((size_t)c->nth * sizeof *out > c->sizes[0])
        return HX_ERR_INVALID_ARG;
    out[c->ith] = out[c->ith] * 5 + ((const uint64_t *)c->scratch)[from];
    return 0;
}

static const hx_codelet phases_codelet = {
    .name = "stress_phases", .cpu = phases_cpu, .cpu_prepare = phases_prepare, .cpu_scratch = phases_scratch};

static hx_runtime *open_cpu(int threads, const char *sched) { return hx_small_runtime(threads, sched); }

/* The shares the CPU device cuts a task into (devices/cpu.c), as a
 * codelet is told them. */
static int probe_cpu(const hx_cpu_call *c)
{
    if (c->ith == 0)
        *(uint32_t *)c->buffers[0] = (uint32_t)c->nth;
    return 0;
}

static const hx_codelet probe_codelet = {.name = "stress_probe_shares", .cpu = probe_cpu};

static uint32_t team_shares(hx_runtime *rt)
{
    hx_buffer *b;
    uint32_t *v;
    HX_ASSERT_OK(hx_buffer_create(rt, sizeof *v, &b));
    hx_task_desc d = {.codelet = &probe_codelet, .nbuffers = 1, .device = -1};
    d.buffers[0] = b;
    d.modes[0] = HX_W;
    HX_ASSERT_OK(hx_task_submit(rt, &d, NULL));
    HX_ASSERT_OK(hx_runtime_wait_all(rt));
    HX_ASSERT_OK(hx_buffer_acquire(b, HX_R, (void **)&v));
    const uint32_t n = *v;
    hx_buffer_destroy(b);
    hx_runtime_stats_reset(rt); /* the tests count their own tasks */
    ck_assert_uint_ge(n, 1);
    return n;
}

static hx_buffer *zeroed(hx_runtime *rt, size_t bytes)
{
    hx_buffer *b;
    void *p;
    HX_ASSERT_OK(hx_buffer_create(rt, bytes, &b));
    HX_ASSERT_OK(hx_buffer_acquire(b, HX_W, &p));
    memset(p, 0, bytes);
    return b;
}

static void submit_step(hx_runtime *rt, hx_buffer *data, hx_buffer *marks, step_args a, hx_task **out)
{
    hx_task_desc d = {.codelet = &step_codelet, .nbuffers = 2, .device = -1};
    d.buffers[0] = data;
    d.buffers[1] = marks;
    d.modes[0] = d.modes[1] = HX_RW;
    d.args = &a;
    d.args_size = sizeof a;
    HX_ASSERT_OK(hx_task_submit(rt, &d, out));
}

/* Checks data against the host's replay of steps first..last, and that
 * every element was visited once per step. */
static void check_chain(hx_buffer *data, hx_buffer *marks, uint32_t n, uint64_t seed, uint32_t first,
                        uint32_t last, const char *what)
{
    uint64_t *v;
    uint32_t *m;
    HX_ASSERT_OK(hx_buffer_acquire(data, HX_R, (void **)&v));
    HX_ASSERT_OK(hx_buffer_acquire(marks, HX_R, (void **)&m));
    for (uint32_t e = 0; e < n; e++) {
        uint64_t x = seed;
        for (uint32_t s = first; s <= last; s++)
            x = step_value(x, s, e);
        EXPECT(m[e] == last - first + 1, "%s: element %u visited %u times, not %u", what, e, m[e],
                      last - first + 1);
        EXPECT(v[e] == x, "%s: element %u is wrong after steps %u..%u", what, e, first, last);
    }
}

/* ---------------------------------------------------------------------
 * (a) Many tiny tasks: dependent chains and independent fans.
 * ------------------------------------------------------------------- */

static const int team_sizes[] = {1, 2, 3, 8};

START_TEST(tiny_task_chains_are_exact)
{
    const int threads = team_sizes[_i];
    hx_runtime *rt = open_cpu(threads, NULL);
    const uint32_t nth = team_shares(rt);
    /* Fewer elements than shares, as many, and more (uneven ranges). */
    const uint32_t sizes[] = {5, nth, 1031};
    const uint32_t steps = 1200;
    hx_buffer *data[3], *marks[3];
    for (int k = 0; k < 3; k++) {
        data[k] = zeroed(rt, sizes[k] * sizeof(uint64_t));
        marks[k] = zeroed(rt, sizes[k] * sizeof(uint32_t));
    }
    /* Three chains interleaved: each task depends on the previous one of
     * its chain only, so the worker always has a ready task queued. */
    for (uint32_t s = 1; s <= steps; s++)
        for (int k = 0; k < 3; k++) {
            step_args a = {sizes[k], s, s % 7 == 0 ? s % nth : 0xffffffffu, 0};
            submit_step(rt, data[k], marks[k], a, NULL);
        }
    HX_ASSERT_OK(hx_runtime_wait_all(rt));
    for (int k = 0; k < 3; k++) {
        char what[64];
        snprintf(what, sizeof what, "%d threads, chain of %u elements", threads, sizes[k]);
        check_chain(data[k], marks[k], sizes[k], 0, 1, steps, what);
        hx_buffer_destroy(data[k]);
        hx_buffer_destroy(marks[k]);
    }
    hx_runtime_stats st;
    hx_runtime_stats_get(rt, &st);
    ck_assert_uint_eq(st.tasks_done, 3 * steps);
    ck_assert_uint_eq(st.tasks_failed, 0);
    hx_runtime_close(rt);
}
END_TEST

/* Rounds of 15 independent writers, each on its own buffer, then one
 * task reading all 15: the reader must see every writer's result. */
START_TEST(fans_in_and_out_are_exact)
{
    const int threads = team_sizes[_i];
    hx_runtime *rt = open_cpu(threads, NULL);
    const uint32_t nth = team_shares(rt);
    enum { FAN = 15, N = 67, ROUNDS = 120 };
    hx_buffer *in[FAN], *marks[FAN], *out = zeroed(rt, N * sizeof(uint64_t));
    for (int b = 0; b < FAN; b++) {
        in[b] = zeroed(rt, N * sizeof(uint64_t));
        marks[b] = zeroed(rt, N * sizeof(uint32_t));
    }
    uint64_t expect[N] = {0}, cur[FAN][N];
    memset(cur, 0, sizeof cur);
    for (uint32_t r = 1; r <= ROUNDS; r++) {
        for (int b = 0; b < FAN; b++) {
            uint32_t step = r * FAN + (uint32_t)b;
            step_args a = {N, step, (r + (uint32_t)b) % 9 == 0 ? (uint32_t)b % nth : ~0u, 0};
            submit_step(rt, in[b], marks[b], a, NULL);
            for (uint32_t e = 0; e < N; e++)
                cur[b][e] = step_value(cur[b][e], step, e);
        }
        step_args a = {N, FAN, r % 4 == 0 ? 0 : ~0u, 0};
        hx_task_desc d = {.codelet = &fold_codelet, .nbuffers = 1 + FAN, .device = -1, .args = &a,
                          .args_size = sizeof a};
        d.buffers[0] = out;
        d.modes[0] = HX_RW;
        for (int b = 0; b < FAN; b++) {
            d.buffers[1 + b] = in[b];
            d.modes[1 + b] = HX_R;
        }
        HX_ASSERT_OK(hx_task_submit(rt, &d, NULL));
        for (uint32_t e = 0; e < N; e++) {
            uint64_t s = 0;
            for (int b = 0; b < FAN; b++)
                s += cur[b][e];
            expect[e] = expect[e] * 3 + s;
        }
    }
    HX_ASSERT_OK(hx_runtime_wait_all(rt));
    uint64_t *v;
    HX_ASSERT_OK(hx_buffer_acquire(out, HX_R, (void **)&v));
    for (uint32_t e = 0; e < N; e++)
        EXPECT(v[e] == expect[e], "%d threads: folded element %u is wrong", threads, e);
    for (int b = 0; b < FAN; b++) {
        uint32_t *m;
        HX_ASSERT_OK(hx_buffer_acquire(in[b], HX_R, (void **)&v));
        HX_ASSERT_OK(hx_buffer_acquire(marks[b], HX_R, (void **)&m));
        for (uint32_t e = 0; e < N; e++) {
            EXPECT(m[e] == ROUNDS, "%d threads: writer %d visited element %u %u times", threads, b, e, m[e]);
            EXPECT(v[e] == cur[b][e], "%d threads: writer %d left element %u wrong", threads, b, e);
        }
        hx_buffer_destroy(marks[b]);
        hx_buffer_destroy(in[b]);
    }
    hx_buffer_destroy(out);
    hx_runtime_close(rt);
}
END_TEST

/* ---------------------------------------------------------------------
 * (b) Shares of very different lengths, read at once by the next task;
 * and the two phases of a codelet with cpu_prepare.
 * ------------------------------------------------------------------- */

START_TEST(uneven_shares_then_a_reader)
{
    const int threads = team_sizes[_i];
    hx_runtime *rt = open_cpu(threads, NULL);
    const int nth = (int)team_shares(rt);
    enum { N = 97, ROUNDS = 150 };
    hx_buffer *a = zeroed(rt, N * sizeof(uint64_t)), *am = zeroed(rt, N * sizeof(uint32_t));
    hx_buffer *out = zeroed(rt, N * sizeof(uint64_t));
    hx_buffer *ph = zeroed(rt, 32 * sizeof(uint64_t));
    uint64_t xa[N] = {0}, xo[N] = {0}, xp[32] = {0};
    for (uint32_t r = 1; r <= ROUNDS; r++) {
        /* The slow share moves around, the last one included. */
        step_args w = {N, r, r % (uint32_t)nth, 0};
        submit_step(rt, a, am, w, NULL);
        step_args f = {N, 1, ~0u, 0};
        hx_task_desc d = {.codelet = &fold_codelet, .nbuffers = 2, .device = -1, .args = &f,
                          .args_size = sizeof f};
        d.buffers[0] = out;
        d.modes[0] = HX_RW;
        d.buffers[1] = a;
        d.modes[1] = HX_R;
        HX_ASSERT_OK(hx_task_submit(rt, &d, NULL));
        for (uint32_t e = 0; e < N; e++) {
            xa[e] = step_value(xa[e], r, e);
            xo[e] = xo[e] * 3 + xa[e];
        }

        step_args p = {32, r, (r * 5) % (uint32_t)nth, 0};
        hx_task_desc dp = {.codelet = &phases_codelet, .nbuffers = 1, .device = -1, .args = &p,
                           .args_size = sizeof p};
        dp.buffers[0] = ph;
        dp.modes[0] = HX_RW;
        HX_ASSERT_OK(hx_task_submit(rt, &dp, NULL));
        for (int i = 0; i < nth; i++)
            xp[i] = xp[i] * 5 + step_value(r, r, (uint32_t)((i + 1) % nth));
    }
    HX_ASSERT_OK(hx_runtime_wait_all(rt));
    uint64_t *v;
    HX_ASSERT_OK(hx_buffer_acquire(out, HX_R, (void **)&v));
    for (uint32_t e = 0; e < N; e++)
        EXPECT(v[e] == xo[e], "%d threads: the reader saw a half-written element %u", threads, e);
    HX_ASSERT_OK(hx_buffer_acquire(ph, HX_R, (void **)&v));
    for (int i = 0; i < 32; i++)
        EXPECT(v[i] == (i < nth ? xp[i] : 0), "%d threads: share %d read a stale prepared word", threads, i);
    check_chain(a, am, N, 0, 1, ROUNDS, "uneven writer");
    hx_buffer_destroy(a);
    hx_buffer_destroy(am);
    hx_buffer_destroy(out);
    hx_buffer_destroy(ph);
    hx_runtime_close(rt);
}
END_TEST

/* ---------------------------------------------------------------------
 * (c) Several host threads submitting and waiting on one runtime.
 * ------------------------------------------------------------------- */

enum { HOSTS = 4, HOST_ROUNDS = 60, HOST_CHAIN = 6, HOST_N = 41 };

typedef struct {
    hx_runtime *rt;
    int id;
    hx_buffer *shared, *shared_marks;
    int failures;
    char why[160];
} host_arg;

static void *host_main(void *p)
{
    host_arg *h = p;
    hx_buffer *data, *marks;
    void *q;
    if (hx_buffer_create(h->rt, HOST_N * sizeof(uint64_t), &data) || hx_buffer_create(h->rt, HOST_N * 4, &marks)) {
        h->failures++;
        return NULL;
    }
    hx_buffer_acquire(data, HX_W, &q);
    memset(q, 0, HOST_N * sizeof(uint64_t));
    hx_buffer_acquire(marks, HX_W, &q);
    memset(q, 0, HOST_N * 4);
    uint64_t x[HOST_N] = {0};
    uint32_t step = 0;
    for (int r = 0; r < HOST_ROUNDS && !h->failures; r++) {
        hx_task *last = NULL;
        for (int k = 0; k < HOST_CHAIN; k++) {
            step++;
            step_args a = {HOST_N, step, (step + (uint32_t)h->id) % 11 == 0 ? 1 : ~0u, 0};
            hx_task_desc d = {.codelet = &step_codelet, .nbuffers = 2, .device = -1, .args = &a,
                              .args_size = sizeof a};
            d.buffers[0] = data;
            d.buffers[1] = marks;
            d.modes[0] = d.modes[1] = HX_RW;
            hx_status s = hx_task_submit(h->rt, &d, k == HOST_CHAIN - 1 ? &last : NULL);
            if (s) {
                h->failures++;
                snprintf(h->why, sizeof h->why, "submit: %s", hx_last_error());
            }
            replay(x, HOST_N, step);
        }
        /* Commutative adds into a buffer every host shares. */
        step_args a = {HOST_N, (uint32_t)(h->id + 1), ~0u, 1};
        hx_task_desc d = {.codelet = &step_codelet, .nbuffers = 2, .device = -1, .args = &a,
                          .args_size = sizeof a};
        d.buffers[0] = h->shared;
        d.buffers[1] = h->shared_marks;
        d.modes[0] = d.modes[1] = HX_RW;
        if (hx_task_submit(h->rt, &d, NULL))
            h->failures++;
        if (last && hx_task_wait(last) != HX_OK) {
            h->failures++;
            snprintf(h->why, sizeof h->why, "wait: %s", hx_last_error());
        }
        /* The waited task was the chain's last writer: the host copy is final. */
        uint64_t *v;
        if (hx_buffer_acquire(data, HX_R, (void **)&v) == HX_OK) {
            for (uint32_t e = 0; e < HOST_N; e++)
                if (v[e] != x[e] && !h->failures) {
                    h->failures++;
                    snprintf(h->why, sizeof h->why, "host %d round %d: element %u wrong", h->id, r, e);
                }
        }
    }
    uint32_t *m;
    if (hx_buffer_acquire(marks, HX_R, (void **)&m) == HX_OK) {
        for (uint32_t e = 0; e < HOST_N; e++)
            if (m[e] != step && !h->failures) {
                h->failures++;
                snprintf(h->why, sizeof h->why, "host %d: element %u visited %u times, not %u", h->id, e, m[e], step);
            }
    }
    hx_buffer_destroy(data);
    hx_buffer_destroy(marks);
    return NULL;
}

static const char *host_scheds[] = {"eager", "ws", "dmda"};

/* Reads the counters while the hosts run (the sanitizers' view of them):
 * a task is counted submitted before it can be counted done. */
typedef struct {
    hx_runtime *rt;
    _Atomic int stop;
    int bad;
    uint64_t polls;
} poll_arg;

static void *poll_main(void *p)
{
    poll_arg *a = p;
    uint64_t last = 0;
    while (!atomic_load(&a->stop)) {
        hx_runtime_stats st;
        hx_device_stats ds;
        hx_runtime_stats_get(a->rt, &st);
        uint64_t done = st.tasks_done;
        hx_runtime_stats_get(a->rt, &st);
        if (done > st.tasks_submitted || done < last)
            a->bad++;
        last = done;
        if (hx_device_stats_get(a->rt, 0, &ds) != HX_OK)
            a->bad++;
        a->polls++;
        pause_us(200);
    }
    return NULL;
}

START_TEST(host_threads_submit_and_wait_together)
{
    hx_runtime *rt = open_cpu(3, host_scheds[_i]);
    hx_buffer *shared = zeroed(rt, HOST_N * sizeof(uint64_t)), *smarks = zeroed(rt, HOST_N * 4);
    host_arg h[HOSTS];
    pthread_t th[HOSTS], poller;
    poll_arg pa = {.rt = rt};
    ck_assert_int_eq(pthread_create(&poller, NULL, poll_main, &pa), 0);
    for (int i = 0; i < HOSTS; i++) {
        h[i] = (host_arg){.rt = rt, .id = i, .shared = shared, .shared_marks = smarks};
        ck_assert_int_eq(pthread_create(&th[i], NULL, host_main, &h[i]), 0);
    }
    for (int i = 0; i < HOSTS; i++) {
        pthread_join(th[i], NULL);
        ck_assert_msg(h[i].failures == 0, "%s: %s", host_scheds[_i], h[i].why);
    }
    atomic_store(&pa.stop, 1);
    pthread_join(poller, NULL);
    ck_assert_msg(pa.bad == 0, "%d of %llu reads of the counters were inconsistent", pa.bad,
                  (unsigned long long)pa.polls);
    HX_ASSERT_OK(hx_runtime_wait_all(rt));
    uint64_t *v;
    uint32_t *m;
    HX_ASSERT_OK(hx_buffer_acquire(shared, HX_R, (void **)&v));
    HX_ASSERT_OK(hx_buffer_acquire(smarks, HX_R, (void **)&m));
    for (uint32_t e = 0; e < HOST_N; e++) {
        EXPECT(m[e] == HOSTS * HOST_ROUNDS, "shared element %u visited %u times", e, m[e]);
        EXPECT(v[e] == (uint64_t)HOST_ROUNDS * HOSTS * (HOSTS + 1) / 2, "shared element %u is wrong", e);
    }
    hx_buffer_destroy(smarks);
    hx_buffer_destroy(shared);
    hx_runtime_close(rt);
}
END_TEST

/* ---------------------------------------------------------------------
 * (d) Concurrent model evaluations give the logits of a solo one.
 * ------------------------------------------------------------------- */

/* A small GQA model: a few hundred tasks per token, fast under the
 * sanitizers. */
static const hx_synthetic_config small_gqa = {"stress", 128, 2, 4, 2, 256, 256, "llama", 0};
enum { EVAL_TOKENS = 12, DECODE = 4 };

static char model_dir[64], model_path[128];

static void write_model(void)
{
    snprintf(model_dir, sizeof model_dir, "/tmp/hx-stress-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(model_dir));
    snprintf(model_path, sizeof model_path, "%s/m.gguf", model_dir);
    HX_ASSERT_OK(hx_synthetic_write(model_path, &small_gqa, "f32", 7));
}

static void remove_model(void)
{
    unlink(model_path);
    rmdir(model_dir);
}

typedef struct {
    hx_model *m;
    unsigned seed;
    float *logits; /* (DECODE + 1) rows of the vocabulary */
    int nv;
    hx_status status;
    char why[256];
} eval_arg;

/* A prefill, then single-token decodes, keeping the last logits of each. */
static void *eval_main(void *p)
{
    eval_arg *a = p;
    hx_model_info info;
    hx_model_info_get(a->m, &info);
    a->nv = (int)info.n_vocab;
    a->logits = malloc(sizeof(float) * (size_t)a->nv * (DECODE + 1));
    int32_t ids[EVAL_TOKENS + DECODE];
    /* rand_r: srand/rand share one state between the evaluating threads,
     * which would hand each a different prompt than its solo run's. */
    unsigned state = a->seed;
    ids[0] = 256;
    for (int i = 1; i < EVAL_TOKENS + DECODE; i++)
        ids[i] = rand_r(&state) % 256;
    hx_session *s = NULL;
    a->status = hx_session_open(a->m, &s);
    for (int k = 0; k <= DECODE && a->status == HX_OK; k++) {
        size_t off = k ? (size_t)EVAL_TOKENS + (size_t)k - 1 : 0, n = k ? 1 : EVAL_TOKENS;
        a->status = hx_session_eval(s, ids + off, n, 0);
        const float *l = a->status == HX_OK ? hx_session_logits(s, -1) : NULL;
        if (l)
            memcpy(a->logits + (size_t)k * (size_t)a->nv, l, sizeof(float) * (size_t)a->nv);
        else if (a->status == HX_OK)
            a->status = HX_ERR_STATE;
    }
    if (a->status)
        snprintf(a->why, sizeof a->why, "%s", hx_last_error());
    hx_session_close(s);
    return NULL;
}

static void check_same_logits(const eval_arg *solo, const eval_arg *got, const char *what)
{
    ck_assert_msg(got->status == HX_OK, "%s: %s: %s", what, hx_status_str(got->status), got->why);
    size_t n = (size_t)solo->nv * (DECODE + 1);
    for (size_t i = 0; i < n; i++)
        EXPECT(memcmp(&solo->logits[i], &got->logits[i], sizeof(float)) == 0,
                      "%s: logit %zu of row %zu is %.9g, %.9g alone", what, i % (size_t)solo->nv,
                      i / (size_t)solo->nv, got->logits[i], solo->logits[i]);
}

/* With the same number of threads, a task's shares are cut the same way
 * whatever else runs, so the logits are the solo run's bit for bit. */
START_TEST(concurrent_evaluations_match_solo_ones)
{
    write_model();
    hx_runtime *rt = open_cpu(2, NULL);
    hx_model_options mo = hx_model_options_default();
    mo.kv_tokens = 256;
    hx_model *m1, *m2;
    HX_ASSERT_OK(hx_model_load(rt, model_path, &mo, &m1));
    HX_ASSERT_OK(hx_model_load(rt, model_path, &mo, &m2));

    eval_arg solo[2] = {{.m = m1, .seed = 11}, {.m = m1, .seed = 12}};
    for (int k = 0; k < 2; k++) {
        eval_main(&solo[k]);
        ck_assert_msg(solo[k].status == HX_OK, "solo: %s", solo[k].why);
    }

    /* Two models on one runtime: their tasks interleave on the device. */
    eval_arg two_models[2] = {{.m = m1, .seed = 11}, {.m = m2, .seed = 12}};
    /* Two sessions of one model, from two threads. */
    eval_arg two_sessions[2] = {{.m = m2, .seed = 11}, {.m = m2, .seed = 12}};
    eval_arg *sets[2] = {two_models, two_sessions};
    const char *names[2] = {"two models", "two sessions of one model"};
    for (int rep = 0; rep < 2; rep++)
        for (int set = 0; set < 2; set++) {
            pthread_t th[2];
            for (int k = 0; k < 2; k++)
                ck_assert_int_eq(pthread_create(&th[k], NULL, eval_main, &sets[set][k]), 0);
            for (int k = 0; k < 2; k++)
                pthread_join(th[k], NULL);
            for (int k = 0; k < 2; k++) {
                check_same_logits(&solo[k], &sets[set][k], names[set]);
                free(sets[set][k].logits);
                sets[set][k].logits = NULL;
            }
        }
    for (int k = 0; k < 2; k++)
        free(solo[k].logits);
    hx_model_free(m1);
    hx_model_free(m2);
    hx_runtime_close(rt);

    /* Two runtimes (two CPU teams on the same cores) at once. */
    hx_runtime *ra = open_cpu(2, NULL), *rb = open_cpu(2, NULL);
    HX_ASSERT_OK(hx_model_load(ra, model_path, &mo, &m1));
    HX_ASSERT_OK(hx_model_load(rb, model_path, &mo, &m2));
    eval_arg alone = {.m = m1, .seed = 13};
    eval_main(&alone);
    ck_assert_msg(alone.status == HX_OK, "solo: %s", alone.why);
    eval_arg pair[2] = {{.m = m1, .seed = 13}, {.m = m2, .seed = 13}};
    pthread_t th[2];
    for (int k = 0; k < 2; k++)
        ck_assert_int_eq(pthread_create(&th[k], NULL, eval_main, &pair[k]), 0);
    for (int k = 0; k < 2; k++)
        pthread_join(th[k], NULL);
    for (int k = 0; k < 2; k++) {
        check_same_logits(&alone, &pair[k], "two runtimes");
        free(pair[k].logits);
    }
    free(alone.logits);
    hx_model_free(m1);
    hx_model_free(m2);
    hx_runtime_close(ra);
    hx_runtime_close(rb);
    remove_model();
}
END_TEST

/* One case per layer, so that CK_RUN_CASE can pick one. */
Suite *suite_stress(void)
{
    Suite *s = suite_create("stress");
    TCase *team = tcase_create("team"), *tasks = tcase_create("tasks"), *hosts = tcase_create("hosts"),
          *models = tcase_create("models");
    TCase *all[] = {team, tasks, hosts, models};
    for (int i = 0; i < 4; i++)
        tcase_set_timeout(all[i], 300);
    /* A team that loses count of its chunks hangs in hx_team_run: fail
     * in a minute rather than five. */
    tcase_set_timeout(team, 60);
    tcase_add_loop_test(team, team_runs_every_chunk_once_and_waits_for_it, 0, 6);
    tcase_add_loop_test(tasks, tiny_task_chains_are_exact, 0, 4);
    tcase_add_loop_test(tasks, fans_in_and_out_are_exact, 0, 4);
    tcase_add_loop_test(tasks, uneven_shares_then_a_reader, 0, 4);
    tcase_add_loop_test(hosts, host_threads_submit_and_wait_together, 0, 3);
    tcase_add_test(models, concurrent_evaluations_match_solo_ones);
    for (int i = 0; i < 4; i++)
        suite_add_tcase(s, all[i]);
    return s;
}
