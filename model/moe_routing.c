/* What a mixture of experts' router is expected to choose (hx_model's
 * expert_p, which the graph turns into each expert task's expected work
 * and the placement planner into where each expert group goes), and the
 * tally files that carry a router's measured choices from one run to the
 * plan of another.
 *
 * hx_model_options.moe_routing / HX_MOE_ROUTING:
 *   uniform   every expert alike (what a load-balancing loss aims for);
 *   zipf:S    expert i's share proportional to 1 / (i + 1)^S;
 *   measured  the router's own tallies (hx_model_expert_counts), once
 *             HX_MOE_MEASURED_MIN tokens were routed, refreshed each time
 *             the tokens seen double; until then nothing is assumed;
 *   a path    a tally file (hx_model_expert_tally_save): its counts, to
 *             which a model with weights adds its own as it runs.
 * The default is `measured` for a model with weights (a router to
 * measure: the tallies are what this router does, where a declaration is
 * a guess) and `uniform` for shapes without weights (no router runs). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/moe_routing.h"
#include "runtime/buffer.h"
#include "runtime/error.h"
#include "runtime/handle.h"

/* Tokens routed before measured shares stand in for "unknown". */
#define HX_MOE_MEASURED_MIN 256
/* Shares that move less than this (total variation, in every layer) do
 * not make the plans again. */
#define HX_MOE_SHARES_MOVE 0.02

static const char tally_magic[] = "hetero-expert-tally 1";

/* The declared distributions: uniform (S = 0) or zipf:S. */
static hx_status declare(hx_model *m, double S)
{
    const uint32_t E = m->hp.n_expert, L = m->info.n_layer;
    if (!(m->expert_p = malloc(sizeof *m->expert_p * E * L)))
        return hx_error(HX_ERR_NO_MEMORY, "expert shares");
    double sum = 0;
    for (uint32_t e = 0; e < E; e++)
        sum += pow(e + 1.0, -S);
    for (uint32_t l = 0; l < L; l++)
        for (uint32_t e = 0; e < E; e++)
            m->expert_p[(size_t)l * E + e] = (float)(pow(e + 1.0, -S) / sum);
    if (S > 0)
        snprintf(m->expert_p_desc, sizeof m->expert_p_desc, "declared zipf:%g", S);
    else
        snprintf(m->expert_p_desc, sizeof m->expert_p_desc, "declared uniform");
    m->expert_p_source = m->expert_p_desc;
    return HX_OK;
}

/* Reads a tally file into m->expert_prior ([n_layer][n_expert]). */
static hx_status load_tally(hx_model *m, const char *path, const char *what)
{
    const uint32_t E = m->hp.n_expert, L = m->info.n_layer;
    FILE *f = fopen(path, "r");
    if (!f)
        return hx_error(HX_ERR_IO, "%s '%s': uniform, zipf:S, measured or a tally file (%s)", what, path,
                        strerror(errno));
    hx_status s = HX_OK;
    char line[64];
    unsigned layers = 0, experts = 0, used = 0;
    uint64_t *c = calloc((size_t)E * L, sizeof *c);
    if (!c)
        s = hx_error(HX_ERR_NO_MEMORY, "tally file");
    if (s == HX_OK && (!fgets(line, sizeof line, f) || strncmp(line, tally_magic, strlen(tally_magic)) ||
                       (line[strlen(tally_magic)] != '\n' && line[strlen(tally_magic)] != 0)))
        s = hx_error(HX_ERR_FORMAT, "%s '%s': not a tally file (its first line is not '%s')", what, path, tally_magic);
    if (s == HX_OK && fscanf(f, " layers %u experts %u used %u", &layers, &experts, &used) != 3)
        s = hx_error(HX_ERR_FORMAT, "%s '%s': no 'layers L experts E used K' line", what, path);
    if (s == HX_OK && (layers != L || experts != E || used != m->hp.n_expert_used))
        s = hx_error(HX_ERR_INVALID_ARG, "%s '%s': a tally of %u layers x %u experts (%u used), the model has %u x %u (%u used)",
                     what, path, layers, experts, used, L, E, m->hp.n_expert_used);
    for (uint32_t l = 0; l < L && s == HX_OK; l++) {
        unsigned at = 0;
        if (fscanf(f, " layer %u :", &at) != 1 || at != l) {
            s = hx_error(HX_ERR_FORMAT, "%s '%s': 'layer %u:' expected", what, path, l);
            break;
        }
        for (uint32_t e = 0; e < E && s == HX_OK; e++) {
            char word[32];
            if (fscanf(f, " %31s", word) != 1) {
                s = hx_error(HX_ERR_FORMAT, "%s '%s': layer %u has fewer than %u counts", what, path, l, E);
                break;
            }
            char *end = NULL;
            errno = 0;
            unsigned long long v = strtoull(word, &end, 10);
            if (word[0] == '-' || end == word || *end || errno)
                s = hx_error(HX_ERR_FORMAT, "%s '%s': layer %u, expert %u: '%s' is not a count", what, path, l, e, word);
            c[(size_t)l * E + e] = v;
        }
    }
    char rest[2];
    if (s == HX_OK && fscanf(f, " %1s", rest) == 1)
        s = hx_error(HX_ERR_FORMAT, "%s '%s': text after layer %u's counts", what, path, L - 1);
    fclose(f);
    if (s) {
        free(c);
        return s;
    }
    m->expert_prior = c;
    return HX_OK;
}

