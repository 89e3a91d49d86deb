/* The link between the ranks of a pipeline over processes, as the model
 * holds it (hx_model.pipe): the transport's calls (dist/mpi.c) that the
 * engine's steps use (engine/pipeline.c), and what the model tells it
 * when it is freed.  Internal. */
#ifndef HX_MODEL_PIPE_H
#define HX_MODEL_PIPE_H

#include <stddef.h>
#include <stdint.h>

#include "hetero.h"

struct hx_model;

enum { HX_PIPE_TAG_STEP = 1, HX_PIPE_TAG_ACT = 2 };

typedef struct hx_pipe_ops {
    /* Starts sending `bytes` from buf to rank `to` with `tag`; the
     * transport keeps its own copy, so buf is free on return. */
    hx_status (*send)(void *ctx, int to, int tag, const void *buf, size_t bytes);
    /* The next message from `from` with `tag`, in the transport's memory
     * until its next receive.  hops 0: no deadline (a rank waiting for the
     * next step, which a quiet server may not send for hours); else an
     * error after hops times the transport's timeout, naming the rank
     * waited for (a message that crosses k ranks gets k timeouts, so that
     * the rank next to one that hangs is the first to say so). */
    hx_status (*recv)(void *ctx, int from, int tag, int hops, const void **buf, size_t *bytes);
    /* Every send started has completed, or an error by the deadline. */
    hx_status (*flush)(void *ctx);
    /* Ends the job on every rank (a step failed half way: the ranks'
     * caches no longer agree); does not return. */
    void (*abort)(void *ctx, const char *why);
    /* Rank 0's model is being freed: the other ranks stop serving it. */
    void (*detach)(void *ctx, struct hx_model *m);
    /* Tensor parallelism: every rank's `n` floats at buf replaced by
     * their sum over the ranks (the same bits on every rank), or an error
     * by the deadline naming the wait. */
    hx_status (*allreduce)(void *ctx, float *buf, size_t n);
} hx_pipe_ops;

typedef struct hx_pipe {
    const hx_pipe_ops *ops;
    void *ctx;
    uint64_t steps;                 /* steps run */
    uint64_t bytes_sent, msgs_sent; /* by this rank (docs/mpi.md's figures) */
    uint64_t reductions, bytes_reduced; /* all-reduces of tensor parallelism, and their bytes */
} hx_pipe;

#endif
