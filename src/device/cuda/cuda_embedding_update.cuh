/*
 * The update of one embedding row in the CUDA backward (cuda_embedding_backward.cu
 * finds the rows and their gradients): the kernels' parameters, a group's view
 * of itself, and the optimizer applied to a row from its gradient.
 */
#ifndef SHARDREC_CUDA_EMBEDDING_UPDATE_CUH
#define SHARDREC_CUDA_EMBEDDING_UPDATE_CUH

#include <stdint.h>

#include "device/cuda/cuda_embedding.cuh"

template <typename K> struct bwd_params {
    const struct cu_table *tables;
    const K *keys;        /* (n) sorted */
    const void *vals;     /* (n) in the keys' order (load_val) */
    const K *kept_keys;   /* (n) the forward's order (lone_kernel) */
    const void *kept_vals;
    unsigned *marks;      /* a bit per table row: several ids (lone ids: NULL) */
    int plain_vals;       /* values are 4-byte offsets */
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
    struct cu_round round; /* 16-bit tables: how updates are narrowed */
};

/* Row-wise Adagrad on a row its group holds whole, one chunk per lane (w,
 * the weights, and g, the gradient, of columns [lig W, lig W + W); zeros past
 * the row's end): one pass over the row. The group's Σ g² is a fixed shuffle
 * tree to its lane 0, broadcast, so every lane applies the same rate and
 * reruns give the same bits (the CPU's 16-partial order is within rounding).
 * s: the row's sum, s_old its value. */
template <int W, typename K, bool F32>
__device__ __forceinline__ void
rowwise_whole_step(const bwd_params<K> &p, const struct sr_cu_step &k, const struct cu_table &tb,
                   int64_t row, float *s, float s_old, sr_cu_vec<W> w, sr_cu_vec<W> g, int lig,
                   unsigned mask)
{
    const int c = lig * W, d = tb.dim;
    float sq = 0.0f;
#pragma unroll
    for (int i = 0; i < W; i++)
        sq = __fadd_rn(sq, __fmul_rn(g.x[i], g.x[i]));
    for (int off = p.G / 2; off > 0; off >>= 1)
        sq = __fadd_rn(sq, __shfl_down_sync(mask, sq, off, p.G));
    sq = __shfl_sync(mask, sq, 0, p.G);
    const float s_new = __fadd_rn(s_old, __fdiv_rn(sq, (float)d));
    if (lig == 0)
        *s = s_new;
    const float rate = __fdiv_rn(k.lr, __fadd_rn(__fsqrt_rn(s_new), k.eps));
    if (c < d)
        sr_cu_w_store<W, F32>(tb, row, c, sr_cu_rowwise_step<W>(w, rate, g), p.round, k.step);
}

/* Apply the optimizer to row `row` of tb with the gradient grad(c) of each
 * chunk. The row's chunks are loaded before its gradient is summed. gs: the
 * group's shared memory (row-wise Adagrad): gradient (max_dim), weights
 * (max_dim) and 16 partial sums. F32: every table is fp32; WHOLE: every row
 * fits its group (max_dim <= G W), so row-wise Adagrad's shared-memory path
 * is not compiled in (lone_kernel: fewer registers). */
