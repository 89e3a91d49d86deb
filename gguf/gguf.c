/* GGUF reader: the whole header is parsed and checked at open time, so the
 * accessors afterwards are lookups that cannot run off the mapping.
 *
 * Every read is preceded by a check against the bytes left in the file, and
 * every allocation grows with what was actually parsed (each parsed item
 * occupies at least a few bytes of the file), so a lying count fails when
 * the file runs out instead of reserving memory for it. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf_internal.h"
#include "runtime/error.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader reads little-endian values with memcpy"
#endif

#define HEADER_SIZE 24u
/* Smallest encodings, used to reject counts the file cannot hold:
 * a key-value is a key length, a type and at least one value byte; a
 * tensor info is a name length, n_dims, one dimension, a type, an offset. */
#define MIN_KV_SIZE 13u
#define MIN_TENSOR_SIZE 32u
#define MIN_STRING_SIZE 8u
#define MIN_ARRAY_SIZE 12u
#define U64 PRIu64

const char *const hx_gguf_vtype_names[HX_GGUF_VTYPE_COUNT] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
    "bool", "string", "array", "uint64", "int64", "float64",
};
const uint8_t hx_gguf_vtype_size[HX_GGUF_VTYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

typedef struct {
    hx_gguf *g;
    uint64_t pos;
    char what[128]; /* "key 'name'" or "tensor #3": who a message is about */
} parser;

const char *hx_gguf_show(char *buf, size_t cap, const uint8_t *s, uint64_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (uint64_t i = 0; i < len; i++) {
        if (o + 8 >= cap) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        uint8_t c = s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
            buf[o++] = (char)c;
        } else {
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[c >> 4];
            buf[o++] = hex[c & 15];
        }
    }
    buf[o] = '\0';
    return buf;
}

static uint64_t left(const parser *p) { return p->g->size - p->pos; }

static hx_status need(parser *p, uint64_t n, const char *field)
{
    if (n <= left(p))
        return HX_OK;
    return hx_error(HX_ERR_FORMAT, "%s at offset %" U64 ": file ends inside the %s (%" U64
                    " bytes needed, %" U64 " left)", p->what, p->pos, field, n, left(p));
}

static uint32_t take_u32(parser *p)
{
    uint32_t v;
    memcpy(&v, p->g->base + p->pos, 4);
    p->pos += 4;
    return v;
}

static uint64_t take_u64(parser *p)
{
    uint64_t v;
    memcpy(&v, p->g->base + p->pos, 8);
    p->pos += 8;
    return v;
}

/* Grows *buf to hold `want` items of `item` bytes, doubling. */
static hx_status reserve(void **buf, size_t *cap, size_t want, size_t item)
{
    if (want <= *cap)
        return HX_OK;
    size_t c = *cap ? *cap : 16;
    while (c < want)
        c = c > SIZE_MAX / 2 ? want : c * 2;
    if (c > SIZE_MAX / item)
        return hx_error(HX_ERR_NO_MEMORY, "GGUF index of %zu items is too large", want);
    void *nb = realloc(*buf, c * item);
    if (!nb)
        return hx_error(HX_ERR_NO_MEMORY, "GGUF index of %zu items", c);
    *buf = nb;
    *cap = c;
    return HX_OK;
}

/* A length-prefixed string: its bytes start at *at, *len long. */
static hx_status take_string(parser *p, const char *field, uint64_t *at, uint64_t *len)
{
    hx_status s = need(p, 8, field);
    if (s)
        return s;
    uint64_t start = p->pos;
    uint64_t n = take_u64(p);
    if (n > left(p))
        return hx_error(HX_ERR_FORMAT, "%s at offset %" U64 ": %s %" U64
                        " runs past end of file (%" U64 " bytes left)", p->what, start, field, n, left(p));
    *at = p->pos;
    *len = n;
    p->pos += n;
    return HX_OK;
}

/* Copies a key or tensor name into the pool; names hold no NUL so that
 * callers can treat them as C strings without losing distinctions. */
