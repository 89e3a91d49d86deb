/* A Chrome trace (the Trace Event Format chrome://tracing and Perfetto
 * read) drawn as a timeline: a lane per process/thread that has events
 * (hetero's traces: a process per device, a thread for its tasks and one
 * for the copies into its memory), a box per complete ("X") or begin/end
 * ("B"/"E") event coloured by event name, a tick per instant ("i"), a time
 * axis in microseconds.  When the trace marks tokens (complete events of
 * category "token"), only the last token is drawn: the walk of one token
 * through the devices. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

#define MAX_LANES 64
#define MAX_NAMES 256
#define MAX_OPEN 64
#define MAX_META 128

typedef struct {
    char pid[32], tid[32];
    double pid_num, tid_num;
    int open_n;
    double open_ts[MAX_OPEN];
    int open_name[MAX_OPEN];
} lane;

typedef struct {
    char pid[32], tid[32]; /* tid "" for a process name */
    char name[96];
} meta;

typedef struct {
    int lane, name, instant;
    double t0, t1;
} box;

typedef struct {
    lane lanes[MAX_LANES];
    int nlanes;
    meta metas[MAX_META];
    int nmetas;
    char *names[MAX_NAMES];
    double name_time[MAX_NAMES];
    int nnames;
    box *boxes;
    int nboxes, cap;
    double w0, w1; /* the window drawn, µs */
    int token;     /* the window is a token event's */
} timeline;

static void id_of(const hxb_json *v, char *buf, size_t cap)
{
    if (v && v->type == HXB_JNUM) snprintf(buf, cap, "%.0f", v->num);
    else snprintf(buf, cap, "%s", hxb_json_str(v, "0"));
}

static int lane_of(timeline *t, const hxb_json *e)
{
    char pid[32], tid[32];
    id_of(hxb_json_get(e, "pid"), pid, sizeof pid);
    id_of(hxb_json_get(e, "tid"), tid, sizeof tid);
    for (int i = 0; i < t->nlanes; i++)
        if (!strcmp(t->lanes[i].pid, pid) && !strcmp(t->lanes[i].tid, tid))
            return i;
    if (t->nlanes == MAX_LANES)
        return -1;
    lane *l = &t->lanes[t->nlanes];
    memset(l, 0, sizeof *l);
    snprintf(l->pid, sizeof l->pid, "%s", pid);
    snprintf(l->tid, sizeof l->tid, "%s", tid);
    l->pid_num = atof(pid);
    l->tid_num = atof(tid);
    return t->nlanes++;
}

static void add_meta(timeline *t, const hxb_json *e, int thread)
{
    const char *name = hxb_json_str(hxb_json_get(hxb_json_get(e, "args"), "name"), NULL);
    if (!name || t->nmetas == MAX_META)
        return;
    meta *m = &t->metas[t->nmetas++];
    id_of(hxb_json_get(e, "pid"), m->pid, sizeof m->pid);
    if (thread)
        id_of(hxb_json_get(e, "tid"), m->tid, sizeof m->tid);
    else
        m->tid[0] = 0;
    snprintf(m->name, sizeof m->name, "%s", name);
}

static const char *meta_name(const timeline *t, const char *pid, const char *tid)
{
    for (int i = t->nmetas - 1; i >= 0; i--)
        if (!strcmp(t->metas[i].pid, pid) && !strcmp(t->metas[i].tid, tid))
            return t->metas[i].name;
    return NULL;
}

static int name_of(timeline *t, const char *name)
{
    for (int i = 0; i < t->nnames; i++)
        if (!strcmp(t->names[i], name))
            return i;
    if (t->nnames == MAX_NAMES)
        return MAX_NAMES - 1; /* the rest share the last colour */
    t->names[t->nnames] = strdup(name);
    return t->names[t->nnames] ? t->nnames++ : -1;
}

static int add_box(timeline *t, int lane, int name, double t0, double t1, int instant)
{
    if (name < 0)
        return -1;
    if (t->nboxes == t->cap) {
        int cap = t->cap ? 2 * t->cap : 256;
        box *b = realloc(t->boxes, sizeof *b * (size_t)cap);
        if (!b)
            return -1;
        t->boxes = b, t->cap = cap;
    }
    t->boxes[t->nboxes++] = (box){lane, name, instant, t0, t1 > t0 ? t1 : t0};
    return 0;
}

