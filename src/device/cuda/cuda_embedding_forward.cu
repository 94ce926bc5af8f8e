/*
 * The CUDA pooled forward (device/ops_embedding.h's forward; groups of lanes:
 * cuda_embedding.cuh):
 *
 * One group per bag (f, b), all features in one launch. The group
 * sums the bag's rows in bag order, FWD_ROWS rows in flight per
 * lane, rounding as the CPU does (pooled is the CPU's bit for
 * bit), and with keep_ids writes each id's key (table << R | row,
 * R the bits of the largest table's rows) and value (the pooled
 * offset it reads its gradient from, and its scale) at the
 * table-grouped position.
 *
 * Three kernels, one sum: the general one (a group a bag, FWD_ROWS rows
 * in flight a lane); short bags (at most 2 ids on average) of rows one
 * chunk a lane wide, SHORT_BAGS bags a group at a time; and, where several
 * groups share a warp (D up to 8 W), the narrow kernel, which sets up a
 * warp's 64 bags with coalesced reads before pooling them.
 *
 * Determinism: each bag has one group, which sums in bag order.
 */
#include <stdint.h>

#include "device/cuda/cuda_embedding.cuh"

#define FWD_ROWS  4    /* rows of a bag in flight per lane */
#define POS_SMALL 64   /* features whose positions travel in a small launch */
#define POS_LARGE 3072 /* ... in a large one (24 KiB of arguments) */

/* ---- kernels: forward ------------------------------------------------------------ */

template <typename K> struct fwd_params {
    const struct cu_table *tables;
    const struct cu_feature *features;
    const int64_t *offsets; /* (F*B + 1) */
    const int64_t *values;  /* (N) */
    const float *weights;   /* (N) or NULL */
    float *pooled;          /* (B, out_dim) */
    K *key;                 /* (N) kept keys, NULL without keep_ids */
    void *val;              /* (N) kept values (store_val) */
    int plain_vals;         /* values are 4-byte offsets (sr_cu_emb_plain_vals) */
    int batch, nbags, out_dim, G, log2G;
    int row_bits;   /* R: a key is table << R | row */
    int short_bags; /* forward_short_kernel: at most 2 ids a bag on average, a chunk a lane */
    int tiled_bags; /* forward_narrow_kernel: bags of the tiled order, those past the batch too */
};

template <int MAXF> struct fwd_pos {
    int64_t feature_pos[MAXF]; /* the batch's feature_pos */
};
/* Σ over the bag's ids [s, e) of w_i * row_i[c .. c + W), in bag order. The
 * loads of a batch are unconditional (past the end they repeat the last id,
 * which is not added), so all FWD_ROWS rows are in flight together. */
template <int W>
__device__ __forceinline__ sr_cu_vec<W> pool_chunk(const struct cu_table &tb, const int64_t *values,
                                                   const float *wts, int64_t s, int64_t e, int c)
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
            x[u] = sr_cu_w_load<W, false>(tb, id[u] * tb.dim + c);
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
        store_val(p.val, p.plain_vals, base + i, src, __fmul_rn(w, inv));
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
            sr_cu_vec<W> acc = pool_chunk<W>(tb, p.values, p.weights, s, e, c);
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
            x[u] = live ? sr_cu_w_load<W, false>(tb[u], id * tb[u].dim + c) : sr_cu_zero<W>();
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
                    acc = sr_cu_axpy<W>(
                        acc, wi,
                        sr_cu_w_load<W, false>(tb[u], __ldg(p.values + i) * tb[u].dim + c));
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

/* The forward of short bags in narrow rows (several groups to a warp: D up
 * to 8 W), a warp WARP_BAGS bags at a time. Set-up: lane j reads bag j's
 * offsets, first id, feature and table (coalesced reads, one dependent step)
 * into the warp's records in shared memory, and keeps the bag's ids. Pooling:
 * each group of G lanes takes every (32 / G)-th record, FWD_ROWS_NARROW rows
 * in flight a lane. Sums and scales are the general kernel's, in bag order.
 *
 * Bags go in tiles of TILE_SAMPLES samples of one feature, all features of a
 * block of samples before the next block: a warp's 64 bags are 2 features of
 * 32 samples, so its pooled rows land in runs of 2 features' columns of a
 * sample and its kept keys and offsets in runs of 32. In feature-major order
 * (bag f * B + b) each pooled row of a warp landed in a sample row of its
 * own, out_dim floats apart. Measured at D 16 (emb_ops --case d16: 26
 * features of one id, batch 163,840; one H200, two runs each, interleaved),
 * forward ms (with keep_ids): feature-major 0.286-0.288 (0.299-0.302);
 * tiles of 1 sample 0.221 (0.295), 4 0.218 (0.246), 8 0.218-0.220
 * (0.231-0.233), 16 0.214 (0.227), 32 0.209-0.210 (0.224-0.225). */
