/* Performance models: robust history, the regression for unseen sizes,
 * persistence per host, and what is kept out of it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/perfmodel.h"
#include "tests/hx_test.h"

static char tmpdir[64];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/hx-pm-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void remove_tmpdir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

static const char *const keys[] = {"cpu:Test CPU:4", "opencl-emulated:Test FPGA:2"};
static const hx_codelet mm = {.name = "pm_matmul"};
static const hx_codelet other = {.name = "pm/other one"};

static hx_perfmodel *open_pm(const char *dir)
{
    hx_perfmodel *pm;
    HX_ASSERT_OK(hx_perfmodel_open(&pm, dir, keys, 2));
    return pm;
}

/* A cost law the regression should find: 5 us + 1 ns/flop + 0.5 ns/byte. */
static double law(double f, double b) { return 5e-6 + 1e-9 * f + 0.5e-9 * b; }

START_TEST(median_ignores_outliers)
{
    hx_perfmodel *pm = open_pm(NULL);
    double est;
    ck_assert_int_eq(hx_perfmodel_estimate(pm, &mm, 0, 1e6, 1e5, &est), 0);
    hx_perfmodel_record(pm, &mm, 0, 1e6, 1e5, 1e-3);
    hx_perfmodel_record(pm, &mm, 0, 1e6, 1e5, 1.1e-3);
    /* Not calibrated yet: the most favourable sample stands in. */
    ck_assert_int_eq(hx_perfmodel_estimate(pm, &mm, 0, 1e6, 1e5, &est), 3);
    ck_assert_double_eq_tol(est, 1e-3, 1e-9);
    hx_perfmodel_record(pm, &mm, 0, 1e6, 1e5, 0.1); /* 100x */
    ck_assert_int_eq(hx_perfmodel_estimate(pm, &mm, 0, 1e6, 1e5, &est), 1);
    ck_assert_double_eq_tol(est, 1.1e-3, 1e-9);
    for (int i = 0; i < 12; i++)
        hx_perfmodel_record(pm, &mm, 0, 1e6, 1e5, 1e-3);
    hx_perfmodel_record(pm, &mm, 0, 1e6, 1e5, 0.1);
    ck_assert_int_eq(hx_perfmodel_estimate(pm, &mm, 0, 1e6, 1e5, &est), 1);
    ck_assert_double_eq_tol(est, 1e-3, 1e-9);
    /* Same size, other device or codelet: separate models. */
    ck_assert_int_eq(hx_perfmodel_estimate(pm, &mm, 1, 1e6, 1e5, &est), 0);
    ck_assert_int_eq(hx_perfmodel_estimate(pm, &other, 0, 1e6, 1e5, &est), 0);
    /* The first run of a codelet on a device is not a measurement. */
    hx_perfmodel_record_run(pm, &other, 1, 1e6, 1e5, 5);
    ck_assert_int_eq(hx_perfmodel_estimate(pm, &other, 1, 1e6, 1e5, &est), 0);
    hx_perfmodel_record_run(pm, &other, 1, 1e6, 1e5, 1e-3);
    ck_assert_int_eq(hx_perfmodel_estimate(pm, &other, 1, 1e6, 1e5, &est), 3);
    ck_assert_double_eq_tol(est, 1e-3, 1e-9);
    /* Bad input is ignored, not stored. */
    hx_perfmodel_record(pm, &mm, 5, 1e6, 1e5, 1e-3);
    hx_perfmodel_record(pm, &mm, 0, 1e6, 1e5, NAN);
    hx_perfmodel_record(pm, &mm, 0, 1e6, 1e5, -1);
    ck_assert_int_eq(hx_perfmodel_estimate(pm, &mm, -1, 1e6, 1e5, &est), 0);
    hx_perfmodel_close(pm);
}
END_TEST

