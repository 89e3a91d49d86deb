/*
 * hetero — transformer inference across the CPUs, CUDA GPUs and FPGA/OpenCL
 * devices of one machine.
 *
 * This header is the whole public API.  Conventions:
 *   - every function that can fail returns hx_status; HX_OK is 0;
 *   - hx_status_str() names a status, hx_last_error() gives the detail of the
 *     last failure on the calling thread (file, tensor, offset, device); a
 *     call that returns HX_OK leaves it empty;
 *   - objects come in create/destroy (or open/close) pairs; destroy accepts
 *     NULL;
 *   - misuse of a runtime, model or session handle (used after its close,
 *     closed twice, closed while others depend on it) is detected and
 *     refused with HX_ERR_STATE, not undefined: see "Handles" below;
 *   - environment variables HX_* only supply defaults for options that the
 *     API also takes (see README.md).
 *
 * Usage (the runtime alone).  The examples of this header and README.md
 * are compiled and run by make test (tests/check-examples.sh), each from
 * its "// example:" line to the end of its indented block:
 *
 *     // example: runtime
 *     hx_runtime *rt;
 *     hx_runtime_options o = hx_runtime_options_default();
 *     if (hx_runtime_open(&rt, &o) != HX_OK) { puts(hx_last_error()); return 1; }
 *     hx_buffer *x;
 *     hx_buffer_create(rt, n * sizeof(float), &x);
 *     // ... tasks that read and write x (hx_task_submit) ...
 *     hx_buffer_destroy(x);
 *     hx_runtime_close(rt);
 */
#ifndef HETERO_H
#define HETERO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define HX_API __attribute__((visibility("default")))
#else
#define HX_API
#endif

#define HX_VERSION_MAJOR 0
#define HX_VERSION_MINOR 1
#define HX_VERSION_PATCH 0

/* ------------------------------------------------------------------------
 * Status and errors
 * ---------------------------------------------------------------------- */

/* X-macro: the one table of status codes, their names and messages. */
#define HX_STATUS_LIST(X)                                                      \
    X(HX_OK, 0, "success")                                                     \
    X(HX_ERR_INVALID_ARG, -1, "invalid argument")                              \
    X(HX_ERR_NO_MEMORY, -2, "out of memory")                                   \
    X(HX_ERR_IO, -3, "input/output error")                                     \
    X(HX_ERR_FORMAT, -4, "malformed file")                                     \
    X(HX_ERR_UNSUPPORTED, -5, "unsupported")                                   \
    X(HX_ERR_NOT_FOUND, -6, "not found")                                       \
    X(HX_ERR_NO_DEVICE, -7, "no capable device")                               \
    X(HX_ERR_DEVICE, -8, "device failure")                                     \
    X(HX_ERR_STATE, -9, "invalid state")                                       \
    X(HX_ERR_RANGE, -10, "out of range")                                       \
    X(HX_ERR_TASK_FAILED, -11, "a task this depends on failed")

typedef enum {
#define HX_STATUS_ENUM(name, value, msg) name = value,
    HX_STATUS_LIST(HX_STATUS_ENUM)
#undef HX_STATUS_ENUM
} hx_status;

/* The status's name, e.g. "HX_ERR_FORMAT"; never NULL. */
HX_API const char *hx_status_str(hx_status s);
/* A one-line description of the last failure on this thread.  A call that
 * returns HX_OK empties it, whatever failed and was recovered from inside
 * it (a call made from inside a callback, such as hx_token_callback,
 * leaves that to the call around it).  Functions that return no status
 * leave it as it was, except when they refuse a handle (see "Handles"). */
HX_API const char *hx_last_error(void);

/* ------------------------------------------------------------------------
 * Handles
 *
 * Runtimes, models and sessions are checked on entry against the handles
 * open in the process, by address, as SQLite checks its connections
 * (SQLITE_MISUSE).  A handle closed already, or never opened, gets
 * HX_ERR_STATE ("... is not an open session (closed already, or never
 * opened)") from the functions that return a status, and 0 or NULL from
 * the queries that return a value, the detail in hx_last_error(); NULL gets
 * HX_ERR_INVALID_ARG, except from a close, for which it is HX_OK.
 *
 * A close that would leave another handle dangling is refused with
 * HX_ERR_STATE naming what is still open, and changes nothing (as
 * sqlite3_close answers SQLITE_BUSY): hx_model_free while sessions of the
 * model are open, hx_runtime_close while models are loaded on it or its
 * buffers are not destroyed.  Close in the reverse order of opening.
 *
 * Not detected: once the allocator gives a closed handle's address to a
 * new handle of the same kind, the old pointer names the new object (as a
 * reused file descriptor does); a handle closed by one thread while
 * another is inside a call on it; buffers, tasks and tokenizers, which are
 * not checked (destroying a buffer twice, or waiting for a task twice, is
 * undefined).
 * ---------------------------------------------------------------------- */

/* ------------------------------------------------------------------------
 * Runtime and devices
 * ---------------------------------------------------------------------- */

typedef struct hx_runtime hx_runtime;

typedef enum {
    HX_FAMILY_CPU = 0,    /* CPU cores, run by the runtime's own threads   */
    HX_FAMILY_OPENCL = 1, /* any OpenCL device: GPU, CPU (PoCL) or FPGA     */
    HX_FAMILY_CUDA = 2,   /* NVIDIA GPUs through the CUDA plugin            */
    HX_FAMILY_COUNT
} hx_device_family;

typedef enum {
    HX_KIND_CPU = 0,
    HX_KIND_GPU = 1,
    HX_KIND_FPGA = 2,
    HX_KIND_ACCELERATOR = 3, /* any other OpenCL accelerator */
} hx_device_kind;

typedef struct {
    int index;                 /* position in the runtime's device table */
    char name[128];
    char vendor[64];
    char platform[64];         /* OpenCL platform or "hwloc"/"CUDA"      */
    char version[64];          /* driver / device version string        */
    hx_device_family family;
    hx_device_kind kind;
    int compute_units;         /* cores, CUs or SMs                      */
    uint64_t global_mem_bytes;
    uint64_t local_mem_bytes;  /* per work-group / shared memory         */
    int unified_memory;        /* shares memory with the host: no copies */
    int memory_node;           /* 0 = host memory; others own memory     */
    int numa_node;             /* -1 when unknown                        */
    int emulated;              /* e.g. PoCL standing in for an FPGA      */
} hx_device_info;

typedef struct {
    int packages, numa_nodes, cores, pus;
    uint64_t l1d_bytes, l2_bytes, l3_bytes; /* per instance, largest seen */
    uint64_t memory_bytes;
    int pci_devices, os_devices;
} hx_topology_info;

typedef struct {
    /* Devices to open, comma separated names or families ("cpu",
     * "opencl", "fpga", "gpu", "cuda", "all"); NULL = HX_DEVICES or "all".
     * "all" is every device that adds compute: a device that only runs on
     * the cores the CPU device already uses (PoCL's CPU device) is left
     * out, and opens when named ("opencl") or as an emulated FPGA
     * (fpga_emulation). */
    const char *devices;
    /* CPU worker threads; 0 = HX_THREADS or one per physical core the
     * opening thread may run on (its affinity mask: taskset, cpusets). */
    int cpu_threads;
    /* Present PoCL as an emulated FPGA: NULL = HX_FPGA_EMULATION;
     * "pocl" enables, "" or "off" disables. */
    const char *fpga_emulation;
    /* Scheduling policy: "static" (each task on the device it prefers:
     * the same placement every run, hence the same results), "eager" (one
     * central queue), "ws" (work stealing), "dmda" (earliest expected
     * completion from the performance models and the cost of moving data,
     * with load-aware migration), "plan" (a whole step's placement
     * chosen ahead from the performance and bus models, per batch shape,
     * made again when a device's speed changes), "ngl" (llama.cpp's -ngl:
     * the layers that fit on the GPU there, the rest on the CPU); NULL =
     * HX_SCHED or "static".  Under
     * eager, ws and dmda a task's device depends on timing, so with two
     * devices that compute differently (rounding) results may differ from
     * run to run; see docs/scheduling.md. */
    const char *sched;
    /* Pin CPU threads to cores (hwloc); -1 = HX_PIN or off. */
    int pin_threads;
    /* Slowdowns and failures injected into devices, for tests and
     * benchmarks: entries separated by ';', each a device selector
     * (dev=INDEX or kind=cpu|gpu|fpga|accelerator) and effects (slow=F: its
     * tasks take F times as long; fail=P: a fraction P of its tasks fail;
     * seed=S: the failures' draws; count=N: only its next N tasks), e.g.
     * "dev=1,slow=3;kind=fpga,fail=0.1".  NULL = HX_INJECT; "" = none. */
    const char *inject;
    /* Record a trace of the whole run, written at hx_runtime_close to this
     * path (see hx_runtime_trace_start); NULL = HX_TRACE; "" = none. */
    const char *trace;
    /* Directory of the performance models: NULL = HX_CACHE_DIR/perfmodels,
     * else $XDG_CACHE_HOME/hetero/perfmodels (~/.cache/...); "" or "off"
     * (also HX_CACHE_DIR=off) keeps them in memory only. */
    const char *perfmodel_dir;
    /* Simulate the machine a description file describes (see
     * docs/simulator.md, bench/machines/) instead of using this one: its
     * devices replace discovery, no kernel runs, time is virtual and
     * advances by the description's costs.  Buffers get host memory only
     * when the host accesses them.  A simulated runtime is used from one
     * thread at a time.  NULL = HX_SIM; "" = the real machine. */
    const char *machine;
} hx_runtime_options;

HX_API hx_runtime_options hx_runtime_options_default(void);
/* opts may be NULL: every option at its default (environment, then built-in). */
HX_API hx_status hx_runtime_open(hx_runtime **out, const hx_runtime_options *opts);
/* Seconds on the runtime's clock: monotonic time, or the simulated
 * machine's virtual time. */
HX_API double hx_runtime_clock(const hx_runtime *rt);
/* 1 when the runtime simulates a described machine. */
HX_API int hx_runtime_simulated(const hx_runtime *rt);
/* Waits for every task, writes a trace still recording and the
 * performance models, and frees the runtime.  HX_ERR_STATE, the runtime
 * left open and usable, while models are loaded on it or buffers created
 * on it are not destroyed; task handles never waited for are released. */
HX_API hx_status hx_runtime_close(hx_runtime *rt);

HX_API int hx_runtime_device_count(const hx_runtime *rt);
HX_API hx_status hx_runtime_device_info(const hx_runtime *rt, int index, hx_device_info *out);
HX_API hx_status hx_runtime_topology(const hx_runtime *rt, hx_topology_info *out);
/* Why a family has no device (e.g. "CUDA plugin not found: ..."), or NULL. */
HX_API const char *hx_runtime_absence_reason(const hx_runtime *rt, hx_device_family f);
HX_API const char *hx_device_family_str(hx_device_family f);
HX_API const char *hx_device_kind_str(hx_device_kind k);

/* ------------------------------------------------------------------------
 * Unified buffers: one logical array that every device can use.
 * ---------------------------------------------------------------------- */

typedef struct hx_buffer hx_buffer;

typedef enum {
    HX_R = 1,  /* read          */
    HX_W = 2,  /* write (all)   */
    HX_RW = 3, /* read & write  */
} hx_access;

/* Allocates `bytes` of 64-byte-aligned, NUMA-local host storage. */
HX_API hx_status hx_buffer_create(hx_runtime *rt, size_t bytes, hx_buffer **out);
/* Wraps caller-owned host memory (e.g. a mapped file); not freed by hetero.
 * Read-only wrappers may only be read by tasks. */
HX_API hx_status hx_buffer_wrap(hx_runtime *rt, void *host, size_t bytes, int read_only,
                                hx_buffer **out);
/* Waits for the tasks that use the buffer, then frees it. */
HX_API void hx_buffer_destroy(hx_buffer *b);
HX_API size_t hx_buffer_size(const hx_buffer *b);
/* Divides the buffer into blocks of block_bytes (the last may be shorter)
 * whose copies on each device are valid or stale one by one: a task that
 * names some (hx_task_desc.blocks) moves those alone.  Once, while no
 * submitted task uses the buffer. */
HX_API hx_status hx_buffer_set_blocks(hx_buffer *b, size_t block_bytes);
/* Makes the host copy valid for `mode` after the tasks submitted so far,
 * and returns it.  HX_W/HX_RW invalidate device replicas.  There is
 * nothing to release afterwards: the caller's use ends where it submits
 * the next task on the buffer. */
