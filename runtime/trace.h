/* The trace: every task, copy and migration with its times, written as
 * Chrome trace-event JSON.  Events gather in a buffer of HX_TRACE_CHUNK
 * and go to the file each time it fills, so a trace of a server that runs
 * for weeks holds one chunk in memory, not its history.  Recording off
 * costs one relaxed atomic load per event. */
#ifndef HX_RUNTIME_TRACE_H
#define HX_RUNTIME_TRACE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "hetero.h"

/* Events held before they are written (about 300 KiB). */
#define HX_TRACE_CHUNK 4096u

typedef enum {
    HX_TRACE_TASK,
    HX_TRACE_TASK_FAILED,
    HX_TRACE_COPY,
    HX_TRACE_MIGRATION,
    HX_TRACE_RETRY,
    HX_TRACE_RETIRE,
} hx_trace_kind;

typedef struct {
    uint8_t kind;
    int16_t dev, from, to;
    double t0, t1;
    uint64_t id, bytes;
    char name[32];
} hx_trace_event;

typedef struct {
    pthread_mutex_t lock;
    _Atomic int on;
    hx_trace_event *ev;      /* HX_TRACE_CHUNK events while recording */
    size_t n;
    uint64_t dropped;        /* events lost to a failed write */
    char *path;
    void *file;              /* FILE *, open while recording */
    int write_failed;
    double origin;
} hx_trace;

struct hx_task;
void hx_trace_init(hx_trace *t);
void hx_trace_destroy(hx_trace *t);
void hx_trace_task(hx_runtime *rt, const struct hx_task *t, int dev, double t0, double t1, int ok);
void hx_trace_copy(hx_runtime *rt, int dev, int from_node, int to_node, size_t bytes, double t0, double t1);
void hx_trace_migration(hx_runtime *rt, const struct hx_task *t, int from, int to, const char *why);
/* An instant on a device: a retry of `t` (NULL for other marks) or a retirement. */
void hx_trace_mark(hx_runtime *rt, hx_trace_kind kind, int dev, const struct hx_task *t);

#endif
