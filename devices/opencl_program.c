/* OpenCL programs: each codelet's program is built once per device and
 * kept, with its kernels.  Built binaries go to the disk cache, so a later
 * runtime loads instead of compiling.  An FPGA runs only what its bitstream
 * holds: on hardware the program is the bitstream itself; under emulation
 * PoCL builds from source but offers only the manifest's kernels, so the
 * scheduler sees the same restriction it would see on the card. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices/opencl.h"
#include "runtime/error.h"
#include "runtime/runtime.h"

#define INCLUDE_DEPTH_MAX 4
#define LOG_EXCERPT_MAX 320
#define KERNELS_PER_PROGRAM_MAX 256

const char *hx_opencl_program_source(const char *name)
{
    if (!name)
        return NULL;
    for (int i = 0; hx_cl_sources[i].name; i++)
        if (!strcmp(hx_cl_sources[i].name, name))
            return hx_cl_sources[i].text;
    return NULL;
}

/* ---- #include "x.cl" ------------------------------------------------- */

typedef struct {
    char *p;
    size_t n, cap;
    int failed;
} strbuf;

static void sb_add(strbuf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->failed = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

/* If the line is `#include "name.cl"`, copies name (without .cl). */
static int include_target(const char *line, size_t len, char *name, size_t size)
{
    const char *p = line, *end = line + len;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (end - p < 8 || strncmp(p, "#include", 8))
        return 0;
    p += 8;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p == end || *p != '"')
        return 0;
    const char *q = memchr(p + 1, '"', (size_t)(end - p - 1));
    if (!q || q - (p + 1) < 4 || strncmp(q - 3, ".cl", 3))
        return 0;
    size_t n = (size_t)(q - 3 - (p + 1));
    if (n + 1 > size)
        return 0;
    memcpy(name, p + 1, n);
    name[n] = '\0';
    return 1;
}

static hx_status expand_into(strbuf *b, const char *text, int depth)
{
    for (const char *p = text; *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char name[HX_OPENCL_NAME_MAX];
        if (include_target(p, len, name, sizeof name)) {
            const char *inc = hx_opencl_program_source(name);
            if (!inc)
                return hx_error(HX_ERR_NOT_FOUND, "#include \"%s.cl\": no such embedded kernels_cl file", name);
            if (depth >= INCLUDE_DEPTH_MAX)
                return hx_error(HX_ERR_FORMAT, "#include \"%s.cl\": includes nested deeper than %d", name,
                                INCLUDE_DEPTH_MAX);
            hx_status s = expand_into(b, inc, depth + 1);
            if (s)
                return s;
        } else {
            sb_add(b, p, len);
        }
        sb_add(b, "\n", 1);
        p += len + (eol != NULL);
    }
    return b->failed ? hx_error(HX_ERR_NO_MEMORY, "expanding OpenCL includes") : HX_OK;
}

char *hx_opencl_program_expand(const char *text)
{
    strbuf b = {0};
    if (expand_into(&b, text, 0) != HX_OK) {
        free(b.p);
        return NULL;
    }
    if (!b.p)
        b.p = calloc(1, 1);
    return b.p;
}

/* ---- kernel names in source ------------------------------------------ */

static const char *skip_space_and_comments(const char *p)
{
    for (;;) {
        while (isspace((unsigned char)*p))
            p++;
        if (p[0] == '/' && p[1] == '/') {
            while (*p && *p != '\n')
                p++;
        } else if (p[0] == '/' && p[1] == '*') {
            const char *e = strstr(p + 2, "*/");
            p = e ? e + 2 : p + strlen(p);
        } else if (p[0] == '#') { /* preprocessor lines declare no kernel */
            while (*p && *p != '\n')
                p += (p[0] == '\\' && p[1] == '\n') ? 2 : 1;
        } else {
            return p;
        }
    }
}

static int ident_char(char c) { return c == '_' || isalnum((unsigned char)c); }

