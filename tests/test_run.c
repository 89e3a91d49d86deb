/* hetero-run as a person runs it, on the embedded synthetic model (a
 * byte vocabulary: one token per byte, BOS first): the context refuses a
 * prompt before any work and ends a generation with "length" and status
 * 0, stop strings, prompts from a file, the conversation mode and its
 * template errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/hx_test.h"

static char tmpdir[64];

static void setup(void) { hx_test_tmpdir(tmpdir, sizeof tmpdir, "run"); }
static void teardown(void) { hx_test_rmdir(tmpdir); }

/* Runs hetero-run with `args` (shell words) and standard input `input`;
 * returns its exit status, its stdout and stderr in out/err. */
static int run(const char *args, const char *input, char *out, size_t ocap, char *err, size_t ecap)
{
    char in_path[128], out_path[128], err_path[128], cmd[4096];
    snprintf(in_path, sizeof in_path, "%s/in", tmpdir);
    snprintf(out_path, sizeof out_path, "%s/out", tmpdir);
    snprintf(err_path, sizeof err_path, "%s/err", tmpdir);
    FILE *f = fopen(in_path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(input ? input : "", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s/hetero-run --devices cpu -t 2 --temp 0 %s < %s > %s 2> %s", hx_test_build_dir(),
             args, in_path, out_path, err_path);
    int st = system(cmd);
    ck_assert_msg(WIFEXITED(st), "%s did not exit", cmd);
    const char *paths[2] = {out_path, err_path};
    char *bufs[2] = {out, err};
    size_t caps[2] = {ocap, ecap};
    for (int i = 0; i < 2; i++) {
        f = fopen(paths[i], "r");
        ck_assert_ptr_nonnull(f);
        size_t n = fread(bufs[i], 1, caps[i] - 1, f);
        bufs[i][n] = '\0';
        fclose(f);
    }
    return WEXITSTATUS(st);
}

static char out[65536], err[16384];

START_TEST(a_prompt_past_the_context_is_refused_with_its_numbers)
{
    /* 40 bytes and BOS: 41 tokens. */
    int rc = run("-c 32 -p 'abcdefghijklmnopqrstuvwxyz0123456789ABCD'", NULL, out, sizeof out, err, sizeof err);
    ck_assert_int_eq(rc, 1);
    ck_assert_msg(strstr(err, "the prompt is 41 tokens; the context is 32 (-c N"), "stderr: %s", err);
    ck_assert_msg(!strstr(err, "prefill"), "it evaluated something: %s", err);
    ck_assert_str_eq(out, "");
}
END_TEST

START_TEST(a_generation_that_fills_the_context_succeeds_with_length)
{
    int rc = run("-c 48 -n -1 -p 'Once upon a time'", NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    ck_assert_msg(strstr(err, "ended: length (the context of 48 tokens is full)"), "stderr: %s", err);
    /* BOS + 16 prompt bytes + 32 evaluated; the last token sampled adds one more. */
    ck_assert_msg(strstr(err, "prefill 17 tokens") && strstr(err, "decode 32 tokens"), "stderr: %s", err);
    ck_assert_int_eq(strncmp(out, "Once upon a time", 16), 0);

    /* -n within the context ends with length too, and says which. */
    rc = run("-n 5 -p 'Once upon a time'", NULL, out, sizeof out, err, sizeof err);
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(strstr(err, "ended: length (5 tokens, as -n asked)"), "stderr: %s", err);
}
END_TEST

START_TEST(stop_strings_and_prompt_files)
{
    /* What the model says after the prompt, then a stop string from it. */
    int rc = run("-n 24 -p 'Once upon a time'", NULL, out, sizeof out, err, sizeof err);
    ck_assert_int_eq(rc, 0);
    size_t said = strlen(out) - 16 - 1; /* the prompt, the final newline */
    ck_assert_msg(said >= 8, "generated only %zu bytes", said);
    char stop[3] = {out[16 + said / 2], out[16 + said / 2 + 1], 0};
    ck_assert_msg(stop[0] != '\'' && stop[1] != '\'' && stop[0] != '\\' && stop[1] != '\\',
                  "pick another prompt: the stop string would need quoting");
    size_t cut = (size_t)(strstr(out + 16, stop) - out);
    char expect[256];
    snprintf(expect, sizeof expect, "%.*s\n", (int)cut, out);

    char prompt_path[128], args[512];
    snprintf(prompt_path, sizeof prompt_path, "%s/prompt.txt", tmpdir);
    FILE *f = fopen(prompt_path, "w");
    fputs("Once upon a time", f);
    fclose(f);
    snprintf(args, sizeof args, "-n 24 -f %s --stop '%s' --stop 'never said'", prompt_path, stop);
    rc = run(args, NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    ck_assert_str_eq(out, expect);
    ck_assert_msg(strstr(err, "ended: stop (stop string"), "stderr: %s", err);

    rc = run("-p a -f /nonexistent/prompt.txt", NULL, out, sizeof out, err, sizeof err);
    ck_assert_int_eq(rc, 2);
    rc = run("-f /nonexistent/prompt.txt", NULL, out, sizeof out, err, sizeof err);
    ck_assert_int_eq(rc, 1);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/prompt.txt"));
}
END_TEST

START_TEST(a_conversation_answers_each_turn)
{
    /* The synthetic model has no chat template: ChatML, said so. */
    int rc = run("-cnv -n 6 -sys 'Be brief.'", "Hello\n\nAnd again\n", out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    ck_assert_msg(strstr(err, "no chat template; using chatml"), "stderr: %s", err);
    ck_assert_msg(strstr(out, "> Hello\n") && strstr(out, "> And again\n"), "stdout: %s", out);
    /* Two turns, each a prefill and 6 tokens; the first holds the system
     * prompt and BOS, the second only what is new. */
    const char *first = strstr(err, "prefill "), *second = first ? strstr(first + 1, "prefill ") : NULL;
    ck_assert_msg(first && second && !strstr(second + 1, "prefill "), "stderr: %s", err);
    ck_assert_int_gt(atoi(first + 8), atoi(second + 8));
    ck_assert_ptr_nonnull(strstr(first, "decode 6 tokens"));

    rc = run("-cnv --chat-template no-such-family", "Hi\n", out, sizeof out, err, sizeof err);
    ck_assert_int_eq(rc, 1);
    ck_assert_msg(strstr(err, "--chat-template NAME") && strstr(err, "chatml"), "stderr: %s", err);
    rc = run("-cnv --chat-template llama3 -n 4", "Hi\n", out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 0 && strstr(err, "chat template llama3"), "exit %d: %s", rc, err);
}
END_TEST

Suite *suite_run(void)
{
    Suite *s = suite_create("run");
    TCase *tc = tcase_create("hetero-run");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, a_prompt_past_the_context_is_refused_with_its_numbers);
    tcase_add_test(tc, a_generation_that_fills_the_context_succeeds_with_length);
    tcase_add_test(tc, stop_strings_and_prompt_files);
    tcase_add_test(tc, a_conversation_answers_each_turn);
    suite_add_tcase(s, tc);
    return s;
}
