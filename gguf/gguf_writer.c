/* GGUF writer: keys are kept already encoded, so copying a key from a
 * reader is a byte copy and every value type (nested arrays included)
 * goes through one path. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf_internal.h"
#include "runtime/error.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF writer stores host values as little-endian bytes"
#endif

typedef struct {
    uint8_t *p;
    size_t len, cap;
    int failed;
} bytes;

typedef struct {
    char *key;
    hx_gguf_vtype type;
    bytes val;
} wkv;

typedef struct {
    char *name;
    hx_type type;
    uint32_t n_dims;
    uint64_t ne[HX_GGUF_MAX_DIMS];
    const void *data;
    uint64_t size;
} wtensor;

struct hx_gguf_writer {
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
};

static void put(bytes *b, const void *src, size_t n)
{
    if (b->failed || !n)
        return;
    if (n > SIZE_MAX - b->len) {
        b->failed = 1;
        return;
    }
    if (b->len + n > b->cap) {
        size_t c = b->cap ? b->cap : 64;
        while (c < b->len + n)
            c = c > SIZE_MAX / 2 ? b->len + n : c * 2;
        uint8_t *np = realloc(b->p, c);
        if (!np) {
            b->failed = 1;
            return;
        }
        b->p = np;
        b->cap = c;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void put_u32(bytes *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(bytes *b, uint64_t v) { put(b, &v, 8); }

static void put_str(bytes *b, const char *s, size_t n)
{
    put_u64(b, n);
    put(b, s, n);
}

hx_status hx_gguf_writer_create(hx_gguf_writer **out)
{
    if (!out)
        return hx_error(HX_ERR_INVALID_ARG, "hx_gguf_writer_create: NULL argument");
    *out = calloc(1, sizeof **out);
    return *out ? HX_OK : hx_error(HX_ERR_NO_MEMORY, "GGUF writer");
}

void hx_gguf_writer_free(hx_gguf_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].val.p);
    }
    for (size_t i = 0; i < w->n_t; i++)
        free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w);
}

static int is_alignment(uint32_t a) { return a && !(a & (a - 1)); }

static hx_status remove_key(hx_gguf_writer *w, const char *key)
{
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, key) == 0) {
            free(w->kv[i].key);
            free(w->kv[i].val.p);
            memmove(&w->kv[i], &w->kv[i + 1], (w->n_kv - i - 1) * sizeof *w->kv);
            w->n_kv--;
            break;
        }
    }
    return HX_OK;
}

/* Takes ownership of `val` (freed on failure too). */
static hx_status set_encoded(hx_gguf_writer *w, const char *key, hx_gguf_vtype type, bytes val)
{
    hx_status s = HX_OK;
    if (!w || !key)
        s = hx_error(HX_ERR_INVALID_ARG, "GGUF writer: NULL argument");
    else if (val.failed)
        s = hx_error(HX_ERR_NO_MEMORY, "GGUF writer: value of key '%s'", key);
    else if (strcmp(key, "general.alignment") == 0) {
        uint32_t a = 0;
        if (type != HX_GGUF_UINT32)
            s = hx_error(HX_ERR_INVALID_ARG, "GGUF writer: general.alignment must be a uint32, not a %s",
                         hx_gguf_vtype_names[type]);
        else if (memcpy(&a, val.p, 4), !is_alignment(a))
            s = hx_error(HX_ERR_INVALID_ARG, "GGUF writer: alignment %u is not a nonzero power of two", a);
    }
    if (s) {
        free(val.p);
        return s;
    }
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, key) == 0) {
            free(w->kv[i].val.p);
            w->kv[i].type = type;
            w->kv[i].val = val;
            return HX_OK;
        }
    }
    if (w->n_kv == w->cap_kv) {
        size_t c = w->cap_kv ? 2 * w->cap_kv : 16;
        wkv *nk = realloc(w->kv, c * sizeof *nk);
        if (!nk) {
            free(val.p);
            return hx_error(HX_ERR_NO_MEMORY, "GGUF writer: key '%s'", key);
        }
        w->kv = nk;
        w->cap_kv = c;
    }
    char *k = strdup(key);
    if (!k) {
        free(val.p);
        return hx_error(HX_ERR_NO_MEMORY, "GGUF writer: key '%s'", key);
    }
    w->kv[w->n_kv++] = (wkv){k, type, val};
    return HX_OK;
}

static hx_status set_raw(hx_gguf_writer *w, const char *key, hx_gguf_vtype type, const void *v, size_t n)
{
    bytes b = {0};
    put(&b, v, n);
    return set_encoded(w, key, type, b);
}

