/*
 * CUDA sparse-dist ops (device/ops_sparse_dist.h): bucketize, pack and unpack
 * of the input dist's messages, the mean-pooling scales, and the output
 * dist's column scatter and gather; bit for bit device/cpu/cpu_sparse_dist.c.
 * Every op is a few kernels on the op's stream; none waits on the host or
 * allocates. The layout, KJT, batch and column structs are host memory: they
 * travel by value as kernel parameters.
 *
 *   op              kernels (grid)                      what one block does
 *   bucketize       ids (B/256, F)                      256 bags of a feature: per-shard
 *                                                       counts per bag in shared memory
 *                   counts (count_words)                one counts word: a slot's B lens summed
 *   mean_scales     scales (F*B / 256)                  elementwise
 *   pack            slots (count_displ[W])              one slot: its place in the message,
 *                                                       its bags' id prefix sum (see below)
 *                   ids (B/256, F)                      256 bags of a feature: ids, weights
 *                                                       and lengths into the message; a dp
 *                                                       feature's bags into the dp batch
 *   unpack          regions (1)                         at (W, n + 2), as the CPU's
 *                   offsets (F_g*W), per batch          one (feature, source) block: B lengths
 *                                                       prefix-summed into offsets
 *                   ids (num_values / 2048), per batch  2048 ids: each finds its block by
 *                                                       binary search over the offsets
 *   pooled_*        (B/32, pieces)                      32 rows of one piece
 *
 * The bag kernels of bucketize and pack walk ids warp by warp: a warp owns
 * 32 consecutive bags, and lane k of each step takes the k-th next id of
 * them, so loads are coalesced and bag lengths may differ without idling
 * lanes; a lane finds its id's bag by a 5-step shuffle search over the bags'
 * first ids (bag_of_id).
 *
 * Scratch, the layout's work array (int64): pack keeps each slot's first id
 * word, first weight word and lengths word of the message at
 *
 *   [ id_at (S) | w_at (S) | len_at (S) ]       (3S <= work words)
 *
 * and unpack keeps the CPU's at (W, n + 2) at [2S, ...). So pack and unpack
 * of one layout share words and must be ordered with each other (the input
 * dist issues both on the default stream). Pack's bag prefix sums, one per
 * bag of a row-split slot, have no room there: pack writes them into the
 * message, into the slot's lengths words, which then hold each bag's first
 * id in the slot; the ids kernel reads a bag's sum, places the bag's ids,
 * and overwrites the word with the bag's length, so the message ends as the
 * CPU's. Each such word has one reader and writer, the thread of its bag.
 *
 * Determinism: every output word has exactly one writing thread; ids keep
 * their KJT order within a slot (bags have their prefix-summed places, and
 * an id's place within its bag counts the ids of its bag and shard before it:
 * earlier steps through shared memory, earlier lanes of its step through
 * __match_any_sync); sums and prefix sums are over integers, so their order
 * is immaterial (bucketize's per-bag counts are shared-memory atomic adds,
 * the only atomics); the float ops are one fp32 multiply or divide per value
 * (__fmul_rn, __fdiv_rn: IEEE round-to-nearest, never contracted), as the
 * CPU's. The grids depend only on the shapes. An invariant that the CPU
 * asserts (a message within its words, a batch within its values, lengths
 * that agree with the counts) traps on the device, with a printf of what
 * broke, so the next checked CUDA call aborts.
 */
#include <stdint.h>
#include <stdio.h>

#include <cub/block/block_scan.cuh>

#include "device/cuda/cuda_internal.h"

extern "C" {
#include "shardrec/error.h"
#include "device/ops_sparse_dist.h"
}

#define SD_THREADS   256 /* bags per block of the bag kernels */
#define SD_SHARDS    16  /* shards per pass of a bag kernel (shared counters) */
#define SD_SCAN      512 /* threads of the per-slot and per-block scans */
#define SD_COPY      256 /* threads of unpack's id copy */
#define SD_COPY_IDS  8   /* ids per thread of unpack's id copy */
#define SD_ROWS      32  /* rows per block of the pooled column moves */
#define SD_WARPS_MAX 32

#define SD_DEVICE_CHECK(cond, what)                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("cuda_sparse_dist: %s:%d: %s (block %d)\n", __FILE__, __LINE__, what,           \
                   (int)blockIdx.x);                                                               \
            __trap();                                                                              \
        }                                                                                          \
    } while (0)

/* ---- block helpers ------------------------------------------------------------- */

/* Sum of v over the block (blockDim a multiple of 32); every thread gets it.
 * sh: SD_WARPS_MAX words of shared memory. */
