/* Performance models' internals, shared by perfmodel*.c. */
#ifndef HX_RUNTIME_PERFMODEL_IMPL_H
#define HX_RUNTIME_PERFMODEL_IMPL_H

#include <pthread.h>

#include "runtime/perfmodel.h"
#include "runtime/sched.h"

typedef struct {
    int key;                   /* floor(4 log2(flops + bytes)) */
    uint32_t n;                /* measurements ever */
    uint32_t w, head;          /* window fill and next slot */
    float s[HX_PM_WINDOW];     /* seconds, a ring */
    float sorted[HX_PM_WINDOW]; /* the same w values in order (the median per task costs a memmove) */
    double flops, bytes;       /* mean cost of the measured tasks */
    double median;             /* of the window, kept current */
} hx_pm_bucket;

/* Exponentially weighted sums of (bytes, seconds) of one node's copies. */
typedef struct {
    double w, x, y, xx, xy;
} hx_pm_bus;

typedef struct {
    char codelet[64];
    char device[128];
    const hx_codelet *cl;      /* bound on first use; NULL for loaded entries */
    int dev;                   /* device index, -1 when not bound */
    int tainted;               /* measured under injection: never saved */
    int dirty;                 /* measured since loaded */
    int warm;                  /* ran once in this process (the first run is not recorded) */
    hx_pm_bucket *b;           /* sorted by key */
    int nb, capb;
    int reg_state;             /* 0 to fit, 1 valid, 2 not enough data */
    double ra, rb, rc;
} hx_pm_entry;

struct hx_perfmodel {
    pthread_mutex_t lock;
    hx_pm_entry *e;
    int ne, cape;
    char dir[512];
    int ndev;
    char devkey[HX_MAX_DEVICES][128];
    uint32_t tainted;
    /* Per memory node, time = latency + bytes * spb, fitted by least
     * squares over exponentially weighted sums of the copies measured. */
    hx_pm_bus bus[HX_MAX_DEVICES];
};

int hx_pm_bucket_key(double size);
double hx_pm_bucket_lo(int key);
void hx_pm_bucket_add(hx_pm_bucket *b, double flops, double bytes, double seconds);
/* After s and w were filled directly (a loaded file): sorted and median. */
void hx_pm_bucket_resort(hx_pm_bucket *b);
void hx_pm_bucket_stats(const hx_pm_bucket *b, double *median, double *mean, double *lo, double *hi);
hx_pm_bucket *hx_pm_bucket_get(hx_pm_entry *e, int key, int create);
hx_pm_entry *hx_pm_entry_add(hx_perfmodel *pm, const char *codelet, const char *device);
void hx_pm_free(hx_perfmodel *pm);
/* Fits the entry's regression (perfmodel_fit.c). */
void hx_pm_fit(hx_pm_entry *e);
/* Reads the directory's files (perfmodel_file.c). */
hx_status hx_pm_load(hx_perfmodel *pm);

#endif
