/* A loaded model: hyper-parameters, weights wrapped as read-only unified
 * buffers over the mapped GGUF file, the tokenizer, the KV pool, and the
 * activation buffers one evaluation uses.  Internal. */
#ifndef HX_MODEL_MODEL_H
#define HX_MODEL_MODEL_H

#include <pthread.h>
#include <stdatomic.h>

#include "hetero.h"
#include "model/arch.h"
#include "gguf/gguf.h"
#include "model/kv_cache.h"
#include "model/pipe.h"
#include "ops/types.h"

struct hx_tokenizer;
struct hx_plan;

/* hx_model_options.partition, resolved; the partitioner reads it. */
typedef enum { HX_PARTITION_AFFINITY, HX_PARTITION_LAYERS, HX_PARTITION_AUTO, HX_PARTITION_COLOCATED } hx_partition_strategy;

typedef struct {
    hx_buffer *buf;      /* NULL when the tensor is absent (optional ones) */
    hx_type type;
    uint64_t ne0, ne1;   /* row length, rows */
} hx_weight;

/* Experts e_lo .. e_lo + e_n - 1 of a layer with weight buffers of their
 * own ([e_n][F][D] gate and up, [e_n][D][F] down), so that a placement can
 * keep some on a GPU and the rest in host memory (ops/ops.h, groups). */
typedef struct {
    uint32_t e_lo, e_n;
    hx_buffer *gate, *up, *down;
} hx_expert_group;

/* One layer's weights by role (model/arch.h); absent ones have buf NULL.
 * With n_groups, the experts' weights are the groups' (a model of shapes'
 * slots have buf NULL, their types stand; a file's keep the whole tensors,
 * which no task names, model/expert_groups.c). */
typedef struct {
    hx_weight w[HX_LAYER_SLOTS];
    hx_expert_group *groups;
    uint32_t n_groups;
    /* What the K cache stores its keys less, f32 [Hkv][Dh] (model/kv_center.c);
     * NULL: keys stored as they are. */
    hx_buffer *k_center;
} hx_layer_weights;

/* A pipeline over processes (docs/mpi.md): rank r of `size` owns layers
 * [first[r], first[r + 1]) with their KV cache; rank 0 also holds the
 * token embedding and the output head.  size 1: the whole model here. */
#define HX_MAX_RANKS 64
/* Tensor parallelism instead (model/tensor_slice.c): every rank runs
 * every layer on its slice of it, query heads [head_lo, head_lo + n_head)
 * with their KV heads [kv_lo, kv_lo + n_kv) (whole groups) and FFN
 * columns [ff_lo, ff_lo + n_ff); the model's info then gives this rank's
 * counts, and the *_all fields the whole model's. */
typedef struct {
    int on;
    uint32_t head_lo, n_head, kv_lo, n_kv, ff_lo, n_ff;
    uint32_t n_head_all, n_head_kv_all, n_ff_all;
} hx_model_tp;
typedef struct {
    int rank, size;
    uint32_t first[HX_MAX_RANKS + 1];
    hx_model_tp tp;
} hx_model_stage;

/* What <arch>.rope.scaling.type asked for (model.c). */
typedef enum { HX_ROPE_SCALING_PLAIN, HX_ROPE_SCALING_LLAMA3 } hx_rope_scaling;

typedef struct {
    float eps, rope_base, rope_scale; /* rope_scale multiplies positions */
    hx_rope_scaling rope_scaling;
    uint32_t n_rot;
    uint32_t n_swa; /* sliding window: a token attends to the last n_swa positions; 0 = all */
    /* Layers of two kinds (hx_arch.swa_pattern): those where
     * hx_model_layer_swa() holds attend to the last layer_window
     * positions with RoPE base rope_base_swa and no scaling; their blocks
     * stay (the global layers read them), so n_swa is 0. */
    uint32_t layer_window, swa_pattern;
    float rope_base_swa;
    uint32_t q_dim;              /* n_head * head_dim */
    uint32_t n_expert, n_expert_used, n_ff_exp, n_ff_shexp; /* 0 experts: a dense FFN */
    float logit_softcap;         /* final_logit_softcapping; 0: none */
} hx_model_hparams;

