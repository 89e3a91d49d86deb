/* hetero-server's parts: the HTTP side (server_http.c), the OpenAI request
 * and response bodies (server_openai.c), streaming (server_stream.c), the
 * tenants (server_tenants.c) and the Prometheus metrics
 * (server_metrics.c).  Everything below sees only hetero.h. */
#ifndef HX_TOOLS_SERVER_H
#define HX_TOOLS_SERVER_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <time.h>

#include "hetero.h"

#define SRV_MAX_N 16      /* choices per request (OpenAI's n) */
#define SRV_MAX_STOP 8    /* stop strings per request */

/* One API key's limits (--api-keys, --api-key-file, --api-key). */
typedef struct {
    char *key, *name;
    size_t key_len, index;
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
    srv_tenant **t;
    size_t n;
} srv_tenants;

/* The connections (server_conn.c): each one's address, socket and phase,
 * so that a client address holds at most max_per_ip of them, the oldest
 * one waiting for a request makes room when there are max_total, and one
 * that has not sent a whole request idle_timeout seconds after it opened
 * (or after its last answer) is closed. */
typedef struct srv_conn srv_conn;
#define SRV_CONN_SLACK 64 /* libmicrohttpd's connection limit is ours plus this */
typedef struct {
    pthread_mutex_t lock;
    srv_conn *head, *tail;    /* oldest first */
    uint32_t n, max_total, max_per_ip;
    double idle_timeout;
    uint64_t refused, evicted, timed_out;
    pthread_t reaper;
    int reaper_started;
    volatile int stop;
} srv_conns;

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
    /* llama-server's counters (server_metrics_llama.c): each request's
     * prompt and generation time and tokens, in all and since the last
     * scrape (the gauges' window), and its longest sequence */
    double prompt_seconds, predict_seconds, win_prompt_seconds, win_predict_seconds;
    uint64_t win_prompt_tokens, win_predict_tokens, n_tokens_max;
} srv_metrics;

struct srv_job;
typedef struct srv_tools srv_tools;

/* What llama-server's own endpoints (/completion, /props, /slots,
 * /apply-template, /models) and its CORS answers need (server_native.c,
 * server_cors.c), set from its command-line flags. */
typedef struct {
    const char *model_path;     /* the GGUF file (/props' model_path) */
    hx_tokenizer *tok;          /* its vocabulary, for /detokenize's special tokens */
    int slots;                  /* GET /slots served (--slots, the default; --no-slots: 501) */
    int props_post;             /* POST /props allowed (--props) */
    uint32_t parallel;          /* -np: the slots /slots and /props count */
    const char *aliases;        /* --alias's comma list, NULL = the model's name */
    const char *tags;           /* --tags' comma list */
    const char *cors_origins;   /* --cors-origins: "*" (default), "localhost" or one origin */
    const char *cors_methods, *cors_headers;
    int cors_credentials;       /* --cors-credentials (default) / --no-cors-credentials */
    int reasoning_off;          /* --reasoning off: templates get enable_thinking false, an opened thought is closed */
    int verbose;                /* --verbose: OpenAI answers carry llama-server's "__verbose" */
    int gpus;                   /* GPUs among the runtime's devices (srv_native_open) */
} srv_native;

/* --sleep-idle-seconds (server_sleep.c). */
typedef struct srv srv_t;
typedef struct {
    pthread_rwlock_t lock;     /* readers: requests using the model; the writer frees or loads it */
    pthread_mutex_t mu;        /* last_active */
    double idle_seconds;       /* 0: never sleeps */
    double last_active;
    volatile int asleep;       /* under lock */
    int (*reload)(srv_t *S);   /* loads the model and engine again: 0, or -1 said on stderr */
    int (*release)(srv_t *S);  /* frees them: 0, or -1 (said on stderr) with them still in place */
    hx_engine_stats engine;    /* the counters when it fell asleep, for /metrics and /machine */
    hx_model_stats model;
    char *scrape;              /* under mu: the last /metrics text awake, */
    size_t scrape_n;
    double scrape_active;      /* last_active when it was rendered, */
    int frozen;                /* and whether it is the state it fell asleep in */
    pthread_t thread;
    int started;
    volatile int stop;
} srv_sleep;

