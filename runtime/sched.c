/* The scheduler front: one lock, a condition per device, the policy
 * behind a vtable, the devices in service, and the per-device queues that
 * the static, ws and dmda policies share. */
#include <immintrin.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/error.h"
#include "runtime/perfmodel.h"
#include "runtime/runtime.h"
#include "runtime/sched.h"
#include "runtime/task.h"
#include "runtime/trace.h"

static const hx_sched_policy *const policies[] = {&hx_sched_eager, &hx_sched_static, &hx_sched_ws,
                                                  &hx_sched_dmda,  &hx_sched_plan,   &hx_sched_ngl, NULL};

static _Thread_local int current_device = -1;

int hx_sched_current(void) { return current_device; }
void hx_sched_set_current(int d) { current_device = d; }

static uint32_t all_devices(const hx_runtime *rt)
{
    return rt->ndevices >= 32 ? 0xffffffffu : (1u << rt->ndevices) - 1;
}

uint32_t hx_sched_capable(hx_runtime *rt, const hx_task_desc *t)
{
    size_t sizes[HX_TASK_MAX_BUFFERS] = {0};
    int have_sizes = 0;
    uint32_t m = 0;
    for (int d = 0; d < rt->ndevices; d++) {
        hx_device *dev = rt->devices[d];
        const hx_codelet *impl = hx_device_codelet(dev, t->codelet);
        if (!impl || !dev->ops->can_run(dev, impl))
            continue;
        if (dev->ops->can_run_args) {
            for (int i = 0; !have_sizes && i < t->nbuffers; i++)
                sizes[i] = hx_buffer_size(t->buffers[i]);
            have_sizes = 1;
            if (!dev->ops->can_run_args(dev, impl, t->args, sizes))
                continue;
        }
        m |= 1u << d;
    }
    return m;
}

uint32_t hx_sched_eligible(const hx_sched *s, const hx_task *t)
{
    uint32_t m = t->capable & ~t->exclude & ~atomic_load_explicit(&s->retired, memory_order_relaxed);
    if (t->desc.device >= 0)
        m &= 1u << t->desc.device;
    return m;
}

hx_status hx_sched_init(hx_sched *s, hx_runtime *rt, const char *name)
{
    memset(s, 0, sizeof *s);
    s->rt = rt;
    for (int i = 0; policies[i]; i++)
        if (strcmp(policies[i]->name, name) == 0)
            s->policy = policies[i];
    if (!s->policy) {
        char known[256] = "";
        for (int i = 0; policies[i]; i++) {
            strncat(known, i ? ", " : "", sizeof known - strlen(known) - 1);
            strncat(known, policies[i]->name, sizeof known - strlen(known) - 1);
        }
        return hx_error(HX_ERR_INVALID_ARG, "unknown scheduling policy '%s' (known: %s)", name, known);
    }
    pthread_mutex_init(&s->lock, NULL);
    for (int d = 0; d < HX_MAX_DEVICES; d++) {
        pthread_cond_init(&s->dev[d].cond, NULL);
        s->dev[d].slowness = 1.0;
    }
    hx_status st = s->policy->init ? s->policy->init(s) : HX_OK;
    if (st) {
        pthread_mutex_destroy(&s->lock);
        for (int d = 0; d < HX_MAX_DEVICES; d++)
            pthread_cond_destroy(&s->dev[d].cond);
        s->policy = NULL;
    }
    return st;
}

void hx_sched_deinit(hx_sched *s)
{
    if (!s->policy)
        return;
    if (s->policy->deinit)
        s->policy->deinit(s);
    pthread_mutex_destroy(&s->lock);
    for (int d = 0; d < HX_MAX_DEVICES; d++)
        pthread_cond_destroy(&s->dev[d].cond);
    s->policy = NULL;
}

static void wake(hx_sched *s, int d)
{
    if (s->dev[d].sleeping)
        pthread_cond_signal(&s->dev[d].cond);
}

/* Wakes idle devices among `mask`: all of them, or only the first. */
static void wake_idle(hx_sched *s, uint32_t mask, int just_one)
{
    for (int d = 0; mask; d++, mask >>= 1)
        if ((mask & 1) && s->dev[d].sleeping) {
            pthread_cond_signal(&s->dev[d].cond);
            if (just_one)
                return;
        }
}

static void doom(hx_sched *s, hx_task *t)
{
    t->doomed = 1;
    t->queued_on = -1;
    t->next = s->doomed;
    s->doomed = t;
    wake_idle(s, all_devices(s->rt) & ~atomic_load(&s->retired), 1);
}

/* Under s->lock. */
static void push_locked(hx_sched *s, hx_task *t)
{
    atomic_fetch_add_explicit(&s->pushes, 1, memory_order_release);
    t->queued_on = -1;
    uint32_t el = hx_sched_eligible(s, t);
    if (!el) {
        doom(s, t);
        return;
    }
    s->wake_helper = 0;
    int target = s->policy->push(s, t);
    if (target < 0) {
        wake_idle(s, el, 0);
        return;
    }
    wake(s, target);
    if (s->wake_helper)
        wake_idle(s, el & ~(1u << target), 1);
}

