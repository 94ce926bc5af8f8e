/*
 * CUDA ops of the compact cold-row exchange of hybrid tables
 * (device/ops_sparse_dist.h, struct sr_sparse_dist_compact); bit for bit
 * device/cpu/cpu_compact.c.
 *
 *   op                kernels (grid)                  what one thread does
 *   compact_counts    counts (W * n_h blocks)         a block sums one (owner,
 *                                                     feature)'s flags over B
 *   compact_owner,    scan (W * n_h blocks)           a block: one (peer, feature)
 *   compact_samples                                   pair's bag flags, prefix-
 *                                                     summed into each bag's row
 *                                                     in the pair's region
 *                     bases (1 thread)                the regions' first floats,
 *                                                     pair after pair
 *                     copy (W * n_h * B / 256)        one (pair, bag): its row
 *                     sum (n_h * B / 256)             samples, forward: one (feature,
 *                                                     bag): its row summed over the
 *                                                     owners, rank ascending
 *
 * Scratch (c->work, int64): [ base (W * n_h + 1) | pos (W * n_h * B) ]. A
 * pair p = peer * n_h + k. Determinism: every output float has one writing
 * thread, prefix sums are over integers, and a row's sum runs over the
 * owners in rank order with IEEE adds (__fadd_rn): the CPU's order. No
 * atomics. Rows and offsets are 64-bit.
 */
#include <stdint.h>
#include <stdio.h>

#include <cub/block/block_scan.cuh>

#include "device/cuda/cuda_internal.h"

extern "C" {
#include "device/ops_sparse_dist.h"
}

#define CP_THREADS 256
#define CP_SCAN    1024

/* Does bag b of pair p hold ids? owner: the local batch's offsets (bag
 * (k, src*B + b)); samples: my lens of feature k's slot on owner r. */
static __device__ __forceinline__ int has_ids(const struct sr_sparse_dist_compact &c,
                                              const int64_t *offsets, const int32_t *lens, int p,
                                              int b)
{
    const int n = c.num_features, peer = p / n, k = p - peer * n;
    if (offsets) {
        const int64_t bag = ((int64_t)k * c.world + peer) * c.batch + b;
        return offsets[bag + 1] > offsets[bag];
    }
    return lens[(int64_t)(c.slot0[k] + peer) * c.batch + b] > 0;
}

__global__ void __launch_bounds__(CP_THREADS)
    compact_counts_kernel(const __grid_constant__ struct sr_sparse_dist_compact c,
                          const int32_t *lens, int64_t *ne)
{
    __shared__ int64_t sh[CP_THREADS];
    int64_t m = 0;
    for (int b = threadIdx.x; b < c.batch; b += blockDim.x)
        m += has_ids(c, NULL, lens, blockIdx.x, b);
    sh[threadIdx.x] = m;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w)
            sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        ne[blockIdx.x] = sh[0];
}

/* Pair blockIdx.x: pos[p * B + b] = the bags before b that hold ids; base[p]
 * = their count (bases_kernel turns the counts into first floats). */
__global__ void __launch_bounds__(CP_SCAN)
    compact_scan_kernel(const __grid_constant__ struct sr_sparse_dist_compact c,
                        const int64_t *offsets, const int32_t *lens)
{
    typedef cub::BlockScan<int64_t, CP_SCAN> scan_t;
    __shared__ typename scan_t::TempStorage tmp;
    const int p = blockIdx.x;
    int64_t *base = c.work, *pos = c.work + (int64_t)c.world * c.num_features + 1;
    int64_t carry = 0;
    for (int b0 = 0; b0 < c.batch; b0 += blockDim.x) {
        const int b = b0 + threadIdx.x;
        int64_t ex, all;
        scan_t(tmp).ExclusiveSum(b < c.batch ? has_ids(c, offsets, lens, p, b) : 0, ex, all);
        if (b < c.batch)
            pos[(int64_t)p * c.batch + b] = carry + ex;
        carry += all;
        __syncthreads(); /* tmp is reused */
    }
    if (threadIdx.x == 0)
        base[p] = carry;
}

/* The pairs' counts into their regions' first floats; the total must be
 * the exchange's words (the host's sizes, from the counts). */
__global__ void compact_bases_kernel(const __grid_constant__ struct sr_sparse_dist_compact c,
                                     int64_t words)
{
    const int n = c.num_features, pairs = c.world * n;
    int64_t at = 0;
    for (int p = 0; p < pairs; p++) {
        const int64_t m = c.work[p];
        c.work[p] = at;
        at += m * c.cols[p % n];
    }
    c.work[pairs] = at;
    if (at != words) {
        printf("cuda_compact: the exchange holds %lld floats, its sizes say %lld\n", (long long)at,
               (long long)words);
        __trap();
    }
}

