/* The small model and runtime of small_model.h. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "quantize/synthetic.h"
#include "tests/hx_test.h"
#include "tests/small_model.h"

static const hx_synthetic_config small = {"small-test", 128, 2, 4, 2, 256, 256, "llama", 0};

void hx_small_model_write(hx_small_model *sm, const char *type)
{
    snprintf(sm->dir, sizeof sm->dir, "/tmp/hx-small-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(sm->dir));
    snprintf(sm->path, sizeof sm->path, "%s/m.gguf", sm->dir);
    HX_ASSERT_OK(hx_synthetic_write(sm->path, &small, type, 7));
}

void hx_small_model_remove(hx_small_model *sm)
{
    unlink(sm->path);
    rmdir(sm->dir);
}

hx_runtime *hx_small_runtime(int cpu_threads, const char *sched)
{
    hx_runtime *rt = NULL;
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = "cpu";
    o.cpu_threads = cpu_threads;
    o.sched = sched;
    o.perfmodel_dir = "off";
    o.pin_threads = 0;
    o.inject = "";
    o.trace = "";
    HX_ASSERT_OK(hx_runtime_open(&rt, &o));
    return rt;
}
