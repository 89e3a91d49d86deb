/* The machine as hwloc sees it. */
#ifndef HX_RUNTIME_TOPOLOGY_H
#define HX_RUNTIME_TOPOLOGY_H

#include "hetero.h"

/* Loads the topology with PCI and OS devices; `*topo` is an hwloc_topology_t. */
hx_status hx_topology_load(void **topo, hx_topology_info *info);
void hx_topology_free(void *topo);
/* NUMA node of a PCI device (bus id "dddd:bb:dd.f"), or -1. */
int hx_topology_pci_numa(void *topo, const char *busid);
/* NUMA node that holds the first core, or -1 (one node machines: 0). */
int hx_topology_cpu_numa(void *topo);
/* The cores the calling thread may run on — those with a PU in its
 * affinity mask (taskset, sched_setaffinity, a cgroup cpuset), which the
 * threads it starts inherit — as hwloc core indices in order, at most
 * `cap` of them written to `cores` (NULL: count only).  Returns how many
 * there are; every core when the mask cannot be read. */
int hx_topology_usable_cores(void *topo, int *cores, int cap);
/* The PUs of core `core` (hwloc index) in the calling thread's affinity
 * mask, or all of its PUs when none is (or the mask cannot be read), as an
 * hwloc_bitmap_t the caller frees; NULL without such a core. */
void *hx_topology_core_usable_pus(void *topo, int core);
/* The CPU model name hwloc reports, or "CPU". */
const char *hx_topology_cpu_name(void *topo);

#endif
