/* Typed access to GGUF metadata: scalars by key, array elements by index.
 * Values were bounds-checked at open, so these only check types and ranges. */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gguf/gguf_internal.h"
#include "runtime/error.h"

/* An integer value of any width and signedness, widened without loss. */
typedef struct {
    int is_signed;
    int64_t s;
    uint64_t u;
} wide_int;

/* 0 if `t` is not an integer type; bools count when `bools` is set. */
static int read_int(const uint8_t *b, hx_gguf_vtype t, int bools, wide_int *v)
{
    v->is_signed = 0;
    v->s = 0;
    v->u = 0;
    switch (t) {
    case HX_GGUF_BOOL:
        if (!bools)
            return 0;
        v->u = b[0] != 0;
        return 1;
    case HX_GGUF_UINT8: v->u = b[0]; return 1;
    case HX_GGUF_INT8: { int8_t x; memcpy(&x, b, 1); v->s = x; break; }
    case HX_GGUF_UINT16: { uint16_t x; memcpy(&x, b, 2); v->u = x; return 1; }
    case HX_GGUF_INT16: { int16_t x; memcpy(&x, b, 2); v->s = x; break; }
    case HX_GGUF_UINT32: { uint32_t x; memcpy(&x, b, 4); v->u = x; return 1; }
    case HX_GGUF_INT32: { int32_t x; memcpy(&x, b, 4); v->s = x; break; }
    case HX_GGUF_UINT64: memcpy(&v->u, b, 8); return 1;
    case HX_GGUF_INT64: memcpy(&v->s, b, 8); break;
    default: return 0;
    }
    v->is_signed = 1;
    return 1;
}

static int fits(const wide_int *v, int64_t lo, uint64_t hi)
{
    if (v->is_signed)
        return v->s >= lo && (v->s < 0 || (uint64_t)v->s <= hi);
    return v->u <= hi;
}

static void show_int(char *buf, size_t cap, const wide_int *v)
{
    if (v->is_signed)
        snprintf(buf, cap, "%" PRId64, v->s);
    else
        snprintf(buf, cap, "%" PRIu64, v->u);
}

/* 0 if `t` is not a float type. */
static int read_float(const uint8_t *b, hx_gguf_vtype t, double *out)
{
    if (t == HX_GGUF_FLOAT32) {
        float f;
        memcpy(&f, b, 4);
        *out = f;
        return 1;
    }
    if (t == HX_GGUF_FLOAT64) {
        memcpy(out, b, 8);
        return 1;
    }
    return 0;
}

static hx_status find(const hx_gguf *g, const char *key, const void *out, const hx_gguf_kv **kv)
{
    if (!g || !key || !out)
        return hx_error(HX_ERR_INVALID_ARG, "GGUF getter: NULL argument");
    int64_t i = hx_gguf_find_key(g, key);
    if (i < 0)
        return hx_error(HX_ERR_NOT_FOUND, "GGUF key '%s' not found", key);
    *kv = &g->kv[i];
    return HX_OK;
}

static hx_status get_int(const hx_gguf *g, const char *key, const void *out, int64_t lo, uint64_t hi,
                         const char *want, wide_int *v)
{
    const hx_gguf_kv *kv = NULL;
    hx_status s = find(g, key, out, &kv);
    if (s)
        return s;
    if (!read_int(g->base + kv->val_off, kv->type, 0, v))
        return hx_error(HX_ERR_FORMAT, "key '%s' at offset %" PRIu64 " holds a %s, not an integer",
                        key, kv->off, hx_gguf_vtype_names[kv->type]);
    if (!fits(v, lo, hi)) {
        char shown[32];
        show_int(shown, sizeof shown, v);
        return hx_error(HX_ERR_FORMAT, "key '%s' at offset %" PRIu64 " holds %s %s, out of range for %s",
                        key, kv->off, hx_gguf_vtype_names[kv->type], shown, want);
    }
    return HX_OK;
}

hx_status hx_gguf_get_u32(const hx_gguf *g, const char *key, uint32_t *out)
{
    wide_int v = {0, 0, 0};
    hx_status s = get_int(g, key, out, 0, UINT32_MAX, "uint32", &v);
    if (!s)
        *out = v.is_signed ? (uint32_t)v.s : (uint32_t)v.u;
    return s;
}

hx_status hx_gguf_get_i32(const hx_gguf *g, const char *key, int32_t *out)
{
    wide_int v = {0, 0, 0};
    hx_status s = get_int(g, key, out, INT32_MIN, INT32_MAX, "int32", &v);
    if (!s)
        *out = v.is_signed ? (int32_t)v.s : (int32_t)v.u;
    return s;
}