static size_t ident_len(const char *p)
{
    size_t n = 0;
    if (!(*p == '_' || isalpha((unsigned char)*p)))
        return 0;
    while (ident_char(p[n]))
        n++;
    return n;
}

static const char *skip_parens(const char *p)
{
    int depth = 0;
    do {
        if (*p == '(')
            depth++;
        else if (*p == ')')
            depth--;
        else if (!*p)
            return p;
        p++;
    } while (depth > 0);
    return p;
}

int hx_opencl_program_scan(const char *text, char (*names)[HX_OPENCL_NAME_MAX], int max)
{
    int count = 0;
    for (const char *p = skip_space_and_comments(text); *p; p = skip_space_and_comments(p)) {
        size_t n = ident_len(p);
        if (!n) {
            p++;
            continue;
        }
        int qualifier = (n == 8 && !strncmp(p, "__kernel", 8)) || (n == 6 && !strncmp(p, "kernel", 6));
        p += n;
        if (!qualifier)
            continue;
        /* __kernel [__attribute__((...))]* void name ( */
        for (;;) {
            p = skip_space_and_comments(p);
            size_t m = ident_len(p);
            if (m == 13 && !strncmp(p, "__attribute__", 13)) {
                p = skip_parens(skip_space_and_comments(p + m));
                continue;
            }
            if (m == 4 && !strncmp(p, "void", 4)) {
                p = skip_space_and_comments(p + m);
                size_t k = ident_len(p);
                if (k && k < HX_OPENCL_NAME_MAX) {
                    if (count < max) {
                        memcpy(names[count], p, k);
                        names[count][k] = '\0';
                    }
                    count++;
                }
                p += k;
            }
            break;
        }
    }
    return count;
}

/* ---- building -------------------------------------------------------- */

/* A kernel belongs to the codelet named after it: "matmul" launches
 * matmul_f32_tiled, matmul_q4_0_vec ... */
static int kernel_of(const char *kernel, const char *codelet)
{
    size_t n = strlen(codelet);
    return !strncmp(kernel, codelet, n) && (kernel[n] == '\0' || kernel[n] == '_');
}

/* The build log, reduced to what fits in one error line: from the first
 * line that mentions an error, whitespace folded. */
static void log_excerpt(const char *log, char *out, size_t size)
{
    const char *start = strstr(log, "error");
    if (start)
        while (start > log && start[-1] != '\n')
            start--;
    else
        start = log;
    size_t n = 0;
    int space = 0;
    for (const char *p = start; *p && n + 4 < size; p++) {
        if (isspace((unsigned char)*p)) {
            space = n > 0;
            continue;
        }
        if (space)
            out[n++] = ' ';
        space = 0;
        out[n++] = *p;
    }
    if (n + 4 >= size)
        memcpy(out + n, "...", 3), n += 3;
    out[n] = '\0';
}

static char *build_log(hx_opencl_device *d, cl_program prog)
{
    size_t n = 0;
    if (clGetProgramBuildInfo(prog, d->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) != CL_SUCCESS || n == 0)
        return NULL;
    char *log = malloc(n + 1);
    if (log && clGetProgramBuildInfo(prog, d->device, CL_PROGRAM_BUILD_LOG, n, log, NULL) == CL_SUCCESS)
        log[n] = '\0';
    else if (log)
        log[0] = '\0';
    return log;
}

/* Keeps the failure's message without its "HX_ERR_... (...): " prefix,
 * which hx_error adds again each time the failure is reported. */
static void record_failure(hx_opencl_program *p, hx_status s)
{
    const char *e = hx_last_error(), *body = strstr(e, "): ");
    p->status = s;
    free(p->error);
    p->error = strdup(body ? body + 3 : e);
}

