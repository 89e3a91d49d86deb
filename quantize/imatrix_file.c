/* llama.cpp's imatrix files, both forms (little-endian, as on x86-64).
 *
 * GGUF (llama-imatrix's default): general.type "imatrix",
 * imatrix.datasets (string array), imatrix.chunk_count and
 * imatrix.chunk_size (uint32), and per weight, in name order, two F32
 * tensors: "<weight>.in_sum2" [nmat][ncol], the raw sums of squares, and
 * "<weight>.counts" [nmat][1], the rows summed.
 *
 * Legacy .dat: int32 n_entries, then per entry int32 name length, the
 * name, int32 ncall (chunks, rounded up), int32 nval, nval float32 values
 * (sum / count * ncall: a per-chunk mean); then, optionally, int32 chunk
 * count, int32 length and the last dataset's name.  Its sums and counts
 * are taken back as value * chunk_size and ncall * chunk_size, as
 * llama-imatrix --in-file does, which keeps each mean. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf/gguf.h"
#include "quantize/imatrix_impl.h"
#include "runtime/error.h"

/* ---- reading ------------------------------------------------------------ */

/* The whole file: imatrix files are small (a few MB for a 70B model). */
static hx_status read_all(const char *path, unsigned char **data, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return hx_error(HX_ERR_IO, "imatrix %s: %s", path, strerror(errno));
    struct stat st;
    hx_status s = HX_OK;
    unsigned char *buf = NULL;
    if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode))
        s = hx_error(HX_ERR_IO, "imatrix %s: not a regular file", path);
    else if (!(buf = malloc(st.st_size ? (size_t)st.st_size : 1)))
        s = hx_error(HX_ERR_NO_MEMORY, "imatrix %s: out of memory for %lld bytes", path, (long long)st.st_size);
    else if (fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size)
        s = hx_error(HX_ERR_IO, "imatrix %s: read error", path);
    fclose(f);
    if (s)
        free(buf);
    else
        *data = buf, *size = (size_t)st.st_size;
    return s;
}

static int ends_with(const char *s, const char *suffix, size_t *stem)
{
    size_t n = strlen(s), k = strlen(suffix);
    *stem = n - k;
    return n > k && !strcmp(s + n - k, suffix);
}

static float f32_at(const void *data, int64_t i)
{
    float v;
    memcpy(&v, (const unsigned char *)data + 4 * i, 4);
    return v;
}

static hx_status gguf_entry(hx_imatrix *im, const hx_gguf *g, const hx_gguf_tensor *sums, size_t stem,
                            const char *path)
{
    char name[256];
    if (stem >= sizeof name)
        return hx_error(HX_ERR_FORMAT, "imatrix %s: tensor name '%s' is too long", path, sums->name);
    memcpy(name, sums->name, stem);
    name[stem] = 0;
    char counts_name[sizeof name + 8];
    snprintf(counts_name, sizeof counts_name, "%s.counts", name);
    const hx_gguf_tensor *counts = hx_gguf_find_tensor(g, counts_name);
    if (!counts)
        return hx_error(HX_ERR_FORMAT, "imatrix %s: '%s' has sums and no counts", path, name);
    if (sums->type != HX_TYPE_F32 || counts->type != HX_TYPE_F32)
        return hx_error(HX_ERR_FORMAT, "imatrix %s: the sums and counts of '%s' must be F32", path, name);
    int64_t nval = 1, nmat = 1;
    for (int d = 0; d < HX_GGUF_MAX_DIMS; d++)
        nval *= (int64_t)sums->ne[d], nmat *= (int64_t)counts->ne[d];
    if (nmat < 1 || nval < nmat || nval % nmat)
        return hx_error(HX_ERR_FORMAT, "imatrix %s: '%s' has %lld sums for %lld counts", path, name,
                        (long long)nval, (long long)nmat);
    hx_imatrix_tensor *t;
    hx_status s = hx_imatrix_tensor_get(im, name, nval / nmat, nmat, path, &t);
    if (s)
        return s;
    for (int64_t k = 0; k < nmat; k++) {
        float c = f32_at(counts->data, k);
        if (!(c >= 0 && c < 9e18f))
            return hx_error(HX_ERR_FORMAT, "imatrix %s: '%s' count %lld is %g", path, name, (long long)k, c);
        t->count[k] = llroundf(c);
    }
    for (int64_t j = 0; j < nval; j++)
        t->sum[j] = f32_at(sums->data, j);
    hx_imatrix_tensor_means(t);
    return HX_OK;
}

