/* The machine's memory read bandwidth, the roofline's denominator for the
 * decode rows: `threads` threads each sum their share of a buffer far
 * larger than the caches (bench-quant --bandwidth-only measures the same
 * with SIMD loads; a plain sum of eight independent chains reads as fast,
 * the memory being the limit).  Median of five passes after one warm-up,
 * measured once per thread count and kept. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

#define BW_BYTES (256u << 20)
#define BW_PASSES 5
#define BW_MAX_THREADS 64

typedef struct {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
} bw_part;

static void *sum_part(void *arg)
{
    bw_part *w = arg;
    uint64_t s[8] = {0};
    for (size_t i = 0; i + 8 <= w->n; i += 8)
        for (int k = 0; k < 8; k++)
            s[k] += w->p[i + k];
    w->sum = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
    return NULL;
}

static double measure(int threads)
{
    uint64_t *buf = malloc(BW_BYTES);
    if (!buf)
        return 0;
    memset(buf, 1, BW_BYTES);
    const size_t per = BW_BYTES / sizeof(uint64_t) / (size_t)threads / 8 * 8;
    double t[BW_PASSES];
    volatile uint64_t sink = 0;
    for (int pass = -1; pass < BW_PASSES; pass++) {
        bw_part parts[BW_MAX_THREADS];
        pthread_t th[BW_MAX_THREADS];
        const double t0 = hxb_stats_now_ns();
        for (int i = 0; i < threads; i++) {
            parts[i] = (bw_part){buf + (size_t)i * per, per, 0};
            if (i && pthread_create(&th[i], NULL, sum_part, &parts[i])) {
                free(buf);
                return 0;
            }
        }
        sum_part(&parts[0]);
        for (int i = 1; i < threads; i++)
            pthread_join(th[i], NULL);
        if (pass >= 0)
            t[pass] = hxb_stats_now_ns() - t0;
        for (int i = 0; i < threads; i++)
            sink += parts[i].sum;
    }
    (void)sink;
    free(buf);
    return (double)per * (size_t)threads * sizeof(uint64_t) / hxb_stats_median(t, BW_PASSES);
}

double hxb_read_bandwidth(int threads)
{
    static double known[BW_MAX_THREADS + 1];
    if (threads < 1)
        threads = 1;
    if (threads > BW_MAX_THREADS)
        threads = BW_MAX_THREADS;
    if (!known[threads])
        known[threads] = measure(threads); /* bytes per ns = GB/s */
    return known[threads];
}

/* The highest cache level of CPU 0 in sysfs ("266240K", "32M"). */
uint64_t hxb_llc_bytes(void)
{
    uint64_t best = 0;
    int best_level = 0;
    for (int i = 0; i < 16; i++) {
        char path[96];
        int level = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fscanf(f, "%d", &level) != 1)
            level = 0;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (!(f = fopen(path, "r")))
            continue;
        unsigned long long n = 0;
        char unit = 0;
        const int got = fscanf(f, "%llu%c", &n, &unit);
        fclose(f);
        if (got < 1 || level < best_level)
            continue;
        const uint64_t bytes = unit == 'K' ? n << 10 : unit == 'M' ? n << 20 : unit == 'G' ? n << 30 : n;
        if (level > best_level || bytes > best) {
            best = bytes;
            best_level = level;
        }
    }
    return best;
}
