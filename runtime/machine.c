/* The machine description format:
 *
 *     # comment
 *     machine = two-socket EPYC + H200 + Alveo U55C
 *     [device cpu]              one section per device, in device order
 *     family = cpu              cpu | opencl | cuda
 *     kind = cpu                cpu | gpu | fpga | accelerator
 *     units = 192
 *     flops.f32 = 14.7T         peak per second; f16 and int8 default to f32's
 *     gemm.int8 = 166T          effective flop/s that real kernels of this
 *                               precision reach (calibrated against published
 *                               runs); replaces peak x compute efficiency
 *     stream.int8 = 0.5         fraction of the bandwidth kernels of this
 *                               precision reach (calibrated); replaces the
 *                               memory efficiency for them
 *     overlap = no              a kernel's compute and memory times add up
 *                               (default yes: the longer one bounds it)
 *     memory = 1536G            bytes
 *     bandwidth = 921G          bytes per second
 *     unified = yes             works in host memory (default: yes for cpu)
 *     link = 55G                bytes per second to host memory (own memory)
 *     latency = 10us            per transfer
 *     launch = 4us              per task: its time outside the kernel
 *                               (hand-over, wake-up, the worker's own work);
 *                               "measured 2us": this host's measured time
 *                               (task_launch in the performance models, see
 *                               runtime/perfmodel.h), 2us where none was
 *     efficiency = 0.7 0.8      of peak flops, of peak bandwidth
 *     runs = attention kv_store codelets it implements (default: all)
 *     times = roofline          or "measured": this host's performance
 *                               models where they know the task
 *     shares = cpu              runs on the cores of device [device cpu]
 *                               (PoCL on this host's CPU): the two never
 *                               run tasks at the same time
 *
 * Numbers take the suffixes k M G T P (powers of 1000) and, for times,
 * s ms us ns. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "runtime/machine.h"

/* The file is read whole; a description is a few hundred bytes. */
#define HX_MACHINE_MAX_FILE (1u << 20)

typedef struct {
    const char *origin;
    int line;
} where;

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

/* A positive finite number with an optional SI or time suffix. */
static hx_status number(const where *w, const char *key, const char *v, int is_time, double *out)
{
    errno = 0;
    char *end;
    double x = strtod(v, &end);
    static const struct {
        const char *s;
        double f;
        int time;
    } suffixes[] = {{"", 1, 0},    {"k", 1e3, 0},  {"K", 1e3, 0},  {"M", 1e6, 0},   {"G", 1e9, 0},
                    {"T", 1e12, 0}, {"P", 1e15, 0}, {"s", 1, 1},   {"ms", 1e-3, 1}, {"us", 1e-6, 1},
                    {"ns", 1e-9, 1}};
    int ok = 0;
    if (end != v && errno == 0)
        for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0] && !ok; i++)
            if (!strcmp(trim(end), suffixes[i].s) && (is_time ? suffixes[i].time || !*suffixes[i].s : !suffixes[i].time)) {
                x *= suffixes[i].f;
                ok = 1;
            }
    if (!ok || !isfinite(x) || x < 0)
        return hx_error(HX_ERR_FORMAT, "%s:%d: %s = '%s': expected a non-negative number%s", w->origin, w->line,
                        key, v, is_time ? " of seconds (s, ms, us, ns)" : " (suffixes k M G T P)");
    *out = x;
    return HX_OK;
}

static hx_status yes_no(const where *w, const char *key, const char *v, int *out)
{
    if (!strcmp(v, "yes") || !strcmp(v, "true") || !strcmp(v, "1"))
        *out = 1;
    else if (!strcmp(v, "no") || !strcmp(v, "false") || !strcmp(v, "0"))
        *out = 0;
    else
        return hx_error(HX_ERR_FORMAT, "%s:%d: %s = '%s': expected yes or no", w->origin, w->line, key, v);
    return HX_OK;
}

static hx_status word(const where *w, const char *key, const char *v, const char *const *words, int *out)
{
    for (int i = 0; words[i]; i++)
        if (!strcmp(v, words[i])) {
            *out = i;
            return HX_OK;
        }
    char known[128] = "";
    for (int i = 0; words[i]; i++) {
        strncat(known, i ? ", " : "", sizeof known - strlen(known) - 1);
        strncat(known, words[i], sizeof known - strlen(known) - 1);
    }
    return hx_error(HX_ERR_FORMAT, "%s:%d: %s = '%s': expected one of %s", w->origin, w->line, key, v, known);
}

