/*
 * Cast ops: fp32 to and from the 16-bit wire formats (fp16, bf16) of
 * compressed exchanges (DESIGN.md "Distribution"; comm/comm_compressed.c is
 * the caller). The numerics are core/half.c's scalar conversions: narrowing
 * rounds to nearest, ties to even (NaN stays a quiet NaN, overflow becomes
 * inf, fp16 keeps subnormals); widening is exact.
 *
 * Each op takes a list of segments, so one exchange (a block per peer, an
 * fp32 block of my own) is one call:
 *
 *   segment i   src ──n elements──▶ dst      dtype: the wire side's format
 *
 * The fp32 side of a segment is 4-byte aligned float data of the device; the
 * wire side is 2-byte aligned. A segment with dtype SR_DTYPE_F32 moves or
 * adds fp32 values bit for bit, and its wire side may be only 2-byte aligned
 * (exact fp32 values riding inside a 16-bit message). Other dtypes abort.
 *
 * Ops are stream-ordered, allocate nothing, and give the same bits for any
 * thread count: element i of a segment depends only on element i, and
 * unpack_add applies its segments one after another, in list order, so
 * segments that share a destination are summed in that order. `segs` is a
 * host array that the op copies before it returns (the caller may reuse it);
 * its pointers are device memory. Segments of pack and unpack must not
 * overlap each other's destinations.
 *
 * A device's table of them is dev->cast.
 */
#ifndef SHARDREC_OPS_CAST_H
#define SHARDREC_OPS_CAST_H

#include <stddef.h>

#include "shardrec/device.h"
#include "shardrec/tensor.h"
#include "device/op_decl.h"

struct sr_cast_seg {
    const void *src;
    void *dst;
    size_t n;            /* elements */
    enum sr_dtype dtype; /* of the wire side: SR_DTYPE_F16, SR_DTYPE_BF16 or SR_DTYPE_F32 */
};

/* The regions of num segments (ops.c): each source read, each destination
 * written (pack: the wire side; unpack: fp32) or, with add, read and written. */
void sr_cast_segs_regions(struct sr_op_regions *r, const struct sr_cast_seg *segs, int num,
                          int pack, int add);

/* The ops, declared once (op_decl.h says how to read an entry). */
#define SR_OPS_CAST(OP)                                                                            \
    /* dst (n, dtype) = src (n fp32), rounded; per segment. */                                     \
    OP(cast, pack,                                                                                 \
       SR_HOST(const struct sr_cast_seg *, segs, num) SR_ARG(int, num) SR_STREAM(s)                \
       SR_REGIONS(sr_cast_segs_regions(r, segs, num, 1, 0)))                                       \
    /* dst (n fp32) = src (n, dtype), widened; per segment. */                                     \
    OP(cast, unpack,                                                                               \
       SR_HOST(const struct sr_cast_seg *, segs, num) SR_ARG(int, num) SR_STREAM(s)                \
       SR_REGIONS(sr_cast_segs_regions(r, segs, num, 0, 0)))                                       \
    /* dst (n fp32) += src (n, dtype), widened and summed in fp32; segments in                     \
     * list order (the fp32 sum on arrival of a compressed reduction). */                          \
    OP(cast, unpack_add,                                                                           \
       SR_HOST(const struct sr_cast_seg *, segs, num) SR_ARG(int, num) SR_STREAM(s)                \
       SR_REGIONS(sr_cast_segs_regions(r, segs, num, 0, 1)))

struct sr_cast_ops {
    SR_OPS_CAST(SR_OP_MEMBER)
};
SR_OPS_CAST(SR_OP_PROTO)

#endif
