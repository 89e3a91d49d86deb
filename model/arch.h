/* The architecture table: what tells one LLaMA-family architecture's GGUF
 * files from another's, as data.  The loader, the graph builder and the
 * synthetic writer read an entry instead of testing names; adding an
 * architecture is one entry in model/arch.c (plus any op it needs).
 * Internal. */
#ifndef HX_MODEL_ARCH_H
#define HX_MODEL_ARCH_H

#include <stddef.h>
#include <stdint.h>

/* Which pairs a rotation acts on: (2i, 2i+1), or (i, i + n_rot/2). */
typedef enum { HX_ROPE_NORMAL, HX_ROPE_NEOX } hx_rope_kind;

/* The weights one layer may have, by the role the graph builder gives
 * them.  The order is the synthetic writer's: it draws its random weights
 * in this order, so moving a slot changes every synthetic model. */
typedef enum {
    HX_LW_ATTN_NORM, HX_LW_Q, HX_LW_K, HX_LW_V, HX_LW_O,
    HX_LW_FFN_NORM, HX_LW_GATE, HX_LW_UP, HX_LW_DOWN,
    HX_LW_Q_BIAS, HX_LW_K_BIAS, HX_LW_V_BIAS,
    HX_LAYER_SLOTS
} hx_layer_slot;

/* A dimension of a weight, resolved against a model's shape. */
typedef enum { HX_DIM_ONE, HX_DIM_EMBD, HX_DIM_KV, HX_DIM_FF } hx_dim;

/* The shape of a layer slot, [rows][row length], the same for every
 * architecture: it is what the graph builder's ops expect. */
typedef struct {
    hx_dim ne0, ne1;
} hx_layer_slot_shape;
extern const hx_layer_slot_shape hx_layer_slot_shapes[HX_LAYER_SLOTS];

/* The hyper-parameters read from "<key_prefix>.<key>". */
typedef enum {
    HX_HP_CTX, HX_HP_EMBD, HX_HP_LAYERS, HX_HP_FF, HX_HP_HEADS, HX_HP_HEADS_KV,
    HX_HP_ROPE_DIMS, HX_HP_ROPE_BASE, HX_HP_NORM_EPS, HX_HP_ROPE_SCALING_TYPE, HX_HP_ROPE_SCALING_FACTOR,
    HX_HP_SLIDING_WINDOW,
    HX_HPARAMS
} hx_hparam;

typedef enum { HX_TENSOR_NONE, HX_TENSOR_OPTIONAL, HX_TENSOR_REQUIRED } hx_tensor_presence;

typedef struct {
    const char *name;       /* general.architecture */
    const char *key_prefix; /* of the hyper-parameter keys */
    const char *key[HX_HPARAMS]; /* NULL: the architecture ignores that key */
    hx_rope_kind rope;
    /* What a model of this architecture usually has: the synthetic writer
     * writes them.  A file that is silent gets llama.cpp's defaults
     * (10000, 1e-5) whatever its architecture, as in llama.cpp. */
    float typical_rope_base, typical_norm_eps;
    const char *token_embd, *output_norm, *output; /* output is optional: tied to token_embd */
    /* After "blk.<n>.".  Slots that name the same tensor are row ranges
     * of it, in slot order (Phi-3's attn_qkv holds Q, K then V rows; its
     * ffn_up holds gate then up): each slot's weight is a view of its rows
     * in the mapped file, no copy, and the tensor has their rows together. */
    const char *layer_tensor[HX_LAYER_SLOTS];
    hx_tensor_presence layer_presence[HX_LAYER_SLOTS];
    /* Llama 3.1's rope frequency factors (one tensor for every layer,
     * n_rot/2 floats dividing each pair's frequency), optional; NULL when
     * the architecture has none. */
    const char *rope_freqs;
    /* Tensors of a variant hetero does not run, refused by name with
     * `unsupported_why` (Phi-3 128k's LongRoPE factors); NULL-terminated. */
    const char *unsupported[3];
    const char *unsupported_why;
} hx_arch;

/* The first slot naming the same tensor as `slot` (itself when unfused),
 * and the row ranges: *first_row of `slot` within it, *rows_total of the
 * tensor, each in units of the slots' resolved dims. */
hx_layer_slot hx_arch_tensor_owner(const hx_arch *a, hx_layer_slot slot);
void hx_arch_slot_rows(const hx_arch *a, hx_layer_slot slot, const uint64_t *dims, uint64_t *first_row,
                       uint64_t *rows_total);

/* The entry for general.architecture `name`, or NULL. */
const hx_arch *hx_arch_find(const char *name);
/* The i-th entry, or NULL past the last. */
const hx_arch *hx_arch_at(size_t i);
/* "llama, mistral, ..." into buf: for refusals. */
void hx_arch_names(char *buf, size_t cap);

#endif
