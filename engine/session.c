/* Sessions: open, close, logits of the last evaluation, and the check that
 * refuses a request before any work when the context or the KV pool would
 * run out. */
#include <stdlib.h>
#include <string.h>

#include "engine/kv_offload.h"
#include "engine/session.h"
#include "runtime/error.h"
#include "runtime/handle.h"

static hx_status session_open(hx_model *m, hx_session **out)
{
    hx_status st = hx_handle_check_call(m, HX_HANDLE_MODEL, out, "hx_session_open");
    if (st)
        return st;
    hx_session *s = calloc(1, sizeof *s);
    if (!s)
        return hx_error(HX_ERR_NO_MEMORY, "session");
    s->m = m;
    s->shift_keep = -1;
    s->batch_slot = -1;
    if ((st = hx_handle_add(s, HX_HANDLE_SESSION, m, ""))) {
        free(s);
        return st;
    }
    *out = s;
    return HX_OK;
}

hx_status hx_session_open(hx_model *m, hx_session **out)
{
    hx_api_enter();
    if (out)
        *out = NULL;
    return hx_api_leave(session_open(m, out));
}

/* Of two closes of one session, racing or one after the other, the first
 * takes it out of the registry and the second is refused there, before
 * touching its memory. */
static hx_status session_close(hx_session *s)
{
    hx_status st = hx_handle_remove(s, HX_HANDLE_SESSION, "hx_session_close");
    if (st)
        return st;
    if (s->kv_counted) { /* only with HX_KV_OFFLOAD */
        pthread_mutex_lock(&s->m->eval_lock);
        hx_kv_offload_release(s);
        pthread_mutex_unlock(&s->m->eval_lock);
    }
    hx_session_publish_tail(s);
    hx_kv_seq_release(s->m->kv, &s->seq);
    free(s->logits);
    free(s->logit_row);
    free(s->tokens);
    free(s->keys);
    free(s);
    return HX_OK;
}

hx_status hx_session_close(hx_session *s)
{
    hx_api_enter();
    return hx_api_leave(s ? session_close(s) : HX_OK);
}

uint32_t hx_session_position(const hx_session *s)
{
    return hx_handle_check(s, HX_HANDLE_SESSION, "hx_session_position") == HX_OK ? s->pos : 0;
}

hx_status hx_session_begin(hx_session *s, uint32_t n_tokens, uint32_t n_logits)
{
    /* cap_logits counts rows of the widest kind (n_vocab, or n_embd when
     * that is wider), so a session switching modes never reads past it. */
    size_t V = s->m->info.n_vocab > s->m->info.n_embd ? s->m->info.n_vocab : s->m->info.n_embd;
    if (n_logits > s->cap_logits) {
        float *l = realloc(s->logits, sizeof *l * V * n_logits);
        if (!l)
            return hx_error(HX_ERR_NO_MEMORY, "logits of %u tokens", n_logits);
        s->logits = l;
        s->cap_logits = n_logits;
    }
    if (n_tokens > s->cap_last) {
        int32_t *r = realloc(s->logit_row, sizeof *r * n_tokens);
        if (!r)
            return hx_error(HX_ERR_NO_MEMORY, "logits table");
        s->logit_row = r;
        s->cap_last = n_tokens;
    }
    memset(s->logit_row, 0xff, sizeof *s->logit_row * n_tokens);
    s->n_last = n_tokens;
    s->n_logits = 0;
    s->n_filled = 0;
    return HX_OK;
}

const float *hx_session_logits(const hx_session *s, int i)
{
    if (hx_handle_check(s, HX_HANDLE_SESSION, "hx_session_logits") || s->n_last == 0 || s->embd)
        return NULL;
    if (i < 0)
        i += (int)s->n_last;
    if (i < 0 || (uint32_t)i >= s->n_last || s->logit_row[i] < 0)
        return NULL;
    return s->logits + (size_t)s->logit_row[i] * s->m->info.n_vocab;
}

hx_status hx_session_fit(hx_session *s, size_t n_new, uint64_t n_more, const char *what)
{
    hx_model *m = s->m;
    const uint32_t n_ctx = m->opts.n_ctx, pos = s->pos;
    if (n_new > n_ctx - pos) {
        if (pos)
            return hx_error(HX_ERR_RANGE, "context full: the %s is %zu tokens and the session holds %u; the context "
                                          "is %u tokens (n_ctx)",
                            what, n_new, pos, n_ctx);
        return hx_error(HX_ERR_RANGE, "context too small: the %s is %zu tokens; the context is %u tokens (n_ctx)",
                        what, n_new, n_ctx);
    }
    /* With a sliding window blocks come back as the window moves on:
     * reserving a whole generation ahead would ask for what it never
     * holds at once. */
    if (m->hp.n_swa)
        n_more = 0;
    uint64_t want = pos + n_new + n_more;
    if (want > n_ctx)
        want = n_ctx;
    hx_status st = hx_session_grow_tokens(s, (uint32_t)want);
    if (st == HX_OK)
        st = hx_kv_seq_reserve(m->kv, &s->seq, (uint32_t)want);
    /* The blocks written now become the session's own: a block it shares
     * (a fork's, or a cached prefix's) is copied first. */
    const uint32_t bs = m->kv->block_size;
    if (st == HX_OK && n_new)
        st = hx_kv_seq_make_writable(m->kv, &s->seq, pos / bs, (uint32_t)((pos + n_new - 1) / bs));
    if (st == HX_OK)
        return HX_OK;
    const uint32_t held = s->seq.n_blocks * m->kv->block_size, free_tokens = hx_kv_pool_free_tokens(m->kv);
    if (want <= (uint64_t)held + free_tokens)
        return st; /* not the pool: the block table itself could not grow */
    const uint32_t total = m->kv->n_blocks * m->kv->block_size;
    if (held + free_tokens == total)
        return hx_error(HX_ERR_NO_MEMORY, "KV cache memory: the %s needs room for %llu tokens (%u already in the "
                                          "session); the pool holds %u tokens in all (kv_tokens)",
                        what, (unsigned long long)want, pos, total);
    return hx_error(HX_ERR_NO_MEMORY, "KV cache memory: the %s needs room for %llu tokens (%u already in the "
                                      "session); the pool has %u of its %u tokens free, other sessions hold the "
                                      "rest (kv_tokens)",
                    what, (unsigned long long)want, pos, free_tokens, total);
}
