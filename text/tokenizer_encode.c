/* Text to ids: special tokens are cut out of the text first (longest first,
 * every occurrence, left to right), then each stretch of plain text goes to
 * the vocabulary's encoder, as llama.cpp's tokenize does. */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_impl.h"
#include "runtime/error.h"

/* A stretch of the input: plain text, or a special token (id >= 0). */
typedef struct {
    int32_t id;
    size_t off, len;
} fragment;

typedef struct {
    fragment *v;
    size_t n, cap;
} fraglist;

static int frag_put(fraglist *l, int32_t id, size_t off, size_t len)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        fragment *p = realloc(l->v, cap * sizeof *p);
        if (!p)
            return -1;
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n++] = (fragment){id, off, len};
    return 0;
}

/* llama.cpp trims with C isspace() here, not Unicode white space. */
static int c_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* Cuts every occurrence of special token `id` out of the text fragments. */
static int split_on(const hx_tokenizer *t, const char *text, int32_t id, const fraglist *in,
                    fraglist *out)
{
    const char *tok = t->blob + t->off[id];
    size_t tl = t->len[id];
    unsigned attr = t->attr[id];
    out->n = 0;
    for (size_t i = 0; i < in->n; i++) {
        fragment f = in->v[i];
        if (f.id >= 0 || f.len < tl) {
            if (frag_put(out, f.id, f.off, f.len))
                return -1;
            continue;
        }
        size_t off = f.off, len = f.len;
        while (len) {
            const char *m = memmem(text + off, len, tok, tl);
            if (!m) {
                if (frag_put(out, -1, off, len))
                    return -1;
                break;
            }
            size_t at = (size_t)(m - text);
            size_t left = at - off;
            if (attr & HX_TOKEN_ATTR_LSTRIP)
                while (left && c_space(text[off + left - 1]))
                    left--;
            if (left && frag_put(out, -1, off, left))
                return -1;
            if (frag_put(out, id, at, tl))
                return -1;
            size_t roff = at + tl, rlen = off + len - roff;
            if (attr & HX_TOKEN_ATTR_RSTRIP)
                while (rlen && c_space(text[roff])) {
                    roff++;
                    rlen--;
                }
            off = roff;
            len = rlen;
        }
    }
    return 0;
}

static hx_status partition(const hx_tokenizer *t, const char *text, size_t len, int parse_special,
                           fraglist *out)
{
    fraglist tmp = {NULL, 0, 0};
    out->n = 0;
    if (len && frag_put(out, -1, 0, len))
        goto oom;
    for (uint32_t i = 0; i < t->n_special; i++) {
        int32_t id = t->special[i];
        /* Without parse_special only user-defined tokens are cut out. */
        if (!parse_special && (t->attr[id] & (HX_TOKEN_ATTR_CONTROL | HX_TOKEN_ATTR_UNKNOWN)))
            continue;
        if (split_on(t, text, id, out, &tmp))
            goto oom;
        fraglist swap = *out;
        *out = tmp;
        tmp = swap;
    }
    free(tmp.v);
    return HX_OK;
oom:
    free(tmp.v);
    return hx_error(HX_ERR_NO_MEMORY, "tokenizer: special token split");
}

static hx_status encode(const hx_tokenizer *t, const char *text, size_t len, int add_bos, int add_eos,
                        int parse_special, int32_t *ids, size_t cap, size_t *n)
{
    *n = 0;
    /* Symbol indices are ints and a space may grow to 3 bytes. */
    if (len > (size_t)INT32_MAX / 4)
        return hx_error(HX_ERR_RANGE, "hx_tokenizer_encode: %zu bytes of text is too long", len);
    if (add_bos && t->bos < 0)
        return hx_error(HX_ERR_UNSUPPORTED, "hx_tokenizer_encode: the model has no BOS token");

    fraglist frags = {NULL, 0, 0};
    hx_tokvec out = {NULL, 0, 0};
    hx_status st = partition(t, text, len, parse_special, &frags);
    if (st == HX_OK && add_bos)
        st = hx_tokenizer_push(&out, t->bos);
    int prev_special = 1; /* SentencePiece prefixes a space to text at the start */
    for (size_t i = 0; i < frags.n && st == HX_OK; i++) {
        const fragment *f = &frags.v[i];
        if (f->id >= 0) {
            st = hx_tokenizer_push(&out, f->id);
            prev_special = 1;
        } else if (t->kind == HX_VOCAB_SPM) {
            st = hx_tokenizer_spm_encode(t, text + f->off, f->len,
                                         t->add_space_prefix && prev_special, &out);
            prev_special = 0;
        } else {
            st = hx_tokenizer_bpe_encode(t, text + f->off, f->len, &out);
        }
    }
    free(frags.v);
    if (st == HX_OK && add_eos)
        st = hx_tokenizer_push(&out, t->eos);
    if (st == HX_OK) {
        *n = out.n;
        if (out.n > cap)
            st = hx_error(HX_ERR_RANGE, "hx_tokenizer_encode: %zu ids do not fit in %zu", out.n,
                          cap);
        else if (out.n)
            memcpy(ids, out.v, out.n * sizeof *ids);
    }
    free(out.v);
    return st;
}

hx_status hx_tokenizer_encode(const hx_tokenizer *t, const char *text, size_t len, int add_bos,
                              int parse_special, int32_t *ids, size_t cap, size_t *n)
{
    hx_api_enter();
    if (!t || !n || (!text && len) || (!ids && cap))
        return hx_api_leave(hx_error(HX_ERR_INVALID_ARG, "hx_tokenizer_encode: NULL argument"));
    return hx_api_leave(encode(t, text, len, add_bos, 0, parse_special, ids, cap, n));
}

hx_status hx_tokenizer_encode_prompt(const hx_tokenizer *t, const char *text, size_t len, int add_special,
                                     int parse_special, int32_t *ids, size_t cap, size_t *n)
{
    if (!t || !n || (!text && len) || (!ids && cap))
        return hx_error(HX_ERR_INVALID_ARG, "hx_model_tokenize: NULL argument");
    return encode(t, text, len, add_special && hx_tokenizer_wants_bos(t), add_special && hx_tokenizer_wants_eos(t),
                  parse_special, ids, cap, n);
}
