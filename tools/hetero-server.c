/* hetero-server: an OpenAI-compatible HTTP server over hetero's serving
 * engine (hx_engine: continuous batching, chunked prefill, preemption).
 *   hetero-server [-m MODEL.gguf] [--host 127.0.0.1] [--port 8080] ...
 * HTTP through libmicrohttpd (a thread per connection: a streaming
 * response blocks its own thread only), JSON through jansson.  SIGTERM or
 * SIGINT stops accepting, lets the requests in flight finish, and exits 0. */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/server.h"

static void usage(FILE *f)
{
    fputs("usage: hetero-server [options]\n"
          "  -m FILE              GGUF model (default: the embedded synthetic 'tiny' model)\n"
          "  --host ADDR          address to listen on (default 127.0.0.1)\n"
          "  --port N             port (default 8080; 0 = any free port, printed at start)\n"
          "  -a, --alias NAME     the model's name in the API (default: the file's general.name)\n"
          "  --chat-template T    a built-in template name (chatml, llama3, ...) or Jinja source,\n"
          "                       instead of the model's\n"
          "  --chat-template-file F  a Jinja chat template file instead of the model's\n"
          "  --jinja, --no-jinja  render chat templates with the Jinja engine (default), or with the\n"
          "                       built-in family the template is, as llama.cpp's --no-jinja\n"
          "  --api-keys FILE      lines 'KEY NAME [MAX_CONCURRENT [TOKENS_PER_MINUTE [QUEUE]]]':\n"
          "                       requests need 'Authorization: Bearer KEY' (401), limits give 429\n"
          "  -c, --ctx-size N     context per request (default: the model's trained context)\n"
          "  -np, --parallel N    requests decoding at once (default 16)\n"
          "  --kv-tokens N        tokens the KV pool holds, all requests together\n"
          "                       (default: parallel x context, at most 1048576)\n"
          "  -b N                 tokens per engine step, decode and prefill (default 256); smaller\n"
          "                       steps shorten everyone's first-token and inter-token tails under\n"
          "                       load, larger ones read long prompts faster\n"
          "  --shared-prefill N   prompt tokens per step while several API keys are active, so a\n"
          "                       newcomer's first token never waits long (default -b / 32)\n"
          "  --no-prefix-cache    evaluate every prompt whole (default: leading KV blocks an earlier\n"
          "                       prompt evaluated are reused; HX_KV_PREFIX_CACHE=0 also turns it off)\n"
          "  --policy P           fcfs (default), short-first, priority\n"
          "  --max-requests N     completion requests in flight; more get 503 (default 256)\n"
          "  --max-body BYTES     largest request body (default 1048576); larger get 413\n"
          "  --timeout S          idle connection timeout in seconds (default 600)\n"
          "  -t N                 CPU threads (default: one per core)\n"
          "  --devices LIST       devices to use (all, cpu, opencl, fpga, gpu, cuda)\n",
          f);
}

typedef struct {
    const char *model, *host, *alias, *chat_template, *api_keys, *devices, *policy;
    const char *chat_template_file;
    int no_jinja;
    int port, threads, no_prefix_cache;
    uint32_t n_ctx, parallel, kv_tokens, batch, shared_prefill, max_requests, timeout;
    size_t max_body;
} options;

