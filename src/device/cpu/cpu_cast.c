/*
 * CPU cast ops (the table of device/ops_cast.h): the reference for fp32 <->
 * fp16 / bf16 over lists of segments, with core/half.c's scalar conversions.
 *
 * Segments run one after another; inside a segment of at least PAR_MIN
 * elements the elements are split over threads with a static schedule. An
 * element's result reads only that element (and, for unpack_add, the
 * destination as the earlier segments left it), so any thread count gives the
 * same bits. fp32 values on the wire side are moved with byte copies: they
 * may sit at 2-byte alignment inside a 16-bit message.
 */
#include <stdint.h>
#include <string.h>

#include "shardrec/error.h"
#include "shardrec/half.h"
#include "device/cpu/cpu_device.h"
#include "device/ops_cast.h"

#define PAR_MIN 32768 /* elements below which one thread converts */

static void check_dtype(enum sr_dtype dtype)
{
    if (!sr_dtype_is_wire(dtype))
        SR_ABORT("cast: dtype %s is not fp32, fp16 or bf16", sr_dtype_name(dtype));
}

static void pack_seg(const struct sr_cast_seg *g)
{
    const float *in = g->src;
    uint16_t *out = g->dst;
    const int64_t len = (int64_t)g->n;
    check_dtype(g->dtype);
    if (g->dtype == SR_DTYPE_F32) {
        memmove(g->dst, g->src, sizeof(float) * g->n);
    } else if (g->dtype == SR_DTYPE_F16) {
#pragma omp parallel for schedule(static) if (len >= PAR_MIN)
        for (int64_t i = 0; i < len; i++)
            out[i] = sr_fp32_to_fp16(in[i]);
    } else {
#pragma omp parallel for schedule(static) if (len >= PAR_MIN)
        for (int64_t i = 0; i < len; i++)
            out[i] = sr_fp32_to_bf16(in[i]);
    }
}

static void unpack_seg(const struct sr_cast_seg *g)
{
    const uint16_t *in = g->src;
    float *out = g->dst;
    const int64_t len = (int64_t)g->n;
    check_dtype(g->dtype);
    if (g->dtype == SR_DTYPE_F32) {
        memmove(g->dst, g->src, sizeof(float) * g->n);
    } else if (g->dtype == SR_DTYPE_F16) {
#pragma omp parallel for schedule(static) if (len >= PAR_MIN)
        for (int64_t i = 0; i < len; i++)
            out[i] = sr_fp16_to_fp32(in[i]);
    } else {
#pragma omp parallel for schedule(static) if (len >= PAR_MIN)
        for (int64_t i = 0; i < len; i++)
            out[i] = sr_bf16_to_fp32(in[i]);
    }
}

static void unpack_add_seg(const struct sr_cast_seg *g)
{
    const unsigned char *bytes = g->src;
    const uint16_t *in = g->src;
    float *acc = g->dst;
    const int64_t len = (int64_t)g->n;
    check_dtype(g->dtype);
    if (g->dtype == SR_DTYPE_F32) {
#pragma omp parallel for schedule(static) if (len >= PAR_MIN)
        for (int64_t i = 0; i < len; i++) {
            float v;
            memcpy(&v, bytes + sizeof(float) * (size_t)i, sizeof v);
            acc[i] += v;
        }
    } else if (g->dtype == SR_DTYPE_F16) {
#pragma omp parallel for schedule(static) if (len >= PAR_MIN)
        for (int64_t i = 0; i < len; i++)
            acc[i] += sr_fp16_to_fp32(in[i]);
    } else {
#pragma omp parallel for schedule(static) if (len >= PAR_MIN)
        for (int64_t i = 0; i < len; i++)
            acc[i] += sr_bf16_to_fp32(in[i]);
    }
}

static void cpu_pack(struct sr_device *dev, const struct sr_cast_seg *segs, int num, sr_stream_t s)
{
    for (int i = 0; i < num; i++)
        pack_seg(&segs[i]);
}

static void cpu_unpack(struct sr_device *dev, const struct sr_cast_seg *segs, int num,
                       sr_stream_t s)
{
    for (int i = 0; i < num; i++)
        unpack_seg(&segs[i]);
}

static void cpu_unpack_add(struct sr_device *dev, const struct sr_cast_seg *segs, int num,
                           sr_stream_t s)
{
    for (int i = 0; i < num; i++)
        unpack_add_seg(&segs[i]);
}

const struct sr_cast_ops sr_cpu_cast_ops = {
    .pack = cpu_pack,
    .unpack = cpu_unpack,
    .unpack_add = cpu_unpack_add,
};
