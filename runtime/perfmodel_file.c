/* Performance models on disk: DIR/HOST/CODELET.perf, one file per codelet
 * with every device measured on this host:
 *
 *     hetero-perfmodel 1
 *     codelet matmul
 *     device cpu:Intel(R) Xeon(R) Processor:2
 *     bucket KEY N FLOPS BYTES W S1 ... SW      (seconds, oldest first)
 *
 * A cache: a malformed line is skipped, an unreadable file ignored.
 * Files are written to a temporary name and renamed into place. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/cache_dir.h"
#include "runtime/error.h"
#include "runtime/perfmodel_impl.h"

#define MAGIC "hetero-perfmodel 1"

const char *hx_perfmodel_default_dir(char *buf, size_t size) { return hx_cache_dir("perfmodels", buf, size); }

/* The host's name, with nothing that would make it a path. */
static void host_name(char *out, size_t size)
{
    char h[256];
    if (gethostname(h, sizeof h) != 0)
        h[0] = '\0';
    h[sizeof h - 1] = '\0';
    if (!h[0])
        strcpy(h, "localhost");
    size_t n = strnlen(h, size - 1);
    memcpy(out, h, n);
    out[n] = '\0';
    for (char *p = out; *p; p++)
        if (*p == '/')
            *p = '_';
}

/* A codelet's name as a file name. */
static void file_stem(const char *name, char *out, size_t size)
{
    size_t i = 0;
    for (; name[i] && i + 1 < size; i++) {
        char c = name[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                 c == '-' || (c == '.' && i > 0);
        out[i] = ok ? c : '_';
    }
    out[i] = '\0';
}

static void chomp(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = '\0';
}

static void parse_bucket(hx_pm_entry *e, const char *line)
{
    char *end;
    const char *p = line;
    long key = strtol(p, &end, 10);
    if (end == p || key < 0 || key > 1000)
        return;
    p = end;
    unsigned long n = strtoul(p, &end, 10);
    if (end == p || n == 0 || n > 0xffffffffUL)
        return;
    p = end;
    double flops = strtod(p, &end);
    if (end == p || !isfinite(flops) || flops < 0)
        return;
    p = end;
    double bytes = strtod(p, &end);
    if (end == p || !isfinite(bytes) || bytes < 0)
        return;
    p = end;
    long w = strtol(p, &end, 10);
    if (end == p || w < 1 || w > HX_PM_WINDOW || (unsigned long)w > n)
        return;
    p = end;
    float s[HX_PM_WINDOW];
    for (long i = 0; i < w; i++) {
        double v = strtod(p, &end);
        if (end == p || !isfinite(v) || v < 0)
            return;
        s[i] = (float)v;
        p = end;
    }
    if (hx_pm_bucket_get(e, (int)key, 0))
        return; /* a duplicate: the first one stands */
    hx_pm_bucket *b = hx_pm_bucket_get(e, (int)key, 1);
    if (!b)
        return;
    b->n = (uint32_t)n;
    b->flops = flops;
    b->bytes = bytes;
    b->w = (uint32_t)w;
    memcpy(b->s, s, (size_t)w * sizeof *s);
    b->head = (uint32_t)w % HX_PM_WINDOW;
    hx_pm_bucket_resort(b);
}

static void load_file(hx_perfmodel *pm, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[4096], codelet[64] = "";
    hx_pm_entry *e = NULL;
    int ok = fgets(line, sizeof line, f) != NULL;
    if (ok) {
        chomp(line);
        ok = !strcmp(line, MAGIC);
    }
    while (ok && fgets(line, sizeof line, f)) {
        chomp(line);
        if (!strncmp(line, "codelet ", 8)) {
            size_t n = strnlen(line + 8, sizeof codelet - 1);
            memcpy(codelet, line + 8, n);
            codelet[n] = '\0';
            e = NULL;
        } else if (!strncmp(line, "device ", 7) && codelet[0]) {
            e = NULL;
            for (int i = 0; i < pm->ne && !e; i++)
                if (!strcmp(pm->e[i].codelet, codelet) && !strcmp(pm->e[i].device, line + 7))
                    e = &pm->e[i];
            if (!e)
                e = hx_pm_entry_add(pm, codelet, line + 7);
        } else if (!strncmp(line, "bucket ", 7) && e) {
            parse_bucket(e, line + 7);
        }
    }
    fclose(f);
}

static int host_dir(const hx_perfmodel *pm, char *out, size_t size)
{
    char host[256];
    host_name(host, sizeof host);
    int n = snprintf(out, size, "%s/%s", pm->dir, host);
    return n > 0 && (size_t)n < size ? 0 : -1;
}

hx_status hx_pm_load(hx_perfmodel *pm)
{
    char dir[800];
    if (host_dir(pm, dir, sizeof dir))
        return HX_OK;
    DIR *d = opendir(dir);
    if (!d)
        return HX_OK; /* nothing measured yet */
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n < 6 || strcmp(de->d_name + n - 5, ".perf"))
            continue;
        char path[1100];
        if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) < (int)sizeof path)
            load_file(pm, path);
    }
    closedir(d);
    return HX_OK;
}

