/* hetero-info: the machine as hetero sees it — topology and devices.
 *   hetero-info [--json] [--devices LIST] */
#include <stdio.h>
#include <string.h>

#include "hetero.h"

static void usage(FILE *f)
{
    fputs("usage: hetero-info [--json] [--devices LIST]\n"
          "  --json          machine-readable output\n"
          "  --devices LIST  devices to open (all, cpu, opencl, fpga, gpu, cuda; default: all)\n"
          "Environment: HX_FPGA_EMULATION=pocl presents PoCL as an emulated FPGA.\n",
          f);
}

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void print_json(hx_runtime *rt, const hx_topology_info *t)
{
    printf("{\n  \"topology\": {\"packages\": %d, \"numa_nodes\": %d, \"cores\": %d, \"pus\": %d, "
           "\"l1d_bytes\": %llu, \"l2_bytes\": %llu, \"l3_bytes\": %llu, \"memory_bytes\": %llu, "
           "\"pci_devices\": %d, \"os_devices\": %d},\n  \"devices\": [",
           t->packages, t->numa_nodes, t->cores, t->pus, (unsigned long long)t->l1d_bytes,
           (unsigned long long)t->l2_bytes, (unsigned long long)t->l3_bytes,
           (unsigned long long)t->memory_bytes, t->pci_devices, t->os_devices);
    int n = hx_runtime_device_count(rt);
    for (int i = 0; i < n; i++) {
        hx_device_info d;
        if (hx_runtime_device_info(rt, i, &d) != HX_OK)
            continue;
        printf("%s\n    {\"index\": %d, \"name\": ", i ? "," : "", d.index);
        json_str(d.name);
        printf(", \"vendor\": ");
        json_str(d.vendor);
        printf(", \"platform\": ");
        json_str(d.platform);
        printf(", \"version\": ");
        json_str(d.version);
        printf(", \"family\": \"%s\", \"kind\": \"%s\", \"compute_units\": %d, "
               "\"global_mem_bytes\": %llu, \"local_mem_bytes\": %llu, \"unified_memory\": %s, "
               "\"memory_node\": %d, \"numa_node\": %d, \"emulated\": %s}",
               hx_device_family_str(d.family), hx_device_kind_str(d.kind), d.compute_units,
               (unsigned long long)d.global_mem_bytes, (unsigned long long)d.local_mem_bytes,
               d.unified_memory ? "true" : "false", d.memory_node, d.numa_node,
               d.emulated ? "true" : "false");
    }
    printf("\n  ],\n  \"absent\": {");
    int first = 1;
    for (int f = 0; f < HX_FAMILY_COUNT; f++) {
        const char *why = hx_runtime_absence_reason(rt, (hx_device_family)f);
        if (!why)
            continue;
        printf("%s\"%s\": ", first ? "" : ", ", hx_device_family_str((hx_device_family)f));
        json_str(why);
        first = 0;
    }
    printf("}\n}\n");
}

static void human_bytes(char *buf, size_t n, unsigned long long b)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int i = 0;
    while (v >= 1024 && i < 4)
        v /= 1024, i++;
    snprintf(buf, n, i ? "%.1f %s" : "%.0f %s", v, u[i]);
}

static void print_human(hx_runtime *rt, const hx_topology_info *t)
{
    char mem[32], l1[32], l2[32], l3[32];
    human_bytes(mem, sizeof mem, t->memory_bytes);
    human_bytes(l1, sizeof l1, t->l1d_bytes);
    human_bytes(l2, sizeof l2, t->l2_bytes);
    human_bytes(l3, sizeof l3, t->l3_bytes);
    printf("Topology (hwloc)\n");
    printf("  packages %d, NUMA nodes %d, cores %d, PUs %d, memory %s\n", t->packages, t->numa_nodes,
           t->cores, t->pus, mem);
    printf("  caches: L1d %s, L2 %s, L3 %s\n", l1, l2, l3);
    printf("  PCI devices %d, OS devices %d\n\n", t->pci_devices, t->os_devices);
    printf("Devices\n");
    printf("  %-3s %-40s %-7s %-12s %4s %10s %7s %5s %8s\n", "#", "name", "family", "kind", "CUs",
           "memory", "unified", "NUMA", "emulated");
    int n = hx_runtime_device_count(rt);
    for (int i = 0; i < n; i++) {
        hx_device_info d;
        if (hx_runtime_device_info(rt, i, &d) != HX_OK)
            continue;
        human_bytes(mem, sizeof mem, d.global_mem_bytes);
        printf("  %-3d %-40.40s %-7s %-12s %4d %10s %7s %5d %8s\n", d.index, d.name,
               hx_device_family_str(d.family), hx_device_kind_str(d.kind), d.compute_units, mem,
               d.unified_memory ? "yes" : "no", d.numa_node, d.emulated ? "yes" : "no");
    }
    for (int f = 0; f < HX_FAMILY_COUNT; f++) {
        const char *why = hx_runtime_absence_reason(rt, (hx_device_family)f);
        if (why)
            printf("  no %s device: %s\n", hx_device_family_str((hx_device_family)f), why);
    }
}

int main(int argc, char **argv)
{
    int json = 0;
    hx_runtime_options o = hx_runtime_options_default();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--devices") && i + 1 < argc)
            o.devices = argv[++i];
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "hetero-info: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    hx_runtime *rt;
    hx_status s = hx_runtime_open(&rt, &o);
    if (s != HX_OK) {
        fprintf(stderr, "hetero-info: %s\n", hx_last_error());
        return 1;
    }
    hx_topology_info t;
    hx_runtime_topology(rt, &t);
    if (json)
        print_json(rt, &t);
    else
        print_human(rt, &t);
    hx_runtime_close(rt);
    return 0;
}