HX_API hx_status hx_buffer_acquire(hx_buffer *b, hx_access mode, void **host);

/* ------------------------------------------------------------------------
 * Codelets and tasks
 * ---------------------------------------------------------------------- */

typedef struct hx_task hx_task;

/* What a CPU implementation sees: which share of the work it is to do,
 * the task's buffers (host pointers, in the task's order) and its argument
 * block.  A task is cut into nth shares that the CPU threads claim one by
 * one, so shares may run in any order, on any thread, and must not wait
 * for one another (a phase that must finish first is cpu_prepare). */
typedef struct {
    int ith, nth;            /* this share's index and the number of shares */
    void *const *buffers;
    const size_t *sizes;
    const void *args;
    void *scratch;           /* cpu_scratch() bytes, 64-byte aligned, shared by all shares */
    /* Per buffer, the same data in a layout hetero made for its own CPU
     * kernels (a model's weights repacked), or NULL: always NULL for
     * buffers an application creates. */
    const void *const *layouts;
} hx_cpu_call;

/* An OpenCL launch: filled by the codelet from its arguments. */
#define HX_CL_MAX_ARGS 24
typedef struct {
    const char *kernel;     /* kernel name in the codelet's program       */
    unsigned work_dim;
    size_t global[3];
    size_t local[3];        /* 0 = let the driver choose                  */
    int nargs;
    struct {
        int buffer;          /* >= 0: index of the task's buffer          */
        size_t size;         /* scalar size, or local memory size         */
        const void *value;   /* scalar value; NULL with buffer < 0 = local */
    } arg[HX_CL_MAX_ARGS];
    /* Optional: a second kernel of the same program, run after `kernel`
     * with the same arguments over its own range (a reduction of what the
     * first wrote to scratch); NULL = none. */
    const char *then_kernel;
    size_t then_global[3];
    size_t then_local[3];
    /* Bytes of device memory the kernels share for the run: the argument
     * whose buffer is HX_CL_ARG_SCRATCH (contents undefined at the start). */
    size_t scratch;
    /* Scalars the launch computed, for arg[].value to point to. */
    uint64_t values[4];
} hx_cl_launch;

/* hx_cl_launch.arg[].buffer for the launch's scratch memory. */
#define HX_CL_ARG_SCRATCH (HX_TASK_MAX_BUFFERS + 1)

/* The arithmetic a codelet's flops are done in, for machine models
 * (peak rates differ by precision). */
typedef enum { HX_PREC_F32 = 0, HX_PREC_F16 = 1, HX_PREC_INT8 = 2, HX_PREC_COUNT } hx_precision;

typedef struct {
    const char *name;          /* unique; a CUDA plugin kernel of that name runs it */
    /* CPU: called on every thread of the CPU team; returns 0 or an hx_status. */
    int (*cpu)(const hx_cpu_call *call);
    /* Optional first phase, shared the same way, complete before `cpu` starts. */
    int (*cpu_prepare)(const hx_cpu_call *call);
    /* Scratch memory the CPU implementation needs for nth shares (NULL: none). */
    size_t (*cpu_scratch)(const void *args, const size_t *sizes, int nth);
    /* OpenCL: the program source (NULL = the embedded kernels_cl program
     * named `cl_program`) and a function filling the launch. */
    const char *cl_source;
    const char *cl_program;
    int (*cl_launch)(const void *args, const size_t *sizes, hx_cl_launch *out);
    /* Cost, for performance models: floating-point ops and bytes moved. */
    double (*flops)(const void *args, const size_t *sizes);
    double (*bytes)(const void *args, const size_t *sizes);
    /* Optional: the precision of those flops (NULL = HX_PREC_F32). */
    hx_precision (*precision)(const void *args, const size_t *sizes);
} hx_codelet;

#define HX_TASK_MAX_BUFFERS 16

typedef struct {
    const hx_codelet *codelet;
    int nbuffers;
    hx_buffer *buffers[HX_TASK_MAX_BUFFERS];
    hx_access modes[HX_TASK_MAX_BUFFERS];
    const void *args;       /* copied at submission */
    size_t args_size;
    int device;             /* -1 = scheduler decides; else a device index */
    int priority;
    /* Devices the task would rather run on (bit d = device d; 0 = no
     * preference).  A hint: "static" follows it, dynamic policies may
     * override it; `device` is the hard pin. */
    uint32_t prefer;
    /* The blocks of its divided buffers (hx_buffer_set_blocks) the task
     * touches, copied at submission: only they are copied to the device
     * it runs on, and only they count as written there.  NULL = all; a
     * list with nblocks 0 = none (a part of attention with no block). */
    const uint32_t *blocks;
    uint32_t nblocks;
} hx_task_desc;

/* Submits a task; dependencies follow from the buffers' access modes in
 * submission order.  `out` may be NULL (the task is then detached). */
HX_API hx_status hx_task_submit(hx_runtime *rt, const hx_task_desc *desc, hx_task **out);
/* Waits for the task, returns its status (or HX_ERR_TASK_FAILED if one it
 * depended on failed) and releases the handle. */
HX_API hx_status hx_task_wait(hx_task *t);
/* Waits for every task; returns the first failure since the last call. */
HX_API hx_status hx_runtime_wait_all(hx_runtime *rt);
/* The device a finished task ran on (before hx_task_wait releases it). */
HX_API int hx_task_device(const hx_task *t);

/* ------------------------------------------------------------------------
 * Built-in codelets (implemented on every device family that can)
 * ---------------------------------------------------------------------- */

/* "vector_add": buffers x (R), y (R), z (W) of n floats; z = x + y. */
typedef struct { uint64_t n; } hx_args_vector_add;
/* "gemm_f32": buffers A (R, M x K), B (R, N x K), C (W, M x N), row-major;
 * C[m][n] = sum_k A[m][k] * B[n][k]  (B holds weights row by row). */
typedef struct { uint32_t M, N, K; } hx_args_gemm_f32;

/* A built-in codelet by name, or NULL: its name and cost, found once and
 * then submitted as often as wanted.  Each device binds its own
 * implementation of the op when the runtime opens it, so the returned
 * codelet's own implementation fields are empty. */
HX_API const hx_codelet *hx_codelet_builtin(const char *name);
/* 1 when the device has an implementation of the built-in codelet `name`
 * (for some arguments: an OpenCL matmul may lack a weight type). */
HX_API int hx_device_implements(const hx_runtime *rt, int device, const char *name);

/* ------------------------------------------------------------------------
 * Models, sessions and generation
 *
 *     // example: model
 *     hx_model *m;   hx_model_load(rt, "model.gguf", NULL, &m);
 *     hx_session *s; hx_session_open(m, &s);
 *     int32_t ids[256]; size_t n;
 *     hx_model_tokenize(m, "Hello", 5, 1, 1, ids, 256, &n);
 *     hx_session_eval(s, ids, n, 0);          // prefill
 *     const float *logits = hx_session_logits(s, -1);
 * ---------------------------------------------------------------------- */

typedef struct hx_model hx_model;
typedef struct hx_session hx_session;

typedef struct {
    /* How each layer's tasks are spread over the devices (a preference the
     * scheduling policy weighs, see hx_task_desc.prefer): "affinity" (the
     * design's mapping: preprocessing on the CPU, GEMMs on a GPU, attention
     * on an FPGA, each falling back to the next best device that can run
     * it), "layers" (contiguous layers per device, as pipeline stages),
     * "colocated" (every task with the GEMMs, on the device that holds the
     * weights: no activation crosses PCIe within a layer),
     * "auto" (no preference: the scheduler alone decides).
     * NULL = HX_PARTITION or "affinity". */
    const char *partition;
    /* KV cache: element type "f16" (default), "q8_0", "q4_0" (attention on
     * the CPU only) or "f32"; NULL = HX_KV_TYPE. */
    const char *kv_type;
    /* Tokens the KV pool holds across all sessions (0 = n_ctx: room for
     * one session's whole context). */
    uint32_t kv_tokens;
    /* Tokens per KV block (0 = 16). */
    uint32_t kv_block;
    /* Prefix caching (vLLM's automatic prefix caching): a session's full
     * KV blocks stay in the pool keyed by their tokens, and a prompt that
     * starts with the same tokens attaches them instead of evaluating
     * them.  0 = on (HX_KV_PREFIX_CACHE=0 turns it off), 1 = on, -1 = off. */
    int kv_prefix_cache;
    /* Largest number of tokens one evaluation takes (0 = 512). */
    uint32_t max_batch;
    /* The context: the most tokens one session holds, prompt and generated
     * together (llama.cpp's -c).  0 = the model's trained context
     * (n_ctx_train), lowered when its KV cache would take more than half of
     * the memory the weights leave (hx_model_info.n_ctx says what it got).
     * A larger value is allowed (positions past the trained context may
     * degrade the text); one whose KV cache cannot fit in memory is refused
     * with HX_ERR_NO_MEMORY. */
    uint32_t n_ctx;
    /* Weight matrices repacked for the CPU's kernels at load: a copy with
     * eight rows interleaved block by block (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
     * Q4_K, Q5_K, Q6_K; rows a multiple of eight), read by the CPU's
     * matmul, beside the mapped file that other devices read
     * (hx_model_info.repacked_bytes says how much memory).
     * 0 = HX_REPACK, else on for the types where it is faster; 1 = on,
     * -1 = off. */
    int repack;
    /* Decode replay: an evaluation's task list is recorded once per batch
     * shape (tokens, sequences, longest block table, rows of logits) and
     * submitted again with the new step's KV blocks, without building the
     * graph, checking the tasks, looking up their codelets or costing
     * them again; the scheduling policy still places every task.  The
     * last 8 shapes used keep their recordings (HX_REPLAY_SHAPES=1..8
     * keeps fewer); a device leaving service or a reallocated activation
     * buffer drops them all, and an activation observer makes a fresh
     * graph.  0 = HX_GRAPH_REPLAY (on unless "0"), 1 = on, -1 = off. */
    int graph_replay;
    /* A layer's Q/K/V projections as one task, and its gate/up pair as
     * another ("matmul_multi": the input read and quantized once, one team
     * run over all their rows); the outputs are the same bits.  0 = HX_FUSE
     * (0 turns it off), else on; 1 = on, -1 = off. */
    int fuse_matmuls;
    /* Attention split between the host and the attention device by KV
     * blocks: each token's positions before its last kv_split (back to a
     * block boundary) are attended on the CPU from host memory, the recent
     * ones where attention runs (an FPGA or GPU by the partition), and the
     * two parts merged there, so a device with memory of its own reads
     * only recent blocks.  0 = HX_KV_SPLIT, or off when that is unset. */
    uint32_t kv_split;
    /* The most of the KV cache (every layer's K and V) a device with
     * memory of its own keeps, in bytes: past it, the blocks named there
     * least recently whose copies the host holds give up their room
     * (docs/kv-cache.md); a step that reads more still gets it.  0 =
     * HX_KV_DEVICE_MB (MiB), or no bound when that is unset. */
    uint64_t kv_device_bytes;
    /* The K cache's and the V cache's types apart (llama.cpp's -ctk and
     * -ctv), the same names as kv_type; NULL = HX_KV_TYPE_K / HX_KV_TYPE_V,
     * else kv_type. */
    const char *kv_type_k, *kv_type_v;
    /* A quantized K (V) cache stores each head's rows rotated by an
     * orthonormal Walsh-Hadamard matrix (the queries meet them rotated
     * alike, the values' sum is turned back), which spreads an outlier
     * over its group and loses less to the block scales, as llama.cpp
     * does: K in groups of the largest power of two dividing head_dim, V
     * in groups of 64, when head_dim is a multiple of 64.  A model with a
     * K bias (Qwen2's) also has its quantized keys stored less the bias's
     * mean over the context's positions, which the softmax cancels and the
     * blocks' scales no longer carry (docs/kv-cache.md).  Attention then
     * runs on the CPU.  0 = HX_KV_ROTATE ("0" turns both off), else on;
     * 1 = on, -1 = off. */
    int kv_rotate;
    /* A mixture of experts' router, as the placement planner expects it
     * to choose (docs/scheduling.md): "uniform", "zipf:S", "measured" (the
     * router's own tallies, hx_model_expert_counts, once enough tokens
     * were routed), or the path of a tally file
     * (hx_model_expert_tally_save), to which a model with weights adds
     * its own tallies as it runs.  NULL = HX_MOE_ROUTING, else "measured"
     * for a model with weights, "uniform" for shapes without them. */
    const char *moe_routing;
    /* Room for the prefix cache beyond kv_tokens, in bytes (llama-server's
     * --cache-ram): the pool gains as many tokens as this holds, within
     * half of the memory the weights leave (hx_model_info.kv_prefix_tokens
     * says how many), and finished sessions' keyed blocks stay there until
     * no block is free.  The pool's memory is mapped as it is first
     * written, so the room costs memory only as prefixes fill it.  0 =
     * none. */
    uint64_t kv_prefix_bytes;
} hx_model_options;

