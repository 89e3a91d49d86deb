/* Trace recording and the Chrome trace-event writer: one "process" per
 * device (pid = device index) with a thread for its tasks (tid 0) and one
 * for the copies into its memory (tid 1); tasks and copies are complete
 * events ("ph":"X", microseconds), migrations, retries and retirements
 * instants ("ph":"i"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "runtime/handle.h"
#include "runtime/runtime.h"
#include "runtime/task.h"
#include "runtime/trace.h"

void hx_trace_init(hx_trace *t)
{
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->lock, NULL);
}

static void write_event(FILE *f, const hx_trace_event *e, double origin);

void hx_trace_destroy(hx_trace *t)
{
    if (t->file)
        fclose(t->file);
    free(t->ev);
    free(t->path);
    pthread_mutex_destroy(&t->lock);
}

/* Writes the buffered events; under the trace's lock.  A failed write is
 * reported when the trace stops; later events are counted as dropped. */
static void flush(hx_trace *tr)
{
    FILE *f = tr->file;
    if (tr->write_failed) {
        tr->dropped += tr->n;
    } else {
        for (size_t i = 0; i < tr->n; i++)
            write_event(f, &tr->ev[i], tr->origin);
        tr->write_failed = ferror(f) != 0;
    }
    tr->n = 0;
}

static void add(hx_runtime *rt, const hx_trace_event *e)
{
    hx_trace *tr = &rt->trace;
    pthread_mutex_lock(&tr->lock);
    if (atomic_load(&tr->on)) {
        if (tr->n == HX_TRACE_CHUNK)
            flush(tr);
        tr->ev[tr->n++] = *e;
    }
    pthread_mutex_unlock(&tr->lock);
}

static int on(hx_runtime *rt) { return atomic_load_explicit(&rt->trace.on, memory_order_relaxed); }

static void set_name(hx_trace_event *e, const char *name)
{
    snprintf(e->name, sizeof e->name, "%s", name ? name : "(unnamed)");
}

void hx_trace_task(hx_runtime *rt, const hx_task *t, int dev, double t0, double t1, int ok)
{
    if (!on(rt))
        return;
    hx_trace_event e = {.kind = ok ? HX_TRACE_TASK : HX_TRACE_TASK_FAILED, .dev = (int16_t)dev,
                        .t0 = t0, .t1 = t1, .id = t->id};
    set_name(&e, t->desc.codelet->name);
    add(rt, &e);
}

void hx_trace_copy(hx_runtime *rt, int dev, int from_node, int to_node, size_t bytes, double t0, double t1)
{
    if (!on(rt))
        return;
    hx_trace_event e = {.kind = HX_TRACE_COPY, .dev = (int16_t)dev, .from = (int16_t)from_node,
                        .to = (int16_t)to_node, .t0 = t0, .t1 = t1, .bytes = bytes};
    set_name(&e, "copy");
    add(rt, &e);
}

void hx_trace_migration(hx_runtime *rt, const hx_task *t, int from, int to, const char *why)
{
    if (!on(rt))
        return;
    hx_trace_event e = {.kind = HX_TRACE_MIGRATION, .dev = (int16_t)to, .from = (int16_t)from,
                        .to = (int16_t)to, .t0 = hx_runtime_now(rt), .id = t->id};
    set_name(&e, why);
    add(rt, &e);
}

void hx_trace_mark(hx_runtime *rt, hx_trace_kind kind, int dev, const hx_task *t)
{
    if (!on(rt))
        return;
    hx_trace_event e = {.kind = (uint8_t)kind, .dev = (int16_t)dev, .t0 = hx_runtime_now(rt), .id = t ? t->id : 0};
    set_name(&e, t ? t->desc.codelet->name : "retired");
    add(rt, &e);
}

static void write_event(FILE *f, const hx_trace_event *e, double origin)
{
    double ts = (e->t0 - origin) * 1e6, dur = (e->t1 - e->t0) * 1e6;
    static const char *const cat[] = {"task", "task_failed", "copy", "migration", "retry", "retire"};
    fputs(",\n{\"name\":", f);
    hx_json_write_string(f, e->name);
    fprintf(f, ",\"cat\":\"%s\",", cat[e->kind]);
    switch (e->kind) {
    case HX_TRACE_TASK:
    case HX_TRACE_TASK_FAILED:
        fprintf(f, "\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":0,\"args\":{\"task\":%llu}}", ts,
                dur, e->dev, (unsigned long long)e->id);
        break;
    case HX_TRACE_COPY:
        fprintf(f,
                "\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":1,"
                "\"args\":{\"bytes\":%llu,\"from_node\":%d,\"to_node\":%d}}",
                ts, dur, e->dev, (unsigned long long)e->bytes, e->from, e->to);
        break;
    case HX_TRACE_MIGRATION:
        fprintf(f,
                "\"ph\":\"i\",\"s\":\"p\",\"ts\":%.3f,\"pid\":%d,\"tid\":0,"
                "\"args\":{\"task\":%llu,\"from\":%d,\"to\":%d}}",
                ts, e->dev, (unsigned long long)e->id, e->from, e->to);
        break;
    default:
        fprintf(f, "\"ph\":\"i\",\"s\":\"p\",\"ts\":%.3f,\"pid\":%d,\"tid\":0,\"args\":{\"task\":%llu}}", ts,
                e->dev, (unsigned long long)e->id);
        break;
    }
}

