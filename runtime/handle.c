/* The registry of open handles (handle.h says why): an open-addressing
 * hash table keyed by address, linear probing, deletion by shifting the
 * run back (no tombstones, so a server that opens and closes sessions for
 * weeks keeps a table sized by its open handles).  The table goes when the
 * last handle closes. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "runtime/handle.h"

typedef struct {
    const void *h; /* NULL: a free slot */
    const void *owner;
    hx_handle_kind kind;
    char label[72];
} entry;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static entry *table;
static size_t cap, count; /* cap: a power of two, or 0 */

static const char *kind_name(hx_handle_kind k)
{
    switch (k) {
    case HX_HANDLE_RUNTIME: return "runtime";
    case HX_HANDLE_MODEL: return "model";
    case HX_HANDLE_SESSION: return "session";
    }
    return "handle";
}

static size_t home(const void *h)
{
    uint64_t x = (uint64_t)(uintptr_t)h >> 4;
    return (size_t)((x * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

/* The slot holding h, or the free slot where it would go. */
static size_t find(const void *h)
{
    size_t i = home(h);
    while (table[i].h && table[i].h != h)
        i = (i + 1) & (cap - 1);
    return i;
}

static int grow(void)
{
    size_t old_cap = cap, new_cap = cap ? 2 * cap : 64;
    entry *old = table, *t = calloc(new_cap, sizeof *t);
    if (!t)
        return 0;
    table = t;
    cap = new_cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].h)
            table[find(old[i].h)] = old[i];
    free(old);
    return 1;
}

hx_status hx_handle_add(const void *h, hx_handle_kind kind, const void *owner, const char *label)
{
    pthread_mutex_lock(&lock);
    if (2 * (count + 1) > cap && !grow()) {
        pthread_mutex_unlock(&lock);
        return hx_error(HX_ERR_NO_MEMORY, "the table of open handles");
    }
    entry *e = &table[find(h)];
    e->h = h;
    e->owner = owner;
    e->kind = kind;
    snprintf(e->label, sizeof e->label, "%s", label ? label : "");
    count++;
    pthread_mutex_unlock(&lock);
    return HX_OK;
}

/* Empties slot i and moves back the entries of its run that could not sit
 * in their home slot while it was taken; under the lock. */
static void erase(size_t i)
{
    size_t j = i;
    for (;;) {
        table[i].h = NULL;
        for (;;) {
            j = (j + 1) & (cap - 1);
            if (!table[j].h)
                return;
            size_t k = home(table[j].h);
            /* Entry j stays unless its home lies cyclically in (i, j]. */
            if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
                continue;
            break;
        }
        table[i] = table[j];
        i = j;
    }
}

static hx_status refused(const void *h, hx_handle_kind kind, const char *fn)
{
    if (!h)
        return hx_error(HX_ERR_INVALID_ARG, "%s: NULL %s", fn, kind_name(kind));
    return hx_error(HX_ERR_STATE, "%s: %p is not an open %s (closed already, or never opened)", fn, h,
                    kind_name(kind));
}

static int open_as(const void *h, hx_handle_kind kind, size_t *slot)
{
    if (!h || !cap)
        return 0;
    *slot = find(h);
    return table[*slot].h == h && table[*slot].kind == kind;
}

hx_status hx_handle_remove(const void *h, hx_handle_kind kind, const char *fn)
{
    pthread_mutex_lock(&lock);
    size_t i;
    int ok = open_as(h, kind, &i);
    if (ok) {
        erase(i);
        if (--count == 0) {
            free(table);
            table = NULL;
            cap = 0;
        }
    }
    pthread_mutex_unlock(&lock);
    return ok ? HX_OK : refused(h, kind, fn);
}

hx_status hx_handle_check(const void *h, hx_handle_kind kind, const char *fn)
{
    pthread_mutex_lock(&lock);
    size_t i;
    int ok = open_as(h, kind, &i);
    pthread_mutex_unlock(&lock);
    return ok ? HX_OK : refused(h, kind, fn);
}

hx_status hx_handle_check_call(const void *h, hx_handle_kind kind, const void *out, const char *fn)
{
    hx_status s = hx_handle_check(h, kind, fn);
    if (s == HX_OK && !out)
        s = hx_error(HX_ERR_INVALID_ARG, "%s: NULL output", fn);
    return s;
}

size_t hx_handle_owned(const void *owner, hx_handle_kind kind, char *label, size_t cap_label)
{
    size_t n = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < cap; i++) {
        if (!table[i].h || table[i].owner != owner || table[i].kind != kind)
            continue;
        if (n++ == 0 && label && cap_label)
            snprintf(label, cap_label, "%s", table[i].label);
    }
    pthread_mutex_unlock(&lock);
    return n;
}
