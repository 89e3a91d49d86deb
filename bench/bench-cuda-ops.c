/* bench-cuda-ops: every CUDA kernel against a scalar host reference on
 * random inputs, through the runtime (tasks pinned to the GPU), with the
 * normalized mean squared error of each and a bound; then GEMM speed of
 * the plugin's path beside cuBLAS's own GEMM on the same shapes.
 *
 *   build/bench-cuda-ops [--allow-absent] [--no-perf] [--perf-n N]
 *   build/bench-cuda-ops --compare A.f32 B.f32 BOUND   (NMSE of B against A)
 *
 * Exit status: 0 all within bounds, 1 a failure, 2 no CUDA device (0 with
 * --allow-absent).  When the CPU backend implements an op (its built-in
 * codelet has a CPU function) the CPU result is compared too.
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

static hx_runtime *rt;
static int gpu = -1, cpu = -1, failures, resident_checks;
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

static void buf_read(hx_buffer *b, void *out, size_t bytes)
{
    void *p;
    if (hx_buffer_acquire(b, HX_R, &p)) {
        fprintf(stderr, "read back: %s\n", hx_last_error());
        exit(1);
    }
    memcpy(out, p, bytes);
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

/* Runs the op on the GPU (and on the CPU when it can), compares output
 * buffer `out` (n floats, after the run) with `ref`.  `reset` restores
 * in/out buffers between the two runs (for RW ops). */
typedef void (*reset_fn)(hx_buffer **bufs, void *ctx);

static void check_op(const char *op, const char *what, hx_buffer **bufs, const hx_access *modes, int nb,
                     const void *args, size_t as, int out, size_t n, const double *ref, double bound,
                     double cpu_bound, reset_fn reset, void *ctx)
{
    hx_codelet local;
    const hx_codelet *cl = codelet_for(op, &local);
    float *got = malloc(n * sizeof(float));
    hx_status s = run_on(gpu, cl, bufs, modes, nb, args, as);
    if (s) {
        printf("  %-10s %-34s FAIL: %s\n", op, what, hx_last_error());
        failures++;
    } else {
        buf_read(bufs[out], got, n * sizeof(float));
        report(op, what, nmse(got, ref, n), bound);
    }
    if (cpu >= 0 && hx_device_implements(rt, cpu, op)) {
        if (reset)
            reset(bufs, ctx);
        if ((s = run_on(cpu, cl, bufs, modes, nb, args, as))) {
            printf("  %-10s %-34s cpu FAIL: %s\n", op, what, hx_last_error());
            failures++;
        } else {
            buf_read(bufs[out], got, n * sizeof(float));
            char w[64];
            snprintf(w, sizeof w, "%s (cpu)", what);
            report(op, w, nmse(got, ref, n), cpu_bound);
        }
    }
    free(got);
}

/* ---- ops ---------------------------------------------------------------- */

