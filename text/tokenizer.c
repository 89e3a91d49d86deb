/* Building a tokenizer from arrays: the vocabulary, its lookup tables, the
 * special tokens, and the flags llama.cpp derives from the model type and
 * pre-tokenizer name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_impl.h"
#include "text/unicode.h"
#include "runtime/error.h"
#include "text/grammar.h"

static uint64_t hash_bytes(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 0x100000001B3ull;
    }
    return h;
}

#define HASH_SEED 0xCBF29CE484222325ull

static uint32_t table_size(uint32_t n)
{
    uint32_t cap = 16;
    while (cap < 2u * n)
        cap <<= 1;
    return cap;
}

int32_t hx_tokenizer_find(const hx_tokenizer *t, const char *text, size_t len)
{
    if (!t || (!text && len))
        return -1;
    uint32_t i = (uint32_t)hash_bytes(HASH_SEED, text, len) & t->hash_mask;
    for (;; i = (i + 1) & t->hash_mask) {
        uint32_t slot = t->hash[i];
        if (!slot)
            return -1;
        uint32_t id = slot - 1;
        if (t->len[id] == len && memcmp(t->blob + t->off[id], text, len) == 0)
            return (int32_t)id;
    }
}

static uint64_t merge_hash(const char *a, size_t alen, const char *b, size_t blen)
{
    uint64_t h = (hash_bytes(HASH_SEED, a, alen) ^ alen) * 0x100000001B3ull;
    return hash_bytes(h, b, blen);
}

int32_t hx_tokenizer_merge_rank(const hx_tokenizer *t, const char *a, size_t alen,
                                const char *b, size_t blen)
{
    if (!t->n_merges)
        return -1;
    uint32_t i = (uint32_t)merge_hash(a, alen, b, blen) & t->mhash_mask;
    for (;; i = (i + 1) & t->mhash_mask) {
        uint32_t slot = t->mhash[i];
        if (!slot)
            return -1;
        uint32_t m = slot - 1;
        const char *l = t->mblob + t->moff[m];
        if (t->mleft[m] == alen && t->mright[m] == blen && memcmp(l, a, alen) == 0 &&
            memcmp(l + alen + 1, b, blen) == 0)
            return (int32_t)m;
    }
}

hx_status hx_tokenizer_push(hx_tokvec *v, int32_t id)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        int32_t *p = realloc(v->v, cap * sizeof *p);
        if (!p)
            return hx_error(HX_ERR_NO_MEMORY, "tokenizer: %zu ids", cap);
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = id;
    return HX_OK;
}

hx_tokenizer_desc hx_tokenizer_desc_default(void)
{
    hx_tokenizer_desc d;
    memset(&d, 0, sizeof d);
    d.bos = d.eos = d.unk = d.eot = d.eom = d.sep = d.pad = HX_TOKEN_DEFAULT;
    d.add_space_prefix = d.add_bos = d.add_eos = -1;
    return d;
}

void hx_tokenizer_free(hx_tokenizer *t)
{
    if (!t)
        return;
    free(t->blob);
    free(t->off);
    free(t->len);
    free(t->score);
    free(t->attr);
    free(t->eog);
    free(t->hash);
    free(t->mblob);
    free(t->moff);
    free(t->mleft);
    free(t->mright);
    free(t->mhash);
    free(t->special);
    hx_grammar_vocab_free(atomic_load(&t->grammar_vocab));
    free(t);
}

/* Pre-tokenizer names llama.cpp knows, for the regexes implemented here,
 * with the flags it sets for each. */
