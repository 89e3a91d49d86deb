/* GGUF files (versions 2 and 3), as llama.cpp writes them.
 *
 * The reader maps the file and never copies tensor data; every count,
 * offset, size and string length is checked against the file's length
 * before it is touched, so a hostile file yields HX_ERR_FORMAT with a
 * message naming the key or tensor and the offset — never a crash, an
 * out-of-bounds read or an allocation larger than the file justifies.
 *
 * Statuses of the openers: HX_ERR_FORMAT for a malformed file (the message
 * says "key 'k' at offset N: ..." or "tensor 't' at offset N: ...", N being
 * the file offset of the offending record or field), HX_ERR_UNSUPPORTED for a
 * well-formed header of a kind not read here (version 1, versions above 3,
 * big-endian files), HX_ERR_IO when the file cannot be opened or mapped.
 * Accessors: HX_ERR_INVALID_ARG for NULL arguments, HX_ERR_NOT_FOUND for an
 * absent key, HX_ERR_FORMAT for a value of the wrong type or out of range
 * for the requested type, HX_ERR_RANGE for an array index >= n.
 *
 * Beyond the format's letter, the reader also refuses: key and tensor names
 * holding a NUL byte (they are handed out as C strings), duplicate keys or
 * tensor names, tensors whose data overlap (gaps are fine), general.alignment
 * of a type other than uint32.  A file without tensors may end before the
 * padding of its data section, as llama.cpp's vocabulary files do.  An open
 * hx_gguf is never modified, so threads may read it concurrently. */
#ifndef HX_GGUF_GGUF_H
#define HX_GGUF_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "hetero.h"
#include "ops/types.h"

#define HX_GGUF_MAX_DIMS 4
#define HX_GGUF_DEFAULT_ALIGNMENT 32
/* Arrays may hold arrays; deeper nesting than this is rejected as malformed
 * (no real file nests at all; the bound keeps the parser's recursion safe). */
#define HX_GGUF_MAX_DEPTH 16

typedef enum {
    HX_GGUF_UINT8 = 0,
    HX_GGUF_INT8 = 1,
    HX_GGUF_UINT16 = 2,
    HX_GGUF_INT16 = 3,
    HX_GGUF_UINT32 = 4,
    HX_GGUF_INT32 = 5,
    HX_GGUF_FLOAT32 = 6,
    HX_GGUF_BOOL = 7,
    HX_GGUF_STRING = 8,
    HX_GGUF_ARRAY = 9,
    HX_GGUF_UINT64 = 10,
    HX_GGUF_INT64 = 11,
    HX_GGUF_FLOAT64 = 12,
    HX_GGUF_VTYPE_COUNT
} hx_gguf_vtype;

typedef struct hx_gguf hx_gguf;

typedef struct {
    const char *name;         /* NUL-terminated, owned by the hx_gguf   */
    uint32_t n_dims;
    uint64_t ne[HX_GGUF_MAX_DIMS]; /* ne[0] is the row length; unused = 1 */
    hx_type type;
    uint64_t offset;          /* from the start of the data section      */
    uint64_t size;            /* bytes                                   */
    const void *data;         /* inside the mapping                      */
} hx_gguf_tensor;

/* Opening.  `hx_gguf_open_memory` parses caller-owned bytes (no copy; they
 * must outlive the hx_gguf): used by tests and the fuzz target. */
hx_status hx_gguf_open(const char *path, hx_gguf **out);
hx_status hx_gguf_open_memory(const void *data, size_t size, hx_gguf **out);
void hx_gguf_close(hx_gguf *g);

uint32_t hx_gguf_version(const hx_gguf *g);
uint64_t hx_gguf_alignment(const hx_gguf *g);
const void *hx_gguf_data(const hx_gguf *g, size_t *size); /* whole mapping */
/* Tells the OS that the mapped pages wholly inside [p, p + size) are not
 * needed for now (they come back from the file if read again); nothing
 * for bytes the reader does not map. */
void hx_gguf_release_pages(const hx_gguf *g, const void *p, size_t size);
/* File offset of the data section (tensor offsets count from here). */
uint64_t hx_gguf_data_offset(const hx_gguf *g);

/* Metadata.  Keys are found by exact name; -1 when absent. */
int64_t hx_gguf_find_key(const hx_gguf *g, const char *key);
uint64_t hx_gguf_key_count(const hx_gguf *g);
const char *hx_gguf_key_name(const hx_gguf *g, uint64_t i);
hx_gguf_vtype hx_gguf_key_type(const hx_gguf *g, uint64_t i);
/* Key i's value exactly as stored, after its type tag (for copying). */
hx_status hx_gguf_key_value(const hx_gguf *g, uint64_t i, const void **bytes, uint64_t *size);

/* Typed getters by key.  HX_ERR_NOT_FOUND when the key is absent,
 * HX_ERR_FORMAT when its type does not fit (integers convert among
 * themselves when the value is in range; floats among themselves). */
