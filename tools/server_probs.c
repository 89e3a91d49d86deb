/* n_probs on /completion, in llama-server's native shape: the answer's
 * "completion_probabilities", one entry a generated token, each {id,
 * token, bytes, logprob, top_logprobs: [{id, token, bytes, logprob}...]}
 * (the token's text cut to its whole UTF-8 characters, its bytes all of
 * it).  Whole: every token's in the answer; streamed: each event carries
 * one token and its entry, as llama-server's (the summary event none).
 * With post_sampling_probs: {id, token, bytes, prob, top_probs: [{id,
 * token, bytes, prob}...]}, the distribution each token was drawn from. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/server.h"

/* The length of s's leading whole UTF-8 characters (llama-server's
 * validate_utf8). */
static size_t whole_utf8(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        const unsigned char c = (unsigned char)s[i];
        const size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!k || i + k > n)
            break;
        i += k;
    }
    return i;
}

/* post: llama-server's post_sampling_probs shape, the probability itself
 * under "prob" (the engine hands its log). */
static json_t *entry(srv *S, int32_t id, float logprob, int post)
{
    char buf[256];
    size_t len = 0;
    if (hx_tokenizer_token_to_piece(S->native.tok, id, 0, buf, sizeof buf, &len) != HX_OK)
        len = 0;
    json_t *bytes = json_array();
    for (size_t i = 0; i < len; i++)
        json_array_append_new(bytes, json_integer((unsigned char)buf[i]));
    json_t *text = json_stringn(buf, whole_utf8(buf, len));
    return json_pack("{s:i,s:o,s:o,s:f}", "id", id, "token", text ? text : json_string(""), "bytes", bytes,
                     post ? "prob" : "logprob", post ? (double)expf(logprob) : (double)logprob);
}

json_t *srv_native_probs(srv_job *j, srv_choice *ch, size_t from, size_t to)
{
    json_t *out = json_array();
    for (size_t i = from; i < to && i < ch->n_pieces; i++) {
        const srv_piece *p = &ch->pieces[i];
        json_t *e = entry(j->S, p->token, p->logprob, j->post_sampling), *top = json_array();
        for (uint32_t k = 0; k < p->n_top; k++)
            json_array_append_new(top, entry(j->S, p->top_token[k], p->top_logprob[k], j->post_sampling));
        json_object_set_new(e, j->post_sampling ? "top_probs" : "top_logprobs", top);
        json_array_append_new(out, e);
    }
    return out;
}

json_t *srv_native_token_event(srv_job *j, srv_choice *ch, size_t piece, size_t from_text, size_t to_text)
{
    json_t *text = json_stringn(ch->text + from_text, to_text - from_text);
    if (!text)
        text = json_string("\xef\xbf\xbd"); /* part of a character: as the whole answer's check does */
    return json_pack("{s:i,s:o,s:[i],s:b,s:i,s:I,s:I,s:o}", "index", ch->index, "content", text, "tokens",
                     ch->pieces[piece].token, "stop", 0, "id_slot", srv_answer_slot(j, ch), "tokens_predicted",
                     (json_int_t)(piece + 1),
                     "tokens_evaluated", (json_int_t)j->prompt_tokens, "completion_probabilities",
                     srv_native_probs(j, ch, piece, piece + 1));
}