static __device__ int64_t block_sum(int64_t v, int64_t *sh)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0)
        sh[warp] = v;
    __syncthreads();
    int64_t s = 0;
    for (int w = 0; w < nw; w++)
        s += sh[w];
    __syncthreads();
    return s;
}

/* Exclusive prefix sum of v over a block of SD_SCAN threads; *total: the
 * sum. tmp is free again when it returns. */
typedef cub::BlockScan<int64_t, SD_SCAN> sd_scan_t;
static __device__ int64_t block_scan(int64_t v, int64_t *total, sd_scan_t::TempStorage &tmp)
{
    int64_t ex;
    sd_scan_t(tmp).ExclusiveSum(v, ex, *total);
    __syncthreads();
    return ex;
}

/* Rank r whose counts words hold word w: displ[r] <= w < displ[r + 1]. */
static __device__ int rank_of_word(const int64_t *displ, int W, int64_t w)
{
    int lo = 0, hi = W;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (displ[mid] <= w)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* v / blk for ids and blocks in range (both >= 0), 32-bit when they fit. */
static __device__ __forceinline__ int64_t shard_of(int64_t v, int64_t blk)
{
    if (((uint64_t)v | (uint64_t)blk) >> 32 == 0)
        return (int64_t)((uint32_t)v / (uint32_t)blk);
    return (int64_t)((uint64_t)v / (uint64_t)blk);
}

/* An id as 1 or 2 words of the message. */
static __device__ __forceinline__ void put_id(int32_t *at, int64_t row, int id_words)
{
    at[0] = (int32_t)(uint32_t)row;
    if (id_words == 2)
        at[1] = (int32_t)(uint32_t)((uint64_t)row >> 32);
}

static __device__ __forceinline__ int64_t get_id(const int32_t *at, int id_words)
{
    if (id_words == 1)
        return (int64_t)(uint32_t)at[0];
    return (int64_t)((uint64_t)(uint32_t)at[0] | (uint64_t)(uint32_t)at[1] << 32);
}

/* Warp-cooperative walk over the ids of 32 consecutive bags (lane L owns bag
 * L, its first id `first`; lanes past the batch own empty bags at the end):
 * lane k of a step takes id base + k, so loads are coalesced whatever the
 * bag lengths, and finds its bag: the last lane whose first id is at or
 * before it (an empty bag never is the last such). */
static __device__ __forceinline__ int bag_of_id(int64_t first, int64_t i)
{
    int L = 0;
    for (int step = 16; step > 0; step >>= 1) {
        const int64_t s = __shfl_sync(0xffffffffu, first, L + step);
        L += s <= i ? step : 0;
    }
    return L;
}

/* The lanes with the same key this step: this lane's rank among them (lanes
 * hold consecutive ids, so rank follows id order) and their number. */
static __device__ __forceinline__ int key_rank(int key, int *size)
{
    const unsigned same = __match_any_sync(0xffffffffu, key);
    *size = __popc(same);
    return __popc(same & ((1u << (threadIdx.x & 31)) - 1));
}

/* ---- bucketize ----------------------------------------------------------------- */

/* lens columns of the block's bags of feature blockIdx.y, every slot of it.
 * A row-split feature counts each bag's ids per shard in shared memory, one
 * column per bag, SD_SHARDS shards a pass: each warp walks its 32 bags' ids
 * (bag_of_id) and adds 1 per id to its (bag, shard) (integer adds: the
 * counts do not depend on their order). */
__global__ void __launch_bounds__(SD_THREADS)
    bucketize_kernel(const __grid_constant__ struct sr_sparse_dist_layout l,
                     const __grid_constant__ struct sr_sparse_dist_kjt k, int32_t *lens)
{
    __shared__ int32_t hist[SD_SHARDS][SD_THREADS];
    const int f = blockIdx.y, B = l.batch, t = threadIdx.x, lane = t & 31, wb = t - lane;
    const int fs = l.first_slot[f], b = blockIdx.x * SD_THREADS + t;
    if (fs < 0)
        return;
    const int nsh = l.num_shards[f];
    const int64_t blk = l.block[f];
    int32_t *out = lens + (size_t)fs * B + b;
    if (blk == 0) {
        const int32_t len = b < B ? k.lengths[(size_t)f * B + b] : 0;
        for (int j = 0; j < nsh && b < B; j++)
            out[(size_t)j * B] = len;
        return;
    }
    const int64_t *off = k.offsets + (size_t)f * B;
    const int64_t first = off[min(b, B)], end = off[min(b - lane + 32, B)];
    const int64_t start = __shfl_sync(0xffffffffu, first, 0);
    for (int j0 = 0; j0 < nsh; j0 += SD_SHARDS) {
        const int nj = min(SD_SHARDS, nsh - j0);
        for (int j = 0; j < nj; j++)
            hist[j][t] = 0;
        __syncwarp();
        for (int64_t base = start; base < end; base += 32) {
            const int64_t i = base + lane;
            const int L = bag_of_id(first, i);
            const int64_t j = i < end ? shard_of(k.values[i], blk) - j0 : -1;
            if (j >= 0 && j < nj)
                atomicAdd(&hist[j][wb + L], 1);
        }
        __syncwarp();
        for (int j = 0; j < nj && b < B; j++)
            out[(size_t)(j0 + j) * B] = hist[j][t];
        __syncwarp();
    }
}

/* counts word blockIdx.x: a slot's ids, a flags word, or a dp feature's ids.
 * offsets NULL: no batch. */
__global__ void __launch_bounds__(SD_SCAN)
    counts_kernel(const __grid_constant__ struct sr_sparse_dist_layout l, const int64_t *offsets,
                  int64_t flags, const int32_t *lens, int64_t *counts)
{
    __shared__ int64_t sh[SD_WARPS_MAX];
    const int64_t w = blockIdx.x, msg = l.count_words - l.num_dp;
    const int B = l.batch;
    if (w >= msg) {
        const size_t f = (size_t)l.dp_feature[w - msg];
        if (threadIdx.x == 0)
            counts[w] = offsets ? offsets[(f + 1) * B] - offsets[f * B] : 0;
        return;
    }
    const int r = rank_of_word(l.count_displ, l.world, w);
    const int64_t p = w - l.count_displ[r], n = l.count_displ[r + 1] - l.count_displ[r] - 1;
    if (p == n) {
        if (threadIdx.x == 0)
            counts[w] = flags;
        return;
    }
    const int32_t *len = lens + (size_t)l.slot_at[(size_t)r * l.max_nslots + p] * B;
    int64_t sum = 0;
    for (int b = threadIdx.x; b < B; b += blockDim.x)
        sum += len[b];
    sum = block_sum(sum, sh);
    if (threadIdx.x == 0)
        counts[w] = sum;
}

__global__ void mean_scales_kernel(const __grid_constant__ struct sr_sparse_dist_layout l,
                                   const int32_t *lengths, float *scale)
{
    const int64_t n = (int64_t)l.num_features * l.batch;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int32_t len = lengths[i];
        scale[i] = l.mean[i / l.batch] && len > 0 ? __fdiv_rn(1.0f, __int2float_rn(len)) : 1.0f;
    }
}