typedef struct srv {
    hx_runtime *rt;
    hx_model *m;
    hx_engine *e;
    hx_model_info info;
    const char *model_name;
    const char *chat_template;  /* the template source or family name, NULL = none */
    char *chat_template_owned;  /* --chat-template-file's text */
    int jinja;                  /* chat_template is rendered by the Jinja engine (else: a built-in family) */
    int template_is_models;     /* it is the model file's own (Jinja): its tool_use variant serves tools */
    size_t max_body;
    uint32_t max_in_flight;     /* completion requests at once; more get 503 */
    srv_tenants tenants;        /* n == 0: no API keys asked */
    srv_metrics metrics;
    srv_conns conns;
    double started;
    /* Defaults of requests that do not say (-n, --temp, --seed). */
    long long n_predict;        /* max_tokens; 0 = OpenAI's (16, chat: the context), -1 = the context */
    double temperature;         /* < 0: OpenAI's 1 */
    long long seed;             /* -1: a fresh one per request */
    int metrics_public;         /* /metrics without a key */
    int metrics_on;             /* /metrics served (--metrics, --metrics-public); else 501, as llama-server's */
    int prefix_shared;          /* the prefix cache is not partitioned by API key */
    int no_webui;               /* --no-webui: / and its files get 404 */
    char secret[40];            /* per process: the tenants' cache salts start with it */
    volatile int draining;      /* a signal: new requests get 503 */
    volatile int stopping;      /* the drain ran out of time: what runs is cancelled */
    pthread_mutex_t jobs_lock;  /* the jobs answering now, to cancel at --drain-timeout */
    struct srv_job *jobs;
    struct {                    /* the -np slots that requests name (id_slot; server_lanes.c) */
        pthread_mutex_t lock;
        pthread_cond_t freed;
        uint8_t *held;          /* [-np]: a request that named the slot holds it */
    } lanes;
    srv_native native;          /* llama-server's own endpoints and CORS (server_native.c, server_cors.c) */
    /* Embeddings (server_embed.c): --embedding (completions refused), the
     * pooling (--pooling, else the file's), the file's head; the model's
     * FIM tokens (server_infill.c) and -b, as infill's n_batch. */
    int embedding_only;
    hx_pooling pooling;
    hx_model_embedding_info embd_info;
    hx_fim_tokens fim;
    uint32_t n_batch;
    srv_sleep sleep;
    int32_t reasoning_budget;   /* --reasoning-budget: requests' default, -1 none */
    int reasoning_format;       /* --reasoning-format: requests' default (SRV_REASONING_*) */
} srv;

/* server_sleep.c: --sleep-idle-seconds.  srv_awake_enter holds the model
 * in place for a handler (wake: loading it first if it sleeps; else the
 * caller reads srv_asleep and the counters in S->sleep); -1 when it could
 * not be loaded again (said on stderr).  Every enter is paired with a
 * leave of the same wake, which then counts as activity. */
int srv_sleep_start(srv *S, double idle_seconds, int (*reload)(srv *), int (*release)(srv *));
void srv_sleep_stop(srv *S);
int srv_awake_enter(srv *S, int wake);
void srv_awake_leave(srv *S, int wake);
int srv_asleep(srv *S);
/* A request ended (its slot given back): activity. */
void srv_sleep_touch(srv *S);
/* /metrics: each awake scrape's text is kept; asleep, a copy of it (1)
 * where no request came after it, else 0 and the caller renders from the
 * counters in S->sleep. */
void srv_sleep_keep_scrape(srv *S, const char *text, size_t n);
int srv_sleep_frozen_metrics(srv *S, char **text, size_t *n);

/* The OpenAI error object, {"error":{"message","type","code"}}, as a
 * response of `status`; a 503 says Retry-After: 1, and while the server
 * drains every answer says Connection: close. */
