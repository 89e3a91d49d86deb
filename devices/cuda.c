/* The CUDA device family, reached through the plugin libhetero-cuda.so
 * (kernels_cu/plugin.h) so that libhetero itself never links CUDA.
 *
 * Discovery dlopens the plugin from, in order: $HX_CUDA_PLUGIN alone when
 * set; otherwise the directory of libhetero (or of the program it is linked
 * into), the program's directory and its ../lib, then the loader's search
 * path.  A missing plugin, driver or GPU is not an error: the family is
 * recorded as absent with the exact reason (the dlopen error, or the CUDA
 * call and its error name).
 *
 * A discrete GPU is its own memory node: the coherence layer allocates a
 * replica there and copies on demand, so read-only weights are uploaded
 * once and stay resident.  A GPU that reads host memory coherently
 * (integrated, or through the host's page tables) is unified and uses host
 * memory in place, registered where it must be.  Each task runs on the
 * device's stream and is synchronized before the worker marks its outputs
 * written, so results are complete when other devices read them. */
#include <dlfcn.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels_cu/plugin.h"
#include "runtime/device.h"
#include "runtime/error.h"
#include "runtime/topology.h"

#define CUDA_SONAME "libhetero-cuda.so"

typedef struct {
    void *dl;
    const hx_cuda_plugin *p;
    char path[PATH_MAX];
    _Atomic int refs;
} cuda_lib;

typedef struct {
    cuda_lib *lib;
    hx_cuda_ctx *ctx;
    int ordinal;
    hx_cuda_device_props props;
    /* The plugin's kernel of each built-in op, found by name once (bind). */
    const hx_cuda_kernel *op_kernels[HX_OP_COUNT];
} cuda_dev;

/* A buffer replica on the device: device memory, or host memory that the
 * device addresses in place. */
typedef struct {
    void *dev;
    void *host;     /* registered host memory, to unregister */
    int owned;      /* device memory, to free */
} cuda_mem;

/* ---- loading the plugin ------------------------------------------------- */

static void lib_unref(cuda_lib *l)
{
    if (l && atomic_fetch_sub(&l->refs, 1) == 1) {
        dlclose(l->dl);
        free(l);
    }
}

/* The directory part of `path` (resolved), or "" when it has none. */
static void dir_of(const char *path, char *out, size_t len)
{
    char real[PATH_MAX];
    out[0] = '\0';
    if (!path || !path[0] || !realpath(path, real))
        return;
    char *slash = strrchr(real, '/');
    if (!slash)
        return;
    *slash = '\0';
    snprintf(out, len, "%s", real[0] ? real : "/");
}

/* Opens `path` as the plugin; on failure writes why into `why`. */
static cuda_lib *lib_open(const char *path, char *why, size_t len)
{
    /* RTLD_NODELETE: the CUDA runtime inside registers exit handlers that
     * must outlive a dlclose. */
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!dl) {
        const char *e = dlerror();
        snprintf(why, len, "%s", e ? e : "dlopen failed");
        return NULL;
    }
    dlerror();
    hx_cuda_plugin_entry entry;
    *(void **)&entry = dlsym(dl, HX_CUDA_PLUGIN_SYMBOL);
    if (!entry) {
        const char *e = dlerror();
        snprintf(why, len, "not a hetero CUDA plugin: %s", e ? e : "no " HX_CUDA_PLUGIN_SYMBOL);
        dlclose(dl);
        return NULL;
    }
    const hx_cuda_plugin *p = entry();
    if (!p || p->abi != HX_CUDA_PLUGIN_ABI || p->struct_size < sizeof(hx_cuda_plugin)) {
        snprintf(why, len, "%s: plugin ABI %u with a %u-byte table; this libhetero needs ABI %d (%zu bytes)", path,
                 p ? p->abi : 0u, p ? p->struct_size : 0u, HX_CUDA_PLUGIN_ABI, sizeof(hx_cuda_plugin));
        dlclose(dl);
        return NULL;
    }
    cuda_lib *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(why, len, "%s: out of memory", path);
        dlclose(dl);
        return NULL;
    }
    l->dl = dl;
    l->p = p;
    snprintf(l->path, sizeof l->path, "%s", path);
    atomic_init(&l->refs, 1);
    return l;
}

