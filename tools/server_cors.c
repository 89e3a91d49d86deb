/* CORS as llama-server answers it.  Every answer carries
 * Access-Control-Allow-Origin: with --cors-origins "*" (the default) and
 * credentials allowed (the default), the request's Origin echoed back; with
 * "localhost", the Origin when it is a localhost one; else the configured
 * origin.  A preflight (OPTIONS, any path) is answered 200 with an empty
 * body and the allowed credentials, methods and headers, before any API key
 * is asked for: browsers send no Authorization header on a preflight. */
#include <stdlib.h>
#include <string.h>

#include "tools/server.h"

/* http(s)://localhost, 127.0.0.1 or [::1], with or without a port. */
static int origin_is_localhost(const char *o)
{
    const char *h = strstr(o, "://");
    h = h ? h + 3 : o;
    static const char *const hosts[] = {"localhost", "127.0.0.1", "[::1]"};
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) {
        size_t n = strlen(hosts[i]);
        if (!strncmp(h, hosts[i], n) && (h[n] == '\0' || h[n] == ':' || h[n] == '/'))
            return 1;
    }
    return 0;
}

void srv_cors_headers(const srv *S, struct MHD_Connection *c, struct MHD_Response *r)
{
    const srv_native *N = &S->native;
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (N->cors_credentials && !strcmp(N->cors_origins, "*")) {
        MHD_add_response_header(r, "Access-Control-Allow-Origin", origin ? origin : "");
    } else if (!strcmp(N->cors_origins, "localhost")) {
        if (origin && origin_is_localhost(origin))
            MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
    } else {
        MHD_add_response_header(r, "Access-Control-Allow-Origin", N->cors_origins);
    }
}

enum MHD_Result srv_cors_preflight(srv *S, struct MHD_Connection *c)
{
    const srv_native *N = &S->native;
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    srv_cors_headers(S, c, r);
    MHD_add_response_header(r, "Access-Control-Allow-Credentials", N->cors_credentials ? "true" : "false");
    MHD_add_response_header(r, "Access-Control-Allow-Methods", N->cors_methods);
    MHD_add_response_header(r, "Access-Control-Allow-Headers", N->cors_headers);
    MHD_add_response_header(r, "Content-Type", "text/html");
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    srv_metrics_status(&S->metrics, 200);
    return ret;
}
