/* The OpenCL backend's internals, shared by devices/opencl*.c.  The
 * runtime reaches the backend only through hx_opencl_ops; tests and
 * benchmarks may use the functions declared here. */
#ifndef HX_DEVICES_OPENCL_H
#define HX_DEVICES_OPENCL_H

#include <CL/cl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/device.h"

/* ---- launch conventions ------------------------------------------------ */

/* A launch argument (hx_cl_launch.arg[].buffer) that is the device's status
 * word: a __global uint the kernel ORs HX_OPENCL_BAD_* bits into when its
 * input is bad (kernels cannot return an error).  The backend zeroes it
 * before the launch and fails the task with HX_ERR_RANGE if a bit is set.
 * kernels_cl/common.cl defines the same bits. */
#define HX_OPENCL_ARG_STATUS HX_TASK_MAX_BUFFERS
#define HX_OPENCL_BAD_INDEX 1u /* an index outside its table            */
#define HX_OPENCL_BAD_SLOT 2u  /* a KV slot outside the cache           */
#define HX_OPENCL_BAD_META 4u  /* KV metadata: sequence, position or block out of range */

/* ---- errors (devices/opencl_error.c) ---------------------------------- */

/* "CL_INVALID_WORK_GROUP_SIZE" for -54; "CL_UNKNOWN_ERROR" if unknown. */
const char *hx_opencl_error_name(cl_int err);
/* The hx_status that an OpenCL error stands for. */
hx_status hx_opencl_error_status(cl_int err);
/* Records "<what>: CL_NAME (code)" and returns the mapped status. */
hx_status hx_opencl_error(cl_int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- the bitstream manifest (devices/opencl_manifest.c) -------------- */

typedef struct {
    char name[64];     /* OpenCL kernel name                          */
    char program[64];  /* kernels_cl/<program>.cl that defines it      */
} hx_opencl_manifest_kernel;

typedef struct {
    char name[128];    /* platform, e.g. xilinx_u55c_gen3x16_xdma_3_202210_1 */
    char xclbin[128];  /* file name of the bitstream                  */
    hx_opencl_manifest_kernel *kernels;
    int nkernels;
} hx_opencl_manifest_platform;

typedef struct {
    hx_opencl_manifest_platform *platforms;
    int nplatforms;
} hx_opencl_manifest;

/* The platform name that stands for PoCL presented as an FPGA. */
#define HX_OPENCL_EMULATION_PLATFORM "pocl-emulation"

/* Parses the manifest text (format in bitstreams/README.md); errors name
 * the line. */
hx_status hx_opencl_manifest_parse(const char *text, hx_opencl_manifest **out);
/* The manifest in effect: $HX_BITSTREAM_DIR/manifest.txt when present,
 * else the copy embedded at build time. */
hx_status hx_opencl_manifest_load(hx_opencl_manifest **out);
void hx_opencl_manifest_free(hx_opencl_manifest *m);
/* The platform entry whose name the device name starts with, or NULL. */
const hx_opencl_manifest_platform *hx_opencl_manifest_find(const hx_opencl_manifest *m, const char *device);
int hx_opencl_manifest_has_kernel(const hx_opencl_manifest_platform *p, const char *kernel);
/* The text embedded from bitstreams/manifest.txt ("" if none). */
extern const char hx_bitstream_manifest[];

/* ---- programs (devices/opencl_program.c) ------------------------------ */

struct hx_cl_source {
    const char *name;
    const char *text;
};
/* kernels_cl/<name>.cl, embedded by tools/embed-cl.sh; ends with {NULL}. */
extern const struct hx_cl_source hx_cl_sources[];

#define HX_OPENCL_NAME_MAX 64

typedef struct {
    char name[HX_OPENCL_NAME_MAX];
    cl_kernel kernel;
} hx_opencl_kernel;

/* One program built (or not) for one device. */
typedef struct {
    const char *program_name;  /* embedded program, or NULL            */
    const char *user_source;   /* codelet's own source, or NULL        */
    char *text;                /* the source with includes resolved    */
    cl_program program;        /* NULL until built, or if that failed */
    int built;                 /* a build was tried                   */
    hx_status status;
    char *error;               /* why it failed (with the build log)  */
    char (*kernel_names)[HX_OPENCL_NAME_MAX]; /* the program's, or before the
                                                 build, the source's */
    int nkernel_names;
    hx_opencl_kernel *kernels; /* created on first use                 */
    int nkernels, capkernels;
} hx_opencl_program;

/* What a device decided about one codelet. */
typedef struct {
    const hx_codelet *codelet;
    const char *cl_source, *cl_program; /* as seen when decided */
    int program;                        /* index, or -1          */
    int offered;
} hx_opencl_verdict;

typedef struct hx_opencl_device {
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;
    cl_mem status;            /* the kernels' status word (HX_OPENCL_ARG_STATUS) */
    cl_mem scratch;           /* launches' scratch memory (HX_CL_ARG_SCRATCH), or NULL */
    size_t scratch_bytes;
    cl_device_type type;
    int fpga;                 /* presented as an FPGA                    */
    int refresh_inputs;       /* map wrapped inputs before each kernel   */
    int fpga_hardware;        /* programs come from a bitstream          */
    char device_name[256], driver_version[128], device_version[128];
    const hx_opencl_manifest_platform *bitstream; /* FPGA: what it holds */
    hx_opencl_manifest *manifest;
    char xclbin_path[1024];   /* FPGA hardware: the bitstream file       */

    pthread_mutex_t lock;     /* guards the tables below                 */
    hx_opencl_program *programs;
    int nprograms, capprograms;
    hx_opencl_verdict *verdicts;
    int nverdicts, capverdicts;

    _Atomic uint64_t builds;      /* programs compiled from source        */
    _Atomic uint64_t cache_loads; /* programs loaded from the disk cache  */
} hx_opencl_device;

/* Whether `d` offers the codelet (judged from its source: programs are
 * built by the device's worker, on their first task). */
int hx_opencl_program_offers(hx_opencl_device *d, const hx_codelet *cl);
/* Whether the codelet's program on `d` has kernel `name` (and, on an FPGA,
 * its bitstream does).  A program that failed to build answers yes, so the
 * task fails with the build log. */
int hx_opencl_program_has_kernel(hx_opencl_device *d, const hx_codelet *cl, const char *name);
/* The kernel `name` of the codelet's program, ready for arguments. */
hx_status hx_opencl_program_kernel(hx_opencl_device *d, const hx_codelet *cl, const char *name,
                                   cl_kernel *out);
void hx_opencl_program_release_all(hx_opencl_device *d);
/* The text of an embedded program with its #include "x.cl" lines replaced
 * by the embedded x.cl; malloc'd, NULL (with the error set) on failure. */
char *hx_opencl_program_expand(const char *text);
/* Kernel names defined in OpenCL C source, in order; returns the count
 * (possibly more than max, of which max were stored). */
int hx_opencl_program_scan(const char *text, char (*names)[HX_OPENCL_NAME_MAX], int max);
const char *hx_opencl_program_source(const char *name);
/* Programs compiled from source / loaded from the disk cache by the
 * OpenCL devices of a runtime, since it opened. */
uint64_t hx_opencl_program_builds(const hx_runtime *rt);
uint64_t hx_opencl_program_cache_loads(const hx_runtime *rt);

/* The options every program is built with (part of the cache key). */
#define HX_OPENCL_BUILD_OPTIONS "-cl-std=CL1.2"

/* ---- the on-disk program cache (devices/opencl_cache.c) -------------- */

/* The directory binaries go to: $HX_CACHE_DIR/cl, $XDG_CACHE_HOME/hetero/cl
 * or ~/.cache/hetero/cl; NULL when caching is off (HX_CACHE_DIR=off). */
const char *hx_opencl_cache_dir(char *buf, size_t size);
/* The key of a program: hash of source, device, driver and options. */
uint64_t hx_opencl_cache_key(const hx_opencl_device *d, const char *text, const char *options);
/* A cached binary (malloc'd) or NULL. */
unsigned char *hx_opencl_cache_read(uint64_t key, size_t *size);
/* Stores a binary; failures only cost a rebuild next time. */
void hx_opencl_cache_write(uint64_t key, const unsigned char *bin, size_t size);

extern const hx_device_ops hx_opencl_ops;

/* Makes an FPGA device (emulated or not) take its programs from the
 * bitstream at `path`, as a card does, dropping those it built; for tests
 * and tools that check a bitstream.  Call while the device is idle. */
hx_status hx_opencl_use_bitstream(hx_device *dev, const char *path);

#endif
