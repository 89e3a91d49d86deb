/* The partitioner: each layer as a task graph, with the device class each
 * task prefers (DESIGN: preprocessing on CPU threads, GEMMs on GPUs,
 * attention on FPGA/OpenCL devices), what it costs, and why it goes where
 * it goes.  The preference is a hint (hx_task_desc.prefer) that the
 * scheduling policy weighs; it never pins. */
#ifndef HX_PARTITIONER_PARTITIONER_H
#define HX_PARTITIONER_PARTITIONER_H

#include "hetero.h"

struct hx_model;

typedef enum {
    HX_CLASS_PREPROCESS = 0, /* norms, RoPE, residuals, activations, gathers */
    HX_CLASS_GEMM = 1,       /* projections with the weight matrices         */
    HX_CLASS_ATTENTION = 2,  /* KV store and attention                       */
    HX_CLASS_HOST_ATTENTION = 3, /* the host's part of a split attention   */
    HX_CLASS_COUNT
} hx_task_class;

const char *hx_task_class_str(hx_task_class c);

struct hx_activations;
typedef struct {
    const struct hx_activations *act; /* the model's activation set for this batch */
    uint32_t T;          /* tokens in the batch              */
    uint32_t S;          /* distinct sequences               */
    uint32_t max_blocks; /* longest block table              */
    uint32_t n_out;      /* rows whose logits are computed   */
    /* Rows gathered after the final norm (xo): the n_out rows above, then
     * the hidden states kept in embeddings mode, which the output matrix
     * does not multiply; 0 = n_out. */
    uint32_t n_pick;
    /* The KV blocks attention reads (each sequence's blocks up to its last
     * position in the batch) and those kv_store writes (the blocks of the
     * tokens' slots), sorted: the tasks name them so that only they move
     * (NULL = all). */
    const uint32_t *kv_read, *kv_written;
    uint32_t n_kv_read, n_kv_written;
    /* With a split of attention (hx_model_options.kv_split): the blocks
     * each part reads, the host's (before each token's cut) and the
     * device's (from it), sorted. */
    const uint32_t *kv_read_part[2];
    uint32_t n_kv_read_part[2];
    /* KV offload (partitioner/kv_offload.h): with kv_pinned, the batch's
     * kv_store and attention tasks are pinned to device kv_device, whose
     * memory holds these sequences' KV cache. */
    int kv_pinned, kv_device;
} hx_batch_shape;

/* One task of the plan: where it would rather run and why. */
typedef struct {
    int layer;                /* -1 before the layers, n_layer after */
    hx_task_class cls;
    const hx_codelet *codelet;
    double flops, bytes;      /* for one token at the start of a sequence */
    uint32_t prefer;          /* bit d: prefers device d; 0 = no preference */
    int device;               /* the first of them, -1 when none */
    char reason[112];
} hx_plan_entry;

/* The tasks of one evaluation in submission order (the graph's shape does
 * not depend on the batch). */
struct hx_plan {
    size_t n;
    hx_plan_entry e[];
};

/* Receives the tasks of a dry run instead of the runtime. */
typedef void (*hx_graph_sink)(void *user, int layer, hx_task_class cls, const hx_task_desc *d);

/* Emits one evaluation's tasks: submitted with the plan's preferences, or
 * handed to `sink` when not NULL.  The model's ids, pos, meta and out_rows
 * buffers are filled by the caller (engine/eval.c). */
hx_status hx_llama_emit(struct hx_model *m, const hx_batch_shape *b, const struct hx_plan *plan,
                        hx_graph_sink sink, void *user);

/* Part of one evaluation, for a stage of a pipeline over processes
 * (engine/pipeline.c): layers [l0, l1) on the hidden states in act->x,
 * with the parts `parts` names: HX_STAGE_EMBED the token embedding
 * before them (into act->x); HX_STAGE_PICK the rows whose logits are
 * wanted, after them, into act->xo; HX_STAGE_HEAD the final norm and the
 * output projection into act->logits, from act->x, or with
 * HX_STAGE_PICKED from the n_out rows already in act->xo. */
enum { HX_STAGE_EMBED = 1, HX_STAGE_PICK = 2, HX_STAGE_HEAD = 4, HX_STAGE_PICKED = 8 };
hx_status hx_llama_emit_stage(struct hx_model *m, const hx_batch_shape *b, const struct hx_plan *plan,
                              hx_graph_sink sink, void *user, uint32_t l0, uint32_t l1, unsigned parts);

/* Submits one evaluation's tasks as hx_llama_emit does, from the model's
 * recording of the graph for this shape when it has one and replay is on
 * (partitioner/replay.c), after recording it when it has none.  Call with
 * m->eval_lock held, the batch's buffers filled. */
hx_status hx_replay_emit(struct hx_model *m, const hx_batch_shape *b, const struct hx_plan *plan);

/* Submits the task that hands a matmul's input x ([rows][cols] f32) to
 * the model's activation observer as the input of weight `tensor`
 * (partitioner/observe.c). */
hx_status hx_observe_submit(struct hx_model *m, const char *tensor, hx_buffer *x, uint32_t rows, uint32_t cols);
/* The same for an expert weight: x ([T][cols] f32 by token when by_token,
 * else [T*k][cols] in the route buffer's order) handed to the model's
 * expert observer one expert's rows at a time. */
hx_status hx_observe_experts_submit(struct hx_model *m, const char *tensor, hx_buffer *x, hx_buffer *route, uint32_t T,
                                    uint32_t k, uint32_t E, uint32_t cols, int by_token);

/* The model's plan, built on first use; call with m->eval_lock held.
 * Under a policy that places a step ahead (plan, ngl) the plan for batch
 * shape `b` (partitioner/placement.c); `b` NULL: the partition plan. */
hx_status hx_plan_get_locked(struct hx_model *m, const hx_batch_shape *b, const struct hx_plan **out);

#endif
