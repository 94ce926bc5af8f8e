/*
 * Dense compute ops: the table a backend fills so that the model layer
 * (src/model/) can run linear layers, ReLU, the DLRM dot interaction and the
 * loss without touching device memory itself.
 *
 * Every op takes (dev, stream, ...) and is stream-ordered: on the CPU it has
 * finished when it returns; on a GPU it is queued on `s` and its outputs may
 * be read only after the stream is synchronised. All pointers are device
 * memory of `dev` unless said otherwise. Matrices are row-major fp32.
 *
 * Determinism: the CPU backend splits work with static OpenMP schedules and
 * never reduces across threads in a run-dependent order, so reruns with the
 * same thread count are bit-exact. Bad shapes are caller bugs (SR_ASSERT).
 */
#ifndef SHARDREC_OPS_DENSE_H
#define SHARDREC_OPS_DENSE_H

#include "shardrec/device.h"

enum sr_transpose { SR_NO_TRANS = 0, SR_TRANS = 1 };

struct sr_dense_ops {
    /* C (m, n) = alpha * op(A) * op(B) + beta * C. op(A) is (m, k), op(B) is
     * (k, n); lda, ldb, ldc are the row strides of A, B, C as stored. With
     * beta == 0, C is overwritten (its old contents, even NaN, are ignored). */
    void (*gemm)(struct sr_device *dev, sr_stream_t s, enum sr_transpose trans_a,
                 enum sr_transpose trans_b, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc);

    /* y (rows, cols) += bias (cols) broadcast over rows, then y = max(y, 0)
     * when relu. In place: the linear layer's epilogue in one pass. */
    void (*bias_relu_forward)(struct sr_device *dev, sr_stream_t s, float *y, const float *bias,
                              int rows, int cols, int relu);

    /* y (n) = max(x (n), 0). y may equal x. */
    void (*relu_forward)(struct sr_device *dev, sr_stream_t s, const float *x, float *y, size_t n);

    /* dy (n) *= (y > 0), in place; y is the ReLU's output. */
    void (*relu_backward)(struct sr_device *dev, sr_stream_t s, const float *y, float *dy,
                          size_t n);

    /* dbias (cols) = column sums of dy (rows, cols); overwrites dbias. */
    void (*bias_grad)(struct sr_device *dev, sr_stream_t s, const float *dy, int rows, int cols,
                      float *dbias);

    /* The fused backward epilogue of a linear layer followed by ReLU: first
     * dy (rows, cols) *= (y > 0) in place when relu, then dbias = column sums
     * of the masked dy (overwritten). */
    void (*relu_bias_backward)(struct sr_device *dev, sr_stream_t s, const float *y, float *dy,
                               int rows, int cols, int relu, float *dbias);

    /* DLRM dot interaction of B samples. z (B, D) is the bottom MLP output,
     * emb (B, F*D) the pooled embeddings in feature order. With
     * X = [z, e_1, ..., e_F] (F+1 vectors of D), out (B, D + F(F+1)/2) is
     *   concat(z, <X_i, X_j> for i in 1..F for j in 0..i-1)
     * the strict lower triangle of X·Xᵀ row by row, as the DLRM reference. */
    void (*interaction_forward)(struct sr_device *dev, sr_stream_t s, const float *z,
                                const float *emb, int B, int F, int D, float *out);

    /* Backward of interaction_forward: given dout (B, D + F(F+1)/2), writes
     * (overwrites) dz (B, D) and demb (B, F*D). */
    void (*interaction_backward)(struct sr_device *dev, sr_stream_t s, const float *z,
                                 const float *emb, const float *dout, int B, int F, int D,
                                 float *dz, float *demb);

    /* Binary cross-entropy with logits, fused with its gradient. For each of
     * the n samples with logit x, label y in {0,1}, weight m (mask; NULL means
     * all 1):
     *   loss_i = m * (max(x, 0) - x*y + log1p(exp(-|x|)))   (numerically stable)
     *   dlogits_i = m * (sigmoid(x) - y) * scale
     * loss_sum (1 float, device) = Σ loss_i, summed in double in a fixed
     * order and rounded to fp32 once. It stays in device memory: the trainer
     * all-reduces it with the last gradient bucket and reads it back only
     * when a log line asks (src/train/loss_ring.h). */
    void (*bce_with_logits)(struct sr_device *dev, sr_stream_t s, const float *logits,
                            const float *labels, const float *mask, int n, float scale,
                            float *dlogits, float *loss_sum);
};

#endif