static hx_status runs_list(const where *w, char *v, hx_machine_device *d)
{
    d->nruns = 0;
    if (!strcmp(v, "all"))
        return HX_OK;
    for (char *save = NULL, *tok = strtok_r(v, " \t,", &save); tok; tok = strtok_r(NULL, " \t,", &save)) {
        if (d->nruns == HX_MACHINE_MAX_RUNS || strlen(tok) >= sizeof d->runs[0])
            return hx_error(HX_ERR_FORMAT, "%s:%d: runs: at most %d codelet names of under 32 characters",
                            w->origin, w->line, HX_MACHINE_MAX_RUNS);
        snprintf(d->runs[d->nruns++], sizeof d->runs[0], "%s", tok);
    }
    if (!d->nruns)
        return hx_error(HX_ERR_FORMAT, "%s:%d: runs: an empty list (write 'all' or codelet names)", w->origin,
                        w->line);
    return HX_OK;
}

static hx_status device_key(const where *w, hx_machine_device *d, const char *k, char *v, int *seen_unified)
{
    static const char *const families[] = {"cpu", "opencl", "cuda", NULL};
    static const char *const kinds[] = {"cpu", "gpu", "fpga", "accelerator", NULL};
    static const char *const times[] = {"roofline", "measured", NULL};
    static const char *const precisions[] = {"flops.f32", "flops.f16", "flops.int8"};
    static const char *const gemms[] = {"gemm.f32", "gemm.f16", "gemm.int8"};
    static const char *const streams[] = {"stream.f32", "stream.f16", "stream.int8"};
    int x;
    hx_status s;
    for (int p = 0; p < HX_PREC_COUNT; p++) {
        if (!strcmp(k, precisions[p]))
            return number(w, k, v, 0, &d->flops[p]);
        if (!strcmp(k, gemms[p]))
            return number(w, k, v, 0, &d->gemm[p]);
        if (!strcmp(k, streams[p])) {
            if ((s = number(w, k, v, 0, &d->stream[p])))
                return s;
            if (d->stream[p] <= 0 || d->stream[p] > 1)
                return hx_error(HX_ERR_FORMAT, "%s:%d: %s: a fraction in (0, 1] expected", w->origin, w->line, k);
            return HX_OK;
        }
    }
    if (!strcmp(k, "overlap")) {
        s = yes_no(w, k, v, &x);
        d->additive = !x;
        return s;
    }
    if (!strcmp(k, "name")) {
        snprintf(d->name, sizeof d->name, "%s", v);
        return HX_OK;
    }
    if (!strcmp(k, "family")) {
        s = word(w, k, v, families, &x);
        d->family = (hx_device_family)x;
        return s;
    }
    if (!strcmp(k, "kind")) {
        s = word(w, k, v, kinds, &x);
        d->kind = (hx_device_kind)x;
        return s;
    }
    if (!strcmp(k, "times")) {
        s = word(w, k, v, times, &x);
        d->measured = x;
        return s;
    }
    if (!strcmp(k, "units")) {
        double u;
        if ((s = number(w, k, v, 0, &u)))
            return s;
        if (u < 1 || u > 1e6 || u != floor(u))
            return hx_error(HX_ERR_FORMAT, "%s:%d: units = %s: expected a whole number from 1", w->origin, w->line,
                            v);
        d->units = (int)u;
        return HX_OK;
    }
    if (!strcmp(k, "memory"))
        return number(w, k, v, 0, &d->mem_bytes);
    if (!strcmp(k, "bandwidth"))
        return number(w, k, v, 0, &d->mem_bw);
    if (!strcmp(k, "link"))
        return number(w, k, v, 0, &d->link_bw);
    if (!strcmp(k, "latency"))
        return number(w, k, v, 1, &d->link_latency);
    if (!strcmp(k, "launch")) {
        d->launch_measured = !strncmp(v, "measured", 8) && (!v[8] || isspace((unsigned char)v[8]));
        if (d->launch_measured && !*(v = trim(v + 8)))
            return hx_error(HX_ERR_FORMAT, "%s:%d: launch = measured: the time to use where none was measured "
                                           "is missing (launch = measured 2us)", w->origin, w->line);
        return number(w, k, v, 1, &d->launch);
    }
    if (!strcmp(k, "unified")) {
        *seen_unified = 1;
        return yes_no(w, k, v, &d->unified);
    }
    if (!strcmp(k, "runs"))
        return runs_list(w, v, d);
    if (!strcmp(k, "shares")) {
        if (strlen(v) >= sizeof d->shares_label)
            return hx_error(HX_ERR_FORMAT, "%s:%d: shares: a device label of under 64 characters", w->origin,
                            w->line);
        snprintf(d->shares_label, sizeof d->shares_label, "%s", v);
        return HX_OK;
    }
    if (!strcmp(k, "efficiency")) {
        char *second = v + strcspn(v, " \t");
        if (*second)
            *second++ = '\0';
        second = trim(second);
        if ((s = number(w, k, v, 0, &d->compute_eff)) ||
            (s = number(w, k, *second ? second : v, 0, &d->mem_eff)))
            return s;
        if (d->compute_eff <= 0 || d->compute_eff > 1 || d->mem_eff <= 0 || d->mem_eff > 1)
            return hx_error(HX_ERR_FORMAT, "%s:%d: efficiency: fractions in (0, 1] expected", w->origin, w->line);
        return HX_OK;
    }
    return hx_error(HX_ERR_FORMAT,
                    "%s:%d: unknown key '%s' (name, family, kind, units, flops.f32, flops.f16, flops.int8, gemm.f32, "
                    "gemm.f16, gemm.int8, stream.f32, stream.f16, stream.int8, overlap, memory, bandwidth, unified, link, latency, launch, efficiency, runs, times, shares)",
                    w->origin, w->line, k);
}

