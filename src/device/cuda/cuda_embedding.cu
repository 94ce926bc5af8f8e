/*
 * CUDA embedding ops (the contract is in device/ops_embedding.h; the CPU
 * reference is device/cpu/cpu_embedding.c): table initialisation, the pooled
 * lookup of a whole batch in one launch, and the backward that merges each
 * row's ids and applies the fused optimizer in place.
 *
 * Groups. A row of D floats is served by a group of G lanes (G a power of two
 * from the layout's largest D, at most a warp), lane i of the group holding
 * the W-wide chunks at columns iW, iW + GW, ... W = 4 (float4) when every D,
 * every column and every pointer allows it, else 1. At D 128 a group is a
 * warp; at D 16 a warp is 8 groups of 4 lanes.
 *
 *   forward   one group per bag (f, b), all features in one launch. The group
 *             sums the bag's rows in bag order, FWD_ROWS rows in flight per
 *             lane, rounding as the CPU does (pooled is the CPU's bit for
 *             bit), and with keep_ids writes each id's key (table << R | row,
 *             R the bits of the largest table's rows) and value (the pooled
 *             offset it reads its gradient from, and its scale) at the
 *             table-grouped position.
 *   backward  cub::DeviceRadixSort::SortPairs (LSD radix: stable) of the kept
 *             ids on the R row bits only: the ids of one (table, row) then lie
 *             together and in their table-grouped order (equal rows of
 *             different tables keep their table order), so no pass sorts the
 *             table bits. A run of equal keys is one row's gradient (table
 *             key >> R, row key & (2^R - 1)); no (E, D) gradient exists.
 *             Work follows runs, not positions and not the longest run: each
 *             warp scans 32 sorted positions at a time and its groups take
 *             the tasks found there (for_each_task). With S the hot-row split
 *             (sr_emb_run_split) and tiles of S sorted positions:
 *               a run of at most S ids: one group sums it in id order
 *                 (BWD_ROWS in flight) and applies the optimizer at once;
 *               a longer run: one group per piece, its ids within one tile,
 *                 sums the piece into a slot of the workspace, and the run is
 *                 listed (backward_kernel); then one block per listed run adds
 *                 its pieces (its groups each a fixed share, in order, then
 *                 the shares in order) and applies the optimizer
 *                 (finish_kernel).
 *             A hot row with 10^5 ids thus costs 10^5 / S parallel pieces and
 *             a sum of as many partial rows, instead of 10^5 serial steps.
 *             Row-wise Adagrad keeps a row of up to G W columns in registers
 *             (one pass); wider rows are staged in shared memory to sum g² in
 *             the CPU's order.
 *
 * Grids hold at most GRID_PER_SM blocks of FWD_THREADS threads per
 * multiprocessor; kernels loop grid-stride over bags or sorted positions.
 *
 * Determinism: nothing is summed by atomics or in an order that depends on
 * scheduling. Each bag has one group; a run of at most S ids is summed by one
 * group in the order of the stable sort, which is the CPU's order (table-
 * grouped id order), so it matches the CPU's rounding; a longer run is summed
 * as fixed pieces (tile boundaries of the sorted order) added in order, so
 * reruns are bit-identical and the result is within rounding of the CPU's.
 * The one atomic, which appends a long run to the second kernel's list, sums
 * nothing: the list's order only decides which group applies which row.
 *
 * Workspace (device, one block; every part 256-byte aligned):
 *
 *   tables    (T)      cu_table: weight, state, rows, D
 *   features  (F)      cu_feature: table, column, mean
 *   key_a/b   (N)      uint32 (uint64 when table and row need more than 32
 *                      bits) keys, ping-pong
 *   val_a/b   (N)      uint64 (pooled offset | float scale << 32), ping-pong
 *   partial   (2 ceil(N / S) + 2, max_dim rounded up to 4) floats: piece sums
 *             of long runs (at most two pieces start in a tile)
 *   long      (N / (S + 1) + 2) ints: how many long runs, then where each
 *             starts (the first kernel lists them for the second)
 *   sort      cub's temporary storage for N items
 *
 * The first two are per-layout data, written once by workspace_init (an
 * upload kernel whose arguments carry them; it waits for it, as a set-up
 * call); per-step host arrays (feature_pos) travel as kernel arguments. No
 * other op synchronises with the host or allocates, so every op must be given
 * the layout (the same tables, weight and state pointers) that workspace_init
 * was given.
 */
#include <stdint.h>
#include <string.h>

#include <cub/device/device_radix_sort.cuh>

#include "device/cuda/cuda_internal.h"
#include "device/cuda/cuda_row_optim.cuh"

extern "C" {
#include "device/ops_embedding.h"
#include "shardrec/rng.h"
#include "shardrec/alloc.h"
}

#define FWD_THREADS         256
#define BWD_THREADS         128
#define FWD_ROWS            4    /* rows of a bag in flight per lane */
#define BWD_ROWS            4    /* ids of a run in flight per lane */
#define POS_SMALL           64   /* features whose positions travel in a small launch */
#define POS_LARGE           3072 /* ... in a large one (24 KiB of arguments) */
#define UPLOAD_BYTES        4096
#define WS_ALIGN            256
#define GRID_PER_SM         16 /* blocks of FWD_THREADS per multiprocessor at most */
#define SMEM_MAX            (48 << 10)
#define GROUP_SMEM(max_dim) (2 * (max_dim) + 16) /* floats of a backward group (row-wise) */

struct cu_table {
    float *weight;
    float *state;
    int64_t rows;
    int dim;
};

struct cu_feature {
    int table, col, mean;
};

/* ---- kernels: rng, fill, upload ------------------------------------------------- */

/* w[e] = (float)(lo + span * sr_rng_uniform(seed, stream, counter0 + e)), in double. */
__global__ void init_uniform_kernel(float *w, int64_t n, uint64_t counter0, uint64_t seed,
                                    uint64_t stream, double lo, double span)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        double u = __ull2double_rn(sr_rng_u64(seed, stream, counter0 + (uint64_t)e) >> 11) *
                   (1.0 / 9007199254740992.0);
        w[e] = __double2float_rn(__dadd_rn(lo, __dmul_rn(span, u)));
    }
}

/* p[0 .. 4 n4) = value, as float4 (p 16-byte aligned). */
__global__ void fill4_kernel(float4 *p, int64_t n4, float value)
{
    const float4 v = make_float4(value, value, value, value);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4;
         i += (int64_t)gridDim.x * blockDim.x)
        p[i] = v;
}

