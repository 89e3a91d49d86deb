/* Exact scalar conversions between f32 and f16 / bf16, written with integer
 * arithmetic so they give the same bits on every CPU (and match F16C). */
#include <string.h>

#include "kernels_cpu/quant_impl.h"

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float hx_fp16_to_fp32(hx_half h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) /* inf, or NaN made quiet as the hardware does */
        return f32_from_bits(sign | 0x7f800000u | (mant << 13) | (mant ? 0x00400000u : 0));
    if (exp == 0) {
        if (mant == 0)
            return f32_from_bits(sign);
        /* subnormal: normalise; the result is exact in f32 */
        exp = 113;
        while (!(mant & 0x400u)) {
            mant <<= 1;
            exp--;
        }
        return f32_from_bits(sign | (exp << 23) | ((mant & 0x3ffu) << 13));
    }
    return f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
}

hx_half hx_fp32_to_fp16(float f)
{
    const uint32_t u = f32_bits(f);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN: quiet, keep the top payload bits */
        return (hx_half)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) /* >= 65520 rounds to infinity (and inf stays) */
        return (hx_half)(sign | 0x7c00u);
    if (a < 0x38800000u) { /* below 2^-14: an f16 subnormal or zero */
        const uint32_t e = a >> 23;
        if (e < 102) /* below 2^-25: rounds to zero */
            return (hx_half)sign;
        const uint32_t m = (a & 0x7fffffu) | 0x800000u;
        const uint32_t shift = 126 - e; /* 14 .. 24 */
        uint32_t r = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1)))
            r++;
        return (hx_half)(sign | r);
    }
    uint32_t r = (a >> 13) - (112u << 10);
    const uint32_t rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1)))
        r++;
    return (hx_half)(sign | r);
}

float hx_bf16_to_fp32(hx_bf16 h) { return f32_from_bits((uint32_t)h << 16); }

hx_bf16 hx_fp32_to_bf16(float f)
{
    const uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (hx_bf16)((u >> 16) | 0x40u); /* NaN: keep it quiet */
    return (hx_bf16)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

void hx_quant_k4_scale_min(const uint8_t scales[HX_K_SCALE_SIZE], int j, uint8_t *sc, uint8_t *m)
{
    uint64_t s, mm;
    hx_quant_k4_unpack(scales, &s, &mm);
    *sc = (uint8_t)(s >> (8 * j));
    *m = (uint8_t)(mm >> (8 * j));
}
