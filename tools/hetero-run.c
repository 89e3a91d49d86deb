/* hetero-run: text in, text out, with llama-cli's options.
 *   hetero-run [-m MODEL.gguf] [-p PROMPT | -f FILE | --tokens 1,2,3] [-n N] [-c N] [-cnv] ...
 * Without -m it runs the embedded synthetic model (written once to the
 * cache directory).  The conversation mode lives in run_chat.c, prompts'
 * tokens and the context check in run_prompt.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hetero.h"
#include "tools/cli_file.h"
#include "tools/cli_num.h"
#include "tools/cli_samplers.h"
#include "tools/run.h"

static void usage(FILE *f)
{
    fputs("usage: hetero-run [options]\n"
          "  -m FILE            GGUF model (default: the embedded synthetic 'tiny' model)\n"
          "  --synthetic P[:T]  embedded model preset P (tiny, small, qwen3-tiny, mixtral-tiny,\n"
          "                     qwen3moe-tiny, gemma3-tiny) in type T (default tiny:f16)\n"
          "  -p TEXT            prompt (default \"Once upon a time\"); special tokens such as <|im_start|>\n"
          "                     in it are tokens, as in llama-cli\n"
          "  -f FILE            read the prompt from FILE\n"
          "  --no-special       read special tokens in the prompt as plain text\n"
          "  --no-bos           add no BOS/EOS even where the model asks for them\n"
          "  -cnv, --conversation, --chat\n"
          "                     conversation: -p is the first user turn, then a turn per line of\n"
          "                     standard input, formatted with the model's chat template\n"
          "  -sys, --system-prompt TEXT   the conversation's system prompt\n"
          "  --chat-template T  a built-in template name (chatml, llama3, ...) or Jinja source, instead of\n"
          "                     the model's\n"
          "  --chat-template-file F  a Jinja chat template file instead of the model's\n"
          "  --jinja, --no-jinja  render chat templates with the Jinja engine (default), or with the\n"
          "                     built-in family the template is, as llama.cpp's --no-jinja\n"
          "  -no-cnv, --no-conversation   one prompt, no conversation (the default)\n"
          "  -n N               tokens to generate (default 64, in a conversation -1; -1 = until an\n"
          "                     end-of-generation token or the end of the context)\n"
          "  -c, --ctx-size N   context in tokens (default: the model's trained context, lowered\n"
          "                     if its KV cache would not fit in memory)\n"
          "  --stop TEXT        stop before TEXT (repeatable)\n"
          "  -r, --reverse-prompt TEXT  as --stop: the reply ends before TEXT (in -cnv the user's\n"
          "                     turn follows); llama-cli prints TEXT, hetero-run does not\n"
          "  --ignore-eos       end-of-generation tokens are never sampled (runs to -n)\n"
          "  --verbose-prompt   print the prompt's tokens (id -> 'piece') before generating\n"
          "  --no-perf          no timing lines (after the text, and after each -cnv turn)\n"
          "  --tokens LIST      evaluate these token ids (comma separated) instead of a prompt\n"
          "  --logits FILE      write the logits of every evaluated position (float32 LE [n][n_vocab])\n"
          "  -t, --threads N    CPU threads (default: one per core)\n"
          "  -tb, --threads-batch N  the same count (hetero uses one thread count for the prompt\n"
          "                     and the generation); a different count than -t is refused\n"
          "  -ngl, --n-gpu-layers N  0: the CPU only (--devices cpu); N > 0: the GPU devices too,\n"
          "                     where there are any (layers are placed by --partition, not counted)\n"
          "  --mlock            keep the mapped model in memory (mlockall); --no-mmap is refused:\n"
          "                     the model file is always mapped\n"
          "  -b N               largest batch per evaluation (default 512)\n"
          CLI_DIST_USAGE
          "  --devices LIST     devices to use (all, cpu, opencl, fpga, gpu, cuda)\n"
          "  --sched P          scheduling policy: static (default), eager, ws, dmda, plan, ngl\n"
          "  --partition S      partition strategy: affinity, layers, auto, colocated\n"
          "  --plan             print where each task of a layer goes and why, then exit\n"
          "  --stats            print each device's tasks, busy time and failures at the end\n"
          "                     (and, with experts, the tokens routed to each, per layer)\n"
          "  --trace FILE       write a Chrome trace-event JSON of the run (ui.perfetto.dev)\n"
          "  --inject SPEC      slow or fail devices, e.g. \"kind=fpga,slow=3\" (see hetero.h)\n"
          "  --kv-type T        KV cache type: f16 (default), q8_0, q4_0, f32\n"
          "  --moe-routing R    the router the placement planner expects: uniform, zipf:S,\n"
          "                     measured (default: its own tallies) or a tally FILE\n"
          "  --moe-tally FILE   at the end, write the router's tallies (experts chosen, per\n"
          "                     layer) to FILE, for --moe-routing FILE in a later run\n"
          "  --grammar GBNF     the text follows this grammar (llama.cpp's GBNF, rule 'root';\n"
          "                     docs/grammars.md); --grammar-file F reads it from a file\n"
          "  -j, --json-schema S   the text is JSON that the JSON Schema S accepts\n"
          "  -ctk, --cache-type-k T  the K cache's type alone (default: --kv-type)\n"
          "  -ctv, --cache-type-v T  the V cache's type alone (default: --kv-type)\n"
          "  --context-shift    when the context fills, drop old tokens and go on (llama.cpp's)\n"
          "  --keep N           tokens a context shift keeps at the start (default 0)\n"
          "  --shift-step N     tokens a context shift drops (default: half of the rest); with\n"
          "                     --keep 4, a small step keeps attention sinks and a recent window\n"
          "sampling (llama-cli's options and defaults):\n"
          "  --temp X           temperature, 0 to 1e6 (default 0.8; 0 = greedy)\n"
          "  --top-k N          0 to 2147483647 (default 40; 0 = off)\n"
          "  --top-p X          1e-6 to 1 (default 0.95; 1 = off)\n"
          "  --min-p X          0 to 1 (default 0.05; 0 = off)\n"
          "  --repeat-penalty X 1e-6 to 1e6 (default 1.0 = off)\n"
          "  --repeat-last-n N  0 to 1048576 (default 64; 0 = off)\n"
          "  --frequency-penalty X, --presence-penalty X   -2 to 2 (default 0 = off)\n"
          "  --seed N           0 to 18446744073709551615 (default 0: the same text every run; -1: a\n"
          "                     random seed, printed)\n"
          "  --logit-bias ID+B  add B to token ID's logit (ID-B subtracts; ID-inf bans it); repeatable\n"
          "  --min-tokens N     no end of generation before N tokens (default 0)\n"
          "  --typical X        locally typical sampling, 0 to 1 (default 1.0 = off)\n"
          "  --top-nsigma X     keep logits within X standard deviations of the best (default -1 = off)\n"
          "  --xtc-probability X  0 to 1 (default 0 = off); --xtc-threshold X  0 to 1 (default 0.1)\n"
          "  --dynatemp-range X   0 to 1e6 (default 0 = off); --dynatemp-exp X  0 to 1e6 (default 1)\n"
          "  --dry-multiplier X   0 to 1e6 (default 0 = off); --dry-base X  1 to 1e6 (default 1.75)\n"
          "  --dry-allowed-length N  (default 2); --dry-penalty-last-n N  -1 (the context) to 1048576\n"
          "                     (default 64; 0 = off)\n"
          "  --dry-sequence-breaker S  a DRY breaker (repeatable; replaces the defaults \\n : \" *;\n"
          "                     'none': no breaker)\n"
          "  --mirostat N       0 (off), 1 or 2; --mirostat-lr X  eta (default 0.1);\n"
          "                     --mirostat-ent X  tau (default 5.0)\n"
          "  --min-keep N       top-p, min-p, typical and XTC keep at least N tokens (default 0)\n"
          "  --samplers LIST    the chain's order: names separated by ';' (default\n"
          "                     penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature)\n"
          "  --sampling-seq S   the same as letters (default edskypmxt)\n",
          f);
}

static int parse_tokens(const char *s, int32_t **out, size_t *n)
{
    size_t cap = 16;
    *n = 0;
    *out = malloc(cap * sizeof **out);
    while (*out && *s) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno || v < 0 || v > INT32_MAX)
            return -1;
        if (*n == cap && !(*out = realloc(*out, (cap *= 2) * sizeof **out)))
            return -1;
        (*out)[(*n)++] = (int32_t)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    return *out && *n ? 0 : -1;
}

/* The embedded model, written once to hetero's cache. */
static int synthetic_path(const char *preset, const char *type, char *path, size_t cap)
{
    int written;
    if (hx_model_synthetic_cached(preset, type, path, cap, &written) != HX_OK) {
        fprintf(stderr, "hetero-run: %s\n", hx_last_error());
        return -1;
    }
    if (written)
        fprintf(stderr, "hetero-run: wrote the embedded '%s' model (%s) to %s\n", preset, type, path);
    return 0;
}

