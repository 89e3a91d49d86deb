/* hetero-run's Ctrl-C (see run.h): the handler only sets a flag while a
 * reply is being generated, and the token callbacks read it; otherwise it
 * ends the process at once, as llama-cli does at its prompt. */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "tools/run.h"

static volatile sig_atomic_t generating, interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    if (generating && !interrupted) {
        interrupted = 1;
        return;
    }
    /* Only async-signal-safe calls: the line ends, the process too. */
    static const char nl[] = "\n";
    ssize_t w = write(STDOUT_FILENO, nl, 1);
    (void)w;
    _exit(RUN_EXIT_INTERRUPTED);
}

void run_sigint_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}

/* On: a new reply, not interrupted yet.  Off: what the last reply was
 * (run_interrupted) is kept for the caller to read. */
void run_generating(int on)
{
    if (on)
        interrupted = 0;
    generating = on;
}

int run_interrupted(void) { return interrupted; }