static int parse_args(int argc, char **argv, options *o)
{
    *o = (options){.host = "127.0.0.1", .port = 8080, .parallel = 16, .batch = 256, .max_requests = 256,
                   .max_body = 1 << 20, .timeout = 600, .policy = "fcfs"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define STR(name, field) else if (!strcmp(a, name) && v) { o->field = v; i++; }
#define NUM(name, field) else if (!strcmp(a, name) && v) { o->field = (__typeof__(o->field))strtoul(v, NULL, 10); i++; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        }
        STR("-m", model) STR("--model", model) STR("--host", host) STR("-a", alias) STR("--alias", alias)
        STR("--chat-template", chat_template) STR("--api-keys", api_keys) STR("--devices", devices)
        STR("--policy", policy) NUM("--port", port) NUM("-t", threads) NUM("-c", n_ctx) NUM("--ctx-size", n_ctx)
        NUM("-np", parallel) NUM("--parallel", parallel) NUM("--kv-tokens", kv_tokens) NUM("-b", batch)
        NUM("--shared-prefill", shared_prefill)
        NUM("--max-requests", max_requests) NUM("--max-body", max_body) NUM("--timeout", timeout)
        else if (!strcmp(a, "--no-prefix-cache"))
            o->no_prefix_cache = 1;
        STR("--chat-template-file", chat_template_file)
        else if (!strcmp(a, "--jinja") || !strcmp(a, "--no-jinja"))
            o->no_jinja = a[2] == 'n';
        else {
            fprintf(stderr, "hetero-server: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return -1;
        }
#undef STR
#undef NUM
    }
    if (!o->parallel || !o->batch || o->batch < o->parallel || !o->max_requests) {
        fprintf(stderr, "hetero-server: -np, -b (>= -np) and --max-requests must be positive\n");
        return -1;
    }
    return 0;
}

/* A request's body as it arrives, before routing. */
typedef struct {
    char *body;
    size_t len, cap;
    int too_big;
} upload;

/* Headers larger than this, all together, get our 431 with an error
 * object.  libmicrohttpd holds a request's headers in the connection's
 * memory pool (MHD_OPTION_CONNECTION_MEMORY_LIMIT, set well above): what
 * overflows the pool it refuses itself, before any callback of ours runs,
 * with its own fixed HTML page, also 431 (0.9.75 has no hook to change
 * that answer). */
#define MAX_HEADER_BYTES (64 * 1024)
#define CONNECTION_MEMORY (1024 * 1024)

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    *(size_t *)cls += strlen(key) + (value ? strlen(value) : 0) + 4; /* ": " and CRLF */
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *data, size_t *size, void **con_cls)
{
    srv *S = cls;
    upload *u = *con_cls;
    if (!u) {
        if (!(u = calloc(1, sizeof *u)))
            return MHD_NO;
        *con_cls = u;
        size_t header_bytes = 0;
        MHD_get_connection_values(c, MHD_HEADER_KIND, count_header, &header_bytes);
        if (header_bytes > MAX_HEADER_BYTES)
            return srv_error(c, 431, "invalid_request_error", "request_header_fields_too_large",
                             "The request's headers are %zu bytes; the limit is %d.", header_bytes, MAX_HEADER_BYTES);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > S->max_body)
            return srv_error(c, 413, "invalid_request_error", "request_too_large",
                             "The body is %s bytes; the limit is %zu (--max-body).", cl, S->max_body);
        return MHD_YES;
    }
    if (*size) {
        if (u->len + *size > S->max_body) {
            u->too_big = 1;
        } else {
            if (u->len + *size + 1 > u->cap) {
                size_t cap = (u->len + *size + 1) * 2;
                char *b = realloc(u->body, cap > S->max_body + 1 ? S->max_body + 1 : cap);
                if (!b)
                    return MHD_NO;
                u->body = b;
                u->cap = cap > S->max_body + 1 ? S->max_body + 1 : cap;
            }
            memcpy(u->body + u->len, data, *size);
            u->len += *size;
            u->body[u->len] = '\0';
        }
        *size = 0;
        return MHD_YES;
    }
    if (u->too_big)
        return srv_error(c, 413, "invalid_request_error", "request_too_large",
                         "The body is larger than %zu bytes (--max-body).", S->max_body);
    return srv_route(S, c, method, url, u->body ? u->body : "", u->len);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    upload *u = *con_cls;
    if (u) {
        free(u->body);
        free(u);
        *con_cls = NULL;
    }
}

/* The chat template: --chat-template-file, else --chat-template, else the
 * model's, else ChatML (as llama-server falls back); rendered with the
 * Jinja engine unless --no-jinja (or the template is a built-in family's
 * name).  Checked now on a one-message conversation, so a template that
 * does not parse fails at start. */
