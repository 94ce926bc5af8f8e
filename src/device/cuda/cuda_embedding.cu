/*
 * CUDA embedding ops (the contract is in device/ops_embedding.h; the CPU
 * reference is device/cpu/cpu_embedding.c): the workspace, table
 * initialisation and fill, and the op table. The pooled forward is
 * cuda_embedding_forward.cu, the backward cuda_embedding_backward.cu; what
 * they share (groups of lanes, the workspace view) is cuda_embedding.cuh.
 *
 * Determinism: nothing is summed by atomics or in an order that depends on
 * scheduling (the forward and backward files say how), so reruns are
 * bit-identical.
 *
 * Workspace (device, one block; every part 256-byte aligned):
 *
 *   tables    (T)      cu_table: weight, state, rows, D
 *   features  (F)      cu_feature: table, column, mean
 *   key_a/b   (N)      uint32 (uint64 when table and row need more than 32
 *                      bits) keys: a the forward's kept order (kept through
 *                      the backward), b sorted by row
 *   val_a/b   (N)      uint64 (pooled offset | float scale << 32), or 4-byte
 *                      offsets (store_val): the same two orders
 *   partial   (2 ceil(N / S) + 2, max_dim rounded up to 4) floats: piece sums
 *             of long runs (at most two pieces start in a tile)
 *   long      (N / (S + 1) + 2) ints: how many long runs, then where each
 *             starts (the first kernel lists them for the second)
 *   marks     a bit per row of every table, ceil(E / 32) words a table: the
 *             rows with several ids of the batch (the backward's lone ids)
 *   sort      cub's temporary storage for N items (its own ping-pong buffers:
 *             the sort leaves key_a, val_a as they are)
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

#include "device/cuda/cuda_embedding.cuh"

extern "C" {
#include "shardrec/rng.h"
#include "device/emb_storage.h"
#include "shardrec/alloc.h"
}

#define UPLOAD_BYTES 4096
#define WS_ALIGN     256

/* ---- kernels: rng, fill, upload ------------------------------------------------- */

/* w[e] = (float)(lo + span * sr_rng_uniform(seed, stream, counter)), in double,
 * stored in dtype (rounded to nearest even: emb_storage.h, as the CPU); the
 * counter of element e (row e / dim, column e % dim) is counter0 + e when the
 * rows are whole (gap 0), else counter0 + e + (e / dim) * gap: a column piece
 * skips the gap = full_dim - dim other columns of each row. */
__global__ void init_uniform_kernel(void *w, int dtype, int64_t n, uint64_t counter0, int dim,
                                    int gap, uint64_t seed, uint64_t stream, double lo,
                                    double span)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        const uint64_t counter =
            counter0 + (uint64_t)e + (gap ? (uint64_t)(e / dim) * (uint64_t)gap : 0);
        double u = __ull2double_rn(sr_rng_u64(seed, stream, counter) >> 11) *
                   (1.0 / 9007199254740992.0);
        sr_emb_put(w, dtype, e, __double2float_rn(__dadd_rn(lo, __dmul_rn(span, u))), 0, 0);
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

/* ---- the workspace ---------------------------------------------------------------- */

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

int sr_cu_emb_plain_vals(const struct sr_emb_layout *layout, const struct sr_emb_batch *batch)
{
#ifdef SR_CU_WIDE_VALS /* measurement builds: 8-byte values always, to compare */
    return 0;
#endif
    if (batch->weights || batch->weighted)
        return 0;
    for (int f = 0; f < layout->num_features; f++)
        if (layout->features[f].mean)
            return 0;
    return 1;
}

/* Words of the row marks of tables [0, t): table t's marks start there. */
static int64_t mark_words_before(const struct sr_emb_layout *layout, int t)
{
    int64_t words = 0;
    for (int i = 0; i < t; i++)
        words += (layout->tables[i].rows + 31) / 32;
    return words;
}