typedef struct {
    char arch[32];           /* "llama", "mistral", "qwen2"                  */
    char name[128];          /* general.name, or the file name              */
    char ftype[16];          /* type of most weights: "f16", "q4_K"...       */
    uint64_t n_params, file_bytes;
    uint32_t n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv, n_ff, head_dim;
    uint32_t n_ctx;          /* the context a session may fill (options.n_ctx, resolved) */
    uint32_t kv_tokens;      /* tokens the KV pool holds across all sessions */
    uint64_t kv_bytes;       /* the KV pool's size */
    /* GGUF <arch>.attention.sliding_window (Mistral 7B v0.1's 4096): each
     * token attends to the last sliding_window positions only, and a
     * session's KV blocks wholly before them go back to the pool, so its
     * memory stays bounded however long it runs.  0 = the whole context. */
    uint32_t sliding_window;
    int32_t bos, eos;        /* special ids, -1 when the vocabulary has none  */
    /* Whether prompts start with BOS / end with EOS (GGUF
     * tokenizer.ggml.add_bos_token / add_eos_token, else the vocabulary's
     * default): what hx_model_tokenize's add_special adds. */
    int add_bos, add_eos;
    uint64_t repacked_bytes; /* the weights' repacked copies (hx_model_options.repack) */
    /* Mixture of experts (GGUF <arch>.expert_count, expert_used_count):
     * each token's FFN is the weighted sum of n_expert_used of n_expert
     * experts, chosen per layer by a router.  0: a dense FFN. */
    uint32_t n_expert, n_expert_used;
    /* What one decoded token reads, for a roofline: every weight tensor
     * once (the token embeddings one row, unless they are the output
     * projection too), and the KV cache's K and V of one position in every
     * layer, times the positions it attends to. */
    uint64_t decode_weight_bytes, kv_bytes_per_token;
    /* Of kv_tokens, those hx_model_options.kv_prefix_bytes added. */
    uint32_t kv_prefix_tokens;
} hx_model_info;

HX_API hx_model_options hx_model_options_default(void);
/* Maps a GGUF file; weights are used in place, never copied.  A file of
 * an architecture hetero does not run is refused, HX_ERR_UNSUPPORTED, with
 * its name and the ones it runs. */
HX_API hx_status hx_model_load(hx_runtime *rt, const char *path, const hx_model_options *opts,
                               hx_model **out);
/* The general.architecture values hx_model_load runs, as "llama, mistral,
 * ..." into buf; HX_ERR_RANGE when cap cannot hold them. */
HX_API hx_status hx_model_architectures(char *buf, size_t cap);
/* A model with the shapes of a named architecture and no weights, for a
 * simulated runtime (its tasks never read them): "llama2-7b",
 * "llama2-13b", "llama2-70b", or a synthetic preset ("tiny", "small");
 * `type` is the 2-D weights' type ("q4_0", "f16"...).  It has no
 * tokenizer: evaluate token ids.  HX_ERR_UNSUPPORTED on a real runtime. */
HX_API hx_status hx_model_load_shapes(hx_runtime *rt, const char *shapes, const char *type,
                                      const hx_model_options *opts, hx_model **out);
/* Unmaps the model and frees its KV pool.  HX_ERR_STATE, the model left
 * loaded and usable, while sessions of it are open. */
HX_API hx_status hx_model_free(hx_model *m);
HX_API hx_status hx_model_info_get(const hx_model *m, hx_model_info *out);

/* What a model holds now, for a server's monitoring. */
typedef struct {
    uint32_t sessions_open;
    uint32_t kv_blocks_used;   /* KV blocks held by sessions             */
    uint32_t kv_blocks_total;  /* the pool (hx_model_options.kv_tokens)  */
    uint32_t kv_block_tokens;  /* tokens per block                       */
    /* The prefix cache (hx_model_options.kv_prefix_cache). */
    uint32_t kv_blocks_cached; /* held by no session, kept for a later prompt; evictable */
    uint32_t kv_blocks_shared; /* held by more than one session           */
    uint64_t kv_bytes_used;    /* the blocks held by sessions, all layers */
    uint64_t kv_hits, kv_misses; /* a prompt's full blocks found / not found in the cache */
    uint64_t kv_evictions;     /* cached blocks whose room went to another */
    uint64_t kv_tokens_reused; /* prompt tokens attached instead of evaluated */
    /* Blocks devices with memory of their own gave up to stay within
     * hx_model_options.kv_device_bytes (the host kept them). */
    uint64_t kv_device_evictions;
    /* Decode replay (hx_model_options.graph_replay): task lists recorded,
     * and evaluations submitted from a list an earlier one recorded. */
    uint64_t graphs_recorded, graphs_replayed;
} hx_model_stats;

HX_API hx_status hx_model_stats_get(const hx_model *m, hx_model_stats *out);

/* A mixture-of-experts model's router at work: for layer `layer`, how
 * many tokens each of its n_expert experts was chosen for (every
 * evaluation since the model was loaded, prompts and decode steps alike;
 * a token counts once for each of the n_expert_used experts it goes to).
 * *n = n_expert (0 for a dense model, nothing written); HX_ERR_RANGE when
 * cap < n_expert or the layer does not exist.  Waits for an evaluation in
 * progress. */
HX_API hx_status hx_model_expert_counts(hx_model *m, uint32_t layer, uint64_t *counts, size_t cap, size_t *n);
/* Writes those tallies, every layer's (plus the counts of the tally file
 * the model's moe_routing named, if any), to a text file that
 * hx_model_options.moe_routing / HX_MOE_ROUTING take back: a plan made
 * before a run from what the router chose in an earlier one. */
HX_API hx_status hx_model_expert_tally_save(hx_model *m, const char *path);

/* Activation observers: statistics of what each weight matrix multiplies
 * (hx_imatrix below is one).  After every evaluation's matmul with a model
 * weight (blk.N.attn_q/k/v/output, ffn_gate/up/down, and the output
 * matrix: output.weight, or token_embd.weight when tied), `fn` gets the
 * matmul's input: `rows` activation rows of `cols` f32 values, as they
 * are before being quantized for the weight's dot product, and the
 * weight's GGUF name.  It runs on a CPU thread of the runtime wherever
 * the matmul ran (the runtime copies the input to the host first), calls
 * for different matmuls may overlap, and `x` is valid only during the
 * call.  fn NULL removes the observer; without one an evaluation does no
 * extra work.  Waits for an evaluation in progress; HX_ERR_NO_DEVICE when
 * the runtime has no CPU device to run the observer. */
typedef void (*hx_activation_observer)(void *user, const char *tensor, const float *x, uint32_t rows,
                                       uint32_t cols);
HX_API hx_status hx_model_set_activation_observer(hx_model *m, hx_activation_observer fn, void *user);
/* The same for the experts' 3-D weights (blk.N.ffn_gate_exps, ffn_up_exps,
 * ffn_down_exps) of a mixture-of-experts model: after each evaluation's
 * expert matmuls, `fn` gets, for every expert e of the n_expert that the
 * router gave entries, the `rows` input rows it multiplied (for gate and
 * up the tokens routed to e, for down their gated hidden rows), in the
 * batch's order.  A token goes to n_expert_used experts, so it is seen by
 * that many.  The same threads, timing and rules as the observer above;
 * a dense model never calls it. */
typedef void (*hx_expert_observer)(void *user, const char *tensor, uint32_t expert, uint32_t n_expert,
                                   const float *x, uint32_t rows, uint32_t cols);
HX_API hx_status hx_model_set_expert_observer(hx_model *m, hx_expert_observer fn, void *user);

/* Importance matrices, llama-imatrix's: per weight matrix and input
 * column, the sum over calibration tokens of the squared activation, and
 * the number of rows summed; the quantizer weighs each column's rounding
 * error by their ratio.  hx_imatrix_collect adds every evaluation of the
 * model to them, with llama-imatrix's choice of matmuls: the layers'
 * weights (blk.*), output.weight only with HX_IMATRIX_OUTPUT, and only
 * matmuls of at least 16 rows (single-token decode steps are left out).
 * Files are llama.cpp's: its GGUF form (<tensor>.in_sum2, <tensor>.counts,
 * imatrix.datasets, imatrix.chunk_count, imatrix.chunk_size) and its
 * legacy .dat form, told apart when read; either reads in llama-quantize
 * --imatrix and llama-imatrix --in-file.  chunk_size (tokens per chunk)
 * gives chunk_count (the most rows of any matrix / chunk_size) and turns a
 * legacy file's per-chunk means back into sums, as llama-imatrix does; 0
 * takes a GGUF file's own, else 512.  An hx_imatrix may be collected into
 * and read from different threads; saving reads a consistent copy. */
typedef struct hx_imatrix hx_imatrix;
typedef enum { HX_IMATRIX_GGUF = 0, HX_IMATRIX_DAT = 1 } hx_imatrix_format;
enum { HX_IMATRIX_OUTPUT = 1 }; /* hx_imatrix_collect: also output.weight (llama-imatrix --process-output) */

HX_API hx_status hx_imatrix_create(uint32_t chunk_size, hx_imatrix **out);
/* Adds a file's sums, counts and datasets (llama-imatrix --in-file): a
 * matrix both hold must have the same number of columns.  HX_ERR_IO when
 * it cannot be read, HX_ERR_FORMAT when it is neither form or is
 * truncated or inconsistent; nothing is added then. */
HX_API hx_status hx_imatrix_merge_file(hx_imatrix *im, const char *path);
/* Names the calibration text in the file's imatrix.datasets. */
HX_API hx_status hx_imatrix_add_dataset(hx_imatrix *im, const char *name);
/* Observes `m`'s evaluations from now on (hx_model_set_activation_observer,
 * and hx_model_set_expert_observer for the experts' weights, each expert
 * its own matrix of the entry, every routed row counted as llama-imatrix);
 * im NULL stops.  im must outlive the observation.  Tokens the prefix
 * cache attaches are not evaluated, hence not seen: collect with
 * kv_prefix_cache -1 to count every token of a text. */
HX_API hx_status hx_imatrix_collect(hx_model *m, hx_imatrix *im, unsigned flags);
HX_API hx_status hx_imatrix_save(const hx_imatrix *im, const char *path, hx_imatrix_format format);

typedef struct {
    const char *name;     /* the weight, e.g. "blk.0.attn_q.weight" */
    const float *values;  /* n: per column, sum of squares / count (llama-quantize's importance) */
    const double *sums;   /* n: per column, the sum of squares */
    int64_t n;
    int64_t count;        /* rows summed (the most of any expert) */
} hx_imatrix_entry;

typedef struct {
    size_t n_entries, n_datasets;
    uint32_t chunk_size, chunk_count;
} hx_imatrix_info;

HX_API hx_status hx_imatrix_info_get(const hx_imatrix *im, hx_imatrix_info *out);
/* Entries are in name order; pointers stay valid until the next change. */
HX_API hx_status hx_imatrix_entry_at(const hx_imatrix *im, size_t i, hx_imatrix_entry *out);
HX_API hx_status hx_imatrix_dataset_at(const hx_imatrix *im, size_t i, const char **out);
HX_API void hx_imatrix_free(hx_imatrix *im);

/* The partition plan: one entry per task of one evaluation, in submission
 * order, with the device the task prefers and why. */
typedef struct {
    int layer;             /* -1 before the layers (embedding), n_layer after (output) */
    char op[32];           /* codelet name: "matmul", "attention"... */
    char task_class[16];   /* "preprocess", "gemm" or "attention" */
    double flops, bytes;   /* cost of the task for one token at the start of a sequence */
    int device;            /* the device it prefers; -1 = the scheduler decides */
    uint32_t prefer;       /* every device it prefers (bit d = device d) */
    char reason[112];      /* e.g. "prefers gpu: none present" */
} hx_plan_task;