/* Kernel names from the built program, falling back to the source's. */
static void list_kernels(hx_opencl_program *p, const char *fallback_text)
{
    size_t n = 0;
    char *names = NULL;
    if (clGetProgramInfo(p->program, CL_PROGRAM_KERNEL_NAMES, 0, NULL, &n) == CL_SUCCESS && n > 0 &&
        (names = malloc(n + 1)) &&
        clGetProgramInfo(p->program, CL_PROGRAM_KERNEL_NAMES, n, names, NULL) == CL_SUCCESS) {
        names[n] = '\0';
        int count = 1;
        for (char *c = names; *c; c++)
            count += *c == ';';
        p->kernel_names = calloc((size_t)count, sizeof *p->kernel_names);
        for (char *save = NULL, *t = p->kernel_names ? strtok_r(names, ";", &save) : NULL; t;
             t = strtok_r(NULL, ";", &save))
            if (strlen(t) < HX_OPENCL_NAME_MAX)
                strcpy(p->kernel_names[p->nkernel_names++], t);
        free(names);
        return;
    }
    free(names);
    if (!fallback_text)
        return;
    int count = hx_opencl_program_scan(fallback_text, NULL, 0);
    p->kernel_names = calloc((size_t)(count ? count : 1), sizeof *p->kernel_names);
    if (p->kernel_names)
        p->nkernel_names = hx_opencl_program_scan(fallback_text, p->kernel_names, count);
}

static hx_status build_from_binary(hx_opencl_device *d, const unsigned char *bin, size_t size,
                                   const char *options, cl_program *out, const char *what)
{
    cl_int err, binerr = CL_SUCCESS;
    cl_program prog = clCreateProgramWithBinary(d->context, 1, &d->device, &size, &bin, &binerr, &err);
    if (err == CL_SUCCESS && binerr != CL_SUCCESS)
        err = binerr;
    if (err != CL_SUCCESS) {
        if (prog)
            clReleaseProgram(prog);
        return hx_opencl_error(err, "loading %s on %s", what, d->device_name);
    }
    err = clBuildProgram(prog, 1, &d->device, options, NULL, NULL);
    if (err != CL_SUCCESS) {
        char *log = build_log(d, prog);
        char excerpt[LOG_EXCERPT_MAX] = "";
        if (log)
            log_excerpt(log, excerpt, sizeof excerpt);
        free(log);
        clReleaseProgram(prog);
        return hx_opencl_error(err, "building %s on %s%s%s", what, d->device_name,
                               excerpt[0] ? "; build log: " : "", excerpt);
    }
    *out = prog;
    return HX_OK;
}

static void cache_store(hx_opencl_device *d, cl_program prog, uint64_t key)
{
    size_t size = 0;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL) != CL_SUCCESS || !size)
        return;
    unsigned char *bin = malloc(size);
    if (bin && clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS)
        hx_opencl_cache_write(key, bin, size);
    free(bin);
}

static hx_status build_from_source(hx_opencl_device *d, hx_opencl_program *p, const char *what)
{
    const char *options = HX_OPENCL_BUILD_OPTIONS;
    uint64_t key = hx_opencl_cache_key(d, p->text, options);
    size_t size = 0;
    unsigned char *bin = hx_opencl_cache_read(key, &size);
    if (bin) {
        hx_status s = build_from_binary(d, bin, size, options, &p->program, what);
        free(bin);
        if (s == HX_OK) {
            atomic_fetch_add(&d->cache_loads, 1);
            return HX_OK;
        }
        /* A stale or damaged entry: compile, and overwrite it below. */
        hx_error_clear();
    }
    cl_int err;
    const char *src = p->text;
    cl_program prog = clCreateProgramWithSource(d->context, 1, &src, NULL, &err);
    if (err != CL_SUCCESS)
        return hx_opencl_error(err, "creating %s on %s", what, d->device_name);
    atomic_fetch_add(&d->builds, 1);
    err = clBuildProgram(prog, 1, &d->device, options, NULL, NULL);
    if (err != CL_SUCCESS) {
        char *log = build_log(d, prog);
        char excerpt[LOG_EXCERPT_MAX] = "";
        if (log)
            log_excerpt(log, excerpt, sizeof excerpt);
        free(log);
        clReleaseProgram(prog);
        return hx_opencl_error(err, "%s does not build on %s%s%s", what, d->device_name,
                               excerpt[0] ? "; build log: " : "", excerpt);
    }
    cache_store(d, prog, key);
    p->program = prog;
    return HX_OK;
}

