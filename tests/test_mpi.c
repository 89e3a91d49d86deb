/* The pipeline over processes (docs/mpi.md) as a person runs it:
 * `mpirun -np N` on the built tools, 2 and 3 ranks on this machine.  The
 * logits of 1, 2 and 3 ranks are the same bits (the CPU computes each row
 * alike however the layers are cut); bad splits are refused before any
 * work with their numbers; a rank that is killed or hangs ends the whole
 * job, with a message naming it, within a bounded time.  Every job runs
 * under `timeout`, so a pipeline that waits forever fails the test instead
 * of hanging it.  Without mpirun, or a build without Open MPI, the suite
 * says SKIPPED and why (under CI that fails). */
#include "tests/mpi_job.h"

/* The logits of every position of `tokens` on 1 rank and on the splits
 * given, compared bit for bit. */
static void same_logits(const char *model, const char *tokens, const char *const *splits, const int *ranks, int n)
{
    char args[4096], path[128];
    snprintf(path, sizeof path, "%s/logits-1", tmpdir);
    snprintf(args, sizeof args, "%s --tokens %s --logits %s -b 3 -c 256", model, tokens, path);
    int rc = job(0, "hetero-run", args);
    ck_assert_msg(rc == 0, "one process: exit %d: %s", rc, err);
    char *one;
    long n_one = file_bytes(path, &one);
    ck_assert_int_gt(n_one, 0);
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/logits-%d", tmpdir, i + 2);
        snprintf(args, sizeof args, "%s --tokens %s --logits %s -b 3 -c 256 %s%s", model, tokens, path,
                 splits[i] ? "--split " : "", splits[i] ? splits[i] : "");
        rc = job(ranks[i], "hetero-run", args);
        ck_assert_msg(rc == 0, "%d ranks (split %s): exit %d: %s", ranks[i], splits[i] ? splits[i] : "balanced", rc,
                      err);
        /* each rank says its layers: the job did run as a pipeline */
        char says[64];
        snprintf(says, sizeof says, "rank %d of %d: layers", ranks[i] - 1, ranks[i]);
        ck_assert_msg(strstr(err, says), "no '%s' in: %s", says, err);
        char *many;
        long n_many = file_bytes(path, &many);
        ck_assert_int_eq(n_many, n_one);
        ck_assert_msg(memcmp(one, many, (size_t)n_one) == 0, "%d ranks (split %s): logits differ from one process",
                      ranks[i], splits[i] ? splits[i] : "balanced");
        free(many);
    }
    free(one);
}

START_TEST(logits_of_one_two_and_three_ranks_are_the_same_bits)
{
    const char *why = missing();
    if (why) {
        ck_assert_msg(!getenv("CI"), "mpi: %s", why);
        fprintf(stderr, "SKIPPED mpi: %s\n", why);
        return;
    }
    /* The embedded synthetic model (5 layers, byte vocabulary); -b 3 makes
     * seven steps of the eleven tokens, each reading the cache the earlier
     * ones wrote on every rank. */
    const char *splits[] = {NULL, "1,4", "2,1,2"};
    const int ranks[] = {2, 2, 3};
    same_logits("", "1,72,101,108,108,111,44,32,119,111,114", splits, ranks, 3);
    const char *smol = hx_test_smollm2("mpi: SmolLM2's logits over ranks");
    if (smol) {
        char model[1200];
        snprintf(model, sizeof model, "-m '%s'", smol);
        const char *s2[] = {NULL, "5,13,12"};
        const int r2[] = {2, 3};
        same_logits(model, "1,504,3458,282,4649,314,253,1431,28,16", s2, r2, 2);
    }
}
END_TEST

START_TEST(a_generation_reads_the_same_over_ranks)
{
    if (missing())
        return; /* said by the first test */
    const char *args = "-p 'Once upon a time' -n 24 --temp 0 --ignore-eos --no-perf";
    int rc = job(0, "hetero-run", args);
    ck_assert_msg(rc == 0, "%s", err);
    static char one[sizeof out];
    memcpy(one, out, sizeof out);
    rc = job_rank0_out(2, "hetero-run", args);
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_str_eq(out, one);
    /* rank 0 sent each step's announcement and hidden states, rank 1 the rows back */
    ck_assert_msg(strstr(err, "rank 1 of 2: layers") && strstr(err, "messages"), "%s", err);
}
END_TEST

START_TEST(a_server_answers_the_same_over_ranks)
{
    if (missing())
        return;
    /* four requests at once: the engine's steps hold four sessions, which
     * rank 0 sends as two micro-batches in flight */
    const char *smol = getenv("HX_TEST_SMOLLM2");
    char model[1200] = "";
    if (smol && *smol && access(smol, R_OK) == 0)
        snprintf(model, sizeof model, "-m %s", smol);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "python3 tests/mpi_server_check.py %s '%s' %s > %s/out 2> %s/err", hx_test_build_dir(),
             model, tmpdir, tmpdir, tmpdir);
    int st = system(cmd);
    char path[128];
    snprintf(path, sizeof path, "%s/out", tmpdir);
    slurp(path, out, sizeof out);
    snprintf(path, sizeof path, "%s/err", tmpdir);
    slurp(path, err, sizeof err);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s\n%s", out, err);
}
END_TEST