/* Shares from the prior and the live tallies (NULL: none), per layer; a
 * layer with fewer than `min_entries` entries keeps what it had (uniform
 * when the others have shares and it had none).  Returns the largest
 * move of a layer's shares (total variation; 1 when there were none
 * before), 0 when no layer has enough entries, -1 on no memory. */
static double shares_from(hx_model *m, const uint64_t *live, uint64_t min_entries)
{
    const uint32_t E = m->hp.n_expert, L = m->info.n_layer;
    int any = 0;
    for (uint32_t l = 0; l < L && !any; l++) {
        uint64_t tot = 0;
        for (uint32_t e = 0; e < E; e++) {
            size_t i = (size_t)l * E + e;
            tot += (m->expert_prior ? m->expert_prior[i] : 0) + (live ? live[i] : 0);
        }
        any = tot && tot >= min_entries;
    }
    if (!any)
        return 0;
    float *p = m->expert_p;
    if (!p) {
        if (!(p = malloc(sizeof *p * E * L)))
            return -1;
        for (size_t i = 0; i < (size_t)E * L; i++)
            p[i] = 1.0f / (float)E;
    }
    double moved = m->expert_p ? 0 : 1;
    for (uint32_t l = 0; l < L; l++) {
        uint64_t tot = 0;
        for (uint32_t e = 0; e < E; e++) {
            size_t i = (size_t)l * E + e;
            tot += (m->expert_prior ? m->expert_prior[i] : 0) + (live ? live[i] : 0);
        }
        if (!tot || tot < min_entries)
            continue;
        double tv = 0;
        for (uint32_t e = 0; e < E; e++) {
            size_t i = (size_t)l * E + e;
            float v = (float)((double)((m->expert_prior ? m->expert_prior[i] : 0) + (live ? live[i] : 0)) / (double)tot);
            tv += fabs((double)v - (double)p[i]) / 2;
            p[i] = v;
        }
        moved = fmax(moved, tv);
    }
    m->expert_p = p;
    return moved;
}

hx_status hx_moe_routing_setup(hx_model *m)
{
    if (!m->hp.n_expert)
        return HX_OK;
    const char *what = m->opts.moe_routing ? "moe_routing" : "HX_MOE_ROUTING";
    const char *spec = m->opts.moe_routing ? m->opts.moe_routing : getenv("HX_MOE_ROUTING");
    const int router = m->gguf != NULL; /* weights: a router that runs */
    free(m->expert_p);
    m->expert_p = NULL;
    m->expert_p_source = NULL;
    if (!spec || !*spec)
        spec = router ? "measured" : "uniform";
    if (!strcmp(spec, "uniform"))
        return declare(m, 0);
    if (!strncmp(spec, "zipf:", 5)) {
        char *end = NULL;
        double S = strtod(spec + 5, &end);
        if (end == spec + 5 || *end || !(S >= 0 && S <= 8))
            return hx_error(HX_ERR_INVALID_ARG, "%s '%s': uniform, zipf:S with 0 <= S <= 8, measured or a tally file",
                            what, spec);
        return declare(m, S);
    }
    if (!strcmp(spec, "measured")) {
        if (!router)
            return hx_error(HX_ERR_INVALID_ARG,
                            "%s 'measured': a model without weights has no router to measure; give a tally file "
                            "(hx_model_expert_tally_save, hetero-run --moe-tally)", what);
        m->routing_measured = 1;
        m->routing_next = HX_MOE_MEASURED_MIN;
        snprintf(m->expert_p_desc, sizeof m->expert_p_desc, "measured (none yet: %d tokens first)", HX_MOE_MEASURED_MIN);
        m->expert_p_source = m->expert_p_desc;
        return HX_OK;
    }
    hx_status s = load_tally(m, spec, what);
    if (s)
        return s;
    if (shares_from(m, NULL, 1) < 0)
        return hx_error(HX_ERR_NO_MEMORY, "expert shares");
    /* A file of zeros (or a layer of them): those layers' shares unknown
     * at first, uniform once others are known. */
    const char *base = strrchr(spec, '/');
    snprintf(m->expert_tally_file, sizeof m->expert_tally_file, "%s", base ? base + 1 : spec);
    snprintf(m->expert_p_desc, sizeof m->expert_p_desc, "tally file %s", m->expert_tally_file);
    m->expert_p_source = m->expert_p_desc;
    m->routing_measured = router;
    m->routing_next = HX_MOE_MEASURED_MIN;
    return HX_OK;
}

