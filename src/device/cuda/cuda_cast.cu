/*
 * CUDA cast ops (device/ops_cast.h): fp32 to and from the 16-bit wire formats
 * over lists of segments, bit for bit device/cpu/cpu_cast.c.
 *
 * Launches. The host copies the list into jobs of up to CAST_SEGS segments,
 * each job one kernel parameter block (about 1.3 KiB; the list may be longer
 * than a job: it then takes several launches, in list order). A job is a set
 * of chains; a chain is the segments that write one destination, in list
 * order: one segment for pack and unpack, and for unpack_add the segments
 * with the same dst and n (the fp32 sums on arrival of a compressed
 * reduction: every peer's block into one sum). The grid is the chains' tiles
 * of CAST_TILE elements, back to back:
 *
 *   blocks  [ chain 0: tiles of n_0 ][ chain 1 ] ...     thread: element i
 *   unpack_add element i:  acc = dst[i]; acc += widen(seg k of the chain)[i],
 *                          k in list order; dst[i] = acc
 *
 * A segment joins the open job only when it touches no memory that the job
 * writes or reads, apart from sharing a chain's destination exactly; else the
 * job is launched first. So segments that overlap in any other way run one
 * after another, as on the CPU, and the threads of a launch never race.
 *
 * Determinism: element i of a segment depends only on element i (and, for
 * unpack_add, on dst[i] as the earlier segments left it); each element has
 * one thread, and its sums are taken in list order with fp32 round-to-nearest
 * adds (__fadd_rn, never contracted), as cpu_cast.c's loop takes them. The
 * conversions are cuda_half.cuh's copies of core/half.c. Results do not
 * depend on the grid. One difference from the CPU is the hardware's: an fp32
 * add that produces a NaN gives the GPU's canonical NaN, whose bits may differ
 * from x86's; widening and narrowing keep half.c's NaN bits.
 *
 * fp32 segments: their wire side may be only 2-byte aligned inside a 16-bit
 * message; such a segment moves each value as two 16-bit halves (little
 * endian), an aligned one as 32-bit words.
 */
#include <stdint.h>

#include "device/cuda/cuda_internal.h"
#include "device/cuda/cuda_half.cuh"

extern "C" {
#include "shardrec/error.h"
#include "shardrec/half.h"
#include "device/ops_cast.h"
}

#define CAST_SEGS    32 /* segments per launch */
#define CAST_THREADS 256
#define CAST_ITEMS   8 /* elements per thread */
#define CAST_TILE    (CAST_THREADS * CAST_ITEMS)

enum cast_op { CAST_PACK, CAST_UNPACK, CAST_UNPACK_ADD };

/* A segment as the kernel reads it. */
struct cast_seg {
    const void *src;
    void *dst;
    int64_t n;
    int32_t dtype; /* enum sr_dtype of the wire side */
    int32_t wire4; /* fp32 segment: its wire side is 4-byte aligned */
};

/* One launch: chain c is seg[chain_seg[c], chain_seg[c + 1]), its tiles the
 * blocks [chain_block[c], chain_block[c + 1]). */
struct cast_job {
    struct cast_seg seg[CAST_SEGS];
    int32_t chain_seg[CAST_SEGS + 1];
    uint32_t chain_block[CAST_SEGS + 1];
    int32_t num_chains;
};

/* ---- kernels ------------------------------------------------------------------- */

/* fp32 bits at element i of a wire-side buffer. */
static __device__ __forceinline__ uint32_t load_wire32(const void *p, int64_t i, int wire4)
{
    if (wire4)
        return ((const uint32_t *)p)[i];
    const uint16_t *h = (const uint16_t *)p;
    return (uint32_t)h[2 * i] | (uint32_t)h[2 * i + 1] << 16;
}

static __device__ __forceinline__ void store_wire32(void *p, int64_t i, uint32_t u, int wire4)
{
    if (wire4) {
        ((uint32_t *)p)[i] = u;
        return;
    }
    uint16_t *h = (uint16_t *)p;
    h[2 * i] = (uint16_t)u;
    h[2 * i + 1] = (uint16_t)(u >> 16);
}

