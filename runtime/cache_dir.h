/* Where hetero keeps what it may rebuild (OpenCL program binaries,
 * performance models, synthetic models): one answer for every cache. */
#ifndef HX_RUNTIME_CACHE_DIR_H
#define HX_RUNTIME_CACHE_DIR_H

#include <stddef.h>

/* The cache folder `sub` in buf: $HX_CACHE_DIR/sub, else
 * $XDG_CACHE_HOME/hetero/sub, else ~/.cache/hetero/sub.  NULL when caching
 * is off (HX_CACHE_DIR=off or 0), when there is no home, or when the path
 * does not fit. */
const char *hx_cache_dir(const char *sub, char *buf, size_t size);

#endif