size_t sr_cu_emb_ws_carve(const struct sr_emb_layout *layout, char *base, int with_sort,
                          struct ws_view *v)
{
    const int T = layout->num_tables, F = layout->num_features;
    const size_t n = (size_t)(layout->max_values > 0 ? layout->max_values : 1);
    v->row_bits = row_bits_of(layout);
    v->key64 = v->row_bits + bits_for((uint64_t)T) > 32;
    SR_ASSERT(v->row_bits + bits_for((uint64_t)T) <= 64);
    v->sort_bytes = !with_sort ? 0
                                : sr_cu_emb_sort_bytes((int64_t)n, v->row_bits, v->key64);
    const size_t key_bytes = v->key64 ? 8 : 4;
    v->split = sr_emb_run_split(layout->max_dim);
    v->pstride = (layout->max_dim + 3) & ~3;
    const size_t slots = 2 * ((n + (size_t)v->split - 1) / (size_t)v->split) + 2;
    v->mark_bytes = (size_t)mark_words_before(layout, T) * sizeof(unsigned);
    size_t part[10] = {sizeof(struct cu_table) * T,
                       sizeof(struct cu_feature) * F,
                       n * key_bytes,
                       n * key_bytes,
                       n * 8,
                       n * 8,
                       slots * (size_t)v->pstride * sizeof(float),
                       (n / ((size_t)v->split + 1) + 2) * sizeof(int),
                       v->mark_bytes,
                       v->sort_bytes};
    char *p[10];
    size_t off = 0;
    for (int i = 0; i < 10; i++) {
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
    v->marks = (unsigned *)p[8];
    v->sort = p[9];
    return off;
}

static size_t cu_workspace_bytes(struct sr_device *dev, const struct sr_emb_layout *layout)
{
    SR_ASSERT(layout->max_values >= 0 && layout->max_values < ((int64_t)1 << 31));
    SR_ASSERT((int64_t)layout->max_batch * layout->out_dim < ((int64_t)1 << 31));
    SR_ASSERT((int64_t)layout->max_batch * layout->num_features < ((int64_t)1 << 31));
    size_t smem;
    sr_cu_emb_bwd_threads(layout, 32, &smem);
    struct ws_view v;
    return sr_cu_emb_ws_carve(layout, NULL, 1, &v);
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
    sr_cu_emb_ws_carve(layout, (char *)workspace, 0, &v);
    const int T = layout->num_tables, F = layout->num_features;
    char *image = (char *)sr_calloc(1, v.image_bytes);
    struct cu_table *tables = (struct cu_table *)image;
    struct cu_feature *features =
        (struct cu_feature *)(image + ((char *)v.features - (char *)v.tables));
    for (int t = 0; t < T; t++) {
        const struct sr_emb_table *tab = &layout->tables[t];
        SR_ASSERT(tab->dim >= 1 && tab->dim <= layout->max_dim);
        SR_ASSERT(tab->dtype == SR_DTYPE_F32 || tab->dtype == SR_DTYPE_F16 ||
                  tab->dtype == SR_DTYPE_BF16);
        tables[t] = (struct cu_table){tab->weight, tab->state, tab->rows, tab->dim,
                                      (int)tab->dtype, tab->stream, tab->global_row0,
                                      tab->global_col0, tab->global_dim,
                                      mark_words_before(layout, t)};
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

int sr_cu_emb_vec_width(const struct sr_emb_layout *layout, const float *pooled, int with_state)
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

static void cu_init_uniform(struct sr_device *dev, void *weight, enum sr_dtype dtype, int64_t rows,
                            int dim, int64_t row_begin, int col_begin, int full_dim, uint64_t seed,
                            uint64_t stream, double lo, double hi, sr_stream_t s)
{
    SR_ASSERT(col_begin >= 0 && col_begin + dim <= full_dim);
    const int64_t n = rows * dim;
    if (n <= 0)
        return;
    const uint64_t counter0 = (uint64_t)row_begin * (uint64_t)full_dim + (uint64_t)col_begin;
    init_uniform_kernel<<<sr_cu_blocks(n, 256), 256, 0, sr_cu_stream(dev, s)>>>(
        weight, (int)dtype, n, counter0, dim, full_dim - dim, seed, stream, lo, hi - lo);
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

extern "C" const struct sr_embedding_ops sr_cuda_embedding_ops = {
    .workspace_bytes = cu_workspace_bytes,
    .workspace_init = cu_workspace_init,
    .init_uniform = cu_init_uniform,
    .fill = cu_fill,
    .forward = sr_cu_emb_forward,
    .backward = sr_cu_emb_backward,
    .group_ids = sr_cu_emb_group_ids,
};