/* The router's live tallies (the caller holds the evaluation lock). */
static hx_status tallies(hx_model *m, uint64_t *out)
{
    const size_t n = (size_t)m->hp.n_expert * m->info.n_layer;
    void *host;
    hx_status s = hx_buffer_acquire(m->expert_counts, HX_R, &host);
    if (s)
        return s;
    memcpy(out, host, n * sizeof *out);
    return HX_OK;
}

int hx_moe_routing_update(hx_model *m, uint32_t T)
{
    m->routing_tokens += T;
    if (!m->routing_measured || m->routing_tokens < m->routing_next || !m->expert_counts)
        return 0;
    m->routing_next = 2 * m->routing_tokens;
    const size_t n = (size_t)m->hp.n_expert * m->info.n_layer;
    uint64_t *live = malloc(n * sizeof *live);
    if (!live || tallies(m, live)) {
        free(live);
        return 0; /* the shares stay as they were */
    }
    uint64_t entries = 0;
    for (uint32_t e = 0; e < m->hp.n_expert; e++)
        entries += live[(size_t)hx_model_stage_l0(m) * m->hp.n_expert + e];
    const int had = m->expert_p != NULL;
    double moved = shares_from(m, live, (uint64_t)HX_MOE_MEASURED_MIN * m->hp.n_expert_used);
    free(live);
    if (moved < 0 || (!had && !m->expert_p))
        return 0; /* not enough routed yet */
    unsigned long long tokens = entries / m->hp.n_expert_used;
    if (m->expert_tally_file[0])
        snprintf(m->expert_p_desc, sizeof m->expert_p_desc, "tally file %s + measured over %llu tokens",
                 m->expert_tally_file, tokens);
    else
        snprintf(m->expert_p_desc, sizeof m->expert_p_desc, "measured over %llu tokens", tokens);
    m->expert_p_source = m->expert_p_desc;
    if (!had || moved > HX_MOE_SHARES_MOVE) {
        m->routing_version++;
        return 1;
    }
    return 0;
}

static hx_status tally_save(hx_model *m, const char *path)
{
    hx_status s = hx_handle_check(m, HX_HANDLE_MODEL, "hx_model_expert_tally_save");
    if (s)
        return s;
    if (!path)
        return hx_error(HX_ERR_INVALID_ARG, "hx_model_expert_tally_save: NULL path");
    if (!m->hp.n_expert)
        return hx_error(HX_ERR_UNSUPPORTED, "hx_model_expert_tally_save: the model has no experts");
    const uint32_t E = m->hp.n_expert, L = m->info.n_layer;
    uint64_t *c = malloc(sizeof *c * E * L);
    if (!c)
        return hx_error(HX_ERR_NO_MEMORY, "tally");
    pthread_mutex_lock(&m->eval_lock);
    s = tallies(m, c);
    pthread_mutex_unlock(&m->eval_lock);
    for (size_t i = 0; s == HX_OK && m->expert_prior && i < (size_t)E * L; i++)
        c[i] += m->expert_prior[i];
    FILE *f = s ? NULL : fopen(path, "w");
    if (s == HX_OK && !f)
        s = hx_error(HX_ERR_IO, "hx_model_expert_tally_save: %s: %s", path, strerror(errno));
    if (f) {
        fprintf(f, "%s\nlayers %u experts %u used %u\n", tally_magic, L, E, m->hp.n_expert_used);
        for (uint32_t l = 0; l < L; l++) {
            fprintf(f, "layer %u:", l);
            for (uint32_t e = 0; e < E; e++)
                fprintf(f, " %llu", (unsigned long long)c[(size_t)l * E + e]);
            fputc('\n', f);
        }
        if (fclose(f))
            s = hx_error(HX_ERR_IO, "hx_model_expert_tally_save: %s: %s", path, strerror(errno));
    }
    free(c);
    return s;
}

hx_status hx_model_expert_tally_save(hx_model *m, const char *path)
{
    hx_api_enter();
    return hx_api_leave(tally_save(m, path));
}
