/* Where runtime features that include/hetero.h does not offer yet plug
 * into the benchmark: slowdown injection, tracing and the simulator.
 * Until the runtime has them, asking for one is an error that says so;
 * a benchmark that ignored --inject would report numbers for a machine
 * the user did not ask about.
 *
 * When the runtime gains them:
 *   - injection: set the runtime option (or HX_INJECT's API twin) from
 *     `inject` in hxb_hooks_options and drop its error; every row already
 *     carries its injection spec and is compared with the first
 *     configuration's row of the same model and test;
 *   - tracing: start and stop the runtime's trace in hxb_hooks_trace_start
 *     and hxb_hooks_trace_stop and return 1 from hxb_hooks_trace_supported;
 *     run.c already records one generated token between them after the
 *     measurements, and with --plot timeline.c draws the file;
 *   - the simulator: open the runtime on the described machine instead of
 *     this one (hxb_hooks_options); the rest of the run is the same.
 */
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

const char *hxb_hooks_default_policy(void)
{
    const char *e = getenv("HX_SCHED");
    return e && *e ? e : "eager";
}

/* Each row names its injection, so the runtime gets it explicitly: ""
 * (none) overrides an HX_INJECT the row would not show. */
int hxb_hooks_options(hx_runtime_options *o, const char *inject, char *err, size_t cap)
{
    o->inject = inject ? inject : "";
    o->trace = "";
    return 0;
}

int hxb_hooks_check(const hxb_params *p, char *err, size_t cap)
{
    if (p->sim) {
        snprintf(err, cap, "--sim '%s': the simulator is not part of this build yet", p->sim);
        return -1;
    }
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
