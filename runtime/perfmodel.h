/* Performance models: how long a codelet takes on a device, by size.
 *
 * History: per codelet x device x size bucket (a quarter octave of the
 * task's footprint, flops + bytes), the last HX_PM_WINDOW times; the
 * estimate is their median once HX_PM_MIN_SAMPLES were seen, so one
 * outlier (a page fault, a preempted thread, a 100x hiccup) moves nothing.
 * Regression: for sizes not seen, time = a + b*flops + c*bytes fitted by
 * least squares (relative error) on the buckets' medians.
 * Persisted per host in a directory, one file per codelet; measurements of
 * a device under injected slowdown are kept apart and never saved.
 * Also a bus model: seconds per byte between host memory and a node. */
#ifndef HX_RUNTIME_PERFMODEL_H
#define HX_RUNTIME_PERFMODEL_H

#include "hetero.h"

#define HX_PM_WINDOW 64
#define HX_PM_MIN_SAMPLES 3

typedef struct hx_perfmodel hx_perfmodel;

/* `dir` NULL or "" keeps the models in memory; devkeys[d] names device d
 * across runs (hx_perfmodel_device_key).  Files are read now. */
hx_status hx_perfmodel_open(hx_perfmodel **out, const char *dir, const char *const *devkeys, int ndev);
/* Saves what was measured (when there is a directory) and frees. */
void hx_perfmodel_close(hx_perfmodel *pm);
hx_status hx_perfmodel_save(hx_perfmodel *pm);
/* From now on nothing is saved (the simulator's models). */
void hx_perfmodel_read_only(hx_perfmodel *pm);

void hx_perfmodel_record(hx_perfmodel *pm, const hx_codelet *cl, int dev, double flops, double bytes,
                         double seconds);
/* A measured run: the first one of a codelet on a device in this process
 * (program build, cold caches) is not recorded. */
void hx_perfmodel_record_run(hx_perfmodel *pm, const hx_codelet *cl, int dev, double flops, double bytes,
                             double seconds);
/* Several runs of one device at once (a graph launch's tasks), under one
 * hold of the model's lock; each as hx_perfmodel_record_run. */
typedef struct {
    const hx_codelet *cl;
    double flops, bytes, seconds;
} hx_pm_run;
void hx_perfmodel_record_runs(hx_perfmodel *pm, int dev, const hx_pm_run *runs, size_t n);
/* 1: from the size's history (median), 2: from the regression, 3: from the
 * size's first samples (the smallest), 0: unknown. */
int hx_perfmodel_estimate(hx_perfmodel *pm, const hx_codelet *cl, int dev, double flops, double bytes,
                          double *seconds);
/* A device's time per task outside its kernels, as a codelet of its own
 * (flops and bytes 0): from the moment a task could start (handed to the
 * scheduler, its device free) to its kernel starting, and on a device in
 * host memory its buffers' preparation too.  Workers record the mean of
 * HX_PM_LAUNCH_BATCH tasks as one sample; the simulator charges it per
 * task ("launch = measured", runtime/machine.c). */
extern const hx_codelet hx_launch_codelet;
#define HX_PM_LAUNCH_BATCH 32

/* From now on, device `dev`'s measurements are not its own (injection). */
void hx_perfmodel_taint(hx_perfmodel *pm, int dev);

/* The median of n <= HX_PM_WINDOW values. */
double hx_perfmodel_median(const float *v, int n);

void hx_perfmodel_bus_record(hx_perfmodel *pm, int node, size_t bytes, double seconds);
double hx_perfmodel_bus_estimate(hx_perfmodel *pm, int node, size_t bytes);

/* "<family>:<name>:<compute units>", the device's identity across runs. */
void hx_perfmodel_device_key(const char *family, const hx_device_info *d, char *out, size_t size);
/* The default directory (see hx_runtime_options.perfmodel_dir); NULL
 * when models stay in memory. */
const char *hx_perfmodel_default_dir(char *buf, size_t size);

#endif
