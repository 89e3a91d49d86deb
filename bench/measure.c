/* One test on one loaded model: warm-up, the measured repetitions, and
 * what the runtime did meanwhile.  As llama-bench does, ppN evaluates N
 * tokens in one call on a fresh session and tgN evaluates N tokens one at
 * a time, each after the previous; the next token is the argmax of the
 * logits, so no sampler cost is measured and every run is the same.  At a
 * depth d (llama-bench's -d, llama-batched-bench's -npp) every session
 * first evaluates d prompt tokens, unmeasured, so that the measured tokens
 * attend to a context of that length. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

static int32_t argmax(const float *l, uint32_t n)
{
    int32_t best = 0;
    for (uint32_t i = 1; l && i < n; i++)
        if (l[i] > l[best])
            best = (int32_t)i;
    return best;
}

/* The runtime's clock: this machine's, or the simulated machine's. */
static double clock_ns(const hx_runtime *rt) { return hx_runtime_clock(rt) * 1e9; }

/* A fixed pseudo-random prompt: the same tokens for every configuration. */
static void fill_tokens(int32_t *ids, int n, uint32_t vocab, uint64_t seed)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((seed >> 33) % vocab);
    }
}

/* The context of the first sequence at a depth, evaluated once per model
 * and depth and forked for every run after (each run's tokens then go to
 * blocks of its own), as llama-bench restores the state it saved after
 * its first run at that depth: a long context is evaluated once, not
 * once per test and repetition. */
static struct {
    hx_model *m;
    int depth;
    hx_session *s;
} held;

void hxb_depth_release(void)
{
    if (held.s)
        hx_session_close(held.s);
    held.s = NULL;
    held.m = NULL;
    held.depth = 0;
}

static hx_status fill_at_depth(hx_model *m, uint32_t vocab, int depth, uint64_t seed, hx_session **s);
static hx_status open_at_depth_unmeasured(hx_model *m, uint32_t vocab, int depth, uint64_t seed, hx_session **s);

/* What the devices did while contexts were filled (unmeasured) since the
 * statistics were last reset: taken out of a row's busy seconds and
 * busy %, which are the measured runs' (a 32k-token context's prefill
 * would otherwise make a decode row's busy % the prefill's). */
static double fill_busy[HXB_MAX_DEVICES];

static void device_busy(hx_runtime *rt, double *busy)
{
    for (int d = 0; d < hx_runtime_device_count(rt) && d < HXB_MAX_DEVICES; d++) {
        hx_device_stats ds = {0};
        hx_device_stats_get(rt, d, &ds);
        busy[d] = ds.busy_seconds;
    }
}

/* Opens a session holding `depth` tokens of context (unmeasured). */
static hx_status open_at_depth(hx_runtime *rt, hx_model *m, uint32_t vocab, int depth, uint64_t seed,
                               hx_session **s)
{
    double b0[HXB_MAX_DEVICES] = {0}, b1[HXB_MAX_DEVICES] = {0};
    device_busy(rt, b0);
    hx_status st = open_at_depth_unmeasured(m, vocab, depth, seed, s);
    device_busy(rt, b1);
    for (int d = 0; d < HXB_MAX_DEVICES; d++)
        fill_busy[d] += b1[d] - b0[d];
    return st;
}

static hx_status open_at_depth_unmeasured(hx_model *m, uint32_t vocab, int depth, uint64_t seed, hx_session **s)
{
    if (depth <= 0 || seed != 99)
        return fill_at_depth(m, vocab, depth, seed, s);
    if (held.s && (held.m != m || held.depth != depth))
        hxb_depth_release();
    if (!held.s) {
        hx_status st = fill_at_depth(m, vocab, depth, seed, &held.s);
        if (st)
            return st;
        held.m = m;
        held.depth = depth;
    }
    hx_status st = hx_session_fork(held.s, s);
    if (st) {
        fprintf(stderr, "hetero-bench: the context before the test: %s\n", hx_last_error());
        *s = NULL;
    }
    return st;
}

