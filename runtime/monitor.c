/* Exponentially weighted averages over time: between updates a quantity
 * decays by exp(-dt/tau) towards what the interval showed, so the value
 * does not depend on how many tasks there were, only on when. */
#include <math.h>

#include "runtime/monitor.h"

void hx_monitor_init(hx_monitor *m, double now)
{
    pthread_mutex_init(&m->lock, NULL);
    m->last = now;
    m->busy = m->rate = m->flops_rate = 0;
}

void hx_monitor_destroy(hx_monitor *m) { pthread_mutex_destroy(&m->lock); }

/* Under m->lock. */
static void task_locked(hx_monitor *m, double t_start, double t_end, double flops)
{
    double idle = t_start > m->last ? t_start - m->last : 0;
    double busy = t_end > t_start ? t_end - t_start : 0;
    double di = exp(-idle / HX_MONITOR_TAU), db = exp(-busy / HX_MONITOR_TAU);
    m->busy = m->busy * di * db + (1 - db);
    /* One completion is an impulse of 1/tau in the rate's average. */
    m->rate = m->rate * di * db + 1 / HX_MONITOR_TAU;
    if (flops > 0 && busy > 0) {
        double a = 1 - db;
        if (a < 0.05)
            a = 0.05; /* short tasks still move the estimate */
        m->flops_rate = m->flops_rate ? (1 - a) * m->flops_rate + a * flops / busy : flops / busy;
    }
    m->last = t_end > m->last ? t_end : m->last;
}

void hx_monitor_task(hx_monitor *m, double t_start, double t_end, double flops)
{
    pthread_mutex_lock(&m->lock);
    task_locked(m, t_start, t_end, flops);
    pthread_mutex_unlock(&m->lock);
}

void hx_monitor_tasks(hx_monitor *m, const hx_monitor_span *span, size_t n)
{
    if (!n)
        return;
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < n; i++)
        task_locked(m, span[i].t_start, span[i].t_end, span[i].flops);
    pthread_mutex_unlock(&m->lock);
}

void hx_monitor_read(hx_monitor *m, double now, double *busy, double *rate, double *flops_rate)
{
    pthread_mutex_lock(&m->lock);
    double decay = now > m->last ? exp(-(now - m->last) / HX_MONITOR_TAU) : 1;
    *busy = m->busy * decay;
    *rate = m->rate * decay;
    *flops_rate = m->flops_rate;
    pthread_mutex_unlock(&m->lock);
}