/* Number of tasks of one evaluation (0 on error, see hx_last_error). */
HX_API size_t hx_model_plan_size(hx_model *m);
/* The i-th task of the plan; HX_ERR_RANGE past the end. */
HX_API hx_status hx_model_plan_get(hx_model *m, size_t i, hx_plan_task *out);

/* Writes hetero's built-in synthetic model: a deterministic LLaMA with
 * seeded random weights and a byte-level vocabulary.  preset: "tiny"
 * (~15M parameters) or "small" (~110M); or one of another architecture:
 * "qwen3-tiny" (heads of 128 over n_embd 512), "mixtral-tiny" (a llama
 * with 8 experts, 2 used), "qwen3moe-tiny" (16 experts, 4 used),
 * "gemma3-tiny" (a sliding window of 32 on 5 layers of 6),
 * "qwen3moe-skewed" (Qwen3-30B-A3B's 48 layers of 128 experts, 8 used, on
 * tiny matrices, with a router skewed towards some experts); type: "f32",
 * "f16", "q8_0", "q4_0", "q4_K"... for the 2-D weights. */
HX_API hx_status hx_model_write_synthetic(const char *path, const char *preset, const char *type,
                                          uint64_t seed);

/* Rewrites a GGUF model with its 2-D weights in `type` (llama-quantize's
 * convention: "Q4_K", "q8_0", "F16"...), keeping every metadata key and the
 * 1-D tensors.  A matrix whose rows are not whole blocks of `type` keeps
 * its type.  `report`, when not NULL, is called once per tensor. */
typedef void (*hx_quantize_report)(void *user, const char *tensor, const char *from_type,
                                   const char *to_type, uint64_t from_bytes, uint64_t to_bytes);
HX_API hx_status hx_model_quantize(const char *in_path, const char *out_path, const char *type,
                                   hx_quantize_report report, void *user);

/* llama-quantize's options (hetero-quantize takes the same flags).  Start
 * from hx_quantize_options_default().  Exactly one of `recipe`,
 * `target_bpw` and `target_bytes` chooses the types:
 *   - recipe: llama-quantize's name ("Q4_K_M", "Q3_K_S", "Q8_0", "F16",
 *     "Q4_K" = "Q4_K_M" ...) with its per-tensor rules (attn_v, ffn_down,
 *     output, token_embd by layer, grouped-query attention, fallbacks for
 *     rows that are not whole blocks);
 *   - target_bpw / target_bytes: mixed precision by budget: every matrix
 *     gets the type, among those hetero can write, that minimises the sum
 *     of importance-weighted squared errors under the size budget (all
 *     tensor data, 1-D tensors included; bits per weight count every
 *     element, as llama-quantize's BPW does).
 * The output is written beside `out_path` and renamed over it: a failure
 * leaves no partial file.  general.file_type and
 * general.quantization_version are recorded as llama.cpp records them. */
typedef void (*hx_quantize_choice)(void *user, const char *tensor, const char *type, uint64_t bytes,
                                   double error);
/* Sizes as llama-quantize prints them. */
typedef struct {
    uint64_t elements, in_bytes, out_bytes; /* all tensors */
    int fallbacks;                          /* matrices whose rows forced a fallback type */
    uint32_t file_type;                     /* general.file_type written */
} hx_quantize_totals;
typedef struct {
    const char *recipe;
    double target_bpw;
    uint64_t target_bytes;
    int pure;                 /* every matrix to the recipe's base type (fallbacks aside) */
    int allow_requantize;     /* an already quantized matrix is refused without it */
    int leave_output_tensor;  /* output.weight keeps its type */
    int dry_run;              /* choose and report, write nothing */
    const char *output_tensor_type;   /* NULL: the recipe's choice */
    const char *token_embedding_type; /* NULL: the recipe's choice */
    /* "PATTERN=TYPE" as llama-quantize's --tensor-type: PATTERN is a POSIX
     * extended regular expression searched in the (lower-cased) tensor
     * name; the first that matches wins. */
    const char *const *tensor_types;
    size_t n_tensor_types;
    /* Importance weights (an importance matrix): the n per-column weights
     * of a tensor, or NULL when there are none for it. */
    const float *(*importance)(void *user, const char *tensor, int64_t *n);
    void *importance_user;
    /* An importance matrix file (llama-imatrix's GGUF or .dat), read with
     * hx_imatrix_load; at most one of `imatrix` and `importance`. */
    const char *imatrix;
    /* Budget mode: the types it may choose, comma-separated ("q4_K,q5_K,
     * q6_K"); NULL: every type hetero writes. */
    const char *budget_types;
    hx_quantize_report report; /* per tensor, after it is written */
    hx_quantize_choice choice; /* budget mode: per matrix, its chosen type and error */
    void *user;
    hx_quantize_totals *totals; /* filled on success when not NULL */
    /* Progress of the long steps, for a tool's progress line: called before
     * each tensor of a step with `done` of `total` finished; `step` is
     * "measuring" (budget mode: each matrix quantized to every candidate
     * type) or "quantizing" (writing).  NULL: none. */
    void (*progress)(void *user, const char *step, size_t done, size_t total, const char *tensor);
} hx_quantize_options;

HX_API hx_quantize_options hx_quantize_options_default(void);
HX_API hx_status hx_model_quantize_ex(const char *in_path, const char *out_path, const hx_quantize_options *o);

/* The path of the synthetic model `preset` in `type` in hetero's cache
 * ($HX_CACHE_DIR/models, else $XDG_CACHE_HOME/hetero/models, else
 * ~/.cache/hetero/models; with HX_CACHE_DIR=off the latter two), written
 * there first (seed 1234) if absent; *written says whether it was. */
HX_API hx_status hx_model_synthetic_cached(const char *preset, const char *type, char *path, size_t cap,
                                           int *written);

/* Tokenization with the model's own vocabulary (see hx_tokenizer_encode
 * for the buffer contract).  add_special: add BOS and EOS where the model
 * asks for them (hx_model_info.add_bos / add_eos), as llama.cpp's
 * add_special does; parse_special: text spelling a special token (e.g.
 * "<|im_start|>") becomes that token, as a chat prompt needs. */
HX_API hx_status hx_model_tokenize(const hx_model *m, const char *text, size_t len, int add_special,
                                   int parse_special, int32_t *ids, size_t cap, size_t *n);
HX_API hx_status hx_model_token_to_piece(const hx_model *m, int32_t id, char *buf, size_t cap,
                                         size_t *len);
/* Whether `id` ends generation: EOS, EOT, EOM and the tokens llama.cpp
 * marks end-of-generation by their text (<|im_end|>, <|endoftext|>,
 * <|eot_id|>, <end_of_turn>...). */
HX_API int hx_model_is_eog(const hx_model *m, int32_t id);
/* The fill-in-the-middle tokens of a code model, -1 each where it has
 * none, as llama.cpp finds them: GGUF tokenizer.ggml.fim_pre_token_id,
 * fim_suf, fim_mid, fim_pad, fim_rep, fim_sep (the older prefix_token_id,
 * suffix_token_id, middle_token_id for the first three), else the
 * vocabulary's tokens spelled as the known families spell them
 * (<|fim_prefix|>, <fim-prefix>, <PRE>, <|file_sep|>...). */
typedef struct {
    int32_t pre, suf, mid, pad, rep, sep;
} hx_fim_tokens;
HX_API hx_status hx_model_fim_tokens(const hx_model *m, hx_fim_tokens *out);

/* A session is one sequence: its KV blocks and its position. */
HX_API hx_status hx_session_open(hx_model *m, hx_session **out);
/* Returns the session's KV blocks to the model's pool and frees it;
 * HX_ERR_STATE for a session closed already. */
HX_API hx_status hx_session_close(hx_session *s);
/* Tokens in the session's context so far. */
HX_API uint32_t hx_session_position(const hx_session *s);
/* Evaluates n tokens at the session's position (in chunks of max_batch).
 * logits_all: keep the logits of every token, else of the last one only.
 * Without logits_all, leading full KV blocks the prefix cache holds for
 * the same tokens are attached instead of evaluated (the results are the
 * same; hx_session_reused_tokens says how many).
 * Before evaluating anything it checks that the tokens fit: past the
 * context (hx_model_info.n_ctx) it fails with HX_ERR_RANGE, and when the
 * KV pool cannot give the session the blocks it needs (other sessions
 * hold them) with HX_ERR_NO_MEMORY; either way the message gives the
 * numbers and the session is unchanged. */
HX_API hx_status hx_session_eval(hx_session *s, const int32_t *tokens, size_t n, int logits_all);
/* Prompt tokens the last hx_session_eval, hx_session_generate or
 * hx_batch_eval took from the prefix cache instead of evaluating: the
 * leading full KV blocks another session (open or closed) had evaluated
 * with the same tokens.  Only with the session at a block boundary, never
 * its last token (its logits are computed), and never when logits are
 * kept for an earlier token (logits_all, want_logits). */
HX_API uint32_t hx_session_reused_tokens(const hx_session *s);
/* A new session holding the same context as `s`, its KV blocks shared
 * (copy-on-write: a block is copied when either session writes into it)
 * and its last logits copied: for n > 1 samples of one prompt, or beams. */
HX_API hx_status hx_session_fork(hx_session *s, hx_session **out);
/* Context shift (llama.cpp's --keep N with its context shift): drops the
 * n_discard tokens after the first n_keep; the later tokens' keys and
 * values move back over them, the keys rotated by RoPE to their new
 * positions, so the session holds n_discard fewer tokens and can go on.
 * The logits of the last evaluation stay.  HX_ERR_RANGE when it holds
 * fewer than n_keep + n_discard tokens (or n_discard is 0);
 * HX_ERR_UNSUPPORTED for a sliding-window model. */
HX_API hx_status hx_session_shift(hx_session *s, uint32_t n_keep, uint32_t n_discard);
/* What hx_session_generate does when the session's context fills: with
 * n_keep >= 0, shift (hx_session_shift) keeping the first n_keep tokens
 * and dropping n_discard (0 = half of the rest, as llama.cpp), then go
 * on; with n_keep < 0 (the default) end with HX_FINISH_LENGTH.  A few
 * kept tokens and a small n_discard are StreamingLLM's attention sinks
 * with a recent window. */
HX_API hx_status hx_session_set_context_shift(hx_session *s, int32_t n_keep, uint32_t n_discard);
/* Logits of the i-th token of the last evaluation (-1 = its last token), or
 * NULL if they were not kept.  Valid until the next evaluation. */
HX_API const float *hx_session_logits(const hx_session *s, int i);

/* One evaluation over several sessions: their tokens share one pass over
 * the weights, as llama_batch does.  Entry i appends tokens[i] to
 * sessions[i] at that session's next position; logits are kept for the
 * entries with want_logits[i] (NULL = each session's last entry). */
typedef struct {
    size_t n;
    const int32_t *tokens;
    hx_session *const *sessions;
    const uint8_t *want_logits;
} hx_batch;

HX_API hx_status hx_batch_eval(hx_model *m, const hx_batch *b);

/* One logit bias: `bias` is added to token `token`'s logit. */
typedef struct {
    int32_t token;
    float bias;
} hx_logit_bias;

