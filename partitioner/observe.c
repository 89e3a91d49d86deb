/* Activation observers (hx_model_set_activation_observer): after each
 * matmul with a model weight, one more task reads the matmul's input on
 * the host and hands it to the observer with the weight's GGUF name.
 * Being a task that reads the buffer, it runs after the task that wrote
 * the input and before the next one that overwrites it, wherever the
 * matmul ran: the runtime makes the host copy valid first.  Only a CPU
 * implementation exists, so a CPU thread runs it; the task is no
 * predecessor of anything but the input's next writer, so the layer goes
 * on meanwhile. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "ops/ops.h"
#include "runtime/error.h"
#include "partitioner/partitioner.h"

typedef struct {
    hx_activation_observer fn;
    void *user;
    uint32_t rows, cols;
    char tensor[40]; /* the weight's GGUF name: the record stays within a task's inline arguments */
} observe_args;

/* The observer is one call: share 0 makes it, the other shares return. */
static int observe_cpu(const hx_cpu_call *c)
{
    const observe_args *a = c->args;
    if (c->ith == 0)
        a->fn(a->user, a->tensor, c->buffers[0], a->rows, a->cols);
    return 0;
}

static double observe_flops(const void *args, const size_t *sizes)
{
    const observe_args *a = args;
    return 2.0 * a->rows * a->cols;
}

static const hx_codelet observe_codelet = {
    .name = "activation_observer",
    .cpu = observe_cpu,
    .flops = observe_flops,
};

hx_status hx_observe_submit(hx_model *m, const char *tensor, hx_buffer *x, uint32_t rows, uint32_t cols)
{
    observe_args a = {m->observer, m->observer_user, rows, cols, {0}};
    if (snprintf(a.tensor, sizeof a.tensor, "%s", tensor) >= (int)sizeof a.tensor)
        return hx_error(HX_ERR_RANGE, "activation observer: the weight name '%s' is longer than %zu bytes", tensor,
                        sizeof a.tensor - 1);
    hx_task_desc d = {.codelet = &observe_codelet, .nbuffers = 1, .buffers = {x}, .modes = {HX_R},
                      .args = &a, .args_size = sizeof a, .device = -1};
    return hx_task_submit(m->rt, &d, NULL);
}

/* ---- the experts ---------------------------------------------------------- */

typedef struct {
    hx_expert_observer fn;
    void *user;
    uint32_t T, k, E, cols, by_token;
    char tensor[40];
} observe_experts_args;

/* Expert e's entries are order[off[e] .. off[e+1]) of the route buffer
 * (ops/ops.h); rows in route order are contiguous already, rows by token
 * are gathered (entry t*k + j is token t's). */
static int observe_experts_cpu(const hx_cpu_call *c)
{
    const observe_experts_args *a = c->args;
    if (c->ith != 0)
        return 0;
    const float *x = c->buffers[0];
    const int32_t *route = c->buffers[1];
    const uint32_t n = a->T * a->k;
    const int32_t *off = route + 2 * (size_t)n, *order = off + a->E + 1;
    float *rows = a->by_token ? malloc(sizeof *rows * a->cols * (size_t)n) : NULL;
    if (a->by_token && !rows)
        return HX_ERR_NO_MEMORY;
    for (uint32_t e = 0; e < a->E; e++) {
        const uint32_t lo = (uint32_t)off[e], cnt = (uint32_t)(off[e + 1] - off[e]);
        if (!cnt)
            continue;
        if (!a->by_token) {
            a->fn(a->user, a->tensor, e, a->E, x + (size_t)lo * a->cols, cnt, a->cols);
            continue;
        }
        for (uint32_t i = 0; i < cnt; i++)
            memcpy(rows + (size_t)i * a->cols, x + (size_t)(order[lo + i] / a->k) * a->cols, sizeof *rows * a->cols);
        a->fn(a->user, a->tensor, e, a->E, rows, cnt, a->cols);
    }
    free(rows);
    return 0;
}

static double observe_experts_flops(const void *args, const size_t *sizes)
{
    const observe_experts_args *a = args;
    return 2.0 * a->T * a->k * a->cols;
}

static const hx_codelet observe_experts_codelet = {
    .name = "expert_observer",
    .cpu = observe_experts_cpu,
    .flops = observe_experts_flops,
};

hx_status hx_observe_experts_submit(hx_model *m, const char *tensor, hx_buffer *x, hx_buffer *route, uint32_t T,
                                    uint32_t k, uint32_t E, uint32_t cols, int by_token)
{
    observe_experts_args a = {m->expert_observer, m->expert_observer_user, T, k, E, cols, by_token != 0, {0}};
    if (snprintf(a.tensor, sizeof a.tensor, "%s", tensor) >= (int)sizeof a.tensor)
        return hx_error(HX_ERR_RANGE, "expert observer: the weight name '%s' is longer than %zu bytes", tensor,
                        sizeof a.tensor - 1);
    hx_task_desc d = {.codelet = &observe_experts_codelet, .nbuffers = 2, .buffers = {x, route},
                      .modes = {HX_R, HX_R}, .args = &a, .args_size = sizeof a, .device = -1};
    return hx_task_submit(m->rt, &d, NULL);
}
