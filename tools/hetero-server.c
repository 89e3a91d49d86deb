/* hetero-server: an OpenAI-compatible HTTP server over hetero's serving
 * engine (hx_engine: continuous batching, chunked prefill, preemption).
 *   hetero-server [-m MODEL.gguf] [--host 127.0.0.1] [--port 8080] ...
 * HTTP through libmicrohttpd (a thread per connection: a streaming
 * response blocks its own thread only), JSON through jansson.  SIGTERM,
 * SIGINT or SIGHUP stops taking work (new requests get 503), lets the
 * requests in flight finish for up to --drain-timeout seconds, cancels
 * what is left and exits 0; a second signal exits at once. */
#include <arpa/inet.h>
#include <errno.h>
#include <malloc.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tools/cli_dist.h"
#include "tools/cli_file.h"
#include "tools/cli_num.h"
#include "tools/server.h"

#define PROG "hetero-server"

static void usage(FILE *f)
{
    fputs("usage: hetero-server [options]\n"
          "  -m FILE              GGUF model (default: the embedded synthetic 'tiny' model)\n"
          "  --host ADDR          address or host name to listen on (default 127.0.0.1); a comma list\n"
          "                       (127.0.0.1,::1) listens on each, on one port\n"
          "  --port N             port, 0-65535 (default 8080; 0 = any free port, printed at start); the\n"
          "                       port is taken before the model loads\n"
          "  -a, --alias NAME     the model's name in the API (default: the file's general.name)\n"
          "  --chat-template T    a built-in template name (chatml, llama3, ...) or Jinja source,\n"
          "                       instead of the model's\n"
          "  --chat-template-file F  a Jinja chat template file instead of the model's\n"
          "  --jinja, --no-jinja  render chat templates with the Jinja engine (default), or with the\n"
          "                       built-in family the template is, as llama.cpp's --no-jinja\n"
          "API keys (any of the three; together they make one list; /health needs none):\n"
          "  --api-key KEY[,KEY]  a key, as llama-server's (repeatable)\n"
          "  --api-key-file FILE  one key a line; lines starting with '#' are comments\n"
          "  --api-keys FILE      lines 'KEY NAME [MAX_CONCURRENT [TOKENS_PER_MINUTE [QUEUE]]]', '#' to the\n"
          "                       end of a line a comment: a tenant's limits give 429 with Retry-After;\n"
          "                       tokens per minute count the prompt at admission and each token as it\n"
          "                       is generated (the answer stops at the limit, finish_reason 'length')\n"
          "                       Requests need 'Authorization: Bearer KEY' (or 'X-Api-Key: KEY'): 401\n"
          "  --metrics-public     /metrics (implies --metrics) and /machine answer without a key\n"
          "                       (default: they need one when keys are set)\n"
          "  --no-webui           no web page at / (default: chat and the machine at work, GET /machine)\n"
          "  --webui              the web page at / (the default)\n"
           CLI_DIST_USAGE
          "  --metrics            serve /metrics (Prometheus: hetero's and llama-server's llamacpp:*); without\n"
          "                       it (or --metrics-public) /metrics answers 501, as llama-server's\n"
          "Model and engine:\n"
          "  -c, --ctx-size N     context per request (default: the model's trained context); with -np,\n"
          "                       as llama-server's: the KV pool holds N tokens and each of the -np\n"
          "                       requests' context is N / -np (-kvu, --kv-unified: each may fill N);\n"
          "                       with --kv-tokens, N is per request again\n"
          "  -np, --parallel N    requests decoding at once (default 16)\n"
          "  --kv-tokens N        tokens the KV pool holds, all requests together\n"
          "                       (default: parallel x context, at most 1048576)\n"
          "  -cram, --cache-ram N MiB more of KV pool for the prefix cache, as llama-server's prompt\n"
          "                       cache in host memory: finished requests' prefixes stay there until no\n"
          "                       block is free (default 8192, within half the memory the weights leave;\n"
          "                       0: none; with --kv-tokens, none unless given); mapped as it fills\n"
          "  --kv-type T          KV cache type: f16 (default), q8_0, q4_0, f32\n"
          "  -ctk, --cache-type-k T / -ctv, --cache-type-v T\n"
          "                       llama-server's: hetero's K and V caches share one type, so both must\n"
          "                       name the same one (or give --kv-type)\n"
          "  -b, --batch-size N   tokens per engine step, decode and prefill (default 256); smaller\n"
          "                       steps shorten everyone's first-token and inter-token tails under\n"
          "                       load, larger ones read long prompts faster\n"
          "  --shared-prefill N   prompt tokens per step while several API keys are active, so a\n"
          "                       newcomer's first token never waits long (default -b / 32)\n"
          "  --no-prefix-cache    evaluate every prompt whole (default: leading KV blocks an earlier\n"
          "                       prompt evaluated are reused; HX_KV_PREFIX_CACHE=0 also turns it off)\n"
          "  --prefix-cache-shared  one prefix cache for all API keys (default: each key finds only\n"
          "                       the blocks of its own prompts, so no key learns another's prompts\n"
          "                       from cached_tokens or timing; a request's 'cache_salt' narrows it)\n"
          "  --policy P           fcfs (default), short-first, priority\n"
          "  --embedding, --embeddings  serve embeddings only: completions are refused (embeddings,\n"
          "                       /v1/embeddings and /embedding, are served in any case)\n"
          "  --pooling P          none, mean, cls, last, rank (default: the file's pooling_type)\n"
          "  --reranking, --rerank  --embedding with rank pooling: /v1/rerank (needs a classifier head)\n"
          "  -t, --threads N      CPU threads (default: one per core)\n"
          "  --devices LIST       devices to use (all, cpu, opencl, fpga, gpu, cuda)\n"
          "  -ngl, --n-gpu-layers N  llama-server's: 0 keeps every layer on the CPU (--devices cpu);\n"
          "                       all, auto, -1 or at least the model's layers: hetero places them on\n"
          "                       every device (with no GPU, said at start: all on the CPU); a number\n"
          "                       between is refused (hetero does not split by layer count)\n"
          "  -bs, --backend-sampling  llama-server's: the logits sampled on the device that computes them;\n"
          "                       hetero samples on the host, so taken without a GPU, refused with one\n"
          "llama-server's endpoints and flags:\n"
          "  --slots, --no-slots  GET /slots shows the running requests (default), or answers 501\n"
          "  --props              POST /props is allowed (it changes nothing; GET /props always answers)\n"
          "  -v, --verbose        OpenAI answers carry llama-server's \"__verbose\": the prompt as the model\n"
          "                       read it, the settings, the timings\n"
          "  --tags LIST          the model's tags in /models\n"
          "  --reasoning on|off|auto  off: templates get enable_thinking false, and a prompt that opens a\n"
          "                       thought (<think>) has it closed; on and auto: the template's default\n"
          "  --reasoning-format F  auto (default): a thought between the template's tags (<think>...) is\n"
          "                       the answer's reasoning_content; deepseek: <think> where the template\n"
          "                       writes no tags; deepseek-legacy: in content too; none: left in content\n"
          "  --no-ui, --no-webui  no web page at /\n"
          "  --cors-origins O     '*' (default: with credentials, the request's Origin is echoed),\n"
          "                       'localhost' (only localhost origins), or one origin\n"
          "  --cors-methods M, --cors-headers H  preflight answers (default 'GET, POST, DELETE, OPTIONS', '*')\n"
          "  --cors-credentials, --no-cors-credentials  Access-Control-Allow-Credentials (default true)\n"
          "  --offline, -cb, --cont-batching  accepted: hetero-server downloads nothing and always\n"
          "                       batches continuously\n"
          "  --cache-idle-slots, --no-cache-idle-slots  accepted: a finished request's KV is neither\n"
          "                       copied nor cleared; it stays cached and is evicted first\n"
          "Request defaults (a request's own field wins):\n"
          "  -n, --n-predict N    max_tokens (default: OpenAI's, 16 for completions and the context\n"
          "                       for chat; -1 = the context)\n"
          "  --temp X             temperature, 0-2 (default 1)\n"
          "  -s, --seed N         seed (default -1: a fresh one per request)\n"
          "Connections and limits:\n"
          "  --max-requests N     completion requests in flight; more get 503 (default 256); requests\n"
          "                       waiting in an API key's queue do not count\n"
          "  --max-body BYTES     largest request body (default 1048576); larger get 413\n"
          "  --max-connections N  connections open at once (default 4096; a thread each); past it a\n"
          "                       new one closes the oldest still waiting for its request after 1 s\n"
          "  --max-connections-per-ip N  connections from one client address (default 256)\n"
          "  --idle-timeout S     seconds a connection has to send a whole request (head and body)\n"
          "                       after it opened or after its last answer (default 10)\n"
          "  --timeout S          seconds without any byte moving on a connection being answered, as a\n"
          "                       client that stops reading (default 600)\n"
          "  --drain-timeout S    on SIGTERM/SIGINT/SIGHUP, seconds the requests in flight have to\n"
          "                       finish before they are cancelled (default 30)\n"
          "  --reasoning-budget N  a thought (<think>) ends after N tokens (0: at once), its end tag forced;\n"
          "                       -1 none (default); a request's reasoning_budget_tokens overrides it\n"
          "  --sleep-idle-seconds N  after N seconds with nothing to answer, free the model and its KV\n"
          "                       pool until a request needs them (loaded again first); -1 never (default)\n",
          f);
}

