/* Every op of the op list (ops/op_list.h) on every device the runtime
 * opens that implements it, against the scalar references of
 * tests/ref_ops.c, on random (never zero) inputs of many shapes and types,
 * by normalized mean squared error.
 *
 * The devices: the CPU at each SIMD level this processor runs (the CPU
 * kernels forced to it, as HX_SIMD does), PoCL's CPU device opened by name
 * as an OpenCL device, the same presented as an emulated FPGA (it offers
 * only its bitstream's kernels), and CUDA.  Each test is one op, looped
 * over the devices; every task is pinned to the device under test.  A
 * device that is absent prints "ops: NAME absent: OP not checked"
 * and the test `ops_every_device_is_checked_or_named` counts and lists
 * them, so a machine without a GPU reads as CUDA not checked, never as
 * CUDA passed; an op a present device does not implement is listed the
 * same way.  PoCL is a build dependency: its absence fails.  CUDA runs
 * here when a GPU and the plugin are present (bench/gpu-check runs this
 * suite on such a machine); everywhere, the CUDA backend also runs on the
 * plugin's host emulation (tests/fixtures/cuda_host_plugin.c), listed as
 * such: it checks the backend and the coherence of a device with its own
 * memory, not the GPU's kernels.
 *
 * Bounds, each ~1000x what was measured: ops that only move or decode
 * data 1e-12 (measured 0); float accumulations (norms, matmuls over K up
 * to 1024, softmax-weighted sums over up to 200 keys) 1e-10 (measured <=
 * 3e-13 on PoCL); rope 1e-9, since theta is computed in float for
 * positions up to 600 (measured <= 2e-11).  On the CPU, quantized weights
 * meet activations quantized to Q8_0/Q8_K, and a Q4_0 KV cache meets a
 * query quantized to Q8_0, as in llama.cpp: rounding to 8 bits with one
 * scale per block costs ~1e-5 NMSE over many outputs, up to ~2e-4 for a
 * single dot product with cancellation, so those cases are held to 1e-3.
 * A Q8_0 KV cache meets the query in F32, as the reference does, and is
 * held to the float bound.
 * On CUDA, a prefill rounds activations and dequantized weights to 16 bits
 * for the tensor cores (1e-5, BF16 1e-4), and decode reads them as they
 * are (1e-9).  A Q8_0 cache written by a kernel may differ from the
 * reference in a rounding tie of the scale's division (1e-6 on the decoded
 * values). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_cpu/cpu_kernels.h"
#include "kernels_cpu/quant.h"
#include "ops/op_list.h"
#include "tests/cl_test.h"
#include "tests/op_cases.h"
#include "tests/ref_ops.h"

#define NMSE_EXACT 1e-12
#define NMSE_ACCUM 1e-10
#define NMSE_ROPE 1e-9

typedef enum { ON_CPU, ON_OPENCL, ON_CUDA } target_kind;

typedef struct {
    const char *name;      /* as the suite prints it */
    const char *devices;   /* hx_runtime_options.devices */
    const char *emulation; /* hx_runtime_options.fpga_emulation */
    hx_device_family family;
    target_kind kind;
    int simd;           /* the CPU kernels' level (hx_simd_level), or -1 */
    int required;       /* absent fails the test instead of being listed */
    const char *plugin; /* the CUDA plugin in the build directory to load */
} target;

static const target targets[] = {
    {"CPU scalar", "cpu", "off", HX_FAMILY_CPU, ON_CPU, HX_SIMD_SCALAR, 1, NULL},
    {"CPU AVX2", "cpu", "off", HX_FAMILY_CPU, ON_CPU, HX_SIMD_AVX2, 0, NULL},
    {"CPU AVX-512", "cpu", "off", HX_FAMILY_CPU, ON_CPU, HX_SIMD_AVX512, 0, NULL},
    {"OpenCL (PoCL CPU device)", "opencl", "off", HX_FAMILY_OPENCL, ON_OPENCL, -1, 1, NULL},
    {"FPGA (PoCL emulation)", "fpga", "pocl", HX_FAMILY_OPENCL, ON_OPENCL, -1, 1, NULL},
    {"CUDA", "cuda", "off", HX_FAMILY_CUDA, ON_CUDA, -1, 0, "libhetero-cuda.so"},
    /* The CUDA backend (binding, coverage, copies to a memory of its own)
     * on the plugin's host emulation, whose kernels round as the GPU's do:
     * what runs of CUDA where there is no GPU.  Built with the tests. */
    {"CUDA backend on the plugin's host emulation", "cuda", "off", HX_FAMILY_CUDA, ON_CUDA, -1, 1,
     "libhetero-cuda-host.so"},
};
enum { N_TARGETS = sizeof targets / sizeof targets[0] };

/* The device under test of the current test. */
typedef struct {
    const target *tg;
    hx_runtime *rt;
    int dev;
    /* The device computes in host memory.  A failed task's outputs reach
     * the host only then: elsewhere the coherence layer keeps the host's
     * copy, so after an error only the status is checked. */
    int unified;
} under_test;

/* Why the target cannot be opened here (its absence), or NULL with *rt
 * open on it and *dev its index. */
static const char *open_target(const target *tg, hx_runtime **rt, int *dev, char *why, size_t cap)
{
    *rt = NULL;
    if (tg->simd >= 0 && tg->simd > (int)hx_cpu_simd_max()) {
        snprintf(why, cap, "this CPU runs %s at most", hx_cpu_simd_name(hx_cpu_simd_max()));
        return why;
    }
    if (tg->simd >= 0)
        HX_ASSERT_OK(hx_quant_set_level((hx_simd_level)tg->simd));
    char plugin[512];
    if (tg->plugin) { /* the plugin this build made */
        snprintf(plugin, sizeof plugin, "%s/%s", hx_test_build_dir(), tg->plugin);
        setenv("HX_CUDA_PLUGIN", plugin, 1);
    }
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = tg->devices;
    o.fpga_emulation = tg->emulation;
    o.cpu_threads = 2;
    hx_status st = hx_runtime_open(rt, &o);
    if (st != HX_OK) {
        ck_assert_msg(st == HX_ERR_NO_DEVICE && !tg->required, "%s: %s", tg->name, hx_last_error());
        snprintf(why, cap, "%s", hx_last_error());
        return why;
    }
    for (*dev = 0; *dev < hx_runtime_device_count(*rt); ++*dev) {
        hx_device_info d;
        HX_ASSERT_OK(hx_runtime_device_info(*rt, *dev, &d));
        if (d.family == tg->family)
            return NULL;
    }
    ck_abort_msg("%s opened without a %s device", tg->name, hx_device_family_str(tg->family));
    return NULL;
}

/* Opens loop target i for op `name`; 0 (and a printed line) when it is
 * absent or does not implement the op. */
static int begin(int i, const char *name, under_test *u)
{
    char why[512];
    u->tg = &targets[i];
    if (open_target(u->tg, &u->rt, &u->dev, why, sizeof why)) {
        printf("ops: %s absent: %s not checked\n", u->tg->name, name); /* why: in the matrix test */
        return 0;
    }
    hx_device_info info;
    HX_ASSERT_OK(hx_runtime_device_info(u->rt, u->dev, &info));
    u->unified = info.unified_memory;
    if (!hx_device_implements(u->rt, u->dev, name)) {
        printf("ops: %s does not implement %s: not checked\n", u->tg->name, name);
        hx_runtime_close(u->rt);
        return 0;
    }
    return 1;
}

static void end(under_test *u)
{
    hx_runtime_close(u->rt);
    if (u->tg->simd >= 0)
        HX_ASSERT_OK(hx_quant_set_level(hx_cpu_simd_max()));
}

static hx_status run(under_test *u, const char *op, const void *args, size_t args_size, int n, hx_buffer **b,
                     const hx_access *modes)
{
    return hx_case_run(u->rt, u->dev, op, args, args_size, n, b, modes);
}

static int quantized(uint32_t type) { return type != HX_REF_F32 && type != HX_REF_F16; }

static double matmul_bound(const under_test *u, uint32_t type, uint32_t T)
{
    if (u->tg->kind == ON_CPU)
        return quantized(type) ? 1e-3 : NMSE_ACCUM;
    if (u->tg->kind == ON_CUDA)
        return T > 1 && type != HX_REF_F32 ? 1e-5 : 1e-9;
    return NMSE_ACCUM;
}

static double attention_bound(const under_test *u, uint32_t kv_type)
{
    if (u->tg->kind == ON_CPU && kv_type == HX_REF_Q4_0)
        return 1e-3;
    return u->tg->kind == ON_CUDA ? 1e-9 : NMSE_ACCUM;
}

/* ---- gemm_f32 ------------------------------------------------------------- */

START_TEST(gemm_f32_matches_reference)
{
    under_test u;
    if (!begin(_i, "gemm_f32", &u))
        return;
    const uint32_t shapes[][3] = {{1, 1, 1}, {1, 67, 129}, {7, 33, 64}, {19, 130, 77}, {64, 64, 256}};
    unsigned seed = 14;
    for (int s = 0; s < 5; s++) {
        uint32_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *A = malloc(4ull * M * K), *B = malloc(4ull * N * K), *C = malloc(4ull * M * N);
        double *ref = malloc(sizeof(double) * M * N);
        hx_case_random(A, (size_t)M * K, &seed);
        hx_case_random(B, (size_t)N * K, &seed);
        hx_ref_gemm_f32(M, N, K, A, B, ref);
        hx_buffer *b[3] = {hx_case_buffer(u.rt, A, 4ull * M * K), hx_case_buffer(u.rt, B, 4ull * N * K),
                           hx_case_empty(u.rt, 4ull * M * N)};
        hx_args_gemm_f32 g = {M, N, K};
        HX_ASSERT_OK(run(&u, "gemm_f32", &g, sizeof g, 3, b, (hx_access[]){HX_R, HX_R, HX_W}));
        hx_case_read(b[2], C, 4ull * M * N);
        double e = hx_ref_nmse(C, ref, (size_t)M * N);
        ck_assert_msg(e <= NMSE_ACCUM, "%s: M %u N %u K %u: nmse %g", u.tg->name, M, N, K, e);
        hx_case_destroy(b, 3);
        free(A);
        free(B);
        free(C);
        free(ref);
    }
    end(&u);
}
END_TEST

/* ---- get_rows ------------------------------------------------------------ */

START_TEST(get_rows_matches_reference)
{
    under_test u;
    if (!begin(_i, "get_rows", &u))
        return;
    const uint32_t types[] = {HX_REF_F32, HX_REF_F16, HX_REF_Q8_0, HX_REF_Q4_0};
    const uint32_t dims[][2] = {{1, 32}, {5, 96}, {17, 4096}, {3, 33}};
    unsigned seed = 1;
    for (int ti = 0; ti < 4; ti++)
        for (int s = 0; s < 4; s++) {
            uint32_t type = types[ti], T = dims[s][0], D = dims[s][1], V = 37;
            if (D % hx_ref_block(type))
                continue;
            size_t row = hx_ref_row_bytes(type, D);
            uint8_t *table = malloc(row * V);
            for (uint32_t v = 0; v < V; v++)
                hx_ref_random_row(type, table + v * row, D, &seed);
            int32_t *ids = malloc(4 * T);
            for (uint32_t t = 0; t < T; t++)
                ids[t] = (int32_t)(hx_ref_uniform(&seed) * 0.5f * V + 0.5f * V) % (int32_t)V;
            if (T > 2)
                ids[T - 1] = (int32_t)V; /* one past the table: an error, and a NaN row */
            hx_op_get_rows a = {type, T, D};
            double *ref = malloc(sizeof(double) * T * D);
            hx_ref_get_rows(&a, table, row * V, ids, ref);
            hx_buffer *b[3] = {hx_case_buffer(u.rt, table, row * V), hx_case_buffer(u.rt, ids, 4 * T),
                               hx_case_empty(u.rt, 4ull * T * D)};
            hx_status st = run(&u, "get_rows", &a, sizeof a, 3, b, (hx_access[]){HX_R, HX_R, HX_W});
            if (T > 2) {
                ck_assert_int_eq(st, HX_ERR_RANGE);
                /* The status is the contract; each backend words the detail. */
                ck_assert_msg(strstr(hx_last_error(), "get_rows"), "%s", hx_last_error());
            } else {
                HX_ASSERT_OK(st);
            }
            float *out = malloc(4ull * T * D);
            hx_case_read(b[2], out, 4ull * T * D);
            uint32_t good = T > 2 ? T - 1 : T;
            double e = hx_ref_nmse(out, ref, (size_t)good * D);
            ck_assert_msg(st || e <= NMSE_EXACT, "%s: type %u T %u D %u: nmse %g", u.tg->name, type, T, D, e);
            ck_assert_msg(!st || !u.unified || e <= NMSE_EXACT, "%s: type %u T %u D %u: the valid rows: nmse %g",
                          u.tg->name, type, T, D, e);
            for (uint32_t d = 0; good < T && u.unified && d < D; d++)
                ck_assert_msg(isnan(out[(size_t)good * D + d]), "out-of-table id gave %g", out[(size_t)good * D + d]);
            hx_case_destroy(b, 3);
            free(table);
            free(ids);
            free(ref);
            free(out);
        }
    end(&u);
}
END_TEST

/* ---- rmsnorm ------------------------------------------------------------- */

START_TEST(rmsnorm_matches_reference)
{
    under_test u;
    if (!begin(_i, "rmsnorm", &u))
        return;
    const uint32_t dims[][2] = {{1, 1}, {3, 17}, {7, 4096}, {2, 1000}, {65, 64}};
    unsigned seed = 2;
    for (int s = 0; s < 5; s++) {
        uint32_t T = dims[s][0], D = dims[s][1];
        float *x = malloc(4ull * T * D), *w = malloc(4ull * D), *y = malloc(4ull * T * D);
        hx_case_random(x, (size_t)T * D, &seed);
        hx_case_random(w, D, &seed);
        hx_op_rmsnorm a = {T, D, 1e-5f};
        double *ref = malloc(sizeof(double) * T * D);
        hx_ref_rmsnorm(&a, x, w, ref);
        hx_buffer *b[3] = {hx_case_buffer(u.rt, x, 4ull * T * D), hx_case_buffer(u.rt, w, 4ull * D),
                           hx_case_empty(u.rt, 4ull * T * D)};
        HX_ASSERT_OK(run(&u, "rmsnorm", &a, sizeof a, 3, b, (hx_access[]){HX_R, HX_R, HX_W}));
        hx_case_read(b[2], y, 4ull * T * D);
        double e = hx_ref_nmse(y, ref, (size_t)T * D);
        ck_assert_msg(e <= NMSE_ACCUM, "%s: T %u D %u: nmse %g", u.tg->name, T, D, e);
        hx_case_destroy(b, 3);
        free(x);
        free(w);
        free(y);
        free(ref);
    }
    end(&u);
}
END_TEST

/* ---- matmul -------------------------------------------------------------- */

