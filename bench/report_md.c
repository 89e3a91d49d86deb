/* Markdown: llama-bench's table (model | size | params | ... | t/s), then
 * a second table of what the runtime did in each measured run. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

#define MAX_COLS 16
#define CELL 160

typedef struct {
    int ncols, nrows;
    const char *head[MAX_COLS];
    int right[MAX_COLS];
    char (*cell)[MAX_COLS][CELL];
} table;

/* Display width: UTF-8 continuation bytes take no column. */
static int width(const char *s)
{
    int w = 0;
    for (; *s; s++)
        w += ((unsigned char)*s & 0xc0) != 0x80;
    return w;
}

static void col(table *t, const char *head, int right)
{
    t->head[t->ncols] = head;
    t->right[t->ncols++] = right;
}

static void pad(FILE *f, const char *s, int w, int right)
{
    int n = w - width(s);
    if (right)
        fprintf(f, "%*s%s", n > 0 ? n : 0, "", s);
    else
        fprintf(f, "%s%*s", s, n > 0 ? n : 0, "");
}

static void print(FILE *f, const table *t)
{
    int w[MAX_COLS];
    for (int c = 0; c < t->ncols; c++) {
        w[c] = width(t->head[c]) > 3 ? width(t->head[c]) : 3;
        for (int r = 0; r < t->nrows; r++)
            if (width(t->cell[r][c]) > w[c])
                w[c] = width(t->cell[r][c]);
    }
    for (int r = -2; r < t->nrows; r++) {
        fputs("|", f);
        for (int c = 0; c < t->ncols; c++) {
            fputs(" ", f);
            if (r == -2) {
                pad(f, t->head[c], w[c], t->right[c]);
            } else if (r == -1) {
                for (int k = 0; k < w[c] - 1; k++)
                    fputc('-', f);
                fputc(t->right[c] ? ':' : '-', f);
            } else {
                pad(f, t->cell[r][c], w[c], t->right[c]);
            }
            fputs(" |", f);
        }
        fputs("\n", f);
    }
}

typedef struct {
    int inject, batch, partition, base;
} shown;

static shown what_varies(const hxb_results *r)
{
    shown s = {0};
    for (int i = 0; i < r->nrows; i++) {
        s.inject |= r->rows[i].inject_i > 0 || r->rows[i].inject[0];
        s.batch |= r->rows[i].batch_i > 0 || r->rows[i].batch != 512;
        s.partition |= r->rows[i].partition_i > 0 || strcmp(r->rows[i].partition, "affinity");
        s.base |= hxb_results_reference(r, i) >= 0;
    }
    return s;
}

static int config_cells(table *t, int r, int c, const hxb_row *row, shown s)
{
    snprintf(t->cell[r][c++], CELL, "%s", row->devices);
    snprintf(t->cell[r][c++], CELL, "%s", row->sched);
    if (s.partition)
        snprintf(t->cell[r][c++], CELL, "%s", row->partition);
    if (s.inject)
        snprintf(t->cell[r][c++], CELL, "%s", row->inject[0] ? row->inject : "none");
    snprintf(t->cell[r][c++], CELL, "%d", row->threads);
    if (s.batch)
        snprintf(t->cell[r][c++], CELL, "%d", row->batch);
    snprintf(t->cell[r][c++], CELL, "%s", row->t.name);
    return c;
}

static void config_cols(table *t, shown s)
{
    col(t, "devices", 0);
    col(t, "policy", 0);
    if (s.partition)
        col(t, "partition", 0);
    if (s.inject)
        col(t, "inject", 0);
    col(t, "threads", 1);
    if (s.batch)
        col(t, "n_batch", 1);
    col(t, "test", 0);
}

