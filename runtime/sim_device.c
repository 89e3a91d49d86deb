/* The simulator's backend: what a described device offers the runtime.
 * Its discovery loads the description (and sets the simulator's
 * executor); its devices implement the codelets their description names,
 * hold no data (a device-memory allocation is a token that counts against
 * the described capacity), and never run a kernel: the executor's event
 * loop times their tasks (runtime/sim.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "runtime/sim.h"

typedef struct {
    const hx_machine_device *m;
    double used;             /* bytes allocated in its own memory */
} sim_dev;

typedef struct {
    size_t bytes;
} sim_alloc;

static int sim_can_run(hx_device *d, const hx_codelet *cl)
{
    const sim_dev *s = d->impl;
    return hx_machine_runs(s->m, cl->name);
}

/* A simulated device implements the ops its description names. */
static int sim_bind_op(hx_device *d, hx_op op, hx_codelet *impl) { return sim_can_run(d, impl); }

static hx_status sim_run(hx_device *d, const hx_exec *x)
{
    (void)x;
    return hx_error(HX_ERR_STATE, "device %d (%s) is simulated: its tasks do not run", d->info.index, d->info.name);
}

static hx_status sim_alloc_mem(hx_device *d, size_t bytes, void **handle)
{
    sim_dev *s = d->impl;
    if (s->used + (double)bytes > s->m->mem_bytes)
        return hx_error(HX_ERR_NO_MEMORY, "simulated device %d (%s): %zu bytes asked, %.0f of its %.0f in use",
                        d->info.index, d->info.name, bytes, s->used, s->m->mem_bytes);
    sim_alloc *a = malloc(sizeof *a);
    if (!a)
        return hx_error(HX_ERR_NO_MEMORY, "simulated allocation");
    a->bytes = bytes;
    s->used += (double)bytes;
    *handle = a;
    return HX_OK;
}

static void sim_release(hx_device *d, void *handle)
{
    sim_dev *s = d->impl;
    sim_alloc *a = handle;
    s->used -= (double)a->bytes;
    free(a);
}

/* The data does not exist: only its movement is timed (buffer.c). */
static hx_status sim_copy_in(hx_device *d, void *handle, size_t offset, const void *host, size_t bytes)
{
    (void)d, (void)handle, (void)offset, (void)host, (void)bytes;
    return HX_OK;
}

static hx_status sim_copy_out(hx_device *d, void *host, void *handle, size_t offset, size_t bytes)
{
    (void)d, (void)handle, (void)offset, (void)host, (void)bytes;
    return HX_OK;
}

static void sim_destroy(hx_device *d) { free(d->impl); }

/* The description's devices, in its order, in place of this machine's. */
static hx_status sim_discover(hx_runtime *rt, const hx_discover_options *opts)
{
    hx_status s = hx_sim_open(rt, opts->machine);
    if (s)
        return s;
    const hx_machine *m = hx_sim_machine(rt);
    const char *base = strrchr(opts->machine, '/');
    for (int d = 0; d < m->ndevices && s == HX_OK; d++)
        s = hx_sim_device_add(rt, &m->dev[d], base ? base + 1 : opts->machine);
    return s;
}

const hx_device_ops hx_sim_backend = {
    .name = "sim",
    .family = HX_FAMILY_COUNT, /* each device carries its described family */
    .discover = sim_discover,
    .bind_op = sim_bind_op,
    .can_run = sim_can_run,
    .run = sim_run,
    .alloc = sim_alloc_mem,
    .release = sim_release,
    .copy_in = sim_copy_in,
    .copy_out = sim_copy_out,
    .destroy = sim_destroy,
};

const hx_machine_device *hx_sim_device_described(const hx_device *d) { return ((const sim_dev *)d->impl)->m; }

hx_status hx_sim_device_add(hx_runtime *rt, const hx_machine_device *m, const char *machine_name)
{
    sim_dev *s = calloc(1, sizeof *s);
    if (!s)
        return hx_error(HX_ERR_NO_MEMORY, "simulated device");
    s->m = m;
    hx_device_info info = {0};
    snprintf(info.name, sizeof info.name, "%s", m->name);
    snprintf(info.vendor, sizeof info.vendor, "simulated");
    snprintf(info.platform, sizeof info.platform, "simulator");
    snprintf(info.version, sizeof info.version, "%.63s", machine_name);
    info.family = m->family;
    info.kind = m->kind;
    info.compute_units = m->units;
    info.global_mem_bytes = (uint64_t)m->mem_bytes;
    info.unified_memory = m->unified;
    info.numa_node = -1;
    /* Running on another device's cores is what an emulated device does
     * (PoCL standing in for an FPGA); the scheduler pools their cores. */
    info.emulated = m->shares >= 0;
    hx_status st = hx_runtime_add_device(rt, &info, &hx_sim_backend, s);
    if (st)
        free(s);
    return st;
}
