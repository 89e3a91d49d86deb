/* Performance models: history with robust statistics, a regression for
 * unseen sizes, and a bus model.  Files: runtime/perfmodel_file.c. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "runtime/perfmodel_impl.h"

/* Bus defaults until a copy is measured: a PCIe 3 x16 link, roughly. */
#define BUS_DEFAULT_SPB (1.0 / 8e9)
#define BUS_DECAY 0.99
#define BUS_LATENCY_S 10e-6

/* Never submitted: a key of the models only. */
const hx_codelet hx_launch_codelet = {.name = "task_launch"};

int hx_pm_bucket_key(double size)
{
    if (!(size > 1))
        return 0;
    double k = floor(4 * log2(size));
    return k > 1000 ? 1000 : (int)k;
}

double hx_pm_bucket_lo(int key) { return key <= 0 ? 0 : exp2(key / 4.0); }

/* Runs after every task: an insertion sort of at most 16 values costs a
 * fraction of a qsort call through a comparison function. */
double hx_perfmodel_median(const float *x, int n)
{
    float v[HX_PM_WINDOW];
    if (n <= 0)
        return 0;
    if (n > HX_PM_WINDOW)
        n = HX_PM_WINDOW;
    for (int i = 0; i < n; i++) {
        float e = x[i];
        int j = i;
        for (; j > 0 && v[j - 1] > e; j--)
            v[j] = v[j - 1];
        v[j] = e;
    }
    return n % 2 ? v[n / 2] : 0.5 * ((double)v[n / 2 - 1] + v[n / 2]);
}

static double sorted_median(const float *v, uint32_t n)
{
    return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * ((double)v[n / 2 - 1] + v[n / 2]);
}

void hx_pm_bucket_stats(const hx_pm_bucket *b, double *median, double *mean, double *lo, double *hi)
{
    uint32_t n = b->w;
    double sum = 0;
    for (uint32_t i = 0; i < n; i++)
        sum += b->s[i];
    *median = sorted_median(b->sorted, n);
    if (mean)
        *mean = n ? sum / n : 0;
    if (lo)
        *lo = n ? b->sorted[0] : 0;
    if (hi)
        *hi = n ? b->sorted[n - 1] : 0;
}

/* First index in v[0..n) whose value is not below x. */
static uint32_t lower_bound(const float *v, uint32_t n, float x)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void hx_pm_bucket_resort(hx_pm_bucket *b)
{
    for (uint32_t i = 0; i < b->w; i++) {
        float e = b->s[i];
        uint32_t j = i;
        for (; j > 0 && b->sorted[j - 1] > e; j--)
            b->sorted[j] = b->sorted[j - 1];
        b->sorted[j] = e;
    }
    b->median = sorted_median(b->sorted, b->w);
}

/* Runs after every task: the window's sorted copy loses the value the ring
 * overwrites and gains the new one, two binary searches and memmoves. */
void hx_pm_bucket_add(hx_pm_bucket *b, double flops, double bytes, double seconds)
{
    /* Saturates rather than wrapping to 0 (a division by zero below): a
     * server runs some buckets' tasks billions of times; from there on the
     * means move by 2^-32 per task, which is all they need. */
    if (b->n < UINT32_MAX)
        b->n++;
    /* Running means of the cost: the regression's abscissae. */
    b->flops += (flops - b->flops) / b->n;
    b->bytes += (bytes - b->bytes) / b->n;
    float x = (float)seconds;
    if (b->w == HX_PM_WINDOW) {
        uint32_t k = lower_bound(b->sorted, b->w, b->s[b->head]);
        memmove(b->sorted + k, b->sorted + k + 1, (b->w - k - 1) * sizeof *b->sorted);
        b->w--;
    }
    uint32_t k = lower_bound(b->sorted, b->w, x);
    memmove(b->sorted + k + 1, b->sorted + k, (b->w - k) * sizeof *b->sorted);
    b->sorted[k] = x;
    b->w++;
    b->s[b->head] = x;
    b->head = (b->head + 1) % HX_PM_WINDOW;
    b->median = sorted_median(b->sorted, b->w);
}

hx_pm_entry *hx_pm_entry_add(hx_perfmodel *pm, const char *codelet, const char *device)
{
    if (pm->ne == pm->cape) {
        int cap = pm->cape ? 2 * pm->cape : 16;
        hx_pm_entry *e = realloc(pm->e, (size_t)cap * sizeof *e);
        if (!e)
            return NULL;
        pm->e = e;
        pm->cape = cap;
    }
    hx_pm_entry *e = &pm->e[pm->ne++];
    memset(e, 0, sizeof *e);
    snprintf(e->codelet, sizeof e->codelet, "%s", codelet);
    snprintf(e->device, sizeof e->device, "%s", device);
    e->dev = -1;
    return e;
}

