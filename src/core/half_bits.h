/*
 * fp32 <-> fp16 / bf16 on the bits (the conversions of half.h), as inline
 * functions the host and a CUDA kernel share, so that both narrow a value to
 * the same 16 bits. Two roundings of the dropped bits:
 *
 *   nearest     to nearest, ties to even (half.h's contract);
 *   stochastic  up with probability (dropped bits) / (one unit of the kept
 *               last bit): the 16-bit value's expectation is the fp32 value,
 *               so updates far below a 16-bit unit still move a weight on
 *               average. The randomness is the caller's 32 bits `r`; a fixed
 *               r gives a fixed result (counter-based, rng.h), so reruns and
 *               devices agree.
 *
 * Layouts:
 *   fp32  s eeeeeeee mmmmmmmmmmmmmmmmmmmmmmm      bias 127
 *   fp16  s eeeee mmmmmmmmmm                      bias 15, subnormal unit 2^-24
 *   bf16  s eeeeeeee mmmmmmm                      fp32's top half
 * A carry out of the mantissa moves into the exponent, which is the right
 * result (also into inf). NaN stays NaN (quiet).
 */
#ifndef SHARDREC_CORE_HALF_BITS_H
#define SHARDREC_CORE_HALF_BITS_H

#include <stdint.h>
#include <string.h>

#include "shardrec/rng.h" /* SR_RNG_HD: __host__ __device__ under nvcc */

static inline SR_RNG_HD uint32_t sr_hb_bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline SR_RNG_HD float sr_hb_float_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Keep m >> shift (1 <= shift <= 31), the dropped bits rounded: to nearest
 * even, or (stochastic) up when they plus r's low `shift` bits carry. */
static inline SR_RNG_HD uint32_t sr_hb_round_shift(uint32_t m, int shift, int stochastic,
                                                   uint32_t r)
{
    const uint32_t mask = (1u << shift) - 1, kept = m >> shift, rem = m & mask;
    if (stochastic)
        return kept + ((rem + (r & mask)) >> shift);
    const uint32_t half = 1u << (shift - 1);
    return kept + (rem > half || (rem == half && (kept & 1)));
}

static inline SR_RNG_HD uint16_t sr_hb_to_fp16(float x, int stochastic, uint32_t r)
{
    const uint32_t u = sr_hb_bits_of(x), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN: quiet, keep the top payload bits */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) /* >= 65520 (halfway past 65504), or inf */
        return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) /* normal: >= 2^-14; rebias 127 -> 15 */
        return (uint16_t)(sign | sr_hb_round_shift(a - 0x38000000u, 13, stochastic, r));
    const int e = (int)(a >> 23);
    if (e < 102) /* below 2^-25: rounds to zero (either rounding) */
        return (uint16_t)sign;
    /* subnormal: (1.m * 2^(e-127)) / 2^-24 = M >> (126 - e); may carry to 2^-14 */
    return (uint16_t)(sign |
                      sr_hb_round_shift((a & 0x7fffffu) | 0x800000u, 126 - e, stochastic, r));
}

static inline SR_RNG_HD float sr_hb_from_fp16(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) /* zero or subnormal: m * 2^-24, exact in fp32 */
        return sr_hb_float_of(sign | sr_hb_bits_of((float)m * 0x1p-24f));
    if (e == 31) /* inf or NaN */
        return sr_hb_float_of(sign | 0x7f800000u | (m << 13));
    return sr_hb_float_of(sign | ((e + 112) << 23) | (m << 13));
}

static inline SR_RNG_HD uint16_t sr_hb_to_bf16(float x, int stochastic, uint32_t r)
{
    const uint32_t u = sr_hb_bits_of(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: quiet, sign kept */
        return (uint16_t)((u >> 16) | 0x0040u);
    if ((u & 0x7fffffffu) == 0x7f800000u) /* inf stays inf */
        return (uint16_t)(u >> 16);
    return (uint16_t)sr_hb_round_shift(u, 16, stochastic, r);
}

static inline SR_RNG_HD float sr_hb_from_bf16(uint16_t h)
{
    return sr_hb_float_of((uint32_t)h << 16);
}

#endif
