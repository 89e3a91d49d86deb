/* hetero-bench --prefix-share N: N sessions whose prompts share a prefix
 * (--prefix-len tokens) and differ in a suffix (--suffix-len tokens),
 * evaluated one after the other and kept open, once with the KV prefix
 * cache and once without.  Per session: the tokens it evaluated, those it
 * took from the cache, its wall time, the KV memory held after it, and
 * whether its logits equal the unshared run's bit for bit.  The summary
 * compares session 1 with sessions 2..N, which is what a server whose
 * requests start with one system prompt gains. */
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

typedef struct {
    uint32_t evaluated, reused;
    double ns;          /* mean over the repetitions */
    uint64_t kv_bytes;  /* held by the sessions once this one ran */
    int same_logits;    /* the last logits equal the unshared run's */
} share_row;

static void fill(int32_t *ids, int n, uint32_t vocab, uint64_t seed)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((seed >> 33) % vocab);
    }
}

/* One pass over the N sessions with the cache on or off; `logits` keeps
 * each session's last logits [N][vocab]. */
static int one_pass(hx_runtime *rt, const hxb_params *p, const hxb_model *md, int cache, share_row *rows,
                    float *logits)
{
    const int N = p->prefix_share, L = p->prefix_len, S = p->suffix_len, n = L + S;
    hx_model_options mo = hx_model_options_default();
    mo.kv_type = p->kv_type;
    mo.kv_prefix_cache = cache ? 1 : -1;
    mo.n_ctx = (uint32_t)n;
    mo.max_batch = (uint32_t)p->batches.v[0];
    /* Every session's whole prompt: the unshared run needs all of it. */
    mo.kv_tokens = (uint32_t)N * ((uint32_t)n + 16);
    hx_model *m;
    hx_status st = hxb_model_open(rt, md, &mo, &m);
    hx_session **s = calloc((size_t)N, sizeof *s);
    int32_t *ids = malloc(sizeof *ids * (size_t)n);
    if (st || !s || !ids) {
        fprintf(stderr, "hetero-bench: --prefix-share: model '%s': %s\n", md->path,
                st ? hx_last_error() : "out of memory");
        if (!st)
            hx_model_free(m);
        free(s);
        free(ids);
        return -1;
    }
    fill(ids, L, md->n_vocab, 7);
    for (int k = 0; k < N && st == HX_OK; k++) {
        fill(ids + L, S, md->n_vocab, 1000 + (uint64_t)k);
        st = hx_session_open(m, &s[k]);
        double t0 = hx_runtime_clock(rt);
        if (st == HX_OK)
            st = hx_session_eval(s[k], ids, (size_t)n, 0);
        double ns = (hx_runtime_clock(rt) - t0) * 1e9;
        hx_model_stats ms;
        if (st == HX_OK)
            st = hx_model_stats_get(m, &ms);
        if (st)
            break;
        rows[k].reused = hx_session_reused_tokens(s[k]);
        rows[k].evaluated = (uint32_t)n - rows[k].reused;
        rows[k].ns += ns / p->reps;
        rows[k].kv_bytes = ms.kv_bytes_used;
        memcpy(logits + (size_t)k * md->n_vocab, hx_session_logits(s[k], -1), sizeof(float) * md->n_vocab);
    }
    if (st)
        fprintf(stderr, "hetero-bench: --prefix-share: %s\n", hx_last_error());
    for (int k = 0; k < N; k++)
        hx_session_close(s[k]);
    hx_model_free(m);
    free(s);
    free(ids);
    return st ? -1 : 0;
}

static double mean_ns(const share_row *r, int from, int to)
{
    double sum = 0;
    for (int k = from; k < to; k++)
        sum += r[k].ns;
    return to > from ? sum / (to - from) : 0;
}

