/* GGUF reader and writer: round trips of every value type, the typed
 * getters, alignment, the broken-file corpus, every truncation of a valid
 * file, llama.cpp's own reader (the gguf package) on files written here,
 * and the real vocabulary files. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "runtime/error.h"
#include "tests/hx_test.h"

#define CORPUS_DIR "tests/gguf-corpus"
#define READBACK "tests/gguf_readback.py"
#define PIP_HINT "pip install -r tests/requirements.txt"

static const char *const vtype_name[HX_GGUF_VTYPE_COUNT] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
    "bool", "string", "array", "uint64", "int64", "float64",
};
static const size_t vtype_size[HX_GGUF_VTYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

/* ---- small helpers ------------------------------------------------------ */

/* Like HX_ASSERT_OK, for hot loops: Check records every passing assertion,
 * which costs a write each; this only calls into Check on failure. */
#define MUST(call)                                                                     \
    do {                                                                               \
        hx_status must_s_ = (call);                                                    \
        if (must_s_ != HX_OK)                                                          \
            ck_abort_msg("%s -> %s: %s", #call, hx_status_str(must_s_), hx_last_error()); \
    } while (0)

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static float rnd_float(void) { return (float)((double)(rnd() >> 11) / 9007199254740992.0 * 2000.0 - 1000.0); }

static void tmp_path(char *buf, size_t cap, const char *tag)
{
    const char *dir = getenv("TMPDIR");
    snprintf(buf, cap, "%s/hx-gguf-%s-XXXXXX", dir && *dir ? dir : "/tmp", tag);
    int fd = mkstemp(buf);
    ck_assert_msg(fd >= 0, "mkstemp %s: %s", buf, strerror(errno));
    close(fd);
}

static uint8_t *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    /* Exactly n bytes (at least 1 for malloc), so ASan sees any over-read. */
    uint8_t *p = malloc(n ? (size_t)n : 1);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(fread(p, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *size = (size_t)n;
    return p;
}

typedef struct {
    char *p;
    size_t len, cap;
} sbuf;

static void sb_add(sbuf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->len;
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            ck_abort_msg("vsnprintf failed");
        if (b->p && (size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        b->cap = (b->cap + (size_t)n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        if (!b->p)
            ck_abort_msg("out of memory");
    }
}

/* The escaping tests/gguf_readback.py uses. */
static void sb_escape(sbuf *b, const uint8_t *s, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        if (s[i] >= 0x21 && s[i] <= 0x7e && s[i] != '"' && s[i] != '\\')
            sb_add(b, "%c", s[i]);
        else
            sb_add(b, "\\x%02x", s[i]);
    }
}

/* ---- the canonical dump (same format as tests/gguf_readback.py) --------- */

static void dump_array(sbuf *b, const hx_gguf_array *a);

static void dump_element(sbuf *b, const hx_gguf_array *a, uint64_t i)
{
    hx_gguf_vtype t = a->type;
    int64_t iv;
    uint64_t uv;
    double dv;
    float fv;
    const char *s;
    hx_gguf_array sub;
    switch (t) {
    case HX_GGUF_INT8: case HX_GGUF_INT16: case HX_GGUF_INT32: case HX_GGUF_INT64:
        MUST(hx_gguf_arr_i64(a, i, &iv));
        sb_add(b, "%s:%" PRId64, vtype_name[t], iv);
        break;
    case HX_GGUF_UINT8: case HX_GGUF_UINT16: case HX_GGUF_UINT32: case HX_GGUF_UINT64:
        MUST(hx_gguf_arr_u64(a, i, &uv));
        sb_add(b, "%s:%" PRIu64, vtype_name[t], uv);
        break;
    case HX_GGUF_BOOL:
        MUST(hx_gguf_arr_i64(a, i, &iv));
        sb_add(b, "bool:%d", iv != 0);
        break;
    case HX_GGUF_FLOAT32: {
        uint32_t bits;
        MUST(hx_gguf_arr_f32(a, i, &fv));
        memcpy(&bits, &fv, 4);
        sb_add(b, "float32:0x%08" PRIx32, bits);
        break;
    }
    case HX_GGUF_FLOAT64:
        MUST(hx_gguf_arr_f64(a, i, &dv));
        memcpy(&uv, &dv, 8);
        sb_add(b, "float64:0x%016" PRIx64, uv);
        break;
    case HX_GGUF_STRING:
        MUST(hx_gguf_arr_str(a, i, &s, &uv));
        sb_add(b, "string:\"");
        sb_escape(b, (const uint8_t *)s, uv);
        sb_add(b, "\"");
        break;
    case HX_GGUF_ARRAY:
        MUST(hx_gguf_arr_arr(a, i, &sub));
        dump_array(b, &sub);
        break;
    default:
        ck_abort_msg("bad element type %d", (int)t);
    }
}

static void dump_array(sbuf *b, const hx_gguf_array *a)
{
    sb_add(b, "array[%s;%" PRIu64 "](", vtype_name[a->type], a->n);
    for (uint64_t i = 0; i < a->n; i++) {
        if (i)
            sb_add(b, " ");
        dump_element(b, a, i);
    }
    sb_add(b, ")");
}

static void dump_kv(sbuf *b, const hx_gguf *g, uint64_t i)
{
    const char *key = hx_gguf_key_name(g, i);
    hx_gguf_vtype t = hx_gguf_key_type(g, i);
    sb_add(b, "kv ");
    sb_escape(b, (const uint8_t *)key, strlen(key));
    sb_add(b, " ");
    int64_t iv;
    uint64_t uv;
    double dv;
    float fv;
    int bv;
    const char *s;
    hx_gguf_array a;
    switch (t) {
    case HX_GGUF_INT8: case HX_GGUF_INT16: case HX_GGUF_INT32: case HX_GGUF_INT64:
        MUST(hx_gguf_get_i64(g, key, &iv));
        sb_add(b, "%s:%" PRId64, vtype_name[t], iv);
        break;
    case HX_GGUF_UINT8: case HX_GGUF_UINT16: case HX_GGUF_UINT32: case HX_GGUF_UINT64:
        MUST(hx_gguf_get_u64(g, key, &uv));
        sb_add(b, "%s:%" PRIu64, vtype_name[t], uv);
        break;
    case HX_GGUF_BOOL:
        MUST(hx_gguf_get_bool(g, key, &bv));
        sb_add(b, "bool:%d", bv);
        break;
    case HX_GGUF_FLOAT32: {
        uint32_t bits;
        MUST(hx_gguf_get_f32(g, key, &fv));
        memcpy(&bits, &fv, 4);
        sb_add(b, "float32:0x%08" PRIx32, bits);
        break;
    }
    case HX_GGUF_FLOAT64:
        MUST(hx_gguf_get_f64(g, key, &dv));
        memcpy(&uv, &dv, 8);
        sb_add(b, "float64:0x%016" PRIx64, uv);
        break;
    case HX_GGUF_STRING:
        MUST(hx_gguf_get_str(g, key, &s, &uv));
        sb_add(b, "string:\"");
        sb_escape(b, (const uint8_t *)s, uv);
        sb_add(b, "\"");
        break;
    case HX_GGUF_ARRAY:
        MUST(hx_gguf_get_arr(g, key, &a));
        dump_array(b, &a);
        break;
    default:
        ck_abort_msg("bad key type %d", (int)t);
    }
    sb_add(b, "\n");
}

static char *dump(const hx_gguf *g)
{
    sbuf b = {0};
    sb_add(&b, "version %u\nalignment %" PRIu64 "\ndata_offset %" PRIu64 "\n", hx_gguf_version(g),
           hx_gguf_alignment(g), hx_gguf_data_offset(g));
    for (uint64_t i = 0; i < hx_gguf_key_count(g); i++)
        dump_kv(&b, g, i);
    for (uint64_t i = 0; i < hx_gguf_tensor_count(g); i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        sb_add(&b, "tensor ");
        sb_escape(&b, (const uint8_t *)t->name, strlen(t->name));
        sb_add(&b, " type=%d ne=", (int)t->type);
        for (uint32_t d = 0; d < t->n_dims; d++)
            sb_add(&b, "%s%" PRIu64, d ? "," : "", t->ne[d]);
        sb_add(&b, " offset=%" PRIu64 " size=%" PRIu64 " data=", t->offset, t->size);
        for (uint64_t k = 0; k < t->size; k++)
            sb_add(&b, "%02x", ((const uint8_t *)t->data)[k]);
        sb_add(&b, "\n");
    }
    return b.p;
}

/* Runs a shell command, returning its exit status and all its output. */
static int run(const char *cmd, char **out)
{
    FILE *p = popen(cmd, "r");
    ck_assert_msg(p != NULL, "popen %s: %s", cmd, strerror(errno));
    sbuf b = {0};
    sb_add(&b, "%s", "");
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, p)) > 0)
        sb_add(&b, "%.*s", (int)n, chunk);
    int st = pclose(p);
    *out = b.p;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Compares hetero's dump of `path` with the gguf package's, line by line. */
static void assert_same_as_gguf_py(const char *path)
{
    hx_gguf *g;
    HX_ASSERT_OK(hx_gguf_open(path, &g));
    char *mine = dump(g);
    hx_gguf_close(g);
    char cmd[4096], *theirs;
    snprintf(cmd, sizeof cmd, "python3 " READBACK " '%s' 2>&1", path);
    int rc = run(cmd, &theirs);
    ck_assert_msg(rc == 0, "`%s` failed (exit %d); the test needs python3 with the gguf package: " PIP_HINT
                  "\n%.2000s", cmd, rc, theirs);
    const char *a = mine, *b = theirs;
    int line = 1;
    while (*a && *a == *b) {
        if (*a == '\n')
            line++;
        a++;
        b++;
    }
    ck_assert_msg(*a == *b, "%s: hetero and gguf-py differ at line %d:\n hetero: %.300s\n gguf:   %.300s", path,
                  line, a, b);
    free(mine);
    free(theirs);
}

/* ---- the fixture: one writer holding every kind of value --------------- */

#define N_ARR 17

typedef struct {
    uint8_t arr[HX_GGUF_VTYPE_COUNT][N_ARR * 8]; /* numeric arrays, raw */
    float f32_data[8 * 3];
    uint16_t f16_data[64];
    uint8_t q4_0_data[2 * 18 * 3];
    uint8_t q8_0_data[34];
    uint8_t q4k_data[144 * 2];
    int8_t i8_data[5 * 3 * 2 * 2];
} fixture;

static const char *const STRINGS[] = {"", "a", "h\xc3\xa9llo w\xc3\xb6rld", "tab\there", "quote\"back\\slash",
                                      "<0x0A>"};
#define N_STRINGS (sizeof STRINGS / sizeof *STRINGS)

static void fill(fixture *fx)
{
    for (int t = 0; t < HX_GGUF_VTYPE_COUNT; t++) {
        for (int i = 0; i < N_ARR; i++) {
            uint8_t *e = fx->arr[t] + i * vtype_size[t];
            if (t == HX_GGUF_FLOAT32) {
                float f = rnd_float();
                memcpy(e, &f, 4);
            } else if (t == HX_GGUF_FLOAT64) {
                double d = (double)rnd_float() * 1e-3;
                memcpy(e, &d, 8);
            } else if (t == HX_GGUF_BOOL) {
                e[0] = rnd() & 1;
            } else {
                uint64_t r = rnd();
                memcpy(e, &r, vtype_size[t]);
            }
        }
    }
    for (size_t i = 0; i < sizeof fx->f32_data / 4; i++)
        fx->f32_data[i] = rnd_float();
    uint8_t *raw[] = {(uint8_t *)fx->f16_data, fx->q4_0_data, fx->q8_0_data, fx->q4k_data, (uint8_t *)fx->i8_data};
    size_t sizes[] = {sizeof fx->f16_data, sizeof fx->q4_0_data, sizeof fx->q8_0_data, sizeof fx->q4k_data,
                      sizeof fx->i8_data};
    for (int k = 0; k < 5; k++)
        for (size_t i = 0; i < sizes[k]; i++)
            raw[k][i] = (uint8_t)rnd();
}

/* Scalars of every type: one key each, "s.<type>". */
static void add_scalars(hx_gguf_writer *w)
{
    uint8_t u8 = 200, b1 = 1;
    int8_t i8 = -100;
    uint16_t u16 = 60000;
    int16_t i16 = -30000;
    int64_t i64 = -(INT64_C(1) << 62) - 7;
    double f64 = -1.0 / 3.0;
    HX_ASSERT_OK(hx_gguf_writer_set_scalar(w, "s.uint8", HX_GGUF_UINT8, &u8));
    HX_ASSERT_OK(hx_gguf_writer_set_scalar(w, "s.int8", HX_GGUF_INT8, &i8));
    HX_ASSERT_OK(hx_gguf_writer_set_scalar(w, "s.uint16", HX_GGUF_UINT16, &u16));
    HX_ASSERT_OK(hx_gguf_writer_set_scalar(w, "s.int16", HX_GGUF_INT16, &i16));
    HX_ASSERT_OK(hx_gguf_writer_set_u32(w, "s.uint32", 4000000000u));
    HX_ASSERT_OK(hx_gguf_writer_set_i32(w, "s.int32", -2000000000));
    HX_ASSERT_OK(hx_gguf_writer_set_f32(w, "s.float32", 0.1f));
    HX_ASSERT_OK(hx_gguf_writer_set_bool(w, "s.bool", 7));
    HX_ASSERT_OK(hx_gguf_writer_set_scalar(w, "s.bool0", HX_GGUF_BOOL, &b1));
    HX_ASSERT_OK(hx_gguf_writer_set_bool(w, "s.bool0", 0)); /* replaces in place */
    HX_ASSERT_OK(hx_gguf_writer_set_str(w, "s.string", "h\xc3\xa9llo"));
    HX_ASSERT_OK(hx_gguf_writer_set_str(w, "s.empty_string", ""));
    HX_ASSERT_OK(hx_gguf_writer_set_u64(w, "s.uint64", UINT64_MAX - 3));
    HX_ASSERT_OK(hx_gguf_writer_set_scalar(w, "s.int64", HX_GGUF_INT64, &i64));
    HX_ASSERT_OK(hx_gguf_writer_set_scalar(w, "s.float64", HX_GGUF_FLOAT64, &f64));
}

static void add_arrays(hx_gguf_writer *w, const fixture *fx)
{
    char key[64];
    for (int t = 0; t < HX_GGUF_VTYPE_COUNT; t++) {
        if (!vtype_size[t])
            continue;
        snprintf(key, sizeof key, "a.%s", vtype_name[t]);
        HX_ASSERT_OK(hx_gguf_writer_set_arr(w, key, (hx_gguf_vtype)t, fx->arr[t], N_ARR));
    }
    HX_ASSERT_OK(hx_gguf_writer_set_arr(w, "a.empty", HX_GGUF_INT32, NULL, 0));
    HX_ASSERT_OK(hx_gguf_writer_set_arr_str(w, "a.strings", STRINGS, N_STRINGS));
    HX_ASSERT_OK(hx_gguf_writer_set_arr_str(w, "a.no_strings", NULL, 0));
    /* Nested: numeric views built here. */
    hx_gguf_array rows[3] = {
        {HX_GGUF_INT16, 4, fx->arr[HX_GGUF_INT16], NULL, NULL},
        {HX_GGUF_FLOAT32, 0, NULL, NULL, NULL},
        {HX_GGUF_UINT64, 2, fx->arr[HX_GGUF_UINT64], NULL, NULL},
    };
    HX_ASSERT_OK(hx_gguf_writer_set_arr_arr(w, "a.nested", rows, 3));
}

static void add_tensors(hx_gguf_writer *w, const fixture *fx)
{
    uint64_t ne2[] = {8, 3}, ne1[] = {64}, ne3[] = {64, 1, 3}, ne_q8[] = {32}, ne_qk[] = {256, 2},
             ne4[] = {5, 3, 2, 2};
    HX_ASSERT_OK(hx_gguf_writer_add_tensor(w, "blk.0.attn_q.weight", HX_TYPE_F32, 2, ne2, fx->f32_data));
    HX_ASSERT_OK(hx_gguf_writer_add_tensor(w, "f16", HX_TYPE_F16, 1, ne1, fx->f16_data));
    HX_ASSERT_OK(hx_gguf_writer_add_tensor(w, "q4_0.3d", HX_TYPE_Q4_0, 3, ne3, fx->q4_0_data));
    HX_ASSERT_OK(hx_gguf_writer_add_tensor(w, "q8_0", HX_TYPE_Q8_0, 1, ne_q8, fx->q8_0_data));
    HX_ASSERT_OK(hx_gguf_writer_add_tensor(w, "q4_K", HX_TYPE_Q4_K, 2, ne_qk, fx->q4k_data));
    HX_ASSERT_OK(hx_gguf_writer_add_tensor(w, "i8.4d", HX_TYPE_I8, 4, ne4, fx->i8_data));
}

static fixture *write_full(const char *path, uint32_t alignment)
{
    fixture *fx = calloc(1, sizeof *fx);
    ck_assert_ptr_nonnull(fx);
    fill(fx);
    hx_gguf_writer *w;
    HX_ASSERT_OK(hx_gguf_writer_create(&w));
    HX_ASSERT_OK(hx_gguf_writer_set_str(w, "general.architecture", "llama"));
    if (alignment)
        HX_ASSERT_OK(hx_gguf_writer_set_alignment(w, alignment));
    add_scalars(w);
    add_arrays(w, fx);
    add_tensors(w, fx);
    HX_ASSERT_OK(hx_gguf_writer_write(w, path));
    hx_gguf_writer_free(w);
    return fx;
}

/* ---- round trips -------------------------------------------------------- */

START_TEST(roundtrip_scalars)
{
    char path[256];
    tmp_path(path, sizeof path, "scalars");
    fixture *fx = write_full(path, 0);
    hx_gguf *g;
    HX_ASSERT_OK(hx_gguf_open(path, &g));
    ck_assert_uint_eq(hx_gguf_version(g), 3);
    ck_assert_uint_eq(hx_gguf_alignment(g), 32);
    ck_assert_int_lt(hx_gguf_find_key(g, "general.alignment"), 0);
    /* Keys keep the order of their first setting. */
    ck_assert_str_eq(hx_gguf_key_name(g, 0), "general.architecture");
    ck_assert_str_eq(hx_gguf_key_name(g, 1), "s.uint8");
    ck_assert_int_eq(hx_gguf_find_key(g, "s.bool0"), 9);
    ck_assert_ptr_null(hx_gguf_key_name(g, hx_gguf_key_count(g)));
    ck_assert_int_eq(hx_gguf_key_type(g, hx_gguf_key_count(g)), HX_GGUF_VTYPE_COUNT);

    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    int64_t i64;
    float f32;
    double f64;
    int b;
    const char *s;
    HX_ASSERT_OK(hx_gguf_get_u32(g, "s.uint8", &u32));
    ck_assert_uint_eq(u32, 200);
    HX_ASSERT_OK(hx_gguf_get_i32(g, "s.int8", &i32));
    ck_assert_int_eq(i32, -100);
    HX_ASSERT_OK(hx_gguf_get_u32(g, "s.uint16", &u32));
    ck_assert_uint_eq(u32, 60000);
    HX_ASSERT_OK(hx_gguf_get_i32(g, "s.int16", &i32));
    ck_assert_int_eq(i32, -30000);
    HX_ASSERT_OK(hx_gguf_get_u32(g, "s.uint32", &u32));
    ck_assert_uint_eq(u32, 4000000000u);
    HX_ASSERT_OK(hx_gguf_get_i32(g, "s.int32", &i32));
    ck_assert_int_eq(i32, -2000000000);
    HX_ASSERT_OK(hx_gguf_get_f32(g, "s.float32", &f32));
    ck_assert(f32 == 0.1f);
    HX_ASSERT_OK(hx_gguf_get_bool(g, "s.bool", &b));
    ck_assert_int_eq(b, 1);
    HX_ASSERT_OK(hx_gguf_get_bool(g, "s.bool0", &b));
    ck_assert_int_eq(b, 0);
    HX_ASSERT_OK(hx_gguf_get_str(g, "s.string", &s, &u64));
    ck_assert_uint_eq(u64, 6);
    ck_assert_int_eq(memcmp(s, "h\xc3\xa9llo", 6), 0);
    HX_ASSERT_OK(hx_gguf_get_str(g, "s.empty_string", &s, &u64));
    ck_assert_uint_eq(u64, 0);
    HX_ASSERT_OK(hx_gguf_get_u64(g, "s.uint64", &u64));
    ck_assert_uint_eq(u64, UINT64_MAX - 3);
    HX_ASSERT_OK(hx_gguf_get_i64(g, "s.int64", &i64));
    ck_assert_int_eq(i64, -(INT64_C(1) << 62) - 7);
    HX_ASSERT_OK(hx_gguf_get_f64(g, "s.float64", &f64));
    ck_assert(f64 == -1.0 / 3.0);
    HX_ASSERT_OK(hx_gguf_get_str(g, "general.architecture", &s, &u64));
    ck_assert_uint_eq(u64, 5);
    /* Raw value bytes as stored: a uint32 is its 4 little-endian bytes. */
    const void *raw;
    int64_t k = hx_gguf_find_key(g, "s.uint32");
    HX_ASSERT_OK(hx_gguf_key_value(g, (uint64_t)k, &raw, &u64));
    ck_assert_uint_eq(u64, 4);
    ck_assert_int_eq(memcmp(raw, &(uint32_t){4000000000u}, 4), 0);
    ck_assert_int_eq(hx_gguf_key_value(g, hx_gguf_key_count(g), &raw, &u64), HX_ERR_RANGE);
    hx_gguf_close(g);
    free(fx);
    unlink(path);
}
END_TEST

START_TEST(roundtrip_arrays)
{
    char path[256], key[64];
    tmp_path(path, sizeof path, "arrays");
    fixture *fx = write_full(path, 0);
    hx_gguf *g;
    HX_ASSERT_OK(hx_gguf_open(path, &g));
    hx_gguf_array a;
    for (int t = 0; t < HX_GGUF_VTYPE_COUNT; t++) {
        if (!vtype_size[t])
            continue;
        snprintf(key, sizeof key, "a.%s", vtype_name[t]);
        HX_ASSERT_OK(hx_gguf_get_arr(g, key, &a));
        ck_assert_int_eq(a.type, t);
        ck_assert_uint_eq(a.n, N_ARR);
        ck_assert_int_eq(memcmp(a.data, fx->arr[t], N_ARR * vtype_size[t]), 0);
        for (uint64_t i = 0; i < N_ARR; i++) {
            const uint8_t *e = fx->arr[t] + i * vtype_size[t];
            int64_t iv;
            uint64_t uv;
            float fv;
            double dv;
            switch (t) {
            case HX_GGUF_FLOAT32:
                HX_ASSERT_OK(hx_gguf_arr_f32(&a, i, &fv));
                ck_assert_int_eq(memcmp(&fv, e, 4), 0);
                HX_ASSERT_OK(hx_gguf_arr_f64(&a, i, &dv));
                ck_assert(dv == (double)fv);
                ck_assert_int_eq(hx_gguf_arr_i64(&a, i, &iv), HX_ERR_FORMAT);
                break;
            case HX_GGUF_FLOAT64:
                HX_ASSERT_OK(hx_gguf_arr_f64(&a, i, &dv));
                ck_assert_int_eq(memcmp(&dv, e, 8), 0);
                HX_ASSERT_OK(hx_gguf_arr_f32(&a, i, &fv));
                ck_assert(fv == (float)dv);
                break;
            case HX_GGUF_INT8: { int8_t x; memcpy(&x, e, 1); HX_ASSERT_OK(hx_gguf_arr_i64(&a, i, &iv)); ck_assert_int_eq(iv, x); break; }
            case HX_GGUF_INT16: { int16_t x; memcpy(&x, e, 2); HX_ASSERT_OK(hx_gguf_arr_i64(&a, i, &iv)); ck_assert_int_eq(iv, x); break; }
            case HX_GGUF_INT32: { int32_t x; memcpy(&x, e, 4); HX_ASSERT_OK(hx_gguf_arr_i64(&a, i, &iv)); ck_assert_int_eq(iv, x); break; }
            case HX_GGUF_INT64: { int64_t x; memcpy(&x, e, 8); HX_ASSERT_OK(hx_gguf_arr_i64(&a, i, &iv)); ck_assert_int_eq(iv, x);
                ck_assert_int_eq(hx_gguf_arr_u64(&a, i, &uv), x < 0 ? HX_ERR_FORMAT : HX_OK); break; }
            case HX_GGUF_UINT8: HX_ASSERT_OK(hx_gguf_arr_u64(&a, i, &uv)); ck_assert_uint_eq(uv, e[0]); break;
            case HX_GGUF_UINT16: { uint16_t x; memcpy(&x, e, 2); HX_ASSERT_OK(hx_gguf_arr_u64(&a, i, &uv)); ck_assert_uint_eq(uv, x); break; }
            case HX_GGUF_UINT32: { uint32_t x; memcpy(&x, e, 4); HX_ASSERT_OK(hx_gguf_arr_u64(&a, i, &uv)); ck_assert_uint_eq(uv, x); break; }
            case HX_GGUF_UINT64: { uint64_t x; memcpy(&x, e, 8); HX_ASSERT_OK(hx_gguf_arr_u64(&a, i, &uv)); ck_assert_uint_eq(uv, x);
                ck_assert_int_eq(hx_gguf_arr_i64(&a, i, &iv), x > INT64_MAX ? HX_ERR_FORMAT : HX_OK); break; }
            case HX_GGUF_BOOL: HX_ASSERT_OK(hx_gguf_arr_i64(&a, i, &iv)); ck_assert_int_eq(iv, e[0]); break;
            }
        }
        int64_t iv;
        ck_assert_int_eq(hx_gguf_arr_i64(&a, N_ARR, &iv), HX_ERR_RANGE);
    }
    HX_ASSERT_OK(hx_gguf_get_arr(g, "a.empty", &a));
    ck_assert_uint_eq(a.n, 0);
    ck_assert_int_eq(a.type, HX_GGUF_INT32);
    HX_ASSERT_OK(hx_gguf_get_arr(g, "a.no_strings", &a));
    ck_assert_uint_eq(a.n, 0);
    ck_assert_int_eq(a.type, HX_GGUF_STRING);

    HX_ASSERT_OK(hx_gguf_get_arr(g, "a.strings", &a));
    ck_assert_uint_eq(a.n, N_STRINGS);
    for (uint64_t i = 0; i < N_STRINGS; i++) {
        const char *s;
        uint64_t len;
        HX_ASSERT_OK(hx_gguf_arr_str(&a, i, &s, &len));
        ck_assert_uint_eq(len, strlen(STRINGS[i]));
        ck_assert_int_eq(memcmp(s, STRINGS[i], len), 0);
    }
    const char *s;
    uint64_t len;
    ck_assert_int_eq(hx_gguf_arr_str(&a, N_STRINGS, &s, &len), HX_ERR_RANGE);
    hx_gguf_array sub;
    ck_assert_int_eq(hx_gguf_arr_arr(&a, 0, &sub), HX_ERR_FORMAT);

    HX_ASSERT_OK(hx_gguf_get_arr(g, "a.nested", &a));
    ck_assert_int_eq(a.type, HX_GGUF_ARRAY);
    ck_assert_uint_eq(a.n, 3);
    HX_ASSERT_OK(hx_gguf_arr_arr(&a, 0, &sub));
    ck_assert_int_eq(sub.type, HX_GGUF_INT16);
    ck_assert_uint_eq(sub.n, 4);
    ck_assert_int_eq(memcmp(sub.data, fx->arr[HX_GGUF_INT16], 8), 0);
    HX_ASSERT_OK(hx_gguf_arr_arr(&a, 1, &sub));
    ck_assert_int_eq(sub.type, HX_GGUF_FLOAT32);
    ck_assert_uint_eq(sub.n, 0);
    HX_ASSERT_OK(hx_gguf_arr_arr(&a, 2, &sub));
    ck_assert_int_eq(sub.type, HX_GGUF_UINT64);
    uint64_t uv;
    HX_ASSERT_OK(hx_gguf_arr_u64(&sub, 1, &uv));
    ck_assert_int_eq(memcmp(&uv, fx->arr[HX_GGUF_UINT64] + 8, 8), 0);
    ck_assert_int_eq(hx_gguf_arr_arr(&a, 3, &sub), HX_ERR_RANGE);
    ck_assert_int_eq(hx_gguf_arr_str(&a, 0, &s, &len), HX_ERR_FORMAT);
    hx_gguf_close(g);
    free(fx);
    unlink(path);
}
END_TEST

/* Deeper nesting, strings inside arrays of arrays, and copying through
 * copy_kv and set_arr_arr with views taken from a reader. */
START_TEST(roundtrip_nested_views)
{
    char p1[256], p2[256];
    tmp_path(p1, sizeof p1, "nest1");
    tmp_path(p2, sizeof p2, "nest2");
    hx_gguf_writer *w;
    HX_ASSERT_OK(hx_gguf_writer_create(&w));
    HX_ASSERT_OK(hx_gguf_writer_set_arr_str(w, "strs", STRINGS, N_STRINGS));
    int32_t v[3] = {(int32_t)rnd(), (int32_t)rnd(), (int32_t)rnd()};
    hx_gguf_array leaf = {HX_GGUF_INT32, 3, (const uint8_t *)v, NULL, NULL};
    HX_ASSERT_OK(hx_gguf_writer_set_arr_arr(w, "lvl2", &leaf, 1));
    HX_ASSERT_OK(hx_gguf_writer_write(w, p1));
    hx_gguf_writer_free(w);

    hx_gguf *g1;
    HX_ASSERT_OK(hx_gguf_open(p1, &g1));
    hx_gguf_array strs, lvl2;
    HX_ASSERT_OK(hx_gguf_get_arr(g1, "strs", &strs));
    HX_ASSERT_OK(hx_gguf_get_arr(g1, "lvl2", &lvl2));
    HX_ASSERT_OK(hx_gguf_writer_create(&w));
    HX_ASSERT_OK(hx_gguf_writer_copy_kv(w, g1));
    hx_gguf_array mix[3] = {strs, lvl2, leaf}; /* [[strings], [[i32]], [i32]] */
    HX_ASSERT_OK(hx_gguf_writer_set_arr_arr(w, "mix", mix, 3));
    /* A caller-built view of strings has no offsets: refused. */
    hx_gguf_array bad = {HX_GGUF_STRING, 1, (const uint8_t *)"x", NULL, NULL};
    ck_assert_int_eq(hx_gguf_writer_set_arr_arr(w, "bad", &bad, 1), HX_ERR_INVALID_ARG);
    HX_ASSERT_OK(hx_gguf_writer_write(w, p2));
    hx_gguf_writer_free(w);

    hx_gguf *g2;
    HX_ASSERT_OK(hx_gguf_open(p2, &g2));
    ck_assert_uint_eq(hx_gguf_key_count(g2), 3);
    ck_assert_int_lt(hx_gguf_find_key(g2, "bad"), 0);
    for (uint64_t i = 0; i < 2; i++) { /* copied keys: byte-identical */
        const void *a, *b;
        uint64_t na, nb;
        HX_ASSERT_OK(hx_gguf_key_value(g1, i, &a, &na));
        HX_ASSERT_OK(hx_gguf_key_value(g2, i, &b, &nb));
        ck_assert_uint_eq(na, nb);
        ck_assert_int_eq(memcmp(a, b, na), 0);
        ck_assert_str_eq(hx_gguf_key_name(g1, i), hx_gguf_key_name(g2, i));
    }
    hx_gguf_array m, e, ee;
    HX_ASSERT_OK(hx_gguf_get_arr(g2, "mix", &m));
    ck_assert_uint_eq(m.n, 3);
    HX_ASSERT_OK(hx_gguf_arr_arr(&m, 0, &e));
    ck_assert_int_eq(e.type, HX_GGUF_STRING);
    ck_assert_uint_eq(e.n, N_STRINGS);
    for (uint64_t i = 0; i < N_STRINGS; i++) {
        const char *s;
        uint64_t len;
        HX_ASSERT_OK(hx_gguf_arr_str(&e, i, &s, &len));
        ck_assert_uint_eq(len, strlen(STRINGS[i]));
        ck_assert_int_eq(memcmp(s, STRINGS[i], len), 0);
    }
    HX_ASSERT_OK(hx_gguf_arr_arr(&m, 1, &e));
    ck_assert_int_eq(e.type, HX_GGUF_ARRAY);
    ck_assert_uint_eq(e.n, 1);
    HX_ASSERT_OK(hx_gguf_arr_arr(&e, 0, &ee));
    ck_assert_int_eq(ee.type, HX_GGUF_INT32);
    for (uint64_t i = 0; i < 3; i++) {
        int64_t x;
        HX_ASSERT_OK(hx_gguf_arr_i64(&ee, i, &x));
        ck_assert_int_eq(x, v[i]);
    }
    HX_ASSERT_OK(hx_gguf_arr_arr(&m, 2, &e));
    ck_assert_int_eq(memcmp(e.data, v, sizeof v), 0);

    /* The reader's depth limit also bounds the writer: wrap the array in
     * one more level, through a file each time, until the writer refuses. */
    hx_gguf_array chain = lvl2;
    hx_gguf_writer *w2;
    HX_ASSERT_OK(hx_gguf_writer_create(&w2));
    hx_status st = HX_OK;
    int levels = 2;
    hx_gguf *gs[HX_GGUF_MAX_DEPTH + 1] = {0};
    char pn[HX_GGUF_MAX_DEPTH + 1][256];
    for (;;) {
        st = hx_gguf_writer_set_arr_arr(w2, "deep", &chain, 1);
        if (st)
            break;
        levels++;
        ck_assert_int_le(levels, HX_GGUF_MAX_DEPTH);
        tmp_path(pn[levels], sizeof pn[levels], "deep");
        HX_ASSERT_OK(hx_gguf_writer_write(w2, pn[levels]));
        HX_ASSERT_OK(hx_gguf_open(pn[levels], &gs[levels]));
        HX_ASSERT_OK(hx_gguf_get_arr(gs[levels], "deep", &chain));
    }
    ck_assert_int_eq(st, HX_ERR_INVALID_ARG);
    ck_assert_int_eq(levels, HX_GGUF_MAX_DEPTH);
    for (int i = 3; i <= levels; i++) {
        hx_gguf_close(gs[i]);
        unlink(pn[i]);
    }
    hx_gguf_writer_free(w2);
    hx_gguf_close(g1);
    hx_gguf_close(g2);
    unlink(p1);
    unlink(p2);
}
END_TEST

START_TEST(getters_convert_and_refuse)
{
    char path[256];
    tmp_path(path, sizeof path, "getters");
    fixture *fx = write_full(path, 0);
    hx_gguf *g;
    HX_ASSERT_OK(hx_gguf_open(path, &g));
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    int64_t i64;
    float f32;
    double f64;
    int b;
    const char *s;
    hx_gguf_array a;
    /* Integers convert among themselves when in range. */
    HX_ASSERT_OK(hx_gguf_get_i32(g, "s.uint8", &i32));
    ck_assert_int_eq(i32, 200);
    HX_ASSERT_OK(hx_gguf_get_u64(g, "s.uint16", &u64));
    ck_assert_uint_eq(u64, 60000);
    HX_ASSERT_OK(hx_gguf_get_i64(g, "s.int32", &i64));
    ck_assert_int_eq(i64, -2000000000);
    HX_ASSERT_OK(hx_gguf_get_i64(g, "s.uint32", &i64));
    ck_assert_int_eq(i64, 4000000000);
    ck_assert_int_eq(hx_gguf_get_i32(g, "s.uint32", &i32), HX_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "key 's.uint32'"));
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "uint32 4000000000, out of range for int32"));
    ck_assert_int_eq(hx_gguf_get_u32(g, "s.int8", &u32), HX_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "int8 -100, out of range for uint32"));
    ck_assert_int_eq(hx_gguf_get_u64(g, "s.int64", &u64), HX_ERR_FORMAT);
    ck_assert_int_eq(hx_gguf_get_u32(g, "s.uint64", &u32), HX_ERR_FORMAT);
    ck_assert_int_eq(hx_gguf_get_i64(g, "s.uint64", &i64), HX_ERR_FORMAT);
    ck_assert_int_eq(hx_gguf_get_i32(g, "s.int64", &i32), HX_ERR_FORMAT);
    /* Floats among themselves. */
    HX_ASSERT_OK(hx_gguf_get_f64(g, "s.float32", &f64));
    ck_assert(f64 == (double)0.1f);
    HX_ASSERT_OK(hx_gguf_get_f32(g, "s.float64", &f32));
    ck_assert(f32 == (float)(-1.0 / 3.0));
    /* No crossing between kinds. */
    ck_assert_int_eq(hx_gguf_get_f32(g, "s.uint32", &f32), HX_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "holds a uint32, not a float"));
    ck_assert_int_eq(hx_gguf_get_u32(g, "s.float32", &u32), HX_ERR_FORMAT);
    ck_assert_int_eq(hx_gguf_get_u32(g, "s.bool", &u32), HX_ERR_FORMAT);
    ck_assert_int_eq(hx_gguf_get_bool(g, "s.uint8", &b), HX_ERR_FORMAT);
    ck_assert_int_eq(hx_gguf_get_u32(g, "s.string", &u32), HX_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "holds a string, not an integer"));
    ck_assert_int_eq(hx_gguf_get_str(g, "s.uint8", &s, &u64), HX_ERR_FORMAT);
    ck_assert_int_eq(hx_gguf_get_arr(g, "s.string", &a), HX_ERR_FORMAT);
    ck_assert_int_eq(hx_gguf_get_str(g, "a.strings", &s, &u64), HX_ERR_FORMAT);
    ck_assert_int_eq(hx_gguf_get_u32(g, "a.uint32", &u32), HX_ERR_FORMAT);
    /* Absent keys and bad arguments. */
    ck_assert_int_eq(hx_gguf_get_u32(g, "no.such.key", &u32), HX_ERR_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "no.such.key"));
    ck_assert_int_eq(hx_gguf_get_arr(g, "no.such.key", &a), HX_ERR_NOT_FOUND);
    ck_assert_int_eq(hx_gguf_find_key(g, "no.such.key"), -1);
    ck_assert_int_eq(hx_gguf_find_key(g, NULL), -1);
    ck_assert_int_eq(hx_gguf_get_u32(g, NULL, &u32), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_gguf_get_u32(g, "s.uint8", NULL), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_gguf_get_u32(NULL, "s.uint8", &u32), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_gguf_get_str(g, "s.string", NULL, &u64), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_gguf_arr_i64(NULL, 0, &i64), HX_ERR_INVALID_ARG);
    /* Array element types. */
    HX_ASSERT_OK(hx_gguf_get_arr(g, "a.float32", &a));
    ck_assert_int_eq(hx_gguf_arr_str(&a, 0, &s, &u64), HX_ERR_FORMAT);
    ck_assert_int_eq(hx_gguf_arr_u64(&a, 0, &u64), HX_ERR_FORMAT);
    HX_ASSERT_OK(hx_gguf_get_arr(g, "a.int32", &a));
    ck_assert_int_eq(hx_gguf_arr_f32(&a, 0, &f32), HX_ERR_FORMAT);
    ck_assert_int_eq(hx_gguf_arr_f64(&a, 0, &f64), HX_ERR_FORMAT);
    ck_assert_int_eq(hx_gguf_arr_i64(&a, N_ARR, &i64), HX_ERR_RANGE);
    ck_assert_int_eq(hx_gguf_arr_i64(&a, UINT64_MAX, &i64), HX_ERR_RANGE);
    /* A double beyond float's range is refused, not turned into infinity. */
    double big = 1e300;
    hx_gguf_array fa = {HX_GGUF_FLOAT64, 1, (const uint8_t *)&big, NULL, NULL};
    ck_assert_int_eq(hx_gguf_arr_f32(&fa, 0, &f32), HX_ERR_FORMAT);
    HX_ASSERT_OK(hx_gguf_arr_f64(&fa, 0, &f64));
    ck_assert(f64 == 1e300);
    hx_gguf_close(g);
    free(fx);
    unlink(path);
}
END_TEST

