/* Sample statistics, the clock and the process's memory. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "bench/bench.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double hxb_stats_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The sample standard deviation (n - 1), as llama-bench reports it. */
void hxb_stats_mean_std(const double *v, int n, double *mean, double *std)
{
    double s = 0, q = 0;
    for (int i = 0; i < n; i++)
        s += v[i];
    *mean = n ? s / n : 0;
    for (int i = 0; i < n; i++)
        q += (v[i] - *mean) * (v[i] - *mean);
    *std = n > 1 ? sqrt(q / (n - 1)) : 0;
}

double hxb_stats_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* getrusage's ru_maxrss is the peak of the whole process so far, so every
 * combination after the largest would report the largest.  Linux lets a
 * process reset its high-water mark (clear_refs = 5) and reads it back as
 * VmHWM; elsewhere ru_maxrss is the fallback, an upper bound. */
void hxb_stats_peak_rss_reset(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
}

/* A "Key:   123 kB" line of /proc/self/status, in KiB; 0 without it. */
static unsigned long long status_kib(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t n = strlen(key);
    unsigned long long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') {
            kib = strtoull(line + n + 1, NULL, 10);
            break;
        }
    if (f)
        fclose(f);
    return kib;
}

uint64_t hxb_stats_rss(void) { return (uint64_t)status_kib("VmRSS") * 1024; }

uint64_t hxb_stats_peak_rss(void)
{
    unsigned long long kib = status_kib("VmHWM");
    if (!kib) {
        struct rusage ru;
        if (getrusage(RUSAGE_SELF, &ru) == 0)
            kib = (unsigned long long)ru.ru_maxrss;
    }
    return (uint64_t)kib * 1024;
}
