/* bench-cuda-ops: the speed of the CUDA plugin's matmul beside cuBLAS's own
 * GEMM on the same shapes (device-resident data), the same product as a
 * runtime task, and the plugin's paths that aligned runtime buffers never
 * take (weights and activations at odd offsets), each with its normalized
 * mean squared error against a host decoding.  Whether every op computes
 * the right values on the GPU is the `ops` test suite's (tests/test_ops.c),
 * which runs every op on every device against the scalar references.
 *
 *   build/bench-cuda-ops [--allow-absent] [--perf-n N]
 *   build/bench-cuda-ops --compare A.f32 B.f32 BOUND   (NMSE of B against A)
 *
 * Exit status: 0 all ran (and the error column within bounds), 1 a
 * failure, 2 no CUDA device (0 with --allow-absent).
 *
 * The host reference decodes weights with kernels_cu/dequant_tile.h, whose
 * host side the `cuda` test suite checks bit for bit against a scalar
 * decoding of the GGUF blocks. */
#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hetero.h"
#include "kernels_cu/dequant_tile.h"
#include "kernels_cu/plugin.h"
#include "ops/types.h"
#include "ops/ops.h"
#include "tools/cli_num.h"

static hx_runtime *rt;
static int gpu = -1, failures;
static uint32_t perf_n = 4096; /* N = K of the speed table */

/* ---- random data -------------------------------------------------------- */

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float rndf(void) { return (float)(rnd() & 0xffffff) / 8388608.0f - 1.0f; }
static void fill(float *x, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++)
        x[i] = rndf() * scale;
}

/* Scales of weights a real model would hold: |d| in [2^-9, 2^-5). */
static uint16_t rnd_scale(int positive)
{
    uint32_t e = 6 + rnd() % 4;
    return (uint16_t)((positive ? 0 : (rnd() & 1) << 15) | (e << 10) | (rnd() & 0x3ff));
}

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

/* N rows of K random weights of `type`. */
static uint8_t *make_weights(uint32_t type, uint32_t N, uint32_t K)
{
    uint64_t rb = hx_dq_row_bytes(type, K), bytes = rb * N;
    uint8_t *w = malloc(bytes);
    if (!w)
        return NULL;
    for (uint64_t i = 0; i < bytes; i++)
        w[i] = (uint8_t)rnd();
    for (uint32_t n = 0; n < N; n++) {
        uint8_t *row = w + n * rb;
        if (type == HX_TYPE_F32)
            for (uint32_t k = 0; k < K; k++) {
                float v = rndf() * 0.05f;
                memcpy(row + 4 * k, &v, 4);
            }
        else if (type == HX_TYPE_F16 || type == HX_TYPE_BF16)
            for (uint32_t k = 0; k < K; k++) {
                float v = rndf() * 0.05f;
                put16(row + 2 * k, type == HX_TYPE_F16 ? hx_dq_f32_to_f16(v) : hx_dq_f32_to_bf16(v));
            }
        else {
            /* The F16 fields of each block: scale first, then min/dmin. */
            uint32_t bb = hx_dq_block_bytes(type), be = hx_dq_block_elems(type);
            uint32_t d_at = type == HX_TYPE_Q6_K ? 208 : 0;
            int has_min = type == HX_TYPE_Q4_1 || type == HX_TYPE_Q5_1 || type == HX_TYPE_Q4_K ||
                          type == HX_TYPE_Q5_K;
            int kq = be == 256 && type != HX_TYPE_Q6_K;
            for (uint32_t b = 0; b < K / be; b++) {
                put16(row + b * bb + d_at, rnd_scale(kq));
                if (has_min)
                    put16(row + b * bb + 2, rnd_scale(kq));
            }
        }
    }
    return w;
}

static void decode_row(uint32_t type, const uint8_t *row, uint32_t K, float *out)
{
    if (hx_dq_is_quantized(type))
        for (uint32_t g = 0; g < K / 32; g++)
            hx_dq_group(type, row, g, out + 32 * g);
    else
        for (uint32_t k = 0; k < K; k++)
            out[k] = hx_dq_elem(type, row, k);
}

/* ---- runtime plumbing --------------------------------------------------- */

static hx_buffer *buf_from(const void *data, size_t bytes)
{
    hx_buffer *b;
    void *p;
    if (hx_buffer_create(rt, bytes, &b) || hx_buffer_acquire(b, HX_W, &p)) {
        fprintf(stderr, "buffer: %s\n", hx_last_error());
        exit(1);
    }
    if (data)
        memcpy(p, data, bytes);
    else
        memset(p, 0, bytes);
    return b;
}

