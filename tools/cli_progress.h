/* A progress line for the tools' long work (quantizing tensors, evaluating
 * chunks), as llama.cpp's tools give one: on a terminal only, on stderr,
 * rewritten in place with what is done, of how much, and an estimate of
 * the time left; nothing when stderr is piped or with -q, so logs and
 * scripts see only the results.
 *
 * Header-only: tools/ and bench/ link no shared object of their own. */
#ifndef HX_TOOLS_CLI_PROGRESS_H
#define HX_TOOLS_CLI_PROGRESS_H

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    const char *prog;
    int on;
    char step[32];
    double t0; /* when the step began */
} cli_progress;

static inline double cli_progress_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* On when stderr is a terminal and the user did not ask for quiet. */
static inline void cli_progress_init(cli_progress *p, const char *prog, int quiet)
{
    memset(p, 0, sizeof *p);
    p->prog = prog;
    p->on = !quiet && isatty(STDERR_FILENO);
}

/* `done` of `total` units of `step` finished, `what` the one under way (or
 * NULL); the line ends when done == total. */
static inline void cli_progress_update(cli_progress *p, const char *step, size_t done, size_t total, const char *what)
{
    if (!p->on || !total)
        return;
    double now = cli_progress_now();
    if (strncmp(p->step, step, sizeof p->step) != 0 || done == 0) {
        snprintf(p->step, sizeof p->step, "%s", step);
        p->t0 = now;
    }
    double spent = now - p->t0;
    char eta[32] = "";
    if (done && done < total) {
        double left = spent / (double)done * (double)(total - done);
        snprintf(eta, sizeof eta, ", ETA %d:%02d", (int)(left / 60), (int)left % 60);
    }
    if (done == total) {
        fprintf(stderr, "\r\033[K%s: %s %zu/%zu done in %.1f s\n", p->prog, step, done, total, spent);
        p->step[0] = '\0';
    } else {
        fprintf(stderr, "\r\033[K%s: %s %zu/%zu (%3.0f%%%s) %.60s", p->prog, step, done, total,
                100.0 * (double)done / (double)total, eta, what ? what : "");
    }
    fflush(stderr);
}

#endif
