/* What the MPI suites share: jobs of the built tools under `mpirun` on
 * this machine (or without it), each under `timeout`, their output in
 * out/err; and a job with a fault injected into one rank. */
#ifndef HX_TESTS_MPI_JOB_H
#define HX_TESTS_MPI_JOB_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/hx_test.h"

#if defined(__SANITIZE_ADDRESS__)
#define HX_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HX_ASAN 1
#endif
#endif

static char tmpdir[64];
static char out[65536], err[65536];

static inline void setup(void)
{
    hx_test_tmpdir(tmpdir, sizeof tmpdir, "mpi");
    /* CI runs as root, which Open MPI refuses unless told. */
    if (geteuid() == 0) {
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    }
#ifdef HX_ASAN
    /* make asan: Open MPI's plugins keep what they allocate until the
     * process ends, which LeakSanitizer reads as leaks (and fails the
     * rank); memory errors are still caught.  The library's own leaks are
     * the other suites' to find, in one process. */
    setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
#endif
}

static inline void teardown(void) { hx_test_rmdir(tmpdir); }

/* Why the suite cannot run here, or NULL. */
static inline const char *missing(void)
{
#ifndef HX_HAVE_MPI
    return "this build has no Open MPI (install libopenmpi-dev and rebuild: tools/install-deps.sh)";
#else
    if (system("command -v mpirun > /dev/null 2>&1") != 0)
        return "mpirun is not on PATH (install openmpi-bin: tools/install-deps.sh)";
    return NULL;
#endif
}

static inline void slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

static inline double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The mpirun words for n ranks on this machine (n = 0: no mpirun). */
static inline void launcher(int n, char *buf, size_t cap)
{
    if (n == 0)
        buf[0] = '\0';
    else
        snprintf(buf, cap,
                 "mpirun --oversubscribe -np %d --host 127.0.0.1:%d --mca btl_vader_single_copy_mechanism none%s ", n,
                 n, getenv("ASAN_OPTIONS") ? " -x ASAN_OPTIONS" : "");
}

/* Runs a job's command line; out gets the file `out_name` of tmpdir, err
 * its stderr; returns the exit status. */
static inline int run_job(const char *cmd, const char *out_name)
{
    int st = system(cmd);
    ck_assert_msg(WIFEXITED(st), "%s did not exit", cmd);
    char path[128];
    snprintf(path, sizeof path, "%s/%s", tmpdir, out_name);
    slurp(path, out, sizeof out);
    snprintf(path, sizeof path, "%s/err", tmpdir);
    slurp(path, err, sizeof err);
    ck_assert_msg(WEXITSTATUS(st) != 124, "%s ran past its timeout: %s", cmd, err);
    return WEXITSTATUS(st);
}

/* Runs `tool args` on n ranks under a 120 s timeout; stdout and stderr
 * into out/err; returns the exit status. */
static inline int job(int n, const char *tool, const char *args)
{
    char cmd[8192], mpi[256];
    launcher(n, mpi, sizeof mpi);
    snprintf(cmd, sizeof cmd, "timeout 120 %s%s/%s --devices cpu -t 1 %s > %s/out 2> %s/err", mpi,
             hx_test_build_dir(), tool, args, tmpdir, tmpdir);
    return run_job(cmd, "out");
}

/* As job(), rank 0's standard output written to a file by the rank itself
 * (from a shell), not forwarded by mpirun: Open MPI 5.0's forwarding
 * (Debian 13) sometimes loses what a rank wrote just before it exited.
 * out holds rank 0's text. */
static inline int job_rank0_out(int n, const char *tool, const char *args)
{
    char cmd[8192], mpi[256];
    launcher(n, mpi, sizeof mpi);
    snprintf(cmd, sizeof cmd,
             "timeout 120 %ssh -c \"exec %s/%s --devices cpu -t 1 %s > %s/out.\\$OMPI_COMM_WORLD_RANK\" "
             "> /dev/null 2> %s/err",
             mpi, hx_test_build_dir(), tool, args, tmpdir, tmpdir);
    return run_job(cmd, "out.0");
}

static inline long file_bytes(const char *path, char **data)
{
    size_t n;
    *data = hx_test_slurp(path, &n);
    ck_assert_msg(*data != NULL, "no file %s", path);
    return (long)n;
}

/* A long generation on `n` ranks (hetero-run options `extra` besides);
 * rank `victim` gets `sig` once it runs.
 * Returns the seconds from the signal to the end of the job, its status
 * in *rc and its stderr in err. */
static inline double fault(int n, int victim, int sig, const char *extra, int *rc)
{
    char cmd[4096], mpi[256], pidfile[160];
    launcher(n, mpi, sizeof mpi);
    /* nothing of an earlier job may be read as this one's */
    for (int r = 0; r < n; r++) {
        snprintf(pidfile, sizeof pidfile, "%s/pid.%d", tmpdir, r);
        unlink(pidfile);
    }
    snprintf(pidfile, sizeof pidfile, "%s/err", tmpdir);
    unlink(pidfile);
    snprintf(cmd, sizeof cmd,
             "timeout 120 %s sh -c 'echo $$ > %s/pid.$OMPI_COMM_WORLD_RANK; exec %s/hetero-run --devices cpu -t 1 "
             "-c 8192 -n -1 --ignore-eos --mpi-timeout 2 -p x %s' > %s/out 2> %s/err",
             mpi, tmpdir, hx_test_build_dir(), extra, tmpdir, tmpdir);
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    /* Every rank started, and generation under way. */
    snprintf(pidfile, sizeof pidfile, "%s/pid.%d", tmpdir, victim);
    pid_t pid = 0;
    for (int i = 0; i < 600 && pid <= 0; i++) {
        usleep(100000);
        FILE *f = fopen(pidfile, "r");
        if (f) {
            if (fscanf(f, "%d", &pid) != 1)
                pid = 0;
            fclose(f);
        }
    }
    ck_assert_msg(pid > 0, "rank %d never started", victim);
    char errpath[128];
    snprintf(errpath, sizeof errpath, "%s/err", tmpdir);
    for (int i = 0; i < 600; i++) { /* the model line: rank 0 loaded and the ranks agreed */
        usleep(100000);
        if (access(errpath, R_OK) == 0) {
            slurp(errpath, err, sizeof err);
            if (strstr(err, "layers)"))
                break;
        }
    }
    usleep(1000000);
    const double t0 = now();
    ck_assert_int_eq(kill(pid, sig), 0);
    int st;
    ck_assert_int_eq(waitpid(child, &st, 0), child);
    const double took = now() - t0;
    kill(pid, SIGKILL); /* a stopped rank the job left behind, if any */
    slurp(errpath, err, sizeof err);
    ck_assert(WIFEXITED(st));
    *rc = WEXITSTATUS(st);
    ck_assert_msg(*rc != 124, "the job did not end by itself within 120 s of the fault: %s", err);
    fprintf(stderr, "mpi: %d ranks, signal %d to rank %d: the job ended %.2f s later, status %d\n", n, sig, victim,
            took, *rc);
    return took;
}

#endif
