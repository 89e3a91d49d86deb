/* CSV (RFC 4180): one header line, one line per row.  Lists inside a
 * field (samples, per-device figures) are ';'-separated. */
#include <math.h>
#include <string.h>

#include "bench/bench.h"

static void field(FILE *f, const char *s, int first)
{
    if (!first)
        fputc(',', f);
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, ",%.9g", v);
    else
        fputc(',', f);
}

static void unum(FILE *f, unsigned long long v) { fprintf(f, ",%llu", v); }

void hxb_report_csv(FILE *f, const hxb_results *r)
{
    fputs("model,model_path,arch,type,size_bytes,n_params,devices,policy,partition,inject,threads,n_batch,test,"
          "n_prompt,n_gen,n_seqs,n_depth,reps,avg_ns,stddev_ns,avg_ts,stddev_ts,vs_base,samples_ns,samples_ts,"
          "device_busy_pct,device_tasks,tasks_per_run,submit_overhead_us,copies,bytes_copied,zero_copy_uses,"
          "migrations,peak_rss_bytes,device_kv_bytes_allocated,weight_bytes_per_token,kv_bytes_per_token,"
          "read_bandwidth_gbps,roofline_pct\n",
          f);
    for (int i = 0; i < r->nrows; i++) {
        const hxb_row *row = &r->rows[i];
        const hxb_model *m = &r->models[row->model];
        field(f, m->name, 1);
        field(f, m->path, 0);
        field(f, m->arch, 0);
        field(f, m->type, 0);
        unum(f, m->bytes);
        unum(f, m->params);
        field(f, row->devices, 0);
        field(f, row->sched, 0);
        field(f, row->partition, 0);
        field(f, row->inject, 0);
        unum(f, (unsigned)row->threads);
        unum(f, (unsigned)row->batch);
        field(f, row->t.name, 0);
        unum(f, row->t.kind == HXB_PP ? (unsigned)row->t.n : 0);
        unum(f, row->t.kind == HXB_TG ? (unsigned)row->t.n : 0);
        unum(f, (unsigned)row->t.seqs);
        unum(f, (unsigned)row->t.depth);
        unum(f, (unsigned)row->reps);
        num(f, row->avg_ns);
        num(f, row->stddev_ns);
        num(f, row->avg_ts);
        num(f, row->stddev_ts);
        int ref = hxb_results_reference(r, i);
        num(f, ref >= 0 ? row->avg_ts / r->rows[ref].avg_ts : NAN);
        fputc(',', f);
        for (int k = 0; k < row->reps; k++)
            fprintf(f, "%s%.0f", k ? ";" : "", row->samples_ns[k]);
        fputc(',', f);
        for (int k = 0; k < row->reps; k++)
            fprintf(f, "%s%.9g", k ? ";" : "", (double)row->t.n * row->t.seqs / (row->samples_ns[k] * 1e-9));
        fputc(',', f);
        for (int d = 0; d < row->ndev; d++)
            fprintf(f, "%s%s:%.3f", d ? ";" : "", row->dev[d].label, row->dev[d].busy_pct);
        fputc(',', f);
        for (int d = 0; d < row->ndev; d++)
            fprintf(f, "%s%s:%llu", d ? ";" : "", row->dev[d].label, (unsigned long long)row->dev[d].tasks);
        num(f, row->tasks_per_run);
        num(f, row->submit_overhead_us);
        unum(f, row->copies);
        unum(f, row->bytes_copied);
        unum(f, row->zero_copy_uses);
        unum(f, row->migrations);
        unum(f, row->peak_rss_bytes);
        fputc(',', f);
        for (int d = 0; d < row->ndev; d++)
            fprintf(f, "%s%s:%llu", d ? ";" : "", row->dev[d].label, (unsigned long long)row->dev[d].kv_allocated);
        num(f, row->weight_bytes_per_token);
        num(f, row->kv_bytes_per_token);
        num(f, row->read_bw_gbps);
        num(f, row->roofline_pct);
        fputc('\n', f);
    }
}
