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

int hxb_hooks_options(hx_runtime_options *o, const char *inject, char *err, size_t cap)
{
    if (inject && *inject) {
        snprintf(err, cap, "--inject/HX_INJECT '%s': injection not supported by this build", inject);
        return -1;
    }
    return 0;
}

int hxb_hooks_check(const hxb_params *p, char *err, size_t cap)
{
    for (int i = 0; i < p->injects.n; i++)
        if (hxb_hooks_options(&(hx_runtime_options){0}, p->injects.item[i], err, cap))
            return -1;
    if (p->trace && !hxb_hooks_trace_supported()) {
        snprintf(err, cap, "--trace '%s': tracing not supported by this build (the runtime has no trace API "
                           "yet; --timeline draws an existing Chrome trace)", p->trace);
        return -1;
    }
    if (p->sim) {
        snprintf(err, cap, "--sim '%s': the simulator is not part of this build yet", p->sim);
        return -1;
    }
    return 0;
}

int hxb_hooks_trace_supported(void) { return 0; }

int hxb_hooks_trace_start(hx_runtime *rt, const char *path, char *err, size_t cap)
{
    snprintf(err, cap, "--trace '%s': tracing not supported by this build", path);
    return -1;
}

int hxb_hooks_trace_stop(hx_runtime *rt, char *err, size_t cap) { return 0; }
