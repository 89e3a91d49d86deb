/* libFuzzer target for the GGUF reader: parse arbitrary bytes and, when
 * they are accepted, walk every key, array element and tensor byte through
 * the public accessors so that any view the reader hands out that points
 * outside the input is caught by AddressSanitizer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"

static volatile uint64_t sink;

static void touch(const void *p, uint64_t n)
{
    const uint8_t *b = p;
    uint64_t h = 0;
    for (uint64_t i = 0; i < n; i++)
        h = h * 31 + b[i];
    sink += h;
}

static void walk_array(const hx_gguf_array *a)
{
    for (uint64_t i = 0; i < a->n; i++) {
        int64_t iv;
        uint64_t uv;
        float f;
        double d;
        const char *s;
        hx_gguf_array sub;
        switch (a->type) {
        case HX_GGUF_STRING:
            if (hx_gguf_arr_str(a, i, &s, &uv) == HX_OK)
                touch(s, uv);
            else
                abort();
            break;
        case HX_GGUF_ARRAY:
            if (hx_gguf_arr_arr(a, i, &sub) != HX_OK)
                abort();
            walk_array(&sub);
            break;
        case HX_GGUF_FLOAT32:
        case HX_GGUF_FLOAT64:
            if (hx_gguf_arr_f64(a, i, &d) != HX_OK)
                abort();
            hx_gguf_arr_f32(a, i, &f); /* may refuse a double out of float range */
            sink += (uint64_t)(d == d);
            break;
        default:
            /* Integers and bools: one of the two always fits. */
            if (hx_gguf_arr_i64(a, i, &iv) != HX_OK && hx_gguf_arr_u64(a, i, &uv) != HX_OK)
                abort();
            sink += (uint64_t)iv;
            break;
        }
    }
    int64_t iv;
    if (hx_gguf_arr_i64(a, a->n, &iv) != HX_ERR_RANGE)
        abort();
}

static void walk_key(const hx_gguf *g, uint64_t i)
{
    const char *key = hx_gguf_key_name(g, i);
    if (!key || hx_gguf_find_key(g, key) != (int64_t)i)
        abort();
    const void *raw;
    uint64_t n;
    if (hx_gguf_key_value(g, i, &raw, &n) != HX_OK)
        abort();
    touch(raw, n);
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    int64_t i64;
    float f;
    double d;
    int b;
    const char *s;
    hx_gguf_array a;
    /* Every getter on every key: each either succeeds or refuses cleanly. */
    hx_gguf_get_u32(g, key, &u32);
    hx_gguf_get_i32(g, key, &i32);
    hx_gguf_get_u64(g, key, &u64);
    hx_gguf_get_i64(g, key, &i64);
    hx_gguf_get_f32(g, key, &f);
    hx_gguf_get_f64(g, key, &d);
    hx_gguf_get_bool(g, key, &b);
    if (hx_gguf_get_str(g, key, &s, &u64) == HX_OK)
        touch(s, u64);
    if (hx_gguf_get_arr(g, key, &a) == HX_OK)
        walk_array(&a);
    else if (hx_gguf_key_type(g, i) == HX_GGUF_ARRAY)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exactly-sized copy: libFuzzer's buffer may have slack after it. */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    hx_gguf *g = NULL;
    if (hx_gguf_open_memory(copy, size, &g) == HX_OK) {
        for (uint64_t i = 0; i < hx_gguf_key_count(g); i++)
            walk_key(g, i);
        for (uint64_t i = 0; i < hx_gguf_tensor_count(g); i++) {
            const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
            if (!t || hx_gguf_find_tensor(g, t->name) != t)
                abort();
            touch(t->data, t->size);
            touch(t->name, strlen(t->name) + 1);
        }
    }
    hx_gguf_close(g);
    free(copy);
    return 0;
}