/* Peak and current resident memory, split into anonymous memory (what
 * hetero allocated) and file pages (the mapped model), from /proc. */
static void print_memory(const char *model)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return;
    char line[256];
    long hwm = -1, anon = -1, file = -1;
    while (fgets(line, sizeof line, f)) {
        sscanf(line, "VmHWM: %ld", &hwm);
        sscanf(line, "RssAnon: %ld", &anon);
        sscanf(line, "RssFile: %ld", &file);
    }
    fclose(f);
    struct stat st;
    double size = stat(model, &st) == 0 ? st.st_size / 1048576.0 : 0;
    fprintf(stderr, "hetero-run: memory: peak RSS %.1f MiB (now %.1f MiB allocated + %.1f MiB of mapped files); "
                    "model file %.1f MiB\n",
            hwm / 1024.0, anon / 1024.0, file / 1024.0, size);
}

static int print_piece(void *user, int32_t token, const char *piece)
{
    fputs(piece, stdout);
    fflush(stdout);
    return run_interrupted();
}

/* The grammar the text must follow (--grammar, --grammar-file, or -j's
 * JSON Schema turned into one), in *owned when allocated; -1 after saying
 * why. */
static int load_grammar(run_args *a, char **owned)
{
    *owned = NULL;
    if (!!a->grammar + !!a->grammar_file + !!a->json_schema > 1) {
        fprintf(stderr, "hetero-run: give one of --grammar, --grammar-file and -j\n");
        return -1;
    }
    size_t len = 0;
    if (a->grammar_file && !(*owned = cli_read_file("hetero-run", "--grammar-file", a->grammar_file, &len)))
        return -1;
    if (a->json_schema) {
        hx_status st = hx_json_schema_to_grammar(a->json_schema, NULL, 0, &len);
        if (st == HX_ERR_RANGE && (*owned = malloc(len + 1)))
            st = hx_json_schema_to_grammar(a->json_schema, *owned, len + 1, &len);
        if (st) {
            fprintf(stderr, "hetero-run: -j: %s\n", hx_last_error());
            free(*owned);
            *owned = NULL;
            return -1;
        }
    }
    a->sampling.grammar = *owned ? *owned : a->grammar;
    return 0;
}


