/* hetero-bench as a user runs it: the built program on a tiny model, its
 * three output formats checked row by row and column by column, the JSON
 * against bench/schema.json, the charts and timeline written, and the
 * command-line mistakes that must fail with a clear message. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "quantize/synthetic.h"
#include "tests/hx_test.h"

static char tmpdir[64], model[128];

/* One layer of 64: a run takes milliseconds, even under the sanitizers. */
static const hx_synthetic_config tiny = {"bench-tiny", 64, 1, 2, 2, 128, 64, "llama", 0};

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/hx-bench-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    snprintf(model, sizeof model, "%s/tiny.gguf", tmpdir);
    HX_ASSERT_OK(hx_synthetic_write(model, &tiny, "f16", 7));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Runs hetero-bench with `args`; stdout (and stderr with `merge`) into
 * out.  The cache directory points into tmpdir so that nothing the run
 * might write lands in the user's. */
static int bench(const char *args, int merge, char *out, size_t cap)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "XDG_CACHE_HOME=%s %s/hetero-bench %s %s", tmpdir, hx_test_build_dir(), args,
             merge ? "2>&1" : "2>/dev/null");
    FILE *p = popen(cmd, "r");
    ck_assert_msg(p != NULL, "popen %s", cmd);
    size_t n = 0, got;
    while (n + 1 < cap && (got = fread(out + n, 1, cap - 1 - n, p)) > 0)
        n += got;
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static int count_char(const char *s, size_t len, char c)
{
    int n = 0;
    for (size_t i = 0; i < len; i++)
        n += s[i] == c;
    return n;
}

static int line_len(const char *s) { return (int)strcspn(s, "\n"); }

/* Rows of the markdown table starting at *s (header and rule excluded);
 * each must have the header's number of cells.  Leaves *s past it. */
static int md_rows(const char **s, const char *const *columns)
{
    const char *head = *s;
    int hl = line_len(head), cells = count_char(head, (size_t)hl, '|'), rows = 0;
    for (int i = 0; columns[i]; i++) {
        char col[64];
        snprintf(col, sizeof col, " %s ", columns[i]);
        ck_assert_msg(memmem(head, (size_t)hl, col, strlen(col)), "column '%s' missing in: %.*s", columns[i], hl,
                      head);
    }
    const char *l = head + hl + 1;
    ck_assert_msg(!strncmp(l, "| -", 3) || !strncmp(l, "| :", 3), "no rule under the header: %.40s", l);
    for (l += line_len(l) + 1; *l == '|'; l += line_len(l) + 1, rows++)
        ck_assert_msg(count_char(l, (size_t)line_len(l), '|') == cells, "row with a different number of cells: %.*s",
                      line_len(l), l);
    *s = l;
    return rows;
}

START_TEST(markdown_has_one_row_per_combination)
{
    static char out[1 << 16];
    char args[512];
    snprintf(args, sizeof args, "-m %s -p 8 -n 4 -r 1 -b 4,8 -o md", model);
    ck_assert_int_eq(bench(args, 0, out, sizeof out), 0);
    static const char *const speed[] = {"model", "size", "params", "type", "devices", "policy", "threads",
                                        "n_batch", "test", "t/s", "vs base", NULL};
    static const char *const runtime[] = {"model", "devices", "policy", "test", "busy %", "tasks/run", "µs/task",
                                          "copies/run", "moved/run", "peak RSS", NULL};
    const char *s = out;
    ck_assert_int_eq(md_rows(&s, speed), 4);
    ck_assert_msg(*s == '\n', "no blank line between the tables");
    s++;
    ck_assert_int_eq(md_rows(&s, runtime), 4);
    /* Rows come grouped by test, the batch sizes side by side. */
    const char *pp = strstr(out, "| pp8 "), *tg = strstr(out, "| tg4 ");
    ck_assert_ptr_nonnull(pp);
    ck_assert_ptr_nonnull(tg);
    ck_assert_ptr_nonnull(strstr(pp + 1, "| pp8 "));
    ck_assert(pp < tg);
    ck_assert_ptr_nonnull(strstr(out, "1.00x"));
    /* The busy column names the device and its share: "cpu 97.5". */
    const char *busy = strstr(out, "| cpu ");
    while (busy && !(busy[6] >= '0' && busy[6] <= '9'))
        busy = strstr(busy + 1, "| cpu ");
    ck_assert_msg(busy != NULL, "no busy %% of the CPU device in: %s", out);
    /* t/s as mean ± std, a positive mean. */
    const char *ts = strstr(out, " ± ");
    ck_assert_ptr_nonnull(ts);
    while (ts > out && ts[-1] != ' ')
        ts--;
    ck_assert_double_gt(strtod(ts, NULL), 0);
}
END_TEST