/* A counts tensor without its sums is as broken as the other way round. */
static hx_status gguf_orphans(const hx_gguf *g, const char *path)
{
    for (uint64_t i = 0; i < hx_gguf_tensor_count(g); i++) {
        const char *name = hx_gguf_tensor_at(g, i)->name;
        size_t stem;
        char sums[300];
        if (ends_with(name, ".counts", &stem) && stem < 256) {
            snprintf(sums, sizeof sums, "%.*s.in_sum2", (int)stem, name);
            if (!hx_gguf_find_tensor(g, sums))
                return hx_error(HX_ERR_FORMAT, "imatrix %s: '%.*s' has counts and no sums", path, (int)stem, name);
        }
    }
    return HX_OK;
}

/* The detail of the error just raised, prefixed with the file's name. */
static hx_status restate(hx_status s, const char *path, const char *what)
{
    char detail[512];
    snprintf(detail, sizeof detail, "%s", hx_last_error());
    return hx_error(s, "imatrix %s: %s%s", path, what, detail);
}

static hx_status read_gguf(hx_imatrix *im, const unsigned char *data, size_t size, const char *path)
{
    hx_gguf *g;
    hx_status s = hx_gguf_open_memory(data, size, &g);
    if (s)
        return restate(s, path, "");
    uint32_t cs;
    if (hx_gguf_get_u32(g, "imatrix.chunk_size", &cs) == HX_OK)
        im->chunk_size = cs;
    hx_gguf_array a;
    if (hx_gguf_find_key(g, "imatrix.datasets") >= 0) {
        s = hx_gguf_get_arr(g, "imatrix.datasets", &a);
        for (uint64_t i = 0; s == HX_OK && i < a.n; i++) {
            const char *str;
            uint64_t len;
            char buf[4096];
            s = hx_gguf_arr_str(&a, i, &str, &len);
            if (s == HX_OK) {
                snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), str);
                s = hx_imatrix_add_dataset(im, buf);
            }
        }
        if (s)
            s = restate(s, path, "imatrix.datasets: ");
    }
    for (uint64_t i = 0; s == HX_OK && i < hx_gguf_tensor_count(g); i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        size_t stem;
        if (ends_with(t->name, ".in_sum2", &stem))
            s = gguf_entry(im, g, t, stem, path);
    }
    if (s == HX_OK)
        s = gguf_orphans(g, path);
    if (s == HX_OK && im->n == 0)
        s = hx_error(HX_ERR_FORMAT, "imatrix %s: no <tensor>.in_sum2 / <tensor>.counts pairs", path);
    hx_gguf_close(g);
    return s;
}

/* A cursor over the legacy file, every read checked against its end. */
typedef struct {
    const unsigned char *p, *end, *start;
} cursor;

static int take(cursor *c, void *out, size_t n)
{
    if ((size_t)(c->end - c->p) < n)
        return -1;
    memcpy(out, c->p, n);
    c->p += n;
    return 0;
}

