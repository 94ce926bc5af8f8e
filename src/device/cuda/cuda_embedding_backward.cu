/*
 * The CUDA embedding backward (device/ops_embedding.h's backward; groups of
 * lanes and the workspace: cuda_embedding.cuh; the design of hot rows:
 * docs/architecture.md, "Hot rows"):
 *
 * First cub::DeviceRadixSort::SortPairs (cuda_embedding_sort.cu; LSD
 * radix: stable) of the kept ids on the R row bits only: the ids of one
 * (table, row) then lie together and in their table-grouped order (equal rows of
 * different tables keep their table order), so no pass sorts the
 * table bits. A run of equal keys is one row's gradient (table
 * key >> R, row key & (2^R - 1)); no (E, D) gradient exists.
 * Work follows runs, not positions and not the longest run: each
 * warp scans 32 sorted positions at a time and its groups take
 * the tasks found there (for_each_task). With S the hot-row split
 * (sr_emb_run_split) and tiles of S sorted positions:
 *   a run of at most S ids: one group sums it in id order
 *     (BWD_ROWS in flight) and applies the optimizer at once;
 *   a longer run: one group per piece, its ids within one tile,
 *     sums the piece into a slot of the workspace, and the run is
 *     listed (backward_kernel); then one block per listed run adds
 *     its pieces (its groups each a fixed share, in order, then
 *     the shares in order) and applies the optimizer
 *     (finish_kernel).
 * A hot row with 10^5 ids thus costs 10^5 / S parallel pieces and
 * a short sum of their partial rows, instead of 10^5 serial steps.
 * Lone ids (lone_ids_pay: where bags hold several ids): a row's only id
 * in the batch is left by the first kernel, which marks every other
 * row it takes (a bit per table row), and a third kernel (lone_kernel)
 * updates the unmarked rows in the forward's kept order, where a bag's
 * ids lie together: their pooled gradient row is read once, not once
 * an id at scattered times. The sort leaves the kept order in place.
 * With row-wise Adagrad a group of lone_kernel takes two lone ids at once
 * (update_singles: both rows' loads before either update).
 * Row-wise Adagrad keeps a row of up to G W columns in registers
 * (one pass); wider rows are staged in shared memory to sum g² in
 * the CPU's order.
 *
 * Determinism: a run of at most S ids is summed by one group in the order of
 * the stable sort, which is the CPU's order (table-grouped id order), so it
 * matches the CPU's rounding; a longer run is summed as fixed pieces (tile
 * boundaries of the sorted order) added in a fixed order, so reruns are
 * bit-identical and the result is within rounding of the CPU's. A lone id's
 * gradient is its scaled pooled row in either kernel. The atomics (a long
 * run appended to the second kernel's list, a row's mark) sum nothing.
 */
#include <stdint.h>

#include "device/cuda/cuda_embedding_update.cuh"

#define BWD_ROWS 4 /* ids of a run in flight per lane */

/* ---- kernels: backward ----------------------------------------------------------- */

/* Columns [c, c + W) of the gradient of ids j, j + 1, ... < end while their
 * key is `key`: Σ scale_i * dpooled[src_i + c ..], in order. v0 is vals[j],
 * loaded early by the caller. EARLY: a round's values load with its keys, not
 * after the keys say the run goes on, so its gradient rows wait on one load,
 * not two. Measured (emb_ops): D 16 backward + SGD on Zipf ids 0.688 -> 0.636
 * ms; D 128 row-wise Adagrad 0.409 -> 0.425 on uniform ids, where most runs are
 * one id and a warp is one group: so EARLY for narrow rows only (G < 32). */
template <int W, typename K, bool EARLY>
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
        for (int u = 0; u < BWD_ROWS; u++) { /* all in flight: past the end, the last id's */
            const int at = m + u < end ? m + u : end - 1;
            kk[u] = p.keys[at];
            if constexpr (EARLY)
                v[u] = load_val(p.vals, p.plain_vals, at);
        }
        bool run = true;