static int mkdirs(const char *path)
{
    char tmp[1024];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp)
        return -1;
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(tmp, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static int write_codelet(const hx_perfmodel *pm, const char *dir, const char *codelet)
{
    char stem[80], path[1100], tmp[1200];
    file_stem(codelet, stem, sizeof stem);
    snprintf(path, sizeof path, "%s/%s.perf", dir, stem);
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    fprintf(f, "%s\ncodelet %s\n", MAGIC, codelet);
    for (int i = 0; i < pm->ne; i++) {
        const hx_pm_entry *e = &pm->e[i];
        if (e->tainted || strcmp(e->codelet, codelet) || !e->nb)
            continue;
        fprintf(f, "device %s\n", e->device);
        for (int k = 0; k < e->nb; k++) {
            const hx_pm_bucket *b = &e->b[k];
            fprintf(f, "bucket %d %u %.9g %.9g %u", b->key, b->n, b->flops, b->bytes, b->w);
            /* Oldest first, so a reload keeps the ring's order. */
            for (uint32_t j = 0; j < b->w; j++)
                fprintf(f, " %.6g", b->s[(b->head + HX_PM_WINDOW - b->w + j) % HX_PM_WINDOW]);
            fputc('\n', f);
        }
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        remove(tmp);
        return -1;
    }
    return 0;
}

hx_status hx_perfmodel_save(hx_perfmodel *pm)
{
    if (!pm || !pm->dir[0])
        return HX_OK;
    char dir[800];
    pthread_mutex_lock(&pm->lock);
    hx_status s = HX_OK;
    if (host_dir(pm, dir, sizeof dir) || mkdirs(dir)) {
        s = hx_error(HX_ERR_IO, "cannot create the performance model directory %s", pm->dir);
        goto out;
    }
    for (int i = 0; i < pm->ne; i++) {
        hx_pm_entry *e = &pm->e[i];
        if (!e->dirty || e->tainted)
            continue;
        if (write_codelet(pm, dir, e->codelet) && !s)
            s = hx_error(HX_ERR_IO, "cannot write the performance model of '%s' in %s", e->codelet, dir);
        /* One file holds every device of the codelet: written once. */
        for (int j = i; j < pm->ne; j++)
            if (!strcmp(pm->e[j].codelet, e->codelet))
                pm->e[j].dirty = 0;
    }
out:
    pthread_mutex_unlock(&pm->lock);
    return s;
}

static hx_status perfmodel_read(const char *dir, int (*cb)(void *user, const hx_perfmodel_entry *e), void *user)
{
    char buf[512];
    if (!cb)
        return hx_error(HX_ERR_INVALID_ARG, "hx_perfmodel_read: NULL callback");
    if (!dir && !(dir = hx_perfmodel_default_dir(buf, sizeof buf)))
        return hx_error(HX_ERR_NOT_FOUND, "no performance model directory (HX_CACHE_DIR is off, no HOME)");
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return hx_error(HX_ERR_NOT_FOUND, "no performance model directory %s", dir);
    hx_perfmodel *pm;
    hx_status s = hx_perfmodel_open(&pm, dir, NULL, 0);
    if (s)
        return s;
    for (int i = 0; i < pm->ne; i++) {
        hx_pm_entry *e = &pm->e[i];
        hx_pm_fit(e);
        for (int k = 0; k < e->nb; k++) {
            const hx_pm_bucket *b = &e->b[k];
            hx_perfmodel_entry out;
            memset(&out, 0, sizeof out);
            snprintf(out.codelet, sizeof out.codelet, "%s", e->codelet);
            snprintf(out.device, sizeof out.device, "%s", e->device);
            out.size_lo = hx_pm_bucket_lo(b->key);
            out.size_hi = hx_pm_bucket_lo(b->key + 1);
            out.flops = b->flops;
            out.bytes = b->bytes;
            out.samples = b->n;
            out.window = b->w;
            hx_pm_bucket_stats(b, &out.median_s, &out.mean_s, &out.min_s, &out.max_s);
            out.reg_valid = e->reg_state == 1;
            out.reg_a = e->ra;
            out.reg_b = e->rb;
            out.reg_c = e->rc;
            if (cb(user, &out))
                goto done;
        }
    }
done:
    hx_pm_free(pm);
    return HX_OK;
}

void hx_perfmodel_read_only(hx_perfmodel *pm)
{
    if (!pm)
        return;
    pthread_mutex_lock(&pm->lock);
    pm->dir[0] = '\0';
    pthread_mutex_unlock(&pm->lock);
}

hx_status hx_perfmodel_read(const char *dir, int (*cb)(void *user, const hx_perfmodel_entry *e), void *user)
{
    hx_api_enter();
    return hx_api_leave(perfmodel_read(dir, cb, user));
}
