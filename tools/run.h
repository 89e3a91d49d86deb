/* What hetero-run's files share: its options and the helpers both of its
 * modes (one prompt, a conversation) use. */
#ifndef HX_TOOLS_RUN_H
#define HX_TOOLS_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "hetero.h"
#include "cli_dist.h"

typedef struct {
    const char *model, *prompt, *prompt_file, *tokens, *logits, *devices, *kv_type, *kv_type_k, *kv_type_v;
    const char *moe_routing, *moe_tally; /* --moe-routing SPEC, --moe-tally FILE */
    const char *sched, *partition, *trace, *inject, *system_prompt, *chat_template;
    const char *chat_template_file; /* --chat-template-file */
    int no_jinja;                   /* --no-jinja: the built-in family the template is */
    const char *grammar, *grammar_file, *json_schema; /* --grammar, --grammar-file, -j */
    const char **stop; /* --stop, in order */
    uint32_t n_stop;
    char synthetic[64];
    int n_predict;     /* -1: until the end of generation or of the context; -2: not given */
    int n_ctx, threads, batch;
    int add_special;   /* BOS/EOS as the model asks (--no-bos: none) */
    int parse_special; /* special tokens spelled in a prompt are tokens (--no-special: text) */
    int plan, stats, chat;
    int context_shift, keep, shift_step; /* --context-shift, --keep N, --shift-step N */
    int n_gpu_layers;  /* -ngl N; -1: not given */
    int threads_batch; /* -tb N; 0: not given */
    int mlock, verbose_prompt, no_perf;
    hx_sampling sampling;
    cli_dist dist;     /* --split, --mpi-timeout: a pipeline under mpirun */
    /* --logit-bias, --dry-sequence-breaker, --samplers / --sampling-seq */
    hx_logit_bias bias[256];
    const char *breakers[32];
    int n_breakers, breakers_given;
    char samplers[32];
} run_args;

/* Ctrl-C, as llama-cli takes it: while a reply is being generated the
 * first one asks it to stop (run_interrupted() turns true, the generation
 * ends at its next token and hetero-run goes on: back to the prompt in a
 * conversation, to the timing line and exit 130 otherwise); a second one
 * before that reply has ended, or one while no reply is being generated
 * (at the conversation's prompt), ends the program with status 130. */
#define RUN_EXIT_INTERRUPTED 130
void run_sigint_install(void);
void run_generating(int on); /* a reply is being generated (1) or not (0) */
int run_interrupted(void);

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
/* "1 token", "2 tokens". */
const char *run_tokens_word(uint64_t n);
/* 4096 -> "4,096". */
const char *run_grouped(uint64_t v, char buf[32]);

#endif
