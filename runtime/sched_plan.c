/* plan and ngl: the placement is decided ahead, for a whole step, by the
 * partitioner's placement planner (partitioner/placement.c), and each task
 * carries it as its preference; these policies follow it exactly, as
 * static does, and keep what the planner needs to notice a device whose
 * speed changed: each task's estimate (the performance models, or the
 * simulated device's own times), so that the front's slowness (the median
 * of the last actual / expected ratios) moves when a device slows down.
 *
 *   plan  the planner's choice: every task's device from the performance
 *         and bus models, over layers with transfers between them.
 *   ngl   llama.cpp's -ngl: the most layers that fit in the GPU's memory
 *         on the GPU, the rest on the CPU. */
#include "runtime/perfmodel.h"
#include "runtime/runtime.h"
#include "runtime/sched.h"
#include "runtime/sim.h"
#include "runtime/task.h"

int hx_sched_estimate(hx_runtime *rt, int d, const hx_codelet *cl, hx_precision p, double flops, double bytes,
                      double *sec)
{
    if (rt->executor->simulated) {
        *sec = hx_sim_estimate(rt, d, cl, p, flops, bytes);
        return 1;
    }
    return rt->sched.pm && hx_perfmodel_estimate(rt->sched.pm, cl, d, flops, bytes, sec) && *sec > 0;
}

double hx_sched_link_seconds(hx_runtime *rt, int d, double bytes)
{
    hx_device *dev = rt->devices[d];
    if (dev->info.memory_node == 0 || bytes <= 0)
        return 0;
    if (rt->executor->simulated)
        return hx_machine_link_time(hx_sim_device_described(dev), bytes);
    return rt->sched.pm ? hx_perfmodel_bus_estimate(rt->sched.pm, dev->info.memory_node, (size_t)bytes) : 0;
}

double hx_sched_slowness(hx_sched *s, int d)
{
    pthread_mutex_lock(&s->lock);
    double x = s->dev[d].slowness;
    pthread_mutex_unlock(&s->lock);
    return x;
}

double hx_sched_slowness_recent(hx_sched *s, int d, double max_age)
{
    double now = hx_runtime_now(s->rt);
    pthread_mutex_lock(&s->lock);
    double x = s->dev[d].nratio && now - s->dev[d].ratio_at > max_age ? 1.0 : s->dev[d].slowness;
    pthread_mutex_unlock(&s->lock);
    return x;
}

static hx_precision precision_of(const hx_task *t)
{
    if (!t->desc.codelet->precision)
        return HX_PREC_F32;
    size_t sizes[HX_TASK_MAX_BUFFERS] = {0};
    for (int i = 0; i < t->desc.nbuffers; i++)
        sizes[i] = hx_buffer_size(t->desc.buffers[i]);
    return t->desc.codelet->precision(t->desc.args, sizes);
}

static int planned_push(hx_sched *s, hx_task *t)
{
    uint32_t el = hx_sched_eligible(s, t);
    uint32_t pref = el & t->desc.prefer;
    int d = hx_sched_least_loaded(s, pref ? pref : el);
    double flops, bytes, sec;
    hx_task_cost(t, &flops, &bytes);
    t->expected = hx_sched_estimate(s->rt, d, t->desc.codelet, precision_of(t), flops, bytes, &sec) ? sec : 0;
    hx_sched_enqueue(s, d, t);
    return d;
}

static hx_task *planned_pop(hx_sched *s, hx_device *d)
{
    hx_task *t = s->dev[d->info.index].head;
    if (t)
        hx_sched_dequeue(s, t);
    return t;
}

const hx_sched_policy hx_sched_plan = {
    .name = "plan", .follows_prefer = 1, .placement = HX_PLACE_PLAN, .push = planned_push, .pop = planned_pop,
    .drain = hx_sched_drain_queues,
};

const hx_sched_policy hx_sched_ngl = {
    .name = "ngl", .follows_prefer = 1, .placement = HX_PLACE_NGL, .push = planned_push, .pop = planned_pop,
    .drain = hx_sched_drain_queues,
};
