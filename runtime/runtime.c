/* The runtime context: options, discovery, the device table, statistics. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/error.h"
#include "runtime/handle.h"
#include "runtime/inject.h"
#include "runtime/perfmodel.h"
#include "runtime/runtime.h"
#include "runtime/sim.h"
#include "runtime/topology.h"
#include "runtime/worker.h"

double hx_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double hx_runtime_now(const hx_runtime *rt) { return rt ? rt->executor->now(rt) : hx_now(); }

/* The queries below that return a value, not a status, answer 0 (or NULL)
 * for a handle that is not open, the detail in hx_last_error(). */
static int runtime_open_as(const hx_runtime *rt, const char *fn)
{
    return hx_handle_check(rt, HX_HANDLE_RUNTIME, fn) == HX_OK;
}

double hx_runtime_clock(const hx_runtime *rt)
{
    return runtime_open_as(rt, "hx_runtime_clock") ? hx_runtime_now(rt) : 0;
}

int hx_runtime_simulated(const hx_runtime *rt)
{
    return runtime_open_as(rt, "hx_runtime_simulated") && rt->executor->simulated;
}

hx_runtime_options hx_runtime_options_default(void)
{
    hx_runtime_options o = {0};
    o.pin_threads = -1;
    return o;
}

const char *hx_device_kind_str(hx_device_kind k)
{
    switch (k) {
    case HX_KIND_CPU: return "cpu";
    case HX_KIND_GPU: return "gpu";
    case HX_KIND_FPGA: return "fpga";
    case HX_KIND_ACCELERATOR: return "accelerator";
    default: return "unknown";
    }
}

/* ---- options ---------------------------------------------------------- */

typedef struct {
    char devices[256];
    int cpu_threads;
    int fpga_emulation;
    char sched[64];
    int pin;
    char inject[1024];
    char trace[1024];
    char perfmodel_dir[512]; /* "" = memory only */
    char machine[1024];      /* "" = this machine, else a description to simulate */
} resolved_options;

static const char *env_or(const char *v, const char *env, const char *dflt)
{
    if (v)
        return v;
    const char *e = getenv(env);
    return e ? e : dflt;
}

static hx_status parse_int(const char *name, const char *s, int lo, int hi, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi)
        return hx_error(HX_ERR_INVALID_ARG, "%s='%s': expected an integer in [%d, %d]", name, s, lo, hi);
    *out = (int)v;
    return HX_OK;
}

static hx_status resolve_options(const hx_runtime_options *o, resolved_options *r)
{
    hx_runtime_options dflt = hx_runtime_options_default();
    if (!o)
        o = &dflt;
    snprintf(r->devices, sizeof r->devices, "%s", env_or(o->devices, "HX_DEVICES", "all"));
    snprintf(r->sched, sizeof r->sched, "%s", env_or(o->sched, "HX_SCHED", "static"));
    const char *strs[4] = {env_or(o->inject, "HX_INJECT", ""), env_or(o->trace, "HX_TRACE", ""),
                           o->perfmodel_dir, env_or(o->machine, "HX_SIM", "")};
    char *dst[4] = {r->inject, r->trace, r->perfmodel_dir, r->machine};
    const size_t cap[4] = {sizeof r->inject, sizeof r->trace, sizeof r->perfmodel_dir, sizeof r->machine};
    static const char *const what[4] = {"inject", "trace", "perfmodel_dir", "machine"};
    if (!strs[2])
        strs[2] = hx_perfmodel_default_dir(r->perfmodel_dir, sizeof r->perfmodel_dir);
    else if (!strcmp(strs[2], "off"))
        strs[2] = "";
    for (int i = 0; i < 4; i++) {
        const char *v = strs[i] ? strs[i] : "";
        if (strlen(v) >= cap[i])
            return hx_error(HX_ERR_INVALID_ARG, "%s: longer than %zu characters", what[i], cap[i] - 1);
        if (dst[i] != v)
            memmove(dst[i], v, strlen(v) + 1);
    }
    if (o->cpu_threads < 0 || o->cpu_threads > 1024)
        return hx_error(HX_ERR_INVALID_ARG, "cpu_threads=%d: expected 0 (automatic) to 1024", o->cpu_threads);
    r->cpu_threads = o->cpu_threads;
    const char *e;
    hx_status s;
    if (!r->cpu_threads && (e = getenv("HX_THREADS")) && (s = parse_int("HX_THREADS", e, 0, 1024, &r->cpu_threads)))
        return s;
    const char *em = env_or(o->fpga_emulation, "HX_FPGA_EMULATION", "");
    if (!strcmp(em, "pocl"))
        r->fpga_emulation = 1;
    else if (!*em || !strcmp(em, "off") || !strcmp(em, "0"))
        r->fpga_emulation = 0;
    else
        return hx_error(HX_ERR_INVALID_ARG, "fpga_emulation='%s': expected 'pocl' or 'off'", em);
    r->pin = o->pin_threads;
    if (r->pin < -1 || r->pin > 1)
        return hx_error(HX_ERR_INVALID_ARG, "pin_threads=%d: expected -1, 0 or 1", r->pin);
    if (r->pin == -1) {
        /* Off by default: a thread pinned to a core that another process
         * holds cannot move to the core that is free, and every task waits
         * for it.  On a dedicated machine HX_PIN=1 saves a little. */
        r->pin = 0;
        if ((e = getenv("HX_PIN")) && (s = parse_int("HX_PIN", e, 0, 1, &r->pin)))
            return s;
    }
    return HX_OK;
}

