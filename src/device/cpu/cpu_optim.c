/*
 * CPU dense optimizer ops (the table of device/ops_optim.h): elementwise
 * SGD, Adagrad and Adam over flat fp32 arrays, split over threads with a
 * static schedule. Each element's update depends only on that element, so
 * results are bit-exact whatever the thread count. The learning rate and the
 * step are read from (host-visible) device memory when the op runs.
 */
#include <math.h>

#include "shardrec/error.h"
#include "device/cpu/cpu_device.h"
#include "device/ops_optim.h"

#ifdef _OPENMP
#define OMP_FOR _Pragma("omp parallel for schedule(static)")
#else
#define OMP_FOR
#endif

static void cpu_sgd_step(struct sr_device *dev, sr_stream_t s, float *w, const float *g, size_t n,
                         const float *lr_dev)
{
    const float lr = *lr_dev;
    OMP_FOR
    for (size_t i = 0; i < n; i++)
        w[i] -= lr * g[i];
}

static void cpu_adagrad_step(struct sr_device *dev, sr_stream_t s, float *w, float *sum,
                             const float *g, size_t n, const float *lr_dev, float eps)
{
    const float lr = *lr_dev;
    OMP_FOR
    for (size_t i = 0; i < n; i++) {
        sum[i] += g[i] * g[i];
        w[i] -= lr * g[i] / (sqrtf(sum[i]) + eps);
    }
}

static void cpu_adam_step(struct sr_device *dev, sr_stream_t s, float *w, float *m, float *v,
                          const float *g, size_t n, const float *lr_dev, float beta1, float beta2,
                          float eps, const int64_t *step_dev)
{
    const float lr = *lr_dev;
    const int64_t step = *step_dev;
    SR_ASSERT(step >= 1);
    /* Bias corrections in double: 1 - b^t loses digits in float for small t. */
    float bc1 = (float)(1.0 - pow(beta1, (double)step));
    float bc2 = (float)(1.0 - pow(beta2, (double)step));
    OMP_FOR
    for (size_t i = 0; i < n; i++) {
        m[i] = beta1 * m[i] + (1.0f - beta1) * g[i];
        v[i] = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
        w[i] -= lr * (m[i] / bc1) / (sqrtf(v[i] / bc2) + eps);
    }
}

const struct sr_optim_ops sr_cpu_optim_ops = {
    .sgd_step = cpu_sgd_step,
    .adagrad_step = cpu_adagrad_step,
    .adam_step = cpu_adam_step,
};