static void check_matmul(under_test *u, uint32_t type, uint32_t T, uint32_t N, uint32_t K, int bias, unsigned *seed)
{
    size_t row = hx_ref_row_bytes(type, K);
    uint8_t *W = malloc(row * N);
    for (uint32_t n = 0; n < N; n++)
        hx_ref_random_row(type, W + n * row, K, seed);
    float *x = malloc(4ull * T * K + 4), *bs = malloc(4ull * N), *y = malloc(4ull * T * N);
    hx_case_random(x, (size_t)T * K, seed);
    hx_case_random(bs, N, seed);
    hx_op_matmul a = {type, T, N, K, (uint32_t)bias};
    double *ref = malloc(sizeof(double) * T * N);
    hx_ref_matmul(&a, W, x, bs, ref);
    hx_buffer *b[4] = {hx_case_buffer(u->rt, W, row * N), hx_case_buffer(u->rt, x, 4ull * T * K + 4),
                       hx_case_empty(u->rt, 4ull * T * N), hx_case_buffer(u->rt, bs, 4ull * N)};
    HX_ASSERT_OK(run(u, "matmul", &a, sizeof a, bias ? 4 : 3, b, (hx_access[]){HX_R, HX_R, HX_W, HX_R}));
    hx_case_read(b[2], y, 4ull * T * N);
    double e = hx_ref_nmse(y, ref, (size_t)T * N);
    ck_assert_msg(e <= matmul_bound(u, type, T), "%s: type %u T %u N %u K %u bias %d: nmse %g", u->tg->name, type, T,
                  N, K, bias, e);
    if (!u->unified) { /* weights stay on a device with its own memory: a second product moves no weight */
        hx_runtime_stats before, after;
        hx_runtime_stats_get(u->rt, &before);
        HX_ASSERT_OK(run(u, "matmul", &a, sizeof a, bias ? 4 : 3, b, (hx_access[]){HX_R, HX_R, HX_W, HX_R}));
        hx_runtime_stats_get(u->rt, &after);
        ck_assert_msg(after.bytes_copied - before.bytes_copied < row * N, "%s: a second product copied %llu bytes",
                      u->tg->name, (unsigned long long)(after.bytes_copied - before.bytes_copied));
    }
    hx_case_destroy(b, 4);
    free(W);
    free(x);
    free(bs);
    free(y);
    free(ref);
}

START_TEST(matmul_matches_reference)
{
    under_test u;
    if (!begin(_i, "matmul", &u))
        return;
    const uint32_t types[] = {HX_REF_F32, HX_REF_F16, HX_REF_Q8_0, HX_REF_Q4_0, HX_REF_Q4_K};
    const uint32_t shapes[][3] = {{1, 1, 256}, {1, 67, 512}, {2, 33, 256}, {17, 45, 768}, {33, 70, 256}, {1, 300, 1024}};
    unsigned seed = 3;
    for (int ti = 0; ti < 5; ti++)
        for (int s = 0; s < 6; s++)
            check_matmul(&u, types[ti], shapes[s][0], shapes[s][1], shapes[s][2], s % 2, &seed);
    /* F32 and F16 take any K, including ones that end mid-block. */
    check_matmul(&u, HX_REF_F32, 1, 13, 77, 1, &seed);
    check_matmul(&u, HX_REF_F16, 5, 19, 45, 0, &seed);
    check_matmul(&u, HX_REF_F32, 16, 16, 33, 0, &seed);
    end(&u);
}
END_TEST

/* The low-bit weight types (Q2_K, Q3_K, IQ4_NL, IQ4_XS): the CPU's kernels
 * take them, at each SIMD level, against the float64 decoding of ggml's
 * formulas; the OpenCL and CUDA kernels do not, and refuse them when
 * pinned there (HX_ERR_NO_DEVICE), which leaves such products to the CPU. */
START_TEST(matmul_low_bit_types)
{
    under_test u;
    if (!begin(_i, "matmul", &u))
        return;
    const uint32_t types[] = {HX_REF_Q2_K, HX_REF_Q3_K, HX_REF_IQ4_NL, HX_REF_IQ4_XS};
    const uint32_t shapes[][3] = {{1, 1, 256}, {1, 67, 512}, {5, 33, 768}, {17, 45, 256}};
    unsigned seed = 31;
    for (int ti = 0; ti < 4; ti++) {
        if (u.tg->kind != ON_CPU) {
            const uint32_t K = 256, N = 4;
            size_t row = hx_ref_row_bytes(types[ti], K);
            uint8_t *W = calloc(N, row);
            float x[256] = {0};
            hx_op_matmul a = {types[ti], 1, N, K, 0};
            hx_buffer *b[3] = {hx_case_buffer(u.rt, W, row * N), hx_case_buffer(u.rt, x, sizeof x),
                               hx_case_empty(u.rt, 4ull * N)};
            hx_status st = run(&u, "matmul", &a, sizeof a, 3, b, (hx_access[]){HX_R, HX_R, HX_W});
            ck_assert_msg(st == HX_ERR_NO_DEVICE, "%s: a type %u matmul pinned there gave %s, not no-device",
                          u.tg->name, types[ti], hx_status_str(st));
            printf("ops: %s refuses matmul of %s weights (it runs on the CPU)\n", u.tg->name,
                   hx_type_name(types[ti]));
            hx_case_destroy(b, 3);
            free(W);
            continue;
        }
        for (int s = 0; s < 4; s++)
            check_matmul(&u, types[ti], shapes[s][0], shapes[s][1], shapes[s][2], s % 2, &seed);
    }
    end(&u);
}
END_TEST

/* ---- matmul_multi -------------------------------------------------------- */

/* Parts of mixed types (three dot partners: F16, Q8_0, Q8_K), row counts
 * off the tiles' multiples and some with a bias: each output against the
 * reference, and bit for bit what the single matmul of its weight writes
 * on the same device, since every device runs each part by its matmul's
 * kernel (the CPU over row units of the same loops). */
static void check_matmul_multi(under_test *u, uint32_t n, const uint32_t *types, const uint32_t *N, uint32_t T,
                               uint32_t K, uint32_t bias_mask, unsigned *seed)
{
    hx_op_matmul_multi a = {.n = n, .T = T, .K = K, .has_bias = bias_mask};
    hx_buffer *b[HX_TASK_MAX_BUFFERS] = {0};
    hx_access modes[HX_TASK_MAX_BUFFERS] = {HX_R};
    float *x = malloc(4ull * T * K);
    hx_case_random(x, (size_t)T * K, seed);
    b[0] = hx_case_buffer(u->rt, x, 4ull * T * K);
    uint8_t *W[HX_MATMUL_MULTI_MAX];
    float *bs[HX_MATMUL_MULTI_MAX];
    for (uint32_t i = 0; i < n; i++) {
        a.wtype[i] = types[i];
        a.N[i] = N[i];
        size_t row = hx_ref_row_bytes(types[i], K);
        W[i] = malloc(row * N[i]);
        for (uint32_t r = 0; r < N[i]; r++)
            hx_ref_random_row(types[i], W[i] + r * row, K, seed);
        bs[i] = malloc(4ull * N[i]);
        hx_case_random(bs[i], N[i], seed);
        b[hx_matmul_multi_w((int)i)] = hx_case_buffer(u->rt, W[i], row * N[i]);
        b[hx_matmul_multi_y((int)i)] = hx_case_empty(u->rt, 4ull * T * N[i]);
        modes[hx_matmul_multi_w((int)i)] = HX_R;
        modes[hx_matmul_multi_y((int)i)] = HX_W;
        if (hx_matmul_multi_bias(&a, (int)i) >= 0) {
            b[hx_matmul_multi_bias(&a, (int)i)] = hx_case_buffer(u->rt, bs[i], 4ull * N[i]);
            modes[hx_matmul_multi_bias(&a, (int)i)] = HX_R;
        }
    }
    const int nb = hx_matmul_multi_nbuffers(&a);
    HX_ASSERT_OK(run(u, "matmul_multi", &a, sizeof a, nb, b, modes));
    for (uint32_t i = 0; i < n; i++) {
        hx_op_matmul m = hx_matmul_multi_part(&a, (int)i);
        float *y = malloc(4ull * T * N[i]), *y1 = malloc(4ull * T * N[i]);
        double *ref = malloc(sizeof(double) * T * N[i]);
        hx_ref_matmul(&m, W[i], x, bs[i], ref);
        hx_case_read(b[hx_matmul_multi_y((int)i)], y, 4ull * T * N[i]);
        double e = hx_ref_nmse(y, ref, (size_t)T * N[i]);
        ck_assert_msg(e <= matmul_bound(u, types[i], T), "%s: part %u type %u T %u N %u K %u: nmse %g", u->tg->name, i,
                      types[i], T, N[i], K, e);
        hx_buffer *sb[4] = {b[hx_matmul_multi_w((int)i)], b[0], hx_case_empty(u->rt, 4ull * T * N[i]),
                            m.has_bias ? b[hx_matmul_multi_bias(&a, (int)i)] : NULL};
        HX_ASSERT_OK(run(u, "matmul", &m, sizeof m, m.has_bias ? 4 : 3, sb, (hx_access[]){HX_R, HX_R, HX_W, HX_R}));
        hx_case_read(sb[2], y1, 4ull * T * N[i]);
        ck_assert_msg(!memcmp(y, y1, 4ull * T * N[i]), "%s: part %u type %u T %u N %u: not the single matmul's bits",
                      u->tg->name, i, types[i], T, N[i]);
        hx_case_destroy(&sb[2], 1);
        free(y);
        free(y1);
        free(ref);
        free(W[i]);
        free(bs[i]);
    }
    hx_case_destroy(b, nb);
    free(x);
}

START_TEST(matmul_multi_matches_matmul)
{
    under_test u;
    if (!begin(_i, "matmul_multi", &u))
        return;
    unsigned seed = 41;
    /* Q/K/V of a GQA layer: K and V a quarter of Q; V of another type. */
    check_matmul_multi(&u, 3, (const uint32_t[]){HX_REF_Q4_0, HX_REF_Q4_0, HX_REF_Q8_0},
                       (const uint32_t[]){64, 16, 16}, 1, 256, 0, &seed);
    check_matmul_multi(&u, 3, (const uint32_t[]){HX_REF_Q4_K, HX_REF_Q4_K, HX_REF_Q8_0},
                       (const uint32_t[]){70, 18, 18}, 5, 512, 5, &seed);
    check_matmul_multi(&u, 3, (const uint32_t[]){HX_REF_F16, HX_REF_Q8_0, HX_REF_Q4_K},
                       (const uint32_t[]){33, 8, 45}, 17, 256, 7, &seed);
    /* gate/up */
    check_matmul_multi(&u, 2, (const uint32_t[]){HX_REF_F32, HX_REF_F32}, (const uint32_t[]){45, 45}, 33, 96, 0,
                       &seed);
    check_matmul_multi(&u, 2, (const uint32_t[]){HX_REF_Q8_0, HX_REF_Q8_0}, (const uint32_t[]){300, 300}, 1, 768, 2,
                       &seed);
    check_matmul_multi(&u, 1, (const uint32_t[]){HX_REF_F16}, (const uint32_t[]){19}, 3, 64, 1, &seed);

    /* A part count the op does not have fails the task, and the device
     * runs the next one. */
    float x[64] = {0}, y[64];
    hx_buffer *b[3] = {hx_case_buffer(u.rt, x, sizeof x), hx_case_buffer(u.rt, x, sizeof x),
                       hx_case_empty(u.rt, sizeof y)};
    hx_op_matmul_multi bad = {.n = 0, .T = 1, .K = 64};
    ck_assert_int_ne(run(&u, "matmul_multi", &bad, sizeof bad, 3, b, (hx_access[]){HX_R, HX_R, HX_W}), HX_OK);
    bad = (hx_op_matmul_multi){.n = 1, .T = 1, .K = 64, .wtype = {HX_REF_F32}, .N = {1}, .has_bias = 2};
    ck_assert_int_ne(run(&u, "matmul_multi", &bad, sizeof bad, 3, b, (hx_access[]){HX_R, HX_R, HX_W}), HX_OK);
    hx_case_destroy(b, 3);
    check_matmul_multi(&u, 2, (const uint32_t[]){HX_REF_F32, HX_REF_F16}, (const uint32_t[]){5, 7}, 2, 64, 3, &seed);
    end(&u);
}
END_TEST

/* ---- rope ---------------------------------------------------------------- */

START_TEST(rope_matches_reference)
{
    under_test u;
    if (!begin(_i, "rope", &u))
        return;
    const uint32_t shapes[][4] = {{5, 3, 64, 64}, {1, 8, 128, 128}, {7, 2, 10, 10}, {4, 3, 64, 32}, {9, 1, 96, 96}};
    unsigned seed = 4;
    for (int s = 0; s < 5; s++)
        for (uint32_t v = 0; v < 4; v++) {
            /* Llama 3.1's frequency factors (1 .. 8) with and without. */
            uint32_t neox = v & 1, has_factors = v >> 1;
            uint32_t T = shapes[s][0], H = shapes[s][1], Dh = shapes[s][2], n_rot = shapes[s][3];
            size_t n = (size_t)T * H * Dh;
            float *x = malloc(4 * n), *y = malloc(4 * n), *factors = malloc(4 * (n_rot / 2));
            int32_t *pos = malloc(4 * T);
            hx_case_random(x, n, &seed);
            for (uint32_t t = 0; t < T; t++)
                pos[t] = (int32_t)((hx_ref_uniform(&seed) + 1.0f) * 300.0f);
            for (uint32_t i = 0; i < n_rot / 2; i++)
                factors[i] = 4.5f + 3.5f * hx_ref_uniform(&seed);
            hx_op_rope a = {T, H, Dh, n_rot, 10000.0f, s == 3 ? 0.5f : 1.0f, neox, has_factors};
            double *ref = malloc(sizeof(double) * n);
            hx_ref_rope(&a, x, pos, factors, ref);
            hx_buffer *b[3] = {hx_case_buffer(u.rt, x, 4 * n), hx_case_buffer(u.rt, pos, 4 * T),
                               hx_case_buffer(u.rt, factors, 4 * (n_rot / 2))};
            HX_ASSERT_OK(run(&u, "rope", &a, sizeof a, 2 + (int)has_factors, b, (hx_access[]){HX_RW, HX_R, HX_R}));
            hx_case_read(b[0], y, 4 * n);
            double e = hx_ref_nmse(y, ref, n);
            ck_assert_msg(e <= NMSE_ROPE, "%s: shape %d neox %u factors %u: nmse %g", u.tg->name, s, neox,
                          has_factors, e);
            if (has_factors) { /* the factors moved the result: the check has power */
                hx_op_rope plain = a;
                plain.has_factors = 0;
                double *unscaled = malloc(sizeof(double) * n);
                hx_ref_rope(&plain, x, pos, NULL, unscaled);
                ck_assert_msg(hx_ref_nmse(y, unscaled, n) > 1e3 * NMSE_ROPE, "%s: factors ignored", u.tg->name);
                free(unscaled);
            }
            hx_case_destroy(b, 3);
            free(x);
            free(y);
            free(factors);
            free(pos);
            free(ref);
        }
    end(&u);
}
END_TEST

/* ---- kv_store ------------------------------------------------------------ */

/* Decoded, the row the kernel wrote in a slot matches the reference's and
 * the stored values. */