typedef struct {
    const char *model, *host, *alias, *chat_template, *api_keys, *api_key_file, *devices, *policy, *kv_type;
    const char *ctk, *ctv;
    const char *keys[64];       /* --api-key values */
    int n_keys, port, threads, no_prefix_cache, prefix_shared, metrics_public, no_webui, metrics;
    long long cache_ram_mib; /* --cache-ram: the prefix cache's room beyond the requests' (MiB) */
    int cache_ram_given;
    uint32_t n_ctx, parallel, kv_tokens, batch, shared_prefill, max_requests, timeout, idle_timeout, drain_timeout;
    long long sleep_idle; /* --sleep-idle-seconds, -1: never */
    long long reasoning_budget; /* --reasoning-budget, -1: none */
    int reasoning_format;       /* --reasoning-format (SRV_REASONING_*) */
    uint32_t max_connections, max_per_ip;
    long long n_predict, seed;
    double temperature;
    const char *chat_template_file;
    int no_jinja;
    size_t max_body;
    srv_native native;          /* llama-server's endpoints and CORS: --slots, --props, --cors-*, --tags ... */
    const char *ngl;            /* -ngl: "0" = the CPU only; else every layer where hetero places it */
    int backend_sampling;       /* -bs: the logits sampled where they are computed (srv_native_backend_sampling) */
    int np_given, kv_unified;   /* -np given; --kv-unified: each request may fill -c (see load) */
    int embedding, reranking;   /* --embedding, --reranking */
    const char *pooling;        /* --pooling */
    int batch_given;            /* -b was given (infill's n_batch) */
    cli_dist dist; /* --split, --mpi-timeout: a pipeline under mpirun (docs/mpi.md) */
} options;