enum MHD_Result srv_error(struct MHD_Connection *c, unsigned status, const char *type, const char *code,
                          const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* A JSON body (takes the reference to `body`). */
enum MHD_Result srv_json(struct MHD_Connection *c, unsigned status, json_t *body);
/* A JSON body with a Retry-After header (seconds). */
enum MHD_Result srv_json_retry(struct MHD_Connection *c, unsigned status, json_t *body, unsigned retry_after);
json_t *srv_error_object(const char *type, const char *code, const char *message);
/* Routes one complete request. */
enum MHD_Result srv_route(srv *S, struct MHD_Connection *c, const char *method, const char *url,
                          const char *body, size_t len);

/* server_openai.c: /v1/completions and /v1/chat/completions, from the
 * body's checks to the answer. */
enum MHD_Result srv_completion(srv *S, struct MHD_Connection *c, const char *body, size_t len, int chat,
                               srv_tenant *tenant);
/* Takes the tenant's slot (waiting in its queue if it must) for a request
 * of prompt_tokens, then one of the server's --max-requests: 1, or 0 with
 * the refusal (429, 503) queued in *ret. */
int srv_admit(srv *S, struct MHD_Connection *c, srv_tenant *t, uint32_t prompt_tokens, enum MHD_Result *ret);
/* Whether the client closed its connection (server_stream.c). */
int srv_client_gone(struct MHD_Connection *c);
/* Gives back an in-flight slot and the tenant's. */
void srv_request_end(srv *S, srv_tenant *t);
/* server_embed.c: /v1/embeddings (oai 1), /embedding; /rerank. */
enum MHD_Result srv_embeddings(srv *S, struct MHD_Connection *c, const char *body, size_t len, int oai,
                               srv_tenant *tenant);
enum MHD_Result srv_rerank(srv *S, struct MHD_Connection *c, const char *body, size_t len, srv_tenant *tenant);
/* The embeddings' and infill's settings, after the model is loaded:
 * --embedding, --pooling NAME (NULL: the file's; "rank" needs a
 * classifier head), infill's n_batch; -1 with the reason on stderr. */
int srv_embed_setup(srv *S, int embedding_only, const char *pooling, uint32_t n_batch);
/* server_infill.c: /infill, llama-server's fill-in-the-middle prompt
 * (format_infill) answered as a completion. */
enum MHD_Result srv_infill(srv *S, struct MHD_Connection *c, const char *body, size_t len, srv_tenant *tenant);
/* The infill prompt's tokens into *out (malloc'd, *n); 0, or -1 with the
 * message in err. */
int srv_infill_tokens(srv *S, json_t *body, int32_t **out, size_t *n, char *err, size_t cap);

/* /tokenize, /detokenize */
enum MHD_Result srv_tokenize(srv *S, struct MHD_Connection *c, const char *body, size_t len, int detokenize);

/* server_tenants.c: the three sources of keys; 0, or -1 with the reason
 * (the line's number) in err. */
int srv_tenants_load(srv_tenants *T, const char *path, char *err, size_t cap);
int srv_tenants_load_keys(srv_tenants *T, const char *path, char *err, size_t cap);
int srv_tenants_add(srv_tenants *T, const char *key, size_t key_len, const char *name, uint32_t max_concurrent,
                    uint32_t tokens_per_minute, uint32_t queue, char *err, size_t cap);
void srv_tenants_free(srv_tenants *T);
/* The tenant of an "Authorization: Bearer KEY" (or "X-Api-Key: KEY")
 * header, or NULL. */
srv_tenant *srv_tenant_find(srv_tenants *T, const char *authorization, const char *x_api_key);
/* Takes the tenant's slot for a request of prompt_tokens, waiting in the
 * tenant's queue if it must (give_up(arg) != 0 ends the wait: *gave_up).
 * 0, or the seconds to put in Retry-After when over a limit. */
unsigned srv_tenant_enter(srv_tenants *T, srv_tenant *t, uint32_t prompt_tokens, int (*give_up)(void *), void *arg,
                          int *gave_up);
void srv_tenant_leave(srv_tenants *T, srv_tenant *t);
/* One generated token against the tenant's tokens per minute: 1, or 0
 * when the minute's budget is spent (the request stops there). */
int srv_tenant_take_token(srv_tenants *T, srv_tenant *t);

/* server_conn.c: MHD's callbacks and the reaper thread. */
int srv_conns_start(srv_conns *C);
void srv_conns_stop(srv_conns *C);
enum MHD_Result srv_conn_accept(void *cls, const struct sockaddr *addr, socklen_t len);
void srv_conn_notify(void *cls, struct MHD_Connection *c, void **socket_context, enum MHD_ConnectionNotificationCode code);
/* A request's head arrived / its body too (it is being answered) / its
 * answer went. */
void srv_conn_phase(struct MHD_Connection *c, int phase);
enum { SRV_CONN_WAITING, SRV_CONN_READING, SRV_CONN_BUSY };

/* server_listen.c: --host's addresses (one, or a comma list as
 * llama-server's), each a listening socket on one port (--port 0: the
 * port the first got); 0, or -1 said on stderr. */
#define SRV_MAX_LISTEN 8
typedef struct {
    int fd[SRV_MAX_LISTEN];
    char shown[SRV_MAX_LISTEN][72]; /* the address as a URL shows it ("[::1]") */
    size_t n;
    unsigned port;
} srv_listeners;
int srv_listen(const char *hosts, unsigned port, srv_listeners *L);
void srv_listen_close(srv_listeners *L);

/* server_metrics.c */
void srv_metrics_init(srv_metrics *M);
void srv_hist_add(srv_metrics *M, srv_hist *h, double seconds);
void srv_metrics_status(srv_metrics *M, unsigned status);
/* The request this thread answers now is a monitoring read (GET /health,
 * /metrics, /props, /slots, /models, /machine, the page; a preflight). */
void srv_metrics_monitoring_read(int yes);
enum MHD_Result srv_metrics_page(srv *S, struct MHD_Connection *c);
/* server_metrics_llama.c: llama-server's metrics (llamacpp:*): a request's
 * end counted, and the text (malloc'd) of a scrape, which starts the
 * gauges' next window. */
void srv_metrics_llama_end(srv_metrics *M, const hx_request_result *r);
char *srv_metrics_llama_text(srv *S, const hx_engine_stats *es);

/* server_webui.c: the web page's files (GET /, /app.js ...): 1 with the
 * answer queued in *ret, 0 when url is none of them (or --no-webui). */
int srv_webui(srv *S, struct MHD_Connection *c, const char *method, const char *url, enum MHD_Result *ret);
/* server_machine.c: GET /machine, the live counters as JSON. */
enum MHD_Result srv_machine_page(srv *S, struct MHD_Connection *c);

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
    size_t sent_reasoning, sent_content; /* of the thought and the answer, streamed so far (server_thought.c) */
    int ended, reported, sent_role;
    int limited;               /* stopped by the tenant's tokens per minute */
    hx_request_result res;
    double t_last;             /* the last token's time, for inter-token latency */
    /* server_progress.c: the first token's time, the prompt's progress
     * as the engine last said it, when it said so, when evaluation began */
    double t_first, t_progress, t_eval_start;
    hx_engine_progress progress;
} srv_choice;

