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
/* The CPU model name hwloc reports, or "CPU". */
const char *hx_topology_cpu_name(void *topo);

#endif