/* ---- pack ---------------------------------------------------------------------- */

/* Message word blockIdx.x, when it is slot p of rank r: the slot's id_at,
 * w_at and len_at into work, and its lengths words: the bags' exclusive
 * prefix sums for a row-split feature (the ids kernel replaces them with the
 * lengths), the lengths themselves otherwise. */
__global__ void __launch_bounds__(SD_SCAN)
    pack_slots_kernel(const __grid_constant__ struct sr_sparse_dist_layout l, const int32_t *lens,
                      const int64_t *counts, int has_w, int32_t *send, int64_t send_words)
{
    __shared__ int64_t sh[SD_WARPS_MAX];
    __shared__ sd_scan_t::TempStorage scan_tmp;
    __shared__ int feature;
    const int t = threadIdx.x, B = l.batch, S = l.num_slots;
    const int r = rank_of_word(l.count_displ, l.world, blockIdx.x);
    const int64_t c0 = l.count_displ[r], n = l.count_displ[r + 1] - c0 - 1, p = blockIdx.x - c0;
    if (p == n)
        return;
    const int sl = l.slot_at[(size_t)r * l.max_nslots + p];
    /* ids to earlier ranks (their words less their flags), to r's earlier
     * slots, and to r */
    int64_t before = 0, pre = 0, ids = 0;
    for (int64_t x = t; x < c0; x += blockDim.x)
        before += counts[x];
    for (int x = t; x < r; x += blockDim.x)
        before -= counts[l.count_displ[x + 1] - 1];
    for (int64_t x = t; x < n; x += blockDim.x) {
        ids += counts[c0 + x];
        pre += x < p ? counts[c0 + x] : 0;
    }
    before = block_sum(before, sh);
    pre = block_sum(pre, sh);
    ids = block_sum(ids, sh);
    const int64_t off = (c0 - r) * B + before * (l.id_words + has_w), first_id = off + n * B;
    const int64_t len_at = off + p * B;
    if (t == 0) {
        SD_DEVICE_CHECK(first_id + ids * (l.id_words + has_w) <= send_words,
                        "pack: the message is longer than send_words");
        l.work[sl] = first_id + pre * l.id_words;
        l.work[S + sl] = first_id + ids * l.id_words + pre;
        l.work[2 * S + sl] = len_at;
        feature = -1;
    }
    __syncthreads();
    for (int f = t; f < l.num_features; f += blockDim.x) {
        const int fs = l.first_slot[f];
        if (fs >= 0 && sl >= fs && sl < fs + l.num_shards[f])
            feature = f;
    }
    __syncthreads();
    if (t == 0)
        SD_DEVICE_CHECK(feature >= 0, "pack: a slot of no feature");
    const int32_t *len = lens + (size_t)sl * B;
    int32_t *out = send + len_at;
    if (l.block[feature] == 0) {
        for (int b = t; b < B; b += blockDim.x)
            out[b] = len[b];
        return;
    }
    int64_t carry = 0;
    for (int b0 = 0; b0 < B; b0 += blockDim.x) {
        const int b = b0 + t;
        int64_t total;
        const int64_t ex = block_scan(b < B ? len[b] : 0, &total, scan_tmp);
        if (b < B)
            out[b] = (int32_t)(carry + ex);
        carry += total;
    }
    if (t == 0) {
        SD_DEVICE_CHECK(carry == counts[c0 + p], "pack: lens and counts disagree");
        SD_DEVICE_CHECK(carry <= INT32_MAX, "pack: a slot of 2^31 ids or more");
    }
}

