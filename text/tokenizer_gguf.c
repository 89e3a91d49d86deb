/* Reading a tokenizer from GGUF metadata (tokenizer.ggml.*), and writing the
 * byte vocabulary of synthetic models. */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_impl.h"
#include "runtime/error.h"

#define KEY(k) "tokenizer.ggml." k

/* A string value as a NUL-terminated copy in `buf`; absent -> "". */
static hx_status get_name(const hx_gguf *g, const char *key, char *buf, size_t cap, int required)
{
    const char *s;
    uint64_t n;
    buf[0] = '\0';
    hx_status st = hx_gguf_get_str(g, key, &s, &n);
    if (st == HX_ERR_NOT_FOUND && !required)
        return HX_OK;
    if (st != HX_OK)
        return hx_error_context(st, "tokenizer");
    if (n >= cap || memchr(s, '\0', n))
        return hx_error(HX_ERR_FORMAT, "tokenizer: %s is not a short name", key);
    memcpy(buf, s, n);
    buf[n] = '\0';
    return HX_OK;
}

static hx_status get_strings(const hx_gguf *g, const char *key, uint64_t *count,
                             const char ***v, size_t **lens)
{
    hx_gguf_array a;
    hx_status st = hx_gguf_get_arr(g, key, &a);
    if (st != HX_OK)
        return hx_error_context(st, "tokenizer");
    if (a.type != HX_GGUF_STRING)
        return hx_error(HX_ERR_FORMAT, "tokenizer: %s is not an array of strings", key);
    if (a.n > (uint64_t)INT32_MAX / 2)
        return hx_error(HX_ERR_FORMAT, "tokenizer: %s has %llu entries", key,
                        (unsigned long long)a.n);
    *count = a.n;
    *v = malloc((a.n ? a.n : 1) * sizeof **v);
    *lens = malloc((a.n ? a.n : 1) * sizeof **lens);
    if (!*v || !*lens)
        return hx_error(HX_ERR_NO_MEMORY, "tokenizer: %s", key);
    for (uint64_t i = 0; i < a.n; i++) {
        uint64_t n;
        st = hx_gguf_arr_str(&a, i, &(*v)[i], &n);
        if (st != HX_OK)
            return hx_error_context(st, "tokenizer: %s[%llu]", key, (unsigned long long)i);
        (*lens)[i] = (size_t)n;
    }
    return HX_OK;
}

/* An optional per-token numeric array with at least n entries. */
static hx_status get_numbers(const hx_gguf *g, const char *key, uint32_t n, int floats,
                             void **out)
{
    hx_gguf_array a;
    *out = NULL;
    hx_status st = hx_gguf_get_arr(g, key, &a);
    if (st == HX_ERR_NOT_FOUND)
        return HX_OK;
    if (st != HX_OK)
        return hx_error_context(st, "tokenizer");
    if (a.n < n)
        return hx_error(HX_ERR_FORMAT, "tokenizer: %s has %llu entries for %u tokens", key,
                        (unsigned long long)a.n, n);
    float *f = floats ? malloc((n ? n : 1) * sizeof *f) : NULL;
    int32_t *v = floats ? NULL : malloc((n ? n : 1) * sizeof *v);
    if (!f && !v)
        return hx_error(HX_ERR_NO_MEMORY, "tokenizer: %s", key);
    for (uint32_t i = 0; i < n && st == HX_OK; i++) {
        int64_t x;
        if (floats && (a.type == HX_GGUF_FLOAT32 || a.type == HX_GGUF_FLOAT64)) {
            st = hx_gguf_arr_f32(&a, i, &f[i]);
        } else {
            st = hx_gguf_arr_i64(&a, i, &x);
            if (st == HX_OK && floats)
                f[i] = (float)x;
            else if (st == HX_OK)
                v[i] = x < INT32_MIN || x > INT32_MAX ? -1 : (int32_t)x;
        }
    }
    if (st != HX_OK) {
        free(f);
        free(v);
        return hx_error_context(st, "tokenizer: %s", key);
    }
    *out = floats ? (void *)f : (void *)v;
    return HX_OK;
}

static hx_status get_id(const hx_gguf *g, const char *key, int32_t *id)
{
    int64_t v;
    hx_status st = hx_gguf_get_i64(g, key, &v);
    if (st == HX_ERR_NOT_FOUND) {
        *id = HX_TOKEN_DEFAULT;
        return HX_OK;
    }
    if (st != HX_OK)
        return hx_error_context(st, "tokenizer");
    /* A negative id says "none"; one past the vocabulary keeps the default,
     * as in llama.cpp (hx_tokenizer_create checks the range). */
    *id = v < 0 ? -1 : v > INT32_MAX ? HX_TOKEN_DEFAULT : (int32_t)v;
    return HX_OK;
}

static hx_status get_flag(const hx_gguf *g, const char *key, int *flag)
{
    hx_status st = hx_gguf_get_bool(g, key, flag);
    if (st == HX_ERR_NOT_FOUND) {
        *flag = -1;
        return HX_OK;
    }
    return st == HX_OK ? HX_OK : hx_error_context(st, "tokenizer");
}

