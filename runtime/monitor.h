/* The load monitor of one device: exponentially weighted busy fraction,
 * task rate and work rate over a time constant of HX_MONITOR_TAU seconds,
 * updated by the device's worker at the end of each task. */
#ifndef HX_RUNTIME_MONITOR_H
#define HX_RUNTIME_MONITOR_H

#include <pthread.h>
#include <stddef.h>

#define HX_MONITOR_TAU 1.0

typedef struct {
    pthread_mutex_t lock;
    double last;        /* time of the last update */
    double busy;        /* busy fraction at `last` */
    double rate;        /* tasks per second at `last` */
    double flops_rate;  /* flops per busy second */
} hx_monitor;

void hx_monitor_init(hx_monitor *m, double now);
void hx_monitor_destroy(hx_monitor *m);
void hx_monitor_task(hx_monitor *m, double t_start, double t_end, double flops);
/* Several tasks at once, in the order they ran (a graph launch's), under
 * one hold of the lock; each as hx_monitor_task. */
typedef struct {
    double t_start, t_end, flops;
} hx_monitor_span;
void hx_monitor_tasks(hx_monitor *m, const hx_monitor_span *span, size_t n);
void hx_monitor_read(hx_monitor *m, double now, double *busy, double *rate, double *flops_rate);

#endif