hx_pm_bucket *hx_pm_bucket_get(hx_pm_entry *e, int key, int create)
{
    int lo = 0, hi = e->nb;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (e->b[mid].key < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < e->nb && e->b[lo].key == key)
        return &e->b[lo];
    if (!create)
        return NULL;
    if (e->nb == e->capb) {
        int cap = e->capb ? 2 * e->capb : 8;
        hx_pm_bucket *b = realloc(e->b, (size_t)cap * sizeof *b);
        if (!b)
            return NULL;
        e->b = b;
        e->capb = cap;
    }
    memmove(&e->b[lo + 1], &e->b[lo], (size_t)(e->nb - lo) * sizeof *e->b);
    e->nb++;
    memset(&e->b[lo], 0, sizeof e->b[lo]);
    e->b[lo].key = key;
    e->reg_state = 0;
    return &e->b[lo];
}

hx_status hx_perfmodel_open(hx_perfmodel **out, const char *dir, const char *const *devkeys, int ndev)
{
    *out = NULL;
    if (ndev < 0 || ndev > HX_MAX_DEVICES)
        return hx_error(HX_ERR_INVALID_ARG, "perfmodel: %d devices", ndev);
    hx_perfmodel *pm = calloc(1, sizeof *pm);
    if (!pm)
        return hx_error(HX_ERR_NO_MEMORY, "performance models");
    pthread_mutex_init(&pm->lock, NULL);
    pm->ndev = ndev;
    for (int d = 0; d < ndev; d++)
        snprintf(pm->devkey[d], sizeof pm->devkey[d], "%s", devkeys[d]);
    if (dir && *dir)
        snprintf(pm->dir, sizeof pm->dir, "%s", dir);
    hx_status s = pm->dir[0] ? hx_pm_load(pm) : HX_OK;
    if (s) {
        hx_perfmodel_close(pm);
        return s;
    }
    *out = pm;
    return HX_OK;
}

void hx_pm_free(hx_perfmodel *pm)
{
    if (!pm)
        return;
    for (int i = 0; i < pm->ne; i++)
        free(pm->e[i].b);
    free(pm->e);
    pthread_mutex_destroy(&pm->lock);
    free(pm);
}

void hx_perfmodel_close(hx_perfmodel *pm)
{
    if (!pm)
        return;
    if (pm->dir[0])
        hx_perfmodel_save(pm); /* a cache: failing to write it loses nothing that matters */
    hx_pm_free(pm);
}

/* The entry of (codelet, device), bound to the codelet's address after
 * the first lookup by name.  Under pm->lock. */
static hx_pm_entry *find(hx_perfmodel *pm, const hx_codelet *cl, int dev, int create)
{
    int tainted = (pm->tainted >> dev) & 1;
    for (int i = 0; i < pm->ne; i++) {
        hx_pm_entry *e = &pm->e[i];
        if (e->cl == cl && e->dev == dev)
            return e;
    }
    const char *name = cl->name ? cl->name : "";
    for (int i = 0; i < pm->ne && !tainted; i++) {
        hx_pm_entry *e = &pm->e[i];
        if (e->dev < 0 && !e->tainted && !strcmp(e->codelet, name) && !strcmp(e->device, pm->devkey[dev])) {
            e->cl = cl;
            e->dev = dev;
            return e;
        }
    }
    if (!create || !*name)
        return NULL;
    hx_pm_entry *e = hx_pm_entry_add(pm, name, pm->devkey[dev]);
    if (e) {
        e->cl = cl;
        e->dev = dev;
        e->tainted = tainted;
    }
    return e;
}

/* Under pm->lock. */
static void record_locked(hx_perfmodel *pm, const hx_codelet *cl, int dev, double flops, double bytes,
                          double seconds, int skip_cold)
{
    if (!(seconds >= 0) || !isfinite(seconds))
        return;
    hx_pm_entry *e = find(pm, cl, dev, 1);
    int cold = skip_cold && e && !e->warm;
    if (e)
        e->warm = 1;
    hx_pm_bucket *b = e && !cold ? hx_pm_bucket_get(e, hx_pm_bucket_key(flops + bytes), 1) : NULL;
    if (b) {
        uint32_t before = b->w;
        hx_pm_bucket_add(b, flops, bytes, seconds);
        e->dirty = 1;
        /* The fit uses calibrated medians: refit when one appears or moves. */
        if (b->w >= HX_PM_MIN_SAMPLES || before >= HX_PM_MIN_SAMPLES)
            e->reg_state = 0;
    }
}

static void record(hx_perfmodel *pm, const hx_codelet *cl, int dev, double flops, double bytes, double seconds,
                   int skip_cold)
{
    if (!pm || dev < 0 || dev >= pm->ndev)
        return;
    pthread_mutex_lock(&pm->lock);
    record_locked(pm, cl, dev, flops, bytes, seconds, skip_cold);
    pthread_mutex_unlock(&pm->lock);
}

void hx_perfmodel_record_runs(hx_perfmodel *pm, int dev, const hx_pm_run *runs, size_t n)
{
    if (!pm || dev < 0 || dev >= pm->ndev || !n)
        return;
    pthread_mutex_lock(&pm->lock);
    for (size_t i = 0; i < n; i++)
        record_locked(pm, runs[i].cl, dev, runs[i].flops, runs[i].bytes, runs[i].seconds, 1);
    pthread_mutex_unlock(&pm->lock);
}