static cuda_lib *lib_find(char *why, size_t len)
{
    const char *env = getenv("HX_CUDA_PLUGIN");
    if (env && env[0]) {
        cuda_lib *l = lib_open(env, why, len);
        if (!l) {
            char tmp[512];
            snprintf(tmp, sizeof tmp, "%s", why);
            snprintf(why, len, "HX_CUDA_PLUGIN=%s: %s", env, tmp);
        }
        return l;
    }
    /* Without the NVIDIA driver the plugin finds no GPU, and loading it
     * maps the CUDA runtime and cuBLAS (some 200 MiB resident) to learn
     * that; the driver's library says it at once. */
    void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!driver) {
        const char *e = dlerror();
        snprintf(why, len, "%s not loaded: no NVIDIA driver (%s)", CUDA_SONAME, e ? e : "libcuda.so.1 not found");
        return NULL;
    }
    dlclose(driver);
    char dirs[3][PATH_MAX], exe[PATH_MAX];
    Dl_info info;
    dir_of(dladdr((void *)lib_find, &info) ? info.dli_fname : NULL, dirs[0], sizeof dirs[0]);
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    dir_of(exe, dirs[1], sizeof dirs[1]);
    dirs[2][0] = '\0';
    if (dirs[1][0]) { /* an installed program: prefix/bin next to prefix/lib */
        char up[PATH_MAX + 8];
        snprintf(up, sizeof up, "%s/../lib", dirs[1]);
        if (!realpath(up, dirs[2]))
            dirs[2][0] = '\0';
    }
    char looked[1024] = "";
    for (int i = 0; i < 3; i++) {
        if (!dirs[i][0] || (i > 0 && !strcmp(dirs[i], dirs[0])) || (i > 1 && !strcmp(dirs[i], dirs[1])))
            continue;
        char path[PATH_MAX + 32];
        if (snprintf(path, sizeof path, "%s/%s", dirs[i], CUDA_SONAME) >= (int)sizeof path)
            continue;
        size_t used = strlen(looked);
        if (snprintf(looked + used, sizeof looked - used, "%s, ", dirs[i]) >= (int)(sizeof looked - used))
            looked[used] = '\0';
        if (access(path, F_OK) != 0)
            continue;
        /* A plugin that is there but does not load is the reason to give,
         * not whatever a later directory holds. */
        return lib_open(path, why, len);
    }
    cuda_lib *l = lib_open(CUDA_SONAME, why, len);
    if (!l) {
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%s", why);
        snprintf(why, len, "CUDA plugin %s not found (looked in %sthen the library search path: %s)", CUDA_SONAME,
                 looked, tmp);
    }
    return l;
}

/* ---- the ops table ------------------------------------------------------ */

static hx_status plugin_error(cuda_dev *cd, int s, const char *what)
{
    const char *e = cd->lib->p->last_error();
    return hx_error((hx_status)s, "CUDA device %d (%s): %s: %s", cd->ordinal, cd->props.name, what,
                    e && e[0] ? e : "failed");
}

/* The plugin's kernel of the op, found by its id in the plugin's table. */
static int cuda_bind_op(hx_device *d, hx_op op, hx_codelet *impl)
{
    cuda_dev *cd = d->impl;
    const hx_cuda_plugin *p = cd->lib->p;
    cd->op_kernels[op] = NULL;
    for (int k = 0; k < p->nkernels && !cd->op_kernels[op]; k++)
        if (p->kernels[k].op == (int)op)
            cd->op_kernels[op] = &p->kernels[k];
    return cd->op_kernels[op] != NULL;
}

static int cuda_can_run(hx_device *d, const hx_codelet *cl)
{
    cuda_dev *cd = d->impl;
    int op = hx_device_bound_op(d, cl);
    if (op >= 0)
        return cd->op_kernels[op] != NULL;
    return cl && cl->name && cd->lib->p->kernel_find(cl->name) != NULL;
}

/* Lets the scheduler keep tasks the kernels do not cover (a weight type or
 * head size they lack) on other devices instead of failing them here: the
 * bound kernel of the op answers, with no name search per task. */
static int cuda_can_run_args(hx_device *d, const hx_codelet *cl, const void *args, const size_t *sizes)
{
    cuda_dev *cd = d->impl;
    int op = hx_device_bound_op(d, cl);
    const hx_cuda_kernel *k = op >= 0 ? cd->op_kernels[op] : cl ? cd->lib->p->kernel_find(cl->name) : NULL;
    return k && (!k->covers || !args || k->covers(args));
}