/* The activations of one evaluation of up to max_batch tokens.  A model
 * keeps sets of growing capacity (1, 4, 16 ... max_batch tokens) and an
 * evaluation uses the smallest that holds its batch: a buffer moves
 * between memory nodes whole, so a decode step on a device with its own
 * memory must not copy rows for 512 tokens to use one. */
#define HX_ACT_SETS 8
typedef struct hx_activations {
    uint32_t max_batch;
    hx_buffer *x, *xn, *q, *k, *v, *att, *o, *g, *u, *h;
    hx_buffer *ids, *pos, *meta, *out_rows, *xo, *logits;
    /* Only where the architecture needs them: the Q and K projections
     * before their head norms; the router's logits, the routing
     * (ops/ops.h, "moe_route"), the experts' hidden rows and weighted
     * the expert FFN's sum; the shared expert's rows and gate. */
    hx_buffer *q0, *k0, *router, *route, *moe_h, *moe_out, *sg, *su, *sh, *sgate;
    /* The experts' second lane (partitioner/llama_graph.c, experts), only
     * where a device has memory of its own: the hidden rows and the sum of
     * the groups a plan puts on another device than the layer's first
     * group, so that the two devices' groups share no buffer and run at
     * once. */
    hx_buffer *moe_h1, *moe_out1;
    /* With hx_model_options.kv_split: the host's and the device's parts of
     * attention, outputs [T][Hq][Dh] and their maxima and sums [T][Hq][2]. */
    hx_buffer *att_part[2], *att_stats[2];
    uint32_t meta_ints;  /* capacity of `meta` */
} hx_activations;

/* The model's scratch memory (hx_model_scratch), one slot per table an
 * evaluation holds at once. */
enum { HX_SCRATCH_REQUEST, HX_SCRATCH_BATCH, HX_SCRATCH_KV_BLOCKS, HX_SCRATCH_PIPE,
       /* the second micro-batch's BATCH and KV_BLOCKS, and the split of a batch in two */
       HX_SCRATCH_BATCH_MB, HX_SCRATCH_KV_BLOCKS_MB, HX_SCRATCH_SPLIT, HX_SCRATCH_SLOTS };
/* Decode replay keeps up to this many recorded shapes (a serving engine
 * alternates decode steps of B sequences with steps carrying prefill
 * chunks, and B changes as requests come and go). */
enum { HX_REPLAY_SHAPES = 8 };

typedef struct hx_named_template {
    char *name, *source;
} hx_named_template;

