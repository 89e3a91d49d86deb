/* The cache directory (runtime/cache_dir.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cache_dir.h"

const char *hx_cache_dir(const char *sub, char *buf, size_t size)
{
    const char *root = getenv("HX_CACHE_DIR");
    int n;
    if (root && (!strcmp(root, "off") || !strcmp(root, "0")))
        return NULL;
    if (root && *root)
        n = snprintf(buf, size, "%s/%s", root, sub);
    else if ((root = getenv("XDG_CACHE_HOME")) && *root)
        n = snprintf(buf, size, "%s/hetero/%s", root, sub);
    else if ((root = getenv("HOME")) && *root)
        n = snprintf(buf, size, "%s/.cache/hetero/%s", root, sub);
    else
        return NULL;
    return n > 0 && (size_t)n < size ? buf : NULL;
}