static hx_status cuda_run(hx_device *d, const hx_exec *x)
{
    cuda_dev *cd = d->impl;
    const hx_cuda_plugin *p = cd->lib->p;
    const hx_cuda_kernel *k = x->op >= 0 ? cd->op_kernels[x->op] : p->kernel_find(x->codelet->name);
    if (!k)
        return hx_error(HX_ERR_UNSUPPORTED, "CUDA device %d: no kernel for '%s'", cd->ordinal, x->codelet->name);
    void *bufs[HX_TASK_MAX_BUFFERS];
    for (int i = 0; i < x->nbuffers; i++)
        bufs[i] = x->handles[i] ? ((cuda_mem *)x->handles[i])->dev : NULL;
    int s = k->launch(cd->ctx, x->args, bufs, x->sizes, x->nbuffers);
    if (s) {
        hx_status st = plugin_error(cd, s, x->codelet->name);
        /* Part of the op may be queued (one tile of several): let it end
         * before the buffers are handed to anyone else. */
        p->synchronize(cd->ctx);
        return st;
    }
    if ((s = p->synchronize(cd->ctx)))
        return plugin_error(cd, s, x->codelet->name);
    return HX_OK;
}

static hx_status cuda_alloc(hx_device *d, size_t bytes, void **handle)
{
    cuda_dev *cd = d->impl;
    cuda_mem *m = calloc(1, sizeof *m);
    if (!m)
        return hx_error(HX_ERR_NO_MEMORY, "CUDA buffer descriptor");
    int s = cd->lib->p->mem_alloc(cd->ctx, bytes, &m->dev);
    if (s) {
        free(m);
        return plugin_error(cd, s, "device memory");
    }
    m->owned = 1;
    *handle = m;
    return HX_OK;
}

static hx_status cuda_wrap_host(hx_device *d, void *host, size_t bytes, int read_only, void **handle)
{
    cuda_dev *cd = d->impl;
    cuda_mem *m = calloc(1, sizeof *m);
    if (!m)
        return hx_error(HX_ERR_NO_MEMORY, "CUDA buffer descriptor");
    if (cd->props.pageable_uses_host_tables) {
        m->dev = host; /* the GPU walks the host's page tables */
    } else {
        int s = cd->lib->p->host_register(cd->ctx, host, bytes, read_only, &m->dev);
        if (s) {
            free(m);
            return plugin_error(cd, s, "host memory registration");
        }
        m->host = host;
    }
    *handle = m;
    return HX_OK;
}

static void cuda_release(hx_device *d, void *handle)
{
    cuda_dev *cd = d->impl;
    cuda_mem *m = handle;
    if (!m)
        return;
    /* Failures here leave nothing to undo; the memory goes with the context. */
    if (m->owned)
        cd->lib->p->mem_free(cd->ctx, m->dev);
    if (m->host)
        cd->lib->p->host_unregister(cd->ctx, m->host);
    free(m);
}

static hx_status cuda_copy_in(hx_device *d, void *handle, size_t offset, const void *host, size_t bytes)
{
    cuda_dev *cd = d->impl;
    int s = cd->lib->p->copy(cd->ctx, (char *)((cuda_mem *)handle)->dev + offset, host, bytes, HX_CUDA_COPY_H2D, 0);
    return s ? plugin_error(cd, s, "copy to the device") : HX_OK;
}

static hx_status cuda_copy_out(hx_device *d, void *host, void *handle, size_t offset, size_t bytes)
{
    cuda_dev *cd = d->impl;
    int s = cd->lib->p->copy(cd->ctx, host, (char *)((cuda_mem *)handle)->dev + offset, bytes, HX_CUDA_COPY_D2H, 0);
    return s ? plugin_error(cd, s, "copy to the host") : HX_OK;
}

static hx_status cuda_copy_device(hx_device *d, void *dst, const void *src, size_t bytes)
{
    cuda_dev *cd = d->impl;
    int s = cd->lib->p->copy(cd->ctx, ((cuda_mem *)dst)->dev, ((const cuda_mem *)src)->dev, bytes, HX_CUDA_COPY_D2D, 0);
    return s ? plugin_error(cd, s, "copy on the device") : HX_OK;
}