static hx_status read_dat(hx_imatrix *im, const unsigned char *data, size_t size, uint32_t chunk_size,
                          const char *path)
{
    cursor c = {data, data + size, data};
    int32_t n_entries = 0;
    if (take(&c, &n_entries, 4) || n_entries < 1 || (size_t)n_entries > size / 12)
        return hx_error(HX_ERR_FORMAT, "imatrix %s: neither GGUF nor a legacy imatrix (%zu bytes, first word %d)",
                        path, size, n_entries);
    for (int32_t e = 0; e < n_entries; e++) {
        long off = (long)(c.p - c.start);
        int32_t len, ncall = 0, nval = 0;
        char name[256];
        if (take(&c, &len, 4) || len < 1 || len >= (int32_t)sizeof name || take(&c, name, (size_t)len))
            return hx_error(HX_ERR_FORMAT, "imatrix %s: entry %d at offset %ld: bad or truncated name", path, e, off);
        name[len] = 0;
        if (strlen(name) != (size_t)len)
            return hx_error(HX_ERR_FORMAT, "imatrix %s: entry %d at offset %ld: name holds a NUL byte", path, e, off);
        if (take(&c, &ncall, 4) || take(&c, &nval, 4) || ncall < 0 || nval < 1 ||
            (size_t)(c.end - c.p) / 4 < (size_t)nval)
            return hx_error(HX_ERR_FORMAT, "imatrix %s: entry '%s' at offset %ld: %d values (ncall %d) %s", path,
                            name, off, nval, ncall,
                            nval >= 1 && ncall >= 0 ? "run past the end of the file" : "is impossible");
        hx_imatrix_tensor *t;
        if (hx_imatrix_find(im, name, NULL))
            return hx_error(HX_ERR_FORMAT, "imatrix %s: entry '%s' appears twice", path, name);
        hx_status s = hx_imatrix_tensor_get(im, name, nval, 1, path, &t);
        if (s)
            return s;
        for (int32_t j = 0; j < nval; j++)
            t->sum[j] = (double)f32_at(c.p, j) * chunk_size;
        c.p += 4 * (size_t)nval;
        t->count[0] = (int64_t)ncall * chunk_size;
        hx_imatrix_tensor_means(t);
    }
    /* The trailer is optional: a chunk count, then the dataset's name. */
    int32_t n_chunks, len;
    if (c.p == c.end || take(&c, &n_chunks, 4) || c.p == c.end)
        return HX_OK;
    if (take(&c, &len, 4) || len < 0 || (size_t)len > (size_t)(c.end - c.p))
        return hx_error(HX_ERR_FORMAT, "imatrix %s: the dataset name at offset %ld is truncated", path,
                        (long)(c.p - c.start));
    if (len == 0)
        return HX_OK;
    char *name = malloc((size_t)len + 1);
    if (!name)
        return hx_error(HX_ERR_NO_MEMORY, "imatrix %s: out of memory", path);
    memcpy(name, c.p, (size_t)len);
    name[len] = 0;
    hx_status s = hx_imatrix_add_dataset(im, name);
    free(name);
    return s;
}

hx_status hx_imatrix_read(const char *path, uint32_t chunk_size, hx_imatrix **out)
{
    unsigned char *data = NULL;
    size_t size = 0;
    hx_status s = read_all(path, &data, &size);
    if (s)
        return s;
    s = hx_imatrix_create(0, out);
    if (s == HX_OK)
        s = size >= 4 && !memcmp(data, "GGUF", 4) ? read_gguf(*out, data, size, path)
                                                  : read_dat(*out, data, size, chunk_size, path);
    free(data);
    if (s) {
        hx_imatrix_free(*out);
        *out = NULL;
    }
    return s;
}

/* ---- writing -------------------------------------------------------------- */

