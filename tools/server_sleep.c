/* --sleep-idle-seconds N, as llama-server's: after N seconds with nothing
 * to answer, the model and its engine are freed (weights, the KV pool, the
 * engine's thread), and the first request that needs them loads them
 * again before it is answered.  Asleep, /health, /props (is_sleeping),
 * /models, /metrics, /machine and the web page answer without waking it:
 * /metrics with the text of the last scrape awake where no request came
 * after it (as llama-server serves its snapshot: nothing has run since),
 * else from the counters as they were when it fell asleep; /machine
 * from those counters with the KV pool freed.
 *
 * A read-write lock keeps the model in place: a request that uses it
 * holds it for reading while its handler runs; a streamed answer goes on
 * after that, so the sleeper also waits until no job and no in-flight
 * request is left, then takes the lock for writing (only when free: a
 * waiting writer would hold up readers) to free the model; a request that
 * finds it asleep takes it for writing to load it again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/server.h"

static void touch(srv_sleep *z)
{
    pthread_mutex_lock(&z->mu);
    z->last_active = srv_now();
    pthread_mutex_unlock(&z->mu);
}

void srv_sleep_touch(srv *S)
{
    if (S->sleep.idle_seconds > 0)
        touch(&S->sleep);
}

static int busy(srv *S)
{
    pthread_mutex_lock(&S->metrics.lock);
    int n = S->metrics.in_flight != 0;
    pthread_mutex_unlock(&S->metrics.lock);
    pthread_mutex_lock(&S->jobs_lock);
    n |= S->jobs != NULL;
    pthread_mutex_unlock(&S->jobs_lock);
    return n;
}

static void *sleeper(void *arg)
{
    srv *S = arg;
    srv_sleep *z = &S->sleep;
    const struct timespec tick = {0, 50 * 1000000L};
    while (!z->stop) {
        nanosleep(&tick, NULL);
        pthread_mutex_lock(&z->mu);
        const int idle = !z->asleep && srv_now() - z->last_active >= z->idle_seconds;
        pthread_mutex_unlock(&z->mu);
        if (!idle || S->draining || busy(S) || pthread_rwlock_trywrlock(&z->lock))
            continue;
        if (!z->asleep && !busy(S)) { /* nothing began meanwhile: no reader, no job */
            hx_engine_stats_get(S->e, &z->engine);
            hx_model_stats_get(S->m, &z->model);
            if (!z->release(S)) {
                pthread_mutex_lock(&z->mu); /* no request since the last scrape: it is the state asleep */
                z->frozen = z->scrape && z->scrape_active == z->last_active;
                pthread_mutex_unlock(&z->mu);
                z->asleep = 1;
                fprintf(stderr, "hetero-server: idle for %.0f s: the model is unloaded until a request needs it\n",
                        z->idle_seconds);
            } else {
                touch(z); /* it stays awake; try again after another idle spell */
            }
        }
        pthread_rwlock_unlock(&z->lock);
    }
    return NULL;
}

int srv_sleep_start(srv *S, double idle_seconds, int (*reload)(srv *), int (*release)(srv *))
{
    srv_sleep *z = &S->sleep;
    z->idle_seconds = idle_seconds;
    z->reload = reload;
    z->release = release;
    z->last_active = srv_now();
    if (idle_seconds <= 0)
        return 0;
    if (pthread_create(&z->thread, NULL, sleeper, S))
        return -1;
    z->started = 1;
    return 0;
}

void srv_sleep_stop(srv *S)
{
    srv_sleep *z = &S->sleep;
    z->stop = 1;
    if (z->started)
        pthread_join(z->thread, NULL);
    z->started = 0;
    free(z->scrape);
    z->scrape = NULL;
}

int srv_awake_enter(srv *S, int wake)
{
    srv_sleep *z = &S->sleep;
    pthread_rwlock_rdlock(&z->lock);
    while (wake && z->asleep) {
        pthread_rwlock_unlock(&z->lock);
        pthread_rwlock_wrlock(&z->lock);
        int rc = 0;
        if (z->asleep) {
            const double t0 = srv_now();
            rc = z->reload(S);
            if (!rc) {
                pthread_mutex_lock(&z->mu);
                z->frozen = 0;
                pthread_mutex_unlock(&z->mu);
                z->asleep = 0;
                fprintf(stderr, "hetero-server: the model is loaded again (%.2f s)\n", srv_now() - t0);
            }
        }
        pthread_rwlock_unlock(&z->lock);
        if (rc)
            return -1;
        pthread_rwlock_rdlock(&z->lock);
    }
    return 0;
}

void srv_awake_leave(srv *S, int wake)
{
    pthread_rwlock_unlock(&S->sleep.lock);
    if (wake) /* what only looks (/props, /metrics) is not activity */
        srv_sleep_touch(S);
}

int srv_asleep(srv *S) { return S->sleep.asleep; }

int srv_sleep_frozen_metrics(srv *S, char **text, size_t *n)
{
    srv_sleep *z = &S->sleep;
    pthread_mutex_lock(&z->mu);
    *text = NULL;
    if (z->frozen && (*text = malloc(z->scrape_n ? z->scrape_n : 1)))
        memcpy(*text, z->scrape, z->scrape_n);
    *n = z->scrape_n;
    pthread_mutex_unlock(&z->mu);
    return *text != NULL;
}

void srv_sleep_keep_scrape(srv *S, const char *text, size_t n)
{
    srv_sleep *z = &S->sleep;
    if (z->idle_seconds <= 0)
        return;
    char *copy = malloc(n ? n : 1);
    if (copy)
        memcpy(copy, text, n);
    pthread_mutex_lock(&z->mu);
    free(z->scrape);
    z->scrape = copy;
    z->scrape_n = copy ? n : 0;
    z->scrape_active = z->last_active;
    pthread_mutex_unlock(&z->mu);
}