static void window(timeline *t, int have_token, double token0, double token1)
{
    t->w0 = 1e300, t->w1 = -1e300;
    for (int i = 0; i < t->nboxes; i++) {
        if (t->boxes[i].t0 < t->w0) t->w0 = t->boxes[i].t0;
        if (t->boxes[i].t1 > t->w1) t->w1 = t->boxes[i].t1;
    }
    if (have_token && token1 > token0)
        t->w0 = token0, t->w1 = token1, t->token = 1;
    if (t->w1 <= t->w0)
        t->w1 = t->w0 + 1;
    for (int i = 0; i < t->nboxes; i++) {
        box *b = &t->boxes[i];
        double a = b->t0 > t->w0 ? b->t0 : t->w0, z = b->t1 < t->w1 ? b->t1 : t->w1;
        if (z > a)
            t->name_time[b->name] += z - a;
    }
}

static int collect(timeline *t, const hxb_json *events, char *err, size_t cap)
{
    double token0 = 0, token1 = 0;
    int have_token = 0;
    for (const hxb_json *e = events->child; e; e = e->next) {
        if (e->type != HXB_JOBJ)
            continue;
        const char *ph = hxb_json_str(hxb_json_get(e, "ph"), "");
        const char *name = hxb_json_str(hxb_json_get(e, "name"), "?");
        double ts = hxb_json_num(hxb_json_get(e, "ts"), 0), dur = hxb_json_num(hxb_json_get(e, "dur"), 0);
        if (!strcmp(ph, "M")) {
            if (!strcmp(name, "process_name") || !strcmp(name, "thread_name"))
                add_meta(t, e, !strcmp(name, "thread_name"));
            continue;
        }
        if (!strcmp(hxb_json_str(hxb_json_get(e, "cat"), ""), "token") && !strcmp(ph, "X")) {
            if (!have_token || ts >= token0)
                token0 = ts, token1 = ts + dur, have_token = 1;
            continue;
        }
        int l = lane_of(t, e);
        if (l < 0)
            continue;
        lane *ln = &t->lanes[l];
        int rc = 0;
        if (!strcmp(ph, "X"))
            rc = add_box(t, l, name_of(t, name), ts, ts + dur, 0);
        else if (!strcmp(ph, "i") || !strcmp(ph, "I"))
            rc = add_box(t, l, name_of(t, name), ts, ts, 1);
        else if (!strcmp(ph, "B") && ln->open_n < MAX_OPEN) {
            rc = (ln->open_name[ln->open_n] = name_of(t, name)) < 0;
            ln->open_ts[ln->open_n++] = ts;
        } else if (!strcmp(ph, "E") && ln->open_n > 0) {
            ln->open_n--;
            rc = add_box(t, l, ln->open_name[ln->open_n], ln->open_ts[ln->open_n], ts, 0);
        }
        if (rc) {
            snprintf(err, cap, "out of memory");
            return -1;
        }
    }
    if (!t->nboxes) {
        snprintf(err, cap, "no events to draw (expected \"ph\": \"X\", \"B\"/\"E\" or \"i\" events)");
        return -1;
    }
    window(t, have_token, token0, token1);
    /* A named process without events is an idle device: it keeps a lane. */
    for (int i = 0; i < t->nmetas && t->nlanes < MAX_LANES; i++) {
        int seen = t->metas[i].tid[0] != 0;
        for (int l = 0; l < t->nlanes && !seen; l++)
            seen = !strcmp(t->lanes[l].pid, t->metas[i].pid);
        if (!seen) {
            lane *ln = &t->lanes[t->nlanes++];
            memset(ln, 0, sizeof *ln);
            memcpy(ln->pid, t->metas[i].pid, sizeof ln->pid); /* same size, both NUL-terminated */
            ln->pid_num = atof(ln->pid);
        }
    }
    return 0;
}

