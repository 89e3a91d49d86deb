/* The CUDA backend, host side: the plugin loads or its absence is explained
 * exactly; the dequantization tiles (kernels_cu/dequant_tile.h) equal a
 * scalar decoding of the GGUF blocks; argument checks refuse what would
 * read out of bounds on the GPU.  On a machine with a GPU the real plugin
 * describes it here; every op on it against the scalar references is the
 * `ops` suite's (tests/test_ops.c), which bench/gpu-check runs. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels_cu/dequant_tile.h"
#include "kernels_cu/op_check.h"
#include "kernels_cu/plugin.h"
#include "kernels_cpu/quant.h"
#include "ops/op_list.h"
#include "ops/types.h"
#include "tests/expert_split.h"
#include "tests/hx_test.h"

/* ---- helpers ------------------------------------------------------------ */

static uint64_t rng_state;
static void rng_seed(uint64_t s) { rng_state = s * 0x9e3779b97f4a7c15ull + 1; }
static uint32_t rng_u32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static float rng_float(void) { return (float)(rng_u32() & 0xffffff) / 8388608.0f - 1.0f; }

/* An F16 scale of a plausible size, sign random: 2^-12 .. 2^2. */
static uint16_t rand_scale(void)
{
    uint32_t e = 3 + rng_u32() % 15;
    return (uint16_t)(((rng_u32() & 1) << 15) | (e << 10) | (rng_u32() & 0x3ff));
}

/* F16 -> F32 by the definition, independent of the header's bit tricks. */
static float ref_h2f(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m + 1024), e - 25);
    return (h & 0x8000) ? -v : v;
}

/* F32 -> F16 through the compiler's own conversion where it has one. */
static uint16_t ref_f2h(float f)
{
#ifdef __FLT16_MAX__
    _Float16 h = (_Float16)f;
    uint16_t u;
    memcpy(&u, &h, sizeof u);
    return u;
#else
    return hx_dq_f32_to_f16(f);
#endif
}

static hx_runtime *open_with(const char *devices, hx_status *st)
{
    hx_runtime *rt = NULL;
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = devices;
    o.cpu_threads = 1;
    *st = hx_runtime_open(&rt, &o);
    return rt;
}

static int count_family(hx_runtime *rt, hx_device_family f)
{
    int n = 0;
    for (int i = 0; i < hx_runtime_device_count(rt); i++) {
        hx_device_info d;
        HX_ASSERT_OK(hx_runtime_device_info(rt, i, &d));
        n += d.family == f;
    }
    return n;
}

/* With HX_CUDA_PLUGIN=path: "all" opens on the CPU with the reason recorded
 * (containing `expect`), "cuda" fails with that reason. */
static void check_absence(const char *path, const char *expect)
{
    setenv("HX_CUDA_PLUGIN", path, 1);
    hx_status st;
    hx_runtime *rt = open_with("all", &st);
    HX_ASSERT_OK(st);
    ck_assert_int_ge(count_family(rt, HX_FAMILY_CPU), 1);
    ck_assert_int_eq(count_family(rt, HX_FAMILY_CUDA), 0);
    const char *why = hx_runtime_absence_reason(rt, HX_FAMILY_CUDA);
    ck_assert_ptr_nonnull(why);
    ck_assert_msg(strstr(why, path) != NULL, "reason '%s' does not name %s", why, path);
    ck_assert_msg(strstr(why, expect) != NULL, "reason '%s' lacks '%s'", why, expect);
    char reason[600];
    snprintf(reason, sizeof reason, "%s", why);
    hx_runtime_close(rt);

    rt = open_with("cuda", &st);
    ck_assert_ptr_null(rt);
    ck_assert_int_eq(st, HX_ERR_NO_DEVICE);
    ck_assert_msg(strstr(hx_last_error(), reason) != NULL, "'%s' does not carry '%s'", hx_last_error(), reason);
    unsetenv("HX_CUDA_PLUGIN");
}

/* ---- loading ------------------------------------------------------------ */

START_TEST(absent_when_the_plugin_file_is_missing)
{
    char path[512];
    snprintf(path, sizeof path, "%s/no-such-dir/libhetero-cuda.so", hx_test_build_dir());
    check_absence(path, "No such file");
}
END_TEST

START_TEST(absent_when_the_library_is_not_a_plugin)
{
    char path[512];
    snprintf(path, sizeof path, "%s/libhetero.so", hx_test_build_dir());
    ck_assert_msg(access(path, R_OK) == 0, "%s should have been built", path);
    check_absence(path, HX_CUDA_PLUGIN_SYMBOL);
}
END_TEST