typedef struct {
    float temperature;    /* 0 = greedy */
    int32_t top_k;        /* 0 = off */
    float top_p;          /* 1 = off */
    float min_p;          /* 0 = off */
    float repeat_penalty; /* 1 = off */
    int32_t repeat_last_n;
    /* OpenAI's penalties, applied as llama.cpp does over the same window
     * of repeat_last_n tokens: a token seen there c > 0 times loses
     * c * frequency_penalty + presence_penalty from its logit.  0 = off;
     * each in [-2, 2], as OpenAI allows. */
    float frequency_penalty;
    float presence_penalty;
    uint64_t seed;
    /* Stop strings (vLLM's SamplingParams.stop, llama.cpp's "stop"):
     * generation ends where the text first contains one of them, and the
     * text passed to the callback ends before it.  NULL / 0 = none. */
    const char *const *stop;
    uint32_t n_stop;
    /* A GBNF grammar (llama.cpp's grammar format; the start rule is
     * `root`) that the generated text must follow: a token is drawn only
     * if its text continues a sentence of the grammar, and an
     * end-of-generation token only where the text is a whole one.  Read
     * when the generation starts (it need not outlive that call); a bad
     * grammar fails it with HX_ERR_INVALID_ARG naming the line and column.
     * NULL = none. */
    const char *grammar;
    /* hx_session_generate: end-of-generation tokens are never sampled (their
     * logits -inf) and so never end it, as llama.cpp's --ignore-eos; 0 = off.
     * (The engine's requests have hx_request.ignore_eos.) */
    int ignore_eos;
    /* ---- llama.cpp's other samplers (appended: a caller built against
     * the fields above that zero-fills the rest gets every one of them
     * off; hx_sampling_default gives llama.cpp's defaults). ---- */
    /* Added to the logits before anything else, as llama.cpp's
     * logit_bias (OpenAI's): -INFINITY bans a token.  Read when the
     * generation starts.  NULL / 0 = none. */
    const hx_logit_bias *logit_bias;
    uint32_t n_logit_bias;
    /* End-of-generation tokens cannot be drawn before this many tokens
     * were generated (vLLM's min_tokens).  0 = off. */
    uint32_t min_tokens;
    /* Locally typical sampling (llama.cpp's typical_p): keeps the tokens
     * whose surprise is nearest the entropy, up to this much probability.
     * In [0, 1]; 1 (and 0) = off. */
    float typical_p;
    /* Mirostat (llama.cpp's): 0 = off, 1 = Mirostat, 2 = Mirostat 2.0.
     * With it the chain is logit bias, temperature, then Mirostat alone
     * (no penalties, top-k/p ...), as llama.cpp's; its mu is per
     * generation, starting at 2 * tau.  tau > 0 (llama.cpp's 5), eta >= 0
     * (0.1). */
    int32_t mirostat;
    float mirostat_tau, mirostat_eta;
    /* DRY, "don't repeat yourself" (llama.cpp's): a token that would
     * extend a repetition of n >= allowed_length tokens seen within the
     * last dry_penalty_last_n (0 = off, -1 = the context) loses
     * multiplier * base^(n - allowed_length); a sequence breaker (text)
     * ends the repetitions it is in.  multiplier 0 = off; base >= 1
     * (1.75); allowed_length >= 0 (2); breakers NULL = llama.cpp's
     * "\n", ":", "\"", "*" (n_dry_breakers 0 with a non-NULL array = none). */
    float dry_multiplier, dry_base;
    int32_t dry_allowed_length, dry_penalty_last_n;
    const char *const *dry_breakers;
    uint32_t n_dry_breakers;
    /* Exclude Top Choices (llama.cpp's XTC): with probability
     * xtc_probability, every token of probability >= xtc_threshold but
     * the least likely of them is removed.  0 = off; both in [0, 1];
     * a threshold > 0.5 is off. */
    float xtc_probability, xtc_threshold;
    /* Top-n-sigma: keeps the logits within top_n_sigma standard
     * deviations of the largest.  <= 0 = off (llama.cpp's -1). */
    float top_n_sigma;
    /* Dynamic temperature (llama.cpp's dynatemp): the temperature goes
     * from max(0, temperature - range) to temperature + range as the
     * normalized entropy of the candidates rises, through
     * entropy^exponent.  range 0 = off; exponent >= 0 (1). */
    float dynatemp_range, dynatemp_exponent;
    /* The chain's order, llama.cpp's sampler letters: e penalties, d DRY,
     * s top-n-sigma, k top-k, y typical, p top-p, m min-p, x XTC,
     * t temperature; a sampler left out is not applied, one given twice
     * runs twice.  NULL = llama.cpp's "edskypmxt". */
    const char *samplers;
    /* Top-p, min-p, typical and XTC keep at least this many tokens
     * (llama.cpp's min_keep).  0 = off. */
    int32_t min_keep;
    /* A budget on the model's thought (llama.cpp's reasoning budget), when
     * reasoning_budget_on: once the tokens of reasoning_start (NULL:
     * "<think>") are generated, or from the first token when
     * reasoning_open says the prompt opened the thought, at most
     * reasoning_budget tokens follow (0: none) before the tokens of
     * reasoning_message (NULL: none) and reasoning_end (NULL: "</think>")
     * are forced, one a step, each with probability 1; the model's own
     * end tag ends the budget first, and a later start tag opens a new
     * one.  A token that leaves a character unfinished is let through
     * before the forcing starts.  Tags match as token sequences, as the
     * tokenizer writes them (parse_special: a control token's text is
     * that token).  Not with a grammar (HX_ERR_UNSUPPORTED). */
    int reasoning_budget_on;
    uint32_t reasoning_budget;
    int reasoning_open;
    const char *reasoning_start, *reasoning_end, *reasoning_message;
} hx_sampling;

HX_API hx_sampling hx_sampling_default(void);

/* Called for each generated token with its text piece: the text that
 * token completes.  It may be an empty string while a multi-byte
 * character is incomplete, or while the text could still be the start of
 * a stop string; what was held back comes with a later token, or at the
 * end in a last call with token -1.  Return non-zero to stop. */
typedef int (*hx_token_callback)(void *user, int32_t token, const char *piece);

/* Why a generation ended. */
typedef enum {
    HX_FINISH_NONE = 0,     /* it did not end: an error stopped it */
    HX_FINISH_STOP = 1,     /* an end-of-generation token, or a stop string */
    HX_FINISH_LENGTH = 2,   /* n_predict tokens, or the context is full */
    HX_FINISH_CALLBACK = 3, /* the callback asked to stop */
    HX_FINISH_CANCELLED = 4, /* hx_engine_cancel, or the engine closed first */
} hx_finish_reason;

/* "none", "stop", "length", "callback", "cancelled" (OpenAI's finish_reason
 * words for the first three). */
HX_API const char *hx_finish_reason_str(hx_finish_reason r);

typedef struct {
    uint32_t prompt_tokens, generated_tokens;
    double prefill_seconds, decode_seconds;
    hx_finish_reason finish;
    /* With HX_FINISH_STOP: the index of the stop string that matched, or
     * -1 for an end-of-generation token. */
    int32_t stop_index;
    uint32_t context_shifts; /* hx_session_set_context_shift's shifts made */
} hx_generation_stats;

/* Evaluates the prompt, then samples up to n_predict tokens, calling `cb`
 * for each; it stops at an end-of-generation token (hx_model_is_eog), a
 * stop string, or when the context is full, and says which in
 * stats->finish.  Before evaluating anything it takes from the KV pool
 * all the request may need (the prompt, plus n_predict tokens up to the
 * context): a prompt longer than the context fails with HX_ERR_RANGE, a
 * pool that cannot give that much with HX_ERR_NO_MEMORY, both with the
 * numbers and nothing evaluated.  Reaching the context while generating
 * is no error: it ends with HX_FINISH_LENGTH and HX_OK. */
HX_API hx_status hx_session_generate(hx_session *s, const int32_t *prompt, size_t n_prompt,
                                     uint32_t n_predict, const hx_sampling *sampling,
                                     hx_token_callback cb, void *user, hx_generation_stats *stats);

/* ------------------------------------------------------------------------
 * Embeddings and reranking (llama.cpp's embeddings mode)
 *
 * A session in embeddings mode keeps, for the tokens whose logits it
 * would keep, the final-norm hidden state (n_embd floats, what the output
 * matrix would multiply) instead of the logits; the output matrix is not
 * applied to them.  Attention stays causal, as llama.cpp's for the
 * LLaMA-family decoders.  Pooling turns a sequence's rows into one vector:
 * `none` (every token's row), `mean`, `cls` (the first token's), `last`,
 * and `rank` for rerankers: the last token's row through the file's
 * classifier head (cls.weight and cls.bias, then tanh, then
 * cls.output.weight and cls.output.bias; either part may be absent),
 * whose first output is the relevance score (llama.cpp's
 * LLAMA_POOLING_TYPE_RANK).
 *
 *     // example: embeddings
 *     int32_t a[64], b[64]; size_t na, nb;
 *     hx_model_tokenize(m, "a cat", 5, 1, 0, a, 64, &na);
 *     hx_model_tokenize(m, "a dog", 5, 1, 0, b, 64, &nb);
 *     const int32_t *inputs[2] = {a, b};
 *     size_t lens[2] = {na, nb};
 *     hx_embed_options eo = hx_embed_options_default();  // the file's pooling, L2
 *     eo.pooling = HX_POOLING_MEAN;
 *     static float out[2 * 8192]; size_t n_out;
 *     hx_model_embed(m, inputs, lens, 2, &eo, out, 2 * 8192, &n_out);  // one evaluation
 * ---------------------------------------------------------------------- */

/* llama.cpp's enum llama_pooling_type, the same values (GGUF
 * <arch>.pooling_type holds them). */
typedef enum {
    HX_POOLING_UNSPECIFIED = -1, /* the file's own */
    HX_POOLING_NONE = 0,
    HX_POOLING_MEAN = 1,
    HX_POOLING_CLS = 2,
    HX_POOLING_LAST = 3,
    HX_POOLING_RANK = 4,
} hx_pooling;

/* "none", "mean", "cls", "last", "rank" (llama-server's --pooling words);
 * "unspecified" for -1, "?" for another value. */
HX_API const char *hx_pooling_str(hx_pooling p);
/* The reverse of hx_pooling_str; HX_ERR_INVALID_ARG naming the words for
 * another one. */
HX_API hx_status hx_pooling_parse(const char *name, hx_pooling *out);

typedef struct {
    hx_pooling pooling;  /* the file's <arch>.pooling_type, HX_POOLING_NONE when absent */
    /* Outputs of the file's classifier head (the rows of cls.output.weight,
     * else of cls.weight); 0 when the file has none, and rank pooling is
     * refused. */
    uint32_t n_cls_out;
    uint32_t n_embd;     /* floats of one pooled embedding */
} hx_model_embedding_info;

/* Reads the file's pooling and classifier head.  A head of a type other
 * than f32, f16 or bf16, or of the wrong shape, is HX_ERR_UNSUPPORTED /
 * HX_ERR_FORMAT (the model stays usable for the other poolings). */
HX_API hx_status hx_model_embedding_info_get(hx_model *m, hx_model_embedding_info *out);

/* Embeddings mode on (1) or off (0) for the session's next evaluations. */
HX_API hx_status hx_session_set_embeddings(hx_session *s, int on);
/* In embeddings mode: the final-norm hidden state of the i-th token of the
 * last evaluation (-1 = its last token), n_embd floats, or NULL when it
 * was not kept (hx_session_eval's logits_all keeps every token's).  Valid
 * until the next evaluation.  hx_session_logits is NULL in this mode. */
HX_API const float *hx_session_embeddings(const hx_session *s, int i);

typedef struct {
    hx_pooling pooling;  /* HX_POOLING_UNSPECIFIED: the file's (hx_model_embedding_info) */
    /* llama-server's embd_normalize: -1 none, 0 max absolute value (scaled
     * to int16's range, 32760), 1 taxicab, 2 Euclidean (L2, the default),
     * p > 2 the p-norm.  Rank scores are never normalized. */
    int32_t normalize;
} hx_embed_options;

HX_API hx_embed_options hx_embed_options_default(void);

/* Pools n_rows rows of n_embd floats (hx_session_embeddings' rows, in
 * token order) into out as `o` says, normalized; `none` copies them.
 * *n_out: the floats written (n_embd, n_rows * n_embd for none, n_cls_out
 * for rank).  HX_ERR_RANGE when cap is too small, HX_ERR_INVALID_ARG for
 * no rows or a pooling the model cannot do (rank without a head). */
HX_API hx_status hx_model_pool(hx_model *m, const float *rows, size_t n_rows, const hx_embed_options *o, float *out,
                               size_t cap, size_t *n_out);

/* Embeds n_inputs token sequences: as many as fit go into each
 * evaluation (max_batch tokens, one session each), every token's hidden
 * state kept where the pooling needs it; each input's result follows the
 * previous one's in out (see hx_model_pool for its size).  An empty
 * input, or one longer than the context, fails with HX_ERR_INVALID_ARG /
 * HX_ERR_RANGE naming it, before anything is evaluated.  Prompts' KV
 * blocks are neither taken from nor left in the prefix cache. */
HX_API hx_status hx_model_embed(hx_model *m, const int32_t *const *inputs, const size_t *n_tokens, size_t n_inputs,
                                const hx_embed_options *o, float *out, size_t cap, size_t *n_out);