/* One (pair, bag): its row between the block / rows and the buffer. */
__global__ void __launch_bounds__(CP_THREADS)
    compact_copy_kernel(const __grid_constant__ struct sr_sparse_dist_compact c,
                        const int64_t *offsets, const int32_t *lens, float *rows, float *buf,
                        int pack)
{
    const int n = c.num_features;
    const int64_t total = (int64_t)c.world * n * c.batch;
    const int64_t *base = c.work, *pos = c.work + (int64_t)c.world * n + 1;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int p = (int)(e / c.batch), b = (int)(e - (int64_t)p * c.batch);
        if (!has_ids(c, offsets, lens, p, b))
            continue;
        const int peer = p / n, k = p - peer * n, cols = c.cols[k];
        /* owner: rows (W*B, out) at source peer's bag b; samples: (B, out) at b */
        const int64_t row = offsets ? (int64_t)peer * c.batch + b : b;
        float *r = rows + row * c.out_dim + c.gcol[k];
        float *at = buf + base[p] + pos[e] * cols;
        for (int j = 0; j < cols; j++) {
            if (pack)
                at[j] = r[j];
            else
                r[j] = at[j];
        }
    }
}

/* Samples, forward: bag b of feature k summed over the owners, rank ascending. */
__global__ void __launch_bounds__(CP_THREADS)
    compact_sum_kernel(const __grid_constant__ struct sr_sparse_dist_compact c, const int32_t *lens,
                       float *block, const float *buf)
{
    const int n = c.num_features;
    const int64_t total = (int64_t)n * c.batch;
    const int64_t *base = c.work, *pos = c.work + (int64_t)c.world * n + 1;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int k = (int)(e / c.batch), b = (int)(e - (int64_t)k * c.batch), cols = c.cols[k];
        float *row = block + (int64_t)b * c.out_dim + c.gcol[k];
        for (int j = 0; j < cols; j++) {
            float acc = 0.0f;
            for (int r = 0; r < c.world; r++) {
                const int p = r * n + k;
                if (has_ids(c, NULL, lens, p, b))
                    acc = __fadd_rn(acc, buf[base[p] + pos[(int64_t)p * c.batch + b] * cols + j]);
            }
            row[j] = acc;
        }
    }
}

/* ---- launchers ----------------------------------------------------------------- */

static void layout_of(struct sr_device *dev, const struct sr_sparse_dist_compact *c,
                      const int64_t *offsets, const int32_t *lens, int64_t words,
                      cudaStream_t stream)
{
    const int pairs = c->world * c->num_features;
    compact_scan_kernel<<<(unsigned)pairs, CP_SCAN, 0, stream>>>(*c, offsets, lens);
    SR_CU_LAUNCHED();
    compact_bases_kernel<<<1, 1, 0, stream>>>(*c, words);
    SR_CU_LAUNCHED();
}

extern "C" void sr_cu_compact_counts(struct sr_device *dev, const struct sr_sparse_dist_compact *c,
                                     const int32_t *lens, int num_slots, int64_t *ne, sr_stream_t s)
{
    const int pairs = c->world * c->num_features;
    if (pairs == 0)
        return;
    compact_counts_kernel<<<(unsigned)pairs, CP_THREADS, 0, sr_cu_stream(dev, s)>>>(*c, lens, ne);
    SR_CU_LAUNCHED();
}

extern "C" void sr_cu_compact_owner(struct sr_device *dev, const struct sr_sparse_dist_compact *c,
                                    const int64_t *offsets, float *rows, float *buf, int64_t words,
                                    int pack, sr_stream_t s)
{
    const cudaStream_t stream = sr_cu_stream(dev, s);
    const int64_t total = (int64_t)c->world * c->num_features * c->batch;
    if (total == 0)
        return;
    layout_of(dev, c, offsets, NULL, words, stream);
    compact_copy_kernel<<<sr_cu_blocks(total, CP_THREADS), CP_THREADS, 0, stream>>>(
        *c, offsets, NULL, rows, buf, pack);
    SR_CU_LAUNCHED();
}

extern "C" void sr_cu_compact_samples(struct sr_device *dev, const struct sr_sparse_dist_compact *c,
                                      const int32_t *lens, int num_slots, float *block, float *buf,
                                      int64_t words, int pack, sr_stream_t s)
{
    const cudaStream_t stream = sr_cu_stream(dev, s);
    const int64_t total = (int64_t)c->world * c->num_features * c->batch;
    if (total == 0)
        return;
    layout_of(dev, c, NULL, lens, words, stream);
    if (pack) {
        compact_copy_kernel<<<sr_cu_blocks(total, CP_THREADS), CP_THREADS, 0, stream>>>(
            *c, NULL, lens, block, buf, 1);
    } else {
        const int64_t bags = (int64_t)c->num_features * c->batch;
        compact_sum_kernel<<<sr_cu_blocks(bags, CP_THREADS), CP_THREADS, 0, stream>>>(*c, lens,
                                                                                      block, buf);
    }
    SR_CU_LAUNCHED();
}
