/* hetero-bench's internal interface: the parameters a command line asks
 * for, the rows a run produces, and the writers that print them.  Only
 * include/hetero.h is seen from here, as for any host application. */
#ifndef HXB_BENCH_H
#define HXB_BENCH_H

#include <stdint.h>
#include <stdio.h>

#include "hetero.h"
#include "tools/cli_dist.h"

#define HXB_MAX_LIST 32
#define HXB_MAX_DEVICES 16

typedef struct {
    char *item[HXB_MAX_LIST];
    int n;
} hxb_strlist;

typedef struct {
    int v[HXB_MAX_LIST];
    int n;
} hxb_intlist;

typedef enum { HXB_MD, HXB_JSON, HXB_CSV } hxb_format;

typedef struct {
    hxb_strlist models;    /* -m paths                                     */
    hxb_strlist synthetic; /* PRESET:TYPE of the embedded models (no -m)   */
    hxb_strlist shapes;    /* NAME:TYPE models without weights (--sim)     */
    hxb_intlist prompts;   /* -p: prompt sizes, one pp test each           */
    hxb_intlist gens;      /* -n: generated tokens, one tg test each       */
    hxb_intlist seqs;      /* --seqs: sequences decoded together in tg     */
    hxb_intlist depths;    /* -d: context tokens evaluated before a test   */
    hxb_intlist threads;   /* -t: 0 = the runtime's default                */
    hxb_intlist batches;   /* -b: largest tokens per evaluation            */
    hxb_strlist partitions; /* --partition: strategies; "" = the runtime's  */
    hxb_strlist devices;   /* --devices: one runtime device list per set   */
    hxb_strlist scheds;    /* --sched: policy names; "" = runtime default */
    hxb_strlist injects;   /* --inject: slowdown specs; "" = none          */
    int reps, warmup, progress;
    int quiet; /* -q: no row on stderr as each finishes (llama-bench's streaming, on a terminal) */
    hxb_format format;
    const char *fpga_emulation; /* "pocl" or NULL (never emulate silently) */
    const char *kv_type;
    const char *trace;    /* Chrome trace the runtime writes              */
    const char *timeline; /* an existing Chrome trace to draw             */
    const char *sim;      /* machine description for the simulator        */
    const char *plot;     /* directory for JSON + SVG                     */
    int prefix_share;     /* --prefix-share N: sessions with a common prefix, 0 = off */
    int prefix_len, suffix_len; /* --prefix-len, --suffix-len               */
    cli_dist dist;        /* --split, --mpi-timeout: a pipeline under mpirun */
} hxb_params;

/* args.c: 0, or -1 after printing why (exit code 2), or 1 for --help. */
int hxb_args_parse(int argc, char **argv, hxb_params *p);
void hxb_args_free(hxb_params *p);
void hxb_args_usage(FILE *f);

typedef enum { HXB_PP, HXB_TG } hxb_test_kind;

typedef struct {
    hxb_test_kind kind;
    int n;    /* prompt or generated tokens per sequence */
    int seqs;  /* sequences evaluated together (tg)       */
    int depth; /* tokens already in each session's context */
    char name[40];
} hxb_test;

typedef struct {
    char path[1024];    /* a GGUF file, or NAME:TYPE when `shapes`        */
    int shapes;
    char name[128], arch[32], type[16];
    uint64_t params, bytes;
    uint32_t n_vocab, n_ctx;
} hxb_model;

typedef struct {
    char label[24]; /* "cpu", "fpga", "cuda", "cl-gpu"...            */
    char name[128];
    int emulated;
    uint64_t tasks;
    double busy_seconds, busy_pct;
    /* the KV cache on a device with memory of its own (hx_device_stats):
     * bytes allocated there, and at most named and held there alone */
    uint64_t kv_allocated, kv_named_peak, kv_device_only_peak;
} hxb_device_use;

