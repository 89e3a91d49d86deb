/* static: each task goes to the device the partitioner prefers for it
 * (the least loaded one when it prefers several), and stays there.
 * Without a usable preference (none given, or the preferred devices
 * cannot run it or left service) it goes to the least loaded capable
 * device.  Nothing moves afterwards: the plan is followed exactly. */
#include "runtime/runtime.h"
#include "runtime/sched.h"
#include "runtime/task.h"

static int static_push(hx_sched *s, hx_task *t)
{
    uint32_t el = hx_sched_eligible(s, t);
    uint32_t pref = el & t->desc.prefer;
    int d = hx_sched_least_loaded(s, pref ? pref : el);
    hx_sched_enqueue(s, d, t);
    return d;
}

static hx_task *static_pop(hx_sched *s, hx_device *d)
{
    hx_task *t = s->dev[d->info.index].head;
    if (t)
        hx_sched_dequeue(s, t);
    return t;
}

const hx_sched_policy hx_sched_static = {
    .name = "static", .follows_prefer = 1, .push = static_push, .pop = static_pop, .drain = hx_sched_drain_queues,
};