#define WARP_BAGS 64 /* bags a warp sets up at a time: two a lane */
#ifndef TILE_SAMPLES
#define TILE_SAMPLES 32 /* samples of a feature's tile */
#endif
#ifndef FWD_ROWS_NARROW
#define FWD_ROWS_NARROW 4 /* rows in flight a lane (measured: 4 beat 8) */
#endif
#ifndef NARROW_BLOCKS
#define NARROW_BLOCKS 3 /* blocks a multiprocessor holds at least (at most 80 registers a thread) */
#endif
struct warp_bag {
    const void *weight; /* the bag's table */
    int64_t e0;         /* the first id's row, as an element of the table */
    int64_t s;          /* the bag's first id */
    int n;              /* ids in the bag; -1: past the batch */
    int src;            /* its pooled offset */
    float inv, w0;      /* the mean's scale; the first id's weight */
    int dim, dtype;
};

/* Bag t of the tiled order: feature f, sample b; false past the batch. */
__device__ __forceinline__ bool tiled_bag(int t, int nfeat, int batch, int *f, int *b)
{
    const int per = TILE_SAMPLES * nfeat; /* bags of a block of samples */
    const int blk = t / per, in = t - blk * per;
    *f = in / TILE_SAMPLES;
    *b = blk * TILE_SAMPLES + (in - *f * TILE_SAMPLES);
    return *b < batch;
}

template <int W, typename K, int MAXF>
__device__ __forceinline__ struct warp_bag warp_bag_setup(const fwd_params<K> &p,
                                                          const fwd_pos<MAXF> &pos, int t,
                                                          int nfeat)
{
    struct warp_bag r;
    r.n = -1;
    int f, b;
    if (!tiled_bag(t, nfeat, p.batch, &f, &b))
        return r;
    const int k = f * p.batch + b;
    const struct cu_feature fe = p.features[f];
    const struct cu_table *tb = &p.tables[fe.table];
    const int64_t s = p.offsets[k], e = p.offsets[k + 1];
    r.weight = tb->weight;
    r.dim = tb->dim;
    r.dtype = tb->dtype;
    r.s = s;
    r.n = (int)(e - s);
    r.e0 = e > s ? __ldg(p.values + s) * r.dim : 0;
    r.w0 = e > s && p.weights ? __ldg(p.weights + s) : 1.0f;
    r.inv = fe.mean && e > s ? __fdiv_rn(1.0f, (float)(e - s)) : 1.0f;
    r.src = b * p.out_dim + fe.col;
    if (p.key) {
        const int64_t base = pos.feature_pos[f] - p.offsets[(int64_t)f * p.batch];
        const uint64_t key_table = (uint64_t)fe.table << p.row_bits;
        for (int64_t i = s; i < e; i++) {
            const float w = p.weights ? p.weights[i] : 1.0f;
            p.key[base + i] = (K)(key_table | (uint64_t)p.values[i]);
            store_val(p.val, p.plain_vals, base + i, r.src, __fmul_rn(w, r.inv));
        }
    }
    return r;
}

template <int W>
__device__ __forceinline__ sr_cu_vec<W> warp_bag_row(const struct warp_bag &r, int64_t e)
{
    struct cu_table t;
    t.weight = (void *)r.weight;
    t.dtype = r.dtype;
    return sr_cu_w_load<W, false>(t, e);
}