typedef struct {
    /* Indices into the parameter lists: the row's place in comparisons. */
    int model, test, threads_i, batch_i, partition_i, devices_i, sched_i, inject_i;
    int threads, batch; /* actual CPU threads, batch limit               */
    char partition[16]; /* "affinity", "layers", "auto", "colocated"     */
    char devices[160];  /* the set, e.g. "cpu,fpga[pocl]"                */
    char sched[64], inject[128];
    hxb_test t;
    int reps;
    double *samples_ns;
    double avg_ns, stddev_ns, avg_ts, stddev_ts;
    int ndev;
    hxb_device_use dev[HXB_MAX_DEVICES];
    double tasks_per_run, submit_overhead_us;
    uint64_t tasks, copies, bytes_copied, zero_copy_uses, migrations;
    uint64_t peak_rss_bytes;
    /* Decode rows: the bytes one generated token reads (the weights once
     * per step, shared by its sequences; each sequence's K and V of every
     * position it attends to, on average depth + (n + 1) / 2), and that
     * rate as a share of the machine's read bandwidth at the row's thread
     * count (bandwidth.c); NAN where not measured (prompt rows, a
     * simulated machine). */
    double weight_bytes_per_token, kv_bytes_per_token, read_bw_gbps, roofline_pct;
    /* Decode rows: what a step touches (the weights and every sequence's
     * K and V at the test's last position) and the last-level cache's size
     * (0: unknown).  A working set that fits the cache is read from it, not
     * from memory, after the first step: such a row's roofline share says
     * nothing about memory (it can pass 100 %). */
    double working_set_bytes;
    uint64_t llc_bytes;
    int fits_llc;
} hxb_row;

typedef struct {
    hxb_model *models;
    int nmodels;
    hxb_test *tests;
    int ntests;
    hxb_row *rows;
    int nrows, cap;
    /* Device sets an injection does not apply to (it names a device the
     * set lacks): those combinations are skipped, not failed. */
    unsigned char skip[HXB_MAX_LIST][HXB_MAX_LIST];
    char cpu[128], started[32];
    char simulated[64];  /* the machine description simulated, "" = measured */
    int cores;
    uint64_t memory_bytes;
} hxb_results;

/* models.c: resolves -m / the embedded models / --shapes, and opens one. */
int hxb_models_resolve(const hxb_params *p, hxb_results *r);
hx_status hxb_model_open(hx_runtime *rt, const hxb_model *md, const hx_model_options *mo, hx_model **out);

/* measure.c: one test on a loaded model, its samples and the runtime's
 * statistics over the measured repetitions. */
hx_status hxb_measure(hx_runtime *rt, hx_model *m, const hxb_model *md, const hxb_test *t,
                      const hxb_params *p, hxb_row *row);

/* prefix_share.c: --prefix-share N on each model, reported in p->format. */
int hxb_prefix_share(const hxb_params *p, const hxb_results *r);

/* cluster.c: --sim naming a cluster description (several nodes and the
 * network between them): a pipeline's predicted throughput, printed. */
int hxb_is_cluster(const char *path);
int hxb_cluster_run(const hxb_params *p);

/* run.c: checks every configuration, then measures every combination. */
int hxb_run_all(const hxb_params *p, hxb_results *r);
/* Ranks other than 0 of a pipeline under mpirun: the first configuration's
 * runtime serves every model rank 0 loads.  Returns the exit status. */
int hxb_run_worker(const hxb_params *p);
void hxb_results_free(hxb_results *r);
/* Records one generated token of the first model on device set `set`
 * (first policy, no injection) as a Chrome trace in `path`. */
int hxb_run_trace(const hxb_params *p, hxb_results *r, int set, const char *path);
/* Sorts the rows so that the rows compared with each other are adjacent. */
void hxb_results_sort(hxb_results *r);
/* The row this one is compared with: the first of the sorted rows of the
 * same model and test (the first value of every list), or -1 when it is
 * the only one. */
int hxb_results_reference(const hxb_results *r, int row);