__global__ void fill_kernel(float *p, int64_t n, float value)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        p[i] = value;
}

struct upload_chunk {
    unsigned char bytes[UPLOAD_BYTES];
};

/* dst[0 .. n) = the chunk's bytes: host data to the device without a host wait. */
__global__ void upload_kernel(unsigned char *dst, int n, const struct upload_chunk c)
{
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        dst[i] = c.bytes[i];
}

/* ---- kernels: forward ------------------------------------------------------------ */

template <typename K> struct fwd_params {
    const struct cu_table *tables;
    const struct cu_feature *features;
    const int64_t *offsets; /* (F*B + 1) */
    const int64_t *values;  /* (N) */
    const float *weights;   /* (N) or NULL */
    float *pooled;          /* (B, out_dim) */
    K *key;                 /* (N) kept keys, NULL without keep_ids */
    uint64_t *val;          /* (N) kept values */
    int batch, nbags, out_dim, G, log2G;
    int row_bits; /* R: a key is table << R | row */
    int short_bags; /* forward_short_kernel: at most 2 ids a bag on average, a chunk a lane */
};

template <int MAXF> struct fwd_pos {
    int64_t feature_pos[MAXF]; /* the batch's feature_pos */
};

__device__ __forceinline__ uint64_t pack_val(int src, float scale)
{
    return (uint64_t)(uint32_t)src | ((uint64_t)__float_as_uint(scale) << 32);
}

__device__ __forceinline__ uint32_t val_src(uint64_t v)
{
    return (uint32_t)v;
}

__device__ __forceinline__ float val_scale(uint64_t v)
{
    return __uint_as_float((uint32_t)(v >> 32));
}

/* Σ over the bag's ids [s, e) of w_i * row_i[c .. c + W), in bag order. The
 * loads of a batch are unconditional (past the end they repeat the last id,
 * which is not added), so all FWD_ROWS rows are in flight together. */
template <int W>
__device__ __forceinline__ sr_cu_vec<W> pool_chunk(const float *weight, int d,
                                                   const int64_t *values, const float *wts,
                                                   int64_t s, int64_t e, int c)
{
    sr_cu_vec<W> acc = sr_cu_zero<W>();
    for (int64_t i = s; i < e; i += FWD_ROWS) {
        int64_t id[FWD_ROWS];
        float w[FWD_ROWS];
        sr_cu_vec<W> x[FWD_ROWS];
#pragma unroll
        for (int u = 0; u < FWD_ROWS; u++) {
            const int64_t at = i + u < e ? i + u : e - 1;
            id[u] = __ldg(values + at);
            w[u] = wts ? __ldg(wts + at) : 1.0f;
        }
#pragma unroll
        for (int u = 0; u < FWD_ROWS; u++)
            x[u] = sr_cu_ldg<W>(weight + id[u] * d + c);
#pragma unroll
        for (int u = 0; u < FWD_ROWS; u++)
            if (i + u < e)
                acc = sr_cu_axpy<W>(acc, w[u], x[u]);
    }
    return acc;
}

/* Record the bag's ids [s, e) at kept positions base + i. */
template <typename K>
__device__ __forceinline__ void keep_bag(const fwd_params<K> &p, int64_t base, int64_t s, int64_t e,
                                         int lig, int src, float inv, uint64_t key_table)
{
    for (int64_t i = s + lig; i < e; i += p.G) {
        const float w = p.weights ? p.weights[i] : 1.0f;
        p.key[base + i] = (K)(key_table | (uint64_t)p.values[i]);
        p.val[base + i] = pack_val(src, __fmul_rn(w, inv));
    }
}

template <int W, typename K, int MAXF>
__global__ void __launch_bounds__(FWD_THREADS)
    forward_kernel(const fwd_params<K> p, const fwd_pos<MAXF> pos)
{
    const int lig = threadIdx.x & (p.G - 1);
    const int groups = blockDim.x >> p.log2G;
    for (int k = blockIdx.x * groups + (threadIdx.x >> p.log2G); k < p.nbags;
         k += gridDim.x * groups) {
        const int f = k / p.batch, b = k - f * p.batch;
        const struct cu_feature fe = p.features[f];
        const struct cu_table tb = p.tables[fe.table];
        const int64_t s = p.offsets[k], e = p.offsets[k + 1];
        const float inv = fe.mean && e > s ? __fdiv_rn(1.0f, (float)(e - s)) : 1.0f;
        const int src = b * p.out_dim + fe.col;
        for (int c = lig * W; c < tb.dim; c += p.G * W) {
            sr_cu_vec<W> acc = pool_chunk<W>(tb.weight, tb.dim, p.values, p.weights, s, e, c);
            if (inv != 1.0f)
                acc = sr_cu_scale<W>(acc, inv);
            sr_cu_store<W>(p.pooled + src + c, acc);
        }
        if (p.key) {
            const int64_t base = pos.feature_pos[f] - p.offsets[(int64_t)f * p.batch];
            keep_bag<K>(p, base, s, e, lig, src, inv, (uint64_t)fe.table << p.row_bits);
        }
    }
}

/* The forward of short bags (at most a couple of ids on average, one chunk
 * of a row per lane): a group takes SHORT_BAGS bags at a time, strided by
 * the grid, and issues their offsets, their first ids and their first rows
 * together, so a warp keeps SHORT_BAGS times more rows in flight than one
 * bag at a time allows; further ids of a bag follow one by one. Sums and
 * scales are the general kernel's, in bag order. */
