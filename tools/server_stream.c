/* A completion's choices as the engine fills them, and its streamed
 * response.  The engine's callback only copies the token into the choice
 * (under the job's lock) and returns: a slow reader never holds up the
 * batch, its text waits here.  The HTTP thread formats what arrived as
 * Server-Sent Events and writes them; when the client is gone, MHD frees
 * the response, which cancels the choices still running (their KV blocks
 * return to the pool at the engine's next step). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "tools/server.h"

srv_job *srv_job_new(srv *S, int chat, int n)
{
    srv_job *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->S = S;
    j->chat = chat;
    j->n = n;
    pthread_mutex_init(&j->lock, NULL);
    pthread_cond_init(&j->cond, NULL);
    for (int i = 0; i < n; i++) {
        j->ch[i].job = j;
        j->ch[i].index = i;
    }
    j->lane = -1;
    j->created = (long)time(NULL);
    static unsigned long long serial;
    snprintf(j->id, sizeof j->id, "%s-%lx%llx", chat ? "chatcmpl" : "cmpl", (unsigned long)j->created,
             __atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED));
    j->t_submit = srv_now();
    pthread_mutex_lock(&S->jobs_lock);
    j->next = S->jobs;
    if (S->jobs)
        S->jobs->prev = j;
    S->jobs = j;
    pthread_mutex_unlock(&S->jobs_lock);
    return j;
}

void srv_jobs_cancel_all(srv *S)
{
    pthread_mutex_lock(&S->jobs_lock);
    for (srv_job *j = S->jobs; j; j = j->next) {
        pthread_mutex_lock(&j->lock);
        j->cut = 1;
        for (int i = 0; i < j->n; i++)
            if (j->ch[i].id && !j->ch[i].ended)
                hx_engine_cancel(S->e, j->ch[i].id);
        pthread_mutex_unlock(&j->lock);
    }
    pthread_mutex_unlock(&S->jobs_lock);
}

void srv_job_free(srv_job *j)
{
    if (!j)
        return;
    srv *S = j->S;
    pthread_mutex_lock(&S->jobs_lock);
    if (j->prev)
        j->prev->next = j->next;
    else
        S->jobs = j->next;
    if (j->next)
        j->next->prev = j->prev;
    pthread_mutex_unlock(&S->jobs_lock);
    pthread_mutex_lock(&j->lock);
    j->gone = 1;
    pthread_mutex_unlock(&j->lock);
    for (int i = 0; i < j->n; i++) {
        srv_choice *ch = &j->ch[i];
        if (!ch->id)
            continue;
        if (!ch->ended)
            hx_engine_cancel(j->S->e, ch->id);
        hx_request_result res;
        hx_engine_wait(j->S->e, ch->id, -1, &res);
        free(ch->text);
        free(ch->pieces);
    }
    if (j->owns_slot)
        srv_request_end(j->S, j->tenant);
    srv_lane_give(j->S, j->lane);
    free(j->out);
    if (j->dialect && j->dialect_state)
        j->dialect->close(j->dialect_state);
    json_decref(j->native);
    srv_tools_free(j->tools);
    pthread_cond_destroy(&j->cond);
    pthread_mutex_destroy(&j->lock);
    free(j);
}

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * size);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

int srv_on_token(void *user, const hx_engine_token *t)
{
    srv_choice *ch = user;
    srv_job *j = ch->job;
    srv_metrics *M = &j->S->metrics;
    const double now = srv_now();
    if (t->token >= 0)
        srv_hist_add(M, ch->n_pieces ? &M->itl : &M->ttft, ch->n_pieces ? now - ch->t_last : now - j->t_submit);
    ch->t_last = now;
    if (t->token >= 0 && !ch->n_pieces)
        ch->t_first = now; /* timings_per_token's generation clock (server_progress.c) */
    /* Each generated token against the tenant's tokens per minute: the
     * one that finds the minute's budget spent is not given, and the
     * choice stops there (finish_reason "length"). */
    int drop = t->token >= 0 && j->tenant && j->tenant->tokens_per_minute &&
               (ch->limited || !srv_tenant_take_token(&j->S->tenants, j->tenant));
    size_t len = drop ? 0 : strlen(t->piece);
    pthread_mutex_lock(&j->lock);
    ch->limited |= drop;
    int fail = grow((void **)&ch->text, &ch->text_cap, ch->text_len + len + 1, 1);
    if (!fail && !drop) {
        memcpy(ch->text + ch->text_len, t->piece, len + 1);
        ch->text_len += len;
    }
    if (!fail && !drop && t->token >= 0 &&
        !grow((void **)&ch->pieces, &ch->cap_pieces, ch->n_pieces + 1, sizeof *ch->pieces)) {
        srv_piece *p = &ch->pieces[ch->n_pieces++];
        p->token = t->token;
        p->text_at = ch->text_len - len;
        p->text_len = len;
        p->logprob = t->logprob;
        p->n_top = t->n_top;
        memcpy(p->top_token, t->top_token, sizeof p->top_token);
        memcpy(p->top_logprob, t->top_logprob, sizeof p->top_logprob);
    }
    if (t->last) {
        ch->ended = 1;
        ch->res = *t->result;
        if (!j->prompt_tokens)
            j->prompt_tokens = t->result->stats.prompt_tokens;
        srv_hist_add(M, &M->e2e, now - j->t_submit);
        srv_hist_add(M, &M->queue, t->result->queue_seconds);
        srv_metrics_llama_end(M, t->result);
    }
    pthread_cond_broadcast(&j->cond);
    /* A job whose client left was cancelled (srv_job_free): the engine
     * ends it as such at its next step, so it counts as cancelled. */
    int stop = fail || drop;
    pthread_mutex_unlock(&j->lock);
    return stop;
}

