/* The pool of task records (task_pool.h says why).  Under AddressSanitizer
 * an idle record is poisoned, so a task handle used after hx_task_wait
 * released it is still reported, as it would be with malloc and free. */
#include <stdlib.h>
#include <string.h>

#include "runtime/task.h"
#include "runtime/task_pool.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HX_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define HX_ASAN 1
#endif
#ifdef HX_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

void hx_task_pool_init(hx_task_pool *p)
{
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->lock, NULL);
}

void hx_task_pool_destroy(hx_task_pool *p)
{
    for (int i = 0; i < p->nidle; i++) {
        UNPOISON(p->idle[i], sizeof *p->idle[i]);
        free(p->idle[i]);
    }
    p->nidle = 0;
    while (p->live) {
        hx_task *t = p->live;
        p->live = t->pool_next;
        hx_task_release_memory(t);
        free(t);
    }
    p->alive = 0;
    pthread_mutex_destroy(&p->lock);
}

hx_task *hx_task_pool_get(hx_task_pool *p)
{
    pthread_mutex_lock(&p->lock);
    hx_task *t = p->nidle ? p->idle[--p->nidle] : NULL;
    if (t) {
        UNPOISON(t, sizeof *t);
    } else {
        pthread_mutex_unlock(&p->lock);
        if (!(t = malloc(sizeof *t)))
            return NULL;
        pthread_mutex_lock(&p->lock);
    }
    memset(t, 0, sizeof *t);
    t->pool_next = p->live;
    if (p->live)
        p->live->pool_prev = t;
    p->live = t;
    p->alive++;
    pthread_mutex_unlock(&p->lock);
    return t;
}

void hx_task_pool_put(hx_task_pool *p, hx_task *t)
{
    pthread_mutex_lock(&p->lock);
    if (t->pool_prev)
        t->pool_prev->pool_next = t->pool_next;
    else
        p->live = t->pool_next;
    if (t->pool_next)
        t->pool_next->pool_prev = t->pool_prev;
    p->alive--;
    int keep = p->nidle < HX_TASK_POOL_KEEP;
    if (keep) {
        POISON(t, sizeof *t);
        p->idle[p->nidle++] = t;
    }
    pthread_mutex_unlock(&p->lock);
    if (!keep)
        free(t);
}

uint64_t hx_task_pool_alive(hx_task_pool *p)
{
    pthread_mutex_lock(&p->lock);
    uint64_t n = p->alive;
    pthread_mutex_unlock(&p->lock);
    return n;
}
