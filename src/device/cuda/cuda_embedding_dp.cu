/*
 * CUDA ops of data-parallel embedding tables (contract in
 * device/ops_embedding_dp.h; the CPU reference is device/cpu/cpu_embedding_dp.c):
 * the dense (E, D) gradient and touch counts of a batch, and the fused
 * optimizer on the touched rows.
 *
 * accumulate: per-row owners, no atomics, no workspace. A table's rows are
 * split among P owner warps (P a power of two, at most DP_OWNERS and at most
 * the rows): warp o owns the rows r with r % P == o and alone reads and writes
 * their grad and counts. Every owner walks the table's ids in the CPU's order
 * (its features in order, then bags, then ids), DP_SCAN x 32 ids per step, one
 * per lane and chunk; a ballot picks the ids of its rows (a binary search over
 * the offsets finds their bags), and the warp adds them in lane order,
 * lanes now holding W-wide column chunks, DP_BATCH gradient rows in flight.
 * The row being summed stays in registers while consecutive ids hit it (a
 * small table's hot rows), and goes back to memory when another row comes.
 * So each row is summed in id order by one warp, from the value the caller
 * left in grad (zero): the CPU's sum, bit for bit, whatever the schedule.
 * The cost is that every owner reads all ids of its table (from L2).
 * Launches: grid (owner blocks, tables), DP_TABLES tables and DP_FEATS
 * feature entries per launch, as kernel arguments; a table with more features
 * continues in the next launch, which runs after this one on the stream.
 *
 * apply: one group of G lanes per row (as cuda_embedding.cu's backward), rows
 * with counts > 0 only, the shared row update of cuda_row_optim.cuh.
 */
#include <stdint.h>

#include "device/cuda/cuda_internal.h"
#include "device/cuda/cuda_row_optim.cuh"

extern "C" {
#include "device/ops_embedding_dp.h"
}

#define DP_THREADS    128 /* 4 owner warps per block */
#define DP_OWNERS     128 /* owners per table at most */
#define DP_TABLES     32  /* tables per accumulate launch */
#define DP_FEATS      128 /* feature entries per accumulate launch */
#define DP_BATCH      4   /* matched ids whose gradient rows are loaded together */
#define DP_SCAN       4   /* 32-id chunks whose ids are loaded together */
#define APPLY_THREADS 128
#define FULL_MASK     0xffffffffu

struct dp_table {
    float *grad;    /* (E, D) */
    float *counts;  /* (E) */
    int dim;        /* D */
    int owners;     /* P, a power of two */
    int feat_begin; /* this table's entries in dp_params.feat */
    int feat_end;
};

struct dp_feat {
    int f, col;
};

struct dp_params {
    const int64_t *offsets; /* (F*B + 1) */
    const int64_t *values;  /* (N) */
    const float *weights;   /* (N) or NULL */
    const float *dpooled;   /* (B, out_dim) */
    int batch, out_dim;
    struct dp_table tab[DP_TABLES];
    struct dp_feat feat[DP_FEATS];
};

/* The row an owner warp is summing: columns [c, c + W) on this lane. */
template <int W> struct owner_row {
    sr_cu_vec<W> acc;
    float count;
    int64_t row; /* -1: none */
};

/* ---- accumulate ---------------------------------------------------------------- */

