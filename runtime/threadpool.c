/* The CPU team.  Every wait (for work, at a barrier, for the end of a
 * task) spins briefly — a decode task lasts tens of microseconds and a
 * sleep/wake round trip costs about as much — and then sleeps on a futex,
 * so that an idle runtime, or one sharing oversubscribed cores with other
 * processes, does not burn the time of the very threads it waits for.
 * While it spins it yields its core every few microseconds: the team's
 * threads are not alone on the cores (the application's thread, the device
 * worker), and a member the OS placed beside one of them otherwise held
 * it off for a time slice (tiny q4_K_M tg64, 2 threads on 2 cores, each
 * run a new process: 1030-2920 t/s, 49-94 % busy, before; 2130-2950, 84-96
 * %, after).
 *
 * A waker makes a system call only when someone said it was going to
 * sleep, and only once per such sleep (the word's low bit, as in Drepper's
 * "Futexes Are Tricky"): a member that was woken but has not run yet —
 * the usual case on a loaded machine — costs the next runs nothing. */
#include <hwloc.h>
#include <immintrin.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "runtime/error.h"
#include "runtime/threadpool.h"
#include "runtime/topology.h"

/* How long a wait spins before it sleeps, in microseconds of the time
 * stamp counter — not in pause instructions, whose latency ranges from a
 * few cycles (older cores) to 140 (Skylake and later): a count tuned on
 * one machine spins 40 times longer or shorter on another.  The budgets
 * are what 20000 and 4000 pauses last on a Zen core (27 ns each). */
#define SPIN_IDLE_US 550    /* between tasks */
#define SPIN_BARRIER_US 110 /* for the last chunks of a run */
#define SPIN_YIELD_US 5     /* a spinner yields its core this often */
#define CLAIM_CLOSED 0xffffffffu /* chunk index above any count */

/* A counter the team waits on: the count in the high 31 bits, bit 0 set
 * while some thread sleeps (or is about to) on the word. */
typedef _Atomic unsigned counter;
#define SLEEPING 1u
#define STEP 2u

static unsigned count_of(unsigned word) { return word >> 1; }

struct hx_team {
    int n;
    hwloc_topology_t topo;
    int pin;
    int *cores, ncores; /* with pin: the cores members may run on, in order */
    uint64_t spin_idle, spin_barrier; /* the budgets in time stamp counter ticks */
    uint64_t spin_yield;              /* how often a spinner yields its core, in ticks */
    pthread_t *threads;

    /* The loop being run.  `claim` packs the run's number (high 32 bits)
     * with the next chunk to hand out, so a member that wakes up late can
     * never take a chunk of a newer run with the older run's function. */
    _Alignas(64) _Atomic uint64_t claim;
    _Atomic(hx_team_fn) fn;
    _Atomic(void *) ctx;
    _Atomic int nchunks;
    /* Each on a line of its own: the count every finished chunk adds to,
     * and the two words idle threads spin on, so that neither a finish
     * nor a claim takes the line a spinner is reading. */
    _Alignas(64) _Atomic int completed;
    _Alignas(64) counter generation; /* bumped per run, wakes members */
    _Alignas(64) counter done;       /* bumped when the last chunk of a run completes */
    _Atomic int stop;
};

typedef struct {
    hx_team *t;
    int ith;
} member_arg;

/* Waits until the count of *c differs from `old`.  Before sleeping the
 * waiter sets the word's SLEEPING bit, and sleeps only on the word it set:
 * a bump in between changes the word, so the futex call returns at once;
 * a bump after it sees the bit and wakes. */
