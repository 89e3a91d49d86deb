/* The inside of an hx_imatrix, shared by the collector (quantize/imatrix.c)
 * and the file formats (quantize/imatrix_file.c).  Internal. */
#ifndef HX_QUANTIZE_IMATRIX_IMPL_H
#define HX_QUANTIZE_IMATRIX_IMPL_H

#include <pthread.h>

#include "quantize/imatrix.h"

/* One weight: nmat matrices (1 for a dense weight, one per expert) of
 * ncol columns each.  Sums are kept in double: a float sum over a long
 * text loses the small columns' digits; files store float as llama.cpp's. */
typedef struct {
    char *name;
    int64_t ncol, nmat;
    double *sum;    /* [nmat][ncol] */
    int64_t *count; /* [nmat] rows summed */
    float *mean;    /* [nmat][ncol]: sum / count, or 1 where count is 0 (llama-quantize's rule) */
} hx_imatrix_tensor;

struct hx_imatrix {
    pthread_mutex_t lock; /* collection may run on several threads */
    uint32_t chunk_size;  /* 0 until given or read from a GGUF file */
    unsigned flags;       /* HX_IMATRIX_OUTPUT while collecting */
    int collect_error;    /* an observed matmul could not be added (memory, a changed shape) */
    hx_imatrix_tensor *t; /* by name */
    size_t n, cap;
    char **datasets;
    size_t n_datasets;
};

/* The entry for `name` with nmat x ncol values, created (zero) when
 * absent; HX_ERR_FORMAT when it exists with another column count (the
 * message names `what`, the file or the collection).  Call with the lock
 * held or on an hx_imatrix no other thread sees. */
hx_status hx_imatrix_tensor_get(hx_imatrix *im, const char *name, int64_t ncol, int64_t nmat, const char *what,
                                hx_imatrix_tensor **out);
/* Recomputes t's means after its sums or counts changed. */
void hx_imatrix_tensor_means(hx_imatrix_tensor *t);
/* Adds everything src holds to dst (both unshared; src's datasets move). */
hx_status hx_imatrix_add(hx_imatrix *dst, hx_imatrix *src, const char *what);
/* The chunk size in effect: the one given or read, else 512. */
uint32_t hx_imatrix_chunk_size(const hx_imatrix *im);
/* The most rows any matrix (of t, of any tensor) has seen. */
int64_t hx_imatrix_max_count_of(const hx_imatrix_tensor *t);
int64_t hx_imatrix_max_count(const hx_imatrix *im);

/* quantize/imatrix_file.c: reads a file into a fresh hx_imatrix (legacy
 * entries reconstructed with chunk_size), or writes one. */
hx_status hx_imatrix_read(const char *path, uint32_t chunk_size, hx_imatrix **out);
hx_status hx_imatrix_write(const hx_imatrix *im, const char *path, hx_imatrix_format format);

#endif