#define SHORT_BAGS 4
template <int W, typename K, int MAXF>
__global__ void __launch_bounds__(FWD_THREADS)
    forward_short_kernel(const fwd_params<K> p, const fwd_pos<MAXF> pos)
{
    const int lig = threadIdx.x & (p.G - 1), c = lig * W;
    const int stride = gridDim.x * (blockDim.x >> p.log2G);
    for (int k0 = blockIdx.x * (blockDim.x >> p.log2G) + (threadIdx.x >> p.log2G); k0 < p.nbags;
         k0 += SHORT_BAGS * stride) {
        int64_t s[SHORT_BAGS], e[SHORT_BAGS];
        struct cu_table tb[SHORT_BAGS];
        float w0[SHORT_BAGS];
        sr_cu_vec<W> x[SHORT_BAGS];
#pragma unroll
        for (int u = 0; u < SHORT_BAGS; u++) {
            const int k = k0 + u * stride;
            s[u] = k < p.nbags ? p.offsets[k] : 0;
            e[u] = k < p.nbags ? p.offsets[k + 1] : 0;
            tb[u] = p.tables[p.features[k < p.nbags ? k / p.batch : 0].table];
        }
#pragma unroll
        for (int u = 0; u < SHORT_BAGS; u++) {
            const int live = e[u] > s[u] && c < tb[u].dim;
            const int64_t id = live ? __ldg(p.values + s[u]) : 0;
            w0[u] = live && p.weights ? __ldg(p.weights + s[u]) : 1.0f;
            x[u] = live ? sr_cu_ldg<W>(tb[u].weight + id * tb[u].dim + c) : sr_cu_zero<W>();
        }
#pragma unroll
        for (int u = 0; u < SHORT_BAGS; u++) {
            const int k = k0 + u * stride;
            if (k >= p.nbags)
                break;
            const int f = k / p.batch, b = k - f * p.batch;
            const struct cu_feature fe = p.features[f];
            const float inv = fe.mean && e[u] > s[u] ? __fdiv_rn(1.0f, (float)(e[u] - s[u])) : 1.0f;
            const int src = b * p.out_dim + fe.col;
            if (c < tb[u].dim) {
                sr_cu_vec<W> acc = sr_cu_zero<W>();
                if (e[u] > s[u])
                    acc = sr_cu_axpy<W>(acc, w0[u], x[u]);
                for (int64_t i = s[u] + 1; i < e[u]; i++) {
                    const float wi = p.weights ? __ldg(p.weights + i) : 1.0f;
                    acc = sr_cu_axpy<W>(acc, wi,
                                        sr_cu_ldg<W>(tb[u].weight + __ldg(p.values + i) * tb[u].dim + c));
                }
                if (inv != 1.0f)
                    acc = sr_cu_scale<W>(acc, inv);
                sr_cu_store<W>(p.pooled + src + c, acc);
            }
            if (p.key) {
                const int64_t base = pos.feature_pos[f] - p.offsets[(int64_t)f * p.batch];
                keep_bag<K>(p, base, s[u], e[u], lig, src, inv, (uint64_t)fe.table << p.row_bits);
            }
        }
    }
}

/* ---- kernels: backward ----------------------------------------------------------- */

template <typename K> struct bwd_params {
    const struct cu_table *tables;
    const K *keys;        /* (n) sorted */
    const uint64_t *vals; /* (n) in the keys' order */
    const float *dpooled; /* (B, out_dim) */
    float *partial;       /* (2 ceil(n / split) + 2, pstride) piece sums of long runs */
    int *long_count;      /* (1) long runs found; zeroed before the first kernel */
    int *long_starts;     /* (n / (split + 1) + 1) their first sorted positions, any order */
    int team_offset;      /* finish_kernel: where the team's partial rows start in shared memory */
    int team_max;         /* finish_kernel: at most this many groups share a long run */
    int n, max_dim, G, log2G;
    int split, log2split; /* S: runs of more than S ids are summed in pieces */
    int pstride;          /* floats of a piece sum: max_dim rounded up to 4 */
    int row_bits;         /* R: a key is table << R | row */
    struct sr_cu_optim optim;
};

/* Columns [c, c + W) of the gradient of ids j, j + 1, ... < end while their
 * key is `key`: Σ scale_i * dpooled[src_i + c ..], in order. v0 is vals[j],
 * loaded early by the caller. */
template <int W, typename K>
__device__ __forceinline__ sr_cu_vec<W> run_grad(const bwd_params<K> &p, int j, int end, K key,
                                                 uint64_t v0, int c)
{
    sr_cu_vec<W> acc =
        sr_cu_axpy<W>(sr_cu_zero<W>(), val_scale(v0), sr_cu_ldg<W>(p.dpooled + val_src(v0) + c));
    for (int m = j + 1;; m += BWD_ROWS) {
        bool ok[BWD_ROWS];
        uint64_t v[BWD_ROWS];
        sr_cu_vec<W> x[BWD_ROWS];
        K kk[BWD_ROWS];
#pragma unroll
        for (int u = 0; u < BWD_ROWS; u++) /* all in flight: past the end, the last key */
            kk[u] = p.keys[m + u < end ? m + u : end - 1];
        bool run = true;
#pragma unroll
        for (int u = 0; u < BWD_ROWS; u++) {
            run = run && m + u < end && kk[u] == key;
            ok[u] = run;
        }
        if (!ok[0])
            return acc;
#pragma unroll
        for (int u = 0; u < BWD_ROWS; u++)
            v[u] = ok[u] ? p.vals[m + u] : 0;
#pragma unroll
        for (int u = 0; u < BWD_ROWS; u++)
            x[u] = ok[u] ? sr_cu_ldg<W>(p.dpooled + val_src(v[u]) + c) : sr_cu_zero<W>();
#pragma unroll
        for (int u = 0; u < BWD_ROWS; u++)
            if (ok[u])
                acc = sr_cu_axpy<W>(acc, val_scale(v[u]), x[u]);
        if (!ok[BWD_ROWS - 1])
            return acc;
    }
}

/* The gradient of a run of at most S ids, summed whole (the CPU's order). */
template <int W, typename K> struct whole_run {
    const bwd_params<K> &p;
    int j;
    K key;
    uint64_t v0;
    __device__ __forceinline__ sr_cu_vec<W> operator()(int c) const
    {
        return run_grad<W, K>(p, j, p.n, key, v0, c);
    }
};

/* The sum of a long run's pieces [a, b) (piece 0 is the start piece, in
 * slot 2 t0 + 1; piece i > 0 heads tile t0 + i, in slot 2 (t0 + i)), added in
 * that order, BWD_ROWS in flight. */
template <int W, typename K> struct piece_sums {
    const bwd_params<K> &p;
    int t0, a, b;
    __device__ __forceinline__ const float *slot(int i, int c) const
    {
        return p.partial + (size_t)(i == 0 ? 2 * t0 + 1 : 2 * (t0 + i)) * p.pstride + c;
    }
    __device__ __forceinline__ sr_cu_vec<W> operator()(int c) const
    {
        sr_cu_vec<W> acc = sr_cu_load<W>(slot(a, c));
        for (int i = a + 1; i < b; i += BWD_ROWS) {
            sr_cu_vec<W> x[BWD_ROWS];
#pragma unroll
            for (int u = 0; u < BWD_ROWS; u++)
                x[u] = i + u < b ? sr_cu_load<W>(slot(i + u, c)) : sr_cu_zero<W>();
#pragma unroll
            for (int u = 0; u < BWD_ROWS; u++)
                if (i + u < b)
                    acc = sr_cu_axpy<W>(acc, 1.0f, x[u]);
        }
        return acc;
    }
};

