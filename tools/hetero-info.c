/* hetero-info: the machine as hetero sees it — topology and devices.
 *   hetero-info [--json | --machine] [--devices LIST] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hetero.h"

static void usage(FILE *f)
{
    fputs("usage: hetero-info [--json | --machine] [--devices LIST]\n"
          "  --json          machine-readable output\n"
          "  --machine       this machine as a simulator description whose task times are\n"
          "                  this host's measured performance models (docs/simulator.md)\n"
          "  --devices LIST  devices to open (all, cpu, opencl, fpga, gpu, cuda; default: all)\n"
          "Environment: HX_FPGA_EMULATION=pocl presents PoCL as an emulated FPGA.\n",
          f);
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
        hx_json_write_string(stdout, d.name);
        printf(", \"vendor\": ");
        hx_json_write_string(stdout, d.vendor);
        printf(", \"platform\": ");
        hx_json_write_string(stdout, d.platform);
        printf(", \"version\": ");
        hx_json_write_string(stdout, d.version);
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
        hx_json_write_string(stdout, why);
        first = 0;
    }
    /* The GGUF architectures hx_model_load runs, as an array. */
    char archs[512];
    printf("},\n  \"architectures\": [");
    if (hx_model_architectures(archs, sizeof archs) == HX_OK)
        for (char *a = archs, *next; a; a = next) {
            next = strstr(a, ", ");
            if (next)
                *next = '\0', next += 2;
            printf("%s\"%s\"", a == archs ? "" : ", ", a);
        }
    printf("]\n}\n");
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
    char archs[512];
    if (hx_model_architectures(archs, sizeof archs) == HX_OK)
        printf("\nModels\n  GGUF architectures: %s\n", archs);
}

/* Where the sums go, so that the reads are not optimized away (a local
 * volatile only written is "set but not used" to clang). */
static volatile double read_sink;

/* Bytes per second one thread reads, summing a buffer larger than caches. */
static double read_bandwidth(void)
{
    size_t n = (size_t)256 << 20;
    double *a = malloc(n), best = 0;
    if (!a)
        return 10e9;
    memset(a, 1, n);
    for (int rep = 0; rep < 3; rep++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        double s = 0;
        for (size_t i = 0; i < n / sizeof *a; i += 8)
            s += a[i] + a[i + 1] + a[i + 2] + a[i + 3] + a[i + 4] + a[i + 5] + a[i + 6] + a[i + 7];
        clock_gettime(CLOCK_MONOTONIC, &t1);
        read_sink += s;
        double sec = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
        if (sec > 0 && n / sec > best)
            best = (double)n / sec;
    }
    free(a);
    return best > 0 ? best : 10e9;
}

/* The description the simulator reads (runtime/machine.c documents the
 * format).  Task times come from this host's performance models; the
 * roofline numbers only stand in for sizes they never saw. */
static void print_machine(hx_runtime *rt, const hx_topology_info *t)
{
    static const char *const ops[] = {"get_rows", "rmsnorm", "matmul", "rope", "kv_store", "attention",
                                      "add", "swiglu", "vector_add", "gemm_f32", NULL};
    static const char *const families[] = {"cpu", "opencl", "cuda"};
    static const char *const kinds[] = {"cpu", "gpu", "fpga", "accelerator"};
    double bw = read_bandwidth();
    printf("# This machine, written by hetero-info --machine.  Times are this host's\n"
           "# measured performance models (HX_CACHE_DIR), each task's time outside its\n"
           "# kernel too (launch; 2us for a device never measured); the peaks below, a\n"
           "# rough 32 flops per cycle per core at 2.5 GHz and one thread's measured\n"
           "# read bandwidth, stand in only for sizes the models never saw.\n");
    printf("machine = this host (%d cores)\n", t->cores);
    int cpu = -1;
    for (int d = 0; d < hx_runtime_device_count(rt) && cpu < 0; d++) {
        hx_device_info in;
        if (hx_runtime_device_info(rt, d, &in) == HX_OK && in.family == HX_FAMILY_CPU)
            cpu = d;
    }
    for (int d = 0; d < hx_runtime_device_count(rt); d++) {
        hx_device_info in;
        if (hx_runtime_device_info(rt, d, &in) != HX_OK)
            continue;
        char runs[256] = "";
        int all = 1;
        for (int i = 0; ops[i]; i++) {
            if (!hx_device_implements(rt, d, ops[i])) {
                all = 0;
                continue;
            }
            strncat(runs, " ", sizeof runs - strlen(runs) - 1);
            strncat(runs, ops[i], sizeof runs - strlen(runs) - 1);
        }
        printf("\n[device %d]\nname = %s\nfamily = %s\nkind = %s\nunits = %d\n", d, in.name,
               families[in.family], kinds[in.kind], in.compute_units);
        printf("flops.f32 = %.3g\nmemory = %llu\nbandwidth = %.3g\nunified = %s\n",
               32 * 2.5e9 * (in.compute_units > 0 ? in.compute_units : 1),
               (unsigned long long)(in.global_mem_bytes ? in.global_mem_bytes : t->memory_bytes), bw,
               in.unified_memory ? "yes" : "no");
        if (!in.unified_memory)
            printf("link = 10G\nlatency = 10us\n");
        printf("launch = measured 2us\ntimes = measured\nruns =%s\n", all ? " all" : runs);
        /* An OpenCL device on this host's CPU (PoCL, also as an emulated
         * FPGA) runs on the CPU device's cores. */
        if (cpu >= 0 && d != cpu && in.family == HX_FAMILY_OPENCL && (in.kind == HX_KIND_CPU || in.emulated))
            printf("shares = %d\n", cpu);
    }
}

int main(int argc, char **argv)
{
    int json = 0, machine = 0;
    hx_runtime_options o = hx_runtime_options_default();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--machine"))
            machine = 1;
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
    if (machine)
        print_machine(rt, &t);
    else if (json)
        print_json(rt, &t);
    else
        print_human(rt, &t);
    hx_runtime_close(rt);
    return 0;
}