hx_status hx_gguf_get_u32(const hx_gguf *g, const char *key, uint32_t *out);
hx_status hx_gguf_get_i32(const hx_gguf *g, const char *key, int32_t *out);
hx_status hx_gguf_get_u64(const hx_gguf *g, const char *key, uint64_t *out);
hx_status hx_gguf_get_f32(const hx_gguf *g, const char *key, float *out);
hx_status hx_gguf_get_i64(const hx_gguf *g, const char *key, int64_t *out);
hx_status hx_gguf_get_f64(const hx_gguf *g, const char *key, double *out);
/* Only BOOL values; *out is 0 or 1 (any nonzero byte reads as 1). */
hx_status hx_gguf_get_bool(const hx_gguf *g, const char *key, int *out);
/* A string value: not NUL-terminated in the file; `len` bytes at `*s`. */
hx_status hx_gguf_get_str(const hx_gguf *g, const char *key, const char **s, uint64_t *len);

/* Arrays (possibly nested).  An hx_gguf_array is a view into the mapping.
 * `offsets[i]` counts from `data`.  A caller may build a view of a numeric
 * array itself ({type, n, data}, g and offsets NULL) to pass to
 * hx_gguf_writer_set_arr_arr; string and array views come from the reader. */
typedef struct {
    hx_gguf_vtype type;  /* element type                                   */
    uint64_t n;          /* element count                                  */
    const uint8_t *data; /* first element's bytes in the mapping (unaligned) */
    const hx_gguf *g;
    uint64_t *offsets;   /* for STRING/ARRAY elements: byte offset of each, owned by g */
} hx_gguf_array;

hx_status hx_gguf_get_arr(const hx_gguf *g, const char *key, hx_gguf_array *out);
/* Element access; each checks i < n and the element type. */
hx_status hx_gguf_arr_str(const hx_gguf_array *a, uint64_t i, const char **s, uint64_t *len);
hx_status hx_gguf_arr_f32(const hx_gguf_array *a, uint64_t i, float *out);    /* F32/F64 */
hx_status hx_gguf_arr_i64(const hx_gguf_array *a, uint64_t i, int64_t *out);  /* any integer/bool */
hx_status hx_gguf_arr_arr(const hx_gguf_array *a, uint64_t i, hx_gguf_array *out);
hx_status hx_gguf_arr_u64(const hx_gguf_array *a, uint64_t i, uint64_t *out); /* any integer/bool */
hx_status hx_gguf_arr_f64(const hx_gguf_array *a, uint64_t i, double *out);   /* F32/F64 */

/* Tensors. */
uint64_t hx_gguf_tensor_count(const hx_gguf *g);
const hx_gguf_tensor *hx_gguf_tensor_at(const hx_gguf *g, uint64_t i);
const hx_gguf_tensor *hx_gguf_find_tensor(const hx_gguf *g, const char *name);

/* Writer: collects metadata and tensors, then writes a version-3 file with
 * the given alignment (general.alignment is written when not 32). Tensor
 * data is referenced, not copied, until hx_gguf_writer_write returns.
 * Setting a key that is already set replaces its value in place (keys keep
 * the order of their first setting).  The alignment is the value of the
 * key general.alignment, which must be a uint32 power of two. */
typedef struct hx_gguf_writer hx_gguf_writer;

hx_status hx_gguf_writer_create(hx_gguf_writer **out);
void hx_gguf_writer_free(hx_gguf_writer *w);
hx_status hx_gguf_writer_set_u32(hx_gguf_writer *w, const char *key, uint32_t v);
hx_status hx_gguf_writer_set_i32(hx_gguf_writer *w, const char *key, int32_t v);
hx_status hx_gguf_writer_set_u64(hx_gguf_writer *w, const char *key, uint64_t v);
hx_status hx_gguf_writer_set_f32(hx_gguf_writer *w, const char *key, float v);
hx_status hx_gguf_writer_set_bool(hx_gguf_writer *w, const char *key, int v);
hx_status hx_gguf_writer_set_str(hx_gguf_writer *w, const char *key, const char *v);
/* A numeric array of `n` elements of `type` (copied). */
hx_status hx_gguf_writer_set_arr(hx_gguf_writer *w, const char *key, hx_gguf_vtype type,
                                 const void *data, uint64_t n);
hx_status hx_gguf_writer_set_arr_str(hx_gguf_writer *w, const char *key, const char *const *v,
                                     uint64_t n);
/* Copies every key of `src` (for tools that rewrite a file). */
hx_status hx_gguf_writer_copy_kv(hx_gguf_writer *w, const hx_gguf *src);
/* A scalar of any numeric type (BOOL: `v` points to a uint8_t 0 or 1). */
hx_status hx_gguf_writer_set_scalar(hx_gguf_writer *w, const char *key, hx_gguf_vtype type,
                                    const void *v);
/* Sets general.alignment (a nonzero power of two); 32 removes the key. */
hx_status hx_gguf_writer_set_alignment(hx_gguf_writer *w, uint32_t alignment);
/* An array of `n` arrays, each given as a view (see hx_gguf_array). */
hx_status hx_gguf_writer_set_arr_arr(hx_gguf_writer *w, const char *key,
                                     const hx_gguf_array *elems, uint64_t n);
hx_status hx_gguf_writer_add_tensor(hx_gguf_writer *w, const char *name, hx_type type,
                                    uint32_t n_dims, const uint64_t *ne, const void *data);
hx_status hx_gguf_writer_write(hx_gguf_writer *w, const char *path);

#endif