/* stats.c */
void hxb_stats_mean_std(const double *v, int n, double *mean, double *std);
/* The median of v[0, n), n > 0 (v is sorted in place). */
double hxb_stats_median(double *v, int n);
/* bandwidth.c: the memory read bandwidth of `threads` threads, GB/s
 * (0 when it could not be measured). */
double hxb_read_bandwidth(int threads);
/* Closes the context measure.c holds for runs at a depth (before its model goes). */
void hxb_depth_release(void);
/* The largest CPU cache's size in bytes (Linux sysfs), 0 if unknown. */
uint64_t hxb_llc_bytes(void);
void hxb_stats_peak_rss_reset(void);
uint64_t hxb_stats_peak_rss(void);
/* Resident memory now (VmRSS), 0 where /proc is missing. */
uint64_t hxb_stats_rss(void);
double hxb_stats_now_ns(void);

/* hooks.c: where the runtime's injection, tracing and simulator plug in. */
int hxb_hooks_options(hx_runtime_options *o, const hxb_params *p, const char *inject, char *err, size_t cap);
int hxb_hooks_check(const hxb_params *p, char *err, size_t cap);
const char *hxb_hooks_default_policy(void);
int hxb_hooks_trace_supported(void);
/* Records what the runtime does between start and stop as a Chrome trace. */
int hxb_hooks_trace_start(hx_runtime *rt, const char *path, char *err, size_t cap);
int hxb_hooks_trace_stop(hx_runtime *rt, char *err, size_t cap);

/* report_*.c: the three output formats. */
void hxb_report_md(FILE *f, const hxb_results *r);
void hxb_report_json(FILE *f, const hxb_results *r, const hxb_params *p);
void hxb_report_csv(FILE *f, const hxb_results *r);

/* Formatting shared by the writers. */
void hxb_fmt_bytes(char *buf, size_t cap, uint64_t bytes);
void hxb_fmt_count(char *buf, size_t cap, uint64_t n);
/* The configuration that tells rows of one model and test apart. */
void hxb_fmt_config(char *buf, size_t cap, const hxb_results *r, const hxb_row *row);

/* svg.c: the few drawing primitives the charts need. */
void hxb_svg_begin(FILE *f, int w, int h);
void hxb_svg_end(FILE *f);
void hxb_svg_text(FILE *f, double x, double y, const char *anchor, int size, const char *fill,
                  const char *fmt, ...) __attribute__((format(printf, 7, 8)));
void hxb_svg_rect(FILE *f, double x, double y, double w, double h, const char *fill, const char *title);
void hxb_svg_line(FILE *f, double x1, double y1, double x2, double y2, const char *stroke, double width);
const char *hxb_svg_color(int i);
const char *hxb_svg_ink(int i);
double hxb_svg_nice_step(double max, int ticks);

/* chart.c: bars of tokens/s with error bars, one chart per test. */
int hxb_chart_write(const char *dir, const hxb_results *r);

/* json.c: a small JSON reader, enough for Chrome trace files. */
typedef enum { HXB_JNULL, HXB_JBOOL, HXB_JNUM, HXB_JSTR, HXB_JARR, HXB_JOBJ } hxb_jtype;
typedef struct hxb_json hxb_json;
struct hxb_json {
    hxb_jtype type;
    double num;
    char *str;        /* string value, or the key of an object member */
    char *key;
    hxb_json *child;  /* first element / member */
    hxb_json *next;
};
hxb_json *hxb_json_parse(const char *text, size_t len, char *err, size_t cap);
void hxb_json_free(hxb_json *v);
const hxb_json *hxb_json_get(const hxb_json *obj, const char *key);
double hxb_json_num(const hxb_json *v, double dflt);
const char *hxb_json_str(const hxb_json *v, const char *dflt);

/* timeline.c: a Chrome trace drawn as one lane per device/thread; the
 * title names what was traced (NULL: the file's name). */
int hxb_timeline_write(const char *trace_path, const char *svg_path, const char *title, char *err, size_t cap);

#endif