static void check_written_row(const under_test *u, uint32_t kv_type, uint32_t Dh, const uint8_t *mine,
                              const uint8_t *ref, const float *src, unsigned long long slot)
{
    double *want = malloc(sizeof(double) * Dh), *orig = malloc(sizeof(double) * Dh), *dec = malloc(sizeof(double) * Dh);
    float *got = malloc(4 * Dh);
    hx_ref_dequantize(kv_type, mine, dec, Dh);
    for (uint32_t d = 0; d < Dh; d++)
        got[d] = (float)dec[d];
    hx_ref_dequantize(kv_type, ref, want, Dh);
    double e = hx_ref_nmse(got, want, Dh);
    uint32_t worst = 0; /* where it parts most from the reference, for the message */
    for (uint32_t d = 1; d < Dh; d++)
        if (fabs(got[d] - want[d]) > fabs(got[worst] - want[worst]))
            worst = d;
    ck_assert_msg(e <= NMSE_EXACT,
                  "%s: type %u slot %llu: nmse %g (element %u: %.9g, the reference %.9g, stored %.9g)", u->tg->name,
                  kv_type, slot, e, worst, got[worst], want[worst], src[worst]);
    for (uint32_t d = 0; d < Dh; d++)
        orig[d] = src[d];
    e = hx_ref_nmse(got, orig, Dh);
    ck_assert_msg(e <= 1e-4, "%s: type %u slot %llu: %g from the stored values", u->tg->name, kv_type, slot, e);
    free(want);
    free(orig);
    free(dec);
    free(got);
}

/* With `bad`, two tokens name slots outside the cache: the task fails with
 * HX_ERR_RANGE, writes the valid ones and nothing else. */
static void check_kv_store(under_test *u, uint32_t kv_type, uint32_t Hkv, uint32_t Dh, int bad, unsigned *seed)
{
    const uint32_t T = 7, block_size = 16, n_blocks = 6, S = 2, max_blocks = 3;
    const uint64_t n_slots = (uint64_t)n_blocks * block_size;
    size_t row = hx_ref_row_bytes(kv_type, Dh), cache = n_slots * Hkv * row;
    uint8_t *kc = malloc(cache), *vc = malloc(cache), *kref = malloc(cache), *vref = malloc(cache);
    for (size_t i = 0; i < cache; i++) {
        kc[i] = (uint8_t)(hx_ref_uniform(seed) * 127);
        vc[i] = (uint8_t)(hx_ref_uniform(seed) * 127);
    }
    memcpy(kref, kc, cache);
    memcpy(vref, vc, cache);
    hx_kv_layout kv = {T, S, max_blocks, block_size};
    int32_t *meta = calloc(hx_meta_ints(&kv), 4);
    /* Distinct slots spread over the cache (with `bad`, one invalid each way). */
    const int32_t slots[7] = {3, 17, 95, 40, bad ? -1 : 0, 64, bad ? (int32_t)n_slots : 80};
    for (uint32_t t = 0; t < T; t++)
        meta[t] = slots[t];
    size_t n = (size_t)T * Hkv * Dh;
    float *k = malloc(4 * n), *v = malloc(4 * n);
    hx_case_random(k, n, seed);
    hx_case_random(v, n, seed);
    hx_op_kv_store a = {kv, Hkv, Dh, kv_type, kv_type, 0, 0, 0};
    hx_ref_kv_store(&a, k, v, kref, vref, meta, n_slots, NULL);
    hx_buffer *b[5] = {hx_case_buffer(u->rt, k, 4 * n), hx_case_buffer(u->rt, v, 4 * n),
                       hx_case_buffer(u->rt, kc, cache), hx_case_buffer(u->rt, vc, cache),
                       hx_case_buffer(u->rt, meta, 4ull * hx_meta_ints(&kv))};
    hx_status st = run(u, "kv_store", &a, sizeof a, 5, b, (hx_access[]){HX_R, HX_R, HX_RW, HX_RW, HX_R});
    if (bad) {
        ck_assert_int_eq(st, HX_ERR_RANGE);
        ck_assert_msg(strstr(hx_last_error(), "kv_store"), "%s: %s", u->tg->name, hx_last_error());
    } else {
        HX_ASSERT_OK(st);
    }
    hx_case_read(b[2], kc, cache);
    hx_case_read(b[3], vc, cache);
    /* Rows not written are untouched, byte for byte. */
    for (uint64_t slot = 0; slot < n_slots && (!bad || u->unified); slot++) {
        int written = -1;
        for (uint32_t t = 0; t < T; t++)
            if (slots[t] >= 0 && (uint64_t)slots[t] == slot)
                written = (int)t;
        for (uint32_t h = 0; h < Hkv; h++)
            for (int which = 0; which < 2; which++) {
                const uint8_t *mine = (which ? vc : kc) + (slot * Hkv + h) * row;
                const uint8_t *ref = (which ? vref : kref) + (slot * Hkv + h) * row;
                if (written < 0)
                    ck_assert_msg(!memcmp(mine, ref, row), "%s: slot %llu head %u was overwritten", u->tg->name,
                                  (unsigned long long)slot, h);
                else
                    check_written_row(u, kv_type, Dh, mine, ref, (which ? v : k) + ((size_t)written * Hkv + h) * Dh,
                                      (unsigned long long)slot);
            }
    }
    hx_case_destroy(b, 5);
    free(kc);
    free(vc);
    free(kref);
    free(vref);
    free(meta);
    free(k);
    free(v);
}

START_TEST(kv_store_matches_reference)
{
    under_test u;
    if (!begin(_i, "kv_store", &u))
        return;
    unsigned seed = 5;
    for (int bad = 0; bad < 2; bad++) {
        check_kv_store(&u, HX_REF_F32, 2, 24, bad, &seed);
        check_kv_store(&u, HX_REF_F16, 1, 64, bad, &seed);
        check_kv_store(&u, HX_REF_F16, 4, 40, bad, &seed);
        check_kv_store(&u, HX_REF_Q8_0, 2, 64, bad, &seed);
        check_kv_store(&u, HX_REF_Q8_0, 3, 128, bad, &seed);
    }
    end(&u);
}
END_TEST

/* ---- attention ----------------------------------------------------------- */

/* What the last attention_run's task said: reading its output back
 * succeeds, and a success empties hx_last_error(). */
static char run_error[1024];

static float *attention_run(under_test *u, hx_att_setup *o, hx_status expect)
{
    hx_buffer *b[5];
    hx_att_buffers(u->rt, o, b);
    hx_status st = run(u, "attention", &o->a, sizeof o->a, 5, b, (hx_access[]){HX_R, HX_R, HX_R, HX_R, HX_W});
    ck_assert_msg(st == expect, "%s: attention: %s, expected %s: %s", u->tg->name, hx_status_str(st),
                  hx_status_str(expect), hx_last_error());
    snprintf(run_error, sizeof run_error, "%s", hx_last_error());
    float *out = malloc(4 * o->q_floats);
    hx_case_read(b[4], out, 4 * o->q_floats);
    hx_case_destroy(b, 5);
    return out;
}

static void check_attention(under_test *u, const hx_att_case *c, unsigned *seed, const char *what)
{
    hx_att_setup o;
    hx_att_setup_make(c, &o, seed);
    double *ref = malloc(sizeof(double) * o.q_floats);
    hx_ref_attention(&o.a, o.q, o.kc, o.vc, o.meta, ref);
    float *out = attention_run(u, &o, HX_OK);
    double e = hx_ref_nmse(out, ref, o.q_floats);
    ck_assert_msg(e <= attention_bound(u, c->kv_type), "%s: %s: type %u Hq %u Hkv %u Dh %u bs %u S %u T %u: nmse %g",
                  u->tg->name, what, c->kv_type, c->Hq, c->Hkv, c->Dh, c->block_size, c->S, o.a.kv.T, e);
    free(ref);
    free(out);
    hx_att_setup_free(&o);
}

START_TEST(attention_prefill_matches_reference)
{
    under_test u;
    if (!begin(_i, "attention", &u))
        return;
    unsigned seed = 6;
    const uint32_t types[] = {HX_REF_F32, HX_REF_F16, HX_REF_Q8_0};
    const uint32_t gqa[][2] = {{4, 4}, {4, 2}, {8, 2}, {8, 1}};
    for (int ti = 0; ti < 3; ti++)
        for (int g = 0; g < 4; g++) {
            /* One sequence from scratch, crossing several blocks. */
            hx_att_case one = {types[ti], gqa[g][0], gqa[g][1], 64, 16, 1, {37}, {37}, 0};
            check_attention(&u, &one, &seed, "one sequence");
            /* Three sequences, each a chunk after cached context. */
            hx_att_case three = {types[ti], gqa[g][0], gqa[g][1], 32, 16, 3, {50, 17, 90}, {9, 17, 5}, g % 2};
            check_attention(&u, &three, &seed, "three sequences");
        }
    /* Head sizes at the edges, odd block sizes. */
    hx_att_case wide = {HX_REF_F16, 4, 2, 128, 5, 2, {23, 11}, {8, 11}, 1};
    check_attention(&u, &wide, &seed, "Dh 128, block 5");
    hx_att_case narrow = {HX_REF_F16, 6, 3, 40, 7, 2, {30, 3}, {30, 2}, 0};
    check_attention(&u, &narrow, &seed, "Dh 40, block 7");
    hx_att_case q8wide = {HX_REF_Q8_0, 8, 8, 128, 16, 1, {70}, {20}, 0};
    check_attention(&u, &q8wide, &seed, "q8_0 Dh 128");
    /* Head sizes off the kernels' 8-wide vectors. */
    hx_att_case tail = {HX_REF_F16, 4, 2, 20, 16, 2, {40, 19}, {33, 19}, 1};
    check_attention(&u, &tail, &seed, "Dh 20");
    hx_att_case tail32 = {HX_REF_F32, 3, 1, 36, 8, 1, {25}, {25}, 0};
    check_attention(&u, &tail32, &seed, "f32 Dh 36");
    /* Gemma 3's 256-wide heads (OpenCL's _dh256 kernels), every type. */
    for (int ti = 0; ti < 3; ti++) {
        hx_att_case gemma = {types[ti], 4, 1, 256, 16, 2, {41, 19}, {21, 19}, 1};
        check_attention(&u, &gemma, &seed, "Dh 256");
    }
    hx_att_case wider = {HX_REF_F16, 2, 2, 200, 16, 1, {30}, {30}, 0};
    check_attention(&u, &wider, &seed, "Dh 200 (between the kernel sets)");
    end(&u);
}
END_TEST

START_TEST(attention_decode_matches_reference)
{
    under_test u;
    if (!begin(_i, "attention", &u))
        return;
    unsigned seed = 7;
    const uint32_t types[] = {HX_REF_F32, HX_REF_F16, HX_REF_Q8_0};
    const uint32_t gqa[][2] = {{4, 4}, {4, 2}, {8, 2}, {8, 1}, {16, 2}};
    for (int ti = 0; ti < 3; ti++)
        for (int g = 0; g < 5; g++) {
            hx_att_case one = {types[ti], gqa[g][0], gqa[g][1], 64, 16, 1, {1}, {1}, 0};
            check_attention(&u, &one, &seed, "first token");
            hx_att_case batch = {types[ti], gqa[g][0], gqa[g][1], 64, 16, 4, {33, 200, 16, 17}, {1, 1, 1, 1}, 0};
            check_attention(&u, &batch, &seed, "decode batch");
        }
    hx_att_case odd = {HX_REF_F16, 6, 2, 40, 3, 3, {10, 1, 52}, {1, 1, 1}, 0};
    check_attention(&u, &odd, &seed, "Dh 40, block 3");
    hx_att_case tail = {HX_REF_F16, 4, 4, 20, 16, 2, {33, 70}, {1, 1}, 0};
    check_attention(&u, &tail, &seed, "Dh 20");
    hx_att_case wide = {HX_REF_Q8_0, 32, 4, 128, 16, 2, {129, 64}, {1, 1}, 0};
    check_attention(&u, &wide, &seed, "Dh 128, 8 heads per KV head");
    for (int ti = 0; ti < 3; ti++) {
        hx_att_case gemma = {types[ti], 8, 2, 256, 16, 3, {70, 1, 33}, {1, 1, 1}, 0};
        check_attention(&u, &gemma, &seed, "Dh 256");
    }
    /* At depth, where OpenCL cuts each token's keys into shares and merges
     * them: a token as deep as the longest, one part way, one with fewer
     * keys than there are shares; head sizes of both kernel sets, a tail. */
    for (int ti = 0; ti < 3; ti++) {
        hx_att_case deep = {types[ti], 9, 3, 64, 16, 3, {1500, 700, 5}, {1, 1, 1}, 0};
        check_attention(&u, &deep, &seed, "at depth");
        hx_att_case deep256 = {types[ti], 8, 2, 256, 16, 1, {900}, {1}, 0};
        check_attention(&u, &deep256, &seed, "Dh 256 at depth");
    }
    hx_att_case deep_tail = {HX_REF_F16, 16, 1, 20, 5, 2, {1100, 301}, {1, 1}, 0};
    check_attention(&u, &deep_tail, &seed, "Dh 20 at depth");
    end(&u);
}
END_TEST

/* The CPU's attention cuts a small batch by chunks of the context over
 * its team ("split mode"), keeping a partial per token, head and chunk.
 * That scratch must not grow with the team: a batch of more than a tile
 * of tokens (here 64 tokens, one KV head, 32k positions, which a team of
 * 512 would otherwise have split) asks each thread for what it asks at 8
 * threads, and a decode step's partials at 512 threads are what they are
 * at 2. */
START_TEST(attention_scratch_does_not_grow_with_the_team)
{
    hx_op_attention a = {.kv = {.T = 64, .S = 64, .max_blocks = 2048, .block_size = 16},
                         .Hq = 8, .Hkv = 1, .Dh = 64, .kv_type = HX_REF_F16, .scale = 0.125f, .v_type = HX_REF_F16};
    const size_t at8 = hx_cpu_attention_scratch(&a, NULL, 8), at512 = hx_cpu_attention_scratch(&a, NULL, 512);
    ck_assert_msg(at512 / 512 == at8 / 8 && at512 % 512 == 0 && at8 % 8 == 0,
                  "64 tokens: %zu bytes at 8 threads, %zu at 512", at8, at512);
    a.kv.T = a.kv.S = 1;
    const size_t one2 = hx_cpu_attention_scratch(&a, NULL, 2), one512 = hx_cpu_attention_scratch(&a, NULL, 512);
    const size_t one8 = hx_cpu_attention_scratch(&a, NULL, 8);
    /* scratch(n) = n * per-thread + partials: the partials are the same
     * at 2, 8 and 512 threads where per-thread is */
    ck_assert_msg((one512 - one8) % (512 - 8) == 0 && (one8 - one2) % 6 == 0 &&
                      (one512 - one8) / (512 - 8) == (one8 - one2) / 6,
                  "one token: %zu, %zu, %zu bytes at 2, 8, 512 threads", one2, one8, one512);
}
END_TEST

/* ---- attention split in two parts, and their merge ---------------------- */

/* How far a part's maximum and sum may be from the float64 ones. */
static double stats_bound(const under_test *u, uint32_t kv_type)
{
    return attention_bound(u, kv_type) > NMSE_ACCUM ? 3e-2 : 1e-4;
}

static void check_stats(const under_test *u, const hx_att_case *c, const float *got, const double *ref, size_t rows,
                        const char *what)
{
    const double tol = stats_bound(u, c->kv_type);
    for (size_t r = 0; r < rows; r++) {
        if (ref[2 * r + 1] == 0) { /* an empty part */
            ck_assert_msg(isinf(got[2 * r]) && got[2 * r] < 0 && got[2 * r + 1] == 0, "%s: %s: row %zu: %g %g",
                          u->tg->name, what, r, got[2 * r], got[2 * r + 1]);
            continue;
        }
        ck_assert_msg(fabs(got[2 * r] - ref[2 * r]) <= tol * (1 + fabs(ref[2 * r])) &&
                          fabs(got[2 * r + 1] - ref[2 * r + 1]) <= tol * ref[2 * r + 1],
                      "%s: %s: row %zu: max %g sum %g, expected %g %g", u->tg->name, what, r, got[2 * r],
                      got[2 * r + 1], ref[2 * r], ref[2 * r + 1]);
    }
}

