/* Sample statistics, the clock and peak memory. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "bench/bench.h"

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

uint64_t hxb_stats_peak_rss(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) {
            kib = strtoull(line + 6, NULL, 10);
            break;
        }
    if (f)
        fclose(f);
    if (!kib) {
        struct rusage ru;
        if (getrusage(RUSAGE_SELF, &ru) == 0)
            kib = (unsigned long long)ru.ru_maxrss;
    }
    return (uint64_t)kib * 1024;
}