/* Bag k in [k0, k0 + B) of id i: the last k with offsets[k] <= i. */
__device__ __forceinline__ int bag_of(const int64_t *offsets, int k0, int B, int64_t i)
{
    int lo = k0, hi = k0 + B;
    while (hi - lo > 1) {
        int mid = (lo + hi) >> 1;
        if (offsets[mid] <= i)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* Store the summed row (and its count, on the first column pass). */
template <int W>
__device__ __forceinline__ void flush(const struct dp_table &t, const owner_row<W> &o, int c,
                                      int pass0)
{
    if (o.row < 0)
        return;
    if (c < t.dim)
        sr_cu_store<W>(t.grad + o.row * t.dim + c, o.acc);
    if (pass0 && (threadIdx.x & 31) == 0)
        t.counts[o.row] = o.count;
}

/* Add up to DP_BATCH matched ids, taken in lane order from *bal. r, src, w:
 * this lane's id (row, pooled offset, weight). */
template <int W>
__device__ __forceinline__ void add_matches(const struct dp_params &p, const struct dp_table &t,
                                            owner_row<W> &o, unsigned *bal, int64_t r, int src,
                                            float w, int c, int pass0)
{
    int64_t rr[DP_BATCH];
    float ww[DP_BATCH];
    sr_cu_vec<W> x[DP_BATCH];
    bool ok[DP_BATCH];
#pragma unroll
    for (int q = 0; q < DP_BATCH; q++) {
        ok[q] = *bal != 0;
        const int lane = ok[q] ? __ffs(*bal) - 1 : 0;
        *bal &= *bal - 1;
        rr[q] = __shfl_sync(FULL_MASK, r, lane);
        ww[q] = __shfl_sync(FULL_MASK, w, lane);
        const int s = __shfl_sync(FULL_MASK, src, lane);
        x[q] = ok[q] && c < t.dim ? sr_cu_ldg<W>(p.dpooled + s + c) : sr_cu_zero<W>();
    }
#pragma unroll
    for (int q = 0; q < DP_BATCH; q++) {
        if (!ok[q])
            break;
        if (rr[q] != o.row) {
            flush<W>(t, o, c, pass0);
            o.row = rr[q];
            o.acc = c < t.dim ? sr_cu_load<W>(t.grad + o.row * t.dim + c) : sr_cu_zero<W>();
            o.count = t.counts[o.row];
        }
        o.acc = sr_cu_axpy<W>(o.acc, ww[q], x[q]);
        o.count = __fadd_rn(o.count, 1.0f);
    }
}

/* The owner's matches among the 32 ids [i0, i0 + 32) (lane l: id i0 + l, row r). */
template <int W>
__device__ __forceinline__ void scan_ids(const struct dp_params &p, const struct dp_table &t,
                                         owner_row<W> &o, int owner, int k0, int col, int64_t i0,
                                         int64_t r, int c, int pass0)
{
    const int64_t i = i0 + (threadIdx.x & 31);
    const bool mine = r >= 0 && (r & (t.owners - 1)) == owner;
    unsigned bal = __ballot_sync(FULL_MASK, mine);
    if (!bal)
        return;
    int src = 0;
    float w = 0.0f;
    if (mine) {
        src = (bag_of(p.offsets, k0, p.batch, i) - k0) * p.out_dim + col;
        w = p.weights ? __ldg(p.weights + i) : 1.0f;
    }
    while (bal)
        add_matches<W>(p, t, o, &bal, r, src, w, c, pass0);
}

/* The owner's share of feature f's ids (a feature of table t, columns at col),
 * DP_SCAN * 32 ids per step, their loads in flight together. */
template <int W>
__device__ __forceinline__ void scan_feature(const struct dp_params &p, const struct dp_table &t,
                                             owner_row<W> &o, int owner, int f, int col, int c,
                                             int pass0)
{
    const int lane = threadIdx.x & 31, k0 = f * p.batch;
    const int64_t lo = p.offsets[k0], hi = p.offsets[k0 + p.batch];
    for (int64_t i0 = lo; i0 < hi; i0 += 32 * DP_SCAN) {
        int64_t r[DP_SCAN];
#pragma unroll
        for (int q = 0; q < DP_SCAN; q++) {
            const int64_t i = i0 + 32 * q + lane;
            r[q] = i < hi ? __ldg(p.values + i) : -1;
        }
#pragma unroll
        for (int q = 0; q < DP_SCAN; q++)
            scan_ids<W>(p, t, o, owner, k0, col, i0 + 32 * q, r[q], c, pass0);
    }
}

template <int W> __global__ void __launch_bounds__(DP_THREADS) accumulate_kernel(const dp_params p)
{
    const struct dp_table &t = p.tab[blockIdx.y];
    const int owner = blockIdx.x * (DP_THREADS / 32) + (threadIdx.x >> 5);
    if (owner >= t.owners)
        return; /* the whole warp */
    const int lane = threadIdx.x & 31;
    for (int c0 = 0; c0 < t.dim; c0 += 32 * W) {
        owner_row<W> o;
        o.acc = sr_cu_zero<W>();
        o.count = 0.0f;
        o.row = -1;
        const int c = c0 + lane * W;
        for (int e = t.feat_begin; e < t.feat_end; e++)
            scan_feature<W>(p, t, o, owner, p.feat[e].f, p.feat[e].col, c, c0 == 0);
        flush<W>(t, o, c, c0 == 0);
    }
}

/* ---- apply ----------------------------------------------------------------------- */

struct apply_params {
    float *weight, *state;
    const float *grad, *counts;
    int64_t rows;
    int dim, G, log2G;
    struct sr_cu_optim optim;
};

template <int W, int OPT>
__device__ __forceinline__ void apply_row(const apply_params &p, const struct sr_cu_step &k,
                                          int64_t row, int lig, unsigned mask, float *part)
{
    const int d = p.dim;
    const struct sr_cu_row r = sr_cu_row_of(OPT, p.weight, p.state, p.rows, row, d);
    const float *g = p.grad + row * d;
    if constexpr (OPT == SR_OPTIM_ROWWISE_ADAGRAD) {
        const float s_old = *r.s;
        const float rate = sr_cu_rowwise_rate(k, g, d, s_old, lig, p.G, mask, part, r.s);
        for (int c = lig * W; c < d; c += p.G * W)
            sr_cu_store<W>(
                r.w + c, sr_cu_rowwise_step<W>(sr_cu_load<W>(r.w + c), rate, sr_cu_ldg<W>(g + c)));
    } else {
        for (int c = lig * W; c < d; c += p.G * W) {
            sr_cu_chunk<W> x = sr_cu_chunk_load<OPT, W>(r, c);
            sr_cu_chunk_update<OPT, W>(k, x, sr_cu_ldg<W>(g + c));
            sr_cu_chunk_store<OPT, W>(r, c, x);
        }
    }
}

template <int W, int OPT>
__global__ void __launch_bounds__(APPLY_THREADS) apply_kernel(const apply_params p)
{
    __shared__ float part[APPLY_THREADS * 16]; /* 16 floats per group (row-wise Adagrad) */
    const int lane = threadIdx.x & 31, lig = lane & (p.G - 1), grp = threadIdx.x >> p.log2G;
    const int groups = blockDim.x >> p.log2G;
    const unsigned mask = sr_cu_group_mask(lane, p.G);
    const struct sr_cu_step k = sr_cu_step_of<OPT>(p.optim);
    for (int64_t row = blockIdx.x * (int64_t)groups + grp; row < p.rows;
         row += (int64_t)gridDim.x * groups)
        if (p.counts[row] > 0.0f)
            apply_row<W, OPT>(p, k, row, lig, mask, part + grp * 16);
}

/* ---- launchers ------------------------------------------------------------------- */

static int owners_for(int64_t rows)
{
    int p = 1;
    while (p * 2 <= DP_OWNERS && p * 2 <= rows)
        p *= 2;
    return p;
}

static int dp_vec_width(const struct sr_emb_layout *layout, const float *dpooled,
                        float *const *grad)
{
    if (layout->out_dim % 4 || !sr_cu_aligned16(dpooled))
        return 1;
    for (int t = 0; t < layout->num_tables; t++)
        if (layout->tables[t].dim % 4 || !sr_cu_aligned16(grad[t]))
            return 1;
    for (int f = 0; f < layout->num_features; f++)
        if (layout->features[f].col % 4)
            return 1;
    return 4;
}

static void launch_accumulate(const struct dp_params *p, int num_tables, int W, cudaStream_t st)
{
    int max_owners = 0;
    for (int i = 0; i < num_tables; i++)
        max_owners = p->tab[i].owners > max_owners ? p->tab[i].owners : max_owners;
    const dim3 grid((max_owners + DP_THREADS / 32 - 1) / (DP_THREADS / 32), num_tables);
    if (W == 4)
        accumulate_kernel<4><<<grid, DP_THREADS, 0, st>>>(*p);
    else
        accumulate_kernel<1><<<grid, DP_THREADS, 0, st>>>(*p);
    SR_CU_LAUNCHED();
}

/* Add table t's features, from its e-th on, to p; returns the next feature
 * entry to add, or F when the table is complete. */
static int add_table(struct dp_params *p, int *nt, int *nf, const struct sr_emb_layout *layout,
                     int t, float *const *grad, float *const *counts, int from)
{
    struct dp_table *dt = &p->tab[(*nt)++];
    dt->grad = grad[t];
    dt->counts = counts[t];
    dt->dim = layout->tables[t].dim;
    dt->owners = owners_for(layout->tables[t].rows);
    dt->feat_begin = *nf;
    int f = from;
    for (; f < layout->num_features && *nf < DP_FEATS; f++)
        if (layout->features[f].table == t)
            p->feat[(*nf)++] = (struct dp_feat){f, layout->features[f].col};
    dt->feat_end = *nf;
    return f;
}

static void cu_dp_accumulate(struct sr_device *dev, const struct sr_emb_layout *layout,
                             const struct sr_emb_batch *batch, const float *dpooled,
                             float *const *grad, float *const *counts, sr_stream_t s)
{
    if (batch->batch == 0 || batch->num_values == 0)
        return;
    SR_ASSERT((int64_t)batch->batch * layout->num_features < ((int64_t)1 << 31));
    SR_ASSERT((int64_t)batch->batch * layout->out_dim < ((int64_t)1 << 31));
    cudaStream_t st = sr_cu_stream(dev, s);
    const int W = dp_vec_width(layout, dpooled, grad);
    struct dp_params p;
    p.offsets = batch->offsets;
    p.values = batch->values;
    p.weights = batch->weights;
    p.dpooled = dpooled;
    p.batch = batch->batch;
    p.out_dim = layout->out_dim;
    int nt = 0, nf = 0;
    for (int t = 0; t < layout->num_tables; t++) {
        int from = 0;
        do {
            if (nt == DP_TABLES || nf == DP_FEATS) {
                launch_accumulate(&p, nt, W, st);
                nt = nf = 0;
            }
            from = add_table(&p, &nt, &nf, layout, t, grad, counts, from);
        } while (from < layout->num_features);
    }
    if (nt > 0)
        launch_accumulate(&p, nt, W, st);
}

template <int W, int OPT>
static void launch_apply(const struct sr_device *dev, const apply_params &p, cudaStream_t st)
{
    const unsigned grid = sr_cu_grid(dev, p.rows, APPLY_THREADS / p.G, 32);
    apply_kernel<W, OPT><<<grid, APPLY_THREADS, 0, st>>>(p);
    SR_CU_LAUNCHED();
}

template <int W>
static void apply_as(const struct sr_device *dev, const apply_params &p, cudaStream_t st)
{
    switch (p.optim.kind) {
    case SR_OPTIM_SGD:
        launch_apply<W, SR_OPTIM_SGD>(dev, p, st);
        break;
    case SR_OPTIM_ADAGRAD:
        launch_apply<W, SR_OPTIM_ADAGRAD>(dev, p, st);
        break;
    case SR_OPTIM_ROWWISE_ADAGRAD:
        launch_apply<W, SR_OPTIM_ROWWISE_ADAGRAD>(dev, p, st);
        break;
    case SR_OPTIM_ADAM:
        launch_apply<W, SR_OPTIM_ADAM>(dev, p, st);
        break;
    }
}

static void cu_dp_apply(struct sr_device *dev, const struct sr_emb_table *tab, const float *grad,
                        const float *counts, const struct sr_emb_update *u, sr_stream_t s)
{
    if (tab->rows <= 0)
        return;
    const int W = tab->dim % 4 == 0 && sr_cu_aligned16(tab->weight) &&
                          sr_cu_aligned16(tab->state) && sr_cu_aligned16(grad)
                      ? 4
                      : 1;
    apply_params p;
    SR_ASSERT(tab->dtype == SR_DTYPE_F32); /* dp replicas stay fp32 */
    p.weight = (float *)tab->weight;
    p.state = tab->state;
    p.grad = grad;
    p.counts = counts;
    p.rows = tab->rows;
    p.dim = tab->dim;
    p.G = sr_cu_group_lanes(tab->dim, W);
    p.log2G = sr_cu_log2(p.G);
    p.optim = sr_cu_optim_of(u);
    if (W == 4)
        apply_as<4>(dev, p, sr_cu_stream(dev, s));
    else
        apply_as<1>(dev, p, sr_cu_stream(dev, s));
}

extern "C" const struct sr_emb_dp_ops sr_cuda_emb_dp_ops = {
    .accumulate = cu_dp_accumulate,
    .apply = cu_dp_apply,
};
