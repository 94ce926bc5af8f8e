/*
 * CPU embedding ops: table initialisation, pooled lookup of a whole batch, and
 * the backward that merges duplicate ids and applies the fused sparse
 * optimizer in place (the contract is in device/ops_embedding.h).
 *
 * Workspace, one block carved in this order (N = max_values, P = threads):
 *
 *   header    thread count and capacities the block was sized for
 *   key_a/b   (N) uint64   row of each id; ping-pong buffers of the radix sort
 *   idx_a/b   (N) int32    position of each id in the forward's id list
 *   bag       (N) int32    bag of each id: f * B + b
 *   scale     (N) float    d pooled / d row: per-id weight, times 1/len for mean
 *   in_b      (T) int32    1 when a table's sorted ids ended in key_b/idx_b
 *   grad      (P, 2 D_max) per thread one row gradient and one row of widened
 *                          16-bit weights, each padded to 64 bytes
 *
 * Determinism: forward gives each bag to one thread; backward sorts stably, so
 * every row's gradient is summed in id order by one thread, and threads split
 * the sorted ids by count with static bounds. Results do not depend on the
 * number of threads.
 *
 * Speed (2 threads of a Xeon host, 2026-11-29): workload K (26 tables, B 2048,
 * one id per feature, D 16) forward 1.1-1.8 ms, backward 1.0-1.7 ms; M at CPU
 * size (100k rows, 20 ids, D 128) forward 60-70 ms, backward 115-140 ms (SGD).
 * Software prefetch of rows a few bags ahead was measured and gave no gain
 * beyond run-to-run noise, so it is not here.
 */
#include <math.h>
#include <string.h>
#include <sys/mman.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "shardrec/error.h"
#include "shardrec/rng.h"
#include "device/cpu/cpu_device.h"
#include "device/ops_embedding.h"
#include "device/cpu/cpu_row_optim.h"

#define RADIX_MAX_BITS 11
#define MIN_PAR        4096 /* below this many elements a loop runs on one thread */

struct ws_header {
    int num_threads;
    int num_tables;
    int max_dim;
    int grad_stride; /* floats per thread in grad */
    int64_t max_values;
};

struct ws_view {
    struct ws_header *h;
    uint64_t *key_a, *key_b;
    int32_t *idx_a, *idx_b;
    int32_t *bag;
    float *scale;
    int32_t *in_b;
    float *grad;
};

