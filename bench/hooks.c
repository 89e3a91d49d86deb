/* Where runtime options that a row must show plug into the benchmark:
 * the injection a row names (explicitly, so that an HX_INJECT the row
 * would not show does not leak in), the trace of one token, and the
 * simulated machine (--sim), the same for every row of a run. */
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

const char *hxb_hooks_default_policy(void)
{
    const char *e = getenv("HX_SCHED");
    return e && *e ? e : "static";
}

/* Each row names its injection, so the runtime gets it explicitly: ""
 * (none) overrides an HX_INJECT the row would not show. */
int hxb_hooks_options(hx_runtime_options *o, const hxb_params *p, const char *inject, char *err, size_t cap)
{
    (void)err, (void)cap;
    o->inject = inject ? inject : "";
    o->trace = "";
    o->machine = p->sim ? p->sim : "";
    return 0;
}

int hxb_hooks_check(const hxb_params *p, char *err, size_t cap)
{
    (void)p, (void)err, (void)cap;
    return 0;
}

int hxb_hooks_trace_supported(void) { return 1; }

int hxb_hooks_trace_start(hx_runtime *rt, const char *path, char *err, size_t cap)
{
    if (hx_runtime_trace_start(rt, path) == HX_OK)
        return 0;
    snprintf(err, cap, "%s", hx_last_error());
    return -1;
}

int hxb_hooks_trace_stop(hx_runtime *rt, char *err, size_t cap)
{
    if (hx_runtime_trace_stop(rt) == HX_OK)
        return 0;
    snprintf(err, cap, "%s", hx_last_error());
    return -1;
}