template <int W, typename K, int OPT, typename Grad, bool F32 = false, bool WHOLE = false>
__device__ __forceinline__ void update_row(const bwd_params<K> &p, const struct sr_cu_step &k,
                                           const struct cu_table &tb, int64_t row,
                                           const Grad &grad, int lig, unsigned mask, float *gs)
{
    const int d = tb.dim;
    /* r's weight pointer is fp32's; weights go through sr_cu_w_load / _store,
     * which read and write them in the table's dtype */
    const struct sr_cu_row r = sr_cu_row_of(OPT, (float *)tb.weight, tb.state, tb.rows, row, d);
    float s_old = 0.0f;
    if constexpr (OPT == SR_OPTIM_ROWWISE_ADAGRAD) {
        s_old = *r.s;
        if (WHOLE || d <= p.G * W) {
            /* one chunk per lane: the row stays in registers */
            const int c = lig * W;
            const bool mine = c < d;
            const sr_cu_vec<W> w =
                mine ? sr_cu_w_load<W, true, F32>(tb, row * d + c) : sr_cu_zero<W>();
            const sr_cu_vec<W> g = mine ? grad(c) : sr_cu_zero<W>();
            rowwise_whole_step<W, K, F32>(p, k, tb, row, r.s, s_old, w, g, lig, mask);
            return;
        }
    }
    if constexpr (!(WHOLE && OPT == SR_OPTIM_ROWWISE_ADAGRAD)) { /* rows over G W columns */
        for (int c = lig * W; c < d; c += p.G * W) {
            sr_cu_chunk<W> x;
            x.w = sr_cu_w_load<W, true, F32>(tb, row * d + c);
            sr_cu_chunk_load_state<OPT, W>(r, c, x);
            sr_cu_vec<W> g = grad(c);
            if constexpr (OPT == SR_OPTIM_ROWWISE_ADAGRAD) {
                sr_cu_store<W>(gs + c, g);
                sr_cu_store<W>(gs + p.max_dim + c, x.w);
            } else {
                sr_cu_chunk_update<OPT, W>(k, x, g);
                sr_cu_w_store<W, F32>(tb, row, c, x.w, p.round, k.step);
                sr_cu_chunk_store_state<OPT, W>(r, c, x);
            }
        }
        if constexpr (OPT == SR_OPTIM_ROWWISE_ADAGRAD) {
            float *part = gs + 2 * p.max_dim;
            const float rate = sr_cu_rowwise_rate(k, gs, d, s_old, lig, p.G, mask, part, r.s);
            for (int c = lig * W; c < d; c += p.G * W) {
                sr_cu_vec<W> w = sr_cu_load<W>(gs + p.max_dim + c);
                sr_cu_w_store<W, F32>(tb, row, c,
                                      sr_cu_rowwise_step<W>(w, rate, sr_cu_load<W>(gs + c)),
                                      p.round, k.step);
            }
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

/* Rows whose one id in the batch is lone (its gradient: its scaled pooled
 * row, lone_id's), NB of them updated by row-wise Adagrad in one group at
 * once: every row's loads (key and value, weights and state, pooled row) are
 * issued before any row is updated, so a group has NB rows in flight where
 * update_row has one; the arithmetic is update_row's, so the bits are too.
 * at: the ids' positions in keys / vals, nb <= NB of them (the same for the
 * whole group). Every row held whole by its group (max_dim <= G W). */
template <int W, typename K, int OPT, bool F32, int NB>
__device__ __forceinline__ void update_singles(const bwd_params<K> &p, const struct sr_cu_step &k,
                                               const K *keys, const void *vals, const int (&at)[NB],
                                               int nb, int lig, unsigned mask)
{
    static_assert(OPT == SR_OPTIM_ROWWISE_ADAGRAD, "row-wise Adagrad");
    const int c = lig * W;
    K key[NB];
    uint64_t v[NB];
#pragma unroll
    for (int u = 0; u < NB; u++)
        if (u < nb) {
            key[u] = keys[at[u]];
            v[u] = load_val(vals, p.plain_vals, at[u]);
        }
    sr_cu_vec<W> w[NB], x[NB];
    float s_old[NB];
#pragma unroll
    for (int u = 0; u < NB; u++)
        if (u < nb) {
            const struct cu_table tb = table_of(p, key[u]);
            const int64_t row = row_of(p, key[u]);
            const bool mine = c < tb.dim;
            w[u] = mine ? sr_cu_w_load<W, true, F32>(tb, row * tb.dim + c) : sr_cu_zero<W>();
            x[u] = mine ? sr_cu_ldg<W>(p.dpooled + val_src(v[u]) + c) : sr_cu_zero<W>();
            s_old[u] = tb.state[row];
        }
#pragma unroll
    for (int u = 0; u < NB; u++)
        if (u < nb) {
            /* the table again (kept, its fields cost registers; read from cache) */
            const struct cu_table tb = table_of(p, key[u]);
            const int64_t row = row_of(p, key[u]);
            const bool mine = c < tb.dim; /* past the row's end: zeros, as update_row's */
            const sr_cu_vec<W> g =
                mine ? sr_cu_axpy<W>(sr_cu_zero<W>(), val_scale(v[u]), x[u]) : sr_cu_zero<W>();
            rowwise_whole_step<W, K, F32>(p, k, tb, row, tb.state + row, s_old[u], w[u], g, lig,
                                          mask);
        }
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

#endif
