/* A team of threads that runs one function on all members at once, as the
 * CPU device does with each task (the caller is member 0). */
#ifndef HX_RUNTIME_THREADPOOL_H
#define HX_RUNTIME_THREADPOOL_H

#include "hetero.h"

typedef struct hx_team hx_team;
typedef void (*hx_team_fn)(void *ctx, int ith, int nth);

/* `topology` is an hwloc topology or NULL; with `pin`, member i is bound to
 * core i (the caller binds itself with hx_team_pin_self). */
hx_status hx_team_create(int nthreads, void *topology, int pin, hx_team **out);
void hx_team_destroy(hx_team *t);
int hx_team_size(const hx_team *t);
hx_status hx_team_pin_self(hx_team *t, int ith);
/* Runs fn on every member and returns when all have returned. */
void hx_team_run(hx_team *t, hx_team_fn fn, void *ctx);
/* Inside fn: waits for the whole team. */
void hx_team_barrier(void *team);

#endif