START_TEST(bad_splits_are_refused_with_their_numbers)
{
    if (missing())
        return;
    int rc = job(2, "hetero-run", "-n 1 --split 2,2");
    ck_assert_int_ne(rc, 0);
    ck_assert_msg(strstr(err, "split 2+2 = 4 layers; the model has 5"), "%s", err);
    rc = job(2, "hetero-run", "-n 1 --split 1,2,2");
    ck_assert_int_ne(rc, 0);
    ck_assert_msg(strstr(err, "split '1,2,2' names 3 ranks; the job has 2"), "%s", err);
    rc = job(2, "hetero-run", "-n 1 --split 0,5");
    ck_assert_int_ne(rc, 0);
    ck_assert_msg(strstr(err, "each at least 1"), "%s", err);
    rc = job(6, "hetero-run", "-n 1");
    ck_assert_int_ne(rc, 0);
    ck_assert_msg(strstr(err, "a pipeline of 6 ranks for 5 layers: each rank needs a layer"), "%s", err);
    /* A context whose KV cache no rank can hold: refused with the rank's share. */
    rc = job(2, "hetero-run", "-n 1 -c 2000000000 --split 1,4");
    ck_assert_int_ne(rc, 0);
    ck_assert_msg(strstr(err, "rank 0 of the pipeline (layers 0 to 0, the embedding and the output head) needs"),
                  "%s", err);
    ck_assert_msg(strstr(err, "MiB of KV cache for 2000000000 tokens; its machine has"), "%s", err);
    /* One rank fails to load its part (a bad setting of its own): rank 0
     * is told which and why, before any step; the job ends.  The setting
     * is rank 1's through a shell rather than an MPMD job ("A : B"): Open
     * MPI 5.0.7's mpirun (Debian 13) crashes on any MPMD job (ompi#13303). */
    char job1[2048], cmd[4096], path[128];
    snprintf(job1, sizeof job1,
             "timeout 120 mpirun --oversubscribe --host 127.0.0.1:2 --mca btl_vader_single_copy_mechanism none%s "
             "-np 2 sh -c 'if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then export HX_KV_DEVICE_MB=lots; fi; "
             "exec %s/hetero-run --devices cpu -t 1 -n 1'",
             getenv("ASAN_OPTIONS") ? " -x ASAN_OPTIONS" : "", hx_test_build_dir());
    snprintf(cmd, sizeof cmd, "%s > %s/out 2> %s/err", job1, tmpdir, tmpdir);
    int st = system(cmd);
    ck_assert(WIFEXITED(st));
    ck_assert_int_ne(WEXITSTATUS(st), 0);
    ck_assert_int_ne(WEXITSTATUS(st), 124);
    snprintf(path, sizeof path, "%s/err", tmpdir);
    slurp(path, err, sizeof err);
    ck_assert_msg(strstr(err, "rank 1 could not load its part of the model: HX_KV_DEVICE_MB 'lots'"), "%s", err);
}
END_TEST

START_TEST(a_killed_rank_ends_the_job)
{
    if (missing())
        return;
    int rc;
    double took = fault(2, 1, SIGKILL, "", &rc);
    ck_assert_int_ne(rc, 0);
    /* mpirun sees the process die and ends the job, naming the rank */
    ck_assert_msg(strstr(err, "rank 1") && strstr(err, "signal 9"), "%s", err);
    ck_assert_msg(took < 30, "%.1f s", took);
}
END_TEST

START_TEST(a_hung_rank_ends_the_job_by_the_deadline)
{
    if (missing())
        return;
    int rc;
    /* Rank 1 of 3 stops answering (SIGSTOP): rank 2, waiting for its
     * hidden states, gives up after --mpi-timeout 2 and aborts the job. */
    double took = fault(3, 1, SIGSTOP, "", &rc);
    ck_assert_int_ne(rc, 0);
    ck_assert_msg(strstr(err, "for hidden states from rank 1, which has died, hangs, or is slower than the timeout"),
                  "%s", err);
    ck_assert_msg(strstr(err, "aborting the job"), "%s", err);
    ck_assert_msg(took >= 2 && took < 30, "%.1f s", took);
}
END_TEST

Suite *suite_mpi(void)
{
    Suite *s = suite_create("mpi");
    TCase *tc = tcase_create("pipeline");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, logits_of_one_two_and_three_ranks_are_the_same_bits);
    tcase_add_test(tc, a_generation_reads_the_same_over_ranks);
    tcase_add_test(tc, a_server_answers_the_same_over_ranks);
    tcase_add_test(tc, bad_splits_are_refused_with_their_numbers);
    tcase_add_test(tc, a_killed_rank_ends_the_job);
    tcase_add_test(tc, a_hung_rank_ends_the_job_by_the_deadline);
    suite_add_tcase(s, tc);
    return s;
}
