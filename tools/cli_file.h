/* A whole file for a tool's option (-f, --grammar-file,
 * --chat-template-file): header-only, as tools/cli_num.h. */
#ifndef HX_TOOLS_CLI_FILE_H
#define HX_TOOLS_CLI_FILE_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The file's bytes and a NUL (malloc'ed; *len its length when len is not
 * NULL), or NULL after "PROG: OPT PATH: cannot read it: REASON". */
static inline char *cli_read_file(const char *prog, const char *opt, const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *text = NULL;
    size_t size = 0;
    FILE *mem = f ? open_memstream(&text, &size) : NULL;
    char chunk[4096];
    size_t k;
    while (mem && (k = fread(chunk, 1, sizeof chunk, f)) > 0)
        fwrite(chunk, 1, k, mem);
    int err = errno, bad = !f || !mem || ferror(f);
    if (mem)
        fclose(mem);
    if (f)
        fclose(f);
    if (bad) {
        fprintf(stderr, "%s: %s %s: cannot read it: %s\n", prog, opt, path, strerror(err ? err : EIO));
        free(text);
        return NULL;
    }
    if (len)
        *len = size;
    return text;
}

#endif
