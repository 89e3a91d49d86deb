/* The vocabulary against a grammar (text/grammar.h): every token's piece in
 * one byte trie, walked depth-first with the matcher's stack sets, so a
 * prefix shared by many tokens is matched once and a prefix the grammar
 * refuses prunes every token below it. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_impl.h"
#include "runtime/error.h"
#include "text/grammar_match.h"

struct hx_grammar_vocab {
    uint32_t n_vocab;
    /* Trie nodes; node 0 is the root (the empty prefix). */
    uint32_t *first_child, *next_sibling, *tok_first;
    uint8_t *byte;
    uint32_t n_nodes, cap_nodes;
    uint32_t *tok_next;  /* the next token ending at the same node        */
    uint32_t *piece_off; /* token i's piece: pieces[piece_off[i]..+len]   */
    uint32_t *piece_len;
    char *pieces;
    uint8_t *eog;
    uint32_t max_len;
};

#define NONE UINT32_MAX

static uint32_t new_node(hx_grammar_vocab *v, uint8_t b)
{
    if (v->n_nodes == v->cap_nodes) {
        uint32_t cap = v->cap_nodes ? 2 * v->cap_nodes : 1024;
        uint32_t *fc = realloc(v->first_child, cap * sizeof *fc);
        if (fc)
            v->first_child = fc;
        uint32_t *ns = realloc(v->next_sibling, cap * sizeof *ns);
        if (ns)
            v->next_sibling = ns;
        uint32_t *tf = realloc(v->tok_first, cap * sizeof *tf);
        if (tf)
            v->tok_first = tf;
        uint8_t *by = realloc(v->byte, cap);
        if (by)
            v->byte = by;
        if (!fc || !ns || !tf || !by)
            return NONE;
        v->cap_nodes = cap;
    }
    uint32_t n = v->n_nodes++;
    v->first_child[n] = v->next_sibling[n] = v->tok_first[n] = NONE;
    v->byte[n] = b;
    return n;
}

void hx_grammar_vocab_free(hx_grammar_vocab *v)
{
    if (!v)
        return;
    free(v->first_child);
    free(v->next_sibling);
    free(v->tok_first);
    free(v->byte);
    free(v->tok_next);
    free(v->piece_off);
    free(v->piece_len);
    free(v->pieces);
    free(v->eog);
    free(v);
}

hx_status hx_grammar_vocab_create(const hx_tokenizer *t, hx_grammar_vocab **out)
{
    if (out)
        *out = NULL;
    if (!t || !out)
        return hx_error(HX_ERR_INVALID_ARG, "hx_grammar_vocab_create: NULL argument");
    hx_grammar_vocab *v = calloc(1, sizeof *v);
    char *buf = malloc(t->max_piece + 1);
    size_t cap = (size_t)t->n * 8 + 64, used = 0;
    if (v) {
        v->n_vocab = t->n;
        v->tok_next = malloc(t->n * sizeof *v->tok_next);
        v->piece_off = malloc(t->n * sizeof *v->piece_off);
        v->piece_len = malloc(t->n * sizeof *v->piece_len);
        v->eog = malloc(t->n);
        v->pieces = malloc(cap);
    }
    if (!v || !buf || !v->tok_next || !v->piece_off || !v->piece_len || !v->eog || !v->pieces ||
        new_node(v, 0) == NONE)
        goto oom;
    for (uint32_t id = 0; id < t->n; id++) {
        /* The text a token adds to the output (control tokens add none). */
        size_t n = hx_tokenizer_piece(t, (int32_t)id, 0, 0, buf);
        v->eog[id] = (uint8_t)hx_tokenizer_is_eog(t, (int32_t)id);
        v->tok_next[id] = NONE;
        if (used + n > cap) {
            char *p = realloc(v->pieces, cap = 2 * (used + n));
            if (!p)
                goto oom;
            v->pieces = p;
        }
        memcpy(v->pieces + used, buf, n);
        v->piece_off[id] = (uint32_t)used;
        v->piece_len[id] = (uint32_t)n;
        used += n;
        if (n > v->max_len)
            v->max_len = (uint32_t)n;
        if (!n)
            continue;
        uint32_t node = 0;
        for (size_t i = 0; i < n; i++) {
            uint8_t b = (uint8_t)buf[i];
            uint32_t c = v->first_child[node];
            while (c != NONE && v->byte[c] != b)
                c = v->next_sibling[c];
            if (c == NONE) {
                if ((c = new_node(v, b)) == NONE)
                    goto oom;
                v->next_sibling[c] = v->first_child[node];
                v->first_child[node] = c;
            }
            node = c;
        }
        v->tok_next[id] = v->tok_first[node];
        v->tok_first[node] = id;
    }
    free(buf);
    *out = v;
    return HX_OK;
oom:
    free(buf);
    hx_grammar_vocab_free(v);
    return hx_error(HX_ERR_NO_MEMORY, "grammar: vocabulary trie");
}

hx_status hx_grammar_vocab_of(const hx_tokenizer *t, const hx_grammar_vocab **out)
{
    hx_tokenizer *tk = (hx_tokenizer *)t; /* the cache is not the tokenizer's value */
    hx_grammar_vocab *v = atomic_load(&tk->grammar_vocab), *expected = NULL;
    if (!v) {
        hx_status st = hx_grammar_vocab_create(t, &v);
        if (st)
            return st;
        if (!atomic_compare_exchange_strong(&tk->grammar_vocab, &expected, v)) {
            hx_grammar_vocab_free(v);
            v = expected;
        }
    }
    *out = v;
    return HX_OK;
}