/* What a section must say for the simulator to time its tasks. */
static hx_status finish_device(const char *origin, hx_machine_device *d, int seen_unified)
{
    if (!seen_unified)
        d->unified = d->family == HX_FAMILY_CPU;
    if (d->flops[HX_PREC_F32] <= 0 || d->mem_bw <= 0 || d->mem_bytes <= 0)
        return hx_error(HX_ERR_FORMAT, "%s: device '%s' needs flops.f32, memory and bandwidth above 0", origin,
                        d->name);
    for (int p = 1; p < HX_PREC_COUNT; p++)
        if (d->flops[p] <= 0)
            d->flops[p] = d->flops[HX_PREC_F32];
    if (!d->unified && d->link_bw <= 0)
        return hx_error(HX_ERR_FORMAT, "%s: device '%s' has its own memory: it needs link (bytes/s to the host)",
                        origin, d->name);
    if (d->family == HX_FAMILY_CPU && !d->unified)
        return hx_error(HX_ERR_FORMAT, "%s: device '%s': a cpu device works in host memory", origin, d->name);
    return HX_OK;
}

static void device_defaults(hx_machine_device *d, const char *section)
{
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", section);
    snprintf(d->label, sizeof d->label, "%s", section);
    d->shares = -1;
    d->units = 1;
    d->compute_eff = 0.7;
    d->mem_eff = 0.8;
}

