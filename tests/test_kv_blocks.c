/* KV blocks as the unit of residence on real OpenCL: PoCL standing in
 * for an FPGA with memory of its own runs attention on the KV blocks it
 * brings over one by one, and the logits equal those of the whole-buffer
 * run (PoCL in host memory) bit for bit.  What crosses is counted in the
 * simulator's suite (tests/test_sim.c).  And the CPU half of attention
 * over blocks in two places: attention split over parts of the positions,
 * merged with one rescale, against the float64 reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/model.h"
#include "kernels_cpu/attn_merge.h"
#include "quantize/synthetic.h"
#include "runtime/block_space.h"
#include "runtime/runtime.h"
#include "tests/cl_test.h"

static hx_runtime_stats stats_now(hx_runtime *rt)
{
    hx_runtime_stats st;
    hx_runtime_stats_get(rt, &st);
    return st;
}

/* PoCL as an FPGA with memory of its own (what a card would have): the
 * device moves to a node of its own before anything uses it. */
static hx_runtime *open_pocl_discrete(int *fpga)
{
    hx_runtime *rt = hx_cl_test_open("cpu,fpga", 1);
    *fpga = hx_cl_test_device(rt);
    hx_device_info *info = &rt->devices[*fpga]->info;
    info->unified_memory = 0;
    info->memory_node = rt->n_memory_nodes++;
    return rt;
}

enum { N_PROMPT = 37, N_GEN = 6, MAXV = 4096 };

static const hx_synthetic_config cfg = {"blocks", 128, 2, 4, 2, 256, 512, "llama", 0};

/* Every layer's K and V cache acquired by the host: HX_RW makes them the
 * host's alone, HX_R valid there as well as where they were. */
static void host_acquires_caches(hx_model *m, hx_access mode)
{
    for (uint32_t l = 0; l < m->kv->n_layer; l++) {
        void *host;
        HX_ASSERT_OK(hx_buffer_acquire(m->kv->k[l], mode, &host));
        HX_ASSERT_OK(hx_buffer_acquire(m->kv->v[l], mode, &host));
    }
}

/* The last run's KV storage on the devices with memory of their own,
 * read before its model went, and the pool's whole size. */
static struct {
    uint64_t allocated, named, pool;
    uint32_t moved_slots; /* blocks whose slot on a device is not their id */
} kv_storage;

static void note_kv_storage(hx_runtime *rt, const hx_model *m)
{
    kv_storage.allocated = kv_storage.named = 0;
    kv_storage.moved_slots = 0;
    for (int d = 0; d < rt->ndevices; d++) {
        hx_device_stats ds;
        HX_ASSERT_OK(hx_device_stats_get(rt, d, &ds));
        kv_storage.allocated += ds.kv_bytes_allocated;
        kv_storage.named += ds.kv_bytes_named;
        for (uint32_t b = 0; b < m->kv->n_blocks; b++) {
            uint32_t slot = hx_block_space_slot(m->kv->space, d, b);
            kv_storage.moved_slots += slot != HX_SLOT_NONE && slot != b;
        }
    }
    kv_storage.pool = 2ull * m->kv->n_layer * m->kv->n_blocks * m->kv->block_bytes;
}

/* Logits of a prompt and a few decode steps; with `evict`, before each
 * step every layer's cache is made the host's alone, so that attention on
 * a device with its own memory brings the blocks it reads back. */
