/* llama-server's id_slot: a request may name one of the -np slots, and
 * requests naming the same slot run one after the other, as llama-server
 * runs one task per slot and defers the next until that slot is free.
 *
 * hetero's engine has no slots: it batches up to -np requests, and its
 * prefix cache serves every request alike, so naming a slot is not needed
 * to find a conversation's KV again.  What naming one still means here is
 * the order: a request that names slot k waits for the request that holds
 * it, and /slots shows it at k.  Requests that name none take no slot and
 * never wait for one. */
#include <stdlib.h>

#include "tools/server.h"

int srv_lanes_init(srv *S, uint32_t n)
{
    pthread_mutex_init(&S->lanes.lock, NULL);
    pthread_cond_init(&S->lanes.freed, NULL);
    S->lanes.held = calloc(n ? n : 1, sizeof *S->lanes.held);
    return S->lanes.held ? 0 : -1;
}

int srv_lane_take(srv *S, int k)
{
    if (k < 0)
        return 0;
    pthread_mutex_lock(&S->lanes.lock);
    /* Woken by a slot given back; every 100 ms to see a drain begin. */
    while (S->lanes.held[k] && !S->draining) {
        const struct timespec t = srv_after_ms(100);
        pthread_cond_timedwait(&S->lanes.freed, &S->lanes.lock, &t);
    }
    const int ok = !S->lanes.held[k];
    if (ok)
        S->lanes.held[k] = 1;
    pthread_mutex_unlock(&S->lanes.lock);
    return ok ? 0 : -1;
}

void srv_lane_give(srv *S, int k)
{
    if (k < 0)
        return;
    pthread_mutex_lock(&S->lanes.lock);
    S->lanes.held[k] = 0;
    pthread_cond_broadcast(&S->lanes.freed);
    pthread_mutex_unlock(&S->lanes.lock);
}
