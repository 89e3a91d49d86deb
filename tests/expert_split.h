/* What the OpenCL and CUDA suites share: the experts' two lanes on real
 * kernels (partitioner/llama_graph.c).  A mixture of experts is decoded on
 * the CPU alone, then on the CPU and another device under plan, that
 * device given a memory of its own too small for the model and the CPU
 * slowed, so that the plan keeps layers on the device with the expert
 * groups that do not fit computed by the CPU beside it. */
#ifndef HX_TESTS_EXPERT_SPLIT_H
#define HX_TESTS_EXPERT_SPLIT_H

#include "hetero.h"

typedef struct {
    int split;         /* layers whose groups the last plan put on both devices */
    double worst_nmse; /* over the decode steps' logits, against the CPU alone's */
    uint64_t cpu_tasks, other_tasks;
} hx_expert_split;

/* qwen3moe-tiny (F32) on `rt` (open under plan, with the CPU and device
 * `other`): `other` gets a memory of its own for about half the file
 * beyond the planner's reserve, the CPU is slowed `slow` times. */
void hx_expert_split_run(hx_runtime *rt, int other, double slow, hx_expert_split *out);

#endif
