/* Bar charts of tokens/s, one SVG per test (DIR/pp64.svg, DIR/tg32.svg...):
 * a group of bars per model, a bar per configuration (devices, policy,
 * and whatever else varies), error bars of one standard deviation, the
 * value above each bar, a legend of the configurations below. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

#define LABEL 200

typedef struct {
    char (*label)[LABEL]; /* one per configuration, in row order */
    int n;
} configs;

static int config_of(configs *c, const char *label)
{
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->label[i], label))
            return i;
    snprintf(c->label[c->n], LABEL, "%s", label);
    return c->n++;
}

static void draw(FILE *f, const hxb_results *r, int test, configs *cf)
{
    /* Which models and configurations have rows of this test. */
    int *cfg = calloc((size_t)r->nrows, sizeof *cfg), nmodels = 0, *model_slot = NULL;
    model_slot = calloc((size_t)r->nmodels, sizeof *model_slot);
    if (!cfg || !model_slot) {
        free(cfg);
        free(model_slot);
        return;
    }
    double ymax = 0;
    for (int m = 0; m < r->nmodels; m++)
        model_slot[m] = -1;
    for (int i = 0; i < r->nrows; i++) {
        const hxb_row *row = &r->rows[i];
        char label[LABEL];
        hxb_fmt_config(label, sizeof label, r, row);
        cfg[i] = config_of(cf, label);
        if (row->test != test)
            continue;
        if (model_slot[row->model] < 0)
            model_slot[row->model] = nmodels++;
        if (row->avg_ts + row->stddev_ts > ymax)
            ymax = row->avg_ts + row->stddev_ts;
    }
    int nc = cf->n > 0 ? cf->n : 1;
    double bar = 560.0 / (nmodels * nc);
    bar = bar > 70 ? 70 : bar < 18 ? 18 : bar;
    double group = nc * bar + 24 < 210 ? 210 : nc * bar + 24;
    const double left = 70, top = 66, plot_h = 300;
    double plot_w = nmodels * group < 440 ? 440 : nmodels * group;
    double x0 = left + (plot_w - nmodels * group) / 2; /* groups centred */
    int w = (int)(left + plot_w + 20), legend_y = (int)(top + plot_h + 50);
    int h = legend_y + 18 * cf->n + 16;
    double step = hxb_svg_nice_step(ymax * 1.1, 8), ytop = step;
    while (ytop < ymax * 1.08)
        ytop += step;
    const hxb_test *t = &r->tests[test];

    hxb_svg_begin(f, w, h);
    hxb_svg_text(f, w / 2.0, 24, "middle", 16, "#000", "%s: tokens/s, mean \u00b1 std of %d runs", t->name,
                 r->nrows ? r->rows[0].reps : 0);
    if (t->kind == HXB_PP)
        hxb_svg_text(f, w / 2.0, 44, "middle", 12, "#333", "a prompt of %d tokens in one evaluation", t->n);
    else if (t->seqs > 1)
        hxb_svg_text(f, w / 2.0, 44, "middle", 12, "#333", "%d tokens generated one at a time in each of %d "
                     "sequences decoded together", t->n, t->seqs);
    else
        hxb_svg_text(f, w / 2.0, 44, "middle", 12, "#333", "%d tokens generated one at a time", t->n);
    for (double y = 0; y <= ytop + step / 2; y += step) {
        double py = top + plot_h - y / ytop * plot_h;
        hxb_svg_line(f, left, py, left + plot_w, py, y ? "#e0e0e0" : "#000", 1);
        hxb_svg_text(f, left - 6, py + 4, "end", 11, "#333", "%g", y);
    }
    hxb_svg_text(f, 16, top + plot_h / 2, "middle", 12, "#333", "t/s");
    for (int i = 0; i < r->nrows; i++) {
        const hxb_row *row = &r->rows[i];
        if (row->test != test)
            continue;
        int g = model_slot[row->model];
        double x = x0 + g * group + (group - nc * bar) / 2 + cfg[i] * bar;
        double y = top + plot_h - row->avg_ts / ytop * plot_h;
        char title[LABEL + 64];
        snprintf(title, sizeof title, "%s: %.2f \u00b1 %.2f t/s", cf->label[cfg[i]], row->avg_ts, row->stddev_ts);
        hxb_svg_rect(f, x + 2, y, bar - 4, top + plot_h - y, hxb_svg_color(cfg[i]), title);
        double e0 = top + plot_h - (row->avg_ts - row->stddev_ts) / ytop * plot_h;
        double e1 = top + plot_h - (row->avg_ts + row->stddev_ts) / ytop * plot_h;
        double cx = x + bar / 2;
        hxb_svg_line(f, cx, e0, cx, e1, "#000", 1.2);
        hxb_svg_line(f, cx - bar / 5, e0, cx + bar / 5, e0, "#000", 1.2);
        hxb_svg_line(f, cx - bar / 5, e1, cx + bar / 5, e1, "#000", 1.2);
        hxb_svg_text(f, cx, e1 - 4, "middle", bar >= 40 ? 11 : 9, "#000", "%.*f", row->avg_ts < 100 ? 1 : 0,
                     row->avg_ts);
    }
    for (int m = 0; m < r->nmodels; m++)
        if (model_slot[m] >= 0)
            hxb_svg_text(f, x0 + model_slot[m] * group + group / 2, top + plot_h + 20, "middle", 12, "#000",
                         "%.32s", r->models[m].name);
    for (int c = 0; c < cf->n; c++) {
        hxb_svg_rect(f, left, legend_y + 18 * c - 10, 12, 12, hxb_svg_color(c), NULL);
        hxb_svg_text(f, left + 18, legend_y + 18 * c, "start", 12, "#000", "%s", cf->label[c]);
    }
    hxb_svg_end(f);
    free(cfg);
    free(model_slot);
}

int hxb_chart_write(const char *dir, const hxb_results *r)
{
    configs cf = {.label = calloc((size_t)r->nrows + 1, sizeof *cf.label)};
    if (!cf.label)
        return -1;
    int rc = 0;
    for (int t = 0; t < r->ntests && !rc; t++) {
        char path[1100];
        snprintf(path, sizeof path, "%s/%s.svg", dir, r->tests[t].name);
        FILE *f = fopen(path, "w");
        if (!f) {
            fprintf(stderr, "hetero-bench: cannot write %s: %s\n", path, strerror(errno));
            rc = -1;
            break;
        }
        cf.n = 0;
        draw(f, r, t, &cf);
        if (fclose(f)) {
            fprintf(stderr, "hetero-bench: writing %s failed\n", path);
            rc = -1;
        }
    }
    free(cf.label);
    return rc;
}
