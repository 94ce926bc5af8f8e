/*
 * fp32 <-> fp16 / bf16 conversion, in one place (half.h). Bit manipulation
 * on the fp32 encoding, no floating-point rounding mode involved, so results
 * are the same on every machine and compiler.
 *
 *   fp32  s eeeeeeee mmmmmmmmmmmmmmmmmmmmmmm      bias 127
 *   fp16  s eeeee mmmmmmmmmm                      bias 15, subnormal unit 2^-24
 *   bf16  s eeeeeeee mmmmmmm                      fp32's top half
 *
 * Round to nearest even on the dropped bits: up when they exceed half an
 * ulp, or equal it and the kept last bit is odd. A carry out of the mantissa
 * moves into the exponent, which is the right result (also into inf).
 */
#include <string.h>

#include "shardrec/error.h"
#include "shardrec/half.h"

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Keep m >> shift, rounded to nearest even on the dropped bits (shift >= 1). */
static uint32_t round_shift(uint32_t m, int shift)
{
    const uint32_t kept = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    return kept + (rem > half || (rem == half && (kept & 1)));
}

uint16_t sr_fp32_to_fp16(float x)
{
    const uint32_t u = bits_of(x), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN: quiet, keep the top payload bits */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) /* >= 65520 (halfway past 65504), or inf */
        return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) /* normal: >= 2^-14; rebias 127 -> 15 */
        return (uint16_t)(sign | round_shift(a - 0x38000000u, 13));
    const int e = (int)(a >> 23);
    if (e < 102) /* below 2^-25: rounds to zero */
        return (uint16_t)sign;
    /* subnormal: (1.m * 2^(e-127)) / 2^-24 = M >> (126 - e); may carry to 2^-14 */
    return (uint16_t)(sign | round_shift((a & 0x7fffffu) | 0x800000u, 126 - e));
}

float sr_fp16_to_fp32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) { /* zero or subnormal: m * 2^-24, exact in fp32 */
        const float v = (float)m * 0x1p-24f;
        return float_of(sign | bits_of(v));
    }
    if (e == 31) /* inf or NaN */
        return float_of(sign | 0x7f800000u | (m << 13));
    return float_of(sign | ((e + 112) << 23) | (m << 13));
}

uint16_t sr_fp32_to_bf16(float x)
{
    const uint32_t u = bits_of(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: quiet, sign kept */
        return (uint16_t)((u >> 16) | 0x0040u);
    return (uint16_t)(round_shift(u, 16));
}

float sr_bf16_to_fp32(uint16_t h)
{
    return float_of((uint32_t)h << 16);
}

/* ---- names ---------------------------------------------------------------------- */

int sr_dtype_is_wire(enum sr_dtype dtype)
{
    return dtype == SR_DTYPE_F32 || dtype == SR_DTYPE_F16 || dtype == SR_DTYPE_BF16;
}

int sr_wire_dtype_parse(const char *s, enum sr_dtype *out)
{
    static const struct {
        const char *name;
        enum sr_dtype dtype;
    } names[] = {{"fp32", SR_DTYPE_F32},    {"float32", SR_DTYPE_F32}, {"fp16", SR_DTYPE_F16},
                 {"float16", SR_DTYPE_F16}, {"bf16", SR_DTYPE_BF16},   {"bfloat16", SR_DTYPE_BF16}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0) {
            *out = names[i].dtype;
            return SR_OK;
        }
    return sr_error_set(SR_ERR_INVALID_ARG, "'%s' is not a wire dtype; choose fp32, fp16 or bf16",
                        s);
}