START_TEST(roundtrip_tensors)
{
    char path[256];
    tmp_path(path, sizeof path, "tensors");
    fixture *fx = write_full(path, 0);
    hx_gguf *g;
    HX_ASSERT_OK(hx_gguf_open(path, &g));
    ck_assert_uint_eq(hx_gguf_tensor_count(g), 6);
    struct {
        const char *name;
        hx_type type;
        uint32_t n_dims;
        uint64_t ne[4];
        const void *data;
        uint64_t size;
    } want[] = {
        {"blk.0.attn_q.weight", HX_TYPE_F32, 2, {8, 3, 1, 1}, fx->f32_data, sizeof fx->f32_data},
        {"f16", HX_TYPE_F16, 1, {64, 1, 1, 1}, fx->f16_data, sizeof fx->f16_data},
        {"q4_0.3d", HX_TYPE_Q4_0, 3, {64, 1, 3, 1}, fx->q4_0_data, sizeof fx->q4_0_data},
        {"q8_0", HX_TYPE_Q8_0, 1, {32, 1, 1, 1}, fx->q8_0_data, sizeof fx->q8_0_data},
        {"q4_K", HX_TYPE_Q4_K, 2, {256, 2, 1, 1}, fx->q4k_data, sizeof fx->q4k_data},
        {"i8.4d", HX_TYPE_I8, 4, {5, 3, 2, 2}, fx->i8_data, sizeof fx->i8_data},
    };
    size_t size;
    const uint8_t *base = hx_gguf_data(g, &size);
    uint64_t data_off = hx_gguf_data_offset(g);
    ck_assert_uint_eq(data_off % 32, 0);
    for (uint64_t i = 0; i < 6; i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        ck_assert_ptr_eq(t, hx_gguf_find_tensor(g, want[i].name));
        ck_assert_str_eq(t->name, want[i].name);
        ck_assert_int_eq(t->type, want[i].type);
        ck_assert_uint_eq(t->n_dims, want[i].n_dims);
        for (int d = 0; d < 4; d++)
            ck_assert_uint_eq(t->ne[d], want[i].ne[d]);
        ck_assert_uint_eq(t->size, want[i].size);
        ck_assert_uint_eq(t->offset % 32, 0);
        ck_assert_ptr_eq(t->data, base + data_off + t->offset);
        ck_assert_uint_le(data_off + t->offset + t->size, size);
        ck_assert_int_eq(memcmp(t->data, want[i].data, t->size), 0);
    }
    ck_assert_ptr_null(hx_gguf_tensor_at(g, 6));
    ck_assert_ptr_null(hx_gguf_find_tensor(g, "nope"));
    ck_assert_ptr_null(hx_gguf_find_tensor(g, NULL));

    /* The same bytes parse the same from caller memory. */
    size_t n;
    uint8_t *bytes = slurp(path, &n);
    hx_gguf *m;
    HX_ASSERT_OK(hx_gguf_open_memory(bytes, n, &m));
    ck_assert_ptr_eq(hx_gguf_data(m, NULL), bytes);
    char *d1 = dump(g), *d2 = dump(m);
    ck_assert_str_eq(d1, d2);
    ck_assert_ptr_eq(hx_gguf_tensor_at(m, 2)->data, bytes + data_off + hx_gguf_tensor_at(g, 2)->offset);
    free(d1);
    free(d2);
    hx_gguf_close(m);
    free(bytes);
    hx_gguf_close(g);
    free(fx);
    unlink(path);
}
END_TEST