/* Fields of a CSV line with no quoted field; empty fields kept. */
static int split_csv(char *line, char **f, int max)
{
    int n = 0;
    for (char *t; n < max && (t = strsep(&line, ",")) != NULL;)
        f[n++] = t;
    return n;
}

START_TEST(csv_rows_have_every_column)
{
    static char out[1 << 16];
    char args[512];
    snprintf(args, sizeof args, "-m %s -p 8 -n 4 -r 2 -o csv", model);
    ck_assert_int_eq(bench(args, 0, out, sizeof out), 0);
    char *lines[8], *save = NULL;
    int n = 0;
    for (char *l = strtok_r(out, "\n", &save); l && n < 8; l = strtok_r(NULL, "\n", &save))
        lines[n++] = l;
    ck_assert_int_eq(n, 3);
    char *head[64], *row[64];
    int nh = split_csv(lines[0], head, 64);
    int test = -1, avg = -1, samples = -1, busy = -1, n_prompt = -1, n_gen = -1;
    for (int i = 0; i < nh; i++) {
        if (!strcmp(head[i], "test")) test = i;
        if (!strcmp(head[i], "avg_ts")) avg = i;
        if (!strcmp(head[i], "samples_ns")) samples = i;
        if (!strcmp(head[i], "device_busy_pct")) busy = i;
        if (!strcmp(head[i], "n_prompt")) n_prompt = i;
        if (!strcmp(head[i], "n_gen")) n_gen = i;
    }
    ck_assert_msg(test >= 0 && avg >= 0 && samples >= 0 && busy >= 0 && n_prompt >= 0 && n_gen >= 0,
                  "a column is missing from the CSV header");
    for (int r = 1; r < 3; r++) {
        char copy[4096];
        snprintf(copy, sizeof copy, "%s", lines[r]);
        ck_assert_int_eq(split_csv(copy, row, 64), nh);
        ck_assert_str_eq(row[test], r == 1 ? "pp8" : "tg4");
        ck_assert_str_eq(row[n_prompt], r == 1 ? "8" : "0");
        ck_assert_str_eq(row[n_gen], r == 1 ? "0" : "4");
        ck_assert_double_gt(strtod(row[avg], NULL), 0);
        ck_assert_msg(strchr(row[samples], ';') && !strncmp(row[busy], "cpu:", 4), "samples %s, busy %s",
                      row[samples], row[busy]);
    }
}
END_TEST

static void assert_svg(const char *path, const char *contains)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s was not written", path);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    ck_assert_msg(strstr(buf, "<svg") && strstr(buf, "</svg>"), "%s is not an SVG", path);
    ck_assert_msg(strstr(buf, contains), "%s does not mention '%s'", path, contains);
}

static void assert_schema(const char *doc)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "python3 tests/check_schema.py bench/schema.json %s", doc);
    int st = system(cmd);
    ck_assert_msg(!(WIFEXITED(st) && WEXITSTATUS(st) == 3),
                  "python3 lacks the jsonschema package: pip install -r tests/requirements.txt");
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s does not match bench/schema.json (%s)", doc, cmd);
}