static const struct {
    const char *name;
    hx_pre_kind kind;
    int ignore_merges, clean_spaces, add_bos;
} pre_names[] = {
    {"default", HX_PRE_DEFAULT, 0, 1, 0},
    {"gpt-2", HX_PRE_GPT2, 0, 1, 0},
    {"phi-2", HX_PRE_GPT2, 0, 1, 0},
    {"jina-es", HX_PRE_GPT2, 0, 1, 0},
    {"jina-de", HX_PRE_GPT2, 0, 1, 0},
    {"jina-v2-es", HX_PRE_GPT2, 0, 1, 0},
    {"jina-v2-de", HX_PRE_GPT2, 0, 1, 0},
    {"gigachat", HX_PRE_GPT2, 0, 1, 0},
    {"mpt", HX_PRE_GPT2, 0, 1, 0},
    {"olmo", HX_PRE_GPT2, 0, 1, 0},
    {"jais", HX_PRE_GPT2, 0, 1, 0},
    {"llama3", HX_PRE_LLAMA3, 1, 1, 1},
    {"llama-v3", HX_PRE_LLAMA3, 1, 1, 1},
    {"llama-bpe", HX_PRE_LLAMA3, 1, 1, 1},
    {"falcon3", HX_PRE_LLAMA3, 1, 1, 1},
    {"pixtral", HX_PRE_LLAMA3, 1, 1, 1},
    {"dbrx", HX_PRE_LLAMA3, 0, 1, 0},
    {"smaug-bpe", HX_PRE_LLAMA3, 0, 1, 0},
    {"qwen2", HX_PRE_QWEN2, 0, 0, 0},
    {"deepseek-r1-qwen", HX_PRE_QWEN2, 0, 0, 0},
    {"stablelm2", HX_PRE_QWEN2, 0, 1, 0},
    {"megrez", HX_PRE_QWEN2, 0, 1, 0},
    {"starcoder", HX_PRE_STARCODER, 0, 1, 0},
    {"refact", HX_PRE_STARCODER, 0, 1, 0},
    {"command-r", HX_PRE_STARCODER, 0, 0, 0},
    {"smollm", HX_PRE_STARCODER, 0, 0, 0},
    {"codeshell", HX_PRE_STARCODER, 0, 1, 0},
    {"exaone", HX_PRE_STARCODER, 0, 1, 0},
    {"minerva-7b", HX_PRE_STARCODER, 0, 1, 0},
    {"falcon", HX_PRE_FALCON, 0, 1, 0},
};

/* Token texts that end generation, llama.cpp's list (llama-vocab.cpp); it
 * also makes them control tokens, so plain text never spells them and a
 * prompt's "</s>" is that token wherever the vocabulary has one. */
static const char *const eog_names[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
    "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>", "[e~[",
};
static const char *const eot_names[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>",          "<end_of_turn>", "<|endoftext|>",
    "<EOT>",      "_<EOT>",     "<|end_of_text|>", "<end_of_utterance>",
};

static int name_in(const char *s, size_t n, const char *const *names, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (strlen(names[i]) == n && memcmp(names[i], s, n) == 0)
            return 1;
    return 0;
}

static uint16_t attr_of_type(int32_t type)
{
    switch (type) {
    case HX_TOKEN_TYPE_NORMAL: return HX_TOKEN_ATTR_NORMAL;
    case HX_TOKEN_TYPE_UNKNOWN: return HX_TOKEN_ATTR_UNKNOWN;
    case HX_TOKEN_TYPE_CONTROL: return HX_TOKEN_ATTR_CONTROL;
    case HX_TOKEN_TYPE_USER_DEFINED: return HX_TOKEN_ATTR_USER_DEFINED;
    case HX_TOKEN_TYPE_UNUSED: return HX_TOKEN_ATTR_UNUSED;
    case HX_TOKEN_TYPE_BYTE: return HX_TOKEN_ATTR_BYTE;
    default: return 0;
    }
}

static size_t str_len(const char *const *v, const size_t *lens, uint32_t i)
{
    return lens ? lens[i] : (v[i] ? strlen(v[i]) : 0);
}

