/* What a grammar costs a generation step: building the vocabulary trie,
 * checking one drawn token, and masking the whole vocabulary, in states
 * of the JSON grammar that allow few and almost all tokens
 * (docs/grammars.md).  It times text/grammar.h's internals, so it links
 * the static library. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hetero.h"
#include "text/grammar.h"
#include "tools/cli_num.h"

static const char json_gbnf[] =
    "root   ::= object\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
    "array  ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
    "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws\n"
    "ws     ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void usage(FILE *f)
{
    fputs("usage: bench-grammar -m MODEL.gguf [-r REPS]\n"
          "  the grammar's costs per step over the model's vocabulary (docs/grammars.md)\n",
          f);
}

int main(int argc, char **argv)
{
    const char *model = NULL;
    int reps = 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "-m") && i + 1 < argc) {
            model = argv[++i];
        } else if (!strcmp(argv[i], "-r") && i + 1 < argc) {
            if (cli_int("bench-grammar", "-r", argv[++i], 1, 100000, &reps))
                return CLI_EXIT_USAGE;
        } else {
            usage(stderr);
            return CLI_EXIT_USAGE;
        }
    }
    if (!model) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    hx_tokenizer *t;
    hx_grammar *g;
    if (hx_tokenizer_open(model, &t) || hx_grammar_parse(json_gbnf, strlen(json_gbnf), &g)) {
        fprintf(stderr, "bench-grammar: %s\n", hx_last_error());
        return 1;
    }
    double t0 = now();
    hx_grammar_vocab *v;
    if (hx_grammar_vocab_create(t, &v)) {
        fprintf(stderr, "bench-grammar: %s\n", hx_last_error());
        return 1;
    }
    int32_t n = hx_tokenizer_vocab_size(t);
    printf("vocabulary: %d tokens; trie built in %.1f ms\n", n, (now() - t0) * 1e3);
    printf("| JSON text so far | tokens allowed | full mask (ms) | one token checked (us) |\n|---|---:|---:|---:|\n");
    static const char *const prefixes[] = {"", "{\"name\": \"Al", "{\"n\": [1, 2", "{\"a\": {\"b\": "};
    float *l = malloc((size_t)n * sizeof *l);
    for (size_t p = 0; l && p < sizeof prefixes / sizeof *prefixes; p++) {
        hx_grammar_state *s;
        if (hx_grammar_state_create(g, &s) || hx_grammar_accept(s, prefixes[p], strlen(prefixes[p])) != 1) {
            fprintf(stderr, "bench-grammar: %s\n", hx_last_error());
            return 1;
        }
        t0 = now();
        for (int r = 0; r < reps; r++) {
            memset(l, 0, (size_t)n * sizeof *l);
            hx_grammar_mask(s, v, l);
        }
        double mask = (now() - t0) / reps;
        int allowed = 0;
        for (int32_t i = 0; i < n; i++)
            allowed += l[i] == 0;
        t0 = now();
        int k = 0;
        for (int r = 0; r < reps * 100; r++)
            k += hx_grammar_allows(s, v, (int32_t)(r * 7919 % n));
        double one = (now() - t0) / (reps * 100);
        printf("| `%s` | %d | %.2f | %.2f |\n", prefixes[p], allowed, mask * 1e3, one * 1e6 + 0 * k);
        hx_grammar_state_free(s);
    }
    free(l);
    hx_grammar_vocab_free(v);
    hx_grammar_free(g);
    hx_tokenizer_close(t);
    return 0;
}