/* Element i of a wire-side source, widened. */
static __device__ __forceinline__ float widen(const struct cast_seg *g, int64_t i)
{
    if (g->dtype == SR_DTYPE_F16)
        return sr_cu_fp16_to_fp32(((const uint16_t *)g->src)[i]);
    if (g->dtype == SR_DTYPE_BF16)
        return sr_cu_bf16_to_fp32(((const uint16_t *)g->src)[i]);
    return __uint_as_float(load_wire32(g->src, i, g->wire4));
}

static __device__ __forceinline__ void narrow(const struct cast_seg *g, int64_t i)
{
    const float x = ((const float *)g->src)[i];
    if (g->dtype == SR_DTYPE_F16)
        ((uint16_t *)g->dst)[i] = sr_cu_fp32_to_fp16(x);
    else if (g->dtype == SR_DTYPE_BF16)
        ((uint16_t *)g->dst)[i] = sr_cu_fp32_to_bf16(x);
    else
        store_wire32(g->dst, i, __float_as_uint(x), g->wire4);
}

template <int OP>
__global__ void __launch_bounds__(CAST_THREADS)
    cast_kernel(const __grid_constant__ struct cast_job job)
{
    int c = 0;
    while (blockIdx.x >= job.chain_block[c + 1])
        c++;
    const struct cast_seg *first = &job.seg[job.chain_seg[c]];
    const struct cast_seg *end = &job.seg[job.chain_seg[c + 1]];
    const int64_t n = first->n;
    const int64_t i0 = (int64_t)(blockIdx.x - job.chain_block[c]) * CAST_TILE + threadIdx.x;
#pragma unroll
    for (int k = 0; k < CAST_ITEMS; k++) {
        const int64_t i = i0 + (int64_t)k * CAST_THREADS;
        if (i >= n)
            break;
        if (OP == CAST_PACK) {
            narrow(first, i);
        } else if (OP == CAST_UNPACK) {
            ((float *)first->dst)[i] = widen(first, i);
        } else {
            float *dst = (float *)first->dst;
            float acc = dst[i];
            for (const struct cast_seg *g = first; g < end; g++)
                acc = __fadd_rn(acc, widen(g, i));
            dst[i] = acc;
        }
    }
}

/* ---- launchers ----------------------------------------------------------------- */

/* Byte ranges [lo, hi) of a segment's source and destination. */
struct span {
    uintptr_t lo, hi;
};

static struct span src_span(const struct sr_cast_seg *g, int op)
{
    const size_t size = op == CAST_PACK ? sizeof(float) : sr_dtype_size(g->dtype);
    return (struct span){(uintptr_t)g->src, (uintptr_t)g->src + g->n * size};
}

static struct span dst_span(const struct sr_cast_seg *g, int op)
{
    const size_t size = op == CAST_PACK ? sr_dtype_size(g->dtype) : sizeof(float);
    return (struct span){(uintptr_t)g->dst, (uintptr_t)g->dst + g->n * size};
}

static int meet(struct span a, struct span b)
{
    return a.lo < b.hi && b.lo < a.hi;
}

/* The segments of a job being built, in list order, and their chains. */
struct job_build {
    const struct sr_cast_seg *seg[CAST_SEGS];
    int chain_of[CAST_SEGS];
    int num, num_chains;
};

/* Chain that g may join (-1: a new chain), or -2 when g conflicts with the
 * job: it writes what the job reads or writes, or reads what the job writes. */
static int place(const struct job_build *b, const struct sr_cast_seg *g, int op)
{
    const struct span gs = src_span(g, op), gd = dst_span(g, op);
    int chain = -1;
    for (int k = 0; k < b->num; k++) {
        const struct sr_cast_seg *h = b->seg[k];
        const struct span hs = src_span(h, op), hd = dst_span(h, op);
        if (meet(gs, hd) || meet(gd, hs))
            return -2;
        if (!meet(gd, hd))
            continue;
        if (op != CAST_UNPACK_ADD || g->dst != h->dst || g->n != h->n)
            return -2;
        chain = b->chain_of[k];
    }
    return chain;
}

