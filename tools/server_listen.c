/* The listening sockets, taken before the model loads so that a port in
 * use fails at once.  --host is one address or host name, or a comma list
 * of them as llama-server takes it ("127.0.0.1,::1"): a socket for each,
 * all on the same port (with --port 0, the one the first one got).  A
 * host name ("localhost") listens on its first IPv4 address, else its
 * first address. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tools/server.h"

static int listen_one(const char *host, unsigned port, int *fd_out, char *shown, size_t cap, unsigned *got)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
                    *res = NULL;
    char ps[8];
    snprintf(ps, sizeof ps, "%u", port);
    int rc = getaddrinfo(host, ps, &hints, &res);
    if (rc) {
        fprintf(stderr, "hetero-server: --host %s: %s\n", host, gai_strerror(rc));
        return -1;
    }
    struct addrinfo *ai = res;
    for (struct addrinfo *p = res; p; p = p->ai_next)
        if (p->ai_family == AF_INET) {
            ai = p;
            break;
        }
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    int one = 1;
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        /* "::" beside "0.0.0.0" on one port: each socket its own family */
        if (ai->ai_family == AF_INET6)
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    }
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 1024)) {
        fprintf(stderr, "hetero-server: cannot listen on %s:%u: %s\n", host, port, strerror(errno));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(res);
        return -1;
    }
    freeaddrinfo(res);
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    char name[64] = "?", serv[16] = "0";
    getnameinfo((struct sockaddr *)&sa, sl, name, sizeof name, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV);
    snprintf(shown, cap, sa.ss_family == AF_INET6 ? "[%s]" : "%s", name);
    *got = (unsigned)atoi(serv);
    *fd_out = fd;
    return 0;
}

int srv_listen(const char *hosts, unsigned port, srv_listeners *L)
{
    memset(L, 0, sizeof *L);
    L->port = port;
    for (const char *h = hosts;;) {
        size_t n = strcspn(h, ",");
        char host[256];
        if (!n || n >= sizeof host) {
            fprintf(stderr, "hetero-server: --host '%s': %s\n", hosts, n ? "an address is too long" : "an empty address");
            goto fail;
        }
        if (L->n == SRV_MAX_LISTEN) {
            fprintf(stderr, "hetero-server: --host '%s': at most %d addresses\n", hosts, SRV_MAX_LISTEN);
            goto fail;
        }
        memcpy(host, h, n);
        host[n] = '\0';
        unsigned got;
        if (listen_one(host, L->port, &L->fd[L->n], L->shown[L->n], sizeof L->shown[0], &got))
            goto fail;
        L->port = got; /* --port 0: the others take the port the first got */
        L->n++;
        if (!h[n])
            return 0;
        h += n + 1;
    }
fail:
    srv_listen_close(L);
    return -1;
}

void srv_listen_close(srv_listeners *L)
{
    for (size_t i = 0; i < L->n; i++)
        if (L->fd[i] >= 0)
            close(L->fd[i]);
    L->n = 0;
}
