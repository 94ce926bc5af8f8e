/*
 * The deferred CPU device's cast ops (device/ops_cast.h): each call queues
 * the CPU backend's op with a copy of its segment list (a host array, copied
 * as a kernel launch copies its parameters) and declares every operand, as
 * cpu_deferred.h asks: each segment's source is read; its destination is
 * written (pack, unpack) or read and written (unpack_add). Destinations that
 * overlap (unpack_add sums several sources into one) are declared once, as
 * their union, so the in-place bytes are saved once before poisoning.
 */
#include <stdlib.h>
#include <string.h>

#include "shardrec/error.h"
#include "device/cpu/cpu_deferred.h"
#include "device/cpu/cpu_device.h"
#include "device/ops_cast.h"

enum cast_op { CAST_PACK, CAST_UNPACK, CAST_UNPACK_ADD };

struct cast_args {
    enum cast_op op;
    int num;
    struct sr_cast_seg segs[]; /* (num) */
};

struct span {
    const char *lo, *hi;
};

static size_t wire_size(enum sr_dtype dtype)
{
    return dtype == SR_DTYPE_F32 ? sizeof(float) : sizeof(uint16_t);
}

static void run_cast(struct item *it)
{
    const struct cast_args *a = DEFERRED_ARGS(struct cast_args, it);
    struct sr_device *cpu = sr_cpu_device();
    if (a->op == CAST_PACK)
        sr_cpu_cast_ops.pack(cpu, a->segs, a->num, NULL);
    else if (a->op == CAST_UNPACK)
        sr_cpu_cast_ops.unpack(cpu, a->segs, a->num, NULL);
    else
        sr_cpu_cast_ops.unpack_add(cpu, a->segs, a->num, NULL);
}

/* Add [lo, hi) to the spans, merged with every span it overlaps. */
static int add_span(struct span *sp, int n, const char *lo, const char *hi)
{
    for (int i = 0; i < n;) {
        if (sp[i].lo < hi && lo < sp[i].hi) {
            lo = sp[i].lo < lo ? sp[i].lo : lo;
            hi = sp[i].hi > hi ? sp[i].hi : hi;
            sp[i] = sp[--n];
            i = 0;
        } else {
            i++;
        }
    }
    sp[n] = (struct span){lo, hi};
    return n + 1;
}

static void declare(struct item *it, const struct sr_cast_seg *segs, int num, enum cast_op op)
{
    struct span *dst = sr_deferred_xmalloc(sizeof *dst * (size_t)(num + 1));
    int n_dst = 0;
    for (int i = 0; i < num; i++) {
        const size_t wire = wire_size(segs[i].dtype) * segs[i].n, f32 = sizeof(float) * segs[i].n;
        const size_t src_bytes = op == CAST_PACK ? f32 : wire,
                     dst_bytes = op == CAST_PACK ? wire : f32;
        sr_deferred_add_region(it, segs[i].src, src_bytes, REGION_IN);
        if (segs[i].dst && dst_bytes)
            n_dst = add_span(dst, n_dst, segs[i].dst, (const char *)segs[i].dst + dst_bytes);
    }
    for (int i = 0; i < n_dst; i++)
        sr_deferred_add_region(it, dst[i].lo, (size_t)(dst[i].hi - dst[i].lo),
                               op == CAST_UNPACK_ADD ? REGION_INOUT : REGION_OUT);
    free(dst);
}

static void cast_enqueue(enum cast_op op, const struct sr_cast_seg *segs, int num, sr_stream_t s)
{
    SR_ASSERT(num >= 0);
    struct item *it = sr_deferred_item_new(
        sizeof(struct cast_args) + sizeof(struct sr_cast_seg) * (size_t)num, run_cast);
    struct cast_args *a = DEFERRED_ARGS(struct cast_args, it);
    a->op = op;
    a->num = num;
    if (num)
        memcpy(a->segs, segs, sizeof(struct sr_cast_seg) * (size_t)num);
    declare(it, segs, num, op);
    sr_deferred_enqueue(s, it);
}

static void d_pack(struct sr_device *dev, const struct sr_cast_seg *segs, int num, sr_stream_t s)
{
    cast_enqueue(CAST_PACK, segs, num, s);
}

static void d_unpack(struct sr_device *dev, const struct sr_cast_seg *segs, int num, sr_stream_t s)
{
    cast_enqueue(CAST_UNPACK, segs, num, s);
}

static void d_unpack_add(struct sr_device *dev, const struct sr_cast_seg *segs, int num,
                         sr_stream_t s)
{
    cast_enqueue(CAST_UNPACK_ADD, segs, num, s);
}

const struct sr_cast_ops sr_cpu_deferred_cast_ops = {
    .pack = d_pack,
    .unpack = d_unpack,
    .unpack_add = d_unpack_add,
};