/* The gradient of a long run from its team's partial rows (shared memory,
 * one row of pstride floats per member), added in member order. */
template <int W> struct team_sums {
    const float *team;
    int members, pstride;
    __device__ __forceinline__ sr_cu_vec<W> operator()(int c) const
    {
        sr_cu_vec<W> acc = sr_cu_load<W>(team + c);
        for (int q = 1; q < members; q++)
            acc = sr_cu_axpy<W>(acc, 1.0f, sr_cu_load<W>(team + (size_t)q * pstride + c));
        return acc;
    }
};

/* Apply the optimizer to row `row` of tb with the gradient grad(c) of each
 * chunk. The row's chunks are loaded before its gradient is summed. gs: the
 * group's shared memory (row-wise Adagrad): gradient (max_dim), weights
 * (max_dim) and 16 partial sums. */
template <int W, typename K, int OPT, typename Grad>
__device__ __forceinline__ void update_row(const bwd_params<K> &p, const struct sr_cu_step &k,
                                           const struct cu_table &tb, int64_t row,
                                           const Grad &grad, int lig, unsigned mask, float *gs)
{
    const int d = tb.dim;
    const struct sr_cu_row r = sr_cu_row_of(OPT, tb.weight, tb.state, tb.rows, row, d);
    float s_old = 0.0f;
    if constexpr (OPT == SR_OPTIM_ROWWISE_ADAGRAD) {
        s_old = *r.s;
        if (d <= p.G * W) {
            /* One chunk per lane: the row stays in registers, one pass over
             * it. The group's Σ g² is a fixed shuffle tree to its lane 0,
             * broadcast, so every lane applies the same rate and reruns give
             * the same bits (the CPU's 16-partial order is within rounding). */
            const int c = lig * W;
            const bool mine = c < d;
            const sr_cu_vec<W> w = mine ? sr_cu_load_once<W>(r.w + c) : sr_cu_zero<W>();
            const sr_cu_vec<W> g = mine ? grad(c) : sr_cu_zero<W>();
            float sq = 0.0f;
#pragma unroll
            for (int i = 0; i < W; i++)
                sq = __fadd_rn(sq, __fmul_rn(g.x[i], g.x[i]));
            for (int off = p.G / 2; off > 0; off >>= 1)
                sq = __fadd_rn(sq, __shfl_down_sync(mask, sq, off, p.G));
            sq = __shfl_sync(mask, sq, 0, p.G);
            const float s_new = __fadd_rn(s_old, __fdiv_rn(sq, (float)d));
            if (lig == 0)
                *r.s = s_new;
            const float rate = __fdiv_rn(k.lr, __fadd_rn(__fsqrt_rn(s_new), k.eps));
            if (mine)
                sr_cu_store_once<W>(r.w + c, sr_cu_rowwise_step<W>(w, rate, g));
            return;
        }
    }
    for (int c = lig * W; c < d; c += p.G * W) {
        sr_cu_chunk<W> x = sr_cu_chunk_load<OPT, W>(r, c);
        sr_cu_vec<W> g = grad(c);
        if constexpr (OPT == SR_OPTIM_ROWWISE_ADAGRAD) {
            sr_cu_store<W>(gs + c, g);
            sr_cu_store<W>(gs + p.max_dim + c, x.w);
        } else {
            sr_cu_chunk_update<OPT, W>(k, x, g);
            sr_cu_chunk_store<OPT, W>(r, c, x);
        }
    }
    if constexpr (OPT == SR_OPTIM_ROWWISE_ADAGRAD) {
        float *part = gs + 2 * p.max_dim;
        const float rate = sr_cu_rowwise_rate(k, gs, d, s_old, lig, p.G, mask, part, r.s);
        for (int c = lig * W; c < d; c += p.G * W) {
            sr_cu_vec<W> w = sr_cu_load<W>(gs + p.max_dim + c);
            sr_cu_store<W>(r.w + c, sr_cu_rowwise_step<W>(w, rate, sr_cu_load<W>(gs + c)));
        }
    }
}

template <typename K>
__device__ __forceinline__ struct cu_table table_of(const bwd_params<K> &p, K key)
{
    return p.tables[(uint64_t)key >> p.row_bits];
}

template <typename K> __device__ __forceinline__ int64_t row_of(const bwd_params<K> &p, K key)
{
    return (int64_t)((uint64_t)key & (((uint64_t)1 << p.row_bits) - 1));
}

/* Whether the run with first id j (key) holds more than S ids. */
template <typename K>
__device__ __forceinline__ bool run_is_long(const bwd_params<K> &p, int j, K key)
{
    return j + p.split < p.n && p.keys[j + p.split] == key;
}

/* Whether the run holding tile start j (not the run's first id) is long. */
template <typename K>
__device__ __forceinline__ bool continues_long_run(const bwd_params<K> &p, int j, K key)
{
    if (p.keys[j - p.split] == key)
        return true; /* ids j - S .. j: S + 1 of them */
    int out = j - p.split, in = j; /* the run's first id is in (out, in] */
    while (in - out > 1) {
        const int mid = out + (in - out) / 2;
        if (p.keys[mid] == key)
            in = mid;
        else
            out = mid;
    }
    return run_is_long(p, in, key);
}

/* The end of the long run with first id j: ids j .. j + S are in it. */
template <typename K> __device__ __forceinline__ int long_run_end(const bwd_params<K> &p, int j, K key)
{
    int in = j + p.split, out = p.n;
    for (long long step = p.split;; step *= 2) { /* gallop, then bisect */
        const long long probe = in + step;
        if (probe >= p.n || p.keys[probe] != key) {
            out = probe < p.n ? (int)probe : p.n;
            break;
        }
        in = (int)probe;
    }
    while (out - in > 1) {
        const int mid = in + (out - in) / 2;
        if (p.keys[mid] == key)
            in = mid;
        else
            out = mid;
    }
    return out;
}

/* Tasks of the first backward kernel at a sorted position. */
enum { TASK_NONE, TASK_RUN, TASK_START_PIECE, TASK_HEAD_PIECE };