/* ------------------------------------------------------------------------
 * Serving engine: many requests, one model, continuous batching
 *
 * One engine thread runs steps; any thread submits, cancels and waits.
 * Each step is one hx_batch_eval: one decode token for every running
 * request plus prefill chunks of waiting ones up to a token budget
 * (chunked prefill), so a long prompt never stalls the others' decode.
 * At admission the leading full KV blocks the prefix cache holds for its
 * tokens are attached (hx_model_options.kv_prefix_cache), so its chunks
 * start after them, wherever the budget would cut the prefix.
 * A request is admitted when the KV pool has room for its next chunk;
 * when an evaluation finds the pool full, the lowest-priority running
 * request (the latest among equals) is preempted: its session is closed,
 * freeing its blocks, and it is queued again to be recomputed, its text
 * unchanged.  Greedy requests give the same tokens alone or batched.
 *
 *     // example: engine
 *     hx_engine *e;  hx_engine_create(model, NULL, &e);
 *     hx_request r = hx_request_default();
 *     r.text = "Once upon a time"; r.max_tokens = 32; r.on_token = cb;
 *     uint64_t id;   hx_engine_submit(e, &r, &id);
 *     hx_request_result res;  hx_engine_wait(e, id, -1, &res);   // -1: no time limit
 *     hx_engine_destroy(e);
 * ---------------------------------------------------------------------- */

typedef struct hx_engine hx_engine;

/* Which waiting request is admitted first.  Whatever the policy, tenants
 * take turns: the waiting request of the tenant with the fewest running
 * requests goes first (round robin among equals), then the policy orders
 * within.  Tenants also share each step's prefill tokens: while several
 * have prompts to read, each gets an equal share of what decoding leaves
 * of the budget first (what one leaves goes to the others), so one
 * tenant's long prompts cannot keep another's short one out of the next
 * step.  A newcomer is admitted first, its first chunk up to the whole
 * budget, before the others' shares: a tenant with nothing running, or
 * with nothing reading a prompt while it is the lightest of the active
 * tenants by more than the prompt (each tenant's evaluated tokens,
 * decaying over 10 s: a light user's next question while its last answer
 * streams).  While
 * several tenants are active the others' prompts take at most
 * shared_prefill tokens a step.  With several tenants known to the
 * engine, the last free running slot (max_running) is kept for a tenant
 * with no request running; with every slot taken, a tenant under its
 * share of them (max_running over the active tenants) has a request of a
 * tenant over its share preempted for its own, as does a KV shortage
 * (the tenant running the most gives way first). */
typedef enum {
    HX_POLICY_FCFS = 0,        /* arrival order */
    HX_POLICY_SHORT_FIRST = 1, /* shortest expected output first (expected_tokens, else max_tokens) */
    HX_POLICY_PRIORITY = 2,    /* highest hx_request.priority first, then arrival */
} hx_engine_policy;

typedef struct {
    hx_engine_policy policy;
    uint32_t max_running;  /* requests holding a session at once (0 = 64) */
    uint32_t token_budget; /* tokens per step, decode and prefill (0 = the model's max_batch) */
    uint32_t max_waiting;  /* submissions queued beyond that; more get HX_ERR_NO_MEMORY (0 = no limit) */
    /* Prompt tokens per step, all tenants together, while more than one
     * tenant has had requests in the engine lately: a newcomer's first
     * token waits for the step in flight and then its own, so steps are
     * kept short whenever another tenant may arrive (0 = token_budget / 32,
     * at least 1).  A newcomer's own first chunk (see hx_engine_policy)
     * is not held to it, and goes alone into its step, the others'
     * decode tokens waiting one step; a lone tenant's steps take the whole
     * token_budget. */
    uint32_t shared_prefill;
} hx_engine_options;

/* One generated token as the engine hands it to a request's callback, on
 * the engine thread: keep it short (copy and return), since the whole
 * batch waits for it.  Every request gets one last call, `last` set and
 * token -1, whatever ended it (its piece: text held back until the end,
 * or ""; `result` says how it ended, as hx_engine_wait will). */
#define HX_ENGINE_MAX_TOP 20
typedef struct {
    uint64_t id;
    int last;
    const struct hx_request_result *result; /* with `last` only */
    int32_t token;
    const char *piece;     /* the text it completes (see hx_token_callback) */
    float logprob;         /* log-probability of `token` under the model (not the sampler's filters;
                              with hx_request.post_sampling_probs, under the distribution it was drawn from) */
    uint32_t n_top;        /* hx_request.top_logprobs alternatives, most likely first */
    int32_t top_token[HX_ENGINE_MAX_TOP];
    float top_logprob[HX_ENGINE_MAX_TOP];
} hx_engine_token;

/* Return non-zero to stop the request (finish HX_FINISH_CALLBACK); the
 * last call's return is not looked at. */
typedef int (*hx_engine_callback)(void *user, const hx_engine_token *t);

/* A request's prompt as the engine has read it (hx_request.on_progress). */
typedef struct hx_engine_progress {
    uint32_t total;     /* the prompt's tokens */
    uint32_t cached;    /* taken from the prefix cache at admission */
    uint32_t processed; /* in the KV now, the cached ones included */
    double seconds;     /* since its first evaluation began */
} hx_engine_progress;
typedef void (*hx_progress_callback)(void *user, const hx_engine_progress *p);

typedef struct {
    /* The prompt: token ids, or else text tokenized as hx_model_tokenize
     * does with add_special and parse_special (BOS where the model asks,
     * special tokens spelled in it are tokens).  Copied at submission. */
    const int32_t *tokens;
    size_t n_tokens;
    const char *text;
    hx_sampling sampling;      /* stop strings copied at submission */
    uint32_t max_tokens;       /* tokens to generate; >= 1; capped by the context */
    int32_t priority;          /* HX_POLICY_PRIORITY's order; the lowest is preempted first */
    uint32_t expected_tokens;  /* HX_POLICY_SHORT_FIRST's length; 0 = max_tokens */
    const char *tenant;        /* the fairness group (an API key's name); NULL = "" */
    uint32_t top_logprobs;     /* alternatives per token in the callback, <= HX_ENGINE_MAX_TOP */
    int ignore_eos;            /* end-of-generation tokens do not end it (benchmarks' fixed lengths) */
    /* 1: it neither attaches cached prefix blocks nor leaves its own in
     * the prefix cache (llama-server's cache_prompt: false): its prompt
     * is evaluated whole and its blocks go back to the pool at its end. */
    int no_prefix_cache;
    /* The prefix cache's partition (vLLM's cache_salt): cached KV blocks
     * are shared only among requests with the same salt, so that one
     * client cannot learn what another's prompts hold from the blocks it
     * finds cached (cached tokens, time to first token).  Bytes, hashed at
     * submission into the key of a prompt's first block; NULL or "" = the
     * common partition.  A salt should hold a secret the clients do not
     * know (the server's per-tenant salts do). */
    const char *cache_salt;
    hx_engine_callback on_token;
    void *user;
    /* 1: an embeddings request (hx_model_embed's, through the batches
     * the engine runs anyway): its prompt is evaluated in embeddings mode
     * and pooled as `embed` says into `embedding` (embedding_cap floats,
     * hx_model_pool's sizes), nothing is generated, and it ends with
     * HX_FINISH_STOP; max_tokens and sampling are not looked at, and the
     * prefix cache is not used.  Too small a buffer is refused at
     * submission (HX_ERR_RANGE). */
    int embed_request;
    hx_embed_options embed;
    float *embedding;
    size_t embedding_cap;
    /* Prompt progress (llama-server's return_progress), on the engine
     * thread with `user`: once when the request is first admitted
     * (processed == cached: nothing evaluated yet), then after each step
     * that evaluated part of its prompt, the last with processed == total.
     * Not called again for a recomputation after a preemption.  NULL =
     * none. */
    hx_progress_callback on_progress;
    /* 1: the callback's logprob and alternatives are those of the
     * distribution the token was drawn from (the sampler chain's survivors,
     * renormalized; llama-server's post_sampling_probs), the alternatives
     * none with probability 0; else the model's own. */
    int post_sampling_probs;
} hx_request;

typedef struct hx_request_result {
    hx_status status;          /* HX_OK, or why the request failed */
    char error[256];           /* the failure's detail, "" on success */
    hx_generation_stats stats; /* prompt/generated tokens, finish, stop_index */
    double queue_seconds;      /* submission to its first evaluation */
    double first_token_seconds;/* submission to its first token */
    double total_seconds;      /* submission to its end */
    uint32_t preemptions;
    /* Prompt tokens attached from the prefix cache instead of evaluated
     * (OpenAI's usage.prompt_tokens_details.cached_tokens): the leading
     * full KV blocks an earlier request evaluated with the same tokens. */
    uint32_t prompt_tokens_cached;
    /* After preemptions: tokens of its own context (prompt and generated)
     * found cached again when it was readmitted, so not recomputed. */
    uint32_t recomputed_tokens_cached;
    size_t embedding_n;        /* an embeddings request: the floats written to hx_request.embedding */
} hx_request_result;

typedef struct {
    uint32_t waiting, running;
    uint64_t submitted, finished, failed, cancelled, preemptions, steps;
    uint64_t prompt_tokens, generated_tokens;
    uint64_t tokens_cached;    /* tokens attached from the prefix cache at admissions */
    double busy_seconds;       /* time spent in the steps' evaluations */
    uint64_t step_requests;    /* the requests in each step's batch, summed over the steps */
} hx_engine_stats;

HX_API hx_engine_options hx_engine_options_default(void);
HX_API hx_request hx_request_default(void);
/* Starts the engine thread on model `m` (which must outlive the engine). */
HX_API hx_status hx_engine_create(hx_model *m, const hx_engine_options *opts, hx_engine **out);
/* Cancels what is still running or waiting, waits for the engine thread,
 * frees the requests nobody waited for and the engine.  NULL is HX_OK. */
HX_API hx_status hx_engine_destroy(hx_engine *e);
/* Queues a request; *id names it to hx_engine_cancel and hx_engine_wait.
 * Refused at once (nothing queued): a prompt longer than the context
 * (HX_ERR_RANGE), bad sampling parameters or max_tokens 0
 * (HX_ERR_INVALID_ARG), a full queue (HX_ERR_NO_MEMORY). */
HX_API hx_status hx_engine_submit(hx_engine *e, const hx_request *r, uint64_t *id);
/* Ends a request at its next step (finish HX_FINISH_CANCELLED), freeing its
 * KV blocks; HX_ERR_NOT_FOUND for an id not submitted or already waited for. */
HX_API hx_status hx_engine_cancel(hx_engine *e, uint64_t id);
/* Waits for the request to end, fills *out and forgets the id.
 * timeout_s < 0 waits for ever; HX_ERR_STATE when the time runs out first
 * (the request goes on; wait again).  HX_ERR_NOT_FOUND for an unknown id. */
HX_API hx_status hx_engine_wait(hx_engine *e, uint64_t id, double timeout_s, hx_request_result *out);
HX_API hx_status hx_engine_stats_get(hx_engine *e, hx_engine_stats *out);

/* ------------------------------------------------------------------------
 * Statistics
 * ---------------------------------------------------------------------- */

typedef struct {
    uint64_t tasks_submitted, tasks_done, tasks_failed;
    uint64_t copies, bytes_copied;   /* between memory nodes */
    uint64_t zero_copy_uses;          /* buffer uses that needed no copy */
    uint64_t migrations;              /* queued tasks moved to another device
                                         (stolen, rebalanced, or moved off a
                                         retired device) */
    double submit_overhead_us;        /* mean per task */
    uint64_t retries;                 /* failed attempts run again */
    uint32_t devices_retired;         /* taken out of service after failing */
    /* Task records held now: submitted and not finished, or finished with
     * a handle not yet given to hx_task_wait.  A finished task nothing
     * waits for is released at once, so this stays at the work in flight
     * however long the runtime runs (hx_runtime_stats_reset leaves it). */
    uint64_t tasks_alive;
    /* Recorded graphs (a model's replayed evaluations) run as one task
     * when every task is placed on the CPU (its only device; or pinned
     * there, or preferring it under a policy that follows preferences):
     * the tasks go in order without being queued and tracked one by one
     * (HX_GRAPH_LAUNCH=0: never).  Their tasks count
     * in the task figures above as if submitted one by one. */
    uint64_t graph_launches;
} hx_runtime_stats;