static hx_status fill_at_depth(hx_model *m, uint32_t vocab, int depth, uint64_t seed, hx_session **s)
{
    hx_status st = hx_session_open(m, s);
    if (st || depth <= 0)
        return st;
    int32_t *ctx = malloc(sizeof *ctx * (size_t)depth);
    if (!ctx) {
        fprintf(stderr, "hetero-bench: out of memory\n");
        st = HX_ERR_NO_MEMORY;
    } else {
        fill_tokens(ctx, depth, vocab, seed);
        st = hx_session_eval(*s, ctx, (size_t)depth, 0);
        free(ctx);
    }
    if (st) {
        fprintf(stderr, "hetero-bench: the context before the test: %s\n", hx_last_error());
        hx_session_close(*s);
        *s = NULL;
    }
    return st;
}

static hx_status run_pp(hx_runtime *rt, hx_model *m, uint32_t vocab, const int32_t *ids, int n, int depth,
                        double *ns)
{
    hx_session *s;
    hx_status st = open_at_depth(rt, m, vocab, depth, 99, &s);
    if (st)
        return st;
    double t0 = clock_ns(rt);
    st = hx_session_eval(s, ids, (size_t)n, 0);
    *ns = clock_ns(rt) - t0;
    if (st) /* closing the session resets the message */
        fprintf(stderr, "hetero-bench: %s\n", hx_last_error());
    hx_session_close(s);
    return st;
}

/* `seqs` sessions decoded together: each step is one batch holding one
 * token of every session, the way a server decodes parallel requests. */
static hx_status run_tg(hx_runtime *rt, hx_model *m, uint32_t vocab, int n, int seqs, int depth, double *ns)
{
    hx_session *s[256] = {0};
    int32_t cur[256];
    hx_status st = HX_OK;
    fill_tokens(cur, seqs, vocab, 42);
    for (int k = 0; k < seqs && st == HX_OK; k++)
        st = open_at_depth(rt, m, vocab, depth, 99 + (uint64_t)k, &s[k]);
    const int said = st != HX_OK; /* open_at_depth said why */
    double t0 = clock_ns(rt);
    for (int i = 0; i < n && st == HX_OK; i++) {
        if (seqs == 1) {
            st = hx_session_eval(s[0], cur, 1, 0);
        } else {
            hx_batch b = {.n = (size_t)seqs, .tokens = cur, .sessions = s};
            st = hx_batch_eval(m, &b);
        }
        for (int k = 0; k < seqs && st == HX_OK; k++)
            cur[k] = argmax(hx_session_logits(s[k], -1), vocab);
    }
    *ns = clock_ns(rt) - t0;
    if (st && !said) /* closing the sessions resets the message */
        fprintf(stderr, "hetero-bench: %s\n", hx_last_error());
    for (int k = 0; k < seqs; k++)
        hx_session_close(s[k]);
    return st;
}

static hx_status run_once(hx_runtime *rt, hx_model *m, const hxb_model *md, const hxb_test *t, const int32_t *ids,
                          int n, int depth, double *ns)
{
    return t->kind == HXB_PP ? run_pp(rt, m, md->n_vocab, ids, n, depth, ns)
                             : run_tg(rt, m, md->n_vocab, n, t->seqs, depth, ns);
}

static void device_stats(hx_runtime *rt, hxb_row *row)
{
    row->ndev = hx_runtime_device_count(rt);
    if (row->ndev > HXB_MAX_DEVICES)
        row->ndev = HXB_MAX_DEVICES;
    for (int d = 0; d < row->ndev; d++) {
        hx_device_stats ds = {0};
        hxb_device_use *u = &row->dev[d];
        hx_device_stats_get(rt, d, &ds);
        u->tasks = ds.tasks;
        u->busy_seconds = ds.busy_seconds - fill_busy[d];
        u->busy_pct = ds.busy_fraction * 100;
        if (row->t.depth > 0 && row->avg_ns > 0) /* the measured runs' share, fills apart */
            u->busy_pct = u->busy_seconds / (row->avg_ns * 1e-9 * row->reps) * 100;
        u->kv_allocated = ds.kv_bytes_allocated;
        u->kv_named_peak = ds.kv_bytes_named_peak;
        u->kv_device_only_peak = ds.kv_bytes_device_only_peak;
    }
}

