/* What hetero-run's files share: its options and the helpers both of its
 * modes (one prompt, a conversation) use. */
#ifndef HX_TOOLS_RUN_H
#define HX_TOOLS_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "hetero.h"

typedef struct {
    const char *model, *prompt, *prompt_file, *tokens, *logits, *devices, *kv_type, *kv_type_k, *kv_type_v;
    const char *sched, *partition, *trace, *inject, *system_prompt, *chat_template;
    const char **stop; /* --stop, in order */
    uint32_t n_stop;
    char synthetic[64];
    int n_predict;     /* -1: until the end of generation or of the context; -2: not given */
    int n_ctx, threads, batch;
    int add_special;   /* BOS/EOS as the model asks (--no-bos: none) */
    int parse_special; /* special tokens spelled in a prompt are tokens (--no-special: text) */
    int plan, stats, chat;
    int context_shift, keep, shift_step; /* --context-shift, --keep N, --shift-step N */
    hx_sampling sampling;
} run_args;

/* The conversation mode (-cnv): user turns from -p then standard input,
 * formatted with the model's chat template.  Returns the exit status. */
int run_chat(hx_model *m, hx_session *s, const run_args *a);

/* Tokens to ask a generation for: -n, its default, or no bound. */
uint32_t run_n_predict(const run_args *a);
/* Tokenizes `text` with the model (add_special as given); *ids is
 * malloc'ed.  Prints the reason and returns -1 on failure. */
int run_tokenize(hx_model *m, const char *text, size_t len, int add_special, int parse_special, int32_t **ids,
                 size_t *n);
/* Refuses, with the numbers and the option to change, a prompt that does
 * not fit in what the context has left; 0 when it fits. */
int run_check_context(const hx_model_info *in, size_t n_prompt, uint32_t pos);
/* The prefill/decode line and why the generation ended, on stderr. */
void run_report(const run_args *a, const hx_model_info *in, const hx_generation_stats *gs, uint32_t pos);
/* 4096 -> "4,096". */
const char *run_grouped(uint64_t v, char buf[32]);

#endif
