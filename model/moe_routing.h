/* The router's expected choices (hx_model.expert_p) and tally files
 * (model/moe_routing.c).  Internal. */
#ifndef HX_MODEL_MOE_ROUTING_H
#define HX_MODEL_MOE_ROUTING_H

#include "model/model.h"

/* Sets expert_p from hx_model_options.moe_routing / HX_MOE_ROUTING (a
 * mixture of experts only; after the tallies' buffer exists). */
hx_status hx_moe_routing_setup(hx_model *m);
/* A step of T tokens is about to be planned (call with the evaluation
 * lock held): under measured routing, each time the tokens seen double,
 * the shares are taken again from the tallies.  Returns 1 when they moved
 * enough that plans made with the old ones are out of date. */
int hx_moe_routing_update(hx_model *m, uint32_t T);

#endif