static void check_matmul(uint32_t type, uint32_t T, uint32_t N, uint32_t K, int bias)
{
    uint64_t rb = hx_dq_row_bytes(type, K);
    uint8_t *w = make_weights(type, N, K);
    float *x = malloc(sizeof(float) * T * K), *b = malloc(sizeof(float) * N), *row = malloc(sizeof(float) * K);
    double *ref = calloc((size_t)T * N, sizeof(double));
    fill(x, (size_t)T * K, 1.0f);
    fill(b, N, 1.0f);
    for (uint32_t n = 0; n < N; n++) {
        decode_row(type, w + n * rb, K, row);
        for (uint32_t t = 0; t < T; t++) {
            double s = bias ? b[n] : 0.0;
            for (uint32_t k = 0; k < K; k++)
                s += (double)row[k] * x[(uint64_t)t * K + k];
            ref[(uint64_t)t * N + n] = s;
        }
    }
    hx_buffer *bufs[4] = {buf_from(w, rb * N), buf_from(x, sizeof(float) * T * K),
                          buf_from(NULL, sizeof(float) * T * N), bias ? buf_from(b, sizeof(float) * N) : NULL};
    hx_access modes[4] = {HX_R, HX_R, HX_W, HX_R};
    hx_op_matmul a = {.wtype = type, .T = T, .N = N, .K = K, .has_bias = (uint32_t)bias};
    /* Decode reads weights as they are; prefill rounds activations (and
     * quantized weights) to 16 bits for the tensor cores.  The CPU path
     * quantizes activations to Q8 for quantized weights. */
    int half = T > 1 && type != HX_TYPE_F32;
    double bound = !half ? 1e-9 : type == HX_TYPE_BF16 ? 1e-4 : 1e-5;
    double cpu_bound = hx_dq_is_quantized(type) ? 1e-3 : 1e-4;
    char what[64];
    snprintf(what, sizeof what, "%s T=%u N=%u K=%u%s", hx_type_name(type), T, N, K, bias ? " +bias" : "");
    check_op("matmul", what, bufs, modes, 3 + bias, &a, sizeof a, 2, (size_t)T * N, ref, bound, cpu_bound, NULL,
             NULL);

    /* Weights stay resident: a second product copies activations only. */
    hx_runtime_stats before, after;
    hx_runtime_stats_get(rt, &before);
    hx_codelet local;
    if (run_on(gpu, codelet_for("matmul", &local), bufs, modes, 3 + bias, &a, sizeof a) == HX_OK) {
        hx_runtime_stats_get(rt, &after);
        uint64_t moved = after.bytes_copied - before.bytes_copied;
        uint64_t limit = sizeof(float) * ((uint64_t)T * K + (uint64_t)T * N);
        int ok = moved <= limit;
        failures += !ok;
        resident_checks += ok;
        if (!ok)
            printf("  %-10s %-34s FAIL: second run copied %llu bytes (activations are %llu): weights re-uploaded\n",
                   "matmul", what, (unsigned long long)moved, (unsigned long long)limit);
    }
    for (int i = 0; i < 4; i++)
        hx_buffer_destroy(bufs[i]);
    free(w);
    free(x);
    free(b);
    free(row);
    free(ref);
}

static void check_rmsnorm(uint32_t T, uint32_t D)
{
    float *x = malloc(sizeof(float) * T * D), *w = malloc(sizeof(float) * D);
    double *ref = malloc(sizeof(double) * T * D);
    fill(x, (size_t)T * D, 3.0f);
    fill(w, D, 1.0f);
    const float eps = 1e-5f;
    for (uint32_t t = 0; t < T; t++) {
        double ss = 0;
        for (uint32_t i = 0; i < D; i++)
            ss += (double)x[t * D + i] * x[t * D + i];
        double sc = 1.0 / sqrt(ss / D + eps);
        for (uint32_t i = 0; i < D; i++)
            ref[t * D + i] = x[t * D + i] * sc * w[i];
    }
    hx_buffer *bufs[3] = {buf_from(x, 4 * T * D), buf_from(w, 4 * D), buf_from(NULL, 4 * T * D)};
    hx_access modes[3] = {HX_R, HX_R, HX_W};
    hx_op_rmsnorm a = {.T = T, .D = D, .eps = eps};
    char what[64];
    snprintf(what, sizeof what, "T=%u D=%u", T, D);
    check_op("rmsnorm", what, bufs, modes, 3, &a, sizeof a, 2, (size_t)T * D, ref, 1e-10, 1e-10, NULL, NULL);
    for (int i = 0; i < 3; i++)
        hx_buffer_destroy(bufs[i]);
    free(x);
    free(w);
    free(ref);
}

struct rope_ctx {
    const float *x;
    size_t bytes;
};

static void rope_reset(hx_buffer **bufs, void *ctx)
{
    struct rope_ctx *r = ctx;
    void *p;
    if (hx_buffer_acquire(bufs[0], HX_W, &p) == HX_OK) {
        memcpy(p, r->x, r->bytes);
    }
}

