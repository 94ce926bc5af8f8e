/*
 * The DCNv2 cross layer's elementwise parts on CUDA (the dcn_cross_forward and
 * dcn_cross_backward ops of device/ops_dense.h), on x0 = [z | emb] read in
 * place (n = (F+1) D columns, never concatenated).
 *
 * When D is a multiple of 4 and every pointer is 16-byte aligned (the models'
 * buffers are), a thread takes 4 columns as float4, which never straddle z
 * and emb. The forward is then one row per block row, with no division. The
 * backward makes du = dy x0 and sums its columns into the bias gradient in
 * the same pass, with the chunks and order of every other bias gradient
 * (cuda_column_sums.cuh), so du is read once instead of twice and the sums
 * are the bits the separate pass gave. Otherwise one thread per element, and
 * the bias gradient as a second pass (the dense ops' bias_grad).
 *
 * Every element is computed by the same expressions on both paths, so the
 * results do not depend on the path.
 */
#include <stdint.h>

#include "device/cuda/cuda_column_sums.cuh"
#include "device/cuda/cuda_internal.h"

extern "C" {
#include "device/ops_dense.h"
}

/* Columns c .. c+V-1 of x0 (V = 4: within z or within emb): the pointer to
 * row 0 and the row stride. */
__device__ static inline const float *dcn_x0_col(const float *z, const float *emb, int c, int F,
                                                 int D, size_t *stride)
{
    *stride = c < D ? (size_t)D : (size_t)F * D;
    return c < D ? z + c : emb + (c - D);
}

/* y = x0 (u + bias) + (xl or x0), V columns at a time. */
template <int V>
__device__ __forceinline__ void cross_forward(const float *x0, const float *u, const float *bias,
                                              const float *xl, float *y)
{
    const colvec<V> a = col_load<V>(x0), w = col_load<V>(u), b = col_load<V>(bias);
    const colvec<V> r = xl ? col_load<V>(xl) : a;
    colvec<V> out;
#pragma unroll
    for (int e = 0; e < V; e++)
        out.x[e] = a.x[e] * (w.x[e] + b.x[e]) + r.x[e];
    col_store<V>(y, out);
}

/* du = dy x0 (stored and returned); dx0 = dy (u + bias) [+ dy], stored or added. */
template <int V>
__device__ __forceinline__ colvec<V> cross_backward(const float *x0, const float *u,
                                                    const float *bias, const float *dy, int residual,
                                                    int accumulate, float *du, float *dx0)
{
    const colvec<V> g = col_load<V>(dy), w = col_load<V>(u), b = col_load<V>(bias);
    const colvec<V> a = col_load<V>(x0);
    colvec<V> d = accumulate ? col_load<V>(dx0) : colvec<V>{}, p;
#pragma unroll
    for (int e = 0; e < V; e++) {
        const float t = g.x[e] * (w.x[e] + b.x[e]) + (residual ? g.x[e] : 0.0f);
        d.x[e] = accumulate ? d.x[e] + t : t;
        p.x[e] = g.x[e] * a.x[e];
    }
    col_store<V>(dx0, d);
    col_store<V>(du, p);
    return p;
}

/* Rows blockIdx.y, + gridDim.y, ...; columns 4 (blockIdx.x blockDim.x + threadIdx.x). */
__global__ void dcn_forward4_kernel(const float *z, const float *emb, const float *u,
                                    const float *bias, const float *xl, int B, int F, int D,
                                    float *y)
{
    const int n = (F + 1) * D, c = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
    if (c >= n)
        return;
    size_t stride;
    const float *x0 = dcn_x0_col(z, emb, c, F, D, &stride);
    for (int b = blockIdx.y; b < B; b += gridDim.y) {
        const size_t i = (size_t)b * n + c;
        cross_forward<4>(x0 + b * stride, u + i, bias + c, xl ? xl + i : NULL, y + i);
    }
}

/* One thread per element of (B, n), grid-stride. */
__global__ void dcn_forward1_kernel(const float *z, const float *emb, const float *u,
                                    const float *bias, const float *xl, int F, int D,
                                    size_t total, float *y)
{
    const int n = (F + 1) * D;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t b = i / n;
        const int c = (int)(i - b * n);
        size_t stride;
        const float *x0 = dcn_x0_col(z, emb, c, F, D, &stride);
        cross_forward<1>(x0 + b * stride, u + i, bias + c, xl ? xl + i : NULL, y + i);
    }
}

/* The colsum grid over (B, n) at 4 columns a thread: du, dx0 and du's
 * partial column sums. */