static unsigned char *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char *buf = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n > 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n))) {
        if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        } else {
            *size = (size_t)n;
        }
    }
    fclose(f);
    return buf;
}

/* The FPGA bitstream as one program that every codelet shares. */
static hx_status build_bitstream(hx_opencl_device *d, hx_opencl_program *p)
{
    size_t size = 0;
    unsigned char *bin = read_file(d->xclbin_path, &size);
    if (!bin)
        return hx_error(HX_ERR_IO, "cannot read the bitstream %s", d->xclbin_path);
    char what[1100];
    snprintf(what, sizeof what, "bitstream %s", d->xclbin_path);
    hx_status s = build_from_binary(d, bin, size, "", &p->program, what);
    free(bin);
    return s;
}

static hx_opencl_program *program_slot(hx_opencl_device *d)
{
    if (d->nprograms == d->capprograms) {
        int cap = d->capprograms ? 2 * d->capprograms : 8;
        hx_opencl_program *p = realloc(d->programs, (size_t)cap * sizeof *p);
        if (!p)
            return NULL;
        d->programs = p;
        d->capprograms = cap;
    }
    hx_opencl_program *p = &d->programs[d->nprograms];
    memset(p, 0, sizeof *p);
    return p;
}

/* The program of a codelet, built now if it never was; -1 when there is
 * nothing to build.  Called with d->lock held. */
static int program_for(hx_opencl_device *d, const hx_codelet *cl)
{
    const char *name = d->fpga_hardware ? NULL : cl->cl_source ? NULL : cl->cl_program;
    const char *user = d->fpga_hardware ? NULL : cl->cl_source;
    for (int i = 0; i < d->nprograms; i++) {
        hx_opencl_program *p = &d->programs[i];
        if (p->user_source == user &&
            (p->program_name == name || (p->program_name && name && !strcmp(p->program_name, name))))
            return i;
    }
    const char *text = user ? user : hx_opencl_program_source(name);
    if (!d->fpga_hardware && !text)
        return -1;
    hx_opencl_program *p = program_slot(d);
    if (!p)
        return -1;
    p->program_name = name;
    p->user_source = user;
    char what[160];
    if (d->fpga_hardware) {
        hx_status s = build_bitstream(d, p);
        if (s)
            record_failure(p, s);
        else
            list_kernels(p, NULL);
    } else {
        snprintf(what, sizeof what, name ? "program '%s'" : "the OpenCL source of codelet '%s'",
                 name ? name : cl->name ? cl->name : "(unnamed)");
        hx_status s = (p->text = hx_opencl_program_expand(text)) ? build_from_source(d, p, what)
                                                                   : hx_error_context(HX_ERR_FORMAT, "%s", what);
        if (s)
            record_failure(p, s);
        else
            list_kernels(p, p->text);
    }
    return d->nprograms++;
}

/* The kernels a codelet may launch, by the naming rule, among `names`;
 * all of them when none is named after it. */
static int codelet_kernels(const hx_codelet *cl, char (*names)[HX_OPENCL_NAME_MAX], int n, int *mine)
{
    int count = 0;
    for (int i = 0; i < n; i++)
        count += (mine[i] = cl->name && kernel_of(names[i], cl->name));
    if (count == 0)
        for (int i = 0; i < n; i++)
            count += (mine[i] = 1);
    return count;
}

/* On an FPGA: whether the bitstream holds a kernel the codelet may launch,
 * judged from its source so that no program is built for it.  Which one a
 * task needs is decided per task (hx_opencl_program_has_kernel). */