START_TEST(absent_when_the_file_is_not_a_library)
{
    char path[] = "/tmp/hx-not-elf-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    const char text[] = "this is not a shared object\n";
    ck_assert_int_eq(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    close(fd);
    check_absence(path, "HX_CUDA_PLUGIN=");
    unlink(path);
}
END_TEST

/* The real plugin when this build made one: on this machine it either finds
 * GPUs or says which CUDA call failed and how. */
START_TEST(real_plugin_finds_gpus_or_names_the_cuda_error)
{
    char path[512];
    snprintf(path, sizeof path, "%s/libhetero-cuda.so", hx_test_build_dir());
    if (access(path, R_OK) != 0) {
        fprintf(stderr, "cuda: %s not built (no nvcc, or NO_CUDA): real-plugin test not applicable\n", path);
        return;
    }
    setenv("HX_CUDA_PLUGIN", path, 1);
    hx_status st;
    hx_runtime *rt = open_with("all", &st);
    HX_ASSERT_OK(st);
    int gpus = count_family(rt, HX_FAMILY_CUDA);
    if (gpus == 0) {
        const char *why = hx_runtime_absence_reason(rt, HX_FAMILY_CUDA);
        ck_assert_ptr_nonnull(why);
        ck_assert_msg(strncmp(why, path, strlen(path)) == 0, "reason '%s' does not start with the plugin", why);
        ck_assert_msg(strstr(why, ": cuda") != NULL, "reason '%s' names no CUDA call", why);
        hx_runtime_close(rt);
        rt = open_with("cuda", &st);
        ck_assert_int_eq(st, HX_ERR_NO_DEVICE);
        unsetenv("HX_CUDA_PLUGIN");
        return;
    }
    /* A GPU: the plugin describes it (the `ops` suite runs every op on it). */
    for (int i = 0; i < hx_runtime_device_count(rt); i++) {
        hx_device_info d;
        HX_ASSERT_OK(hx_runtime_device_info(rt, i, &d));
        if (d.family != HX_FAMILY_CUDA)
            continue;
        ck_assert_int_eq(d.kind, HX_KIND_GPU);
        ck_assert_int_gt(d.compute_units, 0);
        ck_assert_uint_gt(d.global_mem_bytes, 0);
        ck_assert_str_eq(d.platform, "CUDA");
    }
    hx_runtime_close(rt);
    unsetenv("HX_CUDA_PLUGIN");
}
END_TEST

/* The plugin's kernels carry their op ids (the backend binds by them):
 * each is the id of its name in the op list, and every op has one kernel.
 * The plugin loads without a GPU; only its devices need one. */
START_TEST(plugin_kernels_carry_their_op_ids)
{
    char path[512];
    snprintf(path, sizeof path, "%s/libhetero-cuda.so", hx_test_build_dir());
    if (access(path, R_OK) != 0) {
        fprintf(stderr, "cuda: %s not built (no nvcc, or NO_CUDA): op-id test not applicable\n", path);
        return;
    }
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(dl != NULL, "%s", dlerror());
    hx_cuda_plugin_entry entry;
    *(void **)&entry = dlsym(dl, HX_CUDA_PLUGIN_SYMBOL);
    ck_assert_ptr_nonnull(entry);
    const hx_cuda_plugin *p = entry();
    ck_assert_int_eq(p->abi, HX_CUDA_PLUGIN_ABI);
    int kernels_of[HX_OP_COUNT] = {0};
    for (int k = 0; k < p->nkernels; k++) {
        const hx_cuda_kernel *kr = &p->kernels[k];
        ck_assert_msg(kr->op == hx_op_find(kr->name), "kernel %s carries op %d", kr->name, kr->op);
        ck_assert_ptr_eq(p->kernel_find(kr->name), kr);
        kernels_of[kr->op]++;
    }
    /* Ops the plugin leaves to other devices: a context shift is rare and
     * moves few rows, so it runs on the CPU, by design. */
    const int not_on_cuda[HX_OP_COUNT] = {[HX_OP_KV_SHIFT] = 1};
    for (int op = 0; op < HX_OP_COUNT; op++)
        ck_assert_msg(kernels_of[op] == !not_on_cuda[op], "op %s has %d CUDA kernels", hx_op_codelet((hx_op)op)->name,
                      kernels_of[op]);
    dlclose(dl);
}
END_TEST

START_TEST(default_search_opens_or_explains)
{
    unsetenv("HX_CUDA_PLUGIN");
    hx_status st;
    hx_runtime *rt = open_with("all", &st);
    HX_ASSERT_OK(st);
    if (count_family(rt, HX_FAMILY_CUDA) == 0) {
        const char *why = hx_runtime_absence_reason(rt, HX_FAMILY_CUDA);
        ck_assert_ptr_nonnull(why);
        ck_assert_msg(strstr(why, "libhetero-cuda.so") != NULL, "reason '%s' does not name the plugin", why);
    }
    hx_runtime_close(rt);
}
END_TEST

/* Selecting only the CPU never touches the plugin. */
START_TEST(cpu_only_runtime_records_no_cuda_reason)
{
    setenv("HX_CUDA_PLUGIN", "/nonexistent/libhetero-cuda.so", 1);
    hx_status st;
    hx_runtime *rt = open_with("cpu", &st);
    HX_ASSERT_OK(st);
    ck_assert_ptr_null(hx_runtime_absence_reason(rt, HX_FAMILY_CUDA));
    hx_runtime_close(rt);
    unsetenv("HX_CUDA_PLUGIN");
}
END_TEST

/* ---- conversions -------------------------------------------------------- */

START_TEST(f16_round_trips_every_half)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float f = hx_dq_f16_to_f32((uint16_t)h);
        float r = ref_h2f((uint16_t)h);
        if (isnan(r)) {
            ck_assert(isnan(f));
            uint16_t back = hx_dq_f32_to_f16(f);
            ck_assert_msg((back & 0x7c00) == 0x7c00 && (back & 0x3ff), "NaN %04x came back as %04x", h, back);
            continue;
        }
        ck_assert_msg(memcmp(&f, &r, 4) == 0, "half %04x: %a vs %a", h, f, r);
        ck_assert_uint_eq(hx_dq_f32_to_f16(f), h);
    }
}
END_TEST