static int add_stop(run_args *a, const char *v)
{
    const char **s = realloc(a->stop, (a->n_stop + 1) * sizeof *s);
    if (!s)
        return -1;
    s[a->n_stop++] = v;
    a->stop = s;
    return 0;
}

#define P "hetero-run"

/* -ngl: llama.cpp's layer count offloaded to a GPU, mapped onto the
 * device set: 0 is the CPU alone; more is the GPU devices too, where any
 * is present (how many layers go there is --partition's choice). */
static int map_gpu_layers(run_args *a)
{
    if (a->n_gpu_layers < 0)
        return 0;
    if (a->devices) {
        fprintf(stderr, P ": -ngl and --devices both choose the devices: give one of them\n");
        return -1;
    }
    if (a->n_gpu_layers == 0) {
        a->devices = "cpu";
        fprintf(stderr, P ": -ngl 0: running on the CPU only (--devices cpu)\n");
        return 0;
    }
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = "cpu,gpu";
    hx_runtime *rt;
    if (hx_runtime_open(&rt, &o) == HX_OK) {
        hx_runtime_close(rt);
        a->devices = "cpu,gpu";
        fprintf(stderr, P ": -ngl %d: using the CPU and the GPU devices (--devices cpu,gpu); hetero places the "
                          "layers' tasks by --partition, not by a layer count\n", a->n_gpu_layers);
    } else {
        a->devices = "cpu";
        fprintf(stderr, P ": -ngl %d: this machine has no GPU hetero can use, so it runs on the CPU "
                          "(--devices cpu)\n", a->n_gpu_layers);
    }
    return 0;
}

static int cli_u32(const char *o, const char *v, uint32_t *out)
{
    long long x;
    if (cli_long(P, o, v, 0, INT32_MAX, &x))
        return -1;
    *out = (uint32_t)x;
    return 0;
}

/* llama.cpp's --logit-bias TOKEN_ID(+|-)BIAS; "-inf" bans the token. */
static int add_bias(run_args *a, const char *v)
{
    const int most = (int)(sizeof a->bias / sizeof a->bias[0]);
    char *end;
    errno = 0;
    long id = isdigit((unsigned char)*v) ? strtol(v, &end, 10) : -1;
    float b = 0.0f;
    int ok = id >= 0 && !errno && (*end == '+' || *end == '-') && end[1];
    if (ok) {
        char *e2;
        b = strtof(end + 1, &e2);
        ok = !*e2 && !isnan(b) && !(isinf(b) && *end == '+');
        b = *end == '-' ? -b : b;
    }
    if (!ok) {
        fprintf(stderr, P ": --logit-bias takes TOKEN_ID+BIAS or TOKEN_ID-BIAS (e.g. 15043+1, 15043-inf), not '%s'\n",
                v);
        return -1;
    }
    if (a->sampling.n_logit_bias == (uint32_t)most) {
        fprintf(stderr, P ": at most %d --logit-bias\n", most);
        return -1;
    }
    a->bias[a->sampling.n_logit_bias].token = (int32_t)id;
    a->bias[a->sampling.n_logit_bias++].bias = b;
    a->sampling.logit_bias = a->bias;
    return 0;
}

static int add_breaker(run_args *a, const char *v)
{
    const int most = (int)(sizeof a->breakers / sizeof a->breakers[0]);
    a->breakers_given = 1;
    a->sampling.dry_breakers = a->breakers; /* given: they replace the defaults */
    if (!strcmp(v, "none"))
        return 0;
    if (!*v || a->n_breakers == most) {
        fprintf(stderr, P ": --dry-sequence-breaker takes a non-empty text, at most %d times\n", most);
        return -1;
    }
    a->breakers[a->n_breakers++] = v;
    a->sampling.n_dry_breakers = (uint32_t)a->n_breakers;
    return 0;
}