/* llama-server's reasoning formats (server_thought.c): none leaves a
 * thought in content; auto reads it out where the template writes thought
 * tags; deepseek reads "<think>" where the template writes none;
 * deepseek-legacy reads it out and leaves it in content too. */
enum { SRV_REASONING_NONE, SRV_REASONING_AUTO, SRV_REASONING_DEEPSEEK, SRV_REASONING_LEGACY };
int srv_reasoning_format_from_name(const char *name, int *out); /* 0, or -1 for no such format */
/* How a chat request's answer is split (start NULL: it is not) and what
 * its content begins with. */
typedef struct {
    const char *start, *end; /* the template's thought tags */
    int opened;              /* the prompt opened the thought */
    int legacy;              /* deepseek-legacy: the thought stays in content too */
    char prefix[48];         /* none, deepseek-legacy: what the prompt wrote of the thought, content's start */
} srv_thought;

typedef struct srv_job {
    srv *S;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int chat, stream, include_usage, logprobs, n;
    uint32_t top_logprobs;
    int post_sampling;         /* probabilities after the sampler chain: "prob" and "top_probs" (llama-server's) */
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
    json_t *native;            /* its settings and prompt (server_native.c): /completion's, --verbose's */
    int native_answer;         /* /completion: answered in llama-server's shape (else OpenAI's, with __verbose) */
    int cut;                   /* cancelled at the end of the drain (--drain-timeout) */
    double t_submit;
    struct srv_job *prev, *next; /* srv.jobs */
    srv_tools *tools;          /* the tools offered (server_tools.c), or NULL; owned */
    int timings_per_token, return_progress; /* llama-server's stream fields (server_progress.c) */
    const struct srv_dialect *dialect; /* answered in another API's shape (Anthropic's, Responses'), or NULL */
    void *dialect_state;       /* the dialect's, owned */
    srv_thought thought;       /* its answer's thought, read out as reasoning_content */
    int lane;                  /* the slot its request named (id_slot), given back when freed; -1 none */
} srv_job;

