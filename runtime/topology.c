/* hwloc topology: sockets, NUMA nodes, cores, caches, PCI and OS devices. */
#include <dlfcn.h>
#include <hwloc.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime/error.h"
#include "runtime/topology.h"

static uint64_t largest_cache(hwloc_topology_t t, hwloc_obj_type_t type)
{
    uint64_t best = 0;
    int n = hwloc_get_nbobjs_by_type(t, type);
    for (int i = 0; i < n; i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type(t, type, (unsigned)i);
        if (o && o->attr && o->attr->cache.size > best)
            best = o->attr->cache.size;
    }
    return best;
}

static int count(hwloc_topology_t t, hwloc_obj_type_t type)
{
    int n = hwloc_get_nbobjs_by_type(t, type);
    return n < 0 ? 0 : n;
}

/* hwloc's PCI plugin dlopens libpciaccess for each topology load and
 * dlcloses it after, re-initialising it at every hx_runtime_open and
 * stranding its static allocations (LeakSanitizer reports them as leaks of
 * an unknown module).  Pinning the library once avoids both. */
static void pin_pciaccess(void) { dlopen("libpciaccess.so.0", RTLD_NOW | RTLD_NODELETE); }

hx_status hx_topology_load(void **out, hx_topology_info *info)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, pin_pciaccess);
    hwloc_topology_t t;
    *out = NULL;
    if (hwloc_topology_init(&t) != 0)
        return hx_error(HX_ERR_NO_MEMORY, "hwloc_topology_init failed");
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    /* hetero enumerates OpenCL itself (devices/opencl.c); hwloc's own
     * OpenCL and GL probes would initialise every ICD and X display once
     * more at each open. */
    hwloc_topology_set_components(t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "opencl");
    hwloc_topology_set_components(t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "gl");
    if (hwloc_topology_load(t) != 0) {
        hwloc_topology_destroy(t);
        return hx_error(HX_ERR_DEVICE, "hwloc could not load the machine's topology");
    }
    memset(info, 0, sizeof *info);
    info->packages = count(t, HWLOC_OBJ_PACKAGE);
    info->numa_nodes = count(t, HWLOC_OBJ_NUMANODE);
    info->cores = count(t, HWLOC_OBJ_CORE);
    info->pus = count(t, HWLOC_OBJ_PU);
    info->l1d_bytes = largest_cache(t, HWLOC_OBJ_L1CACHE);
    info->l2_bytes = largest_cache(t, HWLOC_OBJ_L2CACHE);
    info->l3_bytes = largest_cache(t, HWLOC_OBJ_L3CACHE);
    info->pci_devices = count(t, HWLOC_OBJ_PCI_DEVICE);
    info->os_devices = count(t, HWLOC_OBJ_OS_DEVICE);
    hwloc_obj_t root = hwloc_get_root_obj(t);
    info->memory_bytes = root ? root->total_memory : 0;
    /* Some virtual machines hot-add memory that no NUMA node lists. */
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && (uint64_t)pages * (uint64_t)page > info->memory_bytes)
        info->memory_bytes = (uint64_t)pages * (uint64_t)page;
    if (info->cores == 0)
        info->cores = info->pus;
    *out = t;
    return HX_OK;
}

void hx_topology_free(void *topo)
{
    if (topo)
        hwloc_topology_destroy((hwloc_topology_t)topo);
}

static int numa_of(hwloc_topology_t t, hwloc_obj_t o)
{
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, o);
    if (!anc || !anc->nodeset)
        return -1;
    int n = hwloc_bitmap_first(anc->nodeset);
    return n < 0 ? -1 : n;
}

int hx_topology_pci_numa(void *topo, const char *busid)
{
    if (!topo || !busid)
        return -1;
    hwloc_obj_t o = hwloc_get_pcidev_by_busidstring((hwloc_topology_t)topo, busid);
    return o ? numa_of((hwloc_topology_t)topo, o) : -1;
}

int hx_topology_cpu_numa(void *topo)
{
    if (!topo)
        return -1;
    hwloc_obj_t core = hwloc_get_obj_by_type((hwloc_topology_t)topo, HWLOC_OBJ_PU, 0);
    if (!core || !core->nodeset)
        return -1;
    return hwloc_bitmap_first(core->nodeset);
}

/* The calling thread's affinity mask, or NULL when it cannot be read. */
static hwloc_bitmap_t thread_mask(hwloc_topology_t t)
{
    hwloc_bitmap_t mask = hwloc_bitmap_alloc();
    if (mask && hwloc_get_cpubind(t, mask, HWLOC_CPUBIND_THREAD) != 0) {
        hwloc_bitmap_free(mask);
        mask = NULL;
    }
    return mask;
}

int hx_topology_usable_cores(void *topo, int *cores, int cap)
{
    hwloc_topology_t t = topo;
    if (!t)
        return 0;
    hwloc_bitmap_t mask = thread_mask(t);
    int ncores = count(t, HWLOC_OBJ_CORE), n = 0;
    for (int i = 0; i < ncores; i++) {
        hwloc_obj_t core = hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, (unsigned)i);
        if (!core || !core->cpuset || (mask && !hwloc_bitmap_intersects(core->cpuset, mask)))
            continue;
        if (cores && n < cap)
            cores[n] = i;
        n++;
    }
    hwloc_bitmap_free(mask);
    return n;
}

void *hx_topology_core_usable_pus(void *topo, int core)
{
    hwloc_topology_t t = topo;
    hwloc_obj_t c = t && core >= 0 ? hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, (unsigned)core) : NULL;
    if (!c || !c->cpuset)
        return NULL;
    hwloc_bitmap_t set = hwloc_bitmap_dup(c->cpuset), mask = thread_mask(t);
    if (set && mask && hwloc_bitmap_intersects(set, mask))
        hwloc_bitmap_and(set, set, mask);
    hwloc_bitmap_free(mask);
    return set;
}

const char *hx_topology_cpu_name(void *topo)
{
    if (!topo)
        return "CPU";
    hwloc_obj_t pkg = hwloc_get_obj_by_type((hwloc_topology_t)topo, HWLOC_OBJ_PACKAGE, 0);
    const char *m = pkg ? hwloc_obj_get_info_by_name(pkg, "CPUModel") : NULL;
    return m ? m : "CPU";
}
