/* The parsed form of a GGUF file, shared by the reader's files only. */
#ifndef HX_GGUF_GGUF_INTERNAL_H
#define HX_GGUF_GGUF_INTERNAL_H

#include "gguf/gguf.h"

/* No table: the array's elements are fixed-size. */
#define HX_GGUF_NO_TABLE UINT64_MAX

typedef struct {
    const char *name;
    uint64_t name_at;   /* index into the name pool while parsing        */
    uint64_t off;       /* file offset of the record (its key length)    */
    hx_gguf_vtype type;
    uint64_t val_off;   /* file offset of the value, after the type tag  */
    uint64_t val_size;
    /* Arrays: element type, count, first element's file offset, and the
     * index in `table` of the element offsets (HX_GGUF_NO_TABLE if none). */
    hx_gguf_vtype etype;
    uint64_t n;
    uint64_t data_off;
    uint64_t table;
} hx_gguf_kv;

typedef struct {
    const char *name;
    uint64_t idx;
} hx_gguf_name_ref;

struct hx_gguf {
    const uint8_t *base;
    size_t size;
    int mapped;
    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset;

    uint64_t n_kv;
    hx_gguf_kv *kv;
    hx_gguf_name_ref *kv_by_name; /* sorted by name, for lookups */

    uint64_t n_tensors;
    hx_gguf_tensor *tensors;
    uint64_t *tensor_name_at;     /* pool index while parsing, then unused */
    uint64_t *tensor_rec;         /* file offset of each tensor's record   */
    hx_gguf_name_ref *tensors_by_name;

    char *names;                  /* every key and tensor name, NUL-ended  */
    size_t names_len, names_cap;

    /* Element offsets of string and array arrays.  An array of n arrays
     * owns 2n entries: n byte offsets, then n table indices of its
     * elements' own tables. */
    uint64_t *table;
    size_t table_len, table_cap;
};

extern const char *const hx_gguf_vtype_names[HX_GGUF_VTYPE_COUNT];
/* Bytes of a fixed-size value type; 0 for STRING and ARRAY. */
extern const uint8_t hx_gguf_vtype_size[HX_GGUF_VTYPE_COUNT];

/* Writes `len` bytes of a name into `buf` quoted for a message: printable
 * ASCII as is, the rest as \xNN, long names cut with "...". */
const char *hx_gguf_show(char *buf, size_t cap, const uint8_t *s, uint64_t len);

#endif
