/*
 * 16-bit floating-point wire formats: IEEE 754 binary16 (fp16: 1 sign, 5
 * exponent, 10 mantissa bits) and bfloat16 (bf16: the top 16 bits of an fp32).
 * shardrec uses them only to move data (compressed collectives, DESIGN.md
 * "Distribution"); every sum is taken in fp32 after widening.
 *
 * Narrowing rounds to nearest, ties to even. fp16: values at or above 65520
 * in magnitude become inf, values below 2^-14 become subnormals (multiples of
 * 2^-24) or a signed zero; NaN stays NaN (quiet). bf16: the exponent range is
 * fp32's, so only values rounding past 0x1.fep127 become inf; NaN stays NaN
 * (quiet, sign kept); fp32 subnormals round like any other value. Widening is
 * exact.
 *
 * These are scalar conversions. Arrays are converted by the device's cast
 * ops (src/device/ops_cast.h; device/cpu/cpu_cast.c calls these), so that a
 * cast is a stream-ordered device op like any other.
 */
#ifndef SHARDREC_HALF_H
#define SHARDREC_HALF_H

#include <stddef.h>
#include <stdint.h>

#include "shardrec/tensor.h"

uint16_t sr_fp32_to_fp16(float x);
float sr_fp16_to_fp32(uint16_t h);
uint16_t sr_fp32_to_bf16(float x);
float sr_bf16_to_fp32(uint16_t h);

/* 1 if dtype is a wire dtype shardrec compresses to (F16, BF16) or F32. */
int sr_dtype_is_wire(enum sr_dtype dtype);
/* Parse "fp32" | "fp16" | "bf16" (also "float32", "float16", "bfloat16"). */
int sr_wire_dtype_parse(const char *s, enum sr_dtype *out);

#endif