static hx_status copy_tokens(hx_tokenizer *t, const hx_tokenizer_desc *d)
{
    size_t total = 0;
    for (uint32_t i = 0; i < d->n_tokens; i++) {
        size_t n = str_len(d->tokens, d->token_lens, i);
        if (n && !d->tokens[i])
            return hx_error(HX_ERR_INVALID_ARG, "tokenizer: token %u has no text", i);
        if (n > UINT32_MAX / 2)
            return hx_error(HX_ERR_FORMAT, "tokenizer: token %u is %zu bytes long", i, n);
        total += (n ? n : 24) + 1; /* an empty token becomes "[EMPTY_i]" */
    }
    t->blob = malloc(total ? total : 1);
    t->off = malloc(d->n_tokens * sizeof *t->off);
    t->len = malloc(d->n_tokens * sizeof *t->len);
    t->score = calloc(d->n_tokens, sizeof *t->score);
    t->attr = malloc(d->n_tokens * sizeof *t->attr);
    t->eog = calloc(d->n_tokens, 1);
    t->hash_mask = table_size(d->n_tokens) - 1;
    t->hash = calloc((size_t)t->hash_mask + 1, sizeof *t->hash);
    if (!t->blob || !t->off || !t->len || !t->score || !t->attr || !t->eog || !t->hash)
        return hx_error(HX_ERR_NO_MEMORY, "tokenizer: %u tokens", d->n_tokens);
    size_t pos = 0;
    for (uint32_t i = 0; i < d->n_tokens; i++) {
        size_t n = str_len(d->tokens, d->token_lens, i);
        char *dst = t->blob + pos;
        if (n)
            memcpy(dst, d->tokens[i], n);
        else /* llama.cpp's placeholder, so the token stays unique and findable */
            n = (size_t)snprintf(dst, 25, "[EMPTY_%u]", i);
        dst[n] = '\0';
        t->off[i] = pos;
        t->len[i] = (uint32_t)n;
        pos += n + 1;
        if (t->len[i] > t->max_len)
            t->max_len = t->len[i];
        if (d->scores)
            t->score[i] = d->scores[i];
        t->attr[i] = d->types ? attr_of_type(d->types[i]) : HX_TOKEN_ATTR_NORMAL;

        uint32_t h = (uint32_t)hash_bytes(HASH_SEED, dst, n) & t->hash_mask;
        for (; t->hash[h]; h = (h + 1) & t->hash_mask) {
            uint32_t o = t->hash[h] - 1;
            if (t->len[o] == n && memcmp(t->blob + t->off[o], dst, n) == 0)
                return hx_error(HX_ERR_FORMAT, "tokenizer: duplicate token '%.*s' (ids %u and %u)",
                                (int)(n > 64 ? 64 : n), dst, o, i);
        }
        t->hash[h] = i + 1;
    }
    t->n = d->n_tokens;
    return HX_OK;
}

static hx_status copy_merges(hx_tokenizer *t, const hx_tokenizer_desc *d)
{
    uint32_t nm = d->n_merges;
    if (!nm)
        return HX_OK;
    size_t total = 0;
    for (uint32_t i = 0; i < nm; i++) {
        size_t n = str_len(d->merges, d->merge_lens, i);
        if (n && !d->merges[i])
            return hx_error(HX_ERR_INVALID_ARG, "tokenizer: merge %u has no text", i);
        if (n > UINT32_MAX / 2)
            return hx_error(HX_ERR_FORMAT, "tokenizer: merge %u is %zu bytes long", i, n);
        total += n + 2;
    }
    t->mblob = malloc(total);
    t->moff = malloc(nm * sizeof *t->moff);
    t->mleft = malloc(nm * sizeof *t->mleft);
    t->mright = malloc(nm * sizeof *t->mright);
    t->mhash_mask = table_size(nm) - 1;
    t->mhash = calloc((size_t)t->mhash_mask + 1, sizeof *t->mhash);
    if (!t->mblob || !t->moff || !t->mleft || !t->mright || !t->mhash)
        return hx_error(HX_ERR_NO_MEMORY, "tokenizer: %u merges", nm);
    t->n_merges = nm;
    size_t pos = 0;
    for (uint32_t i = 0; i < nm; i++) {
        size_t n = str_len(d->merges, d->merge_lens, i);
        const char *s = d->merges[i];
        /* "left right", split at the first space after the first byte; a
         * merge without one pairs two empty strings, as in llama.cpp. */
        const char *sp = n > 1 ? memchr(s + 1, ' ', n - 1) : NULL;
        size_t l = sp ? (size_t)(sp - s) : 0, r = sp ? n - l - 1 : 0;
        char *dst = t->mblob + pos;
        memcpy(dst, s, l);
        dst[l] = ' ';
        memcpy(dst + l + 1, sp ? sp + 1 : "", r);
        dst[l + 1 + r] = '\0';
        t->moff[i] = pos;
        t->mleft[i] = (uint32_t)l;
        t->mright[i] = (uint32_t)r;
        pos += l + r + 2;
        if (hx_tokenizer_merge_rank(t, dst, l, dst + l + 1, r) >= 0)
            continue; /* the first occurrence of a pair keeps its rank */
        uint32_t h = (uint32_t)merge_hash(dst, l, dst + l + 1, r) & t->mhash_mask;
        while (t->mhash[h])
            h = (h + 1) & t->mhash_mask;
        t->mhash[h] = i + 1;
    }
    return HX_OK;
}

