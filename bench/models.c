/* The models a run measures: -m files, or hetero's embedded synthetic
 * models, written once to hetero's cache (hx_model_synthetic_cached) under the same names hetero-run uses, so both tools share them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench/bench.h"

static int synthetic(const char *spec, char *path, size_t cap)
{
    char preset[64], type[32];
    const char *colon = strchr(spec, ':');
    snprintf(preset, sizeof preset, "%.*s", colon ? (int)(colon - spec) : (int)strlen(spec), spec);
    snprintf(type, sizeof type, "%s", colon ? colon + 1 : "f16");
    int written;
    if (hx_model_synthetic_cached(preset, type, path, cap, &written) != HX_OK) {
        fprintf(stderr, "hetero-bench: --synthetic '%s': %s\n", spec, hx_last_error());
        return -1;
    }
    if (written)
        fprintf(stderr, "hetero-bench: wrote the embedded '%s' model (%s) to %s\n", preset, type, path);
    return 0;
}

int hxb_models_resolve(const hxb_params *p, hxb_results *r)
{
    int n = p->models.n + p->synthetic.n + p->shapes.n;
    r->models = calloc((size_t)n, sizeof *r->models);
    if (!r->models) {
        fprintf(stderr, "hetero-bench: out of memory\n");
        return -1;
    }
    for (int i = 0; i < p->models.n; i++) {
        const char *m = p->models.item[i];
        struct stat st;
        int e = stat(m, &st) ? errno : 0;
        if (e || !S_ISREG(st.st_mode)) {
            fprintf(stderr, "hetero-bench: -m '%s': %s\n", m, e ? strerror(e) : "not a regular file");
            return -1;
        }
        snprintf(r->models[r->nmodels++].path, sizeof r->models[0].path, "%s", m);
    }
    for (int i = 0; i < p->synthetic.n; i++)
        if (synthetic(p->synthetic.item[i], r->models[r->nmodels++].path, sizeof r->models[0].path))
            return -1;
    for (int i = 0; i < p->shapes.n; i++) {
        hxb_model *md = &r->models[r->nmodels++];
        md->shapes = 1;
        snprintf(md->path, sizeof md->path, "%s", p->shapes.item[i]);
    }
    return 0;
}

/* Shapes are "NAME[:TYPE]" (q4_0 when no type is given). */
/* Under mpirun the other ranks load their stages of each model too
 * (hx_dist_start), and free them when this one is freed. */
hx_status hxb_model_open(hx_runtime *rt, const hxb_model *md, const hx_model_options *mo, hx_model **out)
{
    if (!md->shapes) {
        hx_status s = hx_model_load(rt, md->path, mo, out);
        if (s == HX_OK && (s = hx_dist_start(*out, s)) != HX_OK) {
            /* said here: freeing the model clears the thread's last error */
            fprintf(stderr, "hetero-bench: %s\n", hx_last_error());
            hx_model_free(*out);
            *out = NULL;
        }
        return s;
    }
    char name[128];
    const char *colon = strchr(md->path, ':');
    snprintf(name, sizeof name, "%.*s", colon ? (int)(colon - md->path) : (int)strlen(md->path), md->path);
    return hx_model_load_shapes(rt, name, colon ? colon + 1 : "q4_0", mo, out);
}