START_TEST(f16_rounds_to_nearest_even)
{
    rng_seed(11);
    for (int i = 0; i < 2000000; i++) {
        /* Exponents from far below the subnormals to beyond the range. */
        uint32_t bits = (rng_u32() & 0x80000000u) | ((90 + rng_u32() % 60) << 23) | (rng_u32() & 0x7fffff);
        if (i % 7 == 0) /* exact midpoints and their neighbours */
            bits = (bits & ~0x1fffu) | 0x1000u | (rng_u32() % 3 == 0 ? 1u : 0u);
        float f;
        memcpy(&f, &bits, 4);
        ck_assert_msg(hx_dq_f32_to_f16(f) == ref_f2h(f), "%a: %04x vs %04x", f, hx_dq_f32_to_f16(f), ref_f2h(f));
    }
}
END_TEST

START_TEST(bf16_rounds_to_nearest_even)
{
    rng_seed(12);
    for (int i = 0; i < 1000000; i++) {
        uint32_t bits = rng_u32() ^ (rng_u32() << 16);
        if ((bits & 0x7f800000u) == 0x7f800000u)
            continue;
        float f;
        memcpy(&f, &bits, 4);
        uint32_t lo = bits & 0xffff0000u, hi = lo + 0x10000u;
        float flo, fhi;
        memcpy(&flo, &lo, 4);
        memcpy(&fhi, &hi, 4);
        /* Beyond the largest finite value the next step up is 2^128. */
        double up = hi == 0x7f800000u ? ldexp(1.0, 128) : hi == 0xff800000u ? -ldexp(1.0, 128) : (double)fhi;
        double dl = fabs((double)f - flo), dh = fabs(up - f);
        uint16_t want = (uint16_t)((dl < dh || (dl == dh && !((lo >> 16) & 1))) ? lo >> 16 : hi >> 16);
        ck_assert_msg(hx_dq_f32_to_bf16(f) == want, "%a: %04x vs %04x", f, hx_dq_f32_to_bf16(f), want);
        float back = hx_dq_bf16_to_f32(want), expect = want == (uint16_t)(lo >> 16) ? flo : fhi;
        ck_assert(memcmp(&back, &expect, 4) == 0);
    }
}
END_TEST

/* ---- quantized blocks and tiles ----------------------------------------- */

/* Packs eight 6-bit (scale, min) pairs as GGUF's Q4_K stores them: the
 * first four in the low 6 bits of bytes 0-3 and 4-7, the last four split
 * into a low nibble pair in bytes 8-11 and 2-bit tops in the spare high
 * bits of bytes 0-7. */
static void q4k_pack(const uint8_t sc[8], const uint8_t mn[8], uint8_t s[12])
{
    memset(s, 0, 12);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            s[j] |= sc[j];
            s[j + 4] |= mn[j];
        } else {
            s[j + 4] = (uint8_t)((sc[j] & 0xf) | ((mn[j] & 0xf) << 4));
            s[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
            s[j] |= (uint8_t)((mn[j] >> 4) << 6);
        }
    }
}

/* Random rows of `type` and their scalar decoding, element by element in
 * storage order. */
static void make_rows(uint32_t type, uint32_t N, uint32_t K, uint8_t *W, float *ref)
{
    uint64_t rb = hx_type_row_size((hx_type)type, K);
    for (uint32_t n = 0; n < N; n++) {
        uint8_t *row = W + n * rb;
        float *y = ref + (uint64_t)n * K;
        if (type == HX_TYPE_Q8_0) {
            for (uint32_t b = 0; b < K / 32; b++) {
                uint8_t *blk = row + b * 34;
                uint16_t d = rand_scale();
                blk[0] = (uint8_t)d;
                blk[1] = (uint8_t)(d >> 8);
                for (int j = 0; j < 32; j++) {
                    blk[2 + j] = (uint8_t)rng_u32();
                    y[b * 32 + j] = ref_h2f(d) * (float)(int8_t)blk[2 + j];
                }
            }
        } else if (type == HX_TYPE_Q4_0) {
            for (uint32_t b = 0; b < K / 32; b++) {
                uint8_t *blk = row + b * 18;
                uint16_t d = rand_scale();
                blk[0] = (uint8_t)d;
                blk[1] = (uint8_t)(d >> 8);
                for (int j = 0; j < 16; j++) {
                    uint8_t q = (uint8_t)rng_u32();
                    blk[2 + j] = q;
                    y[b * 32 + j] = ref_h2f(d) * (float)((q & 15) - 8);
                    y[b * 32 + 16 + j] = ref_h2f(d) * (float)((q >> 4) - 8);
                }
            }
        } else { /* Q4_K */
            for (uint32_t b = 0; b < K / 256; b++) {
                uint8_t *blk = row + b * 144;
                uint16_t d = rand_scale() & 0x7fff, dmin = rand_scale() & 0x7fff;
                uint8_t sc[8], mn[8];
                for (int j = 0; j < 8; j++) {
                    sc[j] = (uint8_t)(rng_u32() & 63);
                    mn[j] = (uint8_t)(rng_u32() & 63);
                }
                blk[0] = (uint8_t)d;
                blk[1] = (uint8_t)(d >> 8);
                blk[2] = (uint8_t)dmin;
                blk[3] = (uint8_t)(dmin >> 8);
                q4k_pack(sc, mn, blk + 4);
                uint8_t *qs = blk + 16;
                for (int j = 0; j < 128; j++)
                    qs[j] = (uint8_t)rng_u32();
                float *o = y + b * 256;
                for (int c = 0; c < 4; c++) { /* 64 elements per 32 bytes */
                    float d1 = ref_h2f(d) * sc[2 * c], m1 = ref_h2f(dmin) * mn[2 * c];
                    float d2 = ref_h2f(d) * sc[2 * c + 1], m2 = ref_h2f(dmin) * mn[2 * c + 1];
                    for (int l = 0; l < 32; l++)
                        o[64 * c + l] = d1 * (float)(qs[32 * c + l] & 15) - m1;
                    for (int l = 0; l < 32; l++)
                        o[64 * c + 32 + l] = d2 * (float)(qs[32 * c + l] >> 4) - m2;
                }
            }
        }
    }
}

