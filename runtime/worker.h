/* One worker thread per device: pops tasks, keeps buffers coherent, runs
 * them, retries the ones that fail on another device, and keeps the
 * device's counters and load monitor. */
#ifndef HX_RUNTIME_WORKER_H
#define HX_RUNTIME_WORKER_H

#include "runtime/inject.h"
#include "runtime/monitor.h"
#include "runtime/runtime.h"

/* Attempts of one task before its failure stands. */
#define HX_MAX_ATTEMPTS 6

typedef struct {
    pthread_t thread;
    int started;
    hx_status start_status;
    _Atomic uint64_t tasks;
    _Atomic uint64_t busy_ns;
    _Atomic uint64_t failures;
    int consecutive_failures;   /* worker thread only */
    uint64_t graph_launches;    /* worker thread only: launches run */
    double last_end;            /* worker thread only: when its last task's kernel ended */
    double launch_sum;          /* worker thread only: time outside kernels, not yet recorded */
    int launch_n;               /* ... over this many tasks */
    _Atomic int retired;
    hx_inject_state inject;
    hx_monitor monitor;
    pthread_mutex_t msg_lock;
    char last_failure[192];
} hx_worker;

hx_status hx_worker_start(hx_device *d);
/* The worker's state without its thread (a simulated device's counters). */
hx_status hx_worker_init(hx_device *d, double now);
void hx_worker_join(hx_device *d);

#endif
