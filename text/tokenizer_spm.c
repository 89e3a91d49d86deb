/* SentencePiece BPE (`llama` vocabularies), as llama.cpp runs it: spaces
 * become U+2581, the text splits into UTF-8 characters, and the adjacent
 * pair whose concatenation is the best-scoring token merges first (ties go
 * to the leftmost pair) until no pair forms a token.  A piece that is not a
 * token falls back to its bytes' <0xXX> tokens. */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_impl.h"
#include "text/unicode.h"
#include "runtime/error.h"

typedef struct {
    int prev, next;
    size_t start;
    size_t n; /* bytes; 0 once merged into its left neighbour */
} symbol;

typedef struct {
    float score;
    int left, right;
    size_t size;
} bigram;

typedef struct {
    bigram *v;
    size_t n, cap;
} heap;

/* Higher score first; on a tie the leftmost pair. */
static int before(const bigram *a, const bigram *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static int heap_push(heap *h, bigram b)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        bigram *p = realloc(h->v, cap * sizeof *p);
        if (!p)
            return -1;
        h->v = p;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(&b, &h->v[parent]))
            break;
        h->v[i] = h->v[parent];
        i = parent;
    }
    h->v[i] = b;
    return 0;
}

static bigram heap_pop(heap *h)
{
    bigram top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && before(&h->v[c + 1], &h->v[c]))
            c++;
        if (!before(&h->v[c], &last))
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n)
        h->v[i] = last;
    return top;
}

typedef struct {
    const hx_tokenizer *t;
    const char *text;
    symbol *sym;
    heap q;
} session;

static int try_pair(session *s, int left, int right)
{
    if (left < 0 || right < 0)
        return 0;
    size_t size = s->sym[left].n + s->sym[right].n;
    int32_t id = hx_tokenizer_find(s->t, s->text + s->sym[left].start, size);
    if (id < 0)
        return 0;
    bigram b = {s->t->score[id], left, right, size};
    return heap_push(&s->q, b);
}

static hx_status emit(session *s, const symbol *sym, hx_tokvec *out)
{
    const char *p = s->text + sym->start;
    int32_t id = hx_tokenizer_find(s->t, p, sym->n);
    if (id >= 0)
        return hx_tokenizer_push(out, id);
    for (size_t i = 0; i < sym->n; i++) {
        uint8_t b = (uint8_t)p[i];
        /* llama.cpp throws when a byte has no token; <unk> keeps the text
         * encodable with such vocabularies (e.g. without <0xXX> tokens). */
        id = s->t->byte_token[b] >= 0 ? s->t->byte_token[b] : s->t->unk;
        if (id < 0)
            return hx_error(HX_ERR_UNSUPPORTED,
                            "tokenizer: the vocabulary has no token for byte 0x%02X", b);
        hx_status st = hx_tokenizer_push(out, id);
        if (st != HX_OK)
            return st;
    }
    return HX_OK;
}

hx_status hx_tokenizer_spm_encode(const hx_tokenizer *t, const char *text, size_t len,
                                  int space_prefix, hx_tokvec *out)
{
    static const char space[] = "\xE2\x96\x81"; /* U+2581 */
    size_t spaces = 0;
    for (size_t i = 0; i < len; i++)
        spaces += text[i] == ' ';
    size_t n = len + 2 * spaces + (space_prefix ? 3 : 0);
    char *buf = malloc(n ? n : 1);
    symbol *sym = malloc((n ? n : 1) * sizeof *sym);
    session s = {t, buf, sym, {NULL, 0, 0}};
    hx_status st = HX_OK;
    if (!buf || !sym) {
        st = hx_error(HX_ERR_NO_MEMORY, "tokenizer: %zu bytes of text", len);
        goto done;
    }
    size_t w = 0;
    if (space_prefix) {
        memcpy(buf, space, 3);
        w = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(buf + w, space, 3);
            w += 3;
        } else {
            buf[w++] = text[i];
        }
    }

    int nsym = 0;
    for (size_t pos = 0; pos < n;) {
        size_t cl = hx_unicode_seq_len((uint8_t)buf[pos]);
        if (cl > n - pos)
            cl = n - pos;
        sym[nsym].prev = nsym - 1;
        sym[nsym].next = pos + cl == n ? -1 : nsym + 1;
        sym[nsym].start = pos;
        sym[nsym].n = cl;
        nsym++;
        pos += cl;
    }
    for (int i = 1; i < nsym; i++)
        if (try_pair(&s, i - 1, i) < 0)
            goto oom;
    while (s.q.n) {
        bigram b = heap_pop(&s.q);
        symbol *l = &sym[b.left], *r = &sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
            continue; /* one side changed since this pair was queued */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0)
            sym[r->next].prev = b.left;
        if (try_pair(&s, l->prev, b.left) < 0 || try_pair(&s, b.left, l->next) < 0)
            goto oom;
    }
    for (int i = nsym ? 0 : -1; i != -1 && st == HX_OK; i = sym[i].next)
        st = emit(&s, &sym[i], out);
    goto done;
oom:
    st = hx_error(HX_ERR_NO_MEMORY, "tokenizer: merge queue");
done:
    free(s.q.v);
    free(sym);
    free(buf);
    return st;
}
