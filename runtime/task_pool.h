/* Task records come from a per-runtime pool: once the runtime has seen its
 * busiest moment, submitting and completing a task allocate nothing.  At
 * most HX_TASK_POOL_KEEP idle records wait in the pool, so a burst of a
 * million tasks does not keep a million records for the life of the
 * runtime.  The pool also knows every record still handed out: the
 * runtime's "tasks alive", and the handles nobody waited for, which
 * hx_runtime_close releases.  Internal. */
#ifndef HX_RUNTIME_TASK_POOL_H
#define HX_RUNTIME_TASK_POOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define HX_TASK_POOL_KEEP 4096

struct hx_task;

typedef struct {
    pthread_mutex_t lock;
    struct hx_task *live;                    /* records handed out, doubly linked */
    uint64_t alive;                          /* how many, under `lock`            */
    struct hx_task *idle[HX_TASK_POOL_KEEP]; /* a stack of returned records       */
    int nidle;
} hx_task_pool;

void hx_task_pool_init(hx_task_pool *p);
/* Frees the idle records and those still handed out (handles never
 * waited for). */
void hx_task_pool_destroy(hx_task_pool *p);
/* A zeroed record, or NULL when memory is exhausted. */
struct hx_task *hx_task_pool_get(hx_task_pool *p);
/* Takes back a record whose last reference went (its own allocations
 * already freed). */
void hx_task_pool_put(hx_task_pool *p, struct hx_task *t);
uint64_t hx_task_pool_alive(hx_task_pool *p);

#endif
