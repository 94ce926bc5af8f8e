/*
 * CUDA dense optimizer ops (the table of device/ops_optim.h): elementwise
 * SGD, Adagrad and Adam over the flat parameter block, one grid-stride
 * kernel each. The learning rate and Adam's step are device scalars read by
 * the kernel (struct sr_step_scalars, optim.h), so a queued or captured step is never stale.
 * Element i depends only on element i, and the build turns off FMA
 * contraction (-fmad=false), so each update is the CPU's bit for bit.
 */
#include <math.h>
#include <stdio.h>

#include "device/cuda/cuda_internal.h"

extern "C" {
#include "device/ops_optim.h"
}

#define THREADS 256

__global__ void sgd_kernel(float *w, const float *g, size_t n, const float *lr_dev)
{
    const float lr = *lr_dev;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        w[i] -= lr * g[i];
}

__global__ void adagrad_kernel(float *w, float *sum, const float *g, size_t n, const float *lr_dev,
                               float eps)
{
    const float lr = *lr_dev;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float gi = g[i];
        float si = sum[i] + gi * gi;
        sum[i] = si;
        w[i] -= lr * gi / (sqrtf(si) + eps);
    }
}

__global__ void adam_kernel(float *w, float *m, float *v, const float *g, size_t n,
                            const float *lr_dev, float beta1, float beta2, float eps,
                            const int64_t *step_dev)
{
    const float lr = *lr_dev;
    const int64_t step = *step_dev;
    if (step < 1) {
        if (blockIdx.x == 0 && threadIdx.x == 0)
            printf("shardrec: adam step %lld < 1\n", (long long)step);
        __trap();
    }
    const float bc1 = (float)(1.0 - pow((double)beta1, (double)step));
    const float bc2 = (float)(1.0 - pow((double)beta2, (double)step));
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float gi = g[i];
        float mi = beta1 * m[i] + (1.0f - beta1) * gi;
        float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        w[i] -= lr * (mi / bc1) / (sqrtf(vi / bc2) + eps);
    }
}

static unsigned blocks_for(size_t n)
{
    size_t b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b < 1 ? 1 : b > 8192 ? 8192 : b);
}

static void cu_sgd_step(struct sr_device *dev, sr_stream_t s, float *w, const float *g, size_t n,
                        const float *lr)
{
    if (!n)
        return;
    sgd_kernel<<<blocks_for(n), THREADS, 0, sr_cu_stream(dev, s)>>>(w, g, n, lr);
    SR_CU_LAUNCHED();
}

static void cu_adagrad_step(struct sr_device *dev, sr_stream_t s, float *w, float *sum,
                            const float *g, size_t n, const float *lr, float eps)
{
    if (!n)
        return;
    adagrad_kernel<<<blocks_for(n), THREADS, 0, sr_cu_stream(dev, s)>>>(w, sum, g, n, lr, eps);
    SR_CU_LAUNCHED();
}

static void cu_adam_step(struct sr_device *dev, sr_stream_t s, float *w, float *m, float *v,
                         const float *g, size_t n, const float *lr, float beta1, float beta2,
                         float eps, const int64_t *step)
{
    if (!n)
        return;
    adam_kernel<<<blocks_for(n), THREADS, 0, sr_cu_stream(dev, s)>>>(w, m, v, g, n, lr, beta1,
                                                                      beta2, eps, step);
    SR_CU_LAUNCHED();
}

extern "C" const struct sr_optim_ops sr_cuda_optim_ops = {
    .sgd_step = cu_sgd_step,
    .adagrad_step = cu_adagrad_step,
    .adam_step = cu_adam_step,
};