hx_status hx_gguf_get_u64(const hx_gguf *g, const char *key, uint64_t *out)
{
    wide_int v = {0, 0, 0};
    hx_status s = get_int(g, key, out, 0, UINT64_MAX, "uint64", &v);
    if (!s)
        *out = v.is_signed ? (uint64_t)v.s : v.u;
    return s;
}

hx_status hx_gguf_get_i64(const hx_gguf *g, const char *key, int64_t *out)
{
    wide_int v = {0, 0, 0};
    hx_status s = get_int(g, key, out, INT64_MIN, INT64_MAX, "int64", &v);
    if (!s)
        *out = v.is_signed ? v.s : (int64_t)v.u;
    return s;
}

static hx_status get_float(const hx_gguf *g, const char *key, const void *out, double *v)
{
    const hx_gguf_kv *kv = NULL;
    hx_status s = find(g, key, out, &kv);
    if (s)
        return s;
    if (!read_float(g->base + kv->val_off, kv->type, v))
        return hx_error(HX_ERR_FORMAT, "key '%s' at offset %" PRIu64 " holds a %s, not a float",
                        key, kv->off, hx_gguf_vtype_names[kv->type]);
    return HX_OK;
}

/* Narrowing rounds, but a finite double beyond float's range is an error
 * rather than a silent infinity. */
static hx_status narrow(double d, float *out, const char *who)
{
    if (isfinite(d) && fabs(d) > FLT_MAX)
        return hx_error(HX_ERR_FORMAT, "%s holds %g, out of range for float32", who, d);
    *out = (float)d;
    return HX_OK;
}

hx_status hx_gguf_get_f32(const hx_gguf *g, const char *key, float *out)
{
    double d = 0;
    hx_status s = get_float(g, key, out, &d);
    if (s)
        return s;
    char who[160];
    snprintf(who, sizeof who, "key '%s' at offset %" PRIu64, key, g->kv[hx_gguf_find_key(g, key)].off);
    return narrow(d, out, who);
}

hx_status hx_gguf_get_f64(const hx_gguf *g, const char *key, double *out)
{
    return get_float(g, key, out, out);
}

hx_status hx_gguf_get_bool(const hx_gguf *g, const char *key, int *out)
{
    const hx_gguf_kv *kv = NULL;
    hx_status s = find(g, key, out, &kv);
    if (s)
        return s;
    if (kv->type != HX_GGUF_BOOL)
        return hx_error(HX_ERR_FORMAT, "key '%s' at offset %" PRIu64 " holds a %s, not a bool", key,
                        kv->off, hx_gguf_vtype_names[kv->type]);
    *out = g->base[kv->val_off] != 0;
    return HX_OK;
}

hx_status hx_gguf_get_str(const hx_gguf *g, const char *key, const char **str, uint64_t *len)
{
    const hx_gguf_kv *kv = NULL;
    hx_status s = find(g, key, len, &kv);
    if (s)
        return s;
    if (!str)
        return hx_error(HX_ERR_INVALID_ARG, "hx_gguf_get_str: NULL argument");
    if (kv->type != HX_GGUF_STRING)
        return hx_error(HX_ERR_FORMAT, "key '%s' at offset %" PRIu64 " holds a %s, not a string", key,
                        kv->off, hx_gguf_vtype_names[kv->type]);
    memcpy(len, g->base + kv->val_off, 8);
    *str = (const char *)g->base + kv->val_off + 8;
    return HX_OK;
}

hx_status hx_gguf_get_arr(const hx_gguf *g, const char *key, hx_gguf_array *out)
{
    const hx_gguf_kv *kv = NULL;
    hx_status s = find(g, key, out, &kv);
    if (s)
        return s;
    if (kv->type != HX_GGUF_ARRAY)
        return hx_error(HX_ERR_FORMAT, "key '%s' at offset %" PRIu64 " holds a %s, not an array", key,
                        kv->off, hx_gguf_vtype_names[kv->type]);
    out->type = kv->etype;
    out->n = kv->n;
    out->data = g->base + kv->data_off;
    out->g = g;
    out->offsets = kv->table == HX_GGUF_NO_TABLE ? NULL : g->table + kv->table;
    return HX_OK;
}

