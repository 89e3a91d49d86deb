/* Which SIMD levels this CPU and its OS run: cpuid says what the CPU
 * implements, xgetbv whether the OS saves the wider register state (a CPU
 * with AVX-512 under an OS that does not save zmm must not use it). */
#include <cpuid.h>
#include <pthread.h>
#include <stdatomic.h>
#include <strings.h>

#include "kernels_cpu/quant.h"

static uint32_t features;
static hx_simd_level simd_max;
static pthread_once_t features_once = PTHREAD_ONCE_INIT;
/* Set once features and simd_max are: the kernels' lookups read them
 * without a pthread_once call each. */
static _Atomic int detected;

static hx_simd_level level_of(uint32_t f);

static uint64_t read_xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static void detect(void)
{
    unsigned a, b, c, d;
    uint32_t f = 0;
    if (!__get_cpuid(0, &a, &b, &c, &d))
        return;
    const int intel = b == 0x756e6547 && d == 0x49656e69 && c == 0x6c65746e; /* "GenuineIntel" */
    const int amd = b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163; /* "AuthenticAMD" */
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return;
    /* the family as AMD numbers it: 0x19 Zen 3 and 4, 0x1A Zen 5 */
    const unsigned family = ((a >> 8) & 0xf) == 0xf ? 0xf + ((a >> 20) & 0xff) : (a >> 8) & 0xf;
    const int osxsave = (c >> 27) & 1;
    if ((c >> 28) & 1)
        f |= HX_CPU_AVX;
    if ((c >> 12) & 1)
        f |= HX_CPU_FMA;
    if ((c >> 29) & 1)
        f |= HX_CPU_F16C;
    if (osxsave) {
        const uint64_t xcr0 = read_xcr0();
        if ((xcr0 & 0x6) == 0x6) /* SSE and AVX state */
            f |= HX_CPU_OS_YMM;
        if ((xcr0 & 0xe6) == 0xe6) /* plus opmask, ZMM_Hi256, Hi16_ZMM */
            f |= HX_CPU_OS_ZMM;
    }
    if (__get_cpuid_max(0, NULL) >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        if ((b >> 5) & 1)
            f |= HX_CPU_AVX2;
        if ((b >> 16) & 1)
            f |= HX_CPU_AVX512F;
        if ((b >> 17) & 1)
            f |= HX_CPU_AVX512DQ;
        if ((b >> 30) & 1)
            f |= HX_CPU_AVX512BW;
        if ((b >> 31) & 1)
            f |= HX_CPU_AVX512VL;
        if ((c >> 11) & 1)
            f |= HX_CPU_AVX512VNNI;
        const unsigned max_sub = a;
        if (max_sub >= 1) {
            __cpuid_count(7, 1, a, b, c, d);
            if ((a >> 4) & 1)
                f |= HX_CPU_AVXVNNI;
            if ((a >> 5) & 1)
                f |= HX_CPU_AVX512BF16;
        }
    }
    if (intel)
        f |= HX_CPU_INTEL;
    /* Zen 5's server and desktop cores run 512-bit instructions whole
     * (its mobile ones split them, as Zen 4 does; cpuid does not say
     * which: they are taken as whole, a choice hx_repack_set_pairs can
     * undo). */
    if ((intel || (amd && family >= 0x1a)) && (f & HX_CPU_AVX512F))
        f |= HX_CPU_ZMM_FULL;
    features = f;
    simd_max = level_of(f);
    atomic_store_explicit(&detected, 1, memory_order_release);
}

static void ensure_detected(void)
{
    if (!atomic_load_explicit(&detected, memory_order_acquire))
        pthread_once(&features_once, detect);
}

uint32_t hx_cpu_features(void)
{
    ensure_detected();
    return features;
}

hx_simd_level hx_cpu_simd_max(void)
{
    ensure_detected();
    return simd_max;
}

static hx_simd_level level_of(uint32_t f)
{
    const uint32_t avx2 = HX_CPU_AVX | HX_CPU_AVX2 | HX_CPU_FMA | HX_CPU_F16C | HX_CPU_OS_YMM;
    const uint32_t avx512 = avx2 | HX_CPU_AVX512F | HX_CPU_AVX512BW | HX_CPU_AVX512VL | HX_CPU_AVX512DQ |
                            HX_CPU_AVX512VNNI | HX_CPU_OS_ZMM;
    if ((f & avx512) == avx512)
        return HX_SIMD_AVX512;
    if ((f & avx2) == avx2)
        return HX_SIMD_AVX2;
    return HX_SIMD_SCALAR;
}

static const char *const level_names[HX_SIMD_COUNT] = {"scalar", "avx2", "avx512"};

const char *hx_cpu_simd_name(hx_simd_level l)
{
    return (unsigned)l < HX_SIMD_COUNT ? level_names[l] : "unknown";
}

int hx_cpu_simd_from_name(const char *name, hx_simd_level *out)
{
    for (int i = 0; name && i < HX_SIMD_COUNT; i++) {
        if (strcasecmp(name, level_names[i]) == 0) {
            *out = (hx_simd_level)i;
            return 1;
        }
    }
    return 0;
}