static void check_tiles(uint32_t type, uint32_t N, uint32_t K)
{
    uint64_t rb = hx_type_row_size((hx_type)type, K);
    ck_assert_uint_eq(hx_dq_row_bytes(type, K), rb);
    uint8_t *W = malloc(N * rb);
    float *ref = malloc(sizeof(float) * N * K);
    make_rows(type, N, K, W, ref);
    /* Every element through the group decoder. */
    for (uint32_t n = 0; n < N; n++)
        for (uint32_t k = 0; k < K; k++) {
            float got = hx_dq_elem(type, W + n * rb, k), want = ref[(uint64_t)n * K + k];
            ck_assert_msg(memcmp(&got, &want, 4) == 0, "%s row %u elem %u: %a vs %a", hx_type_name(type), n, k, got,
                          want);
        }
    /* Tiles at several offsets, with a canary after the last row. */
    const uint32_t starts[] = {0, 1, N / 2, N - 3};
    const uint32_t counts[] = {N, 2, N / 2, 3};
    for (int t = 0; t < 4; t++) {
        uint32_t n0 = starts[t], rows = counts[t];
        uint64_t cells = (uint64_t)rows * K;
        uint16_t *tile = malloc((cells + 64) * 2);
        for (int i = 0; i < 64; i++)
            tile[cells + i] = 0xbeef;
        hx_dq_tile_fill(type, W, K, n0, rows, tile);
        for (uint32_t r = 0; r < rows; r++)
            for (uint32_t k = 0; k < K; k++) {
                uint16_t want = ref_f2h(ref[(uint64_t)(n0 + r) * K + k]);
                ck_assert_msg(tile[(uint64_t)r * K + k] == want, "%s tile at %u row %u elem %u: %04x vs %04x",
                              hx_type_name(type), n0, r, k, tile[(uint64_t)r * K + k], want);
            }
        for (int i = 0; i < 64; i++)
            ck_assert_uint_eq(tile[cells + i], 0xbeef);
        free(tile);
    }
    free(W);
    free(ref);
}

START_TEST(q8_0_tile_is_exact)
{
    rng_seed(21);
    check_tiles(HX_TYPE_Q8_0, 37, 32 * 9);
}
END_TEST

START_TEST(q4_0_tile_is_exact)
{
    rng_seed(22);
    check_tiles(HX_TYPE_Q4_0, 29, 32 * 11);
}
END_TEST

START_TEST(q4_k_tile_is_exact)
{
    rng_seed(23);
    check_tiles(HX_TYPE_Q4_K, 19, 256 * 3);
}
END_TEST

/* Every quantized type against the CPU's scalar dequantization (kernels_cpu/quant),
 * bit for bit: a weight tile on the GPU holds what the CPU computes with. */
static uint32_t f16_field_offsets(uint32_t type, uint32_t off[2])
{
    switch (type) {
    case HX_TYPE_Q4_0:
    case HX_TYPE_Q5_0:
    case HX_TYPE_Q8_0: off[0] = 0; return 1;
    case HX_TYPE_Q4_1:
    case HX_TYPE_Q5_1:
    case HX_TYPE_Q4_K:
    case HX_TYPE_Q5_K: off[0] = 0, off[1] = 2; return 2;
    case HX_TYPE_Q6_K: off[0] = 208; return 1;
    default: return 0;
    }
}