/* The slot an answer says it ran in: a request's first answer the one it
 * named, its others none (llama-server's child tasks take free slots). */
static inline int srv_answer_slot(const srv_job *j, const srv_choice *ch)
{
    return ch->index ? -1 : j->lane;
}

/* llama-server's id_slot (server_lanes.c): requests naming slot k run one
 * after the other.  srv_lane_take waits until k is free and holds it (0),
 * or returns -1 when the server begins to drain; k < 0 takes nothing. */
int srv_lanes_init(srv *S, uint32_t n);
int srv_lane_take(srv *S, int k);
void srv_lane_give(srv *S, int k);

/* Whether the prompt ends by opening a thought (the start tag, then only
 * white space), and where its last start tag is (NULL: none). */
int srv_thought_opens(const char *prompt, const char *start);
const char *srv_thought_last_tag(const char *prompt, const char *start);
/* A chat request's srv_thought: its reasoning_format (else the server's)
 * and tmpl, the template its prompt was rendered with; prompt: the
 * rendered text; continued: it ends inside the thought it continues
 * (hx_continue); grammar: a grammar shapes the answer from its
 * first token.  0, or -1 with the 400's message. */
int srv_thought_setup(srv *S, json_t *body, const char *tmpl, const char *prompt, int continued, int grammar,
                      int stream, srv_thought *out, char *msg, size_t cap);
/* The choice's text split into thought and answer (partial: so far); the
 * whole text the answer when the job reads no thought. */
void srv_thought_split(const srv_job *j, const srv_choice *ch, int partial, hx_reasoning_span *sp);
/* The choice's chat message (whole) or delta (streamed: what is new; NULL
 * when there is nothing to send yet): reasoning_content, content and tool
 * calls (srv_tools_message) read from its answer. */
json_t *srv_thought_message(srv_job *j, srv_choice *ch, int final);
/* The choice's tokens before its answer: the thought, its tags and the
 * white space after it (OpenAI's reasoning_tokens). */
uint32_t srv_thought_tokens(const srv_job *j, const srv_choice *ch);
/* Text as JSON, bytes that are not UTF-8 replaced by U+FFFD. */
json_t *srv_utf8_string(const char *s, size_t n);

/* Another API's answer shape over a chat completion (server_anthropic.c,
 * server_responses.c): the request was turned into a chat body, runs as
 * one, and its answer is told in that API's shape.  Streamed, the chat's
 * chunks (a choice's delta, built by srv_choice_json) become the API's
 * named events; there is no role chunk, usage chunk or [DONE]. */
typedef struct srv_dialect {
    /* The job's state from the chat body (NULL: out of memory). */
    void *(*open)(srv_job *j, json_t *chat_body);
    /* The whole answer from the chat completion's (takes it). */
    json_t *(*whole)(srv_job *j, json_t *chat_answer);
    /* Streamed: the events of one chunk of choice 0 (takes `choice`, the
     * chunk's choice object; NULL at the start, before any token). */
    void (*chunk)(srv_job *j, srv_choice *ch, json_t *choice, int final);
    /* Streamed: the prompt's progress (return_progress; takes `progress`);
     * NULL where the API refuses return_progress. */
    void (*progress)(srv_job *j, srv_choice *ch, json_t *progress);
    /* Streamed: the answer failed (type: OpenAI's error type). */
    void (*error)(srv_job *j, const char *type, const char *message);
    void (*close)(void *state);
} srv_dialect;
extern const srv_dialect srv_anthropic_dialect, srv_responses_dialect;
/* srv_completion's modes beyond OpenAI's (0, 1) and SRV_NATIVE: a chat
 * completion answered as Anthropic's Messages / OpenAI's Responses. */
#define SRV_ANTHROPIC 3
#define SRV_RESPONSES 4
/* POST /v1/messages and /v1/responses, the body turned into a chat
 * completion's (count: /v1/messages/count_tokens and
 * /v1/responses/input_tokens, the prompt's tokens). */
enum MHD_Result srv_anthropic(srv *S, struct MHD_Connection *c, const char *body, size_t len, int count,
                              srv_tenant *tenant);
enum MHD_Result srv_responses(srv *S, struct MHD_Connection *c, const char *body, size_t len, int count,
                              srv_tenant *tenant);
