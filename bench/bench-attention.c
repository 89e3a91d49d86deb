/* bench-attention: time per attention call over the paged KV cache, on the
 * OpenCL device (PoCL in CI) and on the CPU device, for prefill and decode
 * shapes; then what the OpenCL program cache saves: the first call of a
 * runtime that must compile the attention program vs one that loads it.
 *
 *   bench-attention [-r REPS] [-k f16|q8_0|q4_0|f32] [-m small|large|smollm2|qwen05] [-t THREADS]
 *                   [--depth [--device cpu|opencl] [--only decode|prefill] [--cold]]
 *
 * --depth: one device alone (the CPU by default) at long contexts (decode
 * at 4096 to 32768 positions, a 512-token prompt after 0 to 16384), with
 * the process's CPU time beside the wall time (on a loaded machine the CPU
 * time is the steadier figure; PoCL's threads are the process's too) and,
 * for decode, the rate the cache is read at.  `--only` runs one half of
 * the table.  `--cold`: before each timed call the process reads a
 * 64 MiB buffer, so the KV cache comes from memory as it does in a model's
 * decode step (whose weights pass through the caches between two layers'
 * attention); without it the cache of 4096 to 16384 positions stays in
 * L2/L3 between calls and the rate is the kernel's in-cache one.  With
 * more than one thread a cold call also wakes the team, which slept
 * while the buffer was read: `-t 1` gives one core's rate.
 *
 * small: 12 query heads, 4 KV heads, head size 64 (a ~125M LLaMA);
 * large: 32, 8, 128 (an 8B one).  Times are medians of REPS calls, each a
 * task submitted and waited for; inputs are random. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "devices/opencl.h"
#include "hetero.h"
#include "ops/ops.h"
#include "tools/cli_num.h"

#define BLOCK 16

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static unsigned rng = 12345;
static float uniform(void)
{
    rng = rng * 1103515245u + 12345u;
    return (float)((rng >> 8) & 0xffffff) / (float)(1 << 23) - 1.0f;
}

static uint16_t to_half(float f)
{
    /* Inputs are in [-1, 1): normal halves or zero, truncated; the exact
     * rounding does not matter for timing. */
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, e = (x >> 23) & 255;
    if (e < 113)
        return (uint16_t)sign;
    return (uint16_t)(sign | ((e - 112) << 10) | ((x >> 13) & 1023));
}

typedef struct {
    const char *name;
    uint32_t S, ctx, fresh; /* S sequences of ctx tokens, the last `fresh` in the batch */
} shape;

typedef struct {
    uint32_t Hq, Hkv, Dh, kv_type;
} model;

typedef struct {
    hx_op_attention a;
    hx_buffer *buf[5];
} problem;