START_TEST(every_quantized_type_matches_the_cpu_decoder)
{
    const uint32_t types[] = {HX_TYPE_Q4_0, HX_TYPE_Q4_1, HX_TYPE_Q5_0, HX_TYPE_Q5_1,
                              HX_TYPE_Q8_0, HX_TYPE_Q4_K, HX_TYPE_Q5_K, HX_TYPE_Q6_K};
    rng_seed(26);
    for (int t = 0; t < 8; t++) {
        uint32_t type = types[t], N = 13, K = 512;
        const hx_quant_ops *q = hx_quant_ops_get_level((hx_type)type, HX_SIMD_SCALAR);
        ck_assert_msg(q && q->dequantize_row, "no CPU decoder for %s", hx_type_name(type));
        ck_assert(hx_dq_is_quantized(type));
        uint64_t rb = hx_dq_row_bytes(type, K), bb = hx_dq_block_bytes(type);
        ck_assert_uint_eq(rb, hx_type_row_size((hx_type)type, K));
        uint8_t *W = malloc(N * rb);
        for (uint64_t i = 0; i < N * rb; i++)
            W[i] = (uint8_t)rng_u32();
        uint32_t off[2], nf = f16_field_offsets(type, off);
        for (uint64_t b = 0; b < N * rb / bb; b++)
            for (uint32_t f = 0; f < nf; f++) {
                uint16_t h = rand_scale();
                memcpy(W + b * bb + off[f], &h, 2);
            }
        float *ref = malloc(sizeof(float) * N * K);
        for (uint32_t n = 0; n < N; n++)
            q->dequantize_row(W + n * rb, ref + (uint64_t)n * K, K);
        uint16_t *tile = malloc((size_t)N * K * 2);
        hx_dq_tile_fill(type, W, K, 0, N, tile);
        for (uint64_t i = 0; i < (uint64_t)N * K; i++) {
            float got = hx_dq_elem(type, W + (i / K) * rb, i % K);
            ck_assert_msg(memcmp(&got, &ref[i], 4) == 0, "%s elem %llu: %a vs %a", hx_type_name(type),
                          (unsigned long long)i, got, ref[i]);
            ck_assert_msg(tile[i] == ref_f2h(ref[i]), "%s tile elem %llu", hx_type_name(type), (unsigned long long)i);
        }
        free(W);
        free(ref);
        free(tile);
    }
}
END_TEST

START_TEST(q4_k_scales_unpack_what_was_packed)
{
    rng_seed(24);
    for (int it = 0; it < 10000; it++) {
        uint8_t sc[8], mn[8], s[12];
        for (int j = 0; j < 8; j++) {
            sc[j] = (uint8_t)(rng_u32() & 63);
            mn[j] = (uint8_t)(rng_u32() & 63);
        }
        q4k_pack(sc, mn, s);
        for (uint32_t j = 0; j < 8; j++) {
            uint32_t a, b;
            hx_dq_q4k_scale_min(s, j, &a, &b);
            ck_assert_uint_eq(a, sc[j]);
            ck_assert_uint_eq(b, mn[j]);
        }
    }
}
END_TEST

START_TEST(plain_types_decode_exactly)
{
    rng_seed(25);
    const uint32_t K = 70;
    float src[70];
    uint8_t f32[280], f16[140], bf16[140];
    for (uint32_t k = 0; k < K; k++) {
        src[k] = rng_float() * 100.0f;
        memcpy(f32 + 4 * k, &src[k], 4);
        uint16_t h = ref_f2h(src[k]), b = hx_dq_f32_to_bf16(src[k]);
        memcpy(f16 + 2 * k, &h, 2);
        memcpy(bf16 + 2 * k, &b, 2);
    }
    for (uint32_t k = 0; k < K; k++) {
        ck_assert_float_eq(hx_dq_elem(HX_TYPE_F32, f32, k), src[k]);
        uint16_t h, b;
        memcpy(&h, f16 + 2 * k, 2);
        memcpy(&b, bf16 + 2 * k, 2);
        ck_assert_float_eq(hx_dq_elem(HX_TYPE_F16, f16, k), ref_h2f(h));
        uint32_t bits = (uint32_t)b << 16;
        float bv;
        memcpy(&bv, &bits, 4);
        ck_assert_float_eq(hx_dq_elem(HX_TYPE_BF16, bf16, k), bv);
    }
}
END_TEST

START_TEST(row_sizes_agree_with_the_type_table)
{
    const uint32_t types[] = {HX_TYPE_F32,  HX_TYPE_F16,  HX_TYPE_BF16, HX_TYPE_Q8_0, HX_TYPE_Q4_0, HX_TYPE_Q4_1,
                              HX_TYPE_Q5_0, HX_TYPE_Q5_1, HX_TYPE_Q4_K, HX_TYPE_Q5_K, HX_TYPE_Q6_K};
    const uint64_t ks[] = {1, 31, 32, 64, 255, 256, 4096, 11008};
    for (int t = 0; t < 11; t++) {
        ck_assert(hx_dq_supported(types[t]));
        for (int k = 0; k < 8; k++)
            ck_assert_uint_eq(hx_dq_row_bytes(types[t], ks[k]), hx_type_row_size((hx_type)types[t], ks[k]));
    }
    /* Every type the CPU computes with is supported but the low-bit ones, nothing else. */
    for (uint32_t t = 0; t < HX_TYPE_COUNT; t++) {
        const hx_type_traits *tr = hx_type_get(t);
        int cpu = tr && tr->computable && t != HX_TYPE_Q8_1 && t != HX_TYPE_Q8_K;
        /* the low-bit types have CPU kernels only: the scheduler keeps them there */
        int cpu_only = t == HX_TYPE_Q2_K || t == HX_TYPE_Q3_K || t == HX_TYPE_IQ4_NL || t == HX_TYPE_IQ4_XS;
        ck_assert_msg(hx_dq_supported(t) == (cpu && !cpu_only), "type %u (%s)", t, hx_type_name(t));
    }
    ck_assert_uint_eq(hx_dq_row_bytes(HX_TYPE_Q2_K, 256), 0);
    ck_assert_uint_eq(hx_dq_row_bytes(HX_TYPE_Q8_0, 0), 0);
}
END_TEST

