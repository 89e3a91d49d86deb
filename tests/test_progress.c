/* Long work shows its progress on a terminal and nothing in a pipe or
 * with -q: hetero-quantize per tensor with an ETA (tests/pty_run.py gives
 * it a terminal), hetero-perplexity and hetero-imatrix per chunk as
 * llama-perplexity ("seconds per pass - ETA"), hetero-bench's rows as
 * they finish. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "tests/hx_test.h"

static char dir[64], model[128], text[128];

static void setup(void)
{
    hx_test_tmpdir(dir, sizeof dir, "progress");
    snprintf(model, sizeof model, "%s/tiny.gguf", dir);
    HX_ASSERT_OK(hx_model_write_synthetic(model, "tiny", "f16", 1));
    snprintf(text, sizeof text, "%s/text.txt", dir);
    FILE *f = fopen(text, "w");
    for (int i = 0; i < 200; i++)
        fputs("Once upon a time there was a model that read its text in chunks. ", f);
    fclose(f);
}
static void teardown(void) { hx_test_rmdir(dir); }

/* `tool args` on a terminal (tty != 0) or with stdout and stderr piped to
 * a file; what it printed, and its exit status in *rc. */
static char *run(int tty, const char *tool, const char *args, int *rc)
{
    char cmd[1024], log[160];
    snprintf(log, sizeof log, "%s/log", dir);
    snprintf(cmd, sizeof cmd, "HX_DEVICES=cpu %s%s/%s %s%s >%s 2>&1", tty ? "python3 tests/pty_run.py 120 " : "",
             hx_test_build_dir(), tool, args, tty ? "" : " 2>&1 | cat", log);
    int st = system(cmd);
    *rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    return hx_test_slurp(log, NULL);
}

START_TEST(quantize_shows_each_tensor_on_a_terminal)
{
    char args[512];
    int rc;
    snprintf(args, sizeof args, "%s %s/q.gguf Q8_0", model, dir);
    char *out = run(1, "hetero-quantize", args, &rc);
    ck_assert_msg(rc == 0, "%s", out);
    ck_assert_msg(strstr(out, "hetero-quantize: quantizing 1/") && strstr(out, "ETA ") && strstr(out, " done in "),
                  "no progress on a terminal: %s", out);
    free(out);
    out = run(0, "hetero-quantize", args, &rc);
    ck_assert_msg(rc == 0 && !strstr(out, "quantizing") && strstr(out, "model size:"), "piped: %s", out);
    free(out);
    snprintf(args, sizeof args, "-q %s %s/q.gguf Q8_0", model, dir);
    out = run(1, "hetero-quantize", args, &rc);
    ck_assert_msg(rc == 0 && !strstr(out, "quantizing") && strstr(out, "model size:"), "-q: %s", out);
    free(out);
    /* The budget's measuring step too, in a dry run. */
    snprintf(args, sizeof args, "--target-bpw 6 --dry-run %s %s/q.gguf", model, dir);
    out = run(1, "hetero-quantize", args, &rc);
    ck_assert_msg(rc == 0 && strstr(out, "hetero-quantize: measuring ") && strstr(out, " done in "), "%s", out);
    free(out);
}
END_TEST

START_TEST(perplexity_and_imatrix_give_an_eta_on_a_terminal)
{
    static const char *const tools[] = {"hetero-perplexity", "hetero-imatrix"};
    for (int t = 0; t < 2; t++) {
        char args[512];
        int rc;
        snprintf(args, sizeof args, "-m %s -f %s -c 64 --chunks 3 -o %s/imatrix.gguf", model, text, dir);
        if (t == 0)
            *strstr(args, " -o ") = '\0';
        char *out = run(1, tools[t], args, &rc);
        ck_assert_msg(rc == 0 && strstr(out, "seconds per pass - chunk 1 of 3 - ETA"), "%s: %s", tools[t], out);
        free(out);
        out = run(0, tools[t], args, &rc);
        ck_assert_msg(rc == 0 && !strstr(out, "ETA") && strstr(out, "[3]"), "%s piped: %s", tools[t], out);
        free(out);
        strcat(args, " -q");
        out = run(1, tools[t], args, &rc);
        ck_assert_msg(rc == 0 && !strstr(out, "ETA") && strstr(out, "[3]"), "%s -q: %s", tools[t], out);
        free(out);
    }
}
END_TEST

/* hetero-bench: each row on stderr as it is measured, on a terminal (as
 * llama-bench streams its rows), before the tables; not when piped or -q. */
START_TEST(bench_rows_as_they_finish)
{
    char args[512];
    int rc;
    snprintf(args, sizeof args, "-m %s -r 1 -p 8 -n 4", model);
    char *out = run(1, "hetero-bench", args, &rc);
    const char *row = strstr(out, "| pp8 | "), *table = strstr(out, "| model ");
    ck_assert_msg(rc == 0 && row && table && row < table && strstr(out, "| tg4 | "), "%s", out);
    free(out);
    out = run(0, "hetero-bench", args, &rc);
    ck_assert_msg(rc == 0 && !strstr(out, "| pp8 | ") && strstr(out, "| model "), "piped: %s", out);
    free(out);
    strcat(args, " -q");
    out = run(1, "hetero-bench", args, &rc);
    ck_assert_msg(rc == 0 && !strstr(out, "| pp8 | ") && strstr(out, "| model "), "-q: %s", out);
    free(out);
}
END_TEST

Suite *suite_progress(void)
{
    Suite *s = suite_create("progress");
    TCase *tc = tcase_create("progress");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, quantize_shows_each_tensor_on_a_terminal);
    tcase_add_test(tc, perplexity_and_imatrix_give_an_eta_on_a_terminal);
    tcase_add_test(tc, bench_rows_as_they_finish);
    suite_add_tcase(s, tc);
    return s;
}
