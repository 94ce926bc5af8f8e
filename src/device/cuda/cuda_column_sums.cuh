/*
 * Fixed-order column sums (bias gradients) of a (rows, cols) row-major matrix,
 * shared by the kernels that make the matrix and sum it in one pass
 * (cuda_dense.cu's ReLU + bias backward, cuda_dcn.cu's cross-layer backward).
 *
 * Pass 1: block (x, y) sums rows [y*chunk, (y+1)*chunk) of columns
 * [32Vx, 32Vx + 32V) into partial[y][col]. Threads (tx, ty) take columns
 * 32Vx + V tx .. + V (V = 4: float4, when cols and the pointers allow) and
 * rows ty, ty + SUM_TY, ... of the chunk, 4 rows' loads in flight, added in
 * row order (colsum_rows); then the SUM_TY row lanes are added in a fixed
 * tree (colsum_block_store). Pass 2 (sr_cu_colsum_finish): one thread per
 * column adds the partials in chunk order. The chunking depends only on rows,
 * cols, V and the GPU, so every kernel that sums with it gives the same bits.
 */
#ifndef SHARDREC_CUDA_COLUMN_SUMS_CUH
#define SHARDREC_CUDA_COLUMN_SUMS_CUH

#include "device/cuda/cuda_internal.h"

#define SUM_TY 8

template <int V> struct colvec {
    float x[V];
};

template <int V> __device__ __forceinline__ colvec<V> col_load(const float *p)
{
    colvec<V> v;
    if constexpr (V == 4) {
        const float4 t = *(const float4 *)p;
        v.x[0] = t.x, v.x[1] = t.y, v.x[2] = t.z, v.x[3] = t.w;
    } else {
        v.x[0] = *p;
    }
    return v;
}

template <int V> __device__ __forceinline__ void col_store(float *p, colvec<V> v)
{
    if constexpr (V == 4)
        *(float4 *)p = make_float4(v.x[0], v.x[1], v.x[2], v.x[3]);
    else
        *p = v.x[0];
}

/* acc += row(r) over this thread's rows of [r0, r1), in row order, where
 * row(r) returns the V values of row r at the thread's columns (and may store
 * what it makes on the way). */
template <int V, class Row>
__device__ __forceinline__ void colsum_rows(int r0, int r1, float acc[V], Row row)
{
    int r = r0 + threadIdx.y;
    for (; r + 3 * SUM_TY < r1; r += 4 * SUM_TY) {
        colvec<V> v[4];
#pragma unroll
        for (int u = 0; u < 4; u++)
            v[u] = row(r + u * SUM_TY);
#pragma unroll
        for (int u = 0; u < 4; u++)
#pragma unroll
            for (int e = 0; e < V; e++)
                acc[e] += v[u].x[e];
    }
    for (; r < r1; r += SUM_TY) {
        const colvec<V> v = row(r);
#pragma unroll
        for (int e = 0; e < V; e++)
            acc[e] += v.x[e];
    }
}

/* The block's SUM_TY lanes of acc added in a fixed tree, into its partial row. */
template <int V>
__device__ __forceinline__ void colsum_block_store(const float acc[V], int c, int cols,
                                                   float *partial)
{
    __shared__ float lane[SUM_TY][32 * V + 1];
#pragma unroll
    for (int e = 0; e < V; e++)
        lane[threadIdx.y][threadIdx.x * V + e] = acc[e];
    __syncthreads();
    for (int half = SUM_TY / 2; half > 0; half /= 2) {
        if (threadIdx.y < half)
#pragma unroll
            for (int e = 0; e < V; e++)
                lane[threadIdx.y][threadIdx.x * V + e] +=
                    lane[threadIdx.y + half][threadIdx.x * V + e];
        __syncthreads();
    }
    if (threadIdx.y == 0 && c < cols)
#pragma unroll
        for (int e = 0; e < V; e++)
            partial[(size_t)blockIdx.y * cols + c + e] = lane[0][threadIdx.x * V + e];
}

/* Pass 1's grid: (col_blocks, chunks) blocks of (32, SUM_TY) threads, each
 * summing `chunk` rows. */
struct sr_cu_colsum {
    int col_blocks, chunks, chunk;
    float *partial; /* chunks x cols, the backend's scratch */
};

extern "C" {
/* The grid for rows x cols at V columns a thread (rows >= 1), and the
 * scratch for its partials (cuda_dense.cu). */
struct sr_cu_colsum sr_cu_colsum_plan(struct sr_device *dev, int rows, int cols, int V);
/* Pass 2 on stream st: dbias[c] = plan's partials of column c in chunk order. */
void sr_cu_colsum_finish(cudaStream_t st, const struct sr_cu_colsum *plan, int cols, float *dbias);
}

#endif