static hx_status write_gguf(const hx_imatrix *im, const char *path)
{
    size_t total = 0;
    for (size_t i = 0; i < im->n; i++)
        total += (size_t)(im->t[i].ncol * im->t[i].nmat + im->t[i].nmat);
    float *vals = malloc(total * sizeof *vals);
    hx_gguf_writer *w = NULL;
    hx_status s = vals ? hx_gguf_writer_create(&w) : hx_error(HX_ERR_NO_MEMORY, "imatrix %s: out of memory", path);
    const uint32_t cs = hx_imatrix_chunk_size(im);
    if (s == HX_OK && !(s = hx_gguf_writer_set_str(w, "general.type", "imatrix")) &&
        !(s = hx_gguf_writer_set_arr_str(w, "imatrix.datasets", (const char *const *)im->datasets,
                                         im->n_datasets)) &&
        !(s = hx_gguf_writer_set_u32(w, "imatrix.chunk_count", (uint32_t)(hx_imatrix_max_count(im) / cs))))
        s = hx_gguf_writer_set_u32(w, "imatrix.chunk_size", cs);
    float *v = vals;
    for (size_t i = 0; s == HX_OK && i < im->n; i++) {
        const hx_imatrix_tensor *t = &im->t[i];
        char name[300];
        int64_t n = t->ncol * t->nmat;
        for (int64_t j = 0; j < n; j++)
            v[j] = (float)t->sum[j];
        for (int64_t k = 0; k < t->nmat; k++)
            v[n + k] = (float)t->count[k];
        /* Trailing dimensions of 1 are left out, as ggml writes them. */
        const uint32_t dims = t->nmat > 1 ? 2 : 1;
        snprintf(name, sizeof name, "%s.in_sum2", t->name);
        s = hx_gguf_writer_add_tensor(w, name, HX_TYPE_F32, dims,
                                      (const uint64_t[]){(uint64_t)t->ncol, (uint64_t)t->nmat}, v);
        snprintf(name, sizeof name, "%s.counts", t->name);
        if (s == HX_OK)
            s = hx_gguf_writer_add_tensor(w, name, HX_TYPE_F32, dims, (const uint64_t[]){1, (uint64_t)t->nmat}, v + n);
        v += n + t->nmat;
    }
    if (s == HX_OK)
        s = hx_gguf_writer_write(w, path);
    hx_gguf_writer_free(w);
    free(vals);
    return s;
}

static int put(FILE *f, const void *p, size_t n) { return fwrite(p, 1, n, f) == n ? 0 : -1; }

/* llama-imatrix's legacy writer: entries with no rows at all are left out,
 * an unused expert's values are 1, ncall rounds the rows up to chunks. */
static int write_dat_entries(const hx_imatrix *im, FILE *f, uint32_t cs)
{
    int32_t n = 0;
    for (size_t i = 0; i < im->n; i++)
        n += hx_imatrix_max_count_of(&im->t[i]) > 0;
    if (put(f, &n, 4))
        return -1;
    for (size_t i = 0; i < im->n; i++) {
        const hx_imatrix_tensor *t = &im->t[i];
        int64_t max = hx_imatrix_max_count_of(t);
        if (max == 0)
            continue;
        int32_t len = (int32_t)strlen(t->name), ncall = (int32_t)((max + cs - 1) / cs),
                nval = (int32_t)(t->ncol * t->nmat);
        if (put(f, &len, 4) || put(f, t->name, (size_t)len) || put(f, &ncall, 4) || put(f, &nval, 4))
            return -1;
        for (int64_t k = 0; k < t->nmat; k++)
            for (int64_t j = 0; j < t->ncol; j++) {
                double c = (double)t->count[k], v = t->sum[k * t->ncol + j];
                float out = c > 0 ? (float)(v / c * ncall) : (float)ncall;
                if (put(f, &out, 4))
                    return -1;
            }
    }
    return 0;
}

static hx_status write_dat(const hx_imatrix *im, const char *path)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return hx_error(HX_ERR_IO, "imatrix %s: %s", path, strerror(errno));
    const uint32_t cs = hx_imatrix_chunk_size(im);
    int32_t chunks = (int32_t)(hx_imatrix_max_count(im) / cs);
    const char *dataset = im->n_datasets ? im->datasets[im->n_datasets - 1] : "";
    int32_t len = (int32_t)strlen(dataset);
    int bad = write_dat_entries(im, f, cs) || put(f, &chunks, 4) || put(f, &len, 4) || put(f, dataset, (size_t)len);
    bad |= fclose(f) != 0;
    return bad ? hx_error(HX_ERR_IO, "imatrix %s: write error: %s", path, strerror(errno)) : HX_OK;
}

hx_status hx_imatrix_write(const hx_imatrix *im, const char *path, hx_imatrix_format format)
{
    return format == HX_IMATRIX_DAT ? write_dat(im, path) : write_gguf(im, path);
}
