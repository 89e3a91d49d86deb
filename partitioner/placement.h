/* The placement planner (partitioner/placement.c): under a policy that
 * places a step ahead (hx_sched_policy.placement: plan, ngl), the device
 * of every task for a batch shape, kept per shape and made again when a
 * device's speed changes.  Internal to the partitioner. */
#ifndef HX_PARTITIONER_PLACEMENT_H
#define HX_PARTITIONER_PLACEMENT_H

#include "partitioner/partitioner.h"

struct hx_model;

/* The plan for shape `b`; `base` is the model's partition plan (its task
 * count is the graph's).  Call with m->eval_lock held. */
hx_status hx_placement_get(struct hx_model *m, const hx_batch_shape *b, const struct hx_plan *base,
                           const struct hx_plan **out);
/* Bumped whenever a plan is made: recorded graphs of older plans are stale. */
uint64_t hx_placement_generation(const struct hx_model *m);
/* The most recently used plan, NULL before the first. */
const struct hx_plan *hx_placement_last(const struct hx_model *m);
/* Plans made again because what they assumed changed, and the model's
 * prediction of the last used plan's step (seconds). */
hx_status hx_placement_info(struct hx_model *m, uint64_t *replans, double *predicted);

#endif