static hx_status take_name(parser *p, const char *kind, const char *field, uint64_t *pool_at)
{
    uint64_t at = 0, len = 0;
    uint64_t start = p->pos;
    hx_status s = take_string(p, field, &at, &len);
    if (s)
        return s;
    const uint8_t *bytes = p->g->base + at;
    char shown[96];
    hx_gguf_show(shown, sizeof shown, bytes, len);
    if (memchr(bytes, 0, len))
        return hx_error(HX_ERR_FORMAT, "%s at offset %" U64 ": name '%s' contains a NUL byte",
                        p->what, start, shown);
    hx_gguf *g = p->g;
    s = reserve((void **)&g->names, &g->names_cap, g->names_len + len + 1, 1);
    if (s)
        return s;
    memcpy(g->names + g->names_len, bytes, len);
    g->names[g->names_len + len] = '\0';
    *pool_at = g->names_len;
    g->names_len += len + 1;
    snprintf(p->what, sizeof p->what, "%s '%s'", kind, shown);
    return HX_OK;
}

typedef struct {
    hx_gguf_vtype etype;
    uint64_t n;
    uint64_t data_off;
    uint64_t table;
} array_info;

static hx_status take_array(parser *p, int depth, array_info *a);

/* Skips one value of type t; arrays fill *a. */
static hx_status take_value(parser *p, hx_gguf_vtype t, int depth, array_info *a)
{
    if (t == HX_GGUF_STRING) {
        uint64_t at = 0, len = 0;
        return take_string(p, "string length", &at, &len);
    }
    if (t == HX_GGUF_ARRAY)
        return take_array(p, depth + 1, a);
    hx_status s = need(p, hx_gguf_vtype_size[t], hx_gguf_vtype_names[t]);
    if (!s)
        p->pos += hx_gguf_vtype_size[t];
    return s;
}

static hx_status take_array(parser *p, int depth, array_info *a)
{
    hx_gguf *g = p->g;
    uint64_t start = p->pos;
    if (depth > HX_GGUF_MAX_DEPTH)
        return hx_error(HX_ERR_FORMAT, "%s at offset %" U64 ": arrays nested deeper than %d levels",
                        p->what, start, HX_GGUF_MAX_DEPTH);
    hx_status s = need(p, 12, "array header");
    if (s)
        return s;
    uint32_t et = take_u32(p);
    uint64_t n = take_u64(p);
    if (et >= HX_GGUF_VTYPE_COUNT)
        return hx_error(HX_ERR_FORMAT, "%s at offset %" U64 ": unknown array element type %u",
                        p->what, start, et);
    a->etype = (hx_gguf_vtype)et;
    a->n = n;
    a->data_off = p->pos;
    a->table = HX_GGUF_NO_TABLE;
    uint64_t size = hx_gguf_vtype_size[et];
    if (size) {
        if (n > left(p) / size)
            return hx_error(HX_ERR_FORMAT, "%s at offset %" U64 ": array of %" U64 " %s needs %" U64
                            " bytes per element, only %" U64 " bytes left", p->what, start, n,
                            hx_gguf_vtype_names[et], size, left(p));
        p->pos += n * size;
        return HX_OK;
    }
    uint64_t min = et == HX_GGUF_STRING ? MIN_STRING_SIZE : MIN_ARRAY_SIZE;
    if (n > left(p) / min)
        return hx_error(HX_ERR_FORMAT, "%s at offset %" U64 ": array of %" U64 " %ss needs at least %" U64
                        " bytes per element, only %" U64 " bytes left", p->what, start, n,
                        hx_gguf_vtype_names[et], min, left(p));
    uint64_t slots = et == HX_GGUF_ARRAY ? 2 * n : n;
    /* At least one entry, so that an empty table is a real pointer. */
    s = reserve((void **)&g->table, &g->table_cap, g->table_len + (slots ? slots : 1), sizeof *g->table);
    if (s)
        return s;
    uint64_t base = g->table_len;
    g->table_len += slots;
    a->table = base;
    for (uint64_t i = 0; i < n; i++) {
        /* The table may move while children are parsed: index, don't hold. */
        g->table[base + i] = p->pos - a->data_off;
        array_info child;
        s = take_value(p, (hx_gguf_vtype)et, depth, &child);
        if (s)
            return s;
        if (et == HX_GGUF_ARRAY)
            g->table[base + n + i] = child.table;
    }
    return HX_OK;
}