struct hx_model {
    hx_runtime *rt;
    hx_gguf *gguf;
    hx_model_info info;
    const hx_arch *arch;       /* its entry in the architecture table */
    hx_model_hparams hp;
    hx_model_options opts;
    hx_type kv_type, v_type;   /* the K cache's type, the V cache's */
    uint32_t kv_rot_k, kv_rot_v; /* their Walsh-Hadamard widths (ops/ops.h), 0 = none */
    int kv_center;             /* a quantized K cache's keys stored centred (model/kv_center.c) */
    hx_weight tok_embd, out_norm, output;
    hx_weight rope_freqs;      /* Llama 3.1's frequency factors; buf NULL when absent */
    /* Tokens routed to each expert, [n_layer][n_expert] uint64, added to by
     * every evaluation's "moe_route" tasks (hx_model_expert_counts). */
    hx_buffer *expert_counts;
    /* What the router is expected to choose, [n_layer][n_expert]: each
     * expert's share of the entries (a token's k choices), summing to 1
     * per layer; the graph turns it into each expert task's expected work
     * (ops/ops.h: share, e_read).  NULL: unknown. */
    float *expert_p;
    const char *expert_p_source; /* what it is (expert_p_desc): declared, measured, a tally file */
    char expert_p_desc[160];
    /* Measured routing (model/moe_routing.c): expert_p follows the
     * tallies plus expert_prior (a tally file's counts, [n_layer][n_expert],
     * NULL: none), refreshed when the tokens seen reach routing_next;
     * routing_version counts the changes. */
    int routing_measured;
    uint64_t *expert_prior;
    char expert_tally_file[100];
    uint64_t routing_tokens, routing_next, routing_version;
    hx_layer_weights *layers;
    struct hx_tokenizer *tok;
    char *chat_template;       /* tokenizer.chat_template, NUL-terminated; NULL when absent */
    struct hx_named_template *named_templates; /* tokenizer.chat_template.NAME (model_chat.c) */
    size_t n_named_templates;
    hx_kv_pool *kv;
    hx_activations act[HX_ACT_SETS];
    int n_act;
    /* A second family of sets, made on first use: a pipeline's rank 0
     * keeps two micro-batches in flight (engine/pipeline.c). */
    hx_activations act_mb[HX_ACT_SETS];
    int n_act_mb;
    pthread_mutex_t eval_lock; /* one evaluation at a time */
    hx_partition_strategy partition;
    int fuse; /* hx_model_options.fuse_matmuls, resolved */
    struct hx_plan *plan;      /* built by the partitioner on first use; one allocation */
    /* The placement planner's plans per batch shape (partitioner/
     * placement.c), under a policy that places a step ahead (plan, ngl);
     * one allocation, NULL until used. */
    struct hx_placements *placements;
    /* hx_model_set_activation_observer; changed under eval_lock, so an
     * evaluation sees one setting throughout. */
    hx_activation_observer observer;
    void *observer_user;
    hx_expert_observer expert_observer; /* hx_model_set_expert_observer, likewise */
    void *expert_observer_user;
    /* Decode replay (partitioner/replay.c): on or off for the model's
     * life, the recordings of the last shapes used, most recent first (one
     * allocation each, under eval_lock; at most replay_shapes of them,
     * HX_REPLAY_SHAPES), and its counters.  act_generation counts the
     * reallocations of activation buffers, which drop every recording. */
    int graph_replay, replay_shapes;
    struct hx_replay *replay[HX_REPLAY_SHAPES];
    uint32_t act_generation;
    _Atomic uint64_t graphs_recorded, graphs_replayed; /* read by hx_model_stats_get without the lock */
    /* Working memory of evaluations (engine/batch.c), kept from one to
     * the next so that a decode step allocates nothing; under eval_lock. */
    void *scratch[HX_SCRATCH_SLOTS];
    size_t scratch_size[HX_SCRATCH_SLOTS];
    /* This process's part of a pipeline (model/stage.c), and the link to
     * the other ranks once they all loaded (engine/pipeline.h); NULL
     * without one. */
    hx_model_stage stage;
    struct hx_pipe *pipe;
    char *path; /* the file it was loaded from (a pipeline's ranks load it too); NULL for shapes */
    /* KV offload by sequences (engine/kv_offload.c, HX_KV_OFFLOAD): read
     * once; sessions whose cache the GPU holds, and those offloaded. */
    struct {
        int read, on;         /* configuration read; offload configured */
        uint32_t gpu_seqs;    /* sequences whose KV cache the GPU's memory holds */
        int dev;              /* the offload device (-2: none) */
        int home;             /* the device whose memory binds the batch: the first GPU, else the CPU */
        uint32_t n_gpu, n_off;
    } kv_off;
};

/* The pipeline the next models load as a stage of (model/stage.c): this
 * process is rank `rank` of `size`; `split` is the layers per rank
 * ("12,18") or NULL to balance them by cost.  size 1: no pipeline.
 * Checks the split's form only; the model checks it against its layers. */
hx_status hx_model_stage_configure(int rank, int size, const char *split);
/* Whether the next models load as a tensor-parallel slice instead of a
 * pipeline stage (with size > 1). */
void hx_model_stage_configure_tp(int on);
/* This rank's slice of every layer (rank of size): the cut computed and
 * checked, the weights cut to it, the model's info set to its counts
 * (model/tensor_slice.c).  A split that cannot be made is refused with
 * its numbers. */
hx_status hx_model_tp_slice(hx_model *m, int rank, int size);
/* Splits the model's layers over the configured ranks into m->stage, and
 * checks that this rank's share fits in its memory. */
hx_status hx_model_stage_plan(hx_model *m);
/* The bytes of the weights of layer l (l == n_layer: the output head and
 * the embedding, rank 0's), what a decode step reads. */
