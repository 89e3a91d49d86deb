/* Importance matrices: the sums a collection or a file gives, kept by
 * weight name; collection as llama-imatrix's (which matmuls, how rows are
 * counted), reading and writing in quantize/imatrix_file.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "quantize/imatrix_impl.h"
#include "runtime/error.h"

/* llama-imatrix's defaults: a chunk is 512 tokens, and matmuls of fewer
 * than 16 rows (decode steps) are not collected. */
#define DEFAULT_CHUNK_SIZE 512
#define MIN_ROWS 16

static hx_status create(uint32_t chunk_size, hx_imatrix **out)
{
    hx_imatrix *im = calloc(1, sizeof *im);
    if (!im)
        return hx_error(HX_ERR_NO_MEMORY, "hx_imatrix_create: out of memory");
    pthread_mutex_init(&im->lock, NULL);
    im->chunk_size = chunk_size;
    *out = im;
    return HX_OK;
}

hx_status hx_imatrix_create(uint32_t chunk_size, hx_imatrix **out)
{
    hx_api_enter();
    if (!out)
        return hx_api_leave(hx_error(HX_ERR_INVALID_ARG, "hx_imatrix_create: NULL output"));
    *out = NULL;
    return hx_api_leave(create(chunk_size, out));
}

void hx_imatrix_free(hx_imatrix *im)
{
    if (!im)
        return;
    for (size_t i = 0; i < im->n; i++) {
        free(im->t[i].name);
        free(im->t[i].sum);
        free(im->t[i].count);
        free(im->t[i].mean);
    }
    for (size_t i = 0; i < im->n_datasets; i++)
        free(im->datasets[i]);
    free(im->datasets);
    free(im->t);
    pthread_mutex_destroy(&im->lock);
    free(im);
}

uint32_t hx_imatrix_chunk_size(const hx_imatrix *im) { return im->chunk_size ? im->chunk_size : DEFAULT_CHUNK_SIZE; }

int64_t hx_imatrix_max_count_of(const hx_imatrix_tensor *t)
{
    int64_t max = 0;
    for (int64_t k = 0; k < t->nmat; k++)
        max = t->count[k] > max ? t->count[k] : max;
    return max;
}

int64_t hx_imatrix_max_count(const hx_imatrix *im)
{
    int64_t max = 0;
    for (size_t i = 0; i < im->n; i++) {
        int64_t c = hx_imatrix_max_count_of(&im->t[i]);
        max = c > max ? c : max;
    }
    return max;
}

