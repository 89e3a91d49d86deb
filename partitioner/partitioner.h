/* The partitioner: each layer as a task graph, with the device class each
 * task prefers (DESIGN: preprocessing on CPU threads, GEMMs on GPUs,
 * attention on FPGA/OpenCL devices). */
#ifndef HX_PARTITIONER_PARTITIONER_H
#define HX_PARTITIONER_PARTITIONER_H

#include "hetero.h"

struct hx_model;

typedef enum {
    HX_CLASS_PREPROCESS = 0, /* norms, RoPE, residuals, activations, gathers */
    HX_CLASS_GEMM = 1,       /* projections with the weight matrices         */
    HX_CLASS_ATTENTION = 2,  /* KV store and attention                       */
    HX_CLASS_COUNT
} hx_task_class;

/* Where each class of task goes: a device index, or -1 for the scheduler. */
typedef struct {
    int device[HX_CLASS_COUNT];
} hx_placement;

typedef struct {
    uint32_t T;          /* tokens in the batch              */
    uint32_t S;          /* distinct sequences               */
    uint32_t max_blocks; /* longest block table              */
    uint32_t n_out;      /* rows whose logits are computed   */
} hx_batch_shape;

/* Submits one evaluation's tasks; the model's ids, pos, meta and out_rows
 * buffers are filled by the caller (partitioner/eval.c). */
hx_status hx_llama_submit(struct hx_model *m, const hx_batch_shape *b, const hx_placement *place);

#endif