START_TEST(alignment)
{
    static const uint32_t aligns[] = {1, 8, 64, 4096};
    for (size_t k = 0; k < sizeof aligns / sizeof *aligns; k++) {
        char path[256];
        tmp_path(path, sizeof path, "align");
        fixture *fx = write_full(path, aligns[k]);
        hx_gguf *g;
        HX_ASSERT_OK(hx_gguf_open(path, &g));
        uint32_t a;
        HX_ASSERT_OK(hx_gguf_get_u32(g, "general.alignment", &a));
        ck_assert_uint_eq(a, aligns[k]);
        ck_assert_uint_eq(hx_gguf_alignment(g), aligns[k]);
        ck_assert_uint_eq(hx_gguf_data_offset(g) % aligns[k], 0);
        for (uint64_t i = 0; i < hx_gguf_tensor_count(g); i++) {
            const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
            ck_assert_uint_eq(t->offset % aligns[k], 0);
            ck_assert_uint_eq((uint64_t)((const uint8_t *)t->data - (const uint8_t *)hx_gguf_data(g, NULL)) %
                                  aligns[k], 0);
        }
        ck_assert_int_eq(memcmp(hx_gguf_find_tensor(g, "q8_0")->data, fx->q8_0_data, 34), 0);
        hx_gguf_close(g);
        free(fx);
        unlink(path);
    }
    hx_gguf_writer *w;
    HX_ASSERT_OK(hx_gguf_writer_create(&w));
    ck_assert_int_eq(hx_gguf_writer_set_alignment(w, 0), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_gguf_writer_set_alignment(w, 48), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_gguf_writer_set_u32(w, "general.alignment", 3), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_gguf_writer_set_u64(w, "general.alignment", 64), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_gguf_writer_set_str(w, "general.alignment", "64"), HX_ERR_INVALID_ARG);
    /* Setting 64 then 32 leaves the default, and no key. */
    HX_ASSERT_OK(hx_gguf_writer_set_alignment(w, 64));
    HX_ASSERT_OK(hx_gguf_writer_set_alignment(w, 32));
    char path[256];
    tmp_path(path, sizeof path, "align32");
    HX_ASSERT_OK(hx_gguf_writer_write(w, path));
    hx_gguf_writer_free(w);
    hx_gguf *g;
    HX_ASSERT_OK(hx_gguf_open(path, &g));
    ck_assert_uint_eq(hx_gguf_key_count(g), 0);
    ck_assert_uint_eq(hx_gguf_alignment(g), 32);
    hx_gguf_close(g);
    unlink(path);
}
END_TEST