/* ---- device selection ------------------------------------------------- */

/* The device families' names and selectors are theirs (hx_device_ops):
 * the runtime knows "all" and what the backends it is handed offer. */

/* Whether backend b offers `sel` for a device of kind `kind` (-1: any). */
static int offers(const hx_device_ops *b, const char *sel, int kind)
{
    for (const hx_device_selector *x = b->selectors; x && x->name; x++)
        if (!strcmp(x->name, sel) && (kind < 0 || x->kind < 0 || x->kind == kind))
            return 1;
    return 0;
}

static int selector_matches(const hx_device_ops *const *backends, const char *sel, const hx_device_info *d)
{
    if (!strcmp(sel, "all"))
        return 1;
    for (int b = 0; backends[b]; b++)
        if (backends[b]->family == d->family && offers(backends[b], sel, (int)d->kind))
            return 1;
    return 0;
}

/* Whether discovering backend b may find a device `sel` selects; the
 * simulator's (any family) is always run, its devices selected after. */
static int selector_backend(const char *sel, const hx_device_ops *b)
{
    return !strcmp(sel, "all") || b->family == HX_FAMILY_COUNT || offers(b, sel, -1);
}

/* Splits "cpu, fpga" into tokens, checking each is a name some backend
 * offers. */
static hx_status split_selectors(const hx_device_ops *const *backends, char *list, char **tok, int max, int *n)
{
    *n = 0;
    for (char *save = NULL, *t = strtok_r(list, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        int known = !strcmp(t, "all");
        for (int b = 0; backends[b] && !known; b++)
            known = offers(backends[b], t, -1);
        if (!known) {
            /* "known: all, cpu, opencl, ...", each name once, in the backends' order */
            char names[256] = "all";
            for (int b = 0; backends[b]; b++)
                for (const hx_device_selector *x = backends[b]->selectors; x && x->name; x++) {
                    int dup = 0;
                    for (int c = 0; c <= b && !dup; c++)
                        for (const hx_device_selector *y = backends[c]->selectors; y && y->name && y != x; y++)
                            dup |= !strcmp(y->name, x->name);
                    if (!dup && strlen(names) + strlen(x->name) + 3 < sizeof names)
                        strcat(strcat(names, ", "), x->name);
                }
            return hx_error(HX_ERR_INVALID_ARG, "unknown device '%s' (known: %s)", t, names);
        }
        if (*n == max)
            return hx_error(HX_ERR_INVALID_ARG, "too many device names");
        tok[(*n)++] = t;
    }
    if (*n == 0)
        return hx_error(HX_ERR_INVALID_ARG, "empty device list");
    return HX_OK;
}

/* Whether the devices come from "all" alone: no name asks for a device
 * that computes on the host's cores.  "all" is every device that adds
 * compute; a device that only runs on the cores the CPU device already
 * uses (PoCL's CPU device) adds none, and a policy free to place a task
 * on either would change the rounding, hence the text, from run to run.
 * It opens when a selector that offers it is named ("opencl") or as an
 * emulated FPGA (fpga_emulation). */
static int default_set_only(const hx_device_ops *const *backends, char **sel, int nsel)
{
    int all = 0;
    for (int i = 0; i < nsel; i++) {
        all |= !strcmp(sel[i], "all");
        for (int b = 0; backends[b]; b++)
            for (const hx_device_selector *x = backends[b]->selectors; x && x->name; x++)
                if (x->host_cores && !strcmp(x->name, sel[i]))
                    return 0;
    }
    return all;
}

/* The family's name, as its backend gives it. */
static const char *family_name(const hx_runtime *rt, hx_device_family f)
{
    for (int b = 0; rt->backends && rt->backends[b]; b++)
        if (rt->backends[b]->family == f)
            return rt->backends[b]->name;
    return "unknown";
}

/* ---- open / close ------------------------------------------------------ */

hx_status hx_runtime_add_device(hx_runtime *rt, const hx_device_info *info, const hx_device_ops *ops,
                                void *impl)
{
    if (rt->ndevices == HX_MAX_DEVICES)
        return hx_error(HX_ERR_RANGE, "more than %d devices", HX_MAX_DEVICES);
    hx_device *d = calloc(1, sizeof *d);
    if (!d)
        return hx_error(HX_ERR_NO_MEMORY, "device table");
    d->info = *info;
    d->ops = ops;
    d->impl = impl;
    d->rt = rt;
    for (int op = 0; op < HX_OP_COUNT && ops->bind_op; op++) {
        d->op_impl[op] = hx_op_codelets[op];
        d->op_bound[op] = ops->bind_op(d, (hx_op)op, &d->op_impl[op]) != 0;
    }
    rt->devices[rt->ndevices++] = d;
    return HX_OK;
}

const hx_codelet *hx_device_codelet(const hx_device *d, const hx_codelet *cl)
{
    int op = hx_op_of(cl);
    if (op < 0)
        return cl;
    return d->op_bound[op] ? &d->op_impl[op] : NULL;
}

void hx_runtime_set_absence(hx_runtime *rt, hx_device_family f, const char *fmt, ...)
{
    if (f >= HX_FAMILY_COUNT)
        return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    free(rt->absence[f]);
    rt->absence[f] = strdup(buf);
}

static void destroy_device(hx_device *d)
{
    if (d->worker)
        hx_worker_join(d);
    if (d->ops->destroy)
        d->ops->destroy(d);
    free(d);
}

/* Runs the backends `sel` may need (the simulator's, or rt's own), then
 * keeps the devices `sel` selects, which rt's backends name. */
static hx_status discover(hx_runtime *rt, const hx_device_ops *const *backends, char **sel, int nsel)
{
    for (int b = 0; backends[b]; b++) {
        int wanted = 0;
        for (int i = 0; i < nsel; i++)
            wanted |= selector_backend(sel[i], backends[b]);
        if (!wanted)
            continue;
        hx_status s = backends[b]->discover(rt, &rt->discover);
        if (s)
            return hx_error_context(s, "discovering %s devices", backends[b]->name);
    }
    /* Keep the selected devices; every explicit name must match one. */
    for (int i = 0; i < nsel; i++) {
        if (!strcmp(sel[i], "all"))
            continue;
        int found = 0;
        for (int d = 0; d < rt->ndevices; d++)
            found |= selector_matches(rt->backends, sel[i], &rt->devices[d]->info);
        if (!found) {
            const char *why = NULL;
            for (int b = 0; rt->backends[b] && !why; b++)
                if (rt->backends[b]->family < HX_FAMILY_COUNT && offers(rt->backends[b], sel[i], -1))
                    why = rt->absence[rt->backends[b]->family];
            return hx_error(HX_ERR_NO_DEVICE, "device '%s' was asked for but none was found%s%s", sel[i],
                            why ? ": " : "", why ? why : "");
        }
    }
    int kept = 0;
    for (int d = 0; d < rt->ndevices; d++) {
        int keep = 0;
        for (int i = 0; i < nsel; i++)
            keep |= selector_matches(rt->backends, sel[i], &rt->devices[d]->info);
        if (keep)
            rt->devices[kept++] = rt->devices[d];
        else
            destroy_device(rt->devices[d]);
    }
    rt->ndevices = kept;
    if (kept == 0)
        return hx_error(HX_ERR_NO_DEVICE, "no device found");
    rt->n_memory_nodes = 1;
    for (int d = 0; d < rt->ndevices; d++) {
        hx_device_info *info = &rt->devices[d]->info;
        info->index = d;
        info->memory_node = info->unified_memory ? 0 : rt->n_memory_nodes++;
    }
    return HX_OK;
}

hx_status hx_runtime_perfmodels_open(hx_runtime *rt, const char *dir, struct hx_perfmodel **out)
{
    char keys[HX_MAX_DEVICES][128];
    const char *ptr[HX_MAX_DEVICES];
    for (int d = 0; d < rt->ndevices; d++) {
        hx_perfmodel_device_key(family_name(rt, rt->devices[d]->info.family), &rt->devices[d]->info, keys[d],
                                sizeof keys[d]);
        ptr[d] = keys[d];
    }
    return hx_perfmodel_open(out, dir, ptr, rt->ndevices);
}

static void runtime_teardown(hx_runtime *rt);

static hx_status runtime_open(hx_runtime **out, const hx_runtime_options *opts, const hx_device_ops *const *backends)
{
    if (!out)
        return hx_error(HX_ERR_INVALID_ARG, "hx_runtime_open: NULL output");
    *out = NULL;
    resolved_options r;
    hx_status s = resolve_options(opts, &r);
    if (s)
        return s;
    char *sel[16];
    int nsel;
    if (!backends || !backends[0])
        return hx_error(HX_ERR_INVALID_ARG, "hx_runtime_open_with: no device family");
    if ((s = split_selectors(backends, r.devices, sel, 16, &nsel)))
        return s;
    hx_runtime *rt = calloc(1, sizeof *rt);
    if (!rt)
        return hx_error(HX_ERR_NO_MEMORY, "runtime");
    pthread_mutex_init(&rt->lock, NULL);
    pthread_cond_init(&rt->idle, NULL);
    hx_task_pool_init(&rt->task_pool);
    hx_trace_init(&rt->trace);
    rt->open_time = hx_now();
    rt->executor = &hx_executor_threads;
    rt->backends = backends;
    /* An open handle from here on: discovery and the simulator use the
     * runtime's public queries. */
    if ((s = hx_handle_add(rt, HX_HANDLE_RUNTIME, NULL, "runtime"))) {
        runtime_teardown(rt);
        return s;
    }
    if ((s = hx_topology_load(&rt->topology, &rt->topo_info)))
        goto fail;
    rt->discover = (hx_discover_options){.cpu_threads = r.cpu_threads,
                                         .pin_threads = r.pin,
                                         .fpga_emulation = r.fpga_emulation,
                                         .skip_host_cores = default_set_only(backends, sel, nsel),
                                         .topology = rt->topology,
                                         .machine = r.machine};
    if ((s = hx_sched_init(&rt->sched, rt, r.sched)))
        goto fail;
    /* A simulated machine is one more backend, whose described devices
     * stand in for this machine's. */
    static const hx_device_ops *const simulated[] = {&hx_sim_backend, NULL};
    if ((s = discover(rt, r.machine[0] ? simulated : backends, sel, nsel)))
        goto fail;
    /* Every policy records (the models are calibrated by whatever runs,
     * and the simulator reads them); dmda also consults them. */
    if ((s = hx_runtime_perfmodels_open(rt, r.perfmodel_dir, &rt->sched.pm)))
        goto fail;
    if ((s = rt->executor->start(rt, r.perfmodel_dir)))
        goto fail;
    rt->open_time = hx_runtime_now(rt);
    const char *launch = getenv("HX_GRAPH_LAUNCH");
    rt->graph_launch = !(launch && !strcmp(launch, "0"));
    if (r.inject[0] && (s = hx_inject_apply_spec(rt, r.inject)))
        goto fail;
    if (r.trace[0] && (s = hx_trace_start(rt, r.trace)))
        goto fail;
    *out = rt;
    return HX_OK;
fail:
    hx_handle_remove(rt, HX_HANDLE_RUNTIME, "hx_runtime_open");
    runtime_teardown(rt);
    return s;
}

hx_status hx_runtime_open_with(hx_runtime **out, const hx_runtime_options *opts,
                               const hx_device_ops *const *backends)
{
    hx_api_enter();
    return hx_api_leave(runtime_open(out, opts, backends));
}

/* Refused while something the caller holds still refers to the runtime:
 * SQLite's answer to sqlite3_close with statements open (SQLITE_BUSY),
 * which leaves every handle usable, rather than a close that frees what
 * the caller will touch next. */
static hx_status runtime_close(hx_runtime *rt)
{
    hx_status s = hx_handle_check(rt, HX_HANDLE_RUNTIME, "hx_runtime_close");
    if (s)
        return s;
    char name[72];
    size_t n = hx_handle_owned(rt, HX_HANDLE_MODEL, name, sizeof name);
    if (n)
        return hx_error(HX_ERR_STATE, "hx_runtime_close: %zu model%s still loaded ('%s'%s); free %s first", n,
                        n > 1 ? "s are" : " is", name, n > 1 ? " and others" : "", n > 1 ? "them" : "it");
    int nb = atomic_load(&rt->buffers);
    if (nb)
        return hx_error(HX_ERR_STATE, "hx_runtime_close: %d buffer%s not destroyed; destroy %s first", nb,
                        nb > 1 ? "s are" : " is", nb > 1 ? "them" : "it");
    /* Of two closes racing, one removes the handle and goes on. */
    if ((s = hx_handle_remove(rt, HX_HANDLE_RUNTIME, "hx_runtime_close")))
        return s;
    runtime_teardown(rt);
    return HX_OK;
}

hx_status hx_runtime_close(hx_runtime *rt)
{
    hx_api_enter();
    return hx_api_leave(rt ? runtime_close(rt) : HX_OK);
}

/* Everything the runtime owns goes (also after a failed open: the last
 * error is left as it is). */
static void runtime_teardown(hx_runtime *rt)
{
    if (rt->sched.policy) {
        hx_runtime_drain(rt);
        /* A trace still recording (the `trace` option, or never stopped)
         * is written now. */
        if (atomic_load(&rt->trace.on) && hx_trace_stop(rt))
            fprintf(stderr, "hetero: %s\n", hx_last_error()); /* nobody else can hear of it */
        hx_sched_shutdown(&rt->sched);
    }
    for (int d = 0; d < rt->ndevices; d++)
        destroy_device(rt->devices[d]);
    hx_perfmodel_close(rt->sched.pm);
    rt->sched.pm = NULL;
    hx_sched_deinit(&rt->sched);
    hx_trace_destroy(&rt->trace);
    for (int f = 0; f < HX_FAMILY_COUNT; f++)
        free(rt->absence[f]);
    hx_topology_free(rt->topology);
    rt->executor->close(rt);
    hx_task_pool_destroy(&rt->task_pool);
    pthread_mutex_destroy(&rt->lock);
    pthread_cond_destroy(&rt->idle);
    free(rt);
}

/* ---- queries ------------------------------------------------------------ */

int hx_device_implements(const hx_runtime *rt, int device, const char *name)
{
    int op = hx_op_find(name);
    if (!runtime_open_as(rt, "hx_device_implements") || op < 0 || device < 0 || device >= rt->ndevices)
        return 0;
    hx_device *d = rt->devices[device];
    const hx_codelet *impl = hx_device_codelet(d, hx_op_codelet((hx_op)op));
    return impl && d->ops->can_run(d, impl) != 0;
}

int hx_runtime_device_count(const hx_runtime *rt)
{
    return runtime_open_as(rt, "hx_runtime_device_count") ? rt->ndevices : 0;
}

/* How a call on one device begins: an open runtime, an output, a device. */
static hx_status device_call(const hx_runtime *rt, int device, const void *out, const char *fn)
{
    hx_status s = hx_handle_check_call(rt, HX_HANDLE_RUNTIME, out, fn);
    if (s == HX_OK && (device < 0 || device >= rt->ndevices))
        s = hx_error(HX_ERR_RANGE, "%s: no device %d (%d devices)", fn, device, rt->ndevices);
    return s;
}

static hx_status device_info(const hx_runtime *rt, int index, hx_device_info *out)
{
    hx_status s = device_call(rt, index, out, "hx_runtime_device_info");
    if (s)
        return s;
    *out = rt->devices[index]->info;
    return HX_OK;
}

hx_status hx_runtime_device_info(const hx_runtime *rt, int index, hx_device_info *out)
{
    hx_api_enter();
    return hx_api_leave(device_info(rt, index, out));
}

static hx_status topology(const hx_runtime *rt, hx_topology_info *out)
{
    hx_status s = hx_handle_check_call(rt, HX_HANDLE_RUNTIME, out, "hx_runtime_topology");
    if (s)
        return s;
    *out = rt->topo_info;
    return HX_OK;
}

hx_status hx_runtime_topology(const hx_runtime *rt, hx_topology_info *out)
{
    hx_api_enter();
    return hx_api_leave(topology(rt, out));
}

const char *hx_runtime_absence_reason(const hx_runtime *rt, hx_device_family f)
{
    return runtime_open_as(rt, "hx_runtime_absence_reason") && f < HX_FAMILY_COUNT ? rt->absence[f] : NULL;
}

void hx_runtime_stats_get(const hx_runtime *rt, hx_runtime_stats *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    if (!runtime_open_as(rt, "hx_runtime_stats_get"))
        return;
    o->tasks_submitted = atomic_load(&rt->stats.submitted);
    o->tasks_done = atomic_load(&rt->stats.done);
    o->tasks_failed = atomic_load(&rt->stats.failed);
    o->copies = atomic_load(&rt->stats.copies);
    o->bytes_copied = atomic_load(&rt->stats.bytes_copied);
    o->zero_copy_uses = atomic_load(&rt->stats.zero_copy);
    o->migrations = atomic_load(&rt->stats.migrations);
    o->retries = atomic_load(&rt->stats.retries);
    o->graph_launches = atomic_load(&rt->stats.graph_launches);
    o->devices_retired = atomic_load(&rt->stats.devices_retired);
    o->tasks_alive = hx_task_pool_alive((hx_task_pool *)&rt->task_pool);
    o->submit_overhead_us =
        o->tasks_submitted ? (double)atomic_load(&rt->stats.submit_ns) / 1e3 / (double)o->tasks_submitted : 0;
}

static hx_status device_stats(const hx_runtime *rt, int device, hx_device_stats *out)
{
    hx_status s = device_call(rt, device, out, "hx_device_stats_get");
    if (s)
        return s;
    memset(out, 0, sizeof *out);
    hx_worker *w = rt->devices[device]->worker;
    double now = hx_runtime_now(rt);
    if (w) {
        out->tasks = atomic_load(&w->tasks);
        out->busy_seconds = (double)atomic_load(&w->busy_ns) * 1e-9;
        out->failures = atomic_load(&w->failures);
        out->retired = atomic_load(&w->retired);
        hx_monitor_read(&w->monitor, now, &out->recent_busy, &out->tasks_per_second, &out->flops_per_second);
        pthread_mutex_lock(&w->msg_lock);
        memcpy(out->last_failure, w->last_failure, sizeof out->last_failure);
        pthread_mutex_unlock(&w->msg_lock);
    }
    hx_sched_load((hx_sched *)&rt->sched, device, &out->queue_depth, &out->backlog_seconds);
    out->kv_bytes_allocated = atomic_load(&rt->stats.block_bytes_allocated[device]);
    out->kv_bytes_named = atomic_load(&rt->stats.block_bytes_named[device]);
    out->kv_bytes_named_peak = atomic_load(&rt->stats.block_bytes_named_peak[device]);
    const hx_device *dev = rt->devices[device];
    if (dev->info.memory_node != 0 && !dev->info.unified_memory) {
        out->kv_bytes_device_only = atomic_load(&rt->stats.block_bytes_device_only[dev->info.memory_node]);
        out->kv_bytes_device_only_peak = atomic_load(&rt->stats.block_bytes_device_only_peak[dev->info.memory_node]);
    }
    double span = now - rt->open_time;
    out->busy_fraction = span > 0 ? out->busy_seconds / span : 0;
    if (out->busy_fraction > 1)
        out->busy_fraction = 1;
    return HX_OK;
}

hx_status hx_device_stats_get(const hx_runtime *rt, int device, hx_device_stats *out)
{
    hx_api_enter();
    return hx_api_leave(device_stats(rt, device, out));
}

void hx_runtime_stats_reset(hx_runtime *rt)
{
    if (!runtime_open_as(rt, "hx_runtime_stats_reset"))
        return;
    atomic_store(&rt->stats.submitted, 0);
    atomic_store(&rt->stats.done, 0);
    atomic_store(&rt->stats.failed, 0);
    atomic_store(&rt->stats.copies, 0);
    atomic_store(&rt->stats.bytes_copied, 0);
    atomic_store(&rt->stats.zero_copy, 0);
    atomic_store(&rt->stats.migrations, 0);
    atomic_store(&rt->stats.submit_ns, 0);
    atomic_store(&rt->stats.retries, 0);
    atomic_store(&rt->stats.graph_launches, 0);
    for (int d = 0; d < rt->ndevices; d++) {
        atomic_store(&rt->stats.block_bytes_named_peak[d], atomic_load(&rt->stats.block_bytes_named[d]));
        atomic_store(&rt->stats.block_bytes_device_only_peak[d], atomic_load(&rt->stats.block_bytes_device_only[d]));
        hx_worker *w = rt->devices[d]->worker;
        if (w) {
            atomic_store(&w->tasks, 0);
            atomic_store(&w->busy_ns, 0);
            atomic_store(&w->failures, 0);
        }
    }
    rt->open_time = hx_runtime_now(rt);
}
