/* Matching text against a grammar (text/grammar.h): sets of stacks of
 * positions, advanced one code point at a time. */
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "text/grammar_match.h"

void hx_gset_free(hx_gset *s)
{
    free(s->data);
    free(s->off);
    free(s->slot_idx);
    free(s->slot_stamp);
    memset(s, 0, sizeof *s);
}

static int grow(void **p, uint32_t *cap, uint32_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    uint32_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, (size_t)c * size);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

static uint32_t stack_len(const hx_gset *s, uint32_t i)
{
    return s->data[s->off[i]];
}

static const uint32_t *stack_pos(const hx_gset *s, uint32_t i)
{
    return s->data + s->off[i] + 2;
}

static uint32_t hash_of(const uint32_t *p, uint32_t n)
{
    uint32_t h = 2166136261u ^ n;
    for (uint32_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

static int same_stack(const hx_gset *s, uint32_t i, const uint32_t *p, uint32_t n, uint32_t h)
{
    return s->data[s->off[i] + 1] == h && stack_len(s, i) == n && !memcmp(stack_pos(s, i), p, n * sizeof *p);
}

/* Makes room in the index for one more stack (at most half full). */
static hx_status index_room(hx_gset *s)
{
    if (s->n + 1 <= s->slot_cap / 2)
        return HX_OK;
    uint32_t cap = s->slot_cap ? 2 * s->slot_cap : 64;
    uint32_t *idx = malloc(cap * sizeof *idx), *stamp = calloc(cap, sizeof *stamp);
    if (!idx || !stamp) {
        free(idx);
        free(stamp);
        return hx_error(HX_ERR_NO_MEMORY, "grammar: parse stacks");
    }
    free(s->slot_idx);
    free(s->slot_stamp);
    s->slot_idx = idx;
    s->slot_stamp = stamp;
    s->slot_cap = cap;
    s->stamp = 1;
    for (uint32_t i = 0; i < s->n; i++) {
        uint32_t k = s->data[s->off[i] + 1] & (cap - 1);
        while (stamp[k] == 1)
            k = (k + 1) & (cap - 1);
        stamp[k] = 1;
        idx[k] = i;
    }
    return HX_OK;
}

/* Each stack is stored as [length, hash, positions...]; with `dedupe`
 * a stack already in the set is not added again. */
static hx_status gset_add(hx_gset *s, const uint32_t *p, uint32_t n, int dedupe)
{
    uint32_t h = hash_of(p, n), k = 0;
    if (dedupe) {
        hx_status st = index_room(s);
        if (st)
            return st;
        for (k = h & (s->slot_cap - 1); s->slot_stamp[k] == s->stamp; k = (k + 1) & (s->slot_cap - 1))
            if (same_stack(s, s->slot_idx[k], p, n, h))
                return HX_OK;
        if (s->n >= HX_GRAMMAR_MAX_STACKS)
            return hx_error(HX_ERR_RANGE, "grammar: more than %u live parses at once (an ambiguous grammar)",
                            HX_GRAMMAR_MAX_STACKS);
    }
    if (n > HX_GRAMMAR_MAX_STACK_DEPTH)
        return hx_error(HX_ERR_RANGE, "grammar: a parse nested past %u levels", HX_GRAMMAR_MAX_STACK_DEPTH);
    if (grow((void **)&s->off, &s->cap_off, s->n + 1, sizeof *s->off) ||
        grow((void **)&s->data, &s->cap_data, s->n_data + n + 2, sizeof *s->data))
        return hx_error(HX_ERR_NO_MEMORY, "grammar: parse stacks");
    if (dedupe) {
        s->slot_stamp[k] = s->stamp;
        s->slot_idx[k] = s->n;
    }
    s->off[s->n++] = s->n_data;
    s->data[s->n_data++] = n;
    s->data[s->n_data++] = h;
    memcpy(s->data + s->n_data, p, n * sizeof *p);
    s->n_data += n;
    return HX_OK;
}

void hx_gset_clear(hx_gset *s)
{
    s->n = 0;
    s->n_data = 0;
    if (s->slot_cap && ++s->stamp == 0) {
        memset(s->slot_stamp, 0, s->slot_cap * sizeof *s->slot_stamp);
        s->stamp = 1;
    }
}

/* The element after the character set that starts at `pos`. */
static uint32_t after_set(const hx_grammar *g, uint32_t pos)
{
    pos++;
    while (g->el[pos].type == HX_GE_CHAR_RNG_UPPER || g->el[pos].type == HX_GE_CHAR_ALT)
        pos++;
    return pos;
}

/* Whether the set at `pos` holds a code point in [lo, hi]: for a whole
 * character lo == hi; for an incomplete UTF-8 sequence, the range of the
 * characters it can still become. */
static int set_meets(const hx_grammar *g, uint32_t pos, uint32_t lo, uint32_t hi)
{
    const hx_gelem *e = g->el + pos;
    if (e->type == HX_GE_CHAR_ANY)
        return 1;
    int positive = e->type == HX_GE_CHAR;
    int hit = 0, covers = 0;
    do {
        uint32_t a = e->value, b = a;
        if (e[1].type == HX_GE_CHAR_RNG_UPPER) {
            b = e[1].value;
            e += 2;
        } else {
            e += 1;
        }
        if (a <= hi && b >= lo)
            hit = 1;
        if (a <= lo && b >= hi)
            covers = 1;
    } while (e->type == HX_GE_CHAR_ALT);
    /* A negated set meets the range unless one of its items takes all of
     * it (close enough for a partial character: the next byte decides). */
    return positive ? hit : !covers;
}

/* Expands the stack p[0..n) until every top is a character set, adding
 * each result to `out`: a rule reference on top is replaced, once per
 * alternative, by that alternative's first element above what follows
 * the reference. */
static hx_status expand(const hx_grammar *g, hx_gctx *c, const uint32_t *p, uint32_t n, hx_gset *out)
{
    hx_gset_clear(&c->work);
    hx_status st = gset_add(&c->work, p, n, 0);
    if (st)
        return st;
    while (c->work.n) {
        uint32_t i = --c->work.n;
        uint32_t len = stack_len(&c->work, i);
        if (grow((void **)&c->scratch, &c->cap_scratch, len + 2, sizeof *c->scratch))
            return hx_error(HX_ERR_NO_MEMORY, "grammar: parse stacks");
        memcpy(c->scratch, stack_pos(&c->work, i), len * sizeof *c->scratch);
        c->work.n_data = c->work.off[i];
        if (len == 0 || hx_gelem_is_char(&g->el[c->scratch[len - 1]])) {
            if ((st = gset_add(out, c->scratch, len, 1)))
                return st;
            continue;
        }
        uint32_t ref = c->scratch[len - 1];
        uint32_t next = ref + 1;
        uint32_t base = len - 1;
        if (!hx_gelem_is_end(&g->el[next]))
            c->scratch[base++] = next;
        const hx_gelem *rule = g->el + g->rule[g->el[ref].value];
        for (uint32_t alt = (uint32_t)(rule - g->el);;) {
            uint32_t m = base;
            if (!hx_gelem_is_end(&g->el[alt]))
                c->scratch[m++] = alt;
            if ((st = gset_add(&c->work, c->scratch, m, 0)))
                return st;
            if ((c->steps += m + 2) > HX_GRAMMAR_MAX_WORK)
                return hx_error(HX_ERR_RANGE,
                                "grammar: one character took more than %u parse steps (an ambiguous grammar)",
                                HX_GRAMMAR_MAX_WORK);
            while (!hx_gelem_is_end(&g->el[alt]))
                alt++;
            if (g->el[alt].type == HX_GE_END)
                break;
            alt++;
        }
        if (c->work.n > 64u * HX_GRAMMAR_MAX_STACKS)
            return hx_error(HX_ERR_RANGE, "grammar: more than %u live parses at once (an ambiguous grammar)",
                            HX_GRAMMAR_MAX_STACKS);
    }
    return HX_OK;
}

hx_status hx_gset_start(const hx_grammar *g, hx_gctx *c, hx_gset *out)
{
    hx_status st = HX_OK;
    hx_gset_clear(out);
    c->steps = 0;
    const hx_gelem *rule = g->el + g->rule[g->root];
    for (uint32_t alt = (uint32_t)(rule - g->el);;) {
        if (!hx_gelem_is_end(&g->el[alt])) {
            st = expand(g, c, &alt, 1, out);
        } else {
            st = gset_add(out, &alt, 0, 1);
        }
        if (st)
            return st;
        while (!hx_gelem_is_end(&g->el[alt]))
            alt++;
        if (g->el[alt].type == HX_GE_END)
            break;
        alt++;
    }
    return HX_OK;
}

/* Advances every stack whose top holds code point cp. */
static hx_status accept_cp(const hx_grammar *g, hx_gctx *c, const hx_gset *in, uint32_t cp, hx_gset *out)
{
    hx_gset_clear(out);
    c->steps = 0;
    for (uint32_t i = 0; i < in->n; i++) {
        uint32_t n = stack_len(in, i);
        if (!n)
            continue;
        const uint32_t *p = stack_pos(in, i);
        uint32_t top = p[n - 1];
        if (!set_meets(g, top, cp, cp))
            continue;
        if (grow((void **)&c->scratch2, &c->cap_scratch2, n, sizeof *c->scratch2))
            return hx_error(HX_ERR_NO_MEMORY, "grammar: parse stacks");
        memcpy(c->scratch2, p, (n - 1) * sizeof *p);
        uint32_t m = n - 1, next = after_set(g, top);
        if (!hx_gelem_is_end(&g->el[next]))
            c->scratch2[m++] = next;
        hx_status st = expand(g, c, c->scratch2, m, out);
        if (st)
            return st;
    }
    return HX_OK;
}

static int partial_meets(const hx_grammar *g, const hx_gset *in, const hx_gpartial *pt)
{
    uint32_t lo = pt->value << (6 * pt->remain), hi = lo | ((1u << (6 * pt->remain)) - 1);
    if (lo < pt->min)
        lo = pt->min;
    if (hi > 0x10FFFF)
        hi = 0x10FFFF;
    if (lo > hi)
        return 0;
    for (uint32_t i = 0; i < in->n; i++) {
        uint32_t n = stack_len(in, i);
        if (n && set_meets(g, stack_pos(in, i)[n - 1], lo, hi))
            return 1;
    }
    return 0;
}

int hx_gset_accept_byte(const hx_grammar *g, hx_gctx *c, const hx_gset *in, hx_gpartial *pt, uint8_t b,
                        hx_gset *out, int *advanced)
{
    *advanced = 0;
    uint32_t cp;
    if (pt->remain == 0) {
        if (b < 0x80) {
            cp = b;
        } else {
            /* Lead bytes of 2-, 3- and 4-byte sequences; C0, C1 and F5..FF
             * never start a valid character. */
            if (b >= 0xC2 && b <= 0xDF) {
                *pt = (hx_gpartial){b & 0x1F, 1, 0x80};
            } else if (b >= 0xE0 && b <= 0xEF) {
                *pt = (hx_gpartial){b & 0x0F, 2, 0x800};
            } else if (b >= 0xF0 && b <= 0xF4) {
                *pt = (hx_gpartial){b & 0x07, 3, 0x10000};
            } else {
                return 0;
            }
            return partial_meets(g, in, pt);
        }
    } else {
        if ((b & 0xC0) != 0x80)
            return 0;
        pt->value = (pt->value << 6) | (b & 0x3F);
        if (--pt->remain)
            return partial_meets(g, in, pt);
        cp = pt->value;
        /* Overlong forms, surrogates and values past U+10FFFF are no
         * characters. */
        if (cp < pt->min || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
            return 0;
        *pt = (hx_gpartial){0, 0, 0};
    }
    if ((c->st = accept_cp(g, c, in, cp, out)))
        return -1;
    *advanced = 1;
    return out->n > 0;
}

int hx_gset_can_end(const hx_gset *s, const hx_gpartial *pt)
{
    if (pt->remain)
        return 0;
    for (uint32_t i = 0; i < s->n; i++)
        if (stack_len(s, i) == 0)
            return 1;
    return 0;
}

void hx_gctx_free(hx_gctx *c)
{
    hx_gset_free(&c->work);
    free(c->scratch);
    free(c->scratch2);
    memset(c, 0, sizeof *c);
}

/* ---- the state of one generation ---- */

struct hx_grammar_state {
    const hx_grammar *g;
    hx_gctx ctx;
    hx_gset cur, a, b;
    hx_gpartial pt;
};

hx_status hx_grammar_state_create(const hx_grammar *g, hx_grammar_state **out)
{
    if (out)
        *out = NULL;
    if (!g || !out)
        return hx_error(HX_ERR_INVALID_ARG, "hx_grammar_state_create: NULL argument");
    hx_grammar_state *s = calloc(1, sizeof *s);
    if (!s)
        return hx_error(HX_ERR_NO_MEMORY, "grammar state");
    s->g = g;
    hx_status st = hx_gset_start(g, &s->ctx, &s->cur);
    if (st) {
        hx_grammar_state_free(s);
        return st;
    }
    *out = s;
    return HX_OK;
}

void hx_grammar_state_free(hx_grammar_state *s)
{
    if (!s)
        return;
    hx_gctx_free(&s->ctx);
    hx_gset_free(&s->cur);
    hx_gset_free(&s->a);
    hx_gset_free(&s->b);
    free(s);
}

const hx_gset *hx_grammar_state_set(const hx_grammar_state *s, hx_gpartial *pt)
{
    *pt = s->pt;
    return &s->cur;
}

const hx_grammar *hx_grammar_state_grammar(const hx_grammar_state *s)
{
    return s->g;
}

hx_gctx *hx_grammar_state_ctx(hx_grammar_state *s)
{
    return &s->ctx;
}

int hx_grammar_accept(hx_grammar_state *s, const char *bytes, size_t n)
{
    if (!s || (!bytes && n))
        return 0;
    const hx_gset *src = &s->cur;
    hx_gpartial pt = s->pt;
    for (size_t i = 0; i < n; i++) {
        hx_gset *dst = src == &s->a ? &s->b : &s->a;
        int adv, r = hx_gset_accept_byte(s->g, &s->ctx, src, &pt, (uint8_t)bytes[i], dst, &adv);
        if (r <= 0)
            return r;
        if (adv)
            src = dst;
    }
    if (src != &s->cur) {
        hx_gset t = s->cur;
        s->cur = *(hx_gset *)src;
        *(hx_gset *)src = t;
    }
    s->pt = pt;
    return 1;
}

int hx_grammar_can_end(const hx_grammar_state *s)
{
    return s && hx_gset_can_end(&s->cur, &s->pt);
}