START_TEST(writer_refuses_bad_input)
{
    hx_gguf_writer *w;
    HX_ASSERT_OK(hx_gguf_writer_create(&w));
    uint8_t data[1024] = {0};
    uint64_t ne[] = {32, 2, 1, 1, 1}, zero[] = {4, 0}, big[] = {UINT64_C(1) << 40, UINT64_C(1) << 40};
    HX_ASSERT_OK(hx_gguf_writer_add_tensor(w, "t", HX_TYPE_F32, 2, ne, data));
    ck_assert_int_eq(hx_gguf_writer_add_tensor(w, "t", HX_TYPE_F32, 2, ne, data), HX_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "duplicate tensor name 't'"));
    ck_assert_int_eq(hx_gguf_writer_add_tensor(w, "u", (hx_type)4, 2, ne, data), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_gguf_writer_add_tensor(w, "u", HX_TYPE_F32, 0, ne, data), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_gguf_writer_add_tensor(w, "u", HX_TYPE_F32, 5, ne, data), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_gguf_writer_add_tensor(w, "u", HX_TYPE_F32, 2, zero, data), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_gguf_writer_add_tensor(w, "u", HX_TYPE_F32, 2, big, data), HX_ERR_INVALID_ARG);
    uint64_t ne16[] = {16};
    ck_assert_int_eq(hx_gguf_writer_add_tensor(w, "u", HX_TYPE_Q8_0, 1, ne16, data), HX_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "not a multiple of the q8_0 block size 32"));
    ck_assert_int_eq(hx_gguf_writer_add_tensor(w, "u", HX_TYPE_F32, 2, ne, NULL), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_gguf_writer_set_str(w, NULL, "x"), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_gguf_writer_set_str(w, "k", NULL), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_gguf_writer_set_arr(w, "k", HX_GGUF_STRING, data, 1), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_gguf_writer_set_arr(w, "k", HX_GGUF_INT32, NULL, 1), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_gguf_writer_set_scalar(w, "k", HX_GGUF_ARRAY, data), HX_ERR_INVALID_ARG);
    uint8_t two = 2;
    ck_assert_int_eq(hx_gguf_writer_set_scalar(w, "k", HX_GGUF_BOOL, &two), HX_ERR_INVALID_ARG);
    const char *strs[] = {"a", NULL};
    ck_assert_int_eq(hx_gguf_writer_set_arr_str(w, "k", strs, 2), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_gguf_writer_copy_kv(w, NULL), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_gguf_writer_write(w, "/nonexistent-dir/x.gguf"), HX_ERR_IO);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "/nonexistent-dir/x.gguf"));
    /* Refused calls left nothing behind. */
    char path[256];
    tmp_path(path, sizeof path, "refused");
    HX_ASSERT_OK(hx_gguf_writer_write(w, path));
    hx_gguf_writer_free(w);
    hx_gguf *g;
    HX_ASSERT_OK(hx_gguf_open(path, &g));
    ck_assert_uint_eq(hx_gguf_key_count(g), 0);
    ck_assert_uint_eq(hx_gguf_tensor_count(g), 1);
    hx_gguf_close(g);
    unlink(path);
    hx_gguf_writer_free(NULL);
}
END_TEST