static void check_rope(uint32_t T, uint32_t H, uint32_t Dh, uint32_t n_rot, int neox)
{
    size_t n = (size_t)T * H * Dh;
    float *x = malloc(4 * n);
    int32_t *pos = malloc(4 * T);
    double *ref = malloc(8 * n);
    fill(x, n, 2.0f);
    for (uint32_t t = 0; t < T; t++)
        pos[t] = (int32_t)(rnd() % 32768);
    const float base = 500000.0f, fs = 1.0f;
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t h = 0; h < H; h++) {
            const float *v = x + ((size_t)t * H + h) * Dh;
            double *o = ref + ((size_t)t * H + h) * Dh;
            for (uint32_t i = 0; i < Dh; i++)
                o[i] = v[i];
            for (uint32_t i = 0; i < n_rot / 2; i++) {
                double th = pos[t] * (double)fs * pow(base, -2.0 * i / n_rot);
                uint32_t i0 = neox ? i : 2 * i, i1 = neox ? i + n_rot / 2 : 2 * i + 1;
                o[i0] = v[i0] * cos(th) - v[i1] * sin(th);
                o[i1] = v[i0] * sin(th) + v[i1] * cos(th);
            }
        }
    hx_buffer *bufs[2] = {buf_from(x, 4 * n), buf_from(pos, 4 * T)};
    hx_access modes[2] = {HX_RW, HX_R};
    hx_op_rope a = {.T = T, .H = H, .Dh = Dh, .n_rot = n_rot, .freq_base = base, .freq_scale = fs,
                    .neox = (uint32_t)neox};
    char what[64];
    snprintf(what, sizeof what, "%s T=%u H=%u Dh=%u rot=%u", neox ? "neox" : "normal", T, H, Dh, n_rot);
    struct rope_ctx rc = {x, 4 * n};
    /* Positions up to 32768: a float angle there carries ~1e-3 rad of
     * error, hence the looser bound for a CPU that computes in float. */
    check_op("rope", what, bufs, modes, 2, &a, sizeof a, 0, n, ref, 1e-10, 1e-5, rope_reset, &rc);
    for (int i = 0; i < 2; i++)
        hx_buffer_destroy(bufs[i]);
    free(x);
    free(pos);
    free(ref);
}

static void check_add_swiglu(uint64_t n)
{
    float *x = malloc(4 * n), *y = malloc(4 * n);
    double *ref = malloc(8 * n);
    fill(x, n, 4.0f);
    fill(y, n, 4.0f);
    for (uint64_t i = 0; i < n; i++)
        ref[i] = (double)x[i] / (1.0 + exp(-(double)x[i])) * y[i];
    hx_buffer *bufs[3] = {buf_from(x, 4 * n), buf_from(y, 4 * n), buf_from(NULL, 4 * n)};
    hx_access sm[3] = {HX_R, HX_R, HX_W};
    hx_op_swiglu sa = {.n = n};
    char what[64];
    snprintf(what, sizeof what, "n=%llu", (unsigned long long)n);
    check_op("swiglu", what, bufs, sm, 3, &sa, sizeof sa, 2, n, ref, 1e-10, 1e-8, NULL, NULL);
    for (uint64_t i = 0; i < n; i++)
        ref[i] = (double)x[i] + y[i];
    struct rope_ctx rc = {x, 4 * n};
    hx_access am[2] = {HX_RW, HX_R};
    hx_op_add aa = {.n = n};
    check_op("add", what, bufs, am, 2, &aa, sizeof aa, 0, n, ref, 1e-12, 1e-12, rope_reset, &rc);
    for (int i = 0; i < 3; i++)
        hx_buffer_destroy(bufs[i]);
    free(x);
    free(y);
    free(ref);
}

static void check_get_rows(uint32_t type, uint32_t V, uint32_t D, uint32_t T)
{
    uint64_t rb = hx_dq_row_bytes(type, D);
    uint8_t *w = make_weights(type, V, D);
    int32_t *ids = malloc(4 * T);
    float *row = malloc(4 * D);
    double *ref = malloc(8 * (size_t)T * D);
    for (uint32_t t = 0; t < T; t++) {
        ids[t] = (int32_t)(rnd() % V);
        decode_row(type, w + (uint64_t)ids[t] * rb, D, row);
        for (uint32_t i = 0; i < D; i++)
            ref[(size_t)t * D + i] = row[i];
    }
    hx_buffer *bufs[3] = {buf_from(w, rb * V), buf_from(ids, 4 * T), buf_from(NULL, 4 * (size_t)T * D)};
    hx_access modes[3] = {HX_R, HX_R, HX_W};
    hx_op_get_rows a = {.type = type, .T = T, .D = D};
    char what[64];
    snprintf(what, sizeof what, "%s V=%u D=%u T=%u", hx_type_name(type), V, D, T);
    check_op("get_rows", what, bufs, modes, 3, &a, sizeof a, 2, (size_t)T * D, ref, 1e-14, 1e-14, NULL, NULL);
    /* A token id outside the table: the task fails with HX_ERR_RANGE and
     * the device stays usable. */
    hx_codelet local;
    ids[T / 2] = (int32_t)V;
    void *p;
    if (hx_buffer_acquire(bufs[1], HX_W, &p) == HX_OK) {
        memcpy(p, ids, 4 * T);
    }
    hx_status s = run_on(gpu, codelet_for("get_rows", &local), bufs, modes, 3, &a, sizeof a);
    int ok = s == HX_ERR_RANGE;
    ids[T / 2] = 0;
    if (hx_buffer_acquire(bufs[1], HX_W, &p) == HX_OK) {
        memcpy(p, ids, 4 * T);
    }
    ok = ok && run_on(gpu, codelet_for("get_rows", &local), bufs, modes, 3, &a, sizeof a) == HX_OK;
    failures += !ok;
    printf("  %-10s %-34s %s\n", "get_rows", "bad id -> HX_ERR_RANGE, then usable", ok ? "ok" : "FAIL");
    for (int i = 0; i < 3; i++)
        hx_buffer_destroy(bufs[i]);
    free(w);
    free(ids);
    free(row);
    free(ref);
}