/* With a sliding window: sets to -1 (returned to the pool, as a session
 * does) the block-table entries of the blocks wholly before every window
 * of the batch's tokens of their sequence, and makes their slots garbage
 * nobody may read; how many were returned. */
static uint32_t return_blocks_before_windows(hx_att_setup *o)
{
    const hx_kv_layout *l = &o->a.kv;
    uint32_t n = 0;
    for (uint32_t s = 0; s < l->S; s++) {
        int32_t first = INT32_MAX;
        for (uint32_t t = 0; t < l->T; t++) {
            const int32_t pos = o->meta[l->T + t];
            if (o->meta[2 * l->T + t] == (int32_t)s && pos >= 0) {
                const int32_t f = pos >= (int32_t)o->a.window ? pos - (int32_t)o->a.window + 1 : 0;
                first = f < first ? f : first;
            }
        }
        int32_t *table = o->meta + 3 * l->T + (size_t)s * l->max_blocks;
        for (uint32_t b = 0; first != INT32_MAX && (b + 1) * l->block_size <= (uint32_t)first; b++)
            if (table[b] >= 0) {
                table[b] = -1;
                n++;
            }
    }
    return n;
}

/* A decode at depth with a sliding window, the blocks before the windows
 * returned to the pool: every device's kernel against the reference. */
START_TEST(attention_decode_window_at_depth)
{
    under_test u;
    if (!begin(_i, "attention", &u))
        return;
    unsigned seed = 31;
    const hx_att_case c = {HX_REF_F16, 8, 2, 64, 16, 3, {1200, 300, 90}, {1, 1, 1}, 0};
    const uint32_t windows[] = {100, 512};
    for (int w = 0; w < 2; w++) {
        hx_att_setup o;
        hx_att_setup_make(&c, &o, &seed);
        o.a.window = windows[w];
        ck_assert_uint_gt(return_blocks_before_windows(&o), 0);
        double *ref = malloc(sizeof(double) * o.q_floats);
        hx_ref_attention(&o.a, o.q, o.kc, o.vc, o.meta, ref);
        float *out = attention_run(&u, &o, HX_OK);
        double e = hx_ref_nmse(out, ref, o.q_floats);
        ck_assert_msg(e <= attention_bound(&u, c.kv_type), "%s: window %u: nmse %g", u.tg->name, windows[w], e);
        free(out);
        free(ref);
        hx_att_setup_free(&o);
    }
    end(&u);
}
END_TEST

/* Each part of the case against the float64 reference (outputs and
 * stats), then the two merged on the same device against the whole
 * attention: split at `recent`, the result must not change.  With a
 * sliding window of `window` positions (0: none), the blocks before the
 * windows returned to the pool. */
static void check_attention_part_window(under_test *u, const hx_att_case *c, const hx_att_kv *kv, uint32_t window,
                                        uint32_t recent, unsigned *seed, const char *what)
{
    hx_att_setup o;
    hx_att_setup_make_kv(c, kv, &o, seed);
    o.a.window = window;
    if (window)
        return_blocks_before_windows(&o);
    const size_t rows = o.q_floats / c->Dh;
    double *ref = malloc(sizeof(double) * o.q_floats), *ref_stats = malloc(sizeof(double) * 2 * rows);
    float *stats = malloc(sizeof(float) * 2 * rows), *out = malloc(4 * o.q_floats);
    hx_buffer *b[6], *parts[2][2];
    hx_att_buffers(u->rt, &o, b);
    hx_buffer_destroy(b[4]); /* each part has its own output */
    for (uint32_t part = 0; part < 2; part++) {
        hx_op_attention_part a = {o.a, recent, part};
        b[4] = parts[part][0] = hx_case_empty(u->rt, 4 * o.q_floats);
        b[5] = parts[part][1] = hx_case_empty(u->rt, sizeof(float) * 2 * rows);
        HX_ASSERT_OK(run(u, "attention_part", &a, sizeof a, 6, b,
                         (hx_access[]){HX_R, HX_R, HX_R, HX_R, HX_W, HX_W}));
        hx_ref_attention_part(&a, o.q, o.kc, o.vc, o.meta, ref, ref_stats);
        hx_case_read(b[4], out, 4 * o.q_floats);
        hx_case_read(b[5], stats, sizeof(float) * 2 * rows);
        double e = hx_ref_nmse(out, ref, o.q_floats);
        ck_assert_msg(e <= attention_bound(u, c->kv_type), "%s: %s, window %u, recent %u, part %u: nmse %g",
                      u->tg->name, what, window, recent, part, e);
        check_stats(u, c, stats, ref_stats, rows, what);
    }
    hx_op_attn_merge m = {rows, c->Dh};
    hx_buffer *mb[5] = {parts[0][0], parts[0][1], parts[1][0], parts[1][1], hx_case_empty(u->rt, 4 * o.q_floats)};
    HX_ASSERT_OK(run(u, "attn_merge", &m, sizeof m, 5, mb, (hx_access[]){HX_R, HX_R, HX_R, HX_R, HX_W}));
    hx_ref_attention(&o.a, o.q, o.kc, o.vc, o.meta, ref);
    hx_case_read(mb[4], out, 4 * o.q_floats);
    double e = hx_ref_nmse(out, ref, o.q_floats);
    ck_assert_msg(e <= attention_bound(u, c->kv_type), "%s: %s, window %u, recent %u, merged: nmse %g", u->tg->name,
                  what, window, recent, e);
    hx_case_destroy(b, 4);
    hx_case_destroy(mb, 5);
    free(ref);
    free(ref_stats);
    free(stats);
    free(out);
    hx_att_setup_free(&o);
}

static void check_attention_part_kv(under_test *u, const hx_att_case *c, const hx_att_kv *kv, uint32_t recent,
                                    unsigned *seed, const char *what)
{
    check_attention_part_window(u, c, kv, 0, recent, seed, what);
}

static void check_attention_part(under_test *u, const hx_att_case *c, uint32_t recent, unsigned *seed,
                                 const char *what)
{
    check_attention_part_kv(u, c, NULL, recent, seed, what);
}

START_TEST(attention_part_matches_reference)
{
    under_test u;
    if (!begin(_i, "attention_part", &u))
        return;
    unsigned seed = 23;
    const uint32_t types[] = {HX_REF_F32, HX_REF_F16, HX_REF_Q8_0};
    /* recent: all but the first block on the host, a cut inside the
     * context, everything on the device (part 0 empty). */
    const uint32_t recent[] = {1, 16, 40, 1000};
    for (int ti = 0; ti < 3; ti++)
        for (int r = 0; r < 4; r++) {
            hx_att_case decode = {types[ti], 8, 2, 64, 16, 3, {33, 200, 17}, {1, 1, 1}, 0};
            check_attention_part(&u, &decode, recent[r], &seed, "decode");
            hx_att_case prefill = {types[ti], 4, 4, 32, 16, 2, {50, 90}, {9, 30}, 1};
            check_attention_part(&u, &prefill, recent[r], &seed, "prefill");
        }
    hx_att_case odd = {HX_REF_F16, 6, 3, 40, 7, 2, {30, 3}, {30, 2}, 0};
    check_attention_part(&u, &odd, 9, &seed, "Dh 40, block 7");
    hx_att_case gemma = {HX_REF_Q8_0, 4, 1, 256, 16, 2, {60, 33}, {1, 1}, 0};
    check_attention_part(&u, &gemma, 16, &seed, "Dh 256");
    end(&u);
}
END_TEST

/* Two parts with random outputs and maxima far apart (a merge without
 * the rescale overflows or loses the smaller part), one empty part among
 * the rows, against the merge in float64. */
START_TEST(attn_merge_matches_reference)
{
    under_test u;
    if (!begin(_i, "attn_merge", &u))
        return;
    enum { ROWS = 37, DH = 72 };
    unsigned seed = 29;
    float o[2][ROWS * DH], st[2][ROWS * 2], got[ROWS * DH];
    double ref[ROWS * DH];
    hx_case_random(o[0], ROWS * DH, &seed);
    hx_case_random(o[1], ROWS * DH, &seed);
    hx_case_random(st[0], ROWS * 2, &seed);
    hx_case_random(st[1], ROWS * 2, &seed);
    for (int r = 0; r < ROWS; r++) {
        for (int p = 0; p < 2; p++) {
            st[p][2 * r] *= 150.0f;                       /* maxima in [-150, 150) */
            st[p][2 * r + 1] = 1.0f + 40.0f * fabsf(st[p][2 * r + 1]); /* sums >= 1 */
        }
        if (r % 9 == 4) { /* part r % 2 empty */
            st[r % 2][2 * r] = -INFINITY;
            st[r % 2][2 * r + 1] = 0;
        }
        double M = -INFINITY, w[2], total = 0;
        for (int p = 0; p < 2; p++)
            if (st[p][2 * r + 1] > 0)
                M = fmax(M, st[p][2 * r]);
        for (int p = 0; p < 2; p++)
            total += w[p] = st[p][2 * r + 1] > 0 ? exp(st[p][2 * r] - M) * st[p][2 * r + 1] : 0;
        for (int d = 0; d < DH; d++)
            ref[r * DH + d] = (w[0] * o[0][r * DH + d] + w[1] * o[1][r * DH + d]) / total;
    }
    hx_buffer *b[5] = {hx_case_buffer(u.rt, o[0], sizeof o[0]), hx_case_buffer(u.rt, st[0], sizeof st[0]),
                       hx_case_buffer(u.rt, o[1], sizeof o[1]), hx_case_buffer(u.rt, st[1], sizeof st[1]),
                       hx_case_empty(u.rt, sizeof got)};
    hx_op_attn_merge m = {ROWS, DH};
    HX_ASSERT_OK(run(&u, "attn_merge", &m, sizeof m, 5, b, (hx_access[]){HX_R, HX_R, HX_R, HX_R, HX_W}));
    hx_case_read(b[4], got, sizeof got);
    double e = hx_ref_nmse(got, ref, ROWS * DH);
    ck_assert_msg(e <= 1e-11, "%s: attn_merge: nmse %g", u.tg->name, e);
    /* Too small an output buffer is refused, not overrun. */
    hx_op_attn_merge big = {ROWS + 1, DH};
    ck_assert_int_ne(run(&u, "attn_merge", &big, sizeof big, 5, b, (hx_access[]){HX_R, HX_R, HX_R, HX_R, HX_W}),
                     HX_OK);
    hx_case_destroy(b, 5);
    end(&u);
}
END_TEST

/* K and V caches of different types, and rows stored Walsh-Hadamard
 * rotated (ops/ops.h): the CPU's kernels against the float64 reference
 * (which rotates by the matrix's definition), whole and split in two
 * parts, prefill and decode, with a window; other devices refuse them. */
START_TEST(attention_mixed_and_rotated_kv_match_reference)
{
    under_test u;
    if (!begin(_i, "attention", &u))
        return;
    unsigned seed = 29;
    const hx_att_case cases[] = {
        {HX_REF_Q4_0, 8, 2, 64, 16, 3, {50, 17, 90}, {9, 17, 5}, 1},          /* prefill */
        {HX_REF_Q8_0, 8, 4, 128, 16, 4, {33, 200, 16, 17}, {1, 1, 1, 1}, 0}, /* decode */
        {HX_REF_Q4_0, 4, 2, 64, 16, 1, {300}, {40}, 0},                      /* deeper */
        {HX_REF_F16, 4, 2, 64, 16, 3, {50, 17, 90}, {9, 17, 5}, 0},           /* with a window of 8 */
        {HX_REF_Q4_0, 4, 4, 128, 8, 2, {70, 9}, {1, 1}, 0},
        {HX_REF_Q4_0, 8, 2, 64, 16, 2, {40, 64}, {40, 1}, 0},
    };
    const hx_att_kv kv[] = {
        {HX_REF_F16, 64, 0}, {HX_REF_Q4_0, 128, 64}, {HX_REF_Q4_0, 64, 64}, {HX_REF_Q8_0, 0, 64}, {HX_REF_Q8_0, 128, 0},
        {HX_REF_F16, 0, 0},
    };
    const uint32_t window[] = {0, 0, 0, 8, 0, 0};
    for (int i = 0; i < 6; i++) {
        hx_att_setup o;
        hx_att_setup_make_kv(&cases[i], &kv[i], &o, &seed);
        o.a.window = window[i];
        if (u.tg->kind != ON_CPU) {
            free(attention_run(&u, &o, HX_ERR_NO_DEVICE));
            hx_att_setup_free(&o);
            continue;
        }
        double *ref = malloc(sizeof(double) * o.q_floats);
        hx_ref_attention(&o.a, o.q, o.kc, o.vc, o.meta, ref);
        float *out = attention_run(&u, &o, HX_OK);
        double e = hx_ref_nmse(out, ref, o.q_floats);
        ck_assert_msg(e <= attention_bound(&u, cases[i].kv_type), "%s: case %d (K %u, V %u, rot %u/%u): nmse %g",
                      u.tg->name, i, cases[i].kv_type, kv[i].v_type, kv[i].rot_k, kv[i].rot_v, e);
        free(out);
        free(ref);
        hx_att_setup_free(&o);
        if (!window[i])
            check_attention_part_kv(&u, &cases[i], &kv[i], 20, &seed, "mixed or rotated");
    }
    end(&u);
}
END_TEST

/* Keys and values with a shape of their own (`shape` alters the random
 * rows, [slot][head]), stored exactly (F32) and in `type` rotated in
 * groups of `rot` (and less `center`, [Hkv][Dh], when not NULL): how far
 * the CPU kernel's attention over the stored rows is from the exact
 * answer (normalized squared error). */
typedef void (*row_shape)(float *k, float *v, size_t rows, const hx_att_case *c);

static double stored_attention_nmse(under_test *u, const hx_att_case *c, uint32_t type, uint32_t rot,
                                    const float *center, row_shape shape, unsigned seed)
{
    unsigned s = seed;
    hx_att_setup exact, cached;
    hx_att_setup_make(c, &exact, &s);
    s = seed; /* the same queries and tables */
    const hx_att_kv kv = {type, rot, rot};
    hx_att_case cq = *c;
    cq.kv_type = type;
    hx_att_setup_make_kv(&cq, &kv, &cached, &s);
    const size_t n_rows = cached.cache_bytes / hx_ref_row_bytes(type, c->Dh);
    float *k = malloc(sizeof(float) * n_rows * c->Dh), *v = malloc(sizeof(float) * n_rows * c->Dh);
    hx_case_random(k, n_rows * c->Dh, &s);
    hx_case_random(v, n_rows * c->Dh, &s);
    shape(k, v, n_rows, c);
    hx_kv_layout all = {(uint32_t)(n_rows / c->Hkv), 1, 0, c->block_size};
    int32_t *ident = malloc(4 * hx_meta_ints(&all));
    for (uint32_t i = 0; i < all.T; i++)
        ident[i] = (int32_t)i;
    hx_op_kv_store st = {all, c->Hkv, c->Dh, HX_REF_F32, HX_REF_F32, 0, 0, 0};
    hx_ref_kv_store(&st, k, v, exact.kc, exact.vc, ident, all.T, NULL);
    st = (hx_op_kv_store){all, c->Hkv, c->Dh, type, type, rot, rot, center != NULL};
    hx_ref_kv_store(&st, k, v, cached.kc, cached.vc, ident, all.T, center);
    double *ref = malloc(sizeof(double) * exact.q_floats);
    hx_ref_attention(&exact.a, exact.q, exact.kc, exact.vc, exact.meta, ref);
    float *out = attention_run(u, &cached, HX_OK);
    const double e = hx_ref_nmse(out, ref, exact.q_floats);
    free(out);
    free(ref);
    free(ident);
    free(k);
    free(v);
    hx_att_setup_free(&exact);
    hx_att_setup_free(&cached);
    return e;
}