/* The op's codelet: the built-in one when this build has it (so the CPU
 * runs it too), else one that only names the op for the CUDA plugin. */
static const hx_codelet *codelet_for(const char *name, hx_codelet *local)
{
    const hx_codelet *c = hx_codelet_builtin(name);
    if (c)
        return c;
    memset(local, 0, sizeof *local);
    local->name = name;
    return local;
}

static hx_status run_on(int device, const hx_codelet *cl, hx_buffer **bufs, const hx_access *modes, int n,
                        const void *args, size_t args_size)
{
    hx_task_desc d = {.codelet = cl, .nbuffers = n, .args = args, .args_size = args_size, .device = device};
    for (int i = 0; i < n; i++) {
        d.buffers[i] = bufs[i];
        d.modes[i] = modes[i];
    }
    hx_task *t;
    hx_status s = hx_task_submit(rt, &d, &t);
    return s ? s : hx_task_wait(t);
}

static double nmse(const float *got, const double *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)got[i] - ref[i];
        num += e * e;
        den += ref[i] * ref[i];
        if (!isfinite(got[i]))
            return INFINITY;
    }
    return den > 0 ? num / den : num;
}

static void report(const char *op, const char *what, double err, double bound)
{
    int ok = err <= bound;
    failures += !ok;
    printf("  %-10s %-38s nmse %-10.3g bound %-8.0e %s\n", op, what, err, bound, ok ? "ok" : "FAIL");
}

/* ---- speed: the plugin's matmul beside cuBLAS --------------------------- */

static const hx_cuda_plugin *plugin_open(void)
{
    char path[PATH_MAX + 32];
    const char *env = getenv("HX_CUDA_PLUGIN");
    if (env && env[0]) {
        snprintf(path, sizeof path, "%s", env);
    } else {
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = '\0';
        snprintf(path, sizeof path, "%s/libhetero-cuda.so", exe);
    }
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!dl) {
        printf("  (perf skipped: %s)\n", dlerror());
        return NULL;
    }
    hx_cuda_plugin_entry e;
    *(void **)&e = dlsym(dl, HX_CUDA_PLUGIN_SYMBOL);
    return e ? e() : NULL;
}