int hx_grammar_allows(const hx_grammar_state *s, const hx_grammar_vocab *v, int32_t id)
{
    if (!s || !v || id < 0 || (uint32_t)id >= v->n_vocab)
        return 0;
    if (v->eog[id])
        return hx_grammar_can_end(s);
    uint32_t n = v->piece_len[id];
    if (!n)
        return 0;
    /* A trial on a copy: the matcher leaves the state unchanged on a
     * rejection, but an accepted piece must not advance it here. */
    hx_gpartial pt;
    const hx_gset *cur = hx_grammar_state_set(s, &pt);
    const hx_grammar *g = hx_grammar_state_grammar(s);
    hx_gctx *c = hx_grammar_state_ctx((hx_grammar_state *)s);
    hx_gset a = {0}, b = {0};
    const hx_gset *src = cur;
    int ok = 1;
    for (uint32_t i = 0; i < n && ok; i++) {
        hx_gset *dst = src == &a ? &b : &a;
        int adv;
        ok = hx_gset_accept_byte(g, c, src, &pt, (uint8_t)v->pieces[v->piece_off[id] + i], dst, &adv) > 0;
        if (ok && adv)
            src = dst;
    }
    hx_gset_free(&a);
    hx_gset_free(&b);
    return ok;
}

/* One level of the walk: the node's set (or its parent's while a
 * character is incomplete) and partial character. */
typedef struct {
    hx_gset own;
    const hx_gset *set;
    hx_gpartial pt;
    uint32_t child; /* the next child of this level's node to try */
} level;

static int same_set(const hx_gset *a, const hx_gset *b)
{
    return a->n == b->n && a->n_data == b->n_data && !memcmp(a->data, b->data, a->n_data * sizeof *a->data);
}

hx_status hx_grammar_mask(const hx_grammar_state *s, const hx_grammar_vocab *v, float *logits)
{
    if (!s || !v || !logits)
        return hx_error(HX_ERR_INVALID_ARG, "hx_grammar_mask: NULL argument");
    uint8_t *ok = calloc(v->n_vocab, 1);
    level *lv = calloc((size_t)v->max_len + 2, sizeof *lv);
    if (!ok || !lv) {
        free(ok);
        free(lv);
        return hx_error(HX_ERR_NO_MEMORY, "grammar: mask");
    }
    const hx_grammar *g = hx_grammar_state_grammar(s);
    hx_gctx *c = hx_grammar_state_ctx((hx_grammar_state *)s);
    hx_status st = HX_OK;
    const hx_gset *root = hx_grammar_state_set(s, &lv[0].pt);
    lv[0].set = root;
    lv[0].child = v->first_child[0];
    /* Inside a string or a repetition most characters lead back to the
     * state they left: what an ASCII character does to the starting set
     * is remembered (0 not known, 1 the same set, 2 refused, 3 another
     * set), so a subtree that stays in that state costs a lookup a node. */
    uint8_t memo[128] = {0};
    int depth = 0;
    while (depth >= 0) {
        level *L = &lv[depth];
        uint32_t node = L->child;
        if (node == NONE) {
            depth--;
            continue;
        }
        L->child = v->next_sibling[node];
        level *N = &lv[depth + 1];
        N->pt = L->pt;
        uint8_t b = v->byte[node];
        int known = L->set == root && !L->pt.remain && b < 0x80 ? memo[b] : 0;
        if (known == 2)
            continue;
        if (known == 1) {
            N->set = root;
        } else {
            int adv, r = hx_gset_accept_byte(g, c, L->set, &N->pt, b, &N->own, &adv);
            if (r < 0) {
                st = c->st;
                break;
            }
            int same = r && adv && same_set(&N->own, root);
            if (L->set == root && !L->pt.remain && b < 0x80)
                memo[b] = !r ? 2 : same ? 1 : 3;
            if (!r)
                continue;
            N->set = same ? root : adv ? &N->own : L->set;
        }
        for (uint32_t id = v->tok_first[node]; id != NONE; id = v->tok_next[id])
            ok[id] = 1;
        N->child = v->first_child[node];
        depth++;
    }
    if (st == HX_OK) {
        int can_end = hx_grammar_can_end(s);
        for (uint32_t id = 0; id < v->n_vocab; id++)
            if (v->eog[id] ? !can_end : !ok[id])
                logits[id] = -INFINITY;
    }
    for (uint32_t i = 0; i < v->max_len + 2; i++)
        hx_gset_free(&lv[i].own);
    free(lv);
    free(ok);
    return st;
}

hx_status hx_grammar_accept_token(hx_grammar_state *s, const hx_grammar_vocab *v, int32_t id)
{
    if (!s || !v || id < 0 || (uint32_t)id >= v->n_vocab)
        return hx_error(HX_ERR_INVALID_ARG, "hx_grammar_accept_token: bad argument");
    if (v->eog[id]) {
        if (!hx_grammar_can_end(s))
            return hx_error(HX_ERR_INVALID_ARG, "grammar: the text cannot end here");
        return HX_OK;
    }
    uint32_t n = v->piece_len[id];
    int r = n ? hx_grammar_accept(s, v->pieces + v->piece_off[id], n) : 0;
    if (r < 0)
        return hx_grammar_state_ctx(s)->st;
    if (!r)
        return hx_error(HX_ERR_INVALID_ARG, "grammar: token %d does not continue the grammar", id);
    return HX_OK;
}
