/*
 * Profile of the dense model's step on the CPU backend: forward + backward of
 * the workload-K dense layers (bottom 13-512-256-64-16, interaction of 26
 * features of dim 16, top 367-512-256-1) at batch 2048 on fixed inputs, with
 * the time of every dense op. It wraps the CPU device's dense op table in
 * timing shims (a copy of the table; the library is untouched), so the split
 * shown is exactly what sr_dlrm_forward/backward call.
 *
 * Build and run (2 cores, as BENCH.md's workload K):
 *   make lib && cc -O3 -march=native -fopenmp -Iinclude -Isrc bench/dense_profile.c \
 *       build/libshardrec.a -lopenblas -lcjson -lm -o build/dense_profile
 *   OMP_NUM_THREADS=2 build/dense_profile [steps]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "shardrec/dlrm.h"
#include "shardrec/rng.h"
#include "device/ops_dense.h"

enum {
    OP_GEMM_FWD,
    OP_GEMM_DW,
    OP_GEMM_DX,
    OP_BIAS_RELU,
    OP_RELU_BIAS_BWD,
    OP_INTER_FWD,
    OP_INTER_BWD,
    OP_LOSS,
    NUM_OPS
};
static const char *op_names[NUM_OPS] = {"gemm y=x.W^T",    "gemm dW=dy^T.x", "gemm dx=dy.W",
                                        "bias+relu fwd",   "relu+bias bwd",  "interaction fwd",
                                        "interaction bwd", "bce loss"};
static double op_time[NUM_OPS];
static const struct sr_dense_ops *cpu_ops;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void gemm(struct sr_device *d, sr_stream_t s, enum sr_transpose ta, enum sr_transpose tb,
                 int m, int n, int k, float alpha, const float *a, int lda, const float *b, int ldb,
                 float beta, float *c, int ldc)
{
    double t = now();
    cpu_ops->gemm(d, s, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    op_time[ta ? OP_GEMM_DW : tb ? OP_GEMM_FWD : OP_GEMM_DX] += now() - t;
}

static void bias_relu(struct sr_device *d, sr_stream_t s, float *y, const float *b, int r, int c,
                      int relu)
{
    double t = now();
    cpu_ops->bias_relu_forward(d, s, y, b, r, c, relu);
    op_time[OP_BIAS_RELU] += now() - t;
}

/* The linear forward as the CPU runs it (the GEMM, then the fused pass),
 * through the two shims above so each part keeps its own line. */
static void linear_fwd(struct sr_device *d, sr_stream_t s, const float *x, const float *w,
                       const float *bias, int B, int in, int out, int relu, float *y)
{
    gemm(d, s, SR_NO_TRANS, SR_TRANS, B, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
    bias_relu(d, s, y, bias, B, out, relu);
}

static void relu_bias_bwd(struct sr_device *d, sr_stream_t s, const float *y, float *dy, int r,
                          int c, int relu, float *db)
{
    double t = now();
    cpu_ops->relu_bias_backward(d, s, y, dy, r, c, relu, db);
    op_time[OP_RELU_BIAS_BWD] += now() - t;
}

static void inter_fwd(struct sr_device *d, sr_stream_t s, const float *z, const float *e, int B,
                      int F, int D, float *out)
{
    double t = now();
    cpu_ops->interaction_forward(d, s, z, e, B, F, D, out);
    op_time[OP_INTER_FWD] += now() - t;
}

static void inter_bwd(struct sr_device *d, sr_stream_t s, const float *z, const float *e,
                      const float *g, int B, int F, int D, float *dz, float *de)
{
    double t = now();
    cpu_ops->interaction_backward(d, s, z, e, g, B, F, D, dz, de);
    op_time[OP_INTER_BWD] += now() - t;
}

static void loss(struct sr_device *d, sr_stream_t s, const float *l, const float *y, const float *m,
                 int n, float scale, float *dl, float *sum)
{
    double t = now();
    cpu_ops->bce_with_logits(d, s, l, y, m, n, scale, dl, sum);
    op_time[OP_LOSS] += now() - t;
}

int main(int argc, char **argv)
{
    struct sr_dlrm_config cfg = {.num_dense = 13,
                                 .bot_mlp = {13, 512, 256, 64, 16},
                                 .n_bot = 5,
                                 .top_mlp = {512, 256, 1},
                                 .n_top = 3,
                                 .num_sparse = 26,
                                 .embedding_dim = 16};
    enum { B = 2048, WARMUP = 3 };
    int steps = argc > 1 ? atoi(argv[1]) : 30;
    static struct sr_device dev;
    static struct sr_dense_ops timed;
    dev = *sr_device_cpu();
    cpu_ops = dev.dense;
    timed = *cpu_ops;
    timed.gemm = gemm;
    timed.bias_relu_forward = bias_relu;
    timed.linear_forward = linear_fwd;
    timed.relu_bias_backward = relu_bias_bwd;
    timed.interaction_forward = inter_fwd;
    timed.interaction_backward = inter_bwd;
    timed.bce_with_logits = loss;
    dev.dense = &timed;

    struct sr_dlrm *m;
    if (sr_dlrm_init(&m, &dev, &cfg, B, 1) != 0)
        return 1;
    float *dense = malloc(sizeof(float) * B * 13), *pooled = malloc(sizeof(float) * B * 416);
    float *dpooled = malloc(sizeof(float) * B * 416), *logits = malloc(sizeof(float) * B);
    float *labels = malloc(sizeof(float) * B);
    for (int i = 0; i < B * 13; i++)
        dense[i] = (float)(3.0 * sr_rng_uniform(1, 1, i));
    for (int i = 0; i < B * 416; i++)
        pooled[i] = (float)(0.1 * sr_rng_uniform(1, 2, i) - 0.05);
    for (int i = 0; i < B; i++)
        labels[i] = (float)(i % 4 == 0);
    double total = 0.0;
    for (int s = 0; s < WARMUP + steps; s++) {
        if (s == WARMUP) {
            total = 0.0;
            for (int i = 0; i < NUM_OPS; i++)
                op_time[i] = 0.0;
        }
        double t = now();
        sr_dlrm_forward(m, NULL, dense, pooled, B, logits);
        sr_dlrm_backward(m, NULL, labels, NULL, B, 1.0f / B, dpooled);
        total += now() - t;
    }
    double gflop = 3.0 * sr_dlrm_flops_per_sample(&cfg) * B / 1e9;
    printf("dense forward+backward, K, batch %d: %.2f ms/step (%.0f GFLOP/s)\n", B,
           1e3 * total / steps, gflop * steps / total);
    for (int i = 0; i < NUM_OPS; i++)
        printf("  %-18s %7.2f ms  %5.1f%%\n", op_names[i], 1e3 * op_time[i] / steps,
               100.0 * op_time[i] / total);
    sr_dlrm_free(m);
    free(dense);
    free(pooled);
    free(dpooled);
    free(logits);
    free(labels);
    return 0;
}
