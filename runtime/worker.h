/* One worker thread per device: pops tasks, keeps buffers coherent, runs. */
#ifndef HX_RUNTIME_WORKER_H
#define HX_RUNTIME_WORKER_H

#include "runtime/runtime.h"

typedef struct {
    pthread_t thread;
    int started;
    hx_status start_status;
    _Atomic uint64_t tasks;
    _Atomic uint64_t busy_ns;
} hx_worker;

hx_status hx_worker_start(hx_device *d);
void hx_worker_join(hx_device *d);

#endif