/* Checks an element access; *el points at element i's bytes. */
static hx_status element(const hx_gguf_array *a, uint64_t i, const void *out, const char *want,
                         int ok, const uint8_t **el)
{
    if (!a || !out || (!a->data && a->n))
        return hx_error(HX_ERR_INVALID_ARG, "GGUF array access: NULL argument");
    if ((unsigned)a->type >= HX_GGUF_VTYPE_COUNT)
        return hx_error(HX_ERR_INVALID_ARG, "GGUF array view has invalid type %d", (int)a->type);
    if (i >= a->n)
        return hx_error(HX_ERR_RANGE, "GGUF array index %" PRIu64 " out of range (%" PRIu64 " elements)",
                        i, a->n);
    if (!ok)
        return hx_error(HX_ERR_FORMAT, "GGUF array of %s read as %s", hx_gguf_vtype_names[a->type], want);
    uint8_t size = hx_gguf_vtype_size[a->type];
    if (!size && !a->offsets)
        return hx_error(HX_ERR_INVALID_ARG, "GGUF array view of %ss has no element offsets",
                        hx_gguf_vtype_names[a->type]);
    *el = size ? a->data + i * size : a->data + a->offsets[i];
    return HX_OK;
}

static int is_int(hx_gguf_vtype t)
{
    return t <= HX_GGUF_INT32 || t == HX_GGUF_BOOL || t == HX_GGUF_UINT64 || t == HX_GGUF_INT64;
}

static int is_float(hx_gguf_vtype t) { return t == HX_GGUF_FLOAT32 || t == HX_GGUF_FLOAT64; }

hx_status hx_gguf_arr_i64(const hx_gguf_array *a, uint64_t i, int64_t *out)
{
    const uint8_t *el = NULL;
    hx_status s = element(a, i, out, "integers", a && is_int(a->type), &el);
    if (s)
        return s;
    wide_int v;
    read_int(el, a->type, 1, &v);
    if (!fits(&v, INT64_MIN, INT64_MAX))
        return hx_error(HX_ERR_FORMAT, "GGUF array element %" PRIu64 " holds uint64 %" PRIu64
                        ", out of range for int64", i, v.u);
    *out = v.is_signed ? v.s : (int64_t)v.u;
    return HX_OK;
}

hx_status hx_gguf_arr_u64(const hx_gguf_array *a, uint64_t i, uint64_t *out)
{
    const uint8_t *el = NULL;
    hx_status s = element(a, i, out, "integers", a && is_int(a->type), &el);
    if (s)
        return s;
    wide_int v;
    read_int(el, a->type, 1, &v);
    if (!fits(&v, 0, UINT64_MAX))
        return hx_error(HX_ERR_FORMAT, "GGUF array element %" PRIu64 " holds %s %" PRId64
                        ", out of range for uint64", i, hx_gguf_vtype_names[a->type], v.s);
    *out = v.is_signed ? (uint64_t)v.s : v.u;
    return HX_OK;
}

hx_status hx_gguf_arr_f64(const hx_gguf_array *a, uint64_t i, double *out)
{
    const uint8_t *el = NULL;
    hx_status s = element(a, i, out, "floats", a && is_float(a->type), &el);
    if (!s)
        read_float(el, a->type, out);
    return s;
}

hx_status hx_gguf_arr_f32(const hx_gguf_array *a, uint64_t i, float *out)
{
    double d = 0;
    hx_status s = hx_gguf_arr_f64(a, i, &d);
    if (s)
        return s;
    char who[64];
    snprintf(who, sizeof who, "GGUF array element %" PRIu64, i);
    return narrow(d, out, who);
}

hx_status hx_gguf_arr_str(const hx_gguf_array *a, uint64_t i, const char **str, uint64_t *len)
{
    const uint8_t *el = NULL;
    hx_status s = element(a, i, len, "strings", a && a->type == HX_GGUF_STRING, &el);
    if (s)
        return s;
    if (!str)
        return hx_error(HX_ERR_INVALID_ARG, "hx_gguf_arr_str: NULL argument");
    memcpy(len, el, 8);
    *str = (const char *)el + 8;
    return HX_OK;
}

hx_status hx_gguf_arr_arr(const hx_gguf_array *a, uint64_t i, hx_gguf_array *out)
{
    const uint8_t *el = NULL;
    hx_status s = element(a, i, out, "arrays", a && a->type == HX_GGUF_ARRAY, &el);
    if (s)
        return s;
    if (!a->g)
        return hx_error(HX_ERR_INVALID_ARG, "GGUF array view of arrays does not come from a reader");
    uint32_t et;
    memcpy(&et, el, 4);
    out->type = (hx_gguf_vtype)et;
    memcpy(&out->n, el + 4, 8);
    out->data = el + 12;
    out->g = a->g;
    uint64_t table = a->offsets[a->n + i];
    out->offsets = table == HX_GGUF_NO_TABLE ? NULL : a->g->table + table;
    return HX_OK;
}
