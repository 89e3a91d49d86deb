/* The bitstream manifest: which kernels each FPGA platform's bitstream
 * holds.  A line-oriented text (bitstreams/README.md) so that C and a shell
 * script read it without a JSON library:
 *
 *     platform <platform-name> <xclbin-file>
 *     kernel <kernel-name> <kernels_cl program>
 *
 * Kernel lines belong to the platform above them; '#' starts a comment. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices/opencl.h"
#include "runtime/error.h"

#define MANIFEST_MAX_BYTES (1u << 20)

void hx_opencl_manifest_free(hx_opencl_manifest *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->nplatforms; i++)
        free(m->platforms[i].kernels);
    free(m->platforms);
    free(m);
}

static int token_ok(const char *t)
{
    for (; *t; t++)
        if (!(*t == '_' || *t == '-' || *t == '.' || (*t >= '0' && *t <= '9') || (*t >= 'a' && *t <= 'z') ||
              (*t >= 'A' && *t <= 'Z')))
            return 0;
    return 1;
}

/* Splits a line into at most `max` whitespace-separated tokens, stopping
 * at '#'; returns the count or -1 when there are more. */
static int split(char *line, char **tok, int max)
{
    char *hash = strchr(line, '#');
    if (hash)
        *hash = '\0';
    int n = 0;
    for (char *save = NULL, *t = strtok_r(line, " \t\r", &save); t; t = strtok_r(NULL, " \t\r", &save)) {
        if (n == max)
            return -1;
        tok[n++] = t;
    }
    return n;
}

static hx_status copy_token(char *dst, size_t size, const char *t, int line, const char *what)
{
    if (!token_ok(t))
        return hx_error(HX_ERR_FORMAT, "bitstream manifest line %d: %s '%s' has characters other than "
                        "letters, digits, '_', '-' and '.'", line, what, t);
    size_t n = strlen(t);
    if (n == 0 || n >= size)
        return hx_error(HX_ERR_FORMAT, "bitstream manifest line %d: %s '%s' is longer than %zu characters",
                        line, what, t, size - 1);
    memcpy(dst, t, n + 1);
    return HX_OK;
}

static hx_status add_platform(hx_opencl_manifest *m, char **tok, int line)
{
    for (int i = 0; i < m->nplatforms; i++)
        if (!strcmp(m->platforms[i].name, tok[1]))
            return hx_error(HX_ERR_FORMAT, "bitstream manifest line %d: platform '%s' listed twice", line,
                            tok[1]);
    hx_opencl_manifest_platform *p = realloc(m->platforms, (size_t)(m->nplatforms + 1) * sizeof *p);
    if (!p)
        return hx_error(HX_ERR_NO_MEMORY, "bitstream manifest");
    m->platforms = p;
    p = &m->platforms[m->nplatforms];
    memset(p, 0, sizeof *p);
    hx_status s = copy_token(p->name, sizeof p->name, tok[1], line, "platform");
    if (s == HX_OK)
        s = copy_token(p->xclbin, sizeof p->xclbin, tok[2], line, "xclbin file");
    if (s == HX_OK)
        m->nplatforms++;
    return s;
}

static hx_status add_kernel(hx_opencl_manifest *m, char **tok, int line)
{
    if (m->nplatforms == 0)
        return hx_error(HX_ERR_FORMAT, "bitstream manifest line %d: kernel '%s' before any platform line",
                        line, tok[1]);
    hx_opencl_manifest_platform *p = &m->platforms[m->nplatforms - 1];
    if (hx_opencl_manifest_has_kernel(p, tok[1]))
        return hx_error(HX_ERR_FORMAT, "bitstream manifest line %d: kernel '%s' listed twice for '%s'", line,
                        tok[1], p->name);
    hx_opencl_manifest_kernel *k = realloc(p->kernels, (size_t)(p->nkernels + 1) * sizeof *k);
    if (!k)
        return hx_error(HX_ERR_NO_MEMORY, "bitstream manifest");
    p->kernels = k;
    k = &p->kernels[p->nkernels];
    hx_status s = copy_token(k->name, sizeof k->name, tok[1], line, "kernel");
    if (s == HX_OK)
        s = copy_token(k->program, sizeof k->program, tok[2], line, "program");
    if (s == HX_OK)
        p->nkernels++;
    return s;
}

