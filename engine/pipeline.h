/* A pipeline over processes (docs/mpi.md): each rank runs its layers of
 * every evaluation with its own runtime, scheduler and devices, and the
 * hidden states go from rank to rank.  Rank 0 drives: it prepares the
 * batch as a single process does, announces the step to every other
 * rank, runs the embedding and its layers, and sends the hidden states
 * on; the last rank sends back the rows whose logits are wanted, and rank
 * 0 runs the output head and samples.  The transport is the caller's
 * (dist/mpi.c over Open MPI): every wait for a message that is due ends
 * by a deadline.  Internal. */
#ifndef HX_ENGINE_PIPELINE_H
#define HX_ENGINE_PIPELINE_H

#include "engine/batch.h"

enum { HX_PIPE_TAG_STEP = 1, HX_PIPE_TAG_ACT = 2 };

typedef struct hx_pipe_ops {
    /* Starts sending `bytes` from buf to rank `to` with `tag`; the
     * transport keeps its own copy, so buf is free on return. */
    hx_status (*send)(void *ctx, int to, int tag, const void *buf, size_t bytes);
    /* The next message from `from` with `tag`, in the transport's memory
     * until its next receive.  idle: no deadline (a rank waiting for the
     * next step, which a quiet server may not send for hours); else an
     * error by the transport's deadline, naming the rank waited for. */
    hx_status (*recv)(void *ctx, int from, int tag, int idle, const void **buf, size_t *bytes);
    /* Every send started has completed, or an error by the deadline. */
    hx_status (*flush)(void *ctx);
    /* Ends the job on every rank (a step failed half way: the ranks'
     * caches no longer agree); does not return. */
    void (*abort)(void *ctx, const char *why);
} hx_pipe_ops;

typedef struct hx_pipe {
    const hx_pipe_ops *ops;
    void *ctx;
    uint64_t steps;              /* steps run */
    uint64_t bytes_sent, msgs_sent; /* by this rank, for docs/mpi.md's figures */
} hx_pipe;

/* Rank 0: one evaluation through the pipeline, in place of the single
 * process's graph (engine/eval.c); `w` prepared, its logits computed on
 * return.  A failure before the step is announced returns; one after
 * aborts the job. */
hx_status hx_pipeline_eval(hx_model *m, hx_batch_work *w);

/* Ranks 1..: runs this rank's layers of every step until rank 0 says
 * stop (HX_OK) or a step fails (the job is aborted). */
hx_status hx_pipeline_serve(hx_model *m);

/* Rank 0: tells every other rank to stop serving. */
hx_status hx_pipeline_stop(hx_pipe *p, int size);

#endif
