/*
 * fp32 <-> fp16 / bf16 on the device, bit for bit core/half.c: both are
 * core/half_bits.h (the integer logic on the fp32 encoding, __host__
 * __device__ under nvcc), so narrowing rounds to nearest even with half.c's
 * NaN, inf and subnormal rules on every input. The CUDA intrinsics
 * (__float2half_rn and friends) are not used: their NaN encodings are not
 * half.c's. Host code may call these too, to compare them with half.c.
 */
#ifndef SHARDREC_CUDA_HALF_CUH
#define SHARDREC_CUDA_HALF_CUH

#include <stdint.h>

#include <cuda_runtime.h>

#include "core/half_bits.h"

static __host__ __device__ __forceinline__ uint16_t sr_cu_fp32_to_fp16(float x)
{
    return sr_hb_to_fp16(x, 0, 0);
}

static __host__ __device__ __forceinline__ float sr_cu_fp16_to_fp32(uint16_t h)
{
    return sr_hb_from_fp16(h);
}

static __host__ __device__ __forceinline__ uint16_t sr_cu_fp32_to_bf16(float x)
{
    return sr_hb_to_bf16(x, 0, 0);
}

static __host__ __device__ __forceinline__ float sr_cu_bf16_to_fp32(uint16_t h)
{
    return sr_hb_from_bf16(h);
}

#endif