static void speed_table(FILE *f, const hxb_results *r, table *t, shown s)
{
    *t = (table){.cell = t->cell, .nrows = r->nrows};
    col(t, "model", 0);
    col(t, "size", 1);
    col(t, "params", 1);
    col(t, "type", 0);
    config_cols(t, s);
    col(t, "t/s", 1);
    if (s.base)
        col(t, "vs base", 1);
    int decode = 0; /* the roofline columns, where a row decodes */
    for (int i = 0; i < r->nrows; i++)
        decode |= r->rows[i].t.kind == HXB_TG;
    if (decode) {
        col(t, "B/token (w + kv)", 1);
        col(t, "roofline", 1);
    }
    for (int i = 0; i < r->nrows; i++) {
        const hxb_row *row = &r->rows[i];
        const hxb_model *m = &r->models[row->model];
        int c = 0;
        snprintf(t->cell[i][c++], CELL, "%s", m->name);
        hxb_fmt_bytes(t->cell[i][c++], CELL, m->bytes);
        hxb_fmt_count(t->cell[i][c++], CELL, m->params);
        snprintf(t->cell[i][c++], CELL, "%s", m->type);
        c = config_cells(t, i, c, row, s);
        snprintf(t->cell[i][c++], CELL, "%.2f ± %.2f", row->avg_ts, row->stddev_ts);
        int ref = hxb_results_reference(r, i);
        if (s.base && ref >= 0)
            snprintf(t->cell[i][c++], CELL, "%.2fx", row->avg_ts / r->rows[ref].avg_ts);
        else if (s.base)
            c++;
        if (decode && row->t.kind == HXB_TG) {
            char w[32], kv[32];
            hxb_fmt_bytes(w, sizeof w, (uint64_t)row->weight_bytes_per_token);
            hxb_fmt_bytes(kv, sizeof kv, (uint64_t)row->kv_bytes_per_token);
            snprintf(t->cell[i][c++], CELL, "%s + %s", w, kv);
            char llc[32];
            hxb_fmt_bytes(llc, sizeof llc, row->llc_bytes);
            if (isfinite(row->roofline_pct) && row->fits_llc) /* not a memory figure: say why */
                snprintf(t->cell[i][c++], CELL, "in LLC (%.0f%% of %.1f GB/s; %s cache)", row->roofline_pct,
                         row->read_bw_gbps, llc);
            else if (isfinite(row->roofline_pct))
                snprintf(t->cell[i][c++], CELL, "%.0f%% of %.1f GB/s", row->roofline_pct, row->read_bw_gbps);
        }
    }
    print(f, t);
}

static void runtime_table(FILE *f, const hxb_results *r, table *t, shown s)
{
    *t = (table){.cell = t->cell, .nrows = r->nrows};
    col(t, "model", 0);
    config_cols(t, s);
    col(t, "busy %", 0);
    col(t, "tasks/run", 1);
    col(t, "µs/task", 1);
    col(t, "copies/run", 1);
    col(t, "moved/run", 1);
    col(t, "migr./run", 1);
    col(t, "peak RSS", 1);
    for (int i = 0; i < r->nrows; i++) {
        const hxb_row *row = &r->rows[i];
        int c = 0, reps = row->reps > 0 ? row->reps : 1;
        snprintf(t->cell[i][c++], CELL, "%s", r->models[row->model].name);
        c = config_cells(t, i, c, row, s);
        char *busy = t->cell[i][c++];
        size_t n = 0;
        busy[0] = 0;
        for (int d = 0; d < row->ndev && n < CELL; d++)
            n += (size_t)snprintf(busy + n, CELL - n, "%s%s %.1f", d ? ", " : "", row->dev[d].label,
                                  row->dev[d].busy_pct);
        snprintf(t->cell[i][c++], CELL, "%.0f", row->tasks_per_run);
        snprintf(t->cell[i][c++], CELL, "%.2f", row->submit_overhead_us);
        snprintf(t->cell[i][c++], CELL, "%.0f", (double)row->copies / reps);
        hxb_fmt_bytes(t->cell[i][c++], CELL, row->bytes_copied / (uint64_t)reps);
        snprintf(t->cell[i][c++], CELL, "%.0f", (double)row->migrations / reps);
        hxb_fmt_bytes(t->cell[i][c++], CELL, row->peak_rss_bytes);
    }
    print(f, t);
}

void hxb_report_md(FILE *f, const hxb_results *r)
{
    table t = {.cell = calloc((size_t)r->nrows + 1, sizeof *t.cell)};
    if (!t.cell) {
        fprintf(stderr, "hetero-bench: out of memory\n");
        return;
    }
    shown s = what_varies(r);
    speed_table(f, r, &t, s);
    fputs("\n", f);
    runtime_table(f, r, &t, s);
    fprintf(f, "\nhetero %d.%d.%d; %s%s%s%s, %d cores; %d repetitions%s; busy %% = device time in tasks / wall time "
               "of the measured runs; µs/task = submission overhead\n",
            HX_VERSION_MAJOR, HX_VERSION_MINOR, HX_VERSION_PATCH,
            *r->simulated ? "SIMULATED (no kernel ran; times are the simulator's predictions) on " : "",
            r->simulated, *r->simulated ? ": " : "", r->cpu, r->cores,
            r->nrows ? r->rows[0].reps : 0, s.base ? "; vs base = t/s over the first configuration's" : "");
    free(t.cell);
}