/* A decode row's bytes per token and its share of the read bandwidth. */
static void roofline(hx_runtime *rt, hx_model *m, const hxb_test *t, hxb_row *row)
{
    row->weight_bytes_per_token = row->kv_bytes_per_token = row->read_bw_gbps = row->roofline_pct = NAN;
    row->working_set_bytes = NAN;
    row->llc_bytes = 0;
    row->fits_llc = 0;
    hx_model_info in;
    if (t->kind != HXB_TG || hx_model_info_get(m, &in) != HX_OK)
        return;
    row->weight_bytes_per_token = (double)in.decode_weight_bytes / t->seqs;
    row->kv_bytes_per_token = (double)in.kv_bytes_per_token * (t->depth + (t->n + 1) / 2.0);
    if (hx_runtime_simulated(rt))
        return;
    row->working_set_bytes =
        (double)in.decode_weight_bytes + (double)in.kv_bytes_per_token * (t->depth + t->n) * t->seqs;
    row->llc_bytes = hxb_llc_bytes();
    row->fits_llc = row->llc_bytes > 0 && row->working_set_bytes <= (double)row->llc_bytes;
    const double bw = hxb_read_bandwidth(row->threads);
    if (bw > 0) {
        row->read_bw_gbps = bw;
        row->roofline_pct = 100.0 * (row->weight_bytes_per_token + row->kv_bytes_per_token) * row->avg_ts / (bw * 1e9);
    }
}

hx_status hxb_measure(hx_runtime *rt, hx_model *m, const hxb_model *md, const hxb_test *t,
                      const hxb_params *p, hxb_row *row)
{
    int32_t *ids = NULL;
    double ns;
    hx_status st = HX_OK;
    if (t->kind == HXB_PP) {
        if (!(ids = malloc(sizeof *ids * (size_t)t->n))) {
            fprintf(stderr, "hetero-bench: out of memory\n");
            return HX_ERR_NO_MEMORY;
        }
        fill_tokens(ids, t->n, md->n_vocab, 1234);
    }
    /* The warm-up pages in the weights and sizes the activations; like
     * llama-bench's, one token is enough to warm up generation, and no
     * context is needed for it. */
    if (p->warmup)
        st = run_once(rt, m, md, t, ids, t->kind == HXB_PP ? t->n : 1, 0, &ns);
    row->reps = p->reps;
    row->samples_ns = calloc((size_t)p->reps, sizeof *row->samples_ns);
    double *ts = calloc((size_t)p->reps, sizeof *ts);
    if (!row->samples_ns || !ts) {
        fprintf(stderr, "hetero-bench: out of memory\n");
        st = HX_ERR_NO_MEMORY;
    }
    hxb_stats_peak_rss_reset();
    hx_runtime_stats_reset(rt);
    memset(fill_busy, 0, sizeof fill_busy);
    for (int r = 0; r < p->reps && st == HX_OK; r++) {
        st = run_once(rt, m, md, t, ids, t->n, t->depth, &row->samples_ns[r]);
        ts[r] = (double)t->n * t->seqs / (row->samples_ns[r] * 1e-9);
    }
    if (st == HX_OK) {
        hxb_stats_mean_std(row->samples_ns, p->reps, &row->avg_ns, &row->stddev_ns);
        hxb_stats_mean_std(ts, p->reps, &row->avg_ts, &row->stddev_ts);
        hx_runtime_stats rs;
        hx_runtime_stats_get(rt, &rs);
        row->tasks = rs.tasks_submitted;
        row->tasks_per_run = (double)rs.tasks_submitted / p->reps;
        row->copies = rs.copies;
        row->bytes_copied = rs.bytes_copied;
        row->zero_copy_uses = rs.zero_copy_uses;
        row->migrations = rs.migrations;
        row->submit_overhead_us = rs.submit_overhead_us;
        row->peak_rss_bytes = hxb_stats_peak_rss();
        device_stats(rt, row);
        roofline(rt, m, t, row);
    }
    free(ts);
    free(ids);
    return st;
}
