/* eager: one central queue ordered by priority, then submission; the first
 * idle device that can run a task takes it.  Preferences are ignored. */
#include <stdlib.h>

#include "runtime/runtime.h"
#include "runtime/sched.h"
#include "runtime/task.h"

typedef struct {
    hx_task *head, *tail;
} eager_queue;

static hx_status eager_init(hx_sched *s)
{
    s->state = calloc(1, sizeof(eager_queue));
    return s->state ? HX_OK : HX_ERR_NO_MEMORY;
}

static void eager_deinit(hx_sched *s) { free(s->state); }

static int eager_push(hx_sched *s, hx_task *t)
{
    eager_queue *q = s->state;
    t->next = NULL;
    if (!q->head || t->desc.priority <= q->tail->desc.priority) {
        if (q->tail)
            q->tail->next = t;
        else
            q->head = t;
        q->tail = t;
        return -1;
    }
    hx_task **p = &q->head;
    while (*p && (*p)->desc.priority >= t->desc.priority)
        p = &(*p)->next;
    t->next = *p;
    *p = t;
    return -1;
}

static hx_task *eager_pop(hx_sched *s, hx_device *d)
{
    eager_queue *q = s->state;
    uint32_t bit = 1u << d->info.index;
    hx_task *prev = NULL;
    for (hx_task *t = q->head; t; prev = t, t = t->next) {
        if (!(hx_sched_eligible(s, t) & bit))
            continue;
        if (prev)
            prev->next = t->next;
        else
            q->head = t->next;
        if (q->tail == t)
            q->tail = prev;
        t->next = NULL;
        return t;
    }
    return NULL;
}

static hx_task *eager_drain(hx_sched *s)
{
    eager_queue *q = s->state;
    hx_task *list = q->head;
    q->head = q->tail = NULL;
    return list;
}

const hx_sched_policy hx_sched_eager = {
    .name = "eager", .init = eager_init, .deinit = eager_deinit, .push = eager_push, .pop = eager_pop,
    .drain = eager_drain,
};
