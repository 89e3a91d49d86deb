/* KV offload by sequences (NEO, FastDecode): when the GPU's memory cannot
 * hold the KV cache of every running sequence, the GPU keeps the weights
 * and runs every sequence's GEMMs, while the KV cache and the attention
 * of some sequences live on an offload device (the CPU, from host memory,
 * or an FPGA in its own).  A decode step is then two sub-batches in
 * flight: the GPU's sequences whole on the GPU, and the offloaded ones
 * with their kv_store and attention pinned to the offload device
 * (hx_batch_shape.kv_pinned), so that the offload device attends to one
 * sub-batch while the GPU computes the other's layers.  The price: the
 * GPU reads its weights once per sub-batch.  This file predicts a step's
 * time for the planner (engine/kv_offload.c decides with it).  Internal
 * to the partitioner and the engine. */
#ifndef HX_PARTITIONER_KV_OFFLOAD_H
#define HX_PARTITIONER_KV_OFFLOAD_H

#include "partitioner/partitioner.h"

struct hx_model;

typedef struct {
    double gpu_s;   /* the GPU's work in one step: every task of both sub-batches but the offloaded attention */
    double off_s;   /* the offload device's: the offloaded sub-batch's kv_store and attention */
    double link_s;  /* that sub-batch's q, k, v to the offload device and attention outputs back */
    double chain_s; /* that sub-batch's critical path: its tasks one after the other, with the copies */
    double step_s;  /* the step: the largest of gpu_s, off_s + link_s, chain_s */
    double alone_s; /* the GPU's sequences alone on it (no offload) */
} hx_kv_offload_prediction;

/* Predicts one decode step of n_gpu sequences whose KV the GPU (device
 * `gpu`) holds and n_off offloaded to device `off`, every sequence `ctx`
 * tokens deep, from the runtime's cost estimates (hx_sched_estimate: a
 * simulated device's own times, a real device's performance models).
 * HX_ERR_UNSUPPORTED when a task's time on its device is not known yet.
 * Call with m->eval_lock held. */
hx_status hx_kv_offload_predict(struct hx_model *m, int gpu, int off, uint32_t n_gpu, uint32_t n_off, uint32_t ctx,
                                hx_kv_offload_prediction *out);

#endif
