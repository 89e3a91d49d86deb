/* hetero-server's tenants: API keys from --api-keys FILE (each with a
 * name, the engine's fairness group, a limit of requests in flight with a
 * queue of requests allowed to wait for a slot, and a budget of tokens per
 * minute), from --api-key-file FILE (one key per line, as llama-server)
 * and from --api-key KEY[,KEY...].  Over a limit the answer is 429 with
 * Retry-After.
 *
 * Files are read whole line by line, of any length; a line that is not
 * what the format says stops the server at start with its number.  Keys
 * are compared in time that does not depend on where they differ. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/server.h"

static int say(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int say(char *err, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return -1;
}

/* A key is printable ASCII without spaces: what an Authorization header
 * can carry as one token. */
static const char *bad_key(const char *k, size_t n)
{
    if (!n)
        return "an empty key";
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)k[i] <= 0x20 || (unsigned char)k[i] >= 0x7f)
            return "a key may hold only printable ASCII characters, no spaces";
    return NULL;
}

static int same_key(const srv_tenant *t, const char *k, size_t n)
{
    return t->key_len == n && !memcmp(t->key, k, n);
}

int srv_tenants_add(srv_tenants *T, const char *key, size_t key_len, const char *name, uint32_t max_concurrent,
                    uint32_t tokens_per_minute, uint32_t queue, char *err, size_t cap)
{
    const char *why = bad_key(key, key_len);
    if (why)
        return say(err, cap, "%s", why);
    for (size_t i = 0; i < T->n; i++)
        if (same_key(T->t[i], key, key_len))
            return say(err, cap, "the key of '%s' is given twice", T->t[i]->name);
    srv_tenant *t = calloc(1, sizeof *t);
    srv_tenant **a = realloc(T->t, sizeof *a * (T->n + 1));
    if (a)
        T->t = a;
    if (!t || !a || !(t->key = malloc(key_len + 1)) || !(t->name = strdup(name))) {
        if (t)
            free(t->key);
        free(t);
        return say(err, cap, "out of memory");
    }
    memcpy(t->key, key, key_len);
    t->key[key_len] = '\0';
    t->key_len = key_len;
    t->max_concurrent = max_concurrent;
    t->tokens_per_minute = tokens_per_minute;
    t->queue = queue;
    t->index = T->n;
    T->t[T->n++] = t;
    return 0;
}

