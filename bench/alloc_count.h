/* Counts every allocation of the process: malloc, calloc and realloc pass
 * through here on their way to the C library's own.  It defines them, so
 * one file of a program includes it (bench-decode, the replay suite).
 * Under a sanitizer, whose allocator replaces the C library's, it defines
 * nothing and HX_ALLOC_COUNTING is 0: the count stays at zero. */
#ifndef HX_BENCH_ALLOC_COUNT_H
#define HX_BENCH_ALLOC_COUNT_H

#include <stdatomic.h>
#include <stddef.h>

#if defined(__SANITIZE_ADDRESS__)
#define HX_ALLOC_COUNTING 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define HX_ALLOC_COUNTING 0
#endif
#endif
#ifndef HX_ALLOC_COUNTING
#define HX_ALLOC_COUNTING 1
#endif

static _Atomic unsigned long hx_allocations;

#if HX_ALLOC_COUNTING

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);

void *malloc(size_t n)
{
    atomic_fetch_add_explicit(&hx_allocations, 1, memory_order_relaxed);
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
    atomic_fetch_add_explicit(&hx_allocations, 1, memory_order_relaxed);
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
    atomic_fetch_add_explicit(&hx_allocations, 1, memory_order_relaxed);
    return __libc_realloc(p, n);
}

#endif

/* Allocations so far. */
static inline unsigned long hx_allocations_count(void) { return atomic_load(&hx_allocations); }

#endif