static int lane_cmp(const void *a, const void *b)
{
    const lane *x = a, *y = b;
    if (x->pid_num != y->pid_num)
        return x->pid_num < y->pid_num ? -1 : 1;
    if (x->tid_num != y->tid_num)
        return x->tid_num < y->tid_num ? -1 : 1;
    int c = strcmp(x->pid, y->pid);
    return c ? c : strcmp(x->tid, y->tid);
}

/* Two lines: the process's name (a device), then the thread's (its tasks,
 * its copies); one line when only one of them is known. */
static void lane_label(FILE *f, const timeline *t, const lane *l, double x, double y, double h)
{
    const char *p = meta_name(t, l->pid, ""), *th = l->tid[0] ? meta_name(t, l->pid, l->tid) : "no events";
    if (p && th) {
        hxb_svg_text(f, x, y + h / 2 - 2, "end", 11, "#000", "%.40s", p);
        hxb_svg_text(f, x, y + h / 2 + 10, "end", 10, "#555", "%.40s", th);
    } else if (p || th) {
        hxb_svg_text(f, x, y + h / 2 + 4, "end", 11, "#000", "%.40s%s%s", p ? p : th, p ? " tid " : "",
                     p ? l->tid : "");
    } else {
        hxb_svg_text(f, x, y + h / 2 + 4, "end", 11, "#000", "pid %s tid %s", l->pid, l->tid);
    }
}

static void draw_legend(FILE *f, timeline *t, double left, double y0, int nleg)
{
    /* The names that took the most time, three per line; instants (a
     * migration, a retry) are all drawn as one red tick. */
    int shown[16], n = 0, instants = 0;
    for (int i = 0; i < t->nboxes; i++)
        instants |= t->boxes[i].instant;
    for (int k = 0; k < nleg + instants; k++) {
        double x = left + (k % 3) * 320, y = y0 + 18 * (k / 3);
        int best = -1;
        for (int i = 0; i < t->nnames && k < nleg; i++) {
            int used = 0;
            for (int j = 0; j < n; j++)
                used |= shown[j] == i;
            if (!used && t->name_time[i] > 0 && (best < 0 || t->name_time[i] > t->name_time[best]))
                best = i;
        }
        if (best < 0) {
            if (!instants)
                break;
            hxb_svg_rect(f, x + 5, y - 11, 2, 14, "#B00020", NULL);
            hxb_svg_text(f, x + 18, y, "start", 12, "#000", "instant events (migrations, retries...)");
            break;
        }
        shown[n++] = best;
        hxb_svg_rect(f, x, y - 10, 12, 12, hxb_svg_color(best), NULL);
        hxb_svg_text(f, x + 18, y, "start", 12, "#000", "%.30s  %.1f \u00b5s", t->names[best], t->name_time[best]);
    }
}

