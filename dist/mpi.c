/* The pipeline's transport over Open MPI, and the public hx_dist_* calls
 * (hetero.h; docs/mpi.md).  Built only when pkg-config finds Open MPI;
 * dist/dist_none.c stands in otherwise.
 *
 * MPI is initialized only when mpirun launched the process
 * (OMPI_COMM_WORLD_SIZE in the environment): the same binaries run alone
 * without touching MPI, so a plain run pays nothing for it.  Every
 * message is non-blocking (MPI_Isend, MPI_Iprobe then MPI_Recv of what
 * arrived), and every wait for one that is due polls against a deadline:
 * a rank that dies or hangs mid-step makes the rank waiting for it abort
 * the job (MPI_Abort) with a message naming it, instead of waiting
 * forever.  Polling backs off to sleeps, so that ranks sharing cores
 * with the others do not take their time. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sched.h>

#include "engine/pipeline.h"
#include "model/model.h"
#include "runtime/error.h"
#include "runtime/handle.h"

enum { TAG_START = 3, TAG_VERDICT = 4 };

typedef struct {
    MPI_Request req;
    void *buf;
    size_t cap;
    int busy, to;
} send_slot;

static struct {
    int inited, mpi, finalized, started;
    int rank, size;
    double timeout;
    hx_model *m;
    hx_pipe pipe;
    void *rbuf;
    size_t rcap;
    send_slot *slots;
    int n_slots;
} D = {.size = 1};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A short spin for the common case (the message is a few microseconds
 * away), then sleeps growing to a millisecond. */
static void backoff(int *round)
{
    if (*round < 64) {
        sched_yield();
    } else {
        long ns = *round < 200 ? 20000 : 1000000;
        struct timespec t = {0, ns};
        nanosleep(&t, NULL);
    }
    (*round)++;
}

static const char *mpi_error(int rc)
{
    static char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", rc);
    return text;
}

/* Completed sends give their slots back; `to` >= 0: whether one to that
 * rank is still in flight. */
