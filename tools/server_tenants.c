/* hetero-server's tenants (--api-keys FILE): each key has a name (the
 * engine's fairness group), a limit of requests in flight with a queue of
 * requests allowed to wait for a slot, and a budget of tokens per minute.
 * Over a limit the answer is 429 with Retry-After. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/server.h"

int srv_tenants_load(srv_tenants *T, const char *path, char *err, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, cap, "cannot open it");
        return -1;
    }
    char line[512];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        srv_tenant t = {0};
        unsigned mc = 0, tpm = 0, q = 0;
        int got = sscanf(line, "%127s %63s %u %u %u", t.key, t.name, &mc, &tpm, &q);
        if (got <= 0)
            continue;
        if (got < 2) {
            snprintf(err, cap, "line %d: 'KEY NAME [MAX_CONCURRENT [TOKENS_PER_MINUTE [QUEUE]]]'", lineno);
            fclose(f);
            return -1;
        }
        t.max_concurrent = mc;
        t.tokens_per_minute = tpm;
        t.queue = q;
        srv_tenant *a = realloc(T->t, sizeof *a * (T->n + 1));
        if (!a) {
            snprintf(err, cap, "out of memory");
            fclose(f);
            return -1;
        }
        T->t = a;
        T->t[T->n++] = t;
    }
    fclose(f);
    if (!T->n) {
        snprintf(err, cap, "no keys in it");
        return -1;
    }
    return 0;
}

void srv_tenants_free(srv_tenants *T)
{
    free(T->t);
    T->t = NULL;
    T->n = 0;
}

srv_tenant *srv_tenant_find(srv_tenants *T, const char *authorization)
{
    if (!authorization || strncmp(authorization, "Bearer ", 7))
        return NULL;
    const char *key = authorization + 7;
    for (size_t i = 0; i < T->n; i++)
        if (!strcmp(T->t[i].key, key))
            return &T->t[i];
    return NULL;
}

/* Starts a new minute of the token count when the last one is over. */
static void roll_window(srv_tenant *t, double now)
{
    if (now - t->window_start >= 60) {
        t->window_start = now;
        t->window_tokens = 0;
    }
}

unsigned srv_tenant_enter(srv_tenants *T, srv_tenant *t, double now)
{
    unsigned retry = 0;
    pthread_mutex_lock(&T->lock);
    roll_window(t, now);
    if (t->tokens_per_minute && t->window_tokens >= t->tokens_per_minute)
        retry = (unsigned)(60 - (now - t->window_start)) + 1;
    else if (t->max_concurrent && t->in_flight >= t->max_concurrent && t->queued >= t->queue)
        retry = 1;
    else {
        t->queued++;
        while (t->max_concurrent && t->in_flight >= t->max_concurrent)
            pthread_cond_wait(&T->freed, &T->lock);
        t->queued--;
        t->in_flight++;
    }
    pthread_mutex_unlock(&T->lock);
    return retry;
}

void srv_tenant_leave(srv_tenants *T, srv_tenant *t, uint64_t tokens, double now)
{
    pthread_mutex_lock(&T->lock);
    roll_window(t, now);
    t->in_flight--;
    t->window_tokens += tokens;
    pthread_cond_broadcast(&T->freed);
    pthread_mutex_unlock(&T->lock);
}