/* Vertex AI's prediction route (server_predict.c), on when the
 * environment says AIP_MODE=PREDICTION: AIP_PREDICT_ROUTE (default
 * /predict) takes {"instances": [...]}, each a request to the route its
 * "@requestFormat" names, answered together as {"predictions": [...]};
 * AIP_HEALTH_ROUTE answers as /health, AIP_HTTP_PORT is the port. */
const char *srv_predict_route(void);   /* NULL unless AIP_MODE=PREDICTION */
const char *srv_predict_health(void);  /* NULL when not set */
enum MHD_Result srv_predict(srv *S, struct MHD_Connection *c, const char *method, const char *body, size_t len);
/* server_dialect.c: what those APIs share.  An API's request as a chat
 * completion's body (count: for counting its tokens), or NULL with the
 * 400's message; srv_dialect_request reads the body, translates it and
 * answers it (mode SRV_ANTHROPIC, SRV_RESPONSES) or counts it. */
typedef json_t *(*srv_to_chat)(json_t *in, int count, char *msg, size_t cap);
enum MHD_Result srv_dialect_request(srv *S, struct MHD_Connection *c, const char *body, size_t len,
                                    srv_to_chat to_chat, int count, int mode, srv_tenant *tenant);
/* The body's fields the translation did not take into out (for the chat
 * path, which takes its own and refuses llama-server's that it does not
 * do), but the `refused` ones, a 400 unless inert (null, false, 0), and
 * the `taken` ones; 0, or -1 with the message. */
int srv_dialect_rest(json_t *in, json_t *out, const char *const *refused, size_t n_refused, const char *const *taken,
                     size_t n_taken, char *msg, size_t cap);
/* The answer's prompt tokens, those of them read from the prefix cache,
 * the generated tokens and those of the thought (reasoning may be NULL). */
void srv_dialect_usage(srv_job *j, json_int_t *prompt, json_int_t *cached, json_int_t *completion,
                       json_int_t *reasoning);
/* One SSE event with an event name ("event: NAME", when not NULL; takes
 * the reference; under the job's lock). */
void srv_stream_named(srv_job *j, const char *event, json_t *v);

/* server_parts.c: a template that reads content as a string only (asked
 * with a probe) gets each message's text parts joined with "\n", as
 * llama.cpp gives them; *messages_json is rewritten.  0, or -1 (out of
 * memory). */
int srv_chat_join_parts(srv *S, const char *tmpl, char **messages_json);
/* server_prefill.c: llama-server's checks of a last assistant message
 * (two at the end refused) and its content parts joined with "\n\n",
 * rewritten in the body; 0, or -1 with the 400's message. */
int srv_chat_prefill(json_t *body, char *msg, size_t cap);
/* continue_final_message (vLLM's, llama-server's): true, "content" or
 * "reasoning_content" continues the last message, which must be the
 * assistant's and make no tool calls, and excludes add_generation_prompt
 * (true by default);
 * false, null or absent leave llama-server's prefill as it is.  0, or -1
 * with the 400's message. */
int srv_chat_continue(json_t *body, int add_generation_prompt, char *msg, size_t cap);
/* What a chat continues, as llama.cpp resolves it: "reasoning_content"
 * the thought, "content" the content; true and llama-server's prefill (a
 * last assistant message without tool calls, continue_final_message not
 * given) the thought where that message has reasoning_content and no
 * content, else the content. */
enum { SRV_CONTINUE_NONE, SRV_CONTINUE_CONTENT, SRV_CONTINUE_THOUGHT };
int srv_chat_continuation(json_t *body);

/* server_batch.c: a batch of prompts in one /completion or
 * /v1/completions request (a "prompt" array with no token id at its top
 * level), each run as a request of its own, answered as llama-server's.
 * srv_batch_size: the prompts of such a body, 0 when it is one prompt.
 * While a thread's srv_captured is set, srv_json keeps the answer there
 * (status and body) instead of queueing it. */
#define SRV_MAX_BATCH 64
typedef struct {
    unsigned status;
    json_t *body;
} srv_capture;
extern _Thread_local srv_capture *srv_captured;
int srv_batch_size(const char *body, size_t len);
enum MHD_Result srv_batch(srv *S, struct MHD_Connection *c, const char *body, size_t len, int mode,
                          srv_tenant *tenant);

