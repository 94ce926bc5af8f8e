/*
 * The DLRM dot interaction on CUDA (the interaction_forward and
 * interaction_backward ops of device/ops_dense.h). One block per sample keeps
 * X = [z, e_1..e_F] ((F+1) x D) in shared memory; forward threads take pairs
 * (i > j) in output order and backward threads take elements of dX, each a
 * dot in fixed order, so reruns are bit-identical.
 */
#include <math.h>
#include <stdint.h>

#include "device/cuda/cuda_internal.h"

extern "C" {
#include "device/ops_dense.h"
}

/* Pair p (output order) of the strict lower triangle: row i >= 1, column j < i,
 * p = i(i-1)/2 + j. */
__device__ static inline void pair_of(int p, int *i, int *j)
{
    int r = (int)((1.0 + sqrt(1.0 + 8.0 * p)) * 0.5);
    while (r * (r - 1) / 2 > p)
        r--;
    while ((r + 1) * r / 2 <= p)
        r++;
    *i = r;
    *j = p - r * (r - 1) / 2;
}

/* Rows of X in shared memory are SD floats apart: D + 4 when D is a multiple
 * of 4 (float4 reads stay aligned, and rows 4 banks apart keep a quarter
 * warp's reads of different rows on different banks), else D + 1. */
/* Loads X = [z_b, e_b1..e_bF] of sample b into shared memory x ((F+1) rows,
 * SD floats apart). */
__device__ static inline void load_x(const float *z, const float *emb, int b, int F, int D, int SD,
                                     float *x)
{
    const float *zb = z + (size_t)b * D;
    const float *eb = emb + (size_t)b * F * D;
    for (int t = threadIdx.x; t < D; t += blockDim.x)
        x[t] = zb[t];
    for (int t = threadIdx.x; t < F * D; t += blockDim.x)
        x[(t / D + 1) * SD + t % D] = eb[t];
}

/* <X_i, X_j>: in order of d, 4 lanes at a time (V = 4: float4 reads; lane
 * sums combined in a fixed order) or one (V = 1). */
template <int V>
__device__ static inline float dot_rows(const float *x, int i, int j, int D, int SD)
{
    const float *a = x + (size_t)i * SD, *b = x + (size_t)j * SD;
    if constexpr (V == 4) {
        float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        for (int d = 0; d < D; d += 4) {
            const float4 u = *(const float4 *)(a + d), v = *(const float4 *)(b + d);
            acc.x += u.x * v.x;
            acc.y += u.y * v.y;
            acc.z += u.z * v.z;
            acc.w += u.w * v.w;
        }
        return (acc.x + acc.y) + (acc.z + acc.w);
    } else {
        float acc = 0.0f;
        for (int d = 0; d < D; d++)
            acc += a[d] * b[d];
        return acc;
    }
}

template <int V>
__global__ void interaction_forward_kernel(const float *z, const float *emb, int F, int D,
                                           float *out)
{
    extern __shared__ float4 x4[];
    float *x = (float *)x4;
    const int b = blockIdx.x, SD = V == 4 ? D + 4 : D + 1;
    const int npairs = F * (F + 1) / 2, width = D + npairs;
    load_x(z, emb, b, F, D, SD, x);
    __syncthreads();
    float *ob = out + (size_t)b * width;
    for (int t = threadIdx.x; t < D; t += blockDim.x)
        ob[t] = x[t];
    for (int p = threadIdx.x; p < npairs; p += blockDim.x) {
        int i, j;
        pair_of(p, &i, &j);
        ob[D + p] = dot_rows<V>(x, i, j, D, SD);
    }
}

/* dX[i][d] = [i == 0] dout[d] + Σ_{j != i} G[i][j] X[j][d], G the symmetric
 * matrix of the pair gradients, j ascending; a thread computes V consecutive
 * d of one row. */
