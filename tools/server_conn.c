/* hetero-server's connections.  libmicrohttpd gives each connection a
 * thread and, in 0.9.75, knows one timeout only: seconds without any
 * byte.  A client that trickles a header byte every few seconds
 * (slowloris), or thousands that connect and say nothing, would hold
 * threads and the connection limit for as long as they like.  So the
 * server keeps its own list: a client address may hold max_per_ip
 * connections (more are refused at accept); with max_total open, a new
 * one makes the oldest connection still waiting for its request give way,
 * if it has waited a second (connections being answered, and young ones,
 * are never taken; else the newcomer is refused); and a connection that has
 * not sent a whole request idle_timeout seconds after it opened, or after
 * its last answer, is closed, trickling or not.
 *
 * Closing is shutdown(2) on the socket from here: its thread sees the end
 * of the stream and closes the connection the usual way.  The socket stays
 * valid while listed: libmicrohttpd reports a connection closed (we unlist
 * it, under the lock) before it closes the socket. */
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tools/server.h"

struct srv_conn {
    srv_conns *C;
    struct sockaddr_storage addr;
    socklen_t addr_len;
    int fd, phase, closing;
    double since;               /* it began waiting for its current request */
    srv_conn *prev, *next;
};

/* The address without the port. */
static int same_host(const struct sockaddr *a, const struct sockaddr *b)
{
    if (a->sa_family != b->sa_family)
        return 0;
    if (a->sa_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr == ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->sa_family == AF_INET6)
        return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr,
                       sizeof(struct in6_addr));
    return 0;
}

static void close_conn(srv_conn *k)
{
    if (!k->closing) {
        k->closing = 1;
        shutdown(k->fd, SHUT_RDWR);
    }
}

/* A connection younger than this is never taken for a newcomer: it may
 * be a client whose request is on its way, and a flood that reconnects as
 * fast as it is closed must not churn through the table. */
#define EVICT_MIN_AGE 1.0
/* Connections being closed for newcomers at once, at most (libmicrohttpd
 * counts them until their threads end; its limit is SRV_CONN_SLACK above
 * ours). */
#define EVICT_IN_FLIGHT (SRV_CONN_SLACK / 2)

enum MHD_Result srv_conn_accept(void *cls, const struct sockaddr *addr, socklen_t len)
{
    srv_conns *C = cls;
    (void)len;
    enum MHD_Result ok = MHD_YES;
    const double now = srv_now();
    pthread_mutex_lock(&C->lock);
    uint32_t mine = 0, closing = 0;
    srv_conn *victim = NULL;
    for (srv_conn *k = C->head; k; k = k->next) {
        if (k->closing) {
            closing++;
            continue;
        }
        mine += same_host((const struct sockaddr *)&k->addr, addr);
        if (!victim && k->phase == SRV_CONN_WAITING && now - k->since >= EVICT_MIN_AGE)
            victim = k;
    }
    if (mine >= C->max_per_ip) {
        C->refused++;
        ok = MHD_NO;
    } else if (C->n >= C->max_total) {
        if (victim && closing < EVICT_IN_FLIGHT) {
            close_conn(victim);
            C->evicted++;
        } else {
            C->refused++; /* every connection is young or being answered */
            ok = MHD_NO;
        }
    }
    pthread_mutex_unlock(&C->lock);
    return ok;
}

void srv_conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                     enum MHD_ConnectionNotificationCode code)
{
    srv_conns *C = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        srv_conn *k = calloc(1, sizeof *k);
        /* Each answer is read before the next call: libmicrohttpd 1.0 gives
         * every call the same storage, so the address's call would
         * overwrite the descriptor (and shutdown(2) would close nothing). */
        const union MHD_ConnectionInfo *fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!k || !fd) {
            free(k);
            return; /* unlisted: MHD's own timeout still applies */
        }
        k->C = C;
        k->fd = fd->connect_fd;
        const union MHD_ConnectionInfo *ad = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (ad && ad->client_addr) {
            k->addr_len = ad->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                                  : sizeof(struct sockaddr_in);
            memcpy(&k->addr, ad->client_addr, k->addr_len);
        }
        k->since = srv_now();
        pthread_mutex_lock(&C->lock);
        k->prev = C->tail;
        if (C->tail)
            C->tail->next = k;
        else
            C->head = k;
        C->tail = k;
        C->n++;
        pthread_mutex_unlock(&C->lock);
        *socket_context = k;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        srv_conn *k = *socket_context;
        pthread_mutex_lock(&C->lock);
        if (k->prev)
            k->prev->next = k->next;
        else
            C->head = k->next;
        if (k->next)
            k->next->prev = k->prev;
        else
            C->tail = k->prev;
        C->n--;
        pthread_mutex_unlock(&C->lock);
        free(k);
        *socket_context = NULL;
    }
}

void srv_conn_phase(struct MHD_Connection *c, int phase)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    srv_conn *k = ci ? ci->socket_context : NULL;
    if (!k)
        return;
    pthread_mutex_lock(&k->C->lock);
    k->phase = phase;
    if (phase == SRV_CONN_WAITING)
        k->since = srv_now();
    pthread_mutex_unlock(&k->C->lock);
}

/* Every 100 ms: closes the connections past their time to send a request. */
static void *reaper(void *arg)
{
    srv_conns *C = arg;
    while (!C->stop) {
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
        const double now = srv_now();
        pthread_mutex_lock(&C->lock);
        for (srv_conn *k = C->head; k; k = k->next)
            if (k->phase != SRV_CONN_BUSY && !k->closing && now - k->since > C->idle_timeout) {
                close_conn(k);
                C->timed_out++;
            }
        pthread_mutex_unlock(&C->lock);
    }
    return NULL;
}

int srv_conns_start(srv_conns *C)
{
    pthread_mutex_init(&C->lock, NULL);
    if (pthread_create(&C->reaper, NULL, reaper, C))
        return -1;
    C->reaper_started = 1;
    return 0;
}

void srv_conns_stop(srv_conns *C)
{
    C->stop = 1;
    if (C->reaper_started)
        pthread_join(C->reaper, NULL);
    C->reaper_started = 0;
}