hx_status hx_tokenizer_load(const hx_gguf *g, hx_tokenizer **out)
{
    if (!g || !out)
        return hx_error(HX_ERR_INVALID_ARG, "hx_tokenizer_load: NULL argument");
    *out = NULL;
    char model[64], pre[64], name[256];
    hx_tokenizer_desc d = hx_tokenizer_desc_default();
    uint64_t ntok = 0, nmerge = 0;
    const char **tokens = NULL, **merges = NULL;
    size_t *tlen = NULL, *mlen = NULL;
    float *scores = NULL;
    int32_t *types = NULL;

    hx_status st = get_name(g, KEY("model"), model, sizeof model, 1);
    if (st == HX_OK)
        st = get_name(g, KEY("pre"), pre, sizeof pre, 0);
    if (st == HX_OK && get_name(g, "general.name", name, sizeof name, 0) != HX_OK)
        name[0] = '\0'; /* only a hint; a long or odd name is no error */
    if (st == HX_OK && strcmp(model, "llama") != 0 && strcmp(model, "gpt2") != 0)
        st = hx_error(HX_ERR_UNSUPPORTED, "tokenizer model '%s' (supported: llama, gpt2)", model);
    if (st == HX_OK)
        st = get_strings(g, KEY("tokens"), &ntok, &tokens, &tlen);
    if (st == HX_OK)
        st = get_numbers(g, KEY("scores"), (uint32_t)ntok, 1, (void **)&scores);
    if (st == HX_OK)
        st = get_numbers(g, KEY("token_type"), (uint32_t)ntok, 0, (void **)&types);
    if (st == HX_OK && strcmp(model, "gpt2") == 0)
        st = get_strings(g, KEY("merges"), &nmerge, &merges, &mlen);
    struct {
        const char *key;
        int32_t *id;
    } ids[] = {{KEY("bos_token_id"), &d.bos},       {KEY("eos_token_id"), &d.eos},
               {KEY("unknown_token_id"), &d.unk},   {KEY("eot_token_id"), &d.eot},
               {KEY("eom_token_id"), &d.eom},       {KEY("separator_token_id"), &d.sep},
               {KEY("padding_token_id"), &d.pad}};
    for (size_t i = 0; i < sizeof ids / sizeof *ids && st == HX_OK; i++)
        st = get_id(g, ids[i].key, ids[i].id);
    if (st == HX_OK)
        st = get_flag(g, KEY("add_space_prefix"), &d.add_space_prefix);
    if (st == HX_OK)
        st = get_flag(g, KEY("add_bos_token"), &d.add_bos);
    if (st == HX_OK)
        st = get_flag(g, KEY("add_eos_token"), &d.add_eos);
    if (st == HX_OK) {
        d.model = model;
        d.pre = pre;
        d.name = name;
        d.n_tokens = (uint32_t)ntok;
        d.tokens = tokens;
        d.token_lens = tlen;
        d.scores = scores;
        d.types = types;
        d.n_merges = (uint32_t)nmerge;
        d.merges = merges;
        d.merge_lens = mlen;
        st = hx_tokenizer_create(&d, out);
    }
    free(tokens);
    free(tlen);
    free(merges);
    free(mlen);
    free(scores);
    free(types);
    return st;
}

static hx_status tokenizer_open(const char *path, hx_tokenizer **out)
{
    if (!path || !out)
        return hx_error(HX_ERR_INVALID_ARG, "hx_tokenizer_open: NULL argument");
    *out = NULL;
    hx_gguf *g;
    hx_status st = hx_gguf_open(path, &g);
    if (st != HX_OK)
        return st;
    st = hx_tokenizer_load(g, out);
    hx_gguf_close(g);
    if (st != HX_OK)
        hx_error_context(st, "%s", path);
    return st;
}

hx_status hx_tokenizer_open(const char *path, hx_tokenizer **out)
{
    hx_api_enter();
    return hx_api_leave(tokenizer_open(path, out));
}

void hx_tokenizer_close(hx_tokenizer *t) { hx_tokenizer_free(t); }

hx_status hx_tokenizer_write_bytes_kv(hx_gguf_writer *w)
{
    hx_tokenizer *t;
    hx_status st = hx_tokenizer_create_bytes(&t);
    if (st != HX_OK)
        return st;
    const char *text[HX_TOKENIZER_BYTES_VOCAB];
    int32_t types[HX_TOKENIZER_BYTES_VOCAB];
    for (int32_t i = 0; i < HX_TOKENIZER_BYTES_VOCAB; i++) {
        text[i] = hx_tokenizer_text(t, i, NULL);
        types[i] = hx_tokenizer_attr(t, i) & HX_TOKEN_ATTR_CONTROL ? HX_TOKEN_TYPE_CONTROL
                                                                   : HX_TOKEN_TYPE_NORMAL;
    }
    st = hx_gguf_writer_set_str(w, KEY("model"), "gpt2");
    if (st == HX_OK)
        st = hx_gguf_writer_set_str(w, KEY("pre"), "qwen2");
    if (st == HX_OK)
        st = hx_gguf_writer_set_arr_str(w, KEY("tokens"), text, HX_TOKENIZER_BYTES_VOCAB);
    if (st == HX_OK)
        st = hx_gguf_writer_set_arr(w, KEY("token_type"), HX_GGUF_INT32, types,
                                    HX_TOKENIZER_BYTES_VOCAB);
    if (st == HX_OK) /* llama.cpp wants the key even when there are no merges */
        st = hx_gguf_writer_set_arr_str(w, KEY("merges"), text, 0);
    if (st == HX_OK)
        st = hx_gguf_writer_set_u32(w, KEY("bos_token_id"), HX_TOKENIZER_BYTES_BOS);
    if (st == HX_OK)
        st = hx_gguf_writer_set_u32(w, KEY("eos_token_id"), HX_TOKENIZER_BYTES_EOS);
    if (st == HX_OK)
        st = hx_gguf_writer_set_bool(w, KEY("add_bos_token"), 1);
    hx_tokenizer_free(t); /* text[] pointed into it */
    return st;
}