template <int V>
__global__ void interaction_backward_kernel(const float *z, const float *emb, const float *dout,
                                            int F, int D, float *dz, float *demb)
{
    extern __shared__ float4 x4[];
    float *x = (float *)x4;
    const int b = blockIdx.x, R = F + 1, SD = V == 4 ? D + 4 : D + 1;
    const int npairs = F * (F + 1) / 2, width = D + npairs;
    float *g = x + (size_t)R * SD; /* R x R */
    load_x(z, emb, b, F, D, SD, x);
    const float *gb = dout + (size_t)b * width;
    for (int p = threadIdx.x; p < npairs; p += blockDim.x) {
        int i, j;
        pair_of(p, &i, &j);
        const float v = gb[D + p];
        g[i * R + j] = v;
        g[j * R + i] = v;
    }
    for (int i = threadIdx.x; i < R; i += blockDim.x)
        g[i * R + i] = 0.0f;
    __syncthreads();
    const int per_row = D / V;
    for (int t = threadIdx.x; t < R * per_row; t += blockDim.x) {
        const int i = t / per_row, d = (t % per_row) * V;
        float *dst = i == 0 ? dz + (size_t)b * D + d
                            : demb + (size_t)b * F * D + (size_t)(i - 1) * D + d;
        if constexpr (V == 4) {
            float4 acc = i == 0 ? make_float4(gb[d], gb[d + 1], gb[d + 2], gb[d + 3])
                                : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            for (int j = 0; j < R; j++) {
                const float gij = g[i * R + j];
                const float4 xj = *(const float4 *)(x + (size_t)j * SD + d);
                acc.x += gij * xj.x;
                acc.y += gij * xj.y;
                acc.z += gij * xj.z;
                acc.w += gij * xj.w;
            }
            *(float4 *)dst = acc;
        } else {
            float acc = i == 0 ? gb[d] : 0.0f;
            for (int j = 0; j < R; j++)
                acc += g[i * R + j] * x[(size_t)j * SD + d];
            *dst = acc;
        }
    }
}

static int interaction_threads(int F, int D)
{
    int work = (F + 1) * D;
    return work >= 256 ? 256 : work >= 128 ? 128 : 64;
}

/* The backward's float4 path: D a multiple of 4 and dz, demb 16-byte aligned
 * (their rows then are too). */
static int interaction_vec(const void *dz, const void *demb, int D)
{
    return D % 4 == 0 && (((uintptr_t)dz | (uintptr_t)demb) & 15) == 0;
}

extern "C" void sr_cu_interaction_forward(struct sr_device *dev, sr_stream_t s, const float *z,
                                          const float *emb, int B, int F, int D, float *out)
{
    if (B == 0)
        return;
    const int v4 = D % 4 == 0;
    size_t shm = sizeof(float) * (size_t)(F + 1) * (size_t)(v4 ? D + 4 : D + 1);
    SR_ASSERT(shm <= 48 * 1024);
    cudaStream_t st = sr_cu_stream(dev, s);
    if (v4)
        interaction_forward_kernel<4><<<B, interaction_threads(F, D), shm, st>>>(z, emb, F, D, out);
    else
        interaction_forward_kernel<1><<<B, interaction_threads(F, D), shm, st>>>(z, emb, F, D, out);
    SR_CU_LAUNCHED();
}

extern "C" void sr_cu_interaction_backward(struct sr_device *dev, sr_stream_t s, const float *z,
                                           const float *emb, const float *dout, int B, int F,
                                           int D, float *dz, float *demb)
{
    if (B == 0)
        return;
    const int v4 = interaction_vec(dz, demb, D);
    const int SD = v4 ? D + 4 : D + 1;
    size_t shm = sizeof(float) * ((size_t)(F + 1) * SD + (size_t)(F + 1) * (F + 1));
    SR_ASSERT(shm <= 48 * 1024);
    cudaStream_t st = sr_cu_stream(dev, s);
    if (v4)
        interaction_backward_kernel<4><<<B, interaction_threads(F, D), shm, st>>>(z, emb, dout, F, D,
                                                                                  dz, demb);
    else
        interaction_backward_kernel<1><<<B, interaction_threads(F, D), shm, st>>>(z, emb, dout, F, D,
                                                                                  dz, demb);
    SR_CU_LAUNCHED();
}