static int load_chat_template(srv *S, const options *o)
{
    const char *from = o->chat_template_file ? "--chat-template-file" : o->chat_template ? "--chat-template" : NULL;
    S->chat_template = o->chat_template ? o->chat_template : hx_model_chat_template(S->m);
    if (o->chat_template_file) {
        FILE *f = fopen(o->chat_template_file, "rb");
        char *text = NULL;
        size_t cap = 0;
        FILE *mem = f ? open_memstream(&text, &cap) : NULL;
        char chunk[4096];
        size_t n;
        while (mem && (n = fread(chunk, 1, sizeof chunk, f)) > 0)
            fwrite(chunk, 1, n, mem);
        int bad = !f || !mem || ferror(f);
        if (mem)
            fclose(mem);
        if (f)
            fclose(f);
        if (bad) {
            fprintf(stderr, "hetero-server: --chat-template-file %s: cannot read it\n", o->chat_template_file);
            free(text);
            return -1;
        }
        S->chat_template = S->chat_template_owned = text;
    }
    if (!S->chat_template)
        S->chat_template = "chatml";
    S->jinja = !o->no_jinja && strchr(S->chat_template, '{') != NULL;
    if (S->jinja) {
        hx_chat_render_options ro = hx_chat_render_options_default();
        ro.messages = "[{\"role\": \"user\", \"content\": \"Hi\"}]";
        size_t len;
        hx_status st = hx_model_chat_render(S->m, S->chat_template, &ro, NULL, 0, &len);
        if (st == HX_ERR_FORMAT) {
            fprintf(stderr, "hetero-server: %s%s%s\n", from ? from : "the model's chat template", from ? ": " : ": ",
                    hx_last_error());
            if (from)
                return -1;
            fprintf(stderr, "hetero-server: using the built-in family the template is, as with --no-jinja\n");
            S->jinja = 0;
        }
    }
    const char *family;
    if (!S->jinja && hx_chat_template_name(S->chat_template, &family) != HX_OK) {
        if (from) {
            fprintf(stderr, "hetero-server: %s: %s\n", from, hx_last_error());
            return -1;
        }
        fprintf(stderr, "hetero-server: the model's chat template is not one hetero can apply (%s); chat "
                        "requests will get 400 (--chat-template NAME to choose one)\n", hx_last_error());
    } else if (!S->jinja) {
        S->chat_template = family;
    }
    return 0;
}

static int load(srv *S, const options *o)
{
    hx_runtime_options ro = hx_runtime_options_default();
    ro.devices = o->devices;
    ro.cpu_threads = o->threads;
    char path[4096];
    const char *file = o->model;
    int written = 0;
    if (hx_runtime_open(&S->rt, &ro) != HX_OK) {
        fprintf(stderr, "hetero-server: %s\n", hx_last_error());
        return -1;
    }
    if (!file) {
        if (hx_model_synthetic_cached("tiny", "f16", path, sizeof path, &written) != HX_OK) {
            fprintf(stderr, "hetero-server: the embedded model: %s\n", hx_last_error());
            return -1;
        }
        file = path;
    }
    hx_model_options mo = hx_model_options_default();
    mo.n_ctx = o->n_ctx;
    mo.max_batch = o->batch;
    mo.kv_tokens = o->kv_tokens;
    if (o->no_prefix_cache)
        mo.kv_prefix_cache = -1;
    if (!mo.kv_tokens) {
        /* Room for every parallel request's whole context, as llama-server's
         * -np slots, when the context is known up front. */
        hx_model_options probe = mo;
        hx_model *pm;
        if (hx_model_load(S->rt, file, &probe, &pm) != HX_OK) {
            fprintf(stderr, "hetero-server: %s\n", hx_last_error());
            return -1;
        }
        hx_model_info pi;
        hx_model_info_get(pm, &pi);
        hx_model_free(pm);
        uint64_t want = (uint64_t)pi.n_ctx * o->parallel;
        mo.kv_tokens = want > (1u << 20) ? (1u << 20) : (uint32_t)want;
    }
    if (hx_model_load(S->rt, file, &mo, &S->m) != HX_OK) {
        fprintf(stderr, "hetero-server: %s: %s\n", file, hx_last_error());
        return -1;
    }
    hx_model_info_get(S->m, &S->info);
    hx_engine_options eo = hx_engine_options_default();
    eo.max_running = o->parallel;
    eo.token_budget = o->batch;
    eo.shared_prefill = o->shared_prefill;
    if (!strcmp(o->policy, "short-first"))
        eo.policy = HX_POLICY_SHORT_FIRST;
    else if (!strcmp(o->policy, "priority"))
        eo.policy = HX_POLICY_PRIORITY;
    else if (strcmp(o->policy, "fcfs")) {
        fprintf(stderr, "hetero-server: --policy is fcfs, short-first or priority, not '%s'\n", o->policy);
        return -1;
    }
    if (hx_engine_create(S->m, &eo, &S->e) != HX_OK) {
        fprintf(stderr, "hetero-server: %s\n", hx_last_error());
        return -1;
    }
    S->model_name = o->alias ? o->alias : S->info.name;
    if (load_chat_template(S, o))
        return -1;
    fprintf(stderr, "hetero-server: %s (%s, %u layers), context %u, KV pool %u tokens, %u parallel, chat template %s\n",
            S->model_name, S->info.ftype, S->info.n_layer, S->info.n_ctx, S->info.kv_tokens, o->parallel,
            S->jinja ? "(Jinja)" : S->chat_template);
    return 0;
}

