/* The load monitor of one device: exponentially weighted busy fraction,
 * task rate and work rate over a time constant of HX_MONITOR_TAU seconds,
 * updated by the device's worker at the end of each task. */
#ifndef HX_RUNTIME_MONITOR_H
#define HX_RUNTIME_MONITOR_H

#include <pthread.h>

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
void hx_monitor_read(hx_monitor *m, double now, double *busy, double *rate, double *flops_rate);

#endif
