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

/* The parts tensor parallelism (engine/tensor_parallel.c) shares:
 * rank 0 announces step `step` of `w` to every other rank (with the token
 * ids when the model is a tensor slice); another rank checks an
 * announcement and lays it out in its activations (*b), or learns that
 * rank 0 said stop (*stop); a failure once a step is announced ends the
 * job, saying `what` failed and why. */
hx_status hx_pipeline_announce(hx_model *m, hx_batch_work *w, uint64_t step);
hx_status hx_pipeline_take_step(hx_model *m, const void *msg, size_t bytes, hx_batch_shape *b, uint64_t *step,
                                int *stop);
void hx_pipeline_fail(hx_model *m, hx_status s, const char *what);

/* Tensor parallelism (docs/mpi.md): every rank runs every layer on its
 * slice (model/tensor_slice.c), the projections' partial sums reduced
 * over the ranks inside the graph (partitioner/llama_graph.c).  Rank 0
 * announces each step, with its token ids, and runs the embedding, the
 * layers and the output head; the others the embedding and the layers.
 * No hidden states travel between steps: each rank ends a layer with the
 * whole hidden state. */
hx_status hx_tp_eval(hx_model *m, hx_batch_work *w);
hx_status hx_tp_serve(hx_model *m);

#endif