static int bitstream_holds(hx_opencl_device *d, const hx_codelet *cl)
{
    const char *text = cl->cl_source ? cl->cl_source : hx_opencl_program_source(cl->cl_program);
    if (!text || !d->bitstream)
        return 0;
    char *full = hx_opencl_program_expand(text);
    if (!full)
        return 0;
    char(*names)[HX_OPENCL_NAME_MAX] = calloc(KERNELS_PER_PROGRAM_MAX, sizeof *names);
    int mine[KERNELS_PER_PROGRAM_MAX];
    int n = names ? hx_opencl_program_scan(full, names, KERNELS_PER_PROGRAM_MAX) : 0;
    if (n > KERNELS_PER_PROGRAM_MAX)
        n = KERNELS_PER_PROGRAM_MAX;
    int ok = 0;
    if (n > 0 && codelet_kernels(cl, names, n, mine) > 0)
        for (int i = 0; !ok && i < n; i++)
            ok = mine[i] && hx_opencl_manifest_has_kernel(d->bitstream, names[i]);
    free(names);
    free(full);
    return ok;
}

static int decide(hx_opencl_device *d, const hx_codelet *cl, int *program)
{
    *program = -1;
    if (!cl->cl_launch || (!cl->cl_source && !hx_opencl_program_source(cl->cl_program)))
        return 0;
    if (d->fpga && !bitstream_holds(d, cl))
        return 0;
    if (d->fpga_hardware && !d->xclbin_path[0])
        return 0;
    *program = program_for(d, cl);
    if (*program < 0)
        return 0;
    hx_opencl_program *p = &d->programs[*program];
    /* A program that does not build is offered anyway: the task then fails
     * with the build log.  Routing it elsewhere would hide the bug (and let
     * a test suite pass on a device that builds nothing). */
    if (!p->program)
        return 1;
    int mine[KERNELS_PER_PROGRAM_MAX];
    int n = p->nkernel_names < KERNELS_PER_PROGRAM_MAX ? p->nkernel_names : KERNELS_PER_PROGRAM_MAX;
    return codelet_kernels(cl, p->kernel_names, n, mine) > 0 && n > 0;
}

static hx_opencl_verdict *verdict_for(hx_opencl_device *d, const hx_codelet *cl)
{
    for (int i = 0; i < d->nverdicts; i++) {
        hx_opencl_verdict *v = &d->verdicts[i];
        if (v->codelet == cl && v->cl_source == cl->cl_source && v->cl_program == cl->cl_program)
            return v;
    }
    if (d->nverdicts == d->capverdicts) {
        int cap = d->capverdicts ? 2 * d->capverdicts : 16;
        hx_opencl_verdict *v = realloc(d->verdicts, (size_t)cap * sizeof *v);
        if (!v)
            return NULL;
        d->verdicts = v;
        d->capverdicts = cap;
    }
    hx_opencl_verdict *v = &d->verdicts[d->nverdicts];
    v->codelet = cl;
    v->cl_source = cl->cl_source;
    v->cl_program = cl->cl_program;
    v->offered = decide(d, cl, &v->program);
    d->nverdicts++;
    return v;
}

int hx_opencl_program_offers(hx_opencl_device *d, const hx_codelet *cl)
{
    pthread_mutex_lock(&d->lock);
    hx_opencl_verdict *v = verdict_for(d, cl);
    int offered = v ? v->offered : 0;
    pthread_mutex_unlock(&d->lock);
    return offered;
}

int hx_opencl_program_has_kernel(hx_opencl_device *d, const hx_codelet *cl, const char *name)
{
    pthread_mutex_lock(&d->lock);
    hx_opencl_verdict *v = verdict_for(d, cl);
    int has = v && v->offered && v->program >= 0;
    if (has && d->programs[v->program].program) {
        const hx_opencl_program *p = &d->programs[v->program];
        has = 0;
        for (int i = 0; i < p->nkernel_names && !has; i++)
            has = !strcmp(p->kernel_names[i], name);
    }
    if (has && d->fpga)
        has = hx_opencl_manifest_has_kernel(d->bitstream, name);
    pthread_mutex_unlock(&d->lock);
    return has;
}

