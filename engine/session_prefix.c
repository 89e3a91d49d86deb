/* A session's side of the prefix cache (model/kv_cache.h): the token ids
 * and block keys it remembers, attaching cached blocks before an
 * evaluation, keying the blocks it filled after one, and forks. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine/kv_offload.h"
#include "engine/session.h"
#include "runtime/error.h"
#include "runtime/handle.h"

hx_status hx_session_grow_tokens(hx_session *s, uint32_t n_tokens)
{
    const uint32_t bs = s->m->kv->block_size, n_keys = n_tokens / bs + 1;
    if (n_tokens > s->cap_tokens) {
        uint32_t cap = s->cap_tokens ? s->cap_tokens : 64;
        while (cap < n_tokens)
            cap = cap > UINT32_MAX / 2 ? n_tokens : cap * 2;
        int32_t *t = realloc(s->tokens, sizeof *t * cap);
        if (!t)
            return hx_error(HX_ERR_NO_MEMORY, "token ids of a session of %u tokens", n_tokens);
        s->tokens = t;
        s->cap_tokens = cap;
    }
    if (n_keys > s->cap_keys) {
        /* Doubled, as the tokens: a decode step that starts a block must
         * not reallocate every time. */
        uint32_t cap = s->cap_keys ? s->cap_keys : 8;
        while (cap < n_keys)
            cap = cap > UINT32_MAX / 2 ? n_keys : cap * 2;
        uint64_t *k = realloc(s->keys, sizeof *k * cap);
        if (!k)
            return hx_error(HX_ERR_NO_MEMORY, "block keys of a session of %u tokens", n_tokens);
        s->keys = k;
        s->cap_keys = cap;
    }
    return HX_OK;
}

/* splitmix64's finalizer over a running state, as the pool's keys. */
static uint64_t salt_mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

uint64_t hx_session_salt_hash(const char *salt)
{
    if (!salt || !*salt)
        return 0;
    size_t n = strlen(salt);
    uint64_t h = salt_mix(0x5a17ull, n);
    for (size_t i = 0; i < n; i += 8) {
        uint64_t w = 0;
        memcpy(&w, salt + i, n - i < 8 ? n - i : 8);
        h = salt_mix(h, w);
    }
    return h ? h : 1;
}

/* The first block's parent is the pool's root key, mixed with the
 * session's salt: blocks of different salts never match, however alike
 * their tokens (the pool compares parent keys and tokens). */
static uint64_t parent_key(const hx_session *s, uint32_t block)
{
    if (block)
        return s->keys[block - 1];
    return s->salt ? salt_mix(s->m->kv->seed, s->salt) : s->m->kv->seed;
}

static hx_status reuse_prefix(hx_session *s, const int32_t *tokens, size_t n, int count_misses, uint32_t *reused)
{
    hx_kv_pool *p = s->m->kv;
    const uint32_t bs = p->block_size, pos0 = s->pos;
    *reused = 0;
    /* Only whole blocks after whole blocks are keyed; a request past the
     * context is refused by hx_session_fit, untouched. */
    if (!p->prefix_cache || s->uncached || pos0 % bs || s->n_keys != pos0 / bs || n < 2 ||
        n > s->m->opts.n_ctx - pos0)
        return HX_OK;
    hx_status st = hx_session_grow_tokens(s, pos0 + (uint32_t)n);
    if (st)
        return st;
    /* The last token is always evaluated: its logits are the answer. */
    const uint32_t candidates = (uint32_t)((n - 1) / bs);
    uint32_t hits = 0;
    for (; hits < candidates; hits++) {
        const uint32_t j = pos0 / bs + hits;
        const int32_t *t = tokens + (size_t)hits * bs;
        const uint64_t parent = parent_key(s, j), key = hx_kv_key(p, parent, t);
        if (!hx_kv_seq_attach(p, &s->seq, j, key, parent, t))
            break;
        memcpy(s->tokens + (size_t)j * bs, t, sizeof *t * bs);
        s->keys[j] = key;
        s->n_keys = j + 1;
    }
    /* Then the rows a cached block after the last one attached shares
     * with what follows: a partial block, or a full one whose tokens part
     * from these inside it. */
    const uint32_t j = pos0 / bs + hits, rest = (uint32_t)(n - 1) - hits * bs;
    uint32_t shared = 0;
    st = hx_kv_seq_attach_partial(p, &s->seq, j, parent_key(s, j), tokens + (size_t)hits * bs,
                                  rest < bs ? rest : bs - 1, &shared);
    if (shared)
        memcpy(s->tokens + (size_t)j * bs, tokens + (size_t)hits * bs, sizeof *tokens * shared);
    /* The session is off a block boundary now, so no evaluation after
     * this one probes the blocks not found: they count here. */
    hx_kv_pool_count(p, hits, count_misses || shared ? candidates - hits : 0);
    s->pos = pos0 + hits * bs + shared;
    *reused = hits * bs + shared;
    return st;
}

