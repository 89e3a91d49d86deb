/* hetero-tokenize: the tokens of a text under a GGUF file's vocabulary, as
 * llama-tokenize prints them.
 *
 *   hetero-tokenize -m MODEL.gguf [-p TEXT | -f FILE | --stdin | TEXT] [--ids] [--show-count]
 *                   [--no-bos | --bos] [--no-parse-special] [--no-escape] [--log-disable]
 *
 * llama-tokenize's options with its meaning: one "%6d -> 'piece'" line per
 * token (--ids: the ids as a Python list "[1, 2, 3]"; --show-count: the
 * total after), BOS when the model asks for it (--no-bos: never; --bos,
 * hetero's: always), text like "<|im_start|>" stands for its special token
 * (--no-parse-special: plain text), escapes (\n \t \\ \xNN ...) in -p, -f
 * and --stdin processed (--no-escape: verbatim); --stdin takes precedence
 * over -f, -f over -p.  A TEXT argument is taken verbatim; with no text at
 * all the text is read from standard input.  Exit status 1 on any error,
 * with the reason on stderr (none with --log-disable, as llama-tokenize). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hetero.h"

#define P "hetero-tokenize"

static void usage(FILE *f)
{
    fprintf(f, "usage: " P " -m MODEL.gguf [-p TEXT | -f FILE | --stdin | TEXT] [options]\n"
               "  -p, --prompt TEXT     the text (escapes processed)\n"
               "  -f, --file FILE       the text of FILE, read verbatim (escapes processed)\n"
               "  --stdin               the text of standard input (escapes processed)\n"
               "  TEXT                  the text, verbatim (no text at all: standard input)\n"
               "  --ids                 only the ids, as a Python list: [1, 2, 3]\n"
               "  --show-count          then 'Total number of tokens: N'\n"
               "  --no-bos              no BOS even where the model asks for one (--bos: always)\n"
               "  --no-parse-special    text such as <|im_start|> is plain text, not its token\n"
               "  -e, --escape / --no-escape   process \\n \\r \\t \\' \\\" \\\\ \\xNN (default: on)\n"
               "  --log-disable         print no errors either (the exit status still says)\n"
               "Default output, as llama-tokenize's: one line per token, \"%%6d -> 'piece'\".\n");
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

/* llama.cpp's string_process_escapes, in place; the new length. */
static size_t process_escapes(char *s, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] != '\\' || i + 1 >= len) {
            s[o++] = s[i];
            continue;
        }
        char c = s[++i];
        switch (c) {
        case 'n': s[o++] = '\n'; continue;
        case 'r': s[o++] = '\r'; continue;
        case 't': s[o++] = '\t'; continue;
        case '\'': s[o++] = '\''; continue;
        case '"': s[o++] = '"'; continue;
        case '\\': s[o++] = '\\'; continue;
        case 'x':
            if (i + 2 < len) {
                char hex[3] = {s[i + 1], s[i + 2], 0}, *end;
                long v = strtol(hex, &end, 16);
                if (end == hex + 2) {
                    s[o++] = (char)v;
                    i += 2;
                    continue;
                }
            }
            break;
        }
        s[o++] = '\\';
        s[o++] = c;
    }
    return o;
}

static int quiet;
#define FAIL(...) (quiet ? 0 : fprintf(stderr, P ": " __VA_ARGS__))

/* A file, or standard input when path is NULL: malloc'ed, NULL on failure. */
static char *read_source(const char *path, size_t *len)
{
    FILE *f = path ? fopen(path, "rb") : stdin;
    if (!f) {
        FAIL("cannot open %s: %s\n", path, strerror(errno));
        return NULL;
    }
    char *text = read_all(f, len);
    int err = errno;
    if (f != stdin)
        fclose(f);
    if (!text)
        FAIL("cannot read %s: %s\n", path ? path : "standard input", strerror(err));
    return text;
}