static hx_status take_kv(parser *p, uint64_t i, hx_gguf_kv *kv)
{
    snprintf(p->what, sizeof p->what, "key #%" U64, i);
    kv->off = p->pos;
    hx_status s = take_name(p, "key", "key length", &kv->name_at);
    if (s)
        return s;
    if ((s = need(p, 4, "value type")))
        return s;
    uint64_t type_at = p->pos;
    uint32_t t = take_u32(p);
    if (t >= HX_GGUF_VTYPE_COUNT)
        return hx_error(HX_ERR_FORMAT, "%s at offset %" U64 ": unknown value type %u", p->what, type_at, t);
    kv->type = (hx_gguf_vtype)t;
    kv->val_off = p->pos;
    array_info a = {HX_GGUF_UINT8, 0, 0, HX_GGUF_NO_TABLE};
    if ((s = take_value(p, kv->type, 0, &a)))
        return s;
    kv->val_size = p->pos - kv->val_off;
    kv->etype = a.etype;
    kv->n = a.n;
    kv->data_off = a.data_off;
    kv->table = a.table;
    return HX_OK;
}

static hx_status take_tensor(parser *p, uint64_t i)
{
    hx_gguf *g = p->g;
    hx_gguf_tensor *t = &g->tensors[i];
    memset(t, 0, sizeof *t);
    snprintf(p->what, sizeof p->what, "tensor #%" U64, i);
    g->tensor_rec[i] = p->pos;
    hx_status s = take_name(p, "tensor", "name length", &g->tensor_name_at[i]);
    if (s)
        return s;
    if ((s = need(p, 4, "number of dimensions")))
        return s;
    uint64_t at = p->pos;
    t->n_dims = take_u32(p);
    if (t->n_dims < 1 || t->n_dims > HX_GGUF_MAX_DIMS)
        return hx_error(HX_ERR_FORMAT, "%s at offset %" U64 ": %u dimensions, must be 1 to %d",
                        p->what, at, t->n_dims, HX_GGUF_MAX_DIMS);
    if ((s = need(p, 8ull * t->n_dims, "dimensions")))
        return s;
    uint64_t elements = 1;
    for (uint32_t d = 0; d < HX_GGUF_MAX_DIMS; d++) {
        at = p->pos;
        t->ne[d] = d < t->n_dims ? take_u64(p) : 1;
        if (t->ne[d] == 0)
            return hx_error(HX_ERR_FORMAT, "%s at offset %" U64 ": dimension %u is 0", p->what, at, d);
        if (t->ne[d] > (uint64_t)INT64_MAX / elements)
            return hx_error(HX_ERR_FORMAT, "%s at offset %" U64 ": element count overflows at dimension %u"
                            " (ne[%u] = %" U64 ")", p->what, at, d, d, t->ne[d]);
        elements *= t->ne[d];
    }
    if ((s = need(p, 4, "tensor type")))
        return s;
    at = p->pos;
    uint32_t type = take_u32(p);
    const hx_type_traits *tr = hx_type_get(type);
    if (!tr)
        return hx_error(HX_ERR_FORMAT, "%s at offset %" U64 ": unknown tensor type %u", p->what, at, type);
    t->type = (hx_type)type;
    if (t->ne[0] % tr->block_size)
        return hx_error(HX_ERR_FORMAT, "%s at offset %" U64 ": row length %" U64
                        " is not a multiple of the %s block size %u", p->what, at, t->ne[0], tr->name,
                        tr->block_size);
    uint64_t blocks = elements / tr->block_size;
    if (blocks > UINT64_MAX / tr->type_size)
        return hx_error(HX_ERR_FORMAT, "%s at offset %" U64 ": byte size of %" U64 " %s elements overflows",
                        p->what, at, elements, tr->name);
    t->size = blocks * tr->type_size;
    if ((s = need(p, 8, "data offset")))
        return s;
    t->offset = take_u64(p);
    return HX_OK;
}