START_TEST(open_errors)
{
    hx_gguf *g = (hx_gguf *)1;
    ck_assert_int_eq(hx_gguf_open("/nonexistent-dir/none.gguf", &g), HX_ERR_IO);
    ck_assert_ptr_null(g);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "/nonexistent-dir/none.gguf"));
    ck_assert_int_eq(hx_gguf_open(CORPUS_DIR, &g), HX_ERR_IO);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "not a regular file"));
    ck_assert_int_eq(hx_gguf_open(NULL, &g), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_gguf_open_memory(NULL, 4, &g), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_gguf_open_memory(NULL, 0, &g), HX_ERR_FORMAT);
    char path[256];
    tmp_path(path, sizeof path, "empty");
    ck_assert_int_eq(hx_gguf_open(path, &g), HX_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), path));
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "not a GGUF file"));
    unlink(path);
    hx_gguf_close(NULL);
    ck_assert_uint_eq(hx_gguf_key_count(NULL), 0);
    ck_assert_ptr_null(hx_gguf_tensor_at(NULL, 0));
}
END_TEST

/* ---- hostile files ------------------------------------------------------ */

static hx_status status_named(const char *name)
{
    static const hx_status all[] = {HX_OK, HX_ERR_FORMAT, HX_ERR_UNSUPPORTED, HX_ERR_IO, HX_ERR_NO_MEMORY};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (strcmp(hx_status_str(all[i]), name) == 0)
            return all[i];
    ck_abort_msg("EXPECTED names unknown status %s", name);
    return HX_OK;
}

