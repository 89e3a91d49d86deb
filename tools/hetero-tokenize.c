/* hetero-tokenize: prints the token ids of a text under a GGUF file's
 * vocabulary, on one line, separated by spaces.
 *
 *   hetero-tokenize -m MODEL.gguf [--no-bos | --bos] [--no-parse-special] (--file TEXTFILE | TEXT)
 *
 * Without TEXT or --file the text is read from standard input.  As with
 * llama-tokenize, the text gets BOS when the model asks for it
 * (tokenizer.ggml.add_bos_token; --no-bos: never, --bos: always) and text
 * like "<|im_start|>" stands for its special token (--no-parse-special:
 * plain text).  Exit status 1 on any error, with the reason on stderr. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hetero.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: hetero-tokenize -m MODEL.gguf [--no-bos | --bos] [--no-parse-special] "
               "[--file TEXTFILE | TEXT]\n");
}

/* Reads a whole stream; returns NULL with errno set on failure. */
static char *read_all(FILE *f, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        char *p = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
        if (!p) {
            free(buf);
            errno = ENOMEM;
            return NULL;
        }
        buf = p;
        cap *= 2;
    }
    if (buf && ferror(f)) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

int main(int argc, char **argv)
{
    const char *model = NULL, *file = NULL, *text = NULL;
    int bos = -1, special = 1; /* bos -1: as the model asks */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((strcmp(a, "-m") == 0 || strcmp(a, "--model") == 0) && i + 1 < argc) {
            model = argv[++i];
        } else if ((strcmp(a, "-f") == 0 || strcmp(a, "--file") == 0) && i + 1 < argc) {
            file = argv[++i];
        } else if (strcmp(a, "--bos") == 0 || strcmp(a, "--no-bos") == 0) {
            bos = a[2] == 'b';
        } else if (strcmp(a, "--special") == 0 || strcmp(a, "--parse-special") == 0) {
            special = 1;
        } else if (strcmp(a, "--no-parse-special") == 0) {
            special = 0;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (a[0] == '-' && a[1] != '\0' && strcmp(a, "--") != 0) {
            fprintf(stderr, "hetero-tokenize: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 1;
        } else {
            if (strcmp(a, "--") == 0) { /* the text may start with '-' */
                if (i + 2 != argc) {
                    fprintf(stderr, "hetero-tokenize: '--' must be followed by the text\n");
                    return 1;
                }
                a = argv[++i];
            }
            if (text) {
                fprintf(stderr, "hetero-tokenize: give the text as one argument (quote it)\n");
                return 1;
            }
            text = a;
        }
    }
    if (!model) {
        fprintf(stderr, "hetero-tokenize: no model given (-m MODEL.gguf)\n");
        usage(stderr);
        return 1;
    }
    if (file && text) {
        fprintf(stderr, "hetero-tokenize: give either --file or TEXT, not both\n");
        return 1;
    }

    char *owned = NULL;
    size_t len;
    if (text) {
        len = strlen(text);
    } else {
        FILE *f = file ? fopen(file, "rb") : stdin;
        if (!f) {
            fprintf(stderr, "hetero-tokenize: cannot open %s: %s\n", file, strerror(errno));
            return 1;
        }
        owned = read_all(f, &len);
        int err = errno;
        if (f != stdin)
            fclose(f);
        if (!owned) {
            fprintf(stderr, "hetero-tokenize: cannot read %s: %s\n", file ? file : "stdin",
                    strerror(err));
            return 1;
        }
        text = owned;
    }

    hx_tokenizer *tok;
    hx_status s = hx_tokenizer_open(model, &tok);
    if (s != HX_OK) {
        fprintf(stderr, "hetero-tokenize: %s\n", hx_last_error());
        free(owned);
        return 1;
    }
    if (bos < 0)
        bos = hx_tokenizer_wants_bos(tok);
    size_t n = 0;
    int32_t *ids = NULL;
    s = hx_tokenizer_encode(tok, text, len, bos, special, NULL, 0, &n);
    if (s == HX_ERR_RANGE) {
        ids = malloc((n ? n : 1) * sizeof *ids);
        s = ids ? hx_tokenizer_encode(tok, text, len, bos, special, ids, n, &n) : HX_ERR_NO_MEMORY;
    }
    int rc = 0;
    if (s != HX_OK) {
        fprintf(stderr, "hetero-tokenize: %s\n",
                s == HX_ERR_NO_MEMORY && !ids ? "out of memory" : hx_last_error());
        rc = 1;
    } else {
        for (size_t i = 0; i < n; i++)
            printf(i ? " %d" : "%d", ids[i]);
        putchar('\n');
        if (fflush(stdout) != 0 || ferror(stdout)) {
            fprintf(stderr, "hetero-tokenize: cannot write the ids: %s\n", strerror(errno));
            rc = 1;
        }
    }
    free(ids);
    free(owned);
    hx_tokenizer_close(tok);
    return rc;
}