int main(int argc, char **argv)
{
    const char *model = NULL, *file = NULL, *prompt = NULL, *text = NULL;
    int bos = -1, special = 1, use_stdin = 0, ids_only = 0, show_count = 0, escape = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(name) (!strcmp(a, name) && v && ++i)
        if (OPT("-m") || OPT("--model")) model = v;
        else if (OPT("-f") || OPT("--file")) file = v;
        else if (OPT("-p") || OPT("--prompt")) prompt = v;
        else if (!strcmp(a, "--stdin")) use_stdin = 1;
        else if (!strcmp(a, "--ids")) ids_only = 1;
        else if (!strcmp(a, "--show-count")) show_count = 1;
        else if (!strcmp(a, "--bos") || !strcmp(a, "--no-bos")) bos = a[2] == 'b';
        else if (!strcmp(a, "--special") || !strcmp(a, "--parse-special")) special = 1;
        else if (!strcmp(a, "--no-parse-special")) special = 0;
        else if (!strcmp(a, "-e") || !strcmp(a, "--escape")) escape = 1;
        else if (!strcmp(a, "--no-escape")) escape = 0;
        else if (!strcmp(a, "--log-disable")) quiet = 1;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (a[0] == '-' && a[1] != '\0' && strcmp(a, "--") != 0) {
            FAIL("unknown or incomplete option '%s' (--help lists them)\n", a);
            return 1;
        } else {
            if (strcmp(a, "--") == 0) { /* the text may start with '-' */
                if (i + 2 != argc) {
                    FAIL("'--' must be followed by the text\n");
                    return 1;
                }
                a = argv[++i];
            }
            if (text) {
                FAIL("give the text as one argument (quote it)\n");
                return 1;
            }
            text = a;
        }
#undef OPT
    }
    if (!model) {
        FAIL("no model given (-m MODEL.gguf)\n");
        return 1;
    }
    if (text && (file || prompt || use_stdin)) {
        FAIL("give the text once: -p, -f, --stdin or TEXT\n");
        return 1;
    }

    /* As llama-tokenize: --stdin first, then -f, then -p; the file is read
     * before the model (a missing one fails at once), stdin after it. */
    char *owned = NULL;
    size_t len = 0;
    if (!use_stdin && file && !(owned = read_source(file, &len)))
        return 1;
    hx_tokenizer *tok;
    if (hx_tokenizer_open(model, &tok) != HX_OK) {
        FAIL("%s\n", hx_last_error());
        free(owned);
        return 1;
    }
    if (use_stdin || (!file && !prompt && !text)) {
        if (!(owned = read_source(NULL, &len))) {
            hx_tokenizer_close(tok);
            return 1;
        }
    } else if (!owned) {
        const char *src = prompt ? prompt : text;
        len = strlen(src);
        owned = malloc(len + 1);
        if (owned)
            memcpy(owned, src, len + 1);
    }
    if (!owned) {
        FAIL("out of memory\n");
        hx_tokenizer_close(tok);
        return 1;
    }
    if (escape && !text)
        len = process_escapes(owned, len);

    if (bos < 0)
        bos = hx_tokenizer_wants_bos(tok);
    size_t n = 0;
    int32_t *ids = NULL;
    hx_status s = hx_tokenizer_encode(tok, owned, len, bos, special, NULL, 0, &n);
    if (s == HX_ERR_RANGE) {
        ids = malloc((n ? n : 1) * sizeof *ids);
        s = ids ? hx_tokenizer_encode(tok, owned, len, bos, special, ids, n, &n) : HX_ERR_NO_MEMORY;
    }
    int rc = 0;
    if (s != HX_OK) {
        FAIL("%s\n", s == HX_ERR_NO_MEMORY && !ids ? "out of memory" : hx_last_error());
        rc = 1;
    } else {
        if (ids_only)
            putchar('[');
        for (size_t i = 0; i < n; i++) {
            if (ids_only) {
                printf(i ? ", %d" : "%d", ids[i]);
                continue;
            }
            /* The piece as llama.cpp's common_token_to_piece gives it:
             * special tokens spelled out. */
            char piece[512];
            size_t plen = 0;
            if (hx_tokenizer_token_to_piece(tok, ids[i], 1, piece, sizeof piece, &plen) != HX_OK)
                plen = 0;
            printf("%6d -> '", ids[i]);
            fwrite(piece, 1, plen < sizeof piece ? plen : sizeof piece, stdout);
            printf("'\n");
        }
        if (ids_only)
            printf("]\n");
        if (show_count)
            printf("Total number of tokens: %zu\n", n);
        if (fflush(stdout) != 0 || ferror(stdout)) {
            FAIL("cannot write the tokens: %s\n", strerror(errno));
            rc = 1;
        }
    }
    free(ids);
    free(owned);
    hx_tokenizer_close(tok);
    return rc;
}
