/* Shared helpers for the Check suites. */
#ifndef HX_TEST_H
#define HX_TEST_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "hetero.h"

/* Asserts a call returned HX_OK, printing hx_last_error() if not. */
#define HX_ASSERT_OK(call)                                                          \
    do {                                                                            \
        hx_status hx_s_ = (call);                                                   \
        ck_assert_msg(hx_s_ == HX_OK, "%s -> %s: %s", #call, hx_status_str(hx_s_), \
                      hx_last_error());                                             \
    } while (0)

/* Where the tokenizer test data is (HX_TEST_DATA: a folder holding vocab/,
 * which make test fills with tests/fetch-vocab.sh), or NULL. */
static inline const char *hx_test_data_dir(void)
{
    const char *d = getenv("HX_TEST_DATA");
    return d && *d ? d : NULL;
}
/* The build directory holding the tools (HX_BUILD), default "build". */
static inline const char *hx_test_build_dir(void)
{
    const char *b = getenv("HX_BUILD");
    return b ? b : "build";
}

/* A whole file, NUL-terminated (the test fails if it cannot be read). */
static inline char *hx_test_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap + 1);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0)
        if ((n += got) == cap)
            buf = realloc(buf, (cap *= 2) + 1);
    ck_assert_msg(buf && !ferror(f), "cannot read %s", path);
    fclose(f);
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

/* The GGUF file of SmolLM2-135M-Instruct that make test fetches
 * (HX_TEST_SMOLLM2), or NULL when there is none: the caller then skips what
 * needs it, and this says so and why on stderr, so a run without the
 * package registry reads as skipped, not as passed.  Under CI a missing
 * model fails the test: there the registry is reachable, and the real
 * model's checks must run. */
static inline const char *hx_test_smollm2(const char *what)
{
    const char *p = getenv("HX_TEST_SMOLLM2");
    if (p && *p && access(p, R_OK) == 0)
        return p;
    const char *why = p && *p ? "HX_TEST_SMOLLM2 names no readable file"
                              : "no SmolLM2 file: the package registry was not reachable (see fetch-smollm2's "
                                "message above), or HX_TEST_SMOLLM2 is not set (make test sets it)";
    ck_assert_msg(!getenv("CI"), "%s: %s", what, why);
    fprintf(stderr, "SKIPPED %s: %s\n", what, why);
    return NULL;
}

/* The test data folder (HX_TEST_DATA) when it holds llama.cpp's
 * vocabularies, or NULL: the suite then leaves out WHAT, and this says so
 * and why on stderr, as hx_test_smollm2 does.  Called where a suite is
 * built, so the tests that read vocab/ are not added at all (a skipped test
 * never reads as passed).  Under CI missing data fails the run. */
static inline const char *hx_test_vocab(const char *what)
{
    const char *d = hx_test_data_dir();
    char probe[1024];
    if (d && snprintf(probe, sizeof probe, "%s/vocab/ggml-vocab-llama-spm.gguf", d) < (int)sizeof probe &&
        access(probe, R_OK) == 0)
        return d;
    const char *why = d ? "HX_TEST_DATA has no vocab/ggml-vocab-llama-spm.gguf"
                        : "no tokenizer test data: the package registry was not reachable (see fetch-vocab's "
                          "message above), or HX_TEST_DATA is not set (make test sets it)";
    if (getenv("CI")) {
        fprintf(stderr, "FAILED %s: %s\n", what, why);
        exit(1);
    }
    fprintf(stderr, "SKIPPED %s: %s\n", what, why);
    return NULL;
}

/* A fresh directory /tmp/hx-TAG-XXXXXX in buf, and its removal. */
static inline void hx_test_tmpdir(char *buf, size_t cap, const char *tag)
{
    ck_assert_int_lt(snprintf(buf, cap, "/tmp/hx-%s-XXXXXX", tag), (int)cap);
    ck_assert_ptr_nonnull(mkdtemp(buf));
}

static inline void hx_test_rmdir(const char *dir)
{
    char cmd[512];
    ck_assert_int_lt(snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir), (int)sizeof cmd);
    ck_assert_int_eq(system(cmd), 0);
}

#endif
