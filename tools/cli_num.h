/* One parser for every tool's numeric options (hetero-run, -server,
 * -perplexity, -quantize, -bench and the bench-* programs).
 *
 * A value is accepted only when the whole of it is a number of the option's
 * kind inside the option's range: "abc", "4x", "", "1e999", "nan" and
 * out-of-range values are refused with the option, the value and the range,
 * so that a typo never runs with a default (llama.cpp's tools stop there
 * too).  The tools exit 2 on a refused value, as on any bad usage.
 *
 * Header-only: tools/ and bench/ link no shared object of their own. */
#ifndef HX_TOOLS_CLI_NUM_H
#define HX_TOOLS_CLI_NUM_H

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Exit status of a tool given a bad option or value. */
#define CLI_EXIT_USAGE 2

/* A whole number in [lo, hi].  Returns 0, or -1 after printing
 * "PROG: OPT takes a whole number from LO to HI, not 'V'". */
static inline int cli_long(const char *prog, const char *opt, const char *v, long long lo, long long hi,
                           long long *out)
{
    char *end = NULL;
    long long n = 0;
    errno = 0;
    /* strtoll skips leading blanks: " 4" is not a number here. */
    if (v && *v && !isspace((unsigned char)*v))
        n = strtoll(v, &end, 10);
    if (!v || !*v || isspace((unsigned char)*v) || errno || !end || *end || n < lo || n > hi) {
        fprintf(stderr, "%s: %s takes a whole number from %lld to %lld, not '%s'\n", prog, opt, lo, hi,
                v ? v : "(nothing)");
        return -1;
    }
    *out = n;
    return 0;
}

/* The same for an int, a common case. */
static inline int cli_int(const char *prog, const char *opt, const char *v, int lo, int hi, int *out)
{
    long long n;
    if (cli_long(prog, opt, v, lo, hi, &n))
        return -1;
    *out = (int)n;
    return 0;
}

/* An unsigned 64-bit value in [0, hi] (seeds, byte counts). */
static inline int cli_u64(const char *prog, const char *opt, const char *v, uint64_t hi, uint64_t *out)
{
    char *end = NULL;
    unsigned long long n = 0;
    errno = 0;
    /* strtoull accepts "-1" as a huge value: refuse any sign. */
    if (v && *v && *v != '-' && *v != '+')
        n = strtoull(v, &end, 10);
    if (!v || !*v || *v == '-' || *v == '+' || errno || !end || *end || n > hi) {
        fprintf(stderr, "%s: %s takes a whole number from 0 to %llu, not '%s'\n", prog, opt,
                (unsigned long long)hi, v ? v : "(nothing)");
        return -1;
    }
    *out = n;
    return 0;
}

/* A finite real number in [lo, hi]. */
static inline int cli_double(const char *prog, const char *opt, const char *v, double lo, double hi, double *out)
{
    char *end = NULL;
    double x = 0;
    errno = 0;
    if (v && *v && !isspace((unsigned char)*v))
        x = strtod(v, &end);
    if (!v || !*v || isspace((unsigned char)*v) || errno || !end || *end || !isfinite(x) || x < lo || x > hi) {
        fprintf(stderr, "%s: %s takes a number from %g to %g, not '%s'\n", prog, opt, lo, hi,
                v ? v : "(nothing)");
        return -1;
    }
    *out = x;
    return 0;
}

static inline int cli_float(const char *prog, const char *opt, const char *v, double lo, double hi, float *out)
{
    double x;
    if (cli_double(prog, opt, v, lo, hi, &x))
        return -1;
    *out = (float)x;
    return 0;
}

#endif