START_TEST(regression_covers_unseen_sizes)
{
    hx_perfmodel *pm = open_pm(NULL);
    /* Sizes whose flops and bytes vary independently, with noise and one
     * outlier per size that the medians drop. */
    const double fs[] = {1e3, 1e4, 1e5, 3e5, 1e6, 4e6, 2e7}, bs[] = {2e3, 8e4, 2e4, 9e5, 3e5, 5e6, 1e6};
    srand(3);
    for (int k = 0; k < 7; k++) {
        for (int i = 0; i < 5; i++) {
            double noise = 1 + 0.02 * ((double)rand() / RAND_MAX - 0.5);
            hx_perfmodel_record(pm, &mm, 1, fs[k], bs[k], law(fs[k], bs[k]) * noise);
        }
        hx_perfmodel_record(pm, &mm, 1, fs[k], bs[k], law(fs[k], bs[k]) * 100);
    }
    const double tf[] = {3e3, 5e5, 7e6, 5e7}, tb[] = {500, 4e6, 2e5, 3e7};
    for (int k = 0; k < 4; k++) {
        double est;
        ck_assert_int_eq(hx_perfmodel_estimate(pm, &mm, 1, tf[k], tb[k], &est), 2);
        double want = law(tf[k], tb[k]);
        ck_assert_msg(fabs(est - want) <= 0.05 * want, "flops %g bytes %g: %g s, law %g s", tf[k], tb[k], est, want);
    }
    /* One size is not enough to extrapolate from. */
    hx_perfmodel_record(pm, &other, 0, 1e6, 1e6, 1e-3);
    hx_perfmodel_record(pm, &other, 0, 1e6, 1e6, 1e-3);
    hx_perfmodel_record(pm, &other, 0, 1e6, 1e6, 1e-3);
    double est;
    ck_assert_int_eq(hx_perfmodel_estimate(pm, &other, 0, 1e8, 1e8, &est), 0);
    hx_perfmodel_close(pm);
}
END_TEST

typedef struct {
    int n;
    hx_perfmodel_entry e[64];
} collected;

static int collect(void *user, const hx_perfmodel_entry *e)
{
    collected *c = user;
    if (c->n < 64)
        c->e[c->n++] = *e;
    return 0;
}

START_TEST(models_persist_per_host)
{
    make_tmpdir();
    char dir[128];
    snprintf(dir, sizeof dir, "%s/models", tmpdir);
    hx_perfmodel *pm = open_pm(dir);
    for (int i = 0; i < 4; i++) {
        hx_perfmodel_record(pm, &mm, 0, 1e6, 1e5, 2e-3);
        hx_perfmodel_record(pm, &mm, 1, 1e6, 1e5, 4e-3 + i * 1e-4);
        hx_perfmodel_record(pm, &other, 0, 10, 100, 1e-5);
    }
    hx_perfmodel_record(pm, &mm, 1, 1e6, 1e5, 9);
    hx_perfmodel_close(pm);

    /* Reopened: calibrated at once, same medians. */
    pm = open_pm(dir);
    double est;
    ck_assert_int_eq(hx_perfmodel_estimate(pm, &mm, 0, 1e6, 1e5, &est), 1);
    ck_assert_double_eq_tol(est, 2e-3, 1e-9);
    ck_assert_int_eq(hx_perfmodel_estimate(pm, &mm, 1, 1e6, 1e5, &est), 1);
    ck_assert_double_eq_tol(est, 4.2e-3, 1e-9);
    ck_assert_int_eq(hx_perfmodel_estimate(pm, &other, 0, 10, 100, &est), 1);
    /* More measurements extend the history; saved again on close. */
    hx_perfmodel_record(pm, &mm, 0, 1e6, 1e5, 2e-3);
    hx_perfmodel_close(pm);

    collected c = {0};
    HX_ASSERT_OK(hx_perfmodel_read(dir, collect, &c));
    ck_assert_int_eq(c.n, 3);
    int seen = 0;
    for (int i = 0; i < c.n; i++) {
        hx_perfmodel_entry *e = &c.e[i];
        if (!strcmp(e->codelet, "pm_matmul") && !strcmp(e->device, keys[0])) {
            ck_assert_uint_eq(e->samples, 5);
            ck_assert_uint_eq(e->window, 5);
            ck_assert_double_eq_tol(e->median_s, 2e-3, 1e-9);
            ck_assert(e->size_lo <= 1.1e6 && 1.1e6 < e->size_hi);
            seen |= 1;
        }
        if (!strcmp(e->codelet, "pm_matmul") && !strcmp(e->device, keys[1])) {
            ck_assert_uint_eq(e->samples, 5);
            ck_assert_double_eq_tol(e->max_s, 9, 1e-6);
            ck_assert(e->mean_s > 1);
            ck_assert_double_eq_tol(e->median_s, 4.2e-3, 1e-9);
            seen |= 2;
        }
        if (!strcmp(e->codelet, "pm/other one"))
            seen |= 4;
    }
    ck_assert_int_eq(seen, 7);
    ck_assert_int_eq(hx_perfmodel_read("/nonexistent/hetero", collect, &c), HX_ERR_NOT_FOUND);
    remove_tmpdir();
}
END_TEST

