/*
 * One stored table weight read as fp32, and an fp32 value stored back, by
 * the table's dtype (ops_embedding.h, "Table storage"): inline for the CPU
 * ops and the CUDA kernels alike, so both store the same bits.
 */
#ifndef SHARDREC_DEVICE_EMB_STORAGE_H
#define SHARDREC_DEVICE_EMB_STORAGE_H

#include <stdint.h>

#include "shardrec/rng.h"
#include "shardrec/tensor.h"
#include "core/half_bits.h"

/* Weight i of a table stored as dtype, widened (exact). */
static inline SR_RNG_HD float sr_emb_get(const void *w, int dtype, int64_t i)
{
    if (dtype == SR_DTYPE_F32)
        return ((const float *)w)[i];
    const uint16_t h = ((const uint16_t *)w)[i];
    return dtype == SR_DTYPE_BF16 ? sr_hb_from_bf16(h) : sr_hb_from_fp16(h);
}

/* Store x as weight i, narrowed by the rounding the layout asks for; r is
 * the element's 32 random bits (used only when stochastic). */
static inline SR_RNG_HD void sr_emb_put(void *w, int dtype, int64_t i, float x, int stochastic,
                                        uint32_t r)
{
    if (dtype == SR_DTYPE_F32)
        ((float *)w)[i] = x;
    else if (dtype == SR_DTYPE_BF16)
        ((uint16_t *)w)[i] = sr_hb_to_bf16(x, stochastic, r);
    else
        ((uint16_t *)w)[i] = sr_hb_to_fp16(x, stochastic, r);
}

/* The random bits of element `elem` (row * dim + col) of a table at `step`. */
static inline SR_RNG_HD uint32_t sr_emb_round_bits(uint64_t seed, int64_t step, uint64_t stream,
                                                   int64_t elem)
{
    return (uint32_t)sr_rng_u64(seed + (uint64_t)step * 0x9e3779b97f4a7c15ull, stream,
                                (uint64_t)elem);
}

#endif