/* The host's Q8_0 quantization of one 32-element block (as llama.cpp's
 * reference quantizer does it). */
static void quantize_q8_0(const float *x, uint8_t *b)
{
    float amax = 0;
    for (int i = 0; i < 32; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    put16(b, hx_dq_f32_to_f16(d));
    for (int i = 0; i < 32; i++)
        b[2 + i] = (uint8_t)(int8_t)roundf(x[i] * id);
}

static void store_row(uint32_t kv_type, const float *x, uint32_t E, uint8_t *dst)
{
    if (kv_type == HX_TYPE_F16)
        for (uint32_t e = 0; e < E; e++)
            put16(dst + 2 * e, hx_dq_f32_to_f16(x[e]));
    else if (kv_type == HX_TYPE_F32)
        memcpy(dst, x, 4 * (size_t)E);
    else
        for (uint32_t g = 0; g < E / 32; g++)
            quantize_q8_0(x + 32 * g, dst + 34 * g);
}

/* kv_store then attention over a paged cache: two sequences whose blocks
 * are scattered, one prefilling T0 tokens, one decoding at position P1. */
static void check_kv(uint32_t kv_type, uint32_t Hq, uint32_t Hkv, uint32_t Dh)
{
    const uint32_t bs = 16, nblocks = 24, max_blocks = 10, S = 2, T0 = 37, P1 = 130;
    uint32_t E = Hkv * Dh, T = T0 + 1;
    uint64_t rb = hx_dq_row_bytes(kv_type, E), cache = rb * bs * nblocks;
    uint32_t perm[24];
    for (uint32_t i = 0; i < nblocks; i++)
        perm[i] = i;
    for (uint32_t i = nblocks - 1; i > 0; i--) {
        uint32_t j = rnd() % (i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    hx_kv_layout l = {.T = T, .S = S, .max_blocks = max_blocks, .block_size = bs};
    int32_t *meta = calloc(hx_meta_ints(&l), 4);
    int32_t *bt = meta + 3 * T;
    for (uint32_t s = 0; s < S; s++)
        for (uint32_t b = 0; b < max_blocks; b++)
            bt[s * max_blocks + b] = (int32_t)perm[(s * max_blocks + b) % nblocks];
    for (uint32_t t = 0; t < T; t++) {
        uint32_t s = t < T0 ? 0 : 1, p = t < T0 ? t : P1;
        meta[T + t] = (int32_t)p;
        meta[2 * T + t] = (int32_t)s;
        meta[t] = bt[s * max_blocks + p / bs] * (int32_t)bs + (int32_t)(p % bs);
    }
    /* Caches already holding sequence 1's earlier positions (random). */
    uint8_t *kc = calloc(1, cache), *vc = calloc(1, cache);
    float *tmp = malloc(4 * E);
    for (uint32_t p = 0; p < P1; p++) {
        uint64_t slot = (uint64_t)bt[max_blocks + p / bs] * bs + p % bs;
        fill(tmp, E, 1.0f);
        store_row(kv_type, tmp, E, kc + slot * rb);
        fill(tmp, E, 1.0f);
        store_row(kv_type, tmp, E, vc + slot * rb);
    }
    float *k = malloc(4 * (size_t)T * E), *v = malloc(4 * (size_t)T * E), *q = malloc(4 * (size_t)T * Hq * Dh);
    fill(k, (size_t)T * E, 1.0f);
    fill(v, (size_t)T * E, 1.0f);
    fill(q, (size_t)T * Hq * Dh, 1.0f);
    /* Reference caches after the store. */
    uint8_t *rk = malloc(cache), *rv = malloc(cache);
    memcpy(rk, kc, cache);
    memcpy(rv, vc, cache);
    for (uint32_t t = 0; t < T; t++) {
        store_row(kv_type, k + (size_t)t * E, E, rk + (uint64_t)meta[t] * rb);
        store_row(kv_type, v + (size_t)t * E, E, rv + (uint64_t)meta[t] * rb);
    }
    hx_buffer *bk = buf_from(k, 4 * (size_t)T * E), *bv = buf_from(v, 4 * (size_t)T * E);
    hx_buffer *bkc = buf_from(kc, cache), *bvc = buf_from(vc, cache), *bm = buf_from(meta, 4 * hx_meta_ints(&l));
    hx_buffer *sb[5] = {bk, bv, bkc, bvc, bm};
    hx_access sm[5] = {HX_R, HX_R, HX_RW, HX_RW, HX_R};
    hx_op_kv_store sa = {.kv = l, .Hkv = Hkv, .Dh = Dh, .kv_type = kv_type};
    hx_codelet local;
    char what[64];
    snprintf(what, sizeof what, "%s Hq=%u Hkv=%u Dh=%u", hx_type_name(kv_type), Hq, Hkv, Dh);
    hx_status s = run_on(gpu, codelet_for("kv_store", &local), sb, sm, 5, &sa, sizeof sa);
    uint8_t *gk = malloc(cache), *gv = malloc(cache);
    if (s) {
        printf("  %-10s %-34s FAIL: %s\n", "kv_store", what, hx_last_error());
        failures++;
    } else {
        buf_read(bkc, gk, cache);
        buf_read(bvc, gv, cache);
        int same = !memcmp(gk, rk, cache) && !memcmp(gv, rv, cache);
        failures += !same;
        printf("  %-10s %-34s %s\n", "kv_store", what, same ? "bit-exact ok" : "FAIL: caches differ");
    }
    /* Attention over the reference caches, so a kv_store bug cannot hide
     * an attention bug. */
    float scale = 1.0f / sqrtf((float)Dh);
    double *ref = calloc((size_t)T * Hq * Dh, 8);
    float *kr = malloc(4 * E), *vr = malloc(4 * E);
    double *sc = malloc(8 * (P1 + 1));
    for (uint32_t t = 0; t < T; t++) {
        uint32_t sq = (uint32_t)meta[2 * T + t], p = (uint32_t)meta[T + t];
        for (uint32_t h = 0; h < Hq; h++) {
            uint32_t hk = h / (Hq / Hkv);
            const float *qh = q + ((size_t)t * Hq + h) * Dh;
            double mx = -INFINITY, sum = 0;
            for (uint32_t j = 0; j <= p; j++) {
                uint64_t slot = (uint64_t)bt[sq * max_blocks + j / bs] * bs + j % bs;
                decode_row(kv_type, rk + slot * rb, E, kr);
                double d = 0;
                for (uint32_t e = 0; e < Dh; e++)
                    d += (double)(qh[e] * scale) * kr[hk * Dh + e];
                sc[j] = d;
                mx = d > mx ? d : mx;
            }
            double *o = ref + ((size_t)t * Hq + h) * Dh;
            for (uint32_t j = 0; j <= p; j++) {
                uint64_t slot = (uint64_t)bt[sq * max_blocks + j / bs] * bs + j % bs;
                decode_row(kv_type, rv + slot * rb, E, vr);
                double w = exp(sc[j] - mx);
                sum += w;
                for (uint32_t e = 0; e < Dh; e++)
                    o[e] += w * vr[hk * Dh + e];
            }
            for (uint32_t e = 0; e < Dh; e++)
                o[e] /= sum;
        }
    }
    void *pp;
    if (hx_buffer_acquire(bkc, HX_W, &pp) == HX_OK) {
        memcpy(pp, rk, cache);
    }
    if (hx_buffer_acquire(bvc, HX_W, &pp) == HX_OK) {
        memcpy(pp, rv, cache);
    }
    hx_buffer *bq = buf_from(q, 4 * (size_t)T * Hq * Dh), *bo = buf_from(NULL, 4 * (size_t)T * Hq * Dh);
    hx_buffer *ab[5] = {bq, bkc, bvc, bm, bo};
    hx_access am[5] = {HX_R, HX_R, HX_R, HX_R, HX_W};
    hx_op_attention aa = {.kv = l, .Hq = Hq, .Hkv = Hkv, .Dh = Dh, .kv_type = kv_type, .scale = scale};
    /* The CPU dots Q8_0 keys with queries quantized to Q8_0, as llama.cpp does. */
    check_op("attention", what, ab, am, 5, &aa, sizeof aa, 4, (size_t)T * Hq * Dh, ref, 1e-9,
             kv_type == HX_TYPE_Q8_0 ? 1e-4 : 1e-6, NULL, NULL);
    /* A block number outside the cache in the table: HX_ERR_RANGE. */
    if (hx_buffer_acquire(bm, HX_W, &pp) == HX_OK) {
        ((int32_t *)pp)[3 * T + max_blocks] = (int32_t)nblocks + 5;
    }
    s = run_on(gpu, codelet_for("attention", &local), ab, am, 5, &aa, sizeof aa);
    failures += s != HX_ERR_RANGE;
    printf("  %-10s %-34s %s\n", "attention", "bad block -> HX_ERR_RANGE", s == HX_ERR_RANGE ? "ok" : "FAIL");
    hx_buffer *all[] = {bk, bv, bkc, bvc, bm, bq, bo};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        hx_buffer_destroy(all[i]);
    free(meta);
    free(kc);
    free(vc);
    free(tmp);
    free(k);
    free(v);
    free(q);
    free(rk);
    free(rv);
    free(gk);
    free(gv);
    free(ref);
    free(kr);
    free(vr);
    free(sc);
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
    if (argc == 5 && !strcmp(argv[1], "--compare"))
        return compare_files(argv[2], argv[3], atof(argv[4]));
    int allow_absent = 0, do_perf = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--allow-absent"))
            allow_absent = 1;
        else if (!strcmp(argv[i], "--no-perf"))
            do_perf = 0;
        else if (!strcmp(argv[i], "--perf-n") && i + 1 < argc && atoi(argv[i + 1]) >= 256 &&
                 atoi(argv[i + 1]) % 256 == 0)
            perf_n = (uint32_t)atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--allow-absent] [--no-perf] [--perf-n N (multiple of 256)]\n", argv[0]);
            return 1;
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
        if (d.family == HX_FAMILY_CPU && cpu < 0)
            cpu = i;
    }
    if (gpu < 0) {
        const char *why = hx_runtime_absence_reason(rt, HX_FAMILY_CUDA);
        printf("bench-cuda-ops: no CUDA device: %s\n", why ? why : "(no reason recorded)");
        hx_runtime_close(rt);
        return allow_absent ? 0 : 2;
    }
    printf("\nOps against the scalar host reference (nmse = sum (got-ref)^2 / sum ref^2):\n");
    const uint32_t types[] = {HX_TYPE_F32,  HX_TYPE_F16,  HX_TYPE_BF16, HX_TYPE_Q8_0, HX_TYPE_Q4_0, HX_TYPE_Q4_1,
                              HX_TYPE_Q5_0, HX_TYPE_Q5_1, HX_TYPE_Q4_K, HX_TYPE_Q5_K, HX_TYPE_Q6_K};
    for (int t = 0; t < 11; t++) {
        check_matmul(types[t], 1, 1000, 768, 0);
        check_matmul(types[t], 1, 2048, 4096, 1);
        check_matmul(types[t], 7, 520, 1024, 0);
        check_matmul(types[t], 33, 1100, 2048, 1);
        check_get_rows(types[t], 300, 512, 17);
    }
    check_matmul(HX_TYPE_Q8_0, 40, 9000, 4096, 0); /* 72 MiB of F16 weights: two tiles */
    check_rmsnorm(1, 4096);
    check_rmsnorm(9, 5120);
    check_rope(5, 8, 128, 128, 0);
    check_rope(5, 8, 128, 64, 1);
    check_rope(3, 4, 80, 80, 1);
    check_add_swiglu(1000003);
    check_kv(HX_TYPE_F16, 8, 2, 128);
    check_kv(HX_TYPE_F16, 4, 4, 80);
    check_kv(HX_TYPE_Q8_0, 8, 2, 64);
    check_kv(HX_TYPE_F16, 2, 1, 256);
    check_kv(HX_TYPE_F32, 8, 4, 64);
    printf("  %-10s %-34s %s\n", "matmul", "weights resident on a second run",
           resident_checks ? "ok" : "FAIL (never checked)");
    failures += !resident_checks;
    if (do_perf)
        perf();
    hx_runtime_close(rt);
    printf("\nbench-cuda-ops: %s (%d failure%s)\n", failures ? "FAILED" : "all within bounds", failures,
           failures == 1 ? "" : "s");
    return failures ? 1 : 0;
}