void hx_sched_push(hx_sched *s, hx_task *t)
{
    pthread_mutex_lock(&s->lock);
    push_locked(s, t);
    pthread_mutex_unlock(&s->lock);
}

void hx_sched_finished(hx_sched *s, int d, const hx_sched_done *done)
{
    hx_sched_dev *dv = &s->dev[d];
    pthread_mutex_lock(&s->lock);
    dv->running = 0;
    dv->running_calibrating = 0;
    /* A device that runs slower than its model says (contention, an
     * injected slowdown not yet learnt) has a longer backlog than the sum
     * of its estimates: the median of the last ratios corrects it until the
     * model catches up, and one hiccup moves nothing. */
    if (done && done->valid && done->expected > 0 && done->actual > 0) {
        double r = done->actual / done->expected;
        dv->ratios[dv->nratio++ % HX_SLOWNESS_WINDOW] = (float)(r > 1e3 ? 1e3 : r);
        dv->ratio_at = hx_runtime_now(s->rt);
        /* Not before the window is full: the first tasks of a device run
         * cold (page faults, sleeping threads). */
        if (dv->nratio >= HX_SLOWNESS_WINDOW)
            dv->slowness = hx_perfmodel_median(dv->ratios, HX_SLOWNESS_WINDOW);
    }
    pthread_mutex_unlock(&s->lock);
}

static int others_queued(const hx_sched *s, int me)
{
    for (int d = 0; d < s->rt->ndevices; d++)
        if (d != me && s->dev[d].depth)
            return 1;
    return 0;
}

/* Under s->lock: a doomed task (any device fails it), else the policy's. */
static hx_task *take(hx_sched *s, hx_device *d)
{
    hx_task *t = s->doomed;
    if (t) {
        s->doomed = t->next;
        t->next = NULL;
        return t;
    }
    return s->policy->pop(s, d);
}

static void note_running(hx_sched *s, hx_sched_dev *dv, const hx_task *t)
{
    if (t && !t->doomed) {
        dv->running = 1;
        dv->running_calibrating = t->calibrating;
        dv->running_expected = t->expected;
        dv->running_start = s->pm ? hx_runtime_now(s->rt) : 0;
    }
}

hx_task *hx_sched_try_pop(hx_sched *s, hx_device *d)
{
    hx_sched_dev *dv = &s->dev[d->info.index];
    pthread_mutex_lock(&s->lock);
    dv->running = 0;
    dv->running_calibrating = 0;
    hx_task *t = take(s, d);
    note_running(s, dv, t);
    pthread_mutex_unlock(&s->lock);
    return t;
}

/* How long a worker that asked to spin watches for a push before it
 * sleeps, and how often it yields its core meanwhile.  A decode loop
 * submits its next step a few microseconds after the last one completes
 * (the application reads the logits, samples, fills the batch), and a
 * worker asleep on its condition variable took 2-28 us more to start it
 * (tiny Q4_K_M, 2 threads, per step, varying from process to process): a
 * core that went idle halts, and waking it is slow on a virtual machine. */
#define SPIN_WATCH_US 100
#define SPIN_YIELD_US 5

static double mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Without the lock: returns when a push after `seen` happened or the
 * budget is spent; the caller takes the lock and looks again. */
static void watch_pushes(hx_sched *s, unsigned seen)
{
    const double t0 = mono_us();
    double yield_at = t0 + SPIN_YIELD_US, now = t0;
    while (now - t0 < SPIN_WATCH_US) {
        for (int k = 0; k < 32; k++) {
            if (atomic_load_explicit(&s->pushes, memory_order_acquire) != seen)
                return;
            _mm_pause();
        }
        if ((now = mono_us()) >= yield_at) {
            sched_yield(); /* the application's thread may be waiting for this core */
            yield_at = now + SPIN_YIELD_US;
        }
    }
}

hx_task *hx_sched_pop_wait(hx_sched *s, hx_device *d, int spin)
{
    int i = d->info.index;
    hx_sched_dev *dv = &s->dev[i];
    pthread_mutex_lock(&s->lock);
    dv->running = 0;
    dv->running_calibrating = 0;
    hx_task *t;
    for (;;) {
        if ((t = take(s, d)) || s->rt->stopping)
            break;
        if (spin) {
            spin = 0;
            const unsigned seen = atomic_load_explicit(&s->pushes, memory_order_acquire);
            pthread_mutex_unlock(&s->lock);
            watch_pushes(s, seen);
            pthread_mutex_lock(&s->lock);
            continue; /* looked at again under the lock: nothing pushed meanwhile is missed */
        }
        dv->sleeping = 1;
        if (s->policy->rebalances && others_queued(s, i)) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += (long)(HX_REBALANCE_S * 1e9);
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&dv->cond, &s->lock, &ts);
        } else {
            pthread_cond_wait(&dv->cond, &s->lock);
        }
        dv->sleeping = 0;
    }
    note_running(s, dv, t);
    pthread_mutex_unlock(&s->lock);
    return t;
}