static int sampler_letters(run_args *a, const char *v)
{
    size_t n = strlen(v);
    for (size_t i = 0; i < n; i++)
        if (!strchr(CLI_SAMPLER_LETTERS, v[i]) || n >= sizeof a->samplers) {
            fprintf(stderr, P ": --sampling-seq takes up to %zu of the letters %s (e penalties, d dry, s top_n_sigma, "
                              "k top_k, y typ_p, p top_p, m min_p, x xtc, t temperature), not '%s'\n",
                    sizeof a->samplers - 1, CLI_SAMPLER_LETTERS, v);
            return -1;
        }
    memcpy(a->samplers, v, n + 1);
    a->sampling.samplers = a->samplers;
    return 0;
}

/* llama.cpp's --samplers: names separated by ';'. */
static int sampler_names(run_args *a, const char *v)
{
    char letters[sizeof a->samplers] = "", name[40];
    size_t n = 0;
    for (const char *p = v;;) {
        size_t len = strcspn(p, ";");
        char c = 0;
        if (len < sizeof name) {
            memcpy(name, p, len);
            name[len] = '\0';
            c = cli_sampler_letter(name);
        }
        if (!c || c == 'i' || c == 'a' || n + 1 >= sizeof letters) {
            fprintf(stderr, P ": --samplers: '%.*s' is not one of " CLI_SAMPLER_NAMES " (separated by ';', at most "
                              "%zu)\n", (int)len, p, sizeof letters - 1);
            return -1;
        }
        letters[n++] = c;
        letters[n] = '\0';
        if (!p[len])
            break;
        p += len + 1;
    }
    return sampler_letters(a, letters);
}