static hx_status reap(int *pending)
{
    *pending = 0;
    for (int i = 0; i < D.n_slots; i++) {
        if (!D.slots[i].busy)
            continue;
        int done = 0;
        int rc = MPI_Test(&D.slots[i].req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            return hx_error(HX_ERR_IO, "rank %d: a send to rank %d failed: %s", D.rank, D.slots[i].to, mpi_error(rc));
        if (done)
            D.slots[i].busy = 0;
        else
            (*pending)++;
    }
    return HX_OK;
}

static hx_status t_send(void *ctx, int to, int tag, const void *buf, size_t bytes)
{
    (void)ctx;
    int pending;
    hx_status s = reap(&pending);
    if (s)
        return s;
    if (bytes > (size_t)0x7fffffff)
        return hx_error(HX_ERR_RANGE, "rank %d: a message of %zu bytes to rank %d (at most 2 GiB)", D.rank, bytes, to);
    int k = -1;
    for (int i = 0; i < D.n_slots && k < 0; i++)
        if (!D.slots[i].busy)
            k = i;
    if (k < 0) {
        send_slot *n = realloc(D.slots, sizeof *n * (size_t)(D.n_slots + 4));
        if (!n)
            return hx_error(HX_ERR_NO_MEMORY, "send slots");
        memset(n + D.n_slots, 0, sizeof *n * 4);
        D.slots = n;
        k = D.n_slots;
        D.n_slots += 4;
    }
    send_slot *sl = &D.slots[k];
    if (sl->cap < bytes) {
        void *b = realloc(sl->buf, bytes);
        if (!b)
            return hx_error(HX_ERR_NO_MEMORY, "a send buffer of %zu bytes", bytes);
        sl->buf = b;
        sl->cap = bytes;
    }
    memcpy(sl->buf, buf, bytes);
    int rc = MPI_Isend(sl->buf, (int)bytes, MPI_BYTE, to, tag, MPI_COMM_WORLD, &sl->req);
    if (rc != MPI_SUCCESS)
        return hx_error(HX_ERR_IO, "rank %d: sending %zu bytes to rank %d: %s", D.rank, bytes, to, mpi_error(rc));
    sl->busy = 1;
    sl->to = to;
    return HX_OK;
}

static const char *tag_name(int tag)
{
    return tag == HX_PIPE_TAG_ACT ? "hidden states" : tag == HX_PIPE_TAG_STEP ? "a step" :
           tag == TAG_START ? "its load report" : "the start verdict";
}

static hx_status t_recv(void *ctx, int from, int tag, int idle, const void **buf, size_t *bytes)
{
    (void)ctx;
    const double t0 = now();
    int round = 0, flag = 0, pending;
    MPI_Status st;
    for (;;) {
        int rc = MPI_Iprobe(from, tag, MPI_COMM_WORLD, &flag, &st);
        if (rc != MPI_SUCCESS)
            return hx_error(HX_ERR_IO, "rank %d: waiting for rank %d: %s", D.rank, from, mpi_error(rc));
        if (flag)
            break;
        hx_status s = reap(&pending); /* sends in flight make progress meanwhile */
        if (s)
            return s;
        if (!idle && now() - t0 > D.timeout)
            return hx_error(HX_ERR_IO, "rank %d waited %.1f s for %s from rank %d, which has died, hangs, or "
                                            "is slower than the timeout (--mpi-timeout)",
                            D.rank, now() - t0, tag_name(tag), from);
        backoff(&round);
    }
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    if ((size_t)count > D.rcap) {
        void *b = realloc(D.rbuf, (size_t)count);
        if (!b)
            return hx_error(HX_ERR_NO_MEMORY, "a receive buffer of %d bytes", count);
        D.rbuf = b;
        D.rcap = (size_t)count;
    }
    int rc = MPI_Recv(D.rbuf, count, MPI_BYTE, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
        return hx_error(HX_ERR_IO, "rank %d: receiving from rank %d: %s", D.rank, from, mpi_error(rc));
    *buf = D.rbuf;
    *bytes = (size_t)count;
    return HX_OK;
}

static hx_status t_flush(void *ctx)
{
    (void)ctx;
    const double t0 = now();
    int round = 0, pending;
    for (;;) {
        hx_status s = reap(&pending);
        if (s || !pending)
            return s;
        if (now() - t0 > D.timeout) {
            int to = -1;
            for (int i = 0; i < D.n_slots; i++)
                if (D.slots[i].busy)
                    to = D.slots[i].to;
            return hx_error(HX_ERR_IO, "rank %d: a send to rank %d did not complete in %.1f s: it has died or "
                                            "hangs", D.rank, to, now() - t0);
        }
        backoff(&round);
    }
}

static void t_abort(void *ctx, const char *why)
{
    (void)ctx;
    fprintf(stderr, "hetero: pipeline failed: %s; aborting the job\n", why);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
    abort(); /* MPI_Abort does not return */
}

static const hx_pipe_ops ops = {t_send, t_recv, t_flush, t_abort};

static void at_exit(void)
{
    if (D.mpi && !D.finalized)
        hx_dist_finalize();
}

static hx_status dist_init(int *argc, char ***argv, const hx_dist_options *o, hx_dist_info *out)
{
    if (D.inited)
        return hx_error(HX_ERR_STATE, "hx_dist_init: called twice");
    const char *env = getenv("HX_MPI_TIMEOUT");
    D.timeout = o && o->timeout_s > 0 ? o->timeout_s : env && atof(env) > 0 ? atof(env) : 300.0;
    const char *world = getenv("OMPI_COMM_WORLD_SIZE");
    D.rank = 0;
    D.size = 1;
    if (world && *world) {
        int provided = 0;
        int rc = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
        if (rc != MPI_SUCCESS)
            return hx_error(HX_ERR_IO, "MPI_Init: %s", mpi_error(rc));
        D.mpi = 1;
        atexit(at_exit);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_rank(MPI_COMM_WORLD, &D.rank);
        MPI_Comm_size(MPI_COMM_WORLD, &D.size);
        /* A server's engine thread evaluates: MPI is called from more than
         * one thread, one at a time. */
        if (provided < MPI_THREAD_SERIALIZED && D.size > 1)
            return hx_error(HX_ERR_UNSUPPORTED, "this MPI gives thread level %d; the pipeline needs "
                                                "MPI_THREAD_SERIALIZED", provided);
    }
    D.inited = 1;
    hx_status s = hx_model_stage_configure(D.rank, D.size, o ? o->split : NULL);
    if (s)
        return s;
    D.pipe = (hx_pipe){.ops = &ops};
    return hx_dist_info_get(out);
}

hx_status hx_dist_init(int *argc, char ***argv, const hx_dist_options *o, hx_dist_info *out)
{
    hx_api_enter();
    return hx_api_leave(dist_init(argc, argv, o, out));
}

/* What each rank loaded, compared by rank 0 before the first step: the
 * KV pools must number blocks alike and the stages must be the same cut. */
typedef struct {
    int32_t ok;
    uint32_t n_layer, n_embd, n_vocab, n_blocks, block_size, max_batch, l0, l1;
    uint64_t file_bytes, n_params;
} load_record;

static void record_of(const hx_model *m, int ok, load_record *r)
{
    memset(r, 0, sizeof *r);
    r->ok = ok;
    if (!ok)
        return;
    *r = (load_record){1, m->info.n_layer, m->info.n_embd, m->info.n_vocab, m->kv->n_blocks, m->kv->block_size,
                       m->opts.max_batch, hx_model_stage_l0(m), hx_model_stage_l1(m), m->info.file_bytes,
                       m->info.n_params};
}

/* Rank 0's verdict on rank r's record: HX_OK or the error, in msg. */
static hx_status compare(const load_record *a, const load_record *b, int r, const hx_model *m, char *msg, size_t cap)
{
    if (!b->ok) {
        snprintf(msg, cap, "rank %d could not load its part of the model (its error is above)", r);
        return HX_ERR_STATE;
    }
    if (a->file_bytes != b->file_bytes || a->n_params != b->n_params || a->n_layer != b->n_layer ||
        a->n_embd != b->n_embd || a->n_vocab != b->n_vocab) {
        snprintf(msg, cap, "rank %d loaded another model (%llu bytes, %u layers) than rank 0 (%llu bytes, %u layers)",
                 r, (unsigned long long)b->file_bytes, b->n_layer, (unsigned long long)a->file_bytes, a->n_layer);
        return HX_ERR_INVALID_ARG;
    }
    if (a->n_blocks != b->n_blocks || a->block_size != b->block_size || a->max_batch != b->max_batch) {
        snprintf(msg, cap, "rank %d has a KV pool of %u blocks of %u tokens and max_batch %u, rank 0 %u of %u and %u "
                 "(give every rank the same -c / --kv-tokens)", r, b->n_blocks, b->block_size, b->max_batch,
                 a->n_blocks, a->block_size, a->max_batch);
        return HX_ERR_INVALID_ARG;
    }
    if (b->l0 != m->stage.first[r] || b->l1 != m->stage.first[r + 1]) {
        snprintf(msg, cap, "rank %d cut layers [%u, %u), rank 0 thinks [%u, %u) (give every rank the same --split)", r,
                 b->l0, b->l1, m->stage.first[r], m->stage.first[r + 1]);
        return HX_ERR_INVALID_ARG;
    }
    return HX_OK;
}

typedef struct {
    int32_t status, rank;
    char msg[480];
} verdict;

static hx_status dist_start(hx_model *m, hx_status loaded)
{
    if (!D.inited)
        return loaded ? loaded : hx_error(HX_ERR_STATE, "hx_dist_start: hx_dist_init was not called");
    if (D.size == 1)
        return loaded;
    if (loaded == HX_OK && (!m || m->stage.size != D.size))
        return hx_error(HX_ERR_STATE, "hx_dist_start: the model was not loaded as a stage of this job");
    const void *buf;
    size_t bytes;
    load_record mine;
    record_of(m, loaded == HX_OK, &mine);
    verdict v = {HX_OK, -1, ""};
    hx_status s = HX_OK;
    /* The load's error is this rank's to print; the others are told. */
    char own[480];
    snprintf(own, sizeof own, "%s", loaded ? hx_last_error() : "");
    if (D.rank == 0) {
        if (!mine.ok) {
            v = (verdict){HX_ERR_STATE, 0, ""};
            snprintf(v.msg, sizeof v.msg, "rank 0 could not load its part of the model (its error is above)");
        }
        for (int r = 1; r < D.size && s == HX_OK; r++) {
            s = t_recv(NULL, r, TAG_START, 0, &buf, &bytes);
            if (s == HX_OK && bytes != sizeof(load_record))
                s = hx_error(HX_ERR_FORMAT, "rank %d sent a load report of %zu bytes", r, bytes);
            if (s == HX_OK && v.status == HX_OK && mine.ok) {
                load_record theirs;
                memcpy(&theirs, buf, sizeof theirs);
                hx_status c = compare(&mine, &theirs, r, m, v.msg, sizeof v.msg);
                if (c)
                    v.status = c, v.rank = r;
            } else if (s == HX_OK && v.status == HX_OK) {
                /* rank 0 failed: still collect every report */
            }
        }
        if (s) { /* a rank never reported: nobody can go on */
            fprintf(stderr, "hetero: %s\n", hx_last_error());
            t_abort(NULL, "the ranks did not all load the model in time");
        }
        for (int r = 1; r < D.size && s == HX_OK; r++)
            s = t_send(NULL, r, TAG_VERDICT, &v, sizeof v);
        if (s == HX_OK)
            s = t_flush(NULL);
    } else {
        s = t_send(NULL, 0, TAG_START, &mine, sizeof mine);
        if (s == HX_OK)
            s = t_recv(NULL, 0, TAG_VERDICT, 0, &buf, &bytes);
        if (s == HX_OK && bytes == sizeof v)
            memcpy(&v, buf, sizeof v);
        else if (s == HX_OK)
            s = hx_error(HX_ERR_FORMAT, "rank 0 sent a start verdict of %zu bytes", bytes);
        if (s) {
            fprintf(stderr, "hetero: %s\n", hx_last_error());
            t_abort(NULL, "no start verdict from rank 0");
        }
    }
    if (loaded)
        return hx_error(loaded, "%s", own);
    if (v.status)
        return hx_error((hx_status)v.status, "%s", v.msg);
    D.m = m;
    D.started = 1;
    m->pipe = &D.pipe;
    if (D.rank == 0)
        return HX_OK;
    return hx_pipeline_serve(m);
}

hx_status hx_dist_start(hx_model *m, hx_status loaded)
{
    hx_api_enter();
    return hx_api_leave(dist_start(m, loaded));
}

hx_status hx_dist_info_get(hx_dist_info *out)
{
    if (!out)
        return HX_OK;
    *out = (hx_dist_info){.rank = D.rank, .size = D.size, .mpi = D.mpi, .steps = D.pipe.steps,
                          .messages = D.pipe.msgs_sent, .bytes = D.pipe.bytes_sent};
    if (D.m) {
        out->first_layer = hx_model_stage_l0(D.m);
        out->end_layer = hx_model_stage_l1(D.m);
    }
    return HX_OK;
}

hx_status hx_dist_finalize(void)
{
    if (!D.mpi || D.finalized)
        return HX_OK;
    hx_status s = HX_OK;
    if (D.rank == 0 && D.started)
        s = hx_pipeline_stop(&D.pipe, D.size);
    else
        s = t_flush(NULL);
    D.finalized = 1;
    D.m = NULL;
    MPI_Finalize();
    return s;
}