static void wait_change(hx_team *t, counter *c, unsigned old, uint64_t spin_ticks)
{
    uint64_t now = __rdtsc(), yield_at = now + t->spin_yield;
    const uint64_t until = now + spin_ticks;
    do {
        for (int i = 0; i < 16; i++) {
            if (count_of(atomic_load_explicit(c, memory_order_acquire)) != old)
                return;
            _mm_pause();
        }
        /* A thread the spinner shares its core with (the application's,
         * the device worker, another member the OS put there) runs now
         * rather than at the end of the spinner's time slice. */
        if ((now = __rdtsc()) >= yield_at) {
            sched_yield();
            yield_at = now + t->spin_yield;
        }
    } while (now < until);
    for (;;) {
        unsigned w = atomic_load(c);
        if (count_of(w) != old || atomic_load(&t->stop))
            return;
        if (!(w & SLEEPING) && !atomic_compare_exchange_weak(c, &w, w | SLEEPING))
            continue;
        syscall(SYS_futex, (unsigned *)c, FUTEX_WAIT_PRIVATE, w | SLEEPING, NULL, NULL, 0);
    }
}

/* Adds one to the count and clears SLEEPING; wakes everyone only when it
 * was set. */
static void bump(counter *c)
{
    unsigned w = atomic_load(c);
    while (!atomic_compare_exchange_weak(c, &w, (w + STEP) & ~SLEEPING))
        ;
    if (w & SLEEPING)
        syscall(SYS_futex, (unsigned *)c, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

/* Claims and runs chunks of the current run until none is left.  The
 * function and count are read after the claim word and validated by the
 * compare-exchange: it succeeds only if no newer run has started, and a
 * newer run starts only once every chunk of this one is claimed.  That
 * holds because hx_team_run closes the claim word before it publishes the
 * newer run's function and count: a member holding an older word that
 * reads a newer count finds the word changed. */
static void work(hx_team *t)
{
    for (;;) {
        uint64_t c = atomic_load(&t->claim);
        hx_team_fn fn = atomic_load(&t->fn);
        void *ctx = atomic_load(&t->ctx);
        int n = atomic_load(&t->nchunks);
        uint32_t chunk = (uint32_t)(c & 0xffffffffu);
        if (n < 1 || chunk >= (uint32_t)n)
            return;
        if (!atomic_compare_exchange_weak(&t->claim, &c, c + 1))
            continue;
        fn(ctx, (int)chunk, n);
        if (atomic_fetch_add(&t->completed, 1) == n - 1)
            bump(&t->done);
    }
}

int hx_team_size(const hx_team *t) { return t->n; }

hx_status hx_team_pin_self(hx_team *t, int ith)
{
    if (!t->pin || !t->topo || t->ncores <= 0)
        return HX_OK;
    hwloc_bitmap_t set = hx_topology_core_usable_pus(t->topo, t->cores[ith % t->ncores]);
    if (!set)
        return HX_OK;
    hwloc_bitmap_singlify(set);
    /* Binding can be refused (containers, cpusets): run unpinned then. */
    (void)hwloc_set_cpubind(t->topo, set, HWLOC_CPUBIND_THREAD);
    hwloc_bitmap_free(set);
    return HX_OK;
}

static void *member_main(void *p)
{
    member_arg a = *(member_arg *)p;
    free(p);
    hx_team *t = a.t;
    hx_team_pin_self(t, a.ith);
    unsigned seen = 0;
    for (;;) {
        wait_change(t, &t->generation, seen, t->spin_idle);
        if (atomic_load(&t->stop))
            return NULL;
        seen = count_of(atomic_load(&t->generation));
        work(t);
    }
}

/* Time stamp counter ticks per microsecond, from the counter and the
 * monotonic clock read around a short sleep: being descheduled in it
 * stretches both alike.  The counter is invariant on every x86-64 core
 * hetero runs on (constant_tsc). */
static double tsc_per_us;

static void calibrate_tsc(void)
{
    struct timespec a, b, nap = {0, 200 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &a);
    uint64_t ta = __rdtsc();
    nanosleep(&nap, NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    uint64_t tb = __rdtsc();
    double us = (double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) / 1e3;
    tsc_per_us = us > 0 && tb > ta ? (double)(tb - ta) / us : 3000.0;
}

hx_status hx_team_create(int nthreads, void *topology, int pin, hx_team **out)
{
    if (nthreads < 1 || nthreads > 1024)
        return hx_error(HX_ERR_INVALID_ARG, "thread team of %d threads", nthreads);
    hx_team *t = aligned_alloc(_Alignof(hx_team), sizeof *t); /* a struct's size is a multiple of its alignment */
    if (t)
        memset(t, 0, sizeof *t);
    if (!t || !(t->threads = calloc((size_t)nthreads, sizeof *t->threads))) {
        free(t);
        return hx_error(HX_ERR_NO_MEMORY, "thread team");
    }
    t->n = nthreads;
    t->topo = topology;
    t->pin = pin;
    static pthread_once_t calibrated = PTHREAD_ONCE_INIT;
    pthread_once(&calibrated, calibrate_tsc);
    t->spin_idle = (uint64_t)(SPIN_IDLE_US * tsc_per_us);
    t->spin_barrier = (uint64_t)(SPIN_BARRIER_US * tsc_per_us);
    t->spin_yield = (uint64_t)(SPIN_YIELD_US * tsc_per_us);
    /* Members are bound among the cores of the creator's affinity mask,
     * read before any member (or the creator) is pinned. */
    if (pin && topology) {
        int n = hx_topology_usable_cores(topology, NULL, 0);
        if (n > 0 && (t->cores = malloc(sizeof *t->cores * (size_t)n)))
            t->ncores = hx_topology_usable_cores(topology, t->cores, n);
    }
    for (int i = 1; i < nthreads; i++) {
        member_arg *a = malloc(sizeof *a);
        if (a) {
            a->t = t;
            a->ith = i;
        }
        if (!a || pthread_create(&t->threads[i], NULL, member_main, a) != 0) {
            free(a);
            t->n = i; /* destroy joins the ones that started */
            hx_team_destroy(t);
            return hx_error(HX_ERR_NO_MEMORY, "cannot start thread %d of the CPU team", i);
        }
    }
    *out = t;
    return HX_OK;
}

void hx_team_run(hx_team *t, hx_team_fn fn, void *ctx, int nchunks)
{
    if (nchunks < 1)
        return;
    if (t->n == 1) {
        for (int i = 0; i < nchunks; i++)
            fn(ctx, i, nchunks);
        return;
    }
    /* Closed first: a member that read the previous run's exhausted claim
     * word (chunk == its count) and is about to read the count must not
     * see this run's larger count while that word still validates — it
     * would run a chunk twice, once in the previous run's name, and push
     * `completed` past nchunks (the wait below would never end).  The
     * closed word is a new run number with no chunk to hand out. */
    uint64_t run = (atomic_load(&t->claim) >> 32) + 1;
    atomic_store(&t->claim, run << 32 | CLAIM_CLOSED);
    atomic_store(&t->fn, fn);
    atomic_store(&t->ctx, ctx);
    atomic_store(&t->nchunks, nchunks);
    atomic_store(&t->completed, 0);
    atomic_store(&t->claim, run << 32);
    bump(&t->generation);
    work(t);
    /* Only chunks someone claimed are waited for.  `done` is only a wake-up
     * hint: the bump of an earlier run's last finisher may arrive late, so
     * the count itself decides (the finisher counts before it bumps). */
    for (;;) {
        unsigned done = count_of(atomic_load(&t->done));
        if (atomic_load(&t->completed) == nchunks)
            break;
        wait_change(t, &t->done, done, t->spin_barrier);
    }
}

void hx_team_destroy(hx_team *t)
{
    if (!t)
        return;
    atomic_store(&t->stop, 1);
    bump(&t->generation);
    syscall(SYS_futex, (unsigned *)&t->generation, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
    for (int i = 1; i < t->n; i++)
        pthread_join(t->threads[i], NULL);
    free(t->cores);
    free(t->threads);
    free(t);
}
