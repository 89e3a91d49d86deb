/* The steps of tensor parallelism over processes (engine/pipeline.h says
 * who does what; docs/mpi.md the messages).  Per step, rank 0 sends one
 * announcement to each other rank (the pipeline's STEP, with the token
 * ids); then every rank runs the whole graph on its slice, and the only
 * traffic is the graph's two all-reduces per layer of T x n_embd floats.
 * The KV blocks are numbered alike on every rank (each pool holds its own
 * KV heads of every layer), so rank 0's block tables are every rank's. */
#include "engine/pipeline.h"
#include "runtime/error.h"

hx_status hx_tp_eval(hx_model *m, hx_batch_work *w)
{
    hx_pipe *p = m->pipe;
    const uint64_t step = ++p->steps;
    const struct hx_plan *plan;
    hx_status s = hx_plan_get_locked(m, &w->shape, &plan);
    if (s)
        return s; /* nothing announced: the job goes on */
    s = hx_pipeline_announce(m, w, step);
    if (s)
        hx_pipeline_fail(m, s, "announcing a step");
    /* the whole graph; the rows of an embeddings request are here too */
    s = hx_llama_emit_stage(m, &w->shape, plan, NULL, NULL, 0, m->info.n_layer, HX_STAGE_EMBED | HX_STAGE_HEAD);
    hx_status waited = hx_runtime_wait_all(m->rt);
    if (s == HX_OK)
        s = waited;
    if (s) /* the other ranks are inside this step's all-reduces */
        hx_pipeline_fail(m, s, "a step");
    return HX_OK;
}

hx_status hx_tp_serve(hx_model *m)
{
    hx_pipe *p = m->pipe;
    pthread_mutex_lock(&m->eval_lock);
    for (;;) {
        const void *msg;
        size_t bytes;
        pthread_mutex_unlock(&m->eval_lock); /* idle: hx_model_stats_get and the like may look */
        hx_status s = p->ops->recv(p->ctx, 0, HX_PIPE_TAG_STEP, 0, &msg, &bytes);
        pthread_mutex_lock(&m->eval_lock);
        hx_batch_shape b;
        uint64_t step = 0;
        int stop = 0;
        if (s == HX_OK)
            s = hx_pipeline_take_step(m, msg, bytes, &b, &step, &stop);
        if (s == HX_OK && stop)
            break;
        const struct hx_plan *plan = NULL;
        if (s == HX_OK)
            s = hx_plan_get_locked(m, &b, &plan);
        if (s == HX_OK)
            s = hx_llama_emit_stage(m, &b, plan, NULL, NULL, 0, m->info.n_layer, HX_STAGE_EMBED);
        hx_status waited = hx_runtime_wait_all(m->rt);
        if (s == HX_OK)
            s = waited;
        if (s) {
            pthread_mutex_unlock(&m->eval_lock);
            hx_pipeline_fail(m, s, "a step");
            return s;
        }
        p->steps++;
    }
    pthread_mutex_unlock(&m->eval_lock);
    return p->ops->flush(p->ctx);
}