START_TEST(tile_rows_fit_the_budget)
{
    const uint32_t Ns[] = {1, 100, 4096, 32000, 152064};
    const uint32_t Ks[] = {32, 4096, 14336, 1u << 24};
    const uint64_t budget = 64u << 20;
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 4; j++) {
            uint32_t r = hx_dq_tile_rows(Ns[i], Ks[j], budget);
            ck_assert_uint_ge(r, 1);
            ck_assert_uint_le(r, Ns[i]);
            if (r > 1)
                ck_assert_uint_le((uint64_t)r * Ks[j] * 2, budget);
            if (r < Ns[i] && r >= 128)
                ck_assert_uint_eq(r % 128, 0);
        }
}
END_TEST

/* ---- argument checks ---------------------------------------------------- */

START_TEST(matmul_check_refuses_short_buffers)
{
    char msg[256];
    hx_op_matmul a = {.wtype = HX_TYPE_Q4_K, .T = 3, .N = 10, .K = 512, .has_bias = 1};
    size_t s[4] = {10 * 288, 3 * 512 * 4, 3 * 10 * 4, 10 * 4};
    ck_assert_int_eq(hx_oc_matmul(&a, s, 4, msg, sizeof msg), 0);
    for (int i = 0; i < 4; i++) {
        s[i]--;
        ck_assert_int_eq(hx_oc_matmul(&a, s, 4, msg, sizeof msg), 1);
        ck_assert_ptr_nonnull(strstr(msg, "matmul"));
        s[i]++;
    }
    ck_assert_int_eq(hx_oc_matmul(&a, s, 3, msg, sizeof msg), 1); /* bias missing */
    a.K = 500;                                                     /* not whole super-blocks */
    ck_assert_int_eq(hx_oc_matmul(&a, s, 4, msg, sizeof msg), 1);
    a.K = 512;
    a.wtype = HX_TYPE_Q3_K;
    ck_assert_int_eq(hx_oc_matmul(&a, s, 4, msg, sizeof msg), 1);
    hx_op_matmul big = {.wtype = HX_TYPE_F32, .T = 0x7fffffff, .N = 0x7fffffff, .K = 0x7fffffff};
    ck_assert_int_eq(hx_oc_matmul(&big, s, 3, msg, sizeof msg), 1);
    big.T = 0x80000000u; /* cuBLAS takes int dimensions */
    size_t huge[3] = {SIZE_MAX, SIZE_MAX, SIZE_MAX};
    ck_assert_int_eq(hx_oc_matmul(&big, huge, 3, msg, sizeof msg), 1);
    /* T * H * Dh * 4 does not fit 64 bits: refused, not wrapped. */
    hx_op_rope r = {.T = 0x7fffffff, .H = 0x7fffffff, .Dh = 0x7fffffff, .n_rot = 2, .freq_base = 1e4f,
                    .freq_scale = 1.0f};
    ck_assert_int_eq(hx_oc_rope(&r, huge, 2, msg, sizeof msg), 1);
}
END_TEST

START_TEST(kv_checks_refuse_bad_layouts)
{
    char msg[256];
    uint64_t slots = 0;
    hx_op_attention a = {.kv = {.T = 4, .S = 2, .max_blocks = 3, .block_size = 16},
                         .Hq = 8, .Hkv = 2, .Dh = 64, .kv_type = HX_TYPE_F16, .scale = 0.125f, .v_type = HX_TYPE_F16};
    size_t row = 2 * 64 * 2, s[5] = {4 * 8 * 64 * 4, 100 * row, 100 * row, (3 * 4 + 2 * 3) * 4, 4 * 8 * 64 * 4};
    ck_assert_int_eq(hx_oc_attention(&a, s, 5, &slots, msg, sizeof msg), 0);
    ck_assert_uint_eq(slots, 100);
    s[2] = 50 * row + 7; /* the smaller cache bounds the slots */
    ck_assert_int_eq(hx_oc_attention(&a, s, 5, &slots, msg, sizeof msg), 0);
    ck_assert_uint_eq(slots, 50);
    s[3]--;
    ck_assert_int_eq(hx_oc_attention(&a, s, 5, &slots, msg, sizeof msg), 1);
    s[3]++;
    a.Hq = 7;
    ck_assert_int_eq(hx_oc_attention(&a, s, 5, &slots, msg, sizeof msg), 1);
    a.Hq = 8;
    a.Dh = 512;
    ck_assert_int_eq(hx_oc_attention(&a, s, 5, &slots, msg, sizeof msg), 1);
    a.Dh = 80;
    a.kv_type = a.v_type = HX_TYPE_Q8_0; /* 80 is not whole Q8_0 blocks */
    ck_assert_int_eq(hx_oc_attention(&a, s, 5, &slots, msg, sizeof msg), 1);
    a.kv_type = a.v_type = HX_TYPE_Q4_0;
    ck_assert_int_eq(hx_oc_attention(&a, s, 5, &slots, msg, sizeof msg), 1);
    a.Dh = 64;
    a.kv_type = a.v_type = HX_TYPE_F16;
    ck_assert_int_eq(hx_oc_attention(&a, s, 5, &slots, msg, sizeof msg), 0);
    a.v_type = HX_TYPE_F32; /* K and V of different types */
    ck_assert_int_eq(hx_oc_attention(&a, s, 5, &slots, msg, sizeof msg), 1);
    ck_assert_msg(strstr(msg, "different types"), "%s", msg);

    hx_op_kv_store k = {.kv = {.T = 4, .S = 1, .max_blocks = 1, .block_size = 0}, .Hkv = 2, .Dh = 64,
                        .kv_type = HX_TYPE_F16, .v_type = HX_TYPE_F16};
    size_t ks[5] = {4 * 128 * 4, 4 * 128 * 4, 10 * row, 10 * row, 13 * 4};
    ck_assert_int_eq(hx_oc_kv_store(&k, ks, 5, &slots, msg, sizeof msg), 1); /* block_size 0 */
    k.kv.block_size = 16;
    ck_assert_int_eq(hx_oc_kv_store(&k, ks, 5, &slots, msg, sizeof msg), 0);
    ks[0]--;
    ck_assert_int_eq(hx_oc_kv_store(&k, ks, 5, &slots, msg, sizeof msg), 1);
}
END_TEST