hx_status hx_session_reuse_prefix(hx_session *s, const int32_t *tokens, size_t n, uint32_t *reused)
{
    return reuse_prefix(s, tokens, n, 1, reused);
}

hx_status hx_session_attach_cached(hx_session *s, const int32_t *tokens, size_t n, uint32_t *reused)
{
    pthread_mutex_lock(&s->m->eval_lock);
    hx_status st = reuse_prefix(s, tokens, n, 0, reused);
    pthread_mutex_unlock(&s->m->eval_lock);
    return st;
}

hx_status hx_batch_reuse_prefix(size_t n, const int32_t *tokens, hx_session *const *sessions, const uint8_t *want,
                                int32_t *out_tokens, hx_session **out_sessions, uint8_t *out_want, size_t *kept,
                                hx_batch_reuse *undo, size_t *n_undo)
{
    int32_t *mine = malloc(sizeof *mine * n);
    uint32_t *skip = calloc(n, sizeof *skip); /* per entry: its session's entries to leave out */
    if (!mine || !skip) {
        free(mine);
        free(skip);
        return hx_error(HX_ERR_NO_MEMORY, "batch of %zu", n);
    }
    hx_status st = HX_OK;
    *n_undo = 0;
    for (size_t i = 0; i < n && st == HX_OK; i++) {
        hx_session *s = sessions[i];
        int first = 1;
        for (size_t j = 0; j < i && first; j++)
            first = sessions[j] != s;
        if (!first)
            continue;
        /* Its tokens in order; a logit kept before its last entry needs
         * every entry evaluated. */
        size_t count = 0, last = i;
        for (size_t j = i; j < n; j++)
            if (sessions[j] == s) {
                mine[count++] = tokens[j];
                last = j;
            }
        int plain = 1;
        for (size_t j = i; j < last && plain; j++)
            plain = sessions[j] != s || !want[j];
        hx_batch_reuse *u = &undo[(*n_undo)++];
        *u = (hx_batch_reuse){s, s->pos, 0};
        if (plain)
            st = hx_session_reuse_prefix(s, mine, count, &u->reused);
        skip[i] = u->reused;
    }
    /* The first `reused` entries of each session go; its first entry
     * holds how many are left to skip. */
    size_t k = 0;
    for (size_t i = 0; i < n && st == HX_OK; i++) {
        size_t f = 0;
        while (sessions[f] != sessions[i])
            f++;
        if (skip[f]) {
            skip[f]--;
            continue;
        }
        out_tokens[k] = tokens[i];
        out_sessions[k] = sessions[i];
        out_want[k++] = want[i];
    }
    *kept = k;
    free(mine);
    free(skip);
    return st;
}

void hx_session_publish(hx_session *s)
{
    hx_kv_pool *p = s->m->kv;
    if (!p->prefix_cache || s->uncached)
        return;
    const uint32_t bs = p->block_size;
    for (uint32_t j = s->n_keys; (j + 1) * bs <= s->pos && !(s->shifted && j >= s->keep_blocks); j++) {
        const int32_t *t = s->tokens + (size_t)j * bs;
        const uint64_t parent = parent_key(s, j), key = hx_kv_key(p, parent, t);
        s->keys[j] = key;
        s->n_keys = j + 1;
        hx_kv_seq_publish(p, &s->seq, j, key, parent, t);
    }
}