hx_status hx_machine_parse(const char *text, const char *origin, hx_machine *out)
{
    if (!text || !out)
        return hx_error(HX_ERR_INVALID_ARG, "hx_machine_parse: NULL argument");
    if (!origin)
        origin = "machine";
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", origin);
    hx_machine_device *d = NULL;
    int seen_unified = 0;
    where w = {origin, 0};
    hx_status s = HX_OK;
    for (const char *p = text; *p && s == HX_OK;) {
        size_t n = strcspn(p, "\n");
        char line[512];
        w.line++;
        if (n >= sizeof line)
            return hx_error(HX_ERR_FORMAT, "%s:%d: line longer than %zu bytes", origin, w.line, sizeof line - 1);
        memcpy(line, p, n);
        line[n] = '\0';
        p += n + (p[n] == '\n');
        line[strcspn(line, "#")] = '\0';
        char *l = trim(line);
        if (!*l)
            continue;
        if (*l == '[') {
            char *close = strchr(l, ']');
            if (!close || trim(close + 1)[0] || strncmp(l, "[device", 7))
                return hx_error(HX_ERR_FORMAT, "%s:%d: expected a section '[device NAME]', got '%s'", origin,
                                w.line, l);
            *close = '\0';
            if (d && (s = finish_device(origin, d, seen_unified)))
                return s;
            if (out->ndevices == HX_MAX_DEVICES)
                return hx_error(HX_ERR_FORMAT, "%s:%d: more than %d devices", origin, w.line, HX_MAX_DEVICES);
            d = &out->dev[out->ndevices++];
            char *name = trim(l + 7);
            device_defaults(d, *name ? name : "device");
            seen_unified = 0;
            continue;
        }
        char *eq = strchr(l, '=');
        if (!eq)
            return hx_error(HX_ERR_FORMAT, "%s:%d: expected 'key = value', got '%s'", origin, w.line, l);
        *eq = '\0';
        char *k = trim(l), *v = trim(eq + 1);
        if (!*v)
            return hx_error(HX_ERR_FORMAT, "%s:%d: %s has no value", origin, w.line, k);
        if (!d) {
            if (strcmp(k, "machine"))
                return hx_error(HX_ERR_FORMAT, "%s:%d: '%s' before the first [device] section (only 'machine')",
                                origin, w.line, k);
            snprintf(out->name, sizeof out->name, "%s", v);
            continue;
        }
        s = device_key(&w, d, k, v, &seen_unified);
    }
    if (s)
        return s;
    if (!d)
        return hx_error(HX_ERR_FORMAT, "%s: no [device] section", origin);
    if ((s = finish_device(origin, d, seen_unified)))
        return s;
    for (int i = 0; i < out->ndevices; i++) {
        hx_machine_device *x = &out->dev[i];
        if (!x->shares_label[0])
            continue;
        for (int j = 0; j < out->ndevices; j++)
            if (j != i && !strcmp(out->dev[j].label, x->shares_label))
                x->shares = j;
        if (x->shares < 0)
            return hx_error(HX_ERR_FORMAT, "%s: device '%s' shares the cores of '%s', which is not another device",
                            origin, x->label, x->shares_label);
    }
    return HX_OK;
}

hx_status hx_machine_load(const char *path, hx_machine *out)
{
    if (!path || !out)
        return hx_error(HX_ERR_INVALID_ARG, "hx_machine_load: NULL argument");
    FILE *f = fopen(path, "rb");
    if (!f)
        return hx_error(HX_ERR_IO, "machine description %s: %s", path, strerror(errno));
    char *text = malloc(HX_MACHINE_MAX_FILE + 1);
    if (!text) {
        fclose(f);
        return hx_error(HX_ERR_NO_MEMORY, "machine description %s", path);
    }
    size_t n = fread(text, 1, HX_MACHINE_MAX_FILE + 1, f);
    int bad = ferror(f);
    fclose(f);
    hx_status s;
    if (bad)
        s = hx_error(HX_ERR_IO, "machine description %s: read error", path);
    else if (n > HX_MACHINE_MAX_FILE)
        s = hx_error(HX_ERR_FORMAT, "machine description %s: larger than %u bytes", path, HX_MACHINE_MAX_FILE);
    else if (memchr(text, '\0', n))
        s = hx_error(HX_ERR_FORMAT, "machine description %s: not a text file", path);
    else {
        text[n] = '\0';
        s = hx_machine_parse(text, path, out);
    }
    free(text);
    return s;
}

double hx_machine_roofline(const hx_machine_device *d, hx_precision p, double flops, double bytes)
{
    if ((unsigned)p >= HX_PREC_COUNT)
        p = HX_PREC_F32;
    double rate = d->gemm[p] > 0 ? d->gemm[p] : d->flops[p] * d->compute_eff;
    double compute = flops / rate;
    double memory = bytes / (d->mem_bw * (d->stream[p] > 0 ? d->stream[p] : d->mem_eff));
    if (d->additive)
        return d->launch + compute + memory;
    return d->launch + (compute > memory ? compute : memory);
}

double hx_machine_link_time(const hx_machine_device *d, double bytes)
{
    return d->unified ? 0 : d->link_latency + bytes / d->link_bw;
}

int hx_machine_runs(const hx_machine_device *d, const char *name)
{
    if (!d->nruns)
        return 1;
    /* A fused matmul_multi runs as its matmuls on every device family:
     * a device runs it where it runs matmul. */
    if (name && !strcmp(name, "matmul_multi"))
        name = "matmul";
    for (int i = 0; i < d->nruns; i++)
        if (name && !strcmp(d->runs[i], name))
            return 1;
    return 0;
}