void hx_sched_shutdown(hx_sched *s)
{
    pthread_mutex_lock(&s->lock);
    s->rt->stopping = 1;
    for (int d = 0; d < HX_MAX_DEVICES; d++)
        pthread_cond_broadcast(&s->dev[d].cond);
    pthread_mutex_unlock(&s->lock);
}

int hx_sched_retire(hx_sched *s, int d)
{
    pthread_mutex_lock(&s->lock);
    uint32_t bit = 1u << d, retired = atomic_load(&s->retired);
    uint32_t in_service = all_devices(s->rt) & ~retired;
    if (!(in_service & bit) || !(in_service & ~bit)) {
        pthread_mutex_unlock(&s->lock);
        return 0;
    }
    atomic_store(&s->retired, retired | bit);
    hx_task *list = s->policy->drain(s);
    while (list) {
        hx_task *t = list;
        list = t->next;
        int from = t->queued_on;
        push_locked(s, t);
        if (from == d && t->queued_on >= 0 && t->queued_on != d)
            hx_sched_note_migration(s, t, from, t->queued_on, "retired");
    }
    for (int i = 0; i < s->rt->ndevices; i++)
        pthread_cond_broadcast(&s->dev[i].cond);
    pthread_mutex_unlock(&s->lock);
    return 1;
}

double hx_sched_backlog(const hx_sched *s, int d, double now)
{
    const hx_sched_dev *dv = &s->dev[d];
    double b = dv->queued_expected * dv->slowness;
    if (dv->running) {
        /* A task that overran its estimate is expected to run about as
         * long again as it overran: a stuck device's backlog keeps growing,
         * so the others take its queue. */
        double left = dv->running_expected * dv->slowness - (now - dv->running_start);
        b += left > 0 ? left : -left;
    }
    return b;
}

void hx_sched_load(hx_sched *s, int d, uint32_t *depth, double *backlog)
{
    pthread_mutex_lock(&s->lock);
    *depth = s->dev[d].depth;
    *backlog = s->pm ? hx_sched_backlog(s, d, hx_runtime_now(s->rt)) : 0;
    pthread_mutex_unlock(&s->lock);
}

/* ---- per-device queues ------------------------------------------------ */

void hx_sched_enqueue(hx_sched *s, int d, hx_task *t)
{
    hx_sched_dev *dv = &s->dev[d];
    hx_task *after = dv->tail;
    while (after && after->desc.priority < t->desc.priority)
        after = after->prev;
    t->prev = after;
    t->next = after ? after->next : dv->head;
    if (t->next)
        t->next->prev = t;
    else
        dv->tail = t;
    if (after)
        after->next = t;
    else
        dv->head = t;
    dv->depth++;
    dv->queued_expected += t->expected;
    dv->calibrating += t->calibrating;
    t->queued_on = d;
}

void hx_sched_dequeue(hx_sched *s, hx_task *t)
{
    hx_sched_dev *dv = &s->dev[t->queued_on];
    if (t->prev)
        t->prev->next = t->next;
    else
        dv->head = t->next;
    if (t->next)
        t->next->prev = t->prev;
    else
        dv->tail = t->prev;
    dv->depth--;
    dv->queued_expected -= t->expected;
    dv->calibrating -= t->calibrating;
    if (dv->depth == 0)
        dv->queued_expected = 0; /* no drift from rounding */
    t->next = t->prev = NULL;
}

hx_task *hx_sched_drain_queues(hx_sched *s)
{
    hx_task *list = NULL;
    for (int d = 0; d < s->rt->ndevices; d++) {
        hx_sched_dev *dv = &s->dev[d];
        while (dv->tail) {
            hx_task *t = dv->tail;
            int from = t->queued_on;
            hx_sched_dequeue(s, t);
            t->queued_on = from; /* so the caller knows where it was */
            t->next = list;
            list = t;
        }
    }
    return list;
}

int hx_sched_least_loaded(const hx_sched *s, uint32_t mask)
{
    int best = -1;
    for (int d = 0; mask; d++, mask >>= 1)
        if ((mask & 1) && (best < 0 || s->dev[d].depth + s->dev[d].running <
                                           s->dev[best].depth + s->dev[best].running))
            best = d;
    return best;
}

void hx_sched_note_migration(hx_sched *s, const hx_task *t, int from, int to, const char *why)
{
    atomic_fetch_add(&s->rt->stats.migrations, 1);
    hx_trace_migration(s->rt, t, from, to, why);
}