static hx_status kernel_locked(hx_opencl_device *d, const hx_codelet *cl, const char *name, cl_kernel *out)
{
    hx_opencl_verdict *v = verdict_for(d, cl);
    if (!v)
        return hx_error(HX_ERR_NO_MEMORY, "OpenCL program table");
    if (!v->offered || v->program < 0)
        return hx_error(HX_ERR_UNSUPPORTED, "codelet '%s' has no OpenCL implementation for %s",
                        cl->name ? cl->name : "(unnamed)", d->device_name);
    hx_opencl_program *p = &d->programs[v->program];
    if (!p->program)
        return hx_error(p->status, "%s", p->error ? p->error : "program failed to build");
    if (d->fpga && !hx_opencl_manifest_has_kernel(d->bitstream, name))
        return hx_error(HX_ERR_UNSUPPORTED, "kernel '%s' is not in the bitstream of %s", name,
                        d->bitstream ? d->bitstream->name : "this FPGA");
    for (int i = 0; i < p->nkernels; i++)
        if (!strcmp(p->kernels[i].name, name)) {
            *out = p->kernels[i].kernel;
            return HX_OK;
        }
    if (strlen(name) >= HX_OPENCL_NAME_MAX)
        return hx_error(HX_ERR_INVALID_ARG, "kernel name '%.64s...' is too long", name);
    if (p->nkernels == p->capkernels) {
        int cap = p->capkernels ? 2 * p->capkernels : 8;
        hx_opencl_kernel *k = realloc(p->kernels, (size_t)cap * sizeof *k);
        if (!k)
            return hx_error(HX_ERR_NO_MEMORY, "OpenCL kernel table");
        p->kernels = k;
        p->capkernels = cap;
    }
    cl_int err;
    cl_kernel k = clCreateKernel(p->program, name, &err);
    if (err != CL_SUCCESS)
        return hx_opencl_error(err, "kernel '%s' of codelet '%s' on %s", name, cl->name ? cl->name : "(unnamed)",
                               d->device_name);
    strcpy(p->kernels[p->nkernels].name, name);
    p->kernels[p->nkernels++].kernel = k;
    *out = k;
    return HX_OK;
}

hx_status hx_opencl_program_kernel(hx_opencl_device *d, const hx_codelet *cl, const char *name, cl_kernel *out)
{
    if (!name)
        return hx_error(HX_ERR_INVALID_ARG, "codelet '%s': OpenCL launch names no kernel",
                        cl->name ? cl->name : "(unnamed)");
    pthread_mutex_lock(&d->lock);
    hx_status s = kernel_locked(d, cl, name, out);
    pthread_mutex_unlock(&d->lock);
    return s;
}

void hx_opencl_program_release_all(hx_opencl_device *d)
{
    for (int i = 0; i < d->nprograms; i++) {
        hx_opencl_program *p = &d->programs[i];
        for (int k = 0; k < p->nkernels; k++)
            clReleaseKernel(p->kernels[k].kernel);
        if (p->program)
            clReleaseProgram(p->program);
        free(p->kernels);
        free(p->kernel_names);
        free(p->text);
        free(p->error);
    }
    free(d->programs);
    free(d->verdicts);
    d->programs = NULL;
    d->verdicts = NULL;
    d->nprograms = d->capprograms = d->nverdicts = d->capverdicts = 0;
}

static uint64_t sum_counter(const hx_runtime *rt, int loads)
{
    uint64_t n = 0;
    for (int i = 0; rt && i < rt->ndevices; i++) {
        hx_device *dev = rt->devices[i];
        if (dev->ops != &hx_opencl_ops)
            continue;
        hx_opencl_device *d = dev->impl;
        n += atomic_load(loads ? &d->cache_loads : &d->builds);
    }
    return n;
}

uint64_t hx_opencl_program_builds(const hx_runtime *rt) { return sum_counter(rt, 0); }
uint64_t hx_opencl_program_cache_loads(const hx_runtime *rt) { return sum_counter(rt, 1); }