template <typename K> __device__ __forceinline__ int task_at(const bwd_params<K> &p, int j)
{
    if (j >= p.n)
        return TASK_NONE;
    const K key = p.keys[j];
    if (j == 0 || p.keys[j - 1] != key)
        return run_is_long(p, j, key) ? TASK_START_PIECE : TASK_RUN;
    if ((j & (p.split - 1)) == 0 && continues_long_run(p, j, key))
        return TASK_HEAD_PIECE;
    return TASK_NONE;
}

/* Each warp takes windows of 32 sorted positions; its lanes find which
 * positions start a task (one lane each), and the warp's groups take the
 * tasks together (task i to group i mod 32/G, all groups at once). Work thus follows the tasks,
 * not the positions: a hot row's skipped positions cost a ballot. */
template <typename K, typename KindOf, typename Task>
__device__ __forceinline__ void for_each_task(const bwd_params<K> &p, const KindOf &kind_of,
                                              const Task &task)
{
    const int lane = threadIdx.x & 31, gw = lane >> p.log2G, ngw = 32 >> p.log2G;
    const int warps = gridDim.x * (blockDim.x >> 5);
    for (int base = (blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)) * 32; base < p.n;
         base += warps * 32) {
        const int kind = kind_of(base + lane);
        const unsigned any = __ballot_sync(0xffffffffu, kind != TASK_NONE);
        const unsigned b1 = __ballot_sync(0xffffffffu, kind & 1);
        const unsigned b2 = __ballot_sync(0xffffffffu, kind & 2);
        unsigned m = any;
        for (int i = 0; i < gw; i++) /* the first gw tasks are other groups' */
            m &= m - 1;
        while (m) { /* every group at once, each at its own task */
            const int bit = __ffs(m) - 1;
            task(base + bit, (int)((b1 >> bit) & 1) | (int)(((b2 >> bit) & 1) << 1));
            for (int i = 0; i < ngw; i++)
                m &= m - 1;
        }
    }
}

/* The sum of a piece (ids j .. < end while the key holds) into its slot. */
template <int W, typename K>
__device__ __forceinline__ void piece_store(const bwd_params<K> &p, int j, int end, K key, int slot,
                                            int lig)
{
    const uint64_t v0 = p.vals[j];
    const int d = table_of(p, key).dim;
    float *out = p.partial + (size_t)slot * p.pstride;
    for (int c = lig * W; c < d; c += p.G * W)
        sr_cu_store<W>(out + c, run_grad<W, K>(p, j, end, key, v0, c));
}

/* What a thread of a backward kernel knows of its group: its lane in the
 * group, the group's index in the block and lane mask, the group's shared
 * memory (row-wise Adagrad) and the step's optimizer constants. */
struct bwd_group {
    int lig, grp;
    unsigned mask;
    float *gs;
    struct sr_cu_step k;
};

template <typename K, int OPT> __device__ __forceinline__ struct bwd_group group_of(const bwd_params<K> &p)
{
    extern __shared__ float4 smem4[];
    const int lane = threadIdx.x & 31, grp = threadIdx.x >> p.log2G;
    return {lane & (p.G - 1), grp, sr_cu_group_mask(lane, p.G),
            (float *)smem4 + (size_t)grp * GROUP_SMEM(p.max_dim), sr_cu_step_of<OPT>(p.optim)};
}

/* First kernel: every run of at most S ids summed and applied by one group;
 * every piece of a longer run (the run's ids within one tile of S sorted
 * positions) summed by one group into its slot: the start piece of a run
 * starting in tile t into slot 2t + 1, the piece at the head of tile t into
 * slot 2t. At most two pieces start in a tile, so slots never collide. */
template <int W, typename K, int OPT>
__global__ void __launch_bounds__(BWD_THREADS) backward_kernel(const bwd_params<K> p)
{
    const struct bwd_group g = group_of<K, OPT>(p);
    const auto kind_of = [&](int j) { return task_at<K>(p, j); };
    for_each_task(p, kind_of, [&](int j, int task) {
        const K key = p.keys[j];
        const int tile = j >> p.log2split;
        if (task == TASK_RUN) {
            const whole_run<W, K> grad = {p, j, key, p.vals[j]};
            update_row<W, K, OPT>(p, g.k, table_of(p, key), row_of(p, key), grad, g.lig, g.mask, g.gs);
        } else if (task == TASK_START_PIECE) {
            if (g.lig == 0) /* the list's order decides no sum: each run is its own row's */
                p.long_starts[atomicAdd(p.long_count, 1)] = j;
            piece_store<W, K>(p, j, (tile + 1) << p.log2split, key, 2 * tile + 1, g.lig);
        } else {
            piece_store<W, K>(p, j, j + p.split < p.n ? j + p.split : p.n, key, 2 * tile, g.lig);
        }
    });
}

/* Second kernel: one block per listed long run (grid-stride over the list).
 * Its P pieces are split among a team of up to team_max groups, member q
 * adding pieces [q P / m, (q + 1) P / m) in order into a partial row in
 * shared memory; then group 0 adds the members' rows in order and applies the
 * optimizer. The split depends only on P and the block's shape, so reruns
 * give the same bits. Rows of long runs are not the first kernel's rows. */
template <int W, typename K, int OPT>
__global__ void __launch_bounds__(BWD_THREADS) finish_kernel(const bwd_params<K> p)
{
    extern __shared__ float4 smem4[];
    const struct bwd_group g = group_of<K, OPT>(p);
    float *team = (float *)smem4 + p.team_offset;
    const int groups = blockDim.x >> p.log2G, count = *p.long_count;
    for (int i = blockIdx.x; i < count; i += gridDim.x) {
        const int j = p.long_starts[i];
        const K key = p.keys[j];
        const int t0 = j >> p.log2split;
        const int pieces = ((long_run_end(p, j, key) - 1) >> p.log2split) - t0 + 1;
        const int members = min(min(groups, p.team_max), pieces);
        const int d = table_of(p, key).dim;
        if (g.grp < members) {
            const piece_sums<W, K> part = {p, t0, g.grp * pieces / members,
                                           (g.grp + 1) * pieces / members};
            for (int c = g.lig * W; c < d; c += p.G * W)
                sr_cu_store<W>(team + (size_t)g.grp * p.pstride + c, part(c));
        }
        __syncthreads();
        if (g.grp == 0) {
            const team_sums<W> grad = {team, members, p.pstride};
            update_row<W, K, OPT>(p, g.k, table_of(p, key), row_of(p, key), grad, g.lig, g.mask,
                                  g.gs);
        }
        __syncthreads(); /* the team's rows are free again */
    }
}

