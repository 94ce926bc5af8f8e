/*
 * CUDA ops of hybrid tables (device/ops_sparse_dist.h, struct
 * sr_sparse_dist_hybrid); bit for bit device/cpu/cpu_hybrid.c.
 *
 *   op             kernels (grid)                 what one thread does
 *   hybrid_split   count (F*B / 256)              one bag of `in`: its hot ids
 *                                                 (binary search in its table's
 *                                                 hot rows), the cold and hot
 *                                                 lengths and the full length
 *                  scan (1 block of 1024)         a contiguous run of the
 *                                                 (F + F_h) * B lengths: the
 *                                                 offsets (block prefix sum)
 *                  place (F*B / 256)              one bag of `in`: its ids, in
 *                                                 order, to the cold or hot bag
 *   rows_copy      rows (n*width / 256, grid-     one float of a row
 *                  stride)
 *
 * Determinism: every output word has one writing thread, ids keep their
 * order within a bag (a bag's thread walks them in order), and the prefix
 * sum is over integers. No atomics. Rows and offsets are 64-bit.
 */
#include <stdint.h>

#include <cub/block/block_scan.cuh>

#include "device/cuda/cuda_internal.h"

extern "C" {
#include "device/ops_sparse_dist.h"
}

#define HY_THREADS 256
#define HY_SCAN    1024

/* Index of v in rows[0 .. n) (ascending), or -1. */
static __device__ int64_t find_hot(const int64_t *rows, int64_t n, int64_t v)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (rows[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && rows[lo] == v ? lo : -1;
}

__global__ void __launch_bounds__(HY_THREADS)
    hybrid_count_kernel(const __grid_constant__ struct sr_sparse_dist_hybrid h,
                        const __grid_constant__ struct sr_sparse_dist_kjt in, int32_t *lengths,
                        int32_t *full)
{
    const int64_t bag = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int B = h.batch;
    if (bag >= (int64_t)h.num_features * B)
        return;
    const int f = (int)(bag / B), b = (int)(bag - (int64_t)f * B), k = h.hot_of[f];
    const int32_t len = in.lengths[bag];
    full[bag] = len;
    if (k < 0) {
        lengths[bag] = len;
        return;
    }
    const int64_t *rows = h.hot + h.hot_begin[k], n = h.num_hot[k];
    int32_t hot = 0;
    for (int64_t i = in.offsets[bag]; i < in.offsets[bag + 1]; i++)
        hot += find_hot(rows, n, in.values[i]) >= 0;
    const int64_t hk = (int64_t)(h.num_features + k) * B + b;
    lengths[bag] = len - hot;
    lengths[hk] = hot;
    full[hk] = len;
}

/* offsets[i + 1] = lengths[0] + ... + lengths[i] over n lengths, one block:
 * each thread sums its run, the block scans the runs, each writes its run. */
__global__ void __launch_bounds__(HY_SCAN)
    hybrid_scan_kernel(const int32_t *lengths, int64_t n, int64_t *offsets)
{
    typedef cub::BlockScan<int64_t, HY_SCAN> scan_t;
    __shared__ typename scan_t::TempStorage tmp;
    const int64_t per = (n + HY_SCAN - 1) / HY_SCAN;
    const int64_t lo = min((int64_t)threadIdx.x * per, n), hi = min(lo + per, n);
    int64_t run = 0;
    for (int64_t i = lo; i < hi; i++)
        run += lengths[i];
    int64_t at;
    scan_t(tmp).ExclusiveSum(run, at);
    if (threadIdx.x == 0)
        offsets[0] = 0;
    for (int64_t i = lo; i < hi; i++) {
        at += lengths[i];
        offsets[i + 1] = at;
    }
}

__global__ void __launch_bounds__(HY_THREADS)
    hybrid_place_kernel(const __grid_constant__ struct sr_sparse_dist_hybrid h,
                        const __grid_constant__ struct sr_sparse_dist_kjt in,
                        const int64_t *offsets, int64_t *values, float *weights)
{
    const int64_t bag = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int B = h.batch;
    if (bag >= (int64_t)h.num_features * B)
        return;
    const int f = (int)(bag / B), b = (int)(bag - (int64_t)f * B), k = h.hot_of[f];
    const float *w = in.weights;
    int64_t cold = offsets[bag];
    if (k < 0) {
        for (int64_t i = in.offsets[bag]; i < in.offsets[bag + 1]; i++, cold++) {
            values[cold] = in.values[i];
            if (w)
                weights[cold] = w[i];
        }
        return;
    }
    const int64_t *rows = h.hot + h.hot_begin[k], n = h.num_hot[k];
    int64_t hot = offsets[(int64_t)(h.num_features + k) * B + b];
    for (int64_t i = in.offsets[bag]; i < in.offsets[bag + 1]; i++) {
        const int64_t v = in.values[i], at = find_hot(rows, n, v);
        const int64_t to = at >= 0 ? hot++ : cold++;
        values[to] = at >= 0 ? at : v;
        if (w)
            weights[to] = w[i];
    }
}

__global__ void rows_copy_kernel(int scatter, const int64_t *idx, int64_t n, int64_t width,
                                 const float *src, float *dst)
{
    const int64_t total = n * width;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t k = e / width, c = e - k * width;
        const int64_t from = scatter ? k : idx[k], to = scatter ? idx[k] : k;
        dst[to * width + c] = src[from * width + c];
    }
}

/* ---- launchers ----------------------------------------------------------------- */

extern "C" void sr_cu_hybrid_split(struct sr_device *dev, const struct sr_sparse_dist_hybrid *h,
                                   const struct sr_sparse_dist_kjt *in, int32_t *lengths,
                                   int32_t *full, int64_t *offsets, int64_t *values, float *weights,
                                   sr_stream_t s)
{
    const cudaStream_t stream = sr_cu_stream(dev, s);
    const int64_t bags = (int64_t)h->num_features * h->batch;
    const int64_t all = (int64_t)SR_HYB_BAGS(h);
    SR_ASSERT((bags + HY_THREADS - 1) / HY_THREADS < 0x80000000LL);
    const unsigned grid = (unsigned)((bags + HY_THREADS - 1) / HY_THREADS);
    if (bags > 0) {
        hybrid_count_kernel<<<grid, HY_THREADS, 0, stream>>>(*h, *in, lengths, full);
        SR_CU_LAUNCHED();
    }
    hybrid_scan_kernel<<<1, HY_SCAN, 0, stream>>>(lengths, all, offsets);
    SR_CU_LAUNCHED();
    if (bags > 0 && in->num_values > 0) {
        hybrid_place_kernel<<<grid, HY_THREADS, 0, stream>>>(*h, *in, offsets, values,
                                                             in->weights ? weights : NULL);
        SR_CU_LAUNCHED();
    }
}

extern "C" void sr_cu_rows_copy(struct sr_device *dev, int scatter, const int64_t *idx, int64_t n,
                                int64_t width, const float *src, int64_t src_rows, float *dst,
                                int64_t dst_rows, sr_stream_t s)
{
    if (n <= 0 || width <= 0)
        return;
    rows_copy_kernel<<<sr_cu_blocks(n * width, 256), 256, 0, sr_cu_stream(dev, s)>>>(
        scatter, idx, n, width, src, dst);
    SR_CU_LAUNCHED();
}