static size_t row_bytes(uint32_t kv_type, uint32_t Dh)
{
    return kv_type == 0 ? 4u * Dh : kv_type == 1 ? 2u * Dh : kv_type == 2 ? (size_t)Dh / 32 * 18 : (size_t)Dh / 32 * 34;
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static hx_status make_problem(hx_runtime *rt, const model *m, const shape *s, problem *p)
{
    uint32_t T = s->S * s->fresh, max_blocks = (s->ctx + BLOCK - 1) / BLOCK, n_blocks = s->S * max_blocks;
    hx_kv_layout kv = {T, s->S, max_blocks, BLOCK};
    p->a = (hx_op_attention){kv, m->Hq, m->Hkv, m->Dh, m->kv_type, 1.0f / sqrtf((float)m->Dh), 0, m->kv_type, 0, 0};
    size_t cache = (size_t)n_blocks * BLOCK * m->Hkv * row_bytes(m->kv_type, m->Dh);
    size_t qbytes = (size_t)T * m->Hq * m->Dh * 4, meta_bytes = 4 * (size_t)hx_meta_ints(&kv);
    size_t bytes[5] = {qbytes, cache, cache, meta_bytes, qbytes};
    void *host[5];
    for (int i = 0; i < 5; i++) {
        hx_status st = hx_buffer_create(rt, bytes[i], &p->buf[i]);
        if (st == HX_OK)
            st = hx_buffer_acquire(p->buf[i], HX_W, &host[i]);
        if (st)
            return st;
    }
    float *q = host[0];
    for (size_t i = 0; i < qbytes / 4; i++)
        q[i] = uniform();
    for (int c = 1; c <= 2; c++) {
        uint8_t *b = host[c];
        size_t rb = row_bytes(m->kv_type, m->Dh);
        for (size_t r = 0; r < cache / rb; r++, b += rb) {
            if (m->kv_type == 0)
                for (uint32_t d = 0; d < m->Dh; d++)
                    ((float *)b)[d] = uniform();
            else if (m->kv_type == 1)
                for (uint32_t d = 0; d < m->Dh; d++) {
                    uint16_t h = to_half(uniform());
                    memcpy(b + 2 * d, &h, 2);
                }
            else if (m->kv_type == 2)
                for (uint32_t blk = 0; blk < m->Dh / 32; blk++) {
                    uint16_t h = to_half(0.1f);
                    memcpy(b + 18 * blk, &h, 2);
                    for (int i = 0; i < 16; i++)
                        b[18 * blk + 2 + i] = (uint8_t)(rng = rng * 1103515245u + 12345u, rng >> 24);
                }
            else
                for (uint32_t blk = 0; blk < m->Dh / 32; blk++) {
                    uint16_t h = to_half(0.01f);
                    memcpy(b + 34 * blk, &h, 2);
                    for (int i = 0; i < 32; i++)
                        b[34 * blk + 2 + i] = (uint8_t)(int8_t)(uniform() * 127);
                }
        }
    }
    int32_t *meta = host[3];
    for (uint32_t s2 = 0; s2 < s->S; s2++) {
        for (uint32_t b = 0; b < max_blocks; b++)
            meta[3 * T + s2 * max_blocks + b] = (int32_t)(s2 * max_blocks + b);
        for (uint32_t i = 0; i < s->fresh; i++) {
            uint32_t t = s2 * s->fresh + i, pos = s->ctx - s->fresh + i;
            meta[t] = (int32_t)((s2 * max_blocks + pos / BLOCK) * BLOCK + pos % BLOCK);
            meta[T + t] = (int32_t)pos;
            meta[2 * T + t] = (int32_t)s2;
        }
    }
    return HX_OK;
}

static void free_problem(problem *p)
{
    for (int i = 0; i < 5; i++)
        hx_buffer_destroy(p->buf[i]);
}

static hx_status run_once(hx_runtime *rt, problem *p, int device)
{
    hx_task_desc d = {.codelet = hx_codelet_builtin("attention"), .nbuffers = 5, .args = &p->a,
                      .args_size = sizeof p->a, .device = device};
    const hx_access modes[5] = {HX_R, HX_R, HX_R, HX_R, HX_W};
    for (int i = 0; i < 5; i++) {
        d.buffers[i] = p->buf[i];
        d.modes[i] = modes[i];
    }
    hx_task *t;
    hx_status s = hx_task_submit(rt, &d, &t);
    return s ? s : hx_task_wait(t);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* --cold: read before each timed call, larger than any last-level cache,
 * so that the call's KV comes from memory (as a decode step's weights
 * pass through the caches between two layers' attention: read, so the
 * lines they leave are clean). */
static unsigned char *evict_buf;
#define EVICT_BYTES ((size_t)64 << 20)

static void evict_caches(void)
{
    if (!evict_buf)
        return;
    const uint64_t *w = (const uint64_t *)(const void *)evict_buf;
    uint64_t sum = 0;
    for (size_t i = 0; i < EVICT_BYTES / 8; i += 8)
        sum += w[i];
    __asm__ volatile("" : : "r"(sum)); /* the reads stay */
}

/* Median ms per call, after one warm-up call, and (cpu_ms not NULL) the
 * median of the process's CPU time per call; -1 on failure. */
static double time_calls_cpu(hx_runtime *rt, problem *p, int device, int reps, double *cpu_ms)
{
    if (run_once(rt, p, device))
        return -1;
    double *ms = malloc(sizeof(double) * reps), *cms = malloc(sizeof(double) * reps);
    for (int r = 0; r < reps; r++) {
        evict_caches();
        double t0 = now(), c0 = cpu_now();
        if (run_once(rt, p, device)) {
            free(ms);
            free(cms);
            return -1;
        }
        ms[r] = (now() - t0) * 1e3;
        cms[r] = (cpu_now() - c0) * 1e3;
    }
    double med = median(ms, reps);
    if (cpu_ms)
        *cpu_ms = median(cms, reps);
    free(ms);
    free(cms);
    return med;
}

static double time_calls(hx_runtime *rt, problem *p, int device, int reps)
{
    return time_calls_cpu(rt, p, device, reps, NULL);
}

static int find_device(hx_runtime *rt, hx_device_family f)
{
    for (int i = 0; i < hx_runtime_device_count(rt); i++) {
        hx_device_info d;
        if (hx_runtime_device_info(rt, i, &d) == HX_OK && d.family == f)
            return i;
    }
    return -1;
}

/* --depth: one device (cpu or opencl) at long contexts. */
static int depth_table(const model *m, const char *model_name, const char *kv_name, int threads, int reps,
                       const char *device, const char *only)
{
    const int opencl = !strcmp(device, "opencl");
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = opencl ? "cpu,opencl" : "cpu";
    o.cpu_threads = threads;
    hx_runtime *rt;
    if (hx_runtime_open(&rt, &o)) {
        fprintf(stderr, "bench-attention: %s\n", hx_last_error());
        return 1;
    }
    int dev = find_device(rt, opencl ? HX_FAMILY_OPENCL : HX_FAMILY_CPU);
    if (dev < 0) {
        fprintf(stderr, "bench-attention: no OpenCL device: %s\n", hx_runtime_absence_reason(rt, HX_FAMILY_OPENCL));
        hx_runtime_close(rt);
        return 1;
    }
    hx_device_info ci;
    hx_runtime_device_info(rt, dev, &ci);
    printf("# attention on %s at depth, model %s (Hq %u, Hkv %u, Dh %u), KV %s, block %d, median of %d%s\n", device,
           model_name, m->Hq, m->Hkv, m->Dh, kv_name, BLOCK, reps,
           evict_buf ? ", caches evicted before each call" : "");
    printf("# %s: %s, %d compute units; cpu-time = the process's CPU time per call (all threads)\n", device, ci.name,
           ci.compute_units);
    printf("| test | ctx | T | wall ms | cpu-time ms | KV read GB/s (wall) |\n|---|---|---|---|---|---|\n");
    const shape shapes[] = {
        {"decode", 1, 4096, 1},   {"decode", 1, 16384, 1},    {"decode", 1, 32768, 1},
        {"pp512 @ d0", 1, 512, 512}, {"pp512 @ d4096", 1, 4608, 512}, {"pp512 @ d16384", 1, 16896, 512},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape *s = &shapes[i];
        if (only && strcmp(only, s->fresh == 1 ? "decode" : "prefill"))
            continue;
        problem p;
        if (make_problem(rt, m, s, &p)) {
            fprintf(stderr, "bench-attention: %s\n", hx_last_error());
            break;
        }
        double cms = 0, ms = time_calls_cpu(rt, &p, dev, reps, &cms);
        if (ms < 0) {
            fprintf(stderr, "bench-attention: %s: %s\n", s->name, hx_last_error());
            free_problem(&p);
            break;
        }
        const double kv = 2.0 * s->ctx * m->Hkv * row_bytes(m->kv_type, m->Dh);
        char bw[32] = "";
        if (s->fresh == 1 && ms > 0)
            snprintf(bw, sizeof bw, "%.1f", kv / (ms * 1e-3) / 1e9);
        printf("| %s | %u | %u | %.3f | %.3f | %s |\n", s->name, s->ctx, s->S * s->fresh, ms, cms, bw);
        fflush(stdout);
        free_problem(&p);
    }
    hx_runtime_close(rt);
    return 0;
}

/* Relative L2 distance between the two devices' outputs. */
static double compare(hx_runtime *rt, problem *p, int a, int b)
{
    size_t n = hx_buffer_size(p->buf[4]) / 4;
    float *x = malloc(4 * n), *y;
    if (run_once(rt, p, a) || hx_buffer_acquire(p->buf[4], HX_R, (void **)&y)) {
        free(x);
        return NAN;
    }
    memcpy(x, y, 4 * n);
    if (run_once(rt, p, b) || hx_buffer_acquire(p->buf[4], HX_R, (void **)&y)) {
        free(x);
        return NAN;
    }
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        den += (double)y[i] * y[i];
    }
    free(x);
    return sqrt(num / (den > 0 ? den : 1));
}


