/* Machine descriptions for the simulator: the devices of a machine we may
 * not have, each with what bounds its kernels (peak flops per precision,
 * memory bandwidth), its memory, its link to host memory and the cost of
 * launching a task.  The text format is documented in docs/simulator.md;
 * examples live in bench/machines/.  Internal. */
#ifndef HX_RUNTIME_MACHINE_H
#define HX_RUNTIME_MACHINE_H

#include "hetero.h"
#include "runtime/sched.h"

#define HX_MACHINE_MAX_RUNS 16

typedef struct {
    char label[64];                /* the section's name: [device LABEL] */
    char name[128];
    hx_device_family family;
    hx_device_kind kind;
    int units;                     /* cores, SMs, compute units          */
    double flops[HX_PREC_COUNT];   /* peak per second, by precision      */
    double gemm[HX_PREC_COUNT];    /* effective flop/s of real kernels, by
                                      precision, calibrated against published
                                      runs (0 = peak x compute efficiency) */
    double stream[HX_PREC_COUNT];  /* fraction of bandwidth its kernels of
                                      that precision reach (0 = mem_eff) */
    int additive;                  /* compute and memory time add up (the
                                      kernels do not overlap them)       */
    double mem_bytes, mem_bw;      /* its memory (host memory if unified) */
    int unified;                   /* works in host memory: no copies    */
    double link_bw, link_latency;  /* to host memory (own memory only)   */
    double launch;                 /* seconds added to every task        */
    int launch_measured;           /* launch from this host's models where they have it */
    double compute_eff, mem_eff;   /* fraction of peak kernels reach     */
    int measured;                  /* times from this host's performance models where they know */
    int shares;                    /* index of a device whose cores it runs on (one task at a
                                      time between them), -1 = none */
    char shares_label[64];
    int nruns;                     /* 0 = every codelet                   */
    char runs[HX_MACHINE_MAX_RUNS][32];
} hx_machine_device;

typedef struct {
    char name[128];
    int ndevices;
    hx_machine_device dev[HX_MAX_DEVICES];
} hx_machine;

/* Parses a description; `origin` names it in messages ("file:line: ..."). */
hx_status hx_machine_parse(const char *text, const char *origin, hx_machine *out);
hx_status hx_machine_load(const char *path, hx_machine *out);

/* Seconds the device takes for a task of this cost, by its roofline. */
double hx_machine_roofline(const hx_machine_device *d, hx_precision p, double flops, double bytes);
/* Seconds to move `bytes` between host memory and the device. */
double hx_machine_link_time(const hx_machine_device *d, double bytes);
/* Whether the device implements the codelet named `name`. */
int hx_machine_runs(const hx_machine_device *d, const char *name);

#endif