static void run_model_split(hx_runtime *rt, const char *file, int evict, uint32_t split, float *logits,
                            uint64_t *kv_moved)
{
    hx_model_options mo = hx_model_options_default();
    mo.kv_split = split;
    mo.kv_prefix_cache = -1;
    mo.n_ctx = 1024; /* 64 blocks, of which a run uses 4 */
    hx_model *m;
    HX_ASSERT_OK(hx_model_load(rt, file, &mo, &m));
    hx_session *s;
    int32_t ids[N_PROMPT + N_GEN];
    for (int i = 0; i < N_PROMPT + N_GEN; i++)
        ids[i] = (int32_t)((i * 37 + 11) % 250);
    /* A session before, gone: its blocks' slots are freed and handed to
     * the next session's blocks in another order, so that a device with
     * memory of its own holds blocks at slots other than their ids. */
    HX_ASSERT_OK(hx_session_open(m, &s));
    HX_ASSERT_OK(hx_session_eval(s, ids + 5, 20, 0));
    hx_session_close(s);
    HX_ASSERT_OK(hx_session_open(m, &s));
    HX_ASSERT_OK(hx_session_eval(s, ids, N_PROMPT, 0));
    const uint32_t V = m->info.n_vocab;
    ck_assert_uint_le(V, MAXV);
    memcpy(logits, hx_session_logits(s, -1), V * sizeof *logits);
    *kv_moved = 0;
    for (int i = 0; i < N_GEN; i++) {
        if (evict)
            host_acquires_caches(m, HX_RW);
        hx_runtime_stats_reset(rt);
        HX_ASSERT_OK(hx_session_eval(s, ids + N_PROMPT + i, 1, 0));
        *kv_moved += stats_now(rt).bytes_copied;
        memcpy(logits + (size_t)(i + 1) * MAXV, hx_session_logits(s, -1), V * sizeof *logits);
    }
    /* A fork writing into the block it shares copies that block on the
     * host (the device holds the only valid copy): the same token in both
     * sessions gives the same logits. */
    hx_session *f;
    HX_ASSERT_OK(hx_session_fork(s, &f));
    int32_t next = 42;
    HX_ASSERT_OK(hx_session_eval(f, &next, 1, 0));
    HX_ASSERT_OK(hx_session_eval(s, &next, 1, 0));
    ck_assert_msg(memcmp(hx_session_logits(f, -1), hx_session_logits(s, -1), V * sizeof *logits) == 0,
                  "a fork's logits differ after its shared block was copied");
    hx_session_close(f);
    hx_session_close(s);
    note_kv_storage(rt, m);
    hx_model_free(m);
}

static void run_model(hx_runtime *rt, const char *file, int evict, float *logits, uint64_t *kv_moved)
{
    run_model_split(rt, file, evict, 0, logits, kv_moved);
}

