/* Helpers shared by the OpenCL suites. */
#ifndef HX_CL_TEST_H
#define HX_CL_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/hx_test.h"

/* Opens a runtime on `devices` ("cpu,opencl" ...), PoCL as an FPGA when
 * `emulation`. */
static inline hx_runtime *hx_cl_test_open(const char *devices, int emulation)
{
    hx_runtime *rt = NULL;
    hx_runtime_options o = hx_runtime_options_default();
    o.devices = devices;
    o.fpga_emulation = emulation ? "pocl" : "off";
    o.cpu_threads = 2;
    HX_ASSERT_OK(hx_runtime_open(&rt, &o));
    return rt;
}

/* The first OpenCL device; fails the test (never skips) when there is
 * none, so a machine without a working OpenCL stack cannot pass. */
static inline int hx_cl_test_device(hx_runtime *rt)
{
    for (int i = 0; i < hx_runtime_device_count(rt); i++) {
        hx_device_info d;
        HX_ASSERT_OK(hx_runtime_device_info(rt, i, &d));
        if (d.family == HX_FAMILY_OPENCL)
            return i;
    }
    const char *why = hx_runtime_absence_reason(rt, HX_FAMILY_OPENCL);
    ck_abort_msg("no OpenCL device: %s", why ? why : "(no reason recorded)");
    return -1;
}

static inline int hx_cl_test_cpu(hx_runtime *rt)
{
    for (int i = 0; i < hx_runtime_device_count(rt); i++) {
        hx_device_info d;
        HX_ASSERT_OK(hx_runtime_device_info(rt, i, &d));
        if (d.family == HX_FAMILY_CPU)
            return i;
    }
    ck_abort_msg("no CPU device");
    return -1;
}

static inline void hx_cl_test_random(float *x, size_t n, unsigned seed)
{
    srand(seed);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
}

static inline hx_buffer *hx_cl_test_buffer(hx_runtime *rt, const void *data, size_t bytes)
{
    hx_buffer *b;
    void *p;
    HX_ASSERT_OK(hx_buffer_create(rt, bytes, &b));
    HX_ASSERT_OK(hx_buffer_acquire(b, HX_W, &p));
    memcpy(p, data, bytes);
    return b;
}

/* A private program cache for a test case, so tests neither read a stale
 * cache nor write into the user's. Runs in the parent (unchecked fixture). */
static char hx_cl_test_cache[256];

static inline void hx_cl_test_cache_setup(void)
{
    snprintf(hx_cl_test_cache, sizeof hx_cl_test_cache, "%s/hetero-cl-test-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(hx_cl_test_cache))
        hx_cl_test_cache[0] = '\0';
    else
        setenv("HX_CACHE_DIR", hx_cl_test_cache, 1);
}

static inline void hx_cl_test_cache_teardown(void)
{
    if (!hx_cl_test_cache[0])
        return;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", hx_cl_test_cache);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", hx_cl_test_cache);
    unsetenv("HX_CACHE_DIR");
}

#endif