static hx_status open_runtime(int threads, hx_runtime **rt)
{
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = "cpu,opencl";
    o.cpu_threads = threads;
    o.fpga_emulation = "off";
    return hx_runtime_open(rt, &o);
}

/* Open, then the first attention call: with an empty cache it compiles the
 * program; with a warm one it loads the binary. */
static double first_call(const model *m, int threads, uint64_t *builds, uint64_t *loads)
{
    double t0 = now();
    hx_runtime *rt;
    if (open_runtime(threads, &rt))
        return -1;
    shape s = {"", 1, 32, 1};
    problem p;
    int dev = find_device(rt, HX_FAMILY_OPENCL);
    double t = -1;
    if (make_problem(rt, m, &s, &p) == HX_OK && run_once(rt, &p, dev) == HX_OK)
        t = (now() - t0) * 1e3;
    *builds = hx_opencl_program_builds(rt);
    *loads = hx_opencl_program_cache_loads(rt);
    free_problem(&p);
    hx_runtime_close(rt);
    return t;
}

int main(int argc, char **argv)
{
    int reps = 5, threads = 0;
    model m = {12, 4, 64, 1};
    const char *kv_name = "f16", *model_name = "small";
    int depth = 0;
    const char *device = "cpu", *only = NULL;
    int evict = 0;
    static const char usage[] =
        "usage: bench-attention [-r REPS] [-k f16|q8_0|q4_0|f32] [-m small|large|smollm2|qwen05] [-t THREADS] "
        "[--depth [--device cpu|opencl] [--only decode|prefill] [--cold]]\n";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return fputs(usage, stdout), 0;
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) {
            if (cli_int("bench-attention", "-r", argv[++i], 1, 10000, &reps))
                return CLI_EXIT_USAGE;
        } else if (!strcmp(argv[i], "-t") && i + 1 < argc) {
            if (cli_int("bench-attention", "-t", argv[++i], 0, 4096, &threads))
                return CLI_EXIT_USAGE;
        } else if (!strcmp(argv[i], "-k") && i + 1 < argc) {
            kv_name = argv[++i];
            if (strcmp(kv_name, "f32") && strcmp(kv_name, "f16") && strcmp(kv_name, "q8_0") && strcmp(kv_name, "q4_0")) {
                fprintf(stderr, "bench-attention: -k takes f16, q8_0, q4_0 or f32, not '%s'\n", kv_name);
                return CLI_EXIT_USAGE;
            }
            m.kv_type = !strcmp(kv_name, "f32") ? 0 : !strcmp(kv_name, "q8_0") ? 8 : !strcmp(kv_name, "q4_0") ? 2 : 1;
        } else if (!strcmp(argv[i], "-m") && i + 1 < argc) {
            model_name = argv[++i];
            if (!strcmp(model_name, "large"))
                m = (model){32, 8, 128, m.kv_type};
            else if (!strcmp(model_name, "smollm2")) /* SmolLM2-135M */
                m = (model){9, 3, 64, m.kv_type};
            else if (!strcmp(model_name, "qwen05")) /* Qwen2.5-0.5B */
                m = (model){14, 2, 64, m.kv_type};
            else if (strcmp(model_name, "small")) {
                fprintf(stderr, "bench-attention: -m takes small, large, smollm2 or qwen05, not '%s'\n", model_name);
                return CLI_EXIT_USAGE;
            }
        } else if (!strcmp(argv[i], "--depth")) {
            depth = 1;
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            only = argv[++i];
            if (strcmp(only, "decode") && strcmp(only, "prefill")) {
                fprintf(stderr, "bench-attention: --only takes decode or prefill, not '%s'\n", only);
                return CLI_EXIT_USAGE;
            }
        } else if (!strcmp(argv[i], "--cold")) {
            evict = 1;
        } else if (!strcmp(argv[i], "--device") && i + 1 < argc) {
            device = argv[++i];
            if (strcmp(device, "cpu") && strcmp(device, "opencl")) {
                fprintf(stderr, "bench-attention: --device takes cpu or opencl, not '%s'\n", device);
                return CLI_EXIT_USAGE;
            }
        } else {
            fputs(usage, stderr);
            return CLI_EXIT_USAGE;
        }
    }
    if (reps < 1)
        reps = 1;
    if ((only || evict) && !depth) {
        fputs("bench-attention: --only and --cold go with --depth\n", stderr);
        return CLI_EXIT_USAGE;
    }
    if (evict && !(evict_buf = malloc(EVICT_BYTES))) {
        fputs("bench-attention: out of memory for --cold's buffer\n", stderr);
        return 1;
    }
    if (evict_buf)
        memset(evict_buf, 1, EVICT_BYTES);
    if (depth) {
        const int rc = depth_table(&m, model_name, kv_name, threads, reps, device, only);
        free(evict_buf);
        return rc;
    }

    /* Program cache first, in a fresh directory, before anything else has
     * built the program in this process. */
    char dir[] = "/tmp/hetero-bench-cache-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    setenv("HX_CACHE_DIR", dir, 1);
    uint64_t b1, l1, b2, l2;
    double cold = first_call(&m, threads, &b1, &l1), warm = first_call(&m, threads, &b2, &l2);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    unsetenv("HX_CACHE_DIR");

    hx_runtime *rt;
    if (open_runtime(threads, &rt)) {
        fprintf(stderr, "bench-attention: %s\n", hx_last_error());
        return 1;
    }
    int cl = find_device(rt, HX_FAMILY_OPENCL), cpu = find_device(rt, HX_FAMILY_CPU);
    if (cl < 0) {
        fprintf(stderr, "bench-attention: no OpenCL device: %s\n", hx_runtime_absence_reason(rt, HX_FAMILY_OPENCL));
        hx_runtime_close(rt);
        return 1;
    }
    hx_device_info ci, oi;
    hx_runtime_device_info(rt, cpu, &ci);
    hx_runtime_device_info(rt, cl, &oi);
    int cpu_ok = hx_device_implements(rt, cpu, "attention");
    printf("# attention, model %s (Hq %u, Hkv %u, Dh %u), KV %s, block %d, median of %d\n", model_name, m.Hq, m.Hkv,
           m.Dh, kv_name, BLOCK, reps);
    printf("# opencl: %s (%s, %d CUs); cpu: %s, %d threads%s\n", oi.name, oi.platform, oi.compute_units, ci.name,
           ci.compute_units, cpu_ok ? "" : " (no CPU attention codelet: column skipped)");
    printf("| shape | S | ctx | T | opencl ms | cpu ms | opencl/cpu rel L2 |\n|---|---|---|---|---|---|---|\n");
    const shape shapes[] = {
        {"decode", 1, 128, 1},   {"decode", 1, 512, 1},    {"decode", 1, 2048, 1}, {"decode", 4, 512, 1},
        {"prefill", 1, 64, 64}, {"prefill", 1, 256, 256}, {"prefill", 1, 576, 64},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape *s = &shapes[i];
        problem p;
        if (make_problem(rt, &m, s, &p)) {
            fprintf(stderr, "bench-attention: %s\n", hx_last_error());
            break;
        }
        double t_cl = time_calls(rt, &p, cl, reps), t_cpu = cpu_ok ? time_calls(rt, &p, cpu, reps) : -1;
        double diff = cpu_ok ? compare(rt, &p, cl, cpu) : NAN;
        char c_cl[32], c_cpu[32], c_diff[32];
        snprintf(c_cl, sizeof c_cl, t_cl < 0 ? "failed" : "%.3f", t_cl);
        snprintf(c_cpu, sizeof c_cpu, !cpu_ok ? "n/a" : t_cpu < 0 ? "failed" : "%.3f", t_cpu);
        snprintf(c_diff, sizeof c_diff, isnan(diff) ? "n/a" : "%.2g", diff);
        printf("| %s | %u | %u | %u | %s | %s | %s |\n", s->name, s->S, s->ctx, s->S * s->fresh, c_cl, c_cpu, c_diff);
        fflush(stdout);
        free_problem(&p);
    }
    hx_runtime_close(rt);
    printf("\n# OpenCL program cache: open + first attention call\n");
    printf("| run | ms | programs compiled | loaded from cache |\n|---|---|---|---|\n");
    printf("| first open (empty cache) | %.1f | %llu | %llu |\n", cold, (unsigned long long)b1, (unsigned long long)l1);
    printf("| second open | %.1f | %llu | %llu |\n", warm, (unsigned long long)b2, (unsigned long long)l2);
    return 0;
}
