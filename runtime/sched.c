/* The scheduler front: one lock, one condition, a policy behind a vtable. */
#include <string.h>

#include "runtime/error.h"
#include "runtime/runtime.h"
#include "runtime/sched.h"
#include "runtime/task.h"

static const hx_sched_policy *const policies[] = {&hx_sched_eager, NULL};

int hx_sched_can_run(const hx_task *t, const hx_device *d)
{
    if (t->desc.device >= 0 && t->desc.device != d->info.index)
        return 0;
    if (!d->ops->can_run((hx_device *)d, t->desc.codelet))
        return 0;
    if (!d->ops->can_run_args)
        return 1;
    size_t sizes[HX_TASK_MAX_BUFFERS] = {0};
    for (int i = 0; i < t->desc.nbuffers; i++)
        sizes[i] = hx_buffer_size(t->desc.buffers[i]);
    return d->ops->can_run_args((hx_device *)d, t->desc.codelet, t->desc.args, sizes);
}

hx_status hx_sched_init(hx_sched *s, hx_runtime *rt, const char *name)
{
    memset(s, 0, sizeof *s);
    s->rt = rt;
    for (int i = 0; policies[i]; i++)
        if (strcmp(policies[i]->name, name) == 0)
            s->policy = policies[i];
    if (!s->policy) {
        char known[256] = "";
        for (int i = 0; policies[i]; i++) {
            strncat(known, i ? ", " : "", sizeof known - strlen(known) - 1);
            strncat(known, policies[i]->name, sizeof known - strlen(known) - 1);
        }
        return hx_error(HX_ERR_INVALID_ARG, "unknown scheduling policy '%s' (known: %s)", name, known);
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->work, NULL);
    hx_status st = s->policy->init ? s->policy->init(s) : HX_OK;
    if (st) {
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->work);
    }
    return st;
}

void hx_sched_deinit(hx_sched *s)
{
    if (!s->policy)
        return;
    if (s->policy->deinit)
        s->policy->deinit(s);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->work);
    s->policy = NULL;
}

void hx_sched_push(hx_sched *s, hx_task *t)
{
    pthread_mutex_lock(&s->lock);
    s->policy->push(s, t);
    pthread_cond_broadcast(&s->work);
    pthread_mutex_unlock(&s->lock);
}

hx_task *hx_sched_pop_wait(hx_sched *s, hx_device *d)
{
    pthread_mutex_lock(&s->lock);
    hx_task *t;
    while (!(t = s->policy->pop(s, d)) && !s->rt->stopping)
        pthread_cond_wait(&s->work, &s->lock);
    pthread_mutex_unlock(&s->lock);
    return t;
}

void hx_sched_shutdown(hx_sched *s)
{
    pthread_mutex_lock(&s->lock);
    s->rt->stopping = 1;
    pthread_cond_broadcast(&s->work);
    pthread_mutex_unlock(&s->lock);
}