START_TEST(small_op_checks)
{
    char msg[256];
    uint64_t rows;
    hx_op_get_rows g = {.type = HX_TYPE_Q8_0, .T = 5, .D = 64};
    size_t gs[3] = {7 * 68 + 3, 5 * 4, 5 * 64 * 4};
    ck_assert_int_eq(hx_oc_get_rows(&g, gs, 3, &rows, msg, sizeof msg), 0);
    ck_assert_uint_eq(rows, 7);
    g.D = 48;
    ck_assert_int_eq(hx_oc_get_rows(&g, gs, 3, &rows, msg, sizeof msg), 1);

    hx_op_rope r = {.T = 2, .H = 4, .Dh = 64, .n_rot = 64, .freq_base = 10000.0f, .freq_scale = 1.0f};
    size_t rs[2] = {2 * 4 * 64 * 4, 8};
    ck_assert_int_eq(hx_oc_rope(&r, rs, 2, msg, sizeof msg), 0);
    r.n_rot = 65;
    ck_assert_int_eq(hx_oc_rope(&r, rs, 2, msg, sizeof msg), 1);
    r.n_rot = 66;
    ck_assert_int_eq(hx_oc_rope(&r, rs, 2, msg, sizeof msg), 1);
    /* Llama 3.1's factors: a third buffer of n_rot/2 floats. */
    r.n_rot = 64;
    r.has_factors = 1;
    size_t rf[3] = {2 * 4 * 64 * 4, 8, 32 * 4};
    ck_assert_int_eq(hx_oc_rope(&r, rf, 3, msg, sizeof msg), 0);
    ck_assert_int_eq(hx_oc_rope(&r, rf, 2, msg, sizeof msg), 1);
    rf[2] = 31 * 4;
    ck_assert_int_eq(hx_oc_rope(&r, rf, 3, msg, sizeof msg), 1);
    ck_assert_ptr_nonnull(strstr(msg, "factors"));
    r.has_factors = 2;
    ck_assert_int_eq(hx_oc_rope(&r, rf, 3, msg, sizeof msg), 1);

    hx_op_rmsnorm nm = {.T = 3, .D = 10, .eps = 1e-5f};
    size_t ns[3] = {120, 40, 120};
    ck_assert_int_eq(hx_oc_rmsnorm(&nm, ns, 3, msg, sizeof msg), 0);
    nm.eps = -1.0f;
    ck_assert_int_eq(hx_oc_rmsnorm(&nm, ns, 3, msg, sizeof msg), 1);

    hx_op_add ad = {.n = 10};
    size_t as[2] = {40, 36};
    ck_assert_int_eq(hx_oc_add(&ad, as, 2, msg, sizeof msg), 1);
    hx_op_swiglu sw = {.n = 10};
    size_t ss[3] = {40, 40, 40};
    ck_assert_int_eq(hx_oc_swiglu(&sw, ss, 3, msg, sizeof msg), 0);
    ck_assert_int_eq(hx_oc_swiglu(&sw, ss, 2, msg, sizeof msg), 1);
}
END_TEST

START_TEST(coverage_follows_types_and_head_size)
{
    hx_op_matmul mm = {.wtype = HX_TYPE_Q6_K, .T = 1, .N = 1, .K = 256};
    ck_assert(hx_oc_covers_matmul(&mm));
    mm.wtype = HX_TYPE_IQ2_XXS;
    ck_assert(!hx_oc_covers_matmul(&mm));
    hx_op_get_rows gr = {.type = HX_TYPE_Q5_K, .T = 1, .D = 256};
    ck_assert(hx_oc_covers_get_rows(&gr));
    gr.type = HX_TYPE_Q2_K;
    ck_assert(!hx_oc_covers_get_rows(&gr));
    hx_op_attention at = {.Hq = 4, .Hkv = 2, .Dh = 128, .kv_type = HX_TYPE_Q8_0, .v_type = HX_TYPE_Q8_0};
    ck_assert(hx_oc_covers_attention(&at));
    at.rot_k = 128; /* rotated keys: the CPU's */
    ck_assert(!hx_oc_covers_attention(&at));
    at.rot_k = 0;
    at.v_type = HX_TYPE_F16; /* K and V of different types: the CPU's */
    ck_assert(!hx_oc_covers_attention(&at));
    at.Dh = 80; /* Q8_0 blocks would straddle heads */
    ck_assert(!hx_oc_covers_attention(&at));
    at.kv_type = HX_TYPE_F16;
    ck_assert(hx_oc_covers_attention(&at));
    at.Dh = 512;
    ck_assert(!hx_oc_covers_attention(&at));
    at.Dh = 128;
    at.kv_type = at.v_type = HX_TYPE_Q4_0;
    ck_assert(!hx_oc_covers_attention(&at));
    hx_op_kv_store ks = {.Hkv = 2, .Dh = 512, .kv_type = HX_TYPE_F32, .v_type = HX_TYPE_F32};
    ck_assert(hx_oc_covers_kv_store(&ks)); /* storing has no head-size limit */
    ks.rot_v = 64;
    ck_assert(!hx_oc_covers_kv_store(&ks));
    ks.rot_v = 0;
    ks.kv_type = HX_TYPE_Q4_0;
    ck_assert(!hx_oc_covers_kv_store(&ks));
}
END_TEST