/* Special ids: the model's default unless the desc names one in range. */
static int32_t pick_id(const hx_tokenizer *t, int32_t given, int32_t dflt)
{
    if (dflt >= (int32_t)t->n)
        dflt = -1;
    if (given == HX_TOKEN_DEFAULT || given >= (int32_t)t->n || given < -1)
        return dflt;
    return given;
}

static int cmp_special(const void *a, const void *b, void *ctx)
{
    const hx_tokenizer *t = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (t->len[x] != t->len[y])
        return t->len[x] > t->len[y] ? -1 : 1;
    return (x > y) - (x < y);
}

static int contains_nocase(const char *s, const char *needle)
{
    size_t n = strlen(needle);
    for (; *s; s++) {
        size_t i = 0;
        while (i < n && s[i] && (s[i] | 0x20) == needle[i])
            i++;
        if (i == n)
            return 1;
    }
    return 0;
}

static void set_rstrip(hx_tokenizer *t, const char *text, int on)
{
    int32_t id = hx_tokenizer_find(t, text, strlen(text));
    if (id < 0)
        return;
    if (on)
        t->attr[id] |= HX_TOKEN_ATTR_RSTRIP;
    else
        t->attr[id] &= (uint16_t)~HX_TOKEN_ATTR_RSTRIP;
}

/* llama.cpp's per-model token attributes: Phi-3's special tokens swallow
 * the white space that follows them, except <unk>, <s> and <|endoftext|>. */
static void apply_name_rules(hx_tokenizer *t, const char *name)
{
    if (!name || !(contains_nocase(name, "phi-3") || contains_nocase(name, "phi3")))
        return;
    for (uint32_t i = 0; i < t->n; i++)
        if (t->attr[i] & (HX_TOKEN_ATTR_CONTROL | HX_TOKEN_ATTR_USER_DEFINED | HX_TOKEN_ATTR_UNKNOWN))
            t->attr[i] |= HX_TOKEN_ATTR_RSTRIP;
    set_rstrip(t, "</s>", 1);
    set_rstrip(t, "<unk>", 0);
    set_rstrip(t, "<s>", 0);
    set_rstrip(t, "<|endoftext|>", 0);
}

