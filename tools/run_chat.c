/* hetero-run -cnv: a conversation.  Each user turn is formatted with the
 * model's chat template (or --chat-template) together with the turns
 * before it, and only what the session has not seen yet is evaluated, as
 * llama.cpp's conversation mode does: the text the template adds after
 * the earlier turns, behind the end-of-turn token that closed the last
 * reply. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/cli_file.h"
#include "tools/run.h"

typedef struct {
    hx_chat_message *msgs;
    size_t n, cap;
} conversation;

static int add_message(conversation *c, const char *role, const char *content, size_t len)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 8;
        hx_chat_message *m = realloc(c->msgs, cap * sizeof *m);
        if (!m)
            return -1;
        c->msgs = m;
        c->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy)
        return -1;
    memcpy(copy, content, len);
    copy[len] = '\0';
    c->msgs[c->n++] = (hx_chat_message){role, copy};
    return 0;
}

static void conversation_free(conversation *c)
{
    for (size_t i = 0; i < c->n; i++)
        free((char *)c->msgs[i].content);
    free(c->msgs);
}

/* The first n messages as JSON, for hx_model_chat_render (malloc'ed). */
static char *messages_json(const conversation *c, size_t n)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (!f)
        return NULL;
    fputc('[', f);
    for (size_t i = 0; i < n; i++) {
        fputs(i ? ", {\"role\": " : "{\"role\": ", f);
        hx_json_write_string(f, c->msgs[i].role);
        fputs(", \"content\": ", f);
        hx_json_write_string(f, c->msgs[i].content);
        fputc('}', f);
    }
    fputc(']', f);
    if (fclose(f)) {
        free(text);
        return NULL;
    }
    return text;
}

/* The first n messages as the template formats them (malloc'ed); earlier
 * turns are closed, not continued. */
static char *format(hx_model *m, const run_args *a, const char *tmpl, const conversation *c, size_t n,
                    int add_assistant)
{
    char *json = messages_json(c, n), *buf = NULL;
    hx_chat_render_options o = hx_chat_render_options_default();
    o.messages = json;
    o.add_generation_prompt = add_assistant;
    o.continue_final = 0;
    o.no_jinja = a->no_jinja;
    size_t len = 0;
    hx_status s = json ? hx_model_chat_render(m, tmpl, &o, NULL, 0, &len) : HX_ERR_NO_MEMORY;
    if (s == HX_ERR_RANGE && (buf = malloc(len + 1)) && hx_model_chat_render(m, tmpl, &o, buf, len + 1, &len) == HX_OK) {
        free(json);
        return buf;
    }
    fprintf(stderr, "hetero-run: %s\n", json && (s || buf) ? hx_last_error() : "out of memory");
    free(buf);
    free(json);
    return NULL;
}


/* The template to apply: --chat-template-file, --chat-template, the
 * model's, or ChatML (what llama.cpp uses for a model without one), and
 * say which.  With --no-jinja, the built-in family the template is.
 * *owned: the file's text, to free. */
static const char *pick_template(hx_model *m, const run_args *a, char **owned)
{
    *owned = NULL;
    const char *tmpl = a->chat_template ? a->chat_template : hx_model_chat_template(m), *name;
    if (a->chat_template_file && !(tmpl = *owned = cli_read_file("hetero-run", "--chat-template-file", a->chat_template_file, NULL)))
        return NULL;
    if (!tmpl) {
        fprintf(stderr, "hetero-run: the model has no chat template; using chatml, as llama.cpp does "
                        "(--chat-template NAME to choose)\n");
        tmpl = "chatml";
    }
    const char *whose = a->chat_template_file ? " (--chat-template-file)" : a->chat_template ? "" : " (the model's)";
    if (!a->no_jinja && strchr(tmpl, '{')) {
        fprintf(stderr, "hetero-run: chat template: Jinja%s\n", whose);
        return tmpl;
    }
    if (hx_chat_template_name(tmpl, &name) != HX_OK) {
        fprintf(stderr, "hetero-run: %s\nhetero-run: --chat-template NAME applies a built-in one:", hx_last_error());
        for (size_t i = 0; hx_chat_template_builtin(i); i++)
            fprintf(stderr, " %s", hx_chat_template_builtin(i));
        fputc('\n', stderr);
        free(*owned);
        *owned = NULL;
        return NULL;
    }
    fprintf(stderr, "hetero-run: chat template %s%s\n", name, whose);
    return tmpl;
}

/* One user turn: read from -p first, then a line of standard input. */
static char *next_turn(const run_args *a, int turn, size_t *len)
{
    if (turn == 0 && a->prompt) {
        printf("> %s\n", a->prompt);
        *len = strlen(a->prompt);
        return strdup(a->prompt);
    }
    char *line = NULL;
    size_t cap = 0;
    for (;;) {
        printf("\n> ");
        fflush(stdout);
        ssize_t n = getline(&line, &cap, stdin);
        if (n < 0) {
            free(line);
            putchar('\n');
            return NULL;
        }
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (!isatty(STDIN_FILENO))
            printf("%s\n", line); /* a transcript reads as a conversation */
        if (n) {
            *len = (size_t)n;
            return line;
        }
    }
}