/* ---- the workspace ---------------------------------------------------------------- */

struct ws_view {
    struct cu_table *tables;
    struct cu_feature *features;
    void *key[2];     /* uint32 or uint64 */
    uint64_t *val[2]; /* packed (src, scale) */
    float *partial;   /* piece sums of long runs */
    int *long_list;   /* the count of long runs, then their first positions */
    void *sort;
    size_t sort_bytes;
    size_t image_bytes; /* tables and features */
    int key64;          /* keys are uint64 */
    int row_bits;       /* R: the bits the sort sorts on */
    int split;          /* S: sr_emb_run_split() */
    int pstride;        /* floats of a piece sum */
};

static size_t align_up(size_t n)
{
    return (n + WS_ALIGN - 1) & ~(size_t)(WS_ALIGN - 1);
}

static int bits_for(uint64_t n)
{
    int bits = 0;
    while (bits < 64 && n > 1 && ((n - 1) >> bits) != 0)
        bits++;
    return bits;
}

/* R: the bits of the largest row index of any table. */
static int row_bits_of(const struct sr_emb_layout *layout)
{
    int bits = 0;
    for (int t = 0; t < layout->num_tables; t++) {
        int b = bits_for((uint64_t)layout->tables[t].rows);
        bits = b > bits ? b : bits;
    }
    return bits;
}

template <typename K> static size_t sort_temp_bytes(int64_t n, int end_bit)
{
    size_t bytes = 0;
    cub::DoubleBuffer<K> keys(NULL, NULL);
    cub::DoubleBuffer<uint64_t> vals(NULL, NULL);
    SR_CU_CHECK(cub::DeviceRadixSort::SortPairs(NULL, bytes, keys, vals, (int)n, 0,
                                                end_bit > 0 ? end_bit : 1));
    return bytes;
}

/* Carve the workspace at base (NULL: measure only); returns its bytes. The sort's
 * storage comes last, so with_sort = 0 (no size query) leaves the rest in place. */
static size_t ws_carve(const struct sr_emb_layout *layout, char *base, int with_sort,
                       struct ws_view *v)
{
    const int T = layout->num_tables, F = layout->num_features;
    const size_t n = (size_t)(layout->max_values > 0 ? layout->max_values : 1);
    v->row_bits = row_bits_of(layout);
    v->key64 = v->row_bits + bits_for((uint64_t)T) > 32;
    SR_ASSERT(v->row_bits + bits_for((uint64_t)T) <= 64);
    v->sort_bytes = !with_sort ? 0
                    : v->key64 ? sort_temp_bytes<uint64_t>((int64_t)n, v->row_bits)
                               : sort_temp_bytes<uint32_t>((int64_t)n, v->row_bits);
    const size_t key_bytes = v->key64 ? 8 : 4;
    v->split = sr_emb_run_split();
    v->pstride = (layout->max_dim + 3) & ~3;
    const size_t slots = 2 * ((n + (size_t)v->split - 1) / (size_t)v->split) + 2;
    size_t part[9] = {sizeof(struct cu_table) * T,
                      sizeof(struct cu_feature) * F,
                      n * key_bytes,
                      n * key_bytes,
                      n * 8,
                      n * 8,
                      slots * (size_t)v->pstride * sizeof(float),
                      (n / ((size_t)v->split + 1) + 2) * sizeof(int),
                      v->sort_bytes};
    char *p[9];
    size_t off = 0;
    for (int i = 0; i < 9; i++) {
        p[i] = base ? base + off : NULL;
        off += align_up(part[i] ? part[i] : 1);
    }
    v->tables = (struct cu_table *)p[0];
    v->features = (struct cu_feature *)p[1];
    v->image_bytes = (size_t)(p[2] - p[0]);
    v->key[0] = p[2], v->key[1] = p[3];
    v->val[0] = (uint64_t *)p[4], v->val[1] = (uint64_t *)p[5];
    v->partial = (float *)p[6];
    v->long_list = (int *)p[7];
    v->sort = p[8];
    return off;
}

/* Threads of a backward block: row-wise Adagrad keeps a row per group in
 * shared memory, so blocks shrink for very wide rows. */
static int bwd_threads(const struct sr_emb_layout *layout, int G, size_t *smem)
{
    int threads = BWD_THREADS;
    *smem = 0;
    if (layout->optim != SR_OPTIM_ROWWISE_ADAGRAD)
        return threads;
    for (;;) {
        *smem = (size_t)(threads / G) * GROUP_SMEM((size_t)layout->max_dim) * sizeof(float);
        if (*smem <= SMEM_MAX || threads == 32)
            break;
        threads /= 2;
    }
    if (*smem > SMEM_MAX)
        SR_ABORT("embedding dim %d is too wide for the CUDA row-wise Adagrad backward (at most "
                 "%d); HINT: split the table column-wise",
                 layout->max_dim, (int)(SMEM_MAX / sizeof(float) - 16) / 2);
    return threads;
}

static size_t cu_workspace_bytes(struct sr_device *dev, const struct sr_emb_layout *layout)
{
    SR_ASSERT(layout->max_values >= 0 && layout->max_values < ((int64_t)1 << 31));
    SR_ASSERT((int64_t)layout->max_batch * layout->out_dim < ((int64_t)1 << 31));
    SR_ASSERT((int64_t)layout->max_batch * layout->num_features < ((int64_t)1 << 31));
    size_t smem;
    bwd_threads(layout, 32, &smem);
    struct ws_view v;
    return ws_carve(layout, NULL, 1, &v);
}

static void upload(struct sr_device *dev, void *dst, const void *src, size_t bytes)
{
    struct upload_chunk c;
    for (size_t off = 0; off < bytes; off += UPLOAD_BYTES) {
        size_t n = bytes - off < UPLOAD_BYTES ? bytes - off : UPLOAD_BYTES;
        memcpy(c.bytes, (const char *)src + off, n);
        upload_kernel<<<1, 256, 0, sr_cu_stream(dev, NULL)>>>((unsigned char *)dst + off, (int)n,
                                                              c);
        SR_CU_LAUNCHED();
    }
}

