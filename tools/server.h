/* hetero-server's parts: the HTTP side (server_http.c), the OpenAI request
 * and response bodies (server_openai.c), streaming (server_stream.c), the
 * tenants (server_tenants.c) and the Prometheus metrics
 * (server_metrics.c).  Everything below sees only hetero.h. */
#ifndef HX_TOOLS_SERVER_H
#define HX_TOOLS_SERVER_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>

#include "hetero.h"

#define SRV_MAX_N 16      /* choices per request (OpenAI's n) */
#define SRV_MAX_STOP 8    /* stop strings per request */

/* One API key's limits (--api-keys). */
typedef struct {
    char key[128], name[64];
    uint32_t max_concurrent;  /* requests in flight (0 = no limit) */
    uint32_t tokens_per_minute; /* prompt and completion tokens (0 = no limit) */
    uint32_t queue;           /* requests beyond max_concurrent that wait for a slot */
    /* under the tenants' lock */
    uint32_t in_flight, queued;
    double window_start;      /* the current minute of the token count */
    uint64_t window_tokens;
} srv_tenant;

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t freed;
    srv_tenant *t;
    size_t n;
} srv_tenants;

/* Histogram buckets, in seconds, as Prometheus exposes them. */
#define SRV_HIST_BUCKETS 14
typedef struct {
    uint64_t count[SRV_HIST_BUCKETS + 1]; /* the last: +Inf */
    double sum;
    uint64_t n;
} srv_hist;

typedef struct {
    pthread_mutex_t lock;
    uint64_t requests[6];     /* by status class: 2xx, 400, 401, 429, 5xx, other */
    uint64_t prompt_tokens, completion_tokens;
    srv_hist ttft, itl, e2e, queue;
    uint32_t in_flight;
} srv_metrics;

typedef struct {
    hx_runtime *rt;
    hx_model *m;
    hx_engine *e;
    hx_model_info info;
    const char *model_name;
    const char *chat_template;  /* the template source or family name, NULL = none */
    char *chat_template_owned;  /* --chat-template-file's text */
    int jinja;                  /* chat_template is rendered by the Jinja engine (else: a built-in family) */
    size_t max_body;
    uint32_t max_in_flight;     /* completion requests at once; more get 503 */
    srv_tenants tenants;        /* n == 0: no API keys asked */
    srv_metrics metrics;
    double started;
    volatile int draining;      /* SIGTERM: new requests get 503 */
} srv;

/* The OpenAI error object, {"error":{"message","type","code"}}, as a
 * response of `status`. */
enum MHD_Result srv_error(struct MHD_Connection *c, unsigned status, const char *type, const char *code,
                          const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* A JSON body (takes the reference to `body`). */
enum MHD_Result srv_json(struct MHD_Connection *c, unsigned status, json_t *body);
/* Routes one complete request. */
enum MHD_Result srv_route(srv *S, struct MHD_Connection *c, const char *method, const char *url,
                          const char *body, size_t len);

/* server_openai.c: /v1/completions and /v1/chat/completions.  The
 * caller took an in-flight slot (and the tenant's); *owned says whether a
 * job took them over, to give back when it ends (srv_job_free). */
enum MHD_Result srv_completion(srv *S, struct MHD_Connection *c, const char *body, size_t len, int chat,
                               srv_tenant *tenant, int *owned);
/* Gives back an in-flight slot and the tenant's, counting its tokens. */
void srv_request_end(srv *S, srv_tenant *t, uint64_t tokens);
/* /tokenize, /detokenize */
enum MHD_Result srv_tokenize(srv *S, struct MHD_Connection *c, const char *body, size_t len, int detokenize);

/* server_tenants.c */
int srv_tenants_load(srv_tenants *T, const char *path, char *err, size_t cap);
void srv_tenants_free(srv_tenants *T);
/* The tenant of an "Authorization: Bearer KEY" header, or NULL. */
srv_tenant *srv_tenant_find(srv_tenants *T, const char *authorization);
/* Takes a slot for a request (waiting in the tenant's queue if it must);
 * 0, or the seconds to put in Retry-After when over a limit. */
unsigned srv_tenant_enter(srv_tenants *T, srv_tenant *t, double now);
void srv_tenant_leave(srv_tenants *T, srv_tenant *t, uint64_t tokens, double now);

/* server_metrics.c */
void srv_metrics_init(srv_metrics *M);
void srv_hist_add(srv_metrics *M, srv_hist *h, double seconds);
void srv_metrics_status(srv_metrics *M, unsigned status);
enum MHD_Result srv_metrics_page(srv *S, struct MHD_Connection *c);

/* server_stream.c: a completion's choices as the engine fills them. */
typedef struct srv_piece {
    int32_t token;
    float logprob;
    uint32_t n_top;
    int32_t top_token[HX_ENGINE_MAX_TOP];
    float top_logprob[HX_ENGINE_MAX_TOP];
    size_t text_at, text_len;  /* its text in the choice's text */
} srv_piece;

typedef struct srv_choice {
    struct srv_job *job;
    uint64_t id;
    int index;
    char *text;
    size_t text_len, text_cap;
    srv_piece *pieces;
    size_t n_pieces, cap_pieces;
    size_t sent_pieces, sent_text; /* streamed so far */
    int ended, reported, sent_role;
    hx_request_result res;
    double t_last;             /* the last token's time, for inter-token latency */
} srv_choice;

typedef struct srv_job {
    srv *S;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int chat, stream, include_usage, logprobs, n;
    uint32_t top_logprobs;
    srv_choice ch[SRV_MAX_N];
    uint32_t prompt_tokens;
    char id[48];
    long created;
    srv_tenant *tenant;
    /* streaming: SSE text formatted and not yet written */
    char *out;
    size_t out_len, out_cap, out_at;
    int done_sent, gone;
    int owns_slot;             /* gives back the in-flight and tenant slots when freed */
    double t_submit;
} srv_job;

srv_job *srv_job_new(srv *S, int chat, int n);
/* Cancels what still runs, waits for the engine to let go, frees. */
void srv_job_free(srv_job *j);
/* The engine's callback (hx_request.on_token, user = the choice). */
int srv_on_token(void *user, const hx_engine_token *t);
/* Blocks until every choice ended, for a whole (not streamed) answer; -1
 * as soon as the client is seen to have closed its connection (the caller
 * cancels). */
#define SRV_CLIENT_CHECK_MS 100
int srv_job_wait_client(srv_job *j, struct MHD_Connection *c);
/* The streamed response: SSE chunks as tokens come, `data: [DONE]` last. */
enum MHD_Result srv_stream_respond(struct MHD_Connection *c, srv_job *j);
/* Chunk/response builders (server_openai.c). */
json_t *srv_choice_json(srv_job *j, srv_choice *ch, size_t from_piece, size_t from_text, int final);
json_t *srv_usage_json(srv_job *j);
const char *srv_finish_str(const srv_choice *ch);

double srv_now(void);

#endif