/* The index of `name`, or where it would go (*found = 0). */
static size_t search(const hx_imatrix *im, const char *name, int *found)
{
    size_t lo = 0, hi = im->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(im->t[mid].name, name);
        if (c == 0) {
            *found = 1;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = 0;
    return lo;
}

void hx_imatrix_tensor_means(hx_imatrix_tensor *t)
{
    for (int64_t k = 0; k < t->nmat; k++)
        for (int64_t j = 0; j < t->ncol; j++)
            t->mean[k * t->ncol + j] = t->count[k] > 0 ? (float)(t->sum[k * t->ncol + j] / (double)t->count[k]) : 1;
}

hx_status hx_imatrix_tensor_get(hx_imatrix *im, const char *name, int64_t ncol, int64_t nmat, const char *what,
                                hx_imatrix_tensor **out)
{
    int found;
    size_t i = search(im, name, &found);
    if (found) {
        hx_imatrix_tensor *t = &im->t[i];
        if (t->ncol != ncol || t->nmat != nmat)
            return hx_error(HX_ERR_FORMAT, "%s: '%s' has %lld x %lld values, %lld x %lld before", what, name,
                            (long long)nmat, (long long)ncol, (long long)t->nmat, (long long)t->ncol);
        *out = t;
        return HX_OK;
    }
    if (ncol < 1 || nmat < 1 || ncol > ((int64_t)1 << 30) / nmat)
        return hx_error(HX_ERR_FORMAT, "%s: '%s' has %lld x %lld values", what, name, (long long)nmat,
                        (long long)ncol);
    if (im->n == im->cap) {
        size_t cap = im->cap ? 2 * im->cap : 64;
        hx_imatrix_tensor *t = realloc(im->t, cap * sizeof *t);
        if (!t)
            return hx_error(HX_ERR_NO_MEMORY, "%s: out of memory", what);
        im->t = t, im->cap = cap;
    }
    hx_imatrix_tensor t = {strdup(name), ncol, nmat, calloc((size_t)(ncol * nmat), sizeof(double)),
                           calloc((size_t)nmat, sizeof(int64_t)), malloc((size_t)(ncol * nmat) * sizeof(float))};
    if (!t.name || !t.sum || !t.count || !t.mean) {
        free(t.name), free(t.sum), free(t.count), free(t.mean);
        return hx_error(HX_ERR_NO_MEMORY, "%s: out of memory for '%s'", what, name);
    }
    hx_imatrix_tensor_means(&t);
    memmove(&im->t[i + 1], &im->t[i], (im->n - i) * sizeof *im->t);
    im->t[i] = t;
    im->n++;
    *out = &im->t[i];
    return HX_OK;
}

static hx_status add_dataset(hx_imatrix *im, const char *name)
{
    char *copy = strdup(name);
    char **d = copy ? realloc(im->datasets, (im->n_datasets + 1) * sizeof *d) : NULL;
    if (!d) {
        free(copy);
        return hx_error(HX_ERR_NO_MEMORY, "hx_imatrix_add_dataset: out of memory");
    }
    d[im->n_datasets++] = copy;
    im->datasets = d;
    return HX_OK;
}

hx_status hx_imatrix_add_dataset(hx_imatrix *im, const char *name)
{
    hx_api_enter();
    if (!im || !name)
        return hx_api_leave(hx_error(HX_ERR_INVALID_ARG, "hx_imatrix_add_dataset: NULL argument"));
    pthread_mutex_lock(&im->lock);
    hx_status s = add_dataset(im, name);
    pthread_mutex_unlock(&im->lock);
    return hx_api_leave(s);
}

/* Checks every entry of src against dst first, so that a mismatch adds
 * nothing; then creates what dst lacks (the only step that can fail
 * after, on memory) and adds. */
hx_status hx_imatrix_add(hx_imatrix *dst, hx_imatrix *src, const char *what)
{
    for (size_t i = 0; i < src->n; i++) {
        const hx_imatrix_tensor *a = &src->t[i];
        int found;
        size_t k = search(dst, a->name, &found);
        if (found && (dst->t[k].ncol != a->ncol || dst->t[k].nmat != a->nmat))
            return hx_error(HX_ERR_FORMAT, "%s: '%s' has %lld x %lld values, the imatrix it joins %lld x %lld", what,
                            a->name, (long long)a->nmat, (long long)a->ncol, (long long)dst->t[k].nmat,
                            (long long)dst->t[k].ncol);
    }
    char **d = realloc(dst->datasets, (dst->n_datasets + src->n_datasets + 1) * sizeof *d);
    if (!d)
        return hx_error(HX_ERR_NO_MEMORY, "%s: out of memory", what);
    dst->datasets = d;
    for (size_t i = 0; i < src->n; i++) {
        const hx_imatrix_tensor *a = &src->t[i];
        hx_imatrix_tensor *t;
        hx_status s = hx_imatrix_tensor_get(dst, a->name, a->ncol, a->nmat, what, &t);
        if (s)
            return s;
        for (int64_t j = 0; j < a->ncol * a->nmat; j++)
            t->sum[j] += a->sum[j];
        for (int64_t k = 0; k < a->nmat; k++)
            t->count[k] += a->count[k];
        hx_imatrix_tensor_means(t);
    }
    memcpy(dst->datasets + dst->n_datasets, src->datasets, src->n_datasets * sizeof *d);
    dst->n_datasets += src->n_datasets;
    src->n_datasets = 0;
    return HX_OK;
}

hx_status hx_imatrix_merge_file(hx_imatrix *im, const char *path)
{
    hx_api_enter();
    if (!im || !path)
        return hx_api_leave(hx_error(HX_ERR_INVALID_ARG, "hx_imatrix_merge_file: NULL argument"));
    pthread_mutex_lock(&im->lock);
    hx_imatrix *f = NULL;
    hx_status s = hx_imatrix_read(path, hx_imatrix_chunk_size(im), &f);
    if (s == HX_OK)
        s = hx_imatrix_add(im, f, path);
    if (s == HX_OK && !im->chunk_size)
        im->chunk_size = f->chunk_size;
    pthread_mutex_unlock(&im->lock);
    hx_imatrix_free(f);
    return hx_api_leave(s);
}

hx_status hx_imatrix_load(const char *path, hx_imatrix **out)
{
    hx_api_enter();
    if (!path || !out)
        return hx_api_leave(hx_error(HX_ERR_INVALID_ARG, "hx_imatrix_load: NULL argument"));
    *out = NULL;
    return hx_api_leave(hx_imatrix_read(path, DEFAULT_CHUNK_SIZE, out));
}

const float *hx_imatrix_find(const hx_imatrix *im, const char *tensor, int64_t *n_out)
{
    int found = 0;
    size_t i = im && tensor ? search(im, tensor, &found) : 0;
    if (n_out)
        *n_out = found ? im->t[i].ncol * im->t[i].nmat : 0;
    return found ? im->t[i].mean : NULL;
}

/* ---- collection ----------------------------------------------------------- */

static int collected(const hx_imatrix *im, const char *tensor, uint32_t rows)
{
    return rows >= MIN_ROWS &&
           (!strncmp(tensor, "blk.", 4) || ((im->flags & HX_IMATRIX_OUTPUT) && !strcmp(tensor, "output.weight")));
}

/* The activation observer: one call per matmul, from any CPU thread (the
 * flags are read under the lock too: hx_imatrix_collect may change them
 * while another model's evaluation runs). */
static void observe(void *user, const char *tensor, const float *x, uint32_t rows, uint32_t cols)
{
    hx_imatrix *im = user;
    pthread_mutex_lock(&im->lock);
    hx_imatrix_tensor *t;
    if (collected(im, tensor, rows)) {
        if (hx_imatrix_tensor_get(im, tensor, cols, 1, "hx_imatrix_collect", &t) == HX_OK) {
            for (uint32_t r = 0; r < rows; r++) {
                const float *row = x + (size_t)r * cols;
                for (uint32_t j = 0; j < cols; j++)
                    t->sum[j] += (double)row[j] * row[j];
            }
            t->count[0] += rows;
            hx_imatrix_tensor_means(t);
        } else {
            im->collect_error = 1;
        }
    }
    pthread_mutex_unlock(&im->lock);
}

/* The expert observer: one call per expert a batch routed rows to.  As
 * llama-imatrix, every routed row counts, however small the batch (its
 * 16-row floor is for dense matmuls only), and a token is seen by each of
 * the experts it goes to; only that expert's means change. */
static void observe_expert(void *user, const char *tensor, uint32_t expert, uint32_t n_expert, const float *x,
                           uint32_t rows, uint32_t cols)
{
    hx_imatrix *im = user;
    pthread_mutex_lock(&im->lock);
    hx_imatrix_tensor *t;
    if (hx_imatrix_tensor_get(im, tensor, cols, n_expert, "hx_imatrix_collect", &t) == HX_OK) {
        double *sum = t->sum + (size_t)expert * cols;
        for (uint32_t r = 0; r < rows; r++) {
            const float *row = x + (size_t)r * cols;
            for (uint32_t j = 0; j < cols; j++)
                sum[j] += (double)row[j] * row[j];
        }
        t->count[expert] += rows;
        for (uint32_t j = 0; j < cols; j++)
            t->mean[(size_t)expert * cols + j] = (float)(sum[j] / (double)t->count[expert]);
    } else {
        im->collect_error = 1;
    }
    pthread_mutex_unlock(&im->lock);
}

hx_status hx_imatrix_collect(hx_model *m, hx_imatrix *im, unsigned flags)
{
    hx_api_enter();
    if (im && (flags & ~(unsigned)HX_IMATRIX_OUTPUT))
        return hx_api_leave(hx_error(HX_ERR_INVALID_ARG, "hx_imatrix_collect: unknown flags 0x%x", flags));
    if (im) {
        pthread_mutex_lock(&im->lock);
        im->flags = flags;
        pthread_mutex_unlock(&im->lock);
    }
    hx_status s = hx_model_set_activation_observer(m, im ? observe : NULL, im);
    if (s == HX_OK)
        s = hx_model_set_expert_observer(m, im ? observe_expert : NULL, im);
    if (s && im) /* neither or both */
        hx_model_set_activation_observer(m, NULL, NULL);
    return hx_api_leave(s);
}

/* ---- reading it out ------------------------------------------------------- */

static size_t nonfinite(const hx_imatrix *im)
{
    size_t n = 0;
    for (size_t i = 0; i < im->n; i++)
        for (int64_t j = 0; j < im->t[i].ncol * im->t[i].nmat; j++)
            if (!isfinite(im->t[i].sum[j])) {
                n++;
                break;
            }
    return n;
}

hx_status hx_imatrix_save(const hx_imatrix *im, const char *path, hx_imatrix_format format)
{
    hx_api_enter();
    if (!im || !path)
        return hx_api_leave(hx_error(HX_ERR_INVALID_ARG, "hx_imatrix_save: NULL argument"));
    if (format != HX_IMATRIX_GGUF && format != HX_IMATRIX_DAT)
        return hx_api_leave(hx_error(HX_ERR_INVALID_ARG, "hx_imatrix_save: unknown format %d", (int)format));
    hx_imatrix *w = (hx_imatrix *)im; /* the lock only */
    pthread_mutex_lock(&w->lock);
    size_t bad = nonfinite(im);
    hx_status s = im->collect_error ? hx_error(HX_ERR_NO_MEMORY, "hx_imatrix_save: some matmuls could not be "
                                                                 "added (out of memory, or a weight's width changed): the sums are incomplete")
                  : bad ? hx_error(HX_ERR_RANGE, "hx_imatrix_save: %zu tensors have non-finite sums", bad)
                  : im->n == 0 ? hx_error(HX_ERR_STATE, "hx_imatrix_save: nothing collected or merged")
                               : hx_imatrix_write(im, path, format);
    pthread_mutex_unlock(&w->lock);
    return hx_api_leave(s);
}

hx_status hx_imatrix_info_get(const hx_imatrix *im, hx_imatrix_info *out)
{
    hx_api_enter();
    if (!im || !out)
        return hx_api_leave(hx_error(HX_ERR_INVALID_ARG, "hx_imatrix_info_get: NULL argument"));
    hx_imatrix *w = (hx_imatrix *)im;
    pthread_mutex_lock(&w->lock);
    out->n_entries = im->n;
    out->n_datasets = im->n_datasets;
    out->chunk_size = hx_imatrix_chunk_size(im);
    out->chunk_count = (uint32_t)(hx_imatrix_max_count(im) / out->chunk_size);
    pthread_mutex_unlock(&w->lock);
    return hx_api_leave(HX_OK);
}

hx_status hx_imatrix_entry_at(const hx_imatrix *im, size_t i, hx_imatrix_entry *out)
{
    hx_api_enter();
    if (!im || !out)
        return hx_api_leave(hx_error(HX_ERR_INVALID_ARG, "hx_imatrix_entry_at: NULL argument"));
    hx_imatrix *w = (hx_imatrix *)im;
    pthread_mutex_lock(&w->lock);
    hx_status s = HX_OK;
    if (i >= im->n) {
        s = hx_error(HX_ERR_RANGE, "hx_imatrix_entry_at: entry %zu of %zu", i, im->n);
    } else {
        const hx_imatrix_tensor *t = &im->t[i];
        *out = (hx_imatrix_entry){t->name, t->mean, t->sum, t->ncol * t->nmat, hx_imatrix_max_count_of(t)};
    }
    pthread_mutex_unlock(&w->lock);
    return hx_api_leave(s);
}

hx_status hx_imatrix_dataset_at(const hx_imatrix *im, size_t i, const char **out)
{
    hx_api_enter();
    if (!im || !out)
        return hx_api_leave(hx_error(HX_ERR_INVALID_ARG, "hx_imatrix_dataset_at: NULL argument"));
    if (i >= im->n_datasets)
        return hx_api_leave(hx_error(HX_ERR_RANGE, "hx_imatrix_dataset_at: dataset %zu of %zu", i, im->n_datasets));
    *out = im->datasets[i];
    return hx_api_leave(HX_OK);
}