/* ---- the experts' two lanes ---------------------------------------- */

/* The experts' two lanes on a GPU (tests/expert_split.h), with this
 * build's plugin: the GPU's memory given room for half of qwen3moe-tiny,
 * the CPU slowed 30x, under plan: layers on the GPU with the groups that
 * do not fit computed by the CPU beside them, and the CPU alone's logits
 * at every decode step.  Without a GPU it says so in one line, which
 * bench/gpu-check fails on; the plugin's host emulation has no expert
 * kernels, so it cannot stand in. */
START_TEST(experts_split_between_the_cpu_and_the_gpu_give_the_cpus_logits)
{
    char path[512];
    snprintf(path, sizeof path, "%s/libhetero-cuda.so", hx_test_build_dir());
    setenv("HX_CUDA_PLUGIN", path, 1);
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = "cpu,cuda";
    o.cpu_threads = 2;
    o.sched = "plan";
    o.perfmodel_dir = "off";
    o.inject = "";
    o.trace = "";
    hx_runtime *rt = NULL;
    if (access(path, R_OK) || hx_runtime_open(&rt, &o) != HX_OK) {
        printf("cuda: CUDA absent: the experts' lanes on a GPU not checked (%s)\n",
               access(path, R_OK) ? "no plugin built" : hx_last_error());
        return;
    }
    int gpu = -1;
    for (int d = 0; d < hx_runtime_device_count(rt) && gpu < 0; d++) {
        hx_device_info info;
        HX_ASSERT_OK(hx_runtime_device_info(rt, d, &info));
        if (info.family == HX_FAMILY_CUDA)
            gpu = d;
    }
    ck_assert_int_ge(gpu, 0);
    hx_expert_split r;
    hx_expert_split_run(rt, gpu, 30, &r);
    HX_ASSERT_OK(hx_runtime_close(rt));
    printf("cuda: qwen3moe-tiny under plan on the CPU (slowed 30x) and the GPU, its memory for half the file: %d "
           "layers' groups on both devices, %llu tasks on the CPU, %llu on the GPU; decode logits nmse at most %.3g\n",
           r.split, (unsigned long long)r.cpu_tasks, (unsigned long long)r.other_tasks, r.worst_nmse);
    ck_assert_msg(r.split > 0, "no layer's expert groups were split between the CPU and the GPU");
    ck_assert_msg(r.worst_nmse <= 1e-6, "decode logits nmse %g", r.worst_nmse);
}
END_TEST

Suite *suite_cuda(void)
{
    Suite *s = suite_create("cuda");
    TCase *load = tcase_create("load");
    tcase_set_timeout(load, 60);
    tcase_add_test(load, absent_when_the_plugin_file_is_missing);
    tcase_add_test(load, absent_when_the_library_is_not_a_plugin);
    tcase_add_test(load, absent_when_the_file_is_not_a_library);
    tcase_add_test(load, real_plugin_finds_gpus_or_names_the_cuda_error);
    tcase_add_test(load, plugin_kernels_carry_their_op_ids);
    tcase_add_test(load, default_search_opens_or_explains);
    tcase_add_test(load, cpu_only_runtime_records_no_cuda_reason);
    suite_add_tcase(s, load);
    TCase *tiles = tcase_create("tiles");
    tcase_set_timeout(tiles, 60);
    tcase_add_test(tiles, f16_round_trips_every_half);
    tcase_add_test(tiles, f16_rounds_to_nearest_even);
    tcase_add_test(tiles, bf16_rounds_to_nearest_even);
    tcase_add_test(tiles, q8_0_tile_is_exact);
    tcase_add_test(tiles, q4_0_tile_is_exact);
    tcase_add_test(tiles, q4_k_tile_is_exact);
    tcase_add_test(tiles, every_quantized_type_matches_the_cpu_decoder);
    tcase_add_test(tiles, q4_k_scales_unpack_what_was_packed);
    tcase_add_test(tiles, plain_types_decode_exactly);
    tcase_add_test(tiles, row_sizes_agree_with_the_type_table);
    tcase_add_test(tiles, tile_rows_fit_the_budget);
    suite_add_tcase(s, tiles);
    TCase *checks = tcase_create("checks");
    tcase_add_test(checks, matmul_check_refuses_short_buffers);
    tcase_add_test(checks, kv_checks_refuse_bad_layouts);
    tcase_add_test(checks, small_op_checks);
    tcase_add_test(checks, coverage_follows_types_and_head_size);
    suite_add_tcase(s, checks);
    TCase *lanes = tcase_create("lanes");
    tcase_set_timeout(lanes, 300);
    tcase_add_test(lanes, experts_split_between_the_cpu_and_the_gpu_give_the_cpus_logits);
    suite_add_tcase(s, lanes);
    return s;
}
