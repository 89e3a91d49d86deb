/* Scheduling policies behind one interface (StarPU's push/pop vtable).
 * `push` receives ready tasks; a device's worker asks `pop` for work. */
#ifndef HX_RUNTIME_SCHED_H
#define HX_RUNTIME_SCHED_H

#include <pthread.h>

#include "hetero.h"

struct hx_task;
struct hx_device;
typedef struct hx_sched hx_sched;

typedef struct {
    const char *name;
    hx_status (*init)(hx_sched *s);
    void (*deinit)(hx_sched *s);
    /* Called with s->lock held. */
    void (*push)(hx_sched *s, struct hx_task *t);
    struct hx_task *(*pop)(hx_sched *s, struct hx_device *d);
} hx_sched_policy;

struct hx_sched {
    const hx_sched_policy *policy;
    void *state;
    hx_runtime *rt;
    pthread_mutex_t lock;
    pthread_cond_t work; /* broadcast on push and on shutdown */
};

hx_status hx_sched_init(hx_sched *s, hx_runtime *rt, const char *policy);
void hx_sched_deinit(hx_sched *s);
void hx_sched_push(hx_sched *s, struct hx_task *t);
/* Blocks until a task for `d` is available or the runtime stops (NULL). */
struct hx_task *hx_sched_pop_wait(hx_sched *s, struct hx_device *d);
void hx_sched_shutdown(hx_sched *s);

/* Whether device `d` may run task `t` (implementation present, pinning). */
int hx_sched_can_run(const struct hx_task *t, const struct hx_device *d);

extern const hx_sched_policy hx_sched_eager;

#endif
