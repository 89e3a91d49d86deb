/* The regression of a codelet on a device: time = a + b*flops + c*bytes,
 * fitted to the calibrated buckets' medians (not to raw samples, so an
 * outlier cannot bend it).  Errors are weighted by 1/time^2, i.e. relative:
 * a 10 us task matters as much as a 10 ms one.  Among the sub-models
 * (dropping terms) the best with non-negative coefficients wins; a cost
 * cannot shrink as a task grows. */
#include <math.h>
#include <string.h>

#include "runtime/perfmodel_impl.h"

#define MAXP 64

typedef struct {
    double x[3]; /* 1, flops, bytes (scaled) */
    double t, w;
} point;

/* Solves the k x k system in place (partial pivoting); 0 if singular. */
static int solve(double a[3][3], double *r, int k)
{
    for (int c = 0; c < k; c++) {
        int p = c;
        for (int i = c + 1; i < k; i++)
            if (fabs(a[i][c]) > fabs(a[p][c]))
                p = i;
        if (fabs(a[p][c]) < 1e-300)
            return 0;
        if (p != c) {
            for (int j = 0; j < k; j++) {
                double tmp = a[c][j];
                a[c][j] = a[p][j];
                a[p][j] = tmp;
            }
            double tmp = r[c];
            r[c] = r[p];
            r[p] = tmp;
        }
        for (int i = c + 1; i < k; i++) {
            double f = a[i][c] / a[c][c];
            for (int j = c; j < k; j++)
                a[i][j] -= f * a[c][j];
            r[i] -= f * r[c];
        }
    }
    for (int c = k - 1; c >= 0; c--) {
        for (int j = c + 1; j < k; j++)
            r[c] -= a[c][j] * r[j];
        r[c] /= a[c][c];
    }
    return 1;
}

/* Fits the terms of `mask` (bit i = x[i]); returns the weighted error or
 * -1 when the fit is impossible or has a negative coefficient. */
static double fit_terms(const point *p, int n, int mask, double coef[3])
{
    int idx[3], k = 0;
    for (int i = 0; i < 3; i++)
        if (mask & (1 << i))
            idx[k++] = i;
    if (n < k)
        return -1;
    double a[3][3] = {{0}}, r[3] = {0};
    for (int i = 0; i < n; i++)
        for (int u = 0; u < k; u++) {
            r[u] += p[i].w * p[i].x[idx[u]] * p[i].t;
            for (int v = 0; v < k; v++)
                a[u][v] += p[i].w * p[i].x[idx[u]] * p[i].x[idx[v]];
        }
    if (!solve(a, r, k))
        return -1;
    memset(coef, 0, 3 * sizeof *coef);
    for (int u = 0; u < k; u++) {
        if (!isfinite(r[u]) || r[u] < 0)
            return -1;
        coef[idx[u]] = r[u];
    }
    double err = 0;
    for (int i = 0; i < n; i++) {
        double pred = coef[0] * p[i].x[0] + coef[1] * p[i].x[1] + coef[2] * p[i].x[2];
        err += p[i].w * (pred - p[i].t) * (pred - p[i].t);
    }
    return err;
}

void hx_pm_fit(hx_pm_entry *e)
{
    point p[MAXP];
    int n = 0;
    double sf = 0, sb = 0;
    for (int i = 0; i < e->nb && n < MAXP; i++) {
        const hx_pm_bucket *b = &e->b[i];
        if (b->w < HX_PM_MIN_SAMPLES || !(b->median > 0))
            continue;
        p[n] = (point){{1, b->flops, b->bytes}, b->median, 1 / (b->median * b->median)};
        sf = fmax(sf, b->flops);
        sb = fmax(sb, b->bytes);
        n++;
    }
    e->reg_state = 2;
    if (n < 2)
        return;
    /* Scaled columns keep the normal equations well conditioned. */
    sf = sf > 0 ? sf : 1;
    sb = sb > 0 ? sb : 1;
    for (int i = 0; i < n; i++) {
        p[i].x[1] /= sf;
        p[i].x[2] /= sb;
    }
    /* Fewer terms first: a term must earn its place by 1%. */
    static const int masks[] = {1, 2, 4, 3, 5, 6, 7};
    double best = -1, coef[3], best_coef[3] = {0};
    for (size_t m = 0; m < sizeof masks / sizeof *masks; m++) {
        double err = fit_terms(p, n, masks[m], coef);
        if (err >= 0 && (best < 0 || err < 0.99 * best)) {
            best = err;
            memcpy(best_coef, coef, sizeof coef);
        }
    }
    if (best < 0)
        return;
    e->ra = best_coef[0];
    e->rb = best_coef[1] / sf;
    e->rc = best_coef[2] / sb;
    e->reg_state = 1;
}