static int parse(int argc, char **argv, run_args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(name) (!strcmp(o, name) && v && ++i)
#define FLAG(name) (!strcmp(o, name))
/* A numeric option: the whole value, inside its range, or exit 2. */
#define INT(lo, hi, dst) (cli_int(P, o, v, lo, hi, &(dst)) ? -1 : 0)
#define REAL(lo, hi, dst) (cli_float(P, o, v, lo, hi, &(dst)) ? -1 : 0)
        int bad = 0;
        if (OPT("-m") || OPT("--model")) a->model = v;
        else if (OPT("--synthetic")) snprintf(a->synthetic, sizeof a->synthetic, "%s", v);
        else if (OPT("-p") || OPT("--prompt")) a->prompt = v;
        else if (OPT("-f") || OPT("--file")) a->prompt_file = v;
        else if (OPT("--grammar")) a->grammar = v;
        else if (OPT("--grammar-file")) a->grammar_file = v;
        else if (OPT("-j") || OPT("--json-schema")) a->json_schema = v;
        else if (OPT("--tokens")) a->tokens = v;
        else if (OPT("--logits")) a->logits = v;
        else if (OPT("-n") || OPT("--n-predict") || OPT("--predict")) bad = INT(-1, INT32_MAX, a->n_predict);
        else if (OPT("-c") || OPT("--ctx-size")) bad = INT(0, INT32_MAX, a->n_ctx);
        else if (OPT("--stop") || OPT("-r") || OPT("--reverse-prompt")) {
            if (add_stop(a, v))
                return -1;
        } else if (OPT("-t") || OPT("--threads")) bad = INT(0, 4096, a->threads);
        else if (OPT("-tb") || OPT("--threads-batch")) bad = INT(1, 4096, a->threads_batch);
        else if (OPT("-b") || OPT("--batch-size")) bad = INT(1, 1 << 20, a->batch);
        else if (OPT("-ngl") || OPT("--n-gpu-layers") || OPT("--gpu-layers")) bad = INT(0, INT32_MAX, a->n_gpu_layers);
        else if (OPT("--devices")) a->devices = v;
        else if (OPT("--kv-type")) a->kv_type = v;
        else if (OPT("--moe-routing")) a->moe_routing = v;
        else if (OPT("--moe-tally")) a->moe_tally = v;
        else if (OPT("-ctk") || OPT("--cache-type-k")) a->kv_type_k = v;
        else if (OPT("-ctv") || OPT("--cache-type-v")) a->kv_type_v = v;
        else if (FLAG("--context-shift")) a->context_shift = 1;
        else if (OPT("--keep")) bad = INT(0, INT32_MAX, a->keep);
        else if (OPT("--shift-step")) bad = INT(0, INT32_MAX, a->shift_step);
        else if (OPT("--sched")) a->sched = v;
        else if (OPT("--partition")) a->partition = v;
        else if (OPT("--trace")) a->trace = v;
        else if (OPT("--inject")) a->inject = v;
        else if (OPT("-sys") || OPT("--system-prompt")) a->system_prompt = v;
        else if (OPT("--chat-template")) a->chat_template = v;
        else if (OPT("--chat-template-file")) a->chat_template_file = v;
        else if (FLAG("--jinja") || FLAG("--no-jinja")) a->no_jinja = o[2] == 'n';
        else if (FLAG("-cnv") || FLAG("--conversation") || FLAG("--chat")) a->chat = 1;
        else if (FLAG("-no-cnv") || FLAG("--no-conversation")) a->chat = 0;
        else if (FLAG("--plan")) a->plan = 1;
        else if (FLAG("--stats")) a->stats = 1;
        else if (FLAG("--ignore-eos")) a->sampling.ignore_eos = 1;
        else if (FLAG("--mlock")) a->mlock = 1;
        else if (FLAG("--verbose-prompt")) a->verbose_prompt = 1;
        else if (FLAG("--no-perf")) a->no_perf = 1;
        else if (FLAG("--no-mmap")) {
            fprintf(stderr, P ": --no-mmap is not supported: hetero always maps the model file (read-only, "
                              "its pages shared); --mlock keeps it in memory\n");
            return -1;
        } else if (OPT("--temp")) bad = REAL(0, 1e6, a->sampling.temperature);
        else if (OPT("--top-k")) bad = INT(0, INT32_MAX, a->sampling.top_k);
        else if (OPT("--top-p")) bad = REAL(1e-6, 1, a->sampling.top_p);
        else if (OPT("--min-p")) bad = REAL(0, 1, a->sampling.min_p);
        else if (OPT("--repeat-penalty")) bad = REAL(1e-6, 1e6, a->sampling.repeat_penalty);
        else if (OPT("--repeat-last-n")) bad = INT(0, 1 << 20, a->sampling.repeat_last_n);
        else if (OPT("--frequency-penalty")) bad = REAL(-2, 2, a->sampling.frequency_penalty);
        else if (OPT("--presence-penalty")) bad = REAL(-2, 2, a->sampling.presence_penalty);
        else if (OPT("--typical")) bad = REAL(0, 1, a->sampling.typical_p);
        else if (OPT("--top-nsigma") || OPT("--top-n-sigma")) bad = REAL(-1e6, 1e6, a->sampling.top_n_sigma);
        else if (OPT("--xtc-probability")) bad = REAL(0, 1, a->sampling.xtc_probability);
        else if (OPT("--xtc-threshold")) bad = REAL(0, 1, a->sampling.xtc_threshold);
        else if (OPT("--dynatemp-range")) bad = REAL(0, 1e6, a->sampling.dynatemp_range);
        else if (OPT("--dynatemp-exp")) bad = REAL(0, 1e6, a->sampling.dynatemp_exponent);
        else if (OPT("--dry-multiplier")) bad = REAL(0, 1e6, a->sampling.dry_multiplier);
        else if (OPT("--dry-base")) bad = REAL(1, 1e6, a->sampling.dry_base);
        else if (OPT("--dry-allowed-length")) bad = INT(0, INT32_MAX, a->sampling.dry_allowed_length);
        else if (OPT("--dry-penalty-last-n")) bad = INT(-1, 1 << 20, a->sampling.dry_penalty_last_n);
        else if (OPT("--dry-sequence-breaker")) bad = add_breaker(a, v);
        else if (OPT("--mirostat")) bad = INT(0, 2, a->sampling.mirostat);
        else if (OPT("--mirostat-lr")) bad = REAL(0, 1e6, a->sampling.mirostat_eta);
        else if (OPT("--mirostat-ent")) bad = REAL(1e-6, 1e6, a->sampling.mirostat_tau);
        else if (OPT("--min-keep")) bad = INT(0, INT32_MAX, a->sampling.min_keep);
        else if (OPT("--min-tokens")) bad = cli_u32(o, v, &a->sampling.min_tokens);
        else if (OPT("--logit-bias")) bad = add_bias(a, v);
        else if (OPT("--samplers")) bad = sampler_names(a, v);
        else if (OPT("--sampling-seq") || OPT("--sampler-seq")) bad = sampler_letters(a, v);
        else if (OPT("--seed")) {
            if (!strcmp(v, "-1")) {
                /* llama.cpp's -1: a random seed, printed so the run can be repeated. */
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                a->sampling.seed = ((uint64_t)ts.tv_sec * 1000000007u) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
                fprintf(stderr, P ": --seed -1: seed %llu\n", (unsigned long long)a->sampling.seed);
            } else {
                bad = cli_u64(P, o, v, UINT64_MAX, &a->sampling.seed);
            }
        }
        else if (FLAG("--no-bos")) a->add_special = 0;
        else if (FLAG("--no-special")) a->parse_special = 0;
        else if (!strcmp(o, "--split") || !strcmp(o, "--mpi-timeout") || FLAG("--tensor-parallel") || FLAG("--tp")) {
            if (cli_dist_option(P, o, v, &i, &a->dist) < 0)
                return -1;
        } else if (FLAG("-h") || FLAG("--help")) {
            usage(stdout);
            exit(0);
        } else {
            fprintf(stderr, P ": unknown or incomplete option '%s' (--help lists them)\n", o);
            return -1;
        }
        if (bad)
            return -1;
#undef OPT
#undef FLAG
#undef INT
#undef REAL
    }
    if (a->threads_batch && a->threads && a->threads_batch != a->threads) {
        fprintf(stderr, P ": -tb %d differs from -t %d: hetero uses one CPU thread count for the prompt and the "
                          "generation (give -t N alone)\n", a->threads_batch, a->threads);
        return -1;
    }
    if (a->threads_batch && !a->threads) {
        a->threads = a->threads_batch;
        fprintf(stderr, P ": -tb %d: %d CPU threads for the prompt and the generation alike (hetero has one "
                          "thread count)\n", a->threads_batch, a->threads);
    }
    if (a->prompt && a->prompt_file) {
        fprintf(stderr, P ": give the prompt with -p or -f, not both\n");
        return -1;
    }
    if (a->chat && (a->tokens || a->prompt_file)) {
        fprintf(stderr, P ": a conversation takes its turns from -p and standard input, not --tokens or -f\n");
        return -1;
    }
    if (map_gpu_layers(a))
        return -1;
    a->sampling.stop = a->stop;
    a->sampling.n_stop = a->n_stop;
    return 0;
}