/* The layout's tables and features, written on the main stream. */
static void cu_workspace_init(struct sr_device *dev, const struct sr_emb_layout *layout,
                              void *workspace)
{
    struct ws_view v;
    SR_ASSERT(sr_cu_aligned16(workspace));
    ws_carve(layout, (char *)workspace, 0, &v);
    const int T = layout->num_tables, F = layout->num_features;
    char *image = (char *)sr_calloc(1, v.image_bytes);
    struct cu_table *tables = (struct cu_table *)image;
    struct cu_feature *features =
        (struct cu_feature *)(image + ((char *)v.features - (char *)v.tables));
    for (int t = 0; t < T; t++) {
        const struct sr_emb_table *tab = &layout->tables[t];
        SR_ASSERT(tab->dim >= 1 && tab->dim <= layout->max_dim);
        tables[t] = (struct cu_table){tab->weight, tab->state, tab->rows, tab->dim};
    }
    for (int f = 0; f < F; f++) {
        const struct sr_emb_feature *fe = &layout->features[f];
        features[f] = (struct cu_feature){fe->table, fe->col, fe->mean};
    }
    upload(dev, v.tables, image, v.image_bytes);
    sr_free(image);
    /* A set-up call, as immediate as the CPU's: the workspace is ready for
     * ops on any stream when it returns. */
    SR_CU_CHECK(cudaStreamSynchronize(sr_cu_stream(dev, NULL)));
}

/* W = 4 when every row, column and pointer the kernels touch allows float4
 * (with_state: the backward's optimizer state too). */
static int vec_width(const struct sr_emb_layout *layout, const float *pooled, int with_state)
{
    if (layout->out_dim % 4 || !sr_cu_aligned16(pooled))
        return 1;
    for (int t = 0; t < layout->num_tables; t++) {
        const struct sr_emb_table *tab = &layout->tables[t];
        if (tab->dim % 4 || !sr_cu_aligned16(tab->weight))
            return 1;
        if (with_state && !sr_cu_aligned16(tab->state))
            return 1;
    }
    for (int f = 0; f < layout->num_features; f++)
        if (layout->features[f].col % 4)
            return 1;
    return 4;
}

/* ---- init_uniform, fill ------------------------------------------------------------ */

static void cu_init_uniform(struct sr_device *dev, float *weight, int64_t rows, int dim,
                            int64_t row_begin, uint64_t seed, uint64_t stream, double lo, double hi,
                            sr_stream_t s)
{
    const int64_t n = rows * dim;
    if (n <= 0)
        return;
    const uint64_t counter0 = (uint64_t)row_begin * (uint64_t)dim;
    init_uniform_kernel<<<sr_cu_blocks(n, 256), 256, 0, sr_cu_stream(dev, s)>>>(
        weight, n, counter0, seed, stream, lo, hi - lo);
    SR_CU_LAUNCHED();
}

static void cu_fill(struct sr_device *dev, float *p, int64_t n, float value, sr_stream_t s)
{
    if (n <= 0)
        return;
    cudaStream_t st = sr_cu_stream(dev, s);
    if (sr_cu_aligned16(p) && n >= 4) {
        fill4_kernel<<<sr_cu_blocks(n / 4, 256), 256, 0, st>>>((float4 *)p, n / 4, value);
        SR_CU_LAUNCHED();
        p += n / 4 * 4;
        n %= 4;
        if (!n)
            return;
    }
    fill_kernel<<<sr_cu_blocks(n, 256), 256, 0, st>>>(p, n, value);
    SR_CU_LAUNCHED();
}

/* ---- forward ------------------------------------------------------------------------ */

template <int W, typename K, int MAXF>
static void launch_forward(const struct sr_device *dev, const fwd_params<K> &p,
                           const struct sr_emb_batch *batch, int keep, cudaStream_t st)
{
    fwd_pos<MAXF> pos;
    const int F = p.nbags / p.batch;
    for (int f = 0; f < F; f++)
        pos.feature_pos[f] = keep ? batch->feature_pos[f] : 0;
    const int groups = FWD_THREADS / p.G;
    const unsigned grid = sr_cu_grid(dev, p.nbags, groups, GRID_PER_SM);
    if (p.short_bags)
        forward_short_kernel<W, K, MAXF><<<grid, FWD_THREADS, 0, st>>>(p, pos);
    else
        forward_kernel<W, K, MAXF><<<grid, FWD_THREADS, 0, st>>>(p, pos);
    SR_CU_LAUNCHED();
}

template <int W, typename K>
static void forward_as(const struct sr_device *dev, const struct sr_emb_layout *layout,
                       const struct sr_emb_batch *batch, int keep, float *pooled,
                       const struct ws_view *v, cudaStream_t st)
{
    fwd_params<K> p;
    p.tables = v->tables;
    p.features = v->features;
    p.offsets = batch->offsets;
    p.values = batch->values;
    p.weights = batch->weights;
    p.pooled = pooled;
    p.key = keep ? (K *)v->key[0] : NULL;
    p.val = keep ? v->val[0] : NULL;
    p.batch = batch->batch;
    p.nbags = layout->num_features * batch->batch;
    p.out_dim = layout->out_dim;
    p.G = sr_cu_group_lanes(layout->max_dim, W);
    p.log2G = sr_cu_log2(p.G);
    p.row_bits = v->row_bits;
    p.short_bags = batch->num_values <= 2 * (int64_t)p.nbags && layout->max_dim <= p.G * W;
    if (layout->num_features <= POS_SMALL)
        launch_forward<W, K, POS_SMALL>(dev, p, batch, keep, st);
    else if (layout->num_features <= POS_LARGE)
        launch_forward<W, K, POS_LARGE>(dev, p, batch, keep, st);
    else
        SR_ABORT("%d features in one embedding layout; the CUDA forward takes at most %d",
                 layout->num_features, POS_LARGE);
}

static void cu_forward(struct sr_device *dev, const struct sr_emb_layout *layout,
                       const struct sr_emb_batch *batch, int keep_ids, float *pooled,
                       void *workspace, sr_stream_t s)
{
    SR_ASSERT(batch->batch <= layout->max_batch && batch->num_values <= layout->max_values);
    if (batch->batch == 0 || layout->num_features == 0)
        return;
    struct ws_view v;
    ws_carve(layout, (char *)workspace, 0, &v);
    cudaStream_t st = sr_cu_stream(dev, s);
    const int W = vec_width(layout, pooled, 0);
    if (W == 4 && v.key64)
        forward_as<4, uint64_t>(dev, layout, batch, keep_ids, pooled, &v, st);
    else if (W == 4)
        forward_as<4, uint32_t>(dev, layout, batch, keep_ids, pooled, &v, st);
    else if (v.key64)
        forward_as<1, uint64_t>(dev, layout, batch, keep_ids, pooled, &v, st);
    else
        forward_as<1, uint32_t>(dev, layout, batch, keep_ids, pooled, &v, st);
}