#pragma unroll
        for (int u = 0; u < BWD_ROWS; u++) {
            run = run && m + u < end && kk[u] == key;
            ok[u] = run;
        }
        if (!ok[0])
            return acc;
        if constexpr (!EARLY) {
#pragma unroll
            for (int u = 0; u < BWD_ROWS; u++)
                v[u] = ok[u] ? load_val(p.vals, p.plain_vals, m + u) : 0;
        }
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
template <int W, typename K, bool EARLY> struct whole_run {
    const bwd_params<K> &p;
    int j;
    K key;
    uint64_t v0;
    __device__ __forceinline__ sr_cu_vec<W> operator()(int c) const
    {
        return run_grad<W, K, EARLY>(p, j, p.n, key, v0, c);
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

/* The gradient of a lone id (its row's only id): exactly run_grad's for a
 * run of one, so either kernel gives the same bits. */
template <int W> struct lone_id {
    const float *dpooled;
    uint64_t v;
    __device__ __forceinline__ sr_cu_vec<W> operator()(int c) const
    {
        return sr_cu_axpy<W>(sr_cu_zero<W>(), val_scale(v), sr_cu_ldg<W>(dpooled + val_src(v) + c));
    }
};

/* Row marks: the rows of a batch with several ids (lone ids, below). */
template <typename K>
__device__ __forceinline__ unsigned *mark_word(const bwd_params<K> &p, const struct cu_table &tb,
                                               int64_t row)
{
    return p.marks + tb.mark0 + (row >> 5);
}

template <typename K> __device__ __forceinline__ void mark_row(const bwd_params<K> &p, K key)
{
    const int64_t row = row_of(p, key);
    atomicOr(mark_word(p, table_of(p, key), row), 1u << (row & 31));
}

template <typename K> __device__ __forceinline__ bool is_lone(const bwd_params<K> &p, K key)
{
    const int64_t row = row_of(p, key);
    return !((*mark_word(p, table_of(p, key), row) >> (row & 31)) & 1u);
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

/* Tasks of the first backward kernel at a sorted position; TASK_SINGLE: a
 * lone id that lone_kernel takes with others (update_singles). */
enum { TASK_NONE, TASK_RUN, TASK_START_PIECE, TASK_HEAD_PIECE, TASK_SINGLE };

template <typename K> __device__ __forceinline__ int task_at(const bwd_params<K> &p, int j)
{
    if (j >= p.n)
        return TASK_NONE;
    const K key = p.keys[j];
    if (j == 0 || p.keys[j - 1] != key) {
        if (run_is_long(p, j, key))
            return TASK_START_PIECE;
        if (p.marks && (j + 1 == p.n || p.keys[j + 1] != key))
            return TASK_NONE; /* a lone id: lone_kernel's */
        return TASK_RUN;
    }
    if ((j & (p.split - 1)) == 0 && continues_long_run(p, j, key))
        return TASK_HEAD_PIECE;
    return TASK_NONE;
}

/* Each warp takes windows of 32 sorted positions; its lanes find which
 * positions start a task (one lane each), and the warp's groups take the
 * tasks together (task i to group i mod 32/G, all groups at once). Work thus follows the tasks,
 * not the positions: a hot row's skipped positions cost a ballot. NB > 1: a
 * group's next tasks while they are TASK_SINGLE, up to NB, go to
 * singles(at, nb) at once; other tasks to task(j, kind) one by one. */
template <int NB, typename K, typename KindOf, typename Task, typename Singles>
__device__ __forceinline__ void for_each_task(const bwd_params<K> &p, const KindOf &kind_of,
                                              const Task &task, const Singles &singles)
{
    const int lane = threadIdx.x & 31, gw = lane >> p.log2G, ngw = 32 >> p.log2G;
    const int warps = gridDim.x * (blockDim.x >> 5);
    for (int base = (blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)) * 32; base < p.n;
         base += warps * 32) {
        const int kind = kind_of(base + lane);
        const unsigned any = __ballot_sync(0xffffffffu, kind != TASK_NONE);
        const unsigned b1 = __ballot_sync(0xffffffffu, kind & 1);
        const unsigned b2 = __ballot_sync(0xffffffffu, kind & 2);
        const unsigned b4 = NB > 1 ? __ballot_sync(0xffffffffu, kind & 4) : 0u;
        unsigned m = any;
        for (int i = 0; i < gw; i++) /* the first gw tasks are other groups' */
            m &= m - 1;
        while (m) { /* every group at once, each at its own task */
            if constexpr (NB > 1) {
                int at[NB], nb = 0;
#pragma unroll
                for (int u = 0; u < NB; u++) {
                    at[u] = 0;
                    if (nb == u && m && ((b4 >> (__ffs(m) - 1)) & 1)) {
                        at[u] = base + __ffs(m) - 1;
                        nb = u + 1;
                        for (int i = 0; i < ngw; i++)
                            m &= m - 1;
                    }
                }
                if (nb) {
                    singles(at, nb);
                    continue;
                }
            }
            const int bit = __ffs(m) - 1;
            task(base + bit, (int)((b1 >> bit) & 1) | (int)(((b2 >> bit) & 1) << 1));
            for (int i = 0; i < ngw; i++)
                m &= m - 1;
        }
    }
}

/* The sum of a piece (ids j .. < end while the key holds) into its slot. */
template <int W, typename K, bool EARLY>
__device__ __forceinline__ void piece_store(const bwd_params<K> &p, int j, int end, K key, int slot,
                                            int lig)
{
    const uint64_t v0 = load_val(p.vals, p.plain_vals, j);
    const int d = table_of(p, key).dim;
    float *out = p.partial + (size_t)slot * p.pstride;
    for (int c = lig * W; c < d; c += p.G * W)
        sr_cu_store<W>(out + c, run_grad<W, K, EARLY>(p, j, end, key, v0, c));
}

/* First kernel: every run of at most S ids summed and applied by one group;
 * every piece of a longer run (the run's ids within one tile of S sorted
 * positions) summed by one group into its slot: the start piece of a run
 * starting in tile t into slot 2t + 1, the piece at the head of tile t into
 * slot 2t. At most two pieces start in a tile, so slots never collide.
 * Runs of one id one at a time: taking two at once (as lone_kernel does
 * with row-wise Adagrad) cost registers and was slower, D 16 on Zipf ids
 * by 15-20% (BENCHMARKS.md, "Singles"). */
template <int W, typename K, int OPT, bool EARLY>
__global__ void __launch_bounds__(BWD_THREADS) backward_kernel(const bwd_params<K> p)
{
    const struct bwd_group g = group_of<K, OPT>(p);
    const auto kind_of = [&](int j) { return task_at<K>(p, j); };
    const auto no_singles = [](const int(&)[1], int) {};
    const auto take = [&](int j, int task) {
        const K key = p.keys[j];
        const int tile = j >> p.log2split;
        if (p.marks && g.lig == 0 && task != TASK_HEAD_PIECE)
            mark_row(p, key); /* not lone: lone_kernel leaves the row alone */
        if (task == TASK_RUN) {
            const whole_run<W, K, EARLY> grad = {p, j, key, load_val(p.vals, p.plain_vals, j)};
            update_row<W, K, OPT>(p, g.k, table_of(p, key), row_of(p, key), grad, g.lig, g.mask, g.gs);
        } else if (task == TASK_START_PIECE) {
            if (g.lig == 0) /* the list's order decides no sum: each run is its own row's */
                p.long_starts[atomicAdd(p.long_count, 1)] = j;
            piece_store<W, K, EARLY>(p, j, (tile + 1) << p.log2split, key, 2 * tile + 1, g.lig);
        } else {
            piece_store<W, K, EARLY>(p, j, j + p.split < p.n ? j + p.split : p.n, key, 2 * tile,
                                     g.lig);
        }
    };
    for_each_task<1>(p, kind_of, take, no_singles);
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

/* Third kernel (when marks are kept): every lone id, the only id of its row
 * in the batch, in the forward's kept order, one group each. Ids of a bag lie
 * together in that order, so a bag's pooled gradient row is read once from
 * memory and then from cache, where the sorted order reads it once an id,
 * scattered. Lone rows are no other kernel's rows. */
/* Blocks a multiprocessor must hold (registers capped to fit): a lone id's
 * update is one dependent chain, so warps in flight pay. Measured on workload
 * M's shape (BENCHMARKS.md, "Lone ids"): 16 against none, row-wise Adagrad
 * 4.04 -> 3.83 ms, SGD 3.02 -> 2.84. Adagrad and Adam, not measured, keep
 * their registers (capped, they spill 64 and 120 bytes at W 4). */
#ifndef LONE_MIN_BLOCKS
#define LONE_MIN_BLOCKS 16
#endif
/* The same with NB lone ids in flight a group (update_singles: more
 * registers): row-wise Adagrad on fp32 tables with 4-byte keys at W 4 fits
 * 56 registers without a spill; 16-bit tables or 8-byte keys, 64 (wide). */
#ifndef LONE_SINGLES_BLOCKS
#define LONE_SINGLES_BLOCKS 9
#endif
#ifndef LONE_SINGLES_BLOCKS_WIDE
#define LONE_SINGLES_BLOCKS_WIDE 8
#endif
#define LONE_BLOCKS(opt, nb, wide)                                                                 \
    ((nb) > 1 ? ((wide) ? LONE_SINGLES_BLOCKS_WIDE : LONE_SINGLES_BLOCKS)                          \
     : (opt) == SR_OPTIM_SGD || (opt) == SR_OPTIM_ROWWISE_ADAGRAD ? LONE_MIN_BLOCKS                \
                                                                  : 1)
/* F32 (every table fp32) and WHOLE (row-wise Adagrad, every row held whole
 * by its group): update_row's, chosen at launch (launch_lone). Without the
 * paths they leave out the kernel spills less under its register cap:
 * measured (BENCHMARKS.md, "... the lone kernel's registers", 2026-12-04).
 * NB > 1: NB lone ids a group at once (update_singles; rows whole). */
template <int W, typename K, int OPT, bool F32, bool WHOLE, int NB>
__global__ void __launch_bounds__(BWD_THREADS, LONE_BLOCKS(OPT, NB, !F32 || sizeof(K) > 4))
    lone_kernel(const bwd_params<K> p)
{
    const struct bwd_group g = group_of<K, OPT>(p);
    const auto kind_of = [&](int j) {
        return j < p.n && is_lone(p, p.kept_keys[j]) ? (NB > 1 ? TASK_SINGLE : TASK_RUN)
                                                     : TASK_NONE;
    };
    const auto singles = [&](const int(&at)[NB], int nb) {
        if constexpr (NB > 1)
            update_singles<W, K, OPT, F32, NB>(p, g.k, p.kept_keys, p.kept_vals, at, nb, g.lig,
                                               g.mask);
    };
    const auto one = [&](int j, int) {
        const K key = p.kept_keys[j];
        const lone_id<W> grad = {p.dpooled, load_val(p.kept_vals, p.plain_vals, j)};
        update_row<W, K, OPT, lone_id<W>, F32, WHOLE>(p, g.k, table_of(p, key), row_of(p, key),
                                                      grad, g.lig, g.mask, g.gs);
    };
    for_each_task<NB>(p, kind_of, one, singles);
}

/* ---- the launch -------------------------------------------------------------------- */

/* Threads of a backward block: row-wise Adagrad keeps a row per group in
 * shared memory, so blocks shrink for very wide rows. */
int sr_cu_emb_bwd_threads(const struct sr_emb_layout *layout, int G, size_t *smem)
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

/* Lone ids a group of lone_kernel updates at once (update_singles):
 * row-wise Adagrad where every row fits its group; 1 (one at a time,
 * update_row) elsewhere. Measured (BENCHMARKS.md, "Singles"): two at once,
 * row-wise Adagrad 1.0-1.6% faster on M's and d128's shapes; SGD no faster,
 * four no better. SR_CU_SINGLES (a measurement build) sets it. */
#ifndef SR_CU_SINGLES
#define SR_CU_SINGLES 2
#endif
static_assert(SR_CU_SINGLES >= 1, "SR_CU_SINGLES: lone ids a group takes at once, 1 or more");
template <int OPT> static constexpr int singles_of()
{
    return OPT == SR_OPTIM_ROWWISE_ADAGRAD ? SR_CU_SINGLES : 1;
}

template <int W, typename K> static bool rows_whole(const bwd_params<K> &p)
{
    return p.max_dim <= p.G * W;
}

/* lone_kernel for the layout: F32 where every table is fp32 (f32), WHOLE for
 * row-wise Adagrad where every row fits its group, lone ids NB at a time
 * where they may be. */
template <int W, typename K, int OPT>
static void launch_lone(const bwd_params<K> &p, unsigned grid, int threads, size_t smem, int f32,
                        cudaStream_t st)
{
    constexpr bool RW = OPT == SR_OPTIM_ROWWISE_ADAGRAD;
    constexpr int NB = singles_of<OPT>();
    if constexpr (NB > 1) {
        if (rows_whole<W>(p)) {
            if (f32)
                lone_kernel<W, K, OPT, true, RW, NB><<<grid, threads, smem, st>>>(p);
            else
                lone_kernel<W, K, OPT, false, RW, NB><<<grid, threads, smem, st>>>(p);
            return;
        }
    }
    const bool whole = RW && rows_whole<W>(p);
    if (f32 && whole)
        lone_kernel<W, K, OPT, true, RW, 1><<<grid, threads, smem, st>>>(p);
    else if (f32)
        lone_kernel<W, K, OPT, true, false, 1><<<grid, threads, smem, st>>>(p);
    else if (whole)
        lone_kernel<W, K, OPT, false, RW, 1><<<grid, threads, smem, st>>>(p);
    else
        lone_kernel<W, K, OPT, false, false, 1><<<grid, threads, smem, st>>>(p);
}

/* The kernels of one backward after the sort: the runs of several ids
 * (sorted order), long runs' pieces added, then the lone ids (kept order,
 * marked by backward_kernel) on st. */
template <int W, typename K, int OPT>
static void launch_backward(const struct sr_device *dev, const bwd_params<K> &p, int threads,
                            size_t smem, size_t mark_bytes, int f32, cudaStream_t st)
{
    const long long windows = ((long long)p.n + 31) / 32; /* a warp's tasks come 32 ids at a time */
    const unsigned grid = sr_cu_grid(dev, windows, threads / 32, GRID_PER_SM * FWD_THREADS / threads);
    const bool may_have_long = p.n > p.split; /* a long run needs more than S ids */
    if (may_have_long)
        SR_CU_CHECK(cudaMemsetAsync(p.long_count, 0, sizeof(int), st));
    if (p.marks)
        SR_CU_CHECK(cudaMemsetAsync(p.marks, 0, mark_bytes, st));
    if (p.G < 32) /* narrow rows (run_grad) */
        backward_kernel<W, K, OPT, true><<<grid, threads, smem, st>>>(p);
    else
        backward_kernel<W, K, OPT, false><<<grid, threads, smem, st>>>(p);
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
    if (p.marks) {
        launch_lone<W, K, OPT>(p, grid, threads, smem, f32, st);
        SR_CU_LAUNCHED();
    }
}

/* Whether lone ids go to lone_kernel: where bags hold several ids on
 * average, so that the kept order reads a bag's pooled gradient row once for
 * several ids (measured: BENCHMARKS.md, "Lone ids"). SR_CU_LONE_IDS=0 or 1
 * (measurement builds) sets it. */
static int lone_ids_pay(const struct sr_emb_layout *layout, const struct sr_emb_batch *batch,
                        int64_t n)
{
#ifdef SR_CU_LONE_IDS
    return SR_CU_LONE_IDS;
#endif
    return n >= 2 * (int64_t)batch->batch * layout->num_features;
}

/* Whether every table of the layout stores fp32 weights. */
static int all_f32(const struct sr_emb_layout *layout)
{
    for (int t = 0; t < layout->num_tables; t++)
        if (layout->tables[t].dtype != SR_DTYPE_F32)
            return 0;
    return 1;
}

template <int W, typename K>
static void backward_as(const struct sr_device *dev, const struct sr_emb_layout *layout,
                        const float *dpooled, const struct sr_emb_update *update,
                        const struct ws_view *v, int n, int plain_vals, int lone,
                        cudaStream_t st)
{
    if (!update->ids_grouped)
        sr_cu_emb_sort_kept(v, n, plain_vals, st);
    const int cur = sr_cu_emb_sorts(v, n);
    bwd_params<K> p;
    p.tables = v->tables;
    p.keys = (const K *)v->key[cur];
    p.vals = v->val[cur];
    p.kept_keys = (const K *)v->key[0];
    p.kept_vals = v->val[0];
    p.marks = lone ? v->marks : NULL;
    p.plain_vals = plain_vals;
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
    p.round.stochastic = layout->stochastic;
    p.round.seed = layout->seed;
    size_t smem;
    const int threads = sr_cu_emb_bwd_threads(layout, p.G, &smem);
    const int f32 = all_f32(layout);
    const size_t mb = v->mark_bytes;
    switch (layout->optim) {
    case SR_OPTIM_SGD:
        launch_backward<W, K, SR_OPTIM_SGD>(dev, p, threads, smem, mb, f32, st);
        break;
    case SR_OPTIM_ADAGRAD:
        launch_backward<W, K, SR_OPTIM_ADAGRAD>(dev, p, threads, smem, mb, f32, st);
        break;
    case SR_OPTIM_ROWWISE_ADAGRAD:
        launch_backward<W, K, SR_OPTIM_ROWWISE_ADAGRAD>(dev, p, threads, smem, mb, f32, st);
        break;
    case SR_OPTIM_ADAM:
        launch_backward<W, K, SR_OPTIM_ADAM>(dev, p, threads, smem, mb, f32, st);
        break;
    }
}

void sr_cu_emb_backward(struct sr_device *dev, const struct sr_emb_layout *layout,
                        const struct sr_emb_batch *batch, const float *dpooled,
                        const struct sr_emb_update *update, void *workspace, sr_stream_t s)
{
    SR_ASSERT(update->optim.kind == layout->optim);
    const int64_t n = batch->table_pos[layout->num_tables];
    SR_ASSERT(n >= 0 && n <= layout->max_values);
    if (n == 0)
        return;
    struct ws_view v;
    sr_cu_emb_ws_carve(layout, (char *)workspace, 1, &v);
    cudaStream_t st = sr_cu_stream(dev, s);
    const int W = sr_cu_emb_vec_width(layout, dpooled, 1);
    const int plain = sr_cu_emb_plain_vals(layout, batch);
    const int lone = lone_ids_pay(layout, batch, n);
    if (W == 4 && v.key64)
        backward_as<4, uint64_t>(dev, layout, dpooled, update, &v, (int)n, plain, lone, st);
    else if (W == 4)
        backward_as<4, uint32_t>(dev, layout, dpooled, update, &v, (int)n, plain, lone, st);
    else if (v.key64)
        backward_as<1, uint64_t>(dev, layout, dpooled, update, &v, (int)n, plain, lone, st);
    else
        backward_as<1, uint32_t>(dev, layout, dpooled, update, &v, (int)n, plain, lone, st);
}
