/* A team of threads that runs one parallel loop at a time, as the CPU
 * device does with each task: the loop is cut into chunks that members
 * claim one by one, the caller (member 0) included. */
#ifndef HX_RUNTIME_THREADPOOL_H
#define HX_RUNTIME_THREADPOOL_H

#include "hetero.h"

typedef struct hx_team hx_team;
/* Runs chunk `chunk` of `nchunks`. */
typedef void (*hx_team_fn)(void *ctx, int chunk, int nchunks);

/* `topology` is an hwloc topology or NULL; with `pin`, member i is bound to
 * the i-th core (modulo their number) of those the creating thread's
 * affinity mask allows (the caller binds itself with hx_team_pin_self). */
hx_status hx_team_create(int nthreads, void *topology, int pin, hx_team **out);
void hx_team_destroy(hx_team *t);
int hx_team_size(const hx_team *t);
hx_status hx_team_pin_self(hx_team *t, int ith);
/* Runs fn on every chunk and returns when all have run.  A member that is
 * asleep or descheduled claims nothing, and nothing waits for it: under
 * oversubscription the caller simply runs more chunks itself. */
void hx_team_run(hx_team *t, hx_team_fn fn, void *ctx, int nchunks);

#endif