template <int W, typename K, int MAXF>
__global__ void __launch_bounds__(FWD_THREADS, NARROW_BLOCKS)
    forward_narrow_kernel(const fwd_params<K> p, const fwd_pos<MAXF> pos)
{
    __shared__ struct warp_bag recs[(FWD_THREADS / 32) * WARP_BAGS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    struct warp_bag *wb = recs + warp * WARP_BAGS;
    const int c = (lane & (p.G - 1)) * W, grp = lane >> p.log2G, groups = 32 >> p.log2G;
    const int nfeat = p.nbags / p.batch;
    const int chunks = (p.tiled_bags + WARP_BAGS - 1) / WARP_BAGS;
    for (int ch = blockIdx.x * warps + warp; ch < chunks; ch += gridDim.x * warps) {
#pragma unroll
        for (int j = lane; j < WARP_BAGS; j += 32)
            wb[j] = warp_bag_setup<W, K, MAXF>(p, pos, ch * WARP_BAGS + j, nfeat);
        __syncwarp();
        for (int j0 = grp; j0 < WARP_BAGS; j0 += groups * FWD_ROWS_NARROW) {
            sr_cu_vec<W> x[FWD_ROWS_NARROW];
#pragma unroll
            for (int u = 0; u < FWD_ROWS_NARROW; u++) {
                const int j = j0 + u * groups;
                const int live = j < WARP_BAGS && wb[j].n > 0 && c < wb[j].dim;
                x[u] = live ? warp_bag_row<W>(wb[j], wb[j].e0 + c) : sr_cu_zero<W>();
            }
#pragma unroll
            for (int u = 0; u < FWD_ROWS_NARROW; u++) {
                const int j = j0 + u * groups;
                if (j >= WARP_BAGS || wb[j].n < 0 || c >= wb[j].dim)
                    continue;
                const struct warp_bag &r = wb[j];
                sr_cu_vec<W> acc = sr_cu_zero<W>();
                if (r.n > 0)
                    acc = sr_cu_axpy<W>(acc, r.w0, x[u]);
                for (int64_t i = r.s + 1; i < r.s + r.n; i++) {
                    const float wi = p.weights ? __ldg(p.weights + i) : 1.0f;
                    acc =
                        sr_cu_axpy<W>(acc, wi, warp_bag_row<W>(r, __ldg(p.values + i) * r.dim + c));
                }
                if (r.inv != 1.0f)
                    acc = sr_cu_scale<W>(acc, r.inv);
                sr_cu_store<W>(p.pooled + r.src + c, acc);
            }
        }
        __syncwarp();
    }
}

/* ---- the launch -------------------------------------------------------------------- */

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
    const int warp_chunks = (p.tiled_bags + WARP_BAGS - 1) / WARP_BAGS;
    if (p.short_bags && p.G <= 8)
        forward_narrow_kernel<W, K, MAXF>
            <<<sr_cu_grid(dev, warp_chunks, FWD_THREADS / 32, GRID_PER_SM), FWD_THREADS, 0, st>>>(
                p, pos);
    else if (p.short_bags)
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
    p.plain_vals = sr_cu_emb_plain_vals(layout, batch);
    p.batch = batch->batch;
    p.nbags = layout->num_features * batch->batch;
    p.out_dim = layout->out_dim;
    p.G = sr_cu_group_lanes(layout->max_dim, W);
    p.log2G = sr_cu_log2(p.G);
    p.row_bits = v->row_bits;
    p.short_bags = batch->num_values <= 2 * (int64_t)p.nbags && layout->max_dim <= p.G * W;
    const int64_t tiled = ((int64_t)p.batch + TILE_SAMPLES - 1) / TILE_SAMPLES * TILE_SAMPLES *
                          layout->num_features;
    SR_ASSERT(tiled <= INT32_MAX - WARP_BAGS);
    p.tiled_bags = (int)tiled;
    if (layout->num_features <= POS_SMALL)
        launch_forward<W, K, POS_SMALL>(dev, p, batch, keep, st);
    else if (layout->num_features <= POS_LARGE)
        launch_forward<W, K, POS_LARGE>(dev, p, batch, keep, st);
    else
        SR_ABORT("%d features in one embedding layout; the CUDA forward takes at most %d",
                 layout->num_features, POS_LARGE);
}

void sr_cu_emb_forward(struct sr_device *dev, const struct sr_emb_layout *layout,
                       const struct sr_emb_batch *batch, int keep_ids, float *pooled,
                       void *workspace, sr_stream_t s)
{
    SR_ASSERT(batch->batch <= layout->max_batch && batch->num_values <= layout->max_values);
    if (batch->batch == 0 || layout->num_features == 0)
        return;
    struct ws_view v;
    sr_cu_emb_ws_carve(layout, (char *)workspace, 0, &v);
    cudaStream_t st = sr_cu_stream(dev, s);
    const int W = sr_cu_emb_vec_width(layout, pooled, 0);
    if (W == 4 && v.key64)
        forward_as<4, uint64_t>(dev, layout, batch, keep_ids, pooled, &v, st);
    else if (W == 4)
        forward_as<4, uint32_t>(dev, layout, batch, keep_ids, pooled, &v, st);
    else if (v.key64)
        forward_as<1, uint64_t>(dev, layout, batch, keep_ids, pooled, &v, st);
    else
        forward_as<1, uint32_t>(dev, layout, batch, keep_ids, pooled, &v, st);
}
