/* Device workers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/buffer.h"
#include "runtime/error.h"
#include "runtime/task.h"
#include "runtime/worker.h"

static hx_status prepare(hx_device *d, hx_task *t, hx_exec *x)
{
    const hx_task_desc *desc = &t->desc;
    memset(x, 0, sizeof *x);
    x->codelet = desc->codelet;
    x->args = desc->args;
    x->nbuffers = desc->nbuffers;
    for (int i = 0; i < desc->nbuffers; i++) {
        hx_buffer *b = desc->buffers[i];
        hx_status s = hx_buffer_prepare(b, d, desc->modes[i], &x->handles[i]);
        if (s)
            return s;
        x->host[i] = b->host;
        x->sizes[i] = b->size;
        x->modes[i] = desc->modes[i];
    }
    return HX_OK;
}

static hx_status finish(hx_device *d, hx_task *t)
{
    hx_status first = HX_OK;
    for (int i = 0; i < t->desc.nbuffers; i++) {
        if (!(t->desc.modes[i] & HX_W))
            continue;
        hx_status s = hx_buffer_written(t->desc.buffers[i], d);
        if (s && !first)
            first = s;
    }
    return first;
}

static void execute(hx_device *d, hx_task *t)
{
    hx_runtime *rt = d->rt;
    hx_worker *w = d->worker;
    if (t->dep_failed) {
        hx_task_complete(rt, t, HX_ERR_TASK_FAILED, t->msg ? t->msg : "a task it depends on failed");
        return;
    }
    hx_exec x;
    hx_error_clear();
    t->device = d->info.index;
    t->t_start = hx_now();
    hx_status s = prepare(d, t, &x);
    if (s == HX_OK)
        s = d->ops->run(d, &x);
    if (s == HX_OK)
        s = finish(d, t);
    t->t_end = hx_now();
    atomic_fetch_add(&w->tasks, 1);
    atomic_fetch_add(&w->busy_ns, (uint64_t)((t->t_end - t->t_start) * 1e9));
    char msg[512] = "";
    if (s != HX_OK)
        snprintf(msg, sizeof msg, "on device %d (%s): %s", d->info.index, d->info.name,
                 hx_last_error()[0] ? hx_last_error() : hx_status_str(s));
    hx_task_complete(rt, t, s, msg);
}

static void *worker_main(void *arg)
{
    hx_device *d = arg;
    hx_worker *w = d->worker;
    for (hx_task *t; (t = hx_sched_pop_wait(&d->rt->sched, d));)
        execute(d, t);
    if (d->ops->worker_stop)
        d->ops->worker_stop(d);
    (void)w;
    return NULL;
}

/* The backend's start hook runs on the worker thread itself (so the CPU
 * team is pinned from there); the opener waits for its verdict. */
typedef struct {
    hx_device *d;
    pthread_mutex_t m;
    pthread_cond_t c;
    int ready;
    hx_status s;
    char msg[512];
} start_ctx;

static void *worker_boot(void *arg)
{
    start_ctx *c = arg;
    hx_device *d = c->d;
    hx_status s = d->ops->worker_start ? d->ops->worker_start(d) : HX_OK;
    pthread_mutex_lock(&c->m);
    c->s = s;
    if (s)
        snprintf(c->msg, sizeof c->msg, "%s", hx_last_error());
    c->ready = 1;
    pthread_cond_signal(&c->c);
    pthread_mutex_unlock(&c->m);
    /* `c` lives on the opener's stack: not touched past this point. */
    return s == HX_OK ? worker_main(d) : NULL;
}

hx_status hx_worker_start(hx_device *d)
{
    hx_worker *w = calloc(1, sizeof *w);
    if (!w)
        return hx_error(HX_ERR_NO_MEMORY, "worker for device %d", d->info.index);
    d->worker = w;
    start_ctx c = {.d = d};
    pthread_mutex_init(&c.m, NULL);
    pthread_cond_init(&c.c, NULL);
    if (pthread_create(&w->thread, NULL, worker_boot, &c) != 0) {
        pthread_mutex_destroy(&c.m);
        pthread_cond_destroy(&c.c);
        return hx_error(HX_ERR_DEVICE, "cannot start the worker of device %d", d->info.index);
    }
    w->started = 1;
    pthread_mutex_lock(&c.m);
    while (!c.ready)
        pthread_cond_wait(&c.c, &c.m);
    pthread_mutex_unlock(&c.m);
    pthread_mutex_destroy(&c.m);
    pthread_cond_destroy(&c.c);
    if (c.s)
        return hx_error(c.s, "%s", c.msg);
    return HX_OK;
}

void hx_worker_join(hx_device *d)
{
    hx_worker *w = d->worker;
    if (w && w->started)
        pthread_join(w->thread, NULL);
    free(w);
    d->worker = NULL;
}