/* A device's counters and its load monitor. */
typedef struct {
    uint64_t tasks;
    double busy_seconds;
    double busy_fraction;      /* since the runtime opened (or the last reset) */
    uint32_t queue_depth;      /* tasks queued for it now (per-device queues) */
    double backlog_seconds;    /* predicted time to finish its queued and running
                                  tasks (perf models; 0 when the policy has none) */
    double recent_busy;        /* busy fraction, exponentially weighted (~1 s) */
    double tasks_per_second;   /* throughput, exponentially weighted (~1 s) */
    double flops_per_second;   /* useful work per busy second, exponentially weighted */
    uint64_t failures;         /* failed attempts on it (injected or real) */
    int retired;               /* out of service after consecutive failures */
    char last_failure[192];    /* "" when none */
    /* Divided buffers (KV caches, hx_buffer_set_blocks) on a device with
     * memory of its own: bytes allocated there (a model's KV cache: the
     * slots of the blocks its tasks named, docs/kv-cache.md; a buffer an
     * application divided: the whole buffer), and bytes of the blocks its
     * tasks named since they were last discarded, now and at most since
     * the last reset; and bytes of blocks valid in its memory alone,
     * which it could not give up without copying them back.  0 on devices
     * using host memory. */
    uint64_t kv_bytes_allocated, kv_bytes_named, kv_bytes_named_peak;
    uint64_t kv_bytes_device_only, kv_bytes_device_only_peak;
} hx_device_stats;

/* A device is taken out of service after this many consecutive failures
 * (unless it is the last one in service); its queued tasks move on. */
#define HX_RETIRE_AFTER 8

HX_API void hx_runtime_stats_get(const hx_runtime *rt, hx_runtime_stats *out);
HX_API hx_status hx_device_stats_get(const hx_runtime *rt, int device, hx_device_stats *out);
HX_API void hx_runtime_stats_reset(hx_runtime *rt);

/* ------------------------------------------------------------------------
 * Injection, tracing and performance models
 * ---------------------------------------------------------------------- */

typedef struct {
    double slow;     /* >= 1: each task takes `slow` times its time (1 = off) */
    double fail;     /* 0..1: fraction of tasks that fail (HX_ERR_DEVICE) */
    uint64_t seed;   /* seeds the failure draws (deterministic per device) */
    uint32_t count;  /* only the device's next `count` tasks (0 = all) */
} hx_injection;

/* Slows a device or makes it fail a fraction of its tasks (NULL = stop).
 * A failed task leaves its buffers as they were and runs again on another
 * capable device (or the same one when it is the only one). */
HX_API hx_status hx_device_inject(hx_runtime *rt, int device, const hx_injection *inj);

/* Records every task (codelet, device, start, end), copy (bytes, nodes)
 * and migration from now on; hx_runtime_trace_stop writes them to `path`
 * as Chrome trace-event JSON (chrome://tracing, ui.perfetto.dev): one
 * process per device, "X" events for tasks and copies.  A trace still
 * recording at hx_runtime_close is written then. */
HX_API hx_status hx_runtime_trace_start(hx_runtime *rt, const char *path);
HX_API hx_status hx_runtime_trace_stop(hx_runtime *rt);

/* One size bucket of one codelet's model on one device. */
typedef struct {
    char codelet[64];
    char device[128];      /* the device's key: family, name, compute units */
    double size_lo, size_hi; /* footprint range (flops + bytes) of the bucket */
    double flops, bytes;   /* mean cost of the tasks measured */
    uint32_t samples;      /* measurements ever recorded */
    uint32_t window;       /* recent ones the statistics use */
    double median_s, mean_s, min_s, max_s; /* over the window */
    /* The codelet's regression on this device, time = a + b*flops + c*bytes
     * (valid = 0 until enough sizes were seen); repeated on each bucket. */
    int reg_valid;
    double reg_a, reg_b, reg_c;
} hx_perfmodel_entry;

/* Calls `cb` for every bucket of the models stored in `dir` (NULL = the
 * default directory, see hx_runtime_options.perfmodel_dir); a non-zero
 * return stops.  HX_ERR_NOT_FOUND when there is no such directory. */
HX_API hx_status hx_perfmodel_read(const char *dir, int (*cb)(void *user, const hx_perfmodel_entry *e),
                                   void *user);

/* ------------------------------------------------------------------------
 * Tokenizer: text <-> token ids, as llama.cpp computes them, from a GGUF
 * file's tokenizer.ggml.* metadata (`llama` and `gpt2` vocabularies).
 * ---------------------------------------------------------------------- */

typedef struct hx_tokenizer hx_tokenizer;

/* Reads the vocabulary of a GGUF file (weights are not needed). */
HX_API hx_status hx_tokenizer_open(const char *gguf_path, hx_tokenizer **out);
HX_API void hx_tokenizer_close(hx_tokenizer *tok);

/* Tokenizes `len` bytes of text (need not be NUL-terminated nor valid
 * UTF-8).  add_bos: prepend the BOS token (HX_ERR_UNSUPPORTED if the model
 * has none).  parse_special: text spelling a control token (e.g. "<s>")
 * becomes that token; otherwise it is tokenized as plain text.  *n gets the
 * number of ids; if it exceeds `cap` the call returns HX_ERR_RANGE, writes
 * nothing, and *n is the capacity needed (ids may be NULL when cap is 0). */
HX_API hx_status hx_tokenizer_encode(const hx_tokenizer *tok, const char *text, size_t len,
                                     int add_bos, int parse_special, int32_t *ids, size_t cap,
                                     size_t *n);

/* The bytes token `id` stands for (a piece may be part of a UTF-8
 * character).  special: render control/unknown tokens (e.g. "</s>"); else
 * they are empty.  Writes *len bytes and a NUL; HX_ERR_RANGE when cap <=
 * *len, with *len the length needed. */
HX_API hx_status hx_tokenizer_token_to_piece(const hx_tokenizer *tok, int32_t id, int special,
                                             char *buf, size_t cap, size_t *len);

/* Text of a token sequence, as valid UTF-8 (bytes that form no character
 * become U+FFFD).  remove_special: drop a leading BOS / trailing EOS the
 * model adds by itself; unparse_special: render control tokens' text.
 * Same buffer contract as hx_tokenizer_token_to_piece. */
HX_API hx_status hx_tokenizer_decode(const hx_tokenizer *tok, const int32_t *ids, size_t n_ids,
                                     int remove_special, int unparse_special, char *buf,
                                     size_t cap, size_t *len);

HX_API int32_t hx_tokenizer_vocab_size(const hx_tokenizer *tok);
/* Special ids, -1 when the model has none. */
HX_API int32_t hx_tokenizer_bos(const hx_tokenizer *tok);
HX_API int32_t hx_tokenizer_eos(const hx_tokenizer *tok);
/* Whether the model asks for BOS before / EOS after a prompt (GGUF
 * tokenizer.ggml.add_bos_token / add_eos_token, else the vocabulary's
 * default, as llama.cpp decides); 0 when it has no such token. */
HX_API int hx_tokenizer_wants_bos(const hx_tokenizer *tok);
HX_API int hx_tokenizer_wants_eos(const hx_tokenizer *tok);
/* Whether `id` ends generation (EOS, EOT, <|im_end|>...). */
HX_API int hx_tokenizer_is_eog(const hx_tokenizer *tok, int32_t id);

/* ------------------------------------------------------------------------
 * Chat templates: a conversation as the prompt text a chat model was
 * trained on.  A model's own template (Jinja source, in the GGUF) is
 * rendered by hetero's Jinja engine as Hugging Face's apply_chat_template
 * renders it (hx_chat_render, hx_model_chat_render); the built-in families
 * of llama.cpp (hx_chat_apply_template) are the fallback for files
 * without a template, and what llama.cpp's --no-jinja uses.
 * ---------------------------------------------------------------------- */

/* One message of a conversation. role: "system", "user" or "assistant". */
typedef struct { const char *role; const char *content; } hx_chat_message;
/* The model's tokenizer.chat_template (its Jinja source), or NULL when the file has none. */
HX_API const char *hx_model_chat_template(const hx_model *m);
/* The built-in template family that `tmpl` is: a family name given as is ("chatml", "llama2",
 * "llama2-sys", "llama3", "mistral-v1", "mistral-v3", "mistral-v7", "phi3", "gemma", "zephyr", ...)
 * or a Jinja template source recognised as llama.cpp recognises it (llm_chat_detect_template).
 * HX_ERR_UNSUPPORTED, with hx_last_error() saying so, for one it cannot apply. *name is static. */
HX_API hx_status hx_chat_template_name(const char *tmpl, const char **name);
/* Formats `n` messages with template `tmpl` (a family name or Jinja source, as above);
 * add_assistant: end with the opening of the assistant's turn.  Same buffer contract as
 * hx_tokenizer_decode: writes *len bytes and a NUL; HX_ERR_RANGE when cap <= *len, with
 * *len the length needed (buf may be NULL when cap is 0).  A role the family has no place
 * for (one llama.cpp would drop) is HX_ERR_UNSUPPORTED. */
HX_API hx_status hx_chat_apply_template(const char *tmpl, const hx_chat_message *msgs, size_t n,
                                        int add_assistant, char *buf, size_t cap, size_t *len);
/* The i-th built-in family name (for listings such as --help), NULL past the last. */
HX_API const char *hx_chat_template_builtin(size_t i);

/* A conversation for a Jinja chat template, in JSON as the OpenAI API and
 * apply_chat_template take it. */
typedef struct {
    /* A JSON array of messages: {"role", "content"} objects, content a string or a list of
     * {"type": "text", "text"} parts, with what else the template reads ("tool_calls",
     * "tool_call_id", "name", "reasoning_content"...).  Required. */
    const char *messages;
    const char *tools;  /* a JSON array of tool definitions, or NULL for none (None, as apply_chat_template has it) */
    const char *extra;  /* a JSON object of more variables (e.g. {"enable_thinking": false}), or NULL */
    const char *bos_token, *eos_token; /* their text; NULL is "" (hx_model_chat_render: the model's) */
    int add_generation_prompt; /* end with the opening of the assistant's turn */
    /* When the last message is the assistant's (and makes no tool calls), continue it, as
     * llama-server does: the conversation before it is rendered with the generation prompt,
     * then the message's text follows without the template's end of turn (hx_continue). */
    int continue_final;
    int64_t now; /* strftime_now's clock, seconds since the epoch; 0: the current time */
    /* hx_model_chat_render: format with the built-in family the template is, not with
     * the Jinja engine (llama.cpp's --no-jinja); messages must then be plain text. */
    int no_jinja;
} hx_chat_render_options;
/* hx_chat_render_options.continue_final.  Where the template writes thought tags
 * (hx_reasoning_tags), the generation prompt is kept up to its start tag, if it opens a
 * thought, and the tag and the message's "reasoning_content" follow: continuing the thought,
 * the prompt ends there; continuing the content, the end tag and the content follow.
 * Elsewhere the content is appended, and a thought cannot be continued (HX_ERR_INVALID_ARG,
 * as is a message with tool calls asked for by name). */
enum {
    HX_CONTINUE_NONE = 0,    /* render the last message as any other */
    HX_CONTINUE_AUTO = 1,    /* its thought when it has one and no content, else its content */
    HX_CONTINUE_CONTENT = 2, /* its content (after its whole thought) */
    HX_CONTINUE_THOUGHT = 3, /* its thought */
};
/* add_generation_prompt set, continue_final HX_CONTINUE_AUTO, everything else 0/NULL. */
HX_API hx_chat_render_options hx_chat_render_options_default(void);
/* Renders Jinja template source `tmpl` (jinja2's semantics, with trim_blocks and
 * lstrip_blocks as apply_chat_template sets them, its raise_exception and strftime_now,
 * and tojson as transformers defines it).  Same buffer contract as hx_chat_apply_template.
 * Every render is bounded: 16 MiB of text, 64 MiB of values, 1e6 iterations of one loop,
 * 1e7 steps, nesting 1000 deep; passing one is HX_ERR_RANGE naming the limit.  A syntax
 * error is HX_ERR_FORMAT, raise_exception(msg) HX_ERR_INVALID_ARG with msg, malformed
 * JSON HX_ERR_FORMAT, anything else the engine cannot render HX_ERR_UNSUPPORTED; each
 * message names the template line. */
HX_API hx_status hx_chat_render(const char *tmpl, const hx_chat_render_options *o, char *buf, size_t cap,
                                size_t *len);
/* The model's named template tokenizer.chat_template.NAME (e.g. "tool_use"), or its
 * default one for NULL; NULL when the file has no such template. */