START_TEST(pocl_attention_on_blocks_gives_the_same_logits)
{
    char dir[64], file[128];
    snprintf(dir, sizeof dir, "/tmp/hx-blocks-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(file, sizeof file, "%s/m.gguf", dir);
    HX_ASSERT_OK(hx_synthetic_write(file, &cfg, "f16", 7));
    const size_t n = (size_t)(N_GEN + 1) * MAXV;
    float *unified = calloc(n, sizeof(float)), *own = calloc(n, sizeof(float)), *evicted = calloc(n, sizeof(float));
    uint64_t moved_unified, moved_own, moved_evicted;

    int fpga;
    hx_runtime *rt = hx_cl_test_open("cpu,fpga", 1);
    fpga = hx_cl_test_device(rt);
    run_model(rt, file, 0, unified, &moved_unified);
    hx_device_stats ds;
    HX_ASSERT_OK(hx_device_stats_get(rt, fpga, &ds));
    ck_assert_msg(ds.tasks > 0, "attention never ran on the emulated FPGA");
    hx_runtime_close(rt);

    ck_assert_uint_eq(kv_storage.allocated, 0); /* PoCL in host memory stores nothing of its own */

    rt = open_pocl_discrete(&fpga);
    run_model(rt, file, 0, own, &moved_own);
    HX_ASSERT_OK(hx_device_stats_get(rt, fpga, &ds));
    ck_assert_msg(ds.tasks > 0, "attention never ran on the emulated FPGA");
    hx_runtime_close(rt);
    /* The FPGA stores the blocks it was asked for, in slots (the first
     * allocation's 8), not the pool: the kernels read them through the
     * block tables translated to those slots, and the logits are the
     * same bits. */
    const uint64_t slot_bytes = kv_storage.pool / 64;
    ck_assert_msg(kv_storage.named == 4 * slot_bytes && kv_storage.allocated == 8 * slot_bytes,
                  "KV on the FPGA: %llu bytes named, %llu allocated, of a pool of %llu",
                  (unsigned long long)kv_storage.named, (unsigned long long)kv_storage.allocated,
                  (unsigned long long)kv_storage.pool);
    ck_assert_msg(kv_storage.moved_slots > 0, "every block at the slot of its id: the translation went untested");

    rt = open_pocl_discrete(&fpga);
    run_model(rt, file, 1, evicted, &moved_evicted);
    hx_runtime_close(rt);

    ck_assert_msg(memcmp(unified, own, n * sizeof(float)) == 0, "logits differ with the FPGA's own memory");
    ck_assert_msg(memcmp(unified, evicted, n * sizeof(float)) == 0, "logits differ when blocks come back");
    /* Each step after an eviction brings back the blocks read (3 of 16
     * tokens, K and V, 2 layers), far less than the caches. */
    const uint64_t block = 16ull * 2 * 32 * 2; /* tokens x KV heads x head size x f16 */
    ck_assert_msg(moved_evicted - moved_own == (uint64_t)N_GEN * 3 * 2 * 2 * block,
                  "%llu bytes moved after evictions, %llu without", (unsigned long long)moved_evicted,
                  (unsigned long long)moved_own);
    free(unified);
    free(own);
    free(evicted);
    unlink(file);
    rmdir(dir);
}
END_TEST

/* Relative L2 distance of two runs' logits (N_GEN + 1 rows of V). */
static double logits_rel_l2(const float *a, const float *b, uint32_t V)
{
    double err = 0, norm = 0;
    for (int r = 0; r <= N_GEN; r++)
        for (uint32_t i = 0; i < V; i++) {
            double d = (double)a[(size_t)r * MAXV + i] - b[(size_t)r * MAXV + i];
            err += d * d;
            norm += (double)b[(size_t)r * MAXV + i] * b[(size_t)r * MAXV + i];
        }
    return sqrt(err / norm);
}

/* Attention split by blocks (hx_model_options.kv_split = 16): the blocks
 * before each token's last 16 positions attended on the CPU from host
 * memory, the recent ones on PoCL as an FPGA with memory of its own, the
 * parts merged there.  The logits stay those of the unsplit run within
 * the rounding of the two devices' kernels (the CPU's rounds the query
 * to the F16 of the keys, PoCL's does not), and after the caches are
 * made the host's alone, each step brings back only the device's
 * blocks: 2 of the 3 a step reads, K and V, 2 layers. */
START_TEST(split_attention_between_cpu_and_pocl_gives_the_same_logits)
{
    char dir[64], file[128];
    snprintf(dir, sizeof dir, "/tmp/hx-split-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(file, sizeof file, "%s/m.gguf", dir);
    HX_ASSERT_OK(hx_synthetic_write(file, &cfg, "f16", 7));
    const size_t n = (size_t)(N_GEN + 1) * MAXV;
    float *whole = calloc(n, sizeof(float)), *split = calloc(n, sizeof(float)), *evicted = calloc(n, sizeof(float));
    uint64_t moved_whole, moved_split, moved_evicted;
    int fpga;
    hx_runtime *rt = open_pocl_discrete(&fpga);
    run_model(rt, file, 0, whole, &moved_whole);
    hx_runtime_close(rt);

    rt = open_pocl_discrete(&fpga);
    run_model_split(rt, file, 0, 16, split, &moved_split);
    hx_device_stats dev;
    HX_ASSERT_OK(hx_device_stats_get(rt, fpga, &dev));
    ck_assert_msg(dev.tasks > 0, "attention never ran on the emulated FPGA");
    hx_runtime_close(rt);

    rt = open_pocl_discrete(&fpga);
    run_model_split(rt, file, 1, 16, evicted, &moved_evicted);
    hx_runtime_close(rt);

    double e = logits_rel_l2(split, whole, MAXV); /* rows past the vocabulary are zeros */
    printf("kv_blocks: split attention (CPU + PoCL) against whole (PoCL): logits relative L2 %.3g\n", e);
    ck_assert_msg(e > 0 && e < 1e-3, "split against whole: relative L2 %g", e);
    ck_assert_msg(memcmp(split, evicted, n * sizeof(float)) == 0, "split logits differ when blocks come back");
    const uint64_t block = 16ull * 2 * 32 * 2; /* tokens x KV heads x head size x f16 */
    ck_assert_msg(moved_evicted - moved_split == (uint64_t)N_GEN * 2 * 2 * 2 * block,
                  "%llu bytes moved after evictions, %llu without", (unsigned long long)moved_evicted,
                  (unsigned long long)moved_split);
    free(whole);
    free(split);
    free(evicted);
    unlink(file);
    rmdir(dir);
}
END_TEST

/* Logits of a long decode (a 37-token prompt, then 40 tokens one at a
 * time: 5 blocks) with attention (split at `split`, or whole) on PoCL
 * given memory of its own, the device holding at most `bound` bytes of
 * the cache (0: no bound); with `host_reads`, every layer's cache read by
 * the host before each step (its blocks then valid in both places, so
 * the device may evict them).  *evictions: the blocks the device gave
 * up, *allocated: its KV storage. */
enum { LONG_GEN = 40 };
static void run_long_decode(const char *file, uint64_t bound, uint32_t split, int host_reads, float *logits,
                            uint64_t *evictions, uint64_t *allocated, uint64_t *slot_bytes)
{
    int fpga;
    hx_runtime *rt = open_pocl_discrete(&fpga);
    hx_model_options mo = hx_model_options_default();
    mo.kv_split = split;
    mo.kv_prefix_cache = -1;
    mo.n_ctx = 1024;
    mo.kv_device_bytes = bound;
    hx_model *m;
    HX_ASSERT_OK(hx_model_load(rt, file, &mo, &m));
    hx_session *s;
    HX_ASSERT_OK(hx_session_open(m, &s));
    int32_t ids[N_PROMPT + LONG_GEN];
    for (int i = 0; i < N_PROMPT + LONG_GEN; i++)
        ids[i] = (int32_t)((i * 37 + 11) % 250);
    HX_ASSERT_OK(hx_session_eval(s, ids, N_PROMPT, 0));
    const uint32_t V = m->info.n_vocab;
    for (int i = 0; i < LONG_GEN; i++) {
        if (host_reads)
            host_acquires_caches(m, HX_R);
        HX_ASSERT_OK(hx_session_eval(s, ids + N_PROMPT + i, 1, 0));
        memcpy(logits + (size_t)i * MAXV, hx_session_logits(s, -1), V * sizeof *logits);
    }
    hx_model_stats ms;
    HX_ASSERT_OK(hx_model_stats_get(m, &ms));
    *evictions = ms.kv_device_evictions;
    hx_device_stats ds;
    HX_ASSERT_OK(hx_device_stats_get(rt, fpga, &ds));
    ck_assert_msg(ds.tasks > 0, "attention never ran on the emulated FPGA");
    *allocated = ds.kv_bytes_allocated;
    *slot_bytes = 2ull * m->kv->n_layer * m->kv->block_bytes;
    hx_session_close(s);
    hx_model_free(m);
    hx_runtime_close(rt);
}

/* A device held to 2 blocks of the cache (hx_model_options.kv_device_bytes):
 * with split attention it reads the recent blocks only, so as the
 * context grows past what it holds, the blocks the host holds too give up
 * their room, least recently named first.  With whole attention and the
 * host reading the caches before each step, evicted blocks are read again
 * there and must come back (their old copies went with their slots,
 * though both places held them).
 * Either way the logits are those of the unbounded run, bit for bit. */
START_TEST(a_bounded_device_evicts_blocks_with_the_same_logits)
{
    char dir[64], file[128];
    snprintf(dir, sizeof dir, "/tmp/hx-bound-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(file, sizeof file, "%s/m.gguf", dir);
    HX_ASSERT_OK(hx_synthetic_write(file, &cfg, "f16", 7));
    const size_t n = (size_t)LONG_GEN * MAXV;
    float *free_run = calloc(n, sizeof(float)), *bounded = calloc(n, sizeof(float));
    for (int whole = 0; whole <= 1; whole++) {
        uint64_t ev_free, ev_bounded, alloc_free, alloc_bounded, slot;
        const uint32_t split = whole ? 0 : 16;
        run_long_decode(file, 0, split, whole, free_run, &ev_free, &alloc_free, &slot);
        run_long_decode(file, 2 * slot, split, whole, bounded, &ev_bounded, &alloc_bounded, &slot);
        printf("kv_blocks: 77 tokens, %s on PoCL with memory of its own: unbounded %llu blocks stored, "
               "0 evicted; bounded to 2: %llu stored, %llu evicted\n",
               whole ? "whole attention, the host reading the caches" : "split at 16",
               (unsigned long long)(alloc_free / slot), (unsigned long long)(alloc_bounded / slot),
               (unsigned long long)ev_bounded);
        ck_assert_uint_eq(ev_free, 0);
        ck_assert_uint_eq(alloc_free, 8 * slot);
        ck_assert_msg(ev_bounded > 0, "no block was evicted");
        /* Split, the prompt's evaluation reads its 3 blocks at once: more
         * than the bound, so that many and no more; whole, each step reads
         * every block. */
        ck_assert_uint_eq(alloc_bounded, (whole ? 5 : 3) * slot);
        ck_assert_msg(memcmp(free_run, bounded, n * sizeof(float)) == 0, "%s: logits differ with the device bounded",
                      whole ? "whole" : "split");
    }
    free(free_run);
    free(bounded);
    unlink(file);
    rmdir(dir);
}
END_TEST

/* HX_KV_DEVICE_MB: a number of MiB, else the model is refused. */
START_TEST(kv_device_mb_is_a_number_of_mib)
{
    char dir[64], file[128];
    snprintf(dir, sizeof dir, "/tmp/hx-kvmb-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(file, sizeof file, "%s/m.gguf", dir);
    HX_ASSERT_OK(hx_synthetic_write(file, &cfg, "f16", 7));
    hx_runtime_options ro = hx_runtime_options_default();
    ro.devices = "cpu";
    hx_runtime *rt;
    HX_ASSERT_OK(hx_runtime_open(&rt, &ro));
    hx_model *m;
    const char *bad[] = {"x", "0", "-1", "12MB"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv("HX_KV_DEVICE_MB", bad[i], 1);
        ck_assert_int_eq(hx_model_load(rt, file, NULL, &m), HX_ERR_INVALID_ARG);
    }
    setenv("HX_KV_DEVICE_MB", "64", 1);
    HX_ASSERT_OK(hx_model_load(rt, file, NULL, &m));
    ck_assert_uint_eq(m->opts.kv_device_bytes, 64ull << 20);
    hx_model_free(m);
    unsetenv("HX_KV_DEVICE_MB");
    hx_runtime_close(rt);
    unlink(file);
    rmdir(dir);
}
END_TEST

/* softmax(q K^T * scale) V over all n positions, in float64. */
static void attention_f64(const float *q, const float *k, const float *v, uint32_t n, uint32_t Dh, double scale,
                          double *out)
{
    double m = -INFINITY, l = 0, s[512];
    ck_assert_uint_le(n, 512);
    for (uint32_t j = 0; j < n; j++) {
        s[j] = 0;
        for (uint32_t d = 0; d < Dh; d++)
            s[j] += (double)q[d] * k[(size_t)j * Dh + d];
        s[j] *= scale;
        m = s[j] > m ? s[j] : m;
    }
    for (uint32_t d = 0; d < Dh; d++)
        out[d] = 0;
    for (uint32_t j = 0; j < n; j++) {
        double w = exp(s[j] - m);
        l += w;
        for (uint32_t d = 0; d < Dh; d++)
            out[d] += w * v[(size_t)j * Dh + d];
    }
    for (uint32_t d = 0; d < Dh; d++)
        out[d] /= l;
}

/* Positions cut into parts (an empty one among them), each attended to
 * alone and merged: the float64 attention over them all, to float
 * rounding; with scores far past what expf can take unshifted, so a merge
 * without the per-part maxima, or a wrong rescale, fails. */
START_TEST(split_attention_merges_to_the_reference)
{
    enum { DH = 64, N = 300, PARTS = 5 };
    static const uint32_t cut[PARTS + 1] = {0, 37, 38, 38, 171, N}; /* part 2 is empty */
    float *q = malloc(sizeof(float) * DH), *k = malloc(sizeof(float) * N * DH), *v = malloc(sizeof(float) * N * DH);
    hx_cl_test_random(q, DH, 3);
    hx_cl_test_random(k, (size_t)N * DH, 4);
    hx_cl_test_random(v, (size_t)N * DH, 5);
    /* Later positions score higher: the parts' maxima differ by hundreds. */
    for (uint32_t j = 0; j < N; j++)
        for (uint32_t d = 0; d < DH; d++)
            k[(size_t)j * DH + d] += q[d] * (float)j * 0.02f;
    for (int round = 0; round < 2; round++) {
        const float scale = round ? 1.0f : 1.0f / sqrtf(DH);
        float out[PARTS][DH], mx[PARTS], sm[PARTS], merged[DH];
        for (int p = 0; p < PARTS; p++)
            hx_attn_part_f32(q, k + (size_t)cut[p] * DH, v + (size_t)cut[p] * DH, cut[p + 1] - cut[p], DH, scale,
                             out[p], &mx[p], &sm[p]);
        ck_assert(isinf(mx[2]) && mx[2] < 0 && sm[2] == 0);
        ck_assert_msg(mx[PARTS - 1] - mx[0] > (round ? 100 : 10), "maxima %g and %g", mx[0], mx[PARTS - 1]);
        const float *parts[PARTS] = {out[0], out[1], out[2], out[3], out[4]};
        hx_attn_merge_f32(PARTS, DH, parts, mx, sm, merged);
        double ref[DH], err = 0, norm = 0;
        attention_f64(q, k, v, N, DH, scale, ref);
        for (int d = 0; d < DH; d++) {
            err += (merged[d] - ref[d]) * (merged[d] - ref[d]);
            norm += ref[d] * ref[d];
        }
        ck_assert_msg(sqrt(err / norm) < 1e-5, "scale %g: relative L2 error %g", scale, sqrt(err / norm));
        /* One part alone is itself, bit for bit. */
        float one[DH];
        hx_attn_merge_f32(1, DH, &parts[3], &mx[3], &sm[3], one);
        ck_assert(memcmp(one, out[3], sizeof one) == 0);
    }
    /* Nothing to attend to: zeros. */
    float none_out[DH], none_max, none_sum, merged[DH];
    hx_attn_part_f32(q, k, v, 0, DH, 1.0f, none_out, &none_max, &none_sum);
    const float *none_part = none_out;
    hx_attn_merge_f32(1, DH, &none_part, &none_max, &none_sum, merged);
    for (int d = 0; d < DH; d++)
        ck_assert(merged[d] == 0);
    free(q);
    free(k);
    free(v);
}
END_TEST

Suite *suite_kv_blocks(void)
{
    Suite *s = suite_create("kv_blocks");
    TCase *c = tcase_create("kv_blocks");
    tcase_set_timeout(c, 300);
    tcase_add_test(c, pocl_attention_on_blocks_gives_the_same_logits);
    tcase_add_test(c, split_attention_merges_to_the_reference);
    tcase_add_test(c, split_attention_between_cpu_and_pocl_gives_the_same_logits);
    tcase_add_test(c, a_bounded_device_evicts_blocks_with_the_same_logits);
    tcase_add_test(c, kv_device_mb_is_a_number_of_mib);
    suite_add_tcase(s, c);
    return s;
}