/* Metadata first (a process per device, a thread for its tasks and one
 * for the copies into its memory); every later event starts with a comma. */
static void write_header(FILE *f, hx_runtime *rt)
{
    fputs("{\"traceEvents\":[", f);
    for (int d = 0; d < rt->ndevices; d++) {
        char name[200];
        const hx_device_info *in = &rt->devices[d]->info;
        snprintf(name, sizeof name, "dev %d %s: %s", d, hx_device_kind_str(in->kind), in->name);
        fprintf(f, "%s\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":", d ? "," : "", d);
        hx_json_write_string(f, name);
        fprintf(f, "}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"sort_index\":%d}}", d,
                d);
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"tasks\"}}", d);
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":1,\"args\":{\"name\":\"copies in\"}}",
                d);
    }
}

/* The file is opened now, so a path that cannot be written is reported by
 * the call that names it. */
hx_status hx_trace_start(hx_runtime *rt, const char *path)
{
    if (!path || !*path)
        return hx_error(HX_ERR_INVALID_ARG, "hx_runtime_trace_start: NULL or empty path");
    hx_trace *tr = &rt->trace;
    pthread_mutex_lock(&tr->lock);
    hx_status s = HX_OK;
    char *p = NULL;
    hx_trace_event *ev = NULL;
    FILE *f = NULL;
    if (atomic_load(&tr->on))
        s = hx_error(HX_ERR_STATE, "a trace is already being recorded (to %s)", tr->path);
    else if (!(p = strdup(path)) || !(ev = malloc(HX_TRACE_CHUNK * sizeof *ev)))
        s = hx_error(HX_ERR_NO_MEMORY, "trace buffer");
    else if (!(f = fopen(path, "w")))
        s = hx_error(HX_ERR_IO, "cannot write the trace %s", path);
    if (s == HX_OK) {
        free(tr->path);
        tr->path = p;
        tr->ev = ev;
        tr->file = f;
        tr->n = 0;
        tr->dropped = 0;
        tr->write_failed = 0;
        tr->origin = hx_runtime_now(rt);
        write_header(f, rt);
        atomic_store(&tr->on, 1);
    } else {
        free(p);
        free(ev);
    }
    pthread_mutex_unlock(&tr->lock);
    return s;
}

hx_status hx_trace_stop(hx_runtime *rt)
{
    hx_trace *tr = &rt->trace;
    pthread_mutex_lock(&tr->lock);
    if (!atomic_load(&tr->on)) {
        pthread_mutex_unlock(&tr->lock);
        return hx_error(HX_ERR_STATE, "no trace is being recorded");
    }
    atomic_store(&tr->on, 0);
    FILE *f = tr->file;
    flush(tr);
    fprintf(f, "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"dropped_events\":%llu}}\n",
            (unsigned long long)tr->dropped);
    int bad = ferror(f) || tr->write_failed;
    hx_status s = HX_OK;
    if (fclose(f) != 0 || bad)
        s = hx_error(HX_ERR_IO, "writing the trace %s failed", tr->path);
    tr->file = NULL;
    free(tr->ev);
    tr->ev = NULL;
    tr->n = 0;
    pthread_mutex_unlock(&tr->lock);
    return s;
}

hx_status hx_runtime_trace_start(hx_runtime *rt, const char *path)
{
    hx_api_enter();
    hx_status s = hx_handle_check(rt, HX_HANDLE_RUNTIME, "hx_runtime_trace_start");
    return hx_api_leave(s ? s : hx_trace_start(rt, path));
}

hx_status hx_runtime_trace_stop(hx_runtime *rt)
{
    hx_api_enter();
    hx_status s = hx_handle_check(rt, HX_HANDLE_RUNTIME, "hx_runtime_trace_stop");
    return hx_api_leave(s ? s : hx_trace_stop(rt));
}
