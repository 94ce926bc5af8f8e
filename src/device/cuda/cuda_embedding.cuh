/*
 * What the CUDA embedding ops share (the ops: device/ops_embedding.h): the
 * layout as the kernels see it, the workspace's parts, the packed value of a
 * kept id, and the three files' entry points.
 *
 *   cuda_embedding.cu           the workspace, init_uniform, fill, the op table
 *   cuda_embedding_forward.cu   the pooled forward (keep_ids: the ids for backward)
 *   cuda_embedding_backward.cu  the sort and the fused backward, hot rows split
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

extern "C" {
#include "device/ops_embedding.h"
}

#define FWD_THREADS         256
#define BWD_THREADS         128
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

/* A kept id's value: the pooled offset its gradient comes from, and its scale. */
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

/* cuda_embedding.cu */
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

/* cuda_embedding_backward.cu: the backward op; the sort's temporary bytes for
 * n keys of end_bit bits (64-bit keys when key64); the threads of a backward
 * block and its shared memory (aborts when a row is too wide). */
void sr_cu_emb_backward(struct sr_device *dev, const struct sr_emb_layout *layout,
                        const struct sr_emb_batch *batch, const float *dpooled,
                        const struct sr_emb_update *update, void *workspace, sr_stream_t s);
size_t sr_cu_emb_sort_bytes(int64_t n, int end_bit, int key64);
int sr_cu_emb_bwd_threads(const struct sr_emb_layout *layout, int G, size_t *smem);

#endif
