/* The test runner: every suite of tests/test_*.c, one summary.
 * HX_TEST_SUITE=name runs only the suites whose name contains it.
 * HX_TEST_JOBS=n runs n suites at a time, each in its own worker process
 * (most suites keep one core busy, so on two cores the run takes about
 * half as long); the workers take the suites from one queue, the longest
 * known ones first, so that no long suite starts last. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "tests/hx_test.h"

#define HX_SUITE(fn) Suite *fn(void);
#include "suites.inc"
#undef HX_SUITE

/* LeakSanitizer walks the dynamic TLS blocks it saw __tls_get_addr hand
 * out; with this glibc a forked test child that ran OpenCL (PoCL, LLVM)
 * can reach exit with a stale block in that list, and LSan's tracer then
 * dies on it ("Tracer caught signal 11") and the test fails for no fault
 * of its own.  Leaks are still found: only that bookkeeping is off.
 * Unused without the sanitizers. */
__attribute__((visibility("default"), used)) const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "intercept_tls_get_addr=0"; }

typedef struct {
    const char *name;
    Suite *(*make)(void);
} suite_entry;

static const suite_entry all_suites[] = {
#define HX_SUITE(fn) {#fn, fn},
#include "suites.inc"
#undef HX_SUITE
};
enum { n_all = sizeof all_suites / sizeof all_suites[0] };

/* The suites that take longest (a minute or more of make test), started
 * first; the rest follow in file order.  Only the order depends on this
 * list: a suite missing from it still runs. */
static const char *const long_suites[] = {
    "suite_ops",          "suite_arch_devices", "suite_mpi",           "suite_quantize_file",
    "suite_arrows",       "suite_server_tools", "suite_mpi_tp",        "suite_server_security",
    "suite_server_compat", "suite_webui",       "suite_model",         "suite_batch_decode",
    "suite_perplexity",   "suite_grammar",
};

/* What one worker tells the parent after each suite. */
typedef struct {
    int index, checks, failed;
} suite_result;

static void run_one(int index, suite_result *r)
{
    SRunner *sr = srunner_create(all_suites[index].make());
    /* Check's XML log (CK_XML_LOG_FILE_NAME, each test's duration): one
     * file per suite, NAME.suite_x.xml, since the workers run side by side. */
    const char *xml = getenv("CK_XML_LOG_FILE_NAME");
    char xml_name[4096];
    if (xml && *xml && snprintf(xml_name, sizeof xml_name, "%s.%s.xml", xml, all_suites[index].name) < (int)sizeof xml_name)
        srunner_set_xml(sr, xml_name);
    srunner_run_all(sr, CK_NORMAL);
    r->index = index;
    r->checks = srunner_ntests_run(sr);
    r->failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    fflush(stdout);
}

/* The selected suites (HX_TEST_SUITE), the long ones first in their list's
 * order, then the others in file order; how many. */
static int by_length_then_file_order(int *order, const char *only)
{
    int n = 0;
    char taken[n_all] = {0};
    for (int i = 0; i < n_all; i++)
        taken[i] = only && !strstr(all_suites[i].name, only);
    for (size_t l = 0; l < sizeof long_suites / sizeof long_suites[0]; l++)
        for (int i = 0; i < n_all; i++)
            if (!taken[i] && strcmp(all_suites[i].name, long_suites[l]) == 0)
                taken[i] = 1, order[n++] = i;
    for (int i = 0; i < n_all; i++)
        if (!taken[i])
            taken[i] = 1, order[n++] = i;
    return n;
}

/* One process, every suite in one runner: Check's own summary. */
static int run_in_order(const int *order, int n)
{
    SRunner *sr = srunner_create(all_suites[order[0]].make());
    for (int i = 1; i < n; i++)
        srunner_add_suite(sr, all_suites[order[i]].make());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

/* A worker: reads suite indices from the queue until it is empty, runs
 * each, and writes its result to the parent. */
static void worker(int queue, int results)
{
    int index;
    while (read(queue, &index, sizeof index) == (ssize_t)sizeof index) {
        suite_result r;
        run_one(index, &r);
        if (write(results, &r, sizeof r) != (ssize_t)sizeof r)
            _exit(2);
    }
    _exit(0);
}

static int run_in_workers(const int *order, int n, int jobs)
{
    int queue[2], results[2];
    if (pipe(queue) || pipe(results)) {
        perror("hetero-tests: pipe");
        return 1;
    }
    /* The whole queue is written before any worker starts (a few hundred
     * bytes: far within a pipe's buffer), so every read takes one whole
     * index. */
    if (write(queue[1], order, n * sizeof *order) != (ssize_t)(n * sizeof *order)) {
        perror("hetero-tests: queue");
        return 1;
    }
    close(queue[1]);
    fflush(stdout);
    fflush(stderr);
    for (int w = 0; w < jobs; w++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("hetero-tests: fork");
            return 1;
        }
        if (pid == 0) {
            close(results[0]);
            setvbuf(stdout, NULL, _IOLBF, 0);
            worker(queue[0], results[1]);
        }
    }
    close(queue[0]);
    close(results[1]);
    char done[n_all] = {0};
    int checks = 0, failed = 0, ran = 0;
    for (;;) {
        suite_result r;
        const ssize_t got = read(results[0], &r, sizeof r);
        if (got < 0 && errno == EINTR)
            continue;
        if (got != (ssize_t)sizeof r)
            break; /* every worker has closed its end */
        done[r.index] = r.failed ? 2 : 1;
        checks += r.checks, failed += r.failed, ran++;
    }
    int worker_failed = 0, status;
    while (wait(&status) > 0)
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            worker_failed = 1;
    printf("\nhetero-tests: %d suites in %d workers, %d checks, %d failed\n", ran, jobs, checks, failed);
    for (int i = 0; i < n; i++)
        if (done[order[i]] != 1)
            printf("  %s %s\n", all_suites[order[i]].name, done[order[i]] ? "FAILED" : "did not finish");
    return failed || worker_failed || ran != n ? 1 : 0;
}

int main(void)
{
    const char *only = getenv("HX_TEST_SUITE");
    int order[n_all];
    int n = by_length_then_file_order(order, only);
    if (n == 0) {
        fprintf(stderr, "no suite matches HX_TEST_SUITE=%s\n", only ? only : "");
        return 1;
    }
    const char *jobs_env = getenv("HX_TEST_JOBS");
    char *end = NULL;
    long jobs = jobs_env && *jobs_env ? strtol(jobs_env, &end, 10) : 1;
    if (jobs_env && *jobs_env && (*end || jobs < 1 || jobs > 64)) {
        fprintf(stderr, "HX_TEST_JOBS=%s: expected a number of workers from 1 to 64\n", jobs_env);
        return 1;
    }
    if (jobs > n)
        jobs = n;
    return jobs == 1 ? run_in_order(order, n) : run_in_workers(order, n, (int)jobs);
}
