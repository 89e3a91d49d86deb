/* The CPU team.  Members spin briefly between tasks (a task on a decode
 * path is tens of microseconds; a sleep/wake round trip costs about as
 * much) and then sleep, so an idle runtime leaves the cores to others. */
#include <hwloc.h>
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "runtime/error.h"
#include "runtime/threadpool.h"

#define SPIN_BEFORE_SLEEP 20000
#define SPIN_BEFORE_YIELD 2000

struct hx_team {
    int n;
    hwloc_topology_t topo;
    int pin;
    pthread_t *threads;

    _Atomic unsigned generation; /* bumped per run; odd bit unused */
    _Atomic int finished;
    hx_team_fn fn;
    void *ctx;
    _Atomic int stop;

    _Atomic int sleepers;
    pthread_mutex_t m;
    pthread_cond_t c;

    _Atomic int arrived; /* barrier */
    _Atomic unsigned phase;
};

typedef struct {
    hx_team *t;
    int ith;
} member_arg;

int hx_team_size(const hx_team *t) { return t->n; }

hx_status hx_team_pin_self(hx_team *t, int ith)
{
    if (!t->pin || !t->topo)
        return HX_OK;
    int ncores = hwloc_get_nbobjs_by_type(t->topo, HWLOC_OBJ_CORE);
    if (ncores <= 0)
        return HX_OK;
    hwloc_obj_t core = hwloc_get_obj_by_type(t->topo, HWLOC_OBJ_CORE, (unsigned)(ith % ncores));
    if (!core || !core->cpuset)
        return HX_OK;
    hwloc_bitmap_t set = hwloc_bitmap_dup(core->cpuset);
    hwloc_bitmap_singlify(set);
    int rc = hwloc_set_cpubind(t->topo, set, HWLOC_CPUBIND_THREAD);
    hwloc_bitmap_free(set);
    /* Binding can be refused (containers, cpusets): run unpinned then. */
    (void)rc;
    return HX_OK;
}

static void wait_spin(int *spins)
{
    if (++*spins < SPIN_BEFORE_YIELD)
        _mm_pause();
    else
        sched_yield();
}

void hx_team_barrier(void *team)
{
    hx_team *t = team;
    if (t->n == 1)
        return;
    unsigned phase = atomic_load_explicit(&t->phase, memory_order_acquire);
    if (atomic_fetch_add_explicit(&t->arrived, 1, memory_order_acq_rel) == t->n - 1) {
        atomic_store_explicit(&t->arrived, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&t->phase, 1, memory_order_release);
        return;
    }
    int spins = 0;
    while (atomic_load_explicit(&t->phase, memory_order_acquire) == phase)
        wait_spin(&spins);
}

static void *member_main(void *p)
{
    member_arg a = *(member_arg *)p;
    free(p);
    hx_team *t = a.t;
    hx_team_pin_self(t, a.ith);
    unsigned seen = 0;
    for (;;) {
        int spins = 0;
        unsigned g;
        while ((g = atomic_load_explicit(&t->generation, memory_order_acquire)) == seen &&
               !atomic_load(&t->stop)) {
            if (spins++ < SPIN_BEFORE_SLEEP) {
                _mm_pause();
                continue;
            }
            pthread_mutex_lock(&t->m);
            atomic_fetch_add(&t->sleepers, 1);
            while (atomic_load(&t->generation) == seen && !atomic_load(&t->stop))
                pthread_cond_wait(&t->c, &t->m);
            atomic_fetch_sub(&t->sleepers, 1);
            pthread_mutex_unlock(&t->m);
        }
        if (atomic_load(&t->stop))
            return NULL;
        seen = g;
        t->fn(t->ctx, a.ith, t->n);
        atomic_fetch_add_explicit(&t->finished, 1, memory_order_acq_rel);
    }
}

hx_status hx_team_create(int nthreads, void *topology, int pin, hx_team **out)
{
    if (nthreads < 1 || nthreads > 1024)
        return hx_error(HX_ERR_INVALID_ARG, "thread team of %d threads", nthreads);
    hx_team *t = calloc(1, sizeof *t);
    if (!t || !(t->threads = calloc((size_t)nthreads, sizeof *t->threads))) {
        free(t);
        return hx_error(HX_ERR_NO_MEMORY, "thread team");
    }
    t->n = nthreads;
    t->topo = topology;
    t->pin = pin;
    pthread_mutex_init(&t->m, NULL);
    pthread_cond_init(&t->c, NULL);
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

void hx_team_run(hx_team *t, hx_team_fn fn, void *ctx)
{
    t->fn = fn;
    t->ctx = ctx;
    atomic_store_explicit(&t->finished, 0, memory_order_relaxed);
    /* seq_cst: pairs with the sleeper's increment of `sleepers` (Dekker). */
    atomic_fetch_add(&t->generation, 1);
    if (atomic_load(&t->sleepers) > 0) {
        pthread_mutex_lock(&t->m);
        pthread_cond_broadcast(&t->c);
        pthread_mutex_unlock(&t->m);
    }
    fn(ctx, 0, t->n);
    int spins = 0;
    while (atomic_load_explicit(&t->finished, memory_order_acquire) != t->n - 1)
        wait_spin(&spins);
}

void hx_team_destroy(hx_team *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->m);
    atomic_store(&t->stop, 1);
    pthread_cond_broadcast(&t->c);
    pthread_mutex_unlock(&t->m);
    for (int i = 1; i < t->n; i++)
        pthread_join(t->threads[i], NULL);
    pthread_mutex_destroy(&t->m);
    pthread_cond_destroy(&t->c);
    free(t->threads);
    free(t);
}