static void check_seg(const struct sr_cast_seg *g, int op)
{
    if (!sr_dtype_is_wire(g->dtype))
        SR_ABORT("cast: dtype %s is not fp32, fp16 or bf16", sr_dtype_name(g->dtype));
    const struct span s = src_span(g, op), d = dst_span(g, op);
    if (meet(s, d) && (s.lo != d.lo || s.hi != d.hi))
        SR_ABORT("cast: a segment's source and destination overlap partly (%p, %p, %zu)", g->src,
                 g->dst, g->n);
}

/* The job's parameter block: segments grouped by chain, list order kept
 * within a chain; tiles per chain. */
static void job_fill(const struct job_build *b, int op, struct cast_job *job)
{
    int at = 0;
    uint64_t blocks = 0;
    for (int c = 0; c < b->num_chains; c++) {
        job->chain_seg[c] = at;
        job->chain_block[c] = (uint32_t)blocks;
        for (int k = 0; k < b->num; k++) {
            if (b->chain_of[k] != c)
                continue;
            const struct sr_cast_seg *g = b->seg[k];
            const void *wire = op == CAST_PACK ? g->dst : g->src;
            job->seg[at++] = (struct cast_seg){.src = g->src,
                                               .dst = g->dst,
                                               .n = (int64_t)g->n,
                                               .dtype = (int32_t)g->dtype,
                                               .wire4 = ((uintptr_t)wire & 3) == 0};
        }
        blocks += ((uint64_t)job->seg[job->chain_seg[c]].n + CAST_TILE - 1) / CAST_TILE;
        SR_ASSERT(blocks < 0x80000000u);
    }
    job->chain_seg[b->num_chains] = at;
    job->chain_block[b->num_chains] = (uint32_t)blocks;
    job->num_chains = b->num_chains;
}

static void job_launch(struct job_build *b, int op, cudaStream_t stream)
{
    if (!b->num)
        return;
    struct cast_job job;
    job_fill(b, op, &job);
    const unsigned blocks = job.chain_block[job.num_chains];
    if (op == CAST_PACK)
        cast_kernel<CAST_PACK><<<blocks, CAST_THREADS, 0, stream>>>(job);
    else if (op == CAST_UNPACK)
        cast_kernel<CAST_UNPACK><<<blocks, CAST_THREADS, 0, stream>>>(job);
    else
        cast_kernel<CAST_UNPACK_ADD><<<blocks, CAST_THREADS, 0, stream>>>(job);
    SR_CU_LAUNCHED();
    b->num = b->num_chains = 0;
}

static void cast_run(struct sr_device *dev, const struct sr_cast_seg *segs, int num, int op,
                     sr_stream_t s)
{
    const cudaStream_t stream = sr_cu_stream(dev, s);
    struct job_build b;
    b.num = b.num_chains = 0;
    for (int i = 0; i < num; i++) {
        const struct sr_cast_seg *g = &segs[i];
        check_seg(g, op);
        if (!g->n)
            continue;
        int chain = place(&b, g, op);
        if (chain == -2 || b.num == CAST_SEGS) {
            job_launch(&b, op, stream);
            chain = -1;
        }
        b.seg[b.num] = g;
        b.chain_of[b.num++] = chain >= 0 ? chain : b.num_chains++;
    }
    job_launch(&b, op, stream);
}

static void cuda_cast_pack(struct sr_device *dev, const struct sr_cast_seg *segs, int num,
                           sr_stream_t s)
{
    cast_run(dev, segs, num, CAST_PACK, s);
}

static void cuda_cast_unpack(struct sr_device *dev, const struct sr_cast_seg *segs, int num,
                             sr_stream_t s)
{
    cast_run(dev, segs, num, CAST_UNPACK, s);
}

static void cuda_cast_unpack_add(struct sr_device *dev, const struct sr_cast_seg *segs, int num,
                                 sr_stream_t s)
{
    cast_run(dev, segs, num, CAST_UNPACK_ADD, s);
}

extern "C" const struct sr_cast_ops sr_cuda_cast_ops = {
    .pack = cuda_cast_pack,
    .unpack = cuda_cast_unpack,
    .unpack_add = cuda_cast_unpack_add,
};