typedef struct {
    char *text;
    size_t len, cap;
    int32_t last_token;
} reply;

static int on_token(void *user, int32_t token, const char *piece)
{
    reply *r = user;
    fputs(piece, stdout);
    fflush(stdout);
    if (run_interrupted())
        return 1;
    size_t n = strlen(piece);
    if (r->len + n + 1 > r->cap) {
        size_t cap = (r->len + n + 1) * 2;
        char *t = realloc(r->text, cap);
        if (!t)
            return 1;
        r->text = t;
        r->cap = cap;
    }
    memcpy(r->text + r->len, piece, n + 1);
    r->len += n;
    if (token >= 0)
        r->last_token = token;
    return 0;
}

/* The tokens of the new turn: the end-of-turn token the last reply
 * closed with (sampled, not yet evaluated) or, when it was cut short,
 * the model's EOS to close it; then what the template added after the
 * turns the session holds.  Like llama.cpp, the newline a template puts
 * after an end-of-turn token is kept, since that token does not hold it. */
static int new_tokens(hx_model *m, const run_args *a, const char *tmpl, const conversation *c, size_t seen,
                      int32_t close_with, int32_t **ids, size_t *n)
{
    char *all = format(m, a, tmpl, c, c->n, 1), *past = seen ? format(m, a, tmpl, c, seen, 0) : strdup("");
    int rc = -1;
    size_t plen = past ? strlen(past) : 0;
    if (all && past && strncmp(all, past, plen) != 0)
        fprintf(stderr, "hetero-run: the chat template formats the earlier turns differently once a new one "
                        "follows; this conversation cannot continue in the same session\n");
    else if (all && past) {
        const char *delta = all + plen;
        int newline = seen && plen && past[plen - 1] == '\n';
        size_t dlen = strlen(delta);
        char *text = malloc(dlen + 2);
        if (text) {
            snprintf(text, dlen + 2, "%s%s", newline ? "\n" : "", delta);
            int32_t *t;
            size_t k;
            if (run_tokenize(m, text, strlen(text), seen == 0 && a->add_special, a->parse_special, &t, &k) == 0) {
                int lead = seen && close_with >= 0;
                *ids = malloc((k + 1) * sizeof **ids);
                if (*ids) {
                    if (lead)
                        (*ids)[0] = close_with;
                    memcpy(*ids + lead, t, k * sizeof *t);
                    *n = k + lead;
                    rc = 0;
                }
                free(t);
            }
            free(text);
        }
    }
    free(all);
    free(past);
    return rc;
}

int run_chat(hx_model *m, hx_session *s, const run_args *a)
{
    char *owned;
    const char *tmpl = pick_template(m, a, &owned);
    if (!tmpl)
        return 1;
    hx_model_info in;
    hx_model_info_get(m, &in);
    conversation c = {0};
    int rc = 0;
    if (a->system_prompt && add_message(&c, "system", a->system_prompt, strlen(a->system_prompt))) {
        fprintf(stderr, "hetero-run: out of memory\n");
        free(owned);
        return 1;
    }
    size_t seen = 0;           /* messages the session holds */
    int32_t close_with = -1;   /* the token that ends the last reply's turn */
    for (int turn = 0;; turn++) {
        size_t len;
        char *line = next_turn(a, turn, &len);
        if (!line)
            break;
        int32_t *ids = NULL;
        size_t n = 0;
        int bad = add_message(&c, "user", line, len);
        free(line);
        if (bad || new_tokens(m, a, tmpl, &c, seen, close_with, &ids, &n) ||
            run_check_context(&in, n, hx_session_position(s))) {
            free(ids);
            rc = 1;
            break;
        }
        reply r = {.last_token = -1};
        hx_generation_stats gs;
        /* Ctrl-C ends this reply (kept as it stands) and the next turn is
         * asked for; a second one ends the program (run_sigint.c). */
        run_generating(1);
        hx_status st = hx_session_generate(s, ids, n, run_n_predict(a), &a->sampling, on_token, &r, &gs);
        run_generating(0);
        free(ids);
        putchar('\n');
        fflush(stdout);
        if (st == HX_OK && !a->no_perf)
            run_report(a, &in, &gs, hx_session_position(s));
        if (st != HX_OK || add_message(&c, "assistant", r.text ? r.text : "", r.len)) {
            fprintf(stderr, "hetero-run: %s\n", st ? hx_last_error() : "out of memory");
            free(r.text);
            rc = 1;
            break;
        }
        free(r.text);
        seen = c.n;
        close_with = gs.finish == HX_FINISH_STOP && gs.stop_index < 0 ? r.last_token : in.eos;
        if (hx_session_position(s) >= in.n_ctx) {
            char b[32];
            fprintf(stderr, "hetero-run: the conversation fills the context (%s tokens; -c N for a longer one)\n",
                    run_grouped(in.n_ctx, b));
            break;
        }
    }
    conversation_free(&c);
    free(owned);
    return rc;
}
