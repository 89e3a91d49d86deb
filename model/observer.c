/* hx_model_set_activation_observer and hx_model_set_expert_observer: who
 * sees each matmul's input (the partitioner emits the tasks that call
 * them, partitioner/observe.c). */
#include "model/model.h"
#include "runtime/error.h"
#include "runtime/handle.h"

/* The observer task has a CPU implementation only. */
static int has_cpu_device(const hx_runtime *rt)
{
    for (int i = 0; i < hx_runtime_device_count(rt); i++) {
        hx_device_info d;
        if (hx_runtime_device_info(rt, i, &d) == HX_OK && d.family == HX_FAMILY_CPU)
            return 1;
    }
    return 0;
}

/* Whether an observer (set = 1) may be set on m. */
static hx_status may_observe(hx_model *m, int set, const char *fn)
{
    hx_status s = hx_handle_check(m, HX_HANDLE_MODEL, fn);
    if (s)
        return s;
    if (set && m->stage.size > 1)
        return hx_error(HX_ERR_UNSUPPORTED, "%s: the model's layers are spread over %d ranks of a pipeline; observe it "
                                            "in one process", fn, m->stage.size);
    if (set && !has_cpu_device(m->rt))
        return hx_error(HX_ERR_NO_DEVICE, "%s: the runtime has no CPU device to run the observer on (open it with "
                                          "the CPU among its devices)", fn);
    return HX_OK;
}

static hx_status set_observer(hx_model *m, hx_activation_observer fn, void *user)
{
    hx_status s = may_observe(m, fn != NULL, "hx_model_set_activation_observer");
    if (s)
        return s;
    pthread_mutex_lock(&m->eval_lock);
    m->observer = fn;
    m->observer_user = fn ? user : NULL;
    pthread_mutex_unlock(&m->eval_lock);
    return HX_OK;
}

static hx_status set_expert_observer(hx_model *m, hx_expert_observer fn, void *user)
{
    hx_status s = may_observe(m, fn != NULL, "hx_model_set_expert_observer");
    if (s)
        return s;
    pthread_mutex_lock(&m->eval_lock);
    m->expert_observer = fn;
    m->expert_observer_user = fn ? user : NULL;
    pthread_mutex_unlock(&m->eval_lock);
    return HX_OK;
}

hx_status hx_model_set_activation_observer(hx_model *m, hx_activation_observer fn, void *user)
{
    hx_api_enter();
    return hx_api_leave(set_observer(m, fn, user));
}

hx_status hx_model_set_expert_observer(hx_model *m, hx_expert_observer fn, void *user)
{
    hx_api_enter();
    return hx_api_leave(set_expert_observer(m, fn, user));
}
