/*
 * What the CUDA embedding ops share (the ops: device/ops_embedding.h): the
 * layout as the kernels see it, the workspace's parts, the packed value of a
 * kept id, and the three files' entry points.
 *
 *   cuda_embedding.cu           the workspace, init_uniform, fill, the op table
 *   cuda_embedding_forward.cu   the pooled forward (keep_ids: the ids for backward)
 *   cuda_embedding_backward.cu  the sort and the fused backward, hot rows split
 *   cuda_embedding_update.cuh   the backward's update of a row (and of two lone
 *                               rows at once)
 *
 * Groups. A row of D floats is served by a group of G lanes (G a power of two
 * from the layout's largest D, at most a warp), lane i of the group holding
 * the W-wide chunks at columns iW, iW + GW, ... W = 4 (float4) when every D,
 * every column and every pointer allows it, else 1. At D 128 a group is a
 * warp; at D 16 a warp is 8 groups of 4 lanes. Grids hold at most GRID_PER_SM
 * blocks of FWD_THREADS threads per multiprocessor; kernels loop grid-stride
 * over bags or sorted positions.
 */
#ifndef SHARDREC_CUDA_EMBEDDING_CUH
#define SHARDREC_CUDA_EMBEDDING_CUH

#include <stdint.h>

#include "device/cuda/cuda_internal.h"
#include "device/cuda/cuda_row_optim.cuh"
#include "device/emb_storage.h"

extern "C" {
#include "device/ops_embedding.h"
}

#define FWD_THREADS         256
#define BWD_THREADS         128
#define GRID_PER_SM         16 /* blocks of FWD_THREADS per multiprocessor at most */
#define SMEM_MAX            (48 << 10)
#define GROUP_SMEM(max_dim) (2 * (max_dim) + 16) /* floats of a backward group (row-wise) */

struct cu_table {
    void *weight; /* elements of dtype */
    float *state;
    int64_t rows;
    int dim;
    int dtype;               /* enum sr_dtype: F32, F16 or BF16 (ops_embedding.h) */
    uint64_t stream;         /* stochastic rounding: the table's stream ... */
    int64_t grow0;           /* ... and the shard's place in the table */
    int gcol0, gdim;
    int64_t mark0;           /* the backward: the first word of the table's row marks */
};

/* How an update narrows 16-bit weights (ops_embedding.h, "Table storage"). */
struct cu_round {
    int stochastic;
    uint64_t seed;
};

/* Columns [e, e + W) of a table's stored weights, widened: read-only
 * (__ldg) or streaming (__ldcs) loads; fp32 as float4 when W = 4, 16-bit as
 * one 8-byte load. F32: the caller knows the table is fp32, so the 16-bit
 * path is not compiled in (fewer registers). */
template <int W, bool ONCE, bool F32 = false>
__device__ __forceinline__ sr_cu_vec<W> sr_cu_w_load(const struct cu_table &tb, int64_t e)
{
    if (F32 || tb.dtype == SR_DTYPE_F32) {
        const float *w = (const float *)tb.weight + e;
        if constexpr (ONCE)
            return sr_cu_load_once<W>(w);
        else
            return sr_cu_ldg<W>(w);
    }
    const unsigned short *h = (const unsigned short *)tb.weight + e;
    uint16_t b[W];
    if constexpr (W == 4) {
        const uint2 u = ONCE ? __ldcs((const uint2 *)h) : __ldg((const uint2 *)h);
        b[0] = (uint16_t)(u.x & 0xffffu), b[1] = (uint16_t)(u.x >> 16);
        b[2] = (uint16_t)(u.y & 0xffffu), b[3] = (uint16_t)(u.y >> 16);
    } else {
        b[0] = ONCE ? __ldcs(h) : __ldg(h);
    }
    sr_cu_vec<W> v;
#pragma unroll
    for (int i = 0; i < W; i++)
        v.x[i] = tb.dtype == SR_DTYPE_BF16 ? sr_hb_from_bf16(b[i]) : sr_hb_from_fp16(b[i]);
    return v;
}

/* Store x as columns [col, col + W) of `row` (element e = row * dim + col),
 * narrowed for a 16-bit table as the CPU's apply_row does (streaming). F32:
 * as sr_cu_w_load's. */
template <int W, bool F32 = false>
__device__ __forceinline__ void sr_cu_w_store(const struct cu_table &tb, int64_t row, int col,
                                              sr_cu_vec<W> x, const struct cu_round &rd,
                                              int64_t step)
{
    const int64_t e = row * tb.dim + col;
    if (F32 || tb.dtype == SR_DTYPE_F32) {
        sr_cu_store_once<W>((float *)tb.weight + e, x);
        return;
    }
    const int64_t g0 = (tb.grow0 + row) * (tb.gdim ? tb.gdim : tb.dim) + tb.gcol0 + col;
    uint16_t b[W];
#pragma unroll
    for (int i = 0; i < W; i++) {
        const uint32_t r = rd.stochastic ? sr_emb_round_bits(rd.seed, step, tb.stream, g0 + i) : 0;
        b[i] = tb.dtype == SR_DTYPE_BF16 ? sr_hb_to_bf16(x.x[i], rd.stochastic, r)
                                         : sr_hb_to_fp16(x.x[i], rd.stochastic, r);
    }
    unsigned short *h = (unsigned short *)tb.weight + e;
    if constexpr (W == 4)
        __stcs((uint2 *)h, make_uint2((uint32_t)b[0] | ((uint32_t)b[1] << 16),
                                      (uint32_t)b[2] | ((uint32_t)b[3] << 16)));
    else
        __stcs(h, (unsigned short)b[0]);
}