/* A whole field as a number in [0, UINT32_MAX]. */
static int field_u32(const char *s, uint32_t *out)
{
    if (!isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v > UINT32_MAX)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

/* Lines of a file, whole, whatever their length; calls line(arg, text,
 * number) for each, stopping at its first non-zero return. */
static int each_line(const char *path, int (*line)(void *, char *, int, char *, size_t), void *arg, char *err,
                     size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return say(err, cap, "cannot open it: %s", strerror(errno));
    char *buf = NULL;
    size_t bcap = 0;
    ssize_t got;
    int lineno = 0, rc = 0;
    while (!rc && (got = getline(&buf, &bcap, f)) >= 0) {
        lineno++;
        if ((size_t)got != strlen(buf))
            rc = say(err, cap, "line %d: a NUL byte", lineno);
        else
            rc = line(arg, buf, lineno, err, cap);
    }
    if (!rc && ferror(f))
        rc = say(err, cap, "cannot read it: %s", strerror(errno));
    free(buf);
    fclose(f);
    return rc;
}

/* --api-keys: "KEY NAME [MAX_CONCURRENT [TOKENS_PER_MINUTE [QUEUE]]]",
 * '#' to the end of a line a comment. */
static int tenant_line(void *arg, char *s, int lineno, char *err, size_t cap)
{
    srv_tenants *T = arg;
    char *hash = strchr(s, '#');
    if (hash)
        *hash = '\0';
    char *field[6], *save = NULL;
    int n = 0;
    for (char *w = strtok_r(s, " \t\r\n\v\f", &save); w; w = strtok_r(NULL, " \t\r\n\v\f", &save))
        if (n < 6)
            field[n++] = w;
        else
            n = 7;
    if (!n)
        return 0;
    if (n < 2 || n > 5)
        return say(err, cap, "line %d: %s fields; the format is 'KEY NAME [MAX_CONCURRENT [TOKENS_PER_MINUTE "
                   "[QUEUE]]]'", lineno, n < 2 ? "too few" : "too many");
    uint32_t v[3] = {0, 0, 0};
    static const char *const what[3] = {"MAX_CONCURRENT", "TOKENS_PER_MINUTE", "QUEUE"};
    for (int i = 2; i < n; i++)
        if (field_u32(field[i], &v[i - 2]))
            return say(err, cap, "line %d: %s is '%s', not a whole number from 0 to %u", lineno, what[i - 2], field[i],
                       UINT32_MAX);
    char why[256];
    if (srv_tenants_add(T, field[0], strlen(field[0]), field[1], v[0], v[1], v[2], why, sizeof why))
        return say(err, cap, "line %d: %s", lineno, why);
    return 0;
}

int srv_tenants_load(srv_tenants *T, const char *path, char *err, size_t cap)
{
    size_t before = T->n;
    if (each_line(path, tenant_line, T, err, cap))
        return -1;
    return T->n > before ? 0 : say(err, cap, "no keys in it");
}

/* --api-key-file: one key a line, lines starting with '#' comments (as
 * llama-server); spaces around a key are not part of it. */
static int key_line(void *arg, char *s, int lineno, char *err, size_t cap)
{
    srv_tenants *T = arg;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    while (n && isspace((unsigned char)*s)) {
        s++;
        n--;
    }
    if (!n || *s == '#')
        return 0;
    char name[32], why[256];
    snprintf(name, sizeof name, "key%zu", T->n + 1);
    if (srv_tenants_add(T, s, n, name, 0, 0, 0, why, sizeof why))
        return say(err, cap, "line %d: %s", lineno, why);
    return 0;
}

int srv_tenants_load_keys(srv_tenants *T, const char *path, char *err, size_t cap)
{
    size_t before = T->n;
    if (each_line(path, key_line, T, err, cap))
        return -1;
    return T->n > before ? 0 : say(err, cap, "no keys in it");
}

void srv_tenants_free(srv_tenants *T)
{
    for (size_t i = 0; i < T->n; i++) {
        free(T->t[i]->key);
        free(T->t[i]->name);
        free(T->t[i]);
    }
    free(T->t);
    T->t = NULL;
    T->n = 0;
}

/* Whether a == b, in time that depends on a's length only (the client's
 * key), never on where it differs from the secret one. */
static int equal_ct(const char *a, size_t na, const char *b, size_t nb)
{
    volatile unsigned char d = na != nb;
    for (size_t i = 0; i < na; i++)
        d |= (unsigned char)a[i] ^ (unsigned char)b[i % nb];
    return d == 0;
}

srv_tenant *srv_tenant_find(srv_tenants *T, const char *authorization, const char *x_api_key)
{
    const char *k = authorization;
    if (k) {
        /* RFC 9110: the scheme is case-insensitive; spaces around are not
         * part of the key.  A bare key is taken too, as llama-server. */
        while (*k == ' ' || *k == '\t')
            k++;
        if (!strncasecmp(k, "bearer", 6) && (k[6] == ' ' || k[6] == '\t'))
            for (k += 6; *k == ' ' || *k == '\t';)
                k++;
    } else {
        k = x_api_key; /* llama-server's other header */
    }
    if (!k)
        return NULL;
    size_t n = strlen(k);
    while (n && (k[n - 1] == ' ' || k[n - 1] == '\t'))
        n--;
    if (!n)
        return NULL;
    srv_tenant *found = NULL;
    for (size_t i = 0; i < T->n; i++) /* every key, whichever matches */
        if (equal_ct(k, n, T->t[i]->key, T->t[i]->key_len))
            found = T->t[i];
    return found;
}

/* Starts a new minute of the token count when the last one is over. */
static void roll_window(srv_tenant *t, double now)
{
    if (now - t->window_start >= 60) {
        t->window_start = now;
        t->window_tokens = 0;
    }
}

static unsigned window_left(const srv_tenant *t, double now)
{
    double left = 60 - (now - t->window_start);
    return left < 1 ? 1 : (unsigned)left + 1;
}

unsigned srv_tenant_enter(srv_tenants *T, srv_tenant *t, uint32_t prompt_tokens, int (*give_up)(void *), void *arg,
                          int *gave_up)
{
    unsigned retry = 0;
    *gave_up = 0;
    pthread_mutex_lock(&T->lock);
    roll_window(t, srv_now());
    if (t->tokens_per_minute && t->window_tokens + prompt_tokens >= t->tokens_per_minute)
        retry = window_left(t, srv_now());
    else if (t->max_concurrent && t->in_flight >= t->max_concurrent && t->queued >= t->queue)
        retry = 1;
    else {
        /* Waiting here holds no server-wide slot: the caller takes one
         * after (a tenant's queue is its own). */
        t->queued++;
        while (t->max_concurrent && t->in_flight >= t->max_concurrent) {
            const struct timespec until = srv_after_ms(200);
            pthread_cond_timedwait(&T->freed, &T->lock, &until);
            if (give_up && give_up(arg)) {
                *gave_up = 1;
                break;
            }
        }
        t->queued--;
        if (!*gave_up) {
            t->in_flight++;
            /* The prompt is counted now; generated tokens as they come. */
            roll_window(t, srv_now());
            t->window_tokens += prompt_tokens;
        }
    }
    pthread_mutex_unlock(&T->lock);
    return retry;
}

void srv_tenant_leave(srv_tenants *T, srv_tenant *t)
{
    pthread_mutex_lock(&T->lock);
    t->in_flight--;
    pthread_cond_broadcast(&T->freed);
    pthread_mutex_unlock(&T->lock);
}

int srv_tenant_take_token(srv_tenants *T, srv_tenant *t)
{
    int ok = 1;
    pthread_mutex_lock(&T->lock);
    if (t->tokens_per_minute) {
        roll_window(t, srv_now());
        ok = t->window_tokens < t->tokens_per_minute;
        if (ok)
            t->window_tokens++;
    }
    pthread_mutex_unlock(&T->lock);
    return ok;
}
