/* A pipeline over processes for every tool (docs/mpi.md): the options
 * --split, --tensor-parallel and --mpi-timeout, joining the job before the model loads, and
 * the other ranks serving their layers after it.  Run without mpirun a
 * tool is a job of one and none of this changes what it does.
 *
 * Header-only: tools/ and bench/ link no shared object of their own. */
#ifndef HX_TOOLS_CLI_DIST_H
#define HX_TOOLS_CLI_DIST_H

#include <stdio.h>
#include <string.h>

#include "hetero.h"
#include "cli_num.h"

typedef struct {
    hx_dist_options o;
    hx_dist_info info;
} cli_dist;

#define CLI_DIST_USAGE                                                                                                 \
    "  --split N,N,...    under mpirun: layers per rank (they add up to the model's layers);\n"                     \
    "                     default: balanced by the bytes of weights each layer reads\n"                              \
    "  --tensor-parallel, --tp\n"                                                                                    \
    "                     under mpirun: every rank holds a slice of every layer (its groups of\n"                    \
    "                     attention heads, a range of FFN columns) instead of a range of layers\n"                \
    "  --mpi-timeout S    under mpirun: the longest wait for another rank's message that is\n"                       \
    "                     due, in seconds, before the job is aborted (default 300)\n"

/* Takes o (and its value v) when it is one of the options above: 1 taken
 * (*i advanced past the value), 0 not ours, -1 a bad value (said). */
static inline int cli_dist_option(const char *prog, const char *o, const char *v, int *i, cli_dist *d)
{
    if (!strcmp(o, "--tensor-parallel") || !strcmp(o, "--tp")) {
        d->o.tensor_parallel = 1;
        return 1;
    }
    if (!strcmp(o, "--split") || !strcmp(o, "--mpi-timeout")) {
        if (!v) {
            fprintf(stderr, "%s: %s needs a value\n", prog, o);
            return -1;
        }
        ++*i;
        if (o[2] == 's') {
            d->o.split = v;
            return 1;
        }
        double t;
        return cli_double(prog, o, v, 0.01, 1e7, &t) ? -1 : (d->o.timeout_s = t, 1);
    }
    return 0;
}

/* Joins the job (a job of one without mpirun).  0, or -1 said. */
static inline int cli_dist_init(const char *prog, int *argc, char ***argv, cli_dist *d)
{
    if (hx_dist_init(argc, argv, &d->o, &d->info)) {
        fprintf(stderr, "%s: %s\n", prog, hx_last_error());
        return -1;
    }
    return 0;
}

/* One line per rank at the end of a pipeline's run: its layers and what it sent. */
static inline void cli_dist_report(const char *prog)
{
    hx_dist_info di;
    if (hx_dist_info_get(&di) || di.size < 2 || di.end_layer == 0)
        return;
    if (di.tensor_parallel) {
        fprintf(stderr,
                "%s: rank %d of %d: tensor slice: query heads %u-%u, KV heads %u-%u, FFN columns %u-%u of every "
                "layer; %llu steps, %llu all-reduces of %llu bytes, %llu messages, %llu bytes sent\n",
                prog, di.rank, di.size, di.first_head, di.end_head - 1, di.first_kv_head, di.end_kv_head - 1,
                di.first_ff, di.end_ff - 1, (unsigned long long)di.steps, (unsigned long long)di.reductions,
                (unsigned long long)di.bytes_reduced, (unsigned long long)di.messages, (unsigned long long)di.bytes);
        return;
    }
    fprintf(stderr, "%s: rank %d of %d: layers %u-%u%s; %llu steps, %llu messages, %llu bytes sent\n", prog, di.rank,
            di.size, di.first_layer, di.end_layer - 1, di.rank ? "" : " and the embedding and output head",
            (unsigned long long)di.steps, (unsigned long long)di.messages, (unsigned long long)di.bytes);
}

/* Ranks other than 0 serve here, on their runtime `rt` (NULL: opening
 * it failed, said), every model rank 0 loads, until rank 0 ends the job.
 * Returns the exit status. */
static inline int cli_dist_worker(const char *prog, hx_runtime *rt)
{
    hx_dist_info di;
    hx_dist_info_get(&di);
    hx_status s = rt ? hx_dist_worker(rt) : HX_ERR_STATE;
    if (s && rt)
        fprintf(stderr, "%s: rank %d of %d: %s\n", prog, di.rank, di.size, hx_last_error());
    cli_dist_report(prog);
    hx_runtime_close(rt);
    hx_dist_finalize();
    return s ? 1 : 0;
}

/* Rank 0 after the load (status `loaded`): the other ranks load theirs.
 * 0 ready, -1 failed (said). */
static inline int cli_dist_start(const char *prog, hx_model *m, hx_status loaded)
{
    if (hx_dist_start(m, loaded)) {
        fprintf(stderr, "%s: %s\n", prog, hx_last_error());
        return -1;
    }
    return 0;
}

#endif