struct cu_feature {
    int table, col, mean;
};

struct ws_view {
    struct cu_table *tables;
    struct cu_feature *features;
    void *key[2];     /* uint32 or uint64 */
    uint64_t *val[2]; /* packed (src, scale), or 4-byte offsets (store_val) */
    float *partial;   /* piece sums of long runs */
    int *long_list;   /* the count of long runs, then their first positions */
    unsigned *marks;  /* a bit per table row: the row has several ids (lone ids) */
    size_t mark_bytes;
    void *sort;
    size_t sort_bytes;
    size_t image_bytes; /* tables and features */
    int key64;          /* keys are uint64 */
    int row_bits;       /* R: the bits the sort sorts on */
    int split;          /* S: sr_emb_run_split(max_dim) */
    int pstride;        /* floats of a piece sum */
};

/* A kept id's value: the pooled offset its gradient comes from, and its scale.
 * When every scale of the batch is 1 (no weights, no mean pooling:
 * sr_cu_emb_plain_vals) the value is the offset alone, 4 bytes instead of 8, which
 * the sort and the backward move a third less of; read either with load_val. */
__device__ __forceinline__ uint64_t pack_val(int src, float scale)
{
    return (uint64_t)(uint32_t)src | ((uint64_t)__float_as_uint(scale) << 32);
}

__device__ __forceinline__ void store_val(void *vals, int plain, int64_t i, int src, float scale)
{
    if (plain)
        ((uint32_t *)vals)[i] = (uint32_t)src;
    else
        ((uint64_t *)vals)[i] = pack_val(src, scale);
}

__device__ __forceinline__ uint64_t load_val(const void *vals, int plain, int64_t i)
{
    return plain ? pack_val((int)((const uint32_t *)vals)[i], 1.0f) : ((const uint64_t *)vals)[i];
}

__device__ __forceinline__ uint32_t val_src(uint64_t v)
{
    return (uint32_t)v;
}

__device__ __forceinline__ float val_scale(uint64_t v)
{
    return __uint_as_float((uint32_t)(v >> 32));
}

/* cuda_embedding.cu */
/* 1 when every kept value of the batch has scale 1 (no weights, no feature
 * pooled by its mean): values are then 4 bytes. */
int sr_cu_emb_plain_vals(const struct sr_emb_layout *layout, const struct sr_emb_batch *batch);
/* Carve the workspace at base (NULL: measure only); returns its bytes. The sort's
 * storage comes last, so with_sort = 0 (no size query) leaves the rest in place. */
size_t sr_cu_emb_ws_carve(const struct sr_emb_layout *layout, char *base, int with_sort,
                          struct ws_view *v);
/* W = 4 when every row, column and pointer the kernels touch allows float4
 * (with_state: the backward's optimizer state too); else 1. */
int sr_cu_emb_vec_width(const struct sr_emb_layout *layout, const float *pooled, int with_state);

/* cuda_embedding_forward.cu: the forward op. */
void sr_cu_emb_forward(struct sr_device *dev, const struct sr_emb_layout *layout,
                       const struct sr_emb_batch *batch, int keep_ids, float *pooled,
                       void *workspace, sr_stream_t s);

/* cuda_embedding_backward.cu: the backward op; the threads of a backward
 * block and its shared memory (aborts when a row is too wide). */
void sr_cu_emb_backward(struct sr_device *dev, const struct sr_emb_layout *layout,
                        const struct sr_emb_batch *batch, const float *dpooled,
                        const struct sr_emb_update *update, void *workspace, sr_stream_t s);
int sr_cu_emb_bwd_threads(const struct sr_emb_layout *layout, int G, size_t *smem);
/* cuda_embedding_sort.cu: the sort's temporary bytes for n keys of end_bit
 * bits (64-bit keys when key64); whether n kept ids need the sort; the sort
 * of the n kept ids (buffers 0) into buffers 1 on st; the group_ids op. */
size_t sr_cu_emb_sort_bytes(int64_t n, int end_bit, int key64);
int sr_cu_emb_sorts(const struct ws_view *v, int64_t n);
void sr_cu_emb_sort_kept(const struct ws_view *v, int n, int plain_vals, cudaStream_t st);
void sr_cu_emb_group_ids(struct sr_device *dev, const struct sr_emb_layout *layout,
                         const struct sr_emb_batch *batch, void *workspace, sr_stream_t s);

#endif