static hx_status find_specials(hx_tokenizer *t, const hx_tokenizer_desc *d)
{
    int32_t eot = -1;
    for (uint32_t i = 0; i < t->n; i++) {
        const char *s = t->blob + t->off[i];
        if (name_in(s, t->len[i], eog_names, sizeof eog_names / sizeof *eog_names)) {
            t->eog[i] = 1;
            t->attr[i] |= HX_TOKEN_ATTR_CONTROL;
        }
        if (eot < 0 && name_in(s, t->len[i], eot_names, sizeof eot_names / sizeof *eot_names))
            eot = (int32_t)i;
    }
    int spm = t->kind == HX_VOCAB_SPM;
    t->bos = pick_id(t, d->bos, spm ? 1 : 11);
    t->eos = pick_id(t, d->eos, spm ? 2 : 11);
    t->unk = pick_id(t, d->unk, spm ? 0 : -1);
    t->eot = pick_id(t, d->eot, eot);
    t->eom = pick_id(t, d->eom, -1);
    t->sep = pick_id(t, d->sep, -1);
    t->pad = pick_id(t, d->pad, -1);
    if (t->eom < 0)
        t->eom = hx_tokenizer_find(t, "<|eom_id|>", 10);
    int32_t ends[] = {t->eos, t->eot, t->eom};
    for (size_t i = 0; i < 3; i++)
        if (ends[i] >= 0)
            t->eog[ends[i]] = 1;

    apply_name_rules(t, d->name);
    t->special = malloc(t->n * sizeof *t->special);
    if (!t->special)
        return hx_error(HX_ERR_NO_MEMORY, "tokenizer: special token list");
    for (uint32_t i = 0; i < t->n; i++)
        if (t->attr[i] &
            (HX_TOKEN_ATTR_CONTROL | HX_TOKEN_ATTR_USER_DEFINED | HX_TOKEN_ATTR_UNKNOWN))
            t->special[t->n_special++] = (int32_t)i;
    qsort_r(t->special, t->n_special, sizeof *t->special, cmp_special, t);
    return HX_OK;
}

static void find_byte_tokens(hx_tokenizer *t)
{
    static const char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; b++) {
        char s[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
        int32_t id = hx_tokenizer_find(t, s, 6);
        if (id < 0) {
            char c = (char)b;
            id = hx_tokenizer_find(t, &c, 1);
        }
        t->byte_token[b] = id;
    }
}

static hx_status measure_pieces(hx_tokenizer *t)
{
    /* A piece is at most 3 bytes per text byte (a bad byte becomes U+FFFD). */
    char *buf = malloc(3 * (size_t)t->max_len + 4);
    if (!buf)
        return hx_error(HX_ERR_NO_MEMORY, "tokenizer: piece buffer");
    uint32_t most = 1;
    for (uint32_t i = 0; i < t->n; i++) {
        size_t n = hx_tokenizer_piece(t, (int32_t)i, 1, 0, buf);
        if (n > most)
            most = (uint32_t)n;
    }
    t->max_piece = most;
    free(buf);
    return HX_OK;
}

hx_status hx_tokenizer_create(const hx_tokenizer_desc *d, hx_tokenizer **out)
{
    if (!d || !out)
        return hx_error(HX_ERR_INVALID_ARG, "hx_tokenizer_create: NULL argument");
    *out = NULL;
    hx_vocab_kind kind;
    if (d->model && strcmp(d->model, "llama") == 0)
        kind = HX_VOCAB_SPM;
    else if (d->model && strcmp(d->model, "gpt2") == 0)
        kind = HX_VOCAB_BPE;
    else
        return hx_error(HX_ERR_UNSUPPORTED, "tokenizer model '%s' (supported: llama, gpt2)",
                        d->model ? d->model : "(none)");
    if (d->n_tokens == 0 || !d->tokens)
        return hx_error(HX_ERR_FORMAT, "tokenizer: empty vocabulary");
    if (d->n_tokens > (uint32_t)INT32_MAX / 2)
        return hx_error(HX_ERR_FORMAT, "tokenizer: %u tokens is too many", d->n_tokens);
    if (d->n_merges && !d->merges)
        return hx_error(HX_ERR_INVALID_ARG, "tokenizer: %u merges without text", d->n_merges);

    hx_tokenizer *t = calloc(1, sizeof *t);
    if (!t)
        return hx_error(HX_ERR_NO_MEMORY, "tokenizer");
    t->kind = kind;
    t->pre = HX_PRE_DEFAULT;
    if (kind == HX_VOCAB_SPM) {
        t->add_space_prefix = 1;
        t->add_bos = 1;
    } else {
        const char *pre = d->pre && *d->pre ? d->pre : "default";
        size_t i, count = sizeof pre_names / sizeof *pre_names;
        for (i = 0; i < count && strcmp(pre_names[i].name, pre) != 0; i++)
            ;
        if (i == count) {
            hx_tokenizer_free(t);
            return hx_error(HX_ERR_UNSUPPORTED, "tokenizer: unknown pre-tokenizer '%s'", pre);
        }
        t->pre = pre_names[i].kind;
        t->ignore_merges = pre_names[i].ignore_merges;
        t->clean_spaces = pre_names[i].clean_spaces;
        t->add_bos = pre_names[i].add_bos;
    }
    if (d->add_space_prefix >= 0)
        t->add_space_prefix = d->add_space_prefix != 0;
    if (d->add_bos >= 0)
        t->add_bos = d->add_bos != 0;
    if (d->add_eos >= 0)
        t->add_eos = d->add_eos != 0;

    hx_status s = copy_tokens(t, d);
    if (s == HX_OK && kind == HX_VOCAB_BPE)
        s = copy_merges(t, d);
    if (s == HX_OK)
        s = find_specials(t, d);
    if (s == HX_OK) {
        find_byte_tokens(t);
        s = measure_pieces(t);
    }
    if (s != HX_OK) {
        hx_tokenizer_free(t);
        return s;
    }
    *out = t;
    return HX_OK;
}

