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

#include "model/pipe.h"

/* Rank 0: one evaluation through the pipeline, in place of the single
 * process's graph (engine/eval.c); `w` prepared, its logits computed on
 * return.  A failure before the step is announced returns; one after
 * aborts the job. */
hx_status hx_pipeline_eval(hx_model *m, hx_batch_work *w);
/* Two micro-batches of one step (disjoint sessions, prepared with
 * hx_batch_prepare_mb 0 and 1) in flight at once: rank 0 runs b's first
 * layers while the other ranks run a's, and so on down the pipeline. */
hx_status hx_pipeline_eval2(hx_model *m, hx_batch_work *a, hx_batch_work *b);

/* Ranks 1..: runs this rank's layers of every step until rank 0 says
 * stop (HX_OK) or a step fails (the job is aborted). */
hx_status hx_pipeline_serve(hx_model *m);

/* Rank 0: tells every other rank to stop serving. */
hx_status hx_pipeline_stop(hx_pipe *p, int size);

#endif
