/* JSON: one object, its "results" one per row with llama-bench's fields
 * (avg_ts, stddev_ts, samples_ns, samples_ts) and what the runtime did.
 * bench/schema.json describes it. */
#include <math.h>

#include "bench/bench.h"

static void key(FILE *f, const char *k, int first)
{
    fputs(first ? "" : ", ", f);
    hx_json_write_string(f, k);
    fputs(": ", f);
}

static void kstr(FILE *f, const char *k, const char *v)
{
    key(f, k, 0);
    if (v)
        hx_json_write_string(f, v);
    else
        fputs("null", f);
}

static void knum(FILE *f, const char *k, double v)
{
    key(f, k, 0);
    if (isfinite(v))
        fprintf(f, "%.9g", v);
    else
        fputs("null", f);
}

static void kint(FILE *f, const char *k, unsigned long long v)
{
    key(f, k, 0);
    fprintf(f, "%llu", v);
}

static void row_json(FILE *f, const hxb_results *r, int i)
{
    const hxb_row *row = &r->rows[i];
    const hxb_model *m = &r->models[row->model];
    fputs("    {", f);
    key(f, "model", 1);
    hx_json_write_string(f, m->name);
    kstr(f, "model_path", m->path);
    kstr(f, "arch", m->arch);
    kstr(f, "type", m->type);
    kint(f, "size_bytes", m->bytes);
    kint(f, "n_params", m->params);
    kstr(f, "devices", row->devices);
    kstr(f, "policy", row->sched);
    kstr(f, "partition", row->partition);
    kstr(f, "inject", row->inject[0] ? row->inject : NULL);
    kint(f, "threads", (unsigned)row->threads);
    kint(f, "n_batch", (unsigned)row->batch);
    kstr(f, "test", row->t.name);
    kint(f, "n_prompt", row->t.kind == HXB_PP ? (unsigned)row->t.n : 0);
    kint(f, "n_gen", row->t.kind == HXB_TG ? (unsigned)row->t.n : 0);
    kint(f, "n_seqs", (unsigned)row->t.seqs);
    kint(f, "n_depth", (unsigned)row->t.depth);
    kint(f, "reps", (unsigned)row->reps);
    knum(f, "avg_ns", row->avg_ns);
    knum(f, "stddev_ns", row->stddev_ns);
    knum(f, "avg_ts", row->avg_ts);
    knum(f, "stddev_ts", row->stddev_ts);
    int ref = hxb_results_reference(r, i);
    if (ref >= 0)
        knum(f, "vs_base", row->avg_ts / r->rows[ref].avg_ts);
    else
        kstr(f, "vs_base", NULL);
    key(f, "samples_ns", 0);
    for (int k = 0; k < row->reps; k++)
        fprintf(f, "%s%.0f", k ? ", " : "[", row->samples_ns[k]);
    fputs(row->reps ? "]" : "[]", f);
    key(f, "samples_ts", 0);
    for (int k = 0; k < row->reps; k++)
        fprintf(f, "%s%.9g", k ? ", " : "[", (double)row->t.n * row->t.seqs / (row->samples_ns[k] * 1e-9));
    fputs(row->reps ? "]" : "[]", f);
    knum(f, "weight_bytes_per_token", row->weight_bytes_per_token);
    knum(f, "kv_bytes_per_token", row->kv_bytes_per_token);
    knum(f, "read_bandwidth_gbps", row->read_bw_gbps);
    knum(f, "roofline_pct", row->roofline_pct);
    knum(f, "working_set_bytes", row->working_set_bytes);
    if (row->llc_bytes)
        kint(f, "llc_bytes", row->llc_bytes);
    else
        kstr(f, "llc_bytes", NULL);
    key(f, "fits_llc", 0);
    fputs(row->fits_llc ? "true" : "false", f);
    key(f, "device_stats", 0);
    fputs("[", f);
    for (int d = 0; d < row->ndev; d++) {
        const hxb_device_use *u = &row->dev[d];
        fputs(d ? ", {" : "{", f);
        key(f, "device", 1);
        fprintf(f, "%d", d);
        kstr(f, "label", u->label);
        kstr(f, "name", u->name);
        key(f, "emulated", 0);
        fputs(u->emulated ? "true" : "false", f);
        kint(f, "tasks", u->tasks);
        knum(f, "busy_seconds", u->busy_seconds);
        knum(f, "busy_pct", u->busy_pct);
        kint(f, "kv_bytes_allocated", u->kv_allocated);
        kint(f, "kv_bytes_named_peak", u->kv_named_peak);
        kint(f, "kv_bytes_device_only_peak", u->kv_device_only_peak);
        fputs("}", f);
    }
    fputs("]", f);
    key(f, "runtime", 0);
    fputs("{", f);
    key(f, "tasks", 1);
    fprintf(f, "%llu", (unsigned long long)row->tasks);
    knum(f, "tasks_per_run", row->tasks_per_run);
    knum(f, "submit_overhead_us", row->submit_overhead_us);
    kint(f, "copies", row->copies);
    kint(f, "bytes_copied", row->bytes_copied);
    kint(f, "zero_copy_uses", row->zero_copy_uses);
    kint(f, "migrations", row->migrations);
    kint(f, "peak_rss_bytes", row->peak_rss_bytes);
    fputs("}}", f);
}

void hxb_report_json(FILE *f, const hxb_results *r, const hxb_params *p)
{
    fprintf(f, "{\"hetero_version\": \"%d.%d.%d\"", HX_VERSION_MAJOR, HX_VERSION_MINOR, HX_VERSION_PATCH);
    kstr(f, "started", r->started);
    key(f, "machine", 0);
    fputs("{", f);
    key(f, "cpu", 1);
    hx_json_write_string(f, r->cpu);
    kint(f, "cores", (unsigned)r->cores);
    kint(f, "memory_bytes", r->memory_bytes);
    kstr(f, "simulated", *r->simulated ? r->simulated : NULL);
    fputs("}", f);
    key(f, "params", 0);
    fputs("{", f);
    key(f, "reps", 1);
    fprintf(f, "%d", p->reps);
    key(f, "warmup", 0);
    fputs(p->warmup ? "true" : "false", f);
    kstr(f, "kv_type", p->kv_type);
    kstr(f, "fpga_emulation", p->fpga_emulation);
    fputs("}", f);
    key(f, "results", 0);
    fputs("[\n", f);
    for (int i = 0; i < r->nrows; i++) {
        row_json(f, r, i);
        fputs(i + 1 < r->nrows ? ",\n" : "\n", f);
    }
    fputs("  ]\n}\n", f);
}