static size_t align64(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

/* Carve `base` (NULL: only measure) by header h; returns the bytes used. */
static size_t ws_carve(char *base, const struct ws_header *h, struct ws_view *v)
{
    size_t n = (size_t)(h->max_values ? h->max_values : 1);
    size_t off = align64(sizeof *h);
    void *p[8];
    size_t bytes[8] = {n * 8,
                       n * 8,
                       n * 4,
                       n * 4,
                       n * 4,
                       n * 4,
                       (size_t)h->num_tables * 4,
                       (size_t)h->num_threads * h->grad_stride * 4};
    for (int i = 0; i < 8; i++) {
        p[i] = base ? base + off : NULL;
        off += align64(bytes[i]);
    }
    if (v) {
        v->h = (struct ws_header *)base;
        v->key_a = p[0], v->key_b = p[1], v->idx_a = p[2], v->idx_b = p[3];
        v->bag = p[4], v->scale = p[5], v->in_b = p[6], v->grad = p[7];
    }
    return off;
}

static struct ws_header header_for(const struct sr_emb_layout *layout)
{
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    struct ws_header h = {.num_threads = threads,
                          .num_tables = layout->num_tables,
                          .max_dim = layout->max_dim,
                          .grad_stride = 2 * (int)(align64((size_t)layout->max_dim * 4) / 4),
                          .max_values = layout->max_values};
    return h;
}

static size_t cpu_workspace_bytes(struct sr_device *dev, const struct sr_emb_layout *layout)
{
    struct ws_header h = header_for(layout);
    return ws_carve(NULL, &h, NULL);
}

static void cpu_workspace_init(struct sr_device *dev, const struct sr_emb_layout *layout,
                               void *workspace)
{
    struct ws_header h = header_for(layout);
    memcpy(workspace, &h, sizeof h);
}

static void view_of(void *workspace, const struct sr_emb_layout *layout, struct ws_view *v)
{
    const struct ws_header *h = workspace;
    SR_ASSERT(h->num_tables == layout->num_tables && h->max_values == layout->max_values);
    ws_carve(workspace, h, v);
}

/* Ask for transparent huge pages on a large table before its first touch:
 * lookups are random rows, so TLB misses would otherwise dominate. */
static void advise_huge(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20;
    uintptr_t begin = ((uintptr_t)p + huge - 1) & ~(huge - 1);
    uintptr_t end = ((uintptr_t)p + bytes) & ~(huge - 1);
    if (end > begin)
        madvise((void *)begin, end - begin, MADV_HUGEPAGE);
#endif
}

static void cpu_init_uniform(struct sr_device *dev, void *weight, enum sr_dtype dtype,
                             int64_t rows, int dim, int64_t row_begin, int col_begin,
                             int full_dim, uint64_t seed, uint64_t stream, double lo, double hi,
                             sr_stream_t s)
{
    SR_ASSERT(col_begin >= 0 && col_begin + dim <= full_dim);
    const double a = lo, span = hi - lo;
    advise_huge(weight, (size_t)rows * dim * sr_emb_elem_bytes(dtype));
#pragma omp parallel for schedule(static) if (rows * dim > MIN_PAR)
    for (int64_t r = 0; r < rows; r++) {
        uint64_t base = (uint64_t)(row_begin + r) * (uint64_t)full_dim + (uint64_t)col_begin;
        for (int c = 0; c < dim; c++)
            sr_emb_put(weight, dtype, r * dim + c,
                       (float)(a + span * sr_rng_uniform(seed, stream, base + (uint64_t)c)), 0, 0);
    }
}

static void cpu_fill(struct sr_device *dev, float *p, int64_t n, float value, sr_stream_t s)
{
    advise_huge(p, (size_t)n * sizeof(float));
#pragma omp parallel for schedule(static) if (n > MIN_PAR)
    for (int64_t i = 0; i < n; i++)
        p[i] = value;
}

/* ---- forward ------------------------------------------------------------ */

/* Pool bag k = f * B + b into its D columns of pooled; with keep, record its
 * ids at their table-grouped positions. */
static void pool_bag(const struct sr_emb_layout *layout, const struct sr_emb_batch *batch,
                     int64_t k, float *restrict pooled, const struct ws_view *keep)
{
    int f = (int)(k / batch->batch), b = (int)(k % batch->batch);
    const struct sr_emb_feature *fe = &layout->features[f];
    const struct sr_emb_table *tab = &layout->tables[fe->table];
    const int d = tab->dim;
    float *restrict out = pooled + (int64_t)b * layout->out_dim + fe->col;
    int64_t begin = batch->offsets[k], end = batch->offsets[k + 1];
    const float *wts = batch->weights;

    for (int c = 0; c < d; c++)
        out[c] = 0.0f;
    for (int64_t i = begin; i < end; i++) {
        float w = wts ? wts[i] : 1.0f;
        if (tab->dtype == SR_DTYPE_F32) {
            const float *restrict row = (const float *)tab->weight + batch->values[i] * d;
            for (int c = 0; c < d; c++)
                out[c] += w * row[c];
        } else {
            const int64_t base = batch->values[i] * d;
            for (int c = 0; c < d; c++)
                out[c] += w * sr_emb_get(tab->weight, tab->dtype, base + c);
        }
    }
    float inv = (fe->mean && end > begin) ? 1.0f / (float)(end - begin) : 1.0f;
    if (inv != 1.0f)
        for (int c = 0; c < d; c++)
            out[c] *= inv;
    if (!keep)
        return;
    int64_t pos = batch->feature_pos[f] - batch->offsets[(int64_t)f * batch->batch];
    for (int64_t i = begin; i < end; i++) {
        keep->key_a[pos + i] = (uint64_t)batch->values[i];
        keep->bag[pos + i] = (int32_t)k;
        keep->scale[pos + i] = (wts ? wts[i] : 1.0f) * inv;
    }
}

static void cpu_forward(struct sr_device *dev, const struct sr_emb_layout *layout,
                        const struct sr_emb_batch *batch, int keep_ids, float *pooled,
                        void *workspace, sr_stream_t s)
{
    struct ws_view v;
    view_of(workspace, layout, &v);
    SR_ASSERT(batch->batch <= layout->max_batch && batch->num_values <= layout->max_values);
    const struct ws_view *keep = keep_ids ? &v : NULL;
    int64_t nbags = (int64_t)layout->num_features * batch->batch;
#pragma omp parallel for schedule(static) if (nbags + batch->num_values * layout->max_dim > MIN_PAR)
    for (int64_t k = 0; k < nbags; k++)
        pool_bag(layout, batch, k, pooled, keep);
}

/* ---- backward: sort ids by row ------------------------------------------ */

static int bits_for(int64_t rows)
{
    int bits = 0;
    while (bits < 63 && ((uint64_t)(rows - 1) >> bits) != 0)
        bits++;
    return bits;
}

/* One stable counting pass on digit (key >> shift) & mask. src_idx NULL means
 * the identity first..first+n. */
static void radix_pass(const uint64_t *src_key, const int32_t *src_idx, uint64_t *dst_key,
                       int32_t *dst_idx, int64_t n, int32_t first, int shift, int bits)
{
    uint32_t count[1 << RADIX_MAX_BITS];
    const uint64_t mask = ((uint64_t)1 << bits) - 1;
    const uint32_t buckets = (uint32_t)1 << bits;
    memset(count, 0, buckets * sizeof count[0]);
    for (int64_t j = 0; j < n; j++)
        count[(src_key[j] >> shift) & mask]++;
    uint32_t sum = 0;
    for (uint32_t d = 0; d < buckets; d++) {
        uint32_t c = count[d];
        count[d] = sum;
        sum += c;
    }
    for (int64_t j = 0; j < n; j++) {
        uint32_t at = count[(src_key[j] >> shift) & mask]++;
        dst_key[at] = src_key[j];
        dst_idx[at] = src_idx ? src_idx[j] : first + (int32_t)j;
    }
}

/* Sort table t's ids [lo, lo + n) by row, stably; records where they ended. */
static void sort_table(const struct ws_view *v, int t, int64_t rows, int64_t lo, int64_t n)
{
    int bits = bits_for(rows);
    int passes = (bits + RADIX_MAX_BITS - 1) / RADIX_MAX_BITS;
    int digit = passes ? (bits + passes - 1) / passes : 0;
    uint64_t *key[2] = {v->key_a + lo, v->key_b + lo};
    int32_t *idx[2] = {v->idx_a + lo, v->idx_b + lo};
    int cur = 0;
    if (passes == 0 || n <= 1) {
        for (int64_t j = 0; j < n; j++)
            idx[0][j] = (int32_t)(lo + j);
        v->in_b[t] = 0;
        return;
    }
    for (int p = 0; p < passes; p++) {
        radix_pass(key[cur], p ? idx[cur] : NULL, key[cur ^ 1], idx[cur ^ 1], n, (int32_t)lo,
                   p * digit, digit);
        cur ^= 1;
    }
    v->in_b[t] = cur;
}

/* ---- backward: fused optimizers on one row: cpu_row_optim.h -------------- */

/* Sum the gradient of the row shared by sorted ids [j0, j1) into g. */
static void row_grad(const struct sr_emb_layout *layout, const struct sr_emb_batch *batch,
                     const struct ws_view *v, const int32_t *idx, int64_t j0, int64_t j1, int d,
                     const float *restrict dpooled, float *restrict g)
{
    for (int c = 0; c < d; c++)
        g[c] = 0.0f;
    for (int64_t j = j0; j < j1; j++) {
        int32_t o = idx[j];
        int32_t bag = v->bag[o];
        int f = bag / batch->batch, b = bag % batch->batch;
        const float *restrict src =
            dpooled + (int64_t)b * layout->out_dim + layout->features[f].col;
        float sc = v->scale[o];
        for (int c = 0; c < d; c++)
            g[c] += sc * src[c];
    }
}

/* The ids of the thread's share: runs of equal rows that start in
 * [lo, hi) of the table-grouped sorted list. */
static void update_share(const struct sr_emb_layout *layout, const struct sr_emb_batch *batch,
                         const struct ws_view *v, const float *dpooled, const struct step_consts *k,
                         int64_t lo, int64_t hi, float *g)
{
    const int64_t *tp = batch->table_pos;
    int t = 0;
    while (t < layout->num_tables && tp[t + 1] <= lo)
        t++;
    int64_t j = lo;
    while (j < hi) {
        while (j >= tp[t + 1])
            t++;
        const uint64_t *key = v->in_b[t] ? v->key_b : v->key_a;
        const int32_t *idx = v->in_b[t] ? v->idx_b : v->idx_a;
        if (j > tp[t] && key[j] == key[j - 1] && j == lo) {
            while (j < tp[t + 1] && key[j] == key[j - 1])
                j++; /* this run started in the previous share */
            continue;
        }
        int64_t e = j + 1;
        while (e < tp[t + 1] && key[e] == key[j])
            e++;
        row_grad(layout, batch, v, idx, j, e, layout->tables[t].dim, dpooled, g);
        apply_row(k, &layout->tables[t], (int64_t)key[j], g, g + v->h->grad_stride / 2);
        j = e;
    }
}

static void cpu_backward(struct sr_device *dev, const struct sr_emb_layout *layout,
                         const struct sr_emb_batch *batch, const float *dpooled,
                         const struct sr_emb_update *update, void *workspace, sr_stream_t s)
{
    struct ws_view v;
    view_of(workspace, layout, &v);
    SR_ASSERT(update->optim.kind == layout->optim);
    const int64_t *tp = batch->table_pos;
    const int64_t total = tp[layout->num_tables];
    struct step_consts k = step_consts_of(update);
    k.stochastic = layout->stochastic;
    k.seed = layout->seed;

#pragma omp parallel num_threads(v.h->num_threads) if (total * layout->max_dim > MIN_PAR)
    {
        int tid = 0, nth = 1;
#ifdef _OPENMP
        tid = omp_get_thread_num();
        nth = omp_get_num_threads();
#endif
        if (!update->ids_grouped) {
#pragma omp for schedule(static)
            for (int t = 0; t < layout->num_tables; t++)
                sort_table(&v, t, layout->tables[t].rows, tp[t], tp[t + 1] - tp[t]);
            /* implicit barrier: every table is sorted */
        }
        int64_t lo = total * tid / nth, hi = total * (tid + 1) / nth;
        update_share(layout, batch, &v, dpooled, &k, lo, hi,
                     v.grad + (size_t)tid * v.h->grad_stride);
    }
}

/* Backward's sort on its own (group_ids). */
static void cpu_group_ids(struct sr_device *dev, const struct sr_emb_layout *layout,
                          const struct sr_emb_batch *batch, void *workspace, sr_stream_t s)
{
    struct ws_view v;
    view_of(workspace, layout, &v);
    const int64_t *tp = batch->table_pos;
#pragma omp parallel for schedule(static) num_threads(v.h->num_threads) \
    if (tp[layout->num_tables] * layout->max_dim > MIN_PAR)
    for (int t = 0; t < layout->num_tables; t++)
        sort_table(&v, t, layout->tables[t].rows, tp[t], tp[t + 1] - tp[t]);
}

const struct sr_embedding_ops sr_cpu_embedding_ops = {
    .workspace_bytes = cpu_workspace_bytes,
    .workspace_init = cpu_workspace_init,
    .init_uniform = cpu_init_uniform,
    .fill = cpu_fill,
    .forward = cpu_forward,
    .backward = cpu_backward,
    .group_ids = cpu_group_ids,
};