/* Dp feature f's bags of this block into the dp batch: its place there is
 * after the dp features before it. */
static __device__ void pack_dp_bags(const struct sr_sparse_dist_layout &l,
                                    const struct sr_sparse_dist_kjt &k,
                                    const struct sr_sparse_dist_batch &dp, int f, int64_t *sh)
{
    const int B = l.batch, t = threadIdx.x, b0 = blockIdx.x * SD_THREADS;
    const int bend = min(b0 + SD_THREADS, B);
    int64_t jd = 0, base = 0;
    for (int g = t; g < f; g += blockDim.x)
        if (l.first_slot[g] < 0) {
            jd++;
            base += k.offsets[(size_t)(g + 1) * B] - k.offsets[(size_t)g * B];
        }
    jd = block_sum(jd, sh);
    base = block_sum(base, sh);
    const int64_t *off = k.offsets + (size_t)f * B, lo = off[0], n = off[B] - lo;
    if (t == 0)
        SD_DEVICE_CHECK(base + n <= dp.num_values, "pack: dp batch over its num_values");
    if (b0 + t < bend)
        dp.offsets[jd * B + b0 + t] = base + off[b0 + t] - lo;
    if (t == 0 && bend == B && jd == l.num_dp - 1)
        dp.offsets[(int64_t)l.num_dp * B] = base + n;
    for (int64_t i = off[b0] + t; i < off[bend]; i += blockDim.x) {
        dp.values[base + i - lo] = k.values[i];
        if (dp.weights)
            dp.weights[base + i - lo] = k.weights[i];
    }
}

/* A copied feature's ids of this block's bags: the same places in each slot. */
static __device__ void pack_copy_ids(const struct sr_sparse_dist_layout &l,
                                     const struct sr_sparse_dist_kjt &k, int f, int32_t *send)
{
    const int B = l.batch, S = l.num_slots, fs = l.first_slot[f], nsh = l.num_shards[f];
    const int b0 = blockIdx.x * SD_THREADS, bend = min(b0 + SD_THREADS, B);
    const int64_t *off = k.offsets + (size_t)f * B, lo = off[0];
    for (int64_t i = off[b0] + threadIdx.x; i < off[bend]; i += blockDim.x) {
        const int64_t v = k.values[i];
        for (int j = 0; j < nsh; j++) {
            put_id(send + l.work[fs + j] + (i - lo) * l.id_words, v, l.id_words);
            if (k.weights)
                send[l.work[S + fs + j] + i - lo] = __float_as_int(k.weights[i]);
        }
    }
}

/* A row-split feature's ids: each warp walks its 32 bags' ids in order
 * (bag_of_id); an id goes after its bag's prefix sum, which pack_slots_kernel
 * left in the bag's lengths word, plus the ids of its bag and shard before
 * it: counted in shared memory (one column per bag) across steps, and by
 * rank among the lanes of its (bag, shard) within a step. Then each bag's
 * word gets its length. SD_SHARDS shards a pass. */
