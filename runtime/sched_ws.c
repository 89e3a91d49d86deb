/* ws: work stealing.  Each device has its own queue; a ready task goes to
 * the device it prefers, else to the device whose worker made it ready
 * (its inputs were just written there), else to the least loaded one.  A
 * device with nothing to do steals the newest task it can run from the
 * longest queue. */
#include "runtime/runtime.h"
#include "runtime/sched.h"
#include "runtime/task.h"

static int ws_push(hx_sched *s, hx_task *t)
{
    uint32_t el = hx_sched_eligible(s, t);
    uint32_t pref = el & t->desc.prefer;
    int self = hx_sched_current();
    int d;
    if (pref)
        d = hx_sched_least_loaded(s, pref);
    else if (self >= 0 && (el & (1u << self)))
        d = self;
    else
        d = hx_sched_least_loaded(s, el);
    hx_sched_enqueue(s, d, t);
    /* A busy owner leaves the task to a thief. */
    s->wake_helper = s->dev[d].running || s->dev[d].depth > 1;
    return d;
}

static hx_task *ws_pop(hx_sched *s, hx_device *dev)
{
    int me = dev->info.index;
    hx_task *t = s->dev[me].head;
    if (t) {
        hx_sched_dequeue(s, t);
        return t;
    }
    uint32_t bit = 1u << me;
    int victim = -1;
    for (int v = 0; v < s->rt->ndevices; v++)
        if (v != me && s->dev[v].depth && (victim < 0 || s->dev[v].depth > s->dev[victim].depth))
            victim = v;
    if (victim < 0)
        return NULL;
    for (t = s->dev[victim].tail; t; t = t->prev)
        if (hx_sched_eligible(s, t) & bit) {
            hx_sched_dequeue(s, t);
            hx_sched_note_migration(s, t, victim, me, "stolen");
            return t;
        }
    return NULL;
}

const hx_sched_policy hx_sched_ws = {
    .name = "ws", .push = ws_push, .pop = ws_pop, .drain = hx_sched_drain_queues,
};