START_TEST(json_matches_the_schema_and_plots_are_drawn)
{
    static char out[1 << 16];
    char args[512], path[256];
    snprintf(args, sizeof args, "-m %s -p 8 -n 4 -r 2 -o json --plot %s/plot", model, tmpdir);
    ck_assert_int_eq(bench(args, 0, out, sizeof out), 0);
    ck_assert_ptr_nonnull(strstr(out, "\"test\": \"pp8\""));
    ck_assert_ptr_nonnull(strstr(out, "\"test\": \"tg4\""));
    ck_assert_ptr_null(strstr(strstr(out, "\"test\": \"tg4\""), "\"test\": \"pp8\""));
    snprintf(path, sizeof path, "%s/out.json", tmpdir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(out, f);
    fclose(f);
    assert_schema(path);
    snprintf(path, sizeof path, "%s/plot/hetero-bench.json", tmpdir);
    assert_schema(path);
    snprintf(path, sizeof path, "%s/plot/pp8.svg", tmpdir);
    assert_svg(path, "bench-tiny");
    snprintf(path, sizeof path, "%s/plot/tg4.svg", tmpdir);
    assert_svg(path, "devices cpu, policy");
}
END_TEST

/* The same benchmark on a described machine: rows say so, the JSON names
 * the description and matches the schema, and the simulated CPU alone
 * does no copies while the H200 and the U55C move data. */
START_TEST(simulated_machine)
{
    static char out[1 << 16];
    char args[512], path[256];
    snprintf(args, sizeof args,
             "--sim bench/machines/epyc2s-h200-u55c.machine --shapes llama2-7b:q4_0,tiny:f16 -p 16 -n 4 -r 2 "
             "--devices 'cpu;all' --sched static,dmda --partition affinity,auto -o json");
    ck_assert_int_eq(bench(args, 0, out, sizeof out), 0);
    ck_assert_ptr_nonnull(strstr(out, "\"simulated\": \"epyc2s-h200-u55c.machine\""));
    ck_assert_ptr_nonnull(strstr(out, "\"devices\": \"cpu[sim]\""));
    ck_assert_ptr_nonnull(strstr(out, "\"devices\": \"all[sim]\""));
    ck_assert_ptr_nonnull(strstr(out, "LLaMA-2-7B shapes"));
    ck_assert_ptr_nonnull(strstr(out, "\"partition\": \"auto\""));
    snprintf(path, sizeof path, "%s/sim.json", tmpdir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(out, f);
    fclose(f);
    assert_schema(path);
    snprintf(args, sizeof args, "--sim bench/machines/epyc2s-h200-u55c.machine -p 0 -n 4 -r 1 --devices 'cpu;all'");
    ck_assert_int_eq(bench(args, 0, out, sizeof out), 0);
    ck_assert_msg(strstr(out, "SIMULATED") && strstr(out, "| cpu[sim] ") && strstr(out, "cuda "), "%s", out);
}
END_TEST

/* The t/s cell (7th) of the cluster table's row for `test`, -1 if absent. */
static double cluster_tps(const char *out, const char *test)
{
    char key[64];
    snprintf(key, sizeof key, " | %s | ", test);
    const char *r = strstr(out, key);
    if (!r)
        return -1;
    while (r > out && r[-1] != '\n')
        r--;
    for (int cell = 0; cell < 6 && r; cell++)
        r = strchr(r + 1, '|');
    return r ? strtod(r + 1, NULL) : -1;
}

/* --sim CLUSTER: one node predicts what the machine alone does; four
 * nodes over InfiniBand speed up prefill (chunks in flight on every node)
 * and batched decode a little, but not one sequence's decode (a token
 * still passes every layer in turn), and are no slower than the same
 * nodes over 25 Gb/s Ethernet; a malformed cluster file is refused with
 * its line. */
START_TEST(simulated_cluster)
{
    static char out[1 << 14];
    const char *common = "--shapes llama2-7b:q4_0 --sched plan -p 256 -n 4 --seqs 1,16 -d 64";
    char args[600];
    snprintf(args, sizeof args, "--sim bench/clusters/epyc2s-h200-u55c-1x.cluster %s", common);
    ck_assert_int_eq(bench(args, 0, out, sizeof out), 0);
    double one_b1 = cluster_tps(out, "tg4@d64"), one_b16 = cluster_tps(out, "tg4x16@d64"),
           one_pp = cluster_tps(out, "pp256");
    ck_assert_msg(one_b1 > 0 && one_b16 > 0 && one_pp > 0, "%s", out);
    snprintf(args, sizeof args, "--sim bench/machines/epyc2s-h200-u55c.machine %s -r 1 -o json", common);
    ck_assert_int_eq(bench(args, 0, out, sizeof out), 0);
    const char *tg = strstr(out, "\"test\": \"tg4@d64\"");
    ck_assert_ptr_nonnull(tg);
    const char *ts = strstr(tg, "\"avg_ts\": ");
    ck_assert_ptr_nonnull(ts);
    double alone = strtod(ts + 10, NULL);
    ck_assert_msg(fabs(one_b1 / alone - 1) < 1e-3, "one node %.4f t/s, the machine alone %.4f", one_b1, alone);
    double ib[3], eth[3];
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args, "--sim bench/clusters/epyc2s-h200-u55c-4x-%s.cluster %s", k ? "eth25" : "ib200",
                 common);
        ck_assert_int_eq(bench(args, 0, out, sizeof out), 0);
        double *v = k ? eth : ib;
        v[0] = cluster_tps(out, "tg4@d64"), v[1] = cluster_tps(out, "tg4x16@d64"), v[2] = cluster_tps(out, "pp256");
        ck_assert_msg(v[0] > 0 && v[1] > 0 && v[2] > 0, "%s", out);
    }
    ck_assert_msg(ib[0] <= one_b1 * 1.0001, "one sequence: 4 nodes %.3f t/s, one %.3f", ib[0], one_b1);
    ck_assert_msg(ib[1] > one_b16, "16 sequences: 4 nodes %.3f t/s, one %.3f", ib[1], one_b16);
    ck_assert_msg(ib[2] > one_pp * 1.5, "prefill: 4 nodes %.3f t/s, one %.3f", ib[2], one_pp);
    for (int i = 0; i < 3; i++)
        ck_assert_msg(eth[i] <= ib[i], "row %d: Ethernet %.3f t/s, InfiniBand %.3f", i, eth[i], ib[i]);
    /* Mistakes: a bad value, an unknown key, no nodes. */
    static const struct {
        const char *text, *says;
    } bad[] = {
        {"cluster = x\nbandwidth = fast\nlatency = 1us\nnodes = 2\nmachine = m\n", ":2: bandwidth"},
        {"cluster = x\nbandwidth = 1G\nlatency = 1us\nnodes = 2\nmachine = m\ncolour = red\n", "unknown key 'colour'"},
        {"cluster = x\nbandwidth = 1G\nlatency = 1us\n", "no nodes"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char path[300];
        snprintf(path, sizeof path, "%s/bad.cluster", tmpdir);
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs(bad[i].text, f);
        fclose(f);
        snprintf(args, sizeof args, "--sim %s --shapes llama2-7b:q4_0 -p 0 -n 4", path);
        ck_assert_int_ne(bench(args, 1, out, sizeof out), 0);
        ck_assert_msg(strstr(out, bad[i].says), "expected '%s' in: %s", bad[i].says, out);
    }
}
END_TEST

START_TEST(timeline_from_a_chrome_trace)
{
    char trace[256], args[600], svg[256];
    static char out[1 << 14];
    snprintf(trace, sizeof trace, "%s/trace.json", tmpdir);
    FILE *f = fopen(trace, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"traceEvents\": [\n"
          " {\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 0, \"args\": {\"name\": \"cpu0\"}},\n"
          " {\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 1, \"args\": {\"name\": \"fpga1\"}},\n"
          " {\"name\": \"rms_norm\", \"ph\": \"X\", \"ts\": 10, \"dur\": 5, \"pid\": 1, \"tid\": 0},\n"
          " {\"name\": \"attention\", \"ph\": \"B\", \"ts\": 16, \"pid\": 1, \"tid\": 1},\n"
          " {\"name\": \"attention\", \"ph\": \"E\", \"ts\": 40, \"pid\": 1, \"tid\": 1},\n"
          " {\"name\": \"token\", \"cat\": \"token\", \"ph\": \"X\", \"ts\": 10, \"dur\": 35, \"pid\": 1, \"tid\": 0},\n"
          " {\"name\": \"gemm \\u00e9\", \"ph\": \"X\", \"ts\": 41, \"dur\": 3, \"pid\": 1, \"tid\": 0}\n"
          "]}\n",
          f);
    fclose(f);
    snprintf(args, sizeof args, "--timeline %s --plot %s/tl", trace, tmpdir);
    ck_assert_int_eq(bench(args, 1, out, sizeof out), 0);
    snprintf(svg, sizeof svg, "%s/tl/timeline.svg", tmpdir);
    assert_svg(svg, "fpga1");
    assert_svg(svg, "attention");
    assert_svg(svg, "gemm \xc3\xa9");

    f = fopen(trace, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"traceEvents\": [{\"name\": \"x\", \"ph\": \"X\", \"ts\": 1,", f);
    fclose(f);
    ck_assert_int_ne(bench(args, 1, out, sizeof out), 0);
    ck_assert_msg(strstr(out, "--timeline"), "no clear message: %s", out);
}
END_TEST

/* Injected slowdowns are rows of their own beside the rows without; a
 * traced token is drawn per device set. */
START_TEST(injection_rows_and_traced_token)
{
    static char out[1 << 16];
    char args[800], path[256];
    snprintf(args, sizeof args, "-m %s -p 8 -n 0 -r 1 --inject 'none;kind=cpu,slow=2' -o csv --trace %s/t.json "
                                "--plot %s/plot", model, tmpdir, tmpdir);
    ck_assert_int_eq(bench(args, 0, out, sizeof out), 0);
    ck_assert_int_eq(count_char(out, strlen(out), '\n'), 3);
    ck_assert_ptr_nonnull(strstr(out, ",\"kind=cpu,slow=2\","));
    snprintf(path, sizeof path, "%s/plot/timeline.svg", tmpdir);
    assert_svg(path, "matmul");
    snprintf(path, sizeof path, "%s/t.json", tmpdir);
    ck_assert_int_eq(access(path, R_OK), 0);
}
END_TEST

/* The number after "key": in a JSON text, from `from` on. */
static double json_number(const char *from, const char *key)
{
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\": ", key);
    const char *at = strstr(from, quoted);
    ck_assert_msg(at != NULL, "no %s in: %s", key, from);
    return strtod(at + strlen(quoted), NULL);
}