static void cuda_destroy(hx_device *d)
{
    cuda_dev *cd = d->impl;
    if (!cd)
        return;
    cd->lib->p->context_destroy(cd->ctx);
    lib_unref(cd->lib);
    free(cd);
}

static hx_status cuda_discover(hx_runtime *rt, const hx_discover_options *o);

static const hx_device_selector cuda_selectors[] = {{"cuda", -1, 0}, {"gpu", HX_KIND_GPU, 0}, {NULL, 0, 0}};

const hx_device_ops hx_cuda_ops = {
    .name = "cuda",
    .family = HX_FAMILY_CUDA,
    .selectors = cuda_selectors,
    .discover = cuda_discover,
    .destroy = cuda_destroy,
    .bind_op = cuda_bind_op,
    .can_run = cuda_can_run,
    .can_run_args = cuda_can_run_args,
    .run = cuda_run,
    .wrap_host = cuda_wrap_host,
    .alloc = cuda_alloc,
    .release = cuda_release,
    .copy_in = cuda_copy_in,
    .copy_out = cuda_copy_out,
    .copy_device = cuda_copy_device,
};

/* ---- discovery ---------------------------------------------------------- */

static void describe(const cuda_dev *cd, const hx_discover_options *o, hx_device_info *info)
{
    const hx_cuda_device_props *p = &cd->props;
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "%s", p->name);
    snprintf(info->vendor, sizeof info->vendor, "NVIDIA");
    snprintf(info->platform, sizeof info->platform, "CUDA");
    snprintf(info->version, sizeof info->version, "sm_%d%d, driver %d.%d, pci %s", p->cc_major, p->cc_minor,
             p->driver_version / 1000, p->driver_version % 1000 / 10, p->pci_bus_id);
    info->family = HX_FAMILY_CUDA;
    info->kind = HX_KIND_GPU;
    info->compute_units = p->sm_count;
    info->global_mem_bytes = p->total_mem;
    info->local_mem_bytes = p->shared_mem_per_block;
    info->unified_memory = p->integrated || p->pageable_uses_host_tables;
    info->numa_node = hx_topology_pci_numa(o->topology, p->pci_bus_id);
}

static hx_status cuda_discover(hx_runtime *rt, const hx_discover_options *o)
{
    char why[1024];
    cuda_lib *lib = lib_find(why, sizeof why);
    if (!lib) {
        hx_runtime_set_absence(rt, HX_FAMILY_CUDA, "%s", why);
        return HX_OK;
    }
    const hx_cuda_plugin *p = lib->p;
    int count = 0;
    if (p->device_count(&count)) {
        hx_runtime_set_absence(rt, HX_FAMILY_CUDA, "%s: %s", lib->path, p->last_error());
        lib_unref(lib);
        return HX_OK;
    }
    if (count <= 0) {
        hx_runtime_set_absence(rt, HX_FAMILY_CUDA, "%s: cudaGetDeviceCount: no CUDA device", lib->path);
        lib_unref(lib);
        return HX_OK;
    }
    int added = 0;
    char failed[512] = "";
    hx_status st = HX_OK;
    for (int i = 0; i < count && st == HX_OK; i++) {
        cuda_dev *cd = calloc(1, sizeof *cd);
        if (!cd) {
            st = hx_error(HX_ERR_NO_MEMORY, "CUDA device %d", i);
            break;
        }
        cd->lib = lib;
        cd->ordinal = i;
        int s = p->device_props(i, &cd->props);
        if (!s)
            s = p->context_create(i, &cd->ctx);
        if (s) {
            if (!failed[0])
                snprintf(failed, sizeof failed, "device %d: %s", i, p->last_error());
            free(cd);
            continue;
        }
        hx_device_info info;
        describe(cd, o, &info);
        atomic_fetch_add(&lib->refs, 1);
        if ((st = hx_runtime_add_device(rt, &info, &hx_cuda_ops, cd))) {
            p->context_destroy(cd->ctx);
            atomic_fetch_sub(&lib->refs, 1);
            free(cd);
            break;
        }
        added++;
    }
    if (!added && st == HX_OK)
        hx_runtime_set_absence(rt, HX_FAMILY_CUDA, "%s: %d device%s, none usable: %s", lib->path, count,
                               count == 1 ? "" : "s", failed);
    lib_unref(lib);
    return st;
}