static __device__ void pack_split_ids(const struct sr_sparse_dist_layout &l,
                                      const struct sr_sparse_dist_kjt &k, const int32_t *lens,
                                      int f, int32_t *send)
{
    __shared__ int32_t next[SD_SHARDS][SD_THREADS];
    __shared__ int64_t at[3][SD_SHARDS];
    const int B = l.batch, S = l.num_slots, t = threadIdx.x, lane = t & 31, wb = t - lane;
    const int b = blockIdx.x * SD_THREADS + t, fs = l.first_slot[f], nsh = l.num_shards[f];
    const int idw = l.id_words;
    const int64_t blk = l.block[f], *off = k.offsets + (size_t)f * B;
    const int64_t first = off[min(b, B)], end = off[min(b - lane + 32, B)];
    const int64_t start = __shfl_sync(0xffffffffu, first, 0);
    for (int j0 = 0; j0 < nsh; j0 += SD_SHARDS) {
        const int nj = min(SD_SHARDS, nsh - j0);
        __syncthreads(); /* the last pass has read at */
        if (t < nj)
            for (int q = 0; q < 3; q++)
                at[q][t] = l.work[q * S + fs + j0 + t];
        __syncthreads();
        for (int j = 0; j < nj && b < B; j++)
            next[j][t] = send[at[2][j] + b];
        __syncwarp();
        for (int64_t base = start; base < end; base += 32) {
            const int64_t i = base + lane;
            const int L = bag_of_id(first, i);
            const int64_t v = i < end ? k.values[i] : 0, j = i < end ? shard_of(v, blk) - j0 : -1;
            const int in = j >= 0 && j < nj;
            int size;
            const int rank = key_rank(in ? L * SD_SHARDS + (int)j : -1, &size);
            if (in) {
                const int q = next[j][wb + L] + rank;
                put_id(send + at[0][j] + (int64_t)q * idw, v - (j0 + j) * blk, idw);
                if (k.weights)
                    send[at[1][j] + q] = __float_as_int(k.weights[i]);
            }
            __syncwarp();
            if (in && rank == size - 1)
                next[j][wb + L] += size;
            __syncwarp();
        }
        for (int j = 0; j < nj && b < B; j++)
            send[at[2][j] + b] = lens[(size_t)(fs + j0 + j) * B + b];
    }
}

__global__ void __launch_bounds__(SD_THREADS)
    pack_ids_kernel(const __grid_constant__ struct sr_sparse_dist_layout l,
                    const __grid_constant__ struct sr_sparse_dist_kjt k, const int32_t *lens,
                    int32_t *send, const __grid_constant__ struct sr_sparse_dist_batch dp)
{
    __shared__ int64_t sh[SD_WARPS_MAX];
    const int f = blockIdx.y;
    if (l.first_slot[f] < 0)
        pack_dp_bags(l, k, dp, f, sh);
    else if (l.block[f] == 0)
        pack_copy_ids(l, k, f, send);
    else
        pack_split_ids(l, k, lens, f, send);
}

/* ---- unpack -------------------------------------------------------------------- */

/* at (W, n + 2) in work[2S ...]: per source, the first id of each of my slots
 * in its id area, its region's first word, its id count. */
__global__ void __launch_bounds__(SD_SCAN)
    unpack_regions_kernel(const __grid_constant__ struct sr_sparse_dist_layout l,
                          const int64_t *counts, int64_t recv_words)
{
    __shared__ sd_scan_t::TempStorage scan_tmp;
    const int n = l.nslots_here, W = l.world;
    int64_t *at = l.work + 2 * (int64_t)l.num_slots, carry = 0;
    for (int s0 = 0; s0 < W; s0 += blockDim.x) {
        const int src = s0 + threadIdx.x;
        int64_t size = 0, total;
        if (src < W) {
            const int64_t *c = counts + (size_t)src * (n + 1);
            int64_t *a = at + (size_t)src * (n + 2), ids = 0;
            for (int p = 0; p < n; p++) {
                a[p] = ids;
                ids += c[p];
            }
            a[n + 1] = ids;
            size =
                (int64_t)n * l.batch + ids * (l.id_words + ((c[n] & SR_SPARSE_DIST_WEIGHTS) != 0));
        }
        const int64_t ex = block_scan(size, &total, scan_tmp);
        if (src < W)
            at[(size_t)src * (n + 2) + n] = carry + ex;
        carry += total;
    }
    if (threadIdx.x == 0)
        SD_DEVICE_CHECK(carry <= recv_words, "unpack: the messages are longer than recv_words");
}

/* Block (feature j, source src) = blockIdx.x of batch g: its B lengths,
 * prefix-summed after the ids of the blocks before it (earlier features, then
 * sources of earlier rows), into offsets[1 + j*batch + row_of[src] + b]. */