/* server_tools.c: function calling (tools, tool_choice, parallel_tool_calls). */
#define SRV_MAX_TOOLS 128      /* functions per request */
#define SRV_MAX_TOOL_CALLS 64  /* calls one answer returns */
/* Checks the request's tools, tool_choice, parallel_tool_calls and the
 * messages' tool fields.  0 with *messages_json (owned; NULL with
 * --no-jinja) the messages as the template reads them, and *out the tools
 * offered (NULL: none, or tool_choice "none"); -1 with the 400's message
 * and code. */
int srv_tools_request(srv *S, json_t *body, srv_tools **out, char **messages_json, char *msg, size_t cap,
                      const char **code);
const char *srv_tools_json(const srv_tools *t);     /* the template's `tools`, or NULL */
const char *srv_tools_grammar(const srv_tools *t);  /* the forcing grammar, or NULL */
const char *srv_tools_template(const srv_tools *t); /* the template to render with, or NULL (the server's) */
void srv_tools_free(srv_tools *t);
/* The choice's message (whole) or delta (streamed: what is new; NULL
 * when there is nothing to send yet), its calls read out of its answer
 * (the text after its thought, srv_thought_split). */
json_t *srv_tools_message(srv_job *j, srv_choice *ch, int final);
/* "tool_calls" when the choice ended on calls, else NULL. */
const char *srv_tools_finish(srv_job *j, srv_choice *ch);

/* Cancels every job still answering (the drain ran out of time). */
void srv_jobs_cancel_all(srv *S);

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
/* One SSE event appended to the job's output (takes the reference; under
 * the job's lock), and an OpenAI chunk around `choices` (server_stream.c). */
void srv_stream_event(srv_job *j, json_t *v);
json_t *srv_stream_chunk(srv_job *j, json_t *choices);
/* server_probs.c: n_probs in /completion's shape: the entries of pieces
 * [from, to) ("completion_probabilities"), and a streamed event of one
 * token (its piece, the text [from_text, to_text)). */
json_t *srv_native_probs(srv_job *j, srv_choice *ch, size_t from, size_t to);
json_t *srv_native_token_event(srv_job *j, srv_choice *ch, size_t piece, size_t from_text, size_t to_text);
/* server_progress.c: a choice's timings as they stand (the engine's once
 * it ended), and the engine's prompt progress callback (user = the
 * choice), which queues return_progress's events. */
json_t *srv_timings_json(srv_job *j, srv_choice *ch);
void srv_on_progress(void *user, const hx_engine_progress *p);
/* Chunk/response builders (server_openai.c). */
json_t *srv_choice_json(srv_job *j, srv_choice *ch, size_t from_piece, size_t from_text, int final);
json_t *srv_usage_json(srv_job *j);
const char *srv_finish_str(const srv_choice *ch);

double srv_now(void);
/* CLOCK_REALTIME ms from now: a deadline for pthread_cond_timedwait. */
struct timespec srv_after_ms(long ms);

/* server_native.c: llama-server's own endpoints.  srv_completion's mode
 * SRV_NATIVE is /completion (a prompt, llama-server's answer shape). */
#define SRV_NATIVE 2
void srv_native_defaults(srv_native *N);
int srv_native_open(srv *S);   /* after the model loads: 0, or -1 said on stderr */
void srv_native_close(srv *S);
/* -ngl N (N > 0, all, auto) after the runtime opened: 0, or -1 said on
 * stderr for a partial offload hetero cannot do. */
int srv_native_check_ngl(srv *S, const char *ngl);
/* llama-server's backend sampling (--backend-sampling, a request's
 * backend_sampling: true) asks that the logits be sampled on the device
 * that computed them.  hetero samples on the host: that holds on a
 * machine without a GPU, and is refused with one.  0, or -1 with why. */
int srv_native_backend_sampling(const srv *S, char *why, size_t cap);
/* --alias a,b,c: the model's id, the first in alphabetical order (static). */
const char *srv_native_first_alias(const char *list);
/* The request's settings as llama-server's generation_settings, kept in
 * the job for the final answer. */
json_t *srv_native_settings(srv *S, const hx_request *r, int stream, const char *prompt);
/* Keeps in the job what /completion's answer shows: the settings, the
 * prompt, and the body's return_tokens and response_fields. */