#define PCHECK(call)                                                                                         \
    do {                                                                                                     \
        if ((call) != 0) {                                                                                   \
            printf("  FAIL: %s: %s\n", #call, p->last_error());                                              \
            failures++;                                                                                      \
            goto out;                                                                                        \
        }                                                                                                    \
    } while (0)

static double time_matmul(const hx_cuda_plugin *p, hx_cuda_ctx *c, const hx_cuda_kernel *k, hx_op_matmul *a,
                          void **bufs, size_t *sizes, hx_cuda_event *e0, hx_cuda_event *e1, int iters)
{
    for (int i = 0; i < 2; i++)
        if (k->launch(c, a, bufs, sizes, 3))
            return -1;
    if (p->event_record(c, e0))
        return -1;
    for (int i = 0; i < iters; i++)
        if (k->launch(c, a, bufs, sizes, 3))
            return -1;
    float ms = 0;
    if (p->event_record(c, e1) || p->event_synchronize(e1) || p->synchronize(c) || p->event_elapsed_ms(e0, e1, &ms))
        return -1;
    return (double)ms * 1e-3 / iters;
}

/* The fallback paths that aligned runtime buffers never take: weights and
 * activations at odd offsets (a tensor wrapped in place from a file). */
static void check_unaligned(const hx_cuda_plugin *p, hx_cuda_ctx *c)
{
    const struct { uint32_t type, T, woff, xoff; } cases[] = {
        {HX_TYPE_Q8_0, 1, 1, 0}, {HX_TYPE_Q8_0, 5, 1, 0}, {HX_TYPE_Q4_0, 1, 0, 4}, {HX_TYPE_Q4_0, 6, 3, 0},
        {HX_TYPE_Q4_K, 1, 2, 0}, {HX_TYPE_F16, 1, 2, 0},  {HX_TYPE_BF16, 1, 0, 4}, {HX_TYPE_F32, 1, 4, 4},
    };
    const uint32_t N = 300, K = 512;
    const hx_cuda_kernel *k = p->kernel_find("matmul");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t type = cases[i].type, T = cases[i].T;
        uint64_t rb = hx_dq_row_bytes(type, K), wb = rb * N;
        uint8_t *w = make_weights(type, N, K);
        float *x = malloc(4 * (size_t)T * K), *y = malloc(4 * (size_t)T * N), *row = malloc(4 * K);
        double *ref = calloc((size_t)T * N, 8);
        fill(x, (size_t)T * K, 1.0f);
        for (uint32_t n = 0; n < N; n++) {
            decode_row(type, w + n * rb, K, row);
            for (uint32_t t = 0; t < T; t++)
                for (uint32_t kk = 0; kk < K; kk++)
                    ref[(size_t)t * N + n] += (double)row[kk] * x[(size_t)t * K + kk];
        }
        void *W = NULL, *X = NULL, *Y = NULL;
        int s = p->mem_alloc(c, wb + 16, &W);
        s = s ? s : p->mem_alloc(c, 4 * (size_t)T * K + 16, &X);
        s = s ? s : p->mem_alloc(c, 4 * (size_t)T * N, &Y);
        uint8_t *Wo = (uint8_t *)W + cases[i].woff, *Xo = (uint8_t *)X + cases[i].xoff;
        s = s ? s : p->copy(c, Wo, w, wb, HX_CUDA_COPY_H2D, 0);
        s = s ? s : p->copy(c, Xo, x, 4 * (size_t)T * K, HX_CUDA_COPY_H2D, 0);
        hx_op_matmul a = {.wtype = type, .T = T, .N = N, .K = K};
        void *bufs[3] = {Wo, Xo, Y};
        size_t sizes[3] = {wb, 4 * (size_t)T * K, 4 * (size_t)T * N};
        s = s ? s : k->launch(c, &a, bufs, sizes, 3);
        s = s ? s : p->synchronize(c);
        s = s ? s : p->copy(c, y, Y, 4 * (size_t)T * N, HX_CUDA_COPY_D2H, 0);
        char what[64];
        snprintf(what, sizeof what, "%s T=%u W+%u x+%u (plugin)", hx_type_name(type), T, cases[i].woff,
                 cases[i].xoff);
        if (s) {
            printf("  %-10s %-34s FAIL: %s\n", "matmul", what, p->last_error());
            failures++;
        } else {
            report("matmul", what, nmse(y, ref, (size_t)T * N), T > 1 ? 1e-5 : 1e-9);
        }
        if (W)
            p->mem_free(c, W);
        if (X)
            p->mem_free(c, X);
        if (Y)
            p->mem_free(c, Y);
        free(w);
        free(x);
        free(y);
        free(row);
        free(ref);
    }
}

