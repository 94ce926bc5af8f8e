/*
 * fp32 <-> fp16 / bf16 conversion (half.h): the bit manipulation lives in
 * core/half_bits.h, shared with the device kernels; no floating-point
 * rounding mode is involved, so results are the same on every machine and
 * compiler. Here: round to nearest even, and the dtype names.
 */
#include <string.h>

#include "shardrec/error.h"
#include "shardrec/half.h"
#include "core/half_bits.h"

uint16_t sr_fp32_to_fp16(float x)
{
    return sr_hb_to_fp16(x, 0, 0);
}

float sr_fp16_to_fp32(uint16_t h)
{
    return sr_hb_from_fp16(h);
}

uint16_t sr_fp32_to_bf16(float x)
{
    return sr_hb_to_bf16(x, 0, 0);
}

float sr_bf16_to_fp32(uint16_t h)
{
    return sr_hb_from_bf16(h);
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
