/* Injection: the per-device state, the spec parser and hx_device_inject. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "runtime/handle.h"
#include "runtime/inject.h"
#include "runtime/perfmodel.h"
#include "runtime/runtime.h"
#include "runtime/worker.h"

void hx_inject_init(hx_inject_state *st)
{
    memset(st, 0, sizeof *st);
    pthread_mutex_init(&st->lock, NULL);
    st->inj.slow = 1;
}

void hx_inject_destroy(hx_inject_state *st) { pthread_mutex_destroy(&st->lock); }

static hx_status check(const hx_injection *inj)
{
    if (!(inj->slow >= 1) || !isfinite(inj->slow) || inj->slow > 1e4)
        return hx_error(HX_ERR_INVALID_ARG, "injection: slow=%g (expected a factor from 1 to 10000)", inj->slow);
    if (!(inj->fail >= 0 && inj->fail <= 1))
        return hx_error(HX_ERR_INVALID_ARG, "injection: fail=%g (expected a fraction from 0 to 1)", inj->fail);
    return HX_OK;
}

hx_status hx_inject_set(hx_inject_state *st, const hx_injection *inj)
{
    hx_injection off = {.slow = 1};
    if (!inj)
        inj = &off;
    hx_status s = check(inj);
    if (s)
        return s;
    pthread_mutex_lock(&st->lock);
    st->inj = *inj;
    st->draws = 0;
    st->left = inj->count;
    atomic_store(&st->active, inj->slow != 1 || inj->fail > 0);
    pthread_mutex_unlock(&st->lock);
    return HX_OK;
}

/* splitmix64: a draw depends only on the seed and its rank. */
static double uniform(uint64_t seed, uint64_t i)
{
    uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

hx_inject_draw hx_inject_next(hx_inject_state *st)
{
    hx_inject_draw d = {1, 0, 0};
    if (!atomic_load_explicit(&st->active, memory_order_relaxed))
        return d;
    pthread_mutex_lock(&st->lock);
    if (st->inj.count == 0 || st->left > 0) {
        d.slow = st->inj.slow;
        d.risky = st->inj.fail > 0;
        d.fail = st->inj.fail > 0 && uniform(st->inj.seed, st->draws++) < st->inj.fail;
        if (st->inj.count && --st->left == 0)
            atomic_store(&st->active, 0);
    }
    pthread_mutex_unlock(&st->lock);
    return d;
}

static hx_status inject(hx_runtime *rt, int device, const hx_injection *inj)
{
    if (device < 0 || device >= rt->ndevices)
        return hx_error(HX_ERR_RANGE, "hx_device_inject: no device %d (%d devices)", device, rt->ndevices);
    hx_worker *w = rt->devices[device]->worker;
    if (!w)
        return hx_error(HX_ERR_STATE, "hx_device_inject: device %d has no worker", device);
    hx_status s = hx_inject_set(&w->inject, inj);
    /* Its times are no longer the device's own: keep them out of its model. */
    if (s == HX_OK && inj && inj->slow != 1)
        hx_perfmodel_taint(rt->sched.pm, device);
    return s;
}

hx_status hx_device_inject(hx_runtime *rt, int device, const hx_injection *inj)
{
    hx_api_enter();
    hx_status s = hx_handle_check(rt, HX_HANDLE_RUNTIME, "hx_device_inject");
    return hx_api_leave(s ? s : inject(rt, device, inj));
}

static const char *const kinds[] = {"cpu", "gpu", "fpga", "accelerator", NULL};

/* One entry: "dev=1,slow=3,fail=0.1,seed=7,count=5". */
static hx_status apply_entry(hx_runtime *rt, char *entry)
{
    int dev = -1, kind = -1, any = 0;
    hx_injection inj = {.slow = 1};
    for (char *save = NULL, *kv = strtok_r(entry, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        while (*kv == ' ')
            kv++;
        char *eq = strchr(kv, '=');
        if (!eq)
            return hx_error(HX_ERR_INVALID_ARG, "inject: '%s' is not key=value", kv);
        *eq = '\0';
        const char *k = kv, *v = eq + 1;
        char *end;
        if (!strcmp(k, "dev")) {
            long x = strtol(v, &end, 10);
            if (*end || end == v || x < 0 || x >= rt->ndevices)
                return hx_error(HX_ERR_INVALID_ARG, "inject: dev=%s (there are %d devices)", v, rt->ndevices);
            dev = (int)x;
        } else if (!strcmp(k, "kind")) {
            for (int i = 0; kinds[i]; i++)
                if (!strcmp(v, kinds[i]))
                    kind = i;
            if (kind < 0)
                return hx_error(HX_ERR_INVALID_ARG, "inject: kind=%s (expected cpu, gpu, fpga or accelerator)", v);
        } else if (!strcmp(k, "slow") || !strcmp(k, "fail")) {
            double x = strtod(v, &end);
            if (*end || end == v)
                return hx_error(HX_ERR_INVALID_ARG, "inject: %s=%s is not a number", k, v);
            *(k[0] == 's' ? &inj.slow : &inj.fail) = x;
            any = 1;
        } else if (!strcmp(k, "seed") || !strcmp(k, "count")) {
            unsigned long long x = strtoull(v, &end, 10);
            if (*end || end == v || *v == '-' || (k[0] == 'c' && x > 0xffffffffull))
                return hx_error(HX_ERR_INVALID_ARG, "inject: %s=%s is not a count", k, v);
            if (k[0] == 's')
                inj.seed = x;
            else
                inj.count = (uint32_t)x;
        } else {
            return hx_error(HX_ERR_INVALID_ARG, "inject: unknown key '%s' (dev, kind, slow, fail, seed, count)", k);
        }
    }
    if ((dev < 0) == (kind < 0))
        return hx_error(HX_ERR_INVALID_ARG, "inject: each entry names one device: dev=N or kind=K");
    if (!any)
        return hx_error(HX_ERR_INVALID_ARG, "inject: an entry without slow= or fail=");
    int matched = 0;
    for (int d = 0; d < rt->ndevices; d++) {
        if (dev >= 0 ? d != dev : (int)rt->devices[d]->info.kind != kind)
            continue;
        hx_status s = inject(rt, d, &inj);
        if (s)
            return s;
        matched++;
    }
    if (!matched)
        return hx_error(HX_ERR_NO_DEVICE, "inject: no %s device", kinds[kind]);
    return HX_OK;
}

hx_status hx_inject_apply_spec(hx_runtime *rt, const char *spec)
{
    size_t n = strlen(spec);
    char *copy = malloc(n + 1);
    if (!copy)
        return hx_error(HX_ERR_NO_MEMORY, "inject spec");
    memcpy(copy, spec, n + 1);
    hx_status s = HX_OK;
    for (char *save = NULL, *e = strtok_r(copy, ";", &save); e && !s; e = strtok_r(NULL, ";", &save)) {
        while (*e == ' ')
            e++;
        if (*e)
            s = apply_entry(rt, e);
    }
    free(copy);
    return s;
}
