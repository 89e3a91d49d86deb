/* Tasks: a codelet applied to buffers; nodes of the dependency DAG. */
#ifndef HX_RUNTIME_TASK_H
#define HX_RUNTIME_TASK_H

#include <stdatomic.h>

#include "hetero.h"

typedef struct hx_task hx_task;

/* Successors kept in the record itself: a task of a layer graph has a
 * few (the norm before Q, K and V has three); more go to the heap. */
#define HX_TASK_SUCC_INLINE 6

struct hx_task {
    hx_task_desc desc;          /* args points into `inline_args` or heap */
    hx_runtime *rt;
    _Atomic int refs;           /* submitter handle + runtime + buffer links */
    _Atomic int pending;        /* unfinished predecessors + 1 during submit */
    hx_task **succ;             /* successors (under rt->lock): succ_inline, or the heap past it */
    int nsucc, capsucc;
    hx_task *succ_inline[HX_TASK_SUCC_INLINE];
    /* Per buffer: the task's place in that buffer's reader list, -1 when
     * it is not there (a writer, or a writer since took the list); under
     * rt->lock.  A finished task leaves the list in O(1). */
    int reader_slot[HX_TASK_MAX_BUFFERS];
    int done;                   /* under rt->lock */
    _Atomic int dep_failed;     /* a predecessor failed: do not run (set by completing predecessors, unlocked) */
    hx_status status;
    int device;                 /* where it ran */
    char *msg;                  /* failure detail */
    double t_submit, t_start, t_end;
    double t_ready;             /* when it could run: its last predecessor's end, or
                                   its hand-over to the scheduler */
    hx_task *next;              /* scheduler queue link */
    hx_task *prev;              /* per-device queues are doubly linked */
    uint64_t id;                /* submission number, for traces */

    /* Scheduling state, under the scheduler's lock. */
    uint32_t capable;           /* devices with an implementation (at submission) */
    uint32_t exclude;           /* devices it failed on */
    int attempts;               /* runs so far, failed ones included */
    int queued_on;              /* device whose queue holds it, -1 = none */
    int doomed;                 /* no device in service can run it */
    int calibrating;            /* sent to measure its cost on that device */
    double flops, bytes;        /* cost; flops < 0 until computed */
    double expected;            /* perf model estimate on the chosen device (s) */
    unsigned char inline_args[64];
    /* The KV blocks a decode step's tasks name fit here: no allocation per
     * task on that path; longer lists go to the heap. */
    uint32_t inline_blocks[16];
    hx_task *pool_prev, *pool_next; /* the pool's list of records handed out */
};

/* The task's cost, from its codelet's cost functions or, without them, the
 * sizes of its buffers (as bytes). */
void hx_task_cost(hx_task *t, double *flops, double *bytes);

/* A task as a recorded graph keeps it (partitioner/replay.c): its
 * descriptor, checked once, with the devices that implement it and its
 * cost, so that submitting it again skips the checks, the codelet lookups
 * and the cost functions.  The scheduling policy still places every
 * submission, and the devices in service are asked each time. */
typedef struct {
    hx_task_desc desc;
    uint32_t capable;
    double flops, bytes;
} hx_task_recorded;

/* Checks `desc` as hx_task_submit does and fills `out` (whose desc points
 * where `desc` points: the caller keeps what it names alive). */
hx_status hx_task_record(hx_runtime *rt, const hx_task_desc *desc, hx_task_recorded *out);
/* Submits n recorded tasks in order, as n calls of hx_task_submit would
 * (no handles), linking a few at a time under one hold of the runtime's
 * lock.  On failure the tasks submitted before it stay submitted.
 *
 * When every one of the n tasks is placed on device 0, the CPU (it is the
 * only device, or each task is pinned there, or prefers it alone under a
 * policy that follows preferences: a plan that keeps a step on the CPU of
 * a machine with a GPU), with nothing else in flight, no trace and no
 * injection, the n tasks go as one task instead (a graph launch, as a
 * CUDA graph is one launch): nothing is left for the scheduler to decide,
 * and the per-task submission, dependency tracking, queueing and
 * completion — most of a decode step of a small model — are paid once.
 * Beside other devices each buffer is still brought to the host and
 * marked written as for a task alone (worker.c).
 * Then `r` (and what its descriptors name) must stay alive until the
 * runtime is drained, and no task submitted meanwhile may use their
 * buffers: the model's evaluation, which waits for its graph under its
 * lock, is the one caller. */
hx_status hx_task_submit_recorded(hx_runtime *rt, const hx_task_recorded *r, size_t n);

/* The one task of a graph launch: its arguments (hx_graph_args) name the
 * recorded tasks, which the device's worker runs in order. */
extern const hx_codelet hx_graph_codelet;
typedef struct {
    const hx_task_recorded *r;
    size_t n;
} hx_graph_args;

void hx_task_ref(hx_task *t);
/* The last reference returns the record to its runtime's pool. */
void hx_task_unref(hx_task *t);
/* Frees what the record points to (arguments, successors, message). */
void hx_task_release_memory(hx_task *t);

#endif