START_TEST(corpus)
{
    FILE *f = fopen(CORPUS_DIR "/EXPECTED", "r");
    ck_assert_msg(f != NULL, "cannot open " CORPUS_DIR "/EXPECTED: %s", strerror(errno));
    char line[1024], listed[8192] = " ";
    int broken = 0, total = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '#' || !line[0])
            continue;
        char *name = line, *st = strchr(line, ' ');
        ck_assert_msg(st != NULL, "bad EXPECTED line: %s", line);
        *st++ = '\0';
        char *frag = strchr(st, ' ');
        if (frag)
            *frag++ = '\0';
        else
            frag = "";
        hx_status want = status_named(st);
        char path[sizeof line + 32];
        snprintf(path, sizeof path, CORPUS_DIR "/%s", name);
        size_t n;
        uint8_t *bytes = slurp(path, &n);
        hx_gguf *g = NULL;
        hx_error_clear();
        hx_status got = hx_gguf_open_memory(bytes, n, &g);
        ck_assert_msg(got == want, "%s: expected %s, got %s: %s", name, st, hx_status_str(got), hx_last_error());
        ck_assert_msg(strstr(hx_last_error(), frag) != NULL, "%s: message lacks '%s': %s", name, frag,
                      hx_last_error());
        if (got == HX_OK) {
            char *d = dump(g); /* every accessor on every value */
            free(d);
        } else {
            ck_assert_ptr_null(g);
            broken++;
        }
        hx_gguf_close(g);
        /* From a file, the message also names the path. */
        got = hx_gguf_open(path, &g);
        ck_assert_int_eq(got, want);
        if (got != HX_OK) {
            ck_assert_ptr_nonnull(strstr(hx_last_error(), frag));
            ck_assert_ptr_nonnull(strstr(hx_last_error(), path));
        }
        hx_gguf_close(g);
        free(bytes);
        ck_assert_uint_lt(strlen(listed) + strlen(name) + 2, sizeof listed);
        strcat(listed, name);
        strcat(listed, " ");
        total++;
    }
    fclose(f);
    ck_assert_int_ge(broken, 25);
    /* Every file in the corpus has an expectation. */
    DIR *d = opendir(CORPUS_DIR);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".gguf") != 0)
            continue;
        char needle[300];
        snprintf(needle, sizeof needle, " %s ", e->d_name);
        ck_assert_msg(strstr(listed, needle) != NULL, "%s has no line in EXPECTED", e->d_name);
        files++;
    }
    closedir(d);
    ck_assert_int_eq(files, total);
}
END_TEST

