/* llama.cpp's sampler names and letters for hetero-run's --samplers and
 * --sampling-seq and hetero-server's "samplers" field: a name (canonical,
 * kebab-case, without '_', or an alias: nucleus, temp, typ) as the letter
 * of hx_sampling.samplers.  Header-only. */
#ifndef HX_TOOLS_CLI_SAMPLERS_H
#define HX_TOOLS_CLI_SAMPLERS_H

#include <string.h>

/* The letters hetero's chain takes (hx_sampling.samplers). */
#define CLI_SAMPLER_LETTERS "edskypmxt"
/* What they are, for messages. */
#define CLI_SAMPLER_NAMES "penalties, dry, top_n_sigma, top_k, typ_p, top_p, min_p, xtc, temperature"

/* The letter of a sampler name, or 0 for a name llama.cpp does not have;
 * llama.cpp's infill and adaptive_p give 'i' and 'a', which hetero's chain
 * does not take. */
static inline char cli_sampler_letter(const char *name)
{
    static const struct { const char *name; char c; } names[] = {
        {"dry", 'd'},   {"top_k", 'k'},       {"top_p", 'p'},     {"top_n_sigma", 's'}, {"typ_p", 'y'},
        {"min_p", 'm'}, {"temperature", 't'}, {"xtc", 'x'},       {"penalties", 'e'},   {"nucleus", 'p'},
        {"temp", 't'},  {"typ", 'y'},         {"infill", 'i'},    {"adaptive_p", 'a'},
    };
    char canon[32];
    size_t n = strlen(name);
    if (n >= sizeof canon)
        return 0;
    for (size_t i = 0; i <= n; i++)
        canon[i] = name[i] == '-' ? '_' : name[i];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!strcmp(canon, names[i].name))
            return names[i].c;
        char plain[32]; /* "topk", "minp" */
        size_t k = 0;
        for (const char *c = names[i].name; *c; c++)
            if (*c != '_')
                plain[k++] = *c;
        plain[k] = '\0';
        if (strchr(names[i].name, '_') && !strcmp(canon, plain))
            return names[i].c;
    }
    return 0;
}

#endif
