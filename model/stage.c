/* A model as one stage of a pipeline over processes (docs/mpi.md): which
 * layers each rank owns, by hand ("--split 12,18": layers per rank) or
 * balanced by what a decode step reads of each layer's weights, and
 * whether this rank's share fits in its memory.  Every rank computes the
 * same split from the same file and options, so no rank has to tell the
 * others; the transport (dist/) checks that they agree before the first
 * step.  With tensor parallelism (hx_model_stage_configure_tp) every rank
 * holds every layer instead, a slice of each (model/tensor_slice.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/context.h"
#include "model/model.h"
#include "runtime/error.h"

static struct {
    int rank, size;
    uint32_t n_split;
    uint32_t split[HX_MAX_RANKS];
    int tp; /* tensor parallelism instead of a pipeline (model/tensor_slice.c) */
} config = {0, 1, 0, {0}, 0};

void hx_model_stage_configure_tp(int on)
{
    config.tp = on;
}

hx_status hx_model_stage_configure(int rank, int size, const char *split)
{
    if (size < 1 || size > HX_MAX_RANKS || rank < 0 || rank >= size)
        return hx_error(HX_ERR_INVALID_ARG, "pipeline of %d ranks (1 to %d), rank %d", size, HX_MAX_RANKS, rank);
    uint32_t n = 0, v[HX_MAX_RANKS];
    for (const char *p = split; p && *p;) {
        char *end;
        unsigned long x = strtoul(p, &end, 10);
        if (end == p || *p < '0' || *p > '9' || x == 0 || x > 1000000 || (*end && *end != ','))
            return hx_error(HX_ERR_INVALID_ARG, "split '%s': expected layers per rank, e.g. 12,18, each at least 1",
                            split);
        if (n == HX_MAX_RANKS)
            return hx_error(HX_ERR_INVALID_ARG, "split '%s': more than %d ranks", split, HX_MAX_RANKS);
        v[n++] = (uint32_t)x;
        p = *end ? end + 1 : end;
    }
    if (n && n != (uint32_t)size)
        return hx_error(HX_ERR_INVALID_ARG, "split '%s' names %u ranks; the job has %d", split, n, size);
    config.rank = rank;
    config.size = size;
    config.n_split = n;
    memcpy(config.split, v, sizeof *v * n);
    return HX_OK;
}

static uint64_t bytes_of(const hx_weight *w)
{
    return w->buf ? hx_type_row_size(w->type, w->ne0) * w->ne1 : 0;
}

uint64_t hx_model_layer_bytes(const hx_model *m, uint32_t l)
{
    uint64_t b = 0;
    if (l == m->info.n_layer)
        return bytes_of(&m->output) + bytes_of(&m->out_norm) +
               (m->output.buf == m->tok_embd.buf ? 0 : bytes_of(&m->tok_embd));
    for (int i = 0; i < HX_LAYER_SLOTS; i++)
        b += bytes_of(&m->layers[l].w[i]);
    return b;
}

/* Cuts the layers where the running cost (rank 0's head first) crosses
 * each rank's equal share, at the nearer side of the layer, leaving every
 * rank at least one layer. */
static void balance(const hx_model *m, uint32_t *first, int size)
{
    const uint32_t L = m->info.n_layer;
    double total = (double)hx_model_layer_bytes(m, L), acc = total;
    for (uint32_t l = 0; l < L; l++)
        total += (double)hx_model_layer_bytes(m, l);
    first[0] = 0;
    uint32_t l = 0;
    for (int r = 1; r < size; r++) {
        const double target = total * r / size;
        while (l < L - (uint32_t)(size - r) &&
               (l < first[r - 1] + 1 || acc + (double)hx_model_layer_bytes(m, l) / 2 <= target))
            acc += (double)hx_model_layer_bytes(m, l++);
        first[r] = l;
    }
    first[size] = L;
}

/* The weights rank r maps and reads: its layers, and rank 0 the head. */
uint64_t hx_model_stage_weight_bytes(const hx_model *m, int r)
{
    uint64_t b = r == 0 ? hx_model_layer_bytes(m, m->info.n_layer) : 0;
    for (uint32_t l = m->stage.first[r]; l < m->stage.first[r + 1]; l++)
        b += hx_model_layer_bytes(m, l);
    return b;
}

hx_status hx_model_stage_plan(hx_model *m)
{
    hx_model_stage *st = &m->stage;
    const uint32_t L = m->info.n_layer;
    memset(st, 0, sizeof *st);
    st->rank = config.rank;
    st->size = config.size;
    st->first[1] = L;
    if (config.size == 1)
        return HX_OK;
    if (config.tp) { /* every rank every layer, a slice of each */
        for (int r = 1; r <= config.size; r++)
            st->first[r] = L;
        return hx_model_tp_slice(m, config.rank, config.size);
    }
    if (m->opts.kv_split)
        return hx_error(HX_ERR_UNSUPPORTED, "kv_split %u with a pipeline over %d ranks: not supported (each rank's "
                                            "attention is its own; leave HX_KV_SPLIT unset)",
                        m->opts.kv_split, config.size);
    if ((uint32_t)config.size > L)
        return hx_error(HX_ERR_INVALID_ARG, "a pipeline of %d ranks for %u layers: each rank needs a layer (at most "
                                            "%u ranks)", config.size, L, L);
    if (config.n_split) {
        uint64_t sum = 0;
        for (uint32_t r = 0; r < config.n_split; r++)
            sum += config.split[r];
        if (sum != L) {
            char text[HX_MAX_RANKS * 8] = "", *p = text;
            for (uint32_t r = 0; r < config.n_split; r++)
                p += snprintf(p, sizeof text - (size_t)(p - text), "%s%u", r ? "+" : "", config.split[r]);
            return hx_error(HX_ERR_INVALID_ARG, "split %s = %llu layers; the model has %u", text,
                            (unsigned long long)sum, L);
        }
        for (int r = 0; r < config.size; r++)
            st->first[r + 1] = st->first[r] + config.split[r];
    } else {
        balance(m, st->first, config.size);
    }
    return HX_OK;
}
