/* Tasks: a codelet applied to buffers; nodes of the dependency DAG. */
#ifndef HX_RUNTIME_TASK_H
#define HX_RUNTIME_TASK_H

#include <stdatomic.h>

#include "hetero.h"

typedef struct hx_task hx_task;

struct hx_task {
    hx_task_desc desc;          /* args points into `inline_args` or heap */
    hx_runtime *rt;
    _Atomic int refs;           /* submitter handle + runtime + buffer links */
    _Atomic int pending;        /* unfinished predecessors + 1 during submit */
    hx_task **succ;             /* successors (under rt->lock) */
    int nsucc, capsucc;
    int done;                   /* under rt->lock */
    int dep_failed;             /* a predecessor failed: do not run */
    hx_status status;
    int device;                 /* where it ran */
    char *msg;                  /* failure detail */
    double t_submit, t_start, t_end;
    hx_task *next;              /* scheduler queue link */
    unsigned char inline_args[64];
};

void hx_task_ref(hx_task *t);
void hx_task_unref(hx_task *t);

#endif
