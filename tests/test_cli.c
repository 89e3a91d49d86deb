/* Every tool's numeric options through one parser (tools/cli_num.h): a
 * value that is not wholly a number inside the option's range is refused
 * with the option, the value and the range, exit 2, before any work.  The
 * table of what each tool says is printed (tool, bad value, message, exit).
 * And every bench-* program answers --help with its usage on stdout, exit 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "tests/hx_test.h"
#include "tools/cli_num.h"

/* Runs BUILD/tool with args (shell words), stdout and stderr to files; exit status. */
static int run_tool(const char *dir, const char *tool, const char *args, char **out, char **err)
{
    char cmd[1024], o[128], e[128];
    snprintf(o, sizeof o, "%s/out", dir);
    snprintf(e, sizeof e, "%s/err", dir);
    snprintf(cmd, sizeof cmd, "cd %s && HX_DEVICES=cpu timeout 60 %s/%s %s </dev/null >%s 2>%s", dir,
             hx_test_build_dir(), tool, args, o, e);
    int st = system(cmd);
    *out = hx_test_slurp(o, NULL);
    *err = hx_test_slurp(e, NULL);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static const struct {
    const char *tool, *args, *says;
} bad[] = {
    {"hetero-run", "--temp hot", "hetero-run: --temp takes a number from 0 to 1e+06, not 'hot'"},
    {"hetero-run", "-n 4x", "hetero-run: -n takes a whole number from -1 to 2147483647, not '4x'"},
    {"hetero-perplexity", "-c abc", "hetero-perplexity: -c takes a whole number from 4 to 1048576, not 'abc'"},
    {"hetero-imatrix", "--chunks 4x", "hetero-imatrix: --chunks takes a whole number from 1 to 1048576, not '4x'"},
    {"hetero-quantize", "--target-bpw x in.gguf", "hetero-quantize: --target-bpw takes a number from 0.5 to 64, not 'x'"},
    {"hetero-quantize", "--target-size 12parsecs in.gguf",
     "hetero-quantize: --target-size takes a size above 0 bytes such as 123, 60MiB or 1.5G, not '12parsecs'"},
    {"hetero-bench", "-r x", "hetero-bench: -r takes a whole number from 1 to 1000, not 'x'"},
    {"hetero-bench", "-p 64,abc", "hetero-bench: -p takes whole numbers from 0 to 65536 (one, a comma-separated "
                                  "list, or ranges A-B, A-B+STEP, A-B*FACTOR), not '64,abc'"},
    {"bench-attention", "-r x", "bench-attention: -r takes a whole number from 1 to 10000, not 'x'"},
    {"bench-attention", "--depth --device gpu", "bench-attention: --device takes cpu or opencl, not 'gpu'"},
    {"bench-cuda-ops", "--perf-n abc", "bench-cuda-ops: --perf-n takes a whole number from 256 to 65536, not 'abc'"},
    {"bench-decode", "-n 0", "bench-decode: -n takes a whole number from 1 to 1048576, not '0'"},
    {"bench-quant", "--reps 99", "bench-quant: --reps takes a whole number from 1 to 31, not '99'"},
    {"bench-repack", "--k 1e3", "bench-repack: --k takes a whole number from 256 to 1048576, not '1e3'"},
    {"bench-sched", "-g 1", "bench-sched: -g takes a whole number from 2 to 1048576, not '1'"},
    {"bench-soak", "-n x", "bench-soak: -n takes a whole number from 1 to 100000000, not 'x'"},
    {"bench-tasks", "-t -3", "bench-tasks: -t takes a whole number from 0 to 4096, not '-3'"},
};

START_TEST(every_tool_refuses_a_bad_number)
{
    char dir[64];
    hx_test_tmpdir(dir, sizeof dir, "cli");
    fprintf(stderr, "| tool | bad value | message | exit |\n| --- | --- | --- | --- |\n");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *out, *err;
        int rc = run_tool(dir, bad[i].tool, bad[i].args, &out, &err);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)strcspn(err, "\n"), err);
        fprintf(stderr, "| %s | `%s` | %s | %d |\n", bad[i].tool, bad[i].args, line, rc);
        ck_assert_msg(rc == CLI_EXIT_USAGE && strstr(err, bad[i].says), "%s %s: exit %d, stderr: %s", bad[i].tool,
                      bad[i].args, rc, err);
        free(out);
        free(err);
    }
    hx_test_rmdir(dir);
}
END_TEST

START_TEST(bench_programs_answer_help)
{
    static const char *const benches[] = {"bench-attention", "bench-cuda-ops", "bench-decode", "bench-quant",
                                          "bench-repack",    "bench-sched",    "bench-soak",   "bench-tasks",
                                          "hetero-bench"};
    char dir[64];
    hx_test_tmpdir(dir, sizeof dir, "cli-help");
    for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++) {
        char *out, *err;
        int rc = run_tool(dir, benches[i], "--help", &out, &err);
        ck_assert_msg(rc == 0 && strstr(out, "usage"), "%s --help: exit %d, stdout: %s, stderr: %s", benches[i],
                      rc, out, err);
        free(out);
        free(err);
        rc = run_tool(dir, benches[i], "--no-such-option", &out, &err);
        ck_assert_msg(rc == CLI_EXIT_USAGE && !*out, "%s --no-such-option: exit %d, stdout: %s", benches[i], rc, out);
        free(out);
        free(err);
    }
    hx_test_rmdir(dir);
}
END_TEST

/* The parser itself: whole values, ranges, signs, the message. */
START_TEST(the_parser)
{
    int v = 7;
    long long l;
    uint64_t u;
    double d;
    ck_assert_int_eq(cli_int("t", "-n", "12", 0, 100, &v), 0);
    ck_assert_int_eq(v, 12);
    static const char *const not_ints[] = {"", "abc", "4x", " 4", "1e3", "0x10", "101", "-1", "99999999999999999999"};
    for (size_t i = 0; i < sizeof not_ints / sizeof not_ints[0]; i++)
        ck_assert_msg(cli_int("t", "-n", not_ints[i], 0, 100, &v) == -1 && v == 12, "'%s'", not_ints[i]);
    ck_assert_int_eq(cli_long("t", "-n", "-5", -10, 10, &l), 0);
    ck_assert_int_eq(l, -5);
    ck_assert_int_eq(cli_u64("t", "--seed", "18446744073709551615", UINT64_MAX, &u), 0);
    ck_assert(u == UINT64_MAX);
    ck_assert_int_eq(cli_u64("t", "--seed", "-1", UINT64_MAX, &u), -1);
    ck_assert_int_eq(cli_u64("t", "--seed", "18446744073709551616", UINT64_MAX, &u), -1);
    ck_assert_int_eq(cli_double("t", "--temp", "0.7", 0, 2, &d), 0);
    ck_assert(d == 0.7);
    static const char *const not_reals[] = {"", "hot", "nan", "inf", "1e999", "0.5x", "3"};
    for (size_t i = 0; i < sizeof not_reals / sizeof not_reals[0]; i++)
        ck_assert_msg(cli_double("t", "--temp", not_reals[i], 0, 2, &d) == -1, "'%s'", not_reals[i]);
}
END_TEST

Suite *suite_cli(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("numbers");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, the_parser);
    tcase_add_test(tc, every_tool_refuses_a_bad_number);
    tcase_add_test(tc, bench_programs_answer_help);
    suite_add_tcase(s, tc);
    return s;
}
