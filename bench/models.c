/* The models a run measures: -m files, or hetero's embedded synthetic
 * models, written once to $XDG_CACHE_HOME/hetero/models (~/.cache without
 * it) under the same names hetero-run uses, so both tools share them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/bench.h"

static int cache_dir(char *dir, size_t cap)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char base[512];
    if (xdg && *xdg)
        snprintf(base, sizeof base, "%s", xdg);
    else
        snprintf(base, sizeof base, "%s/.cache", home && *home ? home : "/tmp");
    mkdir(base, 0755);
    snprintf(dir, cap, "%s/hetero", base);
    mkdir(dir, 0755);
    size_t l = strlen(dir);
    snprintf(dir + l, cap - l, "/models");
    if (mkdir(dir, 0755) && errno != EEXIST) {
        fprintf(stderr, "hetero-bench: cannot create %s: %s\n", dir, strerror(errno));
        return -1;
    }
    return 0;
}

static int synthetic(const char *spec, char *path, size_t cap)
{
    char preset[64], type[32];
    const char *colon = strchr(spec, ':');
    snprintf(preset, sizeof preset, "%.*s", colon ? (int)(colon - spec) : (int)strlen(spec), spec);
    snprintf(type, sizeof type, "%s", colon ? colon + 1 : "f16");
    char dir[600];
    if (cache_dir(dir, sizeof dir))
        return -1;
    snprintf(path, cap, "%s/synthetic-%s-%s.gguf", dir, preset, type);
    struct stat st;
    if (stat(path, &st) == 0)
        return 0;
    fprintf(stderr, "hetero-bench: writing the embedded '%s' model (%s) to %s\n", preset, type, path);
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    if (hx_model_write_synthetic(tmp, preset, type, 1234) != HX_OK) {
        fprintf(stderr, "hetero-bench: --synthetic '%s': %s\n", spec, hx_last_error());
        remove(tmp);
        return -1;
    }
    if (rename(tmp, path)) {
        fprintf(stderr, "hetero-bench: cannot write %s: %s\n", path, strerror(errno));
        remove(tmp);
        return -1;
    }
    return 0;
}

int hxb_models_resolve(const hxb_params *p, hxb_results *r)
{
    int n = p->models.n + p->synthetic.n;
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
    return 0;
}