START_TEST(broken_files_are_skipped)
{
    make_tmpdir();
    char dir[128], host[256] = "", path[512], cmd[1024];
    snprintf(dir, sizeof dir, "%s/models", tmpdir);
    gethostname(host, sizeof host - 1);
    for (char *p = host; *p; p++)
        if (*p == '/')
            *p = '_';
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/%s'", dir, host);
    ck_assert_int_eq(system(cmd), 0);
    const char *files[][2] = {
        {"bad1.perf", "not a model\nbucket 1 2 3\n"},
        {"bad2.perf", "hetero-perfmodel 1\nbucket 80 5 1 1 3 1 2 3\ncodelet pm_matmul\n"
                      "device cpu:Test CPU:4\nbucket 80 5 1e6 1e5 99 1 2\nbucket -3 1 1 1 1 1\n"
                      "bucket 80 2 1e6 1e5 3 0.001 0.001 0.001\nbucket 81 nan\n"
                      "bucket 82 7 1 1 3 0.002 0.002 0.002\n"},
        {"empty.perf", ""},
    };
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s/%s", dir, host, files[i][0]);
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs(files[i][1], f);
        fclose(f);
    }
    hx_perfmodel *pm = open_pm(dir);
    double est;
    /* A window larger than its count is refused; the next bucket 82 line is fine. */
    ck_assert_int_eq(hx_perfmodel_estimate(pm, &mm, 0, 0, exp2(82 / 4.0) + 1, &est), 1);
    ck_assert_double_eq_tol(est, 2e-3, 1e-9);
    hx_perfmodel_close(pm);
    remove_tmpdir();
}
END_TEST

START_TEST(injected_times_are_never_saved)
{
    make_tmpdir();
    char dir[128];
    snprintf(dir, sizeof dir, "%s/models", tmpdir);
    hx_perfmodel *pm = open_pm(dir);
    for (int i = 0; i < 3; i++)
        hx_perfmodel_record(pm, &mm, 1, 1e6, 1e5, 1e-3);
    hx_perfmodel_taint(pm, 1);
    double est;
    ck_assert_int_eq(hx_perfmodel_estimate(pm, &mm, 1, 1e6, 1e5, &est), 0); /* starts afresh */
    for (int i = 0; i < 3; i++)
        hx_perfmodel_record(pm, &mm, 1, 1e6, 1e5, 1e-1);
    ck_assert_int_eq(hx_perfmodel_estimate(pm, &mm, 1, 1e6, 1e5, &est), 1);
    ck_assert_double_eq_tol(est, 1e-1, 1e-7);
    hx_perfmodel_close(pm);
    pm = open_pm(dir);
    ck_assert_int_eq(hx_perfmodel_estimate(pm, &mm, 1, 1e6, 1e5, &est), 1);
    ck_assert_double_eq_tol(est, 1e-3, 1e-9);
    hx_perfmodel_close(pm);
    remove_tmpdir();
}
END_TEST