__global__ void __launch_bounds__(SD_SCAN)
    unpack_offsets_kernel(const __grid_constant__ struct sr_sparse_dist_layout l,
                          const int32_t *recv, const int64_t *counts,
                          const __grid_constant__ struct sr_sparse_dist_batch g)
{
    __shared__ int64_t sh[SD_WARPS_MAX];
    __shared__ sd_scan_t::TempStorage scan_tmp;
    const int W = l.world, n = l.nslots_here, B = l.batch, t = threadIdx.x;
    const int j = blockIdx.x / W, src = blockIdx.x % W, row = g.row_of[src], p = g.pos[j];
    int64_t before = 0;
    for (int x = t; x < (j + 1) * W; x += blockDim.x) {
        const int jj = x / W, s = x % W;
        if (jj < j || g.row_of[s] < row)
            before += counts[(size_t)s * (n + 1) + g.pos[jj]];
    }
    before = block_sum(before, sh);
    const int64_t *a = l.work + 2 * (int64_t)l.num_slots + (size_t)src * (n + 2);
    const int32_t *len = recv + a[n] + (int64_t)p * B;
    int64_t *out = g.offsets + 1 + (int64_t)j * g.batch + row, carry = before;
    for (int b0 = 0; b0 < B; b0 += blockDim.x) {
        const int b = b0 + t;
        const int64_t v = b < B ? len[b] : 0;
        int64_t total;
        const int64_t ex = block_scan(v, &total, scan_tmp);
        if (b < B)
            out[b] = carry + ex + v;
        carry += total;
    }
    if (t == 0) {
        SD_DEVICE_CHECK(carry - before == counts[(size_t)src * (n + 1) + p],
                        "unpack: received lengths and counts disagree");
        SD_DEVICE_CHECK(carry <= g.num_values, "unpack: batch over its num_values");
        if (blockIdx.x == 0)
            g.offsets[0] = 0;
    }
}

/* First id of block t (feature t / W, the source of row t % W). */
static __device__ __forceinline__ int64_t block_start(const struct sr_sparse_dist_batch &g, int W,
                                                      int B, int t)
{
    return g.offsets[(int64_t)(t / W) * g.batch + (int64_t)(t % W) * B];
}