/* A few coordinates far larger than the rest, as real models' keys and
 * values have. */
static void outliers(float *k, float *v, size_t rows, const hx_att_case *c)
{
    for (size_t r = 0; r < rows; r++) {
        k[r * c->Dh + 5] *= 12.0f;
        k[r * c->Dh + 40] *= 9.0f;
        v[r * c->Dh + 17] *= 10.0f;
    }
}

/* Attention over keys with outlier coordinates: a Q4_0 cache stored
 * rotated comes nearer the exact answer than one stored as it is (the
 * reason for the rotation), both through the CPU kernel. */
START_TEST(rotated_q4_0_cache_loses_less)
{
    under_test u;
    if (!begin(_i, "attention", &u))
        return;
    if (u.tg->kind != ON_CPU) {
        end(&u);
        return;
    }
    const hx_att_case c = {HX_REF_F32, 4, 2, 64, 16, 1, {256}, {8}, 0};
    const double plain = stored_attention_nmse(&u, &c, HX_REF_Q4_0, 0, NULL, outliers, 31),
                 rotated = stored_attention_nmse(&u, &c, HX_REF_Q4_0, 64, NULL, outliers, 31);
    ck_assert_msg(rotated < 0.7 * plain, "%s: rotated q4_0 nmse %g, plain %g", u.tg->name, rotated, plain);
    end(&u);
}
END_TEST

/* Qwen2's keys: a large part the same in every key (its K bias), a few
 * coordinates of 80-140 where the rest vary by a few units. */
static float qwen_center[2 * 64];

static void biased_keys(float *k, float *v, size_t rows, const hx_att_case *c)
{
    (void)v;
    for (size_t r = 0; r < rows; r++) /* rows are [slot][head] */
        for (uint32_t d = 0; d < c->Dh; d++)
            k[r * c->Dh + d] += qwen_center[(r % c->Hkv) * c->Dh + d];
}

/* Keys that carry a large constant part: a rotated Q4_0 cache that stores
 * them less that part (center_k) comes far nearer the exact answer than
 * one that stores them as they are, and an F32 cache that stores them
 * less it gives the exact answer (the softmax cancels what the centre
 * took from every score), through the CPU kernel. */
START_TEST(centred_keys_lose_less)
{
    under_test u;
    if (!begin(_i, "attention", &u))
        return;
    if (u.tg->kind != ON_CPU) {
        end(&u);
        return;
    }
    const hx_att_case c = {HX_REF_F32, 4, 2, 64, 16, 1, {256}, {8}, 0};
    unsigned cs = 5;
    for (uint32_t d = 0; d < 2 * 64; d++)
        qwen_center[d] = d % 64 == 29 || d % 64 == 61 ? 80.0f + 60.0f * hx_ref_uniform(&cs)
                                                      : 3.0f * hx_ref_uniform(&cs);
    const double plain = stored_attention_nmse(&u, &c, HX_REF_Q4_0, 64, NULL, biased_keys, 43),
                 centred = stored_attention_nmse(&u, &c, HX_REF_Q4_0, 64, qwen_center, biased_keys, 43),
                 exact = stored_attention_nmse(&u, &c, HX_REF_F32, 0, qwen_center, biased_keys, 43);
    fprintf(stderr, "  %s: q4_0 keys as they are nmse %.3g, centred %.3g; f32 centred %.3g\n", u.tg->name, plain,
            centred, exact);
    ck_assert_msg(centred < 0.2 * plain, "%s: centred q4_0 nmse %g, as they are %g", u.tg->name, centred, plain);
    ck_assert_msg(exact <= 1e-9, "%s: centred f32 nmse %g", u.tg->name, exact);
    end(&u);
}
END_TEST

/* kv_store into K and V caches of different types, rows rotated or not,
 * keys centred or not: what the CPU kernel wrote decodes to the
 * reference's rows, and turned back, to the stored values (less the
 * centre) within the type's step. */
START_TEST(kv_store_mixed_and_rotated)
{
    under_test u;
    if (!begin(_i, "kv_store", &u))
        return;
    if (u.tg->kind != ON_CPU) {
        end(&u);
        return;
    }
    unsigned seed = 37;
    const uint32_t T = 5, Hkv = 2, Dh = 128, n_slots = 16;
    /* K type, V type, their rotations, keys centred */
    const uint32_t kinds[][5] = {{HX_REF_Q4_0, HX_REF_F16, 128, 0, 0}, {HX_REF_Q8_0, HX_REF_Q4_0, 64, 64, 0},
                                 {HX_REF_F16, HX_REF_Q8_0, 0, 64, 0},   {HX_REF_Q4_0, HX_REF_Q4_0, 0, 0, 0},
                                 {HX_REF_Q4_0, HX_REF_F16, 128, 0, 1},  {HX_REF_Q8_0, HX_REF_Q8_0, 0, 0, 1}};
    /* A centre as Qwen2's keys have one: a few coordinates far larger than
     * the rest, which the keys carry and are stored less. */
    float center[2 * 128];
    for (uint32_t d = 0; d < Hkv * Dh; d++)
        center[d] = d % 37 == 5 ? 60.0f + 40.0f * hx_ref_uniform(&seed) : 0.5f * hx_ref_uniform(&seed);
    for (int i = 0; i < 6; i++) {
        const uint32_t types[2] = {kinds[i][0], kinds[i][1]}, rots[2] = {kinds[i][2], kinds[i][3]};
        const int centred = (int)kinds[i][4];
        size_t rows[2], caches[2];
        uint8_t *mine[2], *ref[2];
        for (int w = 0; w < 2; w++) {
            rows[w] = hx_ref_row_bytes(types[w], Dh);
            caches[w] = (size_t)n_slots * Hkv * rows[w];
            mine[w] = calloc(1, caches[w]);
            ref[w] = calloc(1, caches[w]);
        }
        const size_t n = (size_t)T * Hkv * Dh;
        float *x[2] = {malloc(4 * n), malloc(4 * n)};
        hx_case_random(x[0], n, &seed);
        hx_case_random(x[1], n, &seed);
        for (size_t j = 0; centred && j < n; j++)
            x[0][j] += center[j % (Hkv * Dh)];
        hx_kv_layout kv = {T, 1, 1, 16};
        int32_t *meta = calloc(hx_meta_ints(&kv), 4);
        for (uint32_t t = 0; t < T; t++)
            meta[t] = (int32_t)(3 * t + 1);
        hx_op_kv_store a = {kv, Hkv, Dh, types[0], types[1], rots[0], rots[1], (uint32_t)centred};
        hx_ref_kv_store(&a, x[0], x[1], ref[0], ref[1], meta, n_slots, center);
        hx_buffer *b[6] = {hx_case_buffer(u.rt, x[0], 4 * n),
                           hx_case_buffer(u.rt, x[1], 4 * n),
                           hx_case_buffer(u.rt, mine[0], caches[0]),
                           hx_case_buffer(u.rt, mine[1], caches[1]),
                           hx_case_buffer(u.rt, meta, 4ull * hx_meta_ints(&kv)),
                           hx_case_buffer(u.rt, center, sizeof center)};
        HX_ASSERT_OK(run(&u, "kv_store", &a, sizeof a, 5 + centred, b,
                         (hx_access[]){HX_R, HX_R, HX_RW, HX_RW, HX_R, HX_R}));
        hx_case_read(b[2], mine[0], caches[0]);
        hx_case_read(b[3], mine[1], caches[1]);
        double *got = malloc(sizeof(double) * Dh), *want = malloc(sizeof(double) * Dh);
        float *gotf = malloc(4 * Dh);
        for (int w = 0; w < 2; w++)
            for (uint32_t t = 0; t < T; t++)
                for (uint32_t h = 0; h < Hkv; h++) {
                    const size_t at = ((size_t)meta[t] * Hkv + h) * rows[w];
                    hx_ref_dequantize(types[w], mine[w] + at, got, Dh);
                    hx_ref_dequantize(types[w], ref[w] + at, want, Dh);
                    for (uint32_t d = 0; d < Dh; d++)
                        gotf[d] = (float)got[d];
                    /* Rotating in float may round a value across a Q4_0
                     * step where the double reference did not, or tip a
                     * block's scale fit to the next rounding (a step of
                     * the scale for the whole block).  Rows stored as
                     * they are must be the reference's (Q4_0's keys and
                     * values are fitted with different weights). */
                    double e = hx_ref_nmse(gotf, want, Dh);
                    ck_assert_msg(e <= (rots[w] ? 5e-3 : types[w] == HX_REF_Q8_0 ? 1e-6 : NMSE_EXACT), "%s: %s of case %d: nmse %g from the reference", u.tg->name,
                                  w ? "V" : "K", i, e);
                    hx_ref_hadamard(got, Dh, rots[w]);
                    for (uint32_t d = 0; d < Dh; d++) { /* a centred key: the stored values less the centre */
                        gotf[d] = (float)got[d];
                        want[d] = x[w][((size_t)t * Hkv + h) * Dh + d] - (centred && !w ? center[h * Dh + d] : 0);
                    }
                    e = hx_ref_nmse(gotf, want, Dh);
                    ck_assert_msg(e <= (types[w] == HX_REF_Q4_0 ? 2e-2 : 1e-4),
                                  "%s: %s of case %d: %g from the stored values", u.tg->name, w ? "V" : "K", i, e);
                }
        free(got);
        free(want);
        free(gotf);
        hx_case_destroy(b, 6);
        for (int w = 0; w < 2; w++) {
            free(mine[w]);
            free(ref[w]);
            free(x[w]);
        }
        free(meta);
    }
    end(&u);
}
END_TEST

/* A Q4_0 cache: the CPU's kernels take it; the OpenCL and CUDA kernels
 * refuse it (HX_ERR_NO_DEVICE when pinned there), which leaves such
 * attention to the CPU.  Both are checked. */
START_TEST(attention_q4_0_matches_reference)
{
    under_test u;
    if (!begin(_i, "attention", &u))
        return;
    unsigned seed = 17;
    const hx_att_case cases[] = {
        {HX_REF_Q4_0, 8, 2, 64, 16, 3, {50, 17, 90}, {9, 17, 5}, 1}, /* prefill */
        {HX_REF_Q4_0, 8, 4, 128, 16, 4, {33, 200, 16, 17}, {1, 1, 1, 1}, 0},
    };
    for (int i = 0; i < 2; i++) {
        hx_att_setup o;
        hx_att_setup_make(&cases[i], &o, &seed);
        if (u.tg->kind != ON_CPU) {
            free(attention_run(&u, &o, HX_ERR_NO_DEVICE));
            printf("ops: %s refuses attention over a q4_0 cache (it runs on the CPU)\n", u.tg->name);
            hx_att_setup_free(&o);
            continue;
        }
        double *ref = malloc(sizeof(double) * o.q_floats);
        hx_ref_attention(&o.a, o.q, o.kc, o.vc, o.meta, ref);
        float *out = attention_run(&u, &o, HX_OK);
        double e = hx_ref_nmse(out, ref, o.q_floats);
        ck_assert_msg(e <= attention_bound(&u, cases[i].kv_type), "%s: q4_0 case %d: nmse %g", u.tg->name, i, e);
        free(out);
        free(ref);
        hx_att_setup_free(&o);
    }
    end(&u);
}
END_TEST

