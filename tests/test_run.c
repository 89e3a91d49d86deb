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

/* Ctrl-C on a terminal (tests/ctrlc_check.py drives hetero-run through a
 * pseudo-terminal): mid-reply in -cnv back to the prompt and a second
 * question answered; at the prompt, or twice, exit 130; in plain mode the
 * newline, the timing line and exit 130. */
START_TEST(ctrl_c_as_llama_cli)
{
    char cmd[1024], log[128];
    snprintf(log, sizeof log, "%s/ctrlc.log", tmpdir);
    snprintf(cmd, sizeof cmd, "timeout 300 python3 tests/ctrlc_check.py %s/hetero-run > %s 2>&1", hx_test_build_dir(),
             log);
    int st = system(cmd);
    char *text = hx_test_slurp(log, NULL);
    fprintf(stderr, "%.*s", (int)(strstr(text, "--- the") ? strstr(text, "--- the") - text : (long)strlen(text)),
            text);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "ctrlc_check: %s", text);
    free(text);
}
END_TEST

/* Every numeric option takes a whole value inside its range, or exit 2
 * with the option, the value and the range, before anything loads. */
START_TEST(bad_numbers_are_refused_with_their_range)
{
    static const struct {
        const char *args, *says;
    } bad[] = {
        {"--temp hot", "--temp takes a number from 0 to 1e+06, not 'hot'"},
        {"-n abc", "-n takes a whole number from -1 to 2147483647, not 'abc'"},
        {"-n 4x", "-n takes a whole number from -1 to 2147483647, not '4x'"},
        {"-c abc", "-c takes a whole number from 0 to 2147483647, not 'abc'"},
        {"-t x", "-t takes a whole number from 0 to 4096, not 'x'"},
        {"--top-k z", "--top-k takes a whole number from 0 to 2147483647, not 'z'"},
        {"--top-p 1.5", "--top-p takes a number from 1e-06 to 1, not '1.5'"},
        {"--seed 12ab", "--seed takes a whole number from 0 to 18446744073709551615, not '12ab'"},
        {"-ngl many", "-ngl takes a whole number from 0 to 2147483647, not 'many'"},
        {"--repeat-last-n -5", "--repeat-last-n takes a whole number from 0 to 1048576, not '-5'"},
        {"-b ''", "-b takes a whole number from 1 to 1048576, not ''"},
        {"--mirostat 3", "--mirostat takes a whole number from 0 to 2, not '3'"},
        {"--typical 2", "--typical takes a number from 0 to 1, not '2'"},
        {"--xtc-probability 1.5", "--xtc-probability takes a number from 0 to 1, not '1.5'"},
        {"--dry-base 0.5", "--dry-base takes a number from 1 to 1e+06, not '0.5'"},
        {"--logit-bias 12x", "--logit-bias takes TOKEN_ID+BIAS or TOKEN_ID-BIAS"},
        {"--logit-bias 12+inf", "--logit-bias takes TOKEN_ID+BIAS or TOKEN_ID-BIAS"},
        {"--samplers 'top_k;bogus'", "--samplers: 'bogus' is not one of"},
        {"--samplers infill", "--samplers: 'infill' is not one of"},
        {"--sampling-seq kz", "--sampling-seq takes up to 31 of the letters edskypmxt"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = run(bad[i].args, NULL, out, sizeof out, err, sizeof err);
        ck_assert_msg(rc == 2 && strstr(err, bad[i].says), "%s: exit %d: %s", bad[i].args, rc, err);
        ck_assert_msg(!strstr(err, "parameters"), "%s: the model was loaded: %s", bad[i].args, err);
    }
}
END_TEST

/* llama.cpp's sampler flags change the text as they should: XTC at
 * temperature 0 moves off the greedy token, and after the temperature in
 * --sampling-seq it has nothing left to remove; a seed fixes Mirostat's
 * and DRY's text. */
START_TEST(sampler_flags_change_the_text)
{
    char greedy[4096], xtc[4096], late[4096], names[4096], m1[4096], m2[4096];
    ck_assert_int_eq(run("-p 'Once upon' -n 12 --temp 0 --no-perf", NULL, greedy, sizeof greedy, err, sizeof err), 0);
    ck_assert_int_eq(run("-p 'Once upon' -n 12 --temp 0 --no-perf --xtc-probability 1 --xtc-threshold 0.01", NULL,
                         xtc, sizeof xtc, err, sizeof err), 0);
    ck_assert_int_eq(run("-p 'Once upon' -n 12 --temp 0 --no-perf --xtc-probability 1 --xtc-threshold 0.01 "
                         "--sampling-seq tx", NULL, late, sizeof late, err, sizeof err), 0);
    ck_assert_int_eq(run("-p 'Once upon' -n 12 --temp 0 --no-perf --xtc-probability 1 --xtc-threshold 0.01 "
                         "--samplers 'top-k;top-p;min-p;xtc;temp'", NULL, names, sizeof names, err, sizeof err), 0);
    ck_assert_msg(strcmp(greedy, xtc), "XTC changed nothing: %s", xtc);
    ck_assert_str_eq(late, greedy);
    ck_assert_str_eq(names, xtc);
    const char *miro = "-p 'Once upon' -n 16 --temp 1 --seed 5 --no-perf --mirostat 2 --mirostat-ent 3 "
                       "--dry-multiplier 0.8 --dry-sequence-breaker none --logit-bias 3-inf --typical 0.9";
    ck_assert_int_eq(run(miro, NULL, m1, sizeof m1, err, sizeof err), 0);
    ck_assert_int_eq(run(miro, NULL, m2, sizeof m2, err, sizeof err), 0);
    ck_assert_str_eq(m1, m2);
}
END_TEST

/* llama-cli's options: what maps onto hetero does, with llama.cpp's
 * meaning and a line saying so; the rest is refused by name with what to
 * use instead. */
START_TEST(llama_cli_options)
{
    /* -ngl 0: the CPU alone. */
    int rc = run("--devices '' -ngl 0 -n 2", NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 2 && strstr(err, "-ngl and --devices both choose"), "exit %d: %s", rc, err);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s/hetero-run -ngl 0 -n 2 --temp 0 >/dev/null 2>%s/err", hx_test_build_dir(), tmpdir);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s/err", tmpdir);
    char *e = hx_test_slurp(cmd, NULL);
    ck_assert_msg(strstr(e, "-ngl 0: running on the CPU only (--devices cpu)"), "%s", e);
    free(e);
    /* -ngl 99 says what it did: the GPU devices, or the CPU where none is. */
    snprintf(cmd, sizeof cmd, "%s/hetero-run -ngl 99 -n 2 --temp 0 >/dev/null 2>%s/err", hx_test_build_dir(), tmpdir);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s/err", tmpdir);
    e = hx_test_slurp(cmd, NULL);
    ck_assert_msg(strstr(e, "-ngl 99: using the CPU and the GPU devices") ||
                      strstr(e, "-ngl 99: this machine has no GPU hetero can use, so it runs on the CPU"),
                  "%s", e);
    free(e);

    /* -ctk/-ctv: the K and V caches' types, equal or not (llama.cpp's). */
    rc = run("-ctk q8_0 -ctv q8_0 -n 2", NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    rc = run("-ctk q8_0 -ctv f16 -n 2", NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 0, "mixed K and V types: exit %d: %s", rc, err);
    rc = run("-ctk no_such -ctv no_such -n 2", NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 1 && strstr(err, "no_such"), "a KV type hetero lacks is named: %d: %s", rc, err);
    /* -tb: one thread count. */
    rc = run("-tb 3 -n 2", NULL, out, sizeof out, err, sizeof err); /* run() gives -t 2 */
    ck_assert_msg(rc == 2 && strstr(err, "-tb 3 differs from -t 2"), "%d: %s", rc, err);
    rc = run("-tb 2 -n 2", NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 0, "%d: %s", rc, err);
    /* --no-mmap refused, with what to use; --mlock runs (or says why not). */
    rc = run("--no-mmap", NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 2 && strstr(err, "--no-mmap is not supported") && strstr(err, "--mlock"), "%d: %s", rc, err);
    rc = run("--mlock -n 2", NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 0, "%d: %s", rc, err);
    /* -no-cnv: one prompt. */
    rc = run("-cnv -no-cnv -n 3 -p Hello", "never read\n", out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 0 && !strstr(out, "> ") && !strncmp(out, "Hello", 5), "%d: %s", rc, out);
    /* --verbose-prompt: BOS and one token per byte on this vocabulary. */
    rc = run("--verbose-prompt -n 1 -p ab", NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 0 && strstr(err, "prompt: 3 tokens") && strstr(err, "-> 'a'") && strstr(err, "-> 'b'"),
                  "%d: %s", rc, err);
    /* -r: the reply ends before the text, as --stop. */
    rc = run("-n 24 -p 'Once upon a time'", NULL, out, sizeof out, err, sizeof err);
    ck_assert_int_eq(rc, 0);
    char stop[2] = {out[20], 0}, args[128];
    ck_assert_msg(stop[0] != '\'' && stop[0] != '\\', "pick another prompt");
    snprintf(args, sizeof args, "-n 24 -p 'Once upon a time' -r '%s'", stop);
    rc = run(args, NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 0 && strstr(err, "ended: stop (stop string"), "%d: %s", rc, err);
    /* --ignore-eos: SmolLM2's greedy answer to 2+2 ends with <|im_end|>
     * within 10 tokens at every SIMD level (a chattier prompt's end moves
     * with any change to the arithmetic); with it, it runs to -n. */
    const char *smol = hx_test_smollm2("hetero-run --ignore-eos on SmolLM2");
    if (smol) {
        static const char chat[] = "-p '<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n' -n 60";
        snprintf(cmd, sizeof cmd, "-m %s %s", smol, chat);
        rc = run(cmd, NULL, out, sizeof out, err, sizeof err);
        ck_assert_msg(rc == 0 && strstr(err, "ended: stop (end-of-generation token)"), "%d: %s", rc, err);
        snprintf(cmd, sizeof cmd, "-m %s %s --ignore-eos", smol, chat);
        rc = run(cmd, NULL, out, sizeof out, err, sizeof err);
        ck_assert_msg(rc == 0 && strstr(err, "ended: length (60 tokens, as -n asked)"), "%d: %s", rc, err);
        ck_assert_msg(!strstr(out + 40, "<|im_end|>"), "%s", out);
    }
}
END_TEST

/* The text's newline comes before the timing line when both share one
 * pipe; --no-perf hides the timing (after -cnv turns too); "1 token". */
START_TEST(output_order_no_perf_and_one_token)
{
    char cmd[512], path[128];
    snprintf(path, sizeof path, "%s/both", tmpdir);
    snprintf(cmd, sizeof cmd, "%s/hetero-run --devices cpu -n 1 --temp 0 -p 'Once upon a time' >%s 2>&1",
             hx_test_build_dir(), path);
    ck_assert_int_eq(system(cmd), 0);
    char *both = hx_test_slurp(path, NULL);
    char *timing = strstr(both, "hetero-run: prefill");
    ck_assert_msg(timing && timing > both && timing[-1] == '\n', "%s", both);
    ck_assert_msg(strstr(timing, "decode 1 token in") && strstr(timing, "ended: length (1 token, as -n asked)"),
                  "%s", both);
    free(both);

    int rc = run("--no-perf -n 3", NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 0 && !strstr(err, "prefill") && !strstr(err, "memory:"), "%d: %s", rc, err);
    ck_assert_int_eq(out[strlen(out) - 1], '\n');
    rc = run("--no-perf -cnv -n 3", "Hello\nAgain\n", out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 0 && !strstr(err, "prefill") && strstr(out, "> Again"), "%d: %s", rc, err);
    rc = run("-cnv -n 3", "Hello\n", out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 0 && strstr(err, "prefill"), "%d: %s", rc, err);
}
END_TEST

/* -f with a missing file fails before the model loads; a file that is not
 * GGUF names its path once; --help states the sampling defaults. */
/* --grammar, --grammar-file and -j hold the text, as llama-cli's; a bad
 * grammar or schema fails before any token with its place. */
START_TEST(grammars_hold_the_text)
{
    for (int seed = 1; seed <= 3; seed++) {
        char args[256];
        snprintf(args, sizeof args, "--temp 1 --seed %d -n 8 --no-perf -p 'Answer:' --grammar 'root ::= (\"yes\" | \"no\") \".\"'",
                 seed);
        int rc = run(args, NULL, out, sizeof out, err, sizeof err);
        ck_assert_msg(rc == 0 && (!strcmp(out, "Answer:yes.\n") || !strcmp(out, "Answer:no.\n")), "%d: '%s' %s", rc,
                      out, err);
    }
    char path[160];
    snprintf(path, sizeof path, "%s/g.gbnf", tmpdir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("root ::= [0-9]{3} \"!\"\n", f);
    fclose(f);
    char args[256];
    snprintf(args, sizeof args, "-n 8 --no-perf -p 'N:' --grammar-file %s", path);
    int rc = run(args, NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 0 && strlen(out) == strlen("N:123!\n") && out[5] == '!', "%d: '%s' %s", rc, out, err);
    rc = run("-n 40 --no-perf -p '{' -j '{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}},"
             "\"required\":[\"n\"]}'", NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 0 && strstr(out, "\"n\"") && strchr(out + 1, '}'), "%d: '%s' %s", rc, out, err);
    rc = run("-n 4 --grammar 'root ::= x'", NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 1 && strstr(err, "line 1, column 10: rule 'x' is used but never defined"), "%d: %s", rc, err);
    rc = run("-n 4 -j '{\"type\":\"string\",\"pattern\":\"a\"}'", NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 1 && strstr(err, "keyword 'pattern'") && !strstr(err, "parameters"),
                  "refused before the model loads: %d: %s", rc, err);
    rc = run("-n 4 --grammar 'root ::= \"a\"' -j '{}'", NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 1 && strstr(err, "give one of --grammar, --grammar-file and -j"), "%d: %s", rc, err);
}
END_TEST

START_TEST(early_errors_and_help)
{
    int rc = run("-f /nonexistent/prompt.txt", NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 1 && strstr(err, "-f /nonexistent/prompt.txt: cannot read it") && !strstr(err, "parameters"),
                  "%d: %s", rc, err);
    char path[128], args[256];
    snprintf(path, sizeof path, "%s/not.gguf", tmpdir);
    FILE *f = fopen(path, "w");
    fputs("this is no model\n", f);
    fclose(f);
    snprintf(args, sizeof args, "-m %s", path);
    rc = run(args, NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 1 && strstr(err, "not a GGUF file"), "%d: %s", rc, err);
    char *first = strstr(err, path);
    ck_assert_msg(first && !strstr(first + 1, path), "the path comes once: %s", err);

    rc = run("--help", NULL, out, sizeof out, err, sizeof err);
    ck_assert_int_eq(rc, 0);
    static const char *const defaults[] = {"(default 0.8; 0 = greedy)", "(default 40; 0 = off)",
                                           "(default 0.95; 1 = off)", "(default 0.05; 0 = off)",
                                           "(default 1.0 = off)", "(default 64; 0 = off)"};
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
        ck_assert_msg(strstr(out, defaults[i]), "--help lacks %s", defaults[i]);
    /* What --help states is what the library's defaults are. */
    hx_sampling d = hx_sampling_default();
    ck_assert(d.temperature == 0.8f && d.top_k == 40 && d.top_p == 0.95f && d.min_p == 0.05f &&
              d.repeat_penalty == 1.0f && d.repeat_last_n == 64 && d.seed == 0);
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
    tcase_add_test(tc, bad_numbers_are_refused_with_their_range);
    tcase_add_test(tc, sampler_flags_change_the_text);
    tcase_add_test(tc, llama_cli_options);
    tcase_add_test(tc, output_order_no_perf_and_one_token);
    tcase_add_test(tc, early_errors_and_help);
    tcase_add_test(tc, grammars_hold_the_text);
    suite_add_tcase(s, tc);
    TCase *pty = tcase_create("ctrl-c");
    tcase_add_unchecked_fixture(pty, setup, teardown);
    tcase_set_timeout(pty, 320);
    tcase_add_test(pty, ctrl_c_as_llama_cli);
    suite_add_tcase(s, pty);
    return s;
}