static void print_plan(hx_runtime *rt, hx_model *m, const char *partition, uint32_t n_layer)
{
    printf("plan: partition %s, %d devices\n", partition ? partition : "(default)", hx_runtime_device_count(rt));
    for (int d = 0; d < hx_runtime_device_count(rt); d++) {
        hx_device_info in;
        if (hx_runtime_device_info(rt, d, &in) == HX_OK)
            printf("  dev %d %-6s %-5s %s\n", d, hx_device_family_str(in.family), hx_device_kind_str(in.kind), in.name);
    }
    size_t n = hx_model_plan_size(m);
    int layer = -2;
    for (size_t i = 0; i < n; i++) {
        hx_plan_task t;
        if (hx_model_plan_get(m, i, &t) != HX_OK)
            break;
        if (t.layer != layer) {
            layer = t.layer;
            if (layer < 0)
                printf("input:\n");
            else if ((uint32_t)layer < n_layer)
                printf("layer %d:\n", layer);
            else
                printf("output:\n");
        }
        char where[64];
        hx_device_info in;
        if (t.device >= 0 && hx_runtime_device_info(rt, t.device, &in) == HX_OK)
            snprintf(where, sizeof where, "dev %d %s%s", t.device, in.family == HX_FAMILY_OPENCL && in.kind == HX_KIND_CPU ? "opencl-" : "", hx_device_kind_str(in.kind));
        else
            snprintf(where, sizeof where, "scheduler");
        printf("  %-12s %-10s -> %-15s (%s)  %.3g flop, %.3g B\n", t.op, t.task_class, where, t.reason, t.flops,
               t.bytes);
    }
}

/* A mixture-of-experts model's router: tokens per expert, per layer. */
static void print_expert_counts(hx_model *m)
{
    hx_model_info info;
    if (hx_model_info_get(m, &info) || !info.n_expert)
        return;
    uint64_t *counts = calloc(info.n_expert, sizeof *counts);
    size_t n = 0;
    fprintf(stderr, "hetero-run: tokens routed to each of %u experts (%u per token):\n", info.n_expert,
            info.n_expert_used);
    for (uint32_t l = 0; counts && l < info.n_layer; l++) {
        if (hx_model_expert_counts(m, l, counts, info.n_expert, &n) != HX_OK)
            break;
        fprintf(stderr, "  layer %2u:", l);
        for (size_t e = 0; e < n; e++)
            fprintf(stderr, " %llu", (unsigned long long)counts[e]);
        fputc('\n', stderr);
    }
    free(counts);
}

static void print_stats(hx_runtime *rt)
{
    hx_runtime_stats st;
    hx_runtime_stats_get(rt, &st);
    fprintf(stderr, "hetero-run: %llu tasks, %llu failed, %llu retries, %llu migrations, %llu bytes copied, %u devices retired\n",
            (unsigned long long)st.tasks_done, (unsigned long long)st.tasks_failed, (unsigned long long)st.retries,
            (unsigned long long)st.migrations, (unsigned long long)st.bytes_copied, st.devices_retired);
    for (int d = 0; d < hx_runtime_device_count(rt); d++) {
        hx_device_info in;
        hx_device_stats ds;
        if (hx_runtime_device_info(rt, d, &in) || hx_device_stats_get(rt, d, &ds))
            continue;
        fprintf(stderr, "  dev %d %-5s %8llu tasks  busy %5.1f%%  %7.0f tasks/s  %6.2f GFLOP/s  %llu failures%s%s\n", d,
                hx_device_kind_str(in.kind), (unsigned long long)ds.tasks, 100 * ds.busy_fraction,
                ds.tasks_per_second, ds.flops_per_second * 1e-9, (unsigned long long)ds.failures,
                ds.retired ? "  RETIRED: " : "", ds.retired ? ds.last_failure : "");
    }
}

