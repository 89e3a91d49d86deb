/* A model file's experts cut into groups (hx_expert_group, model.h) where
 * a placement could split them: with a device that has memory of its own,
 * the placement planner keeps a layer's most used groups there and the
 * rest in host memory, computed by the CPU beside them
 * (docs/scheduling.md, "Mixture of experts").  A file's expert tensor is
 * [experts][rows][row length], each expert's rows one block after the
 * other, so a group is a range of those blocks: its buffers wrap the
 * mapped rows, nothing is copied.  The slots keep the whole tensors (the
 * parameter counts and the pipeline's layer sizes read them); no task
 * names them once the layer has groups.
 *
 * Nothing is cut without such a device (every expert task would run on
 * the CPU anyway), nor where one of them holds the whole file: the plan
 * would keep every group there, and a layer's 16 groups are 32 launches
 * where one group is 2 (a decode step of Qwen3-30B-A3B on a GPU would
 * pay some 1,400 more). */
#include <stdlib.h>

#include "model/model.h"
#include "runtime/buffer.h"
#include "runtime/device.h"
#include "runtime/error.h"
#include "runtime/runtime.h"

/* Groups per layer: a plan weighs each count of them in host memory, so
 * more groups is a finer split for a longer plan. */
#define HX_EXPERT_GROUPS 16

hx_status hx_expert_groups_cut(hx_layer_weights *L, uint32_t E, uint32_t n_groups)
{
    if (!(L->groups = calloc(n_groups, sizeof *L->groups)))
        return hx_error(HX_ERR_NO_MEMORY, "expert groups");
    L->n_groups = n_groups;
    for (uint32_t g = 0; g < n_groups; g++) {
        L->groups[g].e_lo = (uint32_t)((uint64_t)E * g / n_groups);
        L->groups[g].e_n = (uint32_t)((uint64_t)E * (g + 1) / n_groups) - L->groups[g].e_lo;
    }
    return HX_OK;
}

static hx_status group_layer(hx_model *m, hx_layer_weights *L, uint32_t n_groups)
{
    const uint32_t E = m->hp.n_expert;
    for (int i = HX_LW_GATE_EXPS; i <= HX_LW_DOWN_EXPS; i++)
        if (!L->w[i].buf || hx_buffer_size(L->w[i].buf) % E)
            return HX_OK; /* not this rank's layer, or not whole experts: one group */
    hx_status s = hx_expert_groups_cut(L, E, n_groups);
    if (s)
        return s;
    for (uint32_t g = 0; g < n_groups; g++) {
        hx_expert_group *G = &L->groups[g];
        hx_buffer **b[3] = {&G->gate, &G->up, &G->down};
        for (int i = 0; i < 3; i++) {
            const hx_buffer *whole = L->w[HX_LW_GATE_EXPS + i].buf;
            const size_t per_expert = hx_buffer_size(whole) / E;
            s = hx_buffer_wrap(m->rt, (uint8_t *)whole->host + per_expert * G->e_lo,
                                         per_expert * G->e_n, 1, b[i]);
            if (s)
                return hx_error_context(s, "expert group %u", g);
        }
    }
    return HX_OK;
}

/* Whether some device with memory of its own has room for the whole file. */
static int fits_one_device(const hx_model *m)
{
    for (int d = 0; d < m->rt->ndevices; d++) {
        const hx_device_info *in = &m->rt->devices[d]->info;
        if (in->memory_node && hx_device_room(in) >= (double)m->info.file_bytes)
            return 1;
    }
    return 0;
}

hx_status hx_model_group_experts(hx_model *m)
{
    const uint32_t E = m->hp.n_expert;
    if (E < 2 || m->rt->n_memory_nodes < 2 || fits_one_device(m)) /* node 0 is host memory */
        return HX_OK;
    const uint32_t n_groups = E < HX_EXPERT_GROUPS ? E : HX_EXPERT_GROUPS;
    for (uint32_t l = 0; l < m->info.n_layer; l++) {
        hx_status s = group_layer(m, &m->layers[l], n_groups);
        if (s)
            return s; /* what was made is freed with the model */
    }
    return HX_OK;
}
