/* The CPU team's manners: it stays inside the affinity mask it was given
 * (size and pinning), and an idle runtime sleeps instead of spinning.
 * Each test changes only its own thread's mask, and Check runs it in a
 * child process of its own. */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "runtime/threadpool.h"
#include "runtime/topology.h"
#include "tests/hx_test.h"
#include "tests/small_model.h"

/* Restricts the calling thread to the last CPU of its mask and returns
 * it; the test's own mask is saved in *saved.  The last one, so that a
 * team that ignored the mask (binding member 0 to core 0) shows. */
static int restrict_to_last_cpu(cpu_set_t *saved)
{
    ck_assert_int_eq(sched_getaffinity(0, sizeof *saved, saved), 0);
    int last = -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, saved))
            last = c;
    ck_assert_int_ge(last, 0);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(last, &one);
    ck_assert_int_eq(sched_setaffinity(0, sizeof one, &one), 0);
    return last;
}

START_TEST(team_size_follows_the_affinity_mask)
{
    unsetenv("HX_THREADS");
    cpu_set_t saved;
    restrict_to_last_cpu(&saved);
    hx_runtime *rt = hx_small_runtime(0, NULL);
    hx_device_info d;
    HX_ASSERT_OK(hx_runtime_device_info(rt, 0, &d));
    hx_runtime_close(rt);
    ck_assert_int_eq(sched_setaffinity(0, sizeof saved, &saved), 0);
    /* One allowed CPU is one core: a team sized by the machine would have
     * as many threads as it has cores. */
    ck_assert_int_eq(d.compute_units, 1);
    /* Given back the whole mask, the default grows again. */
    rt = hx_small_runtime(0, NULL);
    HX_ASSERT_OK(hx_runtime_device_info(rt, 0, &d));
    hx_topology_info t;
    HX_ASSERT_OK(hx_runtime_topology(rt, &t));
    hx_runtime_close(rt);
    void *topo;
    hx_topology_info ti;
    HX_ASSERT_OK(hx_topology_load(&topo, &ti));
    int usable = hx_topology_usable_cores(topo, NULL, 0);
    hx_topology_free(topo);
    ck_assert_int_eq(d.compute_units, usable);
    ck_assert_int_le(usable, t.cores);
}
END_TEST

enum { CHUNKS = 64 };

typedef struct {
    _Atomic int cpu[CHUNKS];
} where_ran;

static void note_cpu(void *ctx, int chunk, int nchunks)
{
    (void)nchunks;
    where_ran *w = ctx;
    /* Long enough that the other member takes some chunks. */
    struct timespec ts = {0, 200 * 1000};
    nanosleep(&ts, NULL);
    atomic_store(&w->cpu[chunk], sched_getcpu());
}

START_TEST(pinned_members_stay_inside_the_mask)
{
    cpu_set_t saved;
    int only = restrict_to_last_cpu(&saved);
    void *topo;
    hx_topology_info ti;
    HX_ASSERT_OK(hx_topology_load(&topo, &ti));
    ck_assert_int_eq(hx_topology_usable_cores(topo, NULL, 0), 1);
    hx_team *team;
    HX_ASSERT_OK(hx_team_create(2, topo, 1, &team));
    HX_ASSERT_OK(hx_team_pin_self(team, 0));
    cpu_set_t now;
    ck_assert_int_eq(sched_getaffinity(0, sizeof now, &now), 0);
    where_ran w;
    for (int i = 0; i < CHUNKS; i++)
        atomic_init(&w.cpu[i], -1);
    hx_team_run(team, note_cpu, &w, CHUNKS);
    hx_team_destroy(team);
    hx_topology_free(topo);
    ck_assert_int_eq(sched_setaffinity(0, sizeof saved, &saved), 0);
    ck_assert_int_eq(CPU_COUNT(&now), 1);
    ck_assert_msg(CPU_ISSET(only, &now), "the caller was pinned outside its mask (CPU %d alone)", only);
    for (int i = 0; i < CHUNKS; i++)
        ck_assert_int_eq(atomic_load(&w.cpu[i]), only);
}
END_TEST

static double process_cpu_ms(void)
{
    struct rusage u;
    ck_assert_int_eq(getrusage(RUSAGE_SELF, &u), 0);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 +
           (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

/* Not a speed check: a team member spinning while the runtime has no work
 * burns a whole core (1000 ms per second; still a few hundred on a loaded
 * machine), one that sleeps a few microseconds.  The bound sits far from
 * both. */
START_TEST(idle_runtime_sleeps)
{
    hx_small_model sm;
    hx_small_model_write(&sm, "q8_0");
    hx_runtime *rt = hx_small_runtime(2, NULL);
    hx_model *m;
    HX_ASSERT_OK(hx_model_load(rt, sm.path, NULL, &m));
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(m, &s));
    int32_t prompt[] = {1, 72, 101, 108, 108, 111};
    HX_ASSERT_OK(hx_session_eval(s, prompt, sizeof prompt / sizeof *prompt, 0));
    for (int32_t i = 0; i < 16; i++)
        HX_ASSERT_OK(hx_session_eval(s, &(int32_t){32 + i}, 1, 0));
    /* A few milliseconds for the spin-then-sleep to reach its sleep. */
    struct timespec settle = {0, 20 * 1000 * 1000}, second = {1, 0};
    nanosleep(&settle, NULL);
    double before = process_cpu_ms();
    nanosleep(&second, NULL);
    double idle_ms = process_cpu_ms() - before;
    HX_ASSERT_OK(hx_session_close(s));
    HX_ASSERT_OK(hx_model_free(m));
    hx_runtime_close(rt);
    hx_small_model_remove(&sm);
    ck_assert_msg(idle_ms < 50, "an idle runtime used %.1f ms of CPU in one second", idle_ms);
}
END_TEST

Suite *suite_threads(void)
{
    Suite *s = suite_create("threads");
    TCase *tc = tcase_create("team");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, team_size_follows_the_affinity_mask);
    tcase_add_test(tc, pinned_members_stay_inside_the_mask);
    tcase_add_test(tc, idle_runtime_sleeps);
    suite_add_tcase(s, tc);
    return s;
}