/* ---- backward ----------------------------------------------------------------------- */

/* Sort the n kept ids by the row bits of their keys (stable); returns which
 * buffers hold the result. With R = 0 (one-row tables) the table-grouped
 * order already has each row's ids together. */
template <typename K> static int sort_kept(const struct ws_view *v, int n, cudaStream_t st)
{
    if (v->row_bits == 0 || n < 2)
        return 0;
    cub::DoubleBuffer<K> keys((K *)v->key[0], (K *)v->key[1]);
    cub::DoubleBuffer<uint64_t> vals(v->val[0], v->val[1]);
    size_t bytes = v->sort_bytes;
    SR_CU_CHECK(cub::DeviceRadixSort::SortPairs(v->sort, bytes, keys, vals, n, 0, v->row_bits, st));
    SR_ASSERT(keys.selector == vals.selector);
    return keys.selector;
}

template <int W, typename K, int OPT>
static void launch_backward(const struct sr_device *dev, const bwd_params<K> &p, int threads,
                            size_t smem, cudaStream_t st)
{
    const long long windows = ((long long)p.n + 31) / 32; /* a warp's tasks come 32 ids at a time */
    const unsigned grid = sr_cu_grid(dev, windows, threads / 32, GRID_PER_SM * FWD_THREADS / threads);
    const bool may_have_long = p.n > p.split; /* a long run needs more than S ids */
    if (may_have_long)
        SR_CU_CHECK(cudaMemsetAsync(p.long_count, 0, sizeof(int), st));
    backward_kernel<W, K, OPT><<<grid, threads, smem, st>>>(p);
    SR_CU_LAUNCHED();
    if (may_have_long) {
        /* the team's partial rows follow the groups' row-wise Adagrad rows */
        bwd_params<K> f = p;
        f.team_offset = (int)(smem / sizeof(float));
        const size_t row_bytes = (size_t)p.pstride * sizeof(float);
        const size_t room = SMEM_MAX > smem ? SMEM_MAX - smem : 0;
        f.team_max = (int)(room / row_bytes < (size_t)(threads / p.G) ? room / row_bytes
                                                                      : (size_t)(threads / p.G));
        if (f.team_max < 1)
            SR_ABORT("embedding dim %d is too wide for the CUDA backward of hot rows (shared memory)",
                     p.max_dim);
        const size_t finish_smem = smem + (size_t)f.team_max * row_bytes;
        const unsigned finish_grid = sr_cu_grid(dev, p.n / (p.split + 1) + 1, 1, 8);
        finish_kernel<W, K, OPT><<<finish_grid, threads, finish_smem, st>>>(f);
        SR_CU_LAUNCHED();
    }
}

template <int W, typename K>
static void backward_as(const struct sr_device *dev, const struct sr_emb_layout *layout,
                        const float *dpooled, const struct sr_emb_update *update,
                        const struct ws_view *v, int n, cudaStream_t st)
{
    const int cur = sort_kept<K>(v, n, st);
    bwd_params<K> p;
    p.tables = v->tables;
    p.keys = (const K *)v->key[cur];
    p.vals = v->val[cur];
    p.dpooled = dpooled;
    p.partial = v->partial;
    p.long_count = v->long_list;
    p.long_starts = v->long_list + 1;
    p.team_offset = 0; /* set for the second kernel at its launch */
    p.team_max = 1;
    p.n = n;
    p.max_dim = layout->max_dim;
    p.split = v->split;
    p.log2split = sr_cu_log2(v->split);
    p.pstride = v->pstride;
    p.G = sr_cu_group_lanes(layout->max_dim, W);
    p.log2G = sr_cu_log2(p.G);
    p.row_bits = v->row_bits;
    p.optim = sr_cu_optim_of(update);
    size_t smem;
    const int threads = bwd_threads(layout, p.G, &smem);
    switch (layout->optim) {
    case SR_OPTIM_SGD:
        launch_backward<W, K, SR_OPTIM_SGD>(dev, p, threads, smem, st);
        break;
    case SR_OPTIM_ADAGRAD:
        launch_backward<W, K, SR_OPTIM_ADAGRAD>(dev, p, threads, smem, st);
        break;
    case SR_OPTIM_ROWWISE_ADAGRAD:
        launch_backward<W, K, SR_OPTIM_ROWWISE_ADAGRAD>(dev, p, threads, smem, st);
        break;
    case SR_OPTIM_ADAM:
        launch_backward<W, K, SR_OPTIM_ADAM>(dev, p, threads, smem, st);
        break;
    }
}

static void cu_backward(struct sr_device *dev, const struct sr_emb_layout *layout,
                        const struct sr_emb_batch *batch, const float *dpooled,
                        const struct sr_emb_update *update, void *workspace, sr_stream_t s)
{
    SR_ASSERT(update->optim.kind == layout->optim);
    const int64_t n = batch->table_pos[layout->num_tables];
    SR_ASSERT(n >= 0 && n <= layout->max_values);
    if (n == 0)
        return;
    struct ws_view v;
    ws_carve(layout, (char *)workspace, 1, &v);
    cudaStream_t st = sr_cu_stream(dev, s);
    const int W = vec_width(layout, dpooled, 1);
    if (W == 4 && v.key64)
        backward_as<4, uint64_t>(dev, layout, dpooled, update, &v, (int)n, st);
    else if (W == 4)
        backward_as<4, uint32_t>(dev, layout, dpooled, update, &v, (int)n, st);
    else if (v.key64)
        backward_as<1, uint64_t>(dev, layout, dpooled, update, &v, (int)n, st);
    else
        backward_as<1, uint32_t>(dev, layout, dpooled, update, &v, (int)n, st);
}

extern "C" const struct sr_embedding_ops sr_cuda_embedding_ops = {
    .workspace_bytes = cu_workspace_bytes,
    .workspace_init = cu_workspace_init,
    .init_uniform = cu_init_uniform,
    .fill = cu_fill,
    .forward = cu_forward,
    .backward = cu_backward,
};