hx_status hx_gguf_writer_set_scalar(hx_gguf_writer *w, const char *key, hx_gguf_vtype type, const void *v)
{
    if ((unsigned)type >= HX_GGUF_VTYPE_COUNT || !hx_gguf_vtype_size[type])
        return hx_error(HX_ERR_INVALID_ARG, "GGUF writer: key '%s': type %d is not a scalar type",
                        key ? key : "(null)", (int)type);
    if (!v)
        return hx_error(HX_ERR_INVALID_ARG, "GGUF writer: key '%s': NULL value", key ? key : "(null)");
    if (type == HX_GGUF_BOOL && *(const uint8_t *)v > 1)
        return hx_error(HX_ERR_INVALID_ARG, "GGUF writer: key '%s': bool value %u is not 0 or 1",
                        key ? key : "(null)", *(const uint8_t *)v);
    return set_raw(w, key, type, v, hx_gguf_vtype_size[type]);
}

hx_status hx_gguf_writer_set_u32(hx_gguf_writer *w, const char *key, uint32_t v)
{
    return set_raw(w, key, HX_GGUF_UINT32, &v, 4);
}

hx_status hx_gguf_writer_set_i32(hx_gguf_writer *w, const char *key, int32_t v)
{
    return set_raw(w, key, HX_GGUF_INT32, &v, 4);
}

hx_status hx_gguf_writer_set_u64(hx_gguf_writer *w, const char *key, uint64_t v)
{
    return set_raw(w, key, HX_GGUF_UINT64, &v, 8);
}

hx_status hx_gguf_writer_set_f32(hx_gguf_writer *w, const char *key, float v)
{
    return set_raw(w, key, HX_GGUF_FLOAT32, &v, 4);
}

hx_status hx_gguf_writer_set_bool(hx_gguf_writer *w, const char *key, int v)
{
    uint8_t b = v != 0;
    return set_raw(w, key, HX_GGUF_BOOL, &b, 1);
}

hx_status hx_gguf_writer_set_str(hx_gguf_writer *w, const char *key, const char *v)
{
    if (!v)
        return hx_error(HX_ERR_INVALID_ARG, "GGUF writer: key '%s': NULL string", key ? key : "(null)");
    bytes b = {0};
    put_str(&b, v, strlen(v));
    return set_encoded(w, key, HX_GGUF_STRING, b);
}

hx_status hx_gguf_writer_set_arr(hx_gguf_writer *w, const char *key, hx_gguf_vtype type, const void *data,
                                 uint64_t n)
{
    const char *k = key ? key : "(null)";
    if ((unsigned)type >= HX_GGUF_VTYPE_COUNT || !hx_gguf_vtype_size[type])
        return hx_error(HX_ERR_INVALID_ARG, "GGUF writer: key '%s': arrays of type %d take another setter",
                        k, (int)type);
    if (!data && n)
        return hx_error(HX_ERR_INVALID_ARG, "GGUF writer: key '%s': NULL array data", k);
    if (n > SIZE_MAX / 8)
        return hx_error(HX_ERR_INVALID_ARG, "GGUF writer: key '%s': array of %" PRIu64 " elements", k, n);
    bytes b = {0};
    put_u32(&b, type);
    put_u64(&b, n);
    put(&b, data, n * hx_gguf_vtype_size[type]);
    return set_encoded(w, key, HX_GGUF_ARRAY, b);
}

hx_status hx_gguf_writer_set_arr_str(hx_gguf_writer *w, const char *key, const char *const *v, uint64_t n)
{
    const char *k = key ? key : "(null)";
    if (!v && n)
        return hx_error(HX_ERR_INVALID_ARG, "GGUF writer: key '%s': NULL string array", k);
    bytes b = {0};
    put_u32(&b, HX_GGUF_STRING);
    put_u64(&b, n);
    for (uint64_t i = 0; i < n; i++) {
        if (!v[i]) {
            free(b.p);
            return hx_error(HX_ERR_INVALID_ARG, "GGUF writer: key '%s': string %" PRIu64 " is NULL", k, i);
        }
        put_str(&b, v[i], strlen(v[i]));
    }
    return set_encoded(w, key, HX_GGUF_ARRAY, b);
}

/* Bytes of a view's elements as stored.  String and array views come from
 * a reader, whose checks guarantee that the last element lies in the file. */