/* llama-server's options with no honest meaning here: refused by name,
 * with what to use instead. */
static const struct {
    const char *names, *instead;
} refused_opts[] = {
    {"-fa --flash-attn", "hetero's attention needs no switch"},
    {"-nocb --no-cont-batching", "the engine always batches continuously"},
    {"--mlock --no-mmap --numa", "hetero maps the weights itself"},
    {"--lora --lora-scaled --control-vector", "hetero does not apply adapters"},
    {"--ssl-key-file --ssl-cert-file", "put a TLS proxy in front of hetero-server"},
    {"-sp --special --slot-save-path --path --api-prefix", "not served"},
    {"--threads-http", "one thread per connection (--max-connections bounds them)"},
    {"-to", "--timeout S (the same meaning, the long name)"},
    {"--cache-reuse", "the prefix cache is automatic (--no-prefix-cache turns it off)"},
    {"--top-k --top-p --min-p --repeat-penalty --repeat-last-n --presence-penalty --frequency-penalty "
     "--typical --mirostat --dynatemp-range --grammar --grammar-file --json-schema -j",
     "give it per request, in the body"},
    {"-ub --ubatch-size", "-b sets the step's tokens"},
    {"-dev --device -sm --split-mode -ts --tensor-split -mg --main-gpu", "--devices LIST"},
    {"--context-shift", "the engine does not shift a full context: the answer ends there ('length')"},
    {"-hf -hfr --hf-repo -hff --hf-file -mu --model-url", "-m FILE (hetero-server downloads nothing)"},
    {"-ctxcp --ctx-checkpoints --swa-full", "not supported"},
};