hx_status hx_tokenizer_create_bytes(hx_tokenizer **out)
{
    char text[256][3];
    const char *tokens[HX_TOKENIZER_BYTES_VOCAB];
    size_t lens[HX_TOKENIZER_BYTES_VOCAB];
    int32_t types[HX_TOKENIZER_BYTES_VOCAB];
    for (int b = 0; b < 256; b++) {
        uint8_t u[4];
        lens[b] = hx_unicode_encode(hx_tokenizer_bpe_byte_cp((uint8_t)b), u);
        memcpy(text[b], u, lens[b]);
        tokens[b] = text[b];
        types[b] = HX_TOKEN_TYPE_NORMAL;
    }
    tokens[256] = "<s>";
    tokens[257] = "</s>";
    lens[256] = 3;
    lens[257] = 4;
    types[256] = types[257] = HX_TOKEN_TYPE_CONTROL;
    hx_tokenizer_desc d = hx_tokenizer_desc_default();
    d.model = "gpt2";
    d.pre = "qwen2"; /* no merges, so only its lack of space clean-up matters */
    d.n_tokens = HX_TOKENIZER_BYTES_VOCAB;
    d.tokens = tokens;
    d.token_lens = lens;
    d.types = types;
    d.bos = HX_TOKENIZER_BYTES_BOS;
    d.eos = HX_TOKENIZER_BYTES_EOS;
    d.add_bos = 1;
    return hx_tokenizer_create(&d, out);
}

unsigned hx_tokenizer_attr(const hx_tokenizer *t, int32_t id)
{
    return t && id >= 0 && (uint32_t)id < t->n ? t->attr[id] : 0;
}

const char *hx_tokenizer_text(const hx_tokenizer *t, int32_t id, size_t *len)
{
    if (!t || id < 0 || (uint32_t)id >= t->n) {
        if (len)
            *len = 0;
        return NULL;
    }
    if (len)
        *len = t->len[id];
    return t->blob + t->off[id];
}

float hx_tokenizer_score(const hx_tokenizer *t, int32_t id)
{
    return t && id >= 0 && (uint32_t)id < t->n ? t->score[id] : 0.0f;
}

int hx_tokenizer_wants_bos(const hx_tokenizer *t) { return t && t->add_bos && t->bos >= 0; }
int hx_tokenizer_wants_eos(const hx_tokenizer *t) { return t && t->add_eos && t->eos >= 0; }
int32_t hx_tokenizer_vocab_size(const hx_tokenizer *t) { return t ? (int32_t)t->n : 0; }
int32_t hx_tokenizer_bos(const hx_tokenizer *t) { return t ? t->bos : -1; }
int32_t hx_tokenizer_eos(const hx_tokenizer *t) { return t ? t->eos : -1; }

int hx_tokenizer_is_eog(const hx_tokenizer *t, int32_t id)
{
    return t && id >= 0 && (uint32_t)id < t->n && t->eog[id];
}