static void perf(void)
{
    const hx_cuda_plugin *p = plugin_open();
    if (!p)
        return;
    printf("\nPlugin-level checks and GEMM speed (plugin %s):\n", p->build);
    hx_cuda_ctx *c = NULL;
    hx_cuda_event *e0 = NULL, *e1 = NULL;
    void *W = NULL, *X = NULL, *Y = NULL, *M = NULL;
    const uint32_t N = perf_n, K = perf_n, Tmax = 512;
    const hx_cuda_kernel *k = p->kernel_find("matmul");
    PCHECK(p->context_create(0, &c));
    check_unaligned(p, c);
    PCHECK(p->event_create(c, &e0));
    PCHECK(p->event_create(c, &e1));
    PCHECK(p->mem_alloc(c, (size_t)N * K * 4, &W));
    PCHECK(p->mem_alloc(c, (size_t)Tmax * K * 4, &X));
    PCHECK(p->mem_alloc(c, (size_t)Tmax * N * 4, &Y));
    float *x = malloc((size_t)Tmax * K * 4);
    fill(x, (size_t)Tmax * K, 1.0f);
    PCHECK(p->copy(c, X, x, (size_t)Tmax * K * 4, HX_CUDA_COPY_H2D, 0));
    free(x);
    printf("\n  GEMM speed, device-resident data, mean of timed repeats:\n");
    printf("  %-6s %-5s %-14s %-12s %-14s %s\n", "type", "T", "N x K", "ours", "cuBLAS f16", "note");
    const uint32_t types[] = {HX_TYPE_F16,  HX_TYPE_BF16, HX_TYPE_F32,  HX_TYPE_Q8_0,
                              HX_TYPE_Q4_0, HX_TYPE_Q4_K, HX_TYPE_Q5_0, HX_TYPE_Q6_K};
    const uint32_t Ts[] = {1, 16, 512};
    for (int ti = 0; ti < 8; ti++) {
        uint32_t type = types[ti];
        uint64_t wb = hx_dq_row_bytes(type, K) * N;
        uint8_t *w = make_weights(type, N, K);
        PCHECK(p->copy(c, W, w, wb, HX_CUDA_COPY_H2D, 0));
        free(w);
        for (int t = 0; t < 3; t++) {
            uint32_t T = Ts[t];
            hx_op_matmul a = {.wtype = type, .T = T, .N = N, .K = K};
            void *bufs[3] = {W, X, Y};
            size_t sizes[3] = {wb, (size_t)T * K * 4, (size_t)T * N * 4};
            double sec = time_matmul(p, c, k, &a, bufs, sizes, e0, e1, T == 1 ? 200 : 20), ref = 0;
            if (sec <= 0) {
                printf("  FAIL: matmul %s T=%u: %s\n", hx_type_name(type), T, p->last_error());
                failures++;
                continue;
            }
            if (p->bench_cublas_gemm(c, HX_TYPE_F16, T, N, K, T == 1 ? 200 : 20, &ref))
                ref = 0;
            double fl = 2.0 * T * N * K;
            char note[64] = "";
            if (T == 1)
                snprintf(note, sizeof note, "weights read at %.0f GB/s", wb / sec * 1e-9);
            char shape[32];
            snprintf(shape, sizeof shape, "%u x %u", N, K);
            printf("  %-6s %-5u %-14s %7.2f TF/s %7.2f TF/s    %s\n", hx_type_name(type), T, shape,
                   fl / sec * 1e-12, ref > 0 ? fl / ref * 1e-12 : 0.0, note);
        }
    }
    /* The same product through the runtime, a task at a time (copies of
     * activations, launch and synchronization included). */
    {
        const uint32_t T = 1, type = HX_TYPE_Q4_0;
        uint64_t wb = hx_dq_row_bytes(type, K) * N;
        uint8_t *w = make_weights(type, N, K);
        float *xv = malloc(4 * K);
        fill(xv, K, 1.0f);
        hx_buffer *bufs[3] = {buf_from(w, wb), buf_from(xv, 4 * K), buf_from(NULL, 4 * N)};
        hx_access modes[3] = {HX_R, HX_R, HX_W};
        hx_op_matmul a = {.wtype = type, .T = T, .N = N, .K = K};
        hx_codelet local;
        const hx_codelet *cl = codelet_for("matmul", &local);
        run_on(gpu, cl, bufs, modes, 3, &a, sizeof a);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int reps = 200, bad = 0;
        for (int i = 0; i < reps; i++)
            bad |= run_on(gpu, cl, bufs, modes, 3, &a, sizeof a) != HX_OK;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double us = ((t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) * 1e-3) / reps;
        printf("  q4_0 decode %u x %u as a runtime task (submit, copies, run, wait): %.1f us%s\n", N, K, us,
               bad ? " (FAILED)" : "");
        failures += bad;
        for (int i = 0; i < 3; i++)
            hx_buffer_destroy(bufs[i]);
        free(w);
        free(xv);
    }
    /* Managed memory: refused beyond the free memory, usable below it. */
    {
        hx_cuda_device_props pr;
        PCHECK(p->device_props(0, &pr));
        void *big = NULL;
        int s = p->managed_alloc(c, pr.free_mem + ((size_t)1 << 30), &big);
        printf("  managed_alloc(free + 1 GiB) refused: %s (%s)\n", s == HX_ERR_NO_MEMORY ? "ok" : "FAIL",
               p->last_error());
        failures += s != HX_ERR_NO_MEMORY;
        if (pr.managed_memory) {
            const size_t n = 1 << 20;
            PCHECK(p->managed_alloc(c, 2 * n * 4, &M));
            float *m = M;
            for (size_t i = 0; i < 2 * n; i++)
                m[i] = (float)(i % 1000);
            PCHECK(p->managed_read_mostly(c, m + n, n * 4));
            if (pr.concurrent_managed)
                PCHECK(p->managed_prefetch(c, M, 2 * n * 4, 1));
            hx_op_add a = {.n = n};
            void *bufs[2] = {m, m + n};
            size_t sizes[2] = {n * 4, n * 4};
            PCHECK(p->kernel_find("add")->launch(c, &a, bufs, sizes, 2));
            PCHECK(p->synchronize(c));
            int ok = 1;
            for (size_t i = 0; i < n; i++)
                ok &= m[i] == (float)(i % 1000) + (float)((n + i) % 1000);
            printf("  managed memory add (prefetched%s): %s\n", pr.concurrent_managed ? "" : " not supported",
                   ok ? "ok" : "FAIL");
            failures += !ok;
        }
    }
out:
    if (c) {
        if (M)
            p->mem_free(c, M);
        if (W)
            p->mem_free(c, W);
        if (X)
            p->mem_free(c, X);
        if (Y)
            p->mem_free(c, Y);
        p->event_destroy(e0);
        p->event_destroy(e1);
        p->context_destroy(c);
    }
}