static hx_status view_extent(const hx_gguf_array *a, int depth, uint64_t *out)
{
    if ((unsigned)a->type >= HX_GGUF_VTYPE_COUNT)
        return hx_error(HX_ERR_INVALID_ARG, "GGUF writer: array view has invalid type %d", (int)a->type);
    if (depth > HX_GGUF_MAX_DEPTH)
        return hx_error(HX_ERR_INVALID_ARG, "GGUF writer: arrays nested deeper than %d levels",
                        HX_GGUF_MAX_DEPTH);
    if (!a->data && a->n)
        return hx_error(HX_ERR_INVALID_ARG, "GGUF writer: array view without data");
    uint8_t size = hx_gguf_vtype_size[a->type];
    if (size) {
        if (a->n > SIZE_MAX / size)
            return hx_error(HX_ERR_INVALID_ARG, "GGUF writer: array view of %" PRIu64 " elements", a->n);
        *out = a->n * size;
        return HX_OK;
    }
    if (!a->g || !a->offsets)
        return hx_error(HX_ERR_INVALID_ARG, "GGUF writer: a view of %ss must come from a GGUF reader",
                        hx_gguf_vtype_names[a->type]);
    if (!a->n) {
        *out = 0;
        return HX_OK;
    }
    uint64_t last = a->offsets[a->n - 1], len = 0;
    if (a->type == HX_GGUF_STRING) {
        memcpy(&len, a->data + last, 8);
        *out = last + 8 + len;
        return HX_OK;
    }
    /* Every element, not just the last, so that nesting too deep for the
     * reader is refused here rather than written. */
    for (uint64_t i = 0; i < a->n; i++) {
        hx_gguf_array child;
        hx_status s = hx_gguf_arr_arr(a, i, &child);
        if (!s)
            s = view_extent(&child, depth + 1, &len);
        if (s)
            return s;
    }
    *out = last + 12 + len;
    return HX_OK;
}

hx_status hx_gguf_writer_set_arr_arr(hx_gguf_writer *w, const char *key, const hx_gguf_array *elems,
                                     uint64_t n)
{
    const char *k = key ? key : "(null)";
    if (!elems && n)
        return hx_error(HX_ERR_INVALID_ARG, "GGUF writer: key '%s': NULL array of arrays", k);
    bytes b = {0};
    put_u32(&b, HX_GGUF_ARRAY);
    put_u64(&b, n);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t extent = 0;
        hx_status s = view_extent(&elems[i], 2, &extent);
        if (s) {
            free(b.p);
            return hx_error_context(s, "key '%s', element %" PRIu64, k, i);
        }
        put_u32(&b, elems[i].type);
        put_u64(&b, elems[i].n);
        put(&b, elems[i].data, extent);
    }
    return set_encoded(w, key, HX_GGUF_ARRAY, b);
}

hx_status hx_gguf_writer_set_alignment(hx_gguf_writer *w, uint32_t alignment)
{
    if (!w)
        return hx_error(HX_ERR_INVALID_ARG, "GGUF writer: NULL argument");
    if (!is_alignment(alignment))
        return hx_error(HX_ERR_INVALID_ARG, "GGUF writer: alignment %u is not a nonzero power of two",
                        alignment);
    if (alignment == HX_GGUF_DEFAULT_ALIGNMENT)
        return remove_key(w, "general.alignment");
    return hx_gguf_writer_set_u32(w, "general.alignment", alignment);
}

hx_status hx_gguf_writer_copy_kv(hx_gguf_writer *w, const hx_gguf *src)
{
    if (!w || !src)
        return hx_error(HX_ERR_INVALID_ARG, "hx_gguf_writer_copy_kv: NULL argument");
    for (uint64_t i = 0; i < hx_gguf_key_count(src); i++) {
        const void *v;
        uint64_t n;
        hx_status s = hx_gguf_key_value(src, i, &v, &n);
        if (!s)
            s = set_raw(w, hx_gguf_key_name(src, i), hx_gguf_key_type(src, i), v, n);
        if (s)
            return s;
    }
    return HX_OK;
}

