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
#include <limits.h>
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

enum { TAG_START = 3, TAG_VERDICT = 4, TAG_LOAD = 5 };

typedef struct {
    MPI_Request req;
    void *buf;
    size_t cap;
    int busy, to;
} send_slot;

static struct {
    int inited, mpi, finalized;
    int rank, size;
    double timeout;
    hx_model *m;
    uint32_t l0, l1; /* the layers of the last model served */
    hx_model_tp tp;  /* its tensor slice, when it was one */
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

/* How a rank waits for a message, by how long it has waited: yielding
 * for the first 5 ms (a neighbour's stage or a layer's all-reduce arrives
 * within a step, and a sleep's wake-up costs more than the message: with
 * sleeps of up to a millisecond from the first ones, a 2-rank pipeline
 * lost 3.1 ms a step on one machine), then sleeps of 50 us to 100 ms, then
 * of a millisecond (a rank idle between a server's requests). */
static void backoff(double t0)
{
    const double waited = now() - t0;
    if (waited < 0.005) {
        sched_yield();
        return;
    }
    struct timespec t = {0, waited < 0.1 ? 50000 : 1000000};
    nanosleep(&t, NULL);
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
           tag == TAG_START ? "its load report" : tag == TAG_LOAD ? "a model to load" : "the start verdict";
}

static hx_status t_recv(void *ctx, int from, int tag, int hops, const void **buf, size_t *bytes)
{
    (void)ctx;
    const double t0 = now();
    int flag = 0, pending;
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
        if (hops && now() - t0 > hops * D.timeout)
            return hx_error(HX_ERR_IO, "rank %d waited %.1f s for %s from rank %d, which has died, hangs, or "
                                            "is slower than the timeout (--mpi-timeout)",
                            D.rank, now() - t0, tag_name(tag), from);
        backoff(t0);
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
    int pending;
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
        backoff(t0);
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

/* Tensor parallelism's sum over the ranks (model/pipe.h), non-blocking
 * and polled against the deadline like every other wait: a rank that
 * hangs inside a step leaves the others' reduction unfinished, and they
 * give up (their caller aborts the job) instead of waiting forever. */
static hx_status t_allreduce(void *ctx, float *buf, size_t n)
{
    (void)ctx;
    if (n > (size_t)INT_MAX)
        return hx_error(HX_ERR_RANGE, "rank %d: an all-reduce of %zu floats (at most %d)", D.rank, n, INT_MAX);
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
    if (rc != MPI_SUCCESS)
        return hx_error(HX_ERR_IO, "rank %d: an all-reduce of %zu floats: %s", D.rank, n, mpi_error(rc));
    const double t0 = now();
    int done = 0, pending;
    for (;;) {
        rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            return hx_error(HX_ERR_IO, "rank %d: an all-reduce of %zu floats: %s", D.rank, n, mpi_error(rc));
        if (done)
            break;
        hx_status s = reap(&pending);
        if (s)
            return s;
        if (now() - t0 > D.timeout)
            return hx_error(HX_ERR_IO, "rank %d waited %.1f s in an all-reduce of a layer's partial sums: a rank "
                                       "of the %d has died, hangs, or is slower than the timeout (--mpi-timeout)",
                            D.rank, now() - t0, D.size);
        backoff(t0);
    }
    D.pipe.reductions++;
    D.pipe.bytes_reduced += sizeof(float) * n;
    return HX_OK;
}

static const hx_pipe_ops ops;

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
    const int tp = o && o->tensor_parallel;
    if (tp && o->split && *o->split)
        return hx_error(HX_ERR_INVALID_ARG, "split '%s' with tensor parallelism: every rank holds every layer "
                                            "(give one of --split and --tensor-parallel)", o->split);
    hx_status s = hx_model_stage_configure(D.rank, D.size, o ? o->split : NULL);
    if (s)
        return s;
    hx_model_stage_configure_tp(tp && D.size > 1);
    D.inited = 1;
    D.pipe = (hx_pipe){.ops = &ops};
    return hx_dist_info_get(out);
}

hx_status hx_dist_init(int *argc, char ***argv, const hx_dist_options *o, hx_dist_info *out)
{
    hx_api_enter();
    return hx_api_leave(dist_init(argc, argv, o, out));
}

/* Rank 0 -> the others, TAG_LOAD: the model to load as their stage, with
 * the options rank 0 resolved (so that every KV pool numbers its blocks
 * alike whatever each rank's environment says), or the end of the job. */
enum { LOAD_MODEL = 1, LOAD_END = 2 };
typedef struct {
    uint32_t kind;
    uint32_t n_ctx, kv_tokens, kv_block, max_batch;
    int32_t kv_prefix_cache, repack, graph_replay, fuse_matmuls, kv_rotate;
    uint64_t kv_device_bytes;
    char kv_type_k[16], kv_type_v[16], partition[16];
    char path[4096];
} load_request;

/* What each rank loaded, compared by rank 0 before the first step: the
 * KV pools must number blocks alike and the stages must be the same cut. */
typedef struct {
    int32_t ok;
    uint32_t n_layer, n_embd, n_vocab, n_blocks, block_size, max_batch, l0, l1;
    uint64_t file_bytes, n_params;
    hx_model_tp tp; /* its tensor slice; on 0 for a pipeline stage */
    char error[400];
} load_record;

typedef struct {
    int32_t status, rank;
    char msg[480];
} verdict;

static void record_of(const hx_model *m, hx_status loaded, load_record *r)
{
    memset(r, 0, sizeof *r);
    if (loaded) {
        const char *text = strstr(hx_last_error(), "): ");
        snprintf(r->error, sizeof r->error, "%s", text ? text + 3 : hx_last_error());
        return;
    }
    *r = (load_record){1, m->info.n_layer, m->info.n_embd, m->info.n_vocab, m->kv->n_blocks, m->kv->block_size,
                       m->opts.max_batch, hx_model_stage_l0(m), hx_model_stage_l1(m), m->info.file_bytes,
                       m->info.n_params, m->stage.tp, ""};
}

/* Rank 0's verdict on rank r's record: HX_OK or the error, in msg. */
static hx_status compare(const load_record *a, const load_record *b, int r, const hx_model *m, char *msg, size_t cap)
{
    if (!b->ok) {
        snprintf(msg, cap, "rank %d could not load its part of the model: %s", r, b->error);
        return HX_ERR_STATE;
    }
    if (a->file_bytes != b->file_bytes || a->n_params != b->n_params || a->n_layer != b->n_layer ||
        a->n_embd != b->n_embd || a->n_vocab != b->n_vocab) {
        snprintf(msg, cap, "rank %d loaded another model (%llu bytes, %u layers) than rank 0 (%llu bytes, %u layers)",
                 r, (unsigned long long)b->file_bytes, b->n_layer, (unsigned long long)a->file_bytes, a->n_layer);
        return HX_ERR_INVALID_ARG;
    }
    if (a->n_blocks != b->n_blocks || a->block_size != b->block_size || a->max_batch != b->max_batch) {
        snprintf(msg, cap, "rank %d has a KV pool of %u blocks of %u tokens and max_batch %u, rank 0 %u of %u and %u",
                 r, b->n_blocks, b->block_size, b->max_batch, a->n_blocks, a->block_size, a->max_batch);
        return HX_ERR_INVALID_ARG;
    }
    if (a->tp.on != b->tp.on) {
        snprintf(msg, cap, "rank %d is %s, rank 0 %s (give every rank the same --tensor-parallel)", r,
                 b->tp.on ? "a tensor slice" : "a pipeline stage", a->tp.on ? "a tensor slice" : "a pipeline stage");
        return HX_ERR_INVALID_ARG;
    }
    if (a->tp.on) /* the slices follow each other: rank 0 checks them in rank order */
        return HX_OK;
    if (b->l0 != m->stage.first[r] || b->l1 != m->stage.first[r + 1]) {
        snprintf(msg, cap, "rank %d cut layers [%u, %u), rank 0 [%u, %u) (give every rank the same --split)", r,
                 b->l0, b->l1, m->stage.first[r], m->stage.first[r + 1]);
        return HX_ERR_INVALID_ARG;
    }
    return HX_OK;
}

/* Tensor slices: rank r's starts where rank r - 1's ended (next: the
 * ends so far, advanced), and the last ends at the model's. */
static hx_status tiles(const load_record *b, int r, int last, uint32_t *next, char *msg, size_t cap)
{
    const hx_model_tp *t = &b->tp;
    if (t->head_lo != next[0] || t->kv_lo != next[1] || t->ff_lo != next[2] || !t->n_head || !t->n_kv || !t->n_ff) {
        snprintf(msg, cap, "rank %d holds query heads %u+%u, KV heads %u+%u, FFN columns %u+%u; the ranks before it "
                           "end at %u, %u and %u",
                 r, t->head_lo, t->n_head, t->kv_lo, t->n_kv, t->ff_lo, t->n_ff, next[0], next[1], next[2]);
        return HX_ERR_INVALID_ARG;
    }
    next[0] += t->n_head, next[1] += t->n_kv, next[2] += t->n_ff;
    if (last && (next[0] != t->n_head_all || next[1] != t->n_head_kv_all || next[2] != t->n_ff_all)) {
        snprintf(msg, cap, "the ranks' slices end at query head %u, KV head %u, FFN column %u of %u, %u and %u",
                 next[0], next[1], next[2], t->n_head_all, t->n_head_kv_all, t->n_ff_all);
        return HX_ERR_INVALID_ARG;
    }
    return HX_OK;
}

static const char *const partitions[] = {"affinity", "layers", "auto", "colocated"};

static hx_status request_of(const hx_model *m, load_request *q)
{
    memset(q, 0, sizeof *q);
    if (!m->path)
        return hx_error(HX_ERR_UNSUPPORTED, "a pipeline over processes needs a model file (not shapes)");
    if (strlen(m->path) >= sizeof q->path)
        return hx_error(HX_ERR_RANGE, "model path of %zu bytes: at most %zu", strlen(m->path), sizeof q->path - 1);
    const hx_model_options *o = &m->opts;
    q->kind = LOAD_MODEL;
    q->n_ctx = o->n_ctx;
    q->kv_tokens = o->kv_tokens;
    q->kv_block = o->kv_block;
    q->max_batch = o->max_batch;
    q->kv_prefix_cache = m->kv->prefix_cache ? 1 : -1;
    q->repack = o->repack;
    q->graph_replay = m->graph_replay ? 1 : -1;
    q->fuse_matmuls = m->fuse ? 1 : -1;
    q->kv_rotate = m->kv_rot_k || m->kv_rot_v || m->kv_center ? 1 : -1;
    q->kv_device_bytes = o->kv_device_bytes;
    snprintf(q->kv_type_k, sizeof q->kv_type_k, "%s", hx_type_name(m->kv_type));
    snprintf(q->kv_type_v, sizeof q->kv_type_v, "%s", hx_type_name(m->v_type));
    snprintf(q->partition, sizeof q->partition, "%s", partitions[m->partition]);
    snprintf(q->path, sizeof q->path, "%s", m->path);
    return HX_OK;
}

static hx_model_options options_of(const load_request *q)
{
    hx_model_options o = hx_model_options_default();
    o.n_ctx = q->n_ctx;
    o.kv_tokens = q->kv_tokens;
    o.kv_block = q->kv_block;
    o.max_batch = q->max_batch;
    o.kv_prefix_cache = q->kv_prefix_cache;
    o.repack = q->repack;
    o.graph_replay = q->graph_replay;
    o.fuse_matmuls = q->fuse_matmuls;
    o.kv_rotate = q->kv_rotate;
    o.kv_device_bytes = q->kv_device_bytes;
    o.kv_type_k = q->kv_type_k;
    o.kv_type_v = q->kv_type_v;
    o.partition = q->partition;
    return o;
}

static void detach(void *ctx, hx_model *m)
{
    (void)ctx;
    if (D.rank != 0 || D.m != m)
        return;
    hx_status s = hx_pipeline_stop(&D.pipe, D.size);
    if (s)
        t_abort(NULL, hx_last_error());
    D.m = NULL;
    m->pipe = NULL;
}

static const hx_pipe_ops ops = {t_send, t_recv, t_flush, t_abort, detach, t_allreduce};

static hx_status dist_start(hx_model *m, hx_status loaded)
{
    if (!D.inited)
        return loaded ? loaded : hx_error(HX_ERR_STATE, "hx_dist_start: hx_dist_init was not called");
    if (D.size == 1 || loaded) /* a failed load: the others were not asked to load anything */
        return loaded;
    if (D.rank != 0)
        return hx_error(HX_ERR_STATE, "hx_dist_start on rank %d: ranks other than 0 call hx_dist_worker", D.rank);
    if (!m || m->stage.size != D.size)
        return hx_error(HX_ERR_STATE, "hx_dist_start: the model was not loaded as a stage of this job");
    if (D.m)
        return hx_error(HX_ERR_STATE, "hx_dist_start: the pipeline serves another model; free it first");
    load_request q;
    hx_status s = request_of(m, &q);
    if (s)
        return s;
    for (int r = 1; r < D.size && s == HX_OK; r++)
        s = t_send(NULL, r, TAG_LOAD, &q, sizeof q);
    load_record mine, theirs;
    record_of(m, HX_OK, &mine);
    verdict v = {HX_OK, -1, ""};
    uint32_t next[3] = {mine.tp.n_head, mine.tp.n_kv, mine.tp.n_ff};
    const void *buf;
    size_t bytes;
    for (int r = 1; r < D.size && s == HX_OK; r++) {
        s = t_recv(NULL, r, TAG_START, 1, &buf, &bytes);
        if (s == HX_OK && bytes != sizeof theirs)
            s = hx_error(HX_ERR_FORMAT, "rank %d sent a load report of %zu bytes", r, bytes);
        if (s == HX_OK && v.status == HX_OK) {
            memcpy(&theirs, buf, sizeof theirs);
            hx_status c = compare(&mine, &theirs, r, m, v.msg, sizeof v.msg);
            if (c == HX_OK && mine.tp.on)
                c = tiles(&theirs, r, r == D.size - 1, next, v.msg, sizeof v.msg);
            if (c)
                v.status = c, v.rank = r;
        }
    }
    if (s) /* a rank never answered: nobody can go on */
        t_abort(NULL, hx_last_error());
    for (int r = 1; r < D.size && s == HX_OK; r++)
        s = t_send(NULL, r, TAG_VERDICT, &v, sizeof v);
    if (s == HX_OK)
        s = t_flush(NULL);
    if (s)
        t_abort(NULL, hx_last_error());
    if (v.status)
        return hx_error((hx_status)v.status, "%s", v.msg);
    D.m = m;
    D.l0 = hx_model_stage_l0(m);
    D.l1 = hx_model_stage_l1(m);
    D.tp = m->stage.tp;
    m->pipe = &D.pipe;
    return HX_OK;
}

hx_status hx_dist_start(hx_model *m, hx_status loaded)
{
    hx_api_enter();
    return hx_api_leave(dist_start(m, loaded));
}

/* One model rank 0 asked for: loaded, reported, served until rank 0
 * frees it, freed. */
static hx_status serve_one(hx_runtime *rt, const load_request *q)
{
    hx_model_options o = options_of(q);
    hx_model *m = NULL;
    hx_status loaded = hx_model_load(rt, q->path, &o, &m);
    if (loaded)
        fprintf(stderr, "hetero: rank %d of %d: %s\n", D.rank, D.size, hx_last_error());
    load_record rec;
    record_of(m, loaded, &rec);
    hx_status s = t_send(NULL, 0, TAG_START, &rec, sizeof rec);
    const void *buf;
    size_t bytes;
    verdict v;
    if (s == HX_OK)
        s = t_recv(NULL, 0, TAG_VERDICT, D.size, &buf, &bytes); /* after every rank's report */
    if (s == HX_OK && bytes != sizeof v)
        s = hx_error(HX_ERR_FORMAT, "rank 0 sent a start verdict of %zu bytes", bytes);
    if (s)
        t_abort(NULL, hx_last_error());
    memcpy(&v, buf, sizeof v);
    if (v.status == HX_OK) {
        D.m = m;
        D.l0 = hx_model_stage_l0(m);
        D.l1 = hx_model_stage_l1(m);
        D.tp = m->stage.tp;
        m->pipe = &D.pipe;
        s = hx_pipeline_serve(m);
        m->pipe = NULL;
        D.m = NULL;
    }
    /* A verdict against the job: rank 0 says why; this rank waits for the next model. */
    hx_model_free(m);
    return s;
}

static hx_status dist_worker(hx_runtime *rt)
{
    if (!D.inited || D.rank == 0)
        return hx_error(HX_ERR_STATE, "hx_dist_worker: on ranks other than 0 of a job (hx_dist_init first)");
    for (;;) {
        const void *buf;
        size_t bytes;
        load_request q;
        hx_status s = t_recv(NULL, 0, TAG_LOAD, 0, &buf, &bytes);
        if (s == HX_OK && bytes != sizeof q)
            s = hx_error(HX_ERR_FORMAT, "rank 0 sent a load request of %zu bytes", bytes);
        if (s)
            return s;
        memcpy(&q, buf, sizeof q);
        if (q.kind == LOAD_END)
            return HX_OK;
        q.path[sizeof q.path - 1] = q.kv_type_k[15] = q.kv_type_v[15] = q.partition[15] = '\0';
        s = serve_one(rt, &q);
        if (s)
            return s;
    }
}

hx_status hx_dist_worker(hx_runtime *rt)
{
    hx_api_enter();
    return hx_api_leave(dist_worker(rt));
}

hx_status hx_dist_info_get(hx_dist_info *out)
{
    if (!out)
        return HX_OK;
    *out = (hx_dist_info){.rank = D.rank, .size = D.size, .mpi = D.mpi, .steps = D.pipe.steps,
                          .messages = D.pipe.msgs_sent, .bytes = D.pipe.bytes_sent};
    out->first_layer = D.l0;
    out->end_layer = D.l1;
    out->tensor_parallel = D.tp.on;
    out->first_head = D.tp.head_lo, out->end_head = D.tp.head_lo + D.tp.n_head;
    out->first_kv_head = D.tp.kv_lo, out->end_kv_head = D.tp.kv_lo + D.tp.n_kv;
    out->first_ff = D.tp.ff_lo, out->end_ff = D.tp.ff_lo + D.tp.n_ff;
    out->reductions = D.pipe.reductions;
    out->bytes_reduced = D.pipe.bytes_reduced;
    return HX_OK;
}

hx_status hx_dist_finalize(void)
{
    if (!D.mpi || D.finalized)
        return HX_OK;
    hx_status s = HX_OK;
    if (D.rank == 0 && D.inited) { /* (a failed hx_dist_init started no worker) */
        /* a model still served stops first, then every rank leaves */
        if (D.m)
            detach(NULL, D.m);
        load_request end = {.kind = LOAD_END};
        for (int r = 1; r < D.size && s == HX_OK; r++)
            s = t_send(NULL, r, TAG_LOAD, &end, sizeof end);
    }
    hx_status f = t_flush(NULL);
    D.finalized = 1;
    MPI_Finalize();
    return s ? s : f;
}