void hx_session_publish_tail(hx_session *s)
{
    hx_kv_pool *p = s->m->kv;
    const uint32_t bs = p->block_size, j = s->pos / bs;
    /* Its parent must be the key of the block before: every earlier block
     * keyed, and none moved by a context shift. */
    if (!p->prefix_cache || s->uncached || s->embd || s->shifted || s->pos % bs == 0 || s->n_keys != j)
        return;
    hx_kv_seq_publish_partial(p, &s->seq, j, parent_key(s, j), s->tokens + (size_t)j * bs, s->pos % bs);
}

void hx_session_slide(hx_session *s)
{
    const uint32_t W = s->m->hp.n_swa, bs = s->m->kv->block_size;
    if (W && s->pos >= W)
        hx_kv_seq_forget(s->m->kv, &s->seq, (s->pos - W + 1) / bs);
}

void hx_session_rewind(hx_session *s, uint32_t pos, int drop_blocks)
{
    const uint32_t bs = s->m->kv->block_size;
    s->pos = pos;
    if (s->n_keys > pos / bs)
        s->n_keys = pos / bs;
    if (drop_blocks)
        hx_kv_seq_truncate(s->m->kv, &s->seq, (pos + bs - 1) / bs);
}

uint32_t hx_session_reused_tokens(const hx_session *s)
{
    return hx_handle_check(s, HX_HANDLE_SESSION, "hx_session_reused_tokens") == HX_OK ? s->reused : 0;
}

/* The fork's copies of what the session remembers: token ids, keys and
 * the last evaluation's logits. */
static hx_status copy_state(hx_session *f, const hx_session *s)
{
    const size_t V = hx_session_row_width(s);
    hx_status st = hx_session_grow_tokens(f, s->pos);
    if (st == HX_OK && s->n_last)
        st = hx_session_begin(f, s->n_last, s->n_logits);
    if (st)
        return st;
    if (s->pos) /* an empty session has no arrays yet */
        memcpy(f->tokens, s->tokens, sizeof *f->tokens * s->pos);
    if (s->n_keys)
        memcpy(f->keys, s->keys, sizeof *f->keys * s->n_keys);
    f->n_keys = s->n_keys;
    if (s->n_last) {
        memcpy(f->logits, s->logits, sizeof *f->logits * V * s->n_logits);
        memcpy(f->logit_row, s->logit_row, sizeof *f->logit_row * s->n_last);
        f->n_logits = s->n_logits;
        f->n_filled = s->n_filled;
    }
    f->pos = s->pos;
    f->embd = s->embd;
    f->salt = s->salt;
    f->shifted = s->shifted;
    f->keep_blocks = s->keep_blocks;
    f->shift_keep = s->shift_keep;
    f->shift_discard = s->shift_discard;
    hx_kv_offload_inherit(f, s);
    return hx_kv_seq_share(s->m->kv, &s->seq, &f->seq);
}

static hx_status session_fork(hx_session *s, hx_session **out)
{
    hx_status st = hx_handle_check_call(s, HX_HANDLE_SESSION, out, "hx_session_fork");
    if (st)
        return st;
    hx_session *f;
    if ((st = hx_session_open(s->m, &f)))
        return st;
    pthread_mutex_lock(&s->m->eval_lock);
    st = copy_state(f, s);
    pthread_mutex_unlock(&s->m->eval_lock);
    if (st) {
        hx_session_close(f);
        return st;
    }
    *out = f;
    return HX_OK;
}

hx_status hx_session_fork(hx_session *s, hx_session **out)
{
    hx_api_enter();
    if (out)
        *out = NULL;
    return hx_api_leave(session_fork(s, out));
}