static void unload(srv *S)
{
    free(S->chat_template_owned);
    hx_engine_destroy(S->e);
    if (S->m && hx_model_free(S->m) != HX_OK)
        fprintf(stderr, "hetero-server: %s\n", hx_last_error());
    if (S->rt && hx_runtime_close(S->rt) != HX_OK)
        fprintf(stderr, "hetero-server: %s\n", hx_last_error());
}

int main(int argc, char **argv)
{
    options o;
    if (parse_args(argc, argv, &o))
        return 2;
    /* Signals go to the main thread's sigwait only: block them before any
     * thread starts, so every thread inherits the mask. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    static srv S;
    srv_metrics_init(&S.metrics);
    pthread_mutex_init(&S.tenants.lock, NULL);
    pthread_cond_init(&S.tenants.freed, NULL);
    S.max_body = o.max_body;
    S.max_in_flight = o.max_requests;
    S.started = srv_now();
    char err[512];
    if (o.api_keys && srv_tenants_load(&S.tenants, o.api_keys, err, sizeof err)) {
        fprintf(stderr, "hetero-server: --api-keys %s: %s\n", o.api_keys, err);
        return 1;
    }
    if (load(&S, &o)) {
        unload(&S);
        return 1;
    }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o.port)};
    if (inet_pton(AF_INET, o.host, &addr.sin_addr) != 1) {
        fprintf(stderr, "hetero-server: --host %s is not an IPv4 address\n", o.host);
        unload(&S);
        return 1;
    }
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG, 0, NULL,
        NULL, on_request, &S, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, &S, MHD_OPTION_CONNECTION_LIMIT, (unsigned)(o.max_requests + 64),
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o.timeout, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY,
        MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "hetero-server: cannot listen on %s:%d: %s\n", o.host, o.port, strerror(errno));
        unload(&S);
        return 1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    fprintf(stderr, "hetero-server: listening on http://%s:%u\n", o.host, di ? di->port : (unsigned)o.port);
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "hetero-server: %s: draining\n", strsignal(sig));
    S.draining = 1;
    MHD_socket ls = MHD_quiesce_daemon(d);
    /* In flight: finish; then the daemon stops (its connection threads end). */
    for (;;) {
        pthread_mutex_lock(&S.metrics.lock);
        uint32_t busy = S.metrics.in_flight;
        pthread_mutex_unlock(&S.metrics.lock);
        if (!busy)
            break;
        usleep(20 * 1000);
    }
    MHD_stop_daemon(d);
    if (ls != MHD_INVALID_SOCKET)
        close(ls);
    unload(&S);
    srv_tenants_free(&S.tenants);
    fprintf(stderr, "hetero-server: stopped\n");
    return 0;
}