/* Whether the client closed its end: its socket reads end-of-file (or
 * fails).  Bytes waiting (a pipelined request) mean it is still there.  A
 * client that only shut down its sending half looks gone too, as with
 * llama-server's check; HTTP clients close both halves. */
int srv_client_gone(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return 0;
    char byte;
    ssize_t got = recv(ci->connect_fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

int srv_job_wait_client(srv_job *j, struct MHD_Connection *c)
{
    /* The connection's thread is ours until we answer, so MHD cannot see
     * the client leave: look at its socket every SRV_CLIENT_CHECK_MS,
     * whether tokens came meanwhile or not. */
    double checked = srv_now();
    pthread_mutex_lock(&j->lock);
    for (int i = 0; i < j->n; i++)
        while (!j->ch[i].ended) {
            const struct timespec until = srv_after_ms(SRV_CLIENT_CHECK_MS);
            pthread_cond_timedwait(&j->cond, &j->lock, &until);
            if (srv_now() - checked < SRV_CLIENT_CHECK_MS * 1e-3)
                continue;
            checked = srv_now();
            if (srv_client_gone(c)) {
                pthread_mutex_unlock(&j->lock);
                return -1;
            }
        }
    pthread_mutex_unlock(&j->lock);
    return 0;
}

/* Appends one SSE event, "[event: NAME\n]data: JSON\n\n" (takes the
 * reference). */
void srv_stream_named(srv_job *j, const char *event, json_t *v)
{
    char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    if (!s)
        return;
    const size_t n = strlen(s), e = event ? strlen(event) + 8 : 0; /* "event: " and "\n" */
    if (!grow((void **)&j->out, &j->out_cap, j->out_len + e + n + 9, 1)) {
        if (event)
            snprintf(j->out + j->out_len, e + 1, "event: %s\n", event);
        memcpy(j->out + j->out_len + e, "data: ", 6);
        memcpy(j->out + j->out_len + e + 6, s, n);
        memcpy(j->out + j->out_len + e + 6 + n, "\n\n", 2);
        j->out_len += e + n + 8;
    }
    free(s);
}

void srv_stream_event(srv_job *j, json_t *v) { srv_stream_named(j, NULL, v); }

json_t *srv_stream_chunk(srv_job *j, json_t *choices)
{
    return json_pack("{s:s,s:s,s:I,s:s,s:o}", "id", j->id, "object",
                     j->chat ? "chat.completion.chunk" : "text_completion", "created", (json_int_t)j->created,
                     "model", j->S->model_name, "choices", choices);
}

/* An event with the choice's timings, when the request asked for them
 * with each (timings_per_token, server_progress.c). */
static json_t *timed(srv_job *j, srv_choice *ch, json_t *ev)
{
    if (ev && j->timings_per_token && !json_object_get(ev, "timings"))
        json_object_set_new(ev, "timings", srv_timings_json(j, ch));
    return ev;
}

/* Formats what arrived since the last call (under the job's lock). */
static void format_events(srv_job *j)
{
    int all_reported = 1;
    for (int i = 0; i < j->n; i++) {
        srv_choice *ch = &j->ch[i];
        if (ch->reported)
            continue;
        if (j->chat && !ch->sent_role && !j->dialect) {
            /* content null, as llama-server's (and OpenAI's) role chunk */
            json_t *c = json_pack("{s:i,s:{s:s,s:n},s:n,s:n}", "index", i, "delta", "role", "assistant", "content",
                                  "logprobs", "finish_reason");
            srv_stream_event(j, srv_stream_chunk(j, json_pack("[o]", c)));
            ch->sent_role = 1;
        }
        /* A token with no text yet (part of a character, the start of a
         * stop string, an end-of-generation token) waits for text, unless
         * its log-probability is asked for. */
        int fresh = ch->text_len > ch->sent_text || (j->logprobs && ch->n_pieces > ch->sent_pieces);
        static const char shut[] = "The server shut down before the answer was complete (--drain-timeout).";
        if (ch->ended && j->cut && ch->res.stats.finish == HX_FINISH_CANCELLED) {
            if (j->dialect)
                j->dialect->error(j, "server_error", shut);
            else
                srv_stream_event(j, srv_error_object("server_error", "shutting_down", shut));
        } else if (ch->ended && ch->res.status != HX_OK) {
            if (j->dialect)
                j->dialect->error(j, "server_error", ch->res.error);
            else
                srv_stream_event(j, json_pack("{s:{s:s,s:s,s:s}}", "error", "message", ch->res.error, "type",
                                              "server_error", "code", hx_status_str(ch->res.status)));
        } else if (j->dialect) {
            /* the API's start events at once, then each chunk's as it comes */
            if (fresh || ch->ended || !ch->sent_role)
                j->dialect->chunk(j, ch, fresh || ch->ended ? srv_choice_json(j, ch, ch->sent_pieces, ch->sent_text,
                                                                              ch->ended)
                                                            : NULL,
                                  ch->ended);
            ch->sent_role = 1;
            ch->sent_pieces = ch->n_pieces;
            ch->sent_text = ch->text_len;
        } else if (j->native_answer) {
            /* llama-server's events: the text as it comes, then the summary (stop: true); with n_probs
             * one token an event (server_probs.c), the text so far with the last of them */
            if (fresh && j->logprobs && ch->n_pieces > ch->sent_pieces) {
                for (size_t k = ch->sent_pieces; k < ch->n_pieces; k++) {
                    const size_t to = k + 1 == ch->n_pieces ? ch->text_len : ch->sent_text;
                    srv_stream_event(j, timed(j, ch, srv_native_token_event(j, ch, k, ch->sent_text, to)));
                    ch->sent_text = to;
                }
            } else if (fresh)
                srv_stream_event(j, timed(j, ch, srv_native_chunk(j, ch, ch->sent_pieces, ch->sent_text, 0)));
            if (ch->ended)
                srv_stream_event(j, srv_native_chunk(j, ch, ch->n_pieces, ch->text_len, 1));
            ch->sent_pieces = ch->n_pieces;
            ch->sent_text = ch->text_len;
        } else if (fresh || ch->ended) {
            json_t *c = json_pack("[o]", srv_choice_json(j, ch, ch->sent_pieces, ch->sent_text, ch->ended));
            srv_stream_event(j, timed(j, ch, srv_stream_chunk(j, c)));
            ch->sent_pieces = ch->n_pieces;
            ch->sent_text = ch->text_len;
        }
        ch->reported = ch->ended;
        all_reported &= ch->reported;
    }
    if (all_reported && !j->done_sent) {
        if (j->include_usage && !j->native_answer && !j->dialect) {
            json_t *u = timed(j, &j->ch[0], srv_stream_chunk(j, json_array()));
            json_object_set_new(u, "usage", srv_usage_json(j));
            srv_stream_event(j, u);
        }
        static const char done[] = "data: [DONE]\n\n";
        /* llama-server's /completion stream ends without it, and the other APIs' */
        if (!j->native_answer && !j->dialect && !grow((void **)&j->out, &j->out_cap, j->out_len + sizeof done, 1)) {
            memcpy(j->out + j->out_len, done, sizeof done - 1);
            j->out_len += sizeof done - 1;
        }
        j->done_sent = 1;
    }
}

static ssize_t read_stream(void *cls, uint64_t pos, char *buf, size_t max)
{
    srv_job *j = cls;
    pthread_mutex_lock(&j->lock);
    for (;;) {
        if (j->out_at < j->out_len) {
            size_t n = j->out_len - j->out_at < max ? j->out_len - j->out_at : max;
            memcpy(buf, j->out + j->out_at, n);
            j->out_at += n;
            pthread_mutex_unlock(&j->lock);
            return (ssize_t)n;
        }
        j->out_len = j->out_at = 0;
        if (j->done_sent) {
            pthread_mutex_unlock(&j->lock);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        format_events(j);
        if (j->out_len)
            continue;
        /* Nothing new for a second (queued, or a long prefill): an SSE
         * comment keeps the connection alive and finds a client gone. */
        const struct timespec until = srv_after_ms(1000);
        if (pthread_cond_timedwait(&j->cond, &j->lock, &until)) {
            format_events(j);
            if (!j->out_len) {
                static const char ka[] = ": keep-alive\n\n";
                grow((void **)&j->out, &j->out_cap, sizeof ka, 1);
                if (j->out) {
                    memcpy(j->out, ka, sizeof ka - 1);
                    j->out_len = sizeof ka - 1;
                }
            }
        }
    }
}

static void free_stream(void *cls) { srv_job_free(cls); }

enum MHD_Result srv_stream_respond(struct MHD_Connection *c, srv_job *j)
{
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, read_stream, j, free_stream);
    if (!r) {
        srv_job_free(j);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    srv_cors_headers(j->S, c, r);
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    srv_metrics_status(&j->S->metrics, 200);
    return ret;
}
