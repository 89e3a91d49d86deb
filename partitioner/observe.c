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
#include <string.h>

#include "model/model.h"
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