uint64_t hx_model_layer_bytes(const hx_model *m, uint32_t l);
/* The weights rank r of the pipeline maps and reads: its layers, and rank 0 the head. */
uint64_t hx_model_stage_weight_bytes(const hx_model *m, int r);
/* A tensor-parallel rank runs every layer. */
static inline uint32_t hx_model_stage_l0(const hx_model *m)
{
    return m->stage.tp.on ? 0 : m->stage.first[m->stage.rank];
}
static inline uint32_t hx_model_stage_l1(const hx_model *m)
{
    return m->stage.tp.on ? m->info.n_layer : m->stage.first[m->stage.rank + 1];
}

/* Each hx_dim of the model's shape (model/arch.h), into dims[HX_DIMS]. */
void hx_model_dims(const hx_model *m, uint64_t *dims);

/* Whether layer l attends to a sliding window (hx_arch.swa_pattern). */
static inline int hx_model_layer_swa(const hx_model *m, uint32_t l)
{
    return m->hp.swa_pattern && m->hp.layer_window && l % m->hp.swa_pattern < m->hp.swa_pattern - 1;
}

/* Layer l's RoPE base and frequency scale: Gemma 3's window layers have a
 * base of their own and no scaling. */
static inline float hx_model_layer_rope_base(const hx_model *m, uint32_t l)
{
    return hx_model_layer_swa(m, l) ? m->hp.rope_base_swa : m->hp.rope_base;
}
static inline float hx_model_layer_rope_scale(const hx_model *m, uint32_t l)
{
    return hx_model_layer_swa(m, l) ? 1.0f : m->hp.rope_scale;
}

/* Each layer's K centre (hx_layer_weights.k_center) where the K cache is
 * quantized, kv_rotate is on and the layer has a K bias (model/kv_center.c). */
hx_status hx_model_kv_centers(hx_model *m);
/* One head's centre: its K bias (Dh values) turned by the mean of RoPE's
 * rotations (hx_op_rope's fields) over positions 0 .. n_pos - 1. */
void hx_kv_center_head(const float *bias, float *out, uint32_t Dh, uint32_t n_rot, int neox, double base,
                       double freq_scale, const float *factors, uint32_t n_pos);

/* What every way of opening a model ends with (model.c): its options
 * resolved, the KV pool and the activation buffers. */
hx_status hx_model_prepare(hx_model *m, const hx_model_options *opts);
/* Makes a model just built an open handle of its runtime and gives it to
 * the caller (*out), or frees it (*out = NULL) and says why (model.c). */
hx_status hx_model_opened(hx_model *m, hx_model **out);
/* Repacks the weight matrices for the CPU as opts.repack asks
 * (model/weights_repack.c). */
hx_status hx_model_repack(hx_model *m);
/* A loaded file's experts in groups where a device has memory of its own
 * (model/expert_groups.c); before the activations are made. */
hx_status hx_model_group_experts(hx_model *m);
/* L's E experts in n_groups groups as even as E allows (their ranges;
 * no buffers yet). */
hx_status hx_expert_groups_cut(hx_layer_weights *L, uint32_t E, uint32_t n_groups);
/* Frees everything the model owns; no handle check (a failed load). */
void hx_model_destroy(hx_model *m);
/* The GGUF's tokenizer.chat_template.NAME templates, copied at load, and freed (model_chat.c). */
hx_status hx_model_read_named_templates(hx_model *m);
void hx_model_free_named_templates(hx_model *m);
/* The activation set for a batch of T tokens (model/activations.c). */
hx_activations *hx_model_act_for(hx_model *m, uint32_t T);
/* The same from the second family (made on first use), or NULL when it
 * cannot be made (hx_last_error says why). */
hx_activations *hx_model_act_for_mb(hx_model *m, uint32_t T);
hx_status hx_model_act_ensure(hx_model *m, hx_buffer **b, size_t bytes);
/* At least `bytes` of the model's scratch `slot` (HX_SCRATCH_*), kept for the next evaluation; call with eval_lock held.
 * Its contents are undefined (model/activations.c). */
hx_status hx_model_scratch(hx_model *m, int slot, size_t bytes, void **out);

/* model_embed_file.c: <arch>.pooling_type (HX_POOLING_NONE when absent or
 * out of range), and a tensor of the file by name (NULL when absent), for
 * the pooling and the classifier head of engine/embed.c. */
hx_pooling hx_model_file_pooling(const hx_model *m);
const hx_gguf_tensor *hx_model_file_tensor(const hx_model *m, const char *name);

#endif