hx_status hx_gguf_writer_add_tensor(hx_gguf_writer *w, const char *name, hx_type type, uint32_t n_dims,
                                    const uint64_t *ne, const void *data)
{
    if (!w || !name || !ne || !data)
        return hx_error(HX_ERR_INVALID_ARG, "hx_gguf_writer_add_tensor: NULL argument");
    const hx_type_traits *tr = hx_type_get(type);
    if (!tr)
        return hx_error(HX_ERR_INVALID_ARG, "GGUF writer: tensor '%s': unknown type %d", name, (int)type);
    if (n_dims < 1 || n_dims > HX_GGUF_MAX_DIMS)
        return hx_error(HX_ERR_INVALID_ARG, "GGUF writer: tensor '%s': %u dimensions, must be 1 to %d", name,
                        n_dims, HX_GGUF_MAX_DIMS);
    wtensor t = {.type = type, .n_dims = n_dims, .data = data};
    uint64_t elements = 1;
    for (uint32_t d = 0; d < HX_GGUF_MAX_DIMS; d++) {
        t.ne[d] = d < n_dims ? ne[d] : 1;
        if (!t.ne[d] || t.ne[d] > (uint64_t)INT64_MAX / elements)
            return hx_error(HX_ERR_INVALID_ARG, "GGUF writer: tensor '%s': dimension %u (%" PRIu64
                            ") is zero or overflows the element count", name, d, t.ne[d]);
        elements *= t.ne[d];
    }
    if (t.ne[0] % tr->block_size)
        return hx_error(HX_ERR_INVALID_ARG, "GGUF writer: tensor '%s': row length %" PRIu64
                        " is not a multiple of the %s block size %u", name, t.ne[0], tr->name, tr->block_size);
    if (elements / tr->block_size > SIZE_MAX / tr->type_size)
        return hx_error(HX_ERR_INVALID_ARG, "GGUF writer: tensor '%s' is too large", name);
    t.size = elements / tr->block_size * tr->type_size;
    for (size_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return hx_error(HX_ERR_INVALID_ARG, "GGUF writer: duplicate tensor name '%s'", name);
    if (w->n_t == w->cap_t) {
        size_t c = w->cap_t ? 2 * w->cap_t : 16;
        wtensor *nt = realloc(w->t, c * sizeof *nt);
        if (!nt)
            return hx_error(HX_ERR_NO_MEMORY, "GGUF writer: tensor '%s'", name);
        w->t = nt;
        w->cap_t = c;
    }
    if (!(t.name = strdup(name)))
        return hx_error(HX_ERR_NO_MEMORY, "GGUF writer: tensor '%s'", name);
    w->t[w->n_t++] = t;
    return HX_OK;
}

static uint64_t pad_to(uint64_t x, uint64_t a) { return (a - x % a) % a; }

static int write_zeros(FILE *f, uint64_t n)
{
    static const uint8_t zeros[4096];
    while (n) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        if (fwrite(zeros, 1, k, f) != k)
            return 0;
        n -= k;
    }
    return 1;
}

static uint32_t writer_alignment(const hx_gguf_writer *w)
{
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, "general.alignment") == 0) {
            uint32_t a;
            memcpy(&a, w->kv[i].val.p, 4);
            return a;
        }
    }
    return HX_GGUF_DEFAULT_ALIGNMENT;
}

/* Header, key-values and tensor infos, padded to the data section. */
static hx_status encode_header(const hx_gguf_writer *w, uint32_t align, bytes *b)
{
    put(b, "GGUF", 4);
    put_u32(b, 3);
    put_u64(b, w->n_t);
    put_u64(b, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        put_str(b, w->kv[i].key, strlen(w->kv[i].key));
        put_u32(b, w->kv[i].type);
        put(b, w->kv[i].val.p, w->kv[i].val.len);
    }
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        put_str(b, t->name, strlen(t->name));
        put_u32(b, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++)
            put_u64(b, t->ne[d]);
        put_u32(b, t->type);
        put_u64(b, off);
        if (off > UINT64_MAX - align || t->size > UINT64_MAX - align - off)
            return hx_error(HX_ERR_INVALID_ARG, "GGUF writer: tensor data exceeds 2^64 bytes");
        off += t->size + pad_to(t->size, align);
    }
    static const uint8_t zeros[1];
    for (uint64_t n = pad_to(b->len, align); n; n--)
        put(b, zeros, 1);
    return b->failed ? hx_error(HX_ERR_NO_MEMORY, "GGUF writer: header") : HX_OK;
}

hx_status hx_gguf_writer_write(hx_gguf_writer *w, const char *path)
{
    if (!w || !path)
        return hx_error(HX_ERR_INVALID_ARG, "hx_gguf_writer_write: NULL argument");
    uint32_t align = writer_alignment(w);
    bytes head = {0};
    hx_status s = encode_header(w, align, &head);
    if (s) {
        free(head.p);
        return s;
    }
    /* Written beside the target and renamed over it: a reader never sees a
     * half-written file, and rewriting a file that is mapped (the tensor
     * data may point into it) leaves the mapping intact. */
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    if (!tmp) {
        free(head.p);
        return hx_error(HX_ERR_NO_MEMORY, "hx_gguf_writer_write");
    }
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        int e = errno;
        free(head.p);
        free(tmp);
        return hx_error(HX_ERR_IO, "cannot create '%s': %s", path, strerror(e));
    }
    int ok = fwrite(head.p, 1, head.len, f) == head.len;
    free(head.p);
    for (size_t i = 0; ok && i < w->n_t; i++)
        ok = fwrite(w->t[i].data, 1, w->t[i].size, f) == w->t[i].size &&
             write_zeros(f, pad_to(w->t[i].size, align));
    int e = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        e = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = 0;
        e = errno;
    }
    if (!ok) {
        remove(tmp);
        free(tmp);
        return hx_error(HX_ERR_IO, "cannot write '%s': %s", path, strerror(e));
    }
    free(tmp);
    return HX_OK;
}