static void draw(FILE *f, timeline *t, const char *title)
{
    /* Lanes in pid/tid order: idx[row] is a lane, order[lane] its row. */
    int idx[MAX_LANES], order[MAX_LANES];
    for (int i = 0; i < t->nlanes; i++) {
        int j = i;
        for (; j > 0 && lane_cmp(&t->lanes[idx[j - 1]], &t->lanes[i]) > 0; j--)
            idx[j] = idx[j - 1];
        idx[j] = i;
    }
    for (int j = 0; j < t->nlanes; j++)
        order[idx[j]] = j;
    const double left = 280, top = 70, lane_h = 32, plot_w = 960;
    int nleg = t->nnames < 15 ? t->nnames : 15;
    int w = (int)(left + plot_w + 30), h = (int)(top + t->nlanes * lane_h + 40 + 18 * ((nleg + 3) / 3) + 10);
    double span = t->w1 - t->w0, scale = plot_w / span;
    hxb_svg_begin(f, w, h);
    hxb_svg_text(f, w / 2.0, 24, "middle", 16, "#000", "%s%s", t->token ? "one token through the devices: " : "",
                 title);
    hxb_svg_text(f, w / 2.0, 44, "middle", 12, "#333", "%.1f \u00b5s%s; time in \u00b5s", span,
                 t->token ? " (the trace's last \"token\" event)" : " (the whole trace)");
    double step = hxb_svg_nice_step(span, 8);
    for (double x = 0; x <= span + 1e-9; x += step) {
        double px = left + x * scale;
        hxb_svg_line(f, px, top - 6, px, top + t->nlanes * lane_h, "#e0e0e0", 1);
        hxb_svg_text(f, px, top - 10, "middle", 10, "#333", "%g", x);
    }
    for (int i = 0; i < t->nlanes; i++) {
        double y = top + i * lane_h;
        hxb_svg_rect(f, left, y + 1, plot_w, lane_h - 2, i % 2 ? "#f7f7f7" : "#eef2f7", NULL);
        lane_label(f, t, &t->lanes[idx[i]], left - 8, y, lane_h);
    }
    for (int i = 0; i < t->nboxes; i++) {
        const box *b = &t->boxes[i];
        if (b->t1 < t->w0 || b->t0 > t->w1)
            continue;
        double a = b->t0 > t->w0 ? b->t0 : t->w0, z = b->t1 < t->w1 ? b->t1 : t->w1;
        double x = left + (a - t->w0) * scale, bw = (z - a) * scale < 1 ? 1 : (z - a) * scale;
        double y = top + order[b->lane] * lane_h + 4;
        char tip[300];
        snprintf(tip, sizeof tip, "%s: %.1f \u00b5s at +%.1f \u00b5s", t->names[b->name], b->t1 - b->t0,
                 b->t0 - t->w0);
        if (b->instant) {
            hxb_svg_rect(f, x - 1, y - 3, 2, lane_h - 2, "#B00020", tip);
            continue;
        }
        /* A hair of background between boxes that touch. */
        hxb_svg_rect(f, x, y, bw > 2 ? bw - 0.5 : bw, lane_h - 8, hxb_svg_color(b->name), tip);
        if (bw > 7.0 * (double)strlen(t->names[b->name]) + 6)
            hxb_svg_text(f, x + bw / 2, y + lane_h / 2, "middle", 11, hxb_svg_ink(b->name), "%s",
                         t->names[b->name]);
    }
    draw_legend(f, t, left, top + t->nlanes * lane_h + 30, nleg);
    hxb_svg_end(f);
}

static char *read_all(const char *path, size_t *len, char *err, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, cap, "%s", strerror(errno));
        return NULL;
    }
    size_t n = 0, size = 1 << 16;
    char *buf = malloc(size);
    while (buf) {
        n += fread(buf + n, 1, size - n, f);
        if (n < size)
            break;
        char *b = realloc(buf, size *= 2);
        if (!b)
            free(buf);
        buf = b;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        snprintf(err, cap, bad ? "read error" : "out of memory");
        return NULL;
    }
    *len = n;
    return buf;
}

int hxb_timeline_write(const char *trace_path, const char *svg_path, const char *title, char *err, size_t cap)
{
    size_t len;
    char *text = read_all(trace_path, &len, err, cap);
    if (!text)
        return -1;
    hxb_json *root = hxb_json_parse(text, len, err, cap);
    free(text);
    if (!root)
        return -1;
    const hxb_json *events = root->type == HXB_JARR ? root : hxb_json_get(root, "traceEvents");
    timeline *t = calloc(1, sizeof *t);
    int rc = -1;
    if (!t)
        snprintf(err, cap, "out of memory");
    else if (!events || events->type != HXB_JARR)
        snprintf(err, cap, "not a Chrome trace: no \"traceEvents\" array");
    else if (collect(t, events, err, cap) == 0) {
        FILE *f = fopen(svg_path, "w");
        if (!f) {
            snprintf(err, cap, "cannot write %s: %s", svg_path, strerror(errno));
        } else {
            const char *slash = strrchr(trace_path, '/');
            draw(f, t, title ? title : slash ? slash + 1 : trace_path);
            rc = fclose(f) ? -1 : 0;
            if (rc)
                snprintf(err, cap, "writing %s failed", svg_path);
        }
    }
    if (t) {
        for (int i = 0; i < t->nnames; i++)
            free(t->names[i]);
        free(t->boxes);
        free(t);
    }
    hxb_json_free(root);
    return rc;
}
