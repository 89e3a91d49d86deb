/* Byte-level BPE (`gpt2` vocabularies), as llama.cpp runs it: the text is
 * decoded leniently (bad bytes become U+FFFD), pre-tokenized into words,
 * each word's UTF-8 bytes are spelled in GPT-2's printable byte alphabet,
 * and within a word the adjacent pair with the lowest merge rank merges
 * first (ties go to the leftmost pair) until no pair has a rank. */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_impl.h"
#include "text/unicode.h"
#include "runtime/error.h"

/* GPT-2 keeps printable bytes as their own code points and maps the other
 * 68 bytes, in order, to U+0100 onwards. */
static int self_mapped(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

uint32_t hx_tokenizer_bpe_byte_cp(uint8_t b)
{
    if (self_mapped(b))
        return b;
    if (b <= 0x20)
        return 0x100u + b;
    if (b <= 0xA0)
        return 0x100u + 33 + (b - 0x7Fu);
    return 0x100u + 67; /* 0xAD */
}

int hx_tokenizer_bpe_cp_byte(uint32_t cp)
{
    if (cp < 0x100)
        return self_mapped(cp) ? (int)cp : -1;
    if (cp <= 0x100 + 32)
        return (int)(cp - 0x100);
    if (cp <= 0x100 + 66)
        return (int)(0x7F + cp - 0x100 - 33);
    if (cp == 0x100 + 67)
        return 0xAD;
    return -1;
}

typedef struct {
    int prev, next;
    size_t start, n;
} symbol;

typedef struct {
    int32_t rank;
    int left, right;
    size_t size;
} bigram;

/* Lowest rank first; on a tie the leftmost pair. */
static int before(const bigram *a, const bigram *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

typedef struct {
    const hx_tokenizer *t;
    char *word;      /* the current word in the byte alphabet */
    size_t wcap;
    symbol *sym;
    size_t scap;
    bigram *q;
    size_t qn, qcap;
} session;

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *np = realloc(*p, c * elem);
    if (!np)
        return -1;
    *p = np;
    *cap = c;
    return 0;
}

static int q_push(session *s, bigram b)
{
    if (grow((void **)&s->q, &s->qcap, s->qn + 1, sizeof *s->q))
        return -1;
    size_t i = s->qn++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(&b, &s->q[parent]))
            break;
        s->q[i] = s->q[parent];
        i = parent;
    }
    s->q[i] = b;
    return 0;
}

static bigram q_pop(session *s)
{
    bigram top = s->q[0], last = s->q[--s->qn];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= s->qn)
            break;
        if (c + 1 < s->qn && before(&s->q[c + 1], &s->q[c]))
            c++;
        if (!before(&s->q[c], &last))
            break;
        s->q[i] = s->q[c];
        i = c;
    }
    if (s->qn)
        s->q[i] = last;
    return top;
}

static int try_pair(session *s, int left, int right)
{
    if (left < 0 || right < 0)
        return 0;
    const symbol *l = &s->sym[left], *r = &s->sym[right];
    int32_t rank = hx_tokenizer_merge_rank(s->t, s->word + l->start, l->n, s->word + r->start, r->n);
    if (rank < 0)
        return 0;
    bigram b = {rank, left, right, l->n + r->n};
    return q_push(s, b);
}

static hx_status emit(session *s, const symbol *sym, hx_tokvec *out)
{
    const char *p = s->word + sym->start;
    int32_t id = hx_tokenizer_find(s->t, p, sym->n);
    if (id >= 0)
        return hx_tokenizer_push(out, id);
    /* llama.cpp's fallback: single raw bytes that happen to be tokens. */
    for (size_t i = 0; i < sym->n; i++) {
        id = hx_tokenizer_find(s->t, p + i, 1);
        if (id >= 0) {
            hx_status st = hx_tokenizer_push(out, id);
            if (st != HX_OK)
                return st;
        }
    }
    return HX_OK;
}

static hx_status encode_word(session *s, const uint32_t *cps, size_t ncp, hx_tokvec *out)
{
    /* Each code point: at most 4 UTF-8 bytes, each spelled in <= 2 bytes. */
    if (grow((void **)&s->word, &s->wcap, 8 * ncp, 1))
        return hx_error(HX_ERR_NO_MEMORY, "tokenizer: word of %zu code points", ncp);
    size_t w = 0;
    for (size_t i = 0; i < ncp; i++) {
        uint8_t u[4], m[4];
        size_t nu = hx_unicode_encode(cps[i], u);
        for (size_t j = 0; j < nu; j++) {
            size_t nm = hx_unicode_encode(hx_tokenizer_bpe_byte_cp(u[j]), m);
            memcpy(s->word + w, m, nm);
            w += nm;
        }
    }
    if (s->t->ignore_merges) {
        int32_t id = hx_tokenizer_find(s->t, s->word, w);
        if (id >= 0)
            return hx_tokenizer_push(out, id);
    }
    if (grow((void **)&s->sym, &s->scap, w, sizeof *s->sym))
        return hx_error(HX_ERR_NO_MEMORY, "tokenizer: word of %zu bytes", w);
    int nsym = 0;
    for (size_t pos = 0; pos < w;) {
        size_t cl = hx_unicode_seq_len((uint8_t)s->word[pos]);
        if (cl > w - pos)
            cl = w - pos;
        s->sym[nsym] = (symbol){nsym - 1, pos + cl == w ? -1 : nsym + 1, pos, cl};
        nsym++;
        pos += cl;
    }
    s->qn = 0;
    for (int i = 1; i < nsym; i++)
        if (try_pair(s, i - 1, i))
            goto oom;
    while (s->qn) {
        bigram b = q_pop(s);
        symbol *l = &s->sym[b.left], *r = &s->sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
            continue; /* outdated: one side merged since */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0)
            s->sym[r->next].prev = b.left;
        if (try_pair(s, l->prev, b.left) || try_pair(s, b.left, l->next))
            goto oom;
    }
    for (int i = nsym ? 0 : -1; i != -1; i = s->sym[i].next) {
        hx_status st = emit(s, &s->sym[i], out);
        if (st != HX_OK)
            return st;
    }
    return HX_OK;
oom:
    return hx_error(HX_ERR_NO_MEMORY, "tokenizer: merge queue");
}

hx_status hx_tokenizer_bpe_encode(const hx_tokenizer *t, const char *text, size_t len,
                                  hx_tokvec *out)
{
    uint32_t *cps = malloc((len ? len : 1) * sizeof *cps);
    if (!cps)
        return hx_error(HX_ERR_NO_MEMORY, "tokenizer: %zu bytes of text", len);
    size_t ncp = 0;
    for (size_t pos = 0; pos < len;) {
        size_t used;
        cps[ncp++] = hx_unicode_decode((const uint8_t *)text + pos, len - pos, &used);
        pos += used;
    }
    uint32_t *words = NULL;
    size_t nwords = 0;
    hx_status st = hx_tokenizer_pre_split(t->pre, cps, ncp, &words, &nwords);
    session s;
    memset(&s, 0, sizeof s);
    s.t = t;
    size_t at = 0;
    for (size_t i = 0; i < nwords && st == HX_OK; i++) {
        st = encode_word(&s, cps + at, words[i], out);
        at += words[i];
    }
    free(s.word);
    free(s.sym);
    free(s.q);
    free(words);
    free(cps);
    return st;
}
