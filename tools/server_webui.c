/* hetero-server's web page: chat, and the machine at work beside it.  Its
 * files (tools/webui/) are embedded at build time (tools/embed-webui.sh),
 * so nothing is fetched at run time.  The page is public, as
 * llama-server's; everything it calls (/v1/chat/completions, /machine)
 * needs the API key when the server has keys.  --no-webui turns it off. */
#include <string.h>

#include "tools/server.h"

struct srv_webui_file {
    const char *path, *type;
    const unsigned char *data;
    size_t len;
};
extern const struct srv_webui_file srv_webui_files[];

/* The page runs only its own script and style, talks only to this server,
 * and may not be framed (clickjacking) nor post forms elsewhere. */
static const char csp[] = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                          "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

int srv_webui(srv *S, struct MHD_Connection *c, const char *method, const char *url, enum MHD_Result *ret)
{
    if (S->no_webui)
        return 0;
    if (!strcmp(url, "/index.html"))
        url = "/";
    const struct srv_webui_file *f = srv_webui_files;
    while (f->path && strcmp(f->path, url))
        f++;
    if (!f->path)
        return 0;
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
        *ret = srv_error(c, 405, "invalid_request_error", "method_not_allowed", "%s takes GET, not %s.", url, method);
        return 1;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(f->len, (void *)f->data, MHD_RESPMEM_PERSISTENT);
    if (!r) {
        *ret = MHD_NO;
        return 1;
    }
    MHD_add_response_header(r, "Content-Type", f->type);
    MHD_add_response_header(r, "Content-Security-Policy", csp);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    /* A new binary may carry a new page: the browser asks again each time. */
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    if (S->draining)
        MHD_add_response_header(r, "Connection", "close");
    *ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    srv_metrics_status(&S->metrics, 200);
    return 1;
}