/* Every prefix of a valid file, and every single-byte change to its
 * header, in an exactly-sized buffer: never a crash or over-read. */
START_TEST(every_truncation_and_byte_flip)
{
    char path[256];
    tmp_path(path, sizeof path, "trunc");
    fixture *fx = write_full(path, 0);
    size_t n;
    uint8_t *full = slurp(path, &n);
    hx_gguf *g;
    HX_ASSERT_OK(hx_gguf_open_memory(full, n, &g));
    size_t header = hx_gguf_data_offset(g), end = 0;
    for (uint64_t i = 0; i < hx_gguf_tensor_count(g); i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        if (header + t->offset + t->size > end)
            end = header + t->offset + t->size;
    }
    hx_gguf_close(g);
    ck_assert_uint_lt(end, n); /* the writer pads after the last tensor too */
    for (size_t len = 0; len < n; len++) {
        uint8_t *cut = malloc(len ? len : 1);
        memcpy(cut, full, len);
        hx_status s = hx_gguf_open_memory(cut, len, &g);
        /* Only the padding after the last tensor may go. */
        hx_status want = len < end ? HX_ERR_FORMAT : HX_OK;
        if (s != want)
            ck_abort_msg("prefix of %zu bytes: %s %s", len, hx_status_str(s), hx_last_error());
        hx_gguf_close(g);
        free(cut);
    }
    uint8_t *copy = malloc(n);
    static const uint8_t values[] = {0x00, 0x01, 0x09, 0x0d, 0x7f, 0x80, 0xff};
    for (size_t pos = 0; pos < header; pos++) {
        for (size_t v = 0; v < sizeof values; v++) {
            memcpy(copy, full, n);
            copy[pos] = values[v];
            hx_status s = hx_gguf_open_memory(copy, n, &g);
            if (s != HX_OK && s != HX_ERR_FORMAT && s != HX_ERR_UNSUPPORTED)
                ck_abort_msg("byte %zu = %u: %s", pos, values[v], hx_status_str(s));
            if (s == HX_OK) {
                char *d = dump(g);
                free(d);
                hx_gguf_close(g);
            }
        }
    }
    free(copy);
    free(full);
    free(fx);
    unlink(path);
}
END_TEST