/* The block holding id i: the last of the Q blocks starting at or before it. */
static __device__ int find_block(const struct sr_sparse_dist_batch &g, int W, int B, int Q,
                                 int64_t i)
{
    int lo = 0, hi = Q;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (block_start(g, W, B, mid) <= i)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* Ids (and weights) SD_COPY_IDS per thread, in batch order: each thread
 * finds its id's block, the source and slot it came from, and copies it. */
__global__ void __launch_bounds__(SD_COPY)
    unpack_ids_kernel(const __grid_constant__ struct sr_sparse_dist_layout l, const int32_t *recv,
                      const int64_t *counts, const __grid_constant__ struct sr_sparse_dist_batch g)
{
    extern __shared__ int32_t source_of_row[]; /* (W) */
    const int W = l.world, n = l.nslots_here, B = l.batch, idw = l.id_words;
    const int Q = g.num_features * W;
    for (int s = threadIdx.x; s < W; s += blockDim.x)
        source_of_row[g.row_of[s] / B] = s;
    __syncthreads();
    const int64_t total = g.offsets[(int64_t)g.num_features * g.batch];
    const int64_t first = (int64_t)blockIdx.x * SD_COPY * SD_COPY_IDS + threadIdx.x;
    int64_t lo = 0, hi = 0;
    const int32_t *ids = NULL, *wts = NULL;
    for (int k = 0; k < SD_COPY_IDS; k++) {
        const int64_t i = first + (int64_t)k * SD_COPY;
        if (i >= total)
            break;
        if (i >= hi) {
            const int t = find_block(g, W, B, Q, i);
            const int src = source_of_row[t % W];
            const int64_t *a = l.work + 2 * (int64_t)l.num_slots + (size_t)src * (n + 2);
            const int64_t ap = a[g.pos[t / W]];
            const int32_t *region = recv + a[n] + (int64_t)n * B;
            lo = block_start(g, W, B, t);
            hi = t + 1 < Q ? block_start(g, W, B, t + 1) : total;
            ids = region + ap * idw;
            wts = counts[(size_t)src * (n + 1) + n] & SR_SPARSE_DIST_WEIGHTS
                      ? region + a[n + 1] * idw + ap
                      : NULL;
        }
        g.values[i] = get_id(ids + (i - lo) * idw, idw);
        if (g.weights)
            g.weights[i] = wts ? __int_as_float(wts[i - lo]) : 1.0f;
    }
}

/* ---- pooled columns ------------------------------------------------------------ */

/* Rows [32 x, 32 x + 32) of piece y: pooled <- buf * scale (scatter) or
 * buf <- dpooled * scale (gather); a hybrid feature's cold piece adds its
 * hot piece's block first (scatter), the hot piece alone writes nothing. */
template <int GATHER>
__global__ void __launch_bounds__(SD_THREADS)
    pooled_kernel(const __grid_constant__ struct sr_sparse_dist_cols m, const float *in,
                  const float *scale, float *out)
{
    const struct sr_sparse_dist_piece pc = m.pieces[blockIdx.y];
    const int B = m.batch, b0 = blockIdx.x * SD_ROWS, rows = min(SD_ROWS, B - b0);
    if (pc.cols <= 0 || (!GATHER && pc.add == SR_PIECE_ADDED)) /* its partner writes them */
        return;
    for (int e = threadIdx.x; e < rows * pc.cols; e += blockDim.x) {
        const int r = e / pc.cols, c = e - r * pc.cols, b = b0 + r;
        const int64_t at_buf = pc.block + (int64_t)b * pc.width + pc.gcol + c;
        const int64_t at_pooled = (int64_t)b * m.out_dim + pc.fcol + c;
        const float k = scale[(int64_t)pc.feature * B + b];
        if (GATHER) {
            out[at_buf] = __fmul_rn(in[at_pooled], k);
        } else if (pc.add > 0) { /* a hybrid feature: (cold + hot) * scale */
            const struct sr_sparse_dist_piece hp = m.pieces[pc.add - 1];
            const float hot = in[hp.block + (int64_t)b * hp.width + hp.gcol + c];
            out[at_pooled] = __fmul_rn(__fadd_rn(in[at_buf], hot), k);
        } else {
            out[at_pooled] = __fmul_rn(in[at_buf], k);
        }
    }
}

/* ---- launchers ----------------------------------------------------------------- */

static unsigned tiles(int64_t n, int per)
{
    return (unsigned)((n + per - 1) / per);
}

static void cuda_bucketize(struct sr_device *dev, const struct sr_sparse_dist_layout *l,
                           const struct sr_sparse_dist_kjt *kjt, int64_t flags, int32_t *lens,
                           int64_t *counts, sr_stream_t s)
{
    const cudaStream_t stream = sr_cu_stream(dev, s);
    const int B = l->batch, F = l->num_features;
    SR_ASSERT(F <= 65535 && l->count_words < 0x80000000LL);
    if (!kjt) {
        SR_CU_CHECK(cudaMemsetAsync(lens, 0, sizeof(int32_t) * (size_t)l->num_slots * B, stream));
    } else if (B > 0 && F > 0) {
        bucketize_kernel<<<dim3(tiles(B, SD_THREADS), F), SD_THREADS, 0, stream>>>(*l, *kjt, lens);
        SR_CU_LAUNCHED();
    }
    counts_kernel<<<(unsigned)l->count_words, SD_SCAN, 0, stream>>>(*l, kjt ? kjt->offsets : NULL,
                                                                    flags, lens, counts);
    SR_CU_LAUNCHED();
}

static void cuda_mean_scales(struct sr_device *dev, const struct sr_sparse_dist_layout *l,
                             const int32_t *lengths, float *scale, sr_stream_t s)
{
    const int64_t n = (int64_t)l->num_features * l->batch;
    if (n == 0)
        return;
    mean_scales_kernel<<<sr_cu_blocks(n, 256), 256, 0, sr_cu_stream(dev, s)>>>(*l, lengths, scale);
    SR_CU_LAUNCHED();
}

static void cuda_pack(struct sr_device *dev, const struct sr_sparse_dist_layout *l,
                      const struct sr_sparse_dist_kjt *kjt, const int32_t *lens,
                      const int64_t *counts, int32_t *send, int64_t send_words,
                      const struct sr_sparse_dist_batch *dp, sr_stream_t s)
{
    const cudaStream_t stream = sr_cu_stream(dev, s);
    const int B = l->batch, F = l->num_features;
    const int64_t msg_words = l->count_words - l->num_dp; /* count_displ[W] */
    struct sr_sparse_dist_batch no_dp = {0};
    if (!dp) {
        SR_ASSERT(l->num_dp == 0);
        dp = &no_dp;
    } else {
        SR_ASSERT(dp->num_features == l->num_dp && (dp->weights != NULL) == (kjt->weights != NULL));
    }
    SR_ASSERT(3 * (int64_t)l->num_slots <= sr_sparse_dist_work_words(l));
    SR_ASSERT(F <= 65535 && msg_words < 0x80000000LL);
    pack_slots_kernel<<<(unsigned)msg_words, SD_SCAN, 0, stream>>>(
        *l, lens, counts, kjt->weights != NULL, send, send_words);
    SR_CU_LAUNCHED();
    if (B > 0 && F > 0) {
        pack_ids_kernel<<<dim3(tiles(B, SD_THREADS), F), SD_THREADS, 0, stream>>>(*l, *kjt, lens,
                                                                                  send, *dp);
        SR_CU_LAUNCHED();
    }
    if (l->num_dp > 0 && B == 0)
        SR_CU_CHECK(cudaMemsetAsync(dp->offsets, 0, sizeof(int64_t), stream));
}

static void unpack_batch(struct sr_device *dev, const struct sr_sparse_dist_layout *l,
                         const int32_t *recv, const int64_t *counts,
                         const struct sr_sparse_dist_batch *g, cudaStream_t stream)
{
    const int W = l->world;
    const int64_t blocks = (int64_t)g->num_features * W;
    SR_ASSERT(g->batch == W * l->batch && blocks < 0x80000000LL);
    if (blocks == 0 || l->batch == 0) {
        SR_CU_CHECK(cudaMemsetAsync(g->offsets, 0,
                                    sizeof(int64_t) * ((size_t)blocks * l->batch + 1), stream));
        return;
    }
    unpack_offsets_kernel<<<(unsigned)blocks, SD_SCAN, 0, stream>>>(*l, recv, counts, *g);
    SR_CU_LAUNCHED();
    if (g->num_values == 0)
        return;
    const size_t smem = sizeof(int32_t) * (size_t)W;
    SR_ASSERT(smem <= 48 * 1024);
    unpack_ids_kernel<<<tiles(g->num_values, SD_COPY * SD_COPY_IDS), SD_COPY, smem, stream>>>(
        *l, recv, counts, *g);
    SR_CU_LAUNCHED();
}

static void cuda_unpack(struct sr_device *dev, const struct sr_sparse_dist_layout *l,
                        const int32_t *recv, int64_t recv_words, const int64_t *counts_recv,
                        const struct sr_sparse_dist_batch *batches, int num_batches, sr_stream_t s)
{
    const cudaStream_t stream = sr_cu_stream(dev, s);
    unpack_regions_kernel<<<1, SD_SCAN, 0, stream>>>(*l, counts_recv, recv_words);
    SR_CU_LAUNCHED();
    for (int i = 0; i < num_batches; i++)
        unpack_batch(dev, l, recv, counts_recv, &batches[i], stream);
}

static void pooled_launch(struct sr_device *dev, const struct sr_sparse_dist_cols *m,
                          const float *in, const float *scale, float *out, int gather,
                          sr_stream_t s)
{
    if (m->num_pieces == 0 || m->batch == 0)
        return;
    SR_ASSERT(m->num_pieces <= 65535);
    const dim3 grid(tiles(m->batch, SD_ROWS), m->num_pieces);
    const cudaStream_t stream = sr_cu_stream(dev, s);
    if (gather)
        pooled_kernel<1><<<grid, SD_THREADS, 0, stream>>>(*m, in, scale, out);
    else
        pooled_kernel<0><<<grid, SD_THREADS, 0, stream>>>(*m, in, scale, out);
    SR_CU_LAUNCHED();
}

static void cuda_pooled_scatter(struct sr_device *dev, const struct sr_sparse_dist_cols *m,
                                const float *buf, const float *scale, float *pooled, sr_stream_t s)
{
    pooled_launch(dev, m, buf, scale, pooled, 0, s);
}

static void cuda_pooled_gather(struct sr_device *dev, const struct sr_sparse_dist_cols *m,
                               const float *dpooled, const float *scale, float *buf, sr_stream_t s)
{
    pooled_launch(dev, m, dpooled, scale, buf, 1, s);
}

extern "C" const struct sr_sparse_dist_ops sr_cuda_sparse_dist_ops = {
    .bucketize = cuda_bucketize,
    .mean_scales = cuda_mean_scales,
    .pack = cuda_pack,
    .unpack = cuda_unpack,
    .pooled_scatter = cuda_pooled_scatter,
    .pooled_gather = cuda_pooled_gather,
    .hybrid_split = sr_cu_hybrid_split,
    .rows_copy = sr_cu_rows_copy,
    .compact_counts = sr_cu_compact_counts,
    .compact_owner = sr_cu_compact_owner,
    .compact_samples = sr_cu_compact_samples,
};