static const char *instead_of(const char *a)
{
    size_t n = strlen(a);
    for (size_t i = 0; i < sizeof refused_opts / sizeof refused_opts[0]; i++)
        for (const char *p = refused_opts[i].names; (p = strstr(p, a)); p += n)
            if ((p == refused_opts[i].names || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
                return refused_opts[i].instead;
    return NULL;
}

static int kv_type_ok(const char *t)
{
    return !strcmp(t, "f16") || !strcmp(t, "q8_0") || !strcmp(t, "q4_0") || !strcmp(t, "f32");
}

static int parse_args(int argc, char **argv, options *o)
{
    *o = (options){.host = "127.0.0.1", .port = 8080, .parallel = 16, .batch = 256, .max_requests = 256,
                   .max_body = 1 << 20, .timeout = 600, .idle_timeout = 10, .drain_timeout = 30, .sleep_idle = -1, .reasoning_budget = -1,
                   .reasoning_format = SRV_REASONING_AUTO,
                   .max_connections = 4096, .max_per_ip = 256, .policy = "fcfs", .seed = -1, .temperature = -1,
                   .cache_ram_mib = 8192};
    srv_native_defaults(&o->native);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long n;
        uint64_t u;
        char dashed[64]; /* --a_b is --a-b, as llama-server reads its long options */
        if (!strncmp(a, "--", 2) && strchr(a, '_') && strlen(a) < sizeof dashed) {
            for (size_t k = 0; (dashed[k] = a[k] == '_' ? '-' : a[k]); k++)
                ;
            a = dashed;
        }
#define IS(name) (!strcmp(a, name))
#define TAKE(name) (IS(name) && v && ++i)
#define U32(field, lo, hi)                                                                                     \
    do {                                                                                                       \
        if (cli_long(PROG, a, v, lo, hi, &n))                                                                  \
            return -1;                                                                                         \
        o->field = (uint32_t)n;                                                                                \
    } while (0)
        if (IS("-h") || IS("--help")) {
            usage(stdout);
            exit(0);
        } else if (TAKE("-m") || TAKE("--model")) o->model = v;
        else if (TAKE("--host")) o->host = v;
        else if (TAKE("-a") || TAKE("--alias")) o->alias = v;
        else if (TAKE("--chat-template")) o->chat_template = v;
        else if (TAKE("--api-keys")) o->api_keys = v;
        else if (TAKE("--api-key-file")) o->api_key_file = v;
        else if (TAKE("--api-key")) {
            if (o->n_keys == (int)(sizeof o->keys / sizeof o->keys[0])) {
                fprintf(stderr, PROG ": --api-key: at most %zu of them (--api-key-file takes any number)\n",
                        sizeof o->keys / sizeof o->keys[0]);
                return -1;
            }
            o->keys[o->n_keys++] = v;
        } else if (TAKE("--devices")) o->devices = v;
        else if (TAKE("--policy")) o->policy = v;
        else if (TAKE("--kv-type")) o->kv_type = v;
        else if (TAKE("-ctk") || TAKE("--cache-type-k")) o->ctk = v;
        else if (TAKE("-ctv") || TAKE("--cache-type-v")) o->ctv = v;
        else if (TAKE("--port")) {
            if (cli_long(PROG, a, v, 0, 65535, &n))
                return -1;
            o->port = (int)n;
        } else if (TAKE("-t") || TAKE("--threads")) {
            if (cli_long(PROG, a, v, 0, 4096, &n))
                return -1;
            o->threads = (int)n;
        } else if (TAKE("-c") || TAKE("--ctx-size")) U32(n_ctx, 0, 1 << 24);
        else if (TAKE("-np") || TAKE("--parallel")) {
            U32(parallel, 1, 65536);
            o->np_given = 1;
        }
        else if (TAKE("--kv-tokens")) U32(kv_tokens, 0, 1u << 30);
        else if (TAKE("-cram") || TAKE("--cache-ram")) {
            if (cli_long(PROG, a, v, -1, 1ll << 30, &n))
                return -1;
            if (n < 0) {
                fprintf(stderr, PROG ": %s -1 (no limit) is llama-server's; hetero's prefix cache is room in the "
                        "KV pool, reserved when the model loads: give it in MiB (0 for none)\n", a);
                return -1;
            }
            o->cache_ram_mib = n;
            o->cache_ram_given = 1;
        }
        else if (TAKE("-b") || TAKE("--batch-size")) {
            U32(batch, 1, 1 << 20);
            o->batch_given = 1;
        }
        else if (TAKE("--shared-prefill")) U32(shared_prefill, 0, 1 << 20);
        else if (TAKE("--max-requests")) U32(max_requests, 1, 1000000);
        else if (TAKE("--timeout")) U32(timeout, 1, 86400);
        else if (TAKE("--idle-timeout")) U32(idle_timeout, 1, 3600);
        else if (TAKE("--drain-timeout")) U32(drain_timeout, 0, 86400);
        else if (TAKE("--reasoning-budget")) {
            if (cli_long(PROG, a, v, -1, INT32_MAX, &n))
                return -1;
            o->reasoning_budget = n;
        } else if (TAKE("--sleep-idle-seconds")) {
            if (cli_long(PROG, a, v, -1, 1ll << 31, &n))
                return -1;
            if (!n) {
                fprintf(stderr, PROG ": --sleep-idle-seconds is -1 (never) or a number of seconds, not 0\n");
                return -1;
            }
            o->sleep_idle = n;
        }
        else if (TAKE("--max-connections")) U32(max_connections, 1, 100000);
        else if (TAKE("--max-connections-per-ip")) U32(max_per_ip, 1, 100000);
        else if (TAKE("--max-body")) {
            if (cli_u64(PROG, a, v, 1ull << 31, &u))
                return -1;
            if (!u) {
                fprintf(stderr, PROG ": --max-body takes a whole number from 1 to %llu, not '%s'\n", 1ull << 31, v);
                return -1;
            }
            o->max_body = (size_t)u;
        } else if (TAKE("-n") || TAKE("--n-predict") || TAKE("--predict")) {
            if (cli_long(PROG, a, v, -1, UINT32_MAX, &o->n_predict))
                return -1;
            if (!o->n_predict) {
                fprintf(stderr, PROG ": %s takes -1 (the context) or a whole number from 1 to %u, not '0'\n", a,
                        UINT32_MAX);
                return -1;
            }
        } else if (TAKE("--temp") || TAKE("--temperature")) {
            if (cli_double(PROG, a, v, 0, 2, &o->temperature))
                return -1;
        } else if (TAKE("-s") || TAKE("--seed")) {
            if (cli_long(PROG, a, v, -1, INT64_MAX, &o->seed))
                return -1;
        } else if (TAKE("--chat-template-file")) o->chat_template_file = v;
        else if (IS("--jinja") || IS("--no-jinja")) o->no_jinja = a[2] == 'n';
        else if (IS("--embedding") || IS("--embeddings")) o->embedding = 1;
        else if (IS("--reranking") || IS("--rerank")) o->embedding = o->reranking = 1;
        else if (TAKE("--pooling")) o->pooling = v;
        else if (IS("--no-prefix-cache")) o->no_prefix_cache = 1;
        else if (IS("--prefix-cache-shared")) o->prefix_shared = 1;
        else if (IS("--metrics-public")) o->metrics_public = 1;
        else if (IS("--webui") || IS("--no-webui")) o->no_webui = a[2] == 'n';
        else if (IS("--split") || IS("--mpi-timeout") || IS("--tensor-parallel") || IS("--tp")) {
            if (cli_dist_option(PROG, a, v, &i, &o->dist) < 0)
                return -1;
        }
        else if (IS("--metrics")) o->metrics = 1;
        else if (IS("--offline") || IS("-cb") || IS("--cont-batching") || IS("--cache-idle-slots") ||
                 IS("--no-cache-idle-slots")) {
            /* llama-server's, true here already: hetero-server downloads
             * nothing and always batches continuously.  The idle-slot
             * pair chooses whether an idle slot's KV is copied to the RAM
             * cache and cleared, to make room, or kept in place, to save
             * the copy; a finished request's blocks here stay where they
             * are and hold no room a running request needs (they are
             * evicted first), which is what each asks for. */
        } else if (IS("-kvu") || IS("--kv-unified")) o->kv_unified = 1;
        else if (IS("--slots") || IS("--no-slots")) o->native.slots = a[2] == 's';
        else if (IS("--props")) o->native.props_post = 1;
        else if (IS("--no-ui") || IS("--ui")) o->no_webui = a[2] == 'n';
        else if (IS("-v") || IS("--verbose")) o->native.verbose = 1;
        else if (TAKE("--tags")) o->native.tags = v;
        else if (TAKE("--reasoning") || TAKE("-rea")) {
            if (strcmp(v, "on") && strcmp(v, "off") && strcmp(v, "auto")) {
                fprintf(stderr, PROG ": %s takes on, off or auto, not '%s'\n", a, v);
                return -1;
            }
            o->native.reasoning_off = !strcmp(v, "off");
        } else if (TAKE("--reasoning-format")) {
            if (srv_reasoning_format_from_name(v, &o->reasoning_format)) {
                fprintf(stderr, PROG ": --reasoning-format takes none, auto, deepseek or deepseek-legacy, not '%s'\n",
                        v);
                return -1;
            }
        }
        else if (TAKE("--cors-origins")) o->native.cors_origins = v;
        else if (TAKE("--cors-methods")) o->native.cors_methods = v;
        else if (TAKE("--cors-headers")) o->native.cors_headers = v;
        else if (IS("--cors-credentials") || IS("--no-cors-credentials")) o->native.cors_credentials = a[2] == 'c';
        else if (IS("-bs") || IS("--backend-sampling")) o->backend_sampling = 1;
        else if (TAKE("-ngl") || TAKE("--gpu-layers") || TAKE("--n-gpu-layers")) {
            if (strcmp(v, "all") && strcmp(v, "auto") && cli_long(PROG, a, v, -1, 1 << 20, &n))
                return -1;
            o->ngl = v;
        } else if (instead_of(a)) {
            fprintf(stderr, PROG ": %s is llama-server's; hetero-server does not take it: %s\n", a, instead_of(a));
            return -1;
        } else {
            fprintf(stderr, PROG ": unknown or incomplete option '%s' (--help lists them)\n", a);
            return -1;
        }
#undef IS
#undef TAKE
#undef U32
    }
    if (o->batch < o->parallel) {
        fprintf(stderr, PROG ": -b (%u) must be at least -np (%u)\n", o->batch, o->parallel);
        return -1;
    }
    /* llama-server's K and V types: hetero has one type for both. */
    if (o->ctk || o->ctv) {
        const char *k = o->ctk ? o->ctk : "f16", *vt = o->ctv ? o->ctv : "f16";
        if (strcmp(k, vt)) {
            fprintf(stderr, PROG ": -ctk %s with -ctv %s: hetero's K and V caches share one type; give both the "
                    "same (-ctk %s -ctv %s) or --kv-type %s\n", k, vt, k, k, k);
            return -1;
        }
        if (o->kv_type && strcmp(o->kv_type, k)) {
            fprintf(stderr, PROG ": --kv-type %s and -ctk/-ctv %s disagree\n", o->kv_type, k);
            return -1;
        }
        o->kv_type = k;
    }
    if (o->kv_type && !kv_type_ok(o->kv_type)) {
        fprintf(stderr, PROG ": KV cache type '%s': hetero has f16, q8_0, q4_0 and f32\n", o->kv_type);
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

typedef struct {
    size_t bytes;
    int content_length, transfer_encoding;
} head_count;

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    head_count *h = cls;
    (void)kind;
    h->bytes += strlen(key) + (value ? strlen(value) : 0) + 4; /* ": " and CRLF */
    h->content_length += !strcasecmp(key, "Content-Length");
    h->transfer_encoding += !strcasecmp(key, "Transfer-Encoding");
    return MHD_YES;
}

/* The request head's framing, which libmicrohttpd 0.9.75 takes loosely:
 * it reads the first of two Content-Length headers, and waits for the
 * end of the connection when Transfer-Encoding is not "chunked" (1.0
 * refuses both).  Answered here, as llama-server does, before any body
 * is read; NULL when the head is fine. */
static const char *bad_framing(struct MHD_Connection *c, const head_count *h, unsigned *status)
{
    const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Transfer-Encoding");
    *status = 400;
    if (h->content_length > 1)
        return "The request has more than one Content-Length header.";
    if (h->transfer_encoding > 1)
        return "The request has more than one Transfer-Encoding header.";
    if (te && strcasecmp(te, "chunked")) {
        *status = 501;
        return "Transfer-Encoding: only 'chunked' is supported.";
    }
    if (te && h->content_length)
        return "The request has both Transfer-Encoding and Content-Length.";
    return NULL;
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
        srv_conn_phase(c, SRV_CONN_READING);
        head_count h = {0, 0, 0};
        MHD_get_connection_values(c, MHD_HEADER_KIND, count_header, &h);
        unsigned status = 0;
        const char *why = bad_framing(c, &h, &status);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (h.bytes > MAX_HEADER_BYTES || why || (cl && strtoull(cl, NULL, 10) > S->max_body))
            srv_conn_phase(c, SRV_CONN_BUSY); /* answered now: no longer a request to wait for */
        if (h.bytes > MAX_HEADER_BYTES)
            return srv_error(c, 431, "invalid_request_error", "request_header_fields_too_large",
                             "The request's headers are %zu bytes; the limit is %d.", h.bytes, MAX_HEADER_BYTES);
        if (why)
            return srv_error(c, status, "invalid_request_error", status == 501 ? "not_implemented" : "bad_request",
                             "%s", why);
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
    srv_conn_phase(c, SRV_CONN_BUSY);
    if (u->too_big)
        return srv_error(c, 413, "invalid_request_error", "request_too_large",
                         "The body is larger than %zu bytes (--max-body).", S->max_body);
    return srv_route(S, c, method, url, u->body ? u->body : "", u->len);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)toe;
    srv_conn_phase(c, SRV_CONN_WAITING); /* its next request's time starts */
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
        char *text = cli_read_file(PROG, "--chat-template-file", o->chat_template_file, NULL);
        if (!text)
            return -1;
        S->chat_template = S->chat_template_owned = text;
    } else if (!o->chat_template && S->chat_template) { /* kept: the model may be freed while asleep */
        S->chat_template = S->chat_template_owned = strdup(S->chat_template);
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
    S->template_is_models = !from && !o->chat_template && S->jinja && hx_model_chat_template(S->m);
    return 0;
}

/* What loads the model and its engine, kept for loading them again after
 * a sleep (--sleep-idle-seconds). */
static struct {
    char file[4096];
    hx_model_options mo;
    hx_engine_options eo;
} loaded;

static int open_model(srv *S)
{
    if (hx_model_load(S->rt, loaded.file, &loaded.mo, &S->m) != HX_OK) {
        fprintf(stderr, "hetero-server: %s: %s\n", loaded.file, hx_last_error());
        return -1;
    }
    return 0;
}

static int open_engine(srv *S)
{
    if (hx_engine_create(S->m, &loaded.eo, &S->e) != HX_OK) {
        fprintf(stderr, "hetero-server: %s\n", hx_last_error());
        return -1;
    }
    return 0;
}

static int release(srv *S)
{
    hx_engine_destroy(S->e);
    S->e = NULL;
    if (hx_model_free(S->m) != HX_OK) { /* left loaded: it serves on, with a new engine */
        fprintf(stderr, "hetero-server: the model stays loaded: %s\n", hx_last_error());
        if (open_engine(S)) {
            fprintf(stderr, "hetero-server: no engine to serve with: exiting\n");
            _exit(1);
        }
        return -1;
    }
    S->m = NULL;
    return 0;
}

static int reload(srv *S)
{
    if (open_model(S))
        return -1;
    if (open_engine(S)) {
        hx_model_free(S->m);
        S->m = NULL;
        return -1;
    }
    return 0;
}

static int load(srv *S, const options *o)
{
    hx_runtime_options ro = hx_runtime_options_default();
    ro.devices = o->devices;
    if (o->ngl && !strcmp(o->ngl, "0")) {
        if (o->devices && strcmp(o->devices, "cpu")) {
            fprintf(stderr, PROG ": -ngl 0 (every layer on the CPU) and --devices %s disagree\n", o->devices);
            return -1;
        }
        ro.devices = "cpu";
    }
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
    mo.kv_type = o->kv_type;
    if (o->no_prefix_cache)
        mo.kv_prefix_cache = -1;
    /* llama-server's --cache-ram (8192 MiB by default): its prompt cache
     * in host memory beside the slots.  Here it is more blocks in the KV
     * pool, which finished requests' prefixes keep until no block is
     * free.  An explicit --kv-tokens sizes the whole pool unless
     * --cache-ram is given too. */
    if (!o->no_prefix_cache && (o->cache_ram_given || !o->kv_tokens))
        mo.kv_prefix_bytes = (uint64_t)o->cache_ram_mib << 20;
    /* llama-server's -c with -np: the context of all the slots together,
     * each request's a share of it; with --kv-unified each request may
     * fill the whole of it.  Either way the KV pool holds -c tokens. */
    if (o->n_ctx && !o->kv_tokens && (o->np_given || o->kv_unified)) {
        mo.kv_tokens = o->n_ctx;
        if (!o->kv_unified)
            mo.n_ctx = o->n_ctx / o->parallel;
        if (!mo.n_ctx) {
            fprintf(stderr, PROG ": -c %u shared by -np %u requests leaves none a token (--kv-unified lets each "
                    "fill the whole context)\n", o->n_ctx, o->parallel);
            return -1;
        }
    }
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
    snprintf(loaded.file, sizeof loaded.file, "%s", file);
    loaded.mo = mo;
    if (open_model(S))
        return -1;
    if (cli_dist_start(PROG, S->m, HX_OK)) /* under mpirun: the other ranks load their layers */
        return -1;
    hx_model_info_get(S->m, &S->info);
    if (o->ngl && strcmp(o->ngl, "0") && srv_native_check_ngl(S, o->ngl))
        return -1;
    S->native.model_path = loaded.file;
    if (srv_native_open(S))
        return -1;
    char why[160];
    if (o->backend_sampling && srv_native_backend_sampling(S, why, sizeof why)) {
        fprintf(stderr, PROG ": --backend-sampling: %s\n", why);
        return -1;
    }
    if (o->backend_sampling)
        fprintf(stderr, PROG ": --backend-sampling: the logits are computed on the CPU, where hetero samples them\n");
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
    loaded.eo = eo;
    if (open_engine(S))
        return -1;
    S->model_name = o->alias ? srv_native_first_alias(o->alias) : S->info.name;
    S->native.aliases = o->alias;
    if (load_chat_template(S, o) || srv_embed_setup(S, o->embedding, o->reranking ? "rank" : o->pooling,
                                                    o->batch_given ? o->batch : 2048))
        return -1;
    const uint64_t prefix_bytes = (uint64_t)S->info.kv_prefix_tokens * S->info.kv_bytes_per_token;
    fprintf(stderr, "hetero-server: %s (%s, %u layers), context %u, KV pool %u tokens (%u of them the prefix "
            "cache's, %llu MiB), %u parallel, chat template %s\n",
            S->model_name, S->info.ftype, S->info.n_layer, S->info.n_ctx, S->info.kv_tokens, S->info.kv_prefix_tokens,
            (unsigned long long)((prefix_bytes + (1u << 19)) >> 20), o->parallel,
            S->jinja ? "(Jinja)" : S->chat_template);
    return 0;
}

static void unload(srv *S)
{
    free(S->chat_template_owned);
    srv_native_close(S);
    hx_engine_destroy(S->e);
    if (S->m && hx_model_free(S->m) != HX_OK)
        fprintf(stderr, "hetero-server: %s\n", hx_last_error());
    if (S->rt && hx_runtime_close(S->rt) != HX_OK)
        fprintf(stderr, "hetero-server: %s\n", hx_last_error());
}

/* After the drain's deadline: a stop that hangs anyway ends the process. */
static void *watchdog(void *arg)
{
    sleep(*(unsigned *)arg);
    fprintf(stderr, PROG ": did not stop in time; exiting\n");
    _exit(1);
}

static uint32_t in_flight(srv *S)
{
    pthread_mutex_lock(&S->metrics.lock);
    uint32_t n = S->metrics.in_flight;
    pthread_mutex_unlock(&S->metrics.lock);
    return n;
}

/* Waits until nothing is in flight or `until`; a signal meanwhile ends
 * the process at once. */
static void drain_until(srv *S, const sigset_t *sigs, double until)
{
    while (in_flight(S) && srv_now() < until) {
        struct timespec ts = {0, 50 * 1000000L};
        int sig = sigtimedwait(sigs, NULL, &ts);
        if (sig > 0) {
            fprintf(stderr, PROG ": %s again: exiting now\n", strsignal(sig));
            _exit(1);
        }
    }
}

int main(int argc, char **argv)
{
    options o;
    if (parse_args(argc, argv, &o))
        return CLI_EXIT_USAGE;
    /* Signals go to the main thread's sigwait only: block them before any
     * thread starts, so every thread inherits the mask.  SIGHUP is a
     * request to stop like the others (no terminal to lose here). */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* Under mpirun the other ranks run their layers of rank 0's steps; a
     * signal stops rank 0, which ends them (their signals stay blocked). */
    if (cli_dist_init(PROG, &argc, &argv, &o.dist))
        return 1;
    if (o.dist.info.rank > 0) {
        hx_runtime_options ro = hx_runtime_options_default();
        ro.devices = o.devices;
        ro.cpu_threads = o.threads;
        hx_runtime *rt = NULL;
        if (hx_runtime_open(&rt, &ro))
            fprintf(stderr, PROG ": %s\n", hx_last_error());
        return cli_dist_worker(PROG, rt);
    }
    /* Every request holds vocabulary-sized buffers (its sampler's) from
     * submission to its end, allocated in its connection's thread.  With
     * glibc's sliding mmap threshold they soon come from that thread's
     * malloc arena, which keeps the pages when they are freed: storms of
     * cancelled streams left hundreds of MB resident.  A fixed threshold
     * gives such blocks back to the system when freed. */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);

    static srv S;
    srv_metrics_init(&S.metrics);
    pthread_mutex_init(&S.tenants.lock, NULL);
    pthread_cond_init(&S.tenants.freed, NULL);
    pthread_mutex_init(&S.jobs_lock, NULL);
    pthread_rwlock_init(&S.sleep.lock, NULL);
    pthread_mutex_init(&S.sleep.mu, NULL);
    S.max_body = o.max_body;
    S.native = o.native;
    S.native.parallel = o.parallel;
    if (srv_lanes_init(&S, o.parallel)) {
        fprintf(stderr, PROG ": out of memory\n");
        return 1;
    }
    S.max_in_flight = o.max_requests;
    S.started = srv_now();
    S.n_predict = o.n_predict;
    S.reasoning_budget = (int32_t)o.reasoning_budget;
    S.reasoning_format = o.reasoning_format;
    S.temperature = o.temperature;
    S.seed = o.seed;
    S.metrics_public = o.metrics_public;
    S.metrics_on = o.metrics || o.metrics_public;
    S.no_webui = o.no_webui;
    S.prefix_shared = o.prefix_shared;
    S.conns.max_total = o.max_connections;
    S.conns.max_per_ip = o.max_per_ip;
    S.conns.idle_timeout = o.idle_timeout;
    /* The tenants' cache salts begin with a secret of this process: no
     * client can name another key's partition. */
    unsigned char rnd[16];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        fprintf(stderr, PROG ": getrandom: %s\n", strerror(errno));
        return 1;
    }
    for (int i = 0; i < 16; i++)
        snprintf(S.secret + 2 * i, 3, "%02x", rnd[i]);
    char err[512];
    if (o.api_keys && srv_tenants_load(&S.tenants, o.api_keys, err, sizeof err)) {
        fprintf(stderr, PROG ": --api-keys %s: %s\n", o.api_keys, err);
        return 1;
    }
    if (o.api_key_file && srv_tenants_load_keys(&S.tenants, o.api_key_file, err, sizeof err)) {
        fprintf(stderr, PROG ": --api-key-file %s: %s\n", o.api_key_file, err);
        return 1;
    }
    for (int i = 0; i < o.n_keys; i++) {
        /* A comma list, as llama-server's; empty items are skipped. */
        for (const char *k = o.keys[i]; *k;) {
            size_t n = strcspn(k, ",");
            char name[32];
            snprintf(name, sizeof name, "key%zu", S.tenants.n + 1);
            if (n && srv_tenants_add(&S.tenants, k, n, name, 0, 0, 0, err, sizeof err)) {
                fprintf(stderr, PROG ": --api-key: %s\n", err);
                return 1;
            }
            k += n + (k[n] == ',');
        }
    }
    if (o.n_keys && !S.tenants.n) {
        fprintf(stderr, PROG ": --api-key: no key given\n");
        return 1;
    }
    /* A connection is a descriptor: the soft limit goes up to the hard
     * one, and --max-connections down to what that allows. */
    struct rlimit rl;
    if (!getrlimit(RLIMIT_NOFILE, &rl)) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
        const rlim_t room = rl.rlim_cur > 256 + SRV_CONN_SLACK ? rl.rlim_cur - 256 - SRV_CONN_SLACK : 16;
        if (rl.rlim_cur != RLIM_INFINITY && S.conns.max_total > room) {
            fprintf(stderr, PROG ": --max-connections %u is more than the descriptor limit allows (%llu open "
                    "files): %llu\n", S.conns.max_total, (unsigned long long)rl.rlim_cur, (unsigned long long)room);
            S.conns.max_total = (uint32_t)room;
        }
    }
    /* Vertex AI names the port in its environment (server_predict.c). */
    const char *aip_port = srv_predict_route() ? getenv("AIP_HTTP_PORT") : NULL;
    long long aip_n;
    if (aip_port && *aip_port) {
        if (cli_long(PROG, "AIP_HTTP_PORT", aip_port, 0, 65535, &aip_n))
            return 1;
        if (aip_n != o.port)
            fprintf(stderr, PROG ": AIP_MODE=PREDICTION: port %lld from AIP_HTTP_PORT, not %d\n", aip_n, o.port);
        o.port = (int)aip_n;
    }
    if (srv_predict_route())
        fprintf(stderr, PROG ": AIP_MODE=PREDICTION: predictions on POST %s\n", srv_predict_route());
    srv_listeners L; /* server_listen.c: --host may list several addresses */
    if (srv_listen(o.host, (unsigned)o.port, &L))
        return 1;
    if (load(&S, &o)) {
        unload(&S);
        return 1;
    }
    hx_dist_info di;
    if (o.sleep_idle > 0 && !hx_dist_info_get(&di) && di.size > 1) {
        fprintf(stderr, PROG ": --sleep-idle-seconds is not supported under mpirun (the other ranks hold their "
                "layers)\n");
        unload(&S);
        return 1;
    }
    if (srv_conns_start(&S.conns) || srv_sleep_start(&S, (double)o.sleep_idle, reload, release)) {
        fprintf(stderr, PROG ": cannot start a thread\n");
        return 1;
    }
    /* libmicrohttpd's own limit sits above ours: ours decides (and makes
     * room), the slack covers connections closing meanwhile.  poll(), not
     * select(): descriptors past 1,024 are refused by select's sets. */
    struct MHD_Daemon *d[SRV_MAX_LISTEN] = {NULL};
    for (size_t i = 0; i < L.n; i++) {
        d[i] = MHD_start_daemon(
            MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG, 0,
            srv_conn_accept, &S.conns, on_request, &S, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)L.fd[i],
            MHD_OPTION_NOTIFY_COMPLETED, on_completed, &S, MHD_OPTION_NOTIFY_CONNECTION, srv_conn_notify, &S.conns,
            MHD_OPTION_CONNECTION_LIMIT, (unsigned)(S.conns.max_total + SRV_CONN_SLACK),
            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o.timeout, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
            (size_t)CONNECTION_MEMORY, MHD_OPTION_END);
        if (!d[i]) {
            fprintf(stderr, PROG ": cannot serve on %s:%u: %s\n", L.shown[i], L.port, strerror(errno));
            for (size_t k = 0; k < i; k++)
                MHD_stop_daemon(d[k]); /* a daemon closes its own socket */
            for (size_t k = i; k < L.n; k++)
                close(L.fd[k]);
            unload(&S);
            return 1;
        }
    }
    for (size_t i = 0; i < L.n; i++)
        fprintf(stderr, PROG ": listening on http://%s:%u\n", L.shown[i], L.port);
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, PROG ": %s: draining (new requests get 503; up to %u s; a second signal exits now)\n",
            strsignal(sig), o.drain_timeout);
    S.draining = 1;
    drain_until(&S, &sigs, srv_now() + o.drain_timeout);
    unsigned grace = 10;
    pthread_t wd;
    pthread_create(&wd, NULL, watchdog, &grace);
    if (in_flight(&S)) {
        fprintf(stderr, PROG ": --drain-timeout %u s: cancelling %u requests still in flight\n", o.drain_timeout,
                in_flight(&S));
        S.stopping = 1;
        srv_jobs_cancel_all(&S);
        drain_until(&S, &sigs, srv_now() + 2);
    }
    /* Connections still open (a client that reads nothing, idle ones) are
     * shut down here. */
    for (size_t i = 0; i < L.n; i++)
        MHD_stop_daemon(d[i]);
    srv_conns_stop(&S.conns);
    srv_sleep_stop(&S);
    unload(&S);
    hx_dist_finalize();
    srv_tenants_free(&S.tenants);
    fprintf(stderr, PROG ": stopped\n");
    return 0;
}
