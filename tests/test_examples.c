/* The C examples of include/hetero.h and README.md, taken from the files
 * themselves, compiled against the build and run (tests/check-examples.sh);
 * and the check failing when a copy of either has a wrong argument planted
 * in an example, naming the example. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "tests/hx_test.h"

/* Runs check-examples.sh on HEADER and README; its exit status, and its
 * stdout and stderr in *out (freed by the caller). */
static int check_examples(const char *header, const char *readme, char **out)
{
    char dir[64], log[128], cmd[1024];
    hx_test_tmpdir(dir, sizeof dir, "ex-log");
    snprintf(log, sizeof log, "%s/log", dir);
    ck_assert_int_lt(snprintf(cmd, sizeof cmd, "sh tests/check-examples.sh '%s' '%s' '%s' >'%s' 2>&1",
                              hx_test_build_dir(), header, readme, log),
                     (int)sizeof cmd);
    int st = system(cmd);
    *out = hx_test_slurp(log, NULL);
    hx_test_rmdir(dir);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* A copy of SRC in DIR/NAME with the first FROM replaced by TO. */
static void plant(const char *src, const char *dir, const char *name, const char *from, const char *to,
                  char *path, size_t cap)
{
    size_t len;
    char *text = hx_test_slurp(src, &len);
    char *at = strstr(text, from);
    ck_assert_msg(at != NULL, "%s no longer holds '%s'", src, from);
    snprintf(path, cap, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fwrite(text, 1, (size_t)(at - text), f);
    fputs(to, f);
    fputs(at + strlen(from), f);
    fclose(f);
    free(text);
}

START_TEST(examples_compile_and_run)
{
    char *out;
    int rc = check_examples("include/hetero.h", "README.md", &out);
    fprintf(stderr, "%s", out);
    ck_assert_msg(rc == 0, "check-examples exit %d:\n%s", rc, out);
    ck_assert_ptr_nonnull(strstr(out, "4 examples of hetero.h and 1 of README.md compiled and run"));
    ck_assert_ptr_nonnull(strstr(out, "engine: 32 tokens"));
    ck_assert_ptr_nonnull(strstr(out, "embeddings: 2 inputs"));
    ck_assert_ptr_nonnull(strstr(out, "z[21] = 42"));
    free(out);
}
END_TEST

START_TEST(a_planted_wrong_argument_fails_the_check)
{
    char dir[64], path[256], *out;
    hx_test_tmpdir(dir, sizeof dir, "ex-plant");
    /* hx_engine_wait without its timeout, as the header once had it. */
    plant("include/hetero.h", dir, "hetero.h", "hx_engine_wait(e, id, -1, &res)", "hx_engine_wait(e, id, &res)",
          path, sizeof path);
    int rc = check_examples(path, "README.md", &out);
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "example 'engine' does not compile") && strstr(out, "too few arguments"), "%s", out);
    ck_assert_msg(strstr(out, "1 of 5 examples failed"), "%s", out);
    free(out);
    /* README's program without its runtime argument. */
    plant("README.md", dir, "README.md", "hx_buffer_create(rt, N * sizeof(float), &x)",
          "hx_buffer_create(N * sizeof(float), &x)", path, sizeof path);
    rc = check_examples("include/hetero.h", path, &out);
    ck_assert_msg(rc == 1 && strstr(out, "example 'vector_add' does not compile"), "exit %d:\n%s", rc, out);
    free(out);
    /* An example whose result is wrong: it compiles, its check fails. */
    plant("include/hetero.h", dir, "hetero.h", "r.max_tokens = 32;", "r.max_tokens = 31;", path, sizeof path);
    rc = check_examples(path, "README.md", &out);
    ck_assert_msg(rc == 1 && strstr(out, "example 'engine' did not run to success"), "exit %d:\n%s", rc, out);
    free(out);
    hx_test_rmdir(dir);
}
END_TEST

Suite *suite_examples(void)
{
    Suite *s = suite_create("examples");
    TCase *tc = tcase_create("examples");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, examples_compile_and_run);
    tcase_add_test(tc, a_planted_wrong_argument_fails_the_check);
    suite_add_tcase(s, tc);
    return s;
}