HX_API const char *hx_model_chat_template_named(const hx_model *m, const char *name);
/* The conversation as the model's prompt: `tmpl` (Jinja source or a built-in family name;
 * NULL: the file's template, else the built-in chatml as llama.cpp falls back) rendered
 * with the model's BOS and EOS text.  As llama.cpp does, a BOS (EOS) the text starts (ends)
 * with is dropped when tokenizing with add_special adds it again.  Same buffer contract. */
HX_API hx_status hx_model_chat_render(const hx_model *m, const char *tmpl, const hx_chat_render_options *o,
                                      char *buf, size_t cap, size_t *len);

/* ------------------------------------------------------------------------
 * Grammars: constrained output (hx_sampling.grammar takes GBNF text)
 * ---------------------------------------------------------------------- */

/* A JSON Schema as a GBNF grammar whose sentences are JSON texts the schema
 * accepts, as llama.cpp's json-schema-to-grammar writes it: types (and
 * lists of them), properties with required ones first in the schema's
 * order and the optional ones after, additionalProperties, items,
 * prefixItems, minItems/maxItems, minLength/maxLength, enum, const,
 * anyOf/oneOf, allOf of one schema, local $ref (#/$defs/..., recursion
 * included), and the formats date, time, date-time and uuid (other formats
 * are annotations, as JSON Schema defines them: any string).  A keyword it
 * cannot enforce (pattern, minimum, multipleOf, ...) is HX_ERR_INVALID_ARG
 * naming it, never dropped; "{\"type\": \"object\"}" is OpenAI's
 * json_object mode.  Same buffer contract as hx_tokenizer_decode. */
HX_API hx_status hx_json_schema_to_grammar(const char *schema_json, char *buf, size_t cap, size_t *len);

/* ------------------------------------------------------------------------
 * A pipeline over processes (docs/mpi.md)
 *
 * Under `mpirun -np N`, each process (rank) opens its own runtime over its
 * own devices and loads the same model file as one stage: rank r owns a
 * range of layers and their KV cache, rank 0 also the token embedding
 * and the output head.  Rank 0 runs the program (sessions, sampling, a
 * server); every evaluation's hidden states go from rank to rank.  With
 * hx_dist_options.tensor_parallel each rank holds a slice of every layer
 * instead.  The same programs run without mpirun as one process, as
 * before.
 *
 *     hx_dist_info di;  hx_dist_init(&argc, &argv, &opts, &di);
 *     hx_runtime_open(&rt, &ro);                 // each rank its own devices
 *     if (di.rank > 0) return hx_dist_worker(rt); // loads and serves what rank 0 loads
 *     hx_status st = hx_dist_start(m, hx_model_load(rt, path, &mo, &m));
 *     ... use m as always ...
 *     hx_model_free(m);  hx_dist_finalize();
 * ---------------------------------------------------------------------- */

typedef struct {
    /* Layers per rank, "12,18" (they must add up to the model's layers,
     * one number per rank); NULL = balanced by the bytes of weights each
     * layer reads per token, rank 0's share counting the output head. */
    const char *split;
    /* The longest wait, in seconds, for a message that is due (a step's
     * hidden states, a send's completion, the ranks' agreement at start);
     * past it the job is aborted with a message naming the rank waited
     * for.  A rank waiting for the next step waits without bound (a quiet
     * server); mpirun ends the job when a process dies.  0 = HX_MPI_TIMEOUT,
     * else 300. */
    double timeout_s;
    /* Nonzero: tensor parallelism instead of a pipeline (no split): every
     * rank holds a slice of every layer (whole groups of query heads with
     * their KV heads, a range of FFN columns at the quantization blocks)
     * and the ranks sum their partial products after the output and down
     * projections (MPI_Allreduce); the embedding, the norms and the output
     * head are every rank's, and rank 0 alone computes the logits. */
    int tensor_parallel;
} hx_dist_options;

typedef struct {
    int rank, size;    /* this process, and the processes of the job    */
    int mpi;           /* 1 when MPI was initialized (launched by mpirun) */
    uint32_t first_layer, end_layer; /* this rank's layers [first, end), after hx_dist_start */
    uint64_t steps;    /* evaluations this rank took part in            */
    uint64_t messages, bytes; /* sent by this rank                      */
    /* With tensor parallelism (after hx_dist_start): this rank's query
     * heads [first_head, end_head), KV heads [first_kv_head, end_kv_head)
     * and FFN columns [first_ff, end_ff) of every layer; the all-reduces
     * it took part in and the bytes each rank contributed to them. */
    int tensor_parallel;
    uint32_t first_head, end_head, first_kv_head, end_kv_head, first_ff, end_ff;
    uint64_t reductions, bytes_reduced;
} hx_dist_info;

/* Joins the job when the process was launched by mpirun (MPI_Init), else
 * makes it a job of one (no MPI is touched, size 1).  Call before loading
 * a model: the models loaded after it are this rank's stage.
 * HX_ERR_UNSUPPORTED when launched by mpirun and the library was built
 * without Open MPI; HX_ERR_INVALID_ARG for a split of the wrong form or
 * count.  Call once. */
HX_API hx_status hx_dist_init(int *argc, char ***argv, const hx_dist_options *opts, hx_dist_info *out);
/* Rank 0, after each hx_model_load, with the load's status: the other
 * ranks load the same file with the options rank 0 resolved, as their
 * stages, and report; rank 0 checks that they all loaded the same model
 * with the same KV pool and cut, and returns the first rank's failure
 * (naming it and the numbers) or HX_OK, the model ready to evaluate as
 * usual.  Freeing the model tells the other ranks to free theirs.  A job
 * of one, or a failed load: returns `loaded`. */
HX_API hx_status hx_dist_start(hx_model *m, hx_status loaded);
/* Ranks other than 0: on the runtime given (this rank's devices), loads
 * each model rank 0 starts, runs its layers of every step, frees it when
 * rank 0 frees its own, until rank 0 ends the job (hx_dist_finalize):
 * HX_OK then.  A step that fails aborts the job. */
HX_API hx_status hx_dist_worker(hx_runtime *rt);
/* This rank's part and counters so far. */
HX_API hx_status hx_dist_info_get(hx_dist_info *out);
/* Rank 0 tells the other ranks to stop (they return from
 * hx_dist_worker); every rank leaves MPI (MPI_Finalize).  Runs at exit
 * too when not called. */
HX_API hx_status hx_dist_finalize(void);

/* ------------------------------------------------------------------------
 * JSON output
 * ---------------------------------------------------------------------- */

/* Writes `s` to `f` as a JSON string, quotes included: '"', '\\' and the
 * control characters escaped, every other byte (UTF-8) as it is.  The one
 * escaper of the library (its trace), the tools and the benchmarks.
 * HX_ERR_IO when the stream is in error. */
HX_API hx_status hx_json_write_string(FILE *f, const char *s);

/* ------------------------------------------------------------------------
 * Tool calls (function calling): the format a chat template's model writes
 * its calls in, the calls read back out of its answer, and the grammar
 * that forces one (llama.cpp's classic formats, recognised as it does).
 * ---------------------------------------------------------------------- */

typedef enum {
    HX_TOOL_FORMAT_GENERIC = 0, /* the answer {"tool_calls":[...]}, {"tool_call":{...}} or {"response":"..."} */
    HX_TOOL_FORMAT_HERMES = 1,  /* <tool_call>{"name":...,"arguments":{...}}</tool_call> (Qwen 2.5, Hermes 2 Pro),
                                 * or the whole answer that object without the tags */
    HX_TOOL_FORMAT_LLAMA3 = 2,  /* the answer {"name":...,"parameters":{...}}, <|python_tag|> before it or not */
    HX_TOOL_FORMAT_MISTRAL = 3, /* text, then [TOOL_CALLS][{"name":...,"arguments":{...},"id":...}] (Nemo) */
    HX_TOOL_FORMAT_XML = 4,     /* <tool_call><function=NAME><parameter=KEY>VALUE</parameter>...</function>
                                 * </tool_call> (Qwen3-Coder, Qwen3.5, Nemotron 3, Step 3.5) */
    HX_TOOL_FORMAT_SEED = 5,    /* the same inside <seed:tool_call> (Seed-OSS) */
    HX_TOOL_FORMAT_GLM = 6,     /* <tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>...</tool_call>
                                 * (GLM 4.5-4.7) */
} hx_tool_format;
/* The format of Jinja template source `tmpl` (NULL: generic). */
HX_API hx_tool_format hx_tool_format_detect(const char *tmpl);
/* "generic", "hermes", "llama3", "mistral", "xml", "seed", "glm"; NULL for another value. */
HX_API const char *hx_tool_format_name(hx_tool_format f);
HX_API hx_status hx_tool_format_from_name(const char *name, hx_tool_format *out);
/* Reads the calls out of a model's answer (n bytes of text), as the JSON
 * object {"content": text outside the calls, trimmed, or null, "tool_calls":
 * [{"name", "arguments": the arguments' JSON text as written, "id" when the
 * model wrote one}]}.  Text in the format's shape that is not a well-formed
 * call stays in content.  partial: the text is the answer so far; a marker
 * or JSON being written is withheld from content, and the call being
 * written shows once its name is whole, with its arguments so far, so that
 * every partial result's content and arguments are prefixes of the
 * final ones (streaming).  Same buffer contract as hx_tokenizer_decode. */
HX_API hx_status hx_tool_calls_parse(hx_tool_format f, const char *text, size_t n, int partial, char *buf,
                                     size_t cap, size_t *len);
/* The same, the tools offered (OpenAI's tool array as JSON, or NULL) at
 * hand: the xml and glm formats write values as text, which the function's schema
 * types ("string": the text as a string; else its JSON value when it is
 * one).  Without them a value is its JSON value when it is one. */
HX_API hx_status hx_tool_calls_parse_tools(hx_tool_format f, const char *tools_json, const char *text, size_t n,
                                           int partial, char *buf, size_t cap, size_t *len);
/* A GBNF grammar whose sentences are calls in format f of the tools in
 * tools_json (OpenAI's [{"type":"function","function":{"name","parameters"}}]),
 * arguments valid against each function's parameters (hx_json_schema_to_grammar's
 * subset; a keyword it cannot enforce is HX_ERR_INVALID_ARG naming it): of
 * function `only` when not NULL; parallel: one or more calls, else exactly
 * one.  Same buffer contract. */
HX_API hx_status hx_tool_calls_grammar(hx_tool_format f, const char *tools_json, const char *only, int parallel,
                                       char *buf, size_t cap, size_t *len);

/* ------------------------------------------------------------------------
 * Reasoning: a model's thought before its answer ("<think>...</think>"),
 * split out as llama.cpp's reasoning formats "auto" and "deepseek" do.
 * ---------------------------------------------------------------------- */

/* The tags the model of Jinja template source `tmpl` thinks between, known
 * by the template writing both: "<think>"/"</think>" (Qwen3, DeepSeek-R1,
 * QwQ, SmolLM3, GLM), "<seed:think>" (Seed-OSS), "<mm:think>" (MiniMax), "[THINK]" (Magistral),
 * "<|START_THINKING|>" (Command R7B/A), "\u25c1think\u25b7" (Kimi).  1 with
 * *start and *end set to static strings; 0 when it writes none (NULL too). */
HX_API int hx_reasoning_tags(const char *tmpl, const char **start, const char **end);
typedef struct {
    size_t reasoning_at, reasoning_len; /* the thought in the text, as written */
    size_t content_at, content_len;     /* the answer in the text */
    int has_reasoning;                  /* a thought was opened, by the text or by the prompt */
    int closed;                         /* and its end tag written */
} hx_reasoning_span;
/* Splits a model's answer (n bytes of text) into its thought and the
 * answer proper.  The thought opens with `start` at the beginning of the
 * text (after white space), or before it when `opened` (the prompt ended
 * with the start tag, as DeepSeek-R1's and some Qwen3 templates' do), and
 * ends at `end`; the answer is what follows, line breaks skipped (as
 * llama.cpp's parser skips those its templates write after the tag).  With
 * no thought the whole text is the answer; a thought never closed is all
 * of it.  partial: the text is the answer so far; a tag being written and
 * a character cut short are withheld, so that every partial span's
 * thought and answer are prefixes of the final ones (streaming).
 * HX_ERR_INVALID_ARG for NULL text with n > 0, a NULL or empty tag, or
 * NULL out. */
HX_API hx_status hx_reasoning_split(const char *text, size_t n, const char *start, const char *end, int opened,
                                    int partial, hx_reasoning_span *out);

#ifdef __cplusplus
}
#endif
#endif /* HETERO_H */
