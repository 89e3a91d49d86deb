/* hx_dist_* without Open MPI (the build did not find it): a process is a
 * job of one, and one that mpirun launched is told what the library
 * lacks rather than running as N copies of the whole model. */
#include <stdlib.h>

#include "model/model.h"
#include "runtime/error.h"

hx_status hx_dist_init(int *argc, char ***argv, const hx_dist_options *o, hx_dist_info *out)
{
    (void)argc;
    (void)argv;
    const char *world = getenv("OMPI_COMM_WORLD_SIZE");
    if (world && atoi(world) > 1)
        return hx_error(HX_ERR_UNSUPPORTED, "launched by mpirun as %s ranks, but this hetero was built without Open "
                                            "MPI (install libopenmpi-dev and rebuild)", world);
    if (o && o->tensor_parallel && o->split && *o->split)
        return hx_error(HX_ERR_INVALID_ARG, "split '%s' with tensor parallelism: every rank holds every layer "
                                            "(give one of --split and --tensor-parallel)", o->split);
    hx_status s = hx_model_stage_configure(0, 1, o ? o->split : NULL);
    if (s)
        return s;
    hx_model_stage_configure_tp(0); /* a job of one holds the whole model */
    return hx_dist_info_get(out);
}

hx_status hx_dist_start(hx_model *m, hx_status loaded)
{
    (void)m;
    return loaded;
}

hx_status hx_dist_worker(hx_runtime *rt)
{
    (void)rt;
    return hx_error(HX_ERR_UNSUPPORTED, "hx_dist_worker: this hetero was built without Open MPI");
}

hx_status hx_dist_info_get(hx_dist_info *out)
{
    if (out)
        *out = (hx_dist_info){.rank = 0, .size = 1};
    return HX_OK;
}

hx_status hx_dist_finalize(void)
{
    return HX_OK;
}
