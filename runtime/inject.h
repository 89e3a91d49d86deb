/* Injected slowdowns and failures (tests, benchmarks): per device, a
 * slowdown factor and a failure probability drawn from a seeded generator,
 * so a run is reproducible task by task on each device. */
#ifndef HX_RUNTIME_INJECT_H
#define HX_RUNTIME_INJECT_H

#include <pthread.h>
#include <stdatomic.h>

#include "hetero.h"

typedef struct {
    pthread_mutex_t lock;
    _Atomic int active;   /* read without the lock on every task */
    hx_injection inj;
    uint64_t draws;
    uint32_t left;        /* tasks still affected when inj.count > 0 */
} hx_inject_state;

/* What happens to the device's next task. */
typedef struct {
    double slow;  /* 1 = not slowed */
    int fail;     /* report a failure after running */
    int risky;    /* failures are possible: keep what a failure must restore */
} hx_inject_draw;

void hx_inject_init(hx_inject_state *st);
void hx_inject_destroy(hx_inject_state *st);
hx_status hx_inject_set(hx_inject_state *st, const hx_injection *inj);
hx_inject_draw hx_inject_next(hx_inject_state *st);

/* Applies a spec ("dev=1,slow=3;kind=fpga,fail=0.1") to the runtime's
 * devices (runtime/inject.c, with hx_device_inject). */
struct hx_runtime;
hx_status hx_inject_apply_spec(struct hx_runtime *rt, const char *spec);

#endif