/* --compare A B BOUND: NMSE of float32 file B against A (two hetero-run
 * --logits outputs of the same tokens on different devices). */
static int compare_files(const char *a, const char *b, double bound)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    if (!fa || !fb) {
        fprintf(stderr, "bench-cuda-ops: cannot open %s\n", !fa ? a : b);
        if (fa)
            fclose(fa);
        if (fb)
            fclose(fb);
        return 1;
    }
    double num = 0, den = 0, maxd = 0;
    size_t n = 0;
    float x, y;
    int ra, rb;
    while ((ra = (int)fread(&x, 4, 1, fa)) == 1 && (rb = (int)fread(&y, 4, 1, fb)) == 1) {
        double e = (double)y - x;
        num += e * e;
        den += (double)x * x;
        maxd = fabs(e) > maxd ? fabs(e) : maxd;
        n++;
    }
    int same_len = ra == 0 && fread(&y, 4, 1, fb) == 0;
    fclose(fa);
    fclose(fb);
    double err = den > 0 ? num / den : num;
    int ok = same_len && n > 0 && err <= bound && isfinite(err);
    printf("  %s vs %s: %zu values, nmse %.3g, max |diff| %.3g (bound %.0e)%s: %s\n", b, a, n, err, maxd, bound,
           same_len ? "" : ", LENGTHS DIFFER", ok ? "ok" : "FAIL");
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "--compare")) {
        double tol;
        if (cli_double("bench-cuda-ops", "--compare TOLERANCE", argv[4], 0, 1e30, &tol))
            return CLI_EXIT_USAGE;
        return compare_files(argv[2], argv[3], tol);
    }
    static const char usage[] = "usage: bench-cuda-ops [--allow-absent] [--perf-n N (multiple of 256)]\n"
                                "       bench-cuda-ops --compare A B TOLERANCE\n";
    int allow_absent = 0;
    for (int i = 1; i < argc; i++) {
        int n;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return fputs(usage, stdout), 0;
        else if (!strcmp(argv[i], "--allow-absent"))
            allow_absent = 1;
        else if (!strcmp(argv[i], "--perf-n") && i + 1 < argc) {
            if (cli_int("bench-cuda-ops", "--perf-n", argv[++i], 256, 1 << 16, &n))
                return CLI_EXIT_USAGE;
            if (n % 256)
                return fprintf(stderr, "bench-cuda-ops: --perf-n takes a multiple of 256, not '%s'\n", argv[i]),
                       CLI_EXIT_USAGE;
            perf_n = (uint32_t)n;
        } else {
            fputs(usage, stderr);
            return CLI_EXIT_USAGE;
        }
    }
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = "all";
    if (hx_runtime_open(&rt, &o)) {
        fprintf(stderr, "bench-cuda-ops: %s\n", hx_last_error());
        return 1;
    }
    for (int i = 0; i < hx_runtime_device_count(rt); i++) {
        hx_device_info d;
        hx_runtime_device_info(rt, i, &d);
        if (d.family == HX_FAMILY_CUDA && gpu < 0) {
            gpu = i;
            printf("GPU: device %d, %s (%s), %d SMs, %.1f GiB%s\n", i, d.name, d.version, d.compute_units,
                   d.global_mem_bytes / 1073741824.0, d.unified_memory ? ", unified memory" : "");
        }
    }
    if (gpu < 0) {
        const char *why = hx_runtime_absence_reason(rt, HX_FAMILY_CUDA);
        printf("bench-cuda-ops: no CUDA device: %s\n", why ? why : "(no reason recorded)");
        hx_runtime_close(rt);
        return allow_absent ? 0 : 2;
    }
    perf();
    hx_runtime_close(rt);
    printf("\nbench-cuda-ops: %s (%d failure%s)\n", failures ? "FAILED" : "all ran, errors within bounds", failures,
           failures == 1 ? "" : "s");
    return failures ? 1 : 0;
}