static int by_name(const void *a, const void *b)
{
    const hx_gguf_name_ref *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

/* Sorted by name; a repeated name is an error naming both places. */
static hx_status sort_names(hx_gguf_name_ref **out, uint64_t n, const char *(*name)(const hx_gguf *, uint64_t),
                            const hx_gguf *g, const char *kind, const uint64_t *rec)
{
    hx_gguf_name_ref *r = malloc((n ? n : 1) * sizeof *r);
    if (!r)
        return hx_error(HX_ERR_NO_MEMORY, "GGUF %s index", kind);
    for (uint64_t i = 0; i < n; i++)
        r[i] = (hx_gguf_name_ref){name(g, i), i};
    qsort(r, n, sizeof *r, by_name);
    *out = r;
    for (uint64_t i = 1; i < n; i++) {
        if (strcmp(r[i - 1].name, r[i].name) == 0) {
            char shown[96];
            hx_gguf_show(shown, sizeof shown, (const uint8_t *)r[i].name, strlen(r[i].name));
            return hx_error(HX_ERR_FORMAT, "%s '%s' at offset %" U64 ": duplicate %s name (first at offset %" U64 ")",
                            kind, shown, rec[r[i].idx], kind, rec[r[i - 1].idx]);
        }
    }
    return HX_OK;
}

static const char *kv_name(const hx_gguf *g, uint64_t i) { return g->kv[i].name; }
static const char *tensor_name(const hx_gguf *g, uint64_t i) { return g->tensors[i].name; }

static hx_status check_alignment(hx_gguf *g)
{
    g->alignment = HX_GGUF_DEFAULT_ALIGNMENT;
    int64_t i = hx_gguf_find_key(g, "general.alignment");
    if (i < 0)
        return HX_OK;
    const hx_gguf_kv *kv = &g->kv[i];
    if (kv->type != HX_GGUF_UINT32)
        return hx_error(HX_ERR_FORMAT, "key 'general.alignment' at offset %" U64 ": type %s, must be uint32",
                        kv->val_off - 4, hx_gguf_vtype_names[kv->type]);
    uint32_t a;
    memcpy(&a, g->base + kv->val_off, 4);
    if (a == 0 || (a & (a - 1)))
        return hx_error(HX_ERR_FORMAT, "key 'general.alignment' at offset %" U64
                        ": alignment %u is not a nonzero power of two", kv->val_off, a);
    g->alignment = a;
    return HX_OK;
}

static int by_offset(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return (x[1] > y[1]) - (x[1] < y[1]);
}

/* Offsets from the tensor records: aligned, inside the file, disjoint. */
static hx_status place_tensors(hx_gguf *g)
{
    uint64_t n = g->n_tensors;
    for (uint64_t i = 0; i < n; i++) {
        hx_gguf_tensor *t = &g->tensors[i];
        char shown[96];
        hx_gguf_show(shown, sizeof shown, (const uint8_t *)t->name, strlen(t->name));
        uint64_t at = g->tensor_rec[i];
        if (t->offset % g->alignment)
            return hx_error(HX_ERR_FORMAT, "tensor '%s' at offset %" U64 ": data offset %" U64
                            " is not a multiple of the alignment %" U64, shown, at, t->offset, g->alignment);
        uint64_t room = g->size - g->data_offset;
        if (t->offset > room)
            return hx_error(HX_ERR_FORMAT, "tensor '%s' at offset %" U64 ": data offset %" U64
                            " starts past end of file (data section at %" U64 ", size %zu)", shown, at,
                            t->offset, g->data_offset, g->size);
        uint64_t begin = g->data_offset + t->offset;
        if (t->size > room - t->offset) {
            if (t->size > UINT64_MAX - begin)
                return hx_error(HX_ERR_FORMAT, "tensor '%s' at offset %" U64 ": data of %" U64
                                " bytes at %" U64 " runs past end of file (size %zu)", shown, at, t->size, begin, g->size);
            return hx_error(HX_ERR_FORMAT, "tensor '%s' at offset %" U64 ": data [%" U64 ", %" U64
                            ") runs past end of file (size %zu)", shown, at, begin, begin + t->size, g->size);
        }
        t->data = g->base + begin;
    }
    if (n < 2)
        return HX_OK;
    uint64_t (*order)[2] = malloc(n * sizeof *order);
    if (!order)
        return hx_error(HX_ERR_NO_MEMORY, "GGUF tensor order");
    for (uint64_t i = 0; i < n; i++) {
        order[i][0] = g->tensors[i].offset;
        order[i][1] = i;
    }
    qsort(order, n, sizeof *order, by_offset);
    hx_status s = HX_OK;
    for (uint64_t k = 1; k < n && !s; k++) {
        const hx_gguf_tensor *a = &g->tensors[order[k - 1][1]], *b = &g->tensors[order[k][1]];
        if (b->offset < a->offset + a->size) {
            char sa[96], sb[96];
            hx_gguf_show(sa, sizeof sa, (const uint8_t *)a->name, strlen(a->name));
            hx_gguf_show(sb, sizeof sb, (const uint8_t *)b->name, strlen(b->name));
            s = hx_error(HX_ERR_FORMAT, "tensor '%s' at offset %" U64 ": data [%" U64 ", %" U64
                         ") overlaps tensor '%s' data [%" U64 ", %" U64 ")", sb, g->tensor_rec[order[k][1]],
                         g->data_offset + b->offset, g->data_offset + b->offset + b->size, sa,
                         g->data_offset + a->offset, g->data_offset + a->offset + a->size);
        }
    }
    free(order);
    return s;
}

static hx_status check_header(parser *p, uint64_t *n_tensors, uint64_t *n_kv)
{
    hx_gguf *g = p->g;
    snprintf(p->what, sizeof p->what, "header");
    if (g->size < 4 || memcmp(g->base, "GGUF", 4) != 0) {
        char shown[40];
        hx_gguf_show(shown, sizeof shown, g->base, g->size < 4 ? g->size : 4);
        return hx_error(HX_ERR_FORMAT, "not a GGUF file: magic at offset 0 is '%s', expected 'GGUF'", shown);
    }
    p->pos = 4;
    hx_status s = need(p, 4, "version");
    if (s)
        return s;
    uint32_t v = take_u32(p);
    uint32_t swapped = __builtin_bswap32(v);
    if (v == 1)
        return hx_error(HX_ERR_UNSUPPORTED, "GGUF version 1 at offset 4 is not supported (only versions 2"
                        " and 3); convert the file again with a current llama.cpp");
    if ((v & 0xffff) == 0 && swapped >= 1 && swapped <= 3)
        return hx_error(HX_ERR_UNSUPPORTED, "big-endian GGUF file (version %u byte-swapped at offset 4);"
                        " only little-endian files are supported", swapped);
    if (v != 2 && v != 3)
        return hx_error(HX_ERR_UNSUPPORTED, "GGUF version %u at offset 4 is not supported (only versions 2 and 3)", v);
    g->version = v;
    if ((s = need(p, 16, "tensor and key-value counts")))
        return s;
    *n_tensors = take_u64(p);
    *n_kv = take_u64(p);
    if (*n_kv > left(p) / MIN_KV_SIZE)
        return hx_error(HX_ERR_FORMAT, "header at offset 16: key-value count %" U64 " cannot fit in the %" U64
                        " bytes left (each takes at least %u)", *n_kv, left(p), MIN_KV_SIZE);
    return HX_OK;
}

static hx_status parse(hx_gguf *g)
{
    parser p = {.g = g, .pos = 0};
    uint64_t n_tensors = 0, n_kv = 0;
    hx_status s = check_header(&p, &n_tensors, &n_kv);
    if (s)
        return s;
    size_t cap = 0;
    for (uint64_t i = 0; i < n_kv; i++) {
        if ((s = reserve((void **)&g->kv, &cap, i + 1, sizeof *g->kv)))
            return s;
        g->n_kv = i + 1;
        if ((s = take_kv(&p, i, &g->kv[i])))
            return s;
    }
    /* Checked only here so that a file cut inside its key-values reports
     * where, rather than that its tensor count cannot fit. */
    if (n_tensors > left(&p) / MIN_TENSOR_SIZE)
        return hx_error(HX_ERR_FORMAT, "header at offset 8: tensor count %" U64 " cannot fit in the %" U64
                        " bytes left after the key-values at offset %" U64 " (each takes at least %u)",
                        n_tensors, left(&p), p.pos, MIN_TENSOR_SIZE);
    size_t caps[3] = {0, 0, 0};
    for (uint64_t i = 0; i < n_tensors; i++) {
        if ((s = reserve((void **)&g->tensors, &caps[0], i + 1, sizeof *g->tensors)) ||
            (s = reserve((void **)&g->tensor_rec, &caps[1], i + 1, sizeof *g->tensor_rec)) ||
            (s = reserve((void **)&g->tensor_name_at, &caps[2], i + 1, sizeof *g->tensor_name_at)))
            return s;
        g->n_tensors = i + 1;
        if ((s = take_tensor(&p, i)))
            return s;
    }
    /* Names are pointers only now that the pool has stopped moving. */
    for (uint64_t i = 0; i < g->n_kv; i++)
        g->kv[i].name = g->names + g->kv[i].name_at;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        g->tensors[i].name = g->names + g->tensor_name_at[i];
    uint64_t *kv_rec = malloc((g->n_kv ? g->n_kv : 1) * sizeof *kv_rec);
    if (!kv_rec)
        return hx_error(HX_ERR_NO_MEMORY, "GGUF key index");
    for (uint64_t i = 0; i < g->n_kv; i++)
        kv_rec[i] = g->kv[i].off;
    s = sort_names(&g->kv_by_name, g->n_kv, kv_name, g, "key", kv_rec);
    free(kv_rec);
    if (s || (s = sort_names(&g->tensors_by_name, g->n_tensors, tensor_name, g, "tensor", g->tensor_rec)))
        return s;
    if ((s = check_alignment(g)))
        return s;
    g->data_offset = p.pos + (g->alignment - p.pos % g->alignment) % g->alignment;
    /* Files without tensors may end before the padding (writers differ). */
    if (g->n_tensors && g->data_offset > g->size)
        return hx_error(HX_ERR_FORMAT, "file ends at offset %zu inside the alignment padding before the data"
                        " section at offset %" U64 " (alignment %" U64 ")", g->size, g->data_offset, g->alignment);
    return place_tensors(g);
}

void hx_gguf_close(hx_gguf *g)
{
    if (!g)
        return;
    if (g->mapped && g->size)
        munmap((void *)g->base, g->size);
    free(g->kv);
    free(g->kv_by_name);
    free(g->tensors);
    free(g->tensor_rec);
    free(g->tensor_name_at);
    free(g->tensors_by_name);
    free(g->names);
    free(g->table);
    free(g);
}

static hx_status open_bytes(const void *data, size_t size, int mapped, hx_gguf **out)
{
    hx_gguf *g = calloc(1, sizeof *g);
    if (!g) {
        if (mapped)
            munmap((void *)data, size);
        return hx_error(HX_ERR_NO_MEMORY, "GGUF reader");
    }
    g->base = data;
    g->size = size;
    g->mapped = mapped;
    hx_status s = parse(g);
    if (s) {
        hx_gguf_close(g);
        return s;
    }
    *out = g;
    return HX_OK;
}

hx_status hx_gguf_open_memory(const void *data, size_t size, hx_gguf **out)
{
    if (!out || (!data && size))
        return hx_error(HX_ERR_INVALID_ARG, "hx_gguf_open_memory: NULL argument");
    *out = NULL;
    static const uint8_t empty[1];
    return open_bytes(data ? data : empty, size, 0, out);
}

hx_status hx_gguf_open(const char *path, hx_gguf **out)
{
    if (!path || !out)
        return hx_error(HX_ERR_INVALID_ARG, "hx_gguf_open: NULL argument");
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return hx_error(HX_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return hx_error(HX_ERR_IO, "cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return hx_error(HX_ERR_IO, "'%s' is not a regular file", path);
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return hx_error(HX_ERR_IO, "'%s' is too large to map", path);
    }
    size_t size = (size_t)st.st_size;
    const void *data = NULL;
    static const uint8_t empty[1];
    if (size) {
        data = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
        if (data == MAP_FAILED) {
            int e = errno;
            close(fd);
            return hx_error(HX_ERR_IO, "cannot map '%s' (%zu bytes): %s", path, size, strerror(e));
        }
    }
    close(fd);
    hx_status s = open_bytes(size ? data : empty, size, size != 0, out);
    if (s)
        return hx_error_context(s, "%s", path);
    return HX_OK;
}

uint32_t hx_gguf_version(const hx_gguf *g) { return g ? g->version : 0; }
uint64_t hx_gguf_alignment(const hx_gguf *g) { return g ? g->alignment : 0; }
uint64_t hx_gguf_data_offset(const hx_gguf *g) { return g ? g->data_offset : 0; }

const void *hx_gguf_data(const hx_gguf *g, size_t *size)
{
    if (size)
        *size = g ? g->size : 0;
    return g ? g->base : NULL;
}

void hx_gguf_release_pages(const hx_gguf *g, const void *p, size_t size)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)p, b = a + size;
    const uintptr_t lo = (a + page - 1) / page * page, hi = b / page * page;
    if (!g || !g->mapped || a < (uintptr_t)g->base || b > (uintptr_t)g->base + g->size || hi <= lo)
        return;
    madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

static int cmp_ref(const void *key, const void *elem)
{
    return strcmp((const char *)key, ((const hx_gguf_name_ref *)elem)->name);
}

/* Names are unique (checked at open), so the first match is the match. */
static int64_t find_name(const hx_gguf_name_ref *refs, uint64_t n, const char *name)
{
    if (!refs || !name || !n)
        return -1;
    const hx_gguf_name_ref *r = bsearch(name, refs, n, sizeof *refs, cmp_ref);
    return r ? (int64_t)r->idx : -1;
}

int64_t hx_gguf_find_key(const hx_gguf *g, const char *key)
{
    return g ? find_name(g->kv_by_name, g->n_kv, key) : -1;
}

uint64_t hx_gguf_key_count(const hx_gguf *g) { return g ? g->n_kv : 0; }

const char *hx_gguf_key_name(const hx_gguf *g, uint64_t i)
{
    return g && i < g->n_kv ? g->kv[i].name : NULL;
}

hx_gguf_vtype hx_gguf_key_type(const hx_gguf *g, uint64_t i)
{
    return g && i < g->n_kv ? g->kv[i].type : HX_GGUF_VTYPE_COUNT;
}

hx_status hx_gguf_key_value(const hx_gguf *g, uint64_t i, const void **bytes, uint64_t *size)
{
    if (!g || !bytes || !size)
        return hx_error(HX_ERR_INVALID_ARG, "hx_gguf_key_value: NULL argument");
    if (i >= g->n_kv)
        return hx_error(HX_ERR_RANGE, "key index %" U64 " out of range (%" U64 " keys)", i, g->n_kv);
    *bytes = g->base + g->kv[i].val_off;
    *size = g->kv[i].val_size;
    return HX_OK;
}

uint64_t hx_gguf_tensor_count(const hx_gguf *g) { return g ? g->n_tensors : 0; }

const hx_gguf_tensor *hx_gguf_tensor_at(const hx_gguf *g, uint64_t i)
{
    return g && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const hx_gguf_tensor *hx_gguf_find_tensor(const hx_gguf *g, const char *name)
{
    if (!g)
        return NULL;
    int64_t i = find_name(g->tensors_by_name, g->n_tensors, name);
    return i < 0 ? NULL : &g->tensors[i];
}