/* Batched decode as llama-batched-bench runs it (-npp 8 -ntg 4 -npl 3):
 * three sessions, each holding 8 tokens of context, step together; the
 * rate counts every sequence's tokens. */
START_TEST(batched_decode_at_a_depth)
{
    static char out[1 << 16];
    char args[512], path[256];
    snprintf(args, sizeof args, "-m %s -p 0 -n 4 --seqs 1,3 -d 8 -r 2 -o json", model);
    ck_assert_int_eq(bench(args, 0, out, sizeof out), 0);
    const char *one = strstr(out, "\"test\": \"tg4@d8\""), *three = strstr(out, "\"test\": \"tg4x3@d8\"");
    ck_assert_msg(one && three, "no tg4@d8 and tg4x3@d8 rows in: %s", out);
    ck_assert_ptr_null(strstr(out, "\"test\": \"pp"));
    ck_assert_int_eq((int)json_number(three, "n_gen"), 4);
    ck_assert_int_eq((int)json_number(three, "n_seqs"), 3);
    ck_assert_int_eq((int)json_number(three, "n_depth"), 8);
    ck_assert_int_eq((int)json_number(one, "n_seqs"), 1);
    /* Each sample's rate is its tokens over its time: 3 x 4 tokens. */
    const char *ns = strstr(three, "\"samples_ns\": [") + strlen("\"samples_ns\": [");
    const char *ts = strstr(three, "\"samples_ts\": [") + strlen("\"samples_ts\": [");
    double t0 = strtod(ns, NULL), r0 = strtod(ts, NULL);
    ck_assert_double_gt(t0, 0);
    ck_assert_double_eq_tol(r0 * t0 * 1e-9, 12.0, 1e-3);
    /* The roofline: the weights once a step, shared by the sequences;
     * each sequence's KV over depth + (n + 1) / 2 = 10.5 positions. */
    const double w1 = json_number(one, "weight_bytes_per_token"), w3 = json_number(three, "weight_bytes_per_token");
    const double kv1 = json_number(one, "kv_bytes_per_token"), kv3 = json_number(three, "kv_bytes_per_token");
    ck_assert_double_gt(w1, 1000);
    ck_assert_double_eq_tol(w3 * 3, w1, 1e-6 * w1);
    ck_assert_double_gt(kv1, 0);
    ck_assert_double_eq_tol(kv3, kv1, 1e-9 * kv1);
    const double bw = json_number(one, "read_bandwidth_gbps"), roof = json_number(one, "roofline_pct");
    ck_assert_double_gt(bw, 0);
    ck_assert_double_eq_tol(roof, 100 * (w1 + kv1) * json_number(one, "avg_ts") / (bw * 1e9), 1e-6 * roof);
    /* The working set: the weights and the K and V of depth + n = 12
     * positions; the test model is far smaller than any last-level cache,
     * so its row is marked as read from the cache. */
    const double ws = json_number(one, "working_set_bytes");
    ck_assert_double_eq_tol(ws, w1 + kv1 / 10.5 * 12, 1e-6 * ws);
    const char *fits = strstr(one, "\"fits_llc\": "), *llc = strstr(one, "\"llc_bytes\": ");
    ck_assert_ptr_nonnull(fits);
    ck_assert_ptr_nonnull(llc);
    if (strncmp(llc + strlen("\"llc_bytes\": "), "null", 4)) {
        ck_assert_double_gt(json_number(one, "llc_bytes"), ws);
        ck_assert_msg(!strncmp(fits + strlen("\"fits_llc\": "), "true", 4), "a tiny model's row not in the LLC");
    }
    snprintf(path, sizeof path, "%s/batched.json", tmpdir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(out, f);
    fclose(f);
    assert_schema(path);
}
END_TEST

/* A test past the model's trained context (64 positions here) is
 * measured, as llama-bench does, with a warning that names it. */
START_TEST(past_the_trained_context)
{
    static char out[1 << 16];
    char args[512];
    snprintf(args, sizeof args, "-m %s -p 16 -n 2 -d 64 -r 1", model);
    ck_assert_int_eq(bench(args, 1, out, sizeof out), 0);
    ck_assert_msg(strstr(out, "warning: pp16@d64 needs 80 positions, past model"), "%s", out);
    ck_assert_msg(strstr(out, "trained context of 64"), "%s", out);
    ck_assert_msg(strstr(out, "| pp16@d64 ") && strstr(out, "| tg2@d64 "), "no rows at depth 64 in: %s", out);
}
END_TEST

/* Each mistake: a non-zero exit and a message that names it. */
/* --prefix-share: the later sessions evaluate their suffix only, hold the
 * prefix's blocks once, and give the unshared run's logits. */
START_TEST(prefix_share_rows)
{
    static char out[1 << 14];
    char args[512];
    snprintf(args, sizeof args, "-m %s --prefix-share 3 --prefix-len 32 --suffix-len 8 -r 1 -o csv", model);
    ck_assert_int_eq(bench(args, 0, out, sizeof out), 0);
    char *save = NULL, *l = strtok_r(out, "\n", &save);
    ck_assert_ptr_nonnull(l);
    ck_assert_str_eq(l, "model,prefix_cache,session,prefix_tokens,suffix_tokens,evaluated_tokens,reused_tokens,"
                        "avg_ns,kv_bytes_used,logits_equal_unshared");
    unsigned long long kv[2][3];
    for (int r = 0; r < 6; r++) {
        ck_assert_ptr_nonnull(l = strtok_r(NULL, "\n", &save));
        char *cell[16];
        ck_assert_int_eq(split_csv(l, cell, 16), 10);
        const int on = !strcmp(cell[1], "on"), k = atoi(cell[2]) - 1;
        ck_assert_int_eq(on, r < 3);
        ck_assert_int_eq(k, r % 3);
        ck_assert_int_eq(atoi(cell[5]), on && k ? 8 : 40);
        ck_assert_int_eq(atoi(cell[6]), on && k ? 32 : 0);
        ck_assert_int_eq(atoi(cell[9]), on);
        kv[on][k] = strtoull(cell[8], NULL, 10);
    }
    /* One block of 16 tokens more per later session with the cache, the
     * whole prompt's three without. */
    ck_assert_uint_eq(kv[1][1] - kv[1][0], kv[1][0] / 3);
    ck_assert_uint_eq(kv[1][2] - kv[1][1], kv[1][0] / 3);
    ck_assert_uint_eq(kv[0][2], 3 * kv[0][0]);
}
END_TEST

START_TEST(mistakes_fail_clearly)
{
    static const struct {
        const char *args, *says;
    } cases[] = {
        {"--no-such-option", "unknown option '--no-such-option'"},
        {"-p 8,x", "-p takes whole numbers from 0 to 65536 (one, a comma-separated list, or ranges A-B, A-B+STEP, "
                   "A-B*FACTOR), not '8,x'"},
        {"-p 8,,16", "not '8,,16'"},
        {"-n -3", "-n takes whole numbers from 0 to 65536"},
        {"-r 1x", "-r takes a whole number from 1 to 1000, not '1x'"},
        {"-o xml", "-o 'xml'"},
        {"--devices nosuchdevice", "unknown device 'nosuchdevice'"},
        {"--devices 'cpu;'", "--devices: empty value"},
        {"--sched nosuchpolicy", "unknown scheduling policy 'nosuchpolicy'"},
        {"--inject 'cpu:2x'", "--inject 'cpu:2x'"},
        {"--inject 'kind=fpga,slow=2'", "applies to no device set"},
        {"--sim a100-x2", "machine description a100-x2"},
        {"--shapes llama2-7b:q4_0", "only with --sim"},
        {"--partition diagonal", "--partition 'diagonal'"},
        {"--sim bench/machines/epyc2s.machine --shapes llama2-9b", "unknown shapes 'llama2-9b'"},
        {"--fpga-emulation qemu", "'pocl'"},
        {"-d x", "-d takes whole numbers from 0 to 65536 (one, a comma-separated list, or ranges A-B, A-B+STEP, "
                 "A-B*FACTOR), not 'x'"},
    };
    static char out[1 << 14];
    char args[600];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, "-m %s -r 1 -p 8 -n 2 %s", model, cases[i].args);
        int rc = bench(args, 1, out, sizeof out);
        ck_assert_msg(rc != 0, "hetero-bench %s exited 0", args);
        ck_assert_msg(strstr(out, cases[i].says), "hetero-bench %s: expected '%s' in: %s", args, cases[i].says, out);
    }
    snprintf(args, sizeof args, "-m %s/missing.gguf -r 1", tmpdir);
    ck_assert_int_ne(bench(args, 1, out, sizeof out), 0);
    ck_assert_msg(strstr(out, "missing.gguf") && strstr(out, "No such file"), "no clear message: %s", out);
    snprintf(args, sizeof args, "-m %s/tiny.gguf -m %s -r 1", tmpdir, tmpdir);
    ck_assert_int_ne(bench(args, 1, out, sizeof out), 0);
    ck_assert_msg(strstr(out, "not a regular file"), "no clear message: %s", out);
}
END_TEST

Suite *suite_bench(void)
{
    Suite *s = suite_create("bench");
    TCase *tc = tcase_create("hetero-bench");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, markdown_has_one_row_per_combination);
    tcase_add_test(tc, csv_rows_have_every_column);
    tcase_add_test(tc, json_matches_the_schema_and_plots_are_drawn);
    tcase_add_test(tc, simulated_machine);
    tcase_add_test(tc, simulated_cluster);
    tcase_add_test(tc, timeline_from_a_chrome_trace);
    tcase_add_test(tc, injection_rows_and_traced_token);
    tcase_add_test(tc, batched_decode_at_a_depth);
    tcase_add_test(tc, prefix_share_rows);
    tcase_add_test(tc, past_the_trained_context);
    tcase_add_test(tc, mistakes_fail_clearly);
    suite_add_tcase(s, tc);
    return s;
}