/* The NMSE of two float64 results. */
static double nmse_of_doubles(const double *x, const double *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += (x[i] - ref[i]) * (x[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

/* A sliding window (ops/ops.h), on every device: prompts whose tokens'
 * windows start in different key tiles, sequences interleaved, decode
 * steps split over many or few key ranges, odd head and block sizes, each
 * with the blocks before the windows returned to the pool (-1 in the
 * table, their slots garbage: a read of one fails the task), against the
 * float64 reference; the same split in two parts and merged.  The window
 * must change the answer (else the check has no power), and a block
 * inside a window that was returned fails the task. */
START_TEST(attention_window_matches_reference)
{
    under_test u;
    if (!begin(_i, "attention", &u))
        return;
    unsigned seed = 19;
    const hx_att_case cases[] = {
        {HX_REF_F16, 4, 2, 64, 16, 1, {70}, {70}, 0},                    /* a prompt of several tiles */
        {HX_REF_F32, 8, 2, 32, 16, 3, {50, 17, 90}, {9, 17, 5}, 1},      /* interleaved, after context */
        {HX_REF_Q8_0, 8, 4, 128, 16, 4, {33, 200, 16, 17}, {1, 1, 1, 1}, 0}, /* decode */
        {HX_REF_F16, 6, 3, 40, 7, 2, {30, 3}, {30, 2}, 0},               /* Dh 40, block 7 */
        {HX_REF_F16, 16, 2, 64, 16, 2, {129, 64}, {1, 1}, 0},            /* decode, 8 heads per KV head */
        {HX_REF_F32, 4, 4, 64, 16, 1, {100}, {1}, 0},                    /* decode, fewer keys than ranges */
        {HX_REF_F16, 4, 2, 64, 16, 1, {200}, {40}, 0},                   /* a chunk after a long context */
    };
    const uint32_t window[] = {24, 8, 40, 5, 16, 3, 33};
    uint32_t returned = 0;
    double worst = 0, least_change = INFINITY;
    for (int i = 0; i < 7; i++) {
        hx_att_setup o;
        hx_att_setup_make(&cases[i], &o, &seed);
        double *full = malloc(sizeof(double) * o.q_floats), *ref = malloc(sizeof(double) * o.q_floats);
        hx_ref_attention(&o.a, o.q, o.kc, o.vc, o.meta, full);
        o.a.window = window[i];
        returned += return_blocks_before_windows(&o);
        hx_ref_attention(&o.a, o.q, o.kc, o.vc, o.meta, ref);
        const double change = nmse_of_doubles(ref, full, o.q_floats);
        ck_assert_msg(change > 1e-4, "case %d: window %u changes nothing", i, window[i]);
        least_change = change < least_change ? change : least_change;
        float *out = attention_run(&u, &o, HX_OK);
        double e = hx_ref_nmse(out, ref, o.q_floats);
        ck_assert_msg(e <= attention_bound(&u, cases[i].kv_type), "%s: case %d window %u: nmse %g", u.tg->name, i,
                      window[i], e);
        worst = e > worst ? e : worst;
        free(out);
        free(full);
        free(ref);
        hx_att_setup_free(&o);
        check_attention_part_window(&u, &cases[i], NULL, window[i], 20, &seed, "window");
        check_attention_part_window(&u, &cases[i], NULL, window[i], 1, &seed, "window");
    }
    ck_assert_uint_gt(returned, 4); /* the cases return blocks: reads of them would fail */
    printf("ops: %s: attention with a window, 7 cases over %u returned blocks: nmse %.3g at most against the "
           "reference (the window moves the reference by %.3g at least)\n",
           u.tg->name, returned, worst, least_change);
    /* A block the window needs, returned: the task fails. */
    for (int decode = 0; decode < 2; decode++) {
        hx_att_case c = {HX_REF_F16, 4, 2, 32, 16, 1, {60}, {decode ? 1 : 20}, 0};
        hx_att_setup o;
        hx_att_setup_make(&c, &o, &seed);
        o.a.window = 30; /* block 1 (positions 16..31) is inside every token's window */
        o.meta[3 * o.a.kv.T + 1] = -1;
        free(attention_run(&u, &o, HX_ERR_RANGE));
        ck_assert_msg(strstr(run_error, "attention"), "%s", run_error);
        hx_att_setup_free(&o);
    }
    end(&u);
}
END_TEST

/* Contexts of many 64-position chunks (the CPU kernel's unit of the online
 * softmax), on the CPU: prompts of several tiles, prompts after cached
 * context, decode steps (spread over the team by chunks), windows that
 * start inside a chunk, F16, Q8_0 and Q4_0 caches (rotated and not), and
 * the split in two parts and its merge. */
START_TEST(attention_long_context_matches_reference)
{
    under_test u;
    if (!begin(_i, "attention", &u))
        return;
    if (u.tg->kind != ON_CPU) { /* the long cases are the CPU kernel's; others run the short ones */
        end(&u);
        return;
    }
    unsigned seed = 35;
    const hx_att_case cases[] = {
        {HX_REF_F16, 4, 2, 64, 16, 1, {300}, {300}, 0},                   /* a prompt of 19 tiles */
        {HX_REF_Q8_0, 6, 2, 64, 16, 1, {900}, {40}, 0},                   /* a prompt after context */
        {HX_REF_F16, 9, 3, 64, 16, 1, {1000}, {1}, 0},                    /* decode */
        {HX_REF_Q4_0, 8, 2, 64, 16, 2, {700, 333}, {1, 1}, 0},            /* two decode steps */
        {HX_REF_Q8_0, 4, 4, 128, 5, 3, {260, 129, 64}, {2, 30, 1}, 1},    /* mixed, block 5 */
        {HX_REF_F16, 4, 2, 64, 16, 1, {200}, {200}, 0},                   /* window 100 */
        {HX_REF_Q4_0, 9, 3, 64, 16, 1, {900}, {1}, 0},                    /* window 130 */
        {HX_REF_Q4_0, 8, 2, 64, 16, 1, {517}, {517}, 0},                  /* rotated */
    };
    const uint32_t window[] = {0, 0, 0, 0, 0, 100, 130, 0};
    const hx_att_kv kv[] = {{HX_REF_F16, 0, 0}, {HX_REF_Q8_0, 0, 0}, {HX_REF_F16, 0, 0}, {HX_REF_Q4_0, 0, 0},
                            {HX_REF_Q8_0, 0, 0}, {HX_REF_F16, 0, 0}, {HX_REF_Q4_0, 64, 64}, {HX_REF_Q8_0, 64, 64}};
    for (int i = 0; i < 8; i++) {
        hx_att_setup o;
        hx_att_setup_make_kv(&cases[i], &kv[i], &o, &seed);
        o.a.window = window[i];
        double *ref = malloc(sizeof(double) * o.q_floats);
        hx_ref_attention(&o.a, o.q, o.kc, o.vc, o.meta, ref);
        float *out = attention_run(&u, &o, HX_OK);
        double e = hx_ref_nmse(out, ref, o.q_floats);
        ck_assert_msg(e <= attention_bound(&u, cases[i].kv_type), "%s: long case %d (T %u, window %u): nmse %g",
                      u.tg->name, i, o.a.kv.T, window[i], e);
        free(out);
        free(ref);
        hx_att_setup_free(&o);
        if (!window[i])
            check_attention_part_kv(&u, &cases[i], &kv[i], 150, &seed, "long context");
    }
    end(&u);
}
END_TEST

/* One token of a setup alone in a batch of its own: the same query, slot,
 * position and block table. */
static void single_token(const hx_att_setup *o, uint32_t t, hx_att_setup *one)
{
    const hx_kv_layout *l = &o->a.kv;
    *one = *o;
    one->a.kv.T = 1;
    one->meta_ints = hx_meta_ints(&one->a.kv);
    one->meta = malloc(4 * one->meta_ints);
    one->meta[0] = o->meta[t];
    one->meta[1] = o->meta[l->T + t];
    one->meta[2] = 0;
    const int32_t seq = o->meta[2 * l->T + t];
    memcpy(one->meta + 3, o->meta + 3 * l->T + (size_t)seq * l->max_blocks, 4 * l->max_blocks);
    one->q_floats = (size_t)o->a.Hq * o->a.Dh;
    one->q = o->q + (size_t)t * one->q_floats;
}

/* A token's attention keeps its bits whether it is one of a prompt's
 * tiles, one of a decode step's sequences, or alone in a decode step
 * whose chunks the team shares: the prefix cache and the serving engine
 * rely on it.  The CPU's levels, with
 * and without a window, K and V of each type, 3 query heads per KV head
 * (V rows read in place) and 7 (V rows dequantized first). */
/* A case, its cache and window, and the seed its setup draws from. */
typedef struct {
    hx_att_case c;
    hx_att_kv kv;
    uint32_t window;
    unsigned *seed;
} bits_case;

/* Each of the batch's tokens `tokens` (NULL: every one) run alone gives
 * the bits it gets in the batch. */
static void check_tokens_alone(under_test *u, const bits_case *x, const uint32_t *tokens, uint32_t n,
                               const char *batch)
{
    hx_att_setup o;
    hx_att_setup_make_kv(&x->c, &x->kv, &o, x->seed);
    o.a.window = x->window;
    float *all = attention_run(u, &o, HX_OK);
    for (uint32_t k = 0; k < n; k++) {
        const uint32_t t = tokens ? tokens[k] : k;
        hx_att_setup one;
        single_token(&o, t, &one);
        float *alone = attention_run(u, &one, HX_OK);
        ck_assert_msg(!memcmp(alone, all + (size_t)t * one.q_floats, 4 * one.q_floats),
                      "%s: type %u, %u heads, window %u: token %u alone differs from the %s's", u->tg->name,
                      x->c.kv_type, x->c.Hq, x->window, t, batch);
        free(alone);
        free(one.meta);
    }
    free(all);
    hx_att_setup_free(&o);
}

START_TEST(attention_token_bits_alone_as_in_a_prompt)
{
    under_test u;
    if (!begin(_i, "attention", &u))
        return;
    if (u.tg->kind != ON_CPU) {
        end(&u);
        return;
    }
    unsigned seed = 36;
    const uint32_t types[] = {HX_REF_F16, HX_REF_Q8_0, HX_REF_Q4_0};
    const uint32_t tokens[] = {0, 15, 63, 64, 65, 200, 333, 399};
    for (int ti = 0; ti < 6; ti++)
        for (uint32_t window = 0; window <= 90; window += 90) {
            const uint32_t type = types[ti % 3], Hq = ti < 3 ? 6 : 14, rot = type == HX_REF_Q4_0 ? 64 : 0;
            const bits_case prompt = {{type, Hq, 2, 64, 16, 1, {400}, {400}, 0}, {type, rot, rot}, window, &seed};
            check_tokens_alone(&u, &prompt, tokens, sizeof tokens / sizeof tokens[0], "prompt");
            /* A decode step of eight sequences (each token's heads together). */
            const bits_case step = {
                {type, Hq, 2, 64, 16, 8, {400, 130, 65, 257, 1, 64, 300, 17}, {1, 1, 1, 1, 1, 1, 1, 1}, 0},
                {type, rot, rot}, window, &seed};
            check_tokens_alone(&u, &step, NULL, 8, "decode step");
        }
    end(&u);
}
END_TEST

/* Metadata pointing outside the batch or the cache fails the task with
 * HX_ERR_RANGE and gives NaN rows, never a stray access; the other rows
 * are still right. */
START_TEST(attention_bad_metadata_gives_nan_rows)
{
    under_test u;
    if (!begin(_i, "attention", &u))
        return;
    unsigned seed = 8;
    const hx_att_case cases[] = {
        {HX_REF_F16, 4, 2, 32, 16, 2, {20, 30}, {4, 3}, 0},              /* prefill */
        {HX_REF_F16, 4, 2, 32, 16, 2, {20, 30}, {1, 1}, 0},              /* decode */
        {HX_REF_F16, 4, 2, 32, 16, 3, {600, 1400, 300}, {1, 1, 1}, 0},   /* decode at depth, in shares */
    };
    for (int i = 0; i < 3; i++) {
        const hx_att_case c = cases[i];
        hx_att_setup o;
        hx_att_setup_make(&c, &o, &seed);
        uint32_t T = o.a.kv.T;
        double *ref = malloc(sizeof(double) * o.q_floats);
        hx_ref_attention(&o.a, o.q, o.kc, o.vc, o.meta, ref);
        o.meta[2 * T + T - 1] = 7; /* last token: a sequence that does not exist */
        o.meta[T + 0] = 1 << 30;   /* first token: a position past every block */
        float *out = attention_run(&u, &o, HX_ERR_RANGE);
        ck_assert_msg(strstr(run_error, "attention"), "%s", run_error);
        size_t row = (size_t)c.Hq * c.Dh;
        for (size_t i = 0; i < row && u.unified; i++) {
            ck_assert(isnan(out[i]));
            ck_assert(isnan(out[(T - 1) * row + i]));
        }
        if (T > 2 && u.unified) {
            double e = hx_ref_nmse(out + row, ref + row, (T - 2) * row);
            ck_assert_msg(e <= attention_bound(&u, c.kv_type), "%s: valid rows: nmse %g", u.tg->name, e);
        }
        free(ref);
        free(out);
        hx_att_setup_free(&o);
    }
    /* A block table entry past the cache: both kernels refuse to read it. */
    for (int decode = 0; decode < 2; decode++) {
        hx_att_case c = {HX_REF_Q8_0, 4, 2, 32, 16, 2, {20, 30}, {decode ? 1 : 4, decode ? 1 : 3}, 0};
        hx_att_setup o;
        hx_att_setup_make(&c, &o, &seed);
        o.meta[3 * o.a.kv.T + o.a.kv.max_blocks + 1] = 1 << 20; /* sequence 1, block 1 */
        free(attention_run(&u, &o, HX_ERR_RANGE));
        hx_att_setup_free(&o);
    }
    end(&u);
}
END_TEST

/* ---- vector_add, add, swiglu -------------------------------------------- */

typedef void (*elementwise_ref)(uint64_t n, const float *x, const float *y, double *out);

/* An op of two arrays of n floats (its argument block is that n): x, six
 * times wider (gates far into both tails of silu), and y in; the output
 * in a third buffer, or in x when `in_place`. */
static void check_elementwise(int target, const char *op, int in_place, elementwise_ref ref_of, double bound,
                              unsigned seed)
{
    under_test u;
    if (!begin(target, op, &u))
        return;
    const uint64_t sizes[] = {1, 1000, 100003};
    for (int s = 0; s < 3; s++) {
        uint64_t n = sizes[s];
        float *x = malloc(4 * n), *y = malloc(4 * n), *z = malloc(4 * n);
        hx_case_random(x, n, &seed);
        hx_case_random(y, n, &seed);
        for (uint64_t i = 0; i < n; i++)
            x[i] *= 6.0f;
        double *ref = malloc(sizeof(double) * n);
        ref_of(n, x, y, ref);
        hx_buffer *b[3] = {hx_case_buffer(u.rt, x, 4 * n), hx_case_buffer(u.rt, y, 4 * n), hx_case_empty(u.rt, 4 * n)};
        const hx_access modes[3] = {in_place ? HX_RW : HX_R, HX_R, HX_W};
        HX_ASSERT_OK(run(&u, op, &n, sizeof n, in_place ? 2 : 3, b, modes));
        hx_case_read(b[in_place ? 0 : 2], z, 4 * n);
        double e = hx_ref_nmse(z, ref, n);
        ck_assert_msg(e <= bound, "%s: %s n %llu: nmse %g", u.tg->name, op, (unsigned long long)n, e);
        hx_case_destroy(b, 3);
        free(x);
        free(y);
        free(z);
        free(ref);
    }
    end(&u);
}

/* hx_args_vector_add, hx_op_add and hx_op_swiglu are each one uint64_t n. */
_Static_assert(sizeof(hx_args_vector_add) == sizeof(uint64_t) && sizeof(hx_op_add) == sizeof(uint64_t) &&
                   sizeof(hx_op_swiglu) == sizeof(uint64_t),
               "elementwise argument blocks are n alone");

START_TEST(vector_add_matches_reference) { check_elementwise(_i, "vector_add", 0, hx_ref_add, NMSE_EXACT, 13); }
END_TEST

START_TEST(add_matches_reference) { check_elementwise(_i, "add", 1, hx_ref_add, NMSE_EXACT, 9); }
END_TEST

START_TEST(swiglu_matches_reference) { check_elementwise(_i, "swiglu", 0, hx_ref_swiglu, NMSE_ACCUM, 10); }
END_TEST

/* ---- kv_shift -------------------------------------------------------------- */

/* A context shift over caches of random rows: moves to lower slots, one
 * chain reading a slot an earlier move wrote, keys rotated by delta.  The
 * values are copied byte for byte; the keys are compared decoded.  With
 * `bad`, a move names a slot past the cache: HX_ERR_RANGE. */
static void check_kv_shift(under_test *u, uint32_t kv_type, uint32_t rot_k, uint32_t Hkv, uint32_t Dh, int neox,
                           int factors, int centred, int bad, unsigned *seed)
{
    const uint32_t n_slots = 48, n = 20;
    size_t row = hx_ref_row_bytes(kv_type, Dh), cache = (size_t)n_slots * Hkv * row;
    uint8_t *kc = malloc(cache), *vc = malloc(cache), *kref = malloc(cache), *vref = malloc(cache);
    for (uint32_t r = 0; r < n_slots * Hkv; r++) { /* random but valid encodings */
        hx_ref_random_row(kv_type, kc + r * row, Dh, seed);
        hx_ref_random_row(kv_type, vc + r * row, Dh, seed);
    }
    memcpy(kref, kc, cache);
    memcpy(vref, vc, cache);
    /* Drop 7 tokens after the first 4: slot 4 + 7 + i moves to 4 + i. */
    int32_t moves[2 * 20];
    for (uint32_t i = 0; i < n; i++) {
        moves[2 * i] = (int32_t)(11 + i);
        moves[2 * i + 1] = (int32_t)(4 + i);
    }
    if (bad)
        moves[2 * 13] = (int32_t)n_slots;
    hx_op_kv_shift a = {n,       Hkv,  Dh, kv_type, -7, Dh - (Dh % 4 ? 2 : 0), 10000.0f, 1.0f, (uint32_t)neox,
                        (uint32_t)factors, kv_type, rot_k, (uint32_t)centred};
    float ff[64];
    for (uint32_t i = 0; i < a.n_rot / 2; i++) /* Llama 3.1's rope_freqs: 1 .. 8 */
        ff[i] = 4.5f + 3.5f * hx_ref_uniform(seed);
    /* A centre of a few large coordinates: a key shifted without it added
     * back first would be turned about the wrong origin. */
    float *center = malloc(sizeof(float) * Hkv * Dh);
    for (uint32_t d = 0; d < Hkv * Dh; d++)
        center[d] = d % 11 == 3 ? 20.0f * hx_ref_uniform(seed) : 0.2f * hx_ref_uniform(seed);
    if (!bad)
        hx_ref_kv_shift(&a, kref, vref, moves, ff, center);
    hx_buffer *fb = hx_case_buffer(u->rt, ff, sizeof ff), *cb = hx_case_buffer(u->rt, center, sizeof(float) * Hkv * Dh);
    /* The centre follows the factors, or the moves when there are none. */
    hx_buffer *b[5] = {hx_case_buffer(u->rt, kc, cache), hx_case_buffer(u->rt, vc, cache),
                       hx_case_buffer(u->rt, moves, sizeof moves), factors ? fb : cb, cb};
    hx_status st = run(u, "kv_shift", &a, sizeof a, 3 + factors + centred, b,
                       (hx_access[]){HX_RW, HX_RW, HX_R, HX_R, HX_R});
    if (bad) {
        ck_assert_int_eq(st, HX_ERR_RANGE);
    } else {
        HX_ASSERT_OK(st);
        hx_case_read(b[0], kc, cache);
        hx_case_read(b[1], vc, cache);
        ck_assert_msg(!memcmp(vc, vref, cache), "%s: kv_shift: values differ from the reference", u->tg->name);
        double *mine = malloc(sizeof(double) * Dh * n_slots * Hkv), *want = malloc(sizeof(double) * Dh * n_slots * Hkv);
        float *minef = malloc(sizeof(float) * Dh * n_slots * Hkv);
        for (uint32_t r = 0; r < n_slots * Hkv; r++) {
            hx_ref_dequantize(kv_type, kc + r * row, mine + (size_t)r * Dh, Dh);
            hx_ref_dequantize(kv_type, kref + r * row, want + (size_t)r * Dh, Dh);
        }
        for (size_t i = 0; i < (size_t)Dh * n_slots * Hkv; i++)
            minef[i] = (float)mine[i];
        /* Rotating in float, then rounding to the cache's type, may land one
         * step of that type away from the double reference's rounding. */
        double e = hx_ref_nmse(minef, want, (size_t)Dh * n_slots * Hkv);
        double bound = kv_type == HX_REF_F32 ? NMSE_ROPE : kv_type == HX_REF_F16 ? 1e-7 : 1e-4;
        ck_assert_msg(e <= bound, "%s: kv_shift type %u rot %u Dh %u neox %d: keys nmse %g", u->tg->name, kv_type,
                      rot_k, Dh, neox, e);
        free(mine);
        free(want);
        free(minef);
    }
    hx_case_destroy(b, 3);
    hx_buffer_destroy(fb);
    hx_buffer_destroy(cb);
    free(center);
    free(kc);
    free(vc);
    free(kref);
    free(vref);
}

START_TEST(kv_shift_matches_reference)
{
    under_test u;
    if (!begin(_i, "kv_shift", &u))
        return;
    unsigned seed = 21;
    for (int v = 0; v < 4; v++) {
        const int neox = v & 1, factors = v >> 1;
        check_kv_shift(&u, HX_REF_F32, 0, 2, 24, neox, factors, 0, 0, &seed);
        check_kv_shift(&u, HX_REF_F16, 0, 3, 64, neox, factors, 0, 0, &seed);
        check_kv_shift(&u, HX_REF_Q8_0, 0, 2, 64, neox, factors, 0, 0, &seed);
        check_kv_shift(&u, HX_REF_Q4_0, 0, 1, 128, neox, factors, 0, 0, &seed);
        if (u.tg->kind == ON_CPU) { /* keys stored rotated or centred: the CPU's kernels alone take them */
            check_kv_shift(&u, HX_REF_Q4_0, 128, 2, 128, neox, factors, 0, 0, &seed);
            check_kv_shift(&u, HX_REF_Q8_0, 64, 1, 64, neox, factors, 0, 0, &seed);
            check_kv_shift(&u, HX_REF_Q4_0, 64, 2, 64, neox, factors, 1, 0, &seed);
            check_kv_shift(&u, HX_REF_Q8_0, 0, 2, 64, neox, factors, 1, 0, &seed);
        }
    }
    check_kv_shift(&u, HX_REF_F16, 0, 2, 32, 0, 0, 0, 1, &seed);
    end(&u);
}
END_TEST

/* ---- Gemma's and the experts' ops ----------------------------------------- */

/* GELU, tanh form, as the op's contract has it (ops.h, "geglu"): ggml's
 * float formula (whose 1 + tanh cancels to nothing below about -5, in
 * llama.cpp as here) on the input rounded to f16, the result rounded to
 * f16.  The kernel's tanhf may differ from the C library's in the last
 * bit, which can move a result across an f16 rounding tie (5e-4
 * relative): the bound is 1e-5 NMSE. */
#define NMSE_GELU 1e-5
static double gelu(double x)
{
    if (x <= -10.0)
        return 0.0;
    if (x >= 10.0)
        return x;
    const float h = (float)hx_ref_f16_to_f64(hx_ref_f32_to_f16((float)x));
    const float g = 0.5f * h * (1.0f + tanhf(0.79788456080286535587989211986876f * h * (1.0f + 0.044715f * h * h)));
    return hx_ref_f16_to_f64(hx_ref_f32_to_f16(g));
}
static double silu(double x) { return x / (1.0 + exp(-x)); }

static void ref_geglu(uint64_t n, const float *g, const float *u, double *out)
{
    for (uint64_t i = 0; i < n; i++)
        out[i] = gelu(g[i]) * u[i];
}

START_TEST(geglu_matches_reference) { check_elementwise(_i, "geglu", 0, ref_geglu, NMSE_GELU, 12); }
END_TEST

START_TEST(scale_matches_reference)
{
    under_test u;
    if (!begin(_i, "scale", &u))
        return;
    unsigned seed = 21;
    const uint64_t sizes[] = {1, 1000, 100003};
    for (int s = 0; s < 3; s++)
        for (int capped = 0; capped < 2; capped++) {
            const uint64_t n = sizes[s];
            float *x = malloc(4 * n), *z = malloc(4 * n);
            double *ref = malloc(8 * n);
            hx_case_random(x, n, &seed);
            hx_op_scale a = {n, capped ? 1.0f : 25.3f, capped ? 30.0f : 0.0f};
            for (uint64_t i = 0; i < n; i++) {
                x[i] *= capped ? 90.0f : 1.0f; /* far into tanh's tails */
                const double v = (double)x[i] * a.scale;
                ref[i] = capped ? tanh(v / a.cap) * a.cap : v;
            }
            hx_buffer *b[1] = {hx_case_buffer(u.rt, x, 4 * n)};
            HX_ASSERT_OK(run(&u, "scale", &a, sizeof a, 1, b, (hx_access[]){HX_RW}));
            hx_case_read(b[0], z, 4 * n);
            double e = hx_ref_nmse(z, ref, n);
            ck_assert_msg(e <= NMSE_ACCUM, "%s: scale n %llu cap %d: nmse %g", u.tg->name, (unsigned long long)n,
                          capped, e);
            hx_case_destroy(b, 1);
            free(x), free(z), free(ref);
        }
    end(&u);
}
END_TEST

START_TEST(add_gated_matches_reference)
{
    under_test u;
    if (!begin(_i, "add_gated", &u))
        return;
    unsigned seed = 23;
    const uint32_t shapes[][2] = {{1, 64}, {7, 300}, {33, 1024}};
    for (int s = 0; s < 3; s++) {
        const uint32_t T = shapes[s][0], D = shapes[s][1];
        const size_t n = (size_t)T * D;
        float *x = malloc(4 * n), *y = malloc(4 * n), *g = malloc(4 * T), *z = malloc(4 * n);
        double *ref = malloc(8 * n);
        hx_case_random(x, n, &seed);
        hx_case_random(y, n, &seed);
        hx_case_random(g, T, &seed);
        for (uint32_t t = 0; t < T; t++) {
            g[t] *= 8.0f;
            for (uint32_t i = 0; i < D; i++)
                ref[(size_t)t * D + i] = x[(size_t)t * D + i] + y[(size_t)t * D + i] / (1.0 + exp(-(double)g[t]));
        }
        hx_op_add_gated a = {T, D};
        hx_buffer *b[3] = {hx_case_buffer(u.rt, x, 4 * n), hx_case_buffer(u.rt, y, 4 * n), hx_case_buffer(u.rt, g, 4 * T)};
        HX_ASSERT_OK(run(&u, "add_gated", &a, sizeof a, 3, b, (hx_access[]){HX_RW, HX_R, HX_R}));
        hx_case_read(b[0], z, 4 * n);
        double e = hx_ref_nmse(z, ref, n);
        ck_assert_msg(e <= NMSE_ACCUM, "%s: add_gated T %u D %u: nmse %g", u.tg->name, T, D, e);
        hx_case_destroy(b, 3);
        free(x), free(y), free(g), free(z), free(ref);
    }
    end(&u);
}
END_TEST

/* A route (ops.h) of T tokens to k distinct experts of E each, with
 * random weights, laid out as moe_route writes it. */
static int32_t *random_route(uint32_t T, uint32_t k, uint32_t E, unsigned *seed)
{
    int32_t *r = calloc(hx_moe_route_words(T, k, E), 4);
    const uint64_t tk = (uint64_t)T * k;
    float *w = (float *)(r + tk);
    int32_t *off = r + 2 * tk, *order = off + E + 1, *inv = order + tk;
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t j = 0; j < k; j++) {
            int32_t e;
            int dup;
            do {
                /* expert E - 1 is never chosen: an expert with no token */
                e = (int32_t)((hx_ref_uniform(seed) + 1.0f) * 0.5f * (float)(E - 1)) % (int32_t)(E - 1);
                dup = 0;
                for (uint32_t i = 0; i < j; i++)
                    dup |= r[t * k + i] == e;
            } while (dup);
            r[t * k + j] = e;
            w[t * k + j] = 0.25f + 0.5f * (hx_ref_uniform(seed) + 1.0f);
            off[e + 1]++;
        }
    for (uint32_t e = 0; e < E; e++)
        off[e + 1] += off[e];
    int32_t *fill = malloc(4 * E);
    memcpy(fill, off, 4 * E);
    for (uint64_t i = 0; i < tk; i++) {
        order[fill[r[i]]] = (int32_t)i;
        inv[i] = fill[r[i]]++;
    }
    free(fill);
    return r;
}

START_TEST(moe_route_matches_reference)
{
    under_test u;
    if (!begin(_i, "moe_route", &u))
        return;
    unsigned seed = 29;
    const uint32_t cases[][4] = {{1, 8, 2, 1}, {37, 8, 2, 1}, {5, 60, 4, 0}, {64, 128, 8, 1}};
    for (int c = 0; c < 4; c++) {
        const uint32_t T = cases[c][0], E = cases[c][1], k = cases[c][2], norm = cases[c][3], layers = 3;
        float *logits = malloc(4ull * T * E);
        hx_case_random(logits, (size_t)T * E, &seed);
        for (size_t i = 0; i < (size_t)T * E; i++)
            logits[i] *= 4.0f;
        const size_t words = hx_moe_route_words(T, k, E);
        uint64_t *counts = calloc((size_t)layers * E, 8);
        hx_op_moe_route a = {T, E, k, norm, 1, layers};
        hx_buffer *b[3] = {hx_case_buffer(u.rt, logits, 4ull * T * E), hx_case_empty(u.rt, 4 * words),
                           hx_case_buffer(u.rt, counts, 8ull * layers * E)};
        for (int twice = 0; twice < 2; twice++)
            HX_ASSERT_OK(run(&u, "moe_route", &a, sizeof a, 3, b, (hx_access[]){HX_R, HX_W, HX_RW}));
        int32_t *r = malloc(4 * words);
        hx_case_read(b[1], r, 4 * words);
        hx_case_read(b[2], counts, 8ull * layers * E);
        const uint64_t tk = (uint64_t)T * k;
        const float *w = (const float *)(r + tk);
        const int32_t *off = r + 2 * tk, *order = off + E + 1, *inv = order + tk;
        uint64_t *want = calloc(E, 8);
        for (uint32_t t = 0; t < T; t++) {
            double p[128], sum = 0, wsum = 0;
            const float *l = logits + (size_t)t * E;
            for (uint32_t e = 0; e < E; e++)
                sum += p[e] = exp((double)l[e]);
            int used[128] = {0};
            for (uint32_t j = 0; j < k; j++) {
                int best = -1;
                for (uint32_t e = 0; e < E; e++)
                    if (!used[e] && (best < 0 || p[e] > p[best]))
                        best = (int)e;
                used[best] = 1;
                ck_assert_msg(r[t * k + j] == best, "%s: token %u choice %u: expert %d, want %d", u.tg->name, t, j,
                              r[t * k + j], best);
                wsum += p[best] / sum;
                want[best] += 2;
            }
            for (uint32_t j = 0; j < k; j++) {
                const double ref = p[r[t * k + j]] / sum / (norm ? wsum : 1.0);
                ck_assert_msg(fabs(w[t * k + j] - ref) <= 1e-6 * ref, "%s: weight %g, want %g", u.tg->name,
                              (double)w[t * k + j], ref);
            }
        }
        /* The order lists each expert's entries, by token, and inv inverts it. */
        for (uint32_t e = 0; e < E; e++) {
            ck_assert_int_eq(off[e + 1] - off[e], (int)(want[e] / 2));
            for (int32_t i = off[e]; i < off[e + 1]; i++) {
                ck_assert_int_eq(r[order[i]], (int)e);
                ck_assert_int_eq(inv[order[i]], i);
                ck_assert(i == off[e] || order[i] > order[i - 1]);
            }
            ck_assert_msg(counts[E + e] == want[e] && counts[e] == 0 && counts[2 * E + e] == 0,
                          "%s: expert %u counted %llu, want %llu in layer 1 only", u.tg->name, e,
                          (unsigned long long)counts[E + e], (unsigned long long)want[e]);
        }
        /* A layer past the tallies is impossible arguments. */
        hx_op_moe_route bad = a;
        bad.layer = layers;
        ck_assert_int_ne(run(&u, "moe_route", &bad, sizeof bad, 3, b, (hx_access[]){HX_R, HX_W, HX_RW}), HX_OK);
        hx_case_destroy(b, 3);
        free(logits), free(counts), free(r), free(want);
    }
    end(&u);
}
END_TEST

static double moe_bound(const under_test *u, uint32_t type, int gelu_act)
{
    double b = matmul_bound(u, type, 2);
    return gelu_act && b < NMSE_GELU ? NMSE_GELU : b;
}

/* One product of expert e's [N][K] matrix in W (rows of `type`) with x. */
static void ref_expert(uint32_t type, const uint8_t *W, uint32_t e, uint32_t N, uint32_t K, const float *x, double *y)
{
    hx_op_matmul m = {type, 1, N, K, 0};
    hx_ref_matmul(&m, W + (size_t)e * N * hx_ref_row_bytes(type, K), x, NULL, y);
}

static uint8_t *random_experts(uint32_t type, uint32_t E, uint32_t N, uint32_t K, unsigned *seed)
{
    const size_t row = hx_ref_row_bytes(type, K);
    uint8_t *W = malloc(row * E * N);
    for (size_t n = 0; n < (size_t)E * N; n++)
        hx_ref_random_row(type, W + n * row, K, seed);
    return W;
}

START_TEST(moe_gate_up_matches_reference)
{
    under_test u;
    if (!begin(_i, "moe_gate_up", &u))
        return;
    unsigned seed = 31;
    const uint32_t types[] = {HX_REF_F32, HX_REF_F16, HX_REF_Q8_0, HX_REF_Q4_0, HX_REF_Q4_K};
    const uint32_t shapes[][4] = {{1, 256, 98, 4}, {9, 256, 64, 6}, {40, 512, 36, 9}}; /* T, D, F, E */
    for (int ti = 0; ti < 5; ti++)
        for (int s = 0; s < 3; s++)
            for (uint32_t act = 0; act < 2; act++) {
                const uint32_t T = shapes[s][0], D = shapes[s][1], F = shapes[s][2], E = shapes[s][3], k = 2;
                const uint32_t gt = types[ti], ut = types[(ti + act) % 5]; /* gate and up may differ */
                uint8_t *G = random_experts(gt, E, F, D, &seed), *U = random_experts(ut, E, F, D, &seed);
                int32_t *route = random_route(T, k, E, &seed);
                float *x = malloc(4ull * T * D), *h = malloc(4ull * T * k * F);
                hx_case_random(x, (size_t)T * D, &seed);
                double *ref = malloc(8ull * T * k * F), *g = malloc(8ull * F), *up = malloc(8ull * F);
                const int32_t *order = route + 2ull * T * k + E + 1;
                for (uint64_t i = 0; i < (uint64_t)T * k; i++) {
                    const uint32_t t = (uint32_t)order[i] / k, e = (uint32_t)route[order[i]];
                    ref_expert(gt, G, e, F, D, x + (size_t)t * D, g);
                    ref_expert(ut, U, e, F, D, x + (size_t)t * D, up);
                    for (uint32_t f = 0; f < F; f++)
                        ref[i * F + f] = (act ? gelu(g[f]) : silu(g[f])) * up[f];
                }
                hx_op_moe_gate_up a = {T, D, F, E, k, gt, ut, act, 0, 0, 0, 0};
                const size_t gb = hx_ref_row_bytes(gt, D) * E * F, ub = hx_ref_row_bytes(ut, D) * E * F;
                hx_buffer *b[5] = {hx_case_buffer(u.rt, x, 4ull * T * D),
                                   hx_case_buffer(u.rt, route, 4 * hx_moe_route_words(T, k, E)),
                                   hx_case_buffer(u.rt, G, gb), hx_case_buffer(u.rt, U, ub),
                                   hx_case_empty(u.rt, 4ull * T * k * F)};
                HX_ASSERT_OK(run(&u, "moe_gate_up", &a, sizeof a, 5, b, (hx_access[]){HX_R, HX_R, HX_R, HX_R, HX_W}));
                hx_case_read(b[4], h, 4ull * T * k * F);
                double e = hx_ref_nmse(h, ref, (size_t)T * k * F);
                ck_assert_msg(e <= fmax(moe_bound(&u, gt, (int)act), moe_bound(&u, ut, (int)act)),
                              "%s: moe_gate_up types %u/%u T %u D %u F %u E %u act %u: nmse %g", u.tg->name, gt, ut, T,
                              D, F, E, act, e);
                /* The experts as two groups, each with its own weight
                 * buffer (placed apart): every entry's row as with all of
                 * them; a group beyond the experts is refused. */
                if (s == 1) {
                    const uint32_t half = E / 2;
                    const size_t g1 = hx_ref_row_bytes(gt, D) * half * F, u1 = hx_ref_row_bytes(ut, D) * half * F;
                    hx_buffer *parts[4] = {hx_case_buffer(u.rt, G, g1), hx_case_buffer(u.rt, U, u1),
                                           hx_case_buffer(u.rt, G + g1, gb - g1), hx_case_buffer(u.rt, U + u1, ub - u1)};
                    hx_buffer *h2 = hx_case_empty(u.rt, 4ull * T * k * F);
                    for (int grp = 0; grp < 2; grp++) {
                        hx_op_moe_gate_up ag = a;
                        ag.e_lo = grp ? half : 0;
                        ag.e_n = grp ? E - half : half;
                        hx_buffer *bg[5] = {b[0], b[1], parts[2 * grp], parts[2 * grp + 1], h2};
                        HX_ASSERT_OK(run(&u, "moe_gate_up", &ag, sizeof ag, 5, bg,
                                         (hx_access[]){HX_R, HX_R, HX_R, HX_R, grp ? HX_RW : HX_W}));
                    }
                    float *hs = malloc(4ull * T * k * F);
                    hx_case_read(h2, hs, 4ull * T * k * F);
                    double eg = hx_ref_nmse(hs, ref, (size_t)T * k * F);
                    ck_assert_msg(eg <= fmax(moe_bound(&u, gt, (int)act), moe_bound(&u, ut, (int)act)),
                                  "%s: moe_gate_up in two groups types %u/%u: nmse %g", u.tg->name, gt, ut, eg);
                    hx_op_moe_gate_up bad = a;
                    bad.e_lo = half + 1, bad.e_n = E - half;
                    hx_buffer *bb[5] = {b[0], b[1], parts[2], parts[3], h2};
                    ck_assert_int_ne(run(&u, "moe_gate_up", &bad, sizeof bad, 5, bb,
                                         (hx_access[]){HX_R, HX_R, HX_R, HX_R, HX_RW}),
                                     HX_OK);
                    free(hs);
                    hx_case_destroy(parts, 4);
                    hx_case_destroy(&h2, 1);
                }
                /* A route naming an entry outside the batch is refused. */
                if (s == 1 && act == 0) {
                    route[2 * T * k + E + 1] = (int32_t)(T * k);
                    hx_buffer *bad = hx_case_buffer(u.rt, route, 4 * hx_moe_route_words(T, k, E));
                    hx_buffer *b2[5] = {b[0], bad, b[2], b[3], b[4]};
                    ck_assert_int_ne(
                        run(&u, "moe_gate_up", &a, sizeof a, 5, b2, (hx_access[]){HX_R, HX_R, HX_R, HX_R, HX_W}), HX_OK);
                    hx_case_destroy(&bad, 1);
                }
                hx_case_destroy(b, 5);
                free(G), free(U), free(route), free(x), free(h), free(ref), free(g), free(up);
            }
    end(&u);
}
END_TEST

START_TEST(moe_down_matches_reference)
{
    under_test u;
    if (!begin(_i, "moe_down", &u))
        return;
    unsigned seed = 37;
    const uint32_t types[] = {HX_REF_F32, HX_REF_F16, HX_REF_Q8_0, HX_REF_Q4_0, HX_REF_Q4_K};
    const uint32_t shapes[][5] = {{1, 70, 256, 4, 2}, {9, 256, 256, 6, 2}, {40, 130, 512, 9, 4}}; /* T, D, F, E, k */
    for (int ti = 0; ti < 5; ti++)
        for (int s = 0; s < 3; s++) {
            const uint32_t T = shapes[s][0], D = shapes[s][1], F = shapes[s][2], E = shapes[s][3], k = shapes[s][4];
            const uint32_t type = types[ti];
            uint8_t *W = random_experts(type, E, D, F, &seed);
            int32_t *route = random_route(T, k, E, &seed);
            float *h = malloc(4ull * T * k * F), *out = malloc(4ull * T * D);
            hx_case_random(h, (size_t)T * k * F, &seed);
            double *ref = calloc((size_t)T * D, 8), *y = malloc(8ull * D);
            const float *w = (const float *)(route + (size_t)T * k);
            const int32_t *inv = route + 3ull * T * k + E + 1;
            for (uint32_t t = 0; t < T; t++)
                for (uint32_t j = 0; j < k; j++) {
                    ref_expert(type, W, (uint32_t)route[t * k + j], D, F, h + (size_t)inv[t * k + j] * F, y);
                    for (uint32_t d = 0; d < D; d++)
                        ref[(size_t)t * D + d] += w[t * k + j] * y[d];
                }
            hx_op_moe_down a = {T, D, F, E, k, type, 0, 0, 0, 0, 0};
            hx_buffer *b[4] = {hx_case_buffer(u.rt, h, 4ull * T * k * F),
                               hx_case_buffer(u.rt, route, 4 * hx_moe_route_words(T, k, E)),
                               hx_case_buffer(u.rt, W, hx_ref_row_bytes(type, F) * E * D),
                               hx_case_empty(u.rt, 4ull * T * D)};
            HX_ASSERT_OK(run(&u, "moe_down", &a, sizeof a, 4, b, (hx_access[]){HX_R, HX_R, HX_R, HX_W}));
            hx_case_read(b[3], out, 4ull * T * D);
            double e = hx_ref_nmse(out, ref, (size_t)T * D);
            ck_assert_msg(e <= moe_bound(&u, type, 0), "%s: moe_down type %u T %u D %u F %u E %u k %u: nmse %g",
                          u.tg->name, type, T, D, F, E, k, e);
            /* Two groups of experts, the second adding to the first's sum
             * (the planner places them apart): the same outputs. */
            {
                const uint32_t half = E / 2;
                const size_t w1 = hx_ref_row_bytes(type, F) * half * D, wall = hx_ref_row_bytes(type, F) * E * D;
                hx_buffer *parts[2] = {hx_case_buffer(u.rt, W, w1), hx_case_buffer(u.rt, W + w1, wall - w1)};
                hx_buffer *o2 = hx_case_empty(u.rt, 4ull * T * D);
                for (int grp = 0; grp < 2; grp++) {
                    hx_op_moe_down ag = a;
                    ag.e_lo = grp ? half : 0;
                    ag.e_n = grp ? E - half : half;
                    ag.accumulate = (uint32_t)grp;
                    hx_buffer *bg[4] = {b[0], b[1], parts[grp], o2};
                    HX_ASSERT_OK(run(&u, "moe_down", &ag, sizeof ag, 4, bg,
                                     (hx_access[]){HX_R, HX_R, HX_R, grp ? HX_RW : HX_W}));
                }
                hx_case_read(o2, out, 4ull * T * D);
                double eg = hx_ref_nmse(out, ref, (size_t)T * D);
                ck_assert_msg(eg <= moe_bound(&u, type, 0), "%s: moe_down in two groups type %u T %u: nmse %g",
                              u.tg->name, type, T, eg);
                hx_case_destroy(parts, 2);
                hx_case_destroy(&o2, 1);
            }
            hx_case_destroy(b, 4);
            free(W), free(route), free(h), free(out), free(ref), free(y);
        }
    end(&u);
}
END_TEST

/* ---- the matrix ---------------------------------------------------------- */

/* The test of each op of the op list: a new op without one fails here. */
static const TTest *op_test(int op)
{
    const TTest *const tests[HX_OP_COUNT] = {
    [HX_OP_VECTOR_ADD] = vector_add_matches_reference, [HX_OP_GEMM_F32] = gemm_f32_matches_reference,
    [HX_OP_GET_ROWS] = get_rows_matches_reference,     [HX_OP_RMSNORM] = rmsnorm_matches_reference,
    [HX_OP_MATMUL] = matmul_matches_reference,         [HX_OP_ROPE] = rope_matches_reference,
    [HX_OP_KV_STORE] = kv_store_matches_reference,     [HX_OP_ATTENTION] = attention_prefill_matches_reference,
    [HX_OP_ADD] = add_matches_reference,               [HX_OP_SWIGLU] = swiglu_matches_reference,
    [HX_OP_KV_SHIFT] = kv_shift_matches_reference,     [HX_OP_MATMUL_MULTI] = matmul_multi_matches_matmul,
    [HX_OP_ATTENTION_PART] = attention_part_matches_reference, [HX_OP_ATTN_MERGE] = attn_merge_matches_reference,
    [HX_OP_SCALE] = scale_matches_reference,           [HX_OP_GEGLU] = geglu_matches_reference,
    [HX_OP_ADD_GATED] = add_gated_matches_reference,   [HX_OP_MOE_ROUTE] = moe_route_matches_reference,
    [HX_OP_MOE_GATE_UP] = moe_gate_up_matches_reference, [HX_OP_MOE_DOWN] = moe_down_matches_reference,
    };
    return tests[op];
}

/* Every op has a test, and every device x op pair is either checked by
 * the tests above or named here with the reason it is not: the lines a
 * reader of `make test` sees, with their counts. */
START_TEST(ops_every_device_is_checked_or_named)
{
    for (int op = 0; op < HX_OP_COUNT; op++)
        ck_assert_msg(op_test(op), "op %s has no test in this suite", hx_op_codelet((hx_op)op)->name);
    int checked = 0, absent = 0, missing = 0;
    for (int i = 0; i < N_TARGETS; i++) {
        hx_runtime *rt;
        int dev;
        char why[512], list[512] = "", lacks[512] = "";
        if (open_target(&targets[i], &rt, &dev, why, sizeof why)) {
            printf("ops: %s absent: not checked (%s)\n", targets[i].name, why);
            absent += HX_OP_COUNT;
            continue;
        }
        for (int op = 0; op < HX_OP_COUNT; op++) {
            const char *name = hx_op_codelet((hx_op)op)->name;
            int has = hx_device_implements(rt, dev, name);
            char *to = has ? list : lacks;
            snprintf(to + strlen(to), sizeof list - strlen(to), "%s%s", *to ? " " : "", name);
            checked += has;
            missing += !has;
        }
        printf("ops: %s checks %s%s%s\n", targets[i].name, list, *lacks ? "; does not implement " : "", lacks);
        hx_runtime_close(rt);
        if (targets[i].simd >= 0)
            HX_ASSERT_OK(hx_quant_set_level(hx_cpu_simd_max()));
    }
    printf("ops: %d device x op pairs checked, %d not implemented, %d skipped (device absent)\n", checked, missing,
           absent);
    ck_assert_int_gt(checked, 0);
}
END_TEST

Suite *suite_ops(void)
{
    Suite *s = suite_create("ops");
    TCase *tc = tcase_create("every_device");
    tcase_set_timeout(tc, 600);
    tcase_add_unchecked_fixture(tc, hx_cl_test_cache_setup, hx_cl_test_cache_teardown);
    tcase_add_test(tc, ops_every_device_is_checked_or_named);
    for (int op = 0; op < HX_OP_COUNT; op++)
        tcase_add_loop_test(tc, op_test(op), 0, N_TARGETS);
    tcase_add_loop_test(tc, attention_decode_matches_reference, 0, N_TARGETS);
    tcase_add_loop_test(tc, attention_decode_window_at_depth, 0, N_TARGETS);
    tcase_add_loop_test(tc, attention_bad_metadata_gives_nan_rows, 0, N_TARGETS);
    tcase_add_loop_test(tc, attention_q4_0_matches_reference, 0, N_TARGETS);
    tcase_add_loop_test(tc, attention_window_matches_reference, 0, N_TARGETS);
    tcase_add_loop_test(tc, attention_mixed_and_rotated_kv_match_reference, 0, N_TARGETS);
    tcase_add_loop_test(tc, rotated_q4_0_cache_loses_less, 0, N_TARGETS);
    tcase_add_loop_test(tc, centred_keys_lose_less, 0, N_TARGETS);
    tcase_add_loop_test(tc, attention_long_context_matches_reference, 0, N_TARGETS);
    tcase_add_loop_test(tc, attention_token_bits_alone_as_in_a_prompt, 0, N_TARGETS);
    tcase_add_loop_test(tc, kv_store_mixed_and_rotated, 0, N_TARGETS);
    tcase_add_loop_test(tc, matmul_low_bit_types, 0, N_TARGETS);
    tcase_add_test(tc, attention_scratch_does_not_grow_with_the_team);
    suite_add_tcase(s, tc);
    return s;
}
