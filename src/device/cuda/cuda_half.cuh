/*
 * fp32 <-> fp16 / bf16 on the device, bit for bit core/half.c: the same
 * integer logic on the fp32 encoding, line for line, so narrowing rounds to
 * nearest even with half.c's NaN, inf and subnormal rules on every input.
 * The CUDA intrinsics (__float2half_rn and friends) are not used: their NaN
 * encodings are not half.c's. The functions are __host__ __device__ so that a
 * host program can compare them with half.c over every fp32 input.
 */
#ifndef SHARDREC_CUDA_HALF_CUH
#define SHARDREC_CUDA_HALF_CUH

#include <stdint.h>
#include <string.h>

#include <cuda_runtime.h>

static __host__ __device__ __forceinline__ uint32_t sr_cu_bits_of(float x)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(x);
#else
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
#endif
}

static __host__ __device__ __forceinline__ float sr_cu_float_of(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
#endif
}

/* Keep m >> shift, rounded to nearest even on the dropped bits (shift >= 1). */
static __host__ __device__ __forceinline__ uint32_t sr_cu_round_shift(uint32_t m, int shift)
{
    const uint32_t kept = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    return kept + (rem > half || (rem == half && (kept & 1)));
}

static __host__ __device__ __forceinline__ uint16_t sr_cu_fp32_to_fp16(float x)
{
    const uint32_t u = sr_cu_bits_of(x), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN: quiet, keep the top payload bits */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) /* >= 65520 (halfway past 65504), or inf */
        return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) /* normal: >= 2^-14; rebias 127 -> 15 */
        return (uint16_t)(sign | sr_cu_round_shift(a - 0x38000000u, 13));
    const int e = (int)(a >> 23);
    if (e < 102) /* below 2^-25: rounds to zero */
        return (uint16_t)sign;
    /* subnormal: (1.m * 2^(e-127)) / 2^-24 = M >> (126 - e); may carry to 2^-14 */
    return (uint16_t)(sign | sr_cu_round_shift((a & 0x7fffffu) | 0x800000u, 126 - e));
}

static __host__ __device__ __forceinline__ float sr_cu_fp16_to_fp32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) { /* zero or subnormal: m * 2^-24, exact in fp32 (a normal fp32 when m > 0) */
        const float v = (float)m * 0x1p-24f;
        return sr_cu_float_of(sign | sr_cu_bits_of(v));
    }
    if (e == 31) /* inf or NaN */
        return sr_cu_float_of(sign | 0x7f800000u | (m << 13));
    return sr_cu_float_of(sign | ((e + 112) << 23) | (m << 13));
}

static __host__ __device__ __forceinline__ uint16_t sr_cu_fp32_to_bf16(float x)
{
    const uint32_t u = sr_cu_bits_of(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: quiet, sign kept */
        return (uint16_t)((u >> 16) | 0x0040u);
    return (uint16_t)(sr_cu_round_shift(u, 16));
}

static __host__ __device__ __forceinline__ float sr_cu_bf16_to_fp32(uint16_t h)
{
    return sr_cu_float_of((uint32_t)h << 16);
}

#endif