START_TEST(hetero_perfmodel_lists_the_models)
{
    make_tmpdir();
    char dir[128], cmd[512];
    snprintf(dir, sizeof dir, "%s/models", tmpdir);
    hx_perfmodel *pm = open_pm(dir);
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 3; i++)
            hx_perfmodel_record(pm, &mm, 0, 1e5 * (k + 1) * (k + 1), 1e4, 1e-4 * (k + 1));
    hx_perfmodel_close(pm);
    snprintf(cmd, sizeof cmd, "%s/hetero-perfmodel -d %s > %s/list.txt && grep -q '^pm_matmul .*Test CPU' %s/list.txt",
             hx_test_build_dir(), dir, tmpdir, tmpdir);
    ck_assert_msg(system(cmd) == 0, "%s", cmd);
    snprintf(cmd, sizeof cmd, "%s/hetero-perfmodel -d %s show pm_matmul > %s/show.txt && grep -q regression %s/show.txt",
             hx_test_build_dir(), dir, tmpdir, tmpdir);
    ck_assert_msg(system(cmd) == 0, "%s", cmd);
    snprintf(cmd, sizeof cmd, "%s/hetero-perfmodel -d %s show nothing 2>/dev/null", hx_test_build_dir(), dir);
    ck_assert_int_ne(system(cmd), 0);
    remove_tmpdir();
}
END_TEST

/* A link of 8 us + bytes / 55 GB/s, seen through copies of every size
 * (small ones are all latency): the fit predicts a 38 MB weight's copy,
 * and a fresh model's default is replaced as soon as sizes differ. */
START_TEST(bus_model_separates_latency_and_bandwidth)
{
    hx_perfmodel *pm;
    const char *keys[2] = {"cpu:a:1", "cuda:b:1"};
    HX_ASSERT_OK(hx_perfmodel_open(&pm, NULL, keys, 2));
    srand(5);
    for (int i = 0; i < 400; i++) {
        size_t bytes = (size_t)64 << (rand() % 20); /* 64 B to 32 MiB */
        double noise = 1 + 0.02 * ((double)rand() / RAND_MAX - 0.5);
        hx_perfmodel_bus_record(pm, 1, bytes, (8e-6 + (double)bytes / 55e9) * noise);
    }
    double big = 37.7e6, want = 8e-6 + big / 55e9;
    double got = hx_perfmodel_bus_estimate(pm, 1, (size_t)big);
    ck_assert_msg(fabs(got - want) < 0.03 * want, "38 MB: %.4g s, the link takes %.4g s", got, want);
    got = hx_perfmodel_bus_estimate(pm, 1, 256);
    ck_assert_msg(fabs(got - 8e-6) < 0.1 * 8e-6, "256 B: %.4g s, the link takes 8 us", got);
    ck_assert(hx_perfmodel_bus_estimate(pm, 0, 1 << 20) == 0); /* host memory: no copy */
    hx_perfmodel_close(pm);
}
END_TEST

Suite *suite_perfmodel(void)
{
    Suite *s = suite_create("perfmodel");
    TCase *tc = tcase_create("models");
    tcase_add_test(tc, median_ignores_outliers);
    tcase_add_test(tc, bus_model_separates_latency_and_bandwidth);
    tcase_add_test(tc, regression_covers_unseen_sizes);
    tcase_add_test(tc, models_persist_per_host);
    tcase_add_test(tc, broken_files_are_skipped);
    tcase_add_test(tc, injected_times_are_never_saved);
    tcase_add_test(tc, hetero_perfmodel_lists_the_models);
    suite_add_tcase(s, tc);
    return s;
}