void srv_native_keep(srv *S, srv_job *j, json_t *body, const hx_request *r, int stream);
/* /completion's whole answer, and its stream events (final: the last). */
json_t *srv_native_final(srv_job *j);
json_t *srv_native_chunk(srv_job *j, srv_choice *ch, size_t from_piece, size_t from_text, int final);
enum MHD_Result srv_props(srv *S, struct MHD_Connection *c, int post, const char *body, size_t len);
enum MHD_Result srv_slots(srv *S, struct MHD_Connection *c);
enum MHD_Result srv_apply_template(srv *S, struct MHD_Connection *c, const char *body, size_t len);
enum MHD_Result srv_models(srv *S, struct MHD_Connection *c);
enum MHD_Result srv_detokenize(srv *S, struct MHD_Connection *c, const char *body, size_t len);
/* /chat/completions/input_tokens: the prompt tokens a chat body would take. */
enum MHD_Result srv_input_tokens(srv *S, struct MHD_Connection *c, const char *body, size_t len);

/* server_cors.c: llama-server's CORS headers on every answer, and its
 * answer to a preflight (OPTIONS, before any key is asked for). */
void srv_cors_headers(const srv *S, struct MHD_Connection *c, struct MHD_Response *r);
enum MHD_Result srv_cors_preflight(srv *S, struct MHD_Connection *c);
/* The chat's messages (and tools) through the template, as a chat
 * completion would format them (server_openai.c): the prompt, malloc'd,
 * or NULL with the 400's message in err. */
char *srv_chat_prompt(srv *S, json_t *body, char *err, size_t cap);
/* What a Jinja chat template gets beside the messages, as llama-server
 * gives it: enable_thinking (--reasoning), datetime and date_string
 * (today), the body's chat_template_kwargs and its reasoning_effort ("none":
 * enable_thinking false): a JSON object, malloc'd, or NULL with the 400's
 * message in err. */
char *srv_chat_extra(srv *S, json_t *body, int *thinking, char *err, size_t cap);
/* With thinking off, a prompt that ends by opening a thought (the start
 * tag of template tmpl, else "<think>", then a newline or not) gets it
 * closed, as llama-server does. */
void srv_chat_close_thought(char **prompt, int thinking, const char *tmpl);
/* /completion's sampling defaults are llama-server's (top_k 40, top_p
 * 0.95, min_p 0.05, temperature 0.8 unless --temp): set in the body
 * where it does not say, before its checks. */
void srv_native_fill_defaults(srv *S, json_t *body);
/* /completion's prompt forms beyond a string or ids: {"prompt_string"}
 * (multimodal_data refused), and ids and strings mixed in one sequence;
 * rewritten in the body as a string or ids.  0, or -1 with the 400's
 * message in err. */
int srv_native_prompt(srv *S, json_t *body, char *err, size_t cap);
/* /tokenize's with_pieces: a token's text, special tokens spelled, or
 * its bytes when they are not whole UTF-8 (llama-server's). */
json_t *srv_piece_json(srv *S, int32_t id);
/* The engine request of a /completion body that sets nothing (/props'
 * default_generation_settings): 0, or -1. */
int srv_default_request(srv *S, hx_request *r);
/* What a request's sampler fields own beyond the JSON body
 * (server_sampling.c): its logit biases, DRY breakers, sampler order. */
typedef struct {
    hx_logit_bias *bias;
    uint32_t n_bias;
    char **breakers;
    uint32_t n_breakers;
    char samplers[32];
} srv_sampling_store;
/* llama-server's sampler fields beyond OpenAI's into *s (logit_bias,
 * min_tokens, typical_p, mirostat*, dry_*, xtc_*, top_n_sigma, dynatemp_*,
 * samplers, min_keep); -1 with msg and code (a 400) for the first bad one. */
int srv_parse_sampling_extra(srv *S, json_t *o, hx_sampling *s, srv_sampling_store *st, char *msg, size_t cap,
                             const char **code);
void srv_sampling_store_free(srv_sampling_store *st);
/* -1 with msg and code (a 400) when a field hetero-server does not do is
 * given a value that would change the answer (docs/server-fields.md);
 * native: /completion, whose answers take return_tokens and response_fields;
 * chat: a chat completion, whose answers take reasoning_format. */
int srv_refused_field(json_t *o, int native, int chat, char *msg, size_t cap, const char **code);

#endif