/* ---- llama.cpp's reader and real files ---------------------------------- */

START_TEST(gguf_py_reads_our_files)
{
    static const uint32_t aligns[] = {0, 64};
    for (size_t k = 0; k < 2; k++) {
        char path[256];
        tmp_path(path, sizeof path, "readback");
        fixture *fx = write_full(path, aligns[k]);
        assert_same_as_gguf_py(path);
        free(fx);
        unlink(path);
    }
}
END_TEST

static void vocab_path(char *buf, size_t cap, const char *name)
{
    const char *dir = hx_test_data_dir();
    ck_assert_msg(dir != NULL, "HX_TEST_DATA is not set (make test fetches the data with tests/fetch-vocab.sh)");
    snprintf(buf, cap, "%s/vocab/%s", dir, name);
    ck_assert_msg(access(buf, R_OK) == 0, "test data %s missing: %s", buf, strerror(errno));
}

START_TEST(vocab_files)
{
    static const struct {
        const char *file, *model;
        uint64_t tokens, merges;
    } want[] = {
        {"ggml-vocab-llama-spm.gguf", "llama", 32000, 0},
        {"ggml-vocab-gpt-2.gguf", "gpt2", 50257, 50000},
    };
    for (size_t k = 0; k < 2; k++) {
        char path[1024];
        vocab_path(path, sizeof path, want[k].file);
        hx_gguf *g;
        HX_ASSERT_OK(hx_gguf_open(path, &g));
        ck_assert_uint_eq(hx_gguf_tensor_count(g), 0);
        const char *s;
        uint64_t len;
        HX_ASSERT_OK(hx_gguf_get_str(g, "tokenizer.ggml.model", &s, &len));
        ck_assert_uint_eq(len, strlen(want[k].model));
        ck_assert_int_eq(memcmp(s, want[k].model, len), 0);
        hx_gguf_array a;
        HX_ASSERT_OK(hx_gguf_get_arr(g, "tokenizer.ggml.tokens", &a));
        ck_assert_int_eq(a.type, HX_GGUF_STRING);
        ck_assert_uint_eq(a.n, want[k].tokens);
        HX_ASSERT_OK(hx_gguf_arr_str(&a, a.n - 1, &s, &len));
        ck_assert_uint_gt(len, 0);
        HX_ASSERT_OK(hx_gguf_get_arr(g, "tokenizer.ggml.token_type", &a));
        ck_assert_uint_eq(a.n, want[k].tokens);
        if (want[k].merges) {
            HX_ASSERT_OK(hx_gguf_get_arr(g, "tokenizer.ggml.merges", &a));
            ck_assert_uint_eq(a.n, want[k].merges);
        } else {
            HX_ASSERT_OK(hx_gguf_get_arr(g, "tokenizer.ggml.scores", &a));
            ck_assert_uint_eq(a.n, want[k].tokens);
            HX_ASSERT_OK(hx_gguf_get_arr(g, "tokenizer.ggml.tokens", &a));
            HX_ASSERT_OK(hx_gguf_arr_str(&a, 1, &s, &len));
            ck_assert_uint_eq(len, 3);
            ck_assert_int_eq(memcmp(s, "<s>", 3), 0);
            uint32_t bos;
            int add_bos;
            HX_ASSERT_OK(hx_gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &bos));
            ck_assert_uint_eq(bos, 1);
            HX_ASSERT_OK(hx_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos));
            ck_assert_int_eq(add_bos, 1);
        }
        hx_gguf_close(g);
    }
}
END_TEST

START_TEST(vocab_same_as_gguf_py)
{
    char path[1024];
    vocab_path(path, sizeof path, "ggml-vocab-llama-spm.gguf");
    assert_same_as_gguf_py(path);
}
END_TEST

Suite *suite_gguf(void)
{
    Suite *s = suite_create("gguf");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, roundtrip_scalars);
    tcase_add_test(tc, roundtrip_arrays);
    tcase_add_test(tc, roundtrip_nested_views);
    tcase_add_test(tc, getters_convert_and_refuse);
    tcase_add_test(tc, roundtrip_tensors);
    tcase_add_test(tc, alignment);
    tcase_add_test(tc, writer_refuses_bad_input);
    tcase_add_test(tc, open_errors);
    tcase_add_test(tc, corpus);
    suite_add_tcase(s, tc);
    /* Slow under sanitizers, or run Python: more time, never a timed assertion. */
    TCase *slow = tcase_create("slow");
    tcase_set_timeout(slow, 300);
    tcase_add_test(slow, every_truncation_and_byte_flip);
    tcase_add_test(slow, gguf_py_reads_our_files);
    suite_add_tcase(s, slow);
    if (hx_test_vocab("gguf: llama.cpp's vocabulary files")) {
        TCase *vocab = tcase_create("vocab");
        tcase_set_timeout(vocab, 300);
        tcase_add_test(vocab, vocab_files);
        tcase_add_test(vocab, vocab_same_as_gguf_py);
        suite_add_tcase(s, vocab);
    }
    return s;
}
