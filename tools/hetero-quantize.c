/* hetero-quantize IN.gguf OUT.gguf TYPE: llama-quantize's convention. */
#include <stdio.h>

#include "hetero.h"

typedef struct {
    uint64_t in, out;
} totals;

static void report(void *user, const char *tensor, const char *from, const char *to, uint64_t a, uint64_t b)
{
    totals *t = user;
    t->in += a;
    t->out += b;
    printf("%-40s %6s -> %-6s %10.3f MiB -> %10.3f MiB\n", tensor, from, to, a / 1048576.0, b / 1048576.0);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: hetero-quantize IN.gguf OUT.gguf TYPE\n"
                        "  TYPE: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K\n");
        return 2;
    }
    totals t = {0, 0};
    if (hx_model_quantize(argv[1], argv[2], argv[3], report, &t) != HX_OK) {
        fprintf(stderr, "hetero-quantize: %s\n", hx_last_error());
        return 1;
    }
    printf("model size: %.2f MiB -> %.2f MiB (%s)\n", t.in / 1048576.0, t.out / 1048576.0, argv[3]);
    return 0;
}