void hx_perfmodel_record(hx_perfmodel *pm, const hx_codelet *cl, int dev, double flops, double bytes,
                         double seconds)
{
    record(pm, cl, dev, flops, bytes, seconds, 0);
}

void hx_perfmodel_record_run(hx_perfmodel *pm, const hx_codelet *cl, int dev, double flops, double bytes,
                             double seconds)
{
    record(pm, cl, dev, flops, bytes, seconds, 1);
}

int hx_perfmodel_estimate(hx_perfmodel *pm, const hx_codelet *cl, int dev, double flops, double bytes,
                          double *seconds)
{
    if (!pm || dev < 0 || dev >= pm->ndev)
        return 0;
    int how = 0;
    pthread_mutex_lock(&pm->lock);
    hx_pm_entry *e = find(pm, cl, dev, 0);
    if (e) {
        hx_pm_bucket *b = hx_pm_bucket_get(e, hx_pm_bucket_key(flops + bytes), 0);
        if (b && b->w >= HX_PM_MIN_SAMPLES) {
            *seconds = b->median;
            how = 1;
        } else {
            if (e->reg_state == 0)
                hx_pm_fit(e);
            if (e->reg_state == 1) {
                double t = e->ra + e->rb * flops + e->rc * bytes;
                *seconds = t > 1e-7 ? t : 1e-7;
                how = 2;
            } else if (b && b->w > 0) {
                /* A few samples: the most favourable one.  Enough to stop
                 * sending tasks to a device far too slow for them, and
                 * optimistic enough that a close call gets measured again. */
                double med, lo;
                hx_pm_bucket_stats(b, &med, NULL, &lo, NULL);
                *seconds = lo;
                how = 3;
            }
        }
    }
    pthread_mutex_unlock(&pm->lock);
    return how;
}

void hx_perfmodel_taint(hx_perfmodel *pm, int dev)
{
    if (!pm || dev < 0 || dev >= pm->ndev)
        return;
    pthread_mutex_lock(&pm->lock);
    if (!((pm->tainted >> dev) & 1)) {
        pm->tainted |= 1u << dev;
        /* The device's real models stay as they were, saved untouched. */
        for (int i = 0; i < pm->ne; i++)
            if (pm->e[i].dev == dev) {
                pm->e[i].dev = -1;
                pm->e[i].cl = NULL;
            }
    }
    pthread_mutex_unlock(&pm->lock);
}

/* A copy's time is a latency plus bytes over a bandwidth; both are
 * fitted, since a small copy says nothing of the bandwidth (reading one as
 * bytes / seconds once made a 55 GB/s link look like 0.5 GB/s, and dmda
 * kept every weight off the GPU).  Older copies weigh less (BUS_DECAY per
 * copy), so the fit follows a link whose load changes. */
void hx_perfmodel_bus_record(hx_perfmodel *pm, int node, size_t bytes, double seconds)
{
    if (!pm || node <= 0 || node >= HX_MAX_DEVICES || bytes == 0 || !(seconds > 0) || !isfinite(seconds))
        return;
    pthread_mutex_lock(&pm->lock);
    double x = (double)bytes;
    hx_pm_bus *b = &pm->bus[node];
    b->w = BUS_DECAY * b->w + 1;
    b->x = BUS_DECAY * b->x + x;
    b->y = BUS_DECAY * b->y + seconds;
    b->xx = BUS_DECAY * b->xx + x * x;
    b->xy = BUS_DECAY * b->xy + x * seconds;
    pthread_mutex_unlock(&pm->lock);
}

double hx_perfmodel_bus_estimate(hx_perfmodel *pm, int node, size_t bytes)
{
    if (!pm || node <= 0 || node >= HX_MAX_DEVICES)
        return 0;
    pthread_mutex_lock(&pm->lock);
    const hx_pm_bus *b = &pm->bus[node];
    double lat = BUS_LATENCY_S, spb = BUS_DEFAULT_SPB;
    if (b->w > 0) {
        double mx = b->x / b->w, my = b->y / b->w;
        double var = b->xx / b->w - mx * mx, cov = b->xy / b->w - mx * my;
        if (var > 1e-6 * mx * mx && cov > 0) {
            /* Sizes differ enough to tell latency from bandwidth. */
            spb = cov / var;
            lat = my - spb * mx;
            if (lat < 0) {
                lat = 0;
                spb = b->xy / b->xx;
            }
        } else if (mx > 0) {
            /* One size only: keep the default latency, the rest is bandwidth. */
            spb = my > lat ? (my - lat) / mx : my / mx;
        }
    }
    pthread_mutex_unlock(&pm->lock);
    return lat + spb * (double)bytes;
}

void hx_perfmodel_device_key(const char *family, const hx_device_info *d, char *out, size_t size)
{
    snprintf(out, size, "%s%s:%s:%d", family, d->emulated ? "-emulated" : "", d->name,
             d->compute_units);
}