static hx_status parse_line(hx_opencl_manifest *m, char *text, int line)
{
    char *tok[4];
    int n = split(text, tok, 4);
    if (n == 0)
        return HX_OK;
    int platform = !strcmp(tok[0], "platform"), kernel = !strcmp(tok[0], "kernel");
    if (!platform && !kernel)
        return hx_error(HX_ERR_FORMAT, "bitstream manifest line %d: unknown directive '%s' "
                        "(expected 'platform' or 'kernel')", line, tok[0]);
    if (n != 3)
        return hx_error(HX_ERR_FORMAT, "bitstream manifest line %d: expected '%s'", line,
                        platform ? "platform <name> <xclbin-file>" : "kernel <name> <program>");
    return platform ? add_platform(m, tok, line) : add_kernel(m, tok, line);
}

hx_status hx_opencl_manifest_parse(const char *text, hx_opencl_manifest **out)
{
    if (!text || !out)
        return hx_error(HX_ERR_INVALID_ARG, "hx_opencl_manifest_parse: NULL argument");
    *out = NULL;
    hx_opencl_manifest *m = calloc(1, sizeof *m);
    if (!m)
        return hx_error(HX_ERR_NO_MEMORY, "bitstream manifest");
    hx_status s = HX_OK;
    char buf[512];
    int line = 0;
    for (const char *p = text; *p && s == HX_OK;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        line++;
        if (len >= sizeof buf)
            s = hx_error(HX_ERR_FORMAT, "bitstream manifest line %d: longer than %zu characters", line,
                         sizeof buf - 1);
        else {
            memcpy(buf, p, len);
            buf[len] = '\0';
            s = parse_line(m, buf, line);
        }
        p += len + (eol != NULL);
    }
    if (s) {
        hx_opencl_manifest_free(m);
        return s;
    }
    *out = m;
    return HX_OK;
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(MANIFEST_MAX_BYTES + 1);
    size_t n = buf ? fread(buf, 1, MANIFEST_MAX_BYTES + 1, f) : 0;
    fclose(f);
    if (!buf || n > MANIFEST_MAX_BYTES) {
        free(buf);
        errno = buf ? EFBIG : ENOMEM;
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

hx_status hx_opencl_manifest_load(hx_opencl_manifest **out)
{
    const char *dir = getenv("HX_BITSTREAM_DIR");
    if (dir && *dir) {
        char path[1024];
        snprintf(path, sizeof path, "%s/manifest.txt", dir);
        errno = 0;
        char *text = read_text(path);
        if (text) {
            hx_status s = hx_opencl_manifest_parse(text, out);
            free(text);
            return s ? hx_error_context(s, "%s", path) : HX_OK;
        }
        if (errno != ENOENT)
            return hx_error(HX_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    }
    hx_status s = hx_opencl_manifest_parse(hx_bitstream_manifest, out);
    return s ? hx_error_context(s, "the embedded bitstreams/manifest.txt") : HX_OK;
}

const hx_opencl_manifest_platform *hx_opencl_manifest_find(const hx_opencl_manifest *m, const char *device)
{
    if (!m || !device)
        return NULL;
    for (int i = 0; i < m->nplatforms; i++) {
        size_t n = strlen(m->platforms[i].name);
        if (!strncmp(device, m->platforms[i].name, n))
            return &m->platforms[i];
    }
    return NULL;
}

int hx_opencl_manifest_has_kernel(const hx_opencl_manifest_platform *p, const char *kernel)
{
    if (!p || !kernel)
        return 0;
    for (int i = 0; i < p->nkernels; i++)
        if (!strcmp(p->kernels[i].name, kernel))
            return 1;
    return 0;
}