__global__ void dcn_backward4_kernel(const float *z, const float *emb, const float *u,
                                     const float *bias, const float *dy, int B, int F, int D,
                                     int residual, int accumulate, int chunk, float *du, float *dz,
                                     float *demb, float *partial)
{
    const int n = (F + 1) * D, c = (blockIdx.x * 32 + threadIdx.x) * 4;
    const int r0 = blockIdx.y * chunk, r1 = min(B, r0 + chunk);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (c < n) {
        size_t stride;
        const float *x0 = dcn_x0_col(z, emb, c, F, D, &stride);
        float *dx0 = c < D ? dz + c : demb + (c - D);
        colsum_rows<4>(r0, r1, acc, [&](int r) {
            const size_t i = (size_t)r * n + c;
            return cross_backward<4>(x0 + r * stride, u + i, bias + c, dy + i, residual,
                                     accumulate, du + i, dx0 + r * stride);
        });
    }
    colsum_block_store<4>(acc, c, n, partial);
}

/* One thread per element of (B, n), grid-stride; no sums. */
__global__ void dcn_backward1_kernel(const float *z, const float *emb, const float *u,
                                     const float *bias, const float *dy, int F, int D,
                                     int residual, int accumulate, size_t total, float *du,
                                     float *dz, float *demb)
{
    const int n = (F + 1) * D;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t b = i / n;
        const int c = (int)(i - b * n);
        size_t stride;
        const float *x0 = dcn_x0_col(z, emb, c, F, D, &stride);
        float *dx0 = c < D ? dz + c : demb + (c - D);
        cross_backward<1>(x0 + b * stride, u + i, bias + c, dy + i, residual, accumulate, du + i,
                          dx0 + b * stride);
    }
}

/* float4 path: D a multiple of 4 and every pointer 16-byte aligned. */
static int dcn_vec4(int D, const void *const *p, int np)
{
    int ok = D % 4 == 0;
    for (int k = 0; k < np; k++)
        ok = ok && ((uintptr_t)p[k] & 15) == 0;
    return ok;
}

extern "C" void sr_cu_dcn_cross_forward(struct sr_device *dev, sr_stream_t s, const float *z,
                                        const float *emb, const float *u, const float *bias,
                                        const float *xl, int B, int F, int D, float *y)
{
    const int n = (F + 1) * D;
    if (!B || !n)
        return;
    cudaStream_t st = sr_cu_stream(dev, s);
    const void *p[] = {z, emb, u, bias, xl, y};
    if (dcn_vec4(D, p, 6)) {
        const int threads = 128;
        dim3 grid((n / 4 + threads - 1) / threads, B < 65535 ? B : 65535);
        dcn_forward4_kernel<<<grid, threads, 0, st>>>(z, emb, u, bias, xl, B, F, D, y);
    } else {
        const size_t total = (size_t)B * n;
        dcn_forward1_kernel<<<sr_cu_blocks((long long)total, 256), 256, 0, st>>>(
            z, emb, u, bias, xl, F, D, total, y);
    }
    SR_CU_LAUNCHED();
}

extern "C" void sr_cu_dcn_cross_backward(struct sr_device *dev, sr_stream_t s, const float *z,
                                         const float *emb, const float *u, const float *bias,
                                         const float *dy, int B, int F, int D, int residual,
                                         int accumulate, float *du, float *dbias, float *dz,
                                         float *demb)
{
    const int n = (F + 1) * D;
    if (!n)
        return;
    cudaStream_t st = sr_cu_stream(dev, s);
    if (!B) {
        SR_CU_CHECK(cudaMemsetAsync(dbias, 0, sizeof(float) * n, st));
        return;
    }
    const void *p[] = {z, emb, u, bias, dy, du, dz, demb};
    if (dcn_vec4(D, p, 8)) {
        const struct sr_cu_colsum cs = sr_cu_colsum_plan(dev, B, n, 4);
        dim3 grid(cs.col_blocks, cs.chunks), block(32, SUM_TY);
        dcn_backward4_kernel<<<grid, block, 0, st>>>(z, emb, u, bias, dy, B, F, D, residual,
                                                     accumulate, cs.chunk, du, dz, demb,
                                                     cs.partial);
        SR_CU_LAUNCHED();
        sr_cu_colsum_finish(st, &cs, n, dbias);
        return;
    }
    const size_t total = (size_t)B * n;
    dcn_backward1_kernel<<<sr_cu_blocks((long long)total, 256), 256, 0, st>>>(
        z, emb, u, bias, dy, F, D, residual, accumulate, total, du, dz, demb);
    SR_CU_LAUNCHED();
    sr_cuda_dense_ops.bias_grad(dev, s, du, B, n, dbias); /* fixed-order column sums */
}
