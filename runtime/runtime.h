/* The runtime context: devices, scheduler, statistics.  Internal. */
#ifndef HX_RUNTIME_RUNTIME_H
#define HX_RUNTIME_RUNTIME_H

#include <pthread.h>
#include <stdatomic.h>

#include "runtime/device.h"
#include "runtime/executor.h"
#include "runtime/sched.h"
#include "runtime/task_pool.h"
#include "runtime/trace.h"

struct hx_runtime {
    hx_device *devices[HX_MAX_DEVICES];
    int ndevices;
    int n_memory_nodes;            /* node 0 is host memory */
    char *absence[HX_FAMILY_COUNT];
    const hx_device_ops *const *backends; /* the families it was opened with (hx_runtime_open_with) */
    void *topology;                /* hwloc_topology_t */
    hx_topology_info topo_info;
    hx_discover_options discover;

    /* Task graph state: dependencies are tracked under `lock`. */
    pthread_mutex_t lock;
    pthread_cond_t idle;           /* a waited-for task, buffer or the whole runtime went idle */
    int waiters;                   /* blocked on a task or buffer               */
    int idle_waiters;              /* blocked until inflight == 0 (wait_all)    */
    uint64_t inflight;             /* submitted, not yet completed        */
    hx_task_pool task_pool;        /* task records (runtime/task_pool.c)  */
    _Atomic int buffers;           /* buffers not yet destroyed           */
    hx_status first_failure;
    char first_failure_msg[512];

    hx_sched sched;
    int stopping;
    /* A recorded graph on a runtime of one CPU device runs as one task
     * (runtime/task.c); HX_GRAPH_LAUNCH=0 submits its tasks one by one. */
    int graph_launch;

    double open_time;
    struct {
        _Atomic uint64_t submitted, done, failed, copies, bytes_copied, zero_copy, migrations;
        _Atomic uint64_t submit_ns, retries, graph_launches;
        _Atomic uint32_t devices_retired;
        /* Per device with memory of its own: bytes of divided buffers (KV
         * caches) allocated there, and of the blocks tasks there named
         * since they were last discarded (what copies sized to the blocks
         * a device holds would take), now and at most. */
        _Atomic uint64_t block_bytes_allocated[HX_MAX_DEVICES];
        _Atomic uint64_t block_bytes_named[HX_MAX_DEVICES], block_bytes_named_peak[HX_MAX_DEVICES];
        /* Per memory node: bytes of divided buffers' blocks valid there
         * alone (which such a copy could not evict without a copy back),
         * now and at most. */
        _Atomic uint64_t block_bytes_device_only[HX_MAX_DEVICES], block_bytes_device_only_peak[HX_MAX_DEVICES];
    } stats;
    _Atomic uint64_t next_task_id;
    hx_trace trace;
    /* How tasks advance (runtime/executor.h): worker threads, unless the
     * backend that discovered the devices (the simulator) set its own. */
    const hx_executor *executor;
    void *executor_state;
};

double hx_now(void); /* monotonic seconds */
/* hx_runtime_clock without the handle check, for the runtime's own use on
 * every task. */
double hx_runtime_now(const hx_runtime *rt);
/* The performance models of the runtime's devices, keyed across runs. */
struct hx_perfmodel;
hx_status hx_runtime_perfmodels_open(hx_runtime *rt, const char *dir, struct hx_perfmodel **out);
/* hx_runtime_wait_all and hx_runtime_trace_start/stop without the handle
 * check: what opening and closing the runtime do, while it is not in the
 * registry of open handles. */
hx_status hx_runtime_drain(hx_runtime *rt);
hx_status hx_trace_start(hx_runtime *rt, const char *path);
hx_status hx_trace_stop(hx_runtime *rt);
/* Of a device's own memory, the bytes placements may fill with weights
 * and KV caches: the rest, the larger of 5 % and 512 MiB, is left for
 * activations and scratch.  The placement planner, KV offload's slots and
 * the experts' groups all count a device's room so. */
static inline double hx_device_room(const hx_device_info *info)
{
    const double mem = (double)info->global_mem_bytes, reserve = 0.05 * mem;
    return mem - (reserve > 512.0 * 1024 * 1024 ? reserve : 512.0 * 1024 * 1024);
}
/* Called by the worker when a task ends (runtime/task.c). */
struct hx_task;
void hx_task_complete(hx_runtime *rt, struct hx_task *t, hx_status s, const char *msg);

#endif