static int write_logits(const char *path, hx_session *s, size_t n, uint32_t n_vocab)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "hetero-run: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const float *l = hx_session_logits(s, (int)i);
        if (!l || fwrite(l, sizeof *l, n_vocab, f) != n_vocab) {
            fclose(f);
            fprintf(stderr, "hetero-run: writing %s failed\n", path);
            return -1;
        }
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* --tokens: evaluate ids as given, optionally writing every logit row. */
static int run_tokens(hx_session *s, const run_args *a, const hx_model_info *in, int32_t **ids)
{
    size_t n;
    if (parse_tokens(a->tokens, ids, &n)) {
        fprintf(stderr, "hetero-run: --tokens takes comma-separated non-negative ids\n");
        return 1;
    }
    if (run_check_context(in, n, 0))
        return 1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (hx_session_eval(s, *ids, n, a->logits != NULL)) {
        fprintf(stderr, "hetero-run: %s\n", hx_last_error());
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double sec = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    if (a->logits && write_logits(a->logits, s, n, in->n_vocab))
        return 1;
    fprintf(stderr, "hetero-run: evaluated %zu %s in %.3f s (%.1f tokens/s)%s%s\n", n, run_tokens_word(n), sec, n / sec,
            a->logits ? ", logits in " : "", a->logits ? a->logits : "");
    return 0;
}

/* --verbose-prompt: the prompt's tokens, as llama-cli prints them. */
static void print_prompt_tokens(hx_model *m, const int32_t *ids, size_t n)
{
    fprintf(stderr, "hetero-run: prompt: %zu %s\n", n, run_tokens_word(n));
    for (size_t i = 0; i < n; i++) {
        char piece[256];
        size_t len = 0;
        if (hx_model_token_to_piece(m, ids[i], piece, sizeof piece, &len) != HX_OK)
            len = 0;
        fprintf(stderr, "%6d -> '%.*s'\n", ids[i], (int)len, piece);
    }
}

/* -p / -f: the prompt, then what the model generates after it.  A prompt
 * the context cannot hold is refused before any work; a generation that
 * fills the context ends there, with its text, and succeeds.  Ctrl-C ends
 * it after the token being generated, with the text's newline and the
 * timing line, and exit status 130. */
static int run_prompt(hx_model *m, hx_session *s, const run_args *a, const hx_model_info *in, const char *prompt,
                      size_t len)
{
    int32_t *ids;
    size_t n;
    int rc = 1;
    if (run_tokenize(m, prompt, len, a->add_special, a->parse_special, &ids, &n) == 0 &&
        run_check_context(in, n, 0) == 0) {
        if (a->verbose_prompt)
            print_prompt_tokens(m, ids, n);
        fwrite(prompt, 1, len, stdout);
        hx_generation_stats gs;
        run_generating(1);
        hx_status st = hx_session_generate(s, ids, n, run_n_predict(a), &a->sampling, print_piece, NULL, &gs);
        run_generating(0);
        /* The text's line ends on stdout before any line on stderr. */
        putchar('\n');
        fflush(stdout);
        if (st) {
            fprintf(stderr, "hetero-run: %s\n", hx_last_error());
        } else {
            if (!a->no_perf) {
                run_report(a, in, &gs, hx_session_position(s));
                print_memory(a->model);
            }
            rc = gs.finish == HX_FINISH_CALLBACK && run_interrupted() ? RUN_EXIT_INTERRUPTED : 0;
        }
    }
    free(ids);
    return rc;
}

/* What the context is, when it is not what the model was trained for. */
static void say_context(const run_args *a, const hx_model_info *in)
{
    char c[32], t[32];
    if (!a->n_ctx && in->n_ctx < in->n_ctx_train)
        fprintf(stderr, "hetero-run: context %s tokens of the model's %s: a longer one's KV cache would not fit "
                        "in memory (-c N to choose)\n",
                run_grouped(in->n_ctx, c), run_grouped(in->n_ctx_train, t));
    else if (in->n_ctx > in->n_ctx_train)
        fprintf(stderr, "hetero-run: context %s tokens is past the %s the model was trained for; text past that "
                        "may degrade\n",
                run_grouped(in->n_ctx, c), run_grouped(in->n_ctx_train, t));
}

int main(int argc, char **argv)
{
    run_args a = {.n_predict = -2, .n_gpu_layers = -1, .add_special = 1, .parse_special = 1, .sampling = hx_sampling_default()};
    snprintf(a.synthetic, sizeof a.synthetic, "tiny:f16");
    if (parse(argc, argv, &a)) {
        free(a.stop);
        return CLI_EXIT_USAGE;
    }
    /* -f and the grammar are read before the model loads: a missing file
     * or a bad schema fails at once. */
    size_t prompt_len = 0;
    char *grammar_owned = NULL;
    char *prompt_owned = a.prompt_file ? cli_read_file("hetero-run", "-f", a.prompt_file, &prompt_len) : NULL;
    if ((a.prompt_file && !prompt_owned) || load_grammar(&a, &grammar_owned)) {
        free(prompt_owned);
    free(grammar_owned);
        free(a.stop);
        return 1;
    }
    const char *prompt = prompt_owned ? prompt_owned : a.prompt ? a.prompt : "Once upon a time";
    if (!prompt_owned)
        prompt_len = strlen(prompt);
    char path[700];
    if (!a.model) {
        char preset[64], *type = strchr(a.synthetic, ':');
        snprintf(preset, sizeof preset, "%.*s", type ? (int)(type - a.synthetic) : (int)strlen(a.synthetic),
                 a.synthetic);
        if (synthetic_path(preset, type ? type + 1 : "f16", path, sizeof path)) {
            free(prompt_owned);
    free(grammar_owned);
            free(a.stop);
            return 1;
        }
        a.model = path;
    }
    if (cli_dist_init("hetero-run", &argc, &argv, &a.dist)) {
        free(prompt_owned);
        free(grammar_owned);
        free(a.stop);
        return 1;
    }
    run_sigint_install();
    hx_runtime_options ro = hx_runtime_options_default();
    ro.devices = a.devices;
    ro.cpu_threads = a.threads;
    ro.sched = a.sched;
    ro.inject = a.inject;
    hx_runtime *rt = NULL;
    hx_model *m = NULL;
    hx_session *s = NULL;
    int32_t *ids = NULL;
    int rc = 1;
    hx_model_options mo = hx_model_options_default();
    mo.kv_type = a.kv_type;
    mo.kv_type_k = a.kv_type_k;
    mo.kv_type_v = a.kv_type_v;
    mo.moe_routing = a.moe_routing;
    mo.max_batch = (uint32_t)a.batch;
    mo.partition = a.partition;
    mo.n_ctx = (uint32_t)a.n_ctx;
    if (hx_runtime_open(&rt, &ro))
        fprintf(stderr, "hetero-run: %s\n", hx_last_error());
    /* Under mpirun every rank but 0 serves its layers of rank 0's model. */
    if (a.dist.info.rank > 0) {
        rc = cli_dist_worker("hetero-run", rt);
        free(prompt_owned);
        free(grammar_owned);
        free(a.stop);
        return rc;
    }
    if (!rt)
        goto out;
    hx_status loaded = hx_model_load(rt, a.model, &mo, &m);
    if (cli_dist_start("hetero-run", m, loaded))
        goto out;
    if (hx_session_open(m, &s)) {
        fprintf(stderr, "hetero-run: %s\n", hx_last_error());
        goto out;
    }
    if (a.mlock && mlockall(MCL_CURRENT) != 0)
        fprintf(stderr, "hetero-run: warning: --mlock: cannot lock the model in memory (%s; see ulimit -l); "
                        "going on without\n", strerror(errno));
    hx_model_info info;
    hx_model_info_get(m, &info);
    fprintf(stderr, "hetero-run: %s (%s, %s, %.1fM parameters, %u layers)\n", info.name, info.arch, info.ftype,
            info.n_params / 1e6, info.n_layer);
    say_context(&a, &info);
    if (a.context_shift && hx_session_set_context_shift(s, a.keep, (uint32_t)a.shift_step)) {
        fprintf(stderr, "hetero-run: --context-shift: %s\n", hx_last_error());
        goto out;
    }
    if (a.plan) {
        rc = hx_model_plan_size(m) ? (print_plan(rt, m, a.partition, info.n_layer), 0) : 1;
        if (rc)
            fprintf(stderr, "hetero-run: %s\n", hx_last_error());
        goto out;
    }
    if (a.trace && hx_runtime_trace_start(rt, a.trace)) {
        fprintf(stderr, "hetero-run: %s\n", hx_last_error());
        goto out;
    }
    if (a.tokens)
        rc = run_tokens(s, &a, &info, &ids);
    else if (a.chat)
        rc = run_chat(m, s, &a);
    else
        rc = run_prompt(m, s, &a, &info, prompt, prompt_len);
out:
    if (a.stats && rt)
        print_stats(rt);
    if (a.stats && m)
        print_expert_counts(m);
    if (a.moe_tally && m && hx_model_expert_tally_save(m, a.moe_tally) != HX_OK) {
        fprintf(stderr, "hetero-run: %s\n", hx_last_error());
        rc = 1;
    }
    if (a.trace && rt && hx_runtime_trace_stop(rt) == HX_OK)
        fprintf(stderr, "hetero-run: trace in %s\n", a.trace);
    free(ids);
    free(prompt_owned);
    free(grammar_owned);
    free(a.stop);
    cli_dist_report("hetero-run");
    hx_session_close(s);
    hx_model_free(m);
    hx_runtime_close(rt);
    hx_dist_finalize();
    return rc;
}
