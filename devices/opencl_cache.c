/* The on-disk cache of built OpenCL programs.  Compiling the kernels from
 * source costs PoCL (and GPU drivers) far more than loading a binary, and a
 * runtime opens many times a day, so binaries are kept per device, driver
 * and source.  Writes go to a temporary file renamed into place, so
 * concurrent processes never see a partial binary. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "devices/opencl.h"
#include "runtime/cache_dir.h"

#define CACHE_MAGIC "HXCLBIN1"
#define CACHE_HEADER 24 /* magic, key, size */
#define CACHE_MAX_BYTES ((size_t)1 << 30)

const char *hx_opencl_cache_dir(char *buf, size_t size) { return hx_cache_dir("cl", buf, size); }

static uint64_t fnv1a(uint64_t h, const char *s)
{
    /* The terminating NUL is hashed too, so ("ab","c") != ("a","bc"). */
    do {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    } while (*s++);
    return h;
}

uint64_t hx_opencl_cache_key(const hx_opencl_device *d, const char *text, const char *options)
{
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv1a(h, text);
    h = fnv1a(h, d->device_name);
    h = fnv1a(h, d->driver_version);
    h = fnv1a(h, d->device_version);
    return fnv1a(h, options);
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static int cache_path(uint64_t key, char *path, size_t size)
{
    char dir[900];
    if (!hx_opencl_cache_dir(dir, sizeof dir))
        return 0;
    int n = snprintf(path, size, "%s/%016llx.bin", dir, (unsigned long long)key);
    return n > 0 && (size_t)n < size;
}

unsigned char *hx_opencl_cache_read(uint64_t key, size_t *size)
{
    char path[1024];
    if (!cache_path(key, path, sizeof path))
        return NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char head[CACHE_HEADER], *bin = NULL;
    if (fread(head, 1, sizeof head, f) == sizeof head && !memcmp(head, CACHE_MAGIC, 8) &&
        get64(head + 8) == key) {
        uint64_t n = get64(head + 16);
        if (n > 0 && n <= CACHE_MAX_BYTES && (bin = malloc(n + 1))) {
            /* A file longer or shorter than its header says is damaged. */
            if (fread(bin, 1, n + 1, f) != n) {
                free(bin);
                bin = NULL;
            } else {
                *size = n;
            }
        }
    }
    fclose(f);
    return bin;
}

static int make_dirs(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        int rc = mkdir(path, 0755);
        *p = '/';
        if (rc && errno != EEXIST)
            return -1;
    }
    return mkdir(path, 0755) && errno != EEXIST ? -1 : 0;
}

void hx_opencl_cache_write(uint64_t key, const unsigned char *bin, size_t size)
{
    char dir[900], path[1024], tmp[1100];
    if (!bin || !size || !hx_opencl_cache_dir(dir, sizeof dir) || !cache_path(key, path, sizeof path))
        return;
    if (make_dirs(dir))
        return;
    /* Unique per thread: two devices may store the same program at once. */
    snprintf(tmp, sizeof tmp, "%s.%ld.%lx.tmp", path, (long)getpid(), (unsigned long)pthread_self());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    unsigned char head[CACHE_HEADER];
    memcpy(head, CACHE_MAGIC, 8);
    put64(head + 8, key);
    put64(head + 16, size);
    int ok = write(fd, head, sizeof head) == (ssize_t)sizeof head;
    for (size_t off = 0; ok && off < size;) {
        ssize_t w = write(fd, bin + off, size - off);
        ok = w > 0;
        off += ok ? (size_t)w : 0;
    }
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path))
        unlink(tmp);
}