static void report(FILE *f, const hxb_params *p, const hxb_model *md, share_row *rows[2])
{
    const int N = p->prefix_share;
    const char *mode[2] = {"off", "on"};
    if (p->format == HXB_CSV) {
        for (int c = 1; c >= 0; c--)
            for (int k = 0; k < N; k++)
                fprintf(f, "\"%s\",%s,%d,%d,%d,%u,%u,%.0f,%llu,%d\n", md->name, mode[c], k + 1, p->prefix_len,
                        p->suffix_len, rows[c][k].evaluated, rows[c][k].reused, rows[c][k].ns,
                        (unsigned long long)rows[c][k].kv_bytes, rows[c][k].same_logits);
        return;
    }
    if (p->format == HXB_JSON) {
        fprintf(f, "{\"model\": ");
        hx_json_write_string(f, md->name);
        fprintf(f, ", \"prefix_tokens\": %d, \"suffix_tokens\": %d, \"sessions\": %d, \"runs\": [", p->prefix_len,
                p->suffix_len, N);
        for (int c = 1; c >= 0; c--) {
            fprintf(f, "%s{\"prefix_cache\": %s, \"sessions\": [", c ? "" : ", ", c ? "true" : "false");
            for (int k = 0; k < N; k++)
                fprintf(f,
                        "%s{\"session\": %d, \"evaluated_tokens\": %u, \"reused_tokens\": %u, \"avg_ns\": %.0f, "
                        "\"kv_bytes_used\": %llu, \"logits_equal_unshared\": %s}",
                        k ? ", " : "", k + 1, rows[c][k].evaluated, rows[c][k].reused, rows[c][k].ns,
                        (unsigned long long)rows[c][k].kv_bytes, rows[c][k].same_logits ? "true" : "false");
            fprintf(f, "]}");
        }
        fprintf(f, "]}\n");
        return;
    }
    fprintf(f, "\n%s: %d sessions, a common prefix of %d tokens and different suffixes of %d\n\n", md->name, N,
            p->prefix_len, p->suffix_len);
    fprintf(f, "| prefix cache | session | evaluated | reused | ms | KV held | logits = unshared |\n");
    fprintf(f, "| --- | ---: | ---: | ---: | ---: | ---: | --- |\n");
    for (int c = 1; c >= 0; c--)
        for (int k = 0; k < N; k++) {
            char kv[32];
            hxb_fmt_bytes(kv, sizeof kv, rows[c][k].kv_bytes);
            fprintf(f, "| %s | %d | %u | %u | %.2f | %s | %s |\n", mode[c], k + 1, rows[c][k].evaluated,
                    rows[c][k].reused, rows[c][k].ns / 1e6, kv, c ? (rows[c][k].same_logits ? "yes" : "NO") : "-");
        }
    if (N < 2)
        return;
    const share_row *on = rows[1];
    double later_tokens = 0;
    for (int k = 1; k < N; k++)
        later_tokens += on[k].evaluated;
    later_tokens /= N - 1;
    const double t1 = on[0].ns, tl = mean_ns(on, 1, N);
    char grow[32], whole[32];
    hxb_fmt_bytes(grow, sizeof grow, (on[N - 1].kv_bytes - on[0].kv_bytes) / (uint64_t)(N - 1));
    hxb_fmt_bytes(whole, sizeof whole, on[0].kv_bytes);
    fprintf(f, "\nsessions 2..%d against session 1: tokens evaluated %.1fx fewer (%.1f vs %u), wall time %.1fx "
               "shorter (%.2f vs %.2f ms); KV held grows %s per session (session 1 holds %s)\n",
            N, later_tokens > 0 ? on[0].evaluated / later_tokens : 0, later_tokens, on[0].evaluated,
            tl > 0 ? t1 / tl : 0, tl / 1e6, t1 / 1e6, grow, whole);
}

int hxb_prefix_share(const hxb_params *p, const hxb_results *r)
{
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = p->devices.item[0];
    o.sched = *p->scheds.item[0] ? p->scheds.item[0] : NULL;
    o.cpu_threads = p->threads.v[0];
    o.fpga_emulation = p->fpga_emulation ? p->fpga_emulation : "off";
    hx_runtime *rt;
    if (hx_runtime_open(&rt, &o)) {
        fprintf(stderr, "hetero-bench: --devices '%s': %s\n", o.devices, hx_last_error());
        return -1;
    }
    const int N = p->prefix_share;
    int rc = 0;
    if (p->format == HXB_CSV)
        printf("model,prefix_cache,session,prefix_tokens,suffix_tokens,evaluated_tokens,reused_tokens,avg_ns,"
               "kv_bytes_used,logits_equal_unshared\n");
    if (p->format == HXB_JSON)
        printf("[");
    for (int i = 0; i < r->nmodels && !rc; i++) {
        hxb_model md = r->models[i];
        hx_model_options mo = hx_model_options_default();
        hx_model *m;
        if (hxb_model_open(rt, &md, &mo, &m)) {
            fprintf(stderr, "hetero-bench: model '%s': %s\n", md.path, hx_last_error());
            rc = -1;
            break;
        }
        hx_model_info in;
        hx_model_info_get(m, &in);
        hx_model_free(m);
        snprintf(md.name, sizeof md.name, "%.100s (%.16s)", in.name, in.ftype);
        md.n_vocab = in.n_vocab;
        share_row *rows[2] = {calloc((size_t)N, sizeof(share_row)), calloc((size_t)N, sizeof(share_row))};
        float *lg[2] = {malloc(sizeof(float) * md.n_vocab * (size_t)N),
                        malloc(sizeof(float) * md.n_vocab * (size_t)N)};
        rc = rows[0] && rows[1] && lg[0] && lg[1] ? 0 : -1;
        for (int rep = 0; rep < p->reps && !rc; rep++)
            for (int c = 0; c < 2 && !rc; c++)
                rc = one_pass(rt, p, &md, c, rows[c], lg[c]);
        for (int k = 0; k < N && !rc; k++)
            rows[1][k].same_logits = !memcmp(lg[0] + (size_t)k * md.n_vocab, lg[1] + (size_t)k * md.n_vocab,
                                             sizeof(float) * md.n_vocab);
        if (!rc) {
            if (p->format == HXB_JSON && i)
                printf(", ");
            report(stdout, p, &md, rows);
        }
        for (int c = 0; c < 2; c++) {
            free(rows[c]);
            free(lg[c]);
        }
    }
    if (p->format == HXB_JSON && !rc)
        printf("]\n");
    hx_runtime_close(rt);
    return rc;
}
