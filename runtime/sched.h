/* Scheduling policies behind one interface (StarPU's push/pop vtable).
 * `push` receives ready tasks; a device's worker asks `pop` for work.
 *
 * The front (sched.c) owns what every policy shares: one lock, a
 * condition per device so a push wakes only the worker it concerns, the
 * per-device queues the non-central policies use, the devices in service,
 * and the bookkeeping of predicted backlogs (load monitor, dmda). */
#ifndef HX_RUNTIME_SCHED_H
#define HX_RUNTIME_SCHED_H

#include <pthread.h>
#include <stdatomic.h>

#include "hetero.h"

#define HX_MAX_DEVICES 32
#define HX_REBALANCE_S 1e-3
#define HX_SLOWNESS_WINDOW 7

struct hx_task;
struct hx_device;
struct hx_perfmodel;
typedef struct hx_sched hx_sched;

/* Who decides a step's placement ahead: nobody (the policy places each
 * task as it becomes ready), or the partitioner's placement planner
 * (partitioner/placement.c), whose choice the policy then follows. */
typedef enum { HX_PLACE_NONE = 0, HX_PLACE_PLAN, HX_PLACE_NGL } hx_place_mode;

typedef struct {
    const char *name;
    hx_place_mode placement;
    int rebalances;      /* an idle device looks again every HX_REBALANCE_S
                            while others hold queued tasks (their predictions
                            go stale while it sleeps) */
    int follows_prefer;  /* a task preferring one device it can run on goes
                            there (static, plan, ngl) */
    hx_status (*init)(hx_sched *s);
    void (*deinit)(hx_sched *s);
    /* Called with s->lock held, for a task some device in service may run.
     * Returns the device whose worker to wake, or -1 for every idle one
     * that may run it. */
    int (*push)(hx_sched *s, struct hx_task *t);
    struct hx_task *(*pop)(hx_sched *s, struct hx_device *d);
    /* Removes every queued task (a device left service); they are
     * returned linked by `next` and pushed again. */
    struct hx_task *(*drain)(hx_sched *s);
} hx_sched_policy;

/* What the front keeps per device; under s->lock. */
typedef struct {
    pthread_cond_t cond;
    int sleeping;                /* its worker waits on `cond`            */
    struct hx_task *head, *tail; /* its queue (policies that keep one)    */
    uint32_t depth;
    double queued_expected;      /* sum of the queued tasks' estimates (s) */
    int running;                 /* a popped task has not finished yet    */
    double running_expected, running_start;
    double slowness;             /* recent actual / expected time (1 = as predicted) */
    float ratios[HX_SLOWNESS_WINDOW]; /* the last ratios; slowness is their median */
    int nratio;
    double ratio_at;             /* the runtime's clock at the last ratio */
    int calibrating;             /* queued tasks sent to measure an unknown cost */
    int running_calibrating;     /* the running task is one of them */
} hx_sched_dev;

struct hx_sched {
    const hx_sched_policy *policy;
    void *state;
    hx_runtime *rt;
    pthread_mutex_t lock;
    hx_sched_dev dev[HX_MAX_DEVICES];
    _Atomic uint32_t retired;    /* bit d: device d is out of service */
    struct hx_task *doomed;      /* no device in service can run them: failed by any worker */
    int wake_helper;             /* set by push: also wake an idle device (stealing, rebalancing) */
    struct hx_perfmodel *pm;     /* NULL unless the policy uses it */
    _Atomic unsigned pushes;     /* bumped by every push: what a spinning worker watches */
};

/* How the task a worker just finished went (for the backlog bookkeeping). */
typedef struct {
    int valid;
    double expected, actual;
} hx_sched_done;

hx_status hx_sched_init(hx_sched *s, hx_runtime *rt, const char *policy);
void hx_sched_deinit(hx_sched *s);
void hx_sched_push(hx_sched *s, struct hx_task *t);
/* The next task for `d`, or NULL at once (the simulator's workers). */
struct hx_task *hx_sched_try_pop(hx_sched *s, struct hx_device *d);
/* Blocks until a task for `d` is available or the runtime stops (NULL).
 * With `spin`, a worker that finds its queue empty first watches it for a
 * short while before it sleeps (see sched.c). */
struct hx_task *hx_sched_pop_wait(hx_sched *s, struct hx_device *d, int spin);
/* The worker of `d` finished its task (before completing it, so that the
 * successors it makes ready see the device free). */
void hx_sched_finished(hx_sched *s, int d, const hx_sched_done *done);
void hx_sched_shutdown(hx_sched *s);

/* Devices that have an implementation of the task's codelet for its
 * arguments (a kernel for its weight type, a bitstream holding it...). */
uint32_t hx_sched_capable(hx_runtime *rt, const hx_task_desc *t);
/* Devices that may run `t` now: capable, in service, not failed by it,
 * and the pinned one only when it is pinned. */
uint32_t hx_sched_eligible(const hx_sched *s, const struct hx_task *t);
/* Takes device `d` out of service; its queued tasks move to the others.
 * Refused (returns 0) when it is the last device in service. */
int hx_sched_retire(hx_sched *s, int d);
/* Predicted seconds until device `d` has finished what it holds (s->lock). */
double hx_sched_backlog(const hx_sched *s, int d, double now);
/* Snapshot of a device's queue depth and backlog for the statistics. */
void hx_sched_load(hx_sched *s, int d, uint32_t *depth, double *backlog);

/* The device whose worker runs on the calling thread, or -1. */
int hx_sched_current(void);
void hx_sched_set_current(int d);

/* Per-device queues (s->lock held): priority order, then arrival. */
void hx_sched_enqueue(hx_sched *s, int d, struct hx_task *t);
void hx_sched_dequeue(hx_sched *s, struct hx_task *t);
/* Removes every task of every per-device queue, linked by `next`. */
struct hx_task *hx_sched_drain_queues(hx_sched *s);
/* Among the devices of `mask`, the one with the fewest queued tasks. */
int hx_sched_least_loaded(const hx_sched *s, uint32_t mask);
/* Records a migration of `t` from device `from` to `to` (stats, trace). */
void hx_sched_note_migration(hx_sched *s, const struct hx_task *t, int from, int to, const char *why);

extern const hx_sched_policy hx_sched_eager, hx_sched_static, hx_sched_ws, hx_sched_dmda, hx_sched_plan,
    hx_sched_ngl;

/* For the placement planner (runtime/sched_plan.c).  Seconds a task of
 * this cost takes on device d, copies apart: the simulated device's own
 * time, else the performance model's; 0 when unknown. */
int hx_sched_estimate(hx_runtime *rt, int d, const hx_codelet *cl, hx_precision p, double flops, double bytes,
                      double *sec);
/* Seconds to move `bytes` between host memory and device d's memory (0
 * for a device working in host memory). */
double hx_sched_link_seconds(hx_runtime *rt, int d, double bytes);
/* Device d's recent actual / expected time (1 = as its model says). */
double hx_sched_slowness(hx_sched *s, int d);
/* The slowness a plan should assume: hx_sched_slowness, or 1 when the
 * device has finished no task for max_age seconds of the runtime's clock
 * (what made it slow may have passed, and a device nothing runs on is
 * never measured again). */
double hx_sched_slowness_recent(hx_sched *s, int d, double max_age);

#endif
