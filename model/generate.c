/* Generation: prefill the prompt, then sample and decode one token at a
 * time, streaming complete UTF-8 text to the caller. */
#include <stdlib.h>
#include <string.h>

#include "model/sampling.h"
#include "model/session.h"
#include "model/tokenizer.h"
#include "runtime/error.h"
#include "runtime/handle.h"

hx_sampling hx_sampling_default(void)
{
    hx_sampling p = {0};
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.repeat_penalty = 1.0f;
    p.repeat_last_n = 64;
    p.seed = 0;
    return p;
}

static hx_status generate(hx_session *s, const int32_t *prompt, size_t n_prompt, uint32_t n_predict,
                          const hx_sampling *sampling, hx_token_callback cb, void *user,
                          hx_generation_stats *stats)
{
    hx_status hs = hx_handle_check(s, HX_HANDLE_SESSION, "hx_session_generate");
    if (hs)
        return hs;
    if (!prompt || n_prompt == 0)
        return hx_error(HX_ERR_INVALID_ARG, "hx_session_generate: no prompt");
    hx_model *m = s->m;
    if (!m->tok)
        return hx_error(HX_ERR_UNSUPPORTED, "hx_session_generate: the model has no tokenizer (shapes only)");
    hx_sampling def = hx_sampling_default();
    const hx_sampling *sp = sampling ? sampling : &def;
    hx_sampler_params p = {sp->temperature, sp->top_k, sp->top_p, sp->min_p,
                           sp->repeat_penalty, sp->repeat_last_n, sp->seed};
    hx_sampler *smp;
    hx_status st = hx_sampler_create(&p, (int)m->info.n_vocab, &smp);
    if (st)
        return st;
    size_t cap = hx_detok_max_out(m->tok) + 1;
    char *piece = malloc(cap);
    if (!piece) {
        hx_sampler_free(smp);
        return hx_error(HX_ERR_NO_MEMORY, "generation");
    }
    hx_detok dt;
    hx_detok_init(&dt, m->tok, 0);
    hx_generation_stats gs = {.prompt_tokens = (uint32_t)n_prompt};
    for (size_t i = 0; i < n_prompt && st == HX_OK; i++)
        st = hx_sampler_accept(smp, prompt[i]);

    double t0 = hx_runtime_clock(m->rt);
    if (st == HX_OK)
        st = hx_session_eval(s, prompt, n_prompt, 0);
    gs.prefill_seconds = hx_runtime_clock(m->rt) - t0;
    t0 = hx_runtime_clock(m->rt);
    for (uint32_t i = 0; st == HX_OK && i < n_predict; i++) {
        int32_t tok;
        st = hx_sampler_sample(smp, hx_session_logits(s, -1), &tok);
        if (st == HX_OK)
            st = hx_sampler_accept(smp, tok);
        if (st)
            break;
        gs.generated_tokens++;
        int eog = hx_tokenizer_is_eog(m->tok, tok);
        size_t n = 0;
        if (!eog)
            st = hx_detok_push(&dt, tok, piece, cap - 1, &n);
        piece[n] = '\0';
        if (st == HX_OK && cb && cb(user, tok, piece))
            break;
        if (eog || i + 1 == n_predict)
            break;
        st = hx_session_eval(s, &tok, 1, 0);
    }
    gs.decode_seconds = hx_runtime_clock(m->rt) - t0;
    size_t n = 0;
    if (st == HX_OK && hx_detok_finish(&dt, piece, cap - 1, &n) == HX_OK && n && cb) {
        piece[n] = '\0';
        cb(user, -1, piece);
    }
    if (stats)
        *stats = gs;
    free(piece);
    hx_sampler_free(smp);
    return st;
}

hx_status hx_session_generate(hx_session *s, const int32_t *prompt, size_t n_prompt, uint32_t n_predict,
                              const hx_sampling *sampling, hx_token_callback cb, void *user,
                              hx_generation_stats *stats)
{
    hx_api_enter();
    return hx_api_leave(generate(s, prompt, n_prompt, n_predict, sampling, cb, user, stats));
}
