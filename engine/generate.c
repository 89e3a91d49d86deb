/* Generation: prefill the prompt, then sample and decode one token at a
 * time, streaming complete UTF-8 text to the caller. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/generation.h"
#include "engine/session.h"
#include "text/tokenizer.h"
#include "runtime/error.h"
#include "runtime/handle.h"

const char *hx_finish_reason_str(hx_finish_reason r)
{
    switch (r) {
    case HX_FINISH_STOP: return "stop";
    case HX_FINISH_LENGTH: return "length";
    case HX_FINISH_CALLBACK: return "callback";
    case HX_FINISH_CANCELLED: return "cancelled";
    case HX_FINISH_NONE: break;
    }
    return "none";
}

static hx_status generate(hx_session *s, const int32_t *prompt, size_t n_prompt, uint32_t n_predict,
                          const hx_sampling *sampling, hx_token_callback cb, void *user,
                          hx_generation_stats *stats)
{
    hx_generation_stats gs = {.prompt_tokens = (uint32_t)n_prompt, .stop_index = -1};
    if (stats)
        *stats = gs;
    hx_status hs = hx_handle_check(s, HX_HANDLE_SESSION, "hx_session_generate");
    if (hs)
        return hs;
    if (!prompt || n_prompt == 0)
        return hx_error(HX_ERR_INVALID_ARG, "hx_session_generate: no prompt");
    hx_model *m = s->m;
    if (!m->tok)
        return hx_error(HX_ERR_UNSUPPORTED, "hx_session_generate: the model has no tokenizer (shapes only)");
    hx_sampling def = hx_sampling_default();
    hx_generation g;
    hx_status st = hx_generation_init(&g, m, sampling ? sampling : &def);
    if (st)
        return st;
    for (size_t i = 0; i < n_prompt && st == HX_OK; i++)
        st = hx_sampler_accept(g.smp, prompt[i]);
    /* The whole request's KV before any work: the last token sampled is
     * never evaluated, so the prompt and n_predict - 1 more. */
    double t0 = hx_runtime_clock(m->rt);
    if (st == HX_OK)
        st = hx_session_eval_request(s, prompt, n_prompt, 0, n_predict ? n_predict - 1 : 0, "prompt");
    gs.prefill_seconds = hx_runtime_clock(m->rt) - t0;
    t0 = hx_runtime_clock(m->rt);
    if (st == HX_OK && n_predict == 0)
        gs.finish = HX_FINISH_LENGTH;
    for (uint32_t i = 0; st == HX_OK && i < n_predict; i++) {
        int32_t tok, matched;
        const char *text;
        const float *logits = hx_session_logits(s, -1);
        st = hx_generation_sample(&g, logits, &tok);
        if (st == HX_OK)
            st = hx_generation_accept(&g, tok);
        if (st)
            break;
        gs.generated_tokens++;
        int eog = hx_tokenizer_is_eog(m->tok, tok);
        if ((st = hx_generation_next_text(&g, tok, eog, &text, &matched)))
            break;
        if (eog || matched >= 0) {
            gs.finish = HX_FINISH_STOP;
            gs.stop_index = matched;
        } else if (i + 1 == n_predict || (s->pos >= m->opts.n_ctx && s->shift_keep < 0)) {
            gs.finish = HX_FINISH_LENGTH;
        }
        if (cb && cb(user, tok, text) && !gs.finish)
            gs.finish = HX_FINISH_CALLBACK;
        if (gs.finish)
            break;
        /* A full context with a shift asked for makes room instead. */
        int shifted;
        st = hx_session_shift_if_full(s, &shifted);
        gs.context_shifts += (uint32_t)shifted;
        if (st == HX_OK)
            st = hx_session_eval(s, &tok, 1, 0);
    }
    gs.decode_seconds = hx_runtime_clock(m->rt) - t0;
    const char *text;
    size_t n = 0;
    int32_t matched = -1;
    if (st == HX_OK && gs.stop_index < 0 && (st = hx_generation_last_text(&g, &text, &n, &matched)) == HX_OK) {
        if (matched >= 0) {
            gs.finish = HX_FINISH_STOP;
            gs.stop_index = matched;
        }
        if (n && cb)
            cb(user, -1, text);
    }
    if (st)
        gs.finish = HX_FINISH_NONE;
    if (stats)
        *stats = gs;
    hx_generation_free(&g);
    return st;
}

hx_status hx_session_generate(hx_session *s, const int32_t *prompt, size_t n_prompt, uint32_t n_predict,
                              const hx_sampling *sampling, hx_token_callback cb, void *user,
                              hx_generation_stats *stats)
{
    hx_api_enter();
    return hx_api_leave(generate(s, prompt, n_prompt, n_predict, sampling, cb, user, stats));
}
