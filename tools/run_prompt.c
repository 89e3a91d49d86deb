/* hetero-run's prompts: tokenized as the model asks, checked against the
 * context before any work, and how their generation ended, reported. */
#include <stdio.h>
#include <stdlib.h>

#include "tools/run.h"

const char *run_grouped(uint64_t v, char buf[32])
{
    char digits[24];
    int n = snprintf(digits, sizeof digits, "%llu", (unsigned long long)v), o = 0;
    for (int i = 0; i < n; i++) {
        if (i && (n - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
    return buf;
}

const char *run_tokens_word(uint64_t n) { return n == 1 ? "token" : "tokens"; }

uint32_t run_n_predict(const run_args *a)
{
    if (a->n_predict >= 0)
        return (uint32_t)a->n_predict;
    if (a->n_predict == -2 && !a->chat)
        return 64;
    return UINT32_MAX; /* until the end: generation stops when the context is full */
}

int run_tokenize(hx_model *m, const char *text, size_t len, int add_special, int parse_special, int32_t **ids,
                 size_t *n)
{
    *ids = NULL;
    hx_status s = hx_model_tokenize(m, text, len, add_special, parse_special, NULL, 0, n);
    if (s == HX_ERR_RANGE || s == HX_OK) {
        *ids = malloc((*n ? *n : 1) * sizeof **ids);
        s = *ids ? hx_model_tokenize(m, text, len, add_special, parse_special, *ids, *n, n) : HX_ERR_NO_MEMORY;
    }
    if (s == HX_OK)
        return 0;
    fprintf(stderr, "hetero-run: %s\n", *ids ? hx_last_error() : "out of memory for the prompt's tokens");
    free(*ids);
    *ids = NULL;
    return -1;
}

int run_check_context(const hx_model_info *in, size_t n_prompt, uint32_t pos)
{
    if (n_prompt <= (size_t)(in->n_ctx - pos))
        return 0;
    char a[32], b[32], c[32], d[32];
    if (pos)
        fprintf(stderr, "hetero-run: the prompt is %s %s and the conversation holds %s; the context is %s "
                        "(-c N for a larger one; the model was trained for %s)\n",
                run_grouped(n_prompt, a), run_tokens_word(n_prompt), run_grouped(pos, b), run_grouped(in->n_ctx, c),
                run_grouped(in->n_ctx_train, d));
    else
        fprintf(stderr, "hetero-run: the prompt is %s %s; the context is %s (-c N for a larger one; the model "
                        "was trained for %s)\n",
                run_grouped(n_prompt, a), run_tokens_word(n_prompt), run_grouped(in->n_ctx, c),
                run_grouped(in->n_ctx_train, d));
    return -1;
}

void run_report(const run_args *a, const hx_model_info *in, const hx_generation_stats *gs, uint32_t pos)
{
    char why[160], n[32];
    if (gs->finish == HX_FINISH_STOP && gs->stop_index >= 0 && (uint32_t)gs->stop_index < a->n_stop)
        snprintf(why, sizeof why, "stop string \"%.100s\"", a->stop[gs->stop_index]);
    else if (gs->finish == HX_FINISH_STOP)
        snprintf(why, sizeof why, "end-of-generation token");
    else if (gs->finish == HX_FINISH_LENGTH && pos >= in->n_ctx)
        snprintf(why, sizeof why, "the context of %s tokens is full", run_grouped(in->n_ctx, n));
    else if (gs->finish == HX_FINISH_LENGTH)
        snprintf(why, sizeof why, "%u %s, as -n asked", gs->generated_tokens, run_tokens_word(gs->generated_tokens));
    else if (gs->finish == HX_FINISH_CALLBACK && run_interrupted())
        snprintf(why, sizeof why, "Ctrl-C");
    else
        snprintf(why, sizeof why, "interrupted");
    fprintf(stderr, "hetero-run: prefill %u %s in %.3f s (%.1f tokens/s), decode %u %s in %.3f s "
                    "(%.1f tokens/s); ended: %s (%s)\n",
            gs->prompt_tokens, run_tokens_word(gs->prompt_tokens), gs->prefill_seconds,
            gs->prompt_tokens / (gs->prefill_seconds + 1e-12), gs->generated_tokens,
            run_tokens_word(gs->generated_tokens), gs->decode_seconds,
            gs->generated_tokens > 1 ? (gs->generated_tokens - 1) / (gs->decode_seconds + 1e-12) : 0.0,
            hx_finish_reason_str(gs->finish), why);
    if (gs->context_shifts)
        fprintf(stderr, "hetero-run: %u context shifts (--keep %d)\n", gs->context_shifts, a->keep);
}
